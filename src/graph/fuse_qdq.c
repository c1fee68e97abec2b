/* QDQ -> integer operators, the rewrite onnxruntime's CPU execution provider applies to a QDQ
 * model before it runs it, so that calq's results on a QDQ file (the ones `calq save` writes,
 * and others) equal onnxruntime's instead of those of a float fake-quant run (issue: QDQ
 * tensors differed by up to 12 steps on UltraFace).
 *
 * A layer computes Σ(q_x − o_x)(q_w − o_w) + bias_q exactly in integers and requantizes once
 * (amct-reference.md §9.1, the integer form; §0.3 for the convention q = round(x/s) + o).
 * Float fake-quant rounds every product and sum, so a value at a rounding tie can land one step
 * off, and the step then grows through the later layers.
 *
 * What onnxruntime does (1.x, CPU EP on x86-64, as its optimized graph shows), in order:
 *  1. ReluQuantFusion / ClipQuantFusion: a Relu whose only consumer is a QuantizeLinear with
 *     zero point at the type's minimum, or a Clip without min / max inputs (attributes) whose
 *     [min, max] covers the Q's range [s·(qmin − zp), s·(qmax − zp)] (within FLT_EPSILON), is
 *     removed: the Q clamps anyway. A Clip with min / max inputs stays (to step 4).
 *  2. EnsureUniqueDQForNodeUnit: a DequantizeLinear with several consumers is duplicated, one
 *     per consumer edge. Here the fused node reads the DQ's input directly instead, and the DQ
 *     stays while anything else still reads it.
 *  3. QDQS8ToU8: x86 has no int8 x int8 integer kernels, so int8 activations are recoded to
 *     uint8 (+128) where a Q has exactly one consumer, a DQ with at most one consumer edge and
 *     equal int8 scalar zero points. Where that fails (a quantized tensor read by several
 *     layers), the tensor stays int8 and the Conv / MatMul layers reading or writing it are NOT
 *     fused: they run in float, as in fake-quant. The recoding itself is exact, so calq keeps
 *     int8 and only applies its consequence for fusion.
 *  4. The QDQ selectors, all inputs from DQ nodes:
 *     - DQ(x), DQ(w)[, DQ(bias int32)] -> Conv -> Q (the Conv's only consumer) => QLinearConv;
 *     - DQ(a), DQ(b)[, DQ(C int32), alpha 1, beta 1] -> Gemm [-> Q] => QGemm (float output
 *       without a Q; int8 activations are fused too, with int8 weights);
 *     - DQ(a), DQ(b) -> MatMul -> Q => QLinearMatMul; without a Q consumer => MatMulIntegerToFloat
 *       (b per tensor or per column).
 *     The activation (x, a) and the output Q must have the same (recoded) type. A Relu / Clip
 *     left between the layer and its Q (one consumer each) is dropped too when its bounds,
 *     quantized with the Q's factors, cover the whole integer range (IsClipMadeRedundantByQ);
 *     otherwise the layer is not fused at all, not even into the float-output forms.
 *
 * calq's own extra conditions (onnxruntime does not check them; a file that breaks them keeps
 * the fake-quant form, which computes what the file says): zero points given and scales and zero
 * points of activations per tensor; per-channel weight scales on the output-channel axis; a bias
 * DQ with zero point 0 and scale x_scale·w_scale[c] (onnxruntime ignores the bias DQ's scale);
 * per-tensor b for QLinearMatMul; a Relu / Clip is dropped only before a Q with a finite
 * positive constant scale, and in step 1 only when dropping it is exact (activation_redundant).
 *     - DQ(a), DQ(b) -> Add / Mul -> Q => QLinearAdd / QLinearMul; DQ -> GlobalAveragePool /
 *       Sigmoid / LeakyRelu -> Q => QLinearGlobalAveragePool / QLinearSigmoid / QLinearLeakyRelu;
 *       DQ(x_i)... -> Concat -> Q => QLinearConcat (onnxruntime's com.microsoft operators,
 *       exec/kernels/qlinear_ops.c; the same 8-bit type in and out, per-tensor factors).
 *
 * Not emulated: QDQ propagation through data-movement ops and the dropping of DQ -> MaxPool /
 * Resize / Reshape ... -> Q pairs with equal factors (both compute the same integers: the op
 * keeps the quantized values, Q(DQ(q)) = q), and DQ -> AveragePool / Softmax -> Q into their
 * QLinear forms, which stay fake-quant here (a value on a rounding tie may then land one step
 * apart from onnxruntime's). */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/tensor.h"
#include "graph/passes.h"

