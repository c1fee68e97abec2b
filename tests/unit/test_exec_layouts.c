/* The fast planner (exec/plan_fast.c): activation layouts kept between layers and element-wise
 * layers fused into convolutions as post-ops. On small graphs with every fusable layer kind,
 * in every layout (what oneDNN picks here, channels last, nChw16c, nChw8c):
 *   - results match the reference kernels and are bit-identical for 1, 2 and 3 threads;
 *   - kept (observed) tensors are computed and bit-identical to an unfused run of the same
 *     kernels, and an inexact post-op never produces one;
 *   - layout conversions round-trip exactly, padding channels are zero.
 * And on UltraFace: calibration's observed tensors are the same bits with and without
 * fusion of the other layers, through the public session API. */
#include <math.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/tensor.h"
#include "exec/kernels/conv_dnnl.h"
#include "exec/kernels/conv_scale.h"
#include "exec/kernels/logistic.h"
#include "exec/layout.h"
#include "exec/plan.h"
#include "expect.h"
#include "graph/graph.h"
#include "graph_build.h"
#include "op_harness.h"

/* ---- building graphs ------------------------------------------------------------------------- */

/* Conv with k x k weights, `same` padding, stride, groups. */
static int gb_conv(gb *b, const char *name, int x, int64_t cin, int64_t cout, int64_t k, int64_t stride, int64_t group)
{
    char wn[96], bn[96];
    snprintf(wn, sizeof wn, "%s.w", name);
    snprintf(bn, sizeof bn, "%s.b", name);
    const float r = 1.5f / sqrtf((float)(cin / group * k * k));
    int64_t wd[4] = {cout, cin / group, k, k}, bd[1] = {cout};
    int ins[3] = {x, gb_const(b, wn, wd, 4, -r, r), gb_const(b, bn, bd, 1, -0.2f, 0.2f)};
    int y = gb_node(b, name, "Conv", ins, 3);
    int64_t pads[4] = {k / 2, k / 2, k / 2, k / 2}, st[2] = {stride, stride};
    gb_ints(b, "pads", pads, 4);
    gb_ints(b, "strides", st, 2);
    if (group > 1) gb_int(b, "group", group);
    return y;
}

static calq_graph *gb_finish(gb *b)
{
    b->g->opset = 13;
    calq_error err = {0};
    if (calq__graph_toposort(b->g, &err) != CALQ_OK) {
        fprintf(stderr, "toposort: %s\n", err.message);
        failures++;
    }
    return b->g;
}

/* A MobileNet / ResNet-like graph with every fusable layer kind and the layout-aware layers:
 * residual sums (one whose other operand dies there, one whose operand lives on), Relu, Clip,
 * LeakyRelu, HardSwish (written out and as one node), Sigmoid, Tanh, SiLU, Elu, HardSigmoid,
 * per-channel Add / Mul, depthwise and 1x1 convolutions, MaxPool, Resize (nearest and linear),
 * a one-channel attention map broadcast over the channels, Concat, a lone BatchNormalization after a ConvTranspose,
 * GlobalAveragePool, an SE-style broadcast Mul, and channel counts that are not multiples of 8 or 16. Returns the
 * graph; *names get the tensors a calibration would observe (convolution inputs). */
static calq_graph *mixed_graph(int64_t batch, const char **observe, int *n_observe)
{
    gb b = gb_new();
    int64_t xd[4] = {batch, 3, 20, 20};
    int x = gb_input(&b, "x", xd, 4);
    int n = 0;
    observe[n++] = "x";
    int c1 = gb_conv(&b, "c1", x, 3, 24, 3, 1, 1);
    int r1 = gb_unary(&b, "r1", "Relu", c1);
    observe[n++] = "r1.out";
    int c2 = gb_conv(&b, "c2", r1, 24, 24, 3, 1, 1);
    int s1 = gb_binary(&b, "sum1", "Add", c2, r1); /* r1 lives on: read by c1b below */
    int r2 = gb_unary(&b, "r2", "Relu", s1);
    observe[n++] = "r2.out";
    int c1b = gb_conv(&b, "c1b", r1, 24, 24, 1, 1, 1);
    int s2 = gb_binary(&b, "sum2", "Add", r2, c1b); /* in place: c1b dies here */
    int c3 = gb_conv(&b, "c3", s2, 24, 40, 1, 1, 1);
    int cl = gb_unary(&b, "clip", "Clip", c3);
    int clip_in[3] = {c3, gb_scalar(&b, "lo", 0.0f), gb_scalar(&b, "hi", 6.0f)};
    b.g->nodes[gb_last_node(&b)].n_inputs = 3;
    free(b.g->nodes[gb_last_node(&b)].inputs);
    b.g->nodes[gb_last_node(&b)].inputs = malloc(sizeof clip_in);
    memcpy(b.g->nodes[gb_last_node(&b)].inputs, clip_in, sizeof clip_in);
    observe[n++] = "clip.out";
    int dw = gb_conv(&b, "dw", cl, 40, 40, 3, 2, 40);
    int lr = gb_unary(&b, "lrelu", "LeakyRelu", dw);
    gb_float(&b, "alpha", 0.1f);
    observe[n++] = "lrelu.out";
    int c4 = gb_conv(&b, "c4", lr, 40, 40, 1, 1, 1);
    int hs = gb_unary(&b, "hsig", "HardSigmoid", c4);
    gb_float(&b, "alpha", 1.0f / 6.0f);
    gb_float(&b, "beta", 0.5f);
    int hsw = gb_binary(&b, "hswish", "Mul", c4, hs);
    /* SE: GlobalAveragePool -> 1x1 -> Relu -> 1x1 -> HardSigmoid -> broadcast Mul */
    int gp = gb_unary(&b, "se_pool", "GlobalAveragePool", hsw);
    int se1 = gb_conv(&b, "se1", gp, 40, 16, 1, 1, 1);
    int ser = gb_unary(&b, "se_relu", "Relu", se1);
    int se2 = gb_conv(&b, "se2", ser, 16, 40, 1, 1, 1);
    int seh = gb_unary(&b, "se_hsig", "HardSigmoid", se2);
    int sem = gb_binary(&b, "se_mul", "Mul", hsw, seh);
    observe[n++] = "se_mul.out";
    int c5 = gb_conv(&b, "c5", sem, 40, 32, 3, 1, 1);
    int64_t kd[3] = {32, 1, 1};
    int ac = gb_binary(&b, "addc", "Add", c5, gb_const(&b, "addk", kd, 3, -0.5f, 0.5f));
    int mc = gb_binary(&b, "mulc", "Mul", ac, gb_const(&b, "mulk", kd, 3, 0.5f, 1.5f));
    int sg = gb_unary(&b, "sig", "Sigmoid", mc);
    int mp = gb_unary(&b, "pool", "MaxPool", sg);
    int64_t ks[2] = {2, 2};
    gb_ints(&b, "kernel_shape", ks, 2);
    gb_ints(&b, "strides", ks, 2);
    observe[n++] = "pool.out";
    int c6 = gb_conv(&b, "c6", mp, 32, 32, 3, 1, 1);
    int th = gb_unary(&b, "hswish_op", "HardSwish", gb_unary(&b, "tanh", "Tanh", c6));
    /* spatial attention: a one-channel map broadcast over 32 channels (PAN's pattern; in nChw8c
     * the map's value sits in lane 0 of its block) */
    int att = gb_unary(&b, "att_sig", "Sigmoid", gb_conv(&b, "att", th, 32, 1, 1, 1, 1));
    int am = gb_binary(&b, "att_mul", "Mul", th, att);
    int up_in[3] = {am, -1, -1};
    float sc[4] = {1, 1, 2, 2};
    int64_t scd[1] = {4};
    up_in[2] = gb_const_t(&b, "scales", t_f32(sc, 1, scd));
    int up = gb_node(&b, "up", "Resize", up_in, 3);
    gb_str(&b, "mode", "nearest");
    int lin_in[3] = {mp, up_in[1], up_in[2]};
    int upl = gb_node(&b, "upl", "Resize", lin_in, 3);
    gb_str(&b, "mode", "linear");
    /* SiLU as exporters write it, x * Sigmoid(x): the convolution's output is read twice, by the
     * gate and the Mul, and both become one swish post-op */
    int cs = gb_conv(&b, "cs", upl, 32, 32, 3, 1, 1);
    int silu = gb_binary(&b, "silu", "Mul", cs, gb_unary(&b, "silu_sig", "Sigmoid", cs));
    int cat_in[3] = {up, upl, silu};
    int cat = gb_node(&b, "cat", "Concat", cat_in, 3);
    gb_int(&b, "axis", 1);
    observe[n++] = "cat.out";
    int c7 = gb_conv(&b, "c7", cat, 96, 20, 3, 1, 1);
    int el = gb_unary(&b, "elu", "Elu", c7);
    int64_t td[4] = {20, 12, 2, 2}, cd[1] = {12};
    int ct_in[3] = {el, gb_const(&b, "ct.w", td, 4, -0.3f, 0.3f), gb_const(&b, "ct.b", cd, 1, -0.1f, 0.1f)};
    int ct = gb_node(&b, "ct", "ConvTranspose", ct_in, 3);
    gb_ints(&b, "strides", ks, 2);
    int bn_in[5] = {ct, gb_const(&b, "g", cd, 1, 0.5f, 1.5f), gb_const(&b, "be", cd, 1, -0.2f, 0.2f),
                    gb_const(&b, "mu", cd, 1, -0.2f, 0.2f), gb_const(&b, "var", cd, 1, 0.5f, 1.5f)};
    int bno = gb_node(&b, "bn", "BatchNormalization", bn_in, 5);
    gb_output(&b, bno);
    gb_output(&b, gb_unary(&b, "gap", "GlobalAveragePool", bno));
    *n_observe = n;
    return gb_finish(&b);
}

