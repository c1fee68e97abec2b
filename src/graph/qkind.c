/* The table of quantizable kinds (qkind.h), from amct-reference.md §8.1 (which layers, with which
 * constraints), §8.2 (granularity), §8.3 (fusion) and §7.1 (record fields). */
#include "graph/qkind.h"

#include <stdio.h>
#include <string.h>

#define RANK(r) (1u << (r))

#define TENSOR_ROW(ID, ONNX, CAFFE, INPUTS, QLINEAR)                                                                   \
    {                                                                                                                  \
        .id = (ID), .onnx = (ONNX), .caffe = (CAFFE), .act_inputs = (INPUTS), .weights = CALQ_QKIND_WEIGHTS_NONE,      \
        .weight_input = -1, .weight2_input = -1, .bias_input = -1, .tensor_only = true, .layout = CALQ_WEIGHTS_MATRIX, \
        .output_channel_axis = 1, .qlinear = (QLINEAR),                                                                \
    }

/* An element-wise binary tensor-only kind: both inputs may be quantized, and its 8-bit form
 * needs both (int8_all_operands). */
#define BINARY_ROW(ID, ONNX, CAFFE, QLINEAR)                                                                           \
    {                                                                                                                  \
        .id = (ID), .onnx = (ONNX), .caffe = (CAFFE), .act_inputs = (1u << 0) | (1u << 1),                             \
        .weights = CALQ_QKIND_WEIGHTS_NONE, .weight_input = -1, .weight2_input = -1, .bias_input = -1,                 \
        .tensor_only = true, .int8_all_operands = true, .layout = CALQ_WEIGHTS_MATRIX, .output_channel_axis = 1,       \
        .qlinear = (QLINEAR),                                                                                          \
    }

/* The recurrent kinds differ only in their name (see their rows). */
#define RECURRENT_ROW(ID, ONNX)                                                                                        \
    {                                                                                                                  \
        .id = ID, .onnx = ONNX, .act_inputs = 1u << 0, .weights = CALQ_QKIND_WEIGHTS_CONST, .weight_input = 1,         \
        .weight2_input = 2, .bias_input = -1, .layout = CALQ_WEIGHTS_RNN, .weight_channel_axis = 1,                    \
        .output_channel_axis = -1, .channel_wise = true, .weight_ranks = RANK(3),                                      \
        .attrs = {{CALQ_QKIND_ATTR_INT_IS, "layout", 0, 0}},                                                           \
    }

