/* The oneDNN fast path shared by Gemm and MatMul (float32 only).
 *
 * A plan covers `batch` independent products Y_b = alpha * op(A_b) * op(B_b) (+ beta * Y_b),
 * each MxK by KxN, with plain (possibly transposed) row-major operands. A and B are read afresh
 * on every run, so B may be a graph input that changes between runs; unless the caller gives
 * b_const (B constant and the same for every batch: a layer's weights), which the plan converts
 * once into oneDNN's packed layout for each column block (where oneDNN's kernel for the shape has
 * one): an unpacked B is re-packed by every call, which cost a batch-1 classifier head (M = 1,
 * B 4 MB) 2.5x its packed time.
 *
 * Determinism: oneDNN's own threading may split the K reduction across threads (its jit gemm
 * does so on AVX2-only CPUs), which makes results depend on the thread count. The plan
 * therefore cuts Y into fixed blocks chosen from the shape alone and runs one single-threaded
 * oneDNN product per block inside calq's own parallel loop: each output element is computed
 * by the same kernel in the same order whatever the number of threads. */
#ifndef CALQ_EXEC_GEMM_DNNL_H
#define CALQ_EXEC_GEMM_DNNL_H

#include <stdbool.h>

#include "exec/op.h"

#define CALQ_MM_MAX_BIN 2

/* The element-wise operation of a fused binary post-op. */
typedef enum calq_mm_bin { CALQ_MM_ADD, CALQ_MM_MUL, CALQ_MM_DIV } calq_mm_bin;

typedef struct calq_mm_desc {
    int64_t M, N, K;
    bool trans_a; /* A is stored KxM */
    bool trans_b; /* B is stored NxK */
    float alpha;
    bool accumulate; /* Y = alpha*A*B + beta*Y (Y pre-filled by the caller) */
    float beta;
    /* Batch: `nb` output batch dims; a_bs/b_bs are the element offsets of A and B per step
     * of each batch dim (0 where that operand is broadcast). Y's batches are contiguous. */
    int nb;
    int64_t bdims[CALQ_MAX_DIMS];
    int64_t a_bs[CALQ_MAX_DIMS];
    int64_t b_bs[CALQ_MAX_DIMS];
    /* Element-wise layers applied to each block right after its product (and the sum), in order:
     * a MatMul's bias Add, a scalar Mul or Div (attention's scaling) fused by the planner. Op i
     * adds, multiplies by or divides by (bin_op[i]) operand i's element of the output's column
     * (bin_per_col[i]: N values) or its one value, rounding as the layer on its own does. */
    int n_bin;
    calq_mm_bin bin_op[CALQ_MM_MAX_BIN];
    bool bin_per_col[CALQ_MM_MAX_BIN];
    /* B's data when it is constant and broadcast over the batch (every b_bs 0), or NULL: read in
     * calq__mm_dnnl_create only (packed into the plan) */
    const float *b_const;
} calq_mm_desc;

typedef struct calq_mm_dnnl calq_mm_dnnl;

/* Builds a plan. *out is NULL (and CALQ_OK returned) when oneDNN cannot serve the shape
 * well: the caller then declines the fast path. */
calq_status calq__mm_dnnl_create(calq_op_ctx *c, const calq_mm_desc *d, calq_mm_dnnl **out);
/* bin[i]: binary post-op i's operand (d.n_bin of them; NULL when none). */
calq_status calq__mm_dnnl_run(calq_op_ctx *c, const calq_mm_dnnl *p, const float *a, const float *b,
                              const float *const *bin, float *y);
void calq__mm_dnnl_free(calq_mm_dnnl *p);
/* Whether the plan holds B packed (tests). */
bool calq__mm_dnnl_packed(const calq_mm_dnnl *p);

#endif
