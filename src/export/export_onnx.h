/* The ONNX export walk shared by the QDQ and QOperator writers (export_onnx_qdq.c,
 * export_onnx_qop.c). Private to src/export. */
#ifndef CALQ_EXPORT_ONNX_H
#define CALQ_EXPORT_ONNX_H

#include "export/export_common.h"
#include "graph/readers.h"

/* An activation quantized once per (tensor, scale, offset, owner): layers reading the same
 * tensor share one QuantizeLinear / DequantizeLinear pair unless each has its own (owner). */
typedef struct calq__xact {
    const char *tensor; /* the float tensor (a value name of the folded graph) */
    float scale;
    int64_t offset;
    const char *owner; /* the layer of a dedicated pair, or NULL for a shared one */
    char *q;           /* the int8 tensor (QuantizeLinear output) */
    char *scale_name, *zp_name;
    char *dq;      /* its dequantized float tensor */
    bool has_dq;   /* the DequantizeLinear has been emitted (QOperator needs only q) */
    int next_same; /* the next entry of the same tensor (index into calq__xctx.acts), or -1 */
} calq__xact;

/* The int8 plan's factors of a tensor (export_onnx_int8.c): uint8, zero point offset_d + 128. */
typedef struct calq__xq {
    bool on; /* quantized in the file */
    float scale;
    int64_t zp;        /* 0..255 */
    int group;         /* tensors joined by value-moving ops share their factors */
    bool produced;     /* its uint8 tensor is written by a QLinear op (QOperator), not a QuantizeLinear */
    bool float_needed; /* QOperator: a float op or the graph output reads it: dequantized into its name */
    char *qname, *sname, *zname, *dqname;
} calq__xq;

typedef struct calq__xctx {
    const calq_model *m;
    const Onnx__ModelProto *mp;
    const calq_record *rec;
    const calq_config *cfg;
    calq_save_format fmt;
    calq_staged_files *out; /* where the model is written (committed by the caller) */
    calq_graph *g;          /* the folded copy of m->g (owned) */
    calq__xgraph x;
    bool upgrade; /* the model's default opset is below 13 and is raised to 13 */
    int opset_in; /* the model's default opset */
    calq__xact *acts;
    int n_acts, cap_acts;
    calq_strmap act_of;       /* tensor -> its first entry in acts (next_same: the others): a scan of
                                 every entry per layer made a 10k-layer export quadratic */
    calq_strmap given;        /* names calq__xname returned (keys in x's arena) */
    calq_strmap model_nodes;  /* the model's node names (keys borrowed from mp) */
    calq_strmap given_nodes;  /* names calq__xnode_name returned (keys in x's arena) */
    const calq_qkind **kinds; /* per node of g: its quantizable kind (graph/qkind.h), or NULL */
    bool *quantized;          /* per node of g: a layer with record factors, enabled in cfg */
    bool *skip;               /* per node of g: a Relu absorbed into a QLinearConv's output range */
    int n_qop;                /* layers written as QLinearConv / QLinearMatMul */
    calq_readers readers;     /* who reads each value of g */
    bool *dmq_mul;            /* per node of g: a DMQ balancing Mul (graph/balance.h), written before its layer */
    calq__xq *vq;             /* per value of g: the int8 plan (int8 mode), else NULL */
    signed char *form;        /* QOperator int8 plan, per node: 1 = its 8-bit form (export_onnx_qop_int8.c) */
    int *writes;              /* per node in its 8-bit form: the value whose uint8 tensor it writes */
    bool uses_msft;           /* a com.microsoft operator was written (its opset is imported) */
    int w_qmax;               /* the weights' clamp [-w_qmax - 1, w_qmax]: 127, or 63 (CALQ_SAVE_REDUCE_RANGE) */
} calq__xctx;

/* ---- the int8 plan (export_onnx_int8.c) ---- */

/* True when the record quantizes tensors between layers (inputs of float ops the plan quantizes,
 * calq__qkind_int8_input, under keys the config does not list: calibration's int8_tensors) and
 * the format is QDQ or QOperator. */
