/* Caffe layers with learned blobs or windows: Convolution, Deconvolution, InnerProduct,
 * Pooling, LRN and BatchNorm. Each maps onto ONNX operators (opset 13) with Caffe's exact
 * semantics; comments name the Caffe rule where the two differ in form. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/tensor.h"
#include "frontend/caffe.h"
#include "graph/qkind.h"

#define MAX_SPATIAL (CALQ_MAX_DIMS - 2)

/* A per-spatial-axis parameter of Convolution / Pooling: `field` once (all axes) or once per
 * axis (repeated fields only), or the 2-D pair hw_h + hw_w (hw NULL: no such pair). dflt < 0:
 * the parameter is required. */
static calq_status spatial(calq_caffe_ctx *c, const calq_caffe_layer *L, const calq_tp_node *p, const char *field,
                           const char *hw, int nsp, bool repeated, int64_t dflt, int64_t min, int64_t *out)
{
    char fh[64] = "", fw[64] = "";
    if (hw) {
        snprintf(fh, sizeof fh, "%s_h", hw);
        snprintf(fw, sizeof fw, "%s_w", hw);
    }
    bool has_h = hw && calq__caffe_count(p, fh) > 0, has_w = hw && calq__caffe_count(p, fw) > 0;
    int n = calq__caffe_count(p, field);
    if (has_h || has_w) {
        if (nsp != 2)
            return calq__caffe_fail(c, L, CALQ_ERR_BAD_FORMAT, "%s/%s are for 2-D inputs; this one has %d spatial axes",
                                    fh, fw, nsp);
        if (!has_h || !has_w) return calq__caffe_fail(c, L, CALQ_ERR_BAD_FORMAT, "give both %s and %s", fh, fw);
        if (n) return calq__caffe_fail(c, L, CALQ_ERR_BAD_FORMAT, "give either %s or %s/%s, not both", field, fh, fw);
        CALQ_TRY(calq__caffe_get_int(c, p, fh, 0, &out[0]));
        CALQ_TRY(calq__caffe_get_int(c, p, fw, 0, &out[1]));
    } else if (n == 0) {
        if (dflt < 0)
            return hw ? calq__caffe_fail(c, L, CALQ_ERR_BAD_FORMAT, "%s (or %s and %s) is required", field, fh, fw)
                      : calq__caffe_fail(c, L, CALQ_ERR_BAD_FORMAT, "%s is required", field);
        for (int i = 0; i < nsp; i++) out[i] = dflt;
    } else if (!repeated) {
        CALQ_TRY(calq__caffe_get_int(c, p, field, 0, &out[0]));
        for (int i = 1; i < nsp; i++) out[i] = out[0];
    } else {
        if (n != 1 && n != nsp)
            return calq__caffe_fail(c, L, CALQ_ERR_BAD_FORMAT, "%s has %d values; give 1 or %d (one per spatial axis)",
                                    field, n, nsp);
        for (int i = 0; i < nsp; i++) CALQ_TRY(calq__caffe_get_int_at(c, p, field, n == 1 ? 0 : i, &out[i]));
    }
    for (int i = 0; i < nsp; i++)
        if (out[i] < min || out[i] > ((int64_t)1 << 24))
            return calq__caffe_fail(c, L, CALQ_ERR_BAD_FORMAT, "%s %lld is out of range (at least %lld)", field,
                                    (long long)out[i], (long long)min);
    return CALQ_OK;
}

static void dims_text(const int64_t *dims, int n, char *buf, size_t size)
{
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < n && at < size; i++)
        at += (size_t)snprintf(buf + at, size - at, "%s%lld", i ? " x " : "", (long long)dims[i]);
}

/* An AMCT deploy model's quantized layer holds int8 weights and an int32 bias (§9.1); a float
 * layer float ones. Anything else is a damaged file. */
static calq_status check_storage(calq_caffe_ctx *c, const calq_caffe_layer *L, bool bias)
{
    calq_dtype w = calq__caffe_blob_storage(L->blobs[0]);
    calq_dtype b = bias ? calq__caffe_blob_storage(L->blobs[1]) : (w == CALQ_DTYPE_INT8 ? CALQ_DTYPE_INT32 : w);
    if ((w == CALQ_DTYPE_FLOAT32 && b == CALQ_DTYPE_FLOAT32) || (w == CALQ_DTYPE_INT8 && b == CALQ_DTYPE_INT32))
        return CALQ_OK;
    return calq__caffe_fail_weights(c, L,
                                    "holds %s weights and a %s bias; a layer takes float32 weights and bias, or (an "
                                    "AMCT deploy model, amct-reference.md §9.1) int8 weights and an int32 bias",
                                    calq_dtype_name(w), calq_dtype_name(b));
}

