/* onnxruntime's 8-bit contrib operators (domain com.microsoft), which calq's int8 QOperator files
 * use (src/export/export_onnx_qop_int8.c) and onnxruntime makes of DQ -> op -> Q groups of a QDQ
 * file. Reference kernels with the operators' defined arithmetic, float32 in a fixed order
 * (element-wise or per channel: the same result for any thread count):
 *
 *   QLinearAdd(A, A_s, A_zp, B, B_s, B_zp, C_s, C_zp)   C = Q(A_s (a - A_zp) + B_s (b - B_zp)),
 *     computed as onnxruntime's x86 (AVX2) kernel does, so that both give the same integers:
 *     r_ac = A_s / C_s, r_bc = B_s / C_s, fixed = C_zp - fma(r_ac, A_zp, r_bc B_zp), then
 *     saturate(round_half_even(fma(a, r_ac, fma(b, r_bc, fixed)))) (a scalar side goes into fixed);
 *   QLinearMul(...)                                      C = Q(A_s (a - A_zp) * B_s (b - B_zp))
 *     numpy broadcasting; Q(v) = saturate(round_half_even(v / C_s) + C_zp) in C's (= A's) type.
 *   QLinearConcat(Y_s, Y_zp, (X, X_s, X_zp)...)          each input requantized, Q(X_s (x - X_zp)),
 *     copied as it is when its factors are Y's; attribute axis.
 *   QLinearGlobalAveragePool(X, x_s, x_zp, y_s, y_zp)    y = Q'(Σ (x - x_zp)) per channel with
 *     Q'(acc) = saturate(round_half_even(acc * (x_s / (y_s * N))) + y_zp), N the spatial size;
 *     channels_last 0 (NCHW) or 1 (NHWC).
 *   QLinearSigmoid / QLinearLeakyRelu(X, X_s, X_zp, Y_s, Y_zp)   y = Q(f(X_s (x - X_zp))), as
 *     onnxruntime's lookup table builds it; LeakyRelu's alpha (default 0.01).
 *
 * onnxruntime's Sigmoid is an approximation and its QLinearMul may round in another order, so a
 * value on a rounding tie can come out one step apart there; docs/operators.md says so. QGemm and
 * MatMulIntegerToFloat, also com.microsoft operators, keep their one row (with oneDNN fast paths)
 * in quant_ops.c, flagged CALQ_OP_MSFT. */
#include <math.h>
#include <string.h>

#include "exec/kernels/quant_gemm.h"
#include "exec/op.h"

static const calq_tensor *opt(const calq_op_ctx *c, int k)
{
    return k < c->n_in ? c->in[k] : NULL;
}

static float scalar_f(const calq_tensor *t)
{
    return *(const float *)t->data;
}

static int64_t zp_of(const calq_tensor *t)
{
    return t && calq_tensor_numel(t) > 0 ? calq__tensor_get_i64(t, 0) : 0;
}

static int64_t q_at(const calq_tensor *t, int64_t i)
{
    return t->dtype == CALQ_DTYPE_INT8 ? ((const int8_t *)t->data)[i] : ((const uint8_t *)t->data)[i];
}

/* An 8-bit tensor, a one-value float scale, an optional one-value zero point of its type. */
static calq_status check_q(calq_op_ctx *c, int x, int s, int z, const char *what)
{
    const calq_tensor *t = opt(c, x), *sc = opt(c, s), *zp = opt(c, z);
    if (!t || !calq__dtype_is_q8(t->dtype))
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "%s must be int8 or uint8", what);
    if (!sc || calq_tensor_numel(sc) != 1 || (zp && calq_tensor_numel(zp) != 1))
        return calq__op_fail(c, CALQ_ERR_SHAPE, "%s's scale and zero point need one value each (per tensor)", what);
    CALQ_TRY(calq__qscale_check(c, sc, what));
    return calq__qzp_check(c, zp, t->dtype, what);
}

/* The type of an output from its zero point (absent: the first input's). */
static calq_dtype out_type(const calq_op_ctx *c, int z, int x)
{
    const calq_tensor *zp = opt(c, z);
    return zp ? zp->dtype : c->in[x]->dtype;
}

