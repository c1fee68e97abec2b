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

void calq__reduce_dnnl_release(void *state)
{
    if (!state) return;
    calq__dnnl_unary_fini(state);
    free(state);
}

static dnnl_status_t build(calq_dnnl_unary *u, const int64_t *dims, int ndim, const bool *red, bool mean,
                           dnnl_engine_t eng)
{
    int64_t out[CALQ_MAX_DIMS];
    for (int i = 0; i < ndim; i++) out[i] = red[i] ? 1 : dims[i];
    dnnl_memory_desc_t smd, dmd;
    dnnl_status_t s = calq__dnnl_plain_md(&smd, dims, ndim);
    if (s == dnnl_success) s = calq__dnnl_plain_md(&dmd, out, ndim);
    if (s != dnnl_success) return s;
    dnnl_reduction_desc_t desc;
    s = dnnl_reduction_desc_init(&desc, mean ? dnnl_reduction_mean : dnnl_reduction_sum, &smd, &dmd, 0.0f, 0.0f);
    if (s != dnnl_success) return s;
    dnnl_primitive_desc_t pd;
    if ((s = dnnl_primitive_desc_create(&pd, &desc, NULL, eng, NULL)) != dnnl_success) return s;
    s = calq__dnnl_unary_init(u, pd, true);
    dnnl_primitive_desc_destroy(pd);
    return s;
}

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
    dnnl_engine_t eng = calq__dnnl_engine();
    if (!eng) return CALQ_OK;
    calq_dnnl_unary *u = calloc(1, sizeof *u);
    if (!u) return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory for the oneDNN reduction state");
    u->serial = n < REDUCE_SERIAL_ELEMS;
    int prev = calq__dnnl_serial_begin(u->serial);
    dnnl_status_t s = build(u, dims, ndim, red, mean, eng);
    calq__dnnl_serial_end(u->serial, prev);
    if (s != dnnl_success) {
        calq__reduce_dnnl_release(u);
        return CALQ_OK;
    }
    c->state = u;
    return CALQ_OK;
}

calq_status calq__reduce_dnnl_run(calq_op_ctx *c)
{
    return calq__dnnl_unary_run(c, c->state, c->in[0]->data, c->out[0]->data);
}
