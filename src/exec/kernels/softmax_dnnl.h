/* The oneDNN fast path of Softmax and LogSoftmax (softmax_dnnl.c); the reference kernels are in
 * reduce.c. */
#ifndef CALQ_EXEC_SOFTMAX_DNNL_H
#define CALQ_EXEC_SOFTMAX_DNNL_H

#include <stdbool.h>
#include <stdint.h>

#include "exec/op.h"

/* Builds the primitive for a float32 input seen as [outer, len, inner], normalized along len
 * (log: LogSoftmax), into c->state; leaves c->state NULL when oneDNN has no JIT kernel for it
 * (the reference kernel then runs). Fails only when out of memory. */
calq_status calq__softmax_dnnl_prepare(calq_op_ctx *c, int64_t outer, int64_t len, int64_t inner, bool log);
/* run_fast / release: calq__dnnl_unary_run / calq__dnnl_unary_release (dnnl_common.h). */

#endif
