/* ConvTranspose as matrix products (see deconv_gemm.h). */
#include "exec/kernels/deconv_gemm.h"

#include <oneapi/dnnl/dnnl.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernels/dnnl_common.h"

struct calq_deconv_gemm {
    bool direct;                    /* kernel == stride, no padding, one group: no column buffer */
    int64_t n, h, w, ic, oc;        /* batch, input rows / columns, channels */
    int64_t g, icg, ocg;            /* groups, channels per group */
    int64_t oh, ow;                 /* output rows / columns */
    int64_t kh, kw, s0, s1, p0, p1; /* kernel, stride, padding before */
    int64_t ncol;                   /* columns of B: s1 * OC (direct) or kh * kw * OCg (per group) */
    float *b;    /* direct: [kh][IC][ncol] (B_i per kernel row); else per group [ICg][ncol] (owner: this) */
    float *bias; /* [OC] or NULL (owner: this) */
    float *cols; /* general: [N * H][G][W][ncol] (owner: this) */
    int n_post;  /* post-ops applied (a prefix of the planner's chain) */
    calq_post_op post[CALQ_CONV_MAX_POST];
};

static bool direct_fits(const calq_conv_geom *g)
{
    if (g->group != 1) return false;
    for (int i = 0; i < 2; i++)
        if (g->k[i] != g->stride[i] || g->pad_b[i] != 0 || g->pad_e[i] != 0 || g->out_pad[i] != 0 ||
            g->out[i] != g->in[i] * g->k[i])
            return false;
    return true;
}

bool calq__deconv_gemm_fits(const calq_conv_geom *g)
{
    if (!g->transpose || g->nsp != 2 || g->group < 1 || g->c_in % g->group || g->c_out % g->group) return false;
    for (int i = 0; i < 2; i++)
        if (g->k[i] < 1 || g->dil[i] != 1 || g->pad_b[i] < 0 || g->stride[i] < 1) return false;
    if (direct_fits(g)) return true;
    const double cols = (double)g->n * (double)g->in[0] * (double)g->in[1] * (double)g->k[0] * (double)g->k[1] *
                        (double)g->c_out * sizeof(float);
    return cols <= (double)CALQ_DECONV_MAX_COLS;
}

/* The post-ops applied in the output row (exact float operations); a prefix of the chain. */
static bool post_supported(const calq_post_op *op)
{
    switch (op->kind) {
    case CALQ_POST_RELU:
    case CALQ_POST_CLIP:
    case CALQ_POST_SUM:
    case CALQ_POST_ADD_CHANNEL:
    case CALQ_POST_MUL_CHANNEL: return true;
    default: return false;
    }
}

calq_status calq__deconv_gemm_create(calq_op_ctx *c, const calq_conv_geom *g, int n_post, int *n_used,
                                     calq_deconv_gemm **out)
{
    *out = NULL;
    *n_used = 0;
    if (!(c->const_inputs & 2u) || !c->in[1]->data) return CALQ_OK;
    if (g->has_bias && (!(c->const_inputs & 4u) || !c->in[2]->data)) return CALQ_OK;
    calq_deconv_gemm *d = calloc(1, sizeof *d);
    if (!d) goto oom;
    d->direct = direct_fits(g);
    d->n = g->n;
    d->h = g->in[0];
    d->w = g->in[1];
    d->ic = g->c_in;
    d->oc = g->c_out;
    d->oh = g->out[0];
    d->ow = g->out[1];
    d->kh = g->k[0];
    d->kw = g->k[1];
    d->s0 = g->stride[0];
    d->s1 = g->stride[1];
    d->p0 = g->pad_b[0];
    d->p1 = g->pad_b[1];
    d->g = g->group;
    d->icg = d->ic / d->g;
    d->ocg = d->oc / d->g;
    d->ncol =
        d->direct
            ? d->s1 * d->oc
            : d->kh * d->kw *
                  d->ocg; /* ONNX ConvTranspose weights: [IC, OC / G, kh, kw]; B's columns are (kernel column, OC) per
                           * kernel row (direct) or, per group, (kernel row, kernel column, OC of the group) */
    d->b = malloc(sizeof(float) * (size_t)(d->kh * d->ic * (d->direct ? d->ncol : d->kw * d->ocg)));
    if (g->has_bias) d->bias = malloc(sizeof(float) * (size_t)d->oc);
    if (!d->direct) d->cols = malloc(sizeof(float) * (size_t)(d->n * d->h * d->g * d->w * d->ncol));
    if (!d->b || (g->has_bias && !d->bias) || (!d->direct && !d->cols)) goto oom;
    const float *wt = c->in[1]->data;
    for (int64_t ic = 0; ic < d->ic; ic++) /* ic = group * ICg + its index in the group */
        for (int64_t oc = 0; oc < d->ocg; oc++)
            for (int64_t i = 0; i < d->kh; i++)
                for (int64_t j = 0; j < d->kw; j++) {
                    const float v = wt[((ic * d->ocg + oc) * d->kh + i) * d->kw + j];
                    if (d->direct)
                        d->b[(i * d->ic + ic) * d->ncol + j * d->oc + oc] = v;
                    else
                        d->b[ic * d->ncol + (i * d->kw + j) * d->ocg + oc] = v;
                }
    if (d->bias) memcpy(d->bias, c->in[2]->data, sizeof(float) * (size_t)d->oc);
    int sums = 0;
    while (d->n_post < n_post && d->n_post < CALQ_CONV_MAX_POST && post_supported(&c->post[d->n_post])) {
        if (c->post[d->n_post].kind == CALQ_POST_SUM && ++sums > 1) break;
        d->post[d->n_post] = c->post[d->n_post];
        d->n_post++;
    }
    *n_used = d->n_post;
    *out = d;
    return CALQ_OK;
oom:
    calq__deconv_gemm_free(d);
    return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory packing the transposed convolution");
}