typedef struct fq {
    calq_graph *g;
    int *uses;     /* per value: consumer edges among live nodes */
    int *consumer; /* per value: a consuming node (meaningful when uses == 1) */
    bool *dead;    /* per node: removed by this pass */
    bool *recoded; /* per value: an int8 Q output onnxruntime recodes to uint8 (step 3) */
} fq;

static bool is_op(const calq_node *n, const char *op)
{
    return !n->domain[0] && strcmp(n->op_type, op) == 0;
}

static bool graph_output(const calq_graph *g, int v)
{
    return g->values[v].is_output;
}

static const calq_tensor *constant(const calq_graph *g, const calq_node *n, int k)
{
    return k < n->n_inputs && n->inputs[k] >= 0 ? g->values[n->inputs[k]].constant : NULL;
}

static void count_uses(fq *f)
{
    const calq_graph *g = f->g;
    memset(f->uses, 0, sizeof(int) * (size_t)(g->n_values + 1));
    for (int i = 0; i < g->n_nodes; i++) {
        if (f->dead[i]) continue;
        for (int k = 0; k < g->nodes[i].n_inputs; k++) {
            int v = g->nodes[i].inputs[k];
            if (v < 0) continue;
            f->uses[v]++;
            f->consumer[v] = i;
        }
    }
}

/* The live node producing v, or -1. */
static int producer(const fq *f, int v)
{
    int p = v >= 0 ? f->g->values[v].producer : -1;
    return p >= 0 && !f->dead[p] ? p : -1;
}

static int sole_consumer(const fq *f, int v)
{
    return v >= 0 && f->uses[v] == 1 && !graph_output(f->g, v) ? f->consumer[v] : -1;
}

/* A scalar 8-bit zero point given as a constant (ReluQuantFusion, QDQS8ToU8 require one). */
static bool zp_scalar(const calq_graph *g, const calq_node *n, int64_t *zp, calq_dtype *t)
{
    const calq_tensor *z = constant(g, n, 2);
    if (n->n_inputs != 3 || !z || calq_tensor_numel(z) != 1) return false;
    if (z->dtype == CALQ_DTYPE_INT8)
        *zp = *(const int8_t *)z->data;
    else if (z->dtype == CALQ_DTYPE_UINT8)
        *zp = *(const uint8_t *)z->data;
    else
        return false;
    *t = z->dtype;
    return true;
}

/* A Clip's bound k: a float constant input, or the default when omitted (GetClipConstantMinMax). */
static bool clip_bound(const calq_graph *g, const calq_node *n, int k, float *v)
{
    if (k >= n->n_inputs || n->inputs[k] < 0) return true;
    const calq_tensor *t = g->values[n->inputs[k]].constant;
    if (!t || t->dtype != CALQ_DTYPE_FLOAT32 || calq_tensor_numel(t) != 1) return false;
    *v = *(const float *)t->data;
    return true;
}

/* Clip bounds: attributes before opset 11, constant inputs after; false when not constant. */
static bool clip_bounds(const calq_graph *g, const calq_node *a, float *lo, float *hi)
{
    *lo = -FLT_MAX;
    *hi = FLT_MAX;
    if (a->opset < 11) {
        *lo = calq__attr_float(a, "min", *lo);
        *hi = calq__attr_float(a, "max", *hi);
        return true;
    }
    return clip_bound(g, a, 1, lo) && clip_bound(g, a, 2, hi);
}

/* A Q's scale, when it is a finite positive float32 constant (one value). calq drops a Relu / Clip
 * before a Q only then: with a negative scale the Q reverses the order of its inputs, so the
 * values a Relu / Clip changes no longer quantize to the end of the range, and dropping it would
 * change the result (onnxruntime does not check; calq computes what the file says). */
static bool q_scale_positive(const calq_graph *g, const calq_node *q, float *scale)
{
    const calq_tensor *s = constant(g, q, 1);
    if (!s || s->dtype != CALQ_DTYPE_FLOAT32 || calq_tensor_numel(s) != 1) return false;
    *scale = *(const float *)s->data;
    return isfinite(*scale) && *scale > 0.0f;
}

/* Does QuantizeLinear (scale > 0, zp) map v to qmin (below = true) or to qmax, as its kernel
 * computes it: saturate(round_half_even(v / scale) + zp)? Then every value a Clip bound at v
 * replaces quantizes as v does. */
static bool quantizes_to_end(float v, float scale, int64_t zp, int64_t qmin, int64_t qmax, bool below)
{
    const double q = (double)calq_round(v / scale, CALQ_ROUND_HALF_EVEN) + (double)zp;
    return below ? q <= (double)qmin : q >= (double)qmax;
}

