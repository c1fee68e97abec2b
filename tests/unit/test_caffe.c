/* Caffe frontend: tiny nets written here as prototxt text with caffemodels built with
 * protobuf-c, run through the executor and checked against values computed by hand from
 * Caffe's layer definitions; plus the load-time errors (unknown types, missing or mis-sized
 * weights, truncated files). */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "caffe.pb-c.h"
#include "calq.h"
#include "frontend/caffe.h"

#include "expect.h"

/* ---- building caffemodels ------------------------------------------------------------------- */

typedef struct blob_spec {
    int ndim;        /* dims of `shape`; 0 with legacy: num/channels/height/width */
    int64_t dims[9]; /* shape dims, or num, channels, height, width when legacy */
    bool legacy;     /* write the pre-`shape` 4-D fields */
    bool as_double;  /* write double_data instead of data */
    int n;
    const float *data;
} blob_spec;

typedef struct weight_layer {
    const char *name;
    int n_blobs;
    const blob_spec *blobs;
} weight_layer;

static CalqCaffe__BlobProto *make_blob(const blob_spec *b)
{
    CalqCaffe__BlobProto *p = calloc(1, sizeof *p);
    calq_caffe__blob_proto__init(p);
    if (b->legacy) {
        p->has_num = p->has_channels = p->has_height = p->has_width = 1;
        p->num = (int32_t)b->dims[0];
        p->channels = (int32_t)b->dims[1];
        p->height = (int32_t)b->dims[2];
        p->width = (int32_t)b->dims[3];
    } else {
        p->shape = calloc(1, sizeof *p->shape);
        calq_caffe__blob_shape__init(p->shape);
        p->shape->n_dim = (size_t)b->ndim;
        p->shape->dim = (int64_t *)b->dims;
    }
    if (b->as_double) {
        p->n_double_data = (size_t)b->n;
        p->double_data = calloc((size_t)b->n + 1, sizeof(double));
        for (int i = 0; i < b->n; i++) p->double_data[i] = b->data[i];
    } else {
        p->n_data = (size_t)b->n;
        p->data = (float *)b->data;
    }
    return p;
}

static void free_blob(CalqCaffe__BlobProto *p)
{
    free(p->shape);
    free(p->double_data);
    free(p);
}

/* A caffemodel holding `layers`, as V1 `layers` entries when v1, else `layer` entries. */
static uint8_t *make_caffemodel(const weight_layer *layers, int n, bool v1, size_t *len)
{
    CalqCaffe__NetParameter net;
    calq_caffe__net_parameter__init(&net);
    CalqCaffe__LayerParameter **lp = calloc((size_t)n + 1, sizeof *lp);
    CalqCaffe__V1LayerParameter **vp = calloc((size_t)n + 1, sizeof *vp);
    for (int i = 0; i < n; i++) {
        CalqCaffe__BlobProto **blobs = calloc((size_t)layers[i].n_blobs + 1, sizeof *blobs);
        for (int b = 0; b < layers[i].n_blobs; b++) blobs[b] = make_blob(&layers[i].blobs[b]);
        if (v1) {
            vp[i] = calloc(1, sizeof **vp);
            calq_caffe__v1_layer_parameter__init(vp[i]);
            vp[i]->name = (char *)layers[i].name;
            vp[i]->n_blobs = (size_t)layers[i].n_blobs;
            vp[i]->blobs = blobs;
        } else {
            lp[i] = calloc(1, sizeof **lp);
            calq_caffe__layer_parameter__init(lp[i]);
            lp[i]->name = (char *)layers[i].name;
            lp[i]->type = (char *)"Unused";
            lp[i]->n_blobs = (size_t)layers[i].n_blobs;
            lp[i]->blobs = blobs;
        }
    }
    if (v1) {
        net.n_layers = (size_t)n;
        net.layers = vp;
    } else {
        net.n_layer = (size_t)n;
        net.layer = lp;
    }
    *len = calq_caffe__net_parameter__get_packed_size(&net);
    uint8_t *buf = malloc(*len + 1);
    calq_caffe__net_parameter__pack(&net, buf);
    for (int i = 0; i < n; i++) {
        CalqCaffe__BlobProto **blobs = v1 ? vp[i]->blobs : lp[i]->blobs;
        for (int b = 0; b < layers[i].n_blobs; b++) free_blob(blobs[b]);
        free(blobs);
        free(v1 ? (void *)vp[i] : (void *)lp[i]);
    }
    free(lp);
    free(vp);
    return buf;
}

/* ---- running ------------------------------------------------------------------------------------ */

static calq_status load(const char *proto, const uint8_t *bin, size_t len, calq_model **m, calq_error *err)
{
    memset(err, 0, sizeof *err);
    return calq__caffe_load_buffers(proto, strlen(proto), "test.prototxt", bin, len, "test.caffemodel", m, err);
}

typedef struct capture {
    const char *name;
    float vals[64];
    int n;
} capture;

static int capture_fn(void *user, const char *name, const calq_tensor *t)
{
    capture *c = user;
    if (strcmp(name, c->name) == 0) {
        c->n = (int)calq_tensor_numel(t);
        if (c->n > 64) c->n = 64;
        memcpy(c->vals, t->data, sizeof(float) * (size_t)c->n);
    }
    return 0;
}

/* Runs m on inputs (float32, model order) and copies output `out` into y (returns its size, or
 * -1). When cap is non-NULL the named intermediate tensor is captured too. */
static int run(calq_model *m, const calq_tensor *in, int n_in, const char *out, float *y, int max, capture *cap)
{
    calq_error err = {0};
    calq_session *s = NULL;
    int n = -1;
    if (calq_session_create(m, NULL, &s, &err) != CALQ_OK) goto done;
    if (cap && calq_session_set_observer(s, capture_fn, cap, &cap->name, 1, &err) != CALQ_OK) goto done;
    if (calq_session_run(s, in, n_in, &err) != CALQ_OK) goto done;
    for (int i = 0; i < calq_model_num_outputs(m); i++) {
        calq_value_info info;
        calq_model_output_info(m, i, &info);
        if (strcmp(info.name, out)) continue;
        const calq_tensor *t;
        calq_session_output(s, i, &t);
        n = (int)calq_tensor_numel(t);
        if (n > max) n = max;
        memcpy(y, t->data, sizeof(float) * (size_t)n);
    }
done:
    if (err.message[0]) fprintf(stderr, "run: %s\n", err.message);
    calq_session_free(s);
    return n;
}

static calq_tensor tensor(float *data, int ndim, int64_t d0, int64_t d1, int64_t d2, int64_t d3)
{
    calq_tensor t = {CALQ_DTYPE_FLOAT32, ndim, {d0, d1, d2, d3}, data};
    return t;
}

static void expect_values(const float *got, int n, const float *want, int n_want, float tol, const char *what)
{
    if (n != n_want) {
        fprintf(stderr, "%s: %d values, expected %d\n", what, n, n_want);
        failures++;
        return;
    }
    for (int i = 0; i < n; i++)
        if (!(fabsf(got[i] - want[i]) <= tol)) {
            fprintf(stderr, "%s[%d]: %.7g, expected %.7g\n", what, i, (double)got[i], (double)want[i]);
            failures++;
        }
}

