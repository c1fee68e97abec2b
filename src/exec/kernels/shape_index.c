/* Operators that pick input elements by computed indices: Gather, GatherElements and Pad
 * (whose reflect / edge / wrap modes map output positions back into the input). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernels/shape_common.h"
#include "exec/layout.h"

static bool is_index_dtype(calq_dtype t)
{
    return t == CALQ_DTYPE_INT32 || t == CALQ_DTYPE_INT64;
}

static int64_t index_at(const calq_tensor *t, int64_t i)
{
    return t->dtype == CALQ_DTYPE_INT32 ? ((const int32_t *)t->data)[i] : ((const int64_t *)t->data)[i];
}

/* Checks every index against [-n, n) before anything is written, so a bad index fails
 * cleanly instead of reading out of bounds. */
static calq_status check_indices(calq_op_ctx *c, const calq_tensor *ind, int axis, int64_t n)
{
    int64_t cnt = calq_tensor_numel(ind);
    for (int64_t i = 0; i < cnt; i++) {
        int64_t v = index_at(ind, i);
        if (v < -n || v >= n)
            return calq__op_fail(c, CALQ_ERR_DATA,
                                 "index %lld (element %lld of the indices) is out of range for axis %d of size %lld",
                                 (long long)v, (long long)i, axis, (long long)n);
    }
    return CALQ_OK;
}

/* ---- Gather -------------------------------------------------------------------------------- */

static calq_status gather_axis(calq_op_ctx *c, int *axis)
{
    const calq_tensor *x = c->in[0], *ind = c->in[1];
    if (!ind) return calq__op_fail(c, CALQ_ERR_SHAPE, "the indices (input 1) are missing");
    if (!is_index_dtype(ind->dtype))
        return calq__op_fail(c, CALQ_ERR_SHAPE, "the indices must be int32 or int64, got %s",
                             calq_dtype_name(ind->dtype));
    if (x->ndim == 0) return calq__op_fail(c, CALQ_ERR_SHAPE, "cannot gather from a scalar");
    int64_t av = calq__attr_int(c->node, "axis", 0);
    *axis = calq__norm_axis(av, x->ndim);
    if (*axis < 0)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "axis %lld is out of range for a %d-D input", (long long)av, x->ndim);
    return CALQ_OK;
}

calq_status calq__shp_gather_infer(calq_op_ctx *c)
{
    const calq_tensor *x = c->in[0], *ind = c->in[1];
    int axis;
    CALQ_TRY(gather_axis(c, &axis));
    int r = x->ndim - 1 + ind->ndim;
    if (r > CALQ_MAX_DIMS)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "the output would have %d dims, at most %d are supported", r,
                             CALQ_MAX_DIMS);
    int64_t dims[CALQ_MAX_DIMS];
    int k = 0;
    for (int i = 0; i < axis; i++) dims[k++] = x->dims[i];
    for (int i = 0; i < ind->ndim; i++) dims[k++] = ind->dims[i];
    for (int i = axis + 1; i < x->ndim; i++) dims[k++] = x->dims[i];
    calq__set_shape(c->out[0], x->dtype, dims, r);
    return CALQ_OK;
}

calq_status calq__shp_gather_run(calq_op_ctx *c)
{
    const calq_tensor *x = c->in[0], *ind = c->in[1];
    int axis;
    CALQ_TRY(gather_axis(c, &axis));
    int64_t n = x->dims[axis];
    CALQ_TRY(check_indices(c, ind, axis, n));
    int64_t es = (int64_t)calq_dtype_size(x->dtype), outer = 1, inner = es, nidx = calq_tensor_numel(ind);
    for (int i = 0; i < axis; i++) outer *= x->dims[i];
    for (int i = axis + 1; i < x->ndim; i++) inner *= x->dims[i];
    const char *src = x->data;
    char *dst = c->out[0]->data;
    int64_t items = outer * nidx;
    if (items == 0 || inner == 0) return CALQ_OK;
#pragma omp parallel for schedule(static) if (items * inner >= CALQ_SHP_PAR_BYTES)
    for (int64_t it = 0; it < items; it++) {
        int64_t o = it / nidx, v = index_at(ind, it % nidx);
        if (v < 0) v += n;
        memcpy(dst + it * inner, src + (o * n + v) * inner, (size_t)inner);
    }
    return CALQ_OK;
}

