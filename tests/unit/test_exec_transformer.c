/* The fast planner's transformer fusions (exec/plan_fuse.c, the MatMul post-ops of
 * kernels/gemm.c): a pre-norm encoder block as torch.onnx writes it before opset 17 (LayerNorm
 * and GELU spelled out, MatMul + bias Add, a scaled attention product), in every written-out
 * form the planner knows:
 *   - fused results match the reference kernels and are bit-identical for 1, 2 and 3 threads;
 *   - the replaced layers do not run as their own steps;
 *   - the GELU and the MatMul post-ops give the bits of the unfused fast layers;
 *   - an intermediate tensor that is a graph output or observed stops the fusion, and observed
 *     tensors are the bits of a run that fuses nothing. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "base/tensor.h"
#include "exec/kernels/elementwise_mvec.h"
#include "exec/plan.h"
#include "expect.h"
#include "graph/graph.h"
#include "graph_build.h"
#include "op_harness.h"

/* ---- building graphs ------------------------------------------------------------------------- */

static int row_mean(gb *b, const char *name, int x)
{
    int y = gb_unary(b, name, "ReduceMean", x);
    calq_attr *a = calq__node_add_attr(b->g, b->g->n_nodes - 1, "axes", CALQ_ATTR_INTS);
    a->n = 1;
    a->ints = malloc(sizeof(int64_t));
    a->ints[0] = -1;
    return y;
}

/* LayerNorm written out. recip: Mul(d, Reciprocal(s)) instead of Div(d, s); affine: the Mul by
 * scale and Add of bias (with the operands in the order `swap` says). */
static int layer_norm(gb *b, const char *p, int x, int64_t c, bool recip, bool affine, bool swap)
{
    char n[64], n2[64];
#define NM(s) (snprintf(n, sizeof n, "%s.%s", p, s), n)
    int m = row_mean(b, NM("mean"), x);
    int d = gb_binary(b, NM("sub"), "Sub", x, m);
    snprintf(n2, sizeof n2, "%s.two", p);
    int q = gb_binary(b, NM("pow"), "Pow", d, gb_scalar(b, n2, 2.0f));
    int v = row_mean(b, NM("var"), q);
    snprintf(n2, sizeof n2, "%s.eps", p);
    int e = gb_scalar(b, n2, 1e-5f);
    int ve = swap ? gb_binary(b, NM("addeps"), "Add", e, v) : gb_binary(b, NM("addeps"), "Add", v, e);
    int s = gb_unary(b, NM("sqrt"), "Sqrt", ve);
    int y = recip ? gb_binary(b, NM("norm"), "Mul", gb_unary(b, NM("recip"), "Reciprocal", s), d)
                  : gb_binary(b, NM("norm"), "Div", d, s);
    if (affine) {
        const int64_t cd[1] = {c};
        snprintf(n2, sizeof n2, "%s.gamma", p);
        int g = gb_const(b, n2, cd, 1, 0.5f, 1.5f);
        y = swap ? gb_binary(b, NM("scale"), "Mul", g, y) : gb_binary(b, NM("scale"), "Mul", y, g);
        snprintf(n2, sizeof n2, "%s.beta", p);
        int be = gb_const(b, n2, cd, 1, -0.5f, 0.5f);
        y = swap ? gb_binary(b, NM("shift"), "Add", be, y) : gb_binary(b, NM("shift"), "Add", y, be);
    }
#undef NM
    return y;
}

/* GELU written out: x / sqrt 2 (mul: x * (1 / sqrt 2)), erf, + 1, then (x * a) * 0.5 or, with
 * scale_first, (x * 0.5) * a. */
static int gelu(gb *b, const char *p, int x, bool mul, bool scale_first)
{
    char n[64], k[64];
#define NM(s) (snprintf(n, sizeof n, "%s.%s", p, s), n)
#define KN(s) (snprintf(k, sizeof k, "%s.%s", p, s), k)
    int h = mul ? gb_binary(b, NM("div"), "Mul", gb_scalar(b, KN("c1"), 0.70710678f), x)
                : gb_binary(b, NM("div"), "Div", x, gb_scalar(b, KN("c1"), 1.41421354f));
    int half = scale_first ? gb_binary(b, NM("half"), "Mul", x, gb_scalar(b, KN("c3"), 0.5f)) : -1;
    int e = gb_unary(b, NM("erf"), "Erf", h);
    int a = gb_binary(b, NM("add1"), "Add", e, gb_scalar(b, KN("c2"), 1.0f));
    int y = scale_first
                ? gb_binary(b, NM("mul"), "Mul", half, a)
                : gb_binary(b, NM("half"), "Mul", gb_binary(b, NM("mul"), "Mul", x, a), gb_scalar(b, KN("c3"), 0.5f));
#undef NM
#undef KN
    return y;
}

