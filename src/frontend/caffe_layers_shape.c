/* Caffe layers that move data without arithmetic, plus Softmax: Concat, Slice, Split,
 * Flatten, Reshape, Permute. Shapes that depend on the input size (Caffe nets reshape to any
 * input) are built from the bottom's Shape at run time; the planner folds those chains once the
 * input shapes are known. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/tensor.h"
#include "frontend/caffe.h"

/* Caffe's deprecated `<field>_dim` (non-negative only) wins over `axis` when present. */
static int legacy_axis(calq_caffe_ctx *c, const calq_caffe_layer *L, const calq_tp_node *p, const char *legacy,
                       int rank)
{
    int64_t axis;
    if (calq__caffe_count(p, legacy)) {
        if (calq__caffe_get_int(c, p, legacy, 1, &axis) != CALQ_OK) return -1;
        if (axis < 0 || axis >= rank) {
            calq__caffe_fail(c, L, CALQ_ERR_BAD_FORMAT, "%s %lld is outside the %d axes of its bottom", legacy,
                             (long long)axis, rank);
            return -1;
        }
        return (int)axis;
    }
    if (calq__caffe_get_int(c, p, "axis", 1, &axis) != CALQ_OK) return -1;
    return calq__caffe_axis(c, L, axis, rank, "axis");
}

calq_status calq__caffe_map_concat(calq_caffe_ctx *c, calq_caffe_layer *L)
{
    CALQ_TRY(calq__caffe_need_io(c, L, 1, -1, 1, 1));
    int r = calq__caffe_rank(c, L, 0);
    if (r < 0) return c->status;
    int a = legacy_axis(c, L, calq__caffe_param(L, "concat_param"), "concat_dim", r);
    if (a < 0) return c->status;
    calq_caffe_shape out = calq__caffe_shape(c, L->bottom[0]);
    for (int i = 1; i < L->n_bottom; i++) {
        const calq_caffe_shape s = calq__caffe_shape(c, L->bottom[i]);
        if (s.ndim >= 0 && s.ndim != r)
            return calq__caffe_fail(c, L, CALQ_ERR_SHAPE, "bottom '%s' has %d axes, bottom '%s' %d",
                                    c->g->values[L->bottom[0]].name, r, c->g->values[L->bottom[i]].name, s.ndim);
        out.dims[a] = out.dims[a] >= 0 && s.ndim == r && s.dims[a] >= 0 ? out.dims[a] + s.dims[a] : -1;
    }
    int y = calq__caffe_top(c, L, 0);
    int node = y < 0 ? -1 : calq__caffe_node(c, L, "Concat", NULL, true, L->bottom, L->n_bottom, &y, 1);
    if (node < 0 || calq__caffe_attr_int(c, node, "axis", a) != CALQ_OK) return c->status;
    calq__caffe_set_shape(c, y, &out);
    return CALQ_OK;
}

/* With slice_point: one ONNX Slice per top ([p(i-1), p(i)) along the axis; the last runs to
 * the end, whatever the input size). Without: equal parts, ONNX Split. */
