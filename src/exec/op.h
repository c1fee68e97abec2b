/* The operator interface between the executor and the kernels.
 *
 * Each operator is a calq_op_def in a kernels/ file. The executor calls, per node:
 *   infer   at plan time (and at run time for data-dependent shapes): set every output's
 *           dtype, ndim and dims from the inputs. Input tensors always carry dtype and shape;
 *           their data is non-NULL only when known (constants, folded values, or at run time).
 *           Inputs listed in `data_inputs` must have data for infer; the executor guarantees it
 *           or falls back to run-time shape inference.
 *   prepare (optional) once shapes are final: build c->state (e.g. a oneDNN primitive).
 *   run     compute. Outputs are allocated by the executor (c->out[i]->data, zero-filled is NOT
 *           guaranteed). Must not write inputs. Must be deterministic for any thread count.
 *   release frees c->state.
 * `run` is the plain-C reference kernel (the `_ref` one); `run_fast` (with prepare/release) is
 * the optimised path, used when the session asks for it and prepare produced a state.
 *
 * Fast paths only: activation layouts and post-ops (exec/plan_fast.c negotiates them).
 *   - A def with CALQ_OP_LAYOUTS reads c->in_layout in prepare (the layout each input's producer
 *     writes) and may change entries to ask for another layout (the executor converts), and
 *     sets c->out_layout; run_fast then gets its data in those layouts. Other defs, and every
 *     reference kernel, see plain tensors only.
 *   - A def with CALQ_OP_ELEMENTWISE computes each output element from the input elements at
 *     the same (numpy-broadcast) index. On blocked data the executor runs its ordinary `run`
 *     on the physical view of the tensors ([N, C/b, spatial..., b]), which gives the same
 *     value for every element.
 *   - A def with CALQ_OP_POST_OPS may absorb the element-wise layers that follow it: prepare
 *     gets candidates in c->post[0..n_post) and sets c->n_post_used to the number it applies
 *     (a prefix; 0 when it takes none); run_fast then sees the applied ones in c->post. With
 *     c->exact_only it applies only what it computes bit for bit as the unfused layers would.
 */
#ifndef CALQ_EXEC_OP_H
#define CALQ_EXEC_OP_H

#include <stdbool.h>

#include "base/error.h"
#include "base/tensor.h"
#include "graph/graph.h"

/* Activation layout of a float32 [N, C, spatial...] tensor (rank 3 to 5). 0: plain (C order).
 * CALQ_LAYOUT_CHANNELS_LAST: [N][spatial...][C] (oneDNN's nwc / nhwc / ndhwc). b = 8 or 16:
 * channel-blocked by b, oneDNN's nCw{b}c / nChw{b}c / nCdhw{b}c (tags aBc{b}b, aBcd{b}b,
 * aBcde{b}b): [N][ceil(C/b)][spatial...][b], the channels from C to the next multiple of b
 * zero. */
typedef int calq_layout;
#define CALQ_LAYOUT_PLAIN         0
#define CALQ_LAYOUT_CHANNELS_LAST 1

/* Element-wise layers a convolution or matrix product can apply to its result before storing
 * it (oneDNN post-ops). `exact`: the fused result is bit-identical to running the layer on its
 * own (calq's reference formula); the others (oneDNN's approximations of exp/tanh, or a fused
 * multiply-add where calq rounds twice) are within the fast-vs-reference tolerance. */
