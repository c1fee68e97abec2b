/* IFMR (amct-reference.md §3): the percentile start values, the candidate grid, the search and
 * the factors, plus the whole-buffer reference implementation calq_ifmr(). The streaming form
 * (ifmr_stream.c) shares every rule here and only differs in how it gathers the statistics. */
#include <inttypes.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/threads.h"
#include "quant/quant.h"

#define IFMR_MAX_CANDIDATES 1000000u /* beyond this the grid is a typo, not a search (§3.1) */

void calq_ifmr_opts_init(calq_ifmr_opts *o)
{
    if (!o) return; /* as the free functions: nothing to fill */
    memset(o, 0, sizeof *o);
    o->max_percentile = 0.999999f;
    o->min_percentile = 0.999999f;
    o->search_start = 0.7f;
    o->search_end = 1.3f;
    o->search_step = 0.01f;
    o->asymmetric = 1;
    o->num_bits = 8;
}

calq_status calq__ifmr_check_opts(const calq_ifmr_opts *o, const char *layer, unsigned *n_cand, calq_error *err)
{
    if (!o) return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, layer, "IFMR: options are NULL");
    /* the valid ranges of §3.1 */
    if (!(o->max_percentile > 0.5f && o->max_percentile <= 1.0f) ||
        !(o->min_percentile > 0.5f && o->min_percentile <= 1.0f))
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, layer,
                          "IFMR of layer \"%s\": max_percentile %.9g and min_percentile %.9g must be in (0.5, 1]",
                          calq__name(layer), (double)o->max_percentile, (double)o->min_percentile);
    if (!(o->search_start > 0.0f && o->search_start < o->search_end && isfinite(o->search_end)))
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, layer,
                          "IFMR of layer \"%s\": search_range [%.9g, %.9g] must satisfy 0 < start < end",
                          calq__name(layer), (double)o->search_start, (double)o->search_end);
    float width = o->search_end - o->search_start;
    if (!(o->search_step > 0.0f && o->search_step <= width))
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, layer,
                          "IFMR of layer \"%s\": search_step %.9g must be in (0, %.9g] (search_range end - start)",
                          calq__name(layer), (double)o->search_step, (double)width);
    if (o->num_bits < 2 || o->num_bits > 16)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, layer, "IFMR of layer \"%s\": num_bits %d must be in [2, 16]",
                          calq__name(layer), o->num_bits);
    int nt;
    CALQ_TRY(calq__threads_resolve(o->n_threads, "IFMR: n_threads", &nt, err));
    /* §3.4: M = (unsigned)((b - a)/step + 1) in float32, so the defaults give 60, not 61 */
    float q = width / o->search_step;
    float m = q + 1.0f;
    if (!(m < (float)IFMR_MAX_CANDIDATES))
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, layer,
                          "IFMR of layer \"%s\": search_range / search_step gives %.0f candidates; at most %u are "
                          "supported (a tiny search_step only makes the search slower)",
                          calq__name(layer), (double)m, IFMR_MAX_CANDIDATES);
    *n_cand = (unsigned)m;
    return CALQ_OK;
}

uint64_t calq__ifmr_rank(float p, uint64_t L)
{
    if (L == 0) return 0;
    /* §3.3: the percentile product is a float32 product, and p == 1 means "the extreme" */
    if (fabsf(p - 1.0f) < DBL_EPSILON) return 1;
    float prod = p * (float)L;
    float below = floorf(prod);
    if (!(below >= 0.0f) || !(below < (float)L)) return 0;
    uint64_t b = (uint64_t)below;
    if (b >= L) return 0;
    return L - b;
}

uint64_t calq__ifmr_rank_bound(float p, uint64_t L)
{
    if (L == 0) return 0;
    if (fabsf(p - 1.0f) < DBL_EPSILON) return 1;
    /* fl(p * fl(L')) >= p*L'*(1 - 2^-23), so k(L') <= L'*(1 - p + 2^-23) + 1 <= L*(1 - p + 2^-22) + 2 */
    double b = ceil((double)L * ((1.0 - (double)p) + 0x1p-22)) + 2.0;
    if (b >= (double)L) return L;
    return (uint64_t)b;
}

