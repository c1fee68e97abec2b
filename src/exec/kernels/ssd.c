/* Caffe SSD's PriorBox and DetectionOutput as internal operators (domain calq), created by the
 * Caffe frontend (caffe_layers_ssd.c) with the layer's parameters as attributes. The rules are
 * Caffe SSD's, in OpenCV DNN's float arithmetic (the reference calq is checked against); where the
 * two differ, OpenCV's choice is taken and said so.
 *
 * PriorBox depends only on the shapes of its inputs (the feature map and the image), so the
 * planner folds it once per input size. DetectionOutput decodes the location predictions
 * against the priors, keeps per class the boxes above confidence_threshold (at most top_k,
 * then greedy NMS), keeps keep_top_k over all classes by score, and writes
 * [image, label, score, xmin, ymin, xmax, ymax] rows sorted by score; like OpenCV (not Caffe,
 * whose output length varies) the output is always [1, 1, N * keep_top_k, 7], the rows after
 * the last detection zero. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/op.h"
#include "graph/passes.h"

/* ---- PriorBox ------------------------------------------------------------------------------- */

typedef struct prior_params {
    int n_min, n_max, n_ar, n_var;
    const float *min, *max, *ar, *var; /* ar: the expanded list (1 first, flipped ratios added) */
    float step_w, step_h, offset;      /* step 0: image size / feature size */
    int64_t img_w, img_h;              /* 0: from input 1 */
    bool clip;
    int64_t H, W, num_priors;
} prior_params;

static calq_status prior_params_make(calq_op_ctx *c, prior_params *p)
{
    const calq_tensor *f = c->in[0], *img = c->n_in > 1 ? c->in[1] : NULL;
    memset(p, 0, sizeof *p);
    p->n_min = calq__attr_floats(c->node, "min_sizes", &p->min);
    p->n_max = calq__attr_floats(c->node, "max_sizes", &p->max);
    p->n_ar = calq__attr_floats(c->node, "aspect_ratios", &p->ar);
    p->n_var = calq__attr_floats(c->node, "variances", &p->var);
    /* -1: the attribute is absent */
    if (p->n_max < 0) p->n_max = 0;
    if (p->n_ar < 0) p->n_ar = 0;
    if (p->n_min < 1) return calq__op_fail(c, CALQ_ERR_SHAPE, "min_size is required");
    if (p->n_max > 0 && p->n_max != p->n_min)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "%d max_size values for %d min_size values", p->n_max, p->n_min);
    if (p->n_var != 1 && p->n_var != 4)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "variance takes 1 or 4 values, not %d", p->n_var);
    if (p->n_ar < 1) return calq__op_fail(c, CALQ_ERR_INTERNAL, "the aspect ratio list is empty");
    p->step_w = calq__attr_float(c->node, "step_w", 0.0f);
    p->step_h = calq__attr_float(c->node, "step_h", 0.0f);
    p->offset = calq__attr_float(c->node, "offset", 0.5f);
    p->img_w = calq__attr_int(c->node, "img_w", 0);
    p->img_h = calq__attr_int(c->node, "img_h", 0);
    p->clip = calq__attr_int(c->node, "clip", 0) != 0;
    if (f->ndim != 4) return calq__op_fail(c, CALQ_ERR_SHAPE, "the feature map must be N x C x H x W");
    p->H = f->dims[2];
    p->W = f->dims[3];
    if (!p->img_w || !p->img_h) {
        if (!img || img->ndim != 4)
            return calq__op_fail(c, CALQ_ERR_SHAPE,
                                 "the image size comes from bottom 1 (N x C x H x W), which is missing");
        if (!p->img_w) p->img_w = img->dims[3];
        if (!p->img_h) p->img_h = img->dims[2];
    }
    if (p->H <= 0 || p->W <= 0 || p->img_w <= 0 || p->img_h <= 0)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "empty feature map or image");
    p->num_priors = calq__prior_boxes(p->n_min, p->n_max, p->n_ar);
    if (p->H * p->W * p->num_priors > ((int64_t)1 << 28))
        return calq__op_fail(c, CALQ_ERR_SHAPE, "%lld priors are too many", (long long)(p->H * p->W * p->num_priors));
    return CALQ_OK;
}

static calq_status prior_infer(calq_op_ctx *c)
{
    prior_params p;
    CALQ_TRY(prior_params_make(c, &p));
    int64_t d[3] = {1, 2, p.H * p.W * p.num_priors * 4};
    calq__set_shape(c->out[0], CALQ_DTYPE_FLOAT32, d, 3);
    return CALQ_OK;
}

