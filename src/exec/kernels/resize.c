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

#include "exec/layout.h"
#include "exec/op.h"

#define RZ_PAR_MIN 4096
/* Output lengths beyond this are rejected before converting from double (larger doubles do
 * not fit int64 exactly, and no real tensor is that long). */
#define RZ_MAX_LEN 4503599627370496.0 /* 2^52 */

typedef enum rz_mode { RZ_NEAREST, RZ_LINEAR, RZ_CUBIC } rz_mode;

typedef enum rz_coord {
    CT_HALF_PIXEL,
    CT_ASYMMETRIC,
    CT_PYTORCH_HALF_PIXEL,
    CT_ALIGN_CORNERS,
    CT_TF_HALF_PIXEL_FOR_NN,
    CT_TF_CROP_AND_RESIZE,
    CT_HALF_PIXEL_SYMMETRIC
} rz_coord;

typedef enum rz_round {
    NM_ROUND_PREFER_FLOOR,
    NM_ROUND_PREFER_CEIL,
    NM_FLOOR,
    NM_CEIL,
    NM_LEGACY /* Upsample and Resize-10: truncate when enlarging, ceil when shrinking (onnxruntime) */
} rz_round;

typedef struct rz_params {
    int rank;
    int64_t in[CALQ_MAX_DIMS], out[CALQ_MAX_DIMS];
    double scale[CALQ_MAX_DIMS];   /* output/input ratio in the coordinate formulas */
    double out_len[CALQ_MAX_DIMS]; /* resized length in the align_corners / crop formulas */
    double roi_lo[CALQ_MAX_DIMS], roi_hi[CALQ_MAX_DIMS];
    rz_mode mode;
    rz_coord coord;
    rz_round round;
    double cubic_a;
    bool exclude_outside;
    bool antialias;
    double extrapolation;
    int max_taps[CALQ_MAX_DIMS]; /* taps per output position on each axis */
} rz_params;

static const char *const coord_names[] = {"half_pixel",          "asymmetric",           "pytorch_half_pixel",
                                          "align_corners",       "tf_half_pixel_for_nn", "tf_crop_and_resize",
                                          "half_pixel_symmetric"};
static const char *const round_names[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};

static int find_name(const char *s, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0) return i;
    return -1;
}

/* An optional input counts as given when present and non-empty: opsets 11-12 pass an empty
 * tensor for "not used". */
static const calq_tensor *given(const calq_op_ctx *c, int i)
{
    if (i >= c->n_in || !c->in[i]) return NULL;
    return calq_tensor_numel(c->in[i]) == 0 ? NULL : c->in[i];
}

static calq_status need_data(calq_op_ctx *c, const calq_tensor *t, const char *what, int64_t count)
{
    if (!t->data)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "the %s input must be a constant (its values set the output shape)",
                             what);
    if (calq_tensor_numel(t) != count)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "%s has %lld values, expected %lld (one per resized axis)", what,
                             (long long)calq_tensor_numel(t), (long long)count);
    return CALQ_OK;
}

/* Reads scales from `t` (or the float list `attr`) for axes ax[0..n) (the others keep scale 1),
 * sets output lengths floor(in*scale). The align_corners / crop formulas keep the unrounded
 * in*scale as the resized length, as the ONNX reference implementation does (onnxruntime uses
 * the rounded length, so the two differ when in*scale is not whole, e.g.
 * test_resize_downsample_scales_linear_align_corners). */
static calq_status take_scales(calq_op_ctx *c, rz_params *p, const calq_tensor *t, const float *attr, const int *ax,
                               int n)
{
    for (int i = 0; i < p->rank; i++) p->scale[i] = 1.0;
    for (int k = 0; k < n; k++) {
        int i = ax[k];
        double s = t ? calq__tensor_get_f64(t, k) : (double)attr[k];
        if (!(s > 0.0) || !isfinite(s))
            return calq__op_fail(c, CALQ_ERR_SHAPE, "scale %d is %g; scales must be positive and finite", k, s);
        p->scale[i] = s;
    }
    for (int i = 0; i < p->rank; i++) {
        double span = p->coord == CT_TF_CROP_AND_RESIZE ? p->roi_hi[i] - p->roi_lo[i] : 1.0;
        double len = (double)p->in[i] * span * p->scale[i];
        if (!(len >= 0.0) || len > RZ_MAX_LEN)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "output dimension %d (%g) is out of range", i, len);
        p->out_len[i] = len;
        /* The length is rounded down from the float32 product, as onnxruntime computes it (the
         * double product of a scale like 0.35f and 20 falls just below 7). */
        p->out[i] = (int64_t)floorf((float)p->in[i] * (float)span * (float)p->scale[i]);
    }
    return CALQ_OK;
}

