/* Reference kernels of ONNX's quantization operators, so calq runs the models `calq save`
 * writes (issue 6): QuantizeLinear, DequantizeLinear (per tensor, or per axis from opset 13),
 * QLinearConv (int8 / uint8 data, int32 bias); the integer matrix products are in quant_gemm.c.
 *
 * Semantics follow the ONNX operator definitions, which use AMCT's convention (§0.3):
 * q = saturate(round_half_even(x / scale) + zero_point), x = (q - zero_point) * scale.
 * QLinear kernels accumulate sum((x - x_zp)(w - w_zp)) + bias exactly in int32 (int64 here,
 * then checked; the accumulation is shared with the Ascend integer layers, int_accum.h and
 * conv_int.c), and requantize with the float32 multiplier x_scale*w_scale/y_scale, rounding
 * half to even, as onnxruntime does; NaN becomes the type's minimum, as there (quant_gemm.h), and
 * a scale that is zero or not finite is an error. Each output element is computed by one thread in a fixed
 * order, so results do not depend on the thread count. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernels/conv_dnnl.h"
#include "exec/kernels/int_accum.h"
#include "exec/kernels/int_dnnl.h"
#include "exec/kernels/quant_gemm.h"
#include "exec/kernels/requant.h"
#include "exec/op.h"

static int64_t get_int(const calq_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case CALQ_DTYPE_INT8: return ((const int8_t *)t->data)[i];
    case CALQ_DTYPE_UINT8: return ((const uint8_t *)t->data)[i];
    case CALQ_DTYPE_INT32: return ((const int32_t *)t->data)[i];
    default: return 0;
    }
}

/* Which factor each element of a (De)QuantizeLinear uses: per tensor, per axis (element i uses
 * (i / inner) % len), or from opset 21 per block of `block` elements along the axis (the scale
 * then has x's shape with ceil(len / block) on the axis). */
typedef struct qgeom {
    int64_t inner, len, block; /* block 0: not blocked */
} qgeom;

static inline int64_t factor_at(const qgeom *g, int64_t i)
{
    if (!g->block) return (i / g->inner) % g->len;
    int64_t in = i % g->inner, j = (i / g->inner) % g->len, o = i / (g->inner * g->len);
    int64_t nb = (g->len + g->block - 1) / g->block;
    return (o * nb + j / g->block) * g->inner + in;
}

/* Checks scale / zero point of a (De)QuantizeLinear and returns the factor geometry. */
static calq_status qdq_params(calq_op_ctx *c, const calq_tensor *x, qgeom *g)
{
    const calq_tensor *s = c->in[1], *z = c->n_in > 2 ? c->in[2] : NULL;
    if (s->dtype != CALQ_DTYPE_FLOAT32) return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "scale must be float32");
    int64_t n = calq_tensor_numel(s);
    if (z && calq_tensor_numel(z) != n) return calq__op_fail(c, CALQ_ERR_SHAPE, "scale and zero point differ in size");
    g->inner = g->len = 1;
    g->block = 0;
    int64_t block = c->opset >= 21 ? calq__attr_int(c->node, "block_size", 0) : 0;
    if (block < 0) return calq__op_fail(c, CALQ_ERR_SHAPE, "block_size %lld is negative", (long long)block);
    if ((s->ndim == 0 || n == 1) && !block) return CALQ_OK;
    int axis = calq__norm_axis(calq__attr_int(c->node, "axis", 1), x->ndim);
    if (axis < 0) return calq__op_fail(c, CALQ_ERR_SHAPE, "axis is out of range for a rank-%d input", x->ndim);
    for (int d = axis + 1; d < x->ndim; d++) g->inner *= x->dims[d];
    g->len = x->dims[axis];
    if (block) {
        /* blocked: scale has x's rank, ceil(len / block) on the axis and x's dims elsewhere */
        bool ok = s->ndim == x->ndim;
        for (int d = 0; ok && d < x->ndim; d++)
            ok = d == axis ? s->dims[d] == (x->dims[d] + block - 1) / block : s->dims[d] == x->dims[d];
        if (!ok) {
            char a[96], b[96];
            return calq__op_fail(c, CALQ_ERR_SHAPE, "scale shape %s does not fit blocks of %lld along axis %d of %s",
                                 calq__shape_str(s->dims, s->ndim, a, sizeof a), (long long)block, axis,
                                 calq__shape_str(x->dims, x->ndim, b, sizeof b));
        }
        if (z && !calq__shape_equal(z->dims, z->ndim, s->dims, s->ndim))
            return calq__op_fail(c, CALQ_ERR_SHAPE, "zero point and scale shapes differ");
        g->block = block;
        return CALQ_OK;
    }
    if (s->ndim != 1) return calq__op_fail(c, CALQ_ERR_SHAPE, "scale must be a scalar or 1-D");
    if (x->dims[axis] != n)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "scale has %lld entries, which does not match the axis", (long long)n);
    return CALQ_OK;
}

