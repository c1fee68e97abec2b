/* Finding the quantized layers of a model calq wrote, and their float counterparts.
 *
 * What each writer (src/export) puts around a quantized layer L:
 *   AMCT ONNX fake-quant  X -> Mul(<L0>.quant.scale = 1/scale_d) -> Round -> Add(offset_d) -> Clip -> Sub
 *                         -> L -> Mul <L>.dequant -> Y          (the chain named after its first layer L0)
 *   AMCT ONNX deploy      X -> AscendQuant <L0>.quant -> L -> AscendDequant <L>.dequant [-> Add <L>.bias_add] -> Y
 *   QDQ                   X -> QuantizeLinear -> DequantizeLinear -> L (weights through DequantizeLinear) -> Y
 *   QOperator             <X>_quantized -> QLinearConv / QLinearMatMul L -> <Y>_quantized (int8; Y may be the
 *                         output of a Relu the layer absorbed), or X -> QuantizeLinear first; else QDQ form
 *   AMCT Caffe            X -> <L>_quant_layer (AscendQuant [-> AscendAntiQuant]) -> L -> <L>_dequant_layer -> Y
 * Y and X keep the float model's tensor names, except Caffe's in-place writes (caffe.h's naming):
 * every write of a blob but its last is "<blob>/<writer>_out", so the names of one blob's
 * versions depend on which layers write it in each model. The quantized model adds a DeQuant
 * write ("<blob>/<L>_dequant_layer_out") and lacks the BatchNorm / Scale writes folded into L,
 * which the float model still names ("<blob>/<bn>_out") until compare folds them too: such a
 * name is matched by the layer that writes it rather than by the name itself. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "compare/compare.h"
#include "graph/passes.h"
#include "graph/quantizable.h"

static bool is_op(const calq_node *n, const char *op)
{
    return strcmp(n->op_type, op) == 0;
}

calq_status calq__cmp_fold_float(const calq_graph *fg, const calq_graph *q, calq_graph **out, calq_error *err)
{
    *out = NULL;
    const char **skip = calloc((size_t)fg->n_nodes + 1, sizeof *skip);
    if (!skip) {
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "compare: out of memory");
    }
    int n_skip = 0;
    for (int i = 0; i < fg->n_nodes; i++) {
        const calq_node *n = &fg->nodes[i];
        if (!is_op(n, "BatchNormalization") && !is_op(n, "Mul") && !is_op(n, "Add")) continue;
        if (n->n_inputs < 1 || n->inputs[0] < 0 || n->n_outputs < 1 || n->outputs[0] < 0) continue;
        /* Q kept this node when Q still computes its output with the same operator */
        int qv = calq__graph_find(q, fg->values[n->outputs[0]].name);
        int qp = qv >= 0 ? q->values[qv].producer : -1;
        if (qp < 0 || strcmp(q->nodes[qp].op_type, n->op_type) != 0) continue;
        int p = fg->values[n->inputs[0]].producer;
        if (p >= 0 && calq__node_folds_bn(&fg->nodes[p])) skip[n_skip++] = fg->nodes[p].name;
    }
    int n_folded = 0;
    calq_status st = calq__graph_clone(fg, out, err);
    if (st == CALQ_OK) st = calq__pass_fold_conv_affine(*out, skip, n_skip, &n_folded, err);
    if (st != CALQ_OK) {
        calq__graph_free(*out);
        *out = NULL;
    }
    free(skip);
    return st;
}

typedef struct mctx {
    const calq_graph *f, *q;
    int *n_readers, *reader; /* per Q value: number of reading nodes, the last one */
    int *mark;               /* per Q node: in the current chain */
    int *tail;               /* per Q node: the current layer or its dequantization */
    const char *layer;       /* the float layer being matched */
    int stop2;               /* a second input's stop (a MatMul of two activations), or -1 */
    calq_error *err;
} mctx;

/* A float activation by name: a value the float run computes (a node output or a graph input;
 * a value whose writer the BatchNorm folding removed is no longer computed). */
static int f_activation(const mctx *c, const char *name)
{
    int v = calq__graph_find(c->f, name);
    if (v < 0 || c->f->values[v].constant) return -1;
    return c->f->values[v].producer >= 0 || c->f->values[v].is_input ? v : -1;
}

