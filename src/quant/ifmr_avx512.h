/* What the AVX-512 IFMR kernels share (ifmr_loss_avx512.c, ifmr_bound_avx512.c): their target
 * attributes and the quantizer's rounding on 16 floats. Include only where CALQ__IFMR_X86 is
 * defined (ifmr_loss_simd.h). */
#ifndef CALQ_QUANT_IFMR_AVX512_H
#define CALQ_QUANT_IFMR_AVX512_H

#include <immintrin.h>

#define T512      __attribute__((target("avx512f,avx512dq")))
#define INLINE512 static inline __attribute__((always_inline, target("avx512f,avx512dq")))

/* round half away from zero, as the scalar quantizer rounds (docs/numerics.md): i = trunc(t);
 * f = t - i is exact (|f| < 1); one step away from zero when |f| >= 0.5 */
INLINE512 __m512 calq__ifmr_round_away16(__m512 t)
{
    __m512 i = _mm512_roundscale_ps(t, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __m512 f = _mm512_sub_ps(t, i);
    const __m512 one = _mm512_set1_ps(1.0f);
    __mmask16 up = _mm512_cmp_ps_mask(f, _mm512_set1_ps(0.5f), _CMP_GE_OQ);
    __mmask16 down = _mm512_cmp_ps_mask(f, _mm512_set1_ps(-0.5f), _CMP_LE_OQ);
    __m512 r = _mm512_mask_add_ps(i, up, i, one);
    return _mm512_mask_sub_ps(r, down, r, one);
}

#endif