static calq_status quantize_infer(calq_op_ctx *c)
{
    const calq_tensor *z = c->n_in > 2 ? c->in[2] : NULL;
    calq_dtype t = z ? z->dtype : CALQ_DTYPE_UINT8;
    const calq_attr *od = c->opset >= 21 ? calq__attr(c->node, "output_dtype") : NULL;
    if (od && od->type == CALQ_ATTR_INT && od->i != 0) {
        /* opset 21: the output type without a zero point (it must agree with one) */
        const char *name = "";
        calq_dtype w = calq__op_onnx_dtype(od->i, &name);
        if (z && w != t)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "output_dtype %s differs from the zero point's type", name);
        t = w;
    }
    if (!calq__dtype_is_q8(t)) return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "zero point must be int8 or uint8");
    if (c->in[0]->dtype != CALQ_DTYPE_FLOAT32) return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "input must be float32");
    CALQ_TRY(calq__qscale_check(c, c->in[1], "y_scale"));
    calq__set_shape(c->out[0], t, c->in[0]->dims, c->in[0]->ndim);
    return CALQ_OK;
}

static calq_status quantize_run(calq_op_ctx *c)
{
    const calq_tensor *x = c->in[0], *s = c->in[1], *z = c->n_in > 2 ? c->in[2] : NULL;
    qgeom g;
    CALQ_TRY(qdq_params(c, x, &g));
    CALQ_TRY(calq__qscale_check(c, s, "y_scale"));
    const float *xd = x->data, *sd = s->data;
    int64_t n = calq_tensor_numel(x);
    for (int64_t i = 0; i < n; i++) {
        int64_t f = factor_at(&g, i);
        calq__store_q(c->out[0], i, xd[i] / sd[f], z ? get_int(z, f) : 0);
    }
    return CALQ_OK;
}

static calq_status dequantize_infer(calq_op_ctx *c)
{
    calq_dtype t = c->in[0]->dtype;
    if (!calq__dtype_is_q8(t) && t != CALQ_DTYPE_INT32)
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "input must be int8, uint8 or int32, not %s", calq_dtype_name(t));
    calq__set_shape(c->out[0], CALQ_DTYPE_FLOAT32, c->in[0]->dims, c->in[0]->ndim);
    return CALQ_OK;
}

static calq_status dequantize_run(calq_op_ctx *c)
{
    const calq_tensor *x = c->in[0], *s = c->in[1], *z = c->n_in > 2 ? c->in[2] : NULL;
    qgeom g;
    CALQ_TRY(qdq_params(c, x, &g));
    const float *sd = s->data;
    float *y = c->out[0]->data;
    int64_t n = calq_tensor_numel(x);
    for (int64_t i = 0; i < n; i++) {
        int64_t f = factor_at(&g, i);
        y[i] = (float)(get_int(x, i) - (z ? get_int(z, f) : 0)) * sd[f];
    }
    return CALQ_OK;
}

/* ---- fast QuantizeLinear / DequantizeLinear ------------------------------------------------ */

/* The same arithmetic as quantize_run / dequantize_run (x / scale then calq__store_q's rule in
 * calq__requant_level; (float)(q - zp) * scale), per tensor or per axis (blocked factors decline),
 * as loops over runs of elements that share one factor, which the compiler vectorises and threads split (every element
 * is computed once, by one thread, so the bits do not depend on the thread count). */
typedef struct qdq_state {
    int64_t inner, nf; /* element i uses factor (i / inner) % nf */
} qdq_state;

/* Elements per parallel work item. */
#define QDQ_CHUNK 16384

static calq_status qdq_prepare(calq_op_ctx *c)
{
    c->state = NULL;
    qgeom g = {1, 1, 0};
    CALQ_TRY(qdq_params(c, c->in[0], &g));
    if (g.block) return CALQ_OK;      /* opset 21's blocks: the reference */
    qdq_state *s = malloc(sizeof *s); /* owner: the plan step (qdq_release) */
    if (!s) return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory");
    s->inner = g.inner;
    s->nf = g.len;
    c->state = s;
    return CALQ_OK;
}

