/* Tensor helpers shared by every layer (the struct itself is public: calq_tensor). */
#ifndef CALQ_BASE_TENSOR_H
#define CALQ_BASE_TENSOR_H

#include <stdbool.h>

#include "calq.h"

/* Product of dims[0..ndim); 1 for a scalar. Returns -1 on overflow or a negative dim. */
int64_t calq__shape_numel(const int64_t *dims, int ndim);
bool calq__shape_equal(const int64_t *a, int na, const int64_t *b, int nb);
/* "1x3x240x320" (or "scalar") into buf; returns buf. */
char *calq__shape_str(const int64_t *dims, int ndim, char *buf, size_t n);

size_t calq__tensor_nbytes(const calq_tensor *t);
/* The most bytes one tensor may take at run time: half of this machine's physical memory (2^40 if
 * unknown). Shapes computed while running (Loop scan outputs, data-dependent sizes) are bounded by
 * it so that a hostile model fails at once with a clear message instead of driving the machine into
 * swap or the OOM killer (issue 14); no real model needs one tensor that large. */
size_t calq__tensor_max_bytes(void);
/* Allocates zeroed data for t (dtype and dims already set); fails with CALQ_ERR_OUT_OF_MEMORY above
 * calq__tensor_max_bytes(). Owner: the caller, released with calq_tensor_free_data(). */
calq_status calq__tensor_alloc(calq_tensor *t, calq_error *err);
/* Deep copy into dst (dst's old data is not freed). */
calq_status calq__tensor_clone(calq_tensor *dst, const calq_tensor *src, calq_error *err);

/* Reads element i of any numeric tensor as double / int64 (for shape-like inputs). */
double calq__tensor_get_f64(const calq_tensor *t, int64_t i);
int64_t calq__tensor_get_i64(const calq_tensor *t, int64_t i);
/* Writes element i of any numeric tensor, converting (saturating for integers: C casts
 * from out-of-range floats are undefined). */
void calq__tensor_set_f64(calq_tensor *t, int64_t i, double v);
void calq__tensor_set_i64(calq_tensor *t, int64_t i, int64_t v);
bool calq__dtype_is_float(calq_dtype t);
bool calq__dtype_is_int(calq_dtype t);
/* int8 or uint8: the data types of quantized tensors (QuantizeLinear outputs, QLinear* operands). */
bool calq__dtype_is_q8(calq_dtype t);

/* IEEE half <-> float. */
float calq__f16_to_f32(uint16_t h);
uint16_t calq__f32_to_f16(float f);

#endif
