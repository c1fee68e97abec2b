/* Protobuf text format: real Caffe prototxt, AMCT record and .cfg files, exact round trips
 * (trees, strings, float32/float64 bits), typed reads with range checks, malformed input with
 * line:column, every prefix of valid files, and the tree-building API. */
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <dirent.h>

#include "base/file.h"
#include "calq.h"
#include "textproto/textproto.h"

#include "expect.h"

/* Parses a copy of exactly `len` bytes on the heap, so ASan flags any read past the end. */
static calq_status parse_exact(const char *text, size_t len, const char *fname, calq_tp_node **root, calq_error *err)
{
    char *copy = malloc(len ? len : 1);
    if (len) memcpy(copy, text, len);
    calq_status st = calq_tp_parse(copy, len, fname, root, err);
    free(copy);
    return st;
}

static calq_tp_node *parse_ok(const char *text)
{
    calq_tp_node *root = NULL;
    calq_error err = {0};
    calq_status st = parse_exact(text, strlen(text), "t.txt", &root, &err);
    if (st != CALQ_OK) {
        fprintf(stderr, "unexpected parse failure: %s\n", err.message);
        failures++;
    }
    return root;
}

/* Structural equality: names, kinds, scalar types and text bytes (positions may differ). */
static bool tree_equal(const calq_tp_node *a, const calq_tp_node *b)
{
    if (strcmp(a->name, b->name) != 0 || a->kind != b->kind) return false;
    if (a->kind == CALQ_TP_SCALAR) {
        return a->type == b->type && a->text_len == b->text_len && memcmp(a->text, b->text, a->text_len) == 0;
    }
    if (a->n_children != b->n_children) return false;
    for (int i = 0; i < a->n_children; i++) {
        if (!tree_equal(a->children[i], b->children[i])) return false;
    }
    return true;
}

/* The text calq_tp_write produces (malloc'ed), or NULL on failure. */
static char *write_to_string(const calq_tp_node *root, size_t *len, calq_error *err)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *fp = open_memstream(&buf, &n);
    if (!fp) return NULL;
    calq_status st = calq_tp_write(root, fp, err);
    fclose(fp);
    if (st != CALQ_OK) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

/* parse -> write -> parse must give the same tree, and writing again the same bytes. */
static void expect_round_trip(const calq_tp_node *root, const char *what)
{
    calq_error err = {0};
    size_t len = 0, len2 = 0;
    char *text = write_to_string(root, &len, &err);
    if (!text) {
        fprintf(stderr, "%s: write failed: %s\n", what, err.message);
        failures++;
        return;
    }
    calq_tp_node *again = NULL;
    if (parse_exact(text, len, what, &again, &err) != CALQ_OK) {
        fprintf(stderr, "%s: written text does not re-parse: %s\n", what, err.message);
        failures++;
    } else {
        if (!tree_equal(root, again)) {
            fprintf(stderr, "%s: round trip changed the tree\n", what);
            failures++;
        }
        char *text2 = write_to_string(again, &len2, &err);
        EXPECT(text2 && len2 == len && memcmp(text, text2, len) == 0);
        free(text2);
    }
    calq_tp_free(again);
    free(text);
}

static const char *shared_dir(void)
{
    static char dir[512];
    const char *env = getenv("CALQ_SHARED");
    const char *tries[] = {env, "../shared", "../../shared", "../../../shared"};
    for (int i = 0; i < 4; i++) {
        if (!tries[i]) continue;
        snprintf(dir, sizeof dir, "%s/models/mtcnn/det1.prototxt", tries[i]);
        if (access(dir, R_OK) == 0) {
            snprintf(dir, sizeof dir, "%s", tries[i]);
            return dir;
        }
    }
    return NULL;
}

static int64_t get_int(const calq_tp_node *msg, const char *name)
{
    int64_t v = -999;
    calq_error err = {0};
    if (calq_tp_int(calq_tp_find(msg, name), "t", &v, &err) != CALQ_OK) {
        fprintf(stderr, "get_int(%s): %s\n", name, err.message);
        failures++;
    }
    return v;
}

static float get_float(const calq_tp_node *msg, const char *name)
{
    float v = -999;
    calq_error err = {0};
    if (calq_tp_float(calq_tp_find(msg, name), "t", &v, &err) != CALQ_OK) {
        fprintf(stderr, "get_float(%s): %s\n", name, err.message);
        failures++;
    }
    return v;
}

static const char *get_str(const calq_tp_node *msg, const char *name)
{
    const char *v = "";
    calq_error err = {0};
    if (calq_tp_string(calq_tp_find(msg, name), "t", &v, &err) != CALQ_OK) {
        fprintf(stderr, "get_str(%s): %s\n", name, err.message);
        failures++;
    }
    return v;
}

/* Every prefix either parses or fails with a message; none may crash or over-read. */
static void expect_prefixes_clean(const char *text, size_t len, size_t stride)
{
    for (size_t n = 0;; n += stride) {
        if (n > len) n = len;
        calq_tp_node *root = NULL;
        calq_error err = {0};
        calq_status st = parse_exact(text, n, "p", &root, &err);
        EXPECT(st == CALQ_OK || (st == CALQ_ERR_BAD_FORMAT && err.message[0] && !root));
        calq_tp_free(root);
        if (n == len) break;
    }
}

