/* Quantized operator kernels (quant_ops.c, quant_gemm.c) on hand-computed data: QLinearMatMul
 * (per-tensor and per-column b) against its formula and its int32 accumulator check; NaN
 * quantizing to the type's minimum as in onnxruntime, and zero / infinite scales rejected;
 * QGemm's zero point types and an empty inner dimension. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/op.h"
#include "op_harness.h"

/* A tensor of any dtype with the given data (NULL: zero-filled). Free with calq_tensor_free_data. */
static calq_tensor tn(calq_dtype dt, int ndim, const int64_t *dims, const void *data)
{
    calq_tensor t = {.dtype = dt, .ndim = ndim};
    if (ndim) memcpy(t.dims, dims, sizeof(int64_t) * (size_t)ndim);
    calq__tensor_alloc(&t, NULL);
    if (data) memcpy(t.data, data, calq__tensor_nbytes(&t));
    return t;
}

static calq_tensor f32s(float v)
{
    return tn(CALQ_DTYPE_FLOAT32, 0, NULL, &v);
}

static calq_tensor zp8(calq_dtype dt, int v)
{
    int8_t s = (int8_t)v;
    uint8_t u = (uint8_t)v;
    return tn(dt, 0, NULL, dt == CALQ_DTYPE_INT8 ? (const void *)&s : (const void *)&u);
}

static int64_t q8(const calq_tensor *t, int64_t i)
{
    return t->dtype == CALQ_DTYPE_INT8 ? ((const int8_t *)t->data)[i] : ((const uint8_t *)t->data)[i];
}

static void free_all(calq_tensor *t, int n)
{
    for (int i = 0; i < n; i++) calq_tensor_free_data(&t[i]);
}

/* Runs op on in[0..n_in) into out (freed here); returns the status and the error message. */
static calq_status run_op(const char *op, int opset, calq_tensor *in, int n_in, calq_tensor *out, calq_error *err,
                          void (*attrs)(op_case *))
{
    op_case oc = op_case_new(op, opset, n_in, 1);
    if (attrs) attrs(&oc);
    memset(err, 0, sizeof *err);
    calq_status st = op_case_run(&oc, in, n_in, out, 1, 0, err);
    op_case_free(&oc);
    return st;
}

/* QLinearMatMul: a uint8 [2, 3] (zp 128), b int8 [3, 2] with per-column scales and zero points,
 * y uint8 (zp 10): y = saturate(round_half_even(acc * (a_s * b_s[n] / y_s)) + 10). */
static void test_qlinear_matmul_values(void)
{
    const int64_t ad[2] = {2, 3}, bd[2] = {3, 2}, nd = 2;
    const uint8_t av[6] = {130, 100, 255, 0, 128, 140};
    const int8_t bv[6] = {3, -7, 100, 2, -128, 127}, bz[2] = {1, -2};
    const float bs[2] = {0.5f, 0.25f}, as = 0.02f, ys = 0.1f;
    calq_tensor in[8] = {tn(CALQ_DTYPE_UINT8, 2, ad, av),
                         f32s(as),
                         zp8(CALQ_DTYPE_UINT8, 128),
                         tn(CALQ_DTYPE_INT8, 2, bd, bv),
                         tn(CALQ_DTYPE_FLOAT32, 1, &nd, bs),
                         tn(CALQ_DTYPE_INT8, 1, &nd, bz),
                         f32s(ys),
                         zp8(CALQ_DTYPE_UINT8, 10)};
    calq_tensor y = {0};
    calq_error err;
    EXPECT_OK(run_op("QLinearMatMul", 10, in, 8, &y, &err, NULL));
    int bad = 0;
    for (int m = 0; y.data && m < 2; m++)
        for (int n = 0; n < 2; n++) {
            int64_t acc = 0;
            for (int k = 0; k < 3; k++) acc += (int64_t)(av[m * 3 + k] - 128) * (bv[k * 2 + n] - bz[n]);
            float r = calq_round((float)acc * (as * bs[n] / ys), CALQ_ROUND_HALF_EVEN) + 10.0f;
            int64_t want = (int64_t)(r < 0 ? 0 : r > 255 ? 255 : r);
            if (q8(&y, m * 2 + n) != want) {
                fprintf(stderr, "QLinearMatMul [%d,%d] = %lld, want %lld\n", m, n, (long long)q8(&y, m * 2 + n),
                        (long long)want);
                bad++;
            }
        }
    EXPECT(y.dtype == CALQ_DTYPE_UINT8 && bad == 0);
    free_all(in, 8);
    calq_tensor_free_data(&y);
}

/* QLinearMatMul sums exactly and fails when the sum leaves int32, as the other integer kernels
 * do: 255 * -128 * K is -2,284,800,000 for K = 70000 (below INT32_MIN), -2,121,600,000 for
 * K = 65000 (inside). */
