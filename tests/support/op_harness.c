#include "op_harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/passes.h"

op_case op_case_new(const char *op_type, int opset, int n_in, int n_out)
{
    op_case c = {calq__graph_new(), -1};
    int ins[16], outs[16];
    char name[32];
    for (int i = 0; i < n_in; i++) {
        snprintf(name, sizeof name, "in%d", i);
        ins[i] = calq__graph_value(c.g, name);
    }
    for (int i = 0; i < n_out; i++) {
        snprintf(name, sizeof name, "out%d", i);
        outs[i] = calq__graph_value(c.g, name);
    }
    c.node = calq__graph_add_node(c.g, "node", op_type, "", ins, n_in, outs, n_out);
    c.g->nodes[c.node].opset = opset;
    c.g->opset = opset;
    return c;
}

void op_case_free(op_case *c)
{
    calq__graph_free(c->g);
    c->g = NULL;
}

void op_attr_int(op_case *c, const char *name, int64_t v)
{
    calq__node_add_attr(c->g, c->node, name, CALQ_ATTR_INT)->i = v;
}
void op_attr_float(op_case *c, const char *name, float v)
{
    calq__node_add_attr(c->g, c->node, name, CALQ_ATTR_FLOAT)->f = v;
}
void op_attr_str(op_case *c, const char *name, const char *v)
{
    calq_attr *a = calq__node_add_attr(c->g, c->node, name, CALQ_ATTR_STRING);
    a->s = strdup(v);
}
void op_attr_ints(op_case *c, const char *name, const int64_t *v, int n)
{
    calq_attr *a = calq__node_add_attr(c->g, c->node, name, CALQ_ATTR_INTS);
    a->n = n;
    a->ints = malloc(sizeof(int64_t) * (size_t)(n + 1));
    memcpy(a->ints, v, sizeof(int64_t) * (size_t)n);
}
void op_attr_floats(op_case *c, const char *name, const float *v, int n)
{
    calq_attr *a = calq__node_add_attr(c->g, c->node, name, CALQ_ATTR_FLOATS);
    a->n = n;
    a->floats = malloc(sizeof(float) * (size_t)(n + 1));
    memcpy(a->floats, v, sizeof(float) * (size_t)n);
}

int op_graph_input(calq_graph *g, const char *name, calq_dtype dt, int ndim, const int64_t *dims)
{
    int v = calq__graph_value(g, name);
    g->values[v].is_input = true;
    g->values[v].dtype = dt;
    g->values[v].ndim = ndim;
    memcpy(g->values[v].dims, dims, sizeof(int64_t) * (size_t)ndim);
    g->inputs = realloc(g->inputs, sizeof(int) * (size_t)(g->n_inputs + 1));
    g->inputs[g->n_inputs++] = v;
    return v;
}

void op_graph_output(calq_graph *g, int v)
{
    g->values[v].is_output = true;
    g->outputs = realloc(g->outputs, sizeof(int) * (size_t)(g->n_outputs + 1));
    g->outputs[g->n_outputs++] = v;
}

int op_case_from_ascend_quant(op_case *c, int k, float offset)
{
    char name[32];
    snprintf(name, sizeof name, "aq_in%d", k);
    int src = calq__graph_value(c->g, name), dst = c->g->nodes[c->node].inputs[k];
    snprintf(name, sizeof name, "aq%d", k);
    int q = calq__graph_add_node(c->g, name, "AscendQuant", "", &src, 1, &dst, 1);
    calq__node_add_attr(c->g, q, "scale", CALQ_ATTR_FLOAT)->f = 1.0f;
    calq__node_add_attr(c->g, q, "offset", CALQ_ATTR_FLOAT)->f = offset;
    c->g->values[dst].producer = q;
    return q;
}

calq_status op_case_run(op_case *c, const calq_tensor *in, int n_in, calq_tensor *out, int n_out, int fast,
                        calq_error *err)
{
    return op_case_run_ex(c, in, n_in, out, n_out, fast, NULL, err);
}

