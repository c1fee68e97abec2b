/* Pooling and normalisation over windows: MaxPool, AveragePool, GlobalAveragePool,
 * GlobalMaxPool and LRN. The reference kernels are plain C parallelised over independent
 * output rows, so results do not depend on the thread count; MaxPool/AveragePool also have a
 * oneDNN path (pool_dnnl.c) built from the same resolved geometry. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernels/ascend.h"
#include "exec/kernels/dnnl_common.h"
#include "exec/kernels/int_accum.h"
#include "exec/kernels/pool_dnnl.h"
#include "exec/op.h"

/* Below this many elements (outputs of a window, inputs of a global pool) the parallel region
 * costs more than the work: waking the other thread took 60-70 us on this 2-core VM
 * (exec/kernels/elementwise.c, EW_PAR_WORK), a squeeze-excite GlobalAveragePool of 96x14x14 took
 * 50 us on two threads. */
#define POOL_PAR_MIN ((int64_t)1 << 16)

/* Attribute values far beyond any real window; bounding them keeps the index arithmetic
 * below from overflowing on hostile models. */
#define POOL_ATTR_MAX ((int64_t)1 << 30)

static int64_t ceil_div(int64_t a, int64_t b)
{
    return a >= 0 ? (a + b - 1) / b : -((-a) / b);
}

/* Reads an optional INTS attribute of `want` values into dst (default `dflt` for each value
 * when absent), checking every value lies in [lo, POOL_ATTR_MAX]. */
static calq_status pool_ints(calq_op_ctx *c, const char *name, int want, int64_t dflt, int64_t lo, int64_t *dst)
{
    const int64_t *v;
    int n = calq__attr_ints(c->node, name, &v);
    if (n < 0) {
        for (int i = 0; i < want; i++) dst[i] = dflt;
        return CALQ_OK;
    }
    if (n != want)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "attribute %s has %d values, expected %d for this input rank", name, n,
                             want);
    for (int i = 0; i < n; i++) {
        if (v[i] < lo || v[i] > POOL_ATTR_MAX)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "attribute %s[%d] = %lld is out of range [%lld, %lld]", name, i,
                                 (long long)v[i], (long long)lo, (long long)POOL_ATTR_MAX);
        dst[i] = v[i];
    }
    return CALQ_OK;
}

static calq_status pool_flag(calq_op_ctx *c, const char *name, bool *dst)
{
    int64_t v = calq__attr_int(c->node, name, 0);
    if (v != 0 && v != 1)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "attribute %s must be 0 or 1, got %lld", name, (long long)v);
    *dst = v == 1;
    return CALQ_OK;
}

/* Resolves the node's window attributes against its input shape (ONNX MaxPool/AveragePool
 * shape rules), validating everything a kernel later relies on. */
