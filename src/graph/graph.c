#include "graph/graph.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/unique_name.h"

static char *dupstr(const char *s)
{
    if (!s) s = "";
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

calq_graph *calq__graph_new(void)
{
    return calloc(1, sizeof(calq_graph));
}

static void attr_free(calq_attr *a)
{
    free(a->name);
    free(a->s);
    free(a->ints);
    free(a->floats);
    if (a->strings)
        for (int i = 0; i < a->n; i++) free(a->strings[i]);
    free(a->strings);
    if (a->t) {
        calq_tensor_free_data(a->t);
        free(a->t);
    }
    calq__graph_free(a->g);
}

void calq__node_release(calq_node *n)
{
    free(n->name);
    free(n->op_type);
    free(n->domain);
    free(n->inputs);
    free(n->outputs);
    for (int a = 0; a < n->n_attrs; a++) attr_free(&n->attrs[a]);
    free(n->attrs);
    memset(n, 0, sizeof *n);
}

void calq__graph_free(calq_graph *g)
{
    if (!g) return;
    for (int i = 0; i < g->n_values; i++) {
        free(g->values[i].name);
        if (g->values[i].constant && !g->values[i].constant_shared) {
            calq_tensor_free_data(g->values[i].constant);
            free(g->values[i].constant);
        }
    }
    for (int i = 0; i < g->n_nodes; i++) calq__node_release(&g->nodes[i]);
    free(g->values);
    free(g->nodes);
    free(g->inputs);
    free(g->outputs);
    free(g->hash);
    free(g);
}

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int rehash(calq_graph *g, int cap)
{
    int *h = malloc(sizeof(int) * (size_t)cap);
    if (!h) return -1;
    for (int i = 0; i < cap; i++) h[i] = -1;
    for (int v = 0; v < g->n_values; v++) {
        uint64_t k = hash_str(g->values[v].name) & (uint64_t)(cap - 1);
        while (h[k] >= 0) k = (k + 1) & (uint64_t)(cap - 1);
        h[k] = v;
    }
    free(g->hash);
    g->hash = h;
    g->hash_cap = cap;
    return 0;
}

int calq__graph_find(const calq_graph *g, const char *name)
{
    if (!g->hash_cap || !name) return -1;
    uint64_t k = hash_str(name) & (uint64_t)(g->hash_cap - 1);
    while (g->hash[k] >= 0) {
        if (strcmp(g->values[g->hash[k]].name, name) == 0) return g->hash[k];
        k = (k + 1) & (uint64_t)(g->hash_cap - 1);
    }
    return -1;
}

bool calq__graph_name_taken(const void *g, const char *name)
{
    return calq__graph_find(g, name) >= 0;
}

bool calq__graph_node_name_taken(const void *ctx, const char *name)
{
    const calq_graph *g = ctx;
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].name && strcmp(g->nodes[i].name, name) == 0) return true;
    return false;
}

char *calq__graph_unique_name(const calq_graph *g, const char *base, const char *suffix, const char *sep, int first)
{
    return calq__unique_name(base, suffix, sep, first, calq__graph_name_taken, g);
}

int calq__graph_value(calq_graph *g, const char *name)
{
    int v = calq__graph_find(g, name);
    if (v >= 0) return v;
    if (g->n_values == g->cap_values) {
        int cap = g->cap_values ? g->cap_values * 2 : 64;
        calq_value *nv = realloc(g->values, sizeof(calq_value) * (size_t)cap);
        if (!nv) return -1;
        g->values = nv;
        g->cap_values = cap;
    }
    calq_value *val = &g->values[g->n_values];
    memset(val, 0, sizeof *val);
    val->name = dupstr(name);
    if (!val->name) return -1;
    val->ndim = -1;
    val->producer = -1;
    g->n_values++;
    if (g->n_values * 2 > g->hash_cap) {
        if (rehash(g, g->hash_cap ? g->hash_cap * 2 : 128) != 0) {
            g->n_values--;
            free(val->name);
            return -1;
        }
    } else {
        uint64_t k = hash_str(name) & (uint64_t)(g->hash_cap - 1);
        while (g->hash[k] >= 0) k = (k + 1) & (uint64_t)(g->hash_cap - 1);
        g->hash[k] = g->n_values - 1;
    }
    return g->n_values - 1;
}

