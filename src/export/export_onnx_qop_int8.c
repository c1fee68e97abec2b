/* The QOperator file of the int8 plan (export_onnx_int8.c): every op onnxruntime has an 8-bit
 * operator for reads and writes the uint8 tensors directly, as onnxruntime's own QDQ fusion would
 * make of the QDQ file (issue 12, item 5):
 *
 *   Conv -> QLinearConv, MatMul (2-D constant weight, or two variable inputs) -> QLinearMatMul,
 *   Gemm -> QGemm (com.microsoft), Add / Mul -> QLinearAdd / QLinearMul, Concat -> QLinearConcat,
 *   GlobalAveragePool -> QLinearGlobalAveragePool, Sigmoid /
 *   LeakyRelu -> QLinearSigmoid / QLinearLeakyRelu (com.microsoft: onnxruntime's contrib ops);
 *   MaxPool, Resize (nearest) and the ops that move values run on the uint8 tensor as they are.
 *
 * An op takes its 8-bit form when all its (activation) inputs and its output are quantized in the
 * plan; a Relu / Clip after it is absorbed when the output's Q makes it redundant (its range is
 * inside the clip: zero point 0 for Relu), as onnxruntime does. Every other op stays float and reads
 * float tensors: a uint8 tensor something float reads (or a graph output) is dequantized once
 * into the float tensor's own name, and a float tensor an 8-bit op reads is quantized once. A
 * quantized layer whose output is not quantized is written in QDQ form. */
#include <string.h>

#include "base/error.h"
#include "export/export_onnx.h"

static calq_status oom(calq_error *err)
{
    return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "save: out of memory");
}

static bool is_op(const calq_node *n, const char *op)
{
    return !n->domain[0] && !strcmp(n->op_type, op);
}

static bool on(const calq__xctx *c, int v)
{
    return v >= 0 && c->vq[v].on;
}

/* The op an 8-bit form replaces n with (NULL: none), and whether it is com.microsoft's. */
static const char *qlinear_op(const calq__xctx *c, int ni, bool *msft)
{
    const calq_node *n = &c->g->nodes[ni];
    *msft = true;
    if (c->quantized[ni]) {
        switch (c->kinds[ni]->id) {
        case CALQ_QKIND_CONV: *msft = false; return "QLinearConv";
        case CALQ_QKIND_MATMUL:
        case CALQ_QKIND_MATMUL_VAR: *msft = false; return "QLinearMatMul";
        case CALQ_QKIND_GEMM: return "QGemm";
        default: return NULL;
        }
    }
    int nin;
    return calq__int8_qlinear_op(n, &nin); /* all com.microsoft's */
}

/* A value-moving op calq and onnxruntime run on uint8 as it is (Resize: nearest only). */
static bool uint8_mover(const calq_node *n)
{
    if (!calq__int8_mover(n)) return false;
    if (is_op(n, "Resize")) return !strcmp(calq__attr_str(n, "mode", "nearest"), "nearest");
    return true;
}

/* The output an 8-bit n writes: its own, or that of the Relu / Clip it absorbs (*fold). */
static int output_of(const calq__xctx *c, int ni, const int *uses, const int *consumer, int *fold)
{
    const calq_node *n = &c->g->nodes[ni];
    int y = n->outputs[0];
    *fold = -1;
    if (y < 0) return -1;
    if (uses[y] == 1 && !c->g->values[y].is_output) {
        int r = consumer[y];
        const calq_node *rn = &c->g->nodes[r];
        if ((is_op(rn, "Relu") || is_op(rn, "Clip")) && rn->inputs[0] == y && on(c, rn->outputs[0]) &&
            calq__int8_clip_redundant(c, r)) {
            *fold = r;
            return rn->outputs[0];
        }
    }
    return y;
}

/* The 8-bit form's operands of node ni: every activation input quantized. */
static bool inputs_quantized(const calq__xctx *c, int ni)
{
    const calq_node *n = &c->g->nodes[ni];
    if (c->quantized[ni]) {
        for (int k = 0; k < n->n_inputs; k++)
            if ((k == 0 || calq__x_act_input(c, ni, k)) && !on(c, n->inputs[k])) return false;
        if (c->kinds[ni]->id == CALQ_QKIND_MATMUL) {
            const calq_tensor *w = c->g->values[n->inputs[1]].constant;
            const calq_record_layer *rl = calq__x_input_record(c, ni, 0);
            if (w->ndim != 2 || !rl || rl->n_scale_w != 1) return false; /* QLinearMatMul: 2-D, per tensor b */
        }
        if (c->kinds[ni]->id == CALQ_QKIND_GEMM && calq__attr_int(n, "transA", 0)) return false;
        return true;
    }
    if (n->n_inputs < 1) return false;
    /* the inputs the int8 scheme quantizes for this op (none of an Add / Mul with a constant
     * operand: calq__qkind_int8_input, the rule the plan of the QDQ file follows too) */
    int nin;
    calq__int8_qlinear_op(n, &nin);
    for (int k = 0; k < nin; k++)
        if (!on(c, n->inputs[k]) || !calq__qkind_int8_input(c->g, ni, k)) return false;
    return true;
}

