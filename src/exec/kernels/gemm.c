/* Gemm and MatMul: shape rules, the plain-C reference kernels, and the float32 fast path
 * through oneDNN (gemm_dnnl.c).
 *
 * Reference numerics: every output element is a double-precision sum over k in ascending
 * order, whatever the loop shape or the thread count, then alpha/beta are applied in double
 * and the result is rounded once. Threads only split independent output rows. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernels/ascend.h"
#include "exec/kernels/gemm_dnnl.h"

/* Below this many multiply-adds a parallel region costs more than it saves. */
#define MM_PAR_WORK 32768

/* Geometry shared by infer, the reference kernel and the fast path. */
typedef struct mm_geom {
    int64_t M, N, K;
    bool trans_a, trans_b;
    int nb; /* batch rank */
    int64_t bdims[CALQ_MAX_DIMS];
    int64_t a_bs[CALQ_MAX_DIMS], b_bs[CALQ_MAX_DIMS]; /* element offset per batch step; 0 = broadcast */
    int64_t batch;
    int out_nd;
    int64_t out[CALQ_MAX_DIMS];
    /* Gemm's C, viewed as [cm, cn] with element strides (0 where broadcast). */
    bool has_c;
    int64_t c_rs, c_cs;
    double alpha, beta;
} mm_geom;

static bool mm_dtype_ok(calq_dtype t)
{
    return t == CALQ_DTYPE_FLOAT32 || t == CALQ_DTYPE_FLOAT64 || t == CALQ_DTYPE_INT32 || t == CALQ_DTYPE_INT64;
}

static calq_status check_dtypes(calq_op_ctx *c, int n)
{
    calq_dtype t = c->in[0]->dtype;
    if (!mm_dtype_ok(t))
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED,
                             "input dtype %s is not supported (float32, float64, int32, int64)", calq_dtype_name(t));
    for (int i = 1; i < n && i < c->n_in; i++)
        if (c->in[i] && c->in[i]->dtype != t)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "input %d is %s but input 0 is %s", i,
                                 calq_dtype_name(c->in[i]->dtype), calq_dtype_name(t));
    return CALQ_OK;
}

static calq_status matmul_geom(calq_op_ctx *c, mm_geom *g)
{
    const calq_tensor *A = c->in[0], *B = c->in[1];
    char sa[96], sb[96];
    memset(g, 0, sizeof *g);
    g->alpha = 1.0;
    calq__shape_str(A->dims, A->ndim, sa, sizeof sa);
    calq__shape_str(B->dims, B->ndim, sb, sizeof sb);
    if (A->ndim < 1 || B->ndim < 1)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "A is %s, B is %s: both operands need rank >= 1", sa, sb);
    int ra = A->ndim, rb = B->ndim;
    /* numpy rules: a 1-D A is a row [1,K], a 1-D B a column [K,1]; the added dim is then
     * dropped from the result. */
    int64_t ka = A->dims[ra - 1], kb = rb >= 2 ? B->dims[rb - 2] : B->dims[0];
    g->M = ra >= 2 ? A->dims[ra - 2] : 1;
    g->N = rb >= 2 ? B->dims[rb - 1] : 1;
    g->K = ka;
    if (ka != kb)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "A is %s, B is %s: inner dims %lld and %lld differ", sa, sb,
                             (long long)ka, (long long)kb);
    int na = ra > 2 ? ra - 2 : 0, nbb = rb > 2 ? rb - 2 : 0;
    if (!calq__broadcast_shape(A->dims, na, B->dims, nbb, g->bdims, &g->nb))
        return calq__op_fail(c, CALQ_ERR_SHAPE, "A is %s, B is %s: batch dims do not broadcast", sa, sb);
    calq__broadcast_strides(A->dims, na, g->nb, g->a_bs);
    calq__broadcast_strides(B->dims, nbb, g->nb, g->b_bs);
    g->batch = 1;
    for (int i = 0; i < g->nb; i++) {
        g->a_bs[i] *= g->M * g->K;
        g->b_bs[i] *= g->K * g->N;
        g->batch *= g->bdims[i];
        g->out[g->out_nd++] = g->bdims[i];
    }
    if (ra >= 2) g->out[g->out_nd++] = g->M;
    if (rb >= 2) g->out[g->out_nd++] = g->N;
    if (calq__shape_numel(g->out, g->out_nd) < 0 || calq_tensor_numel(A) < 0 || calq_tensor_numel(B) < 0)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "A is %s, B is %s: invalid or too large sizes", sa, sb);
    return CALQ_OK;
}

