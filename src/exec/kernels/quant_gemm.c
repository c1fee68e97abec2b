/* Integer matrix products: ONNX's QLinearMatMul, and onnxruntime's QGemm and MatMulIntegerToFloat,
 * which its CPU execution provider runs in place of DQ -> Gemm [-> Q] and DQ -> MatMul groups of a
 * QDQ model; calq's QDQ fusion pass (src/graph/fuse_qdq.c) creates those two so that calq computes
 * what onnxruntime computes:
 *
 *   QGemm(a, a_scale, a_zp, b, b_scale, b_zp, [c int32], [y_scale, y_zp])   (com.microsoft)
 *     acc = c + sum_k (a - a_zp)(b - b_zp[n]), exact; scale[n] = alpha * a_scale * b_scale[n]
 *     (float32, in that order); y = (float)acc * scale[n], or without y_scale the float value
 *     itself, with y_scale requantized: round_half_even((float)acc * (scale[n] / y_scale)) + y_zp.
 *   QLinearMatMul(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp)        (ONNX)
 *     numpy matmul; y = round_half_even((float)acc * (a_scale * b_scale[n] / y_scale)) + y_zp.
 *   MatMulIntegerToFloat(a, b, a_scale, b_scale, [a_zp], [b_zp], [bias])    (com.microsoft)
 *     numpy matmul; y = (float)acc * (a_scale * b_scale[n]) (+ bias[n], added after the product).
 *
 * b's scale and zero point are per tensor or per column n. And the integer Gemm / MatMul of Ascend
 * deploy models (ascend.h), which are these products without any scale:
 *
 *   calq.AscendGemm(a int8, b int8, [c int32]), calq.AscendMatMul(a int8, b int8)
 *     acc = c + sum_k (a - input_offset)(b), exact, stored as int32 (amct-reference.md §9.1);
 *     Gemm's transA / transB as in ONNX, alpha = beta = 1; MatMul numpy-style.
 *
 * The integer sums are those of the other integer layers (amct-reference.md §9.1's form,
 * int_accum.h): exact, in a fixed order, checked against int32 (onnxruntime's accumulator; the
 * first output in memory order that leaves it is named). Rows are independent, so results do not
 * depend on the thread count. */
#include "exec/kernels/quant_gemm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernels/ascend.h"
#include "exec/kernels/int_accum.h"
#include "exec/kernels/int_dnnl.h"

static const calq_tensor *opt_in(const calq_op_ctx *c, int k)
{
    return k < c->n_in ? c->in[k] : NULL;
}

/* One zero point as an integer, 0 when absent (dtypes checked by calq__qzp_check). */
static int64_t zero_point(const calq_tensor *z)
{
    return z && calq_tensor_numel(z) > 0 ? calq__tensor_get_i64(z, 0) : 0;
}

calq_status calq__qscale_check(calq_op_ctx *c, const calq_tensor *s, const char *what)
{
    if (!s) return CALQ_OK;
    if (s->dtype != CALQ_DTYPE_FLOAT32)
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "%s must be float32, not %s", what, calq_dtype_name(s->dtype));
    if (!s->data) return CALQ_OK; /* not known before the run */
    const float *v = s->data;
    const int64_t n = calq_tensor_numel(s);
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(v[i]) || v[i] == 0.0f)
            return calq__op_fail(c, CALQ_ERR_DATA, "%s[%lld] is %g: a scale must be finite and non-zero", what,
                                 (long long)i, (double)v[i]);
    return CALQ_OK;
}

calq_status calq__qzp_check(calq_op_ctx *c, const calq_tensor *z, calq_dtype t, const char *what)
{
    if (z && z->dtype != t)
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "%s is %s, but its data is %s", what, calq_dtype_name(z->dtype),
                             calq_dtype_name(t));
    return CALQ_OK;
}

void calq__store_q(calq_tensor *y, int64_t i, float v, int64_t zp)
{
    const bool s8 = y->dtype == CALQ_DTYPE_INT8;
    const float lo = s8 ? -128.0f : 0.0f, hi = s8 ? 127.0f : 255.0f;
    float r = isnan(v) ? lo : calq_round(v, CALQ_ROUND_HALF_EVEN) + (float)zp;
    r = r < lo ? lo : r > hi ? hi : r;
    if (s8)
        ((int8_t *)y->data)[i] = (int8_t)r;
    else
        ((uint8_t *)y->data)[i] = (uint8_t)r;
}

