/* Provable bounds on IFMR's candidate losses, from a histogram with moments (docs/numerics.md,
 * "Pruning the candidate search").
 *
 * IFMR evaluates 60 candidate clips over every element (amct-reference.md §3.4-3.6) and keeps
 * the first minimum (§3.7.3). Most candidates lose by far: if a candidate's loss is provably
 * larger than a loss some evaluated candidate has, its exact sum cannot change the winner, and
 * need not be computed. This file gives, for any candidate, a lower and an upper bound of the
 * exact double sum the loss kernels (ifmr_loss.c) would compute over the elements added, with
 * every rounding of those kernels accounted for; ifmr_stream.c decides which candidates still
 * need their exact sums.
 *
 * The histogram: nb equal interior bins over [flo, fhi] (the union of the candidates' clip
 * ranges), one bin below flo and one above fhi; each bin holds the count and the first two
 * moments of e = x - base (base: the bin's lower edge, outer bins flo and fhi), in double.
 *
 * Why the bounds hold. The kernel computes, per element, r = round(fl(clamp(x, lo, hi) / s)),
 * q = fl(r * s), d = fl(q - x), and adds d*d (exact in double) to a lane sum.
 *  - r(x) is monotone in x (clamp, a correctly rounded division by s > 0 and round are), so over
 *    a bin whose float edges [a, b] give r(a) == r(b), every element has the same q, and the
 *    sum of (q - x)^2 is n D^2 - 2 D S1 + S2 with D = q - base (computed in double, its rounding
 *    bounded below by E);
 *  - otherwise (the bin holds a rounding boundary) every |q - x| lies between the distances of
 *    [a, b] to the reachable q values: at least min(dist(q(a)), dist(q(b))) when r(b) = r(a) + 1
 *    (an element rounding down lies above q(a), one rounding up below q(b)), 0 otherwise, and at
 *    most max(q(b) - a, b - q(a));
 *  - |d| = |q - x| (1 +- 2^-24) (one correctly rounded subtraction), so d*d is within 2^-22 of
 *    (q - x)^2 relatively;
 *  - a lane sum of m non-negative terms is within (m + 1) 2^-53 of the exact sum relatively, and
 *    the fixed tree of 8 lanes adds 3 more roundings.
 * Zeros are not added: for IFMR's legal candidates (0 is inside every clip range, s finite and
 * positive, §3.3) an element 0 has d = +0 exactly. */
/* No code here enables floating-point traps; GCC if-converts (hence vectorizes) the selects of
 * the bounds loop only when it may assume so. Values are unaffected. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "quant/ifmr_loss_simd.h"
#include "quant/quant.h"

#define BIN_SLACK 1e-6 /* of a bin width: the index computation's rounding is far below this */

int calq__ifmr_hist_init(calq__ifmr_hist *h, unsigned nb, float flo, float fhi, float dmin, float dmax)
{
    memset(h, 0, sizeof *h);
    if (!(fhi > flo) || !isfinite(flo) || !isfinite(fhi) || nb == 0) return 0;
    h->nb = nb;
    h->flo = flo;
    h->fhi = fhi;
    h->w = ((double)fhi - (double)flo) / (double)nb;
    h->inv_w = 1.0 / h->w;
    if (!(h->w > 0.0) || !isfinite(h->inv_w)) return 0;
    h->dmin = dmin < flo ? dmin : flo;
    h->dmax = dmax > fhi ? dmax : fhi;
    h->bin = calloc((size_t)nb + 2, sizeof *h->bin);
    return h->bin != NULL;
}

void calq__ifmr_hist_free(calq__ifmr_hist *h)
{
    free(h->bin);
    memset(h, 0, sizeof *h);
}

void calq__ifmr_hist_clear(calq__ifmr_hist *h)
{
    if (h->bin) memset(h->bin, 0, ((size_t)h->nb + 2) * sizeof *h->bin);
    h->added = 0;
    h->bad = 0;
}

/* The lower edge of bin k (1..nb interior), the base its moments are taken from. The same
 * expression serves the accumulation and the bounds. */
static inline double base_of(const calq__ifmr_hist *h, unsigned k)
{
    if (k == 0) return h->flo;
    if (k > h->nb) return h->fhi;
    return (double)h->flo + (double)(k - 1) * h->w;
}

#define ADD_BLOCK 4096

