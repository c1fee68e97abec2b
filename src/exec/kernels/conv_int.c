/* Integer convolution: y = bias + sum (x - x_zp)(w - w_zp), every sum exact (int64, then checked
 * into int32). One reference kernel serves ONNX's QLinearConv (quant_ops.c, which then
 * requantizes) and calq.AscendConv / calq.AscendConvTranspose, the integer Conv / ConvTranspose
 * of Ascend deploy models (ascend.h): int8 input from an AscendQuant with offset o (the node's
 * input_offset), int8 weight, int32 bias, int32 output y = sum((q_x - o) * q_w) + bias_q
 * (amct-reference.md §9.1).
 *
 * A tap in the padding adds nothing: padding is zero in the centered domain, i.e. the device
 * pads with the input offset. For ConvTranspose, pads crop the output, as in the float kernel.
 *
 * Determinism: one thread computes each (batch, output channel) plane, in a fixed order. */
#include <stdlib.h>

#include "exec/kernels/ascend.h"
#include "exec/kernels/conv_dnnl.h"
#include "exec/kernels/int_accum.h"
#include "exec/kernels/int_dnnl.h"

calq_status calq__conv_geom_int(calq_op_ctx *c, const calq_tensor *x, const calq_tensor *w, const calq_tensor *b,
                                bool transpose, calq_conv_geom *g)
{
    if (!calq__dtype_is_q8(x->dtype) || !calq__dtype_is_q8(w->dtype) || (b && b->dtype != CALQ_DTYPE_INT32))
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED,
                             "an integer convolution needs int8/uint8 input and weight and an int32 bias (X is %s, W "
                             "is %s%s%s)",
                             calq_dtype_name(x->dtype), calq_dtype_name(w->dtype), b ? ", B is " : "",
                             b ? calq_dtype_name(b->dtype) : "");
    /* The float geometry only reads shapes; it checks dtypes, so it sees float-typed views. */
    calq_tensor xf = *x, wf = *w, bf = b ? *b : *x;
    xf.dtype = wf.dtype = bf.dtype = CALQ_DTYPE_FLOAT32;
    calq_tensor *in[3] = {&xf, &wf, b ? &bf : NULL};
    calq_op_ctx v = *c;
    v.in = in;
    v.n_in = b ? 3 : 2;
    return calq__conv_geom(&v, transpose, g);
}

/* The geometry as exactly three spatial axes (leading unit axes for 1-D and 2-D), the view the
 * float kernels of conv.c use. */
typedef struct geom3 {
    int64_t in[3], out[3], k[3], s[3], d[3], p[3];
} geom3;

static void to_3d(const calq_conv_geom *g, geom3 *t)
{
    const int lead = CALQ_CONV_MAX_SP - g->nsp;
    for (int i = 0; i < 3; i++) {
        t->in[i] = t->out[i] = t->k[i] = t->s[i] = t->d[i] = 1;
        t->p[i] = 0;
    }
    for (int i = 0; i < g->nsp; i++) {
        t->in[lead + i] = g->in[i];
        t->out[lead + i] = g->out[i];
        t->k[lead + i] = g->k[i];
        t->s[lead + i] = g->stride[i];
        t->d[lead + i] = g->dil[i];
        t->p[lead + i] = g->pad_b[i];
    }
}

static int64_t floordiv(int64_t a, int64_t b)
{
    int64_t q = a / b;
    if (a % b != 0 && ((a < 0) != (b < 0))) q--;
    return q;
}

/* The positions q in [0, n) for which q*s + off lands in [0, lim): [*lo, *hi). */
static void valid_range(int64_t off, int64_t s, int64_t lim, int64_t n, int64_t *lo, int64_t *hi)
{
    int64_t l = -floordiv(off, s), h = floordiv(lim - 1 - off, s) + 1;
    if (l < 0) l = 0;
    if (h > n) h = n;
    if (h < l) h = l;
    *lo = l;
    *hi = h;
}

/* acc (one output plane) += the taps of input channels xp[0..cg) with weights wp[0..cg): the
 * plain convolution, output positions gathering their inputs. */
static void conv_plane(const geom3 *t, int64_t cg, const int16_t *xp, int64_t isz, const int16_t *wp, int64_t ksz,
                       int64_t *acc)
{
    for (int64_t ic = 0; ic < cg; ic++, xp += isz, wp += ksz) {
        for (int64_t kd = 0; kd < t->k[0]; kd++) {
            int64_t d0, d1;
            const int64_t offd = kd * t->d[0] - t->p[0];
            valid_range(offd, t->s[0], t->in[0], t->out[0], &d0, &d1);
            for (int64_t kh = 0; kh < t->k[1]; kh++) {
                int64_t h0, h1;
                const int64_t offh = kh * t->d[1] - t->p[1];
                valid_range(offh, t->s[1], t->in[1], t->out[1], &h0, &h1);
                for (int64_t kw = 0; kw < t->k[2]; kw++) {
                    const int32_t wv = wp[(kd * t->k[1] + kh) * t->k[2] + kw];
                    if (wv == 0) continue;
                    int64_t w0, w1;
                    const int64_t offw = kw * t->d[2] - t->p[2], sw = t->s[2];
                    valid_range(offw, sw, t->in[2], t->out[2], &w0, &w1);
                    for (int64_t od = d0; od < d1; od++) {
                        const int64_t id = od * t->s[0] + offd;
                        for (int64_t oh = h0; oh < h1; oh++) {
                            const int64_t ih = oh * t->s[1] + offh;
                            int64_t *ar = acc + (od * t->out[1] + oh) * t->out[2];
                            const int16_t *xr = xp + (id * t->in[1] + ih) * t->in[2] + offw;
                            if (sw == 1)
                                for (int64_t ow = w0; ow < w1; ow++) ar[ow] += wv * xr[ow];
                            else
                                for (int64_t ow = w0; ow < w1; ow++) ar[ow] += wv * xr[ow * sw];
                        }
                    }
                }
            }
        }
    }
}