/* Sizes for axes ax[0..n) (the others keep their length). keep_aspect_ratio_policy (opset 18)
 * not_larger / not_smaller replaces the per-axis ratios by their minimum / maximum s over the
 * given axes and sizes them round_half_up(s * in), as the ONNX reference does. */
static calq_status take_sizes(calq_op_ctx *c, rz_params *p, const calq_tensor *t, const int *ax, int n)
{
    if (!calq__dtype_is_int(t->dtype))
        return calq__op_fail(c, CALQ_ERR_SHAPE, "sizes must be int64, got %s", calq_dtype_name(t->dtype));
    for (int i = 0; i < p->rank; i++) {
        p->out[i] = p->in[i];
        p->out_len[i] = (double)p->in[i];
        p->scale[i] = 1.0;
    }
    for (int k = 0; k < n; k++) {
        int i = ax[k];
        int64_t v = calq__tensor_get_i64(t, k);
        if (v < 0 || (double)v > RZ_MAX_LEN)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "sizes[%d] = %lld is out of range", k, (long long)v);
        p->out[i] = v;
        p->out_len[i] = (double)v;
        p->scale[i] = p->in[i] > 0 ? (double)v / (double)p->in[i] : 1.0;
    }
    const char *kp = c->opset >= 18 ? calq__attr_str(c->node, "keep_aspect_ratio_policy", "stretch") : "stretch";
    bool not_larger = strcmp(kp, "not_larger") == 0, not_smaller = strcmp(kp, "not_smaller") == 0;
    if (!not_larger && !not_smaller) {
        if (strcmp(kp, "stretch") != 0)
            return calq__op_fail(c, CALQ_ERR_SHAPE,
                                 "unknown keep_aspect_ratio_policy '%s' (stretch, not_larger, not_smaller)", kp);
        return CALQ_OK;
    }
    double s = p->scale[ax[0]];
    for (int k = 1; k < n; k++) s = not_larger ? fmin(s, p->scale[ax[k]]) : fmax(s, p->scale[ax[k]]);
    for (int k = 0; k < n; k++) {
        int i = ax[k];
        double len = s * (double)p->in[i];
        if (len > RZ_MAX_LEN) return calq__op_fail(c, CALQ_ERR_SHAPE, "output dimension %d is out of range", i);
        p->scale[i] = s;
        p->out_len[i] = len;
        p->out[i] = (int64_t)(len + 0.5);
    }
    return CALQ_OK;
}

/* Antialiasing stretches the filter by 1 / scale when shrinking: linear then reads
 * 2 - 2 * (floor(-1 / s) + 1) taps, cubic 2 - 2 * (floor(-2 / s) + 1) (the ONNX reference's
 * footprints). Scales below 1/1024 would need thousands of taps per output: refused. */
static int antialias_taps(const rz_params *p, int a)
{
    double s = p->scale[a];
    if (!p->antialias || s >= 1.0) return p->mode == RZ_CUBIC ? 4 : p->mode == RZ_LINEAR ? 2 : 1;
    int64_t start = (int64_t)floor((p->mode == RZ_CUBIC ? -2.0 : -1.0) / s) + 1;
    return (int)(2 - 2 * start);
}

static calq_status set_max_taps(calq_op_ctx *c, rz_params *p)
{
    for (int a = 0; a < p->rank; a++) {
        if (p->antialias && p->scale[a] < 1.0 / 1024)
            return calq__op_fail(c, CALQ_ERR_UNSUPPORTED,
                                 "antialiasing a scale of %g (axis %d) is not supported (1/1024 at least)", p->scale[a],
                                 a);
        p->max_taps[a] = antialias_taps(p, a);
    }
    return CALQ_OK;
}

