/* The quantizable-kind rows (qkind.c) applied to graph nodes (quantizable.h). */
#include "graph/quantizable.h"

#include <string.h>

#include "base/error.h"

/* A constant float32 weight: a layer of an already quantized model (int8 weights, an Ascend
 * deploy model) is not quantizable again. A weight the file computes from an initializer by
 * Identity / Transpose / ... is a constant by now (calq__pass_const_weights at import). */
static bool is_const(const calq_graph *g, const calq_node *n, int k)
{
    return k < n->n_inputs && n->inputs[k] >= 0 && g->values[n->inputs[k]].constant != NULL &&
           g->values[n->inputs[k]].constant->dtype == CALQ_DTYPE_FLOAT32;
}

/* An activation input: present, float or of unknown type (an int8 input is already quantized). */
static bool float_input(const calq_graph *g, const calq_node *n, int k)
{
    if (k >= n->n_inputs || n->inputs[k] < 0) return false;
    calq_dtype t = g->values[n->inputs[k]].dtype;
    return t == CALQ_DTYPE_UNDEFINED || t == CALQ_DTYPE_FLOAT32 || t == CALQ_DTYPE_FLOAT16;
}

static bool rank_ok(unsigned mask, int rank)
{
    return mask == 0 || (rank >= 0 && rank < 32 && (mask >> rank) & 1u);
}

static bool weight_ok(const calq_qkind *k, const calq_graph *g, const calq_node *n, int input)
{
    if (input < 0) return true;
    return is_const(g, n, input) && rank_ok(k->weight_ranks, g->values[n->inputs[input]].constant->ndim);
}

static bool attr_ok(const calq_qkind_attr *a, const calq_node *n)
{
    switch (a->rule) {
    case CALQ_QKIND_ATTR_END: return true;
    case CALQ_QKIND_ATTR_INT_IS: return calq__attr_int(n, a->name, (int64_t)a->dflt) == (int64_t)a->value;
    case CALQ_QKIND_ATTR_FLOAT_IS: return calq__attr_float(n, a->name, (float)a->dflt) == (float)a->value;
    case CALQ_QKIND_ATTR_INTS_ALL: {
        const int64_t *v;
        int c = calq__attr_ints(n, a->name, &v);
        for (int i = 0; i < c; i++)
            if (v[i] != (int64_t)a->value) return false;
        return true;
    }
    }
    return false;
}

bool calq__qkind_match(const calq_qkind *k, const calq_graph *g, int i)
{
    const calq_node *n = &g->nodes[i];
    if (n->domain[0] || strcmp(n->op_type, k->onnx) != 0) return false;
    /* activations (§8.1): input 0 always; no activation is a constant (constants are weights,
     * and calibration observes what the model computes: a constant activation would have no
     * statistics, as in MatMul(constant A, x) or Conv(constant x, w)) */
    if (!float_input(g, n, 0) || g->values[n->inputs[0]].constant) return false;
    for (int in = 1; in < n->n_inputs && in < 32; in++)
        if (((k->act_inputs >> in) & 1u) && (!float_input(g, n, in) || g->values[n->inputs[in]].constant)) return false;
    if (k->weights == CALQ_QKIND_WEIGHTS_CONST &&
        (k->weight_input < 0 || !weight_ok(k, g, n, k->weight_input) || !weight_ok(k, g, n, k->weight2_input)))
        return false;
    if (k->input_ranks) {
        const calq_value *x = &g->values[n->inputs[0]];
        if (x->ndim >= 0 && !rank_ok(k->input_ranks, x->ndim)) return false;
    }
    for (int a = 0; a < CALQ_QKIND_MAX_ATTRS && k->attrs[a].rule != CALQ_QKIND_ATTR_END; a++)
        if (!attr_ok(&k->attrs[a], n)) return false;
    return true;
}

