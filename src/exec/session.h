/* The executor's entry points on a graph: src/api builds the public calq_session_create and the
 * model loads on them, so exec never sees the model struct. */
#ifndef CALQ_EXEC_SESSION_H
#define CALQ_EXEC_SESSION_H

#include "graph/graph.h"

/* A session over g (borrowed: g must outlive the session and is never modified; input shapes
 * set on g later, e.g. by calq_model_set_input_shape, count at the next run). opts NULL or
 * all-zero: the defaults. Free with calq_session_free(). */
calq_status calq__session_create_graph(const calq_graph *g, const calq_session_opts *opts, calq_session **out,
                                       calq_error *err);

/* Steps of the current plan that run a fast kernel (0 before the first run): for tests. */
int calq__session_fast_steps(const calq_session *s);

/* CALQ_ERR_UNSUPPORTED with one message naming every operator type of g (and of its subgraphs)
 * the registry does not implement and the nodes using it; CALQ_OK when all are implemented. */
calq_status calq__graph_check_ops(const calq_graph *g, calq_error *err);

#endif
