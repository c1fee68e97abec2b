/* AMCT's Quant and DeQuant layers (amct-reference.md §9.1, §9.2), as AMCT's save_model writes
 * them and calq's Caffe export does (src/export/export_caffe*.c), mapped onto the Ascend
 * operators of calq's registry:
 *
 *   deploy model:  Quant   -> AscendQuant (int8 top)
 *                  DeQuant -> AscendDequant(x int32, deq_scale uint64 blob)
 *   fake-quant:    Quant   -> AscendQuant -> AscendAntiQuant(scale_d, -offset_d), a float
 *                             quantize-dequantize (AMCT's fake Quant layer, §9.2)
 *                  DeQuant -> Identity (AMCT's fake DeQuant without shift_bit, §9.2)
 *   AntiQuant (§9.3, a Quant's top restored before a float layer): AscendAntiQuant(scale_d,
 *                  -offset_d) after a deploy Quant, the identity after a fake one (whose output
 *                  is already restored; AMCT's Caffe AntiQuant layer copies its bottom). Its
 *                  quant_param is the Quant's (scale 1/scale_d, offset_d), calq's reading of a
 *                  layer AMCT gives no parameter message (§13.4).
 *
 * A deploy model is told from a fake-quant one by its blobs: the deploy DeQuant holds one uint64
 * blob, and the Quant's object layer int8 weights. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/caffe.h"

/* True when the caffemodel holds an integer blob anywhere (a deploy model). */
static bool any_integer_blob(const calq_caffe_ctx *c)
{
    for (int k = 0; k < c->n_weight_layers; k++)
        for (int i = 0; i < c->weight_layers[k].n_blobs; i++)
            if (calq__caffe_blob_storage(c->weight_layers[k].blobs[i]) != CALQ_DTYPE_FLOAT32) return true;
    return false;
}

/* Whether a Quant layer belongs to a deploy model: its object layer's weights are int8; a
 * weightless object layer (AVE pooling) or none named: the model holds integer blobs at all. */
static calq_status quant_is_deploy(calq_caffe_ctx *c, const calq_tp_node *p, bool *deploy)
{
    const calq_tp_node *obj = calq_tp_find(p, "object_layer");
    const char *name = NULL;
    if (obj) CALQ_TRY((c->status = calq_tp_string(obj, c->proto_name, &name, c->err)));
    int k = name ? calq__caffe_map_get(&c->weight_index, name) : -1;
    if (k >= 0 && c->weight_layers[k].n_blobs > 0)
        *deploy = calq__caffe_blob_storage(c->weight_layers[k].blobs[0]) == CALQ_DTYPE_INT8;
    else
        *deploy = any_integer_blob(c);
    return CALQ_OK;
}

/* quant_param.offset: one byte holding offset_d as an int8 (absent: 0). */
static calq_status quant_offset(calq_caffe_ctx *c, const calq_caffe_layer *L, const calq_tp_node *p, int *offset)
{
    int n = calq__caffe_count(p, "offset");
    const calq_tp_node *o = n ? calq_tp_nth(p, "offset", n - 1) : NULL;
    *offset = 0;
    if (!o) return CALQ_OK;
    if (o->kind != CALQ_TP_SCALAR || o->type != CALQ_TP_STRING || o->text_len != 1)
        return calq__caffe_fail(c, L, CALQ_ERR_BAD_FORMAT,
                                "quant_param.offset must be a bytes string holding one int8 (offset_d), e.g. "
                                "offset: \"\\375\" for -3");
    *offset = (int8_t)(unsigned char)o->text[0];
    return CALQ_OK;
}