typedef enum calq_post_kind {
    CALQ_POST_RELU,         /* x < 0 ? alpha * x : x (Relu: alpha 0; LeakyRelu) */
    CALQ_POST_CLIP,         /* min(max(x, alpha), beta) */
    CALQ_POST_HARD_SIGMOID, /* max(0, min(1, alpha * x + beta)) */
    CALQ_POST_HARD_SWISH,   /* x * max(0, min(1, x / 6 + 1 / 2)) */
    CALQ_POST_SWISH,        /* x * sigmoid(alpha * x) (SiLU: alpha 1) */
    CALQ_POST_SIGMOID,
    CALQ_POST_TANH,
    CALQ_POST_ELU,         /* x < 0 ? alpha * (exp(x) - 1) : x */
    CALQ_POST_SUM,         /* x + operand (same shape, in the output's layout): a residual Add */
    CALQ_POST_ADD_CHANNEL, /* x + operand[c]: a constant with one value per output channel (or one) */
    CALQ_POST_MUL_CHANNEL, /* x * operand[c] */
    CALQ_POST_DIV_SCALAR,  /* x / operand[0]: a Div by one constant value (attention's scaling) */
    CALQ_POST_ADD_LAST     /* x + operand[j], j the index along the last axis: a MatMul's bias (rank >= 3) */
} calq_post_kind;

typedef struct calq_post_op {
    calq_post_kind kind;
    float alpha, beta;
    const calq_tensor *operand; /* SUM, ADD_CHANNEL, MUL_CHANNEL, ADD_LAST */
    bool exact;
} calq_post_op;

typedef struct calq_op_ctx {
    const calq_node *node; /* attributes via calq__attr_*(node, ...) */
    int opset;             /* the node's opset version */
    int n_in;
    calq_tensor **in; /* in[i] == NULL for an omitted optional input */
    int n_out;
    calq_tensor **out; /* out[i] == NULL for an omitted optional output */
    void *state;       /* owned by the op (prepare/release) */
    calq_error *err;
    unsigned const_inputs; /* bit i: input i is a constant (same data on every run, available
                              in prepare), e.g. weights: prepare may reorder them once */
    /* Fast paths (see the top of the file). NULL / 0: plain tensors, no post-ops. */
    calq_layout *in_layout;  /* [n_in] */
    calq_layout *out_layout; /* [n_out] */
    calq_layout native;      /* the layout the executor keeps activations in (0: plain only) */
    const calq_post_op *post;
    int n_post;
    int n_post_used; /* set by prepare */
    /* [n_post + 1] or NULL: entry i is true when the output after i post-ops is read only by
     * convolutions (as their input) and element-wise layers, and is neither kept nor a graph
     * output. prepare may then write it in another channel-blocked layout than `native` (the
     * Winograd path's nChw16c, conv_wino.h): the convolutions take it as it is or convert it,
     * the element-wise layers get a plain copy. */
    const bool *out_conv_readers;
    bool exact_only; /* prepare: apply only post-ops whose result is bit-identical to running the
                        layers on their own (the output or some other tensor is observed) */
    /* Loop / Scan inside a subgraph: the body runs left to the outermost Loop or Scan run
     * (exec/kernels/control.c); NULL outside subgraphs. */
    int64_t *body_budget;
    /* The session's max_arena_bytes (0: none): subgraph plans and what Loop and Scan stack are held
     * to it too. */
    size_t max_bytes;
} calq_op_ctx;

/* calq_op_def.flags */
#define CALQ_OP_LAYOUTS     1u /* prepare / run_fast handle blocked layouts */
#define CALQ_OP_ELEMENTWISE 2u /* per-element (broadcast) semantics: runs on blocked views as is */
#define CALQ_OP_POST_OPS    4u /* prepare can absorb post-ops */
#define CALQ_OP_MSFT        8u /* also an operator of domain com.microsoft (QGemm, MatMulIntegerToFloat) */
#define CALQ_OP_VIEW                                                                                                   \
    16u /* output 0 holds input 0's bytes as they are, other inputs being read at                                      \
           plan time only (data_inputs): the planner may alias it (plan.c) */

