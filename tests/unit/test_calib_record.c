/* The record file (amct-reference.md §7.1): exact float round trips through the writer and the
 * reader, AMCT's flavours (unknown fields read over), and every save-time check of §4.4 with
 * its message, against the in-memory test model (conv, pool, fc, mm, deconv quantizable). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "calib/record.h"
#include "graph/graph.h"
#include "frontend/model.h"
#include "calib_model.h"

#include "expect.h"

static calq_model *model;

/* A record valid for the test model; `conv_value` replaces conv's value body. */
static char *record_text(const char *conv_value)
{
    static char buf[4096];
    snprintf(buf, sizeof buf,
             "record {\n  key: \"conv\"\n  value {\n%s\n  }\n}\n"
             "record { key: \"pool\" value { scale_d: 0.5 offset_d: -128 scale_w: 1 offset_w: 0 } }\n"
             "record { key: \"fc\" value { scale_d: 0.25 offset_d: 3 scale_w: 0.01 offset_w: 0 } }\n"
             "record { key: \"mm\" value { scale_d: 0.25 offset_d: 3 scale_w: 0.02 offset_w: 0 } }\n"
             "record { key: \"deconv\" value { scale_d: 0.1 offset_d: 0 scale_w: 0.1 scale_w: 0.2 offset_w: 0 "
             "offset_w: 0 } }\n",
             conv_value);
    return buf;
}

static const char GOOD_CONV[] = "    scale_d: 0.003921569\n    offset_d: -128\n    scale_w: 0.0025009443\n"
                                "    scale_w: 0.5\n    offset_w: 0\n    offset_w: 0";

/* Parses and checks `text`; returns the status and leaves the message in err. */
static calq_status check_text(const char *text, calq_error *err)
{
    calq_record *r = NULL;
    memset(err, 0, sizeof *err);
    calq_status st = calq__record_parse(text, strlen(text), "r.txt", &r, err);
    if (st == CALQ_OK) st = calq__record_check(r, model, "m.onnx", "r.txt", err);
    calq__record_free(r);
    return st;
}

static void expect_fail(const char *text, calq_status status, const char *message)
{
    calq_error err;
    calq_status st = check_text(text, &err);
    EXPECT(st == status);
    if (!strstr(err.message, message)) {
        fprintf(stderr, "  expected \"%s\" in: %s\n", message, err.message);
        failures++;
    }
}

static void conv_fail(const char *conv_value, calq_status status, const char *message)
{
    expect_fail(record_text(conv_value), status, message);
}

static void test_round_trip(void)
{
    const float vals[] = {0.003921569f, 1.0f / 3.0f, 9.86076132e-32f, 3.4028235e38f, 0.1f, 8388608.0f, 1.17549435e-38f};
    const int n = (int)(sizeof vals / sizeof vals[0]);
    calq_error err = {0};
    calq_record *r = calq__record_new();
    calq_record_layer *l = calq__record_add(r, "layer \"q\"/1", &err);
    l->has_scale_d = l->has_offset_d = true;
    l->scale_d = 0.1f;
    l->offset_d = -128;
    l->scale_w = malloc(n * sizeof(float));
    l->offset_w = calloc(n, sizeof(int64_t));
    l->n_scale_w = l->n_offset_w = n;
    memcpy(l->scale_w, vals, sizeof vals);
    char path[] = "/tmp/calq_record_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    EXPECT(calq__record_write_file(r, path, &err) == CALQ_OK);
    calq_record *back = NULL;
    EXPECT(calq__record_read_file(path, &back, &err) == CALQ_OK);
    EXPECT(back && back->n_layers == 1 && strcmp(back->layers[0].name, "layer \"q\"/1") == 0);
    if (back && back->n_layers == 1) {
        const calq_record_layer *b = &back->layers[0];
        EXPECT(b->has_scale_d && b->scale_d == 0.1f && b->offset_d == -128 && b->n_scale_w == n);
        for (int i = 0; i < n && i < b->n_scale_w; i++) EXPECT(memcmp(&b->scale_w[i], &vals[i], sizeof(float)) == 0);
    }
    calq__record_free(back);
    calq__record_free(r);
    unlink(path);
}