/* Width and height of box b (0 <= b < boxes per min_size) of min_size s, in calq__prior_boxes'
 * order: the min_size square, the sqrt(min * max) square with max_sizes, then one box per aspect
 * ratio other than the leading 1 (w = s * sqrt(ar), h = s / sqrt(ar)). Computed per box, with no
 * per-position array, so any count the parser accepts is written in full. */
static void prior_box_size(const prior_params *p, int s, int64_t b, float *bw, float *bh)
{
    if (b == 0) {
        *bw = *bh = p->min[s];
        return;
    }
    if (p->n_max > 0 && b == 1) {
        *bw = *bh = sqrtf(p->min[s] * p->max[s]);
        return;
    }
    float q = sqrtf(p->ar[b - (p->n_max > 0 ? 1 : 0)]);
    *bw = p->min[s] * q;
    *bh = p->min[s] / q;
}

/* Per position, per min_size, the boxes of prior_box_size; corners normalised by the image size,
 * then clipped to [0, 1] with clip. Channel 1 holds the variances. */
static calq_status prior_run(calq_op_ctx *c)
{
    prior_params p;
    CALQ_TRY(prior_params_make(c, &p));
    float *o = c->out[0]->data;
    const float step_w = p.step_w > 0 ? p.step_w : (float)p.img_w / (float)p.W;
    const float step_h = p.step_h > 0 ? p.step_h : (float)p.img_h / (float)p.H;
    const float iw = (float)p.img_w, ih = (float)p.img_h;
    const int64_t per_min = p.num_priors / p.n_min; /* calq__prior_boxes is n_min * per_min */
    int64_t k = 0, n = p.H * p.W * p.num_priors * 4;
    for (int64_t h = 0; h < p.H; h++)
        for (int64_t w = 0; w < p.W; w++) {
            float cx = ((float)w + p.offset) * step_w, cy = ((float)h + p.offset) * step_h;
            for (int s = 0; s < p.n_min; s++)
                for (int64_t b = 0; b < per_min; b++) {
                    float bw, bh;
                    prior_box_size(&p, s, b, &bw, &bh);
                    o[k++] = (cx - bw * 0.5f) / iw;
                    o[k++] = (cy - bh * 0.5f) / ih;
                    o[k++] = (cx + bw * 0.5f) / iw;
                    o[k++] = (cy + bh * 0.5f) / ih;
                }
        }
    if (p.clip)
        for (int64_t i = 0; i < n; i++) o[i] = o[i] < 0.0f ? 0.0f : o[i] > 1.0f ? 1.0f : o[i];
    for (int64_t i = 0; i < n; i++) o[n + i] = p.var[p.n_var == 1 ? 0 : i % 4];
    return CALQ_OK;
}

/* ---- DetectionOutput ------------------------------------------------------------------------ */

enum { CODE_CORNER = 1, CODE_CENTER_SIZE = 2, CODE_CORNER_SIZE = 3 };

typedef struct det_params {
    int64_t N, num_priors, num_classes, num_loc_classes, background, top_k, keep_top_k, code;
    float nms, conf, eta;
    bool share, var_in_target, clip;
} det_params;

static calq_status det_params_make(calq_op_ctx *c, det_params *p)
{
    const calq_tensor *loc = c->in[0], *conf = c->in[1], *pr = c->in[2];
    memset(p, 0, sizeof *p);
    p->num_classes = calq__attr_int(c->node, "num_classes", 0);
    p->share = calq__attr_int(c->node, "share_location", 1) != 0;
    p->background = calq__attr_int(c->node, "background_label_id", 0);
    p->top_k = calq__attr_int(c->node, "top_k", -1);
    p->keep_top_k = calq__attr_int(c->node, "keep_top_k", -1);
    p->code = calq__attr_int(c->node, "code_type", CODE_CORNER);
    p->nms = calq__attr_float(c->node, "nms_threshold", 0.3f);
    p->conf = calq__attr_float(c->node, "confidence_threshold", 0.0f);
    p->eta = calq__attr_float(c->node, "eta", 1.0f);
    p->var_in_target = calq__attr_int(c->node, "variance_encoded_in_target", 0) != 0;
    p->clip = calq__attr_int(c->node, "clip", 0) != 0;
    if (p->num_classes < 1 || p->num_classes > (1 << 20))
        return calq__op_fail(c, CALQ_ERR_SHAPE, "num_classes %lld is invalid", (long long)p->num_classes);
    if (p->code < CODE_CORNER || p->code > CODE_CORNER_SIZE)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "unknown code_type %lld", (long long)p->code);
    if (!(p->nms > 0.0f) || !(p->eta > 0.0f && p->eta <= 1.0f))
        return calq__op_fail(c, CALQ_ERR_SHAPE, "nms_threshold must be positive and eta in (0, 1]");
    p->num_loc_classes = p->share ? 1 : p->num_classes;
    if (loc->dtype != CALQ_DTYPE_FLOAT32 || conf->dtype != CALQ_DTYPE_FLOAT32 || pr->dtype != CALQ_DTYPE_FLOAT32)
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "the inputs must be float32");
    if (pr->ndim < 3 || pr->dims[1] != (p->var_in_target ? 1 : 2) || pr->dims[2] % 4)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "the priors must be [1, %d, num_priors * 4]", p->var_in_target ? 1 : 2);
    p->num_priors = pr->dims[2] / 4;
    p->N = loc->ndim ? loc->dims[0] : 0;
    int64_t nl = calq_tensor_numel(loc), nc = calq_tensor_numel(conf);
    if (p->N < 1 || nl != p->N * p->num_priors * p->num_loc_classes * 4 || nc != p->N * p->num_priors * p->num_classes)
        return calq__op_fail(c, CALQ_ERR_SHAPE,
                             "%lld location and %lld confidence values do not fit %lld images x %lld priors x %lld "
                             "classes",
                             (long long)nl, (long long)nc, (long long)p->N, (long long)p->num_priors,
                             (long long)p->num_classes);
    return CALQ_OK;
}

