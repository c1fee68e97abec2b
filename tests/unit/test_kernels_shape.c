/* Shape / data-movement kernels against hand-computed results (values worked out by hand or
 * with numpy's equivalent of the ONNX rule named in each case). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_harness.h"

static calq_tensor t_i32(const int32_t *vals, int ndim, const int64_t *dims)
{
    calq_tensor t = {CALQ_DTYPE_INT32, ndim, {0}, NULL};
    for (int i = 0; i < ndim; i++) t.dims[i] = dims[i];
    calq__tensor_alloc(&t, NULL);
    memcpy(t.data, vals, calq__tensor_nbytes(&t));
    return t;
}

static calq_tensor t_iota(calq_dtype dt, int ndim, const int64_t *dims)
{
    calq_tensor t = {dt, ndim, {0}, NULL};
    for (int i = 0; i < ndim; i++) t.dims[i] = dims[i];
    calq__tensor_alloc(&t, NULL);
    for (int64_t i = 0; i < calq_tensor_numel(&t); i++) calq__tensor_set_i64(&t, i, i);
    return t;
}

/* 1-D int64 tensor from a list. */
static calq_tensor ints(int n, const int64_t *v)
{
    int64_t d = n;
    return t_i64(v, 1, &d);
}
static const calq_tensor none = {0}; /* an omitted optional input */
#define INTS(...) ints((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})

/* Checks shape and every value (exactly) of got against want[]. */
static int expect(const calq_tensor *got, int ndim, const int64_t *dims, const double *want, const char *what)
{
    char a[96], b[96];
    if (!calq__shape_equal(got->dims, got->ndim, dims, ndim)) {
        fprintf(stderr, "%s: shape %s, expected %s\n", what, calq__shape_str(got->dims, got->ndim, a, sizeof a),
                calq__shape_str(dims, ndim, b, sizeof b));
        return 0;
    }
    for (int64_t i = 0; i < calq_tensor_numel(got); i++)
        if (calq__tensor_get_f64(got, i) != want[i]) {
            fprintf(stderr, "%s: element %lld is %g, expected %g\n", what, (long long)i, calq__tensor_get_f64(got, i),
                    want[i]);
            return 0;
        }
    return 1;
}
#define EXPECT_TENSOR(got, dims, ...)                                                                                  \
    EXPECT(                                                                                                            \
        expect(got, (int)(sizeof((int64_t[])dims) / sizeof(int64_t)), (int64_t[])dims, (double[]){__VA_ARGS__}, #got))
#define D(...)                                                                                                         \
    {                                                                                                                  \
        __VA_ARGS__                                                                                                    \
    }

static void free_all(calq_tensor *t, int n)
{
    for (int i = 0; i < n; i++) calq_tensor_free_data(&t[i]);
}

/* Runs a case with the reference kernel. */
static calq_status run(op_case *oc, calq_tensor *in, int n_in, calq_tensor *out, int n_out, calq_error *err)
{
    memset(err, 0, sizeof *err);
    return op_case_run(oc, in, n_in, out, n_out, 0, err);
}

static void test_slice(void)
{
    calq_error err;
    /* 3x4 iota; axis 0 from 0 to INT64_MAX step 2 -> rows 0, 2; axis 1 from -1 (= 3) to INT64_MIN
     * (clamped to -1) step -2 -> columns 3, 1. */
    {
        op_case oc = op_case_new("Slice", 13, 5, 1);
        calq_tensor in[5] = {t_iota(CALQ_DTYPE_FLOAT32, 2, (int64_t[]){3, 4}), INTS(0, -1), INTS(INT64_MAX, INT64_MIN),
                             INTS(0, 1), INTS(2, -2)};
        calq_tensor out[1];
        EXPECT_OK(run(&oc, in, 5, out, 1, &err));
        EXPECT_TENSOR(&out[0], D(2, 2), 3, 1, 11, 9);
        free_all(out, 1);
        free_all(in, 5);
        op_case_free(&oc);
    }
    /* Full reversal of an int8 vector: start -1, end INT64_MIN, step -1. */
    {
        op_case oc = op_case_new("Slice", 13, 5, 1);
        calq_tensor in[5] = {t_iota(CALQ_DTYPE_INT8, 1, (int64_t[]){5}), INTS(-1), INTS(INT64_MIN), INTS(0), INTS(-1)};
        calq_tensor out[1];
        EXPECT_OK(run(&oc, in, 5, out, 1, &err));
        EXPECT_TENSOR(&out[0], D(5), 4, 3, 2, 1, 0);
        EXPECT(out[0].dtype == CALQ_DTYPE_INT8);
        free_all(out, 1);
        free_all(in, 5);
        op_case_free(&oc);
    }
    /* The spec clamps a negative-step start to [0, dim-1], so a start before the beginning still
     * yields element 0 (numpy would give nothing): start INT64_MIN, end INT64_MIN, step -1. */
    {
        op_case oc = op_case_new("Slice", 13, 5, 1);
        calq_tensor in[5] = {t_iota(CALQ_DTYPE_FLOAT32, 1, (int64_t[]){3}), INTS(INT64_MIN), INTS(INT64_MIN), INTS(0),
                             INTS(-1)};
        calq_tensor out[1];
        EXPECT_OK(run(&oc, in, 5, out, 1, &err));
        EXPECT_TENSOR(&out[0], D(1), 0);
        free_all(out, 1);
        free_all(in, 5);
        op_case_free(&oc);
    }
    /* Default axes and steps, start beyond the end -> empty. */
    {
        op_case oc = op_case_new("Slice", 13, 3, 1);
        calq_tensor in[3] = {t_iota(CALQ_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}), INTS(0, 5), INTS(2, 9)};
        calq_tensor out[1];
        EXPECT_OK(run(&oc, in, 3, out, 1, &err));
        EXPECT(out[0].ndim == 2 && out[0].dims[0] == 2 && out[0].dims[1] == 0);
        free_all(out, 1);
        free_all(in, 3);
        op_case_free(&oc);
    }
    /* Opset 9 form: attributes, negative axis, INT64_MAX end -> columns 1..2. */
    {
        op_case oc = op_case_new("Slice", 9, 1, 1);
        op_attr_ints(&oc, "starts", (int64_t[]){1}, 1);
        op_attr_ints(&oc, "ends", (int64_t[]){INT64_MAX}, 1);
        op_attr_ints(&oc, "axes", (int64_t[]){-1}, 1);
        calq_tensor in[1] = {t_iota(CALQ_DTYPE_FLOAT32, 2, (int64_t[]){2, 3})};
        calq_tensor out[1];
        EXPECT_OK(run(&oc, in, 1, out, 1, &err));
        EXPECT_TENSOR(&out[0], D(2, 2), 1, 2, 4, 5);
        free_all(out, 1);
        free_all(in, 1);
        op_case_free(&oc);
    }
    /* Extreme starts / ends / steps on [0, 1, 2, 3, 4] (the UBSan build runs these: -step and
     * end - start overflow for INT64_MIN if computed naively). Results are the spec's clamping,
     * which is numpy's x[s:e:p] except where the spec clamps a negative step's start into
     * [0, dim-1] (row 6: element 0; numpy gives nothing). onnxruntime-node 1.x gives one element
     * for rows 2, 7, 9 and 11 (an end of INT64_MAX with a negative step); the spec and numpy
     * give none. count -1 = empty. */
    {
        static const int64_t MN = INT64_MIN, MX = INT64_MAX;
        static const struct {
            int64_t s, e, p, first, count;
        } cases[] = {
            {MX, MN, MN, 4, 1},    {-1, MN, MN, 4, 1},
            {0, MX, MN, 0, 0},     {MN, MX, MX, 0, 1},
            {MN, MX, 1, 0, 5},     {MX, MN, -1, 4, 5},
            {MN, MN, MN, 0, 1},    {MX, MX, MN, 0, 0},
            {2, MN, MN + 1, 2, 1}, {0, MX, -1, 0, 0},
            {0, 5, MX, 0, 1},      {MN, MX, MN, 0, 0},
            {4, 0, MN, 4, 1},      {MN + 1, MX - 1, MX - 1, 0, 1},
            {-6, 6, 2, 0, 3},      {MX - 1, -6, -2, 4, 3},
        };
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            op_case oc = op_case_new("Slice", 13, 5, 1);
            calq_tensor in[5] = {t_iota(CALQ_DTYPE_FLOAT32, 1, (int64_t[]){5}), INTS(cases[i].s), INTS(cases[i].e),
                                 INTS(0), INTS(cases[i].p)};
            calq_tensor out[1] = {0};
            EXPECT_OK(run(&oc, in, 5, out, 1, &err));
            double want[5];
            int64_t step = cases[i].count > 1 ? cases[i].p : 0; /* small whenever more than one is taken */
            for (int64_t k = 0; k < cases[i].count; k++) want[k] = (double)(cases[i].first + k * step);
            char what[64];
            snprintf(what, sizeof what, "slice case %zu", i);
            EXPECT(expect(&out[0], 1, (int64_t[]){cases[i].count}, want, what));
            free_all(out, 1);
            free_all(in, 5);
            op_case_free(&oc);
        }
    }
    /* Step 0 is a shape error. */
    {
        op_case oc = op_case_new("Slice", 13, 5, 1);
        calq_tensor in[5] = {t_iota(CALQ_DTYPE_FLOAT32, 1, (int64_t[]){4}), INTS(0), INTS(4), INTS(0), INTS(0)};
        calq_tensor out[1] = {0};
        EXPECT(run(&oc, in, 5, out, 1, &err) == CALQ_ERR_SHAPE);
        free_all(out, 1);
        free_all(in, 5);
        op_case_free(&oc);
    }
}

