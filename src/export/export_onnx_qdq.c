/* calq_save_model for ONNX: the record checked first (§4.4), then the original ModelProto
 * patched into a standard ONNX quantized model that onnxruntime runs (issue 6):
 *
 *   QDQ:       x -> QuantizeLinear(scale_d, offset_d) -> DequantizeLinear -> layer
 *              weight: int8 initializer -> DequantizeLinear (per channel on axis 0 for Conv)
 *              bias:   int32 round_half_even(b / (scale_d*scale_w[c])) -> DequantizeLinear
 *   QOperator: QLinearConv / QLinearMatMul where the output factors are known (export_onnx_qop.c).
 *
 * AMCT's convention (§0.3) is ONNX's: x ~ (q - offset)*scale, q = clamp(round(x/scale) + offset),
 * so y_scale = scale_d and y_zero_point = offset_d (int8). The record's scale_w were computed on
 * the weights after Conv+BatchNorm folding (§8.3), so the exported model folds the same way,
 * with the same float32 arithmetic (calq__pass_fold_conv_affine on a copy of the IR), and drops
 * the folded nodes. Per-channel DequantizeLinear needs opset 13; an older model is raised to 13,
 * converting the operators whose signature changed on the way (export_upgrade.c). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/log.h"
#include "base/unique_name.h"
#include "calib/adaround.h"
#include "export/export_onnx.h"
#include "exec/plan.h"
#include "graph/balance.h"
#include "graph/passes.h"
#include "graph/quantizable.h"

static calq_status oom(calq_error *err)
{
    return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "save: out of memory");
}

static bool emit_init(calq__xctx *c, const char *name, int dt, const int64_t *dims, int ndim, const void *d, size_t nb)
{
    return calq__xg_init_add(&c->x, calq__xg_tensor(&c->x, name, dt, dims, ndim, d, nb));
}

/* A value of the model or of its folded IR, an initializer or node output this export added, or a
 * name calq__xname gave out that is not in the file yet (hashed: a per-name search of everything
 * added made saving a 10k-layer model take minutes). */
static bool name_taken(const void *ctx, const char *name)
{
    const calq__xctx *c = ctx;
    return calq__graph_find(c->m->g, name) >= 0 || calq__graph_find(c->g, name) >= 0 ||
           calq__strmap_get(&c->x.names, name) >= 0 || calq__strmap_get(&c->given, name) >= 0;
}

/* The node names of g and of every If / Loop / Scan body in it, at any depth: the opset upgrade
 * adds nodes to bodies too (export_upgrade.c), and a name it picks must not be one a later node
 * of the same body has. Bodies deeper than the importer accepts (pb_depth.h) do not reach here.
 * False on out-of-memory. */
static bool put_node_names(calq_strmap *m, const Onnx__GraphProto *g, int depth)
{
    if (!g || depth > 64) return true;
    for (size_t k = 0; k < g->n_node; k++) {
        const Onnx__NodeProto *nd = g->node[k];
        if (nd->name && nd->name[0] && !calq__strmap_put(m, nd->name, 1)) return false;
        for (size_t a = 0; a < nd->n_attribute; a++) {
            const Onnx__AttributeProto *at = nd->attribute[a];
            if (!put_node_names(m, at->g, depth + 1)) return false;
            for (size_t b = 0; b < at->n_graphs; b++)
                if (!put_node_names(m, at->graphs[b], depth + 1)) return false;
        }
    }
    return true;
}

/* A node name of the model or one calq__xnode_name gave out. */
static bool node_name_taken(const void *ctx, const char *name)
{
    const calq__xctx *c = ctx;
    return calq__strmap_get(&c->model_nodes, name) >= 0 || calq__strmap_get(&c->given_nodes, name) >= 0;
}

/* fmt made unique against `taken`, copied into the arena and recorded in `given`. */
static char *fresh_name(calq__xctx *c, calq_name_taken_fn taken, calq_strmap *given, const char *fmt, va_list ap)
{
    char *base = calq__vstrdup_printf(fmt, ap);
    if (!base) return NULL;
    char *heap = calq__unique_name(base, "", "_calq", 1, taken, c);
    free(base);
    char *nm = heap ? calq__xa_strdup(&c->x.a, heap) : NULL;
    free(heap);
    /* given out, so a second call before this one's tensor or node is emitted cannot return it */
    if (nm && !calq__strmap_put(given, nm, 1)) return NULL;
    return nm;
}

char *calq__xname(calq__xctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *nm = fresh_name(c, name_taken, &c->given, fmt, ap);
    va_end(ap);
    return nm;
}

char *calq__xnode_name(calq__xctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *nm = fresh_name(c, node_name_taken, &c->given_nodes, fmt, ap);
    va_end(ap);
    return nm;
}

int calq__xact_first(const calq__xctx *c, const char *tensor)
{
    return calq__strmap_get(&c->act_of, tensor);
}

calq__xact *calq__xact_push(calq__xctx *c, const char *tensor)
{
    if (c->n_acts == c->cap_acts) return NULL;
    int i = c->n_acts, last = -1;
    for (int k = calq__xact_first(c, tensor); k >= 0; k = c->acts[k].next_same) last = k;
    if (last >= 0)
        c->acts[last].next_same = i;
    else if (!calq__strmap_put(&c->act_of, tensor, i))
        return NULL;
    calq__xact *a = &c->acts[c->n_acts++];
    memset(a, 0, sizeof *a);
    a->tensor = tensor;
    a->next_same = -1;
    return a;
}

