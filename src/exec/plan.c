#include "exec/plan.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base/tensor.h"
#include "exec/layout.h"

#define ARENA_ALIGN 64

static size_t align_up(size_t n)
{
    return (n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
}

static bool value_known_data(const calq_plan_value *pv)
{
    return pv->kind == CALQ_PV_CONST || pv->kind == CALQ_PV_FOLDED;
}

void calq__plan_ctx(const calq_plan *p, calq_plan_step *st, calq_op_ctx *c, calq_error *err)
{
    const calq_node *n = &p->g->nodes[st->node];
    memset(c, 0, sizeof *c);
    c->node = n;
    c->opset = n->opset;
    c->n_in = st->n_in;
    c->in = st->in;
    c->n_out = st->n_out;
    c->out = st->out;
    c->state = st->state;
    c->err = err;
    c->const_inputs = st->const_inputs;
    c->in_layout = st->in_layout;
    c->out_layout = st->out_layout;
    c->post = st->post;
    c->n_post = st->n_post;
    c->body_budget = p->body_budget;
    c->max_bytes = p->max_bytes;
}

void calq__plan_bind(calq_plan *p, calq_plan_step *st)
{
    for (int k = 0; k < st->n_in; k++)
        st->in[k] = st->in_v[k] < 0 ? NULL : st->views ? &st->views[k] : &p->vals[st->in_v[k]].t;
    for (int k = 0; k < st->n_out; k++)
        st->out[k] = st->out_v[k] < 0 ? NULL : st->views ? &st->views[st->n_in + k] : &p->vals[st->out_v[k]].t;
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

void calq__plan_step_free(calq_plan_step *st)
{
    if (st->state && st->def->release) st->def->release(st->state);
    free(st->in_v);
    free(st->out_v);
    free(st->in);
    free(st->out);
    free(st->views);
    free(st->in_layout);
    free(st->out_layout);
    free(st->post);
    free(st->post_v);
    memset(st, 0, sizeof *st);
}

void calq__plan_free(calq_plan *p)
{
    if (!p) return;
    for (int s = 0; s < p->n_steps; s++) calq__plan_step_free(&p->steps[s]);
    if (p->vals)
        for (int v = 0; v < p->n_vals; v++)
            if (p->vals[v].kind == CALQ_PV_FOLDED || p->vals[v].kind == CALQ_PV_DYNAMIC) free(p->vals[v].t.data);
    free(p->vals);
    free(p->steps);
    calq__bulk_free(&p->arena_mem);
    free(p);
}

bool calq__plan_matches(const calq_plan *p, const calq_tensor *inputs, int n_inputs)
{
    if (n_inputs != p->g->n_inputs) return false;
    for (int i = 0; i < n_inputs; i++)
        if (!calq__shape_equal(p->in_dims[i], p->in_ndim[i], inputs[i].dims, inputs[i].ndim)) return false;
    return true;
}

int calq__plan_add_value(calq_plan *p, int origin, calq_layout layout)
{
    if (p->n_vals >= p->cap_vals) return -1;
    int v = p->n_vals++;
    calq_plan_value *pv = &p->vals[v];
    memset(pv, 0, sizeof *pv);
    calq__set_shape(&pv->t, p->vals[origin].t.dtype, p->vals[origin].t.dims, p->vals[origin].t.ndim);
    pv->kind = CALQ_PV_ARENA;
    pv->layout = layout;
    pv->nbytes = calq__layout_nbytes(&pv->t, layout);
    pv->first = pv->last = -1;
    pv->origin = p->vals[origin].origin >= 0 ? p->vals[origin].origin : origin;
    pv->copy = pv->alias = -1;
    return v;
}

int calq__plan_plain(const calq_plan *p, int v)
{
    const calq_plan_value *pv = &p->vals[v];
    return pv->layout != CALQ_LAYOUT_PLAIN && pv->copy >= 0 ? pv->copy : v;
}

/* The arena slot of a value written in place over another. */
static int alias_root(const calq_plan *p, int v)
{
    while (p->vals[v].alias >= 0) v = p->vals[v].alias;
    return v;
}

/* Order of placement: size descending, then first use, then value index (what a stable sort of
 * the values by size and first use gives). */
typedef struct place_key {
    size_t nbytes;
    int first, v;
} place_key;

static int cmp_place_key(const void *a, const void *b)
{
    const place_key *x = a, *y = b;
    if (x->nbytes != y->nbytes) return x->nbytes > y->nbytes ? -1 : 1;
    if (x->first != y->first) return x->first < y->first ? -1 : 1;
    return (x->v > y->v) - (x->v < y->v);
}

/* Greedy offset assignment, biggest tensors first, each at the lowest offset where it does
 * not overlap a placed tensor whose lifetime overlaps its own. A value written in place over
 * another shares its slot, which then lives as long as both. Placed values are kept in buckets
 * of first use, each with the latest last use in it, so that a value looks only at the buckets
 * whose values may still be live: every value scanning every placed one (and an insertion
 * sort) took minutes for a 200,000-layer prototxt of 13 MB. */
static calq_status assign_offsets(calq_plan *p, size_t max_bytes, calq_error *err)
{
    int n = 0;
    const int n_steps = p->n_steps + 2; /* lifetimes run from -1 to n_steps */
    int bucket_w = 1;
    while ((int64_t)bucket_w * bucket_w < n_steps) bucket_w++;
    const int n_buckets = n_steps / bucket_w + 1;
    place_key *keys = malloc(sizeof *keys * ((size_t)p->n_vals + 1));
    int *cand = malloc(sizeof(int) * ((size_t)p->n_vals + 1));
    int *items = malloc(sizeof(int) * ((size_t)p->n_vals + 1));
    int *start = calloc((size_t)n_buckets + 1, sizeof *start), *fill = calloc((size_t)n_buckets + 1, sizeof *fill);
    int *max_last = malloc(sizeof(int) * ((size_t)n_buckets + 1));
    if (!keys || !cand || !items || !start || !fill || !max_last) {
        free(keys);
        free(cand);
        free(items);
        free(start);
        free(fill);
        free(max_last);
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory planning buffers");
    }
    for (int v = 0; v < p->n_vals; v++) {
        calq_plan_value *pv = &p->vals[v];
        if (pv->kind != CALQ_PV_ARENA || pv->alias < 0) continue;
        calq_plan_value *root = &p->vals[alias_root(p, v)];
        if (pv->first < root->first) root->first = pv->first;
        if (pv->last > root->last) root->last = pv->last;
    }
    for (int v = 0; v < p->n_vals; v++)
        if (p->vals[v].kind == CALQ_PV_ARENA && p->vals[v].alias < 0)
            keys[n++] = (place_key){p->vals[v].nbytes, p->vals[v].first, v};
    qsort(keys, (size_t)n, sizeof *keys, cmp_place_key);
    /* bucket b holds the placed values first used in steps [b * bucket_w - 1, (b + 1) * bucket_w - 1) */
#define BUCKET(first) (((first) + 1 < 0 ? 0 : (first) + 1) / bucket_w)
    for (int i = 0; i < n; i++) start[BUCKET(keys[i].first) + 1]++;
    for (int b = 0; b < n_buckets; b++) {
        start[b + 1] += start[b];
        max_last[b] = INT_MIN;
    }
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        calq_plan_value *pv = &p->vals[keys[i].v];
        size_t size = align_up(pv->nbytes ? pv->nbytes : 1), off = 0;
        /* the placed values whose lifetimes overlap this one's */
        int n_cand = 0, last_bucket = BUCKET(pv->last);
        for (int b = 0; b <= last_bucket && b < n_buckets; b++) {
            if (max_last[b] < pv->first) continue;
            for (int k = start[b]; k < start[b] + fill[b]; k++) {
                const calq_plan_value *q = &p->vals[items[k]];
                if (!(q->last < pv->first || pv->last < q->first)) cand[n_cand++] = items[k];
            }
        }
        /* the lowest offset clear of all of them (the order they are visited in does not matter) */
        bool moved = true;
        while (moved) {
            moved = false;
            for (int k = 0; k < n_cand; k++) {
                const calq_plan_value *q = &p->vals[cand[k]];
                size_t qsize = align_up(q->nbytes ? q->nbytes : 1);
                if (off < q->offset + qsize && q->offset < off + size) {
                    off = q->offset + qsize;
                    moved = true;
                }
            }
        }
        pv->offset = off;
        int b = BUCKET(pv->first);
        items[start[b] + fill[b]++] = keys[i].v;
        if (pv->last > max_last[b]) max_last[b] = pv->last;
        if (off + size > total) total = off + size;
    }
#undef BUCKET
    free(keys);
    free(cand);
    free(items);
    free(start);
    free(fill);
    free(max_last);
    for (int v = 0; v < p->n_vals; v++)
        if (p->vals[v].kind == CALQ_PV_ARENA) p->sum_bytes += p->vals[v].nbytes;
    p->arena_bytes = total;
    if (max_bytes && total > max_bytes)
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL,
                          "the activations need %zu bytes, above the session's limit of %zu bytes (max_arena_bytes)",
                          total, max_bytes);
    /* on huge pages when large (base/bulk_mem.h): a fresh session's first run wrote every 4 KB
     * page of it at ~9 us a fault */
    if (total && !calq__bulk_alloc_any(total, &p->arena_mem))
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory: the activations need %zu bytes", total);
    p->arena = p->arena_mem.base;
    for (int v = 0; v < p->n_vals; v++)
        if (p->vals[v].kind == CALQ_PV_ARENA) p->vals[v].t.data = (char *)p->arena + p->vals[alias_root(p, v)].offset;
    return CALQ_OK;
}

