/* Shape and data-movement operators: the helpers they share, the ops that only relabel a
 * tensor's shape (Reshape, Flatten, Squeeze, Unsqueeze), the ops that describe shapes (Shape,
 * Size), constants (Constant, ConstantOfShape, Range) and the op table. The copying ops live in
 * shape_copy.c, the indexing ones (Gather, GatherElements, Pad) in shape_index.c. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "exec/kernels/shape_common.h"

/* ---- shared helpers ------------------------------------------------------------------------ */

calq_status calq__shp_need_data(calq_op_ctx *c, int i, const char *what)
{
    if (i >= c->n_in || !c->in[i]) return calq__op_fail(c, CALQ_ERR_SHAPE, "the %s is missing", what);
    /* The executor promises data for every input in data_inputs; reaching this is its bug. */
    if (!c->in[i]->data && calq_tensor_numel(c->in[i]) != 0)
        return calq__op_fail(c, CALQ_ERR_INTERNAL, "the %s is not known while inferring shapes", what);
    return CALQ_OK;
}

calq_status calq__shp_read_ints(calq_op_ctx *c, int i, const char *what, int64_t *vals, int max, int *n)
{
    CALQ_TRY(calq__shp_need_data(c, i, what));
    const calq_tensor *t = c->in[i];
    if (!calq__dtype_is_int(t->dtype))
        return calq__op_fail(c, CALQ_ERR_SHAPE, "the %s must be an integer tensor, got %s", what,
                             calq_dtype_name(t->dtype));
    if (t->ndim > 1) {
        char b[96];
        return calq__op_fail(c, CALQ_ERR_SHAPE, "the %s must be 1-D, got shape %s", what,
                             calq__shape_str(t->dims, t->ndim, b, sizeof b));
    }
    int64_t cnt = calq_tensor_numel(t);
    if (cnt < 0 || cnt > max)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "the %s has %lld values, at most %d are allowed", what, (long long)cnt,
                             max);
    for (int64_t k = 0; k < cnt; k++) vals[k] = calq__tensor_get_i64(t, k);
    *n = (int)cnt;
    return CALQ_OK;
}

char *calq__shp_ints_str(const int64_t *v, int n, char *buf, size_t len)
{
    if (n == 0) {
        snprintf(buf, len, "scalar");
        return buf;
    }
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < n && at < len; i++) {
        int w = snprintf(buf + at, len - at, "%s%lld", i ? "x" : "", (long long)v[i]);
        if (w < 0) break;
        at += (size_t)w;
    }
    return buf;
}

void calq__shp_strides(const int64_t *dims, int ndim, int64_t *strides)
{
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        strides[i] = s;
        s *= dims[i];
    }
}

void calq__shp_fill(void *dst, int64_t n, const void *elem, size_t es)
{
    if (n <= 0) return;
    unsigned char *d = dst;
    bool zero = true;
    for (size_t b = 0; b < es; b++) zero = zero && ((const unsigned char *)elem)[b] == 0;
    if (zero) {
        memset(d, 0, (size_t)n * es);
        return;
    }
    /* Doubling: each memcpy copies everything written so far, so n elements take log2(n) calls. */
    memcpy(d, elem, es);
    size_t done = es, total = (size_t)n * es;
    while (done < total) {
        size_t k = done < total - done ? done : total - done;
        memcpy(d + done, d, k);
        done += k;
    }
}

/* Copies the whole input to the output: the ops that only relabel the shape. */
static calq_status copy_through(calq_op_ctx *c)
{
    size_t nb = calq__tensor_nbytes(c->in[0]);
    if (nb && c->out[0]->data != c->in[0]->data) memcpy(c->out[0]->data, c->in[0]->data, nb);
    return CALQ_OK;
}

/* ---- Reshape ------------------------------------------------------------------------------- */

