/* The fast planner: prepares the oneDNN kernels of a plan and, unless the session runs the graph
 * literally (no_fusion), chooses where activations stay in oneDNN's channel-blocked layout and
 * which element-wise layers run as post-ops of the convolution before them.
 *
 * Layouts: a value's layout is decided by its producer. Layers that read blocked data
 * (CALQ_OP_LAYOUTS: convolutions, pooling, ...) get it as it is; element-wise layers
 * (CALQ_OP_ELEMENTWISE) run their kernel (the fast one when they have one) on the physical
 * view when an input is blocked; every other consumer, every graph output and every kept (observed) value gets a plain
 * copy, made by a conversion step right before the first reader that needs it (right after the
 * producer for kept values). A value has at most one copy, so it is converted at most once.
 *
 * Post-ops: a convolution whose output feeds exactly one layer, which is element-wise
 * (exec/post_ops.c), not kept and not a graph output, may absorb that layer, and so on along
 * the chain; the convolution's prepare decides how many it takes. A fused step runs where the
 * last absorbed layer ran (a residual sum's other operand exists by then); the absorbed layers'
 * intermediate tensors are not computed. While some tensor is observed, and for a graph output
 * at the end of a chain, only post-ops whose results are bit-identical to the unfused layers are
 * used (calq_op_ctx.exact_only), so observers see the values they would see without fusion. */
#include <stdlib.h>
#include <string.h>

#include "base/tensor.h"
#include "exec/layout.h"
#include "exec/plan.h"
#include "exec/plan_fuse.h"
#include "exec/post_ops.h"

#define MAX_CHAIN 8

typedef struct fast_ctx {
    calq_plan *p;
    const calq_plan_opts *o;
    calq_error *err;
    calq_layout native;
    bool observing;      /* some tensor besides the graph outputs is kept */
    calq_plan_step *old; /* the steps before this pass */
    int n_old;
    int *uses;                /* per value: reading slots in old steps + graph output appearances */
    int *consumer;            /* per value: the last old step reading it */
    int *first_consumer;      /* per value: the first old step reading it */
    bool *kept;               /* per graph value */
    bool *absorbed;           /* per old step */
    calq_plan_step *deferred; /* per old step: a fused step emitted when that step is reached */
    bool *has_deferred;
    bool *any_blocked_readers; /* per value: every reading step takes another blocked layout */
} fast_ctx;