void calq__ifmr_hist_add(calq__ifmr_hist *h, const float *x, size_t n)
{
    calq__ifmr_bin *bin = h->bin;
    const double lo = h->flo, inv_w = h->inv_w, w = h->w;
    const float flo = h->flo, fhi = h->fhi;
    const unsigned nb = h->nb;
    const calq__isa isa = calq__ifmr_isa_best();
    float buf[ADD_BLOCK + 16];
    h->added += n;
    for (size_t j0 = 0; j0 < n; j0 += ADD_BLOCK) {
        /* the nonzero elements first, without a branch: ReLU outputs are about half zeros in no
         * predictable order (zeros add nothing to any legal candidate's sum) */
        size_t m = n - j0 < ADD_BLOCK ? n - j0 : ADD_BLOCK;
        size_t c = calq__compact_nonzero(isa, x + j0, m, buf);
        for (size_t j = 0; j < c; j++) {
            float v = buf[j];
            unsigned k;
            double base;
            if (v < flo) {
                k = 0;
                base = lo;
            } else if (v > fhi) {
                k = nb + 1;
                base = fhi;
            } else if (v >= flo) {
                double t = ((double)v - lo) * inv_w;
                unsigned i = t < (double)nb ? (unsigned)t : nb - 1;
                k = i + 1;
                base = lo + (double)i * w;
            } else { /* NaN: the stream refuses such data; no bound is claimed */
                h->bad = 1;
                continue;
            }
            double e = (double)v - base;
            bin[k].n++;
            bin[k].s1 += e;
            bin[k].s2 += e * e;
        }
    }
}

void calq__ifmr_hist_merge(calq__ifmr_hist *into, const calq__ifmr_hist *from)
{
    for (unsigned k = 0; k < into->nb + 2; k++) {
        into->bin[k].n += from->bin[k].n;
        into->bin[k].s1 += from->bin[k].s1;
        into->bin[k].s2 += from->bin[k].s2;
    }
    into->added += from->added;
    into->bad |= from->bad;
}

/* The largest float <= v, the smallest float >= v */
static inline float float_below(double v)
{
    float f = (float)v;
    return (double)f > v ? nextafterf(f, -INFINITY) : f;
}
static inline float float_above(double v)
{
    float f = (float)v;
    return (double)f < v ? nextafterf(f, INFINITY) : f;
}

void calq__ifmr_binset_free(calq__ifmr_binset *bs)
{
    free(bs->a);
    memset(bs, 0, sizeof *bs);
}

/* Groups of `group` interior bins become one: the moments move to the group's base
 * (e' = e + delta: S1 + n delta, S2 + 2 delta S1 + n delta^2; the rounding of this is far inside
 * the bounds' own error term). Bins without elements are left out. */
int calq__ifmr_binset_make(const calq__ifmr_hist *h, unsigned group, calq__ifmr_binset *bs)
{
    memset(bs, 0, sizeof *bs);
    if (h->bad || !h->bin || group == 0) return 0;
    size_t cap = (size_t)h->nb / group + 3;
    char *mem = malloc(cap * (2 * sizeof(float) + 5 * sizeof(double)));
    if (!mem) return 0;
    bs->a = (float *)mem;
    bs->b = bs->a + cap;
    bs->base = (double *)(void *)(bs->b + cap);
    bs->n = bs->base + cap;
    bs->s1 = bs->n + cap;
    bs->s2 = bs->s1 + cap;
    bs->a1 = bs->s2 + cap;
    bs->added = h->added;
    size_t m = 0;
    /* the outer bins: every element strictly outside [flo, fhi], one sign of e each */
    for (int side = 0; side < 2; side++) {
        const calq__ifmr_bin *bn = &h->bin[side ? h->nb + 1 : 0];
        if (!bn->n) continue;
        bs->a[m] = side ? h->fhi : h->dmin;
        bs->b[m] = side ? h->dmax : h->flo;
        bs->base[m] = side ? h->fhi : h->flo;
        bs->n[m] = (double)bn->n;
        bs->s1[m] = bn->s1;
        bs->s2[m] = bn->s2;
        bs->a1[m] = fabs(bn->s1);
        m++;
    }
    for (unsigned g0 = 0; g0 < h->nb; g0 += group) {
        unsigned g1 = g0 + group < h->nb ? g0 + group : h->nb;
        double B = base_of(h, g0 + 1), n = 0.0, s1 = 0.0, s2 = 0.0;
        for (unsigned i = g0; i < g1; i++) {
            const calq__ifmr_bin *bn = &h->bin[i + 1];
            if (!bn->n) continue;
            double d = base_of(h, i + 1) - B, c = (double)bn->n;
            s2 += bn->s2 + 2.0 * d * bn->s1 + c * d * d;
            s1 += bn->s1 + c * d;
            n += c;
        }
        if (n == 0.0) continue;
        double lo = (double)h->flo + ((double)g0 - BIN_SLACK) * h->w;
        double hi = (double)h->flo + ((double)g1 + BIN_SLACK) * h->w;
        float fa = float_below(lo), fb = float_above(hi);
        bs->a[m] = fa < h->flo ? h->flo : fa;
        bs->b[m] = fb > h->fhi ? h->fhi : fb;
        bs->base[m] = B;
        bs->n[m] = n;
        bs->s1[m] = s1;
        bs->s2[m] = s2;
        /* |e'| <= the group's width (plus the index slack) */
        bs->a1[m] = n * h->w * ((double)(g1 - g0) + 4 * BIN_SLACK);
        m++;
    }
    bs->m = m;
    return 1;
}

/* r(x) exactly as the loss kernels compute it (calq__round_away is roundf for every float) */
static inline float round_of(float x, float lo, float hi, float s)
{
    float v = x < lo ? lo : x;
    v = v > hi ? hi : v;
    return calq__round_away(v / s);
}