/* Step 1 (ReluQuantFusion, ClipQuantFusion): is activation a, read only by node q, made
 * redundant by q? A Relu when q's zero point is the type's minimum. A Clip only without min / max
 * inputs (attributes before opset 11): onnxruntime 1.30 never removes a Clip that has them (its
 * node removal needs a single input; checked on its optimized graphs), and leaves it to step 4.
 * Its test is that [min, max] covers [s·(qmin − zp), s·(qmax − zp)] within FLT_EPSILON, which
 * can drop a Clip that changes the result (a bound 1e-7 above the range with s = 1e-8, say);
 * calq also requires the exact condition, both bounds quantizing to the ends of the range. */
static bool activation_redundant(const calq_graph *g, const calq_node *a, const calq_node *q)
{
    int64_t zp;
    calq_dtype t;
    float scale, lo, hi;
    if (!is_op(q, "QuantizeLinear") || !zp_scalar(g, q, &zp, &t) || !q_scale_positive(g, q, &scale)) return false;
    const int64_t qmin = t == CALQ_DTYPE_INT8 ? -128 : 0, qmax = t == CALQ_DTYPE_INT8 ? 127 : 255;
    if (is_op(a, "Relu")) return zp == qmin;
    if (a->n_inputs != 1 || !clip_bounds(g, a, &lo, &hi) || constant(g, q, 1)->ndim != 0 ||
        constant(g, q, 2)->ndim != 0)
        return false;
    const float lower = scale * (float)(qmin - zp), upper = scale * (float)(qmax - zp);
    if (FLT_EPSILON < lo - lower || FLT_EPSILON < upper - hi) return false;
    return quantizes_to_end(lo, scale, zp, qmin, qmax, true) && quantizes_to_end(hi, scale, zp, qmin, qmax, false);
}

static int remove_redundant_activations(fq *f)
{
    calq_graph *g = f->g;
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        calq_node *a = &g->nodes[i];
        if (f->dead[i] || (!is_op(a, "Relu") && !is_op(a, "Clip")) || a->n_outputs != 1 || a->n_inputs < 1 ||
            a->inputs[0] < 0)
            continue;
        int q = sole_consumer(f, a->outputs[0]);
        if (q < 0 || !activation_redundant(g, a, &g->nodes[q])) continue;
        for (int k = 0; k < g->nodes[q].n_inputs; k++)
            if (g->nodes[q].inputs[k] == a->outputs[0]) g->nodes[q].inputs[k] = a->inputs[0];
        f->dead[i] = true;
        n++;
        count_uses(f);
    }
    return n;
}

/* Step 3: marks the int8 Q -> DQ pairs onnxruntime recodes to uint8 on x86. */
static void mark_recoded(fq *f)
{
    const calq_graph *g = f->g;
    for (int i = 0; i < g->n_nodes; i++) {
        const calq_node *q = &g->nodes[i];
        int64_t zq, zd;
        calq_dtype tq, td;
        if (f->dead[i] || !is_op(q, "QuantizeLinear") || q->n_outputs != 1 || !zp_scalar(g, q, &zq, &tq) ||
            tq != CALQ_DTYPE_INT8)
            continue;
        int vq = q->outputs[0], d = sole_consumer(f, vq);
        if (d < 0 || !is_op(&g->nodes[d], "DequantizeLinear") || g->nodes[d].n_outputs != 1 ||
            !zp_scalar(g, &g->nodes[d], &zd, &td) || td != CALQ_DTYPE_INT8 || zd != zq)
            continue;
        /* the DQ is not duplicated (step 2): no consumer, or one and not a graph output */
        int vd = g->nodes[d].outputs[0];
        if (f->uses[vd] > 1 || (f->uses[vd] == 1 && graph_output(g, vd))) continue;
        f->recoded[vq] = true;
    }
}

/* The 8-bit (or int32) type onnxruntime sees for a DQ's input, after step 3. */
static calq_dtype dq_input_type(const fq *f, const calq_node *dq)
{
    const calq_graph *g = f->g;
    int v = dq->inputs[0];
    const calq_tensor *z = constant(g, dq, 2);
    calq_dtype t = z ? z->dtype : g->values[v].constant ? g->values[v].constant->dtype : g->values[v].dtype;
    return t == CALQ_DTYPE_INT8 && f->recoded[v] ? CALQ_DTYPE_UINT8 : t;
}

/* The type of a Q's output after step 3: its zero point's (a constant's, or a computed value's),
 * uint8 without one (ONNX's default). */
static calq_dtype q_output_type(const fq *f, const calq_node *q)
{
    const calq_graph *g = f->g;
    const bool has_z = q->n_inputs > 2 && q->inputs[2] >= 0;
    const calq_tensor *z = has_z ? g->values[q->inputs[2]].constant : NULL;
    calq_dtype t = !has_z ? CALQ_DTYPE_UINT8 : z ? z->dtype : g->values[q->inputs[2]].dtype;
    return t == CALQ_DTYPE_INT8 && f->recoded[q->outputs[0]] ? CALQ_DTYPE_UINT8 : t;
}

