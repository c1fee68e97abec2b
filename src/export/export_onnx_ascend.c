/* AMCT's two ONNX models (issue 6; amct-reference.md §9, file names §1.3).
 *
 * Fake-quant (§9.2), standard ONNX operators only, so any ONNX runtime measures the accuracy:
 *   x -> Mul(1/scale_d) -> Round -> Add(offset_d) -> Clip(-128, 127) -> Sub(offset_d)   ("int9")
 *     -> layer with weight w_q - offset_w (= w_q, offset_w is 0) and bias bias_q, as floats
 *     -> Mul(deq_scale)  [deq_scale = scale_d * scale_w[c], float32, §6.2]
 * Deploy (§9.1), the input of Ascend's ATC:
 *   x -> AscendQuant{scale = 1/scale_d, offset = offset_d, dst_type "INT8"} (int8)
 *     -> layer with an int8 weight and an int32 bias (int32 out)
 *     -> AscendDequant(x, <layer>.dequant.param: uint64 [C], §6.3){dtype 0} -> float
 * Node and tensor names follow AMCT's (<layer>.quant, <layer>.dequant, <layer>.dequant.param).
 * Layers reading the same tensor with the same factors share one quantize chain: AMCT's
 * quant fusion (§8.3). AveragePool has no weight: its deq_scale is scale_d (scale_w = 1). A MatMul
 * with two variable inputs (§8.1) quantizes both, each with its record entry, and its deq_scale is
 * scale_d * scale_d1.
 * A bias that is not one value per output channel (a Gemm C that broadcasts) stays float and
 * is added after the dequantization. LSTM / GRU / RNN keep a float layer (ascend_rnn). The
 * Ascend operators are in the default domain, where AMCT writes them and ATC looks for them. */
#include <string.h>

#include "base/error.h"
#include "export/export_onnx.h"

static calq_status oom(calq_error *err)
{
    return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "save: out of memory");
}

static bool emit_init(calq__xctx *c, const char *name, int dt, const int64_t *dims, int ndim, const void *d, size_t nb)
{
    return calq__xg_init_add(&c->x, calq__xg_tensor(&c->x, name, dt, dims, ndim, d, nb));
}

/* A scalar float initializer named after `fmt`; returns its name. */
static const char *scalar(calq__xctx *c, float v, const char *layer, const char *what)
{
    char *nm = calq__xname(c, "%s.%s", layer, what);
    if (!nm || !emit_init(c, nm, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, NULL, 0, &v, sizeof v)) return NULL;
    return nm;
}

/* One node with one output, named `name` unless a node has that name (calq__xnode_name: the
 * names below come from calq__xname, unique among tensors only); NULL on OOM. */
static Onnx__NodeProto *node1(calq__xctx *c, const char *op, const char *name, const char *a, const char *b,
                              const char *out)
{
    const char *in[2] = {a, b};
    const char *nn = calq__xnode_name(c, "%s", name);
    Onnx__NodeProto *n = nn ? calq__xg_new_node(&c->x, op, nn, in, b ? 2 : 1, &out, 1) : NULL;
    return n && calq__xg_node(&c->x, n) ? n : NULL;
}

/* The quantized form of activation `tensor` for layer `layer` (first user names the chain):
 * the int8 AscendQuant output (deploy) or the float "int9" value (fake-quant). */
