/* The quantizable-kind table (src/graph/qkind.h): lookups by ONNX and Caffe name, rows that agree
 * with each other and with the op registry and the Caffe mapper, the §8.1 conditions on real
 * node shapes, the weight geometry, and rows of the kinds to come (tensor-only, MatMul with two
 * variable inputs, LSTM with W and R) matched by the same rule. */
#include <stdlib.h>
#include <string.h>

#include "exec/op.h"
#include "expect.h"
#include "frontend/caffe.h"
#include "graph/quantizable.h"

/* ---- the table itself ----------------------------------------------------------------------- */

static void test_rows(void)
{
    EXPECT(calq__qkind_count() == CALQ_QKIND_COUNT);
    EXPECT(calq__qkind_at(-1) == NULL && calq__qkind_at(CALQ_QKIND_COUNT) == NULL);
    for (int i = 0; i < calq__qkind_count(); i++) {
        const calq_qkind *k = calq__qkind_at(i);
        EXPECT(k && (int)k->id == i && calq__qkind(k->id) == k);
        EXPECT(k->onnx && k->onnx[0]);
        /* every kind is an op calq runs, and its Caffe layer is one the frontend maps */
        EXPECT(calq__op_find("", k->onnx) != NULL);
        EXPECT(!k->caffe || calq__caffe_mapper(k->caffe) != NULL);
        EXPECT(k->act_inputs & 1u); /* input 0 is always an activation */
        if (k->weights == CALQ_QKIND_WEIGHTS_CONST) {
            EXPECT(k->weight_input >= 1 && k->weight_input != k->bias_input && k->weight2_input != k->weight_input);
            EXPECT(!((k->act_inputs >> k->weight_input) & 1u));
        } else {
            EXPECT(k->weight_input < 0 && k->weight2_input < 0 && k->bias_input < 0);
            EXPECT(!k->channel_wise && !k->folds_bn && !k->grouped);
        }
        EXPECT(!k->tensor_only || k->weights == CALQ_QKIND_WEIGHTS_NONE);
        /* per channel needs a layout with channels (§8.2); BN folding scales dim 0 (§8.3) */
        EXPECT(!k->channel_wise || k->layout != CALQ_WEIGHTS_MATRIX);
        EXPECT(!k->folds_bn || k->layout == CALQ_WEIGHTS_CONV);
        EXPECT(k->layout != CALQ_WEIGHTS_CONV_TRANSPOSE || k->grouped);
        /* pooling has no shift N (§6.4, §8.1) */
        EXPECT(k->weights == CALQ_QKIND_WEIGHTS_CONST || !k->shift_bit);
        EXPECT(k->output_channel_axis == 1 || k->output_channel_axis == -1);
        for (int j = 0; j < i; j++) {
            const calq_qkind *o = calq__qkind_at(j);
            /* one name, several rows: they agree on what name lookups answer */
            if (!strcmp(o->onnx, k->onnx)) EXPECT(o->folds_bn == k->folds_bn);
        }
    }
}