static calq_status reshape_infer(calq_op_ctx *c)
{
    const calq_tensor *x = c->in[0];
    int64_t req[CALQ_MAX_DIMS], dims[CALQ_MAX_DIMS];
    int n;
    CALQ_TRY(calq__shp_read_ints(c, 1, "shape (input 1)", req, CALQ_MAX_DIMS, &n));
    bool allowzero = calq__attr_int(c->node, "allowzero", 0) != 0;
    int64_t total = calq_tensor_numel(x), known = 1;
    int minus_one = -1;
    bool has_zero = false;
    char a[128], b[128];
    calq__shape_str(x->dims, x->ndim, a, sizeof a);
    calq__shp_ints_str(req, n, b, sizeof b);
    for (int i = 0; i < n; i++) {
        int64_t v = req[i];
        if (v == 0 && !allowzero) {
            if (i >= x->ndim)
                return calq__op_fail(
                    c, CALQ_ERR_SHAPE,
                    "cannot turn %s into %s: dim %d is 0 (copy input dim %d) but the input has %d dims", a, b, i, i,
                    x->ndim);
            v = x->dims[i];
        }
        if (v == -1) {
            if (minus_one >= 0)
                return calq__op_fail(c, CALQ_ERR_SHAPE, "cannot turn %s into %s: more than one dim is -1", a, b);
            minus_one = i;
            continue;
        }
        if (v < -1) return calq__op_fail(c, CALQ_ERR_SHAPE, "cannot turn %s into %s: dim %d is negative", a, b, i);
        if (v == 0) has_zero = true;
        if (v != 0 && known > INT64_MAX / v)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "cannot turn %s into %s: too many elements", a, b);
        known *= v;
        dims[i] = v;
    }
    if (minus_one >= 0) {
        if (allowzero && has_zero)
            return calq__op_fail(c, CALQ_ERR_SHAPE,
                                 "cannot turn %s into %s: with allowzero=1 a shape may not hold both 0 and -1", a, b);
        if (known == 0 || total % known != 0)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "cannot turn %s (%lld elements) into %s", a, (long long)total, b);
        dims[minus_one] = total / known;
    } else if (known != total) {
        return calq__op_fail(c, CALQ_ERR_SHAPE, "cannot turn %s (%lld elements) into %s (%lld elements)", a,
                             (long long)total, b, (long long)known);
    }
    calq__set_shape(c->out[0], x->dtype, dims, n);
    return CALQ_OK;
}

/* ---- Flatten ------------------------------------------------------------------------------- */

static calq_status flatten_infer(calq_op_ctx *c)
{
    const calq_tensor *x = c->in[0];
    int64_t axis = calq__attr_int(c->node, "axis", 1);
    if (axis < -x->ndim || axis > x->ndim)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "axis %lld is outside [-%d, %d] for a %d-D input", (long long)axis,
                             x->ndim, x->ndim, x->ndim);
    if (axis < 0) axis += x->ndim;
    int64_t dims[2] = {calq__shape_numel(x->dims, (int)axis), calq__shape_numel(x->dims + axis, x->ndim - (int)axis)};
    calq__set_shape(c->out[0], x->dtype, dims, 2);
    return CALQ_OK;
}

/* ---- Squeeze / Unsqueeze ------------------------------------------------------------------- */

/* The axes of Squeeze/Unsqueeze: the 'axes' attribute before opset 13, input 1 since.
 * *n = -1 when absent. */
static calq_status read_axes(calq_op_ctx *c, int64_t *axes, int max, int *n)
{
    *n = -1;
    if (c->opset < 13) {
        const int64_t *v;
        int k = calq__attr_ints(c->node, "axes", &v);
        if (k > max) return calq__op_fail(c, CALQ_ERR_SHAPE, "%d axes given, at most %d are allowed", k, max);
        for (int i = 0; i < k; i++) axes[i] = v[i];
        *n = k;
        return CALQ_OK;
    }
    if (c->n_in < 2 || !c->in[1]) return CALQ_OK;
    return calq__shp_read_ints(c, 1, "axes (input 1)", axes, max, n);
}

static calq_status squeeze_infer(calq_op_ctx *c)
{
    const calq_tensor *x = c->in[0];
    int64_t axes[CALQ_MAX_DIMS], dims[CALQ_MAX_DIMS];
    int n;
    bool drop[CALQ_MAX_DIMS] = {false};
    char b[96];
    CALQ_TRY(read_axes(c, axes, CALQ_MAX_DIMS, &n));
    /* An empty axes list squeezes every 1-dim, as onnxruntime does (the spec leaves it open). */
    if (n <= 0) {
        for (int i = 0; i < x->ndim; i++) drop[i] = x->dims[i] == 1;
    } else {
        for (int i = 0; i < n; i++) {
            int a = calq__norm_axis(axes[i], x->ndim);
            if (a < 0)
                return calq__op_fail(c, CALQ_ERR_SHAPE, "axis %lld is out of range for input shape %s",
                                     (long long)axes[i], calq__shape_str(x->dims, x->ndim, b, sizeof b));
            if (drop[a]) return calq__op_fail(c, CALQ_ERR_SHAPE, "axis %lld is given twice", (long long)axes[i]);
            if (x->dims[a] != 1)
                return calq__op_fail(c, CALQ_ERR_SHAPE, "cannot squeeze axis %d of input shape %s: its size is not 1",
                                     a, calq__shape_str(x->dims, x->ndim, b, sizeof b));
            drop[a] = true;
        }
    }
    int k = 0;
    for (int i = 0; i < x->ndim; i++)
        if (!drop[i]) dims[k++] = x->dims[i];
    calq__set_shape(c->out[0], x->dtype, dims, k);
    return CALQ_OK;
}

