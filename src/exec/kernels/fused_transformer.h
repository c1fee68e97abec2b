/* The steps the fast planner runs in place of a transformer's written-out layers
 * (exec/plan_fuse.c finds them): LayerNormalization spelled as ReduceMean, Sub, Pow, ReduceMean,
 * Add, Sqrt, Div (Mul, Add), GELU spelled as Div, Erf, Add, Mul, Mul, and attention as MatMul,
 * (Mul or Div,) Softmax, MatMul. None is an ONNX node: a fused step has only these defs and the
 * state their prepare functions build. */
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

/* in[0] Q [.., M, D], in[1] Kt [.., D, N], in[2] V [.., N, E] (float32, the same batch dims),
 * out[0] O = Softmax(scale(Q . Kt), last axis) . V [.., M, E], the scores never stored
 * (fused_attention.c). scale: none, a multiplication or a division by k. */
typedef enum calq_attention_scale { CALQ_ATT_NONE, CALQ_ATT_MUL, CALQ_ATT_DIV } calq_attention_scale;
extern const calq_op_def calq__op_fused_attention;
/* c->state for the fused attention, or NULL when the shapes are not of that form. */
calq_status calq__fused_attention_prepare(calq_op_ctx *c, calq_attention_scale mode, float k);

#endif
