/* Operators that address elements by index tensors: GatherND, ScatterND, ScatterElements (and
 * its opset 9-10 name Scatter). Reference kernels.
 *
 * Every index is checked against its axis before anything is written (negative indices count
 * from the end, as numpy and onnxruntime take them), so a bad index fails cleanly. The scatters
 * apply updates in the order of the indices tensor, so duplicate indices give the result of the
 * last update (reduction "none") or the reduction in that order: the same on every run and for
 * any thread count (the scatters run on one thread). */
#include <stdlib.h>
#include <string.h>

#include "exec/kernels/values.h"
#include "exec/op.h"

static bool index_dtype(calq_dtype t)
{
    return t == CALQ_DTYPE_INT32 || t == CALQ_DTYPE_INT64;
}

static calq_status need_indices(calq_op_ctx *c, int i)
{
    const calq_tensor *t = c->in[i];
    if (!t) return calq__op_fail(c, CALQ_ERR_SHAPE, "the indices (input %d) are missing", i);
    if (!index_dtype(t->dtype))
        return calq__op_fail(c, CALQ_ERR_SHAPE, "the indices (input %d) must be int32 or int64, got %s", i,
                             calq_dtype_name(t->dtype));
    return CALQ_OK;
}

/* Element `i` of an index tensor, made non-negative for an axis of size n; -1 when out of
 * range. */
static int64_t index_norm(const calq_tensor *t, int64_t i, int64_t n)
{
    int64_t v = calq__tensor_get_i64(t, i);
    if (v < 0) v += n;
    return v < 0 || v >= n ? -1 : v;
}

static calq_status bad_index(calq_op_ctx *c, const calq_tensor *ind, int64_t i, int axis, int64_t n)
{
    return calq__op_fail(c, CALQ_ERR_DATA,
                         "index %lld (element %lld of the indices) is out of range for axis %d of size %lld",
                         (long long)calq__tensor_get_i64(ind, i), (long long)i, axis, (long long)n);
}

/* ---- reductions of the scatters ------------------------------------------------------------ */

typedef enum { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN } reduction;

static calq_status reduction_of(calq_op_ctx *c, reduction *r)
{
    const char *s = calq__attr_str(c->node, "reduction", "none");
    static const char *const names[] = {"none", "add", "mul", "max", "min"};
    /* max and min arrived with opset 18. */
    int n = c->opset >= 18 ? 5 : 3;
    for (int i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0) {
            *r = (reduction)i;
            return CALQ_OK;
        }
    return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "reduction '%s' is not defined at opset %d (%s)", s, c->opset,
                         c->opset >= 18 ? "none, add, mul, max, min" : "none, add, mul");
}

/* out[o] = reduce(out[o], upd[u]) for n consecutive elements. */
static void apply(calq_tensor *out, int64_t o, const calq_tensor *upd, int64_t u, int64_t n, reduction r)
{
    size_t es = calq_dtype_size(out->dtype);
    if (r == RED_NONE) {
        memcpy((char *)out->data + (size_t)o * es, (const char *)upd->data + (size_t)u * es, (size_t)n * es);
        return;
    }
    bool is_int = calq__dtype_is_int(out->dtype);
    for (int64_t i = 0; i < n; i++) {
        if (is_int) {
            int64_t a = calq__tensor_get_i64(out, o + i), b = calq__tensor_get_i64(upd, u + i);
            /* Wrapping arithmetic, as the integer types of onnxruntime and numpy do. */
            int64_t v = r == RED_ADD   ? (int64_t)((uint64_t)a + (uint64_t)b)
                        : r == RED_MUL ? (int64_t)((uint64_t)a * (uint64_t)b)
                        : r == RED_MAX ? (a > b ? a : b)
                                       : (a < b ? a : b);
            calq__tensor_set_i64(out, o + i, v);
        } else {
            double a = calq__tensor_get_f64(out, o + i), b = calq__tensor_get_f64(upd, u + i);
            double v = r == RED_ADD   ? a + b
                       : r == RED_MUL ? a * b
                       : r == RED_MAX ? (b > a || b != b ? b : a)
                                      : (b < a || b != b ? b : a);
            calq__tensor_set_f64(out, o + i, v);
        }
    }
}