calq_status calq__caffe_map_quant(calq_caffe_ctx *c, calq_caffe_layer *L)
{
    CALQ_TRY(calq__caffe_need_io(c, L, 1, 1, 1, 1));
    const calq_tp_node *p = calq__caffe_param(L, "quant_param");
    float scale;
    int offset;
    bool deploy;
    CALQ_TRY(calq__caffe_get_float(c, p, "scale", NAN, &scale));
    if (!(scale > 0.0f) || isinf(scale))
        return calq__caffe_fail(c, L, CALQ_ERR_BAD_FORMAT,
                                "quant_param.scale (1/scale_d) must be a positive finite number, got %g",
                                (double)scale);
    CALQ_TRY(quant_offset(c, L, p, &offset));
    CALQ_TRY(quant_is_deploy(c, p, &deploy));
    int x = L->bottom[0];
    int q = deploy ? calq__caffe_top(c, L, 0) : calq__caffe_tmp(c, L, "quantized");
    int node = q < 0 ? -1 : calq__caffe_node(c, L, "AscendQuant", NULL, true, &x, 1, &q, 1);
    if (node < 0) return c->status;
    /* AMCT's fake Quant rounds half away from zero (IFMR's ClipAndQuant, §9.2): calq's
     * "RoundHalfAway"; the deploy Quant is the device's AscendQuant, ties to even (§0.3) */
    CALQ_TRY(calq__caffe_attr_float(c, node, "scale", scale));
    CALQ_TRY(calq__caffe_attr_float(c, node, "offset", (float)offset));
    CALQ_TRY(calq__caffe_attr_int(c, node, "sqrt_mode", 0));
    CALQ_TRY(calq__caffe_attr_string(c, node, "round_mode", deploy ? "Round" : "RoundHalfAway"));
    CALQ_TRY(calq__caffe_attr_string(c, node, "dst_type", "INT8"));
    calq__caffe_copy_shape(c, q, x);
    if (deploy) return CALQ_OK;
    /* y = (q + offset) * scale with offset = -offset_d: (q - offset_d) * scale_d (§9.3) */
    int y = calq__caffe_top(c, L, 0);
    node = y < 0 ? -1 : calq__caffe_node(c, L, "AscendAntiQuant", "dequantize", false, &q, 1, &y, 1);
    if (node < 0) return c->status;
    CALQ_TRY(calq__caffe_attr_float(c, node, "scale", 1.0f / scale));
    CALQ_TRY(calq__caffe_attr_float(c, node, "offset", (float)-offset));
    CALQ_TRY(calq__caffe_attr_int(c, node, "sqrt_mode", 0));
    CALQ_TRY(calq__caffe_attr_int(c, node, "dtype", 0));
    calq__caffe_copy_shape(c, y, x);
    return CALQ_OK;
}

/* Deploy: one uint64 blob, one packed deq_scale per output channel (axis 1) or one in all. */
static calq_status map_deploy_dequant(calq_caffe_ctx *c, calq_caffe_layer *L)
{
    int x = L->bottom[0];
    const calq_caffe_shape xs = calq__caffe_shape(c, x);
    int64_t n = calq__caffe_blob_count(L, 0), C = xs.ndim >= 2 ? xs.dims[1] : -1;
    if (n < 1 || (n > 1 && C > 0 && n != C))
        return calq__caffe_fail_weights(c, L,
                                        "holds %lld deq_scale values; it takes one, or one per channel of bottom '%s' "
                                        "(%lld)",
                                        (long long)n, c->g->values[x].name, (long long)C);
    int deq = calq__caffe_blob_const_any(c, L, 0, "deq_scale", &n, 1, "deq_scale values");
    int y = deq < 0 ? -1 : calq__caffe_top(c, L, 0);
    int in[2] = {x, deq};
    int node = y < 0 ? -1 : calq__caffe_node(c, L, "AscendDequant", NULL, true, in, 2, &y, 1);
    if (node < 0) return c->status;
    CALQ_TRY(calq__caffe_attr_int(c, node, "dtype", 0));
    CALQ_TRY(calq__caffe_attr_int(c, node, "sqrt_mode", 0));
    CALQ_TRY(calq__caffe_attr_int(c, node, "relu_flag", 0));
    calq__caffe_copy_shape(c, y, x);
    return CALQ_OK;
}

