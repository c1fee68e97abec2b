/* Which layers calq quantizes (amct-reference.md §8.1, the ONNX column): a pure rule on the
 * IR, shared by `inspect`, create-config and calibration. */
#ifndef CALQ_GRAPH_QUANTIZABLE_H
#define CALQ_GRAPH_QUANTIZABLE_H

#include <stdbool.h>

#include "graph/graph.h"

/* True when node i is a layer calq quantizes with weights and activations (Conv, Gemm,
 * MatMul with a constant 2nd input, ConvTranspose, AveragePool). */
bool calq__node_quantizable(const calq_graph *g, int i);

#endif
