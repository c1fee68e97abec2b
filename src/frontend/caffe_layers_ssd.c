/* Caffe SSD's layers: PriorBox and DetectionOutput become calq's internal operators of the same
 * names (exec/kernels/ssd.c, domain calq), with the prototxt parameters as attributes; Normalize
 * (SSD's L2 normalisation, conv4_3_norm in VGG-SSD) is ONNX arithmetic. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "frontend/caffe.h"
#include "graph/passes.h"

#define MAX_LIST 64

/* Node `ni` of an internal operator (domain calq: no file names it). */
static calq_status make_internal(calq_caffe_ctx *c, int ni)
{
    char *d = malloc(sizeof CALQ_DOMAIN_INTERNAL);
    if (!d) return calq__caffe_oom(c);
    memcpy(d, CALQ_DOMAIN_INTERNAL, sizeof CALQ_DOMAIN_INTERNAL);
    free(c->g->nodes[ni].domain);
    c->g->nodes[ni].domain = d;
    return CALQ_OK;
}

/* A repeated float field into v[0..*n). */
static calq_status float_list(calq_caffe_ctx *c, const calq_caffe_layer *L, const calq_tp_node *p, const char *field,
                              float *v, int *n)
{
    *n = calq__caffe_count(p, field);
    if (*n > MAX_LIST)
        return calq__caffe_fail(c, L, CALQ_ERR_BAD_FORMAT, "%d %s values; calq takes up to %d", *n, field, MAX_LIST);
    for (int i = 0; i < *n; i++) CALQ_TRY(calq__caffe_get_float_at(c, p, field, i, &v[i]));
    return CALQ_OK;
}

/* ---- PriorBox -------------------------------------------------------------------------------- */

calq_status calq__caffe_map_prior_box(calq_caffe_ctx *c, calq_caffe_layer *L)
{
    CALQ_TRY(calq__caffe_need_io(c, L, 1, 2, 1, 1));
    const calq_tp_node *p = calq__caffe_param(L, "prior_box_param");
    float mins[MAX_LIST], maxs[MAX_LIST], ars[MAX_LIST], var[MAX_LIST], ar[2 * MAX_LIST + 1];
    int n_min = 0, n_max = 0, n_ars = 0, n_var = 0, n_ar = 0;
    CALQ_TRY(float_list(c, L, p, "min_size", mins, &n_min));
    CALQ_TRY(float_list(c, L, p, "max_size", maxs, &n_max));
    CALQ_TRY(float_list(c, L, p, "aspect_ratio", ars, &n_ars));
    CALQ_TRY(float_list(c, L, p, "variance", var, &n_var));
    if (n_min < 1) return calq__caffe_fail(c, L, CALQ_ERR_BAD_FORMAT, "prior_box_param needs a min_size");
    if (n_max && n_max != n_min)
        return calq__caffe_fail(c, L, CALQ_ERR_BAD_FORMAT, "%d max_size values for %d min_size values", n_max, n_min);
    for (int i = 0; i < n_min; i++)
        if (!(mins[i] > 0) || (n_max && !(maxs[i] > mins[i])))
            return calq__caffe_fail(c, L, CALQ_ERR_BAD_FORMAT, "min_size %g must be positive and below max_size",
                                    mins[i]);
    if (n_var == 0) var[n_var++] = 0.1f; /* Caffe's default */
    if (n_var != 1 && n_var != 4)
        return calq__caffe_fail(c, L, CALQ_ERR_BAD_FORMAT, "variance takes 1 or 4 values, not %d", n_var);
    bool flip, clip;
    CALQ_TRY(calq__caffe_get_bool(c, p, "flip", true, &flip));
    CALQ_TRY(calq__caffe_get_bool(c, p, "clip", false, &clip));
    /* The ratios: 1 first, then each new one (and 1/ratio with flip), skipping repeats as Caffe. */
    ar[n_ar++] = 1.0f;
    for (int i = 0; i < n_ars; i++) {
        bool seen = false;
        for (int k = 0; k < n_ar && !seen; k++) seen = fabsf(ars[i] - ar[k]) < 1e-6f;
        if (seen) continue;
        if (!(ars[i] > 0))
            return calq__caffe_fail(c, L, CALQ_ERR_BAD_FORMAT, "aspect_ratio %g is not positive", ars[i]);
        ar[n_ar++] = ars[i];
        if (flip) ar[n_ar++] = 1.0f / ars[i];
    }
    int64_t img = 0, img_h = 0, img_w = 0;
    float step = 0, step_h = 0, step_w = 0, offset = 0.5f;
    CALQ_TRY(calq__caffe_get_int(c, p, "img_size", 0, &img));
    CALQ_TRY(calq__caffe_get_int(c, p, "img_h", img, &img_h));
    CALQ_TRY(calq__caffe_get_int(c, p, "img_w", img, &img_w));
    CALQ_TRY(calq__caffe_get_float(c, p, "step", 0.0f, &step));
    CALQ_TRY(calq__caffe_get_float(c, p, "step_h", step, &step_h));
    CALQ_TRY(calq__caffe_get_float(c, p, "step_w", step, &step_w));
    CALQ_TRY(calq__caffe_get_float(c, p, "offset", 0.5f, &offset));
    if (img_h < 0 || img_w < 0 || step_h < 0 || step_w < 0)
        return calq__caffe_fail(c, L, CALQ_ERR_BAD_FORMAT, "img_size / step values must not be negative");
    if ((!img_h || !img_w) && L->n_bottom < 2)
        return calq__caffe_fail(c, L, CALQ_ERR_BAD_FORMAT,
                                "without img_size the image size comes from bottom 1 (the data blob)");
    int y = calq__caffe_top(c, L, 0);
    int ni = y < 0 ? -1 : calq__caffe_node(c, L, "PriorBox", NULL, true, L->bottom, L->n_bottom, &y, 1);
    if (ni < 0) return c->status;
    CALQ_TRY(make_internal(c, ni));
    CALQ_TRY(calq__caffe_attr_floats(c, ni, "min_sizes", mins, n_min));
    if (n_max) CALQ_TRY(calq__caffe_attr_floats(c, ni, "max_sizes", maxs, n_max));
    CALQ_TRY(calq__caffe_attr_floats(c, ni, "aspect_ratios", ar, n_ar));
    CALQ_TRY(calq__caffe_attr_floats(c, ni, "variances", var, n_var));
    CALQ_TRY(calq__caffe_attr_int(c, ni, "clip", clip));
    CALQ_TRY(calq__caffe_attr_int(c, ni, "img_h", img_h));
    CALQ_TRY(calq__caffe_attr_int(c, ni, "img_w", img_w));
    CALQ_TRY(calq__caffe_attr_float(c, ni, "step_h", step_h));
    CALQ_TRY(calq__caffe_attr_float(c, ni, "step_w", step_w));
    CALQ_TRY(calq__caffe_attr_float(c, ni, "offset", offset));
    const calq_caffe_shape fs = calq__caffe_shape(c, L->bottom[0]);
    calq_caffe_shape ys = {.ndim = 3, .dims = {1, 2, -1}};
    int64_t per = calq__prior_boxes(n_min, n_max, n_ar);
    if (fs.ndim == 4 && fs.dims[2] > 0 && fs.dims[3] > 0) ys.dims[2] = fs.dims[2] * fs.dims[3] * per * 4;
    calq__caffe_set_shape(c, y, &ys);
    return CALQ_OK;
}