calq__xact *calq__xact_get(calq__xctx *c, const char *tensor, float scale, int64_t offset, const char *owner,
                           bool want_dq)
{
    calq__xact *a = NULL;
    int first = calq__xact_first(c, tensor);
    bool seen = first >= 0; /* the tensor already has a pair (for another owner or other factors) */
    for (int i = first; i >= 0 && !a; i = c->acts[i].next_same) {
        if (c->acts[i].scale == scale && c->acts[i].offset == offset &&
            (owner ? c->acts[i].owner && !strcmp(c->acts[i].owner, owner) : !c->acts[i].owner))
            a = &c->acts[i];
    }
    if (!a) {
        if (!(a = calq__xact_push(c, tensor))) return NULL; /* sized to the layer count: out of memory */
        a->scale = scale;
        a->offset = offset;
        a->owner = owner;
        /* a second pair for one tensor (another reader's dedicated pair, or a foreign record's
         * other factors) is named after its layer */
        const char *sfx = seen && owner ? owner : "";
        const char *sep = seen && owner ? "_" : "";
        a->q = calq__xname(c, "%s_quantized%s%s", tensor, sep, sfx);
        a->dq = calq__xname(c, "%s_dequantized%s%s", tensor, sep, sfx);
        a->scale_name = calq__xname(c, "%s_scale%s%s", tensor, sep, sfx);
        a->zp_name = calq__xname(c, "%s_zero_point%s%s", tensor, sep, sfx);
        char *nn = a->q ? calq__xnode_name(c, "%s_QuantizeLinear", a->q) : NULL;
        if (!a->q || !a->dq || !a->scale_name || !a->zp_name || !nn) return NULL;
        int8_t zp = (int8_t)offset;
        if (!emit_init(c, a->scale_name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, NULL, 0, &scale, sizeof scale) ||
            !emit_init(c, a->zp_name, ONNX__TENSOR_PROTO__DATA_TYPE__INT8, NULL, 0, &zp, 1))
            return NULL;
        const char *in[3] = {tensor, a->scale_name, a->zp_name};
        if (!calq__xg_node(&c->x, calq__xg_new_node(&c->x, "QuantizeLinear", nn, in, 3, (const char **)&a->q, 1)))
            return NULL;
    }
    if (want_dq && !a->has_dq) {
        char *nn = calq__xnode_name(c, "%s_DequantizeLinear", a->q);
        const char *in[3] = {a->q, a->scale_name, a->zp_name};
        if (!nn ||
            !calq__xg_node(&c->x, calq__xg_new_node(&c->x, "DequantizeLinear", nn, in, 3, (const char **)&a->dq, 1)))
            return NULL;
        a->has_dq = true;
    }
    return a;
}

bool calq__x_act_input(const calq__xctx *c, int ni, int k)
{
    const calq_node *n = &c->g->nodes[ni];
    return k >= 1 && k < n->n_inputs && k < 32 && n->inputs[k] >= 0 && ((c->kinds[ni]->act_inputs >> k) & 1u);
}

const calq_record_layer *calq__x_input_record(const calq__xctx *c, int ni, int k)
{
    const char *layer = c->g->nodes[ni].name;
    if (k == 0) return calq__record_find(c->rec, layer);
    char *key = calq__record_key(layer, k);
    const calq_record_layer *rl = key ? calq__record_find(c->rec, key) : NULL;
    free(key);
    return rl;
}

const calq_record_layer *calq__x_tensor_record(const calq__xctx *c, int ni, int k)
{
    const calq_node *n = &c->g->nodes[ni];
    const calq_layer_config *t = calq__config_find_tensor(c->cfg, n->name, k);
    if (!t || !t->quant_enable || k >= n->n_inputs || n->inputs[k] < 0) return NULL;
    char *key = calq__record_key(n->name, k); /* "<layer>:<input>", input 0 too (§7.1) */
    const calq_record_layer *rl = key ? calq__record_find(c->rec, key) : NULL;
    free(key);
    return rl;
}

const char *calq__xvalue(calq__xctx *c, int v, calq_error *err)
{
    const calq_value *val = &c->g->values[v];
    /* a constant the fold passes made (§8.3, a weight behind Identity / Transpose) is not in the
     * original proto: add it */
    if (val->constant && (val->folded || calq__graph_find(c->m->g, val->name) < 0)) {
        bool have = calq__strmap_get(&c->x.names, val->name) >= 0; /* added already */
        const calq_tensor *t = val->constant;
        if (!have && (t->dtype != CALQ_DTYPE_FLOAT32 ||
                      !emit_init(c, val->name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, t->dims, t->ndim, t->data,
                                 (size_t)calq_tensor_numel(t) * sizeof(float)))) {
            oom(err);
            return NULL;
        }
    }
    return val->name;
}

/* The record's scale_w should be ARQ's on the weights as folded here (§6.1, §8.3); a
 * difference means a record made with other fusion settings or by another tool. The record
 * wins (AMCT's save also uses the record), but the user is told. */
