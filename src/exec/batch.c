/* Running a model at a batch other than the one its file fixes (issue 14, item 8): Caffe and
 * OpenCV reshape a net to whatever batch the data has, and most ONNX graphs exported with a
 * fixed batch of 1 compute the same per sample at any batch. Some do not: a Reshape to the
 * constant shape [1, -1] folds the whole batch into one sample, a Split or Slice on axis 0 with
 * constant bounds picks fixed samples. Such a graph either fails to plan at another batch (an
 * element count that no longer fits: the planner names the node) or, worse, plans and computes
 * something else. This check finds both before anything runs.
 *
 * How: the graph is planned (shapes only, nothing run) at batch 2 and at batch 3 for the inputs
 * whose batch changes. An axis whose size differs between the two plans carries the batch;
 * sizes 2k and 3k say the batch is k-fold there. A graph computes each sample on its own when
 * every node keeps the batch where its input had it: a node whose input carries the batch but
 * whose outputs do not (a reduction over the batch, a Gather of one sample), or that moves it
 * onto another axis while merging it with other elements (the Reshape [1, -1] case: batch axis
 * 0, k 1 in; axis 1, k C*H*W out), or whose output has two batch axes or one that does not grow
 * linearly, ties the batch, and the message names it. Shape and Size carry the batch in their
 * values, not their shapes, and are not checked. Two non-1 sizes are used because a size of 1
 * broadcasts and would hide a batch axis. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/tensor.h"
#include "exec/plan.h"

/* The axis of a value that carries the batch (sizes a at batch 2, b at batch 3), with its
 * k-fold; -1 when none; -2 when the value grows in a way that is not one batch axis. */
static int batch_axis(const calq_tensor *a, const calq_tensor *b, int64_t *k)
{
    if (a->ndim != b->ndim) return -2;
    int axis = -1;
    for (int d = 0; d < a->ndim; d++) {
        if (a->dims[d] == b->dims[d]) continue;
        if (axis >= 0 || a->dims[d] % 2 || b->dims[d] % 3 || a->dims[d] / 2 != b->dims[d] / 3) return -2;
        axis = d;
        *k = a->dims[d] / 2;
    }
    return axis;
}

static const char *shape_of(const calq_tensor *t, char *buf, size_t n)
{
    return calq__shape_str(t->dims, t->ndim, buf, n);
}

static calq_status tie(const calq_graph *g, const calq_node *n, const char *why, calq_error *err)
{
    return calq__fail(err, CALQ_ERR_SHAPE, n->name,
                      "the model runs only at the batch its file fixes: node '%s' (%s) %s. Feed data with that batch, "
                      "or export the model with a dynamic batch dim",
                      n->name, n->op_type, why);
}

/* After a plan at another batch failed at node `failed` (its name; NULL: unknown): the first
 * Reshape before it whose shape is a constant with a literal dim 0 (not 0 = copy, not -1), the
 * usual cause (a static export's [1, -1] flatten or [1, C, ...] shuffle), named in the message. */
static void name_cause(const calq_graph *g, const char *failed, calq_error *err)
{
    for (int i = 0; i < g->n_nodes; i++) {
        const calq_node *n = &g->nodes[i];
        if (!strcmp(n->op_type, "Reshape") && n->n_inputs >= 2 && n->inputs[1] >= 0) {
            const calq_tensor *c = g->values[n->inputs[1]].constant;
            if (c && c->dtype == CALQ_DTYPE_INT64 && c->ndim == 1 && c->dims[0] > 0 &&
                ((const int64_t *)c->data)[0] > 0) {
                char shape[160];
                size_t at = 0;
                for (int64_t k = 0; k < c->dims[0] && at < sizeof shape; k++)
                    at += (size_t)snprintf(shape + at, sizeof shape - at, "%s%lld", k ? ", " : "",
                                           (long long)((const int64_t *)c->data)[k]);
                size_t len = strlen(err->message);
                snprintf(err->message + len, sizeof err->message - len,
                         ". The cause is likely node '%s' (Reshape), whose constant shape [%s] fixes dim 0, the "
                         "batch: the model runs only at the batch its file fixes. Feed data with that batch, or "
                         "export the model with a dynamic batch dim",
                         n->name, shape);
                return;
            }
        }
        if (failed && !strcmp(n->name, failed)) return;
    }
}

