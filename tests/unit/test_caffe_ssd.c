/* Caffe SSD layers beyond tests/peers/caffe_ssd.sh (which holds them against OpenCV): PriorBox's
 * boxes for hand-computed parameters, DetectionOutput's threshold / NMS / keep_top_k on hand-made
 * inputs, and bad parameters failing at load with the layer named. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expect.h"
#include "frontend/caffe.h"

static calq_status load(const char *proto, calq_model **m, calq_error *err)
{
    memset(err, 0, sizeof *err);
    return calq__caffe_load_buffers(proto, strlen(proto), "ssd.prototxt", NULL, 0, NULL, m, err);
}

/* A 2x2 feature map on a 100x50 image: step (50, 25); min 20, max 80, ratio 4 without flip:
 * boxes 20x20, 40x40 (sqrt(20*80)), 40x10; clipped; 4 variances. */
static void prior_box(void)
{
    const char *net = "input: 'img' input_shape { dim: 1 dim: 3 dim: 50 dim: 100 }\n"
                      "input: 'feat' input_shape { dim: 1 dim: 8 dim: 2 dim: 2 }\n"
                      "layer { name: 'pb' type: 'PriorBox' bottom: 'feat' bottom: 'img' top: 'pb'\n"
                      "  prior_box_param { min_size: 20 max_size: 80 aspect_ratio: 4 aspect_ratio: 1 flip: false\n"
                      "    clip: true variance: 0.1 variance: 0.1 variance: 0.2 variance: 0.3 } }\n";
    calq_model *m = NULL;
    calq_error err;
    EXPECT_STATUS(load(net, &m, &err), CALQ_OK, &err, NULL);
    if (!m) return;
    calq_session *s = NULL;
    calq_tensor in[2] = {{.dtype = CALQ_DTYPE_FLOAT32, .ndim = 4, .dims = {1, 3, 50, 100}},
                         {.dtype = CALQ_DTYPE_FLOAT32, .ndim = 4, .dims = {1, 8, 2, 2}}};
    in[0].data = calloc(15000, sizeof(float));
    in[1].data = calloc(32, sizeof(float));
    EXPECT_STATUS(calq_session_create(m, NULL, &s, &err), CALQ_OK, &err, NULL);
    EXPECT_STATUS(calq_session_run(s, in, 2, &err), CALQ_OK, &err, NULL);
    const calq_tensor *o = NULL;
    if (s && calq_session_output(s, 0, &o) == CALQ_OK) {
        EXPECT(o->ndim == 3 && o->dims[1] == 2 && o->dims[2] == 2 * 2 * 3 * 4);
        const float *v = o->data;
        /* position (h 0, w 1): centre (75, 12.5) */
        const float want[12] = {65 / 100.f, 2.5f / 50,  85 / 100.f, 22.5f / 50, 55 / 100.f, 0 / 50.f,
                                95 / 100.f, 32.5f / 50, 55 / 100.f, 7.5f / 50,  95 / 100.f, 17.5f / 50};
        for (int i = 0; i < 12; i++) EXPECT(fabsf(v[12 + i] - want[i]) < 1e-6f);
        EXPECT(v[48] == 0.1f && v[50] == 0.2f && v[51] == 0.3f && v[48 + 47] == 0.3f);
    }
    calq_session_free(s);
    calq_model_free(m);
    free(in[0].data);
    free(in[1].data);
}

/* Three priors, two classes + background. Class 1: prior 1 overlaps prior 0 (IoU 0.90) and is
 * suppressed, prior 2's 0.1 is under the threshold; class 2 keeps priors 2 and 0. The three rows
 * come sorted by score across the classes. */
