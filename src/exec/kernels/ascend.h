/* What the integer layers of an Ascend deploy model (amct-reference.md §9.1) need from the
 * Ascend operators of ascend_ops.c. */
#ifndef CALQ_EXEC_KERNELS_ASCEND_H
#define CALQ_EXEC_KERNELS_ASCEND_H

#include "exec/op.h"

/* An int8 input 0 makes Conv, ConvTranspose, Gemm, MatMul or AveragePool the integer layer of
 * an Ascend deploy model (§9.1: int8 from an AscendQuant in, int32 out); otherwise the float
 * path runs. */
static inline bool calq__ascend_int_input(const calq_op_ctx *c)
{
    return c->n_in > 0 && c->in[0] && c->in[0]->dtype == CALQ_DTYPE_INT8;
}

/* The input offset o of an integer layer (Conv, ConvTranspose, Gemm, MatMul, AveragePool whose
 * input 0 is int8): the `offset` attribute of the AscendQuant that produced input 0, found by
 * walking the graph (c->graph) from input 0 through value-preserving layout ops (Flatten,
 * Reshape, Squeeze, Unsqueeze, Identity: Caffe's InnerProduct imports as Flatten + Gemm).
 * The layer then computes sum((q_x - o) * q_w) + bias_q.
 *
 * Why a lookup and not an attribute: the offset lives on the AscendQuant node in the model
 * (§9.1); reading it where it is keeps every frontend, graph copy and pass consistent, with
 * nothing to rewrite. Fails with CALQ_ERR_UNSUPPORTED, naming the layer, when input 0 is not
 * from an AscendQuant (an int8 Conv calq cannot interpret), and with the AscendQuant's own
 * error when its attributes are invalid. */
calq_status calq__ascend_input_offset(calq_op_ctx *c, int32_t *offset);

#endif