static void test_lookups(void)
{
    EXPECT(calq__qkind_by_onnx("Conv") == calq__qkind(CALQ_QKIND_CONV));
    EXPECT(calq__qkind_by_onnx("ConvTranspose") == calq__qkind(CALQ_QKIND_CONV_TRANSPOSE));
    EXPECT(calq__qkind_by_onnx("Gemm") == calq__qkind(CALQ_QKIND_GEMM));
    EXPECT(calq__qkind_by_onnx("MatMul") == calq__qkind(CALQ_QKIND_MATMUL));
    EXPECT(calq__qkind_by_onnx("AveragePool") == calq__qkind(CALQ_QKIND_AVERAGE_POOL));
    EXPECT(calq__qkind_by_onnx("Relu") == NULL && calq__qkind_by_onnx("conv") == NULL);
    EXPECT(calq__qkind_by_onnx("Convolution") == NULL && calq__qkind_by_onnx(NULL) == NULL);
    EXPECT(calq__qkind_by_caffe("Convolution") == calq__qkind(CALQ_QKIND_CONV));
    EXPECT(calq__qkind_by_caffe("Deconvolution") == calq__qkind(CALQ_QKIND_CONV_TRANSPOSE));
    EXPECT(calq__qkind_by_caffe("InnerProduct") == calq__qkind(CALQ_QKIND_GEMM));
    EXPECT(calq__qkind_by_caffe("Pooling") == calq__qkind(CALQ_QKIND_AVERAGE_POOL));
    EXPECT(calq__qkind_by_caffe("Conv") == NULL && calq__qkind_by_caffe("ReLU") == NULL);
    EXPECT(calq__qkind_by_caffe(NULL) == NULL);
    /* the §8.1 / §8.2 facts the consumers depend on */
    const calq_qkind *conv = calq__qkind(CALQ_QKIND_CONV), *pool = calq__qkind(CALQ_QKIND_AVERAGE_POOL);
    EXPECT(conv->channel_wise && conv->folds_bn && conv->layout == CALQ_WEIGHTS_CONV && conv->bias_input == 2);
    EXPECT(calq__qkind(CALQ_QKIND_CONV_TRANSPOSE)->channel_wise && !calq__qkind(CALQ_QKIND_CONV_TRANSPOSE)->folds_bn);
    EXPECT(!calq__qkind(CALQ_QKIND_GEMM)->channel_wise && !calq__qkind(CALQ_QKIND_MATMUL)->channel_wise);
    EXPECT(pool->weights == CALQ_QKIND_WEIGHTS_UNIT && !pool->shift_bit && !pool->tensor_only);

    char buf[256];
    EXPECT(!strcmp(calq__qkind_names(CALQ_QKIND_NAMES_ONNX, buf, sizeof buf),
                   "Conv, ConvTranspose, Gemm, MatMul, AveragePool, LSTM, GRU, RNN"));
    EXPECT(!strcmp(calq__qkind_names(CALQ_QKIND_NAMES_CAFFE, buf, sizeof buf),
                   "Convolution, Deconvolution, InnerProduct, Pooling"));
    EXPECT(!strcmp(calq__qkind_names(CALQ_QKIND_NAMES_CHANNEL_WISE, buf, sizeof buf),
                   "Conv, ConvTranspose, LSTM, GRU, RNN"));
    /* §8.1 CHANNEL_WISE_ONNX_TYPES: the recurrent layers quantize W and R per direction and gate row */
    const calq_qkind *lstm = calq__qkind(CALQ_QKIND_LSTM);
    EXPECT(lstm->layout == CALQ_WEIGHTS_RNN && lstm->weight_input == 1 && lstm->weight2_input == 2 &&
           lstm->bias_input == -1 && calq__qkind_n_weights(lstm) == 2 && !lstm->folds_bn);
    char small[8];
    calq__qkind_names(CALQ_QKIND_NAMES_ONNX, small, sizeof small);
    EXPECT(strlen(small) == sizeof small - 1 && !strncmp(small, "Conv, C", 7));
}

/* ---- nodes ---------------------------------------------------------------------------------- */

static int value(calq_graph *g, const char *name, calq_dtype dt, int ndim, const int64_t *dims, bool constant)
{
    int v = calq__graph_value(g, name);
    calq_value *x = &g->values[v];
    x->dtype = dt;
    x->ndim = ndim;
    for (int i = 0; i < ndim; i++) x->dims[i] = dims[i];
    if (constant) {
        calq_tensor *t = calloc(1, sizeof *t);
        t->dtype = dt;
        t->ndim = ndim;
        int64_t n = 1;
        for (int i = 0; i < ndim; i++) n *= (t->dims[i] = dims[i]);
        t->data = calloc((size_t)n, 4);
        x->constant = t;
    }
    return v;
}

static void attr_int(calq_graph *g, int ni, const char *name, int64_t v)
{
    calq__node_add_attr(g, ni, name, CALQ_ATTR_INT)->i = v;
}

static void attr_ints(calq_graph *g, int ni, const char *name, int n, const int64_t *v)
{
    calq_attr *a = calq__node_add_attr(g, ni, name, CALQ_ATTR_INTS);
    a->n = n;
    a->ints = malloc(sizeof(int64_t) * (size_t)n);
    memcpy(a->ints, v, sizeof(int64_t) * (size_t)n);
}

/* A node op(inputs) -> y in g, returning its index. */
static int node(calq_graph *g, const char *op, const char *domain, const int *in, int n_in)
{
    char nm[32], out[32];
    snprintf(nm, sizeof nm, "n%d", g->n_nodes);
    snprintf(out, sizeof out, "y%d", g->n_nodes);
    int y = calq__graph_value(g, out);
    return calq__graph_add_node(g, nm, op, domain, in, n_in, &y, 1);
}

