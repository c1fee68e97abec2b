/* Resize: output coordinates mapped back to source coordinates and their interpolation taps
 * (nearest, linear, cubic, antialiased), as the ONNX reference defines them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernels/resize.h"

/* ---- coordinate mapping ------------------------------------------------------------------- */

/* Source coordinate of output index `xo` on axis a, as in the ONNX reference; *outside is set
 * when tf_crop_and_resize maps it beyond the input (the extrapolation value is used). */
static double rz_source(const rz_params *p, int a, int64_t xo, bool *outside)
{
    double x = (double)xo, in = (double)p->in[a], s = p->scale[a], len = p->out_len[a];
    *outside = false;
    switch (p->coord) {
    case CT_HALF_PIXEL: return (x + 0.5) / s - 0.5;
    case CT_ASYMMETRIC: return x / s;
    case CT_PYTORCH_HALF_PIXEL: return len == 1.0 ? -0.5 : (x + 0.5) / s - 0.5;
    case CT_ALIGN_CORNERS: return len == 1.0 ? 0.0 : x * (in - 1.0) / (len - 1.0);
    case CT_TF_HALF_PIXEL_FOR_NN: return (x + 0.5) / s;
    case CT_HALF_PIXEL_SYMMETRIC: {
        /* Centres the implicit roi in the output: differs from half_pixel only when the
         * output length was rounded (out_len = in * scale is not whole). */
        double adjust = len > 0.0 ? (double)p->out[a] / len : 1.0;
        return in / 2.0 * (1.0 - adjust) + (x + 0.5) / s - 0.5;
    }
    case CT_TF_CROP_AND_RESIZE: {
        double lo = p->roi_lo[a], hi = p->roi_hi[a], v;
        v = len == 1.0 ? (hi - lo) * (in - 1.0) / 2.0 : x * (hi - lo) * (in - 1.0) / (len - 1.0);
        v += lo * (in - 1.0);
        *outside = v < 0.0 || v > in - 1.0;
        return v;
    }
    }
    return x;
}

static int64_t clamp_idx(double v, int64_t n)
{
    if (v <= 0.0) return 0;
    if (v >= (double)(n - 1)) return n - 1;
    return (int64_t)v;
}

static int64_t rz_nearest(const rz_params *p, int a, double v)
{
    double f = floor(v), r = v - f;
    double pick;
    switch (p->round) {
    case NM_ROUND_PREFER_FLOOR: pick = r <= 0.5 ? f : f + 1.0; break;
    case NM_ROUND_PREFER_CEIL: pick = r < 0.5 ? f : f + 1.0; break;
    case NM_FLOOR: pick = f; break;
    case NM_CEIL: pick = ceil(v); break;
    default: pick = p->scale[a] < 1.0 ? ceil(v) : trunc(v); break;
    }
    return clamp_idx(pick, p->in[a]);
}

/* Antialiased taps (the ONNX reference): with base = ceil(v) - 1 and r = v - base in (0, 1],
 * tap base + i weighs f(s * (i - r)) for the triangle (linear) or Keys cubic (cubic) kernel f,
 * normalised to sum 1; taps beyond the edges read the edge (or, with exclude_outside, are
 * dropped and the rest renormalised). */
static void rz_antialias_taps(const rz_params *p, int a, double v, rz_taps *t)
{
    double s = p->scale[a] < 1.0 ? p->scale[a] : 1.0, A = p->cubic_a, sum = 0.0;
    double base = ceil(v) - 1.0, r = v - base;
    bool cubic = p->mode == RZ_CUBIC;
    int64_t start = (int64_t)floor((cubic ? -2.0 : -1.0) / s) + 1;
    int n = p->max_taps[a];
    double w[4096];
    for (int k = 0; k < n; k++) {
        double d = fabs(s * ((double)(start + k) - r)), f;
        if (cubic)
            f = d <= 1.0  ? ((A + 2) * d - (A + 3)) * d * d + 1
                : d < 2.0 ? ((A * d - 5 * A) * d + 8 * A) * d - 4 * A
                          : 0.0;
        else
            f = d < 1.0 ? 1.0 - d : 0.0;
        w[k] = f;
        sum += f;
    }
    for (int k = 0; k < n && sum != 0.0; k++) w[k] /= sum;
    if (p->exclude_outside) {
        sum = 0.0;
        for (int k = 0; k < n; k++) {
            double pos = base + (double)(start + k);
            if (pos < 0 || pos >= (double)p->in[a]) w[k] = 0.0;
            sum += w[k];
        }
        for (int k = 0; k < n && sum != 0.0; k++) w[k] /= sum;
    }
    t->n = 0;
    for (int k = 0; k < n; k++) {
        if (w[k] == 0.0) continue;
        t->idx[t->n] = clamp_idx(base + (double)(start + k), p->in[a]);
        t->w[t->n] = w[k];
        t->n++;
    }
}

