/* Reference kernels of ONNX's quantization operators, so calq runs the models `calq save`
 * writes (issue 6): QuantizeLinear, DequantizeLinear (per tensor, or per axis from opset 13),
 * QLinearConv and QLinearMatMul (int8 / uint8 data, int32 bias).
 *
 * Semantics follow the ONNX operator definitions, which use AMCT's convention (§0.3):
 * q = saturate(round_half_even(x / scale) + zero_point), x = (q - zero_point) * scale.
 * QLinear kernels accumulate sum((x - x_zp)(w - w_zp)) + bias exactly in int32 (int64 here,
 * then checked), and requantize with the float32 multiplier x_scale*w_scale/y_scale, rounding
 * half to even, as onnxruntime does. Each output element is computed by one thread in a fixed
 * order, so results do not depend on the thread count. */
#include <math.h>
#include <string.h>

#include "exec/kernels/conv_dnnl.h"
#include "exec/op.h"

static bool is_q8(calq_dtype t)
{
    return t == CALQ_DTYPE_INT8 || t == CALQ_DTYPE_UINT8;
}

static int64_t get_int(const calq_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case CALQ_DTYPE_INT8: return ((const int8_t *)t->data)[i];
    case CALQ_DTYPE_UINT8: return ((const uint8_t *)t->data)[i];
    case CALQ_DTYPE_INT32: return ((const int32_t *)t->data)[i];
    default: return 0;
    }
}

static float saturate_q(float v, calq_dtype t, int64_t zp)
{
    float r = calq_round(v, CALQ_ROUND_HALF_EVEN) + (float)zp;
    float lo = t == CALQ_DTYPE_INT8 ? -128.0f : 0.0f, hi = t == CALQ_DTYPE_INT8 ? 127.0f : 255.0f;
    return r < lo ? lo : r > hi ? hi : r;
}

static void put_q(calq_tensor *t, int64_t i, float v)
{
    if (t->dtype == CALQ_DTYPE_INT8)
        ((int8_t *)t->data)[i] = (int8_t)v;
    else
        ((uint8_t *)t->data)[i] = (uint8_t)v;
}

/* Checks scale / zero point of a (De)QuantizeLinear and returns the axis geometry: element i
 * uses factor (i / inner) % n_f. */
static calq_status qdq_params(calq_op_ctx *c, const calq_tensor *x, int64_t *inner, int64_t *nf)
{
    const calq_tensor *s = c->in[1], *z = c->n_in > 2 ? c->in[2] : NULL;
    if (s->dtype != CALQ_DTYPE_FLOAT32) return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "scale must be float32");
    int64_t n = calq_tensor_numel(s);
    if (z && calq_tensor_numel(z) != n) return calq__op_fail(c, CALQ_ERR_SHAPE, "scale and zero point differ in size");
    *inner = 1;
    *nf = 1;
    if (s->ndim == 0 || n == 1) return CALQ_OK;
    if (s->ndim != 1) return calq__op_fail(c, CALQ_ERR_SHAPE, "scale must be a scalar or 1-D");
    int axis = calq__norm_axis(calq__attr_int(c->node, "axis", 1), x->ndim);
    if (axis < 0 || x->dims[axis] != n)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "scale has %lld entries, which does not match the axis", (long long)n);
    for (int d = axis + 1; d < x->ndim; d++) *inner *= x->dims[d];
    *nf = n;
    return CALQ_OK;
}

static calq_status quantize_infer(calq_op_ctx *c)
{
    const calq_tensor *z = c->n_in > 2 ? c->in[2] : NULL;
    calq_dtype t = z ? z->dtype : CALQ_DTYPE_UINT8;
    if (!is_q8(t)) return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "zero point must be int8 or uint8");
    if (c->in[0]->dtype != CALQ_DTYPE_FLOAT32) return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "input must be float32");
    calq__set_shape(c->out[0], t, c->in[0]->dims, c->in[0]->ndim);
    return CALQ_OK;
}