/* MatMul by a [k, n] constant, then Add of a bias of n values (bias first: torch's order). */
static int linear(gb *b, const char *p, int x, int64_t k, int64_t n)
{
    char nm[64], w[64];
    const int64_t wd[2] = {k, n}, bd[1] = {n};
    const float r = 1.0f / sqrtf((float)k);
    snprintf(w, sizeof w, "%s.w", p);
    snprintf(nm, sizeof nm, "%s.mm", p);
    int y = gb_binary(b, nm, "MatMul", x, gb_const(b, w, wd, 2, -r, r));
    snprintf(w, sizeof w, "%s.b", p);
    int bias = gb_const(b, w, bd, 1, -0.2f, 0.2f);
    snprintf(nm, sizeof nm, "%s.bias", p);
    return gb_binary(b, nm, "Add", bias, y);
}

/* x [B, T, C]: LN1 -> fc (MatMul + bias) -> scaled x x^T attention scores -> softmax -> times
 * values -> residual; LN2 (Reciprocal form, operands swapped) -> fc1 -> GELU -> fc2 -> residual;
 * a third LN without the affine part and a GELU in the other forms. extra_out: the name of an
 * intermediate tensor to make a graph output too (NULL: none). */
static calq_graph *block_graph(int64_t batch, int64_t t, int64_t c, const char *extra_out)
{
    gb b = gb_new();
    const int64_t xd[3] = {batch, t, c};
    int x = gb_input(&b, "x", xd, 3);
    int h = layer_norm(&b, "ln1", x, c, false, true, false);
    int qv = linear(&b, "fc", h, c, c);
    int kt = gb_unary(&b, "kt", "Transpose", qv);
    {
        const int64_t perm[3] = {0, 2, 1};
        calq_attr *a = calq__node_add_attr(b.g, b.g->n_nodes - 1, "perm", CALQ_ATTR_INTS);
        a->n = 3;
        a->ints = malloc(sizeof perm);
        memcpy(a->ints, perm, sizeof perm);
    }
    int sc = gb_binary(&b, "scores", "MatMul", qv, kt);
    sc = gb_binary(&b, "scale", "Mul", sc, gb_scalar(&b, "scale.k", 1.0f / sqrtf((float)c)));
    int att = gb_unary(&b, "softmax", "Softmax", sc);
    int ctx = gb_binary(&b, "ctx", "MatMul", att, qv);
    int r1 = gb_binary(&b, "res1", "Add", x, ctx);
    int h2 = layer_norm(&b, "ln2", r1, c, true, true, true);
    int f1 = linear(&b, "fc1", h2, c, 2 * c);
    int g1 = gelu(&b, "gelu1", f1, false, false);
    int f2 = linear(&b, "fc2", g1, 2 * c, c);
    int r2 = gb_binary(&b, "res2", "Add", r1, f2);
    int h3 = layer_norm(&b, "ln3", r2, c, false, false, false);
    int g2 = gelu(&b, "gelu2", h3, true, true);
    gb_output(&b, g2);
    if (extra_out) gb_output(&b, calq__graph_find(b.g, extra_out));
    b.g->opset = 13;
    calq_error err = {0};
    if (calq__graph_toposort(b.g, &err) != CALQ_OK) {
        fprintf(stderr, "toposort: %s\n", err.message);
        failures++;
    }
    return b.g;
}

/* ---- running plans --------------------------------------------------------------------------- */

typedef struct run_cfg {
    bool fast, fuse;
    int threads;
    const char *const *keep; /* names of observed values (n_keep of them); all with n_keep < 0 */
    int n_keep;
} run_cfg;

/* Runs g on x: the graph outputs into outs[], the named tensors (as an observer sees them) into
 * got[]; has[node] marks the nodes that ran as a step of their own (NULL: not wanted). */
