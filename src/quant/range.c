/* calq's range calibrators (docs/numerics.md, "calq's activation calibrators"): minmax,
 * percentile, kl (TensorRT's entropy calibration) and mse. Each chooses a clip range; the
 * factors come from it with IFMR's final rules (§3.5, §3.6) so every calibrator's record means
 * what AMCT's means.
 *
 *   pass 1 (statistics): count, finite range, NaN/Inf counts; percentile also keeps the two
 *          tails in bounded heaps (calq__tail, exact order statistics as IFMR's stream);
 *   pass 2 (kl, mse): a histogram of fixed range (the zero-forced data range of pass 1), so the
 *          integer counts, and everything computed from them, are the same for any batch split,
 *          batch order or thread count (unlike TensorRT's, whose range grows with the batches).
 * Each pass checks the count and a checksum of the values against the first, so feeding other
 * batches fails instead of giving wrong factors. */
#include <inttypes.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/threads.h"
#include "quant/quant.h"

struct calq_range_stream {
    calq_range_opts o;
    char layer[CALQ_ERROR_NAME_MAX];
    int pass; /* 1 statistics, 2 histogram, 0 done, -1 failed */
    uint64_t max_count;
    int count_learned;
    /* pass 1 */
    uint64_t count, nan_count, pos_inf, neg_inf;
    float dmin, dmax;
    calq__tail top, bottom; /* percentile; bottom keeps -x */
    uint64_t sum1, sum2;
    int have_first;
    uint64_t first_count, first_sum1, first_sum2;
    /* pass 2 */
    uint64_t *hist;
    int abs_hist; /* histogram of |x| over [0, A] (symmetric KL) instead of x over [lo, hi] */
    float h_lo, h_w;
    uint64_t seen, psum1, psum2;
    double neg_weight; /* mse: weight of the error below 0 (calq__range_stream_set_neg_weight), 0 = none */
    calq_range_result res;
};

void calq__range_stream_set_neg_weight(calq_range_stream *s, double neg_weight)
{
    s->neg_weight = neg_weight > 0.0 && neg_weight < 1.0 ? neg_weight : 0.0;
}

void calq__range_stream_bound_feed(calq_range_stream *s, size_t n)
{
    if (s->max_count && !s->count_learned && s->count + n > s->max_count) s->max_count = 0;
}

static const char *const method_names[] = {"minmax", "percentile", "kl", "mse"};

const char *calq_range_method_name(calq_range_method m)
{
    return (unsigned)m < sizeof method_names / sizeof method_names[0] ? method_names[m] : NULL;
}

void calq_range_opts_init(calq_range_opts *o, calq_range_method m)
{
    if (!o) return; /* as the free functions: nothing to fill */
    memset(o, 0, sizeof *o);
    o->method = m;
    o->asymmetric = 1;
    o->num_bits = 8;
    /* onnxruntime's default percentile (99.999 %, docs/peers.md §1.1) */
    o->max_percentile = 0.99999f;
    o->min_percentile = 0.99999f;
    /* TensorRT's entropy histogram has 2048 bins (peers.md §1.3) */
    o->num_bins = 2048;
}

int calq__range_factors(float lo, float hi, int asymmetric, int num_bits, float *scale, int *offset,
                        calq__scale_rule *rule)
{
    if (asymmetric) { /* CalScaleWithOffset, §3.5 */
        float span = hi - lo;
        float s = span / (float)((1u << num_bits) - 1u);
        *rule = calq__process_scale(&s);
        *scale = s;
        if (*rule != CALQ__SCALE_OK) return 0;
        float q = lo / s;
        *offset = -(int)roundf(q) - (int)(1u << (num_bits - 1));
        return 1;
    }
    /* CalScaleWithoutOffset, §3.6: a tie picks the negative side */
    float a = fabsf(hi) > fabsf(lo) ? hi : lo;
    float s = a > 0.0f ? fabsf(a) / (float)((1u << (num_bits - 1)) - 1u) : fabsf(a) / (float)(1u << (num_bits - 1));
    *rule = calq__process_scale(&s);
    *scale = s;
    *offset = 0;
    return *rule == CALQ__SCALE_OK;
}