/* Resolves mode, coordinate rules and output shape for Resize or Upsample at any supported
 * opset, validating every input the kernels later read. */
static calq_status rz_parse(calq_op_ctx *c, rz_params *p)
{
    const calq_tensor *x = c->in[0];
    bool upsample = strcmp(c->node->op_type, "Upsample") == 0;
    memset(p, 0, sizeof *p);
    if (upsample && c->opset < 7)
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "Upsample before opset 7 is not supported (opset %d)", c->opset);
    if (x->ndim < 1) return calq__op_fail(c, CALQ_ERR_SHAPE, "input must have rank >= 1");
    p->rank = x->ndim;
    for (int i = 0; i < x->ndim; i++) {
        if (x->dims[i] < 0) return calq__op_fail(c, CALQ_ERR_SHAPE, "input dimension %d is not known", i);
        p->in[i] = x->dims[i];
        p->roi_lo[i] = 0.0;
        p->roi_hi[i] = 1.0;
    }

    int all[CALQ_MAX_DIMS];
    for (int i = 0; i < p->rank; i++) all[i] = i;
    const char *mode = calq__attr_str(c->node, "mode", "nearest");
    bool legacy = upsample || c->opset < 11;
    if (strcmp(mode, "nearest") == 0)
        p->mode = RZ_NEAREST;
    else if (strcmp(mode, "linear") == 0 || (legacy && strcmp(mode, "bilinear") == 0))
        p->mode = RZ_LINEAR;
    else if (!legacy && strcmp(mode, "cubic") == 0)
        p->mode = RZ_CUBIC;
    else
        return calq__op_fail(c, CALQ_ERR_SHAPE, "unknown mode '%s' (nearest, linear%s)", mode,
                             legacy ? "" : " or cubic");
    if (p->mode != RZ_NEAREST && x->dtype != CALQ_DTYPE_FLOAT32)
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "%s mode supports float32 input only, got %s", mode,
                             calq_dtype_name(x->dtype));

    if (legacy) {
        /* Before Resize-11 the transform was fixed: output x reads input x / scale. */
        p->coord = CT_ASYMMETRIC;
        p->round = NM_LEGACY;
        if (upsample && c->opset < 9) {
            const float *sc;
            int n = calq__attr_floats(c->node, "scales", &sc);
            if (n < 0) return calq__op_fail(c, CALQ_ERR_SHAPE, "the scales attribute is required");
            if (n != p->rank)
                return calq__op_fail(c, CALQ_ERR_SHAPE, "scales has %d values, expected %d (one per input dimension)",
                                     n, p->rank);
            CALQ_TRY(take_scales(c, p, NULL, sc, all, p->rank));
            return set_max_taps(c, p);
        }
        if (c->n_in < 2 || !c->in[1]) return calq__op_fail(c, CALQ_ERR_SHAPE, "the scales input is required");
        CALQ_TRY(need_data(c, c->in[1], "scales", p->rank));
        CALQ_TRY(take_scales(c, p, c->in[1], NULL, all, p->rank));
        return set_max_taps(c, p);
    }

    const char *ct = calq__attr_str(c->node, "coordinate_transformation_mode", "half_pixel");
    int ci = find_name(ct, coord_names, (int)(sizeof coord_names / sizeof coord_names[0]));
    if (ci < 0) return calq__op_fail(c, CALQ_ERR_SHAPE, "unknown coordinate_transformation_mode '%s'", ct);
    p->coord = (rz_coord)ci;
    const char *nm = calq__attr_str(c->node, "nearest_mode", "round_prefer_floor");
    int ni = find_name(nm, round_names, (int)(sizeof round_names / sizeof round_names[0]));
    if (ni < 0) return calq__op_fail(c, CALQ_ERR_SHAPE, "unknown nearest_mode '%s'", nm);
    p->round = (rz_round)ni;
    p->cubic_a = calq__attr_float(c->node, "cubic_coeff_a", -0.75f);
    int64_t ex = calq__attr_int(c->node, "exclude_outside", 0);
    if (ex != 0 && ex != 1) return calq__op_fail(c, CALQ_ERR_SHAPE, "exclude_outside must be 0 or 1");
    p->exclude_outside = ex == 1;
    p->extrapolation = calq__attr_float(c->node, "extrapolation_value", 0.0f);
    if (!isfinite(p->cubic_a)) return calq__op_fail(c, CALQ_ERR_SHAPE, "cubic_coeff_a must be finite");

    /* Opset 18: roi, scales and sizes may list a subset of the axes. */
    int ax[CALQ_MAX_DIMS], n_ax = p->rank;
    memcpy(ax, all, sizeof ax);
    const int64_t *axv = NULL;
    int na = c->opset >= 18 ? calq__attr_ints(c->node, "axes", &axv) : -1;
    if (na >= 0) {
        bool seen[CALQ_MAX_DIMS] = {false};
        if (na > p->rank) return calq__op_fail(c, CALQ_ERR_SHAPE, "%d axes for a rank-%d input", na, p->rank);
        for (int k = 0; k < na; k++) {
            int a = calq__norm_axis(axv[k], p->rank);
            if (a < 0 || seen[a])
                return calq__op_fail(c, CALQ_ERR_SHAPE, "axis %lld is out of range or repeated", (long long)axv[k]);
            seen[a] = true;
            ax[k] = a;
        }
        n_ax = na;
    }
    int64_t aa = c->opset >= 18 ? calq__attr_int(c->node, "antialias", 0) : 0;
    if (aa != 0 && aa != 1) return calq__op_fail(c, CALQ_ERR_SHAPE, "antialias must be 0 or 1");
    p->antialias = aa == 1 && p->mode != RZ_NEAREST;

    if (p->coord == CT_TF_CROP_AND_RESIZE) {
        const calq_tensor *roi = given(c, 1);
        if (!roi) return calq__op_fail(c, CALQ_ERR_SHAPE, "tf_crop_and_resize needs the roi input");
        CALQ_TRY(need_data(c, roi, "roi", 2 * (int64_t)n_ax));
        for (int k = 0; k < n_ax; k++) {
            int i = ax[k];
            p->roi_lo[i] = calq__tensor_get_f64(roi, k);
            p->roi_hi[i] = calq__tensor_get_f64(roi, n_ax + k);
            if (!isfinite(p->roi_lo[i]) || !isfinite(p->roi_hi[i]))
                return calq__op_fail(c, CALQ_ERR_SHAPE, "roi values must be finite");
        }
    }
    const calq_tensor *scales = given(c, 2), *sizes = given(c, 3);
    if (scales && sizes) return calq__op_fail(c, CALQ_ERR_SHAPE, "only one of scales and sizes may be given");
    if (!scales && !sizes) return calq__op_fail(c, CALQ_ERR_SHAPE, "one of scales and sizes must be given");
    if (scales) {
        CALQ_TRY(need_data(c, scales, "scales", n_ax));
        CALQ_TRY(take_scales(c, p, scales, NULL, ax, n_ax));
    } else {
        CALQ_TRY(need_data(c, sizes, "sizes", n_ax));
        CALQ_TRY(take_sizes(c, p, sizes, ax, n_ax));
    }
    return set_max_taps(c, p);
}