static calq_status quantize_run(calq_op_ctx *c)
{
    const calq_tensor *x = c->in[0], *s = c->in[1], *z = c->n_in > 2 ? c->in[2] : NULL;
    int64_t inner, nf;
    CALQ_TRY(qdq_params(c, x, &inner, &nf));
    const float *xd = x->data, *sd = s->data;
    int64_t n = calq_tensor_numel(x);
    for (int64_t i = 0; i < n; i++) {
        int64_t f = (i / inner) % nf;
        put_q(c->out[0], i, saturate_q(xd[i] / sd[f], c->out[0]->dtype, z ? get_int(z, f) : 0));
    }
    return CALQ_OK;
}

static calq_status dequantize_infer(calq_op_ctx *c)
{
    calq_dtype t = c->in[0]->dtype;
    if (!is_q8(t) && t != CALQ_DTYPE_INT32)
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "input must be int8, uint8 or int32, not %s", calq_dtype_name(t));
    calq__set_shape(c->out[0], CALQ_DTYPE_FLOAT32, c->in[0]->dims, c->in[0]->ndim);
    return CALQ_OK;
}

static calq_status dequantize_run(calq_op_ctx *c)
{
    const calq_tensor *x = c->in[0], *s = c->in[1], *z = c->n_in > 2 ? c->in[2] : NULL;
    int64_t inner, nf;
    CALQ_TRY(qdq_params(c, x, &inner, &nf));
    const float *sd = s->data;
    float *y = c->out[0]->data;
    int64_t n = calq_tensor_numel(x);
    for (int64_t i = 0; i < n; i++) {
        int64_t f = (i / inner) % nf;
        y[i] = (float)(get_int(x, i) - (z ? get_int(z, f) : 0)) * sd[f];
    }
    return CALQ_OK;
}

/* The float conv geometry code checks dtypes; it sees float-typed views of the int tensors. */
static calq_status qconv_geom(calq_op_ctx *c, calq_conv_geom *g)
{
    calq_tensor x = *c->in[0], w = *c->in[3], b = c->n_in > 8 && c->in[8] ? *c->in[8] : x;
    if (!is_q8(x.dtype) || !is_q8(w.dtype) || (c->n_in > 8 && c->in[8] && b.dtype != CALQ_DTYPE_INT32))
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "needs int8/uint8 x and w and an int32 bias");
    x.dtype = w.dtype = b.dtype = CALQ_DTYPE_FLOAT32;
    calq_tensor *in[3] = {&x, &w, c->n_in > 8 && c->in[8] ? &b : NULL};
    calq_op_ctx v = *c;
    v.in = in;
    v.n_in = in[2] ? 3 : 2;
    calq_status st = calq__conv_geom(&v, false, g);
    c->err = v.err;
    return st;
}

static calq_status qconv_infer(calq_op_ctx *c)
{
    calq_conv_geom g;
    CALQ_TRY(qconv_geom(c, &g));
    const calq_tensor *yz = c->in[7];
    if (!is_q8(yz->dtype)) return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "y_zero_point must be int8 or uint8");
    int64_t dims[2 + CALQ_CONV_MAX_SP] = {g.n, g.c_out};
    for (int i = 0; i < g.nsp; i++) dims[2 + i] = g.out[i];
    calq__set_shape(c->out[0], yz->dtype, dims, 2 + g.nsp);
    return CALQ_OK;
}