static const char *act_quant(calq__xctx *c, const char *layer, const char *tensor, float scale_d, int64_t offset_d)
{
    for (int i = calq__xact_first(c, tensor); i >= 0; i = c->acts[i].next_same)
        if (c->acts[i].scale == scale_d && c->acts[i].offset == offset_d) return c->acts[i].q;
    calq__xact *a = calq__xact_push(c, tensor); /* sized to the layer count: NULL is out of memory */
    if (!a) return NULL;
    a->scale = scale_d;
    a->offset = offset_d;
    /* 1/scale_d in float32, as AMCT computes the attribute (§9.1) */
    float inv = 1.0f / scale_d;
    if (c->fmt == CALQ_SAVE_ASCEND_DEPLOY) {
        char *q = calq__xname(c, "%s.quant.output0", layer), *nn = calq__xname(c, "%s.quant", layer);
        Onnx__NodeProto *n = q && nn ? node1(c, "AscendQuant", nn, tensor, NULL, q) : NULL;
        /* every attribute of §9.1 spelled out, so ATC never depends on its defaults */
        if (!n || !calq__xg_attr_float(&c->x, n, "scale", inv) ||
            !calq__xg_attr_float(&c->x, n, "offset", (float)offset_d) || !calq__xg_attr_int(&c->x, n, "sqrt_mode", 0) ||
            !calq__xg_attr_str(&c->x, n, "round_mode", "Round") || !calq__xg_attr_str(&c->x, n, "dst_type", "INT8"))
            return NULL;
        a->q = q;
    } else {
        const char *s = scalar(c, inv, layer, "quant.scale"), *o = scalar(c, (float)offset_d, layer, "quant.offset");
        const char *lo = scalar(c, -128.0f, layer, "quant.min"), *hi = scalar(c, 127.0f, layer, "quant.max");
        char *t1 = calq__xname(c, "%s.quant.mul", layer), *t2 = calq__xname(c, "%s.quant.round", layer);
        char *t3 = calq__xname(c, "%s.quant.add", layer), *t4 = calq__xname(c, "%s.quant.clip", layer);
        char *t5 = calq__xname(c, "%s.quant.output0", layer);
        if (!s || !o || !lo || !hi || !t1 || !t2 || !t3 || !t4 || !t5) return NULL;
        const char *in3[3] = {t3, lo, hi};
        const char *clip_name = calq__xnode_name(c, "%s", t4);
        Onnx__NodeProto *clip =
            clip_name ? calq__xg_new_node(&c->x, "Clip", clip_name, in3, 3, (const char **)&t4, 1) : NULL;
        if (!node1(c, "Mul", t1, tensor, s, t1) || !node1(c, "Round", t2, t1, NULL, t2) ||
            !node1(c, "Add", t3, t2, o, t3) || !clip || !calq__xg_node(&c->x, clip) || !node1(c, "Sub", t5, t4, o, t5))
            return NULL;
        a->q = t5;
    }
    return a->q;
}

/* The dequantized float of quantized activation xq for node `name` (§9.3): AscendAntiQuant in
 * the deploy model, Mul(scale_d) after the fake-quant chain. NULL on OOM (err set). */
static const char *antiquant(calq__xctx *c, const char *name, const char *xq, const calq_record_layer *rl,
                             calq_error *err)
{
    char *out = calq__xname(c, "%s.antiquant.output0", name);
    char *nn = out ? calq__xname(c, "%s.antiquant", name) : NULL;
    if (!nn) {
        oom(err);
        return NULL;
    }
    if (c->fmt == CALQ_SAVE_ASCEND_DEPLOY) {
        /* y = (x + offset) * scale (the CANN formula, docs/operators.md) with offset = -offset_d:
         * (q - offset_d) * scale_d. AMCT's own sign here is an open question (§13.4). */
        Onnx__NodeProto *a = node1(c, "AscendAntiQuant", nn, xq, NULL, out);
        if (!a || !calq__xg_attr_float(&c->x, a, "scale", rl->scale_d) ||
            !calq__xg_attr_float(&c->x, a, "offset", (float)-rl->offset_d) ||
            !calq__xg_attr_int(&c->x, a, "sqrt_mode", 0) || !calq__xg_attr_int(&c->x, a, "dtype", 0)) {
            oom(err);
            return NULL;
        }
    } else { /* the fake-quant chain gives q - offset_d; AMCT's fake AntiQuant is Mul(scale_d) */
        const char *s = scalar(c, rl->scale_d, name, "antiquant.scale");
        if (!s || !node1(c, "Mul", nn, xq, s, out)) {
            oom(err);
            return NULL;
        }
    }
    return out;
}

/* LSTM / GRU / RNN (§8.1 CHANNEL_WISE_ONNX_TYPES): the recurrence is not a linear layer whose
 * output a deq_scale could restore, and AMCT's description has no integer form for it, so both
 * models quantize what AMCT calibrates and keep the layer in float: X through the quantize chain
 * and back (AscendQuant -> AscendAntiQuant in the deploy model, as §9.3 does for MaxPool), W and R
 * as their fake-quant values w_q * scale_w, the bias as it was. */
