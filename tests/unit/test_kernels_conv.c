/* Conv, ConvTranspose, BatchNormalization: hand-computed cases for the reference kernels,
 * shape validation, the oneDNN fast paths against the reference (every conv shape of
 * UltraFace slim-320 included), and bit-identity across thread counts. */
#include <math.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/op.h"
#include "op_harness.h"

/* ---- helpers -------------------------------------------------------------------------- */

typedef struct conv_spec {
    const char *name;
    bool transpose;
    int nsp;
    int64_t n, c, m, group;
    int64_t in[3], k[3], s[3], d[3], pads[6], out_pad[3];
    bool bias;
    const char *auto_pad; /* NULL: NOTSET */
} conv_spec;

static op_case spec_case(const conv_spec *p)
{
    op_case oc = op_case_new(p->transpose ? "ConvTranspose" : "Conv", 11, p->bias ? 3 : 2, 1);
    int64_t ones[3] = {1, 1, 1};
    op_attr_int(&oc, "group", p->group);
    op_attr_ints(&oc, "kernel_shape", p->k, p->nsp);
    op_attr_ints(&oc, "strides", p->s[0] ? p->s : ones, p->nsp);
    op_attr_ints(&oc, "dilations", p->d[0] ? p->d : ones, p->nsp);
    if (p->auto_pad)
        op_attr_str(&oc, "auto_pad", p->auto_pad);
    else
        op_attr_ints(&oc, "pads", p->pads, 2 * p->nsp);
    if (p->transpose) op_attr_ints(&oc, "output_padding", p->out_pad, p->nsp);
    return oc;
}

/* Random X, W, B for the spec (seeded), n_in set to 2 or 3. */
static void spec_inputs(const conv_spec *p, unsigned seed, calq_tensor in[3], int *n_in)
{
    int64_t xd[5] = {p->n, p->c}, wd[5], bd[1] = {p->m};
    if (p->transpose) {
        wd[0] = p->c;
        wd[1] = p->m / p->group;
    } else {
        wd[0] = p->m;
        wd[1] = p->c / p->group;
    }
    for (int i = 0; i < p->nsp; i++) {
        xd[2 + i] = p->in[i];
        wd[2 + i] = p->k[i];
    }
    in[0] = t_rand_f32(seed, 2 + p->nsp, xd, -1.0f, 1.0f);
    in[1] = t_rand_f32(seed + 1, 2 + p->nsp, wd, -1.0f, 1.0f);
    *n_in = 2;
    if (p->bias) {
        in[2] = t_rand_f32(seed + 2, 1, bd, -1.0f, 1.0f);
        *n_in = 3;
    }
}

static void free_all(calq_tensor *t, int n)
{
    for (int i = 0; i < n; i++) calq_tensor_free_data(&t[i]);
}

static double max_abs(const calq_tensor *t)
{
    double m = 0;
    const float *p = t->data;
    for (int64_t i = 0; i < calq_tensor_numel(t); i++)
        if (fabs(p[i]) > m) m = fabs(p[i]);
    return m;
}

/* Runs infer + prepare + run_fast (twice) by hand, with the given const_inputs mask, and
 * reports whether the fast path was taken. */
static calq_status run_fast_direct(op_case *oc, calq_tensor *in, int n_in, calq_tensor *out, unsigned const_inputs,
                                   bool *took_fast)
{
    const calq_node *node = &oc->g->nodes[oc->node];
    const calq_op_def *d = calq__op_find("", node->op_type);
    calq_tensor *inp[8], *outp[1] = {out};
    for (int i = 0; i < n_in; i++) inp[i] = &in[i];
    memset(out, 0, sizeof *out);
    calq_error err = {0};
    calq_op_ctx ctx = {.node = node,
                       .opset = node->opset,
                       .n_in = n_in,
                       .in = inp,
                       .n_out = 1,
                       .out = outp,
                       .err = &err,
                       .const_inputs = const_inputs};
    CALQ_TRY(d->infer(&ctx));
    CALQ_TRY(calq__tensor_alloc(out, &err));
    CALQ_TRY(d->prepare(&ctx));
    *took_fast = ctx.state != NULL;
    if (!ctx.state) return d->run(&ctx);
    calq_status s = d->run_fast(&ctx);
    if (s == CALQ_OK) s = d->run_fast(&ctx); /* a second run on the same state */
    d->release(ctx.state);
    return s;
}

/* Fast vs reference on random data; fast with 1 vs 2 threads bit-identical; reference with 1
 * vs 2 threads bit-identical; const-weights path equals the per-run-reorder path. Returns
 * whether oneDNN took the node. */
static bool check_spec(const conv_spec *p, unsigned seed, bool expect_fast)
{
    calq_tensor in[3], ref = {0}, fast1 = {0}, fast2 = {0}, ref1 = {0}, fconst = {0};
    int n_in;
    spec_inputs(p, seed, in, &n_in);
    calq_error err = {0};
    op_case oc = spec_case(p);
    char what[160];

    omp_set_num_threads(2);
    EXPECT_OK(op_case_run(&oc, in, n_in, &ref, 1, 0, &err));
    EXPECT_OK(op_case_run(&oc, in, n_in, &fast2, 1, 1, &err));
    omp_set_num_threads(1);
    EXPECT_OK(op_case_run(&oc, in, n_in, &ref1, 1, 0, &err));
    EXPECT_OK(op_case_run(&oc, in, n_in, &fast1, 1, 1, &err));
    omp_set_num_threads(2);
    bool took = false;
    EXPECT_OK(run_fast_direct(&oc, in, n_in, &fconst, 2u, &took));
    if (expect_fast && !took) {
        fprintf(stderr, "%s: the oneDNN path declined\n", p->name);
        failures++;
    }

    if (ref.data && fast2.data) {
        snprintf(what, sizeof what, "%s: fast vs ref", p->name);
        EXPECT(t_close(&fast2, &ref, 1e-4, 1e-5 * (1.0 + max_abs(&ref)), what));
    }
    if (ref.data && ref1.data && memcmp(ref.data, ref1.data, calq__tensor_nbytes(&ref)) != 0) {
        fprintf(stderr, "%s: reference kernel differs between 1 and 2 threads\n", p->name);
        failures++;
    }
    if (fast1.data && fast2.data && memcmp(fast1.data, fast2.data, calq__tensor_nbytes(&fast1)) != 0) {
        fprintf(stderr, "%s: oneDNN path differs between 1 and 2 threads\n", p->name);
        failures++;
    }
    if (fconst.data && fast2.data && memcmp(fconst.data, fast2.data, calq__tensor_nbytes(&fconst)) != 0) {
        fprintf(stderr, "%s: const-weights fast path differs from the per-run reorder\n", p->name);
        failures++;
    }
    op_case_free(&oc);
    free_all(in, n_in);
    calq_tensor_free_data(&ref);
    calq_tensor_free_data(&ref1);
    calq_tensor_free_data(&fast1);
    calq_tensor_free_data(&fast2);
    calq_tensor_free_data(&fconst);
    return took;
}