/* ---- running plans -------------------------------------------------------------------------- */

typedef struct run_cfg {
    bool fast, fuse;
    calq_layout layout;
    int threads;
    const char *const *keep; /* names of kept values, n_keep of them; keep_all with n_keep < 0 */
    int n_keep;
} run_cfg;

/* Runs g on x; clones the named tensors (plain copies of kept values) into got[] and the graph
 * outputs into outs[]. Returns the plan's fused-layer count (or -1 on failure). */
static int run_graph(const calq_graph *g, const calq_tensor *x, const run_cfg *rc, const char *const *names, int n,
                     calq_tensor *got, calq_tensor *outs, int *n_steps, bool *step_has_node)
{
    calq_error err = {0};
    bool *keep = calloc((size_t)g->n_values + 1, sizeof *keep);
    for (int i = 0; i < rc->n_keep; i++) keep[calq__graph_find(g, rc->keep[i])] = true;
    calq_plan_opts o = {
        .use_fast = rc->fast, .fuse = rc->fuse, .keep = keep, .keep_all = rc->n_keep < 0, .layout = rc->layout};
    int saved = omp_get_max_threads();
    omp_set_num_threads(rc->threads);
    calq_plan *p = NULL;
    int fused = -1;
    if (calq__plan_build_opts(g, x, 1, &o, &p, &err) != CALQ_OK) {
        fprintf(stderr, "plan: %s\n", err.message);
        failures++;
        goto out;
    }
    p->vals[g->inputs[0]].t.data = x->data;
    for (int k = 0; k < n; k++) memset(&got[k], 0, sizeof got[k]);
    for (int k = 0; k < n; k++) /* the graph input */
        if (calq__graph_find(g, names[k]) == g->inputs[0]) calq__tensor_clone(&got[k], x, &err);
    for (int s = 0; s < p->n_steps; s++) {
        if (calq__plan_run_step(p, s, &err) != CALQ_OK) {
            fprintf(stderr, "run: %s\n", err.message);
            failures++;
            goto out;
        }
        const calq_plan_step *st = &p->steps[s];
        if (step_has_node && st->def != &calq__op_layout_convert) step_has_node[st->node] = true;
        /* as the session's observer sees them: right after they are written, in plain layout */
        for (int j = 0; j < st->n_out; j++) {
            const calq_plan_value *pv = st->out_v[j] >= 0 ? &p->vals[st->out_v[j]] : NULL;
            if (!pv || pv->layout != CALQ_LAYOUT_PLAIN) continue;
            int v = pv->origin >= 0 ? pv->origin : st->out_v[j];
            for (int k = 0; k < n; k++)
                if (calq__graph_find(g, names[k]) == v) calq__tensor_clone(&got[k], &pv->t, &err);
        }
    }
    for (int k = 0; k < n; k++)
        if (!got[k].data) {
            fprintf(stderr, "%s was not kept in plain layout\n", names[k]);
            failures++;
        }
    for (int i = 0; i < g->n_outputs; i++)
        calq__tensor_clone(&outs[i], &p->vals[calq__plan_plain(p, g->outputs[i])].t, &err);
    fused = p->n_fused;
    if (n_steps) *n_steps = p->n_steps;
out:
    omp_set_num_threads(saved);
    calq__plan_free(p);
    free(keep);
    return fused;
}

/* The reference kernels' outputs of g on x (2 threads). */
static void run_reference(const calq_graph *g, const calq_tensor *x, calq_tensor *outs)
{
    calq_tensor tmp[1];
    run_cfg rc = {.fast = false, .threads = 2};
    run_graph(g, x, &rc, NULL, 0, tmp, outs, NULL, NULL);
}

/* Fused fast runs of g on x in layout l (0: native) with 1, 2 and 3 threads, the outputs into
 * o1, o2, o3; `has` (or NULL) marks the nodes that ran as steps of their own in the first.
 * Returns the first run's fused-layer count. */
static int run_fused_123(const calq_graph *g, const calq_tensor *x, calq_layout l, calq_tensor *o1, calq_tensor *o2,
                         calq_tensor *o3, bool *has)
{
    calq_tensor tmp[1];
    run_cfg rc = {.fast = true, .fuse = true, .layout = l, .threads = 1};
    int fused = run_graph(g, x, &rc, NULL, 0, tmp, o1, NULL, has);
    rc.threads = 2;
    run_graph(g, x, &rc, NULL, 0, tmp, o2, NULL, NULL);
    rc.threads = 3;
    run_graph(g, x, &rc, NULL, 0, tmp, o3, NULL, NULL);
    return fused;
}

static const calq_layout layouts[] = {0, CALQ_LAYOUT_CHANNELS_LAST, 16, 8};
static const char *const layout_names[] = {"native", "channels last", "nChw16c", "nChw8c"};

/* nChw16c has oneDNN direct kernels only with AVX-512; without it the executor never picks that
 * layout (calq__layout_native gives nChw8c), so forcing it there tests nothing. oneDNN's own ISA
 * is asked, so ONEDNN_MAX_CPU_ISA=AVX2 on an AVX-512 machine tests what an AVX2 machine runs. */
static bool layout_available(calq_layout l)
{
    const unsigned avx512 = (unsigned)dnnl_cpu_isa_avx512_core;
    return l != 16 || ((unsigned)dnnl_get_effective_cpu_isa() & avx512) == avx512;
}

/* Fast fused runs against the reference, across thread counts and layouts. */
static void test_mixed_graph(int64_t batch)
{
    const char *obs[16];
    int n_obs = 0;
    calq_graph *g = mixed_graph(batch, obs, &n_obs);
    int64_t xd[4] = {batch, 3, 20, 20};
    calq_tensor x = t_rand_f32(99, 4, xd, -1, 1);
    calq_tensor ref_o[2] = {0};
    run_reference(g, &x, ref_o);
    for (size_t li = 0; li < sizeof layouts / sizeof layouts[0]; li++) {
        if (!layout_available(layouts[li])) continue;
        calq_tensor o1[2] = {0}, o2[2] = {0}, o3[2] = {0};
        bool *has = calloc((size_t)g->n_nodes + 1, sizeof *has);
        int fused = run_fused_123(g, &x, layouts[li], o1, o2, o3, has);
        char what[128];
        for (int i = 0; i < 2; i++) {
            snprintf(what, sizeof what, "batch %lld, %s, output %d: fused vs reference", (long long)batch,
                     layout_names[li], i);
            EXPECT(t_close(&o1[i], &ref_o[i], 1e-4, 1e-5, what));
            EXPECT(t_same_bits(&o1[i], &o2[i]) && t_same_bits(&o1[i], &o3[i]));
        }
        /* every fusable layer went into its convolution */
        EXPECT(fused >= 16);
        const char *absorbed[] = {"r1",      "sum1", "r2",   "sum2", "clip", "lrelu",     "hsig", "hswish",   "se_relu",
                                  "se_hsig", "addc", "mulc", "sig",  "tanh", "hswish_op", "elu",  "silu_sig", "silu"};
        for (size_t k = 0; k < sizeof absorbed / sizeof absorbed[0]; k++)
            for (int ni = 0; ni < g->n_nodes; ni++)
                if (!strcmp(g->nodes[ni].name, absorbed[k]) && has[ni]) {
                    fprintf(stderr, "%s: %s ran as its own step\n", layout_names[li], absorbed[k]);
                    failures++;
                }
        free(has);
        t_free_all(o1, 2);
        t_free_all(o2, 2);
        t_free_all(o3, 2);
    }
    t_free_all(ref_o, 2);
    calq_tensor_free_data(&x);
    calq__graph_free(g);
}