calq_status op_case_run_ex(op_case *c, const calq_tensor *in, int n_in, calq_tensor *out, int n_out, int fast,
                           bool *took_fast, calq_error *err)
{
    if (took_fast) *took_fast = false;
    /* as every session does: the integer layers of Ascend deploy models become calq.Ascend<op> */
    int n_lowered;
    calq_status s = calq__pass_lower_ascend(c->g, &n_lowered, err);
    if (s != CALQ_OK) return s;
    const calq_node *node = &c->g->nodes[c->node];
    const calq_op_def *d = calq__op_of(node);
    if (!d) return calq__fail(err, CALQ_ERR_UNSUPPORTED, node->name, "no kernel for %s", node->op_type);
    calq_tensor *inp[16], *outp[16], inc[16];
    for (int i = 0; i < n_in; i++) {
        inc[i] = in[i];
        inp[i] = in[i].data || in[i].dtype != CALQ_DTYPE_UNDEFINED ? &inc[i] : NULL;
    }
    for (int i = 0; i < n_out; i++) {
        memset(&out[i], 0, sizeof out[i]);
        outp[i] = &out[i];
    }
    calq_op_ctx ctx = {
        .node = node, .opset = node->opset, .n_in = n_in, .in = inp, .n_out = n_out, .out = outp, .err = err};
    for (int i = 0; i < n_in && i < 32; i++)
        if (in[i].data) ctx.const_inputs |= 1u << i; /* test data never changes between prepare and run */
    s = d->infer(&ctx);
    if (s != CALQ_OK) return s;
    for (int i = 0; i < n_out; i++) {
        s = calq__tensor_alloc(&out[i], err);
        if (s != CALQ_OK) return s;
    }
    if (fast && d->prepare && d->run_fast) {
        s = d->prepare(&ctx);
        if (s != CALQ_OK) return s;
        if (ctx.state) {
            if (took_fast) *took_fast = true;
            s = d->run_fast(&ctx);
            if (d->release) d->release(ctx.state);
            return s;
        }
    }
    s = d->run(&ctx);
    if (ctx.state && d->release) d->release(ctx.state);
    return s;
}

static calq_tensor mk(calq_dtype dt, int ndim, const int64_t *dims)
{
    calq_tensor t = {0};
    t.dtype = dt;
    t.ndim = ndim;
    for (int i = 0; i < ndim; i++) t.dims[i] = dims[i];
    calq__tensor_alloc(&t, NULL);
    return t;
}

calq_tensor t_f32(const float *vals, int ndim, const int64_t *dims)
{
    calq_tensor t = mk(CALQ_DTYPE_FLOAT32, ndim, dims);
    memcpy(t.data, vals, calq__tensor_nbytes(&t));
    return t;
}

calq_tensor t_i64(const int64_t *vals, int ndim, const int64_t *dims)
{
    calq_tensor t = mk(CALQ_DTYPE_INT64, ndim, dims);
    memcpy(t.data, vals, calq__tensor_nbytes(&t));
    return t;
}

calq_tensor t_rand_f32(unsigned seed, int ndim, const int64_t *dims, float lo, float hi)
{
    calq_tensor t = mk(CALQ_DTYPE_FLOAT32, ndim, dims);
    uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
    float *p = t.data;
    for (int64_t i = 0; i < calq_tensor_numel(&t); i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = lo + (hi - lo) * (float)((s >> 40) & 0xffffff) / 16777216.0f;
    }
    return t;
}

int t_close(const calq_tensor *a, const calq_tensor *b, double rtol, double atol, const char *what)
{
    if (!calq__shape_equal(a->dims, a->ndim, b->dims, b->ndim)) {
        char sa[64], sb[64];
        fprintf(stderr, "%s: shape %s vs %s\n", what, calq__shape_str(a->dims, a->ndim, sa, sizeof sa),
                calq__shape_str(b->dims, b->ndim, sb, sizeof sb));
        return 0;
    }
    int64_t n = calq_tensor_numel(a), worst = -1;
    double worst_ex = 0;
    for (int64_t i = 0; i < n; i++) {
        double x = calq__tensor_get_f64(a, i), y = calq__tensor_get_f64(b, i);
        if (isnan(x) && isnan(y)) continue;
        double ex = fabs(x - y) / (atol + rtol * fabs(y));
        if (!(ex <= 1.0) && (worst < 0 || ex > worst_ex || isnan(ex))) {
            worst = i;
            worst_ex = ex;
        }
    }
    if (worst >= 0) {
        fprintf(stderr, "%s: mismatch at %lld: %.9g vs %.9g\n", what, (long long)worst, calq__tensor_get_f64(a, worst),
                calq__tensor_get_f64(b, worst));
        return 0;
    }
    return 1;
}
