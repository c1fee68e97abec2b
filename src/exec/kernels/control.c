/* Control flow: If, Loop and Scan (opset 9+) run their subgraphs (CALQ_ATTR_GRAPH attributes,
 * imported by the frontend) through plans of their own, built for the shapes of each call.
 *
 * A subgraph's inputs are its formal inputs (none for If; iteration number, condition and
 * carried values for Loop; state and scan slices for Scan) followed by the outer-scope values
 * it reads, which the node lists after its own inputs (calq_node.n_formal). Every input is a
 * data input (the whole body runs to learn the output shapes), so these steps run at run time
 * (or are folded when everything is known): `infer` runs the body and keeps the results in
 * c->state, `run` hands them over. Subgraph plans use the reference kernels.
 *
 * Tensors inside a subgraph are not observed and its layers are not quantized: calibration sees
 * the node as one opaque operator. */
#include <stdlib.h>
#include <string.h>

#include "exec/plan.h"

/* At most this many iterations per Loop run (see loop_infer), and at most this many body runs of
 * the Loops and Scans nested in one run of the outermost Loop or Scan, itself included: each level
 * within its own limit, a Loop of 2^20 iterations around another multiplied them (2^40 runs of the
 * inner body, days). */
#define CALQ__LOOP_MAX_ITERATIONS ((int64_t)1 << 20)
/* What a Loop without a trip count (ended by its condition only) may accumulate: its scan outputs
 * and carried values together, 64 MiB (docs/operators.md). Without it a body whose condition
 * never turns false grew its stacks to half of the machine's memory before failing. */
#define CALQ__LOOP_WHILE_MAX_BYTES ((size_t)64 << 20)

/* What one tensor (a body's arena, a stack) may take: the session's limit, at most half of the
 * machine's memory. */
static size_t max_bytes(const calq_op_ctx *c)
{
    size_t m = calq__tensor_max_bytes();
    return c->max_bytes && c->max_bytes < m ? c->max_bytes : m;
}

/* What the limit is, for messages. */
static const char *max_bytes_what(const calq_op_ctx *c)
{
    return c->max_bytes && c->max_bytes < calq__tensor_max_bytes() ? "for one run (the session's max_arena_bytes)"
                                                                   : "for one tensor (half of this machine's memory)";
}

/* Results of one call, kept from infer to run. */
typedef struct body_result {
    int n;
    calq_tensor *t; /* n tensors, data owned */
} body_result;

static void result_free(void *state)
{
    body_result *r = state;
    if (!r) return;
    for (int i = 0; i < r->n; i++) calq_tensor_free_data(&r->t[i]);
    free(r->t);
    free(r);
}

static const calq_graph *graph_attr(calq_op_ctx *c, const char *name)
{
    const calq_attr *a = calq__attr(c->node, name);
    return a && a->type == CALQ_ATTR_GRAPH ? a->g : NULL;
}

static calq_status need_data(calq_op_ctx *c)
{
    for (int i = 0; i < c->n_in; i++)
        if (c->in[i] && !c->in[i]->data && calq_tensor_numel(c->in[i]) != 0)
            return calq__op_fail(c, CALQ_ERR_UNSUPPORTED,
                                 "input %d is computed at run time but the node was planned before it (a node with "
                                 "more than 32 inputs whose later ones are not constant)",
                                 i);
    return CALQ_OK;
}

/* A reusable plan for a subgraph: rebuilt only when the input shapes change (Loop iterations
 * usually keep them). budget: the body runs left to the outermost Loop or Scan (NULL: an If
 * outside any); consume: each run of this body takes one (Loop, Scan; an If's branch runs within
 * the iteration that runs the If). */
typedef struct body_runner {
    const calq_graph *g;
    calq_plan *plan;
    int64_t *budget;
    bool consume;
} body_runner;

/* The budget for a Loop or Scan node's body: its enclosing one's, or *own when it is outermost. */
static body_runner counted_runner(calq_op_ctx *c, const calq_graph *g, int64_t *own)
{
    *own = CALQ__LOOP_MAX_ITERATIONS;
    return (body_runner){g, NULL, c->body_budget ? c->body_budget : own, true};
}

