/* Vectorized float32 Erf, Exp, Tanh, Sigmoid and Gelu (exact form): glibc's libmvec
 * (elementwise_mvec.h). The reference kernels (elementwise_unary.c) call erff / expf / tanhf one
 * element at a time; these call libmvec's 16-wide (AVX-512) or 8-wide (AVX2) variants, whose
 * results are within 4 ulp of the correctly rounded ones (glibc's manual, "Errors in Math
 * Functions"). A ViT's GELU spent 580 us per 1x196x768 tensor in erff; the 16-wide erff takes a
 * tenth of that. Each element's result depends only on its value (the last partial vector is
 * padded and computed the same way), so the output does not depend on how the tensor is split
 * between threads. */
#include "exec/kernels/elementwise_mvec.h"

#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define MVEC_X86 1
#endif

typedef enum mvec_fn { MV_ERF, MV_EXP, MV_TANH, MV_SIGMOID, MV_GELU } mvec_fn;

#ifdef MVEC_X86
/* ---- AVX-512: libmvec's "e" variants (x86-64 vector function ABI, 16 lanes) ---------------- */
/* per-function target attributes (clang ignores #pragma GCC target) */
#define T512 __attribute__((target("avx512f")))
#define T256 __attribute__((target("avx2,fma")))
T512 __m512 _ZGVeN16v_erff(__m512);
T512 __m512 _ZGVeN16v_expf(__m512);
T512 __m512 _ZGVeN16v_tanhf(__m512);

T512 static inline __m512 f16(mvec_fn f, __m512 x)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    switch (f) {
    case MV_ERF: return _ZGVeN16v_erff(x);
    case MV_EXP: return _ZGVeN16v_expf(x);
    case MV_TANH: return _ZGVeN16v_tanhf(x);
    case MV_SIGMOID: /* 1 / (1 + exp(-x)), as the reference: exp(-x) = inf gives 0 */
        return _mm512_div_ps(one, _mm512_add_ps(one, _ZGVeN16v_expf(_mm512_sub_ps(_mm512_setzero_ps(), x))));
    case MV_GELU: /* 0.5 x (1 + erf(x / sqrt 2)), the reference's order of operations */
    default: {
        __m512 e = _ZGVeN16v_erff(_mm512_mul_ps(x, _mm512_set1_ps(0.70710678118654752440f)));
        return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), x), _mm512_add_ps(one, e));
    }
    }
}

T512 static void rows16(mvec_fn f, float *y, const float *x, int64_t sx, int64_t n)
{
    if (sx == 0) { /* a broadcast scalar: one value */
        float v[16], r[16];
        for (int i = 0; i < 16; i++) v[i] = x[0];
        _mm512_storeu_ps(r, f16(f, _mm512_loadu_ps(v)));
        for (int64_t i = 0; i < n; i++) y[i] = r[0];
        return;
    }
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, f16(f, _mm512_loadu_ps(x + i)));
    if (i < n) {
        float v[16] = {0}, r[16];
        memcpy(v, x + i, sizeof(float) * (size_t)(n - i));
        _mm512_storeu_ps(r, f16(f, _mm512_loadu_ps(v)));
        memcpy(y + i, r, sizeof(float) * (size_t)(n - i));
    }
}

/* GELU as exporters write it out (elementwise_mvec.h, calq__ew_mvec_gelu_parts_row): every step
 * an IEEE float32 operation, as the separate layers compute it. */
T512 static inline __m512 gelu_parts16(const ew_par *p, __m512 x)
{
    const __m512 c1 = _mm512_set1_ps((float)p->a), c2 = _mm512_set1_ps((float)p->b), c3 = _mm512_set1_ps((float)p->g);
    __m512 h = (p->form & GELU_PARTS_MUL_FIRST) ? _mm512_mul_ps(x, c1) : _mm512_div_ps(x, c1);
    __m512 a = _mm512_add_ps(_ZGVeN16v_erff(h), c2);
    return (p->form & GELU_PARTS_SCALE_FIRST) ? _mm512_mul_ps(_mm512_mul_ps(x, c3), a)
                                              : _mm512_mul_ps(_mm512_mul_ps(x, a), c3);
}

T512 static void gelu_parts_16(const ew_par *p, void *out, const void *const *in, const int64_t *st, int64_t n)
{
    float *y = out;
    const float *x = in[0];
    int64_t i = 0;
    if (st[0] == 1)
        for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, gelu_parts16(p, _mm512_loadu_ps(x + i)));
    for (; i < n; i += 16) { /* the tail (or a broadcast scalar), padded */
        float v[16] = {0}, r[16];
        int64_t m = n - i < 16 ? n - i : 16;
        for (int64_t k = 0; k < m; k++) v[k] = x[(i + k) * st[0]];
        _mm512_storeu_ps(r, gelu_parts16(p, _mm512_loadu_ps(v)));
        memcpy(y + i, r, sizeof(float) * (size_t)m);
    }
}

/* ---- AVX2: the "d" variants (8 lanes) ------------------------------------------------------- */
T256 __m256 _ZGVdN8v_erff(__m256);
T256 __m256 _ZGVdN8v_expf(__m256);
T256 __m256 _ZGVdN8v_tanhf(__m256);