/* A float output (QGemm without y_scale) or a requantized 8-bit one. */
static void store(calq_tensor *y, int64_t i, float v, int64_t zp)
{
    if (y->dtype == CALQ_DTYPE_FLOAT32)
        ((float *)y->data)[i] = v;
    else
        calq__store_q(y, i, v, zp);
}

/* The checks every operator here makes: 8-bit a and b, per-tensor a_scale / a_zp and y_scale /
 * y_zp (both or neither), b_scale / b_zp with 1 or n_col values (n_col < 0: not known yet), zero
 * points typed like their data (y's: int8 / uint8), and usable scales. */
static calq_status check_operands(calq_op_ctx *c, const calq_tensor *a, const calq_tensor *as, const calq_tensor *az,
                                  const calq_tensor *b, const calq_tensor *bs, const calq_tensor *bz,
                                  const calq_tensor *ys, const calq_tensor *yz, int64_t n_col)
{
    if (!as || !bs) return calq__op_fail(c, CALQ_ERR_SHAPE, "a_scale and b_scale must be given");
    if (!calq__dtype_is_q8(a->dtype) || !calq__dtype_is_q8(b->dtype))
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "needs int8/uint8 a and b (a is %s, b is %s)",
                             calq_dtype_name(a->dtype), calq_dtype_name(b->dtype));
    CALQ_TRY(calq__qscale_check(c, as, "a_scale"));
    CALQ_TRY(calq__qscale_check(c, bs, "b_scale"));
    CALQ_TRY(calq__qscale_check(c, ys, "y_scale"));
    CALQ_TRY(calq__qzp_check(c, az, a->dtype, "a_zero_point"));
    CALQ_TRY(calq__qzp_check(c, bz, b->dtype, "b_zero_point"));
    if (yz && !calq__dtype_is_q8(yz->dtype))
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "y_zero_point must be int8 or uint8, not %s",
                             calq_dtype_name(yz->dtype));
    if (calq_tensor_numel(as) != 1 || (az && calq_tensor_numel(az) != 1))
        return calq__op_fail(c, CALQ_ERR_SHAPE, "a_scale and a_zero_point must have one value each");
    if ((ys == NULL) != (yz == NULL) || (ys && (calq_tensor_numel(ys) != 1 || calq_tensor_numel(yz) != 1)))
        return calq__op_fail(c, CALQ_ERR_SHAPE, "y_scale and y_zero_point go together, one value each");
    const int64_t nbs = calq_tensor_numel(bs);
    if ((nbs != 1 && n_col >= 0 && nbs != n_col) || (bz && calq_tensor_numel(bz) != nbs))
        return calq__op_fail(c, CALQ_ERR_SHAPE, "b_scale (and b_zero_point) must have 1 or N (%lld) values",
                             (long long)n_col);
    return CALQ_OK;
}

/* scale[n] = alpha * a_scale * b_scale[n] (/ y_scale), float32 in that order, for n < N.
 * Owner: the caller (free); NULL when out of memory. */
static float *column_scales(float alpha, const calq_tensor *as, const calq_tensor *bs, const calq_tensor *ys, int64_t N)
{
    float *scale = malloc(sizeof(float) * (size_t)(N + 1));
    const float a_s = *(const float *)as->data, *b_s = bs->data;
    const int64_t nbs = calq_tensor_numel(bs);
    for (int64_t n = 0; scale && n < N; n++) {
        scale[n] = alpha * a_s * b_s[nbs > 1 ? n : 0];
        if (ys) scale[n] /= *(const float *)ys->data;
    }
    return scale;
}

/* ---- QGemm ------------------------------------------------------------------------------ */

typedef struct qgemm_geom {
    int64_t M, K, N;
    int64_t a_rs, a_cs, b_rs, b_cs; /* element strides of a's rows / k and b's k / columns */
    int64_t c_m, c_n;               /* c's extents (1 = broadcast) */
} qgemm_geom;