static calq_status unsqueeze_infer(calq_op_ctx *c)
{
    const calq_tensor *x = c->in[0];
    int64_t axes[CALQ_MAX_DIMS], dims[CALQ_MAX_DIMS];
    int n;
    bool ins[CALQ_MAX_DIMS] = {false};
    CALQ_TRY(read_axes(c, axes, CALQ_MAX_DIMS, &n));
    if (n < 0) return calq__op_fail(c, CALQ_ERR_SHAPE, "the axes are missing");
    int r = x->ndim + n;
    if (r > CALQ_MAX_DIMS)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "the output would have %d dims, at most %d are supported", r,
                             CALQ_MAX_DIMS);
    for (int i = 0; i < n; i++) {
        int a = calq__norm_axis(axes[i], r);
        if (a < 0)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "axis %lld is outside [-%d, %d] for a %d-D output",
                                 (long long)axes[i], r, r - 1, r);
        if (ins[a]) return calq__op_fail(c, CALQ_ERR_SHAPE, "axis %lld is given twice", (long long)axes[i]);
        ins[a] = true;
    }
    for (int i = 0, j = 0; i < r; i++) dims[i] = ins[i] ? 1 : x->dims[j++];
    calq__set_shape(c->out[0], x->dtype, dims, r);
    return CALQ_OK;
}

/* ---- Shape / Size -------------------------------------------------------------------------- */

/* Opset 15's start/end: negative counts from the back, both clamped to [0, rank]. */
static void shape_range(const calq_op_ctx *c, int64_t *start, int64_t *len)
{
    int r = c->in[0]->ndim;
    int64_t s = calq__attr_int(c->node, "start", 0), e = calq__attr_int(c->node, "end", r);
    if (s < 0) s += r;
    if (e < 0) e += r;
    s = s < 0 ? 0 : s > r ? r : s;
    e = e < 0 ? 0 : e > r ? r : e;
    *start = s;
    *len = e > s ? e - s : 0;
}

static calq_status shape_infer(calq_op_ctx *c)
{
    int64_t s, n;
    shape_range(c, &s, &n);
    calq__set_shape(c->out[0], CALQ_DTYPE_INT64, &n, 1);
    return CALQ_OK;
}

static calq_status shape_run(calq_op_ctx *c)
{
    int64_t s, n;
    shape_range(c, &s, &n);
    int64_t *o = c->out[0]->data;
    for (int64_t i = 0; i < n; i++) o[i] = c->in[0]->dims[s + i];
    return CALQ_OK;
}

static calq_status size_infer(calq_op_ctx *c)
{
    calq__set_shape(c->out[0], CALQ_DTYPE_INT64, NULL, 0);
    return CALQ_OK;
}

static calq_status size_run(calq_op_ctx *c)
{
    *(int64_t *)c->out[0]->data = calq_tensor_numel(c->in[0]);
    return CALQ_OK;
}

/* ---- Constant ------------------------------------------------------------------------------ */

