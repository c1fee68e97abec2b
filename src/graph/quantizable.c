#include "graph/quantizable.h"

#include <string.h>

/* A constant float32 weight: a layer of an already quantized model (int8 weights, an Ascend
 * deploy model) is not quantizable again. */
static bool is_const(const calq_graph *g, const calq_node *n, int k)
{
    return k < n->n_inputs && n->inputs[k] >= 0 && g->values[n->inputs[k]].constant != NULL &&
           g->values[n->inputs[k]].constant->dtype == CALQ_DTYPE_FLOAT32;
}

/* The activation is float, or not known yet (an int8 input is already quantized). */
static bool float_input(const calq_graph *g, const calq_node *n)
{
    if (n->n_inputs < 1 || n->inputs[0] < 0) return false;
    calq_dtype t = g->values[n->inputs[0]].dtype;
    return t == CALQ_DTYPE_UNDEFINED || t == CALQ_DTYPE_FLOAT32 || t == CALQ_DTYPE_FLOAT16;
}

static bool all_ones(const calq_node *n, const char *attr)
{
    const int64_t *v;
    int c = calq__attr_ints(n, attr, &v);
    for (int i = 0; i < c; i++)
        if (v[i] != 1) return false;
    return true;
}

bool calq__node_quantizable(const calq_graph *g, int i)
{
    const calq_node *n = &g->nodes[i];
    if (n->domain[0] || !float_input(g, n)) return false;
    const char *op = n->op_type;
    if (strcmp(op, "Conv") == 0) {
        /* 4-D/5-D with a constant weight (§8.1) */
        if (!is_const(g, n, 1)) return false;
        int r = g->values[n->inputs[1]].constant->ndim;
        return r == 4 || r == 5;
    }
    if (strcmp(op, "ConvTranspose") == 0)
        return is_const(g, n, 1) && g->values[n->inputs[1]].constant->ndim == 4 && all_ones(n, "dilations");
    if (strcmp(op, "Gemm") == 0)
        return is_const(g, n, 1) && calq__attr_int(n, "transA", 0) == 0 && calq__attr_float(n, "alpha", 1.0f) == 1.0f &&
               calq__attr_float(n, "beta", 1.0f) == 1.0f;
    if (strcmp(op, "MatMul") == 0) {
        if (!is_const(g, n, 1)) return false;
        int r = g->values[n->inputs[1]].constant->ndim;
        return r == 2 || r == 3;
    }
    if (strcmp(op, "AveragePool") == 0) {
        const calq_value *x = n->n_inputs > 0 && n->inputs[0] >= 0 ? &g->values[n->inputs[0]] : NULL;
        return x && (x->ndim == 4 || x->ndim < 0);
    }
    return false;
}