static void test_flavours(void)
{
    calq_error err;
    /* calq's own layout and AMCT's Caffe / ONNX extras */
    EXPECT(check_text(record_text(GOOD_CONV), &err) == CALQ_OK);
    char conv[1024];
    snprintf(conv, sizeof conv,
             "%s\n    skip_fusion: true\n    channels: 2\n    height: 4\n    width: 4\n    act_type: \"INT8\"\n"
             "    wts_type: \"INT8\"\n    is_tensor_quantize: false",
             GOOD_CONV);
    EXPECT(check_text(record_text(conv), &err) == CALQ_OK);
    /* every other field §7.1 documents (ONNX and PyTorch flavours) */
    snprintf(conv, sizeof conv,
             "%s\n    op_data_type: 0\n    tensor_balance_factor: 1\n    tensor_balance_factor: 1\n"
             "    dst_type: INT8\n    kv_cache_value { a: 1 }\n    prune_record: 3",
             GOOD_CONV);
    EXPECT(check_text(record_text(conv), &err) == CALQ_OK);
    /* shift_bit all in [1, 16] and all 0 are both legal */
    snprintf(conv, sizeof conv, "%s\n    shift_bit: 1\n    shift_bit: 16", GOOD_CONV);
    EXPECT(check_text(record_text(conv), &err) == CALQ_OK);
    snprintf(conv, sizeof conv, "%s\n    shift_bit: 0\n    shift_bit: 0", GOOD_CONV);
    EXPECT(check_text(record_text(conv), &err) == CALQ_OK);
}