static void test_reshape(void)
{
    calq_error err;
    calq_tensor x = t_iota(CALQ_DTYPE_FLOAT32, 3, (int64_t[]){2, 3, 4});
    /* 0 copies dim 0 (2); -1 takes the rest (12). */
    {
        op_case oc = op_case_new("Reshape", 14, 2, 1);
        calq_tensor in[2] = {x, INTS(0, -1)}, out[1];
        EXPECT_OK(run(&oc, in, 2, out, 1, &err));
        EXPECT(out[0].ndim == 2 && out[0].dims[0] == 2 && out[0].dims[1] == 12);
        EXPECT(memcmp(out[0].data, x.data, 24 * sizeof(float)) == 0);
        free_all(out, 1);
        calq_tensor_free_data(&in[1]);
        op_case_free(&oc);
    }
    /* -1 first, 0 copies dim 1 (3): 24 / (3 * 2) = 4. */
    {
        op_case oc = op_case_new("Reshape", 14, 2, 1);
        calq_tensor in[2] = {x, INTS(-1, 0, 2)}, out[1];
        EXPECT_OK(run(&oc, in, 2, out, 1, &err));
        EXPECT(out[0].ndim == 3 && out[0].dims[0] == 4 && out[0].dims[1] == 3 && out[0].dims[2] == 2);
        free_all(out, 1);
        calq_tensor_free_data(&in[1]);
        op_case_free(&oc);
    }
    /* allowzero=1: a 0 is a real zero-sized dim. */
    {
        op_case oc = op_case_new("Reshape", 14, 2, 1);
        op_attr_int(&oc, "allowzero", 1);
        calq_tensor in[2] = {t_iota(CALQ_DTYPE_FLOAT32, 2, (int64_t[]){0, 3}), INTS(3, 0)}, out[1];
        EXPECT_OK(run(&oc, in, 2, out, 1, &err));
        EXPECT(out[0].ndim == 2 && out[0].dims[0] == 3 && out[0].dims[1] == 0);
        free_all(out, 1);
        free_all(in, 2);
        op_case_free(&oc);
    }
    /* 12 elements cannot become 5x-1. */
    {
        op_case oc = op_case_new("Reshape", 14, 2, 1);
        calq_tensor in[2] = {t_iota(CALQ_DTYPE_FLOAT32, 3, (int64_t[]){1, 3, 4}), INTS(5, -1)}, out[1] = {0};
        EXPECT(run(&oc, in, 2, out, 1, &err) == CALQ_ERR_SHAPE);
        EXPECT(strstr(err.message, "cannot turn 1x3x4 (12 elements) into 5x-1") != NULL);
        EXPECT(strcmp(err.layer, "node") == 0);
        free_all(out, 1);
        free_all(in, 2);
        op_case_free(&oc);
    }
    /* Two -1 and a too-short input for 0 are errors too. */
    {
        op_case oc = op_case_new("Reshape", 14, 2, 1);
        calq_tensor in[2] = {x, INTS(-1, -1)}, out[1] = {0};
        EXPECT(run(&oc, in, 2, out, 1, &err) == CALQ_ERR_SHAPE);
        calq_tensor_free_data(&in[1]);
        in[1] = INTS(2, 3, 4, 0);
        EXPECT(run(&oc, in, 2, out, 1, &err) == CALQ_ERR_SHAPE);
        calq_tensor_free_data(&in[1]);
        op_case_free(&oc);
    }
    calq_tensor_free_data(&x);
}

