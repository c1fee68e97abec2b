/* The fused attention step (fused_transformer.h): O = Softmax(scale(Q . Kt)) . V without the
 * score matrix in memory.
 *
 * Written out, attention stores the scores S = Q . Kt ([.., M, N]) and the probabilities P, and
 * reads each back once or twice: for LYT-Net's 14400 x 3600 maps that is 207 MB per head and
 * layer, and the run is bound by memory, not arithmetic. Here a tile of R rows of S (R chosen so
 * that a tile is at most 256 KB, in cache) is computed, scaled, turned into probabilities and
 * multiplied by V before the next tile: two sgemms and one softmax pass per tile.
 *
 * Rounding: the products are oneDNN sgemm's (another summation order than the MatMul layers'
 * blocks when K is large), the scale is the layer's own float operation, and the softmax sums in
 * double and takes exp from the vector math library, so the result differs from the layers by
 * float rounding (within the fast-vs-reference tolerance); the planner fuses only when nothing
 * observes the intermediate tensors. Each tile is computed by one thread with single-threaded
 * sgemms, and tiles depend on the shape only, so the bits do not depend on the thread count.
 * The `_ref` kernel computes the same formula with plain loops, the softmax as the Softmax
 * layer's reference does (double). */
#include <math.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernels/dnnl_common.h"
#include "exec/kernels/elementwise_mvec.h"
#include "exec/kernels/exact_recip.h"
#include "exec/kernels/fused_transformer.h"

#define TILE_FLOATS   ((int64_t)1 << 16) /* one tile of scores: 256 KB */
#define TILE_MAX_ROWS 64

typedef struct fused_att {
    int64_t batch, m, d, n, e, rows; /* rows: the tile height */
    calq_attention_scale mode;
    float k, recip; /* recip: 1 / k when exact (a power of two), else 0 */
    ew_row exp_row; /* libmvec's expf row, NULL on CPUs without one (then expf) */
} fused_att;

static calq_status att_infer(calq_op_ctx *c)
{
    const calq_tensor *q = c->in[0], *v = c->in[2];
    int64_t dims[CALQ_MAX_DIMS];
    memcpy(dims, q->dims, sizeof(int64_t) * (size_t)q->ndim);
    dims[q->ndim - 1] = v->dims[v->ndim - 1];
    calq__set_shape(c->out[0], CALQ_DTYPE_FLOAT32, dims, q->ndim);
    return CALQ_OK;
}

static inline float scaled(const fused_att *s, float x)
{
    return s->mode == CALQ_ATT_MUL ? x * s->k : s->mode == CALQ_ATT_DIV ? x / s->k : x;
}

/* The reference: per batch and row, the scores, the softmax in double, the product by V. */
static calq_status att_run_ref(calq_op_ctx *c)
{
    const fused_att *s = c->state;
    const float *q = c->in[0]->data, *kt = c->in[1]->data, *v = c->in[2]->data;
    float *o = c->out[0]->data;
    const int64_t M = s->m, D = s->d, N = s->n, E = s->e;
    double *p = malloc(sizeof(double) * (size_t)(N ? N : 1));
    if (!p) return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory for the attention scores");
    for (int64_t b = 0; b < s->batch; b++)
        for (int64_t i = 0; i < M; i++) {
            const float *qr = q + (b * M + i) * D, *kb = kt + b * D * N, *vb = v + b * N * E;
            double mx = -INFINITY, sum = 0.0;
            for (int64_t j = 0; j < N; j++) {
                float acc = 0.0f;
                for (int64_t t = 0; t < D; t++) acc += qr[t] * kb[t * N + j];
                p[j] = scaled(s, acc);
                if (p[j] > mx) mx = p[j];
            }
            for (int64_t j = 0; j < N; j++) sum += p[j] = exp(p[j] - mx);
            for (int64_t j = 0; j < N; j++) p[j] = (float)(p[j] / sum);
            float * or = o + (b * M + i) * E;
            for (int64_t t = 0; t < E; t++) {
                float acc = 0.0f;
                for (int64_t j = 0; j < N; j++) acc += (float)p[j] * vb[j * E + t];
                or [t] = acc;
            }
        }
    free(p);
    return CALQ_OK;
}

#define LANES 16

/* Rows [0, rows) of a tile of scores in place: scale, then softmax along each row. The maximum
 * and the sum run over 16 lanes (then combined in order), so that they vectorize; cloned per
 * instruction set (the build targets baseline x86-64). */
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
static void
softmax_tile(const fused_att *s, float *t, int64_t rows)
{
    const int64_t N = s->n, nb = N / LANES * LANES;
    const float k = s->k, recip = s->recip;
    for (int64_t i = 0; i < rows; i++) {
        float *r = t + i * N;
        if (s->mode == CALQ_ATT_MUL || (s->mode == CALQ_ATT_DIV && recip != 0.0f)) {
            const float f = s->mode == CALQ_ATT_MUL ? k : recip; /* x / 2^e == x * 2^-e, bit for bit */
            for (int64_t j = 0; j < N; j++) r[j] = r[j] * f;
        } else if (s->mode == CALQ_ATT_DIV) {
            for (int64_t j = 0; j < N; j++) r[j] = r[j] / k;
        }
        float m[LANES];
        for (int u = 0; u < LANES; u++) m[u] = -INFINITY;
        for (int64_t j = 0; j < nb; j += LANES)
            for (int u = 0; u < LANES; u++) m[u] = r[j + u] > m[u] ? r[j + u] : m[u];
        float mx = -INFINITY;
        for (int64_t j = nb; j < N; j++) mx = r[j] > mx ? r[j] : mx;
        for (int u = 0; u < LANES; u++) mx = m[u] > mx ? m[u] : mx;
        for (int64_t j = 0; j < N; j++) r[j] = r[j] - mx;
        if (s->exp_row) {
            const void *in[1] = {r};
            const int64_t st[1] = {1};
            s->exp_row(NULL, r, in, st, N);
        } else {
            for (int64_t j = 0; j < N; j++) r[j] = expf(r[j]);
        }
        float a[LANES] = {0};
        for (int64_t j = 0; j < nb; j += LANES)
            for (int u = 0; u < LANES; u++) a[u] += r[j + u];
        double sum = 0.0;
        for (int u = 0; u < LANES; u++) sum += a[u];
        for (int64_t j = nb; j < N; j++) sum += r[j];
        const float inv = (float)(1.0 / sum);
        for (int64_t j = 0; j < N; j++) r[j] = r[j] * inv;
    }
}

