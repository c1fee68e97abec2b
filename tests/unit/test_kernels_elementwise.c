/* Elementwise kernels against hand-computed values: broadcasting, dtypes, optional inputs,
 * error paths, and the parallel path against a plain index-arithmetic reference. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernels/logistic.h"
#include "op_harness.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* A tensor of any dtype from a value array of that dtype (NULL vals: zero-filled). */
static calq_tensor mk(calq_dtype dt, int nd, const int64_t *dims, const void *vals)
{
    calq_tensor t = {0};
    t.dtype = dt;
    t.ndim = nd;
    for (int i = 0; i < nd; i++) t.dims[i] = dims[i];
    calq__tensor_alloc(&t, NULL);
    if (vals) memcpy(t.data, vals, calq__tensor_nbytes(&t));
    return t;
}

static void free_all(calq_tensor *t, int n)
{
    for (int i = 0; i < n; i++) calq_tensor_free_data(&t[i]);
}

/* The ops whose float32 fast kernel is glibc's vector math (exec/kernels/elementwise_mvec.c):
 * within a few ulp of the reference, not bit-identical to it. */
static int mvec_op(const op_case *c, const calq_tensor *in)
{
    static const char *const ops[] = {"Erf", "Exp", "Tanh", "Sigmoid", "Gelu"};
    if (in[0].dtype != CALQ_DTYPE_FLOAT32) return 0;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (strcmp(c->g->nodes[c->node].op_type, ops[i]) == 0) return 1;
    return 0;
}

/* Distance in units in the last place between two floats (0 for two NaNs; huge for NaN vs a
 * number or for opposite infinities). */
static double ulp_dist(float a, float b)
{
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b) ? 0 : 1e30;
    if (a == b) return 0;
    if (isinf(a) || isinf(b)) return 1e30;
    int32_t ia, ib;
    memcpy(&ia, &a, 4);
    memcpy(&ib, &b, 4);
    if (ia < 0) ia = INT32_MIN - ia; /* sign-magnitude to a monotonic integer line */
    if (ib < 0) ib = INT32_MIN - ib;
    return fabs((double)ia - (double)ib);
}

/* fast is within tol ulp of ref; or, for Gelu (gelu set), within 4e-7 |x| absolutely: 0.5 x (1 +
 * erf(x / sqrt 2)) near x = -4 is formed by cancellation and inherits erf's absolute error
 * (a few ulp of 1) times 0.5 |x|, not a relative one. */
static int close_ulp(const calq_tensor *fast, const calq_tensor *ref, const calq_tensor *x, double tol, int gelu,
                     const char *what)
{
    const float *f = fast->data, *r = ref->data, *xv = x->data;
    for (int64_t i = 0, n = calq_tensor_numel(ref); i < n; i++) {
        if (ulp_dist(f[i], r[i]) <= tol) continue;
        if (gelu && fabs((double)f[i] - (double)r[i]) <= 4e-7 * fabs((double)xv[i])) continue;
        fprintf(stderr, "%s: element %lld (x = %.9g): fast %.9g, reference %.9g (%.0f ulp)\n", what, (long long)i,
                xv[i], f[i], r[i], ulp_dist(f[i], r[i]));
        return 0;
    }
    return 1;
}

/* Runs op on inputs (freed afterwards) into out[0..n_out); both kernels (reference and fast)
 * must agree bit for bit (within 8 ulp for the vector-math ops). Returns the status. */
static calq_status run_op(op_case *c, calq_tensor *in, int n_in, calq_tensor *out, int n_out)
{
    calq_error err = {0};
    calq_status s = op_case_run(c, in, n_in, out, n_out, 0, &err);
    if (s == CALQ_OK) {
        calq_tensor fast[4];
        calq_error e2 = {0};
        EXPECT(op_case_run(c, in, n_in, fast, n_out, 1, &e2) == CALQ_OK);
        for (int i = 0; i < n_out; i++) {
            if (mvec_op(c, in))
                EXPECT(close_ulp(&fast[i], &out[i], &in[0], 8, strcmp(c->g->nodes[c->node].op_type, "Gelu") == 0,
                                 c->g->nodes[c->node].op_type));
            else
                EXPECT(memcmp(fast[i].data, out[i].data, calq__tensor_nbytes(&out[i])) == 0);
            calq_tensor_free_data(&fast[i]);
        }
    } else {
        printf("  error %s: %s\n", calq_status_name(s), err.message);
    }
    free_all(in, n_in);
    op_case_free(c);
    return s;
}

/* out has dtype dt, shape dims and values vals (exactly, or within 1e-6 relative for floats). */
static void expect(calq_tensor *out, calq_dtype dt, int nd, const int64_t *dims, const void *vals, const char *what)
{
    calq_tensor e = mk(dt, nd, dims, vals);
    EXPECT(out->dtype == dt);
    int ok = out->dtype == dt && t_close(out, &e, 1e-6, 1e-30, what);
    if (!ok) {
        fprintf(stderr, "%s: mismatch\n", what);
        failures++;
    }
    calq_tensor_free_data(&e);
    calq_tensor_free_data(out);
}

static void test_add_broadcast(void)
{
    int64_t da[3] = {2, 3, 4}, db[2] = {3, 1};
    float a[24], b[3] = {10, 20, 30}, want[24];
    for (int i = 0; i < 24; i++) {
        a[i] = (float)i;
        want[i] = (float)i + b[(i / 4) % 3];
    }
    calq_tensor in[2] = {t_f32(a, 3, da), t_f32(b, 2, db)}, out[1];
    op_case c = op_case_new("Add", 14, 2, 1);
    EXPECT_OK(run_op(&c, in, 2, out, 1));
    expect(&out[0], CALQ_DTYPE_FLOAT32, 3, da, want, "Add [2,3,4]+[3,1]");

    /* [1] + [] keeps rank 1 */
    int64_t d1[1] = {1};
    float x = 2.5f, y = 1.5f, w = 4.0f;
    calq_tensor in2[2] = {t_f32(&x, 1, d1), t_f32(&y, 0, NULL)};
    c = op_case_new("Add", 14, 2, 1);
    EXPECT_OK(run_op(&c, in2, 2, out, 1));
    expect(&out[0], CALQ_DTYPE_FLOAT32, 1, d1, &w, "Add [1]+[]");

    /* [] + [] stays a scalar; float64 */
    double p = 0.25, q = 1e300, r = 1e300 + 0.25;
    calq_tensor in3[2] = {mk(CALQ_DTYPE_FLOAT64, 0, NULL, &p), mk(CALQ_DTYPE_FLOAT64, 0, NULL, &q)};
    c = op_case_new("Add", 14, 2, 1);
    EXPECT_OK(run_op(&c, in3, 2, out, 1));
    EXPECT(out[0].ndim == 0);
    expect(&out[0], CALQ_DTYPE_FLOAT64, 0, NULL, &r, "Add f64 scalars");
}