/* ---- GatherElements ------------------------------------------------------------------------ */

static calq_status gather_elements_axis(calq_op_ctx *c, int *axis)
{
    const calq_tensor *x = c->in[0], *ind = c->in[1];
    char a[96], b[96];
    CALQ_TRY(gather_axis(c, axis));
    if (ind->ndim != x->ndim)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "the indices have rank %d but the data has rank %d", ind->ndim,
                             x->ndim);
    for (int k = 0; k < x->ndim; k++)
        if (k != *axis && ind->dims[k] > x->dims[k])
            return calq__op_fail(c, CALQ_ERR_SHAPE, "indices shape %s exceeds data shape %s on axis %d",
                                 calq__shape_str(ind->dims, ind->ndim, a, sizeof a),
                                 calq__shape_str(x->dims, x->ndim, b, sizeof b), k);
    return CALQ_OK;
}

calq_status calq__shp_gather_elements_infer(calq_op_ctx *c)
{
    int axis;
    CALQ_TRY(gather_elements_axis(c, &axis));
    calq__set_shape(c->out[0], c->in[0]->dtype, c->in[1]->dims, c->in[1]->ndim);
    return CALQ_OK;
}

calq_status calq__shp_gather_elements_run(calq_op_ctx *c)
{
    const calq_tensor *x = c->in[0], *ind = c->in[1];
    int axis;
    CALQ_TRY(gather_elements_axis(c, &axis));
    int r = x->ndim;
    int64_t n = x->dims[axis];
    CALQ_TRY(check_indices(c, ind, axis, n));
    int64_t str[CALQ_MAX_DIMS];
    calq__shp_strides(x->dims, r, str);
    size_t es = calq_dtype_size(x->dtype);
    int64_t cnt = calq_tensor_numel(ind), ees = (int64_t)es;
    const char *src = x->data;
    char *dst = c->out[0]->data;
    /* Rows of the innermost dim share every coordinate but the last: one offset per row. */
    int64_t inner = ind->dims[r - 1], rows = inner ? cnt / inner : 0;
#pragma omp parallel for schedule(static) if (cnt * ees >= CALQ_SHP_PAR_BYTES)
    for (int64_t row = 0; row < rows; row++) {
        int64_t rem = row, base = 0;
        for (int k = r - 2; k >= 0; k--) {
            if (k != axis) base += (rem % ind->dims[k]) * str[k];
            rem /= ind->dims[k];
        }
        for (int64_t j = 0; j < inner; j++) {
            int64_t i = row * inner + j, v = index_at(ind, i);
            if (v < 0) v += n;
            int64_t off = base + v * str[axis] + (axis == r - 1 ? 0 : j);
            memcpy(dst + i * ees, src + off * ees, es);
        }
    }
    return CALQ_OK;
}

/* ---- Pad ----------------------------------------------------------------------------------- */

enum { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP };

/* Mode and per-axis begin/end pads (negative = crop). */
static calq_status pad_params(calq_op_ctx *c, int *mode, int64_t *pb, int64_t *pe)
{
    const calq_tensor *x = c->in[0];
    int r = x->ndim;
    const char *m = calq__attr_str(c->node, "mode", "constant");
    if (strcmp(m, "constant") == 0)
        *mode = PAD_CONSTANT;
    else if (strcmp(m, "reflect") == 0)
        *mode = PAD_REFLECT;
    else if (strcmp(m, "edge") == 0)
        *mode = PAD_EDGE;
    else if (strcmp(m, "wrap") == 0)
        *mode = PAD_WRAP;
    else
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "mode '%s' is not supported (constant, reflect, edge, wrap)", m);
    int64_t pads[2 * CALQ_MAX_DIMS], axes[CALQ_MAX_DIMS];
    int np, na = -1;
    if (c->opset < 11) {
        const int64_t *v;
        np = calq__attr_ints(c->node, "pads", &v);
        if (np < 0) return calq__op_fail(c, CALQ_ERR_SHAPE, "the 'pads' attribute is missing");
        if (np > 2 * CALQ_MAX_DIMS) return calq__op_fail(c, CALQ_ERR_SHAPE, "'pads' has too many values (%d)", np);
        for (int i = 0; i < np; i++) pads[i] = v[i];
    } else {
        CALQ_TRY(calq__shp_read_ints(c, 1, "pads (input 1)", pads, 2 * CALQ_MAX_DIMS, &np));
        if (c->n_in > 3 && c->in[3]) CALQ_TRY(calq__shp_read_ints(c, 3, "axes (input 3)", axes, CALQ_MAX_DIMS, &na));
    }
    int nax = na >= 0 ? na : r;
    if (np != 2 * nax)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "'pads' has %d values, %d expected (2 per padded axis)", np, 2 * nax);
    for (int k = 0; k < r; k++) pb[k] = pe[k] = 0;
    bool seen[CALQ_MAX_DIMS] = {false};
    for (int i = 0; i < nax; i++) {
        int a = na >= 0 ? calq__norm_axis(axes[i], r) : i;
        if (a < 0) return calq__op_fail(c, CALQ_ERR_SHAPE, "axis %lld is out of range", (long long)axes[i]);
        if (seen[a]) return calq__op_fail(c, CALQ_ERR_SHAPE, "axis %d is padded twice", a);
        seen[a] = true;
        pb[a] = pads[i];
        pe[a] = pads[i + nax];
    }
    return CALQ_OK;
}

calq_status calq__shp_pad_infer(calq_op_ctx *c)
{
    const calq_tensor *x = c->in[0];
    int mode;
    int64_t pb[CALQ_MAX_DIMS], pe[CALQ_MAX_DIMS], dims[CALQ_MAX_DIMS];
    CALQ_TRY(pad_params(c, &mode, pb, pe));
    bool empty_src = false;
    for (int k = 0; k < x->ndim; k++) {
        /* Each crop is bounded by the dim before anything is added, so the sums cannot overflow. */
        int64_t cb = pb[k] < 0 ? pb[k] : 0, ce = pe[k] < 0 ? pe[k] : 0, kept = -1;
        if (cb >= -x->dims[k] && ce >= -x->dims[k]) kept = x->dims[k] + cb + ce;
        if (kept < 0 || pb[k] > INT64_MAX / 4 || pe[k] > INT64_MAX / 4)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "pads %lld and %lld crop more than the %lld elements of axis %d",
                                 (long long)pb[k], (long long)pe[k], (long long)x->dims[k], k);
        dims[k] = x->dims[k] + pb[k] + pe[k];
        empty_src = empty_src || kept == 0;
        /* Reflection mirrors the kept part without repeating its edge, so it has kept - 1
         * positions to offer on each side. onnxruntime refuses larger pads ("Pad reflect:
         * pre-pad (3) exceeds maximum allowed (2)"), as does PyTorch's ReflectionPad (pad <
         * dim), whose exports these are; np.pad would reflect again. calq refuses them too,
         * so no model gives a result onnxruntime cannot reproduce. */
        int64_t most = pb[k] > pe[k] ? pb[k] : pe[k];
        if (mode == PAD_REFLECT && kept > 0 && most > 0 && most > kept - 1)
            return calq__op_fail(c, CALQ_ERR_SHAPE,
                                 "reflect pads %lld and %lld on axis %d exceed the %lld position(s) its %lld kept "
                                 "element(s) can mirror (at most dim - 1 per side, as onnxruntime and PyTorch's "
                                 "ReflectionPad require); use mode 'edge' or 'constant', or smaller pads",
                                 (long long)pb[k], (long long)pe[k], k, (long long)(kept - 1), (long long)kept);
    }
    if (c->opset >= 11 && c->n_in > 2 && c->in[2] && calq_tensor_numel(c->in[2]) > 1)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "constant_value (input 2) must be a scalar");
    if (mode != PAD_CONSTANT && empty_src && calq__shape_numel(dims, x->ndim) > 0)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "cannot pad in '%s' mode from an input with no elements",
                             calq__attr_str(c->node, "mode", ""));
    calq__set_shape(c->out[0], x->dtype, dims, x->ndim);
    return CALQ_OK;
}