/* The shapes of a (transposed) a [M, K] times b [K, N] plus c broadcast to [M, N]. */
static calq_status qgemm_shape(calq_op_ctx *c, const calq_tensor *a, const calq_tensor *b, const calq_tensor *bias,
                               qgemm_geom *g)
{
    memset(g, 0, sizeof *g);
    if (a->ndim != 2 || b->ndim != 2) return calq__op_fail(c, CALQ_ERR_SHAPE, "a and b must be 2-D");
    const bool ta = calq__attr_int(c->node, "transA", 0) != 0, tb = calq__attr_int(c->node, "transB", 0) != 0;
    g->M = ta ? a->dims[1] : a->dims[0];
    g->K = ta ? a->dims[0] : a->dims[1];
    g->N = tb ? b->dims[0] : b->dims[1];
    if ((tb ? b->dims[1] : b->dims[0]) != g->K)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "inner dimensions differ (%lld and %lld)", (long long)g->K,
                             (long long)(tb ? b->dims[1] : b->dims[0]));
    g->a_rs = ta ? 1 : g->K;
    g->a_cs = ta ? g->M : 1;
    g->b_rs = tb ? 1 : g->N;
    g->b_cs = tb ? g->K : 1;
    g->c_m = g->c_n = 1;
    if (bias) {
        if (bias->dtype != CALQ_DTYPE_INT32 || bias->ndim > 2)
            return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "c must be an int32 scalar, vector or matrix");
        if (bias->ndim >= 1) g->c_n = bias->dims[bias->ndim - 1];
        if (bias->ndim == 2) g->c_m = bias->dims[0];
        if ((g->c_m != 1 && g->c_m != g->M) || (g->c_n != 1 && g->c_n != g->N))
            return calq__op_fail(c, CALQ_ERR_SHAPE, "c does not broadcast to %lldx%lld", (long long)g->M,
                                 (long long)g->N);
    }
    return CALQ_OK;
}

static calq_status qgemm_geom_of(calq_op_ctx *c, qgemm_geom *g)
{
    const calq_tensor *a = c->in[0], *b = c->in[3];
    CALQ_TRY(qgemm_shape(c, a, b, opt_in(c, 6), g));
    return check_operands(c, a, c->in[1], c->in[2], b, c->in[4], c->in[5], opt_in(c, 7), opt_in(c, 8), g->N);
}

/* acc[m * N + n] = c[m, n] + sum_k a[m, k] * b[k, n] of centered a and b, exact. */
static void qgemm_acc(const qgemm_geom *g, const int16_t *a, const int16_t *b, const calq_tensor *bias, int64_t *acc)
{
#pragma omp parallel for schedule(static)
    for (int64_t m = 0; m < g->M; m++) {
        int64_t *row = acc + m * g->N;
        calq__int_dot_row(a + m * g->a_rs, g->a_cs, b, g->b_rs, g->b_cs, g->K, g->N, row);
        if (bias)
            for (int64_t n = 0; n < g->N; n++)
                row[n] += ((const int32_t *)bias->data)[(g->c_m > 1 ? m * g->c_n : 0) + (g->c_n > 1 ? n : 0)];
    }
}

/* The error for the first sum (lowest output index) that leaves int32. */
static calq_status overflow_fail(calq_op_ctx *c, const calq__i32_overflow *ov)
{
    return calq__op_fail(c, CALQ_ERR_DATA, "the exact sum %lld at output %lld overflows the int32 accumulator",
                         (long long)ov->sum, (long long)ov->at);
}

calq_status calq__qgemm_infer(calq_op_ctx *c)
{
    qgemm_geom g;
    CALQ_TRY(qgemm_geom_of(c, &g));
    const calq_tensor *yz = opt_in(c, 8);
    const int64_t dims[2] = {g.M, g.N};
    calq__set_shape(c->out[0], yz ? yz->dtype : CALQ_DTYPE_FLOAT32, dims, 2);
    return CALQ_OK;
}