static void run_graph(const calq_graph *g, const calq_tensor *x, const run_cfg *rc, const char *const *names, int n,
                      calq_tensor *got, calq_tensor *outs, bool *has)
{
    calq_error err = {0};
    bool *keep = calloc((size_t)g->n_values + 1, sizeof *keep);
    for (int i = 0; i < rc->n_keep; i++) keep[calq__graph_find(g, rc->keep[i])] = true;
    calq_plan_opts o = {.use_fast = rc->fast, .fuse = rc->fuse, .keep = keep, .keep_all = rc->n_keep < 0};
    int saved = omp_get_max_threads();
    omp_set_num_threads(rc->threads);
    calq_plan *p = NULL;
    for (int k = 0; k < n; k++) memset(&got[k], 0, sizeof got[k]);
    if (calq__plan_build_opts(g, x, 1, &o, &p, &err) != CALQ_OK) {
        fprintf(stderr, "plan: %s\n", err.message);
        failures++;
        goto out;
    }
    p->vals[g->inputs[0]].t.data = x->data;
    for (int s = 0; s < p->n_steps; s++) {
        if (calq__plan_run_step(p, s, &err) != CALQ_OK) {
            fprintf(stderr, "run: %s\n", err.message);
            failures++;
            goto out;
        }
        const calq_plan_step *st = &p->steps[s];
        if (has) has[st->node] = true;
        for (int j = 0; j < st->n_out; j++) {
            int v = st->out_v[j];
            if (v < 0) continue;
            for (int k = 0; k < n; k++)
                if (calq__graph_find(g, names[k]) == v) calq__tensor_clone(&got[k], &p->vals[v].t, &err);
        }
    }
    for (int k = 0; k < n; k++)
        if (!got[k].data) {
            fprintf(stderr, "%s was not computed\n", names[k]);
            failures++;
        }
    for (int i = 0; i < g->n_outputs; i++)
        calq__tensor_clone(&outs[i], &p->vals[calq__plan_plain(p, g->outputs[i])].t, &err);
out:
    omp_set_num_threads(saved);
    calq__plan_free(p);
    free(keep);
}

/* Whether node `name` ran as a step of its own. */
static bool ran(const calq_graph *g, const bool *has, const char *name)
{
    for (int ni = 0; ni < g->n_nodes; ni++)
        if (!strcmp(g->nodes[ni].name, name)) return has[ni];
    fprintf(stderr, "no node %s\n", name);
    failures++;
    return false;
}

static bool have_vector_erf(void)
{
    return calq__ew_mvec_gelu_parts_row() != NULL;
}

/* The layers every fusion replaces (the fused step runs as its first layer's node). */
static const char *const replaced[] = {
    "ln1.sub",    "ln1.pow",    "ln1.var",   "ln1.addeps", "ln1.sqrt",   "ln1.norm",  "ln1.scale",  "ln1.shift",
    "ln2.sub",    "ln2.pow",    "ln2.var",   "ln2.addeps", "ln2.sqrt",   "ln2.recip", "ln2.norm",   "ln2.scale",
    "ln2.shift",  "ln3.sub",    "ln3.pow",   "ln3.var",    "ln3.addeps", "ln3.sqrt",  "ln3.norm",   "fc.bias",
    "fc1.bias",   "fc2.bias",   "scale",     "gelu1.erf",  "gelu1.add1", "gelu1.mul", "gelu1.half", "gelu2.erf",
    "gelu2.add1", "gelu2.half", "gelu2.mul", "softmax",    "ctx",
};