static void test_checks(void)
{
    char conv[1024];
    /* §4.4, one case per rule */
    expect_fail("", CALQ_ERR_RECORD_FILE,
                "record_file is empty, no layers to be quantized. please ensure calibration is finished");
    expect_fail("record { key: \"nope\" value { scale_d: 1 offset_d: 0 } }", CALQ_ERR_RECORD_FILE,
                "find nope failure in m.onnx. Please match m.onnx and r.txt.");
    expect_fail("record { key: \"relu\" value { scale_d: 1 offset_d: 0 } }", CALQ_ERR_RECORD_FILE,
                "layer relu cannot be quantized");
    conv_fail("offset_d: 0 scale_w: 1 scale_w: 1 offset_w: 0 offset_w: 0", CALQ_ERR_RECORD_FILE,
              "cannot find scale_d of layer conv in record_file, please check data calibration process!");
    conv_fail("scale_d: 1 scale_w: 1 scale_w: 1 offset_w: 0 offset_w: 0", CALQ_ERR_RECORD_FILE,
              "cannot find offset_d of layer conv in record_file");
    conv_fail("scale_d: 1 offset_d: 0", CALQ_ERR_RECORD_FILE, "cannot find scale_w of layer conv in record_file");
    /* each field in range, the numbers the saved models carry not (hostile-input probe #6: saved
     * with inf deq_scales) */
    conv_fail("scale_d: 3e38 offset_d: 0 scale_w: 1 scale_w: 1 offset_w: 0 offset_w: 0", CALQ_ERR_RECORD_FACTOR,
              "1/scale_d, the quantization scale of the saved models (amct-reference.md §9.1), is 3.33333312e-39");
    conv_fail("scale_d: 1e20 offset_d: 0 scale_w: 0.5 scale_w: 1e20 offset_w: 0 offset_w: 0", CALQ_ERR_RECORD_FACTOR,
              "deq_scale = scale_d * scale_w[1] = 1.00000002e+20 * 1.00000002e+20 is inf in float32");
    conv_fail("scale_d: 1e-20 offset_d: 0 scale_w: 1e-20 scale_w: 1 offset_w: 0 offset_w: 0", CALQ_ERR_RECORD_FACTOR,
              "in float32 (amct-reference.md §6.2), below the smallest normal float32");
    conv_fail("scale_d: 1 offset_d: 0 scale_w: 1 scale_w: 1", CALQ_ERR_RECORD_FILE,
              "cannot find offset_w of layer conv in record_file");
    expect_fail("record { key: \"pool\" value { scale_d: 1 offset_d: 0 scale_w: 0.5 offset_w: 0 } }",
                CALQ_ERR_RECORD_FILE, "find undesirable scale_w of layer pool in record_file");
    expect_fail("record { key: \"pool\" value { scale_d: 1 offset_d: 0 scale_w: 1 offset_w: 0 shift_bit: 3 } }",
                CALQ_ERR_RECORD_FILE, "shift_bit is not support, please delete shift_bit");
    snprintf(conv, sizeof conv, "scale_d: 0.1 offset_d: 128 scale_w: 1 scale_w: 1 offset_w: 0 offset_w: 0");
    conv_fail(conv, CALQ_ERR_RECORD_FACTOR, "offset_d's value should be in [-128, 127] in layer conv.");
    conv_fail("scale_d: 0.1 offset_d: -129 scale_w: 1 scale_w: 1 offset_w: 0 offset_w: 0", CALQ_ERR_RECORD_FACTOR,
              "offset_d's value should be in [-128, 127] in layer conv.");
    conv_fail("scale_d: 0.1 offset_d: 0 scale_w: 1 scale_w: 1 offset_w: 0 offset_w: 1", CALQ_ERR_RECORD_FACTOR,
              "offset_w's value should be 0 in layer conv.");
    conv_fail("scale_d: 0 offset_d: 0 scale_w: 1 scale_w: 1 offset_w: 0 offset_w: 0", CALQ_ERR_RECORD_FACTOR,
              "scale_d's value shoule be in positivate range of float32 in layer conv.");
    conv_fail("scale_d: inf offset_d: 0 scale_w: 1 scale_w: 1 offset_w: 0 offset_w: 0", CALQ_ERR_RECORD_FACTOR,
              "scale_d's value shoule be in positivate range of float32 in layer conv.");
    conv_fail("scale_d: nan offset_d: 0 scale_w: 1 scale_w: 1 offset_w: 0 offset_w: 0", CALQ_ERR_RECORD_FACTOR,
              "scale_d's value shoule be in positivate range of float32 in layer conv.");
    conv_fail("scale_d: 1 offset_d: 0 scale_w: -1 scale_w: 1 offset_w: 0 offset_w: 0", CALQ_ERR_RECORD_FACTOR,
              "scale_w's value shoule be in positivate range of float32 in layer conv.");
    conv_fail("scale_d: 1 offset_d: 0 scale_w: 1 scale_w: inf offset_w: 0 offset_w: 0", CALQ_ERR_RECORD_FACTOR,
              "scale_w's value shoule be in positivate range of float32 in layer conv.");
    conv_fail("scale_d: 1 offset_d: 0 scale_w: 1 scale_w: 1 offset_w: 0 offset_w: 0 shift_bit: 0 shift_bit: 3",
              CALQ_ERR_RECORD_FACTOR, "shift_bit's value shoule be in [1, 16] or all be 0 in layer conv");
    conv_fail("scale_d: 1 offset_d: 0 scale_w: 1 scale_w: 1 offset_w: 0 offset_w: 0 shift_bit: 17 shift_bit: 3",
              CALQ_ERR_RECORD_FACTOR, "shift_bit's value shoule be in [1, 16] or all be 0 in layer conv");
    /* lengths (§7.1 field rules, §8.4) */
    conv_fail("scale_d: 1 offset_d: 0 scale_w: 1 scale_w: 1 offset_w: 0", CALQ_ERR_RECORD_FACTOR,
              "has 2 scale_w but 1 offset_w values");
    conv_fail("scale_d: 1 offset_d: 0 scale_w: 1 scale_w: 1 scale_w: 1 offset_w: 0 offset_w: 0 offset_w: 0",
              CALQ_ERR_RECORD_FACTOR, "but its weight has 2 output channels");
    /* the reader's own errors */
    expect_fail("record { key: \"conv\" value { scale_d: 1 } }\nrecord { key: \"conv\" }", CALQ_ERR_BAD_FORMAT,
                "appears twice");
    expect_fail("record { key: \"conv\" value { scale_d: 1 }\n", CALQ_ERR_BAD_FORMAT, "r.txt:2:");
    expect_fail("record { key: \"conv\" value { scale_d: \"x\" } }", CALQ_ERR_BAD_FORMAT, "r.txt:1:");
    expect_fail("records { key: \"conv\" }", CALQ_ERR_BAD_FORMAT, "unknown field 'records'");
    expect_fail("record { key: \"conv\" junk: 1 }", CALQ_ERR_BAD_FORMAT, "unknown field 'junk'");
    expect_fail("record { value { scale_d: 1 } }", CALQ_ERR_BAD_FORMAT, "has no key");
    /* "<layer>:<input>" keys (§7.1): only for inputs quantized on their own; mm's input 1 is its weight */
    expect_fail("record { key: \"mm:1\" value { scale_d: 1 offset_d: 0 } }", CALQ_ERR_RECORD_FILE,
                "input 1 of layer mm (a MatMul with 2 inputs) cannot be quantized on its own");
    expect_fail("record { key: \"conv:7\" value { scale_d: 1 offset_d: 0 } }", CALQ_ERR_RECORD_FILE,
                "input 7 of layer conv");
    expect_fail("record { key: \"nope:1\" value { scale_d: 1 offset_d: 0 } }", CALQ_ERR_RECORD_FILE,
                "find nope:1 failure in m.onnx");
    /* an Add's inputs (tensor_quantize, §7.2): scale_d / offset_d only */
    char t[2048];
    snprintf(t, sizeof t, "%srecord { key: \"add:1\" value { scale_d: 0.5 offset_d: 3 } }\n", record_text(GOOD_CONV));
    calq_error err;
    EXPECT(check_text(t, &err) == CALQ_OK);
    snprintf(t, sizeof t, "%srecord { key: \"add:0\" value { scale_d: 0.5 offset_d: 3 scale_w: 1 offset_w: 0 } }\n",
             record_text(GOOD_CONV));
    expect_fail(t, CALQ_ERR_RECORD_FILE, "find undesirable scale_w of layer add:0");
    snprintf(t, sizeof t, "%srecord { key: \"add:0\" value { offset_d: 3 } }\n", record_text(GOOD_CONV));
    expect_fail(t, CALQ_ERR_RECORD_FILE, "cannot find scale_d of layer add:0");
}