static calq_status reducible(calq_op_ctx *c, const calq_tensor *x, reduction r)
{
    if (r != RED_NONE && !calq__k_numeric(x->dtype))
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "a reduction needs numeric data, got %s",
                             calq_dtype_name(x->dtype));
    return CALQ_OK;
}

/* ---- GatherND ------------------------------------------------------------------------------ */

/* data [b..., r...], indices [b..., q..., k]: output [b..., q..., data.shape[b + k:]]. */
static calq_status gather_nd_shape(calq_op_ctx *c, int64_t *dims, int *nd, int *batch, int *k)
{
    const calq_tensor *x = c->in[0], *ind = c->in[1];
    CALQ_TRY(need_indices(c, 1));
    int64_t b = calq__attr_int(c->node, "batch_dims", 0);
    if (ind->ndim < 1) return calq__op_fail(c, CALQ_ERR_SHAPE, "the indices must have at least one dim");
    if (b < 0 || b >= ind->ndim || b >= x->ndim)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "batch_dims %lld must be below the ranks of data (%d) and indices (%d)",
                             (long long)b, x->ndim, ind->ndim);
    for (int i = 0; i < b; i++)
        if (x->dims[i] != ind->dims[i])
            return calq__op_fail(c, CALQ_ERR_SHAPE, "batch dim %d is %lld in the data but %lld in the indices", i,
                                 (long long)x->dims[i], (long long)ind->dims[i]);
    int64_t kk = ind->dims[ind->ndim - 1];
    if (kk < 1 || kk > x->ndim - b)
        return calq__op_fail(
            c, CALQ_ERR_SHAPE,
            "the last dim of the indices (%lld) must be between 1 and the data rank minus batch_dims (%lld)",
            (long long)kk, (long long)(x->ndim - b));
    int n = 0;
    for (int i = 0; i < ind->ndim - 1; i++) dims[n++] = ind->dims[i];
    for (int i = (int)(b + kk); i < x->ndim; i++) dims[n++] = x->dims[i];
    if (n > CALQ_MAX_DIMS) return calq__op_fail(c, CALQ_ERR_SHAPE, "the output would have %d dims", n);
    *nd = n;
    *batch = (int)b;
    *k = (int)kk;
    return CALQ_OK;
}

static calq_status gather_nd_infer(calq_op_ctx *c)
{
    int64_t d[CALQ_MAX_DIMS];
    int nd = 0, b = 0, k = 1;
    CALQ_TRY(gather_nd_shape(c, d, &nd, &b, &k));
    calq__set_shape(c->out[0], c->in[0]->dtype, d, nd);
    return CALQ_OK;
}

static calq_status gather_nd_run(calq_op_ctx *c)
{
    int64_t d[CALQ_MAX_DIMS];
    int nd = 0, b = 0, k = 1;
    CALQ_TRY(gather_nd_shape(c, d, &nd, &b, &k));
    const calq_tensor *x = c->in[0], *ind = c->in[1];
    size_t es = calq_dtype_size(x->dtype);
    int64_t batches = calq__shape_numel(x->dims, b);
    int64_t tuples = calq__shape_numel(ind->dims, ind->ndim - 1); /* over all batches */
    int64_t per_batch = batches ? tuples / batches : 0;
    int64_t slice = calq__shape_numel(x->dims + b + k, x->ndim - b - k);
    int64_t batch_stride = calq__shape_numel(x->dims + b, x->ndim - b);
    for (int64_t t = 0; t < tuples; t++) {
        int64_t off = (t / (per_batch ? per_batch : 1)) * batch_stride, mul = batch_stride;
        for (int j = 0; j < k; j++) {
            int64_t n = x->dims[b + j];
            mul /= n;
            int64_t v = index_norm(ind, t * k + j, n);
            if (v < 0) return bad_index(c, ind, t * k + j, b + j, n);
            off += v * mul;
        }
        memcpy((char *)c->out[0]->data + (size_t)(t * slice) * es, (const char *)x->data + (size_t)off * es,
               (size_t)slice * es);
    }
    return CALQ_OK;
}