static calq_status oom(fast_ctx *f)
{
    return calq__fail(f->err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory planning the fast kernels");
}

static calq_status emit(fast_ctx *f, calq_plan_step *st)
{
    calq_plan *p = f->p;
    if (p->n_steps >= p->cap_steps) return calq__fail(f->err, CALQ_ERR_INTERNAL, NULL, "plan step table overflow");
    p->steps[p->n_steps++] = *st;
    memset(st, 0, sizeof *st);
    return CALQ_OK;
}

static calq_status step_layouts(calq_plan_step *st)
{
    st->in_layout = calloc((size_t)st->n_in + 1, sizeof *st->in_layout);
    st->out_layout = calloc((size_t)st->n_out + 1, sizeof *st->out_layout);
    return st->in_layout && st->out_layout ? CALQ_OK : CALQ_ERR_OUT_OF_MEMORY;
}

/* A copy of value v in layout l (created, with the conversion step emitted now or, for data
 * known at plan time, converted right away), or v itself when it is in l already. rank: the
 * logical rank of the copy (a lower-rank constant broadcast per channel becomes [1, C, 1...]);
 * 0 keeps v's. */
static calq_status get_copy(fast_ctx *f, int v, calq_layout l, int rank, int node, int *out)
{
    calq_plan *p = f->p;
    calq_plan_value *pv = &p->vals[v];
    if (pv->layout == l && (!rank || pv->t.ndim == rank)) {
        *out = v;
        return CALQ_OK;
    }
    if (pv->copy >= 0 && p->vals[pv->copy].layout == l && (!rank || p->vals[pv->copy].t.ndim == rank)) {
        *out = pv->copy;
        return CALQ_OK;
    }
    int c = calq__plan_add_value(p, v, l);
    if (c < 0) return calq__fail(f->err, CALQ_ERR_INTERNAL, NULL, "plan value table overflow");
    calq_plan_value *cv = &p->vals[c];
    pv = &p->vals[v];
    calq_tensor view = pv->t;
    if (rank && rank != pv->t.ndim) {
        int lift = rank - pv->t.ndim;
        for (int d = rank - 1; d >= 0; d--) view.dims[d] = d >= lift ? pv->t.dims[d - lift] : 1;
        view.ndim = rank;
        calq__set_shape(&cv->t, pv->t.dtype, view.dims, rank);
        cv->nbytes = calq__layout_nbytes(&cv->t, l);
    }
    if (pv->copy < 0) pv->copy = c;
    if (cv->copy < 0) cv->copy = v;
    calq_plan_step st = {0};
    st.node = node;
    st.def = &calq__op_layout_convert;
    st.n_in = st.n_out = 1;
    st.in_v = malloc(sizeof(int));
    st.out_v = malloc(sizeof(int));
    st.in = calloc(1, sizeof *st.in);
    st.out = calloc(1, sizeof *st.out);
    st.views = calloc(2, sizeof *st.views);
    if (!st.in_v || !st.out_v || !st.in || !st.out || !st.views || step_layouts(&st) != CALQ_OK) {
        calq__plan_step_free(&st);
        return oom(f);
    }
    st.in_v[0] = v;
    st.out_v[0] = c;
    st.in_layout[0] = pv->layout;
    st.out_layout[0] = l;
    st.views[0] = view;
    st.views[1] = cv->t;
    calq__plan_bind(p, &st);
    calq_op_ctx ctx;
    calq__plan_ctx(p, &st, &ctx, f->err);
    calq_status s = CALQ_OK;
    if (pv->kind == CALQ_PV_CONST || pv->kind == CALQ_PV_FOLDED) {
        /* Known data (a per-channel constant): convert once, now. */
        cv->kind = CALQ_PV_FOLDED;
        cv->t.data = calloc(1, cv->nbytes ? cv->nbytes : 1); /* owner: the plan */
        if (!cv->t.data) s = oom(f);
        st.views[0].data = pv->t.data;
        st.views[1].data = cv->t.data;
        if (s == CALQ_OK) s = st.def->run(&ctx);
        calq__plan_step_free(&st);
        *out = c;
        return s;
    }
    s = st.def->prepare(&ctx);
    st.state = ctx.state;
    st.fast = ctx.state != NULL;
    if (s == CALQ_OK) s = emit(f, &st);
    if (s != CALQ_OK) calq__plan_step_free(&st);
    p->n_converts++;
    *out = c;
    return s;
}

static bool kept(const fast_ctx *f, int v)
{
    int o = f->p->vals[v].origin;
    return f->kept[o >= 0 ? o : v];
}

/* Every blocked input of st replaced by its plain copy. */
static calq_status plain_inputs(fast_ctx *f, calq_plan_step *st)
{
    for (int k = 0; k < st->n_in; k++) {
        int v = st->in_v[k];
        if (v >= 0 && f->p->vals[v].layout != CALQ_LAYOUT_PLAIN) CALQ_TRY(get_copy(f, v, 0, 0, st->node, &st->in_v[k]));
    }
    return CALQ_OK;
}

/* After a step is emitted: kept blocked outputs get their plain copy right away. */
static calq_status copy_kept_outputs(fast_ctx *f, const int *outs, int n, int node)
{
    for (int k = 0; k < n; k++) {
        int v = outs[k], c;
        if (v >= 0 && f->p->vals[v].layout != CALQ_LAYOUT_PLAIN && kept(f, v)) CALQ_TRY(get_copy(f, v, 0, 0, node, &c));
    }
    return CALQ_OK;
}

static calq_status emit_with_copies(fast_ctx *f, calq_plan_step *st)
{
    int outs[16], n = st->n_out < 16 ? st->n_out : 16, node = st->node;
    memcpy(outs, st->out_v, sizeof(int) * (size_t)n);
    CALQ_TRY(emit(f, st));
    return copy_kept_outputs(f, outs, n, node);
}

/* An element-wise step with a blocked input runs on physical views, when every tensor is
 * float32, the output is blockable and every plain input either does not vary along the channel
 * axis (then its view broadcasts over the blocks) or can be converted. Returns false (and leaves
 * st alone) when it does not apply. */
static calq_status try_elementwise(fast_ctx *f, calq_plan_step *st, bool *done)
{
    calq_plan *p = f->p;
    *done = false;
    if (!(st->def->flags & CALQ_OP_ELEMENTWISE) || !f->native || st->n_out != 1 || st->out_v[0] < 0) return CALQ_OK;
    const calq_tensor *y = &p->vals[st->out_v[0]].t;
    if (!calq__layout_blockable(y)) return CALQ_OK;
    bool any_blocked = false;
    for (int k = 0; k < st->n_in; k++) {
        int v = st->in_v[k];
        if (v < 0) continue;
        const calq_plan_value *pv = &p->vals[v];
        if (pv->t.dtype != CALQ_DTYPE_FLOAT32 || pv->t.ndim > y->ndim) return CALQ_OK;
        if (pv->layout != CALQ_LAYOUT_PLAIN) {
            if (pv->layout != f->native || pv->t.ndim != y->ndim) return CALQ_OK;
            any_blocked = true;
        }
    }
    if (!any_blocked) return CALQ_OK;
    const int r = y->ndim;
    st->views = calloc((size_t)(st->n_in + st->n_out), sizeof *st->views);
    if (!st->views || step_layouts(st) != CALQ_OK) return oom(f);
    for (int k = 0; k < st->n_in; k++) {
        int v = st->in_v[k];
        if (v < 0) continue;
        const calq_tensor *t = &p->vals[v].t;
        int ch = 1 - (r - t->ndim); /* the input's axis under the channel axis, if any */
        if (p->vals[v].layout == CALQ_LAYOUT_PLAIN && ch >= 0 && t->dims[ch] != 1)
            CALQ_TRY(get_copy(f, v, f->native, r, st->node, &st->in_v[k])); /* varies per channel */
        else if (p->vals[v].layout > CALQ_LAYOUT_CHANNELS_LAST && t->dims[1] != y->dims[1])
            /* one channel broadcast over many: in a channel-blocked layout its one value sits in
             * lane 0 of the block (the other lanes are padding), so read it as a plain tensor
             * (PAN's attention Mul of a [N,1,H,W] map with [N,32,H,W] features, on AVX2's 8c) */
            CALQ_TRY(get_copy(f, v, CALQ_LAYOUT_PLAIN, 0, st->node, &st->in_v[k]));
        v = st->in_v[k];
        const calq_plan_value *pv = &p->vals[v];
        if (pv->layout != CALQ_LAYOUT_PLAIN) {
            calq__layout_phys(&pv->t, pv->layout, &st->views[k]);
            st->in_layout[k] = pv->layout;
        } else {
            calq__layout_phys_bcast(&pv->t, r, f->native, &st->views[k]); /* constant along the channels */
        }
    }
    calq_plan_value *ov = &p->vals[st->out_v[0]];
    ov->layout = f->native;
    ov->nbytes = calq__layout_nbytes(&ov->t, f->native);
    st->out_layout[0] = f->native;
    calq__layout_phys(&ov->t, f->native, &st->views[st->n_in]);
    st->zero_pads = calq__layout_has_pads(&ov->t, f->native);
    calq__plan_bind(p, st);
    if (st->def->prepare && st->def->run_fast) {
        /* the op's fast kernel (libmvec's Sigmoid of a SiLU, say): element by element, it reads
         * the physical views as it reads plain tensors */
        calq_op_ctx c;
        calq__plan_ctx(p, st, &c, f->err);
        CALQ_TRY(st->def->prepare(&c));
        st->state = c.state;
        st->fast = c.state != NULL;
    }
    *done = true;
    return CALQ_OK;
}

/* The gate of a written-out gated activation: old steps a and b, both reading value x, are
 * Gate(x) (read only by b) and Mul(x, that). Exporters write HardSwish as x * HardSigmoid(x)
 * (alpha 1/6, beta 1/2) and SiLU / Swish as x * Sigmoid(x) (torch.onnx before opset 14,
 * EfficientNet, YOLOv5/v8). Returns the post-op that computes both, or -1. */
static int gated_pair(const fast_ctx *f, int x, int a, int b)
{
    const calq_graph *g = f->p->g;
    const calq_node *gate = &g->nodes[f->old[a].node], *mul = &g->nodes[f->old[b].node];
    if (gate->domain[0] || mul->domain[0] || strcmp(mul->op_type, "Mul") != 0) return -1;
    int kind;
    if (strcmp(gate->op_type, "HardSigmoid") == 0) {
        /* the float32 constants torch.onnx writes for hardswish's 1/6 and 1/2 */
        if (calq__attr_float(gate, "alpha", 0.2f) != 1.0f / 6.0f || calq__attr_float(gate, "beta", 0.5f) != 0.5f)
            return -1;
        kind = CALQ_POST_HARD_SWISH;
    } else if (strcmp(gate->op_type, "Sigmoid") == 0) {
        kind = CALQ_POST_SWISH;
    } else {
        return -1;
    }
    if (gate->n_inputs != 1 || gate->inputs[0] != x || gate->n_outputs != 1 || gate->outputs[0] < 0) return -1;
    const int h = gate->outputs[0];
    if (f->uses[h] != 1 || f->consumer[h] != b || kept(f, h)) return -1;
    if (mul->n_inputs != 2 || mul->n_outputs != 1 || mul->outputs[0] < 0) return -1;
    if (!((mul->inputs[0] == x && mul->inputs[1] == h) || (mul->inputs[0] == h && mul->inputs[1] == x))) return -1;
    const calq_tensor *xt = &f->p->vals[x].t, *yt = &f->p->vals[mul->outputs[0]].t;
    if (xt->dtype != CALQ_DTYPE_FLOAT32 || !calq__shape_equal(xt->dims, xt->ndim, yt->dims, yt->ndim)) return -1;
    return kind;
}

/* The chain of element-wise layers that could follow step s as post-ops. Returns its length;
 * hswish_sig[i] is the gate step (HardSigmoid, Sigmoid) a gated post-op also absorbs (else -1). */
static int chain_of(fast_ctx *f, int s, calq_post_op *ops, int *operand_v, int *steps, int *hswish_sig)
{
    calq_plan *p = f->p;
    const calq_plan_step *st = &f->old[s];
    if (st->n_out != 1 || st->out_v[0] < 0) return 0;
    int n = 0, cur = st->out_v[0];
    while (n < MAX_CHAIN) {
        if (kept(f, cur)) break;
        if (f->uses[cur] == 2 && n + 2 <= MAX_CHAIN) {
            /* x * HardSigmoid(x) (HardSwish) or x * Sigmoid(x) (SiLU) written out */
            int a = f->first_consumer[cur], b = f->consumer[cur];
            if (a <= s || f->absorbed[a] || f->absorbed[b] || f->old[a].dynamic || f->old[b].dynamic) break;
            int kind = gated_pair(f, cur, a, b);
            if (kind < 0) break;
            ops[n] = (calq_post_op){.kind = (calq_post_kind)kind, .alpha = 1.0f, .exact = false};
            operand_v[n] = -1;
            steps[n] = b; /* absorbs both; the Mul is the later one */
            hswish_sig[n] = a;
            cur = f->old[b].out_v[0];
            n++;
            if (kept(f, cur)) break;
            continue;
        }
        if (f->uses[cur] != 1) break;
        int t = f->consumer[cur];
        if (t <= s || f->absorbed[t] || f->old[t].dynamic) break;
        if (!calq__post_op_for(p, &p->g->nodes[f->old[t].node], cur, &ops[n], &operand_v[n])) break;
        hswish_sig[n] = -1;
        steps[n] = t;
        cur = f->old[t].out_v[0];
        n++;
        if (kept(f, cur)) break; /* its consumers need it: the chain ends here */
    }
    return n;
}

/* Whether old step r reads value slot k in a way that takes another blocked layout than the
 * native one (calq_op_ctx.out_conv_readers): layers with post-ops and layouts (convolutions)
 * read their input as it is or convert it; element-wise layers get a plain copy (residual sums
 * are usually absorbed into a convolution, which converts its operand). */
static bool reads_any_blocked(const calq_plan_step *r, int k)
{
    const unsigned conv = CALQ_OP_LAYOUTS | CALQ_OP_POST_OPS;
    return !r->dynamic && (((r->def->flags & conv) == conv && k == 0) || (r->def->flags & CALQ_OP_ELEMENTWISE));
}

/* Whether value v is read, only by such readers, and is neither kept nor a graph output. */
static bool conv_readers_only(const fast_ctx *f, int v)
{
    return v >= 0 && !kept(f, v) && f->uses[v] > 0 && f->any_blocked_readers[v];
}

/* Prepares a step with a fast kernel; falls back to its reference kernel on plain inputs when
 * prepare declines. */
static calq_status prepare_step(fast_ctx *f, int s, calq_plan_step *st)
{
    calq_plan *p = f->p;
    const bool layouts = f->native && (st->def->flags & CALQ_OP_LAYOUTS);
    if (!layouts) CALQ_TRY(plain_inputs(f, st));
    if (step_layouts(st) != CALQ_OK) return oom(f);
    for (int k = 0; k < st->n_in; k++)
        if (st->in_v[k] >= 0) st->in_layout[k] = p->vals[st->in_v[k]].layout;
    calq_post_op ops[MAX_CHAIN];
    int operand_v[MAX_CHAIN], steps[MAX_CHAIN], hswish_sig[MAX_CHAIN], n_chain = 0;
    if (st->def->flags & CALQ_OP_POST_OPS) n_chain = chain_of(f, s, ops, operand_v, steps, hswish_sig);
    calq__plan_bind(p, st);
    calq_op_ctx c;
    calq__plan_ctx(p, st, &c, f->err);
    if (!layouts) c.in_layout = c.out_layout = NULL; /* the kernel's plain contract */
    c.native = layouts ? f->native : CALQ_LAYOUT_PLAIN;
    c.post = ops;
    c.n_post = n_chain;
    bool conv_readers[MAX_CHAIN + 1];
    if (layouts && (st->def->flags & CALQ_OP_POST_OPS) && st->n_out == 1) {
        conv_readers[0] = conv_readers_only(f, st->out_v[0]);
        for (int i = 0; i < n_chain; i++) conv_readers[i + 1] = conv_readers_only(f, f->old[steps[i]].out_v[0]);
        c.out_conv_readers = conv_readers;
    }
    /* Observed tensors (and graph outputs at the end of a chain) get the unfused layers' bits;
     * with an observer anywhere, every tensor before it must be computed as without fusion. */
    c.exact_only = f->observing || (n_chain > 0 && kept(f, f->old[steps[n_chain - 1]].out_v[0]));
    CALQ_TRY(st->def->prepare(&c));
    st->state = c.state;
    st->fast = c.state != NULL;
    if (!st->fast) {
        /* the reference kernel: plain tensors, nothing fused */
        for (int k = 0; k < st->n_in; k++) st->in_layout[k] = 0;
        CALQ_TRY(plain_inputs(f, st));
        calq__plan_bind(p, st);
        return emit_with_copies(f, st);
    }
    for (int k = 0; k < st->n_in; k++) {
        int v = st->in_v[k];
        if (v >= 0 && p->vals[v].layout != st->in_layout[k])
            CALQ_TRY(get_copy(f, v, st->in_layout[k], 0, st->node, &st->in_v[k]));
    }
    int n_used = c.n_post_used < 0 ? 0 : c.n_post_used > n_chain ? n_chain : c.n_post_used;
    if (n_used > 0) {
        /* The fused step writes the last absorbed layer's output; it runs where that layer ran. */
        int last = steps[n_used - 1];
        for (int i = 0; i < n_used; i++) {
            f->absorbed[steps[i]] = true;
            if (hswish_sig[i] >= 0) {
                f->absorbed[hswish_sig[i]] = true;
                p->vals[f->old[hswish_sig[i]].out_v[0]].kind = CALQ_PV_NONE;
            }
        }
        p->vals[st->out_v[0]].kind = CALQ_PV_NONE; /* the convolution's own output */
        for (int i = 0; i + 1 < n_used; i++) p->vals[f->old[steps[i]].out_v[0]].kind = CALQ_PV_NONE;
        st->out_v[0] = f->old[last].out_v[0];
        st->post = malloc(sizeof *st->post * (size_t)n_used);
        st->post_v = malloc(sizeof(int) * (size_t)n_used);
        if (!st->post || !st->post_v) return oom(f);
        memcpy(st->post, ops, sizeof *st->post * (size_t)n_used);
        memcpy(st->post_v, operand_v, sizeof(int) * (size_t)n_used);
        st->n_post = n_used;
        p->n_fused += n_used;
    }
    for (int k = 0; k < st->n_out; k++) {
        int v = st->out_v[k];
        if (v < 0) continue;
        p->vals[v].layout = st->out_layout[k];
        p->vals[v].nbytes = calq__layout_nbytes(&p->vals[v].t, st->out_layout[k]);
    }
    if (n_used > 0) {
        int last = steps[n_used - 1];
        f->deferred[last] = *st;
        f->has_deferred[last] = true;
        memset(st, 0, sizeof *st);
        return CALQ_OK;
    }
    calq__plan_bind(p, st);
    return emit_with_copies(f, st);
}

/* A fused step reaching its place: the post-op operands are there now; a residual sum's other
 * tensor is converted to the output's layout if needed (plan.c writes the output over it when
 * nothing reads it later). */
static calq_status emit_deferred(fast_ctx *f, calq_plan_step *st)
{
    calq_plan *p = f->p;
    const int y = st->out_v[0];
    for (int i = 0; i < st->n_post; i++) {
        int v = st->post_v[i];
        if (v < 0) continue;
        if (st->post[i].kind == CALQ_POST_SUM) CALQ_TRY(get_copy(f, v, p->vals[y].layout, 0, st->node, &v));
        st->post_v[i] = v;
        st->post[i].operand = &p->vals[v].t;
    }
    calq__plan_bind(p, st);
    return emit_with_copies(f, st);
}

/* Prepares every static step's fast kernel with plain tensors only (the session runs the graph
 * literally). */
static calq_status prepare_plain(calq_plan *p, calq_error *err)
{
    for (int s = 0; s < p->n_steps; s++) {
        calq_plan_step *st = &p->steps[s];
        if (st->dynamic || !st->def->prepare || !st->def->run_fast) continue;
        calq_op_ctx c;
        calq__plan_ctx(p, st, &c, err);
        CALQ_TRY(st->def->prepare(&c));
        st->state = c.state;
        st->fast = c.state != NULL;
    }
    return CALQ_OK;
}

calq_status calq__plan_fast(calq_plan *p, const calq_plan_opts *o, calq_error *err)
{
    if (!o->fuse) return prepare_plain(p, err);
    const calq_graph *g = p->g;
    fast_ctx f = {.p = p, .o = o, .err = err, .native = o->layout ? o->layout : calq__layout_native()};
    f.n_old = p->n_steps;
    f.old = malloc(sizeof *f.old * ((size_t)f.n_old + 1));
    f.uses = calloc((size_t)p->cap_vals + 1, sizeof(int));
    f.consumer = calloc((size_t)p->cap_vals + 1, sizeof(int));
    f.first_consumer = calloc((size_t)p->cap_vals + 1, sizeof(int));
    f.kept = calloc((size_t)g->n_values + 1, sizeof(bool));
    f.absorbed = calloc((size_t)f.n_old + 1, sizeof(bool));
    f.deferred = calloc((size_t)f.n_old + 1, sizeof *f.deferred);
    f.has_deferred = calloc((size_t)f.n_old + 1, sizeof(bool));
    f.any_blocked_readers = malloc((size_t)p->cap_vals + 1);
    calq_status st = CALQ_OK;
    if (!f.old || !f.uses || !f.consumer || !f.first_consumer || !f.kept || !f.absorbed || !f.deferred ||
        !f.has_deferred || !f.any_blocked_readers) {
        st = oom(&f);
        goto out;
    }
    memcpy(f.old, p->steps, sizeof *f.old * (size_t)f.n_old);
    memset(f.any_blocked_readers, 1, (size_t)p->cap_vals + 1);
    p->n_steps = 0;
    for (int v = 0; v < g->n_values; v++) {
        f.kept[v] = o->keep_all || (o->keep && o->keep[v]) || g->values[v].is_output;
        f.observing = f.observing || o->keep_all || (o->keep && o->keep[v]);
    }
    for (int i = 0; i < g->n_outputs; i++) {
        f.kept[g->outputs[i]] = true;
        f.uses[g->outputs[i]]++;
    }
    for (int s = 0; s < f.n_old; s++)
        for (int k = 0; k < f.old[s].n_in; k++) {
            int v = f.old[s].in_v[k];
            if (v < 0) continue;
            if (!f.uses[v]++) f.first_consumer[v] = s;
            f.consumer[v] = s;
            f.any_blocked_readers[v] = f.any_blocked_readers[v] && reads_any_blocked(&f.old[s], k);
        }
    calq_fuse_in fi = {.p = p,
                       .old = f.old,
                       .n_old = f.n_old,
                       .uses = f.uses,
                       .first_consumer = f.first_consumer,
                       .consumer = f.consumer,
                       .kept = f.kept,
                       .absorbed = f.absorbed};
    for (int s = 0; s < f.n_old && st == CALQ_OK; s++) {
        calq_plan_step *cur = &f.old[s];
        if (f.absorbed[s]) {
            calq__plan_step_free(cur); /* its work is done by a fused step */
            if (f.has_deferred[s]) {
                st = emit_deferred(&f, &f.deferred[s]);
                f.has_deferred[s] = false;
            }
            continue;
        }
        if (cur->dynamic) {
            if ((st = plain_inputs(&f, cur)) == CALQ_OK) st = emit(&f, cur);
            continue;
        }
        bool done = false;
        calq_plan_step fused;
        /* a squeeze-and-excitation scale: into the next convolution's weights (inexact) */
        int conv_step = -1;
        if ((st = calq__plan_fuse_channel_scale(&fi, s, !f.observing, &fused, &conv_step, &done, err)) != CALQ_OK)
            break;
        if (done) {
            calq__plan_step_free(cur); /* the Mul: the convolution reads its input now */
            const int x = f.old[conv_step].in_v[0];
            if (f.consumer[x] < conv_step) f.consumer[x] = conv_step;
            if ((st = plain_inputs(&f, &fused)) == CALQ_OK) {
                calq__plan_bind(p, &fused);
                st = emit_with_copies(&f, &fused);
            }
            if (st != CALQ_OK) calq__plan_step_free(&fused);
            continue;
        }
        /* written-out LayerNorm / GELU: one step (an inexact one only when nobody observes) */
        if ((st = calq__plan_fuse_transformer(&fi, s, !f.observing, &fused, &done, err)) != CALQ_OK) break;
        if (done) {
            calq__plan_step_free(cur); /* the fused step does its work */
            if ((st = emit_with_copies(&f, &fused)) != CALQ_OK) calq__plan_step_free(&fused);
            continue;
        }
        if ((st = try_elementwise(&f, cur, &done)) != CALQ_OK) break;
        if (done) {
            st = emit_with_copies(&f, cur);
            continue;
        }
        if (cur->def->prepare && cur->def->run_fast) {
            st = prepare_step(&f, s, cur);
            continue;
        }
        if ((st = plain_inputs(&f, cur)) == CALQ_OK) {
            calq__plan_bind(p, cur);
            st = emit_with_copies(&f, cur);
        }
    }
out:
    if (st != CALQ_OK && f.old) /* steps not moved to the new list */
        for (int s = 0; s < f.n_old; s++) {
            if (f.has_deferred && f.has_deferred[s]) calq__plan_step_free(&f.deferred[s]);
            calq__plan_step_free(&f.old[s]);
        }
    free(f.old);
    free(f.uses);
    free(f.consumer);
    free(f.first_consumer);
    free(f.kept);
    free(f.absorbed);
    free(f.deferred);
    free(f.has_deferred);
    free(f.any_blocked_readers);
    return st;
}