static void test_int64_mul_div(void)
{
    int64_t d4[1] = {4}, d22[2] = {2, 2};
    int64_t a[4] = {7, -7, 7, -7}, b[4] = {2, 2, -2, -2};
    int64_t wdiv[4] = {3, -3, -3, 3}, wmul[4] = {14, -14, -14, 14};
    calq_tensor in[2] = {t_i64(a, 1, d4), t_i64(b, 1, d4)}, out[1];
    op_case c = op_case_new("Div", 14, 2, 1);
    EXPECT_OK(run_op(&c, in, 2, out, 1));
    expect(&out[0], CALQ_DTYPE_INT64, 1, d4, wdiv, "int64 Div truncates");

    calq_tensor in2[2] = {t_i64(a, 1, d4), t_i64(b, 1, d4)};
    c = op_case_new("Mul", 14, 2, 1);
    EXPECT_OK(run_op(&c, in2, 2, out, 1));
    expect(&out[0], CALQ_DTYPE_INT64, 1, d4, wmul, "int64 Mul");

    /* shape arithmetic as exporters write it: [N, C*H] = shape * scalar, by broadcasting */
    int64_t shp[2] = {3, 40}, two = 2, wsh[2] = {6, 80};
    int64_t d2[1] = {2};
    calq_tensor in3[2] = {t_i64(shp, 1, d2), t_i64(&two, 0, NULL)};
    c = op_case_new("Mul", 14, 2, 1);
    EXPECT_OK(run_op(&c, in3, 2, out, 1));
    expect(&out[0], CALQ_DTYPE_INT64, 1, d2, wsh, "int64 Mul by scalar");

    /* INT64_MIN / -1 wraps instead of trapping; Sub wraps */
    int64_t m[4] = {INT64_MIN, 9, -9, 0}, n1[2] = {-1, 4};
    int64_t wm[4] = {INT64_MIN, -9, -2, 0};
    int64_t dn[2] = {2, 1};
    calq_tensor in4[2] = {t_i64(m, 2, d22), t_i64(n1, 2, dn)};
    c = op_case_new("Div", 14, 2, 1);
    EXPECT_OK(run_op(&c, in4, 2, out, 1));
    expect(&out[0], CALQ_DTYPE_INT64, 2, d22, wm, "int64 Div [2,2]/[2,1]");

    int32_t i32a[2] = {INT32_MAX, -5}, i32b[2] = {1, 3}, i32w[2] = {INT32_MIN, -2};
    calq_tensor in5[2] = {mk(CALQ_DTYPE_INT32, 1, d2, i32a), mk(CALQ_DTYPE_INT32, 1, d2, i32b)};
    c = op_case_new("Add", 14, 2, 1);
    EXPECT_OK(run_op(&c, in5, 2, out, 1));
    expect(&out[0], CALQ_DTYPE_INT32, 1, d2, i32w, "int32 Add wraps");
}

static void test_div_by_zero(void)
{
    int64_t d3[1] = {3}, a[3] = {1, 2, 3}, b[3] = {1, 0, 1};
    calq_tensor in[2] = {t_i64(a, 1, d3), t_i64(b, 1, d3)}, out[1];
    op_case c = op_case_new("Div", 14, 2, 1);
    EXPECT(run_op(&c, in, 2, out, 1) == CALQ_ERR_DATA);
    calq_tensor_free_data(&out[0]);

    int32_t ia[3] = {1, 2, 3}, zero = 0;
    calq_tensor in2[2] = {mk(CALQ_DTYPE_INT32, 1, d3, ia), mk(CALQ_DTYPE_INT32, 0, NULL, &zero)};
    c = op_case_new("Div", 14, 2, 1);
    EXPECT(run_op(&c, in2, 2, out, 1) == CALQ_ERR_DATA);
    calq_tensor_free_data(&out[0]);

    /* float division by zero is IEEE: inf, no error */
    float fa[3] = {1, -1, 0}, fz = 0;
    calq_tensor in3[2] = {t_f32(fa, 1, d3), t_f32(&fz, 0, NULL)};
    c = op_case_new("Div", 14, 2, 1);
    EXPECT_OK(run_op(&c, in3, 2, out, 1));
    const float *o = out[0].data;
    EXPECT(isinf(o[0]) && o[0] > 0 && isinf(o[1]) && o[1] < 0 && isnan(o[2]));
    calq_tensor_free_data(&out[0]);
}

static void test_clip(void)
{
    int64_t d4[1] = {4};
    float x[4] = {-5, 0, 5, 10}, hi = 4, w[4] = {-5, 0, 4, 4};
    calq_tensor none = {0}, out[1];
    calq_tensor in[3] = {t_f32(x, 1, d4), none, t_f32(&hi, 0, NULL)};
    op_case c = op_case_new("Clip", 13, 3, 1);
    EXPECT_OK(run_op(&c, in, 3, out, 1));
    expect(&out[0], CALQ_DTYPE_FLOAT32, 1, d4, w, "Clip, min omitted");

    /* opset 6: attributes */
    float w6[4] = {-1, 0, 2, 2};
    calq_tensor in2[1] = {t_f32(x, 1, d4)};
    c = op_case_new("Clip", 6, 1, 1);
    op_attr_float(&c, "min", -1);
    op_attr_float(&c, "max", 2);
    EXPECT_OK(run_op(&c, in2, 1, out, 1));
    expect(&out[0], CALQ_DTYPE_FLOAT32, 1, d4, w6, "Clip opset 6");

    /* int8 with only min given */
    int8_t xi[4] = {-128, -3, 0, 127}, lo = -2, wi[4] = {-2, -2, 0, 127};
    calq_tensor in3[2] = {mk(CALQ_DTYPE_INT8, 1, d4, xi), mk(CALQ_DTYPE_INT8, 0, NULL, &lo)};
    c = op_case_new("Clip", 13, 2, 1);
    EXPECT_OK(run_op(&c, in3, 2, out, 1));
    expect(&out[0], CALQ_DTYPE_INT8, 1, d4, wi, "Clip int8 min only");

    /* a non-scalar bound is a shape error */
    calq_tensor in4[2] = {t_f32(x, 1, d4), t_f32(x, 1, d4)};
    c = op_case_new("Clip", 13, 2, 1);
    EXPECT(run_op(&c, in4, 2, out, 1) == CALQ_ERR_SHAPE);
}