static void arq_cross_check(const calq_qkind *kind, const calq_node *n, const calq_tensor *w,
                            const calq_record_layer *rl, int w_qmax)
{
    calq_arq_opts o;
    calq_arq_opts_init(&o);
    o.channel_wise = rl->n_scale_w > 1;
    calq_weight_layout layout = kind->layout;
    int group = calq__qkind_group(kind, n);
    if (calq_arq_num_scales(w, layout, group, &o) != rl->n_scale_w) return;
    float *s = malloc(sizeof(float) * (size_t)rl->n_scale_w);
    int *off = malloc(sizeof(int) * (size_t)rl->n_scale_w);
    calq_error e = {0};
    if (s && off && calq_arq_quantize(w, layout, group, &o, n->name, s, off, NULL, NULL, &e) == CALQ_OK) {
        int bad = 0;
        for (int c = 0; c < rl->n_scale_w; c++) {
            if (w_qmax == 63) s[c] = (float)((double)s[c] * 127.0 / 63.0); /* as reduce_range.c scales them */
            bad += fabsf(s[c] - rl->scale_w[c]) > 1e-6f * fabsf(s[c]);
        }
        if (bad)
            calq__log(CALQ_LOG_WARNING,
                      "calq: warning: layer \"%s\": %d of %d scale_w in the record differ from ARQ on its weights as "
                      "saved (folded, amct-reference.md §8.3): a record from other fusion settings or another tool? "
                      "The record's values are used",
                      n->name, bad, rl->n_scale_w);
    }
    free(s);
    free(off);
}

calq_status calq__xq_weights(calq__xctx *c, int ni, const calq_record_layer *rl, int8_t **wq, int32_t **bq,
                             int64_t *n_bias, calq_error *err)
{
    const calq_node *n = &c->g->nodes[ni];
    const calq_qkind *kind = c->kinds[ni];
    const calq_tensor *w = c->g->values[n->inputs[kind->weight_input]].constant;
    int64_t numel = calq_tensor_numel(w);
    *wq = calq__xa_alloc(&c->x.a, (size_t)numel);
    *bq = NULL;
    *n_bias = 0;
    if (!*wq) return oom(err);
    bool channel_wise = kind->channel_wise;
    int64_t ch = calq__weight_channels(kind, n, w);
    if (w->dtype != CALQ_DTYPE_FLOAT32 || (rl->n_scale_w != 1 && (!channel_wise || rl->n_scale_w != ch)))
        return calq__fail(err, CALQ_ERR_RECORD_FILE, n->name,
                          "save: layer \"%s\" (%s) has %d scale_w in the record; its %s weight takes 1%s (§8.2, "
                          "§8.4: Gemm / MatMul are per tensor)",
                          n->name, n->op_type, rl->n_scale_w, calq_dtype_name(w->dtype),
                          channel_wise ? " or one per output channel" : "");
    arq_cross_check(kind, n, w, rl, c->w_qmax);
    const float *wd = w->data;
    /* w_q = clamp(round(w/scale_w) + 0, -128, 127), ARQ's rounding (§6.1): the record's scale_w,
     * which calq's own calibration computed with the same ARQ on the same folded weights
     * (reduce range: [-64, 63]) */
    const float hi = (float)c->w_qmax, lo = -hi - 1.0f;
    const int8_t *ada; /* ada_quantize: the learned rounding from the record's side file */
    CALQ_TRY(calq__ada_weights(rl, w, &ada, err));
    calq__wchan wc;
    calq__wchan_init(kind, n, w, &wc);
    calq__quantize_weights(&wc, wd, numel, rl->scale_w, rl->n_scale_w, lo, hi, ada, *wq, NULL);
    int bi = kind->bias_input;
    const calq_tensor *b =
        bi >= 0 && n->n_inputs > bi && n->inputs[bi] >= 0 ? c->g->values[n->inputs[bi]].constant : NULL;
    int64_t cout = calq__qkind_out_channels(kind, n, w->ndim, w->dims);
    /* a bias of another shape (a Gemm C that broadcasts) stays float */
    if (!b || b->dtype != CALQ_DTYPE_FLOAT32 || b->ndim != 1 || b->dims[0] != cout) return CALQ_OK;
    *bq = calq__xa_alloc(&c->x.a, sizeof(int32_t) * (size_t)cout);
    if (!*bq) return oom(err);
    *n_bias = cout;
    calq_status st = calq_quant_bias(b->data, cout, rl->scale_d, rl->scale_w, rl->n_scale_w, n->name, *bq, err);
    if (st != CALQ_OK)
        return calq__prefix(err, "save: layer \"%s\" (scale_d %g in the record)", n->name, (double)rl->scale_d);
    return CALQ_OK;
}

calq_status calq__xq_rnn_weight(calq__xctx *c, int ni, const calq_record_layer *rl, int j, int8_t **wq,
                                const float **scales, int64_t *n_scales, calq_error *err)
{
    const calq_node *n = &c->g->nodes[ni];
    const calq_qkind *kind = c->kinds[ni];
    const int wi = j ? kind->weight2_input : kind->weight_input;
    const calq_tensor *w = c->g->values[n->inputs[wi]].constant;
    int64_t numel = calq_tensor_numel(w), ch = calq__weight_channels(kind, n, w);
    /* scale_w: one per weight (W, R) or one per channel of each, W's first (§8.1) */
    if (w->dtype != CALQ_DTYPE_FLOAT32 || (rl->n_scale_w != 2 && rl->n_scale_w != 2 * ch))
        return calq__fail(err, CALQ_ERR_RECORD_FILE, n->name,
                          "save: layer \"%s\" (%s) has %d scale_w in the record; its W and R take 2 (one each) or "
                          "%lld (one per direction and gate row of each, W's first)",
                          n->name, n->op_type, rl->n_scale_w, (long long)(2 * ch));
    *n_scales = rl->n_scale_w == 2 ? 1 : ch;
    *scales = rl->scale_w + j * *n_scales;
    *wq = calq__xa_alloc(&c->x.a, (size_t)numel);
    if (!*wq) return oom(err);
    const float *wd = w->data, hi = (float)c->w_qmax, lo = -hi - 1.0f;
    calq__wchan wc;
    calq__wchan_init(kind, n, w, &wc);
    calq__quantize_weights(&wc, wd, numel, *scales, (int)*n_scales, lo, hi, NULL, *wq, NULL);
    return CALQ_OK;
}

