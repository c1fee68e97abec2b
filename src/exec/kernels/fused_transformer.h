/* The steps the fast planner runs in place of a transformer's written-out layers
 * (exec/plan_fuse.c finds them): LayerNormalization spelled as ReduceMean, Sub, Pow, ReduceMean,
 * Add, Sqrt, Div (Mul, Add), and GELU spelled as Div, Erf, Add, Mul, Mul. Neither is an ONNX node:
 * a fused step has only these defs and the state their prepare functions build. */
#ifndef CALQ_EXEC_FUSED_TRANSFORMER_H
#define CALQ_EXEC_FUSED_TRANSFORMER_H

#include "exec/op.h"

/* in[0] x (float32, normalized over its last dim), in[1] scale and in[2] bias (float32
 * constants of one value per element of that dim; NULL when absent), out[0] y. */
extern const calq_op_def calq__op_fused_layer_norm;
/* Builds oneDNN's layer normalization for c's tensors into c->state, or leaves it NULL when
 * oneDNN offers only its reference implementation (the planner then keeps the layers). Fails only
 * when out of memory. */
calq_status calq__fused_layer_norm_prepare(calq_op_ctx *c, float eps);

/* in[0] x, out[0] y = GELU's written-out steps with constants c1, c2, c3 and form
 * (GELU_PARTS_* of elementwise_mvec.h); bit-identical to the layers on their fast kernels. */
extern const calq_op_def calq__op_fused_gelu;
/* c->state for the fused GELU, NULL when the CPU has no vector erf (the layers stay). */
calq_status calq__fused_gelu_prepare(calq_op_ctx *c, float c1, float c2, float c3, unsigned form);

#endif
