/* calq_fallback (include/calq.h): keep the most damaging layers in float until the quantized
 * model reaches a target.
 *
 * A trial is a set of float layers: the config with those layers disabled, AMCT's fake-quant
 * model (or the QDQ file, opts.measure: what the user deploys) saved from the one record (only
 * quant_enable changes, the factors never do), loaded and measured (the user's evaluator, or
 * calq_compare's worst output cosine over the batches).
 *
 *   rank:   calq_compare --sensitivity on the all-quantized model: what each layer alone costs
 *           the model outputs (the worst output's cosine with only it quantized), worst first;
 *           its own error (--isolated, one pass, rank_isolated) misses the layers whose small
 *           error the rest of the network amplifies (PAN's first depthwise convolution: isolated
 *           0.998, 11th of 67; alone it takes the outputs to 0.973, 1st);
 *   units:  layers reading one tensor share its quantization (§3.2) and go to float together
 *           (pruning can still return single ones to int8); a unit ranks as its worst layer;
 *   grow:   each step measures the first `lookahead` units of the ranking not yet float and
 *           keeps the one whose trial is best; the measured ones move to the front of the
 *           ranking in the order of their measures (the ranking is a proxy; measures are not);
 *           a step with no improvement widens to twice the lookahead once, then takes the best
 *           measured all the same (twice in a row at most: errors partly cancel, and a layer may
 *           help only with the next one), then the search stops; the best set seen is kept; ends
 *           when the target is met, at max_float_layers, or at the time budget;
 *   prune:  each float layer, earliest first, goes back to int8 when the target stays met (when
 *           it was not met: when the metric is no worse than the best found).
 * Why not bisection over the ranking: it assumes the first k ranked layers are the ones to keep,
 * and returns all k, useful or not; the isolated error is only a proxy (a badly quantized layer
 * may barely move the outputs), so measuring a few candidates per step and pruning at the end
 * finds fewer float layers for a bounded number of trials (about (lookahead + 1) per float layer,
 * plus one per pruning test). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/error.h"
#include "base/log.h"
#include "base/outputs.h"
#include "calib/config.h"
#include "calib/record.h"
#include "export/save.h"
#include "frontend/model.h"

void calq_fallback_opts_init(calq_fallback_opts *o)
{
    if (!o) return; /* as the free functions: nothing to fill */
    memset(o, 0, sizeof *o);
    o->target = 0.99;
    o->log = 1;
    o->measure = CALQ_SAVE_ASCEND_FAKE_QUANT;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct search {
    calq_model *m;
    const calq_config *cfg;
    const char *record;
    calq_data *data;
    int nb;
    calq_fallback_opts o;
    char dir[4096];
    bool own_dir;
    int n_trials;
    double t0, trial_s; /* start; the longest trial so far */
    /* the enabled layers, in config order */
    int n;
    int *cfg_index;
    int *unit; /* per enabled layer: the first enabled layer reading the same input tensor. Such
                  layers share one calibrator and one quantized tensor (§3.2), so they go to float
                  together: keeping one in float leaves the tensor's quantization in the others */
    int *unit_size;
} search;

static bool better(const search *s, double a, double b)
{
    return s->o.lower_is_better ? a < b : a > b;
}

static bool meets(const search *s, double v)
{
    return s->o.lower_is_better ? v <= s->o.target : v >= s->o.target;
}

static calq_status load_like(const search *s, const char *model, const char *weights, calq_model **out, calq_error *err)
{
    calq_status st = weights ? calq_model_load_caffe(model, weights, out, err) : calq_model_load_onnx(model, out, err);
    for (int i = 0; st == CALQ_OK && i < calq_model_num_inputs(s->m); i++) {
        calq_value_info v;
        calq_model_input_info(s->m, i, &v);
        /* the shapes the user fixed; a dim left dynamic (a batch the data decide) stays so */
        bool fixed = v.ndim >= 0;
        for (int k = 0; k < v.ndim && fixed; k++) fixed = v.dims[k] > 0;
        if (fixed) st = calq_model_set_input_shape(*out, v.name, v.dims, v.ndim, err);
    }
    if (st != CALQ_OK) {
        calq_model_free(*out);
        *out = NULL;
    }
    return st;
}

/* The user's evaluator on one model file. A metric that is not a finite number (NaN from a failed
 * evaluation, an overflow) would be compared as if it were one: NaN never meets the target and
 * makes every comparison false, infinity meets any target. */
