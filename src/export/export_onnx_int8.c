/* The int8 plan of the QDQ and QOperator writers (issue 12, item 5): factors for the tensors
 * between layers, so that onnxruntime runs the whole network on 8-bit tensors instead of
 * converting back to float around every layer.
 *
 * AMCT's record holds the input factors of the quantized layers only (§7.1), which leaves every
 * other op float. A calibration with int8_tensors (calq_calibrate_opts) also records the inputs of
 * the float ops onnxruntime runs on 8-bit tensors (the tensor-only kinds of graph/qkind.c: Add,
 * Mul, Concat, MaxPool, GlobalAveragePool, Resize, Sigmoid, LeakyRelu, Softmax) under
 * "<layer>:<input>" keys that the config does not list; their presence selects this plan.
 *
 *  - Tensors are grouped across the ops that only move or select values (Reshape, Transpose,
 *    Flatten, Squeeze, Unsqueeze, Slice, Gather's data, Expand, Tile, Identity, MaxPool, a nearest
 *    Resize):
 *    onnxruntime drops a DQ -> op -> Q pair around them only when both sides have the same factors,
 *    and those ops keep values inside the input's range, so one set serves the group. Not over a
 *    tensor a float op computed (float_source: an attention's q / k / v sliced from one bias Add):
 *    there the op runs in float and its output is quantized with its own reader's factors, so
 *    branches of different ranges do not share one scale and nothing is rounded twice. A group takes
 *    the factors of the first record entry (in node order) of any input that reads one of its
 *    tensors: a quantized layer's input (its own key, or "<layer>:1"), or a recorded input of a
 *    float op. One set per tensor: a layer whose record differs (a pool's output recorded apart
 *    from its input) is written with the group's factors, its bias quantized with them.
 *  - A Concat's inputs that are tensors of their own, read by the Concat alone, join its output's
 *    group when a reader of the output has a record (concat_join): QLinearConcat then copies
 *    instead of requantizing each input.
 *  - A tensor is quantized only where a reader takes it as uint8 (calq__int8_reads: a quantized
 *    layer, an 8-bit op whose operands and output are quantized, a value-moving op of its group
 *    whose output is), repeated until nothing changes (prune): a Q / DQ pair before float ops
 *    only rounds. A quantized Conv's output stays quantized (QLinearConv needs it). Both writers follow this plan, so
 * both files quantize the same tensors; in the QDQ file a float op reads the dequantized tensor only where the producer
 * writes uint8 (calq__int8_dq_read), as the QOperator file's float ops do.
 *  - Activations are uint8, zero point offset_d + 128: the same integers shifted, so exact (§0.3),
 *    and what onnxruntime's x86 kernels take (QLinearConv u8 x s8, QLinearAdd u8, ...); an int8
 *    tensor read by several layers would stay int8 there and leave those layers in float.
 *    Weights stay int8 (symmetric, §6.1).
 *  - A Relu / Clip after a layer is kept in the file and left to onnxruntime, which drops it when
 *    the Q after it makes it redundant (a zero point of 0 for Relu, IFMR forces one, §3.3); for a
 *    Clip(lo, hi) with lo <= 0 the group's scale is capped to hi / (255 - zp), so that the Q's
 *    range lies inside [lo, hi] and the Clip is redundant (ReLU6 in MobileNets).
 *
 * Each tensor of a group with factors is quantized once after its producer and read through one
 * DequantizeLinear by every consumer (onnxruntime gives each consumer its own). A graph output
 * stays the float tensor. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "export/export_onnx.h"

static calq_status oom(calq_error *err)
{
    return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "save: out of memory");
}

static const char *const movers[] = {"Reshape", "Transpose", "Flatten", "Squeeze",  "Unsqueeze", "Slice",
                                     "Gather",  "Expand",    "Tile",    "Identity", "MaxPool",   "Resize"};

bool calq__int8_mover(const calq_node *n)
{
    if (n->domain[0]) return false;
    /* a linear / cubic Resize makes new values: onnxruntime's uint8 one interpolates in its own
     * integer arithmetic (1-step differences from the float one, compounding through the
     * layers after it on NanoDet), so it keeps factors of its own and runs in float */
    if (!strcmp(n->op_type, "Resize") && strcmp(calq__attr_str(n, "mode", "nearest"), "nearest")) return false;
    for (size_t i = 0; i < sizeof movers / sizeof movers[0]; i++)
        if (!strcmp(n->op_type, movers[i])) return n->n_outputs >= 1 && n->n_inputs >= 1;
    return false;
}

