/* Reductions, Softmax / LogSoftmax / Hardmax and ArgMax / ArgMin: hand-computed cases, the
 * axes-as-input form, shape validation, and bit-identity across thread counts. */
#include <math.h>
#include <stdbool.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/op.h"
#include "op_harness.h"

static void free_all(calq_tensor *t, int n)
{
    for (int i = 0; i < n; i++) calq_tensor_free_data(&t[i]);
}

static int same_bits(const calq_tensor *a, const calq_tensor *b)
{
    return calq__shape_equal(a->dims, a->ndim, b->dims, b->ndim) && a->dtype == b->dtype &&
           memcmp(a->data, b->data, calq__tensor_nbytes(a)) == 0;
}

/* Checks shape and values (float32 or int64 outputs). */
static int expect(const calq_tensor *t, int nd, const int64_t *dims, const double *want, const char *what)
{
    if (!calq__shape_equal(t->dims, t->ndim, dims, nd)) {
        char a[64], b[64];
        fprintf(stderr, "%s: shape %s, want %s\n", what, calq__shape_str(t->dims, t->ndim, a, sizeof a),
                calq__shape_str(dims, nd, b, sizeof b));
        return 0;
    }
    int ok = 1;
    for (int64_t i = 0; i < calq_tensor_numel(t); i++) {
        double v = calq__tensor_get_f64(t, i);
        if (!(fabs(v - want[i]) <= 1e-6 * (1.0 + fabs(want[i])))) {
            fprintf(stderr, "%s: element %lld is %.9g, want %.9g\n", what, (long long)i, v, want[i]);
            ok = 0;
        }
    }
    return ok;
}

/* x = 1..12 as [3,2,2]. */
static calq_tensor x12(void)
{
    float v[12];
    for (int i = 0; i < 12; i++) v[i] = (float)(i + 1);
    const int64_t d[] = {3, 2, 2};
    return t_f32(v, 3, d);
}

/* Runs a one-input reduction with an `axes` attribute (n_axes < 0: none) at opset 11. */
static calq_tensor reduce_attr(const char *op, const calq_tensor *x, const int64_t *axes, int n_axes, int keepdims)
{
    op_case oc = op_case_new(op, 11, 1, 1);
    if (n_axes >= 0) op_attr_ints(&oc, "axes", axes, n_axes);
    op_attr_int(&oc, "keepdims", keepdims);
    calq_tensor out[1];
    EXPECT_OK(op_case_run(&oc, x, 1, out, 1, 0, &e_));
    op_case_free(&oc);
    return out[0];
}