static calq_status qconv_run(calq_op_ctx *c)
{
    calq_conv_geom g;
    CALQ_TRY(qconv_geom(c, &g));
    const calq_tensor *x = c->in[0], *w = c->in[3], *b = c->n_in > 8 ? c->in[8] : NULL;
    const float xs = *(const float *)c->in[1]->data, ys = *(const float *)c->in[6]->data;
    const int64_t xz = get_int(c->in[2], 0), yz = get_int(c->in[7], 0);
    const float *ws = c->in[4]->data;
    const int64_t nws = calq_tensor_numel(c->in[4]);
    if (nws != 1 && nws != g.c_out) return calq__op_fail(c, CALQ_ERR_SHAPE, "w_scale must have 1 or M entries");
    /* 3-D view of 1..3 spatial dims: leading dims of size 1 */
    int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, d[3] = {1, 1, 1}, p[3] = {0};
    for (int i = 0; i < g.nsp; i++) {
        int j = 3 - g.nsp + i;
        in[j] = g.in[i];
        out[j] = g.out[i];
        k[j] = g.k[i];
        s[j] = g.stride[i];
        d[j] = g.dil[i];
        p[j] = g.pad_b[i];
    }
    const int64_t cg = g.c_in / g.group, mg = g.c_out / g.group, isz = in[0] * in[1] * in[2];
    const int64_t osz = out[0] * out[1] * out[2], ksz = k[0] * k[1] * k[2];
    calq_tensor *y = c->out[0];
    calq_status st = CALQ_OK;
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t n = 0; n < g.n; n++) {
        for (int64_t m = 0; m < g.c_out; m++) {
            const int64_t wz = get_int(c->in[5], calq_tensor_numel(c->in[5]) > 1 ? m : 0);
            const float mult = xs * ws[nws > 1 ? m : 0] / ys;
            const int64_t grp = m / mg;
            for (int64_t o = 0; o < osz; o++) {
                const int64_t od = o / (out[1] * out[2]), oh = (o / out[2]) % out[1], ow = o % out[2];
                int64_t acc = b ? get_int(b, m) : 0;
                for (int64_t ic = 0; ic < cg; ic++) {
                    const int64_t xb = (n * g.c_in + grp * cg + ic) * isz, wb = (m * cg + ic) * ksz;
                    for (int64_t kd = 0; kd < k[0]; kd++) {
                        const int64_t id = od * s[0] - p[0] + kd * d[0];
                        if (id < 0 || id >= in[0]) continue;
                        for (int64_t kh = 0; kh < k[1]; kh++) {
                            const int64_t ih = oh * s[1] - p[1] + kh * d[1];
                            if (ih < 0 || ih >= in[1]) continue;
                            for (int64_t kw = 0; kw < k[2]; kw++) {
                                const int64_t iw = ow * s[2] - p[2] + kw * d[2];
                                if (iw < 0 || iw >= in[2]) continue;
                                acc += (get_int(x, xb + (id * in[1] + ih) * in[2] + iw) - xz) *
                                       (get_int(w, wb + (kd * k[1] + kh) * k[2] + kw) - wz);
                            }
                        }
                    }
                }
                if (acc > INT32_MAX || acc < INT32_MIN) { /* ONNX defines an int32 accumulator */
#pragma omp atomic write
                    st = CALQ_ERR_DATA;
                }
                put_q(y, (n * g.c_out + m) * osz + o, saturate_q((float)acc * mult, y->dtype, yz));
            }
        }
    }
    if (st != CALQ_OK) return calq__op_fail(c, st, "the int32 accumulator overflowed");
    return CALQ_OK;
}

/* QLinearMatMul: numpy matmul of a [..., M, K] and b [..., K, N] (batch dims broadcast; a 1-D a
 * or b is a row / column), per-tensor factors. */
typedef struct qmm_geom {
    int64_t M, K, N;
    int nb;                                                             /* batch rank of the output */
    int64_t batch[CALQ_MAX_DIMS], sa[CALQ_MAX_DIMS], sb[CALQ_MAX_DIMS]; /* dims, strides in matrices */
    int64_t dims[CALQ_MAX_DIMS];
    int ndim;
} qmm_geom;