typedef struct calq_op_def {
    const char *op_type; /* ONNX op type, default domain (internal table: domain calq) */
    int min_inputs, max_inputs;
    int min_outputs, max_outputs;
    unsigned data_inputs; /* bit i: infer needs the data of input i (e.g. Reshape's shape) */
    bool shape_only;      /* output depends only on input shapes (Shape, Size): always foldable */
    calq_status (*infer)(calq_op_ctx *c);
    calq_status (*run)(calq_op_ctx *c); /* reference kernel */
    calq_status (*prepare)(calq_op_ctx *c);
    calq_status (*run_fast)(calq_op_ctx *c);
    void (*release)(void *state);
    unsigned flags; /* CALQ_OP_* */
} calq_op_def;

/* Registry (exec/ops.c). The operators a model file may contain: NULL when calq has no kernel
 * for op_type in domain. calq's internal operators (domain CALQ_DOMAIN_INTERNAL, created by graph
 * passes) are not among them. */
const calq_op_def *calq__op_find(const char *domain, const char *op_type);
/* The i-th operator a model file may contain (0-based, registry order), or NULL past the end. */
const calq_op_def *calq__op_at(int i);
/* The kernel of node n, internal operators included (what the planner runs), or NULL. */
const calq_op_def *calq__op_of(const calq_node *n);

/* Error helpers for kernels: the node name becomes the error's layer and prefixes the message
 * as "<op_type> node '<name>': ...". */
calq_status calq__op_fail(calq_op_ctx *c, calq_status s, const char *fmt, ...) CALQ_PRINTF(3, 4);

/* Sets out tensor shape. */
void calq__set_shape(calq_tensor *t, calq_dtype dt, const int64_t *dims, int ndim);
/* Normalises a possibly negative axis into [0, rank); -1 if out of range. */
int calq__norm_axis(int64_t axis, int rank);

/* ONNX TensorProto.DataType number (the `to` / `dtype` attributes) -> calq dtype; UNDEFINED, with
 * *name set to the ONNX type's name, if calq lacks it. */
calq_dtype calq__op_onnx_dtype(int64_t to, const char **name);

/* Multidirectional (numpy) broadcasting of a and b into out dims. Returns false if the shapes
 * do not broadcast. */
bool calq__broadcast_shape(const int64_t *a, int na, const int64_t *b, int nb, int64_t *out, int *nout);
/* For an output of `ndim` dims, strides (in elements) to read an input of shape dims/n that is
 * broadcast to it (0 for broadcast dims). */
void calq__broadcast_strides(const int64_t *dims, int n, int ndim, int64_t *strides);

/* Every op family exports a {NULL}-terminated table. */
extern const calq_op_def calq__ops_elementwise[];
extern const calq_op_def calq__ops_shape[];
extern const calq_op_def calq__ops_conv[];
extern const calq_op_def calq__ops_gemm[];
extern const calq_op_def calq__ops_pool[];
extern const calq_op_def calq__ops_reduce[];
extern const calq_op_def calq__ops_resize[];
extern const calq_op_def calq__ops_quant[];
extern const calq_op_def calq__ops_ascend[];
extern const calq_op_def calq__ops_ascend_int[]; /* internal: calq.Ascend<op> (kernels/ascend.h) */
extern const calq_op_def calq__ops_ssd[];        /* internal: calq.PriorBox, calq.DetectionOutput (Caffe SSD) */
extern const calq_op_def calq__ops_norm[];
extern const calq_op_def calq__ops_dynamic_quant[];
extern const calq_op_def calq__ops_col2im[];
extern const calq_op_def calq__ops_center_crop_pad[];
extern const calq_op_def calq__ops_grid_sample[];
extern const calq_op_def calq__ops_control[];
extern const calq_op_def calq__ops_rnn[];
extern const calq_op_def calq__ops_detection[];
extern const calq_op_def calq__ops_einsum[];
extern const calq_op_def calq__ops_masks[];
extern const calq_op_def calq__ops_space_depth[];
extern const calq_op_def calq__ops_axis[];
extern const calq_op_def calq__ops_sort[];
extern const calq_op_def calq__ops_scatter[];
extern const calq_op_def calq__ops_msft[]; /* domain com.microsoft: onnxruntime's 8-bit contrib ops (qlinear_ops.c) */

#endif