static void test_reduce_hand(void)
{
    calq_tensor x = x12();
    {
        const int64_t ax[] = {1}, d[] = {3, 1, 2};
        const double w[] = {4, 6, 12, 14, 20, 22};
        calq_tensor y = reduce_attr("ReduceSum", &x, ax, 1, 1);
        EXPECT(expect(&y, 3, d, w, "ReduceSum axes=[1] keepdims"));
        calq_tensor_free_data(&y);
    }
    {
        const int64_t ax[] = {0, 2}, d[] = {2};
        const double w[] = {5.5, 7.5}; /* (1+2+5+6+9+10)/6, (3+4+7+8+11+12)/6 */
        calq_tensor y = reduce_attr("ReduceMean", &x, ax, 2, 0);
        EXPECT(expect(&y, 1, d, w, "ReduceMean axes=[0,2]"));
        calq_tensor_free_data(&y);
    }
    {
        const int64_t d[] = {1, 1, 1};
        const double w[] = {12};
        calq_tensor y = reduce_attr("ReduceMax", &x, NULL, -1, 1);
        EXPECT(expect(&y, 3, d, w, "ReduceMax all"));
        calq_tensor_free_data(&y);
        const double w2[] = {78};
        const int64_t no_axes[1] = {0};
        y = reduce_attr("ReduceSum", &x, no_axes, 0, 1); /* empty axes attribute: reduce all too */
        EXPECT(expect(&y, 3, d, w2, "ReduceSum axes=[]"));
        calq_tensor_free_data(&y);
    }
    {
        const int64_t ax[] = {-1}, d[] = {3, 2};
        const double w[] = {1, 3, 5, 7, 9, 11};
        calq_tensor y = reduce_attr("ReduceMin", &x, ax, 1, 0);
        EXPECT(expect(&y, 2, d, w, "ReduceMin axes=[-1]"));
        calq_tensor_free_data(&y);
    }
    {
        const int64_t ax[] = {2}, d[] = {3, 2, 1};
        const double w[] = {2, 12, 30, 56, 90, 132};
        calq_tensor y = reduce_attr("ReduceProd", &x, ax, 1, 1);
        EXPECT(expect(&y, 3, d, w, "ReduceProd axes=[2]"));
        calq_tensor_free_data(&y);
    }
    {
        const int64_t ax[] = {2, 1}, d[] = {3};
        const double w[] = {log(10.0), log(26.0), log(42.0)};
        calq_tensor y = reduce_attr("ReduceLogSum", &x, ax, 2, 0);
        EXPECT(expect(&y, 1, d, w, "ReduceLogSum axes=[2,1]"));
        calq_tensor_free_data(&y);
    }
    {
        /* All-but-one reduced dims, the vector path: axis 0 of [3,4] -> sums of columns. */
        const int64_t ax[] = {0}, d[] = {1, 4};
        const double w[] = {15, 18, 21, 24};
        calq_tensor x2 = x;
        x2.ndim = 2;
        x2.dims[0] = 3;
        x2.dims[1] = 4;
        calq_tensor y = reduce_attr("ReduceSum", &x2, ax, 1, 1);
        EXPECT(expect(&y, 2, d, w, "ReduceSum axis 0 of 3x4"));
        calq_tensor_free_data(&y);
    }
    calq_tensor_free_data(&x);

    const float sv[] = {-3, 4, 1, -1};
    const int64_t sd[] = {2, 2}, d2[] = {2}, ax1[] = {1}, ax0[] = {0};
    calq_tensor s = t_f32(sv, 2, sd);
    {
        const double w[] = {7, 2};
        calq_tensor y = reduce_attr("ReduceL1", &s, ax1, 1, 0);
        EXPECT(expect(&y, 1, d2, w, "ReduceL1"));
        calq_tensor_free_data(&y);
    }
    {
        const double w[] = {5, sqrt(2.0)};
        calq_tensor y = reduce_attr("ReduceL2", &s, ax1, 1, 0);
        EXPECT(expect(&y, 1, d2, w, "ReduceL2"));
        calq_tensor_free_data(&y);
    }
    {
        const double w[] = {10, 17};
        calq_tensor y = reduce_attr("ReduceSumSquare", &s, ax0, 1, 0);
        EXPECT(expect(&y, 1, d2, w, "ReduceSumSquare"));
        calq_tensor_free_data(&y);
    }
    {
        const double w[] = {log(exp(-3.0) + exp(4.0)), log(exp(1.0) + exp(-1.0))};
        calq_tensor y = reduce_attr("ReduceLogSumExp", &s, ax1, 1, 0);
        EXPECT(expect(&y, 1, d2, w, "ReduceLogSumExp"));
        calq_tensor_free_data(&y);
    }
    calq_tensor_free_data(&s);
    {
        /* Large values: exp(1000) overflows, the shifted form does not. */
        const float bv[] = {1000, 1000, -1000, -INFINITY};
        calq_tensor b = t_f32(bv, 2, sd);
        const double w[] = {1000 + log(2.0), -1000};
        calq_tensor y = reduce_attr("ReduceLogSumExp", &b, ax1, 1, 0);
        EXPECT(expect(&y, 1, d2, w, "ReduceLogSumExp large"));
        calq_tensor_free_data(&y);
        calq_tensor_free_data(&b);
    }
    {
        /* int64 input (shape arithmetic): product of all, mean truncates like integer division. */
        const int64_t iv[] = {2, 3, 4, 5}, d1[] = {4}, none[] = {0};
        calq_tensor t = t_i64(iv, 1, d1);
        const double w[] = {120};
        calq_tensor y = reduce_attr("ReduceProd", &t, NULL, -1, 0);
        EXPECT(y.dtype == CALQ_DTYPE_INT64 && expect(&y, 0, none, w, "ReduceProd int64"));
        calq_tensor_free_data(&y);
        const double w2[] = {3}; /* 14 / 4 */
        y = reduce_attr("ReduceMean", &t, NULL, -1, 0);
        EXPECT(expect(&y, 0, none, w2, "ReduceMean int64"));
        calq_tensor_free_data(&y);
        calq_tensor_free_data(&t);
    }
}

