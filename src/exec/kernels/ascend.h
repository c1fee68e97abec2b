/* The integer layers of Ascend deploy models (amct-reference.md §9.1): int8 input from an
 * AscendQuant, int8 weight, int32 bias, int32 output y = sum((q_x - o) * q_w) + bias_q.
 *
 * The graph pass calq__pass_lower_ascend (src/graph/lower_ascend.c), which every session runs,
 * rewrites them into the internal operators calq.AscendConv, calq.AscendConvTranspose,
 * calq.AscendGemm, calq.AscendMatMul and calq.AscendAveragePool (table calq__ops_ascend_int in
 * ascend_ops.c; kernels in conv_int.c, quant_gemm.c and pool.c), with the AscendQuant's offset o as
 * the node's `input_offset` attribute. The float Conv, Gemm, ... kernels then see int8 input only
 * when the pass did not recognise the layer, and fail with calq__ascend_unlowered. */
#ifndef CALQ_EXEC_KERNELS_ASCEND_H
#define CALQ_EXEC_KERNELS_ASCEND_H

#include "exec/op.h"

/* Input 0 is int8: what a float layer cannot compute. */
static inline bool calq__ascend_int_input(const calq_op_ctx *c)
{
    return c->n_in > 0 && c->in[0] && c->in[0]->dtype == CALQ_DTYPE_INT8;
}

/* The error of a float layer (Conv, ConvTranspose, Gemm, MatMul, AveragePool) whose input 0 is
 * int8 but not the output of an AscendQuant (so it is no deploy model's integer layer):
 * CALQ_ERR_UNSUPPORTED naming the layer and what calq would accept. */
calq_status calq__ascend_unlowered(calq_op_ctx *c);

/* The input offset o of a lowered integer layer: its `input_offset` attribute, an integer in
 * [-128, 127] (CALQ_ERR_BAD_FORMAT naming the layer otherwise). */
calq_status calq__ascend_input_offset(calq_op_ctx *c, int32_t *offset);

#endif