/* The step of node ni with its own copies of the node's value lists. */
static calq_status step_init(calq_plan_step *st, const calq_graph *g, int ni, const calq_op_def *d, calq_error *err)
{
    const calq_node *n = &g->nodes[ni];
    memset(st, 0, sizeof *st);
    st->node = ni;
    st->def = d;
    st->n_in = n->n_inputs;
    st->n_out = n->n_outputs;
    st->in_v = malloc(sizeof(int) * (size_t)(st->n_in + 1));
    st->out_v = malloc(sizeof(int) * (size_t)(st->n_out + 1));
    st->in = calloc((size_t)st->n_in + 1, sizeof *st->in);
    st->out = calloc((size_t)st->n_out + 1, sizeof *st->out);
    if (!st->in_v || !st->out_v || !st->in || !st->out)
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    memcpy(st->in_v, n->inputs, sizeof(int) * (size_t)st->n_in);
    memcpy(st->out_v, n->outputs, sizeof(int) * (size_t)st->n_out);
    return CALQ_OK;
}

/* Steps of the plan in node order; constant sub-graphs are folded on the way. */
/* max_bytes (calq_session_opts.max_arena_bytes; 0: none) bounds the constants folded here as it
 * bounds the arena: a 200-byte model folding a OneHot of depth 2^31 allocated 7.6 GB while
 * planning, past a service's limit. */