/* ---- QLinearAdd, QLinearMul ------------------------------------------------------------------ */

static calq_status binary_infer(calq_op_ctx *c)
{
    CALQ_TRY(check_q(c, 0, 1, 2, "A"));
    CALQ_TRY(check_q(c, 3, 4, 5, "B"));
    if (!opt(c, 6) || calq_tensor_numel(c->in[6]) != 1 || (opt(c, 7) && calq_tensor_numel(c->in[7]) != 1))
        return calq__op_fail(c, CALQ_ERR_SHAPE, "C_scale and C_zero_point need one value each");
    CALQ_TRY(calq__qscale_check(c, c->in[6], "C_scale"));
    if (c->in[3]->dtype != c->in[0]->dtype || out_type(c, 7, 0) != c->in[0]->dtype)
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "A, B and C must have one type");
    int64_t dims[CALQ_MAX_DIMS];
    int nd;
    if (!calq__broadcast_shape(c->in[0]->dims, c->in[0]->ndim, c->in[3]->dims, c->in[3]->ndim, dims, &nd))
        return calq__op_fail(c, CALQ_ERR_SHAPE, "A and B do not broadcast");
    calq__set_shape(c->out[0], c->in[0]->dtype, dims, nd);
    return CALQ_OK;
}

static calq_status binary_run(calq_op_ctx *c, bool mul)
{
    const calq_tensor *a = c->in[0], *b = c->in[3];
    calq_tensor *y = c->out[0];
    const float as = scalar_f(c->in[1]), bs = scalar_f(c->in[4]), cs = scalar_f(c->in[6]);
    const int64_t az = zp_of(opt(c, 2)), bz = zp_of(opt(c, 5)), cz = zp_of(opt(c, 7));
    const float r_ac = as / cs, r_bc = bs / cs;
    /* onnxruntime's build contracts this into one fused multiply-add (checked on its outputs) */
    const float fixed0 = (float)cz - fmaf(r_ac, (float)az, r_bc * (float)bz);
    const bool scalar_a = calq_tensor_numel(a) == 1, scalar_b = !scalar_a && calq_tensor_numel(b) == 1;
    int64_t sa[CALQ_MAX_DIMS], sb[CALQ_MAX_DIMS];
    calq__broadcast_strides(a->dims, a->ndim, y->ndim, sa);
    calq__broadcast_strides(b->dims, b->ndim, y->ndim, sb);
    const int64_t n = calq_tensor_numel(y);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        int64_t ia = 0, ib = 0, r = i;
        for (int d = y->ndim - 1; d >= 0; d--) {
            int64_t k = r % y->dims[d];
            r /= y->dims[d];
            ia += k * sa[d];
            ib += k * sb[d];
        }
        if (mul) {
            const float va = as * (float)(q_at(a, ia) - az), vb = bs * (float)(q_at(b, ib) - bz);
            calq__store_q(y, i, va * vb / cs, cz);
        } else if (scalar_a || scalar_b) {
            /* onnxruntime's x86 kernel folds the scalar side into the fixed part (a multiply and
             * an add), then one fused multiply-add */
            const float fixed = fixed0 + (scalar_a ? (float)q_at(a, 0) * r_ac : (float)q_at(b, 0) * r_bc);
            const float v = scalar_a ? fmaf((float)q_at(b, ib), r_bc, fixed) : fmaf((float)q_at(a, ia), r_ac, fixed);
            calq__store_q(y, i, v, 0);
        } else {
            /* (b * r_bc + fixed), then a * r_ac added, both fused, as onnxruntime's AVX2 QLinearAdd;
             * the zero point is inside fixed */
            const float v = fmaf((float)q_at(a, ia), r_ac, fmaf((float)q_at(b, ib), r_bc, fixed0));
            calq__store_q(y, i, v, 0);
        }
    }
    return CALQ_OK;
}

static calq_status add_run(calq_op_ctx *c)
{
    return binary_run(c, false);
}

static calq_status mul_run(calq_op_ctx *c)
{
    return binary_run(c, true);
}