calq_status calq__qgemm_run(calq_op_ctx *c)
{
    qgemm_geom g;
    CALQ_TRY(qgemm_geom_of(c, &g));
    if (g.M == 0 || g.N == 0) return CALQ_OK; /* an empty output */
    const calq_tensor *bias = opt_in(c, 6), *ys = opt_in(c, 7);
    const int64_t y_zp = zero_point(opt_in(c, 8));
    calq_tensor *y = c->out[0];
    /* owners: this function. b's zero point is per column: column n of b holds elements i with
     * (i / inner) % N == n, inner = 1 for b [K, N], K for a transposed b [N, K] (at least 1: with
     * K = 0 there are no elements). */
    float *scale = column_scales(calq__attr_float(c->node, "alpha", 1.0f), c->in[1], c->in[4], ys, g.N);
    int16_t *a = calq__int_centered(c->in[0], zero_point(c->in[2]), NULL, 1);
    int16_t *b = calq__int_centered(c->in[3], 0, c->in[5], g.b_cs == 1 || g.K == 0 ? 1 : g.K);
    int64_t *acc = malloc(sizeof(int64_t) * (size_t)(g.M * g.N + 1));
    calq_status st = CALQ_OK;
    if (!scale || !a || !b || !acc) st = calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory for the operands");
    calq__i32_overflow ov = CALQ_I32_OVERFLOW_NONE;
    if (st == CALQ_OK) {
        qgemm_acc(&g, a, b, bias, acc);
        const int64_t n_y = g.M * g.N;
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n_y; i++) {
            if (!calq__int_fits_i32(acc[i])) calq__int_overflow_note(&ov, i, acc[i]);
            store(y, i, (float)acc[i] * scale[i % g.N], y_zp);
        }
        if (ov.at >= 0) st = overflow_fail(c, &ov);
    }
    free(scale);
    free(a);
    free(b);
    free(acc);
    return st;
}

/* ---- QLinearMatMul and MatMulIntegerToFloat ----------------------------------------------- */

/* The operands of a numpy matmul of quantized a [..., M, K] and b [..., K, N] (a 1-D a is a row,
 * a 1-D b a column): QLinearMatMul requantizes (y_scale, y_zp), MatMulIntegerToFloat gives
 * float32 (+ bias). Absent optional inputs are NULL. */
typedef struct qmm_args {
    const calq_tensor *a, *a_s, *a_zp, *b, *b_s, *b_zp, *y_s, *y_zp, *bias;
} qmm_args;

static qmm_args qlinear_matmul_args(const calq_op_ctx *c)
{
    return (qmm_args){c->in[0], c->in[1], c->in[2], c->in[3], c->in[4], c->in[5], c->in[6], c->in[7], NULL};
}

static qmm_args matmul_int_to_float_args(const calq_op_ctx *c)
{
    return (qmm_args){c->in[0], c->in[2], opt_in(c, 4), c->in[1], c->in[3], opt_in(c, 5), NULL, NULL, opt_in(c, 6)};
}

typedef struct mm_geom {
    int64_t M, K, N, n_mat;
    int nb;
    int64_t batch[CALQ_MAX_DIMS], sa[CALQ_MAX_DIMS], sb[CALQ_MAX_DIMS]; /* dims, strides in matrices */
    int64_t dims[CALQ_MAX_DIMS];
    int ndim;
} mm_geom;

/* The shapes of a numpy matmul of a [..., M, K] and b [..., K, N]. */
static calq_status mm_shape(calq_op_ctx *c, const calq_tensor *a, const calq_tensor *b, mm_geom *g)
{
    if (a->ndim < 1 || b->ndim < 1) return calq__op_fail(c, CALQ_ERR_SHAPE, "a and b need at least one dim");
    memset(g, 0, sizeof *g);
    g->M = a->ndim > 1 ? a->dims[a->ndim - 2] : 1;
    g->K = a->dims[a->ndim - 1];
    g->N = b->ndim > 1 ? b->dims[b->ndim - 1] : 1;
    const int64_t kb = b->ndim > 1 ? b->dims[b->ndim - 2] : b->dims[0];
    if (kb != g->K)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "inner dimensions differ (%lld and %lld)", (long long)g->K,
                             (long long)kb);
    int na = a->ndim > 2 ? a->ndim - 2 : 0, nbb = b->ndim > 2 ? b->ndim - 2 : 0;
    if (!calq__broadcast_shape(a->dims, na, b->dims, nbb, g->batch, &g->nb))
        return calq__op_fail(c, CALQ_ERR_SHAPE, "batch dimensions do not broadcast");
    calq__broadcast_strides(a->dims, na, g->nb, g->sa);
    calq__broadcast_strides(b->dims, nbb, g->nb, g->sb);
    g->n_mat = 1;
    for (int i = 0; i < g->nb; i++) {
        g->dims[g->ndim++] = g->batch[i];
        g->n_mat *= g->batch[i];
    }
    if (a->ndim > 1) g->dims[g->ndim++] = g->M;
    if (b->ndim > 1) g->dims[g->ndim++] = g->N;
    if (calq__shape_numel(g->dims, g->ndim) < 0) return calq__op_fail(c, CALQ_ERR_SHAPE, "the output is too large");
    return CALQ_OK;
}

