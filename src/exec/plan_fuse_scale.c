/* An input-channel scale before a convolution, folded into the convolution's weights.
 *
 * Squeeze-and-excitation blocks (EfficientNet, MobileNetV3, RegNetY, GhostNet) end in
 * y = Mul(x, s), s one factor per channel of x (a Sigmoid or HardSigmoid of a small product), and
 * y feeds the block's projection convolution. Conv(x * s, W) = Conv(x, W') where W' is W with the
 * weights reading input channel i multiplied by s[i] (zero padding stays zero), so the planner
 * computes W' (Cout x Cin x k x k products) instead of the Mul (one pass reading and writing all
 * of x) when W is small next to x: at batch 1 the Mul was ~10 % of EfficientNet-B0's time.
 *
 * Rules: x and s float32; s holds x's channel count of values, broadcast over every other axis
 * ([1, C, 1...] or [C, 1...]); x's batch is 1 (each image has its own s, and a convolution runs
 * one weight tensor); y is read by nothing but the Conv's data input, is not kept or a graph
 * output; the Conv's weights are a constant of x's rank with at most half as many elements as x.
 *
 * Rounding: each product w * s[i] is rounded instead of each x * s[i], so the results differ from
 * the unfused layers' in the last bits (like the fused LayerNorm): only where inexact fusion is
 * allowed, i.e. not while an observer needs the unfused bits (calibration, --dump). */
#include <string.h>

#include "base/tensor.h"
#include "exec/kernels/conv_scale.h"
#include "exec/plan_fuse.h"
#include "graph/graph.h"
#include "graph/qkind.h"

/* s is one factor per channel of a [N, C, ...] tensor of rank `rank` (broadcast by Mul). */
static bool per_channel(const calq_tensor *s, int rank, int64_t channels)
{
    if (calq_tensor_numel(s) != channels || s->ndim < 1 || s->ndim > rank) return false;
    /* Mul broadcasts from the right: s's axis rank - 1 - j lines up with the tensor's last j-th */
    const int lift = rank - s->ndim;
    for (int d = 0; d < s->ndim; d++)
        if (s->dims[d] != (d + lift == 1 ? channels : 1)) return false;
    return s->ndim + 1 >= rank; /* reaches the channel axis */
}

static bool same_dims(const calq_tensor *a, const calq_tensor *b)
{
    return calq__shape_equal(a->dims, a->ndim, b->dims, b->ndim);
}

calq_status calq__plan_fuse_channel_scale(calq_fuse_in *f, int s, bool inexact, calq_plan_step *out, int *conv_step,
                                          bool *done, calq_error *err)
{
    *done = false;
    calq_plan *p = f->p;
    const calq_plan_step *ms = &f->old[s];
    if (!inexact || ms->dynamic || ms->n_in != 2 || ms->n_out != 1) return CALQ_OK;
    const calq_node *n = &p->g->nodes[ms->node];
    const int y = ms->out_v[0];
    if (n->domain[0] || strcmp(n->op_type, "Mul") != 0 || y < 0 || ms->in_v[0] < 0 || ms->in_v[1] < 0) return CALQ_OK;
    if (f->uses[y] != 1 || calq__fuse_kept(f, y)) return CALQ_OK;
    const calq_tensor *yt = &p->vals[y].t;
    if (yt->dtype != CALQ_DTYPE_FLOAT32 || yt->ndim < 3 || yt->dims[0] != 1) return CALQ_OK;
    int x = -1, sv = -1;
    for (int k = 0; k < 2 && x < 0; k++) {
        const calq_tensor *a = &p->vals[ms->in_v[k]].t, *b = &p->vals[ms->in_v[1 - k]].t;
        if (a->dtype == CALQ_DTYPE_FLOAT32 && b->dtype == CALQ_DTYPE_FLOAT32 && same_dims(a, yt) &&
            per_channel(b, yt->ndim, yt->dims[1]) && p->vals[ms->in_v[1 - k]].kind != CALQ_PV_NONE) {
            x = ms->in_v[k];
            sv = ms->in_v[1 - k];
        }
    }
    if (x < 0 || x == sv) return CALQ_OK;

    const int t = f->consumer[y];
    if (t <= s || f->absorbed[t] || f->old[t].dynamic) return CALQ_OK;
    calq_plan_step *cs = &f->old[t];
    const calq_node *cn = &p->g->nodes[cs->node];
    if (cn->domain[0] || strcmp(cn->op_type, calq__qkind(CALQ_QKIND_CONV)->onnx) != 0 || cs->n_in < 2 ||
        cs->in_v[0] != y || cs->in_v[1] < 0 || cs->in_v[1] == y || (cs->n_in > 2 && cs->in_v[2] == y))
        return CALQ_OK;
    const int w = cs->in_v[1];
    const calq_tensor *wt = calq__fuse_const(f, w);
    const int64_t group = calq__attr_int(cn, "group", 1);
    if (!wt || wt->ndim != yt->ndim || group < 1 || wt->dims[0] % group != 0 || wt->dims[1] * group != yt->dims[1])
        return CALQ_OK;
    if (calq_tensor_numel(wt) > calq_tensor_numel(yt) / 2) return CALQ_OK;

    const int wv = calq__plan_add_value(p, w, CALQ_LAYOUT_PLAIN);
    if (wv < 0) return CALQ_OK; /* the value table is full: leave the layers as they are */
    const int ins[2] = {w, sv};
    CALQ_TRY(calq__fuse_new_step(f, s, &calq__op_scale_conv_weights, ins, 2, wv, out, err));
    out->node = cs->node; /* the kernel reads the convolution's group; errors name it */
    cs->in_v[0] = x;
    cs->in_v[1] = wv;
    cs->const_inputs &= ~2u;
    p->vals[y].kind = CALQ_PV_NONE;
    p->n_fused++;
    *conv_step = t;
    *done = true;
    return CALQ_OK;
}
