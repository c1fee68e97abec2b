/* Resize / Upsample reference kernels against hand-computed results (source coordinates are
 * worked out in the comments), a brute-force tensor-product check of multi-axis linear
 * interpolation, and validation failures. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_harness.h"

#define DIMS(...)                                                                                                      \
    (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[])                                             \
    {                                                                                                                  \
        __VA_ARGS__                                                                                                    \
    }
#define VALS(...)                                                                                                      \
    (double[])                                                                                                         \
    {                                                                                                                  \
        __VA_ARGS__                                                                                                    \
    }
#define STR2(x)                        #x
#define STR(x)                         STR2(x)
#define EXPECT_TENSOR(got, dims, vals) EXPECT(expect_f(&(got), dims, vals, 1e-6, "line " STR(__LINE__)))

static int expect_f(const calq_tensor *got, int ndim, const int64_t *dims, const double *want, double tol,
                    const char *what)
{
    char a[96], b[96];
    if (!calq__shape_equal(got->dims, got->ndim, dims, ndim)) {
        fprintf(stderr, "%s: shape %s, expected %s\n", what, calq__shape_str(got->dims, got->ndim, a, sizeof a),
                calq__shape_str(dims, ndim, b, sizeof b));
        return 0;
    }
    for (int64_t i = 0; i < calq_tensor_numel(got); i++) {
        double v = calq__tensor_get_f64(got, i);
        if (!(fabs(v - want[i]) <= tol * (1.0 + fabs(want[i])))) {
            fprintf(stderr, "%s: element %lld is %.9g, expected %.9g\n", what, (long long)i, v, want[i]);
            return 0;
        }
    }
    return 1;
}

static calq_tensor fvec(int n, const float *v)
{
    int64_t d = n;
    return t_f32(v, 1, &d);
}
#define FLOATS(...) fvec((int)(sizeof((float[]){__VA_ARGS__}) / sizeof(float)), (float[]){__VA_ARGS__})
static calq_tensor ivec(int n, const int64_t *v)
{
    int64_t d = n;
    return t_i64(v, 1, &d);
}
#define INTS(...) ivec((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})

static calq_tensor ramp(int ndim, const int64_t *dims, float start)
{
    calq_tensor t = t_rand_f32(0, ndim, dims, 0.0f, 1.0f);
    float *p = t.data;
    for (int64_t i = 0; i < calq_tensor_numel(&t); i++) p[i] = start + (float)i;
    return t;
}

static const calq_tensor none = {0};

/* A float tensor with no elements (opsets 11-12 spell an unused input this way). */
static calq_tensor empty_f32(void)
{
    calq_tensor t = {CALQ_DTYPE_FLOAT32, 1, {0}, NULL};
    calq__tensor_alloc(&t, NULL);
    return t;
}

/* Runs the node with inputs in[n] (none for an omitted one) and returns output 0. Inputs are
 * freed. */
static calq_tensor run(op_case *oc, calq_tensor *in, int n)
{
    calq_tensor out = {0};
    calq_error err = {0};
    if (op_case_run(oc, in, n, &out, 1, 0, &err) != CALQ_OK) {
        fprintf(stderr, "run failed: %s\n", err.message);
        failures++;
    }
    for (int i = 0; i < n; i++) calq_tensor_free_data(&in[i]);
    return out;
}

static void expect_fail(op_case *oc, calq_tensor *in, int n, calq_status want, const char *what)
{
    calq_tensor out = {0};
    calq_error err = {0};
    calq_status s = op_case_run(oc, in, n, &out, 1, 0, &err);
    if (s != want || !err.message[0]) {
        fprintf(stderr, "%s: status %d, expected %d (%s)\n", what, (int)s, (int)want, err.message);
        failures++;
    }
    calq_tensor_free_data(&out);
    for (int i = 0; i < n; i++) calq_tensor_free_data(&in[i]);
    op_case_free(oc);
}

