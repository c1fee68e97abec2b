/* Operators that build or apply position masks: Trilu, EyeLike, OneHot and NonZero. Reference
 * kernels. */
#include <stdlib.h>
#include <string.h>

#include "exec/kernels/values.h"
#include "exec/op.h"

/* ---- Trilu ----------------------------------------------------------------------------------- */

static calq_status trilu_infer(calq_op_ctx *c)
{
    const calq_tensor *x = c->in[0];
    if (x->ndim < 2) return calq__op_fail(c, CALQ_ERR_SHAPE, "the input must have at least 2 dims");
    const calq_tensor *k = c->n_in > 1 ? c->in[1] : NULL;
    if (k && (!calq__dtype_is_int(k->dtype) || calq_tensor_numel(k) != 1))
        return calq__op_fail(c, CALQ_ERR_SHAPE, "k (input 1) must be one integer");
    calq__set_shape(c->out[0], x->dtype, x->dims, x->ndim);
    return CALQ_OK;
}

/* Keeps x[..., i, j] where j - i >= k (upper) or j - i <= k (lower); zero elsewhere. */
static calq_status trilu_run(calq_op_ctx *c)
{
    CALQ_TRY(trilu_infer(c));
    const calq_tensor *x = c->in[0];
    const calq_tensor *kt = c->n_in > 1 ? c->in[1] : NULL;
    int64_t k = kt ? calq__tensor_get_i64(kt, 0) : 0;
    bool upper = calq__attr_int(c->node, "upper", 1) != 0;
    int64_t N = x->dims[x->ndim - 2], M = x->dims[x->ndim - 1], mats = calq__shape_numel(x->dims, x->ndim - 2);
    size_t es = calq_dtype_size(x->dtype);
    const char *s = x->data;
    char *d = c->out[0]->data;
    for (int64_t m = 0; m < mats; m++)
        for (int64_t i = 0; i < N; i++)
            for (int64_t j = 0; j < M; j++) {
                size_t off = (size_t)((m * N + i) * M + j) * es;
                bool keep = upper ? j - i >= k : j - i <= k;
                if (keep)
                    memcpy(d + off, s + off, es);
                else
                    memset(d + off, 0, es);
            }
    return CALQ_OK;
}

/* ---- EyeLike --------------------------------------------------------------------------------- */

static calq_status eyelike_infer(calq_op_ctx *c)
{
    const calq_tensor *x = c->in[0];
    if (x->ndim != 2) return calq__op_fail(c, CALQ_ERR_SHAPE, "the input must be 2-D, not %d-D", x->ndim);
    calq_dtype dt = x->dtype;
    const calq_attr *a = calq__attr(c->node, "dtype");
    if (a && a->type == CALQ_ATTR_INT) {
        const char *name = "";
        dt = calq__op_onnx_dtype(a->i, &name);
        if (dt == CALQ_DTYPE_UNDEFINED)
            return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "dtype %lld (%s) is not a type calq represents",
                                 (long long)a->i, name);
    }
    calq__set_shape(c->out[0], dt, x->dims, 2);
    return CALQ_OK;
}

static calq_status eyelike_run(calq_op_ctx *c)
{
    CALQ_TRY(eyelike_infer(c));
    calq_tensor *y = c->out[0];
    memset(y->data, 0, calq__tensor_nbytes(y));
    int64_t k = calq__attr_int(c->node, "k", 0), R = y->dims[0], C = y->dims[1];
    for (int64_t i = 0; i < R; i++)
        if (i + k >= 0 && i + k < C) calq__tensor_set_f64(y, i * C + i + k, 1.0);
    return CALQ_OK;
}

/* ---- OneHot ---------------------------------------------------------------------------------- */

static calq_status onehot_params(calq_op_ctx *c, int *axis, int64_t *depth)
{
    const calq_tensor *ind = c->in[0], *dt = c->in[1], *vals = c->in[2];
    if (!calq__k_numeric(ind->dtype))
        return calq__op_fail(c, CALQ_ERR_SHAPE, "the indices must be numeric, got %s", calq_dtype_name(ind->dtype));
    if (calq_tensor_numel(dt) != 1 || !calq__k_numeric(dt->dtype))
        return calq__op_fail(c, CALQ_ERR_SHAPE, "depth (input 1) must be one number");
    if (!dt->data) return calq__op_fail(c, CALQ_ERR_INTERNAL, "depth (input 1) is not known while inferring shapes");
    if (calq_tensor_numel(vals) != 2) return calq__op_fail(c, CALQ_ERR_SHAPE, "values (input 2) must hold [off, on]");
    /* checked as a double: a float depth of NaN or 1e30 does not convert to int64 */
    double dv = calq__tensor_get_f64(dt, 0);
    if (!(dv >= 1 && dv <= (double)((int64_t)1 << 31)))
        return calq__op_fail(c, CALQ_ERR_SHAPE, "depth %.17g is not a positive size (at most 2^31)", dv);
    *depth = (int64_t)dv;
    if (ind->ndim + 1 > CALQ_MAX_DIMS) return calq__op_fail(c, CALQ_ERR_SHAPE, "the output would have too many dims");
    int64_t a = calq__attr_int(c->node, "axis", -1);
    *axis = calq__norm_axis(a, ind->ndim + 1);
    if (*axis < 0)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "axis %lld is out of range for a rank-%d output", (long long)a,
                             ind->ndim + 1);
    return CALQ_OK;
}

