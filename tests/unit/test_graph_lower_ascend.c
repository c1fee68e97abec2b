/* The lowering of Ascend deploy models' integer layers (src/graph/lower_ascend.c) on hand-built
 * graphs: which layers become calq.Ascend<op> with the AscendQuant's offset (a Conv, ConvTranspose,
 * Gemm, MatMul or AveragePool reading an AscendQuant directly or through Flatten / Reshape /
 * Squeeze / Unsqueeze / Identity, amct-reference.md §9.1) and which stay as they are (no
 * AscendQuant upstream, a non-layout op in between, a kind without an integer form, an offset
 * that is not an integer in [-128, 127], a chain of more than 16 layout ops, an AscendQuant on
 * the weight only, another domain); the pass keeps node order, names, inputs and attributes; and
 * sessions: a deploy model gives the hand-computed sums with and without no_fusion, an int8 layer
 * not fed by an AscendQuant fails naming the layer. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/tensor.h"
#include "expect.h"
#include "frontend/model.h"
#include "graph/passes.h"
#include "op_harness.h"

/* ---- graph building ------------------------------------------------------------------------ */

static int cst(calq_graph *g, const char *name, calq_dtype dt, int ndim, const int64_t *dims, const void *data)
{
    int v = calq__graph_value(g, name);
    calq_tensor *t = calloc(1, sizeof *t);
    t->dtype = dt;
    t->ndim = ndim;
    if (ndim) memcpy(t->dims, dims, sizeof(int64_t) * (size_t)ndim);
    calq__tensor_alloc(t, NULL);
    memcpy(t->data, data, calq__tensor_nbytes(t));
    g->values[v].constant = t;
    g->values[v].dtype = dt;
    g->values[v].ndim = ndim;
    if (ndim) memcpy(g->values[v].dims, dims, sizeof(int64_t) * (size_t)ndim);
    return v;
}

static int node_in(calq_graph *g, const char *name, const char *op, const char *domain, const int *in, int n_in,
                   const char *out)
{
    int v = calq__graph_value(g, out);
    int i = calq__graph_add_node(g, name, op, domain, in, n_in, &v, 1);
    g->nodes[i].opset = 13;
    return v;
}

static int node(calq_graph *g, const char *name, const char *op, const int *in, int n_in, const char *out)
{
    return node_in(g, name, op, "", in, n_in, out);
}

static calq_node *find(calq_graph *g, const char *name)
{
    for (int i = 0; i < g->n_nodes; i++)
        if (!strcmp(g->nodes[i].name, name)) return &g->nodes[i];
    return NULL;
}

static void attr_f(calq_graph *g, const char *node_name, const char *name, float v)
{
    calq_node *n = find(g, node_name);
    calq__node_add_attr(g, (int)(n - g->nodes), name, CALQ_ATTR_FLOAT)->f = v;
}

static void attr_i(calq_graph *g, const char *node_name, const char *name, int64_t v)
{
    calq_node *n = find(g, node_name);
    calq__node_add_attr(g, (int)(n - g->nodes), name, CALQ_ATTR_INT)->i = v;
}

/* float x [1, 2, 3, 3] -> AscendQuant "aq" (scale 1, offset) -> "q" */
static int quant(calq_graph *g, float offset)
{
    int x = op_graph_input(g, "x", CALQ_DTYPE_FLOAT32, 4, (int64_t[]){1, 2, 3, 3});
    int q = node(g, "aq", "AscendQuant", &x, 1, "q");
    attr_f(g, "aq", "scale", 1.0f);
    attr_f(g, "aq", "offset", offset);
    return q;
}

/* An int8 conv weight [2, 2, 1, 1] and an int32 bias [2]. */
static void conv_operands(calq_graph *g, int *in)
{
    const int8_t w[4] = {1, 2, -3, 4};
    const int32_t b[2] = {10, -20};
    in[1] = cst(g, "w", CALQ_DTYPE_INT8, 4, (int64_t[]){2, 2, 1, 1}, w);
    in[2] = cst(g, "b", CALQ_DTYPE_INT32, 1, (int64_t[]){2}, b);
}