/* Runs g on ins (g->n_inputs tensors); out[i] gets a copy of output i (caller frees). */
static calq_status body_run(calq_op_ctx *c, body_runner *br, const calq_tensor *ins, calq_tensor *out)
{
    const calq_graph *g = br->g;
    if (br->consume && --*br->budget < 0)
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED,
                             "the Loop and Scan bodies nested in one run of the outermost Loop or Scan have run %lld "
                             "times, calq's limit (nested loops multiply their iterations)",
                             (long long)CALQ__LOOP_MAX_ITERATIONS);
    if (br->plan && !calq__plan_matches(br->plan, ins, g->n_inputs)) {
        calq__plan_free(br->plan);
        br->plan = NULL;
    }
    if (!br->plan) {
        /* bounded as one tensor is: a body doubling a carried value asks for ever larger arenas */
        calq_plan_opts o = {.max_arena_bytes = max_bytes(c), .body_budget = br->budget};
        CALQ_TRY(calq__plan_build_opts(g, ins, g->n_inputs, &o, &br->plan, c->err));
    }
    calq_plan *p = br->plan;
    for (int i = 0; i < g->n_inputs; i++) p->vals[g->inputs[i]].t.data = ins[i].data;
    calq_status st = CALQ_OK;
    for (int s = 0; s < p->n_steps && st == CALQ_OK; s++) {
        st = calq__plan_run_step(p, s, c->err);
        calq__plan_release_after(p, s);
    }
    int done = 0;
    for (; st == CALQ_OK && done < g->n_outputs; done++)
        st = calq__tensor_clone(&out[done], &p->vals[g->outputs[done]].t, c->err);
    for (int i = 0; i < g->n_inputs; i++) p->vals[g->inputs[i]].t.data = NULL;
    if (st != CALQ_OK) {
        for (int i = 0; i < done; i++) calq_tensor_free_data(&out[i]);
        return calq__prefix(c->err, "%s node '%s', in its subgraph", c->node->op_type, c->node->name);
    }
    return CALQ_OK;
}

static body_result *result_new(calq_op_ctx *c, int n)
{
    body_result *r = calloc(1, sizeof *r);
    if (r) r->t = calloc((size_t)n + 1, sizeof *r->t);
    if (!r || !r->t) {
        free(r);
        calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory");
        return NULL;
    }
    r->n = n;
    return r;
}

/* infer's common end: output shapes from the results, which stay in c->state for run. */
static calq_status publish(calq_op_ctx *c, body_result *r)
{
    for (int i = 0; i < c->n_out && i < r->n; i++)
        if (c->out[i]) calq__set_shape(c->out[i], r->t[i].dtype, r->t[i].dims, r->t[i].ndim);
    result_free(c->state); /* a stale result, if infer runs twice */
    c->state = r;
    return CALQ_OK;
}

/* run: copy the results infer computed (or compute them now). */
static calq_status hand_over(calq_op_ctx *c, calq_status (*infer)(calq_op_ctx *c))
{
    if (!c->state) {
        /* run without infer (not the executor's order): compute, but keep the planned shapes. */
        calq_tensor keep[16];
        int n = c->n_out < 16 ? c->n_out : 16;
        for (int i = 0; i < n; i++)
            if (c->out[i]) keep[i] = *c->out[i];
        calq_status s = infer(c);
        for (int i = 0; i < n; i++)
            if (c->out[i]) *c->out[i] = keep[i];
        CALQ_TRY(s);
    }
    body_result *r = c->state;
    for (int i = 0; i < c->n_out && i < r->n; i++) {
        calq_tensor *o = c->out[i];
        if (!o) continue;
        if (!calq__shape_equal(o->dims, o->ndim, r->t[i].dims, r->t[i].ndim) || o->dtype != r->t[i].dtype) {
            result_free(r);
            c->state = NULL;
            return calq__op_fail(c, CALQ_ERR_SHAPE, "output %d changed shape between planning and the run", i);
        }
        memcpy(o->data, r->t[i].data, calq__tensor_nbytes(o));
    }
    result_free(r);
    c->state = NULL;
    return CALQ_OK;
}

/* ---- If ------------------------------------------------------------------------------------- */

