/* Bias to int32, deq_scale and its uint64 packing (amct-reference.md §6.2, §6.3, §8.4). */
#include <inttypes.h>
#include <string.h>

#include "base/error.h"
#include "quant/quant.h"

void calq_deq_scale(float scale_d, const float *scale_w, int64_t n_scale_w, int64_t n, float *deq)
{
    /* a void function cannot report a bad argument: nothing is written (calq.h). n_scale_w other
     * than 1 or n would read past scale_w. */
    if (!scale_w || !deq || (n_scale_w != 1 && n_scale_w != n)) return;
    /* np.multiply(scale_w, scale_d) on float32 arrays */
    for (int64_t c = 0; c < n; c++) deq[c] = scale_d * scale_w[n_scale_w == 1 ? 0 : c];
}

calq_status calq_quant_bias(const float *bias, int64_t n, float scale_d, const float *scale_w, int64_t n_scale_w,
                            const char *layer, int32_t *bias_q, calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE_ARRAY(err, bias, n);
    CALQ_REQUIRE_ARRAY(err, scale_w, n_scale_w);
    CALQ_REQUIRE_ARRAY(err, bias_q, n);
    const char *name = calq__name(layer);
    if (n_scale_w != 1 && n_scale_w != n)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, layer,
                          "bias quantization of layer \"%s\": %" PRId64 " bias values but %" PRId64
                          " weight scales (expected 1 or one per channel)",
                          name, n, n_scale_w);
    for (int64_t c = 0; c < n; c++) {
        float sw = scale_w[n_scale_w == 1 ? 0 : c];
        float deq = scale_d * sw;
        float t = bias[c] / deq;       /* np.true_divide on float32 */
        float r = calq__round_even(t); /* np.round: ties to even */
        if (!(r >= -2147483648.0 && r <= 2147483647.0))
            return calq__fail(err, CALQ_ERR_DATA, layer,
                              "Quantized bias %.9g of layer \"%s\" exceed int32 range:[-2147483648, 2147483647], "
                              "please add it to skip layer. Do bias quantize failed. (channel %" PRId64
                              ": bias %.9g, deq_scale %.9g = scale_d %.9g * scale_w %.9g)",
                              (double)r, name, c, (double)bias[c], (double)deq, (double)scale_d, (double)sw);
        bias_q[c] = (int32_t)r;
    }
    return CALQ_OK;
}

uint64_t calq_deq_scale_pack(float deq_scale, unsigned shift_n, int offset_w)
{
    uint32_t bits;
    memcpy(&bits, &deq_scale, sizeof bits);
    uint64_t hi = ((uint64_t)(uint8_t)(int8_t)offset_w << 8) | (uint64_t)(shift_n & 0xFFu);
    return (hi << 32) | bits;
}

void calq_deq_scale_unpack(uint64_t v, float *deq_scale, unsigned *shift_n, int *offset_w)
{
    uint32_t bits = (uint32_t)(v & 0xFFFFFFFFu);
    if (deq_scale) memcpy(deq_scale, &bits, sizeof bits);
    if (shift_n) *shift_n = (unsigned)((v >> 32) & 0xFFu);
    if (offset_w) *offset_w = (int)(int8_t)(uint8_t)((v >> 40) & 0xFFu);
}

float calq_deq_scale_s19(float deq_scale)
{
    uint32_t bits;
    memcpy(&bits, &deq_scale, sizeof bits);
    bits &= 0xFFFFE000u; /* sign, exponent and the top 10 mantissa bits */
    float out;
    memcpy(&out, &bits, sizeof out);
    return out;
}
