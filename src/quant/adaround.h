/* AdaRound (Nagel et al. 2020, "Up or Down? Adaptive Rounding for Post-Training Quantization"):
 * learned up/down rounding of one layer's weights, with the scale fixed (ARQ's, §6.1). The
 * layer is a matrix: `rows` output channels of `k` weights each, in `groups` equal groups of
 * consecutive rows, group g reading columns [g*k, (g+1)*k) of each input sample (a grouped or
 * depthwise convolution's im2col column; groups = 1 for a plain conv, Gemm, MatMul). The
 * objective and its schedule are in docs/numerics.md ("ada_quantize").
 *
 * Determinism: rows are independent of each other (their Adam states, their gradients), the
 * minibatches come from a seeded generator drawn sequentially, and every sum runs in a fixed
 * order, so the result is the same bits for any thread count. */
#ifndef CALQ_QUANT_ADAROUND_H
#define CALQ_QUANT_ADAROUND_H

#include <stdint.h>

#include "calq.h"

typedef struct calq__ada_problem {
    int64_t rows, k;
    int groups;         /* rows % groups == 0 */
    const float *w;     /* [rows, k] float weights */
    const float *scale; /* n_scale = rows (per channel) or 1 */
    int64_t n_scale;
    int qmin, qmax;    /* the integer grid, e.g. -128, 127 */
    const float *x;    /* [n_samples, groups * k] input samples */
    int64_t n_samples; /* >= 1 */
} calq__ada_problem;

typedef struct calq__ada_opts {
    int num_iteration; /* >= 1 */
    float reg_param;   /* weight of the rounding regulariser */
    float beta_start, beta_end;
    float warm_start;  /* fraction of the iterations before the regulariser starts */
    int batch;         /* samples per iteration (at most n_samples are used) */
    float lr;          /* Adam's step size */
    uint64_t seed;     /* the minibatch generator's seed */
    int n_threads;     /* <= 0: OpenMP's default */
    const char *layer; /* names the layer in log lines and messages */
    int log;           /* progress lines through the log facility */
} calq__ada_opts;

/* calq's defaults besides §7.2's: batch 256, lr 1e-3, seed 0x5EED. */
void calq__ada_opts_default(calq__ada_opts *o);

typedef struct calq__ada_result {
    double err_nearest;  /* sum over every sample of ||(s*q - w) x||^2 with nearest rounding */
    double err_ada;      /* the same with the learned rounding */
    int64_t n_changed;   /* weights whose integer differs from nearest rounding */
    int64_t n_rows_kept; /* output channels reverted to nearest rounding (learned was worse) */
    double seconds;
} calq__ada_result;

/* Learns the rounding; q: rows * k int8 (caller-owned), clip(floor(w/s) + (h(V) >= 0.5)) per
 * row, or the row's nearest rounding when that gives the row a smaller or equal error on all the
 * samples (so err_ada <= err_nearest always). */
calq_status calq__adaround(const calq__ada_problem *p, const calq__ada_opts *o, int8_t *q, calq__ada_result *res,
                           calq_error *err);

/* sum over the samples of ||(s*q - w) x||^2 in double, rows in order, each row's sum in sample
 * order (deterministic). */
double calq__ada_recon_error(const calq__ada_problem *p, const int8_t *q);

/* One iteration's reconstruction gradient for n_rows rows of one group: d[r*B + b] =
 * sum_j dw[r*k + j] * xt[j*B + b] (j ascending) and g[r*k + j] = (2/B) * sum_b d[r*B + b] *
 * xb[b*ldx + j] (b ascending); xt: the group's k columns of the B samples transposed [k, B], xb:
 * the group's first column in sample b's row (stride ldx). The row-blocked kernel and its plain
 * reference give the same bits (the same order for every element). */
void calq__ada_grad(const float *dw, int64_t n_rows, int64_t k, const float *xt, const float *xb, int64_t ldx, int B,
                    float *d, float *g);
void calq__ada_grad_ref(const float *dw, int64_t n_rows, int64_t k, const float *xt, const float *xb, int64_t ldx,
                        int B, float *d, float *g);

#endif
