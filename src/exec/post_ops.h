/* The element-wise layers the fast planner can fold into the convolution or matrix product
 * before them as oneDNN post-ops (post_ops.c holds the table). */
#ifndef CALQ_EXEC_POST_OPS_H
#define CALQ_EXEC_POST_OPS_H

#include "exec/plan.h"

/* True when node n, reading value x (the producer's output) as its activation input, can be
 * applied as a post-op: fills *op (operand pointing at the plan value of the other input for a
 * sum or per-channel add / multiply, whose index goes to *operand_v; -1 otherwise). The output
 * must have x's shape (no broadcasting beyond it). */
bool calq__post_op_for(const calq_plan *p, const calq_node *n, int x, calq_post_op *op, int *operand_v);

#endif
