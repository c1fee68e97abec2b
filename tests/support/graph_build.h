/* Building small calq_graphs in C for the executor's unit tests (test_exec_layouts,
 * test_exec_transformer): inputs, random or given float constants, nodes with one output named
 * "<node>.out", attributes on the last node added, graph outputs. The graph owns everything
 * added (calq__graph_free). */
#ifndef CALQ_TEST_GRAPH_BUILD_H
#define CALQ_TEST_GRAPH_BUILD_H

#include <stdbool.h>
#include <stdint.h>

#include "graph/graph.h"

typedef struct gb {
    calq_graph *g;
    unsigned seed; /* of the next random constant */
    int n_out;
} gb;

/* Room for 4 inputs and 16 outputs. */
gb gb_new(void);
int gb_input(gb *b, const char *name, const int64_t *dims, int nd);
/* t's data is taken over by the graph. */
int gb_const_t(gb *b, const char *name, calq_tensor t);
/* uniform in [lo, hi], seeded by b->seed */
int gb_const(gb *b, const char *name, const int64_t *dims, int nd, float lo, float hi);
int gb_scalar(gb *b, const char *name, float v);
/* a node of opset 13 with one output; returns the output value */
int gb_node(gb *b, const char *name, const char *op, const int *ins, int n);
int gb_unary(gb *b, const char *name, const char *op, int x);
int gb_binary(gb *b, const char *name, const char *op, int x, int y);
/* the last node added, and attributes on it */
int gb_last_node(const gb *b);
void gb_ints(gb *b, const char *name, const int64_t *v, int n);
void gb_int(gb *b, const char *name, int64_t v);
void gb_float(gb *b, const char *name, float v);
void gb_str(gb *b, const char *name, const char *v);
void gb_output(gb *b, int v);

/* Same shape bytes and the same bits (both computed). */
bool t_same_bits(const calq_tensor *a, const calq_tensor *b);
void t_free_all(calq_tensor *t, int n);

#endif
