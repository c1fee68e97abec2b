/* An execution plan: the graph specialised to concrete input shapes. Constant sub-graphs are
 * folded once here; every activation gets an offset in one arena, shared by tensors whose
 * lifetimes do not overlap. Shapes that depend on run-time data (rare in CNNs, common in the
 * ONNX node tests) are inferred at run time instead, with per-tensor allocations.
 *
 * With fast kernels, plan_fast.c then chooses activation layouts (oneDNN's channel-blocked
 * ones between the layers that read them, plain elsewhere, with conversion steps at the
 * boundaries) and folds element-wise layers into the convolution before them (post-ops). */
#ifndef CALQ_EXEC_PLAN_H
#define CALQ_EXEC_PLAN_H

#include "base/bulk_mem.h"
#include "exec/op.h"

typedef enum calq_pv_kind {
    CALQ_PV_NONE = 0, /* not used by the plan (or computed inside a fused step) */
    CALQ_PV_CONST,    /* model constant (data owned by the graph) */
    CALQ_PV_FOLDED,   /* computed at plan time (data owned by the plan) */
    CALQ_PV_INPUT,    /* fed by the user each run (data borrowed during the run) */
    CALQ_PV_ARENA,    /* activation with a planned arena offset */
    CALQ_PV_DYNAMIC   /* shape known only at run time: allocated per run */
} calq_pv_kind;

/* Values 0 .. g->n_values-1 are the graph's; after them come the converted copies the fast
 * planner adds (a value in another layout). */
typedef struct calq_plan_value {
    calq_tensor t; /* dtype, logical shape, data (stored in `layout`) */
    calq_pv_kind kind;
    calq_layout layout;
    size_t offset, nbytes;
    int first, last; /* producing step, last consuming step (n_steps: lives to the end) */
    int origin;      /* a copy: the graph value it holds (its name and observer); -1 otherwise */
    int copy;        /* this value's copy in the other layout (plain <-> blocked), or -1 */
    int alias;       /* written in place over this value's bytes (a fused residual sum), or -1 */
} calq_plan_value;

typedef struct calq_plan_step {
    int node; /* the graph node (attributes, error names); for a conversion, the consumer's */
    const calq_op_def *def;
    void *state;  /* fast-path state from prepare (static steps) */
    bool dynamic; /* infer + allocate at run time */
    bool fast;
    bool zero_pads; /* an element-wise step on blocked data: clear the output's padding after */
    bool view;      /* its output is an alias of its input's bytes (CALQ_OP_VIEW): nothing to run */
    unsigned const_inputs;
    int n_in, n_out;
    int *in_v, *out_v;                   /* value indices (-1: omitted) */
    calq_tensor **in, **out;             /* what the kernel gets: the values' tensors or `views` */
    calq_tensor *views;                  /* physical views of blocked tensors [n_in + n_out], or NULL */
    calq_layout *in_layout, *out_layout; /* [n_in], [n_out] */
    calq_post_op *post;                  /* fused element-wise layers, in order */
    int *post_v;                         /* per post-op: its operand's value (read by this step), or -1 */
    int n_post;
} calq_plan_step;

typedef struct calq_plan {
    const calq_graph *g;
    int n_vals, cap_vals;
    calq_plan_value *vals;
    int n_steps, cap_steps;
    calq_plan_step *steps;
    void *arena;          /* arena_mem.base */
    calq__bulk arena_mem; /* owned */
    size_t arena_bytes, sum_bytes;
    int64_t in_dims[64][CALQ_MAX_DIMS]; /* the input-shape signature it was built for */
    int in_ndim[64];
    int n_fused, n_converts; /* statistics: layers folded into post-ops, conversion steps */
    int64_t *body_budget;    /* a subgraph's plan: calq_op_ctx.body_budget of its nodes (NULL: none) */
    size_t max_bytes;        /* calq_plan_opts.max_arena_bytes: also bounds each tensor computed at run time */
} calq_plan;

/* How to build a plan. */
typedef struct calq_plan_opts {
    bool use_fast;          /* prepare oneDNN kernels where available */
    bool fuse;              /* with use_fast: blocked layouts and post-ops (off: every layer runs as
                               its own step on plain tensors) */
    const bool *keep;       /* per graph value: must be computed and readable in plain layout (an
                               observed tensor); NULL: none besides the graph outputs */
    bool keep_all;          /* every value (an observer on all tensors) */
    calq_layout layout;     /* with fuse: the activation layout; 0: the one oneDNN chooses on this
                               CPU (calq__layout_native); tests force the others */
    size_t max_arena_bytes; /* fail with CALQ_ERR_OUT_OF_MEMORY before allocating an arena above
                               it, or a tensor whose shape is known only at run time (0: no limit) */
    int64_t *body_budget;   /* calq_plan.body_budget (a subgraph's plan; NULL: none) */
} calq_plan_opts;

/* Builds a plan for inputs of the given shapes (inputs[i] is graph input i; only dtype and
 * shape are read). */
calq_status calq__plan_build_opts(const calq_graph *g, const calq_tensor *inputs, int n_inputs, const calq_plan_opts *o,
                                  calq_plan **out, calq_error *err);
/* The same with plain layouts, no post-ops and nothing kept beyond the graph outputs. */
calq_status calq__plan_build(const calq_graph *g, const calq_tensor *inputs, int n_inputs, bool use_fast,
                             size_t max_arena_bytes, calq_plan **out, calq_error *err);
void calq__plan_free(calq_plan *p);
/* True when the plan was built for exactly these input shapes. */
bool calq__plan_matches(const calq_plan *p, const calq_tensor *inputs, int n_inputs);

/* Gives every value of g whose rank is unknown the shape a plan for g's declared input shapes
 * infers (input dims that are unknown taken as dflt_dim); values whose shapes depend on data
 * known only at run time keep theirs (exec/shapes.c). *n_filled counts the values filled. */
calq_status calq__infer_value_shapes(calq_graph *g, int64_t dflt_dim, int *n_filled, calq_error *err);

/* Whether g computes every sample on its own when the inputs marked rebatched[i] take a batch
 * (dim 0) other than the one the model fixes; inputs[i] give the shapes (data unused). Fails
 * naming the node that ties the batch (exec/batch.c). */
calq_status calq__batch_check(const calq_graph *g, const calq_tensor *inputs, int n, const bool *rebatched,
                              calq_error *err);

/* Runs a step's kernel on its current inputs (infers and allocates first for dynamic steps). */
calq_status calq__plan_run_step(calq_plan *p, int s, calq_error *err);
/* Frees dynamic values whose last use was step s. */
void calq__plan_release_after(calq_plan *p, int s);

/* The value holding graph value v in plain layout after the run (v itself or its plain copy). */
int calq__plan_plain(const calq_plan *p, int v);

/* ---- between plan.c and plan_fast.c ---- */

/* Appends a value (a copy of graph value `origin` in `layout`); -1 when full. */
int calq__plan_add_value(calq_plan *p, int origin, calq_layout layout);
/* Runs the fast planner over p's steps (plan_fast.c): layouts, post-ops, prepared kernels. */
calq_status calq__plan_fast(calq_plan *p, const calq_plan_opts *o, calq_error *err);
/* Points the context at step st's tensors. */
void calq__plan_ctx(const calq_plan *p, calq_plan_step *st, calq_op_ctx *c, calq_error *err);
/* Releases what a step owns (its kernel state, its arrays) and zeroes it. */
void calq__plan_step_free(calq_plan_step *st);
/* Sets st->in / st->out from in_v / out_v (views where st->views is set). */
void calq__plan_bind(calq_plan *p, calq_plan_step *st);

#endif