static void expect(const calq_tensor *got, const float *want, const int64_t *dims, int ndim, const char *what)
{
    calq_tensor w = t_f32(want, ndim, dims);
    EXPECT(t_close(got, &w, 1e-6, 1e-6, what));
    calq_tensor_free_data(&w);
}

static float *arange(int n)
{
    float *v = malloc(sizeof(float) * (size_t)n);
    for (int i = 0; i < n; i++) v[i] = (float)i;
    return v;
}

/* Runs a one-output op on both paths and checks both against `want`. */
static void run_both(op_case *oc, calq_tensor *in, int n_in, const float *want, const int64_t *dims, int ndim,
                     const char *what)
{
    for (int fast = 0; fast < 2; fast++) {
        calq_tensor out = {0};
        calq_error err = {0};
        char w[160];
        snprintf(w, sizeof w, "%s (%s)", what, fast ? "fast" : "ref");
        calq_status s = op_case_run(oc, in, n_in, &out, 1, fast, &err);
        if (s != CALQ_OK) {
            fprintf(stderr, "%s: failed: %s\n", w, err.message);
            failures++;
        } else {
            expect(&out, want, dims, ndim, w);
        }
        calq_tensor_free_data(&out);
    }
}

/* Expects infer to fail with `want`; prints the message for eyeballing. */
static void expect_fail(op_case *oc, calq_tensor *in, int n_in, int n_out, calq_status want, const char *what)
{
    calq_tensor out[5];
    calq_error err = {0};
    calq_status s = op_case_run(oc, in, n_in, out, n_out, 0, &err);
    if (s != want) {
        fprintf(stderr, "%s: status %d, expected %d (%s)\n", what, (int)s, (int)want, err.message);
        failures++;
    } else if (strstr(err.message, "node 'node'") == NULL) {
        fprintf(stderr, "%s: message does not name the node: %s\n", what, err.message);
        failures++;
    }
    if (s == CALQ_OK) free_all(out, n_out);
}

/* ---- hand-computed Conv ---------------------------------------------------------------- */