T256 static inline __m256 f8(mvec_fn f, __m256 x)
{
    const __m256 one = _mm256_set1_ps(1.0f);
    switch (f) {
    case MV_ERF: return _ZGVdN8v_erff(x);
    case MV_EXP: return _ZGVdN8v_expf(x);
    case MV_TANH: return _ZGVdN8v_tanhf(x);
    case MV_SIGMOID:
        return _mm256_div_ps(one, _mm256_add_ps(one, _ZGVdN8v_expf(_mm256_sub_ps(_mm256_setzero_ps(), x))));
    case MV_GELU:
    default: {
        __m256 e = _ZGVdN8v_erff(_mm256_mul_ps(x, _mm256_set1_ps(0.70710678118654752440f)));
        return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), x), _mm256_add_ps(one, e));
    }
    }
}

T256 static void rows8(mvec_fn f, float *y, const float *x, int64_t sx, int64_t n)
{
    if (sx == 0) {
        float v[8], r[8];
        for (int i = 0; i < 8; i++) v[i] = x[0];
        _mm256_storeu_ps(r, f8(f, _mm256_loadu_ps(v)));
        for (int64_t i = 0; i < n; i++) y[i] = r[0];
        return;
    }
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, f8(f, _mm256_loadu_ps(x + i)));
    if (i < n) {
        float v[8] = {0}, r[8];
        memcpy(v, x + i, sizeof(float) * (size_t)(n - i));
        _mm256_storeu_ps(r, f8(f, _mm256_loadu_ps(v)));
        memcpy(y + i, r, sizeof(float) * (size_t)(n - i));
    }
}

T256 static inline __m256 gelu_parts8(const ew_par *p, __m256 x)
{
    const __m256 c1 = _mm256_set1_ps((float)p->a), c2 = _mm256_set1_ps((float)p->b), c3 = _mm256_set1_ps((float)p->g);
    __m256 h = (p->form & GELU_PARTS_MUL_FIRST) ? _mm256_mul_ps(x, c1) : _mm256_div_ps(x, c1);
    __m256 a = _mm256_add_ps(_ZGVdN8v_erff(h), c2);
    return (p->form & GELU_PARTS_SCALE_FIRST) ? _mm256_mul_ps(_mm256_mul_ps(x, c3), a)
                                              : _mm256_mul_ps(_mm256_mul_ps(x, a), c3);
}

T256 static void gelu_parts_8(const ew_par *p, void *out, const void *const *in, const int64_t *st, int64_t n)
{
    float *y = out;
    const float *x = in[0];
    int64_t i = 0;
    if (st[0] == 1)
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, gelu_parts8(p, _mm256_loadu_ps(x + i)));
    for (; i < n; i += 8) {
        float v[8] = {0}, r[8];
        int64_t m = n - i < 8 ? n - i : 8;
        for (int64_t k = 0; k < m; k++) v[k] = x[(i + k) * st[0]];
        _mm256_storeu_ps(r, gelu_parts8(p, _mm256_loadu_ps(v)));
        memcpy(y + i, r, sizeof(float) * (size_t)m);
    }
}

/* One row function per (width, function): ew_row has no room for the function's id. */
#define MVEC_ROWS(NAME, FN)                                                                                            \
    static void NAME##_16(const ew_par *p, void *out, const void *const *in, const int64_t *st, int64_t n)             \
    {                                                                                                                  \
        (void)p;                                                                                                       \
        rows16(FN, out, in[0], st[0], n);                                                                              \
    }                                                                                                                  \
    static void NAME##_8(const ew_par *p, void *out, const void *const *in, const int64_t *st, int64_t n)              \
    {                                                                                                                  \
        (void)p;                                                                                                       \
        rows8(FN, out, in[0], st[0], n);                                                                               \
    }
MVEC_ROWS(erf, MV_ERF)
MVEC_ROWS(exp, MV_EXP)
MVEC_ROWS(tanh, MV_TANH)
MVEC_ROWS(sigmoid, MV_SIGMOID)
MVEC_ROWS(gelu, MV_GELU)

static const struct {
    const char *op;
    ew_row r16, r8;
} mvec_ops[] = {
    {"Erf", erf_16, erf_8},    {"Exp", exp_16, exp_8}, {"Tanh", tanh_16, tanh_8}, {"Sigmoid", sigmoid_16, sigmoid_8},
    {"Gelu", gelu_16, gelu_8},
};
#endif

ew_row calq__ew_mvec_gelu_parts_row(void)
{
#ifdef MVEC_X86
    if (__builtin_cpu_supports("avx512f")) return gelu_parts_16;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return gelu_parts_8;
#endif
    return NULL;
}

ew_row calq__ew_mvec_row(const char *op_type)
{
#ifdef MVEC_X86
    int w = __builtin_cpu_supports("avx512f")                                 ? 16
            : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 8
                                                                              : 0;
    if (!w) return NULL;
    for (size_t i = 0; i < sizeof mvec_ops / sizeof mvec_ops[0]; i++)
        if (strcmp(mvec_ops[i].op, op_type) == 0) return w == 16 ? mvec_ops[i].r16 : mvec_ops[i].r8;
#else
    (void)op_type;
#endif
    return NULL;
}