/* Input coordinate for output coordinate o on an axis whose kept (uncropped) part has n
 * elements starting at input index `crop` after `lead` padded positions; -1 = constant. */
static int64_t pad_src(int mode, int64_t o, int64_t lead, int64_t n, int64_t crop)
{
    int64_t i = o - lead;
    if (i >= 0 && i < n) return i + crop;
    switch (mode) {
    case PAD_EDGE: i = i < 0 ? 0 : n - 1; break;
    case PAD_WRAP: i = ((i % n) + n) % n; break;
    case PAD_REFLECT:
        /* calq__shp_pad_infer bounds the pads by n - 1, so one mirror lands inside. */
        i = i < 0 ? -i : 2 * (n - 1) - i;
        break;
    default: return -1;
    }
    return i + crop;
}

/* The constant of a constant-mode Pad, in x's dtype, into cval. */
static void pad_constant(calq_op_ctx *c, unsigned char *cval)
{
    const calq_tensor *x = c->in[0];
    const size_t es = calq_dtype_size(x->dtype);
    memset(cval, 0, 16);
    const calq_tensor *cv = c->opset >= 11 && c->n_in > 2 ? c->in[2] : NULL;
    if (cv && calq_tensor_numel(cv) == 1 && cv->data) {
        calq_tensor tmp = {x->dtype, 0, {0}, cval};
        if (cv->dtype == x->dtype)
            memcpy(cval, cv->data, es);
        else
            calq__tensor_set_f64(&tmp, 0, calq__tensor_get_f64(cv, 0));
    } else if (c->opset < 11) {
        calq_tensor tmp = {x->dtype, 0, {0}, cval};
        calq__tensor_set_f64(&tmp, 0, calq__attr_float(c->node, "value", 0.0f));
    }
}

/* o = x padded by pb / pe (negative: cropped) in `mode`, constant cval. */
static void pad_tensor(const calq_tensor *x, const calq_tensor *o, int mode, const int64_t *pb, const int64_t *pe,
                       const unsigned char *cval)
{
    const int r = x->ndim;
    size_t es = calq_dtype_size(x->dtype);
    int64_t ees = (int64_t)es;
    if (calq_tensor_numel(o) == 0) return;
    if (r == 0) {
        memcpy(o->data, x->data, es);
        return;
    }
    int64_t lead[CALQ_MAX_DIMS], crop[CALQ_MAX_DIMS], kept[CALQ_MAX_DIMS], str[CALQ_MAX_DIMS];
    for (int k = 0; k < r; k++) {
        lead[k] = pb[k] > 0 ? pb[k] : 0;
        crop[k] = pb[k] < 0 ? -pb[k] : 0;
        kept[k] = x->dims[k] - crop[k] - (pe[k] < 0 ? -pe[k] : 0);
    }
    calq__shp_strides(x->dims, r, str);
    int64_t inner = o->dims[r - 1], rows = calq_tensor_numel(o) / inner;
    int64_t L = lead[r - 1], M = kept[r - 1], cc = crop[r - 1];
    const char *src = x->data;
    char *dst = o->data;
#pragma omp parallel for schedule(static) if (rows * inner * ees >= CALQ_SHP_PAR_BYTES)
    for (int64_t row = 0; row < rows; row++) {
        char *d = dst + row * inner * ees;
        int64_t rem = row, off = 0;
        bool constant = false;
        for (int k = r - 2; k >= 0; k--) {
            int64_t ic = pad_src(mode, rem % o->dims[k], lead[k], kept[k], crop[k]);
            rem /= o->dims[k];
            if (ic < 0) constant = true;
            off += ic * str[k];
        }
        if (constant) {
            calq__shp_fill(d, inner, cval, es);
            continue;
        }
        const char *s = src + off * ees;
        if (M > 0) memcpy(d + L * ees, s + cc * ees, (size_t)(M * ees));
        if (mode == PAD_CONSTANT) {
            calq__shp_fill(d, L, cval, es);
            calq__shp_fill(d + (L + M) * ees, inner - L - M, cval, es);
            continue;
        }
        for (int64_t j = 0; j < L; j++) memcpy(d + j * ees, s + pad_src(mode, j, L, M, cc) * ees, es);
        for (int64_t j = L + M; j < inner; j++) memcpy(d + j * ees, s + pad_src(mode, j, L, M, cc) * ees, es);
    }
}