static void test_conv_hand(void)
{
    int64_t d55[4] = {1, 1, 5, 5}, w33[4] = {1, 1, 3, 3}, d75[4] = {1, 1, 7, 5};
    float ones9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    float *x25 = arange(25), *x35 = arange(35);

    { /* pads 1 (ONNX Conv example) */
        op_case oc = op_case_new("Conv", 11, 2, 1);
        op_attr_ints(&oc, "pads", (int64_t[]){1, 1, 1, 1}, 4);
        calq_tensor in[2] = {t_f32(x25, 4, d55), t_f32(ones9, 4, w33)};
        float want[25] = {12,  21, 27, 33,  24,  33,  54,  63, 72,  51,  63,  99, 108,
                          117, 81, 93, 144, 153, 162, 111, 72, 111, 117, 123, 84};
        run_both(&oc, in, 2, want, d55, 4, "conv pads");
        free_all(in, 2);
        op_case_free(&oc);
    }
    { /* stride 2 with pads 1 on 7x5 (no kernel_shape attribute: taken from W) */
        op_case oc = op_case_new("Conv", 11, 2, 1);
        op_attr_ints(&oc, "pads", (int64_t[]){1, 1, 1, 1}, 4);
        op_attr_ints(&oc, "strides", (int64_t[]){2, 2}, 2);
        calq_tensor in[2] = {t_f32(x35, 4, d75), t_f32(ones9, 4, w33)};
        float want[12] = {12, 27, 24, 63, 108, 81, 123, 198, 141, 112, 177, 124};
        run_both(&oc, in, 2, want, (int64_t[]){1, 1, 4, 3}, 4, "conv stride 2");
        free_all(in, 2);
        op_case_free(&oc);
    }
    { /* stride 2, asymmetric pads (1 top, 1 bottom, none left/right) */
        op_case oc = op_case_new("Conv", 11, 2, 1);
        op_attr_ints(&oc, "pads", (int64_t[]){1, 0, 1, 0}, 4);
        op_attr_ints(&oc, "strides", (int64_t[]){2, 2}, 2);
        calq_tensor in[2] = {t_f32(x35, 4, d75), t_f32(ones9, 4, w33)};
        float want[8] = {21, 33, 99, 117, 189, 207, 171, 183};
        run_both(&oc, in, 2, want, (int64_t[]){1, 1, 4, 2}, 4, "conv asymmetric pads");
        free_all(in, 2);
        op_case_free(&oc);
    }
    { /* dilation 2: y[i,j] = x[i,j] + x[i,j+2] + x[i+2,j] + x[i+2,j+2] = 20i + 4j + 24 */
        op_case oc = op_case_new("Conv", 11, 2, 1);
        op_attr_ints(&oc, "dilations", (int64_t[]){2, 2}, 2);
        calq_tensor in[2] = {t_f32(x25, 4, d55), t_f32(ones9, 4, (int64_t[]){1, 1, 2, 2})};
        float want[9] = {24, 28, 32, 44, 48, 52, 64, 68, 72};
        run_both(&oc, in, 2, want, (int64_t[]){1, 1, 3, 3}, 4, "conv dilation 2");
        free_all(in, 2);
        op_case_free(&oc);
    }
    { /* group 2, two input channels per group, with bias */
        op_case oc = op_case_new("Conv", 11, 3, 1);
        op_attr_int(&oc, "group", 2);
        calq_tensor in[3] = {t_f32((float[]){1, 2, 3, 4}, 4, (int64_t[]){1, 4, 1, 1}),
                             t_f32((float[]){1, 10, 100, 1000}, 4, (int64_t[]){2, 2, 1, 1}),
                             t_f32((float[]){0.5f, -1}, 1, (int64_t[]){2})};
        float want[2] = {21.5f, 4299};
        run_both(&oc, in, 3, want, (int64_t[]){1, 2, 1, 1}, 4, "conv group 2");
        free_all(in, 3);
        op_case_free(&oc);
    }
    { /* depthwise (group = C = 3), 1x2 kernels */
        op_case oc = op_case_new("Conv", 11, 2, 1);
        op_attr_int(&oc, "group", 3);
        calq_tensor in[2] = {t_f32((float[]){1, 2, 3, 4, 5, 6, 7, 8, 9}, 4, (int64_t[]){1, 3, 1, 3}),
                             t_f32((float[]){1, 1, 1, -1, 2, 0}, 4, (int64_t[]){3, 1, 1, 2})};
        float want[6] = {3, 5, -1, -1, 14, 16};
        run_both(&oc, in, 2, want, (int64_t[]){1, 3, 1, 2}, 4, "conv depthwise");
        free_all(in, 2);
        op_case_free(&oc);
    }
    { /* auto_pad SAME_UPPER / SAME_LOWER, 4x4 input, stride 2: total padding 1 */
        float *x16 = arange(16);
        const char *modes[2] = {"SAME_UPPER", "SAME_LOWER"};
        float want[2][4] = {{45, 39, 66, 50}, {10, 24, 51, 90}};
        for (int m = 0; m < 2; m++) {
            op_case oc = op_case_new("Conv", 11, 2, 1);
            op_attr_str(&oc, "auto_pad", modes[m]);
            op_attr_ints(&oc, "strides", (int64_t[]){2, 2}, 2);
            op_attr_ints(&oc, "kernel_shape", (int64_t[]){3, 3}, 2);
            calq_tensor in[2] = {t_f32(x16, 4, (int64_t[]){1, 1, 4, 4}), t_f32(ones9, 4, w33)};
            run_both(&oc, in, 2, want[m], (int64_t[]){1, 1, 2, 2}, 4, modes[m]);
            free_all(in, 2);
            op_case_free(&oc);
        }
        free(x16);
    }
    { /* auto_pad VALID ignores pads */
        op_case oc = op_case_new("Conv", 11, 2, 1);
        op_attr_str(&oc, "auto_pad", "VALID");
        calq_tensor in[2] = {t_f32(x25, 4, d55), t_f32(ones9, 4, w33)};
        float want[9] = {54, 63, 72, 99, 108, 117, 144, 153, 162};
        run_both(&oc, in, 2, want, (int64_t[]){1, 1, 3, 3}, 4, "conv VALID");
        free_all(in, 2);
        op_case_free(&oc);
    }
    { /* 1-D: y[o] = x[o-1] - x[o+1] */
        op_case oc = op_case_new("Conv", 11, 2, 1);
        op_attr_ints(&oc, "pads", (int64_t[]){1, 1}, 2);
        calq_tensor in[2] = {t_f32((float[]){1, 2, 3, 4, 5}, 3, (int64_t[]){1, 1, 5}),
                             t_f32((float[]){1, 0, -1}, 3, (int64_t[]){1, 1, 3})};
        float want[5] = {-2, -2, -2, -2, 4};
        run_both(&oc, in, 2, want, (int64_t[]){1, 1, 5}, 3, "conv 1-D");
        free_all(in, 2);
        op_case_free(&oc);
    }
    { /* 3-D: a 2x2x2 box sum over arange(27) in 3x3x3: y = 8*x[d,h,w] + 4*9 + 2*3*2 + 1*4 ... */
        float *x27 = arange(27);
        float w8[8] = {1, 1, 1, 1, 1, 1, 1, 1};
        op_case oc = op_case_new("Conv", 11, 2, 1);
        calq_tensor in[2] = {t_f32(x27, 5, (int64_t[]){1, 1, 3, 3, 3}), t_f32(w8, 5, (int64_t[]){1, 1, 2, 2, 2})};
        /* sum over the box of 9d + 3h + w = 8*(9d+3h+w) + 4*(9+3+1) */
        float want[8];
        for (int d = 0; d < 2; d++)
            for (int h = 0; h < 2; h++)
                for (int w = 0; w < 2; w++) want[(d * 2 + h) * 2 + w] = 8.0f * (9 * d + 3 * h + w) + 52.0f;
        run_both(&oc, in, 2, want, (int64_t[]){1, 1, 2, 2, 2}, 5, "conv 3-D");
        free_all(in, 2);
        op_case_free(&oc);
        free(x27);
    }
    free(x25);
    free(x35);
}

/* ---- hand-computed ConvTranspose -------------------------------------------------------- */