static calq_status ascend_rnn(calq__xctx *c, int ni, const Onnx__NodeProto *orig, const calq_record_layer *rl,
                              calq_error *err)
{
    const calq_node *n = &c->g->nodes[ni];
    const calq_qkind *kind = c->kinds[ni];
    const char *xq = act_quant(c, n->name, c->g->values[n->inputs[0]].name, rl->scale_d, rl->offset_d);
    const char *xa = xq ? antiquant(c, n->name, xq, rl, err) : NULL;
    Onnx__NodeProto *nd = calq__xg_copy_node(&c->x, orig);
    char **in = calq__xa_alloc(&c->x.a, sizeof(char *) * (size_t)(n->n_inputs + 1));
    if (!xa || !nd || !in) return oom(err);
    nd->input = in;
    nd->n_input = (size_t)n->n_inputs;
    in[0] = (char *)xa;
    for (int k = 0; k < n->n_outputs && k < (int)nd->n_output; k++)
        if (n->outputs[k] >= 0) nd->output[k] = c->g->values[n->outputs[k]].name;
    for (int j = 0; j < 2; j++) {
        int8_t *wq;
        const float *sc;
        int64_t ns;
        CALQ_TRY(calq__xq_rnn_weight(c, ni, rl, j, &wq, &sc, &ns, err));
        const int wi = j ? kind->weight2_input : kind->weight_input;
        const calq_tensor *w = c->g->values[n->inputs[wi]].constant;
        int64_t numel = calq_tensor_numel(w);
        float *wf = calq__xa_alloc(&c->x.a, sizeof(float) * (size_t)numel);
        char *wn = calq__xname(c, "%s.%s_fake_quant", n->name, j ? "recurrence" : "weight");
        if (!wf || !wn) return oom(err);
        calq__wchan wc;
        calq__wchan_init(kind, n, w, &wc);
        calq__dequantize_weights(&wc, wq, numel, sc, (int)ns, wf);
        if (!emit_init(c, wn, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, w->dims, w->ndim, wf,
                       sizeof(float) * (size_t)numel))
            return oom(err);
        in[wi] = wn;
    }
    for (int k = 1; k < n->n_inputs; k++)
        if (!in[k] && !(in[k] = n->inputs[k] < 0 ? "" : (char *)calq__xvalue(c, n->inputs[k], err))) return err->status;
    return calq__xg_node(&c->x, nd) ? CALQ_OK : oom(err);
}

