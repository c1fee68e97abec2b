/* Shared oneDNN plumbing for the fast kernels: one CPU engine per process (created on first
 * use, thread-safe), status checking, and plain-layout memory descriptors. */
#ifndef CALQ_EXEC_DNNL_COMMON_H
#define CALQ_EXEC_DNNL_COMMON_H

#include <oneapi/dnnl/dnnl.h>
#include <omp.h>

#include "base/bulk_mem.h"
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

/* The same for a function that cleans up: a failing call sets the calq_status `st` (in scope)
 * from it and jumps to the label `out`. For calls that should not fail once a primitive
 * descriptor exists (allocations, reorders). */
#define CALQ_DNNL_OR_OUT(c, call)                                                                                      \
    do {                                                                                                               \
        dnnl_status_t calq__ds = (call);                                                                               \
        if (calq__ds != dnnl_success) {                                                                                \
            st = calq__dnnl_check((c), calq__ds, #call);                                                               \
            goto out;                                                                                                  \
        }                                                                                                              \
    } while (0)

/* Per-thread scratch for activations a fast kernel converts on the way in and out (blocked or
 * channels-last copies, int32 sums): a grow-only, 64-byte aligned buffer of at least n bytes per
 * calling thread and slot, valid until the next call with the same slot on the same thread (a
 * session runs one node at a time on its thread, and these copies are dead once run_fast
 * returns). NULL when out of memory. Each kernel family has its own slot, so one family's
 * buffer is never another's. */
typedef enum calq_dnnl_scratch_slot {
    CALQ_SCRATCH_CONV, /* conv_dnnl.c */
    CALQ_SCRATCH_INT,
    /* int_dnnl.c */ CALQ_SCRATCH_WINO, /* conv_wino.c: the Winograd kernel's scratchpad */
    CALQ_SCRATCH_ATTENTION,             /* fused_attention.c: a tile of scores */
    CALQ_SCRATCH_DECONV,                /* deconv_gemm.c: an output row's sums */
    CALQ_SCRATCH_SLOTS
} calq_dnnl_scratch_slot;
void *calq__dnnl_scratch(calq_dnnl_scratch_slot slot, size_t n);

/* A oneDNN memory of layout md on *buf, memory sized for md (base/bulk_mem.h: on huge pages when
 * large). For what prepare converts once and runs keep reading (reordered weights): written on
 * fresh 4 KB pages, ResNet-18's cost a session's first run some 70 ms in page faults on this
 * project's VMs. Owner: the caller (dnnl_memory_destroy, then calq__bulk_free(buf)). */
dnnl_status_t calq__dnnl_memory_bulk(dnnl_memory_t *m, const dnnl_memory_desc_t *md, calq__bulk *buf);

/* A reorder primitive from one memory layout to another (owner: the caller). */
dnnl_status_t calq__dnnl_reorder(dnnl_primitive_t *r, const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to);

/* Primitives with less work than this (multiply-adds, or elements moved) are created and run on
 * the calling thread alone: waking the other threads for a few microseconds of work costs more
 * than it saves, and models with many small layers (attention blocks, squeeze-excite, 7x7 maps)
 * would pay it on every layer (with passive OpenMP waiting, a futex wake-up each; docs/cli.md,
 * "Threads"). Whether a primitive runs serially depends on its shape only, so results stay
 * identical for any thread count. */
#define CALQ_DNNL_SERIAL_WORK ((int64_t)1 << 20)

/* Runs what follows on one thread when `serial` (oneDNN sizes its thread team from OpenMP's
 * setting, at creation and at execution); returns the setting to restore with
 * calq__dnnl_serial_end. */
static inline int calq__dnnl_serial_begin(bool serial)
{
    int prev = omp_get_max_threads();
    if (serial && prev != 1) omp_set_num_threads(1);
    return prev;
}
static inline void calq__dnnl_serial_end(bool serial, int prev)
{
    if (serial && prev != 1) omp_set_num_threads(prev);
}

/* The fast-path state of an operation with one source and one destination (softmax, pooling,
 * reduction) described by desc (a dnnl_*_desc_t): allocates it (owner: c->state), creates its primitive (on the calling
 * thread alone when `serial`), stream and memories, and stores it in c->state. With jit_only, an implementation other
 * than oneDNN's JIT ones is refused (its reference ones are slower than calq's). Any refusal leaves c->state NULL and
 * returns CALQ_OK (the reference kernel runs); fails only when out of memory. */
calq_status calq__dnnl_unary_prepare(calq_op_ctx *c, const_dnnl_op_desc_t desc, bool serial, bool jit_only);
/* Runs the state on in[0] -> out[0]. */
calq_status calq__dnnl_unary_run(calq_op_ctx *c);
/* Frees a state of calq__dnnl_unary_prepare (NULL: nothing). */
void calq__dnnl_unary_release(void *state);

/* f32 memory descriptor with a plain layout (abcd...: C order) for dims[ndim]. */
dnnl_status_t calq__dnnl_plain_md(dnnl_memory_desc_t *md, const int64_t *dims, int ndim);

/* The f32 memory descriptor of a [N, C, spatial...] tensor of dims[ndim] in layout l
 * (exec/layout.h; kernels/layout.c): CALQ_ERR_UNSUPPORTED when oneDNN has no tag for it. */
calq_status calq__layout_md(const int64_t *dims, int ndim, calq_layout l, dnnl_memory_desc_t *md);
/* oneDNN's format tag for layout l at rank ndim (3..5), dnnl_format_tag_undef when none. */
dnnl_format_tag_t calq__layout_tag(calq_layout l, int ndim);

#endif
