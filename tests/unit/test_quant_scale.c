/* Rounding modes, process_scale (amct-reference.md §2.1) and fake quant (§2.3). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "op_harness.h"
#include "quant/quant.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t next_u32(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

static int same_bits(float a, float b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

static void test_round(void)
{
    EXPECT(calq_round(2.5f, CALQ_ROUND_HALF_AWAY) == 3.0f);
    EXPECT(calq_round(2.5f, CALQ_ROUND_HALF_EVEN) == 2.0f);
    EXPECT(calq_round(-2.5f, CALQ_ROUND_HALF_AWAY) == -3.0f);
    EXPECT(calq_round(-2.5f, CALQ_ROUND_HALF_EVEN) == -2.0f);
    EXPECT(calq_round(3.5f, CALQ_ROUND_HALF_EVEN) == 4.0f);
    EXPECT(calq_round(0.49999997f, CALQ_ROUND_HALF_AWAY) == 0.0f);
    EXPECT(calq_round(8388607.5f, CALQ_ROUND_HALF_AWAY) == 8388608.0f);
    EXPECT(calq_round(8388607.5f, CALQ_ROUND_HALF_EVEN) == 8388608.0f);
    EXPECT(calq_round(8388606.5f, CALQ_ROUND_HALF_EVEN) == 8388606.0f);
    /* the vectorizable forms equal roundf / rint bit for bit, signed zeros included */
    int bad_away = 0, bad_even = 0;
    for (int i = 0; i < 2000000; i++) {
        uint32_t u = next_u32();
        float f;
        if (i % 3 == 0) { /* halves and near-halves */
            f = (float)((int32_t)(u % 2000001u) - 1000000) * 0.5f;
            if (i % 2) f = nextafterf(f, (u & 1) ? INFINITY : -INFINITY);
        } else {
            memcpy(&f, &u, sizeof f);
        }
        if (isnan(f)) continue;
        if (!same_bits(calq__round_away(f), roundf(f))) bad_away++;
        if (!same_bits(calq__round_even(f), rintf(f))) bad_even++;
    }
    EXPECT(bad_away == 0);
    EXPECT(bad_even == 0);
}

static void test_process_scale(void)
{
    calq_error err = {0};
    float s = 0.0f;
    EXPECT(calq_process_scale(&s, "L", &err) == CALQ_OK && s == 1.0f);
    s = -3.0f;
    EXPECT(calq_process_scale(&s, "L", &err) == CALQ_OK && s == 1.0f);
    s = 1e-8f;
    EXPECT(calq_process_scale(&s, "L", &err) == CALQ_OK && s == 1.0f);
    s = FLT_EPSILON;
    EXPECT(calq_process_scale(&s, "L", &err) == CALQ_OK && s == FLT_EPSILON);
    s = 8388608.0f; /* 1/s == FLT_EPSILON exactly: legal */
    EXPECT(calq_process_scale(&s, "L", &err) == CALQ_OK);
    s = 8388610.0f;
    EXPECT(calq_process_scale(&s, "conv_1", &err) == CALQ_ERR_NOT_SUPPORT);
    EXPECT(strstr(err.message, "Not support scale greater than 1 / FLT_EPSILON. currentScale: 8388610.000000") != NULL);
    EXPECT(strcmp(err.layer, "conv_1") == 0);
    s = INFINITY;
    EXPECT(calq_process_scale(&s, "L", &err) == CALQ_ERR_NOT_SUPPORT);
    EXPECT(strstr(err.message, "Not support scale is +inf.") != NULL);
    s = NAN;
    EXPECT(calq_process_scale(&s, "L", &err) == CALQ_ERR_NOT_SUPPORT);
    EXPECT(strstr(err.message, "Not support scale is nan.") != NULL);
    EXPECT(CALQ_ERR_NOT_SUPPORT == -65519);
}

static void test_fake_quant(void)
{
    const float x[] = {0.0f, 0.5f, 1.5f, -1.5f, 200.0f, -200.0f, 0.25f};
    float y[7];
    int8_t q[7];
    /* scale 1, offset 0: half away rounds .5 outward, half even to the even neighbour */
    calq_quantize(x, 7, 1.0f, 0, 8, CALQ_ROUND_HALF_AWAY, q);
    EXPECT(q[1] == 1 && q[2] == 2 && q[3] == -2 && q[4] == 127 && q[5] == -128);
    calq_quantize(x, 7, 1.0f, 0, 8, CALQ_ROUND_HALF_EVEN, q);
    EXPECT(q[1] == 0 && q[2] == 2 && q[3] == -2);
    /* clamping to [-128, 127] with an offset, then back */
    calq_fake_quant(x, 7, 0.5f, -128, 8, CALQ_ROUND_HALF_AWAY, y);
    EXPECT(y[0] == 0.0f && y[1] == 0.5f && y[4] == 127.5f && y[5] == 0.0f && y[6] == 0.5f);
    calq_quantize(x, 7, 0.5f, -128, 8, CALQ_ROUND_HALF_AWAY, q);
    EXPECT(q[0] == -128 && q[4] == 127 && q[5] == -128);
}

int main(void)
{
    test_round();
    test_process_scale();
    test_fake_quant();
    if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
    return failures ? 1 : 0;
}
