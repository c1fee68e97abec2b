/* A copy of a graph with nodes spliced in (graph/splice.h). */
#include "graph/splice.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "graph/passes.h"

static calq_status oom(calq_error *err)
{
    return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory building a graph");
}

int calq__graph_new_value(calq_graph *g, const char *name, calq_tensor *t, bool own, calq_error *err)
{
    if (calq__graph_find(g, name) >= 0) {
        if (t && own) {
            calq_tensor_free_data(t);
            free(t);
        }
        calq__fail(err, CALQ_ERR_INTERNAL, NULL, "graph: value \"%s\" exists already", name);
        return -1;
    }
    int v = calq__graph_value(g, name);
    if (v < 0) {
        if (t && own) {
            calq_tensor_free_data(t);
            free(t);
        }
        oom(err);
        return -1;
    }
    if (t) {
        calq_value *val = &g->values[v];
        val->constant = t;
        val->constant_shared = !own;
        val->dtype = t->dtype;
        val->ndim = t->ndim;
        memcpy(val->dims, t->dims, sizeof val->dims);
    }
    return v;
}

int calq__graph_new_node(calq_graph *g, const char *name, const char *op_type, const int *in, int n_in, const int *out,
                         int n_out, calq_error *err)
{
    int ni = calq__graph_add_node(g, name, op_type, "", in, n_in, out, n_out);
    if (ni < 0) {
        oom(err);
        return -1;
    }
    g->nodes[ni].opset = g->opset;
    g->nodes[ni].src_index = -1;
    return ni;
}

int calq__graph_copy_node(calq_graph *g, const calq_node *n, const char *name, const int *in, const int *out,
                          calq_error *err)
{
    int ni = calq__graph_add_node(g, name, n->op_type, n->domain, in, n->n_inputs, out, n->n_outputs);
    if (ni < 0) {
        oom(err);
        return -1;
    }
    g->nodes[ni].opset = n->opset;
    g->nodes[ni].n_formal = n->n_formal;
    g->nodes[ni].src_index = -1;
    for (int a = 0; a < n->n_attrs; a++)
        if (calq__attr_copy(g, ni, &n->attrs[a], err) != CALQ_OK) return -1;
    return ni;
}

bool calq__node_set_float(calq_graph *g, int ni, const char *name, float v)
{
    calq_attr *a = calq__node_add_attr(g, ni, name, CALQ_ATTR_FLOAT);
    if (a) a->f = v;
    return a != NULL;
}

bool calq__node_set_int(calq_graph *g, int ni, const char *name, int64_t v)
{
    calq_attr *a = calq__node_add_attr(g, ni, name, CALQ_ATTR_INT);
    if (a) a->i = v;
    return a != NULL;
}

bool calq__node_set_str(calq_graph *g, int ni, const char *name, const char *v)
{
    calq_attr *a = calq__node_add_attr(g, ni, name, CALQ_ATTR_STRING);
    if (a && !(a->s = strdup(v))) return false;
    return a != NULL;
}

calq_status calq__graph_splice(const calq_graph *src, calq__splice_fn after, void *user, calq_graph **out,
                               calq_error *err)
{
    *out = NULL;
    calq_graph *d = calq__graph_new();
    if (!d) return oom(err);
    calq_status st = CALQ_OK;
    for (int v = 0; v < src->n_values && st == CALQ_OK; v++) {
        const calq_value *sv = &src->values[v];
        if (calq__graph_value(d, sv->name) != v) {
            st = oom(err);
            break;
        }
        calq_value *dv = &d->values[v];
        char *name = dv->name;
        *dv = *sv;
        dv->name = name;
        dv->constant_shared = sv->constant != NULL; /* viewed, never freed here (as calq__graph_clone) */
    }
    d->opset = src->opset;
    d->any_input_dims = src->any_input_dims;
    for (int i = 0; i < src->n_nodes && st == CALQ_OK; i++) {
        const calq_node *n = &src->nodes[i];
        if (calq__graph_copy_node(d, n, n->name, n->inputs, n->outputs, err) < 0) {
            st = err->status;
            break;
        }
        d->nodes[d->n_nodes - 1].src_index = n->src_index;
        if (after) st = after(user, d, i, err);
    }
    if (st == CALQ_OK) {
        d->inputs = malloc(sizeof(int) * ((size_t)src->n_inputs + 1));
        d->outputs = malloc(sizeof(int) * ((size_t)src->n_outputs + 1));
        if (!d->inputs || !d->outputs) st = oom(err);
    }
    if (st == CALQ_OK) {
        memcpy(d->inputs, src->inputs, sizeof(int) * (size_t)src->n_inputs);
        memcpy(d->outputs, src->outputs, sizeof(int) * (size_t)src->n_outputs);
        d->n_inputs = src->n_inputs;
        d->n_formal_inputs = src->n_formal_inputs;
        d->n_outputs = src->n_outputs;
        st = calq__graph_toposort(d, err);
    }
    if (st != CALQ_OK) {
        calq__graph_free(d);
        return st;
    }
    *out = d;
    return CALQ_OK;
}