/* ---- ScatterND ----------------------------------------------------------------------------- */

static calq_status copy_data(calq_op_ctx *c)
{
    calq__set_shape(c->out[0], c->in[0]->dtype, c->in[0]->dims, c->in[0]->ndim);
    return CALQ_OK;
}

static calq_status scatter_nd_check(calq_op_ctx *c, int *k)
{
    const calq_tensor *x = c->in[0], *ind = c->in[1], *upd = c->in[2];
    CALQ_TRY(need_indices(c, 1));
    if (!upd) return calq__op_fail(c, CALQ_ERR_SHAPE, "the updates (input 2) are missing");
    if (upd->dtype != x->dtype)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "the updates are %s but the data is %s", calq_dtype_name(upd->dtype),
                             calq_dtype_name(x->dtype));
    if (ind->ndim < 1) return calq__op_fail(c, CALQ_ERR_SHAPE, "the indices must have at least one dim");
    int64_t kk = ind->dims[ind->ndim - 1];
    if (kk < 1 || kk > x->ndim)
        return calq__op_fail(c, CALQ_ERR_SHAPE,
                             "the last dim of the indices (%lld) must be between 1 and the data rank %d", (long long)kk,
                             x->ndim);
    /* updates: indices.shape[:-1] + data.shape[k:] */
    int64_t want[2 * CALQ_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < ind->ndim - 1; i++) want[n++] = ind->dims[i];
    for (int i = (int)kk; i < x->ndim; i++) want[n++] = x->dims[i];
    if (!calq__shape_equal(upd->dims, upd->ndim, want, n)) {
        char a[128], b[128];
        return calq__op_fail(c, CALQ_ERR_SHAPE, "the updates have shape %s; indices and data need %s",
                             calq__shape_str(upd->dims, upd->ndim, a, sizeof a), calq__shape_str(want, n, b, sizeof b));
    }
    *k = (int)kk;
    return CALQ_OK;
}

static calq_status scatter_nd_infer(calq_op_ctx *c)
{
    int k = 1;
    CALQ_TRY(scatter_nd_check(c, &k));
    return copy_data(c);
}

static calq_status scatter_nd_run(calq_op_ctx *c)
{
    int k = 1;
    reduction r = RED_NONE;
    CALQ_TRY(scatter_nd_check(c, &k));
    CALQ_TRY(reduction_of(c, &r));
    const calq_tensor *x = c->in[0], *ind = c->in[1], *upd = c->in[2];
    CALQ_TRY(reducible(c, x, r));
    int64_t tuples = calq__shape_numel(ind->dims, ind->ndim - 1), slice = calq__shape_numel(x->dims + k, x->ndim - k);
    for (int64_t i = 0; i < tuples * k; i++) {
        int j = (int)(i % k);
        if (index_norm(ind, i, x->dims[j]) < 0) return bad_index(c, ind, i, j, x->dims[j]);
    }
    memcpy(c->out[0]->data, x->data, calq__tensor_nbytes(x));
    for (int64_t t = 0; t < tuples; t++) {
        int64_t off = 0;
        for (int j = 0; j < k; j++) off = off * x->dims[j] + index_norm(ind, t * k + j, x->dims[j]);
        apply(c->out[0], off * slice, upd, t * slice, slice, r);
    }
    return CALQ_OK;
}

/* ---- ScatterElements / Scatter ------------------------------------------------------------- */