/* Emits initializer + DequantizeLinear of an int8 weight / int32 bias; returns the float name. */
static const char *emit_dq_const(calq__xctx *c, const char *layer, const char *what, int dt, const calq_tensor *shape,
                                 const void *q, size_t qbytes, const float *scales, int n_scales, int axis)
{
    calq__xa *a = &c->x.a;
    char *qn = calq__xname(c, "%s.%s_quantized", layer, what), *sn = calq__xname(c, "%s.%s_scale", layer, what);
    char *zn = calq__xname(c, "%s.%s_zero_point", layer, what), *dn = calq__xname(c, "%s.%s", layer, what);
    char *nn = calq__xnode_name(c, "%s.%s_DequantizeLinear", layer, what);
    void *zeros = calq__xa_alloc(a, sizeof(int32_t) * (size_t)n_scales);
    if (!qn || !sn || !zn || !dn || !nn || !zeros) return NULL;
    int64_t sd = n_scales;
    int snd = n_scales > 1 ? 1 : 0;
    size_t zb = (dt == ONNX__TENSOR_PROTO__DATA_TYPE__INT8 ? 1 : 4) * (size_t)n_scales;
    if (!emit_init(c, qn, dt, shape->dims, shape->ndim, q, qbytes) ||
        !emit_init(c, sn, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, &sd, snd, scales, sizeof(float) * (size_t)n_scales) ||
        !emit_init(c, zn, dt, &sd, snd, zeros, zb))
        return NULL;
    const char *in[3] = {qn, sn, zn};
    Onnx__NodeProto *nd = calq__xg_new_node(&c->x, "DequantizeLinear", nn, in, 3, (const char **)&dn, 1);
    if (!nd || (n_scales > 1 && !calq__xg_attr_int(&c->x, nd, "axis", axis)) || !calq__xg_node(&c->x, nd)) return NULL;
    return dn;
}

