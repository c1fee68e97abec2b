/* calq_save_model on the in-memory test model (tests/support/calib_model.h: conv, pool, fc,
 * mm, deconv quantizable): the QDQ and QOperator structures, int8 weights and int32 bias
 * against hand-computed values (amct-reference.md §6.1, §6.2), and the save-time failures
 * (§4.4, §8.4) leaving no file behind. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file.h"
#include "calib_model.h"
#include "onnx/onnx.pb-c.h"

#include "expect.h"

static char dir[64];

/* conv weights are 0.25*((i % 7) - 3) for i = 0..3: channel 0 [-0.75, -0.5], channel 1
 * [-0.25, 0]; per-channel ARQ: 0.75/128 and 0.25/128 (a negative extreme divides by 128). */
static const char RECORD[] =
    "record { key: \"conv\" value { scale_d: 0.5 offset_d: -128 scale_w: 0.005859375 scale_w: 0.001953125 "
    "offset_w: 0 offset_w: 0 } }\n"
    "record { key: \"pool\" value { scale_d: 0.5 offset_d: -128 scale_w: 1 offset_w: 0 } }\n"
    "record { key: \"fc\" value { scale_d: 0.25 offset_d: 3 scale_w: 0.01 offset_w: 0 } }\n"
    "record { key: \"mm\" value { scale_d: 0.25 offset_d: 3 scale_w: 0.02 offset_w: 0 } }\n"
    "record { key: \"deconv\" value { scale_d: 0.1 offset_d: 0 scale_w: 0.1 scale_w: 0.2 offset_w: 0 "
    "offset_w: 0 } }\n";

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* The saved model (owner: caller, onnx__model_proto__free_unpacked), or NULL. */
static Onnx__ModelProto *load(const char *path)
{
    char *buf;
    size_t n;
    calq_error err = {0};
    if (calq__read_file(path, &buf, &n, &err) != CALQ_OK) return NULL;
    Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, n, (const uint8_t *)buf);
    free(buf);
    return m;
}

static int count_op(const Onnx__ModelProto *m, const char *op)
{
    int c = 0;
    for (size_t i = 0; i < m->graph->n_node; i++) c += strcmp(m->graph->node[i]->op_type, op) == 0;
    return c;
}

static const Onnx__TensorProto *init(const Onnx__ModelProto *m, const char *name)
{
    for (size_t i = 0; i < m->graph->n_initializer; i++)
        if (!strcmp(m->graph->initializer[i]->name, name)) return m->graph->initializer[i];
    return NULL;
}

static const Onnx__NodeProto *node_out(const Onnx__ModelProto *m, const char *out)
{
    for (size_t i = 0; i < m->graph->n_node; i++)
        if (m->graph->node[i]->n_output && !strcmp(m->graph->node[i]->output[0], out)) return m->graph->node[i];
    return NULL;
}

static void test_qdq(calq_model *model, const char *rec)
{
    char prefix[96], path[128];
    snprintf(prefix, sizeof prefix, "%s/m", dir);
    calq_error err = {0};
    EXPECT(calq_save_model(model, rec, CALQ_SAVE_QDQ, prefix, &err) == CALQ_OK);
    if (err.status) fprintf(stderr, "  %s\n", err.message);
    snprintf(path, sizeof path, "%s_qdq.onnx", prefix);
    Onnx__ModelProto *m = load(path);
    EXPECT(m != NULL);
    if (!m) return;
    /* x (conv, deconv: different factors), r (pool), f (fc), g (mm): 5 activation pairs */
    EXPECT(count_op(m, "QuantizeLinear") == 5);
    /* 5 activations + 4 weights (pool has none); no bias in this model */
    EXPECT(count_op(m, "DequantizeLinear") == 9);
    const Onnx__TensorProto *w = init(m, "conv.weight_quantized");
    EXPECT(w && w->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT8 && w->raw_data.len == 4);
    if (w && w->raw_data.len == 4) {
        const int8_t *q = (const int8_t *)w->raw_data.data, want[4] = {-128, -85, -128, 0};
        for (int i = 0; i < 4; i++) EXPECT(q[i] == want[i]);
    }
    const Onnx__NodeProto *dq = node_out(m, "conv.weight");
    EXPECT(dq && dq->n_attribute == 1 && !strcmp(dq->attribute[0]->name, "axis") && dq->attribute[0]->i == 0);
    const Onnx__NodeProto *ddq = node_out(m, "deconv.weight");
    EXPECT(ddq && ddq->n_attribute == 1 && ddq->attribute[0]->i == 1); /* ConvTranspose: axis 1 */
    const Onnx__TensorProto *zp = init(m, "x_zero_point");
    EXPECT(zp && zp->raw_data.len == 1 && (int8_t)zp->raw_data.data[0] == -128);
    EXPECT(m->opset_import[0]->version == 13);
    onnx__model_proto__free_unpacked(m, NULL);
}

