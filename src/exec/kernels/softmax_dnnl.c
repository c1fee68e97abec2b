/* oneDNN softmax for Softmax / LogSoftmax on float32 (softmax_dnnl.h).
 *
 * The tensor is seen as [outer, len, inner] with the normalized axis in the middle (the
 * reference kernel's geometry, reduce.c, so opset < 13's flattening comes along). Only oneDNN's
 * JIT implementations are kept: its reference one is slower than calq's. oneDNN computes each
 * row on one thread from a fixed sequence of vector operations, so the result does not depend on
 * the thread count; it differs from the reference kernel (which sums in double and calls expf)
 * by up to about 2.5e-6 relative (3.6e-6 of max(1, |y|) for LogSoftmax), measured by
 * tests/unit/test_kernels_reduce.c: oneDNN's exp is an approximation of its own. Small tensors run on the calling
 * thread alone (waking the other costs more, dnnl_common.h). */
#include <stdlib.h>

#include "exec/kernels/dnnl_common.h"
#include "exec/kernels/softmax_dnnl.h"

/* Below this many elements the primitive runs on the calling thread: about 0.3 ns an element
 * with AVX-512, so the work stays under a wake-up of the other thread (60-70 us here). */
#define SOFTMAX_SERIAL_ELEMS ((int64_t)1 << 18)

calq_status calq__softmax_dnnl_prepare(calq_op_ctx *c, int64_t outer, int64_t len, int64_t inner, bool log)
{
    c->state = NULL;
    if (c->in[0]->dtype != CALQ_DTYPE_FLOAT32 || outer <= 0 || len <= 0 || inner <= 0) return CALQ_OK;
    dnnl_dims_t dims = {outer, len, inner};
    dnnl_memory_desc_t md;
    dnnl_softmax_v2_desc_t desc;
    if (dnnl_memory_desc_init_by_tag(&md, 3, dims, dnnl_f32, dnnl_abc) != dnnl_success ||
        dnnl_softmax_v2_forward_desc_init(&desc, dnnl_forward_inference, log ? dnnl_softmax_log : dnnl_softmax_accurate,
                                          &md, &md, 1) != dnnl_success)
        return CALQ_OK;
    return calq__dnnl_unary_prepare(c, &desc, outer * len * inner < SOFTMAX_SERIAL_ELEMS, true);
}