/* Kept tensors: computed, plain, and the same bits as in a run that fuses nothing (every value
 * kept); a kept tensor never comes out of an inexact post-op. */
static void test_kept_values(void)
{
    const char *obs[16];
    int n_obs = 0;
    calq_graph *g = mixed_graph(2, obs, &n_obs);
    int64_t xd[4] = {2, 3, 20, 20};
    calq_tensor x = t_rand_f32(7, 4, xd, -1, 1), outs[2] = {0};
    for (size_t li = 0; li < sizeof layouts / sizeof layouts[0]; li++) {
        if (!layout_available(layouts[li])) continue;
        calq_tensor a[16], all[16];
        run_cfg rc = {.fast = true, .fuse = true, .layout = layouts[li], .threads = 2, .keep = obs, .n_keep = n_obs};
        int fused = run_graph(g, &x, &rc, obs, n_obs, a, outs, NULL, NULL);
        t_free_all(outs, 2);
        rc.n_keep = -1;
        int fused_all = run_graph(g, &x, &rc, obs, n_obs, all, outs, NULL, NULL);
        t_free_all(outs, 2);
        EXPECT(fused > 0 && fused_all == 0);
        for (int k = 0; k < n_obs; k++)
            if (!t_same_bits(&a[k], &all[k])) {
                fprintf(stderr, "%s: kept %s differs from the unfused run\n", layout_names[li], obs[k]);
                failures++;
            }
        t_free_all(a, n_obs);
        t_free_all(all, n_obs);
    }
    /* keeping Sigmoid's output: Sigmoid (inexact in oneDNN) must then run on its own */
    const char *sig[1] = {"sig.out"};
    bool *has = calloc((size_t)g->n_nodes + 1, sizeof *has);
    calq_tensor got[1];
    run_cfg rc = {.fast = true, .fuse = true, .threads = 2, .keep = sig, .n_keep = 1};
    run_graph(g, &x, &rc, sig, 1, got, outs, NULL, has);
    t_free_all(outs, 2);
    calq_tensor_free_data(&got[0]);
    for (int ni = 0; ni < g->n_nodes; ni++)
        if (!strcmp(g->nodes[ni].name, "sig")) EXPECT(has[ni]);
    free(has);
    calq_tensor_free_data(&x);
    calq__graph_free(g);
}

/* ---- conversions ---------------------------------------------------------------------------- */

static void test_conversions(void)
{
    const int64_t shapes[][5] = {
        {2, 5, 7, 0, 0}, {1, 17, 3, 4, 0}, {2, 24, 3, 2, 5}, {1, 16, 1, 1, 0}, {3, 40, 6, 6, 0}};
    const int ranks[] = {3, 4, 5, 4, 4};
    const calq_layout ls[] = {CALQ_LAYOUT_CHANNELS_LAST, 8, 16};
    for (size_t si = 0; si < sizeof ranks / sizeof ranks[0]; si++) {
        calq_tensor x = t_rand_f32((unsigned)si + 3, ranks[si], shapes[si], -1, 1);
        for (size_t li = 0; li < 3; li++) {
            const calq_layout l = ls[li];
            calq_tensor y[2], back[2];
            for (int fast = 0; fast < 2; fast++) {
                y[fast] = x;
                y[fast].data = calloc(1, calq__layout_nbytes(&x, l));
                memset(y[fast].data, 0x7f, calq__layout_nbytes(&x, l)); /* padding must be rewritten */
                back[fast] = x;
                back[fast].data = calloc(1, calq__tensor_nbytes(&x));
                calq_layout to_l[1] = {l}, from_l[1] = {CALQ_LAYOUT_PLAIN};
                calq_tensor *in[1] = {&x}, *out[1] = {&y[fast]};
                calq_op_ctx c = {.node = NULL, .n_in = 1, .in = in, .n_out = 1, .out = out};
                c.in_layout = from_l;
                c.out_layout = to_l;
                calq_node node = {.name = "convert", .op_type = "calq.LayoutConvert", .domain = ""};
                c.node = &node;
                const calq_op_def *d = &calq__op_layout_convert;
                EXPECT(d->prepare(&c) == CALQ_OK);
                EXPECT(!fast || c.state);
                EXPECT((fast && c.state ? d->run_fast(&c) : d->run(&c)) == CALQ_OK);
                if (c.state) d->release(c.state);
                c.state = NULL;
                c.in_layout = to_l;
                c.out_layout = from_l;
                in[0] = &y[fast];
                out[0] = &back[fast];
                EXPECT(d->prepare(&c) == CALQ_OK);
                EXPECT((fast && c.state ? d->run_fast(&c) : d->run(&c)) == CALQ_OK);
                if (c.state) d->release(c.state);
                EXPECT(t_same_bits(&back[fast], &x));
            }
            /* the reference loop and oneDNN's reorder write the same bytes, padding zero */
            EXPECT(memcmp(y[0].data, y[1].data, calq__layout_nbytes(&x, l)) == 0);
            calq_tensor pads = y[0];
            calq__layout_zero_pads(&pads, l);
            EXPECT(memcmp(y[0].data, y[1].data, calq__layout_nbytes(&x, l)) == 0);
            for (int k = 0; k < 2; k++) {
                free(y[k].data);
                free(back[k].data);
            }
        }
        calq_tensor_free_data(&x);
    }
}

/* ---- the public API on a real model ----------------------------------------------------------- */

typedef struct grab {
    int n;
    const char *names[64];
    calq_tensor got[64];
} grab;

static int grab_fn(void *user, const char *name, const calq_tensor *t)
{
    grab *g = user;
    for (int i = 0; i < g->n; i++)
        if (!strcmp(g->names[i], name) && !g->got[i].data) calq__tensor_clone(&g->got[i], t, NULL);
    return 0;
}

/* UltraFace with observers on every convolution's input (what calibration observes): the same
 * bits whether the other layers are fused or every tensor is observed (nothing fused). */
static void test_ultraface_observers(void)
{
    const char *shared = getenv("CALQ_SHARED");
    char path[4096];
    snprintf(path, sizeof path, "%s/models/ultraface/version-slim-320.onnx", shared ? shared : "../shared");
    if (!NEED_FILE(path)) return;
    calq_error err = {0};
    calq_model *m = NULL;
    EXPECT_STATUS(calq_model_load_onnx(path, &m, &err), CALQ_OK, &err, NULL);
    if (!m) return;
    int64_t xd[4] = {1, 3, 240, 320};
    calq_tensor x = t_rand_f32(11, 4, xd, -1, 1);
    grab obs = {0}, all = {0};
    int n_nodes = calq_model_num_nodes(m);
    for (int i = 0; i < n_nodes && obs.n < 64; i++) {
        calq_node_info ni;
        if (calq_model_node_info(m, i, &ni) != CALQ_OK || !ni.quantizable) continue;
        obs.names[obs.n++] = calq_model_node_input(m, i, 0);
    }
    all.n = obs.n;
    memcpy(all.names, obs.names, sizeof obs.names);
    EXPECT(obs.n > 20);
    calq_session_opts o = {.n_threads = 2, .kernels = CALQ_KERNELS_DEFAULT};
    calq_session *s1 = NULL, *s2 = NULL;
    EXPECT(calq_session_create(m, &o, &s1, &err) == CALQ_OK);
    EXPECT(calq_session_create(m, &o, &s2, &err) == CALQ_OK);
    EXPECT(calq_session_set_observer(s1, grab_fn, &obs, obs.names, obs.n, &err) == CALQ_OK);
    EXPECT(calq_session_set_observer(s2, grab_fn, &all, NULL, 0, &err) == CALQ_OK);
    EXPECT(calq_session_run(s1, &x, 1, &err) == CALQ_OK);
    EXPECT(calq_session_run(s2, &x, 1, &err) == CALQ_OK);
    for (int i = 0; i < obs.n; i++)
        if (!t_same_bits(&obs.got[i], &all.got[i])) {
            fprintf(stderr, "UltraFace: observed %s differs with fusion\n", obs.names[i]);
            failures++;
        }
    for (int i = 0; i < calq_model_num_outputs(m); i++) {
        const calq_tensor *a, *b;
        EXPECT(calq_session_output(s1, i, &a) == CALQ_OK && calq_session_output(s2, i, &b) == CALQ_OK);
        EXPECT(t_same_bits(a, b));
    }
    t_free_all(obs.got, obs.n);
    t_free_all(all.got, all.n);
    calq_session_free(s1);
    calq_session_free(s2);
    calq_tensor_free_data(&x);
    calq_model_free(m);
}