static void test_prelu(void)
{
    int64_t dx[4] = {1, 2, 2, 2}, ds[3] = {2, 1, 1}, dc[1] = {2};
    float x[8] = {-1, 2, -3, 4, -1, 2, -3, 4}, s[2] = {0.5f, 0.25f};
    float w[8] = {-0.5f, 2, -1.5f, 4, -0.25f, 2, -0.75f, 4};
    calq_tensor in[2] = {t_f32(x, 4, dx), t_f32(s, 3, ds)}, out[1];
    op_case c = op_case_new("PRelu", 16, 2, 1);
    EXPECT_OK(run_op(&c, in, 2, out, 1));
    expect(&out[0], CALQ_DTYPE_FLOAT32, 4, dx, w, "PRelu per-channel [2,1,1]");

    /* a 1-D slope of the channel count that numpy rules reject is read per channel */
    int64_t dx3[4] = {1, 2, 1, 3};
    float x3[6] = {-1, 2, -3, -4, 5, -6}, w3[6] = {-0.5f, 2, -1.5f, -1, 5, -1.5f};
    calq_tensor in2[2] = {t_f32(x3, 4, dx3), t_f32(s, 1, dc)};
    c = op_case_new("PRelu", 9, 2, 1);
    EXPECT_OK(run_op(&c, in2, 2, out, 1));
    expect(&out[0], CALQ_DTYPE_FLOAT32, 4, dx3, w3, "PRelu slope [C]");

    /* the slope must not grow X */
    int64_t dbig[4] = {2, 2, 2, 2};
    float big[16] = {0};
    calq_tensor in3[2] = {t_f32(x, 4, dx), t_f32(big, 4, dbig)};
    c = op_case_new("PRelu", 16, 2, 1);
    EXPECT(run_op(&c, in3, 2, out, 1) == CALQ_ERR_SHAPE);
}

static void test_where(void)
{
    int64_t dc[2] = {2, 1}, dx[2] = {1, 3}, dw[2] = {2, 3};
    uint8_t cond[2] = {1, 0};
    float x[3] = {1, 2, 3}, y = -1, w[6] = {1, 2, 3, -1, -1, -1};
    calq_tensor in[3] = {mk(CALQ_DTYPE_BOOL, 2, dc, cond), t_f32(x, 2, dx), t_f32(&y, 0, NULL)}, out[1];
    op_case c = op_case_new("Where", 16, 3, 1);
    EXPECT_OK(run_op(&c, in, 3, out, 1));
    expect(&out[0], CALQ_DTYPE_FLOAT32, 2, dw, w, "Where [2,1],[1,3],[]");

    int64_t xi[3] = {10, 20, 30}, yi[3] = {-1, -2, -3}, wi[6] = {10, 20, 30, -1, -2, -3};
    int64_t d3[1] = {3};
    calq_tensor in2[3] = {mk(CALQ_DTYPE_BOOL, 2, dc, cond), t_i64(xi, 1, d3), t_i64(yi, 1, d3)};
    c = op_case_new("Where", 16, 3, 1);
    EXPECT_OK(run_op(&c, in2, 3, out, 1));
    expect(&out[0], CALQ_DTYPE_INT64, 2, dw, wi, "Where int64");

    /* the condition must be bool; X and Y must agree */
    calq_tensor in3[3] = {t_f32(x, 1, d3), t_f32(x, 1, d3), t_f32(x, 1, d3)};
    c = op_case_new("Where", 16, 3, 1);
    EXPECT(run_op(&c, in3, 3, out, 1) == CALQ_ERR_SHAPE);
    calq_tensor in4[3] = {mk(CALQ_DTYPE_BOOL, 2, dc, cond), t_f32(x, 1, d3), t_i64(yi, 1, d3)};
    c = op_case_new("Where", 16, 3, 1);
    EXPECT(run_op(&c, in4, 3, out, 1) == CALQ_ERR_SHAPE);
}

static void test_cast(void)
{
    int64_t d6[1] = {6}, d5[1] = {5};
    float x[6] = {300.7f, -300.0f, 1.9f, -1.9f, NAN, 127.0f};
    int8_t w8[6] = {127, -128, 1, -1, 0, 127};
    calq_tensor in[1] = {t_f32(x, 1, d6)}, out[1];
    op_case c = op_case_new("Cast", 13, 1, 1);
    op_attr_int(&c, "to", 3);
    EXPECT_OK(run_op(&c, in, 1, out, 1));
    expect(&out[0], CALQ_DTYPE_INT8, 1, d6, w8, "Cast float->int8 truncates and saturates");

    /* float -> float16 -> float */
    float h[5] = {1.0f, 0.1f, 65504.0f, 1e-8f, -70000.0f};
    float wh[5] = {1.0f, 0.0999755859375f, 65504.0f, 0.0f, -INFINITY};
    calq_tensor in2[1] = {t_f32(h, 1, d5)}, half[1];
    c = op_case_new("Cast", 13, 1, 1);
    op_attr_int(&c, "to", 10);
    EXPECT_OK(run_op(&c, in2, 1, half, 1));
    EXPECT(half[0].dtype == CALQ_DTYPE_FLOAT16);
    c = op_case_new("Cast", 13, 1, 1);
    op_attr_int(&c, "to", 1);
    EXPECT_OK(run_op(&c, half, 1, out, 1));
    const float *o = out[0].data;
    for (int i = 0; i < 5; i++) EXPECT(o[i] == wh[i]);
    calq_tensor_free_data(&out[0]);

    /* int64 -> int8 wraps like numpy astype; bool -> float */
    int64_t big[3] = {300, -129, 5};
    int8_t wb[3] = {44, 127, 5};
    int64_t d3[1] = {3};
    calq_tensor in3[1] = {t_i64(big, 1, d3)};
    c = op_case_new("Cast", 13, 1, 1);
    op_attr_int(&c, "to", 3);
    EXPECT_OK(run_op(&c, in3, 1, out, 1));
    expect(&out[0], CALQ_DTYPE_INT8, 1, d3, wb, "Cast int64->int8 wraps");

    /* calq has no string or bfloat16 tensors */
    calq_tensor in4[1] = {t_f32(x, 1, d6)};
    c = op_case_new("Cast", 13, 1, 1);
    op_attr_int(&c, "to", 8);
    EXPECT(run_op(&c, in4, 1, out, 1) == CALQ_ERR_UNSUPPORTED);
    calq_tensor in5[1] = {t_f32(x, 1, d6)};
    c = op_case_new("Cast", 13, 1, 1);
    op_attr_int(&c, "to", 16);
    EXPECT(run_op(&c, in5, 1, out, 1) == CALQ_ERR_UNSUPPORTED);
}