static calq_status build_steps(calq_plan *p, size_t max_bytes, calq_error *err)
{
    size_t folded_bytes = 0;
    const calq_graph *g = p->g;
    calq_status st = CALQ_OK;
    for (int ni = 0; ni < g->n_nodes && st == CALQ_OK; ni++) {
        const calq_node *n = &g->nodes[ni];
        const calq_op_def *d = calq__op_of(n);
        if (!d)
            return calq__fail(err, CALQ_ERR_UNSUPPORTED, n->name, "no kernel for %s (node '%s')", n->op_type, n->name);
        CALQ_TRY(check_arity(n, d, err));
        calq_plan_step *step = &p->steps[p->n_steps];
        if ((st = step_init(step, g, ni, d, err)) != CALQ_OK) {
            calq__plan_step_free(step);
            return st;
        }
        calq__plan_bind(p, step);
        bool all_known = true, shapes_known = true, needs_runtime = false;
        for (int k = 0; k < n->n_inputs; k++) {
            int v = n->inputs[k];
            if (v < 0) continue;
            calq_plan_value *pv = &p->vals[v];
            if (pv->kind == CALQ_PV_DYNAMIC) shapes_known = false;
            if (!value_known_data(pv)) {
                all_known = false;
                if (k < 32 && (d->data_inputs & (1u << k))) needs_runtime = true;
            } else if (k < 32) {
                step->const_inputs |= 1u << k;
            }
        }
        bool fold = all_known || (d->shape_only && shapes_known);
        if (!shapes_known || (needs_runtime && !fold)) {
            step->dynamic = true;
            for (int k = 0; k < n->n_outputs; k++)
                if (n->outputs[k] >= 0) p->vals[n->outputs[k]].kind = CALQ_PV_DYNAMIC;
        } else {
            calq_op_ctx c;
            calq__plan_ctx(p, step, &c, err);
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
                for (int k = 0; k < n->n_outputs && st == CALQ_OK; k++) {
                    if (n->outputs[k] < 0) continue;
                    folded_bytes += p->vals[n->outputs[k]].nbytes;
                    if (max_bytes && folded_bytes > max_bytes)
                        st = calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, n->name,
                                        "%s node '%s': the constants folded while planning would take %zu bytes, "
                                        "above the session's limit of %zu bytes (max_arena_bytes)",
                                        n->op_type, n->name, folded_bytes, max_bytes);
                    else
                        st = calq__tensor_alloc(&p->vals[n->outputs[k]].t, err);
                }
                if (st == CALQ_OK)
                    st = d->run(&c);
                else if (c.state && d->release)
                    d->release(c.state); /* state infer left for run (see calq__plan_run_step) */
                calq__plan_step_free(step);
                continue;
            }
        }
        p->n_steps++;
    }
    if (st != CALQ_OK && p->n_steps < p->cap_steps) calq__plan_step_free(&p->steps[p->n_steps]);
    return st;
}

