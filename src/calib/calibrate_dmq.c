/* DMQ balancing in the calibration run (calibrate.h; amct-reference.md §7.2 dmq_balancer_param,
 * docs/numerics.md "DMQ balancing").
 *
 * Order: the factors s need max |X_j| per input channel, and everything after them must see
 * the balanced tensors: ARQ quantizes W·s, IFMR / HFMG calibrate X·(1/s) (IFMR's first pass
 * already needs the balanced values: its percentiles are of X·(1/s), not of X). So the
 * statistic has a pass of its own, pass 0, before the weights and the activation passes, run
 * only when some layer is balanced. It keeps one float per input channel per balanced layer,
 * whatever batch_num is. The graph is then rewritten (graph/balance.h) and the activation
 * passes observe the Mul outputs: the same float32 products the saved models compute (ONNX: the
 * Mul itself, export_onnx_qdq.c; Caffe: a Scale layer by 1/s, export_caffe_dmq.c). */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/log.h"
#include "base/strmap.h"
#include "calib/calibrate.h"
#include "calib/data.h"
#include "exec/session.h"
#include "frontend/model.h"
#include "graph/balance.h"
#include "graph/passes.h"
#include "graph/quantizable.h"
#include "quant/quant.h"

static bool balanced(const calq__calib_layer *l)
{
    return l->input == 0 && l->cfg->dmq > 0.0;
}

bool calq__calib_has_dmq(const calq__calib *cal)
{
    for (int i = 0; i < cal->n_layers; i++)
        if (balanced(&cal->layers[i])) return true;
    return false;
}

static int find_node(const calq_graph *g, const char *name)
{
    for (int i = 0; i < g->n_nodes; i++)
        if (strcmp(g->nodes[i].name, name) == 0) return i;
    return -1;
}

typedef struct dmq_ctx {
    calq__calib *cal;
    calq_error err; /* the first failure of the observer */
} dmq_ctx;

/* Pass 0: every balanced layer reading this tensor folds its per-channel max. */
static int observe(void *user, const char *tensor_name, const calq_tensor *t)
{
    dmq_ctx *x = user;
    calq__calib *cal = x->cal;
    for (int i = 0; i < cal->n_layers; i++) {
        calq__calib_layer *l = &cal->layers[i];
        if (!balanced(l)) continue;
        const calq_node *n = &cal->g->nodes[l->node]; /* pass 0 runs before the rewrite */
        if (strcmp(cal->g->values[n->inputs[0]].name, tensor_name) != 0) continue;
        int axis = calq__balance_act_axis(l->cfg->kind, t->ndim);
        if (t->dtype != CALQ_DTYPE_FLOAT32 || axis < 0 || t->dims[axis] != l->n_balance) {
            calq__fail(&x->err, CALQ_ERR_SHAPE, l->cfg->name,
                       "DMQ balancing of layer \"%s\": its input \"%s\" (%s, rank %d) has %lld channels on axis %d; "
                       "its weight has %lld input channels",
                       l->cfg->name, tensor_name, calq_dtype_name(t->dtype), t->ndim,
                       axis >= 0 ? (long long)t->dims[axis] : -1LL, axis, (long long)l->n_balance);
            return 1;
        }
        calq__dmq_absmax(t->data, t->ndim, t->dims, axis, l->xmax);
    }
    return 0;
}

/* The balanced layers' geometry and statistic buffers. */
static calq_status setup(calq__calib *cal, calq_error *err)
{
    for (int i = 0; i < cal->n_layers; i++) {
        calq__calib_layer *l = &cal->layers[i];
        if (!balanced(l)) continue;
        int ni = l->node;
        calq__balance_geom geo;
        CALQ_TRY(calq__balance_geom_of(cal->g, ni, calq__qkind_of_node(cal->g, ni), &geo, err));
        l->n_balance = geo.n_ch;
        l->xmax = calloc((size_t)geo.n_ch, sizeof(float));
        l->balance = malloc(sizeof(float) * (size_t)geo.n_ch);
        if (!l->xmax || !l->balance) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, l->cfg->name, "out of memory");
    }
    return CALQ_OK;
}