static const calq_qkind *kind_of(const calq_graph *g, int i)
{
    return calq__qkind_of_node(g, i);
}

static void test_conditions(void)
{
    calq_graph *g = calq__graph_new();
    const int64_t x4[4] = {1, 3, 8, 8}, x3[3] = {1, 3, 8}, w4[4] = {8, 3, 3, 3}, w3[3] = {8, 3, 3};
    const int64_t w5[5] = {8, 3, 3, 3, 3}, wt[4] = {4, 6, 3, 3}, m2[2] = {5, 7}, m4[4] = {1, 1, 5, 7};
    int x = value(g, "x", CALQ_DTYPE_FLOAT32, 4, x4, false);
    int xq = value(g, "xq", CALQ_DTYPE_INT8, 4, x4, false);
    int xu = value(g, "xu", CALQ_DTYPE_UNDEFINED, -1, NULL, false);
    int x3v = value(g, "x3", CALQ_DTYPE_FLOAT32, 3, x3, false);
    int w = value(g, "w", CALQ_DTYPE_FLOAT32, 4, w4, true);
    int w_3 = value(g, "w3", CALQ_DTYPE_FLOAT32, 3, w3, true);
    int w_5 = value(g, "w5", CALQ_DTYPE_FLOAT32, 5, w5, true);
    int wq = value(g, "wq", CALQ_DTYPE_INT8, 4, w4, true);
    int wv = value(g, "wv", CALQ_DTYPE_FLOAT32, 4, w4, false); /* a weight computed at run time */
    int wtv = value(g, "wt", CALQ_DTYPE_FLOAT32, 4, wt, true);
    int m = value(g, "m", CALQ_DTYPE_FLOAT32, 2, m2, true);
    int mv = value(g, "mv", CALQ_DTYPE_FLOAT32, 2, m2, false);
    int m_4 = value(g, "m4", CALQ_DTYPE_FLOAT32, 4, m4, true);

    int conv = node(g, "Conv", "", (int[]){x, w}, 2);
    int conv5 = node(g, "Conv", "", (int[]){x, w_5}, 2);
    int conv3 = node(g, "Conv", "", (int[]){x, w_3}, 2);
    int conv_int8_w = node(g, "Conv", "", (int[]){x, wq}, 2);
    int conv_int8_x = node(g, "Conv", "", (int[]){xq, w}, 2);
    int conv_var_w = node(g, "Conv", "", (int[]){x, wv}, 2);
    int conv_other_domain = node(g, "Conv", "com.example", (int[]){x, w}, 2);
    int conv_unknown_x = node(g, "Conv", "", (int[]){xu, w}, 2);
    EXPECT(kind_of(g, conv) == calq__qkind(CALQ_QKIND_CONV));
    EXPECT(kind_of(g, conv5) == calq__qkind(CALQ_QKIND_CONV));
    EXPECT(kind_of(g, conv_unknown_x) == calq__qkind(CALQ_QKIND_CONV));
    EXPECT(!kind_of(g, conv3) && !kind_of(g, conv_int8_w) && !kind_of(g, conv_int8_x));
    EXPECT(!kind_of(g, conv_var_w) && !kind_of(g, conv_other_domain));
    EXPECT(calq__node_quantizable(g, conv) && !calq__node_quantizable(g, conv3));
    EXPECT(calq__node_folds_bn(&g->nodes[conv]) && !calq__node_folds_bn(&g->nodes[conv_other_domain]));

    int ct = node(g, "ConvTranspose", "", (int[]){x, wtv}, 2);
    attr_int(g, ct, "group", 2);
    attr_ints(g, ct, "dilations", 2, (const int64_t[]){1, 1});
    int ct_dil = node(g, "ConvTranspose", "", (int[]){x, wtv}, 2);
    attr_ints(g, ct_dil, "dilations", 2, (const int64_t[]){1, 2});
    int ct5 = node(g, "ConvTranspose", "", (int[]){x, w_5}, 2);
    EXPECT(kind_of(g, ct) == calq__qkind(CALQ_QKIND_CONV_TRANSPOSE) && !kind_of(g, ct_dil) && !kind_of(g, ct5));
    EXPECT(!calq__node_folds_bn(&g->nodes[ct]));

    int gemm = node(g, "Gemm", "", (int[]){x, m}, 2);
    calq__node_add_attr(g, gemm, "beta", CALQ_ATTR_FLOAT)->f = 1.0f;
    int gemm_ta = node(g, "Gemm", "", (int[]){x, m}, 2);
    attr_int(g, gemm_ta, "transA", 1);
    int gemm_alpha = node(g, "Gemm", "", (int[]){x, m}, 2);
    calq__node_add_attr(g, gemm_alpha, "alpha", CALQ_ATTR_FLOAT)->f = 0.5f;
    int gemm_tb = node(g, "Gemm", "", (int[]){x, m}, 2);
    attr_int(g, gemm_tb, "transB", 1);
    EXPECT(kind_of(g, gemm) == calq__qkind(CALQ_QKIND_GEMM) && kind_of(g, gemm_tb) == calq__qkind(CALQ_QKIND_GEMM));
    EXPECT(!kind_of(g, gemm_ta) && !kind_of(g, gemm_alpha));

    int mm = node(g, "MatMul", "", (int[]){x, m}, 2);
    int mm4 = node(g, "MatMul", "", (int[]){x, m_4}, 2);
    int mm_var = node(g, "MatMul", "", (int[]){x, mv}, 2);
    EXPECT(kind_of(g, mm) == calq__qkind(CALQ_QKIND_MATMUL) && !kind_of(g, mm4));
    /* a variable second input: the two-variable-input row (§8.1), whatever its rank */
    EXPECT(kind_of(g, mm_var) == calq__qkind(CALQ_QKIND_MATMUL_VAR));
    /* a constant first input is no activation: nothing to calibrate it on (it used to be listed,
     * then fail at calibration with "never computed") */
    int mm_const_a = node(g, "MatMul", "", (int[]){m, mv}, 2);
    int gemm_const_a = node(g, "Gemm", "", (int[]){m, mv}, 2);
    int conv_const_x = node(g, "Conv", "", (int[]){value(g, "xc", CALQ_DTYPE_FLOAT32, 4, x4, true), w}, 2);
    EXPECT(!kind_of(g, mm_const_a) && !kind_of(g, gemm_const_a) && !kind_of(g, conv_const_x));

    int pool = node(g, "AveragePool", "", &x, 1);
    int pool_unknown = node(g, "AveragePool", "", &xu, 1);
    int pool3 = node(g, "AveragePool", "", &x3v, 1);
    int relu = node(g, "Relu", "", &x, 1);
    EXPECT(kind_of(g, pool) == calq__qkind(CALQ_QKIND_AVERAGE_POOL));
    EXPECT(kind_of(g, pool_unknown) == calq__qkind(CALQ_QKIND_AVERAGE_POOL));
    EXPECT(!kind_of(g, pool3) && !kind_of(g, relu));

    /* weight geometry (§8.2): Conv dim 0, grouped ConvTranspose group * dim 1, Gemm [K, N] or
     * [N, K] with transB, MatMul the last axis */
    const calq_qkind *kc = calq__qkind(CALQ_QKIND_CONV), *kt = calq__qkind(CALQ_QKIND_CONV_TRANSPOSE);
    const calq_qkind *kg = calq__qkind(CALQ_QKIND_GEMM), *km = calq__qkind(CALQ_QKIND_MATMUL);
    EXPECT(calq__qkind_out_channels(kc, &g->nodes[conv], 4, w4) == 8);
    EXPECT(calq__qkind_out_channels(kt, &g->nodes[ct], 4, wt) == 12 && calq__qkind_group(kt, &g->nodes[ct]) == 2);
    EXPECT(calq__qkind_weight_axis(kt, &g->nodes[ct], 4) == 1);
    EXPECT(calq__qkind_out_channels(kg, &g->nodes[gemm], 2, m2) == 7);
    EXPECT(calq__qkind_out_channels(kg, &g->nodes[gemm_tb], 2, m2) == 5);
    EXPECT(calq__qkind_weight_axis(kg, &g->nodes[gemm_tb], 2) == 0);
    EXPECT(calq__qkind_out_channels(km, &g->nodes[mm], 2, m2) == 7 && calq__qkind_group(km, &g->nodes[mm]) == 1);
    EXPECT(calq__qkind_out_channels(kt, &g->nodes[ct], 1, wt) == 0); /* too few axes */
    calq__graph_free(g);
}