calq_status calq__batch_check(const calq_graph *g, const calq_tensor *inputs, int n, const bool *rebatched,
                              calq_error *err)
{
    calq_tensor *ins = calloc((size_t)(2 * n) + 1, sizeof *ins);
    if (!ins) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    calq_plan *p[2] = {NULL, NULL};
    calq_status st = CALQ_OK;
    for (int b = 0; b < 2 && st == CALQ_OK; b++) {
        calq_tensor *in = ins + b * n;
        for (int i = 0; i < n; i++) {
            in[i] = inputs[i];
            in[i].data = NULL; /* shapes only */
            if (rebatched[i]) in[i].dims[0] = 2 + b;
        }
        st = calq__plan_build(g, in, n, false, 0, &p[b], err);
        if (st != CALQ_OK) {
            calq__prefix(err, "the model does not plan at another batch than its file's (tried batch %d)", 2 + b);
            name_cause(g, err->layer[0] ? err->layer : NULL, err);
        }
    }
    char s1[128], s2[128], why[512];
    for (int ni = 0; st == CALQ_OK && ni < g->n_nodes; ni++) {
        const calq_node *nd = &g->nodes[ni];
        if (!strcmp(nd->op_type, "Shape") || !strcmp(nd->op_type, "Size")) continue;
        int in_axis = -1, in_v = -1;
        int64_t in_k = 0;
        for (int k = 0; k < nd->n_inputs && in_axis < 0; k++) {
            int v = nd->inputs[k];
            if (v < 0 || p[0]->vals[v].kind == CALQ_PV_NONE || p[0]->vals[v].kind == CALQ_PV_DYNAMIC) continue;
            int a = batch_axis(&p[0]->vals[v].t, &p[1]->vals[v].t, &in_k);
            if (a >= 0) {
                in_axis = a;
                in_v = v;
            }
        }
        if (in_axis < 0) continue; /* no batch in: constants, shapes */
        bool any_out = false;
        for (int k = 0; k < nd->n_outputs && st == CALQ_OK; k++) {
            int v = nd->outputs[k];
            if (v < 0 || p[0]->vals[v].kind == CALQ_PV_NONE || p[0]->vals[v].kind == CALQ_PV_DYNAMIC) {
                any_out = true; /* a shape known only at run time: not judged here */
                continue;
            }
            const calq_tensor *a = &p[0]->vals[v].t, *b = &p[1]->vals[v].t;
            int64_t out_k = 0;
            int oa = batch_axis(a, b, &out_k);
            if (oa == -1) continue;
            any_out = true;
            if (oa == -2) {
                snprintf(why, sizeof why, "makes '%s' %s at batch 2 and %s at batch 3, not one batch axis",
                         g->values[v].name, shape_of(a, s1, sizeof s1), shape_of(b, s2, sizeof s2));
                st = tie(g, nd, why, err);
            } else if (oa != in_axis && out_k != in_k) {
                snprintf(why, sizeof why,
                         "merges the batch of '%s' (axis %d, %s at batch 2) with other elements into axis %d of '%s' "
                         "(%s at batch 2), so the samples are no longer apart",
                         g->values[in_v].name, in_axis, shape_of(&p[0]->vals[in_v].t, s1, sizeof s1), oa,
                         g->values[v].name, shape_of(a, s2, sizeof s2));
                st = tie(g, nd, why, err);
            }
        }
        if (st == CALQ_OK && !any_out) {
            snprintf(why, sizeof why,
                     "reads the batch of '%s' (axis %d) but its output does not carry it: it reduces over the batch "
                     "or picks fixed samples",
                     g->values[in_v].name, in_axis);
            st = tie(g, nd, why, err);
        }
    }
    calq__plan_free(p[0]);
    calq__plan_free(p[1]);
    free(ins);
    return st;
}
