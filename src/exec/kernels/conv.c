/* Reference kernels of the convolution family: Conv, ConvTranspose and (inference-mode)
 * BatchNormalization, for float32 tensors with 1..3 spatial dimensions.
 *
 * Determinism: every kernel parallelises over (batch, output channel) planes only, and each
 * output element is accumulated by one thread in a fixed order (bias, then input channel,
 * then kernel position), so results are bit-identical for any thread count. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernels/ascend.h"
#include "exec/kernels/conv_dnnl.h"
#include "exec/layout.h"
#include "exec/op.h"

/* Attribute values and spatial sizes are bounded so that every geometry expression below
 * fits in int64 without overflow, whatever a (possibly malicious) model says. */
#define GEOM_LIMIT ((int64_t)1 << 30)
#define DIM_LIMIT  ((int64_t)1 << 31)

static int64_t floordiv(int64_t a, int64_t b)
{
    int64_t q = a / b;
    if (a % b != 0 && ((a < 0) != (b < 0))) q--;
    return q;
}

/* Reads an INTS attribute of exactly n values into out (dflt when absent). */
static calq_status get_ints(calq_op_ctx *c, const char *name, int n, int64_t dflt, int64_t *out, bool *present)
{
    const int64_t *v;
    int k = calq__attr_ints(c->node, name, &v);
    if (present) *present = k >= 0;
    if (k < 0) {
        for (int i = 0; i < n; i++) out[i] = dflt;
        return CALQ_OK;
    }
    if (k != n) return calq__op_fail(c, CALQ_ERR_SHAPE, "attribute '%s' has %d values, expected %d", name, k, n);
    for (int i = 0; i < n; i++) {
        if (v[i] < -GEOM_LIMIT || v[i] > GEOM_LIMIT)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "attribute '%s' value %lld is out of range", name, (long long)v[i]);
        out[i] = v[i];
    }
    return CALQ_OK;
}

typedef enum { PAD_NOTSET, PAD_SAME_UPPER, PAD_SAME_LOWER, PAD_VALID } auto_pad_mode;

static calq_status get_auto_pad(calq_op_ctx *c, auto_pad_mode *m)
{
    const char *s = calq__attr_str(c->node, "auto_pad", "NOTSET");
    if (strcmp(s, "NOTSET") == 0 || s[0] == '\0')
        *m = PAD_NOTSET;
    else if (strcmp(s, "SAME_UPPER") == 0)
        *m = PAD_SAME_UPPER;
    else if (strcmp(s, "SAME_LOWER") == 0)
        *m = PAD_SAME_LOWER;
    else if (strcmp(s, "VALID") == 0)
        *m = PAD_VALID;
    else
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED,
                             "auto_pad '%s' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID", s);
    return CALQ_OK;
}