/* The DequantizeLinear feeding input k of node n, or -1. */
static int dq_of(const fq *f, const calq_node *n, int k)
{
    int p = k < n->n_inputs ? producer(f, n->inputs[k]) : -1;
    return p >= 0 && is_op(&f->g->nodes[p], "DequantizeLinear") && f->g->nodes[p].n_inputs >= 2 ? p : -1;
}

static int64_t numel_in(const calq_graph *g, const calq_node *n, int k)
{
    if (k >= n->n_inputs || n->inputs[k] < 0) return 0;
    const calq_value *v = &g->values[n->inputs[k]];
    if (v->constant) return calq_tensor_numel(v->constant);
    return v->ndim >= 0 ? calq__shape_numel(v->dims, v->ndim) : -1;
}

/* Scale and zero point of a Q / DQ are one value each (QLinear kernels take scalars). */
static bool per_tensor(const calq_graph *g, const calq_node *n)
{
    return n->n_inputs == 3 && n->inputs[2] >= 0 && numel_in(g, n, 1) == 1 && numel_in(g, n, 2) == 1;
}

/* A weight DQ: zero point given, scales per tensor or per channel on `axis` (n_ch entries). */
static bool weight_dq_ok(const calq_graph *g, const calq_node *dq, int axis, int64_t n_ch, int rank)
{
    int64_t ns = numel_in(g, dq, 1);
    if (ns < 1 || dq->n_inputs != 3 || dq->inputs[2] < 0 || numel_in(g, dq, 2) != ns) return false;
    if (ns == 1) return true;
    int64_t a = calq__attr_int(dq, "axis", 1);
    if (a < 0) a += rank;
    return ns == n_ch && a == axis;
}

/* The bias DQ of a fused layer: int32, zero point 0, scale[c] = x_scale * w_scale[c] (the
 * bias is added to the integer accumulator as it is; §6.2 quantizes it with that scale). */
static bool bias_dq_ok(const calq_graph *g, const calq_node *b, const calq_node *x, const calq_node *w)
{
    const calq_tensor *bs = constant(g, b, 1), *bz = constant(g, b, 2), *xs = constant(g, x, 1),
                      *ws = constant(g, w, 1), *bq = constant(g, b, 0);
    calq_dtype bt = bq ? bq->dtype : g->values[b->inputs[0]].dtype;
    if (bt != CALQ_DTYPE_INT32 || !bs || !xs || !ws || bs->dtype != CALQ_DTYPE_FLOAT32 ||
        xs->dtype != CALQ_DTYPE_FLOAT32 || ws->dtype != CALQ_DTYPE_FLOAT32 || calq_tensor_numel(xs) != 1)
        return false;
    if (b->n_inputs > 2 && b->inputs[2] >= 0) {
        if (!bz) return false;
        for (int64_t i = 0; i < calq_tensor_numel(bz); i++)
            if (calq__tensor_get_i64(bz, i) != 0) return false;
    }
    int64_t nb = calq_tensor_numel(bs), nw = calq_tensor_numel(ws), n = nb > nw ? nb : nw;
    if ((nb != 1 && nb != n) || (nw != 1 && nw != n)) return false;
    const float x_s = *(const float *)xs->data;
    for (int64_t c = 0; c < n; c++) {
        float want = x_s * ((const float *)ws->data)[nw > 1 ? c : 0], got = ((const float *)bs->data)[nb > 1 ? c : 0];
        if (!(fabsf(got - want) <= 1e-6f * fabsf(want))) return false;
    }
    return true;
}

/* IsClipMadeRedundantByQ (onnxruntime's selector): the Clip's bounds, quantized with q's
 * scalar factors, cover the whole integer range. rint then a C++ cast to int32 and an int32
 * add, as there: an out-of-range bound becomes INT32_MIN on x86 and the add wraps. */
static int32_t ort_q_bound(float bound, float scale, int32_t zp)
{
    double r = rint((double)(bound / scale));
    int32_t i = r >= -2147483648.0 && r < 2147483648.0 ? (int32_t)r : INT32_MIN;
    return (int32_t)((uint32_t)i + (uint32_t)zp);
}