static calq_status evaluate(const search *s, const char *model, const char *weights, double *metric, calq_error *err)
{
    CALQ_TRY(s->o.evaluator(s->o.evaluator_user, model, weights, metric, err));
    if (!isfinite(*metric))
        return calq__fail(err, CALQ_ERR_DATA, NULL,
                          "fallback: the evaluator's metric for %s is %g, not a finite number", model, *metric);
    return CALQ_OK;
}

/* The metric of the model with the layers of `is_float` (indices into s's enabled layers) in
 * float; with `ranking` non-NULL also the isolated comparison (owner: caller). */
static calq_status trial(search *s, const bool *is_float, double *metric, calq_compare_result **ranking,
                         calq_error *err)
{
    double t = now();
    calq_config *c = calq__config_clone(s->cfg);
    if (!c) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "fallback: out of memory");
    int n_on = 0;
    for (int k = 0; k < s->n; k++) {
        c->layers[s->cfg_index[k]].quant_enable = !is_float[k];
        n_on += !is_float[k];
    }
    char cfg_path[4200], prefix[4200], model[4300], weights[4300];
    snprintf(cfg_path, sizeof cfg_path, "%s/trial_config.json", s->dir);
    snprintf(prefix, sizeof prefix, "%s/trial", s->dir);
    bool caffe = s->m->format == CALQ_FORMAT_CAFFE;
    bool qdq = (s->o.measure & ~CALQ_SAVE_REDUCE_RANGE) == CALQ_SAVE_QDQ;
    if (qdq)
        snprintf(model, sizeof model, "%s_qdq.onnx", prefix);
    else
        snprintf(model, sizeof model, "%s_fake_quant_model.%s", prefix, caffe ? "prototxt" : "onnx");
    snprintf(weights, sizeof weights, "%s_fake_quant_weights.caffemodel", prefix);
    calq_status st = CALQ_OK;
    calq_model *q = NULL;
    if (n_on == 0) { /* everything float: the float model itself (unknown for a model read from memory) */
        if (s->o.evaluator && s->m->path)
            st = evaluate(s, s->m->path, caffe ? s->m->weights_path : NULL, metric, err);
        else
            *metric = s->o.evaluator ? NAN : 1.0;
        calq_config_free(c);
        s->n_trials++;
        return st;
    }
    st = calq_config_save(c, cfg_path, err);
    calq_config_free(c);
    if (st == CALQ_OK) {
        /* quiet: the trials' saves are not the user's outputs */
        calq_save_format f = s->o.measure;
        st = calq__save_models_quiet(s->m, s->record, cfg_path, &f, 1, prefix, err);
    }
    if (st == CALQ_OK) st = load_like(s, model, caffe ? weights : NULL, &q, err);
    if (st == CALQ_OK && s->o.evaluator && !ranking) {
        st = evaluate(s, model, caffe ? weights : NULL, metric, err);
    } else if (st == CALQ_OK) {
        calq_compare_opts co;
        calq_compare_opts_init(&co);
        co.outputs_only = ranking == NULL;
        co.isolated = ranking != NULL;
        co.sensitivity = ranking != NULL && !s->o.rank_isolated;
        co.batch_num = s->nb;
        co.n_threads = s->o.n_threads;
        co.log = 0;
        calq_compare_result *r = NULL;
        st = calq_compare(s->m, q, s->o.eval_data ? s->o.eval_data : s->data, &co, NULL, NULL, &r, err);
        if (st == CALQ_OK) {
            double worst = 1.0;
            for (int i = 0; i < r->n_outputs; i++) /* integer outputs (count 0) are not compared */
                if (r->outputs[i].s.count &&
                    (r->outputs[i].s.cosine_min < worst || r->outputs[i].s.cosine_min != r->outputs[i].s.cosine_min))
                    worst = r->outputs[i].s.cosine_min;
            *metric = worst;
            if (ranking)
                *ranking = r;
            else
                calq_compare_result_free(r);
        }
        if (st == CALQ_OK && ranking && s->o.evaluator) st = evaluate(s, model, caffe ? weights : NULL, metric, err);
    }
    calq_model_free(q);
    s->n_trials++;
    double dt = now() - t;
    if (dt > s->trial_s) s->trial_s = dt;
    if (st != CALQ_OK) calq__prefix(err, "fallback trial %d (%d layers float)", s->n_trials, s->n - n_on);
    return st;
}