static const calq_qkind KINDS[CALQ_QKIND_COUNT] = {
    /* Conv: 4-D / 5-D constant weight (§8.1); per channel, dim 0 of [Cout, Cin/group, k...]
     * (§8.2); Conv + BN folds (§8.3 FUSE_ONNX_TYPES). */
    {
        .id = CALQ_QKIND_CONV,
        .onnx = "Conv",
        .caffe = "Convolution",
        .act_inputs = 1u << 0,
        .weights = CALQ_QKIND_WEIGHTS_CONST,
        .weight_input = 1,
        .weight2_input = -1,
        .bias_input = 2,
        .layout = CALQ_WEIGHTS_CONV,
        .weight_channel_axis = 0,
        .grouped = true,
        .output_channel_axis = 1,
        .channel_wise = true,
        .folds_bn = true,
        .shift_bit = true,
        .balance = true,
        .weight_in_axis = 1,
        .act_channel_axis = 1,
        .weight_ranks = RANK(4) | RANK(5),
    },
    /* ConvTranspose: 4-D weight, dilation 1 (§8.1); per channel, [Cin, Cout/group, k...] with
     * the output channels on dim 1 of each group (§8.2). */
    {
        .id = CALQ_QKIND_CONV_TRANSPOSE,
        .onnx = "ConvTranspose",
        .caffe = "Deconvolution",
        .act_inputs = 1u << 0,
        .weights = CALQ_QKIND_WEIGHTS_CONST,
        .weight_input = 1,
        .weight2_input = -1,
        .bias_input = 2,
        .layout = CALQ_WEIGHTS_CONV_TRANSPOSE,
        .weight_channel_axis = 1,
        .grouped = true,
        .output_channel_axis = 1,
        .channel_wise = true,
        .shift_bit = true,
        .balance = true,
        .weight_in_axis = 0,
        .act_channel_axis = 1,
        .weight_ranks = RANK(4),
        .attrs = {{CALQ_QKIND_ATTR_INTS_ALL, "dilations", 1, 1}},
    },
    /* Gemm: transA false, alpha = beta = 1 (§8.1, AMCT's MatMulV2); Caffe InnerProduct maps onto
     * it; per tensor only (§8.4); B is [K, N], or [N, K] with transB. */
    {
        .id = CALQ_QKIND_GEMM,
        .onnx = "Gemm",
        .caffe = "InnerProduct",
        .act_inputs = 1u << 0,
        .weights = CALQ_QKIND_WEIGHTS_CONST,
        .weight_input = 1,
        .weight2_input = -1,
        .bias_input = 2,
        .layout = CALQ_WEIGHTS_MATRIX,
        .weight_channel_axis = -1,
        .transpose_attr = "transB",
        .output_channel_axis = -1,
        .shift_bit = true,
        .balance = true,
        .weight_in_axis = -2,
        .act_channel_axis = -1,
        .attrs = {{CALQ_QKIND_ATTR_INT_IS, "transA", 0, 0},
                  {CALQ_QKIND_ATTR_FLOAT_IS, "alpha", 1, 1},
                  {CALQ_QKIND_ATTR_FLOAT_IS, "beta", 1, 1}},
    },
    /* MatMul with a 2-D / 3-D constant second input (§8.1); per tensor only (§8.4). */
    {
        .id = CALQ_QKIND_MATMUL,
        .onnx = "MatMul",
        .act_inputs = 1u << 0,
        .weights = CALQ_QKIND_WEIGHTS_CONST,
        .weight_input = 1,
        .weight2_input = -1,
        .bias_input = -1,
        .layout = CALQ_WEIGHTS_MATRIX,
        .weight_channel_axis = -1,
        .output_channel_axis = -1,
        .shift_bit = true,
        .balance = true,
        .weight_in_axis = -2,
        .act_channel_axis = -1,
        .weight_ranks = RANK(2) | RANK(3),
    },
    /* MatMul with two variable inputs (attention's Q·K^T and A·V): "only as INT8 symmetric" (§8.1),
     * both inputs calibrated, no weights. The record has scale_d / offset_d (offset 0) of input 0
     * under "<layer>" and of input 1 under "<layer>:1", the key tensor_quantize uses (§7.1; AMCT
     * documents no key for the second input); deq_scale = scale_d0 * scale_d1 (§6.2 with input 1
     * in the place of the weight). Any rank (numpy matmul). */
    {
        .id = CALQ_QKIND_MATMUL_VAR,
        .onnx = "MatMul",
        .act_inputs = (1u << 0) | (1u << 1),
        .act_symmetric = true,
        .weights = CALQ_QKIND_WEIGHTS_NONE,
        .weight_input = -1,
        .weight2_input = -1,
        .bias_input = -1,
        .layout = CALQ_WEIGHTS_MATRIX,
        .weight_channel_axis = -1,
        .output_channel_axis = -1,
    },
    /* AveragePool: 4-D input (§8.1; Caffe Pooling AVE, non-global: full quantization, no shift
     * N); no weight, scale_w 1 (§7.1). */
    {
        .id = CALQ_QKIND_AVERAGE_POOL,
        .onnx = "AveragePool",
        .caffe = "Pooling",
        .act_inputs = 1u << 0,
        .weights = CALQ_QKIND_WEIGHTS_UNIT,
        .weight_input = -1,
        .weight2_input = -1,
        .bias_input = -1,
        .layout = CALQ_WEIGHTS_MATRIX,
        .weight_channel_axis = 0,
        .output_channel_axis = 1,
        .input_ranks = RANK(4),
    },
    /* LSTM, GRU, RNN: recurrent layers quantized per channel as AMCT's
     * CHANNEL_WISE_ONNX_TYPES (§8.1): the input X (not the hidden state, which lives inside the
     * operator), W and R per direction and gate row (the record's scale_w: W's channels, then
     * R's), the bias kept float. Float32 constant 3-D W and R; opsets 7-13 (no layout attribute). */
    RECURRENT_ROW(CALQ_QKIND_LSTM, "LSTM"),
    RECURRENT_ROW(CALQ_QKIND_GRU, "GRU"),
    RECURRENT_ROW(CALQ_QKIND_RNN, "RNN"),
    /* Tensor-only kinds: an input tensor quantized and restored before a float op (§7.2
     * tensor_quantize, record key "<layer>:<input>" with scale_d / offset_d, §7.1; AscendQuant ->
     * AscendAntiQuant in the deploy model, §9.3). AMCT names MaxPool and Add (§8.1; Caffe's
     * Pooling MAX and Eltwise SUM); the others are the ops onnxruntime runs on int8 tensors
     * (QLinearMul / QLinearConcat / QLinearGlobalAveragePool / QLinearSigmoid / QLinearLeakyRelu
     * / QLinearSoftmax, int8 MaxPool and Resize), which calq's int8 ONNX exports quantize. Their
     * other inputs may be constants (Add(x, bias)); only the input named is quantized. The int8
     * exports leave an Add / Mul with a constant operand float (int8_all_operands). */
    TENSOR_ROW(CALQ_QKIND_MAX_POOL, "MaxPool", "Pooling", 1u << 0, NULL),
    BINARY_ROW(CALQ_QKIND_ADD, "Add", "Eltwise", "QLinearAdd"),
    BINARY_ROW(CALQ_QKIND_MUL, "Mul", NULL, "QLinearMul"),
    TENSOR_ROW(CALQ_QKIND_CONCAT, "Concat", NULL, CALQ_QKIND_EVERY_INPUT, "QLinearConcat"),
    TENSOR_ROW(CALQ_QKIND_GLOBAL_AVERAGE_POOL, "GlobalAveragePool", NULL, 1u << 0, "QLinearGlobalAveragePool"),
    TENSOR_ROW(CALQ_QKIND_RESIZE, "Resize", NULL, 1u << 0, NULL),
    TENSOR_ROW(CALQ_QKIND_SIGMOID, "Sigmoid", NULL, 1u << 0, "QLinearSigmoid"),
    TENSOR_ROW(CALQ_QKIND_LEAKY_RELU, "LeakyRelu", NULL, 1u << 0, "QLinearLeakyRelu"),
    TENSOR_ROW(CALQ_QKIND_SOFTMAX, "Softmax", NULL, 1u << 0, NULL),
};