calq_status calq__caffe_map_dequant(calq_caffe_ctx *c, calq_caffe_layer *L)
{
    CALQ_TRY(calq__caffe_need_io(c, L, 1, 1, 1, 1));
    if (L->n_blobs >= 1 && calq__caffe_blob_storage(L->blobs[0]) == CALQ_DTYPE_UINT64) return map_deploy_dequant(c, L);
    /* Fake-quant: blobs deqscale, shift_bit, offset_w. The layer is the identity unless a
     * shift_bit is set (§6.4, §9.2), which calq does not emulate. */
    if (L->n_blobs >= 2) {
        int64_t n;
        float *shift = calq__caffe_blob_floats(c, L, 1, &n);
        if (!shift) return c->status;
        int64_t nonzero = 0;
        for (int64_t i = 0; i < n; i++) nonzero += shift[i] != 0.0f;
        free(shift);
        if (nonzero)
            return calq__caffe_fail(c, L, CALQ_ERR_UNSUPPORTED,
                                    "a fake-quant DeQuant with shift_bit set (%lld of %lld channels, "
                                    "amct-reference.md §6.4) is not supported; calq runs the deploy model's "
                                    "AscendDequant with its shift instead",
                                    (long long)nonzero, (long long)n);
    }
    int x = L->bottom[0];
    int y = calq__caffe_top(c, L, 0);
    if (y < 0 || calq__caffe_node(c, L, "Identity", NULL, true, &x, 1, &y, 1) < 0) return c->status;
    calq__caffe_copy_shape(c, y, x);
    return CALQ_OK;
}

calq_status calq__caffe_map_antiquant(calq_caffe_ctx *c, calq_caffe_layer *L)
{
    CALQ_TRY(calq__caffe_need_io(c, L, 1, 1, 1, 1));
    int x = L->bottom[0], y = calq__caffe_top(c, L, 0);
    if (y < 0) return c->status;
    /* after a deploy Quant the bottom is the int8 output of an AscendQuant */
    bool after_deploy_quant = false;
    for (int i = 0; i < c->g->n_nodes && !after_deploy_quant; i++)
        for (int k = 0; k < c->g->nodes[i].n_outputs; k++)
            if (c->g->nodes[i].outputs[k] == x && strcmp(c->g->nodes[i].op_type, "AscendQuant") == 0)
                after_deploy_quant = true;
    if (!after_deploy_quant) {
        if (calq__caffe_node(c, L, "Identity", NULL, true, &x, 1, &y, 1) < 0) return c->status;
        calq__caffe_copy_shape(c, y, x);
        return CALQ_OK;
    }
    const calq_tp_node *p = calq__caffe_param(L, "quant_param");
    float scale;
    int offset;
    CALQ_TRY(calq__caffe_get_float(c, p, "scale", NAN, &scale));
    if (!(scale > 0.0f) || isinf(scale))
        return calq__caffe_fail(c, L, CALQ_ERR_BAD_FORMAT,
                                "quant_param.scale (1/scale_d) must be a positive finite number, got %g",
                                (double)scale);
    CALQ_TRY(quant_offset(c, L, p, &offset));
    int node = calq__caffe_node(c, L, "AscendAntiQuant", NULL, true, &x, 1, &y, 1);
    if (node < 0) return c->status;
    /* y = (q + offset) * scale with offset = -offset_d: (q - offset_d) * scale_d (§9.1, §9.3) */
    CALQ_TRY(calq__caffe_attr_float(c, node, "scale", 1.0f / scale));
    CALQ_TRY(calq__caffe_attr_float(c, node, "offset", (float)-offset));
    CALQ_TRY(calq__caffe_attr_int(c, node, "sqrt_mode", 0));
    CALQ_TRY(calq__caffe_attr_int(c, node, "dtype", 0));
    calq__caffe_copy_shape(c, y, x);
    return CALQ_OK;
}