calq_status calq__caffe_map_slice(calq_caffe_ctx *c, calq_caffe_layer *L)
{
    CALQ_TRY(calq__caffe_need_io(c, L, 1, 1, 1, -1));
    const calq_tp_node *p = calq__caffe_param(L, "slice_param");
    int r = calq__caffe_rank(c, L, 0);
    if (r < 0) return c->status;
    int a = legacy_axis(c, L, p, "slice_dim", r);
    if (a < 0) return c->status;
    int n_points = calq__caffe_count(p, "slice_point");
    const calq_caffe_shape xs = calq__caffe_shape(c, L->bottom[0]);
    int64_t dim = xs.dims[a];
    if (L->n_top == 1) return calq__caffe_map_split(c, L);
    if (n_points == 0) {
        if (dim > 0 && dim % L->n_top)
            return calq__caffe_fail(c, L, CALQ_ERR_SHAPE, "axis %d of size %lld does not split into %d equal parts", a,
                                    (long long)dim, L->n_top);
        int *ys = malloc(sizeof *ys * (size_t)L->n_top);
        if (!ys) return calq__caffe_oom(c);
        calq_status s = CALQ_OK;
        for (int i = 0; i < L->n_top && s == CALQ_OK; i++)
            if ((ys[i] = calq__caffe_top(c, L, i)) < 0) s = c->status;
        int node = s == CALQ_OK ? calq__caffe_node(c, L, "Split", NULL, true, L->bottom, 1, ys, L->n_top) : -1;
        if (node < 0 || calq__caffe_attr_int(c, node, "axis", a) != CALQ_OK) s = c->status;
        for (int i = 0; i < L->n_top && s == CALQ_OK; i++) {
            calq_caffe_shape ts = xs;
            ts.dims[a] = dim > 0 ? dim / L->n_top : -1;
            calq__caffe_set_shape(c, ys[i], &ts);
        }
        free(ys);
        return s;
    }
    if (n_points != L->n_top - 1)
        return calq__caffe_fail(c, L, CALQ_ERR_BAD_FORMAT, "%d slice_point values for %d tops (give %d)", n_points,
                                L->n_top, L->n_top - 1);
    int64_t prev = 0, axes = a;
    for (int i = 0; i < L->n_top; i++) {
        int64_t end = INT64_MAX;
        if (i < n_points) {
            CALQ_TRY(calq__caffe_get_int_at(c, p, "slice_point", i, &end));
            if (end <= prev || (dim > 0 && end >= dim))
                return calq__caffe_fail(c, L, CALQ_ERR_BAD_FORMAT,
                                        "slice_point %lld must increase and stay inside axis %d (size %lld)",
                                        (long long)end, a, (long long)dim);
        }
        char what[64];
        snprintf(what, sizeof what, "starts%d", i);
        int vs = calq__caffe_const_i64(c, L, what, &prev, 1);
        snprintf(what, sizeof what, "ends%d", i);
        int ve = calq__caffe_const_i64(c, L, what, &end, 1);
        snprintf(what, sizeof what, "axes%d", i);
        int va = calq__caffe_const_i64(c, L, what, &axes, 1);
        int y = vs < 0 || ve < 0 || va < 0 ? -1 : calq__caffe_top(c, L, i);
        int in[4] = {L->bottom[0], vs, ve, va};
        if (y < 0 || calq__caffe_node(c, L, "Slice", i ? L->top[i] : NULL, true, in, 4, &y, 1) < 0) return c->status;
        calq_caffe_shape ts = xs;
        ts.dims[a] = end != INT64_MAX ? end - prev : dim > 0 ? dim - prev : -1;
        calq__caffe_set_shape(c, y, &ts);
        prev = end;
    }
    return CALQ_OK;
}

/* Caffe's Split (inserted by Caffe itself, or written by hand) copies its bottom to every top. */
calq_status calq__caffe_map_split(calq_caffe_ctx *c, calq_caffe_layer *L)
{
    CALQ_TRY(calq__caffe_need_io(c, L, 1, 1, 1, -1));
    for (int i = 0; i < L->n_top; i++) {
        int y = calq__caffe_top(c, L, i);
        if (y < 0 || calq__caffe_node(c, L, "Identity", i ? L->top[i] : NULL, true, L->bottom, 1, &y, 1) < 0)
            return c->status;
        calq__caffe_copy_shape(c, y, L->bottom[0]);
    }
    return CALQ_OK;
}

/* Reshape bottom 0 to [x.shape[0:from], middle..., x.shape[to:]] into top 0 (the layer's own
 * node). ONNX Reshape copies a 0 in `middle` from the same axis of its input, which is Caffe's
 * rule for 0 too (middle starts at axis `from` in both). */
