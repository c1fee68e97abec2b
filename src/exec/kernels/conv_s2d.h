/* ConvTranspose whose kernel equals its stride, as matrix products (conv_s2d.c), for
 * conv_dnnl.c's channels-last path.
 *
 * Such a layer (the 2x2 stride-2 upsampling of U-Nets, DBNet's head, FPN decoders) has no
 * overlap between the input pixels' contributions: input pixel (h, w) alone writes the
 * s0 x s1 block of output pixels (h*s0 + i, w*s1 + j). In channels-last layout, for one input
 * row h and one kernel row i, the outputs form one matrix product written in place:
 *     Y[n, h*s0 + i, w*s1 + j, oc] = b[oc] + sum_ic X[n, h, w, ic] * W[ic, oc, i, j]
 * is C (W x s1*OC, rows contiguous) = A (W x IC: the input row) . B_i (IC x s1*OC: the
 * weights of kernel row i, packed once). oneDNN 2.6's deconvolution runs these layers with its
 * older jit kernel at a fraction of the machine's speed (6.5 ms for 24 -> 24 channels from
 * 160x160, docs/performance.md "Transposed convolutions"); the products take a tenth of that.
 *
 * Determinism: each (image, input row, kernel row) product is one single-threaded sgemm, and the
 * tasks are shared among the threads, so every output is computed by the same code whatever the
 * thread count. */
#ifndef CALQ_EXEC_KERNELS_CONV_S2D_H
#define CALQ_EXEC_KERNELS_CONV_S2D_H

#include <stdbool.h>

#include "exec/kernels/conv_dnnl.h"
#include "exec/op.h"

typedef struct calq_deconv_s2d calq_deconv_s2d;

/* Whether the geometry is one this path takes: a 2-D ConvTranspose, ungrouped, kernel equal to
 * the stride, dilation 1, no padding and no output_padding. */
bool calq__deconv_s2d_fits(const calq_conv_geom *g);

/* Packs the weights (and bias) of c (*out: owner the caller, free with calq__deconv_s2d_free).
 * Leaves *out NULL and returns CALQ_OK when the weights or the bias are not constants; fails
 * only when out of memory. Input and output are channels-last. */
calq_status calq__deconv_s2d_create(calq_op_ctx *c, const calq_conv_geom *g, calq_deconv_s2d **out);

/* Runs it on c->in[0] -> c->out[0]. */
calq_status calq__deconv_s2d_run(calq_op_ctx *c, const calq_deconv_s2d *d);

void calq__deconv_s2d_free(calq_deconv_s2d *d);

#endif
