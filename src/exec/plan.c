#include "exec/plan.h"

#include <stdlib.h>
#include <string.h>

#include "base/tensor.h"

#define ARENA_ALIGN 64

static size_t align_up(size_t n)
{
    return (n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
}

static bool value_known_data(const calq_plan_value *pv)
{
    return pv->kind == CALQ_PV_CONST || pv->kind == CALQ_PV_FOLDED;
}

static void ctx_init(calq_op_ctx *c, const calq_graph *g, const calq_plan_step *st, calq_error *err)
{
    const calq_node *n = &g->nodes[st->node];
    memset(c, 0, sizeof *c);
    c->node = n;
    c->opset = n->opset;
    c->n_in = n->n_inputs;
    c->in = st->in;
    c->n_out = n->n_outputs;
    c->out = st->out;
    c->state = st->state;
    c->err = err;
    c->const_inputs = st->const_inputs;
}

static calq_status check_arity(const calq_node *n, const calq_op_def *d, calq_error *err)
{
    int nin = n->n_inputs;
    while (nin > 0 && n->inputs[nin - 1] < 0) nin--; /* trailing omitted optionals */
    if (nin < d->min_inputs || (d->max_inputs >= 0 && n->n_inputs > d->max_inputs))
        return calq__fail(err, CALQ_ERR_BAD_FORMAT, n->name, "%s node '%s' has %d inputs; %s takes %d to %d",
                          n->op_type, n->name, n->n_inputs, n->op_type, d->min_inputs, d->max_inputs);
    for (int k = 0; k < d->min_inputs && k < n->n_inputs; k++)
        if (n->inputs[k] < 0)
            return calq__fail(err, CALQ_ERR_BAD_FORMAT, n->name, "%s node '%s': input %d is required but empty",
                              n->op_type, n->name, k);
    for (int k = 0; k < d->min_outputs && k < n->n_outputs; k++)
        if (n->outputs[k] < 0)
            return calq__fail(err, CALQ_ERR_BAD_FORMAT, n->name, "%s node '%s': output %d is required but unnamed",
                              n->op_type, n->name, k);
    if (n->n_outputs < d->min_outputs || (d->max_outputs >= 0 && n->n_outputs > d->max_outputs))
        return calq__fail(err, CALQ_ERR_BAD_FORMAT, n->name, "%s node '%s' has %d outputs; %s gives %d to %d",
                          n->op_type, n->name, n->n_outputs, n->op_type, d->min_outputs, d->max_outputs);
    return CALQ_OK;
}

void calq__plan_free(calq_plan *p)
{
    if (!p) return;
    const calq_graph *g = p->g;
    for (int s = 0; s < p->n_steps; s++)
        if (p->steps[s].state && p->steps[s].def->release) p->steps[s].def->release(p->steps[s].state);
    if (p->vals)
        for (int v = 0; v < g->n_values; v++)
            if (p->vals[v].kind == CALQ_PV_FOLDED || p->vals[v].kind == CALQ_PV_DYNAMIC) free(p->vals[v].t.data);
    free(p->vals);
    free(p->steps);
    free(p->ptrs);
    free(p->arena);
    free(p);
}

bool calq__plan_matches(const calq_plan *p, const calq_tensor *inputs, int n_inputs)
{
    if (n_inputs != p->g->n_inputs) return false;
    for (int i = 0; i < n_inputs; i++)
        if (!calq__shape_equal(p->in_dims[i], p->in_ndim[i], inputs[i].dims, inputs[i].ndim)) return false;
    return true;
}

/* Greedy offset assignment, biggest tensors first, each at the lowest offset where it does
 * not overlap a placed tensor whose lifetime overlaps its own. */
static calq_status assign_offsets(calq_plan *p, size_t max_bytes, calq_error *err)
{
    const calq_graph *g = p->g;
    int n = 0;
    int *order = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    int *placed = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    if (!order || !placed) {
        free(order);
        free(placed);
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory planning buffers");
    }
    for (int v = 0; v < g->n_values; v++)
        if (p->vals[v].kind == CALQ_PV_ARENA) order[n++] = v;
    /* insertion sort by size descending, then by first use (stable and deterministic) */
    for (int i = 1; i < n; i++) {
        int x = order[i], j = i - 1;
        while (j >= 0 &&
               (p->vals[order[j]].nbytes < p->vals[x].nbytes ||
                (p->vals[order[j]].nbytes == p->vals[x].nbytes && p->vals[order[j]].first > p->vals[x].first))) {
            order[j + 1] = order[j];
            j--;
        }
        order[j + 1] = x;
    }
    size_t total = 0;
    int n_placed = 0;
    for (int i = 0; i < n; i++) {
        calq_plan_value *pv = &p->vals[order[i]];
        size_t size = align_up(pv->nbytes ? pv->nbytes : 1), off = 0;
        bool moved = true;
        while (moved) {
            moved = false;
            for (int k = 0; k < n_placed; k++) {
                const calq_plan_value *q = &p->vals[placed[k]];
                bool live = !(q->last < pv->first || pv->last < q->first);
                size_t qsize = align_up(q->nbytes ? q->nbytes : 1);
                if (live && off < q->offset + qsize && q->offset < off + size) {
                    off = q->offset + qsize;
                    moved = true;
                }
            }
        }
        pv->offset = off;
        placed[n_placed++] = order[i];
        if (off + size > total) total = off + size;
        p->sum_bytes += pv->nbytes;
    }
    free(order);
    free(placed);
    p->arena_bytes = total;
    if (max_bytes && total > max_bytes)
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL,
                          "the activations need %zu bytes, above the session's limit of %zu bytes (max_arena_bytes)",
                          total, max_bytes);
    p->arena = total ? aligned_alloc(ARENA_ALIGN, total) : NULL;
    if (total && !p->arena)
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory: the activations need %zu bytes", total);
    for (int v = 0; v < g->n_values; v++)
        if (p->vals[v].kind == CALQ_PV_ARENA) p->vals[v].t.data = (char *)p->arena + p->vals[v].offset;
    return CALQ_OK;
}