static void test_gather(void)
{
    calq_error err;
    calq_tensor data = t_f32((float[]){1, 2, 3, 4, 5, 6}, 2, (int64_t[]){3, 2});
    /* Axis 0, int32 indices [-1, 0] -> rows 2 and 0. */
    {
        op_case oc = op_case_new("Gather", 13, 2, 1);
        calq_tensor in[2] = {data, t_i32((int32_t[]){-1, 0}, 1, (int64_t[]){2})}, out[1];
        EXPECT_OK(run(&oc, in, 2, out, 1, &err));
        EXPECT_TENSOR(&out[0], D(2, 2), 5, 6, 1, 2);
        free_all(out, 1);
        calq_tensor_free_data(&in[1]);
        op_case_free(&oc);
    }
    /* Axis -1 with 2x1 int32 indices [[-1], [0]] -> 3x2x1. */
    {
        op_case oc = op_case_new("Gather", 13, 2, 1);
        op_attr_int(&oc, "axis", -1);
        calq_tensor in[2] = {data, t_i32((int32_t[]){-1, 0}, 2, (int64_t[]){2, 1})}, out[1];
        EXPECT_OK(run(&oc, in, 2, out, 1, &err));
        EXPECT_TENSOR(&out[0], D(3, 2, 1), 2, 1, 4, 3, 6, 5);
        free_all(out, 1);
        calq_tensor_free_data(&in[1]);
        op_case_free(&oc);
    }
    /* Scalar int64 index drops the axis; an out-of-range index is a data error. */
    {
        op_case oc = op_case_new("Gather", 13, 2, 1);
        calq_tensor in[2] = {data, t_i64((int64_t[]){1}, 0, NULL)}, out[1];
        EXPECT_OK(run(&oc, in, 2, out, 1, &err));
        EXPECT_TENSOR(&out[0], D(2), 3, 4);
        free_all(out, 1);
        ((int64_t *)in[1].data)[0] = -4;
        EXPECT(run(&oc, in, 2, out, 1, &err) == CALQ_ERR_DATA);
        free_all(out, 1);
        calq_tensor_free_data(&in[1]);
        op_case_free(&oc);
    }
    /* GatherElements, axis 1, negative index. */
    {
        op_case oc = op_case_new("GatherElements", 13, 2, 1);
        op_attr_int(&oc, "axis", 1);
        calq_tensor in[2] = {data, t_i64((int64_t[]){0, 0, -1, 0, 1, 1}, 2, (int64_t[]){3, 2})}, out[1];
        EXPECT_OK(run(&oc, in, 2, out, 1, &err));
        EXPECT_TENSOR(&out[0], D(3, 2), 1, 1, 4, 3, 6, 6);
        free_all(out, 1);
        calq_tensor_free_data(&in[1]);
        op_case_free(&oc);
    }
    calq_tensor_free_data(&data);
}