static calq_status constant_infer(calq_op_ctx *c)
{
    const calq_node *nd = c->node;
    const calq_attr *a;
    if ((a = calq__attr(nd, "value")) != NULL) {
        if (a->type != CALQ_ATTR_TENSOR || !a->t)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "the 'value' attribute is not a tensor");
        const calq_tensor *t = a->t;
        if (calq_dtype_size(t->dtype) == 0)
            return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "the 'value' tensor has an unsupported dtype");
        if (calq_tensor_numel(t) < 0 || t->ndim > CALQ_MAX_DIMS)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "the 'value' tensor has an invalid shape");
        if (!t->data && calq_tensor_numel(t) > 0)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "the 'value' tensor has no data");
        calq__set_shape(c->out[0], t->dtype, t->dims, t->ndim);
        return CALQ_OK;
    }
    if ((a = calq__attr(nd, "value_float")) != NULL && a->type == CALQ_ATTR_FLOAT) {
        calq__set_shape(c->out[0], CALQ_DTYPE_FLOAT32, NULL, 0);
        return CALQ_OK;
    }
    if ((a = calq__attr(nd, "value_int")) != NULL && a->type == CALQ_ATTR_INT) {
        calq__set_shape(c->out[0], CALQ_DTYPE_INT64, NULL, 0);
        return CALQ_OK;
    }
    if ((a = calq__attr(nd, "value_floats")) != NULL && a->type == CALQ_ATTR_FLOATS) {
        int64_t n = a->n;
        calq__set_shape(c->out[0], CALQ_DTYPE_FLOAT32, &n, 1);
        return CALQ_OK;
    }
    if ((a = calq__attr(nd, "value_ints")) != NULL && a->type == CALQ_ATTR_INTS) {
        int64_t n = a->n;
        calq__set_shape(c->out[0], CALQ_DTYPE_INT64, &n, 1);
        return CALQ_OK;
    }
    static const char *const other[] = {"sparse_value", "value_string", "value_strings"};
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++)
        if (calq__attr(nd, other[i]))
            return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "the '%s' attribute is not supported", other[i]);
    return calq__op_fail(c, CALQ_ERR_SHAPE, "no value attribute (value, value_float(s), value_int(s)) is given");
}

static calq_status constant_run(calq_op_ctx *c)
{
    const calq_node *nd = c->node;
    const calq_attr *a;
    calq_tensor *o = c->out[0];
    if ((a = calq__attr(nd, "value")) != NULL && a->type == CALQ_ATTR_TENSOR && a->t) {
        size_t nb = calq__tensor_nbytes(a->t);
        if (nb) memcpy(o->data, a->t->data, nb);
    } else if ((a = calq__attr(nd, "value_float")) != NULL && a->type == CALQ_ATTR_FLOAT) {
        *(float *)o->data = a->f;
    } else if ((a = calq__attr(nd, "value_int")) != NULL && a->type == CALQ_ATTR_INT) {
        *(int64_t *)o->data = a->i;
    } else if ((a = calq__attr(nd, "value_floats")) != NULL && a->type == CALQ_ATTR_FLOATS) {
        if (a->n) memcpy(o->data, a->floats, sizeof(float) * (size_t)a->n);
    } else if ((a = calq__attr(nd, "value_ints")) != NULL && a->type == CALQ_ATTR_INTS) {
        if (a->n) memcpy(o->data, a->ints, sizeof(int64_t) * (size_t)a->n);
    } else {
        return calq__op_fail(c, CALQ_ERR_SHAPE, "no value attribute is given");
    }
    return CALQ_OK;
}

/* ---- ConstantOfShape ----------------------------------------------------------------------- */

/* The fill value: the 1-element 'value' tensor, float32 0 when absent. */
static calq_status cos_value(calq_op_ctx *c, const calq_tensor **t)
{
    const calq_attr *a = calq__attr(c->node, "value");
    *t = NULL;
    if (!a) return CALQ_OK;
    if (a->type != CALQ_ATTR_TENSOR || !a->t)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "the 'value' attribute is not a tensor");
    if (calq_dtype_size(a->t->dtype) == 0)
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "the 'value' tensor has an unsupported dtype");
    if (calq_tensor_numel(a->t) != 1 || !a->t->data)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "the 'value' tensor must hold exactly one element, it has %lld",
                             (long long)calq_tensor_numel(a->t));
    *t = a->t;
    return CALQ_OK;
}

static calq_status cos_infer(calq_op_ctx *c)
{
    int64_t dims[CALQ_MAX_DIMS];
    int n;
    const calq_tensor *v;
    CALQ_TRY(cos_value(c, &v));
    CALQ_TRY(calq__shp_read_ints(c, 0, "shape (input 0)", dims, CALQ_MAX_DIMS, &n));
    for (int i = 0; i < n; i++)
        if (dims[i] < 0)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "dim %d of the requested shape is negative (%lld)", i,
                                 (long long)dims[i]);
    if (calq__shape_numel(dims, n) < 0) return calq__op_fail(c, CALQ_ERR_SHAPE, "the requested shape is too large");
    calq__set_shape(c->out[0], v ? v->dtype : CALQ_DTYPE_FLOAT32, dims, n);
    return CALQ_OK;
}

