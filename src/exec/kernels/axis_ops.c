/* Operators that walk one axis of their input: CumSum, ReverseSequence and Compress. Reference
 * kernels. */
#include <stdlib.h>
#include <string.h>

#include "exec/kernels/values.h"
#include "exec/op.h"

/* Normalised axis from a scalar integer input (CumSum's axis). */
static calq_status axis_input(calq_op_ctx *c, int i, int rank, int *axis)
{
    const calq_tensor *t = c->n_in > i ? c->in[i] : NULL;
    if (!t) return calq__op_fail(c, CALQ_ERR_SHAPE, "the axis (input %d) is missing", i);
    if (!calq__dtype_is_int(t->dtype) || calq_tensor_numel(t) != 1)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "the axis (input %d) must be one integer", i);
    int64_t a = calq__tensor_get_i64(t, 0);
    *axis = calq__norm_axis(a, rank);
    if (*axis < 0)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "axis %lld is out of range for a rank-%d input", (long long)a, rank);
    return CALQ_OK;
}

/* ---- CumSum ---------------------------------------------------------------------------------- */

static calq_status cumsum_infer(calq_op_ctx *c)
{
    const calq_tensor *x = c->in[0];
    if (!calq__k_numeric(x->dtype))
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "input dtype %s is not supported", calq_dtype_name(x->dtype));
    if (x->ndim == 0) return calq__op_fail(c, CALQ_ERR_SHAPE, "the input must have at least one dim");
    calq__set_shape(c->out[0], x->dtype, x->dims, x->ndim);
    return CALQ_OK;
}

/* Sums run in the input's order along the axis: floats in double, integers in int64 with
 * wrap-around (exact, as the integer types themselves). */
static calq_status cumsum_run(calq_op_ctx *c)
{
    CALQ_TRY(cumsum_infer(c));
    const calq_tensor *x = c->in[0];
    int axis = 0;
    CALQ_TRY(axis_input(c, 1, x->ndim, &axis));
    bool exclusive = calq__attr_int(c->node, "exclusive", 0) != 0, reverse = calq__attr_int(c->node, "reverse", 0) != 0;
    int64_t len = x->dims[axis], inner = calq__shape_numel(x->dims + axis + 1, x->ndim - axis - 1);
    int64_t rows = calq__shape_numel(x->dims, axis) * inner;
    bool is_int = calq__dtype_is_int(x->dtype);
    for (int64_t r = 0; r < rows; r++) {
        int64_t base = (r / inner) * len * inner + r % inner;
        double acc = 0.0;
        uint64_t iacc = 0;
        for (int64_t s = 0; s < len; s++) {
            int64_t j = reverse ? len - 1 - s : s, off = base + j * inner;
            if (is_int) {
                uint64_t v = (uint64_t)calq__tensor_get_i64(x, off);
                if (!exclusive) iacc += v;
                calq__tensor_set_i64(c->out[0], off, (int64_t)iacc);
                if (exclusive) iacc += v;
            } else {
                double v = 0.0;
                calq__k_load(x, off, 1, 1, &v);
                if (!exclusive) acc += v;
                calq__k_store(c->out[0], off, 1, 1, &acc);
                if (exclusive) acc += v;
            }
        }
    }
    return CALQ_OK;
}

/* ---- ReverseSequence ------------------------------------------------------------------------- */

static calq_status reverse_sequence_axes(calq_op_ctx *c, int *t_axis, int *b_axis)
{
    const calq_tensor *x = c->in[0], *lens = c->in[1];
    if (x->ndim < 2) return calq__op_fail(c, CALQ_ERR_SHAPE, "the input must have at least 2 dims");
    int64_t ta = calq__attr_int(c->node, "time_axis", 0), ba = calq__attr_int(c->node, "batch_axis", 1);
    if (!((ta == 0 && ba == 1) || (ta == 1 && ba == 0)))
        return calq__op_fail(c, CALQ_ERR_SHAPE, "time_axis %lld and batch_axis %lld must be 0 and 1 in some order",
                             (long long)ta, (long long)ba);
    if (!calq__dtype_is_int(lens->dtype) || lens->ndim != 1 || lens->dims[0] != x->dims[ba])
        return calq__op_fail(c, CALQ_ERR_SHAPE, "sequence_lens must be a 1-D integer tensor of the batch size %lld",
                             (long long)x->dims[ba]);
    *t_axis = (int)ta;
    *b_axis = (int)ba;
    return CALQ_OK;
}

static calq_status reverse_sequence_infer(calq_op_ctx *c)
{
    int t = 0, b = 1;
    CALQ_TRY(reverse_sequence_axes(c, &t, &b));
    calq__set_shape(c->out[0], c->in[0]->dtype, c->in[0]->dims, c->in[0]->ndim);
    return CALQ_OK;
}

