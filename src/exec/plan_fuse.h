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

/* When old step s starts a written-out LayerNormalization, GELU or attention (plan_fuse.c lists
 * the forms) whose intermediate tensors are read by nothing else, not kept and plain, builds the
 * fused step into *out (prepared; it runs where step s ran), marks the other steps it replaces in
 * f->absorbed and sets *done. inexact: the LayerNorm and the attention, whose sums round
 * differently from the layers', may be fused (not while an observer needs the unfused bits); the
 * GELU is bit-identical and fuses either way. *done false: nothing changed. */
calq_status calq__plan_fuse_transformer(calq_fuse_in *f, int s, bool inexact, calq_plan_step *out, bool *done,
                                        calq_error *err);

#endif