static calq_status window_attrs(calq_caffe_ctx *c, int node, int nsp, const int64_t *k, const int64_t *s,
                                const int64_t *pad, const int64_t *d)
{
    int64_t pads[2 * MAX_SPATIAL];
    for (int i = 0; i < nsp; i++) pads[i] = pads[nsp + i] = pad[i]; /* Caffe pads both sides alike */
    CALQ_TRY(calq__caffe_attr_ints(c, node, "kernel_shape", k, nsp));
    CALQ_TRY(calq__caffe_attr_ints(c, node, "strides", s, nsp));
    CALQ_TRY(calq__caffe_attr_ints(c, node, "pads", pads, 2 * nsp));
    if (d) CALQ_TRY(calq__caffe_attr_ints(c, node, "dilations", d, nsp));
    return CALQ_OK;
}

/* ---- Convolution / Deconvolution ---------------------------------------------------------------- */

/* Weights: Convolution [num_output, C/group, k...], Deconvolution [C, num_output/group, k...];
 * both are the ONNX Conv / ConvTranspose layouts. Several bottom/top pairs share the weights. */
static calq_status map_conv(calq_caffe_ctx *c, calq_caffe_layer *L)
{
    const calq_qkind *kind = calq__qkind_by_caffe(L->type); /* Convolution -> Conv, Deconvolution -> ConvTranspose */
    bool deconv = kind->layout == CALQ_WEIGHTS_CONV_TRANSPOSE;
    CALQ_TRY(calq__caffe_need_io(c, L, 1, -1, 1, -1));
    if (L->n_bottom != L->n_top)
        return calq__caffe_fail(c, L, CALQ_ERR_BAD_FORMAT, "needs one top per bottom (%d bottoms, %d tops)",
                                L->n_bottom, L->n_top);
    const calq_tp_node *p = calq__caffe_param(L, "convolution_param");
    int r = calq__caffe_rank(c, L, 0);
    if (r < 0) return c->status;
    int64_t axis, num_output, group;
    bool bias;
    CALQ_TRY(calq__caffe_get_int(c, p, "axis", 1, &axis));
    int a = calq__caffe_axis(c, L, axis, r, "axis");
    if (a < 0) return c->status;
    if (a != 1 || r < 3 || r - 2 > MAX_SPATIAL)
        return calq__caffe_fail(c, L, CALQ_ERR_UNSUPPORTED,
                                "calq convolves N x C x spatial inputs with the channel axis 1 (1 to %d spatial axes); "
                                "here the bottom has %d axes and the channel axis is %d",
                                MAX_SPATIAL, r, a);
    const int nsp = r - 2;
    CALQ_TRY(calq__caffe_get_int(c, p, "num_output", 0, &num_output));
    CALQ_TRY(calq__caffe_get_int(c, p, "group", 1, &group));
    CALQ_TRY(calq__caffe_get_bool(c, p, "bias_term", true, &bias));
    if (num_output <= 0 || group <= 0 || num_output % group || num_output > ((int64_t)1 << 30))
        return calq__caffe_fail(c, L, CALQ_ERR_BAD_FORMAT,
                                "num_output (%lld) must be positive and a multiple of group (%lld)",
                                (long long)num_output, (long long)group);
    int64_t k[MAX_SPATIAL], s[MAX_SPATIAL], pad[MAX_SPATIAL], d[MAX_SPATIAL];
    CALQ_TRY(spatial(c, L, p, "kernel_size", "kernel", nsp, true, -1, 1, k));
    CALQ_TRY(spatial(c, L, p, "stride", "stride", nsp, true, 1, 1, s));
    CALQ_TRY(spatial(c, L, p, "pad", "pad", nsp, true, 0, 0, pad));
    CALQ_TRY(spatial(c, L, p, "dilation", NULL, nsp, true, 1, 1, d));

    const calq_caffe_shape xs = calq__caffe_shape(c, L->bottom[0]);
    const int64_t cin = xs.dims[1], O = num_output, g = group;
    if (cin > 0 && cin % g)
        return calq__caffe_fail(c, L, CALQ_ERR_BAD_FORMAT,
                                "bottom '%s' has %lld channels, not a multiple of group %lld",
                                c->g->values[L->bottom[0]].name, (long long)cin, (long long)g);
    CALQ_TRY(calq__caffe_need_blobs(c, L, bias ? 2 : 1, bias ? "weights, bias" : "weights"));
    int64_t per = calq__caffe_numel(k, nsp), count = calq__caffe_blob_count(L, 0);
    if (per < 0 || per > ((int64_t)1 << 30) / (deconv ? O / g : O))
        return calq__caffe_fail(c, L, CALQ_ERR_UNSUPPORTED, "the kernel is too large (%s output channels x kernel)",
                                deconv ? "num_output/group" : "num_output");
    int64_t wd[CALQ_MAX_DIMS];
    char ks[96], expect[256];
    dims_text(k, nsp, ks, sizeof ks);
    /* The weights' size fixes the input channels; check them against the bottom's. */
    int64_t unit = deconv ? (O / g) * per : O * per;
    int64_t ci = count > 0 && count % unit == 0 ? count / unit : -1; /* conv: C/group, deconv: C */
    int64_t want_ci = cin > 0 ? (deconv ? cin : cin / g) : ci;
    if (ci < 0 || ci != want_ci) {
        if (cin > 0)
            snprintf(expect, sizeof expect,
                     "%s = %lld for the %lld input channels of bottom '%s' (group %lld, kernel %s)",
                     deconv ? "channels x num_output/group x kernel" : "num_output x channels/group x kernel",
                     (long long)(unit * want_ci), (long long)cin, c->g->values[L->bottom[0]].name, (long long)g, ks);
        else
            snprintf(expect, sizeof expect, "a multiple of %s = %lld (kernel %s)",
                     deconv ? "num_output/group x kernel" : "num_output x kernel", (long long)unit, ks);
        return calq__caffe_fail_weights(c, L,
                                        "blob 0 (weights) holds %lld values; the prototxt needs %s. Check that the "
                                        "prototxt and the caffemodel belong to the same model.",
                                        (long long)count, expect);
    }
    wd[0] = deconv ? ci : O;
    wd[1] = deconv ? O / g : ci;
    memcpy(wd + 2, k, sizeof(int64_t) * (size_t)nsp);
    CALQ_TRY(check_storage(c, L, bias));
    int w = calq__caffe_blob_const_any(c, L, 0, "weight", wd, nsp + 2, "weights");
    int b = -1;
    if (w < 0) return c->status;
    if (bias) {
        int64_t bd[1] = {O};
        b = calq__caffe_blob_const_any(c, L, 1, "bias", bd, 1, "one bias per output channel (num_output)");
        if (b < 0) return c->status;
    }
    for (int i = 0; i < L->n_bottom; i++) {
        int y = calq__caffe_top(c, L, i);
        if (y < 0) return c->status;
        int in[3] = {L->bottom[i], w, b};
        int node = calq__caffe_node(c, L, kind->onnx, i ? L->top[i] : NULL, true, in, bias ? 3 : 2, &y, 1);
        if (node < 0) return c->status;
        CALQ_TRY(window_attrs(c, node, nsp, k, s, pad, d));
        CALQ_TRY(calq__caffe_attr_int(c, node, "group", g));
        const calq_caffe_shape bs = calq__caffe_shape(c, L->bottom[i]);
        calq_caffe_shape ys = calq__caffe_shape(c, y);
        ys.ndim = bs.ndim;
        ys.dims[0] = bs.dims[0];
        ys.dims[1] = O;
        for (int j = 0; j < nsp && j + 2 < bs.ndim; j++) {
            int64_t in_d = bs.dims[2 + j], ext = d[j] * (k[j] - 1) + 1;
            int64_t o = deconv ? s[j] * (in_d - 1) + ext - 2 * pad[j] : (in_d + 2 * pad[j] - ext) / s[j] + 1;
            ys.dims[2 + j] = in_d > 0 && o > 0 ? o : -1;
        }
        calq__caffe_set_shape(c, y, &ys);
    }
    return CALQ_OK;
}