/* Rows of the kinds issues 12 and 14 add, written as a row would be: the matching rule and the
 * columns already express them. */
static void test_future_rows(void)
{
    calq_graph *g = calq__graph_new();
    const int64_t x2[2] = {4, 5}, m2[2] = {5, 7}, w3[3] = {1, 32, 16}, r3[3] = {1, 32, 8}, b2[2] = {1, 64};
    const int64_t s3[3] = {6, 1, 16};
    int a = value(g, "a", CALQ_DTYPE_FLOAT32, 2, x2, false);
    int b = value(g, "b", CALQ_DTYPE_FLOAT32, 2, m2, false);
    int bc = value(g, "bc", CALQ_DTYPE_FLOAT32, 2, m2, true);
    int seq = value(g, "seq", CALQ_DTYPE_FLOAT32, 3, s3, false);
    int W = value(g, "W", CALQ_DTYPE_FLOAT32, 3, w3, true), R = value(g, "R", CALQ_DTYPE_FLOAT32, 3, r3, true);
    int Rv = value(g, "Rv", CALQ_DTYPE_FLOAT32, 3, r3, false), B = value(g, "B", CALQ_DTYPE_FLOAT32, 2, b2, true);

    /* MatMul with two variable inputs: symmetric int8 on both, no weights (§8.1) */
    const calq_qkind mm2 = {.onnx = "MatMul",
                            .act_inputs = 3u,
                            .act_symmetric = true,
                            .weights = CALQ_QKIND_WEIGHTS_NONE,
                            .weight_input = -1,
                            .weight2_input = -1,
                            .bias_input = -1,
                            .layout = CALQ_WEIGHTS_MATRIX,
                            .output_channel_axis = -1};
    int mm_var = node(g, "MatMul", "", (int[]){a, b}, 2), mm_const = node(g, "MatMul", "", (int[]){a, bc}, 2);
    EXPECT(calq__qkind_match(&mm2, g, mm_var) && !calq__qkind_match(&mm2, g, mm_const));
    /* the table's row is that one: the constant-weight row takes the other MatMul */
    const calq_qkind *row = calq__qkind(CALQ_QKIND_MATMUL_VAR);
    EXPECT(kind_of(g, mm_const) == calq__qkind(CALQ_QKIND_MATMUL) && kind_of(g, mm_var) == row);
    EXPECT(row->act_inputs == mm2.act_inputs && row->act_symmetric && row->weights == CALQ_QKIND_WEIGHTS_NONE);
    /* its input 1 has its own record key; input 0 is the layer's, the constant MatMul's weight none */
    EXPECT(calq__qkind_of_input(g, mm_var, 1) == row && !calq__qkind_of_input(g, mm_var, 0));
    EXPECT(!calq__qkind_of_input(g, mm_const, 1) && !calq__qkind_of_input(g, mm_var, 2));

    /* tensor-only Add and Concat (§7.2 tensor_quantize) */
    const calq_qkind add = {.onnx = "Add",
                            .act_inputs = 3u,
                            .weights = CALQ_QKIND_WEIGHTS_NONE,
                            .tensor_only = true,
                            .weight_input = -1,
                            .weight2_input = -1,
                            .bias_input = -1,
                            .layout = CALQ_WEIGHTS_MATRIX};
    const calq_qkind concat = {.onnx = "Concat",
                               .act_inputs = CALQ_QKIND_EVERY_INPUT,
                               .weights = CALQ_QKIND_WEIGHTS_NONE,
                               .tensor_only = true,
                               .weight_input = -1,
                               .weight2_input = -1,
                               .bias_input = -1,
                               .layout = CALQ_WEIGHTS_MATRIX};
    int add_vv = node(g, "Add", "", (int[]){a, a}, 2), add_vc = node(g, "Add", "", (int[]){b, bc}, 2);
    int cat = node(g, "Concat", "", (int[]){a, a, a}, 3), cat_c = node(g, "Concat", "", (int[]){a, bc}, 2);
    EXPECT(calq__qkind_match(&add, g, add_vv) && !calq__qkind_match(&add, g, add_vc));
    EXPECT(calq__qkind_match(&concat, g, cat) && !calq__qkind_match(&concat, g, cat_c));
    /* the table's tensor-only rows: not layers; their inputs one by one (a constant stays float) */
    EXPECT(!kind_of(g, add_vv) && !kind_of(g, cat));
    EXPECT(calq__qkind_of_input(g, add_vv, 0) == calq__qkind(CALQ_QKIND_ADD) &&
           calq__qkind_of_input(g, add_vv, 1) == calq__qkind(CALQ_QKIND_ADD));
    EXPECT(calq__qkind_of_input(g, add_vc, 0) == calq__qkind(CALQ_QKIND_ADD) && !calq__qkind_of_input(g, add_vc, 1));
    EXPECT(calq__qkind_of_input(g, cat, 2) == calq__qkind(CALQ_QKIND_CONCAT) && !calq__qkind_of_input(g, cat_c, 1));
    EXPECT(calq__qkind(CALQ_QKIND_ADD)->tensor_only && !strcmp(calq__qkind(CALQ_QKIND_ADD)->caffe, "Eltwise"));
    /* the int8 scheme: an Add / Mul with a constant operand, or one computed from constants
     * (Identity(bc)), stays float, so neither input is quantized (int8_all_operands); Concat's
     * variable inputs and a variable Add's are as tensor_quantize has them */
    int bc_id = node(g, "Identity", "", &bc, 1);
    g->values[g->nodes[bc_id].outputs[0]].producer = bc_id; /* this graph is never sorted, which sets it */
    int add_vi = node(g, "Add", "", (int[]){b, g->nodes[bc_id].outputs[0]}, 2);
    int mul_cv = node(g, "Mul", "", (int[]){bc, b}, 2);
    EXPECT(calq__qkind(CALQ_QKIND_ADD)->int8_all_operands && calq__qkind(CALQ_QKIND_MUL)->int8_all_operands &&
           !calq__qkind(CALQ_QKIND_CONCAT)->int8_all_operands);
    EXPECT(!calq__qkind_int8_input(g, add_vc, 0) && !calq__qkind_int8_input(g, add_vc, 1));
    EXPECT(calq__qkind_of_input(g, add_vi, 1) && !calq__qkind_int8_input(g, add_vi, 0) &&
           !calq__qkind_int8_input(g, add_vi, 1));
    EXPECT(calq__qkind_of_input(g, mul_cv, 1) && !calq__qkind_int8_input(g, mul_cv, 1));
    EXPECT(calq__qkind_int8_input(g, add_vv, 0) == calq__qkind(CALQ_QKIND_ADD) &&
           calq__qkind_int8_input(g, add_vv, 1) == calq__qkind(CALQ_QKIND_ADD));
    EXPECT(calq__qkind_int8_input(g, cat_c, 0) == calq__qkind(CALQ_QKIND_CONCAT) &&
           !calq__qkind_int8_input(g, cat_c, 1));
    int relu = node(g, "Relu", "", &a, 1);
    EXPECT(!calq__qkind_of_input(g, relu, 0));
    char buf[256];
    EXPECT(!strcmp(calq__qkind_names(CALQ_QKIND_NAMES_TENSOR, buf, sizeof buf),
                   "MaxPool, Add, Mul, Concat, GlobalAveragePool, Resize, Sigmoid, LeakyRelu, Softmax"));

    /* LSTM per channel with W and R (§8.1 CHANNEL_WISE_ONNX_TYPES) */
    const calq_qkind lstm = {.onnx = "LSTM",
                             .act_inputs = 1u,
                             .weights = CALQ_QKIND_WEIGHTS_CONST,
                             .weight_input = 1,
                             .weight2_input = 2,
                             .bias_input = 3,
                             .layout = CALQ_WEIGHTS_CONV,
                             .weight_channel_axis = 1,
                             .output_channel_axis = -1,
                             .channel_wise = true,
                             .weight_ranks = 1u << 3,
                             .attrs = {{CALQ_QKIND_ATTR_INT_IS, "layout", 0, 0}}};
    int l_ok = node(g, "LSTM", "", (int[]){seq, W, R, B}, 4), l_var = node(g, "LSTM", "", (int[]){seq, W, Rv, B}, 4);
    int l_batch_first = node(g, "LSTM", "", (int[]){seq, W, R, B}, 4);
    attr_int(g, l_batch_first, "layout", 1);
    EXPECT(calq__qkind_match(&lstm, g, l_ok) && !calq__qkind_match(&lstm, g, l_var));
    EXPECT(!calq__qkind_match(&lstm, g, l_batch_first));
    EXPECT(calq__qkind_out_channels(&lstm, &g->nodes[l_ok], 3, w3) == 32);
    calq__graph_free(g);
}

int main(void)
{
    test_rows();
    test_lookups();
    test_conditions();
    test_future_rows();
    printf("test_graph_qkind: %d failure(s)\n", failures);
    return failures != 0;
}