/* Producing and last consuming step of every value, from the final step list. Post-op
 * operands (a residual sum's other tensor) are read by the step that absorbed them. */
static void lifetimes(calq_plan *p)
{
    for (int v = 0; v < p->n_vals; v++) p->vals[v].first = p->vals[v].last = -1;
    for (int s = 0; s < p->n_steps; s++) {
        const calq_plan_step *st = &p->steps[s];
        for (int k = 0; k < st->n_out; k++)
            if (st->out_v[k] >= 0) p->vals[st->out_v[k]].first = s;
        for (int k = 0; k < st->n_in; k++)
            if (st->in_v[k] >= 0) p->vals[st->in_v[k]].last = s;
        for (int k = 0; k < st->n_post; k++)
            if (st->post_v[k] >= 0) p->vals[st->post_v[k]].last = s;
    }
    for (int i = 0; i < p->g->n_outputs; i++) p->vals[calq__plan_plain(p, p->g->outputs[i])].last = p->n_steps;
    for (int v = 0; v < p->n_vals; v++)
        if (p->vals[v].kind == CALQ_PV_ARENA && p->vals[v].last < p->vals[v].first)
            p->vals[v].last = p->vals[v].first; /* produced but unused: still needs a place to be written */
}

/* A residual sum fused into a convolution adds the output buffer's old contents: when nothing
 * reads the other operand after that step, the output is written over it in place instead of
 * copying it first. */
