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

#include "quant/ifmr_loss_simd.h"
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

/* The portable kernel (any CPU): the same operations written so that the compiler vectorizes the
 * element errors for the baseline ISA. */
static void loss_c(const float *x, size_t n, uint64_t g0, const calq__ifmr_cand *c, int amct, float Lf,
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

int calq__ifmr_isa_supported(calq__isa isa)
{
    switch (isa) {
    case CALQ__ISA_C: return 1;
#ifdef CALQ__IFMR_X86
    case CALQ__ISA_AVX2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case CALQ__ISA_AVX512: return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
#endif
    default: return 0;
    }
}

calq__isa calq__ifmr_isa_best(void)
{
    if (calq__ifmr_isa_supported(CALQ__ISA_AVX512)) return CALQ__ISA_AVX512;
    if (calq__ifmr_isa_supported(CALQ__ISA_AVX2)) return CALQ__ISA_AVX2;
    return CALQ__ISA_C;
}

const char *calq__isa_name(calq__isa isa)
{
    return isa == CALQ__ISA_AVX512 ? "avx512" : isa == CALQ__ISA_AVX2 ? "avx2" : "c";
}

#ifdef CALQ__IFMR_X86
/* One element into its lane, as the _ref kernel adds it (the unaligned head and the tail). */
static inline void lane_one(float x, uint64_t g, const calq__ifmr_cand *c, calq__ifmr_acc *a)
{
    float e = err_of(x, c->lo, c->hi, c->scale);
    a->lane[g % CALQ__IFMR_LANES] += (double)e * (double)e;
}

static void lanes_simd(calq__isa isa, const float *x, size_t n, uint64_t g0, const calq__ifmr_cand *const *c,
                       unsigned k, calq__ifmr_acc *const *a)
{
    size_t head = (size_t)((CALQ__IFMR_LANES - g0 % CALQ__IFMR_LANES) % CALQ__IFMR_LANES);
    if (head > n) head = n;
    size_t mid = (n - head) / CALQ__IFMR_LANES * CALQ__IFMR_LANES;
    for (unsigned q = 0; q < k; q++)
        for (size_t j = 0; j < head; j++) lane_one(x[j], g0 + j, c[q], a[q]);
    if (mid) {
        if (isa == CALQ__ISA_AVX512)
            calq__ifmr_lanes_avx512(x + head, mid, k, c, a);
        else
            calq__ifmr_lanes_avx2(x + head, mid, k, c, a);
    }
    for (unsigned q = 0; q < k; q++)
        for (size_t j = head + mid; j < n; j++) lane_one(x[j], g0 + j, c[q], a[q]);
}

/* Zeros add nothing. When every candidate's clip range contains 0 and its scale is a finite
 * positive number (always so for IFMR's legal candidates: zero forcing, §3.3), an element
 * x = +-0 has error round(0/s)*s - x = +0, whose square is +0, and a sum that started at +0 and
 * only ever grew is unchanged by adding +0: skipping it changes no bit. ReLU outputs are about
 * half zeros, so this halves the work on most layers. */
static int zeros_neutral(const calq__ifmr_cand *cand, const unsigned *idx, unsigned k)
{
    for (unsigned q = 0; q < k; q++) {
        const calq__ifmr_cand *c = &cand[idx[q]];
        if (!(c->lo <= 0.0f && c->hi >= 0.0f && c->scale > 0.0f && c->scale < INFINITY)) return 0;
    }
    return 1;
}

#define ZBLOCK 4096 /* elements compacted at a time (16 KB: stays in L1 across candidates) */

/* The nonzero elements of x[0..n) (positions from g0) rearranged lane-major: row r holds the
 * r-th nonzero element of every lane, padded with zeros, so a kernel that adds element l of each
 * row to lane l adds each lane's elements in their order. Returns 8 * rows. */
static size_t compact_lanes(const float *x, size_t n, uint64_t g0, float *buf)
{
    size_t cnt[CALQ__IFMR_LANES] = {0};
    unsigned l = (unsigned)(g0 % CALQ__IFMR_LANES);
    for (size_t j = 0; j < n; j++) {
        if (x[j] != 0.0f) buf[cnt[l]++ * CALQ__IFMR_LANES + l] = x[j];
        l = (l + 1) % CALQ__IFMR_LANES;
    }
    size_t rows = 0;
    for (l = 0; l < CALQ__IFMR_LANES; l++) rows = cnt[l] > rows ? cnt[l] : rows;
    for (l = 0; l < CALQ__IFMR_LANES; l++)
        for (size_t r = cnt[l]; r < rows; r++) buf[r * CALQ__IFMR_LANES + l] = 0.0f;
    return rows * CALQ__IFMR_LANES;
}

/* The nonzero elements of x[0..n) in order (the float running sums have no lanes). */
static size_t compact_nonzero(const float *x, size_t n, float *buf)
{
    size_t m = 0;
    for (size_t j = 0; j < n; j++) {
        buf[m] = x[j];
        m += x[j] != 0.0f;
    }
    return m;
}

/* k <= 64 candidates over x[0..n): the lanes kernel CALQ__IFMR_SIMD_GROUP candidates at a time,
 * or the float sums all at once */
static void simd_call(calq__isa isa, const float *x, size_t n, uint64_t g0, int aligned,
                      const calq__ifmr_cand *const *c, unsigned k, int amct, float Lf, calq__ifmr_acc *const *a)
{
    if (amct) {
        if (isa == CALQ__ISA_AVX512)
            calq__ifmr_fsum_avx512(x, n, k, c, Lf, a);
        else
            calq__ifmr_fsum_avx2(x, n, k, c, Lf, a);
        return;
    }
    for (unsigned q0 = 0; q0 < k; q0 += CALQ__IFMR_SIMD_GROUP) {
        unsigned kk = k - q0 < CALQ__IFMR_SIMD_GROUP ? k - q0 : CALQ__IFMR_SIMD_GROUP;
        if (aligned) { /* compacted: lane-major rows from lane 0 */
            if (isa == CALQ__ISA_AVX512)
                calq__ifmr_lanes_avx512(x, n, kk, c + q0, a + q0);
            else
                calq__ifmr_lanes_avx2(x, n, kk, c + q0, a + q0);
        } else {
            lanes_simd(isa, x, n, g0, c + q0, kk, a + q0);
        }
    }
}

static void losses_simd(calq__isa isa, const float *x, size_t n, uint64_t g0, const calq__ifmr_cand *cand,
                        const unsigned *idx, unsigned k, int amct, float Lf, calq__ifmr_acc *acc)
{
    enum { MAXG = 64 };
    const calq__ifmr_cand *c[MAXG];
    calq__ifmr_acc *a[MAXG];
    /* compacting costs about what 4-8 candidates' sums over the zeros would: worth it for more */
    const int skip = k >= 8 && zeros_neutral(cand, idx, k);
    float buf[ZBLOCK + CALQ__IFMR_LANES];
    for (unsigned q0 = 0; q0 < k; q0 += MAXG) {
        unsigned kk = k - q0 < MAXG ? k - q0 : MAXG;
        for (unsigned q = 0; q < kk; q++) {
            c[q] = &cand[idx[q0 + q]];
            a[q] = &acc[idx[q0 + q]];
        }
        if (!skip) {
            simd_call(isa, x, n, g0, 0, c, kk, amct, Lf, a);
            continue;
        }
        for (size_t b = 0; b < n; b += ZBLOCK) {
            size_t nb = n - b < ZBLOCK ? n - b : ZBLOCK;
            size_t m = amct ? compact_nonzero(x + b, nb, buf) : compact_lanes(x + b, nb, g0 + b, buf);
            if (m) simd_call(isa, buf, m, 0, 1, c, kk, amct, Lf, a);
        }
    }
}
#endif

size_t calq__compact_nonzero_ref(const float *x, size_t n, float *out)
{
    size_t c = 0;
    for (size_t j = 0; j < n; j++) {
        out[c] = x[j];
        c += x[j] != 0.0f;
    }
    return c;
}

size_t calq__compact_nonzero(calq__isa isa, const float *x, size_t n, float *out)
{
#ifdef CALQ__IFMR_X86
    if (isa == CALQ__ISA_AVX512) return calq__compact_nonzero_avx512(x, n, out);
#endif
    return calq__compact_nonzero_ref(x, n, out);
}

void calq__ifmr_losses(calq__isa isa, const float *x, size_t n, uint64_t g0, const calq__ifmr_cand *cand,
                       const unsigned *idx, unsigned k, int amct, float Lf, calq__ifmr_acc *acc)
{
#ifdef CALQ__IFMR_X86
    if (isa == CALQ__ISA_AVX2 || isa == CALQ__ISA_AVX512) {
        losses_simd(isa, x, n, g0, cand, idx, k, amct, Lf, acc);
        return;
    }
#endif
    for (unsigned q = 0; q < k; q++) loss_c(x, n, g0, &cand[idx[q]], amct, Lf, &acc[idx[q]]);
}