calq_status calq__pool_geom(calq_op_ctx *c, calq_pool_kind kind, calq_pool_geom *g)
{
    const calq_tensor *x = c->in[0];
    memset(g, 0, sizeof *g);
    g->kind = kind;
    if (x->ndim < 3)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "input must be N x C x D1 x ... (rank >= 3), got rank %d", x->ndim);
    if (x->ndim - 2 > CALQ_POOL_MAX_SPATIAL)
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "%d spatial dimensions; at most %d are supported", x->ndim - 2,
                             CALQ_POOL_MAX_SPATIAL);
    for (int i = 0; i < x->ndim; i++)
        if (x->dims[i] < 0) return calq__op_fail(c, CALQ_ERR_SHAPE, "input dimension %d is not known", i);
    int nsp = g->nsp = x->ndim - 2;
    g->n = x->dims[0];
    g->c = x->dims[1];

    const int64_t *ks;
    if (calq__attr_ints(c->node, "kernel_shape", &ks) < 0)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "the kernel_shape attribute is required");
    CALQ_TRY(pool_ints(c, "kernel_shape", nsp, 1, 1, g->kernel));
    CALQ_TRY(pool_ints(c, "strides", nsp, 1, 1, g->stride));
    CALQ_TRY(pool_ints(c, "dilations", nsp, 1, 1, g->dilation));
    int64_t pads[2 * CALQ_POOL_MAX_SPATIAL];
    CALQ_TRY(pool_ints(c, "pads", 2 * nsp, 0, 0, pads));
    bool ceil_mode = false, flag = false;
    CALQ_TRY(pool_flag(c, "ceil_mode", &ceil_mode));
    CALQ_TRY(pool_flag(c, "count_include_pad", &flag));
    g->count_include_pad = kind == CALQ_POOL_AVG && flag;
    CALQ_TRY(pool_flag(c, "storage_order", &flag));
    g->col_major_indices = kind == CALQ_POOL_MAX && flag;

    const char *ap = calq__attr_str(c->node, "auto_pad", "NOTSET");
    bool same_upper = strcmp(ap, "SAME_UPPER") == 0, same_lower = strcmp(ap, "SAME_LOWER") == 0;
    bool valid = strcmp(ap, "VALID") == 0;
    if (!same_upper && !same_lower && !valid && strcmp(ap, "NOTSET") != 0)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "unknown auto_pad '%s' (NOTSET, SAME_UPPER, SAME_LOWER or VALID)", ap);

    for (int i = 0; i < nsp; i++) {
        int64_t in = x->dims[2 + i], k = g->kernel[i], s = g->stride[i];
        int64_t eff = (k - 1) * g->dilation[i] + 1;
        g->in[i] = in;
        if (same_upper || same_lower) {
            /* SAME: one output per stride step, padding split evenly with the odd one at the
             * end (UPPER) or the beginning (LOWER); explicit pads are ignored as onnxruntime does. */
            int64_t out = ceil_div(in, s);
            int64_t total = (out - 1) * s + eff - in;
            if (total < 0) total = 0;
            g->pad_begin[i] = same_upper ? total / 2 : total - total / 2;
            g->pad_end[i] = total - g->pad_begin[i];
            g->out[i] = out;
            continue;
        }
        g->pad_begin[i] = valid ? 0 : pads[i];
        g->pad_end[i] = valid ? 0 : pads[nsp + i];
        /* a pad of the (dilated) window's size or more makes windows that see only padding
         * (all-zero averages, -inf maxima); onnxruntime and Caffe refuse pads that large */
        if (g->pad_begin[i] >= eff || g->pad_end[i] >= eff)
            return calq__op_fail(c, CALQ_ERR_SHAPE,
                                 "spatial dimension %d: pads %lld and %lld must be smaller than the window (%lld with "
                                 "dilation)",
                                 i, (long long)g->pad_begin[i], (long long)g->pad_end[i], (long long)eff);
        int64_t span = in + g->pad_begin[i] + g->pad_end[i] - eff;
        if (span < 0)
            return calq__op_fail(c, CALQ_ERR_SHAPE,
                                 "spatial dimension %d: the window (%lld with dilation) is larger than the padded "
                                 "input (%lld)",
                                 i, (long long)eff, (long long)(in + g->pad_begin[i] + g->pad_end[i]));
        int64_t out = (ceil_mode && !valid ? ceil_div(span, s) : span / s) + 1;
        /* ceil_mode may add a window that would start in the right padding; like PyTorch and
         * onnxruntime, every window must start inside the input or the left padding. */
        if (ceil_mode && !valid && (out - 1) * s >= in + g->pad_begin[i]) out--;
        g->out[i] = out;
    }
    return CALQ_OK;
}

/* ---- shape inference ------------------------------------------------------------------------ */

static calq_status pool_set_outputs(calq_op_ctx *c, const calq_pool_geom *g)
{
    int64_t dims[2 + CALQ_POOL_MAX_SPATIAL] = {g->n, g->c};
    for (int i = 0; i < g->nsp; i++) dims[2 + i] = g->out[i];
    calq__set_shape(c->out[0], c->in[0]->dtype, dims, 2 + g->nsp);
    if (c->n_out > 1 && c->out[1]) calq__set_shape(c->out[1], CALQ_DTYPE_INT64, dims, 2 + g->nsp);
    return CALQ_OK;
}

