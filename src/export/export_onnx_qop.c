/* The QOperator form of a quantized layer (issue 6): QLinearConv / QLinearMatMul, with int8
 * input, weights and output and an int32 bias.
 *
 * A QLinear operator needs the scale and zero point of its output, and an AMCT record holds
 * only the input factors of each layer (§7.1). The rule: a layer's output factors are the
 * input factors of the quantized layers that read that output, when
 *   (a) every reader of the output is a quantized layer, all with the same scale_d / offset_d,
 *       and the output is not a graph output; or
 *   (b) the only reader is a Relu whose output satisfies (a) and whose readers' offset_d is
 *       -128: that zero point is the real value 0, so quantizing the Conv's output clamps
 *       negative values to 0 exactly as the Relu does, and the Relu is dropped.
 * Otherwise (a graph output, a float consumer, readers with different factors) the output
 * range is unknown and the layer is written in QDQ form, which is exact, rather than with
 * a guessed range. The model stays valid and runnable either way. */
#include <string.h>

#include "base/error.h"
#include "export/export_onnx.h"

static calq_status oom(calq_error *err)
{
    return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "save: out of memory");
}

/* The common input factors of every reader of value v, all quantized layers reading v as
 * their activation; false when any reader is something else. */
static bool readers_factors(const calq__xctx *c, int v, const calq_record_layer **rl_out, int *n_readers)
{
    const calq_record_layer *common = NULL;
    *n_readers = 0;
    if (c->g->values[v].is_output) return false;
    const calq_readers *r = &c->readers;
    for (int at = r->start[v]; at < r->start[v + 1]; at++) {
        int i = r->node[at], k = r->input[at];
        if (!c->quantized[i] || (k != 0 && !calq__x_act_input(c, i, k))) return false;
        const calq_record_layer *rl = calq__x_input_record(c, i, k);
        if (!rl) return false;
        if (common && (common->scale_d != rl->scale_d || common->offset_d != rl->offset_d)) return false;
        common = rl;
        (*n_readers)++;
    }
    *rl_out = common;
    return common != NULL;
}

/* The single reader of v, or -1. */
static int single_reader(const calq__xctx *c, int v)
{
    const calq_readers *r = &c->readers;
    int n = r->start[v + 1] - r->start[v];
    return n == 1 && !c->g->values[v].is_output ? r->node[r->start[v]] : -1;
}

/* Registers the int8 output of a QLinear layer as activation `tensor` with factors rl, so the
 * readers use it instead of emitting their own QuantizeLinear. */
static calq__xact *register_output(calq__xctx *c, const char *tensor, const calq_record_layer *rl)
{
    calq__xact *a = calq__xact_push(c, tensor);
    if (!a) return NULL;
    a->scale = rl->scale_d;
    a->offset = rl->offset_d;
    a->q = calq__xname(c, "%s_quantized", tensor);
    a->dq = calq__xname(c, "%s_dequantized", tensor);
    a->scale_name = calq__xname(c, "%s_scale", tensor);
    a->zp_name = calq__xname(c, "%s_zero_point", tensor);
    if (!a->q || !a->dq || !a->scale_name || !a->zp_name) return NULL;
    int8_t zp = (int8_t)rl->offset_d;
    if (!calq__xg_init_add(&c->x, calq__xg_tensor(&c->x, a->scale_name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, NULL, 0,
                                                  &rl->scale_d, sizeof(float))) ||
        !calq__xg_init_add(&c->x,
                           calq__xg_tensor(&c->x, a->zp_name, ONNX__TENSOR_PROTO__DATA_TYPE__INT8, NULL, 0, &zp, 1)))
        return NULL;
    return a;
}

/* The output factors of layer node ni (the readers' input factors, or a Relu's readers' with
 * offset -128, as described above); false when they are unknown. *relu: the absorbed Relu or -1. */