static void detection_output(void)
{
    const char *net =
        "input: 'loc' input_shape { dim: 1 dim: 12 }\n"
        "input: 'conf' input_shape { dim: 1 dim: 9 }\n"
        "input: 'prior' input_shape { dim: 1 dim: 2 dim: 12 }\n"
        "layer { name: 'det' type: 'DetectionOutput' bottom: 'loc' bottom: 'conf' bottom: 'prior'\n"
        "  top: 'det' detection_output_param { num_classes: 3 background_label_id: 0\n"
        "  nms_param { nms_threshold: 0.5 } code_type: CORNER keep_top_k: 3 confidence_threshold: 0.2 } }\n";
    calq_model *m = NULL;
    calq_error err;
    EXPECT_STATUS(load(net, &m, &err), CALQ_OK, &err, NULL);
    if (!m) return;
    float loc[12] = {0}, conf[9] = {0.1f, 0.9f, 0.3f, 0.2f, 0.8f, 0.0f, 0.5f, 0.1f, 0.4f};
    float prior[24] = {0.1f, 0.1f, 0.5f, 0.5f, 0.12f, 0.12f, 0.5f, 0.5f, 0.6f, 0.6f, 0.9f, 0.9f};
    for (int i = 12; i < 24; i++) prior[i] = 0.1f;
    calq_tensor in[3] = {{.dtype = CALQ_DTYPE_FLOAT32, .ndim = 2, .dims = {1, 12}, .data = loc},
                         {.dtype = CALQ_DTYPE_FLOAT32, .ndim = 2, .dims = {1, 9}, .data = conf},
                         {.dtype = CALQ_DTYPE_FLOAT32, .ndim = 3, .dims = {1, 2, 12}, .data = prior}};
    calq_session *s = NULL;
    EXPECT_STATUS(calq_session_create(m, NULL, &s, &err), CALQ_OK, &err, NULL);
    EXPECT_STATUS(calq_session_run(s, in, 3, &err), CALQ_OK, &err, NULL);
    const calq_tensor *o = NULL;
    if (s && calq_session_output(s, 0, &o) == CALQ_OK) {
        const float *d = o->data;
        EXPECT(o->dims[2] == 3);
        /* class 1: box 0 (0.9), box 1 suppressed; class 2: box 0 (0.3), box 2 (0.4); by score */
        EXPECT(d[1] == 1 && d[2] == 0.9f && d[3] == 0.1f);
        EXPECT(d[7 + 1] == 2 && d[7 + 2] == 0.4f && d[7 + 3] == 0.6f);
        EXPECT(d[14 + 1] == 2 && d[14 + 2] == 0.3f);
    }
    calq_session_free(s);
    calq_model_free(m);
}

static void bad_params(void)
{
    calq_model *m = NULL;
    calq_error err;
    const char *no_min =
        "input: 'f' input_shape { dim: 1 dim: 1 dim: 2 dim: 2 }\n"
        "layer { name: 'pb' type: 'PriorBox' bottom: 'f' top: 'pb' prior_box_param { img_size: 8 } }\n";
    EXPECT_STATUS(load(no_min, &m, &err), CALQ_ERR_BAD_FORMAT, &err,
                  "layer 'pb' (PriorBox): prior_box_param needs a min_size");
    calq_model_free(m);
    m = NULL;
    const char *no_img =
        "input: 'f' input_shape { dim: 1 dim: 1 dim: 2 dim: 2 }\n"
        "layer { name: 'pb' type: 'PriorBox' bottom: 'f' top: 'pb' prior_box_param { min_size: 4 } }\n";
    EXPECT_STATUS(load(no_img, &m, &err), CALQ_ERR_BAD_FORMAT, &err, "the image size comes from bottom 1");
    calq_model_free(m);
    m = NULL;
    const char *interp =
        "input: 'f' input_shape { dim: 1 dim: 1 dim: 2 dim: 2 }\n"
        "layer { name: 'up' type: 'Interp' bottom: 'f' top: 'up' interp_param { zoom_factor: 2 pad_beg: -1 } }\n";
    EXPECT_STATUS(load(interp, &m, &err), CALQ_ERR_UNSUPPORTED, &err, "pad_beg / pad_end");
    calq_model_free(m);
}

int main(void)
{
    prior_box();
    detection_output();
    bad_params();
    printf("test_caffe_ssd: %d failure(s)\n", failures);
    return failures != 0;
}