/* "N elements, finite range [a, b], NaN: x, +Inf: y, -Inf: z" */
static void data_summary(const calq__ifmr_stats *st, char *buf, size_t n)
{
    if (st->data_min <= st->data_max)
        snprintf(buf, n,
                 "%" PRIu64 " elements, finite range [%.9g, %.9g], NaN: %" PRIu64 ", +Inf: %" PRIu64 ", -Inf: %" PRIu64,
                 st->count, (double)st->data_min, (double)st->data_max, st->nan_count, st->pos_inf_count,
                 st->neg_inf_count);
    else
        snprintf(buf, n, "%" PRIu64 " elements, no finite value, NaN: %" PRIu64 ", +Inf: %" PRIu64 ", -Inf: %" PRIu64,
                 st->count, st->nan_count, st->pos_inf_count, st->neg_inf_count);
}

calq_status calq__ifmr_check_stats(const calq__ifmr_stats *st, const calq_ifmr_opts *o, const char *layer,
                                   calq_error *err)
{
    const char *name = calq__name(layer);
    char sum[512];
    data_summary(st, sum, sizeof sum);
    if (st->count == 0)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, layer,
                          "IFMR calibration data of layer \"%s\" is empty: no element was fed", name);
    /* §3.3: inf is diagnosed before NaN, as AMCT's FindMaxAndMinValueWithPercentile does */
    if (st->pos_inf_count || st->neg_inf_count)
        return calq__fail(err, CALQ_ERR_NOT_SUPPORT, layer,
                          "IFMR calibration data has inf value. Layer \"%s\": %s. The activation overflows "
                          "float32; find where with 'calq run --dump-all', or add the layer to skip_layers.",
                          name, sum);
    if (st->nan_count)
        return calq__fail(err, CALQ_ERR_NOT_SUPPORT, layer,
                          "IFMR calibration data has nan value. Layer \"%s\": %s. Find where the NaN appears with "
                          "'calq run --dump-all', or add the layer to skip_layers.",
                          name, sum);
    uint64_t kmax = calq__ifmr_rank(o->max_percentile, st->count);
    uint64_t kmin = calq__ifmr_rank(o->min_percentile, st->count);
    if (kmax == 0 || kmin == 0)
        return calq__fail(err, CALQ_ERR_NOT_SUPPORT, layer,
                          "maxSize > length may rise array bound error! Layer \"%s\": the percentiles %.9g / %.9g "
                          "give no valid rank for %" PRIu64 " elements",
                          name, (double)o->max_percentile, (double)o->min_percentile, st->count);
    return CALQ_OK;
}

