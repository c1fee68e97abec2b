/* Which layers calq quantizes (amct-reference.md §8.1): the rows of the quantizable-kind table
 * (graph/qkind.h) applied to the nodes of a graph. A pure rule on the IR, shared by `inspect`,
 * create-config, calibration, the record checks and save. */
#ifndef CALQ_GRAPH_QUANTIZABLE_H
#define CALQ_GRAPH_QUANTIZABLE_H

#include <stdbool.h>

#include "graph/graph.h"
#include "graph/qkind.h"

/* True when row k holds for node i of g: the node's op type is the row's (default domain), its
 * activation inputs are float (or of unknown type), its weights are constant float tensors of
 * an allowed rank, input 0 has an allowed rank, and the attribute conditions hold. */
bool calq__qkind_match(const calq_qkind *k, const calq_graph *g, int i);
/* The kind of node i as a layer: the first row that is not tensor-only and holds for it, or NULL
 * when calq does not quantize it as a layer (tensor-only rows quantize inputs, calq__qkind_of_input). */
const calq_qkind *calq__qkind_of_node(const calq_graph *g, int i);
/* The row under which input k of node i is quantized under its own record key "<node>:<k>"
 * (§7.1): the node's layer kind when k >= 1 is one of its activation inputs (MatMul with two
 * variable inputs, §8.1); else a tensor-only row (§7.2 tensor_quantize) of the node's op type
 * whose act_inputs include k, where input k is a float tensor that is not a constant and the
 * row's other conditions hold for the node; NULL otherwise. */
const calq_qkind *calq__qkind_of_input(const calq_graph *g, int i, int k);
/* The row under which the int8 scheme (calibration's int8_tensors, the int8 QDQ / QOperator plan)
 * quantizes input k of node i: calq__qkind_of_input's, except NULL for an input of an
 * int8_all_operands kind (Add, Mul) one of whose operands is a constant or computed from constants
 * only (an initializer, a Constant node, Cast / Unsqueeze / ... of them): onnxruntime has no 8-bit
 * form for it, so the op stays float in both files and a Q/DQ pair there would only round. */
const calq_qkind *calq__qkind_int8_input(const calq_graph *g, int i, int k);
/* calq__qkind_of_node(g, i) != NULL. */
bool calq__node_quantizable(const calq_graph *g, int i);
/* The first node (in g's order) of a layer kind's op type (Conv, Gemm, MatMul, ...; not the
 * tensor-only kinds) that reads a float16 tensor (a graph input, a constant or a value whose type
 * the file declares): *node and *value (that input), or false when there is none. Such a layer
 * computes in float16, which calq's layer kernels and calibration do not; the element-wise
 * kernels of the tensor-only kinds do run float16, so a float16 Add between float32 layers stays
 * allowed. */
bool calq__first_float16_layer(const calq_graph *g, int *node, int *value);
/* CALQ_ERR_UNSUPPORTED with a message naming that layer and tensor and what to do, when there is
 * one (calibration and calq_config_create refuse such a model); CALQ_OK otherwise. */
calq_status calq__refuse_float16(const calq_graph *g, calq_error *err);

/* The group count node n splits its weight in (its `group` attribute for grouped kinds, else 1). */
int calq__qkind_group(const calq_qkind *k, const calq_node *n);
/* The output channels of node n's weight of rank ndim and shape dims (§8.2): the size of the
 * kind's weight channel axis (after transpose_attr), times the group count for the
 * CONV_TRANSPOSE layout. 0 when the weight has too few axes. */
int64_t calq__qkind_out_channels(const calq_qkind *k, const calq_node *n, int ndim, const int64_t *dims);
/* The weight channel axis of node n's weight of rank ndim, in 0..ndim-1 (after transpose_attr);
 * -1 when the weight has too few axes. */
int calq__qkind_weight_axis(const calq_qkind *k, const calq_node *n, int ndim);
/* Constant weights ARQ quantizes: 0, 1, or 2 (LSTM / GRU / RNN: W and R, whose scale_w follow one
 * another in the record, W's first). */
int calq__qkind_n_weights(const calq_qkind *k);
/* True when node n is of an op type whose following BatchNorm / Scale folds into it (§8.3):
 * what calq__pass_fold_conv_affine folds into, and what Caffe save follows through folded layers. */
bool calq__node_folds_bn(const calq_node *n);

#endif