/* MatMul "mm"(x, y) with two variable inputs, then a node "mm:1" of op_type reading its output
 * (and y). Owner: caller (calq__graph_free). */
static calq_graph *mm_pair(const char *op_type)
{
    calq_graph *h = calq__graph_new();
    const int64_t d2[2] = {4, 4};
    int vs[4] = {calq__graph_value(h, "x"), calq__graph_value(h, "y"), calq__graph_value(h, "mo"),
                 calq__graph_value(h, "io")};
    for (int i = 0; i < 4; i++) {
        h->values[vs[i]].dtype = CALQ_DTYPE_FLOAT32;
        h->values[vs[i]].ndim = 2;
        memcpy(h->values[vs[i]].dims, d2, sizeof d2);
    }
    calq__graph_add_node(h, "mm", "MatMul", "", (int[]){vs[0], vs[1]}, 2, &vs[2], 1);
    calq__graph_add_node(h, "mm:1", op_type, "", (int[]){vs[2], vs[1]}, strcmp(op_type, "Identity") ? 2 : 1, &vs[3], 1);
    return h;
}

/* Keys name a node, or "<node>:<input>" (decimal); a node whose own name looks like that wins. */
static void test_keys(void)
{
    const calq_graph *g = model->g;
    int in = 0, conv = calq__record_key_node(g, "conv", &in);
    EXPECT(conv >= 0 && in == -1 && !strcmp(g->nodes[conv].name, "conv"));
    EXPECT(calq__record_key_node(g, "conv:1", &in) == conv && in == 1);
    EXPECT(calq__record_key_node(g, "conv:12", &in) == conv && in == 12);
    EXPECT(calq__record_key_node(g, "conv:", &in) < 0 && calq__record_key_node(g, "conv:1a", &in) < 0);
    EXPECT(calq__record_key_node(g, "con:1", &in) < 0 && calq__record_key_node(g, ":1", &in) < 0);
    EXPECT(calq__record_key_node(g, "conv:123456", &in) < 0); /* not an input index */
    char *k = calq__record_key("a:b", 3);
    EXPECT(k && !strcmp(k, "a:b:3"));
    free(k);
    /* ... unless that node is no layer and the other reading is an input quantized on its own:
     * calibration keys input 1 of MatMul "mm" (two variable inputs) "mm:1", which must not
     * resolve to an Identity named "mm:1" (hostile-input probe #7); a quantizable layer of that
     * name still wins (calibration refuses to write such a key) */
    for (int quantizable = 0; quantizable < 2; quantizable++) {
        calq_graph *h = mm_pair(quantizable ? "MatMul" : "Identity");
        EXPECT(calq__record_key_node(h, "mm:1", &in) == (quantizable ? 1 : 0) && in == (quantizable ? -1 : 1));
        EXPECT(calq__record_key_node(h, "mm", &in) == 0 && in == -1);
        calq__graph_free(h);
    }
}

/* Fields inside a value that no flavour of §7.1 has are errors naming file:line and the field
 * (issue 14: they used to be read over, although docs/cli.md said they were rejected), and the
 * documented ones whose meaning calq would drop are refused. */