static calq_status gemm_geom(calq_op_ctx *c, mm_geom *g)
{
    const calq_tensor *A = c->in[0], *B = c->in[1], *C = c->n_in > 2 ? c->in[2] : NULL;
    char sa[96], sb[96], sc[96];
    memset(g, 0, sizeof *g);
    calq__shape_str(A->dims, A->ndim, sa, sizeof sa);
    calq__shape_str(B->dims, B->ndim, sb, sizeof sb);
    if (A->ndim != 2 || B->ndim != 2)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "A is %s, B is %s: both must be 2-D", sa, sb);
    g->trans_a = calq__attr_int(c->node, "transA", 0) != 0;
    g->trans_b = calq__attr_int(c->node, "transB", 0) != 0;
    g->alpha = calq__attr_float(c->node, "alpha", 1.0f);
    g->beta = calq__attr_float(c->node, "beta", 1.0f);
    g->M = A->dims[g->trans_a ? 1 : 0];
    g->K = A->dims[g->trans_a ? 0 : 1];
    int64_t kb = B->dims[g->trans_b ? 1 : 0];
    g->N = B->dims[g->trans_b ? 0 : 1];
    if (g->K != kb)
        return calq__op_fail(c, CALQ_ERR_SHAPE,
                             "A is %s (transA=%d), B is %s (transB=%d): inner dims %lld and %lld differ", sa,
                             g->trans_a, sb, g->trans_b, (long long)g->K, (long long)kb);
    g->out_nd = 2;
    g->out[0] = g->M;
    g->out[1] = g->N;
    g->batch = 1;
    if (C) {
        /* Unidirectional broadcast of C to [M, N]. */
        int64_t cm = C->ndim == 2 ? C->dims[0] : 1, cn = C->ndim >= 1 ? C->dims[C->ndim - 1] : 1;
        if (C->ndim > 2 || (cm != 1 && cm != g->M) || (cn != 1 && cn != g->N))
            return calq__op_fail(c, CALQ_ERR_SHAPE, "C is %s, which does not broadcast to MxN = %lldx%lld",
                                 calq__shape_str(C->dims, C->ndim, sc, sizeof sc), (long long)g->M, (long long)g->N);
        g->has_c = true;
        g->c_rs = cm == 1 ? 0 : cn;
        g->c_cs = cn == 1 ? 0 : 1;
    }
    if (calq__shape_numel(g->out, 2) < 0)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "A is %s, B is %s: output too large", sa, sb);
    return CALQ_OK;
}

static calq_status geom(calq_op_ctx *c, mm_geom *g)
{
    bool gemm = strcmp(c->node->op_type, "Gemm") == 0;
    if (calq__ascend_int_input(c)) return calq__ascend_unlowered(c);
    CALQ_TRY(check_dtypes(c, gemm ? 3 : 2));
    return gemm ? gemm_geom(c, g) : matmul_geom(c, g);
}

static calq_status mm_infer(calq_op_ctx *c)
{
    mm_geom g;
    CALQ_TRY(geom(c, &g));
    calq__set_shape(c->out[0], c->in[0]->dtype, g.out, g.out_nd);
    return CALQ_OK;
}

/* ---- reference kernels ------------------------------------------------------------------ */