static calq_status reshape_to(calq_caffe_ctx *c, const calq_caffe_layer *L, int from, const int64_t *middle, int n,
                              int to, int r, const calq_caffe_shape *out)
{
    int x = L->bottom[0], shape;
    if (from == 0 && to == r) {
        shape = calq__caffe_const_i64(c, L, "shape", middle, n);
    } else {
        /* Axes outside [from, to) keep the bottom's dims; as ONNX 0s they would be copied from
         * the wrong positions once the rank changes, so take them from the bottom's Shape. */
        int parts[3], np = 0;
        if (from > 0) parts[np++] = calq__caffe_shape_slice(c, L, "lead", x, 0, from);
        parts[np++] = calq__caffe_const_i64(c, L, "middle", middle, n);
        if (to < r) parts[np++] = calq__caffe_shape_slice(c, L, "trail", x, to, r);
        for (int i = 0; i < np; i++)
            if (parts[i] < 0) return c->status;
        shape = calq__caffe_tmp(c, L, "shape");
        int node = shape < 0 ? -1 : calq__caffe_node(c, L, "Concat", "shape", false, parts, np, &shape, 1);
        if (node < 0 || calq__caffe_attr_int(c, node, "axis", 0) != CALQ_OK) return c->status;
    }
    int y = shape < 0 ? -1 : calq__caffe_top(c, L, 0);
    int in[2] = {x, shape};
    if (y < 0 || calq__caffe_node(c, L, "Reshape", NULL, true, in, 2, &y, 1) < 0) return c->status;
    calq__caffe_set_shape(c, y, out);
    return CALQ_OK;
}

/* Flatten folds axes [axis, end_axis] into one. */
calq_status calq__caffe_map_flatten(calq_caffe_ctx *c, calq_caffe_layer *L)
{
    CALQ_TRY(calq__caffe_need_io(c, L, 1, 1, 1, 1));
    const calq_tp_node *p = calq__caffe_param(L, "flatten_param");
    int r = calq__caffe_rank(c, L, 0);
    if (r < 0) return c->status;
    int64_t axis, end_axis;
    CALQ_TRY(calq__caffe_get_int(c, p, "axis", 1, &axis));
    CALQ_TRY(calq__caffe_get_int(c, p, "end_axis", -1, &end_axis));
    int a = calq__caffe_axis(c, L, axis, r, "axis");
    int e = a < 0 ? -1 : calq__caffe_axis(c, L, end_axis, r, "end_axis");
    if (e < 0) return c->status;
    if (e < a) return calq__caffe_fail(c, L, CALQ_ERR_BAD_FORMAT, "end_axis %d comes before axis %d", e, a);
    const calq_caffe_shape xs = calq__caffe_shape(c, L->bottom[0]);
    calq_caffe_shape out = {.ndim = r - (e - a)};
    for (int i = 0; i < r; i++) {
        if (i < a) out.dims[i] = xs.dims[i];
        if (i > e) out.dims[i - (e - a)] = xs.dims[i];
    }
    out.dims[a] = calq__caffe_numel(xs.dims + a, e - a + 1);
    int64_t middle[CALQ_MAX_DIMS];
    int n = 0;
    if (e == r - 1) {
        /* [0 x axis, -1]: the leading zeros copy the kept axes in place. */
        for (int i = 0; i < a; i++) middle[n++] = 0;
        middle[n++] = -1;
        return reshape_to(c, L, 0, middle, n, r, r, &out);
    }
    middle[n++] = -1;
    return reshape_to(c, L, a, middle, n, e + 1, r, &out);
}

/* reshape_param { shape { dim } axis num_axes }: dims replace bottom axes [axis, axis +
 * num_axes); 0 copies the bottom's dim, -1 is inferred (Caffe's ReshapeLayer). */
