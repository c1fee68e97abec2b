/* Which element-wise layers can run as a post-op of the convolution (or matrix product) before
 * them, and with which parameters: the one table of that concept (exec/post_ops.h).
 *
 * Exactness (calq_post_op.exact) compares oneDNN's post-op with calq's reference formula
 * (kernels/elementwise_unary.c) for finite inputs: Relu / LeakyRelu (compare and multiply), Clip
 * (max then min), the residual sum, the per-channel add / multiply, a division by one constant
 * value and a MatMul's bias (an add per last-axis element) are the same operations in float32.
 * HardSigmoid / HardSwish (oneDNN contracts alpha * x + beta into one fused multiply-add where
 * calq rounds twice), Sigmoid, Tanh, Elu and SiLU (oneDNN's polynomial exp / tanh) differ in the
 * last bits, within the fast-vs-reference tolerance. NaN inputs may map differently (oneDNN's
 * Relu is max(x, 0), which turns NaN into 0). */
#include "exec/post_ops.h"

#include <float.h>
#include <math.h>
#include <string.h>

typedef enum { P_UNARY, P_CLIP, P_ADD, P_MUL, P_DIV } post_form;

static const struct {
    const char *op_type;
    post_form form;
    calq_post_kind kind;
    bool exact;
    const char *alpha_attr, *beta_attr;
    float alpha, beta; /* attribute defaults (ONNX) or fixed parameters */
} post_table[] = {
    {"Relu", P_UNARY, CALQ_POST_RELU, true, NULL, NULL, 0.0f, 0.0f},
    {"LeakyRelu", P_UNARY, CALQ_POST_RELU, true, "alpha", NULL, 0.01f, 0.0f},
    {"Clip", P_CLIP, CALQ_POST_CLIP, true, "min", "max", -FLT_MAX, FLT_MAX},
    {"HardSigmoid", P_UNARY, CALQ_POST_HARD_SIGMOID, false, "alpha", "beta", 0.2f, 0.5f},
    {"HardSwish", P_UNARY, CALQ_POST_HARD_SWISH, false, NULL, NULL, 0.0f, 0.0f},
    {"Sigmoid", P_UNARY, CALQ_POST_SIGMOID, false, NULL, NULL, 0.0f, 0.0f},
    {"Tanh", P_UNARY, CALQ_POST_TANH, false, NULL, NULL, 0.0f, 0.0f},
    {"Elu", P_UNARY, CALQ_POST_ELU, false, "alpha", NULL, 1.0f, 0.0f},
    {"Add", P_ADD, CALQ_POST_SUM, true, NULL, NULL, 0.0f, 0.0f},
    {"Mul", P_MUL, CALQ_POST_MUL_CHANNEL, true, NULL, NULL, 0.0f, 0.0f},
    {"Div", P_DIV, CALQ_POST_DIV_SCALAR, true, NULL, NULL, 0.0f, 0.0f},
};

static bool is_f32(const calq_tensor *t)
{
    return t->dtype == CALQ_DTYPE_FLOAT32;
}

/* A constant holding one value per channel of x ([C], [C,1,...] right-aligned to x's axis 1) or
 * a single value. */
static bool per_channel_const(const calq_plan_value *pv, const calq_tensor *x)
{
    if ((pv->kind != CALQ_PV_CONST && pv->kind != CALQ_PV_FOLDED) || !is_f32(&pv->t) || !pv->t.data) return false;
    const calq_tensor *k = &pv->t;
    int64_t n = calq_tensor_numel(k);
    if (n == 1) return k->ndim <= x->ndim;
    int off = x->ndim - k->ndim; /* k's dim d sits at x's axis d + off */
    if (n != x->dims[1] || off < 0 || off > 1) return false;
    for (int d = 0; d < k->ndim; d++)
        if (k->dims[d] != (d + off == 1 ? x->dims[1] : 1)) return false;
    return true;
}

/* A constant of the last dim's length broadcast over the other dims ([N], [1, .., N]). */
static bool last_axis_const(const calq_plan_value *pv, const calq_tensor *x)
{
    if ((pv->kind != CALQ_PV_CONST && pv->kind != CALQ_PV_FOLDED) || !is_f32(&pv->t) || !pv->t.data) return false;
    const calq_tensor *k = &pv->t;
    return x->ndim >= 1 && k->ndim >= 1 && k->ndim <= x->ndim && k->dims[k->ndim - 1] == x->dims[x->ndim - 1] &&
           calq_tensor_numel(k) == x->dims[x->ndim - 1];
}