static calq_status check_opts(const calq_range_opts *o, const char *layer, calq_error *err)
{
    const char *name = calq__name(layer);
    if (!o) return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, layer, "range calibration: options are NULL");
    if (!calq_range_method_name(o->method))
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, layer, "layer \"%s\": unknown range method %d", name,
                          (int)o->method);
    if (o->num_bits < 2 || o->num_bits > 8)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, layer, "%s of layer \"%s\": num_bits %d must be in [2, 8]",
                          method_names[o->method], name, o->num_bits);
    if (o->method == CALQ_RANGE_PERCENTILE && (!(o->max_percentile > 0.5f && o->max_percentile <= 1.0f) ||
                                               !(o->min_percentile > 0.5f && o->min_percentile <= 1.0f)))
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, layer,
                          "percentile of layer \"%s\": max_percentile %.9g and min_percentile %.9g must be in (0.5, 1]",
                          name, (double)o->max_percentile, (double)o->min_percentile);
    if ((o->method == CALQ_RANGE_KL || o->method == CALQ_RANGE_MSE) && o->num_bins != 1024 && o->num_bins != 2048 &&
        o->num_bins != 4096 && o->num_bins != 8192)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, layer,
                          "%s of layer \"%s\": num_of_bins %d must be 1024, 2048, 4096 or 8192",
                          method_names[o->method], name, o->num_bins);
    return CALQ_OK;
}

static void stats_reset(calq_range_stream *s)
{
    s->count = s->nan_count = s->pos_inf = s->neg_inf = 0;
    s->dmin = INFINITY;
    s->dmax = -INFINITY;
    calq__tail_reset(&s->top);
    calq__tail_reset(&s->bottom);
    s->sum1 = s->sum2 = 0;
}

static int tails_sized_for(calq_range_stream *s, uint64_t count)
{
    if (s->o.method != CALQ_RANGE_PERCENTILE) return 1;
    return calq__tails_size(&s->top, &s->bottom, s->o.max_percentile, s->o.min_percentile, s->max_count, count);
}

calq_status calq_range_stream_create(const calq_range_opts *o, uint64_t max_count, const char *layer,
                                     calq_range_stream **out, calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, out);
    *out = NULL;
    CALQ_REQUIRE(err, o);
    CALQ_TRY(check_opts(o, layer, err));
    int nt;
    CALQ_TRY(calq__threads_resolve(o->n_threads, "calq_range_opts.n_threads", &nt, err));
    calq_range_stream *s = calloc(1, sizeof *s);
    if (!s) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, layer, "range calibration: out of memory");
    s->o = *o;
    s->o.n_threads = nt;
    snprintf(s->layer, sizeof s->layer, "%s", layer ? layer : "");
    s->pass = 1;
    s->max_count = max_count;
    stats_reset(s);
    if (!tails_sized_for(s, 0)) {
        calq_range_stream_free(s);
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, layer, "percentile: out of memory for the tails");
    }
    *out = s;
    return CALQ_OK;
}

void calq_range_stream_free(calq_range_stream *s)
{
    if (!s) return;
    calq__tail_free(&s->top);
    calq__tail_free(&s->bottom);
    free(s->hist);
    free(s);
}

int calq_range_stream_pass(const calq_range_stream *s)
{
    if (!s) return -1; /* as calq_ifmr_stream_pass */
    return s->pass < 0 ? 0 : s->pass;
}

size_t calq_range_stream_bytes(const calq_range_stream *s)
{
    if (!s) return 0;
    return sizeof *s + (s->top.alloc + s->bottom.alloc) * sizeof(float) +
           (s->hist ? (size_t)s->o.num_bins * sizeof(uint64_t) : 0);
}