calq_status calq__shp_pad_run(calq_op_ctx *c)
{
    int mode;
    int64_t pb[CALQ_MAX_DIMS], pe[CALQ_MAX_DIMS];
    unsigned char cval[16];
    CALQ_TRY(pad_params(c, &mode, pb, pe));
    pad_constant(c, cval);
    pad_tensor(c->in[0], c->out[0], mode, pb, pe, cval);
    return CALQ_OK;
}

/* The executor's layouts: a Pad of the spatial axes only (N and C untouched) is the same Pad of
 * the physical view's spatial axes, channels last ([N, spatial..., C]) or blocked ([N, C/b,
 * spatial..., b]), in any mode: every channel is padded alike. On blocked data the constant must
 * be 0 (the padding channels stay zero). Saves the two layout conversions around a plain Pad
 * (Inception's and DenseNet's Pad before an AveragePool; TensorFlow exports' Pad before a
 * strided convolution). */
typedef struct pad_state {
    int mode;
    int64_t pb[CALQ_MAX_DIMS], pe[CALQ_MAX_DIMS]; /* of the physical view */
    unsigned char cval[16];
} pad_state;

void calq__shp_pad_release(void *state)
{
    free(state);
}

calq_status calq__shp_pad_prepare(calq_op_ctx *c)
{
    c->state = NULL;
    const calq_layout l = c->native;
    if (!c->in_layout || !c->out_layout || l == CALQ_LAYOUT_PLAIN || c->in_layout[0] != l) return CALQ_OK;
    const calq_tensor *x = c->in[0];
    if (!calq__layout_blockable(x) || !calq__layout_blockable(c->out[0])) return CALQ_OK;
    int mode;
    int64_t pb[CALQ_MAX_DIMS], pe[CALQ_MAX_DIMS];
    CALQ_TRY(pad_params(c, &mode, pb, pe));
    if (pb[0] || pe[0] || pb[1] || pe[1]) return CALQ_OK;
    /* the constant is read here, once: not when it is computed at run time (a graph input, say) */
    if (c->opset >= 11 && c->n_in > 2 && c->in[2] && !(c->const_inputs & 4u)) return CALQ_OK;
    pad_state *s = calloc(1, sizeof *s);
    if (!s) return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory");
    s->mode = mode;
    pad_constant(c, s->cval);
    uint32_t bits; /* float32 (blockable): +0.0 only, so the padding channels stay all-zero bits */
    memcpy(&bits, s->cval, sizeof bits);
    if (l != CALQ_LAYOUT_CHANNELS_LAST && mode == PAD_CONSTANT && bits != 0) {
        free(s);
        return CALQ_OK;
    }
    const int nsp = x->ndim - 2, first = l == CALQ_LAYOUT_CHANNELS_LAST ? 1 : 2;
    for (int k = 0; k < nsp; k++) {
        s->pb[first + k] = pb[2 + k];
        s->pe[first + k] = pe[2 + k];
    }
    c->out_layout[0] = l;
    c->state = s;
    return CALQ_OK;
}

calq_status calq__shp_pad_run_fast(calq_op_ctx *c)
{
    const pad_state *s = c->state;
    calq_tensor xv, ov;
    calq__layout_phys(c->in[0], c->in_layout[0], &xv);
    calq__layout_phys(c->out[0], c->out_layout[0], &ov);
    pad_tensor(&xv, &ov, s->mode, s->pb, s->pe, s->cval);
    return CALQ_OK;
}