static void test_pad(void)
{
    calq_error err;
    calq_tensor x = t_f32((float[]){1, 2, 3, 4, 5, 6, 7, 8}, 2, (int64_t[]){2, 4});
    /* Axis 1: pad 2 in front, crop 1 at the back (np.pad(x[:, :3], ((0,0),(2,0)), mode)). */
    static const char *const modes[3] = {"reflect", "edge", "constant"};
    static const double want[3][10] = {
        {3, 2, 1, 2, 3, 7, 6, 5, 6, 7}, {1, 1, 1, 2, 3, 5, 5, 5, 6, 7}, {9, 9, 1, 2, 3, 9, 9, 5, 6, 7}};
    for (int m = 0; m < 3; m++) {
        op_case oc = op_case_new("Pad", 13, 3, 1);
        op_attr_str(&oc, "mode", modes[m]);
        calq_tensor in[3] = {x, INTS(0, 2, 0, -1), t_f32((float[]){9}, 0, NULL)}, out[1];
        EXPECT_OK(run(&oc, in, 3, out, 1, &err));
        EXPECT(expect(&out[0], 2, (int64_t[]){2, 5}, want[m], modes[m]));
        free_all(out, 1);
        free_all(in + 1, 2);
        op_case_free(&oc);
    }
    /* Both axes, opset 2 attribute form: crop column 0, pad a row in front and a column behind.
     * np.pad(x[:, 1:], ((1,0),(0,1)), 'reflect'). */
    {
        op_case oc = op_case_new("Pad", 2, 1, 1);
        op_attr_str(&oc, "mode", "reflect");
        op_attr_ints(&oc, "pads", (int64_t[]){1, -1, 0, 1}, 4);
        calq_tensor in[1] = {x}, out[1];
        EXPECT_OK(run(&oc, in, 1, out, 1, &err));
        EXPECT_TENSOR(&out[0], D(3, 4), 6, 7, 8, 7, 2, 3, 4, 3, 6, 7, 8, 7);
        free_all(out, 1);
        op_case_free(&oc);
    }
    /* Constant opset 2 'value' attribute on int64 data, rows padded too. */
    {
        op_case oc = op_case_new("Pad", 2, 1, 1);
        op_attr_ints(&oc, "pads", (int64_t[]){1, 0, 0, -1}, 4);
        op_attr_float(&oc, "value", -3.0f);
        calq_tensor in[1] = {t_iota(CALQ_DTYPE_INT64, 2, (int64_t[]){1, 3})}, out[1];
        EXPECT_OK(run(&oc, in, 1, out, 1, &err));
        EXPECT_TENSOR(&out[0], D(2, 2), -3, -3, 0, 1);
        EXPECT(out[0].dtype == CALQ_DTYPE_INT64);
        free_all(out, 1);
        free_all(in, 1);
        op_case_free(&oc);
    }
    /* Reflect pads of at most dim - 1 per side, after cropping, as onnxruntime-node gives them:
     * [0, 1, 2] padded (2, 2) is [2, 1, 0, 1, 2, 1, 0]; cropped by 1 at the front then padded 1
     * at the back is [1, 2, 1]; an axis of 1 with no pads is copied. */
    {
        op_case oc = op_case_new("Pad", 13, 2, 1);
        op_attr_str(&oc, "mode", "reflect");
        calq_tensor in[2] = {t_f32((float[]){0, 1, 2}, 2, (int64_t[]){1, 3}), INTS(0, 2, 0, 2)}, out[1];
        EXPECT_OK(run(&oc, in, 2, out, 1, &err));
        EXPECT_TENSOR(&out[0], D(1, 7), 2, 1, 0, 1, 2, 1, 0);
        free_all(out, 1);
        calq_tensor_free_data(&in[1]);
        in[1] = INTS(0, -1, 0, 1);
        EXPECT_OK(run(&oc, in, 2, out, 1, &err));
        EXPECT_TENSOR(&out[0], D(1, 3), 1, 2, 1);
        free_all(out, 1);
        free_all(in, 2);
        op_case_free(&oc);
    }
    /* Wider reflect pads are refused, as onnxruntime refuses them ("Pad reflect: pre-pad (3)
     * exceeds maximum allowed (2)", "requires axis length >= 2"), not reflected again like
     * np.pad: [1, 2, 3] padded (7, 6), (3, 0), (0, 3), cropped (-1, 2), and an axis of 1 padded
     * by 1. The refusal happens in shape inference, before any element is read. */
    {
        static const int64_t bad[5][2] = {{7, 6}, {3, 0}, {0, 3}, {-1, 2}, {1, 0}};
        for (int b = 0; b < 5; b++) {
            op_case oc = op_case_new("Pad", 13, 2, 1);
            op_attr_str(&oc, "mode", "reflect");
            calq_tensor in[2] = {t_f32((float[]){1, 2, 3}, 1, (int64_t[]){b == 4 ? 1 : 3}), INTS(bad[b][0], bad[b][1])},
                        out[1] = {0};
            EXPECT_STATUS(run(&oc, in, 2, out, 1, &err), CALQ_ERR_SHAPE, &err, "can mirror (at most dim - 1 per side");
            free_all(out, 1);
            free_all(in, 2);
            op_case_free(&oc);
        }
    }
    /* Cropping more than the axis holds is a shape error. */
    {
        op_case oc = op_case_new("Pad", 13, 2, 1);
        calq_tensor in[2] = {x, INTS(0, -3, 0, -2)}, out[1] = {0};
        EXPECT(run(&oc, in, 2, out, 1, &err) == CALQ_ERR_SHAPE);
        calq_tensor_free_data(&in[1]);
        op_case_free(&oc);
    }
    calq_tensor_free_data(&x);
}