static void batch_offsets(const mm_geom *g, int64_t bi, int64_t *aoff, int64_t *boff)
{
    *aoff = *boff = 0;
    for (int k = g->nb - 1; k >= 0; k--) {
        int64_t idx = bi % g->bdims[k];
        bi /= g->bdims[k];
        *aoff += idx * g->a_bs[k];
        *boff += idx * g->b_bs[k];
    }
}

/* Output row r (= batch * M + m) into y, with acc[N] as scratch. Both loop shapes add the
 * products for each output in ascending k, so the result does not depend on which is used:
 * rows of B are streamed when they are contiguous, columns (transB) are dotted otherwise. */
#define DEFINE_MM_ROW(sfx, T)                                                                                          \
    static void mm_row_##sfx(const mm_geom *g, const T *a, const T *b, const T *cv, T *y, int64_t r, double *acc)      \
    {                                                                                                                  \
        int64_t M = g->M, N = g->N, K = g->K, m = r % M, aoff, boff;                                                   \
        batch_offsets(g, r / M, &aoff, &boff);                                                                         \
        const T *ar = a + aoff + (g->trans_a ? m : m * K);                                                             \
        int64_t a_cs = g->trans_a ? M : 1;                                                                             \
        const T *bm = b + boff;                                                                                        \
        if (!g->trans_b) {                                                                                             \
            for (int64_t n = 0; n < N; n++) acc[n] = 0.0;                                                              \
            for (int64_t k = 0; k < K; k++) {                                                                          \
                double av = (double)ar[k * a_cs];                                                                      \
                const T *br = bm + k * N;                                                                              \
                for (int64_t n = 0; n < N; n++) acc[n] += av * (double)br[n];                                          \
            }                                                                                                          \
        } else {                                                                                                       \
            for (int64_t n = 0; n < N; n++) {                                                                          \
                const T *bc = bm + n * K;                                                                              \
                double s = 0.0;                                                                                        \
                for (int64_t k = 0; k < K; k++) s += (double)ar[k * a_cs] * (double)bc[k];                             \
                acc[n] = s;                                                                                            \
            }                                                                                                          \
        }                                                                                                              \
        T *yr = y + r * N;                                                                                             \
        if (cv) {                                                                                                      \
            const T *cr = cv + m * g->c_rs;                                                                            \
            for (int64_t n = 0; n < N; n++) yr[n] = (T)(g->alpha * acc[n] + g->beta * (double)cr[n * g->c_cs]);        \
        } else if (g->alpha != 1.0) {                                                                                  \
            for (int64_t n = 0; n < N; n++) yr[n] = (T)(g->alpha * acc[n]);                                            \
        } else {                                                                                                       \
            for (int64_t n = 0; n < N; n++) yr[n] = (T)acc[n];                                                         \
        }                                                                                                              \
    }

DEFINE_MM_ROW(f32, float)
DEFINE_MM_ROW(f64, double)

/* Integer MatMul/Gemm (rare: shape arithmetic). Products wrap like two's-complement
 * hardware would, instead of overflowing (undefined in C). */
static void mm_row_int(const mm_geom *g, const calq_tensor *A, const calq_tensor *B, const calq_tensor *C,
                       calq_tensor *Y, int64_t r)
{
    int64_t M = g->M, N = g->N, K = g->K, m = r % M, aoff, boff;
    batch_offsets(g, r / M, &aoff, &boff);
    for (int64_t n = 0; n < N; n++) {
        uint64_t s = 0;
        for (int64_t k = 0; k < K; k++) {
            int64_t ai = aoff + (g->trans_a ? k * M + m : m * K + k);
            int64_t bi = boff + (g->trans_b ? n * K + k : k * N + n);
            s += (uint64_t)calq__tensor_get_i64(A, ai) * (uint64_t)calq__tensor_get_i64(B, bi);
        }
        int64_t acc = (int64_t)s;
        int64_t yi = r * N + n;
        if (g->alpha == 1.0 && (!C || g->beta == 1.0)) {
            uint64_t v = (uint64_t)acc + (C ? (uint64_t)calq__tensor_get_i64(C, m * g->c_rs + n * g->c_cs) : 0);
            calq__tensor_set_i64(Y, yi, (int64_t)v);
        } else {
            double v = g->alpha * (double)acc + (C ? g->beta * calq__tensor_get_f64(C, m * g->c_rs + n * g->c_cs) : 0);
            calq__tensor_set_f64(Y, yi, trunc(v));
        }
    }
}

