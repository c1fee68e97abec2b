/* IFMR's candidate losses with AVX-512 (amct-reference.md §3.5/§3.6; the contract is in
 * ifmr_loss_simd.h). Compiled for the baseline ISA: only these functions carry the target, and
 * ifmr_loss.c calls them only when the CPU has AVX-512F and AVX-512DQ.
 *
 * Why the results equal calq__ifmr_loss_ref's bit for bit:
 *  - every operation is the scalar one applied element-wise: vmaxps/vminps with the bound first
 *    are `x < lo ? lo : x` and `v > hi ? hi : v`; vdivps, vmulps, vsubps are correctly rounded
 *    like their scalar forms; round half away from zero is i = trunc(t) moved one step away from
 *    zero when the exact fraction t - i is >= 0.5 or <= -0.5 (roundf for every float: |t| >= 2^23
 *    has fraction 0, inf has NaN and stays, a NaN stays NaN);
 *  - the build is ISO C (-std=c11), where GCC contracts no float expression into an FMA; the one
 *    FMA written here (sq_add) is exact by construction;
 *  - d*d of a float d is exact in double, so each lane's sum is the same sequence of correctly
 *    rounded double additions as the scalar lane sum, in the same order. */
#include "quant/ifmr_loss_simd.h"

#ifdef CALQ__IFMR_X86
#include "quant/ifmr_avx512.h"

/* round(clip(x, lo, hi) / s) * s - x, element-wise */
INLINE512 __m512 err16(__m512 x, __m512 lo, __m512 hi, __m512 s)
{
    __m512 v = _mm512_max_ps(lo, x);
    v = _mm512_min_ps(hi, v);
    __m512 t = _mm512_div_ps(v, s);
    __m512 r = calq__ifmr_round_away16(t);
    __m512 q = _mm512_mul_ps(r, s);
    return _mm512_sub_ps(q, x);
}

/* acc + d*d in double as one FMA: d*d of a float is exact in double (48 significant bits, no
 * overflow, no subnormal), so fma(d, d, acc) rounds the same exact sum as acc + (d*d). */
INLINE512 __m512d sq_add(__m512d acc, __m256 d)
{
    __m512d e = _mm512_cvtps_pd(d);
    return _mm512_fmadd_pd(e, e, acc);
}

/* K candidates (a constant after inlining): one load of x feeds K independent lane chains */
INLINE512 void lanes_k(const float *x, size_t m, unsigned K, const calq__ifmr_cand *const *c, calq__ifmr_acc *const *a)
{
    __m512 lo[CALQ__IFMR_SIMD_GROUP], hi[CALQ__IFMR_SIMD_GROUP], s[CALQ__IFMR_SIMD_GROUP];
    __m512d acc[CALQ__IFMR_SIMD_GROUP];
    for (unsigned q = 0; q < K; q++) {
        lo[q] = _mm512_set1_ps(c[q]->lo);
        hi[q] = _mm512_set1_ps(c[q]->hi);
        s[q] = _mm512_set1_ps(c[q]->scale);
        acc[q] = _mm512_loadu_pd(a[q]->lane);
    }
    size_t i = 0;
    for (; i + 16 <= m; i += 16) {
        __m512 v = _mm512_loadu_ps(x + i);
        for (unsigned q = 0; q < K; q++) {
            __m512 d = err16(v, lo[q], hi[q], s[q]);
            acc[q] = sq_add(acc[q], _mm512_castps512_ps256(d));    /* elements i..i+7: lanes 0..7 */
            acc[q] = sq_add(acc[q], _mm512_extractf32x8_ps(d, 1)); /* then i+8..i+15 */
        }
    }
    if (i < m) { /* m is a multiple of 8: one half vector is left */
        __m512 v = _mm512_maskz_loadu_ps((__mmask16)0xFF, x + i);
        for (unsigned q = 0; q < K; q++) {
            __m512 d = err16(v, lo[q], hi[q], s[q]);
            acc[q] = sq_add(acc[q], _mm512_castps512_ps256(d));
        }
    }
    for (unsigned q = 0; q < K; q++) _mm512_storeu_pd(a[q]->lane, acc[q]);
}

