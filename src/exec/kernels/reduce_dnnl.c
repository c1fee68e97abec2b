/* oneDNN reduction for ReduceSum / ReduceMean on float32 (reduce_dnnl.h).
 *
 * Transformers exported before opset 17 spell LayerNormalization as ReduceMean, Sub, Pow,
 * ReduceMean, Add, Sqrt, Div; squeeze-excite blocks and pooling heads use ReduceMean too. The
 * reference kernel widens every element to double through a conversion buffer: 26 us for a
 * 197x192 row mean, against 4 us for oneDNN's JIT reduction (AVX-512, one thread). oneDNN has
 * JIT kernels only for reducing the innermost dims (its reference one, for the others, is
 * 100x slower than calq's), so only JIT implementations are kept.
 *
 * Numerics: oneDNN sums in float32 vector lanes, the reference in double, so results differ by
 * float rounding of the partial sums (tests/unit/test_kernels_reduce.c bounds it relative to
 * the sum of |x|). Each output is computed by one thread from a fixed sequence of vector
 * operations, so results do not depend on the thread count (the test checks 1 against 2).
 * NaN and infinities propagate as in any float sum. */
#include <stdlib.h>

#include "exec/kernels/dnnl_common.h"
#include "exec/kernels/reduce_dnnl.h"

/* Below this many input elements the primitive runs on the calling thread: a reduction reads
 * an element in a fraction of a nanosecond, less than a wake-up of the other thread. */
#define REDUCE_SERIAL_ELEMS ((int64_t)1 << 17)
/* The least number of contiguous reduced elements per output worth oneDNN's kernel. */
#define REDUCE_MIN_RUN 64

calq_status calq__reduce_dnnl_prepare(calq_op_ctx *c, const int64_t *dims, int ndim, const bool *red, bool mean)
{
    c->state = NULL;
    if (c->in[0]->dtype != CALQ_DTYPE_FLOAT32 || ndim < 1 || ndim > DNNL_MAX_NDIMS) return CALQ_OK;
    int64_t n = 1;
    bool any = false;
    for (int i = 0; i < ndim; i++) {
        n *= dims[i];
        any = any || (red[i] && dims[i] > 1);
    }
    if (n <= 0 || !any) return CALQ_OK; /* empty, or nothing summed: the reference's copy */
    /* oneDNN's vector loop runs along the reduced elements of each output: short runs leave it
     * slower than the reference (7x333 sums of 12: 27 us against about 20 us, AVX2) */
    int64_t run = 1;
    for (int i = ndim - 1; i >= 0 && red[i]; i--) run *= dims[i];
    if (run < REDUCE_MIN_RUN) return CALQ_OK;
    int64_t out[CALQ_MAX_DIMS];
    for (int i = 0; i < ndim; i++) out[i] = red[i] ? 1 : dims[i];
    dnnl_memory_desc_t smd, dmd;
    dnnl_reduction_desc_t desc;
    if (calq__dnnl_plain_md(&smd, dims, ndim) != dnnl_success || calq__dnnl_plain_md(&dmd, out, ndim) != dnnl_success ||
        dnnl_reduction_desc_init(&desc, mean ? dnnl_reduction_mean : dnnl_reduction_sum, &smd, &dmd, 0.0f, 0.0f) !=
            dnnl_success)
        return CALQ_OK;
    return calq__dnnl_unary_prepare(c, &desc, n < REDUCE_SERIAL_ELEMS, true);
}
