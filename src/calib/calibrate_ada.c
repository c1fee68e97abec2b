/* ada_quantize in the calibration run (docs/numerics.md "ada_quantize"):
 *
 *   pass 1: each ada layer keeps a bounded reservoir of its float input samples: one im2col
 *           column (C*kh*kw values, padding as zeros) per conv output position, one input row
 *           (K values) per Gemm / MatMul row. Each candidate sample gets a priority, a hash of
 *           its position in the stream of all samples (batches in order); the reservoir holds the
 *           `cap` samples of smallest priority, a uniform sample of the whole calibration set
 *           that depends on the data only (not on threads, not on timing). cap = clamp(2^19 / K,
 *           128, 2048) samples of K values: about 2 MiB per layer, whatever batch_num is.
 *   after the passes: AdaRound per layer (quant/adaround.h) with ARQ's scale_w, giving the
 *           int8 weights the side file carries (calib/adaround.h).
 *
 * The inputs are those of the float model (the calibration run's graph, Conv+BN folded as the
 * session folds it), as in Nagel et al.'s layer-wise formulation; the error of earlier quantized
 * layers is not propagated. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/log.h"
#include "calib/adaround.h"
#include "calib/calibrate.h"
#include "quant/adaround.h"

#define ADA_BUDGET  (1 << 19) /* floats per reservoir */
#define ADA_MIN_CAP 128
#define ADA_MAX_CAP 2048

struct calq__ada_layer {
    bool conv;
    const calq_node *n;
    const calq_tensor *w;
    int group;
    int64_t co, ktot; /* output channels; values per sample */
    /* conv: kernel, strides, dilations, begin pads, auto_pad; 1-D convs are 2-D with kh = 1 */
    int64_t kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
    const char *auto_pad;
    /* Gemm / MatMul: weight [K, N] (trans 0) or [N, K] (Gemm transB) */
    int64_t K, N;
    bool trans;
    int cap, count;
    uint64_t seen;
    float *samples; /* [cap, ktot] */
    uint64_t *prio; /* max-heap of the kept samples' priorities */
    int *slot;      /* their rows in samples */
    int8_t *q;      /* the learned weights, in the weight's layout */
    calq__ada_result res;
};