static calq_status mm_geom_of(calq_op_ctx *c, const qmm_args *q, mm_geom *g)
{
    CALQ_TRY(mm_shape(c, q->a, q->b, g));
    CALQ_TRY(check_operands(c, q->a, q->a_s, q->a_zp, q->b, q->b_s, q->b_zp, q->y_s, q->y_zp, g->N));
    if (q->bias && (q->bias->dtype != CALQ_DTYPE_FLOAT32 || calq_tensor_numel(q->bias) != g->N))
        return calq__op_fail(c, CALQ_ERR_SHAPE, "bias must be float32 with N (%lld) values", (long long)g->N);
    return CALQ_OK;
}

/* acc[r * N + n] for output row r (matrix t = r / M, row m = r % M) of centered a and b, exact. */
static void qmm_acc(const mm_geom *g, const int16_t *a, const int16_t *b, int64_t *acc)
{
    const int64_t rows = g->n_mat * g->M;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const int64_t t = r / g->M, m = r % g->M;
        int64_t ia = 0, ib = 0, rem = t; /* matrix index of a and b for output matrix t */
        for (int i = g->nb - 1; i >= 0; i--) {
            const int64_t k = rem % g->batch[i];
            rem /= g->batch[i];
            ia += k * g->sa[i];
            ib += k * g->sb[i];
        }
        calq__int_dot_row(a + (ia * g->M + m) * g->K, 1, b + ib * g->K * g->N, g->N, 1, g->K, g->N, acc + r * g->N);
    }
}

static calq_status qmm_infer(calq_op_ctx *c, const qmm_args *q)
{
    mm_geom g;
    CALQ_TRY(mm_geom_of(c, q, &g));
    calq__set_shape(c->out[0], q->y_zp ? q->y_zp->dtype : CALQ_DTYPE_FLOAT32, g.dims, g.ndim);
    return CALQ_OK;
}

static calq_status qmm_run(calq_op_ctx *c, const qmm_args *q)
{
    mm_geom g;
    CALQ_TRY(mm_geom_of(c, q, &g));
    const int64_t rows = g.n_mat * g.M, y_zp = zero_point(q->y_zp);
    if (rows == 0 || g.N == 0) return CALQ_OK; /* an empty output */
    calq_tensor *y = c->out[0];
    /* owners: this function; b's zero point per column n = i % N */
    float *mult = column_scales(1.0f, q->a_s, q->b_s, q->y_s, g.N);
    int16_t *a = calq__int_centered(q->a, zero_point(q->a_zp), NULL, 1);
    int16_t *b = calq__int_centered(q->b, 0, q->b_zp, 1);
    int64_t *acc = malloc(sizeof(int64_t) * (size_t)(rows * g.N + 1));
    calq_status st = CALQ_OK;
    if (!mult || !a || !b || !acc) st = calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory for the operands");
    calq__i32_overflow ov = CALQ_I32_OVERFLOW_NONE;
    if (st == CALQ_OK) {
        qmm_acc(&g, a, b, acc);
        const int64_t n_y = rows * g.N;
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n_y; i++) {
            if (!calq__int_fits_i32(acc[i])) calq__int_overflow_note(&ov, i, acc[i]);
            const int64_t n = i % g.N;
            const float v = (float)acc[i] * mult[n];
            store(y, i, q->bias ? v + ((const float *)q->bias->data)[n] : v, y_zp);
        }
        if (ov.at >= 0) st = overflow_fail(c, &ov);
    }
    free(mult);
    free(a);
    free(b);
    free(acc);
    return st;
}

calq_status calq__qlinear_matmul_infer(calq_op_ctx *c)
{
    const qmm_args q = qlinear_matmul_args(c);
    return qmm_infer(c, &q);
}

calq_status calq__qlinear_matmul_run(calq_op_ctx *c)
{
    const qmm_args q = qlinear_matmul_args(c);
    return qmm_run(c, &q);
}

calq_status calq__matmul_int_to_float_infer(calq_op_ctx *c)
{
    const qmm_args q = matmul_int_to_float_args(c);
    return qmm_infer(c, &q);
}

calq_status calq__matmul_int_to_float_run(calq_op_ctx *c)
{
    const qmm_args q = matmul_int_to_float_args(c);
    return qmm_run(c, &q);
}