/* ReduceSum from opset 13 (and every reduction from 18) takes axes as input 1. */
static void test_reduce_axes_input(void)
{
    calq_tensor x = x12();
    const int64_t one[] = {1}, zero[] = {0}, axv[] = {-2};
    {
        op_case oc = op_case_new("ReduceSum", 13, 2, 1);
        calq_tensor in[2] = {x, t_i64(axv, 1, one)}, out[1];
        EXPECT_OK(op_case_run(&oc, in, 2, out, 1, 0, &e_));
        const int64_t d[] = {3, 1, 2};
        const double w[] = {4, 6, 12, 14, 20, 22};
        EXPECT(expect(&out[0], 3, d, w, "ReduceSum-13 axes input [-2]"));
        calq_tensor_free_data(&in[1]);
        free_all(out, 1);
        op_case_free(&oc);
    }
    for (int noop = 0; noop < 2; noop++) {
        /* Empty axes: reduce everything, or with noop_with_empty_axes return the input. */
        op_case oc = op_case_new("ReduceSum", 13, 2, 1);
        op_attr_int(&oc, "keepdims", 0);
        op_attr_int(&oc, "noop_with_empty_axes", noop);
        calq_tensor in[2] = {x, t_i64(zero, 1, zero)}, out[1];
        EXPECT_OK(op_case_run(&oc, in, 2, out, 1, 0, &e_));
        if (noop) {
            EXPECT(same_bits(&out[0], &x));
        } else {
            const double w[] = {78};
            EXPECT(expect(&out[0], 0, zero, w, "ReduceSum-13 empty axes"));
        }
        calq_tensor_free_data(&in[1]);
        free_all(out, 1);
        op_case_free(&oc);
    }
    {
        /* Axes input omitted. */
        op_case oc = op_case_new("ReduceSum", 13, 2, 1);
        calq_tensor in[2] = {x, {0}}, out[1];
        EXPECT_OK(op_case_run(&oc, in, 2, out, 1, 0, &e_));
        const int64_t d[] = {1, 1, 1};
        const double w[] = {78};
        EXPECT(expect(&out[0], 3, d, w, "ReduceSum-13 no axes input"));
        free_all(out, 1);
        op_case_free(&oc);
    }
    {
        /* ReduceMax at opset 18 takes the input form too. */
        op_case oc = op_case_new("ReduceMax", 18, 2, 1);
        op_attr_int(&oc, "keepdims", 0);
        const int64_t a0[] = {0};
        calq_tensor in[2] = {x, t_i64(a0, 1, one)}, out[1];
        EXPECT_OK(op_case_run(&oc, in, 2, out, 1, 0, &e_));
        const int64_t d[] = {2, 2};
        const double w[] = {9, 10, 11, 12};
        EXPECT(expect(&out[0], 2, d, w, "ReduceMax-18 axes input"));
        calq_tensor_free_data(&in[1]);
        free_all(out, 1);
        op_case_free(&oc);
    }
    calq_tensor_free_data(&x);
}

static void expect_error(op_case *oc, const calq_tensor *in, int n_in, calq_status want, const char *needle)
{
    calq_tensor out[1] = {{0}};
    calq_error err = {0};
    calq_status s = op_case_run(oc, in, n_in, out, 1, 0, &err);
    EXPECT(s == want);
    if (!strstr(err.message, needle)) {
        fprintf(stderr, "error message '%s' lacks '%s'\n", err.message, needle);
        failures++;
    }
    calq_tensor_free_data(&out[0]);
}