calq_status calq__qop_int8_plan(calq__xctx *c, calq_error *err)
{
    const calq_graph *g = c->g;
    int *uses = calq__xa_alloc(&c->x.a, sizeof(int) * (size_t)(g->n_values + 1));
    int *consumer = calq__xa_alloc(&c->x.a, sizeof(int) * (size_t)(g->n_values + 1));
    c->form = calq__xa_alloc(&c->x.a, sizeof(signed char) * (size_t)(g->n_nodes + 1));
    c->writes = calq__xa_alloc(&c->x.a, sizeof(int) * (size_t)(g->n_nodes + 1));
    bool *float_read = calq__xa_alloc(&c->x.a, sizeof(bool) * (size_t)(g->n_values + 1));
    if (!uses || !consumer || !c->form || !c->writes || !float_read) return oom(err);
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_inputs; k++)
            if (g->nodes[i].inputs[k] >= 0) {
                uses[g->nodes[i].inputs[k]]++;
                consumer[g->nodes[i].inputs[k]] = i;
            }
    for (int i = 0; i < g->n_nodes; i++) {
        const calq_node *n = &g->nodes[i];
        bool msft;
        int fold;
        c->writes[i] = -1;
        if (c->skip[i] || c->dmq_mul[i] || n->n_outputs < 1) continue; /* a DMQ Mul is written before its layer */
        const bool mover = uint8_mover(n) && on(c, n->inputs[0]) && on(c, n->outputs[0]) &&
                           c->vq[n->inputs[0]].group == c->vq[n->outputs[0]].group;
        if (!mover && !qlinear_op(c, i, &msft)) continue;
        int y = mover ? n->outputs[0] : output_of(c, i, uses, consumer, &fold);
        if (!mover && (!on(c, y) || !inputs_quantized(c, i))) continue;
        c->form[i] = 1;
        c->writes[i] = y;
        if (!mover && fold >= 0) c->skip[fold] = true;
    }
    /* a uint8 tensor a float op reads, or a graph output: dequantized into its own name */
    for (int i = 0; i < g->n_nodes; i++) {
        const calq_node *n = &g->nodes[i];
        if (c->skip[i]) continue;
        for (int k = 0; k < n->n_inputs; k++) {
            int v = n->inputs[k];
            if (v < 0) continue;
            bool int8_read = c->form[i] && (calq__int8_mover(n) ? k == 0
                                            : c->quantized[i]   ? (k == 0 || calq__x_act_input(c, i, k))
                                                                : true);
            if (!int8_read) float_read[v] = true;
        }
    }
    for (int i = 0; i < g->n_nodes; i++) {
        int y = c->writes[i];
        if (y < 0) continue;
        c->vq[y].produced = true;
        c->vq[y].float_needed = float_read[y] || g->values[y].is_output;
    }
    return CALQ_OK;
}

/* After an 8-bit node wrote the uint8 tensor of y: its float value for float readers. */
static calq_status dequantize_back(calq__xctx *c, int y, calq_error *err)
{
    calq__xq *q = &c->vq[y];
    if (!q->float_needed) return CALQ_OK;
    const char *f = c->g->values[y].name;
    char *nn = calq__xnode_name(c, "%s_DequantizeLinear", q->qname);
    const char *in[3] = {q->qname, q->sname, q->zname};
    if (!nn || !calq__xg_node(&c->x, calq__xg_new_node(&c->x, "DequantizeLinear", nn, in, 3, &f, 1))) return oom(err);
    q->dqname = (char *)f;
    return CALQ_OK;
}

/* The three operands of quantized value v: uint8 tensor, scale, zero point. */
static bool operands(calq__xctx *c, int v, const char **ops, calq_error *err)
{
    if (!calq__int8_q(c, v, err)) return false;
    ops[0] = c->vq[v].qname;
    ops[1] = c->vq[v].sname;
    ops[2] = c->vq[v].zname;
    return true;
}