/* The transposed convolution: input position i scatters x * W to output i*s - p + k*d. The
 * weights of output channel oc of input channel ic are at wp + ic * mg * ksz. */
static void convtranspose_plane(const geom3 *t, int64_t cg, const int16_t *xp, int64_t isz, const int16_t *wp,
                                int64_t mg, int64_t ksz, int64_t *acc)
{
    for (int64_t ic = 0; ic < cg; ic++, xp += isz, wp += mg * ksz) {
        for (int64_t kd = 0; kd < t->k[0]; kd++) {
            int64_t d0, d1;
            const int64_t offd = kd * t->d[0] - t->p[0];
            valid_range(offd, t->s[0], t->out[0], t->in[0], &d0, &d1);
            for (int64_t kh = 0; kh < t->k[1]; kh++) {
                int64_t h0, h1;
                const int64_t offh = kh * t->d[1] - t->p[1];
                valid_range(offh, t->s[1], t->out[1], t->in[1], &h0, &h1);
                for (int64_t kw = 0; kw < t->k[2]; kw++) {
                    const int32_t wv = wp[(kd * t->k[1] + kh) * t->k[2] + kw];
                    if (wv == 0) continue;
                    int64_t w0, w1;
                    const int64_t offw = kw * t->d[2] - t->p[2], sw = t->s[2];
                    valid_range(offw, sw, t->out[2], t->in[2], &w0, &w1);
                    for (int64_t id = d0; id < d1; id++) {
                        const int64_t od = id * t->s[0] + offd;
                        for (int64_t ih = h0; ih < h1; ih++) {
                            const int64_t oh = ih * t->s[1] + offh;
                            int64_t *ar = acc + (od * t->out[1] + oh) * t->out[2] + offw;
                            const int16_t *xr = xp + (id * t->in[1] + ih) * t->in[2];
                            for (int64_t iw = w0; iw < w1; iw++) ar[iw * sw] += wv * xr[iw];
                        }
                    }
                }
            }
        }
    }
}

calq_status calq__conv_int_ref(calq_op_ctx *c, const calq_conv_geom *g, const int16_t *x, const int16_t *w,
                               const int32_t *b, int32_t *y)
{
    geom3 t;
    to_3d(g, &t);
    const int64_t cg = g->c_in / g->group, mg = g->c_out / g->group;
    const int64_t isz = t.in[0] * t.in[1] * t.in[2], osz = t.out[0] * t.out[1] * t.out[2];
    const int64_t ksz = t.k[0] * t.k[1] * t.k[2];
    const int64_t N = g->n, M = g->c_out, C = g->c_in;
    calq__i32_overflow ov = CALQ_I32_OVERFLOW_NONE; /* the first output (memory order) leaving int32 */
    int oom = 0;
#pragma omp parallel
    {
        int64_t *acc = malloc(sizeof(int64_t) * (size_t)(osz + 1)); /* owner: this thread */
        if (!acc) {
#pragma omp atomic write
            oom = 1;
        }
#pragma omp for collapse(2) schedule(static)
        for (int64_t n = 0; n < N; n++) {
            for (int64_t m = 0; m < M; m++) {
                if (!acc) continue;
                const int64_t grp = m / mg, bias = b ? b[m] : 0;
                for (int64_t o = 0; o < osz; o++) acc[o] = bias;
                const int16_t *xg = x + (n * C + grp * cg) * isz;
                if (g->transpose)
                    convtranspose_plane(&t, cg, xg, isz, w + (grp * cg * mg + m % mg) * ksz, mg, ksz, acc);
                else
                    conv_plane(&t, cg, xg, isz, w + m * cg * ksz, ksz, acc);
                int32_t *yp = y + (n * M + m) * osz;
                for (int64_t o = 0; o < osz; o++) yp[o] = calq__int_store_i32(acc[o], (n * M + m) * osz + o, &ov);
            }
        }
        free(acc);
    }
    if (oom) return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory for an output plane of sums");
    return ov.at >= 0 ? calq__conv_int_overflow(c, &ov, M, osz) : CALQ_OK;
}