/* The float node named `name` of the op `op` (any op when NULL), or -1. */
static int f_node_named(const mctx *c, const char *name, size_t len, const char *op)
{
    for (int i = 0; i < c->f->n_nodes; i++) {
        const calq_node *n = &c->f->nodes[i];
        if (strncmp(n->name, name, len) == 0 && !n->name[len] && (!op || is_op(n, op))) return i;
    }
    return -1;
}

/* The float value a Q value stands for: the same name, else, for a Caffe in-place version
 * "<blob>/<writer>_out", the same output of the float node that writes it there: the node of the
 * same name and operator, or layer L for L's DeQuant "<L>_dequant_layer" (L's output after any
 * folding); -1 when there is none. */
static int f_value_of(const mctx *c, const char *qname)
{
    int v = f_activation(c, qname);
    if (v >= 0) return v;
    size_t n = strlen(qname);
    int qv = calq__graph_find(c->q, qname);
    int p = qv >= 0 ? c->q->values[qv].producer : -1;
    if (p < 0 || n < 5 || strcmp(qname + n - 4, "_out") != 0 || !strchr(qname, '/')) return -1;
    const calq_node *pn = &c->q->nodes[p];
    static const char deq[] = "_dequant_layer";
    size_t ln = strlen(pn->name), k = sizeof deq - 1;
    int fi = -1;
    if (ln > k && strcmp(pn->name + ln - k, deq) == 0) /* AscendDequant, or Identity in fake-quant */
        fi = f_node_named(c, pn->name, ln - k, NULL);
    else
        fi = f_node_named(c, pn->name, ln, pn->op_type);
    if (fi < 0) return -1;
    for (int o = 0; o < pn->n_outputs; o++)
        if (pn->outputs[o] == qv && o < c->f->nodes[fi].n_outputs && c->f->nodes[fi].outputs[o] >= 0)
            return c->f->nodes[fi].outputs[o];
    return -1;
}

/* "<T>_quantized" with T a float activation: T's index, else -1 (QOperator's int8 tensors). */
static int f_of_quantized(const mctx *c, const char *qname)
{
    static const char sfx[] = "_quantized";
    size_t n = strlen(qname), k = sizeof sfx - 1;
    if (n <= k || strcmp(qname + n - k, sfx) != 0) return -1;
    char *t = malloc(n + 1);
    if (!t) return -1;
    memcpy(t, qname, n - k);
    t[n - k] = 0;
    int v = f_activation(c, t);
    free(t);
    return v;
}

/* Operators a writer puts between a layer's float input and the layer (the quantize chains). */
static bool chain_op(const calq_node *n)
{
    static const char *const ops[] = {
        "QuantizeLinear", "DequantizeLinear", "AscendQuant", "AscendAntiQuant", "Round", "Clip", "Add", "Sub", "Mul",
        "Identity",       "Flatten",          "Reshape"};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (is_op(n, ops[i])) return true;
    return false;
}

static bool qlinear(const calq_node *n)
{
    return is_op(n, "QLinearConv") || is_op(n, "QLinearMatMul");
}

/* The producer of the Q tensor `name`, or -1. */
static int q_producer(const calq_graph *q, const char *name)
{
    int v = calq__graph_find(q, name);
    return v >= 0 ? q->values[v].producer : -1;
}

static const float *const_f32(const calq_graph *g, int v)
{
    const calq_tensor *t = v >= 0 ? g->values[v].constant : NULL;
    return t && t->dtype == CALQ_DTYPE_FLOAT32 && calq_tensor_numel(t) == 1 ? t->data : NULL;
}

/* A scalar zero point (int8 or uint8); false when it is not one. */
static bool const_zp(const calq_graph *g, int v, int *zp, int *qmin, int *qmax)
{
    const calq_tensor *t = v >= 0 ? g->values[v].constant : NULL;
    if (!t || calq_tensor_numel(t) != 1) return false;
    if (t->dtype == CALQ_DTYPE_INT8) {
        *zp = *(const int8_t *)t->data;
        *qmin = -128;
        *qmax = 127;
        return true;
    }
    if (t->dtype == CALQ_DTYPE_UINT8) {
        *zp = *(const uint8_t *)t->data;
        *qmin = 0;
        *qmax = 255;
        return true;
    }
    return false;
}

