/* AMCT's Caffe outputs (amct-reference.md §1.3, §9.1, §9.2): the original prototxt tree and
 * NetParameter patched into
 *
 *   fake-quant  <prefix>_fake_quant_model.prototxt + <prefix>_fake_quant_weights.caffemodel
 *   deploy      <prefix>_deploy_model.prototxt     + <prefix>_deploy_weights.caffemodel
 *
 * Each quantized layer (Convolution, Deconvolution, InnerProduct, AVE Pooling) gets a Quant
 * layer before it (one per (input tensor, scale_d, offset_d): layers reading one tensor share
 * it) and a DeQuant layer after it, in place on its top. Conv+BatchNorm(+Scale) are folded as
 * calibration folds them (§8.3) and the folded layers removed; everything else in both files is
 * kept as it was. A bottom quantized on its own (tensor_quantize, §7.2; Pooling MAX, Eltwise SUM,
 * §8.1), or a MAX Pooling's bottom that quantized layers also read, gets the Quant and an
 * AntiQuant layer before its reader (§9.3). A layer with DMQ balance factors (record
 * tensor_balance_factor, §7.1) reads its bottom through a per-channel Scale layer by 1/s, and
 * its weights are W·s before quantization (export_caffe_dmq.c). Private to src/export; the
 * files are staged, never committed here.
 *
 * Files: export_caffe.c (the plan: folding, which layers, the Quant groups; the entry point),
 * export_caffe_net.c (the prototxt), export_caffe_blobs.c (the caffemodel), export_caffe_dmq.c
 * (DMQ balancing: the graph rewrite and the Scale layers). */
#ifndef CALQ_EXPORT_CAFFE_H
#define CALQ_EXPORT_CAFFE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/file.h"
#include "base/strmap.h"
#include "caffe.pb-c.h"
#include "calib/config.h"
#include "calib/record.h"
#include "calq.h"
#include "export/export_common.h"
#include "frontend/model.h"
#include "textproto/textproto.h"

/* Writes the fake-quant (deploy false) or deploy model of Caffe model m with the record's
 * factors into two new staged outputs of `out` (the caller commits them with the rest of the
 * save). The caller has checked the record against m and cfg (calq__save_check); cfg gives the
 * enabled layers, with_offset, and the fusion switches. */
calq_status calq__export_caffe(const calq_model *m, const calq_record *rec, const calq_config *cfg, bool deploy,
                               const char *prefix, calq_staged_files *out, calq_error *err);

/* ---- shared by export_caffe*.c ------------------------------------------------------------- */

/* One Quant layer: a tensor quantized with one (scale_d, offset_d). */
typedef struct calq__xc_quant {
    int value;          /* the tensor (value of the folded graph) */
    const char *bottom; /* its Caffe blob name */
    float scale_d;
    int64_t offset_d;
    bool with_offset;
    const char *object_layer; /* the first layer reading it */
    int before;               /* prototxt layer index of that layer: the Quant goes right before it */
    char *name;               /* layer name, also its top blob (arena) */
} calq__xc_quant;

/* One quantized layer. */
typedef struct calq__xc_layer {
    int index;              /* position in the prototxt's layer list (the node's src_index) */
    int node;               /* its node in the folded graph */
    const calq_qkind *kind; /* its quantizable kind (graph/qkind.h) */
    const char *name;       /* layer name = record key */
    const calq_record_layer *rl;
    int quant;       /* its Quant (index into plan.quants) */
    char *dequant;   /* its DeQuant layer's name (arena) */
    int64_t n_deq;   /* deq_scale entries: output channels when channel-wise, else 1 */
    float *deq;      /* scale_d * scale_w[c] in float32 (§6.2), n_deq entries (arena) */
    unsigned *shift; /* shift_bit per entry, 0 without (§6.4) (arena) */
} calq__xc_layer;

/* A bottom quantized and restored before a float layer (§9.3): Quant (shared) -> AntiQuant ->
 * the layer's bottom `bottom`. From a tensor_quantize entry of the layer (§7.2), or AMCT's pair
 * before a MAX Pooling whose bottom quantized layers also read. */
typedef struct calq__xc_anti {
    int index;  /* the reading layer's prototxt position */
    int bottom; /* which of its bottoms */
    int quant;  /* index into plan.quants */
    char *name; /* the AntiQuant layer's name, also its top (arena) */
} calq__xc_anti;