static uint64_t mix(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static calq_status layer_fail(calq__calib_layer *l, calq_status s, const char *fmt, ...) CALQ_PRINTF(3, 4);
static calq_status layer_fail(calq__calib_layer *l, calq_status s, const char *fmt, ...)
{
    char what[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    l->w_failed = true;
    calq__fail(&l->w_err, s, l->cfg->name, "ada_quantize: layer \"%s\": %s", l->cfg->name, what);
    return CALQ_OK;
}

static int64_t ints_at(const calq_node *n, const char *name, int i, int64_t dflt)
{
    const int64_t *v;
    int c = calq__attr_ints(n, name, &v);
    return c > i ? v[i] : dflt;
}

/* Geometry of one ada layer from its node and weight. */
static calq_status setup_layer(calq__calib *cal, calq__calib_layer *l, calq_error *err)
{
    const calq_qkind *k = l->cfg->kind;
    const calq_node *n = NULL;
    for (int i = 0; i < cal->g->n_nodes && !n; i++)
        if (strcmp(cal->g->nodes[i].name, l->cfg->name) == 0) n = &cal->g->nodes[i];
    const calq_tensor *w = n && n->n_inputs > k->weight_input && n->inputs[k->weight_input] >= 0
                               ? cal->g->values[n->inputs[k->weight_input]].constant
                               : NULL;
    if (!n || !w || w->dtype != CALQ_DTYPE_FLOAT32) return CALQ_OK; /* ARQ has failed the layer already */
    calq__ada_layer *a = calloc(1, sizeof *a);
    if (!a) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, l->cfg->name, "ada_quantize: out of memory");
    l->ada = a;
    a->n = n;
    a->w = w;
    a->conv = k->id == CALQ_QKIND_CONV;
    if (a->conv) {
        if (w->ndim != 3 && w->ndim != 4)
            return layer_fail(l, CALQ_ERR_UNSUPPORTED,
                              "its Conv weight has %d dims; calq learns the rounding of 1-D and 2-D convolutions "
                              "(3- or 4-D weights); use arq_quantize for it",
                              w->ndim);
        bool one = w->ndim == 3;
        a->group = (int)calq__attr_int(n, "group", 1);
        a->co = w->dims[0];
        a->kh = one ? 1 : w->dims[2];
        a->kw = w->dims[one ? 2 : 3];
        a->sh = one ? 1 : ints_at(n, "strides", 0, 1);
        a->sw = ints_at(n, "strides", one ? 0 : 1, 1);
        a->dh = one ? 1 : ints_at(n, "dilations", 0, 1);
        a->dw = ints_at(n, "dilations", one ? 0 : 1, 1);
        a->pt = one ? 0 : ints_at(n, "pads", 0, 0);
        a->pl = ints_at(n, "pads", one ? 0 : 1, 0);
        a->pb = one ? 0 : ints_at(n, "pads", 2, 0);
        a->pr = ints_at(n, "pads", one ? 1 : 3, 0);
        a->auto_pad = calq__attr_str(n, "auto_pad", "NOTSET");
        a->ktot = (int64_t)a->group * w->dims[1] * a->kh * a->kw;
        if (a->group < 1 || a->co % a->group || a->sh < 1 || a->sw < 1 || a->dh < 1 || a->dw < 1)
            return layer_fail(l, CALQ_ERR_UNSUPPORTED,
                              "group %d with %lld output channels: not a convolution calq can take", a->group,
                              (long long)a->co);
    } else {
        if (w->ndim != 2)
            return layer_fail(l, CALQ_ERR_UNSUPPORTED,
                              "its %s weight has %d dims; calq learns the rounding of 2-D weights; use "
                              "arq_quantize for it",
                              n->op_type, w->ndim);
        a->trans = k->id == CALQ_QKIND_GEMM && calq__attr_int(n, "transB", 0) != 0;
        a->K = a->trans ? w->dims[1] : w->dims[0];
        a->N = a->trans ? w->dims[0] : w->dims[1];
        a->group = 1;
        a->co = a->N;
        a->ktot = a->K;
    }
    int64_t cap = ADA_BUDGET / (a->ktot > 0 ? a->ktot : 1);
    a->cap = (int)(cap < ADA_MIN_CAP ? ADA_MIN_CAP : cap > ADA_MAX_CAP ? ADA_MAX_CAP : cap);
    a->samples = malloc(sizeof(float) * (size_t)(a->cap * a->ktot));
    a->prio = malloc(sizeof(uint64_t) * (size_t)a->cap);
    a->slot = malloc(sizeof(int) * (size_t)a->cap);
    if (!a->samples || !a->prio || !a->slot)
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, l->cfg->name,
                          "ada_quantize: layer \"%s\": out of memory for %d samples of %lld values", l->cfg->name,
                          a->cap, (long long)a->ktot);
    return CALQ_OK;
}

calq_status calq__ada_setup(calq__calib *cal, calq_error *err)
{
    for (int i = 0; i < cal->n_layers; i++) {
        calq__calib_layer *l = &cal->layers[i];
        if (l->input != 0 || l->w_failed || l->cfg->wts.algo != CALQ_WTS_ADA) continue;
        CALQ_TRY(setup_layer(cal, l, err));
    }
    return CALQ_OK;
}

static void sift_down(calq__ada_layer *a, int i)
{
    for (;;) {
        int c = 2 * i + 1;
        if (c >= a->count) return;
        if (c + 1 < a->count && a->prio[c + 1] > a->prio[c]) c++;
        if (a->prio[c] <= a->prio[i]) return;
        uint64_t p = a->prio[c];
        int s = a->slot[c];
        a->prio[c] = a->prio[i];
        a->slot[c] = a->slot[i];
        a->prio[i] = p;
        a->slot[i] = s;
        i = c;
    }
}

/* The row of samples the next candidate goes to, or NULL when it is not kept. */
static float *admit(calq__ada_layer *a)
{
    uint64_t p = mix(a->seen++ ^ 0x5EEDADA5ull);
    int s;
    if (a->count < a->cap) { /* sift up */
        int i = a->count++;
        s = i;
        while (i > 0 && a->prio[(i - 1) / 2] < p) {
            a->prio[i] = a->prio[(i - 1) / 2];
            a->slot[i] = a->slot[(i - 1) / 2];
            i = (i - 1) / 2;
        }
        a->prio[i] = p;
        a->slot[i] = s;
    } else {
        if (p >= a->prio[0]) return NULL;
        s = a->slot[0];
        a->prio[0] = p;
        sift_down(a, 0);
    }
    return a->samples + (int64_t)s * a->ktot;
}

