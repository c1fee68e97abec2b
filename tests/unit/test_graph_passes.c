/* Conv + BatchNorm / Mul / Add folding: the folded graph computes what the original does, the
 * folded bias follows AMCT's float32 order, and layers that must stay are left alone. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/plan.h"
#include "graph/passes.h"
#include "op_harness.h"

#define C 64 /* enough channels that float rounding orders differ somewhere */

static int add_const(calq_graph *g, const char *name, calq_tensor t)
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

/* x[1,3,5,5] -> Conv(w[C,3,3,3], b[C]) -> c -> BN -> bn -> Mul(k[C,1,1]) -> m -> Add(s[1,C,1,1]) -> y
 * `conv_out_is_output`: c is also a graph output (so nothing may fold). */
static calq_graph *build(int with_bias, int conv_out_is_output, int second_consumer)
{
    calq_graph *g = calq__graph_new();
    int x = calq__graph_value(g, "x");
    g->values[x].is_input = true;
    g->values[x].dtype = CALQ_DTYPE_FLOAT32;
    int64_t xd[4] = {1, 3, 5, 5};
    g->values[x].ndim = 4;
    memcpy(g->values[x].dims, xd, sizeof xd);
    g->inputs = malloc(sizeof(int));
    g->inputs[0] = x;
    g->n_inputs = 1;
    int64_t wd[4] = {C, 3, 3, 3}, cd[1] = {C}, kd[3] = {C, 1, 1}, sd[4] = {1, C, 1, 1};
    int w = add_const(g, "w", t_rand_f32(1, 4, wd, -1, 1));
    int b = with_bias ? add_const(g, "b", t_rand_f32(2, 1, cd, -1, 1)) : -1;
    int gam = add_const(g, "gamma", t_rand_f32(3, 1, cd, 0.5f, 2));
    int bet = add_const(g, "beta", t_rand_f32(4, 1, cd, -1, 1));
    int mu = add_const(g, "mean", t_rand_f32(5, 1, cd, -1, 1));
    int var = add_const(g, "var", t_rand_f32(6, 1, cd, 0.1f, 3));
    int k = add_const(g, "k", t_rand_f32(7, 3, kd, -2, 2));
    int s = add_const(g, "s", t_rand_f32(8, 4, sd, -2, 2));
    int c = calq__graph_value(g, "c"), bn = calq__graph_value(g, "bn"), m = calq__graph_value(g, "m"),
        y = calq__graph_value(g, "y");
    int conv_in[3] = {x, w, b};
    calq__graph_add_node(g, "conv", "Conv", "", conv_in, with_bias ? 3 : 2, &c, 1);
    int64_t pads[4] = {1, 1, 1, 1};
    calq_attr *a = calq__node_add_attr(g, 0, "pads", CALQ_ATTR_INTS);
    a->n = 4;
    a->ints = malloc(sizeof pads);
    memcpy(a->ints, pads, sizeof pads);
    int bn_in[5] = {c, gam, bet, mu, var};
    calq__graph_add_node(g, "bn", "BatchNormalization", "", bn_in, 5, &bn, 1);
    int mul_in[2] = {k, bn};
    calq__graph_add_node(g, "mul", "Mul", "", mul_in, 2, &m, 1);
    int add_in[2] = {m, s};
    calq__graph_add_node(g, "add", "Add", "", add_in, 2, &y, 1);
    int n_out = 1;
    g->outputs = malloc(sizeof(int) * 3);
    g->outputs[0] = y;
    if (conv_out_is_output) g->outputs[n_out++] = c;
    if (second_consumer) {
        int r = calq__graph_value(g, "r");
        calq__graph_add_node(g, "relu", "Relu", "", &c, 1, &r, 1);
        g->outputs[n_out++] = r;
    }
    g->n_outputs = n_out;
    for (int i = 0; i < n_out; i++) g->values[g->outputs[i]].is_output = true;
    for (int i = 0; i < g->n_nodes; i++) g->nodes[i].opset = 13;
    g->opset = 13;
    calq_error err = {0};
    if (calq__graph_toposort(g, &err) != CALQ_OK) fprintf(stderr, "toposort: %s\n", err.message);
    return g;
}

