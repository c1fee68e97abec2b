/* onnxruntime's 8-bit com.microsoft operators (src/exec/kernels/qlinear_ops.c) against values
 * computed by hand from their definitions: QLinearAdd (with a half-way tie rounded to even),
 * QLinearMul, QLinearConcat (a copied and a requantized input), QLinearGlobalAveragePool (a tie),
 * QLinearLeakyRelu, QLinearSigmoid; the com.microsoft lookup also finds QGemm's one row (with its
 * oneDNN fast path, quant_ops.c); a per-channel scale is refused. */
#include <stdlib.h>
#include <string.h>

#include "base/tensor.h"
#include "expect.h"
#include "op_harness.h"

static calq_tensor t_q(calq_dtype dt, const int64_t *vals, int ndim, const int64_t *dims)
{
    calq_tensor t = {0};
    t.dtype = dt;
    t.ndim = ndim;
    for (int i = 0; i < ndim; i++) t.dims[i] = dims[i];
    calq__tensor_alloc(&t, NULL);
    for (int64_t i = 0; i < calq_tensor_numel(&t); i++) calq__tensor_set_i64(&t, i, vals[i]);
    return t;
}

static calq_tensor s_f(float v)
{
    return t_f32(&v, 0, NULL);
}

static calq_tensor s_q(calq_dtype dt, int64_t v)
{
    return t_q(dt, &v, 0, NULL);
}

static op_case msft(const char *op, int n_in)
{
    op_case c = op_case_new(op, 1, n_in, 1);
    free(c.g->nodes[c.node].domain);
    c.g->nodes[c.node].domain = strdup("com.microsoft");
    return c;
}

/* Runs the case and checks the output's type and integers; frees the inputs. */
static void expect_q(op_case *c, calq_tensor *in, int n_in, calq_dtype dt, const int64_t *want, int64_t n,
                     const char *what)
{
    calq_tensor out = {0};
    calq_error err = {0};
    calq_status st = op_case_run(c, in, n_in, &out, 1, 0, &err);
    EXPECT_STATUS(st, CALQ_OK, &err, NULL);
    if (st == CALQ_OK) {
        EXPECT(out.dtype == dt);
        EXPECT(calq_tensor_numel(&out) == n);
        for (int64_t i = 0; i < n && i < calq_tensor_numel(&out); i++)
            if (calq__tensor_get_i64(&out, i) != want[i]) {
                fprintf(stderr, "%s: element %lld is %lld, expected %lld\n", what, (long long)i,
                        (long long)calq__tensor_get_i64(&out, i), (long long)want[i]);
                failures++;
            }
    }
    calq_tensor_free_data(&out);
    for (int i = 0; i < n_in; i++) calq_tensor_free_data(&in[i]);
    op_case_free(c);
}

