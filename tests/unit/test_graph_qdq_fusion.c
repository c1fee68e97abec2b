/* QDQ fusion (src/graph/fuse_qdq.c) on small hand-built graphs: what onnxruntime's x86 CPU
 * execution provider fuses is fused (DQ -> Conv -> [Relu / Clip] -> Q into QLinearConv, Gemm
 * into QGemm, MatMul into QLinearMatMul / MatMulIntegerToFloat) and computes exactly the
 * integer formula Σ(q_x − o_x)(q_w − o_w) + bias_q requantized once (amct-reference.md §9.1);
 * what it does not fuse is left alone (an int8 tensor read by several layers, a weight that does
 * not come from a DequantizeLinear, a Relu / Clip the Q's range does not make redundant, a bias
 * whose scale is not x_scale·w_scale, a Gemm with a bias and alpha != 1, a Relu before a Q with
 * a negative scale, a Clip whose removal would not be exact); MatMul with per-column weights
 * becomes MatMulIntegerToFloat; float graphs are untouched; a session with no_fusion runs the
 * graph as written. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/tensor.h"
#include "exec/plan.h"
#include "frontend/model.h"
#include "graph/passes.h"
#include "op_harness.h"

/* ---- graph building ------------------------------------------------------------------------ */

static calq_tensor t_new(calq_dtype dt, int ndim, const int64_t *dims, const void *data)
{
    calq_tensor t = {.dtype = dt, .ndim = ndim};
    calq_error err = {0};
    if (ndim) memcpy(t.dims, dims, sizeof(int64_t) * (size_t)ndim);
    calq__tensor_alloc(&t, &err);
    memcpy(t.data, data, calq__tensor_nbytes(&t));
    return t;
}

static int cst(calq_graph *g, const char *name, calq_tensor t)
{
    int v = calq__graph_value(g, name);
    calq_tensor *c = malloc(sizeof *c);
    *c = t;
    g->values[v].constant = c;
    g->values[v].dtype = t.dtype;
    g->values[v].ndim = t.ndim;
    memcpy(g->values[v].dims, t.dims, sizeof t.dims);
    return v;
}

static int scalar_f32(calq_graph *g, const char *name, float v)
{
    return cst(g, name, t_new(CALQ_DTYPE_FLOAT32, 0, NULL, &v));
}

static int scalar_zp(calq_graph *g, const char *name, int zp, calq_dtype dt)
{
    int8_t s8 = (int8_t)zp;
    uint8_t u8 = (uint8_t)zp;
    return cst(g, name, t_new(dt, 0, NULL, dt == CALQ_DTYPE_INT8 ? (const void *)&s8 : (const void *)&u8));
}

static int node(calq_graph *g, const char *name, const char *op, const int *in, int n_in, const char *out)
{
    int v = calq__graph_value(g, out);
    int i = calq__graph_add_node(g, name, op, "", in, n_in, &v, 1);
    g->nodes[i].opset = 13;
    return v;
}

static void attr_i(calq_graph *g, const char *node_name, const char *name, int64_t v)
{
    for (int i = 0; i < g->n_nodes; i++)
        if (!strcmp(g->nodes[i].name, node_name)) calq__node_add_attr(g, i, name, CALQ_ATTR_INT)->i = v;
}

static void attr_f(calq_graph *g, const char *node_name, const char *name, float v)
{
    for (int i = 0; i < g->n_nodes; i++)
        if (!strcmp(g->nodes[i].name, node_name)) calq__node_add_attr(g, i, name, CALQ_ATTR_FLOAT)->f = v;
}

static void attr_ints(calq_graph *g, const char *node_name, const char *name, const int64_t *v, int n)
{
    for (int i = 0; i < g->n_nodes; i++)
        if (!strcmp(g->nodes[i].name, node_name)) {
            calq_attr *a = calq__node_add_attr(g, i, name, CALQ_ATTR_INTS);
            a->n = n;
            a->ints = malloc(sizeof(int64_t) * (size_t)n);
            memcpy(a->ints, v, sizeof(int64_t) * (size_t)n);
        }
}

static int input(calq_graph *g, const char *name, int ndim, const int64_t *dims)
{
    return op_graph_input(g, name, CALQ_DTYPE_FLOAT32, ndim, dims);
}

/* x -> QuantizeLinear(s, zp) -> `name`_q -> DequantizeLinear -> returned value */
static int qdq(calq_graph *g, int x, const char *name, float s, int zp, calq_dtype zt)
{
    char b[5][96];
    snprintf(b[0], sizeof b[0], "%s_s", name);
    snprintf(b[1], sizeof b[1], "%s_z", name);
    snprintf(b[2], sizeof b[2], "%s_q", name);
    snprintf(b[3], sizeof b[3], "%s_dq", name);
    snprintf(b[4], sizeof b[4], "%s_Q", name);
    int sv = scalar_f32(g, b[0], s), zv = scalar_zp(g, b[1], zp, zt);
    int qin[3] = {x, sv, zv};
    int q = node(g, b[4], "QuantizeLinear", qin, 3, b[2]);
    snprintf(b[4], sizeof b[4], "%s_DQ", name);
    int din[3] = {q, sv, zv};
    return node(g, b[4], "DequantizeLinear", din, 3, b[3]);
}