calq_status calq__caffe_map_reshape(calq_caffe_ctx *c, calq_caffe_layer *L)
{
    CALQ_TRY(calq__caffe_need_io(c, L, 1, 1, 1, 1));
    const calq_tp_node *p = calq__caffe_param(L, "reshape_param");
    const calq_tp_node *sp = p ? calq_tp_find(p, "shape") : NULL;
    int r = calq__caffe_rank(c, L, 0);
    if (r < 0) return c->status;
    int64_t axis, num_axes;
    CALQ_TRY(calq__caffe_get_int(c, p, "axis", 0, &axis));
    CALQ_TRY(calq__caffe_get_int(c, p, "num_axes", -1, &num_axes));
    int n = calq__caffe_count(sp, "dim");
    int64_t start = axis >= 0 ? axis : r + axis + 1; /* -1: after the last axis */
    int64_t end = num_axes == -1 ? r : start + num_axes;
    if (start < 0 || start > r || num_axes < -1 || end > r)
        return calq__caffe_fail(c, L, CALQ_ERR_BAD_FORMAT, "axis %lld / num_axes %lld do not fit a %d-axis bottom",
                                (long long)axis, (long long)num_axes, r);
    int out_rank = (int)(start + n + (r - end));
    if (out_rank > CALQ_MAX_DIMS)
        return calq__caffe_fail(c, L, CALQ_ERR_UNSUPPORTED, "the result would have %d axes; calq supports %d", out_rank,
                                CALQ_MAX_DIMS);
    const calq_caffe_shape xs = calq__caffe_shape(c, L->bottom[0]);
    int64_t dims[CALQ_MAX_DIMS];
    calq_caffe_shape out = {.ndim = out_rank};
    int infer = -1;
    int64_t total = calq__caffe_numel(xs.dims, r);
    for (int i = 0; i < n; i++) {
        CALQ_TRY(calq__caffe_get_int_at(c, sp, "dim", i, &dims[i]));
        if (dims[i] < -1 || (dims[i] == -1 && infer >= 0))
            return calq__caffe_fail(c, L, CALQ_ERR_BAD_FORMAT,
                                    "dim %lld is invalid (use positive dims, 0 to copy, one -1)", (long long)dims[i]);
        if (dims[i] == 0 && start + i >= r)
            return calq__caffe_fail(c, L, CALQ_ERR_BAD_FORMAT, "dim %d is 0 but the bottom has no axis %lld to copy", i,
                                    (long long)(start + i));
        if (dims[i] == -1) infer = (int)start + i;
        out.dims[start + i] = dims[i] == 0 ? xs.dims[start + i] : dims[i];
    }
    for (int i = 0; i < start; i++) out.dims[i] = xs.dims[i];
    for (int64_t i = end; i < r; i++) out.dims[start + n + (i - end)] = xs.dims[i];
    int64_t known = calq__caffe_numel(out.dims, out_rank);
    if (infer >= 0) {
        out.dims[infer] = 1;
        int64_t rest = calq__caffe_numel(out.dims, out_rank);
        out.dims[infer] = total >= 0 && rest > 0 && total % rest == 0 ? total / rest : -1;
    } else if (known >= 0 && total >= 0 && known != total) {
        char a[128], b[128];
        return calq__caffe_fail(c, L, CALQ_ERR_SHAPE, "cannot reshape %s (%lld values) into %s",
                                calq__shape_str(xs.dims, r, a, sizeof a), (long long)total,
                                calq__shape_str(out.dims, out_rank, b, sizeof b));
    }
    return reshape_to(c, L, (int)start, dims, n, (int)end, r, &out);
}