static void test_qoperator(calq_model *model, const char *rec)
{
    char prefix[96], path[128];
    snprintf(prefix, sizeof prefix, "%s/m", dir);
    calq_error err = {0};
    EXPECT(calq_save_model(model, rec, CALQ_SAVE_QOPERATOR, prefix, &err) == CALQ_OK);
    snprintf(path, sizeof path, "%s_qoperator.onnx", prefix);
    Onnx__ModelProto *m = load(path);
    EXPECT(m != NULL);
    if (!m) return;
    /* conv -> relu -> pool (offset_d -128): QLinearConv with the Relu absorbed; fc is a Gemm
     * and mm feeds a float Add, so both stay QDQ; deconv is a graph output */
    EXPECT(count_op(m, "QLinearConv") == 1);
    EXPECT(count_op(m, "Relu") == 0);
    EXPECT(count_op(m, "QLinearMatMul") == 0);
    const Onnx__NodeProto *qc = node_out(m, "r_quantized");
    EXPECT(qc && !strcmp(qc->op_type, "QLinearConv") && qc->n_input == 8);
    onnx__model_proto__free_unpacked(m, NULL);
}

static const Onnx__NodeProto *node_named(const Onnx__ModelProto *m, const char *name)
{
    for (size_t i = 0; i < m->graph->n_node; i++)
        if (!strcmp(m->graph->node[i]->name, name)) return m->graph->node[i];
    return NULL;
}

static float attr_f(const Onnx__NodeProto *n, const char *name)
{
    for (size_t i = 0; n && i < n->n_attribute; i++)
        if (!strcmp(n->attribute[i]->name, name)) return n->attribute[i]->f;
    return -1e30f;
}