/* QDQ form of quantized layer ni: copy of the original node reading dequantized tensors. */
static calq_status qdq_layer(calq__xctx *c, int ni, const Onnx__NodeProto *orig, const calq_record_layer *rl_in,
                             calq_error *err)
{
    const calq_node *n = &c->g->nodes[ni];
    const calq_qkind *kind = c->kinds[ni];
    /* the int8 plan may give the input other factors (one set per tensor group): the bias follows */
    const calq_record_layer rl_own = calq__int8_input_record(c, n->inputs[0], rl_in), *rl = &rl_own;
    if (rl->offset_d < -128 || rl->offset_d > 127) /* calq__record_check rejects it first (§4.4) */
        return calq__fail(err, CALQ_ERR_RECORD_FACTOR, n->name, "offset_d out of int8 in layer %s", n->name);
    /* QDQ: a dedicated QuantizeLinear / DequantizeLinear pair per layer, also where layers share
     * an input. onnxruntime (x86) fuses DQ -> Conv -> Q into an integer QLinearConv only when
     * the int8 tensor has a single reader, and runs the other layers in float; with dedicated
     * pairs every layer runs in integers there, and calq (which fuses the same way) gives the
     * same int8 tensors. The QOperator writer shares one pair (its layers read int8 directly). */
    const char *owner = c->fmt == CALQ_SAVE_QDQ ? n->name : NULL;
    Onnx__NodeProto *nd = calq__xg_copy_node(&c->x, orig);
    char **in = calq__xa_alloc(&c->x.a, sizeof(char *) * (size_t)(n->n_inputs + 1));
    if (!nd || !in) return oom(err);
    nd->input = in;
    nd->n_input = (size_t)n->n_inputs;
    /* the activation inputs: input 0, and the others of a MatMul with two variable inputs (§8.1),
     * each with its own key; in the int8 plan, the tensors' uint8 pairs */
    for (int k = 0; k < n->n_inputs; k++) {
        if (k && !calq__x_act_input(c, ni, k)) continue;
        const int v = n->inputs[k];
        if (c->vq && c->vq[v].on) {
            if (!(in[k] = (char *)calq__int8_dq(c, v, err))) return err->status;
            continue;
        }
        const calq_record_layer *rk = k ? calq__x_input_record(c, ni, k) : rl;
        if (!rk)
            return calq__fail(err, CALQ_ERR_RECORD_FILE, n->name, "save: no record for input %d of %s", k, n->name);
        calq__xact *ak = calq__xact_get(c, c->g->values[v].name, rk->scale_d, rk->offset_d, owner, true);
        if (!ak) return oom(err);
        in[k] = ak->dq;
    }
    for (int k = 0; k < n->n_outputs && k < (int)nd->n_output; k++)
        if (n->outputs[k] >= 0) nd->output[k] = c->g->values[n->outputs[k]].name;
    if (rl->n_scale_w > 0 && kind->weight2_input >= 0) {
        /* LSTM / GRU / RNN: W and R stored int8 as [directions * gates * hidden, in], dequantized
         * per row (one DequantizeLinear axis), reshaped back; the layer itself runs in float */
        for (int j = 0; j < 2; j++) {
            int8_t *wq;
            const float *sc;
            int64_t ns;
            CALQ_TRY(calq__xq_rnn_weight(c, ni, rl, j, &wq, &sc, &ns, err));
            const int wi = j ? kind->weight2_input : kind->weight_input;
            const calq_tensor *w = c->g->values[n->inputs[wi]].constant;
            calq_tensor flat = {.dtype = CALQ_DTYPE_INT8,
                                .ndim = 2,
                                .dims = {calq_tensor_numel(w) / w->dims[w->ndim - 1], w->dims[w->ndim - 1]}};
            const char *what = j ? "recurrence" : "weight";
            const char *dq = emit_dq_const(c, n->name, what, ONNX__TENSOR_PROTO__DATA_TYPE__INT8, &flat, wq,
                                           (size_t)calq_tensor_numel(w), sc, (int)ns, 0);
            char *shp = calq__xname(c, "%s.%s_shape", n->name, what), *rs = calq__xname(c, "%s.%s_3d", n->name, what);
            char *rsn = rs ? calq__xnode_name(c, "%s", rs) : NULL;
            int64_t rank = w->ndim;
            const char *rin[2] = {dq, shp};
            Onnx__NodeProto *r = dq && shp && rsn &&
                                         emit_init(c, shp, ONNX__TENSOR_PROTO__DATA_TYPE__INT64, &rank, 1, w->dims,
                                                   sizeof(int64_t) * (size_t)rank)
                                     ? calq__xg_new_node(&c->x, "Reshape", rsn, rin, 2, (const char **)&rs, 1)
                                     : NULL;
            if (!r || !calq__xg_node(&c->x, r)) return oom(err);
            nd->input[wi] = rs;
        }
    } else if (rl->n_scale_w > 0 && kind->weights == CALQ_QKIND_WEIGHTS_CONST) {
        int8_t *wq;
        int32_t *bq;
        int64_t nb;
        CALQ_TRY(calq__xq_weights(c, ni, rl, &wq, &bq, &nb, err));
        const calq_tensor *w = c->g->values[n->inputs[kind->weight_input]].constant;
        int axis = calq__qkind_weight_axis(kind, n, w->ndim); /* of the per-channel scales (§8.2) */
        const char *wn;
        if (rl->n_scale_w > 1 && kind->layout == CALQ_WEIGHTS_CONV_TRANSPOSE && calq__qkind_group(kind, n) != 1) {
            /* a grouped ConvTranspose's channels span two weight axes (group of dim 0, dim 1),
             * which one DequantizeLinear axis cannot express: the weight is stored dequantized,
             * w_q * scale_w[c] in float, the same values the DequantizeLinear would give */
            int64_t numel = calq_tensor_numel(w);
            float *wf = calq__xa_alloc(&c->x.a, sizeof(float) * (size_t)numel);
            char *fn = calq__xname(c, "%s.weight_fake_quant", n->name);
            if (!wf || !fn) return oom(err);
            calq__wchan wc;
            calq__wchan_init(kind, n, w, &wc);
            calq__dequantize_weights(&wc, wq, numel, rl->scale_w, rl->n_scale_w, wf);
            if (!emit_init(c, fn, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, w->dims, w->ndim, wf, sizeof(float) * numel))
                return oom(err);
            calq__log(CALQ_LOG_INFO,
                      "calq: note: layer \"%s\" (grouped ConvTranspose, per-channel weights): its QDQ weight is "
                      "stored as float w_q * scale_w (one DequantizeLinear axis cannot index group and channel)",
                      n->name);
            wn = fn;
        } else {
            wn = emit_dq_const(c, n->name, "weight", ONNX__TENSOR_PROTO__DATA_TYPE__INT8, w, wq,
                               (size_t)calq_tensor_numel(w), rl->scale_w, rl->n_scale_w, axis);
        }
        if (!wn) return oom(err);
        nd->input[kind->weight_input] = (char *)wn;
        if (bq) {
            /* deq_scale[c] = scale_d * scale_w[c] in float32 (§6.2) */
            int ns = rl->n_scale_w > 1 ? (int)nb : 1;
            float *deq = calq__xa_alloc(&c->x.a, sizeof(float) * (size_t)ns);
            if (!deq) return oom(err);
            calq_deq_scale(rl->scale_d, rl->scale_w, rl->n_scale_w, ns, deq);
            calq_tensor bs = {.dtype = CALQ_DTYPE_INT32, .ndim = 1, .dims = {nb}};
            const char *bn = emit_dq_const(c, n->name, "bias", ONNX__TENSOR_PROTO__DATA_TYPE__INT32, &bs, bq,
                                           sizeof(int32_t) * (size_t)nb, deq, ns, 0);
            if (!bn) return oom(err);
            nd->input[kind->bias_input] = (char *)bn;
        }
    }
    /* the inputs not replaced above: float (possibly folded) constants or graph tensors */
    for (int k = 1; k < n->n_inputs; k++)
        if (!in[k] && !(in[k] = n->inputs[k] < 0 ? "" : (char *)calq__xvalue(c, n->inputs[k], err))) return err->status;
    if (!calq__xg_node(&c->x, nd)) return oom(err);
    return CALQ_OK;
}

/* A node that is not quantized: the original (upgraded when the opset is raised), with the
 * folded graph's names where folding changed them. */