static void test_convtranspose_hand(void)
{
    float x4[4] = {1, 2, 3, 4}, ones4[4] = {1, 1, 1, 1};
    int64_t d22[4] = {1, 1, 2, 2};
    { /* ONNX ConvTranspose example: arange(9) 3x3, W ones 1x2x3x3 */
        float *x9 = arange(9), w18[18];
        for (int i = 0; i < 18; i++) w18[i] = 1;
        op_case oc = op_case_new("ConvTranspose", 11, 2, 1);
        calq_tensor in[2] = {t_f32(x9, 4, (int64_t[]){1, 1, 3, 3}), t_f32(w18, 4, (int64_t[]){1, 2, 3, 3})};
        float plane[25] = {0, 1, 3, 3, 2, 3, 8, 15, 12, 7, 9, 21, 36, 27, 15, 9, 20, 33, 24, 13, 6, 13, 21, 15, 8};
        float want[50];
        memcpy(want, plane, sizeof plane);
        memcpy(want + 25, plane, sizeof plane);
        run_both(&oc, in, 2, want, (int64_t[]){1, 2, 5, 5}, 4, "convtranspose example");
        free_all(in, 2);
        op_case_free(&oc);
        free(x9);
    }
    /* Stride 2 with a 2x2 kernel of ones: each input value fills its own 2x2 block of the 4x4
     * natural output. */
    const float blocks[16] = {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4};
    { /* output_padding 1: a 5th row and column that only the bias reaches */
        op_case oc = op_case_new("ConvTranspose", 11, 3, 1);
        op_attr_ints(&oc, "strides", (int64_t[]){2, 2}, 2);
        op_attr_ints(&oc, "output_padding", (int64_t[]){1, 1}, 2);
        calq_tensor in[3] = {t_f32(x4, 4, d22), t_f32(ones4, 4, d22), t_f32((float[]){0.5f}, 1, (int64_t[]){1})};
        float want[25];
        for (int i = 0; i < 5; i++)
            for (int j = 0; j < 5; j++) want[i * 5 + j] = (i < 4 && j < 4 ? blocks[i * 4 + j] : 0) + 0.5f;
        run_both(&oc, in, 3, want, (int64_t[]){1, 1, 5, 5}, 4, "convtranspose output_padding");
        free_all(in, 3);
        op_case_free(&oc);
    }
    { /* output_shape 5x5: total padding -1 -> begin 0, end -1, i.e. the same as above */
        op_case oc = op_case_new("ConvTranspose", 11, 2, 1);
        op_attr_ints(&oc, "strides", (int64_t[]){2, 2}, 2);
        op_attr_ints(&oc, "output_shape", (int64_t[]){5, 5}, 2);
        calq_tensor in[2] = {t_f32(x4, 4, d22), t_f32(ones4, 4, d22)};
        float want[25];
        for (int i = 0; i < 5; i++)
            for (int j = 0; j < 5; j++) want[i * 5 + j] = i < 4 && j < 4 ? blocks[i * 4 + j] : 0;
        run_both(&oc, in, 2, want, (int64_t[]){1, 1, 5, 5}, 4, "convtranspose output_shape 5x5");
        free_all(in, 2);
        op_case_free(&oc);
    }
    { /* output_shape 3x3: total padding 1 -> NOTSET puts it at the beginning, SAME_UPPER at the end */
        const char *modes[2] = {"NOTSET", "SAME_UPPER"};
        float want[2][9] = {{1, 2, 2, 3, 4, 4, 3, 4, 4}, {1, 1, 2, 1, 1, 2, 3, 3, 4}};
        for (int m = 0; m < 2; m++) {
            op_case oc = op_case_new("ConvTranspose", 11, 2, 1);
            op_attr_ints(&oc, "strides", (int64_t[]){2, 2}, 2);
            op_attr_ints(&oc, "output_shape", (int64_t[]){1, 1, 3, 3}, 4); /* with N, C in front */
            op_attr_str(&oc, "auto_pad", modes[m]);
            calq_tensor in[2] = {t_f32(x4, 4, d22), t_f32(ones4, 4, d22)};
            run_both(&oc, in, 2, want[m], (int64_t[]){1, 1, 3, 3}, 4, modes[m]);
            free_all(in, 2);
            op_case_free(&oc);
        }
    }
    { /* auto_pad SAME_UPPER: output = input * stride = 4x4, total padding (2-1)*2+3-4 = 1 at the end */
        op_case oc = op_case_new("ConvTranspose", 11, 2, 1);
        op_attr_ints(&oc, "strides", (int64_t[]){2, 2}, 2);
        op_attr_str(&oc, "auto_pad", "SAME_UPPER");
        float ones9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
        calq_tensor in[2] = {t_f32(x4, 4, d22), t_f32(ones9, 4, (int64_t[]){1, 1, 3, 3})};
        /* natural 5x5 output of 3x3 blocks at stride 2, cropped to its top-left 4x4 */
        float want[16] = {1, 1, 3, 2, 1, 1, 3, 2, 4, 4, 10, 6, 3, 3, 7, 4};
        run_both(&oc, in, 2, want, (int64_t[]){1, 1, 4, 4}, 4, "convtranspose SAME_UPPER");
        free_all(in, 2);
        op_case_free(&oc);
    }
    { /* group 2 with pads and dilation, 1-D: channel g scatters only into outputs of group g */
        op_case oc = op_case_new("ConvTranspose", 11, 2, 1);
        op_attr_int(&oc, "group", 2);
        op_attr_ints(&oc, "dilations", (int64_t[]){2}, 1);
        op_attr_ints(&oc, "pads", (int64_t[]){1, 0}, 2);
        /* X [1, 2, 2], W [2, 1, 2]: natural length (2-1) + (2-1)*2 + 1 = 4, minus begin pad 1 */
        calq_tensor in[2] = {t_f32((float[]){1, 2, 3, 4}, 3, (int64_t[]){1, 2, 2}),
                             t_f32((float[]){1, 10, -1, 1}, 3, (int64_t[]){2, 1, 2})};
        /* ch0 natural: x0*[1,_,10] at 0 + x1*[1,_,10] at 1 = [1, 2, 10, 20] -> [2, 10, 20]
         * ch1 natural: [-3, -4, 3, 4] -> [-4, 3, 4] */
        float want[6] = {2, 10, 20, -4, 3, 4};
        run_both(&oc, in, 2, want, (int64_t[]){1, 2, 3}, 3, "convtranspose group dilation 1-D");
        free_all(in, 2);
        op_case_free(&oc);
    }
}

/* ---- BatchNormalization ---------------------------------------------------------------- */