/* The Scale layer of a DMQ-balanced layer (§7.1 tensor_balance_factor, §7.2 dmq_balancer_param):
 *   layer { name: "conv2_dmq_scale" type: "Scale" bottom: "pool1" top: "conv2_dmq_scale"
 *           scale_param { axis: 1 num_axes: 1 bias_term: false } }   (one blob: 1/s)
 * right before the layer's Quant, which quantizes its top. */
typedef struct calq__xc_dmq {
    int index;          /* the balanced layer's prototxt position */
    const char *bottom; /* the blob the layer reads in the model: the Scale's bottom */
    char *name;         /* the Scale layer's name, also its top (arena) */
    int axis;           /* scale_param axis: 1, or an InnerProduct's axis */
    int n_dims;         /* the blob's shape: the bottom's dims from `axis` (num_axes) */
    int64_t dims[CALQ_MAX_DIMS];
    const float *inv; /* 1/s, numel(dims) values: the balancing Mul's constant in plan.g (borrowed) */
} calq__xc_dmq;

typedef struct calq__xc_plan {
    const calq_model *m;
    const calq_record *rec;
    const calq_config *cfg;
    bool deploy;
    calq_graph *g;              /* m->g with Conv+BN(+Scale) folded as calibration folds it (owned) */
    calq__xa a;                 /* names, blobs and message copies of this export */
    int n_proto;                /* `layer` entries of the prototxt */
    const calq_tp_node **proto; /* each entry of the model's prototxt (borrowed) */
    int *node_of;               /* per entry: its own node in g, -1 when none (or folded away) */
    int *folded_into;           /* per entry: the Conv entry that absorbed it (§8.3), else -1 */
    const char **top_after;     /* per entry: a Conv's top once its BN/Scale are folded in, else NULL */
    bool *changed;              /* per entry: the weights in g differ from the caffemodel's (folded) */
    int *quantized;             /* per entry: index into layers, or -1 */
    calq__xc_layer *layers;
    int n_layers;
    calq__xc_quant *quants;
    int n_quants;
    calq_strmap names; /* name_used's set, built on first use: the prototxt's names and blobs, then
                          each name this export gives */
    calq__xc_anti *antis;
    int n_antis;
    calq__xc_dmq *dmqs; /* the DMQ Scale layers (export_caffe_dmq.c) */
    int n_dmqs;
    int *dmq_of; /* per entry: its Scale (index into dmqs), or -1 */
} calq__xc_plan;

/* String field `field` of a prototxt message (the last one given), or NULL. */
const char *calq__xc_string(const calq_tp_node *msg, const char *field);

/* The only child of a scratch root (calq_tp_new_root), detached from it; the scratch root is
 * freed. NULL (and the scratch freed) when made is NULL. */
calq_tp_node *calq__xc_detach(calq_tp_node *scratch, const calq_tp_node *made);

/* A fresh layer / blob name "<base><suffix>" (then "_2", ...; any length, base/unique_name.h) in
 * the plan's arena, NULL on out-of-memory (export_caffe.c). */
char *calq__xc_fresh_name(calq__xc_plan *p, const char *base, const char *suffix);

/* DMQ balancing (export_caffe_dmq.c): rewrites plan.g, folded already and before the entries
 * are mapped to its nodes, as calibration rewrote it (graph/balance.h: W·s and X·(1/s)) for every
 * enabled layer with factors in the record, and plans its Scale layer (names[i]: entry i's layer
 * name). Fails naming the layer when the Scale's shape cannot be known. */
calq_status calq__xc_balance(calq__xc_plan *p, const char *const *names, calq_error *err);
/* The prototxt layer of Scale d (owner: caller), NULL on out-of-memory. */
calq_tp_node *calq__xc_dmq_layer(const calq__xc_dmq *d);
/* The caffemodel entry of Scale d: its name and the 1/s blob (arena), NULL on out-of-memory. */
CalqCaffe__LayerParameter *calq__xc_dmq_entry(calq__xc_plan *p, const calq__xc_dmq *d);

/* The output prototxt: a copy of the model's with the plan applied (owner: caller, calq_tp_free). */
calq_status calq__xc_prototxt(const calq__xc_plan *p, calq_tp_node **out, calq_error *err);

/* The output caffemodel, packed: *buf (p's arena) holds *len bytes. Fails naming the layer when
 * a bias overflows int32 (§8.4). */
calq_status calq__xc_caffemodel(calq__xc_plan *p, uint8_t **buf, size_t *len, calq_error *err);

#endif