static calq_status qmm_geom_of(calq_op_ctx *c, qmm_geom *g)
{
    const calq_tensor *a = c->in[0], *b = c->in[3];
    if (!is_q8(a->dtype) || !is_q8(b->dtype) || !is_q8(c->in[7]->dtype))
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "needs int8/uint8 a, b and y_zero_point");
    if (calq_tensor_numel(c->in[1]) != 1 || calq_tensor_numel(c->in[4]) != 1 || calq_tensor_numel(c->in[6]) != 1)
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "only per-tensor scales are implemented");
    if (a->ndim < 1 || b->ndim < 1) return calq__op_fail(c, CALQ_ERR_SHAPE, "a and b need at least one dim");
    memset(g, 0, sizeof *g);
    g->M = a->ndim > 1 ? a->dims[a->ndim - 2] : 1;
    g->K = a->dims[a->ndim - 1];
    g->N = b->ndim > 1 ? b->dims[b->ndim - 1] : 1;
    if ((b->ndim > 1 ? b->dims[b->ndim - 2] : b->dims[0]) != g->K)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "inner dimensions differ (%lld and %lld)", (long long)g->K,
                             (long long)(b->ndim > 1 ? b->dims[b->ndim - 2] : b->dims[0]));
    int na = a->ndim > 2 ? a->ndim - 2 : 0, nbb = b->ndim > 2 ? b->ndim - 2 : 0;
    if (!calq__broadcast_shape(a->dims, na, b->dims, nbb, g->batch, &g->nb))
        return calq__op_fail(c, CALQ_ERR_SHAPE, "batch dimensions do not broadcast");
    int64_t ea[CALQ_MAX_DIMS], eb[CALQ_MAX_DIMS];
    calq__broadcast_strides(a->dims, na, g->nb, ea);
    calq__broadcast_strides(b->dims, nbb, g->nb, eb);
    for (int i = 0; i < g->nb; i++) {
        g->sa[i] = ea[i];
        g->sb[i] = eb[i];
        g->dims[g->ndim++] = g->batch[i];
    }
    if (a->ndim > 1) g->dims[g->ndim++] = g->M;
    if (b->ndim > 1) g->dims[g->ndim++] = g->N;
    return CALQ_OK;
}

static calq_status qmatmul_infer(calq_op_ctx *c)
{
    qmm_geom g;
    CALQ_TRY(qmm_geom_of(c, &g));
    calq__set_shape(c->out[0], c->in[7]->dtype, g.dims, g.ndim);
    return CALQ_OK;
}

static calq_status qmatmul_run(calq_op_ctx *c)
{
    qmm_geom g;
    CALQ_TRY(qmm_geom_of(c, &g));
    const calq_tensor *a = c->in[0], *b = c->in[3];
    const float mult = *(const float *)c->in[1]->data * *(const float *)c->in[4]->data / *(const float *)c->in[6]->data;
    const int64_t az = get_int(c->in[2], 0), bz = get_int(c->in[5], 0), yz = get_int(c->in[7], 0);
    int64_t nbatch = 1;
    for (int i = 0; i < g.nb; i++) nbatch *= g.batch[i];
    calq_tensor *y = c->out[0];
    for (int64_t t = 0; t < nbatch; t++) {
        int64_t ia = 0, ib = 0, rem = t; /* matrix index of a and b for output batch t */
        for (int i = g.nb - 1; i >= 0; i--) {
            int64_t k = rem % g.batch[i];
            rem /= g.batch[i];
            ia += k * g.sa[i];
            ib += k * g.sb[i];
        }
        const int64_t oa = ia * g.M * g.K, ob = ib * g.K * g.N, oy = t * g.M * g.N;
        for (int64_t r = 0; r < g.M; r++)
            for (int64_t j = 0; j < g.N; j++) {
                int64_t acc = 0;
                for (int64_t k = 0; k < g.K; k++)
                    acc += (get_int(a, oa + r * g.K + k) - az) * (get_int(b, ob + k * g.N + j) - bz);
                put_q(y, oy + r * g.N + j, saturate_q((float)acc * mult, y->dtype, yz));
            }
    }
    return CALQ_OK;
}

const calq_op_def calq__ops_quant[] = {
    {"QuantizeLinear", 2, 3, 1, 1, 0, false, quantize_infer, quantize_run, NULL, NULL, NULL},
    {"DequantizeLinear", 2, 3, 1, 1, 0, false, dequantize_infer, dequantize_run, NULL, NULL, NULL},
    {"QLinearConv", 8, 9, 1, 1, 0, false, qconv_infer, qconv_run, NULL, NULL, NULL},
    {"QLinearMatMul", 8, 8, 1, 1, 0, false, qmatmul_infer, qmatmul_run, NULL, NULL, NULL},
    {NULL, 0, 0, 0, 0, 0, false, NULL, NULL, NULL, NULL, NULL},
};