static void test_equal_compare(void)
{
    int64_t d23[2] = {2, 3}, d3[1] = {3};
    int64_t a[6] = {1, 2, 3, 4, 2, 6}, b[3] = {1, 2, 6};
    uint8_t weq[6] = {1, 1, 0, 0, 1, 1}, wgt[6] = {0, 0, 0, 1, 0, 0};
    calq_tensor in[2] = {t_i64(a, 2, d23), t_i64(b, 1, d3)}, out[1];
    op_case c = op_case_new("Equal", 13, 2, 1);
    EXPECT_OK(run_op(&c, in, 2, out, 1));
    expect(&out[0], CALQ_DTYPE_BOOL, 2, d23, weq, "Equal int64 broadcast");

    calq_tensor in2[2] = {t_i64(a, 2, d23), t_i64(b, 1, d3)};
    c = op_case_new("Greater", 13, 2, 1);
    EXPECT_OK(run_op(&c, in2, 2, out, 1));
    expect(&out[0], CALQ_DTYPE_BOOL, 2, d23, wgt, "Greater int64 broadcast");

    /* Not / And on bool */
    uint8_t p[3] = {1, 0, 1}, q[3] = {1, 1, 0}, wand[3] = {1, 0, 0}, wnot[3] = {0, 1, 0};
    calq_tensor in3[2] = {mk(CALQ_DTYPE_BOOL, 1, d3, p), mk(CALQ_DTYPE_BOOL, 1, d3, q)};
    c = op_case_new("And", 7, 2, 1);
    EXPECT_OK(run_op(&c, in3, 2, out, 1));
    expect(&out[0], CALQ_DTYPE_BOOL, 1, d3, wand, "And");
    calq_tensor in4[1] = {mk(CALQ_DTYPE_BOOL, 1, d3, p)};
    c = op_case_new("Not", 7, 1, 1);
    EXPECT_OK(run_op(&c, in4, 1, out, 1));
    expect(&out[0], CALQ_DTYPE_BOOL, 1, d3, wnot, "Not");

    /* mixed dtypes are rejected */
    float f[3] = {1, 2, 3};
    calq_tensor in5[2] = {t_f32(f, 1, d3), t_i64(b, 1, d3)};
    c = op_case_new("Equal", 13, 2, 1);
    EXPECT(run_op(&c, in5, 2, out, 1) == CALQ_ERR_SHAPE);
}

static void test_activations(void)
{
    int64_t d7[1] = {7};
    float x[7] = {-4, -3, -1, 0, 1, 3, 4};
    float whs[7] = {0, 0, -1.0f / 3, 0, 2.0f / 3, 3, 4};
    calq_tensor in[1] = {t_f32(x, 1, d7)}, out[1];
    op_case c = op_case_new("HardSwish", 14, 1, 1);
    EXPECT_OK(run_op(&c, in, 1, out, 1));
    expect(&out[0], CALQ_DTYPE_FLOAT32, 1, d7, whs, "HardSwish");

    float wlr[7] = {-0.04f, -0.03f, -0.01f, 0, 1, 3, 4};
    calq_tensor in2[1] = {t_f32(x, 1, d7)};
    c = op_case_new("LeakyRelu", 16, 1, 1);
    EXPECT_OK(run_op(&c, in2, 1, out, 1));
    expect(&out[0], CALQ_DTYPE_FLOAT32, 1, d7, wlr, "LeakyRelu default alpha");

    float whsig[7] = {0, 0, 0.3f, 0.5f, 0.7f, 1, 1};
    calq_tensor in3[1] = {t_f32(x, 1, d7)};
    c = op_case_new("HardSigmoid", 6, 1, 1);
    EXPECT_OK(run_op(&c, in3, 1, out, 1));
    expect(&out[0], CALQ_DTYPE_FLOAT32, 1, d7, whsig, "HardSigmoid defaults");

    /* Sigmoid and Softplus stay finite at the extremes */
    float e[4] = {-1000, 0, 1000, 20};
    float wsig[4] = {0, 0.5f, 1, 1.0f / (1.0f + expf(-20))};
    float wsp[4] = {0, logf(2), 1000, 20 + log1pf(expf(-20))};
    int64_t d4[1] = {4};
    calq_tensor in4[1] = {t_f32(e, 1, d4)};
    c = op_case_new("Sigmoid", 13, 1, 1);
    EXPECT_OK(run_op(&c, in4, 1, out, 1));
    expect(&out[0], CALQ_DTYPE_FLOAT32, 1, d4, wsig, "Sigmoid");
    calq_tensor in5[1] = {t_f32(e, 1, d4)};
    c = op_case_new("Softplus", 13, 1, 1);
    EXPECT_OK(run_op(&c, in5, 1, out, 1));
    expect(&out[0], CALQ_DTYPE_FLOAT32, 1, d4, wsp, "Softplus");

    /* Relu on int32, Neg on int64 */
    int32_t ri[3] = {-5, 0, 7}, rw[3] = {0, 0, 7};
    int64_t d3[1] = {3};
    calq_tensor in6[1] = {mk(CALQ_DTYPE_INT32, 1, d3, ri)};
    c = op_case_new("Relu", 14, 1, 1);
    EXPECT_OK(run_op(&c, in6, 1, out, 1));
    expect(&out[0], CALQ_DTYPE_INT32, 1, d3, rw, "Relu int32");

    /* float math refuses integers with a shape/dtype error */
    calq_tensor in7[1] = {mk(CALQ_DTYPE_INT32, 1, d3, ri)};
    c = op_case_new("Exp", 13, 1, 1);
    EXPECT(run_op(&c, in7, 1, out, 1) == CALQ_ERR_SHAPE);
}