calq_status calq__conv_geom(calq_op_ctx *c, bool transpose, calq_conv_geom *g)
{
    memset(g, 0, sizeof *g);
    g->transpose = transpose;
    const calq_tensor *x = c->in[0], *w = c->n_in > 1 ? c->in[1] : NULL, *b = c->n_in > 2 ? c->in[2] : NULL;
    char sx[96], sw[96];
    if (!x || !w) return calq__op_fail(c, CALQ_ERR_SHAPE, "needs inputs X and W");
    if (calq__ascend_int_input(c)) return calq__ascend_unlowered(c);
    if (x->dtype != CALQ_DTYPE_FLOAT32 || w->dtype != CALQ_DTYPE_FLOAT32 || (b && b->dtype != CALQ_DTYPE_FLOAT32))
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "only float32 is implemented (X is %s, W is %s)",
                             calq_dtype_name(x->dtype), calq_dtype_name(w->dtype));
    if (x->ndim < 3)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "X must be N x C x spatial (rank >= 3), got %s",
                             calq__shape_str(x->dims, x->ndim, sx, sizeof sx));
    if (x->ndim > 2 + CALQ_CONV_MAX_SP)
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "%d spatial dimensions: at most %d are implemented", x->ndim - 2,
                             CALQ_CONV_MAX_SP);
    if (w->ndim != x->ndim)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "W %s must have the rank of X %s",
                             calq__shape_str(w->dims, w->ndim, sw, sizeof sw),
                             calq__shape_str(x->dims, x->ndim, sx, sizeof sx));
    for (int i = 0; i < x->ndim; i++) {
        if (x->dims[i] < 0 || x->dims[i] > DIM_LIMIT || w->dims[i] < 1 || w->dims[i] > DIM_LIMIT)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "unusable shapes X %s, W %s",
                                 calq__shape_str(x->dims, x->ndim, sx, sizeof sx),
                                 calq__shape_str(w->dims, w->ndim, sw, sizeof sw));
    }
    const int nsp = x->ndim - 2;
    g->nsp = nsp;
    g->n = x->dims[0];
    g->c_in = x->dims[1];
    g->group = calq__attr_int(c->node, "group", 1);
    if (g->group < 1 || g->group > DIM_LIMIT)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "group must be >= 1, got %lld", (long long)g->group);
    calq__shape_str(x->dims, x->ndim, sx, sizeof sx);
    calq__shape_str(w->dims, w->ndim, sw, sizeof sw);
    if (!transpose) {
        /* Conv: W is [M, C/group, k...]. */
        if (w->dims[1] * g->group != g->c_in)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "X %s has %lld channels but W %s with group %lld expects %lld", sx,
                                 (long long)g->c_in, sw, (long long)g->group, (long long)(w->dims[1] * g->group));
        if (w->dims[0] % g->group != 0)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "W %s: %lld output channels are not divisible by group %lld", sw,
                                 (long long)w->dims[0], (long long)g->group);
        g->c_out = w->dims[0];
    } else {
        /* ConvTranspose: W is [C, M/group, k...]. */
        if (w->dims[0] != g->c_in)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "X %s has %lld channels but W %s has %lld input channels", sx,
                                 (long long)g->c_in, sw, (long long)w->dims[0]);
        if (g->c_in % g->group != 0)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "%lld input channels are not divisible by group %lld",
                                 (long long)g->c_in, (long long)g->group);
        g->c_out = w->dims[1] * g->group;
    }
    if (b) {
        if (b->ndim != 1 || b->dims[0] != g->c_out) {
            char sb[96];
            return calq__op_fail(c, CALQ_ERR_SHAPE, "bias B %s must be 1-D with %lld values",
                                 calq__shape_str(b->dims, b->ndim, sb, sizeof sb), (long long)g->c_out);
        }
        g->has_bias = true;
    }

    int64_t ks[CALQ_CONV_MAX_SP];
    bool have_ks;
    CALQ_TRY(get_ints(c, "kernel_shape", nsp, 0, ks, &have_ks));
    for (int i = 0; i < nsp; i++) {
        g->in[i] = x->dims[2 + i];
        g->k[i] = w->dims[2 + i];
        /* kernel_shape is redundant with W's shape; a model where they disagree is broken. */
        if (have_ks && ks[i] != g->k[i])
            return calq__op_fail(c, CALQ_ERR_SHAPE, "kernel_shape does not match W %s", sw);
    }
    CALQ_TRY(get_ints(c, "strides", nsp, 1, g->stride, NULL));
    CALQ_TRY(get_ints(c, "dilations", nsp, 1, g->dil, NULL));
    int64_t pads[2 * CALQ_CONV_MAX_SP];
    CALQ_TRY(get_ints(c, "pads", 2 * nsp, 0, pads, NULL));
    for (int i = 0; i < nsp; i++) {
        if (g->stride[i] < 1) return calq__op_fail(c, CALQ_ERR_SHAPE, "strides must be >= 1");
        if (g->dil[i] < 1) return calq__op_fail(c, CALQ_ERR_SHAPE, "dilations must be >= 1");
        g->pad_b[i] = pads[i];
        g->pad_e[i] = pads[nsp + i];
    }
    auto_pad_mode ap = PAD_NOTSET;
    CALQ_TRY(get_auto_pad(c, &ap));

    if (!transpose) {
        for (int i = 0; i < nsp; i++) {
            const int64_t dk = (g->k[i] - 1) * g->dil[i] + 1; /* dilated kernel extent */
            if (ap == PAD_VALID) {
                g->pad_b[i] = g->pad_e[i] = 0;
            } else if (ap == PAD_SAME_UPPER || ap == PAD_SAME_LOWER) {
                /* ONNX: output = ceil(input / stride); the total padding is split evenly and
                 * the odd one goes at the end for SAME_UPPER, at the beginning for SAME_LOWER. */
                const int64_t o = (g->in[i] + g->stride[i] - 1) / g->stride[i];
                int64_t total = (o - 1) * g->stride[i] + dk - g->in[i];
                if (total < 0) total = 0;
                g->pad_b[i] = ap == PAD_SAME_UPPER ? total / 2 : total - total / 2;
                g->pad_e[i] = total - g->pad_b[i];
            } else if (g->pad_b[i] < 0 || g->pad_e[i] < 0) {
                return calq__op_fail(c, CALQ_ERR_SHAPE, "pads must be >= 0");
            }
            const int64_t span = g->in[i] + g->pad_b[i] + g->pad_e[i] - dk;
            if (span < 0)
                return calq__op_fail(c, CALQ_ERR_SHAPE,
                                     "X %s is smaller than the dilated kernel of W %s (with padding) in spatial "
                                     "dimension %d: the output would be empty",
                                     sx, sw, i);
            g->out[i] = span / g->stride[i] + 1;
        }
        return CALQ_OK;
    }

    CALQ_TRY(get_ints(c, "output_padding", nsp, 0, g->out_pad, NULL));
    /* output_shape lists the spatial output dims; some exporters also put N and C in front. */
    const int64_t *os;
    int nos = calq__attr_ints(c->node, "output_shape", &os);
    if (nos >= 0 && nos != nsp && nos != nsp + 2)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "output_shape has %d values, expected %d", nos, nsp);
    if (nos == nsp + 2) os += 2;
    for (int i = 0; i < nsp; i++) {
        if (g->out_pad[i] < 0) return calq__op_fail(c, CALQ_ERR_SHAPE, "output_padding must be >= 0");
        /* Padding of a stride or more would add positions no input pixel reaches (PyTorch, whose
         * exporter writes this attribute, refuses output_padding >= max(stride, dilation)). */
        const int64_t pad_limit = g->stride[i] > g->dil[i] ? g->stride[i] : g->dil[i];
        if (g->out_pad[i] >= pad_limit)
            return calq__op_fail(c, CALQ_ERR_SHAPE,
                                 "output_padding %lld in spatial dimension %d must be smaller than the stride (%lld) "
                                 "or the dilation (%lld)",
                                 (long long)g->out_pad[i], i, (long long)g->stride[i], (long long)g->dil[i]);
        const int64_t dk = (g->k[i] - 1) * g->dil[i] + 1;
        /* Without padding the transposed convolution covers stride*(in-1) + dk positions, and
         * output_padding appends positions at the end (ONNX ConvTranspose). */
        const int64_t full = g->stride[i] * (g->in[i] - 1) + g->out_pad[i] + dk;
        int64_t target = -1;
        if (nos >= 0) {
            if (os[i] < 1 || os[i] > GEOM_LIMIT)
                return calq__op_fail(c, CALQ_ERR_SHAPE, "output_shape value %lld is out of range", (long long)os[i]);
            target = os[i];
        } else if (ap == PAD_SAME_UPPER || ap == PAD_SAME_LOWER) {
            target = g->in[i] * g->stride[i]; /* ONNX: SAME makes output = input * stride */
        } else if (ap == PAD_VALID) {
            g->pad_b[i] = g->pad_e[i] = 0;
        }
        if (target >= 0) {
            /* The spec's formula (floor division, as in the ONNX reference implementation):
             * SAME_UPPER puts the odd padding at the end, everything else at the beginning.
             * A negative total (output_shape larger than the natural size) extends the output
             * with positions no input reaches. */
            const int64_t total = full - target;
            if (ap == PAD_SAME_UPPER) {
                g->pad_b[i] = floordiv(total, 2);
                g->pad_e[i] = total - floordiv(total, 2);
            } else {
                g->pad_b[i] = total - floordiv(total, 2);
                g->pad_e[i] = floordiv(total, 2);
            }
        }
        g->out[i] = full - g->pad_b[i] - g->pad_e[i];
        if (g->out[i] < 1)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "output spatial dimension %d would be %lld (X %s, W %s)", i,
                                 (long long)g->out[i], sx, sw);
    }
    return CALQ_OK;
}