static calq_status rz_infer(calq_op_ctx *c)
{
    rz_params p;
    CALQ_TRY(rz_parse(c, &p));
    if (calq__shape_numel(p.out, p.rank) < 0) return calq__op_fail(c, CALQ_ERR_SHAPE, "output is too large");
    for (int a = 0; a < p.rank; a++)
        if (p.in[a] == 0 && p.out[a] > 0)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "cannot resize an empty dimension (%d) to %lld", a,
                                 (long long)p.out[a]);
    calq__set_shape(c->out[0], c->in[0]->dtype, p.out, p.rank);
    return CALQ_OK;
}

/* ---- coordinate mapping ------------------------------------------------------------------- */

/* Source coordinate of output index `xo` on axis a, as in the ONNX reference; *outside is set
 * when tf_crop_and_resize maps it beyond the input (the extrapolation value is used). */
static double rz_source(const rz_params *p, int a, int64_t xo, bool *outside)
{
    double x = (double)xo, in = (double)p->in[a], s = p->scale[a], len = p->out_len[a];
    *outside = false;
    switch (p->coord) {
    case CT_HALF_PIXEL: return (x + 0.5) / s - 0.5;
    case CT_ASYMMETRIC: return x / s;
    case CT_PYTORCH_HALF_PIXEL: return len == 1.0 ? -0.5 : (x + 0.5) / s - 0.5;
    case CT_ALIGN_CORNERS: return len == 1.0 ? 0.0 : x * (in - 1.0) / (len - 1.0);
    case CT_TF_HALF_PIXEL_FOR_NN: return (x + 0.5) / s;
    case CT_HALF_PIXEL_SYMMETRIC: {
        /* Centres the implicit roi in the output: differs from half_pixel only when the
         * output length was rounded (out_len = in * scale is not whole). */
        double adjust = len > 0.0 ? (double)p->out[a] / len : 1.0;
        return in / 2.0 * (1.0 - adjust) + (x + 0.5) / s - 0.5;
    }
    case CT_TF_CROP_AND_RESIZE: {
        double lo = p->roi_lo[a], hi = p->roi_hi[a], v;
        v = len == 1.0 ? (hi - lo) * (in - 1.0) / 2.0 : x * (hi - lo) * (in - 1.0) / (len - 1.0);
        v += lo * (in - 1.0);
        *outside = v < 0.0 || v > in - 1.0;
        return v;
    }
    }
    return x;
}