/* Fused against the reference, across thread counts; the replaced layers do not run. */
static void test_block(int64_t batch, int64_t t, int64_t c)
{
    calq_graph *g = block_graph(batch, t, c, NULL);
    const int64_t xd[3] = {batch, t, c};
    calq_tensor x = t_rand_f32(5, 3, xd, -2, 3), ref[1] = {0}, o1[1] = {0}, o2[1] = {0}, o3[1] = {0}, tmp[1];
    run_cfg rc = {.fast = false, .threads = 2};
    run_graph(g, &x, &rc, NULL, 0, tmp, ref, NULL);
    bool *has = calloc((size_t)g->n_nodes + 1, sizeof *has);
    rc = (run_cfg){.fast = true, .fuse = true, .threads = 1};
    run_graph(g, &x, &rc, NULL, 0, tmp, o1, has);
    rc.threads = 2;
    run_graph(g, &x, &rc, NULL, 0, tmp, o2, NULL);
    rc.threads = 3;
    run_graph(g, &x, &rc, NULL, 0, tmp, o3, NULL);
    char what[96];
    snprintf(what, sizeof what, "block %lldx%lldx%lld: fused vs reference", (long long)batch, (long long)t,
             (long long)c);
    EXPECT(t_close(&o1[0], &ref[0], 1e-4, 1e-5, what));
    EXPECT(t_same_bits(&o1[0], &o2[0]) && t_same_bits(&o1[0], &o3[0]));
    for (size_t k = 0; k < sizeof replaced / sizeof replaced[0]; k++) {
        if (!have_vector_erf() && !strncmp(replaced[k], "gelu", 4)) continue;
        if (ran(g, has, replaced[k])) {
            fprintf(stderr, "%s: %s ran as its own step\n", what, replaced[k]);
            failures++;
        }
    }
    free(has);
    t_free_all(o1, 1);
    t_free_all(o2, 1);
    t_free_all(o3, 1);
    t_free_all(ref, 1);
    calq_tensor_free_data(&x);
    calq__graph_free(g);
}

/* The GELU and the MatMul post-ops are exact: the fused run gives the bits of the fast layers run
 * one by one (fuse off), on a graph of linear layers, GELUs and a MatMul + Relu. */
static void test_exact_parts(void)
{
    gb b = gb_new();
    const int64_t xd[3] = {2, 37, 48};
    int x = gb_input(&b, "x", xd, 3);
    int y = gelu(&b, "g1", linear(&b, "l1", x, 48, 96), false, false);
    y = gelu(&b, "g2", linear(&b, "l2", y, 96, 40), true, true);
    /* a MatMul followed by an element-wise layer it does not take (a post-op without operand) */
    const int64_t wd[2] = {40, 24};
    y = gb_unary(&b, "relu", "Relu", gb_binary(&b, "l3", "MatMul", y, gb_const(&b, "l3.w", wd, 2, -0.3f, 0.3f)));
    /* attention's scaling written as a Div by a constant: by a power of two (taken as a multiply by
     * its reciprocal) and by another value (a divide) */
    const int64_t wd4[2] = {24, 24};
    y = gb_binary(&b, "l4", "MatMul", y, gb_const(&b, "l4.w", wd4, 2, -0.3f, 0.3f));
    y = gb_binary(&b, "div8", "Div", y, gb_scalar(&b, "div8.k", 8.0f));
    y = gb_binary(&b, "div3", "Div", y, gb_scalar(&b, "div3.k", 3.0f));
    gb_output(&b, y);
    b.g->opset = 13;
    calq_error err = {0};
    EXPECT(calq__graph_toposort(b.g, &err) == CALQ_OK);
    calq_tensor xt = t_rand_f32(11, 3, xd, -3, 3), fused[1] = {0}, plain[1] = {0}, tmp[1];
    bool *has = calloc((size_t)b.g->n_nodes + 1, sizeof *has);
    run_cfg rc = {.fast = true, .fuse = true, .threads = 2};
    run_graph(b.g, &xt, &rc, NULL, 0, tmp, fused, has);
    rc.fuse = false;
    run_graph(b.g, &xt, &rc, NULL, 0, tmp, plain, NULL);
    EXPECT(t_same_bits(&fused[0], &plain[0]));
    EXPECT(!ran(b.g, has, "l1.bias") && !ran(b.g, has, "l2.bias"));
    EXPECT(!ran(b.g, has, "div8") && !ran(b.g, has, "div3"));
    if (have_vector_erf()) EXPECT(!ran(b.g, has, "g1.erf") && !ran(b.g, has, "g2.erf"));
    free(has);
    t_free_all(fused, 1);
    t_free_all(plain, 1);
    calq_tensor_free_data(&xt);
    calq__graph_free(b.g);
}

/* An intermediate that is a graph output, or observed, keeps its layers; observed tensors are
 * the bits of a run that fuses nothing. */
