/* calq_compare (include/calq.h): the float model and the quantized one on the same batches.
 *
 *   F = the float graph folded as Q was (match.c); the quantized layers of Q matched to it;
 *   with opts.isolated, F gets right after each layer a copy of that layer's Q nodes
 *   (graph/splice.h) fed F's own input: one float pass yields every layer quantized alone;
 *   per batch: run F (observing each layer's input, its float output, its isolated output) and
 *   Q (observing each layer's output after its dequantization), then add to the sums;
 *   with opts.sensitivity, then each layer alone quantized in F, at the outputs (sensitivity.c).
 * Only one batch's compared tensors are held (copied from the float run until Q's run compares
 * them); the sums are all that crosses batches, so memory does not grow with their number. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/error.h"
#include "base/log.h"
#include "base/threads.h"
#include "compare/compare.h"
#include "exec/session.h"
#include "frontend/model.h"
#include "graph/splice.h"

void calq_compare_opts_init(calq_compare_opts *o)
{
    if (!o) return; /* as the free functions: nothing to fill */
    memset(o, 0, sizeof *o);
    o->log = 1;
}

enum { ROLE_IN, ROLE_FOUT, ROLE_ISO, ROLE_QOUT };

typedef struct watch {
    const char *name;
    int layer, role;
} watch;

/* A tensor copy that keeps its buffer across batches. */
typedef struct held {
    void *data;
    size_t n, cap_bytes;
    bool set;
    calq_dtype dtype;
} held;

typedef struct lstate {
    calq__cmp_acc acc, iso;
    held f, i;      /* this batch's float output; an isolated output that came first */
    int iso_value;  /* in the float run's graph, or -1 */
    bool bad_shape; /* float and quantized values differ in size: not compared */
    char *iso_name; /* owned (the graph owns its copy) */
} lstate;

typedef struct ctx {
    const calq_graph *f, *q;
    const calq__cmp_match *m;
    int n;
    lstate *ls;
    calq_compare_layer *out;
    watch *w;
    int n_w;
    int n_threads;
    int *qmap; /* per Q value, while one layer is copied */
} ctx;

static calq_status oom(calq_error *err)
{
    return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "compare: out of memory");
}

static bool hold(held *h, const calq_tensor *t)
{
    size_t n = (size_t)calq_tensor_numel(t), bytes = n * calq_dtype_size(t->dtype);
    if (bytes > h->cap_bytes) {
        void *p = realloc(h->data, bytes ? bytes : 1);
        if (!p) return false;
        h->data = p;
        h->cap_bytes = bytes;
    }
    memcpy(h->data, t->data, bytes);
    h->n = n;
    h->dtype = t->dtype;
    h->set = true;
    return true;
}

/* q (float, or int8 / uint8 dequantized with the layer's factors) against the held float copy. */
static void compare_to_float(ctx *c, int li, calq__cmp_acc *a, const void *qd, calq_dtype dt, size_t n)
{
    lstate *s = &c->ls[li];
    const calq__cmp_match *m = &c->m[li];
    bool integer = m->q_int8 && dt == (m->q_uint8 ? CALQ_DTYPE_UINT8 : CALQ_DTYPE_INT8);
    if (!s->f.set || s->f.dtype != CALQ_DTYPE_FLOAT32 || s->f.n != n || (dt != CALQ_DTYPE_FLOAT32 && !integer)) {
        s->bad_shape = true;
        return;
    }
    if (integer && m->q_uint8) { /* the same integers shifted by 128: (q - zp) is unchanged */
        int8_t *t = malloc(n + 1);
        if (!t) {
            s->bad_shape = true;
            return;
        }
        const uint8_t *u = qd;
        for (size_t i = 0; i < n; i++) t[i] = (int8_t)(u[i] ^ 0x80u);
        calq__cmp_acc_add(a, s->f.data, NULL, t, m->q_scale, m->q_zp - 128, n, c->n_threads);
        free(t);
    } else if (integer) {
        calq__cmp_acc_add(a, s->f.data, NULL, qd, m->q_scale, m->q_zp, n, c->n_threads);
    } else {
        calq__cmp_acc_add(a, s->f.data, qd, NULL, 0.0f, 0, n, c->n_threads);
    }
}