static void expect_error(calq_status s, calq_status want, const calq_error *err, const char *const *needles)
{
    if (s != want) {
        fprintf(stderr, "status %s, expected %s (%s)\n", calq_status_name(s), calq_status_name(want), err->message);
        failures++;
        return;
    }
    for (int i = 0; needles[i]; i++)
        if (!strstr(err->message, needles[i])) {
            fprintf(stderr, "message lacks \"%s\":\n%s\n", needles[i], err->message);
            failures++;
        }
}

/* ---- tests ------------------------------------------------------------------------------------- */

/* BatchNorm (blobs scaled by the moving-average factor 2) then Scale with bias, in place:
 * y = ((x - mean) / sqrt(var)) * s + b per channel. Also the SSA names of in-place blobs. */
static void test_batchnorm_scale(void)
{
    const char *proto = "name: 'bn'\n"
                        "input: 'data' input_shape { dim: 1 dim: 2 dim: 1 dim: 2 }\n"
                        "layer { name: 'bn' type: 'BatchNorm' bottom: 'data' top: 'x'\n"
                        "        batch_norm_param { use_global_stats: true eps: 0 } }\n"
                        "layer { name: 'sc' type: 'Scale' bottom: 'x' top: 'x' scale_param { bias_term: true } }\n";
    static const float mean[] = {2, 4}, var[] = {8, 18}, factor[] = {2}, scale[] = {10, -1}, bias[] = {0.5f, 1};
    blob_spec bn[3] = {
        {1, {2}, false, false, 2, mean}, {1, {2}, false, true, 2, var}, {1, {1}, false, false, 1, factor}};
    blob_spec sc[2] = {{1, {2}, false, false, 2, scale}, {1, {2}, false, false, 2, bias}};
    weight_layer wl[2] = {{"bn", 3, bn}, {"sc", 2, sc}};
    size_t len;
    uint8_t *bin = make_caffemodel(wl, 2, false, &len);
    calq_model *m = NULL;
    calq_error err;
    EXPECT(load(proto, bin, len, &m, &err) == CALQ_OK);
    if (m) {
        /* mean [1, 2], variance [4, 9]: channel 0 (3, 5) -> (1, 2), channel 1 (8, -1) -> (2, -1). */
        float x[4] = {3, 5, 8, -1}, y[8];
        calq_tensor in = tensor(x, 4, 1, 2, 1, 2);
        capture cap = {"x/bn_out", {0}, 0};
        int n = run(m, &in, 1, "x", y, 8, &cap);
        static const float want[] = {10.5f, 20.5f, -1.0f, 2.0f}, want_bn[] = {1, 2, 2, -1};
        expect_values(y, n, want, 4, 1e-6f, "BatchNorm+Scale");
        expect_values(cap.vals, cap.n, want_bn, 4, 1e-6f, "BatchNorm output x/bn_out");
        calq_model_free(m);
    } else {
        fprintf(stderr, "%s\n", err.message);
    }
    free(bin);

    /* The same weights as legacy V1 `layers` entries in the caffemodel, matched by name. */
    bin = make_caffemodel(wl, 2, true, &len);
    EXPECT(load(proto, bin, len, &m, &err) == CALQ_OK);
    if (m) {
        float x[4] = {3, 5, 8, -1}, y[8];
        calq_tensor in = tensor(x, 4, 1, 2, 1, 2);
        static const float want[] = {10.5f, 20.5f, -1.0f, 2.0f};
        expect_values(y, run(m, &in, 1, "x", y, 8, NULL), want, 4, 1e-6f, "BatchNorm+Scale, V1 caffemodel");
        calq_model_free(m);
    }
    free(bin);

    /* A factor of 0 zeroes mean and variance (Caffe's rule), so with eps 1: y = x. */
    const char *proto0 = "input: 'data' input_dim: 1 input_dim: 2 input_dim: 1 input_dim: 1\n"
                         "layer { name: 'bn' type: 'BatchNorm' bottom: 'data' top: 'y' batch_norm_param { eps: 1 } }\n";
    static const float zero[] = {0};
    blob_spec bn0[3] = {
        {1, {2}, false, false, 2, mean}, {1, {2}, false, false, 2, var}, {1, {1}, false, false, 1, zero}};
    weight_layer wl0[1] = {{"bn", 3, bn0}};
    bin = make_caffemodel(wl0, 1, false, &len);
    EXPECT(load(proto0, bin, len, &m, &err) == CALQ_OK);
    if (m) {
        float x[2] = {3, -7}, y[2];
        calq_tensor in = tensor(x, 4, 1, 2, 1, 1);
        int n = run(m, &in, 1, "y", y, 2, NULL);
        expect_values(y, n, x, 2, 1e-6f, "BatchNorm factor 0");
        calq_model_free(m);
    }
    free(bin);
}

/* Eltwise SUM with coefficients (2a - 0.5b), PROD and MAX over three inputs; no weights. */
static void test_eltwise(void)
{
    const char *proto = "input: 'a' input_shape { dim: 1 dim: 3 }\n"
                        "input: 'b' input_shape { dim: 1 dim: 3 }\n"
                        "input: 'c' input_shape { dim: 1 dim: 3 }\n"
                        "layer { name: 'sum' type: 'Eltwise' bottom: 'a' bottom: 'b' top: 'sum'\n"
                        "        eltwise_param { operation: SUM coeff: 2 coeff: -0.5 } }\n"
                        "layer { name: 'prod' type: 'Eltwise' bottom: 'a' bottom: 'b' bottom: 'c' top: 'prod'\n"
                        "        eltwise_param { operation: PROD } }\n"
                        "layer { name: 'max' type: 'Eltwise' bottom: 'a' bottom: 'b' bottom: 'c' top: 'max'\n"
                        "        eltwise_param { operation: MAX } }\n";
    calq_model *m = NULL;
    calq_error err;
    EXPECT(load(proto, NULL, 0, &m, &err) == CALQ_OK);
    if (!m) {
        fprintf(stderr, "%s\n", err.message);
        return;
    }
    float a[3] = {1, -2, 3}, b[3] = {4, 6, -8}, cc[3] = {0.5f, 10, 2}, y[3];
    calq_tensor in[3] = {tensor(a, 2, 1, 3, 0, 0), tensor(b, 2, 1, 3, 0, 0), tensor(cc, 2, 1, 3, 0, 0)};
    static const float sum[] = {0, -7, 10}, prod[] = {2, -120, -48}, max[] = {4, 10, 3};
    expect_values(y, run(m, in, 3, "sum", y, 3, NULL), sum, 3, 1e-6f, "Eltwise SUM coeff");
    expect_values(y, run(m, in, 3, "prod", y, 3, NULL), prod, 3, 1e-6f, "Eltwise PROD");
    expect_values(y, run(m, in, 3, "max", y, 3, NULL), max, 3, 1e-6f, "Eltwise MAX");
    EXPECT(calq_model_num_outputs(m) == 3);
    calq_model_free(m);
}