calq_status calq__ifmr_grid(const calq__ifmr_stats *st, const calq_ifmr_opts *o, unsigned n_cand, const char *layer,
                            calq__ifmr_cand *cand, float *max_init, float *min_init, calq_error *err)
{
    /* zero forcing (§3.3): the range always contains 0; std::max(0, v) / std::min(0, v) */
    float mx = 0.0f < st->kth_max ? st->kth_max : 0.0f;
    float mn = st->kth_min < 0.0f ? st->kth_min : 0.0f;
    *max_init = mx;
    *min_init = mn;
    const int bits = o->num_bits;
    float a_signed = fabsf(mx) > fabsf(mn) ? mx : mn; /* symmetric: a tie picks the negative side (§3.6) */
    float abs_a = fabsf(a_signed);
    float limit_asym = (float)((1u << bits) - 1u);
    float limit_sym = a_signed > 0.0f ? (float)((1u << (bits - 1)) - 1u) : (float)(1u << (bits - 1));
    unsigned n_legal = 0;
    for (unsigned i = 0; i < n_cand; i++) {
        calq__ifmr_cand *c = &cand[i];
        float step_i = (float)i * o->search_step;
        float ratio = o->search_start + step_i;
        float s;
        if (o->asymmetric) { /* §3.5 */
            float clip = ratio * mx;
            float span = clip - mn;
            s = span / limit_asym;
            c->lo = mn;
            c->hi = clip;
        } else { /* §3.6 */
            float clip = ratio * abs_a;
            s = clip / limit_sym;
            c->lo = -clip;
            c->hi = clip;
        }
        c->scale_raw = s;
        if (s < 0.0f) {
            c->rule = CALQ__SCALE_NEGATIVE;
        } else {
            c->rule = calq__process_scale(&s);
        }
        c->scale = s;
        if (c->rule == CALQ__SCALE_OK) n_legal++;
    }
    if (n_legal > 0) return CALQ_OK;

    /* No legal candidate. AMCT's argmin then picks candidate 0 (all losses 0) and its final
     * process_scale prints that candidate's rule: report the same, plus what calq knows. */
    char rule[256], sum[512];
    float s0 = cand[0].scale_raw;
    if (cand[0].rule != CALQ__SCALE_NEGATIVE) (void)calq__process_scale(&s0);
    calq__scale_rule_text(cand[0].rule, s0, rule, sizeof rule);
    data_summary(st, sum, sizeof sum);
    const char *name = calq__name(layer);
    return calq__fail(err, CALQ_ERR_NOT_SUPPORT, layer,
                      "Do IFMR calibration failed for layer \"%s\": no candidate scale is legal. %s "
                      "(all %u candidates, scales %.9g .. %.9g, break process_scale). Data: %s; percentile range "
                      "after zero forcing [%.9g, %.9g], %s. The scale must not exceed 1/FLT_EPSILON = 8388608, "
                      "so the clip range must stay within %s; add the layer to skip_layers, or find why the "
                      "activation is this large.",
                      name, rule, n_cand, (double)cand[0].scale_raw, (double)cand[n_cand - 1].scale_raw, sum,
                      (double)mn, (double)mx, o->asymmetric ? "asymmetric (with offset)" : "symmetric (without offset)",
                      o->asymmetric ? "(2^n - 1)/FLT_EPSILON (about 2.14e9 for 8 bits)"
                                    : "2^(n-1)/FLT_EPSILON (about 1.07e9 for 8 bits)");
}

double calq__ifmr_acc_total(const calq__ifmr_acc *a)
{
    const double *l = a->lane;
    double s01 = l[0] + l[1], s23 = l[2] + l[3], s45 = l[4] + l[5], s67 = l[6] + l[7];
    double s03 = s01 + s23, s47 = s45 + s67;
    return s03 + s47;
}