static void same_pads(int64_t in, int64_t s, int64_t k, int64_t d, bool upper, int64_t *b, int64_t *e)
{
    int64_t out = (in + s - 1) / s, tot = (out - 1) * s + (k - 1) * d + 1 - in;
    if (tot < 0) tot = 0;
    *b = upper ? tot / 2 : tot - tot / 2;
    *e = tot - *b;
}

static void feed_conv(calq__calib_layer *l, const calq_tensor *t)
{
    calq__ada_layer *a = l->ada;
    bool one = a->w->ndim == 3;
    if (t->ndim != a->w->ndim || t->dims[1] != a->ktot / (a->kh * a->kw)) {
        layer_fail(l, CALQ_ERR_SHAPE, "its input has %d dims and %lld channels, which its weight does not fit", t->ndim,
                   t->ndim > 1 ? (long long)t->dims[1] : 0LL);
        return;
    }
    int64_t N = t->dims[0], C = t->dims[1], H = one ? 1 : t->dims[2], W = t->dims[one ? 2 : 3];
    int64_t pt = a->pt, pl = a->pl, pb = a->pb, pr = a->pr;
    if (strcmp(a->auto_pad, "SAME_UPPER") == 0 || strcmp(a->auto_pad, "SAME_LOWER") == 0) {
        bool up = strcmp(a->auto_pad, "SAME_UPPER") == 0;
        if (!one) same_pads(H, a->sh, a->kh, a->dh, up, &pt, &pb);
        same_pads(W, a->sw, a->kw, a->dw, up, &pl, &pr);
    } else if (strcmp(a->auto_pad, "VALID") == 0) {
        pt = pl = pb = pr = 0;
    }
    int64_t OH = (H + pt + pb - a->dh * (a->kh - 1) - 1) / a->sh + 1;
    int64_t OW = (W + pl + pr - a->dw * (a->kw - 1) - 1) / a->sw + 1;
    const float *x = t->data;
    for (int64_t n = 0; n < N; n++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                float *dst = admit(a);
                if (!dst) continue;
                for (int64_t c = 0; c < C; c++)
                    for (int64_t i = 0; i < a->kh; i++) {
                        int64_t ih = oh * a->sh - pt + i * a->dh;
                        for (int64_t j = 0; j < a->kw; j++) {
                            int64_t iw = ow * a->sw - pl + j * a->dw;
                            bool in = ih >= 0 && ih < H && iw >= 0 && iw < W;
                            *dst++ = in ? x[((n * C + c) * H + ih) * W + iw] : 0.0f;
                        }
                    }
            }
}

static void feed_matrix(calq__calib_layer *l, const calq_tensor *t)
{
    calq__ada_layer *a = l->ada;
    int64_t numel = calq_tensor_numel(t);
    if (t->ndim < 1 || t->dims[t->ndim - 1] != a->K) {
        layer_fail(l, CALQ_ERR_SHAPE, "its %s input's last dim is %lld; its weight takes %lld", l->cfg->op_type,
                   t->ndim > 0 ? (long long)t->dims[t->ndim - 1] : 0LL, (long long)a->K);
        return;
    }
    const float *x = t->data;
    for (int64_t r = 0; r < numel / a->K; r++) {
        float *dst = admit(a);
        if (dst) memcpy(dst, x + r * a->K, sizeof(float) * (size_t)a->K);
    }
}

void calq__ada_feed(calq__calib *cal, int group, const calq_tensor *t)
{
    for (int i = 0; i < cal->n_layers; i++) {
        calq__calib_layer *l = &cal->layers[i];
        if (l->group != group || !l->ada || l->w_failed) continue;
        if (l->ada->conv)
            feed_conv(l, t);
        else
            feed_matrix(l, t);
    }
}