static bool output_factors(const calq__xctx *c, int ni, const calq_record_layer **out, int *relu)
{
    int y = c->g->nodes[ni].outputs[0], nr = 0;
    *relu = -1;
    if (readers_factors(c, y, out, &nr)) return true;
    int r = single_reader(c, y);
    if (r < 0 || strcmp(c->g->nodes[r].op_type, "Relu") != 0 || c->g->nodes[r].outputs[0] < 0) return false;
    if (!readers_factors(c, c->g->nodes[r].outputs[0], out, &nr) || (*out)->offset_d != -128) return false;
    *relu = r;
    return true;
}

/* MatMul with two variable inputs (§8.1) as QLinearMatMul(a, a_scale, a_zp, b, b_scale, b_zp,
 * y_scale, y_zp): both inputs int8 with their record factors, no weight. */
static calq_status qop_matmul2(calq__xctx *c, int ni, const Onnx__NodeProto *orig, const calq_record_layer *rl,
                               bool *done, calq_error *err)
{
    const calq_node *n = &c->g->nodes[ni];
    const calq_record_layer *r1 = calq__x_input_record(c, ni, 1), *out = NULL;
    int relu;
    if (!r1 || n->n_inputs != 2 || !output_factors(c, ni, &out, &relu)) return CALQ_OK;
    calq__xact *a = calq__xact_get(c, c->g->values[n->inputs[0]].name, rl->scale_d, rl->offset_d, NULL, false);
    calq__xact *b =
        a ? calq__xact_get(c, c->g->values[n->inputs[1]].name, r1->scale_d, r1->offset_d, NULL, false) : NULL;
    int yv = relu >= 0 ? c->g->nodes[relu].outputs[0] : n->outputs[0];
    calq__xact *o = b ? register_output(c, c->g->values[yv].name, out) : NULL;
    Onnx__NodeProto *nd = o ? calq__xg_copy_node(&c->x, orig) : NULL;
    char **iv = nd ? calq__xa_alloc(&c->x.a, sizeof(char *) * 8) : NULL;
    if (!iv) return oom(err);
    const char *ins[8] = {a->q, a->scale_name, a->zp_name, b->q, b->scale_name, b->zp_name, o->scale_name, o->zp_name};
    memcpy(iv, ins, sizeof ins);
    nd->input = iv;
    nd->n_input = 8;
    nd->op_type = "QLinearMatMul";
    nd->output[0] = o->q;
    if (!calq__xg_node(&c->x, nd)) return oom(err);
    if (relu >= 0) c->skip[relu] = true;
    c->n_qop++;
    *done = true;
    return CALQ_OK;
}

calq_status calq__qop_weights(calq__xctx *c, int ni, const calq_record_layer *rl, calq__xqw *out, calq_error *err)
{
    const calq_node *n = &c->g->nodes[ni];
    const calq_tensor *w = c->g->values[n->inputs[c->kinds[ni]->weight_input]].constant;
    int8_t *wq;
    int32_t *bq;
    int64_t nb;
    memset(out, 0, sizeof *out);
    CALQ_TRY(calq__xq_weights(c, ni, rl, &wq, &bq, &nb, err));
    char *wn = calq__xname(c, "%s.weight_quantized", n->name), *sn = calq__xname(c, "%s.weight_scale", n->name);
    char *zn = calq__xname(c, "%s.weight_zero_point", n->name);
    char *bn = bq ? calq__xname(c, "%s.bias_quantized", n->name) : NULL;
    int8_t *zeros = calq__xa_alloc(&c->x.a, (size_t)rl->n_scale_w);
    if (!wn || !sn || !zn || (bq && !bn) || !zeros) return oom(err);
    int64_t ns = rl->n_scale_w;
    int snd = ns > 1 ? 1 : 0;
    if (!calq__xg_init_add(&c->x, calq__xg_tensor(&c->x, wn, ONNX__TENSOR_PROTO__DATA_TYPE__INT8, w->dims, w->ndim, wq,
                                                  (size_t)calq_tensor_numel(w))) ||
        !calq__xg_init_add(&c->x, calq__xg_tensor(&c->x, sn, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, &ns, snd,
                                                  rl->scale_w, sizeof(float) * (size_t)ns)) ||
        !calq__xg_init_add(
            &c->x, calq__xg_tensor(&c->x, zn, ONNX__TENSOR_PROTO__DATA_TYPE__INT8, &ns, snd, zeros, (size_t)ns)) ||
        (bq && !calq__xg_init_add(&c->x, calq__xg_tensor(&c->x, bn, ONNX__TENSOR_PROTO__DATA_TYPE__INT32, &nb, 1, bq,
                                                         sizeof(int32_t) * (size_t)nb))))
        return oom(err);
    out->w = wn;
    out->scale = sn;
    out->zp = zn;
    out->bias = bn;
    return CALQ_OK;
}

