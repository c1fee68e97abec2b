/* Activation layouts (calq_layout, exec/op.h): sizes, physical views, padding, and the
 * conversion operator the executor inserts where a producer's layout is not what a consumer
 * reads. Implemented in kernels/layout.c. */
#ifndef CALQ_EXEC_LAYOUT_H
#define CALQ_EXEC_LAYOUT_H

#include "exec/op.h"

/* True when t (float32, rank 3..5, known dims) can be stored in a non-plain layout. */
bool calq__layout_blockable(const calq_tensor *t);

/* Bytes of t's data in layout l (the padded size when channel-blocked). */
size_t calq__layout_nbytes(const calq_tensor *t, calq_layout l);

/* The physical view of a tensor stored in layout l: a plain tensor over the same data, of shape
 * [N, spatial..., C] (channels last) or [N, ceil(C/b), spatial..., b] (blocked); t itself for
 * plain. */
void calq__layout_phys(const calq_tensor *t, calq_layout l, calq_tensor *view);

/* The same for a plain tensor that does not vary along the channel axis (t's dims right-aligned
 * to rank `rank`, the channel dim 1 or absent): the view that broadcasts it against physical
 * views of layout l of rank `rank` tensors. */
void calq__layout_phys_bcast(const calq_tensor *t, int rank, calq_layout l, calq_tensor *view);

/* True when layout l has padding channels for t (blocked, C not a multiple of the block). */
bool calq__layout_has_pads(const calq_tensor *t, calq_layout l);

/* Sets the padding channels (C to the next multiple of the block) of t's blocked data to zero:
 * after an element-wise layer ran on the physical view, f(0) may not be 0 there. */
void calq__layout_zero_pads(const calq_tensor *t, calq_layout l);

/* The activation layout oneDNN chooses for a convolution on this CPU (its `any` format: channels
 * last with AVX-512's brgemm kernels in oneDNN 2.6, nChw8c / nChw16c elsewhere), or 0 when it
 * picks plain (other layouts are then not used). Computed once per process. */
calq_layout calq__layout_native(void);

/* The conversion step: out[0] = in[0] converted from c->in_layout[0] to c->out_layout[0] (same
 * logical shape). `run` is a plain loop; prepare builds a oneDNN reorder for run_fast. Not in
 * the registry: the executor creates these steps itself. */
extern const calq_op_def calq__op_layout_convert;

#endif