static calq_status mm_run(calq_op_ctx *c)
{
    mm_geom g;
    CALQ_TRY(geom(c, &g));
    const calq_tensor *A = c->in[0], *B = c->in[1], *C = g.has_c ? c->in[2] : NULL;
    calq_tensor *Y = c->out[0];
    int64_t rows = g.batch * g.M;
    if (rows == 0 || g.N == 0) return CALQ_OK;
    calq_dtype dt = A->dtype;
    int oom = 0;
    bool par = rows > 1 && (double)rows * (double)g.N * (double)(g.K + 1) > MM_PAR_WORK;

#pragma omp parallel if (par)
    {
        double *acc =
            dt == CALQ_DTYPE_FLOAT32 || dt == CALQ_DTYPE_FLOAT64 ? malloc(sizeof(double) * (size_t)g.N) : NULL;
        if ((dt == CALQ_DTYPE_FLOAT32 || dt == CALQ_DTYPE_FLOAT64) && !acc) {
#pragma omp atomic write
            oom = 1;
        }
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; r++) {
            if (dt == CALQ_DTYPE_FLOAT32) {
                if (acc) mm_row_f32(&g, A->data, B->data, C ? C->data : NULL, Y->data, r, acc);
            } else if (dt == CALQ_DTYPE_FLOAT64) {
                if (acc) mm_row_f64(&g, A->data, B->data, C ? C->data : NULL, Y->data, r, acc);
            } else {
                mm_row_int(&g, A, B, C, Y, r);
            }
        }
        free(acc);
    }
    if (oom)
        return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory for a row of %lld accumulators", (long long)g.N);
    return CALQ_OK;
}

/* ---- fast path -------------------------------------------------------------------------- */

/* Whether a batched product is one matrix product: B broadcast over every batch dim and A's
 * batches contiguous, untransposed (Y's batches are contiguous). */
static bool collapsible(const mm_geom *g)
{
    if (g->nb == 0 || g->trans_a || g->has_c) return false;
    int64_t stride = g->M * g->K;
    for (int k = g->nb - 1; k >= 0; k--) {
        if (g->b_bs[k] != 0 || (g->bdims[k] > 1 && g->a_bs[k] != stride)) return false;
        stride *= g->bdims[k];
    }
    return true;
}