static void test_caffe_files(void)
{
    const char *dir = shared_dir();
    if (!dir) {
        SKIP_BECAUSE("the shared models (models/mtcnn/det1.prototxt) are not found: set CALQ_SHARED");
        return;
    }
    char path[600];
    calq_error err = {0};
    calq_tp_node *net = NULL;

    snprintf(path, sizeof path, "%s/models/mtcnn/det1.prototxt", dir);
    EXPECT(calq_tp_parse_file(path, &net, &err) == CALQ_OK);
    if (net) {
        EXPECT(strcmp(get_str(net, "name"), "PNet") == 0);
        EXPECT(calq_tp_count(net, "input_dim") == 4);
        int64_t dims[4];
        for (int i = 0; i < 4; i++) {
            calq_tp_int(calq_tp_nth(net, "input_dim", i), path, &dims[i], &err);
        }
        EXPECT(dims[0] == 1 && dims[1] == 3 && dims[2] == 12 && dims[3] == 12);
        EXPECT(calq_tp_count(net, "layer") == 10);
        const calq_tp_node *conv1 = calq_tp_find(net, "layer");
        EXPECT(conv1->line == 8 && conv1->col == 1);
        EXPECT(strcmp(get_str(conv1, "name"), "conv1") == 0);
        EXPECT(calq_tp_count(conv1, "param") == 2);
        const calq_tp_node *cp = calq_tp_find(conv1, "convolution_param");
        EXPECT(get_int(cp, "num_output") == 10 && get_int(cp, "kernel_size") == 3);
        EXPECT(strcmp(get_str(calq_tp_find(cp, "weight_filler"), "type"), "xavier") == 0);
        const calq_tp_node *pool = calq_tp_nth(net, "layer", 2);
        const calq_tp_node *mode = calq_tp_find(calq_tp_find(pool, "pooling_param"), "pool");
        EXPECT(mode && mode->type == CALQ_TP_IDENT && strcmp(mode->text, "MAX") == 0);
        EXPECT(strcmp(get_str(calq_tp_nth(net, "layer", 9), "type"), "Softmax") == 0);
        expect_round_trip(net, "det1");

        char *buf;
        size_t size;
        if (calq__read_file(path, &buf, &size, &err) == CALQ_OK) {
            expect_prefixes_clean(buf, size, 1);
            free(buf);
        }
    }
    calq_tp_free(net);

    snprintf(path, sizeof path, "%s/models/ultraface/slim-320.prototxt", dir);
    net = NULL;
    EXPECT(calq_tp_parse_file(path, &net, &err) == CALQ_OK);
    if (net) {
        EXPECT(calq_tp_count(net, "layer") == 96);
        const calq_tp_node *in = calq_tp_find(net, "layer");
        EXPECT(strcmp(get_str(in, "type"), "Input") == 0);
        const calq_tp_node *shape = calq_tp_find(calq_tp_find(in, "input_param"), "shape");
        EXPECT(calq_tp_count(shape, "dim") == 4);
        int64_t h = 0, w = 0;
        calq_tp_int(calq_tp_nth(shape, "dim", 2), path, &h, &err);
        calq_tp_int(calq_tp_nth(shape, "dim", 3), path, &w, &err);
        EXPECT(h == 240 && w == 320);
        const calq_tp_node *c1 = calq_tp_nth(net, "layer", 1);
        const calq_tp_node *cp = calq_tp_find(c1, "convolution_param");
        EXPECT(get_int(cp, "stride_h") == 2 && get_int(cp, "pad_w") == 1);
        bool bias = false;
        EXPECT(calq_tp_bool(calq_tp_find(cp, "bias_term"), path, &bias, &err) == CALQ_OK && bias);
        const calq_tp_node *last = calq_tp_nth(net, "layer", 95);
        EXPECT(strcmp(get_str(last, "name"), "scores") == 0);
        EXPECT(get_int(calq_tp_find(last, "softmax_param"), "axis") == 2);
        EXPECT(calq_tp_nth(net, "layer", 96) == NULL);
        expect_round_trip(net, "slim-320");
        char *buf;
        size_t size;
        if (calq__read_file(path, &buf, &size, &err) == CALQ_OK) {
            expect_prefixes_clean(buf, size, 13);
            free(buf);
        }
    }
    calq_tp_free(net);
}

/* A legacy V1 net (layers { type: CONVOLUTION }) next to V2 layers. */
static const char v1_net[] = "name: \"legacy\"\n"
                             "input: \"data\"\n"
                             "input_shape { dim: 1 dim: 3 dim: 8 dim: 8 }\n"
                             "layers {\n"
                             "  name: \"conv\"  type: CONVOLUTION  bottom: \"data\"  top: \"conv\"\n"
                             "  blobs_lr: 1 blobs_lr: 2 weight_decay: 1\n"
                             "  convolution_param { num_output: 4 kernel_size: 3 }\n"
                             "  include { phase: TEST }\n"
                             "}\n"
                             "layer { name: \"relu\" type: \"ReLU\" bottom: \"conv\" top: \"conv\"\n"
                             "        relu_param { negative_slope: 0.1 } }\n";

static void test_v1_net(void)
{
    calq_tp_node *net = parse_ok(v1_net);
    if (!net) return;
    const calq_tp_node *l = calq_tp_find(net, "layers");
    const calq_tp_node *type = calq_tp_find(l, "type");
    EXPECT(type && type->type == CALQ_TP_IDENT && strcmp(type->text, "CONVOLUTION") == 0);
    EXPECT(calq_tp_count(l, "blobs_lr") == 2);
    EXPECT(strcmp(calq_tp_find(calq_tp_find(l, "include"), "phase")->text, "TEST") == 0);
    EXPECT(get_float(calq_tp_find(calq_tp_find(net, "layer"), "relu_param"), "negative_slope") == 0.1f);
    EXPECT(calq_tp_count(calq_tp_find(net, "input_shape"), "dim") == 4);
    expect_round_trip(net, "v1");
    calq_tp_free(net);
}