static calq_status maxpool_infer(calq_op_ctx *c)
{
    calq_dtype dt = c->in[0]->dtype;
    if (dt != CALQ_DTYPE_FLOAT32 && dt != CALQ_DTYPE_UINT8 && dt != CALQ_DTYPE_INT8)
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "input dtype %s is not supported (float32, uint8, int8)",
                             calq_dtype_name(dt));
    calq_pool_geom g;
    CALQ_TRY(calq__pool_geom(c, CALQ_POOL_MAX, &g));
    return pool_set_outputs(c, &g);
}

static calq_status avgpool_infer(calq_op_ctx *c)
{
    if (calq__ascend_int_input(c)) return calq__ascend_unlowered(c);
    if (c->in[0]->dtype != CALQ_DTYPE_FLOAT32)
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED,
                             "input dtype %s is not supported (float32, or int8 from an AscendQuant)",
                             calq_dtype_name(c->in[0]->dtype));
    calq_pool_geom g;
    CALQ_TRY(calq__pool_geom(c, CALQ_POOL_AVG, &g));
    return pool_set_outputs(c, &g);
}

/* calq.AscendAveragePool (ascend.h): int8 in, int32 out. */
calq_status calq__ascend_avgpool_infer(calq_op_ctx *c)
{
    int32_t offset;
    CALQ_TRY(calq__ascend_input_offset(c, &offset));
    if (c->in[0]->dtype != CALQ_DTYPE_INT8)
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "input dtype %s is not int8 (an AscendQuant's output)",
                             calq_dtype_name(c->in[0]->dtype));
    calq_pool_geom g;
    CALQ_TRY(calq__pool_geom(c, CALQ_POOL_AVG, &g));
    CALQ_TRY(pool_set_outputs(c, &g));
    c->out[0]->dtype = CALQ_DTYPE_INT32;
    return CALQ_OK;
}

/* ---- reference MaxPool / AveragePool ------------------------------------------------------- */

/* The taps of one output position along one spatial axis. Taps are o*stride - pad_begin +
 * j*dilation for j < kernel; the ones inside the input form a contiguous run of j. */
typedef struct pool_tap {
    int64_t first;   /* input position of the first tap inside the input */
    int64_t nvalid;  /* taps inside the input */
    int64_t npadded; /* taps inside input + pads (AveragePool count_include_pad divisor) */
} pool_tap;

/* The geometry widened to exactly three spatial axes (leading unit axes for 1-D and 2-D), so
 * one loop nest serves every rank. */
typedef struct pool_plan {
    int64_t planes;
    int64_t in[3], out[3], dil[3];
    pool_tap *tap[3];
    pool_tap *mem;
} pool_plan;

static calq_status pool_plan_make(calq_op_ctx *c, const calq_pool_geom *g, pool_plan *p)
{
    int lead = 3 - g->nsp;
    int64_t k[3], s[3], pb[3], pe[3];
    p->planes = g->n * g->c;
    for (int a = 0; a < 3; a++) {
        int i = a - lead;
        bool unit = i < 0;
        p->in[a] = unit ? 1 : g->in[i];
        p->out[a] = unit ? 1 : g->out[i];
        p->dil[a] = unit ? 1 : g->dilation[i];
        k[a] = unit ? 1 : g->kernel[i];
        s[a] = unit ? 1 : g->stride[i];
        pb[a] = unit ? 0 : g->pad_begin[i];
        pe[a] = unit ? 0 : g->pad_end[i];
    }
    p->mem = malloc(sizeof(pool_tap) * (size_t)(p->out[0] + p->out[1] + p->out[2] + 1));
    if (!p->mem) return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory for pooling tables");
    pool_tap *t = p->mem;
    for (int a = 0; a < 3; a++) {
        p->tap[a] = t;
        for (int64_t o = 0; o < p->out[a]; o++, t++) {
            int64_t start = o * s[a] - pb[a], d = p->dil[a];
            int64_t j0 = start >= 0 ? 0 : ceil_div(-start, d);
            int64_t j1 = start <= p->in[a] - 1 ? (p->in[a] - 1 - start) / d + 1 : 0;
            int64_t jp = start <= p->in[a] + pe[a] - 1 ? (p->in[a] + pe[a] - 1 - start) / d + 1 : 0;
            if (j1 > k[a]) j1 = k[a];
            if (jp > k[a]) jp = k[a];
            t->first = start + j0 * d;
            t->nvalid = j1 > j0 ? j1 - j0 : 0;
            /* start >= -pad_begin always, so the padded run begins at j = 0. */
            t->npadded = jp;
        }
    }
    return CALQ_OK;
}

