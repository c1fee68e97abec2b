/* Names calq invents from existing ones (base/unique_name.h): today's exact forms for short names,
 * the whole name however long, a different candidate on every retry, and a bounded search. Then the
 * two graph passes that hung on long names: Conv + Mul folding on a 600-character Conv (both
 * constants truncated to the same 511 bytes, every "_<k>" retry too) and DMQ balancing on a
 * 1100-character layer whose output has its name ("_calq<k>" truncated away from a 1024-byte
 * buffer). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/unique_name.h"
#include "expect.h"
#include "graph/balance.h"
#include "graph/graph.h"
#include "graph/passes.h"
#include "graph/splice.h"

/* A list of taken names. */
typedef struct names {
    const char *v[8];
    int n;
    long calls;
} names;

static bool in_list(const void *ctx, const char *name)
{
    names *l = (names *)ctx;
    l->calls++;
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->v[i], name)) return true;
    return false;
}

static bool always(const void *ctx, const char *name)
{
    (void)name;
    ((names *)ctx)->calls++;
    return true;
}

static char *repeat(char c, size_t n)
{
    char *s = malloc(n + 1);
    memset(s, c, n);
    s[n] = 0;
    return s;
}

static void test_short_names(void)
{
    names l = {{"x.folded_weight", "x.folded_weight_1", "y", "conv_quant_layer"}, 4, 0};
    char *a = calq__unique_name("x", ".folded_bias", "_", 1, in_list, &l);
    char *b = calq__unique_name("x", ".folded_weight", "_", 1, in_list, &l);
    char *c = calq__unique_name("y", "", "_calq", 1, in_list, &l);
    char *d = calq__unique_name("conv", "_quant_layer", "_", 2, in_list, &l);
    EXPECT(a && !strcmp(a, "x.folded_bias"));
    EXPECT(b && !strcmp(b, "x.folded_weight_2"));
    EXPECT(c && !strcmp(c, "y_calq1"));
    EXPECT(d && !strcmp(d, "conv_quant_layer_2"));
    free(a);
    free(b);
    free(c);
    free(d);
    char *p = calq__strdup_printf("%s.%s_%d", "conv", "weight", 3);
    EXPECT(p && !strcmp(p, "conv.weight_3"));
    free(p);
}

/* 3000 characters: kept whole, the suffix and the counter after them. */
static void test_long_names(void)
{
    char *base = repeat('L', 3000);
    char *t1 = calq__strdup_printf("%s.weight_quantized", base), *t2 = calq__strdup_printf("%s_calq1", t1);
    names l = {{t1, t2}, 2, 0};
    char *a = calq__unique_name(base, ".weight_quantized", "_calq", 1, in_list, &l);
    char *b = calq__unique_name(base, ".weight_scale", "_calq", 1, in_list, &l);
    EXPECT(a && strlen(a) == 3000 + strlen(".weight_quantized_calq2") && !strncmp(a, base, 3000) &&
           !strcmp(a + 3000, ".weight_quantized_calq2"));
    EXPECT(b && !strcmp(b + 3000, ".weight_scale") && strlen(b) == 3013);
    EXPECT(l.calls == 4);
    free(a);
    free(b);
    free(t1);
    free(t2);
    /* a table that never says no: the search ends */
    names none = {{0}, 0, 0};
    EXPECT(calq__unique_name(base, ".x", "_", 1, always, &none) == NULL);
    EXPECT(none.calls == 1 + CALQ_UNIQUE_NAME_TRIES);
    free(base);
}

static int add_const(calq_graph *g, const char *name, int ndim, const int64_t *dims, float v)
{
    calq_tensor *t = calloc(1, sizeof *t);
    t->dtype = CALQ_DTYPE_FLOAT32;
    t->ndim = ndim;
    memcpy(t->dims, dims, sizeof(int64_t) * (size_t)ndim);
    int64_t n = calq_tensor_numel(t);
    t->data = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) ((float *)t->data)[i] = v + (float)i * 0.01f;
    calq_error e = {0};
    return calq__graph_new_value(g, name, t, true, &e);
}

