/* Operators that copy blocks of their input to new places: Concat, Split, Slice, Transpose,
 * Expand, Tile, all built on whole-run memcpy where the layout allows it. */
#include <stdlib.h>
#include <string.h>

#include "exec/kernels/shape_common.h"
#include "exec/layout.h"

/* ---- strided copy -------------------------------------------------------------------------- */

/* n elements from s (every `stride` elements) to contiguous d. Fixed-size memcpy compiles to a
 * plain load/store and, unlike a typed pointer, makes no alignment assumption. */
static void copy_run(char *d, const char *s, int64_t n, int64_t stride, size_t es)
{
    if (stride == 1) {
        memcpy(d, s, (size_t)n * es);
        return;
    }
    int64_t bs = stride * (int64_t)es;
    switch (es) {
    case 1:
        for (int64_t i = 0; i < n; i++) d[i] = s[i * bs];
        break;
    case 2:
        for (int64_t i = 0; i < n; i++) memcpy(d + i * 2, s + i * bs, 2);
        break;
    case 4:
        for (int64_t i = 0; i < n; i++) memcpy(d + i * 4, s + i * bs, 4);
        break;
    case 8:
        for (int64_t i = 0; i < n; i++) memcpy(d + i * 8, s + i * bs, 8);
        break;
    default:
        for (int64_t i = 0; i < n; i++) memcpy(d + (size_t)i * es, s + i * bs, es);
        break;
    }
}

#define TILE 32

/* One TILE x TILE block of a transpose with a compile-time element size, so the per-element
 * memcpy becomes a single move. */
#define TILE_BLOCK(ES)                                                                                                 \
    for (int64_t a = a0; a < a1; a++)                                                                                  \
        for (int64_t b = b0; b < b1; b++) memcpy(d + (a * B + b) * (ES), s + (a + b * sb) * (ES), (ES))

/* Batches of A x B matrices where the source reads A with stride 1 and B with stride sb: the
 * classic transpose. Square tiles keep both the reads and the writes inside a few cache lines. */
static void tiled_transpose(char *dst, const char *src, int nb, const int64_t *bd, const int64_t *bs, int64_t A,
                            int64_t B, int64_t sb, size_t es)
{
    int64_t batches = 1, atiles = (A + TILE - 1) / TILE;
    for (int k = 0; k < nb; k++) batches *= bd[k];
    int64_t items = batches * atiles;
    int64_t ees = (int64_t)es;
#pragma omp parallel for schedule(static) if (batches * A * B * ees >= CALQ_SHP_PAR_BYTES)
    for (int64_t it = 0; it < items; it++) {
        int64_t bi = it / atiles, a0 = (it % atiles) * TILE, a1 = a0 + TILE < A ? a0 + TILE : A;
        int64_t off = 0, rem = bi;
        for (int k = nb - 1; k >= 0; k--) {
            off += (rem % bd[k]) * bs[k];
            rem /= bd[k];
        }
        const char *s = src + off * ees;
        char *d = dst + bi * A * B * ees;
        for (int64_t b0 = 0; b0 < B; b0 += TILE) {
            int64_t b1 = b0 + TILE < B ? b0 + TILE : B;
            switch (es) {
            case 1: TILE_BLOCK(1); break;
            case 2: TILE_BLOCK(2); break;
            case 4: TILE_BLOCK(4); break;
            case 8: TILE_BLOCK(8); break;
            default: TILE_BLOCK(ees); break;
            }
        }
    }
}