static void test_concat_split(void)
{
    calq_error err;
    /* int64 along axis 0: 1x2 + 2x2 -> 3x2. */
    {
        op_case oc = op_case_new("Concat", 13, 2, 1);
        op_attr_int(&oc, "axis", 0);
        calq_tensor in[2] = {t_i64((int64_t[]){1, 2}, 2, (int64_t[]){1, 2}),
                             t_i64((int64_t[]){3, 4, 5, 6}, 2, (int64_t[]){2, 2})},
                    out[1];
        EXPECT_OK(run(&oc, in, 2, out, 1, &err));
        EXPECT_TENSOR(&out[0], D(3, 2), 1, 2, 3, 4, 5, 6);
        EXPECT(out[0].dtype == CALQ_DTYPE_INT64);
        free_all(out, 1);
        free_all(in, 2);
        op_case_free(&oc);
    }
    /* float32 along axis -1, three inputs, one of them empty. */
    {
        op_case oc = op_case_new("Concat", 13, 3, 1);
        op_attr_int(&oc, "axis", -1);
        calq_tensor in[3] = {t_f32((float[]){1, 2, 3, 4}, 2, (int64_t[]){2, 2}),
                             t_iota(CALQ_DTYPE_FLOAT32, 2, (int64_t[]){2, 0}),
                             t_f32((float[]){5, 6}, 2, (int64_t[]){2, 1})},
                    out[1];
        EXPECT_OK(run(&oc, in, 3, out, 1, &err));
        EXPECT_TENSOR(&out[0], D(2, 3), 1, 2, 5, 3, 4, 6);
        free_all(out, 1);
        free_all(in, 3);
        op_case_free(&oc);
    }
    /* Mismatch outside the axis. */
    {
        op_case oc = op_case_new("Concat", 13, 2, 1);
        op_attr_int(&oc, "axis", 0);
        calq_tensor in[2] = {t_iota(CALQ_DTYPE_FLOAT32, 2, (int64_t[]){1, 2}),
                             t_iota(CALQ_DTYPE_FLOAT32, 2, (int64_t[]){1, 3})},
                    out[1] = {0};
        EXPECT(run(&oc, in, 2, out, 1, &err) == CALQ_ERR_SHAPE);
        free_all(in, 2);
        op_case_free(&oc);
    }
    /* Split opset 11 attribute vs opset 13 input, and the equal split. */
    {
        op_case oc = op_case_new("Split", 11, 1, 2);
        op_attr_int(&oc, "axis", 1);
        op_attr_ints(&oc, "split", (int64_t[]){1, 2}, 2);
        calq_tensor in[1] = {t_iota(CALQ_DTYPE_FLOAT32, 2, (int64_t[]){2, 3})}, out[2];
        EXPECT_OK(run(&oc, in, 1, out, 2, &err));
        EXPECT_TENSOR(&out[0], D(2, 1), 0, 3);
        EXPECT_TENSOR(&out[1], D(2, 2), 1, 2, 4, 5);
        free_all(out, 2);
        op_case_free(&oc);
        oc = op_case_new("Split", 13, 2, 2);
        op_attr_int(&oc, "axis", 1);
        calq_tensor in2[2] = {in[0], INTS(2, 1)};
        EXPECT_OK(run(&oc, in2, 2, out, 2, &err));
        EXPECT_TENSOR(&out[0], D(2, 2), 0, 1, 3, 4);
        EXPECT_TENSOR(&out[1], D(2, 1), 2, 5);
        free_all(out, 2);
        calq_tensor_free_data(&in2[1]);
        op_case_free(&oc);
        oc = op_case_new("Split", 13, 1, 3);
        op_attr_int(&oc, "axis", -1);
        calq_tensor out3[3];
        EXPECT_OK(run(&oc, in, 1, out3, 3, &err));
        EXPECT_TENSOR(&out3[2], D(2, 1), 2, 5);
        free_all(out3, 3);
        op_case_free(&oc);
        oc = op_case_new("Split", 13, 1, 2); /* 3 does not split in 2 before opset 18 */
        op_attr_int(&oc, "axis", 1);
        EXPECT(run(&oc, in, 1, out, 2, &err) == CALQ_ERR_SHAPE);
        op_case_free(&oc);
        free_all(in, 1);
    }
}

/* Naive reference: out[i0..i3] = in[index permuted back]. */
static void check_transpose(calq_dtype dt, const int64_t *dims, const int64_t *perm, const char *what)
{
    calq_error err;
    op_case oc = op_case_new("Transpose", 13, 1, 1);
    op_attr_ints(&oc, "perm", perm, 4);
    calq_tensor in[1] = {t_iota(dt, 4, dims)}, out[1];
    EXPECT_OK(run(&oc, in, 1, out, 1, &err));
    int64_t od[4], is[4] = {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1}, bad = 0;
    for (int k = 0; k < 4; k++) od[k] = dims[perm[k]];
    EXPECT(calq__shape_equal(out[0].dims, out[0].ndim, od, 4));
    int64_t i = 0;
    for (int64_t a = 0; a < od[0]; a++)
        for (int64_t b = 0; b < od[1]; b++)
            for (int64_t c = 0; c < od[2]; c++)
                for (int64_t d = 0; d < od[3]; d++, i++) {
                    int64_t src = a * is[perm[0]] + b * is[perm[1]] + c * is[perm[2]] + d * is[perm[3]];
                    if (calq__tensor_get_f64(&out[0], i) != calq__tensor_get_f64(&in[0], src)) bad++;
                }
    if (bad) fprintf(stderr, "%s: %lld wrong elements\n", what, (long long)bad);
    EXPECT(bad == 0);
    free_all(out, 1);
    free_all(in, 1);
    op_case_free(&oc);
}

