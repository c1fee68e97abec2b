/* Pooling geometry shared by the reference kernels (pool.c) and the oneDNN fast path
 * (pool_dnnl.c), so both read exactly the same resolved window arithmetic. */
#ifndef CALQ_EXEC_POOL_DNNL_H
#define CALQ_EXEC_POOL_DNNL_H

#include <stdbool.h>
#include <stdint.h>

#include "exec/op.h"

/* MaxPool/AveragePool support 1-D, 2-D and 3-D windows (the spatial ranks models use). */
#define CALQ_POOL_MAX_SPATIAL 3

typedef enum calq_pool_kind { CALQ_POOL_MAX, CALQ_POOL_AVG } calq_pool_kind;

/* A node's pooling window resolved against its input shape: auto_pad is turned into explicit
 * pads and ceil_mode is folded into out[], so consumers need no ONNX rules of their own. */
typedef struct calq_pool_geom {
    calq_pool_kind kind;
    int nsp;      /* spatial rank, 1..CALQ_POOL_MAX_SPATIAL */
    int64_t n, c; /* batch and channels */
    int64_t in[CALQ_POOL_MAX_SPATIAL], out[CALQ_POOL_MAX_SPATIAL];
    int64_t kernel[CALQ_POOL_MAX_SPATIAL], stride[CALQ_POOL_MAX_SPATIAL], dilation[CALQ_POOL_MAX_SPATIAL];
    int64_t pad_begin[CALQ_POOL_MAX_SPATIAL], pad_end[CALQ_POOL_MAX_SPATIAL];
    bool count_include_pad; /* AveragePool: padded positions count in the divisor */
    bool col_major_indices; /* MaxPool storage_order = 1 */
} calq_pool_geom;

/* Resolves a MaxPool/AveragePool node against c->in[0]'s shape (pool.c); fails with
 * CALQ_ERR_SHAPE / CALQ_ERR_UNSUPPORTED on invalid attributes. */
calq_status calq__pool_geom(calq_op_ctx *c, calq_pool_kind kind, calq_pool_geom *g);

/* calq.AscendAveragePool (ascend.h): the integer AveragePool of an Ascend deploy model
 * (amct-reference.md §9.1), int8 in, int32 out (pool.c; reference kernel only). */
calq_status calq__ascend_avgpool_infer(calq_op_ctx *c);
calq_status calq__ascend_avgpool_run(calq_op_ctx *c);

/* Builds the oneDNN pooling primitive for `g` into c->state, or leaves c->state NULL when
 * oneDNN cannot reproduce the reference result exactly (the reference kernel then runs).
 * With jit_only, oneDNN's non-JIT implementations are declined as well (they are slower
 * than the reference kernel); tests pass false to check every implementation's results. */
calq_status calq__pool_dnnl_prepare(calq_op_ctx *c, const calq_pool_geom *g, bool jit_only);
/* run_fast / release: calq__dnnl_unary_run / calq__dnnl_unary_release (dnnl_common.h). */

#endif
