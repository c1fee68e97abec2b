/* The per-bin terms of IFMR's loss bounds (ifmr_bound.c, bounds()) with AVX-512, 8 bins at a time.
 * GCC does not vectorize the scalar loop (the rounding's selects stay branches), and the bounds
 * of every candidate over up to 16384 bins were 5-7 % of a calibration. Compiled for the baseline
 * ISA: only this function carries the target, and ifmr_bound.c calls it only on a CPU with
 * AVX-512F and AVX-512DQ.
 *
 * Why each term equals the scalar loop's bit for bit: every operation is the scalar one applied
 * element-wise, in the same association (the build is ISO C, so no FMA is formed):
 *  - the clamp and the selects use vmaxps/vminps/vmaxpd/vminpd with the operands in the order
 *    that makes them `x < lo ? lo : x`, `v > hi ? hi : v`, `t > 0 ? t : 0`, `p > q ? p : q`,
 *    `p < q ? p : q` (the instructions return the second operand unless the first compares
 *    true);
 *  - round half away from zero is the loss kernels' (ifmr_loss_avx512.c): trunc, then one step
 *    away from zero when the exact fraction is >= 0.5 or <= -0.5, which is calq__round_away;
 *  - the float operations (clamp, divide, round, multiply, rb - ra) run on floats, the rest on
 *    the same doubles as the scalar code.
 * ifmr_bound.c adds the terms in bin order, as the scalar loop does, so the bounds are the same
 * doubles. */
#include "quant/ifmr_loss_simd.h"

#ifdef CALQ__IFMR_X86
#include "quant/ifmr_avx512.h"

/* r(x) = round(clamp(x, lo, hi) / s), as round_of in ifmr_bound.c */
INLINE512 __m512 round_of16(__m512 x, __m512 lo, __m512 hi, __m512 s)
{
    __m512 v = _mm512_max_ps(lo, x);
    v = _mm512_min_ps(hi, v);
    return calq__ifmr_round_away16(_mm512_div_ps(v, s));
}

/* dist_to: q < a ? a - q : q > b ? q - b : 0.0 */
INLINE512 __m512d dist_to8(__m512d q, __m512d a, __m512d b)
{
    __m512d r = _mm512_setzero_pd();
    r = _mm512_mask_sub_pd(r, _mm512_cmp_pd_mask(q, b, _CMP_GT_OQ), q, b);
    return _mm512_mask_sub_pd(r, _mm512_cmp_pd_mask(q, a, _CMP_LT_OQ), a, q);
}

INLINE512 __m512d lo8(__m512 v)
{
    return _mm512_cvtps_pd(_mm512_castps512_ps256(v));
}

T512 void calq__ifmr_bound_terms_avx512(const calq__ifmr_binset *bs, size_t j0, size_t m, const calq__ifmr_cand *c,
                                        double *lo, double *up)
{
    const __m512 clo = _mm512_set1_ps(c->lo), chi = _mm512_set1_ps(c->hi), s = _mm512_set1_ps(c->scale);
    const __m512d zero = _mm512_setzero_pd(), two = _mm512_set1_pd(2.0), eight = _mm512_set1_pd(8.0);
    const __m512d ulp50 = _mm512_set1_pd(0x1p-50), grow = _mm512_set1_pd(1.0 + 0x1p-48);
    const __m512d shrink = _mm512_set1_pd(1.0 - 0x1p-48);
    for (size_t k = 0; k < m; k += 8) {
        size_t j = j0 + k, left = m - k < 8 ? m - k : 8;
        __mmask8 m8 = (__mmask8)((1u << left) - 1u);
        __mmask16 m16 = (__mmask16)m8;
        __m512 a = _mm512_maskz_loadu_ps(m16, bs->a + j), b = _mm512_maskz_loadu_ps(m16, bs->b + j);
        __m512d n = _mm512_maskz_loadu_pd(m8, bs->n + j), base = _mm512_maskz_loadu_pd(m8, bs->base + j);
        __m512d s1 = _mm512_maskz_loadu_pd(m8, bs->s1 + j), s2 = _mm512_maskz_loadu_pd(m8, bs->s2 + j);
        __m512d a1 = _mm512_maskz_loadu_pd(m8, bs->a1 + j);
        __m512 ra = round_of16(a, clo, chi, s), rb = round_of16(b, clo, chi, s);
        __m512 qa = _mm512_mul_ps(ra, s), qb = _mm512_mul_ps(rb, s);
        __m512d qad = lo8(qa), qbd = lo8(qb), ad = lo8(a), bd = lo8(b);
        /* one q for every element: n D^2 - 2 D S1 + S2, and its error term */
        __m512d D = _mm512_sub_pd(qad, base);
        __m512d nDD = _mm512_mul_pd(_mm512_mul_pd(n, D), D);
        __m512d T = _mm512_add_pd(_mm512_sub_pd(nDD, _mm512_mul_pd(_mm512_mul_pd(two, D), s1)), s2);
        __m512d M = _mm512_add_pd(_mm512_add_pd(nDD, _mm512_mul_pd(_mm512_mul_pd(two, _mm512_abs_pd(D)), a1)), s2);
        __m512d E = _mm512_mul_pd(_mm512_mul_pd(_mm512_add_pd(n, eight), ulp50), M);
        __m512d lo_one = _mm512_max_pd(_mm512_sub_pd(T, E), zero), up_one = _mm512_add_pd(T, E);
        /* a rounding boundary inside: distances to the reachable q */
        __m512d dh = _mm512_max_pd(_mm512_sub_pd(qbd, ad), _mm512_sub_pd(bd, qad));
        __m512d dmin = _mm512_min_pd(dist_to8(qad, ad, bd), dist_to8(qbd, ad, bd));
        __mmask8 near = (__mmask8)_mm512_cmp_ps_mask(_mm512_sub_ps(rb, ra), _mm512_set1_ps(1.0f), _CMP_LE_OQ);
        __m512d dl = _mm512_maskz_mov_pd(near, dmin);
        __m512d up_two = _mm512_mul_pd(_mm512_mul_pd(_mm512_mul_pd(n, dh), dh), grow);
        __m512d lo_two = _mm512_mul_pd(_mm512_mul_pd(_mm512_mul_pd(n, dl), dl), shrink);
        __mmask8 same = (__mmask8)_mm512_cmp_ps_mask(ra, rb, _CMP_EQ_OQ);
        _mm512_mask_storeu_pd(lo + k, m8, _mm512_mask_blend_pd(same, lo_two, lo_one));
        _mm512_mask_storeu_pd(up + k, m8, _mm512_mask_blend_pd(same, up_two, up_one));
    }
}
#endif