void calq__shp_strided_copy(void *dst, const void *src, int ndim, const int64_t *dims, const int64_t *strides,
                            size_t es)
{
    int64_t d[CALQ_MAX_DIMS], s[CALQ_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < ndim; i++) {
        if (dims[i] == 0) return;
        if (dims[i] == 1) continue;
        /* The outer dim steps over exactly the inner one: together they are one longer dim. */
        if (n > 0 && s[n - 1] == strides[i] * dims[i]) {
            d[n - 1] *= dims[i];
            s[n - 1] = strides[i];
        } else {
            d[n] = dims[i];
            s[n] = strides[i];
            n++;
        }
    }
    if (n == 0) {
        memcpy(dst, src, es);
        return;
    }
    int64_t inner = d[n - 1], istr = s[n - 1], rows = 1, ees = (int64_t)es;
    for (int k = 0; k < n - 1; k++) rows *= d[k];
    if (istr != 1 && n >= 2 && s[n - 2] == 1 && d[n - 2] >= 8) {
        tiled_transpose(dst, src, n - 2, d, s, d[n - 2], inner, istr, es);
        return;
    }
    int64_t bytes = rows * inner * ees;
    /* A fixed number of row chunks: each chunk walks its rows with an odometer instead of
     * dividing per row; the result is the same however the chunks land on threads. */
    int64_t chunks = bytes < CALQ_SHP_PAR_BYTES ? 1 : rows < 256 ? rows : 256;
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (int64_t ch = 0; ch < chunks; ch++) {
        int64_t r0 = rows * ch / chunks, r1 = rows * (ch + 1) / chunks;
        int64_t idx[CALQ_MAX_DIMS], off = 0, rem = r0;
        for (int k = n - 2; k >= 0; k--) {
            idx[k] = rem % d[k];
            rem /= d[k];
            off += idx[k] * s[k];
        }
        char *o = (char *)dst + r0 * inner * ees;
        for (int64_t r = r0; r < r1; r++) {
            copy_run(o, (const char *)src + off * ees, inner, istr, es);
            o += inner * ees;
            for (int k = n - 2; k >= 0; k--) {
                off += s[k];
                if (++idx[k] < d[k]) break;
                off -= s[k] * d[k];
                idx[k] = 0;
            }
        }
    }
}

/* Product of dims[from..to). */
static int64_t span(const int64_t *dims, int from, int to)
{
    int64_t p = 1;
    for (int i = from; i < to; i++) p *= dims[i];
    return p;
}

/* ---- Concat -------------------------------------------------------------------------------- */

static calq_status concat_axis(calq_op_ctx *c, int *axis)
{
    const calq_attr *a = calq__attr(c->node, "axis");
    /* Opset 1 defaulted the axis to 1; since opset 4 it is required. */
    if (!a && c->opset >= 4) return calq__op_fail(c, CALQ_ERR_SHAPE, "the 'axis' attribute is missing");
    int64_t v = a ? calq__attr_int(c->node, "axis", 1) : 1;
    int r = c->in[0]->ndim;
    if (r == 0) return calq__op_fail(c, CALQ_ERR_SHAPE, "cannot concatenate scalars");
    *axis = calq__norm_axis(v, r);
    if (*axis < 0)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "axis %lld is outside [-%d, %d] for %d-D inputs", (long long)v, r,
                             r - 1, r);
    return CALQ_OK;
}

calq_status calq__shp_concat_infer(calq_op_ctx *c)
{
    for (int i = 0; i < c->n_in; i++)
        if (!c->in[i]) return calq__op_fail(c, CALQ_ERR_SHAPE, "input %d is missing", i);
    int axis;
    CALQ_TRY(concat_axis(c, &axis));
    const calq_tensor *x0 = c->in[0];
    int64_t dims[CALQ_MAX_DIMS];
    for (int k = 0; k < x0->ndim; k++) dims[k] = x0->dims[k];
    dims[axis] = 0;
    for (int i = 0; i < c->n_in; i++) {
        const calq_tensor *t = c->in[i];
        char a[96], b[96];
        if (t->dtype != x0->dtype)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "input %d is %s but input 0 is %s", i, calq_dtype_name(t->dtype),
                                 calq_dtype_name(x0->dtype));
        bool ok = t->ndim == x0->ndim;
        for (int k = 0; ok && k < t->ndim; k++) ok = k == axis || t->dims[k] == x0->dims[k];
        if (!ok)
            return calq__op_fail(
                c, CALQ_ERR_SHAPE, "input %d has shape %s, which differs from input 0's %s outside axis %d", i,
                calq__shape_str(t->dims, t->ndim, a, sizeof a), calq__shape_str(x0->dims, x0->ndim, b, sizeof b), axis);
        dims[axis] += t->dims[axis];
    }
    calq__set_shape(c->out[0], x0->dtype, dims, x0->ndim);
    return CALQ_OK;
}

