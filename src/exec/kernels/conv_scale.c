/* calq.ScaleConvWeights: a convolution's weights with each input channel's slice multiplied by
 * that channel's factor, so that Conv(x * s, W) runs as Conv(x, W') without the pass over x
 * (exec/plan_fuse_scale.c decides where). */
#include "exec/kernels/conv_scale.h"

#include "graph/graph.h"

static calq_status scale_infer(calq_op_ctx *c)
{
    calq__set_shape(c->out[0], c->in[0]->dtype, c->in[0]->dims, c->in[0]->ndim);
    return CALQ_OK;
}

/* W' = W * s over [Cout, Cin / group, k...]: output channel o belongs to group o / (Cout / group),
 * whose input channels start at that group times Cin / group. One float32 product per weight,
 * the same for any thread count (there is no sum). */
static calq_status scale_run(calq_op_ctx *c)
{
    const calq_tensor *w = c->in[0], *s = c->in[1];
    const int64_t group = calq__attr_int(c->node, "group", 1);
    if (w->dtype != CALQ_DTYPE_FLOAT32 || s->dtype != CALQ_DTYPE_FLOAT32 || w->ndim < 2 || group < 1)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "scaled weights: float32 weights of rank >= 2 expected");
    const int64_t cout = w->dims[0], cin_g = w->dims[1];
    if (cout % group != 0 || calq_tensor_numel(s) != cin_g * group)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "scaled weights: %lld factors for %lld groups of %lld input channels",
                             (long long)calq_tensor_numel(s), (long long)group, (long long)cin_g);
    const int64_t taps = cout && cin_g ? calq_tensor_numel(w) / (cout * cin_g) : 0, per_group = cout / group;
    const float *wd = w->data, *sd = s->data;
    float *y = c->out[0]->data;
    for (int64_t o = 0; o < cout; o++) {
        const float *f = sd + (o / per_group) * cin_g;
        const float *wo = wd + o * cin_g * taps;
        float *yo = y + o * cin_g * taps;
        if (taps == 1) /* a 1x1 convolution's row: one vector loop */
            for (int64_t i = 0; i < cin_g; i++) yo[i] = wo[i] * f[i];
        else
            for (int64_t i = 0; i < cin_g; i++)
                for (int64_t k = 0; k < taps; k++) yo[i * taps + k] = wo[i * taps + k] * f[i];
    }
    return CALQ_OK;
}

const calq_op_def calq__op_scale_conv_weights = {.op_type = "calq.ScaleConvWeights",
                                                 .min_inputs = 2,
                                                 .max_inputs = 2,
                                                 .min_outputs = 1,
                                                 .max_outputs = 1,
                                                 .infer = scale_infer,
                                                 .run = scale_run};