static int lower(calq_graph *g)
{
    int n = -1;
    calq_error err = {0};
    EXPECT_STATUS(calq__pass_lower_ascend(g, &n, &err), CALQ_OK, &err, NULL);
    return n;
}

/* Node `name` is calq.<op> with input_offset `offset` (or unchanged: op in the default domain). */
static void expect_node(calq_graph *g, const char *name, const char *domain, const char *op, int64_t offset, int line)
{
    const calq_node *n = find(g, name);
    if (!n) {
        fprintf(stderr, "line %d: no node %s\n", line, name);
        failures++;
        return;
    }
    if (strcmp(n->domain, domain) != 0 || strcmp(n->op_type, op) != 0) {
        fprintf(stderr, "line %d: node %s is %s.%s, expected %s.%s\n", line, name, n->domain, n->op_type, domain, op);
        failures++;
    }
    const calq_attr *a = calq__attr(n, "input_offset");
    if (domain[0] && (!a || a->type != CALQ_ATTR_INT || a->i != offset)) {
        fprintf(stderr, "line %d: node %s: input_offset %lld, expected %lld\n", line, name,
                a ? (long long)a->i : -999LL, (long long)offset);
        failures++;
    }
    if (!domain[0] && a) {
        fprintf(stderr, "line %d: node %s was given an input_offset\n", line, name);
        failures++;
    }
}
#define EXPECT_LOWERED(g, name, op, offset) expect_node((g), (name), CALQ_DOMAIN_INTERNAL, (op), (offset), __LINE__)
#define EXPECT_KEPT(g, name, op)            expect_node((g), (name), "", (op), 0, __LINE__)

/* ---- patterns matched ------------------------------------------------------------------------ */