/* out = the inputs side by side along `axis` (every tensor dense, C order). */
static void concat_copy(calq_tensor *const *in, int n_in, const calq_tensor *o, int axis)
{
    int64_t es = (int64_t)calq_dtype_size(o->dtype);
    int64_t outer = span(o->dims, 0, axis), inner = span(o->dims, axis + 1, o->ndim) * es;
    int64_t row = o->dims[axis] * inner;
    char *dst = o->data;
    if (outer == 1) {
        for (int i = 0; i < n_in; i++) {
            int64_t nb = in[i]->dims[axis] * inner;
            if (nb) memcpy(dst, in[i]->data, (size_t)nb);
            dst += nb;
        }
        return;
    }
#pragma omp parallel for schedule(static) if (outer * row >= CALQ_SHP_PAR_BYTES)
    for (int64_t r = 0; r < outer; r++) {
        char *d = dst + r * row;
        for (int i = 0; i < n_in; i++) {
            int64_t nb = in[i]->dims[axis] * inner;
            if (nb) memcpy(d, (const char *)in[i]->data + r * nb, (size_t)nb);
            d += nb;
        }
    }
}

calq_status calq__shp_concat_run(calq_op_ctx *c)
{
    int axis = 0;
    CALQ_TRY(concat_axis(c, &axis));
    concat_copy(c->in, c->n_in, c->out[0], axis);
    return CALQ_OK;
}

/* With the executor's layouts: every input in the executor's layout (plain ones are converted)
 * and the output too, concatenated as their physical views, along the axis that holds the
 * logical one: the channel axis is the last one of a channels-last view, and a whole number of
 * blocks of a blocked one (so channels must come in whole blocks). */
typedef struct concat_state {
    int axis; /* in the physical views */
    calq_tensor *views;
    calq_tensor **ptrs;
} concat_state;

void calq__shp_concat_release(void *state)
{
    concat_state *s = state;
    if (!s) return;
    free(s->views);
    free(s->ptrs);
    free(s);
}

calq_status calq__shp_concat_prepare(calq_op_ctx *c)
{
    c->state = NULL;
    const calq_layout l = c->native;
    if (!c->in_layout || !c->out_layout || l == CALQ_LAYOUT_PLAIN) return CALQ_OK;
    int axis = 0;
    CALQ_TRY(concat_axis(c, &axis));
    const calq_tensor *o = c->out[0];
    if (!calq__layout_blockable(o)) return CALQ_OK;
    bool any = false;
    for (int i = 0; i < c->n_in; i++) {
        const calq_tensor *t = c->in[i];
        if (c->in_layout[i] != CALQ_LAYOUT_PLAIN && c->in_layout[i] != l) return CALQ_OK;
        if (!calq__layout_blockable(t) || t->ndim != o->ndim) return CALQ_OK;
        if (axis == 1 && l != CALQ_LAYOUT_CHANNELS_LAST && t->dims[1] % l != 0) return CALQ_OK;
        any = any || c->in_layout[i] == l;
    }
    if (!any) return CALQ_OK; /* all plain: the reference copies them as they are */
    concat_state *s = calloc(1, sizeof *s);
    if (s) {
        s->views = calloc((size_t)c->n_in + 1, sizeof *s->views);
        s->ptrs = calloc((size_t)c->n_in + 1, sizeof *s->ptrs);
    }
    if (!s || !s->views || !s->ptrs) {
        calq__shp_concat_release(s);
        return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory");
    }
    s->axis = l == CALQ_LAYOUT_CHANNELS_LAST ? (axis == 1 ? o->ndim - 1 : axis == 0 ? 0 : axis - 1) : axis;
    for (int i = 0; i < c->n_in; i++) c->in_layout[i] = l;
    c->out_layout[0] = l;
    c->state = s;
    return CALQ_OK;
}

calq_status calq__shp_concat_run_fast(calq_op_ctx *c)
{
    concat_state *s = c->state;
    calq_tensor out;
    for (int i = 0; i < c->n_in; i++) {
        calq__layout_phys(c->in[i], c->in_layout[i], &s->views[i]);
        s->ptrs[i] = &s->views[i];
    }
    calq__layout_phys(c->out[0], c->out_layout[0], &out);
    concat_copy(s->ptrs, c->n_in, &out, s->axis);
    return CALQ_OK;
}

/* ---- Split --------------------------------------------------------------------------------- */