static void test_reduce_errors(void)
{
    calq_tensor x = x12();
    const int64_t dup[] = {1, -2}, far[] = {3};
    op_case oc = op_case_new("ReduceMean", 11, 1, 1);
    op_attr_ints(&oc, "axes", dup, 2);
    expect_error(&oc, &x, 1, CALQ_ERR_SHAPE, "axis -2 is given twice");
    op_case_free(&oc);
    oc = op_case_new("ReduceMean", 11, 1, 1);
    op_attr_ints(&oc, "axes", far, 1);
    expect_error(&oc, &x, 1, CALQ_ERR_SHAPE, "axis 3 is out of range for a rank-3 input");
    op_case_free(&oc);
    oc = op_case_new("Softmax", 13, 1, 1);
    op_attr_int(&oc, "axis", -4);
    expect_error(&oc, &x, 1, CALQ_ERR_SHAPE, "axis -4 is out of range");
    op_case_free(&oc);
    calq_tensor_free_data(&x);
}

/* Every axes pattern of a random 4-D input against a direct double-precision loop, and
 * thread-count identity on shapes large enough to run in parallel. */
static void test_reduce_random(void)
{
    const int64_t d[] = {6, 70, 5, 40};
    calq_tensor x = t_rand_f32(7, 4, d, -2, 2);
    const float *xv = x.data;
    for (int mask = 1; mask < 16; mask++) {
        int64_t axes[4];
        int n = 0;
        for (int i = 0; i < 4; i++)
            if (mask >> i & 1) axes[n++] = i;
        calq_tensor y = reduce_attr("ReduceSum", &x, axes, n, 1);
        /* Output strides with reduced dims collapsed to 1. */
        int64_t od[4], os[4], s = 1;
        for (int i = 3; i >= 0; i--) {
            od[i] = mask >> i & 1 ? 1 : d[i];
            os[i] = s;
            s *= od[i];
        }
        double *want = calloc((size_t)s, sizeof(double));
        for (int64_t a = 0; a < d[0]; a++)
            for (int64_t b = 0; b < d[1]; b++)
                for (int64_t c = 0; c < d[2]; c++)
                    for (int64_t e = 0; e < d[3]; e++) {
                        int64_t o = (mask & 1 ? 0 : a * os[0]) + (mask & 2 ? 0 : b * os[1]) +
                                    (mask & 4 ? 0 : c * os[2]) + (mask & 8 ? 0 : e * os[3]);
                        want[o] += xv[((a * d[1] + b) * d[2] + c) * d[3] + e];
                    }
        char what[64];
        snprintf(what, sizeof what, "ReduceSum random mask %d", mask);
        EXPECT(expect(&y, 4, od, want, what));
        free(want);

        int prev = omp_get_max_threads();
        omp_set_num_threads(1);
        calq_tensor y1 = reduce_attr("ReduceSum", &x, axes, n, 1);
        calq_tensor m1 = reduce_attr("ReduceLogSumExp", &x, axes, n, 1);
        omp_set_num_threads(3);
        calq_tensor m3 = reduce_attr("ReduceLogSumExp", &x, axes, n, 1);
        omp_set_num_threads(prev);
        if (!same_bits(&y, &y1) || !same_bits(&m1, &m3)) {
            fprintf(stderr, "reduction mask %d differs between thread counts\n", mask);
            failures++;
        }
        calq_tensor_free_data(&y);
        calq_tensor_free_data(&y1);
        calq_tensor_free_data(&m1);
        calq_tensor_free_data(&m3);
    }
    calq_tensor_free_data(&x);
}

/* ---- softmax family ----------------------------------------------------------------------- */

