/* The record file (amct-reference.md §7.1): AMCT's ScaleOffsetRecord in protobuf text format,
 * one `record { key: "<layer>" value { scale_d offset_d scale_w... offset_w... } }` per
 * quantized layer. calq writes it after a calibration run (record_write.c) and reads AMCT's or
 * its own (record_read.c), then checks it against a model with every rule of §4.4, in AMCT's
 * words, before anything is saved (issue 6).
 *
 * Ownership: a calq_record owns its layers and every string and array they point to;
 * calq__record_free releases all of it. */
#ifndef CALQ_CALIB_RECORD_H
#define CALQ_CALIB_RECORD_H

#include <stdbool.h>
#include <stdint.h>

#include "base/strmap.h"
#include "calq.h"
#include "graph/graph.h"

typedef struct calq_record_layer {
    char *name; /* the key: a layer (node) name */
    bool has_scale_d, has_offset_d;
    float scale_d;
    int64_t offset_d;
    int n_scale_w; /* one per output channel, or 1 (per tensor); 0 when absent */
    float *scale_w;
    int n_offset_w;
    int64_t *offset_w;
    int n_shift_bit; /* §6.4: written only with joint_quant / SearchN */
    uint64_t *shift_bit;
    /* DMQ balancing (§7.1 tensor_balance_factor, ONNX flavour; calq writes it for Caffe models
     * too, as an extension its reader takes): one factor s_j > 0 per input channel; the layer
     * reads X·(1/s) and W·s (graph/balance.h). 0 when absent or all 1 (no balancing). */
    int n_balance;
    float *balance;
    int line, col; /* where the entry starts in the file (0 for records built in memory) */
    /* ada_quantize: the learned int8 weights from calq's side file (calib/adaround.h), owned;
     * NULL: nearest rounding */
    int8_t *ada_w;
    int64_t n_ada_w;
    uint64_t ada_wsum;  /* checksum of the float weights they were learned on */
    char ada_file[512]; /* the side file, for messages */
} calq_record_layer;

typedef struct calq_record {
    int n_layers, cap_layers;
    calq_record_layer *layers; /* in file order (calq writes the model's layer order) */
    calq_strmap index;         /* layer name -> position in layers (keys: the layers' names) */
} calq_record;

/* The largest record file calq reads: one entry per quantized layer is a few hundred bytes
 * (tens of kilobytes with per-channel scales), so 64 MiB is far above any real model and keeps
 * a hostile file from costing minutes and gigabytes (issue 14). */
#define CALQ_RECORD_MAX_BYTES (64u << 20)

/* An empty record (owner: caller, calq__record_free); NULL on out-of-memory. */
calq_record *calq__record_new(void);
void calq__record_free(calq_record *r);

/* Appends an entry for `name` (copied) with no fields; the caller fills the fields, arrays
 * allocated with malloc (the record frees them). NULL on out-of-memory (err filled). */
calq_record_layer *calq__record_add(calq_record *r, const char *name, calq_error *err);
/* Entry for `name`, or NULL. */
const calq_record_layer *calq__record_find(const calq_record *r, const char *name);

/* ---- keys ---------------------------------------------------------------------------------- */

/* The key of input `input` of layer `layer` when it is not the layer's own "<layer>" (input 0 of a
 * quantized layer): "<layer>:<input>", the form §7.1 gives tensor_quantize entries, which calq also
 * uses for input 1 of MatMul with two variable inputs (AMCT documents no key for it). Owner:
 * caller (free); NULL on out-of-memory. */
char *calq__record_key(const char *layer, int input);
/* The node of graph g a key names, or -1: a node named `key` itself (*input = -1: the layer's
 * own entry), else "<node>:<input>" with a decimal input index (*input >= 0); when both exist,
 * calq__record_key_pick decides. */
int calq__record_key_node(const calq_graph *g, const char *key, int *input);
/* Whether key has the form "<node>:<input>" (1-4 decimal digits after the last colon): the
 * length of <node> and the input. */
bool calq__record_key_split(const char *key, size_t *len, int *input);
/* A key that is node `whole`'s name and also input split_input of node `split` (either -1 when
 * absent) names the node, unless that node is no quantizable layer and the input is quantized on
 * its own (calibration refuses a key that is a layer's name and another layer's input key, so
 * no record calq writes is ambiguous). Returns the node; *input as calq__record_key_node. */
int calq__record_key_pick(const calq_graph *g, int whole, int split, int split_input, int *input);

/* Writes r in AMCT's text format (floats shortest round-trip, so reading gives the same bits),
 * atomically: a temporary file, then rename; on failure `path` is untouched. */
calq_status calq__record_write_file(const calq_record *r, const char *path, calq_error *err);
struct calq_staged_files;
/* The same text as one more file of staged set s (committed with the others). */
calq_status calq__record_stage(const calq_record *r, struct calq_staged_files *s, const char *path, calq_error *err);

/* Parses a record from `len` bytes; `filename` labels messages (NULL: "record"). Accepts both
 * flavours of §7.1: the fields it documents that calq does not use (skip_fusion, channels,
 * height, width, act_type, wts_type, ...) are type-checked and read over; act_type / wts_type /
 * dst_type other than INT8 are refused (calq would ignore what they mean); tensor_balance_factor
 * values must be finite and > 0 (all 1 reads as no balancing); any other field is an error naming it. Syntax errors and
 * mistyped fields say file:line:col; a key given twice is an error. */
calq_status calq__record_parse(const char *text, size_t len, const char *filename, calq_record **out, calq_error *err);
/* At most CALQ_RECORD_MAX_BYTES, from a regular file. */
calq_status calq__record_read_file(const char *path, calq_record **out, calq_error *err);
/* The same, checking each key against model m (labelled model_label in messages) as soon as it
 * is read: the first key that is not a quantizable layer of m stops the read with
 * calq__record_check's message, and a layer's scale_w may not outnumber its output channels. */
calq_status calq__record_parse_for(const char *text, size_t len, const char *filename, const calq_model *m,
                                   const char *model_label, calq_record **out, calq_error *err);
calq_status calq__record_read_file_for(const char *path, const calq_model *m, const char *model_label,
                                       calq_record **out, calq_error *err);

/* The save-time checks of §4.4 against model m, in AMCT's order and with AMCT's text (plus
 * where: the file and the layer): an empty record; keys that are not layers of the model or
 * not quantizable; missing scale_d / offset_d / scale_w / offset_w; scale_w on a layer without
 * weights; shift_bit on pooling; offset_d in [-128, 127]; offset_w all 0; scale_d and scale_w in
 * (0, +inf); shift_bit all 0 or all in [1, 16]; scale_w / offset_w / shift_bit lengths. The
 * labels name the files in messages (NULL: "model" / "record"). CALQ_ERR_RECORD_FILE for a
 * record that does not fit the model, CALQ_ERR_RECORD_FACTOR for a factor out of range. */
calq_status calq__record_check(const calq_record *r, const calq_model *m, const char *model_label,
                               const char *record_label, calq_error *err);

#endif