static calq_status if_infer(calq_op_ctx *c)
{
    CALQ_TRY(need_data(c));
    const calq_tensor *cond = c->in[0];
    if (calq_tensor_numel(cond) != 1)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "the condition must hold one value, not %lld",
                             (long long)calq_tensor_numel(cond));
    /* ONNX defines the condition as bool: a float one was taken as "not zero", as no runtime does */
    if (cond->dtype != CALQ_DTYPE_BOOL)
        return calq__op_fail(c, CALQ_ERR_DATA,
                             "the condition is %s, but ONNX defines it as bool; compute it with a comparison or a "
                             "Cast to bool",
                             calq_dtype_name(cond->dtype));
    /* Both branches, not only the one this run takes: a malformed else branch passed while the
     * condition stayed true */
    static const char *const branch[2] = {"else_branch", "then_branch"};
    for (int b = 0; b < 2; b++) {
        const calq_graph *bg = graph_attr(c, branch[b]);
        if (!bg) return calq__op_fail(c, CALQ_ERR_BAD_FORMAT, "the %s attribute is missing", branch[b]);
        if (bg->n_outputs != c->n_out)
            return calq__op_fail(c, CALQ_ERR_SHAPE,
                                 "%s has %d outputs, but the node has %d; both branches must give one value per "
                                 "output of the node",
                                 branch[b], bg->n_outputs, c->n_out);
    }
    /* the types of both, where the model declares them: they must agree */
    const calq_graph *else_g = graph_attr(c, branch[0]), *then_g = graph_attr(c, branch[1]);
    for (int i = 0; i < c->n_out; i++) {
        calq_dtype te = else_g->values[else_g->outputs[i]].dtype, tt = then_g->values[then_g->outputs[i]].dtype;
        if (te != CALQ_DTYPE_UNDEFINED && tt != CALQ_DTYPE_UNDEFINED && te != tt)
            return calq__op_fail(c, CALQ_ERR_DATA,
                                 "output %d is %s in then_branch but %s in else_branch; both branches must give "
                                 "each output the same type",
                                 i, calq_dtype_name(tt), calq_dtype_name(te));
    }
    bool take = calq__tensor_get_f64(cond, 0) != 0.0;
    body_runner br = {graph_attr(c, branch[take]), NULL, c->body_budget, false};
    if (br.g->n_inputs != c->n_in - 1)
        return calq__op_fail(c, CALQ_ERR_INTERNAL, "the branch reads %d outer values, the node passes %d",
                             br.g->n_inputs, c->n_in - 1);
    calq_tensor *ins = calloc((size_t)c->n_in + 1, sizeof *ins);
    body_result *r = ins ? result_new(c, c->n_out) : NULL;
    if (!r) {
        free(ins);
        return ins ? c->err->status : calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory");
    }
    for (int i = 1; i < c->n_in; i++) ins[i - 1] = *c->in[i];
    calq_status s = body_run(c, &br, ins, r->t);
    calq__plan_free(br.plan);
    free(ins);
    if (s != CALQ_OK) {
        free(r->t);
        free(r);
        return s;
    }
    /* what the branch gave against what the other one declares */
    const calq_graph *other = take ? else_g : then_g;
    for (int i = 0; i < c->n_out; i++) {
        calq_dtype declared = other->values[other->outputs[i]].dtype;
        if (declared != CALQ_DTYPE_UNDEFINED && declared != r->t[i].dtype) {
            s = calq__op_fail(c, CALQ_ERR_DATA,
                              "output %d is %s from %s but %s declares it %s; both branches must give each output "
                              "the same type",
                              i, calq_dtype_name(r->t[i].dtype), branch[take], branch[!take],
                              calq_dtype_name(declared));
            result_free(r);
            return s;
        }
    }
    return publish(c, r);
}

static calq_status if_run(calq_op_ctx *c)
{
    return hand_over(c, if_infer);
}

/* ---- Loop ----------------------------------------------------------------------------------- */

/* Appends slice (one iteration's scan output) to the growing stack acc ([n, ...slice]), at most rows
 * of them (the iteration limit; exact when known). The stack never grows above max bytes
 * (calq__tensor_max_bytes(), or CALQ__LOOP_WHILE_MAX_BYTES without a trip count; `what` says
 * which): a trip count of 2^20 with a 1 MB slice filled the machine's memory (24 GB in a minute,
 * issue 14). With a known count the stack is refused at the first iteration. */