const calq_qkind *calq__qkind_of_node(const calq_graph *g, int i)
{
    for (int r = 0; r < calq__qkind_count(); r++)
        if (!calq__qkind_at(r)->tensor_only && calq__qkind_match(calq__qkind_at(r), g, i)) return calq__qkind_at(r);
    return NULL;
}

static bool has_act_input(const calq_qkind *k, int in)
{
    return k->act_inputs == CALQ_QKIND_EVERY_INPUT || (in < 32 && ((k->act_inputs >> in) & 1u));
}

/* A tensor-only row's conditions for input `in` alone: the op, the input a float non-constant
 * tensor, input 0's rank and the attributes (the other inputs may be constants: Add(x, bias)). */
static bool tensor_row_holds(const calq_qkind *k, const calq_graph *g, int i, int in)
{
    const calq_node *n = &g->nodes[i];
    if (n->domain[0] || strcmp(n->op_type, k->onnx) != 0 || !has_act_input(k, in)) return false;
    if (!float_input(g, n, in) || g->values[n->inputs[in]].constant) return false;
    if (k->input_ranks) {
        const calq_value *x = n->inputs[0] >= 0 ? &g->values[n->inputs[0]] : NULL;
        if (x && x->ndim >= 0 && !rank_ok(k->input_ranks, x->ndim)) return false;
    }
    for (int a = 0; a < CALQ_QKIND_MAX_ATTRS && k->attrs[a].rule != CALQ_QKIND_ATTR_END; a++)
        if (!attr_ok(&k->attrs[a], n)) return false;
    return true;
}

const calq_qkind *calq__qkind_of_input(const calq_graph *g, int i, int k)
{
    if (i < 0 || i >= g->n_nodes || k < 0 || k >= g->nodes[i].n_inputs || g->nodes[i].inputs[k] < 0) return NULL;
    const calq_qkind *layer = calq__qkind_of_node(g, i);
    if (layer && k >= 1 && has_act_input(layer, k)) return layer;
    for (int r = 0; r < calq__qkind_count(); r++) {
        const calq_qkind *t = calq__qkind_at(r);
        if (t->tensor_only && tensor_row_holds(t, g, i, k)) return t;
    }
    return NULL;
}

/* Does value v hold the same data whatever the model's inputs: a constant, or the output of a
 * node whose inputs all are (Constant -> Cast, Unsqueeze(gamma)), other than the random ops and
 * nodes with subgraphs. Looked `depth` producers back: further than exporters chain such ops, and
 * a deeper chain is only taken as variable (the input quantized, as before). */
#define CONST_DEPTH 8

static bool deterministic(const calq_node *n)
{
    if (n->domain[0] || !strncmp(n->op_type, "Random", 6) || !strcmp(n->op_type, "Bernoulli") ||
        !strcmp(n->op_type, "Multinomial"))
        return false;
    for (int a = 0; a < n->n_attrs; a++)
        if (n->attrs[a].type == CALQ_ATTR_GRAPH || n->attrs[a].type == CALQ_ATTR_OTHER) return false;
    return true;
}

static bool data_constant(const calq_graph *g, int v, int depth)
{
    if (v < 0) return false;
    if (g->values[v].constant) return true;
    const int p = g->values[v].producer;
    if (p < 0 || depth <= 0) return false;
    const calq_node *n = &g->nodes[p];
    if (n->n_inputs < 1 || !deterministic(n)) return false;
    for (int k = 0; k < n->n_inputs; k++)
        if (n->inputs[k] >= 0 && !data_constant(g, n->inputs[k], depth - 1)) return false;
    return true;
}

const calq_qkind *calq__qkind_int8_input(const calq_graph *g, int i, int k)
{
    const calq_qkind *kind = calq__qkind_of_input(g, i, k);
    if (!kind || !kind->int8_all_operands) return kind;
    /* the input itself computed from constants (Cast(c)): a constant operand as well */
    const calq_node *n = &g->nodes[i];
    for (int o = 0; o < n->n_inputs; o++)
        if (has_act_input(kind, o) && data_constant(g, n->inputs[o], CONST_DEPTH)) return NULL;
    return kind;
}