static calq_status run_pass0(calq__calib *cal, calq_error *err)
{
    dmq_ctx x = {.cal = cal};
    int n_obs = 0;
    const char **names = calloc((size_t)cal->n_layers + 1, sizeof *names);
    int n_in = calq_model_num_inputs(cal->m);
    calq_tensor *ins = calloc((size_t)n_in + 1, sizeof *ins);
    calq_status st = names && ins ? CALQ_OK : calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    for (int i = 0; st == CALQ_OK && i < cal->n_layers; i++) {
        if (!balanced(&cal->layers[i])) continue;
        const calq_node *n = &cal->g->nodes[cal->layers[i].node];
        const char *t = cal->g->values[n->inputs[0]].name;
        bool have = false;
        for (int k = 0; k < n_obs && !have; k++) have = strcmp(names[k], t) == 0;
        if (!have) names[n_obs++] = t;
    }
    /* cal->g is folded already: the session runs it as it is */
    calq_session_opts so = {.n_threads = cal->n_threads, .no_fusion = 1, .max_arena_bytes = cal->max_arena_bytes};
    calq_session *s = NULL;
    if (st == CALQ_OK) st = calq__session_create_graph(cal->g, &so, &s, err);
    if (st == CALQ_OK) st = calq_session_set_observer(s, observe, &x, names, n_obs, err);
    if (st == CALQ_OK) st = calq__calib_inputs_alloc(cal->m, cal->data, ins, n_in, err);
    cal->pass = 0;
    for (int b = 0; st == CALQ_OK && b < cal->batch_num; b++) {
        cal->batch = b;
        st = calq__data_read_batch_resize(cal->data, b, ins, n_in, err);
        if (st == CALQ_OK && (st = calq_session_run(s, ins, n_in, err)) != CALQ_OK) {
            if (x.err.status != CALQ_OK) *err = x.err;
            char src[1024];
            calq__prefix(err, "DMQ balancing statistics, batch %d (%s)", b,
                         calq_data_batch_source(cal->data, b, src, sizeof src));
        }
        cal->runs_done++;
        if (st == CALQ_OK) st = calq__calib_progress(cal, err);
    }
    for (int i = 0; ins && i < n_in; i++) free(ins[i].data);
    free(ins);
    free(names);
    calq_session_free(s);
    return st;
}

/* The factors of balanced entry l, and the rewrite of cal->g; then its group observes the Mul. */
static calq_status balance_layer(calq__calib *cal, calq__calib_layer *l, calq_error *err)
{
    calq_graph *g = cal->g_owned;
    int ni = find_node(g, l->cfg->name);
    const calq_qkind *k = calq__qkind_of_node(g, ni);
    calq__balance_geom geo;
    CALQ_TRY(calq__balance_geom_of(g, ni, k, &geo, err));
    float *wmax = malloc(sizeof(float) * (size_t)geo.n_ch);
    if (!wmax) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, l->cfg->name, "out of memory");
    calq__balance_weight_absmax(&geo, g->values[g->nodes[ni].inputs[k->weight_input]].constant, wmax);
    calq__dmq_factors(l->xmax, wmax, geo.n_ch, l->cfg->dmq, l->balance);
    free(wmax);
    float lo = l->balance[0], hi = l->balance[0];
    for (int64_t c = 1; c < geo.n_ch; c++) {
        if (l->balance[c] < lo) lo = l->balance[c];
        if (l->balance[c] > hi) hi = l->balance[c];
    }
    int y = -1;
    CALQ_TRY(calq__pass_balance(g, ni, l->balance, geo.n_ch, &y, err));
    cal->groups[l->group].tensor = g->values[y].name; /* owned by g, which the run keeps */
    /* the group was kept out of the tensor map (calibrate_layers.c join_group); the Mul's output
     * is new and read by this layer only */
    if (!calq__strmap_put(&cal->group_of, g->values[y].name, l->group))
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, l->cfg->name, "out of memory");
    if (cal->log)
        calq__log(CALQ_LOG_INFO, "calq: DMQ balancing of layer %s: migration strength %g, %lld factors in [%.4g, %.4g]",
                  l->cfg->name, l->cfg->dmq, (long long)geo.n_ch, (double)lo, (double)hi);
    return CALQ_OK;
}

calq_status calq__calib_dmq(calq__calib *cal, calq_error *err)
{
    if (!calq__calib_has_dmq(cal)) return CALQ_OK;
    if (!cal->g_owned) { /* do_fusion false: a copy of the model's graph to rewrite */
        CALQ_TRY(calq__graph_clone(cal->m->g, &cal->g_owned, err));
        cal->g = cal->g_owned;
    }
    CALQ_TRY(setup(cal, err));
    CALQ_TRY(run_pass0(cal, err));
    for (int i = 0; i < cal->n_layers; i++)
        if (balanced(&cal->layers[i])) CALQ_TRY(balance_layer(cal, &cal->layers[i], err));
    /* the rewrite appended Mul nodes and sorted the graph again: every entry's node index moves */
    calq_strmap node_of = {0};
    if (!calq__strmap_init(&node_of, (size_t)cal->g->n_nodes))
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "DMQ balancing: out of memory");
    bool ok = true;
    for (int i = cal->g->n_nodes - 1; i >= 0 && ok; i--) ok = calq__strmap_put(&node_of, cal->g->nodes[i].name, i);
    for (int i = 0; i < cal->n_layers && ok; i++)
        cal->layers[i].node = calq__strmap_get(&node_of, cal->layers[i].cfg->name);
    calq__strmap_free(&node_of);
    return ok ? CALQ_OK : calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "DMQ balancing: out of memory");
}