static calq_status cos_run(calq_op_ctx *c)
{
    const calq_tensor *v;
    CALQ_TRY(cos_value(c, &v));
    static const float zero = 0.0f;
    calq__shp_fill(c->out[0]->data, calq_tensor_numel(c->out[0]), v ? v->data : &zero,
                   calq_dtype_size(c->out[0]->dtype));
    return CALQ_OK;
}

/* ---- Range --------------------------------------------------------------------------------- */

static calq_status range_check(calq_op_ctx *c)
{
    static const char *const names[3] = {"start (input 0)", "limit (input 1)", "delta (input 2)"};
    for (int i = 0; i < 3; i++) {
        CALQ_TRY(calq__shp_need_data(c, i, names[i]));
        const calq_tensor *t = c->in[i];
        if (calq_tensor_numel(t) != 1 || t->ndim > 1)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "the %s must be a scalar", names[i]);
        if (t->dtype != c->in[0]->dtype)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "the %s is %s but start is %s", names[i], calq_dtype_name(t->dtype),
                                 calq_dtype_name(c->in[0]->dtype));
    }
    calq_dtype dt = c->in[0]->dtype;
    if (!calq__dtype_is_float(dt) && !calq__dtype_is_int(dt))
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "dtype %s is not supported", calq_dtype_name(dt));
    return CALQ_OK;
}

/* The element count max(ceil((limit - start) / delta), 0), computed in the inputs' type. */
static calq_status range_count(calq_op_ctx *c, int64_t *count)
{
    CALQ_TRY(range_check(c));
    calq_dtype dt = c->in[0]->dtype;
    if (calq__dtype_is_int(dt)) {
        int64_t s = calq__tensor_get_i64(c->in[0], 0), l = calq__tensor_get_i64(c->in[1], 0);
        int64_t d = calq__tensor_get_i64(c->in[2], 0);
        if (d == 0) return calq__op_fail(c, CALQ_ERR_SHAPE, "delta is 0");
        /* Unsigned differences are exact whenever the sign is known, even across INT64's range. */
        uint64_t n = 0;
        if (d > 0 && l > s) n = ((uint64_t)l - (uint64_t)s - 1) / (uint64_t)d + 1;
        if (d < 0 && s > l) n = ((uint64_t)s - (uint64_t)l - 1) / ((uint64_t)0 - (uint64_t)d) + 1;
        if (n > (uint64_t)INT64_MAX)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "start %lld, limit %lld and delta %lld give too many elements",
                                 (long long)s, (long long)l, (long long)d);
        *count = (int64_t)n;
    } else {
        double s = calq__tensor_get_f64(c->in[0], 0), l = calq__tensor_get_f64(c->in[1], 0);
        double d = calq__tensor_get_f64(c->in[2], 0), n;
        if (d == 0) return calq__op_fail(c, CALQ_ERR_SHAPE, "delta is 0");
        if (dt == CALQ_DTYPE_FLOAT64)
            n = ceil((l - s) / d);
        else
            n = ceilf(((float)l - (float)s) / (float)d);
        if (n != n || n > 4e18)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "start %g, limit %g and delta %g give no finite length", s, l, d);
        *count = n > 0 ? (int64_t)n : 0;
    }
    return CALQ_OK;
}

static calq_status range_infer(calq_op_ctx *c)
{
    int64_t n;
    CALQ_TRY(range_count(c, &n));
    calq__set_shape(c->out[0], c->in[0]->dtype, &n, 1);
    return CALQ_OK;
}