/* Caffe's pooled size rounds up; with padding a window starting in the padding is dropped,
 * and AVE divides by the window clipped to the padded input. Values from Caffe's loops on
 * x = 0..15 (4x4) and 0..24 (5x5). */
static void test_pooling(void)
{
    const char *proto =
        "layer { name: 'in' type: 'Input' top: 'x' input_param { shape { dim: 1 dim: 1 dim: 4 dim: 4 } } }\n"
        "layer { name: 'max' type: 'Pooling' bottom: 'x' top: 'max' pooling_param { pool: MAX kernel_size: 3 stride: 2 "
        "} }\n"
        "layer { name: 'ave' type: 'Pooling' bottom: 'x' top: 'ave'\n"
        "        pooling_param { pool: AVE kernel_size: 3 stride: 2 pad: 1 } }\n"
        "layer { name: 'maxp' type: 'Pooling' bottom: 'x' top: 'maxp'\n"
        "        pooling_param { pool: MAX kernel_h: 3 kernel_w: 3 stride_h: 2 stride_w: 2 pad_h: 1 pad_w: 1 } }\n"
        "layer { name: 'gap' type: 'Pooling' bottom: 'x' top: 'gap' pooling_param { pool: AVE global_pooling: true } "
        "}\n";
    calq_model *m = NULL;
    calq_error err;
    EXPECT(load(proto, NULL, 0, &m, &err) == CALQ_OK);
    if (!m) {
        fprintf(stderr, "%s\n", err.message);
        return;
    }
    float x[16], y[16];
    for (int i = 0; i < 16; i++) x[i] = (float)i;
    calq_tensor in = tensor(x, 4, 1, 1, 4, 4);
    static const float max[] = {10, 11, 14, 15};
    static const float ave[] = {10.0f / 9, 24.0f / 9, 10.0f / 6, 51.0f / 9, 10,
                                33.0f / 6, 25.0f / 6, 42.0f / 6, 15.0f / 4};
    static const float maxp[] = {5, 7, 7, 13, 15, 15, 13, 15, 15}, gap[] = {7.5f};
    expect_values(y, run(m, &in, 1, "max", y, 16, NULL), max, 4, 1e-6f, "MAX k3 s2 (ceil: 2x2)");
    expect_values(y, run(m, &in, 1, "ave", y, 16, NULL), ave, 9, 1e-5f, "AVE k3 s2 p1 (ceil: 3x3)");
    expect_values(y, run(m, &in, 1, "maxp", y, 16, NULL), maxp, 9, 1e-6f, "MAX k3 s2 p1");
    expect_values(y, run(m, &in, 1, "gap", y, 16, NULL), gap, 1, 1e-6f, "global AVE");
    calq_model_free(m);

    /* 5x5, k2 s2, no pad: ceil gives 3x3 whose last windows hold one row/column and divide by
     * it (the window is clipped to the input + 0 padding); FLOOR gives 2x2. */
    const char *proto5 = "input: 'x' input_dim: 1 input_dim: 1 input_dim: 5 input_dim: 5\n"
                         "layer { name: 'c' type: 'Pooling' bottom: 'x' top: 'c' pooling_param { pool: AVE "
                         "kernel_size: 2 stride: 2 } }\n"
                         "layer { name: 'f' type: 'Pooling' bottom: 'x' top: 'f'\n"
                         "        pooling_param { pool: AVE kernel_size: 2 stride: 2 round_mode: FLOOR } }\n"
                         "layer { name: 'o' type: 'Pooling' bottom: 'x' top: 'o'\n"
                         "        pooling_param { pool: AVE kernel_size: 2 stride: 2 ceil_mode: false } }\n";
    EXPECT(load(proto5, NULL, 0, &m, &err) == CALQ_OK);
    if (!m) return;
    float x5[25], y5[16];
    for (int i = 0; i < 25; i++) x5[i] = (float)i;
    in = tensor(x5, 4, 1, 1, 5, 5);
    static const float c[] = {3, 5, 6.5f, 13, 15, 16.5f, 20.5f, 22.5f, 24}, f[] = {3, 5, 13, 15};
    expect_values(y5, run(m, &in, 1, "c", y5, 16, NULL), c, 9, 1e-6f, "AVE 5x5 ceil");
    expect_values(y5, run(m, &in, 1, "f", y5, 16, NULL), f, 4, 1e-6f, "AVE 5x5 round_mode FLOOR");
    expect_values(y5, run(m, &in, 1, "o", y5, 16, NULL), f, 4, 1e-6f, "AVE 5x5 ceil_mode false");
    calq_model_free(m);
}

/* LRN: ACROSS_CHANNELS divides by (k + alpha/size * sum of squares over the channel window)^beta;
 * WITHIN_CHANNEL by (1 + alpha * mean of squares over a size x size window)^beta, the mean
 * always over size^2 taps (padding counts) and k ignored, as Caffe's LRNLayer builds it. */
static void test_lrn(void)
{
    const char *proto = "input: 'x' input_shape { dim: 1 dim: 3 dim: 1 dim: 1 }\n"
                        "input: 'z' input_shape { dim: 1 dim: 1 dim: 2 dim: 2 }\n"
                        "layer { name: 'across' type: 'LRN' bottom: 'x' top: 'across'\n"
                        "        lrn_param { local_size: 3 alpha: 0.3 beta: 0.75 k: 2 } }\n"
                        "layer { name: 'within' type: 'LRN' bottom: 'z' top: 'within'\n"
                        "        lrn_param { local_size: 3 alpha: 0.9 beta: 0.5 k: 5 norm_region: WITHIN_CHANNEL } }\n";
    calq_model *m = NULL;
    calq_error err;
    EXPECT(load(proto, NULL, 0, &m, &err) == CALQ_OK);
    if (!m) {
        fprintf(stderr, "%s\n", err.message);
        return;
    }
    float x[3] = {1, 2, 3}, z[4] = {1, 2, 3, 4}, y[4];
    calq_tensor in[2] = {tensor(x, 4, 1, 3, 1, 1), tensor(z, 4, 1, 1, 2, 2)};
    /* squares 1, 4, 9: windows {0,1}, {0,1,2}, {1,2} -> 2 + 0.1 * (5, 14, 13) */
    float across[3] = {1 / powf(2.5f, 0.75f), 2 / powf(3.4f, 0.75f), 3 / powf(3.3f, 0.75f)};
    /* every 3x3 window padded by 1 holds all four squares (30): (1 + 0.9 * 30/9)^-0.5 = 1/2 */
    static const float within[4] = {0.5f, 1, 1.5f, 2};
    expect_values(y, run(m, in, 2, "across", y, 4, NULL), across, 3, 1e-6f, "LRN ACROSS_CHANNELS k 2");
    expect_values(y, run(m, in, 2, "within", y, 4, NULL), within, 4, 1e-6f, "LRN WITHIN_CHANNEL");
    calq_model_free(m);
}

/* A V1 net (`layers`, enum types) with a V1 caffemodel whose blobs use the legacy
 * num/channels/height/width fields: InnerProduct weights 1x1x2x3, bias 1x1x1x2, then a
 * CONVOLUTION with a legacy 4-D weight, RELU in place and a SOFTMAX. */