/* Rows of the output: keep_top_k per image (when keep_top_k is not set, every prior of every
 * class could be kept). */
static int64_t det_rows(const det_params *p)
{
    int64_t targets = p->num_classes - (p->background >= 0 && p->background < p->num_classes ? 1 : 0);
    int64_t per_class = p->top_k > 0 && p->top_k < p->num_priors ? p->top_k : p->num_priors;
    return p->N * (p->keep_top_k >= 0 ? p->keep_top_k : per_class * targets);
}

static calq_status det_infer(calq_op_ctx *c)
{
    det_params p;
    CALQ_TRY(det_params_make(c, &p));
    int64_t d[4] = {1, 1, det_rows(&p), 7};
    calq__set_shape(c->out[0], CALQ_DTYPE_FLOAT32, d, 4);
    return CALQ_OK;
}

typedef struct box {
    float x1, y1, x2, y2, size;
} box;

static float box_size(const box *b)
{
    return b->x2 < b->x1 || b->y2 < b->y1 ? 0.0f : (b->x2 - b->x1) * (b->y2 - b->y1);
}

static float overlap(const box *a, const box *b)
{
    box i = {fmaxf(a->x1, b->x1), fmaxf(a->y1, b->y1), fminf(a->x2, b->x2), fminf(a->y2, b->y2), 0};
    float is = box_size(&i);
    return is > 0 ? is / (a->size + b->size - is) : 0.0f;
}

/* Decodes location prediction l against prior pb with variances v (§ Caffe SSD's DecodeBBox). */
static box decode(const det_params *p, const float *pb, const float *v, const float *l)
{
    float vx = p->var_in_target ? 1.0f : v[0], vy = p->var_in_target ? 1.0f : v[1];
    float vw = p->var_in_target ? 1.0f : v[2], vh = p->var_in_target ? 1.0f : v[3];
    box b;
    float pw = pb[2] - pb[0], ph = pb[3] - pb[1];
    if (p->code == CODE_CORNER) {
        b = (box){pb[0] + vx * l[0], pb[1] + vy * l[1], pb[2] + vw * l[2], pb[3] + vh * l[3], 0};
    } else if (p->code == CODE_CORNER_SIZE) {
        b = (box){pb[0] + vx * l[0] * pw, pb[1] + vy * l[1] * ph, pb[2] + vw * l[2] * pw, pb[3] + vh * l[3] * ph, 0};
    } else {
        float pcx = pb[0] + pw * 0.5f, pcy = pb[1] + ph * 0.5f;
        float cx = vx * l[0] * pw + pcx, cy = vy * l[1] * ph + pcy;
        float w = expf(vw * l[2]) * pw, h = expf(vh * l[3]) * ph;
        b = (box){cx - w * 0.5f, cy - h * 0.5f, cx + w * 0.5f, cy + h * 0.5f, 0};
    }
    if (p->clip) {
        b.x1 = fmaxf(fminf(b.x1, 1.0f), 0.0f);
        b.y1 = fmaxf(fminf(b.y1, 1.0f), 0.0f);
        b.x2 = fmaxf(fminf(b.x2, 1.0f), 0.0f);
        b.y2 = fmaxf(fminf(b.y2, 1.0f), 0.0f);
    }
    b.size = box_size(&b);
    return b;
}

