/* Shared oneDNN plumbing for the fast kernels: one CPU engine per process (created on first
 * use, thread-safe), status checking, and plain-layout memory descriptors. */
#ifndef CALQ_EXEC_DNNL_COMMON_H
#define CALQ_EXEC_DNNL_COMMON_H

#include <oneapi/dnnl/dnnl.h>

#include "exec/op.h"

/* The process-wide CPU engine, or NULL if oneDNN cannot create one (callers then decline the
 * fast path and the reference kernel runs). */
dnnl_engine_t calq__dnnl_engine(void);

/* Converts a failing dnnl_status_t into a calq error on the op's node. */
calq_status calq__dnnl_check(calq_op_ctx *c, dnnl_status_t s, const char *what);
#define CALQ_DNNL(c, call)                                                                                             \
    do {                                                                                                               \
        dnnl_status_t calq__ds = (call);                                                                               \
        if (calq__ds != dnnl_success) return calq__dnnl_check((c), calq__ds, #call);                                   \
    } while (0)

/* f32 memory descriptor with a plain layout (abcd...: C order) for dims[ndim]. */
dnnl_status_t calq__dnnl_plain_md(dnnl_memory_desc_t *md, const int64_t *dims, int ndim);

#endif