/* int8 weight (pseudo-random in [-100, 100]) with per-channel (ns > 1, on `axis`) or per-tensor
 * scales -> DequantizeLinear; the int8 values go to *wq (caller frees) when wq is not NULL. */
static int weight(calq_graph *g, const char *name, int ndim, const int64_t *dims, const float *s, int ns, int axis,
                  unsigned seed, int8_t **wq)
{
    int64_t n = calq__shape_numel(dims, ndim), nsd = ns;
    int8_t *w = malloc((size_t)n), *z = calloc((size_t)ns, 1);
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        w[i] = (int8_t)((int)((seed >> 16) % 201) - 100);
    }
    char b[4][96];
    snprintf(b[0], sizeof b[0], "%s_wq", name);
    snprintf(b[1], sizeof b[1], "%s_ws", name);
    snprintf(b[2], sizeof b[2], "%s_wz", name);
    snprintf(b[3], sizeof b[3], "%s_w", name);
    int in[3] = {cst(g, b[0], t_new(CALQ_DTYPE_INT8, ndim, dims, w)),
                 cst(g, b[1], t_new(CALQ_DTYPE_FLOAT32, ns > 1, &nsd, s)),
                 cst(g, b[2], t_new(CALQ_DTYPE_INT8, ns > 1, &nsd, z))};
    snprintf(b[0], sizeof b[0], "%s_WDQ", name);
    int v = node(g, b[0], "DequantizeLinear", in, 3, b[3]);
    if (ns > 1) attr_i(g, b[0], "axis", axis);
    if (wq)
        *wq = w;
    else
        free(w);
    free(z);
    return v;
}

/* int32 bias -> DequantizeLinear with scale[c] = sx * sw[c] * scale_factor */
static int bias(calq_graph *g, const char *name, const int32_t *b, int n, float sx, const float *sw, int nsw,
                float scale_factor)
{
    int64_t d = n;
    float *s = malloc(sizeof(float) * (size_t)n);
    int32_t *z = calloc((size_t)n, sizeof(int32_t));
    for (int c = 0; c < n; c++) s[c] = sx * sw[nsw > 1 ? c : 0] * scale_factor;
    char b0[96], b1[96], b2[96], b3[96], b4[96];
    snprintf(b0, sizeof b0, "%s_bq", name);
    snprintf(b1, sizeof b1, "%s_bs", name);
    snprintf(b2, sizeof b2, "%s_bz", name);
    snprintf(b3, sizeof b3, "%s_b", name);
    snprintf(b4, sizeof b4, "%s_BDQ", name);
    int in[3] = {cst(g, b0, t_new(CALQ_DTYPE_INT32, 1, &d, b)), cst(g, b1, t_new(CALQ_DTYPE_FLOAT32, 1, &d, s)),
                 cst(g, b2, t_new(CALQ_DTYPE_INT32, 1, &d, z))};
    int v = node(g, b4, "DequantizeLinear", in, 3, b3);
    attr_i(g, b4, "axis", 0);
    free(s);
    free(z);
    return v;
}

static void finish(calq_graph *g)
{
    g->opset = 13;
    calq_error err = {0};
    if (calq__graph_toposort(g, &err) != CALQ_OK) fprintf(stderr, "toposort: %s\n", err.message);
}

/* ---- running ----------------------------------------------------------------------------------- */

/* Runs g on its inputs; clones the tensors named in `names` into got[] (caller frees data). */
static void run(const calq_graph *g, const calq_tensor *in, int n_in, const char *const *names, calq_tensor *got, int n)
{
    calq_plan *p = NULL;
    calq_error err = {0};
    memset(got, 0, sizeof(calq_tensor) * (size_t)n);
    if (calq__plan_build(g, in, n_in, false, 0, &p, &err) != CALQ_OK) {
        fprintf(stderr, "plan: %s\n", err.message);
        failures++;
        return;
    }
    for (int i = 0; i < n_in; i++) p->vals[g->inputs[i]].t.data = in[i].data;
    for (int v = 0; v < g->n_values; v++) /* inputs and tensors folded at plan time */
        for (int k = 0; k < n; k++)
            if ((p->vals[v].kind == CALQ_PV_INPUT || p->vals[v].kind == CALQ_PV_FOLDED) &&
                !strcmp(g->values[v].name, names[k]) && !got[k].data)
                calq__tensor_clone(&got[k], &p->vals[v].t, &err);
    for (int s = 0; s < p->n_steps; s++) {
        if (calq__plan_run_step(p, s, &err) != CALQ_OK) {
            fprintf(stderr, "run: %s\n", err.message);
            failures++;
            break;
        }
        const calq_node *nd = &g->nodes[p->steps[s].node];
        for (int k = 0; k < n; k++)
            if (!strcmp(g->values[nd->outputs[0]].name, names[k]) && !got[k].data)
                calq__tensor_clone(&got[k], &p->vals[nd->outputs[0]].t, &err);
        calq__plan_release_after(p, s);
    }
    calq__plan_free(p);
    for (int k = 0; k < n; k++)
        if (!got[k].data) {
            fprintf(stderr, "tensor %s was not computed\n", names[k]);
            failures++;
        }
}