static void test_variadic(void)
{
    int64_t d3[1] = {3}, d23[2] = {2, 3}, d21[2] = {2, 1};
    float a[3] = {1, 5, 3}, b[6] = {2, 2, 2, 9, 9, 9}, s[2] = {0, 10};
    float wmax[6] = {2, 5, 3, 10, 10, 10}, wsum[6] = {3, 7, 5, 20, 24, 22};
    float wmean[6] = {1, 7.0f / 3, 5.0f / 3, 20.0f / 3, 8, 22.0f / 3};
    calq_tensor in[3] = {t_f32(a, 1, d3), t_f32(b, 2, d23), t_f32(s, 2, d21)}, out[1];
    op_case c = op_case_new("Max", 13, 3, 1);
    EXPECT_OK(run_op(&c, in, 3, out, 1));
    expect(&out[0], CALQ_DTYPE_FLOAT32, 2, d23, wmax, "Max of three, broadcast");
    calq_tensor in2[3] = {t_f32(a, 1, d3), t_f32(b, 2, d23), t_f32(s, 2, d21)};
    c = op_case_new("Sum", 13, 3, 1);
    EXPECT_OK(run_op(&c, in2, 3, out, 1));
    expect(&out[0], CALQ_DTYPE_FLOAT32, 2, d23, wsum, "Sum of three, broadcast");
    calq_tensor in3[3] = {t_f32(a, 1, d3), t_f32(b, 2, d23), t_f32(s, 2, d21)};
    c = op_case_new("Mean", 13, 3, 1);
    EXPECT_OK(run_op(&c, in3, 3, out, 1));
    expect(&out[0], CALQ_DTYPE_FLOAT32, 2, d23, wmean, "Mean of three, broadcast");

    /* Min propagates NaN like numpy */
    float n[3] = {NAN, 1, 2}, m[3] = {0, NAN, 1};
    calq_tensor in4[2] = {t_f32(n, 1, d3), t_f32(m, 1, d3)};
    c = op_case_new("Min", 13, 2, 1);
    EXPECT_OK(run_op(&c, in4, 2, out, 1));
    const float *o = out[0].data;
    EXPECT(isnan(o[0]) && isnan(o[1]) && o[2] == 1);
    calq_tensor_free_data(&out[0]);

    /* one input: a copy */
    calq_tensor in5[1] = {t_f32(a, 1, d3)};
    c = op_case_new("Min", 13, 1, 1);
    EXPECT_OK(run_op(&c, in5, 1, out, 1));
    expect(&out[0], CALQ_DTYPE_FLOAT32, 1, d3, a, "Min of one");
}

static void test_pow_dropout_identity(void)
{
    int64_t d3[1] = {3};
    float x[3] = {2, 3, 4}, e = 2, wsq[3] = {4, 9, 16};
    calq_tensor in[2] = {t_f32(x, 1, d3), t_f32(&e, 0, NULL)}, out[2];
    op_case c = op_case_new("Pow", 15, 2, 1);
    EXPECT_OK(run_op(&c, in, 2, out, 1));
    expect(&out[0], CALQ_DTYPE_FLOAT32, 1, d3, wsq, "Pow float^scalar");

    int64_t xi[3] = {2, -3, 10}, ei[3] = {10, 3, 0}, wi[3] = {1024, -27, 1};
    calq_tensor in2[2] = {t_i64(xi, 1, d3), t_i64(ei, 1, d3)};
    c = op_case_new("Pow", 15, 2, 1);
    EXPECT_OK(run_op(&c, in2, 2, out, 1));
    expect(&out[0], CALQ_DTYPE_INT64, 1, d3, wi, "Pow int64^int64");

    /* Pow(x, 2) with a one-element exponent of any rank is the correctly rounded square x * x
     * (the fast path), for negative, tiny and huge x alike. */
    {
        int64_t dn[1] = {4096}, d1[1] = {1};
        calq_tensor sq[2] = {t_rand_f32(11, 1, dn, -1e3f, 1e3f), t_f32(&e, 1, d1)};
        float *xs = sq[0].data;
        xs[0] = -0.0f;
        xs[1] = 3e-23f;
        xs[2] = -2e19f;
        xs[3] = 1.0000001f;
        float *keep = malloc(sizeof(float) * 4096);
        memcpy(keep, xs, sizeof(float) * 4096);
        xs = keep;
        c = op_case_new("Pow", 15, 2, 1);
        EXPECT_OK(run_op(&c, sq, 2, out, 1));
        const float *ys = out[0].data;
        int bad = 0;
        for (int i = 0; i < 4096; i++) {
            float w = xs[i] * xs[i];
            if (memcmp(&ys[i], &w, sizeof w) != 0 && bad++ < 3)
                fprintf(stderr, "pow %d: %a %a %a\n", i, xs[i], ys[i], w);
        }
        EXPECT(bad == 0);
        free(keep);
        calq_tensor_free_data(&out[0]);
    }

    float wf[3] = {4, 3, 16};
    int32_t ex[3] = {2, 1, 2};
    calq_tensor in3[2] = {t_f32(x, 1, d3), mk(CALQ_DTYPE_INT32, 1, d3, ex)};
    c = op_case_new("Pow", 15, 2, 1);
    EXPECT_OK(run_op(&c, in3, 2, out, 1));
    expect(&out[0], CALQ_DTYPE_FLOAT32, 1, d3, wf, "Pow float^int32");

    uint8_t ones[3] = {1, 1, 1};
    calq_tensor in4[1] = {t_f32(x, 1, d3)};
    c = op_case_new("Dropout", 13, 1, 2);
    EXPECT_OK(run_op(&c, in4, 1, out, 2));
    expect(&out[0], CALQ_DTYPE_FLOAT32, 1, d3, x, "Dropout output");
    expect(&out[1], CALQ_DTYPE_BOOL, 1, d3, ones, "Dropout mask");

    uint8_t tm = 1;
    calq_tensor none = {0};
    calq_tensor in5[3] = {t_f32(x, 1, d3), none, mk(CALQ_DTYPE_BOOL, 0, NULL, &tm)};
    c = op_case_new("Dropout", 13, 3, 1);
    EXPECT(run_op(&c, in5, 3, out, 1) == CALQ_ERR_UNSUPPORTED);
    calq_tensor_free_data(&out[0]);
    float zero = 0;
    calq_tensor in7[3] = {t_f32(x, 1, d3), t_f32(&zero, 0, NULL), mk(CALQ_DTYPE_BOOL, 0, NULL, &tm)};
    c = op_case_new("Dropout", 13, 3, 2);
    EXPECT_OK(run_op(&c, in7, 3, out, 2));
    expect(&out[0], CALQ_DTYPE_FLOAT32, 1, d3, x, "Dropout training, ratio 0");
    expect(&out[1], CALQ_DTYPE_BOOL, 1, d3, ones, "Dropout training, ratio 0, mask");

    uint8_t bv[3] = {1, 0, 1};
    calq_tensor in6[1] = {mk(CALQ_DTYPE_BOOL, 1, d3, bv)};
    c = op_case_new("Identity", 16, 1, 1);
    EXPECT_OK(run_op(&c, in6, 1, out, 1));
    expect(&out[0], CALQ_DTYPE_BOOL, 1, d3, bv, "Identity bool");
}

