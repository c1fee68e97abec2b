/* The Ascend operators (AscendQuant, AscendDequant, AscendAntiQuant) and the integer layers of
 * Ascend deploy models (int8 Conv / ConvTranspose / Gemm / MatMul / AveragePool -> int32;
 * amct-reference.md §9.1): hand-computed values (ties, saturation, offsets, shift_n, relu_flag,
 * padding in the centered domain, count_include_pad), the integer layers against calq's float
 * kernels on the centered values (exact: every sum is far below 2^24), and the errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/tensor.h"
#include "op_harness.h"

/* A tensor of any dtype from int64 values (converted as calq__tensor_set_i64 does). */
static calq_tensor t_int(calq_dtype dt, const int64_t *vals, int ndim, const int64_t *dims)
{
    calq_tensor t = {0};
    t.dtype = dt;
    t.ndim = ndim;
    for (int i = 0; i < ndim; i++) t.dims[i] = dims[i];
    calq__tensor_alloc(&t, NULL);
    for (int64_t i = 0; i < calq_tensor_numel(&t); i++) calq__tensor_set_i64(&t, i, vals[i]);
    return t;
}

/* Pseudo-random integers in [lo, hi] (a fixed LCG: the same data on every run). */
static calq_tensor t_rand_int(calq_dtype dt, unsigned seed, int lo, int hi, int ndim, const int64_t *dims)
{
    int64_t n = calq__shape_numel(dims, ndim);
    int64_t *v = malloc(sizeof(int64_t) * (size_t)(n + 1));
    uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
    for (int64_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        v[i] = lo + (int64_t)((s >> 33) % (uint64_t)(hi - lo + 1));
    }
    calq_tensor t = t_int(dt, v, ndim, dims);
    free(v);
    return t;
}

/* The float tensor of t's values minus `offset` (the centered domain). */
static calq_tensor centered_f32(const calq_tensor *t, int64_t offset)
{
    calq_tensor f = t_rand_f32(0, t->ndim, t->dims, 0, 1);
    for (int64_t i = 0; i < calq_tensor_numel(t); i++)
        ((float *)f.data)[i] = (float)(calq__tensor_get_i64(t, i) - offset);
    return f;
}

static void free_all(calq_tensor *t, int n)
{
    for (int i = 0; i < n; i++) calq_tensor_free_data(&t[i]);
}

/* Checks every element of got (any numeric dtype) equals want exactly. */
static int expect_exact(const calq_tensor *got, calq_dtype dt, const double *want, int64_t n, const char *what)
{
    if (got->dtype != dt || calq_tensor_numel(got) != n) {
        fprintf(stderr, "%s: %s with %lld elements, expected %s with %lld\n", what, calq_dtype_name(got->dtype),
                (long long)calq_tensor_numel(got), calq_dtype_name(dt), (long long)n);
        return 0;
    }
    for (int64_t i = 0; i < n; i++) {
        double v = calq__tensor_get_f64(got, i);
        if (!(v == want[i]) && !(isnan(v) && isnan(want[i]))) {
            fprintf(stderr, "%s: element %lld is %.9g, expected %.9g\n", what, (long long)i, v, want[i]);
            return 0;
        }
    }
    return 1;
}

/* got (int32) equals ref (float32 holding integers) element for element. */
static int expect_int_equals_float(const calq_tensor *got, const calq_tensor *ref, const char *what)
{
    if (got->dtype != CALQ_DTYPE_INT32) {
        fprintf(stderr, "%s: output is %s, expected int32\n", what, calq_dtype_name(got->dtype));
        return 0;
    }
    return t_close(got, ref, 0.0, 1e-9, what); /* integers: any difference is >= 1 */
}

/* ---- AscendQuant ------------------------------------------------------------------------- */

static calq_status run_quant(const float *x, int n, float scale, float offset, int sqrt_mode, const char *round_mode,
                             const char *dst_type, calq_tensor *out, calq_error *err)
{
    op_case c = op_case_new("AscendQuant", 13, 1, 1);
    op_attr_float(&c, "scale", scale);
    op_attr_float(&c, "offset", offset);
    if (sqrt_mode) op_attr_int(&c, "sqrt_mode", sqrt_mode);
    if (round_mode) op_attr_str(&c, "round_mode", round_mode);
    if (dst_type) op_attr_str(&c, "dst_type", dst_type);
    int64_t dims[1] = {n};
    calq_tensor in = t_f32(x, 1, dims);
    calq_status s = op_case_run(&c, &in, 1, out, 1, 0, err);
    calq_tensor_free_data(&in);
    op_case_free(&c);
    return s;
}

