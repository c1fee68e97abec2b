/* shift_bit search (amct-reference.md §6.4, AMCT's SearchN): for each channel, the shift N in
 * [1, 16] whose int16 requantization floor(s32 / 2^N) (clamped, scaled back) loses least, with
 * s32 = round(y / deq_scale). Float32 as AMCT: per-element errors fl(d*d), summed per batch in
 * element order, then added to the running per-channel sums. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "quant/quant.h"

#define SHIFT_MAX 16

struct calq_shift_bit {
    int C, broadcast;
    float *deq;
    float *err; /* [C or 1][SHIFT_MAX] */
};

calq_status calq_shift_bit_create(int n_channels, const float *deq_scale, int broadcast, calq_shift_bit **out,
                                  calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, out);
    *out = NULL;
    CALQ_REQUIRE(err, deq_scale);
    if (n_channels < 1)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL, "shift_bit search: %d channels", n_channels);
    calq_shift_bit *s = calloc(1, sizeof *s);
    if (s) {
        s->deq = malloc((size_t)n_channels * sizeof *s->deq);
        s->err = calloc((size_t)n_channels * SHIFT_MAX, sizeof *s->err);
    }
    if (!s || !s->deq || !s->err) {
        calq_shift_bit_free(s);
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "shift_bit search: out of memory");
    }
    s->C = n_channels;
    s->broadcast = broadcast;
    memcpy(s->deq, deq_scale, (size_t)n_channels * sizeof *s->deq);
    *out = s;
    return CALQ_OK;
}

void calq_shift_bit_free(calq_shift_bit *s)
{
    if (!s) return;
    free(s->deq);
    free(s->err);
    free(s);
}

/* The error of one s32 value for shift 2^N (EvaluateErrorCpu) */
static float shift_error(float s32, float shift)
{
    float q = s32 / shift;
    float s16 = floorf(q);
    if (s16 < -32768.0f)
        s16 = -32768.0f;
    else if (s16 > 32767.0f)
        s16 = 32767.0f;
    float back = s16 * shift;
    float d = back - s32;
    return d * d;
}

calq_status calq_shift_bit_feed(calq_shift_bit *s, const float *y, int64_t outer, int64_t inner, calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, s);
    if (outer < 0 || inner < 0)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL,
                          "calq_shift_bit_feed: outer is %" PRId64 ", inner %" PRId64 "; neither can be negative",
                          outer, inner);
    if (outer > 0 && inner > 0) CALQ_REQUIRE(err, y);
    float batch[SHIFT_MAX];
    if (s->broadcast) memset(batch, 0, sizeof batch);
    for (int c = 0; c < s->C; c++) {
        if (!s->broadcast) memset(batch, 0, sizeof batch);
        for (int64_t o = 0; o < outer; o++) {
            const float *row = y + (o * s->C + c) * inner;
            for (int64_t i = 0; i < inner; i++) {
                float t = row[i] / s->deq[c];
                float s32 = roundf(t);
                for (int n = 1; n <= SHIFT_MAX; n++) batch[n - 1] += shift_error(s32, (float)(1 << n));
            }
        }
        if (!s->broadcast)
            for (int n = 0; n < SHIFT_MAX; n++) s->err[c * SHIFT_MAX + n] += batch[n];
    }
    if (s->broadcast)
        for (int n = 0; n < SHIFT_MAX; n++) s->err[n] += batch[n];
    return CALQ_OK;
}

calq_status calq_shift_bit_result(const calq_shift_bit *s, int *shift_bit, calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, s);
    CALQ_REQUIRE(err, shift_bit);
    for (int c = 0; c < s->C; c++) {
        const float *e = s->err + (s->broadcast ? 0 : c * SHIFT_MAX);
        int best = 0;
        for (int n = 1; n < SHIFT_MAX; n++)
            if (e[n] < e[best]) best = n; /* the first minimum */
        shift_bit[c] = best + 1;
    }
    return CALQ_OK;
}