static void test_batchnorm(void)
{
    int64_t dx[4] = {1, 2, 1, 2}, d2[1] = {2};
    float xv[4] = {1, 2, 3, 4};
    /* y0 = 2*(x-1)/2 + 0.5, y1 = 1*(x-3)/0.5 - 1 */
    float want[4] = {0.5f, 1.5f, -1, 1};
    const int opsets[] = {7, 9, 14, 15};
    for (int i = 0; i < 4; i++) {
        op_case oc = op_case_new("BatchNormalization", opsets[i], 5, 1);
        op_attr_float(&oc, "epsilon", 0.0f);
        calq_tensor in[5] = {t_f32(xv, 4, dx), t_f32((float[]){2, 1}, 1, d2), t_f32((float[]){0.5f, -1}, 1, d2),
                             t_f32((float[]){1, 3}, 1, d2), t_f32((float[]){4, 0.25f}, 1, d2)};
        char what[64];
        snprintf(what, sizeof what, "batchnorm opset %d", opsets[i]);
        run_both(&oc, in, 5, want, dx, 4, what);
        free_all(in, 5);
        op_case_free(&oc);
    }
    { /* opset 7 spatial=0: parameters per channel and position */
        op_case oc = op_case_new("BatchNormalization", 7, 5, 1);
        op_attr_float(&oc, "epsilon", 0.0f);
        op_attr_int(&oc, "spatial", 0);
        int64_t dp[3] = {2, 1, 2};
        calq_tensor in[5] = {t_f32(xv, 4, dx), t_f32((float[]){1, 2, 3, 4}, 3, dp), t_f32((float[]){0, 0, 0, 1}, 3, dp),
                             t_f32((float[]){1, 1, 1, 1}, 3, dp), t_f32((float[]){1, 4, 1, 4}, 3, dp)};
        float w2[4] = {0, 1, 6, 4 * 3 / 2.0f + 1};
        run_both(&oc, in, 5, w2, dx, 4, "batchnorm spatial=0");
        free_all(in, 5);
        op_case_free(&oc);
    }
    { /* random, larger, default epsilon; asking for the fast path runs the reference */
        int64_t dr[4] = {2, 16, 12, 10}, dc[1] = {16};
        calq_tensor in[5] = {t_rand_f32(1, 4, dr, -3, 3), t_rand_f32(2, 1, dc, -2, 2), t_rand_f32(3, 1, dc, -1, 1),
                             t_rand_f32(4, 1, dc, -1, 1), t_rand_f32(5, 1, dc, 0.01f, 2)};
        op_case oc = op_case_new("BatchNormalization", 9, 5, 1);
        calq_tensor ref = {0}, fast = {0};
        calq_error err = {0};
        EXPECT_OK(op_case_run(&oc, in, 5, &ref, 1, 0, &err));
        EXPECT_OK(op_case_run(&oc, in, 5, &fast, 1, 1, &err));
        EXPECT(t_close(&fast, &ref, 1e-5, 1e-6, "batchnorm random: fast request (reference) vs ref"));
        calq_tensor_free_data(&ref);
        calq_tensor_free_data(&fast);
        free_all(in, 5);
        op_case_free(&oc);
    }
    { /* training mode: attribute, or statistics outputs requested */
        calq_tensor in[5] = {t_f32(xv, 4, dx), t_f32((float[]){2, 1}, 1, d2), t_f32((float[]){0.5f, -1}, 1, d2),
                             t_f32((float[]){1, 3}, 1, d2), t_f32((float[]){4, 0.25f}, 1, d2)};
        op_case oc = op_case_new("BatchNormalization", 15, 5, 1);
        op_attr_int(&oc, "training_mode", 1);
        expect_fail(&oc, in, 5, 1, CALQ_ERR_UNSUPPORTED, "batchnorm training_mode");
        op_case_free(&oc);
        oc = op_case_new("BatchNormalization", 14, 5, 3);
        expect_fail(&oc, in, 5, 3, CALQ_ERR_UNSUPPORTED, "batchnorm running stats requested");
        op_case_free(&oc);
        oc = op_case_new("BatchNormalization", 9, 5, 1);
        calq_tensor bad = t_f32((float[]){1, 2, 3}, 1, (int64_t[]){3});
        calq_tensor in2[5] = {in[0], in[1], bad, in[3], in[4]};
        expect_fail(&oc, in2, 5, 1, CALQ_ERR_SHAPE, "batchnorm bias size");
        calq_tensor_free_data(&bad);
        op_case_free(&oc);
        free_all(in, 5);
    }
}

/* ---- shape validation ---------------------------------------------------------------- */