T512 void calq__ifmr_lanes_avx512(const float *x, size_t m, unsigned k, const calq__ifmr_cand *const *c,
                                  calq__ifmr_acc *const *a)
{
    switch (k) {
    case 1: lanes_k(x, m, 1, c, a); break;
    case 2: lanes_k(x, m, 2, c, a); break;
    case 3: lanes_k(x, m, 3, c, a); break;
    default: lanes_k(x, m, 4, c, a); break;
    }
}

/* AMCT's float sums: 16 candidates per vector, FSUM_VECS vectors per walk over x */
#define FSUM_VECS  4
#define FSUM_BLOCK (16 * FSUM_VECS)

INLINE512 void fsum_block(const float *x, size_t n, unsigned nv, const float *plo, const float *phi, const float *ps,
                          float Lf, float *pf)
{
    __m512 lo[FSUM_VECS], hi[FSUM_VECS], s[FSUM_VECS], f[FSUM_VECS];
    for (unsigned v = 0; v < nv; v++) {
        lo[v] = _mm512_loadu_ps(plo + 16 * v);
        hi[v] = _mm512_loadu_ps(phi + 16 * v);
        s[v] = _mm512_loadu_ps(ps + 16 * v);
        f[v] = _mm512_loadu_ps(pf + 16 * v);
    }
    const __m512 L = _mm512_set1_ps(Lf);
    for (size_t j = 0; j < n; j++) {
        __m512 xj = _mm512_set1_ps(x[j]);
        for (unsigned v = 0; v < nv; v++) {
            __m512 d = err16(xj, lo[v], hi[v], s[v]);
            __m512 sq = _mm512_mul_ps(d, d);
            __m512 e = _mm512_div_ps(sq, L);
            f[v] = _mm512_add_ps(f[v], e);
        }
    }
    for (unsigned v = 0; v < nv; v++) _mm512_storeu_ps(pf + 16 * v, f[v]);
}

T512 void calq__ifmr_fsum_avx512(const float *x, size_t n, unsigned k, const calq__ifmr_cand *const *c, float Lf,
                                 calq__ifmr_acc *const *a)
{
    for (unsigned b = 0; b < k; b += FSUM_BLOCK) {
        unsigned kb = k - b < FSUM_BLOCK ? k - b : FSUM_BLOCK;
        /* unused vector elements get a harmless candidate (clip [0, 0], scale 1) */
        float lo[FSUM_BLOCK] = {0}, hi[FSUM_BLOCK] = {0}, s[FSUM_BLOCK], f[FSUM_BLOCK] = {0};
        for (unsigned q = 0; q < FSUM_BLOCK; q++) s[q] = 1.0f;
        for (unsigned q = 0; q < kb; q++) {
            lo[q] = c[b + q]->lo;
            hi[q] = c[b + q]->hi;
            s[q] = c[b + q]->scale;
            f[q] = a[b + q]->f;
        }
        unsigned nv = (kb + 15) / 16;
        switch (nv) {
        case 1: fsum_block(x, n, 1, lo, hi, s, Lf, f); break;
        case 2: fsum_block(x, n, 2, lo, hi, s, Lf, f); break;
        case 3: fsum_block(x, n, 3, lo, hi, s, Lf, f); break;
        default: fsum_block(x, n, 4, lo, hi, s, Lf, f); break;
        }
        for (unsigned q = 0; q < kb; q++) a[b + q]->f = f[q];
    }
}

/* compress in a register, then a full store (the memory form of vcompressps is slow on some
 * CPUs); out has 16 floats of room past the count */
T512 size_t calq__compact_nonzero_avx512(const float *x, size_t n, float *out)
{
    size_t c = 0, i = 0;
    const __m512 zero = _mm512_setzero_ps();
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_loadu_ps(x + i);
        __mmask16 m = _mm512_cmp_ps_mask(v, zero, _CMP_NEQ_UQ); /* NaN is kept, +-0 dropped */
        _mm512_storeu_ps(out + c, _mm512_maskz_compress_ps(m, v));
        c += (size_t)__builtin_popcount((unsigned)m);
    }
    for (; i < n; i++) {
        out[c] = x[i];
        c += x[i] != 0.0f;
    }
    return c;
}
#endif
