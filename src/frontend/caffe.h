/* Caffe frontend: a prototxt (protobuf text, read with src/textproto) and a caffemodel (binary
 * NetParameter, read with protobuf-c over calq's own caffe.proto subset) become calq's IR.
 *
 * The prototxt defines the net (layers, parameters, inputs); the caffemodel only provides the
 * learned blobs, matched by layer name as Caffe's Net::CopyTrainedLayersFrom does. Both the
 * current `layer` (LayerParameter) and the legacy `layers` (V1LayerParameter) lists are read
 * from either file. Every Caffe layer maps onto ONNX-style operators the executor already runs
 * (opset 13 semantics); constants are values with ->constant set.
 *
 * Naming (what `calq run --dump NAME` and observers see):
 *  - The node doing a layer's work carries the layer's name and src_index = the layer's position
 *    in the prototxt's layer list; helper nodes are "<layer>/<what>" with src_index -1, and so
 *    are constants ("<layer>/weight", "<layer>/bias", ...).
 *  - Caffe blobs keep their names. A blob written several times (in-place layers such as
 *    conv1 -> ReLU with top == bottom) becomes one SSA value per write: the LAST writer's value
 *    keeps the blob's name (the tensor Caffe holds under that name after a forward pass), each
 *    earlier version is "<blob>/<layer>_out" after the layer that wrote it, e.g. "conv1/conv1_out"
 *    for the convolution output that PReLU1 then overwrites in place. Net inputs always keep
 *    their names.
 *  - Net outputs are the blobs no kept layer reads, in the order they are produced (Caffe's rule).
 */
#ifndef CALQ_FRONTEND_CAFFE_H
#define CALQ_FRONTEND_CAFFE_H

#include <stdbool.h>

#include "base/error.h"
#include "caffe.pb-c.h"
#include "frontend/model.h"
#include "textproto/textproto.h"

/* Loads a Caffe model from memory. `caffemodel` may be NULL (size 0) for a net without learned
 * blobs. The caller keeps ownership of both buffers; the names only label messages. */
calq_status calq__caffe_load_buffers(const char *prototxt, size_t prototxt_len, const char *prototxt_name,
                                     const void *caffemodel, size_t caffemodel_len, const char *caffemodel_name,
                                     calq_model **out, calq_error *err);
/* Releases what a Caffe model holds besides the graph (prototxt tree, unpacked NetParameter). */
void calq__caffe_release(struct calq_model *m);

/* ---- shared by the caffe_*.c files ---------------------------------------------------------- */

/* Shape of a blob as far as the prototxt's input shapes tell it (used for ranks, which the
 * broadcast constants need, and to check weight sizes at load). ndim -1: unknown; dim -1:
 * unknown. */
typedef struct calq_caffe_shape {
    int ndim;
    int64_t dims[CALQ_MAX_DIMS];
} calq_caffe_shape;

/* One layer being mapped. */
typedef struct calq_caffe_layer {
    const calq_tp_node *tp; /* the layer message in the prototxt */
    const char *name;
    const char *type; /* LayerParameter spelling; V1 enum names are translated */
    int index;        /* position in the prototxt's layer list (the nodes' src_index) */
    int line;         /* prototxt line of the layer, for messages */
    int n_bottom;
    int *bottom; /* current value of each bottom blob */
    int n_top;
    const char **top; /* top blob names (owned by the prototxt tree) */
    int n_blobs;      /* learned blobs found in the caffemodel */
    CalqCaffe__BlobProto **blobs;
    bool in_caffemodel; /* the caffemodel has a layer of this name */
} calq_caffe_layer;

/* A string -> int table (open addressing); keys are borrowed, never copied. */
typedef struct calq_caffe_map {
    const char **keys;
    int *vals;
    int cap, n;
} calq_caffe_map;

int calq__caffe_map_get(const calq_caffe_map *m, const char *key);    /* -1 when absent */
int calq__caffe_map_put(calq_caffe_map *m, const char *key, int val); /* 0, or -1 on OOM */
void calq__caffe_map_free(calq_caffe_map *m);

/* What calq knows about one blob name of the net. */
typedef struct calq_caffe_blob {
    const char *name;
    int current;            /* value holding the blob now, -1 before its first write */
    int writes, written;    /* writes the net makes (counted before building), writes so far */
    bool input;             /* a net input: keeps its name whatever writes follow */
    const char *dropped_by; /* a skipped training layer produced it (for messages), or NULL */
    int data_layer;         /* a data layer's top, made a net input when first read: layer record + 1 */
    int data_top;           /* ... and its top position */
} calq_caffe_blob;