/* A Concat's inputs that nothing else reads share the output's factors: onnxruntime's
 * QLinearConcat then copies them instead of requantizing each into the output's scale (a second
 * rounding; whatever finer scale an input had is lost in that requantization anyway). On
 * NanoDet-m (ShuffleNet blocks end in a Concat) that rounding cost 0.0012 of the worst output
 * cosine in onnxruntime. */
static int find(int *parent, int v)
{
    while (parent[v] != v) v = parent[v] = parent[parent[v]];
    return v;
}

static bool float_activation(const calq_graph *g, int v);

/* Only where the output's factors come from a reader of the output (its readers were calibrated
 * on the union of the inputs; a Concat that is a graph output, as FastestDet's head joining
 * Sigmoid scores and raw box offsets, keeps a scale per input), and only inputs that are one
 * tensor of their own (produced by an op that is not a mover, read by this Concat alone, not a
 * graph output), so that no chain of blocks ends up on one scale. */
static void concat_join(const calq_graph *g, const calq_node *n, int *parent, const int *uses,
                        const calq_record_layer **root_rec)
{
    if (n->domain[0] || strcmp(n->op_type, "Concat") || n->n_outputs < 1 || n->outputs[0] < 0 ||
        !float_activation(g, n->outputs[0]))
        return;
    int o = find(parent, n->outputs[0]);
    if (!root_rec[o]) return;
    for (int k = 0; k < n->n_inputs; k++) {
        int v = n->inputs[k];
        if (v < 0 || !float_activation(g, v) || uses[v] != 1 || g->values[v].is_output) continue;
        int p = g->values[v].producer;
        if (p < 0 || calq__int8_mover(&g->nodes[p])) continue;
        int b = find(parent, v);
        if (b != o) parent[b] = o;
    }
}

static bool float_activation(const calq_graph *g, int v)
{
    const calq_value *x = &g->values[v];
    return !x->constant &&
           (x->dtype == CALQ_DTYPE_FLOAT32 || x->dtype == CALQ_DTYPE_UNDEFINED || x->dtype == CALQ_DTYPE_FLOAT16);
}

static bool is_op(const calq_node *n, const char *op)
{
    return !n->domain[0] && !strcmp(n->op_type, op);
}

const char *calq__int8_qlinear_op(const calq_node *n, int *nin)
{
    /* the kinds table's qlinear column (graph/qkind.c): one list of the ops with an 8-bit form */
    const calq_qkind *k = n->domain[0] ? NULL : calq__qkind_by_onnx(n->op_type);
    *nin = 1;
    if (!k || !k->tensor_only || !k->qlinear) return NULL;
    if (k->int8_all_operands || k->act_inputs == CALQ_QKIND_EVERY_INPUT) *nin = n->n_inputs;
    return k->qlinear;
}

static bool qlinear_type(const calq_node *n, int *nin)
{
    return calq__int8_qlinear_op(n, nin) != NULL;
}

/* Is value v computed in float whatever the plan: its producer, looked through the ops that move
 * values and a Relu / Clip (absorbed into the layer before them), has no 8-bit form (a Div, an
 * Add / Mul with a constant operand, LayerNorm's arithmetic, Softmax). A graph input is not: the
 * plan quantizes it where a layer reads it, as before. */