static void test_quant(void)
{
    calq_tensor y;
    calq_error err = {0};
    /* "Round" ties go to even (+-2.5 -> +-2, 0.5 -> 0, -1.5 -> -2), then saturation */
    const float x1[] = {-2.5f, 2.5f, -1.5f, 0.5f, 1.49f, 200.0f, -300.0f, 0.25f, NAN, INFINITY, -INFINITY};
    EXPECT(run_quant(x1, 11, 1.0f, 0.0f, 0, NULL, NULL, &y, &err) == CALQ_OK);
    EXPECT(
        expect_exact(&y, CALQ_DTYPE_INT8, (double[]){-2, 2, -2, 0, 1, 127, -128, 0, 0, 127, -128}, 11, "quant ties"));
    calq_tensor_free_data(&y);
    /* "RoundHalfAway" (the Caffe fake Quant): +-2.5 -> +-3, 0.5 -> 1 */
    EXPECT(run_quant(x1, 11, 1.0f, 0.0f, 0, "RoundHalfAway", NULL, &y, &err) == CALQ_OK);
    EXPECT(expect_exact(&y, CALQ_DTYPE_INT8, (double[]){-3, 3, -2, 1, 1, 127, -128, 0, 0, 127, -128}, 11,
                        "quant ties half away"));
    calq_tensor_free_data(&y);

    /* scale 2 (= 1/scale_d), offset 3: the offset is added after rounding, so -1.75*2 = -3.5
     * gives rint(-3.5) + 3 = -1 (rounding x*scale + offset would give rint(-0.5) = 0) */
    const float x2[] = {1.25f, -1.75f, 62.5f, -65.75f, 0.0f, 10.2f};
    EXPECT(run_quant(x2, 6, 2.0f, 3.0f, 0, "Round", "INT8", &y, &err) == CALQ_OK);
    EXPECT(expect_exact(&y, CALQ_DTYPE_INT8, (double[]){5, -1, 127, -128, 3, 23}, 6, "quant offset"));
    calq_tensor_free_data(&y);

    /* sqrt_mode: the scale twice, 0.625 * 2 * 2 = 2.5 -> 2; 0.875 * 4 = 3.5 -> 4 */
    const float x3[] = {0.625f, -0.875f};
    EXPECT(run_quant(x3, 2, 2.0f, 0.0f, 1, NULL, NULL, &y, &err) == CALQ_OK);
    EXPECT(expect_exact(&y, CALQ_DTYPE_INT8, (double[]){2, -4}, 2, "quant sqrt_mode"));
    calq_tensor_free_data(&y);

    /* the other rounding modes */
    const float x4[] = {-1.5f, 1.5f, -0.2f, 0.7f};
    const char *modes[] = {"Floor", "Ceil", "Trunc"};
    const double want[3][4] = {{-2, 1, -1, 0}, {-1, 2, 0, 1}, {-1, 1, 0, 0}};
    for (int m = 0; m < 3; m++) {
        EXPECT(run_quant(x4, 4, 1.0f, 0.0f, 0, modes[m], NULL, &y, &err) == CALQ_OK);
        EXPECT(expect_exact(&y, CALQ_DTYPE_INT8, want[m], 4, modes[m]));
        calq_tensor_free_data(&y);
    }

    /* float16 input */
    {
        op_case c = op_case_new("AscendQuant", 13, 1, 1);
        op_attr_float(&c, "scale", 1.0f);
        op_attr_float(&c, "offset", -1.0f);
        calq_tensor in = t_int(CALQ_DTYPE_FLOAT16, (int64_t[]){0, 0}, 1, (int64_t[]){2});
        ((uint16_t *)in.data)[0] = calq__f32_to_f16(2.5f);
        ((uint16_t *)in.data)[1] = calq__f32_to_f16(-130.0f);
        EXPECT(op_case_run(&c, &in, 1, &y, 1, 0, &err) == CALQ_OK);
        EXPECT(expect_exact(&y, CALQ_DTYPE_INT8, (double[]){1, -128}, 2, "quant float16")); /* rint(2.5) - 1 */
        calq_tensor_free_data(&y);
        calq_tensor_free_data(&in);
        op_case_free(&c);
    }

    /* what calq cannot run, with the reason */
    memset(&err, 0, sizeof err);
    EXPECT(run_quant(x3, 2, 1.0f, 0.0f, 0, NULL, "INT4", &y, &err) == CALQ_ERR_UNSUPPORTED);
    calq_tensor_free_data(&y); /* outputs may be allocated before run fails */
    EXPECT(strstr(err.message, "dst_type 'INT4'") != NULL);
    EXPECT(run_quant(x3, 2, 1.0f, 0.0f, 0, "Banker", NULL, &y, &err) == CALQ_ERR_BAD_FORMAT);
    calq_tensor_free_data(&y); /* outputs may be allocated before run fails */
    EXPECT(strstr(err.message, "round_mode 'Banker'") != NULL);
    EXPECT(run_quant(x3, 2, 1.0f, 0.5f, 0, NULL, NULL, &y, &err) == CALQ_ERR_BAD_FORMAT);
    calq_tensor_free_data(&y); /* outputs may be allocated before run fails */
    EXPECT(strstr(err.message, "offset 0.5 must be an integer") != NULL);
    EXPECT(run_quant(x3, 2, 0.0f, 0.0f, 0, NULL, NULL, &y, &err) == CALQ_ERR_BAD_FORMAT);
    calq_tensor_free_data(&y); /* outputs may be allocated before run fails */
    EXPECT(run_quant(x3, 2, 1.0f, 0.0f, 2, NULL, NULL, &y, &err) == CALQ_ERR_BAD_FORMAT);
    calq_tensor_free_data(&y); /* outputs may be allocated before run fails */
}

