/* The quantizable kinds: one row per kind of layer calq quantizes (amct-reference.md §8), the one
 * place that says which op types are quantized and how. Selection (quantizable.h), the config
 * (defaults and checks), calibration, the record checks, every exporter and the Caffe mapping
 * read these rows instead of comparing op names.
 *
 * Adding a kind = one row in qkind.c (its id here) plus its export / kernel code. Several rows
 * may share an ONNX or a Caffe name when their conditions tell them apart (MatMul with a constant
 * weight vs MatMul with two variable inputs; Caffe Pooling AVE vs MAX): the first row whose
 * conditions hold is the node's kind (calq__qkind_of_node in quantizable.h), name lookups return
 * the first row of that name. Rows sharing an ONNX name agree on folds_bn (test_graph_qkind).
 *
 * A row's op must keep its signature from ONNX opset 7 to 13: the ONNX writers copy a quantized
 * node as it is when they raise a model's opset to 13 (export_upgrade.c).
 *
 * Ownership: the rows are static and live for the whole process. */
#ifndef CALQ_GRAPH_QKIND_H
#define CALQ_GRAPH_QKIND_H

#include <stdbool.h>
#include <stddef.h>

#include "calq.h"

/* The rows, in table order (exporters dispatch their kind-specific code on it). */
typedef enum calq_qkind_id {
    CALQ_QKIND_CONV,
    CALQ_QKIND_CONV_TRANSPOSE,
    CALQ_QKIND_GEMM,
    CALQ_QKIND_MATMUL,
    CALQ_QKIND_MATMUL_VAR, /* MatMul with two variable inputs (§8.1), after the constant-weight row */
    CALQ_QKIND_AVERAGE_POOL,
    CALQ_QKIND_LSTM,
    CALQ_QKIND_GRU,
    CALQ_QKIND_RNN,
    /* tensor-only kinds (§7.2 tensor_quantize; Caffe's Pooling MAX and Eltwise SUM, §8.1) */
    CALQ_QKIND_MAX_POOL,
    CALQ_QKIND_ADD,
    CALQ_QKIND_MUL,
    CALQ_QKIND_CONCAT,
    CALQ_QKIND_GLOBAL_AVERAGE_POOL,
    CALQ_QKIND_RESIZE,
    CALQ_QKIND_SIGMOID,
    CALQ_QKIND_LEAKY_RELU,
    CALQ_QKIND_SOFTMAX,
    CALQ_QKIND_COUNT
} calq_qkind_id;

/* What a kind quantizes besides its activation inputs (§7.1, §8.1). */
typedef enum calq_qkind_weights {
    CALQ_QKIND_WEIGHTS_CONST, /* constant float weight input(s), ARQ (§6.1): the record has scale_w / offset_w */
    CALQ_QKIND_WEIGHTS_UNIT,  /* no weight, a full integer layer all the same: AMCT writes scale_w 1, offset_w 0
                                 itself and deq_scale = scale_d (AveragePool, §6.3, §7.1) */
    CALQ_QKIND_WEIGHTS_NONE   /* no weight and no scale_w: tensor-only kinds (§7.2 tensor_quantize) and MatMul
                                 with two variable inputs (§8.1) */
} calq_qkind_weights;

/* One condition on a node attribute (§8.1 constraints). */
typedef enum calq_qkind_attr_rule {
    CALQ_QKIND_ATTR_END = 0,  /* ends a row's list */
    CALQ_QKIND_ATTR_INT_IS,   /* an INT attribute (absent: dflt) equals value */
    CALQ_QKIND_ATTR_FLOAT_IS, /* a FLOAT attribute (absent: dflt) equals value, compared in float32 */
    CALQ_QKIND_ATTR_INTS_ALL  /* every element of an INTS attribute equals value (absent: holds) */
} calq_qkind_attr_rule;

typedef struct calq_qkind_attr {
    calq_qkind_attr_rule rule;
    const char *name;
    double value; /* the required value */
    double dflt;  /* the ONNX default when the attribute is absent */
} calq_qkind_attr;

#define CALQ_QKIND_MAX_ATTRS 4
/* act_inputs value for a variadic op (Concat): every input is quantized. */
#define CALQ_QKIND_EVERY_INPUT (~0u)