static bool float_source(const calq__xctx *c, int v)
{
    const calq_graph *g = c->g;
    for (int hops = 0; v >= 0 && hops <= g->n_nodes; hops++) {
        const int p = g->values[v].producer;
        if (p < 0) return false;
        const calq_node *n = &g->nodes[p];
        int nin;
        if (c->quantized[p]) return false;
        if (qlinear_type(n, &nin)) {
            bool var = true; /* Add / Mul with a constant operand stays float (int8_all_operands) */
            for (int k = 0; k < nin && var; k++) var = calq__qkind_int8_input(g, p, k) != NULL;
            return !var;
        }
        if (!calq__int8_mover(n) && !is_op(n, "Relu") && !is_op(n, "Clip")) return true;
        v = n->n_inputs > 0 ? n->inputs[0] : -1;
    }
    return false;
}

/* The record entry for input k of node i: a quantized layer's input, or a recorded input of a
 * float op ("<layer>:<k>", a tensor_quantize entry or calibration's int8_tensors). Not an input
 * of an op the plan leaves float (an Add / Mul with a constant operand, calq__qkind_int8_input):
 * its entry (a record from before that rule, or tensor_quantize's, which then gets the node's own
 * pair as in the layers scheme) does not make the tensor int8 for every reader. */
static const calq_record_layer *edge_record(const calq__xctx *c, int i, int k)
{
    if (c->quantized[i]) {
        if (k == 0 || calq__x_act_input(c, i, k)) return calq__x_input_record(c, i, k);
        return NULL;
    }
    if (!calq__qkind_int8_input(c->g, i, k)) return NULL;
    char *key = calq__record_key(c->g->nodes[i].name, k);
    const calq_record_layer *rl = key ? calq__record_find(c->rec, key) : NULL;
    free(key);
    return rl;
}

bool calq__int8_wanted(const calq__xctx *c)
{
    if (c->fmt != CALQ_SAVE_QDQ && c->fmt != CALQ_SAVE_QOPERATOR) return false;
    for (int i = 0; i < c->rec->n_layers; i++) {
        int input, ni = calq__record_key_node(c->g, c->rec->layers[i].name, &input);
        if (ni < 0 || input < 0 || c->quantized[ni] || !calq__qkind_int8_input(c->g, ni, input)) continue;
        if (!calq__config_find_tensor(c->cfg, c->g->nodes[ni].name, input)) return true; /* not the config's */
    }
    return false;
}

/* Clip bounds as constants (attributes before opset 11); false when not constant. */
static bool clip_bounds(const calq_graph *g, const calq_node *n, float *lo, float *hi)
{
    *lo = -FLT_MAX;
    *hi = FLT_MAX;
    if (n->opset < 11) {
        *lo = calq__attr_float(n, "min", *lo);
        *hi = calq__attr_float(n, "max", *hi);
        return true;
    }
    for (int k = 1; k <= 2; k++) {
        if (k >= n->n_inputs || n->inputs[k] < 0) continue;
        const calq_tensor *t = g->values[n->inputs[k]].constant;
        if (!t || t->dtype != CALQ_DTYPE_FLOAT32 || calq_tensor_numel(t) != 1) return false;
        *(k == 1 ? lo : hi) = *(const float *)t->data;
    }
    return true;
}

/* Is Relu / Clip node r redundant before the Q of its output (its range inside the clip)? */
bool calq__int8_clip_redundant(const calq__xctx *c, int r)
{
    const calq_node *n = &c->g->nodes[r];
    const calq__xq *q = &c->vq[n->outputs[0]];
    const float lo = q->scale * (float)(0 - q->zp), hi = q->scale * (float)(255 - q->zp);
    if (is_op(n, "Relu")) return q->zp == 0;
    float a = -3.4e38f, b = 3.4e38f;
    if (n->opset < 11) {
        a = calq__attr_float(n, "min", a);
        b = calq__attr_float(n, "max", b);
    } else {
        for (int k = 1; k <= 2 && k < n->n_inputs; k++) {
            if (n->inputs[k] < 0) continue;
            const calq_tensor *t = c->g->values[n->inputs[k]].constant;
            if (!t || t->dtype != CALQ_DTYPE_FLOAT32 || calq_tensor_numel(t) != 1) return false;
            *(k == 1 ? &a : &b) = *(const float *)t->data;
        }
    }
    return a <= lo && b >= hi;
}