static void alias_sums(calq_plan *p)
{
    for (int s = 0; s < p->n_steps; s++) {
        const calq_plan_step *st = &p->steps[s];
        for (int i = 0; i < st->n_post; i++) {
            const int v = st->post_v[i], y = st->out_v[0];
            if (st->post[i].kind != CALQ_POST_SUM || v < 0 || y < 0 || p->vals[y].alias >= 0) continue;
            const calq_plan_value *pv = &p->vals[v];
            bool reads = false;
            for (int k = 0; k < st->n_in; k++) reads = reads || st->in_v[k] == v;
            if (!reads && pv->kind == CALQ_PV_ARENA && pv->last == s && pv->layout == p->vals[y].layout &&
                pv->nbytes == p->vals[y].nbytes)
                p->vals[y].alias = v;
        }
    }
}

/* A Reshape, Flatten, Squeeze, Unsqueeze or Identity (CALQ_OP_VIEW) between two arena tensors of
 * the same layout and size writes nothing: its output is placed on its input's bytes, which
 * then live as long as either (assign_offsets), and the step is skipped. Transformers run
 * hundreds of them (Swin-T: ~600, 3 % of its time as copies). Not when a value of the group is
 * written over in place by a fused residual sum (alias_sums, which runs first and only knew the
 * operand's own lifetime), nor for a value computed at run time. */
static void alias_views(calq_plan *p)
{
    bool *over = calloc((size_t)p->n_vals + 1, sizeof *over), *is_view = calloc((size_t)p->n_vals + 1, sizeof *is_view);
    if (!over || !is_view) { /* only an optimisation: the copies run */
        free(over);
        free(is_view);
        return;
    }
    for (int v = 0; v < p->n_vals; v++)
        if (p->vals[v].alias >= 0) over[p->vals[v].alias] = true;
    for (int s = 0; s < p->n_steps; s++) {
        calq_plan_step *st = &p->steps[s];
        if (st->dynamic || st->fast || !(st->def->flags & CALQ_OP_VIEW) || st->n_out != 1 || st->n_in < 1) continue;
        const int x = st->in_v[0], y = st->out_v[0];
        bool ok = x >= 0 && y >= 0 && x != y;
        for (int k = 1; ok && k < st->n_in; k++) ok = st->in_v[k] < 0 || (st->def->data_inputs & (1u << k));
        if (!ok) continue;
        const calq_plan_value *xv = &p->vals[x], *yv = &p->vals[y];
        if (xv->kind != CALQ_PV_ARENA || yv->kind != CALQ_PV_ARENA || yv->alias >= 0 || over[y] ||
            xv->layout != yv->layout || xv->nbytes != yv->nbytes || xv->t.dtype != yv->t.dtype)
            continue;
        /* the group x belongs to: views back to their root, none written over */
        int r = x;
        while (!over[r] && is_view[r]) r = p->vals[r].alias;
        if (over[r] || p->vals[r].alias >= 0) continue;
        p->vals[y].alias = x;
        is_view[y] = true;
        st->view = true;
    }
    free(over);
    free(is_view);
}

