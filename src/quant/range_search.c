/* The two histogram searches of calq's range calibrators (docs/numerics.md, "calq's activation
 * calibrators"): TensorRT's entropy (KL) criterion and the squared quantization error.
 *
 * KL, in closed form. With S_P = sum P = total count and S_Q = sum Q = the count inside the
 * window, KL(p || q) = (sum P ln P - sum P ln Q) / S_P - ln S_P + ln S_Q, and Q is constant
 * (M_g / nz_g) on the P-nonzero bins of group g, so sum P ln Q = sum_g (P mass of g) ln(M_g / nz_g):
 * with prefix sums of h, of h ln h and of the non-zero bins, a window costs O(nq) instead of O(i).
 * calq__range_kl_ref builds P and Q bin by bin (the definition); the tests hold the two equal. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>

#include "quant/quant.h"

/* Window [0, i): the divergence from the prefix sums H (counts), HL (h ln h) and NZ (non-zero
 * bins), all of length B + 1. */
static double kl_window(const uint64_t *h, const double *H, const double *HL, const int *NZ, int B, int i, int nq)
{
    double total = H[B], in = H[i], outl = total - in;
    if (!(in > 0.0)) return INFINITY;
    double last = (double)h[i - 1] + outl;
    double plnp = HL[i - 1] + (last > 0.0 ? last * log(last) : 0.0);
    double plnq = 0.0;
    for (int g = 0; g < nq; g++) {
        int s = (int)((int64_t)g * i / nq), e = (int)((int64_t)(g + 1) * i / nq);
        if (e <= s) continue;
        double m = H[e] - H[s], pm = m;
        int nz = NZ[e] - NZ[s];
        if (e == i && outl > 0.0) {
            pm += outl;
            if (h[i - 1] == 0) nz++;
        }
        if (pm == 0.0) continue;
        if (m == 0.0) return INFINITY; /* Q is 0 where P is not */
        plnq += pm * log(m / nz);
    }
    return (plnp - plnq) / total - log(total) + log(in);
}

void calq__range_kl(const uint64_t *h, int B, int i_min, int nq, int n_threads, double *kl)
{
    double *H = malloc(sizeof(double) * ((size_t)B + 1)), *HL = malloc(sizeof(double) * ((size_t)B + 1));
    int *NZ = malloc(sizeof(int) * ((size_t)B + 1));
    int n = B - i_min + 1;
    if (!H || !HL || !NZ) { /* no memory: every window unusable, the caller reports it */
        for (int k = 0; k < n; k++) kl[k] = NAN;
        free(H);
        free(HL);
        free(NZ);
        return;
    }
    H[0] = HL[0] = 0.0;
    NZ[0] = 0;
    for (int j = 0; j < B; j++) { /* sequential sums: the same bits for any thread count */
        double c = (double)h[j];
        H[j + 1] = H[j] + c;
        HL[j + 1] = HL[j] + (c > 0.0 ? c * log(c) : 0.0);
        NZ[j + 1] = NZ[j] + (h[j] != 0);
    }
    int nt = n_threads > 0 ? n_threads : omp_get_max_threads();
#pragma omp parallel for schedule(dynamic, 16) num_threads(nt) if (n > 64)
    for (int k = 0; k < n; k++) kl[k] = kl_window(h, H, HL, NZ, B, i_min + k, nq);
    free(H);
    free(HL);
    free(NZ);
}

double calq__range_kl_ref(const uint64_t *h, int B, int i, int nq)
{
    if (i < 1 || i > B) return NAN;
    double total = 0.0, in = 0.0;
    for (int j = 0; j < B; j++) total += (double)h[j];
    double *P = calloc((size_t)i, sizeof(double)), *Q = calloc((size_t)i, sizeof(double));
    if (!P || !Q) {
        free(P);
        free(Q);
        return NAN;
    }
    for (int j = 0; j < i; j++) {
        P[j] = (double)h[j];
        in += P[j];
    }
    P[i - 1] += total - in;
    for (int g = 0; g < nq; g++) {
        int s = (int)((int64_t)g * i / nq), e = (int)((int64_t)(g + 1) * i / nq);
        double m = 0.0;
        int nz = 0;
        for (int j = s; j < e; j++) {
            m += (double)h[j];
            nz += P[j] > 0.0;
        }
        for (int j = s; j < e; j++) Q[j] = P[j] > 0.0 ? m / nz : 0.0;
    }
    double kl = 0.0;
    for (int j = 0; j < i && kl < INFINITY; j++) {
        if (P[j] <= 0.0) continue;
        if (Q[j] <= 0.0) {
            kl = INFINITY;
            break;
        }
        kl += P[j] / total * log((P[j] / total) / (Q[j] / in));
    }
    free(P);
    free(Q);
    return in > 0.0 ? kl : INFINITY;
}

/* integral over [a, b] of (v - x)^2 dx */
static double sq_int(double a, double b, double v)
{
    double p = b - v, q = a - v;
    return (p * p * p - q * q * q) / 3.0;
}

double calq__range_hist_sse(const uint64_t *h, int B, double lo, double w, double s, int o, int qmin, int qmax)
{
    return calq__range_hist_sse_weighted(h, B, lo, w, s, o, qmin, qmax, 1.0);
}

/* integral over [a, b] of the squared error weighted by neg_weight below 0 */
static double sq_int_weighted(double a, double b, double v, double neg_weight)
{
    if (neg_weight == 1.0) return sq_int(a, b, v); /* calq__range_hist_sse: no split */
    if (b <= 0.0) return neg_weight * sq_int(a, b, v);
    if (a >= 0.0) return sq_int(a, b, v);
    return neg_weight * sq_int(a, 0.0, v) + sq_int(0.0, b, v);
}

double calq__range_hist_sse_weighted(const uint64_t *h, int B, double lo, double w, double s, int o, int qmin, int qmax,
                                     double neg_weight)
{
    double sse = 0.0;
    for (int j = 0; j < B; j++) {
        if (!h[j]) continue;
        double a = lo + (double)j * w, b = lo + (double)(j + 1) * w;
        /* the codes of the bin's ends, clamped: code q holds x in [(q - o - 1/2) s, (q - o + 1/2) s) */
        double ua = floor(a / s + o + 0.5), ub = floor(b / s + o + 0.5);
        int q0 = ua < qmin ? qmin : ua > qmax ? qmax : (int)ua;
        int q1 = ub < qmin ? qmin : ub > qmax ? qmax : (int)ub;
        double e = 0.0;
        for (int q = q0; q <= q1; q++) {
            double lo_x = q == q0 ? a : ((double)(q - o) - 0.5) * s;
            double hi_x = q == q1 ? b : ((double)(q - o) + 0.5) * s;
            e += sq_int_weighted(lo_x, hi_x, (double)(q - o) * s, neg_weight);
        }
        sse += (double)h[j] / w * e;
    }
    return sse;
}