/* The single reader of y when it is a Relu / Clip on y whose output is quantized (the QOperator
 * writer absorbs it into the 8-bit op before it), else -1. */
static int folded_clip(const calq__xctx *c, int y)
{
    const calq_graph *g = c->g;
    const calq_readers *r = &c->readers;
    if (g->values[y].is_output || r->start[y + 1] - r->start[y] != 1) return -1;
    const int ri = r->node[r->start[y]];
    const calq_node *rn = &g->nodes[ri];
    if ((!is_op(rn, "Relu") && !is_op(rn, "Clip")) || rn->inputs[0] != y || rn->outputs[0] < 0 ||
        !c->vq[rn->outputs[0]].on || !calq__int8_clip_redundant(c, ri))
        return -1; /* the QOperator writer absorbs it only when redundant: the same test here */
    return ri;
}

bool calq__int8_reads(const calq__xctx *c, int i, int k)
{
    const calq_graph *g = c->g;
    const calq_node *n = &g->nodes[i];
    const int v = k >= 0 && k < n->n_inputs ? n->inputs[k] : -1;
    if (v < 0 || !c->vq[v].on) return false;
    if (c->quantized[i]) return k == 0 || calq__x_act_input(c, i, k);
    const int y = n->n_outputs > 0 ? n->outputs[0] : -1;
    if (y < 0) return false;
    if (calq__int8_mover(n)) return k == 0 && c->vq[y].on && c->vq[y].group == c->vq[v].group;
    int nin;
    if (!qlinear_type(n, &nin) || k >= nin) return false;
    if (!c->vq[y].on && folded_clip(c, y) < 0) return false; /* its output float: the op is float */
    for (int o = 0; o < nin; o++)
        if (n->inputs[o] < 0 || !c->vq[n->inputs[o]].on || !calq__qkind_int8_input(g, i, o)) return false;
    return true;
}

bool calq__int8_dq_read(const calq__xctx *c, int i, int k)
{
    const calq_graph *g = c->g;
    const int v = g->nodes[i].inputs[k];
    if (v < 0 || !c->vq[v].on) return false;
    if (calq__int8_reads(c, i, k)) return true;
    /* a float reader: the dequantized tensor where the producer writes uint8 (onnxruntime fuses
     * it only when the Q is its one reader; the QOperator file dequantizes its output), else the
     * float tensor itself, which the QOperator file's float ops read too */
    const int p = g->values[v].producer;
    if (p < 0) return false;
    if (c->quantized[p] || calq__int8_reads(c, p, 0)) return true;
    const calq_node *n = &g->nodes[p];
    if ((is_op(n, "Relu") || is_op(n, "Clip")) && n->inputs[0] >= 0 && g->values[n->inputs[0]].producer >= 0) {
        const int q = g->values[n->inputs[0]].producer;
        return c->quantized[q] || calq__int8_reads(c, q, 0);
    }
    return false;
}

/* A tensor no reader takes as uint8 is not quantized: its readers are float ops (GELU's Div and
 * Mul after a bias Add, an attention's Div by a constant) onnxruntime runs in float anyway, so a
 * Q / DQ pair there only rounds (ViT-B/16's QDQ file had 197 such tensors; its cosine 0.837
 * against the QOperator file's 0.953). An 8-bit op whose output is so left float is float too,
 * which frees its inputs in turn: repeated until nothing changes (each round only removes). Not
 * a Conv's output, whose own integer form needs it (below). */
static bool conv_output(const calq__xctx *c, int v)
{
    const calq_graph *g = c->g;
    int p = g->values[v].producer;
    if (p >= 0 && (is_op(&g->nodes[p], "Relu") || is_op(&g->nodes[p], "Clip")) && g->nodes[p].inputs[0] >= 0)
        p = g->values[g->nodes[p].inputs[0]].producer; /* absorbed into the Conv's output range */
    return p >= 0 && c->quantized[p] && c->kinds[p]->id == CALQ_QKIND_CONV;
}

