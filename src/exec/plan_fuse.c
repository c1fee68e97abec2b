/* Written-out transformer layers run as one fused step (plan_fuse.h). Exporters before opset 17
 * (torch.onnx of nn.LayerNorm and nn.GELU) write:
 *
 *   LayerNorm: m = ReduceMean(x, last axis); d = Sub(x, m); q = Pow(d, 2); v = ReduceMean(q);
 *              s = Sqrt(Add(v, eps)); n = Div(d, s) or Mul(d, Reciprocal(s));
 *              then optionally Mul(n, scale) and Add(., bias), scale and bias constants of the
 *              last dim's length (either operand order in Add / Mul)
 *   GELU:      h = Div(x, c1) or Mul(x, c1); a = Add(Erf(h), c2);
 *              y = Mul(Mul(x, a), c3) or Mul(Mul(x, c3), a) (c1, c2, c3 scalar constants)
 *   attention: s = MatMul(q, kt); optionally Mul(s, k) or Div(s, k) (k a scalar constant);
 *              p = Softmax(s, last axis); o = MatMul(p, v)
 *
 * Every tensor between x and the result must be read only by the next layer of the form, not be
 * kept (observed, a graph output) and be float32 in plain layout; x stays (other layers read it). */
#include "exec/plan_fuse.h"

#include <stdlib.h>
#include <string.h>

#include "exec/kernels/elementwise_mvec.h"
#include "exec/kernels/fused_transformer.h"
#include "graph/qkind.h"

#define MAX_PARTS 10

static const calq_node *node_of(const calq_fuse_in *f, int s)
{
    return &f->p->g->nodes[f->old[s].node];
}

static bool is_op(const calq_node *n, const char *op)
{
    return !n->domain[0] && strcmp(n->op_type, op) == 0 && n->n_outputs == 1 && n->outputs[0] >= 0;
}

bool calq__fuse_kept(const calq_fuse_in *f, int v)
{
    int o = f->p->vals[v].origin;
    return f->kept[o >= 0 ? o : v];
}

static bool plain_f32(const calq_fuse_in *f, int v)
{
    const calq_plan_value *pv = &f->p->vals[v];
    return pv->t.dtype == CALQ_DTYPE_FLOAT32 && pv->layout == CALQ_LAYOUT_PLAIN &&
           (pv->kind == CALQ_PV_ARENA || pv->kind == CALQ_PV_INPUT);
}

/* The one old step after `after` that reads v, when nothing else does and v is not kept; -1
 * otherwise. */
static int sole_reader(const calq_fuse_in *f, int v, int after)
{
    if (v < 0 || f->uses[v] != 1 || calq__fuse_kept(f, v) || !plain_f32(f, v)) return -1;
    int t = f->consumer[v];
    if (t <= after || f->absorbed[t] || f->old[t].dynamic) return -1;
    return t;
}

const calq_tensor *calq__fuse_const(const calq_fuse_in *f, int v)
{
    const calq_plan_value *pv = &f->p->vals[v];
    if ((pv->kind != CALQ_PV_CONST && pv->kind != CALQ_PV_FOLDED) || pv->t.dtype != CALQ_DTYPE_FLOAT32 || !pv->t.data)
        return NULL;
    return &pv->t;
}

/* Binary node n reads v and a one-element float32 constant of rank <= rank: its value. */
static bool scalar_operand(const calq_fuse_in *f, const calq_node *n, int v, int rank, float *c, bool *v_first)
{
    if (n->n_inputs != 2 || (n->inputs[0] != v && n->inputs[1] != v)) return false;
    *v_first = n->inputs[0] == v;
    const calq_tensor *t = calq__fuse_const(f, n->inputs[*v_first ? 1 : 0]);
    if (!t || t->dtype != CALQ_DTYPE_FLOAT32 || calq_tensor_numel(t) != 1 || t->ndim > rank) return false;
    *c = *(const float *)t->data;
    return true;
}