/* Room for one more trial in the budget (the longest trial so far as the estimate). */
static bool time_left(const search *s)
{
    return s->o.time_budget <= 0.0 || now() - s->t0 + s->trial_s <= s->o.time_budget;
}

static int count(const bool *v, int n)
{
    int k = 0;
    for (int i = 0; i < n; i++) k += v[i];
    return k;
}

static void set_unit(const search *s, bool *is_float, int u, bool v)
{
    for (int k = 0; k < s->n; k++)
        if (s->unit[k] == u) is_float[k] = v;
}

/* "a+b+c": the names of a unit's layers. */
static void unit_name(const search *s, int u, char *buf, size_t n)
{
    size_t at = 0;
    buf[0] = 0;
    for (int k = 0; k < s->n && at + 4 < n; k++)
        if (s->unit[k] == u)
            at += (size_t)snprintf(buf + at, n - at, "%s%s", at ? "+" : "", s->cfg->layers[s->cfg_index[k]].name);
}

static void list_float(const search *s, const bool *is_float, char *buf, size_t n)
{
    size_t at = 0;
    buf[0] = 0;
    for (int k = 0; k < s->n && at + 4 < n; k++)
        if (is_float[k])
            at += (size_t)snprintf(buf + at, n - at, "%s%s", at ? ", " : "", s->cfg->layers[s->cfg_index[k]].name);
}

static calq_status add_step(calq_fallback_result *r, const char *layer, bool pruned, double metric, calq_error *err)
{
    calq_fallback_step *st = realloc(r->steps, sizeof *st * (size_t)(r->n_steps + 1));
    if (!st) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "fallback: out of memory");
    r->steps = st;
    st[r->n_steps] = (calq_fallback_step){strdup(layer), pruned, metric};
    if (!st[r->n_steps].layer) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "fallback: out of memory");
    r->n_steps++;
    return CALQ_OK;
}

void calq_fallback_result_free(calq_fallback_result *r)
{
    if (!r) return;
    for (int i = 0; i < r->n_float; i++) free(r->float_layers[i]);
    for (int i = 0; i < r->n_ranked; i++) free(r->ranked[i]);
    for (int i = 0; i < r->n_steps; i++) free(r->steps[i].layer);
    free(r->float_layers);
    free(r->ranked);
    free(r->isolated_cosine);
    free(r->ranking_cosine);
    free(r->steps);
    free(r);
}

/* The ranking: enabled layers worst first by calq_compare_worst_first (the outputs' cosine with
 * the layer alone quantized, else its isolated cosine); layers compare did not find keep their
 * config order at the end. order[] gets indices into s's enabled layers. */
static calq_status rank(search *s, const calq_compare_result *cr, int *order, calq_fallback_result *r, calq_error *err)
{
    int *worst = malloc(sizeof(int) * ((size_t)cr->n_layers + 1));
    bool *used = calloc((size_t)s->n + 1, sizeof(bool));
    r->ranked = calloc((size_t)s->n + 1, sizeof(char *));
    r->isolated_cosine = calloc((size_t)s->n + 1, sizeof(double));
    r->ranking_cosine = calloc((size_t)s->n + 1, sizeof(double));
    if (!worst || !used || !r->ranked || !r->isolated_cosine || !r->ranking_cosine) {
        free(worst);
        free(used);
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "fallback: out of memory");
    }
    calq_compare_worst_first(cr, worst);
    int n = 0;
    for (int i = 0; i < cr->n_layers; i++) {
        const calq_compare_layer *l = &cr->layers[worst[i]];
        for (int k = 0; k < s->n; k++)
            if (!used[k] && strcmp(s->cfg->layers[s->cfg_index[k]].name, l->name) == 0) {
                used[k] = true;
                r->isolated_cosine[n] = l->has_isolated ? l->iso.cosine : NAN;
                r->ranking_cosine[n] = l->has_sensitivity ? l->sens.cosine
                                       : l->has_isolated  ? l->iso.cosine
                                                          : l->acc.cosine;
                r->ranked_by_outputs |= l->has_sensitivity;
                order[n++] = k;
            }
    }
    for (int k = 0; k < s->n; k++)
        if (!used[k]) r->isolated_cosine[n] = NAN, r->ranking_cosine[n] = 1.0, order[n++] = k;
    for (int i = 0; i < n; i++)
        if (!(r->ranked[i] = strdup(s->cfg->layers[s->cfg_index[order[i]]].name))) {
            r->n_ranked = i;
            free(worst);
            free(used);
            return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "fallback: out of memory");
        }
    r->n_ranked = n;
    free(worst);
    free(used);
    return CALQ_OK;
}