static void test_conv_errors(void)
{
    int64_t dx[4] = {1, 4, 5, 5};
    calq_tensor x = t_rand_f32(1, 4, dx, -1, 1);
    struct {
        const char *what, *op;
        int64_t wdims[5];
        int wnd;
        int64_t group;
        int64_t bias;
        int64_t pads;
        const char *auto_pad;
        calq_status want;
    } cases[] = {
        {"channels vs group", "Conv", {8, 3, 3, 3}, 4, 1, 0, 0, NULL, CALQ_ERR_SHAPE},
        {"group does not divide M", "Conv", {3, 2, 3, 3}, 4, 2, 0, 0, NULL, CALQ_ERR_SHAPE},
        {"weight rank", "Conv", {8, 4, 3}, 3, 1, 0, 0, NULL, CALQ_ERR_SHAPE},
        {"kernel larger than input", "Conv", {8, 4, 7, 7}, 4, 1, 0, 0, NULL, CALQ_ERR_SHAPE},
        {"bias size", "Conv", {8, 4, 3, 3}, 4, 1, 5, 0, NULL, CALQ_ERR_SHAPE},
        {"negative pads", "Conv", {8, 4, 3, 3}, 4, 1, 0, -1, NULL, CALQ_ERR_SHAPE},
        {"bad auto_pad", "Conv", {8, 4, 3, 3}, 4, 1, 0, 0, "SAME", CALQ_ERR_UNSUPPORTED},
        {"transpose channels", "ConvTranspose", {3, 2, 3, 3}, 4, 1, 0, 0, NULL, CALQ_ERR_SHAPE},
        {"transpose group", "ConvTranspose", {4, 2, 3, 3}, 4, 3, 0, 0, NULL, CALQ_ERR_SHAPE},
        {"transpose empty output", "ConvTranspose", {4, 2, 1, 1}, 4, 1, 0, 5, NULL, CALQ_ERR_SHAPE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        op_case oc = op_case_new(cases[i].op, 11, cases[i].bias ? 3 : 2, 1);
        op_attr_int(&oc, "group", cases[i].group);
        if (cases[i].pads) op_attr_ints(&oc, "pads", (int64_t[]){cases[i].pads, 0, 0, 0}, 4);
        if (cases[i].auto_pad) op_attr_str(&oc, "auto_pad", cases[i].auto_pad);
        calq_tensor in[3] = {x, t_rand_f32(2, cases[i].wnd, cases[i].wdims, -1, 1)};
        if (cases[i].bias) in[2] = t_rand_f32(3, 1, (int64_t[]){cases[i].bias}, -1, 1);
        expect_fail(&oc, in, cases[i].bias ? 3 : 2, 1, cases[i].want, cases[i].what);
        free_all(in + 1, cases[i].bias ? 2 : 1);
        op_case_free(&oc);
    }
    { /* wrong attribute arity, kernel_shape disagreeing with W, float64 input */
        calq_tensor in[2] = {x, t_rand_f32(2, 4, (int64_t[]){8, 4, 3, 3}, -1, 1)};
        op_case oc = op_case_new("Conv", 11, 2, 1);
        op_attr_ints(&oc, "strides", (int64_t[]){1, 1, 1}, 3);
        expect_fail(&oc, in, 2, 1, CALQ_ERR_SHAPE, "strides arity");
        op_case_free(&oc);
        oc = op_case_new("Conv", 11, 2, 1);
        op_attr_ints(&oc, "kernel_shape", (int64_t[]){2, 2}, 2);
        expect_fail(&oc, in, 2, 1, CALQ_ERR_SHAPE, "kernel_shape mismatch");
        op_case_free(&oc);
        oc = op_case_new("Conv", 11, 2, 1);
        op_attr_ints(&oc, "strides", (int64_t[]){0, 1}, 2);
        expect_fail(&oc, in, 2, 1, CALQ_ERR_SHAPE, "zero stride");
        op_case_free(&oc);
        oc = op_case_new("Conv", 11, 2, 1);
        calq_tensor xd = x;
        xd.dtype = CALQ_DTYPE_FLOAT64;
        calq_tensor in2[2] = {xd, in[1]};
        expect_fail(&oc, in2, 2, 1, CALQ_ERR_UNSUPPORTED, "float64");
        op_case_free(&oc);
        calq_tensor_free_data(&in[1]);
    }
    calq_tensor_free_data(&x);
}

/* ---- fast vs reference over many shapes ---------------------------------------------- */

/* Every distinct Conv of UltraFace slim-320 at 1x3x240x320 (batch filled in below). */
/* clang-format off */
static const conv_spec ultraface[] = {
    {.name = "uf conv3x3 s2 3->16 @240x320", .nsp = 2, .c = 3, .m = 16, .group = 1, .in = {240, 320}, .k = {3, 3}, .s = {2, 2}, .pads = {1, 1, 1, 1}},
    {.name = "uf dw16 s1 @120x160", .nsp = 2, .c = 16, .m = 16, .group = 16, .in = {120, 160}, .k = {3, 3}, .s = {1, 1}, .pads = {1, 1, 1, 1}},
    {.name = "uf pw 16->32 @120x160", .nsp = 2, .c = 16, .m = 32, .group = 1, .in = {120, 160}, .k = {1, 1}, .s = {1, 1}},
    {.name = "uf dw32 s2 @120x160", .nsp = 2, .c = 32, .m = 32, .group = 32, .in = {120, 160}, .k = {3, 3}, .s = {2, 2}, .pads = {1, 1, 1, 1}},
    {.name = "uf pw 32->32 @60x80", .nsp = 2, .c = 32, .m = 32, .group = 1, .in = {60, 80}, .k = {1, 1}, .s = {1, 1}},
    {.name = "uf dw32 s1 @60x80", .nsp = 2, .c = 32, .m = 32, .group = 32, .in = {60, 80}, .k = {3, 3}, .s = {1, 1}, .pads = {1, 1, 1, 1}},
    {.name = "uf dw32 s2 @60x80", .nsp = 2, .c = 32, .m = 32, .group = 32, .in = {60, 80}, .k = {3, 3}, .s = {2, 2}, .pads = {1, 1, 1, 1}},
    {.name = "uf pw 32->64 @30x40", .nsp = 2, .c = 32, .m = 64, .group = 1, .in = {30, 40}, .k = {1, 1}, .s = {1, 1}},
    {.name = "uf dw64 s1 @30x40", .nsp = 2, .c = 64, .m = 64, .group = 64, .in = {30, 40}, .k = {3, 3}, .s = {1, 1}, .pads = {1, 1, 1, 1}},
    {.name = "uf dw64 s1 @30x40 bias", .nsp = 2, .c = 64, .m = 64, .group = 64, .in = {30, 40}, .k = {3, 3}, .s = {1, 1}, .pads = {1, 1, 1, 1}, .bias = true},
    {.name = "uf pw 64->64 @30x40", .nsp = 2, .c = 64, .m = 64, .group = 1, .in = {30, 40}, .k = {1, 1}, .s = {1, 1}},
    {.name = "uf pw 64->6 @30x40 bias", .nsp = 2, .c = 64, .m = 6, .group = 1, .in = {30, 40}, .k = {1, 1}, .s = {1, 1}, .bias = true},
    {.name = "uf pw 64->12 @30x40 bias", .nsp = 2, .c = 64, .m = 12, .group = 1, .in = {30, 40}, .k = {1, 1}, .s = {1, 1}, .bias = true},
    {.name = "uf dw64 s2 @30x40", .nsp = 2, .c = 64, .m = 64, .group = 64, .in = {30, 40}, .k = {3, 3}, .s = {2, 2}, .pads = {1, 1, 1, 1}},
    {.name = "uf pw 64->128 @15x20", .nsp = 2, .c = 64, .m = 128, .group = 1, .in = {15, 20}, .k = {1, 1}, .s = {1, 1}},
    {.name = "uf dw128 s1 @15x20", .nsp = 2, .c = 128, .m = 128, .group = 128, .in = {15, 20}, .k = {3, 3}, .s = {1, 1}, .pads = {1, 1, 1, 1}},
    {.name = "uf dw128 s1 @15x20 bias", .nsp = 2, .c = 128, .m = 128, .group = 128, .in = {15, 20}, .k = {3, 3}, .s = {1, 1}, .pads = {1, 1, 1, 1}, .bias = true},
    {.name = "uf pw 128->128 @15x20", .nsp = 2, .c = 128, .m = 128, .group = 1, .in = {15, 20}, .k = {1, 1}, .s = {1, 1}},
    {.name = "uf pw 128->4 @15x20 bias", .nsp = 2, .c = 128, .m = 4, .group = 1, .in = {15, 20}, .k = {1, 1}, .s = {1, 1}, .bias = true},
    {.name = "uf pw 128->8 @15x20 bias", .nsp = 2, .c = 128, .m = 8, .group = 1, .in = {15, 20}, .k = {1, 1}, .s = {1, 1}, .bias = true},
    {.name = "uf dw128 s2 @15x20", .nsp = 2, .c = 128, .m = 128, .group = 128, .in = {15, 20}, .k = {3, 3}, .s = {2, 2}, .pads = {1, 1, 1, 1}},
    {.name = "uf pw 128->256 @8x10", .nsp = 2, .c = 128, .m = 256, .group = 1, .in = {8, 10}, .k = {1, 1}, .s = {1, 1}},
    {.name = "uf dw256 s1 @8x10", .nsp = 2, .c = 256, .m = 256, .group = 256, .in = {8, 10}, .k = {3, 3}, .s = {1, 1}, .pads = {1, 1, 1, 1}},
    {.name = "uf dw256 s1 @8x10 bias", .nsp = 2, .c = 256, .m = 256, .group = 256, .in = {8, 10}, .k = {3, 3}, .s = {1, 1}, .pads = {1, 1, 1, 1}, .bias = true},
    {.name = "uf pw 256->256 @8x10", .nsp = 2, .c = 256, .m = 256, .group = 1, .in = {8, 10}, .k = {1, 1}, .s = {1, 1}},
    {.name = "uf pw 256->4 @8x10 bias", .nsp = 2, .c = 256, .m = 4, .group = 1, .in = {8, 10}, .k = {1, 1}, .s = {1, 1}, .bias = true},
    {.name = "uf pw 256->8 @8x10 bias", .nsp = 2, .c = 256, .m = 8, .group = 1, .in = {8, 10}, .k = {1, 1}, .s = {1, 1}, .bias = true},
    {.name = "uf pw 256->64 @8x10 bias", .nsp = 2, .c = 256, .m = 64, .group = 1, .in = {8, 10}, .k = {1, 1}, .s = {1, 1}, .bias = true},
    {.name = "uf dw64 s2 @8x10 bias", .nsp = 2, .c = 64, .m = 64, .group = 64, .in = {8, 10}, .k = {3, 3}, .s = {2, 2}, .pads = {1, 1, 1, 1}, .bias = true},
    {.name = "uf pw 64->256 @4x5 bias", .nsp = 2, .c = 64, .m = 256, .group = 1, .in = {4, 5}, .k = {1, 1}, .s = {1, 1}, .bias = true},
    {.name = "uf conv3x3 256->6 @4x5 bias", .nsp = 2, .c = 256, .m = 6, .group = 1, .in = {4, 5}, .k = {3, 3}, .s = {1, 1}, .pads = {1, 1, 1, 1}, .bias = true},
    {.name = "uf conv3x3 256->12 @4x5 bias", .nsp = 2, .c = 256, .m = 12, .group = 1, .in = {4, 5}, .k = {3, 3}, .s = {1, 1}, .pads = {1, 1, 1, 1}, .bias = true},
};
/* clang-format on */

/* clang-format off */
static const conv_spec others[] = {
    {.name = "1-D k5 s2 d2 pads 2,1", .nsp = 1, .n = 2, .c = 6, .m = 10, .group = 1, .in = {37}, .k = {5}, .s = {2}, .d = {2}, .pads = {2, 1}, .bias = true},
    {.name = "1-D depthwise", .nsp = 1, .n = 1, .c = 8, .m = 8, .group = 8, .in = {20}, .k = {3}, .s = {1}, .pads = {1, 1}, .bias = true},
    {.name = "2-D group 2 (not depthwise) (reference)", .nsp = 2, .n = 2, .c = 8, .m = 12, .group = 2, .in = {11, 13}, .k = {3, 3}, .s = {1, 1}, .pads = {1, 1, 1, 1}, .bias = true},
    {.name = "2-D group 4, M = 2C (reference)", .nsp = 2, .n = 1, .c = 8, .m = 16, .group = 4, .in = {9, 9}, .k = {3, 3}, .s = {2, 1}, .pads = {0, 1, 2, 0}},
    {.name = "2-D dilation 2 asymmetric pads", .nsp = 2, .n = 1, .c = 5, .m = 7, .group = 1, .in = {17, 19}, .k = {3, 3}, .s = {1, 2}, .d = {2, 3}, .pads = {2, 0, 1, 3}, .bias = true},
    {.name = "2-D 5x5 s3", .nsp = 2, .n = 1, .c = 4, .m = 6, .group = 1, .in = {23, 29}, .k = {5, 5}, .s = {3, 3}, .pads = {2, 2, 2, 2}},
    {.name = "2-D depthwise multiplier 2 (reference)", .nsp = 2, .n = 1, .c = 8, .m = 16, .group = 8, .in = {12, 12}, .k = {3, 3}, .s = {1, 1}, .pads = {1, 1, 1, 1}, .bias = true},
    {.name = "2-D SAME_LOWER s2", .nsp = 2, .n = 1, .c = 3, .m = 5, .group = 1, .in = {10, 11}, .k = {4, 3}, .s = {2, 2}, .auto_pad = "SAME_LOWER"},
    {.name = "2-D SAME_UPPER s2 d2", .nsp = 2, .n = 2, .c = 3, .m = 5, .group = 1, .in = {10, 11}, .k = {3, 3}, .s = {2, 2}, .d = {2, 2}, .bias = true, .auto_pad = "SAME_UPPER"},
    {.name = "3-D k3 s2", .nsp = 3, .n = 1, .c = 3, .m = 4, .group = 1, .in = {7, 8, 9}, .k = {3, 3, 3}, .s = {2, 2, 2}, .pads = {1, 1, 1, 1, 1, 1}, .bias = true},
    {.name = "3-D depthwise d2 (reference)", .nsp = 3, .n = 2, .c = 4, .m = 4, .group = 4, .in = {6, 7, 8}, .k = {3, 2, 3}, .s = {1, 1, 1}, .d = {2, 1, 2}, .pads = {2, 0, 1, 2, 1, 1}},
    {.name = "pw K-heavy 4096->4 @2x2", .nsp = 2, .n = 1, .c = 4096, .m = 4, .group = 1, .in = {2, 2}, .k = {1, 1}, .s = {1, 1}, .bias = true},
    {.name = "pw K-heavy 2048->16 @1x1", .nsp = 2, .n = 1, .c = 2048, .m = 16, .group = 1, .in = {1, 1}, .k = {1, 1}, .s = {1, 1}},
    {.name = "conv3x3 K-heavy 1024->8 @3x3", .nsp = 2, .n = 1, .c = 1024, .m = 8, .group = 1, .in = {3, 3}, .k = {3, 3}, .s = {1, 1}, .pads = {1, 1, 1, 1}},
    {.name = "pw large 512->512 @32x32", .nsp = 2, .n = 1, .c = 512, .m = 512, .group = 1, .in = {32, 32}, .k = {1, 1}, .s = {1, 1}},
    {.name = "conv3x3 C=8 group 1 @31x33", .nsp = 2, .n = 2, .c = 8, .m = 24, .group = 1, .in = {31, 33}, .k = {3, 3}, .s = {1, 1}, .pads = {1, 1, 1, 1}, .bias = true},
    {.name = "1-D pointwise batch 3", .nsp = 1, .n = 3, .c = 40, .m = 70, .group = 1, .in = {300}, .k = {1}, .s = {1}, .bias = true},
    {.name = "3-D pointwise", .nsp = 3, .n = 2, .c = 24, .m = 20, .group = 1, .in = {5, 6, 7}, .k = {1, 1, 1}, .s = {1, 1, 1}},
    {.name = "2-D pointwise stride 2", .nsp = 2, .n = 1, .c = 32, .m = 48, .group = 1, .in = {15, 16}, .k = {1, 1}, .s = {2, 2}, .bias = true},
    {.name = "T 2-D s2 k4 pads 1 (direct with AVX-512)", .transpose = true, .nsp = 2, .n = 1, .c = 8, .m = 6, .group = 1, .in = {9, 10}, .k = {4, 4}, .s = {2, 2}, .pads = {1, 1, 1, 1}, .bias = true},
    {.name = "T 2-D s2 k3 out_pad 1 (pads 1)", .transpose = true, .nsp = 2, .n = 2, .c = 4, .m = 4, .group = 1, .in = {7, 6}, .k = {3, 3}, .s = {2, 2}, .pads = {1, 1, 1, 1}, .out_pad = {1, 1}},
    {.name = "T 2-D group 2 dilation 2 (reference)", .transpose = true, .nsp = 2, .n = 1, .c = 6, .m = 4, .group = 2, .in = {8, 9}, .k = {3, 3}, .s = {1, 2}, .d = {2, 2}, .pads = {0, 1, 2, 0}, .bias = true},
    {.name = "T 2-D depthwise s2", .transpose = true, .nsp = 2, .n = 1, .c = 16, .m = 16, .group = 16, .in = {10, 10}, .k = {4, 4}, .s = {2, 2}, .pads = {1, 1, 1, 1}},
    {.name = "T 1-D s3 (reference)", .transpose = true, .nsp = 1, .n = 2, .c = 3, .m = 5, .group = 1, .in = {11}, .k = {3}, .s = {3}, .pads = {0, 1}, .bias = true},
    {.name = "T 3-D s2 (direct with AVX-512)", .transpose = true, .nsp = 3, .n = 1, .c = 3, .m = 2, .group = 1, .in = {4, 5, 6}, .k = {3, 3, 3}, .s = {2, 2, 2}, .pads = {1, 1, 1, 1, 1, 1}, .bias = true},
    {.name = "T 2-D out_pad beyond pads (reference)", .transpose = true, .nsp = 2, .n = 1, .c = 2, .m = 3, .group = 1, .in = {5, 5}, .k = {3, 3}, .s = {3, 2}, .out_pad = {1, 1}},
};
/* clang-format on */

static void test_fast_vs_ref(void)
{
    unsigned seed = 100;
    for (int batch = 1; batch <= 2; batch++) {
        for (size_t i = 0; i < sizeof ultraface / sizeof ultraface[0]; i++) {
            conv_spec p = ultraface[i];
            p.n = batch;
            check_spec(&p, seed += 7, true);
        }
    }
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        /* Shapes oneDNN runs only through GEMM (not deterministic across thread counts) or its
         * reference code, and output_padding beyond pads (oneDNN has no negative padding),
         * run calq's reference kernel.
         * Some ConvTransposes have a direct kernel only with AVX-512 (AVX2's oneDNN offers GEMM
         * or reference code): either way the result is checked against the reference. */
        bool expect_fast = strstr(others[i].name, "(reference)") == NULL;
        /* oneDNN's effective ISA: ONEDNN_MAX_CPU_ISA=AVX2 on an AVX-512 machine runs AVX2's code */
        const unsigned avx512 = (unsigned)dnnl_cpu_isa_avx512_core;
        if (strstr(others[i].name, "(direct with AVX-512)") &&
            ((unsigned)dnnl_get_effective_cpu_isa() & avx512) != avx512)
            expect_fast = false;
        bool took = check_spec(&others[i], seed += 7, expect_fast);
        if (strstr(others[i].name, "(reference)")) EXPECT(!took);
    }
}