static calq_status onehot_infer(calq_op_ctx *c)
{
    int axis = 0;
    int64_t depth = 1, d[CALQ_MAX_DIMS];
    CALQ_TRY(onehot_params(c, &axis, &depth));
    const calq_tensor *ind = c->in[0];
    for (int i = 0, k = 0; i <= ind->ndim; i++) d[i] = i == axis ? depth : ind->dims[k++];
    calq__set_shape(c->out[0], c->in[2]->dtype, d, ind->ndim + 1);
    return CALQ_OK;
}

/* Indices in [-depth, depth) (negative counts from the end) select the "on" value; others give
 * an all-"off" row, as the ONNX definition says. */
static calq_status onehot_run(calq_op_ctx *c)
{
    int axis = 0;
    int64_t depth = 1;
    CALQ_TRY(onehot_params(c, &axis, &depth));
    const calq_tensor *ind = c->in[0], *vals = c->in[2];
    calq_tensor *y = c->out[0];
    size_t es = calq_dtype_size(y->dtype);
    const char *off = vals->data, *on = (const char *)vals->data + es;
    int64_t outer = calq__shape_numel(ind->dims, axis), inner = calq__shape_numel(ind->dims + axis, ind->ndim - axis);
    char *d = y->data;
    /* every element "off", then one "on" per index: each index is read once, not depth times (a
     * depth of 2^24 took seconds reading 3 indices) */
    int64_t total = outer * depth * inner;
    if (total > 0) {
        memcpy(d, off, es);
        for (int64_t have = 1; have < total;) {
            int64_t n = have < total - have ? have : total - have;
            memcpy(d + (size_t)have * es, d, (size_t)n * es);
            have += n;
        }
    }
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double x = calq__tensor_get_f64(ind, o * inner + i);
            /* NaN or beyond +-2^62 (floats): outside [-depth, depth), an all-"off" row */
            int64_t v = x > -4.6e18 && x < 4.6e18 ? (int64_t)x : INT64_MIN;
            if (v < 0) v += depth;
            if (v >= 0 && v < depth) memcpy(d + (size_t)((o * depth + v) * inner + i) * es, on, es);
        }
    return CALQ_OK;
}

/* ---- NonZero --------------------------------------------------------------------------------- */

static int64_t count_nonzero(const calq_tensor *x)
{
    int64_t n = calq_tensor_numel(x), k = 0;
    for (int64_t i = 0; i < n; i++) k += calq__tensor_get_f64(x, i) != 0.0;
    return k;
}

static calq_status nonzero_infer(calq_op_ctx *c)
{
    const calq_tensor *x = c->in[0];
    if (!calq__k_numeric(x->dtype) && x->dtype != CALQ_DTYPE_BOOL)
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "input dtype %s is not supported", calq_dtype_name(x->dtype));
    if (!x->data && calq_tensor_numel(x)) return calq__op_fail(c, CALQ_ERR_INTERNAL, "the input is not known");
    int64_t d[2] = {x->ndim, count_nonzero(x)};
    calq__set_shape(c->out[0], CALQ_DTYPE_INT64, d, 2);
    return CALQ_OK;
}

/* [rank, count]: the coordinates of every non-zero element in C order (a scalar has rank 0
 * and gives a [0, count] result, as numpy's nonzero on a 0-d array as 1-d does not). */
static calq_status nonzero_run(calq_op_ctx *c)
{
    const calq_tensor *x = c->in[0];
    int64_t n = calq_tensor_numel(x), cnt = count_nonzero(x), k = 0;
    int64_t *y = c->out[0]->data;
    for (int64_t i = 0; i < n; i++) {
        if (calq__tensor_get_f64(x, i) == 0.0) continue;
        int64_t rem = i;
        for (int d = x->ndim - 1; d >= 0; d--) {
            y[d * cnt + k] = rem % x->dims[d];
            rem /= x->dims[d];
        }
        k++;
    }
    return CALQ_OK;
}

const calq_op_def calq__ops_masks[] = {
    {"Trilu", 1, 2, 1, 1, 0, false, trilu_infer, trilu_run, NULL, NULL, NULL, 0},
    {"EyeLike", 1, 1, 1, 1, 0, false, eyelike_infer, eyelike_run, NULL, NULL, NULL, 0},
    {"OneHot", 3, 3, 1, 1, 1u << 1, false, onehot_infer, onehot_run, NULL, NULL, NULL, 0},
    {"NonZero", 1, 1, 1, 1, 1u << 0, false, nonzero_infer, nonzero_run, NULL, NULL, NULL, 0},
    {0},
};