calq_status calq__ifmr_select(const calq__ifmr_stats *st, const calq_ifmr_opts *o, unsigned n_cand,
                              const calq__ifmr_cand *cand, const calq__ifmr_acc *acc, float max_init, float min_init,
                              const char *layer, calq_ifmr_result *out, calq_error *err)
{
    /* first minimum (std::min_element, §3.7.3) among the legal candidates only: an illegal one
     * is excluded instead of winning with loss 0 (docs/numerics.md) */
    int best = -1;
    double best_d = 0.0;
    float best_f = 0.0f;
    unsigned n_illegal = 0;
    for (unsigned i = 0; i < n_cand; i++) {
        if (cand[i].rule != CALQ__SCALE_OK) {
            n_illegal++;
            continue;
        }
        if (o->amct_float_loss) {
            if (best < 0 || acc[i].f < best_f) {
                best = (int)i;
                best_f = acc[i].f;
            }
        } else {
            double t = calq__ifmr_acc_total(&acc[i]);
            if (best < 0 || t < best_d) {
                best = (int)i;
                best_d = t;
            }
        }
    }
    if (best < 0) return calq__fail(err, CALQ_ERR_INTERNAL, layer, "IFMR: no legal candidate reached the search");

    const int bits = o->num_bits;
    float step_i = (float)best * o->search_step;
    float ratio = o->search_start + step_i;
    float scale;
    int offset;
    float clip;
    if (o->asymmetric) { /* CalScaleWithOffset, §3.5 */
        clip = ratio * max_init;
        float span = clip - min_init;
        scale = span / (float)((1u << bits) - 1u);
        calq__scale_rule r = calq__process_scale(&scale);
        if (r != CALQ__SCALE_OK) {
            char text[256];
            calq__scale_rule_text(r, scale, text, sizeof text);
            return calq__fail(err, CALQ_ERR_NOT_SUPPORT, layer, "[CalScaleWithOffset]scale failed. %s", text);
        }
        float q = min_init / scale;
        offset = -(int)roundf(q) - (int)(1u << (bits - 1));
    } else { /* CalScaleWithoutOffset, §3.6 */
        float a_signed = fabsf(max_init) > fabsf(min_init) ? max_init : min_init;
        clip = ratio * fabsf(a_signed);
        scale = a_signed > 0.0f ? clip / (float)((1u << (bits - 1)) - 1u) : clip / (float)(1u << (bits - 1));
        calq__scale_rule r = calq__process_scale(&scale);
        if (r != CALQ__SCALE_OK) {
            char text[256];
            calq__scale_rule_text(r, scale, text, sizeof text);
            return calq__fail(err, CALQ_ERR_NOT_SUPPORT, layer, "[CalScaleWithoutOffset]scale failed. %s", text);
        }
        offset = 0;
    }
    memset(out, 0, sizeof *out);
    out->scale = scale;
    out->offset = offset;
    out->clip_max = clip;
    out->max_init = max_init;
    out->min_init = min_init;
    out->best_index = best;
    out->n_candidates = (int)n_cand;
    out->n_illegal = (int)n_illegal;
    out->best_loss = o->amct_float_loss ? (double)best_f : best_d / (double)st->count;
    out->count = st->count;
    out->nan_count = st->nan_count;
    out->pos_inf_count = st->pos_inf_count;
    out->neg_inf_count = st->neg_inf_count;
    out->data_min = st->data_min;
    out->data_max = st->data_max;
    return CALQ_OK;
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

calq_status calq_ifmr(const float *x, size_t n, const calq_ifmr_opts *o, const char *layer, calq_ifmr_result *out,
                      calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE_ARRAY_OF(err, x, n, layer);
    CALQ_REQUIRE(err, o);
    CALQ_REQUIRE(err, out);
    unsigned n_cand = 0;
    CALQ_TRY(calq__ifmr_check_opts(o, layer, &n_cand, err));

    calq__ifmr_stats st = {0};
    st.count = n;
    st.data_min = INFINITY;
    st.data_max = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        float v = x[i];
        if (isnan(v)) {
            st.nan_count++;
        } else if (isinf(v)) {
            if (v > 0)
                st.pos_inf_count++;
            else
                st.neg_inf_count++;
        } else {
            if (v < st.data_min) st.data_min = v;
            if (v > st.data_max) st.data_max = v;
        }
    }
    CALQ_TRY(calq__ifmr_check_stats(&st, o, layer, err));

    /* §3.3 by sorting a copy: the k-th largest and k-th smallest (the data are finite here) */
    float *sorted = malloc(n * sizeof *sorted);
    calq__ifmr_cand *cand = calloc(n_cand, sizeof *cand);
    calq__ifmr_acc *acc = calloc(n_cand, sizeof *acc);
    if (!sorted || !cand || !acc) {
        free(sorted);
        free(cand);
        free(acc);
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, layer, "IFMR: out of memory for %zu elements", n);
    }
    memcpy(sorted, x, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, cmp_float);
    uint64_t kmax = calq__ifmr_rank(o->max_percentile, n);
    uint64_t kmin = calq__ifmr_rank(o->min_percentile, n);
    st.kth_max = sorted[n - kmax];
    st.kth_min = sorted[kmin - 1];
    free(sorted);

    float max_init = 0.0f, min_init = 0.0f;
    calq_status s = calq__ifmr_grid(&st, o, n_cand, layer, cand, &max_init, &min_init, err);
    if (s == CALQ_OK) {
        float Lf = (float)n;
        int nt = 0;
        calq__threads_resolve(o->n_threads, "n_threads", &nt, NULL); /* checked above: caps only */
        if (nt == 0) nt = omp_get_max_threads();
            /* candidates are independent; each one's sum runs over the elements in order */
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
        for (unsigned i = 0; i < n_cand; i++)
            if (cand[i].rule == CALQ__SCALE_OK) calq__ifmr_loss_ref(x, n, 0, &cand[i], o->amct_float_loss, Lf, &acc[i]);
        s = calq__ifmr_select(&st, o, n_cand, cand, acc, max_init, min_init, layer, out, err);
    }
    free(cand);
    free(acc);
    return s;
}