static calq_status att_run_fast(calq_op_ctx *c)
{
    const fused_att *s = c->state;
    const float *q = c->in[0]->data, *kt = c->in[1]->data, *v = c->in[2]->data;
    float *o = c->out[0]->data;
    const int64_t M = s->m, D = s->d, N = s->n, E = s->e, R = s->rows;
    const int64_t tiles_per = (M + R - 1) / R,
                  tasks = s->batch * tiles_per; /* little work: one thread, and oneDNN's sgemm told so too (outside an
                                                 * active parallel region it would thread itself) */
    const bool serial = s->batch * M * N * (D + E) < CALQ_DNNL_SERIAL_WORK;
    const int prev = calq__dnnl_serial_begin(serial);
    int failed = 0;
#pragma omp parallel reduction(| : failed)
    {
        float *t = calq__dnnl_scratch(CALQ_SCRATCH_ATTENTION, sizeof(float) * (size_t)(R * N));
        if (!t) failed = 2;
            /* every thread takes part in the loop (its tasks are skipped without a buffer) */
#pragma omp for schedule(static)
        for (int64_t k = 0; k < tasks; k++) {
            if (!t) continue;
            const int64_t b = k / tiles_per, i0 = (k % tiles_per) * R, rows = M - i0 < R ? M - i0 : R;
            if (dnnl_sgemm('N', 'N', rows, N, D, 1.0f, q + (b * M + i0) * D, D, kt + b * D * N, N, 0.0f, t, N) !=
                dnnl_success) {
                failed |= 1;
                continue;
            }
            softmax_tile(s, t, rows);
            if (dnnl_sgemm('N', 'N', rows, E, N, 1.0f, t, N, v + b * N * E, E, 0.0f, o + (b * M + i0) * E, E) !=
                dnnl_success)
                failed |= 1;
        }
    }
    calq__dnnl_serial_end(serial, prev);
    if (failed & 2) return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory for the attention scores");
    if (failed) return calq__op_fail(c, CALQ_ERR_INTERNAL, "oneDNN sgemm failed");
    return CALQ_OK;
}

calq_status calq__fused_attention_prepare(calq_op_ctx *c, calq_attention_scale mode, float k)
{
    c->state = NULL;
    const calq_tensor *q = c->in[0], *kt = c->in[1], *v = c->in[2], *o = c->out[0];
    const int r = q->ndim;
    if (r < 2 || kt->ndim != r || v->ndim != r || o->ndim != r) return CALQ_OK;
    for (int i = 0; i < 3; i++)
        if (c->in[i]->dtype != CALQ_DTYPE_FLOAT32) return CALQ_OK;
    int64_t batch = 1;
    for (int d = 0; d < r - 2; d++) {
        if (kt->dims[d] != q->dims[d] || v->dims[d] != q->dims[d]) return CALQ_OK; /* no broadcasting */
        batch *= q->dims[d];
    }
    const int64_t M = q->dims[r - 2], D = q->dims[r - 1], N = kt->dims[r - 1], E = v->dims[r - 1];
    if (kt->dims[r - 2] != D || v->dims[r - 2] != N || M < 1 || D < 1 || N < 1 || E < 1) return CALQ_OK;
    fused_att *s = calloc(1, sizeof *s);
    if (!s) return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory");
    s->batch = batch;
    s->m = M;
    s->d = D;
    s->n = N;
    s->e = E;
    s->rows = TILE_FLOATS / N;
    if (s->rows > TILE_MAX_ROWS) s->rows = TILE_MAX_ROWS;
    if (s->rows < 1) s->rows = 1;
    s->mode = mode;
    s->k = k;
    s->recip = mode == CALQ_ATT_DIV ? calq__exact_recip(k) : 0.0f;
    s->exp_row = calq__ew_mvec_row("Exp");
    c->state = s;
    return CALQ_OK;
}

static void att_release(void *state)
{
    free(state);
}

const calq_op_def calq__op_fused_attention = {.op_type = "calq.FusedAttention",
                                              .min_inputs = 3,
                                              .max_inputs = 3,
                                              .min_outputs = 1,
                                              .max_outputs = 1,
                                              .infer = att_infer,
                                              .run = att_run_ref,
                                              .run_fast = att_run_fast,
                                              .release = att_release};