/* permute_param { order } (SSD's Permute): axes not listed follow in their original order. */
calq_status calq__caffe_map_permute(calq_caffe_ctx *c, calq_caffe_layer *L)
{
    CALQ_TRY(calq__caffe_need_io(c, L, 1, 1, 1, 1));
    const calq_tp_node *p = calq__caffe_param(L, "permute_param");
    int r = calq__caffe_rank(c, L, 0);
    if (r < 0) return c->status;
    int n = calq__caffe_count(p, "order");
    if (n > r) return calq__caffe_fail(c, L, CALQ_ERR_BAD_FORMAT, "%d order values for a %d-axis bottom", n, r);
    int64_t perm[CALQ_MAX_DIMS];
    bool used[CALQ_MAX_DIMS] = {false};
    for (int i = 0; i < n; i++) {
        CALQ_TRY(calq__caffe_get_int_at(c, p, "order", i, &perm[i]));
        if (perm[i] < 0 || perm[i] >= r || used[perm[i]])
            return calq__caffe_fail(c, L, CALQ_ERR_BAD_FORMAT,
                                    "order %lld is outside the %d axes of the bottom or repeated", (long long)perm[i],
                                    r);
        used[perm[i]] = true;
    }
    for (int i = 0; i < r; i++)
        if (!used[i]) perm[n++] = i;
    int y = calq__caffe_top(c, L, 0);
    int node = y < 0 ? -1 : calq__caffe_node(c, L, "Transpose", NULL, true, L->bottom, 1, &y, 1);
    if (node < 0 || calq__caffe_attr_ints(c, node, "perm", perm, r) != CALQ_OK) return c->status;
    const calq_caffe_shape xs = calq__caffe_shape(c, L->bottom[0]);
    calq_caffe_shape ys = {.ndim = r};
    for (int i = 0; i < r; i++) ys.dims[i] = xs.dims[perm[i]];
    calq__caffe_set_shape(c, y, &ys);
    return CALQ_OK;
}

/* Caffe's Softmax normalises along one axis, every other axis independent: ONNX opset 13. */
calq_status calq__caffe_map_softmax(calq_caffe_ctx *c, calq_caffe_layer *L)
{
    CALQ_TRY(calq__caffe_need_io(c, L, 1, 1, 1, 1));
    int r = calq__caffe_rank(c, L, 0);
    if (r < 0) return c->status;
    int64_t axis;
    CALQ_TRY(calq__caffe_get_int(c, calq__caffe_param(L, "softmax_param"), "axis", 1, &axis));
    int a = calq__caffe_axis(c, L, axis, r, "axis");
    if (a < 0) return c->status;
    int y = calq__caffe_top(c, L, 0);
    int node = y < 0 ? -1 : calq__caffe_node(c, L, "Softmax", NULL, true, L->bottom, 1, &y, 1);
    if (node < 0 || calq__caffe_attr_int(c, node, "axis", a) != CALQ_OK) return c->status;
    calq__caffe_copy_shape(c, y, L->bottom[0]);
    return CALQ_OK;
}

/* crop_param { axis (2) offset }: bottom 0 cut to bottom 1's dims from `axis` on, starting at
 * the offsets (one for every cropped axis, or one each): a Slice whose ends are offset +
 * bottom 1's dims, from its Shape (folded once the input size is known). */
