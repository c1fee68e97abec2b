/* ARQ weights (amct-reference.md §6.1, §8.2), bias to int32 and deq_scale (§6.2, §8.4), the
 * uint64 packing (§6.3) and the shift_bit search (§6.4). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "op_harness.h"

static calq_tensor tensor(float *data, int ndim, const int64_t *dims)
{
    calq_tensor t = {0};
    t.dtype = CALQ_DTYPE_FLOAT32;
    t.ndim = ndim;
    for (int i = 0; i < ndim; i++) t.dims[i] = dims[i];
    t.data = data;
    return t;
}

static void test_zeros(void)
{
    float w[4 * 3 * 3 * 3] = {0};
    const int64_t dims[] = {4, 3, 3, 3};
    calq_tensor t = tensor(w, 4, dims);
    calq_arq_opts o;
    calq_arq_opts_init(&o);
    float s[4];
    int off[4];
    int8_t q[108];
    calq_error e = {0};
    EXPECT(calq_arq_num_scales(&t, CALQ_WEIGHTS_CONV, 1, &o) == 4);
    EXPECT(calq_arq_quantize(&t, CALQ_WEIGHTS_CONV, 1, &o, "conv0", s, off, q, NULL, &e) == CALQ_OK);
    for (int c = 0; c < 4; c++) EXPECT(s[c] == 1.0f && off[c] == 0);
    int nz = 0;
    for (int i = 0; i < 108; i++) nz += q[i] != 0;
    EXPECT(nz == 0);
    o.channel_wise = 0;
    EXPECT(calq_arq_quantize(&t, CALQ_WEIGHTS_CONV, 1, &o, "conv0", s, off, q, NULL, &e) == CALQ_OK);
    EXPECT(s[0] == 1.0f);
}

/* A [2, 1, 2, 2] conv weight, by hand. Channel 0: max-abs is the negative -1.0, so the limit is
 * 128 and scale = -1/-128 = 2^-7. Channel 1: max 127 * 2^-6, scale 2^-6; 0.0390625 = 2.5 steps
 * rounds to 3 (half away) or 2 (half even). */
static void test_conv_by_hand(void)
{
    float w[8] = {0.5f, -1.0f, 0.25f, 0.1f, 1.984375f, 0.0f, -0.5f, 0.0390625f};
    const int64_t dims[] = {2, 1, 2, 2};
    calq_tensor t = tensor(w, 4, dims);
    calq_arq_opts o;
    calq_arq_opts_init(&o);
    float s[2], fake[8];
    int off[2];
    int8_t q[8];
    calq_error e = {0};
    EXPECT(calq_arq_quantize(&t, CALQ_WEIGHTS_CONV, 1, &o, "conv1", s, off, q, fake, &e) == CALQ_OK);
    EXPECT(s[0] == 0.0078125f && s[1] == 0.015625f && off[0] == 0 && off[1] == 0);
    const int8_t want[8] = {64, -128, 32, 13, 127, 0, -32, 3};
    EXPECT(memcmp(q, want, 8) == 0);
    EXPECT(fake[3] == 13 * 0.0078125f && fake[7] == 3 * 0.015625f);
    printf("conv [2,1,2,2]: scale_w %.9g %.9g, q = %d %d %d %d | %d %d %d %d\n", (double)s[0], (double)s[1], q[0], q[1],
           q[2], q[3], q[4], q[5], q[6], q[7]);
    o.round_mode = CALQ_ROUND_HALF_EVEN;
    EXPECT(calq_arq_quantize(&t, CALQ_WEIGHTS_CONV, 1, &o, "conv1", s, off, q, NULL, &e) == CALQ_OK);
    EXPECT(q[7] == 2);
    /* asymmetric (accepted by the algorithm, rejected later by the record check, §4.4) */
    o.round_mode = CALQ_ROUND_HALF_AWAY;
    o.asymmetric = 1;
    EXPECT(calq_arq_quantize(&t, CALQ_WEIGHTS_CONV, 1, &o, "conv1", s, off, q, NULL, &e) == CALQ_OK);
    EXPECT(s[0] == 1.5f / 255.0f && off[0] == (int)(roundf(1.0f / (1.5f / 255.0f)) - 128.0f));
}