static void qdq_release(void *state)
{
    free(state);
}

/* Splits n elements into runs sharing one factor (one run when per tensor), and those into
 * chunks: *seg_len elements per run, *n_chunks chunks per run. */
static int64_t qdq_items(const qdq_state *s, int64_t n, int64_t *seg_len, int64_t *n_chunks)
{
    *seg_len = s->nf == 1 ? n : s->inner;
    *n_chunks = *seg_len > 0 ? (*seg_len + QDQ_CHUNK - 1) / QDQ_CHUNK : 0;
    return *seg_len > 0 ? (n / *seg_len) * *n_chunks : 0;
}

/* Work item it of qdq_items: elements [*i0, *i0 + *len), all of factor *f. */
static void qdq_span(const qdq_state *s, int64_t it, int64_t seg, int64_t n_chunks, int64_t *i0, int64_t *len,
                     int64_t *f)
{
    const int64_t b = it / n_chunks, j0 = (it % n_chunks) * QDQ_CHUNK;
    *len = seg - j0 < QDQ_CHUNK ? seg - j0 : QDQ_CHUNK;
    *f = b % s->nf;
    *i0 = b * seg + j0;
}

static void quant_span_u8(const float *x, int64_t n, float s, float zp, uint8_t *y)
{
    for (int64_t j = 0; j < n; j++) y[j] = (uint8_t)(int32_t)calq__requant_level(x[j] / s, zp, 0.0f, 255.0f);
}

static void quant_span_s8(const float *x, int64_t n, float s, float zp, int8_t *y)
{
    for (int64_t j = 0; j < n; j++) y[j] = (int8_t)(int32_t)calq__requant_level(x[j] / s, zp, -128.0f, 127.0f);
}

static calq_status quantize_run_fast(calq_op_ctx *c)
{
    const qdq_state *st = c->state;
    const calq_tensor *x = c->in[0], *s = c->in[1], *z = c->n_in > 2 ? c->in[2] : NULL;
    CALQ_TRY(calq__qscale_check(c, s, "y_scale"));
    const float *xd = x->data, *sd = s->data;
    const bool u8 = c->out[0]->dtype == CALQ_DTYPE_UINT8;
    void *y = c->out[0]->data;
    int64_t seg, nch;
    const int64_t items = qdq_items(st, calq_tensor_numel(x), &seg, &nch);
#pragma omp parallel for schedule(static) if (items > 1)
    for (int64_t it = 0; it < items; it++) {
        int64_t i0, len, f;
        qdq_span(st, it, seg, nch, &i0, &len, &f);
        const float zp = z ? (float)get_int(z, f) : 0.0f;
        if (u8)
            quant_span_u8(xd + i0, len, sd[f], zp, (uint8_t *)y + i0);
        else
            quant_span_s8(xd + i0, len, sd[f], zp, (int8_t *)y + i0);
    }
    return CALQ_OK;
}

static calq_status dequantize_run_fast(calq_op_ctx *c)
{
    const qdq_state *st = c->state;
    const calq_tensor *x = c->in[0], *s = c->in[1], *z = c->n_in > 2 ? c->in[2] : NULL;
    const float *sd = s->data;
    float *y = c->out[0]->data;
    int64_t seg, nch;
    const int64_t items = qdq_items(st, calq_tensor_numel(x), &seg, &nch);
#pragma omp parallel for schedule(static) if (items > 1)
    for (int64_t it = 0; it < items; it++) {
        int64_t i0, len, f;
        qdq_span(st, it, seg, nch, &i0, &len, &f);
        const float sf = sd[f];
        const int32_t zp = z ? (int32_t)get_int(z, f) : 0;
        float *yo = y + i0;
        switch (x->dtype) {
        case CALQ_DTYPE_UINT8: {
            const uint8_t *q = (const uint8_t *)x->data + i0;
            for (int64_t j = 0; j < len; j++) yo[j] = (float)((int32_t)q[j] - zp) * sf;
            break;
        }
        case CALQ_DTYPE_INT8: {
            const int8_t *q = (const int8_t *)x->data + i0;
            for (int64_t j = 0; j < len; j++) yo[j] = (float)((int32_t)q[j] - zp) * sf;
            break;
        }
        default: { /* int32: the difference in int64, as get_int's */
            const int32_t *q = (const int32_t *)x->data + i0;
            for (int64_t j = 0; j < len; j++) yo[j] = (float)((int64_t)q[j] - zp) * sf;
            break;
        }
        }
    }
    return CALQ_OK;
}

