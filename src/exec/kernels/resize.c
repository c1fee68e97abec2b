/* Resize (opsets 10-19) and Upsample (opsets 7-9), reference kernels. Opset 18 added `axes`
 * (roi / scales / sizes for a subset of the axes), keep_aspect_ratio_policy and antialias (the
 * linear / cubic filter stretched by 1 / scale when shrinking); opset 19 the
 * half_pixel_symmetric transform.
 *
 * Every output coordinate is mapped back to a source coordinate per axis, and the value is
 * interpolated from 1 (nearest), 2 (linear) or 4 (cubic) source taps per axis with edge
 * clamping. The ONNX reference implementation nests 1-D interpolations, last axis innermost;
 * linear and cubic here do the same one axis at a time, which is both cheaper than a full
 * tensor-product of taps and gives tf_crop_and_resize extrapolation the reference's exact
 * meaning. Nearest is a pure gather and works for any dtype. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernels/resize.h"
#include "exec/layout.h"

#define RZ_PAR_MIN 4096

static calq_status rz_infer(calq_op_ctx *c)
{
    rz_params p;
    CALQ_TRY(calq__rz_parse(c, &p));
    if (calq__shape_numel(p.out, p.rank) < 0) return calq__op_fail(c, CALQ_ERR_SHAPE, "output is too large");
    for (int a = 0; a < p.rank; a++)
        if (p.in[a] == 0 && p.out[a] > 0)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "cannot resize an empty dimension (%d) to %lld", a,
                                 (long long)p.out[a]);
    calq__set_shape(c->out[0], c->in[0]->dtype, p.out, p.rank);
    return CALQ_OK;
}

static void copy_elem(char *dst, const char *src, size_t es)
{
    switch (es) {
    case 1: *dst = *src; break;
    case 2: memcpy(dst, src, 2); break;
    case 4: memcpy(dst, src, 4); break;
    default: memcpy(dst, src, es); break;
    }
}

static calq_status rz_run_nearest(calq_op_ctx *c, const rz_params *p)
{
    const int R = p->rank;
    int64_t tot = 0, off[CALQ_MAX_DIMS], istr[CALQ_MAX_DIMS];
    for (int a = 0; a < R; a++) {
        off[a] = tot;
        tot += p->out[a];
    }
    /* Per axis and output index: the source element offset, or -1 when extrapolating. */
    int64_t *src = malloc(sizeof(int64_t) * (size_t)(tot + 1));
    if (!src) return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory for resize tables");
    int64_t s = 1;
    for (int a = R - 1; a >= 0; a--) {
        istr[a] = s;
        s *= p->in[a];
    }
    for (int a = 0; a < R; a++)
        for (int64_t o = 0; o < p->out[a]; o++) {
            int64_t ti[4];
            double tw[4];
            rz_taps t = {ti, tw, 0, false};
            calq__rz_make_taps(p, a, o, &t);
            src[off[a] + o] = t.outside ? -1 : t.idx[0] * istr[a];
        }

    calq_tensor *yt = c->out[0];
    const char *x = c->in[0]->data;
    char *y = yt->data;
    const size_t es = calq_dtype_size(yt->dtype);
    const int64_t inner = p->out[R - 1], rows = inner > 0 ? calq_tensor_numel(yt) / inner : 0;
    const int64_t *last = src + off[R - 1];
    bool extrap = false;
    for (int64_t j = 0; j < inner; j++) extrap = extrap || last[j] < 0;
#pragma omp parallel for schedule(static) if (rows * inner >= RZ_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        int64_t base = 0, rest = r;
        bool out_row = false;
        for (int a = R - 2; a >= 0; a--) {
            int64_t o = rest % p->out[a];
            rest /= p->out[a];
            int64_t e = src[off[a] + o];
            if (e < 0) out_row = true;
            base += e;
        }
        if (!out_row && !extrap && es == 4) {
            /* The common case (float32, no crop): a plain gather; fixed-size memcpy compiles
             * to one load and store. */
            const char *xr = x + (size_t)base * 4;
            char *yr = y + (size_t)(r * inner) * 4;
            for (int64_t j = 0; j < inner; j++) memcpy(yr + 4 * j, xr + 4 * last[j], 4);
            continue;
        }
        for (int64_t j = 0; j < inner; j++) {
            if (out_row || last[j] < 0)
                calq__tensor_set_f64(yt, r * inner + j, p->extrapolation);
            else
                copy_elem(y + (size_t)(r * inner + j) * es, x + (size_t)(base + last[j]) * es, es);
        }
    }
    free(src);
    return CALQ_OK;
}

/* ---- linear / cubic: one axis at a time ----------------------------------------------------- */

/* Interpolated value of one output position from the taps at x[idx * stride]. */
static inline float rz_blend(const rz_taps *t, const float *x, int64_t stride)
{
    double acc = 0.0;
    for (int k = 0; k < t->n; k++) acc += t->w[k] * (double)x[t->idx[k] * stride];
    return (float)acc;
}