/* ---- InnerProduct ------------------------------------------------------------------------------ */

/* The node producing value v when it is an `op` node, else -1. */
static int producer_of(calq_caffe_ctx *c, int v, const char *op)
{
    for (int i = c->g->n_nodes - 1; i >= 0; i--) {
        const calq_node *n = &c->g->nodes[i];
        for (int k = 0; k < n->n_outputs; k++)
            if (n->outputs[k] == v) return strcmp(n->op_type, op) == 0 && !n->domain[0] ? i : -1;
    }
    return -1;
}

/* A copy of AscendQuant node q applied to float value x: "<layer>/quantize", same attributes. */
static int requantize(calq_caffe_ctx *c, const calq_caffe_layer *L, int q, int x)
{
    int y = calq__caffe_tmp(c, L, "quantized");
    int node = y < 0 ? -1 : calq__caffe_node(c, L, "AscendQuant", "quantize", false, &x, 1, &y, 1);
    if (node < 0) return -1;
    for (int k = 0; k < c->g->nodes[q].n_attrs; k++) {
        const calq_attr *a = &c->g->nodes[q].attrs[k];
        calq_status s = a->type == CALQ_ATTR_FLOAT    ? calq__caffe_attr_float(c, node, a->name, a->f)
                        : a->type == CALQ_ATTR_STRING ? calq__caffe_attr_string(c, node, a->name, a->s)
                                                      : calq__caffe_attr_int(c, node, a->name, a->i);
        if (s != CALQ_OK) return -1;
    }
    return y;
}

