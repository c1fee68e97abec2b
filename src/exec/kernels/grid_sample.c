/* Sampling grids: AffineGrid (opset 20) makes them, GridSample uses them.
 *
 * GridSample over two spatial dims (opset 16; opset 20's names "linear" / "cubic" for the same
 * modes): X [N, C, H, W] sampled at grid [N, Ho, Wo, 2] (x, y in [-1, 1]). Reference kernel.
 *
 * The rules are PyTorch's grid_sample, which ONNX adopted: unnormalise (align_corners maps -1 and
 * 1 to the corner pixels' centres, otherwise to their outer edges), then for nearest / bilinear
 * apply the padding mode to the coordinate (border clamps, reflection mirrors at the edges) and
 * read zeros outside; bicubic applies the padding mode to each of its 4 x 4 taps instead. Nearest
 * rounds half to even (nearbyint). Output positions are independent: threads split them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernels/values.h"
#include "exec/op.h"

typedef enum { M_BILINEAR, M_NEAREST, M_BICUBIC } gs_mode;
typedef enum { P_ZEROS, P_BORDER, P_REFLECTION } gs_pad;

typedef struct gs_params {
    gs_mode mode;
    gs_pad pad;
    bool align;
} gs_params;

static calq_status gs_params_make(calq_op_ctx *c, gs_params *p)
{
    const calq_tensor *x = c->in[0], *g = c->in[1];
    if (!calq__dtype_is_float(x->dtype) || !calq__dtype_is_float(g->dtype))
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "X and grid must be float tensors");
    if (x->ndim != 4)
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED,
                             "calq samples 2 spatial dims (X is N x C x H x W); this X has %d dims", x->ndim);
    if (g->ndim != 4 || g->dims[0] != x->dims[0] || g->dims[3] != 2)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "the grid must be [N, H_out, W_out, 2] with X's batch");
    const char *m = calq__attr_str(c->node, "mode", c->opset >= 20 ? "linear" : "bilinear");
    const char *pm = calq__attr_str(c->node, "padding_mode", "zeros");
    if (strcmp(m, "bilinear") == 0 || strcmp(m, "linear") == 0)
        p->mode = M_BILINEAR;
    else if (strcmp(m, "nearest") == 0)
        p->mode = M_NEAREST;
    else if (strcmp(m, "bicubic") == 0 || strcmp(m, "cubic") == 0)
        p->mode = M_BICUBIC;
    else
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "mode '%s' is not bilinear/linear, nearest or bicubic/cubic", m);
    if (strcmp(pm, "zeros") == 0)
        p->pad = P_ZEROS;
    else if (strcmp(pm, "border") == 0)
        p->pad = P_BORDER;
    else if (strcmp(pm, "reflection") == 0)
        p->pad = P_REFLECTION;
    else
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "padding_mode '%s' is not zeros, border or reflection", pm);
    p->align = calq__attr_int(c->node, "align_corners", 0) != 0;
    return CALQ_OK;
}

static calq_status gs_infer(calq_op_ctx *c)
{
    gs_params p;
    CALQ_TRY(gs_params_make(c, &p));
    int64_t d[4] = {c->in[0]->dims[0], c->in[0]->dims[1], c->in[1]->dims[1], c->in[1]->dims[2]};
    calq__set_shape(c->out[0], c->in[0]->dtype, d, 4);
    return CALQ_OK;
}

static double unnormalize(double v, int64_t n, bool align)
{
    return align ? (v + 1.0) / 2.0 * (double)(n - 1) : ((v + 1.0) * (double)n - 1.0) / 2.0;
}

/* Mirrors v into [lo2/2, hi2/2] (bounds given doubled, so half-pixel edges stay exact). */
static double reflect(double v, double lo2, double hi2)
{
    if (lo2 == hi2) return 0.0;
    double lo = lo2 / 2.0, span = (hi2 - lo2) / 2.0;
    v = fabs(v - lo);
    double extra = fmod(v, span);
    /* parity in double: a grid value of 3e38 or NaN has no int64 count of flips (undefined
     * behaviour); NaN stays NaN, which pad_coord clamps */
    double flips = floor(v / span);
    return fmod(flips, 2.0) == 0.0 ? extra + lo : span - extra + lo;
}