static inline double dist_to(double q, double a, double b)
{
    return q < a ? a - q : q > b ? q - b : 0.0;
}

/* The bounds from the sums of the per-bin terms: d*d against (q - x)^2 (2^-23), the lane sums'
 * rounding, and these sums' own (the 2^-22 covers both 2^-23 and m * 2^-53 with room). */
static int widen(const calq__ifmr_binset *bs, double lo_sum, double up_sum, double *lower, double *upper)
{
    double g = 0x1p-22 + ((double)bs->added / CALQ__IFMR_LANES + 16.0) * 0x1p-52;
    *lower = lo_sum * (1.0 - g);
    *upper = up_sum * (1.0 + g);
    return 1;
}

/* Cloned per instruction set (GCC/clang function multiversioning; static, so that the resolver
 * is not exported): the bounds need no bit agreement with anything but the kernels' rounding,
 * which every ISA computes the same. */
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
static int
bounds(const calq__ifmr_binset *bs, const calq__ifmr_cand *c, double *lower, double *upper)
{
    if (!bs->a || !(c->lo <= 0.0f && c->hi >= 0.0f && c->scale > 0.0f && c->scale < INFINITY)) return 0;
    const float s = c->scale, clo = c->lo, chi = c->hi;
    const float *pa = bs->a, *pb = bs->b;
    const double *pbase = bs->base, *pn = bs->n, *ps1 = bs->s1, *ps2 = bs->s2, *pa1 = bs->a1;
    double lo_sum = 0.0, up_sum = 0.0;
    /* both cases computed and one selected, so that the loop vectorizes (the order of these two
     * sums is free: their rounding is inside the margin below) */
#if !defined(__clang__) /* clang refuses (-Wpass-failed) what GCC vectorizes here */
#pragma omp simd reduction(+ : lo_sum, up_sum)
#endif
    for (size_t j = 0; j < bs->m; j++) {
        const float a = pa[j], b = pb[j];
        const double n = pn[j];
        float ra = round_of(a, clo, chi, s), rb = round_of(b, clo, chi, s);
        float qa = ra * s, qb = rb * s;
        /* one q for every element (ra == rb): the moments give the sum */
        double D = (double)qa - pbase[j];
        double T = n * D * D - 2.0 * D * ps1[j] + ps2[j];
        double M = n * D * D + 2.0 * fabs(D) * pa1[j] + ps2[j];
        double E = (n + 8.0) * 0x1p-50 * M;
        double lo_one = T - E > 0.0 ? T - E : 0.0, up_one = T + E;
        /* a rounding boundary inside: distances to the reachable q */
        double dh1 = (double)qb - (double)a, dh2 = (double)b - (double)qa;
        double dh = dh1 > dh2 ? dh1 : dh2;
        double da = dist_to(qa, a, b), db = dist_to(qb, a, b);
        double dl = rb - ra <= 1.0f ? (da < db ? da : db) : 0.0;
        double up_two = n * dh * dh * (1.0 + 0x1p-48), lo_two = n * dl * dl * (1.0 - 0x1p-48);
        lo_sum += ra == rb ? lo_one : lo_two;
        up_sum += ra == rb ? up_one : up_two;
    }
    return widen(bs, lo_sum, up_sum, lower, upper);
}

#ifdef CALQ__IFMR_X86
#define TERMS_BLOCK 512

/* bounds() with the per-bin terms from the AVX-512 kernel, added in bin order as bounds() adds
 * them: the same sums, so the same bounds. */
static int bounds_avx512(const calq__ifmr_binset *bs, const calq__ifmr_cand *c, double *lower, double *upper)
{
    if (!bs->a || !(c->lo <= 0.0f && c->hi >= 0.0f && c->scale > 0.0f && c->scale < INFINITY)) return 0;
    double lo[TERMS_BLOCK], up[TERMS_BLOCK], lo_sum = 0.0, up_sum = 0.0;
    for (size_t j0 = 0; j0 < bs->m; j0 += TERMS_BLOCK) {
        size_t m = bs->m - j0 < TERMS_BLOCK ? bs->m - j0 : TERMS_BLOCK;
        calq__ifmr_bound_terms_avx512(bs, j0, m, c, lo, up);
        for (size_t j = 0; j < m; j++) {
            lo_sum += lo[j];
            up_sum += up[j];
        }
    }
    return widen(bs, lo_sum, up_sum, lower, upper);
}
#endif

int calq__ifmr_binset_bounds_isa(calq__isa isa, const calq__ifmr_binset *bs, const calq__ifmr_cand *c, double *lower,
                                 double *upper)
{
#ifdef CALQ__IFMR_X86
    if (isa == CALQ__ISA_AVX512 && calq__ifmr_isa_supported(isa)) return bounds_avx512(bs, c, lower, upper);
#endif
    return bounds(bs, c, lower, upper);
}

int calq__ifmr_binset_bounds(const calq__ifmr_binset *bs, const calq__ifmr_cand *c, double *lower, double *upper)
{
    return calq__ifmr_binset_bounds_isa(calq__ifmr_isa_best(), bs, c, lower, upper);
}