/* y = x' W^T + b with x' the bottom flattened from `axis` (Flatten + Gemm); the output keeps
 * the axes before `axis` (a Reshape when that is not just N). transpose: W is [K, num_output]. */
static calq_status map_inner_product(calq_caffe_ctx *c, calq_caffe_layer *L)
{
    CALQ_TRY(calq__caffe_need_io(c, L, 1, 1, 1, 1));
    const calq_tp_node *p = calq__caffe_param(L, "inner_product_param");
    int r = calq__caffe_rank(c, L, 0);
    if (r < 0) return c->status;
    int64_t axis, O;
    bool bias, transpose;
    CALQ_TRY(calq__caffe_get_int(c, p, "axis", 1, &axis));
    CALQ_TRY(calq__caffe_get_int(c, p, "num_output", 0, &O));
    CALQ_TRY(calq__caffe_get_bool(c, p, "bias_term", true, &bias));
    CALQ_TRY(calq__caffe_get_bool(c, p, "transpose", false, &transpose));
    int a = calq__caffe_axis(c, L, axis, r, "axis");
    if (a < 0) return c->status;
    if (O <= 0 || O > ((int64_t)1 << 30))
        return calq__caffe_fail(c, L, CALQ_ERR_BAD_FORMAT, "num_output must be positive, got %lld", (long long)O);
    const calq_caffe_shape xs = calq__caffe_shape(c, L->bottom[0]);
    int64_t K = calq__caffe_numel(xs.dims + a, r - a); /* -1 when a dim is unknown */
    if (K > INT64_MAX / O) K = -1;
    CALQ_TRY(calq__caffe_need_blobs(c, L, bias ? 2 : 1, bias ? "weights, bias" : "weights"));
    int64_t count = calq__caffe_blob_count(L, 0);
    if (count <= 0 || count % O || (K > 0 && count != O * K)) {
        char shape[128];
        if (K > 0)
            return calq__caffe_fail_weights(
                c, L,
                "blob 0 (weights) holds %lld values; the prototxt needs num_output x inputs "
                "= %lld x %lld = %lld (the inputs are bottom %s from axis %d). Check that "
                "the prototxt and the caffemodel belong to the same model.",
                (long long)count, (long long)O, (long long)K, (long long)(O * K),
                calq__shape_str(xs.dims, r, shape, sizeof shape), a);
        return calq__caffe_fail_weights(c, L,
                                        "blob 0 (weights) holds %lld values, not a positive multiple of num_output "
                                        "%lld. Check that the prototxt and the caffemodel belong to the same model.",
                                        (long long)count, (long long)O);
    }
    int64_t Kw = count / O;
    int64_t wd[2] = {transpose ? Kw : O, transpose ? O : Kw}, bd[1] = {O};
    CALQ_TRY(check_storage(c, L, bias));
    int w =
        calq__caffe_blob_const_any(c, L, 0, "weight", wd, 2, transpose ? "inputs x num_output" : "num_output x inputs");
    int b = bias ? calq__caffe_blob_const_any(c, L, 1, "bias", bd, 1, "num_output") : 0;
    if (w < 0 || b < 0) return c->status;
    int x = L->bottom[0];
    if (!(r == 2 && a == 1)) {
        /* An integer layer reads its int8 input straight from an AscendQuant, whose offset it
         * needs (§9.1): the flatten goes before a copy of that AscendQuant instead. */
        int q = calq__caffe_blob_storage(L->blobs[0]) == CALQ_DTYPE_INT8 ? producer_of(c, x, "AscendQuant") : -1;
        int from = q >= 0 ? c->g->nodes[q].inputs[0] : x;
        int flat = calq__caffe_tmp(c, L, "flatten");
        if (flat < 0) return c->status;
        int node = calq__caffe_node(c, L, "Flatten", "flatten", false, &from, 1, &flat, 1);
        if (node < 0 || calq__caffe_attr_int(c, node, "axis", a) != CALQ_OK) return c->status;
        x = flat;
        if (q >= 0 && (x = requantize(c, L, q, flat)) < 0) return c->status;
    }
    bool reshape = a != 1;
    int y = reshape ? calq__caffe_tmp(c, L, "gemm") : calq__caffe_top(c, L, 0);
    if (y < 0) return c->status;
    int in[3] = {x, w, b};
    int node = calq__caffe_node(c, L, calq__qkind_by_caffe(L->type)->onnx, NULL, true, in, bias ? 3 : 2, &y, 1);
    if (node < 0 || calq__caffe_attr_int(c, node, "transB", transpose ? 0 : 1) != CALQ_OK) return c->status;
    if (reshape) {
        /* Caffe keeps the axes before `axis`: [d0 .. d(axis-1), num_output]. */
        int shape;
        if (a == 0) {
            shape = calq__caffe_const_i64(c, L, "out_shape", &O, 1);
        } else {
            int lead = calq__caffe_shape_slice(c, L, "lead", L->bottom[0], 0, a);
            int tail = calq__caffe_const_i64(c, L, "num_output", &O, 1);
            if (lead < 0 || tail < 0) return c->status;
            shape = calq__caffe_binary(c, L, "Concat", "out_shape", lead, tail);
            if (shape < 0 || calq__caffe_attr_int(c, c->g->n_nodes - 1, "axis", 0) != CALQ_OK) return c->status;
        }
        int top = calq__caffe_top(c, L, 0);
        int rin[2] = {y, shape};
        if (shape < 0 || top < 0 || calq__caffe_node(c, L, "Reshape", "reshape", false, rin, 2, &top, 1) < 0)
            return c->status;
        y = top;
    }
    calq_caffe_shape ys = calq__caffe_shape(c, y);
    ys.ndim = a + 1;
    memcpy(ys.dims, xs.dims, sizeof(int64_t) * (size_t)a);
    ys.dims[a] = O;
    calq__caffe_set_shape(c, y, &ys);
    return CALQ_OK;
}