calq_status calq__conv_int_overflow(calq_op_ctx *c, const calq__i32_overflow *ov, int64_t M, int64_t osz)
{
    return calq__op_fail(c, CALQ_ERR_DATA,
                         "the exact sum %lld at output channel %lld (batch %lld, position %lld) does not fit the "
                         "int32 accumulator",
                         (long long)ov->sum, (long long)((ov->at / osz) % M), (long long)(ov->at / osz / M),
                         (long long)(ov->at % osz));
}

/* ---- the Ascend deploy layers ------------------------------------------------------------- */

static calq_status ascend_geom(calq_op_ctx *c, bool transpose, calq_conv_geom *g)
{
    const calq_tensor *w = c->in[1], *b = c->n_in > 2 ? c->in[2] : NULL;
    if (w->dtype != CALQ_DTYPE_INT8 || (b && b->dtype != CALQ_DTYPE_INT32))
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED,
                             "X is int8, so this is an Ascend deploy layer (amct-reference.md §9.1), which needs an "
                             "int8 weight and an int32 bias (W is %s%s%s)",
                             calq_dtype_name(w->dtype), b ? ", B is " : "", b ? calq_dtype_name(b->dtype) : "");
    return calq__conv_geom_int(c, c->in[0], w, b, transpose, g);
}

static calq_status ascend_infer(calq_op_ctx *c, bool transpose)
{
    int32_t o;
    CALQ_TRY(calq__ascend_input_offset(c, &o));
    calq_conv_geom g;
    CALQ_TRY(ascend_geom(c, transpose, &g));
    int64_t dims[2 + CALQ_CONV_MAX_SP] = {g.n, g.c_out};
    for (int i = 0; i < g.nsp; i++) dims[2 + i] = g.out[i];
    if (calq__shape_numel(dims, 2 + g.nsp) < 0) return calq__op_fail(c, CALQ_ERR_SHAPE, "output is too large");
    calq__set_shape(c->out[0], CALQ_DTYPE_INT32, dims, 2 + g.nsp);
    return CALQ_OK;
}

static calq_status ascend_run(calq_op_ctx *c, bool transpose)
{
    int32_t o;
    CALQ_TRY(calq__ascend_input_offset(c, &o));
    calq_conv_geom g;
    CALQ_TRY(ascend_geom(c, transpose, &g));
    /* owners: this function */
    int16_t *x = calq__int_centered(c->in[0], o, NULL, 1), *w = calq__int_centered(c->in[1], 0, NULL, 1);
    calq_status st = x && w ? calq__conv_int_ref(c, &g, x, w, g.has_bias ? c->in[2]->data : NULL, c->out[0]->data)
                            : calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory for the centered operands");
    free(x);
    free(w);
    return st;
}

calq_status calq__ascend_conv_infer(calq_op_ctx *c)
{
    return ascend_infer(c, false);
}
calq_status calq__ascend_conv_run(calq_op_ctx *c)
{
    return ascend_run(c, false);
}
calq_status calq__ascend_convtranspose_infer(calq_op_ctx *c)
{
    return ascend_infer(c, true);
}
calq_status calq__ascend_convtranspose_run(calq_op_ctx *c)
{
    return ascend_run(c, true);
}

/* The fast path (int_dnnl.h): oneDNN's sums, then the bias as calq__conv_int_ref adds it. */
calq_status calq__ascend_conv_prepare(calq_op_ctx *c)
{
    c->state = NULL;
    int32_t o;
    CALQ_TRY(calq__ascend_input_offset(c, &o));
    calq_conv_geom g;
    CALQ_TRY(ascend_geom(c, false, &g));
    if (!(c->const_inputs & 2u)) return CALQ_OK; /* weights that change per run: the reference */
    const calq_int_conv_desc d = {.g = g, .x_type = CALQ_DTYPE_INT8, .x_zp = o, .w = c->in[1]};
    calq_int_conv_dnnl *s = NULL;
    CALQ_TRY(calq__int_conv_dnnl_create(c, &d, &s));
    c->state = s;
    return CALQ_OK;
}

calq_status calq__ascend_conv_run_fast(calq_op_ctx *c)
{
    calq_conv_geom g;
    CALQ_TRY(ascend_geom(c, false, &g));
    const int32_t *acc;
    CALQ_TRY(calq__int_conv_dnnl_run(c, c->state, c->in[0]->data, &acc));
    int64_t osz = 1;
    for (int i = 0; i < g.nsp; i++) osz *= g.out[i];
    const calq_int_epi e = {.out = CALQ_DTYPE_INT32, .bias = g.has_bias ? c->in[2]->data : NULL, .bias_cs = 1};
    calq__i32_overflow ov = CALQ_I32_OVERFLOW_NONE;
    calq__int_epi_channels_last(&e, acc, g.n, osz, g.c_out, c->out[0]->data, &ov);
    return ov.at >= 0 ? calq__conv_int_overflow(c, &ov, g.c_out, osz) : CALQ_OK;
}

void calq__int_conv_release(void *state)
{
    calq__int_conv_dnnl_free(state);
}