static void test_mod_bits(void)
{
    int64_t d4[1] = {4};
    int32_t a[4] = {7, -7, 7, -7}, b[4] = {3, 3, -3, -3};
    int32_t wpy[4] = {1, 2, -2, -1}, wc[4] = {1, -1, 1, -1};
    calq_tensor in[2] = {mk(CALQ_DTYPE_INT32, 1, d4, a), mk(CALQ_DTYPE_INT32, 1, d4, b)}, out[1];
    op_case c = op_case_new("Mod", 13, 2, 1);
    EXPECT_OK(run_op(&c, in, 2, out, 1));
    expect(&out[0], CALQ_DTYPE_INT32, 1, d4, wpy, "Mod fmod=0 takes the divisor's sign");
    calq_tensor in2[2] = {mk(CALQ_DTYPE_INT32, 1, d4, a), mk(CALQ_DTYPE_INT32, 1, d4, b)};
    c = op_case_new("Mod", 13, 2, 1);
    op_attr_int(&c, "fmod", 1);
    EXPECT_OK(run_op(&c, in2, 2, out, 1));
    expect(&out[0], CALQ_DTYPE_INT32, 1, d4, wc, "Mod fmod=1 takes the dividend's sign");

    uint8_t x[4] = {1, 0x80, 0xff, 3}, sh[4] = {7, 1, 8, 0}, wl[4] = {0x80, 0, 0, 3};
    calq_tensor in3[2] = {mk(CALQ_DTYPE_UINT8, 1, d4, x), mk(CALQ_DTYPE_UINT8, 1, d4, sh)};
    c = op_case_new("BitShift", 11, 2, 1);
    op_attr_str(&c, "direction", "LEFT");
    EXPECT_OK(run_op(&c, in3, 2, out, 1));
    expect(&out[0], CALQ_DTYPE_UINT8, 1, d4, wl, "BitShift LEFT, shift >= width gives 0");

    float f[4] = {INFINITY, -INFINITY, NAN, 1};
    uint8_t wpos[4] = {1, 0, 0, 0};
    calq_tensor in4[1] = {t_f32(f, 1, d4)};
    c = op_case_new("IsInf", 10, 1, 1);
    op_attr_int(&c, "detect_negative", 0);
    EXPECT_OK(run_op(&c, in4, 1, out, 1));
    expect(&out[0], CALQ_DTYPE_BOOL, 1, d4, wpos, "IsInf positive only");
}

static void test_shapes(void)
{
    int64_t d23[2] = {2, 3}, d4[1] = {4}, d03[2] = {0, 3}, d13[2] = {1, 3};
    float a[6] = {0}, b[4] = {0};
    calq_tensor in[2] = {t_f32(a, 2, d23), t_f32(b, 1, d4)}, out[1];
    op_case c = op_case_new("Add", 14, 2, 1);
    EXPECT(run_op(&c, in, 2, out, 1) == CALQ_ERR_SHAPE);

    /* zero-sized dims broadcast like any other */
    calq_tensor in2[2] = {t_f32(a, 2, d03), t_f32(a, 2, d13)};
    c = op_case_new("Mul", 14, 2, 1);
    EXPECT_OK(run_op(&c, in2, 2, out, 1));
    EXPECT(out[0].ndim == 2 && out[0].dims[0] == 0 && out[0].dims[1] == 3);
    calq_tensor_free_data(&out[0]);

    /* a missing required input is an error, not a crash */
    calq_tensor none = {0};
    calq_tensor in3[2] = {t_f32(a, 2, d23), none};
    c = op_case_new("Sub", 14, 2, 1);
    EXPECT(run_op(&c, in3, 2, out, 1) == CALQ_ERR_SHAPE);

    /* binary ops take exactly two inputs */
    calq_tensor in5[3] = {t_f32(a, 2, d23), t_f32(a, 2, d23), t_f32(a, 2, d23)};
    c = op_case_new("Add", 14, 3, 1);
    EXPECT(run_op(&c, in5, 3, out, 1) == CALQ_ERR_SHAPE);

    /* float16 runs through float32 */
    int64_t d2[1] = {2};
    uint16_t ha[2] = {calq__f32_to_f16(1.5f), calq__f32_to_f16(2.0f)};
    uint16_t hb[2] = {calq__f32_to_f16(0.25f), calq__f32_to_f16(-3.0f)};
    calq_tensor in6[2] = {mk(CALQ_DTYPE_FLOAT16, 1, d2, ha), mk(CALQ_DTYPE_FLOAT16, 1, d2, hb)};
    c = op_case_new("Mul", 14, 2, 1);
    EXPECT_OK(run_op(&c, in6, 2, out, 1));
    EXPECT(out[0].dtype == CALQ_DTYPE_FLOAT16);
    const uint16_t *ho = out[0].data;
    EXPECT(calq__f16_to_f32(ho[0]) == 0.375f && calq__f16_to_f32(ho[1]) == -6.0f);
    calq_tensor_free_data(&out[0]);

    /* rank 8, every dim broadcast from one side or the other */
    int64_t da[8] = {2, 1, 2, 1, 2, 1, 2, 1}, db[8] = {1, 2, 1, 2, 1, 2, 1, 2}, dw[8];
    float va[16], vb[16], w[256];
    for (int i = 0; i < 16; i++) {
        va[i] = (float)i;
        vb[i] = (float)(100 * i);
    }
    for (int i = 0; i < 8; i++) dw[i] = 2;
    for (int i = 0; i < 256; i++) {
        int ia = 0, ib = 0;
        for (int d = 0; d < 8; d++) {
            int bit = (i >> (7 - d)) & 1;
            if (d % 2 == 0)
                ia = ia * 2 + bit;
            else
                ib = ib * 2 + bit;
        }
        w[i] = va[ia] - vb[ib];
    }
    calq_tensor in4[2] = {t_f32(va, 8, da), t_f32(vb, 8, db)};
    c = op_case_new("Sub", 14, 2, 1);
    EXPECT_OK(run_op(&c, in4, 2, out, 1));
    expect(&out[0], CALQ_DTYPE_FLOAT32, 8, dw, w, "Sub rank 8 cross broadcast");
}