static void test_v1_legacy(void)
{
    const char *proto = "name: 'v1'\n"
                        "input: 'data'\n"
                        "input_dim: 1 input_dim: 3 input_dim: 1 input_dim: 1\n"
                        "layers { name: 'ip' type: INNER_PRODUCT bottom: 'data' top: 'ip'\n"
                        "         blobs_lr: 1 inner_product_param { num_output: 2 } }\n"
                        "layers { name: 'relu' type: RELU bottom: 'ip' top: 'ip' }\n"
                        "layers { name: 'conv' type: CONVOLUTION bottom: 'data' top: 'conv'\n"
                        "         convolution_param { num_output: 1 kernel_size: 1 bias_term: false } }\n"
                        "layers { name: 'prob' type: SOFTMAX bottom: 'conv' top: 'prob' }\n"
                        "layers { name: 'loss' type: SOFTMAX_LOSS bottom: 'ip' bottom: 'label' top: 'loss' }\n"
                        "layers { name: 'acc' type: ACCURACY bottom: 'ip' bottom: 'label' top: 'acc'\n"
                        "         include { phase: TEST } }\n";
    static const float w[] = {1, 2, 3, -1, -1, -1}, b[] = {0.5f, 0.25f}, cw[] = {1, -1, 2};
    blob_spec ip[2] = {{0, {1, 1, 2, 3}, true, false, 6, w}, {0, {1, 1, 1, 2}, true, false, 2, b}};
    blob_spec conv[1] = {{0, {1, 3, 1, 1}, true, true, 3, cw}};
    weight_layer wl[2] = {{"ip", 2, ip}, {"conv", 1, conv}};
    size_t len;
    uint8_t *bin = make_caffemodel(wl, 2, true, &len);
    calq_model *m = NULL;
    calq_error err;
    EXPECT(load(proto, bin, len, &m, &err) == CALQ_OK);
    if (m) {
        float x[3] = {1, 2, 3}, y[4];
        calq_tensor in = tensor(x, 4, 1, 3, 1, 1);
        /* ip = [1+4+9+0.5, -6+0.25] = [14.5, -5.75] -> relu [14.5, 0]; conv = 1-2+6 = 5 -> softmax 1. */
        static const float want_ip[] = {14.5f, 0}, want_prob[] = {1};
        capture cap = {"ip/ip_out", {0}, 0};
        expect_values(y, run(m, &in, 1, "ip", y, 4, &cap), want_ip, 2, 1e-6f, "V1 InnerProduct + ReLU");
        static const float want_pre[] = {14.5f, -5.75f};
        expect_values(cap.vals, cap.n, want_pre, 2, 1e-6f, "V1 InnerProduct before the in-place ReLU");
        expect_values(y, run(m, &in, 1, "prob", y, 4, NULL), want_prob, 1, 1e-6f, "V1 Convolution + Softmax");
        EXPECT(calq_model_num_outputs(m) == 2); /* loss and accuracy are skipped */
        calq_model_free(m);
    } else {
        fprintf(stderr, "%s\n", err.message);
    }
    /* The same weights as a current-format caffemodel, found by name from the V1 prototxt. */
    free(bin);
    bin = make_caffemodel(wl, 2, false, &len);
    EXPECT(load(proto, bin, len, &m, &err) == CALQ_OK);
    calq_model_free(m);
    free(bin);
}

/* Reshape (0 / -1 / axis + num_axes), Flatten (axis..end_axis), Permute, Slice with points,
 * Concat, Split and Softmax over an inner axis. Data is 0..23 in a 1x2x3x4 blob. */
static void test_shape_layers(void)
{
    const char *proto =
        "layer { name: 'in' type: 'Input' top: 'x' input_param { shape { dim: 1 dim: 2 dim: 3 dim: 4 } } }\n"
        "layer { name: 'r' type: 'Reshape' bottom: 'x' top: 'r' reshape_param { shape { dim: 0 dim: -1 dim: 4 } } }\n"
        "layer { name: 'r2' type: 'Reshape' bottom: 'x' top: 'r2'\n"
        "        reshape_param { shape { dim: 6 } axis: 1 num_axes: 2 } }\n"
        "layer { name: 'f' type: 'Flatten' bottom: 'x' top: 'f' flatten_param { axis: 1 end_axis: 2 } }\n"
        "layer { name: 'p' type: 'Permute' bottom: 'x' top: 'p' permute_param { order: 0 order: 3 } }\n"
        "layer { name: 's' type: 'Slice' bottom: 'x' top: 's0' top: 's1' top: 's2'\n"
        "        slice_param { axis: -1 slice_point: 1 slice_point: 3 } }\n"
        "layer { name: 'cat' type: 'Concat' bottom: 's2' bottom: 's0' top: 'cat' concat_param { axis: 3 } }\n"
        "layer { name: 'split' type: 'Split' bottom: 'cat' top: 'c1' top: 'c2' }\n"
        "layer { name: 'sm' type: 'Softmax' bottom: 'c1' top: 'sm' softmax_param { axis: 2 } }\n"
        "layer { name: 'id' type: 'Dropout' bottom: 'c2' top: 'c2' }\n";
    calq_model *m = NULL;
    calq_error err;
    EXPECT(load(proto, NULL, 0, &m, &err) == CALQ_OK);
    if (!m) {
        fprintf(stderr, "%s\n", err.message);
        return;
    }
    calq_session *s = NULL;
    EXPECT(calq_session_create(m, NULL, &s, &err) == CALQ_OK);
    float x[24];
    for (int i = 0; i < 24; i++) x[i] = (float)i;
    calq_tensor in = tensor(x, 4, 1, 2, 3, 4);
    EXPECT(s && calq_session_run(s, &in, 1, &err) == CALQ_OK);
    static const struct {
        const char *name;
        int ndim;
        int64_t dims[4];
    } shapes[] = {{"r", 3, {1, 6, 4}},     {"r2", 3, {1, 6, 4}},     {"f", 3, {1, 6, 4}},     {"p", 4, {1, 4, 2, 3}},
                  {"s1", 4, {1, 2, 3, 2}}, {"cat", 4, {1, 2, 3, 2}}, {"sm", 4, {1, 2, 3, 2}}, {"c2", 4, {1, 2, 3, 2}}};
    for (size_t i = 0; s && i < sizeof shapes / sizeof *shapes; i++) {
        calq_value_info info;
        EXPECT(calq_session_tensor_info(s, shapes[i].name, &info, &err) == CALQ_OK);
        bool same = info.ndim == shapes[i].ndim;
        for (int d = 0; same && d < info.ndim; d++) same = info.dims[d] == shapes[i].dims[d];
        if (!same) {
            fprintf(stderr, "%s: wrong shape (rank %d)\n", shapes[i].name, info.ndim);
            failures++;
        }
    }
    for (int i = 0; s && i < calq_model_num_outputs(m); i++) {
        calq_value_info info;
        const calq_tensor *t;
        calq_model_output_info(m, i, &info);
        calq_session_output(s, i, &t);
        const float *y = t->data;
        if (!strcmp(info.name, "p")) {
            /* p[0, w, c, h] = x[0, c, h, w]: element (w=1, c=1, h=2) = 12 + 8 + 1 */
            EXPECT(y[1 * 6 + 1 * 3 + 2] == 21.0f);
        } else if (!strcmp(info.name, "s1")) {
            static const float want[] = {1, 2, 5, 6, 9, 10, 13, 14, 17, 18, 21, 22};
            expect_values(y, 12, want, 12, 0, "Slice middle part");
        } else if (!strcmp(info.name, "c2")) {
            static const float want[] = {3, 0, 7, 4, 11, 8, 15, 12, 19, 16, 23, 20};
            expect_values(y, 12, want, 12, 0, "Concat(s2, s0) through Split and Dropout");
        } else if (!strcmp(info.name, "sm")) {
            /* softmax over h of (3, 7, 11): the steps of 4 give e^-8, e^-4, 1 normalised */
            float z = 1 + expf(-4) + expf(-8);
            EXPECT(fabsf(y[4] - 1 / z) < 1e-6f && fabsf(y[0] - expf(-8) / z) < 1e-6f);
        }
    }
    calq_session_free(s);
    calq_model_free(m);
}

