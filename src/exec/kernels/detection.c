/* Detection post-processing and region pooling: NonMaxSuppression and RoiAlign. Reference
 * kernels, with onnxruntime's conventions where ONNX leaves room (stated at each rule). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernels/values.h"
#include "exec/op.h"

/* ---- NonMaxSuppression ---------------------------------------------------------------------- */

typedef struct nms_params {
    int64_t B, C, N;
    int64_t max_per_class;
    float iou_th, score_th;
    bool has_score_th, center;
} nms_params;

static calq_status scalar_input(calq_op_ctx *c, int i, const char *what, double *v, bool *given)
{
    const calq_tensor *t = i < c->n_in ? c->in[i] : NULL;
    *given = t != NULL && calq_tensor_numel(t) > 0;
    if (!*given) return CALQ_OK;
    if (calq_tensor_numel(t) != 1 || !calq__k_numeric(t->dtype))
        return calq__op_fail(c, CALQ_ERR_SHAPE, "%s (input %d) must hold one number", what, i);
    if (!t->data) return calq__op_fail(c, CALQ_ERR_INTERNAL, "%s (input %d) is not known", what, i);
    *v = calq__tensor_get_f64(t, 0);
    return CALQ_OK;
}

static calq_status nms_params_make(calq_op_ctx *c, nms_params *p)
{
    const calq_tensor *boxes = c->in[0], *scores = c->in[1];
    if (boxes->dtype != CALQ_DTYPE_FLOAT32 || scores->dtype != CALQ_DTYPE_FLOAT32)
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "boxes and scores must be float32");
    if (boxes->ndim != 3 || boxes->dims[2] != 4)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "boxes must be [batch, boxes, 4]");
    if (scores->ndim != 3 || scores->dims[0] != boxes->dims[0] || scores->dims[2] != boxes->dims[1])
        return calq__op_fail(c, CALQ_ERR_SHAPE,
                             "scores must be [batch, classes, boxes] with the boxes' batch and count");
    if (!boxes->data || !scores->data) return calq__op_fail(c, CALQ_ERR_INTERNAL, "boxes and scores are not known");
    p->B = boxes->dims[0];
    p->N = boxes->dims[1];
    p->C = scores->dims[1];
    double v = 0;
    bool given = false;
    CALQ_TRY(scalar_input(c, 2, "max_output_boxes_per_class", &v, &given));
    /* read as the int64 it is: torchvision's "no limit", INT64_MAX, is 2^63 as a double, which
     * converts back to INT64_MIN on x86 and kept no box at all */
    p->max_per_class = given ? calq__tensor_get_i64(c->in[2], 0) : 0;
    if (p->max_per_class < 0) p->max_per_class = 0;
    CALQ_TRY(scalar_input(c, 3, "iou_threshold", &v, &given));
    p->iou_th = given ? (float)v : 0.0f;
    if (p->iou_th < 0.0f || p->iou_th > 1.0f)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "iou_threshold %g is outside [0, 1]", p->iou_th);
    CALQ_TRY(scalar_input(c, 4, "score_threshold", &v, &p->has_score_th));
    p->score_th = (float)v;
    int64_t cpb = calq__attr_int(c->node, "center_point_box", 0);
    if (cpb != 0 && cpb != 1) return calq__op_fail(c, CALQ_ERR_SHAPE, "center_point_box must be 0 or 1");
    p->center = cpb == 1;
    return CALQ_OK;
}

/* std::min / std::max, as onnxruntime's suppression computes them: plain compares the compiler
 * inlines (libm's fminf / fmaxf are calls, a third of NonMaxSuppression's time on SSDlite). */
static inline float min_f(float a, float b)
{
    return b < a ? b : a;
}
static inline float max_f(float a, float b)
{
    return a < b ? b : a;
}

/* Box i as x1 <= x2, y1 <= y2 (corner boxes may come in either order). */
static void box_corners(const float *b, bool center, float *o)
{
    if (center) {
        o[0] = b[0] - b[2] / 2; /* [x_center, y_center, width, height] */
        o[1] = b[1] - b[3] / 2;
        o[2] = b[0] + b[2] / 2;
        o[3] = b[1] + b[3] / 2;
    } else {
        o[0] = min_f(b[1], b[3]); /* [y1, x1, y2, x2] */
        o[1] = min_f(b[0], b[2]);
        o[2] = max_f(b[1], b[3]);
        o[3] = max_f(b[0], b[2]);
    }
}