/* ---- Pooling ----------------------------------------------------------------------------------- */

/* Caffe rounds the pooled size up (round_mode CEIL, the default; OpenCV's copy spells it
 * ceil_mode: true) and, with padding, drops a last window that would start in the padding:
 * exactly ONNX ceil_mode = 1. AVE divides by the window clipped to the padded input
 * (hend = min(hstart + kernel, height + pad)), which is count_include_pad = 1. */
static calq_status map_pooling(calq_caffe_ctx *c, calq_caffe_layer *L)
{
    static const char *const methods[] = {"MAX", "AVE", "STOCHASTIC"};
    static const char *const rounds[] = {"CEIL", "FLOOR"};
    CALQ_TRY(calq__caffe_need_io(c, L, 1, 1, 1, 1));
    const calq_tp_node *p = calq__caffe_param(L, "pooling_param");
    int r = calq__caffe_rank(c, L, 0);
    if (r < 0) return c->status;
    if (r != 4)
        return calq__caffe_fail(c, L, CALQ_ERR_UNSUPPORTED, "Caffe pools N x C x H x W bottoms; this one has %d axes",
                                r);
    int method, round;
    bool global, ceil_mode;
    CALQ_TRY(calq__caffe_get_enum(c, p, "pool", methods, 3, 0, &method));
    CALQ_TRY(calq__caffe_get_bool(c, p, "global_pooling", false, &global));
    CALQ_TRY(calq__caffe_get_enum(c, p, "round_mode", rounds, 2, 0, &round));
    CALQ_TRY(calq__caffe_get_bool(c, p, "ceil_mode", round == 0, &ceil_mode));
    if (method == 2)
        return calq__caffe_fail(c, L, CALQ_ERR_UNSUPPORTED,
                                "STOCHASTIC pooling (at test time: sum(x^2)/sum(x) per window) is not supported");
    const calq_caffe_shape xs = calq__caffe_shape(c, L->bottom[0]);
    int y = calq__caffe_top(c, L, 0);
    if (y < 0) return c->status;
    calq_caffe_shape ys = xs;
    if (global) {
        if (calq__caffe_count(p, "kernel_size") || calq__caffe_count(p, "kernel_h") || calq__caffe_count(p, "kernel_w"))
            return calq__caffe_fail(c, L, CALQ_ERR_BAD_FORMAT, "global_pooling takes no kernel size");
        if (calq__caffe_node(c, L, method ? "GlobalAveragePool" : "GlobalMaxPool", NULL, true, L->bottom, 1, &y, 1) < 0)
            return c->status;
        ys.dims[2] = ys.dims[3] = 1;
        calq__caffe_set_shape(c, y, &ys);
        return CALQ_OK;
    }
    int64_t k[2], s[2], pad[2];
    CALQ_TRY(spatial(c, L, p, "kernel_size", "kernel", 2, false, -1, 1, k));
    CALQ_TRY(spatial(c, L, p, "stride", "stride", 2, false, 1, 1, s));
    CALQ_TRY(spatial(c, L, p, "pad", "pad", 2, false, 0, 0, pad));
    for (int i = 0; i < 2; i++)
        if (pad[i] >= k[i])
            return calq__caffe_fail(c, L, CALQ_ERR_BAD_FORMAT, "pad %lld must be smaller than the kernel %lld",
                                    (long long)pad[i], (long long)k[i]);
    const char *op = method ? calq__qkind(CALQ_QKIND_AVERAGE_POOL)->onnx : "MaxPool";
    int node = calq__caffe_node(c, L, op, NULL, true, L->bottom, 1, &y, 1);
    if (node < 0) return c->status;
    CALQ_TRY(window_attrs(c, node, 2, k, s, pad, NULL));
    CALQ_TRY(calq__caffe_attr_int(c, node, "ceil_mode", ceil_mode));
    if (method == 1) CALQ_TRY(calq__caffe_attr_int(c, node, "count_include_pad", 1));
    for (int i = 0; i < 2; i++) {
        int64_t in = xs.dims[2 + i], span = in + 2 * pad[i] - k[i];
        int64_t o = ceil_mode ? (span + s[i] - 1) / s[i] + 1 : span / s[i] + 1;
        if (ceil_mode && pad[i] && (o - 1) * s[i] >= in + pad[i]) o--;
        ys.dims[2 + i] = in > 0 && span >= 0 ? o : -1;
    }
    calq__caffe_set_shape(c, y, &ys);
    return CALQ_OK;
}

