/* calq's AdaRound side file, `<record>.adaround` (docs/numerics.md "ada_quantize"): AMCT's
 * record (§7.1) has no place for learned rounding, so a calibration with ada_quantize layers
 * writes the learned int8 weights beside the record, staged and committed with it, and every
 * `calq save` from that record reads them so all exported models carry the learned weights.
 *
 * Format, version 1, little-endian:
 *   "CALQADA\0"  u32 version (1)  u32 n_layers
 *   per layer: u32 name length, name bytes (no NUL), u64 numel, u64 weight checksum,
 *              u32 num_iteration, f64 error with nearest rounding, f64 error learned,
 *              numel int8 weights in the layer's weight layout (the model's, after Conv+BN folding)
 *   u64 FNV-1a 64 of every byte before it.
 * The weight checksum is FNV-1a 64 of the layer's float32 weights (folded as calibration and save
 * fold them), so the side file of another model, or of the same model with other weights, is
 * refused instead of silently applied. A file with no layer is valid: an ARQ calibration writes
 * one over a stale side file so a later save does not pick up old learned weights.
 *
 * Ownership: calq__ada_file_attach gives each record layer its own copy of the int8 weights
 * (calq_record_layer.ada_w, freed with the record). */
#ifndef CALQ_CALIB_ADAROUND_H
#define CALQ_CALIB_ADAROUND_H

#include <stdint.h>

#include "base/file.h"
#include "calib/record.h"
#include "calq.h"

#define CALQ_ADA_SUFFIX ".adaround"
/* The largest side file calq reads (int8 weights of a large model). */
#define CALQ_ADA_MAX_BYTES ((size_t)1 << 31)

/* FNV-1a 64 of n float32 values' bytes (little-endian host). */
uint64_t calq__ada_weight_sum(const float *w, int64_t n);

typedef struct calq__ada_entry {
    const char *name;
    int64_t numel;
    uint64_t wsum;
    int num_iteration;
    double err_nearest, err_ada;
    const int8_t *q;
} calq__ada_entry;

/* `<record_path>.adaround` (owner: caller, free); NULL on out-of-memory. */
char *calq__ada_path(const char *record_path);

/* Stages the side file `path` with n entries into s. */
calq_status calq__ada_file_stage(calq_staged_files *s, const char *path, const calq__ada_entry *e, int n,
                                 calq_error *err);

/* Parses a side file (len bytes; label names it in messages) into entries pointing into
 * `data` (*out: malloc'ed array, caller frees it). */
calq_status calq__ada_file_parse(const uint8_t *data, size_t len, const char *label, calq__ada_entry **out, int *n,
                                 calq_error *err);

/* Reads the side file `src` (labelled `label`) and attaches each layer's weights to the record's
 * entry of that name; a layer the record does not have is an error. */
calq_status calq__ada_file_attach(calq_record *r, const char *src, const char *label, calq_error *err);

/* At save: *q = the learned int8 weights of record entry rl when it has some (else NULL, the
 * nearest rounding applies), after checking them against the layer's float weight w: the same
 * element count and checksum, else CALQ_ERR_RECORD_FILE naming the layer and the side file. */
calq_status calq__ada_weights(const calq_record_layer *rl, const calq_tensor *w, const int8_t **q, calq_error *err);

#endif