static calq_status stack_append(calq_op_ctx *c, calq_tensor *acc, int64_t *cap, const calq_tensor *slice, int k,
                                int64_t rows, bool rows_known, size_t max, const char *what)
{
    size_t sb = calq__tensor_nbytes(slice);
    if (rows_known && sb && (uint64_t)rows > max / sb)
        return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY,
                             "scan output %d would stack %lld iterations of %zu bytes, above calq's limit of %zu "
                             "bytes %s",
                             k, (long long)rows, sb, max, what);
    if (sb && (uint64_t)acc->dims[0] + 1 > max / sb)
        return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY,
                             "scan output %d would stack more than %lld iterations of %zu bytes, above calq's limit "
                             "of %zu bytes %s",
                             k, (long long)acc->dims[0], sb, max, what);
    if (acc->ndim == 0 && acc->dims[0] == 0 && !acc->data) {
        if (slice->ndim + 1 > CALQ_MAX_DIMS)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "scan output %d would have too many dims", k);
        acc->dtype = slice->dtype;
        acc->ndim = slice->ndim + 1;
        acc->dims[0] = 0;
        memcpy(acc->dims + 1, slice->dims, sizeof(int64_t) * (size_t)slice->ndim);
    } else if (!calq__shape_equal(acc->dims + 1, acc->ndim - 1, slice->dims, slice->ndim) ||
               acc->dtype != slice->dtype) {
        return calq__op_fail(c, CALQ_ERR_SHAPE, "scan output %d changes shape between iterations", k);
    }
    if (acc->dims[0] + 1 > *cap) {
        int64_t nc = *cap ? *cap * 2 : 16;
        if (nc > rows) nc = rows;
        if (sb && (uint64_t)nc > max / sb) nc = (int64_t)(max / sb);
        void *d = realloc(acc->data, sb * (size_t)nc + 1);
        if (!d) return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory for scan output %d", k);
        acc->data = d;
        *cap = nc;
    }
    if (sb) memcpy((char *)acc->data + sb * (size_t)acc->dims[0], slice->data, sb);
    acc->dims[0]++;
    return CALQ_OK;
}

