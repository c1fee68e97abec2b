/* calq_compare's internals (src/compare): how a quantized model's layers are found and matched
 * to the float model (match.c), the streaming statistics (stats.c), the engine (compare.c) and
 * the reports (report_json.c, report_html.c).
 *
 * Ownership: a calq__cmp_match array and its chains belong to the caller
 * (calq__cmp_matches_free); everything else is documented where it is returned. */
#ifndef CALQ_COMPARE_COMPARE_H
#define CALQ_COMPARE_COMPARE_H

#include <stdbool.h>
#include <stdint.h>

#include "calq.h"
#include "graph/graph.h"

/* One quantized layer of Q matched to the float graph F (F folded as Q was, see
 * calq__cmp_fold_float). Value and node indices are F's (f_*) or Q's (q_*). */
typedef struct calq__cmp_match {
    int f_node, f_in, f_out; /* the layer, its input, the float value compared */
    int q_node, q_out;       /* the layer in Q, the Q value compared (after its dequantization) */
    bool q_int8;             /* q_out is int8 (QOperator): x = (q - q_zp) * q_scale */
    bool q_uint8;            /* with q_int8: it is uint8 instead (the int8 scheme's activations, the same
                                integers shifted by 128: docs/cli.md "int8 end to end") */
    float q_scale;
    int q_zp;
    bool has_range; /* the input's factors were found: x ~ (q - offset) * scale, q in [qmin, qmax] */
    float scale;
    int offset, qmin, qmax;
    /* isolated: the Q nodes computing q_out from q_stop (Q's form of the layer's input) and
     * constants, in Q's order; q_stop is fed F's f_in, through QuantizeLinear(f_in, stop_scale,
     * stop_zp) when it is int8 (QOperator layers reading another QOperator layer's output) */
    bool iso;
    int q_stop;
    bool stop_int8;
    int stop_scale, stop_zp;
    int q_stop2, f_in2; /* a MatMul of two activations: its second input's stop and F value (else -1) */
    int n_chain;
    int *chain;
} calq__cmp_match;

/* F = fm's graph with Conv + BatchNorm (and per-channel Mul / Add) folded where Q has folded
 * them (calibration and save fold unless skip_fusion_layers, §8.3: an affine node that Q still
 * has keeps its Conv unfolded here). Owner: caller (calq__graph_free); shares fm's constants. */
calq_status calq__cmp_fold_float(const calq_graph *fg, const calq_graph *q, calq_graph **out, calq_error *err);

/* The quantized layers of Q, in F's order (*out owned by the caller, calq__cmp_matches_free);
 * *n_float counts F's quantizable layers that Q keeps in float. */
calq_status calq__cmp_match_layers(const calq_graph *f, const calq_graph *q, calq__cmp_match **out, int *n,
                                   int *n_float, calq_error *err);
void calq__cmp_matches_free(calq__cmp_match *m, int n);

/* A new value of g named "calq.iso/<layer>/<what>" in full (cut short, two long names came out
 * equal and the copy failed), "..._<k>" if g has that name (copy.c). t: its constant or NULL,
 * owned by g when own (freed here on failure). -1 with err set on failure. */
int calq__cmp_new_value(calq_graph *g, const char *layer, const char *what, calq_tensor *t, bool own, calq_error *err);
/* Adds to g (a copy of F: F's value indices) layer m's Q nodes (q: Q's graph) fed F's value
 * m->f_in, through QuantizeLinear when Q's layer reads int8 (copy.c). Names start with
 * "calq.iso/<layer>/". qmap: scratch of q->n_values ints. Returns the copy's value standing for
 * m->q_out, or -1 with err set. */
int calq__cmp_copy_layer(calq_graph *g, const calq_graph *q, const calq__cmp_match *m, const char *layer, int *qmap,
                         calq_error *err);

/* calq_compare_opts.sensitivity (sensitivity.c): for each layer i with m[i].iso, F with that
 * layer alone replaced by its Q copy, run on batches 0..nb-1 of data (ins: n_in tensors shaped
 * for the batches, their buffers used for reading; o: threads, log, arena limit); the model
 * outputs against F's fill out[i].sens, sens_output and has_sensitivity. */
calq_status calq__cmp_sensitivity(const calq_graph *f, const calq_graph *q, const calq__cmp_match *m, int n,
                                  calq_data *data, int nb, calq_tensor *ins, int n_in, const calq_compare_opts *o,
                                  calq_compare_layer *out, calq_error *err);

/* Streaming sums of float y against quantized q (stats.c). Every call is one batch; the sums
 * run in double over fixed chunks of the tensor, combined in order, so they are the same for
 * any thread count. */
typedef struct calq__cmp_acc {
    double syy, sqq, syq, sdd, max_abs, cos_min;
    uint64_t count;
    int batches;
} calq__cmp_acc;

/* q as float (qf) or int8 (qi with scale, zp). */
void calq__cmp_acc_add(calq__cmp_acc *a, const float *y, const float *qf, const int8_t *qi, float scale, int zp,
                       size_t n, int n_threads);
void calq__cmp_acc_stats(const calq__cmp_acc *a, calq_compare_stats *s);

/* The input side of a layer: range, clipped count, histogram (calq_compare_layer's fields). */
void calq__cmp_input_add(calq_compare_layer *l, const float *x, size_t n);

#endif
