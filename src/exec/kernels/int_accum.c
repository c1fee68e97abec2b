#include "exec/kernels/int_accum.h"

#include <stdlib.h>

#include "base/tensor.h"

/* Below this many elements the OpenMP fork costs more than the conversion. */
#define CENTER_PAR_MIN 65536

int16_t *calq__int_centered(const calq_tensor *t, int64_t zp0, const calq_tensor *zp, int64_t inner)
{
    if (t->dtype != CALQ_DTYPE_INT8 && t->dtype != CALQ_DTYPE_UINT8) return NULL;
    const int64_t n = calq_tensor_numel(t), nzp = zp ? calq_tensor_numel(zp) : 1;
    if (n < 0 || nzp < 1 || inner < 1) return NULL;
    int16_t *out = malloc(sizeof(int16_t) * (size_t)(n + 1));
    if (!out) return NULL;
    const bool s8 = t->dtype == CALQ_DTYPE_INT8;
    const int8_t *p8 = t->data;
    const uint8_t *u8 = t->data;
#pragma omp parallel for schedule(static) if (n >= CENTER_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        const int64_t z = zp ? calq__tensor_get_i64(zp, nzp == 1 ? 0 : (i / inner) % nzp) : zp0;
        out[i] = (int16_t)((s8 ? (int64_t)p8[i] : (int64_t)u8[i]) - z);
    }
    return out;
}

void calq__int_dot_row(const int16_t *a, int64_t a_cs, const int16_t *b, int64_t b_rs, int64_t b_cs, int64_t K,
                       int64_t N, int64_t *acc)
{
    if (b_cs == 1) {
        for (int64_t n = 0; n < N; n++) acc[n] = 0;
        for (int64_t k = 0; k < K; k++) {
            const int32_t av = a[k * a_cs];
            if (av == 0) continue; /* adds nothing: the sums stay exact */
            const int16_t *br = b + k * b_rs;
            for (int64_t n = 0; n < N; n++) acc[n] += av * br[n];
        }
        return;
    }
    for (int64_t n = 0; n < N; n++) {
        const int16_t *bc = b + n * b_cs;
        int64_t s = 0;
        for (int64_t k = 0; k < K; k++) s += (int32_t)a[k * a_cs] * bc[k * b_rs];
        acc[n] = s;
    }
}

int64_t calq__int_div_round_even(int64_t s, int64_t d)
{
    int64_t q = s / d, r = s % d;
    if (r < 0) { /* floor division: 0 <= r < d */
        q--;
        r += d;
    }
    if (2 * r > d || (2 * r == d && (q & 1))) q++;
    return q;
}

void calq__int_overflow_note(calq__i32_overflow *ov, int64_t idx, int64_t v)
{
#pragma omp critical(calq_int_overflow)
    if (ov->at < 0 || idx < ov->at) {
        ov->at = idx;
        ov->sum = v;
    }
}
