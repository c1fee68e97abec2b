/* Integer matrix products (quant_gemm.c): ONNX's QLinearMatMul and onnxruntime's QGemm and
 * MatMulIntegerToFloat, listed in quant_ops.c's table (calq's QDQ fusion pass,
 * src/graph/fuse_qdq.c, creates the last two), the integer Gemm / MatMul of Ascend deploy models;
 * and the checks and the requantizing store that
 * every quantized operator of quant_ops.c shares with them. */
#ifndef CALQ_EXEC_KERNELS_QUANT_GEMM_H
#define CALQ_EXEC_KERNELS_QUANT_GEMM_H

#include "exec/op.h"

calq_status calq__qgemm_infer(calq_op_ctx *c);
calq_status calq__qgemm_run(calq_op_ctx *c);
calq_status calq__qlinear_matmul_infer(calq_op_ctx *c);
calq_status calq__qlinear_matmul_run(calq_op_ctx *c);
calq_status calq__matmul_int_to_float_infer(calq_op_ctx *c);
calq_status calq__matmul_int_to_float_run(calq_op_ctx *c);
/* calq.AscendGemm / calq.AscendMatMul (ascend.h): the integer Gemm / MatMul of an Ascend deploy
 * model (amct-reference.md §9.1), int32 output. */
calq_status calq__ascend_gemm_infer(calq_op_ctx *c);
calq_status calq__ascend_gemm_run(calq_op_ctx *c);
calq_status calq__ascend_matmul_infer(calq_op_ctx *c);
calq_status calq__ascend_matmul_run(calq_op_ctx *c);

/* The oneDNN fast paths of the products above (int_dnnl.h); calq__int_mm_release frees their state. */
calq_status calq__qgemm_prepare(calq_op_ctx *c);
calq_status calq__qgemm_run_fast(calq_op_ctx *c);
calq_status calq__qlinear_matmul_prepare(calq_op_ctx *c);
calq_status calq__qlinear_matmul_run_fast(calq_op_ctx *c);
calq_status calq__matmul_int_to_float_prepare(calq_op_ctx *c);
calq_status calq__matmul_int_to_float_run_fast(calq_op_ctx *c);
calq_status calq__ascend_gemm_prepare(calq_op_ctx *c);
calq_status calq__ascend_gemm_run_fast(calq_op_ctx *c);
calq_status calq__ascend_matmul_prepare(calq_op_ctx *c);
calq_status calq__ascend_matmul_run_fast(calq_op_ctx *c);
void calq__int_mm_release(void *state);

/* Scale tensor s (named `what` in the message) must be float32, and each value finite and non-zero:
 * a zero or infinite scale makes x / scale or a requantization multiplier infinite or NaN. Values
 * are checked when known (at infer only for constants; always at run); s NULL passes. */
calq_status calq__qscale_check(calq_op_ctx *c, const calq_tensor *s, const char *what);

/* Zero point z (named `what`), when given, must have the quantized data's type t (int8 / uint8):
 * ONNX and onnxruntime type them alike, and the kernels read them as that type. */
calq_status calq__qzp_check(calq_op_ctx *c, const calq_tensor *z, calq_dtype t, const char *what);

/* y[i] = saturate(round_half_even(v) + zp) into int8 / uint8 y. NaN gives the type's minimum, as
 * in onnxruntime's x86 kernels (their max / min clamp returns the bound for NaN); a C cast of NaN
 * to an integer would be undefined. */
void calq__store_q(calq_tensor *y, int64_t i, float v, int64_t zp);

#endif