static void test_value_fields(void)
{
    char conv[1024];
    snprintf(conv, sizeof conv, "%s\n    scale_dd: 0.5", GOOD_CONV);
    conv_fail(conv, CALQ_ERR_BAD_FORMAT, "r.txt:10:5: unknown field 'scale_dd' in the value of layer \"conv\"");
    snprintf(conv, sizeof conv, "%s\n    sub { scale_d: 1 }", GOOD_CONV);
    conv_fail(conv, CALQ_ERR_BAD_FORMAT, "unknown field 'sub'");
    snprintf(conv, sizeof conv, "%s\n    act_type: \"INT4\"", GOOD_CONV);
    conv_fail(conv, CALQ_ERR_UNSUPPORTED, "act_type of layer conv is \"INT4\"; calq quantizes to INT8 only");
    snprintf(conv, sizeof conv, "%s\n    wts_type: INT16", GOOD_CONV);
    conv_fail(conv, CALQ_ERR_UNSUPPORTED, "wts_type of layer conv is \"INT16\"");
    /* DMQ factors: finite and > 0 (graph/balance.h) */
    snprintf(conv, sizeof conv, "%s\n    tensor_balance_factor: -2", GOOD_CONV);
    conv_fail(conv, CALQ_ERR_RECORD_FACTOR, "r.txt:10:5: layer conv has tensor_balance_factor -2");
    snprintf(conv, sizeof conv, "%s\n    tensor_balance_factor: nan", GOOD_CONV);
    conv_fail(conv, CALQ_ERR_RECORD_FACTOR, "finite and > 0");
    /* documented fields are still typed as protobuf types them */
    snprintf(conv, sizeof conv, "%s\n    channels: -1", GOOD_CONV);
    conv_fail(conv, CALQ_ERR_BAD_FORMAT, "r.txt:10:5: field 'channels'");
    snprintf(conv, sizeof conv, "%s\n    skip_fusion: maybe", GOOD_CONV);
    conv_fail(conv, CALQ_ERR_BAD_FORMAT, "field 'skip_fusion'");
}

/* Parses `text` without a model (what search and the readers before save do) and expects the
 * read itself to fail with `message`. */
static void read_fail(const char *text, const char *message)
{
    calq_record *r = NULL;
    calq_error err = {0};
    calq_status st = calq__record_parse(text, strlen(text), "r.txt", &r, &err);
    EXPECT_STATUS(st, CALQ_ERR_RECORD_FACTOR, &err, message);
    EXPECT(r == NULL && strstr(err.message, "§4.4") && strcmp(err.layer, "L") == 0);
    calq__record_free(r);
}

/* Hostile values are refused when the record is read, naming file:line:column, the layer and
 * §4.4's rule, not only at save time: zero, negative, NaN, infinite and subnormal scales (1/x
 * of a subnormal is inf in float32), offsets outside int8, absurd shift_bit. */
static void test_read_ranges(void)
{
    read_fail(
        "record { key: \"L\" value { scale_d: 1e-45 } }",
        "r.txt:1:27: scale_d's value shoule be in positivate range of float32 in layer L. (scale_d is 1.40129846e-45: "
        "subnormal");
    read_fail("record { key: \"L\" value { scale_d: 1e-39 offset_d: 0 } }", "subnormal");
    read_fail("record { key: \"L\" value { scale_d: 0 } }", "scale_d is 0: not > 0");
    read_fail("record { key: \"L\" value { scale_d: -0.5 } }", "scale_d is -0.5: not > 0");
    read_fail("record { key: \"L\" value { scale_d: nan } }", "scale_d is nan: NaN");
    read_fail("record { key: \"L\" value { scale_d: -inf } }", "not > 0");
    read_fail("record { key: \"L\" value { scale_d: inf } }", "scale_d is inf: infinite");
    read_fail("record {\n key: \"L\"\n value {\n  scale_d: 0.1\n  offset_d: 128\n } }",
              "r.txt:5:3: offset_d's value should be in [-128, 127] in layer L. (offset_d is 128");
    read_fail("record { key: \"L\" value { offset_d: -9223372036854775808 } }", "offset_d is -9223372036854775808");
    read_fail("record { key: \"L\" value { scale_w: 0.5 scale_w: 1e-40 } }", "scale_w[1] is 9.9999461e-41: subnormal");
    read_fail("record { key: \"L\" value { offset_w: 0 offset_w: -3 } }",
              "offset_w's value should be 0 in layer L. (offset_w[1] is -3");
    read_fail("record { key: \"L\" value { shift_bit: 18446744073709551615 } }",
              "shift_bit's value shoule be in [1, 16] or all be 0 in layer L (r.txt, line 1, column 27");
    read_fail("record { key: \"L\" value { shift_bit: 0 shift_bit: 3 } }", "shift_bit's value shoule be in [1, 16]");
    /* the smallest normal float and AMCT's own extremes are read */
    const char *ok = "record { key: \"L\" value { scale_d: 1.17549435e-38 offset_d: -128 scale_w: 3.4e38 "
                     "offset_w: 0 shift_bit: 16 } }\nrecord { key: \"M\" value { shift_bit: 0 shift_bit: 0 } }";
    calq_record *r = NULL;
    calq_error err = {0};
    EXPECT_OK(calq__record_parse(ok, strlen(ok), "r.txt", &r, &err));
    EXPECT(r && r->n_layers == 2 && r->layers[0].scale_d == FLT_MIN && r->layers[0].offset_d == -128);
    calq__record_free(r);
}