/* ---- AscendDequant ----------------------------------------------------------------------- */

static calq_status run_dequant(const calq_tensor *x, const uint64_t *deq, int n_deq, int relu, int sqrt_mode, int dtype,
                               calq_tensor *out, calq_error *err)
{
    op_case c = op_case_new("AscendDequant", 13, 2, 1);
    if (relu) op_attr_int(&c, "relu_flag", relu);
    if (sqrt_mode) op_attr_int(&c, "sqrt_mode", sqrt_mode);
    op_attr_int(&c, "dtype", dtype);
    calq_tensor in[2] = {*x, t_int(CALQ_DTYPE_UINT64, (int64_t[]){0, 0, 0, 0}, 1, (int64_t[]){n_deq})};
    memcpy(in[1].data, deq, sizeof(uint64_t) * (size_t)n_deq);
    calq_status s = op_case_run(&c, in, 2, out, 1, 0, err);
    calq_tensor_free_data(&in[1]);
    op_case_free(&c);
    return s;
}

static void test_dequant(void)
{
    calq_tensor y;
    calq_error err = {0};
    /* per tensor: y = (float)x * deq */
    calq_tensor x = t_int(CALQ_DTYPE_INT32, (int64_t[]){100, -7, 0, 2147483647}, 3, (int64_t[]){1, 2, 2});
    uint64_t d1 = calq_deq_scale_pack(0.25f, 0, 0);
    EXPECT(run_dequant(&x, &d1, 1, 0, 0, 0, &y, &err) == CALQ_OK);
    EXPECT(expect_exact(&y, CALQ_DTYPE_FLOAT32, (double[]){25, -1.75, 0, (double)(2147483648.0f * 0.25f)}, 4,
                        "dequant per tensor"));
    calq_tensor_free_data(&y);
    calq_tensor_free_data(&x);

    /* per channel (axis 1), plus relu_flag */
    x = t_int(CALQ_DTYPE_INT32, (int64_t[]){10, -10, 20, -20}, 4, (int64_t[]){1, 2, 1, 2});
    uint64_t d2[2] = {calq_deq_scale_pack(0.5f, 0, 0), calq_deq_scale_pack(0.125f, 0, 0)};
    EXPECT(run_dequant(&x, d2, 2, 0, 0, 0, &y, &err) == CALQ_OK);
    EXPECT(expect_exact(&y, CALQ_DTYPE_FLOAT32, (double[]){5, -5, 2.5, -2.5}, 4, "dequant per channel"));
    calq_tensor_free_data(&y);
    EXPECT(run_dequant(&x, d2, 2, 1, 0, 0, &y, &err) == CALQ_OK);
    EXPECT(expect_exact(&y, CALQ_DTYPE_FLOAT32, (double[]){5, 0, 2.5, 0}, 4, "dequant relu_flag"));
    calq_tensor_free_data(&y);
    /* sqrt_mode: deq twice */
    EXPECT(run_dequant(&x, d2, 2, 0, 1, 0, &y, &err) == CALQ_OK);
    EXPECT(expect_exact(&y, CALQ_DTYPE_FLOAT32, (double[]){2.5, -2.5, 0.3125, -0.3125}, 4, "dequant sqrt_mode"));
    calq_tensor_free_data(&y);
    calq_tensor_free_data(&x);

    /* shift_n = 4 (§6.4): t = clamp(floor(x / 16), -32768, 32767), y = t * deq * 16:
     * 1000/16 = 62.5 -> 62 -> 496; -1000/16 -> -63 -> -504; +-3e6/16 saturate to 32767 / -32768 */
    x = t_int(CALQ_DTYPE_INT32, (int64_t[]){1000, -1000, 3000000, -3000000, 16, -16}, 2, (int64_t[]){1, 6});
    uint64_t d3 = calq_deq_scale_pack(0.5f, 4, 0);
    EXPECT(run_dequant(&x, &d3, 1, 0, 0, 0, &y, &err) == CALQ_OK);
    EXPECT(expect_exact(&y, CALQ_DTYPE_FLOAT32, (double[]){496, -504, 32767 * 8.0, -32768 * 8.0, 8, -8}, 6,
                        "dequant shift_n"));
    calq_tensor_free_data(&y);
    /* per channel shift: channel 0 shifts by 1, channel 1 does not */
    calq_tensor x2 = t_int(CALQ_DTYPE_INT32, (int64_t[]){-3, -3}, 2, (int64_t[]){1, 2});
    uint64_t d4[2] = {calq_deq_scale_pack(1.0f, 1, 0), calq_deq_scale_pack(1.0f, 0, 0)};
    EXPECT(run_dequant(&x2, d4, 2, 0, 0, 0, &y, &err) == CALQ_OK);
    EXPECT(expect_exact(&y, CALQ_DTYPE_FLOAT32, (double[]){-4, -3}, 2, "dequant shift per channel"));
    calq_tensor_free_data(&y);
    calq_tensor_free_data(&x2);

    /* dtype = 1: float16 output of the float32 result */
    x2 = t_int(CALQ_DTYPE_INT32, (int64_t[]){3, -70000}, 1, (int64_t[]){2});
    uint64_t d5 = calq_deq_scale_pack(0.1f, 0, 0);
    EXPECT(run_dequant(&x2, &d5, 1, 0, 0, 1, &y, &err) == CALQ_OK);
    EXPECT(expect_exact(&y, CALQ_DTYPE_FLOAT16,
                        (double[]){calq__f16_to_f32(calq__f32_to_f16(3.0f * 0.1f)),
                                   calq__f16_to_f32(calq__f32_to_f16(-70000.0f * 0.1f))},
                        2, "dequant float16"));
    calq_tensor_free_data(&y);

    /* errors: offset_w, a deq_scale that fits neither per tensor nor per channel, dtype 2 */
    uint64_t d6 = calq_deq_scale_pack(1.0f, 0, 3);
    EXPECT(run_dequant(&x2, &d6, 1, 0, 0, 0, &y, &err) == CALQ_ERR_UNSUPPORTED);
    calq_tensor_free_data(&y); /* outputs may be allocated before run fails */
    EXPECT(strstr(err.message, "offset_w 3") != NULL);
    EXPECT(run_dequant(&x, d2, 2, 0, 0, 0, &y, &err) == CALQ_ERR_SHAPE);
    calq_tensor_free_data(&y); /* outputs may be allocated before run fails */
    EXPECT(run_dequant(&x2, &d5, 1, 0, 0, 2, &y, &err) == CALQ_ERR_UNSUPPORTED);
    calq_tensor_free_data(&y); /* outputs may be allocated before run fails */
    calq_tensor_free_data(&x2);
    calq_tensor_free_data(&x);
}

