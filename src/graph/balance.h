/* DMQ balancing on the IR (amct-reference.md §7.2 dmq_balancer_param, §7.1
 * tensor_balance_factor; calq's reading in docs/numerics.md, "DMQ balancing"): a layer computes
 * the same function from X·diag(1/s) and W·diag(s), where s holds one factor per input channel.
 * This file knows where a layer's input channels are (in its weight and in its input) and
 * rewrites a graph so that the layer reads the balanced pair: a Mul by 1/s before input 0 and a
 * new weight constant W·s. Calibration and every writer apply the same rewrite, so the
 * activation and weight factors are computed and used on the same float32 values. */
#ifndef CALQ_GRAPH_BALANCE_H
#define CALQ_GRAPH_BALANCE_H

#include <stdint.h>

#include "graph/graph.h"
#include "graph/qkind.h"

/* Where the input channels of node n's weight are. */
typedef struct calq__balance_geom {
    int64_t n_ch;                     /* input channels C of the layer */
    int w_axis;                       /* the weight axis holding them (after transpose_attr) */
    int64_t w_len;                    /* dims[w_axis]: C, or C/group for a grouped Conv */
    int64_t w_inner;                  /* elements per step along w_axis */
    int group;                        /* a grouped Conv's group count (Cin/group channels per group), else 1 */
    int64_t out_per_group, out_inner; /* grouped Conv: dims[0]/group, elements per output channel */
} calq__balance_geom;

/* The geometry of layer node ni of g (its kind k, qkind.balance): fails naming the layer when the
 * kind takes no balancing, the weight is not a constant float tensor, or its shape does not fit
 * (e.g. a Conv whose group does not divide its channels). */
calq_status calq__balance_geom_of(const calq_graph *g, int ni, const calq_qkind *k, calq__balance_geom *geo,
                                  calq_error *err);
/* The input channel of weight element i (row-major index). */
int64_t calq__balance_channel(const calq__balance_geom *geo, int64_t i);
/* max |w| per input channel into wmax[geo->n_ch] (non-finite values ignored). */
void calq__balance_weight_absmax(const calq__balance_geom *geo, const calq_tensor *w, float *wmax);
/* The axis of a rank-`rank` input 0 holding the input channels (kind k), or -1 when it has none. */
int calq__balance_act_axis(const calq_qkind *k, int rank);

/* Rewrites layer node ni of g to read X·(1/s) and W·s (s: n factors, n = the layer's input
 * channels, each finite and > 0): a new Mul node "<layer>.dmq" ("<layer>.dmq_calq<k>" when a
 * node of g has that name; an internal rewrite: src_index -1) of input 0 and the constant
 * "<layer>.dmq.scale" = 1/s in float32, shaped to broadcast on the channel axis ([C, 1, ...] for
 * NCHW layers, [C] for matrix products), output "<layer>.dmq.output0"; and a new weight constant
 * "<weight>.dmq" = w[i] * s[channel(i)] (float32, one multiply per element). The graph is
 * toposorted again, so node indices change. *mul_out: the value index of the Mul's output (may
 * be NULL). */
calq_status calq__pass_balance(calq_graph *g, int ni, const float *s, int64_t n, int *mul_out, calq_error *err);

#endif
