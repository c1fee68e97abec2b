/* ONNX TensorProto -> calq_tensor, including external data files. */
#ifndef CALQ_FRONTEND_ONNX_TENSOR_H
#define CALQ_FRONTEND_ONNX_TENSOR_H

#include "calq.h"
#include "onnx/onnx.pb-c.h"

/* ONNX TensorProto.DataType number -> calq dtype (UNDEFINED when calq has no such type). */
calq_dtype calq__onnx_dtype(int32_t onnx_type);
/* calq dtype -> ONNX TensorProto.DataType number (0 when none). */
int32_t calq__onnx_dtype_to_onnx(calq_dtype t);

/* Converts `tp` into `out` (data malloc'ed; owner: caller). `base_dir` resolves external data
 * (NULL: no external data allowed). `what` names the tensor in messages. */
calq_status calq__onnx_tensor_load(const Onnx__TensorProto *tp, const char *base_dir, calq_tensor *out,
                                   calq_error *err);

#endif