/* ---- Pad on layouts ----------------------------------------------------------------------------- */

/* Pads of a convolution's output, each read by one layer: constant 0 with uneven pads before an
 * AveragePool (Inception's), reflect before a convolution, edge with crops before a Relu,
 * constant 0.5 before a MaxPool (on blocked data only zero keeps the padding channels zero, so
 * it runs plain there), a pad of the channel axis (always plain), and a constant computed at run
 * time (the input's largest value: always plain, a prepared state would have frozen it). 12
 * channels: not a whole number of 8- or 16-blocks. */
static const char *const pad_names[] = {"p_zero", "p_reflect", "p_edge_crop", "p_half", "p_channels", "p_runtime"};
enum { N_PADS = 6 };

static int gb_pad(gb *b, const char *name, int x, const int64_t *pads, const char *mode, float value)
{
    char pn[64], vn[64];
    snprintf(pn, sizeof pn, "%s.pads", name);
    snprintf(vn, sizeof vn, "%s.value", name);
    int64_t pd[1] = {8};
    int ins[3] = {x, gb_const_t(b, pn, t_i64(pads, 1, pd)), gb_scalar(b, vn, value)};
    int y = gb_node(b, name, "Pad", ins, 3);
    gb_str(b, "mode", mode);
    return y;
}

static calq_graph *pad_graph(void)
{
    gb b = gb_new();
    int64_t xd[4] = {2, 12, 9, 7};
    int x = gb_input(&b, "x", xd, 4);
    int c = gb_conv(&b, "c0", x, 12, 12, 3, 1, 1);
    const int64_t zero[8] = {0, 0, 1, 2, 0, 0, 2, 1}, refl[8] = {0, 0, 1, 1, 0, 0, 1, 1},
                  crop[8] = {0, 0, -1, 1, 0, 0, 1, -2}, chan[8] = {0, 1, 0, 0, 0, 1, 0, 0};
    int64_t k3[2] = {3, 3}, k2[2] = {2, 2};
    int p0 = gb_pad(&b, pad_names[0], c, zero, "constant", 0.0f);
    gb_output(&b, gb_node(&b, "ap", "AveragePool", &p0, 1));
    gb_ints(&b, "kernel_shape", k3, 2);
    gb_output(&b, gb_conv(&b, "c1", gb_pad(&b, pad_names[1], c, refl, "reflect", 0.0f), 12, 8, 3, 1, 1));
    gb_output(&b, gb_unary(&b, "r", "Relu", gb_pad(&b, pad_names[2], c, crop, "edge", 0.0f)));
    int p3 = gb_pad(&b, pad_names[3], c, refl, "constant", 0.5f);
    gb_output(&b, gb_node(&b, "mp", "MaxPool", &p3, 1));
    gb_ints(&b, "kernel_shape", k2, 2);
    gb_output(&b, gb_conv(&b, "c2", gb_pad(&b, pad_names[4], c, chan, "constant", 0.0f), 14, 8, 3, 1, 1));
    int cv = gb_node(&b, "xmax", "ReduceMax", &x, 1);
    gb_int(&b, "keepdims", 0);
    int64_t pd[1] = {8};
    int rin[3] = {c, gb_const_t(&b, "p_runtime.pads", t_i64(refl, 1, pd)), cv};
    gb_output(&b, gb_node(&b, pad_names[5], "Pad", rin, 3));
    return gb_finish(&b);
}

/* Which of the Pads read their input in a non-plain layout in g's fused plan (bit i: pad_names[i]). */
static unsigned pads_on_layouts(const calq_graph *g, const calq_tensor *x, calq_layout layout)
{
    calq_error err = {0};
    calq_plan_opts o = {.use_fast = true, .fuse = true, .layout = layout};
    calq_plan *p = NULL;
    unsigned bits = 0;
    if (calq__plan_build_opts(g, x, 1, &o, &p, &err) != CALQ_OK) return 0;
    for (int s = 0; s < p->n_steps; s++) {
        const calq_plan_step *st = &p->steps[s];
        if (strcmp(st->def->op_type, "Pad") || !st->fast || st->in_layout[0] == CALQ_LAYOUT_PLAIN) continue;
        for (int i = 0; i < N_PADS; i++)
            if (!strcmp(g->nodes[st->node].name, pad_names[i])) bits |= 1u << i;
    }
    calq__plan_free(p);
    return bits;
}

static void test_pad_layouts(void)
{
    calq_graph *g = pad_graph();
    int64_t xd[4] = {2, 12, 9, 7};
    calq_tensor x = t_rand_f32(5, 4, xd, -1, 1);
    calq_tensor ref[N_PADS] = {0};
    run_reference(g, &x, ref);
    for (size_t li = 0; li < sizeof layouts / sizeof layouts[0]; li++) {
        if (!layout_available(layouts[li])) continue;
        const calq_layout l = layouts[li] ? layouts[li] : calq__layout_native();
        const unsigned want = l == CALQ_LAYOUT_PLAIN ? 0u : l == CALQ_LAYOUT_CHANNELS_LAST ? 0xfu : 0x7u;
        const unsigned got = pads_on_layouts(g, &x, layouts[li]);
        if (got != want) {
            fprintf(stderr, "%s: Pads on layouts 0x%x, expected 0x%x\n", layout_names[li], got, want);
            failures++;
        }
        calq_tensor o1[N_PADS] = {0}, o2[N_PADS] = {0}, o3[N_PADS] = {0};
        run_fused_123(g, &x, layouts[li], o1, o2, o3, NULL);
        for (int i = 0; i < N_PADS; i++) {
            char what[128];
            snprintf(what, sizeof what, "%s, Pad output %d: fast vs reference", layout_names[li], i);
            EXPECT(t_close(&o1[i], &ref[i], 1e-4, 1e-5, what));
            EXPECT(t_same_bits(&o1[i], &o2[i]) && t_same_bits(&o1[i], &o3[i]));
        }
        t_free_all(o1, N_PADS);
        t_free_all(o2, N_PADS);
        t_free_all(o3, N_PADS);
    }
    t_free_all(ref, N_PADS);
    calq_tensor_free_data(&x);
    calq__graph_free(g);
}

/* ---- BatchNormalization with post-ops ------------------------------------------------------------ */

/* Pre-activation blocks after a Concat (DenseNet's): BN then Relu, LeakyRelu, or Clip then Relu,
 * each fused into the BN's pass over the tensor (32 channels: the Concat of two 16-channel
 * convolutions stays blocked in every layout); and BN then a LeakyRelu of slope 0, not fused (its
 * 0 * x gives -0 where the post-op gives +0). Every output is the bits of a run that fuses
 * nothing (every value kept: the same convolutions, then BN and the activations on their own),
 * and within tolerance of the reference kernels. */