/* A uint8 zero point (the int8 scheme's activations) as AMCT's offset_d: the same integers
 * shifted by 128, so the range is the same and the figure is the record's. */
static void as_offset_d(calq__cmp_match *m)
{
    if (m->qmin == 0 && m->qmax == 255) {
        m->offset -= 128;
        m->qmin = -128;
        m->qmax = 127;
    }
}

/* scale_d, with *offset_d set, when offset is one AMCT can write (an integer in [-128, 127], §0.3). A
 * hostile quantized model's offset of NaN or 1e30 was converted to int as it was (undefined
 * behaviour; the report showed offset -2147483648 and an inverted clip range). Such a chain is still
 * the layer's quantization, but without usable factors: NaN, which compare.c reports as no range. */
static float checked_scale(float scale_d, float offset, int *offset_d)
{
    if (!(offset == floorf(offset)) || offset < -128.0f || offset > 127.0f) {
        *offset_d = 0;
        return NAN;
    }
    *offset_d = (int)offset;
    return scale_d;
}

/* The factors a quantize node gives (QuantizeLinear, AscendQuant), or the Ascend fake-quant
 * Mul(1/scale_d) -> Round -> Add(offset_d) chain read at its Round. */
static bool quant_factors(const calq_graph *q, int ni, calq__cmp_match *m)
{
    const calq_node *n = &q->nodes[ni];
    if ((is_op(n, "QuantizeLinear") || is_op(n, "DequantizeLinear")) && n->n_inputs >= 3) {
        const float *s = const_f32(q, n->inputs[1]);
        int zp, lo, hi;
        if (!s || !const_zp(q, n->inputs[2], &zp, &lo, &hi)) return false;
        m->scale = *s;
        m->offset = zp;
        m->qmin = lo;
        m->qmax = hi;
        as_offset_d(m);
        return true;
    }
    if (is_op(n, "AscendQuant")) {
        float inv = calq__attr_float(n, "scale", 0.0f);
        if (!(inv > 0.0f)) return false;
        m->scale = checked_scale(1.0f / inv, calq__attr_float(n, "offset", 0.0f), &m->offset);
        m->qmin = -128;
        m->qmax = 127;
        return true;
    }
    if (is_op(n, "Round") && n->n_inputs == 1 && n->inputs[0] >= 0) {
        int mul = q->values[n->inputs[0]].producer;
        int r = n->n_outputs ? n->outputs[0] : -1;
        const calq_node *mn = mul >= 0 ? &q->nodes[mul] : NULL;
        const float *inv = mn && is_op(mn, "Mul") && mn->n_inputs == 2 ? const_f32(q, mn->inputs[1]) : NULL;
        const float *off = NULL;
        for (int i = 0; r >= 0 && i < q->n_nodes && !off; i++)
            if (is_op(&q->nodes[i], "Add") && q->nodes[i].n_inputs == 2 && q->nodes[i].inputs[0] == r)
                off = const_f32(q, q->nodes[i].inputs[1]);
        if (!inv || !(*inv > 0.0f) || !off) return false;
        m->scale = checked_scale(1.0f / *inv, *off, &m->offset);
        m->qmin = -128;
        m->qmax = 127;
        return true;
    }
    return false;
}

/* Walks back from Q value v through the quantize chain to the value it starts from: the first
 * one standing for a float activation, or an int8 output of another QOperator layer. Records
 * the quantize factors on the way. Returns that value, or -1. */
static bool shape_op(const calq_node *n)
{
    return is_op(n, "Flatten") || is_op(n, "Reshape") || is_op(n, "Identity");
}