/* Weights that change between runs on one prepared state (not marked constant) must be
 * picked up: the fast path reorders them again. Spec i of the UltraFace table. */
static void test_weights_change(int i)
{
    conv_spec p = ultraface[i];
    p.n = 1;
    calq_tensor in[3], out1 = {0}, out2 = {0};
    int n_in;
    spec_inputs(&p, 7, in, &n_in);
    op_case oc = spec_case(&p);
    const calq_node *node = &oc.g->nodes[oc.node];
    const calq_op_def *d = calq__op_find("", "Conv");
    calq_tensor *inp[2] = {&in[0], &in[1]}, *outp[1] = {&out1};
    calq_error err = {0};
    calq_op_ctx ctx = {.node = node, .opset = 11, .n_in = 2, .in = inp, .n_out = 1, .out = outp, .err = &err};
    EXPECT_OK(d->infer(&ctx));
    EXPECT_OK(calq__tensor_alloc(&out1, &err));
    out2 = out1;
    out2.data = NULL;
    EXPECT_OK(calq__tensor_alloc(&out2, &err));
    EXPECT_OK(d->prepare(&ctx));
    EXPECT(ctx.state != NULL);
    if (ctx.state) {
        EXPECT_OK(d->run_fast(&ctx));
        float *w = in[1].data;
        for (int64_t j = 0; j < calq_tensor_numel(&in[1]); j++) w[j] *= 2;
        outp[0] = &out2;
        EXPECT_OK(d->run_fast(&ctx));
        const float *a = out1.data, *b = out2.data;
        int bad = 0;
        for (int64_t j = 0; j < calq_tensor_numel(&out1) && !bad; j++)
            bad = fabsf(b[j] - 2 * a[j]) > 1e-5f * (1 + fabsf(b[j]));
        EXPECT(!bad);
        d->release(ctx.state);
    }
    calq_tensor_free_data(&out1);
    calq_tensor_free_data(&out2);
    free_all(in, n_in);
    op_case_free(&oc);
}

int main(void)
{
    test_conv_hand();
    test_convtranspose_hand();
    test_batchnorm();
    test_conv_errors();
    test_fast_vs_ref();
    test_weights_change(2); /* 1x1: the GEMM path */
    test_weights_change(1); /* depthwise: blocked primitive with a weight reorder */
    if (failures)
        fprintf(stderr, "%d failure(s)\n", failures);
    else
        printf("test_kernels_conv: all passed\n");
    return failures != 0;
}
