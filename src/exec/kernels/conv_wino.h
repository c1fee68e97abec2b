/* Winograd 3x3 convolutions on oneDNN (conv_wino.c), for conv_dnnl.c's blocked-layout path.
 *
 * oneDNN's Winograd kernels (F(2x2,3x3) / F(4x4,3x3), AVX-512 only in oneDNN 2.6) take
 * 0.46-0.62 of its direct kernel's time on the 3x3 layers of ResNet-style nets (docs/performance.md,
 * "Winograd"), but their threaded split is not the same arithmetic for every thread count. So each
 * image's output channels are split into a fixed number of groups, each group is one primitive
 * planned for one thread, and the (image, group) tasks are shared among the run's threads: every
 * output element is computed by the same single-threaded code whatever the thread count. */
#ifndef CALQ_EXEC_KERNELS_CONV_WINO_H
#define CALQ_EXEC_KERNELS_CONV_WINO_H

#include <oneapi/dnnl/dnnl.h>
#include <stdbool.h>

#include "exec/kernels/conv_dnnl.h"
#include "exec/op.h"

typedef struct calq_conv_wino calq_conv_wino;

/* The oneDNN post-ops of the planner's chain c->post[0..n) for an output of nd dims and c_out
 * channels (conv_dnnl.c). */
dnnl_status_t calq__conv_post_ops(const calq_op_ctx *c, int n, int nd, int64_t c_out, dnnl_primitive_attr_t attr);

/* Whether the node's geometry is one the Winograd path takes (2-D, ungrouped, 3x3, stride and
 * dilation 1, channel counts that split into whole 16-channel blocks, maps large enough to gain),
 * on this machine, in the executor's layout `native`. Depends on the shape and the machine only,
 * never on the thread count. */
bool calq__conv_wino_fits(const calq_conv_geom *g, calq_layout native);

/* Builds the Winograd path with the first n_post of c->post fused (*out: owner the caller, free
 * with calq__conv_wino_free). Its input is in c->in_layout[0] when that is nChw16c, else in
 * c->native; its output in nChw16c when out_blocked or c->native is nChw16c, else in c->native
 * (the caller sets c->in_layout / c->out_layout to match). Leaves *out NULL and returns CALQ_OK when oneDNN has no
 * Winograd kernel for it, the weights (and bias) are not constants, or the post-ops are ones it cannot apply per group;
 * fails only when out of memory or when oneDNN fails on a primitive it built. */
calq_status calq__conv_wino_create(calq_op_ctx *c, const calq_conv_geom *g, int n_post, bool out_blocked,
                                   calq_conv_wino **out);

/* Runs it on c->in[0] -> c->out[0] (both in the native blocked layout). */
calq_status calq__conv_wino_run(calq_op_ctx *c, calq_conv_wino *w);

void calq__conv_wino_free(calq_conv_wino *w);

#endif
