/* The logistic function and SiLU / swish over float32 rows (logistic.h). */
#include "exec/kernels/logistic.h"

#include <math.h>

/* exp(t) = 2^n exp(r), n = rint(t / ln 2), r = t - n ln 2 with ln 2 split in two so that n * LN2_HI
 * is exact; exp(r) = 1 + r + r^2 P(r) on |r| <= ln2 / 2 (Cephes' expf coefficients, S. Moshier,
 * "Methods and Programs for Mathematical Functions", 1989). */
#define T_MIN  (-87.0f)
#define T_MAX  89.0f
#define LOG2E  1.44269504088896341f
#define LN2_HI 0.693359375f
#define LN2_LO (-2.12194440e-4f)
#define P0     1.9875691500e-4f
#define P1     1.3981999507e-3f
#define P2     8.3334519073e-3f
#define P3     4.1665795894e-2f
#define P4     1.6666665459e-1f
#define P5     5.0000001201e-1f

/* One element, in the vector form's order: the clamps as vmaxps / vminps with t second (NaN
 * passes through), every a * b + c that the vector form fuses as fmaf. */
static inline float logistic1(float x, bool swish, float neg_alpha)
{
    float t = swish ? x * neg_alpha : 0.0f - x; /* vsubps: a NaN keeps its sign */
    t = T_MIN > t ? T_MIN : t;
    t = T_MAX < t ? T_MAX : t;
    const float n = rintf(t * LOG2E);
    float r = fmaf(-n, LN2_HI, t);
    r = fmaf(-n, LN2_LO, r);
    float p = P0;
    p = fmaf(p, r, P1);
    p = fmaf(p, r, P2);
    p = fmaf(p, r, P3);
    p = fmaf(p, r, P4);
    p = fmaf(p, r, P5);
    p = fmaf(p, r * r, r + 1.0f);
    const float e = isnan(n) ? n : ldexpf(p, (int)n);
    const float d = e + 1.0f;
    return (swish ? x : 1.0f) / d;
}

void calq__logistic_rows_ref(float *y, const float *x, size_t n, bool swish, float alpha)
{
    for (size_t i = 0; i < n; i++) y[i] = logistic1(x[i], swish, -alpha);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define T512 __attribute__((target("avx512f")))

T512 static inline __m512 logistic16(__m512 x, bool swish, __m512 neg_alpha)
{
    __m512 t = swish ? _mm512_mul_ps(x, neg_alpha) : _mm512_sub_ps(_mm512_setzero_ps(), x);
    t = _mm512_max_ps(_mm512_set1_ps(T_MIN), t);
    t = _mm512_min_ps(_mm512_set1_ps(T_MAX), t);
    const __m512 n =
        _mm512_roundscale_ps(_mm512_mul_ps(t, _mm512_set1_ps(LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_HI), t);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_LO), r);
    __m512 p = _mm512_set1_ps(P0);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(P1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(P2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(P3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(P4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(P5));
    const __m512 one = _mm512_set1_ps(1.0f);
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, one));
    const __m512 d = _mm512_add_ps(_mm512_scalef_ps(p, n), one);
    return _mm512_div_ps(swish ? x : one, d);
}

T512 static void rows_avx512(float *y, const float *x, size_t n, bool swish, float alpha)
{
    const __m512 na = _mm512_set1_ps(-alpha);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, logistic16(_mm512_loadu_ps(x + i), swish, na));
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);
        _mm512_mask_storeu_ps(y + i, m, logistic16(_mm512_maskz_loadu_ps(m, x + i), swish, na));
    }
}

bool calq__logistic_fast(void)
{
    return __builtin_cpu_supports("avx512f");
}

void calq__logistic_rows(float *y, const float *x, size_t n, bool swish, float alpha)
{
    if (calq__logistic_fast())
        rows_avx512(y, x, n, swish, alpha);
    else
        calq__logistic_rows_ref(y, x, n, swish, alpha);
}
#else
bool calq__logistic_fast(void)
{
    return false;
}

void calq__logistic_rows(float *y, const float *x, size_t n, bool swish, float alpha)
{
    calq__logistic_rows_ref(y, x, n, swish, alpha);
}
#endif