/* Axis and the size of every output along it (sizes[c->n_out]). */
static calq_status split_sizes(calq_op_ctx *c, int *axis, int64_t *sizes)
{
    const calq_tensor *x = c->in[0];
    int64_t av = calq__attr_int(c->node, "axis", 0);
    *axis = calq__norm_axis(av, x->ndim);
    if (*axis < 0)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "axis %lld is out of range for a %d-D input", (long long)av, x->ndim);
    int64_t dim = x->dims[*axis];
    int n = -1, no = c->n_out;
    if (c->opset < 13) {
        const int64_t *v;
        n = calq__attr_ints(c->node, "split", &v);
        if (n > 0 && n != no) return calq__op_fail(c, CALQ_ERR_SHAPE, "'split' has %d sizes for %d outputs", n, no);
        if (n == 0) n = -1;
        for (int i = 0; i < n; i++) sizes[i] = v[i];
    } else if (c->n_in > 1 && c->in[1]) {
        CALQ_TRY(calq__shp_need_data(c, 1, "split (input 1)"));
        if (calq_tensor_numel(c->in[1]) != no)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "'split' (input 1) has %lld sizes for %d outputs",
                                 (long long)calq_tensor_numel(c->in[1]), no);
        CALQ_TRY(calq__shp_read_ints(c, 1, "split (input 1)", sizes, no, &n));
    }
    /* Opset 18: num_outputs says how many parts when there is no `split` input; it must agree
     * with the outputs the node has (ONNX: exactly one of the two is given). */
    const calq_attr *na = c->opset >= 18 ? calq__attr(c->node, "num_outputs") : NULL;
    if (na) {
        if (n >= 0) return calq__op_fail(c, CALQ_ERR_SHAPE, "has both a 'split' input and 'num_outputs'; give one");
        if (na->type != CALQ_ATTR_INT || na->i != no)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "'num_outputs' is %lld but the node has %d outputs",
                                 na->type == CALQ_ATTR_INT ? (long long)na->i : -1LL, no);
    }
    if (n < 0) {
        if (dim % no == 0) {
            for (int i = 0; i < no; i++) sizes[i] = dim / no;
        } else if (c->opset >= 18) {
            /* Opset 18: uneven splits make every part ceil(dim / n) but the last. */
            int64_t part = (dim + no - 1) / no, left = dim;
            for (int i = 0; i < no; i++) {
                sizes[i] = left < part ? left : part;
                left -= sizes[i];
            }
        } else {
            return calq__op_fail(c, CALQ_ERR_SHAPE, "axis %d of size %lld does not split into %d equal parts", *axis,
                                 (long long)dim, no);
        }
        return CALQ_OK;
    }
    int64_t sum = 0;
    for (int i = 0; i < no; i++) {
        if (sizes[i] < 0)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "split size %d is negative (%lld)", i, (long long)sizes[i]);
        /* held against what is left of the axis before adding: sizes of INT64_MAX overflowed the
         * sum (undefined behaviour), and (2^63 - 1, 2^63 - 1, 2) wrapped to 0, an empty axis's size */
        if (sizes[i] > dim - sum)
            return calq__op_fail(c, CALQ_ERR_SHAPE,
                                 "the split sizes add up to more than axis %d's size %lld (size %d is %lld)", *axis,
                                 (long long)dim, i, (long long)sizes[i]);
        sum += sizes[i];
    }
    if (sum != dim)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "the split sizes add up to %lld but axis %d has size %lld",
                             (long long)sum, *axis, (long long)dim);
    return CALQ_OK;
}

calq_status calq__shp_split_infer(calq_op_ctx *c)
{
    const calq_tensor *x = c->in[0];
    if (x->ndim == 0) return calq__op_fail(c, CALQ_ERR_SHAPE, "cannot split a scalar");
    int64_t *sizes = malloc(sizeof(int64_t) * (size_t)c->n_out);
    if (!sizes) return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory");
    int axis;
    calq_status s = split_sizes(c, &axis, sizes);
    for (int i = 0; s == CALQ_OK && i < c->n_out; i++) {
        if (!c->out[i]) continue;
        calq__set_shape(c->out[i], x->dtype, x->dims, x->ndim);
        c->out[i]->dims[axis] = sizes[i];
    }
    free(sizes);
    return s;
}