/* Binary node n reads v and a float32 constant of len values along the last axis: its value. */
static int vector_operand(const calq_fuse_in *f, const calq_node *n, int v, int rank, int64_t len)
{
    if (n->n_inputs != 2 || (n->inputs[0] != v && n->inputs[1] != v) || n->inputs[0] == n->inputs[1]) return -1;
    int o = n->inputs[n->inputs[0] == v ? 1 : 0];
    const calq_tensor *t = calq__fuse_const(f, o);
    if (!t || t->dtype != CALQ_DTYPE_FLOAT32 || t->ndim < 1 || t->ndim > rank || t->dims[t->ndim - 1] != len ||
        calq_tensor_numel(t) != len)
        return -1;
    return o;
}

static bool same_shape(const calq_fuse_in *f, int a, int b)
{
    const calq_tensor *x = &f->p->vals[a].t, *y = &f->p->vals[b].t;
    return calq__shape_equal(x->dims, x->ndim, y->dims, y->ndim);
}

/* n = ReduceMean over the last axis of its float32 input with the dim kept: *x its input. */
static bool row_mean(const calq_fuse_in *f, const calq_node *n, int *x)
{
    if (!is_op(n, "ReduceMean") || n->n_inputs < 1 || n->inputs[0] < 0) return false;
    *x = n->inputs[0];
    const calq_tensor *xt = &f->p->vals[*x].t, *mt = &f->p->vals[n->outputs[0]].t;
    if (xt->dtype != CALQ_DTYPE_FLOAT32 || xt->ndim < 1 || mt->ndim != xt->ndim || xt->dims[xt->ndim - 1] < 2)
        return false;
    for (int d = 0; d < xt->ndim; d++)
        if (mt->dims[d] != (d == xt->ndim - 1 ? 1 : xt->dims[d])) return false;
    return true;
}

/* The replaced steps (besides s) and the values that are no longer computed. */
typedef struct parts {
    int steps[MAX_PARTS], n_steps;
    int vals[MAX_PARTS], n_vals;
} parts;

static void add_part(parts *pt, int step, int val)
{
    pt->steps[pt->n_steps++] = step;
    pt->vals[pt->n_vals++] = val;
}

