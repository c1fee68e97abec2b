/* Graph rewrites applied to a session's copy of the IR. */
#ifndef CALQ_GRAPH_PASSES_H
#define CALQ_GRAPH_PASSES_H

#include "graph/graph.h"

/* Copy of src for rewriting (owner: caller, calq__graph_free). Nodes, attributes and names are
 * copied; constant tensors are shared with src (read-only), so src must outlive the copy. */
calq_status calq__graph_clone(const calq_graph *src, calq_graph **out, calq_error *err);
/* Appends a copy of attribute a to node ni of g. */
calq_status calq__attr_copy(calq_graph *g, int ni, const calq_attr *a, calq_error *err);

/* Folds per-output-channel affine layers that directly follow a Conv into the Conv's weight
 * and bias (amct-reference.md §8.3): BatchNormalization (inference), and Mul / Add by a
 * constant that broadcasts per channel (how Caffe's Scale layer arrives). The layers folded into
 * are the kinds with folds_bn (graph/qkind.h; Conv, FUSE_ONNX_TYPES). A Conv is folded
 * only when its output feeds that one layer and nothing else (not a graph output), its weight
 * is constant, and the Conv is not named in `skip` (AMCT's skip_fusion_layers). The folded
 * layer disappears; its output tensor name is kept, the Conv's own output name is not.
 * *n_folded counts folded layers. */
calq_status calq__pass_fold_conv_affine(calq_graph *g, const char *const *skip, int n_skip, int *n_folded,
                                        calq_error *err);

/* Makes constant the weights of layers that the model computes from constants by moving elements
 * only (amct-reference.md §8.1: a quantized layer's weight is a constant): the weight, second
 * weight and bias inputs of the kinds with constant weights (qkind.h) that an Identity, Transpose,
 * Reshape, Squeeze, Unsqueeze or Flatten chain computes from float32 constants, or a
 * Cast(to=float) from float16 / float64 ones (such a Cast is folded for any reader:
 * BatchNormalization parameters and biases of halved models too). torch's exporter writes
 * Identity(W) for deduplicated (tied) initializers and MatMul(x, Transpose(W)) when it does not
 * fold constants, float16 models keep their weights as float16 initializers behind a Cast; without
 * this such a Gemm stayed float and such a MatMul was taken for one of two activations. A layer
 * reading an Identity chain reads its initializer instead; any other node of a chain is removed
 * and its output becomes a constant (calq_value.folded) holding exactly what the node computed, so
 * a run gives the same bits. Identity nodes nothing reads any more are removed the same way; a
 * graph output or a value a subgraph captures is never replaced. Run on the model's own IR at
 * import, so that inspect, configs, calibration, records and every writer see one graph. *n_folded
 * counts layer inputs made constant. */
calq_status calq__pass_const_weights(calq_graph *g, int *n_folded, calq_error *err);

/* Rewrites the QDQ groups onnxruntime's CPU execution provider (x86-64) fuses into integer
 * operators, with its conditions, so that calq runs a QDQ model as onnxruntime does
 * (fuse_qdq.c has the rules): DQ -> Conv -> Q into QLinearConv, DQ -> Gemm [-> Q] into QGemm,
 * DQ -> MatMul -> Q into QLinearMatMul and DQ -> MatMul into MatMulIntegerToFloat, after
 * removing a Relu / Clip before a QuantizeLinear whose range makes it redundant. The fused
 * layer keeps its node name and writes the Q's output tensor; the float tensors in between are
 * no longer computed. A graph without DequantizeLinear nodes is left untouched. *n_fused counts
 * fused layers, *n_removed removed Relu / Clip nodes. */
calq_status calq__pass_fuse_qdq(calq_graph *g, int *n_fused, int *n_removed, calq_error *err);

/* The domain of calq's internal operators: ones passes create and the executor runs, which no
 * model file may name (the registry's public lookup, calq__op_find, does not see them). */
#define CALQ_DOMAIN_INTERNAL "calq"

/* Prior boxes per feature-map position of calq.PriorBox (Caffe SSD's PriorBox): per min_size, the
 * min_size square, the sqrt(min_size * max_size) square when max_sizes are given, and one box per
 * aspect ratio of the expanded list after its leading 1 (n_ar counts that 1). The Caffe frontend's
 * shape and the kernel's infer and run all count with this one function, so they cannot disagree
 * (a fixed per-position array in the kernel once wrote 66 of 129 boxes with exit 0). */
static inline int64_t calq__prior_boxes(int n_min, int n_max, int n_ar)
{
    return (int64_t)n_min * ((int64_t)n_ar + (n_max > 0 ? 1 : 0));
}

/* Lowers the integer layers of Ascend deploy models (amct-reference.md §9.1): a Conv,
 * ConvTranspose, Gemm, MatMul or AveragePool whose input 0 is produced by an AscendQuant (directly
 * or through Flatten / Reshape / Squeeze / Unsqueeze / Identity) becomes, in place, the internal
 * operator calq.Ascend<op> with the AscendQuant's offset as its INT attribute `input_offset`; node
 * name, inputs, output and attributes stay, no node is added, removed or reordered. A session
 * always runs it: without it a deploy model has no meaning (its int8 layers are not float ones).
 * *n_lowered counts rewritten layers. */
calq_status calq__pass_lower_ascend(calq_graph *g, int *n_lowered, calq_error *err);

#endif
