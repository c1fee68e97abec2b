/* Shared pieces of the ONNX exporters (issue 6): the checks run before anything is written, a
 * bump arena for the protobuf-c messages an export creates, builders for initializers and
 * nodes, and the output graph being assembled.
 *
 * Ownership: an export never modifies the model's Onnx__ModelProto (m->onnx). The output graph
 * is a list of pointers: nodes and initializers of the original proto (borrowed, read-only)
 * mixed with new ones allocated in the arena. calq__xa_free releases every new message at
 * once; the borrowed ones stay owned by the model. */
#ifndef CALQ_EXPORT_COMMON_H
#define CALQ_EXPORT_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "calib/config.h"
#include "base/file.h"
#include "calib/record.h"
#include "calq.h"
#include "base/strmap.h"
#include "frontend/model.h"
#include "graph/quantizable.h"
#include "onnx/onnx.pb-c.h"

/* A bump arena: every block is zeroed and freed by calq__xa_free. */
typedef struct calq__xa {
    void **blocks;
    size_t n, cap;
    bool oom; /* set by the first failed allocation; builders then return NULL */
} calq__xa;

void *calq__xa_alloc(calq__xa *a, size_t size);
char *calq__xa_strdup(calq__xa *a, const char *s);
char *calq__xa_printf(calq__xa *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void calq__xa_free(calq__xa *a);

/* The output graph: nodes and initializers in order (the lists grow as needed). */
typedef struct calq__xgraph {
    calq__xa a;
    Onnx__NodeProto **nodes;
    size_t n_nodes, cap_nodes;
    Onnx__TensorProto **inits;
    size_t n_inits, cap_inits;
    calq_strmap names; /* initializer and node output names added so far (keys in the arena) */
} calq__xgraph;

calq_status calq__xg_init(calq__xgraph *x, size_t cap_nodes, size_t cap_inits, calq_error *err);
void calq__xg_free(calq__xgraph *x);
/* Appends (no copy); false on out of memory. The names it defines go into x->names. */
bool calq__xg_node(calq__xgraph *x, Onnx__NodeProto *n);
bool calq__xg_init_add(calq__xgraph *x, Onnx__TensorProto *t);

/* A new initializer (data copied into the arena as raw_data, little-endian host order).
 * data_type is an ONNX TensorProto data type (1 float, 3 int8, 6 int32, 7 int64). */
Onnx__TensorProto *calq__xg_tensor(calq__xgraph *x, const char *name, int data_type, const int64_t *dims, int ndim,
                                   const void *data, size_t nbytes);
/* A new node; names copied. Attributes are added with calq__xg_attr_int / _ints. */
Onnx__NodeProto *calq__xg_new_node(calq__xgraph *x, const char *op, const char *name, const char *const *inputs,
                                   int n_inputs, const char *const *outputs, int n_outputs);
/* A shallow copy of n (attributes shared with n) with fresh input / output name arrays. */
Onnx__NodeProto *calq__xg_copy_node(calq__xgraph *x, const Onnx__NodeProto *n);
bool calq__xg_attr_int(calq__xgraph *x, Onnx__NodeProto *n, const char *name, int64_t v);
bool calq__xg_attr_float(calq__xgraph *x, Onnx__NodeProto *n, const char *name, float v);
bool calq__xg_attr_str(calq__xgraph *x, Onnx__NodeProto *n, const char *name, const char *v);
/* Removes attribute `name` from n (whose attribute array must be the arena's, e.g. a copy). */
void calq__xg_attr_remove(calq__xgraph *x, Onnx__NodeProto *n, const char *name);
const Onnx__AttributeProto *calq__xg_attr_find(const Onnx__NodeProto *n, const char *name);

/* Output channel of element i of layer n's weight w, n of kind k: calq__wchan_of after
 * calq__wchan_init once per weight (a numel per element was a sixth of saving MobileNetV2). The
 * index of its per-channel scale_w (§8.2). CONV layout: dim 0; CONV_TRANSPOSE [Cin,
 * Cout/group, k...]: the group's offset plus dim 1, so a grouped deconvolution has group *
 * dims[1] channels; RNN: the last dim's rows. Only for kinds that allow per-channel weights. */
typedef struct calq__wchan {
    bool deconv, rnn;
    int64_t per, d0, d1, g, last; /* elements per channel, dims, groups, the RNN's last dim */
} calq__wchan;
void calq__wchan_init(const calq_qkind *k, const calq_node *n, const calq_tensor *w, calq__wchan *m);
static inline int64_t calq__wchan_of(const calq__wchan *m, int64_t i)
{
    if (m->deconv) {
        int64_t j = (i / m->per) % m->d1, ci = i / (m->per * m->d1);
        return (ci / (m->d0 / m->g)) * m->d1 + j;
    }
    return m->rnn ? i / m->last : i / m->per;
}
/* How many elements from i on share element i's channel (a run of one channel's scale). */
static inline int64_t calq__wchan_run(const calq__wchan *m, int64_t i, int64_t numel)
{
    int64_t block = m->deconv || !m->rnn ? m->per : m->last;
    int64_t len = block > 0 ? block - i % block : numel - i;
    return len < numel - i ? len : numel - i;
}
/* out[i] = clamp(round_half_away(w[i] / scale_w[channel of i]), lo, hi) for i < numel, one
 * run of a channel at a time (ARQ's rounding, §6.1), or ada[i] (ada_quantize's learned rounding)
 * when ada is given; fq (optional): the fake-quant weight out[i] * scale_w as a float, -0.0 kept.
 * scales: n_scales = 1 or one per channel. */
void calq__quantize_weights(const calq__wchan *m, const float *w, int64_t numel, const float *scales, int n_scales,
                            float lo, float hi, const int8_t *ada, int8_t *out, float *fq);
/* out[i] = wq[i] * scale_w[channel of i], one run of a channel at a time. */
void calq__dequantize_weights(const calq__wchan *m, const int8_t *wq, int64_t numel, const float *scales, int n_scales,
                              float *out);
/* The number of output channels of layer n's weight w (per-channel scale_w count, §8.2;
 * calq__qkind_out_channels). */
int64_t calq__weight_channels(const calq_qkind *k, const calq_node *n, const calq_tensor *w);

/* The checks of issue 6 before anything is written (amct-reference.md §4.4): AMCT's record
 * checks (calq__record_check), then every layer the record must have (the enabled layers of
 * cfg) present, all missing ones listed at once with the likely causes (user-journeys §2). */
calq_status calq__save_check(const calq_model *m, const calq_record *r, const calq_config *cfg,
                             const char *record_label, calq_error *err);

/* Packs model `mp` with `graph` in place of its graph into a new staged output `path` (the
 * caller commits all outputs of a save together, src/base/file.h). */
calq_status calq__xg_write(const Onnx__ModelProto *mp, const Onnx__GraphProto *graph, const char *path,
                           calq_staged_files *out, calq_error *err);

/* CALQ_SAVE_REDUCE_RANGE (reduce_range.c): swaps every weighted layer's scale_w for the 7-bit
 * one, keeping the record's in *saved (owned, NULL entries for layers without weights);
 * calq__reduce_range_end restores them and frees *saved. Fails, with rec unchanged, on a layer
 * with ada_quantize weights (learned for 8 bits) and on out-of-memory. */
calq_status calq__reduce_range_begin(calq_record *rec, float ***saved, calq_error *err);
void calq__reduce_range_end(calq_record *rec, float **saved);

#endif