calq_status calq__caffe_map_crop(calq_caffe_ctx *c, calq_caffe_layer *L)
{
    CALQ_TRY(calq__caffe_need_io(c, L, 2, 2, 1, 1));
    const calq_tp_node *p = calq__caffe_param(L, "crop_param");
    int r = calq__caffe_rank(c, L, 0);
    if (r < 0) return c->status;
    int64_t axis = 2;
    CALQ_TRY(calq__caffe_get_int(c, p, "axis", 2, &axis));
    int a = calq__caffe_axis(c, L, axis, r, "axis");
    if (a < 0) return c->status;
    int n_off = calq__caffe_count(p, "offset"), n = r - a;
    if (n_off != 0 && n_off != 1 && n_off != n)
        return calq__caffe_fail(c, L, CALQ_ERR_BAD_FORMAT, "%d offset values for %d cropped axes (give 0, 1 or %d)",
                                n_off, n, n);
    int64_t off[CALQ_MAX_DIMS], axes[CALQ_MAX_DIMS];
    for (int i = 0; i < n; i++) {
        off[i] = 0;
        if (n_off) CALQ_TRY(calq__caffe_get_int_at(c, p, "offset", n_off == 1 ? 0 : i, &off[i]));
        if (off[i] < 0)
            return calq__caffe_fail(c, L, CALQ_ERR_BAD_FORMAT, "offset %lld is negative", (long long)off[i]);
        axes[i] = a + i;
    }
    const calq_caffe_shape xs = calq__caffe_shape(c, L->bottom[0]), rs = calq__caffe_shape(c, L->bottom[1]);
    if (rs.ndim >= 0 && rs.ndim != r)
        return calq__caffe_fail(c, L, CALQ_ERR_SHAPE, "bottom 1 has %d axes, bottom 0 %d", rs.ndim, r);
    for (int i = 0; i < n; i++)
        if (xs.dims[a + i] >= 0 && rs.ndim == r && rs.dims[a + i] >= 0 && off[i] + rs.dims[a + i] > xs.dims[a + i])
            return calq__caffe_fail(c, L, CALQ_ERR_SHAPE, "axis %d: offset %lld + size %lld exceeds the bottom's %lld",
                                    a + i, (long long)off[i], (long long)rs.dims[a + i], (long long)xs.dims[a + i]);
    int size = calq__caffe_shape_slice(c, L, "size", L->bottom[1], a, r);
    int vs = size < 0 ? -1 : calq__caffe_const_i64(c, L, "starts", off, n);
    int ends = vs < 0 ? -1 : calq__caffe_binary(c, L, "Add", "ends", size, vs);
    int va = ends < 0 ? -1 : calq__caffe_const_i64(c, L, "axes", axes, n);
    int y = va < 0 ? -1 : calq__caffe_top(c, L, 0);
    int in[4] = {L->bottom[0], vs, ends, va};
    if (y < 0 || calq__caffe_node(c, L, "Slice", NULL, true, in, 4, &y, 1) < 0) return c->status;
    calq_caffe_shape ys = xs;
    for (int i = 0; i < n; i++) ys.dims[a + i] = rs.ndim == r ? rs.dims[a + i] : -1;
    calq__caffe_set_shape(c, y, &ys);
    return CALQ_OK;
}

/* PSPNet's Interp { height width | zoom_factor | shrink_factor }: bilinear with aligned corners
 * (Caffe's interp layer and OpenCV's reading of it), as ONNX Resize with sizes computed from the
 * bottom's Shape: zoom z gives in + (in - 1) (z - 1), shrink s gives (in - 1) / s + 1. */
