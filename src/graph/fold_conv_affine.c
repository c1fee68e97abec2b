/* Conv + BatchNormalization / per-channel Mul / Add folding (amct-reference.md §8.3):
 *   a = gamma / sqrt(var + eps), w' = w * a, b' = (b - mean) * a + beta
 * evaluated in float32 in that order, as AMCT's float32 graph pass does. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/tensor.h"
#include "graph/passes.h"
#include "graph/quantizable.h"

static bool is_op(const calq_node *n, const char *op)
{
    return !n->domain[0] && strcmp(n->op_type, op) == 0;
}

static const calq_tensor *const_f32(const calq_graph *g, const calq_node *n, int k)
{
    if (k >= n->n_inputs || n->inputs[k] < 0) return NULL;
    const calq_tensor *t = g->values[n->inputs[k]].constant;
    return t && t->dtype == CALQ_DTYPE_FLOAT32 ? t : NULL;
}

/* Uses of each value by nodes, plus one per graph-output appearance. */
static int *count_uses(const calq_graph *g)
{
    int *uses = calloc((size_t)g->n_values + 1, sizeof(int));
    if (!uses) return NULL;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_inputs; k++)
            if (g->nodes[i].inputs[k] >= 0) uses[g->nodes[i].inputs[k]]++;
    for (int i = 0; i < g->n_outputs; i++) uses[g->outputs[i]]++;
    return uses;
}

/* A constant that multiplies or adds per output channel of a rank-`rank` conv output with C
 * channels: one element, or C elements on axis 1 once right-aligned to the output's rank. */
static bool per_channel(const calq_tensor *c, int rank, int64_t C)
{
    int64_t n = calq_tensor_numel(c);
    if (n == 1) return c->ndim <= rank;
    int off = rank - c->ndim; /* right-aligned: c's dim d sits at output axis d + off */
    if (n != C || off < 0 || off > 1) return false;
    for (int d = 0; d < c->ndim; d++)
        if (c->dims[d] != (d + off == 1 ? C : 1)) return false;
    return true;
}

/* Consumer c as y = (x - m[o]) * a[o] + s[o] per channel, or false when it is not foldable. */
static bool affine_of(const calq_graph *g, const calq_node *c, int v, int rank, int64_t C, float *m, float *a, float *s)
{
    if (is_op(c, "BatchNormalization")) {
        /* Only where the unfused BN runs as inference: no training outputs or mode, and not the
         * per-activation form of opsets 7-8 (spatial = 0). */
        for (int k = 1; k < c->n_outputs; k++)
            if (c->outputs[k] >= 0) return false;
        if (calq__attr_int(c, "training_mode", 0) != 0 || calq__attr_int(c, "spatial", 1) == 0) return false;
        const calq_tensor *gamma = const_f32(g, c, 1), *beta = const_f32(g, c, 2), *mean = const_f32(g, c, 3),
                          *var = const_f32(g, c, 4);
        if (c->inputs[0] != v || !gamma || !beta || !mean || !var) return false;
        if (calq_tensor_numel(gamma) != C || calq_tensor_numel(beta) != C || calq_tensor_numel(mean) != C ||
            calq_tensor_numel(var) != C)
            return false;
        float eps = calq__attr_float(c, "epsilon", 1e-5f);
        /* var + eps not positive: not folded, so the layer's own check names it (a fold would
         * put NaN into the weights) */
        for (int64_t o = 0; o < C; o++) {
            const float vo = ((const float *)var->data)[o];
            if (!(vo + eps > 0.0f) || !isfinite(vo)) return false;
        }
        for (int64_t o = 0; o < C; o++) {
            a[o] = ((const float *)gamma->data)[o] / sqrtf(((const float *)var->data)[o] + eps);
            m[o] = ((const float *)mean->data)[o];
            s[o] = ((const float *)beta->data)[o];
        }
        return true;
    }
    bool mul = is_op(c, "Mul"), add = is_op(c, "Add");
    if ((!mul && !add) || c->n_inputs != 2) return false;
    int other = c->inputs[0] == v ? 1 : 0;
    if (c->inputs[1 - other] != v || c->inputs[other] == v) return false;
    const calq_tensor *k = const_f32(g, c, other);
    if (!k || !per_channel(k, rank, C)) return false;
    int64_t n = calq_tensor_numel(k);
    for (int64_t o = 0; o < C; o++) {
        float x = ((const float *)k->data)[n == 1 ? 0 : o];
        m[o] = 0.0f;
        a[o] = mul ? x : 1.0f;
        s[o] = mul ? 0.0f : x;
    }
    return true;
}

/* A constant named "<base><suffix>" (or "..._<k>" when taken); -1 on out of memory. */
static int new_constant(calq_graph *g, const char *base, const char *suffix, calq_tensor *t)
{
    char *name = calq__graph_unique_name(g, base, suffix, "_", 1);
    int v = name ? calq__graph_value(g, name) : -1;
    free(name);
    if (v < 0) return -1;
    g->values[v].constant = t;
    g->values[v].dtype = t->dtype;
    g->values[v].ndim = t->ndim;
    memcpy(g->values[v].dims, t->dims, sizeof t->dims);
    return v;
}