static int input_stop(mctx *c, int v, calq__cmp_match *m)
{
    for (int steps = 0; v >= 0 && steps < 64; steps++) {
        const calq_value *val = &c->q->values[v];
        int p = val->producer;
        /* a float tensor: the start, unless it is only a reshape of the quantized value (a
         * Caffe InnerProduct's Flatten after its Quant) */
        if (f_value_of(c, val->name) >= 0 && (m->has_range || p < 0 || !shape_op(&c->q->nodes[p]))) return v;
        if (p < 0 || qlinear(&c->q->nodes[p])) return v;
        const calq_node *pn = &c->q->nodes[p];
        if (!chain_op(pn) || pn->n_inputs < 1) return -1;
        if (!m->has_range && quant_factors(c->q, p, m)) m->has_range = true;
        if ((is_op(pn, "QuantizeLinear") || is_op(pn, "DequantizeLinear")) && pn->n_inputs >= 3) {
            m->stop_scale = pn->inputs[1]; /* the factors of an int8 stop (the last pair before it) */
            m->stop_zp = pn->inputs[2];
        }
        v = pn->inputs[0];
    }
    return -1;
}

/* A node the frontend made for the layer being matched ("<L>/<what>": a Caffe InnerProduct's
 * output-shape computation), which the float model has under the same names. */
static bool own_node(const mctx *c, int p)
{
    size_t nl = strlen(c->layer);
    return strncmp(c->q->nodes[p].name, c->layer, nl) == 0 && c->q->nodes[p].name[nl] == '/';
}

/* Adds to the chain every node needed to compute Q value v from the stop and constants; false
 * when it needs another activation (then the layer is not isolated). */
static bool chain_add(mctx *c, int v, int stop, calq__cmp_match *m)
{
    if (v < 0 || v == stop || v == c->stop2 || c->q->values[v].constant) return true;
    int p = c->q->values[v].producer;
    /* another float tensor read on the way (not the layer's own outputs, which Caffe's in-place
     * naming may give a float name) */
    if (p < 0 ||
        (!c->tail[p] && !shape_op(&c->q->nodes[p]) && !own_node(c, p) && f_value_of(c, c->q->values[v].name) >= 0))
        return false;
    if (c->mark[p]) return true;
    c->mark[p] = 1;
    for (int k = 0; k < c->q->nodes[p].n_inputs; k++)
        if (!chain_add(c, c->q->nodes[p].inputs[k], stop, m)) return false;
    return true;
}

/* The Q value after the layer's own dequantization: through single readers the writer named
 * after the layer (flayer: F's name, which calq's writers use: "<L>.dequant", "<L>_dequant_layer"),
 * or dequantizing operators while the value stands for no float tensor. */
static int output_tail(const mctx *c, int qi, const char *flayer)
{
    size_t nl = strlen(flayer);
    int v = c->q->nodes[qi].n_outputs ? c->q->nodes[qi].outputs[0] : -1;
    for (int steps = 0; v >= 0 && steps < 8; steps++) {
        if (c->n_readers[v] != 1) break;
        const calq_node *r = &c->q->nodes[c->reader[v]];
        /* "<L>.dequant", "<L>_dequant_layer", or a reshape of L's own ("<L>/...": a Caffe
         * InnerProduct with axis > 1 restores its shape before the DeQuant) */
        bool named =
            strncmp(r->name, flayer, nl) == 0 &&
            (r->name[nl] == '.' || strncmp(r->name + nl, "_dequant", 8) == 0 || (r->name[nl] == '/' && shape_op(r)));
        bool deq = is_op(r, "AscendDequant") || is_op(r, "Mul") || is_op(r, "Add") || is_op(r, "Identity");
        if (r->n_outputs < 1 || is_op(r, "QuantizeLinear") || is_op(r, "AscendQuant")) break;
        if (!named && !(deq && f_value_of(c, c->q->values[v].name) < 0)) break;
        v = r->outputs[0];
    }
    return v;
}

/* The node of Q that is float layer fi: by the names calq's writers give (<L>.dequant.input0,
 * <L>.weight_quantized), by the output tensor it keeps, or by its name (Caffe). Names are
 * compared as tensor names first because frontends invent node names for unnamed nodes, and the
 * same invented name can denote another node in each model. */