static calq_status feed_statistics(calq_range_stream *s, const float *x, size_t n, calq_error *err)
{
    uint64_t after = s->count + n;
    if (s->max_count && after > s->max_count)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, s->layer,
                          "%s of layer \"%s\": %" PRIu64 " elements fed, more than the %" PRIu64
                          " declared as max_count%s",
                          method_names[s->o.method], calq__name(s->layer), after, s->max_count,
                          s->count_learned ? " (the count of the first statistics pass: feed the same batches)" : "");
    if (!tails_sized_for(s, after))
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, s->layer, "percentile: out of memory for the tails");
    calq__values_checksum(x, n, &s->sum1, &s->sum2);
    s->count = after;
    int pct = s->o.method == CALQ_RANGE_PERCENTILE;
    for (size_t i = 0; i < n; i++) {
        float v = x[i];
        if (!((v - v) == 0.0f)) { /* NaN or inf */
            if (isnan(v))
                s->nan_count++;
            else if (v > 0)
                s->pos_inf++;
            else
                s->neg_inf++;
            continue;
        }
        if (v < s->dmin) s->dmin = v;
        if (v > s->dmax) s->dmax = v;
        if (pct) {
            if (calq__tail_rejects(&s->top, v))
                calq__tail_drop(&s->top, v);
            else
                calq__tail_push(&s->top, v);
            if (calq__tail_rejects(&s->bottom, -v))
                calq__tail_drop(&s->bottom, -v);
            else
                calq__tail_push(&s->bottom, -v);
        }
    }
    return CALQ_OK;
}

static void feed_histogram(calq_range_stream *s, const float *x, size_t n)
{
    const int B = s->o.num_bins;
    const float lo = s->h_lo, w = s->h_w;
    uint64_t *h = s->hist;
    calq__values_checksum(x, n, &s->psum1, &s->psum2);
    s->seen += n;
    for (size_t i = 0; i < n; i++) {
        /* exact zeros are left out (as ncnn's KL does, docs/peers.md §1.4): every candidate range
         * contains 0 and represents it exactly, so they carry nothing about the clip, while a
         * ReLU output's spike of zeros would otherwise dominate the first bin (and, spread over
         * it, add an error that is not there) */
        if (x[i] == 0.0f) continue;
        /* bin = floor((x - lo) / w) in float32 (|x| / w for the |x| histogram), clamped to the last bin */
        float t = s->abs_hist ? fabsf(x[i]) / w : (x[i] - lo) / w;
        int k = t < (float)B ? (int)t : B - 1;
        h[k < 0 ? 0 : k]++;
    }
}

calq_status calq_range_stream_feed(calq_range_stream *s, const float *x, size_t n, calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, s);
    if (s->pass == 0)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, s->layer, "%s of layer \"%s\": fed after the result",
                          method_names[s->o.method], calq__name(s->layer));
    if (s->pass < 0)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, s->layer, "%s of layer \"%s\": fed after a failure",
                          method_names[s->o.method], calq__name(s->layer));
    CALQ_REQUIRE_ARRAY_OF(err, x, n, s->layer);
    if (s->pass == 1) return feed_statistics(s, x, n, err);
    if (s->seen + n > s->count)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, s->layer,
                          "%s of layer \"%s\": pass 2 was fed more than the %" PRIu64
                          " elements of pass 1; feed the same batches in every pass",
                          method_names[s->o.method], calq__name(s->layer), s->count);
    feed_histogram(s, x, n);
    return CALQ_OK;
}

/* "N elements, finite range [a, b], NaN: x, +Inf: y, -Inf: z" */
static void data_summary(const calq_range_stream *s, char *buf, size_t n)
{
    if (s->dmin <= s->dmax)
        snprintf(buf, n,
                 "%" PRIu64 " elements, finite range [%.9g, %.9g], NaN: %" PRIu64 ", +Inf: %" PRIu64 ", -Inf: %" PRIu64,
                 s->count, (double)s->dmin, (double)s->dmax, s->nan_count, s->pos_inf, s->neg_inf);
    else
        snprintf(buf, n, "%" PRIu64 " elements, no finite value, NaN: %" PRIu64 ", +Inf: %" PRIu64 ", -Inf: %" PRIu64,
                 s->count, s->nan_count, s->pos_inf, s->neg_inf);
}

static calq_status fail(calq_range_stream *s, calq_status st)
{
    s->pass = -1;
    return st;
}

/* The factors of the chosen clip; an illegal scale fails with AMCT's rule text first (the
 * failure report of src/calib reads it) and the ranges. */
