/* DMQ balancing's numerics (quant.h): the per-channel statistic and the balance factors
 * (amct-reference.md §7.2 dmq_balancer_param, SmoothQuant's s_j; docs/numerics.md). */
#include <math.h>

#include "quant/quant.h"

void calq__dmq_factors(const float *xmax, const float *wmax, int64_t n, double alpha, float *s)
{
    for (int64_t j = 0; j < n; j++) {
        double x = xmax[j], w = wmax[j];
        if (!(x > 0.0) || !(w > 0.0) || !isfinite(x) || !isfinite(w)) {
            s[j] = 1.0f; /* a channel that is always 0 (or a weight column of zeros): nothing to move */
            continue;
        }
        double v = pow(x, alpha) / pow(w, 1.0 - alpha);
        if (v > CALQ_DMQ_S_MAX) v = CALQ_DMQ_S_MAX;
        if (v < 1.0 / CALQ_DMQ_S_MAX) v = 1.0 / CALQ_DMQ_S_MAX;
        s[j] = (float)v;
    }
}

/* x viewed as [outer, C, inner] around the axis */
static void split(int ndim, const int64_t *dims, int axis, int64_t *outer, int64_t *c, int64_t *inner)
{
    *outer = *inner = 1;
    for (int d = 0; d < axis; d++) *outer *= dims[d];
    for (int d = axis + 1; d < ndim; d++) *inner *= dims[d];
    *c = dims[axis];
}

void calq__dmq_absmax_ref(const float *x, int ndim, const int64_t *dims, int axis, float *xmax)
{
    int64_t outer, c, inner;
    split(ndim, dims, axis, &outer, &c, &inner);
    int64_t numel = outer * c * inner;
    for (int64_t i = 0; i < numel; i++) {
        int64_t ch = (i / inner) % c;
        float a = fabsf(x[i]);
        if (isfinite(a) && a > xmax[ch]) xmax[ch] = a;
    }
}

void calq__dmq_absmax(const float *x, int ndim, const int64_t *dims, int axis, float *xmax)
{
    int64_t outer, c, inner;
    split(ndim, dims, axis, &outer, &c, &inner);
    if (inner == 1) { /* channels last (matrix products): one run per row */
        for (int64_t o = 0; o < outer; o++) {
            const float *r = x + o * c;
            for (int64_t ch = 0; ch < c; ch++) {
                float a = fabsf(r[ch]);
                float m = xmax[ch];
                xmax[ch] = isfinite(a) && a > m ? a : m;
            }
        }
        return;
    }
    for (int64_t o = 0; o < outer; o++)
        for (int64_t ch = 0; ch < c; ch++) {
            const float *r = x + (o * c + ch) * inner;
            float m = xmax[ch];
            for (int64_t i = 0; i < inner; i++) {
                float a = fabsf(r[i]);
                m = isfinite(a) && a > m ? a : m; /* max is order-independent: any thread count, same bits */
            }
            xmax[ch] = m;
        }
}
