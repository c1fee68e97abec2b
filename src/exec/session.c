/* calq_session: plans a graph for the current input shapes (re-planning when they change),
 * runs it, and hands every produced tensor to the observer. The public calq_session_create
 * (src/api) is a session over the model's graph. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "base/tensor.h"
#include "base/threads.h"
#include "exec/plan.h"
#include "exec/session.h"
#include "graph/passes.h"

struct calq_session {
    const calq_graph *model_g; /* the graph the session was created on (borrowed) */
    const calq_graph *g;       /* what runs: model_g, or fused (owned) */
    calq_graph *fused;         /* the fused copy, when fusion changed anything (owned) */
    calq_session_opts opts;
    calq_plan *plan;
    calq_observer_fn observer;
    void *observer_user;
    bool *observed; /* per value; NULL = all */
    calq_tensor *outputs;
    bool have_outputs;    /* the last run succeeded */
    void **output_copies; /* outputs that are graph inputs are copied (user data is borrowed) */
};

calq_status calq__session_create_graph(const calq_graph *g, const calq_session_opts *opts, calq_session **out,
                                       calq_error *err)
{
    *out = NULL;
    if (!g) return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL, "no model");
    int n_threads = 0;
    CALQ_TRY(calq__threads_resolve(opts ? opts->n_threads : 0, "calq_session_opts.n_threads", &n_threads, err));
    calq_session *s = calloc(1, sizeof *s);
    if (!s) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    s->model_g = g;
    calq_session_opts_init(&s->opts);
    if (opts) s->opts = *opts;
    if (s->opts.kernels != CALQ_KERNELS_DEFAULT && s->opts.kernels != CALQ_KERNELS_REF) {
        int k = (int)s->opts.kernels;
        calq_session_free(s);
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL,
                          "calq_session_opts.kernels is %d; use CALQ_KERNELS_DEFAULT (0) or CALQ_KERNELS_REF (1)", k);
    }
    s->opts.n_threads = n_threads;
    /* checked as calq_config_opts.skip_layers is: the fold below reads every name */
    const int n_skip = s->opts.n_skip_fusion_layers;
    const char *bad =
        n_skip < 0 || (n_skip > 0 && !s->opts.skip_fusion_layers) ? "names announced but none given" : NULL;
    for (int i = 0; !bad && i < n_skip; i++)
        if (!s->opts.skip_fusion_layers[i]) bad = "an entry is NULL";
    if (bad) {
        calq_session_free(s);
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL,
                          "calq_session_opts.skip_fusion_layers (n_skip_fusion_layers %d): %s", n_skip, bad);
    }
    /* The graph that runs is a rewritten copy (sharing the model's constants): the integer layers
     * of an Ascend deploy model lowered to calq's integer operators, always, since a deploy model
     * means nothing without them (a literal graph would run an int8 Conv as a float one); then,
     * unless no_fusion asks for the literal graph, Conv+BN folding and the QDQ fusion (a QDQ model
     * runs as onnxruntime runs it: integer layers where it fuses them). */
    int n_lowered = 0, n_folded = 0, n_qdq = 0, n_act = 0;
    calq_status st = calq__graph_clone(g, &s->fused, err);
    if (st == CALQ_OK) st = calq__pass_lower_ascend(s->fused, &n_lowered, err);
    if (st == CALQ_OK && !s->opts.no_fusion)
        st = calq__pass_fold_conv_affine(s->fused, s->opts.skip_fusion_layers, s->opts.n_skip_fusion_layers, &n_folded,
                                         err);
    if (st == CALQ_OK && !s->opts.no_fusion) st = calq__pass_fuse_qdq(s->fused, &n_qdq, &n_act, err);
    if (st != CALQ_OK) {
        calq_session_free(s);
        return st;
    }
    if (!n_lowered && !n_folded && !n_qdq && !n_act) { /* nothing rewritten: run the model's own graph */
        calq__graph_free(s->fused);
        s->fused = NULL;
        s->g = g;
    } else {
        s->g = s->fused;
    }
    s->opts.skip_fusion_layers = NULL; /* borrowed for the fold above only */
    s->opts.n_skip_fusion_layers = 0;
    s->outputs = calloc((size_t)g->n_outputs + 1, sizeof *s->outputs);
    s->output_copies = calloc((size_t)g->n_outputs + 1, sizeof *s->output_copies);
    if (!s->outputs || !s->output_copies) {
        calq_session_free(s);
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    }
    *out = s;
    return CALQ_OK;
}