static calq_status run_layer(calq__calib *cal, calq__calib_layer *l, calq_error *err)
{
    calq__ada_layer *a = l->ada;
    const calq_ada_config *ac = &l->cfg->wts.ada;
    if (a->count == 0) return layer_fail(l, CALQ_ERR_DATA, "no calibration sample reached its input");
    int64_t numel = calq_tensor_numel(a->w);
    float *wt = NULL;
    int8_t *qr = malloc((size_t)numel);
    a->q = malloc((size_t)numel);
    if (!a->conv && !a->trans) wt = malloc(sizeof(float) * (size_t)numel);
    if (!qr || !a->q || (!a->conv && !a->trans && !wt)) {
        free(qr);
        free(wt);
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, l->cfg->name, "ada_quantize: out of memory");
    }
    const float *w = a->w->data;
    if (wt) /* [K, N] -> rows of output channels [N, K] */
        for (int64_t kk = 0; kk < a->K; kk++)
            for (int64_t nn = 0; nn < a->N; nn++) wt[nn * a->K + kk] = w[kk * a->N + nn];
    int bits = l->cfg->wts.num_bits;
    calq__ada_problem p = {.rows = a->co,
                           .k = numel / a->co,
                           .groups = a->group,
                           .w = wt ? wt : w,
                           .scale = l->scale_w,
                           .n_scale = l->n_w,
                           .qmin = -(1 << (bits - 1)),
                           .qmax = (1 << (bits - 1)) - 1,
                           .x = a->samples,
                           .n_samples = a->count};
    calq__ada_opts o;
    calq__ada_opts_default(&o);
    o.num_iteration = ac->num_iteration;
    o.reg_param = (float)ac->reg_param;
    o.beta_start = (float)ac->beta_range[0];
    o.beta_end = (float)ac->beta_range[1];
    o.warm_start = (float)ac->warm_start;
    o.n_threads = cal->n_threads;
    o.layer = l->cfg->name;
    o.log = cal->log;
    calq_status st = calq__adaround(&p, &o, qr, &a->res, err);
    if (st == CALQ_OK) {
        if (wt)
            for (int64_t kk = 0; kk < a->K; kk++)
                for (int64_t nn = 0; nn < a->N; nn++) a->q[kk * a->N + nn] = qr[nn * a->K + kk];
        else
            memcpy(a->q, qr, (size_t)numel);
    }
    free(qr);
    free(wt);
    if (st != CALQ_OK) return st;
    if (cal->log) {
        const calq__ada_result *r = &a->res;
        double gain = r->err_nearest > 0.0 ? 100.0 * (1.0 - r->err_ada / r->err_nearest) : 0.0;
        calq__log(CALQ_LOG_INFO,
                  "calq: ada_quantize: layer %s: %d samples of %lld values, %d iterations in %.2f s (%.3f ms per "
                  "iteration); output error with nearest rounding %.6g, learned %.6g (%.1f%% lower), %lld of %lld "
                  "weights rounded the other way, %lld of %lld output channels reverted to nearest rounding (learned "
                  "was worse)",
                  l->cfg->name, a->count, (long long)a->ktot, o.num_iteration, r->seconds,
                  1e3 * r->seconds / o.num_iteration, r->err_nearest, r->err_ada, gain, (long long)r->n_changed,
                  (long long)numel, (long long)r->n_rows_kept, (long long)p.rows);
    }
    /* the samples are not needed any more */
    free(a->samples);
    a->samples = NULL;
    return CALQ_OK;
}

calq_status calq__calib_ada(calq__calib *cal, calq_error *err)
{
    for (int i = 0; i < cal->n_layers; i++) {
        calq__calib_layer *l = &cal->layers[i];
        if (!l->ada || calq__calib_layer_failed(cal, i)) continue;
        CALQ_TRY(run_layer(cal, l, err));
    }
    return CALQ_OK;
}

calq_status calq__ada_stage(const calq__calib *cal, calq_staged_files *out, const char *record_out, calq_error *err)
{
    char *path = calq__ada_path(record_out);
    calq__ada_entry *e = calloc((size_t)cal->n_layers + 1, sizeof *e);
    if (!path || !e) {
        free(path);
        free(e);
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    }
    int n = 0;
    for (int i = 0; i < cal->n_layers; i++) {
        const calq__calib_layer *l = &cal->layers[i];
        if (!l->ada || !l->ada->q || l->skipped) continue;
        calq__ada_entry *x = &e[n++];
        x->name = l->cfg->name;
        x->numel = calq_tensor_numel(l->ada->w);
        x->wsum = calq__ada_weight_sum(l->ada->w->data, x->numel);
        x->num_iteration = l->cfg->wts.ada.num_iteration;
        x->err_nearest = l->ada->res.err_nearest;
        x->err_ada = l->ada->res.err_ada;
        x->q = l->ada->q;
    }
    calq_status st = CALQ_OK;
    FILE *old = n ? NULL : fopen(path, "rb");
    /* no ada layer: a side file is written only over a stale one (which would otherwise apply) */
    if (n || old) st = calq__ada_file_stage(out, path, e, n, err);
    if (old) fclose(old);
    free(e);
    free(path);
    return st;
}

void calq__ada_free(calq__ada_layer *a)
{
    if (!a) return;
    free(a->samples);
    free(a->prio);
    free(a->slot);
    free(a->q);
    free(a);
}