/* Power, Exp, Log, AbsVal, ELU, leaky ReLU, PReLU (per channel and shared), Bias and a
 * two-bottom Scale. */
static void test_elementwise_layers(void)
{
    const char *proto =
        "input: 'x' input_shape { dim: 1 dim: 2 dim: 2 }\n"
        "input: 's' input_shape { dim: 2 }\n"
        "layer { name: 'pow' type: 'Power' bottom: 'x' top: 'pow' power_param { power: 2 scale: 0.5 shift: 1 } }\n"
        "layer { name: 'const' type: 'Power' bottom: 'x' top: 'const' power_param { power: 3 scale: 0 shift: 2 } }\n"
        "layer { name: 'exp' type: 'Exp' bottom: 'x' top: 'exp' exp_param { base: 2 shift: 1 } }\n"
        "layer { name: 'log' type: 'Log' bottom: 'pow' top: 'log' log_param { base: 10 shift: 1 } }\n"
        "layer { name: 'abs' type: 'AbsVal' bottom: 'x' top: 'abs' }\n"
        "layer { name: 'elu' type: 'ELU' bottom: 'x' top: 'elu' elu_param { alpha: 2 } }\n"
        "layer { name: 'leaky' type: 'ReLU' bottom: 'x' top: 'leaky' relu_param { negative_slope: 0.1 } }\n"
        "layer { name: 'prelu' type: 'PReLU' bottom: 'x' top: 'prelu' }\n"
        "layer { name: 'shared' type: 'PReLU' bottom: 'x' top: 'shared' prelu_param { channel_shared: true } }\n"
        "layer { name: 'bias' type: 'Bias' bottom: 'x' top: 'bias' }\n"
        "layer { name: 'sc2' type: 'Scale' bottom: 'x' bottom: 's' top: 'sc2' }\n";
    static const float slopes[] = {0.5f, -1}, one_slope[] = {0.25f}, bias[] = {10, 20};
    blob_spec pr[1] = {{1, {2}, false, false, 2, slopes}}, sh[1] = {{1, {1}, false, false, 1, one_slope}};
    blob_spec bb[1] = {{1, {2}, false, false, 2, bias}};
    weight_layer wl[3] = {{"prelu", 1, pr}, {"shared", 1, sh}, {"bias", 1, bb}};
    size_t len;
    uint8_t *bin = make_caffemodel(wl, 3, false, &len);
    calq_model *m = NULL;
    calq_error err;
    EXPECT(load(proto, bin, len, &m, &err) == CALQ_OK);
    free(bin);
    if (!m) {
        fprintf(stderr, "%s\n", err.message);
        return;
    }
    float x[4] = {2, -2, 0, -4}, sv[2] = {3, -1}, y[4];
    calq_tensor in[2] = {tensor(x, 3, 1, 2, 2, 0), tensor(sv, 1, 2, 0, 0, 0)};
    static const float pw[] = {4, 0, 1, 1}, cst[] = {8, 8, 8, 8}, ex[] = {8, 0.5f, 2, 0.125f};
    static const float ab[] = {2, 2, 0, 4}, lk[] = {2, -0.2f, 0, -0.4f}, pr_w[] = {2, -1, 0, 4};
    static const float sh_w[] = {2, -0.5f, 0, -1}, bi[] = {12, 8, 20, 16}, s2[] = {6, -6, 0, 4};
    float elu[4] = {2, 2 * expm1f(-2), 0, 2 * expm1f(-4)}, lg[4] = {log10f(5), 0, log10f(2), log10f(2)};
    capture cap = {"pow", {0}, 0}; /* read by 'log', so not an output */
    run(m, in, 2, "const", y, 4, &cap);
    expect_values(cap.vals, cap.n, pw, 4, 1e-6f, "Power (1 + x/2)^2");
    expect_values(y, run(m, in, 2, "const", y, 4, NULL), cst, 4, 1e-6f, "Power with scale 0");
    expect_values(y, run(m, in, 2, "exp", y, 4, NULL), ex, 4, 1e-5f, "Exp 2^(1 + x)");
    expect_values(y, run(m, in, 2, "log", y, 4, NULL), lg, 4, 1e-6f, "Log10(1 + pow)");
    expect_values(y, run(m, in, 2, "abs", y, 4, NULL), ab, 4, 0, "AbsVal");
    expect_values(y, run(m, in, 2, "elu", y, 4, NULL), elu, 4, 1e-6f, "ELU alpha 2");
    expect_values(y, run(m, in, 2, "leaky", y, 4, NULL), lk, 4, 1e-7f, "ReLU negative_slope");
    expect_values(y, run(m, in, 2, "prelu", y, 4, NULL), pr_w, 4, 0, "PReLU per channel");
    expect_values(y, run(m, in, 2, "shared", y, 4, NULL), sh_w, 4, 0, "PReLU channel_shared");
    expect_values(y, run(m, in, 2, "bias", y, 4, NULL), bi, 4, 0, "Bias");
    expect_values(y, run(m, in, 2, "sc2", y, 4, NULL), s2, 4, 0, "Scale with two bottoms");
    calq_model_free(m);
}

/* InnerProduct with transpose (weights stored [K, num_output]), Scale/Bias over other axes,
 * BatchNorm with batch statistics, Concat by concat_dim and Slice by slice_dim into equal parts. */