static double pad_coord(double v, int64_t n, gs_pad pad, bool align)
{
    if (pad == P_BORDER) return fmin(fmax(v, 0.0), (double)(n - 1));
    if (pad == P_REFLECTION) {
        v = align ? reflect(v, 0.0, 2.0 * (double)(n - 1)) : reflect(v, -1.0, 2.0 * (double)n - 1.0);
        return fmin(fmax(v, 0.0), (double)(n - 1));
    }
    return v;
}

/* Plane value at integer (y, x), zero outside. */
static inline double at(const double *v, int64_t H, int64_t W, int64_t y, int64_t x)
{
    return y >= 0 && y < H && x >= 0 && x < W ? v[y * W + x] : 0.0;
}

/* Bicubic tap: the padding mode applies to the integer tap coordinate. */
static inline double tap(const double *v, int64_t H, int64_t W, int64_t y, int64_t x, const gs_params *p)
{
    if (p->pad != P_ZEROS) {
        y = (int64_t)pad_coord((double)y, H, p->pad, p->align);
        x = (int64_t)pad_coord((double)x, W, p->pad, p->align);
    }
    return at(v, H, W, y, x);
}

/* Cubic convolution weights for fraction t (A = -0.75, as PyTorch and onnxruntime). */
static void cubic_weights(double t, double *w)
{
    const double A = -0.75;
    double x0 = t + 1, x1 = t, x2 = 1 - t, x3 = 2 - t;
    w[0] = ((A * x0 - 5 * A) * x0 + 8 * A) * x0 - 4 * A;
    w[1] = ((A + 2) * x1 - (A + 3)) * x1 * x1 + 1;
    w[2] = ((A + 2) * x2 - (A + 3)) * x2 * x2 + 1;
    w[3] = ((A * x3 - 5 * A) * x3 + 8 * A) * x3 - 4 * A;
}

/* An integer coordinate as int64: a grid value of inf, NaN or 1e39 (zeros padding keeps it) has
 * none (undefined behaviour); beyond +-2^62 every tap is outside the plane anyway. */
static inline int64_t gs_index(double v)
{
    const double lim = 4611686018427387904.0; /* 2^62 */
    return v > -lim && v < lim ? (int64_t)v : v > 0 ? (int64_t)lim : -(int64_t)lim;
}

static double sample(const double *v, int64_t H, int64_t W, double gx, double gy, const gs_params *p)
{
    double x = unnormalize(gx, W, p->align), y = unnormalize(gy, H, p->align);
    if (p->mode == M_BICUBIC) {
        double fx = floor(x), fy = floor(y), wx[4], wy[4];
        cubic_weights(x - fx, wx);
        cubic_weights(y - fy, wy);
        double acc = 0.0;
        for (int i = 0; i < 4; i++) {
            double row = 0.0;
            for (int j = 0; j < 4; j++) row += wx[j] * tap(v, H, W, gs_index(fy) - 1 + i, gs_index(fx) - 1 + j, p);
            acc += wy[i] * row;
        }
        return acc;
    }
    x = pad_coord(x, W, p->pad, p->align);
    y = pad_coord(y, H, p->pad, p->align);
    if (p->mode == M_NEAREST) return at(v, H, W, gs_index(nearbyint(y)), gs_index(nearbyint(x)));
    double fx = floor(x), fy = floor(y), tx = x - fx, ty = y - fy;
    int64_t x0 = gs_index(fx), y0 = gs_index(fy);
    return (1 - ty) * ((1 - tx) * at(v, H, W, y0, x0) + tx * at(v, H, W, y0, x0 + 1)) +
           ty * ((1 - tx) * at(v, H, W, y0 + 1, x0) + tx * at(v, H, W, y0 + 1, x0 + 1));
}

static calq_status gs_run(calq_op_ctx *c)
{
    gs_params p;
    CALQ_TRY(gs_params_make(c, &p));
    const calq_tensor *x = c->in[0], *g = c->in[1];
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3], Ho = g->dims[1], Wo = g->dims[2];
    int64_t plane = H * W, opl = Ho * Wo;
    double *v = malloc(sizeof(double) * (size_t)(plane + 1)), *grid = malloc(sizeof(double) * (size_t)(2 * opl + 1));
    double *y = malloc(sizeof(double) * (size_t)(opl + 1));
    if (!v || !grid || !y) {
        free(v);
        free(grid);
        free(y);
        return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory");
    }
    for (int64_t n = 0; n < N; n++) {
        calq__k_load(g, n * 2 * opl, 1, 2 * opl, grid);
        for (int64_t ch = 0; ch < C; ch++) {
            calq__k_load(x, (n * C + ch) * plane, 1, plane, v);
#pragma omp parallel for schedule(static) if (opl > 4096)
            for (int64_t o = 0; o < opl; o++) y[o] = sample(v, H, W, grid[2 * o], grid[2 * o + 1], &p);
            calq__k_store(c->out[0], (n * C + ch) * opl, 1, opl, y);
        }
    }
    free(v);
    free(grid);
    free(y);
    return CALQ_OK;
}