calq_status calq__plan_build(const calq_graph *g, const calq_tensor *inputs, int n_inputs, bool use_fast,
                             size_t max_arena_bytes, calq_plan **out, calq_error *err)
{
    *out = NULL;
    if (n_inputs != g->n_inputs || n_inputs > 64)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL,
                          n_inputs > 64 ? "the model has %d inputs; calq plans models with up to 64 inputs"
                                        : "the model has %d inputs, %d were given",
                          g->n_inputs, n_inputs);
    calq_plan *p = calloc(1, sizeof *p);
    if (!p) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    p->g = g;
    p->vals = calloc((size_t)g->n_values + 1, sizeof *p->vals);
    p->steps = calloc((size_t)g->n_nodes + 1, sizeof *p->steps);
    size_t n_ptrs = 0;
    for (int i = 0; i < g->n_nodes; i++) n_ptrs += (size_t)(g->nodes[i].n_inputs + g->nodes[i].n_outputs);
    p->ptrs = calloc(n_ptrs + 1, sizeof(calq_tensor *));
    if (!p->vals || !p->steps || !p->ptrs) {
        calq__plan_free(p);
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    }
    calq_status st = CALQ_OK;
    for (int v = 0; v < g->n_values; v++) {
        const calq_value *val = &g->values[v];
        calq_plan_value *pv = &p->vals[v];
        pv->first = -1;
        pv->last = -1;
        if (val->constant) {
            pv->kind = CALQ_PV_CONST;
            pv->t = *val->constant;
        }
    }
    for (int i = 0; i < n_inputs; i++) {
        calq_plan_value *pv = &p->vals[g->inputs[i]];
        pv->kind = CALQ_PV_INPUT;
        calq__set_shape(&pv->t, inputs[i].dtype, inputs[i].dims, inputs[i].ndim);
        pv->t.data = NULL;
        p->in_ndim[i] = inputs[i].ndim;
        memcpy(p->in_dims[i], inputs[i].dims, sizeof inputs[i].dims);
    }

    size_t at = 0;
    for (int ni = 0; ni < g->n_nodes && st == CALQ_OK; ni++) {
        const calq_node *n = &g->nodes[ni];
        const calq_op_def *d = calq__op_of(n);
        if (!d) {
            st = calq__fail(err, CALQ_ERR_UNSUPPORTED, n->name, "no kernel for %s (node '%s')", n->op_type, n->name);
            break;
        }
        if ((st = check_arity(n, d, err)) != CALQ_OK) break;
        calq_plan_step step = {0};
        step.node = ni;
        step.def = d;
        step.in = p->ptrs + at;
        at += (size_t)n->n_inputs;
        step.out = p->ptrs + at;
        at += (size_t)n->n_outputs;
        bool all_known = true, shapes_known = true, needs_runtime = false;
        for (int k = 0; k < n->n_inputs; k++) {
            int v = n->inputs[k];
            if (v < 0) continue;
            calq_plan_value *pv = &p->vals[v];
            step.in[k] = &pv->t;
            if (pv->kind == CALQ_PV_DYNAMIC) shapes_known = false;
            if (!value_known_data(pv)) {
                all_known = false;
                if (k < 32 && (d->data_inputs & (1u << k))) needs_runtime = true;
            } else if (k < 32) {
                step.const_inputs |= 1u << k;
            }
        }
        for (int k = 0; k < n->n_outputs; k++)
            if (n->outputs[k] >= 0) step.out[k] = &p->vals[n->outputs[k]].t;
        bool fold = all_known || (d->shape_only && shapes_known);
        if (!shapes_known || (needs_runtime && !fold)) {
            step.dynamic = true;
            for (int k = 0; k < n->n_outputs; k++)
                if (n->outputs[k] >= 0) p->vals[n->outputs[k]].kind = CALQ_PV_DYNAMIC;
        } else {
            calq_op_ctx c;
            ctx_init(&c, g, &step, err);
            if ((st = d->infer(&c)) != CALQ_OK) break;
            for (int k = 0; k < n->n_outputs; k++) {
                if (n->outputs[k] < 0) continue;
                calq_plan_value *pv = &p->vals[n->outputs[k]];
                int64_t numel = calq_tensor_numel(&pv->t);
                if (numel < 0 || pv->t.dtype == CALQ_DTYPE_UNDEFINED) {
                    st = calq__fail(err, CALQ_ERR_INTERNAL, n->name, "%s node '%s': output %d has no valid shape",
                                    n->op_type, n->name, k);
                    break;
                }
                /* Bounded so arena offsets cannot wrap: 2^40 bytes is far beyond any real tensor. */
                if ((uint64_t)numel > (UINT64_C(1) << 40) / calq_dtype_size(pv->t.dtype)) {
                    char shape[160];
                    st = calq__fail(err, CALQ_ERR_SHAPE, n->name,
                                    "%s node '%s': output %d would be %s (%lld elements), too large to allocate",
                                    n->op_type, n->name, k,
                                    calq__shape_str(pv->t.dims, pv->t.ndim, shape, sizeof shape), (long long)numel);
                    break;
                }
                pv->nbytes = calq__tensor_nbytes(&pv->t);
                pv->kind = fold ? CALQ_PV_FOLDED : CALQ_PV_ARENA;
            }
            if (st != CALQ_OK) {
                if (c.state && d->release) d->release(c.state);
                break;
            }
            if (fold) {
                /* Constant sub-graph: compute once now with the reference kernel. */
                for (int k = 0; k < n->n_outputs && st == CALQ_OK; k++)
                    if (n->outputs[k] >= 0) st = calq__tensor_alloc(&p->vals[n->outputs[k]].t, err);
                if (st == CALQ_OK)
                    st = d->run(&c);
                else if (c.state && d->release)
                    d->release(c.state); /* state infer left for run (see calq__plan_run_step) */
                continue;
            }
        }
        int s = p->n_steps++;
        for (int k = 0; k < n->n_outputs; k++)
            if (n->outputs[k] >= 0) p->vals[n->outputs[k]].first = s;
        for (int k = 0; k < n->n_inputs; k++)
            if (n->inputs[k] >= 0) p->vals[n->inputs[k]].last = s;
        p->steps[s] = step;
    }
    if (st != CALQ_OK) {
        calq__plan_free(p);
        return st;
    }
    for (int i = 0; i < g->n_outputs; i++) p->vals[g->outputs[i]].last = p->n_steps;
    for (int v = 0; v < g->n_values; v++)
        if (p->vals[v].kind == CALQ_PV_ARENA && p->vals[v].last < p->vals[v].first)
            p->vals[v].last = p->vals[v].first; /* produced but unused: still needs a place to be written */
    if ((st = assign_offsets(p, max_arena_bytes, err)) != CALQ_OK) {
        calq__plan_free(p);
        return st;
    }
    for (int s = 0; s < p->n_steps && use_fast; s++) {
        calq_plan_step *step = &p->steps[s];
        if (step->dynamic || !step->def->prepare || !step->def->run_fast) continue;
        calq_op_ctx c;
        ctx_init(&c, g, step, err);
        if ((st = step->def->prepare(&c)) != CALQ_OK) {
            calq__plan_free(p);
            return st;
        }
        step->state = c.state;
        step->fast = c.state != NULL;
    }
    *out = p;
    return CALQ_OK;
}