static void test_layer_options(void)
{
    const char *proto =
        "input: 'x' input_shape { dim: 2 dim: 1 dim: 1 dim: 2 }\n"
        "input: 'v' input_shape { dim: 1 dim: 2 dim: 2 }\n"
        "layer { name: 'ipt' type: 'InnerProduct' bottom: 'x' top: 'ipt'\n"
        "        inner_product_param { num_output: 3 transpose: true bias_term: false } }\n"
        "layer { name: 'bs' type: 'BatchNorm' bottom: 'x' top: 'bs'\n"
        "        batch_norm_param { use_global_stats: false eps: 0 } }\n"
        "layer { name: 'sc' type: 'Scale' bottom: 'v' top: 'sc' scale_param { axis: 1 num_axes: 2 } }\n"
        "layer { name: 'bi' type: 'Bias' bottom: 'v' top: 'bi' bias_param { axis: -1 } }\n"
        "layer { name: 'cat' type: 'Concat' bottom: 'v' bottom: 'v' top: 'cat' concat_param { concat_dim: 2 } }\n"
        "layer { name: 'sl' type: 'Slice' bottom: 'cat' top: 'h0' top: 'h1' slice_param { slice_dim: 1 } }\n";
    static const float w[] = {1, 0, -1, 2, 1, 0}, s4[] = {1, 2, 3, 4}, b2[] = {10, 20};
    blob_spec ipb[1] = {{2, {2, 3}, false, false, 6, w}};
    blob_spec scb[1] = {{2, {2, 2}, false, false, 4, s4}}, bib[1] = {{1, {2}, false, false, 2, b2}};
    weight_layer wl[3] = {{"ipt", 1, ipb}, {"sc", 1, scb}, {"bi", 1, bib}};
    size_t len;
    uint8_t *bin = make_caffemodel(wl, 3, false, &len);
    calq_model *m = NULL;
    calq_error err;
    EXPECT(load(proto, bin, len, &m, &err) == CALQ_OK);
    free(bin);
    if (!m) {
        fprintf(stderr, "%s\n", err.message);
        return;
    }
    float x[4] = {1, 3, 5, 7}, v[4] = {1, -2, 3, -4}, y[8];
    calq_tensor in[2] = {tensor(x, 4, 2, 1, 1, 2), tensor(v, 3, 1, 2, 2, 0)};
    /* x rows (1, 3), (5, 7) times W [2x3] = [[1, 0, -1], [2, 1, 0]] */
    static const float ipt[] = {7, 3, -1, 19, 7, -5};
    /* one channel: mean 4, variance (9 + 1 + 1 + 9) / 4 = 5 */
    float r5 = 1 / sqrtf(5);
    float bs[4] = {-3 * r5, -1 * r5, 1 * r5, 3 * r5};
    static const float sc[] = {1, -4, 9, -16}, bi[] = {11, 18, 13, 16};
    static const float h0[] = {1, -2, 1, -2}, h1[] = {3, -4, 3, -4};
    expect_values(y, run(m, in, 2, "ipt", y, 8, NULL), ipt, 6, 1e-6f, "InnerProduct transpose");
    expect_values(y, run(m, in, 2, "bs", y, 8, NULL), bs, 4, 1e-6f, "BatchNorm batch statistics");
    expect_values(y, run(m, in, 2, "sc", y, 8, NULL), sc, 4, 0, "Scale num_axes 2");
    expect_values(y, run(m, in, 2, "bi", y, 8, NULL), bi, 4, 0, "Bias axis -1");
    expect_values(y, run(m, in, 2, "h0", y, 8, NULL), h0, 4, 0, "Concat concat_dim 2, Slice slice_dim 1 (h0)");
    expect_values(y, run(m, in, 2, "h1", y, 8, NULL), h1, 4, 0, "Concat concat_dim 2, Slice slice_dim 1 (h1)");
    calq_model_free(m);
}

/* Repeated floats may be written unpacked (one tag per value): protobuf parsers accept both
 * encodings whatever the schema says. Hand-encoded: layer { name: "sc" blobs { shape { dim: 2 }
 * data: 2 data: -3 } } with `data` as two fixed32 fields. */
static void test_unpacked_blob(void)
{
    static const uint8_t bin[] = {0xa2, 0x06, 0x15,              /* layer (field 100), 21 bytes */
                                  0x0a, 0x02, 's',  'c',         /* name */
                                  0x3a, 0x0f,                    /* blobs (field 7), 15 bytes */
                                  0x3a, 0x03, 0x0a, 0x01, 0x02,  /* shape { dim: [2] } */
                                  0x2d, 0x00, 0x00, 0x00, 0x40,  /* data: 2.0f (one fixed32) */
                                  0x2d, 0x00, 0x00, 0x40, 0xc0}; /* data: -3.0f */
    const char *proto = "input: 'x' input_shape { dim: 1 dim: 2 }\n"
                        "layer { name: 'sc' type: 'Scale' bottom: 'x' top: 'y' }\n";
    calq_model *m = NULL;
    calq_error err;
    EXPECT(load(proto, bin, sizeof bin, &m, &err) == CALQ_OK);
    if (!m) {
        fprintf(stderr, "%s\n", err.message);
        return;
    }
    float x[2] = {1.5f, 2}, y[2];
    calq_tensor in = tensor(x, 2, 1, 2, 0, 0);
    static const float want[] = {3, -6};
    expect_values(y, run(m, &in, 1, "y", y, 2, NULL), want, 2, 0, "Scale with unpacked blob data");
    calq_model_free(m);
}

