/* Packing the cache's tensors without their +0.0 elements (act_pack.h). */
#include <string.h>

#include "calib/act_pack.h"

/* the element's bits, compared as an integer: only +0.0 is all zeros */
static inline int kept(const float *x)
{
    uint32_t u;
    memcpy(&u, x, sizeof u);
    return u != 0;
}

size_t calq__act_pack_count_ref(const float *x, size_t n)
{
    size_t c = 0;
    for (size_t j = 0; j < n; j++) c += (size_t)kept(&x[j]);
    return c;
}

size_t calq__act_pack_ref(const float *x, size_t n, uint8_t *mask, float *vals)
{
    size_t c = 0;
    memset(mask, 0, calq__pack_mask_bytes(n));
    for (size_t j = 0; j < n; j++) {
        if (!kept(&x[j])) continue;
        mask[j / 8] |= (uint8_t)(1u << (j % 8));
        vals[c++] = x[j];
    }
    return c;
}

size_t calq__act_unpack_ref(const uint8_t *mask, const float *vals, size_t n, float *out)
{
    size_t c = 0;
    for (size_t j = 0; j < n; j++) {
        if (mask[j / 8] >> (j % 8) & 1u)
            out[j] = vals[c++];
        else
            out[j] = 0.0f;
    }
    return c;
}

#if defined(__x86_64__)
#include <immintrin.h>

#define T512 __attribute__((target("avx512f")))

/* 16 elements at a time: the mask of a vector is the test of its bits against themselves */
T512 static size_t count_avx512(const float *x, size_t n)
{
    size_t c = 0, j = 0;
    for (; j + 16 <= n; j += 16) {
        __m512i v = _mm512_loadu_si512((const void *)(x + j));
        c += (size_t)__builtin_popcount((unsigned)_mm512_test_epi32_mask(v, v));
    }
    return c + calq__act_pack_count_ref(x + j, n - j);
}

/* compress in a register and a masked store of just the kept elements (the memory form of
 * vcompressps is microcoded and slow on some CPUs; a full store would write past the chunk,
 * where another thread packs the next one) */
T512 static size_t pack_avx512(const float *x, size_t n, uint8_t *mask, float *vals)
{
    size_t c = 0, j = 0;
    for (; j + 16 <= n; j += 16) {
        __m512i v = _mm512_loadu_si512((const void *)(x + j));
        __mmask16 m = _mm512_test_epi32_mask(v, v);
        unsigned k = (unsigned)__builtin_popcount((unsigned)m);
        uint16_t bits = (uint16_t)m;
        memcpy(mask + j / 8, &bits, sizeof bits);
        _mm512_mask_storeu_epi32(vals + c, (__mmask16)((1u << k) - 1u), _mm512_maskz_compress_epi32(m, v));
        c += k;
    }
    return c + calq__act_pack_ref(x + j, n - j, mask + j / 8, vals + c);
}

T512 static size_t unpack_avx512(const uint8_t *mask, const float *vals, size_t n, float *out)
{
    size_t c = 0, j = 0;
    for (; j + 16 <= n; j += 16) {
        uint16_t bits;
        memcpy(&bits, mask + j / 8, sizeof bits);
        __m512i v = _mm512_loadu_si512((const void *)(vals + c)); /* up to 15 past the last: the slack */
        _mm512_storeu_si512((void *)(out + j), _mm512_maskz_expand_epi32((__mmask16)bits, v));
        c += (size_t)__builtin_popcount(bits);
    }
    return c + calq__act_unpack_ref(mask + j / 8, vals + c, n - j, out + j);
}

static int have_avx512(void)
{
    return __builtin_cpu_supports("avx512f");
}
#endif

size_t calq__act_pack_count(const float *x, size_t n)
{
#if defined(__x86_64__)
    if (have_avx512()) return count_avx512(x, n);
#endif
    return calq__act_pack_count_ref(x, n);
}

size_t calq__act_pack(const float *x, size_t n, uint8_t *mask, float *vals)
{
#if defined(__x86_64__)
    if (have_avx512()) return pack_avx512(x, n, mask, vals);
#endif
    return calq__act_pack_ref(x, n, mask, vals);
}

size_t calq__act_unpack(const uint8_t *mask, const float *vals, size_t n, float *out)
{
#if defined(__x86_64__)
    if (have_avx512()) return unpack_avx512(mask, vals, n, out);
#endif
    return calq__act_unpack_ref(mask, vals, n, out);
}
