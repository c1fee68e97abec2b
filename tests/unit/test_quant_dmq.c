/* DMQ balancing (issue 12 item 2; docs/numerics.md "DMQ balancing"): the balance factors against
 * hand-computed values (zeros, NaN, the clamp), the per-channel statistic's fast kernel against its
 * _ref, and the graph rewrite's weight and Mul constants for Gemm (transB), MatMul, a plain and a
 * grouped Conv. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expect.h"
#include "graph/balance.h"
#include "graph/graph.h"
#include "graph/splice.h"
#include "quant/quant.h"

static void test_factors(void)
{
    /* s = xmax^a / wmax^(1-a) */
    const float xmax[6] = {4.0f, 0.0f, 9.0f, 50.0f, NAN, 1e-30f};
    const float wmax[6] = {1.0f, 2.0f, 0.0f, 0.5f, 1.0f, 1e30f};
    float s[6];
    calq__dmq_factors(xmax, wmax, 6, 0.5, s);
    EXPECT(s[0] == 2.0f);                          /* sqrt(4) / sqrt(1) */
    EXPECT(s[1] == 1.0f);                          /* activation max 0: nothing to move */
    EXPECT(s[2] == 1.0f);                          /* weight max 0 */
    EXPECT(s[3] == 10.0f);                         /* sqrt(50) / sqrt(0.5) */
    EXPECT(s[4] == 1.0f);                          /* NaN statistic */
    EXPECT(s[5] == (float)(1.0 / CALQ_DMQ_S_MAX)); /* 1e-30 clamped up to 2^-16 */
    calq__dmq_factors(xmax, wmax, 1, 0.2, s);
    EXPECT(s[0] == (float)pow(4.0, 0.2)); /* 4^0.2 / 1^0.8 */
    const float big_x = 1e12f, one = 1.0f;
    calq__dmq_factors(&big_x, &one, 1, 0.8, s);
    EXPECT(s[0] == (float)CALQ_DMQ_S_MAX); /* (1e12)^0.8 clamped down to 2^16 */
    const float x8 = 8.0f, w2 = 2.0f;
    calq__dmq_factors(&x8, &w2, 1, 0.8, s);
    EXPECT(fabsf(s[0] - (float)(pow(8.0, 0.8) / pow(2.0, 0.2))) == 0.0f);
}

static void test_absmax(void)
{
    int64_t dims[4] = {2, 5, 3, 7};
    int64_t n = 2 * 5 * 3 * 7;
    float *x = malloc(sizeof(float) * (size_t)n);
    unsigned r = 12345;
    for (int64_t i = 0; i < n; i++) {
        r = r * 1103515245u + 12345u;
        x[i] = ((float)(r >> 8) / 16777216.0f - 0.5f) * 10.0f;
    }
    x[17] = NAN;
    x[40] = -INFINITY;
    x[3] = -77.0f; /* channel 0 of axis 1 (inner 21) */
    for (int axis = 0; axis < 4; axis++) {
        float a[7] = {0}, b[7] = {0};
        calq__dmq_absmax_ref(x, 4, dims, axis, a);
        calq__dmq_absmax(x, 4, dims, axis, b);
        EXPECT(memcmp(a, b, sizeof(float) * (size_t)dims[axis]) == 0);
        for (int64_t c = 0; c < dims[axis]; c++) EXPECT(isfinite(a[c]) && a[c] > 0.0f);
        if (axis == 1) EXPECT(a[0] == 77.0f);
    }
    free(x);
}

/* A graph x -> <op>(x, w) -> y with w[wd] = 1, 2, 3, ... */
static calq_graph *one_layer(const char *op, int xr, const int64_t *xd, int wr, const int64_t *wd, const char *attr,
                             int64_t attr_v)
{
    calq_error e = {0};
    calq_graph *g = calq__graph_new();
    g->opset = 13;
    int x = calq__graph_new_value(g, "x", NULL, false, &e);
    g->values[x].is_input = true;
    g->values[x].dtype = CALQ_DTYPE_FLOAT32;
    g->values[x].ndim = xr;
    memcpy(g->values[x].dims, xd, sizeof(int64_t) * (size_t)xr);
    calq_tensor *w = calloc(1, sizeof *w);
    w->dtype = CALQ_DTYPE_FLOAT32;
    w->ndim = wr;
    memcpy(w->dims, wd, sizeof(int64_t) * (size_t)wr);
    int64_t n = calq_tensor_numel(w);
    w->data = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) ((float *)w->data)[i] = (float)(i + 1);
    int wv = calq__graph_new_value(g, "w", w, true, &e);
    int y = calq__graph_new_value(g, "y", NULL, false, &e);
    int in[2] = {x, wv};
    int ni = calq__graph_new_node(g, "layer", op, in, 2, &y, 1, &e);
    if (attr) calq__node_set_int(g, ni, attr, attr_v);
    g->inputs = malloc(sizeof(int));
    g->inputs[0] = x;
    g->n_inputs = 1;
    g->outputs = malloc(sizeof(int));
    g->outputs[0] = y;
    g->n_outputs = 1;
    g->values[y].is_output = true;
    EXPECT_STATUS(calq__graph_toposort(g, &e), CALQ_OK, &e, NULL);
    return g;
}

static int node_named(const calq_graph *g, const char *name)
{
    for (int i = 0; i < g->n_nodes; i++)
        if (!strcmp(g->nodes[i].name, name)) return i;
    return -1;
}

