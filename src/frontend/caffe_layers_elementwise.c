/* Element-wise Caffe layers: the activations (ReLU, PReLU, Sigmoid, TanH, ELU, AbsVal,
 * Dropout), Scale and Bias, Eltwise, Power, Exp and Log. Caffe's per-channel parameters become
 * constants shaped to broadcast the ONNX (numpy) way: [C] followed by one 1 per trailing axis. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/tensor.h"
#include "frontend/caffe.h"

static void same_shape(calq_caffe_ctx *c, int to, int from)
{
    calq__caffe_copy_shape(c, to, from);
}

/* The layer's own node `op` from bottom 0 (and `extra`, when >= 0) to top 0. */
static int own_node(calq_caffe_ctx *c, const calq_caffe_layer *L, const char *op, int x, int extra)
{
    int y = calq__caffe_top(c, L, 0);
    int in[2] = {x, extra};
    if (y < 0 || calq__caffe_node(c, L, op, NULL, true, in, extra >= 0 ? 2 : 1, &y, 1) < 0) return -1;
    same_shape(c, y, x);
    return c->g->n_nodes - 1;
}

calq_status calq__caffe_map_activation(calq_caffe_ctx *c, calq_caffe_layer *L)
{
    CALQ_TRY(calq__caffe_need_io(c, L, 1, 1, 1, 1));
    const char *t = L->type;
    int x = L->bottom[0], node;
    if (strcmp(t, "ReLU") == 0) {
        /* Caffe: max(x, 0) + negative_slope * min(x, 0), i.e. LeakyRelu when the slope is set. */
        float slope;
        CALQ_TRY(calq__caffe_get_float(c, calq__caffe_param(L, "relu_param"), "negative_slope", 0.0f, &slope));
        node = own_node(c, L, slope != 0.0f ? "LeakyRelu" : "Relu", x, -1);
        if (node >= 0 && slope != 0.0f) CALQ_TRY(calq__caffe_attr_float(c, node, "alpha", slope));
    } else if (strcmp(t, "ELU") == 0) {
        float alpha;
        CALQ_TRY(calq__caffe_get_float(c, calq__caffe_param(L, "elu_param"), "alpha", 1.0f, &alpha));
        node = own_node(c, L, "Elu", x, -1);
        if (node >= 0) CALQ_TRY(calq__caffe_attr_float(c, node, "alpha", alpha));
    } else {
        /* Dropout passes data through unchanged in the TEST phase. */
        const char *op = strcmp(t, "Sigmoid") == 0  ? "Sigmoid"
                         : strcmp(t, "TanH") == 0   ? "Tanh"
                         : strcmp(t, "AbsVal") == 0 ? "Abs"
                                                    : "Identity";
        node = own_node(c, L, op, x, -1);
    }
    return node < 0 ? c->status : CALQ_OK;
}

/* y = max(x, 0) + a_c * min(x, 0): ONNX PRelu with the slopes shaped [C, 1, ...] (one slope
 * for all channels when channel_shared). */
calq_status calq__caffe_map_prelu(calq_caffe_ctx *c, calq_caffe_layer *L)
{
    CALQ_TRY(calq__caffe_need_io(c, L, 1, 1, 1, 1));
    bool shared;
    CALQ_TRY(calq__caffe_get_bool(c, calq__caffe_param(L, "prelu_param"), "channel_shared", false, &shared));
    int r = calq__caffe_rank(c, L, 0);
    if (r < 0) return c->status;
    if (r < 2)
        return calq__caffe_fail(c, L, CALQ_ERR_UNSUPPORTED, "PReLU needs an N x C x ... bottom; this one has %d axes",
                                r);
    CALQ_TRY(calq__caffe_need_blobs(c, L, 1, "slopes"));
    int64_t C = calq__caffe_shape(c, L->bottom[0]).dims[1];
    int64_t dims[CALQ_MAX_DIMS] = {shared ? 1 : (C > 0 ? C : calq__caffe_blob_count(L, 0))};
    int nd = shared ? 1 : r - 1;
    for (int i = 1; i < nd; i++) dims[i] = 1;
    int slope = calq__caffe_blob_const(c, L, 0, "slope", dims, nd,
                                       shared ? "one slope (channel_shared)" : "one slope per channel");
    if (slope < 0) return c->status;
    return own_node(c, L, "PRelu", L->bottom[0], slope) < 0 ? c->status : CALQ_OK;
}