calq_status calq__shp_split_run(calq_op_ctx *c)
{
    const calq_tensor *x = c->in[0];
    int64_t *sizes = malloc(sizeof(int64_t) * (size_t)c->n_out);
    if (!sizes) return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory");
    int axis;
    calq_status s = split_sizes(c, &axis, sizes);
    if (s == CALQ_OK) {
        int64_t es = (int64_t)calq_dtype_size(x->dtype);
        int64_t outer = span(x->dims, 0, axis), inner = span(x->dims, axis + 1, x->ndim) * es;
        int64_t row = x->dims[axis] * inner;
        int no = c->n_out;
        calq_tensor *const *out = c->out;
        const char *src = x->data;
#pragma omp parallel for schedule(static) if (outer > 1 && outer * row >= CALQ_SHP_PAR_BYTES)
        for (int64_t r = 0; r < outer; r++) {
            const char *p = src + r * row;
            for (int i = 0; i < no; i++) {
                int64_t nb = sizes[i] * inner;
                if (nb && out[i]) memcpy((char *)out[i]->data + r * nb, p, (size_t)nb);
                p += nb;
            }
        }
    }
    free(sizes);
    return s;
}

/* ---- Slice --------------------------------------------------------------------------------- */

/* Per input dim: first index, step and element count, following the ONNX rules: negative
 * starts/ends count from the back, then both are clamped ([0, dim] for positive steps,
 * [0, dim-1] and [-1, dim-1] for negative ones), so INT64_MAX / INT64_MIN mean "to the end". */
static calq_status slice_params(calq_op_ctx *c, int64_t *start, int64_t *step, int64_t *count)
{
    const calq_tensor *x = c->in[0];
    int r = x->ndim;
    int64_t st[CALQ_MAX_DIMS], en[CALQ_MAX_DIMS], ax[CALQ_MAX_DIMS], sp[CALQ_MAX_DIMS];
    int ns, ne, na = -1, nsp = -1;
    for (int k = 0; k < r; k++) {
        start[k] = 0;
        step[k] = 1;
        count[k] = x->dims[k];
    }
    if (c->opset < 10) {
        const int64_t *vs, *ve, *va;
        ns = calq__attr_ints(c->node, "starts", &vs);
        ne = calq__attr_ints(c->node, "ends", &ve);
        na = calq__attr_ints(c->node, "axes", &va);
        if (ns < 0 || ne < 0) return calq__op_fail(c, CALQ_ERR_SHAPE, "the 'starts' or 'ends' attribute is missing");
        if (ns > CALQ_MAX_DIMS || ne > CALQ_MAX_DIMS || na > CALQ_MAX_DIMS)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "more than %d axes are sliced", CALQ_MAX_DIMS);
        for (int i = 0; i < ns; i++) st[i] = vs[i];
        for (int i = 0; i < ne; i++) en[i] = ve[i];
        for (int i = 0; i < na; i++) ax[i] = va[i];
    } else {
        CALQ_TRY(calq__shp_read_ints(c, 1, "starts (input 1)", st, CALQ_MAX_DIMS, &ns));
        CALQ_TRY(calq__shp_read_ints(c, 2, "ends (input 2)", en, CALQ_MAX_DIMS, &ne));
        if (c->n_in > 3 && c->in[3]) CALQ_TRY(calq__shp_read_ints(c, 3, "axes (input 3)", ax, CALQ_MAX_DIMS, &na));
        if (c->n_in > 4 && c->in[4]) CALQ_TRY(calq__shp_read_ints(c, 4, "steps (input 4)", sp, CALQ_MAX_DIMS, &nsp));
    }
    if (ne != ns) return calq__op_fail(c, CALQ_ERR_SHAPE, "%d starts but %d ends are given", ns, ne);
    if (na >= 0 && na != ns) return calq__op_fail(c, CALQ_ERR_SHAPE, "%d starts but %d axes are given", ns, na);
    if (nsp >= 0 && nsp != ns) return calq__op_fail(c, CALQ_ERR_SHAPE, "%d starts but %d steps are given", ns, nsp);
    bool seen[CALQ_MAX_DIMS] = {false};
    for (int i = 0; i < ns; i++) {
        int64_t araw = na >= 0 ? ax[i] : i;
        int a = calq__norm_axis(araw, r);
        if (a < 0)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "axis %lld is out of range for a %d-D input", (long long)araw, r);
        if (seen[a]) return calq__op_fail(c, CALQ_ERR_SHAPE, "axis %lld is sliced twice", (long long)araw);
        seen[a] = true;
        int64_t s = st[i], e = en[i], p = nsp >= 0 ? sp[i] : 1, dim = x->dims[a], n;
        if (p == 0) return calq__op_fail(c, CALQ_ERR_SHAPE, "the step for axis %d is 0", a);
        if (s < 0) s += dim;
        if (e < 0) e += dim;
        if (dim == 0) {
            s = 0;
            n = 0;
        } else if (p > 0) {
            s = s < 0 ? 0 : s > dim ? dim : s;
            e = e < 0 ? 0 : e > dim ? dim : e;
            n = e > s ? (e - s - 1) / p + 1 : 0;
        } else {
            s = s < 0 ? 0 : s > dim - 1 ? dim - 1 : s;
            e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
            /* -p overflows for INT64_MIN; the unsigned negation does not. */
            n = s > e ? (int64_t)((uint64_t)(s - e - 1) / ((uint64_t)0 - (uint64_t)p)) + 1 : 0;
        }
        start[a] = s;
        step[a] = p;
        count[a] = n;
    }
    return CALQ_OK;
}