/* The record without the float layers and the config with them disabled, atomically. */
static calq_status write_result(search *s, const bool *is_float, const char *config, calq_error *err)
{
    calq_record *rec = NULL;
    CALQ_TRY(calq__record_read_file(s->record, &rec, err));
    calq_record *out = calq__record_new();
    calq_config *c = calq__config_clone(s->cfg);
    calq_status st = out && c ? CALQ_OK : calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "fallback: out of memory");
    for (int k = 0; st == CALQ_OK && k < s->n; k++) c->layers[s->cfg_index[k]].quant_enable = !is_float[k];
    for (int i = 0; st == CALQ_OK && i < rec->n_layers; i++) {
        const calq_layer_config *lc = calq__config_find(c, rec->layers[i].name);
        if (lc && !lc->quant_enable) continue;
        calq_record_layer *d = calq__record_add(out, rec->layers[i].name, err), *src = &rec->layers[i];
        if (!d) {
            st = err->status;
            break;
        }
        /* move the entry's arrays over (rec is freed below) */
        char *name = d->name;
        *d = *src;
        d->name = name;
        src->scale_w = NULL;
        src->offset_w = NULL;
        src->shift_bit = NULL;
        src->n_scale_w = src->n_offset_w = src->n_shift_bit = 0;
    }
    if (st == CALQ_OK) st = calq_config_save(c, config, err);
    if (st == CALQ_OK) st = calq__record_write_file(out, s->record, err);
    calq_config_free(c);
    calq__record_free(out);
    calq__record_free(rec);
    return st;
}