/* ---- Scale / Bias -------------------------------------------------------------------------------- */

/* Dims of a learned Scale/Bias parameter covering bottom axes [a, a + n): the bottom's own
 * dims when known, else the blob's declared ones; then a 1 per trailing axis so it broadcasts. */
static calq_status param_dims(calq_caffe_ctx *c, const calq_caffe_layer *L, int blob, int a, int n, int r,
                              int64_t *dims)
{
    const calq_caffe_shape xs = calq__caffe_shape(c, L->bottom[0]);
    bool known = true;
    for (int i = 0; i < n; i++) {
        dims[i] = xs.dims[a + i];
        if (dims[i] < 0) known = false;
    }
    if (!known && n == 1) {
        dims[0] = calq__caffe_blob_count(L, blob);
    } else if (!known) {
        int64_t bd[CALQ_MAX_DIMS];
        int bn = calq__caffe_blob_dims(L->blobs[blob], bd), skip = 0;
        while (bn - skip > n && bd[skip] == 1) skip++;
        if (bn - skip != n)
            return calq__caffe_fail(c, L, CALQ_ERR_UNSUPPORTED,
                                    "cannot tell the shape of its %d-axis parameter: give the net inputs a shape", n);
        memcpy(dims, bd + skip, sizeof(int64_t) * (size_t)n);
    }
    for (int i = a + n; i < r; i++) dims[i - a] = 1;
    return CALQ_OK;
}

/* Scale: y = x * s (+ b); Bias: y = x + b. The parameter is bottom 1 (reshaped to broadcast)
 * or, with one bottom, a learned blob covering num_axes axes from `axis`. */