/* ---- AscendAntiQuant --------------------------------------------------------------------- */

static void test_antiquant(void)
{
    calq_error err = {0};
    calq_tensor y, x = t_int(CALQ_DTYPE_INT8, (int64_t[]){-128, -1, 0, 127}, 1, (int64_t[]){4});
    for (int sq = 0; sq < 2; sq++) {
        op_case c = op_case_new("AscendAntiQuant", 13, 1, 1);
        op_attr_float(&c, "scale", 0.5f);
        op_attr_float(&c, "offset", -3.0f); /* = -offset_d: y = (q - 3) * scale_d */
        op_attr_int(&c, "sqrt_mode", sq);
        EXPECT(op_case_run(&c, &x, 1, &y, 1, 0, &err) == CALQ_OK);
        const double f = sq ? 0.25 : 0.5;
        EXPECT(expect_exact(&y, CALQ_DTYPE_FLOAT32, (double[]){-131 * f, -4 * f, -3 * f, 124 * f}, 4, "antiquant"));
        calq_tensor_free_data(&y);
        op_case_free(&c);
    }
    calq_tensor_free_data(&x);
}

/* ---- integer Conv / ConvTranspose -------------------------------------------------------- */

/* Runs an int8 conv (input 0 from an AscendQuant with offset o) and the float conv on the
 * centered values; they must agree exactly. */