static int count_op(const calq_graph *g, const char *op)
{
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) n += strcmp(g->nodes[i].op_type, op) == 0;
    return n;
}

static const calq_node *find_node(const calq_graph *g, const char *name)
{
    for (int i = 0; i < g->n_nodes; i++)
        if (!strcmp(g->nodes[i].name, name)) return &g->nodes[i];
    return NULL;
}

/* clone + pass; returns the rewritten copy (owner: caller) */
static calq_graph *fused(const calq_graph *g, int *n_fused, int *n_removed)
{
    calq_graph *f = NULL;
    calq_error err = {0};
    EXPECT_OK(calq__graph_clone(g, &f, &err));
    EXPECT_OK(calq__pass_fuse_qdq(f, n_fused, n_removed, &err));
    return f;
}

static int64_t q8(const calq_tensor *t, int64_t i)
{
    return t->dtype == CALQ_DTYPE_INT8 ? ((const int8_t *)t->data)[i] : ((const uint8_t *)t->data)[i];
}

static int64_t requant(int64_t acc, float mult, int64_t zp, calq_dtype t)
{
    float r = calq_round((float)acc * mult, CALQ_ROUND_HALF_EVEN) + (float)zp;
    float lo = t == CALQ_DTYPE_INT8 ? -128.0f : 0.0f, hi = t == CALQ_DTYPE_INT8 ? 127.0f : 255.0f;
    return (int64_t)(r < lo ? lo : r > hi ? hi : r);
}

/* QLinearConv by its definition (2-D, stride 1, pads p on every side), into a y of y's dtype:
 * acc = b[m] + Σ(q_x − zx)·q_w exact, y = requant(acc · (sx·sw[m] / sy)) + zy. Returns the
 * number of elements of y that differ from `got`. */
static int64_t check_qconv(const calq_tensor *qx, int64_t zx, float sx, const int8_t *w, int64_t M, int64_t kh,
                           const float *sw, int nsw, const int32_t *b, float sy, int64_t zy, int64_t p,
                           const calq_tensor *got)
{
    const int64_t C = qx->dims[1], H = qx->dims[2], W = qx->dims[3], OH = H + 2 * p - kh + 1, OW = W + 2 * p - kh + 1;
    int64_t bad = 0;
    for (int64_t m = 0; m < M; m++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                int64_t acc = b ? b[m] : 0;
                for (int64_t c = 0; c < C; c++)
                    for (int64_t i = 0; i < kh; i++)
                        for (int64_t j = 0; j < kh; j++) {
                            int64_t ih = oh - p + i, iw = ow - p + j;
                            if (ih < 0 || iw < 0 || ih >= H || iw >= W) continue; /* zero in (q - zx) */
                            acc += (q8(qx, (c * H + ih) * W + iw) - zx) * w[((m * C + c) * kh + i) * kh + j];
                        }
                int64_t want = requant(acc, sx * sw[nsw > 1 ? m : 0] / sy, zy, got->dtype);
                bad += want != q8(got, (m * OH + oh) * OW + ow);
            }
    return bad;
}

static int64_t max_step(const calq_tensor *a, const calq_tensor *b)
{
    int64_t worst = 0, n = calq_tensor_numel(a);
    for (int64_t i = 0; i < n; i++) {
        int64_t d = llabs(q8(a, i) - q8(b, i));
        worst = d > worst ? d : worst;
    }
    return worst;
}

static void free_all(calq_tensor *t, int n)
{
    for (int i = 0; i < n; i++) calq_tensor_free_data(&t[i]);
}

/* ---- the cases ------------------------------------------------------------------------------- */

#define M1 8
#define M2 5

static const float SX = 0.05f, SY = 0.02f, S2 = 0.03f;
static const int ZX = -3, ZY = -128, Z2 = 7;
static int8_t *w1_q, *w2_q;
static float sw1[M1];
static int32_t b1[M1];

/* x[1,3,9,9] -> Q/DQ(SX, ZX) -> conv1 (per-channel w, bias, pads 1) -> c1 -> [act] -> Q/DQ(SY,
 * ZY) -> conv2 (1x1, per-tensor, no bias) -> c2 -> Q/DQ(S2, Z2) -> y (graph output).
 * act: 0 none, 1 Relu, 2 Clip(0, 6); bias_factor scales the bias DQ's scale. */