/* One session's view of the watches: the float run's (roles < ROLE_QOUT) or the quantized one's. */
typedef struct side {
    ctx *c;
    bool q;
} side;

static int observe(void *user, const char *name, const calq_tensor *t)
{
    const side *sd = user;
    ctx *c = sd->c;
    size_t n = (size_t)calq_tensor_numel(t);
    for (int k = 0; k < c->n_w; k++) {
        const watch *w = &c->w[k];
        if ((w->role == ROLE_QOUT) != sd->q || strcmp(w->name, name) != 0) continue;
        lstate *s = &c->ls[w->layer];
        switch (w->role) {
        case ROLE_IN:
            if (t->dtype == CALQ_DTYPE_FLOAT32) calq__cmp_input_add(&c->out[w->layer], t->data, n);
            break;
        case ROLE_FOUT:
            if (!hold(&s->f, t)) return 1;
            if (s->i.set) compare_to_float(c, w->layer, &s->iso, s->i.data, s->i.dtype, s->i.n);
            s->i.set = false;
            break;
        case ROLE_ISO:
            if (s->f.set)
                compare_to_float(c, w->layer, &s->iso, t->data, t->dtype, n);
            else if (!hold(&s->i, t))
                return 1;
            break;
        default: compare_to_float(c, w->layer, &s->acc, t->data, t->dtype, n); break;
        }
    }
    return 0;
}

/* ---- the isolated copies ------------------------------------------------------------------ */

static calq_status add_isolated(ctx *c, calq_graph *g, int li, calq_error *err)
{
    int v = calq__cmp_copy_layer(g, c->q, &c->m[li], c->f->nodes[c->m[li].f_node].name, c->qmap, err);
    if (v < 0) return err->status;
    c->ls[li].iso_value = v;
    if (!(c->ls[li].iso_name = strdup(g->values[v].name))) return oom(err);
    return CALQ_OK;
}

static calq_status after_node(void *user, calq_graph *g, int ni, calq_error *err)
{
    ctx *c = user;
    for (int li = 0; li < c->n; li++)
        if (c->m[li].f_node == ni && c->m[li].iso) CALQ_TRY(add_isolated(c, g, li, err));
    return CALQ_OK;
}

/* ---- the run ------------------------------------------------------------------------------ */

static calq_status add_watch(ctx *c, const char *name, int layer, int role, calq_error *err)
{
    watch *w = realloc(c->w, sizeof *w * (size_t)(c->n_w + 1));
    if (!w) return oom(err);
    c->w = w;
    c->w[c->n_w++] = (watch){name, layer, role};
    return CALQ_OK;
}

/* The distinct names of the watches of one session (F: roles < ROLE_QOUT). */
static calq_status observe_names(const ctx *c, bool q, const char ***names, int *n, calq_error *err)
{
    *names = malloc(sizeof **names * (size_t)(c->n_w + 1));
    if (!*names) return oom(err);
    *n = 0;
    for (int k = 0; k < c->n_w; k++) {
        if ((c->w[k].role == ROLE_QOUT) != q) continue;
        bool dup = false;
        for (int j = 0; j < *n && !dup; j++) dup = strcmp((*names)[j], c->w[k].name) == 0;
        if (!dup) (*names)[(*n)++] = c->w[k].name;
    }
    return CALQ_OK;
}