static bool clip_made_redundant(const calq_graph *g, const calq_node *a, const calq_node *q)
{
    const calq_tensor *s = constant(g, q, 1), *z = constant(g, q, 2);
    float scale;
    if (!q_scale_positive(g, q, &scale) || s->ndim != 0) return false; /* calq's condition, as in step 1 */
    int32_t zp = 0;
    calq_dtype t = CALQ_DTYPE_UINT8;
    if (q->n_inputs > 2 && q->inputs[2] >= 0) {
        if (!z || z->ndim != 0 || (z->dtype != CALQ_DTYPE_INT8 && z->dtype != CALQ_DTYPE_UINT8)) return false;
        t = z->dtype;
        zp = (int32_t)calq__tensor_get_i64(z, 0);
    }
    const int32_t qmin = t == CALQ_DTYPE_INT8 ? -128 : 0, qmax = t == CALQ_DTYPE_INT8 ? 127 : 255;
    if (is_op(a, "Relu")) return zp == qmin;
    float lo, hi;
    if (!clip_bounds(g, a, &lo, &hi)) return false;
    return ort_q_bound(lo, scale, zp) <= qmin && ort_q_bound(hi, scale, zp) >= qmax;
}

/* The output side of onnxruntime's QDQ selection for target t (GetQDQSelection): the Q
 * consumers of its output, or of a Relu / Clip that is its only consumer. Returns false when
 * there is no selection at all: a Relu / Clip after the layer that is not exactly one redundant
 * one before one Q (then even the float-output Gemm / MatMul forms are not used). *q is -1 when
 * the output has no Q consumer; *clip is the dropped Relu / Clip or -1. */
static bool select_output(const fq *f, int t, int *q, int *clip)
{
    const calq_graph *g = f->g;
    int v = g->nodes[t].outputs[0];
    *q = *clip = -1;
    if (f->uses[v] == 1) {
        int c = f->consumer[v];
        const calq_node *cn = &g->nodes[c];
        if ((is_op(cn, "Relu") || is_op(cn, "Clip")) && cn->n_outputs == 1 && cn->outputs[0] >= 0 &&
            f->uses[cn->outputs[0]] == 1 && !graph_output(g, cn->outputs[0]))
            *clip = c;
    }
    int src = *clip >= 0 ? g->nodes[*clip].outputs[0] : v, n_q = 0;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_inputs; k++)
            if (!f->dead[i] && g->nodes[i].inputs[k] == src && is_op(&g->nodes[i], "QuantizeLinear")) {
                *q = i;
                n_q++;
            }
    if (*clip >= 0 && (n_q != 1 || !clip_made_redundant(g, &g->nodes[*clip], &g->nodes[*q]))) return false;
    if (n_q == 0) return true;
    /* CheckQDQNodes: one Q, the only consumer of the layer (or of its dropped Clip), reading it
     * as its input 0; the layer's output is not a graph output */
    return n_q == 1 && f->uses[src] == 1 && !graph_output(g, v) && !graph_output(g, src) &&
           g->nodes[*q].inputs[0] == src && g->nodes[*q].n_outputs == 1;
}

/* Rewrites node t in place into op_type with the given inputs and output value out. */
static calq_status rewrite(calq_graph *g, int t, const char *op_type, const int *in, int n_in, int out, calq_error *err)
{
    calq_node *n = &g->nodes[t];
    char *op = strdup(op_type);
    int *ins = malloc(sizeof(int) * (size_t)(n_in + 1));
    if (!op || !ins) {
        free(op);
        free(ins);
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, n->name, "out of memory");
    }
    memcpy(ins, in, sizeof(int) * (size_t)n_in);
    free(n->op_type);
    free(n->inputs);
    n->op_type = op;
    n->inputs = ins;
    n->n_inputs = n_in;
    n->outputs[0] = out;
    return CALQ_OK;
}

/* Inputs 1, 2 of a Q / DQ (scale, zero point). */
static void qparams(const calq_node *n, int *dst)
{
    dst[0] = n->inputs[1];
    dst[1] = n->n_inputs > 2 ? n->inputs[2] : -1;
}

/* Marks the Q (and the dropped Relu / Clip) of a fused layer dead. */
static void drop_output_side(fq *f, int q, int clip, int *n_removed)
{
    if (q >= 0) f->dead[q] = true;
    if (clip >= 0) {
        f->dead[clip] = true;
        (*n_removed)++;
    }
}

