/* onnxruntime's integer matrix products QGemm and MatMulIntegerToFloat (quant_gemm.c), listed
 * in quant_ops.c's table; calq's QDQ fusion pass (src/graph/fuse_qdq.c) creates them. */
#ifndef CALQ_EXEC_KERNELS_QUANT_GEMM_H
#define CALQ_EXEC_KERNELS_QUANT_GEMM_H

#include "exec/op.h"

calq_status calq__qgemm_infer(calq_op_ctx *c);
calq_status calq__qgemm_run(calq_op_ctx *c);
calq_status calq__matmul_int_to_float_infer(calq_op_ctx *c);
calq_status calq__matmul_int_to_float_run(calq_op_ctx *c);

#endif