/* Max over the windows of output row r. The running max starts at the type's lowest finite
 * value and only a strictly greater tap replaces it, as in onnxruntime and oneDNN: NaN never
 * wins, and a window of only NaN / -inf (or only padding) yields -FLT_MAX for float, which
 * keeps this kernel and the oneDNN path bit-identical. `ind` (may be NULL) receives ONNX
 * Indices: the flat input index including the N and C offsets, its spatial part in row- or
 * column-major order. */
#define POOL_MAX_ROW(NAME, T, LOWEST)                                                                                  \
    static void NAME(const pool_plan *p, bool col_major, const T *x, T *y, int64_t *ind, int64_t r)                    \
    {                                                                                                                  \
        const int64_t in1 = p->in[1], in2 = p->in[2], plane_in = p->in[0] * in1 * in2;                                 \
        const int64_t o0 = p->out[0], o1 = p->out[1], o2 = p->out[2];                                                  \
        const pool_tap *td = &p->tap[0][(r / o1) % o0], *th = &p->tap[1][r % o1];                                      \
        const int64_t plane = r / (o0 * o1);                                                                           \
        const T *xp = x + plane * plane_in;                                                                            \
        for (int64_t ow = 0; ow < o2; ow++) {                                                                          \
            const pool_tap *tw = &p->tap[2][ow];                                                                       \
            T best = LOWEST;                                                                                           \
            int64_t bi = (td->first * in1 + th->first) * in2 + tw->first;                                              \
            for (int64_t a = 0; a < td->nvalid; a++) {                                                                 \
                int64_t pd = td->first + a * p->dil[0];                                                                \
                for (int64_t b = 0; b < th->nvalid; b++) {                                                             \
                    int64_t row = (pd * in1 + th->first + b * p->dil[1]) * in2;                                        \
                    for (int64_t e = 0; e < tw->nvalid; e++) {                                                         \
                        int64_t off = row + tw->first + e * p->dil[2];                                                 \
                        if (xp[off] > best) {                                                                          \
                            best = xp[off];                                                                            \
                            bi = off;                                                                                  \
                        }                                                                                              \
                    }                                                                                                  \
                }                                                                                                      \
            }                                                                                                          \
            y[r * o2 + ow] = best;                                                                                     \
            if (ind) {                                                                                                 \
                int64_t sp = bi;                                                                                       \
                if (col_major) {                                                                                       \
                    int64_t pw = bi % in2, ph = (bi / in2) % in1, pd = bi / (in1 * in2);                               \
                    sp = pd + p->in[0] * (ph + in1 * pw);                                                              \
                }                                                                                                      \
                ind[r * o2 + ow] = plane * plane_in + sp;                                                              \
            }                                                                                                          \
        }                                                                                                              \
    }

POOL_MAX_ROW(pool_max_row_f32, float, -FLT_MAX)
POOL_MAX_ROW(pool_max_row_u8, uint8_t, 0)
POOL_MAX_ROW(pool_max_row_i8, int8_t, INT8_MIN)

static void pool_max(const pool_plan *p, bool col_major, calq_dtype dt, const void *x, void *y, int64_t *ind)
{
    const int64_t rows = p->planes * p->out[0] * p->out[1];
#pragma omp parallel for schedule(static) if (rows * p->out[2] >= POOL_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        switch (dt) {
        case CALQ_DTYPE_UINT8: pool_max_row_u8(p, col_major, x, y, ind, r); break;
        case CALQ_DTYPE_INT8: pool_max_row_i8(p, col_major, x, y, ind, r); break;
        default: pool_max_row_f32(p, col_major, x, y, ind, r); break;
        }
    }
}

/* Average over each window, summed in float in row-major tap order and divided by the count:
 * the order oneDNN uses (its results matched bit for bit on every shape tested). A window with no input taps and
 * count_include_pad = 0 has no defined mean; it yields 0. */