/* The layers of a written-out LayerNorm starting at ReduceMean step s. */
static bool match_layer_norm(const calq_fuse_in *f, int s, int *x, int *scale, int *bias, int *y, float *eps, parts *pt)
{
    const calq_node *n = node_of(f, s);
    if (!row_mean(f, n, x) || !plain_f32(f, *x)) return false;
    const int rank = f->p->vals[*x].t.ndim;
    const int64_t len = f->p->vals[*x].t.dims[rank - 1];
    int m = n->outputs[0], t = sole_reader(f, m, s);
    if (t < 0) return false;
    n = node_of(f, t);
    if (!is_op(n, "Sub") || n->n_inputs != 2 || n->inputs[0] != *x || n->inputs[1] != m) return false;
    const int d = n->outputs[0];
    add_part(pt, t, m);
    /* d is read twice: by Pow (first) and by the Div / Mul that normalizes */
    if (f->uses[d] != 2 || calq__fuse_kept(f, d) || !plain_f32(f, d) || !same_shape(f, d, *x)) return false;
    const int a = f->first_consumer[d], b = f->consumer[d];
    if (a <= t || b <= a || f->absorbed[a] || f->absorbed[b] || f->old[a].dynamic || f->old[b].dynamic) return false;
    n = node_of(f, a);
    float c;
    bool first;
    if (!is_op(n, "Pow") || !scalar_operand(f, n, d, rank, &c, &first) || !first || c != 2.0f) return false;
    const int q = n->outputs[0];
    add_part(pt, a, d);
    int x2;
    if ((t = sole_reader(f, q, a)) < 0 || !row_mean(f, node_of(f, t), &x2)) return false;
    const int v = node_of(f, t)->outputs[0];
    add_part(pt, t, q);
    if ((t = sole_reader(f, v, t)) < 0) return false;
    n = node_of(f, t);
    if (!is_op(n, "Add") || !scalar_operand(f, n, v, rank, eps, &first)) return false;
    const int ve = n->outputs[0];
    add_part(pt, t, v);
    if ((t = sole_reader(f, ve, t)) < 0 || !is_op(node_of(f, t), "Sqrt")) return false;
    int sd = node_of(f, t)->outputs[0];
    add_part(pt, t, ve);
    if ((t = sole_reader(f, sd, t)) < 0) return false;
    n = node_of(f, t);
    if (is_op(n, "Reciprocal")) {
        add_part(pt, t, sd);
        sd = n->outputs[0];
        if ((t = sole_reader(f, sd, t)) < 0) return false;
        n = node_of(f, t);
        if (t != b || !is_op(n, "Mul") || n->n_inputs != 2 ||
            !((n->inputs[0] == d && n->inputs[1] == sd) || (n->inputs[0] == sd && n->inputs[1] == d)))
            return false;
    } else if (t != b || !is_op(n, "Div") || n->n_inputs != 2 || n->inputs[0] != d || n->inputs[1] != sd) {
        return false;
    }
    add_part(pt, b, sd);
    *y = n->outputs[0];
    *scale = *bias = -1;
    int last = b;
    if ((t = sole_reader(f, *y, last)) >= 0 && is_op(node_of(f, t), "Mul") &&
        (*scale = vector_operand(f, node_of(f, t), *y, rank, len)) >= 0) {
        add_part(pt, t, *y);
        *y = node_of(f, t)->outputs[0];
        last = t;
    }
    if ((t = sole_reader(f, *y, last)) >= 0 && is_op(node_of(f, t), "Add") &&
        (*bias = vector_operand(f, node_of(f, t), *y, rank, len)) >= 0) {
        add_part(pt, t, *y);
        *y = node_of(f, t)->outputs[0];
    }
    return same_shape(f, *y, *x);
}

/* The layers of a written-out GELU starting at the Div / Mul step s. */
static bool match_gelu(const calq_fuse_in *f, int s, int *x, int *y, float *c, unsigned *form, parts *pt)
{
    const calq_node *n = node_of(f, s);
    bool first;
    *form = 0;
    if (is_op(n, "Mul"))
        *form |= GELU_PARTS_MUL_FIRST;
    else if (!is_op(n, "Div"))
        return false;
    if (n->n_inputs != 2 || n->inputs[0] < 0 || n->inputs[1] < 0) return false;
    /* the activation: the input that is not a constant */
    *x = calq__fuse_const(f, n->inputs[0]) ? n->inputs[1] : n->inputs[0];
    if (!plain_f32(f, *x)) return false;
    const int rank = f->p->vals[*x].t.ndim;
    if (!scalar_operand(f, n, *x, rank, &c[0], &first) || (!first && !(*form & GELU_PARTS_MUL_FIRST))) return false;
    const int h = n->outputs[0];
    int t = sole_reader(f, h, s);
    if (t < 0 || !is_op(node_of(f, t), "Erf")) return false;
    const int e = node_of(f, t)->outputs[0];
    add_part(pt, t, h);
    if ((t = sole_reader(f, e, t)) < 0 || !is_op(node_of(f, t), "Add") ||
        !scalar_operand(f, node_of(f, t), e, rank, &c[1], &first))
        return false;
    const int a = node_of(f, t)->outputs[0];
    add_part(pt, t, e);
    const int mt = sole_reader(f, a, t);
    if (mt < 0) return false;
    n = node_of(f, mt);
    if (!is_op(n, "Mul") || n->n_inputs != 2 || (n->inputs[0] != a && n->inputs[1] != a)) return false;
    const int w = n->inputs[n->inputs[0] == a ? 1 : 0];
    if (w == *x) { /* (x * a) * c3 */
        const int m1 = n->outputs[0];
        add_part(pt, mt, a);
        if ((t = sole_reader(f, m1, mt)) < 0 || !is_op(node_of(f, t), "Mul") ||
            !scalar_operand(f, node_of(f, t), m1, rank, &c[2], &first))
            return false;
        add_part(pt, t, m1);
        *y = node_of(f, t)->outputs[0];
    } else { /* (x * c3) * a: w's producer, a Mul after s read only by mt */
        if (sole_reader(f, w, s) != mt) return false;
        int j = s + 1;
        while (j < mt && !(f->old[j].n_out == 1 && f->old[j].out_v[0] == w)) j++;
        if (j >= mt || f->absorbed[j] || f->old[j].dynamic || !is_op(node_of(f, j), "Mul") ||
            !scalar_operand(f, node_of(f, j), *x, rank, &c[2], &first))
            return false;
        *form |= GELU_PARTS_SCALE_FIRST;
        add_part(pt, j, w);
        add_part(pt, mt, a);
        *y = n->outputs[0];
    }
    return same_shape(f, h, *x) && same_shape(f, *y, *x);
}