enum { N_BN = 4 };
static calq_graph *bn_post_graph(void)
{
    gb b = gb_new();
    int64_t xd[4] = {2, 5, 6, 7}, cd[1] = {32};
    int x = gb_input(&b, "x", xd, 4);
    int ins[2] = {gb_conv(&b, "ca", x, 5, 16, 3, 1, 1), gb_conv(&b, "cb", x, 5, 16, 1, 1, 1)};
    int cat = gb_node(&b, "cat", "Concat", ins, 2);
    gb_int(&b, "axis", 1);
    const char *act[N_BN] = {"Relu", "LeakyRelu", "Clip", "LeakyRelu"};
    for (int i = 0; i < N_BN; i++) {
        char n[5][32];
        for (int k = 0; k < 5; k++) snprintf(n[k], sizeof n[k], "bn%d.%d", i, k);
        int bn_in[5] = {cat, gb_const(&b, n[1], cd, 1, 0.5f, 1.5f), gb_const(&b, n[2], cd, 1, -0.5f, 0.5f),
                        gb_const(&b, n[3], cd, 1, -0.2f, 0.2f), gb_const(&b, n[4], cd, 1, 0.5f, 2.0f)};
        int y = gb_node(&b, n[0], "BatchNormalization", bn_in, 5);
        char an[32];
        snprintf(an, sizeof an, i == 3 ? "leaky0" : "act%d", i);
        if (i == 2) {
            int cin[3] = {y, gb_scalar(&b, "lo", -0.25f), gb_scalar(&b, "hi", 0.75f)};
            y = gb_node(&b, an, "Clip", cin, 3);
            y = gb_unary(&b, "act3", "Relu", y);
        } else {
            y = gb_unary(&b, an, act[i], y);
            if (i == 1 || i == 3) gb_float(&b, "alpha", i == 1 ? 0.125f : 0.0f);
        }
        gb_output(&b, y);
    }
    return gb_finish(&b);
}

static void test_bn_post_ops(void)
{
    calq_graph *g = bn_post_graph();
    int64_t xd[4] = {2, 5, 6, 7};
    calq_tensor x = t_rand_f32(11, 4, xd, -1, 1);
    calq_tensor ref[N_BN] = {0}, tmp[1];
    run_reference(g, &x, ref);
    for (size_t li = 0; li < sizeof layouts / sizeof layouts[0]; li++) {
        if (!layout_available(layouts[li]) || (li == 0 && calq__layout_native() == CALQ_LAYOUT_PLAIN)) continue;
        calq_tensor o1[N_BN] = {0}, o2[N_BN] = {0}, o3[N_BN] = {0};
        bool *has = calloc((size_t)g->n_nodes + 1, sizeof *has);
        run_fused_123(g, &x, layouts[li], o1, o2, o3, has);
        calq_tensor unfused[N_BN] = {0};
        run_cfg rc = {.fast = true, .fuse = true, .layout = layouts[li], .threads = 1, .n_keep = -1};
        run_graph(g, &x, &rc, NULL, 0, tmp, unfused, NULL, NULL);
        for (int i = 0; i < N_BN; i++) {
            char what[96];
            snprintf(what, sizeof what, "%s, BN output %d: fast vs reference", layout_names[li], i);
            EXPECT(t_close(&o1[i], &ref[i], 1e-4, 1e-5, what));
            if (!t_same_bits(&o1[i], &unfused[i])) {
                fprintf(stderr, "%s: BN output %d differs from the unfused run\n", layout_names[li], i);
                failures++;
            }
            EXPECT(t_same_bits(&o1[i], &o2[i]) && t_same_bits(&o1[i], &o3[i]));
        }
        t_free_all(unfused, N_BN);
        for (int ni = 0; ni < g->n_nodes; ni++)
            if (!strncmp(g->nodes[ni].name, "act", 3) && has[ni]) {
                fprintf(stderr, "%s: %s ran as its own step\n", layout_names[li], g->nodes[ni].name);
                failures++;
            }
        for (int ni = 0; ni < g->n_nodes; ni++)
            if (!strcmp(g->nodes[ni].name, "leaky0") && !has[ni]) {
                fprintf(stderr, "%s: the slope-0 LeakyRelu was fused\n", layout_names[li]);
                failures++;
            }
        free(has);
        t_free_all(o1, N_BN);
        t_free_all(o2, N_BN);
        t_free_all(o3, N_BN);
    }
    t_free_all(ref, N_BN);
    calq_tensor_free_data(&x);
    calq__graph_free(g);
}

/* ---- views ------------------------------------------------------------------------------------------ */

/* Reshape / Flatten / Squeeze / Unsqueeze / Identity between arena tensors are aliases, not
 * copies (plan.c alias_views), chains of them included; but not of a tensor a fused residual
 * sum writes over in place while the view is still read: there conv cc's output is written over
 * ca's, and `keep_a` (an Identity of ca's output, on its layout, read after cc) must still hold
 * ca's values. */
static calq_graph *view_graph(void)
{
    gb b = gb_new();
    int64_t xd[4] = {2, 16, 6, 5};
    int x = gb_input(&b, "x", xd, 4);
    int a = gb_conv(&b, "ca", x, 16, 16, 3, 1, 1);
    int64_t sh1[2] = {2, 480}, sh2[1] = {2}, ax0[1] = {0}, d1[1] = {1};
    int r1[2] = {a, gb_const_t(&b, "sh1", t_i64(sh1, 1, sh2))};
    int v = gb_node(&b, "flat", "Reshape", r1, 2);
    int u1[2] = {v, gb_const_t(&b, "ax0", t_i64(ax0, 1, d1))};
    v = gb_node(&b, "unsq", "Unsqueeze", u1, 2);
    int s1[2] = {v, gb_const_t(&b, "ax0b", t_i64(ax0, 1, d1))};
    v = gb_node(&b, "sq", "Squeeze", s1, 2);
    v = gb_unary(&b, "id", "Identity", v);
    gb_output(&b, gb_unary(&b, "tail", "Relu", v)); /* reads the end of the chain */
    int keep_a = gb_unary(&b, "keep_a", "Identity", a);
    int c = gb_conv(&b, "cc", x, 16, 16, 3, 1, 1);
    int sum = gb_binary(&b, "sum", "Add", c, a); /* ca's output dies here: written over in place */
    int f1[1] = {gb_unary(&b, "rs", "Relu", sum)};
    gb_output(&b, gb_node(&b, "fl", "Flatten", f1, 1));
    gb_output(&b, gb_unary(&b, "late", "Neg", keep_a)); /* keep_a read after the sum */
    return gb_finish(&b);
}

static void test_views(void)
{
    calq_graph *g = view_graph();
    int64_t xd[4] = {2, 16, 6, 5};
    calq_tensor x = t_rand_f32(13, 4, xd, -1, 1);
    calq_tensor ref[3] = {0}, tmp[1];
    run_reference(g, &x, ref);
    for (int mode = 0; mode < 3; mode++) {
        /* reference kernels, fast unfused, fast fused */
        calq_plan_opts o = {.use_fast = mode > 0, .fuse = mode == 2};
        calq_error err = {0};
        calq_plan *p = NULL;
        EXPECT(calq__plan_build_opts(g, &x, 1, &o, &p, &err) == CALQ_OK);
        int views = 0, keep_a_view = 0;
        for (int s = 0; p && s < p->n_steps; s++) {
            views += p->steps[s].view;
            if (!strcmp(g->nodes[p->steps[s].node].name, "keep_a") && p->steps[s].view) keep_a_view = 1;
        }
        /* flat, unsq, sq, id and fl; keep_a too unless the sum is fused in place over ca's output */
        if (mode == 2) {
            EXPECT(views == 5 && !keep_a_view);
        } else {
            EXPECT(views == 6);
        }
        calq__plan_free(p);
        calq_tensor o1[3] = {0};
        run_cfg rc = {.fast = mode > 0, .fuse = mode == 2, .threads = 2};
        run_graph(g, &x, &rc, NULL, 0, tmp, o1, NULL, NULL);
        for (int i = 0; i < 3; i++) {
            char what[64];
            snprintf(what, sizeof what, "views, mode %d, output %d", mode, i);
            EXPECT(t_close(&o1[i], &ref[i], 1e-4, 1e-5, what));
        }
        t_free_all(o1, 3);
    }
    t_free_all(ref, 3);
    calq_tensor_free_data(&x);
    calq__graph_free(g);
}

/* ---- Winograd ---------------------------------------------------------------------------------- */

/* 3x3 convolutions the Winograd path takes (conv_wino.h) where oneDNN has it (AVX-512, at most 4
 * CPUs): with ReLU, with a residual sum, on a 112x112 map, behind a stride-2 convolution (the
 * direct kernel); oneDNN's own threading of the Winograd kernel gives other bits with 2 or 3
 * threads than with 1 on these shapes. Checks the path is taken, matches the reference kernels
 * and gives the same bits for 1, 2 and 3 threads, at batch 1 and 2. */