static void pool_avg_f32(const pool_plan *p, bool include_pad, const float *x, float *y)
{
    const int64_t in1 = p->in[1], in2 = p->in[2], plane_in = p->in[0] * in1 * in2;
    const int64_t o0 = p->out[0], o1 = p->out[1], o2 = p->out[2];
    const int64_t rows = p->planes * o0 * o1;
#pragma omp parallel for schedule(static) if (rows * o2 >= POOL_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const pool_tap *td = &p->tap[0][(r / o1) % o0], *th = &p->tap[1][r % o1];
        const float *xp = x + (r / (o0 * o1)) * plane_in;
        for (int64_t ow = 0; ow < o2; ow++) {
            const pool_tap *tw = &p->tap[2][ow];
            float sum = 0.0f;
            for (int64_t a = 0; a < td->nvalid; a++) {
                int64_t pd = td->first + a * p->dil[0];
                for (int64_t b = 0; b < th->nvalid; b++) {
                    const float *xr = xp + (pd * in1 + th->first + b * p->dil[1]) * in2 + tw->first;
                    for (int64_t e = 0; e < tw->nvalid; e++) sum += xr[e * p->dil[2]];
                }
            }
            int64_t cnt = include_pad ? td->npadded * th->npadded * tw->npadded : td->nvalid * th->nvalid * tw->nvalid;
            y[r * o2 + ow] = cnt > 0 ? sum / (float)cnt : 0.0f;
        }
    }
}

/* The Ascend integer AvgPool: round_half_even(sum(q - o) / count), the sum exact, padding zero in
 * the centered domain (as the conv layers pad), the count as the node's count_include_pad says
 * (§9.1). The mean of int8 values always fits int32. */
static void pool_avg_ascend(const pool_plan *p, bool include_pad, const int8_t *x, int32_t o, int32_t *y)
{
    const int64_t in1 = p->in[1], in2 = p->in[2], plane_in = p->in[0] * in1 * in2;
    const int64_t o0 = p->out[0], o1 = p->out[1], o2 = p->out[2];
    const int64_t rows = p->planes * o0 * o1;
#pragma omp parallel for schedule(static) if (rows * o2 >= POOL_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const pool_tap *td = &p->tap[0][(r / o1) % o0], *th = &p->tap[1][r % o1];
        const int8_t *xp = x + (r / (o0 * o1)) * plane_in;
        for (int64_t ow = 0; ow < o2; ow++) {
            const pool_tap *tw = &p->tap[2][ow];
            int64_t sum = 0;
            for (int64_t a = 0; a < td->nvalid; a++) {
                int64_t pd = td->first + a * p->dil[0];
                for (int64_t b = 0; b < th->nvalid; b++) {
                    const int8_t *xr = xp + (pd * in1 + th->first + b * p->dil[1]) * in2 + tw->first;
                    for (int64_t e = 0; e < tw->nvalid; e++) sum += xr[e * p->dil[2]] - o;
                }
            }
            int64_t cnt = include_pad ? td->npadded * th->npadded * tw->npadded : td->nvalid * th->nvalid * tw->nvalid;
            y[r * o2 + ow] = cnt > 0 ? (int32_t)calq__int_div_round_even(sum, cnt) : 0;
        }
    }
}

/* kind CALQ_POOL_AVG with ascend: calq.AscendAveragePool, whose input offset is offset. */
static calq_status pool_run(calq_op_ctx *c, calq_pool_kind kind, bool ascend, int32_t offset)
{
    calq_pool_geom g;
    CALQ_TRY(calq__pool_geom(c, kind, &g));
    pool_plan p;
    CALQ_TRY(pool_plan_make(c, &g, &p));
    const void *x = c->in[0]->data;
    void *y = c->out[0]->data;
    if (ascend) {
        pool_avg_ascend(&p, g.count_include_pad, x, offset, y);
    } else if (kind == CALQ_POOL_AVG) {
        pool_avg_f32(&p, g.count_include_pad, x, y);
    } else {
        int64_t *ind = c->n_out > 1 && c->out[1] ? c->out[1]->data : NULL;
        pool_max(&p, g.col_major_indices, c->in[0]->dtype, x, y, ind);
    }
    free(p.mem);
    return CALQ_OK;
}