/* Inputs (M, cond, v_initial...), body (iter, cond, v...) -> (cond, v..., scan...). */
static calq_status loop_infer(calq_op_ctx *c)
{
    CALQ_TRY(need_data(c));
    int64_t own_budget;
    body_runner br = counted_runner(c, graph_attr(c, "body"), &own_budget);
    if (!br.g) return calq__op_fail(c, CALQ_ERR_BAD_FORMAT, "the body attribute is missing");
    const calq_graph *g = br.g;
    int n_carried = c->node->n_formal - 2, n_captured = c->n_in - c->node->n_formal;
    int n_scan = g->n_outputs - 1 - n_carried;
    if (n_carried < 0 || g->n_formal_inputs != 2 + n_carried || n_scan < 0 || c->n_out != n_carried + n_scan)
        return calq__op_fail(c, CALQ_ERR_SHAPE,
                             "the body takes %d inputs and gives %d outputs; with %d loop-carried values the node "
                             "needs %d inputs and %d outputs",
                             g->n_formal_inputs, g->n_outputs, n_carried, 2 + n_carried, c->n_out);
    /* the carried values' initial inputs are required (an empty name, or one that is a NUL byte,
     * leaves one out: the fuzzer's find) */
    for (int k = 0; k < n_carried; k++)
        if (!c->in[2 + k])
            return calq__op_fail(c, CALQ_ERR_BAD_PARAMETERS, "loop-carried value %d has no initial input", k);
    const calq_tensor *M = c->in[0], *cond0 = c->in[1];
    /* bool, as If's (ONNX); a float32 condition ran as "not zero" */
    if (cond0 && cond0->dtype != CALQ_DTYPE_BOOL)
        return calq__op_fail(c, CALQ_ERR_DATA,
                             "the condition (input 1) is %s, but ONNX defines it as bool; compute it with a "
                             "comparison or a Cast to bool",
                             calq_dtype_name(cond0->dtype));
    int64_t max_trip = M && calq_tensor_numel(M) == 1 ? calq__tensor_get_i64(M, 0) : -1;
    /* A negative trip count runs no iteration, as in onnxruntime (iter < M); it was taken for
     * "no trip count" and ran until the condition ended the loop, or calq's limit. */
    if (max_trip < 0 && M && calq_tensor_numel(M) == 1) max_trip = 0;
    /* torch.jit exports a `while` loop as M = INT64_MAX ("no limit") with a condition: it runs as a
     * loop without a trip count (that limit and memory bound apply) instead of being refused as a
     * trip count above calq's limit; a real count that large (2^50) still is, up front */
    bool has_cond = cond0 && calq_tensor_numel(cond0) == 1;
    if (max_trip == INT64_MAX && has_cond) max_trip = -1;
    bool cond = has_cond ? calq__tensor_get_f64(cond0, 0) != 0.0 : true;
    body_result *r = result_new(c, n_carried + n_scan);
    calq_tensor *ins = calloc((size_t)g->n_inputs + 1, sizeof *ins),
                *outs = calloc((size_t)g->n_outputs + 1, sizeof *outs);
    int64_t *caps = calloc((size_t)n_scan + 1, sizeof *caps);
    if (!r || !ins || !outs || !caps) {
        if (r) result_free(r);
        free(ins);
        free(outs);
        free(caps);
        return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory");
    }
    int64_t iter = 0;
    uint8_t cond_v = cond;
    calq_tensor it_t = {.dtype = CALQ_DTYPE_INT64, .ndim = 0, .data = &iter};
    calq_tensor cond_t = {.dtype = CALQ_DTYPE_BOOL, .ndim = 0, .data = &cond_v};
    calq_status s = CALQ_OK;
    /* The carried values live in r->t[0 .. n_carried) (copies, replaced every iteration). */
    for (int k = 0; k < n_carried && s == CALQ_OK; k++) s = calq__tensor_clone(&r->t[k], c->in[2 + k], c->err);
    for (int k = 0; k < n_scan; k++) r->t[n_carried + k].dims[0] = 0;
    /* Bounded time (issue 14): a trip count of 2^50, or a loop without one whose body never ends
     * it, would run for hours. Real models loop over sequence steps or detections, far fewer. */
    if (max_trip > CALQ__LOOP_MAX_ITERATIONS) {
        result_free(r);
        free(ins);
        free(outs);
        free(caps);
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED,
                             "the trip count is %lld, above calq's limit of %lld iterations per Loop run",
                             (long long)max_trip, (long long)CALQ__LOOP_MAX_ITERATIONS);
    }
    const int64_t limit = max_trip >= 0 ? max_trip : CALQ__LOOP_MAX_ITERATIONS;
    size_t max = max_bytes(c);
    const char *what = max_bytes_what(c);
    if (max_trip < 0 && max > CALQ__LOOP_WHILE_MAX_BYTES) {
        max = CALQ__LOOP_WHILE_MAX_BYTES;
        what = "for what a Loop without a trip count may accumulate (docs/operators.md)";
    }
    while (s == CALQ_OK && cond && iter < limit) {
        ins[0] = it_t;
        ins[1] = cond_t;
        for (int k = 0; k < n_carried; k++) ins[2 + k] = r->t[k];
        for (int k = 0; k < n_captured; k++) ins[2 + n_carried + k] = *c->in[c->node->n_formal + k];
        if ((s = body_run(c, &br, ins, outs)) != CALQ_OK) break;
        if (outs[0].dtype != CALQ_DTYPE_BOOL)
            s = calq__op_fail(c, CALQ_ERR_DATA,
                              "the body's condition (output 0) is %s, but ONNX defines it as bool; compute it with a "
                              "comparison or a Cast to bool",
                              calq_dtype_name(outs[0].dtype));
        cond = calq_tensor_numel(&outs[0]) == 1 && calq__tensor_get_f64(&outs[0], 0) != 0.0;
        cond_v = cond;
        /* ONNX keeps a carried value's type across iterations (its shape may change): a body turning a
         * float32 into a float64 fed the next iteration a type its plan was not built for */
        for (int k = 0; k < n_carried && s == CALQ_OK; k++)
            if (outs[1 + k].dtype != r->t[k].dtype)
                s = calq__op_fail(c, CALQ_ERR_DATA,
                                  "loop-carried value %d ('%s') enters iteration %lld as %s but the body returns it "
                                  "as %s; a Loop body must keep each carried value's type (cast it back inside the "
                                  "body)",
                                  k, g->values[g->inputs[2 + k]].name, (long long)iter, calq_dtype_name(r->t[k].dtype),
                                  calq_dtype_name(outs[1 + k].dtype));
        if (s != CALQ_OK) {
            for (int k = 0; k < g->n_outputs; k++) calq_tensor_free_data(&outs[k]);
            break;
        }
        calq_tensor_free_data(&outs[0]);
        for (int k = 0; k < n_carried; k++) {
            calq_tensor_free_data(&r->t[k]);
            r->t[k] = outs[1 + k];
        }
        for (int k = 0; k < n_scan && s == CALQ_OK; k++)
            s = stack_append(c, &r->t[n_carried + k], &caps[k], &outs[1 + n_carried + k], k, limit, max_trip >= 0, max,
                             what);
        for (int k = 0; k < n_scan; k++) calq_tensor_free_data(&outs[1 + n_carried + k]);
        iter++;
        /* Carried values that grow every iteration (a Concat onto itself) are bounded with the
         * stacks: without a trip count the loop fails within seconds, not at half of RAM; with one
         * (40 doublings of a 768-byte value) at the stacks' limit, not when the machine runs out. */
        if (s == CALQ_OK) {
            size_t held = 0;
            for (int k = 0; k < n_carried + n_scan; k++) held += calq__tensor_nbytes(&r->t[k]);
            if (held > max)
                s = calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY,
                                  "after %lld iterations its carried values and scan outputs hold %zu bytes, above "
                                  "calq's limit of %zu bytes %s%s",
                                  (long long)iter, held, max, what,
                                  max_trip < 0 ? "; give the Loop a trip count (input M)" : "");
        }
    }
    if (s == CALQ_OK && max_trip < 0 && cond)
        s = calq__op_fail(c, CALQ_ERR_DATA,
                          "the loop has no trip count (or INT64_MAX) and its condition is still true after %lld "
                          "iterations (calq's limit per Loop run)",
                          (long long)iter);
    calq__plan_free(br.plan);
    free(ins);
    free(outs);
    free(caps);
    if (s != CALQ_OK) {
        result_free(r);
        return s;
    }
    /* Zero iterations: scan outputs are empty [0] tensors. */
    for (int k = 0; k < n_scan; k++)
        if (r->t[n_carried + k].ndim == 0) {
            r->t[n_carried + k].ndim = 1;
            r->t[n_carried + k].dtype = g->values[g->outputs[1 + n_carried + k]].dtype != CALQ_DTYPE_UNDEFINED
                                            ? g->values[g->outputs[1 + n_carried + k]].dtype
                                            : CALQ_DTYPE_FLOAT32;
        }
    return publish(c, r);
}