/* DQ(x), DQ(w)[, DQ(b)] -> Conv [-> redundant Relu / Clip] -> Q  =>  QLinearConv. */
static calq_status fuse_conv(fq *f, int t, bool *done, int *n_removed, calq_error *err)
{
    calq_graph *g = f->g;
    const calq_node *n = &g->nodes[t];
    const bool has_b = n->n_inputs > 2 && n->inputs[2] >= 0;
    int dx = dq_of(f, n, 0), dw = dq_of(f, n, 1), db = has_b ? dq_of(f, n, 2) : -1, q, clip;
    if (n->n_outputs != 1 || n->n_inputs < 2 || dx < 0 || dw < 0 || (has_b && db < 0)) return CALQ_OK;
    if (!select_output(f, t, &q, &clip) || q < 0) return CALQ_OK;
    const calq_node *x = &g->nodes[dx], *w = &g->nodes[dw], *y = &g->nodes[q];
    calq_dtype tx = dq_input_type(f, x), tw = dq_input_type(f, w), ty = q_output_type(f, y);
    /* onnxruntime: the same activation type in and out, and no int8 activations on x86 */
    if (!calq__dtype_is_q8(tx) || !calq__dtype_is_q8(tw) || tx != ty || tx == CALQ_DTYPE_INT8) return CALQ_OK;
    const calq_value *wv = &g->values[w->inputs[0]];
    const int rank = wv->constant ? wv->constant->ndim : wv->ndim;
    const int64_t m = wv->constant ? wv->constant->dims[0] : rank > 0 ? wv->dims[0] : -1;
    if (!per_tensor(g, x) || !per_tensor(g, y) || !weight_dq_ok(g, w, 0, m, rank)) return CALQ_OK;
    if (has_b && !bias_dq_ok(g, &g->nodes[db], x, w)) return CALQ_OK;
    int in[9] = {x->inputs[0], 0, 0, w->inputs[0], 0, 0, 0, 0, has_b ? g->nodes[db].inputs[0] : -1};
    qparams(x, in + 1);
    qparams(w, in + 4);
    qparams(y, in + 6);
    drop_output_side(f, q, clip, n_removed);
    CALQ_TRY(rewrite(g, t, "QLinearConv", in, has_b ? 9 : 8, y->outputs[0], err));
    *done = true;
    return CALQ_OK;
}

/* DQ(a), DQ(b)[, DQ(c)] -> Gemm [-> Q]  =>  QGemm (onnxruntime's com.microsoft signature:
 * a, a_scale, a_zp, b, b_scale, b_zp, c, y_scale, y_zp; float output without y_scale). */
static calq_status fuse_gemm(fq *f, int t, bool *done, int *n_removed, calq_error *err)
{
    calq_graph *g = f->g;
    const calq_node *n = &g->nodes[t];
    const bool has_c = n->n_inputs > 2 && n->inputs[2] >= 0;
    int da = dq_of(f, n, 0), db = dq_of(f, n, 1), dc = has_c ? dq_of(f, n, 2) : -1, q, clip;
    if (n->n_outputs != 1 || n->n_inputs < 2 || da < 0 || db < 0 || (has_c && dc < 0)) return CALQ_OK;
    if (!select_output(f, t, &q, &clip)) return CALQ_OK;
    const calq_node *a = &g->nodes[da], *b = &g->nodes[db], *y = q >= 0 ? &g->nodes[q] : NULL;
    calq_dtype ta = dq_input_type(f, a), tb = dq_input_type(f, b);
    /* int8 activations need int8 weights; no x86 restriction for Gemm */
    if (!calq__dtype_is_q8(ta) || !calq__dtype_is_q8(tb) || (ta == CALQ_DTYPE_INT8 && tb != CALQ_DTYPE_INT8))
        return CALQ_OK;
    if (y && (q_output_type(f, y) != ta || !per_tensor(g, y))) return CALQ_OK;
    /* QGemm scales c with the rest, alpha·a_s·b_s·(acc + c), and onnxruntime (1.30, checked on its
     * optimized graph) leaves a Gemm with a bias and alpha != 1 unfused */
    if (has_c && (calq__attr_float(n, "alpha", 1.0f) != 1.0f || calq__attr_float(n, "beta", 1.0f) != 1.0f ||
                  !bias_dq_ok(g, &g->nodes[dc], a, b)))
        return CALQ_OK;
    const calq_value *bv = &g->values[b->inputs[0]];
    const int rank = bv->constant ? bv->constant->ndim : bv->ndim;
    const int n_axis = calq__attr_int(n, "transB", 0) ? 0 : 1; /* b's output-column axis */
    if (rank != 2 || !per_tensor(g, a)) return CALQ_OK;
    const int64_t cols = bv->constant ? bv->constant->dims[n_axis] : bv->dims[n_axis];
    if (!weight_dq_ok(g, b, n_axis, cols, rank)) return CALQ_OK;
    int in[9] = {a->inputs[0], 0, 0, b->inputs[0], 0, 0, has_c ? g->nodes[dc].inputs[0] : -1, -1, -1};
    qparams(a, in + 1);
    qparams(b, in + 4);
    if (y) qparams(y, in + 7);
    drop_output_side(f, q, clip, n_removed);
    CALQ_TRY(rewrite(g, t, "QGemm", in, y ? 9 : has_c ? 7 : 6, y ? y->outputs[0] : n->outputs[0], err));
    *done = true;
    return CALQ_OK;
}