/* ---- LRN --------------------------------------------------------------------------------------- */

/* ACROSS_CHANNELS is ONNX LRN with bias = k. WITHIN_CHANNEL is Caffe's own composition:
 * x * (1 + alpha * avg_{size x size}(x^2))^-beta, the average over a window padded by
 * (size-1)/2 that always counts size^2 taps (Caffe's AVE pooling with padding), and shift 1
 * whatever k says (LRNLayer builds its power layer with shift 1). */
static calq_status map_lrn(calq_caffe_ctx *c, calq_caffe_layer *L)
{
    static const char *const regions[] = {"ACROSS_CHANNELS", "WITHIN_CHANNEL"};
    CALQ_TRY(calq__caffe_need_io(c, L, 1, 1, 1, 1));
    const calq_tp_node *p = calq__caffe_param(L, "lrn_param");
    int64_t size;
    float alpha, beta, k;
    int region;
    CALQ_TRY(calq__caffe_get_int(c, p, "local_size", 5, &size));
    CALQ_TRY(calq__caffe_get_float(c, p, "alpha", 1.0f, &alpha));
    CALQ_TRY(calq__caffe_get_float(c, p, "beta", 0.75f, &beta));
    CALQ_TRY(calq__caffe_get_float(c, p, "k", 1.0f, &k));
    CALQ_TRY(calq__caffe_get_enum(c, p, "norm_region", regions, 2, 0, &region));
    if (size <= 0 || size % 2 == 0 || size > 4096)
        return calq__caffe_fail(c, L, CALQ_ERR_BAD_FORMAT, "local_size must be odd and positive, got %lld",
                                (long long)size);
    int r = calq__caffe_rank(c, L, 0);
    if (r < 0) return c->status;
    if (r != 4)
        return calq__caffe_fail(c, L, CALQ_ERR_UNSUPPORTED, "LRN needs an N x C x H x W bottom; this one has %d axes",
                                r);
    int x = L->bottom[0];
    if (region == 0) {
        int y = calq__caffe_top(c, L, 0);
        int node = y < 0 ? -1 : calq__caffe_node(c, L, "LRN", NULL, true, &x, 1, &y, 1);
        if (node < 0) return c->status;
        CALQ_TRY(calq__caffe_attr_int(c, node, "size", size));
        CALQ_TRY(calq__caffe_attr_float(c, node, "alpha", alpha));
        CALQ_TRY(calq__caffe_attr_float(c, node, "beta", beta));
        CALQ_TRY(calq__caffe_attr_float(c, node, "bias", k));
        calq__caffe_copy_shape(c, y, x);
        return CALQ_OK;
    }
    int sq = calq__caffe_binary(c, L, "Mul", "square", x, x);
    int avg = sq < 0 ? -1 : calq__caffe_unary(c, L, "AveragePool", "pool", sq);
    if (avg < 0) return c->status;
    int pool = c->g->n_nodes - 1;
    int64_t win[2] = {size, size}, one[2] = {1, 1}, half[2] = {(size - 1) / 2, (size - 1) / 2};
    CALQ_TRY(window_attrs(c, pool, 2, win, one, half, NULL));
    CALQ_TRY(calq__caffe_attr_int(c, pool, "count_include_pad", 1));
    int va = calq__caffe_const_scalar(c, L, "alpha", alpha);
    int v1 = calq__caffe_const_scalar(c, L, "one", 1.0f);
    int vb = calq__caffe_const_scalar(c, L, "neg_beta", -beta);
    if (va < 0 || v1 < 0 || vb < 0) return c->status;
    int t = calq__caffe_binary(c, L, "Mul", "scale", avg, va);
    t = t < 0 ? -1 : calq__caffe_binary(c, L, "Add", "shift", t, v1);
    t = t < 0 ? -1 : calq__caffe_binary(c, L, "Pow", "power", t, vb);
    int y = t < 0 ? -1 : calq__caffe_top(c, L, 0);
    int in[2] = {x, t};
    if (y < 0 || calq__caffe_node(c, L, "Mul", NULL, true, in, 2, &y, 1) < 0) return c->status;
    calq__caffe_copy_shape(c, y, x);
    return CALQ_OK;
}