calq_status calq__caffe_map_scale(calq_caffe_ctx *c, calq_caffe_layer *L)
{
    bool is_bias = strcmp(L->type, "Bias") == 0;
    CALQ_TRY(calq__caffe_need_io(c, L, 1, 2, 1, 1));
    const calq_tp_node *p = calq__caffe_param(L, is_bias ? "bias_param" : "scale_param");
    int64_t axis, num_axes;
    bool bias_term = false;
    CALQ_TRY(calq__caffe_get_int(c, p, "axis", 1, &axis));
    CALQ_TRY(calq__caffe_get_int(c, p, "num_axes", 1, &num_axes));
    if (!is_bias) CALQ_TRY(calq__caffe_get_bool(c, p, "bias_term", false, &bias_term));
    int r = calq__caffe_rank(c, L, 0);
    if (r < 0) return c->status;
    int x = L->bottom[0], operand, blob = 0, a, n;
    int64_t dims[CALQ_MAX_DIMS];
    if (L->n_bottom == 2) {
        int r1 = calq__caffe_rank(c, L, 1);
        if (r1 < 0) return c->status;
        a = r1 == 0 ? 0 : calq__caffe_axis(c, L, axis, r, "axis"); /* a scalar ignores axis */
        if (a < 0) return c->status;
        n = r1;
        if (a + n > r)
            return calq__caffe_fail(c, L, CALQ_ERR_BAD_FORMAT,
                                    "bottom '%s' has %d axes, too many to apply from axis %d of a %d-axis bottom",
                                    c->g->values[L->bottom[1]].name, r1, a, r);
        const calq_caffe_shape s1 = calq__caffe_shape(c, L->bottom[1]);
        for (int i = 0; i < n; i++) dims[i] = s1.dims[i];
        for (int i = a + n; i < r; i++) dims[i - a] = 1;
        operand = L->bottom[1];
        if (a + n < r) {
            /* [d0..d(n-1), 1, ...]: ONNX Reshape copies a 0 from the same axis of its input. */
            int64_t shape[CALQ_MAX_DIMS] = {0};
            for (int i = n; i < r - a; i++) shape[i] = 1;
            int sv = calq__caffe_const_i64(c, L, "broadcast_shape", shape, r - a);
            operand = sv < 0 ? -1 : calq__caffe_binary(c, L, "Reshape", "broadcast", L->bottom[1], sv);
            if (operand < 0) return c->status;
        }
        if (bias_term) CALQ_TRY(calq__caffe_need_blobs(c, L, 1, "bias"));
    } else {
        a = calq__caffe_axis(c, L, axis, r, "axis");
        if (a < 0) return c->status;
        if (num_axes < -1 || (num_axes >= 0 && a + num_axes > r))
            return calq__caffe_fail(c, L, CALQ_ERR_BAD_FORMAT,
                                    "num_axes %lld does not fit a %d-axis bottom from axis %d", (long long)num_axes, r,
                                    a);
        n = num_axes == -1 ? r - a : (int)num_axes;
        CALQ_TRY(calq__caffe_need_blobs(c, L, bias_term ? 2 : 1,
                                        is_bias     ? "bias"
                                        : bias_term ? "scale, bias"
                                                    : "scale"));
        CALQ_TRY(param_dims(c, L, 0, a, n, r, dims));
        operand = calq__caffe_blob_const(c, L, 0, is_bias ? "bias" : "scale", dims, r - a,
                                         "the bottom's dims over num_axes axes from axis");
        if (operand < 0) return c->status;
        blob = 1;
    }
    if (is_bias) return own_node(c, L, "Add", x, operand) < 0 ? c->status : CALQ_OK;
    if (!bias_term) return own_node(c, L, "Mul", x, operand) < 0 ? c->status : CALQ_OK;
    if (L->n_bottom == 2 && dims[0] < 0) {
        if (n != 1)
            return calq__caffe_fail(c, L, CALQ_ERR_UNSUPPORTED,
                                    "cannot tell the shape of its bias: give the net inputs "
                                    "a shape");
        dims[0] = calq__caffe_blob_count(L, blob);
    }
    int b = calq__caffe_blob_const(c, L, blob, "bias", dims, r - a, "the same shape as the scale");
    int in[2] = {x, operand};
    int t = b < 0 ? -1 : calq__caffe_tmp(c, L, "scaled");
    if (t < 0 || calq__caffe_node(c, L, "Mul", NULL, true, in, 2, &t, 1) < 0) return c->status;
    int y = calq__caffe_top(c, L, 0);
    int in2[2] = {t, b};
    if (y < 0 || calq__caffe_node(c, L, "Add", "bias_add", false, in2, 2, &y, 1) < 0) return c->status;
    same_shape(c, y, x);
    return CALQ_OK;
}

/* ---- Eltwise ----------------------------------------------------------------------------------- */

/* SUM: y = sum_i coeff_i * x_i, accumulated left to right as Caffe's axpy loop does; PROD:
 * a chain of Mul; MAX: one variadic Max. Caffe requires equal shapes (no broadcasting). */
