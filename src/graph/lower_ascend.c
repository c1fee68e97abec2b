/* The integer layers of Ascend deploy models as calq's own operators.
 *
 * A deploy model (amct-reference.md §9.1) writes an integer layer as an ordinary Conv, Gemm, ...
 * whose input 0 is the int8 output of an AscendQuant, whose weight is int8 and whose bias is
 * int32; it computes sum((q_x - offset_d) * q_w) + bias_q into int32, and an AscendDequant turns
 * that into float. The offset_d it needs is an attribute of the AscendQuant, not of the layer.
 * Caffe deploy models load as the same operators (src/frontend/caffe_layers_quant.c: Quant ->
 * AscendQuant, DeQuant -> AscendDequant; InnerProduct -> Flatten + Gemm).
 *
 * This pass finds those layers by their structure, input 0 produced (directly, or through layout
 * ops that move int8 values unchanged) by an AscendQuant, and rewrites each in place into the
 * internal operator calq.Ascend<op> with the AscendQuant's offset as its `input_offset`
 * attribute; the layer keeps its name, inputs, output and its own attributes. The kernels then
 * read everything from their node, and the float kernels stay float only.
 *
 * The input side alone decides: an AscendQuant always produces int8, and an int8 input is what
 * made these layers integer layers. The AscendDequant stays its own operator, so the int32 sums
 * remain a tensor a run can dump. Whether the weight and bias really are int8 / int32 is the
 * kernel's check (it fails naming the layer), and an AscendQuant whose offset is not an integer
 * in [-128, 127] is left alone: it fails at its own kernel, naming itself. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "graph/passes.h"

/* The layers that have an integer form, and their internal operators (one row per kind). */
static const struct {
    const char *op, *lowered;
} layers[] = {
    {"Conv", "AscendConv"},     {"ConvTranspose", "AscendConvTranspose"}, {"Gemm", "AscendGemm"},
    {"MatMul", "AscendMatMul"}, {"AveragePool", "AscendAveragePool"},
};

/* Ops that pass int8 values through unchanged (Caffe's InnerProduct imports as Flatten + Gemm),
 * through which the AscendQuant's offset still holds. */
static const char *const layout_ops[] = {"Flatten", "Reshape", "Squeeze", "Unsqueeze", "Identity"};

/* A chain of layout ops longer than this is not a deploy model; it also bounds the walk. */
#define MAX_LAYOUT_HOPS 16

static bool default_domain(const calq_node *n)
{
    return !n->domain[0] || strcmp(n->domain, "ai.onnx") == 0;
}

static const char *lowered_name(const calq_node *n)
{
    if (!default_domain(n)) return NULL;
    for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++)
        if (strcmp(n->op_type, layers[i].op) == 0) return layers[i].lowered;
    return NULL;
}

static bool layout_op(const calq_node *n)
{
    if (!default_domain(n)) return false;
    for (size_t i = 0; i < sizeof layout_ops / sizeof layout_ops[0]; i++)
        if (strcmp(n->op_type, layout_ops[i]) == 0) return true;
    return false;
}

/* The AscendQuant whose output reaches value v through layout ops only, or -1. prod[v] is v's
 * producing node (-1 for inputs and constants). */
static int ascend_quant_upstream(const calq_graph *g, const int *prod, int v)
{
    for (int hop = 0; v >= 0 && hop <= MAX_LAYOUT_HOPS; hop++) {
        const int p = prod[v];
        if (p < 0) return -1;
        const calq_node *q = &g->nodes[p];
        if (default_domain(q) && strcmp(q->op_type, "AscendQuant") == 0) return p;
        if (!layout_op(q) || q->n_inputs < 1) return -1;
        v = q->inputs[0];
    }
    return -1;
}

/* offset_d of an AscendQuant (§9.1: an integer in [-128, 127], default 0), false when invalid. */
static bool quant_offset(const calq_node *q, int64_t *offset)
{
    const float o = calq__attr_float(q, "offset", 0.0f);
    if (!(o == floorf(o)) || o < -128.0f || o > 127.0f) return false;
    *offset = (int64_t)o;
    return true;
}

static calq_status lower_node(calq_graph *g, int ni, const char *op, int64_t offset, calq_error *err)
{
    calq_node *n = &g->nodes[ni];
    char *op_type = strdup(op), *domain = strdup(CALQ_DOMAIN_INTERNAL);
    if (!op_type || !domain) {
        free(op_type);
        free(domain);
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, n->name, "out of memory");
    }
    /* an attribute of that name the file gave the layer (no ONNX operator has one) is overridden:
     * retyped in place, its other members still owned and freed with it */
    calq_attr *a = (calq_attr *)calq__attr(n, "input_offset");
    if (!a) a = calq__node_add_attr(g, ni, "input_offset", CALQ_ATTR_INT);
    if (!a) {
        free(op_type);
        free(domain);
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, n->name, "out of memory");
    }
    a->type = CALQ_ATTR_INT;
    a->i = offset;
    n = &g->nodes[ni];
    free(n->op_type);
    free(n->domain);
    n->op_type = op_type;
    n->domain = domain;
    return CALQ_OK;
}

calq_status calq__pass_lower_ascend(calq_graph *g, int *n_lowered, calq_error *err)
{
    *n_lowered = 0;
    bool any = false;
    for (int i = 0; i < g->n_nodes && !any; i++)
        any = default_domain(&g->nodes[i]) && strcmp(g->nodes[i].op_type, "AscendQuant") == 0;
    if (!any) return CALQ_OK; /* not a deploy model */
    /* the producers as the nodes say, without reordering them (callers may hold node indices) */
    int *prod = malloc(sizeof(int) * (size_t)(g->n_values + 1));
    if (!prod) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    for (int v = 0; v < g->n_values; v++) prod[v] = -1;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_outputs; k++)
            if (g->nodes[i].outputs[k] >= 0) prod[g->nodes[i].outputs[k]] = i;
    calq_status st = CALQ_OK;
    for (int i = 0; i < g->n_nodes && st == CALQ_OK; i++) {
        const calq_node *n = &g->nodes[i];
        const char *op = lowered_name(n);
        if (!op || n->n_inputs < 1) continue;
        const int q = ascend_quant_upstream(g, prod, n->inputs[0]);
        int64_t offset;
        if (q < 0 || !quant_offset(&g->nodes[q], &offset)) continue;
        st = lower_node(g, i, op, offset, err);
        *n_lowered += st == CALQ_OK;
    }
    free(prod);
    return st;
}