/* Folds consumer node j into conv node i. */
static calq_status fold_one(calq_graph *g, int i, int j, const float *m, const float *a, const float *s, int64_t C,
                            calq_error *err)
{
    calq_node *conv = &g->nodes[i];
    const calq_tensor *w = g->values[conv->inputs[1]].constant;
    const calq_tensor *bias = conv->n_inputs > 2 && conv->inputs[2] >= 0 ? g->values[conv->inputs[2]].constant : NULL;
    calq_tensor *nw = calloc(1, sizeof *nw), *nb = calloc(1, sizeof *nb);
    if (!nw || !nb) {
        free(nw);
        free(nb);
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    }
    calq_status st = calq__tensor_clone(nw, w, err);
    nb->dtype = CALQ_DTYPE_FLOAT32;
    nb->ndim = 1;
    nb->dims[0] = C;
    if (st == CALQ_OK) st = calq__tensor_alloc(nb, err);
    if (st != CALQ_OK) {
        calq_tensor_free_data(nw);
        free(nw);
        free(nb);
        return st;
    }
    int64_t per = calq_tensor_numel(w) / C;
    float *wd = nw->data, *bd = nb->data;
    for (int64_t o = 0; o < C; o++) {
        for (int64_t k = 0; k < per; k++) wd[o * per + k] *= a[o];
        float b0 = bias ? ((const float *)bias->data)[o] : 0.0f;
        bd[o] = (b0 - m[o]) * a[o] + s[o];
    }
    int vw = new_constant(g, conv->name, ".folded_weight", nw);
    int vb = vw < 0 ? -1 : new_constant(g, conv->name, ".folded_bias", nb);
    if (vw < 0 || vb < 0) {
        if (vw < 0) {
            calq_tensor_free_data(nw);
            free(nw);
        }
        calq_tensor_free_data(nb);
        free(nb);
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    }
    conv = &g->nodes[i]; /* graph_value may not move nodes, but keep the pointer fresh */
    if (conv->n_inputs < 3) {
        int *in = realloc(conv->inputs, sizeof(int) * 3);
        if (!in) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
        conv->inputs = in;
        conv->n_inputs = 3;
    }
    conv->inputs[1] = vw;
    conv->inputs[2] = vb;
    conv->outputs[0] = g->nodes[j].outputs[0];
    /* The consumer is gone: its inputs no longer count as uses. */
    calq__node_release(&g->nodes[j]);
    memmove(&g->nodes[j], &g->nodes[j + 1], sizeof(calq_node) * (size_t)(g->n_nodes - j - 1));
    g->n_nodes--;
    return CALQ_OK;
}

calq_status calq__pass_fold_conv_affine(calq_graph *g, const char *const *skip, int n_skip, int *n_folded,
                                        calq_error *err)
{
    *n_folded = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        if (!calq__node_folds_bn(&g->nodes[i]) || g->nodes[i].n_outputs != 1 || g->nodes[i].n_inputs < 2) continue;
        bool skipped = false;
        for (int s = 0; s < n_skip; s++)
            if (strcmp(skip[s], g->nodes[i].name) == 0) skipped = true;
        if (skipped) continue;
        for (;;) {
            const calq_node *conv = &g->nodes[i];
            const calq_tensor *w = conv->inputs[1] >= 0 ? g->values[conv->inputs[1]].constant : NULL;
            const calq_tensor *bias =
                conv->n_inputs > 2 && conv->inputs[2] >= 0 ? g->values[conv->inputs[2]].constant : NULL;
            if (!w || w->dtype != CALQ_DTYPE_FLOAT32 || w->ndim < 3) break;
            if (conv->n_inputs > 2 && conv->inputs[2] >= 0 && (!bias || bias->dtype != CALQ_DTYPE_FLOAT32)) break;
            int64_t C = w->dims[0], nw = calq_tensor_numel(w);
            /* C bounded by the weight data actually loaded, so the per-channel buffers are too */
            if (C <= 0 || nw < C || nw % C != 0) break;
            if (bias && calq_tensor_numel(bias) != C) break;
            int v = conv->outputs[0];
            int *uses = count_uses(g);
            if (!uses) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
            int n_uses = uses[v];
            free(uses);
            if (n_uses != 1 || g->values[v].is_output) break;
            int j = -1;
            for (int k = i + 1; k < g->n_nodes && j < 0; k++)
                for (int q = 0; q < g->nodes[k].n_inputs; q++)
                    if (g->nodes[k].inputs[q] == v) j = k;
            if (j < 0 || g->nodes[j].n_outputs < 1 || g->nodes[j].outputs[0] < 0) break;
            float *buf = malloc(sizeof(float) * 3 * (size_t)C);
            if (!buf) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
            float *m = buf, *a = buf + C, *s = buf + 2 * C;
            bool ok = affine_of(g, &g->nodes[j], v, w->ndim, C, m, a, s);
            calq_status st = ok ? fold_one(g, i, j, m, a, s, C, err) : CALQ_OK;
            free(buf);
            CALQ_TRY(st);
            if (!ok) break;
            (*n_folded)++;
        }
    }
    return calq__graph_toposort(g, err);
}