calq_status calq__shp_slice_infer(calq_op_ctx *c)
{
    int64_t start[CALQ_MAX_DIMS], step[CALQ_MAX_DIMS], count[CALQ_MAX_DIMS];
    CALQ_TRY(slice_params(c, start, step, count));
    calq__set_shape(c->out[0], c->in[0]->dtype, count, c->in[0]->ndim);
    return CALQ_OK;
}

calq_status calq__shp_slice_run(calq_op_ctx *c)
{
    const calq_tensor *x = c->in[0];
    int64_t start[CALQ_MAX_DIMS], step[CALQ_MAX_DIMS], count[CALQ_MAX_DIMS], str[CALQ_MAX_DIMS];
    CALQ_TRY(slice_params(c, start, step, count));
    if (calq__shape_numel(count, x->ndim) == 0) return CALQ_OK;
    calq__shp_strides(x->dims, x->ndim, str);
    int64_t off = 0;
    for (int k = 0; k < x->ndim; k++) {
        off += start[k] * str[k];
        /* A step larger than the dim is fine: with count 1 the stride is never applied. */
        str[k] = count[k] > 1 ? str[k] * step[k] : 0;
    }
    size_t es = calq_dtype_size(x->dtype);
    calq__shp_strided_copy(c->out[0]->data, (const char *)x->data + off * (int64_t)es, x->ndim, count, str, es);
    return CALQ_OK;
}

/* ---- Transpose ----------------------------------------------------------------------------- */

static calq_status transpose_perm(calq_op_ctx *c, int *perm)
{
    int r = c->in[0]->ndim;
    const int64_t *p;
    int n = calq__attr_ints(c->node, "perm", &p);
    if (n < 0) {
        for (int i = 0; i < r; i++) perm[i] = r - 1 - i;
        return CALQ_OK;
    }
    if (n != r) return calq__op_fail(c, CALQ_ERR_SHAPE, "'perm' has %d entries for a %d-D input", n, r);
    bool seen[CALQ_MAX_DIMS] = {false};
    for (int i = 0; i < r; i++) {
        if (p[i] < 0 || p[i] >= r || seen[p[i]])
            return calq__op_fail(c, CALQ_ERR_SHAPE, "'perm' is not a permutation of 0..%d (entry %d is %lld)", r - 1, i,
                                 (long long)p[i]);
        seen[p[i]] = true;
        perm[i] = (int)p[i];
    }
    return CALQ_OK;
}

calq_status calq__shp_transpose_infer(calq_op_ctx *c)
{
    const calq_tensor *x = c->in[0];
    int perm[CALQ_MAX_DIMS];
    int64_t dims[CALQ_MAX_DIMS];
    CALQ_TRY(transpose_perm(c, perm));
    for (int i = 0; i < x->ndim; i++) dims[i] = x->dims[perm[i]];
    calq__set_shape(c->out[0], x->dtype, dims, x->ndim);
    return CALQ_OK;
}

calq_status calq__shp_transpose_run(calq_op_ctx *c)
{
    const calq_tensor *x = c->in[0];
    int perm[CALQ_MAX_DIMS];
    int64_t in_str[CALQ_MAX_DIMS], str[CALQ_MAX_DIMS];
    CALQ_TRY(transpose_perm(c, perm));
    calq__shp_strides(x->dims, x->ndim, in_str);
    for (int i = 0; i < x->ndim; i++) str[i] = in_str[perm[i]];
    calq__shp_strided_copy(c->out[0]->data, x->data, x->ndim, c->out[0]->dims, str, calq_dtype_size(x->dtype));
    return CALQ_OK;
}