/* A MatMul node (its name from the quantizable-kind table, which owns it). */
static bool is_matmul(const calq_node *n)
{
    return is_op(n, calq__qkind(CALQ_QKIND_MATMUL)->onnx);
}

/* A float32 operand in plain layout that exists when the step runs (an activation or a constant). */
static bool plain_f32_operand(const calq_fuse_in *f, int v)
{
    const calq_plan_value *pv = &f->p->vals[v];
    return pv->t.dtype == CALQ_DTYPE_FLOAT32 && pv->layout == CALQ_LAYOUT_PLAIN && pv->kind != CALQ_PV_NONE;
}

/* The layers of a written-out attention starting at the scores' MatMul step s:
 * S = MatMul(Q, Kt); optionally S = Mul(S, k) / Mul(k, S) / Div(S, k) (k one constant value);
 * P = Softmax(S) over the last axis; O = MatMul(P, V). V must exist when s runs (the fused step
 * runs there), i.e. not be written by a step between s and the last MatMul. */
static bool match_attention(const calq_fuse_in *f, int s, int *ins, int *y, calq_attention_scale *mode, float *k,
                            parts *pt)
{
    const calq_node *n = node_of(f, s);
    if (!is_matmul(n) || n->n_inputs != 2 || n->inputs[0] < 0 || n->inputs[1] < 0) return false;
    ins[0] = n->inputs[0];
    ins[1] = n->inputs[1];
    if (!plain_f32_operand(f, ins[0]) || !plain_f32_operand(f, ins[1])) return false;
    int sv = n->outputs[0];
    const int rank = f->p->vals[sv].t.ndim;
    int t = sole_reader(f, sv, s);
    if (t < 0 || rank < 2) return false;
    n = node_of(f, t);
    *mode = CALQ_ATT_NONE;
    *k = 1.0f;
    if (is_op(n, "Mul") || is_op(n, "Div")) {
        bool first;
        if (!scalar_operand(f, n, sv, rank, k, &first)) return false;
        if (is_op(n, "Div") && !first) return false; /* k / S is no scaling */
        *mode = is_op(n, "Mul") ? CALQ_ATT_MUL : CALQ_ATT_DIV;
        add_part(pt, t, sv);
        sv = n->outputs[0];
        if ((t = sole_reader(f, sv, t)) < 0) return false;
        n = node_of(f, t);
    }
    /* before opset 13 Softmax flattens from its axis (default 1): the same as the last axis only
     * when the axis is the last one */
    if (!is_op(n, "Softmax") || n->n_inputs != 1) return false;
    int64_t axis = calq__attr_int(n, "axis", n->opset >= 13 ? -1 : 1);
    if (axis < 0) axis += rank;
    if (axis != rank - 1) return false;
    add_part(pt, t, sv);
    const int pv = n->outputs[0];
    const int t2 = sole_reader(f, pv, t);
    if (t2 < 0) return false;
    n = node_of(f, t2);
    if (!is_matmul(n) || n->n_inputs != 2 || n->inputs[0] != pv || n->inputs[1] < 0 || n->inputs[1] == pv) return false;
    ins[2] = n->inputs[1];
    if (!plain_f32_operand(f, ins[2])) return false;
    for (int j = s + 1; j < t2; j++)
        for (int o = 0; o < f->old[j].n_out; o++)
            if (f->old[j].out_v[o] == ins[2]) return false;
    add_part(pt, t2, pv);
    *y = n->outputs[0];
    return f->p->vals[*y].t.dtype == CALQ_DTYPE_FLOAT32;
}