/* Balances node "layer" with s and checks w' = w * s[want_ch[i]], and the Mul's 1/s of shape sd. */
static void check_rewrite(calq_graph *g, const float *s, int64_t n, const int *want_ch, int snd, const int64_t *sd)
{
    calq_error e = {0};
    int y = -1;
    EXPECT_STATUS(calq__pass_balance(g, node_named(g, "layer"), s, n, &y, &e), CALQ_OK, &e, NULL);
    const calq_node *l = &g->nodes[node_named(g, "layer")];
    EXPECT(l->inputs[0] == y);
    const calq_tensor *w = g->values[l->inputs[1]].constant;
    EXPECT(strcmp(g->values[l->inputs[1]].name, "w.dmq") == 0);
    for (int64_t i = 0; i < calq_tensor_numel(w); i++) EXPECT(((float *)w->data)[i] == (float)(i + 1) * s[want_ch[i]]);
    int mi = g->values[y].producer;
    EXPECT(mi >= 0 && strcmp(g->nodes[mi].op_type, "Mul") == 0 && g->nodes[mi].src_index == -1);
    EXPECT(mi < node_named(g, "layer")); /* toposorted */
    const calq_tensor *inv = g->values[g->nodes[mi].inputs[1]].constant;
    EXPECT(inv->ndim == snd);
    for (int d = 0; d < snd; d++) EXPECT(inv->dims[d] == sd[d]);
    for (int64_t c = 0; c < n; c++) EXPECT(((float *)inv->data)[c] == 1.0f / s[c]);
    calq__graph_free(g);
}

static void test_rewrite(void)
{
    /* Gemm, B [K=3, N=2]: input channel = row */
    {
        int64_t xd[2] = {1, 3}, wd[2] = {3, 2}, sd[1] = {3};
        const float s[3] = {2.0f, 4.0f, 8.0f};
        const int ch[6] = {0, 0, 1, 1, 2, 2};
        check_rewrite(one_layer("Gemm", 2, xd, 2, wd, NULL, 0), s, 3, ch, 1, sd);
    }
    /* Gemm transB, B [N=2, K=3]: input channel = column */
    {
        int64_t xd[2] = {1, 3}, wd[2] = {2, 3}, sd[1] = {3};
        const float s[3] = {2.0f, 4.0f, 8.0f};
        const int ch[6] = {0, 1, 2, 0, 1, 2};
        check_rewrite(one_layer("Gemm", 2, xd, 2, wd, "transB", 1), s, 3, ch, 1, sd);
    }
    /* MatMul [1, T, K=2] x [K=2, N=3] */
    {
        int64_t xd[3] = {1, 4, 2}, wd[2] = {2, 3}, sd[1] = {2};
        const float s[2] = {0.5f, 3.0f};
        const int ch[6] = {0, 0, 0, 1, 1, 1};
        check_rewrite(one_layer("MatMul", 3, xd, 2, wd, NULL, 0), s, 2, ch, 1, sd);
    }
    /* Conv w [O=2, C=2, 1, 2]: input channel = axis 1; the Mul is [C, 1, 1] */
    {
        int64_t xd[4] = {1, 2, 3, 3}, wd[4] = {2, 2, 1, 2}, sd[3] = {2, 1, 1};
        const float s[2] = {2.0f, 0.25f};
        const int ch[8] = {0, 0, 1, 1, 0, 0, 1, 1};
        check_rewrite(one_layer("Conv", 4, xd, 4, wd, NULL, 0), s, 2, ch, 3, sd);
    }
    /* grouped Conv, group 2, w [O=4, C/g=2, 1, 1] of C = 4: outputs 0-1 read inputs 0-1, 2-3 read 2-3 */
    {
        int64_t xd[4] = {1, 4, 3, 3}, wd[4] = {4, 2, 1, 1}, sd[3] = {4, 1, 1};
        const float s[4] = {2.0f, 4.0f, 8.0f, 16.0f};
        const int ch[8] = {0, 1, 0, 1, 2, 3, 2, 3};
        check_rewrite(one_layer("Conv", 4, xd, 4, wd, "group", 2), s, 4, ch, 3, sd);
    }
    /* depthwise, group 3, w [O=3, 1, 1, 1] */
    {
        int64_t xd[4] = {1, 3, 3, 3}, wd[4] = {3, 1, 1, 1}, sd[3] = {3, 1, 1};
        const float s[3] = {2.0f, 4.0f, 8.0f};
        const int ch[3] = {0, 1, 2};
        check_rewrite(one_layer("Conv", 4, xd, 4, wd, "group", 3), s, 3, ch, 3, sd);
    }
    /* refused: a factor count that does not fit, a factor <= 0 */
    {
        calq_error e = {0};
        int64_t xd[2] = {1, 3}, wd[2] = {3, 2};
        calq_graph *g = one_layer("Gemm", 2, xd, 2, wd, NULL, 0);
        const float s[3] = {1.0f, -1.0f, 2.0f};
        EXPECT_STATUS(calq__pass_balance(g, node_named(g, "layer"), s, 2, NULL, &e), CALQ_ERR_RECORD_FILE, &e,
                      "its weight has 3 input channels");
        EXPECT(strcmp(e.layer, "layer") == 0);
        EXPECT_STATUS(calq__pass_balance(g, node_named(g, "layer"), s, 3, NULL, &e), CALQ_ERR_RECORD_FACTOR, &e,
                      "finite and > 0");
        calq__graph_free(g);
    }
}

int main(void)
{
    test_factors();
    test_absmax();
    test_rewrite();
    if (failures) fprintf(stderr, "%d failure(s)\n", failures);
    return failures != 0;
}