void calq_session_opts_init(calq_session_opts *o)
{
    if (!o) return;          /* as the free functions: nothing to fill */
    memset(o, 0, sizeof *o); /* every default is 0 */
}

void calq_session_free(calq_session *s)
{
    if (!s) return;
    calq__plan_free(s->plan);
    free(s->observed);
    if (s->output_copies)
        for (int i = 0; i < s->model_g->n_outputs; i++) free(s->output_copies[i]);
    free(s->output_copies);
    free(s->outputs);
    calq__graph_free(s->fused);
    free(s);
}

calq_status calq_session_set_observer(calq_session *s, calq_observer_fn fn, void *user, const char *const *names, int n,
                                      calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, s);
    const calq_graph *g = s->g;
    bool *obs = NULL;
    /* only n 0 means every tensor: a negative count is a caller's bug, not a wish to see all */
    if (n < 0)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL,
                          "calq_session_set_observer: n is %d; give the number of names (0: every tensor)", n);
    if (n > 0 && !names)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL, "calq_session_set_observer: names is NULL but n is %d",
                          n);
    for (int i = 0; i < n; i++)
        if (!names[i])
            return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL, "calq_session_set_observer: names[%d] is NULL", i);
    if (n > 0) {
        obs = calloc((size_t)g->n_values + 1, sizeof *obs);
        if (!obs) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
        for (int i = 0; i < n; i++) {
            int v = calq__graph_find(g, names[i]);
            if (v < 0) {
                free(obs);
                return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL, "the model has no tensor named '%s'", names[i]);
            }
            const calq_value *val = &g->values[v];
            if (val->producer < 0 && !val->is_input && !val->constant) {
                /* The model computes it, this session's fused graph does not. */
                bool folded = g != s->model_g && s->model_g->values[v].producer >= 0;
                free(obs);
                return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL,
                                  folded
                                      ? "tensor '%s' is not computed: fusion removed it (a layer folded into its "
                                        "Conv, or a QDQ group run as one integer layer). Run without fusion (calq run "
                                        "--no-fusion) to see it"
                                      : "tensor '%s' is not computed by any node of the model",
                                  names[i]);
            }
            obs[v] = true;
        }
    }
    free(s->observed);
    s->observed = obs;
    s->observer = fn;
    s->observer_user = user;
    /* the plan keeps exactly the observed tensors: plan again */
    calq__plan_free(s->plan);
    s->plan = NULL;
    s->have_outputs = false;
    return CALQ_OK;
}

/* Checks user inputs against the model's declared inputs. Dim 0 may differ from a fixed one
 * (rebatched[i] set: the caller checks the graph runs at another batch, exec/batch.c), and a
 * Caffe net takes any shape of its inputs' rank, as Caffe reshapes a net to its data. */
static calq_status check_inputs(const calq_graph *g, const calq_tensor *inputs, int n, bool *rebatched, calq_error *err)
{
    if (n != g->n_inputs)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL, "the model has %d inputs, %d were given", g->n_inputs, n);
    for (int i = 0; i < n; i++) {
        const calq_value *v = &g->values[g->inputs[i]];
        const calq_tensor *t = &inputs[i];
        char want[160], got[160];
        rebatched[i] = false;
        if (t->dtype != v->dtype)
            return calq__fail(err, CALQ_ERR_SHAPE, NULL, "input '%s' must be %s, got %s", v->name,
                              calq_dtype_name(v->dtype), calq_dtype_name(t->dtype));
        if (t->ndim < 0 || t->ndim > CALQ_MAX_DIMS || calq_tensor_numel(t) < 0)
            return calq__fail(err, CALQ_ERR_SHAPE, NULL, "input '%s' has an invalid shape", v->name);
        if (!t->data && calq_tensor_numel(t) > 0)
            return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL, "input '%s' has no data", v->name);
        bool ok = v->ndim < 0 || v->ndim == t->ndim;
        for (int d = 0; ok && v->ndim >= 0 && d < v->ndim; d++) {
            if (v->dims[d] < 0 || v->dims[d] == t->dims[d]) continue;
            if (d == 0 && t->dims[0] > 0)
                rebatched[i] = true;
            else if (!g->any_input_dims)
                ok = false;
        }
        if (!ok)
            return calq__fail(err, CALQ_ERR_SHAPE, NULL,
                              "input '%s' must be %s, got %s (dim 0, the batch, may differ; set other dims with "
                              "--input-shape %s:... when the model allows others)",
                              v->name, calq__shape_str(v->dims, v->ndim, want, sizeof want),
                              calq__shape_str(t->dims, t->ndim, got, sizeof got), v->name);
    }
    return CALQ_OK;
}