static void test_kept_intermediates(void)
{
    const int64_t xd[3] = {1, 29, 64};
    calq_tensor x = t_rand_f32(3, 3, xd, -1, 1), outs[2] = {0}, tmp[1];
    /* a graph output inside ln2 and inside gelu1 */
    const char *const outs_in[] = {"ln2.sqrt.out", "gelu1.erf.out"};
    const char *const stopped[] = {"ln2.sub", "gelu1.erf"};
    for (int i = 0; i < 2; i++) {
        calq_graph *g = block_graph(1, 29, 64, outs_in[i]);
        bool *has = calloc((size_t)g->n_nodes + 1, sizeof *has);
        run_cfg rc = {.fast = true, .fuse = true, .threads = 2};
        run_graph(g, &x, &rc, NULL, 0, tmp, outs, has);
        EXPECT(ran(g, has, stopped[i]));
        EXPECT(!ran(g, has, "ln1.sub")); /* the others still fuse */
        calq_tensor ref[2] = {0};
        rc = (run_cfg){.fast = false, .threads = 2};
        run_graph(g, &x, &rc, NULL, 0, tmp, ref, NULL);
        EXPECT(t_close(&outs[1], &ref[1], 1e-4, 1e-5, outs_in[i]));
        t_free_all(outs, 2);
        t_free_all(ref, 2);
        free(has);
        calq__graph_free(g);
    }
    /* observed: what a calibration observes (the MatMuls' inputs) and an intermediate */
    calq_graph *g = block_graph(1, 29, 64, NULL);
    const char *const obs[] = {"ln1.shift.out", "ln2.shift.out", "gelu1.half.out", "gelu2.erf.out"};
    const int n_obs = 4;
    calq_tensor a[4], all[4];
    bool *has = calloc((size_t)g->n_nodes + 1, sizeof *has);
    run_cfg rc = {.fast = true, .fuse = true, .threads = 2, .keep = obs, .n_keep = n_obs};
    run_graph(g, &x, &rc, obs, n_obs, a, outs, has);
    t_free_all(outs, 1);
    rc.n_keep = -1;
    run_graph(g, &x, &rc, obs, n_obs, all, outs, NULL);
    t_free_all(outs, 1);
    for (int k = 0; k < n_obs; k++)
        if (!t_same_bits(&a[k], &all[k])) {
            fprintf(stderr, "observed %s differs from the unfused run\n", obs[k]);
            failures++;
        }
    /* the LayerNorms (inexact) run as layers; the GELU whose intermediate is observed too; the
     * other GELU and the bias Adds still fuse */
    EXPECT(ran(g, has, "ln1.sub") && ran(g, has, "ln3.sqrt") && ran(g, has, "gelu2.erf"));
    EXPECT(!ran(g, has, "fc1.bias"));
    if (have_vector_erf()) EXPECT(!ran(g, has, "gelu1.erf"));
    t_free_all(a, n_obs);
    t_free_all(all, n_obs);
    free(has);
    calq_tensor_free_data(&x);
    calq__graph_free(g);
}

/* Attention written out, x [2, 3, T, C] (batch, heads): q, k, v = MatMuls of x by constants,
 * s = MatMul(q, Transpose(k)), the scaling `form` (0 none, 1 Mul by 0.125, 2 Div by 8, 3 Div by 3),
 * Softmax, MatMul(p, v). opset 11 with softmax_axis < 0: Softmax's default axis (1, which flattens
 * and so is no last-axis softmax); v_late: v is computed after the scores. */