static calq_status run(search *s, const char *config, calq_fallback_result *r, calq_error *err)
{
    bool *is_float = calloc((size_t)s->n + 1, sizeof(bool)), *best_set = calloc((size_t)s->n + 1, sizeof(bool));
    bool *tried = calloc((size_t)s->n + 1, sizeof(bool));
    int *order = malloc(sizeof(int) * ((size_t)s->n + 1)), *cand = malloc(sizeof(int) * ((size_t)s->n + 1));
    calq_compare_result *cr = NULL;
    char list[2048];
    calq_status st = is_float && best_set && tried && order && cand
                         ? CALQ_OK
                         : calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "fallback: out of memory");
    double cur = 0.0;
    /* the float model's figure (the evaluator's; 1 for the cosine) and the all-quantized one, with
     * the ranking from the same pass */
    if (st == CALQ_OK) {
        bool *all = calloc((size_t)s->n + 1, sizeof(bool));
        for (int k = 0; all && k < s->n; k++) all[k] = true;
        st = all ? trial(s, all, &r->metric_float, NULL, err)
                 : calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "fallback: out of memory");
        free(all);
    }
    double t_rank = now();
    if (st == CALQ_OK) st = trial(s, is_float, &cur, &cr, err);
    if (st == CALQ_OK) st = rank(s, cr, order, r, err);
    r->ranking_seconds = now() - t_rank;
    r->metric_before = r->metric_after = cur;
    if (st == CALQ_OK && s->o.log) {
        size_t at = 0;
        list[0] = 0;
        for (int i = 0; i < r->n_ranked && i < 5; i++)
            at += (size_t)snprintf(list + at, sizeof list - at, "%s%s %.5f", i ? ", " : "", r->ranked[i],
                                   r->ranking_cosine[i]);
        calq__log(CALQ_LOG_INFO, "calq: sensitivity: %d layers ranked in %.1f s (worst %s: %s%s)", r->n_ranked,
                  r->ranking_seconds,
                  r->ranked_by_outputs ? "output cosine with the layer alone quantized" : "isolated cosine", list,
                  r->n_ranked > 5 ? ", ..." : "");
        calq__log(CALQ_LOG_INFO, "calq: every layer quantized: %s %.5f (target %s %.5g; float model %.5g)",
                  s->o.evaluator ? "metric" : "min output cosine", cur, s->o.lower_is_better ? "<=" : ">=", s->o.target,
                  r->metric_float);
    }
    int max_float = s->o.max_float_layers > 0 && s->o.max_float_layers < s->n ? s->o.max_float_layers : s->n;
    int look = s->o.lookahead > 0 ? s->o.lookahead : 4;
    double best = cur;
    memcpy(best_set, is_float, sizeof(bool) * (size_t)s->n);
    bool met = meets(s, cur), widened = false;
    /* the ranking by unit (a unit ranks where its worst layer ranks) */
    int n_units = 0;
    for (int i = 0; st == CALQ_OK && i < s->n; i++) {
        int u = s->unit[order[i]];
        bool seen = false;
        for (int j = 0; j < n_units && !seen; j++) seen = order[j] == u;
        if (!seen) order[n_units++] = u;
    }
    /* grow; here[u]: unit u was measured on top of the current set, with metric mk[u] */
    bool *here = calloc((size_t)s->n + 1, sizeof(bool));
    double *mk = calloc((size_t)s->n + 1, sizeof(double));
    int *added = malloc(sizeof(int) * ((size_t)s->n + 1)), n_added = 0;
    if (st == CALQ_OK && (!here || !mk || !added))
        st = calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "fallback: out of memory");
    int best_here = -1, n_here = 0, plateau = 0;
    char uname[1024];
    while (st == CALQ_OK && !met && count(is_float, s->n) < max_float && time_left(s)) {
        int nc = 0, nf = count(is_float, s->n);
        for (int i = 0; i < n_units && nc < look; i++) {
            int u = order[i];
            if (!is_float[u] && !here[u] && nf + s->unit_size[u] <= max_float) cand[nc++] = u;
        }
        for (int j = 0; j < nc && st == CALQ_OK; j++) {
            if (j > 0 && !time_left(s)) {
                nc = j;
                break;
            }
            int u = cand[j];
            set_unit(s, is_float, u, true);
            st = trial(s, is_float, &mk[u], NULL, err);
            set_unit(s, is_float, u, false);
            here[u] = true;
            n_here++;
            if (st == CALQ_OK && (best_here < 0 || better(s, mk[u], mk[best_here]))) best_here = u;
            if (st == CALQ_OK && meets(s, mk[u])) break; /* reaches the target: no need to measure the rest */
        }
        if (st != CALQ_OK || best_here < 0) break;
        /* re-rank: what was measured on this set first, in the order of the measures */
        int at = 0;
        for (int i = 0; i < n_units; i++)
            if (here[order[i]]) cand[at++] = order[i];
        for (int x = 0; x < at; x++)
            for (int y = x + 1; y < at; y++)
                if (better(s, mk[cand[y]], mk[cand[x]])) {
                    int t = cand[x];
                    cand[x] = cand[y];
                    cand[y] = t;
                }
        for (int i = 0; i < n_units; i++)
            if (!here[order[i]]) cand[at++] = order[i];
        memcpy(order, cand, sizeof(int) * (size_t)n_units);
        bool gain = better(s, mk[best_here], cur);
        if (!gain && !widened && nc > 0) { /* nothing measured helps: twice the lookahead once */
            widened = true;
            continue;
        }
        /* Still nothing: take the best measured anyway, twice in a row at most. Quantization
         * errors partly cancel, so a layer can help only together with the next one (PAN: the
         * 3rd and 4th layers gained 0.0005 and 0.00006, the 5th 0.0035); the best set seen is
         * what is kept, and pruning drops what the target does not need. */
        if (!gain && (plateau >= 2 || nc == 0)) break;
        plateau = gain ? 0 : plateau + 1;
        int u = best_here;
        unit_name(s, u, uname, sizeof uname);
        if (s->o.log) {
            size_t n2 = 0;
            char un[1024];
            list[0] = 0;
            for (int i = 0, shown = 0; i < n_units && shown < 8 && n2 < sizeof list - 64; i++)
                if (here[order[i]]) {
                    unit_name(s, order[i], un, sizeof un);
                    n2 += (size_t)snprintf(list + n2, sizeof list - n2, "%s%s %.5f", shown++ ? ", " : "", un,
                                           mk[order[i]]);
                }
            calq__log(CALQ_LOG_INFO, "calq: step %d: %s float: %.5f%s (measured %d: %s)", r->n_steps + 1, uname, mk[u],
                      plateau ? ", no gain: going on" : "", n_here, list);
        }
        set_unit(s, is_float, u, true);
        for (int k = 0; k < s->n; k++)
            if (s->unit[k] == u) added[n_added++] = k;
        cur = mk[u];
        met = meets(s, cur);
        st = add_step(r, uname, false, cur, err);
        memset(here, 0, sizeof(bool) * (size_t)s->n);
        best_here = -1;
        n_here = 0;
        widened = false;
        if (better(s, cur, best) || met) {
            best = cur;
            memcpy(best_set, is_float, sizeof(bool) * (size_t)s->n);
        }
    }
    /* prune, layer by layer (a unit's layers too), the earliest additions first, from the best set:
     * a layer goes back to int8 when the target stays met, or, when it was not met, when the
     * metric is no worse than the best (steps taken without a gain leave such layers) */
    memcpy(is_float, best_set, sizeof(bool) * (size_t)s->n);
    met = meets(s, best);
    for (int i = 0; st == CALQ_OK && count(is_float, s->n) > 1 && i < n_added && time_left(s); i++) {
        int k = added[i];
        if (tried[k] || !is_float[k]) continue;
        tried[k] = true;
        is_float[k] = false;
        double v = 0.0;
        st = trial(s, is_float, &v, NULL, err);
        if (st == CALQ_OK && (met ? meets(s, v) : !better(s, best, v))) {
            cur = v;
            best = v;
            memcpy(best_set, is_float, sizeof(bool) * (size_t)s->n);
            st = add_step(r, s->cfg->layers[s->cfg_index[k]].name, true, v, err);
            if (s->o.log)
                calq__log(CALQ_LOG_INFO, "calq: pruned: %s back to int8: %.5f, %s",
                          s->cfg->layers[s->cfg_index[k]].name, v,
                          met ? "still meets the target" : "no worse than with it in float");
        } else {
            is_float[k] = true;
        }
    }
    free(here);
    free(mk);
    free(added);
    if (st == CALQ_OK) {
        r->met = meets(s, best);
        r->metric_after = best;
        r->n_float = count(best_set, s->n);
        r->float_layers = calloc((size_t)r->n_float + 1, sizeof(char *));
        if (!r->float_layers) st = calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "fallback: out of memory");
        int j = 0;
        for (int k = 0; st == CALQ_OK && k < s->n; k++)
            if (best_set[k] && !(r->float_layers[j++] = strdup(s->cfg->layers[s->cfg_index[k]].name)))
                st = calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "fallback: out of memory");
    }
    if (st == CALQ_OK) st = write_result(s, best_set, config, err);
    r->n_trials = s->n_trials;
    r->seconds = now() - s->t0;
    if (st == CALQ_OK && s->o.log) {
        list_float(s, best_set, list, sizeof list);
        calq__log(CALQ_LOG_INFO, "calq: %s %.5f -> %.5f%s%s%s: %s, %d of %d layers float; %d trials in %.1f s",
                  s->o.evaluator ? "metric" : "min output cosine", r->metric_before, r->metric_after,
                  r->n_float ? " (" : "", list, r->n_float ? " float)" : "",
                  r->met ? "target met" : "target NOT met (the best found is kept)", r->n_float, s->n, r->n_trials,
                  r->seconds);
    }
    calq_compare_result_free(cr);
    free(is_float);
    free(best_set);
    free(tried);
    free(order);
    free(cand);
    return st;
}