/* AMCT's deploy (§9.1) and fake-quant (§9.2) models, written by one call. */
static void test_ascend(calq_model *model, const char *rec)
{
    char prefix[96], path[128];
    snprintf(prefix, sizeof prefix, "%s/m", dir);
    calq_error err = {0};
    const calq_save_format fmts[2] = {CALQ_SAVE_ASCEND_FAKE_QUANT, CALQ_SAVE_ASCEND_DEPLOY};
    EXPECT(calq_save_models(model, rec, NULL, fmts, 2, prefix, &err) == CALQ_OK);
    if (err.status) fprintf(stderr, "  %s\n", err.message);
    snprintf(path, sizeof path, "%s_deploy_model.onnx", prefix);
    Onnx__ModelProto *m = load(path);
    EXPECT(m != NULL);
    if (m) {
        /* conv and deconv read x with different factors: 5 quantized activations, 5 layers */
        EXPECT(count_op(m, "AscendQuant") == 5);
        EXPECT(count_op(m, "AscendDequant") == 5);
        const Onnx__NodeProto *q = node_named(m, "conv.quant");
        EXPECT(q && attr_f(q, "scale") == 2.0f && attr_f(q, "offset") == -128.0f); /* 1/scale_d, offset_d */
        const Onnx__TensorProto *w = init(m, "conv.weight_quant");
        EXPECT(w && w->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT8 && w->raw_data.len == 4);
        if (w && w->raw_data.len == 4) {
            const int8_t *wq = (const int8_t *)w->raw_data.data, want[4] = {-128, -85, -128, 0};
            for (int i = 0; i < 4; i++) EXPECT(wq[i] == want[i]);
        }
        /* deq_scale = scale_d * scale_w[c] packed as float bits (§6.3): 0.5 * 0.005859375 = 0.0029296875
         * = 0x3B400000; 0.5 * 0.001953125 = 0.0009765625 = 0x3A800000 */
        const Onnx__TensorProto *p = init(m, "conv.dequant.param");
        EXPECT(p && p->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__UINT64 && p->raw_data.len == 16);
        if (p && p->raw_data.len == 16) {
            uint64_t v[2];
            memcpy(v, p->raw_data.data, 16);
            EXPECT(v[0] == 0x3B400000u && v[1] == 0x3A800000u);
        }
        const Onnx__TensorProto *pp = init(m, "pool.dequant.param"); /* AvgPool: scale_d alone */
        EXPECT(pp && pp->raw_data.len == 8);
        if (pp && pp->raw_data.len == 8) {
            uint64_t v;
            memcpy(&v, pp->raw_data.data, 8);
            EXPECT(v == 0x3F000000u);
        }
        const Onnx__NodeProto *d = node_named(m, "conv.dequant");
        EXPECT(d && d->n_input == 2 && !strcmp(d->input[0], "conv.dequant.input0"));
        onnx__model_proto__free_unpacked(m, NULL);
    }
    snprintf(path, sizeof path, "%s_fake_quant_model.onnx", prefix);
    m = load(path);
    EXPECT(m != NULL);
    if (m) {
        EXPECT(count_op(m, "AscendQuant") == 0 && count_op(m, "Round") == 5 && count_op(m, "Clip") == 5);
        const Onnx__TensorProto *w = init(m, "conv.weight_quant"); /* w_q as float */
        EXPECT(w && w->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT && w->raw_data.len == 16);
        if (w && w->raw_data.len == 16) {
            float wf[4];
            memcpy(wf, w->raw_data.data, 16);
            EXPECT(wf[0] == -128.0f && wf[1] == -85.0f && wf[2] == -128.0f && wf[3] == 0.0f);
        }
        const Onnx__TensorProto *s = init(m, "conv.dequant.scale"); /* [C, 1, 1] */
        EXPECT(s && s->n_dims == 3 && s->dims[0] == 2 && s->dims[1] == 1 && s->raw_data.len == 8);
        if (s && s->raw_data.len == 8) {
            float v[2];
            memcpy(v, s->raw_data.data, 8);
            EXPECT(v[0] == 0.0029296875f && v[1] == 0.0009765625f);
        }
        onnx__model_proto__free_unpacked(m, NULL);
    }
    /* one save, several files: when the last cannot be written, the first keeps its earlier
     * content and no temporary file is left */
    char keep[128], blocker[128];
    snprintf(keep, sizeof keep, "%s/k_fake_quant_model.onnx", dir);
    snprintf(blocker, sizeof blocker, "%s/k_deploy_model.onnx", dir);
    write_text(keep, "earlier output");
    EXPECT(mkdir(blocker, 0700) == 0);
    snprintf(prefix, sizeof prefix, "%s/k", dir);
    EXPECT(calq_save_models(model, rec, NULL, fmts, 2, prefix, &err) != CALQ_OK);
    EXPECT(strstr(err.message, "is a folder") != NULL);
    char *buf = NULL;
    size_t n = 0;
    EXPECT(calq__read_file(keep, &buf, &n, &err) == CALQ_OK && n == 14 && !memcmp(buf, "earlier output", 14));
    free(buf);
    DIR *dp = opendir(dir);
    for (struct dirent *e; dp && (e = readdir(dp));)
        if (strstr(e->d_name, ".tmp.")) {
            fprintf(stderr, "  temporary file left: %s\n", e->d_name);
            failures++;
        }
    if (dp) closedir(dp);
    rmdir(blocker);
    unlink(keep);
}