static calq_status set_out(calq_op_ctx *c, const calq_conv_geom *g)
{
    int64_t dims[2 + CALQ_CONV_MAX_SP] = {g->n, g->c_out};
    for (int i = 0; i < g->nsp; i++) dims[2 + i] = g->out[i];
    if (calq__shape_numel(dims, 2 + g->nsp) < 0) return calq__op_fail(c, CALQ_ERR_SHAPE, "output is too large");
    calq__set_shape(c->out[0], CALQ_DTYPE_FLOAT32, dims, 2 + g->nsp);
    return CALQ_OK;
}

static calq_status conv_infer(calq_op_ctx *c)
{
    calq_conv_geom g;
    CALQ_TRY(calq__conv_geom(c, false, &g));
    return set_out(c, &g);
}

static calq_status convtranspose_infer(calq_op_ctx *c)
{
    calq_conv_geom g;
    CALQ_TRY(calq__conv_geom(c, true, &g));
    return set_out(c, &g);
}

/* A 1-D or 2-D geometry seen as 3-D with leading unit dimensions, so one loop nest serves
 * every rank. */
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

static void fill_bias(float *y, int64_t n, const float *b, int64_t m)
{
    const float v = b ? b[m] : 0.0f;
    for (int64_t i = 0; i < n; i++) y[i] = v;
}