/* Resizes axis a of `x` (dims cur[]) into `y`: y[o][xo][i] = sum_t w_t * x[o][idx_t][i]. */
static void rz_axis_pass(const rz_params *p, int a, const int64_t *cur, const rz_taps *taps, const float *x, float *y)
{
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < a; i++) outer *= cur[i];
    for (int i = a + 1; i < p->rank; i++) inner *= cur[i];
    const int64_t nin = cur[a], nout = p->out[a];
    const float extra = (float)p->extrapolation;
    if (inner == 1) {
        /* The last axis: one output row per outer index, taps gathered along the row. */
#pragma omp parallel for schedule(static) if (outer * nout >= RZ_PAR_MIN)
        for (int64_t o = 0; o < outer; o++) {
            const float *xr = x + o * nin;
            float *yr = y + o * nout;
            for (int64_t j = 0; j < nout; j++) yr[j] = taps[j].outside ? extra : rz_blend(&taps[j], xr, 1);
        }
        return;
    }
    const int64_t rows = outer * nout;
#pragma omp parallel for schedule(static) if (rows * inner >= RZ_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const rz_taps *t = &taps[r % nout];
        const float *xo = x + (r / nout) * nin * inner;
        float *yr = y + r * inner;
        if (t->outside) {
            for (int64_t i = 0; i < inner; i++) yr[i] = extra;
            continue;
        }
        for (int64_t i = 0; i < inner; i++) yr[i] = rz_blend(t, xo + i, inner);
    }
}

/* True when axis a maps every output index onto the same input index with weight 1. */
static bool axis_is_identity(const rz_params *p, int a, const rz_taps *taps)
{
    if (p->out[a] != p->in[a]) return false;
    for (int64_t o = 0; o < p->out[a]; o++)
        if (taps[o].outside || taps[o].n != 1 || taps[o].idx[0] != o || taps[o].w[0] != 1.0) return false;
    return true;
}

static calq_status rz_run_interp(calq_op_ctx *c, const rz_params *p)
{
    const int R = p->rank;
    int64_t cur[CALQ_MAX_DIMS];
    for (int a = 0; a < R; a++) cur[a] = p->in[a];
    int64_t ymax = 0;
    rz_axis_taps at[CALQ_MAX_DIMS] = {{0}};
    rz_taps *taps[CALQ_MAX_DIMS] = {0};
    calq_status st = CALQ_OK;
    for (int a = 0; a < R && st == CALQ_OK; a++) {
        if (!calq__rz_axis_taps_make(p, a, &at[a]))
            st = calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory for resize tables");
        taps[a] = at[a].t;
    }
    /* Size of the largest intermediate, to allocate the ping-pong buffers once. */
    int pending = 0, passes[CALQ_MAX_DIMS];
    for (int a = R - 1; st == CALQ_OK && a >= 0; a--) {
        if (axis_is_identity(p, a, taps[a])) continue;
        passes[pending++] = a;
        cur[a] = p->out[a];
        int64_t n = calq__shape_numel(cur, R);
        if (n > ymax) ymax = n;
    }
    float *buf[2] = {NULL, NULL};
    if (st == CALQ_OK && pending > 1) {
        buf[0] = malloc(sizeof(float) * (size_t)(ymax + 1));
        buf[1] = pending > 2 ? malloc(sizeof(float) * (size_t)(ymax + 1)) : NULL;
        if (!buf[0] || (pending > 2 && !buf[1]))
            st = calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory for resize buffers");
    }
    if (st == CALQ_OK) {
        const float *x = c->in[0]->data;
        float *y = c->out[0]->data;
        if (pending == 0) memcpy(y, x, sizeof(float) * (size_t)calq_tensor_numel(c->in[0]));
        for (int a = 0; a < R; a++) cur[a] = p->in[a];
        const float *src = x;
        for (int k = 0; k < pending; k++) {
            int a = passes[k];
            float *dst = k == pending - 1 ? y : buf[k % 2];
            rz_axis_pass(p, a, cur, taps[a], src, dst);
            cur[a] = p->out[a];
            src = dst;
        }
    }
    free(buf[0]);
    free(buf[1]);
    for (int a = 0; a < R; a++) calq__rz_axis_taps_free(&at[a]);
    return st;
}

static calq_status rz_run(calq_op_ctx *c)
{
    rz_params p;
    CALQ_TRY(calq__rz_parse(c, &p));
    /* Infer rejected empty inputs with non-empty outputs, so every gathered index exists. */
    if (calq_tensor_numel(c->out[0]) == 0) return CALQ_OK;
    return p.mode == RZ_NEAREST ? rz_run_nearest(c, &p) : rz_run_interp(c, &p);
}

/* ---- the executor's layouts ------------------------------------------------------------------ */