/* Output row r (image n) from its sums in acc: the post-ops, then the store. The operands are
 * read before y is written, so a residual operand that y overwrites is still intact. */
static void finish_row(const calq_op_ctx *c, const calq_deconv_gemm *d, int64_t n, int64_t r, float *acc)
{
    const int64_t len = d->ow * d->oc, off = (n * d->oh + r) * len;
    for (int k = 0; k < d->n_post; k++) {
        const calq_post_op *op = &d->post[k];
        const calq_tensor *t = c->post[k].operand;
        const float *o = t ? (const float *)t->data : NULL;
        const bool per_c = t && calq_tensor_numel(t) > 1;
        switch (op->kind) {
        case CALQ_POST_RELU: {
            const float a = op->alpha;
            if (a == 0.0f)
                for (int64_t e = 0; e < len; e++) acc[e] = acc[e] > 0 ? acc[e] : 0.0f;
            else
                for (int64_t e = 0; e < len; e++) acc[e] = acc[e] >= 0 ? acc[e] : a * acc[e];
            break;
        }
        case CALQ_POST_CLIP:
            for (int64_t e = 0; e < len; e++) {
                float v = acc[e] < op->alpha ? op->alpha : acc[e];
                acc[e] = v > op->beta ? op->beta : v;
            }
            break;
        case CALQ_POST_SUM:
            for (int64_t e = 0; e < len; e++) acc[e] = acc[e] + o[off + e];
            break;
        case CALQ_POST_ADD_CHANNEL:
            for (int64_t p = 0; p < d->ow; p++)
                for (int64_t q = 0; q < d->oc; q++) acc[p * d->oc + q] = acc[p * d->oc + q] + o[per_c ? q : 0];
            break;
        case CALQ_POST_MUL_CHANNEL:
            for (int64_t p = 0; p < d->ow; p++)
                for (int64_t q = 0; q < d->oc; q++) acc[p * d->oc + q] = acc[p * d->oc + q] * o[per_c ? q : 0];
            break;
        default: break;
        }
    }
    memcpy((float *)c->out[0]->data + off, acc, sizeof(float) * (size_t)len);
}

static void bias_row(const calq_deconv_gemm *d, float *acc)
{
    for (int64_t p = 0; p < d->ow; p++)
        if (d->bias)
            memcpy(acc + p * d->oc, d->bias, sizeof(float) * (size_t)d->oc);
        else
            memset(acc + p * d->oc, 0, sizeof(float) * (size_t)d->oc);
}

/* Output row r of image n from the columns: every tap (i, w, j) landing in it, in that order,
 * each group's channels from its own columns. */