static void conv_vs_float(const char *op, int64_t o, const calq_tensor *x, const calq_tensor *w, const calq_tensor *b,
                          const int64_t *pads, int npads, const int64_t *strides, int64_t group, const int64_t *opad,
                          const char *what)
{
    calq_error err = {0};
    calq_tensor yi = {0}, yf = {0};
    int nsp = x->ndim - 2;
    op_case ci = op_case_new(op, 13, b ? 3 : 2, 1), cf = op_case_new(op, 13, b ? 3 : 2, 1);
    op_case *cs[2] = {&ci, &cf};
    for (int k = 0; k < 2; k++) {
        if (pads) op_attr_ints(cs[k], "pads", pads, npads);
        if (strides) op_attr_ints(cs[k], "strides", strides, nsp);
        if (opad) op_attr_ints(cs[k], "output_padding", opad, nsp);
        op_attr_int(cs[k], "group", group);
    }
    op_case_from_ascend_quant(&ci, 0, (float)o);
    calq_tensor in_i[3] = {*x, *w, b ? *b : *x};
    calq_tensor in_f[3] = {centered_f32(x, o), centered_f32(w, 0), b ? centered_f32(b, 0) : (calq_tensor){0}};
    EXPECT(op_case_run(&ci, in_i, b ? 3 : 2, &yi, 1, 0, &err) == CALQ_OK);
    if (err.message[0]) fprintf(stderr, "%s: %s\n", what, err.message);
    EXPECT(op_case_run(&cf, in_f, b ? 3 : 2, &yf, 1, 0, &err) == CALQ_OK);
    EXPECT(expect_int_equals_float(&yi, &yf, what));
    /* the fast path (oneDNN where it is exact, int_dnnl.h) gives the same sums */
    calq_tensor yi2 = {0};
    EXPECT(op_case_run(&ci, in_i, b ? 3 : 2, &yi2, 1, 1, &err) == CALQ_OK);
    EXPECT(t_close(&yi2, &yi, 0.0, 1e-9, what));
    free_all(in_f, b ? 3 : 2);
    calq_tensor_free_data(&yi);
    calq_tensor_free_data(&yi2);
    calq_tensor_free_data(&yf);
    op_case_free(&ci);
    op_case_free(&cf);
}