static calq_graph *attention_graph(int64_t t, int64_t c, int form, int opset, int64_t softmax_axis, bool v_late)
{
    gb b = gb_new();
    const int64_t xd[4] = {2, 3, t, c}, wd[2] = {c, c};
    int x = gb_input(&b, "x", xd, 4);
    const float r = 1.0f / sqrtf((float)c);
    int q = gb_binary(&b, "q", "MatMul", x, gb_const(&b, "q.w", wd, 2, -r, r));
    int k = gb_binary(&b, "k", "MatMul", x, gb_const(&b, "k.w", wd, 2, -r, r));
    int kt = gb_unary(&b, "kt", "Transpose", k);
    {
        const int64_t perm[4] = {0, 1, 3, 2};
        calq_attr *a = calq__node_add_attr(b.g, b.g->n_nodes - 1, "perm", CALQ_ATTR_INTS);
        a->n = 4;
        a->ints = malloc(sizeof perm);
        memcpy(a->ints, perm, sizeof perm);
    }
    int v = v_late ? -1 : gb_binary(&b, "v", "MatMul", x, gb_const(&b, "v.w", wd, 2, -r, r));
    int sc = gb_binary(&b, "scores", "MatMul", q, kt);
    if (form == 1) sc = gb_binary(&b, "scale", "Mul", gb_scalar(&b, "scale.k", 0.125f), sc);
    if (form == 2) sc = gb_binary(&b, "scale", "Div", sc, gb_scalar(&b, "scale.k", 8.0f));
    if (form == 3) sc = gb_binary(&b, "scale", "Div", sc, gb_scalar(&b, "scale.k", 3.0f));
    int p = gb_unary(&b, "softmax", "Softmax", sc);
    b.g->nodes[b.g->n_nodes - 1].opset = opset; /* its default axis depends on it */
    if (softmax_axis >= 0) {
        calq_attr *a = calq__node_add_attr(b.g, b.g->n_nodes - 1, "axis", CALQ_ATTR_INT);
        a->i = softmax_axis;
    }
    if (v_late) v = gb_binary(&b, "v", "MatMul", x, gb_const(&b, "v.w", wd, 2, -r, r));
    gb_output(&b, gb_binary(&b, "ctx", "MatMul", p, v));

    calq_error err = {0};
    if (calq__graph_toposort(b.g, &err) != CALQ_OK) {
        fprintf(stderr, "toposort: %s\n", err.message);
        failures++;
    }
    return b.g;
}

/* Each form against the reference, for 1, 2 and 3 threads; the forms that fuse do not run their
 * Softmax, the others (a flattening Softmax, v computed after the scores, observed scores) do and
 * still give the right result. T = 150: several tiles of scores, the last one partial, rows
 * longer than the vector lanes with a remainder. */
static void test_attention_forms(void)
{
    const struct {
        int form, opset;
        int64_t axis;
        bool v_late, observe, fuses;
    } cases[] = {
        {0, 13, -1, false, false, true}, {1, 13, -1, false, false, true}, {2, 13, -1, false, false, true},
        {3, 13, -1, false, false, true}, {2, 11, 3, false, false, true},  {2, 11, -1, false, false, false},
        {2, 13, -1, true, false, false}, {2, 13, -1, false, true, false},
    };
    const int64_t t = 150, c = 16, xd[4] = {2, 3, t, c};
    calq_tensor x = t_rand_f32(17, 4, xd, -2, 2);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        calq_graph *g = attention_graph(t, c, cases[i].form, cases[i].opset, cases[i].axis, cases[i].v_late);
        calq_tensor ref[1] = {0}, o1[1] = {0}, o2[1] = {0}, o3[1] = {0}, tmp[1];
        const char *const obs[] = {"scores.out"};
        run_cfg rc = {.fast = false, .threads = 2};
        run_graph(g, &x, &rc, NULL, 0, tmp, ref, NULL);
        bool *has = calloc((size_t)g->n_nodes + 1, sizeof *has);
        rc = (run_cfg){.fast = true, .fuse = true, .threads = 1, .keep = obs, .n_keep = cases[i].observe ? 1 : 0};
        run_graph(g, &x, &rc, NULL, 0, tmp, o1, has);
        rc.threads = 2;
        run_graph(g, &x, &rc, NULL, 0, tmp, o2, NULL);
        rc.threads = 3;
        run_graph(g, &x, &rc, NULL, 0, tmp, o3, NULL);
        char what[96];
        snprintf(what, sizeof what, "attention case %zu: fast vs reference", i);
        EXPECT(t_close(&o1[0], &ref[0], 1e-4, 1e-5, what));
        EXPECT(t_same_bits(&o1[0], &o2[0]) && t_same_bits(&o1[0], &o3[0]));
        if (ran(g, has, "softmax") == cases[i].fuses) {
            fprintf(stderr, "attention case %zu: softmax %s\n", i, cases[i].fuses ? "ran" : "was fused");
            failures++;
        }
        free(has);
        t_free_all(o1, 1);
        t_free_all(o2, 1);
        t_free_all(o3, 1);
        t_free_all(ref, 1);
        calq__graph_free(g);
    }
    calq_tensor_free_data(&x);
}

int main(void)
{
    test_block(1, 29, 64);
    test_block(4, 197, 192); /* above the serial thresholds: threads share the rows */
    test_exact_parts();
    test_kept_intermediates();
    test_attention_forms();
    if (failures) fprintf(stderr, "%d failures\n", failures);
    return TEST_RESULT();
}