static void test_matched(void)
{
    /* AscendQuant -> Conv -> AscendDequant: kept attributes, inputs, output and node order */
    {
        calq_graph *g = calq__graph_new();
        int in[3] = {quant(g, -7.0f)};
        conv_operands(g, in);
        int y = node(g, "conv", "Conv", in, 3, "acc");
        attr_i(g, "conv", "group", 1);
        const uint64_t deq = calq_deq_scale_pack(0.5f, 0, 0);
        int din[2] = {y, cst(g, "deq", CALQ_DTYPE_UINT64, 1, (int64_t[]){1}, &deq)};
        op_graph_output(g, node(g, "dq", "AscendDequant", din, 2, "y"));
        EXPECT(lower(g) == 1);
        EXPECT_LOWERED(g, "conv", "AscendConv", -7);
        EXPECT(g->nodes[1].inputs[0] == in[0] && g->nodes[1].inputs[1] == in[1] && g->nodes[1].inputs[2] == in[2]);
        EXPECT(g->nodes[1].outputs[0] == y && !strcmp(g->nodes[1].name, "conv"));
        EXPECT(calq__attr_int(&g->nodes[1], "group", 0) == 1);
        EXPECT_KEPT(g, "aq", "AscendQuant");
        EXPECT_KEPT(g, "dq", "AscendDequant");
        EXPECT(lower(g) == 0); /* idempotent: a lowered layer is no Conv any more */
        calq__graph_free(g);
    }
    /* every layout op between AscendQuant and the layer, and every kind */
    static const struct {
        const char *op, *lowered;
    } kinds[] = {{"Conv", "AscendConv"},
                 {"ConvTranspose", "AscendConvTranspose"},
                 {"Gemm", "AscendGemm"},
                 {"MatMul", "AscendMatMul"},
                 {"AveragePool", "AscendAveragePool"}};
    static const char *const layout[] = {"Flatten", "Reshape", "Squeeze", "Unsqueeze", "Identity"};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        calq_graph *g = calq__graph_new();
        int v = quant(g, 127.0f);
        for (size_t i = 0; i <= k; i++) { /* 1 to 5 layout ops */
            char name[32], out[32];
            snprintf(name, sizeof name, "layout%zu", i);
            snprintf(out, sizeof out, "l%zu", i);
            v = node(g, name, layout[i], &v, 1, out);
        }
        int in[3] = {v};
        conv_operands(g, in);
        op_graph_output(g, node(g, "layer", kinds[k].op, in, kinds[k].op[0] == 'A' ? 1 : 2, "acc"));
        EXPECT(lower(g) == 1);
        EXPECT_LOWERED(g, "layer", kinds[k].lowered, 127);
        for (size_t i = 0; i <= k; i++) {
            char name[32];
            snprintf(name, sizeof name, "layout%zu", i);
            EXPECT_KEPT(g, name, layout[i]);
        }
        calq__graph_free(g);
    }
    /* one AscendQuant read by several layers (and a MaxPool, which stays): each is lowered */
    {
        calq_graph *g = calq__graph_new();
        int q = quant(g, 3.0f), in[3] = {q};
        conv_operands(g, in);
        op_graph_output(g, node(g, "c1", "Conv", in, 3, "a1"));
        op_graph_output(g, node(g, "c2", "Conv", in, 2, "a2"));
        op_graph_output(g, node(g, "mp", "MaxPool", &q, 1, "m"));
        int f = node(g, "fl", "Flatten", &q, 1, "f");
        op_graph_output(g, node(g, "fc", "Gemm", (int[]){f, in[1]}, 2, "a3"));
        EXPECT(lower(g) == 3);
        EXPECT_LOWERED(g, "c1", "AscendConv", 3);
        EXPECT_LOWERED(g, "c2", "AscendConv", 3);
        EXPECT_LOWERED(g, "fc", "AscendGemm", 3);
        EXPECT_KEPT(g, "mp", "MaxPool");
        calq__graph_free(g);
    }
    /* an input_offset attribute the file gave the layer is overridden (int or of another type) */
    for (int as_float = 0; as_float < 2; as_float++) {
        calq_graph *g = calq__graph_new();
        int in[3] = {quant(g, -1.0f)};
        conv_operands(g, in);
        op_graph_output(g, node(g, "conv", "Conv", in, 3, "acc"));
        if (as_float)
            attr_f(g, "conv", "input_offset", 55.5f);
        else
            attr_i(g, "conv", "input_offset", 55);
        EXPECT(lower(g) == 1);
        EXPECT_LOWERED(g, "conv", "AscendConv", -1);
        EXPECT(find(g, "conv")->n_attrs == 1);
        calq__graph_free(g);
    }
}

/* ---- patterns not matched -------------------------------------------------------------------- */