calq_status calq__ascend_layer(calq__xctx *c, int ni, const Onnx__NodeProto *orig, const calq_record_layer *rl,
                               calq_error *err)
{
    const calq_node *n = &c->g->nodes[ni];
    const calq_qkind *kind = c->kinds[ni];
    bool deploy = c->fmt == CALQ_SAVE_ASCEND_DEPLOY;
    bool weights = kind->weights == CALQ_QKIND_WEIGHTS_CONST; /* else AvgPool: deq_scale = scale_d (§6.3) */
    if (rl->offset_d < -128 || rl->offset_d > 127)            /* calq__record_check rejects it first (§4.4) */
        return calq__fail(err, CALQ_ERR_RECORD_FACTOR, n->name, "offset_d out of int8 in layer %s", n->name);
    if (kind->weight2_input >= 0) return ascend_rnn(c, ni, orig, rl, err);
    const char *xq = act_quant(c, n->name, c->g->values[n->inputs[0]].name, rl->scale_d, rl->offset_d);
    Onnx__NodeProto *nd = calq__xg_copy_node(&c->x, orig);
    char **in = calq__xa_alloc(&c->x.a, sizeof(char *) * (size_t)(n->n_inputs + 1));
    if (!xq || !nd || !in) return oom(err);
    nd->input = in;
    nd->n_input = (size_t)n->n_inputs;
    in[0] = (char *)xq;
    /* input 1 of a MatMul with two variable inputs: its own chain, named <layer>_input1.quant...,
     * and it takes the weight's place in deq_scale = scale_d * scale_d1 (§6.2, §8.1) */
    const calq_record_layer *r1 = NULL;
    for (int k = 1; k < n->n_inputs; k++) {
        if (!calq__x_act_input(c, ni, k)) continue;
        const calq_record_layer *rk = calq__x_input_record(c, ni, k);
        char *base = calq__xa_printf(&c->x.a, "%s_input%d", n->name, k);
        if (!rk || !base)
            return rk ? oom(err)
                      : calq__fail(err, CALQ_ERR_RECORD_FILE, n->name, "save: no record for input %d of %s", k,
                                   n->name);
        if (!(in[k] = (char *)act_quant(c, base, c->g->values[n->inputs[k]].name, rk->scale_d, rk->offset_d)))
            return oom(err);
        if (k == 1) r1 = rk;
    }

    /* deq_scale per output channel (or one), §6.2; AvgPool: scale_d (§6.3) */
    int64_t n_deq = 1;
    float *deq = NULL;
    const char *float_bias = NULL; /* a bias added after the dequantization */
    const int wi = kind->weight_input, bi = kind->bias_input;
    if (weights) {
        int8_t *wq;
        int32_t *bq;
        int64_t nb;
        CALQ_TRY(calq__xq_weights(c, ni, rl, &wq, &bq, &nb, err));
        const calq_tensor *w = c->g->values[n->inputs[wi]].constant;
        int64_t numel = calq_tensor_numel(w);
        if (rl->n_scale_w > 1) n_deq = rl->n_scale_w;
        deq = calq__xa_alloc(&c->x.a, sizeof(float) * (size_t)n_deq);
        if (!deq) return oom(err);
        calq_deq_scale(rl->scale_d, rl->scale_w, rl->n_scale_w, n_deq, deq);
        char *wn = calq__xname(c, "%s.weight_quant", n->name);
        if (!wn) return oom(err);
        if (deploy) {
            if (!emit_init(c, wn, ONNX__TENSOR_PROTO__DATA_TYPE__INT8, w->dims, w->ndim, wq, (size_t)numel))
                return oom(err);
        } else { /* w_q - offset_w as float (offset_w = 0, §6.1) */
            float *wf = calq__xa_alloc(&c->x.a, sizeof(float) * (size_t)numel);
            if (!wf) return oom(err);
            for (int64_t i = 0; i < numel; i++) wf[i] = (float)wq[i];
            if (!emit_init(c, wn, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, w->dims, w->ndim, wf, sizeof(float) * numel))
                return oom(err);
        }
        in[wi] = wn;
        if (bq) {
            char *bn = calq__xname(c, "%s.bias_quant", n->name);
            if (!bn) return oom(err);
            if (deploy) {
                if (!emit_init(c, bn, ONNX__TENSOR_PROTO__DATA_TYPE__INT32, &nb, 1, bq, sizeof(int32_t) * nb))
                    return oom(err);
            } else {
                float *bf = calq__xa_alloc(&c->x.a, sizeof(float) * (size_t)nb);
                if (!bf) return oom(err);
                for (int64_t i = 0; i < nb; i++) bf[i] = (float)bq[i];
                if (!emit_init(c, bn, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, &nb, 1, bf, sizeof(float) * nb))
                    return oom(err);
            }
            in[bi] = bn;
        } else if (bi >= 0 && n->n_inputs > bi && n->inputs[bi] >= 0) {
            /* a float bias of another shape: added after the dequantization, and the layer
             * itself runs without it (the bias is its last input) */
            if (!(float_bias = calq__xvalue(c, n->inputs[bi], err))) return err->status;
            nd->n_input = (size_t)bi;
        }
    } else {
        deq = calq__xa_alloc(&c->x.a, sizeof(float));
        if (!deq) return oom(err);
        if (r1)
            calq_deq_scale(rl->scale_d, &r1->scale_d, 1, 1, deq);
        else
            deq[0] = rl->scale_d;
    }
    for (int k = 1; k < (int)nd->n_input; k++)
        if (!in[k] && !(in[k] = n->inputs[k] < 0 ? "" : (char *)calq__xvalue(c, n->inputs[k], err))) return err->status;

    /* the layer computes into <layer>.dequant.input0; the dequantization (and a float bias)
     * produce the original output name, so every consumer is unchanged */
    const char *y = c->g->values[n->outputs[0]].name;
    char *raw = calq__xname(c, "%s.dequant.input0", n->name);
    char *deq_out = float_bias ? calq__xname(c, "%s.dequant.output0", n->name) : (char *)y;
    char *dn = calq__xname(c, "%s.dequant", n->name);
    if (!raw || !deq_out || !dn) return oom(err);
    nd->output[0] = raw;
    if (!calq__xg_node(&c->x, nd)) return oom(err);
    /* per-channel factors broadcast along axis 1 of the output: shape [C, 1, ...] for the
     * fake-quant Mul (the AscendDequant param is 1-D, §9.1) */
    int out_rank = c->g->values[n->outputs[0]].ndim;
    if (weights && n_deq > 1) out_rank = c->g->values[n->inputs[wi]].constant->ndim; /* Conv: rank of w */
    int64_t dims[CALQ_MAX_DIMS] = {n_deq};
    int nd_deq = n_deq > 1 ? (out_rank > 1 ? out_rank - 1 : 1) : 0;
    for (int k = 1; k < nd_deq; k++) dims[k] = 1;
    if (deploy) {
        uint64_t *packed = calq__xa_alloc(&c->x.a, sizeof(uint64_t) * (size_t)n_deq);
        char *pn = calq__xname(c, "%s.dequant.param", n->name);
        if (!packed || !pn) return oom(err);
        for (int64_t i = 0; i < n_deq; i++) packed[i] = calq_deq_scale_pack(deq[i], 0, 0);
        int64_t len = n_deq;
        if (!emit_init(c, pn, ONNX__TENSOR_PROTO__DATA_TYPE__UINT64, &len, 1, packed, sizeof(uint64_t) * n_deq))
            return oom(err);
        Onnx__NodeProto *d = node1(c, "AscendDequant", dn, raw, pn, deq_out);
        if (!d || !calq__xg_attr_int(&c->x, d, "dtype", 0) || !calq__xg_attr_int(&c->x, d, "sqrt_mode", 0) ||
            !calq__xg_attr_int(&c->x, d, "relu_flag", 0))
            return oom(err);
    } else {
        char *sn = calq__xname(c, "%s.dequant.scale", n->name);
        if (!sn || !emit_init(c, sn, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, dims, nd_deq, deq, sizeof(float) * n_deq))
            return oom(err);
        if (!node1(c, "Mul", dn, raw, sn, deq_out)) return oom(err);
    }
    if (float_bias) {
        char *an = calq__xname(c, "%s.bias_add", n->name);
        if (!an) return oom(err);
        const char *b = float_bias;
        if (kind->output_channel_axis == 1) {
            /* a Conv's bias (a computed one: a constant would be quantized) is per channel,
             * axis 1: reshape it to [C, 1, ...] so the Add broadcasts along channels */
            int rank = c->g->values[n->inputs[wi]].constant->ndim;
            int64_t shape[CALQ_MAX_DIMS] = {-1};
            for (int k = 1; k < rank - 1; k++) shape[k] = 1;
            int64_t ns = rank - 1;
            char *sn = calq__xname(c, "%s.bias_shape", n->name), *rn = calq__xname(c, "%s.bias_reshaped", n->name);
            if (!sn || !rn ||
                !emit_init(c, sn, ONNX__TENSOR_PROTO__DATA_TYPE__INT64, &ns, 1, shape, sizeof(int64_t) * ns) ||
                !node1(c, "Reshape", rn, float_bias, sn, rn))
                return oom(err);
            b = rn;
        }
        if (!node1(c, "Add", an, deq_out, b, y)) return oom(err);
    }
    return CALQ_OK;
}