/* ---- Expand -------------------------------------------------------------------------------- */

calq_status calq__shp_expand_infer(calq_op_ctx *c)
{
    const calq_tensor *x = c->in[0];
    int64_t shape[CALQ_MAX_DIMS], dims[CALQ_MAX_DIMS];
    int n, nd;
    char a[96], b[96];
    CALQ_TRY(calq__shp_read_ints(c, 1, "shape (input 1)", shape, CALQ_MAX_DIMS, &n));
    for (int i = 0; i < n; i++)
        if (shape[i] < 0)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "the shape %s has a negative dim",
                                 calq__shp_ints_str(shape, n, b, sizeof b));
    if (!calq__broadcast_shape(x->dims, x->ndim, shape, n, dims, &nd))
        return calq__op_fail(c, CALQ_ERR_SHAPE, "input shape %s does not broadcast with %s",
                             calq__shape_str(x->dims, x->ndim, a, sizeof a), calq__shp_ints_str(shape, n, b, sizeof b));
    if (calq__shape_numel(dims, nd) < 0) return calq__op_fail(c, CALQ_ERR_SHAPE, "the output would be too large");
    calq__set_shape(c->out[0], x->dtype, dims, nd);
    return CALQ_OK;
}

calq_status calq__shp_expand_run(calq_op_ctx *c)
{
    const calq_tensor *x = c->in[0], *o = c->out[0];
    int64_t str[CALQ_MAX_DIMS];
    calq__broadcast_strides(x->dims, x->ndim, o->ndim, str);
    calq__shp_strided_copy(o->data, x->data, o->ndim, o->dims, str, calq_dtype_size(x->dtype));
    return CALQ_OK;
}

/* ---- Tile ---------------------------------------------------------------------------------- */

calq_status calq__shp_tile_infer(calq_op_ctx *c)
{
    const calq_tensor *x = c->in[0];
    int64_t rep[CALQ_MAX_DIMS], dims[CALQ_MAX_DIMS];
    int n;
    CALQ_TRY(calq__shp_read_ints(c, 1, "repeats (input 1)", rep, CALQ_MAX_DIMS, &n));
    if (n != x->ndim) return calq__op_fail(c, CALQ_ERR_SHAPE, "'repeats' has %d values for a %d-D input", n, x->ndim);
    for (int i = 0; i < n; i++) {
        if (rep[i] < 0) return calq__op_fail(c, CALQ_ERR_SHAPE, "repeat %d is negative (%lld)", i, (long long)rep[i]);
        if (rep[i] && x->dims[i] > INT64_MAX / rep[i])
            return calq__op_fail(c, CALQ_ERR_SHAPE, "repeat %d makes the output too large", i);
        dims[i] = x->dims[i] * rep[i];
    }
    if (calq__shape_numel(dims, n) < 0) return calq__op_fail(c, CALQ_ERR_SHAPE, "the output would be too large");
    calq__set_shape(c->out[0], x->dtype, dims, n);
    return CALQ_OK;
}

calq_status calq__shp_tile_run(calq_op_ctx *c)
{
    const calq_tensor *x = c->in[0], *o = c->out[0];
    int r = x->ndim;
    int64_t es = (int64_t)calq_dtype_size(x->dtype);
    if (calq_tensor_numel(o) == 0) return CALQ_OK;
    if (r == 0) {
        memcpy(o->data, x->data, (size_t)es);
        return CALQ_OK;
    }
    int64_t in_str[CALQ_MAX_DIMS];
    calq__shp_strides(x->dims, r, in_str);
    int64_t rows = span(o->dims, 0, r - 1), row_in = x->dims[r - 1] * es, row_out = o->dims[r - 1] * es;
    int64_t reps = o->dims[r - 1] / x->dims[r - 1];
    const char *src = x->data;
    char *dst = o->data;
#pragma omp parallel for schedule(static) if (rows * row_out >= CALQ_SHP_PAR_BYTES)
    for (int64_t row = 0; row < rows; row++) {
        int64_t rem = row, off = 0;
        for (int k = r - 2; k >= 0; k--) {
            off += (rem % o->dims[k]) % x->dims[k] * in_str[k];
            rem /= o->dims[k];
        }
        /* The input row repeated `reps` times is a fill with a row-sized element. */
        calq__shp_fill(dst + row * row_out, reps, src + off * es, (size_t)row_in);
    }
    return CALQ_OK;
}