/* Plans for these input shapes. Observed tensors are kept: computed, not folded into a
 * neighbour, and readable in plain layout. */
static calq_status build_plan(calq_session *s, const calq_tensor *inputs, int n, calq_error *err)
{
    const bool fast = s->opts.kernels != CALQ_KERNELS_REF;
    calq_plan_opts o = {.use_fast = fast,
                        .fuse = fast && !s->opts.no_fusion,
                        .keep = s->observer ? s->observed : NULL,
                        .keep_all = s->observer && !s->observed,
                        .max_arena_bytes = s->opts.max_arena_bytes};
    return calq__plan_build_opts(s->g, inputs, n, &o, &s->plan, err);
}

static calq_status ensure_plan(calq_session *s, const calq_tensor *inputs, int n, const bool *rebatched,
                               calq_error *err)
{
    if (s->plan && calq__plan_matches(s->plan, inputs, n)) return CALQ_OK;
    calq__plan_free(s->plan);
    s->plan = NULL;
    bool any = false;
    for (int i = 0; i < n; i++) any |= rebatched[i];
    if (any) CALQ_TRY(calq__batch_check(s->g, inputs, n, rebatched, err));
    return build_plan(s, inputs, n, err);
}

/* Hands value v of the plan (a graph value, or a plain copy of one) to the observer. */
static calq_status observe(calq_session *s, int v, calq_error *err)
{
    const calq_plan_value *pv = &s->plan->vals[v];
    if (pv->layout != CALQ_LAYOUT_PLAIN) return CALQ_OK; /* its plain copy is observed */
    const int gv = pv->origin >= 0 ? pv->origin : v;
    if (!s->observer || (s->observed && !s->observed[gv])) return CALQ_OK;
    const calq_value *val = &s->g->values[gv];
    if (s->observer(s->observer_user, val->name, &pv->t) != 0) {
        if (err && err->status == CALQ_OK)
            calq__fail(err, CALQ_ERR_GENERIC, NULL, "the run was stopped by its observer at tensor '%s'", val->name);
        return err ? err->status : CALQ_ERR_GENERIC;
    }
    return CALQ_OK;
}

static calq_status run_plan(calq_session *s, const calq_tensor *inputs, int n_inputs, const bool *rebatched,
                            calq_error *err);

calq_status calq_session_run(calq_session *s, const calq_tensor *inputs, int n_inputs, calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, s);
    s->have_outputs = false; /* any failed run, a refused one too, leaves no outputs to read */
    CALQ_REQUIRE_ARRAY(err, inputs, n_inputs);
    /* the model's graph: calq_model_set_input_shape after session creation must count */
    bool rebatched[64];
    if (n_inputs > 64)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL, "%d inputs given; calq runs models with up to 64",
                          n_inputs);
    CALQ_TRY(check_inputs(s->model_g, inputs, n_inputs, rebatched, err));
    /* omp_set_num_threads sticks to the calling thread: restore it so the caller's later
     * OpenMP code (and sessions with n_threads = 0) see what they saw before. */
    int saved_threads = omp_get_max_threads();
    if (s->opts.n_threads > 0) omp_set_num_threads(s->opts.n_threads);
    calq_status st = run_plan(s, inputs, n_inputs, rebatched, err);
    if (s->opts.n_threads > 0) omp_set_num_threads(saved_threads);
    return st;
}

static calq_status run_plan(calq_session *s, const calq_tensor *inputs, int n_inputs, const bool *rebatched,
                            calq_error *err)
{
    const calq_graph *g = s->g;
    CALQ_TRY(ensure_plan(s, inputs, n_inputs, rebatched, err));
    calq_plan *p = s->plan;
    for (int i = 0; i < n_inputs; i++) p->vals[g->inputs[i]].t.data = inputs[i].data;
    if (err) err->status = CALQ_OK;
    for (int i = 0; i < n_inputs; i++) CALQ_TRY(observe(s, g->inputs[i], err));
    /* Tensors folded at plan time (constant sub-graphs) are observed once per run too, and so are
     * the weights the import folded (graph/fold_const_weights.c): the model computes them. */
    for (int v = 0; v < g->n_values; v++)
        if (p->vals[v].kind == CALQ_PV_FOLDED || (p->vals[v].kind == CALQ_PV_CONST && g->values[v].folded))
            CALQ_TRY(observe(s, v, err));
    for (int st = 0; st < p->n_steps; st++) {
        CALQ_TRY(calq__plan_run_step(p, st, err));
        const calq_plan_step *step = &p->steps[st];
        for (int k = 0; k < step->n_out; k++)
            if (step->out_v[k] >= 0) CALQ_TRY(observe(s, step->out_v[k], err));
        calq__plan_release_after(p, st);
    }
    for (int i = 0; i < g->n_outputs; i++) {
        const calq_plan_value *pv = &p->vals[calq__plan_plain(p, g->outputs[i])];
        s->outputs[i] = pv->t;
        if (pv->kind == CALQ_PV_INPUT) {
            size_t nb = calq__tensor_nbytes(&pv->t);
            void *copy = realloc(s->output_copies[i], nb ? nb : 1);
            if (!copy) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
            if (nb) memcpy(copy, pv->t.data, nb);
            s->output_copies[i] = copy;
            s->outputs[i].data = copy;
        }
    }
    for (int i = 0; i < n_inputs; i++) p->vals[g->inputs[i]].t.data = NULL;
    s->have_outputs = true;
    return CALQ_OK;
}