calq_status calq__caffe_map_eltwise(calq_caffe_ctx *c, calq_caffe_layer *L)
{
    static const char *const ops[] = {"PROD", "SUM", "MAX"};
    CALQ_TRY(calq__caffe_need_io(c, L, 2, -1, 1, 1));
    const calq_tp_node *p = calq__caffe_param(L, "eltwise_param");
    int op, n_coeff = calq__caffe_count(p, "coeff");
    CALQ_TRY(calq__caffe_get_enum(c, p, "operation", ops, 3, 1, &op));
    if (n_coeff && (op != 1 || n_coeff != L->n_bottom))
        return calq__caffe_fail(c, L, CALQ_ERR_BAD_FORMAT,
                                "coeff is for SUM only, one per bottom (%d coefficients, %d bottoms)", n_coeff,
                                L->n_bottom);
    const calq_caffe_shape s0 = calq__caffe_shape(c, L->bottom[0]);
    for (int i = 1; i < L->n_bottom; i++) {
        const calq_caffe_shape si = calq__caffe_shape(c, L->bottom[i]);
        bool differ = s0.ndim >= 0 && si.ndim >= 0 && s0.ndim != si.ndim;
        for (int d = 0; !differ && d < s0.ndim && d < si.ndim; d++)
            differ = s0.dims[d] >= 0 && si.dims[d] >= 0 && s0.dims[d] != si.dims[d];
        if (differ) {
            char a[128], b[128];
            return calq__caffe_fail(c, L, CALQ_ERR_SHAPE, "bottoms '%s' (%s) and '%s' (%s) differ in shape",
                                    c->g->values[L->bottom[0]].name, calq__shape_str(s0.dims, s0.ndim, a, sizeof a),
                                    c->g->values[L->bottom[i]].name, calq__shape_str(si.dims, si.ndim, b, sizeof b));
        }
    }
    if (op == 2) {
        int y = calq__caffe_top(c, L, 0);
        if (y < 0 || calq__caffe_node(c, L, "Max", NULL, true, L->bottom, L->n_bottom, &y, 1) < 0) return c->status;
        same_shape(c, y, L->bottom[0]);
        return CALQ_OK;
    }
    int acc = -1;
    for (int i = 0; i < L->n_bottom; i++) {
        int term = L->bottom[i];
        float coeff = 1.0f;
        if (n_coeff) CALQ_TRY(calq__caffe_get_float_at(c, p, "coeff", i, &coeff));
        if (coeff != 1.0f) {
            char what[32];
            snprintf(what, sizeof what, "coeff%d", i);
            int cv = calq__caffe_const_scalar(c, L, what, coeff);
            snprintf(what, sizeof what, "term%d", i);
            term = cv < 0 ? -1 : calq__caffe_binary(c, L, "Mul", what, term, cv);
            if (term < 0) return c->status;
        }
        if (i == 0) {
            acc = term;
            continue;
        }
        const char *bop = op == 1 ? "Add" : "Mul";
        int in[2] = {acc, term};
        int y;
        if (i + 1 < L->n_bottom) {
            char what[32];
            snprintf(what, sizeof what, "partial%d", i);
            y = calq__caffe_tmp(c, L, what);
            if (y < 0 || calq__caffe_node(c, L, bop, what, false, in, 2, &y, 1) < 0) return c->status;
        } else {
            y = calq__caffe_top(c, L, 0);
            if (y < 0 || calq__caffe_node(c, L, bop, NULL, true, in, 2, &y, 1) < 0) return c->status;
        }
        same_shape(c, y, L->bottom[0]);
        acc = y;
    }
    return CALQ_OK;
}

/* ---- Power, Exp, Log ------------------------------------------------------------------------------ */

/* A chain of helper steps ending in the layer's own node; steps[i] = {op, what, constant}. */
typedef struct step {
    const char *op, *what;
    float k;
    bool has_k;
} step;

static calq_status chain(calq_caffe_ctx *c, const calq_caffe_layer *L, const step *steps, int n)
{
    int x = L->bottom[0];
    if (n == 0) return own_node(c, L, "Identity", x, -1) < 0 ? c->status : CALQ_OK;
    for (int i = 0; i < n; i++) {
        int k = -1;
        if (steps[i].has_k && (k = calq__caffe_const_scalar(c, L, steps[i].what, steps[i].k)) < 0) return c->status;
        if (i + 1 == n) return own_node(c, L, steps[i].op, x, k) < 0 ? c->status : CALQ_OK;
        char what[64];
        snprintf(what, sizeof what, "%s_out", steps[i].what);
        int in[2] = {x, k};
        int y = calq__caffe_tmp(c, L, what);
        if (y < 0 || calq__caffe_node(c, L, steps[i].op, steps[i].what, false, in, k >= 0 ? 2 : 1, &y, 1) < 0)
            return c->status;
        same_shape(c, y, L->bottom[0]);
        x = y;
    }
    return CALQ_OK;
}