static void test_layouts(void)
{
    calq_arq_opts o;
    calq_arq_opts_init(&o);
    calq_error e = {0};
    /* depthwise [3, 1, 1, 2], group 3: one scale per output channel */
    float dw[6] = {1.27f, -0.5f, 0.0f, 2.54f, -3.81f, 1.0f};
    const int64_t ddims[] = {3, 1, 1, 2};
    calq_tensor t = tensor(dw, 4, ddims);
    float s[4];
    int off[4];
    EXPECT(calq_arq_num_scales(&t, CALQ_WEIGHTS_CONV, 3, &o) == 3);
    EXPECT(calq_arq_quantize(&t, CALQ_WEIGHTS_CONV, 3, &o, "dw", s, off, NULL, NULL, &e) == CALQ_OK);
    EXPECT(s[0] == 1.27f / 127.0f && s[1] == 2.54f / 127.0f && s[2] == -3.81f / -128.0f);

    /* ConvTranspose [Cin 4, Cout/g 2, 1, 1], group 2: output channel (ci / 2) * 2 + j.
     * Element (ci, j) holds 10*ci + j + 1, so channel oc's max is the one from the larger ci. */
    float ct[8];
    for (int ci = 0; ci < 4; ci++)
        for (int j = 0; j < 2; j++) ct[ci * 2 + j] = (float)(10 * ci + j + 1);
    const int64_t cdims[] = {4, 2, 1, 1};
    t = tensor(ct, 4, cdims);
    EXPECT(calq_arq_num_scales(&t, CALQ_WEIGHTS_CONV_TRANSPOSE, 2, &o) == 4);
    int8_t q[8];
    EXPECT(calq_arq_quantize(&t, CALQ_WEIGHTS_CONV_TRANSPOSE, 2, &o, "deconv", s, off, q, NULL, &e) == CALQ_OK);
    /* oc 0: ci {0,1}, j 0 -> max 11; oc 1: j 1 -> 12; oc 2: ci {2,3}, j 0 -> 31; oc 3: 32 */
    EXPECT(s[0] == 11.0f / 127.0f && s[1] == 12.0f / 127.0f && s[2] == 31.0f / 127.0f && s[3] == 32.0f / 127.0f);
    EXPECT(q[1 * 2 + 0] == 127 && q[3 * 2 + 1] == 127 && q[0] == (int8_t)roundf(1.0f / (11.0f / 127.0f)));
    printf("convtranspose [4,2,1,1] group 2: scale_w %.9g %.9g %.9g %.9g\n", (double)s[0], (double)s[1], (double)s[2],
           (double)s[3]);

    /* Gemm / MatMul: per tensor only */
    float g[6] = {0.1f, -0.2f, 0.3f, 0.4f, -0.5f, 0.6f};
    const int64_t gdims[] = {2, 3};
    t = tensor(g, 2, gdims);
    EXPECT(calq_arq_quantize(&t, CALQ_WEIGHTS_MATRIX, 1, &o, "fc", s, off, NULL, NULL, &e) == CALQ_ERR_BAD_PARAMETERS);
    EXPECT(strstr(e.message, "channel_wise") != NULL);
    o.channel_wise = 0;
    EXPECT(calq_arq_num_scales(&t, CALQ_WEIGHTS_MATRIX, 1, &o) == 1);
    EXPECT(calq_arq_quantize(&t, CALQ_WEIGHTS_MATRIX, 1, &o, "fc", s, off, NULL, NULL, &e) == CALQ_OK);
    EXPECT(s[0] == 0.6f / 127.0f);
}

static void test_arq_errors(void)
{
    calq_arq_opts o;
    calq_arq_opts_init(&o);
    calq_error e = {0};
    float w[4] = {0.1f, NAN, 0.2f, 0.3f};
    const int64_t dims[] = {2, 2};
    calq_tensor t = tensor(w, 2, dims);
    float s[2];
    int off[2];
    EXPECT(calq_arq_quantize(&t, CALQ_WEIGHTS_CONV, 1, &o, "conv9", s, off, NULL, NULL, &e) == CALQ_ERR_BAD_PARAMETERS);
    EXPECT(strstr(e.message, "Exist NaN in input data, cannot do ARQ quantize.") && strcmp(e.layer, "conv9") == 0);
    w[1] = INFINITY;
    EXPECT(calq_arq_quantize(&t, CALQ_WEIGHTS_CONV, 1, &o, "conv9", s, off, NULL, NULL, &e) == CALQ_ERR_NOT_SUPPORT);
    EXPECT(strstr(e.message, "ArqQuantCPU scale is illegal.") && strstr(e.message, "Not support scale is +inf."));
    o.num_bits = 1;
    EXPECT(calq_arq_quantize(&t, CALQ_WEIGHTS_CONV, 1, &o, "conv9", s, off, NULL, NULL, &e) == CALQ_ERR_BAD_PARAMETERS);
    EXPECT(strstr(e.message, "it should be greater than 2.") != NULL);
}