calq_status calq__plan_run_step(calq_plan *p, int s, calq_error *err)
{
    calq_plan_step *step = &p->steps[s];
    const calq_node *n = &p->g->nodes[step->node];
    calq_op_ctx c;
    ctx_init(&c, p->g, step, err);
    if (!step->dynamic) return step->fast ? step->def->run_fast(&c) : step->def->run(&c);

    for (int k = 0; k < n->n_outputs; k++)
        if (step->out[k]) {
            free(step->out[k]->data);
            memset(step->out[k], 0, sizeof *step->out[k]);
        }
    CALQ_TRY(step->def->infer(&c));
    /* infer may leave state for run (an If that ran its branch to learn its output shapes);
     * release it if run is not reached. */
    for (int k = 0; k < n->n_outputs; k++)
        if (step->out[k] && calq__tensor_alloc(step->out[k], err) != CALQ_OK) {
            if (c.state && step->def->release) step->def->release(c.state);
            return err ? err->status : CALQ_ERR_OUT_OF_MEMORY;
        }
    return step->def->run(&c);
}

void calq__plan_release_after(calq_plan *p, int s)
{
    const calq_node *n = &p->g->nodes[p->steps[s].node];
    for (int k = 0; k < n->n_inputs; k++) {
        int v = n->inputs[k];
        if (v < 0) continue;
        calq_plan_value *pv = &p->vals[v];
        if (pv->kind == CALQ_PV_DYNAMIC && pv->last == s) {
            free(pv->t.data);
            pv->t.data = NULL;
        }
    }
}