static int64_t clamp_idx(double v, int64_t n)
{
    if (v <= 0.0) return 0;
    if (v >= (double)(n - 1)) return n - 1;
    return (int64_t)v;
}

static int64_t rz_nearest(const rz_params *p, int a, double v)
{
    double f = floor(v), r = v - f;
    double pick;
    switch (p->round) {
    case NM_ROUND_PREFER_FLOOR: pick = r <= 0.5 ? f : f + 1.0; break;
    case NM_ROUND_PREFER_CEIL: pick = r < 0.5 ? f : f + 1.0; break;
    case NM_FLOOR: pick = f; break;
    case NM_CEIL: pick = ceil(v); break;
    default: pick = p->scale[a] < 1.0 ? ceil(v) : trunc(v); break;
    }
    return clamp_idx(pick, p->in[a]);
}

/* The (index, weight) taps of one output position on one axis: up to p->max_taps[a] of them,
 * in idx[] / w[] (storage the caller provides). */
typedef struct rz_taps {
    int64_t *idx;
    double *w;
    int n;
    bool outside;
} rz_taps;

/* Antialiased taps (the ONNX reference): with base = ceil(v) - 1 and r = v - base in (0, 1],
 * tap base + i weighs f(s * (i - r)) for the triangle (linear) or Keys cubic (cubic) kernel f,
 * normalised to sum 1; taps beyond the edges read the edge (or, with exclude_outside, are
 * dropped and the rest renormalised). */
static void rz_antialias_taps(const rz_params *p, int a, double v, rz_taps *t)
{
    double s = p->scale[a] < 1.0 ? p->scale[a] : 1.0, A = p->cubic_a, sum = 0.0;
    double base = ceil(v) - 1.0, r = v - base;
    bool cubic = p->mode == RZ_CUBIC;
    int64_t start = (int64_t)floor((cubic ? -2.0 : -1.0) / s) + 1;
    int n = p->max_taps[a];
    double w[4096];
    for (int k = 0; k < n; k++) {
        double d = fabs(s * ((double)(start + k) - r)), f;
        if (cubic)
            f = d <= 1.0  ? ((A + 2) * d - (A + 3)) * d * d + 1
                : d < 2.0 ? ((A * d - 5 * A) * d + 8 * A) * d - 4 * A
                          : 0.0;
        else
            f = d < 1.0 ? 1.0 - d : 0.0;
        w[k] = f;
        sum += f;
    }
    for (int k = 0; k < n && sum != 0.0; k++) w[k] /= sum;
    if (p->exclude_outside) {
        sum = 0.0;
        for (int k = 0; k < n; k++) {
            double pos = base + (double)(start + k);
            if (pos < 0 || pos >= (double)p->in[a]) w[k] = 0.0;
            sum += w[k];
        }
        for (int k = 0; k < n && sum != 0.0; k++) w[k] /= sum;
    }
    t->n = 0;
    for (int k = 0; k < n; k++) {
        if (w[k] == 0.0) continue;
        t->idx[t->n] = clamp_idx(base + (double)(start + k), p->in[a]);
        t->w[t->n] = w[k];
        t->n++;
    }
}