static void test_transpose(void)
{
    check_transpose(CALQ_DTYPE_FLOAT32, (int64_t[]){2, 3, 4, 5}, (int64_t[]){0, 2, 3, 1}, "2x3x4x5 0231");
    check_transpose(CALQ_DTYPE_FLOAT32, (int64_t[]){2, 3, 4, 5}, (int64_t[]){3, 1, 0, 2}, "2x3x4x5 3102");
    check_transpose(CALQ_DTYPE_FLOAT32, (int64_t[]){2, 3, 4, 5}, (int64_t[]){1, 0, 2, 3}, "2x3x4x5 1023");
    /* NCHW -> NHWC and back, large enough for the tiled and parallel paths. */
    check_transpose(CALQ_DTYPE_FLOAT32, (int64_t[]){2, 67, 33, 35}, (int64_t[]){0, 2, 3, 1}, "nchw->nhwc");
    check_transpose(CALQ_DTYPE_INT32, (int64_t[]){2, 33, 35, 67}, (int64_t[]){0, 3, 1, 2}, "nhwc->nchw");
    check_transpose(CALQ_DTYPE_UINT8, (int64_t[]){3, 40, 2, 50}, (int64_t[]){3, 2, 1, 0}, "uint8 reverse");
    check_transpose(CALQ_DTYPE_INT64, (int64_t[]){1, 1, 9, 1}, (int64_t[]){3, 2, 0, 1}, "unit dims");
    /* Default perm reverses. */
    calq_error err;
    op_case oc = op_case_new("Transpose", 13, 1, 1);
    calq_tensor in[1] = {t_iota(CALQ_DTYPE_FLOAT32, 2, (int64_t[]){2, 3})}, out[1];
    EXPECT_OK(run(&oc, in, 1, out, 1, &err));
    EXPECT_TENSOR(&out[0], D(3, 2), 0, 3, 1, 4, 2, 5);
    free_all(out, 1);
    free_all(in, 1);
    op_case_free(&oc);
}