static void test_qlinear_matmul_overflow(void)
{
    const int64_t ks[2] = {70000, 65000};
    for (int i = 0; i < 2; i++) {
        const int64_t K = ks[i], ad[2] = {1, K}, bd[2] = {K, 1};
        calq_tensor in[8] = {tn(CALQ_DTYPE_UINT8, 2, ad, NULL),
                             f32s(1.0f),
                             zp8(CALQ_DTYPE_UINT8, 0),
                             tn(CALQ_DTYPE_INT8, 2, bd, NULL),
                             f32s(1.0f),
                             zp8(CALQ_DTYPE_INT8, 0),
                             f32s(1e6f),
                             zp8(CALQ_DTYPE_UINT8, 128)};
        memset(in[0].data, 255, (size_t)K);
        memset(in[3].data, 0x80, (size_t)K); /* -128 */
        calq_tensor y = {0};
        calq_error err;
        calq_status st = run_op("QLinearMatMul", 10, in, 8, &y, &err, NULL);
        printf("QLinearMatMul, K = %lld: %s\n", (long long)K, st == CALQ_OK ? "ok" : err.message);
        if (i == 0) {
            EXPECT(st == CALQ_ERR_DATA && strstr(err.message, "overflow") != NULL);
        } else {
            /* -2121.6 rounds to -2122, + 128 saturates at 0 */
            EXPECT(st == CALQ_OK && y.data && q8(&y, 0) == 0);
        }
        free_all(in, 8);
        calq_tensor_free_data(&y);
    }
}

/* NaN quantizes to the type's minimum, as in onnxruntime 1.30 on x86 (a C cast of NaN is
 * undefined); infinities saturate. */
static void test_quantize_nan(void)
{
    const int64_t xd = 5;
    const float xv[5] = {NAN, -NAN, 1.0f, -INFINITY, INFINITY};
    const int64_t want_s8[5] = {-128, -128, 5, -128, 127}, want_u8[5] = {0, 0, 130, 0, 255};
    for (int u = 0; u < 2; u++) {
        calq_dtype t = u ? CALQ_DTYPE_UINT8 : CALQ_DTYPE_INT8;
        calq_tensor in[3] = {tn(CALQ_DTYPE_FLOAT32, 1, &xd, xv), f32s(0.5f), zp8(t, u ? 128 : 3)};
        calq_tensor y = {0};
        calq_error err;
        EXPECT_OK(run_op("QuantizeLinear", 13, in, 3, &y, &err, NULL));
        for (int i = 0; y.data && i < 5; i++)
            if (q8(&y, i) != (u ? want_u8 : want_s8)[i]) {
                fprintf(stderr, "QuantizeLinear %s: %g gives %lld\n", calq_dtype_name(t), (double)xv[i],
                        (long long)q8(&y, i));
                failures++;
            }
        free_all(in, 3);
        calq_tensor_free_data(&y);
    }
}

static void qgemm_trans_b(op_case *oc)
{
    op_attr_int(oc, "transB", 1);
}

/* QGemm requantizing with finite scales whose multiplier overflows float32 (1e30 * 1e30 / 1e-30):
 * acc 0 gives 0 * inf = NaN, which becomes -128; acc 1 and -1 saturate. */