static calq_graph *chain(int act, float sy, int zy, float bias_factor)
{
    calq_graph *g = calq__graph_new();
    int64_t xd[4] = {1, 3, 9, 9}, w1d[4] = {M1, 3, 3, 3}, w2d[4] = {M2, M1, 1, 1};
    int x = input(g, "x", 4, xd);
    int xdq = qdq(g, x, "x", SX, ZX, CALQ_DTYPE_INT8);
    for (int m = 0; m < M1; m++) {
        sw1[m] = 0.002f + 0.0005f * (float)m;
        b1[m] = (m - 4) * 300;
    }
    free(w1_q);
    int w1 = weight(g, "conv1", 4, w1d, sw1, M1, 0, 11, &w1_q);
    int bb = bias(g, "conv1", b1, M1, SX, sw1, M1, bias_factor);
    int cin[3] = {xdq, w1, bb};
    int c1 = node(g, "conv1", "Conv", cin, 3, "c1");
    int64_t pads[4] = {1, 1, 1, 1};
    attr_ints(g, "conv1", "pads", pads, 4);
    int a = c1;
    if (act == 1) a = node(g, "relu1", "Relu", &c1, 1, "r1");
    if (act == 2) {
        int cl[3] = {c1, scalar_f32(g, "lo", 0.0f), scalar_f32(g, "hi", 6.0f)};
        a = node(g, "clip1", "Clip", cl, 3, "r1");
    }
    int ydq = qdq(g, a, "y1", sy, zy, CALQ_DTYPE_INT8);
    float sw2 = 0.004f;
    free(w2_q);
    int w2 = weight(g, "conv2", 4, w2d, &sw2, 1, 0, 23, &w2_q);
    int c2in[2] = {ydq, w2};
    int c2 = node(g, "conv2", "Conv", c2in, 2, "c2");
    op_graph_output(g, qdq(g, c2, "y2", S2, Z2, CALQ_DTYPE_INT8));
    finish(g);
    return g;
}

static void test_chain(const calq_tensor *x)
{
    calq_graph *g = chain(1, SY, ZY, 1.0f);
    int nf, nr;
    calq_graph *f = fused(g, &nf, &nr);
    EXPECT(nf == 2 && nr == 1);
    EXPECT(count_op(f, "QLinearConv") == 2 && count_op(f, "Conv") == 0 && count_op(f, "Relu") == 0);
    /* left: Q(x), the two integer layers, the DQ of the graph output */
    EXPECT(f->n_nodes == 4 && count_op(f, "QuantizeLinear") == 1 && count_op(f, "DequantizeLinear") == 1);
    const calq_node *c1 = find_node(f, "conv1");
    EXPECT(c1 && !strcmp(c1->op_type, "QLinearConv") && c1->n_inputs == 9);
    EXPECT(c1 && !strcmp(f->values[c1->outputs[0]].name, "y1_q")); /* writes the Q's tensor */
    EXPECT(c1 && calq__attr(c1, "pads") != NULL);
    EXPECT(g->n_nodes == 12); /* the original is untouched */

    const char *names[4] = {"x_q", "y1_q", "y2_q", "y2_dq"};
    calq_tensor a[4], b[4];
    run(f, x, 1, names, a, 4);
    run(g, x, 1, names, b, 4);
    if (a[1].data && a[2].data) {
        float sw2 = 0.004f;
        /* each integer layer equals the QLinearConv formula on its own int8 input */
        EXPECT(check_qconv(&a[0], ZX, SX, w1_q, M1, 3, sw1, M1, b1, SY, ZY, 1, &a[1]) == 0);
        EXPECT(check_qconv(&a[1], ZY, SY, w2_q, M2, 1, &sw2, 1, NULL, S2, Z2, 0, &a[2]) == 0);
        /* and the fake-quant run of the same file rounds once more per product: a step at most
         * on the first layer */
        int64_t d1 = max_step(&a[1], &b[1]);
        printf("chain: fused vs fake-quant, first layer: max %lld step(s)\n", (long long)d1);
        EXPECT(d1 <= 1);
    }
    free_all(a, 4);
    free_all(b, 4);
    calq__graph_free(f);
    calq__graph_free(g);

    /* no Relu: the same fusion, nothing removed */
    g = chain(0, SY, ZY, 1.0f);
    f = fused(g, &nf, &nr);
    EXPECT(nf == 2 && nr == 0);
    calq__graph_free(f);
    calq__graph_free(g);
}

