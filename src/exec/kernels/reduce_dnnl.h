/* The oneDNN fast path of ReduceSum and ReduceMean (reduce_dnnl.c); the reference kernels are in
 * reduce.c. */
#ifndef CALQ_EXEC_REDUCE_DNNL_H
#define CALQ_EXEC_REDUCE_DNNL_H

#include <stdbool.h>
#include <stdint.h>

#include "exec/op.h"

/* Builds the primitive reducing a float32 input of dims[ndim] over the axes with red[i] (mean:
 * ReduceMean) into c->state; leaves c->state NULL when oneDNN has no JIT kernel for it (the
 * reference kernel then runs). The output holds the kept dims in the input's order, which is
 * the same buffer with or without keepdims. Fails only when out of memory. */
calq_status calq__reduce_dnnl_prepare(calq_op_ctx *c, const int64_t *dims, int ndim, const bool *red, bool mean);
/* run_fast / release: calq__dnnl_unary_run / calq__dnnl_unary_release (dnnl_common.h). */

#endif