static calq_status check_inputs(const calq_model *fm, const calq_model *qm, calq_error *err)
{
    int n = calq_model_num_inputs(fm);
    if (calq_model_num_inputs(qm) != n)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL,
                          "compare: the float model has %d inputs, the quantized one %d: is it the same model?", n,
                          calq_model_num_inputs(qm));
    for (int i = 0; i < n; i++) {
        calq_value_info a, b;
        calq_model_input_info(fm, i, &a);
        calq_model_input_info(qm, i, &b);
        bool same = a.ndim == b.ndim;
        for (int k = 0; same && k < a.ndim; k++) same = a.dims[k] == b.dims[k];
        if (!same)
            return calq__fail(err, CALQ_ERR_SHAPE, NULL,
                              "compare: input %d ('%s') has another shape in the quantized model ('%s'); give both the "
                              "same --input_shape",
                              i, a.name, b.name);
    }
    return CALQ_OK;
}

/* NaN or inf in a float input makes every figure NaN: refused naming the batch, the input and the
 * element (calibration refuses such data too, amct-reference.md §8.4). */
static calq_status check_finite(const calq_model *fm, calq_data *data, int b, const calq_tensor *ins, int n_in,
                                calq_error *err)
{
    for (int i = 0; i < n_in; i++) {
        if (ins[i].dtype != CALQ_DTYPE_FLOAT32) continue;
        const float *x = ins[i].data;
        int64_t n = calq_tensor_numel(&ins[i]);
        for (int64_t k = 0; k < n; k++)
            if (!isfinite(x[k])) {
                calq_value_info v;
                char src[1024];
                calq_model_input_info(fm, i, &v);
                return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL,
                                  "compare: batch %d (%s), input '%s': element %lld is %s; every figure would be NaN. "
                                  "Fix or drop that batch",
                                  b, calq_data_batch_source(data, b, src, sizeof src), v.name, (long long)k,
                                  x[k] != x[k] ? "NaN"
                                  : x[k] > 0   ? "+inf"
                                               : "-inf");
            }
    }
    return CALQ_OK;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static char *dup_or_empty(const char *s)
{
    return strdup(s ? s : "");
}

void calq_compare_result_free(calq_compare_result *r)
{
    if (!r) return;
    for (int i = 0; i < r->n_outputs; i++) free(r->outputs[i].name);
    for (int i = 0; i < r->n_layers; i++) {
        free(r->layers[i].name);
        free(r->layers[i].op);
        free(r->layers[i].input);
        free(r->layers[i].output);
    }
    free(r->outputs);
    free(r->layers);
    free(r->model);
    free(r->quantized);
    free(r);
}

/* The result's layer entries and their input ranges (before any batch). */
static calq_status init_layers(ctx *c, calq_compare_result *r, calq_error *err)
{
    r->layers = calloc((size_t)c->n + 1, sizeof *r->layers);
    if (!r->layers) return oom(err);
    r->n_layers = c->n;
    c->out = r->layers;
    for (int i = 0; i < c->n; i++) {
        const calq__cmp_match *m = &c->m[i];
        calq_compare_layer *l = &r->layers[i];
        const calq_node *fn = &c->f->nodes[m->f_node];
        l->name = strdup(fn->name);
        l->op = strdup(fn->op_type);
        l->input = strdup(c->f->values[m->f_in].name);
        l->output = strdup(c->f->values[m->f_out].name);
        if (!l->name || !l->op || !l->input || !l->output) return oom(err);
        l->has_range = m->has_range;
        l->scale = m->scale;
        l->offset = m->offset;
        if (m->has_range) {
            l->clip_min = (float)(m->qmin - m->offset) * m->scale;
            l->clip_max = (float)(m->qmax - m->offset) * m->scale;
            float span = l->clip_max - l->clip_min;
            l->hist_lo = l->clip_min - 0.25f * span;
            l->hist_hi = l->clip_max + 0.25f * span;
            /* A hostile quantized model's factors (an AscendQuant scale attribute of 1e-45, i.e. scale_d
             * inf; a QuantizeLinear scale of NaN or <= 0) gave an infinite, NaN or empty range, and the
             * histogram converted (v - lo) / w = NaN to a bin index (undefined behaviour): such a layer
             * is reported without a range, as one whose factors were not found. */
            if (!(isfinite(l->hist_lo) && isfinite(l->hist_hi) && isfinite(l->hist_hi - l->hist_lo) &&
                  l->hist_hi > l->hist_lo))
                l->has_range = false;
        }
    }
    return CALQ_OK;
}