/* A growing text of n entries "record { key: "<prefix><i>" value { ... } }". */
static char *many_entries(int n, const char *prefix, size_t *len)
{
    size_t cap = (size_t)n * 96 + 64, at = 0;
    char *t = malloc(cap);
    for (int i = 0; t && i < n; i++)
        at += (size_t)snprintf(t + at, cap - at,
                               "record {\n  key: \"%s%d\"\n  value { scale_d: 0.1 offset_d: 0 scale_w: 0.1 offset_w: 0 "
                               "}\n}\n",
                               prefix, i);
    *len = at;
    return t;
}

/* Issue 14: reading was quadratic (a linear search per key for duplicates: 80k keys took 10 s
 * and more), and keys were checked only after the whole file was parsed, so a hostile file
 * cost its full size in time and memory before its first error was reported. */
static void test_cost(void)
{
    calq_error err = {0};
    size_t len;
    char *text = many_entries(80000, "layer_", &len);
    EXPECT(text != NULL);
    if (!text) return;
    calq_record *r = NULL;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    EXPECT_STATUS(calq__record_parse(text, len, "big.txt", &r, &err), CALQ_OK, &err, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    EXPECT(r && r->n_layers == 80000 && calq__record_find(r, "layer_79999") == &r->layers[79999]);
    /* linear: about 0.5 s here (ASan included); the quadratic reader took 10-50 s */
    if (s > 5.0) {
        fprintf(stderr, "  parsing 80000 entries took %.1f s\n", s);
        failures++;
    }
    calq__record_free(r);
    r = NULL;
    /* with the model, the first unknown key stops the read: the syntax error at the end of the
     * file is never reached (the old reader parsed everything first and reported that) */
    text[len - 2] = '{';
    EXPECT_STATUS(calq__record_parse_for(text, len, "big.txt", model, "m.onnx", &r, &err), CALQ_ERR_RECORD_FILE, &err,
                  "find layer_0 failure in m.onnx. Please match m.onnx and big.txt. (line 1 of the record");
    EXPECT(r == NULL);
    free(text);
    /* a layer's scale_w may not outnumber its channels: stops at the first value too many */
    const char *many_w = "record { key: \"conv\" value { scale_d: 1 offset_d: 0 scale_w: 1 scale_w: 1 scale_w: 1 "
                         "offset_w: 0 } }";
    EXPECT_STATUS(calq__record_parse_for(many_w, strlen(many_w), "r.txt", model, "m.onnx", &r, &err),
                  CALQ_ERR_RECORD_FACTOR, &err, "r.txt:1:75: layer conv has more scale_w values than its weight's 2");
    /* and a valid record reads the same with or without the model */
    const char *good = record_text(GOOD_CONV);
    EXPECT_STATUS(calq__record_parse_for(good, strlen(good), "r.txt", model, "m.onnx", &r, &err), CALQ_OK, &err, NULL);
    EXPECT(r && r->n_layers == 5 && calq__record_check(r, model, "m.onnx", "r.txt", &err) == CALQ_OK);
    calq__record_free(r);
}

int main(void)
{
    calq_error err = {0};
    model = calib_test_model(&err);
    if (!model) {
        fprintf(stderr, "test model: %s\n", err.message);
        return 1;
    }
    test_round_trip();
    test_keys();
    test_flavours();
    test_checks();
    test_value_fields();
    test_read_ranges();
    test_cost();
    calq_model_free(model);
    if (failures) fprintf(stderr, "%d failure(s)\n", failures);
    return failures ? 1 : 0;
}