/* amct-reference.md §7.1, plus the per-channel and optional fields the section lists. */
static const char record_text[] = "record {\n"
                                  "  key: \"conv2\"\n"
                                  "  value {\n"
                                  "    scale_d: 0.003921569\n"
                                  "    offset_d: -128\n"
                                  "    scale_w: 0.0025009443\n"
                                  "    offset_w: 0\n"
                                  "  }\n"
                                  "}\n"
                                  "record {\n"
                                  "  key: \"conv3\"\n"
                                  "  value {\n"
                                  "    scale_d: 0.5\n"
                                  "    offset_d: 3\n"
                                  "    scale_w: 0.1\n    scale_w: 0.2\n    scale_w: 3e-05\n"
                                  "    offset_w: 0\n    offset_w: 0\n    offset_w: 0\n"
                                  "    shift_bit: 1\n    shift_bit: 2\n    shift_bit: 3\n"
                                  "    skip_fusion: false\n"
                                  "    act_type: \"INT8\"\n"
                                  "  }\n"
                                  "}\n"
                                  "record {\n"
                                  "  key: \"maxpool_x:0\"\n"
                                  "  value { scale_d: 0.25 offset_d: 0 }\n"
                                  "}\n";

static void test_record(void)
{
    calq_tp_node *r = parse_ok(record_text);
    if (!r) return;
    EXPECT(calq_tp_count(r, "record") == 3);
    const calq_tp_node *e0 = calq_tp_nth(r, "record", 0);
    EXPECT(strcmp(get_str(e0, "key"), "conv2") == 0);
    const calq_tp_node *v0 = calq_tp_find(e0, "value");
    EXPECT(get_float(v0, "scale_d") == 0.003921569f);
    EXPECT(get_int(v0, "offset_d") == -128);
    EXPECT(get_float(v0, "scale_w") == 0.0025009443f);
    const calq_tp_node *v1 = calq_tp_find(calq_tp_nth(r, "record", 1), "value");
    EXPECT(calq_tp_count(v1, "scale_w") == 3 && calq_tp_count(v1, "shift_bit") == 3);
    float s2 = 0;
    calq_error err = {0};
    EXPECT(calq_tp_float(calq_tp_nth(v1, "scale_w", 2), "r", &s2, &err) == CALQ_OK && s2 == 3e-05f);
    uint64_t sb = 0;
    EXPECT(calq_tp_uint(calq_tp_nth(v1, "shift_bit", 2), "r", &sb, &err) == CALQ_OK && sb == 3);
    bool skip = true;
    EXPECT(calq_tp_bool(calq_tp_find(v1, "skip_fusion"), "r", &skip, &err) == CALQ_OK && !skip);
    EXPECT(strcmp(get_str(calq_tp_nth(r, "record", 2), "key"), "maxpool_x:0") == 0);
    expect_round_trip(r, "record");
    expect_prefixes_clean(record_text, sizeof record_text - 1, 1);

    /* The writer side: what calq will emit for a record, byte for byte. */
    calq_tp_node *w = calq_tp_new_root();
    calq_tp_node *rec = calq_tp_add_message(w, "record");
    calq_tp_add_string(rec, "key", "conv2", 5);
    calq_tp_node *val = calq_tp_add_message(rec, "value");
    calq_tp_add_float(val, "scale_d", 0.003921569f);
    calq_tp_add_int(val, "offset_d", -128);
    calq_tp_add_float(val, "scale_w", 0.0025009443f);
    calq_tp_add_int(val, "offset_w", 0);
    size_t len = 0;
    char *text = write_to_string(w, &len, &err);
    EXPECT(text && strcmp(text, "record {\n  key: \"conv2\"\n  value {\n    scale_d: 0.003921569\n"
                                "    offset_d: -128\n    scale_w: 0.0025009443\n    offset_w: 0\n  }\n}\n") == 0);
    free(text);
    calq_tp_free(w);
    calq_tp_free(r);
}

/* amct-reference.md §7.3: "name : value" with spaces, "name : { }" messages. */
static const char cfg_text[] = "# simplified calibration config\n"
                               "batch_num : 2\n"
                               "activation_offset : true\n"
                               "skip_layers : \"conv1\"\n"
                               "skip_layers : \"fc\"\n"
                               "skip_layer_types : \"Pooling\"\n"
                               "fakequant_precision_mode : FORCE_FP16_QUANT\n"
                               "common_config : {\n"
                               "    arq_quantize : { channel_wise : true }\n"
                               "    ifmr_quantize : {\n"
                               "        search_range_start : 0.7\n"
                               "        search_range_end : 1.3\n"
                               "        search_step : 0.01\n"
                               "        max_percentile : 0.999999\n"
                               "        min_percentile : 0.999999\n"
                               "        asymmetric : true\n"
                               "    }\n"
                               "}\n"
                               "override_layer_types : {\n"
                               "    layer_type : \"InnerProduct\"\n"
                               "    calibration_config : { arq_quantize : { channel_wise : false } }\n"
                               "}\n"
                               "override_layer_configs : {\n"
                               "    layer_name : \"conv5\"\n"
                               "    calibration_config : {\n"
                               "        arq_quantize : { channel_wise : true quant_bits : 8 }\n"
                               "        hfmg_quantize : { num_of_bins : 4096 asymmetric : false dst_type : INT8 }\n"
                               "    }\n"
                               "}\n"
                               "do_fusion : true\n"
                               "skip_fusion_layers : \"bn1\"\n";

static void test_cfg(void)
{
    calq_tp_node *c = parse_ok(cfg_text);
    if (!c) return;
    calq_error err = {0};
    EXPECT(get_int(c, "batch_num") == 2);
    bool b = false;
    EXPECT(calq_tp_bool(calq_tp_find(c, "activation_offset"), "c", &b, &err) == CALQ_OK && b);
    EXPECT(calq_tp_count(c, "skip_layers") == 2);
    EXPECT(strcmp(get_str(c, "fakequant_precision_mode"), "FORCE_FP16_QUANT") == 0);
    const calq_tp_node *ifmr = calq_tp_find(calq_tp_find(c, "common_config"), "ifmr_quantize");
    EXPECT(get_float(ifmr, "search_range_start") == 0.7f && get_float(ifmr, "search_step") == 0.01f);
    double d = 0;
    EXPECT(calq_tp_double(calq_tp_find(ifmr, "max_percentile"), "c", &d, &err) == CALQ_OK && d == 0.999999);
    const calq_tp_node *ol = calq_tp_find(c, "override_layer_configs");
    EXPECT(strcmp(get_str(ol, "layer_name"), "conv5") == 0);
    EXPECT(get_int(calq_tp_find(calq_tp_find(ol, "calibration_config"), "hfmg_quantize"), "num_of_bins") == 4096);
    const calq_tp_node *ol_line = calq_tp_find(c, "override_layer_configs");
    EXPECT(ol_line->line == 23 && ol_line->col == 1);
    expect_round_trip(c, "cfg");
    expect_prefixes_clean(cfg_text, sizeof cfg_text - 1, 1);
    calq_tp_free(c);
}