static calq_status plain_node(calq__xctx *c, int ni, const Onnx__NodeProto *orig, calq_error *err)
{
    Onnx__NodeProto *nd = NULL;
    CALQ_TRY(calq__export_upgrade_node(c, orig, &nd, err));
    if (ni >= 0) {
        const calq_node *n = &c->g->nodes[ni];
        /* the node's own inputs only: a node holding subgraphs lists the outer values they read
         * after them in the IR (graph.h n_formal), which the ONNX node must not name */
        int n_in = n->n_formal;
        bool same = (int)orig->n_input >= n_in && (int)orig->n_output >= n->n_outputs;
        for (int k = 0; same && k < n_in; k++) /* a folded constant needs its initializer */
            same = n->inputs[k] < 0 ||
                   (strcmp(orig->input[k], c->g->values[n->inputs[k]].name) == 0 && !c->g->values[n->inputs[k]].folded);
        for (int k = 0; same && k < n->n_outputs; k++)
            same = n->outputs[k] < 0 || strcmp(orig->output[k], c->g->values[n->outputs[k]].name) == 0;
        if (!same) {
            if (nd == orig && !(nd = calq__xg_copy_node(&c->x, orig))) return oom(err);
            if ((int)nd->n_input < n_in) { /* a Conv without bias that got the folded one */
                char **in = calq__xa_alloc(&c->x.a, sizeof(char *) * (size_t)n_in);
                if (!in) return oom(err);
                memcpy(in, nd->input, sizeof(char *) * nd->n_input);
                nd->input = in;
                nd->n_input = (size_t)n_in;
            }
            for (int k = 0; k < n_in; k++)
                if (n->inputs[k] >= 0 && !(nd->input[k] = (char *)calq__xvalue(c, n->inputs[k], err)))
                    return err->status;
            for (int k = 0; k < n->n_outputs; k++)
                if (n->outputs[k] >= 0) nd->output[k] = c->g->values[n->outputs[k]].name;
        }
        /* tensor_quantize inputs (§7.2): quantized and restored before the float op (Ascend:
         * Quant -> AntiQuant, §9.3; QDQ / QOperator: a Q -> DQ pair of the node's own); else
         * AMCT's MaxPool beside quantized readers of its input (§9.3) */
        const bool ascend = c->fmt == CALQ_SAVE_ASCEND_FAKE_QUANT || c->fmt == CALQ_SAVE_ASCEND_DEPLOY;
        for (int k = 0; k < n->n_inputs && k < (int)nd->n_input; k++) {
            const calq_record_layer *rt = calq__x_tensor_record(c, ni, k);
            const char *pin = NULL;
            if (c->vq && c->fmt == CALQ_SAVE_QDQ && calq__int8_dq_read(c, ni, k)) {
                /* the int8 plan: each quantized tensor the op reads as uint8 or that its producer
                 * writes in uint8; a float op reads a float producer's tensor as it is, as in the
                 * QOperator file (QOperator: float ops read float tensors) */
                if (!(pin = calq__int8_dq(c, n->inputs[k], err))) return err->status;
            } else if (rt && ascend) {
                if (!(pin = calq__ascend_tensor_input(c, ni, k, rt, err))) return err->status;
            } else if (rt) {
                calq__xact *a = calq__xact_get(c, c->g->values[n->inputs[k]].name, rt->scale_d, rt->offset_d,
                                               c->fmt == CALQ_SAVE_QDQ ? n->name : NULL, true);
                if (!a) return oom(err);
                pin = a->dq;
            } else if (k == 0 && ascend && !(pin = calq__ascend_pool_input(c, ni, err)) && err->status) {
                return err->status;
            }
            if (!pin) continue;
            if (nd == orig && !(nd = calq__xg_copy_node(&c->x, orig))) return oom(err);
            nd->input[k] = (char *)pin;
        }
        if (c->vq && !strcmp(n->op_type, "Resize") && n->inputs[0] >= 0 && c->vq[n->inputs[0]].on) {
            if (nd == orig && !(nd = calq__xg_copy_node(&c->x, orig))) return oom(err);
            calq__int8_resize_roi(c, n, nd);
        }
    }
    return calq__xg_node(&c->x, (Onnx__NodeProto *)nd) ? CALQ_OK : oom(err);
}

/* Ranks the writers need (Softmax's axis when the opset is raised, the shape of a per-channel
 * dequantization scale) are unknown in a model with dynamic axes until shapes are inferred: from
 * the input shapes the model has now (those calibration ran with, or --input_shape), unknown input
 * dims taken as 1. A model whose shapes cannot be inferred so keeps its unknown ranks, and a writer
 * that needs one says so. */
static calq_status infer_shapes(calq__xctx *c, calq_error *err)
{
    bool unknown = false, dyn_input = false;
    for (int v = 0; v < c->g->n_values && !unknown; v++)
        unknown = c->g->values[v].ndim < 0 && !c->g->values[v].constant;
    if (!unknown) return CALQ_OK;
    for (int i = 0; i < c->g->n_inputs; i++) {
        const calq_value *x = &c->g->values[c->g->inputs[i]];
        for (int d = 0; d < x->ndim; d++) dyn_input |= x->dims[d] < 0;
    }
    calq_error e = {0};
    int n = 0;
    if (calq__infer_value_shapes(c->g, 1, &n, &e) != CALQ_OK)
        calq__log(CALQ_LOG_DEBUG, "calq: save: the model's shapes could not be inferred (%s)", e.message);
    else if (n)
        calq__log(CALQ_LOG_DEBUG, "calq: save: inferred the shapes of %d tensors%s", n,
                  dyn_input ? " (dynamic input dims taken as 1)" : "");
    (void)err;
    return CALQ_OK;
}

/* DMQ balancing (record tensor_balance_factor, §7.1; graph/balance.h): every enabled layer with
 * factors is rewritten in the folded copy as calibration rewrote it, so each writer quantizes W·s
 * and reads the Mul's X·(1/s). The Mul is an IR node with no source node: export_walk writes it
 * right before its layer, its 1/s constant as an initializer. */
