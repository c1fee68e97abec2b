/* The convolution family's shared geometry (computed from a node's attributes and input
 * shapes by conv.c) and the oneDNN fast paths of conv_dnnl.c. BatchNormalization has no fast
 * path: on NCHW data oneDNN's batch normalization is about 5x slower than the plain loop. */
#ifndef CALQ_EXEC_KERNELS_CONV_DNNL_H
#define CALQ_EXEC_KERNELS_CONV_DNNL_H

#include <stdbool.h>
#include <stdint.h>

#include "exec/kernels/int_accum.h"
#include "exec/op.h"

/* Spatial ranks handled: 1-D, 2-D and 3-D convolutions (ONNX inputs of rank 3..5). */
#define CALQ_CONV_MAX_SP 3
/* Post-ops one convolution applies at most (the planner offers chains up to this long). */
#define CALQ_CONV_MAX_POST 8

/* Everything a convolution kernel needs, already validated. For a transposed convolution
 * `in` is the input spatial size and `out` the output one, as for a plain convolution; pads
 * are the ONNX pads (may be negative only for ConvTranspose, when derived from output_shape
 * or auto_pad) and `out_pad` is ConvTranspose's output_padding (always 0 for Conv). */
typedef struct calq_conv_geom {
    bool transpose;
    int nsp;                       /* spatial rank */
    int64_t n, c_in, c_out, group; /* batch, input channels, output channels, groups */
    int64_t in[CALQ_CONV_MAX_SP];  /* input spatial dims */
    int64_t out[CALQ_CONV_MAX_SP]; /* output spatial dims */
    int64_t k[CALQ_CONV_MAX_SP];   /* kernel spatial dims */
    int64_t stride[CALQ_CONV_MAX_SP];
    int64_t dil[CALQ_CONV_MAX_SP];
    int64_t pad_b[CALQ_CONV_MAX_SP]; /* padding before (top/left) */
    int64_t pad_e[CALQ_CONV_MAX_SP]; /* padding after (bottom/right) */
    int64_t out_pad[CALQ_CONV_MAX_SP];
    bool has_bias;
} calq_conv_geom;

/* Validates the node's inputs and attributes and fills *g (Conv when transpose is false,
 * ConvTranspose otherwise). Fails with CALQ_ERR_SHAPE / CALQ_ERR_UNSUPPORTED on the node. */
calq_status calq__conv_geom(calq_op_ctx *c, bool transpose, calq_conv_geom *g);

/* Integer convolution (conv_int.c). calq__conv_geom_int validates 8-bit x / w and an optional
 * int32 b and computes their geometry. calq__conv_int_ref computes y = b + sum x * w with x and
 * w already centered (q - zero point, int_accum.h), exactly, into int32; an output whose sum
 * leaves int32 fails with CALQ_ERR_DATA naming the layer. */
calq_status calq__conv_geom_int(calq_op_ctx *c, const calq_tensor *x, const calq_tensor *w, const calq_tensor *b,
                                bool transpose, calq_conv_geom *g);
calq_status calq__conv_int_ref(calq_op_ctx *c, const calq_conv_geom *g, const int16_t *x, const int16_t *w,
                               const int32_t *b, int32_t *y);
/* The error of an output sum that leaves int32 (ov: its index in the NCHW output of M channels
 * and osz positions per channel), naming channel, batch and position. */
calq_status calq__conv_int_overflow(calq_op_ctx *c, const calq__i32_overflow *ov, int64_t M, int64_t osz);
/* calq.AscendConv / calq.AscendConvTranspose (ascend.h): the integer Conv / ConvTranspose of an
 * Ascend deploy model (amct-reference.md §9.1), int32 output. */
calq_status calq__ascend_conv_infer(calq_op_ctx *c);
calq_status calq__ascend_conv_run(calq_op_ctx *c);
calq_status calq__ascend_convtranspose_infer(calq_op_ctx *c);
calq_status calq__ascend_convtranspose_run(calq_op_ctx *c);
/* calq.AscendConv's oneDNN path (int_dnnl.h); calq__int_conv_release frees the state of any
 * integer convolution's fast path. */
calq_status calq__ascend_conv_prepare(calq_op_ctx *c);
calq_status calq__ascend_conv_run_fast(calq_op_ctx *c);
void calq__int_conv_release(void *state);

/* oneDNN paths. prepare leaves c->state NULL (declines) when oneDNN cannot run the node, so
 * the reference kernel runs instead. */
calq_status calq__conv_dnnl_prepare(calq_op_ctx *c);
calq_status calq__convtranspose_dnnl_prepare(calq_op_ctx *c);
calq_status calq__conv_dnnl_run(calq_op_ctx *c); /* Conv and ConvTranspose */
void calq__conv_dnnl_release(void *state);
/* Whether a state of calq__conv_dnnl_prepare runs the Winograd path (conv_wino.h); for tests. */
bool calq__conv_dnnl_is_wino(const void *state);
/* Whether it runs its chain's last post-op (SiLU, the logistic) as calq's own pass after the
 * kernel (logistic.h); for tests. */
bool calq__conv_dnnl_has_tail(const void *state);
/* Whether it runs a ConvTranspose as matrix products (deconv_gemm.h); for tests. */
bool calq__conv_dnnl_is_deconv_gemm(const void *state);

#endif