static calq_tensor run_axis_op(const char *op, int opset, const calq_tensor *x, int has_axis, int64_t axis)
{
    op_case oc = op_case_new(op, opset, 1, 1);
    if (has_axis) op_attr_int(&oc, "axis", axis);
    calq_tensor out[1];
    EXPECT_OK(op_case_run(&oc, x, 1, out, 1, 0, &e_));
    op_case_free(&oc);
    return out[0];
}

static void test_softmax_opsets(void)
{
    /* x is [2,2,3]: batch 0 holds 0..5, batch 1 is all zeros. */
    const float xv[] = {0, 1, 2, 3, 4, 5, 0, 0, 0, 0, 0, 0};
    const int64_t d[] = {2, 2, 3};
    calq_tensor x = t_f32(xv, 3, d);
    double s6 = 0;
    for (int i = 0; i < 6; i++) s6 += exp((double)i);

    /* Opset 11, axis 1: rows are the flattened [2, 6]. */
    double w11[12];
    for (int i = 0; i < 6; i++) {
        w11[i] = exp((double)i) / s6;
        w11[6 + i] = 1.0 / 6;
    }
    calq_tensor y = run_axis_op("Softmax", 11, &x, 1, 1);
    EXPECT(expect(&y, 3, d, w11, "Softmax-11 axis 1"));
    calq_tensor_free_data(&y);
    y = run_axis_op("Softmax", 11, &x, 0, 0); /* default axis is 1 before opset 13 */
    EXPECT(expect(&y, 3, d, w11, "Softmax-11 default axis"));
    calq_tensor_free_data(&y);

    /* Opset 13, axis 1: pairs (x[b,0,k], x[b,1,k]) that differ by 3 in batch 0. */
    double lo = 1.0 / (1.0 + exp(3.0)), hi = exp(3.0) / (1.0 + exp(3.0));
    const double w13[] = {lo, lo, lo, hi, hi, hi, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5};
    y = run_axis_op("Softmax", 13, &x, 1, 1);
    EXPECT(expect(&y, 3, d, w13, "Softmax-13 axis 1"));
    calq_tensor_free_data(&y);

    /* Opset 13 default axis -1: rows of 3. */
    double s3a = exp(0.0) + exp(1.0) + exp(2.0);
    double w13d[12];
    for (int r = 0; r < 4; r++)
        for (int k = 0; k < 3; k++) w13d[r * 3 + k] = r < 2 ? exp((double)k) / s3a : 1.0 / 3;
    y = run_axis_op("Softmax", 13, &x, 0, 0);
    EXPECT(expect(&y, 3, d, w13d, "Softmax-13 default axis"));
    calq_tensor_free_data(&y);

    /* LogSoftmax, same two opsets. */
    double l11[12], l13[12];
    for (int i = 0; i < 12; i++) {
        l11[i] = log(w11[i]);
        l13[i] = log(w13[i]);
    }
    y = run_axis_op("LogSoftmax", 11, &x, 1, 1);
    EXPECT(expect(&y, 3, d, l11, "LogSoftmax-11 axis 1"));
    calq_tensor_free_data(&y);
    y = run_axis_op("LogSoftmax", 13, &x, 1, 1);
    EXPECT(expect(&y, 3, d, l13, "LogSoftmax-13 axis 1"));
    calq_tensor_free_data(&y);

    /* Hardmax-13 axis 1: the larger of each pair (first one on ties). */
    const double h13[] = {0, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0, 0};
    y = run_axis_op("Hardmax", 13, &x, 1, 1);
    EXPECT(expect(&y, 3, d, h13, "Hardmax-13 axis 1"));
    calq_tensor_free_data(&y);
    calq_tensor_free_data(&x);
}

