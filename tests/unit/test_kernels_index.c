/* Index, sort and normalization operators beyond what the ONNX node tests pin down: bad indices
 * fail cleanly without writing, reductions of duplicate indices apply in index order, the opset
 * rules of ScatterElements' reductions and GroupNormalization's scale, TopK's tie and NaN order,
 * and bit-identical results across thread counts. (The node tests themselves run in
 * conformance.onnx_backend.) */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expect.h"
#include "op_harness.h"

static void free_all(calq_tensor *t, int n)
{
    for (int i = 0; i < n; i++) calq_tensor_free_data(&t[i]);
}

static int values_are(const calq_tensor *t, const double *want, int64_t n)
{
    if (calq_tensor_numel(t) != n) return 0;
    for (int64_t i = 0; i < n; i++)
        if (!(fabs(calq__tensor_get_f64(t, i) - want[i]) <= 1e-6 * (1 + fabs(want[i])))) {
            fprintf(stderr, "element %lld: %.9g, want %.9g\n", (long long)i, calq__tensor_get_f64(t, i), want[i]);
            return 0;
        }
    return 1;
}

static void scatter_nd_cases(void)
{
    const float data[4] = {1, 2, 3, 4}, upd[3] = {10, 20, 30};
    const int64_t d4[1] = {4}, di[2] = {3, 1}, du[1] = {3};
    const int64_t idx[3] = {1, -1, 1}; /* 1 twice, -1 = 3 */
    calq_tensor in[3] = {t_f32(data, 1, d4), t_i64(idx, 2, di), t_f32(upd, 1, du)}, out[1] = {{0}};
    calq_error err = {0};

    op_case oc = op_case_new("ScatterND", 16, 3, 1);
    op_attr_str(&oc, "reduction", "add");
    EXPECT_STATUS(op_case_run(&oc, in, 3, out, 1, 0, &err), CALQ_OK, &err, NULL);
    const double want_add[4] = {1, 2 + 10 + 30, 3, 4 + 20};
    EXPECT(values_are(&out[0], want_add, 4));
    calq_tensor_free_data(&out[0]);
    op_case_free(&oc);

    /* reduction "none" with duplicates: the last update wins. */
    oc = op_case_new("ScatterND", 13, 3, 1);
    EXPECT_STATUS(op_case_run(&oc, in, 3, out, 1, 0, &err), CALQ_OK, &err, NULL);
    const double want_none[4] = {1, 30, 3, 20};
    EXPECT(values_are(&out[0], want_none, 4));
    calq_tensor_free_data(&out[0]);
    op_case_free(&oc);

    /* max at opset 16 is not defined yet; at 18 it is. */
    oc = op_case_new("ScatterND", 16, 3, 1);
    op_attr_str(&oc, "reduction", "max");
    EXPECT_STATUS(op_case_run(&oc, in, 3, out, 1, 0, &err), CALQ_ERR_UNSUPPORTED, &err,
                  "'max' is not defined at opset 16");
    free_all(out, 1);
    op_case_free(&oc);
    oc = op_case_new("ScatterND", 18, 3, 1);
    op_attr_str(&oc, "reduction", "min");
    EXPECT_STATUS(op_case_run(&oc, in, 3, out, 1, 0, &err), CALQ_OK, &err, NULL);
    const double want_min[4] = {1, 2, 3, 4};
    EXPECT(values_are(&out[0], want_min, 4));
    calq_tensor_free_data(&out[0]);
    op_case_free(&oc);

    /* An index out of range fails naming it. */
    ((int64_t *)in[1].data)[2] = 4;
    oc = op_case_new("ScatterND", 13, 3, 1);
    EXPECT_STATUS(op_case_run(&oc, in, 3, out, 1, 0, &err), CALQ_ERR_DATA, &err, "index 4 (element 2");
    free_all(out, 1);
    op_case_free(&oc);
    free_all(in, 3);
}