/* y = (shift + scale * x)^power, the identity steps left out as Caffe's PowerLayer does. When
 * power * scale == 0 Caffe ignores x and fills (power == 0 ? 1 : shift^power). */
calq_status calq__caffe_map_power(calq_caffe_ctx *c, calq_caffe_layer *L)
{
    CALQ_TRY(calq__caffe_need_io(c, L, 1, 1, 1, 1));
    const calq_tp_node *p = calq__caffe_param(L, "power_param");
    float power, scale, shift;
    CALQ_TRY(calq__caffe_get_float(c, p, "power", 1.0f, &power));
    CALQ_TRY(calq__caffe_get_float(c, p, "scale", 1.0f, &scale));
    CALQ_TRY(calq__caffe_get_float(c, p, "shift", 0.0f, &shift));
    if (power * scale == 0.0f) {
        float v = power == 0.0f ? 1.0f : powf(shift, power);
        int k = calq__caffe_const_scalar(c, L, "value", v);
        int shape = k < 0 ? -1 : calq__caffe_unary(c, L, "Shape", "shape", L->bottom[0]);
        int y = shape < 0 ? -1 : calq__caffe_top(c, L, 0);
        int in[2] = {k, shape};
        if (y < 0 || calq__caffe_node(c, L, "Expand", NULL, true, in, 2, &y, 1) < 0) return c->status;
        same_shape(c, y, L->bottom[0]);
        return CALQ_OK;
    }
    step s[3];
    int n = 0;
    if (scale != 1.0f) s[n++] = (step){"Mul", "scale", scale, true};
    if (shift != 0.0f) s[n++] = (step){"Add", "shift", shift, true};
    if (power != 1.0f) s[n++] = (step){"Pow", "power", power, true};
    return chain(c, L, s, n);
}

/* Exp: y = base^(shift + scale * x) = outer * exp(inner * x) with inner = ln(base) * scale and
 * outer = base^shift (base -1 means e), as Caffe's ExpLayer evaluates it. Log: y =
 * ln(shift + scale * x) / ln(base). */
calq_status calq__caffe_map_exp_log(calq_caffe_ctx *c, calq_caffe_layer *L)
{
    CALQ_TRY(calq__caffe_need_io(c, L, 1, 1, 1, 1));
    bool is_exp = strcmp(L->type, "Exp") == 0;
    const calq_tp_node *p = calq__caffe_param(L, is_exp ? "exp_param" : "log_param");
    float base, scale, shift;
    CALQ_TRY(calq__caffe_get_float(c, p, "base", -1.0f, &base));
    CALQ_TRY(calq__caffe_get_float(c, p, "scale", 1.0f, &scale));
    CALQ_TRY(calq__caffe_get_float(c, p, "shift", 0.0f, &shift));
    if (base != -1.0f && !(base > 0.0f))
        return calq__caffe_fail(c, L, CALQ_ERR_BAD_FORMAT, "base must be positive (or -1 for e), got %g", (double)base);
    float log_base = base == -1.0f ? 1.0f : logf(base);
    step s[4];
    int n = 0;
    if (is_exp) {
        float inner = log_base * scale;
        float outer = shift == 0.0f ? 1.0f : (base != -1.0f ? powf(base, shift) : expf(shift));
        if (inner != 1.0f) s[n++] = (step){"Mul", "inner_scale", inner, true};
        s[n++] = (step){"Exp", "exp", 0.0f, false};
        if (outer != 1.0f) s[n++] = (step){"Mul", "outer_scale", outer, true};
    } else {
        float base_scale = base == -1.0f ? 1.0f : 1.0f / log_base;
        if (scale != 1.0f) s[n++] = (step){"Mul", "scale", scale, true};
        if (shift != 0.0f) s[n++] = (step){"Add", "shift", shift, true};
        s[n++] = (step){"Log", "log", 0.0f, false};
        if (base_scale != 1.0f) s[n++] = (step){"Mul", "base_scale", base_scale, true};
    }
    return chain(c, L, s, n);
}