calq_status calq__caffe_map_interp(calq_caffe_ctx *c, calq_caffe_layer *L)
{
    CALQ_TRY(calq__caffe_need_io(c, L, 1, 1, 1, 1));
    const calq_tp_node *p = calq__caffe_param(L, "interp_param");
    int r = calq__caffe_rank(c, L, 0);
    if (r < 0) return c->status;
    if (r != 4)
        return calq__caffe_fail(c, L, CALQ_ERR_UNSUPPORTED, "Interp resizes N x C x H x W bottoms, not %d axes", r);
    int64_t zoom = 1, shrink = 1, h = 0, w = 0, pb = 0, pe = 0;
    CALQ_TRY(calq__caffe_get_int(c, p, "zoom_factor", 1, &zoom));
    CALQ_TRY(calq__caffe_get_int(c, p, "shrink_factor", 1, &shrink));
    CALQ_TRY(calq__caffe_get_int(c, p, "height", 0, &h));
    CALQ_TRY(calq__caffe_get_int(c, p, "width", 0, &w));
    CALQ_TRY(calq__caffe_get_int(c, p, "pad_beg", 0, &pb));
    CALQ_TRY(calq__caffe_get_int(c, p, "pad_end", 0, &pe));
    if (pb || pe)
        return calq__caffe_fail(c, L, CALQ_ERR_UNSUPPORTED, "pad_beg / pad_end other than 0 are not supported");
    if (zoom < 1 || shrink < 1 || h < 0 || w < 0 || h > (1 << 24) || w > (1 << 24))
        return calq__caffe_fail(c, L, CALQ_ERR_BAD_FORMAT,
                                "zoom_factor / shrink_factor must be >= 1 and sizes positive");
    const calq_caffe_shape xs = calq__caffe_shape(c, L->bottom[0]);
    int x = L->bottom[0];
    int lead = calq__caffe_shape_slice(c, L, "lead", x, 0, 2), hw;
    if (lead < 0) return c->status;
    int64_t out[2] = {-1, -1};
    if (h && w) {
        int64_t v[2] = {h, w};
        hw = calq__caffe_const_i64(c, L, "hw", v, 2);
        out[0] = h, out[1] = w;
    } else {
        hw = calq__caffe_shape_slice(c, L, "in_hw", x, 2, 4);
        int64_t one = 1;
        int v1 = hw < 0 ? -1 : calq__caffe_const_i64(c, L, "one", &one, 1);
        if (shrink > 1) { /* (in - 1) / s + 1 */
            int vs = v1 < 0 ? -1 : calq__caffe_const_i64(c, L, "shrink", &shrink, 1);
            hw = vs < 0 ? -1 : calq__caffe_binary(c, L, "Sub", "in_m1", hw, v1);
            hw = hw < 0 ? -1 : calq__caffe_binary(c, L, "Div", "shrunk", hw, vs);
            hw = hw < 0 ? -1 : calq__caffe_binary(c, L, "Add", "shrunk_p1", hw, v1);
        }
        if (zoom > 1 && hw >= 0) { /* in + (in - 1)(z - 1) = z in - z + 1 */
            int64_t zm1 = zoom - 1;
            int vz = calq__caffe_const_i64(c, L, "zoom", &zoom, 1),
                vz1 = calq__caffe_const_i64(c, L, "zoom_m1", &zm1, 1);
            hw = vz < 0 || vz1 < 0 ? -1 : calq__caffe_binary(c, L, "Mul", "zoomed", hw, vz);
            hw = hw < 0 ? -1 : calq__caffe_binary(c, L, "Sub", "zoomed_m", hw, vz1);
        }
        for (int i = 0; i < 2; i++) {
            int64_t in = xs.ndim == 4 ? xs.dims[2 + i] : -1;
            out[i] = in > 0 ? ((in - 1) / shrink + 1 - 1) * zoom + 1 : -1;
        }
    }
    int sizes = hw < 0 ? -1 : calq__caffe_binary(c, L, "Concat", "sizes", lead, hw);
    if (sizes < 0 || calq__caffe_attr_int(c, c->g->n_nodes - 1, "axis", 0) != CALQ_OK) return c->status;
    const float none = 0;
    int64_t zero = 0;
    int roi = calq__caffe_const_typed(c, L, "roi", CALQ_DTYPE_FLOAT32, &none, &zero, 1);
    int scales = roi < 0 ? -1 : calq__caffe_const_typed(c, L, "scales", CALQ_DTYPE_FLOAT32, &none, &zero, 1);
    int y = scales < 0 ? -1 : calq__caffe_top(c, L, 0);
    int in[4] = {x, roi, scales, sizes};
    int ni = y < 0 ? -1 : calq__caffe_node(c, L, "Resize", NULL, true, in, 4, &y, 1);
    if (ni < 0 || calq__caffe_attr_string(c, ni, "mode", "linear") != CALQ_OK ||
        calq__caffe_attr_string(c, ni, "coordinate_transformation_mode", "align_corners") != CALQ_OK)
        return c->status;
    calq_caffe_shape ys = xs;
    ys.dims[2] = out[0];
    ys.dims[3] = out[1];
    calq__caffe_set_shape(c, y, &ys);
    return CALQ_OK;
}
