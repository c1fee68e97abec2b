/* Scale legality (process_scale, amct-reference.md §2.1), rounding modes (§0.3) and fake
 * quantization (§2.3). */
#include <stdio.h>

#include "base/error.h"
#include "quant/quant.h"

void calq__scale_rule_text(calq__scale_rule r, float scale, char *buf, size_t n)
{
    switch (r) {
    case CALQ__SCALE_OK: snprintf(buf, n, "scale %g is legal", (double)scale); break;
    case CALQ__SCALE_INF: snprintf(buf, n, "Not support scale is +inf."); break;
    case CALQ__SCALE_NAN: snprintf(buf, n, "Not support scale is nan."); break;
    case CALQ__SCALE_NEGATIVE: snprintf(buf, n, "scale %f is negative.", (double)scale); break;
    case CALQ__SCALE_TOO_LARGE:
        snprintf(buf, n, "Not support scale greater than 1 / FLT_EPSILON. currentScale: %f", (double)scale);
        break;
    }
}

float calq_round(float v, calq_round_mode mode)
{
    return calq__round_mode(v, mode);
}

calq_status calq_process_scale(float *scale, const char *layer, calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, scale);
    float before = *scale;
    calq__scale_rule r = calq__process_scale(scale);
    if (r == CALQ__SCALE_OK) return CALQ_OK;
    char text[256];
    calq__scale_rule_text(r, *scale, text, sizeof text);
    return calq__fail(err, CALQ_ERR_NOT_SUPPORT, layer, "%s (layer \"%s\", scale %.9g)", text, calq__name(layer),
                      (double)before);
}

/* q before clamping, in int64 so that out-of-range values saturate instead of wrapping. */
static int64_t quant_level(float x, float scale, int offset, calq_round_mode mode)
{
    float t = x / scale;
    float r = calq__round_mode(t, mode);
    if (r != r) return 0; /* NaN input: AMCT's int conversion is undefined; calq maps it to 0 */
    if (r > 4.0e9f) return INT64_C(4000000000);
    if (r < -4.0e9f) return -INT64_C(4000000000);
    return (int64_t)r + offset;
}

void calq_quantize(const float *x, size_t n, float scale, int offset, int num_bits, calq_round_mode mode, int8_t *q)
{
    if (!x || !q) return; /* a void function cannot report it: nothing is written (calq.h) */
    if (num_bits < 2 || num_bits > 8) num_bits = 8;
    int64_t lo = -(INT64_C(1) << (num_bits - 1)), hi = (INT64_C(1) << (num_bits - 1)) - 1;
    for (size_t i = 0; i < n; i++) {
        int64_t v = quant_level(x[i], scale, offset, mode);
        q[i] = (int8_t)(v < lo ? lo : v > hi ? hi : v);
    }
}

void calq_fake_quant(const float *x, size_t n, float scale, int offset, int num_bits, calq_round_mode mode, float *y)
{
    if (!x || !y) return; /* as calq_quantize */
    if (num_bits < 2 || num_bits > 16) num_bits = 8;
    int64_t lo = -(INT64_C(1) << (num_bits - 1)), hi = (INT64_C(1) << (num_bits - 1)) - 1;
    for (size_t i = 0; i < n; i++) {
        int64_t v = quant_level(x[i], scale, offset, mode);
        v = v < lo ? lo : v > hi ? hi : v;
        /* (int - int) * float, as AMCT's ClipAndQuant */
        y[i] = (float)(int)(v - offset) * scale;
    }
}