/* ---- DetectionOutput ------------------------------------------------------------------------- */

calq_status calq__caffe_map_detection_output(calq_caffe_ctx *c, calq_caffe_layer *L)
{
    CALQ_TRY(calq__caffe_need_io(c, L, 3, 3, 1, 1));
    const calq_tp_node *p = calq__caffe_param(L, "detection_output_param");
    const calq_tp_node *nms = p ? calq_tp_find(p, "nms_param") : NULL;
    static const char *const codes[] = {NULL, "CORNER", "CENTER_SIZE", "CORNER_SIZE"};
    int64_t num_classes = 0, background = 0, top_k = -1, keep_top_k = -1;
    bool share = true, var_in_target = false, clip = false;
    float nms_th = 0.3f, conf_th = 0.0f, eta = 1.0f;
    int code = 1;
    CALQ_TRY(calq__caffe_get_int(c, p, "num_classes", 0, &num_classes));
    CALQ_TRY(calq__caffe_get_bool(c, p, "share_location", true, &share));
    CALQ_TRY(calq__caffe_get_int(c, p, "background_label_id", 0, &background));
    CALQ_TRY(calq__caffe_get_enum(c, p, "code_type", codes, 4, 1, &code));
    CALQ_TRY(calq__caffe_get_bool(c, p, "variance_encoded_in_target", false, &var_in_target));
    CALQ_TRY(calq__caffe_get_int(c, p, "keep_top_k", -1, &keep_top_k));
    CALQ_TRY(calq__caffe_get_float(c, p, "confidence_threshold", 0.0f, &conf_th));
    CALQ_TRY(calq__caffe_get_bool(c, p, "clip", false, &clip)); /* OpenCV's extension */
    CALQ_TRY(calq__caffe_get_float(c, nms, "nms_threshold", 0.3f, &nms_th));
    CALQ_TRY(calq__caffe_get_int(c, nms, "top_k", -1, &top_k));
    CALQ_TRY(calq__caffe_get_float(c, nms, "eta", 1.0f, &eta));
    if (num_classes < 1) return calq__caffe_fail(c, L, CALQ_ERR_BAD_FORMAT, "detection_output_param needs num_classes");
    if (!(nms_th > 0) || !(eta > 0 && eta <= 1))
        return calq__caffe_fail(c, L, CALQ_ERR_BAD_FORMAT, "nms_threshold must be positive and eta in (0, 1]");
    if (p && calq_tp_find(p, "save_output_param"))
        calq__log(CALQ_LOG_INFO, "calq: %s: save_output_param ignored (calq writes no detection files)", L->name);
    int y = calq__caffe_top(c, L, 0);
    int ni = y < 0 ? -1 : calq__caffe_node(c, L, "DetectionOutput", NULL, true, L->bottom, 3, &y, 1);
    if (ni < 0) return c->status;
    CALQ_TRY(make_internal(c, ni));
    CALQ_TRY(calq__caffe_attr_int(c, ni, "num_classes", num_classes));
    CALQ_TRY(calq__caffe_attr_int(c, ni, "share_location", share));
    CALQ_TRY(calq__caffe_attr_int(c, ni, "background_label_id", background));
    CALQ_TRY(calq__caffe_attr_int(c, ni, "code_type", code));
    CALQ_TRY(calq__caffe_attr_int(c, ni, "variance_encoded_in_target", var_in_target));
    CALQ_TRY(calq__caffe_attr_int(c, ni, "keep_top_k", keep_top_k));
    CALQ_TRY(calq__caffe_attr_int(c, ni, "top_k", top_k));
    CALQ_TRY(calq__caffe_attr_int(c, ni, "clip", clip));
    CALQ_TRY(calq__caffe_attr_float(c, ni, "confidence_threshold", conf_th));
    CALQ_TRY(calq__caffe_attr_float(c, ni, "nms_threshold", nms_th));
    CALQ_TRY(calq__caffe_attr_float(c, ni, "eta", eta));
    calq_caffe_shape ys = {.ndim = 4, .dims = {1, 1, -1, 7}};
    calq__caffe_set_shape(c, y, &ys);
    return CALQ_OK;
}

