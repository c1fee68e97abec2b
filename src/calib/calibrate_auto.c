/* act_algo "auto" (docs/numerics.md): for each layer, the candidate algorithm whose factors give
 * the smallest error of that layer's output on the calibration data.
 *
 * Every candidate (IFMR, HFMG, minmax, percentile, kl, mse) has been computed by the usual passes
 * (calibrate_slots.c). One more pass runs a graph (graph/splice.h) holding the float model and,
 * right after each auto layer, one copy of the layer per distinct candidate:
 *     x -> AscendQuant{1/scale_d, offset_d} -> AscendAntiQuant{scale_d, -offset_d}   (§9.1, §9.3)
 *       -> the layer with its weights fake-quantized by ARQ (§6.1) -> y_k,  d_k = y_k - y_float
 * and sums d_k^2 over all elements and batches in double, in element order (the kernels give the
 * same bits for any thread count, so the sums do too). The smallest sum wins; a tie goes to the
 * earlier candidate, IFMR first, so auto is never worse than IFMR on this error. Layers sharing an
 * input tensor share a calibrator (§3.2) and are judged by the sum over all of them. Memory: the
 * session's arena plus the fake-quantized weights, independent of batch_num. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/log.h"
#include "calib/calibrate.h"
#include "calib/data.h"
#include "exec/session.h"
#include "frontend/model.h"
#include "graph/quantizable.h"
#include "graph/splice.h"

typedef struct auto_obs {
    char *name; /* the d_k value */
    int group, slot;
} auto_obs;

typedef struct auto_ctx {
    calq__calib *cal;
    auto_obs *obs;
    int n_obs, cap_obs;
    int *xd; /* per (group, slot): the fake-quantized input value in the new graph, or -1 */
} auto_ctx;

/* The layer's weight fake-quantized by ARQ with the layer's options (owned by the caller). */
static calq_tensor *fake_weight(const calq__calib *cal, const calq__calib_layer *l, const calq_node *n, calq_error *err)
{
    const calq_qkind *k = l->cfg->kind;
    const calq_tensor *w = cal->g->values[n->inputs[k->weight_input]].constant;
    calq_weight_layout layout = k->layout;
    int group = calq__qkind_group(k, n);
    calq_arq_opts ao;
    calq__config_arq_opts(l->cfg, &ao);
    int64_t numel = calq_tensor_numel(w);
    calq_tensor *t = calloc(1, sizeof *t);
    float *s = malloc(sizeof(float) * (size_t)(l->n_w + 1));
    int *o = malloc(sizeof(int) * (size_t)(l->n_w + 1));
    if (t) t->data = malloc(sizeof(float) * (size_t)(numel + 1));
    if (!t || !t->data || !s || !o) {
        if (t) free(t->data);
        free(t);
        free(s);
        free(o);
        calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, l->cfg->name, "auto: out of memory");
        return NULL;
    }
    t->dtype = CALQ_DTYPE_FLOAT32;
    t->ndim = w->ndim;
    memcpy(t->dims, w->dims, sizeof t->dims);
    calq_status st = calq_arq_quantize(w, layout, group, &ao, l->cfg->name, s, o, NULL, t->data, err);
    free(s);
    free(o);
    if (st != CALQ_OK) {
        calq_tensor_free_data(t);
        free(t);
        return NULL;
    }
    return t;
}

static calq_status add_obs(auto_ctx *x, const char *name, int group, int slot, calq_error *err)
{
    if (x->n_obs == x->cap_obs) {
        int cap = x->cap_obs ? 2 * x->cap_obs : 32;
        auto_obs *o = realloc(x->obs, sizeof *o * (size_t)cap);
        if (!o) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "auto: out of memory");
        x->obs = o;
        x->cap_obs = cap;
    }
    if (!(x->obs[x->n_obs].name = strdup(name))) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    x->obs[x->n_obs].group = group;
    x->obs[x->n_obs].slot = slot;
    x->n_obs++;
    return CALQ_OK;
}