int calq__graph_add_node(calq_graph *g, const char *name, const char *op_type, const char *domain, const int *inputs,
                         int n_inputs, const int *outputs, int n_outputs)
{
    if (g->n_nodes == g->cap_nodes) {
        int cap = g->cap_nodes ? g->cap_nodes * 2 : 64;
        calq_node *nn = realloc(g->nodes, sizeof(calq_node) * (size_t)cap);
        if (!nn) return -1;
        g->nodes = nn;
        g->cap_nodes = cap;
    }
    calq_node *n = &g->nodes[g->n_nodes];
    memset(n, 0, sizeof *n);
    n->name = dupstr(name);
    n->op_type = dupstr(op_type);
    n->domain = dupstr(domain);
    n->inputs = malloc(sizeof(int) * (size_t)(n_inputs + 1));
    n->outputs = malloc(sizeof(int) * (size_t)(n_outputs + 1));
    n->src_index = -1;
    n->n_formal = n_inputs;
    if (!n->name || !n->op_type || !n->domain || !n->inputs || !n->outputs) {
        free(n->name);
        free(n->op_type);
        free(n->domain);
        free(n->inputs);
        free(n->outputs);
        return -1;
    }
    if (n_inputs) memcpy(n->inputs, inputs, sizeof(int) * (size_t)n_inputs);
    if (n_outputs) memcpy(n->outputs, outputs, sizeof(int) * (size_t)n_outputs);
    n->n_inputs = n_inputs;
    n->n_outputs = n_outputs;
    return g->n_nodes++;
}

calq_attr *calq__node_add_attr(calq_graph *g, int ni, const char *name, calq_attr_type type)
{
    calq_node *n = &g->nodes[ni];
    calq_attr *na = realloc(n->attrs, sizeof(calq_attr) * (size_t)(n->n_attrs + 1));
    if (!na) return NULL;
    n->attrs = na;
    calq_attr *a = &na[n->n_attrs];
    memset(a, 0, sizeof *a);
    a->name = dupstr(name);
    if (!a->name) return NULL;
    a->type = type;
    n->n_attrs++;
    return a;
}

