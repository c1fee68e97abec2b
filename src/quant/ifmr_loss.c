/* The IFMR candidate loss (amct-reference.md §3.5/§3.6): sum over elements of
 * (round(clip(x, lo, hi)/s)*s - x)^2, without int saturation (§3.7.2).
 *
 * Split independence. AMCT sums float terms with one running float sum; calq sums the exact
 * double squares d*d (d is a float, so d*d is exact in double) into 8 lanes chosen by the
 * element's position g in the whole data (lane g % 8), each lane a plain sequential double sum,
 * and adds the lanes in a fixed tree at the end (calq__ifmr_acc_total). Every addition is
 * therefore fixed by the element sequence alone: a batch boundary only decides where the
 * running lane sums are stored between calls, and threads split candidates, never elements. So
 * streamed, batched, threaded and whole-buffer runs give the same bits. */
/* No code here enables floating-point traps, and GCC only if-converts (hence vectorizes) the
 * select-then-convert of calq__round_away when it may assume so. Results are unaffected. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

#include "quant/quant.h"

void calq__ifmr_loss_ref(const float *x, size_t n, uint64_t g0, const calq__ifmr_cand *c, int amct, float Lf,
                         calq__ifmr_acc *acc)
{
    for (size_t j = 0; j < n; j++) {
        float v = x[j];
        if (x[j] < c->lo)
            v = c->lo;
        else if (x[j] > c->hi)
            v = c->hi;
        float t = v / c->scale;
        float r = roundf(t);
        float q = r * c->scale;
        float d = q - x[j];
        if (amct) {
            /* AMCT: (d * d) / length per element, then std::accumulate in float */
            float sq = d * d;
            float e = sq / Lf;
            acc->f += e;
        } else {
            acc->lane[(g0 + j) % CALQ__IFMR_LANES] += (double)d * (double)d;
        }
    }
}

/* The quantization error of one element, as a float (same operations as the _ref kernel). */
static inline float err_of(float x, float lo, float hi, float s)
{
    float v = x < lo ? lo : x;
    v = v > hi ? hi : v;
    float t = v / s;
    float r = calq__round_away(t);
    float q = r * s;
    return q - x;
}

#define BLOCK 256 /* elements per vectorized step; a multiple of CALQ__IFMR_LANES */

static void block_errors(const float *x, size_t m, float lo, float hi, float s, float *d)
{
    for (size_t i = 0; i < m; i++) d[i] = err_of(x[i], lo, hi, s);
}

void calq__ifmr_loss_fast(const float *x, size_t n, uint64_t g0, const calq__ifmr_cand *c, int amct, float Lf,
                          calq__ifmr_acc *acc)
{
    const float lo = c->lo, hi = c->hi, s = c->scale;
    float d[BLOCK];
    if (amct) {
        /* one sequential float sum: only the element errors vectorize */
        float f = acc->f;
        for (size_t j = 0; j < n; j += BLOCK) {
            size_t m = n - j < BLOCK ? n - j : BLOCK;
            block_errors(x + j, m, lo, hi, s, d);
            for (size_t i = 0; i < m; i++) {
                float sq = d[i] * d[i];
                float e = sq / Lf;
                f += e;
            }
        }
        acc->f = f;
        return;
    }
    size_t j = 0;
    /* head: up to the next position that is a multiple of the lane count */
    while (j < n && ((g0 + j) % CALQ__IFMR_LANES) != 0) {
        float e = err_of(x[j], lo, hi, s);
        acc->lane[(g0 + j) % CALQ__IFMR_LANES] += (double)e * (double)e;
        j++;
    }
    double a0 = acc->lane[0], a1 = acc->lane[1], a2 = acc->lane[2], a3 = acc->lane[3];
    double a4 = acc->lane[4], a5 = acc->lane[5], a6 = acc->lane[6], a7 = acc->lane[7];
    while (n - j >= CALQ__IFMR_LANES) {
        size_t m = (n - j) / CALQ__IFMR_LANES * CALQ__IFMR_LANES;
        if (m > BLOCK) m = BLOCK;
        block_errors(x + j, m, lo, hi, s, d);
        for (size_t i = 0; i < m; i += CALQ__IFMR_LANES) {
            const float *e = d + i;
            a0 += (double)e[0] * (double)e[0];
            a1 += (double)e[1] * (double)e[1];
            a2 += (double)e[2] * (double)e[2];
            a3 += (double)e[3] * (double)e[3];
            a4 += (double)e[4] * (double)e[4];
            a5 += (double)e[5] * (double)e[5];
            a6 += (double)e[6] * (double)e[6];
            a7 += (double)e[7] * (double)e[7];
        }
        j += m;
    }
    acc->lane[0] = a0, acc->lane[1] = a1, acc->lane[2] = a2, acc->lane[3] = a3;
    acc->lane[4] = a4, acc->lane[5] = a5, acc->lane[6] = a6, acc->lane[7] = a7;
    /* tail: the lanes continue where the next batch will resume */
    for (; j < n; j++) {
        float e = err_of(x[j], lo, hi, s);
        acc->lane[(g0 + j) % CALQ__IFMR_LANES] += (double)e * (double)e;
    }
}