static calq_status finish(calq_range_stream *s, float lo, float hi, calq_error *err)
{
    calq_range_result *r = &s->res;
    calq__scale_rule rule;
    float scale;
    int offset = 0;
    if (!calq__range_factors(lo, hi, s->o.asymmetric, s->o.num_bits, &scale, &offset, &rule)) {
        char text[256], sum[512];
        calq__scale_rule_text(rule, scale, text, sizeof text);
        data_summary(s, sum, sizeof sum);
        return fail(s, calq__fail(err, CALQ_ERR_NOT_SUPPORT, s->layer,
                                  "%s Layer \"%s\", calibrator %s (%s): the clip range [%.9g, %.9g] needs this scale. "
                                  "Data: %s. The scale must not exceed 1/FLT_EPSILON = 8388608; add the layer to "
                                  "skip_layers, or find why the activation is this large.",
                                  text, calq__name(s->layer), method_names[s->o.method],
                                  s->o.asymmetric ? "with offset" : "without offset", (double)lo, (double)hi, sum));
    }
    r->scale = scale;
    r->offset = offset;
    r->clip_min = lo;
    r->clip_max = hi;
    r->count = s->count;
    r->nan_count = s->nan_count;
    r->pos_inf_count = s->pos_inf;
    r->neg_inf_count = s->neg_inf;
    r->data_min = s->dmin;
    r->data_max = s->dmax;
    s->pass = 0;
    return CALQ_OK;
}

/* The zero-forced data range (§3.3's forcing, applied to the extremes). */
static void forced_range(const calq_range_stream *s, float *lo, float *hi)
{
    *lo = s->dmin < 0.0f ? s->dmin : 0.0f;
    *hi = s->dmax > 0.0f ? s->dmax : 0.0f;
}

/* Positive side dominates (IFMR's symmetric rule, §3.6: a tie picks the negative side). */
static int positive_dominant(float lo, float hi)
{
    return fabsf(hi) > fabsf(lo);
}

static calq_status end_statistics(calq_range_stream *s, int *done, calq_error *err)
{
    const char *name = calq__name(s->layer), *m = method_names[s->o.method];
    if (s->have_first && (s->count != s->first_count || s->sum1 != s->first_sum1 || s->sum2 != s->first_sum2))
        return fail(s,
                    calq__fail(err, CALQ_ERR_BAD_PARAMETERS, s->layer,
                               "%s of layer \"%s\": the statistics pass was fed other data than the first one (%" PRIu64
                               " vs %" PRIu64 " elements); feed the same batches in every pass",
                               m, name, s->count, s->first_count));
    s->have_first = 1;
    s->first_count = s->count;
    s->first_sum1 = s->sum1;
    s->first_sum2 = s->sum2;
    char sum[512];
    data_summary(s, sum, sizeof sum);
    if (s->count == 0)
        return fail(s, calq__fail(err, CALQ_ERR_BAD_PARAMETERS, s->layer,
                                  "%s calibration data of layer \"%s\" is empty: no element was fed", m, name));
    if (s->nan_count || s->pos_inf || s->neg_inf) /* AMCT's message for non-finite activations (§8.4) */
        return fail(s, calq__fail(err, CALQ_ERR_NOT_SUPPORT, s->layer,
                                  "The activation to be quantized has invalid value inf or nan! Layer \"%s\", "
                                  "calibrator %s: %s. Find where it appears with 'calq run --dump-all', or add the "
                                  "layer to skip_layers.",
                                  name, m, sum));
    float lo, hi;
    forced_range(s, &lo, &hi);
    switch (s->o.method) {
    case CALQ_RANGE_MINMAX: *done = 1; return finish(s, lo, hi, err);
    case CALQ_RANGE_PERCENTILE: {
        uint64_t kmax = calq__ifmr_rank(s->o.max_percentile, s->count);
        uint64_t kmin = calq__ifmr_rank(s->o.min_percentile, s->count);
        float vmax = 0.0f, vmin = 0.0f;
        if (kmax == 0 || kmin == 0)
            return fail(s, calq__fail(err, CALQ_ERR_BAD_PARAMETERS, s->layer,
                                      "percentile of layer \"%s\": the percentiles %.9g / %.9g give no valid rank for "
                                      "%" PRIu64 " elements",
                                      name, (double)s->o.max_percentile, (double)s->o.min_percentile, s->count));
        int ok = calq__tail_kth(&s->top, kmax, &vmax) && calq__tail_kth(&s->bottom, kmin, &vmin);
        if (!ok) {
            if (s->max_count || s->count_learned)
                return fail(s, calq__fail(err, CALQ_ERR_INTERNAL, s->layer,
                                          "percentile of layer \"%s\": the tails lost a needed value", name));
            /* L is known now: one more statistics pass with tails sized for it */
            s->max_count = s->count;
            s->count_learned = 1;
            stats_reset(s);
            if (!tails_sized_for(s, 0))
                return fail(s, calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, s->layer, "percentile: out of memory"));
            *done = 0;
            return CALQ_OK;
        }
        vmin = -vmin;
        *done = 1;
        return finish(s, vmin < 0.0f ? vmin : 0.0f, vmax > 0.0f ? vmax : 0.0f, err);
    }
    default: break;
    }
    /* kl / mse: the histogram's range; the |x| histogram for symmetric KL (TensorRT's) */
    s->abs_hist = s->o.method == CALQ_RANGE_KL && !s->o.asymmetric;
    float A = fabsf(lo) > hi ? fabsf(lo) : hi;
    s->h_lo = s->abs_hist ? 0.0f : lo;
    s->h_w = s->abs_hist ? A / (float)s->o.num_bins : (hi - lo) / (float)s->o.num_bins;
    if (!(s->h_w > 0.0f) || !isfinite(s->h_w)) { /* all zero, or a range beyond float: the data range decides */
        *done = 1;
        return finish(s, lo, hi, err);
    }
    s->hist = calloc((size_t)s->o.num_bins, sizeof *s->hist);
    if (!s->hist) return fail(s, calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, s->layer, "%s: out of memory", m));
    s->pass = 2;
    s->seen = s->psum1 = s->psum2 = 0;
    *done = 0;
    return CALQ_OK;
}