static calq_status range_run(calq_op_ctx *c)
{
    CALQ_TRY(range_check(c));
    calq_tensor *o = c->out[0];
    int64_t n = o->dims[0];
    switch (o->dtype) {
    case CALQ_DTYPE_FLOAT32: {
        float s = *(const float *)c->in[0]->data, d = *(const float *)c->in[2]->data;
        float *p = o->data;
        for (int64_t i = 0; i < n; i++) p[i] = s + (float)i * d;
        break;
    }
    case CALQ_DTYPE_FLOAT64: {
        double s = *(const double *)c->in[0]->data, d = *(const double *)c->in[2]->data;
        double *p = o->data;
        for (int64_t i = 0; i < n; i++) p[i] = s + (double)i * d;
        break;
    }
    case CALQ_DTYPE_FLOAT16: {
        float s = (float)calq__tensor_get_f64(c->in[0], 0), d = (float)calq__tensor_get_f64(c->in[2], 0);
        for (int64_t i = 0; i < n; i++) calq__tensor_set_f64(o, i, s + (float)i * d);
        break;
    }
    default: {
        int64_t s = calq__tensor_get_i64(c->in[0], 0), d = calq__tensor_get_i64(c->in[2], 0);
        /* Unsigned arithmetic: wraps instead of overflowing; in range values are exact. */
        for (int64_t i = 0; i < n; i++) calq__tensor_set_i64(o, i, (int64_t)((uint64_t)s + (uint64_t)i * (uint64_t)d));
        break;
    }
    }
    return CALQ_OK;
}

/* ---- table --------------------------------------------------------------------------------- */

#define DATA(i) (1u << (i))

/* Variadic ops (Concat inputs, Split outputs) have no upper bound of their own. */
#define MANY INT_MAX

const calq_op_def calq__ops_shape[] = {
    {"Concat", 1, MANY, 1, 1, 0, false, calq__shp_concat_infer, calq__shp_concat_run, calq__shp_concat_prepare,
     calq__shp_concat_run_fast, calq__shp_concat_release, CALQ_OP_LAYOUTS},
    {"Split", 1, 2, 1, MANY, DATA(1), false, calq__shp_split_infer, calq__shp_split_run, NULL, NULL, NULL, 0},
    {"Slice", 1, 5, 1, 1, DATA(1) | DATA(2) | DATA(3) | DATA(4), false, calq__shp_slice_infer, calq__shp_slice_run,
     NULL, NULL, NULL, 0},
    {"Reshape", 2, 2, 1, 1, DATA(1), false, reshape_infer, copy_through, NULL, NULL, NULL, CALQ_OP_VIEW},
    {"Flatten", 1, 1, 1, 1, 0, false, flatten_infer, copy_through, NULL, NULL, NULL, CALQ_OP_VIEW},
    {"Squeeze", 1, 2, 1, 1, DATA(1), false, squeeze_infer, copy_through, NULL, NULL, NULL, CALQ_OP_VIEW},
    {"Unsqueeze", 1, 2, 1, 1, DATA(1), false, unsqueeze_infer, copy_through, NULL, NULL, NULL, CALQ_OP_VIEW},
    {"Transpose", 1, 1, 1, 1, 0, false, calq__shp_transpose_infer, calq__shp_transpose_run, NULL, NULL, NULL, 0},
    {"Gather", 2, 2, 1, 1, 0, false, calq__shp_gather_infer, calq__shp_gather_run, NULL, NULL, NULL, 0},
    {"GatherElements", 2, 2, 1, 1, 0, false, calq__shp_gather_elements_infer, calq__shp_gather_elements_run, NULL, NULL,
     NULL, 0},
    {"Shape", 1, 1, 1, 1, 0, true, shape_infer, shape_run, NULL, NULL, NULL, 0},
    {"Size", 1, 1, 1, 1, 0, true, size_infer, size_run, NULL, NULL, NULL, 0},
    {"Constant", 0, 0, 1, 1, 0, false, constant_infer, constant_run, NULL, NULL, NULL, 0},
    {"ConstantOfShape", 1, 1, 1, 1, DATA(0), false, cos_infer, cos_run, NULL, NULL, NULL, 0},
    {"Expand", 2, 2, 1, 1, DATA(1), false, calq__shp_expand_infer, calq__shp_expand_run, NULL, NULL, NULL, 0},
    {"Pad", 1, 4, 1, 1, DATA(1) | DATA(3), false, calq__shp_pad_infer, calq__shp_pad_run, calq__shp_pad_prepare,
     calq__shp_pad_run_fast, calq__shp_pad_release, CALQ_OP_LAYOUTS},
    {"Tile", 2, 2, 1, 1, DATA(1), false, calq__shp_tile_infer, calq__shp_tile_run, NULL, NULL, NULL, 0},
    {"Range", 3, 3, 1, 1, DATA(0) | DATA(1) | DATA(2), false, range_infer, range_run, NULL, NULL, NULL, 0},
    {0},
};