static int find_q_layer(const mctx *c, int fi)
{
    const calq_node *fn = &c->f->nodes[fi];
    const calq_graph *q = c->q;
    size_t nl = strlen(fn->name) + 32;
    char *nm = malloc(nl);
    if (!nm) return -1;
    snprintf(nm, nl, "%s.dequant.input0", fn->name);
    int qi = q_producer(q, nm);
    snprintf(nm, nl, "%s.weight_quantized", fn->name);
    int wv = qi < 0 ? calq__graph_find(q, nm) : -1;
    free(nm);
    for (int i = 0; wv >= 0 && qi < 0 && i < q->n_nodes; i++)
        if (qlinear(&q->nodes[i]) && q->nodes[i].n_inputs > 3 && q->nodes[i].inputs[3] == wv) qi = i;
    if (qi < 0) {
        int p = q_producer(q, c->f->values[fn->outputs[0]].name);
        if (p >= 0 && is_op(&q->nodes[p], fn->op_type)) qi = p;
    }
    for (int i = 0; qi < 0 && i < q->n_nodes; i++)
        if (strcmp(q->nodes[i].name, fn->name) == 0 && is_op(&q->nodes[i], fn->op_type)) qi = i;
    return qi;
}

static calq_status match_one(mctx *c, int fi, int qi, calq__cmp_match *m, bool *quantized)
{
    const calq_graph *f = c->f, *q = c->q;
    const calq_node *qn = &q->nodes[qi];
    memset(m, 0, sizeof *m);
    c->layer = f->nodes[fi].name;
    m->f_node = fi;
    m->q_node = qi;
    m->f_in = f->nodes[fi].inputs[0];
    m->f_out = f->nodes[fi].outputs[0];
    m->q_stop = m->stop_scale = m->stop_zp = -1;
    m->q_stop2 = m->f_in2 = -1;
    c->stop2 = -1;
    bool ql = qlinear(qn);
    if (ql && qn->n_inputs >= 8) {
        const float *s = const_f32(q, qn->inputs[1]);
        if (s && const_zp(q, qn->inputs[2], &m->offset, &m->qmin, &m->qmax)) {
            m->scale = *s;
            m->has_range = true;
            as_offset_d(m);
        }
    }
    int stop = qn->n_inputs > 0 ? input_stop(c, qn->inputs[0], m) : -1;
    *quantized = m->has_range || ql;
    if (!*quantized) return CALQ_OK;

    /* the value compared */
    m->q_out = output_tail(c, qi, f->nodes[fi].name);
    if (m->q_out < 0) {
        *quantized = false;
        return CALQ_OK;
    }
    const char *qname = q->values[m->q_out].name;
    int fv = f_value_of(c, qname);
    if (ql && m->q_out == qn->outputs[0]) {
        const float *ys = const_f32(q, qn->inputs[6]);
        int lo, hi;
        if (ys && const_zp(q, qn->inputs[7], &m->q_zp, &lo, &hi) && (lo == -128 || (lo == 0 && hi == 255))) {
            m->q_int8 = true;
            m->q_uint8 = lo == 0;
            m->q_scale = *ys;
        }
        fv = f_of_quantized(c, qname);
    }
    if (fv >= 0) m->f_out = fv;
    if (ql && !m->q_int8) {
        *quantized = false; /* an output of another integer type: not what calq writes */
        return CALQ_OK;
    }

    /* the float input is what the stop stands for (a Caffe InnerProduct's Flatten comes after
     * its Quant, so its Gemm's own input is not the tensor quantized) */
    if (stop >= 0) {
        int fs = f_value_of(c, q->values[stop].name);
        if (fs < 0) fs = f_of_quantized(c, q->values[stop].name);
        if (fs >= 0) m->f_in = fs;
    }
    /* isolated: the layer's nodes from its input to q_out */
    if (stop < 0) return CALQ_OK;
    const char *sname = q->values[stop].name;
    if (f_value_of(c, sname) < 0) {
        /* another QLinear layer's int8 output: the isolated copy requantizes the float input */
        if (f_of_quantized(c, sname) < 0) return CALQ_OK;
        if (ql && stop == qn->inputs[0]) {
            m->stop_scale = qn->inputs[1];
            m->stop_zp = qn->inputs[2];
        }
        if (m->stop_scale < 0 || m->stop_zp < 0) return CALQ_OK;
        m->stop_int8 = true;
    }
    /* a second activation (MatMul of two variable inputs, §8.1): its own quantize chain from a
     * float tensor of F belongs to the layer too */
    const calq_qkind *kind = calq__qkind_of_node(f, fi);
    if (!m->stop_int8 && kind && (kind->act_inputs & 2u) && !kind->tensor_only && qn->n_inputs >= 2 &&
        qn->inputs[1] >= 0 && !q->values[qn->inputs[1]].constant) {
        calq__cmp_match scratch = {.stop_scale = -1, .stop_zp = -1};
        int s2 = input_stop(c, qn->inputs[1], &scratch);
        int f2 = s2 >= 0 ? f_value_of(c, q->values[s2].name) : -1;
        if (f2 < 0) return CALQ_OK; /* not isolated */
        c->stop2 = s2;
        m->q_stop2 = s2;
        m->f_in2 = f2;
    }
    memset(c->mark, 0, sizeof(int) * (size_t)q->n_nodes);
    memset(c->tail, 0, sizeof(int) * (size_t)q->n_nodes);
    c->tail[qi] = 1;
    for (int v = m->q_out, steps = 0; v >= 0 && steps < 8 && q->values[v].producer != qi; steps++) {
        int p = q->values[v].producer;
        if (p < 0 || q->nodes[p].n_inputs < 1) break;
        c->tail[p] = 1;
        v = q->nodes[p].inputs[0];
    }
    if (!chain_add(c, m->q_out, stop, m) || !c->mark[qi]) return CALQ_OK;
    int n = 0;
    for (int i = 0; i < q->n_nodes; i++) n += c->mark[i];
    m->chain = malloc(sizeof(int) * (size_t)n);
    if (!m->chain) return calq__fail(c->err, CALQ_ERR_OUT_OF_MEMORY, NULL, "compare: out of memory");
    for (int i = 0; i < q->n_nodes; i++)
        if (c->mark[i]) m->chain[m->n_chain++] = i;
    m->q_stop = stop;
    m->iso = true;
    return CALQ_OK;
}