bool calq__int8_wanted(const calq__xctx *c);
/* Fills c->vq (see export_onnx_int8.c for the rules). */
calq_status calq__int8_plan(calq__xctx *c, calq_error *err);
/* The 8-bit form of a float op both int8 files use (QLinearAdd, QLinearMul, QLinearConcat,
 * QLinearGlobalAveragePool, QLinearSigmoid, QLinearLeakyRelu; not Softmax, a tensor-only kind
 * too), reading its first *nin inputs as uint8; NULL when it has none. */
const char *calq__int8_qlinear_op(const calq_node *n, int *nin);
/* After calq__int8_plan: does node i read its input k as the uint8 tensor (a quantized layer's
 * activation, an 8-bit op's operand, a value-moving op run on uint8)? */
bool calq__int8_reads(const calq__xctx *c, int i, int k);
/* Relu / Clip node r is redundant after its input's 8-bit op: the Q of its output already clamps
 * to its bounds (the QOperator writer absorbs it; the plan counts the op before it as 8-bit). */
bool calq__int8_clip_redundant(const calq__xctx *c, int r);
/* QDQ file: does node i read the dequantized tensor of its input k (calq__int8_reads, or a float
 * op reading a tensor its producer writes in uint8), rather than the float tensor? */
bool calq__int8_dq_read(const calq__xctx *c, int i, int k);
/* An op that only moves or selects values (its output shares its input's factors). */
bool calq__int8_mover(const calq_node *n);
/* The uint8 tensor of value v (its QuantizeLinear emitted on first use unless a QLinear op writes
 * it: vq[v].produced), and a float DequantizeLinear of it shared by v's readers. NULL on OOM. */
const char *calq__int8_q(calq__xctx *c, int v, calq_error *err);
const char *calq__int8_dq(calq__xctx *c, int v, calq_error *err);
/* QOperator int8: which nodes take their 8-bit form (c->form, c->writes, Relu / Clip absorbed into
 * c->skip), and which uint8 tensors float readers need (export_onnx_qop_int8.c); then node ni in
 * its 8-bit form. */
calq_status calq__qop_int8_plan(calq__xctx *c, calq_error *err);
calq_status calq__qop_int8_node(calq__xctx *c, int ni, const Onnx__NodeProto *orig, calq_error *err);
/* A Resize's empty constant roi written as the omitted input (node n, its output copy nd). */
void calq__int8_resize_roi(const calq__xctx *c, const calq_node *n, Onnx__NodeProto *nd);
/* rl with scale_d / offset_d replaced by the plan's factors of value v (the layer's input). */
calq_record_layer calq__int8_input_record(const calq__xctx *c, int v, const calq_record_layer *rl);

/* Writes model m quantized with the record's factors in format fmt as staged output `path`
 * (export_onnx_qdq.c). The record has passed calq__save_check. */
calq_status calq__export_onnx(const calq_model *m, const calq_record *rec, const calq_config *cfg, calq_save_format fmt,
                              const char *path, calq_staged_files *out, calq_error *err);

/* The int8 tensor and dequantized tensor of activation `tensor` with the given factors,
 * emitting QuantizeLinear (and DequantizeLinear when want_dq) on first use; owner: a layer
 * name for a pair of its own, NULL for the pair shared by every reader. NULL on OOM. */
/* The first entry of `tensor` in c->acts (then follow next_same), or -1. */
int calq__xact_first(const calq__xctx *c, const char *tensor);
/* A new zeroed entry for `tensor`, after the tensor's other entries; NULL when the list is full
 * (sized to a bound: cannot happen) or out of memory. */
calq__xact *calq__xact_push(calq__xctx *c, const char *tensor);
calq__xact *calq__xact_get(calq__xctx *c, const char *tensor, float scale, int64_t offset, const char *owner,
                           bool want_dq);

/* The record entry of input k of quantized layer node ni: the layer's own for k = 0, the
 * "<layer>:<k>" one otherwise (MatMul with two variable inputs, §8.1); NULL when absent (the
 * save checks make that impossible for the layers they passed). */
const calq_record_layer *calq__x_input_record(const calq__xctx *c, int ni, int k);
/* True when input k >= 1 of layer node ni is an activation its kind quantizes (§8.1). */
bool calq__x_act_input(const calq__xctx *c, int ni, int k);

/* int8 weight and int32 bias of layer node `ni` (folded graph) with the record's factors.
 * *wq (int8, w's layout) and *bq (int32, n_bias entries, or NULL without a quantizable bias)
 * are arena memory. Fails naming the layer on int32 bias overflow (§8.4). */