/* A box suppresses another when their IoU is above the threshold; boxes without area never do. */
static bool suppresses(const float *a, const float *b, float th)
{
    float iw = min_f(a[2], b[2]) - max_f(a[0], b[0]), ih = min_f(a[3], b[3]) - max_f(a[1], b[1]);
    if (iw <= 0 || ih <= 0) return false;
    float inter = iw * ih, ua = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter;
    if (ua <= 0) return false;
    return inter / ua > th;
}

typedef struct scored {
    float s;
    int64_t i;
} scored;

/* Higher score first, then the lower box index (onnxruntime's order). */
static int cmp_scored(const void *pa, const void *pb)
{
    const scored *a = pa, *b = pb;
    if (a->s != b->s) return a->s > b->s ? -1 : 1;
    return (a->i > b->i) - (a->i < b->i);
}

/* The selected [batch, class, box] triples: infer computes them (their count is the output
 * shape) and leaves them in c->state for run, so the suppression runs once per inference. */
typedef struct nms_result {
    int64_t n;
    int64_t *t; /* 3 * n (owner: this) */
} nms_result;

static void nms_result_free(void *state)
{
    nms_result *r = state;
    if (!r) return;
    free(r->t);
    free(r);
}

/* Runs the suppression into *r (r->t grown as needed). */
static calq_status nms_compute(calq_op_ctx *c, const nms_params *p, nms_result *r)
{
    const float *boxes = c->in[0]->data, *scores = c->in[1]->data;
    scored *cand = malloc(sizeof(scored) * (size_t)(p->N + 1));
    float *corners = malloc(sizeof(float) * 4 * (size_t)(p->N + 1));
    int64_t *kept = malloc(sizeof(int64_t) * (size_t)(p->N + 1));
    int64_t cap = 0;
    calq_status st = CALQ_OK;
    if (!cand || !corners || !kept) goto oom;
    r->n = 0;
    for (int64_t b = 0; b < p->B; b++) {
        for (int64_t i = 0; i < p->N; i++) box_corners(boxes + (b * p->N + i) * 4, p->center, corners + i * 4);
        for (int64_t cl = 0; cl < p->C && p->max_per_class > 0; cl++) {
            const float *s = scores + (b * p->C + cl) * p->N;
            int64_t nc = 0, nk = 0;
            for (int64_t i = 0; i < p->N; i++)
                if (!p->has_score_th || s[i] > p->score_th) cand[nc++] = (scored){s[i], i};
            qsort(cand, (size_t)nc, sizeof *cand, cmp_scored);
            for (int64_t k = 0; k < nc && nk < p->max_per_class; k++) {
                const float *bx = corners + cand[k].i * 4;
                bool drop = false;
                for (int64_t j = 0; j < nk && !drop; j++) drop = suppresses(corners + kept[j] * 4, bx, p->iou_th);
                if (drop) continue;
                kept[nk++] = cand[k].i;
                if (r->n == cap) {
                    int64_t *g = realloc(r->t, sizeof(int64_t) * 3 * (size_t)(cap = cap ? 2 * cap : 64));
                    if (!g) goto oom;
                    r->t = g;
                }
                r->t[r->n * 3] = b;
                r->t[r->n * 3 + 1] = cl;
                r->t[r->n * 3 + 2] = cand[k].i;
                r->n++;
            }
        }
    }
    goto out;
oom:
    st = calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory for %lld boxes", (long long)p->N);
out:
    free(cand);
    free(corners);
    free(kept);
    return st;
}

static calq_status nms_infer(calq_op_ctx *c)
{
    nms_params p = {0};
    CALQ_TRY(nms_params_make(c, &p));
    nms_result *r = calloc(1, sizeof *r);
    if (!r) return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory");
    calq_status st = nms_compute(c, &p, r);
    if (st != CALQ_OK) {
        nms_result_free(r);
        return st;
    }
    int64_t d[2] = {r->n, 3};
    calq__set_shape(c->out[0], CALQ_DTYPE_INT64, d, 2);
    nms_result_free(c->state); /* a stale result, if infer runs twice */
    c->state = r;
    return CALQ_OK;
}

static calq_status nms_run(calq_op_ctx *c)
{
    nms_result *r = c->state, own = {0};
    if (!r) { /* run without infer (not the executor's order): compute now */
        nms_params p = {0};
        CALQ_TRY(nms_params_make(c, &p));
        calq_status st = nms_compute(c, &p, &own);
        if (st != CALQ_OK) {
            free(own.t);
            return st;
        }
        r = &own;
    }
    calq_status st = CALQ_OK;
    if (c->out[0]->ndim != 2 || c->out[0]->dims[0] != r->n)
        st = calq__op_fail(c, CALQ_ERR_SHAPE, "the selected boxes changed between planning and the run");
    else if (r->n)
        memcpy(c->out[0]->data, r->t, sizeof(int64_t) * 3 * (size_t)r->n);
    if (r == &own)
        free(own.t);
    else
        nms_result_free(r);
    c->state = NULL;
    return st;
}