#if defined(__x86_64__) && defined(__GNUC__)
/* cloned per instruction set (the build targets baseline x86-64): float adds in a fixed order,
 * the same bits in every clone */
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
static void
col2im_row(const calq_deconv_gemm *d, int64_t n, int64_t r, float *acc)
{
    const int64_t OC = d->oc, OCg = d->ocg;
    for (int64_t i = 0; i < d->kh; i++) {
        const int64_t t = r + d->p0 - i; /* = h * s0 */
        if (t < 0 || t % d->s0 != 0 || t / d->s0 >= d->h) continue;
        const float *row = d->cols + (n * d->h + t / d->s0) * d->g * d->w * d->ncol;
        for (int64_t w = 0; w < d->w; w++)
            for (int64_t j = 0; j < d->kw; j++) {
                const int64_t x = w * d->s1 - d->p1 + j;
                if (x < 0 || x >= d->ow) continue;
                float *dst = acc + x * OC;
                if (d->g == 1) {
                    const float *src = row + w * d->ncol + (i * d->kw + j) * OC;
                    for (int64_t q = 0; q < OC; q++) dst[q] += src[q];
                } else {
                    for (int64_t gr = 0; gr < d->g; gr++) {
                        const float *src = row + (gr * d->w + w) * d->ncol + (i * d->kw + j) * OCg;
                        for (int64_t q = 0; q < OCg; q++) dst[gr * OCg + q] += src[q];
                    }
                }
            }
    }
}

calq_status calq__deconv_gemm_run(calq_op_ctx *c, const calq_deconv_gemm *d)
{
    const float *x = c->in[0]->data;
    const int64_t len = d->ow * d->oc;
    int failed = 0;
    /* Parallel regions, inside which oneDNN's sgemm runs on the calling thread, so a product's
     * arithmetic does not depend on the thread count; for little work teams of one, oneDNN told
     * so too. */
    const bool serial = d->n * d->h * d->w * d->ic * d->kh * d->kw * d->ocg < CALQ_DNNL_SERIAL_WORK;
    const int prev = calq__dnnl_serial_begin(serial);
    if (!d->direct) {
        /* the columns of every (input row, group): A = the row's channels of the group (row
         * stride IC), B = the group's weights; with one input channel per group (a depthwise
         * upsampling) an outer product */
#pragma omp parallel for schedule(static) reduction(| : failed)
        for (int64_t t = 0; t < d->n * d->h * d->g; t++) {
            const int64_t nh = t / d->g, gr = t % d->g;
            const float *a = x + nh * d->w * d->ic + gr * d->icg, *bg = d->b + gr * d->icg * d->ncol;
            float *cg = d->cols + (nh * d->g + gr) * d->w * d->ncol;
            if (d->icg == 1) {
                for (int64_t w = 0; w < d->w; w++)
                    for (int64_t q = 0; q < d->ncol; q++) cg[w * d->ncol + q] = a[w * d->ic] * bg[q];
            } else if (dnnl_sgemm('N', 'N', d->w, d->ncol, d->icg, 1.0f, a, d->ic, bg, d->ncol, 0.0f, cg, d->ncol) !=
                       dnnl_success) {
                failed = 1;
            }
        }
        if (failed) {
            calq__dnnl_serial_end(serial, prev);
            return calq__op_fail(c, CALQ_ERR_INTERNAL, "oneDNN sgemm failed");
        }
    }
#pragma omp parallel reduction(| : failed)
    {
        float *acc = calq__dnnl_scratch(CALQ_SCRATCH_DECONV, sizeof(float) * (size_t)len);
        if (!acc) failed = 2;
#pragma omp for schedule(static)
        for (int64_t t = 0; t < d->n * d->oh; t++) {
            if (!acc) continue;
            const int64_t n = t / d->oh, r = t % d->oh;
            bias_row(d, acc);
            if (d->direct) {
                /* output row r = h * s0 + i */
                const int64_t h = r / d->s0, i = r % d->s0;
                if (dnnl_sgemm('N', 'N', d->w, d->ncol, d->ic, 1.0f, x + (n * d->h + h) * d->w * d->ic, d->ic,
                               d->b + i * d->ic * d->ncol, d->ncol, 1.0f, acc, d->ncol) != dnnl_success) {
                    failed |= 1;
                    continue;
                }
            } else {
                col2im_row(d, n, r, acc);
            }
            finish_row(c, d, n, r, acc);
        }
    }
    calq__dnnl_serial_end(serial, prev);
    if (failed & 2) return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory for a transposed convolution row");
    if (failed) return calq__op_fail(c, CALQ_ERR_INTERNAL, "oneDNN sgemm failed");
    return CALQ_OK;
}

void calq__deconv_gemm_free(calq_deconv_gemm *d)
{
    if (!d) return;
    free(d->b);
    free(d->bias);
    free(d->cols);
    free(d);
}
