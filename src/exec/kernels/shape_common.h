/* Internals shared by the shape / data-movement kernels (shape.c, shape_copy.c, shape_index.c).
 * These ops move bytes and never look at values, so every helper works on element sizes
 * (calq_dtype_size) and serves any dtype. */
#ifndef CALQ_EXEC_KERNELS_SHAPE_COMMON_H
#define CALQ_EXEC_KERNELS_SHAPE_COMMON_H

#include <limits.h>

#include "exec/op.h"

/* Copies below this many bytes stay on one thread: starting a parallel region costs more (60-70
 * us on this 2-core VM with passive waiting, exec/kernels/elementwise.c, EW_PAR_WORK; a
 * Transpose of 450 KB took 27 us on one thread and 67 us on two). */
#define CALQ_SHP_PAR_BYTES ((int64_t)1 << 20)

/* Fails unless input i is present and carries data (for infer of data-dependent shapes). */
calq_status calq__shp_need_data(calq_op_ctx *c, int i, const char *what);

/* Reads input i, an integer scalar or 1-D tensor with data, into vals[0..*n). Fails naming
 * `what` when it is missing, not integer, not 1-D or holds more than `max` values. */
calq_status calq__shp_read_ints(calq_op_ctx *c, int i, const char *what, int64_t *vals, int max, int *n);

/* "5x-1x0": raw requested dims, unlike calq__shape_str which hides negative ones. */
char *calq__shp_ints_str(const int64_t *v, int n, char *buf, size_t len);

/* Element strides of a dense C-ordered tensor. */
void calq__shp_strides(const int64_t *dims, int ndim, int64_t *strides);

/* dst (dense, C order, shape dims[ndim]) [i...] = src[sum i_k * strides[k]] with element size
 * es. Strides are in elements and may be zero (broadcast) or negative (reversed slices).
 * Adjacent dims that are contiguous in src are merged so the innermost run is copied with
 * memcpy whenever it is contiguous. */
void calq__shp_strided_copy(void *dst, const void *src, int ndim, const int64_t *dims, const int64_t *strides,
                            size_t es);

/* Writes n copies of the es-byte element `elem` to dst. */
void calq__shp_fill(void *dst, int64_t n, const void *elem, size_t es);

/* Op entry points defined in the shape_*.c files and listed in calq__ops_shape (shape.c). */
calq_status calq__shp_pad_prepare(calq_op_ctx *c); /* the executor's layouts */
calq_status calq__shp_pad_run_fast(calq_op_ctx *c);
void calq__shp_pad_release(void *state);
calq_status calq__shp_concat_infer(calq_op_ctx *c);
calq_status calq__shp_concat_run(calq_op_ctx *c);
calq_status calq__shp_concat_prepare(calq_op_ctx *c); /* the executor's layouts */
calq_status calq__shp_concat_run_fast(calq_op_ctx *c);
void calq__shp_concat_release(void *state);
calq_status calq__shp_split_infer(calq_op_ctx *c);
calq_status calq__shp_split_run(calq_op_ctx *c);
calq_status calq__shp_slice_infer(calq_op_ctx *c);
calq_status calq__shp_slice_run(calq_op_ctx *c);
calq_status calq__shp_transpose_infer(calq_op_ctx *c);
calq_status calq__shp_transpose_run(calq_op_ctx *c);
calq_status calq__shp_expand_infer(calq_op_ctx *c);
calq_status calq__shp_expand_run(calq_op_ctx *c);
calq_status calq__shp_tile_infer(calq_op_ctx *c);
calq_status calq__shp_tile_run(calq_op_ctx *c);
calq_status calq__shp_gather_infer(calq_op_ctx *c);
calq_status calq__shp_gather_run(calq_op_ctx *c);
calq_status calq__shp_gather_elements_infer(calq_op_ctx *c);
calq_status calq__shp_gather_elements_run(calq_op_ctx *c);
calq_status calq__shp_pad_infer(calq_op_ctx *c);
calq_status calq__shp_pad_run(calq_op_ctx *c);

#endif