/* A Relu / Clip stays (and its Conv runs in float) unless the Q's range makes it redundant. */
static void test_activations(void)
{
    struct {
        int act;
        float sy;
        int zy, fused, removed;
        const char *what;
    } cases[] = {
        {1, SY, ZY, 2, 1, "Relu before a Q with zero point -128: removed"},
        {1, SY, 0, 1, 0, "Relu before a Q with zero point 0: kept, conv1 not fused"},
        {2, 6.0f / 255.0f, ZY, 2, 1, "Clip(0, 6) before a Q covering [0, 6]: removed"},
        {2, 0.03f, ZY, 1, 0, "Clip(0, 6) before a Q covering [0, 7.65]: kept, conv1 not fused"},
        {2, 0.02f, ZY, 2, 1, "Clip(0, 6) before a Q covering [0, 5.1]: removed"},
        {1, -SY, ZY, 1, 0, "Relu before a Q with zero point -128 and a negative scale: kept, conv1 not fused"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        calq_graph *g = chain(cases[i].act, cases[i].sy, cases[i].zy, 1.0f);
        int nf, nr;
        calq_graph *f = fused(g, &nf, &nr);
        printf("%s: %d fused, %d removed\n", cases[i].what, nf, nr);
        EXPECT(nf == cases[i].fused && nr == cases[i].removed);
        const calq_node *c1 = find_node(f, "conv1");
        EXPECT(c1 && !strcmp(c1->op_type, cases[i].fused == 2 ? "QLinearConv" : "Conv"));
        calq__graph_free(f);
        calq__graph_free(g);
    }
}

/* A bias DQ whose scale is not x_scale·w_scale would change the layer if added to the integer
 * sum as it is (onnxruntime does so): calq keeps such a layer in float. */
static void test_bias_scale(void)
{
    calq_graph *g = chain(1, SY, ZY, 1.5f);
    int nf, nr;
    calq_graph *f = fused(g, &nf, &nr);
    EXPECT(nf == 1 && !strcmp(find_node(f, "conv1")->op_type, "Conv"));
    calq__graph_free(f);
    calq__graph_free(g);
}

/* x -> Q -> DQ read by two Convs. int8: the pair is not recoded to uint8 (the Q has two DQ
 * consumers once onnxruntime duplicates the DQ), so neither Conv is fused on x86. uint8: both. */
static void test_shared(calq_dtype zt, const calq_tensor *x)
{
    calq_graph *g = calq__graph_new();
    int64_t xd[4] = {1, 3, 9, 9}, wd[4] = {4, 3, 3, 3};
    int xv = input(g, "x", 4, xd);
    int zx = zt == CALQ_DTYPE_INT8 ? ZX : 120, zy = zt == CALQ_DTYPE_INT8 ? ZY : 0;
    int xdq = qdq(g, xv, "x", SX, zx, zt);
    const char *nm[2] = {"convA", "convB"}, *out[2] = {"cA", "cB"}, *qn[2] = {"yA", "yB"};
    float sw = 0.003f;
    for (int k = 0; k < 2; k++) {
        int in[2] = {xdq, weight(g, nm[k], 4, wd, &sw, 1, 0, 31u + (unsigned)k, NULL)};
        int c = node(g, nm[k], "Conv", in, 2, out[k]);
        op_graph_output(g, qdq(g, c, qn[k], SY, zy, zt));
    }
    finish(g);
    int nf, nr;
    calq_graph *f = fused(g, &nf, &nr);
    printf("a DQ with two consumers, %s: %d fused\n", zt == CALQ_DTYPE_INT8 ? "int8" : "uint8", nf);
    if (zt == CALQ_DTYPE_INT8) {
        EXPECT(nf == 0 && f->n_nodes == g->n_nodes);
    } else {
        EXPECT(nf == 2 && count_op(f, "QLinearConv") == 2);
        EXPECT(find_node(f, "x_DQ") == NULL); /* nothing reads it any more */
        const char *names[2] = {"yA_dq", "yB_dq"};
        calq_tensor a[2], b[2];
        run(f, x, 1, names, a, 2);
        run(g, x, 1, names, b, 2);
        EXPECT(t_close(&a[0], &b[0], 0, SY * 1.001, "uint8 shared: convA fused vs fake-quant (one step)"));
        EXPECT(t_close(&a[1], &b[1], 0, SY * 1.001, "uint8 shared: convB fused vs fake-quant (one step)"));
        free_all(a, 2);
        free_all(b, 2);
    }
    calq__graph_free(f);
    calq__graph_free(g);
}

/* A weight that is a float tensor computed by the graph (no DequantizeLinear) is not fused; a
 * weight that is a Q -> DQ of a graph tensor is (onnxruntime does not require constants). */
static void test_weights(void)
{
    for (int quantized = 0; quantized < 2; quantized++) {
        calq_graph *g = calq__graph_new();
        int64_t xd[4] = {1, 3, 9, 9}, wd[4] = {4, 3, 3, 3};
        int xv = input(g, "x", 4, xd), wv = input(g, "wf", 4, wd);
        int xdq = qdq(g, xv, "x", SX, ZX, CALQ_DTYPE_INT8);
        int in[2] = {xdq, quantized ? qdq(g, wv, "w", 0.01f, 0, CALQ_DTYPE_INT8) : wv};
        int c = node(g, "conv", "Conv", in, 2, "c");
        op_graph_output(g, qdq(g, c, "y", SY, ZY, CALQ_DTYPE_INT8));
        finish(g);
        int nf, nr;
        calq_graph *f = fused(g, &nf, &nr);
        printf("weight %s: %d fused\n", quantized ? "Q -> DQ of a graph input" : "a float graph input", nf);
        EXPECT(nf == quantized);
        calq__graph_free(f);
        calq__graph_free(g);
    }
}

/* A float model (no DequantizeLinear) is left exactly as it is. */
static void test_float_model(void)
{
    calq_graph *g = calq__graph_new();
    int64_t xd[4] = {1, 3, 9, 9}, wd[4] = {4, 3, 3, 3};
    int xv = input(g, "x", 4, xd);
    int in[2] = {xv, cst(g, "w", t_rand_f32(3, 4, wd, -1, 1))};
    int c = node(g, "conv", "Conv", in, 2, "c");
    op_graph_output(g, node(g, "relu", "Relu", &c, 1, "r"));
    finish(g);
    int nf = -1, nr = -1;
    calq_error err = {0};
    EXPECT_OK(calq__pass_fuse_qdq(g, &nf, &nr, &err));
    EXPECT(nf == 0 && nr == 0 && g->n_nodes == 2 && count_op(g, "Conv") == 1 && count_op(g, "Relu") == 1);
    calq__graph_free(g);
}

/* a[2,6] -> Q/DQ -> Gemm(transB, DQ w[4,6] per tensor, DQ bias) -> float output: QGemm with
 * y = (float)acc · (a_scale·w_scale), or -> Q: QGemm requantizing; MatMul(DQ w[6,4]) -> Q:
 * QLinearMatMul; MatMul with no Q after it: MatMulIntegerToFloat. */
static void test_matrix_layers(void)
{
    int64_t ad[2] = {2, 6}, wgd[2] = {4, 6}, wmd[2] = {6, 4};
    const float sa = 0.05f, swg = 0.01f, swm = 0.02f;
    const int za = 3;
    int32_t bq[4] = {-500, 20, 0, 777};
    for (int which = 0; which < 4; which++) { /* float QGemm, QLinearMatMul, MatMulIntegerToFloat, QGemm */
        calq_graph *g = calq__graph_new();
        int av = input(g, "a", 2, ad);
        int adq = qdq(g, av, "a", sa, za, CALQ_DTYPE_INT8);
        int8_t *wq = NULL;
        int y;
        const bool gemm = which == 0 || which == 3, requantized = which == 1 || which == 3;
        if (gemm) {
            int in[3] = {adq, weight(g, "fc", 2, wgd, &swg, 1, 0, 5, &wq), bias(g, "fc", bq, 4, sa, &swg, 1, 1.0f)};
            y = node(g, "fc", "Gemm", in, 3, "y");
            attr_i(g, "fc", "transB", 1);
        } else {
            int in[2] = {adq, weight(g, "mm", 2, wmd, &swm, 1, 0, 7, &wq)};
            y = node(g, "mm", "MatMul", in, 2, "y");
        }
        if (requantized) y = qdq(g, y, "yq", 0.1f, -5, CALQ_DTYPE_INT8);
        op_graph_output(g, y);
        finish(g);
        int nf, nr;
        calq_graph *f = fused(g, &nf, &nr);
        const char *op = gemm ? "QGemm" : which == 1 ? "QLinearMatMul" : "MatMulIntegerToFloat";
        EXPECT(nf == 1 && count_op(f, op) == 1);
        calq_tensor x = t_rand_f32(17, 2, ad, -3, 3);
        const char *names[2] = {"a_q", requantized ? "yq_q" : "y"};
        calq_tensor got[2];
        run(f, &x, 1, names, got, 2);
        int64_t bad = 0;
        for (int64_t m = 0; got[1].data && m < 2; m++)
            for (int64_t n = 0; n < 4; n++) {
                int64_t acc = gemm ? bq[n] : 0;
                for (int64_t k = 0; k < 6; k++)
                    acc += (q8(&got[0], m * 6 + k) - za) * (gemm ? wq[n * 6 + k] : wq[k * 4 + n]);
                const float mult = sa * (gemm ? swg : swm); /* QGemm: alpha (1) · a_scale · b_scale */
                if (requantized)
                    bad += requant(acc, mult / 0.1f, -5, CALQ_DTYPE_INT8) != q8(&got[1], m * 4 + n);
                else
                    bad += (float)acc * mult != ((const float *)got[1].data)[m * 4 + n];
            }
        printf("%s%s: %lld of 8 outputs differ from the integer formula\n", op, requantized ? " (int8 out)" : "",
               (long long)bad);
        EXPECT(bad == 0);
        free_all(got, 2);
        calq_tensor_free_data(&x);
        free(wq);
        calq__graph_free(f);
        calq__graph_free(g);
    }
}

/* Runs g and its fused copy f on x; returns the number of elements of output `name` that differ. */
static int64_t n_differ(const calq_graph *g, const calq_graph *f, const calq_tensor *x, const char *name)
{
    const char *names[1] = {name};
    calq_tensor a, b;
    run(f, x, 1, names, &a, 1);
    run(g, x, 1, names, &b, 1);
    int64_t bad = a.data && b.data ? 0 : -1;
    for (int64_t i = 0; bad >= 0 && i < calq_tensor_numel(&b); i++)
        bad += ((const float *)a.data)[i] != ((const float *)b.data)[i];
    calq_tensor_free_data(&a);
    calq_tensor_free_data(&b);
    return bad;
}

/* QGemm computes alpha·a_scale·b_scale·(acc + c), so with a bias it equals the Gemm only for
 * alpha = 1: a Gemm with alpha 2 and a bias stays float, as in onnxruntime; without a bias it is
 * fused, and y = (float)acc · (2·a_scale·b_scale). */
static void test_gemm_alpha(void)
{
    int64_t ad[2] = {2, 6}, wd[2] = {4, 6};
    const float sa = 0.05f, sw = 0.01f;
    int32_t bq[4] = {-500, 20, 0, 777};
    for (int with_bias = 1; with_bias >= 0; with_bias--) {
        calq_graph *g = calq__graph_new();
        int adq = qdq(g, input(g, "a", 2, ad), "a", sa, 3, CALQ_DTYPE_INT8);
        int8_t *wq = NULL;
        int in[3] = {adq, weight(g, "fc", 2, wd, &sw, 1, 0, 5, &wq),
                     with_bias ? bias(g, "fc", bq, 4, sa, &sw, 1, 1.0f) : -1};
        op_graph_output(g, node(g, "fc", "Gemm", in, with_bias ? 3 : 2, "y"));
        attr_i(g, "fc", "transB", 1);
        attr_f(g, "fc", "alpha", 2.0f);
        finish(g);
        int nf, nr;
        calq_graph *f = fused(g, &nf, &nr);
        calq_tensor x = t_rand_f32(17, 2, ad, -3, 3);
        if (with_bias) {
            int64_t d = n_differ(g, f, &x, "y");
            printf("Gemm alpha 2 with a bias: %d fused, %lld of 8 outputs differ from the float Gemm\n", nf,
                   (long long)d);
            EXPECT(nf == 0 && count_op(f, "QGemm") == 0 && d == 0);
        } else {
            const char *names[2] = {"a_q", "y"};
            calq_tensor got[2];
            run(f, &x, 1, names, got, 2);
            int64_t bad = 0;
            for (int64_t i = 0; got[1].data && i < 8; i++) {
                int64_t acc = 0;
                for (int64_t k = 0; k < 6; k++) acc += (q8(&got[0], (i / 4) * 6 + k) - 3) * wq[(i % 4) * 6 + k];
                bad += (float)acc * (2.0f * sa * sw) != ((const float *)got[1].data)[i];
            }
            printf("Gemm alpha 2 without a bias: %d fused, %lld of 8 outputs differ from the formula\n", nf,
                   (long long)bad);
            EXPECT(nf == 1 && count_op(f, "QGemm") == 1 && bad == 0);
            free_all(got, 2);
        }
        calq_tensor_free_data(&x);
        free(wq);
        calq__graph_free(f);
        calq__graph_free(g);
    }
}

/* x[8] -> Relu / Clip -> Q -> DQ -> y: what step 1 (ReluQuantFusion / ClipQuantFusion) drops.
 * kind 0: Clip(min 1e-7, max 1) as attributes (opset 10) before Q(1e-8, uint8 0): within
 * FLT_EPSILON of the Q's range [0, 2.55e-6], which onnxruntime takes as covered, but it maps
 * 5e-8 to 1e-7 where the Q alone gives 5e-8: kept. kind 1: Clip(0, 6) attributes before
 * Q(6/255, uint8 0): exact, dropped. kind 2: Clip(-1000, 1000) as inputs (opset 13): dropping it
 * would be exact, but onnxruntime 1.30 never removes a Clip with bound inputs here: kept. kind 3:
 * Relu before Q(-0.1, uint8 0): a negative scale reverses the Q, so the Relu matters: kept. */
static void test_step1(void)
{
    const char *what[4] = {"Clip 1e-7 above a 1e-8-scaled Q", "Clip(0, 6) attributes before Q(6/255)",
                           "Clip(-1000, 1000) inputs before a Q", "Relu before a Q with scale -0.1"};
    const float sy[4] = {1e-8f, 6.0f / 255.0f, 0.05f, -0.1f}, lo[4] = {1e-7f, 0.0f, -1000.0f, 0},
                hi[4] = {1.0f, 6.0f, 1000.0f, 0};
    const int removed[4] = {0, 1, 0, 0};
    const float xv[8] = {5e-8f, 1.5e-7f, -1.0f, 0.5f, 7.0f, 3e-7f, 2.0f, -2e-7f};
    int64_t xd = 8;
    for (int k = 0; k < 4; k++) {
        calq_graph *g = calq__graph_new();
        int xi = input(g, "x", 1, &xd), a;
        if (k == 3) {
            a = node(g, "act", "Relu", &xi, 1, "r");
        } else if (k == 2) {
            int in[3] = {xi, scalar_f32(g, "lo", lo[k]), scalar_f32(g, "hi", hi[k])};
            a = node(g, "act", "Clip", in, 3, "r");
        } else {
            a = node(g, "act", "Clip", &xi, 1, "r");
            attr_f(g, "act", "min", lo[k]);
            attr_f(g, "act", "max", hi[k]);
            g->nodes[g->n_nodes - 1].opset = 10;
        }
        op_graph_output(g, qdq(g, a, "y", sy[k], 0, CALQ_DTYPE_UINT8));
        finish(g);
        int nf, nr;
        calq_graph *f = fused(g, &nf, &nr);
        calq_tensor x = t_f32(xv, 1, &xd);
        int64_t d = n_differ(g, f, &x, "y_dq");
        printf("%s: %s, %lld of 8 outputs differ from the graph as written\n", what[k], nr ? "dropped" : "kept",
               (long long)d);
        EXPECT(nr == removed[k] && d == 0);
        calq_tensor_free_data(&x);
        calq__graph_free(f);
        calq__graph_free(g);
    }
}

/* a[2,6] -> Q/DQ -> MatMul(DQ w[6,4] with per-column scales, axis 1): MatMulIntegerToFloat as in
 * onnxruntime, y = (float)acc · (a_scale·w_scale[n]); with a Q after it (QLinearMatMul) calq
 * keeps per-tensor weights only, so that one stays float. */
static void test_matmul_per_column(void)
{
    int64_t ad[2] = {2, 6}, wd[2] = {6, 4};
    const float sa = 0.05f, sw[4] = {0.01f, 0.02f, 0.005f, 0.03f};
    for (int requantized = 0; requantized < 2; requantized++) {
        calq_graph *g = calq__graph_new();
        int adq = qdq(g, input(g, "a", 2, ad), "a", sa, 3, CALQ_DTYPE_INT8);
        int8_t *wq = NULL;
        int in[2] = {adq, weight(g, "mm", 2, wd, sw, 4, 1, 7, &wq)};
        int y = node(g, "mm", "MatMul", in, 2, "y");
        op_graph_output(g, requantized ? qdq(g, y, "yq", 0.1f, -5, CALQ_DTYPE_INT8) : y);
        finish(g);
        int nf, nr;
        calq_graph *f = fused(g, &nf, &nr);
        if (requantized) {
            printf("per-column MatMul -> Q: %d fused\n", nf);
            EXPECT(nf == 0 && count_op(f, "QLinearMatMul") == 0);
        } else {
            calq_tensor x = t_rand_f32(19, 2, ad, -3, 3);
            const char *names[2] = {"a_q", "y"};
            calq_tensor got[2];
            run(f, &x, 1, names, got, 2);
            int64_t bad = 0;
            for (int64_t i = 0; got[1].data && i < 8; i++) {
                int64_t acc = 0;
                for (int64_t k = 0; k < 6; k++) acc += (q8(&got[0], (i / 4) * 6 + k) - 3) * wq[k * 4 + i % 4];
                bad += (float)acc * (sa * sw[i % 4]) != ((const float *)got[1].data)[i];
            }
            printf("per-column MatMul: %d fused, %lld of 8 outputs differ from the formula\n", nf, (long long)bad);
            EXPECT(nf == 1 && count_op(f, "MatMulIntegerToFloat") == 1 && bad == 0);
            free_all(got, 2);
            calq_tensor_free_data(&x);
        }
        free(wq);
        calq__graph_free(f);
        calq__graph_free(g);
    }
}

static int see(void *user, const char *name, const calq_tensor *t)
{
    (void)name;
    (void)t;
    ++*(int *)user;
    return 0;
}

/* Sessions: fusion by default (the float conv output no longer exists), no_fusion runs the
 * graph as written; both give what the plan of their graph gives. */
static void test_session(const calq_tensor *x)
{
    calq_graph *g = chain(1, SY, ZY, 1.0f);
    int nf, nr;
    calq_graph *f = fused(g, &nf, &nr);
    const char *names[1] = {"y2_dq"};
    calq_tensor want_fused, want_plain;
    run(f, x, 1, names, &want_fused, 1);
    run(g, x, 1, names, &want_plain, 1);
    calq_model *m = calloc(1, sizeof *m);
    m->g = g;
    m->format = CALQ_FORMAT_ONNX;
    calq_error err = {0};
    for (int no_fusion = 0; no_fusion < 2; no_fusion++) {
        calq_session_opts o = {.n_threads = 1, .no_fusion = no_fusion};
        calq_session *s = NULL;
        EXPECT_OK(calq_session_create(m, &o, &s, &err));
        if (!s) continue;
        const char *c1[1] = {"c1"};
        int seen = 0;
        calq_status st = calq_session_set_observer(s, see, &seen, c1, 1, &err);
        EXPECT(no_fusion ? st == CALQ_OK : st != CALQ_OK);
        if (!no_fusion) printf("observing c1 with fusion: %s\n", err.message);
        EXPECT_OK(calq_session_run(s, x, 1, &err));
        EXPECT(seen == no_fusion);
        const calq_tensor *out = NULL;
        EXPECT_OK(calq_session_output(s, 0, &out));
        const calq_tensor *want = no_fusion ? &want_plain : &want_fused;
        if (out && want->data) EXPECT(memcmp(out->data, want->data, calq__tensor_nbytes(want)) == 0);
        calq_session_free(s);
    }
    calq_tensor_free_data(&want_fused);
    calq_tensor_free_data(&want_plain);
    calq_model_free(m);
    calq__graph_free(f);
}

int main(void)
{
    int64_t xd[4] = {1, 3, 9, 9};
    calq_tensor x = t_rand_f32(9, 4, xd, -6, 6);
    test_chain(&x);
    test_activations();
    test_bias_scale();
    test_shared(CALQ_DTYPE_INT8, &x);
    test_shared(CALQ_DTYPE_UINT8, &x);
    test_weights();
    test_float_model();
    test_matrix_layers();
    test_gemm_alpha();
    test_step1();
    test_matmul_per_column();
    test_session(&x);
    calq_tensor_free_data(&x);
    free(w1_q);
    free(w2_q);
    if (failures) printf("%d failure(s)\n", failures);
    return failures != 0;
}