static calq_tensor run(const calq_graph *g, const calq_tensor *x)
{
    calq_plan *p = NULL;
    calq_error err = {0};
    calq_tensor out = {0};
    if (calq__plan_build(g, x, 1, false, 0, &p, &err) != CALQ_OK) {
        fprintf(stderr, "plan: %s\n", err.message);
        failures++;
        return out;
    }
    p->vals[g->inputs[0]].t.data = x->data;
    for (int s = 0; s < p->n_steps; s++) EXPECT_OK(calq__plan_run_step(p, s, &err));
    calq__tensor_clone(&out, &p->vals[g->outputs[0]].t, &err);
    calq__plan_free(p);
    return out;
}

static int count_op(const calq_graph *g, const char *op)
{
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) n += strcmp(g->nodes[i].op_type, op) == 0;
    return n;
}

int main(void)
{
    int64_t xd[4] = {1, 3, 5, 5};
    calq_tensor x = t_rand_f32(9, 4, xd, -3, 3);
    calq_error err = {0};
    for (int with_bias = 0; with_bias < 2; with_bias++) {
        calq_graph *g = build(with_bias, 0, 0), *f = NULL;
        EXPECT_OK(calq__graph_clone(g, &f, &err));
        int n = 0;
        EXPECT_OK(calq__pass_fold_conv_affine(f, NULL, 0, &n, &err));
        EXPECT(n == 3);
        EXPECT(f->n_nodes == 1 && count_op(f, "Conv") == 1);
        EXPECT(g->n_nodes == 4); /* the original is untouched */
        EXPECT(strcmp(f->values[f->nodes[0].outputs[0]].name, "y") == 0);
        calq_tensor a = run(g, &x), b = run(f, &x);
        EXPECT(t_close(&b, &a, 1e-5, 1e-5, "folded vs original"));
        /* AMCT's order for the BN step: b' = (b - mean) * gamma / sqrt(var + eps) + beta, in float32 */
        calq_graph *h = build(with_bias, 0, 0);
        calq__node_release(&h->nodes[2]); /* keep only conv + bn: drop mul and add */
        calq__node_release(&h->nodes[3]);
        h->n_nodes = 2;
        h->values[h->outputs[0]].is_output = false;
        h->outputs[0] = calq__graph_find(h, "bn");
        h->values[h->outputs[0]].is_output = true;
        EXPECT_OK(calq__pass_fold_conv_affine(h, NULL, 0, &n, &err));
        EXPECT(n == 1);
        const calq_tensor *fb = h->values[h->nodes[0].inputs[2]].constant;
        const float *B = with_bias ? g->values[calq__graph_find(g, "b")].constant->data : NULL;
        const float *gm = g->values[calq__graph_find(g, "gamma")].constant->data,
                    *be = g->values[calq__graph_find(g, "beta")].constant->data,
                    *mu = g->values[calq__graph_find(g, "mean")].constant->data,
                    *va = g->values[calq__graph_find(g, "var")].constant->data;
        for (int o = 0; o < C; o++) {
            float inv = gm[o] / sqrtf(va[o] + 1e-5f);
            float want = ((B ? B[o] : 0.0f) - mu[o]) * inv + be[o];
            EXPECT(((const float *)fb->data)[o] == want);
        }
        calq_tensor_free_data(&a);
        calq_tensor_free_data(&b);
        calq__graph_free(g);
        calq__graph_free(f);
        calq__graph_free(h);
    }
    /* Must not fold: conv output also a graph output; conv output read twice; skip list. */
    for (int mode = 0; mode < 3; mode++) {
        calq_graph *g = build(1, mode == 0, mode == 1);
        const char *skip[1] = {"conv"};
        int n = -1;
        EXPECT_OK(calq__pass_fold_conv_affine(g, skip, mode == 2 ? 1 : 0, &n, &err));
        EXPECT(n == 0);
        EXPECT(count_op(g, "BatchNormalization") == 1);
        calq__graph_free(g);
    }
    calq_tensor_free_data(&x);
    printf("test_graph_passes: %d failure(s)\n", failures);
    return failures != 0;
}
