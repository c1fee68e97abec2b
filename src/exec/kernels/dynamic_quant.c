/* onnxruntime's dynamic quantization (quantize_dynamic writes these for transformer MatMuls):
 * DynamicQuantizeLinear (float -> uint8 with the scale and zero point of the tensor's own range)
 * and MatMulInteger (exact int32 products of zero-point-shifted 8-bit operands). Reference
 * kernels; every output element is one thread's fixed-order sum, so results do not depend on the
 * thread count. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/op.h"

#define PAR_WORK 32768

/* ---- DynamicQuantizeLinear ------------------------------------------------------------------ */

static calq_status dql_infer(calq_op_ctx *c)
{
    const calq_tensor *x = c->in[0];
    if (x->dtype != CALQ_DTYPE_FLOAT32) return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "the input must be float32");
    calq__set_shape(c->out[0], CALQ_DTYPE_UINT8, x->dims, x->ndim);
    if (c->n_out > 1 && c->out[1]) calq__set_shape(c->out[1], CALQ_DTYPE_FLOAT32, NULL, 0);
    if (c->n_out > 2 && c->out[2]) calq__set_shape(c->out[2], CALQ_DTYPE_UINT8, NULL, 0);
    return CALQ_OK;
}

static float sat_u8(float v)
{
    return v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v;
}

/* The ONNX definition: the range is widened to include 0, scale = (max - min) / 255, zero point
 * = saturate(round(-min / scale)), y = saturate(round(x / scale) + zero point), rounding half
 * to even. An all-zero input has scale 0 and gives zeros. NaN inputs are an error: the range
 * would be meaningless. */
static calq_status dql_run(calq_op_ctx *c)
{
    CALQ_TRY(dql_infer(c));
    const calq_tensor *x = c->in[0];
    const float *xd = x->data;
    int64_t n = calq_tensor_numel(x);
    float lo = 0.0f, hi = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        if (xd[i] != xd[i]) return calq__op_fail(c, CALQ_ERR_DATA, "element %lld is NaN", (long long)i);
        lo = fminf(lo, xd[i]);
        hi = fmaxf(hi, xd[i]);
    }
    float scale = (hi - lo) / 255.0f;
    float zp = scale > 0 ? sat_u8(nearbyintf(-lo / scale)) : 0.0f;
    uint8_t *y = c->out[0]->data;
    for (int64_t i = 0; i < n; i++) y[i] = scale > 0 ? (uint8_t)sat_u8(nearbyintf(xd[i] / scale) + zp) : (uint8_t)zp;
    if (c->n_out > 1 && c->out[1]) *(float *)c->out[1]->data = scale;
    if (c->n_out > 2 && c->out[2]) *(uint8_t *)c->out[2]->data = (uint8_t)zp;
    return CALQ_OK;
}

/* ---- MatMulInteger -------------------------------------------------------------------------- */

static bool is_8bit(calq_dtype t)
{
    return t == CALQ_DTYPE_INT8 || t == CALQ_DTYPE_UINT8;
}

static inline int32_t get8(const calq_tensor *t, int64_t i)
{
    return t->dtype == CALQ_DTYPE_INT8 ? ((const int8_t *)t->data)[i] : ((const uint8_t *)t->data)[i];
}

/* numpy matmul geometry: 1-D operands are promoted (and the added dim dropped from the output),
 * batch dims broadcast. */
typedef struct mm_geom {
    int64_t M, K, N, batches;
    int nd;
    int64_t out[CALQ_MAX_DIMS];
    int64_t a_st[CALQ_MAX_DIMS], b_st[CALQ_MAX_DIMS]; /* batch strides in matrices (0: broadcast) */
    int nb;
    int64_t bdims[CALQ_MAX_DIMS];
} mm_geom;