/* Queue value u for another look (once at a time). */
static void requeue(int u, int *stack, int *sp, bool *queued)
{
    if (u < 0 || queued[u]) return;
    queued[u] = true;
    stack[(*sp)++] = u;
}

/* Queue the inputs of node i: whether they are read as uint8 can depend on i's output (or on
 * i's other operands), which has just become float. */
static void requeue_inputs(const calq_graph *g, int i, int *stack, int *sp, bool *queued)
{
    if (i < 0) return;
    for (int k = 0; k < g->nodes[i].n_inputs; k++) requeue(g->nodes[i].inputs[k], stack, sp, queued);
}

/* A worklist, not rounds over every value: a value turned float re-queues only the values whose
 * answer it can change (the producer's inputs, its readers' other operands, and through an absorbed
 * Relu / Clip the inputs of the op before it). Rounds took 30 s on a 10k-op chain whose value
 * numbers ran against the data flow (one link freed per round). */
static calq_status prune(calq__xctx *c, calq_error *err)
{
    const calq_graph *g = c->g;
    const calq_readers *r = &c->readers;
    const int nv = g->n_values;
    int *stack = calq__xa_alloc(&c->x.a, sizeof(int) * (size_t)(nv + 1));
    bool *queued = calq__xa_alloc(&c->x.a, sizeof(bool) * (size_t)(nv + 1));
    if (!stack || !queued) return oom(err);
    memset(queued, 0, sizeof(bool) * (size_t)(nv + 1));
    int sp = 0;
    for (int v = 0; v < nv; v++) requeue(v, stack, &sp, queued); /* popped last value first */
    while (sp > 0) {
        const int v = stack[--sp];
        queued[v] = false;
        if (!c->vq[v].on) continue;
        /* a Conv's output stays: onnxruntime's integer Conv (QLinearConv, and its QDQ
         * fusion) needs a quantized output and runs the Conv in float without one, unlike a
         * MatMul / Gemm (MatMulIntegerToFloat, QGemm with a float output) */
        if (conv_output(c, v)) continue;
        bool read = false;
        for (int e = r->start[v]; e < r->start[v + 1] && !read; e++)
            read = calq__int8_reads(c, r->node[e], r->input[e]);
        if (read) continue;
        c->vq[v].on = false;
        const int p = g->values[v].producer;
        requeue_inputs(g, p, stack, &sp, queued);
        for (int e = r->start[v]; e < r->start[v + 1]; e++) requeue_inputs(g, r->node[e], stack, &sp, queued);
        if (p >= 0 && (is_op(&g->nodes[p], "Relu") || is_op(&g->nodes[p], "Clip")) && g->nodes[p].inputs[0] >= 0)
            requeue_inputs(g, g->values[g->nodes[p].inputs[0]].producer, stack, &sp, queued);
    }
    return CALQ_OK;
}

/* Softmax on 8-bit tensors: onnxruntime fuses DequantizeLinear -> Softmax -> QuantizeLinear (in
 * either file; its optimizer first moves a DequantizeLinear down across Reshape / Transpose, so a
 * Softmax over a quantized Conv's reshaped output fuses too) into its QLinearSoftmax, whose
 * kernel multiplies an exp() table value scaled up to about FLT_MAX / (e^5 D) (D: the elements
 * one softmax normalises) by floor(1 / y_scale), in float. Above e^5 D = 148 D that product is
 * infinite and the output garbage: YOLOv8's DFL head (a softmax over 16 bins whose largest
 * probability was 0.077, so y_scale = 0.077 / 255 and 1 / y_scale = 3312 > 148 * 16) came out of
 * onnxruntime in [0, 1.05] instead of [7.3, 7.6], cosine 0.61 against calq's 1.00000 on the same
 * file. And the kernel uses floor(1 / y_scale), not y_scale. So a quantized Softmax output gets
 * the scale 1 / K exactly, for an integer K <= 140 D (a wider range than calibrated, never a
 * narrower one; onnxruntime's integers are then the file's), K <= 256 when D is not known (a
 * dynamic axis: onnxruntime's own quantizer's 1 / 256, safe from D = 2 on). New scales are set in
 * scale[group]. */