/* ---- the Ascend deploy layers ------------------------------------------------------------ */

/* The operand types of an Ascend integer layer: int8 a (an AscendQuant's output), int8 b, int32 c. */
static calq_status ascend_check(calq_op_ctx *c, const calq_tensor *a, const calq_tensor *b, const calq_tensor *bias)
{
    if (a->dtype != CALQ_DTYPE_INT8 || b->dtype != CALQ_DTYPE_INT8 || (bias && bias->dtype != CALQ_DTYPE_INT32))
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED,
                             "A is int8, so this is an Ascend deploy layer (amct-reference.md §9.1), which needs an "
                             "int8 B%s (A is %s, B is %s%s%s)",
                             bias ? " and an int32 C" : "", calq_dtype_name(a->dtype), calq_dtype_name(b->dtype),
                             bias ? ", C is " : "", bias ? calq_dtype_name(bias->dtype) : "");
    return CALQ_OK;
}

static calq_status ascend_gemm_geom(calq_op_ctx *c, qgemm_geom *g)
{
    const calq_tensor *bias = opt_in(c, 2);
    CALQ_TRY(ascend_check(c, c->in[0], c->in[1], bias));
    if (calq__attr_float(c->node, "alpha", 1.0f) != 1.0f || (bias && calq__attr_float(c->node, "beta", 1.0f) != 1.0f))
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "an integer Gemm needs alpha = beta = 1");
    CALQ_TRY(qgemm_shape(c, c->in[0], c->in[1], bias, g));
    if (calq__shape_numel((int64_t[]){g->M, g->N}, 2) < 0)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "the output is too large");
    return CALQ_OK;
}

/* Stores the exact sums acc[0..n) as int32 y, failing on the first that leaves int32. */
static calq_status store_i32(calq_op_ctx *c, const int64_t *acc, int64_t n, int32_t *y)
{
    calq__i32_overflow ov = CALQ_I32_OVERFLOW_NONE;
#pragma omp parallel for schedule(static) if (n >= 65536)
    for (int64_t i = 0; i < n; i++) y[i] = calq__int_store_i32(acc[i], i, &ov);
    return ov.at >= 0 ? overflow_fail(c, &ov) : CALQ_OK;
}

calq_status calq__ascend_gemm_infer(calq_op_ctx *c)
{
    int32_t o;
    CALQ_TRY(calq__ascend_input_offset(c, &o));
    qgemm_geom g;
    CALQ_TRY(ascend_gemm_geom(c, &g));
    calq__set_shape(c->out[0], CALQ_DTYPE_INT32, (int64_t[]){g.M, g.N}, 2);
    return CALQ_OK;
}

calq_status calq__ascend_gemm_run(calq_op_ctx *c)
{
    int32_t o;
    CALQ_TRY(calq__ascend_input_offset(c, &o));
    qgemm_geom g;
    CALQ_TRY(ascend_gemm_geom(c, &g));
    if (g.M == 0 || g.N == 0) return CALQ_OK; /* an empty output */
    /* owners: this function */
    int16_t *a = calq__int_centered(c->in[0], o, NULL, 1), *b = calq__int_centered(c->in[1], 0, NULL, 1);
    int64_t *acc = malloc(sizeof(int64_t) * (size_t)(g.M * g.N + 1));
    calq_status st =
        a && b && acc ? CALQ_OK : calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory for the integer operands");
    if (st == CALQ_OK) {
        qgemm_acc(&g, a, b, opt_in(c, 2), acc);
        st = store_i32(c, acc, g.M * g.N, c->out[0]->data);
    }
    free(a);
    free(b);
    free(acc);
    return st;
}

calq_status calq__ascend_matmul_infer(calq_op_ctx *c)
{
    int32_t o;
    CALQ_TRY(calq__ascend_input_offset(c, &o));
    CALQ_TRY(ascend_check(c, c->in[0], c->in[1], NULL));
    mm_geom g;
    CALQ_TRY(mm_shape(c, c->in[0], c->in[1], &g));
    calq__set_shape(c->out[0], CALQ_DTYPE_INT32, g.dims, g.ndim);
    return CALQ_OK;
}