static void test_conv_int(void)
{
    calq_error err = {0};
    /* Hand-computed: x = [[10, 20], [30, 40]], o = 5 -> centered [[5, 15], [25, 35]]; W = 1..9,
     * pads 1: y[0,0] = 5*5 + 15*6 + 25*8 + 35*9 + bias 7 = 637. The padded taps add nothing
     * (padding is the offset, zero once centered); padding with q = 0 would add -5 * (1+2+3+4+7). */
    {
        op_case c = op_case_new("Conv", 13, 3, 1);
        op_attr_ints(&c, "pads", (int64_t[]){1, 1, 1, 1}, 4);
        op_case_from_ascend_quant(&c, 0, 5.0f);
        calq_tensor in[3] = {
            t_int(CALQ_DTYPE_INT8, (int64_t[]){10, 20, 30, 40}, 4, (int64_t[]){1, 1, 2, 2}),
            t_int(CALQ_DTYPE_INT8, (int64_t[]){1, 2, 3, 4, 5, 6, 7, 8, 9}, 4, (int64_t[]){1, 1, 3, 3}),
            t_int(CALQ_DTYPE_INT32, (int64_t[]){7}, 1, (int64_t[]){1}),
        };
        calq_tensor y;
        EXPECT(op_case_run(&c, in, 3, &y, 1, 0, &err) == CALQ_OK);
        /* y[0,1] = 5*4 + 15*5 + 25*7 + 35*8 + 7; y[1,0] = 5*2+15*3+25*5+35*6 + 7; y[1,1] = 5*1+15*2+25*4+35*5 + 7 */
        EXPECT(expect_exact(&y, CALQ_DTYPE_INT32, (double[]){637, 557, 397, 317}, 4, "conv int hand"));
        calq_tensor_free_data(&y);

        /* bias_q near INT32_MAX: the exact sum leaves int32 -> a clear error naming the layer */
        ((int32_t *)in[2].data)[0] = INT32_MAX - 100;
        memset(&err, 0, sizeof err);
        EXPECT(op_case_run(&c, in, 3, &y, 1, 0, &err) == CALQ_ERR_DATA);
        calq_tensor_free_data(&y); /* outputs may be allocated before run fails */
        EXPECT(strstr(err.message, "node 'node'") && strstr(err.message, "int32 accumulator"));
        calq_tensor_free_data(&y);
        free_all(in, 3);
        op_case_free(&c);
    }
    /* random data: padding, stride, groups, 1-D and 3-D */
    calq_tensor x = t_rand_int(CALQ_DTYPE_INT8, 1, -128, 127, 4, (int64_t[]){2, 4, 7, 6});
    calq_tensor w = t_rand_int(CALQ_DTYPE_INT8, 2, -128, 127, 4, (int64_t[]){6, 2, 3, 3});
    calq_tensor w1 = t_rand_int(CALQ_DTYPE_INT8, 3, -128, 127, 4, (int64_t[]){5, 4, 3, 2});
    calq_tensor b6 = t_rand_int(CALQ_DTYPE_INT32, 4, -100000, 100000, 1, (int64_t[]){6});
    calq_tensor b5 = t_rand_int(CALQ_DTYPE_INT32, 5, -100000, 100000, 1, (int64_t[]){5});
    conv_vs_float("Conv", -7, &x, &w, &b6, (int64_t[]){1, 2, 0, 1}, 4, (int64_t[]){2, 1}, 2, NULL, "conv group 2");
    conv_vs_float("Conv", 100, &x, &w1, &b5, (int64_t[]){2, 1, 2, 1}, 4, NULL, 1, NULL, "conv pads 2");
    conv_vs_float("Conv", 0, &x, &w1, NULL, NULL, 0, (int64_t[]){3, 2}, 1, NULL, "conv no bias");
    calq_tensor x3 = t_rand_int(CALQ_DTYPE_INT8, 6, -128, 127, 5, (int64_t[]){1, 2, 4, 5, 3});
    calq_tensor w3 = t_rand_int(CALQ_DTYPE_INT8, 7, -128, 127, 5, (int64_t[]){3, 2, 2, 3, 2});
    conv_vs_float("Conv", 12, &x3, &w3, NULL, (int64_t[]){1, 1, 0, 0, 1, 1}, 6, NULL, 1, NULL, "conv 3-D");
    /* ConvTranspose: W is [C, M/group, k...] */
    calq_tensor wt = t_rand_int(CALQ_DTYPE_INT8, 8, -128, 127, 4, (int64_t[]){4, 3, 3, 3});
    calq_tensor b3 = t_rand_int(CALQ_DTYPE_INT32, 9, -1000, 1000, 1, (int64_t[]){3});
    conv_vs_float("ConvTranspose", -20, &x, &wt, &b3, (int64_t[]){1, 1, 1, 1}, 4, (int64_t[]){2, 2}, 1,
                  (int64_t[]){1, 1}, "convtranspose stride 2");
    calq_tensor b6t = t_rand_int(CALQ_DTYPE_INT32, 10, -1000, 1000, 1, (int64_t[]){6});
    conv_vs_float("ConvTranspose", 3, &x, &wt, &b6t, NULL, 0, NULL, 2, NULL, "convtranspose group 2");

    /* an int8 Conv whose input does not come from an AscendQuant */
    {
        op_case c = op_case_new("Conv", 13, 2, 1);
        calq_tensor in[2] = {x, w1}, y;
        memset(&err, 0, sizeof err);
        EXPECT(op_case_run(&c, in, 2, &y, 1, 0, &err) == CALQ_ERR_UNSUPPORTED);
        calq_tensor_free_data(&y); /* outputs may be allocated before run fails */
        EXPECT(strstr(err.message, "does not come from an AscendQuant") != NULL);
        op_case_free(&c);
        /* an int8 input with a float weight */
        c = op_case_new("Conv", 13, 2, 1);
        op_case_from_ascend_quant(&c, 0, 0.0f);
        calq_tensor wf = centered_f32(&w1, 0);
        in[1] = wf;
        EXPECT(op_case_run(&c, in, 2, &y, 1, 0, &err) == CALQ_ERR_UNSUPPORTED);
        calq_tensor_free_data(&y); /* outputs may be allocated before run fails */
        EXPECT(strstr(err.message, "needs an int8 weight") != NULL);
        calq_tensor_free_data(&wf);
        op_case_free(&c);
    }
    calq_tensor all[] = {x, w, w1, b6, b5, x3, w3, wt, b3, b6t};
    free_all(all, 10);
}

/* ---- integer Gemm / MatMul --------------------------------------------------------------- */