/* DQ(a), DQ(b) -> MatMul -> Q => QLinearMatMul; without a Q consumer => MatMulIntegerToFloat. */
static calq_status fuse_matmul(fq *f, int t, bool *done, int *n_removed, calq_error *err)
{
    calq_graph *g = f->g;
    const calq_node *n = &g->nodes[t];
    int da = dq_of(f, n, 0), db = dq_of(f, n, 1), q, clip;
    if (n->n_outputs != 1 || n->n_inputs != 2 || da < 0 || db < 0) return CALQ_OK;
    if (!select_output(f, t, &q, &clip)) return CALQ_OK;
    const calq_node *a = &g->nodes[da], *b = &g->nodes[db], *y = q >= 0 ? &g->nodes[q] : NULL;
    calq_dtype ta = dq_input_type(f, a), tb = dq_input_type(f, b);
    if (!calq__dtype_is_q8(ta) || !calq__dtype_is_q8(tb) || ta == CALQ_DTYPE_INT8)
        return CALQ_OK; /* int8 needs x86's recoding */
    if (!per_tensor(g, a) || (y && (q_output_type(f, y) != ta || !per_tensor(g, y)))) return CALQ_OK;
    /* b: per tensor for QLinearMatMul (calq's condition); per tensor or per column (a 1-D scale on
     * b's last axis) for MatMulIntegerToFloat, as onnxruntime fuses it; b may be an activation (a
     * MatMul with two variable inputs, §8.1), per tensor, of a rank known only at run time */
    const calq_value *bv = &g->values[b->inputs[0]];
    const int rank = bv->constant ? bv->constant->ndim : bv->ndim;
    const int64_t cols = rank >= 1 ? (bv->constant ? bv->constant->dims[rank - 1] : bv->dims[rank - 1]) : -1;
    if (y ? !per_tensor(g, b) : !per_tensor(g, b) && (rank < 1 || !weight_dq_ok(g, b, rank - 1, cols, rank)))
        return CALQ_OK;
    const int v = n->outputs[0];
    drop_output_side(f, q, clip, n_removed);
    if (y) {
        int in[8] = {a->inputs[0], 0, 0, b->inputs[0], 0, 0, 0, 0};
        qparams(a, in + 1);
        qparams(b, in + 4);
        qparams(y, in + 6);
        CALQ_TRY(rewrite(g, t, "QLinearMatMul", in, 8, y->outputs[0], err));
    } else {
        int in[6] = {a->inputs[0], b->inputs[0], a->inputs[1], b->inputs[1], a->inputs[2], b->inputs[2]};
        CALQ_TRY(rewrite(g, t, "MatMulIntegerToFloat", in, 6, v, err));
    }
    *done = true;
    return CALQ_OK;
}

/* The node becomes onnxruntime's contrib operator of domain com.microsoft. */
static calq_status to_msft(calq_graph *g, int t, calq_error *err)
{
    char *d = strdup("com.microsoft");
    if (!d) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, g->nodes[t].name, "out of memory");
    free(g->nodes[t].domain);
    g->nodes[t].domain = d;
    return CALQ_OK;
}

/* onnxruntime's selectors for the ops it runs on 8-bit tensors (beyond the layers): every input
 * (n_dq of them, all when -1) from a per-tensor DQ, one Q after (past a redundant Relu / Clip),
 * the same 8-bit type in and out:
 *   DQ(a), DQ(b) -> Add / Mul -> Q                 => QLinearAdd / QLinearMul (A, A_s, A_zp, B, B_s, B_zp, C_s, C_zp)
 *   DQ(x) -> GlobalAveragePool / Sigmoid / LeakyRelu -> Q
 *                                                   => QLinear<op> (X, X_s, X_zp, Y_s, Y_zp)
 *   DQ(x_i)... -> Concat -> Q                        => QLinearConcat (Y_s, Y_zp, (X_i, X_i_s, X_i_zp)...) */
static calq_status fuse_qlinear(fq *f, int t, const char *op, int n_dq, bool y_first, bool *done, int *n_removed,
                                calq_error *err)
{
    calq_graph *g = f->g;
    const calq_node *n = &g->nodes[t];
    const int nin = n_dq < 0 ? n->n_inputs : n_dq;
    if (n->n_outputs != 1 || n->n_inputs != nin || nin < 1 || nin > 16) return CALQ_OK;
    int dq[16], q, clip;
    for (int k = 0; k < nin; k++)
        if ((dq[k] = dq_of(f, n, k)) < 0 || !per_tensor(g, &g->nodes[dq[k]])) return CALQ_OK;
    if (!select_output(f, t, &q, &clip) || q < 0 || !per_tensor(g, &g->nodes[q])) return CALQ_OK;
    const calq_dtype ty = q_output_type(f, &g->nodes[q]);
    if (!calq__dtype_is_q8(ty)) return CALQ_OK;
    for (int k = 0; k < nin; k++)
        if (dq_input_type(f, &g->nodes[dq[k]]) != ty) return CALQ_OK;
    int in[2 + 3 * 16], m = 0;
    if (y_first) qparams(&g->nodes[q], in), m = 2;
    for (int k = 0; k < nin; k++, m += 3) {
        in[m] = g->nodes[dq[k]].inputs[0];
        qparams(&g->nodes[dq[k]], in + m + 1);
    }
    if (!y_first) qparams(&g->nodes[q], in + m), m += 2;
    const int y = g->nodes[q].outputs[0];
    drop_output_side(f, q, clip, n_removed);
    CALQ_TRY(rewrite(g, t, op, in, m, y, err));
    CALQ_TRY(to_msft(g, t, err));
    *done = true;
    return CALQ_OK;
}