static void test_expand_tile(void)
{
    calq_error err;
    /* 3x1 expanded with [2, 1, 4] -> 2x3x4. */
    {
        op_case oc = op_case_new("Expand", 13, 2, 1);
        calq_tensor in[2] = {t_f32((float[]){1, 2, 3}, 2, (int64_t[]){3, 1}), INTS(2, 1, 4)}, out[1];
        EXPECT_OK(run(&oc, in, 2, out, 1, &err));
        EXPECT_TENSOR(&out[0], D(2, 3, 4), 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
        free_all(out, 1);
        calq_tensor_free_data(&in[1]);
        in[1] = INTS(2, 4);
        EXPECT(run(&oc, in, 2, out, 1, &err) == CALQ_ERR_SHAPE);
        free_all(in, 2);
        op_case_free(&oc);
    }
    /* Tile 2x2 by [2, 3]. */
    {
        op_case oc = op_case_new("Tile", 13, 2, 1);
        calq_tensor in[2] = {t_f32((float[]){1, 2, 3, 4}, 2, (int64_t[]){2, 2}), INTS(2, 3)}, out[1];
        EXPECT_OK(run(&oc, in, 2, out, 1, &err));
        EXPECT_TENSOR(&out[0], D(4, 6), 1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4, 1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4);
        free_all(out, 1);
        free_all(in, 2);
        op_case_free(&oc);
    }
}

static void test_squeeze_unsqueeze(void)
{
    calq_error err;
    calq_tensor x = t_iota(CALQ_DTYPE_FLOAT32, 2, (int64_t[]){2, 3});
    /* Opset 11: axes attribute; opset 13: axes input. Both give 1x2x3x1. */
    {
        op_case oc = op_case_new("Unsqueeze", 11, 1, 1);
        op_attr_ints(&oc, "axes", (int64_t[]){0, -1}, 2);
        calq_tensor in[1] = {x}, out[1];
        EXPECT_OK(run(&oc, in, 1, out, 1, &err));
        EXPECT_TENSOR(&out[0], D(1, 2, 3, 1), 0, 1, 2, 3, 4, 5);
        free_all(out, 1);
        op_case_free(&oc);
    }
    {
        op_case oc = op_case_new("Unsqueeze", 13, 2, 1);
        calq_tensor in[2] = {x, INTS(3, 0)}, out[1];
        EXPECT_OK(run(&oc, in, 2, out, 1, &err));
        EXPECT_TENSOR(&out[0], D(1, 2, 3, 1), 0, 1, 2, 3, 4, 5);
        free_all(out, 1);
        calq_tensor_free_data(&in[1]);
        in[1] = INTS(0, 0);
        EXPECT(run(&oc, in, 2, out, 1, &err) == CALQ_ERR_SHAPE);
        calq_tensor_free_data(&in[1]);
        op_case_free(&oc);
    }
    /* Squeeze: all 1-dims without axes; axis on a non-1 dim is an error. */
    {
        calq_tensor y = t_iota(CALQ_DTYPE_UINT8, 4, (int64_t[]){1, 3, 1, 2});
        op_case oc = op_case_new("Squeeze", 13, 1, 1);
        calq_tensor in[2] = {y, INTS(-2)}, out[1];
        EXPECT_OK(run(&oc, in, 1, out, 1, &err));
        EXPECT_TENSOR(&out[0], D(3, 2), 0, 1, 2, 3, 4, 5);
        free_all(out, 1);
        op_case_free(&oc);
        oc = op_case_new("Squeeze", 13, 2, 1);
        EXPECT_OK(run(&oc, in, 2, out, 1, &err));
        EXPECT(calq__shape_equal(out[0].dims, out[0].ndim, (int64_t[]){1, 3, 2}, 3));
        free_all(out, 1);
        calq_tensor_free_data(&in[1]);
        in[1] = INTS(1);
        EXPECT(run(&oc, in, 2, out, 1, &err) == CALQ_ERR_SHAPE);
        free_all(in, 2);
        op_case_free(&oc);
    }
    /* Flatten with a negative axis. */
    {
        op_case oc = op_case_new("Flatten", 13, 1, 1);
        op_attr_int(&oc, "axis", -2);
        calq_tensor in[1] = {t_iota(CALQ_DTYPE_FLOAT32, 3, (int64_t[]){2, 3, 4})}, out[1];
        EXPECT_OK(run(&oc, in, 1, out, 1, &err));
        EXPECT(calq__shape_equal(out[0].dims, out[0].ndim, (int64_t[]){2, 12}, 2));
        free_all(out, 1);
        free_all(in, 1);
        op_case_free(&oc);
    }
    calq_tensor_free_data(&x);
}

static void test_generators(void)
{
    calq_error err;
    calq_tensor x = t_iota(CALQ_DTYPE_FLOAT32, 3, (int64_t[]){2, 3, 4});
    /* Shape with opset 15 start/end, Size. */
    {
        op_case oc = op_case_new("Shape", 15, 1, 1);
        op_attr_int(&oc, "start", -2);
        op_attr_int(&oc, "end", 10);
        calq_tensor in[1] = {x}, out[1];
        EXPECT_OK(run(&oc, in, 1, out, 1, &err));
        EXPECT_TENSOR(&out[0], D(2), 3, 4);
        EXPECT(out[0].dtype == CALQ_DTYPE_INT64);
        free_all(out, 1);
        op_case_free(&oc);
        oc = op_case_new("Size", 13, 1, 1);
        EXPECT_OK(run(&oc, in, 1, out, 1, &err));
        EXPECT(out[0].ndim == 0 && *(int64_t *)out[0].data == 24);
        free_all(out, 1);
        op_case_free(&oc);
    }
    /* Constant from a tensor attribute (copied) and from value_ints. */
    {
        op_case oc = op_case_new("Constant", 13, 0, 1);
        calq_attr *a = calq__node_add_attr(oc.g, oc.node, "value", CALQ_ATTR_TENSOR);
        a->t = malloc(sizeof *a->t);
        *a->t = t_i32((int32_t[]){7, -8}, 1, (int64_t[]){2});
        calq_tensor out[1];
        EXPECT_OK(run(&oc, NULL, 0, out, 1, &err));
        EXPECT_TENSOR(&out[0], D(2), 7, -8);
        EXPECT(out[0].dtype == CALQ_DTYPE_INT32 && out[0].data != a->t->data);
        free_all(out, 1);
        op_case_free(&oc);
        oc = op_case_new("Constant", 13, 0, 1);
        op_attr_ints(&oc, "value_ints", (int64_t[]){1, 2, 3}, 3);
        EXPECT_OK(run(&oc, NULL, 0, out, 1, &err));
        EXPECT_TENSOR(&out[0], D(3), 1, 2, 3);
        free_all(out, 1);
        op_case_free(&oc);
    }
    /* ConstantOfShape: default float 0 and an int64 value. */
    {
        op_case oc = op_case_new("ConstantOfShape", 9, 1, 1);
        calq_tensor in[1] = {INTS(2, 3)}, out[1];
        EXPECT_OK(run(&oc, in, 1, out, 1, &err));
        EXPECT_TENSOR(&out[0], D(2, 3), 0, 0, 0, 0, 0, 0);
        EXPECT(out[0].dtype == CALQ_DTYPE_FLOAT32);
        free_all(out, 1);
        op_case_free(&oc);
        oc = op_case_new("ConstantOfShape", 9, 1, 1);
        calq_attr *a = calq__node_add_attr(oc.g, oc.node, "value", CALQ_ATTR_TENSOR);
        a->t = malloc(sizeof *a->t);
        *a->t = t_i64((int64_t[]){5}, 1, (int64_t[]){1});
        EXPECT_OK(run(&oc, in, 1, out, 1, &err));
        EXPECT_TENSOR(&out[0], D(2, 3), 5, 5, 5, 5, 5, 5);
        EXPECT(out[0].dtype == CALQ_DTYPE_INT64);
        free_all(out, 1);
        free_all(in, 1);
        op_case_free(&oc);
    }
    /* Range: float up, int32 down. */
    {
        op_case oc = op_case_new("Range", 11, 3, 1);
        calq_tensor in[3] = {t_f32((float[]){1}, 0, NULL), t_f32((float[]){2}, 0, NULL),
                             t_f32((float[]){0.25f}, 0, NULL)},
                    out[1];
        EXPECT_OK(run(&oc, in, 3, out, 1, &err));
        EXPECT_TENSOR(&out[0], D(4), 1, 1.25, 1.5, 1.75);
        free_all(out, 1);
        free_all(in, 3);
        calq_tensor in2[3] = {t_i32((int32_t[]){10}, 0, NULL), t_i32((int32_t[]){4}, 0, NULL),
                              t_i32((int32_t[]){-3}, 0, NULL)};
        EXPECT_OK(run(&oc, in2, 3, out, 1, &err));
        EXPECT_TENSOR(&out[0], D(2), 10, 7);
        EXPECT(out[0].dtype == CALQ_DTYPE_INT32);
        free_all(out, 1);
        free_all(in2, 3);
        op_case_free(&oc);
    }
    calq_tensor_free_data(&x);
}

/* Odd but valid inputs, and invalid ones that must fail cleanly rather than crash. */
static void test_edges(void)
{
    calq_error err;
    calq_tensor out[3] = {{0}};
    /* A float shape tensor is rejected. */
    {
        op_case oc = op_case_new("Reshape", 14, 2, 1);
        calq_tensor in[2] = {t_iota(CALQ_DTYPE_FLOAT32, 1, (int64_t[]){4}), t_f32((float[]){4}, 1, (int64_t[]){1})};
        EXPECT(run(&oc, in, 2, out, 1, &err) == CALQ_ERR_SHAPE);
        free_all(in, 2);
        op_case_free(&oc);
    }
    /* Tile by 0 and Expand to a 0 dim give empty outputs. */
    {
        op_case oc = op_case_new("Tile", 13, 2, 1);
        calq_tensor in[2] = {t_iota(CALQ_DTYPE_FLOAT32, 2, (int64_t[]){2, 2}), INTS(0, 3)};
        EXPECT_OK(run(&oc, in, 2, out, 1, &err));
        EXPECT(calq__shape_equal(out[0].dims, out[0].ndim, (int64_t[]){0, 6}, 2));
        free_all(out, 1);
        free_all(in, 2);
        op_case_free(&oc);
        oc = op_case_new("Expand", 13, 2, 1);
        calq_tensor in2[2] = {t_iota(CALQ_DTYPE_FLOAT32, 2, (int64_t[]){1, 3}), INTS(0, 1)};
        EXPECT_OK(run(&oc, in2, 2, out, 1, &err));
        EXPECT(calq__shape_equal(out[0].dims, out[0].ndim, (int64_t[]){0, 3}, 2));
        free_all(out, 1);
        free_all(in2, 2);
        op_case_free(&oc);
    }
    /* ConstantOfShape of an empty shape is a scalar; Shape of a scalar is empty. */
    {
        op_case oc = op_case_new("ConstantOfShape", 9, 1, 1);
        calq_tensor in[1] = {t_iota(CALQ_DTYPE_INT64, 1, (int64_t[]){0})};
        EXPECT_OK(run(&oc, in, 1, out, 1, &err));
        EXPECT(out[0].ndim == 0 && *(float *)out[0].data == 0.0f);
        free_all(out, 1);
        op_case_free(&oc);
        oc = op_case_new("Shape", 15, 1, 1);
        calq_tensor sc = t_f32((float[]){1}, 0, NULL);
        EXPECT_OK(run(&oc, &sc, 1, out, 1, &err));
        EXPECT(out[0].ndim == 1 && out[0].dims[0] == 0);
        free_all(out, 1);
        free_all(&sc, 1);
        free_all(in, 1);
        op_case_free(&oc);
    }
    /* Range across most of int64: -5, INT64_MAX - 5. */
    {
        op_case oc = op_case_new("Range", 11, 3, 1);
        calq_tensor in[3] = {t_i64((int64_t[]){-5}, 0, NULL), t_i64((int64_t[]){INT64_MAX}, 0, NULL),
                             t_i64((int64_t[]){INT64_MAX}, 0, NULL)};
        EXPECT_OK(run(&oc, in, 3, out, 1, &err));
        EXPECT(out[0].dims[0] == 2 && ((int64_t *)out[0].data)[1] == INT64_MAX - 5);
        free_all(out, 1);
        ((int64_t *)in[2].data)[0] = 0;
        EXPECT(run(&oc, in, 3, out, 1, &err) == CALQ_ERR_SHAPE);
        free_all(in, 3);
        op_case_free(&oc);
    }
    /* Opset 18 uneven split: 7 -> 3, 3, 1. */
    {
        op_case oc = op_case_new("Split", 18, 1, 3);
        op_attr_int(&oc, "num_outputs", 3);
        calq_tensor in[1] = {t_iota(CALQ_DTYPE_INT16, 1, (int64_t[]){7})};
        EXPECT_OK(run(&oc, in, 1, out, 3, &err));
        EXPECT_TENSOR(&out[0], D(3), 0, 1, 2);
        EXPECT_TENSOR(&out[2], D(1), 6);
        free_all(out, 3);
        free_all(in, 1);
        op_case_free(&oc);
    }
    /* Bad GatherElements index, Concat dtype mismatch, bad perm, missing data input. */
    {
        op_case oc = op_case_new("GatherElements", 13, 2, 1);
        calq_tensor in[2] = {t_iota(CALQ_DTYPE_FLOAT32, 1, (int64_t[]){3}), INTS(0, 3)};
        EXPECT(run(&oc, in, 2, out, 1, &err) == CALQ_ERR_DATA);
        free_all(out, 1);
        op_case_free(&oc);
        oc = op_case_new("Concat", 13, 2, 1);
        op_attr_int(&oc, "axis", 0);
        EXPECT(run(&oc, in, 2, out, 1, &err) == CALQ_ERR_SHAPE);
        op_case_free(&oc);
        oc = op_case_new("Transpose", 13, 1, 1);
        op_attr_ints(&oc, "perm", (int64_t[]){0, 0}, 2);
        calq_tensor m = t_iota(CALQ_DTYPE_FLOAT32, 2, (int64_t[]){2, 2});
        EXPECT(run(&oc, &m, 1, out, 1, &err) == CALQ_ERR_SHAPE);
        op_case_free(&oc);
        oc = op_case_new("Slice", 13, 3, 1);
        calq_tensor in3[3] = {m, none, none};
        EXPECT(run(&oc, in3, 3, out, 1, &err) == CALQ_ERR_SHAPE);
        op_case_free(&oc);
        free_all(&m, 1);
        free_all(in, 2);
    }
}

int main(void)
{
    test_slice();
    test_reshape();
    test_gather();
    test_pad();
    test_concat_split();
    test_transpose();
    test_expand_tile();
    test_squeeze_unsqueeze();
    test_generators();
    test_edges();
    if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
    return failures != 0;
}