calq_status calq__qop_layer(calq__xctx *c, int ni, const Onnx__NodeProto *orig, const calq_record_layer *rl, bool *done,
                            calq_error *err)
{
    const calq_node *n = &c->g->nodes[ni];
    *done = false;
    /* the kinds with an ONNX QOperator form: Conv -> QLinearConv, MatMul -> QLinearMatMul */
    const calq_qkind *kind = c->kinds[ni];
    bool conv = kind->id == CALQ_QKIND_CONV, matmul = kind->id == CALQ_QKIND_MATMUL;
    bool matmul2 = kind->id == CALQ_QKIND_MATMUL_VAR;
    if ((!conv && !matmul && !matmul2) || n->n_outputs != 1 || n->outputs[0] < 0) return CALQ_OK;
    if (matmul2) return qop_matmul2(c, ni, orig, rl, done, err);
    const calq_tensor *w = c->g->values[n->inputs[kind->weight_input]].constant;
    if (matmul && (w->ndim != 2 || rl->n_scale_w != 1)) return CALQ_OK;
    int y = n->outputs[0], relu = -1, nr = 0;
    const calq_record_layer *out = NULL;
    if (!readers_factors(c, y, &out, &nr)) {
        int r = single_reader(c, y);
        if (r < 0 || strcmp(c->g->nodes[r].op_type, "Relu") != 0 || c->g->nodes[r].outputs[0] < 0) return CALQ_OK;
        if (!readers_factors(c, c->g->nodes[r].outputs[0], &out, &nr) || out->offset_d != -128) return CALQ_OK;
        relu = r;
    }
    calq__xqw qw;
    CALQ_TRY(calq__qop_weights(c, ni, rl, &qw, err));
    calq__xact *in = calq__xact_get(c, c->g->values[n->inputs[0]].name, rl->scale_d, rl->offset_d, NULL, false);
    int yv = relu >= 0 ? c->g->nodes[relu].outputs[0] : y;
    calq__xact *o = in ? register_output(c, c->g->values[yv].name, out) : NULL;
    calq__xa *a = &c->x.a;
    if (!o) return oom(err);
    const char *wn = qw.w, *sn = qw.scale, *zn = qw.zp, *bn = qw.bias;
    const bool has_bias = bn != NULL;
    /* the bias's own scale is x_scale*w_scale[c] with zero point 0 (§6.2 deq_scale), which is
     * exactly what QLinearConv assumes for its int32 bias */
    const char *ins[9] = {in->q, in->scale_name, in->zp_name, wn, sn, zn, o->scale_name, o->zp_name, bn};
    Onnx__NodeProto *nd = calq__xg_copy_node(&c->x, orig);
    char **iv = calq__xa_alloc(a, sizeof(char *) * 9);
    if (!nd || !iv) return oom(err);
    memcpy(iv, ins, sizeof ins);
    nd->input = iv;
    nd->n_input = conv ? (has_bias ? 9 : 8) : 8;
    nd->op_type = conv ? "QLinearConv" : "QLinearMatMul";
    if (!conv) { /* QLinearMatMul: a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp */
        iv[6] = o->scale_name;
        iv[7] = o->zp_name;
    }
    nd->output[0] = o->q;
    if (!calq__xg_node(&c->x, nd)) return oom(err);
    if (relu >= 0) c->skip[relu] = true;
    c->n_qop++;
    *done = true;
    return CALQ_OK;
}