static void softmax_scales(calq__xctx *c, float *scale)
{
    const calq_graph *g = c->g;
    for (int i = 0; i < g->n_nodes; i++) {
        const calq_node *n = &g->nodes[i];
        if (n->domain[0] || strcmp(n->op_type, "Softmax") || n->n_inputs < 1 || n->n_outputs < 1) continue;
        const int in = n->inputs[0], out = n->outputs[0];
        if (in < 0 || out < 0 || !c->vq[out].on || !(c->vq[out].scale > 0.0f)) continue;
        const calq_value *x = &g->values[in];
        int64_t axis = calq__attr_int(n, "axis", n->opset < 13 ? 1 : -1), d = -1;
        if (x->ndim > 0 && axis >= -x->ndim && axis < x->ndim) {
            if (axis < 0) axis += x->ndim;
            d = 1; /* opset 13: the axis; before, every axis from it on (the 2-D reading) */
            for (int k = (int)axis; k < (n->opset < 13 ? x->ndim : (int)axis + 1) && d > 0; k++)
                d = x->dims[k] > 0 && x->dims[k] < ((int64_t)1 << 40) / d ? d * x->dims[k] : -1;
        }
        calq__xq *q = &c->vq[out];
        double k = floor(1.0 / (double)q->scale), cap = d > 0 ? floor(140.0 * (double)d) : 256.0;
        if (k > cap) k = cap;
        if (k < 1.0) k = 1.0;
        float s = (float)(1.0 / k);
        while (floorf(1.0f / s) < (float)k) s = nextafterf(s, 0.0f);
        /* two Softmax outputs in one group (a Concat joins them): the smaller K, safe for both */
        if (s > scale[q->group]) scale[q->group] = s;
    }
}

/* Tensors a comparison reads (Equal, Less, ..., and the ordering ops ArgMax / ArgMin / TopK, where
 * ties pick the first index) stay float, and so do the tensors they are computed from by
 * element-wise one-to-one steps (Sigmoid, Relu, ...; the movers share a group already): an 8-bit
 * grid turns neighbouring values into equal ones, so CenterNet's peak test
 * Equal(MaxPool(heat), heat) on heat = Sigmoid(logits) found every plateau a peak (1181 kept
 * against the float model's 1045; its heat-map cosine 0.955, 0.971 with only the compared
 * tensors float, against 0.980 for AMCT's scheme). */
static void compared_float(calq__xctx *c, bool *off)
{
    static const char *const cmp[] = {"Equal",          "Less",   "Greater", "LessOrEqual",
                                      "GreaterOrEqual", "ArgMax", "ArgMin",  "TopK"};
    static const char *const unary[] = {"Sigmoid", "Tanh", "Relu", "LeakyRelu", "Clip",    "HardSigmoid",
                                        "Exp",     "Neg",  "Elu",  "Selu",      "Softplus"};
    const calq_graph *g = c->g;
    for (int i = 0; i < g->n_nodes; i++) {
        const calq_node *n = &g->nodes[i];
        bool is_cmp = false;
        for (size_t j = 0; !n->domain[0] && j < sizeof cmp / sizeof cmp[0]; j++) is_cmp |= !strcmp(n->op_type, cmp[j]);
        for (int k = 0; is_cmp && k < n->n_inputs; k++) {
            /* up the chain through the movers and one-to-one steps, a bounded walk */
            for (int v = n->inputs[k], steps = 0; v >= 0 && steps < 64; steps++) {
                if (c->vq[v].on) off[c->vq[v].group] = true;
                const int p = g->values[v].producer;
                const calq_node *pn = p >= 0 ? &g->nodes[p] : NULL;
                bool one_to_one = pn && calq__int8_mover(pn);
                for (size_t j = 0; pn && !pn->domain[0] && j < sizeof unary / sizeof unary[0]; j++)
                    one_to_one |= !strcmp(pn->op_type, unary[j]);
                v = one_to_one && pn->n_inputs >= 1 ? pn->inputs[0] : -1;
            }
        }
    }
}