/* ---- AffineGrid ------------------------------------------------------------------------------ */

/* theta [N, 2, 3] with size (N, C, H, W) gives grid [N, H, W, 2]; theta [N, 3, 4] with size
 * (N, C, D, H, W) gives [N, D, H, W, 3]. Grid point = theta * (x, y[, z], 1) for the normalised
 * pixel centres (align_corners: -1 and 1 on the corner pixels; otherwise on the outer edges). */
static calq_status ag_params(calq_op_ctx *c, int64_t *sz, int *nsp)
{
    const calq_tensor *th = c->in[0], *s = c->in[1];
    if (!calq__dtype_is_int(s->dtype) || s->ndim != 1 || (s->dims[0] != 4 && s->dims[0] != 5))
        return calq__op_fail(c, CALQ_ERR_SHAPE, "size must be (N, C, H, W) or (N, C, D, H, W)");
    if (!s->data) return calq__op_fail(c, CALQ_ERR_INTERNAL, "size is not known while inferring shapes");
    *nsp = (int)s->dims[0] - 2;
    for (int i = 0; i < s->dims[0]; i++) {
        sz[i] = calq__tensor_get_i64(s, i);
        if (sz[i] <= 0 || sz[i] > (1 << 24))
            return calq__op_fail(c, CALQ_ERR_SHAPE, "size[%d] = %lld is invalid", i, (long long)sz[i]);
    }
    if (!calq__dtype_is_float(th->dtype) || th->ndim != 3 || th->dims[0] != sz[0] || th->dims[1] != *nsp ||
        th->dims[2] != *nsp + 1)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "theta must be a float [N, %d, %d] tensor for this size", *nsp,
                             *nsp + 1);
    return CALQ_OK;
}

static calq_status ag_infer(calq_op_ctx *c)
{
    int64_t sz[5];
    int nsp = 2;
    CALQ_TRY(ag_params(c, sz, &nsp));
    int64_t d[5];
    d[0] = sz[0];
    for (int i = 0; i < nsp; i++) d[1 + i] = sz[2 + i];
    d[1 + nsp] = nsp;
    calq__set_shape(c->out[0], c->in[0]->dtype, d, nsp + 2);
    return CALQ_OK;
}

static calq_status ag_run(calq_op_ctx *c)
{
    int64_t sz[5];
    int nsp = 2;
    CALQ_TRY(ag_params(c, sz, &nsp));
    bool align = calq__attr_int(c->node, "align_corners", 0) != 0;
    int64_t pts = 1;
    for (int i = 0; i < nsp; i++) pts *= sz[2 + i];
    double th[12], out[3];
    for (int64_t n = 0; n < sz[0]; n++) {
        calq__k_load(c->in[0], n * nsp * (nsp + 1), 1, nsp * (nsp + 1), th);
        for (int64_t p = 0; p < pts; p++) {
            /* coordinates in x, y, z order: x runs along the last spatial dim */
            double v[4];
            int64_t rem = p;
            for (int k = 0; k < nsp; k++) {
                int64_t len = sz[2 + nsp - 1 - k], i = rem % len;
                rem /= len;
                v[k] = align ? (len > 1 ? -1.0 + 2.0 * (double)i / (double)(len - 1) : 0.0)
                             : (2.0 * (double)i + 1.0) / (double)len - 1.0;
            }
            v[nsp] = 1.0;
            for (int r = 0; r < nsp; r++) {
                out[r] = 0.0;
                for (int k = 0; k <= nsp; k++) out[r] += th[r * (nsp + 1) + k] * v[k];
            }
            calq__k_store(c->out[0], (n * pts + p) * nsp, 1, nsp, out);
        }
    }
    return CALQ_OK;
}

const calq_op_def calq__ops_grid_sample[] = {
    {"GridSample", 2, 2, 1, 1, 0, false, gs_infer, gs_run, NULL, NULL, NULL, 0},
    {"AffineGrid", 2, 2, 1, 1, 1u << 1, false, ag_infer, ag_run, NULL, NULL, NULL, 0},
    {0},
};