static calq_status loop_run(calq_op_ctx *c)
{
    return hand_over(c, loop_infer);
}

/* ---- Scan (opset 9 and later) --------------------------------------------------------------- */

/* Inputs (state..., scan inputs...), body (state..., slices...) -> (state..., scan outputs...).
 * Each scan input is cut along its axis (direction 1: from the end); each scan output stacks
 * the body's per-iteration values along its axis (direction 1: in reverse). */
static calq_status scan_infer(calq_op_ctx *c)
{
    CALQ_TRY(need_data(c));
    if (c->opset < 9)
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED,
                             "Scan before opset 9 (batched, with sequence_lens) is not supported");
    int64_t own_budget;
    body_runner br = counted_runner(c, graph_attr(c, "body"), &own_budget);
    if (!br.g) return calq__op_fail(c, CALQ_ERR_BAD_FORMAT, "the body attribute is missing");
    const calq_graph *g = br.g;
    const calq_attr *nsi = calq__attr(c->node, "num_scan_inputs");
    if (!nsi || nsi->type != CALQ_ATTR_INT) return calq__op_fail(c, CALQ_ERR_SHAPE, "num_scan_inputs is missing");
    if (nsi->i < 1 || nsi->i > c->node->n_formal)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "num_scan_inputs is %lld; the node has %d inputs", (long long)nsi->i,
                             c->node->n_formal);
    int n_formal = c->node->n_formal, n_in_scan = (int)nsi->i, n_state = n_formal - n_in_scan;
    int n_out_scan = g->n_outputs - n_state, n_captured = c->n_in - n_formal;
    if (n_in_scan < 1 || n_state < 0 || n_out_scan < 0 || g->n_formal_inputs != n_formal || c->n_out != g->n_outputs)
        return calq__op_fail(c, CALQ_ERR_SHAPE,
                             "the body's %d inputs / %d outputs do not fit %d state and %d scan inputs",
                             g->n_formal_inputs, g->n_outputs, n_state, n_in_scan);
    const int64_t *in_axes = NULL, *in_dirs = NULL, *out_axes = NULL, *out_dirs = NULL;
    int nia = calq__attr_ints(c->node, "scan_input_axes", &in_axes),
        nid = calq__attr_ints(c->node, "scan_input_directions", &in_dirs);
    int noa = calq__attr_ints(c->node, "scan_output_axes", &out_axes),
        nod = calq__attr_ints(c->node, "scan_output_directions", &out_dirs);
    /* 0 forward, 1 reverse: any other value was taken for reverse */
    const char *dir_names[2] = {"scan_input_directions", "scan_output_directions"};
    const int64_t *dirs[2] = {in_dirs, out_dirs};
    int n_dirs[2] = {nid, nod};
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < n_dirs[d]; k++)
            if (dirs[d][k] != 0 && dirs[d][k] != 1)
                return calq__op_fail(c, CALQ_ERR_SHAPE, "%s[%d] is %lld; a direction is 0 (forward) or 1 (reverse)",
                                     dir_names[d], k, (long long)dirs[d][k]);
    int64_t T = -1;
    int ax_in[CALQ_MAX_DIMS * 4];
    if (n_in_scan > (int)(sizeof ax_in / sizeof *ax_in))
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "%d scan inputs (calq takes up to %d)", n_in_scan,
                             (int)(sizeof ax_in / sizeof *ax_in));
    for (int k = 0; k < n_in_scan; k++) {
        const calq_tensor *x = c->in[n_state + k];
        int a = calq__norm_axis(k < nia ? in_axes[k] : 0, x->ndim);
        if (a < 0)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "scan input %d has no axis %lld", k,
                                 (long long)(k < nia ? in_axes[k] : 0));
        ax_in[k] = a;
        if (T >= 0 && x->dims[a] != T)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "scan inputs have %lld and %lld steps", (long long)T,
                                 (long long)x->dims[a]);
        T = x->dims[a];
    }
    body_result *r = result_new(c, g->n_outputs);
    calq_tensor *ins = calloc((size_t)g->n_inputs + 1, sizeof *ins),
                *outs = calloc((size_t)g->n_outputs + 1, sizeof *outs);
    calq_tensor *slices = calloc((size_t)n_in_scan + 1, sizeof *slices);
    calq_tensor *stacks = calloc((size_t)n_out_scan + 1, sizeof *stacks);
    int64_t *caps = calloc((size_t)n_out_scan + 1, sizeof *caps);
    calq_status s = r && ins && outs && slices && stacks && caps
                        ? CALQ_OK
                        : calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory");
    for (int k = 0; k < n_state && s == CALQ_OK; k++) s = calq__tensor_clone(&r->t[k], c->in[k], c->err);
    for (int k = 0; k < n_in_scan && s == CALQ_OK; k++) {
        const calq_tensor *x = c->in[n_state + k];
        slices[k].dtype = x->dtype;
        slices[k].ndim = x->ndim - 1;
        for (int d = 0, j = 0; d < x->ndim; d++)
            if (d != ax_in[k]) slices[k].dims[j++] = x->dims[d];
        s = calq__tensor_alloc(&slices[k], c->err);
    }
    for (int64_t t = 0; s == CALQ_OK && t < T; t++) {
        for (int k = 0; k < n_in_scan; k++) {
            /* slice t (or T-1-t) of input k along its axis */
            const calq_tensor *x = c->in[n_state + k];
            int64_t step = k < nid && in_dirs[k] ? T - 1 - t : t;
            int a = ax_in[k];
            size_t es = calq_dtype_size(x->dtype);
            int64_t outer = calq__shape_numel(x->dims, a), inner = calq__shape_numel(x->dims + a + 1, x->ndim - a - 1);
            for (int64_t o = 0; o < outer; o++)
                memcpy((char *)slices[k].data + (size_t)(o * inner) * es,
                       (const char *)x->data + (size_t)((o * T + step) * inner) * es, (size_t)inner * es);
        }
        for (int k = 0; k < n_state; k++) ins[k] = r->t[k];
        for (int k = 0; k < n_in_scan; k++) ins[n_state + k] = slices[k];
        for (int k = 0; k < n_captured; k++) ins[n_formal + k] = *c->in[n_formal + k];
        if ((s = body_run(c, &br, ins, outs)) != CALQ_OK) break;
        /* as a Loop's carried values: a state keeps its type from step to step */
        for (int k = 0; k < n_state && s == CALQ_OK; k++)
            if (outs[k].dtype != r->t[k].dtype)
                s = calq__op_fail(c, CALQ_ERR_DATA,
                                  "state %d ('%s') enters step %lld as %s but the body returns it as %s; a Scan body "
                                  "must keep each state's type (cast it back inside the body)",
                                  k, g->values[g->inputs[k]].name, (long long)t, calq_dtype_name(r->t[k].dtype),
                                  calq_dtype_name(outs[k].dtype));
        if (s != CALQ_OK) {
            for (int k = 0; k < g->n_outputs; k++) calq_tensor_free_data(&outs[k]);
            break;
        }
        for (int k = 0; k < n_state; k++) {
            calq_tensor_free_data(&r->t[k]);
            r->t[k] = outs[k];
        }
        for (int k = 0; k < n_out_scan && s == CALQ_OK; k++)
            s = stack_append(c, &stacks[k], &caps[k], &outs[n_state + k], k, T, true, max_bytes(c), max_bytes_what(c));
        for (int k = 0; k < n_out_scan; k++) calq_tensor_free_data(&outs[n_state + k]);
    }
    /* stacks are [T, ...]: reverse and move the step axis where the attributes put it. */
    for (int k = 0; k < n_out_scan && s == CALQ_OK; k++) {
        calq_tensor *st = &stacks[k], *y = &r->t[n_state + k];
        int rank = st->ndim;
        int a = calq__norm_axis(k < noa ? out_axes[k] : 0, rank);
        if (a < 0) {
            s = calq__op_fail(c, CALQ_ERR_SHAPE, "scan output %d has no axis %lld", k,
                              (long long)(k < noa ? out_axes[k] : 0));
            break;
        }
        bool rev = k < nod && out_dirs[k];
        y->dtype = st->dtype;
        y->ndim = rank;
        for (int d = 0, j = 1; d < rank; d++) y->dims[d] = d == a ? st->dims[0] : st->dims[j++];
        if ((s = calq__tensor_alloc(y, c->err)) != CALQ_OK) break;
        size_t es = calq_dtype_size(st->dtype);
        int64_t n = st->dims[0], slice = n ? calq_tensor_numel(st) / n : 0;
        int64_t outer = calq__shape_numel(y->dims, a), inner = calq__shape_numel(y->dims + a + 1, rank - a - 1);
        for (int64_t t = 0; t < n; t++) {
            int64_t dst_t = rev ? n - 1 - t : t;
            for (int64_t o = 0; o < outer; o++)
                memcpy((char *)y->data + (size_t)((o * n + dst_t) * inner) * es,
                       (const char *)st->data + (size_t)(t * slice + o * inner) * es, (size_t)inner * es);
        }
    }
    calq__plan_free(br.plan);
    for (int k = 0; k < n_in_scan && slices; k++) calq_tensor_free_data(&slices[k]);
    for (int k = 0; k < n_out_scan && stacks; k++) calq_tensor_free_data(&stacks[k]);
    free(slices);
    free(stacks);
    free(caps);
    free(ins);
    free(outs);
    if (s != CALQ_OK) {
        if (r) result_free(r);
        return s;
    }
    return publish(c, r);
}

static calq_status scan_run(calq_op_ctx *c)
{
    return hand_over(c, scan_infer);
}

#define ALL_DATA 0xffffffffu
#define MANY     -1

const calq_op_def calq__ops_control[] = {
    {"If", 1, MANY, 1, MANY, ALL_DATA, false, if_infer, if_run, NULL, NULL, result_free, 0},
    /* Loop's M and cond are both optional (either may be ""): min_inputs 0, and loop_infer checks
     * that the node lists both positions (n_formal >= 2) */
    {"Loop", 0, MANY, 0, MANY, ALL_DATA, false, loop_infer, loop_run, NULL, NULL, result_free, 0},
    {"Scan", 0, MANY, 1, MANY, ALL_DATA, false, scan_infer, scan_run, NULL, NULL, result_free, 0},
    {0},
};