int main(void)
{
    const calq_dtype U8 = CALQ_DTYPE_UINT8, I8 = CALQ_DTYPE_INT8;
    const int64_t d4[1] = {4}, d2[1] = {2};
    { /* C = 0.5 (a - 10) + 0.25 b: 0, 6.25, 120, 154.5 (a tie: 154) */
        op_case c = msft("QLinearAdd", 8);
        calq_tensor in[8] = {t_q(U8, (int64_t[]){10, 20, 200, 255}, 1, d4),
                             s_f(0.5f),
                             s_q(U8, 10),
                             t_q(U8, (int64_t[]){0, 5, 100, 128}, 1, d4),
                             s_f(0.25f),
                             s_q(U8, 0),
                             s_f(1.0f),
                             s_q(U8, 0)};
        expect_q(&c, in, 8, U8, (int64_t[]){0, 6, 120, 154}, 4, "QLinearAdd");
    }
    { /* (0.5 (12 - 10)) (0.5 * 4) / 0.25 = 8; then 0.5 * 245 * 0.5 * 255 / 0.25 saturates at 255 */
        op_case c = msft("QLinearMul", 8);
        calq_tensor in[8] = {t_q(U8, (int64_t[]){12, 255}, 1, d2),
                             s_f(0.5f),
                             s_q(U8, 10),
                             t_q(U8, (int64_t[]){4, 255}, 1, d2),
                             s_f(0.5f),
                             s_q(U8, 0),
                             s_f(0.25f),
                             s_q(U8, 0)};
        expect_q(&c, in, 8, U8, (int64_t[]){8, 255}, 2, "QLinearMul");
    }
    { /* Y (scale 1): X1 with Y's factors copied; X2 scale 0.5 requantized: 5, 10.5 -> 10 */
        op_case c = msft("QLinearConcat", 8);
        op_attr_int(&c, "axis", 0);
        calq_tensor in[8] = {s_f(1.0f), s_q(U8, 0), t_q(U8, (int64_t[]){1, 2}, 1, d2),
                             s_f(1.0f), s_q(U8, 0), t_q(U8, (int64_t[]){10, 21}, 1, d2),
                             s_f(0.5f), s_q(U8, 0)};
        expect_q(&c, in, 8, U8, (int64_t[]){1, 2, 5, 10}, 4, "QLinearConcat");
    }
    { /* per channel: (0 + 10) / 2 = 5, (20 + 31) / 2 = 25.5 -> 26 */
        op_case c = msft("QLinearGlobalAveragePool", 5);
        calq_tensor in[5] = {t_q(U8, (int64_t[]){10, 20, 30, 41}, 4, (int64_t[]){1, 2, 1, 2}), s_f(1.0f), s_q(U8, 10),
                             s_f(1.0f), s_q(U8, 0)};
        expect_q(&c, in, 5, U8, (int64_t[]){5, 26}, 2, "QLinearGlobalAveragePool");
    }
    { /* alpha 0.5: -1 -> -0.5 (-5 steps of 0.1), 1 -> 1 (10 steps) */
        op_case c = msft("QLinearLeakyRelu", 5);
        op_attr_float(&c, "alpha", 0.5f);
        calq_tensor in[5] = {t_q(I8, (int64_t[]){-10, 10}, 1, d2), s_f(0.1f), s_q(I8, 0), s_f(0.1f), s_q(I8, 0)};
        expect_q(&c, in, 5, I8, (int64_t[]){-5, 10}, 2, "QLinearLeakyRelu");
    }
    { /* sigmoid(0) = 0.5 = 128 steps of 1/256, zero point -128: 0; sigmoid(100) = 1 -> 127 (saturated) */
        op_case c = msft("QLinearSigmoid", 5);
        calq_tensor in[5] = {t_q(I8, (int64_t[]){0, 100}, 1, d2), s_f(1.0f), s_q(I8, 0), s_f(1.0f / 256.0f),
                             s_q(I8, -128)};
        expect_q(&c, in, 5, I8, (int64_t[]){0, 127}, 2, "QLinearSigmoid");
    }
    { /* a per-channel scale is not onnxruntime's signature */
        op_case c = msft("QLinearAdd", 8);
        calq_tensor in[8] = {t_q(U8, (int64_t[]){1, 2}, 1, d2),
                             t_f32((float[]){1, 2}, 1, d2),
                             s_q(U8, 0),
                             t_q(U8, (int64_t[]){1, 2}, 1, d2),
                             s_f(1.0f),
                             s_q(U8, 0),
                             s_f(1.0f),
                             s_q(U8, 0)};
        calq_tensor out = {0};
        calq_error err = {0};
        EXPECT_STATUS(op_case_run(&c, in, 8, &out, 1, 0, &err), CALQ_ERR_SHAPE, &err, "one value each");
        calq_tensor_free_data(&out);
        for (int i = 0; i < 8; i++) calq_tensor_free_data(&in[i]);
        op_case_free(&c);
    }
    /* QGemm is one row for both domains, with its fast path */
    EXPECT(calq__op_find("com.microsoft", "QGemm") == calq__op_find("", "QGemm"));
    EXPECT(calq__op_find("com.microsoft", "QGemm")->run_fast != NULL);
    EXPECT(calq__op_find("com.microsoft", "MatMulIntegerToFloat") == calq__op_find("", "MatMulIntegerToFloat"));
    EXPECT(calq__op_find("com.microsoft", "Conv") == NULL);
    EXPECT(calq__op_find("", "QLinearAdd") == NULL);
    if (failures) fprintf(stderr, "%d failure(s)\n", failures);
    return TEST_RESULT();
}