/* Drops DQ nodes nothing reads any more, then the dead nodes. */
static void compact(fq *f)
{
    calq_graph *g = f->g;
    count_uses(f);
    for (int i = 0; i < g->n_nodes; i++) {
        const calq_node *n = &g->nodes[i];
        if (!f->dead[i] && is_op(n, "DequantizeLinear") && n->n_outputs == 1 && f->uses[n->outputs[0]] == 0 &&
            !graph_output(g, n->outputs[0]))
            f->dead[i] = true;
    }
    int k = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        if (f->dead[i])
            calq__node_release(&g->nodes[i]);
        else
            g->nodes[k++] = g->nodes[i];
    }
    g->n_nodes = k;
}

calq_status calq__pass_fuse_qdq(calq_graph *g, int *n_fused, int *n_removed, calq_error *err)
{
    *n_fused = *n_removed = 0;
    bool any = false;
    for (int i = 0; i < g->n_nodes && !any; i++) any = is_op(&g->nodes[i], "DequantizeLinear");
    if (!any) return CALQ_OK; /* a float model: nothing to do */
    fq f = {.g = g};
    f.uses = calloc((size_t)g->n_values + 1, sizeof(int));
    f.consumer = calloc((size_t)g->n_values + 1, sizeof(int));
    f.recoded = calloc((size_t)g->n_values + 1, sizeof(bool));
    f.dead = calloc((size_t)g->n_nodes + 1, sizeof(bool));
    calq_status st = CALQ_OK;
    if (!f.uses || !f.consumer || !f.recoded || !f.dead)
        st = calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    if (st == CALQ_OK) st = calq__graph_toposort(g, err); /* fresh producers */
    if (st == CALQ_OK) {
        count_uses(&f);
        *n_removed = remove_redundant_activations(&f);
        mark_recoded(&f);
    }
    /* every decision reads the graph as step 3 left it: a fusion removes only its own Q and
     * never changes what another layer sees (each layer has its own DQ in onnxruntime) */
    for (int i = 0; st == CALQ_OK && i < g->n_nodes; i++) {
        bool done = false;
        if (f.dead[i]) continue;
        if (is_op(&g->nodes[i], "Conv"))
            st = fuse_conv(&f, i, &done, n_removed, err);
        else if (is_op(&g->nodes[i], "Gemm"))
            st = fuse_gemm(&f, i, &done, n_removed, err);
        else if (is_op(&g->nodes[i], "MatMul"))
            st = fuse_matmul(&f, i, &done, n_removed, err);
        else if (is_op(&g->nodes[i], "Add"))
            st = fuse_qlinear(&f, i, "QLinearAdd", 2, false, &done, n_removed, err);
        else if (is_op(&g->nodes[i], "Mul"))
            st = fuse_qlinear(&f, i, "QLinearMul", 2, false, &done, n_removed, err);
        else if (is_op(&g->nodes[i], "GlobalAveragePool"))
            st = fuse_qlinear(&f, i, "QLinearGlobalAveragePool", 1, false, &done, n_removed, err);
        else if (is_op(&g->nodes[i], "Sigmoid"))
            st = fuse_qlinear(&f, i, "QLinearSigmoid", 1, false, &done, n_removed, err);
        else if (is_op(&g->nodes[i], "LeakyRelu"))
            st = fuse_qlinear(&f, i, "QLinearLeakyRelu", 1, false, &done, n_removed, err);
        else if (is_op(&g->nodes[i], "Concat"))
            st = fuse_qlinear(&f, i, "QLinearConcat", -1, true, &done, n_removed, err);
        *n_fused += done;
    }
    if (st == CALQ_OK && (*n_fused || *n_removed)) {
        compact(&f);
        st = calq__graph_toposort(g, err);
    }
    free(f.uses);
    free(f.consumer);
    free(f.recoded);
    free(f.dead);
    return st;
}