/* The geometry, and the factors' checks: per-tensor x and y factors, zero points typed like their
 * data, usable scales (quant_gemm.h). */
static calq_status qconv_geom(calq_op_ctx *c, calq_conv_geom *g)
{
    const calq_tensor *b = c->n_in > 8 ? c->in[8] : NULL;
    CALQ_TRY(calq__conv_geom_int(c, c->in[0], c->in[3], b, false, g));
    CALQ_TRY(calq__qscale_check(c, c->in[1], "x_scale"));
    CALQ_TRY(calq__qscale_check(c, c->in[4], "w_scale"));
    CALQ_TRY(calq__qscale_check(c, c->in[6], "y_scale"));
    CALQ_TRY(calq__qzp_check(c, c->in[2], c->in[0]->dtype, "x_zero_point"));
    CALQ_TRY(calq__qzp_check(c, c->in[5], c->in[3]->dtype, "w_zero_point"));
    const calq_tensor *yz = c->in[7];
    if (!yz || !calq__dtype_is_q8(yz->dtype))
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "y_zero_point must be int8 or uint8");
    if (!c->in[1] || !c->in[4] || !c->in[6] || calq_tensor_numel(c->in[1]) != 1 || calq_tensor_numel(c->in[6]) != 1 ||
        (c->in[2] && calq_tensor_numel(c->in[2]) != 1) || calq_tensor_numel(yz) != 1)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "x_scale, x_zero_point, y_scale and y_zero_point need one value each");
    return CALQ_OK;
}

static calq_status qconv_infer(calq_op_ctx *c)
{
    calq_conv_geom g;
    CALQ_TRY(qconv_geom(c, &g));
    const calq_tensor *yz = c->in[7];
    int64_t dims[2 + CALQ_CONV_MAX_SP] = {g.n, g.c_out};
    for (int i = 0; i < g.nsp; i++) dims[2 + i] = g.out[i];
    calq__set_shape(c->out[0], yz->dtype, dims, 2 + g.nsp);
    return CALQ_OK;
}

/* The exact int32 sums come from the shared integer convolution (conv_int.c), then each is
 * requantized with its output channel's multiplier. */
static calq_status qconv_run(calq_op_ctx *c)
{
    calq_conv_geom g;
    CALQ_TRY(qconv_geom(c, &g));
    const calq_tensor *b = c->n_in > 8 ? c->in[8] : NULL, *wzp = c->in[5];
    const float xs = *(const float *)c->in[1]->data, ys = *(const float *)c->in[6]->data;
    const int64_t yz = get_int(c->in[7], 0);
    const float *ws = c->in[4]->data;
    const int64_t nws = calq_tensor_numel(c->in[4]), nwz = wzp ? calq_tensor_numel(wzp) : 1;
    if (nws != 1 && nws != g.c_out) return calq__op_fail(c, CALQ_ERR_SHAPE, "w_scale must have 1 or M entries");
    if (nwz != 1 && nwz != g.c_out) return calq__op_fail(c, CALQ_ERR_SHAPE, "w_zero_point must have 1 or M entries");
    calq_tensor *y = c->out[0];
    const int64_t ny = calq_tensor_numel(y), per_m = calq_tensor_numel(c->in[3]) / (g.c_out > 0 ? g.c_out : 1);
    int64_t osz = 1;
    for (int i = 0; i < g.nsp; i++) osz *= g.out[i];
    /* owners: this function. W's zero point is per output channel: W[m] holds per_m values. */
    int16_t *x = calq__int_centered(c->in[0], c->in[2] ? get_int(c->in[2], 0) : 0, NULL, 1);
    int16_t *w = calq__int_centered(c->in[3], 0, wzp, per_m > 0 ? per_m : 1);
    int32_t *acc = malloc(sizeof(int32_t) * (size_t)(ny + 1));
    calq_status st = x && w && acc ? calq__conv_int_ref(c, &g, x, w, b ? b->data : NULL, acc)
                                   : calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory for the integer operands");
    if (st == CALQ_OK) {
#pragma omp parallel for schedule(static) if (ny >= 65536)
        for (int64_t i = 0; i < ny; i++) {
            const int64_t m = (i / osz) % g.c_out;
            const float mult = xs * ws[nws > 1 ? m : 0] / ys;
            calq__store_q(y, i, (float)acc[i] * mult, yz);
        }
    }
    free(x);
    free(w);
    free(acc);
    return st;
}

/* The fast path (int_dnnl.h): oneDNN's exact sums, then qconv_run's bias and requantization in
 * calq__int_epi_channels_last. Zero points and weights must be constants (the primitive holds
 * them); scales and bias are read on every run, as the reference reads them. */
