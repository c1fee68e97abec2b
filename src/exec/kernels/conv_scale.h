/* The step the fast planner runs in place of an input-channel scale before a convolution
 * (exec/plan_fuse_scale.c): not an ONNX node. */
#ifndef CALQ_EXEC_CONV_SCALE_H
#define CALQ_EXEC_CONV_SCALE_H

#include "exec/op.h"

/* in[0] W [Cout, Cin / group, k...] (float32), in[1] s (float32, Cin values in channel order: any
 * shape, e.g. [1, Cin, 1, 1]), out[0] W' = W with input channel i's weights times s[i]; the
 * attribute `group` is read from the step's node (the convolution). */
extern const calq_op_def calq__op_scale_conv_weights;

#endif
