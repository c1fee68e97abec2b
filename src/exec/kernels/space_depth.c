/* DepthToSpace and SpaceToDepth: fixed rearrangements of N x C x H x W blocks, done as one
 * strided copy each (any dtype). */
#include <string.h>

#include "exec/kernels/shape_common.h"

static calq_status block_params(calq_op_ctx *c, bool to_space, int64_t *b)
{
    const calq_tensor *x = c->in[0];
    const calq_attr *a = calq__attr(c->node, "blocksize");
    if (!a || a->type != CALQ_ATTR_INT || a->i <= 0)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "the 'blocksize' attribute must be a positive integer");
    if (x->ndim != 4) return calq__op_fail(c, CALQ_ERR_SHAPE, "the input must be N x C x H x W, not %d-D", x->ndim);
    *b = a->i;
    const int64_t *d = x->dims;
    /* blocksize^2 and the dims it multiplies must not wrap (a blocksize of 2^32 squared is 0) */
    int64_t b2, o1, o2, o3;
    if (__builtin_mul_overflow(a->i, a->i, &b2))
        return calq__op_fail(c, CALQ_ERR_SHAPE, "blocksize %lld is too large for a %lldx%lldx%lldx%lld input",
                             (long long)a->i, (long long)d[0], (long long)d[1], (long long)d[2], (long long)d[3]);
    if (to_space && d[1] % b2)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "%lld channels do not divide by blocksize^2 = %lld", (long long)d[1],
                             (long long)b2);
    if (!to_space && (d[2] % a->i || d[3] % a->i))
        return calq__op_fail(c, CALQ_ERR_SHAPE, "H = %lld and W = %lld must divide by the blocksize %lld",
                             (long long)d[2], (long long)d[3], (long long)a->i);
    bool wraps = to_space ? __builtin_mul_overflow(d[2], a->i, &o2) || __builtin_mul_overflow(d[3], a->i, &o3)
                          : __builtin_mul_overflow(d[1], b2, &o1);
    if (wraps)
        return calq__op_fail(c, CALQ_ERR_SHAPE,
                             "blocksize %lld makes the output of a %lldx%lldx%lldx%lld input too large",
                             (long long)a->i, (long long)d[0], (long long)d[1], (long long)d[2], (long long)d[3]);
    return CALQ_OK;
}

static bool crd(const calq_op_ctx *c)
{
    return strcmp(calq__attr_str(c->node, "mode", "DCR"), "CRD") == 0;
}

static calq_status d2s_infer(calq_op_ctx *c)
{
    int64_t b = 1;
    CALQ_TRY(block_params(c, true, &b));
    const char *m = calq__attr_str(c->node, "mode", "DCR");
    if (strcmp(m, "DCR") != 0 && strcmp(m, "CRD") != 0)
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "mode '%s' is not DCR or CRD", m);
    const int64_t *d = c->in[0]->dims;
    int64_t o[4] = {d[0], d[1] / (b * b), d[2] * b, d[3] * b};
    calq__set_shape(c->out[0], c->in[0]->dtype, o, 4);
    return CALQ_OK;
}

/* out[n, c', h*b + i, w*b + j] = x[n, ch, h, w] with ch = (i*b + j)*C' + c' (DCR) or
 * c'*b*b + i*b + j (CRD): the output walked as [N, C', H, b, W, b]. */
static calq_status d2s_run(calq_op_ctx *c)
{
    int64_t b = 1;
    CALQ_TRY(d2s_infer(c));
    CALQ_TRY(block_params(c, true, &b));
    const int64_t *d = c->in[0]->dims;
    int64_t C2 = d[1] / (b * b), H = d[2], W = d[3], hw = H * W;
    int64_t dims[6] = {d[0], C2, H, b, W, b};
    int64_t st[6] = {d[1] * hw, hw, W, b * C2 * hw, 1, C2 * hw};
    if (crd(c)) {
        st[1] = b * b * hw;
        st[3] = b * hw;
        st[5] = hw;
    }
    calq__shp_strided_copy(c->out[0]->data, c->in[0]->data, 6, dims, st, calq_dtype_size(c->in[0]->dtype));
    return CALQ_OK;
}

static calq_status s2d_infer(calq_op_ctx *c)
{
    int64_t b = 1;
    CALQ_TRY(block_params(c, false, &b));
    const int64_t *d = c->in[0]->dims;
    int64_t o[4] = {d[0], d[1] * b * b, d[2] / b, d[3] / b};
    calq__set_shape(c->out[0], c->in[0]->dtype, o, 4);
    return CALQ_OK;
}

/* out[n, (i*b + j)*C + ch, h', w'] = x[n, ch, h'*b + i, w'*b + j]: the output walked as
 * [N, b, b, C, H', W']. */
static calq_status s2d_run(calq_op_ctx *c)
{
    int64_t b = 1;
    CALQ_TRY(s2d_infer(c));
    CALQ_TRY(block_params(c, false, &b));
    const int64_t *d = c->in[0]->dims;
    int64_t C = d[1], H = d[2], W = d[3];
    int64_t dims[6] = {d[0], b, b, C, H / b, W / b};
    int64_t st[6] = {C * H * W, W, 1, H * W, b * W, b};
    calq__shp_strided_copy(c->out[0]->data, c->in[0]->data, 6, dims, st, calq_dtype_size(c->in[0]->dtype));
    return CALQ_OK;
}

const calq_op_def calq__ops_space_depth[] = {
    {"DepthToSpace", 1, 1, 1, 1, 0, false, d2s_infer, d2s_run, NULL, NULL, NULL, 0},
    {"SpaceToDepth", 1, 1, 1, 1, 0, false, s2d_infer, s2d_run, NULL, NULL, NULL, 0},
    {0},
};