calq_status calq__fuse_new_step(calq_fuse_in *f, int s, const calq_op_def *d, const int *ins, int n_in, int y,
                                calq_plan_step *st, calq_error *err)
{
    memset(st, 0, sizeof *st);
    st->node = f->old[s].node;
    st->def = d;
    st->n_in = n_in;
    st->n_out = 1;
    st->in_v = malloc(sizeof(int) * (size_t)n_in);
    st->out_v = malloc(sizeof(int));
    st->in = calloc((size_t)n_in, sizeof *st->in);
    st->out = calloc(1, sizeof *st->out);
    if (!st->in_v || !st->out_v || !st->in || !st->out) {
        calq__plan_step_free(st);
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory planning the fast kernels");
    }
    memcpy(st->in_v, ins, sizeof(int) * (size_t)n_in);
    st->out_v[0] = y;
    for (int k = 0; k < n_in; k++)
        if (ins[k] >= 0 && calq__fuse_const(f, ins[k])) st->const_inputs |= 1u << k;
    calq__plan_bind(f->p, st);
    return CALQ_OK;
}

calq_status calq__plan_fuse_transformer(calq_fuse_in *f, int s, bool inexact, calq_plan_step *out, bool *done,
                                        calq_error *err)
{
    *done = false;
    if (f->old[s].dynamic || f->old[s].n_out != 1) return CALQ_OK;
    parts pt = {0};
    int x, y, ins[3];
    calq_op_ctx c;
    calq_status st;
    if (inexact) {
        int scale, bias;
        float eps;
        if (match_layer_norm(f, s, &x, &scale, &bias, &y, &eps, &pt)) {
            ins[0] = x;
            ins[1] = scale;
            ins[2] = bias;
            CALQ_TRY(calq__fuse_new_step(f, s, &calq__op_fused_layer_norm, ins, 3, y, out, err));
            calq__plan_ctx(f->p, out, &c, err);
            st = calq__fused_layer_norm_prepare(&c, eps);
            goto prepared;
        }
        memset(&pt, 0, sizeof pt);
        calq_attention_scale mode;
        float ak;
        if (match_attention(f, s, ins, &y, &mode, &ak, &pt)) {
            CALQ_TRY(calq__fuse_new_step(f, s, &calq__op_fused_attention, ins, 3, y, out, err));
            calq__plan_ctx(f->p, out, &c, err);
            st = calq__fused_attention_prepare(&c, mode, ak);
            goto prepared;
        }
        memset(&pt, 0, sizeof pt);
    }
    float k[3];
    unsigned form;
    if (!match_gelu(f, s, &x, &y, k, &form, &pt)) return CALQ_OK;
    CALQ_TRY(calq__fuse_new_step(f, s, &calq__op_fused_gelu, &x, 1, y, out, err));
    calq__plan_ctx(f->p, out, &c, err);
    st = calq__fused_gelu_prepare(&c, k[0], k[1], k[2], form);
prepared:
    if (st != CALQ_OK || !c.state) { /* no fast kernel: the layers run as they are */
        calq__plan_step_free(out);
        return st;
    }
    out->state = c.state;
    out->fast = true;
    for (int i = 0; i < pt.n_steps; i++) f->absorbed[pt.steps[i]] = true;
    for (int i = 0; i < pt.n_vals; i++) f->p->vals[pt.vals[i]].kind = CALQ_PV_NONE;
    f->p->n_fused += pt.n_steps;
    *done = true;
    return CALQ_OK;
}