calq_status calq__ascend_matmul_run(calq_op_ctx *c)
{
    int32_t o;
    CALQ_TRY(calq__ascend_input_offset(c, &o));
    CALQ_TRY(ascend_check(c, c->in[0], c->in[1], NULL));
    mm_geom g;
    CALQ_TRY(mm_shape(c, c->in[0], c->in[1], &g));
    const int64_t n_y = g.n_mat * g.M * g.N;
    if (n_y == 0) return CALQ_OK; /* an empty output */
    /* owners: this function */
    int16_t *a = calq__int_centered(c->in[0], o, NULL, 1), *b = calq__int_centered(c->in[1], 0, NULL, 1);
    int64_t *acc = malloc(sizeof(int64_t) * (size_t)(n_y + 1));
    calq_status st =
        a && b && acc ? CALQ_OK : calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory for the integer operands");
    if (st == CALQ_OK) {
        qmm_acc(&g, a, b, acc);
        st = store_i32(c, acc, n_y, c->out[0]->data);
    }
    free(a);
    free(b);
    free(acc);
    return st;
}

/* ---- fast paths (int_dnnl.h) ------------------------------------------------------------- */

/* Whether input k is absent (k < 0 included) or a constant (the same data on every run, known in
 * prepare). */
static bool const_or_absent(const calq_op_ctx *c, int k)
{
    return k < 0 || k >= c->n_in || !c->in[k] || ((c->const_inputs >> k) & 1u);
}

/* oneDNN's product of activation a (input ka, zero point input kaz, or the given zero point when
 * kaz < 0) by the constant b (input kb, zero point input kbz, none when kbz < 0) over `rows` rows:
 * the state, or NULL when the fast path declines. */
static calq_status mm_prepare(calq_op_ctx *c, int64_t rows, int64_t K, int64_t N, bool ta, bool tb, int ka, int kaz,
                              int32_t a_zp, int kb, int kbz)
{
    c->state = NULL;
    if (!c->in[kb] || !const_or_absent(c, kb) || !const_or_absent(c, kaz) || !const_or_absent(c, kbz)) return CALQ_OK;
    const calq_int_mm_desc d = {.M = rows,
                                .K = K,
                                .N = N,
                                .trans_a = ta,
                                .trans_b = tb,
                                .a_type = c->in[ka]->dtype,
                                .a_zp = kaz >= 0 ? (int32_t)zero_point(opt_in(c, kaz)) : a_zp,
                                .b = c->in[kb],
                                .b_zp = kbz >= 0 ? opt_in(c, kbz) : NULL};
    calq_int_mm_dnnl *s = NULL;
    CALQ_TRY(calq__int_mm_dnnl_create(c, &d, &s));
    c->state = s;
    return CALQ_OK;
}

/* Runs the product on input ka and writes the output through epilogue e (rows x N). */
static calq_status mm_fast_run(calq_op_ctx *c, int ka, int64_t rows, int64_t N, const calq_int_epi *e)
{
    if (rows == 0 || N == 0) return CALQ_OK;
    const int32_t *acc;
    CALQ_TRY(calq__int_mm_dnnl_run(c, c->state, c->in[ka]->data, &acc));
    calq__i32_overflow ov = CALQ_I32_OVERFLOW_NONE;
    calq__int_epi_rows(e, acc, rows, N, c->out[0]->data, &ov);
    return ov.at >= 0 ? overflow_fail(c, &ov) : CALQ_OK;
}

void calq__int_mm_release(void *state)
{
    calq__int_mm_dnnl_free(state);
}

/* c's broadcast [c_m, c_n] as epilogue strides. */
static void gemm_bias(calq_int_epi *e, const calq_tensor *bias, const qgemm_geom *g)
{
    e->bias = bias ? bias->data : NULL;
    e->bias_rs = g->c_m > 1 ? g->c_n : 0;
    e->bias_cs = g->c_n > 1 ? 1 : 0;
}

static bool attr_flag(const calq_op_ctx *c, const char *name)
{
    return calq__attr_int(c->node, name, 0) != 0;
}

calq_status calq__qgemm_prepare(calq_op_ctx *c)
{
    c->state = NULL;
    qgemm_geom g;
    CALQ_TRY(qgemm_geom_of(c, &g));
    return mm_prepare(c, g.M, g.K, g.N, attr_flag(c, "transA"), attr_flag(c, "transB"), 0, 2, 0, 3, 5);
}