static calq_status maxpool_run(calq_op_ctx *c)
{
    return pool_run(c, CALQ_POOL_MAX, false, 0);
}
static calq_status avgpool_run(calq_op_ctx *c)
{
    return pool_run(c, CALQ_POOL_AVG, false, 0);
}
calq_status calq__ascend_avgpool_run(calq_op_ctx *c)
{
    int32_t offset;
    CALQ_TRY(calq__ascend_input_offset(c, &offset));
    return pool_run(c, CALQ_POOL_AVG, true, offset);
}

static calq_status maxpool_prepare(calq_op_ctx *c)
{
    calq_pool_geom g;
    CALQ_TRY(calq__pool_geom(c, CALQ_POOL_MAX, &g));
    /* oneDNN has no Indices output in inference mode (its workspace is not ONNX's layout). */
    if (c->n_out > 1 && c->out[1]) return CALQ_OK;
    return calq__pool_dnnl_prepare(c, &g, true);
}

static calq_status avgpool_prepare(calq_op_ctx *c)
{
    calq_pool_geom g;
    CALQ_TRY(calq__pool_geom(c, CALQ_POOL_AVG, &g));
    return calq__pool_dnnl_prepare(c, &g, true);
}

/* ---- GlobalAveragePool / GlobalMaxPool ------------------------------------------------------ */

static calq_status global_infer(calq_op_ctx *c)
{
    const calq_tensor *x = c->in[0];
    if (x->dtype != CALQ_DTYPE_FLOAT32)
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "input dtype %s is not supported (float32)",
                             calq_dtype_name(x->dtype));
    if (x->ndim < 3)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "input must be N x C x D1 x ... (rank >= 3), got rank %d", x->ndim);
    int64_t dims[CALQ_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) {
        if (x->dims[i] < 0) return calq__op_fail(c, CALQ_ERR_SHAPE, "input dimension %d is not known", i);
        dims[i] = i < 2 ? x->dims[i] : 1;
    }
    calq__set_shape(c->out[0], x->dtype, dims, x->ndim);
    return CALQ_OK;
}

/* Splits a global pool into (planes, elements per plane). */
static void global_sizes(const calq_tensor *x, int64_t *planes, int64_t *per)
{
    *planes = x->dims[0] * x->dims[1];
    *per = calq__shape_numel(x->dims + 2, x->ndim - 2);
}

static calq_status gap_run(calq_op_ctx *c)
{
    int64_t planes, per;
    global_sizes(c->in[0], &planes, &per);
    const float *x = c->in[0]->data;
    float *y = c->out[0]->data;
    /* A plane can be large (whole feature maps), so the sum is kept in double. */
#pragma omp parallel for schedule(static) if (planes * per >= POOL_PAR_MIN)
    for (int64_t p = 0; p < planes; p++) {
        const float *xp = x + p * per;
        double sum = 0.0;
        for (int64_t i = 0; i < per; i++) sum += xp[i];
        y[p] = per > 0 ? (float)(sum / (double)per) : 0.0f;
    }
    return CALQ_OK;
}

/* GlobalAveragePool on the executor's layouts: channel-blocked ([N][C/b][spatial][b] in,
 * [N][C/b][1][b] out) or channels last ([N][spatial][C] in, [N][C] out). Each channel's double
 * sum runs over the positions in the reference's order, 16 channels at a time, so every output
 * is bit-identical to gap_run's. */
static const int gap_layouts; /* the fast state: no data, nothing to release */

static calq_status gap_prepare(calq_op_ctx *c)
{
    c->state = NULL;
    if (!c->in_layout || !c->out_layout || c->in_layout[0] == CALQ_LAYOUT_PLAIN || c->in_layout[0] != c->native ||
        c->in[0]->dtype != CALQ_DTYPE_FLOAT32 || c->in[0]->ndim < 3 || c->in[0]->ndim > 5 ||
        (c->in_layout[0] != CALQ_LAYOUT_CHANNELS_LAST && c->in_layout[0] > 16))
        return CALQ_OK;
    c->out_layout[0] = c->in_layout[0];
    c->state = (void *)&gap_layouts;
    return CALQ_OK;
}