/* ---- BatchNorm --------------------------------------------------------------------------------- */

/* Blobs: mean, variance (both scaled by the moving-average factor) and the factor; Caffe
 * divides the first two by the factor (0 when the factor is 0). y = (x - mean) / sqrt(var +
 * eps), with no learned scale (a Scale layer follows in Caffe nets). use_global_stats false
 * normalises with the batch's own statistics over every axis but the channels. */
static calq_status map_batch_norm(calq_caffe_ctx *c, calq_caffe_layer *L)
{
    CALQ_TRY(calq__caffe_need_io(c, L, 1, 1, 1, 1));
    const calq_tp_node *p = calq__caffe_param(L, "batch_norm_param");
    bool global;
    float eps;
    CALQ_TRY(calq__caffe_get_bool(c, p, "use_global_stats", true, &global)); /* TEST phase default */
    CALQ_TRY(calq__caffe_get_float(c, p, "eps", 1e-5f, &eps));
    int r = calq__caffe_rank(c, L, 0);
    if (r < 0) return c->status;
    if (r < 2)
        return calq__caffe_fail(c, L, CALQ_ERR_UNSUPPORTED,
                                "BatchNorm needs an N x C x ... bottom; this one has %d axes", r);
    int x = L->bottom[0];
    const calq_caffe_shape xs = calq__caffe_shape(c, x);
    if (!global) {
        /* Caffe's BatchNorm always has its three blobs; they are not used here */
        if (L->n_blobs) CALQ_TRY(calq__caffe_need_blobs(c, L, 3, "mean, variance, moving-average factor"));
        int64_t axes[CALQ_MAX_DIMS];
        int n = 0;
        for (int i = 0; i < r; i++)
            if (i != 1) axes[n++] = i;
        int mean = calq__caffe_unary(c, L, "ReduceMean", "batch_mean", x);
        if (mean < 0 || calq__caffe_attr_ints(c, c->g->n_nodes - 1, "axes", axes, n) != CALQ_OK) return c->status;
        int d = calq__caffe_binary(c, L, "Sub", "centered", x, mean);
        int sq = d < 0 ? -1 : calq__caffe_binary(c, L, "Mul", "square", d, d);
        int var = sq < 0 ? -1 : calq__caffe_unary(c, L, "ReduceMean", "batch_variance", sq);
        if (var < 0 || calq__caffe_attr_ints(c, c->g->n_nodes - 1, "axes", axes, n) != CALQ_OK) return c->status;
        int ve = calq__caffe_const_scalar(c, L, "eps", eps);
        int t = ve < 0 ? -1 : calq__caffe_binary(c, L, "Add", "variance_eps", var, ve);
        t = t < 0 ? -1 : calq__caffe_unary(c, L, "Sqrt", "std", t);
        int y = t < 0 ? -1 : calq__caffe_top(c, L, 0);
        int in[2] = {d, t};
        if (y < 0 || calq__caffe_node(c, L, "Div", NULL, true, in, 2, &y, 1) < 0) return c->status;
        calq__caffe_copy_shape(c, y, x);
        return CALQ_OK;
    }
    CALQ_TRY(calq__caffe_need_blobs(c, L, 3, "mean, variance, moving-average factor"));
    int64_t C = xs.dims[1], n_mean = calq__caffe_blob_count(L, 0), n_var = calq__caffe_blob_count(L, 1);
    if (n_mean <= 0 || (C > 0 && n_mean != C) || n_var != n_mean || calq__caffe_blob_count(L, 2) != 1)
        return calq__caffe_fail_weights(c, L,
                                        "blobs hold %lld mean, %lld variance and %lld factor values; the layer needs "
                                        "one mean and one variance per channel%s and one factor",
                                        (long long)n_mean, (long long)n_var, (long long)calq__caffe_blob_count(L, 2),
                                        C > 0 ? " of its bottom" : "");
    int64_t nf, cd[1] = {n_mean}, one[1] = {1};
    CALQ_TRY(calq__caffe_check_blob(c, L, 0, "mean", cd, 1, "one per channel"));
    CALQ_TRY(calq__caffe_check_blob(c, L, 1, "variance", cd, 1, "one per channel"));
    CALQ_TRY(calq__caffe_check_blob(c, L, 2, "moving-average factor", one, 1, "one value"));
    float *mean = calq__caffe_blob_floats(c, L, 0, &n_mean);
    float *var = calq__caffe_blob_floats(c, L, 1, &n_var);
    float *factor = calq__caffe_blob_floats(c, L, 2, &nf);
    float *ones = calloc((size_t)n_mean + 1, sizeof *ones), *zeros = calloc((size_t)n_mean + 1, sizeof *zeros);
    calq_status s = CALQ_OK;
    if (!mean || !var || !factor || !ones || !zeros) {
        s = calq__caffe_oom(c);
    } else {
        float f = factor[0] == 0.0f ? 0.0f : 1.0f / factor[0];
        for (int64_t i = 0; i < n_mean; i++) {
            mean[i] *= f;
            var[i] *= f;
            ones[i] = 1.0f;
        }
        int64_t dims[1] = {n_mean};
        int in[5] = {
            x, calq__caffe_const_f32(c, L, "scale", ones, dims, 1), calq__caffe_const_f32(c, L, "bias", zeros, dims, 1),
            calq__caffe_const_f32(c, L, "mean", mean, dims, 1), calq__caffe_const_f32(c, L, "variance", var, dims, 1)};
        int y = calq__caffe_top(c, L, 0);
        int node = -1;
        if (in[1] >= 0 && in[2] >= 0 && in[3] >= 0 && in[4] >= 0 && y >= 0)
            node = calq__caffe_node(c, L, "BatchNormalization", NULL, true, in, 5, &y, 1);
        if (node < 0 || calq__caffe_attr_float(c, node, "epsilon", eps) != CALQ_OK)
            s = c->status;
        else
            calq__caffe_set_shape(c, y, &xs);
    }
    free(mean);
    free(var);
    free(factor);
    free(ones);
    free(zeros);
    return s;
}