typedef struct cand {
    float score;
    int64_t label, idx;
} cand;

/* Higher score first; equal scores keep the order they were collected in (a stable sort, as
 * OpenCV's per-class candidate list; its later cross-class sort is not stable, where calq keeps
 * label then index order). */
static int cmp_cand(const void *pa, const void *pb)
{
    const cand *a = pa, *b = pb;
    if (a->score != b->score) return a->score > b->score ? -1 : 1;
    if (a->label != b->label) return a->label < b->label ? -1 : 1;
    return (a->idx > b->idx) - (a->idx < b->idx);
}

static calq_status det_run(calq_op_ctx *c)
{
    det_params p;
    CALQ_TRY(det_params_make(c, &p));
    const float *loc = c->in[0]->data, *conf = c->in[1]->data, *pr = c->in[2]->data;
    float *out = c->out[0]->data;
    int64_t rows = det_rows(&p), per_image = rows / p.N, P = p.num_priors, C = p.num_classes, L = p.num_loc_classes;
    memset(out, 0, sizeof(float) * (size_t)(rows * 7));
    box *boxes = malloc(sizeof(box) * (size_t)(P * L + 1));
    cand *cands = malloc(sizeof(cand) * (size_t)(P + 1)), *kept = malloc(sizeof(cand) * (size_t)(P * C + 1));
    int64_t *keep = malloc(sizeof(int64_t) * (size_t)(P + 1));
    if (!boxes || !cands || !kept || !keep) {
        free(boxes);
        free(cands);
        free(kept);
        free(keep);
        return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory for %lld priors", (long long)P);
    }
    int64_t written = 0;
    for (int64_t n = 0; n < p.N; n++) {
        const float *ln = loc + n * P * L * 4, *cn = conf + n * P * C;
        for (int64_t i = 0; i < P; i++)
            for (int64_t l = 0; l < L; l++)
                boxes[l * P + i] = decode(&p, pr + i * 4, pr + (P + i) * 4, ln + (i * L + l) * 4);
        int64_t nk = 0;
        int64_t targets = C - (p.background >= 0 && p.background < C ? 1 : 0);
        for (int64_t cl = 0; cl < C; cl++) {
            if (cl == p.background) continue;
            const box *bx = boxes + (p.share ? 0 : cl) * P;
            int64_t nc = 0;
            for (int64_t i = 0; i < P; i++)
                if (cn[i * C + cl] > p.conf) cands[nc++] = (cand){cn[i * C + cl], cl, i};
            qsort(cands, (size_t)nc, sizeof *cands, cmp_cand);
            if (p.top_k > 0 && nc > p.top_k) nc = p.top_k;
            /* with a single target class, NMS stops at keep_top_k (OpenCV's early exit) */
            int64_t limit = targets == 1 && p.keep_top_k >= 0 ? p.keep_top_k : INT64_MAX, nkeep = 0;
            float th = p.nms;
            for (int64_t k = 0; k < nc && nkeep < limit; k++) {
                bool ok = true;
                for (int64_t j = 0; j < nkeep && ok; j++) ok = overlap(&bx[cands[k].idx], &bx[keep[j]]) <= th;
                if (!ok) continue;
                keep[nkeep++] = cands[k].idx;
                kept[nk++] = cands[k];
                if (p.eta < 1.0f && th > 0.5f) th *= p.eta;
            }
        }
        qsort(kept, (size_t)nk, sizeof *kept, cmp_cand);
        if (p.keep_top_k >= 0 && nk > p.keep_top_k) nk = p.keep_top_k;
        if (nk > per_image) nk = per_image;
        for (int64_t k = 0; k < nk; k++, written++) {
            const box *b = &boxes[(p.share ? 0 : kept[k].label) * P + kept[k].idx];
            float *r = out + written * 7;
            r[0] = (float)n;
            r[1] = (float)kept[k].label;
            r[2] = kept[k].score;
            r[3] = b->x1;
            r[4] = b->y1;
            r[5] = b->x2;
            r[6] = b->y2;
        }
    }
    free(boxes);
    free(cands);
    free(kept);
    free(keep);
    return CALQ_OK;
}

/* Internal (domain calq): created by the Caffe frontend for Caffe SSD's layers. */
const calq_op_def calq__ops_ssd[] = {
    {"PriorBox", 1, 2, 1, 1, 0, true, prior_infer, prior_run, NULL, NULL, NULL, 0},
    {"DetectionOutput", 3, 3, 1, 1, 0, false, det_infer, det_run, NULL, NULL, NULL, 0},
    {0},
};