/* The mean over `per` positions of `lanes` channels (<= GAP_LANES) at stride pos_stride, in double
 * in position order (the reference's sums). Channels last reads 64 neighbouring channels per
 * position: eight independent vector sums hide the add's latency that bounded 16 (each channel's
 * sum is still one chain in position order, so the bits do not change). Cloned per instruction
 * set (the build targets baseline x86-64, two doubles per SSE add): the same adds in the same
 * order, the same bits. */
#define GAP_LANES 64
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
static void
gap_lanes(const float *xp, int64_t per, int64_t pos_stride, int64_t lanes, float *yp)
{
    double sum[GAP_LANES] = {0};
    if (lanes == GAP_LANES)
        for (int64_t i = 0; i < per; i++)
            for (int64_t k = 0; k < GAP_LANES; k++) sum[k] += xp[i * pos_stride + k];
    else /* a partial group: whole 16-channel pieces on the fixed-width loop, then the rest */
        for (int64_t k0 = 0; k0 < lanes; k0 += 16) {
            double *sk = sum + k0;
            const float *xk = xp + k0;
            if (lanes - k0 >= 16)
                for (int64_t i = 0; i < per; i++)
                    for (int64_t k = 0; k < 16; k++) sk[k] += xk[i * pos_stride + k];
            else
                for (int64_t i = 0; i < per; i++)
                    for (int64_t k = 0; k < lanes - k0; k++) sk[k] += xk[i * pos_stride + k];
        }
    for (int64_t k = 0; k < lanes; k++) yp[k] = per > 0 ? (float)(sum[k] / (double)per) : 0.0f;
}

static calq_status gap_run_layout(calq_op_ctx *c)
{
    const calq_layout l = c->in_layout[0];
    const int64_t N = c->in[0]->dims[0], C = c->in[0]->dims[1];
    const int64_t per = calq__shape_numel(c->in[0]->dims + 2, c->in[0]->ndim - 2);
    /* as groups of b channels: b is the block, or GAP_LANES of the C channels of a position */
    const bool last = l == CALQ_LAYOUT_CHANNELS_LAST;
    const int64_t b = last ? GAP_LANES : l, groups = (C + b - 1) / b;
    const int64_t pos_stride = last ? C : b;
    const float *x = c->in[0]->data;
    float *y = c->out[0]->data;
#pragma omp parallel for schedule(static) if (N * groups * per * b >= POOL_PAR_MIN)
    for (int64_t p = 0; p < N * groups; p++) {
        const int64_t n = p / groups, grp = p % groups;
        const int64_t lanes = last && C - grp * b < b ? C - grp * b : b;
        const float *xp = last ? x + n * per * C + grp * b : x + p * per * b;
        float *yp = last ? y + n * C + grp * b : y + p * b;
        gap_lanes(xp, per, pos_stride, lanes, yp);
    }
    return CALQ_OK;
}

static void gap_release(void *state)
{
    (void)state;
}

static calq_status gmp_run(calq_op_ctx *c)
{
    int64_t planes, per;
    global_sizes(c->in[0], &planes, &per);
    const float *x = c->in[0]->data;
    float *y = c->out[0]->data;
#pragma omp parallel for schedule(static) if (planes * per >= POOL_PAR_MIN)
    for (int64_t p = 0; p < planes; p++) {
        const float *xp = x + p * per;
        float best = -INFINITY;
        for (int64_t i = 0; i < per; i++)
            if (xp[i] > best) best = xp[i];
        y[p] = best;
    }
    return CALQ_OK;
}

/* ---- LRN ------------------------------------------------------------------------------------ */

typedef struct lrn_params {
    int64_t size;
    float alpha, beta, bias;
} lrn_params;

static calq_status lrn_params_get(calq_op_ctx *c, lrn_params *p)
{
    const calq_attr *a = calq__attr(c->node, "size");
    if (!a) return calq__op_fail(c, CALQ_ERR_SHAPE, "the size attribute is required");
    p->size = calq__attr_int(c->node, "size", 1);
    if (p->size < 1 || p->size > POOL_ATTR_MAX)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "size must be >= 1, got %lld", (long long)p->size);
    p->alpha = calq__attr_float(c->node, "alpha", 1e-4f);
    p->beta = calq__attr_float(c->node, "beta", 0.75f);
    p->bias = calq__attr_float(c->node, "bias", 1.0f);
    if (!isfinite(p->alpha) || !isfinite(p->beta) || !isfinite(p->bias))
        return calq__op_fail(c, CALQ_ERR_SHAPE, "alpha, beta and bias must be finite");
    return CALQ_OK;
}