int calq__qkind_count(void)
{
    return CALQ_QKIND_COUNT;
}

const calq_qkind *calq__qkind_at(int i)
{
    return i >= 0 && i < CALQ_QKIND_COUNT ? &KINDS[i] : NULL;
}

const calq_qkind *calq__qkind(calq_qkind_id id)
{
    return calq__qkind_at((int)id);
}

const calq_qkind *calq__qkind_by_onnx(const char *name)
{
    for (int i = 0; name && i < CALQ_QKIND_COUNT; i++)
        if (strcmp(KINDS[i].onnx, name) == 0) return &KINDS[i];
    return NULL;
}

const calq_qkind *calq__qkind_by_caffe(const char *name)
{
    for (int i = 0; name && i < CALQ_QKIND_COUNT; i++)
        if (KINDS[i].caffe && strcmp(KINDS[i].caffe, name) == 0) return &KINDS[i];
    return NULL;
}

static const char *name_of(const calq_qkind *k, calq_qkind_names_of which)
{
    switch (which) {
    case CALQ_QKIND_NAMES_ONNX: return k->tensor_only ? NULL : k->onnx;
    case CALQ_QKIND_NAMES_CAFFE: return k->tensor_only ? NULL : k->caffe;
    case CALQ_QKIND_NAMES_TENSOR: return k->tensor_only ? k->onnx : NULL;
    case CALQ_QKIND_NAMES_CHANNEL_WISE: return k->channel_wise ? k->onnx : NULL;
    }
    return NULL;
}

const char *calq__qkind_names(calq_qkind_names_of which, char *buf, size_t cap)
{
    size_t len = 0;
    if (cap) buf[0] = '\0';
    for (int i = 0; i < CALQ_QKIND_COUNT; i++) {
        const char *nm = name_of(&KINDS[i], which);
        bool seen = !nm;
        for (int j = 0; j < i && !seen; j++) {
            const char *prev = name_of(&KINDS[j], which);
            seen = prev && strcmp(prev, nm) == 0;
        }
        if (seen || len >= cap) continue;
        int w = snprintf(buf + len, cap - len, "%s%s", len ? ", " : "", nm);
        len = w < 0 ? cap : len + (size_t)w;
    }
    return buf;
}