static calq_status mm_geom_make(calq_op_ctx *c, mm_geom *g)
{
    const calq_tensor *a = c->in[0], *b = c->in[1];
    if (!is_8bit(a->dtype) || !is_8bit(b->dtype))
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "A and B must be int8 or uint8");
    if (a->ndim < 1 || b->ndim < 1) return calq__op_fail(c, CALQ_ERR_SHAPE, "A and B must have at least one dim");
    int64_t ad[CALQ_MAX_DIMS + 1], bd[CALQ_MAX_DIMS + 1];
    int an = a->ndim, bn = b->ndim;
    memcpy(ad, a->dims, sizeof(int64_t) * (size_t)an);
    memcpy(bd, b->dims, sizeof(int64_t) * (size_t)bn);
    if (an == 1) memmove(ad + 1, ad, sizeof(int64_t)), ad[0] = 1, an = 2;
    if (bn == 1) bd[1] = 1, bn = 2;
    g->M = ad[an - 2];
    g->K = ad[an - 1];
    g->N = bd[bn - 1];
    if (bd[bn - 2] != g->K)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "A has %lld columns but B has %lld rows", (long long)g->K,
                             (long long)bd[bn - 2]);
    int nb = 0;
    if (!calq__broadcast_shape(ad, an - 2, bd, bn - 2, g->bdims, &nb))
        return calq__op_fail(c, CALQ_ERR_SHAPE, "the batch dims of A and B do not broadcast");
    g->nb = nb;
    calq__broadcast_strides(ad, an - 2, nb, g->a_st);
    calq__broadcast_strides(bd, bn - 2, nb, g->b_st);
    g->batches = calq__shape_numel(g->bdims, nb);
    g->nd = 0;
    for (int i = 0; i < nb; i++) g->out[g->nd++] = g->bdims[i];
    if (a->ndim > 1) g->out[g->nd++] = g->M;
    if (b->ndim > 1) g->out[g->nd++] = g->N;
    if (g->nd > CALQ_MAX_DIMS) return calq__op_fail(c, CALQ_ERR_SHAPE, "the output has too many dims");
    return CALQ_OK;
}

static calq_status mmi_infer(calq_op_ctx *c)
{
    mm_geom g;
    CALQ_TRY(mm_geom_make(c, &g));
    calq__set_shape(c->out[0], CALQ_DTYPE_INT32, g.out, g.nd);
    return CALQ_OK;
}

/* Zero points: a_zero_point per tensor or per row of A (M values); b_zero_point per tensor or
 * per column of B (N values), as the definition allows. */
static calq_status zero_point(calq_op_ctx *c, int i, calq_dtype want, int64_t n, const char *what)
{
    const calq_tensor *z = i < c->n_in ? c->in[i] : NULL;
    if (!z) return CALQ_OK;
    int64_t k = calq_tensor_numel(z);
    if (z->dtype != want || (k != 1 && k != n))
        return calq__op_fail(c, CALQ_ERR_SHAPE, "%s must be one %s value or %lld of them", what, calq_dtype_name(want),
                             (long long)n);
    return CALQ_OK;
}

static calq_status mmi_run(calq_op_ctx *c)
{
    mm_geom g;
    CALQ_TRY(mm_geom_make(c, &g));
    const calq_tensor *a = c->in[0], *b = c->in[1];
    const calq_tensor *az = c->n_in > 2 ? c->in[2] : NULL, *bz = c->n_in > 3 ? c->in[3] : NULL;
    CALQ_TRY(zero_point(c, 2, a->dtype, g.M, "a_zero_point"));
    CALQ_TRY(zero_point(c, 3, b->dtype, g.N, "b_zero_point"));
    int32_t *y = c->out[0]->data;
    const int64_t M = g.M, K = g.K, N = g.N, items = g.batches * M;
#pragma omp parallel for schedule(static) if (items > 1 && items * N * K > PAR_WORK)
    for (int64_t it = 0; it < items; it++) {
        int64_t bi = it / M, m = it % M, ao = 0, bo = 0, rem = bi;
        for (int d = g.nb - 1; d >= 0; d--) {
            int64_t idx = rem % g.bdims[d];
            rem /= g.bdims[d];
            ao += idx * g.a_st[d];
            bo += idx * g.b_st[d];
        }
        const int64_t abase = (ao * M + m) * K, bbase = bo * K * N;
        int32_t za = az ? get8(az, calq_tensor_numel(az) == 1 ? 0 : m) : 0;
        for (int64_t n = 0; n < N; n++) {
            int32_t zb = bz ? get8(bz, calq_tensor_numel(bz) == 1 ? 0 : n) : 0;
            int64_t acc = 0; /* |terms| < 2^16 and K < 2^31: no int64 overflow */
            for (int64_t k = 0; k < K; k++)
                acc += (int64_t)(get8(a, abase + k) - za) * (get8(b, bbase + k * N + n) - zb);
            y[it * N + n] = (int32_t)acc; /* ONNX: the int32 result wraps like the accumulator */
        }
    }
    return CALQ_OK;
}

const calq_op_def calq__ops_dynamic_quant[] = {
    {"DynamicQuantizeLinear", 1, 1, 1, 3, 0, false, dql_infer, dql_run, NULL, NULL, NULL, 0},
    {"MatMulInteger", 2, 4, 1, 1, 0, false, mmi_infer, mmi_run, NULL, NULL, NULL, 0},
    {0},
};