/* The candidate copies of layer node `ni` (an enabled layer of an auto group) after it. */
static calq_status after_node(void *user, calq_graph *g, int ni, calq_error *err)
{
    auto_ctx *x = user;
    calq__calib *cal = x->cal;
    const calq_node *n = &cal->g->nodes[ni];
    int li = -1;
    for (int i = 0; i < cal->n_layers && li < 0; i++)
        if (strcmp(cal->layers[i].cfg->name, n->name) == 0) li = i;
    if (li < 0) return CALQ_OK;
    const calq__calib_layer *l = &cal->layers[li];
    const calq__calib_group *gr = &cal->groups[l->group];
    if (!gr->auto_pending || l->w_failed) return CALQ_OK;
    char name[CALQ_ERROR_NAME_MAX + 64];
    int wv = -1;
    if (l->cfg->kind->weights == CALQ_QKIND_WEIGHTS_CONST) {
        calq_tensor *w = fake_weight(cal, l, n, err);
        snprintf(name, sizeof name, "calq.auto/%s/weight", n->name);
        if (!w || (wv = calq__graph_new_value(g, name, w, true, err)) < 0) return err->status;
    }
    for (int k = 0; k < gr->n_slots; k++) {
        const calq__calib_slot *s = &gr->slot[k];
        if (s->failed || s->same_as >= 0) continue;
        int *xd = &x->xd[l->group * CALQ__MAX_SLOTS + k];
        if (*xd < 0) { /* the group's quantize-dequantize of this candidate, once */
            char qn[CALQ_ERROR_NAME_MAX + 64], an[CALQ_ERROR_NAME_MAX + 64];
            snprintf(qn, sizeof qn, "calq.auto/%s/%d/q", gr->tensor, k);
            snprintf(an, sizeof an, "calq.auto/%s/%d/x", gr->tensor, k);
            int in = n->inputs[0], q = calq__graph_new_value(g, qn, NULL, false, err);
            int a = q < 0 ? -1 : calq__graph_new_value(g, an, NULL, false, err);
            if (a < 0) return err->status;
            int qi = calq__graph_new_node(g, qn, "AscendQuant", &in, 1, &q, 1, err);
            if (qi < 0) return err->status;
            if (!calq__node_set_float(g, qi, "scale", 1.0f / s->scale_d) ||
                !calq__node_set_float(g, qi, "offset", (float)s->offset_d) ||
                !calq__node_set_int(g, qi, "sqrt_mode", 0) || !calq__node_set_str(g, qi, "round_mode", "Round") ||
                !calq__node_set_str(g, qi, "dst_type", "INT8"))
                return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "auto: out of memory");
            int ai = calq__graph_new_node(g, an, "AscendAntiQuant", &q, 1, &a, 1, err);
            if (ai < 0) return err->status;
            if (!calq__node_set_float(g, ai, "scale", s->scale_d) ||
                !calq__node_set_float(g, ai, "offset", (float)-s->offset_d) ||
                !calq__node_set_int(g, ai, "sqrt_mode", 0))
                return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "auto: out of memory");
            *xd = a;
        }
        int in[16], out[8];
        if (n->n_inputs > 16 || n->n_outputs > 8 || n->n_outputs < 1)
            return calq__fail(err, CALQ_ERR_UNSUPPORTED, n->name, "auto: layer %s has too many inputs", n->name);
        for (int j = 0; j < n->n_inputs; j++) in[j] = n->inputs[j];
        in[0] = *xd;
        if (wv >= 0) in[l->cfg->kind->weight_input] = wv;
        for (int j = 0; j < n->n_outputs; j++) {
            snprintf(name, sizeof name, "calq.auto/%s/%d/y%d", n->name, k, j);
            if ((out[j] = calq__graph_new_value(g, name, NULL, false, err)) < 0) return err->status;
        }
        snprintf(name, sizeof name, "calq.auto/%s/%d/layer", n->name, k);
        if (calq__graph_copy_node(g, n, name, in, out, err) < 0) return err->status;
        int sub_in[2] = {out[0], n->outputs[0]}, d;
        snprintf(name, sizeof name, "calq.auto/%s/%d/d", n->name, k);
        if ((d = calq__graph_new_value(g, name, NULL, false, err)) < 0) return err->status;
        if (calq__graph_new_node(g, name, "Sub", sub_in, 2, &d, 1, err) < 0) return err->status;
        CALQ_TRY(add_obs(x, name, l->group, k, err));
    }
    return CALQ_OK;
}

static int observe(void *user, const char *tensor, const calq_tensor *t)
{
    auto_ctx *x = user;
    for (int i = 0; i < x->n_obs; i++) {
        if (strcmp(x->obs[i].name, tensor) != 0) continue;
        if (t->dtype != CALQ_DTYPE_FLOAT32) return 0;
        const float *d = t->data;
        int64_t n = calq_tensor_numel(t);
        double s = 0.0;
        for (int64_t j = 0; j < n; j++) s += (double)d[j] * (double)d[j]; /* element order: deterministic */
        x->cal->groups[x->obs[i].group].slot[x->obs[i].slot].sse += s;
        return 0;
    }
    return 0;
}