/* First bin count i (>= lo_i) whose window [lo, lo + i*w] reaches 0 (zero forcing). */
static int first_window_with_zero(float lo, float w, int B)
{
    int z = (int)ceil(-(double)lo / (double)w);
    if (z < 0) z = 0;
    while (z < B && lo + (float)z * w < 0.0f) z++;
    return z > B ? B : z;
}

static calq_status search_kl(calq_range_stream *s, calq_error *err)
{
    const int B = s->o.num_bins, n = s->o.num_bits;
    float lo, hi;
    forced_range(s, &lo, &hi);
    int pos = positive_dominant(lo, hi);
    const uint64_t *h = s->hist;
    uint64_t *rev = NULL;
    int nq, i_min;
    if (s->abs_hist) {
        nq = 1 << (n - 1); /* TensorRT: 128 levels for |x| */
        i_min = nq;
    } else {
        /* the window grows from the dominated side's end over the dominant side (the other end
         * stays at its extreme, as IFMR's asymmetric search keeps min_init, §3.5); 2^n levels */
        nq = 1 << n;
        if (!pos) {
            rev = malloc(sizeof *rev * (size_t)B);
            if (!rev) return fail(s, calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, s->layer, "kl: out of memory"));
            for (int j = 0; j < B; j++) rev[j] = h[B - 1 - j];
            h = rev;
        }
        int z = first_window_with_zero(pos ? lo : -hi, s->h_w, B);
        i_min = nq > z ? nq : z;
    }
    if (i_min > B) i_min = B;
    int nc = B - i_min + 1;
    double *kl = malloc(sizeof *kl * (size_t)nc);
    if (!kl) {
        free(rev);
        return fail(s, calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, s->layer, "kl: out of memory"));
    }
    calq__range_kl(h, B, i_min, nq, s->o.n_threads, kl);
    free(rev);
    /* first minimum (the smallest clip on a tie), illegal scales and infinite divergences excluded */
    int best = -1, n_illegal = 0;
    float best_lo = 0.0f, best_hi = 0.0f;
    for (int k = 0; k < nc; k++) {
        int i = i_min + k;
        float cl, ch;
        if (s->abs_hist) {
            float T = (float)i * s->h_w;
            cl = pos ? 0.0f : -T;
            ch = pos ? T : 0.0f;
        } else if (pos) {
            cl = lo;
            ch = lo + (float)i * s->h_w;
            if (ch < 0.0f) ch = 0.0f;
        } else {
            ch = hi;
            cl = hi - (float)i * s->h_w;
            if (cl > 0.0f) cl = 0.0f;
        }
        float sc;
        int off;
        calq__scale_rule rule;
        if (!(kl[k] < INFINITY) || !calq__range_factors(cl, ch, s->o.asymmetric, n, &sc, &off, &rule)) {
            n_illegal++;
            continue;
        }
        if (best < 0 || kl[k] < kl[best - i_min]) {
            best = i;
            best_lo = cl;
            best_hi = ch;
        }
    }
    s->res.n_candidates = nc;
    s->res.n_illegal = n_illegal;
    if (best < 0) {
        free(kl);
        return finish(s, lo, hi, err); /* reports the rule the data range breaks */
    }
    s->res.best_bins = best;
    s->res.best_loss = kl[best - i_min];
    free(kl);
    return finish(s, best_lo, best_hi, err);
}