/* y[n, m, o] = B[m] + sum over (c in m's group, kernel position k) of x[n, c, o*s - p + k*d] *
 * W[m, c, k]. */
static void conv_ref_f32(const calq_conv_geom *g, const float *x, const float *w, const float *b, float *y)
{
    geom3 t;
    to_3d(g, &t);
    const int64_t cg = g->c_in / g->group, mg = g->c_out / g->group;
    const int64_t isz = t.in[0] * t.in[1] * t.in[2], osz = t.out[0] * t.out[1] * t.out[2];
    const int64_t ksz = t.k[0] * t.k[1] * t.k[2];
    const int64_t N = g->n, M = g->c_out, C = g->c_in;
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t n = 0; n < N; n++) {
        for (int64_t m = 0; m < M; m++) {
            float *yp = y + (n * M + m) * osz;
            fill_bias(yp, osz, b, m);
            const int64_t grp = m / mg;
            for (int64_t ic = 0; ic < cg; ic++) {
                const float *xp = x + (n * C + grp * cg + ic) * isz;
                const float *wp = w + (m * cg + ic) * ksz;
                for (int64_t kd = 0; kd < t.k[0]; kd++) {
                    int64_t d0, d1;
                    const int64_t offd = kd * t.d[0] - t.p[0];
                    valid_range(offd, t.s[0], t.in[0], t.out[0], &d0, &d1);
                    for (int64_t kh = 0; kh < t.k[1]; kh++) {
                        int64_t h0, h1;
                        const int64_t offh = kh * t.d[1] - t.p[1];
                        valid_range(offh, t.s[1], t.in[1], t.out[1], &h0, &h1);
                        for (int64_t kw = 0; kw < t.k[2]; kw++) {
                            int64_t w0, w1;
                            const int64_t offw = kw * t.d[2] - t.p[2];
                            valid_range(offw, t.s[2], t.in[2], t.out[2], &w0, &w1);
                            const float wv = wp[(kd * t.k[1] + kh) * t.k[2] + kw];
                            const int64_t sw = t.s[2];
                            for (int64_t od = d0; od < d1; od++) {
                                const int64_t id = od * t.s[0] + offd;
                                for (int64_t oh = h0; oh < h1; oh++) {
                                    const int64_t ih = oh * t.s[1] + offh;
                                    float *yr = yp + (od * t.out[1] + oh) * t.out[2];
                                    const float *xr = xp + (id * t.in[1] + ih) * t.in[2] + offw;
                                    if (sw == 1)
                                        for (int64_t ow = w0; ow < w1; ow++) yr[ow] += wv * xr[ow];
                                    else
                                        for (int64_t ow = w0; ow < w1; ow++) yr[ow] += wv * xr[ow * sw];
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/* The transpose: every input position i scatters x[n, c, i] * W[c, m, k] to output position
 * o = i*s - p + k*d. One thread owns each output plane, so the scatter is race-free and its
 * order (input channel, kernel position, input position) is fixed. */
static void convtranspose_ref_f32(const calq_conv_geom *g, const float *x, const float *w, const float *b, float *y)
{
    geom3 t;
    to_3d(g, &t);
    const int64_t cg = g->c_in / g->group, mg = g->c_out / g->group;
    const int64_t isz = t.in[0] * t.in[1] * t.in[2], osz = t.out[0] * t.out[1] * t.out[2];
    const int64_t ksz = t.k[0] * t.k[1] * t.k[2];
    const int64_t N = g->n, M = g->c_out, C = g->c_in;
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t n = 0; n < N; n++) {
        for (int64_t m = 0; m < M; m++) {
            float *yp = y + (n * M + m) * osz;
            fill_bias(yp, osz, b, m);
            const int64_t grp = m / mg, oc = m % mg;
            for (int64_t ic = 0; ic < cg; ic++) {
                const int64_t cin = grp * cg + ic;
                const float *xp = x + (n * C + cin) * isz;
                const float *wp = w + (cin * mg + oc) * ksz;
                for (int64_t kd = 0; kd < t.k[0]; kd++) {
                    int64_t d0, d1;
                    const int64_t offd = kd * t.d[0] - t.p[0];
                    valid_range(offd, t.s[0], t.out[0], t.in[0], &d0, &d1);
                    for (int64_t kh = 0; kh < t.k[1]; kh++) {
                        int64_t h0, h1;
                        const int64_t offh = kh * t.d[1] - t.p[1];
                        valid_range(offh, t.s[1], t.out[1], t.in[1], &h0, &h1);
                        for (int64_t kw = 0; kw < t.k[2]; kw++) {
                            int64_t w0, w1;
                            const int64_t offw = kw * t.d[2] - t.p[2];
                            valid_range(offw, t.s[2], t.out[2], t.in[2], &w0, &w1);
                            const float wv = wp[(kd * t.k[1] + kh) * t.k[2] + kw];
                            const int64_t sw = t.s[2];
                            for (int64_t id = d0; id < d1; id++) {
                                const int64_t od = id * t.s[0] + offd;
                                for (int64_t ih = h0; ih < h1; ih++) {
                                    const int64_t oh = ih * t.s[1] + offh;
                                    float *yr = yp + (od * t.out[1] + oh) * t.out[2] + offw;
                                    const float *xr = xp + (id * t.in[1] + ih) * t.in[2];
                                    for (int64_t iw = w0; iw < w1; iw++) yr[iw * sw] += wv * xr[iw];
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

static calq_status conv_run(calq_op_ctx *c)
{
    calq_conv_geom g;
    CALQ_TRY(calq__conv_geom(c, false, &g));
    conv_ref_f32(&g, c->in[0]->data, c->in[1]->data, g.has_bias ? c->in[2]->data : NULL, c->out[0]->data);
    return CALQ_OK;
}

static calq_status convtranspose_run(calq_op_ctx *c)
{
    calq_conv_geom g;
    CALQ_TRY(calq__conv_geom(c, true, &g));
    convtranspose_ref_f32(&g, c->in[0]->data, c->in[1]->data, g.has_bias ? c->in[2]->data : NULL, c->out[0]->data);
    return CALQ_OK;
}

/* ---- BatchNormalization ---------------------------------------------------------------- */

/* Inference-mode checks shared by infer and run. Sets *inner (elements per channel and
 * sample) and *per_pos (opset 7-8 spatial=0: parameters are per channel AND position). */
static calq_status bn_check(calq_op_ctx *c, int64_t *inner, bool *per_pos)
{
    const calq_tensor *x = c->in[0];
    /* Outputs beyond Y are the running / saved statistics of training mode (opset 7-13:
     * mean, var, saved_mean, saved_var; opset 14+: running_mean, running_var). */
    for (int i = 1; i < c->n_out; i++)
        if (c->out[i])
            return calq__op_fail(c, CALQ_ERR_UNSUPPORTED,
                                 "training mode (output %d, a batch statistic, is requested) is not supported: "
                                 "only inference-mode BatchNormalization is implemented",
                                 i);
    if (calq__attr_int(c->node, "training_mode", 0) != 0)
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED,
                             "training mode (training_mode=1) is not supported: only inference-mode "
                             "BatchNormalization is implemented");
    for (int i = 0; i < 5; i++)
        if (!c->in[i]) return calq__op_fail(c, CALQ_ERR_SHAPE, "needs 5 inputs (X, scale, B, mean, var)");
    for (int i = 0; i < 5; i++)
        if (c->in[i]->dtype != CALQ_DTYPE_FLOAT32)
            return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "only float32 is implemented (input %d is %s)", i,
                                 calq_dtype_name(c->in[i]->dtype));
    char sx[96], sp[96];
    if (x->ndim < 2)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "X must be N x C x ... (rank >= 2), got %s",
                             calq__shape_str(x->dims, x->ndim, sx, sizeof sx));
    int64_t in = calq__shape_numel(x->dims + 2, x->ndim - 2);
    if (in < 0) return calq__op_fail(c, CALQ_ERR_SHAPE, "X has an unusable shape");
    *inner = in;
    const bool spatial = calq__attr_int(c->node, "spatial", 1) != 0;
    *per_pos = c->opset < 9 && !spatial;
    const int64_t want = *per_pos ? x->dims[1] * in : x->dims[1];
    for (int i = 1; i < 5; i++) {
        const calq_tensor *p = c->in[i];
        bool ok = *per_pos ? calq__shape_numel(p->dims, p->ndim) == want && p->ndim >= 1 && p->dims[0] == x->dims[1]
                           : p->ndim == 1 && p->dims[0] == want;
        if (!ok)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "input %d has shape %s; X %s needs %s%lld values", i,
                                 calq__shape_str(p->dims, p->ndim, sp, sizeof sp),
                                 calq__shape_str(x->dims, x->ndim, sx, sizeof sx), *per_pos ? "C x spatial = " : "",
                                 (long long)want);
    }
    /* A variance that makes var + epsilon zero, negative or NaN turns every value of its channel
     * into inf or NaN (a trained model never has one; a corrupted or hand-edited one may). */
    const float *var = c->in[4]->data, eps = calq__attr_float(c->node, "epsilon", 1e-5f);
    for (int64_t k = 0; var && k < want; k++)
        if (!(var[k] + eps > 0.0f) || !isfinite(var[k]))
            return calq__op_fail(c, CALQ_ERR_DATA,
                                 "variance %g + epsilon %g of channel %lld is not a positive finite number: the "
                                 "normalization would divide by zero or take the root of a negative number",
                                 (double)var[k], (double)eps, (long long)(*per_pos ? k / (want / x->dims[1]) : k));
    return CALQ_OK;
}

static calq_status bn_infer(calq_op_ctx *c)
{
    int64_t inner;
    bool per_pos;
    CALQ_TRY(bn_check(c, &inner, &per_pos));
    calq__set_shape(c->out[0], CALQ_DTYPE_FLOAT32, c->in[0]->dims, c->in[0]->ndim);
    return CALQ_OK;
}

/* Y = scale * (X - mean) / sqrt(var + epsilon) + B, evaluated as written. */
static calq_status bn_run(calq_op_ctx *c)
{
    int64_t inner;
    bool per_pos;
    CALQ_TRY(bn_check(c, &inner, &per_pos));
    const float eps = calq__attr_float(c->node, "epsilon", 1e-5f);
    const float *x = c->in[0]->data, *sc = c->in[1]->data, *bi = c->in[2]->data;
    const float *mu = c->in[3]->data, *var = c->in[4]->data;
    float *y = c->out[0]->data;
    const int64_t N = c->in[0]->dims[0], C = c->in[0]->dims[1];
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t n = 0; n < N; n++) {
        for (int64_t ch = 0; ch < C; ch++) {
            const float *xp = x + (n * C + ch) * inner;
            float *yp = y + (n * C + ch) * inner;
            if (per_pos) {
                const int64_t o = ch * inner;
                for (int64_t i = 0; i < inner; i++)
                    yp[i] = sc[o + i] * (xp[i] - mu[o + i]) / sqrtf(var[o + i] + eps) + bi[o + i];
            } else {
                const float s = sc[ch], m = mu[ch], d = sqrtf(var[ch] + eps), bb = bi[ch];
                for (int64_t i = 0; i < inner; i++) yp[i] = s * (xp[i] - m) / d + bb;
            }
        }
    }
    return CALQ_OK;
}

/* BatchNormalization on the executor's layouts (what a ConvTranspose or a Concat before it left
 * there): bn_run's formula, per channel, over the physical view, followed by the Relu /
 * LeakyRelu / Clip layers after it (post-ops, exact: the reference kernels' comparisons on the
 * same values), which pre-activation networks (DenseNet's BN-ReLU-Conv after every Concat)
 * otherwise run as a second pass over the tensor. */
static const int bn_layouts; /* the fast state: no data, nothing to release */

static calq_status bn_prepare(calq_op_ctx *c)
{
    c->state = NULL;
    int64_t inner;
    bool per_pos;
    CALQ_TRY(bn_check(c, &inner, &per_pos));
    /* the native layout, or the nChw16c a Winograd convolution may leave for its readers (this
     * one reads any blocked layout: op.h, out_conv_readers) */
    const calq_layout l = c->in_layout ? c->in_layout[0] : CALQ_LAYOUT_PLAIN;
    if (!c->in_layout || !c->out_layout || per_pos || c->native == CALQ_LAYOUT_PLAIN || l == CALQ_LAYOUT_PLAIN ||
        (l != c->native && l != 8 && l != 16) || c->in[0]->ndim < 3 || c->in[0]->ndim > 5)
        return CALQ_OK;
    int n = 0;
    while (c->n_out == 1 && n < c->n_post && n < 2 &&
           (c->post[n].kind == CALQ_POST_RELU || c->post[n].kind == CALQ_POST_CLIP) && c->post[n].exact)
        n++;
    c->n_post_used = n;
    c->out_layout[0] = l;
    c->state = (void *)&bn_layouts;
    return CALQ_OK;
}

/* One row of `lanes` channels from c0: bn_run's formula, each operation rounded as there (the
 * square roots computed once per channel are the same values). Cloned per instruction set (the
 * build targets baseline x86-64); no contraction in C11 mode, so every clone gives the same
 * bits. */
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
static void
bn_row(float *restrict y, const float *restrict x, const float *sc, const float *mu, const float *d, const float *bi,
       int64_t lanes)
{
    for (int64_t k = 0; k < lanes; k++) y[k] = sc[k] * (x[k] - mu[k]) / d[k] + bi[k];
}

/* The Relu / LeakyRelu / Clip post-op on a row, as elementwise_unary.c computes them: Relu
 * x < 0 ? 0 : x, LeakyRelu x < 0 ? alpha * x : x, Clip min then max. */
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
static void
bn_post_row(float *restrict y, int64_t lanes, const calq_post_op *op)
{
    const float a = op->alpha, b = op->beta;
    if (op->kind == CALQ_POST_CLIP) {
        for (int64_t k = 0; k < lanes; k++) {
            const float v = y[k] < a ? a : y[k];
            y[k] = v > b ? b : v;
        }
    } else if (a == 0.0f) {
        for (int64_t k = 0; k < lanes; k++) y[k] = y[k] < 0 ? 0.0f : y[k];
    } else {
        for (int64_t k = 0; k < lanes; k++) y[k] = y[k] < 0 ? a * y[k] : y[k];
    }
}

static calq_status bn_run_layout(calq_op_ctx *c)
{
    const calq_layout l = c->in_layout[0];
    const float eps = calq__attr_float(c->node, "epsilon", 1e-5f);
    const float *x = c->in[0]->data, *sc = c->in[1]->data, *bi = c->in[2]->data;
    const float *mu = c->in[3]->data, *var = c->in[4]->data;
    float *y = c->out[0]->data;
    const int64_t N = c->in[0]->dims[0], C = c->in[0]->dims[1];
    const int64_t sp = calq__shape_numel(c->in[0]->dims + 2, c->in[0]->ndim - 2);
    /* channels last: C values per position; blocked: b lanes per (block, position), the
     * padding lanes (channel >= C) left at zero */
    const int64_t b = l == CALQ_LAYOUT_CHANNELS_LAST ? C : l,
                  groups = l == CALQ_LAYOUT_CHANNELS_LAST ? 1 : (C + b - 1) / b;
    float *d = malloc(sizeof(float) * (size_t)(C ? C : 1));
    if (!d) return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory");
    for (int64_t ch = 0; ch < C; ch++) d[ch] = sqrtf(var[ch] + eps);
    const calq_post_op *post = c->post;
    const int n_post = c->n_post;
    /* rows of b lanes: (image, channel group, position); each computed alone, so any split among
     * the threads gives the same bits */
    const int64_t rows = N * groups * sp;
#pragma omp parallel for schedule(static) if (rows * b >= ((int64_t)1 << 16))
    for (int64_t r = 0; r < rows; r++) {
        const int64_t gr = (r / sp) % groups, c0 = gr * b, lanes = C - c0 < b ? C - c0 : b;
        bn_row(y + r * b, x + r * b, sc + c0, mu + c0, d + c0, bi + c0, lanes);
        for (int i = 0; i < n_post; i++) bn_post_row(y + r * b, lanes, &post[i]);
        if (lanes < b) memset(y + r * b + lanes, 0, sizeof(float) * (size_t)(b - lanes));
    }
    free(d);
    return CALQ_OK;
}

static void bn_release(void *state)
{
    (void)state;
}

const calq_op_def calq__ops_conv[] = {
    {"Conv", 2, 3, 1, 1, 0, false, conv_infer, conv_run, calq__conv_dnnl_prepare, calq__conv_dnnl_run,
     calq__conv_dnnl_release, CALQ_OP_LAYOUTS | CALQ_OP_POST_OPS},
    {"ConvTranspose", 2, 3, 1, 1, 0, false, convtranspose_infer, convtranspose_run, calq__convtranspose_dnnl_prepare,
     calq__conv_dnnl_run, calq__conv_dnnl_release, CALQ_OP_LAYOUTS | CALQ_OP_POST_OPS},
    {"BatchNormalization", 5, 5, 1, 5, 0, false, bn_infer, bn_run, bn_prepare, bn_run_layout, bn_release,
     CALQ_OP_LAYOUTS | CALQ_OP_POST_OPS},
    {0},
};