typedef struct calq_caffe_ctx {
    calq_graph *g;
    calq_error *err;
    calq_status status;
    const char *proto_name, *weights_name;
    const CalqCaffe__NetParameter *weights; /* NULL: no caffemodel */
    calq_caffe_map weight_index;            /* layer name -> index into weight_layers */
    int n_weight_layers;
    struct calq_caffe_weight_layer {
        int n_blobs;
        CalqCaffe__BlobProto **blobs;
    } * weight_layers;
    calq_caffe_map blob_index; /* blob name -> index into blobs */
    calq_caffe_blob *blobs;
    int n_blobs, cap_blobs;
    calq_caffe_shape *shapes; /* per value */
    bool *consumed;           /* per value: a kept layer reads it */
    int cap_values;
    int *produced; /* top values in production order (output candidates) */
    int n_produced, cap_produced;
} calq_caffe_ctx;

/* Maps one layer (type already known to be supported). */
typedef calq_status (*calq_caffe_map_fn)(calq_caffe_ctx *c, calq_caffe_layer *L);
/* Mappers in caffe_layers_elementwise.c and caffe_layers_shape.c. */
calq_status calq__caffe_map_activation(calq_caffe_ctx *c, calq_caffe_layer *L);
calq_status calq__caffe_map_prelu(calq_caffe_ctx *c, calq_caffe_layer *L);
calq_status calq__caffe_map_scale(calq_caffe_ctx *c, calq_caffe_layer *L);
calq_status calq__caffe_map_eltwise(calq_caffe_ctx *c, calq_caffe_layer *L);
calq_status calq__caffe_map_power(calq_caffe_ctx *c, calq_caffe_layer *L);
calq_status calq__caffe_map_exp_log(calq_caffe_ctx *c, calq_caffe_layer *L);
calq_status calq__caffe_map_concat(calq_caffe_ctx *c, calq_caffe_layer *L);
calq_status calq__caffe_map_slice(calq_caffe_ctx *c, calq_caffe_layer *L);
calq_status calq__caffe_map_split(calq_caffe_ctx *c, calq_caffe_layer *L);
calq_status calq__caffe_map_flatten(calq_caffe_ctx *c, calq_caffe_layer *L);
calq_status calq__caffe_map_reshape(calq_caffe_ctx *c, calq_caffe_layer *L);
calq_status calq__caffe_map_permute(calq_caffe_ctx *c, calq_caffe_layer *L);
calq_status calq__caffe_map_softmax(calq_caffe_ctx *c, calq_caffe_layer *L);
calq_status calq__caffe_map_crop(calq_caffe_ctx *c, calq_caffe_layer *L);
calq_status calq__caffe_map_interp(calq_caffe_ctx *c, calq_caffe_layer *L);
/* Caffe SSD's layers (caffe_layers_ssd.c). */
calq_status calq__caffe_map_prior_box(calq_caffe_ctx *c, calq_caffe_layer *L);
calq_status calq__caffe_map_detection_output(calq_caffe_ctx *c, calq_caffe_layer *L);
calq_status calq__caffe_map_normalize(calq_caffe_ctx *c, calq_caffe_layer *L);
/* AMCT's Quant / DeQuant layers (caffe_layers_quant.c). */
calq_status calq__caffe_map_quant(calq_caffe_ctx *c, calq_caffe_layer *L);
calq_status calq__caffe_map_dequant(calq_caffe_ctx *c, calq_caffe_layer *L);
calq_status calq__caffe_map_antiquant(calq_caffe_ctx *c, calq_caffe_layer *L);

/* The mapper for a LayerParameter type name, or NULL. */
calq_caffe_map_fn calq__caffe_mapper(const char *type);

/* Fills the weight index from c->weights (both layer lists; a later duplicate wins, as in
 * Caffe's CopyTrainedLayersFrom). */
calq_status calq__caffe_index_weights(calq_caffe_ctx *c);
/* Builds c->g from the prototxt tree. */
calq_status calq__caffe_build(calq_caffe_ctx *c, const calq_tp_node *root);
/* Records a failure in c (status + err); returns the status. */
calq_status calq__caffe_oom(calq_caffe_ctx *c);