static calq_status mm_prepare(calq_op_ctx *c)
{
    c->state = NULL;
    if (c->in[0]->dtype != CALQ_DTYPE_FLOAT32) return CALQ_OK;
    mm_geom g;
    CALQ_TRY(geom(c, &g));
    calq_mm_desc d = {0};
    d.M = g.M;
    d.N = g.N;
    d.K = g.K;
    d.trans_a = g.trans_a;
    d.trans_b = g.trans_b;
    d.alpha = (float)g.alpha;
    /* beta * C enters as oneDNN's sum post-op over Y pre-filled with C. With beta == 0 the
     * term is dropped (the reference kernel would still turn an infinite C into NaN). */
    d.accumulate = g.has_c && g.beta != 0.0;
    d.beta = (float)g.beta;
    d.nb = g.nb;
    for (int i = 0; i < g.nb; i++) {
        d.bdims[i] = g.bdims[i];
        d.a_bs[i] = g.a_bs[i];
        d.b_bs[i] = g.b_bs[i];
    }
    if (collapsible(&g)) {
        /* one B for every batch and A's batches one after the other: a single [batch * M, K]
         * product (a Linear on [B, H, W, C], as Swin writes it, was H products of W rows, each
         * re-packing the weights) */
        d.M = g.M * g.batch;
        d.nb = 0;
    }
    /* MatMul: its bias Add and a scalar Mul after it as binary post-ops (the planner's chain) */
    if (strcmp(c->node->op_type, "MatMul") == 0) {
        for (int i = 0; i < c->n_post && d.n_bin < CALQ_MM_MAX_BIN; i++) {
            const calq_post_op *op = &c->post[i];
            const bool binary = op->kind == CALQ_POST_ADD_LAST || op->kind == CALQ_POST_ADD_CHANNEL ||
                                op->kind == CALQ_POST_MUL_CHANNEL || op->kind == CALQ_POST_DIV_SCALAR;
            if (!binary || !op->operand) break; /* the element-wise ones and the residual sum stay layers */
            const int64_t n = calq_tensor_numel(op->operand);
            const calq_tensor *y = c->out[0];
            /* one value per column of the products (not so when B is a vector: then Y's last dim is M) */
            bool per_col = n == g.N && n > 1 && y->ndim >= 1 && y->dims[y->ndim - 1] == g.N &&
                           (op->kind == CALQ_POST_ADD_LAST || (op->kind == CALQ_POST_ADD_CHANNEL && y->ndim == 2));
            bool scalar = (op->kind == CALQ_POST_ADD_CHANNEL || op->kind == CALQ_POST_MUL_CHANNEL ||
                           op->kind == CALQ_POST_DIV_SCALAR) &&
                          n == 1;
            if ((!per_col && !scalar) || (c->exact_only && !op->exact)) break;
            d.bin_op[d.n_bin] = op->kind == CALQ_POST_MUL_CHANNEL  ? CALQ_MM_MUL
                                : op->kind == CALQ_POST_DIV_SCALAR ? CALQ_MM_DIV
                                                                   : CALQ_MM_ADD;
            d.bin_per_col[d.n_bin] = per_col;
            d.n_bin++;
        }
    }
    /* weights: constant and one B for every batch, packed once by the plan */
    bool b_fixed = (c->const_inputs & 2u) && c->in[1]->data;
    for (int i = 0; i < d.nb; i++) b_fixed = b_fixed && d.b_bs[i] == 0;
    d.b_const = b_fixed ? c->in[1]->data : NULL;
    calq_mm_dnnl *p = NULL;
    CALQ_TRY(calq__mm_dnnl_create(c, &d, &p));
    c->state = p;
    c->n_post_used = p ? d.n_bin : 0;
    return CALQ_OK;
}

static calq_status mm_run_fast(calq_op_ctx *c)
{
    mm_geom g;
    CALQ_TRY(geom(c, &g));
    float *y = c->out[0]->data;
    if (g.has_c && g.beta != 0.0) {
        const float *cv = c->in[2]->data;
        int64_t M = g.M, N = g.N;
#pragma omp parallel for schedule(static) if (M * N > MM_PAR_WORK)
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) y[m * N + n] = cv[m * g.c_rs + n * g.c_cs];
    }
    const float *bin[CALQ_MM_MAX_BIN] = {NULL};
    for (int i = 0; i < c->n_post && i < CALQ_MM_MAX_BIN; i++) bin[i] = c->post[i].operand->data;
    return calq__mm_dnnl_run(c, c->state, c->in[0]->data, c->in[1]->data, bin, y);
}

static void mm_release(void *state)
{
    calq__mm_dnnl_free(state);
}

const calq_op_def calq__ops_gemm[] = {
    {"Gemm", 2, 3, 1, 1, 0, false, mm_infer, mm_run, mm_prepare, mm_run_fast, mm_release, 0},
    {"MatMul", 2, 2, 1, 1, 0, false, mm_infer, mm_run, mm_prepare, mm_run_fast, mm_release, CALQ_OP_POST_OPS},
    {0},
};