calq_status calq_session_output(const calq_session *s, int i, const calq_tensor **out)
{
    if (!out) return CALQ_ERR_BAD_PARAMETERS; /* no calq_error here to say more */
    *out = NULL;
    if (!s) return CALQ_ERR_BAD_PARAMETERS;
    if (!s->have_outputs) return CALQ_ERR_BAD_PARAMETERS; /* no successful run since the last change */
    if (!s->plan || i < 0 || i >= s->model_g->n_outputs) return CALQ_ERR_INDEX_OUT_OF_RANGE;
    *out = &s->outputs[i];
    return CALQ_OK;
}

calq_status calq_session_tensor_info(calq_session *s, const char *name, calq_value_info *out, calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, s);
    CALQ_REQUIRE(err, name);
    CALQ_REQUIRE(err, out);
    const calq_graph *g = s->g;
    int v = calq__graph_find(g, name);
    if (v < 0) return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL, "the model has no tensor named '%s'", name);
    if (!s->plan) {
        calq_tensor *ins = calloc((size_t)g->n_inputs + 1, sizeof *ins);
        if (!ins) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
        for (int i = 0; i < g->n_inputs; i++) {
            const calq_value *iv = &g->values[g->inputs[i]];
            char shape[160];
            if (iv->ndim < 0 || calq__shape_numel(iv->dims, iv->ndim) < 0) {
                free(ins);
                return calq__fail(
                    err, CALQ_ERR_SHAPE, NULL, "input '%s' has dynamic dims (%s); give them with --input-shape %s:...",
                    iv->name, calq__shape_str(iv->dims, iv->ndim < 0 ? 0 : iv->ndim, shape, sizeof shape), iv->name);
            }
            calq__set_shape(&ins[i], iv->dtype, iv->dims, iv->ndim);
        }
        int saved_threads = omp_get_max_threads(); /* oneDNN plans its kernels for the run's threads */
        if (s->opts.n_threads > 0) omp_set_num_threads(s->opts.n_threads);
        calq_status st = build_plan(s, ins, g->n_inputs, err);
        if (s->opts.n_threads > 0) omp_set_num_threads(saved_threads);
        free(ins);
        CALQ_TRY(st);
    }
    const calq_plan_value *pv = &s->plan->vals[v];
    memset(out, 0, sizeof *out);
    out->name = g->values[v].name;
    out->dtype = pv->t.dtype;
    /* A tensor fused away (computed inside a fused step) still has its planned shape. */
    if (pv->kind == CALQ_PV_DYNAMIC || (pv->kind == CALQ_PV_NONE && pv->t.dtype == CALQ_DTYPE_UNDEFINED)) {
        out->ndim = -1;
    } else {
        out->ndim = pv->t.ndim;
        memcpy(out->dims, pv->t.dims, sizeof out->dims);
    }
    return CALQ_OK;
}

void calq_session_memory(const calq_session *s, size_t *arena_bytes, size_t *sum_bytes)
{
    /* either output may be NULL (not wanted); no session has no plan: 0 bytes */
    const calq_plan *p = s ? s->plan : NULL;
    if (arena_bytes) *arena_bytes = p ? p->arena_bytes : 0;
    if (sum_bytes) *sum_bytes = p ? p->sum_bytes : 0;
}

int calq__session_fast_steps(const calq_session *s)
{
    int n = 0;
    for (int i = 0; s->plan && i < s->plan->n_steps; i++) n += s->plan->steps[i].fast && s->plan->steps[i].state;
    return n;
}