/* ---- RoiAlign ------------------------------------------------------------------------------- */

typedef struct roi_params {
    int64_t ph, pw, sampling;
    float scale;
    bool max_mode, half_pixel;
} roi_params;

static calq_status roi_params_make(calq_op_ctx *c, roi_params *p)
{
    const calq_tensor *x = c->in[0], *rois = c->in[1], *bi = c->in[2];
    if (!calq__dtype_is_float(x->dtype) || x->ndim != 4)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "X must be a float N x C x H x W tensor");
    if (rois->ndim != 2 || rois->dims[1] != 4 || !calq__dtype_is_float(rois->dtype))
        return calq__op_fail(c, CALQ_ERR_SHAPE, "rois must be a float [num_rois, 4] tensor");
    if (bi->ndim != 1 || bi->dims[0] != rois->dims[0] || !calq__dtype_is_int(bi->dtype))
        return calq__op_fail(c, CALQ_ERR_SHAPE, "batch_indices must be an integer [num_rois] tensor");
    p->ph = calq__attr_int(c->node, "output_height", 1);
    p->pw = calq__attr_int(c->node, "output_width", 1);
    p->sampling = calq__attr_int(c->node, "sampling_ratio", 0);
    p->scale = calq__attr_float(c->node, "spatial_scale", 1.0f);
    const char *mode = calq__attr_str(c->node, "mode", "avg");
    /* Opset 16 added the transformation mode, defaulting to the corrected half_pixel. */
    const char *ct =
        calq__attr_str(c->node, "coordinate_transformation_mode", c->opset >= 16 ? "half_pixel" : "output_half_pixel");
    if (strcmp(mode, "avg") != 0 && strcmp(mode, "max") != 0)
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "mode '%s' is not avg or max", mode);
    if (strcmp(ct, "half_pixel") != 0 && strcmp(ct, "output_half_pixel") != 0)
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "coordinate_transformation_mode '%s' is not supported", ct);
    if (p->ph <= 0 || p->pw <= 0 || p->sampling < 0 || p->ph > 65536 || p->pw > 65536)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "output size %lldx%lld or sampling_ratio %lld is invalid",
                             (long long)p->ph, (long long)p->pw, (long long)p->sampling);
    p->max_mode = mode[0] == 'm';
    p->half_pixel = ct[0] == 'h';
    return CALQ_OK;
}

static calq_status roi_infer(calq_op_ctx *c)
{
    roi_params p = {0};
    CALQ_TRY(roi_params_make(c, &p));
    int64_t d[4] = {c->in[1]->dims[0], c->in[0]->dims[1], p.ph, p.pw};
    calq__set_shape(c->out[0], c->in[0]->dtype, d, 4);
    return CALQ_OK;
}

/* Bilinear sample of plane v (H x W) at (y, x), as four weights and offsets; a sample more than
 * one pixel outside the plane contributes zero (onnxruntime's rule). */
static void bilinear(int64_t H, int64_t W, double y, double x, double *w, int64_t *o)
{
    if (y < -1.0 || y > (double)H || x < -1.0 || x > (double)W) {
        for (int k = 0; k < 4; k++) w[k] = 0.0, o[k] = 0;
        return;
    }
    if (y <= 0) y = 0;
    if (x <= 0) x = 0;
    int64_t y0 = (int64_t)y, x0 = (int64_t)x, y1, x1;
    if (y0 >= H - 1) {
        y0 = y1 = H - 1;
        y = (double)y0;
    } else {
        y1 = y0 + 1;
    }
    if (x0 >= W - 1) {
        x0 = x1 = W - 1;
        x = (double)x0;
    } else {
        x1 = x0 + 1;
    }
    double ly = y - (double)y0, lx = x - (double)x0, hy = 1 - ly, hx = 1 - lx;
    w[0] = hy * hx, w[1] = hy * lx, w[2] = ly * hx, w[3] = ly * lx;
    o[0] = y0 * W + x0, o[1] = y0 * W + x1, o[2] = y1 * W + x0, o[3] = y1 * W + x1;
}