static calq_status apply_balance(calq__xctx *c, calq_error *err)
{
    const calq_config *cfg = c->cfg;
    for (int i = 0; i < cfg->n_layers; i++) {
        const calq_layer_config *lc = &cfg->layers[i];
        const calq_record_layer *rl = calq__record_find(c->rec, lc->name);
        if (!lc->quant_enable || !rl || !rl->n_balance) continue;
        int ni = -1;
        for (int k = 0; k < c->g->n_nodes && ni < 0; k++)
            if (!strcmp(c->g->nodes[k].name, lc->name)) ni = k;
        if (ni < 0) continue; /* the checks after this one name it */
        calq_status st = calq__pass_balance(c->g, ni, rl->balance, rl->n_balance, NULL, err);
        if (st != CALQ_OK) return calq__prefix(err, "save");
    }
    return CALQ_OK;
}

static calq_status emit_balance_mul(calq__xctx *c, int mi, calq_error *err)
{
    const calq_node *m = &c->g->nodes[mi];
    const char *in[2] = {c->g->values[m->inputs[0]].name, calq__xvalue(c, m->inputs[1], err)};
    const char *out = c->g->values[m->outputs[0]].name;
    if (!in[1]) return err->status;
    char *name = calq__xnode_name(c, "%s", m->name); /* unique in g (balance.h), not yet in the file */
    Onnx__NodeProto *nd = name ? calq__xg_new_node(&c->x, "Mul", name, in, 2, &out, 1) : NULL;
    return nd && calq__xg_node(&c->x, nd) ? CALQ_OK : oom(err);
}

/* A source node calq__pass_const_weights removed at import (an Identity / Transpose / ... of a
 * weight): every output it has is a folded constant of the model's IR, written as an initializer
 * where something still reads it. Constant nodes, the other source nodes the IR has not, stay. */
static bool folded_at_import(const calq__xctx *c, const Onnx__NodeProto *nd)
{
    if (!nd->n_output) return false;
    for (size_t k = 0; k < nd->n_output; k++) {
        int v = nd->output[k] && nd->output[k][0] ? calq__graph_find(c->m->g, nd->output[k]) : -1;
        if (v < 0 || !c->m->g->values[v].folded) return false;
    }
    return true;
}

static calq_status export_walk(calq__xctx *c, calq_error *err)
{
    const Onnx__GraphProto *gp = c->mp->graph;
    size_t no = gp->n_node;
    int *clone_of = malloc(sizeof(int) * (no ? no : 1));
    bool *in_ir = calloc(no ? no : 1, sizeof(bool));
    calq_status st = CALQ_OK;
    if (!clone_of || !in_ir) st = oom(err);
    for (size_t k = 0; st == CALQ_OK && k < no; k++) clone_of[k] = -1;
    for (int i = 0; st == CALQ_OK && i < c->m->g->n_nodes; i++) {
        int s = c->m->g->nodes[i].src_index;
        if (s >= 0 && (size_t)s < no) in_ir[s] = true;
    }
    for (int i = 0; st == CALQ_OK && i < c->g->n_nodes; i++) {
        int s = c->g->nodes[i].src_index;
        if (s >= 0 && (size_t)s < no) clone_of[s] = i;
    }
    for (size_t k = 0; st == CALQ_OK && k < no; k++) {
        int ni = clone_of[k];
        if (ni < 0 && in_ir[k]) continue;                         /* folded into its Conv (§8.3) */
        if (ni < 0 && folded_at_import(c, gp->node[k])) continue; /* its output is a folded weight */
        if (ni >= 0 && c->skip[ni]) continue;
        if (ni >= 0 && (c->quantized[ni] || (c->form && c->form[ni]))) { /* its DMQ Mul first (graph/balance.h) */
            int x0 = c->g->nodes[ni].inputs[0], p = x0 >= 0 ? c->g->values[x0].producer : -1;
            if (p >= 0 && c->dmq_mul[p] && (st = emit_balance_mul(c, p, err)) != CALQ_OK) break;
        }
        if (ni >= 0 && c->form && c->form[ni]) {
            st = calq__qop_int8_node(c, ni, gp->node[k], err);
        } else if (ni >= 0 && c->quantized[ni]) {
            const calq_record_layer *rl = calq__record_find(c->rec, c->g->nodes[ni].name);
            bool done = false;
            if (c->fmt == CALQ_SAVE_ASCEND_FAKE_QUANT || c->fmt == CALQ_SAVE_ASCEND_DEPLOY) {
                st = calq__ascend_layer(c, ni, gp->node[k], rl, err);
                done = true;
            }
            if (c->fmt == CALQ_SAVE_QOPERATOR && !c->vq) st = calq__qop_layer(c, ni, gp->node[k], rl, &done, err);
            if (st == CALQ_OK && !done) st = qdq_layer(c, ni, gp->node[k], rl, err);
        } else {
            st = plain_node(c, ni, gp->node[k], err);
        }
    }
    free(clone_of);
    free(in_ir);
    return st;
}