static calq_graph *wino_graph(int64_t batch)
{
    gb b = gb_new();
    int64_t xd[4] = {batch, 64, 112, 112};
    int x = gb_input(&b, "x", xd, 4);
    int a = gb_unary(&b, "ra", "Relu", gb_conv(&b, "ca", x, 64, 64, 3, 1, 1));
    int bb = gb_conv(&b, "cb", a, 64, 128, 3, 2, 1);
    int cc = gb_conv(&b, "cc", bb, 128, 128, 3, 1, 1);
    int s = gb_unary(&b, "rs", "Relu", gb_binary(&b, "sum", "Add", cc, bb));
    gb_output(&b, gb_conv(&b, "cd", s, 128, 96, 3, 1, 1));
    /* read only by an Add that is not absorbed (both operands the same): written in nChw16c,
     * converted for the Add */
    int t = gb_conv(&b, "ce", s, 128, 64, 3, 1, 1);
    gb_output(&b, gb_binary(&b, "dbl", "Add", t, t));
    return gb_finish(&b);
}

/* Convolutions of g's fast plan that run the Winograd path (-1: no plan). */
static int wino_steps(const calq_graph *g, const calq_tensor *x, int *n_blocked16)
{
    calq_error err = {0};
    calq_plan_opts o = {.use_fast = true, .fuse = true};
    calq_plan *p = NULL;
    if (calq__plan_build_opts(g, x, 1, &o, &p, &err) != CALQ_OK) return -1;
    int n = 0;
    for (int s = 0; s < p->n_steps; s++)
        if (!strcmp(p->steps[s].def->op_type, "Conv") && calq__conv_dnnl_is_wino(p->steps[s].state)) n++;
    *n_blocked16 = 0;
    for (int v = 0; v < p->n_vals; v++) *n_blocked16 += p->vals[v].layout == 16;
    calq__plan_free(p);
    return n;
}

static void test_winograd(int64_t batch)
{
    calq_graph *g = wino_graph(batch);
    int64_t xd[4] = {batch, 64, 112, 112};
    calq_tensor x = t_rand_f32(7, 4, xd, -1, 1);
    /* oneDNN 2.6 has Winograd kernels for AVX-512 only */
    const calq_layout nat = calq__layout_native();
    const bool expected =
        layout_available(16) && (nat == 16 || nat == CALQ_LAYOUT_CHANNELS_LAST) && sysconf(_SC_NPROCESSORS_ONLN) <= 4;
    int n16 = 0;
    const int n_wino = wino_steps(g, &x, &n16);
    /* between the Winograd layers the activations stay in its nChw16c: ra's and rs's outputs
     * (read by convolutions), ce's (read by the Add), and the copy of cb's output that cc's fused
     * residual sum adds */
    if (expected && nat == CALQ_LAYOUT_CHANNELS_LAST) EXPECT(n16 == 4);
    /* ca, cc, cd and ce; cb has stride 2 */
    EXPECT(n_wino == (expected ? 4 : 0));
    calq_tensor ref[2] = {0}, o1[2] = {0}, o2[2] = {0}, o3[2] = {0};
    run_reference(g, &x, ref);
    run_fused_123(g, &x, 0, o1, o2, o3, NULL);
    for (int i = 0; i < 2; i++) {
        char what[96];
        snprintf(what, sizeof what, "Winograd graph, batch %lld, output %d: fast vs reference", (long long)batch, i);
        EXPECT(t_close(&o1[i], &ref[i], 1e-4, 1e-4, what));
        EXPECT(t_same_bits(&o1[i], &o2[i]) && t_same_bits(&o1[i], &o3[i]));
    }
    t_free_all(ref, 2);
    t_free_all(o1, 2);
    t_free_all(o2, 2);
    t_free_all(o3, 2);
    calq_tensor_free_data(&x);
    calq__graph_free(g);
}

/* SiLU and the logistic at the end of a convolution's chain run as calq's own pass (logistic.h)
 * where the CPU has AVX-512: the logistic only on outputs without padding channels (its f(0) is
 * 1/2), SiLU on any (the next convolution reads the padding channels of cc's input), and neither
 * when another post-op follows (cd: SiLU then the residual sum stays oneDNN's). */
static calq_graph *tail_graph(int64_t batch)
{
    gb b = gb_new();
    int64_t xd[4] = {batch, 20, 9, 9};
    int x = gb_input(&b, "x", xd, 4);
    int sa = gb_unary(&b, "sa", "Sigmoid", gb_conv(&b, "ca", x, 20, 20, 3, 1, 1));
    int cb = gb_conv(&b, "cb", sa, 20, 20, 3, 1, 1);
    int sb = gb_binary(&b, "sb", "Mul", cb, gb_unary(&b, "sb_sig", "Sigmoid", cb));
    int cc = gb_conv(&b, "cc", sb, 20, 32, 1, 1, 1);
    int sc = gb_binary(&b, "sc", "Mul", gb_unary(&b, "sc_sig", "Sigmoid", cc), cc);
    int cd = gb_conv(&b, "cd", sc, 32, 32, 3, 1, 1);
    int sd = gb_binary(&b, "sd", "Mul", cd, gb_unary(&b, "sd_sig", "Sigmoid", cd));
    /* a graph output at the end of a chain would make it exact only: no SiLU fused there */
    gb_output(&b, gb_conv(&b, "ce", gb_binary(&b, "sum", "Add", sd, sc), 32, 8, 1, 1, 1));
    return gb_finish(&b);
}

static void test_logistic_tails(int64_t batch)
{
    calq_graph *g = tail_graph(batch);
    int64_t xd[4] = {batch, 20, 9, 9};
    calq_tensor x = t_rand_f32(5, 4, xd, -3, 3);
    calq_tensor ref[1] = {0};
    run_reference(g, &x, ref);
    for (size_t li = 0; li < sizeof layouts / sizeof layouts[0]; li++) {
        if (!layout_available(layouts[li])) continue;
        const calq_layout l = layouts[li] ? layouts[li] : calq__layout_native();
        if (l == CALQ_LAYOUT_PLAIN) continue;
        calq_error err = {0};
        calq_plan_opts o = {.use_fast = true, .fuse = true, .layout = layouts[li]};
        calq_plan *p = NULL;
        const bool pads = l == 8 || l == 16;
        if (calq__plan_build_opts(g, &x, 1, &o, &p, &err) != CALQ_OK) {
            fprintf(stderr, "plan: %s\n", err.message);
            failures++;
        }
        for (int s = 0; p && s < p->n_steps; s++) {
            const calq_plan_step *st = &p->steps[s];
            const char *name = g->nodes[st->node].name;
            if (strcmp(st->def->op_type, "Conv") != 0 || !strcmp(name, "ce")) continue;
            /* ca: the logistic, on a 20-channel output; cd: SiLU then the sum where oneDNN's
             * kernel takes both (brgconv), else SiLU alone, then as a tail */
            const bool want = calq__logistic_fast() && (!strcmp(name, "ca")   ? !pads
                                                        : !strcmp(name, "cd") ? st->n_post == 1
                                                                              : true);
            if (st->n_post < 1 || calq__conv_dnnl_has_tail(st->state) != want) {
                fprintf(stderr, "%s: %s has %d post-ops, %s tail\n", layout_names[li], name, st->n_post,
                        calq__conv_dnnl_has_tail(st->state) ? "a" : "no");
                failures++;
            }
        }
        calq__plan_free(p);
        calq_tensor o1[1] = {0}, o2[1] = {0}, o3[1] = {0};
        run_fused_123(g, &x, layouts[li], o1, o2, o3, NULL);
        char what[96];
        snprintf(what, sizeof what, "tail graph, batch %lld, %s: fast vs reference", (long long)batch,
                 layout_names[li]);
        EXPECT(t_close(&o1[0], &ref[0], 1e-5, 1e-5, what));
        EXPECT(t_same_bits(&o1[0], &o2[0]) && t_same_bits(&o1[0], &o3[0]));
        t_free_all(o1, 1);
        t_free_all(o2, 1);
        t_free_all(o3, 1);
    }
    t_free_all(ref, 1);
    calq_tensor_free_data(&x);
    calq__graph_free(g);
}

/* GlobalAveragePool on the executor's layouts sums each channel in double in position order, as
 * the reference does: the same bits, for 170 channels (two groups of 64 neighbours in channels
 * last and a partial one of 42: two 16-channel pieces and 10) and for the blocked layouts. */