static void mm_vs_float(const char *op, int64_t o, const calq_tensor *a, const calq_tensor *b, const calq_tensor *c3,
                        int trans_b, const char *what)
{
    calq_error err = {0};
    calq_tensor yi = {0}, yf = {0};
    int n = c3 ? 3 : 2;
    op_case ci = op_case_new(op, 13, n, 1), cf = op_case_new(op, 13, n, 1);
    if (trans_b) {
        op_attr_int(&ci, "transB", 1);
        op_attr_int(&cf, "transB", 1);
    }
    op_case_from_ascend_quant(&ci, 0, (float)o);
    calq_tensor in_i[3] = {*a, *b, c3 ? *c3 : *a};
    calq_tensor in_f[3] = {centered_f32(a, o), centered_f32(b, 0), c3 ? centered_f32(c3, 0) : (calq_tensor){0}};
    EXPECT(op_case_run(&ci, in_i, n, &yi, 1, 1, &err) == CALQ_OK);
    if (err.message[0]) fprintf(stderr, "%s: %s\n", what, err.message);
    EXPECT(op_case_run(&cf, in_f, n, &yf, 1, 0, &err) == CALQ_OK);
    EXPECT(expect_int_equals_float(&yi, &yf, what));
    free_all(in_f, n);
    calq_tensor_free_data(&yi);
    calq_tensor_free_data(&yf);
    op_case_free(&ci);
    op_case_free(&cf);
}

static void test_mm_int(void)
{
    calq_error err = {0};
    /* Gemm by hand: A = [[1, 2, 3]], o = -1 -> [2, 3, 4]; B^T rows [1, 0, -1], [2, 2, 2];
     * C = [10, -10]: y = [2 - 4 + 10, 18 - 10] = [8, 8] */
    {
        op_case c = op_case_new("Gemm", 13, 3, 1);
        op_attr_int(&c, "transB", 1);
        op_case_from_ascend_quant(&c, 0, -1.0f);
        calq_tensor in[3] = {
            t_int(CALQ_DTYPE_INT8, (int64_t[]){1, 2, 3}, 2, (int64_t[]){1, 3}),
            t_int(CALQ_DTYPE_INT8, (int64_t[]){1, 0, -1, 2, 2, 2}, 2, (int64_t[]){2, 3}),
            t_int(CALQ_DTYPE_INT32, (int64_t[]){10, -10}, 1, (int64_t[]){2}),
        };
        calq_tensor y;
        EXPECT(op_case_run(&c, in, 3, &y, 1, 0, &err) == CALQ_OK);
        EXPECT(expect_exact(&y, CALQ_DTYPE_INT32, (double[]){8, 8}, 2, "gemm int hand"));
        calq_tensor_free_data(&y);
        /* C[1] near INT32_MAX: 18 + INT32_MAX - 10 leaves int32 at output 1 -> an error naming it */
        ((int32_t *)in[2].data)[1] = INT32_MAX - 10;
        memset(&err, 0, sizeof err);
        EXPECT(op_case_run(&c, in, 3, &y, 1, 0, &err) == CALQ_ERR_DATA);
        calq_tensor_free_data(&y); /* outputs may be allocated before run fails */
        EXPECT(strstr(err.message, "exact sum 2147483655 at output 1") && strstr(err.message, "int32 accumulator"));
        ((int32_t *)in[2].data)[1] = -10;
        op_case_free(&c);
        /* alpha != 1 has no integer meaning here */
        c = op_case_new("Gemm", 13, 3, 1);
        op_attr_float(&c, "alpha", 2.0f);
        op_case_from_ascend_quant(&c, 0, 0.0f);
        EXPECT(op_case_run(&c, in, 3, &y, 1, 0, &err) == CALQ_ERR_UNSUPPORTED);
        calq_tensor_free_data(&y); /* outputs may be allocated before run fails */
        op_case_free(&c);
        free_all(in, 3);
    }
    calq_tensor a = t_rand_int(CALQ_DTYPE_INT8, 11, -128, 127, 2, (int64_t[]){5, 70});
    calq_tensor bt = t_rand_int(CALQ_DTYPE_INT8, 12, -128, 127, 2, (int64_t[]){9, 70});
    calq_tensor b = t_rand_int(CALQ_DTYPE_INT8, 13, -128, 127, 2, (int64_t[]){70, 9});
    calq_tensor c9 = t_rand_int(CALQ_DTYPE_INT32, 14, -50000, 50000, 1, (int64_t[]){9});
    calq_tensor c59 = t_rand_int(CALQ_DTYPE_INT32, 15, -50000, 50000, 2, (int64_t[]){5, 9});
    mm_vs_float("Gemm", 17, &a, &bt, &c9, 1, "gemm transB");
    mm_vs_float("Gemm", -128, &a, &b, &c59, 0, "gemm C MxN");
    mm_vs_float("Gemm", 127, &a, &b, NULL, 0, "gemm no C");
    calq_tensor a3 = t_rand_int(CALQ_DTYPE_INT8, 16, -128, 127, 3, (int64_t[]){3, 4, 70});
    mm_vs_float("MatMul", -9, &a3, &b, NULL, 0, "matmul batched");
    calq_tensor all[] = {a, bt, b, c9, c59, a3};
    free_all(all, 6);
}