/* A Resize-13 node with the given attributes already set by the caller. */
static op_case resize13(const char *mode, const char *coord)
{
    op_case oc = op_case_new("Resize", 13, 4, 1);
    op_attr_str(&oc, "mode", mode);
    if (coord) op_attr_str(&oc, "coordinate_transformation_mode", coord);
    return oc;
}

static void test_nearest(void)
{
    /* 2x upsample, half_pixel + round_prefer_floor: sources -0.25 0.25 0.75 1.25 -> 0 0 1 1. */
    op_case oc = resize13("nearest", NULL);
    calq_tensor in[4] = {ramp(DIMS(1, 1, 2, 2), 1), none, FLOATS(1, 1, 2, 2), none};
    calq_tensor y = run(&oc, in, 4);
    EXPECT_TENSOR(y, DIMS(1, 1, 4, 4), VALS(1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4));
    calq_tensor_free_data(&y);
    op_case_free(&oc);

    /* Downsample by sizes 1x3 from 2x4: width sources (x+0.5)/0.75-0.5 = 0.17 1.5 2.83 ->
     * 0 1 (tie to floor) 3; height 0.5 -> 0. */
    oc = resize13("nearest", NULL);
    calq_tensor in2[4] = {ramp(DIMS(1, 1, 2, 4), 1), none, none, INTS(1, 1, 1, 3)};
    y = run(&oc, in2, 4);
    EXPECT_TENSOR(y, DIMS(1, 1, 1, 3), VALS(1, 2, 4));
    calq_tensor_free_data(&y);
    op_case_free(&oc);

    /* nearest_mode on asymmetric 2x (sources 0 .5 1 1.5 2 2.5 3 3.5), edge-clamped. */
    static const char *modes[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    static const double want[4][8] = {
        {1, 1, 2, 2, 3, 3, 4, 4}, {1, 2, 2, 3, 3, 4, 4, 4}, {1, 1, 2, 2, 3, 3, 4, 4}, {1, 2, 2, 3, 3, 4, 4, 4}};
    for (int m = 0; m < 4; m++) {
        oc = resize13("nearest", "asymmetric");
        op_attr_str(&oc, "nearest_mode", modes[m]);
        calq_tensor i3[4] = {ramp(DIMS(4), 1), none, none, INTS(8)};
        y = run(&oc, i3, 4);
        EXPECT(expect_f(&y, DIMS(8), want[m], 1e-6, modes[m]));
        calq_tensor_free_data(&y);
        op_case_free(&oc);
    }

    /* Integer data is gathered unchanged. */
    calq_tensor xu = {CALQ_DTYPE_UINT8, 2, {2, 2}, NULL};
    calq__tensor_alloc(&xu, NULL);
    uint8_t uv[4] = {7, 250, 0, 9};
    memcpy(xu.data, uv, 4);
    oc = resize13("nearest", "asymmetric");
    calq_tensor i4[4] = {xu, none, FLOATS(1, 2), none};
    y = run(&oc, i4, 4);
    EXPECT(y.dtype == CALQ_DTYPE_UINT8);
    EXPECT_TENSOR(y, DIMS(2, 4), VALS(7, 7, 250, 250, 0, 0, 9, 9));
    calq_tensor_free_data(&y);
    op_case_free(&oc);
}

static void test_linear(void)
{
    /* Downsample 2x4 by 0.6 (output 1x2), half_pixel: height source 1/3, width sources 1/3
     * and 2: rows blend to 2.33 3.33 4.33 5.33, then 2.6667 and 4.3333. */
    op_case oc = resize13("linear", NULL);
    calq_tensor in[4] = {ramp(DIMS(1, 1, 2, 4), 1), none, FLOATS(1, 1, 0.6f, 0.6f), none};
    calq_tensor y = run(&oc, in, 4);
    EXPECT_TENSOR(y, DIMS(1, 1, 1, 2), VALS(8 / 3.0, 13 / 3.0));
    calq_tensor_free_data(&y);
    op_case_free(&oc);

    /* align_corners with scales: the ONNX reference uses the scaled length 4 * 0.6 = 2.4, so
     * width source 1 is 1 * 3 / 1.4 = 2.142857 (onnxruntime would use 3 / 1 instead). */
    oc = resize13("linear", "align_corners");
    calq_tensor in2[4] = {ramp(DIMS(1, 1, 2, 4), 1), none, FLOATS(1, 1, 0.6f, 0.6f), none};
    y = run(&oc, in2, 4);
    EXPECT_TENSOR(y, DIMS(1, 1, 1, 2), VALS(1, 1 + 3 / 1.4));
    calq_tensor_free_data(&y);
    op_case_free(&oc);

    /* align_corners with sizes 2x3: sources x * 3 / 2 = 0 1.5 3 across, rows 0 and 1. */
    oc = resize13("linear", "align_corners");
    calq_tensor in3[4] = {ramp(DIMS(1, 1, 2, 4), 1), none, none, INTS(1, 1, 2, 3)};
    y = run(&oc, in3, 4);
    EXPECT_TENSOR(y, DIMS(1, 1, 2, 3), VALS(1, 2.5, 4, 5, 6.5, 8));
    calq_tensor_free_data(&y);
    op_case_free(&oc);

    /* pytorch_half_pixel to length 1 reads source -0.5 (blend of the clamped edge). */
    oc = resize13("linear", "pytorch_half_pixel");
    calq_tensor in4[4] = {ramp(DIMS(1, 4), 1), none, none, INTS(1, 1)};
    y = run(&oc, in4, 4);
    EXPECT_TENSOR(y, DIMS(1, 1), VALS(1));
    calq_tensor_free_data(&y);
    op_case_free(&oc);

    /* tf_crop_and_resize: roi 0.5..1.5 of 4 samples at sizes 3 reads 1.5 3 4.5; 4.5 is outside
     * and takes extrapolation_value. */
    oc = resize13("linear", "tf_crop_and_resize");
    op_attr_float(&oc, "extrapolation_value", -1.0f);
    calq_tensor in5[4] = {FLOATS(0, 10, 20, 30), FLOATS(0.5f, 1.5f), none, INTS(3)};
    y = run(&oc, in5, 4);
    EXPECT_TENSOR(y, DIMS(3), VALS(15, 30, -1));
    calq_tensor_free_data(&y);
    op_case_free(&oc);

    /* Opset 11: unused roi and scales are empty tensors. */
    oc = op_case_new("Resize", 11, 4, 1);
    op_attr_str(&oc, "mode", "linear");
    calq_tensor e0 = empty_f32(), e1 = empty_f32();
    calq_tensor in6[4] = {ramp(DIMS(1, 1, 2, 4), 1), e0, e1, INTS(1, 1, 2, 3)};
    y = run(&oc, in6, 4);
    /* half_pixel to width 3: sources (x+0.5)*4/3-0.5 = 1/6, 1.5, 17/6. */
    EXPECT_TENSOR(y, DIMS(1, 1, 2, 3), VALS(1 + 1 / 6.0, 2.5, 1 + 17 / 6.0, 5 + 1 / 6.0, 6.5, 5 + 17 / 6.0));
    calq_tensor_free_data(&y);
    op_case_free(&oc);
}

/* Multi-axis linear against a direct evaluation of the tensor product of per-axis weights. */
static void test_linear_nd(void)
{
    const int64_t in_dims[4] = {2, 3, 5, 4};
    const float scales[4] = {1.0f, 1.7f, 0.6f, 2.5f};
    op_case oc = resize13("linear", "half_pixel");
    calq_tensor x = t_rand_f32(7, 4, in_dims, -1.0f, 1.0f);
    calq_tensor xc;
    calq_error err = {0};
    EXPECT(calq__tensor_clone(&xc, &x, &err) == CALQ_OK);
    calq_tensor in[4] = {x, none, fvec(4, scales), none};
    omp_set_num_threads(3);
    calq_tensor y = run(&oc, in, 4);
    omp_set_num_threads(omp_get_num_procs());
    int64_t od[4];
    for (int a = 0; a < 4; a++) od[a] = (int64_t)floor((double)in_dims[a] * (double)scales[a]);
    EXPECT(calq__shape_equal(y.dims, y.ndim, od, 4));
    const float *xv = xc.data, *yv = y.data;
    double worst = 0.0;
    for (int64_t i = 0; y.data && i < calq_tensor_numel(&y); i++) {
        int64_t o[4], r = i;
        for (int a = 3; a >= 0; a--) {
            o[a] = r % od[a];
            r /= od[a];
        }
        int64_t lo[4], hi[4];
        double w[4];
        for (int a = 0; a < 4; a++) {
            double s = (o[a] + 0.5) / (double)scales[a] - 0.5, f = floor(s);
            w[a] = s - f;
            lo[a] = (int64_t)f < 0 ? 0 : (int64_t)f;
            hi[a] = (int64_t)f + 1 > in_dims[a] - 1 ? in_dims[a] - 1 : (int64_t)f + 1;
            if (lo[a] > in_dims[a] - 1) lo[a] = in_dims[a] - 1;
        }
        double want = 0.0;
        for (int corner = 0; corner < 16; corner++) {
            double wt = 1.0;
            int64_t off = 0;
            for (int a = 0; a < 4; a++) {
                int up = (corner >> a) & 1;
                wt *= up ? w[a] : 1.0 - w[a];
                off = off * in_dims[a] + (up ? hi[a] : lo[a]);
            }
            want += wt * xv[off];
        }
        double e = fabs(yv[i] - want);
        if (e > worst) worst = e;
    }
    EXPECT(worst < 1e-5);
    calq_tensor_free_data(&y);
    calq_tensor_free_data(&xc);
    op_case_free(&oc);
}

static void test_cubic(void)
{
    /* A = -0.75 at fraction 0.5 weighs the four taps -0.09375 0.59375 0.59375 -0.09375.
     * Halving 1 2 4 8 with half_pixel reads sources 0.5 and 2.5 (edges clamp). */
    op_case oc = resize13("cubic", NULL);
    calq_tensor in[4] = {FLOATS(1, 2, 4, 8), none, FLOATS(0.5f), none};
    calq_tensor y = run(&oc, in, 4);
    EXPECT_TENSOR(y, DIMS(2), VALS(1.3125, 6.1875));
    calq_tensor_free_data(&y);
    op_case_free(&oc);

    /* exclude_outside drops tap -1 (and tap 4 on the right) and renormalises by the remaining
     * weights, 1.09375. */
    oc = resize13("cubic", NULL);
    op_attr_int(&oc, "exclude_outside", 1);
    calq_tensor in2[4] = {FLOATS(1, 2, 4, 8), none, FLOATS(0.5f), none};
    y = run(&oc, in2, 4);
    EXPECT_TENSOR(y, DIMS(2), VALS(1.40625 / 1.09375, (-0.1875 + 2.375 + 4.75) / 1.09375));
    calq_tensor_free_data(&y);
    op_case_free(&oc);

    /* A = -0.5 reproduces a ramp wherever all four taps are inside. */
    oc = resize13("cubic", "align_corners");
    op_attr_float(&oc, "cubic_coeff_a", -0.5f);
    calq_tensor in3[4] = {ramp(DIMS(8), 0), none, none, INTS(15)};
    y = run(&oc, in3, 4);
    EXPECT(y.data && fabs(((float *)y.data)[7] - 3.5f) < 1e-6 && fabs(((float *)y.data)[5] - 2.5f) < 1e-6);
    calq_tensor_free_data(&y);
    op_case_free(&oc);
}

static void test_upsample(void)
{
    /* Opset 9: scales input, asymmetric + truncation. */
    op_case oc = op_case_new("Upsample", 9, 2, 1);
    op_attr_str(&oc, "mode", "nearest");
    calq_tensor in[2] = {ramp(DIMS(1, 1, 2, 2), 1), FLOATS(1, 1, 2, 3)};
    calq_tensor y = run(&oc, in, 2);
    EXPECT_TENSOR(y, DIMS(1, 1, 4, 6), VALS(1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4));
    calq_tensor_free_data(&y);
    op_case_free(&oc);

    /* Opset 7: scales attribute; linear reads x / 2 = 0 .5 1 1.5 (clamped at the edge). */
    oc = op_case_new("Upsample", 7, 1, 1);
    op_attr_str(&oc, "mode", "linear");
    op_attr_floats(&oc, "scales", (const float[]){1, 1, 2, 2}, 4);
    calq_tensor in2[1] = {ramp(DIMS(1, 1, 2, 2), 1)};
    y = run(&oc, in2, 1);
    EXPECT_TENSOR(y, DIMS(1, 1, 4, 4), VALS(1, 1.5, 2, 2, 2, 2.5, 3, 3, 3, 3.5, 4, 4, 3, 3.5, 4, 4));
    calq_tensor_free_data(&y);
    op_case_free(&oc);

    /* Resize-10 behaves like Upsample (asymmetric); shrinking rounds sources up. */
    oc = op_case_new("Resize", 10, 2, 1);
    calq_tensor in3[2] = {ramp(DIMS(6), 1), FLOATS(0.5f)};
    y = run(&oc, in3, 2);
    EXPECT_TENSOR(y, DIMS(3), VALS(1, 3, 5));
    calq_tensor_free_data(&y);
    op_case_free(&oc);
    oc = op_case_new("Resize", 10, 2, 1);
    calq_tensor in4[2] = {ramp(DIMS(4), 1), FLOATS(0.75f)};
    y = run(&oc, in4, 2);
    /* sources 0, 1.33, 2.67 -> ceil 0 2 3 */
    EXPECT_TENSOR(y, DIMS(3), VALS(1, 3, 4));
    calq_tensor_free_data(&y);
    op_case_free(&oc);
}

static void test_invalid(void)
{
    op_case oc = resize13("nearest", NULL);
    calq_tensor a[4] = {ramp(DIMS(1, 1, 2, 2), 1), none, FLOATS(1, 1, 2, 2), INTS(1, 1, 4, 4)};
    expect_fail(&oc, a, 4, CALQ_ERR_SHAPE, "scales and sizes");

    oc = resize13("nearest", NULL);
    calq_tensor b[4] = {ramp(DIMS(1, 1, 2, 2), 1), none, none, none};
    expect_fail(&oc, b, 4, CALQ_ERR_SHAPE, "neither scales nor sizes");

    oc = resize13("nearest", NULL);
    calq_tensor c[4] = {ramp(DIMS(1, 1, 2, 2), 1), none, FLOATS(2, 2), none};
    expect_fail(&oc, c, 4, CALQ_ERR_SHAPE, "scales of the wrong length");

    oc = resize13("nearest", NULL);
    calq_tensor d[4] = {ramp(DIMS(2, 2), 1), none, FLOATS(1, -2), none};
    expect_fail(&oc, d, 4, CALQ_ERR_SHAPE, "negative scale");

    oc = resize13("nearest", NULL);
    calq_tensor e[4] = {ramp(DIMS(2, 2), 1), none, FLOATS(1, 1e30f), none};
    expect_fail(&oc, e, 4, CALQ_ERR_SHAPE, "huge scale");

    oc = resize13("nearest", NULL);
    calq_tensor f[4] = {ramp(DIMS(2, 2), 1), none, none, INTS(2, -1)};
    expect_fail(&oc, f, 4, CALQ_ERR_SHAPE, "negative size");

    /* Scales known by shape only (computed at run time) cannot give a shape. */
    oc = resize13("nearest", NULL);
    calq_tensor g[4] = {ramp(DIMS(2, 2), 1), none, {CALQ_DTYPE_FLOAT32, 1, {2}, NULL}, none};
    expect_fail(&oc, g, 4, CALQ_ERR_SHAPE, "scales without data");

    oc = resize13("linear", "tf_crop_and_resize");
    calq_tensor h[4] = {ramp(DIMS(4), 1), none, none, INTS(3)};
    expect_fail(&oc, h, 4, CALQ_ERR_SHAPE, "crop without roi");

    oc = resize13("area", NULL);
    calq_tensor i[4] = {ramp(DIMS(4), 1), none, none, INTS(3)};
    expect_fail(&oc, i, 4, CALQ_ERR_SHAPE, "unknown mode");

    oc = resize13("linear", "corners");
    calq_tensor j[4] = {ramp(DIMS(4), 1), none, none, INTS(3)};
    expect_fail(&oc, j, 4, CALQ_ERR_SHAPE, "unknown coordinate mode");

    oc = resize13("nearest", NULL);
    op_attr_str(&oc, "nearest_mode", "round");
    calq_tensor k[4] = {ramp(DIMS(4), 1), none, none, INTS(3)};
    expect_fail(&oc, k, 4, CALQ_ERR_SHAPE, "unknown nearest mode");

    oc = resize13("nearest", NULL);
    calq_tensor l[4] = {empty_f32(), none, none, INTS(3)};
    expect_fail(&oc, l, 4, CALQ_ERR_SHAPE, "empty input to non-empty output");

    calq_tensor xu = {CALQ_DTYPE_UINT8, 1, {4}, NULL};
    calq__tensor_alloc(&xu, NULL);
    oc = resize13("linear", NULL);
    calq_tensor m[4] = {xu, none, none, INTS(3)};
    expect_fail(&oc, m, 4, CALQ_ERR_UNSUPPORTED, "linear uint8");

    oc = op_case_new("Upsample", 9, 2, 1);
    calq_tensor n[2] = {ramp(DIMS(4), 1), none};
    expect_fail(&oc, n, 2, CALQ_ERR_SHAPE, "Upsample-9 without scales");

    oc = op_case_new("Upsample", 7, 1, 1);
    calq_tensor o[1] = {ramp(DIMS(4), 1)};
    expect_fail(&oc, o, 1, CALQ_ERR_SHAPE, "Upsample-7 without scales");
}

/* Same output for any thread count (the kernels split independent rows). */
static void test_threads(void)
{
    const int64_t dims[4] = {1, 8, 33, 47};
    calq_tensor x = t_rand_f32(3, 4, dims, -1.0f, 1.0f);
    static const char *modes[] = {"nearest", "linear", "cubic"};
    for (int m = 0; m < 3; m++) {
        calq_tensor out[2];
        for (int t = 0; t < 2; t++) {
            calq_tensor xc;
            calq_error err = {0};
            calq__tensor_clone(&xc, &x, &err);
            op_case oc = resize13(modes[m], NULL);
            calq_tensor in[4] = {xc, none, FLOATS(1, 1, 1.9f, 2.3f), none};
            omp_set_num_threads(t ? 4 : 1);
            out[t] = run(&oc, in, 4);
            op_case_free(&oc);
        }
        EXPECT(out[0].data && out[1].data && memcmp(out[0].data, out[1].data, calq__tensor_nbytes(&out[0])) == 0);
        calq_tensor_free_data(&out[0]);
        calq_tensor_free_data(&out[1]);
    }
    omp_set_num_threads(omp_get_num_procs());
    calq_tensor_free_data(&x);
}

int main(void)
{
    test_nearest();
    test_linear();
    test_linear_nd();
    test_cubic();
    test_upsample();
    test_invalid();
    test_threads();
    if (failures) fprintf(stderr, "%d failure(s)\n", failures);
    return failures != 0;
}