calq_status calq_compare(calq_model *fm, calq_model *qm, calq_data *data, const calq_compare_opts *opts,
                         const char *model_label, const char *quantized_label, calq_compare_result **out,
                         calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, out);
    *out = NULL;
    CALQ_REQUIRE(err, fm);
    CALQ_REQUIRE(err, qm);
    CALQ_REQUIRE(err, data);
    calq_compare_opts o;
    calq_compare_opts_init(&o);
    if (opts) o = *opts;
    CALQ_TRY(calq__threads_resolve(o.n_threads, "calq_compare_opts.n_threads", &o.n_threads, err));
    double t0 = now();
    int nb = o.batch_num > 0 ? o.batch_num : 0; /* 0: every batch (a stream is read to its end here) */
    CALQ_TRY(check_inputs(fm, qm, err));
    CALQ_TRY(calq_data_check(data, fm, nb, err));
    if (nb == 0) nb = calq_data_num_batches(data);

    ctx c = {.q = qm->g, .n_threads = o.n_threads};
    calq_graph *fold = NULL, *run_g = NULL;
    calq__cmp_match *m = NULL;
    int n_float = 0, n_in = calq_model_num_inputs(fm);
    calq_session *fs = NULL, *qs = NULL;
    calq_tensor *ins = calloc((size_t)n_in + 1, sizeof *ins);
    const char **fnames = NULL, **qnames = NULL;
    held *fouts = calloc((size_t)calq_model_num_outputs(fm) + 1, sizeof *fouts);
    calq__cmp_acc *oacc = calloc((size_t)calq_model_num_outputs(fm) + 1, sizeof *oacc);
    int *qout_of = calloc((size_t)calq_model_num_outputs(fm) + 1, sizeof(int));
    calq_compare_result *r = calloc(1, sizeof *r);
    calq_status st = ins && fouts && oacc && qout_of && r ? CALQ_OK : oom(err);
    if (st == CALQ_OK) st = calq__cmp_fold_float(fm->g, qm->g, &fold, err);
    c.f = fold;
    if (st == CALQ_OK && !o.outputs_only) st = calq__cmp_match_layers(fold, qm->g, &m, &c.n, &n_float, err);
    c.m = m;
    if (st == CALQ_OK && !(c.ls = calloc((size_t)c.n + 1, sizeof *c.ls))) st = oom(err);
    for (int i = 0; st == CALQ_OK && i < c.n; i++) c.ls[i].iso_value = -1;
    if (st == CALQ_OK) st = init_layers(&c, r, err);
    if (st == CALQ_OK && o.isolated && c.n) {
        if (!(c.qmap = malloc(sizeof(int) * ((size_t)qm->g->n_values + 1))))
            st = oom(err);
        else
            st = calq__graph_splice(fold, after_node, &c, &run_g, err);
    }
    /* watches: each layer's float input and output, its isolated copy, and Q's value */
    for (int i = 0; st == CALQ_OK && i < c.n; i++) {
        st = add_watch(&c, fold->values[m[i].f_in].name, i, ROLE_IN, err);
        if (st == CALQ_OK) st = add_watch(&c, fold->values[m[i].f_out].name, i, ROLE_FOUT, err);
        if (st == CALQ_OK && c.ls[i].iso_name) st = add_watch(&c, c.ls[i].iso_name, i, ROLE_ISO, err);
        if (st == CALQ_OK) st = add_watch(&c, qm->g->values[m[i].q_out].name, i, ROLE_QOUT, err);
    }
    /* outputs: by name, else by position */
    int n_out = calq_model_num_outputs(fm);
    for (int i = 0; st == CALQ_OK && i < n_out; i++) {
        calq_value_info a, b;
        calq_model_output_info(fm, i, &a);
        qout_of[i] = -1;
        for (int k = 0; k < calq_model_num_outputs(qm) && qout_of[i] < 0; k++)
            if (calq_model_output_info(qm, k, &b) == CALQ_OK && strcmp(a.name, b.name) == 0) qout_of[i] = k;
        if (qout_of[i] < 0 && calq_model_num_outputs(qm) == n_out) qout_of[i] = i;
        if (qout_of[i] < 0)
            st = calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL,
                            "compare: the quantized model has no output '%s' (the float model's output %d)", a.name, i);
    }
    if (st == CALQ_OK && c.n == 0 && n_out == 0)
        st = calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL, "compare: nothing to compare");
    calq_session_opts so = {.n_threads = o.n_threads, .no_fusion = 1, .max_arena_bytes = o.max_arena_bytes};
    if (st == CALQ_OK) st = calq__session_create_graph(run_g ? run_g : fold, &so, &fs, err);
    /* Q runs as its file says: a QDQ model as float fake-quant, so every layer's output exists */
    if (st == CALQ_OK) st = calq_session_create(qm, &so, &qs, err);
    int nf = 0, nq = 0;
    if (st == CALQ_OK) st = observe_names(&c, false, &fnames, &nf, err);
    if (st == CALQ_OK) st = observe_names(&c, true, &qnames, &nq, err);
    side fside = {&c, false}, qside = {&c, true};
    if (st == CALQ_OK && nf) st = calq_session_set_observer(fs, observe, &fside, fnames, nf, err);
    if (st == CALQ_OK && nq) st = calq_session_set_observer(qs, observe, &qside, qnames, nq, err);
    for (int i = 0; st == CALQ_OK && i < n_in; i++) {
        calq_value_info v;
        calq_model_input_info(fm, i, &v);
        calq_data_input_info(data, fm, i, &v, NULL); /* the batches' batch size (a dynamic one too) */
        ins[i].dtype = v.dtype == CALQ_DTYPE_UNDEFINED ? CALQ_DTYPE_FLOAT32 : v.dtype;
        ins[i].ndim = v.ndim;
        memcpy(ins[i].dims, v.dims, sizeof v.dims);
        int64_t ne = calq_tensor_numel(&ins[i]);
        if (!(ins[i].data = malloc((size_t)(ne > 0 ? ne : 1) * calq_dtype_size(ins[i].dtype)))) st = oom(err);
    }
    for (int b = 0; st == CALQ_OK && b < nb; b++) {
        char src[1024];
        st = calq_data_read_batch_resize(data, b, ins, n_in, err); /* text lines of several widths too */
        if (st == CALQ_OK) st = check_finite(fm, data, b, ins, n_in, err);
        if (st == CALQ_OK && (st = calq_session_run(fs, ins, n_in, err)) != CALQ_OK)
            calq__prefix(err, "compare: float model, batch %d (%s)", b,
                         calq_data_batch_source(data, b, src, sizeof src));
        for (int i = 0; st == CALQ_OK && i < n_out; i++) {
            const calq_tensor *t;
            calq_session_output(fs, i, &t);
            if (!hold(&fouts[i], t)) st = oom(err);
        }
        if (st == CALQ_OK && (st = calq_session_run(qs, ins, n_in, err)) != CALQ_OK)
            calq__prefix(err, "compare: quantized model, batch %d (%s)", b,
                         calq_data_batch_source(data, b, src, sizeof src));
        for (int i = 0; st == CALQ_OK && i < n_out; i++) {
            const calq_tensor *t;
            calq_session_output(qs, qout_of[i], &t);
            size_t n = (size_t)calq_tensor_numel(t);
            /* an integer output (a detector's labels, indices) of the same type and size in both:
             * not compared (no cosine of class ids); its figures stay empty (NaN, count 0) */
            if (t->dtype == fouts[i].dtype && t->dtype != CALQ_DTYPE_FLOAT32 && n == fouts[i].n) continue;
            if (t->dtype != CALQ_DTYPE_FLOAT32 || fouts[i].dtype != CALQ_DTYPE_FLOAT32 || n != fouts[i].n)
                st = calq__fail(err, CALQ_ERR_SHAPE, NULL,
                                "compare: output %d holds %zu %s values in the float model and %zu %s in the "
                                "quantized one",
                                i, fouts[i].n, calq_dtype_name(fouts[i].dtype), n, calq_dtype_name(t->dtype));
            else
                calq__cmp_acc_add(&oacc[i], fouts[i].data, t->data, NULL, 0.0f, 0, n, o.n_threads);
        }
        for (int i = 0; i < c.n; i++) c.ls[i].f.set = c.ls[i].i.set = false;
        if (st == CALQ_OK && o.log)
            calq__log(CALQ_LOG_DEBUG, "calq: compare: batch %d/%d (%s)", b + 1, nb,
                      calq_data_batch_source(data, b, src, sizeof src));
    }
    if (st == CALQ_OK && o.sensitivity && c.n)
        st = calq__cmp_sensitivity(fold, qm->g, m, c.n, data, nb, ins, n_in, &o, r->layers, err);
    if (st == CALQ_OK) {
        r->model = dup_or_empty(model_label);
        r->quantized = dup_or_empty(quantized_label);
        r->outputs = calloc((size_t)n_out + 1, sizeof *r->outputs);
        if (!r->model || !r->quantized || !r->outputs) st = oom(err);
    }
    for (int i = 0; st == CALQ_OK && i < n_out; i++) {
        calq_value_info a;
        calq_model_output_info(fm, i, &a);
        if (!(r->outputs[i].name = strdup(a.name))) st = oom(err);
        calq__cmp_acc_stats(&oacc[i], &r->outputs[i].s);
        if (oacc[i].batches == 0) /* not compared */
            r->outputs[i].s.cosine = r->outputs[i].s.cosine_min = r->outputs[i].s.rel_l2 = r->outputs[i].s.sqnr_db =
                r->outputs[i].s.max_abs = NAN;
        r->n_outputs = i + 1;
    }
    for (int i = 0; st == CALQ_OK && i < c.n; i++) {
        calq__cmp_acc_stats(&c.ls[i].acc, &r->layers[i].acc);
        if (c.ls[i].bad_shape) /* the two models' tensors differ in size: no figure (null in the JSON) */
            r->layers[i].acc.cosine = r->layers[i].acc.cosine_min = r->layers[i].acc.rel_l2 = r->layers[i].acc.sqnr_db =
                r->layers[i].acc.max_abs = NAN;
        r->layers[i].has_isolated = c.ls[i].iso.batches > 0 && !c.ls[i].bad_shape;
        if (r->layers[i].has_isolated) calq__cmp_acc_stats(&c.ls[i].iso, &r->layers[i].iso);
    }
    if (st == CALQ_OK) {
        r->n_float_layers = n_float;
        r->n_batches = nb;
        r->seconds = now() - t0;
        *out = r;
        r = NULL;
    }
    calq_compare_result_free(r);
    for (int i = 0; ins && i < n_in; i++) free(ins[i].data);
    free(ins);
    for (int i = 0; fouts && i < n_out; i++) free(fouts[i].data);
    free(fouts);
    free(oacc);
    free(qout_of);
    free(fnames);
    free(qnames);
    calq_session_free(fs);
    calq_session_free(qs);
    for (int i = 0; c.ls && i < c.n; i++) {
        free(c.ls[i].f.data);
        free(c.ls[i].i.data);
        free(c.ls[i].iso_name);
    }
    free(c.ls);
    free(c.w);
    free(c.qmap);
    calq__graph_free(run_g);
    calq__graph_free(fold);
    calq__cmp_matches_free(m, c.n);
    return st;
}