/* ---- integer AveragePool ----------------------------------------------------------------- */

static void test_avgpool_int(void)
{
    calq_error err = {0};
    /* x = [[1, 0, 3], [4, 5, 6], [7, 8, 9]], o = 3 -> centered [[-2, -3, 0], [1, 2, 3], [4, 5, 6]];
     * 2x2 windows, stride 2, pads 1: window sums -2, -3, 5, 16 over 1, 2, 2, 4 input taps.
     * count_include_pad = 0: -2, -1.5 -> -2, 2.5 -> 2, 4 (ties to even);
     * count_include_pad = 1 (4 taps each): -0.5 -> 0, -0.75 -> -1, 1.25 -> 1, 4. */
    calq_tensor x = t_int(CALQ_DTYPE_INT8, (int64_t[]){1, 0, 3, 4, 5, 6, 7, 8, 9}, 4, (int64_t[]){1, 1, 3, 3});
    const double want[2][4] = {{-2, -2, 2, 4}, {0, -1, 1, 4}};
    for (int inc = 0; inc < 2; inc++) {
        op_case c = op_case_new("AveragePool", 13, 1, 1);
        op_attr_ints(&c, "kernel_shape", (int64_t[]){2, 2}, 2);
        op_attr_ints(&c, "strides", (int64_t[]){2, 2}, 2);
        op_attr_ints(&c, "pads", (int64_t[]){1, 1, 1, 1}, 4);
        op_attr_int(&c, "count_include_pad", inc);
        op_case_from_ascend_quant(&c, 0, 3.0f);
        for (int fast = 0; fast < 2; fast++) {
            calq_tensor y;
            EXPECT(op_case_run(&c, &x, 1, &y, 1, fast, &err) == CALQ_OK);
            EXPECT(expect_exact(&y, CALQ_DTYPE_INT32, want[inc], 4,
                                inc ? "avgpool int count_include_pad" : "avgpool int"));
            calq_tensor_free_data(&y);
        }
        op_case_free(&c);
    }
    /* without an AscendQuant upstream */
    op_case c = op_case_new("AveragePool", 13, 1, 1);
    op_attr_ints(&c, "kernel_shape", (int64_t[]){2, 2}, 2);
    calq_tensor y;
    EXPECT(op_case_run(&c, &x, 1, &y, 1, 0, &err) == CALQ_ERR_UNSUPPORTED);
    calq_tensor_free_data(&y); /* outputs may be allocated before run fails */
    op_case_free(&c);
    calq_tensor_free_data(&x);
}

/* The offset is found through value-preserving layout ops (Caffe's InnerProduct is Flatten +
 * Gemm): AscendQuant -> Flatten -> Gemm. */
static void test_offset_through_flatten(void)
{
    calq_error err = {0};
    op_case c = op_case_new("Gemm", 13, 2, 1);
    int fin = calq__graph_value(c.g, "flat_in"), fout = c.g->nodes[c.node].inputs[0];
    int fl = calq__graph_add_node(c.g, "flatten", "Flatten", "", &fin, 1, &fout, 1);
    c.g->values[fout].producer = fl;
    int q = calq__graph_add_node(c.g, "aq", "AscendQuant", "", (int[]){calq__graph_value(c.g, "f")}, 1, &fin, 1);
    calq__node_add_attr(c.g, q, "scale", CALQ_ATTR_FLOAT)->f = 1.0f;
    calq__node_add_attr(c.g, q, "offset", CALQ_ATTR_FLOAT)->f = 2.0f;
    c.g->values[fin].producer = q;
    calq_tensor in[2] = {t_int(CALQ_DTYPE_INT8, (int64_t[]){3, 4}, 2, (int64_t[]){1, 2}),
                         t_int(CALQ_DTYPE_INT8, (int64_t[]){5, 7}, 2, (int64_t[]){2, 1})};
    calq_tensor y;
    EXPECT(op_case_run(&c, in, 2, &y, 1, 0, &err) == CALQ_OK);
    EXPECT(expect_exact(&y, CALQ_DTYPE_INT32, (double[]){1 * 5 + 2 * 7}, 1, "offset through Flatten"));
    calq_tensor_free_data(&y);
    free_all(in, 2);
    op_case_free(&c);
}

int main(void)
{
    test_quant();
    test_dequant();
    test_antiquant();
    test_conv_int();
    test_mm_int();
    test_avgpool_int();
    test_offset_through_flatten();
    if (failures) fprintf(stderr, "%d failure(s)\n", failures);
    printf("test_kernels_ascend: %d failure(s)\n", failures);
    return failures != 0;
}
