/* An execution plan: the graph specialised to concrete input shapes. Constant sub-graphs are
 * folded once here; every activation gets an offset in one arena, shared by tensors whose
 * lifetimes do not overlap. Shapes that depend on run-time data (rare in CNNs, common in the
 * ONNX node tests) are inferred at run time instead, with per-tensor allocations. */
#ifndef CALQ_EXEC_PLAN_H
#define CALQ_EXEC_PLAN_H

#include "exec/op.h"

typedef enum calq_pv_kind {
    CALQ_PV_NONE = 0, /* not used by the plan */
    CALQ_PV_CONST,    /* model constant (data owned by the graph) */
    CALQ_PV_FOLDED,   /* computed at plan time (data owned by the plan) */
    CALQ_PV_INPUT,    /* fed by the user each run (data borrowed during the run) */
    CALQ_PV_ARENA,    /* activation with a planned arena offset */
    CALQ_PV_DYNAMIC   /* shape known only at run time: allocated per run */
} calq_pv_kind;

typedef struct calq_plan_value {
    calq_tensor t; /* dtype, shape, data */
    calq_pv_kind kind;
    size_t offset, nbytes;
    int first, last; /* producing step, last consuming step (n_steps: lives to the end) */
} calq_plan_value;

typedef struct calq_plan_step {
    int node;
    const calq_op_def *def;
    void *state;  /* fast-path state from prepare (static steps) */
    bool dynamic; /* infer + allocate at run time */
    bool fast;
    unsigned const_inputs;
    calq_tensor **in; /* pointers into plan values (NULL for omitted) */
    calq_tensor **out;
} calq_plan_step;

typedef struct calq_plan {
    const calq_graph *g;
    calq_plan_value *vals; /* one per graph value */
    int n_steps;
    calq_plan_step *steps;
    void *arena;
    size_t arena_bytes, sum_bytes;
    int64_t in_dims[64][CALQ_MAX_DIMS]; /* the input-shape signature it was built for */
    int in_ndim[64];
    calq_tensor **ptrs; /* backing store for steps' in/out arrays */
} calq_plan;

/* Builds a plan for inputs of the given shapes (inputs[i] is graph input i; only dtype and
 * shape are read). use_fast: prepare oneDNN kernels where available. max_arena_bytes: fail
 * with CALQ_ERR_OUT_OF_MEMORY before allocating an activation arena above it (0: no limit). */
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

#endif