/* x[1,3,4,4] -> Conv(w[4,3,1,1]) named `conv`, output `out` -> Mul(k[4,1,1]) -> y (when mul) */
static calq_graph *conv_graph(const char *conv, const char *out, bool mul)
{
    calq_error e = {0};
    calq_graph *g = calq__graph_new();
    g->opset = 13;
    int x = calq__graph_new_value(g, "x", NULL, false, &e);
    g->values[x].is_input = true;
    g->values[x].dtype = CALQ_DTYPE_FLOAT32;
    g->values[x].ndim = 4;
    int64_t xd[4] = {1, 3, 4, 4}, wd[4] = {4, 3, 1, 1}, kd[3] = {4, 1, 1};
    memcpy(g->values[x].dims, xd, sizeof xd);
    int w = add_const(g, "w", 4, wd, 0.5f);
    int c = calq__graph_new_value(g, out, NULL, false, &e);
    int in[2] = {x, w};
    calq__graph_new_node(g, conv, "Conv", in, 2, &c, 1, &e);
    int y = c;
    if (mul) {
        int k = add_const(g, "k", 3, kd, 2.0f);
        y = calq__graph_new_value(g, "y", NULL, false, &e);
        int min[2] = {c, k};
        calq__graph_new_node(g, "mul", "Mul", min, 2, &y, 1, &e);
    }
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

/* Folding names its constants "<conv>.folded_weight" / ".folded_bias" in full (used to hang at 503+). */
static void test_fold_long_conv(void)
{
    for (int len = 1; len <= 600; len += 599) {
        char *conv = repeat('C', (size_t)len);
        calq_graph *g = conv_graph(conv, "c", true);
        calq_error e = {0};
        int n = 0;
        EXPECT_STATUS(calq__pass_fold_conv_affine(g, NULL, 0, &n, &e), CALQ_OK, &e, NULL);
        EXPECT(n == 1 && g->n_nodes == 1);
        char *wn = calq__strdup_printf("%s.folded_weight", conv), *bn = calq__strdup_printf("%s.folded_bias", conv);
        const calq_node *l = &g->nodes[0];
        EXPECT(l->n_inputs == 3 && !strcmp(g->values[l->inputs[1]].name, wn) &&
               !strcmp(g->values[l->inputs[2]].name, bn));
        free(wn);
        free(bn);
        free(conv);
        calq__graph_free(g);
    }
}

/* Balancing a 1100-character layer whose output has its name (used to hang at 1023+). */
static void test_balance_long_layer(void)
{
    char *name = repeat('D', 1100);
    calq_graph *g = conv_graph(name, name, false);
    float s[3] = {0.5f, 2.0f, 4.0f};
    calq_error e = {0};
    int y = -1;
    EXPECT_STATUS(calq__pass_balance(g, 0, s, 3, &y, &e), CALQ_OK, &e, NULL);
    char *sn = calq__strdup_printf("%s.dmq.scale", name), *yn = calq__strdup_printf("%s.dmq.output0", name);
    EXPECT(y >= 0 && !strcmp(g->values[y].name, yn));
    EXPECT(calq__graph_find(g, sn) >= 0 && calq__graph_find(g, "w.dmq") >= 0);
    free(sn);
    free(yn);
    /* a second balancing of the same layer: new names, "_calq1" after the whole name */
    int layer = -1;
    for (int i = 0; i < g->n_nodes; i++)
        if (!strcmp(g->nodes[i].op_type, "Conv")) layer = i;
    EXPECT_STATUS(calq__pass_balance(g, layer, s, 3, &y, &e), CALQ_OK, &e, NULL);
    char *y2 = calq__strdup_printf("%s.dmq.output0_calq1", name);
    EXPECT(y >= 0 && !strcmp(g->values[y].name, y2) && calq__graph_find(g, "w.dmq.dmq") >= 0);
    free(y2);
    free(name);
    calq__graph_free(g);
}

int main(void)
{
    alarm(60); /* the passes hung on these names: fail in a minute, not at ctest's timeout */
    test_short_names();
    test_long_names();
    test_fold_long_conv();
    test_balance_long_layer();
    return TEST_RESULT();
}