/* Every syntax feature at once. */
static const char torture_text[] =
    "# leading comment\n"
    "a: 1, b: -2; c: 0x1F d: 017 e: 1.5e-3f f: .5 g: -inf h: nan i: -Infinity j: 1E+10 k: 5F l: - 7\n"
    "s: \"tab\\tnl\\nq\\\"s\\'bs\\\\\" 'single \"quoted\"' \"\\x41\\101\\0end\\a\\b\\f\\v\\r\\?\"\n"
    "u: \"\\u00e9\\U0001F600\\uD83D\\uDE00\" raw: \"h\xc3\xa9llo \xe4\xb8\xad\" bin: \"\\377\\200\\001\\x7f\"\n"
    "msg < x: 1 y: \"z\" >   # trailing comment\n"
    "msg2: { nested { deeper: true; } }\n"
    "list: [1, -2, 3.5, inf, \"s\", ENUM]\n"
    "mlist: [{ v: 1 }, < v: 2 >, {}]\n"
    "empty: []\n"
    "[com.example.ext] { v: 1 }\n"
    "[type.googleapis.com/pkg.Type]: 7\n"
    "[ spaced . ext ] : 8\n"
    "e2 {}\n"
    "\t  # indented comment\r\n"
    "crlf: 1\r\n"
    "last: \"no newline at end\"";