void calq__cmp_matches_free(calq__cmp_match *m, int n)
{
    for (int i = 0; m && i < n; i++) free(m[i].chain);
    free(m);
}

calq_status calq__cmp_match_layers(const calq_graph *f, const calq_graph *q, calq__cmp_match **out, int *n_out,
                                   int *n_float, calq_error *err)
{
    *out = NULL;
    *n_out = *n_float = 0;
    mctx c = {.f = f, .q = q, .err = err};
    c.n_readers = calloc((size_t)q->n_values + 1, sizeof(int));
    c.reader = calloc((size_t)q->n_values + 1, sizeof(int));
    c.mark = calloc((size_t)q->n_nodes + 1, sizeof(int));
    c.tail = calloc((size_t)q->n_nodes + 1, sizeof(int));
    calq__cmp_match *m = calloc((size_t)f->n_nodes + 1, sizeof *m);
    calq_status st = CALQ_OK;
    if (!c.n_readers || !c.reader || !c.mark || !c.tail || !m)
        st = calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "compare: out of memory");
    for (int i = 0; st == CALQ_OK && i < q->n_nodes; i++)
        for (int k = 0; k < q->nodes[i].n_inputs; k++) {
            int v = q->nodes[i].inputs[k];
            if (v < 0) continue;
            c.n_readers[v]++;
            c.reader[v] = i;
        }
    for (int v = 0; st == CALQ_OK && v < q->n_values; v++)
        if (q->values[v].is_output) c.n_readers[v]++; /* a graph output is read by the user */
    int n = 0;
    for (int i = 0; st == CALQ_OK && i < f->n_nodes; i++) {
        const calq_node *fn = &f->nodes[i];
        if (!calq__node_quantizable(f, i) || fn->n_inputs < 1 || fn->inputs[0] < 0 || fn->n_outputs < 1) continue;
        int qi = find_q_layer(&c, i);
        bool quantized = false;
        if (qi >= 0) st = match_one(&c, i, qi, &m[n], &quantized); /* not found: kept in float */
        if (st != CALQ_OK) break;
        if (quantized)
            n++;
        else
            ++*n_float, free(m[n].chain), m[n].chain = NULL;
    }
    free(c.n_readers);
    free(c.reader);
    free(c.mark);
    free(c.tail);
    if (st != CALQ_OK) {
        calq__cmp_matches_free(m, n);
        return st;
    }
    *out = m;
    *n_out = n;
    return CALQ_OK;
}
