/* Strided runs of any numeric tensor to and from double buffers: kernels that compute in double
 * (reductions, normalizations, recurrent layers, ...) convert once per run and keep tight loops
 * on doubles. */
#ifndef CALQ_EXEC_KERNELS_VALUES_H
#define CALQ_EXEC_KERNELS_VALUES_H

#include "base/tensor.h"

/* Float or integer (not bool). */
bool calq__k_numeric(calq_dtype t);
/* dst[i] = x[off + i*stride] for i < n. */
void calq__k_load(const calq_tensor *x, int64_t off, int64_t stride, int64_t n, double *dst);
/* y[off + i*stride] = src[i]; integers are truncated toward zero and saturated (a C cast from an
 * out-of-range double is undefined). */
void calq__k_store(calq_tensor *y, int64_t off, int64_t stride, int64_t n, const double *src);

#endif