typedef struct mse_cand {
    float lo, hi, scale;
    int offset, ok;
    double sse;
} mse_cand;

/* Evaluates the candidates c[0..nc) (the error below 0 weighted by nw; 1: plain) in parallel and
 * finishes with the first minimum; best_bins = base + its index. Frees c. */
static calq_status mse_pick(calq_range_stream *s, mse_cand *c, int nc, int base, double nw, float lo, float hi,
                            calq_error *err)
{
    const int B = s->o.num_bins, n = s->o.num_bits, qmin = -(1 << (n - 1)), qmax = (1 << (n - 1)) - 1;
    int nt = s->o.n_threads > 0 ? s->o.n_threads : omp_get_max_threads();
    const uint64_t *h = s->hist;
    const double hlo = (double)s->h_lo, hw = (double)s->h_w;
#pragma omp parallel for schedule(dynamic, 8) num_threads(nt)
    for (int k = 0; k < nc; k++)
        if (c[k].ok)
            c[k].sse = calq__range_hist_sse_weighted(h, B, hlo, hw, (double)c[k].scale, c[k].offset, qmin, qmax, nw);
    int best = -1, n_illegal = 0;
    for (int k = 0; k < nc; k++) {
        if (!c[k].ok) {
            n_illegal++;
            continue;
        }
        if (best < 0 || c[k].sse < c[best].sse) best = k;
    }
    s->res.n_candidates = nc;
    s->res.n_illegal = n_illegal;
    if (best < 0) {
        free(c);
        return finish(s, lo, hi, err);
    }
    s->res.best_bins = base + best;
    s->res.best_loss = c[best].sse / (double)s->count;
    float bl = c[best].lo, bh = c[best].hi;
    free(c);
    return finish(s, bl, bh, err);
}

/* The grid of the weighted search: the negative end at 1, 0.975, ..., 0.2 of the data's, the
 * positive end at 1, 0.98, ..., 0.3 of the data's (first minimum wins: the widest on a tie);
 * best_bins is then the grid index (negative step best_bins / POS_STEPS, positive % POS_STEPS). */
#define NEG_STEPS 33
#define POS_STEPS 36

static calq_status search_mse_weighted(calq_range_stream *s, float lo, float hi, calq_error *err)
{
    const int nc = NEG_STEPS * POS_STEPS;
    mse_cand *c = calloc((size_t)nc, sizeof *c);
    if (!c) return fail(s, calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, s->layer, "mse: out of memory"));
    for (int k = 0; k < nc; k++) {
        c[k].lo = lo * (1.0f - 0.025f * (float)(k / POS_STEPS));
        c[k].hi = hi * (1.0f - 0.02f * (float)(k % POS_STEPS));
        calq__scale_rule rule;
        c[k].ok = calq__range_factors(c[k].lo, c[k].hi, 1, s->o.num_bits, &c[k].scale, &c[k].offset, &rule);
    }
    return mse_pick(s, c, nc, 0, s->neg_weight, lo, hi, err);
}