static void scatter_elements_cases(void)
{
    /* data [2,3], indices along axis 1 */
    const float data[6] = {0, 0, 0, 0, 0, 0}, upd[4] = {1, 2, 3, 4};
    const int64_t dd[2] = {2, 3}, di[2] = {2, 2}, idx[4] = {2, 2, 0, -3};
    calq_tensor in[3] = {t_f32(data, 2, dd), t_i64(idx, 2, di), t_f32(upd, 2, di)}, out[1] = {{0}};
    calq_error err = {0};
    op_case oc = op_case_new("ScatterElements", 18, 3, 1);
    op_attr_int(&oc, "axis", 1);
    op_attr_str(&oc, "reduction", "max");
    EXPECT_STATUS(op_case_run(&oc, in, 3, out, 1, 0, &err), CALQ_OK, &err, NULL);
    const double want[6] = {0, 0, 2, 4, 0, 0};
    EXPECT(values_are(&out[0], want, 6));
    calq_tensor_free_data(&out[0]);
    op_case_free(&oc);
    free_all(in, 3);
}

static void gather_nd_batch(void)
{
    /* data [2,2,2], batch_dims 1, indices [2,1]: out[b] = data[b, idx[b]] */
    const float data[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    const int64_t dd[3] = {2, 2, 2}, di[2] = {2, 1}, idx[2] = {1, 0};
    calq_tensor in[2] = {t_f32(data, 3, dd), t_i64(idx, 2, di)}, out[1] = {{0}};
    calq_error err = {0};
    op_case oc = op_case_new("GatherND", 13, 2, 1);
    op_attr_int(&oc, "batch_dims", 1);
    EXPECT_STATUS(op_case_run(&oc, in, 2, out, 1, 0, &err), CALQ_OK, &err, NULL);
    const double want[4] = {2, 3, 4, 5};
    EXPECT(out[0].ndim == 2 && out[0].dims[0] == 2 && out[0].dims[1] == 2);
    EXPECT(values_are(&out[0], want, 4));
    calq_tensor_free_data(&out[0]);
    op_case_free(&oc);
    free_all(in, 2);
}

static void topk_order(void)
{
    const float x[6] = {3, NAN, 5, 3, 5, -1};
    const int64_t dx[1] = {6}, dk[1] = {1}, k = 4;
    calq_tensor in[2] = {t_f32(x, 1, dx), t_i64(&k, 1, dk)}, out[2] = {{0}};
    calq_error err = {0};
    op_case oc = op_case_new("TopK", 11, 2, 2);
    EXPECT_STATUS(op_case_run(&oc, in, 2, out, 2, 0, &err), CALQ_OK, &err, NULL);
    /* NaN first (the largest), then the equal 5s and 3s in input order. */
    const double want_i[4] = {1, 2, 4, 0};
    EXPECT(values_are(&out[1], want_i, 4));
    EXPECT(isnan(((float *)out[0].data)[0]));
    free_all(out, 2);
    op_case_free(&oc);
    oc = op_case_new("TopK", 11, 2, 2);
    op_attr_int(&oc, "largest", 0);
    EXPECT_STATUS(op_case_run(&oc, in, 2, out, 2, 0, &err), CALQ_OK, &err, NULL);
    const double want_s[4] = {5, 0, 3, 2};
    EXPECT(values_are(&out[1], want_s, 4));
    free_all(out, 2);
    op_case_free(&oc);
    ((int64_t *)in[1].data)[0] = 7;
    oc = op_case_new("TopK", 11, 2, 2);
    EXPECT_STATUS(op_case_run(&oc, in, 2, out, 2, 0, &err), CALQ_ERR_SHAPE, &err, "K = 7 is outside [0, 6]");
    free_all(out, 2);
    op_case_free(&oc);
    free_all(in, 2);
}

/* GroupNormalization: opset 18 scales per group, opset 21 per channel. */
static void group_norm_opsets(void)
{
    const float x[4] = {1, 3, 10, 30}; /* N=1, C=4, no spatial dims beyond 1 */
    const int64_t dx[3] = {1, 4, 1}, d2[1] = {2}, d4[1] = {4};
    const float s2[2] = {1, 2}, b2[2] = {0, 0}, s4[4] = {1, 2, 3, 4}, b4[4] = {0, 0, 0, 1};
    calq_error err = {0};
    calq_tensor in[3] = {t_f32(x, 3, dx), t_f32(s2, 1, d2), t_f32(b2, 1, d2)}, out[1] = {{0}};
    op_case oc = op_case_new("GroupNormalization", 18, 3, 1);
    op_attr_int(&oc, "num_groups", 2);
    op_attr_float(&oc, "epsilon", 0.0f);
    EXPECT_STATUS(op_case_run(&oc, in, 3, out, 1, 0, &err), CALQ_OK, &err, NULL);
    const double want18[4] = {-1, 1, -2, 2};
    EXPECT(values_are(&out[0], want18, 4));
    calq_tensor_free_data(&out[0]);
    op_case_free(&oc);
    free_all(in + 1, 2);
    in[1] = t_f32(s4, 1, d4);
    in[2] = t_f32(b4, 1, d4);
    oc = op_case_new("GroupNormalization", 21, 3, 1);
    op_attr_int(&oc, "num_groups", 2);
    op_attr_float(&oc, "epsilon", 0.0f);
    EXPECT_STATUS(op_case_run(&oc, in, 3, out, 1, 0, &err), CALQ_OK, &err, NULL);
    const double want21[4] = {-1, 2, -3, 5};
    EXPECT(values_are(&out[0], want21, 4));
    calq_tensor_free_data(&out[0]);
    op_case_free(&oc);
    /* opset 21 with per-group scales is a shape error. */
    free_all(in + 1, 2);
    in[1] = t_f32(s2, 1, d2);
    in[2] = t_f32(b2, 1, d2);
    oc = op_case_new("GroupNormalization", 21, 3, 1);
    op_attr_int(&oc, "num_groups", 2);
    EXPECT_STATUS(op_case_run(&oc, in, 3, out, 1, 0, &err), CALQ_ERR_SHAPE, &err, "4 values are needed");
    free_all(out, 1);
    op_case_free(&oc);
    free_all(in, 3);
}

/* LayerNormalization and TopK over many rows: the same bits on 1 and 2 threads. */
static void thread_identity(void)
{
    const int64_t dx[2] = {256, 384}, ds[1] = {384}, dk[1] = {1}, k = 5;
    calq_tensor x = t_rand_f32(7, 2, dx, -3, 3), s = t_rand_f32(8, 1, ds, 0.5f, 2), b = t_rand_f32(9, 1, ds, -1, 1);
    calq_tensor kk = t_i64(&k, 1, dk);
    const char *ops[2] = {"LayerNormalization", "TopK"};
    for (int o = 0; o < 2; o++) {
        calq_tensor out[2][3];
        for (int t = 0; t < 2; t++) {
            omp_set_num_threads(t + 1);
            op_case oc = op_case_new(ops[o], 17, o ? 2 : 3, o ? 2 : 1);
            calq_tensor in[3] = {x, o ? kk : s, b};
            calq_error err = {0};
            EXPECT_STATUS(op_case_run(&oc, in, o ? 2 : 3, out[t], o ? 2 : 1, 0, &err), CALQ_OK, &err, NULL);
            op_case_free(&oc);
        }
        EXPECT(memcmp(out[0][0].data, out[1][0].data, calq__tensor_nbytes(&out[0][0])) == 0);
        free_all(out[0], o ? 2 : 1);
        free_all(out[1], o ? 2 : 1);
    }
    omp_set_num_threads(2);
    calq_tensor_free_data(&x);
    calq_tensor_free_data(&s);
    calq_tensor_free_data(&b);
    calq_tensor_free_data(&kk);
}

int main(void)
{
    scatter_nd_cases();
    scatter_elements_cases();
    gather_nd_batch();
    topk_order();
    group_norm_opsets();
    thread_identity();
    printf("test_kernels_index: %d failure(s)\n", failures + failures);
    return failures + failures != 0;
}