calq_status calq_fallback(calq_model *m, const char *record, const char *config, calq_data *data,
                          const calq_fallback_opts *opts, calq_fallback_result **out, calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, out);
    *out = NULL;
    CALQ_REQUIRE(err, m);
    CALQ_REQUIRE(err, record);
    CALQ_REQUIRE(err, config);
    CALQ_REQUIRE(err, data);
    /* A calibration's record and config staged in opts->outputs are read and rewritten in their
     * temporary files (replaced atomically, flushed): the set's commit renames what is there then. */
    calq_outputs *staged = opts ? opts->outputs : NULL;
    record = calq__outputs_source(staged, record);
    config = calq__outputs_source(staged, config);
    search s = {.m = m, .record = record, .data = data, .t0 = now()};
    calq_fallback_opts_init(&s.o);
    if (opts) s.o = *opts;
    /* a NaN target is never met, so the search would put every layer back to float and report
     * "not met"; an infinite one is the same or always met: refused, as a non-finite metric is */
    if (!isfinite(s.o.target) || !isfinite(s.o.time_budget) || s.o.time_budget < 0)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL,
                          "calq_fallback: the target (%g) and the time budget (%g s, 0: none) must be finite numbers, "
                          "the budget not negative",
                          s.o.target, s.o.time_budget);
    calq_config *cfg = NULL;
    CALQ_TRY(calq_config_load(m, config, &cfg, err));
    s.cfg = cfg;
    s.nb = s.o.eval_batches > 0 ? s.o.eval_batches
           : s.o.eval_data      ? calq_data_num_batches(s.o.eval_data)
                                : cfg->batch_num;
    calq_fallback_result *r = calloc(1, sizeof *r);
    s.cfg_index = malloc(sizeof(int) * ((size_t)cfg->n_layers + 1));
    calq_status st = r && s.cfg_index ? CALQ_OK : calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    for (int i = 0; st == CALQ_OK && i < cfg->n_layers; i++)
        if (cfg->layers[i].quant_enable) s.cfg_index[s.n++] = i;
    if (st == CALQ_OK && s.n == 0)
        st = calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL, "fallback: the config enables no layer");
    calq_save_format kind = (calq_save_format)(s.o.measure & ~CALQ_SAVE_REDUCE_RANGE);
    bool reduce = (s.o.measure & CALQ_SAVE_REDUCE_RANGE) != 0;
    if (st == CALQ_OK && !(kind == CALQ_SAVE_ASCEND_FAKE_QUANT && !reduce) && kind != CALQ_SAVE_QDQ)
        st = calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL,
                        "fallback: opts.measure must be CALQ_SAVE_ASCEND_FAKE_QUANT or CALQ_SAVE_QDQ (optionally | "
                        "CALQ_SAVE_REDUCE_RANGE), not %d",
                        (int)s.o.measure);
    if (st == CALQ_OK && kind == CALQ_SAVE_QDQ && m->format == CALQ_FORMAT_CAFFE)
        st = calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL,
                        "fallback: a Caffe model has no QDQ file to measure; use CALQ_SAVE_ASCEND_FAKE_QUANT");
    s.unit = malloc(sizeof(int) * ((size_t)s.n + 1));
    s.unit_size = calloc((size_t)s.n + 1, sizeof(int));
    if (st == CALQ_OK && (!s.unit || !s.unit_size)) st = calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    for (int k = 0; st == CALQ_OK && k < s.n; k++) {
        int nk = calq__model_find_node(m, cfg->layers[s.cfg_index[k]].name);
        const char *in = nk >= 0 ? calq_model_node_input(m, nk, 0) : NULL;
        s.unit[k] = k;
        for (int j = 0; j < k && in && s.unit[k] == k; j++) {
            int nj = calq__model_find_node(m, cfg->layers[s.cfg_index[j]].name);
            const char *jn = nj >= 0 ? calq_model_node_input(m, nj, 0) : NULL;
            if (jn && !strcmp(in, jn)) s.unit[k] = s.unit[j];
        }
        s.unit_size[s.unit[k]]++;
    }
    if (st == CALQ_OK) {
        r->n_layers = s.n;
        if (s.o.work_dir) {
            snprintf(s.dir, sizeof s.dir, "%s", s.o.work_dir);
        } else {
            const char *tmp = getenv("TMPDIR");
            snprintf(s.dir, sizeof s.dir, "%s/calq_fallback_XXXXXX", tmp && *tmp ? tmp : "/tmp");
            if (!mkdtemp(s.dir))
                st = calq__fail(err, CALQ_ERR_IO, NULL, "fallback: cannot create a folder for the trial models (%s)",
                                s.dir);
            s.own_dir = true;
        }
    }
    if (st == CALQ_OK) st = run(&s, config, r, err);
    if (s.own_dir) { /* the trial files, then the folder */
        static const char *const files[] = {"trial_config.json", "trial_fake_quant_model.onnx",
                                            "trial_fake_quant_model.prototxt", "trial_fake_quant_weights.caffemodel",
                                            "trial_qdq.onnx"};
        char p[4300];
        for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
            snprintf(p, sizeof p, "%s/%s", s.dir, files[i]);
            unlink(p);
        }
        rmdir(s.dir);
    }
    free(s.cfg_index);
    free(s.unit);
    free(s.unit_size);
    calq_config_free(cfg);
    if (st != CALQ_OK) {
        calq_fallback_result_free(r);
        return st;
    }
    *out = r;
    return CALQ_OK;
}