/* Big enough for the parallel path: per-channel, scalar and general broadcasts against a plain
 * index-arithmetic loop. */
static void test_parallel(void)
{
    int64_t dx[4] = {2, 16, 48, 40}, dc[3] = {16, 1, 1}, dr[4] = {2, 1, 48, 1};
    int64_t n = 2 * 16 * 48 * 40;
    calq_tensor x = t_rand_f32(1, 4, dx, -2, 2), ch = t_rand_f32(2, 3, dc, -1, 1), rr = t_rand_f32(3, 4, dr, 1, 2);
    float *want = malloc(sizeof(float) * (size_t)n);
    const float *px = x.data, *pc = ch.data, *pr = rr.data;
    for (int64_t i = 0; i < n; i++) {
        int64_t w = i % 40, h = (i / 40) % 48, cc = (i / (40 * 48)) % 16, b = i / (40 * 48 * 16);
        (void)w;
        want[i] = (px[i] * pc[cc]) / pr[b * 48 + h];
    }
    calq_tensor in[2] = {x, ch}, mid[1], out[1];
    op_case c = op_case_new("Mul", 14, 2, 1);
    EXPECT_OK(run_op(&c, in, 2, mid, 1));
    calq_tensor in2[2] = {mid[0], rr};
    c = op_case_new("Div", 14, 2, 1);
    EXPECT_OK(run_op(&c, in2, 2, out, 1));
    expect(&out[0], CALQ_DTYPE_FLOAT32, 4, dx, want, "parallel Mul then Div");

    /* unary on a big tensor */
    calq_tensor y = t_rand_f32(4, 4, dx, -8, 8);
    const float *py = y.data;
    for (int64_t i = 0; i < n; i++) want[i] = tanhf(py[i]);
    calq_tensor in3[1] = {y};
    c = op_case_new("Tanh", 13, 1, 1);
    EXPECT_OK(run_op(&c, in3, 1, out, 1));
    expect(&out[0], CALQ_DTYPE_FLOAT32, 4, dx, want, "parallel Tanh");
    free(want);

#ifdef _OPENMP
    /* bit-identical for any thread count */
    calq_tensor ref[1], par[1];
    int saved = omp_get_max_threads();
    for (int threads = 1; threads <= 3; threads += 2) {
        omp_set_num_threads(threads);
        calq_tensor p[2] = {t_rand_f32(5, 4, dx, -2, 2), t_rand_f32(6, 4, dr, 1, 2)};
        c = op_case_new("Pow", 15, 2, 1);
        EXPECT_OK(run_op(&c, p, 2, threads == 1 ? ref : par, 1));
    }
    omp_set_num_threads(saved);
    EXPECT(memcmp(ref[0].data, par[0].data, calq__tensor_nbytes(&ref[0])) == 0);
    calq_tensor_free_data(&ref[0]);
    calq_tensor_free_data(&par[0]);
#endif
}

/* The vector-math kernels against the reference on 2^18 + 5 values per op: uniform over wide ranges,
 * every exponent, and the special values (signed zeros, infinities, NaN, subnormals, the points
 * where exp overflows or underflows); the fast kernel must run where the CPU has AVX2, and its
 * results must not depend on the thread count. */
static void test_mvec_accuracy(void)
{
    enum { N = (1 << 18) + 5 }; /* not a multiple of 16: the padded last vector runs */
    const int64_t d[1] = {N};
    calq_tensor x = mk(CALQ_DTYPE_FLOAT32, 1, d, NULL);
    float *v = x.data;
    uint32_t r = 12345;
    for (int i = 0; i < N; i++) {
        r = r * 1664525u + 1013904223u;
        if (i % 4 == 0) {
            v[i] = ((float)(r >> 8) / 16777216.0f - 0.5f) * 20.0f; /* [-10, 10): the activations' range */
        } else if (i % 4 == 1) {
            v[i] = ((float)(r >> 8) / 16777216.0f - 0.5f) * 200.0f; /* exp's overflow and underflow */
        } else {
            uint32_t bits = r; /* any float: every exponent */
            memcpy(&v[i], &bits, 4);
        }
    }
    const float special[] = {0.0f,    -0.0f,           INFINITY,  -INFINITY, NAN,         1e-45f,
                             -1e-45f, 1.17549435e-38f, 88.72283f, 88.72284f, -103.97208f, -87.33655f,
                             1e-8f,   -1e-8f,          3.9f,      -3.9f,     9.5f,        -9.5f};
    memcpy(v, special, sizeof special);
    static const char *const ops[] = {"Erf", "Exp", "Tanh", "Sigmoid", "Gelu"};
#ifdef __x86_64__
    const int want_fast = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    const int want_fast = 0;
#endif
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        calq_tensor ref, fast1, fast2;
        op_case c = op_case_new(ops[k], 20, 1, 1);
        calq_error e = {0};
        EXPECT(op_case_run(&c, &x, 1, &ref, 1, 0, &e) == CALQ_OK);
        bool took = false;
#ifdef _OPENMP
        int prev = omp_get_max_threads();
        omp_set_num_threads(1);
#endif
        EXPECT(op_case_run_ex(&c, &x, 1, &fast1, 1, 1, &took, &e) == CALQ_OK);
#ifdef _OPENMP
        omp_set_num_threads(2);
#endif
        EXPECT(op_case_run(&c, &x, 1, &fast2, 1, 1, &e) == CALQ_OK);
#ifdef _OPENMP
        omp_set_num_threads(prev);
#endif
        if ((int)took != want_fast) {
            fprintf(stderr, "%s: fast kernel %s on a CPU %s AVX2\n", ops[k], took ? "ran" : "did not run",
                    want_fast ? "with" : "without");
            failures++;
        }
        EXPECT(close_ulp(&fast1, &ref, &x, 8, strcmp(ops[k], "Gelu") == 0, ops[k]));
        EXPECT(memcmp(fast1.data, fast2.data, sizeof(float) * N) == 0);
        calq_tensor_free_data(&ref);
        calq_tensor_free_data(&fast1);
        calq_tensor_free_data(&fast2);
        op_case_free(&c);
    }
    calq_tensor_free_data(&x);
}

