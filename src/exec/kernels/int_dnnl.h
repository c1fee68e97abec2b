/* oneDNN fast paths of calq's integer layers (QLinearConv, QGemm, QLinearMatMul,
 * MatMulIntegerToFloat, calq.AscendConv / AscendGemm / AscendMatMul): oneDNN computes the exact
 * int32 sums sum (x - x_zp)(w - w_zp) of 8-bit operands (int8 / uint8 activations with a zero
 * point, int8 weights), and each layer turns them into its output with the same arithmetic as its
 * reference kernel (bias added in int64 and checked against int32, then the layer's own
 * requantization or dequantization: int_accum.h's calq__int_requant_*).
 *
 * Exactness: integer sums are exact in any order, so the result is the reference's bit for bit
 * and independent of the thread count, provided no intermediate saturates or wraps. oneDNN's int8
 * kernels multiply u8 x s8 pairs; without the VNNI instructions (vpdpbusd) they add pairs into
 * saturating int16 (vpmaddubsw), which is not exact, so these paths are used only where oneDNN
 * reports an ISA with VNNI. Every |x - x_zp| and |w - w_zp| is at most 255, so a sum of at most
 * CALQ_INT_DNNL_MAX_K products stays inside int32 whatever oneDNN's internal offsets (s8 inputs
 * are shifted to u8 and compensated); longer reductions decline to the reference kernel, which
 * also reports the sums that leave int32.
 *
 * Why oneDNN does not requantize itself (libdnnl 2.6 has output scales and destination zero points):
 * it would add an int32 bias to the converted sum in float ((float)acc + (float)bias rounds twice
 * once the sum passes 2^24, where the reference converts the exact acc + bias once) and fold the
 * layer's scales in its own order; the reference's float operations in calq's own loop are exact
 * by construction, and the loop is cheap next to the sums.
 *
 * Activations are reordered into channels-last (NHWC), the layout of oneDNN's integer kernels;
 * the sums come back channels-last and the epilogue writes calq's NCHW output. Weights must be
 * constant (reordered once in prepare); anything else declines (state NULL: the reference runs). */
#ifndef CALQ_EXEC_KERNELS_INT_DNNL_H
#define CALQ_EXEC_KERNELS_INT_DNNL_H

#include <stdbool.h>
#include <stdint.h>

#include "exec/kernels/conv_dnnl.h"
#include "exec/kernels/int_accum.h"
#include "exec/op.h"

/* 32768 * 255 * 255 = 2130739200 < 2^31 - 1. */
#define CALQ_INT_DNNL_MAX_K 32768

/* True when oneDNN's integer kernels here sum exactly (an ISA with VNNI). */
bool calq__int_dnnl_exact(void);

/* ---- convolution ------------------------------------------------------------------------- */

typedef struct calq_int_conv_desc {
    calq_conv_geom g;        /* Conv geometry (1-D or 2-D; not transposed) */
    calq_dtype x_type;       /* CALQ_DTYPE_INT8 / UINT8 */
    int32_t x_zp;            /* per tensor */
    const calq_tensor *w;    /* constant int8 / uint8 [M, C/group, k...] */
    const calq_tensor *w_zp; /* per tensor or per output channel (int8 / uint8), or NULL; w - w_zp must fit int8 */
} calq_int_conv_desc;

typedef struct calq_int_conv_dnnl calq_int_conv_dnnl;

/* *out NULL (CALQ_OK) when the fast path declines. Owner of *out: the caller (..._free). */
calq_status calq__int_conv_dnnl_create(calq_op_ctx *c, const calq_int_conv_desc *d, calq_int_conv_dnnl **out);
/* The sums of input x (NCHW) without bias, channels-last: acc[(n * P + p) * M + m], P the output
 * positions. *acc is a per-thread buffer, valid until the next integer layer runs on this thread. */
calq_status calq__int_conv_dnnl_run(calq_op_ctx *c, const calq_int_conv_dnnl *s, const void *x, const int32_t **acc);
void calq__int_conv_dnnl_free(calq_int_conv_dnnl *s);

/* ---- matrix product ---------------------------------------------------------------------- */

typedef struct calq_int_mm_desc {
    int64_t M, K, N;         /* a is M x K (K x M when trans_a), b is K x N (N x K when trans_b) */
    bool trans_a, trans_b;   /* element strides as in Gemm's transA / transB */
    calq_dtype a_type;       /* CALQ_DTYPE_INT8 / UINT8 */
    int32_t a_zp;            /* per tensor */
    const calq_tensor *b;    /* constant int8 / uint8 */
    const calq_tensor *b_zp; /* per tensor or per column n (int8 / uint8), or NULL; b - b_zp must fit int8 */
} calq_int_mm_desc;

typedef struct calq_int_mm_dnnl calq_int_mm_dnnl;

calq_status calq__int_mm_dnnl_create(calq_op_ctx *c, const calq_int_mm_desc *d, calq_int_mm_dnnl **out);
/* The sums of a, row-major: acc[m * N + n]; *acc as for the convolution. */
calq_status calq__int_mm_dnnl_run(calq_op_ctx *c, const calq_int_mm_dnnl *s, const void *a, const int32_t **acc);
void calq__int_mm_dnnl_free(calq_int_mm_dnnl *s);

/* ---- the layers' epilogue ------------------------------------------------------------------ */

/* What a layer makes of its exact sums v = acc + bias (bias int32, indexed by row and channel),
 * per channel ch (Conv: output channel; matrix products: column):
 *   INT32    v (the Ascend layers);
 *   FLOAT32  (float)v * mult[ch] (+ fbias[ch]): QGemm without y_scale, MatMulIntegerToFloat;
 *   INT8 / UINT8  saturate(round_half_even((float)v * mult[ch]) + zp), NaN to the minimum:
 *            calq__store_q, the requantization of QLinearConv / QGemm / QLinearMatMul.
 * The same float operations in the same order as the reference kernels, so the same bits. */
typedef struct calq_int_epi {
    calq_dtype out;
    const int32_t *bias;      /* NULL: none */
    int64_t bias_rs, bias_cs; /* bias element strides per row and per channel (0: broadcast) */
    const float *mult;        /* per channel */
    const float *fbias;       /* per channel, FLOAT32 only; NULL: none */
    int64_t zp;
} calq_int_epi;

/* Sums laid out [N, P, M] (channels last, from calq__int_conv_dnnl_run) into y [N, M, P]; row is n.
 * Sums that leave int32 are recorded in ov (index: y's). */
void calq__int_epi_channels_last(const calq_int_epi *e, const int32_t *acc, int64_t N, int64_t P, int64_t M, void *y,
                                 calq__i32_overflow *ov);
/* Sums laid out [R, M] row-major (from calq__int_mm_dnnl_run) into y [R, M]; channel = column. */
void calq__int_epi_rows(const calq_int_epi *e, const int32_t *acc, int64_t R, int64_t M, void *y,
                        calq__i32_overflow *ov);

#endif