static void rz_make_taps(const rz_params *p, int a, int64_t xo, rz_taps *t)
{
    double v = rz_source(p, a, xo, &t->outside);
    t->n = 0;
    if (t->outside) return;
    if (p->antialias && p->scale[a] < 1.0) {
        rz_antialias_taps(p, a, v, t);
        return;
    }
    /* Every tap beyond the edges clamps to the edge anyway; bounding v keeps the integer
     * conversions below defined whatever the attributes. */
    if (!(v >= -2.0)) v = -2.0;
    if (v > (double)p->in[a] + 2.0) v = (double)p->in[a] + 2.0;
    if (p->mode == RZ_NEAREST) {
        t->idx[0] = rz_nearest(p, a, v);
        t->w[0] = 1.0;
        t->n = 1;
        return;
    }
    double f = floor(v), r = v - f, w[4];
    int64_t base = (int64_t)f, first, n;
    if (p->mode == RZ_LINEAR) {
        w[0] = 1.0 - r;
        w[1] = r;
        first = base;
        n = 2;
    } else {
        /* Keys cubic convolution with coefficient A, taps base-1 .. base+2. */
        double A = p->cubic_a, q = 1.0 - r;
        w[0] = ((A * (r + 1.0) - 5.0 * A) * (r + 1.0) + 8.0 * A) * (r + 1.0) - 4.0 * A;
        w[1] = ((A + 2.0) * r - (A + 3.0)) * r * r + 1.0;
        w[2] = ((A + 2.0) * q - (A + 3.0)) * q * q + 1.0;
        w[3] = ((A * (q + 1.0) - 5.0 * A) * (q + 1.0) + 8.0 * A) * (q + 1.0) - 4.0 * A;
        first = base - 1;
        n = 4;
        if (p->exclude_outside) {
            double sum = 0.0;
            for (int k = 0; k < 4; k++) {
                if (first + k < 0 || first + k >= p->in[a]) w[k] = 0.0;
                sum += w[k];
            }
            if (sum != 0.0)
                for (int k = 0; k < 4; k++) w[k] /= sum;
        }
    }
    for (int k = 0; k < n; k++) {
        if (w[k] == 0.0) continue; /* exact zeros (integer source coordinates) cost nothing */
        t->idx[t->n] = clamp_idx((double)(first + k), p->in[a]);
        t->w[t->n] = w[k];
        t->n++;
    }
}

/* Taps of every output position of one axis, with their storage. */
typedef struct rz_axis_taps {
    rz_taps *t;
    int64_t *idx;
    double *w;
} rz_axis_taps;

static void axis_taps_free(rz_axis_taps *at)
{
    free(at->t);
    free(at->idx);
    free(at->w);
}

static bool axis_taps_make(const rz_params *p, int a, rz_axis_taps *at)
{
    int64_t n = p->out[a], m = p->max_taps[a] > 0 ? p->max_taps[a] : 1;
    at->t = malloc(sizeof(rz_taps) * (size_t)(n + 1));
    at->idx = malloc(sizeof(int64_t) * (size_t)(n * m + 1));
    at->w = malloc(sizeof(double) * (size_t)(n * m + 1));
    if (!at->t || !at->idx || !at->w) {
        axis_taps_free(at);
        return false;
    }
    for (int64_t o = 0; o < n; o++) {
        at->t[o].idx = at->idx + o * m;
        at->t[o].w = at->w + o * m;
        rz_make_taps(p, a, o, &at->t[o]);
    }
    return true;
}

/* ---- nearest: a gather, any dtype --------------------------------------------------------- */

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
            rz_make_taps(p, a, o, &t);
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
        if (!axis_taps_make(p, a, &at[a]))
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
    for (int a = 0; a < R; a++) axis_taps_free(&at[a]);
    return st;
}

static calq_status rz_run(calq_op_ctx *c)
{
    rz_params p;
    CALQ_TRY(rz_parse(c, &p));
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
        rz_make_taps(p, a, o, &t);
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
    CALQ_TRY(rz_parse(c, &lp));
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