calq_status calq__qop_int8_node(calq__xctx *c, int ni, const Onnx__NodeProto *orig, calq_error *err)
{
    const calq_node *n = &c->g->nodes[ni];
    const int y = c->writes[ni];
    calq__xa *a = &c->x.a;
    /* the node as the opset raise writes it (Slice's starts / ends as inputs at 13, ...) */
    Onnx__NodeProto *up = NULL;
    CALQ_TRY(calq__export_upgrade_node(c, orig, &up, err));
    Onnx__NodeProto *nd = calq__xg_copy_node(&c->x, up);
    if (!nd) return oom(err);
    nd->domain = "";
    /* the output's names first: the node writes the uint8 tensor itself */
    if (!calq__int8_q(c, y, err)) return err->status;
    const calq__xq *qy = &c->vq[y];
    if (calq__int8_mover(n) && !c->quantized[ni] && !qlinear_op(c, ni, &(bool){false})) {
        /* the uint8 tensor in, its other inputs (shapes, indices) as the raised node has them */
        const char *x[3];
        if (!operands(c, n->inputs[0], x, err)) return err->status;
        for (int k = 1; k < (int)nd->n_input && k < n->n_inputs; k++)
            if (n->inputs[k] >= 0 && !(nd->input[k] = (char *)calq__xvalue(c, n->inputs[k], err))) return err->status;
        nd->input[0] = (char *)x[0];
        calq__int8_resize_roi(c, n, nd);
        nd->output[0] = qy->qname;
        if (!calq__xg_node(&c->x, nd)) return oom(err);
        return dequantize_back(c, y, err);
    }
    bool msft;
    const char *op = qlinear_op(c, ni, &msft);
    const char *ins[64];
    int nin = 0;
    if (c->quantized[ni] && c->kinds[ni]->weights == CALQ_QKIND_WEIGHTS_CONST) {
        /* QLinearConv / QLinearMatMul (x, w, y) / QGemm (a, b, c, y): the bias with the plan's
         * input scale, which the integer layers assume for it (§6.2) */
        const calq_record_layer rl = calq__int8_input_record(c, n->inputs[0], calq__x_input_record(c, ni, 0));
        calq__xqw w;
        CALQ_TRY(calq__qop_weights(c, ni, &rl, &w, err));
        if (!operands(c, n->inputs[0], ins, err)) return err->status;
        ins[3] = w.w;
        ins[4] = w.scale;
        ins[5] = w.zp;
        nin = 6;
        if (!strcmp(op, "QGemm")) ins[nin++] = w.bias ? w.bias : "";
        ins[nin++] = qy->sname;
        ins[nin++] = qy->zname;
        if (!strcmp(op, "QLinearConv") && w.bias) ins[nin++] = w.bias;
    } else if (c->quantized[ni] && c->kinds[ni]->id == CALQ_QKIND_MATMUL_VAR) {
        if (!operands(c, n->inputs[0], ins, err) || !operands(c, n->inputs[1], ins + 3, err)) return err->status;
        ins[6] = qy->sname;
        ins[7] = qy->zname;
        nin = 8;
    } else if (!strcmp(op, "QLinearConcat")) { /* Y_scale, Y_zp, then (X, X_scale, X_zp) per input */
        ins[nin++] = qy->sname;
        ins[nin++] = qy->zname;
        for (int k = 0; k < n->n_inputs && nin + 3 <= 64; k++, nin += 3)
            if (!operands(c, n->inputs[k], ins + nin, err)) return err->status;
    } else if (!strcmp(op, "QLinearAdd") || !strcmp(op, "QLinearMul")) {
        if (!operands(c, n->inputs[0], ins, err) || !operands(c, n->inputs[1], ins + 3, err)) return err->status;
        ins[6] = qy->sname;
        ins[7] = qy->zname;
        nin = 8;
    } else { /* unary: X, X_scale, X_zp, Y_scale, Y_zp */
        if (!operands(c, n->inputs[0], ins, err)) return err->status;
        ins[3] = qy->sname;
        ins[4] = qy->zname;
        nin = 5;
    }
    char **iv = calq__xa_alloc(a, sizeof(char *) * (size_t)nin);
    if (!iv) return oom(err);
    memcpy(iv, ins, sizeof(char *) * (size_t)nin);
    nd->input = iv;
    nd->n_input = (size_t)nin;
    nd->op_type = (char *)op;
    nd->output[0] = qy->qname;
    nd->n_output = 1;
    if (msft) {
        nd->domain = "com.microsoft";
        c->uses_msft = true;
    }
    if (!strcmp(op, "QGemm")) calq__xg_attr_remove(&c->x, nd, "beta"); /* QGemm has none (beta is 1, §8.1) */
    if (!strcmp(op, "QLinearGlobalAveragePool") && !calq__xg_attr_int(&c->x, nd, "channels_last", 0)) return oom(err);
    if (!calq__xg_node(&c->x, nd)) return oom(err);
    c->n_qop++;
    return dequantize_back(c, y, err);
}