calq_status calq__graph_toposort(calq_graph *g, calq_error *err)
{
    int nn = g->n_nodes;
    for (int v = 0; v < g->n_values; v++) g->values[v].producer = -1;
    for (int i = 0; i < nn; i++) {
        for (int o = 0; o < g->nodes[i].n_outputs; o++) {
            int v = g->nodes[i].outputs[o];
            if (v < 0) continue;
            if (g->values[v].producer >= 0 || g->values[v].constant || g->values[v].is_input)
                return calq__fail(
                    err, CALQ_ERR_BAD_FORMAT, g->nodes[i].name,
                    "tensor '%s' is produced twice (by node '%s' and by %s)", g->values[v].name, g->nodes[i].name,
                    g->values[v].producer >= 0 ? g->nodes[g->values[v].producer].name : "a graph input or initializer");
            g->values[v].producer = i;
        }
    }
    /* Kahn's algorithm, always taking the lowest ready index (a min-heap), so a model already in
     * order keeps its order. Consumer lists make it O((V + E) log V). */
    int *indeg = calloc((size_t)nn + 1, sizeof(int));
    int *order = malloc(sizeof(int) * ((size_t)nn + 1));
    int *heap = malloc(sizeof(int) * ((size_t)nn + 1));
    int *first = malloc(sizeof(int) * ((size_t)g->n_values + 1)); /* consumer list head per value */
    size_t n_edges = 0;
    for (int i = 0; i < nn; i++) n_edges += (size_t)g->nodes[i].n_inputs;
    int *next = malloc(sizeof(int) * (n_edges + 1)), *cons = malloc(sizeof(int) * (n_edges + 1));
    char *done = calloc((size_t)nn + 1, 1);
    if (!indeg || !order || !heap || !first || !next || !cons || !done) {
        free(indeg);
        free(order);
        free(heap);
        free(first);
        free(next);
        free(cons);
        free(done);
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory sorting the graph");
    }
    for (int v = 0; v < g->n_values; v++) first[v] = -1;
    int e = 0;
    for (int i = 0; i < nn; i++)
        for (int k = 0; k < g->nodes[i].n_inputs; k++) {
            int v = g->nodes[i].inputs[k];
            if (v < 0 || g->values[v].producer < 0) continue;
            indeg[i]++;
            cons[e] = i;
            next[e] = first[v];
            first[v] = e++;
        }
    int n_heap = 0, placed = 0;
    for (int i = 0; i < nn; i++)
        if (indeg[i] == 0) heap[n_heap++] = i; /* ascending: already a heap */
    while (n_heap > 0) {
        int pick = heap[0];
        heap[0] = heap[--n_heap];
        for (int at = 0;;) { /* sift down */
            int l = 2 * at + 1, r = l + 1, m = at;
            if (l < n_heap && heap[l] < heap[m]) m = l;
            if (r < n_heap && heap[r] < heap[m]) m = r;
            if (m == at) break;
            int t = heap[m];
            heap[m] = heap[at];
            heap[at] = t;
            at = m;
        }
        done[pick] = 1;
        order[placed++] = pick;
        for (int o = 0; o < g->nodes[pick].n_outputs; o++) {
            int v = g->nodes[pick].outputs[o];
            if (v < 0) continue;
            for (int q = first[v]; q >= 0; q = next[q])
                if (--indeg[cons[q]] == 0) {
                    int at = n_heap++; /* sift up */
                    heap[at] = cons[q];
                    while (at > 0 && heap[(at - 1) / 2] > heap[at]) {
                        int t = heap[(at - 1) / 2];
                        heap[(at - 1) / 2] = heap[at];
                        heap[at] = t;
                        at = (at - 1) / 2;
                    }
                }
        }
    }
    free(heap);
    free(first);
    free(next);
    free(cons);
    if (placed < nn) {
        int bad = 0;
        while (bad < nn && done[bad]) bad++;
        calq_status s = calq__fail(err, CALQ_ERR_BAD_FORMAT, g->nodes[bad].name,
                                   "the graph has a cycle (or a node waits for a tensor no node produces): node '%s' "
                                   "(%s) can never run",
                                   g->nodes[bad].name, g->nodes[bad].op_type);
        free(indeg);
        free(order);
        free(done);
        return s;
    }
    calq_node *sorted = malloc(sizeof(calq_node) * ((size_t)nn + 1));
    if (!sorted) {
        free(indeg);
        free(order);
        free(done);
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory sorting the graph");
    }
    for (int i = 0; i < nn; i++) sorted[i] = g->nodes[order[i]];
    if (nn) memcpy(g->nodes, sorted, sizeof(calq_node) * (size_t)nn);
    free(sorted);
    free(indeg);
    free(order);
    free(done);
    for (int i = 0; i < nn; i++)
        for (int o = 0; o < g->nodes[i].n_outputs; o++)
            if (g->nodes[i].outputs[o] >= 0) g->values[g->nodes[i].outputs[o]].producer = i;
    return CALQ_OK;
}

const calq_attr *calq__attr(const calq_node *n, const char *name)
{
    for (int i = 0; i < n->n_attrs; i++)
        if (strcmp(n->attrs[i].name, name) == 0) return &n->attrs[i];
    return NULL;
}

int64_t calq__attr_int(const calq_node *n, const char *name, int64_t dflt)
{
    const calq_attr *a = calq__attr(n, name);
    if (!a) return dflt;
    if (a->type == CALQ_ATTR_INT) return a->i;
    if (a->type == CALQ_ATTR_FLOAT) return (int64_t)a->f;
    return dflt;
}

float calq__attr_float(const calq_node *n, const char *name, float dflt)
{
    const calq_attr *a = calq__attr(n, name);
    if (!a) return dflt;
    if (a->type == CALQ_ATTR_FLOAT) return a->f;
    if (a->type == CALQ_ATTR_INT) return (float)a->i;
    return dflt;
}

const char *calq__attr_str(const calq_node *n, const char *name, const char *dflt)
{
    const calq_attr *a = calq__attr(n, name);
    return a && a->type == CALQ_ATTR_STRING ? a->s : dflt;
}

int calq__attr_ints(const calq_node *n, const char *name, const int64_t **vals)
{
    const calq_attr *a = calq__attr(n, name);
    if (!a || a->type != CALQ_ATTR_INTS) {
        *vals = NULL;
        return -1;
    }
    *vals = a->ints;
    return a->n;
}

int calq__attr_floats(const calq_node *n, const char *name, const float **vals)
{
    const calq_attr *a = calq__attr(n, name);
    if (!a || a->type != CALQ_ATTR_FLOATS) {
        *vals = NULL;
        return -1;
    }
    *vals = a->floats;
    return a->n;
}
