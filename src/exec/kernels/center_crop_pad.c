/* CenterCropPad (opset 18): each listed axis is cropped or zero-padded to the requested length,
 * centred (the extra element of an odd difference goes to the end). Any dtype. */
#include <string.h>

#include "exec/kernels/shape_common.h"

static calq_status ccp_shape(calq_op_ctx *c, int64_t *out)
{
    const calq_tensor *x = c->in[0];
    int64_t want[CALQ_MAX_DIMS], axes[CALQ_MAX_DIMS];
    int n = 0;
    CALQ_TRY(calq__shp_read_ints(c, 1, "shape (input 1)", want, CALQ_MAX_DIMS, &n));
    const int64_t *av = NULL;
    int na = calq__attr_ints(c->node, "axes", &av);
    if (na < 0) {
        if (n != x->ndim)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "shape has %d values for a rank-%d input and no axes", n, x->ndim);
        for (int i = 0; i < n; i++) axes[i] = i;
    } else {
        if (na != n) return calq__op_fail(c, CALQ_ERR_SHAPE, "shape has %d values for %d axes", n, na);
        for (int i = 0; i < na; i++) axes[i] = av[i];
    }
    memcpy(out, x->dims, sizeof(int64_t) * (size_t)x->ndim);
    bool seen[CALQ_MAX_DIMS] = {false};
    for (int i = 0; i < n; i++) {
        int a = calq__norm_axis(axes[i], x->ndim);
        if (a < 0 || seen[a])
            return calq__op_fail(c, CALQ_ERR_SHAPE, "axis %lld is out of range or repeated", (long long)axes[i]);
        if (want[i] < 0) return calq__op_fail(c, CALQ_ERR_SHAPE, "shape[%d] = %lld is negative", i, (long long)want[i]);
        seen[a] = true;
        out[a] = want[i];
    }
    if (calq__shape_numel(out, x->ndim) < 0) return calq__op_fail(c, CALQ_ERR_SHAPE, "the output is too large");
    return CALQ_OK;
}

static calq_status ccp_infer(calq_op_ctx *c)
{
    int64_t d[CALQ_MAX_DIMS];
    CALQ_TRY(ccp_shape(c, d));
    calq__set_shape(c->out[0], c->in[0]->dtype, d, c->in[0]->ndim);
    return CALQ_OK;
}

/* Copies the overlap of input and output, both centred: per axis the overlap starts at
 * (in - out) / 2 in the input when cropping and at (out - in) / 2 in the output when padding. */
static calq_status ccp_run(calq_op_ctx *c)
{
    int64_t d[CALQ_MAX_DIMS];
    CALQ_TRY(ccp_shape(c, d));
    const calq_tensor *x = c->in[0];
    calq_tensor *y = c->out[0];
    int r = x->ndim;
    size_t es = calq_dtype_size(x->dtype);
    memset(y->data, 0, calq__tensor_nbytes(y));
    int64_t xs[CALQ_MAX_DIMS], ys[CALQ_MAX_DIMS], span[CALQ_MAX_DIMS];
    calq__shp_strides(x->dims, r, xs);
    calq__shp_strides(d, r, ys);
    int64_t xoff = 0, yoff = 0;
    for (int a = 0; a < r; a++) {
        int64_t in = x->dims[a], out = d[a];
        span[a] = in < out ? in : out;
        if (in > out) xoff += (in - out) / 2 * xs[a];
        if (out > in) yoff += (out - in) / 2 * ys[a];
    }
    int64_t n = calq__shape_numel(span, r);
    for (int64_t i = 0; i < n; i++) {
        int64_t rem = i, xi = xoff, yi = yoff;
        for (int a = r - 1; a >= 0; a--) {
            int64_t k = rem % span[a];
            rem /= span[a];
            xi += k * xs[a];
            yi += k * ys[a];
        }
        memcpy((char *)y->data + (size_t)yi * es, (const char *)x->data + (size_t)xi * es, es);
    }
    return CALQ_OK;
}

const calq_op_def calq__ops_center_crop_pad[] = {
    {"CenterCropPad", 2, 2, 1, 1, 1u << 1, false, ccp_infer, ccp_run, NULL, NULL, NULL, 0},
    {0},
};