/* ---- QLinearConcat ----------------------------------------------------------------------- */

static calq_status concat_infer(calq_op_ctx *c)
{
    if (c->n_in < 5 || (c->n_in - 2) % 3)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "takes Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) triples");
    if (!c->in[0] || calq_tensor_numel(c->in[0]) != 1 || !c->in[1] || calq_tensor_numel(c->in[1]) != 1)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "Y_scale and Y_zero_point need one value each");
    CALQ_TRY(calq__qscale_check(c, c->in[0], "Y_scale"));
    const calq_tensor *x0 = c->in[2];
    for (int k = 2; k < c->n_in; k += 3) {
        CALQ_TRY(check_q(c, k, k + 1, k + 2, "X"));
        if (c->in[k]->dtype != c->in[1]->dtype)
            return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "every X must have Y_zero_point's type");
    }
    const int axis = calq__norm_axis(calq__attr_int(c->node, "axis", 0), x0->ndim);
    if (axis < 0) return calq__op_fail(c, CALQ_ERR_SHAPE, "axis is out of range for rank %d", x0->ndim);
    int64_t dims[CALQ_MAX_DIMS];
    memcpy(dims, x0->dims, sizeof(int64_t) * (size_t)x0->ndim);
    dims[axis] = 0;
    for (int k = 2; k < c->n_in; k += 3) {
        const calq_tensor *x = c->in[k];
        bool same = x->ndim == x0->ndim;
        for (int d = 0; same && d < x->ndim; d++) same = d == axis || x->dims[d] == x0->dims[d];
        if (!same) return calq__op_fail(c, CALQ_ERR_SHAPE, "the inputs differ in shape outside the axis");
        dims[axis] += x->dims[axis];
    }
    calq__set_shape(c->out[0], c->in[1]->dtype, dims, x0->ndim);
    return CALQ_OK;
}

static calq_status concat_run(calq_op_ctx *c)
{
    calq_tensor *y = c->out[0];
    const int axis = calq__norm_axis(calq__attr_int(c->node, "axis", 0), y->ndim);
    const float ys = scalar_f(c->in[0]);
    const int64_t yz = zp_of(c->in[1]);
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; d++) outer *= y->dims[d];
    for (int d = axis + 1; d < y->ndim; d++) inner *= y->dims[d];
    int64_t at = 0; /* offset along the axis */
    for (int k = 2; k < c->n_in; k += 3) {
        const calq_tensor *x = c->in[k];
        const float xs = scalar_f(c->in[k + 1]);
        const int64_t xz = zp_of(opt(c, k + 2)), len = x->dims[axis];
        const bool copy = xs == ys && xz == yz;
        for (int64_t o = 0; o < outer; o++)
            for (int64_t j = 0; j < len * inner; j++) {
                const int64_t src = o * len * inner + j, dst = (o * y->dims[axis] + at) * inner + j;
                if (copy)
                    ((uint8_t *)y->data)[dst] = ((const uint8_t *)x->data)[src];
                else
                    calq__store_q(y, dst, xs * (float)(q_at(x, src) - xz) / ys, yz);
            }
        at += len;
    }
    return CALQ_OK;
}

/* ---- QLinearGlobalAveragePool ------------------------------------------------------------ */

static calq_status gap_infer(calq_op_ctx *c)
{
    CALQ_TRY(check_q(c, 0, 1, 2, "X"));
    CALQ_TRY(check_q(c, 0, 3, 4, "Y"));
    const calq_tensor *x = c->in[0];
    if (x->ndim < 3) return calq__op_fail(c, CALQ_ERR_SHAPE, "X needs rank 3 or more, has %d", x->ndim);
    const bool nhwc = calq__attr_int(c->node, "channels_last", 0) != 0;
    int64_t dims[CALQ_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) dims[d] = 1;
    dims[0] = x->dims[0];
    dims[nhwc ? x->ndim - 1 : 1] = x->dims[nhwc ? x->ndim - 1 : 1];
    calq__set_shape(c->out[0], out_type(c, 4, 0), dims, x->ndim);
    return CALQ_OK;
}