static void test_not_matched(void)
{
    /* a float model: nothing to do */
    {
        calq_graph *g = calq__graph_new();
        int x = op_graph_input(g, "x", CALQ_DTYPE_FLOAT32, 4, (int64_t[]){1, 2, 3, 3});
        const float w[4] = {1, 2, 3, 4};
        int in[2] = {x, cst(g, "w", CALQ_DTYPE_FLOAT32, 4, (int64_t[]){2, 2, 1, 1}, w)};
        op_graph_output(g, node(g, "conv", "Conv", in, 2, "y"));
        EXPECT(lower(g) == 0);
        EXPECT_KEPT(g, "conv", "Conv");
        calq__graph_free(g);
    }
    /* with an AscendQuant in the graph: a Conv on another input, one behind a Relu (not a layout
     * op), one whose weight only is an AscendQuant's output, one in another domain */
    {
        calq_graph *g = calq__graph_new();
        int q = quant(g, 0.0f), in[3] = {q};
        conv_operands(g, in);
        int x8 = op_graph_input(g, "x8", CALQ_DTYPE_INT8, 4, (int64_t[]){1, 2, 3, 3});
        op_graph_output(g, node(g, "other_input", "Conv", (int[]){x8, in[1], in[2]}, 3, "a1"));
        int r = node(g, "relu", "Relu", &q, 1, "r");
        op_graph_output(g, node(g, "after_relu", "Conv", (int[]){r, in[1]}, 2, "a2"));
        op_graph_output(g, node(g, "weight_only", "Conv", (int[]){x8, q}, 2, "a3"));
        op_graph_output(g, node_in(g, "ms_conv", "Conv", "com.microsoft", in, 2, "a4"));
        EXPECT(lower(g) == 0);
        EXPECT_KEPT(g, "other_input", "Conv");
        EXPECT_KEPT(g, "after_relu", "Conv");
        EXPECT_KEPT(g, "weight_only", "Conv");
        EXPECT(!strcmp(find(g, "ms_conv")->domain, "com.microsoft") && !calq__attr(find(g, "ms_conv"), "input_offset"));
        calq__graph_free(g);
    }
    /* an AscendQuant whose offset is not an integer in [-128, 127]: left to fail at its kernel */
    const float bad[3] = {0.5f, 128.0f, NAN};
    for (int i = 0; i < 3; i++) {
        calq_graph *g = calq__graph_new();
        int in[3] = {quant(g, bad[i])};
        conv_operands(g, in);
        op_graph_output(g, node(g, "conv", "Conv", in, 3, "acc"));
        EXPECT(lower(g) == 0);
        EXPECT_KEPT(g, "conv", "Conv");
        calq__graph_free(g);
    }
    /* 16 layout ops are a deploy model, 17 are not */
    for (int n = 16; n <= 17; n++) {
        calq_graph *g = calq__graph_new();
        int v = quant(g, 1.0f);
        for (int i = 0; i < n; i++) {
            char name[32], out[32];
            snprintf(name, sizeof name, "id%d", i);
            snprintf(out, sizeof out, "v%d", i);
            v = node(g, name, "Identity", &v, 1, out);
        }
        int in[3] = {v};
        conv_operands(g, in);
        op_graph_output(g, node(g, "conv", "Conv", in, 3, "acc"));
        EXPECT(lower(g) == (n == 16));
        if (n == 16)
            EXPECT_LOWERED(g, "conv", "AscendConv", 1);
        else
            EXPECT_KEPT(g, "conv", "Conv");
        calq__graph_free(g);
    }
}

/* ---- sessions ---------------------------------------------------------------------------------- */

/* x [1, 4] -> AscendQuant(scale 1, offset 2) -> Flatten -> Gemm(W [4, 2] int8, C int32)
 * -> AscendDequant(0.5): Caffe's InnerProduct in a deploy model. */
static calq_model *deploy_gemm(void)
{
    calq_graph *g = calq__graph_new();
    g->opset = 13;
    int x = op_graph_input(g, "x", CALQ_DTYPE_FLOAT32, 2, (int64_t[]){1, 4});
    int q = node(g, "aq", "AscendQuant", &x, 1, "q");
    attr_f(g, "aq", "scale", 1.0f);
    attr_f(g, "aq", "offset", 2.0f);
    int f = node(g, "flat", "Flatten", &q, 1, "f");
    const int8_t w[8] = {1, -1, 2, 0, -3, 5, 4, 1};
    const int32_t c[2] = {100, -100};
    int in[3] = {f, cst(g, "w", CALQ_DTYPE_INT8, 2, (int64_t[]){4, 2}, w),
                 cst(g, "c", CALQ_DTYPE_INT32, 1, (int64_t[]){2}, c)};
    int acc = node(g, "fc", "Gemm", in, 3, "acc");
    const uint64_t deq = calq_deq_scale_pack(0.5f, 0, 0);
    int din[2] = {acc, cst(g, "deq", CALQ_DTYPE_UINT64, 1, (int64_t[]){1}, &deq)};
    op_graph_output(g, node(g, "dq", "AscendDequant", din, 2, "y"));
    op_graph_output(g, acc);
    calq_error err = {0};
    EXPECT_STATUS(calq__graph_toposort(g, &err), CALQ_OK, &err, NULL);
    calq_model *m = calloc(1, sizeof *m);
    m->g = g;
    m->format = CALQ_FORMAT_ONNX;
    return m;
}