static void choose(calq__calib *cal, calq__calib_group *gr)
{
    int best = -1;
    for (int k = 0; k < gr->n_slots; k++) {
        calq__calib_slot *s = &gr->slot[k];
        if (s->failed) continue;
        if (s->same_as >= 0) s->sse = gr->slot[s->same_as].sse;
        if (best < 0 || s->sse < gr->slot[best].sse) best = k;
    }
    gr->chosen = best;
    gr->scale_d = gr->slot[best].scale_d;
    gr->offset_d = gr->slot[best].offset_d;
    gr->done = true;
    gr->auto_pending = false;
    if (!cal->log) return;
    char line[1024];
    size_t at = 0;
    for (int k = 0; k < gr->n_slots && at < sizeof line; k++) {
        const calq__calib_slot *s = &gr->slot[k];
        const char *nm = calq__act_algo(s->algo)->name;
        if (s->failed)
            at += (size_t)snprintf(line + at, sizeof line - at, "%s%s failed", k ? ", " : "", nm);
        else
            at += (size_t)snprintf(line + at, sizeof line - at, "%s%s %.4g", k ? ", " : "", nm, s->sse);
    }
    calq__log(CALQ_LOG_INFO, "calq: act_algo auto: layer %s: %s (squared error of the layer output: %s)",
              cal->layers[gr->first_layer].cfg->name, calq__act_algo(gr->slot[best].algo)->name, line);
}

calq_status calq__calib_auto(calq__calib *cal, calq_error *err)
{
    auto_ctx x = {.cal = cal};
    x.xd = malloc(sizeof(int) * (size_t)(cal->n_groups * CALQ__MAX_SLOTS + 1));
    if (!x.xd) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "auto: out of memory");
    for (int i = 0; i < cal->n_groups * CALQ__MAX_SLOTS; i++) x.xd[i] = -1;
    calq_graph *g = NULL;
    calq_session *s = NULL;
    int n_in = calq_model_num_inputs(cal->m);
    calq_tensor *ins = calloc((size_t)n_in + 1, sizeof *ins);
    const char **names = NULL;
    calq_status st = ins ? calq__graph_splice(cal->g, after_node, &x, &g, err)
                         : calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "auto: out of memory");
    /* the graph is folded already (cal->g); the session runs it as it is */
    calq_session_opts so = {.n_threads = cal->n_threads, .no_fusion = 1, .max_arena_bytes = cal->max_arena_bytes};
    if (st == CALQ_OK) st = calq__session_create_graph(g, &so, &s, err);
    if (st == CALQ_OK && !(names = malloc(sizeof *names * (size_t)(x.n_obs + 1))))
        st = calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "auto: out of memory");
    for (int i = 0; st == CALQ_OK && i < x.n_obs; i++) names[i] = x.obs[i].name;
    if (st == CALQ_OK && x.n_obs) st = calq_session_set_observer(s, observe, &x, names, x.n_obs, err);
    if (st == CALQ_OK) st = calq__calib_inputs_alloc(cal->m, cal->data, ins, n_in, err);
    cal->pass++; /* the evaluation pass, after the calibrators' */
    for (int b = 0; st == CALQ_OK && b < cal->batch_num; b++) {
        cal->batch = b;
        st = calq__data_read_batch_resize(cal->data, b, ins, n_in, err);
        if (st == CALQ_OK && (st = calq_session_run(s, ins, n_in, err)) != CALQ_OK) {
            char src[1024];
            calq__prefix(err, "act_algo auto, evaluation of batch %d (%s)", b,
                         calq_data_batch_source(cal->data, b, src, sizeof src));
        }
        cal->runs_done++;
        if (st == CALQ_OK) st = calq__calib_progress(cal, err);
    }
    for (int k = 0; st == CALQ_OK && k < cal->n_groups; k++)
        if (cal->groups[k].auto_pending) choose(cal, &cal->groups[k]);
    for (int i = 0; ins && i < n_in; i++) free(ins[i].data);
    free(ins);
    free(names);
    calq_session_free(s);
    calq__graph_free(g);
    for (int i = 0; i < x.n_obs; i++) free(x.obs[i].name);
    free(x.obs);
    free(x.xd);
    return st;
}