/* Clip's bounds: attributes before opset 11, optional constant scalar inputs after. */
static bool clip_bounds(const calq_plan *p, const calq_node *n, float *lo, float *hi)
{
    *lo = -INFINITY;
    *hi = INFINITY;
    if (n->opset < 11) {
        *lo = calq__attr_float(n, "min", -FLT_MAX);
        *hi = calq__attr_float(n, "max", FLT_MAX);
        return true;
    }
    for (int k = 1; k < 3 && k < n->n_inputs; k++) {
        if (n->inputs[k] < 0) continue;
        const calq_plan_value *pv = &p->vals[n->inputs[k]];
        if ((pv->kind != CALQ_PV_CONST && pv->kind != CALQ_PV_FOLDED) || !is_f32(&pv->t) ||
            calq_tensor_numel(&pv->t) != 1 || !pv->t.data)
            return false;
        *(k == 1 ? lo : hi) = *(const float *)pv->t.data;
    }
    /* numpy.clip with lo > hi gives hi everywhere; oneDNN's clip is not defined for it */
    return !(*lo > *hi);
}

bool calq__post_op_for(const calq_plan *p, const calq_node *n, int x, calq_post_op *op, int *operand_v)
{
    *operand_v = -1;
    memset(op, 0, sizeof *op);
    if (n->domain[0] || n->n_outputs != 1 || n->outputs[0] < 0) return false;
    const calq_tensor *xt = &p->vals[x].t, *yt = &p->vals[n->outputs[0]].t;
    if (!is_f32(xt) || !is_f32(yt) || !calq__shape_equal(xt->dims, xt->ndim, yt->dims, yt->ndim)) return false;
    for (size_t i = 0; i < sizeof post_table / sizeof post_table[0]; i++) {
        if (strcmp(post_table[i].op_type, n->op_type) != 0) continue;
        op->kind = post_table[i].kind;
        op->exact = post_table[i].exact;
        switch (post_table[i].form) {
        case P_UNARY:
            if (n->n_inputs != 1 || n->inputs[0] != x) return false;
            op->alpha = post_table[i].alpha_attr ? calq__attr_float(n, post_table[i].alpha_attr, post_table[i].alpha)
                                                 : post_table[i].alpha;
            op->beta = post_table[i].beta_attr ? calq__attr_float(n, post_table[i].beta_attr, post_table[i].beta)
                                               : post_table[i].beta;
            /* a LeakyRelu of slope 0 gives 0 * x (-0, NaN for -inf) where the post-op, as Relu,
             * gives +0 */
            if (op->kind == CALQ_POST_RELU && post_table[i].alpha_attr && op->alpha == 0.0f) op->exact = false;
            return true;
        case P_CLIP: return n->inputs[0] == x && clip_bounds(p, n, &op->alpha, &op->beta);
        case P_DIV: {
            /* x / c with c one constant value (not c / x) */
            if (n->n_inputs != 2 || n->inputs[0] != x || n->inputs[1] < 0 || n->inputs[1] == x) return false;
            const calq_plan_value *ov = &p->vals[n->inputs[1]];
            if ((ov->kind != CALQ_PV_CONST && ov->kind != CALQ_PV_FOLDED) || !is_f32(&ov->t) || !ov->t.data ||
                calq_tensor_numel(&ov->t) != 1 || ov->t.ndim > xt->ndim)
                return false;
            *operand_v = n->inputs[1];
            op->operand = &ov->t;
            return true;
        }
        case P_ADD:
        case P_MUL: {
            if (n->n_inputs != 2 || n->inputs[0] < 0 || n->inputs[1] < 0) return false;
            int other = n->inputs[0] == x ? n->inputs[1] : n->inputs[0];
            if (other == x || (n->inputs[0] != x && n->inputs[1] != x)) return false;
            const calq_plan_value *ov = &p->vals[other];
            if (per_channel_const(ov, xt)) {
                op->kind = post_table[i].form == P_ADD ? CALQ_POST_ADD_CHANNEL : CALQ_POST_MUL_CHANNEL;
            } else if (post_table[i].form == P_ADD && is_f32(&ov->t) &&
                       calq__shape_equal(ov->t.dims, ov->t.ndim, xt->dims, xt->ndim)) {
                op->kind = CALQ_POST_SUM;
            } else if (post_table[i].form == P_ADD && last_axis_const(ov, xt)) {
                op->kind = CALQ_POST_ADD_LAST;
            } else {
                return false;
            }
            *operand_v = other;
            op->operand = &ov->t;
            return true;
        }
        }
    }
    return false;
}