bool calq__node_quantizable(const calq_graph *g, int i)
{
    return calq__qkind_of_node(g, i) != NULL;
}

bool calq__first_float16_layer(const calq_graph *g, int *node, int *value)
{
    for (int i = 0; i < g->n_nodes; i++) {
        const calq_node *n = &g->nodes[i];
        bool kind = false;
        for (int r = 0; !kind && r < calq__qkind_count(); r++)
            kind = !calq__qkind_at(r)->tensor_only && !n->domain[0] && strcmp(n->op_type, calq__qkind_at(r)->onnx) == 0;
        for (int k = 0; kind && k < n->n_formal; k++) {
            if (k >= n->n_inputs || n->inputs[k] < 0) continue;
            const calq_value *v = &g->values[n->inputs[k]];
            /* a constant's own type: the value's may be unset for a folded one */
            if ((v->constant ? v->constant->dtype : v->dtype) == CALQ_DTYPE_FLOAT16) {
                *node = i;
                *value = n->inputs[k];
                return true;
            }
        }
    }
    return false;
}

int calq__qkind_group(const calq_qkind *k, const calq_node *n)
{
    return k->grouped ? (int)calq__attr_int(n, "group", 1) : 1;
}

int calq__qkind_weight_axis(const calq_qkind *k, const calq_node *n, int ndim)
{
    int axis = k->weight_channel_axis < 0 ? ndim + k->weight_channel_axis : k->weight_channel_axis;
    if (axis < 0 || axis >= ndim) return -1;
    if (k->transpose_attr && ndim >= 2 && calq__attr_int(n, k->transpose_attr, 0)) {
        if (axis == ndim - 1)
            axis = ndim - 2;
        else if (axis == ndim - 2)
            axis = ndim - 1;
    }
    return axis;
}

int64_t calq__qkind_out_channels(const calq_qkind *k, const calq_node *n, int ndim, const int64_t *dims)
{
    int axis = calq__qkind_weight_axis(k, n, ndim);
    if (axis < 0) return 0;
    int64_t c = dims[axis];
    if (k->layout == CALQ_WEIGHTS_CONV_TRANSPOSE) c *= calq__qkind_group(k, n);
    if (k->layout == CALQ_WEIGHTS_RNN) c *= dims[0]; /* per direction and gate row */
    return c;
}

int calq__qkind_n_weights(const calq_qkind *k)
{
    return k->weights != CALQ_QKIND_WEIGHTS_CONST ? 0 : 1 + (k->weight2_input >= 0);
}

bool calq__node_folds_bn(const calq_node *n)
{
    const calq_qkind *k = n->domain[0] ? NULL : calq__qkind_by_onnx(n->op_type);
    return k && k->folds_bn;
}

/* A model computing in float16 (its layers read float16 activations and weights) is refused
 * before any inference: calq's layers compute in float32 and the writers patch the model as it
 * is, so such a layer would stay float without a word (the layers scheme) or stop the run at its
 * Conv kernel (int8). Float16 weights behind a Cast to float32 are float32 weights by now
 * (calq__pass_const_weights) and pass. */
calq_status calq__refuse_float16(const calq_graph *g, calq_error *err)
{
    int ni, v;
    if (!calq__first_float16_layer(g, &ni, &v)) return CALQ_OK;
    return calq__fail(err, CALQ_ERR_UNSUPPORTED, NULL,
                      "the model computes in float16: %s '%s' reads the float16 tensor '%s'; calq calibrates "
                      "models that compute in float32. Convert the model to float32 first (its float16 "
                      "initializers, inputs and outputs), or keep only the weights in float16 behind "
                      "Cast(to=float) nodes, which calq reads as float32 weights (docs/cli.md, float16 models)",
                      g->nodes[ni].op_type, g->nodes[ni].name, g->values[v].name);
}
