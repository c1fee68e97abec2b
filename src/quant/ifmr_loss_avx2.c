/* IFMR's candidate losses with AVX2 (amct-reference.md §3.5/§3.6; the contract is in
 * ifmr_loss_simd.h, the exactness argument in ifmr_loss_avx512.c, which this file mirrors with
 * 8-float vectors). Only these functions carry the target; ifmr_loss.c calls them only when the
 * CPU has AVX2 and FMA. */
#include "quant/ifmr_loss_simd.h"

#ifdef CALQ__IFMR_X86
#include <immintrin.h>

#define T256      __attribute__((target("avx2,fma")))
#define INLINE256 static inline __attribute__((always_inline, target("avx2,fma")))

INLINE256 __m256 round_away8(__m256 t) /* as round_away16 in ifmr_loss_avx512.c */
{
    __m256 i = _mm256_round_ps(t, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __m256 f = _mm256_sub_ps(t, i);
    const __m256 one = _mm256_set1_ps(1.0f);
    __m256 up = _mm256_cmp_ps(f, _mm256_set1_ps(0.5f), _CMP_GE_OQ);
    __m256 down = _mm256_cmp_ps(f, _mm256_set1_ps(-0.5f), _CMP_LE_OQ);
    __m256 r = _mm256_blendv_ps(i, _mm256_add_ps(i, one), up);
    return _mm256_blendv_ps(r, _mm256_sub_ps(i, one), down);
}

INLINE256 __m256 err8(__m256 x, __m256 lo, __m256 hi, __m256 s)
{
    __m256 v = _mm256_max_ps(lo, x);
    v = _mm256_min_ps(hi, v);
    __m256 t = _mm256_div_ps(v, s);
    __m256 r = round_away8(t);
    __m256 q = _mm256_mul_ps(r, s);
    return _mm256_sub_ps(q, x);
}

INLINE256 __m256d sq_add(__m256d acc, __m128 d) /* exact as one FMA: see ifmr_loss_avx512.c */
{
    __m256d e = _mm256_cvtps_pd(d);
    return _mm256_fmadd_pd(e, e, acc);
}

INLINE256 void lanes_k(const float *x, size_t m, unsigned K, const calq__ifmr_cand *const *c, calq__ifmr_acc *const *a)
{
    __m256 lo[CALQ__IFMR_SIMD_GROUP], hi[CALQ__IFMR_SIMD_GROUP], s[CALQ__IFMR_SIMD_GROUP];
    __m256d a03[CALQ__IFMR_SIMD_GROUP], a47[CALQ__IFMR_SIMD_GROUP]; /* lanes 0-3 and 4-7 */
    for (unsigned q = 0; q < K; q++) {
        lo[q] = _mm256_set1_ps(c[q]->lo);
        hi[q] = _mm256_set1_ps(c[q]->hi);
        s[q] = _mm256_set1_ps(c[q]->scale);
        a03[q] = _mm256_loadu_pd(a[q]->lane);
        a47[q] = _mm256_loadu_pd(a[q]->lane + 4);
    }
    for (size_t i = 0; i < m; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        for (unsigned q = 0; q < K; q++) {
            __m256 d = err8(v, lo[q], hi[q], s[q]);
            a03[q] = sq_add(a03[q], _mm256_castps256_ps128(d));
            a47[q] = sq_add(a47[q], _mm256_extractf128_ps(d, 1));
        }
    }
    for (unsigned q = 0; q < K; q++) {
        _mm256_storeu_pd(a[q]->lane, a03[q]);
        _mm256_storeu_pd(a[q]->lane + 4, a47[q]);
    }
}

T256 void calq__ifmr_lanes_avx2(const float *x, size_t m, unsigned k, const calq__ifmr_cand *const *c,
                                calq__ifmr_acc *const *a)
{
    switch (k) {
    case 1: lanes_k(x, m, 1, c, a); break;
    case 2: lanes_k(x, m, 2, c, a); break;
    case 3: lanes_k(x, m, 3, c, a); break;
    default: lanes_k(x, m, 4, c, a); break;
    }
}

#define FSUM_VECS  8 /* 64 candidates per walk over x */
#define FSUM_BLOCK (8 * FSUM_VECS)

INLINE256 void fsum_block(const float *x, size_t n, unsigned nv, const float *plo, const float *phi, const float *ps,
                          float Lf, float *pf)
{
    __m256 lo[FSUM_VECS], hi[FSUM_VECS], s[FSUM_VECS], f[FSUM_VECS];
    for (unsigned v = 0; v < nv; v++) {
        lo[v] = _mm256_loadu_ps(plo + 8 * v);
        hi[v] = _mm256_loadu_ps(phi + 8 * v);
        s[v] = _mm256_loadu_ps(ps + 8 * v);
        f[v] = _mm256_loadu_ps(pf + 8 * v);
    }
    const __m256 L = _mm256_set1_ps(Lf);
    for (size_t j = 0; j < n; j++) {
        __m256 xj = _mm256_set1_ps(x[j]);
        for (unsigned v = 0; v < nv; v++) {
            __m256 d = err8(xj, lo[v], hi[v], s[v]);
            __m256 sq = _mm256_mul_ps(d, d);
            __m256 e = _mm256_div_ps(sq, L);
            f[v] = _mm256_add_ps(f[v], e);
        }
    }
    for (unsigned v = 0; v < nv; v++) _mm256_storeu_ps(pf + 8 * v, f[v]);
}

T256 void calq__ifmr_fsum_avx2(const float *x, size_t n, unsigned k, const calq__ifmr_cand *const *c, float Lf,
                               calq__ifmr_acc *const *a)
{
    for (unsigned b = 0; b < k; b += FSUM_BLOCK) {
        unsigned kb = k - b < FSUM_BLOCK ? k - b : FSUM_BLOCK;
        float lo[FSUM_BLOCK] = {0}, hi[FSUM_BLOCK] = {0}, s[FSUM_BLOCK], f[FSUM_BLOCK] = {0};
        for (unsigned q = 0; q < FSUM_BLOCK; q++) s[q] = 1.0f;
        for (unsigned q = 0; q < kb; q++) {
            lo[q] = c[b + q]->lo;
            hi[q] = c[b + q]->hi;
            s[q] = c[b + q]->scale;
            f[q] = a[b + q]->f;
        }
        unsigned nv = (kb + 7) / 8;
        switch (nv) {
        case 1: fsum_block(x, n, 1, lo, hi, s, Lf, f); break;
        case 2: fsum_block(x, n, 2, lo, hi, s, Lf, f); break;
        case 3: fsum_block(x, n, 3, lo, hi, s, Lf, f); break;
        case 4: fsum_block(x, n, 4, lo, hi, s, Lf, f); break;
        case 5: fsum_block(x, n, 5, lo, hi, s, Lf, f); break;
        case 6: fsum_block(x, n, 6, lo, hi, s, Lf, f); break;
        case 7: fsum_block(x, n, 7, lo, hi, s, Lf, f); break;
        default: fsum_block(x, n, 8, lo, hi, s, Lf, f); break;
        }
        for (unsigned q = 0; q < kb; q++) a[b + q]->f = f[q];
    }
}
#endif
