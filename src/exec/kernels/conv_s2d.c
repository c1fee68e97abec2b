/* ConvTranspose with kernel == stride as matrix products (see conv_s2d.h). */
#include "exec/kernels/conv_s2d.h"

#include <oneapi/dnnl/dnnl.h>
#include <stdlib.h>

struct calq_deconv_s2d {
    int64_t n, h, w, ic, oc, s0, s1;
    float *b_rows; /* [s0][IC][s1 * OC]: the weights of kernel row i, B_i (owner: this) */
    float *bias;   /* [s1 * OC]: the bias repeated for the s1 kernel columns, or NULL (owner: this) */
};

bool calq__deconv_s2d_fits(const calq_conv_geom *g)
{
    if (!g->transpose || g->nsp != 2 || g->group != 1) return false;
    for (int i = 0; i < 2; i++)
        if (g->k[i] != g->stride[i] || g->k[i] < 1 || g->dil[i] != 1 || g->pad_b[i] != 0 || g->pad_e[i] != 0 ||
            g->out_pad[i] != 0 || g->out[i] != g->in[i] * g->k[i])
            return false;
    return true;
}

calq_status calq__deconv_s2d_create(calq_op_ctx *c, const calq_conv_geom *g, calq_deconv_s2d **out)
{
    *out = NULL;
    if (!(c->const_inputs & 2u) || !c->in[1]->data) return CALQ_OK;
    if (g->has_bias && (!(c->const_inputs & 4u) || !c->in[2]->data)) return CALQ_OK;
    calq_deconv_s2d *d = calloc(1, sizeof *d);
    if (!d) return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory packing the transposed convolution");
    d->n = g->n;
    d->h = g->in[0];
    d->w = g->in[1];
    d->ic = g->c_in;
    d->oc = g->c_out;
    d->s0 = g->stride[0];
    d->s1 = g->stride[1];
    const int64_t row = d->s1 * d->oc;
    d->b_rows = malloc(sizeof(float) * (size_t)(d->s0 * d->ic * row));
    if (g->has_bias) d->bias = malloc(sizeof(float) * (size_t)row);
    if (!d->b_rows || (g->has_bias && !d->bias)) {
        calq__deconv_s2d_free(d);
        return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory packing the transposed convolution");
    }
    /* ONNX ConvTranspose weights: [IC, OC, s0, s1] */
    const float *wt = c->in[1]->data;
    for (int64_t i = 0; i < d->s0; i++)
        for (int64_t ic = 0; ic < d->ic; ic++)
            for (int64_t j = 0; j < d->s1; j++)
                for (int64_t oc = 0; oc < d->oc; oc++)
                    d->b_rows[(i * d->ic + ic) * row + j * d->oc + oc] =
                        wt[((ic * d->oc + oc) * d->s0 + i) * d->s1 + j];
    if (d->bias) {
        const float *b = c->in[2]->data;
        for (int64_t j = 0; j < d->s1; j++)
            for (int64_t oc = 0; oc < d->oc; oc++) d->bias[j * d->oc + oc] = b[oc];
    }
    *out = d;
    return CALQ_OK;
}

calq_status calq__deconv_s2d_run(calq_op_ctx *c, const calq_deconv_s2d *d)
{
    const float *x = c->in[0]->data;
    float *y = c->out[0]->data;
    const int64_t row = d->s1 * d->oc, tasks = d->n * d->h * d->s0;
    int failed = 0;
    /* One task per (image, input row, kernel row); inside the parallel region oneDNN's sgemm runs
     * on the calling thread, so a task's arithmetic does not depend on the thread count. */
#pragma omp parallel for schedule(static) reduction(| : failed)
    for (int64_t t = 0; t < tasks; t++) {
        const int64_t i = t % d->s0, nh = t / d->s0; /* nh = n * H + h */
        const float *a = x + nh * d->w * d->ic;
        float *cy = y + (nh * d->s0 + i) * d->w * row;
        if (d->bias)
            for (int64_t w = 0; w < d->w; w++)
                for (int64_t k = 0; k < row; k++) cy[w * row + k] = d->bias[k];
        if (dnnl_sgemm('N', 'N', d->w, row, d->ic, 1.0f, a, d->ic, d->b_rows + i * d->ic * row, row,
                       d->bias ? 1.0f : 0.0f, cy, row) != dnnl_success)
            failed = 1;
    }
    if (failed) return calq__op_fail(c, CALQ_ERR_INTERNAL, "oneDNN sgemm failed");
    return CALQ_OK;
}

void calq__deconv_s2d_free(calq_deconv_s2d *d)
{
    if (!d) return;
    free(d->b_rows);
    free(d->bias);
    free(d);
}
