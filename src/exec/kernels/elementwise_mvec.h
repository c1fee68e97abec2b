/* The fast kernels of float32 Erf, Exp, Tanh, Sigmoid and Gelu: glibc's vector math library
 * (elementwise_mvec.c). */
#ifndef CALQ_EXEC_ELEMENTWISE_MVEC_H
#define CALQ_EXEC_ELEMENTWISE_MVEC_H

#include "exec/kernels/elementwise_common.h"

/* The vectorized float32 row of op_type (an ONNX op name) on this CPU, or NULL when there is
 * none (another op, or a CPU without AVX2 + FMA): the reference row runs then. Gelu's row is
 * its exact (erf) form. */
ew_row calq__ew_mvec_row(const char *op_type);

/* GELU written out as separate layers (exec/plan_fuse.c): with c1 = p->a, c2 = p->b, c3 = p->g,
 *   h = x / c1 (GELU_PARTS_MUL_FIRST: x * c1), a = erf(h) + c2,
 *   y = (x * a) * c3 (GELU_PARTS_SCALE_FIRST: (x * c3) * a),
 * each step rounded to float32 and erf the vector row's, so the result is bit for bit that of
 * the layers run one by one on their fast kernels. NULL without AVX2 + FMA. */
#define GELU_PARTS_MUL_FIRST   1u
#define GELU_PARTS_SCALE_FIRST 2u
ew_row calq__ew_mvec_gelu_parts_row(void);

#endif