static void test_gap_bits(void)
{
    gb b = gb_new();
    int64_t xd[4] = {2, 3, 11, 13};
    int x = gb_input(&b, "x", xd, 4);
    int c = gb_conv(&b, "c", x, 3, 170, 3, 1, 1);
    gb_output(&b, gb_unary(&b, "gap", "GlobalAveragePool", c));
    calq_graph *g = gb_finish(&b);
    calq_tensor in = t_rand_f32(11, 4, xd, -1, 1), ref[1] = {0};
    for (size_t li = 0; li < sizeof layouts / sizeof layouts[0]; li++) {
        if (!layout_available(layouts[li])) continue;
        /* the convolution's own output as the fast plan computes it, then both pools */
        const char *keep[1] = {"c.out"};
        calq_tensor conv_out[1], o[1] = {0};
        run_cfg rc = {.fast = true, .fuse = true, .layout = layouts[li], .threads = 2, .keep = keep, .n_keep = 1};
        int n_steps = 0;
        bool has[4] = {0};
        run_graph(g, &in, &rc, keep, 1, conv_out, o, &n_steps, has);
        /* the reference pool of that tensor: a graph of the pool alone */
        gb b2 = gb_new();
        int64_t cd[4] = {2, 170, 11, 13};
        gb_output(&b2, gb_unary(&b2, "gap", "GlobalAveragePool", gb_input(&b2, "x", cd, 4)));
        calq_graph *g2 = gb_finish(&b2);
        run_reference(g2, &conv_out[0], ref);
        char what[96];
        snprintf(what, sizeof what, "GlobalAveragePool, %s: fast vs reference bits", layout_names[li]);
        if (!t_same_bits(&o[0], &ref[0])) {
            fprintf(stderr, "%s differ\n", what);
            failures++;
        }
        t_free_all(conv_out, 1);
        t_free_all(o, 1);
        t_free_all(ref, 1);
        calq__graph_free(g2);
    }
    calq_tensor_free_data(&in);
    calq__graph_free(g);
}

/* A ConvTranspose with an [IC, OC, k, k] constant weight and a bias. */
static int gb_deconv_g(gb *b, const char *name, int x, int64_t cin, int64_t cout, int64_t k, int64_t stride,
                       int64_t pad, int64_t out_pad, int64_t group)
{
    char wn[96], bn[96];
    snprintf(wn, sizeof wn, "%s.w", name);
    snprintf(bn, sizeof bn, "%s.b", name);
    const float r = 1.5f / sqrtf((float)(cin / group * k * k));
    int64_t wd[4] = {cin, cout / group, k, k}, bd[1] = {cout};
    int ins[3] = {x, gb_const(b, wn, wd, 4, -r, r), gb_const(b, bn, bd, 1, -0.2f, 0.2f)};
    int y = gb_node(b, name, "ConvTranspose", ins, 3);
    int64_t pads[4] = {pad, pad, pad, pad}, st[2] = {stride, stride}, op[2] = {out_pad, out_pad};
    gb_ints(b, "pads", pads, 4);
    gb_ints(b, "strides", st, 2);
    if (out_pad) gb_ints(b, "output_padding", op, 2);
    if (group > 1) gb_int(b, "group", group);
    return y;
}

static int gb_deconv(gb *b, const char *name, int x, int64_t cin, int64_t cout, int64_t k, int64_t stride, int64_t pad,
                     int64_t out_pad)
{
    return gb_deconv_g(b, name, x, cin, cout, k, stride, pad, out_pad, 1);
}

/* Transposed convolutions of the forms the channels-last path runs as matrix products
 * (deconv_gemm.h): kernel == stride (2x2 / 2, 3x3 / 3), overlapping kernels (4x4 / 2 pad 1,
 * 3x3 / 2 pad 1 with output_padding 1, 5x5 / 1 pad 2), grouped ones (depthwise, 4 groups), with
 * post-ops it applies (Relu,
 * LeakyRelu, Clip, the residual sum, per-channel multiply); against the reference, for 1, 2 and
 * 3 threads, and the post-ops absorbed. */
static void test_deconv_gemm(int64_t batch)
{
    gb b = gb_new();
    int64_t xd[4] = {batch, 24, 9, 11};
    int x = gb_input(&b, "x", xd, 4);
    int c0 = gb_unary(&b, "r0", "Relu", gb_conv(&b, "c0", x, 24, 40, 3, 1, 1));
    int d1 = gb_unary(&b, "r1", "Relu", gb_deconv(&b, "d1", c0, 40, 24, 4, 2, 1, 0)); /* 18 x 22 */
    int d2 = gb_deconv(&b, "d2", c0, 40, 24, 2, 2, 0, 0);
    int s12 = gb_unary(&b, "r12", "Relu", gb_binary(&b, "sum12", "Add", d2, d1));           /* residual over d1 */
    int d3 = gb_unary(&b, "l3", "LeakyRelu", gb_deconv(&b, "d3", s12, 24, 16, 3, 2, 1, 1)); /* 36 x 44 */
    gb_float(&b, "alpha", 0.1f);
    int64_t kd[3] = {16, 1, 1};
    int d3m = gb_binary(&b, "mul3", "Mul", d3, gb_const(&b, "mulk", kd, 3, 0.5f, 1.5f));
    int d4 = gb_deconv(&b, "d4", d3m, 16, 8, 5, 1, 2, 0);
    int d4c = gb_unary(&b, "clip4", "Clip", d4);
    int clip_in[3] = {d4, gb_scalar(&b, "lo", -0.5f), gb_scalar(&b, "hi", 0.5f)};
    b.g->nodes[gb_last_node(&b)].n_inputs = 3;
    free(b.g->nodes[gb_last_node(&b)].inputs);
    b.g->nodes[gb_last_node(&b)].inputs = malloc(sizeof clip_in);
    memcpy(b.g->nodes[gb_last_node(&b)].inputs, clip_in, sizeof clip_in);
    int d5 = gb_deconv(&b, "d5", d4c, 8, 4, 3, 3, 0, 0); /* 108 x 132 */
    gb_output(&b, d5);
    /* grouped: a depthwise 4x4 / 2 upsampling (FCN's learnable bilinear) and 10 -> 4 channels per
     * group */
    int d6 = gb_unary(&b, "r6", "Relu", gb_deconv_g(&b, "d6", c0, 40, 40, 4, 2, 1, 0, 40));
    gb_output(&b, gb_deconv_g(&b, "d7", d6, 40, 16, 3, 1, 1, 0, 4));
    calq_graph *g = gb_finish(&b);
    calq_tensor xt = t_rand_f32(21, 4, xd, -1, 1);
    calq_tensor ref[2] = {0}, o1[2] = {0}, o2[2] = {0}, o3[2] = {0};
    run_reference(g, &xt, ref);
    bool *has = calloc((size_t)g->n_nodes + 1, sizeof *has);
    run_fused_123(g, &xt, CALQ_LAYOUT_CHANNELS_LAST, o1, o2, o3, has);
    char what[96];
    for (int i = 0; i < 2; i++) {
        snprintf(what, sizeof what, "transposed convolutions, batch %lld, output %d: fast vs reference",
                 (long long)batch, i);
        EXPECT(t_close(&o1[i], &ref[i], 1e-4, 1e-5, what));
        EXPECT(t_same_bits(&o1[i], &o2[i]) && t_same_bits(&o1[i], &o3[i]));
    }
    /* the five ConvTransposes ran as matrix products, with their post-ops */
    calq_error err = {0};
    calq_plan_opts o = {.use_fast = true, .fuse = true, .layout = CALQ_LAYOUT_CHANNELS_LAST};
    calq_plan *p = NULL;
    int n_gemm = -1;
    if (calq__plan_build_opts(g, &xt, 1, &o, &p, &err) == CALQ_OK) {
        n_gemm = 0;
        for (int s = 0; s < p->n_steps; s++)
            if (!strcmp(p->steps[s].def->op_type, "ConvTranspose") && calq__conv_dnnl_is_deconv_gemm(p->steps[s].state))
                n_gemm++;
    }
    calq__plan_free(p);
    EXPECT(n_gemm == 7);
    const char *absorbed[] = {"r1", "sum12", "r12", "l3", "mul3", "clip4", "r6"};
    for (size_t k = 0; k < sizeof absorbed / sizeof absorbed[0]; k++)
        for (int ni = 0; ni < g->n_nodes; ni++)
            if (!strcmp(g->nodes[ni].name, absorbed[k]) && has[ni]) {
                fprintf(stderr, "deconv: %s ran as its own step\n", absorbed[k]);
                failures++;
            }
    free(has);
    t_free_all(ref, 2);
    t_free_all(o1, 2);
    t_free_all(o2, 2);
    t_free_all(o3, 2);
    calq_tensor_free_data(&xt);
    calq__graph_free(g);
}

