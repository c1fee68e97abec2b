/* ConvTranspose as matrix products (deconv_gemm.c), for conv_dnnl.c's channels-last path.
 *
 * oneDNN 2.6 runs transposed convolutions with its older jit deconvolution kernel, at a fraction
 * of the machine's speed on channels-last data (6.5 ms for a 2x2 stride-2 layer of 24 channels
 * from 160x160, 1 ms for a 4x4 stride-2 layer of 64 -> 32 channels from 16x16; docs/performance.md
 * "Transposed convolutions"). As matrix products:
 *   - kernel == stride, no padding (the 2x2 stride-2 upsampling of U-Nets, FPN decoders, DBNet's
 *     head): input pixel (h, w) alone writes the s0 x s1 block (h*s0 + i, w*s1 + j), so one
 *     output row is C (W x s1*OC) = A (W x IC: input row h) . B_i (IC x s1*OC: the weights of
 *     kernel row i, packed once), plus the bias;
 *   - any other kernel, stride, padding or groups (the 4x4 stride-2 upsampling of CenterNet-style
 *     heads and GANs, FCN's depthwise bilinear upsampling): the columns T (W x kh*kw*OC) = A . B of every input row
 * first, then each output row sums its taps from T in a fixed order (kernel row, input column, kernel column), a
 * col2im. T is kept when it is small (CALQ_DECONV_MAX_COLS), else oneDNN runs the layer. An output row is finished in a
 * scratch row, where the planner's post-ops are applied (Relu, LeakyRelu, Clip, the residual sum, per-channel add /
 * multiply: all exact float operations) before it is stored, so a residual operand the output overwrites is read first.
 *
 * Determinism: each product is one single-threaded sgemm over fixed rows and each output row is
 * summed by one thread in a fixed order, so the bits do not depend on the thread count. */
#ifndef CALQ_EXEC_KERNELS_DECONV_GEMM_H
#define CALQ_EXEC_KERNELS_DECONV_GEMM_H

#include <stdbool.h>

#include "exec/kernels/conv_dnnl.h"
#include "exec/op.h"

/* The largest column buffer T of the general path, in bytes. */
#define CALQ_DECONV_MAX_COLS ((int64_t)32 << 20)

typedef struct calq_deconv_gemm calq_deconv_gemm;

/* Whether the geometry is one this path takes: a 2-D (or 1-D, promoted) ConvTranspose, dilation
 * 1, and either kernel == stride without padding and one group, or columns within
 * CALQ_DECONV_MAX_COLS (any groups: each group's columns from its own product, or an outer
 * product with one input channel per group, a depthwise upsampling). */
bool calq__deconv_gemm_fits(const calq_conv_geom *g);

/* Packs the weights (and bias) of c and takes the longest prefix of c->post[0..n_post) it
 * applies (*n_used). *out: owner the caller, free with calq__deconv_gemm_free. Leaves *out NULL
 * and returns CALQ_OK when the weights or the bias are not constants; fails only when out of
 * memory. Input and output are channels-last. */
calq_status calq__deconv_gemm_create(calq_op_ctx *c, const calq_conv_geom *g, int n_post, int *n_used,
                                     calq_deconv_gemm **out);

/* Runs it on c->in[0] -> c->out[0] with the post-ops' operands of c->post. */
calq_status calq__deconv_gemm_run(calq_op_ctx *c, const calq_deconv_gemm *d);

void calq__deconv_gemm_free(calq_deconv_gemm *d);

#endif