/* The convolutions' SiLU / logistic tail (logistic.h): the vector form gives the reference form's
 * bits (in place and out of place, any length), and both stay within a few ulp of the logistic
 * and SiLU computed in double precision wherever the result is a normal float. */
static void test_logistic_rows(void)
{
    enum { N = (1 << 16) + 11 };
    float *x = malloc(sizeof(float) * N), *a = malloc(sizeof(float) * N), *b = malloc(sizeof(float) * N);
    if (!calq__logistic_fast()) /* the vector form is the _ref one then: only accuracy is tested */
        printf("  logistic rows: no AVX-512 on this CPU, the vector form is not tested\n");
    uint32_t r = 777;
    for (int i = 0; i < N; i++) {
        r = r * 1664525u + 1013904223u;
        if (i % 3 == 0) {
            x[i] = ((float)(r >> 8) / 16777216.0f - 0.5f) * 24.0f;
        } else if (i % 3 == 1) {
            x[i] = ((float)(r >> 8) / 16777216.0f - 0.5f) * 240.0f;
        } else {
            uint32_t bits = r;
            memcpy(&x[i], &bits, 4);
        }
    }
    const float special[] = {0.0f,   -0.0f,    INFINITY,  -INFINITY, NAN,        1e-45f,         -1e-45f,
                             87.0f,  -87.0f,   88.37f,    -88.38f,   89.0f,      -89.0f,         1e-8f,
                             -1e-8f, 15.9424f, -15.9424f, 0.346574f, -0.346574f, 1.17549435e-38f};
    memcpy(x, special, sizeof special);
    const struct {
        bool swish;
        float alpha;
    } cases[] = {{false, 1.0f}, {true, 1.0f}, {true, 1.702f}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const bool sw = cases[k].swish;
        const float al = cases[k].alpha;
        calq__logistic_rows_ref(a, x, N, sw, al);
        for (size_t len = 0; len <= 33; len++) { /* short rows: the masked last vector */
            float tmp[33];
            calq__logistic_rows(tmp, x + 100, len, sw, al);
            EXPECT(len == 0 || memcmp(tmp, a + 100, sizeof(float) * len) == 0);
        }
        memcpy(b, x, sizeof(float) * N);
        calq__logistic_rows(b, b, N, sw, al); /* in place */
        for (int i = 0; i < N; i++)
            if (memcmp(&a[i], &b[i], sizeof(float)) != 0) {
                fprintf(stderr, "logistic (swish %d): x = %.9g: vector %.9g, reference %.9g\n", sw, (double)x[i],
                        (double)b[i], (double)a[i]);
                failures++;
                break;
            }
        double worst = 0;
        for (int i = 0; i < N; i++) {
            /* alpha * x is rounded to float first, as a Mul layer before the gate would */
            const double xd = x[i], l = 1.0 / (1.0 + exp((double)(x[i] * -al))), want = sw ? xd * l : l;
            if (isnan(xd)) {
                EXPECT(isnan(a[i]));
                continue;
            }
            /* results below 1e-35 (exp's argument past the clamp) may be 0; subnormals, inf */
            if (!(fabs(want) >= 1e-35) || fabs(want) > 3.4e38) continue;
            const double d = ulp_dist(a[i], (float)want);
            if (d > worst) worst = d;
            if (d > 4) {
                fprintf(stderr, "logistic (swish %d, alpha %g): x = %.9g gives %.9g, want %.9g (%.0f ulp)\n", sw,
                        (double)al, (double)x[i], (double)a[i], want, d);
                failures++;
                break;
            }
        }
        printf("  logistic rows (swish %d, alpha %g): worst %.0f ulp\n", sw, (double)al, worst);
    }
    /* the edges the header documents: SiLU keeps 0 (the padding channels) and its sign */
    const float edge[] = {0.0f, -0.0f, -INFINITY, INFINITY, -100.0f};
    float out[5];
    calq__logistic_rows(out, edge, 5, true, 1.0f);
    EXPECT(out[0] == 0.0f && !signbit(out[0]) && out[1] == 0.0f && signbit(out[1]));
    EXPECT(isnan(out[2]) && out[3] == INFINITY && out[4] <= 0.0f && out[4] > -1e-30f);
    calq__logistic_rows(out, edge, 5, false, 1.0f);
    EXPECT(out[0] == 0.5f && out[1] == 0.5f && out[2] == 0.0f && out[3] == 1.0f && out[4] >= 0.0f && out[4] < 1e-30f);
    free(x);
    free(a);
    free(b);
}

int main(void)
{
    test_logistic_rows();
    test_mvec_accuracy();
    test_add_broadcast();
    test_int64_mul_div();
    test_div_by_zero();
    test_clip();
    test_prelu();
    test_where();
    test_cast();
    test_equal_compare();
    test_activations();
    test_variadic();
    test_pow_dropout_identity();
    test_mod_bits();
    test_shapes();
    test_parallel();
    printf("test_kernels_elementwise: %d failure(s)\n", failures);
    return failures != 0;
}