static void test_softmax_large_values(void)
{
    const float xv[] = {1, 2, 3, 1000, 1000, 1000};
    const int64_t d[] = {2, 3};
    calq_tensor x = t_f32(xv, 2, d);
    double ls = log(exp(1.0) + exp(2.0) + exp(3.0));
    const double wl[] = {1 - ls, 2 - ls, 3 - ls, -log(3.0), -log(3.0), -log(3.0)};
    calq_tensor y = run_axis_op("LogSoftmax", 13, &x, 0, 0);
    EXPECT(expect(&y, 2, d, wl, "LogSoftmax large values"));
    calq_tensor_free_data(&y);
    const double ws[] = {exp(1 - ls), exp(2 - ls), exp(3 - ls), 1.0 / 3, 1.0 / 3, 1.0 / 3};
    y = run_axis_op("Softmax", 13, &x, 0, 0);
    EXPECT(expect(&y, 2, d, ws, "Softmax large values"));
    calq_tensor_free_data(&y);
    calq_tensor_free_data(&x);
}

static void test_argmax(void)
{
    const float xv[] = {1, 3, 3, 2, 2, 1};
    const int64_t d[] = {2, 3}, d21[] = {2, 1}, d2[] = {2}, d13[] = {1, 3};
    calq_tensor x = t_f32(xv, 2, d);
    struct {
        const char *op;
        int64_t axis;
        int keep, last;
        int nd;
        const int64_t *dims;
        double want[3];
    } cases[] = {
        {"ArgMax", 1, 1, 0, 2, d21, {1, 0}},    {"ArgMax", -1, 0, 1, 1, d2, {2, 1}},
        {"ArgMin", 1, 0, 0, 1, d2, {0, 2}},     {"ArgMin", 0, 1, 1, 2, d13, {0, 1, 1}},
        {"ArgMax", 0, 1, 0, 2, d13, {1, 0, 0}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        op_case oc = op_case_new(cases[i].op, 13, 1, 1);
        op_attr_int(&oc, "axis", cases[i].axis);
        op_attr_int(&oc, "keepdims", cases[i].keep);
        op_attr_int(&oc, "select_last_index", cases[i].last);
        calq_tensor out[1];
        EXPECT_OK(op_case_run(&oc, &x, 1, out, 1, 0, &e_));
        char what[64];
        snprintf(what, sizeof what, "%s case %zu", cases[i].op, i);
        EXPECT(out[0].dtype == CALQ_DTYPE_INT64 && expect(&out[0], cases[i].nd, cases[i].dims, cases[i].want, what));
        free_all(out, 1);
        op_case_free(&oc);
    }
    calq_tensor_free_data(&x);
}

static void test_softmax_threads(void)
{
    const int64_t d[] = {16, 1000, 12};
    calq_tensor x = t_rand_f32(5, 3, d, -20, 20);
    for (int axis = 0; axis < 3; axis++) {
        int prev = omp_get_max_threads();
        omp_set_num_threads(1);
        calq_tensor a = run_axis_op("Softmax", 13, &x, 1, axis);
        omp_set_num_threads(2);
        calq_tensor b = run_axis_op("Softmax", 13, &x, 1, axis);
        omp_set_num_threads(prev);
        if (!same_bits(&a, &b)) {
            fprintf(stderr, "Softmax axis %d differs between thread counts\n", axis);
            failures++;
        }
        /* Each softmax row sums to 1. */
        int64_t inner = axis == 2 ? 1 : axis == 1 ? 12 : 12000, len = d[axis];
        const float *p = a.data;
        double worst = 0;
        for (int64_t r = 0; r < 16 * 1000 * 12 / len; r++) {
            int64_t off = (r / inner) * len * inner + r % inner;
            double s = 0;
            for (int64_t j = 0; j < len; j++) s += p[off + j * inner];
            if (fabs(s - 1) > worst) worst = fabs(s - 1);
        }
        EXPECT(worst < 1e-5);
        calq_tensor_free_data(&a);
        calq_tensor_free_data(&b);
    }
    calq_tensor_free_data(&x);
}

/* The reference kernel into ref, the fast path on 1 thread into f1 (took: it ran) and on 2
 * threads into f2 (caller frees the three). */
static void run_ref_fast(op_case *oc, const calq_tensor *x, calq_tensor *ref, calq_tensor *f1, calq_tensor *f2,
                         bool *took)
{
    EXPECT_OK(op_case_run(oc, x, 1, ref, 1, 0, &e_));
    int prev = omp_get_max_threads();
    omp_set_num_threads(1);
    EXPECT_OK(op_case_run_ex(oc, x, 1, f1, 1, 1, took, &e_));
    omp_set_num_threads(2);
    EXPECT_OK(op_case_run(oc, x, 1, f2, 1, 1, &e_));
    omp_set_num_threads(prev);
}

/* The oneDNN fast path of Softmax / LogSoftmax (exec/kernels/softmax_dnnl.c) against the
 * reference: the last axis (oneDNN's JIT kernel, which must run on an AVX2 CPU), an inner axis
 * (declined: the reference runs), opset 11's flattening of a rank-3 input, large values; close to
 * the reference and bit-identical for 1 and 2 threads. */
static void test_softmax_fast(void)
{
    static const struct {
        const char *op;
        int opset, axis, jit;
        float lo, hi;
    } cases[] = {
        {"Softmax", 13, 2, 1, -20, 20},    {"Softmax", 13, -1, 1, -3000, 3000}, {"Softmax", 13, 1, 0, -20, 20},
        {"Softmax", 11, 1, 1, -20, 20},    {"LogSoftmax", 13, 2, 1, -20, 20},   {"LogSoftmax", 11, 1, 1, -50, 50},
        {"LogSoftmax", 13, 0, 0, -20, 20},
    };
    const int64_t d[] = {7, 333, 12};
#ifdef __x86_64__
    const int avx2 = __builtin_cpu_supports("avx2");
#else
    const int avx2 = 0;
#endif
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        calq_tensor x = t_rand_f32(11 + (unsigned)k, 3, d, cases[k].lo, cases[k].hi);
        op_case oc = op_case_new(cases[k].op, cases[k].opset, 1, 1);
        op_attr_int(&oc, "axis", cases[k].axis);
        calq_tensor ref, f1, f2;
        bool took = false;
        run_ref_fast(&oc, &x, &ref, &f1, &f2, &took);
        if (avx2 && (int)took != cases[k].jit) {
            fprintf(stderr, "%s-%d axis %d: fast kernel %s\n", cases[k].op, cases[k].opset, cases[k].axis,
                    took ? "ran, expected the reference" : "did not run");
            failures++;
        }
        EXPECT(same_bits(&f1, &f2));
        const bool log = strcmp(cases[k].op, "LogSoftmax") == 0;
        const float *a = f1.data, *b = ref.data;
        double worst = 0;
        for (int64_t i = 0; i < 7 * 333 * 12; i++) {
            /* relative to the value (softmax), or to max(1, |value|) (log-softmax: near 0 for the
             * largest element, formed by cancellation) */
            double den = log ? fmax(1.0, fabs(b[i])) : fmax(fabs(b[i]), 1e-30);
            double e = fabs((double)a[i] - (double)b[i]) / den;
            if (!log && fabs((double)a[i] - (double)b[i]) < 1e-37) e = 0; /* both underflow */
            if (e > worst) worst = e;
        }
        if (!(worst <= 1e-5)) { /* measured up to 2.3e-6 (softmax), 3.6e-6 (log) with AVX-512 */
            fprintf(stderr, "%s-%d axis %d: fast vs reference relative error %g\n", cases[k].op, cases[k].opset,
                    cases[k].axis, worst);
            failures++;
        }
        calq_tensor_free_data(&ref);
        calq_tensor_free_data(&f1);
        calq_tensor_free_data(&f2);
        calq_tensor_free_data(&x);
        op_case_free(&oc);
    }
}