calq_status calq__qgemm_run_fast(calq_op_ctx *c)
{
    qgemm_geom g;
    CALQ_TRY(qgemm_geom_of(c, &g));
    /* owner: this function; calq__qgemm_run's scales */
    float *scale = column_scales(calq__attr_float(c->node, "alpha", 1.0f), c->in[1], c->in[4], opt_in(c, 7), g.N);
    if (!scale) return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory for the scales");
    calq_int_epi e = {.out = c->out[0]->dtype, .mult = scale, .zp = zero_point(opt_in(c, 8))};
    gemm_bias(&e, opt_in(c, 6), &g);
    calq_status st = mm_fast_run(c, 0, g.M, g.N, &e);
    free(scale);
    return st;
}

/* QLinearMatMul / MatMulIntegerToFloat with a constant 2-D b: a's batches and rows are its rows. */
static calq_status qmm_prepare(calq_op_ctx *c, const qmm_args *q, int kaz, int kb, int kbz)
{
    c->state = NULL;
    mm_geom g;
    CALQ_TRY(mm_geom_of(c, q, &g));
    if (q->b->ndim != 2) return CALQ_OK;
    return mm_prepare(c, g.n_mat * g.M, g.K, g.N, false, false, 0, kaz, 0, kb, kbz);
}

static calq_status qmm_run_fast(calq_op_ctx *c, const qmm_args *q)
{
    mm_geom g;
    CALQ_TRY(mm_geom_of(c, q, &g));
    float *mult = column_scales(1.0f, q->a_s, q->b_s, q->y_s, g.N); /* owner: this function; qmm_run's */
    if (!mult) return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory for the scales");
    const calq_int_epi e = {
        .out = c->out[0]->dtype, .mult = mult, .fbias = q->bias ? q->bias->data : NULL, .zp = zero_point(q->y_zp)};
    calq_status st = mm_fast_run(c, 0, g.n_mat * g.M, g.N, &e);
    free(mult);
    return st;
}

calq_status calq__qlinear_matmul_prepare(calq_op_ctx *c)
{
    const qmm_args q = qlinear_matmul_args(c);
    return qmm_prepare(c, &q, 2, 3, 5);
}

calq_status calq__qlinear_matmul_run_fast(calq_op_ctx *c)
{
    const qmm_args q = qlinear_matmul_args(c);
    return qmm_run_fast(c, &q);
}

calq_status calq__matmul_int_to_float_prepare(calq_op_ctx *c)
{
    const qmm_args q = matmul_int_to_float_args(c);
    return qmm_prepare(c, &q, 4, 1, 5);
}

calq_status calq__matmul_int_to_float_run_fast(calq_op_ctx *c)
{
    const qmm_args q = matmul_int_to_float_args(c);
    return qmm_run_fast(c, &q);
}

calq_status calq__ascend_gemm_prepare(calq_op_ctx *c)
{
    c->state = NULL;
    int32_t o;
    CALQ_TRY(calq__ascend_input_offset(c, &o));
    qgemm_geom g;
    CALQ_TRY(ascend_gemm_geom(c, &g));
    return mm_prepare(c, g.M, g.K, g.N, attr_flag(c, "transA"), attr_flag(c, "transB"), 0, -1, o, 1, -1);
}

calq_status calq__ascend_gemm_run_fast(calq_op_ctx *c)
{
    qgemm_geom g;
    CALQ_TRY(ascend_gemm_geom(c, &g));
    calq_int_epi e = {.out = CALQ_DTYPE_INT32};
    gemm_bias(&e, opt_in(c, 2), &g);
    return mm_fast_run(c, 0, g.M, g.N, &e);
}

calq_status calq__ascend_matmul_prepare(calq_op_ctx *c)
{
    c->state = NULL;
    int32_t o;
    CALQ_TRY(calq__ascend_input_offset(c, &o));
    CALQ_TRY(ascend_check(c, c->in[0], c->in[1], NULL));
    mm_geom g;
    CALQ_TRY(mm_shape(c, c->in[0], c->in[1], &g));
    if (c->in[1]->ndim != 2) return CALQ_OK;
    return mm_prepare(c, g.n_mat * g.M, g.K, g.N, false, false, 0, -1, o, 1, -1);
}

calq_status calq__ascend_matmul_run_fast(calq_op_ctx *c)
{
    mm_geom g;
    CALQ_TRY(mm_shape(c, c->in[0], c->in[1], &g));
    const calq_int_epi e = {.out = CALQ_DTYPE_INT32};
    return mm_fast_run(c, 0, g.n_mat * g.M, g.N, &e);
}
