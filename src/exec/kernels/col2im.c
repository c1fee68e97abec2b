/* Col2Im (opset 18) over two spatial dims: the inverse of im2col, summing the values that
 * overlapping blocks put on one pixel (in block order, so the sum order is fixed). */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernels/values.h"
#include "exec/op.h"

typedef struct c2i {
    int64_t N, C, H, W, kh, kw, L, lh, lw;
    int64_t dil[2], pad[4], str[2];
} c2i;

static calq_status c2i_read(calq_op_ctx *c, int i, const char *what, int64_t *v)
{
    const calq_tensor *t = c->in[i];
    if (!calq__dtype_is_int(t->dtype) || calq_tensor_numel(t) != 2)
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "%s must hold two integers (calq folds 2 spatial dims)", what);
    if (!t->data) return calq__op_fail(c, CALQ_ERR_INTERNAL, "%s is not known while inferring shapes", what);
    v[0] = calq__tensor_get_i64(t, 0);
    v[1] = calq__tensor_get_i64(t, 1);
    return CALQ_OK;
}

static calq_status c2i_params(calq_op_ctx *c, c2i *p)
{
    const calq_tensor *x = c->in[0];
    int64_t img[2] = {0, 0}, blk[2] = {0, 0};
    CALQ_TRY(c2i_read(c, 1, "image_shape (input 1)", img));
    CALQ_TRY(c2i_read(c, 2, "block_shape (input 2)", blk));
    if (!calq__dtype_is_float(x->dtype) || x->ndim != 3)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "the input must be a float [N, C * block, L] tensor");
    const int64_t *v = NULL;
    int64_t dflt[4] = {1, 1, 0, 0};
    int n = calq__attr_ints(c->node, "dilations", &v);
    p->dil[0] = n == 2 ? v[0] : dflt[0];
    p->dil[1] = n == 2 ? v[1] : dflt[1];
    n = calq__attr_ints(c->node, "strides", &v);
    p->str[0] = n == 2 ? v[0] : 1;
    p->str[1] = n == 2 ? v[1] : 1;
    n = calq__attr_ints(c->node, "pads", &v);
    for (int k = 0; k < 4; k++) p->pad[k] = n == 4 ? v[k] : 0;
    p->H = img[0], p->W = img[1], p->kh = blk[0], p->kw = blk[1];
    /* Every size and attribute within [1, 2^24] (pads [0, 2^24]), so the block count and the
     * products below cannot overflow int64 (a dilation of 2^62 did). */
    const int64_t lim = (int64_t)1 << 24;
    bool bad =
        p->H <= 0 || p->W <= 0 || p->kh <= 0 || p->kw <= 0 || p->H > lim || p->W > lim || p->kh > lim || p->kw > lim;
    for (int k = 0; k < 2; k++) bad = bad || p->dil[k] <= 0 || p->dil[k] > lim || p->str[k] <= 0 || p->str[k] > lim;
    for (int k = 0; k < 4; k++) bad = bad || p->pad[k] < 0 || p->pad[k] > lim;
    if (bad)
        return calq__op_fail(c, CALQ_ERR_SHAPE,
                             "image %lldx%lld, block %lldx%lld, strides %lldx%lld, dilations %lldx%lld or pads "
                             "(%lld, %lld, %lld, %lld) are invalid (sizes, strides and dilations must be in [1, 2^24], "
                             "pads in [0, 2^24])",
                             (long long)p->H, (long long)p->W, (long long)p->kh, (long long)p->kw, (long long)p->str[0],
                             (long long)p->str[1], (long long)p->dil[0], (long long)p->dil[1], (long long)p->pad[0],
                             (long long)p->pad[1], (long long)p->pad[2], (long long)p->pad[3]);
    int64_t kk = p->kh * p->kw;
    if (x->dims[1] % kk)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "dim 1 (%lld) does not divide by the block size %lld",
                             (long long)x->dims[1], (long long)kk);
    p->N = x->dims[0];
    p->C = x->dims[1] / kk;
    p->L = x->dims[2];
    p->lh = (p->H + p->pad[0] + p->pad[2] - p->dil[0] * (p->kh - 1) - 1) / p->str[0] + 1;
    p->lw = (p->W + p->pad[1] + p->pad[3] - p->dil[1] * (p->kw - 1) - 1) / p->str[1] + 1;
    if (p->lh <= 0 || p->lw <= 0 || p->lh * p->lw != p->L)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "%lld blocks given; the image, block and strides make %lld x %lld",
                             (long long)p->L, (long long)p->lh, (long long)p->lw);
    return CALQ_OK;
}

static calq_status c2i_infer(calq_op_ctx *c)
{
    c2i p;
    CALQ_TRY(c2i_params(c, &p));
    int64_t d[4] = {p.N, p.C, p.H, p.W};
    calq__set_shape(c->out[0], c->in[0]->dtype, d, 4);
    return CALQ_OK;
}

static calq_status c2i_run(calq_op_ctx *c)
{
    c2i p;
    CALQ_TRY(c2i_params(c, &p));
    int64_t kk = p.kh * p.kw, plane = p.H * p.W;
    double *col = malloc(sizeof(double) * (size_t)(kk * p.L + 1)), *img = malloc(sizeof(double) * (size_t)(plane + 1));
    if (!col || !img) {
        free(col);
        free(img);
        return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory");
    }
    for (int64_t n = 0; n < p.N; n++)
        for (int64_t ch = 0; ch < p.C; ch++) {
            calq__k_load(c->in[0], (n * p.C + ch) * kk * p.L, 1, kk * p.L, col);
            memset(img, 0, sizeof(double) * (size_t)plane);
            for (int64_t k = 0; k < kk; k++)
                for (int64_t l = 0; l < p.L; l++) {
                    int64_t y = (l / p.lw) * p.str[0] - p.pad[0] + (k / p.kw) * p.dil[0];
                    int64_t x = (l % p.lw) * p.str[1] - p.pad[1] + (k % p.kw) * p.dil[1];
                    if (y >= 0 && y < p.H && x >= 0 && x < p.W) img[y * p.W + x] += col[k * p.L + l];
                }
            calq__k_store(c->out[0], (n * p.C + ch) * plane, 1, plane, img);
        }
    free(col);
    free(img);
    return CALQ_OK;
}

const calq_op_def calq__ops_col2im[] = {
    {"Col2Im", 3, 3, 1, 1, (1u << 1) | (1u << 2), false, c2i_infer, c2i_run, NULL, NULL, NULL, 0},
    {0},
};
