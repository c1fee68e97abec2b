/* The fast kernels of float32 Erf, Exp, Tanh, Sigmoid and Gelu: glibc's vector math library
 * (elementwise_mvec.c). */
#ifndef CALQ_EXEC_ELEMENTWISE_MVEC_H
#define CALQ_EXEC_ELEMENTWISE_MVEC_H

#include "exec/kernels/elementwise_common.h"

/* The vectorized float32 row of op_type (an ONNX op name) on this CPU, or NULL when there is
 * none (another op, or a CPU without AVX2 + FMA): the reference row runs then. Gelu's row is
 * its exact (erf) form. */
ew_row calq__ew_mvec_row(const char *op_type);

#endif
