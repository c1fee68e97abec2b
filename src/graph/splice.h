/* Building a graph around another one: a copy of a graph with extra nodes spliced in right
 * after chosen nodes (src/graph/splice.c). calq uses it for graphs that run a layer several
 * ways in one pass: act_algo "auto" (each candidate's fake-quantized copy of a layer) and
 * `calq compare --isolated` (each quantized layer fed the float model's input). Placing the
 * copies right after their layer keeps the float tensors they read short-lived. */
#ifndef CALQ_GRAPH_SPLICE_H
#define CALQ_GRAPH_SPLICE_H

#include "graph/graph.h"

/* Called after node `src_node`'s copy is added to dst; adds what belongs there. */
typedef calq_status (*calq__splice_fn)(void *user, calq_graph *dst, int src_node, calq_error *err);

/* dst (owner: caller, calq__graph_free): src's values at the same indices (constants shared
 * with src, which must outlive dst), its nodes in order, each followed by the nodes `after`
 * adds, src's inputs and outputs; toposorted. */
calq_status calq__graph_splice(const calq_graph *src, calq__splice_fn after, void *user, calq_graph **out,
                               calq_error *err);

/* A new value `name` (fails when the name exists). t: its constant, or NULL; own: the value
 * owns t (a heap calq_tensor and its data) and frees it, else it views t (which must outlive g).
 * On failure an owned t is freed. Returns the value index, or -1 with err set. */
int calq__graph_new_value(calq_graph *g, const char *name, calq_tensor *t, bool own, calq_error *err);
/* A node (op_type in the default domain, g's opset) with value indices in[] and out[]; -1 with
 * err set. */
int calq__graph_new_node(calq_graph *g, const char *name, const char *op_type, const int *in, int n_in, const int *out,
                         int n_out, calq_error *err);
/* A copy of node n of any graph (op type, domain, opset, attributes) with g's value indices in[]
 * (n->n_inputs of them) and out[] (n->n_outputs); -1 with err set. */
int calq__graph_copy_node(calq_graph *g, const calq_node *n, const char *name, const int *in, const int *out,
                          calq_error *err);
/* Attributes on node ni; false on out-of-memory. */
bool calq__node_set_float(calq_graph *g, int ni, const char *name, float v);
bool calq__node_set_int(calq_graph *g, int ni, const char *name, int64_t v);
bool calq__node_set_str(calq_graph *g, int ni, const char *name, const char *v);

#endif