/* Fails with "<prototxt>:<line>: layer '<name>' (<type>): <message>" and the layer name. */
calq_status calq__caffe_fail(calq_caffe_ctx *c, const calq_caffe_layer *L, calq_status s, const char *fmt, ...)
    CALQ_PRINTF(4, 5);
/* Same, naming the caffemodel file (weight problems). */
calq_status calq__caffe_fail_weights(calq_caffe_ctx *c, const calq_caffe_layer *L, const char *fmt, ...)
    CALQ_PRINTF(3, 4);

/* Fails unless L has min_b..max_b bottoms and min_t..max_t tops (-1: no upper bound). */
calq_status calq__caffe_need_io(calq_caffe_ctx *c, const calq_caffe_layer *L, int min_b, int max_b, int min_t,
                                int max_t);
/* Tracked shape of value v (a copy: creating values may move the table), and setting it. */
calq_caffe_shape calq__caffe_shape(calq_caffe_ctx *c, int v);
void calq__caffe_set_shape(calq_caffe_ctx *c, int v, const calq_caffe_shape *s);
void calq__caffe_copy_shape(calq_caffe_ctx *c, int to, int from);
/* Product of dims, or -1 when one is unknown or the product overflows. */
int64_t calq__caffe_numel(const int64_t *dims, int n);
/* Rank of bottom i; fails (returns -1) when the prototxt's inputs do not tell it. */
int calq__caffe_rank(calq_caffe_ctx *c, const calq_caffe_layer *L, int i);
/* Normalises a Caffe axis (negative counts from the end) into [0, rank); -1 after failing. */
int calq__caffe_axis(calq_caffe_ctx *c, const calq_caffe_layer *L, int64_t axis, int rank, const char *what);

/* ---- reading layer parameters from the prototxt (msg may be NULL: the default is used) ---- */
/* The layer's "<field>" message (e.g. "convolution_param"), or NULL when absent. */
const calq_tp_node *calq__caffe_param(const calq_caffe_layer *L, const char *field);
calq_status calq__caffe_get_int(calq_caffe_ctx *c, const calq_tp_node *msg, const char *field, int64_t dflt,
                                int64_t *out);
calq_status calq__caffe_get_float(calq_caffe_ctx *c, const calq_tp_node *msg, const char *field, float dflt,
                                  float *out);
calq_status calq__caffe_get_bool(calq_caffe_ctx *c, const calq_tp_node *msg, const char *field, bool dflt, bool *out);
/* An enum field written by name (or number): names[k] is the name of value k. */
calq_status calq__caffe_get_enum(calq_caffe_ctx *c, const calq_tp_node *msg, const char *field,
                                 const char *const *names, int n_names, int dflt, int *out);
/* Repeated integer field: count (0 when absent) and element i. */
int calq__caffe_count(const calq_tp_node *msg, const char *field);
calq_status calq__caffe_get_int_at(calq_caffe_ctx *c, const calq_tp_node *msg, const char *field, int i, int64_t *out);
calq_status calq__caffe_get_float_at(calq_caffe_ctx *c, const calq_tp_node *msg, const char *field, int i, float *out);

/* ---- building the graph ---------------------------------------------------------------------- */
/* A new value with exactly this name (side tables grown); -1 on failure. */
int calq__caffe_named_value(calq_caffe_ctx *c, const char *name);
/* A new value named "<layer>/<what>" (made unique); -1 on failure. */
int calq__caffe_tmp(calq_caffe_ctx *c, const calq_caffe_layer *L, const char *what);
/* The value for top i of L (SSA name, see above), registered as the blob's current value. */
int calq__caffe_top(calq_caffe_ctx *c, const calq_caffe_layer *L, int i);
/* A node. `what` NULL: the layer's own node, named after the layer; otherwise "<layer>/<what>".
 * own: src_index = L->index (the node does the layer's work), else -1. Opset 13. */
int calq__caffe_node(calq_caffe_ctx *c, const calq_caffe_layer *L, const char *op, const char *what, bool own,
                     const int *in, int n_in, const int *out, int n_out);