/* tensor_quantize (§7.2): both inputs of the Add, "add:0" and "add:1" in the record. QDQ: a
 * Q -> DQ pair before each; deploy: AscendQuant -> AscendAntiQuant{scale_d, -offset_d} (§9.3);
 * fake-quant: the chain -> Mul(scale_d). The layers are written as without the entries. */
static void test_tensor_quantize(calq_model *model)
{
    char rec[128], cfg[128], prefix[96], path[160];
    snprintf(rec, sizeof rec, "%s/record_t.txt", dir);
    snprintf(cfg, sizeof cfg, "%s/config_t.json", dir);
    snprintf(prefix, sizeof prefix, "%s/t", dir);
    char text[sizeof RECORD + 200];
    snprintf(text, sizeof text,
             "%srecord { key: \"add:0\" value { scale_d: 0.125 offset_d: 4 } }\n"
             "record { key: \"add:1\" value { scale_d: 0.0625 offset_d: -2 } }\n",
             RECORD);
    write_text(rec, text);
    write_text(cfg, "{\"conv\": {}, \"pool\": {}, \"fc\": {}, \"mm\": {}, \"deconv\": {}, \"tensor_quantize\": "
                    "[{\"layer_name\": \"add\", \"input_index\": 0}, {\"layer_name\": \"add\", \"input_index\": 1}]}");
    const calq_save_format fmts[] = {CALQ_SAVE_QDQ, CALQ_SAVE_ASCEND_DEPLOY, CALQ_SAVE_ASCEND_FAKE_QUANT};
    calq_error err = {0};
    EXPECT(calq_save_models(model, rec, cfg, fmts, 3, prefix, &err) == CALQ_OK);
    if (err.status) fprintf(stderr, "  %s\n", err.message);
    snprintf(path, sizeof path, "%s_qdq.onnx", prefix);
    Onnx__ModelProto *m = load(path);
    const Onnx__NodeProto *add = m ? node_named(m, "add") : NULL;
    EXPECT(m && count_op(m, "QuantizeLinear") == 7 && add && add->n_input == 2);
    for (int k = 0; add && k < 2; k++) {
        const Onnx__NodeProto *dq = node_out(m, add->input[k]);
        const Onnx__NodeProto *q = dq ? node_out(m, dq->input[0]) : NULL;
        const Onnx__TensorProto *sc = dq ? init(m, dq->input[1]) : NULL;
        EXPECT(dq && !strcmp(dq->op_type, "DequantizeLinear") && q && !strcmp(q->op_type, "QuantizeLinear"));
        EXPECT(sc && sc->raw_data.len == 4 && *(const float *)sc->raw_data.data == (k ? 0.0625f : 0.125f));
        EXPECT(q && !strcmp(q->input[0], k ? "y" : "h"));
    }
    if (m) onnx__model_proto__free_unpacked(m, NULL);
    snprintf(path, sizeof path, "%s_deploy_model.onnx", prefix);
    m = load(path);
    add = m ? node_named(m, "add") : NULL;
    EXPECT(m && count_op(m, "AscendAntiQuant") == 2 && add);
    for (int k = 0; add && k < 2; k++) {
        const Onnx__NodeProto *a = node_out(m, add->input[k]);
        const Onnx__NodeProto *q = a ? node_out(m, a->input[0]) : NULL;
        EXPECT(a && !strcmp(a->op_type, "AscendAntiQuant") && attr_f(a, "scale") == (k ? 0.0625f : 0.125f) &&
               attr_f(a, "offset") == (k ? 2.0f : -4.0f));
        EXPECT(q && !strcmp(q->op_type, "AscendQuant") && attr_f(q, "scale") == (k ? 16.0f : 8.0f));
    }
    if (m) onnx__model_proto__free_unpacked(m, NULL);
    snprintf(path, sizeof path, "%s_fake_quant_model.onnx", prefix);
    m = load(path);
    add = m ? node_named(m, "add") : NULL;
    const Onnx__NodeProto *mul = add ? node_out(m, add->input[1]) : NULL;
    EXPECT(mul && !strcmp(mul->op_type, "Mul") && node_out(m, mul->input[0]) &&
           !strcmp(node_out(m, mul->input[0])->op_type, "Sub"));
    if (m) onnx__model_proto__free_unpacked(m, NULL);
    const char *files[] = {"record_t.txt", "config_t.json", "t_qdq.onnx", "t_deploy_model.onnx",
                           "t_fake_quant_model.onnx"};
    for (size_t i = 0; i < sizeof files / sizeof files[0] && !getenv("CALQ_TEST_KEEP"); i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
}

static void expect_fail(calq_model *model, const char *text, const char *message)
{
    char rec[96], prefix[96], path[128];
    snprintf(rec, sizeof rec, "%s/bad_record.txt", dir);
    snprintf(prefix, sizeof prefix, "%s/bad", dir);
    snprintf(path, sizeof path, "%s_qdq.onnx", prefix);
    write_text(rec, text);
    calq_error err = {0};
    EXPECT(calq_save_model(model, rec, CALQ_SAVE_QDQ, prefix, &err) != CALQ_OK);
    if (!strstr(err.message, message)) {
        fprintf(stderr, "  expected \"%s\" in: %s\n", message, err.message);
        failures++;
    }
    EXPECT(access(path, F_OK) != 0);
}

int main(void)
{
    calq_error err = {0};
    calq_model *model = calib_test_model(&err);
    if (!model) {
        fprintf(stderr, "test model: %s\n", err.message);
        return 1;
    }
    snprintf(dir, sizeof dir, "/tmp/calq_test_export.XXXXXX");
    if (!mkdtemp(dir)) return 1;
    char rec[96];
    snprintf(rec, sizeof rec, "%s/record.txt", dir);
    write_text(rec, RECORD);
    test_qdq(model, rec);
    test_qoperator(model, rec);
    test_ascend(model, rec);
    test_tensor_quantize(model);
    /* the save-time failures: a missing layer (all listed), offset_d 200, scale_d 0 */
    const char *mm = strstr(RECORD, "record { key: \"mm\"");
    const char *deconv = strstr(RECORD, "record { key: \"deconv\"");
    char missing[sizeof RECORD];
    snprintf(missing, sizeof missing, "%.*s", (int)(mm - RECORD), RECORD);
    expect_fail(model, missing, "has no factors for 2 quantizable layers: mm, deconv");
    char text[sizeof RECORD + 16];
    snprintf(text, sizeof text, "%.*s", (int)(deconv - RECORD), RECORD);
    strcat(text, "record { key: \"deconv\" value { scale_d: 0.1 offset_d: 200 scale_w: 0.1 scale_w: 0.2 offset_w: 0 "
                 "offset_w: 0 } }\n");
    expect_fail(model, text, "offset_d's value should be in [-128, 127] in layer deconv");
    snprintf(text, sizeof text, "%.*s", (int)(deconv - RECORD), RECORD);
    strcat(text, "record { key: \"deconv\" value { scale_d: 0 offset_d: 0 scale_w: 0.1 scale_w: 0.2 offset_w: 0 "
                 "offset_w: 0 } }\n");
    expect_fail(model, text, "scale_d's value shoule be in positivate range of float32 in layer deconv");
    /* cleanup (CALQ_TEST_KEEP=1 keeps the files, e.g. to run them in onnxruntime) */
    char path[160];
    if (getenv("CALQ_TEST_KEEP")) {
        fprintf(stderr, "kept %s\n", dir);
        calq_model_free(model);
        return failures ? 1 : 0;
    }
    const char *files[] = {"record.txt",       "bad_record.txt",          "m_qdq.onnx",
                           "m_qoperator.onnx", "m_fake_quant_model.onnx", "m_deploy_model.onnx"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
    calq_model_free(model);
    if (failures) fprintf(stderr, "%d failure(s)\n", failures);
    return failures ? 1 : 0;
}