static calq_status reverse_sequence_run(calq_op_ctx *c)
{
    int ta = 0, ba = 1;
    CALQ_TRY(reverse_sequence_axes(c, &ta, &ba));
    const calq_tensor *x = c->in[0], *lens = c->in[1];
    int64_t T = x->dims[ta], B = x->dims[ba], inner = calq__shape_numel(x->dims + 2, x->ndim - 2);
    size_t es = calq_dtype_size(x->dtype), run = (size_t)inner * es;
    int64_t st = ta == 0 ? B * inner : inner, sb = ta == 0 ? inner : T * inner;
    for (int64_t b = 0; b < B; b++) {
        int64_t L = calq__tensor_get_i64(lens, b);
        if (L < 0 || L > T)
            return calq__op_fail(c, CALQ_ERR_DATA, "sequence_lens[%lld] = %lld is outside [0, %lld]", (long long)b,
                                 (long long)L, (long long)T);
        for (int64_t t = 0; t < T; t++) {
            int64_t src = t < L ? L - 1 - t : t;
            memcpy((char *)c->out[0]->data + (size_t)(b * sb + t * st) * es,
                   (const char *)x->data + (size_t)(b * sb + src * st) * es, run);
        }
    }
    return CALQ_OK;
}

/* ---- Compress -------------------------------------------------------------------------------- */

/* Positions along the axis (or of the flattened input) whose condition is true; the condition
 * may be shorter than the axis (the rest is dropped), not longer. */
static calq_status compress_plan(calq_op_ctx *c, int *axis, int64_t *kept)
{
    const calq_tensor *x = c->in[0], *cond = c->in[1];
    if (cond->ndim != 1 || !(cond->dtype == CALQ_DTYPE_BOOL || calq__dtype_is_int(cond->dtype)))
        return calq__op_fail(c, CALQ_ERR_SHAPE, "the condition must be a 1-D bool tensor");
    if (!cond->data && cond->dims[0]) return calq__op_fail(c, CALQ_ERR_INTERNAL, "the condition is not known");
    const calq_attr *a = calq__attr(c->node, "axis");
    int64_t len = calq_tensor_numel(x);
    *axis = -1;
    if (a && a->type == CALQ_ATTR_INT) {
        *axis = calq__norm_axis(a->i, x->ndim);
        if (*axis < 0)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "axis %lld is out of range for a rank-%d input", (long long)a->i,
                                 x->ndim);
        len = x->dims[*axis];
    }
    if (cond->dims[0] > len)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "the condition has %lld values for an axis of %lld",
                             (long long)cond->dims[0], (long long)len);
    *kept = 0;
    for (int64_t i = 0; i < cond->dims[0]; i++) *kept += calq__tensor_get_i64(cond, i) != 0;
    return CALQ_OK;
}

static calq_status compress_infer(calq_op_ctx *c)
{
    int axis = -1;
    int64_t kept = 0;
    CALQ_TRY(compress_plan(c, &axis, &kept));
    const calq_tensor *x = c->in[0];
    if (axis < 0) {
        calq__set_shape(c->out[0], x->dtype, &kept, 1);
    } else {
        int64_t d[CALQ_MAX_DIMS];
        memcpy(d, x->dims, sizeof d);
        d[axis] = kept;
        calq__set_shape(c->out[0], x->dtype, d, x->ndim);
    }
    return CALQ_OK;
}

static calq_status compress_run(calq_op_ctx *c)
{
    int axis = -1;
    int64_t kept = 0;
    CALQ_TRY(compress_plan(c, &axis, &kept));
    const calq_tensor *x = c->in[0], *cond = c->in[1];
    size_t es = calq_dtype_size(x->dtype);
    int64_t outer = 1, inner = 1, len = calq_tensor_numel(x);
    if (axis >= 0) {
        outer = calq__shape_numel(x->dims, axis);
        inner = calq__shape_numel(x->dims + axis + 1, x->ndim - axis - 1);
        len = x->dims[axis];
    }
    char *y = c->out[0]->data;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < cond->dims[0]; i++)
            if (calq__tensor_get_i64(cond, i)) {
                memcpy(y, (const char *)x->data + (size_t)((o * len + i) * inner) * es, (size_t)inner * es);
                y += (size_t)inner * es;
            }
    return CALQ_OK;
}

const calq_op_def calq__ops_axis[] = {
    {"CumSum", 2, 2, 1, 1, 0, false, cumsum_infer, cumsum_run, NULL, NULL, NULL, 0},
    {"ReverseSequence", 2, 2, 1, 1, 0, false, reverse_sequence_infer, reverse_sequence_run, NULL, NULL, NULL, 0},
    {"Compress", 2, 2, 1, 1, 1u << 1, false, compress_infer, compress_run, NULL, NULL, NULL, 0},
    {0},
};