void calq__rz_make_taps(const rz_params *p, int a, int64_t xo, rz_taps *t)
{
    double v = rz_source(p, a, xo, &t->outside);
    t->n = 0;
    if (t->outside) return;
    if (p->antialias && p->scale[a] < 1.0) {
        rz_antialias_taps(p, a, v, t);
        return;
    }
    /* Every tap beyond the edges clamps to the edge anyway; bounding v keeps the integer
     * conversions below defined whatever the attributes. */
    if (!(v >= -2.0)) v = -2.0;
    if (v > (double)p->in[a] + 2.0) v = (double)p->in[a] + 2.0;
    if (p->mode == RZ_NEAREST) {
        t->idx[0] = rz_nearest(p, a, v);
        t->w[0] = 1.0;
        t->n = 1;
        return;
    }
    double f = floor(v), r = v - f, w[4];
    int64_t base = (int64_t)f, first, n;
    if (p->mode == RZ_LINEAR) {
        w[0] = 1.0 - r;
        w[1] = r;
        first = base;
        n = 2;
    } else {
        /* Keys cubic convolution with coefficient A, taps base-1 .. base+2. */
        double A = p->cubic_a, q = 1.0 - r;
        w[0] = ((A * (r + 1.0) - 5.0 * A) * (r + 1.0) + 8.0 * A) * (r + 1.0) - 4.0 * A;
        w[1] = ((A + 2.0) * r - (A + 3.0)) * r * r + 1.0;
        w[2] = ((A + 2.0) * q - (A + 3.0)) * q * q + 1.0;
        w[3] = ((A * (q + 1.0) - 5.0 * A) * (q + 1.0) + 8.0 * A) * (q + 1.0) - 4.0 * A;
        first = base - 1;
        n = 4;
        if (p->exclude_outside) {
            double sum = 0.0;
            for (int k = 0; k < 4; k++) {
                if (first + k < 0 || first + k >= p->in[a]) w[k] = 0.0;
                sum += w[k];
            }
            if (sum != 0.0)
                for (int k = 0; k < 4; k++) w[k] /= sum;
        }
    }
    for (int k = 0; k < n; k++) {
        if (w[k] == 0.0) continue; /* exact zeros (integer source coordinates) cost nothing */
        t->idx[t->n] = clamp_idx((double)(first + k), p->in[a]);
        t->w[t->n] = w[k];
        t->n++;
    }
}

void calq__rz_axis_taps_free(rz_axis_taps *at)
{
    free(at->t);
    free(at->idx);
    free(at->w);
}

bool calq__rz_axis_taps_make(const rz_params *p, int a, rz_axis_taps *at)
{
    int64_t n = p->out[a], m = p->max_taps[a] > 0 ? p->max_taps[a] : 1;
    at->t = malloc(sizeof(rz_taps) * (size_t)(n + 1));
    at->idx = malloc(sizeof(int64_t) * (size_t)(n * m + 1));
    at->w = malloc(sizeof(double) * (size_t)(n * m + 1));
    if (!at->t || !at->idx || !at->w) {
        calq__rz_axis_taps_free(at);
        return false;
    }
    for (int64_t o = 0; o < n; o++) {
        at->t[o].idx = at->idx + o * m;
        at->t[o].w = at->w + o * m;
        calq__rz_make_taps(p, a, o, &at->t[o]);
    }
    return true;
}

/* ---- nearest: a gather, any dtype --------------------------------------------------------- */