static void test_errors(void)
{
    calq_model *m = NULL;
    calq_error err;
    /* Every unknown type at once, with its layers. */
    const char *unknown = "input: 'x' input_shape { dim: 1 dim: 3 }\n"
                          "layer { name: 'f1' type: 'Foo' bottom: 'x' top: 'a' }\n"
                          "layer { name: 'ok' type: 'ReLU' bottom: 'a' top: 'a' }\n"
                          "layer { name: 'b1' type: 'Bar' bottom: 'a' top: 'b' }\n"
                          "layer { name: 'f2' type: 'Foo' bottom: 'b' top: 'c' }\n"
                          "layer { name: 't' type: 'Bar' bottom: 'c' top: 'd' include { phase: TRAIN } }\n";
    const char *n1[] = {"2 layer types", "Foo (layers: f1 f2)", "Bar (layers: b1)", NULL};
    expect_error(load(unknown, NULL, 0, &m, &err), CALQ_ERR_UNSUPPORTED, &err, n1);

    /* A layer that needs weights the caffemodel lacks, or has in the wrong number or size. */
    const char *conv = "input: 'x' input_shape { dim: 1 dim: 3 dim: 4 dim: 4 }\n"
                       "layer { name: 'conv1' type: 'Convolution' bottom: 'x' top: 'y'\n"
                       "        convolution_param { num_output: 2 kernel_size: 3 } }\n";
    static const float w[54] = {0}, b[2] = {0};
    blob_spec other[1] = {{1, {2}, false, false, 2, b}};
    weight_layer wl_other[1] = {{"conv9", 1, other}};
    size_t len;
    uint8_t *bin = make_caffemodel(wl_other, 1, false, &len);
    const char *n2[] = {"conv1", "needs 2 learned blobs (weights, bias)", "no layer named 'conv1'", NULL};
    expect_error(load(conv, bin, len, &m, &err), CALQ_ERR_BAD_FORMAT, &err, n2);
    EXPECT(strcmp(err.layer, "conv1") == 0);
    free(bin);
    const char *n2b[] = {"needs 2 learned blobs", "no caffemodel was given", NULL};
    expect_error(load(conv, NULL, 0, &m, &err), CALQ_ERR_BAD_FORMAT, &err, n2b);
    weight_layer wl_one[1] = {{"conv1", 1, other}};
    bin = make_caffemodel(wl_one, 1, false, &len);
    const char *n3[] = {"has 1 learned blob", "expects 2 (weights, bias)", NULL};
    expect_error(load(conv, bin, len, &m, &err), CALQ_ERR_BAD_FORMAT, &err, n3);
    free(bin);
    blob_spec short_w[2] = {{4, {2, 2, 3, 3}, false, false, 36, w}, {1, {2}, false, false, 2, b}};
    weight_layer wl_short[1] = {{"conv1", 2, short_w}};
    bin = make_caffemodel(wl_short, 1, false, &len);
    const char *n4[] = {"blob 0 (weights) holds 36 values", "= 54 for the 3 input channels", NULL};
    expect_error(load(conv, bin, len, &m, &err), CALQ_ERR_BAD_FORMAT, &err, n4);
    free(bin);
    blob_spec bad_b[2] = {{4, {2, 3, 3, 3}, false, false, 54, w}, {1, {1}, false, false, 1, b}};
    weight_layer wl_bad_b[1] = {{"conv1", 2, bad_b}};
    bin = make_caffemodel(wl_bad_b, 1, false, &len);
    const char *n5[] = {"blob 1 (bias) holds 1 values", NULL};
    expect_error(load(conv, bin, len, &m, &err), CALQ_ERR_BAD_FORMAT, &err, n5);

    /* A truncated caffemodel. */
    blob_spec good[2] = {{4, {2, 3, 3, 3}, false, false, 54, w}, {1, {2}, false, false, 2, b}};
    weight_layer wl_good[1] = {{"conv1", 2, good}};
    free(bin);
    bin = make_caffemodel(wl_good, 1, false, &len);
    EXPECT(load(conv, bin, len, &m, &err) == CALQ_OK);
    calq_model_free(m);
    const char *n6[] = {"test.caffemodel", "malformed or truncated", NULL};
    expect_error(load(conv, bin, len - 7, &m, &err), CALQ_ERR_BAD_FORMAT, &err, n6);
    free(bin);

    /* A blob read by a layer but produced by nothing, or only by a skipped training layer. */
    const char *dangling = "input: 'x' input_shape { dim: 1 dim: 3 }\n"
                           "layer { name: 'r' type: 'ReLU' bottom: 'nope' top: 'y' }\n";
    const char *n7[] = {"layer 'r' reads blob 'nope'", NULL};
    expect_error(load(dangling, NULL, 0, &m, &err), CALQ_ERR_BAD_FORMAT, &err, n7);
    const char *from_loss = "input: 'x' input_shape { dim: 1 dim: 3 }\n"
                            "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'x' bottom: 'x' top: 'l' }\n"
                            "layer { name: 'r' type: 'ReLU' bottom: 'l' top: 'y' }\n";
    const char *n8[] = {"only layer 'loss' produces", NULL};
    expect_error(load(from_loss, NULL, 0, &m, &err), CALQ_ERR_UNSUPPORTED, &err, n8);
    /* A prototxt syntax error keeps its line and column. */
    const char *broken = "input: 'x'\nlayer { name: 'r' type: 'ReLU' bottom: 'x' top: 'y' \n";
    calq_status s = load(broken, NULL, 0, &m, &err);
    EXPECT(s != CALQ_OK && strstr(err.message, "test.prototxt:"));
}

/* Issue 14: every blob's declared shape must hold its values and fit the layer's parameters;
 * before, only the count was checked, so a conv1 blob claiming 100000 x 10000 x 5 x 5 with the
 * values the layer needs ran and its shape was copied into saved caffemodels. */