static calq_status search_mse(calq_range_stream *s, calq_error *err)
{
    const int B = s->o.num_bins, n = s->o.num_bits;
    float lo, hi;
    forced_range(s, &lo, &hi);
    if (s->neg_weight > 0.0 && s->o.asymmetric && lo < 0.0f && hi > 0.0f) return search_mse_weighted(s, lo, hi, err);
    int pos = positive_dominant(lo, hi);
    float A = fabsf(lo) > hi ? fabsf(lo) : hi;
    int i_min = 1;
    if (s->o.asymmetric) i_min = first_window_with_zero(pos ? lo : -hi, s->h_w, B);
    if (i_min < 1) i_min = 1;
    int nc = B - i_min + 1;
    mse_cand *c = calloc((size_t)nc, sizeof *c);
    if (!c) return fail(s, calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, s->layer, "mse: out of memory"));
    for (int k = 0; k < nc; k++) {
        int i = i_min + k;
        if (!s->o.asymmetric) { /* T on a grid of B steps up to the larger magnitude */
            float T = (float)i * (A / (float)B);
            c[k].lo = pos ? 0.0f : -T;
            c[k].hi = pos ? T : 0.0f;
        } else if (pos) {
            c[k].lo = lo;
            c[k].hi = lo + (float)i * s->h_w;
            if (c[k].hi < 0.0f) c[k].hi = 0.0f;
        } else {
            c[k].hi = hi;
            c[k].lo = hi - (float)i * s->h_w;
            if (c[k].lo > 0.0f) c[k].lo = 0.0f;
        }
        calq__scale_rule rule;
        c[k].ok = calq__range_factors(c[k].lo, c[k].hi, s->o.asymmetric, n, &c[k].scale, &c[k].offset, &rule);
    }
    return mse_pick(s, c, nc, i_min, 1.0, lo, hi, err);
}

calq_status calq_range_stream_end_pass(calq_range_stream *s, int *done, calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, s);
    CALQ_REQUIRE(err, done);
    *done = 0;
    if (s->pass <= 0)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, s->layer, "%s of layer \"%s\": end_pass after the %s",
                          method_names[s->o.method], calq__name(s->layer), s->pass == 0 ? "result" : "failure");
    if (s->pass == 1) return end_statistics(s, done, err);
    if (s->seen != s->count || s->psum1 != s->first_sum1 || s->psum2 != s->first_sum2)
        return fail(s, calq__fail(err, CALQ_ERR_BAD_PARAMETERS, s->layer,
                                  "%s of layer \"%s\": pass 2 was fed other data than pass 1 (%" PRIu64 " vs %" PRIu64
                                  " elements); feed the same batches in every pass",
                                  method_names[s->o.method], calq__name(s->layer), s->seen, s->count));
    *done = 1;
    calq_status st = s->o.method == CALQ_RANGE_KL ? search_kl(s, err) : search_mse(s, err);
    free(s->hist); /* the result is all that is needed now */
    s->hist = NULL;
    return st;
}

calq_status calq_range_stream_result(const calq_range_stream *s, calq_range_result *out, calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, s);
    CALQ_REQUIRE(err, out);
    /* pass -1 is the failed state, not a pass */
    if (s->pass < 0)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, s->layer,
                          "%s of layer \"%s\": no result: the stream failed earlier (the feed or end_pass that failed "
                          "said why); create a new one",
                          method_names[s->o.method], calq__name(s->layer));
    if (s->pass != 0)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, s->layer, "%s of layer \"%s\": no result yet (pass %d)",
                          method_names[s->o.method], calq__name(s->layer), s->pass);
    *out = s->res;
    return CALQ_OK;
}

calq_status calq_range(const float *x, size_t n, const calq_range_opts *o, const char *layer, calq_range_result *out,
                       calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE_ARRAY_OF(err, x, n, layer);
    CALQ_REQUIRE(err, o);
    CALQ_REQUIRE(err, out);
    calq_range_stream *s = NULL;
    CALQ_TRY(calq_range_stream_create(o, (uint64_t)n, layer, &s, err));
    int done = 0;
    calq_status st = CALQ_OK;
    while (st == CALQ_OK && !done) {
        st = calq_range_stream_feed(s, x, n, err);
        if (st == CALQ_OK) st = calq_range_stream_end_pass(s, &done, err);
    }
    if (st == CALQ_OK) st = calq_range_stream_result(s, out, err);
    calq_range_stream_free(s);
    return st;
}