/* Tensor v quantized as the chain named after `chain` (shared with layers reading it with the
 * same factors) and restored by <base>.antiquant: AscendQuant -> AscendAntiQuant (deploy) or the
 * fake-quant chain -> Mul(scale_d) (fake-quant), §9.3. The restored tensor's name; NULL on OOM. */
static const char *quant_antiquant(calq__xctx *c, const char *chain, const char *base, int v,
                                   const calq_record_layer *rl, calq_error *err)
{
    const char *xq = act_quant(c, chain, c->g->values[v].name, rl->scale_d, rl->offset_d);
    if (!xq) {
        oom(err);
        return NULL;
    }
    return antiquant(c, base, xq, rl, err);
}

const char *calq__ascend_pool_input(calq__xctx *c, int ni, calq_error *err)
{
    const calq_node *n = &c->g->nodes[ni];
    if (strcmp(n->op_type, "MaxPool") != 0 || n->n_inputs < 1 || n->inputs[0] < 0) return NULL;
    int v = n->inputs[0];
    const calq_record_layer *rl = NULL;
    const char *layer = NULL;
    for (int i = 0; i < c->g->n_nodes && !rl; i++)
        if (c->quantized[i] && c->g->nodes[i].inputs[0] == v) {
            layer = c->g->nodes[i].name;
            rl = calq__record_find(c->rec, layer);
        }
    if (!rl) return NULL; /* no quantized reader: the pool reads the float tensor */
    return quant_antiquant(c, layer, n->name, v, rl, err);
}

const char *calq__ascend_tensor_input(calq__xctx *c, int ni, int k, const calq_record_layer *rl, calq_error *err)
{
    const calq_node *n = &c->g->nodes[ni];
    char *base = k == 0 ? (char *)n->name : calq__xa_printf(&c->x.a, "%s_input%d", n->name, k);
    if (!base) {
        oom(err);
        return NULL;
    }
    /* the chain is shared with any quantized layer reading the tensor with the same factors */
    return quant_antiquant(c, base, base, n->inputs[k], rl, err);
}