static void test_blob_shapes(void)
{
    calq_model *m = NULL;
    calq_error err;
    size_t len;
    uint8_t *bin;
    static const float w[54] = {0}, b[4] = {0};
    const char *conv = "input: 'x' input_shape { dim: 1 dim: 3 dim: 4 dim: 4 }\n"
                       "layer { name: 'conv1' type: 'Convolution' bottom: 'x' top: 'y'\n"
                       "        convolution_param { num_output: 2 kernel_size: 3 } }\n";
    struct {
        blob_spec blobs[2];
        calq_status want;
        const char *needles[3];
    } cases[] = {
        /* the example: a huge declared shape over the right number of values */
        {{{4, {100000, 10000, 3, 3}, false, false, 54, w}, {1, {2}, false, false, 2, b}},
         CALQ_ERR_BAD_FORMAT,
         {"layer 'conv1'", "blob 0 (weight) declares shape 100000x10000x3x3 but holds 54 values", NULL}},
        /* the right count in another layout: input and output channels swapped */
        {{{4, {3, 2, 3, 3}, false, false, 54, w}, {1, {2}, false, false, 2, b}},
         CALQ_ERR_BAD_FORMAT,
         {"blob 0 (weight) has shape 3x2x3x3; the prototxt's parameters need 2x3x3x3", NULL}},
        {{{4, {2, 3, 3, 3}, false, false, 54, w}, {2, {1, 3}, false, false, 2, b}},
         CALQ_ERR_BAD_FORMAT,
         {"blob 1 (bias) declares shape 1x3 but holds 2 values", NULL}},
        {{{4, {2, 3, -3, -3}, false, false, 54, w}, {1, {2}, false, false, 2, b}},
         CALQ_ERR_BAD_FORMAT,
         {"declares shape 2x3x-3x-3 (a negative or overflowing size)", NULL}},
        {{{9, {1, 1, 1, 1, 1, 2, 3, 3, 3}, false, false, 54, w}, {1, {2}, false, false, 2, b}},
         CALQ_ERR_BAD_FORMAT,
         {"blob 0 (weight) declares 9 axes; calq supports up to 8", NULL}},
        /* what Caffe itself accepts: legacy 4-D fields, 1s in front */
        {{{0, {2, 3, 3, 3}, true, false, 54, w}, {0, {1, 1, 1, 2}, true, false, 2, b}}, CALQ_OK, {NULL}},
        {{{0, {2, 3, 3, 3}, true, false, 54, w}, {0, {1, 1, 2, 1}, true, false, 2, b}}, CALQ_OK, {NULL}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        weight_layer wl[1] = {{"conv1", 2, cases[k].blobs}};
        bin = make_caffemodel(wl, 1, false, &len);
        calq_status s = load(conv, bin, len, &m, &err);
        if (cases[k].want == CALQ_OK) {
            EXPECT_STATUS(s, CALQ_OK, &err, NULL);
            calq_model_free(m);
        } else {
            expect_error(s, cases[k].want, &err, cases[k].needles);
        }
        m = NULL;
        free(bin);
    }
    /* InnerProduct: num_output x inputs, or inputs x num_output with transpose */
    const char *ip = "input: 'x' input_shape { dim: 1 dim: 3 }\n"
                     "layer { name: 'fc' type: 'InnerProduct' bottom: 'x' top: 'y'\n"
                     "        inner_product_param { num_output: 2 bias_term: false } }\n";
    blob_spec ipw[1] = {{2, {3, 2}, false, false, 6, w}};
    weight_layer wl_ip[1] = {{"fc", 1, ipw}};
    bin = make_caffemodel(wl_ip, 1, false, &len);
    const char *n_ip[] = {"layer 'fc'", "has shape 3x2; the prototxt's parameters need 2x3", NULL};
    expect_error(load(ip, bin, len, &m, &err), CALQ_ERR_BAD_FORMAT, &err, n_ip);
    free(bin);
    /* BatchNorm: mean and variance per channel, one factor */
    const char *bn = "input: 'x' input_shape { dim: 1 dim: 4 dim: 1 dim: 1 }\n"
                     "layer { name: 'bn' type: 'BatchNorm' bottom: 'x' top: 'y' }\n";
    blob_spec bnb[3] = {{2, {2, 2}, false, false, 4, w}, {1, {4}, false, false, 4, w}, {1, {1}, false, false, 1, b}};
    weight_layer wl_bn[1] = {{"bn", 3, bnb}};
    bin = make_caffemodel(wl_bn, 1, false, &len);
    const char *n_bn[] = {"layer 'bn'", "blob 0 (mean) has shape 2x2; the prototxt's parameters need 4 ", NULL};
    expect_error(load(bn, bin, len, &m, &err), CALQ_ERR_BAD_FORMAT, &err, n_bn);
    free(bin);
    /* PReLU slopes stored as C x 1 x 1 and a Scale as 1 x C: the same layout, accepted */
    const char *pr = "input: 'x' input_shape { dim: 1 dim: 4 dim: 2 dim: 2 }\n"
                     "layer { name: 'pr' type: 'PReLU' bottom: 'x' top: 'x' }\n"
                     "layer { name: 'sc' type: 'Scale' bottom: 'x' top: 'y' }\n";
    blob_spec prb[1] = {{3, {4, 1, 1}, false, false, 4, w}}, scb[1] = {{2, {1, 4}, false, false, 4, w}};
    weight_layer wl_pr[2] = {{"pr", 1, prb}, {"sc", 1, scb}};
    bin = make_caffemodel(wl_pr, 2, false, &len);
    EXPECT_STATUS(load(pr, bin, len, &m, &err), CALQ_OK, &err, NULL);
    calq_model_free(m);
    m = NULL;
    free(bin);
    /* ... but not 2 x 2 */
    blob_spec prb2[1] = {{2, {2, 2}, false, false, 4, w}};
    weight_layer wl_pr2[2] = {{"pr", 1, prb2}, {"sc", 1, scb}};
    bin = make_caffemodel(wl_pr2, 2, false, &len);
    const char *n_pr[] = {"layer 'pr'", "blob 0 (slope) has shape 2x2; the prototxt's parameters need 4x1x1", NULL};
    expect_error(load(pr, bin, len, &m, &err), CALQ_ERR_BAD_FORMAT, &err, n_pr);
    free(bin);
    /* a layer type without learned parameters must get none */
    const char *relu = "input: 'x' input_shape { dim: 1 dim: 4 }\n"
                       "layer { name: 'r' type: 'ReLU' bottom: 'x' top: 'y' }\n";
    weight_layer wl_r[1] = {{"r", 1, ipw}};
    bin = make_caffemodel(wl_r, 1, false, &len);
    const char *n_r[] = {"layer 'r' (ReLU)", "gives this layer 1 learned blob, but a ReLU layer has no learned", NULL};
    expect_error(load(relu, bin, len, &m, &err), CALQ_ERR_BAD_FORMAT, &err, n_r);
    free(bin);
}

/* The public file API, a Data layer (its top becomes an input, the label is dropped) and the
 * reshaping of Caffe inputs to any size. */
static void test_files_and_inputs(void)
{
    char dir[] = "/tmp/calq_caffe_XXXXXX";
    if (!mkdtemp(dir)) return;
    char proto_path[512], model_path[512];
    snprintf(proto_path, sizeof proto_path, "%s/net.prototxt", dir);
    snprintf(model_path, sizeof model_path, "%s/net.caffemodel", dir);
    FILE *fp = fopen(proto_path, "w");
    fputs("layer { name: 'data' type: 'Data' top: 'data' top: 'label' include { phase: TEST } }\n"
          "layer { name: 'data' type: 'Data' top: 'data' top: 'label' include { phase: TRAIN } }\n"
          "layer { name: 'conv' type: 'Convolution' bottom: 'data' top: 'conv'\n"
          "        convolution_param { num_output: 1 kernel_size: 1 } }\n"
          "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'conv' bottom: 'label' top: 'loss' }\n",
          fp);
    fclose(fp);
    static const float w[] = {2}, b[] = {1};
    blob_spec cb[2] = {{4, {1, 1, 1, 1}, false, false, 1, w}, {1, {1}, false, false, 1, b}};
    weight_layer wl[1] = {{"conv", 2, cb}};
    size_t len;
    uint8_t *bin = make_caffemodel(wl, 1, false, &len);
    fp = fopen(model_path, "wb");
    fwrite(bin, 1, len, fp);
    fclose(fp);
    free(bin);
    calq_model *m = NULL;
    calq_error err = {0};
    EXPECT(calq_model_load_caffe(proto_path, model_path, &m, &err) == CALQ_OK);
    if (m) {
        EXPECT(calq_model_num_inputs(m) == 1 && calq_model_num_outputs(m) == 1);
        calq_value_info info;
        calq_model_input_info(m, 0, &info);
        EXPECT(strcmp(info.name, "data") == 0 && info.ndim == 4);
        int64_t dims[4] = {2, 1, 3, 5};
        EXPECT(calq_model_set_input_shape(m, "data", dims, 4, &err) == CALQ_OK);
        float x[30], y[30], want[30];
        for (int i = 0; i < 30; i++) {
            x[i] = (float)i - 7;
            want[i] = 2 * x[i] + 1;
        }
        calq_tensor in = tensor(x, 4, 2, 1, 3, 5);
        expect_values(y, run(m, &in, 1, "conv", y, 30, NULL), want, 30, 0, "Data layer top fed as input");
        /* Caffe inputs reshape freely: even the channel count may change (then the weights no
         * longer fit, which the run reports). */
        int64_t other[4] = {1, 1, 7, 7};
        EXPECT(calq_model_set_input_shape(m, "data", other, 4, &err) == CALQ_OK);
        calq_model_free(m);
    } else {
        fprintf(stderr, "%s\n", err.message);
    }
    EXPECT(calq_model_load_caffe(proto_path, "/nonexistent/x.caffemodel", &m, &err) != CALQ_OK);
    unlink(proto_path);
    unlink(model_path);
    rmdir(dir);
}

int main(void)
{
    test_batchnorm_scale();
    test_eltwise();
    test_pooling();
    test_lrn();
    test_v1_legacy();
    test_shape_layers();
    test_elementwise_layers();
    test_layer_options();
    test_unpacked_blob();
    test_errors();
    test_blob_shapes();
    test_files_and_inputs();
    if (failures) {
        fprintf(stderr, "test_caffe: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_caffe: all passed\n");
    return 0;
}