static void test_bias(void)
{
    calq_error e = {0};
    /* deq = 0.5 * [0.25, 0.125] = [0.125, 0.0625]; halves round to even */
    const float sw[2] = {0.25f, 0.125f};
    float deq[2];
    calq_deq_scale(0.5f, sw, 2, 2, deq);
    EXPECT(deq[0] == 0.125f && deq[1] == 0.0625f);
    const float bias[2] = {2.5f * 0.125f, -2.5f * 0.0625f};
    int32_t bq[2];
    EXPECT(calq_quant_bias(bias, 2, 0.5f, sw, 2, "conv2", bq, &e) == CALQ_OK);
    EXPECT(bq[0] == 2 && bq[1] == -2);
    const float bias3[2] = {3.5f * 0.125f, 1.0f};
    EXPECT(calq_quant_bias(bias3, 2, 0.5f, sw, 2, "conv2", bq, &e) == CALQ_OK);
    EXPECT(bq[0] == 4 && bq[1] == 16);
    /* overflow: 1e9 / (1e-3 * 1) = 1e12 */
    const float one = 1.0f, big = 1e9f;
    EXPECT(calq_quant_bias(&big, 1, 1e-3f, &one, 1, "fc_out", bq, &e) == CALQ_ERR_DATA);
    EXPECT(strstr(e.message, "of layer \"fc_out\" exceed int32 range:[-2147483648, 2147483647], please add it to "
                             "skip layer.") != NULL);
    EXPECT(strstr(e.message, "Quantized bias 9.99999") != NULL);
    EXPECT(strcmp(e.layer, "fc_out") == 0);
    printf("bias overflow: %s\n", e.message);
    /* 2^31 itself is out of range, 2^31 - 128 (the float below) is in */
    const float edge = 2147483648.0f, below = 2147483520.0f;
    EXPECT(calq_quant_bias(&edge, 1, 1.0f, &one, 1, "b", bq, &e) == CALQ_ERR_DATA);
    EXPECT(calq_quant_bias(&below, 1, 1.0f, &one, 1, "b", bq, &e) == CALQ_OK && bq[0] == 2147483520);
}

static void test_pack(void)
{
    uint64_t v = calq_deq_scale_pack(0.5f, 3, -1);
    EXPECT(v == ((UINT64_C(0xFF) << 40) | (UINT64_C(3) << 32) | UINT64_C(0x3F000000)));
    float d;
    unsigned sh;
    int ow;
    calq_deq_scale_unpack(v, &d, &sh, &ow);
    EXPECT(d == 0.5f && sh == 3 && ow == -1);
    EXPECT(calq_deq_scale_pack(0.5f, 0, 0) == UINT64_C(0x3F000000));
    float f;
    uint32_t bits = 0x3F8FFFFFu;
    memcpy(&f, &bits, sizeof f);
    float t = calq_deq_scale_s19(f);
    memcpy(&bits, &t, sizeof bits);
    EXPECT(bits == 0x3F8FE000u);
}

static void test_shift_bit(void)
{
    calq_error e = {0};
    /* channel 0 holds 2^20 (deq 1): floor(2^20 / 2^N) saturates int16 up to N = 5, where the error
     * is (32767*32 - 2^20)^2 = 1024; N = 6 is exact and the first minimum. Channel 1 holds small
     * even numbers: N = 1 is exact. */
    const float deq[2] = {1.0f, 1.0f};
    calq_shift_bit *s = NULL;
    EXPECT(calq_shift_bit_create(2, deq, 0, &s, &e) == CALQ_OK);
    /* [outer 2, C 2, inner 2] */
    const float y[8] = {1048576.0f, 1048576.0f, 2.0f, -4.0f, 1048576.0f, 1048576.0f, 6.0f, 8.0f};
    EXPECT(calq_shift_bit_feed(s, y, 2, 2, &e) == CALQ_OK);
    int sb[2];
    EXPECT(calq_shift_bit_result(s, sb, &e) == CALQ_OK);
    EXPECT(sb[0] == 6 && sb[1] == 1);
    printf("shift_bit: %d %d\n", sb[0], sb[1]);
    calq_shift_bit_free(s);
    /* broadcast: one shared error, so both channels take 6 */
    EXPECT(calq_shift_bit_create(2, deq, 1, &s, &e) == CALQ_OK);
    EXPECT(calq_shift_bit_feed(s, y, 2, 2, &e) == CALQ_OK);
    EXPECT(calq_shift_bit_result(s, sb, &e) == CALQ_OK);
    EXPECT(sb[0] == 6 && sb[1] == 6);
    calq_shift_bit_free(s);
}

int main(void)
{
    test_zeros();
    test_conv_by_hand();
    test_layouts();
    test_arq_errors();
    test_bias();
    test_pack();
    test_shift_bit();
    if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
    return failures ? 1 : 0;
}