static calq_status scatter_elements_check(calq_op_ctx *c, int *axis)
{
    const calq_tensor *x = c->in[0], *ind = c->in[1], *upd = c->in[2];
    CALQ_TRY(need_indices(c, 1));
    if (!upd) return calq__op_fail(c, CALQ_ERR_SHAPE, "the updates (input 2) are missing");
    if (upd->dtype != x->dtype)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "the updates are %s but the data is %s", calq_dtype_name(upd->dtype),
                             calq_dtype_name(x->dtype));
    char a[128], b[128];
    if (!calq__shape_equal(ind->dims, ind->ndim, upd->dims, upd->ndim))
        return calq__op_fail(c, CALQ_ERR_SHAPE, "the indices (%s) and updates (%s) must have the same shape",
                             calq__shape_str(ind->dims, ind->ndim, a, sizeof a),
                             calq__shape_str(upd->dims, upd->ndim, b, sizeof b));
    if (ind->ndim != x->ndim)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "the indices have rank %d but the data has rank %d", ind->ndim,
                             x->ndim);
    int64_t av = calq__attr_int(c->node, "axis", 0);
    *axis = calq__norm_axis(av, x->ndim);
    if (*axis < 0)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "axis %lld is out of range for a %d-D input", (long long)av, x->ndim);
    for (int i = 0; i < x->ndim; i++)
        if (i != *axis && ind->dims[i] > x->dims[i])
            return calq__op_fail(c, CALQ_ERR_SHAPE, "indices shape %s exceeds data shape %s on axis %d",
                                 calq__shape_str(ind->dims, ind->ndim, a, sizeof a),
                                 calq__shape_str(x->dims, x->ndim, b, sizeof b), i);
    return CALQ_OK;
}

static calq_status scatter_elements_infer(calq_op_ctx *c)
{
    int axis = 0;
    CALQ_TRY(scatter_elements_check(c, &axis));
    return copy_data(c);
}

static calq_status scatter_elements_run(calq_op_ctx *c)
{
    int axis = 0;
    reduction r = RED_NONE;
    CALQ_TRY(scatter_elements_check(c, &axis));
    if (strcmp(c->node->op_type, "Scatter") != 0) CALQ_TRY(reduction_of(c, &r));
    const calq_tensor *x = c->in[0], *ind = c->in[1], *upd = c->in[2];
    CALQ_TRY(reducible(c, x, r));
    int64_t n = calq_tensor_numel(ind), na = x->dims[axis];
    for (int64_t i = 0; i < n; i++)
        if (index_norm(ind, i, na) < 0) return bad_index(c, ind, i, axis, na);
    memcpy(c->out[0]->data, x->data, calq__tensor_nbytes(x));
    int64_t str[CALQ_MAX_DIMS], s = 1;
    for (int d = x->ndim - 1; d >= 0; d--) {
        str[d] = s;
        s *= x->dims[d];
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t rem = i, off = 0;
        for (int d = x->ndim - 1; d >= 0; d--) {
            int64_t p = rem % ind->dims[d];
            rem /= ind->dims[d];
            off += (d == axis ? index_norm(ind, i, na) : p) * str[d];
        }
        apply(c->out[0], off, upd, i, 1, r);
    }
    return CALQ_OK;
}

const calq_op_def calq__ops_scatter[] = {
    {"GatherND", 2, 2, 1, 1, 0, false, gather_nd_infer, gather_nd_run, NULL, NULL, NULL, 0},
    {"ScatterND", 3, 3, 1, 1, 0, false, scatter_nd_infer, scatter_nd_run, NULL, NULL, NULL, 0},
    {"ScatterElements", 3, 3, 1, 1, 0, false, scatter_elements_infer, scatter_elements_run, NULL, NULL, NULL, 0},
    {"Scatter", 3, 3, 1, 1, 0, false, scatter_elements_infer, scatter_elements_run, NULL, NULL, NULL, 0},
    {0},
};