calq_status calq__plan_build_opts(const calq_graph *g, const calq_tensor *inputs, int n_inputs, const calq_plan_opts *o,
                                  calq_plan **out, calq_error *err)
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
    p->body_budget = o->body_budget; /* before any step is folded: a folded Loop takes it too */
    p->max_bytes = o->max_arena_bytes;
    /* Room for one converted copy per value, and a conversion step per copy. */
    p->cap_vals = 2 * g->n_values + 1;
    p->cap_steps = g->n_nodes + g->n_values + 1;
    p->vals = calloc((size_t)p->cap_vals, sizeof *p->vals);
    p->steps = calloc((size_t)p->cap_steps, sizeof *p->steps);
    if (!p->vals || !p->steps) {
        calq__plan_free(p);
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    }
    p->n_vals = g->n_values;
    for (int v = 0; v < g->n_values; v++) {
        const calq_value *val = &g->values[v];
        calq_plan_value *pv = &p->vals[v];
        pv->first = pv->last = -1;
        pv->origin = pv->copy = pv->alias = -1;
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
    calq_status st = build_steps(p, o->max_arena_bytes, err);
    if (st == CALQ_OK && o->use_fast) st = calq__plan_fast(p, o, err);
    if (st == CALQ_OK) {
        lifetimes(p);
        alias_sums(p);
        alias_views(p);
        st = assign_offsets(p, o->max_arena_bytes, err);
    }
    if (st != CALQ_OK) {
        calq__plan_free(p);
        return st;
    }
    for (int s = 0; s < p->n_steps; s++) calq__plan_bind(p, &p->steps[s]);
    *out = p;
    return CALQ_OK;
}

calq_status calq__plan_build(const calq_graph *g, const calq_tensor *inputs, int n_inputs, bool use_fast,
                             size_t max_arena_bytes, calq_plan **out, calq_error *err)
{
    calq_plan_opts o = {.use_fast = use_fast, .max_arena_bytes = max_arena_bytes};
    return calq__plan_build_opts(g, inputs, n_inputs, &o, out, err);
}

calq_status calq__plan_run_step(calq_plan *p, int s, calq_error *err)
{
    calq_plan_step *step = &p->steps[s];
    calq_op_ctx c;
    if (step->views) /* graph inputs get new data every run */
        for (int k = 0; k < step->n_in + step->n_out; k++) {
            int v = k < step->n_in ? step->in_v[k] : step->out_v[k - step->n_in];
            if (v >= 0) step->views[k].data = p->vals[v].t.data;
        }
    if (step->view) return CALQ_OK; /* its output is its input's bytes */
    calq__plan_ctx(p, step, &c, err);
    if (!step->dynamic) {
        CALQ_TRY(step->fast ? step->def->run_fast(&c) : step->def->run(&c));
        if (step->zero_pads) calq__layout_zero_pads(&p->vals[step->out_v[0]].t, p->vals[step->out_v[0]].layout);
        return CALQ_OK;
    }
    for (int k = 0; k < step->n_out; k++)
        if (step->out[k]) {
            free(step->out[k]->data);
            memset(step->out[k], 0, sizeof *step->out[k]);
        }
    CALQ_TRY(step->def->infer(&c));
    /* infer may leave state for run (an If that ran its branch to learn its output shapes);
     * release it if run is not reached. */
    for (int k = 0; k < step->n_out; k++) {
        /* the session's limit holds here too: a ConstantOfShape of a shape computed from the data
         * asked for half of the machine's memory */
        calq_status st = !step->out[k] ? CALQ_OK
                         : p->max_bytes && calq__tensor_nbytes(step->out[k]) > p->max_bytes
                             ? calq__op_fail(&c, CALQ_ERR_OUT_OF_MEMORY,
                                             "output %d would take %zu bytes, above the limit of %zu bytes (the "
                                             "session's max_arena_bytes, at most half of this machine's memory)",
                                             k, calq__tensor_nbytes(step->out[k]), p->max_bytes)
                             : calq__tensor_alloc(step->out[k], err);
        if (st != CALQ_OK) {
            if (c.state && step->def->release) step->def->release(c.state);
            return st;
        }
    }
    return step->def->run(&c);
}

void calq__plan_release_after(calq_plan *p, int s)
{
    const calq_plan_step *st = &p->steps[s];
    for (int k = 0; k < st->n_in; k++) {
        int v = st->in_v[k];
        if (v < 0) continue;
        calq_plan_value *pv = &p->vals[v];
        if (pv->kind == CALQ_PV_DYNAMIC && pv->last == s) {
            free(pv->t.data);
            pv->t.data = NULL;
        }
    }
}