static calq_status qconv_prepare(calq_op_ctx *c)
{
    c->state = NULL;
    calq_conv_geom g;
    CALQ_TRY(qconv_geom(c, &g));
    const calq_tensor *xz = c->in[2], *wz = c->in[5];
    if (!(c->const_inputs & (1u << 3)) || (xz && !(c->const_inputs & (1u << 2))) ||
        (wz && !(c->const_inputs & (1u << 5))))
        return CALQ_OK;
    const int64_t nwz = wz ? calq_tensor_numel(wz) : 1;
    if (nwz != 1 && nwz != g.c_out) return CALQ_OK; /* the reference reports it */
    const calq_int_conv_desc d = {
        .g = g, .x_type = c->in[0]->dtype, .x_zp = xz ? (int32_t)get_int(xz, 0) : 0, .w = c->in[3], .w_zp = wz};
    calq_int_conv_dnnl *s = NULL;
    CALQ_TRY(calq__int_conv_dnnl_create(c, &d, &s));
    c->state = s;
    return CALQ_OK;
}

static calq_status qconv_run_fast(calq_op_ctx *c)
{
    calq_conv_geom g;
    CALQ_TRY(qconv_geom(c, &g));
    const calq_tensor *b = c->n_in > 8 ? c->in[8] : NULL;
    const float xs = *(const float *)c->in[1]->data, ys = *(const float *)c->in[6]->data;
    const float *ws = c->in[4]->data;
    const int64_t nws = calq_tensor_numel(c->in[4]);
    if (nws != 1 && nws != g.c_out) return calq__op_fail(c, CALQ_ERR_SHAPE, "w_scale must have 1 or M entries");
    int64_t osz = 1;
    for (int i = 0; i < g.nsp; i++) osz *= g.out[i];
    float *mult = malloc(sizeof(float) * (size_t)(g.c_out + 1)); /* owner: this function */
    if (!mult)
        return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory for %lld multipliers", (long long)g.c_out);
    for (int64_t m = 0; m < g.c_out; m++) mult[m] = xs * ws[nws > 1 ? m : 0] / ys; /* qconv_run's expression */
    const int32_t *acc;
    calq_status st = calq__int_conv_dnnl_run(c, c->state, c->in[0]->data, &acc);
    if (st == CALQ_OK) {
        const calq_int_epi e = {.out = c->out[0]->dtype,
                                .bias = b ? b->data : NULL,
                                .bias_cs = 1,
                                .mult = mult,
                                .zp = get_int(c->in[7], 0)};
        calq__i32_overflow ov = CALQ_I32_OVERFLOW_NONE;
        calq__int_epi_channels_last(&e, acc, g.n, osz, g.c_out, c->out[0]->data, &ov);
        if (ov.at >= 0) st = calq__conv_int_overflow(c, &ov, g.c_out, osz);
    }
    free(mult);
    return st;
}

const calq_op_def calq__ops_quant[] = {
    {"QuantizeLinear", 2, 3, 1, 1, 0, false, quantize_infer, quantize_run, qdq_prepare, quantize_run_fast, qdq_release,
     0},
    {"DequantizeLinear", 2, 3, 1, 1, 0, false, dequantize_infer, dequantize_run, qdq_prepare, dequantize_run_fast,
     qdq_release, 0},
    {"QLinearConv", 8, 9, 1, 1, 0, false, qconv_infer, qconv_run, qconv_prepare, qconv_run_fast, calq__int_conv_release,
     0},
    {"QLinearMatMul", 8, 8, 1, 1, 0, false, calq__qlinear_matmul_infer, calq__qlinear_matmul_run,
     calq__qlinear_matmul_prepare, calq__qlinear_matmul_run_fast, calq__int_mm_release, 0},
    {"QGemm", 6, 9, 1, 1, 0, false, calq__qgemm_infer, calq__qgemm_run, calq__qgemm_prepare, calq__qgemm_run_fast,
     calq__int_mm_release, CALQ_OP_MSFT},
    {"MatMulIntegerToFloat", 4, 7, 1, 1, 0, false, calq__matmul_int_to_float_infer, calq__matmul_int_to_float_run,
     calq__matmul_int_to_float_prepare, calq__matmul_int_to_float_run_fast, calq__int_mm_release, CALQ_OP_MSFT},
    {NULL, 0, 0, 0, 0, 0, false, NULL, NULL, NULL, NULL, NULL, 0},
};