static void test_torture(void)
{
    calq_tp_node *t = parse_ok(torture_text);
    if (!t) return;
    calq_error err = {0};
    EXPECT(get_int(t, "c") == 31 && get_int(t, "d") == 15 && get_int(t, "b") == -2 && get_int(t, "l") == -7);
    EXPECT(get_float(t, "e") == 1.5e-3f && get_float(t, "f") == 0.5f && get_float(t, "k") == 5.0f);
    EXPECT(isinf(get_float(t, "g")) && get_float(t, "g") < 0);
    EXPECT(isnan(get_float(t, "h")));
    EXPECT(isinf(get_float(t, "i")) && get_float(t, "i") < 0);
    EXPECT(strcmp(calq_tp_find(t, "l")->text, "-7") == 0);
    const calq_tp_node *s = calq_tp_find(t, "s");
    static const char s_want[] = "tab\tnl\nq\"s'bs\\single \"quoted\"AA\0end\a\b\f\v\r?";
    EXPECT(s && s->text_len == sizeof s_want - 1 && memcmp(s->text, s_want, sizeof s_want - 1) == 0);
    const calq_tp_node *u = calq_tp_find(t, "u");
    EXPECT(u && strcmp(u->text, "\xc3\xa9\xf0\x9f\x98\x80\xf0\x9f\x98\x80") == 0);
    const calq_tp_node *bin = calq_tp_find(t, "bin");
    EXPECT(bin && bin->text_len == 4 && memcmp(bin->text, "\377\200\001\x7f", 4) == 0);
    EXPECT(get_int(calq_tp_find(t, "msg"), "x") == 1);
    bool deeper = false;
    EXPECT(calq_tp_bool(calq_tp_find(calq_tp_find(calq_tp_find(t, "msg2"), "nested"), "deeper"), "t", &deeper, &err) ==
               CALQ_OK &&
           deeper);
    EXPECT(calq_tp_count(t, "list") == 6 && calq_tp_count(t, "mlist") == 3 && calq_tp_count(t, "empty") == 0);
    EXPECT(calq_tp_nth(t, "list", 5)->type == CALQ_TP_IDENT && calq_tp_nth(t, "list", 4)->type == CALQ_TP_STRING);
    EXPECT(get_int(calq_tp_nth(t, "mlist", 1), "v") == 2 && calq_tp_nth(t, "mlist", 2)->n_children == 0);
    EXPECT(calq_tp_find(t, "[com.example.ext]") && calq_tp_find(t, "[type.googleapis.com/pkg.Type]"));
    EXPECT(get_int(t, "[spaced.ext]") == 8);
    EXPECT(calq_tp_find(t, "crlf")->line == 15 && calq_tp_find(t, "crlf")->col == 1);
    EXPECT(strcmp(get_str(t, "last"), "no newline at end") == 0);
    expect_round_trip(t, "torture");
    expect_prefixes_clean(torture_text, sizeof torture_text - 1, 1);
    calq_tp_free(t);
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void test_float_round_trip(void)
{
    enum { N = 100000 };
    static const uint32_t special_f[] = {0x00000000u, 0x80000000u, 0x00000001u, 0x80000001u, 0x007FFFFFu,
                                         0x00800000u, 0x7F7FFFFFu, 0xFF7FFFFFu, 0x7F800000u, 0xFF800000u,
                                         0x7FC00000u, 0xFFC00000u, 0x3F800001u, 0x3DCCCCCDu};
    uint32_t *fb = malloc(N * sizeof *fb);
    uint64_t *db = malloc(N * sizeof *db);
    calq_tp_node *root = calq_tp_new_root();
    for (int i = 0; i < N; i++) {
        fb[i] = i < (int)(sizeof special_f / sizeof *special_f) ? special_f[i] : (uint32_t)rng();
        /* Every fourth value a subnormal or tiny exponent, which random bits rarely give. */
        if (i >= 20 && i % 4 == 0) fb[i] &= 0x80FFFFFFu;
        float f;
        memcpy(&f, &fb[i], 4);
        EXPECT(calq_tp_add_float(root, "f", f) != NULL);
    }
    static const uint64_t special_d[] = {0,
                                         0x8000000000000000ull,
                                         1,
                                         0x000FFFFFFFFFFFFFull,
                                         0x7FEFFFFFFFFFFFFFull,
                                         0x7FF0000000000000ull,
                                         0xFFF0000000000000ull,
                                         0x3FB999999999999Aull};
    for (int i = 0; i < N; i++) {
        db[i] = i < (int)(sizeof special_d / sizeof *special_d) ? special_d[i] : rng();
        if (i >= 20 && i % 4 == 0) db[i] &= 0x801FFFFFFFFFFFFFull;
        double d;
        memcpy(&d, &db[i], 8);
        EXPECT(calq_tp_add_double(root, "d", d) != NULL);
    }
    calq_error err = {0};
    size_t len = 0;
    char *text = write_to_string(root, &len, &err);
    calq_tp_node *back = NULL;
    EXPECT(text && parse_exact(text, len, "floats", &back, &err) == CALQ_OK);
    int bad_f = 0, bad_d = 0;
    EXPECT(!back || back->n_children == 2 * N);
    for (int i = 0; back && back->n_children == 2 * N && i < N; i++) {
        float f = 0;
        uint32_t got;
        float want;
        memcpy(&want, &fb[i], 4);
        /* Direct indexing: calq_tp_nth is a linear scan, quadratic over 10^5 fields. */
        if (calq_tp_float(back->children[i], "floats", &f, &err) != CALQ_OK) {
            bad_f++;
            continue;
        }
        memcpy(&got, &f, 4);
        bool same = isnan(want) ? isnan(f) && signbit(f) == signbit(want) : got == fb[i];
        if (!same && bad_f++ < 5) fprintf(stderr, "float 0x%08X came back as 0x%08X\n", fb[i], got);
    }
    for (int i = 0; back && back->n_children == 2 * N && i < N; i++) {
        double d = 0, want;
        uint64_t got;
        memcpy(&want, &db[i], 8);
        if (calq_tp_double(back->children[N + i], "floats", &d, &err) != CALQ_OK) {
            bad_d++;
            continue;
        }
        memcpy(&got, &d, 8);
        bool same = isnan(want) ? isnan(d) && signbit(d) == signbit(want) : got == db[i];
        if (!same && bad_d++ < 5)
            fprintf(stderr, "double 0x%016" PRIX64 " came back as 0x%016" PRIX64 "\n", db[i], got);
    }
    EXPECT(bad_f == 0 && bad_d == 0);
    /* The shortest form, not merely an exact one. */
    calq_tp_node *s = calq_tp_new_root();
    EXPECT(strcmp(calq_tp_add_float(s, "x", 0.1f)->text, "0.1") == 0);
    EXPECT(strcmp(calq_tp_add_float(s, "x", 1.0f)->text, "1") == 0);
    EXPECT(strcmp(calq_tp_add_float(s, "x", FLT_MAX)->text, "3.4028235e+38") == 0);
    EXPECT(strcmp(calq_tp_add_float(s, "x", -0.0f)->text, "-0") == 0);
    EXPECT(strcmp(calq_tp_add_double(s, "x", 0.1)->text, "0.1") == 0);
    EXPECT(calq_tp_add_float(s, "x", INFINITY)->type == CALQ_TP_IDENT);
    EXPECT(strcmp(calq_tp_add_float(s, "x", -INFINITY)->text, "-inf") == 0);
    EXPECT(strcmp(calq_tp_add_double(s, "x", NAN)->text, "nan") == 0);
    calq_tp_free(s);
    calq_tp_free(back);
    calq_tp_free(root);
    free(text);
    free(fb);
    free(db);
}

/* Typed read of field `x` in `text`; the message must contain `needle` on failure. */
static void expect_read(const char *text, char kind, calq_status want, const char *needle)
{
    calq_tp_node *r = parse_ok(text);
    if (!r) return;
    const calq_tp_node *n = calq_tp_find(r, "x");
    calq_error err = {0};
    calq_status st = CALQ_ERR_INTERNAL;
    int64_t i;
    uint64_t u;
    double d;
    float f;
    bool b;
    const char *s;
    switch (kind) {
    case 'i': st = calq_tp_int(n, "in.txt", &i, &err); break;
    case 'u': st = calq_tp_uint(n, "in.txt", &u, &err); break;
    case 'd': st = calq_tp_double(n, "in.txt", &d, &err); break;
    case 'f': st = calq_tp_float(n, "in.txt", &f, &err); break;
    case 'b': st = calq_tp_bool(n, "in.txt", &b, &err); break;
    case 's': st = calq_tp_string(n, "in.txt", &s, &err); break;
    }
    if (st != want || (st != CALQ_OK && needle && !strstr(err.message, needle))) {
        fprintf(stderr, "read %c of [%s]: status %d, message: %s (wanted %d, \"%s\")\n", kind, text, (int)st,
                err.message, (int)want, needle ? needle : "");
        failures++;
    }
    calq_tp_free(r);
}

static void test_typed_reads(void)
{
    const calq_status OK = CALQ_OK, BAD = CALQ_ERR_BAD_FORMAT;
    expect_read("x: 9223372036854775807", 'i', OK, NULL);
    expect_read("x: -9223372036854775808", 'i', OK, NULL);
    expect_read("x: 9223372036854775808", 'i', BAD, "in.txt:1:1: field 'x': expected an integer in");
    expect_read("x: -9223372036854775809", 'i', BAD, "found '-9223372036854775809'");
    expect_read("x: 99999999999999999999999", 'i', BAD, "expected an integer in");
    expect_read("x: 1.5", 'i', BAD, "in.txt:1:1: field 'x': expected an integer, found '1.5'");
    expect_read("\n  x: 1e3", 'i', BAD, "in.txt:2:3: field 'x'");
    expect_read("x: \"5\"", 'i', BAD, "found string \"5\"");
    expect_read("x { }", 'i', BAD, "found a message");
    expect_read("y: 1", 'i', BAD, "in.txt: expected an integer, found nothing");
    expect_read("x: FOO", 'i', BAD, "found 'FOO'");
    expect_read("x: 0x7FFFFFFFFFFFFFFF", 'i', OK, NULL);
    expect_read("x: -0x8000000000000000", 'i', OK, NULL);
    expect_read("x: 0x8000000000000000", 'i', BAD, NULL);
    expect_read("x: 18446744073709551615", 'u', OK, NULL);
    expect_read("x: 18446744073709551616", 'u', BAD, "expected an integer in [0, 18446744073709551615]");
    expect_read("x: 0xFFFFFFFFFFFFFFFF", 'u', OK, NULL);
    expect_read("x: 01777777777777777777777", 'u', OK, NULL);
    expect_read("x: 02000000000000000000000", 'u', BAD, NULL);
    expect_read("x: -1", 'u', BAD, "expected a non-negative integer, found '-1'");
    expect_read("x: -0", 'u', OK, NULL);
    expect_read("x: 3.4028235e38", 'f', OK, NULL);
    expect_read("x: 3.40282356e38", 'f', OK, NULL);           /* rounds down to FLT_MAX */
    expect_read("x: 3.40282357e38", 'f', BAD, "float range"); /* past the halfway point: inf */
    expect_read("x: 3.5e38", 'f', BAD, "expected a number in float range, found '3.5e38'");
    expect_read("x: -1e39", 'f', BAD, "float range");
    expect_read("x: 1e-50", 'f', OK, NULL); /* underflow to zero is a value, not an error */
    expect_read("x: 1e39", 'd', OK, NULL);
    expect_read("x: 1e309", 'd', BAD, "double range");
    expect_read("x: 4.9406564584124654e-324", 'd', OK, NULL);
    expect_read("x: inf", 'f', OK, NULL);
    expect_read("x: -Infinity", 'd', OK, NULL);
    expect_read("x: NaN", 'f', OK, NULL);
    expect_read("x: 1.0f", 'f', OK, NULL);
    expect_read("x: 2F", 'd', OK, NULL);
    expect_read("x: 0x10", 'f', OK, NULL);
    expect_read("x: 99999999999999999999999", 'd', OK, NULL);
    expect_read("x: infinite", 'f', BAD, "expected a number, found 'infinite'");
    expect_read("x: \"1.0\"", 'd', BAD, "expected a number, found string \"1.0\"");
    expect_read("x: true", 'b', OK, NULL);
    expect_read("x: False", 'b', OK, NULL);
    expect_read("x: t", 'b', OK, NULL);
    expect_read("x: 0", 'b', OK, NULL);
    expect_read("x: 2", 'b', BAD, "expected a boolean");
    expect_read("x: \"true\"", 'b', BAD, NULL);
    expect_read("x: yes", 'b', BAD, "found 'yes'");
    expect_read("x: \"abc\"", 's', OK, NULL);
    expect_read("x: ENUM_VALUE", 's', OK, NULL);
    expect_read("x: 5", 's', BAD, "expected a string, found '5'");

    /* Exact values. */
    calq_tp_node *r = parse_ok("a: 0x1f b: 0777 c: -0x10 d: 1e-45 e: -0 f: 0.1");
    calq_error err = {0};
    int64_t i = 0;
    float f = 1;
    double d = 0;
    EXPECT(get_int(r, "a") == 31 && get_int(r, "b") == 511 && get_int(r, "c") == -16);
    EXPECT(calq_tp_float(calq_tp_find(r, "d"), "t", &f, &err) == CALQ_OK && f == 1e-45f && f > 0);
    EXPECT(calq_tp_float(calq_tp_find(r, "e"), "t", &f, &err) == CALQ_OK && f == 0 && signbit(f));
    EXPECT(calq_tp_int(calq_tp_find(r, "e"), "t", &i, &err) == CALQ_OK && i == 0);
    EXPECT(calq_tp_double(calq_tp_find(r, "f"), "t", &d, &err) == CALQ_OK && d == 0.1);
    EXPECT(calq_tp_float(calq_tp_find(r, "b"), "t", &f, &err) == CALQ_OK && f == 511.0f);
    calq_tp_free(r);
}

/* `text` must fail with BAD_FORMAT and a message containing `needle` (e.g. "f:2:5:"). */
static void expect_bad_len(const char *text, size_t len, const char *needle)
{
    calq_tp_node *root = (calq_tp_node *)1;
    calq_error err = {0};
    calq_status st = parse_exact(text, len, "f", &root, &err);
    if (st != CALQ_ERR_BAD_FORMAT || root != NULL || !strstr(err.message, needle)) {
        fprintf(stderr, "malformed [%.*s]: status %d, message \"%s\", wanted \"%s\"\n", (int)(len > 60 ? 60 : len),
                text, (int)st, err.message, needle);
        failures++;
        if (st == CALQ_OK) calq_tp_free(root);
    }
}

static void expect_bad(const char *text, const char *needle)
{
    expect_bad_len(text, strlen(text), needle);
}

static void test_malformed(void)
{
    expect_bad("a: \"abc", "f:1:4: unterminated string: expected a closing \", found end of file");
    expect_bad("a: 'abc\nb: 1", "f:1:4: unterminated string: expected a closing ', found end of line");
    expect_bad("a: \"abc\\", "f:1:8: unterminated string: expected an escape after '\\', found end of file");
    expect_bad("a: \"abc\\\n\"", "f:1:8: unterminated string: expected an escape after '\\', found end of line");
    expect_bad("a: 1.2.3", "f:1:4: expected a number, found '1.2.3'");
    expect_bad("a: 0x", "f:1:4: expected a number, found '0x'");
    expect_bad("a: 1e", "f:1:4: expected a number, found '1e'");
    expect_bad("a: 1e+", "f:1:4: expected a number, found '1e+'");
    expect_bad("\n\n  a: 12abc", "f:3:6: expected a number, found '12abc'");
    expect_bad("a: 019", "f:1:4: expected a number, found '019'");
    expect_bad("a: 0x1G", "expected a number, found '0x1G'");
    expect_bad("a: 07f", "expected a number");
    expect_bad("a: -foo", "f:1:5: expected a number or inf/nan after '-', found identifier 'foo'");
    expect_bad("a {\n  b: 1\n", "f:3:1: expected '}' to close 'a' opened at line 1, column 3, found end of file");
    expect_bad("layer <\n  b: 1\n}", "f:3:1: expected a field name or '>', found '}'");
    expect_bad("a { b: 1 } }", "f:1:12: expected a field name, found '}'");
    expect_bad("}", "f:1:1: expected a field name, found '}'");
    expect_bad("a: 1 >", "f:1:6: expected a field name, found '>'");
    expect_bad("a 5", "f:1:3: expected ':' before the value of field 'a', found number '5'");
    expect_bad("a \"s\"", "f:1:3: expected ':' before the value of field 'a', found string \"s\"");
    expect_bad("a }", "f:1:3: expected ':' or '{' after field 'a', found '}'");
    expect_bad("a:", "f:1:3: expected a value for field 'a', found end of file");
    expect_bad("a: }", "f:1:4: expected a value for field 'a', found '}'");
    expect_bad("a: [1, 2",
               "f:1:9: expected ',' or ']' in the list of 'a' opened at line 1, column 4, found end of file");
    expect_bad("a: [1 2]",
               "f:1:7: expected ',' or ']' in the list of 'a' opened at line 1, column 4, found number '2'");
    expect_bad("a: [1,]", "f:1:7: expected a value for field 'a'");
    expect_bad("\xff\xfe", "f:1:1: expected a field name, a value or punctuation, found byte 0xFF");
    expect_bad("a: 1 @", "f:1:6: expected a field name, a value or punctuation, found '@'");
    expect_bad_len("a: 1\0b: 2", 9, "f:1:5: expected a field name, a value or punctuation, found a NUL byte");
    expect_bad_len("a: \"x\0y\"", 8, "f:1:6: expected string characters, found a NUL byte");
    expect_bad("a: \"\\q\"", "f:1:5: expected an escape");
    expect_bad("a: \"\\x\"", "f:1:5: expected hex digits after '\\x'");
    expect_bad("a: \"\\777\"", "f:1:5: expected an octal escape up to \\377");
    expect_bad("a: \"\\u12\"", "f:1:5: expected 4 hex digits after '\\u'");
    expect_bad("a: \"\\uD800\"", "f:1:5: expected a Unicode code point");
    expect_bad("a: \"\\U00110000\"", "expected a Unicode code point");
    expect_bad("[a.b: 1", "f:1:5: expected '.', '/' or ']' in an extension name, found ':'");
    expect_bad("[.a]: 1", "f:1:2: expected an identifier in an extension name, found '.'");
    expect_bad("a.b: 1", "f:1:2: expected ':' or '{' after field 'a', found '.'");
    expect_bad("5: 1", "f:1:1: expected a field name, found number '5'");
    expect_bad("a: 1 b { c: [ { d: 1 } ", "f:1:24: expected ',' or ']' in the list of 'c'");

    /* Nesting: exactly CALQ_TP_MAX_DEPTH levels parse; one more is an error at that brace. */
    size_t n = 100000;
    char *deep = malloc(2 * n + 1);
    for (size_t i = 0; i < n; i++) memcpy(deep + 2 * i, "a{", 2);
    expect_bad_len(deep, 2 * n, "f:1:202: expected at most 100 levels of nested messages");
    for (size_t i = 0; i < n; i++) memcpy(deep + 2 * i, "a<", 2);
    expect_bad_len(deep, 2 * n, "f:1:202: expected at most 100 levels");
    for (size_t i = 0; i < n; i++) memcpy(deep + 2 * i, "a[", 2);
    expect_bad_len(deep, 2 * n, "f:1:2: expected ':' or '{' after field 'a', found '['");
    for (size_t i = 0; i < n / 2; i++) memcpy(deep + 4 * i, "a:[{", 4);
    expect_bad_len(deep, 2 * n, "f:1:404: expected at most 100 levels");
    char ok[400];
    size_t k = 0;
    for (int i = 0; i < CALQ_TP_MAX_DEPTH; i++) ok[k++] = 'a', ok[k++] = '{';
    for (int i = 0; i < CALQ_TP_MAX_DEPTH; i++) ok[k++] = '}';
    calq_tp_node *root = NULL;
    calq_error err = {0};
    EXPECT(parse_exact(ok, k, "f", &root, &err) == CALQ_OK);
    if (root) expect_round_trip(root, "depth 100");
    calq_tp_free(root);
    free(deep);

    /* Empty and comment-only inputs are valid, empty trees. */
    EXPECT(parse_exact("", 0, NULL, &root, &err) == CALQ_OK && root && root->n_children == 0);
    calq_tp_free(root);
    EXPECT(calq_tp_parse(NULL, 0, NULL, &root, &err) == CALQ_OK && root && root->n_children == 0);
    calq_tp_free(root);
    EXPECT(parse_exact("# only a comment", 16, NULL, &root, &err) == CALQ_OK && root->n_children == 0);
    calq_tp_free(root);
    /* No file name: messages still carry line:col. */
    EXPECT(parse_exact("a {", 3, NULL, &root, &err) == CALQ_ERR_BAD_FORMAT && strstr(err.message, "<text>:1:4:"));
    EXPECT(calq_tp_parse_file("/nonexistent/x.prototxt", &root, &err) == CALQ_ERR_IO && root == NULL);
}

static int count_dir_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static void test_build_and_write(void)
{
    calq_error err = {0};
    calq_tp_node *r = calq_tp_new_root();
    calq_tp_add_int(r, "a", INT64_MIN);
    calq_tp_add_uint(r, "b", UINT64_MAX);
    calq_tp_node *m = calq_tp_add_message(r, "m");
    static const char bytes[] = "x\"y\\\n\t\x01\xc3\xa9\xff";
    calq_tp_add_string(m, "s", bytes, sizeof bytes - 1);
    calq_tp_add_bool(m, "t", true);
    calq_tp_add_ident(m, "e", "MAX");
    calq_tp_add_message(m, "empty");
    calq_tp_add_double(r, "d", 0.1);
    size_t len = 0;
    char *text = write_to_string(r, &len, &err);
    EXPECT(text && strcmp(text, "a: -9223372036854775808\n"
                                "b: 18446744073709551615\n"
                                "m {\n"
                                "  s: \"x\\\"y\\\\\\n\\t\\001\xc3\xa9\\377\"\n"
                                "  t: true\n"
                                "  e: MAX\n"
                                "  empty {\n"
                                "  }\n"
                                "}\n"
                                "d: 0.1\n") == 0);
    free(text);
    expect_round_trip(r, "built");

    /* insert / remove / lookup */
    calq_tp_node *sub = calq_tp_new_root();
    calq_tp_node *x = calq_tp_add_message(sub, "x");
    calq_tp_add_int(x, "v", 7);
    calq_tp_node *moved = sub->children[0];
    sub->n_children = 0; /* detach from its temporary parent before handing it over */
    calq_tp_free(sub);
    EXPECT(calq_tp_insert(r, 0, moved) == 0);
    EXPECT(r->n_children == 5 && strcmp(r->children[0]->name, "x") == 0);
    EXPECT(get_int(calq_tp_find(r, "x"), "v") == 7);
    calq_tp_node *extra = calq_tp_new_root();
    EXPECT(calq_tp_insert(r, r->n_children, extra) == 0);
    EXPECT(r->children[5] == extra);
    calq_tp_remove(r, 5);
    calq_tp_remove(r, 2); /* "b" */
    EXPECT(r->n_children == 4 && calq_tp_find(r, "b") == NULL && calq_tp_count(r, "a") == 1);
    EXPECT(calq_tp_nth(r, "a", 1) == NULL && calq_tp_nth(r, "a", -1) == NULL);
    EXPECT(calq_tp_find(NULL, "a") == NULL && calq_tp_count(NULL, "a") == 0);
    for (int i = 0; i < 1000; i++) calq_tp_add_int(r, "many", i);
    int64_t last = 0;
    EXPECT(calq_tp_count(r, "many") == 1000);
    EXPECT(calq_tp_int(calq_tp_nth(r, "many", 999), "t", &last, &err) == CALQ_OK && last == 999);
    calq_tp_free(r);

    /* Trees the parser could not read back are refused before any output. */
    const char *bad_names[] = {"", "a b", "1a", "a.b", "[a..b]", "[]", "[a]b]"};
    for (int i = 0; i < 7; i++) {
        calq_tp_node *b = calq_tp_new_root();
        calq_tp_add_int(b, bad_names[i], 1);
        EXPECT(write_to_string(b, &len, &err) == NULL && err.status == CALQ_ERR_BAD_PARAMETERS);
        calq_tp_free(b);
    }
    calq_tp_node *b = calq_tp_new_root();
    calq_tp_add_ident(b, "e", "not ident");
    EXPECT(write_to_string(b, &len, &err) == NULL && strstr(err.message, "field 'e'"));
    calq_tp_free(b);
    b = calq_tp_new_root();
    calq_tp_node *num = calq_tp_add_int(b, "n", 1);
    free(num->text);
    num->text = strdup("1.2.3");
    num->text_len = 5;
    EXPECT(write_to_string(b, &len, &err) == NULL);
    calq_tp_free(b);

    /* A very deep API-built tree: freeing must not recurse; writing refuses past the limit. */
    b = calq_tp_new_root();
    calq_tp_node *cur = b;
    for (int i = 0; i < 200000 && cur; i++) cur = calq_tp_add_message(cur, "d");
    EXPECT(write_to_string(b, &len, &err) == NULL && strstr(err.message, "nested deeper"));
    calq_tp_free(b);

    /* Atomic file writes: success replaces, failure leaves the old file and no temporary. */
    char dir[] = "/tmp/calq_tp_XXXXXX";
    EXPECT(mkdtemp(dir) != NULL);
    char path[256];
    snprintf(path, sizeof path, "%s/out.txt", dir);
    b = calq_tp_new_root();
    calq_tp_add_float(b, "scale_d", 0.5f);
    EXPECT(calq_tp_write_file(b, path, &err) == CALQ_OK);
    calq_tp_node *back = NULL;
    EXPECT(calq_tp_parse_file(path, &back, &err) == CALQ_OK && back && tree_equal(b, back));
    calq_tp_free(back);
    calq_tp_add_ident(b, "bad", "");
    EXPECT(calq_tp_write_file(b, path, &err) == CALQ_ERR_BAD_PARAMETERS && strstr(err.message, path));
    EXPECT(count_dir_entries(dir) == 1);
    char *buf;
    size_t size;
    EXPECT(calq__read_file(path, &buf, &size, &err) == CALQ_OK && strcmp(buf, "scale_d: 0.5\n") == 0);
    free(buf);
    char nodir[300];
    snprintf(nodir, sizeof nodir, "%s/missing/out.txt", dir);
    EXPECT(calq_tp_write_file(b, nodir, &err) == CALQ_ERR_IO);
    calq_tp_free(b);
    remove(path);
    rmdir(dir);
}

int main(void)
{
    test_caffe_files();
    test_v1_net();
    test_record();
    test_cfg();
    test_torture();
    test_float_round_trip();
    test_typed_reads();
    test_malformed();
    test_build_and_write();
    if (failures) {
        fprintf(stderr, "test_textproto: %d failure(s)\n", failures);
        return 1;
    }
    if (!skipped) printf("test_textproto: all passed\n");
    return TEST_RESULT();
}