/* ---- Normalize --------------------------------------------------------------------------------- */

/* x / sqrt(sum(x^2) + eps) over the channels of each position (across_spatial false) or over
 * the whole sample (true, the default), times the learned scale: one per channel, or one for
 * all with channel_shared (the default). */
calq_status calq__caffe_map_normalize(calq_caffe_ctx *c, calq_caffe_layer *L)
{
    CALQ_TRY(calq__caffe_need_io(c, L, 1, 1, 1, 1));
    const calq_tp_node *p = calq__caffe_param(L, "norm_param");
    bool across, shared;
    float eps;
    CALQ_TRY(calq__caffe_get_bool(c, p, "across_spatial", true, &across));
    CALQ_TRY(calq__caffe_get_bool(c, p, "channel_shared", true, &shared));
    CALQ_TRY(calq__caffe_get_float(c, p, "eps", 1e-10f, &eps));
    int r = calq__caffe_rank(c, L, 0);
    if (r < 0) return c->status;
    if (r < 2)
        return calq__caffe_fail(c, L, CALQ_ERR_UNSUPPORTED, "Normalize needs an N x C x ... bottom, not %d axes", r);
    const calq_caffe_shape xs = calq__caffe_shape(c, L->bottom[0]);
    CALQ_TRY(calq__caffe_need_blobs(c, L, 1, "scale"));
    int64_t C = xs.dims[1], n_scale = calq__caffe_blob_count(L, 0);
    if (shared ? n_scale != 1 : (n_scale < 1 || (C > 0 && n_scale != C)))
        return calq__caffe_fail_weights(c, L, "the scale blob holds %lld values; %s", (long long)n_scale,
                                        shared ? "channel_shared takes one" : "one per channel is needed");
    int x = L->bottom[0];
    int64_t axes[CALQ_MAX_DIMS], na = 0;
    for (int i = 1; i < r; i++)
        if (across || i == 1) axes[na++] = i;
    int sq = calq__caffe_unary(c, L, "ReduceSumSquare", "sumsq", x);
    if (sq < 0 || calq__caffe_attr_ints(c, c->g->n_nodes - 1, "axes", axes, (int)na) != CALQ_OK) return c->status;
    CALQ_TRY(calq__caffe_attr_int(c, c->g->n_nodes - 1, "keepdims", 1));
    int ve = calq__caffe_const_scalar(c, L, "eps", eps);
    int t = ve < 0 ? -1 : calq__caffe_binary(c, L, "Add", "sumsq_eps", sq, ve);
    t = t < 0 ? -1 : calq__caffe_unary(c, L, "Sqrt", "norm", t);
    t = t < 0 ? -1 : calq__caffe_binary(c, L, "Div", "normalized", x, t);
    int64_t sd[CALQ_MAX_DIMS];
    int snd = shared ? 0 : r - 1;
    for (int i = 0; i < snd; i++) sd[i] = i == 0 ? n_scale : 1; /* [C, 1, 1] broadcasts over N x C x H x W */
    int s = t < 0 ? -1 : calq__caffe_blob_const(c, L, 0, "scale", sd, snd, shared ? "one value" : "one per channel");
    int y = s < 0 ? -1 : calq__caffe_top(c, L, 0);
    int in[2] = {t, s};
    if (y < 0 || calq__caffe_node(c, L, "Mul", NULL, true, in, 2, &y, 1) < 0) return c->status;
    calq__caffe_copy_shape(c, y, x);
    return CALQ_OK;
}
