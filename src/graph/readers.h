/* Who reads each value of a graph: for value v, the (node, input) pairs
 * node[start[v] .. start[v + 1]) / input[...], in node order and input order, so a pass that
 * asks "who reads v" for every layer is linear in the graph instead of a scan of every node
 * per question (a 10k-layer export spent seconds there, issue 14). A snapshot: rebuild after
 * changing the graph. Owner: the caller (calq__readers_free). */
#ifndef CALQ_GRAPH_READERS_H
#define CALQ_GRAPH_READERS_H

#include "graph/graph.h"

typedef struct calq_readers {
    int *start; /* n_values + 1 */
    int *node, *input;
} calq_readers;

/* false on out-of-memory (r zeroed). */
bool calq__readers_build(const calq_graph *g, calq_readers *r);
void calq__readers_free(calq_readers *r);

#endif