static void test_qgemm_nan_store(void)
{
    const int64_t ad[2] = {1, 3}, bd[2] = {3, 3};
    const int8_t av[3] = {0, 1, -1}, bv[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
    calq_tensor in[9] = {tn(CALQ_DTYPE_INT8, 2, ad, av),
                         f32s(1e30f),
                         zp8(CALQ_DTYPE_INT8, 0),
                         tn(CALQ_DTYPE_INT8, 2, bd, bv),
                         f32s(1e30f),
                         zp8(CALQ_DTYPE_INT8, 0),
                         {0},
                         f32s(1e-30f),
                         zp8(CALQ_DTYPE_INT8, 0)};
    calq_tensor y = {0};
    calq_error err;
    EXPECT_OK(run_op("QGemm", 1, in, 9, &y, &err, NULL));
    EXPECT(y.data && q8(&y, 0) == -128 && q8(&y, 1) == 127 && q8(&y, 2) == -128);
    free_all(in, 9);
    calq_tensor_free_data(&y);
}

/* A zero or non-finite scale is an error naming the input, at infer when the scale is known. */
static void test_bad_scales(void)
{
    const float bad[3] = {0.0f, INFINITY, NAN};
    const int64_t xd = 4, cd[4] = {1, 1, 2, 2}, wd[4] = {1, 1, 1, 1}, md[2] = {2, 2};
    for (int i = 0; i < 3; i++) {
        calq_tensor y = {0};
        calq_error err;
        /* QuantizeLinear y_scale */
        calq_tensor q[3] = {tn(CALQ_DTYPE_FLOAT32, 1, &xd, NULL), f32s(bad[i]), zp8(CALQ_DTYPE_INT8, 0)};
        calq_status st = run_op("QuantizeLinear", 13, q, 3, &y, &err, NULL);
        printf("QuantizeLinear, y_scale %g: %s\n", (double)bad[i], err.message);
        EXPECT(st == CALQ_ERR_DATA && strstr(err.message, "y_scale") != NULL);
        free_all(q, 3);
        calq_tensor_free_data(&y);
        /* QLinearConv y_scale */
        calq_tensor c[8] = {tn(CALQ_DTYPE_UINT8, 4, cd, NULL),
                            f32s(0.1f),
                            zp8(CALQ_DTYPE_UINT8, 0),
                            tn(CALQ_DTYPE_INT8, 4, wd, NULL),
                            f32s(0.1f),
                            zp8(CALQ_DTYPE_INT8, 0),
                            f32s(bad[i]),
                            zp8(CALQ_DTYPE_UINT8, 0)};
        st = run_op("QLinearConv", 10, c, 8, &y, &err, NULL);
        EXPECT(st == CALQ_ERR_DATA && strstr(err.message, "y_scale") != NULL);
        free_all(c, 8);
        calq_tensor_free_data(&y);
        /* QLinearMatMul b_scale, QGemm a_scale */
        calq_tensor m[8] = {tn(CALQ_DTYPE_UINT8, 2, md, NULL),
                            f32s(0.1f),
                            zp8(CALQ_DTYPE_UINT8, 0),
                            tn(CALQ_DTYPE_INT8, 2, md, NULL),
                            f32s(bad[i]),
                            zp8(CALQ_DTYPE_INT8, 0),
                            f32s(0.1f),
                            zp8(CALQ_DTYPE_UINT8, 0)};
        st = run_op("QLinearMatMul", 10, m, 8, &y, &err, NULL);
        EXPECT(st == CALQ_ERR_DATA && strstr(err.message, "b_scale") != NULL);
        calq_tensor_free_data(&y);
        calq_tensor tmp = m[1];
        m[1] = m[4];
        m[4] = tmp; /* a_scale bad, b_scale 0.1 */
        st = run_op("QGemm", 1, m, 6, &y, &err, NULL);
        EXPECT(st == CALQ_ERR_DATA && strstr(err.message, "a_scale") != NULL);
        free_all(m, 8);
        calq_tensor_free_data(&y);
    }
}

/* QGemm: a zero point typed unlike its data is rejected (it was read as whatever it was); an empty
 * inner dimension (K = 0, b transposed) gives y = c * (a_s * b_s), not "out of memory". */
static void test_qgemm_zero_points_and_empty_k(void)
{
    const int64_t ad[2] = {2, 3}, bd[2] = {3, 3};
    calq_tensor in[6] = {tn(CALQ_DTYPE_INT8, 2, ad, NULL), f32s(0.5f), zp8(CALQ_DTYPE_UINT8, 3),
                         tn(CALQ_DTYPE_INT8, 2, bd, NULL), f32s(0.5f), zp8(CALQ_DTYPE_INT8, 0)};
    calq_tensor y = {0};
    calq_error err;
    calq_status st = run_op("QGemm", 1, in, 6, &y, &err, NULL);
    printf("QGemm, uint8 a_zero_point for int8 a: %s\n", err.message);
    EXPECT(st == CALQ_ERR_UNSUPPORTED && strstr(err.message, "a_zero_point") != NULL);
    calq_tensor_free_data(&y);
    free_all(in, 6);

    const int64_t a0[2] = {2, 0}, b0[2] = {3, 0}, cn = 3;
    const int32_t cv[3] = {10, -20, 30};
    calq_tensor e[7] = {tn(CALQ_DTYPE_INT8, 2, a0, NULL), f32s(0.5f), zp8(CALQ_DTYPE_INT8, 0),
                        tn(CALQ_DTYPE_INT8, 2, b0, NULL), f32s(0.5f), zp8(CALQ_DTYPE_INT8, 0),
                        tn(CALQ_DTYPE_INT32, 1, &cn, cv)};
    st = run_op("QGemm", 1, e, 7, &y, &err, qgemm_trans_b);
    if (st != CALQ_OK) fprintf(stderr, "QGemm with K = 0: %s\n", err.message);
    EXPECT(st == CALQ_OK && y.dtype == CALQ_DTYPE_FLOAT32 && calq_tensor_numel(&y) == 6);
    const float want[6] = {2.5f, -5.0f, 7.5f, 2.5f, -5.0f, 7.5f};
    EXPECT(y.data && memcmp(y.data, want, sizeof want) == 0);
    free_all(e, 7);
    calq_tensor_free_data(&y);
}

int main(void)
{
    test_qlinear_matmul_values();
    test_qlinear_matmul_overflow();
    test_quantize_nan();
    test_qgemm_nan_store();
    test_bad_scales();
    test_qgemm_zero_points_and_empty_k();
    if (failures) printf("%d failure(s)\n", failures);
    return failures != 0;
}