static calq_status roi_run(calq_op_ctx *c)
{
    roi_params p = {0};
    CALQ_TRY(roi_params_make(c, &p));
    const calq_tensor *x = c->in[0], *rois = c->in[1], *bi = c->in[2];
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3], R = rois->dims[0];
    int64_t plane = H * W;
    double *v = malloc(sizeof(double) * (size_t)(plane + 1)), *y = malloc(sizeof(double) * (size_t)(p.ph * p.pw + 1));
    if (!v || !y) {
        free(v);
        free(y);
        return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory");
    }
    double off = p.half_pixel ? 0.5 : 0.0;
    calq_status st = CALQ_OK;
    for (int64_t r = 0; r < R && st == CALQ_OK; r++) {
        int64_t b = calq__tensor_get_i64(bi, r);
        if (b < 0 || b >= N) {
            st = calq__op_fail(c, CALQ_ERR_DATA, "batch_indices[%lld] = %lld is outside the batch of %lld",
                               (long long)r, (long long)b, (long long)N);
            break;
        }
        double x1 = calq__tensor_get_f64(rois, r * 4) * p.scale - off,
               y1 = calq__tensor_get_f64(rois, r * 4 + 1) * p.scale - off;
        double x2 = calq__tensor_get_f64(rois, r * 4 + 2) * p.scale - off,
               y2 = calq__tensor_get_f64(rois, r * 4 + 3) * p.scale - off;
        double rw = x2 - x1, rh = y2 - y1;
        if (!p.half_pixel) { /* the legacy mode forces a roi of at least one pixel */
            rw = fmax(rw, 1.0);
            rh = fmax(rh, 1.0);
        }
        double bh = rh / (double)p.ph, bw = rw / (double)p.pw;
        /* NaN, inf or 1e30 coordinates made the adaptive grid size a float-to-int overflow */
        if (!isfinite(x1) || !isfinite(y1) || !isfinite(x2) || !isfinite(y2)) {
            st = calq__op_fail(c, CALQ_ERR_DATA,
                               "roi %lld is (%g, %g, %g, %g) after spatial_scale %g: its coordinates must be finite",
                               (long long)r, x1 + off, y1 + off, x2 + off, y2 + off, p.scale);
            break;
        }
        double gh_f = p.sampling > 0 ? (double)p.sampling : ceil(rh / (double)p.ph);
        double gw_f = p.sampling > 0 ? (double)p.sampling : ceil(rw / (double)p.pw);
        if (!(gh_f >= 0 && gw_f >= 0 && gh_f <= 4096 && gw_f <= 4096)) {
            st = calq__op_fail(c, CALQ_ERR_DATA, "roi %lld needs a %gx%g sampling grid (calq takes 0 to 4096 per side)",
                               (long long)r, gh_f, gw_f);
            break;
        }
        int64_t gh = (int64_t)gh_f, gw = (int64_t)gw_f;
        double count = (double)(gh * gw > 1 ? gh * gw : 1);
        for (int64_t ch = 0; ch < C; ch++) {
            calq__k_load(x, (b * C + ch) * plane, 1, plane, v);
            for (int64_t py = 0; py < p.ph; py++)
                for (int64_t px = 0; px < p.pw; px++) {
                    double acc = 0.0;
                    bool first = true;
                    for (int64_t iy = 0; iy < gh; iy++) {
                        double sy = y1 + (double)py * bh + ((double)iy + 0.5) * bh / (double)gh;
                        for (int64_t ix = 0; ix < gw; ix++) {
                            double sx = x1 + (double)px * bw + ((double)ix + 0.5) * bw / (double)gw, w[4];
                            int64_t o[4];
                            bilinear(H, W, sy, sx, w, o);
                            if (p.max_mode) {
                                /* onnxruntime: the largest weighted corner, then the largest sample */
                                double m =
                                    fmax(fmax(w[0] * v[o[0]], w[1] * v[o[1]]), fmax(w[2] * v[o[2]], w[3] * v[o[3]]));
                                acc = first ? m : fmax(acc, m);
                                first = false;
                            } else {
                                acc += w[0] * v[o[0]] + w[1] * v[o[1]] + w[2] * v[o[2]] + w[3] * v[o[3]];
                            }
                        }
                    }
                    y[py * p.pw + px] = p.max_mode ? acc : acc / count;
                }
            calq__k_store(c->out[0], (r * C + ch) * p.ph * p.pw, 1, p.ph * p.pw, y);
        }
    }
    free(v);
    free(y);
    return st;
}

const calq_op_def calq__ops_detection[] = {
    {"NonMaxSuppression", 2, 5, 1, 1, 0x1fu, false, nms_infer, nms_run, NULL, NULL, nms_result_free, 0},
    {"RoiAlign", 3, 3, 1, 1, 0, false, roi_infer, roi_run, NULL, NULL, NULL, 0},
    {0},
};
