/* Copy of a graph, so passes can rewrite a session's copy while the model keeps the original
 * (save patches the original; calibration with do_fusion=false needs it unfused). */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/tensor.h"
#include "graph/graph.h"
#include "graph/passes.h"

calq_status calq__attr_copy(calq_graph *g, int ni, const calq_attr *a, calq_error *err)
{
    calq_attr *c = calq__node_add_attr(g, ni, a->name, a->type);
    if (!c) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    c->i = a->i;
    c->f = a->f;
    c->n = a->n;
    if (a->s && !(c->s = strdup(a->s))) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    if (a->ints) {
        if (!(c->ints = malloc(sizeof(int64_t) * (size_t)(a->n + 1))))
            return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
        memcpy(c->ints, a->ints, sizeof(int64_t) * (size_t)a->n);
    }
    if (a->floats) {
        if (!(c->floats = malloc(sizeof(float) * (size_t)(a->n + 1))))
            return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
        memcpy(c->floats, a->floats, sizeof(float) * (size_t)a->n);
    }
    if (a->strings) {
        if (!(c->strings = calloc((size_t)a->n + 1, sizeof(char *))))
            return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
        for (int i = 0; i < a->n; i++)
            if (!(c->strings[i] = strdup(a->strings[i])))
                return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    }
    if (a->t) {
        if (!(c->t = calloc(1, sizeof *c->t))) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
        CALQ_TRY(calq__tensor_clone(c->t, a->t, err));
    }
    if (a->g) CALQ_TRY(calq__graph_clone(a->g, &c->g, err)); /* shares the subgraph's constants too */
    return CALQ_OK;
}

static calq_status clone_into(calq_graph *d, const calq_graph *s, calq_error *err)
{
    for (int v = 0; v < s->n_values; v++) {
        const calq_value *sv = &s->values[v];
        if (calq__graph_value(d, sv->name) != v) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
        calq_value *dv = &d->values[v];
        char *name = dv->name;
        *dv = *sv;
        dv->name = name;
        /* Constants are never written, so the copy views the source's tensors (weights are
         * not duplicated); passes that change a weight add a new constant instead. The
         * source graph must outlive the clone. */
        dv->constant_shared = sv->constant != NULL;
    }
    for (int i = 0; i < s->n_nodes; i++) {
        const calq_node *n = &s->nodes[i];
        int ni =
            calq__graph_add_node(d, n->name, n->op_type, n->domain, n->inputs, n->n_inputs, n->outputs, n->n_outputs);
        if (ni < 0) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
        d->nodes[ni].opset = n->opset;
        d->nodes[ni].n_formal = n->n_formal;
        d->nodes[ni].src_index = n->src_index;
        for (int a = 0; a < n->n_attrs; a++) CALQ_TRY(calq__attr_copy(d, ni, &n->attrs[a], err));
    }
    d->inputs = malloc(sizeof(int) * ((size_t)s->n_inputs + 1));
    d->outputs = malloc(sizeof(int) * ((size_t)s->n_outputs + 1));
    if (!d->inputs || !d->outputs) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    memcpy(d->inputs, s->inputs, sizeof(int) * (size_t)s->n_inputs);
    memcpy(d->outputs, s->outputs, sizeof(int) * (size_t)s->n_outputs);
    d->n_inputs = s->n_inputs;
    d->n_formal_inputs = s->n_formal_inputs;
    d->n_outputs = s->n_outputs;
    d->opset = s->opset;
    d->any_input_dims = s->any_input_dims;
    return CALQ_OK;
}

calq_status calq__graph_clone(const calq_graph *src, calq_graph **out, calq_error *err)
{
    *out = NULL;
    calq_graph *d = calq__graph_new();
    if (!d) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    calq_status s = clone_into(d, src, err);
    if (s != CALQ_OK) {
        calq__graph_free(d);
        return s;
    }
    *out = d;
    return CALQ_OK;
}