calq_status calq__caffe_attr_int(calq_caffe_ctx *c, int node, const char *name, int64_t v);
calq_status calq__caffe_attr_float(calq_caffe_ctx *c, int node, const char *name, float v);
calq_status calq__caffe_attr_ints(calq_caffe_ctx *c, int node, const char *name, const int64_t *v, int n);
calq_status calq__caffe_attr_string(calq_caffe_ctx *c, int node, const char *name, const char *v);
calq_status calq__caffe_attr_floats(calq_caffe_ctx *c, int node, const char *name, const float *v, int n);
/* Constants named "<layer>/<what>". */
int calq__caffe_const_f32(calq_caffe_ctx *c, const calq_caffe_layer *L, const char *what, const float *v,
                          const int64_t *dims, int ndim);
int calq__caffe_const_i64(calq_caffe_ctx *c, const calq_caffe_layer *L, const char *what, const int64_t *v, int n);
/* A constant of any dtype; v holds numel(dims) elements of it (copied). */
int calq__caffe_const_typed(calq_caffe_ctx *c, const calq_caffe_layer *L, const char *what, calq_dtype dt,
                            const void *v, const int64_t *dims, int ndim);
int calq__caffe_const_scalar(calq_caffe_ctx *c, const calq_caffe_layer *L, const char *what, float v);
/* A one-input, one-output helper node "<layer>/<what>" writing a fresh value; returns the value. */
int calq__caffe_unary(calq_caffe_ctx *c, const calq_caffe_layer *L, const char *op, const char *what, int x);
/* Binary helper node "<layer>/<what>" (op(a, b)) writing a fresh value; returns the value. */
int calq__caffe_binary(calq_caffe_ctx *c, const calq_caffe_layer *L, const char *op, const char *what, int a, int b);
/* The int64 shape vector dims[from:to) of value x, as a Shape -> Slice chain the planner folds. */
int calq__caffe_shape_slice(calq_caffe_ctx *c, const calq_caffe_layer *L, const char *what, int x, int from, int to);

/* ---- learned blobs ---------------------------------------------------------------------------- */
/* Fails unless the caffemodel gave L exactly `n` blobs (`what` lists them, e.g. "weights, bias"). */
calq_status calq__caffe_need_blobs(calq_caffe_ctx *c, const calq_caffe_layer *L, int n, const char *what);
/* How a blob stores its values: FLOAT32 (data or double_data, also for an empty blob), or the
 * integer fields of AMCT deploy models (§9.1): INT8 (int8_data bytes), INT32 (int32_data),
 * UINT64 (uint64_data, the packed deq_scale of §6.3). */
calq_dtype calq__caffe_blob_storage(const CalqCaffe__BlobProto *b);
/* Values in blob i, in whichever field holds them. */
int64_t calq__caffe_blob_count(const calq_caffe_layer *L, int i);
/* Blob i as a float32 constant of shape dims[ndim] named "<layer>/<what>"; the element count
 * must equal the shape's (`expect` explains the shape in the message). An integer blob is an
 * error naming the layer. -1 on failure. */
int calq__caffe_blob_const(calq_caffe_ctx *c, const calq_caffe_layer *L, int i, const char *what, const int64_t *dims,
                           int ndim, const char *expect);
/* The same, keeping integer storage as an INT8 / INT32 / UINT64 constant (deploy models). */
int calq__caffe_blob_const_any(calq_caffe_ctx *c, const calq_caffe_layer *L, int i, const char *what,
                               const int64_t *dims, int ndim, const char *expect);
/* Blob i's values converted to float (caller frees), count in *n. NULL after failing. */
float *calq__caffe_blob_floats(calq_caffe_ctx *c, const calq_caffe_layer *L, int i, int64_t *n);
/* The blob's declared dims: `shape`, or legacy num/channels/height/width. */
int calq__caffe_blob_dims(const CalqCaffe__BlobProto *b, int64_t *dims);

/* ---- checking learned blobs against their layer (caffe_blobs_check.c) -------------------------- */
/* Fails when the caffemodel gives learned blobs to a layer type that has none. */
calq_status calq__caffe_check_blob_count(calq_caffe_ctx *c, const calq_caffe_layer *L);
/* Blob i against its layer: float and double values agree, the declared shape holds the values
 * it has, and (want non-NULL) the values and the shape are the want[want_nd] the prototxt's
 * parameters make (`expect` says which, for the message); shapes compare without their leading
 * and trailing 1s. calq__caffe_blob_const does this for every blob it makes a constant of. */
calq_status calq__caffe_check_blob(calq_caffe_ctx *c, const calq_caffe_layer *L, int i, const char *what,
                                   const int64_t *want, int want_nd, const char *expect);

#endif