calq_status calq__int8_plan(calq__xctx *c, calq_error *err)
{
    const calq_graph *g = c->g;
    int nv = g->n_values;
    int *parent = calq__xa_alloc(&c->x.a, sizeof(int) * (size_t)(nv + 1));
    int *uses = calq__xa_alloc(&c->x.a, sizeof(int) * (size_t)(nv + 1));
    const calq_record_layer **root_rec = calq__xa_alloc(&c->x.a, sizeof(void *) * (size_t)(nv + 1));
    c->vq = calq__xa_alloc(&c->x.a, sizeof(calq__xq) * (size_t)(nv + 1));
    if (!parent || !uses || !root_rec || !c->vq) return oom(err);
    for (int v = 0; v < nv; v++) parent[v] = v;
    for (int i = 0; i < g->n_nodes; i++) {
        const calq_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_inputs; k++)
            if (n->inputs[k] >= 0) uses[n->inputs[k]]++;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const calq_node *n = &g->nodes[i];
        if (!calq__int8_mover(n) || n->inputs[0] < 0 || n->outputs[0] < 0) continue;
        if (!float_activation(g, n->inputs[0]) || !float_activation(g, n->outputs[0])) continue;
        /* over a float producer the op runs in float and the tensor is quantized after it with its
         * own reader's factors: one tensor (an attention's q, k and v sliced from one bias Add)
         * then does not force one scale on branches of other ranges, and the data movement adds
         * no rounding, as in the QOperator file */
        if (float_source(c, n->inputs[0])) continue;
        int a = find(parent, n->inputs[0]), b = find(parent, n->outputs[0]);
        if (a != b) parent[b] = a;
    }
    /* the first record entry of an input reading the group, in node order */
    for (int i = 0; i < g->n_nodes; i++) {
        const calq_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_inputs; k++) {
            int v = n->inputs[k];
            if (v < 0 || !float_activation(g, v)) continue;
            int r = find(parent, v);
            if (root_rec[r]) continue;
            root_rec[r] = edge_record(c, i, k);
        }
    }
    for (int i = 0; i < g->n_nodes; i++) concat_join(g, &g->nodes[i], parent, uses, root_rec);
    for (int v = 0; v < nv; v++) {
        const calq_record_layer *rl = root_rec[find(parent, v)];
        if (!rl || !float_activation(g, v) || !uses[v]) continue;
        calq__xq *q = &c->vq[v];
        q->on = true;
        q->scale = rl->scale_d;
        q->zp = rl->offset_d + 128;
        q->group = find(parent, v);
    }
    /* compared tensors float first, so that prune frees what only they made 8-bit */
    bool *off = calq__xa_alloc(&c->x.a, sizeof(bool) * (size_t)(nv + 1));
    float *scale = calq__xa_alloc(&c->x.a, sizeof(float) * (size_t)(nv + 1));
    if (!off || !scale) return oom(err);
    memset(off, 0, sizeof(bool) * (size_t)(nv + 1));
    memset(scale, 0, sizeof(float) * (size_t)(nv + 1));
    compared_float(c, off);
    for (int v = 0; v < nv; v++)
        if (c->vq[v].on && off[c->vq[v].group]) c->vq[v].on = false;
    /* Clip(lo <= 0, hi) before a Q: cap the group's scale so the Q's range is inside [lo, hi]
     * (before prune, which asks whether a Clip is redundant) */
    for (int i = 0; i < g->n_nodes; i++) {
        const calq_node *n = &g->nodes[i];
        float lo, hi;
        if (n->domain[0] || strcmp(n->op_type, "Clip") || n->outputs[0] < 0 || !c->vq[n->outputs[0]].on ||
            !clip_bounds(g, n, &lo, &hi))
            continue;
        const calq__xq *q = &c->vq[n->outputs[0]];
        if (q->zp >= 255 || lo > -q->scale * (float)q->zp || !(hi > 0.0f) || q->scale * (float)(255 - q->zp) <= hi)
            continue;
        float capped = hi / (float)(255 - q->zp);
        for (int v = 0; v < nv; v++)
            if (c->vq[v].on && c->vq[v].group == q->group) c->vq[v].scale = capped;
    }
    CALQ_TRY(prune(c, err));
    /* last: the Softmax rule looks at what is still quantized */
    softmax_scales(c, scale);
    for (int v = 0; v < nv; v++)
        if (c->vq[v].on && scale[c->vq[v].group] > 0.0f) c->vq[v].scale = scale[c->vq[v].group];
    return CALQ_OK;
}

