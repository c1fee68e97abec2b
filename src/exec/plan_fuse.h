/* Between plan_fast.c and plan_fuse.c: the written-out transformer layers the fast planner runs as
 * one step (exec/kernels/fused_transformer.h). */
#ifndef CALQ_EXEC_PLAN_FUSE_H
#define CALQ_EXEC_PLAN_FUSE_H

#include "exec/plan.h"

/* What the fast planner knows about the steps before its pass (plan_fast.c's fast_ctx). */
typedef struct calq_fuse_in {
    calq_plan *p;
    calq_plan_step *old; /* the steps before the pass */
    int n_old;
    const int *uses;           /* per value: reading slots in old steps + graph output appearances */
    const int *first_consumer; /* per value: the first old step reading it */
    const int *consumer;       /* per value: the last old step reading it */
    const bool *kept;          /* per graph value: observed or a graph output */
    bool *absorbed;            /* per old step: its work is done by a fused step */
} calq_fuse_in;

/* Value v (or the graph value it copies) is observed or a graph output. */
bool calq__fuse_kept(const calq_fuse_in *f, int v);
/* Value v's data when it is a float32 constant known at plan time, else NULL. */
const calq_tensor *calq__fuse_const(const calq_fuse_in *f, int v);
/* *st = a step of def d at old step s's node reading ins[0..n_in), writing value y (bound; its
 * const_inputs set). Fails only when out of memory. */
calq_status calq__fuse_new_step(calq_fuse_in *f, int s, const calq_op_def *d, const int *ins, int n_in, int y,
                                calq_plan_step *st, calq_error *err);

/* When old step s starts a written-out LayerNormalization, GELU or attention (plan_fuse.c lists
 * the forms) whose intermediate tensors are read by nothing else, not kept and plain, builds the
 * fused step into *out (prepared; it runs where step s ran), marks the other steps it replaces in
 * f->absorbed and sets *done. inexact: the LayerNorm and the attention, whose sums round
 * differently from the layers', may be fused (not while an observer needs the unfused bits); the
 * GELU is bit-identical and fuses either way. *done false: nothing changed. */
calq_status calq__plan_fuse_transformer(calq_fuse_in *f, int s, bool inexact, calq_plan_step *out, bool *done,
                                        calq_error *err);

/* When old step s is Mul(x, s) with one factor per channel of x (a squeeze-and-excitation's scale;
 * batch 1) read only by a Conv with constant weights that are small next to x, and inexact fusion
 * is allowed: builds into *out the step computing the weights times the factors
 * (exec/kernels/conv_scale.h), which runs where the Mul ran, and rewires the Conv (old step
 * *conv_step) to read x and those weights; sets *done. plan_fuse_scale.c has the rules. */
calq_status calq__plan_fuse_channel_scale(calq_fuse_in *f, int s, bool inexact, calq_plan_step *out, int *conv_step,
                                          bool *done, calq_error *err);

#endif