static calq_status gap_run(calq_op_ctx *c)
{
    const calq_tensor *x = c->in[0];
    calq_tensor *y = c->out[0];
    const bool nhwc = calq__attr_int(c->node, "channels_last", 0) != 0;
    const int64_t n = x->dims[0], ch = x->dims[nhwc ? x->ndim - 1 : 1];
    int64_t sp = 1;
    for (int d = nhwc ? 1 : 2; d < (nhwc ? x->ndim - 1 : x->ndim); d++) sp *= x->dims[d];
    const float m = scalar_f(c->in[1]) / (scalar_f(c->in[3]) * (float)sp);
    const int64_t xz = zp_of(opt(c, 2)), yz = zp_of(opt(c, 4));
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n * ch; i++) {
        const int64_t b = i / ch, k = i % ch;
        int64_t acc = 0;
        for (int64_t s = 0; s < sp; s++) acc += q_at(x, nhwc ? (b * sp + s) * ch + k : (b * ch + k) * sp + s) - xz;
        calq__store_q(y, i, (float)acc * m, yz);
    }
    return CALQ_OK;
}

/* ---- QLinearSigmoid, QLinearLeakyRelu ------------------------------------------------------ */

static calq_status unary_infer(calq_op_ctx *c)
{
    CALQ_TRY(check_q(c, 0, 1, 2, "X"));
    CALQ_TRY(check_q(c, 0, 3, 4, "Y"));
    if (out_type(c, 4, 0) != c->in[0]->dtype) return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "X and Y differ in type");
    calq__set_shape(c->out[0], c->in[0]->dtype, c->in[0]->dims, c->in[0]->ndim);
    return CALQ_OK;
}

static calq_status unary_run(calq_op_ctx *c, bool sigmoid)
{
    const calq_tensor *x = c->in[0];
    calq_tensor *y = c->out[0];
    const float xs = scalar_f(c->in[1]), ys = scalar_f(c->in[3]), alpha = calq__attr_float(c->node, "alpha", 0.01f);
    const int64_t xz = zp_of(opt(c, 2)), yz = zp_of(opt(c, 4));
    float table[256]; /* onnxruntime's lookup table: one value per 8-bit code */
    for (int i = 0; i < 256; i++) {
        const int64_t q = x->dtype == CALQ_DTYPE_INT8 ? (int64_t)(int8_t)(uint8_t)i : i;
        const float v = xs * (float)(q - xz);
        table[i] = (sigmoid ? 1.0f / (1.0f + expf(-v)) : v >= 0.0f ? v : v * alpha) / ys;
    }
    const int64_t n = calq_tensor_numel(y);
    for (int64_t i = 0; i < n; i++) calq__store_q(y, i, table[((const uint8_t *)x->data)[i]], yz);
    return CALQ_OK;
}

static calq_status sigmoid_run(calq_op_ctx *c)
{
    return unary_run(c, true);
}

static calq_status leaky_run(calq_op_ctx *c)
{
    return unary_run(c, false);
}

const calq_op_def calq__ops_msft[] = {
    {"QLinearAdd", 7, 8, 1, 1, 0, false, binary_infer, add_run, NULL, NULL, NULL, 0},
    {"QLinearMul", 7, 8, 1, 1, 0, false, binary_infer, mul_run, NULL, NULL, NULL, 0},
    {"QLinearConcat", 5, -1, 1, 1, 0, false, concat_infer, concat_run, NULL, NULL, NULL, 0},
    {"QLinearGlobalAveragePool", 4, 5, 1, 1, 0, false, gap_infer, gap_run, NULL, NULL, NULL, 0},
    {"QLinearSigmoid", 4, 5, 1, 1, 0, false, unary_infer, sigmoid_run, NULL, NULL, NULL, 0},
    {"QLinearLeakyRelu", 4, 5, 1, 1, 0, false, unary_infer, leaky_run, NULL, NULL, NULL, 0},
    {NULL, 0, 0, 0, 0, 0, false, NULL, NULL, NULL, NULL, NULL, 0},
};