static calq_status lrn_infer(calq_op_ctx *c)
{
    const calq_tensor *x = c->in[0];
    if (x->dtype != CALQ_DTYPE_FLOAT32)
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "input dtype %s is not supported (float32)",
                             calq_dtype_name(x->dtype));
    if (x->ndim < 2)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "input must be N x C x ... (rank >= 2), got rank %d", x->ndim);
    for (int i = 0; i < x->ndim; i++)
        if (x->dims[i] < 0) return calq__op_fail(c, CALQ_ERR_SHAPE, "input dimension %d is not known", i);
    lrn_params p;
    CALQ_TRY(lrn_params_get(c, &p));
    calq__set_shape(c->out[0], x->dtype, x->dims, x->ndim);
    return CALQ_OK;
}

/* y = x / (bias + alpha/size * sum of x^2 over the channel window)^beta, the window being
 * c - floor((size-1)/2) .. c + ceil((size-1)/2) clipped to the channels (ONNX LRN). */
static calq_status lrn_run(calq_op_ctx *c)
{
    lrn_params p;
    CALQ_TRY(lrn_params_get(c, &p));
    const calq_tensor *xt = c->in[0];
    const int64_t n = xt->dims[0], ch = xt->dims[1], per = calq__shape_numel(xt->dims + 2, xt->ndim - 2);
    const int64_t before = (p.size - 1) / 2, after = (p.size - 1) - before;
    const float scale = p.alpha / (float)p.size;
    const float *x = xt->data;
    float *y = c->out[0]->data;
#pragma omp parallel for schedule(static) if (n * ch * per >= POOL_PAR_MIN)
    for (int64_t plane = 0; plane < n * ch; plane++) {
        const int64_t b = plane / ch, k = plane % ch;
        const int64_t lo = k - before < 0 ? 0 : k - before, hi = k + after >= ch ? ch - 1 : k + after;
        const float *xb = x + b * ch * per;
        for (int64_t i = 0; i < per; i++) {
            float sq = 0.0f;
            for (int64_t j = lo; j <= hi; j++) {
                float v = xb[j * per + i];
                sq += v * v;
            }
            y[plane * per + i] = xb[k * per + i] / powf(p.bias + scale * sq, p.beta);
        }
    }
    return CALQ_OK;
}

const calq_op_def calq__ops_pool[] = {
    {.op_type = "MaxPool",
     .min_inputs = 1,
     .max_inputs = 1,
     .min_outputs = 1,
     .max_outputs = 2,
     .infer = maxpool_infer,
     .run = maxpool_run,
     .prepare = maxpool_prepare,
     .run_fast = calq__dnnl_unary_run,
     .release = calq__dnnl_unary_release,
     .flags = CALQ_OP_LAYOUTS},
    {.op_type = "AveragePool",
     .min_inputs = 1,
     .max_inputs = 1,
     .min_outputs = 1,
     .max_outputs = 1,
     .infer = avgpool_infer,
     .run = avgpool_run,
     .prepare = avgpool_prepare,
     .run_fast = calq__dnnl_unary_run,
     .release = calq__dnnl_unary_release,
     .flags = CALQ_OP_LAYOUTS},
    {.op_type = "GlobalAveragePool",
     .min_inputs = 1,
     .max_inputs = 1,
     .min_outputs = 1,
     .max_outputs = 1,
     .infer = global_infer,
     .run = gap_run,
     .prepare = gap_prepare,
     .run_fast = gap_run_layout,
     .release = gap_release,
     .flags = CALQ_OP_LAYOUTS},
    {.op_type = "GlobalMaxPool",
     .min_inputs = 1,
     .max_inputs = 1,
     .min_outputs = 1,
     .max_outputs = 1,
     .infer = global_infer,
     .run = gmp_run},
    {.op_type = "LRN",
     .min_inputs = 1,
     .max_inputs = 1,
     .min_outputs = 1,
     .max_outputs = 1,
     .infer = lrn_infer,
     .run = lrn_run},
    {0},
};