/* A ResNet last stage's maps (7x7, 256 channels here): Winograd down to 7x7 since it keeps the
 * stage in nChw16c (a residual block: conv, conv + sum + Relu); the same bits for 1, 2 and 3
 * threads there too. */
static void test_winograd_7x7(int64_t batch)
{
    gb b = gb_new();
    int64_t xd[4] = {batch, 256, 7, 7};
    int x = gb_input(&b, "x", xd, 4);
    int h = gb_unary(&b, "r0", "Relu", gb_conv(&b, "c0", x, 256, 256, 3, 1, 1));
    int a = gb_unary(&b, "ra", "Relu", gb_conv(&b, "ca", h, 256, 256, 3, 1, 1));
    int r = gb_unary(&b, "rs", "Relu", gb_binary(&b, "sum", "Add", gb_conv(&b, "cb", a, 256, 256, 3, 1, 1), h));
    gb_output(&b, gb_conv(&b, "cd", r, 256, 64, 3, 1, 1));
    calq_graph *g = gb_finish(&b);
    calq_tensor xt = t_rand_f32(17, 4, xd, -1, 1);
    const calq_layout nat = calq__layout_native();
    const bool expected =
        layout_available(16) && (nat == 16 || nat == CALQ_LAYOUT_CHANNELS_LAST) && sysconf(_SC_NPROCESSORS_ONLN) <= 4;
    int n16 = 0;
    const int nw = wino_steps(g, &xt, &n16);
    /* c0, ca and cb (with its residual sum and Relu); not cd, whose 64 output channels are too
     * few on a map below 14x14 */
    if (nw != (expected ? 3 : 0)) fprintf(stderr, "7x7: %d Winograd layers\n", nw);
    EXPECT(nw == (expected ? 3 : 0));
    calq_tensor ref[1] = {0}, o1[1] = {0}, o2[1] = {0}, o3[1] = {0};
    run_reference(g, &xt, ref);
    run_fused_123(g, &xt, 0, o1, o2, o3, NULL);
    EXPECT(t_close(&o1[0], &ref[0], 1e-4, 1e-4, "Winograd 7x7: fast vs reference"));
    EXPECT(t_same_bits(&o1[0], &o2[0]) && t_same_bits(&o1[0], &o3[0]));
    t_free_all(ref, 1);
    t_free_all(o1, 1);
    t_free_all(o2, 1);
    t_free_all(o3, 1);
    calq_tensor_free_data(&xt);
    calq__graph_free(g);
}

/* ---- squeeze-and-excitation scales folded into the next convolution's weights ---------------- */

/* Two SE blocks: Mul(a, s) before a 1x1 convolution, Mul(s, b) before a grouped 3x3 one (weights
 * exactly half of its input's size), and a third whose Mul output is also a graph output. */
static calq_graph *se_graph(int64_t batch)
{
    gb b = gb_new();
    int64_t xd[4] = {batch, 16, 12, 12};
    int x = gb_input(&b, "x", xd, 4);
    int a = gb_unary(&b, "a_relu", "Relu", gb_conv(&b, "ca", x, 16, 32, 3, 1, 1));
    int g = gb_unary(&b, "gap", "GlobalAveragePool", a);
    int f = gb_unary(&b, "f_relu", "Relu", gb_conv(&b, "f1", g, 32, 8, 1, 1, 1));
    int sc = gb_unary(&b, "sig", "Sigmoid", gb_conv(&b, "f2", f, 8, 32, 1, 1, 1));
    int m1 = gb_binary(&b, "m1", "Mul", a, sc);
    int p1 = gb_conv(&b, "p1", m1, 32, 32, 1, 1, 1);
    int s2 = gb_unary(&b, "hsig", "HardSigmoid",
                      gb_conv(&b, "f3", gb_unary(&b, "gap2", "GlobalAveragePool", p1), 32, 32, 1, 1, 1));
    int m2 = gb_binary(&b, "m2", "Mul", s2, p1);
    int p2 = gb_conv(&b, "p2", m2, 32, 32, 3, 1, 4);
    int m3 = gb_binary(&b, "m3", "Mul", p2, s2);
    gb_output(&b, gb_conv(&b, "p3", m3, 32, 8, 1, 1, 1));
    gb_output(&b, m3);
    return gb_finish(&b);
}

/* The steps of g's plan on x: how many scale their convolution's weights, and whether the node
 * named `name` runs as a step of its own. */
static int scale_steps(const calq_graph *g, const calq_tensor *x, const char *const *keep, int n_keep, const char *name,
                       bool *name_runs)
{
    calq_error err = {0};
    bool *kv = calloc((size_t)g->n_values + 1, sizeof *kv);
    for (int i = 0; i < n_keep; i++) kv[calq__graph_find(g, keep[i])] = true;
    calq_plan_opts o = {.use_fast = true, .fuse = true, .keep = kv};
    calq_plan *p = NULL;
    int n = -1;
    *name_runs = false;
    if (calq__plan_build_opts(g, x, 1, &o, &p, &err) == CALQ_OK) {
        n = 0;
        for (int s = 0; s < p->n_steps; s++) {
            n += p->steps[s].def == &calq__op_scale_conv_weights;
            if (p->steps[s].def != &calq__op_layout_convert && !strcmp(g->nodes[p->steps[s].node].name, name))
                *name_runs = true;
        }
    } else {
        fprintf(stderr, "plan: %s\n", err.message);
        failures++;
    }
    calq__plan_free(p);
    free(kv);
    return n;
}

static void test_channel_scale(int64_t batch)
{
    calq_graph *g = se_graph(batch);
    int64_t xd[4] = {batch, 16, 12, 12};
    calq_tensor x = t_rand_f32(31, 4, xd, -1, 1);
    calq_tensor ref[2] = {0};
    run_reference(g, &x, ref);
    bool runs = false;
    /* batch 1: m1 and m2 go into p1's and p2's weights; m3 is a graph output and stays. Batch 2:
     * each image has its own factors, nothing is folded. */
    const int n = scale_steps(g, &x, NULL, 0, "m1", &runs);
    EXPECT(n == (batch == 1 ? 2 : 0) && runs == (batch != 1));
    scale_steps(g, &x, NULL, 0, "m2", &runs);
    EXPECT(runs == (batch != 1));
    scale_steps(g, &x, NULL, 0, "m3", &runs);
    EXPECT(runs);
    /* an observer anywhere: the unfused bits, so no folding */
    const char *obs[1] = {"a_relu.out"};
    EXPECT(scale_steps(g, &x, obs, 1, "m1", &runs) == 0 && runs);
    for (size_t li = 0; li < sizeof layouts / sizeof layouts[0]; li++) {
        if (!layout_available(layouts[li])) continue;
        calq_tensor o1[2] = {0}, o2[2] = {0}, o3[2] = {0};
        run_fused_123(g, &x, layouts[li], o1, o2, o3, NULL);
        for (int i = 0; i < 2; i++) {
            char what[96];
            snprintf(what, sizeof what, "SE graph, batch %lld, %s, output %d: fast vs reference", (long long)batch,
                     layout_names[li], i);
            EXPECT(t_close(&o1[i], &ref[i], 1e-5, 1e-5, what));
            EXPECT(t_same_bits(&o1[i], &o2[i]) && t_same_bits(&o1[i], &o3[i]));
        }
        t_free_all(o1, 2);
        t_free_all(o2, 2);
        t_free_all(o3, 2);
    }
    t_free_all(ref, 2);
    calq_tensor_free_data(&x);
    calq__graph_free(g);
}

int main(void)
{
    test_channel_scale(1);
    test_channel_scale(2);
    test_deconv_gemm(1);
    test_deconv_gemm(2);
    test_winograd(1);
    test_winograd(2);
    test_winograd_7x7(1);
    test_winograd_7x7(2);
    test_gap_bits();
    test_logistic_tails(1);
    test_logistic_tails(2);
    test_conversions();
    test_pad_layouts();
    test_bn_post_ops();
    test_views();
    test_mixed_graph(1);
    test_mixed_graph(3);
    test_kept_values();
    test_ultraface_observers();
    if (failures) fprintf(stderr, "%d failures\n", failures);
    return TEST_RESULT();
}