const char *calq__int8_q(calq__xctx *c, int v, calq_error *err)
{
    calq__xq *q = &c->vq[v];
    if (q->qname) return q->qname;
    const char *t = c->g->values[v].name;
    char *qn = calq__xname(c, "%s_quantized", t), *sn = calq__xname(c, "%s_scale", t);
    char *zn = calq__xname(c, "%s_zero_point", t);
    /* a QLinear op writes a produced tensor: no QuantizeLinear, so no name taken for one */
    char *nn = qn && !q->produced ? calq__xnode_name(c, "%s_QuantizeLinear", qn) : NULL;
    if (!qn || !sn || !zn || (!nn && !q->produced)) return oom(err), NULL;
    uint8_t zp = (uint8_t)q->zp;
    const char *in[3] = {t, sn, zn};
    if (!calq__xg_init_add(&c->x, calq__xg_tensor(&c->x, sn, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, NULL, 0, &q->scale,
                                                  sizeof(float))) ||
        !calq__xg_init_add(&c->x, calq__xg_tensor(&c->x, zn, ONNX__TENSOR_PROTO__DATA_TYPE__UINT8, NULL, 0, &zp, 1)))
        return oom(err), NULL;
    q->sname = sn;
    q->zname = zn;
    q->qname = qn;
    if (!q->produced &&
        !calq__xg_node(&c->x, calq__xg_new_node(&c->x, "QuantizeLinear", nn, in, 3, (const char **)&q->qname, 1)))
        return oom(err), NULL;
    return q->qname;
}

const char *calq__int8_dq(calq__xctx *c, int v, calq_error *err)
{
    calq__xq *q = &c->vq[v];
    if (q->dqname) return q->dqname;
    if (!calq__int8_q(c, v, err)) return NULL;
    char *dn = calq__xname(c, "%s_dequantized", c->g->values[v].name);
    char *nn = dn ? calq__xnode_name(c, "%s_DequantizeLinear", dn) : NULL;
    const char *in[3] = {q->qname, q->sname, q->zname};
    if (!nn || !calq__xg_node(&c->x, calq__xg_new_node(&c->x, "DequantizeLinear", nn, in, 3, (const char **)&dn, 1)))
        return oom(err), NULL;
    q->dqname = dn;
    return dn;
}

calq_record_layer calq__int8_input_record(const calq__xctx *c, int v, const calq_record_layer *rl)
{
    calq_record_layer r = *rl;
    if (c->vq && c->vq[v].on) {
        r.scale_d = c->vq[v].scale;
        r.offset_d = c->vq[v].zp - 128;
    }
    return r;
}

void calq__int8_resize_roi(const calq__xctx *c, const calq_node *n, Onnx__NodeProto *nd)
{
    /* an empty constant roi (opset 11-13 exports write one) is the omitted input: onnxruntime's
     * layout optimizer, moving a Transpose across a uint8 Resize, gathers the roi by the
     * permutation and fails at run time on an empty one (1.30, NanoDet) */
    if (n->domain[0] || strcmp(n->op_type, "Resize") || n->n_inputs < 2 || n->inputs[1] < 0 || nd->n_input < 2) return;
    const calq_tensor *roi = c->g->values[n->inputs[1]].constant;
    if (roi && calq_tensor_numel(roi) == 0 &&
        strcmp(calq__attr_str(n, "coordinate_transformation_mode", ""), "tf_crop_and_resize"))
        nd->input[1] = "";
}