calq_status calq__xq_weights(calq__xctx *c, int ni, const calq_record_layer *rl, int8_t **wq, int32_t **bq,
                             int64_t *n_bias, calq_error *err);

/* W (j = 0) or R (j = 1) of recurrent layer ni (LSTM / GRU / RNN) as int8 with the record's
 * scale_w, which hold one value per weight or one per direction and gate row of each, W's first
 * (§8.1). *wq (numel, the weight's layout) is arena memory; *scales / *n_scales point into rl. */
calq_status calq__xq_rnn_weight(calq__xctx *c, int ni, const calq_record_layer *rl, int j, int8_t **wq,
                                const float **scales, int64_t *n_scales, calq_error *err);
/* The int8 weight (w's layout), its per-channel or per-tensor scale and int8 zero point, and the
 * int32 bias (NULL without one) of layer ni as initializers, with factors rl (export_onnx_qop.c). */
typedef struct calq__xqw {
    const char *w, *scale, *zp, *bias;
} calq__xqw;
calq_status calq__qop_weights(calq__xctx *c, int ni, const calq_record_layer *rl, calq__xqw *out, calq_error *err);

/* QOperator form of quantized layer ni (QLinearConv / QLinearMatMul) when its output factors
 * are known (export_onnx_qop.c); *done false leaves the layer to the QDQ writer. */
calq_status calq__qop_layer(calq__xctx *c, int ni, const Onnx__NodeProto *orig, const calq_record_layer *rl, bool *done,
                            calq_error *err);

/* AMCT's form of quantized layer ni (export_onnx_ascend.c): the fake-quant chain of §9.2 or
 * the deploy AscendQuant / integer layer / AscendDequant of §9.1, per c->fmt. */
calq_status calq__ascend_layer(calq__xctx *c, int ni, const Onnx__NodeProto *orig, const calq_record_layer *rl,
                               calq_error *err);

/* For a MaxPool node ni whose input also feeds quantized layers, in an Ascend format: the
 * name of that input quantized and restored as AMCT writes it (§9.3: AscendQuant ->
 * AscendAntiQuant in the deploy model, the fake-quant chain -> Mul(scale_d) in the fake-quant
 * one), so the pool sees the values the quantized layers see; NULL otherwise (err->status
 * set on failure). */
const char *calq__ascend_pool_input(calq__xctx *c, int ni, calq_error *err);
/* Input k of node ni quantized with tensor_quantize factors rl and restored, in an Ascend format
 * (§9.3, §7.2): its new name; NULL on failure (err set). */
const char *calq__ascend_tensor_input(calq__xctx *c, int ni, int k, const calq_record_layer *rl, calq_error *err);
/* The record entry of a tensor_quantize input (input k of node ni, enabled in the config), or NULL. */
const calq_record_layer *calq__x_tensor_record(const calq__xctx *c, int ni, int k);

/* A node kept from the model, converted when the opset is raised to 13 (export_upgrade.c):
 * *out is src itself or an arena copy. Fails naming an operator that cannot be raised. */
calq_status calq__export_upgrade_node(calq__xctx *c, const Onnx__NodeProto *src, Onnx__NodeProto **out,
                                      calq_error *err);
/* Assembles the output model from c->x (original initializers still read, new ones, inputs,
 * shape hints, opset 13) and stages it as output `path` in c->out. */
calq_status calq__export_finish(calq__xctx *c, const char *path, calq_error *err);

/* A new tensor or node name from fmt, of any length, that no tensor of the model or of the output
 * so far uses and no earlier call returned (a "_calq<k>" suffix is added when taken;
 * base/unique_name.h). Arena memory; NULL on OOM. */
char *calq__xname(calq__xctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same for a new node's name, against node names: the model's (the output's kept nodes and
 * copies carry them) and every earlier call's (every new node is named here), so no two nodes of
 * the file share a name. Node and tensor names are separate in ONNX, so a tensor of that name does
 * not count; the name comes back unchanged unless a node has it. */
char *calq__xnode_name(calq__xctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Name of value v for the output model; folded constants (new in g) get an initializer. */
const char *calq__xvalue(calq__xctx *c, int v, calq_error *err);

#endif
