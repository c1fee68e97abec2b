/* Resize / Upsample: the node's inputs and attributes (opsets 7-19) resolved into rz_params,
 * every value the kernels read validated here. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernels/resize.h"

/* Output lengths beyond this are rejected before converting from double (larger doubles do
 * not fit int64 exactly, and no real tensor is that long). */
#define RZ_MAX_LEN 4503599627370496.0 /* 2^52 */

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
         * double product of a scale like 0.35f and 20 falls just below 7). The double check above
         * does not cover it: a float64 scale of 1e300 on an empty axis, or a crop roi of
         * [-3e38, 3e38], overflow float32 (inf, or 0 * inf = NaN) and converting that to int64 was
         * undefined behaviour. */
        float lenf =
            fabs(span) <= FLT_MAX && p->scale[i] <= FLT_MAX ? (float)p->in[i] * (float)span * (float)p->scale[i] : NAN;
        if (!(lenf >= 0.0f) || lenf > (float)RZ_MAX_LEN)
            return calq__op_fail(c, CALQ_ERR_SHAPE,
                                 "output dimension %d: input %lld x roi span %g x scale %g is out of float32's range",
                                 i, (long long)p->in[i], span, p->scale[i]);
        p->out[i] = (int64_t)floorf(lenf);
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
calq_status calq__rz_parse(calq_op_ctx *c, rz_params *p)
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