static void test_session(void)
{
    calq_model *m = deploy_gemm();
    /* x = [3, -1.5, 0.4, 10] -> q = rint(x) + 2 = [5, 0, 2, 12] (rint(-1.5) = -2) -> centered
     * [3, -2, 0, 10]; acc = C + [3 - 4 + 0 + 40, -3 + 0 + 0 + 10] = [139, -93]; y = acc / 2 */
    const float xv[4] = {3.0f, -1.5f, 0.4f, 10.0f};
    calq_tensor x = {.dtype = CALQ_DTYPE_FLOAT32, .ndim = 2, .dims = {1, 4}, .data = (void *)xv};
    for (int no_fusion = 0; no_fusion < 2; no_fusion++)
        for (int fast = 0; fast < 2; fast++) {
            calq_session_opts o = {
                .n_threads = 1, .kernels = fast ? CALQ_KERNELS_DEFAULT : CALQ_KERNELS_REF, .no_fusion = no_fusion};
            calq_session *s = NULL;
            calq_error err = {0};
            EXPECT_STATUS(calq_session_create(m, &o, &s, &err), CALQ_OK, &err, NULL);
            if (!s) continue;
            EXPECT_STATUS(calq_session_run(s, &x, 1, &err), CALQ_OK, &err, NULL);
            const calq_tensor *y = NULL, *a = NULL;
            if (calq_session_output(s, 0, &y) == CALQ_OK && calq_session_output(s, 1, &a) == CALQ_OK) {
                EXPECT(y->dtype == CALQ_DTYPE_FLOAT32 && a->dtype == CALQ_DTYPE_INT32);
                EXPECT(((const int32_t *)a->data)[0] == 139 && ((const int32_t *)a->data)[1] == -93);
                EXPECT(((const float *)y->data)[0] == 69.5f && ((const float *)y->data)[1] == -46.5f);
            } else {
                EXPECT(!"no outputs");
            }
            calq_session_free(s);
        }
    EXPECT(!strcmp(find(m->g, "fc")->op_type, "Gemm")); /* the model's own graph stays as loaded */
    calq_model_free(m);

    /* an int8 Conv whose input is a graph input, not an AscendQuant's output */
    calq_graph *g = calq__graph_new();
    g->opset = 13;
    int x8 = op_graph_input(g, "x8", CALQ_DTYPE_INT8, 4, (int64_t[]){1, 2, 3, 3});
    int in[3] = {x8};
    conv_operands(g, in);
    op_graph_output(g, node(g, "conv7", "Conv", in, 3, "acc"));
    m = calloc(1, sizeof *m);
    m->g = g;
    m->format = CALQ_FORMAT_ONNX;
    int8_t xd[18] = {0};
    calq_tensor xi = {.dtype = CALQ_DTYPE_INT8, .ndim = 4, .dims = {1, 2, 3, 3}, .data = xd};
    for (int no_fusion = 0; no_fusion < 2; no_fusion++) {
        calq_session_opts o = {.n_threads = 1, .no_fusion = no_fusion};
        calq_session *s = NULL;
        calq_error err = {0};
        EXPECT_STATUS(calq_session_create(m, &o, &s, &err), CALQ_OK, &err, NULL);
        if (!s) continue;
        EXPECT_STATUS(calq_session_run(s, &xi, 1, &err), CALQ_ERR_UNSUPPORTED, &err,
                      "Conv node 'conv7': input 0 is int8 but does not come from an AscendQuant");
        EXPECT(!strcmp(err.layer, "conv7"));
        calq_session_free(s);
    }
    calq_model_free(m);
}

int main(void)
{
    test_matched();
    test_not_matched();
    test_session();
    printf("test_graph_lower_ascend: %d failure(s)\n", failures);
    return failures != 0;
}