typedef struct calq_qkind {
    calq_qkind_id id;
    /* Names. onnx: calq's IR op type (the ONNX one; the Caffe frontend maps its layers onto it)
     * and the ONNX `layer_type` of the .cfg (§8.1 ONNX column, §7.3). caffe: the Caffe layer type
     * that maps onto it, also accepted as a .cfg layer_type, or NULL (§8.1 Caffe column). */
    const char *onnx;
    const char *caffe;

    /* Inputs. act_inputs: bit k set = input k is an activation, quantized with scale_d / offset_d
     * (§8.1; two bits for MatMul with two variable inputs or Add, CALQ_QKIND_EVERY_INPUT for
     * Concat). Input 0 must be float (or of unknown type: an int8 input is already quantized);
     * any other activation input must also not be a constant (a constant there is a weight).
     * act_symmetric: the activations are quantized without offset whatever the config says
     * (§8.1: MatMul with two variable inputs "only as INT8 symmetric"). */
    unsigned act_inputs;
    bool act_symmetric;
    /* weights: see calq_qkind_weights. weight_input: the constant float weight ARQ quantizes,
     * weight2_input: a second one quantized the same way (LSTM / GRU / RNN: W and R, §8.1
     * CHANNEL_WISE_ONNX_TYPES), bias_input: the bias quantized to int32 (§6.2); -1 when absent. */
    calq_qkind_weights weights;
    int weight_input, weight2_input, bias_input;
    /* tensor_only: only the input tensors are quantized, the layer itself stays float
     * (Quant -> AntiQuant, §9.3); the record key is "<layer>:<input>" with scale_d / offset_d only
     * (§7.1, §7.2 tensor_quantize: MaxPool, Add, Concat ...; Caffe Pooling MAX, Eltwise SUM). */
    bool tensor_only;
    /* int8_all_operands (tensor-only element-wise binary ops): onnxruntime's 8-bit form
     * (QLinearAdd / QLinearMul, and its QDQ fusion into them) needs every operand quantized, and
     * calq leaves constants float, so with a constant operand (LayerNorm's Add(var, eps),
     * Mul(x, gamma)) the op stays float and a Q/DQ pair on its variable input only loses accuracy
     * (ViT-B/16: cosine 0.745 with them, 0.9988 without). The int8 scheme then does not quantize
     * the input for this op (calq__qkind_int8_input); tensor_quantize still may (§7.2). */
    bool int8_all_operands;
    /* qlinear (tensor-only kinds): the name of onnxruntime's com.microsoft 8-bit operator the int8
     * QOperator file writes for this op (QLinearAdd, ...), NULL when it has none (MaxPool and a
     * nearest Resize run on the uint8 tensor as they are; Softmax stays DQ / Softmax / Q). */
    const char *qlinear;

    /* Weight geometry (§8.2). layout: how ARQ finds the output channels. weight_channel_axis:
     * the weight axis of the output channels (negative: from the end); a CONV_TRANSPOSE layout
     * multiplies it by the group count. transpose_attr: an INT attribute that, when nonzero,
     * swaps the weight's last two axes (Gemm transB, §8.3 "Gemm with transB is normalised"), or
     * NULL. grouped: the weight is split in `group` groups (§8.2 depthwise / group conv). */
    calq_weight_layout layout;
    int weight_channel_axis;
    const char *transpose_attr;
    bool grouped;
    /* output_channel_axis: the axis of the layer's output along which a per-channel deq_scale or
     * a per-channel float bias broadcasts (1 for NCHW layers, -1 for matrix products; §9.1, §9.2). */
    int output_channel_axis;

    /* Rules. channel_wise: per-channel weights are allowed, and are the default (§8.1
     * CHANNEL_WISE_ONNX_TYPES, §8.2; channel_wise elsewhere is an error, §7.2, §8.4). folds_bn:
     * a following BatchNorm / Scale folds into it (§8.3, FUSE_ONNX_TYPES; needs the CONV layout).
     * shift_bit: the record may carry shift_bit (§4.4, §6.4: not for pooling, "no shift N" §8.1). */
    bool channel_wise;
    bool folds_bn;
    bool shift_bit;

    /* DMQ balancing (§7.2 dmq_balancer_param; calq's reading in docs/numerics.md, "DMQ
     * balancing"): balance: the kind takes it (a constant weight whose input channels meet the
     * activation's). weight_in_axis: the weight axis of the input channels (negative: from the
     * end; transpose_attr swaps it as it swaps weight_channel_axis; a grouped CONV layout holds
     * Cin/group of them per group). act_channel_axis: the axis of input 0 they are on (1 for NCHW
     * layers, -1 for matrix products). */
    bool balance;
    int weight_in_axis;
    int act_channel_axis;

    /* Conditions on a node of this op type (§8.1 constraints). weight_ranks / input_ranks: bit r
     * set = rank r is allowed for the weight / for input 0 (0: any; an input of unknown rank
     * passes). attrs: attribute conditions, ended by CALQ_QKIND_ATTR_END. */
    unsigned weight_ranks;
    unsigned input_ranks;
    calq_qkind_attr attrs[CALQ_QKIND_MAX_ATTRS];
} calq_qkind;

/* Row i (0 <= i < calq__qkind_count()), in table order; NULL out of range. */
int calq__qkind_count(void);
const calq_qkind *calq__qkind_at(int i);
/* The row of an id. */
const calq_qkind *calq__qkind(calq_qkind_id id);
/* The first row whose ONNX (IR) / Caffe name is `name`, or NULL. */
const calq_qkind *calq__qkind_by_onnx(const char *name);
const calq_qkind *calq__qkind_by_caffe(const char *name);

/* Which names calq__qkind_names lists. */
typedef enum calq_qkind_names_of {
    CALQ_QKIND_NAMES_ONNX,        /* every ONNX name of a layer kind (not tensor-only) */
    CALQ_QKIND_NAMES_CAFFE,       /* every Caffe name of a layer kind */
    CALQ_QKIND_NAMES_TENSOR,      /* the ONNX names of the tensor-only kinds (tensor_quantize) */
    CALQ_QKIND_NAMES_CHANNEL_WISE /* the ONNX names of the kinds that allow per-channel weights */
} calq_qkind_names_of;

/* The names, each once, in table order, joined by ", " into buf (cut to cap, always
 * terminated): for messages that tell users what is quantizable. Returns buf. */
const char *calq__qkind_names(calq_qkind_names_of which, char *buf, size_t cap);

#endif