/* ---- the mapper table -------------------------------------------------------------------------- */

calq_caffe_map_fn calq__caffe_mapper(const char *type)
{
    static const struct {
        const char *type;
        calq_caffe_map_fn fn;
    } table[] = {
        {"Convolution", map_conv},
        {"Deconvolution", map_conv},
        {"InnerProduct", map_inner_product},
        {"Pooling", map_pooling},
        {"LRN", map_lrn},
        {"BatchNorm", map_batch_norm},
        {"ReLU", calq__caffe_map_activation},
        {"Sigmoid", calq__caffe_map_activation},
        {"TanH", calq__caffe_map_activation},
        {"ELU", calq__caffe_map_activation},
        {"AbsVal", calq__caffe_map_activation},
        {"Dropout", calq__caffe_map_activation},
        {"PReLU", calq__caffe_map_prelu},
        {"Scale", calq__caffe_map_scale},
        {"Bias", calq__caffe_map_scale},
        {"Eltwise", calq__caffe_map_eltwise},
        {"Power", calq__caffe_map_power},
        {"Exp", calq__caffe_map_exp_log},
        {"Log", calq__caffe_map_exp_log},
        {"Concat", calq__caffe_map_concat},
        {"Slice", calq__caffe_map_slice},
        {"Split", calq__caffe_map_split},
        {"Flatten", calq__caffe_map_flatten},
        {"Reshape", calq__caffe_map_reshape},
        {"Permute", calq__caffe_map_permute},
        {"Softmax", calq__caffe_map_softmax},
        {"Crop", calq__caffe_map_crop},
        {"Interp", calq__caffe_map_interp},
        {"PriorBox", calq__caffe_map_prior_box},
        {"DetectionOutput", calq__caffe_map_detection_output},
        {"Normalize", calq__caffe_map_normalize},
        {"Quant", calq__caffe_map_quant},
        {"DeQuant", calq__caffe_map_dequant},
        {"AntiQuant", calq__caffe_map_antiquant},
    };
    for (size_t i = 0; i < sizeof table / sizeof *table; i++)
        if (strcmp(table[i].type, type) == 0) return table[i].fn;
    return NULL;
}