calq_status calq__export_onnx(const calq_model *m, const calq_record *rec, const calq_config *cfg, calq_save_format fmt,
                              const char *path, calq_staged_files *out, calq_error *err)
{
    /* CALQ_SAVE_REDUCE_RANGE: the caller swapped in the 7-bit scale_w (reduce_range.c) */
    const int w_qmax = fmt & CALQ_SAVE_REDUCE_RANGE ? 63 : 127;
    fmt = (calq_save_format)(fmt & ~CALQ_SAVE_REDUCE_RANGE);
    calq__xctx c = {.m = m, .mp = m->onnx, .rec = rec, .cfg = cfg, .fmt = fmt, .out = out, .w_qmax = w_qmax};
    const Onnx__GraphProto *gp = c.mp->graph;
    c.opset_in = m->g->opset;
    /* QDQ / QOperator need opset 13 (per-channel DequantizeLinear); AMCT's models need 11
     * (Round, Clip with bound inputs), so an opset 11-12 model keeps its opset there, and a
     * model below 11 is raised to 13 like the others (one converter, export_upgrade.c). */
    bool ascend = fmt == CALQ_SAVE_ASCEND_FAKE_QUANT || fmt == CALQ_SAVE_ASCEND_DEPLOY;
    c.upgrade = c.opset_in < (ascend ? 11 : 13);
    int n_fold = 0;
    calq_status st = calq__graph_clone(m->g, &c.g, err);
    if (st == CALQ_OK && cfg->do_fusion)
        st = calq__pass_fold_conv_affine(c.g, (const char *const *)cfg->skip_fusion_layers, cfg->n_skip_fusion_layers,
                                         &n_fold, err);
    if (st == CALQ_OK) st = apply_balance(&c, err);
    if (st == CALQ_OK) st = infer_shapes(&c, err);
    if (st == CALQ_OK) {
        /* every node adds at most 16 nodes (two fake-quant chains of §9.2 and the layer's own) and
         * 20 initializers; upgrades add one initializer each */
        size_t nl = (size_t)c.g->n_nodes;
        st = calq__xg_init(&c.x, gp->n_node + 16 * nl + 16, gp->n_initializer + 20 * nl + gp->n_node * 3 + 16, err);
    }
    /* every node name of the model, also of nodes the output drops (folded BatchNorms): a few names
     * too many to pick from, rather than a second pass to find which nodes are kept */
    if (st == CALQ_OK && !calq__strmap_init(&c.model_nodes, gp->n_node)) st = oom(err);
    if (st == CALQ_OK && !put_node_names(&c.model_nodes, gp, 0)) st = oom(err);
    if (st == CALQ_OK) {
        c.kinds = calq__xa_alloc(&c.x.a, sizeof(*c.kinds) * (size_t)(c.g->n_nodes + 1));
        c.quantized = calq__xa_alloc(&c.x.a, sizeof(bool) * (size_t)(c.g->n_nodes + 1));
        c.skip = calq__xa_alloc(&c.x.a, sizeof(bool) * (size_t)(c.g->n_nodes + 1));
        c.dmq_mul = calq__xa_alloc(&c.x.a, sizeof(bool) * (size_t)(c.g->n_nodes + 1));
        c.cap_acts = 3 * c.g->n_nodes + c.g->n_values + 1; /* per (tensor, factors, owner): a bound */
        c.acts = calq__xa_alloc(&c.x.a, sizeof(calq__xact) * (size_t)c.cap_acts);
        if (!c.kinds || !c.quantized || !c.skip || !c.acts || !c.dmq_mul || !calq__readers_build(c.g, &c.readers))
            st = oom(err);
    }
    for (int i = 0; st == CALQ_OK && i < c.g->n_nodes; i++) /* the balancing Mul nodes apply_balance made */
        c.dmq_mul[i] = c.g->nodes[i].src_index < 0 && !strcmp(c.g->nodes[i].op_type, "Mul");
    calq_strmap cfg_index = {0};
    if (st == CALQ_OK && !calq__config_index(cfg, &cfg_index)) st = oom(err);
    for (int i = 0; st == CALQ_OK && i < c.g->n_nodes; i++) {
        int li = calq__strmap_get(&cfg_index, c.g->nodes[i].name);
        const calq_layer_config *lc = li >= 0 ? &cfg->layers[li] : NULL;
        c.kinds[i] = calq__qkind_of_node(c.g, i);
        c.quantized[i] = lc && lc->quant_enable && calq__record_find(rec, c.g->nodes[i].name) && c.kinds[i];
        const calq_record_layer *rl = c.quantized[i] ? calq__record_find(rec, c.g->nodes[i].name) : NULL;
        bool shifted = false;
        for (int k = 0; rl && k < rl->n_shift_bit; k++) shifted |= rl->shift_bit[k] != 0;
        if (shifted) /* AMCT's ONNX save refuses it too (§4.4); silently dropping it would be worse */
            st = calq__fail(err, CALQ_ERR_RECORD_FILE, rl->name,
                            "shift_bit is not support, please delete shift_bit of layer %s in record_file: calq "
                            "saves ONNX models without the int16 shift (§4.4, §6.4; Caffe deploy models keep it)",
                            rl->name);
        else if (lc && lc->quant_enable && calq__record_find(rec, lc->name) && !c.quantized[i])
            st = calq__fail(err, CALQ_ERR_RECORD_FILE, lc->name,
                            "save: layer \"%s\" has factors in the record but cannot be quantized in the model after "
                            "fusion (its weight is not constant, or fusion changed it); skip it in the config",
                            lc->name);
    }
    calq__strmap_free(&cfg_index);
    if (st == CALQ_OK && calq__int8_wanted(&c)) {
        st = calq__int8_plan(&c, err);
        if (st == CALQ_OK && fmt == CALQ_SAVE_QOPERATOR) st = calq__qop_int8_plan(&c, err);
        if (st == CALQ_OK)
            calq__log(CALQ_LOG_DEBUG, "calq: save: %s with the tensors between layers in uint8",
                      fmt == CALQ_SAVE_QDQ ? "QDQ" : "QOperator");
    }
    if (st == CALQ_OK) st = export_walk(&c, err);
    if (st == CALQ_OK) st = calq__export_finish(&c, path, err);
    calq__readers_free(&c.readers);
    calq__strmap_free(&c.act_of);
    calq__strmap_free(&c.given);
    calq__strmap_free(&c.model_nodes);
    calq__strmap_free(&c.given_nodes);
    calq__xg_free(&c.x);
    calq__graph_free(c.g);
    return st;
}