/* ReduceSum / ReduceMean's oneDNN path (reduce_dnnl.c): taken for long runs of innermost reduced
 * elements and declined otherwise (a middle axis, short runs); within float rounding of the
 * reference's double sums, measured against the sum of |x| per output; the same bits for 1
 * and 2 threads. */
static void test_reduce_fast(void)
{
    static const struct {
        const char *op;
        int opset, keep, jit;
        int n_axes;
        int64_t axes[2];
        float lo, hi;
        int big; /* 8x197x192: above the serial threshold, so 2 threads really run */
    } cases[] = {
        {"ReduceMean", 13, 1, 1, 1, {-1}, -3, 3, 0},      {"ReduceMean", 11, 0, 1, 2, {1, 2}, -3, 3, 0},
        {"ReduceSum", 11, 1, 1, 1, {2}, -1000, 1000, 0},  {"ReduceSum", 11, 1, 1, 2, {2, 1}, 0, 1, 0},
        {"ReduceMean", 13, 1, 0, 1, {1}, -3, 3, 0},       {"ReduceSum", 11, 1, 0, 1, {0}, -3, 3, 0},
        {"ReduceMean", 13, 1, 1, 1, {-1}, 1000, 1001, 0}, /* large common offset */
        {"ReduceMean", 13, 1, 1, 1, {-1}, -3, 3, 1},      {"ReduceSum", 11, 0, 1, 2, {1, 2}, -1, 1, 1},
    };
    const int64_t small[] = {5, 37, 197}, large[] = {8, 197, 192};
#ifdef __x86_64__
    const int avx2 = __builtin_cpu_supports("avx2");
#else
    const int avx2 = 0;
#endif
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const int64_t *d = cases[k].big ? large : small;
        calq_tensor x = t_rand_f32(31 + (unsigned)k, 3, d, cases[k].lo, cases[k].hi);
        op_case oc = op_case_new(cases[k].op, cases[k].opset, 1, 1);
        op_attr_ints(&oc, "axes", cases[k].axes, cases[k].n_axes);
        op_attr_int(&oc, "keepdims", cases[k].keep);
        calq_tensor ref, f1, f2;
        bool took = false;
        run_ref_fast(&oc, &x, &ref, &f1, &f2, &took);
        if (avx2 && (int)took != cases[k].jit) {
            fprintf(stderr, "%s case %zu: fast kernel %s\n", cases[k].op, k,
                    took ? "ran, expected the reference" : "did not run");
            failures++;
        }
        EXPECT(same_bits(&f1, &f2));
        EXPECT(calq_tensor_numel(&f1) == calq_tensor_numel(&ref));
        /* the scale of each output's rounding: the mean (or sum) of |x| over the reduced elements */
        bool red[3] = {false, false, false};
        for (int a = 0; a < cases[k].n_axes; a++) red[(cases[k].axes[a] + 3) % 3] = true;
        int64_t count = 1;
        for (int i = 0; i < 3; i++) count *= red[i] ? d[i] : 1;
        const double mag =
            fmax(fabs(cases[k].lo), fabs(cases[k].hi)) * (strcmp(cases[k].op, "ReduceSum") == 0 ? (double)count : 1.0);
        const float *a = f1.data, *b = ref.data;
        double worst = 0;
        for (int64_t i = 0; i < calq_tensor_numel(&ref); i++) {
            double e = fabs((double)a[i] - (double)b[i]) / mag;
            if (!(e <= worst)) worst = e;
        }
        if (!(worst <= 1e-6)) { /* float32 partial sums: a few ulp of the magnitude */
            fprintf(stderr, "%s case %zu: fast vs reference error %g of the magnitude\n", cases[k].op, k, worst);
            failures++;
        }
        calq_tensor_free_data(&ref);
        calq_tensor_free_data(&f1);
        calq_tensor_free_data(&f2);
        calq_tensor_free_data(&x);
        op_case_free(&oc);
    }
}

int main(void)
{
    test_softmax_fast();
    test_reduce_fast();
    test_reduce_hand();
    test_reduce_axes_input();
    test_reduce_errors();
    test_reduce_random();
    test_softmax_opsets();
    test_softmax_large_values();
    test_argmax();
    test_softmax_threads();
    if (failures)
        fprintf(stderr, "%d failure(s)\n", failures);
    else
        printf("test_kernels_reduce: all passed\n");
    return failures != 0;
}