/* A float32 [N, C, spatial...] input in the executor's layout, resized over the spatial axes only
 * (N and C map identically), runs on the physical views: the same per-axis passes over the
 * spatial axes (the channel axis, now last or split into blocks and lanes, maps identically), so
 * each output is computed exactly as on the plain tensor. */
typedef struct rz_layout_state {
    rz_params p; /* over the physical view's axes */
} rz_layout_state;

static bool rz_identity_axis(const rz_params *p, int a)
{
    if (p->out[a] != p->in[a]) return false;
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)(p->max_taps[a] + 1));
    double *w = malloc(sizeof(double) * (size_t)(p->max_taps[a] + 1));
    bool same = idx && w;
    for (int64_t o = 0; same && o < p->out[a]; o++) {
        rz_taps t = {.idx = idx, .w = w};
        calq__rz_make_taps(p, a, o, &t);
        same = !t.outside && t.n == 1 && t.idx[0] == o && t.w[0] == 1.0;
    }
    free(idx);
    free(w);
    return same;
}

/* Copies axis `from` of src into axis `to` of dst. */
static void rz_copy_axis(rz_params *dst, int to, const rz_params *src, int from)
{
    dst->in[to] = src->in[from];
    dst->out[to] = src->out[from];
    dst->scale[to] = src->scale[from];
    dst->out_len[to] = src->out_len[from];
    dst->roi_lo[to] = src->roi_lo[from];
    dst->roi_hi[to] = src->roi_hi[from];
    dst->max_taps[to] = src->max_taps[from];
}

static calq_status rz_prepare(calq_op_ctx *c)
{
    c->state = NULL;
    const calq_layout l = c->native;
    if (!c->in_layout || !c->out_layout || l == CALQ_LAYOUT_PLAIN || c->in_layout[0] != l) return CALQ_OK;
    const calq_tensor *x = c->in[0];
    if (x->dtype != CALQ_DTYPE_FLOAT32 || x->ndim < 3 || x->ndim > 5) return CALQ_OK;
    rz_params lp;
    CALQ_TRY(calq__rz_parse(c, &lp));
    if (!rz_identity_axis(&lp, 0) || !rz_identity_axis(&lp, 1)) return CALQ_OK;
    rz_layout_state *s = calloc(1, sizeof *s);
    if (!s) return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory");
    s->p = lp;
    const int r = lp.rank;
    if (l == CALQ_LAYOUT_CHANNELS_LAST) { /* [N, spatial..., C] */
        for (int a = 2; a < r; a++) rz_copy_axis(&s->p, a - 1, &lp, a);
        rz_copy_axis(&s->p, r - 1, &lp, 1);
    } else { /* [N, C/b, spatial..., b]: the block and lane axes map like C */
        s->p.rank = r + 1;
        rz_copy_axis(&s->p, r, &lp, 1);
        s->p.in[1] = s->p.out[1] = (lp.in[1] + l - 1) / l;
        s->p.in[r] = s->p.out[r] = l;
        s->p.out_len[1] = (double)s->p.out[1];
        s->p.out_len[r] = (double)l;
        if (!rz_identity_axis(&s->p, 1) || !rz_identity_axis(&s->p, r)) {
            free(s);
            return CALQ_OK;
        }
    }
    c->out_layout[0] = l;
    c->state = s;
    return CALQ_OK;
}

static calq_status rz_run_fast(calq_op_ctx *c)
{
    const rz_layout_state *s = c->state;
    calq_tensor xv, yv, *in[1] = {&xv}, *out[1] = {&yv};
    calq__layout_phys(c->in[0], c->in_layout[0], &xv);
    calq__layout_phys(c->out[0], c->out_layout[0], &yv);
    calq_op_ctx pc = *c;
    pc.in = in;
    pc.n_in = 1;
    pc.out = out;
    if (calq_tensor_numel(&yv) == 0) return CALQ_OK;
    return s->p.mode == RZ_NEAREST ? rz_run_nearest(&pc, &s->p) : rz_run_interp(&pc, &s->p);
}

static void rz_release(void *state)
{
    free(state);
}

const calq_op_def calq__ops_resize[] = {
    {.op_type = "Resize",
     .min_inputs = 1,
     .max_inputs = 4,
     .min_outputs = 1,
     .max_outputs = 1,
     .data_inputs = (1u << 1) | (1u << 2) | (1u << 3),
     .infer = rz_infer,
     .run = rz_run,
     .prepare = rz_prepare,
     .run_fast = rz_run_fast,
     .release = rz_release,
     .flags = CALQ_OP_LAYOUTS},
    {.op_type = "Upsample",
     .min_inputs = 1,
     .max_inputs = 2,
     .min_outputs = 1,
     .max_outputs = 1,
     .data_inputs = 1u << 1,
     .infer = rz_infer,
     .run = rz_run,
     .prepare = rz_prepare,
     .run_fast = rz_run_fast,
     .release = rz_release,
     .flags = CALQ_OP_LAYOUTS},
    {0},
};
