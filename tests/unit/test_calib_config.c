/* The quantization config (src/calib/config*.c): defaults from a model, the JSON writer's
 * byte stability, every validation error of the JSON reader with its message, and the
 * simplified .cfg with its precedence rules (amct-reference.md §7.2, §7.3). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/file.h"
#include "calib/config.h"
#include "calib_model.h"
#include "calq.h"

#include "expect.h"
#include "fixtures.h"

static char tmpdir[256];

static const char *tmp_path(const char *name)
{
    static char buf[8][512];
    static int next;
    char *p = buf[next++ % 8];
    snprintf(p, sizeof buf[0], "%s/%s", tmpdir, name);
    return p;
}

static const char *write_text(const char *name, const char *text)
{
    const char *path = tmp_path(name);
    FILE *fp = fopen(path, "wb");
    if (!fp) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
    fputs(text, fp);
    fclose(fp);
    return path;
}

static char *slurp(const char *path, size_t *n)
{
    char *buf = NULL;
    calq_error err = {0};
    if (calq__read_file(path, &buf, n, &err) != CALQ_OK) return NULL;
    return buf;
}

static const calq_layer_config *layer(const calq_config *c, const char *name)
{
    return calq__config_find(c, name);
}

/* ---- defaults ----------------------------------------------------------------------------- */

static void test_defaults_tiny(calq_model *m)
{
    calq_error err = {0};
    calq_config *c = NULL;
    EXPECT_STATUS(calq_config_create(m, NULL, &c, &err), CALQ_OK, &err, NULL);
    if (!c) return;
    EXPECT(c->n_layers == 5);
    const char *order[] = {"conv", "pool", "fc", "mm", "deconv"};
    for (int i = 0; i < 5 && i < c->n_layers; i++) EXPECT(strcmp(c->layers[i].name, order[i]) == 0);
    const calq_layer_config *conv = layer(c, "conv"), *pool = layer(c, "pool"), *fc = layer(c, "fc"),
                            *mm = layer(c, "mm"), *de = layer(c, "deconv");
    EXPECT(conv && conv->has_weights && conv->wts.channel_wise);
    EXPECT(de && de->has_weights && de->wts.channel_wise);
    EXPECT(fc && fc->has_weights && !fc->wts.channel_wise);
    EXPECT(mm && mm->has_weights && !mm->wts.channel_wise);
    EXPECT(pool && !pool->has_weights);
    EXPECT(!layer(c, "relu") && !layer(c, "add"));
    if (conv) {
        EXPECT(conv->quant_enable && conv->act.algo == CALQ_ACT_IFMR && conv->act.num_bits == 8);
        EXPECT(conv->act.max_percentile == 0.999999 && conv->act.min_percentile == 0.999999);
        EXPECT(conv->act.search_range[0] == 0.7 && conv->act.search_range[1] == 1.3);
        EXPECT(conv->act.search_step == 0.01 && conv->act.asymmetric);
        EXPECT(conv->wts.num_bits == 8);
        calq_ifmr_opts io;
        calq__config_ifmr_opts(conv, &io);
        EXPECT(io.max_percentile == 0.999999f && io.search_start == 0.7f && io.search_end == 1.3f &&
               io.search_step == 0.01f && io.asymmetric == 1 && io.num_bits == 8);
        calq_arq_opts ao;
        calq__config_arq_opts(conv, &ao);
        EXPECT(ao.channel_wise == 1 && ao.num_bits == 8);
    }
    EXPECT(c->batch_num == 1 && c->activation_offset && c->do_fusion && c->write_joint_quant && !c->joint_quant);
    /* Public accessors. */
    EXPECT(calq_config_num_layers(c) == 5 && calq_config_batch_num(c) == 1);
    EXPECT(calq_config_find_layer(c, "fc") == 2 && calq_config_find_layer(c, "relu") == -1);
    EXPECT(strcmp(calq_config_layer_name(c, 1), "pool") == 0 && calq_config_layer_name(c, 9) == NULL);
    EXPECT(calq_config_layer_enabled(c, 2));
    EXPECT_STATUS(calq_config_set_layer_enabled(c, 2, 0, &err), CALQ_OK, &err, NULL);
    EXPECT(!calq_config_layer_enabled(c, 2));
    EXPECT_STATUS(calq_config_set_layer_enabled(c, 7, 0, &err), CALQ_ERR_INDEX_OUT_OF_RANGE, &err, "out of range");
    EXPECT_STATUS(calq_config_set_batch_num(c, 0, &err), CALQ_ERR_BAD_PARAMETERS, &err, "batch_num is 0");
    EXPECT_STATUS(calq_config_set_batch_num(c, 4, &err), CALQ_OK, &err, NULL);
    EXPECT(calq_config_batch_num(c) == 4);
    /* A deep copy: changing it leaves the original alone. */
    calq_config *copy = calq__config_clone(c);
    EXPECT(copy && copy->n_layers == 5 && copy->layers != c->layers && strcmp(copy->layers[4].name, "deconv") == 0);
    if (copy) {
        copy->layers[0].quant_enable = false;
        EXPECT(c->layers[0].quant_enable);
        calq_config_free(copy);
    }
    calq_config_free(c);

    /* skip_layers, batch_num, activation_offset. */
    const char *skip[] = {"fc", "deconv"};
    calq_config_opts o;
    calq_config_opts_init(&o);
    o.skip_layers = skip;
    o.n_skip_layers = 2;
    o.batch_num = 3;
    o.activation_offset = 0;
    EXPECT_STATUS(calq_config_create(m, &o, &c, &err), CALQ_OK, &err, NULL);
    if (c) {
        EXPECT(c->n_layers == 3 && !layer(c, "fc") && !layer(c, "deconv") && c->batch_num == 3);
        EXPECT(!c->activation_offset && layer(c, "conv") && !layer(c, "conv")->act.asymmetric);
        calq_config_free(c);
    }
    const char *bad_skip[] = {"relu"};
    o.skip_layers = bad_skip;
    o.n_skip_layers = 1;
    EXPECT_STATUS(calq_config_create(m, &o, &c, &err), CALQ_ERR_BAD_PARAMETERS, &err,
                  "skip_layers: layer 'relu' is not a quantizable layer of the model (it is a Relu");
    EXPECT(c == NULL);
    const char *missing[] = {"conv9"};
    o.skip_layers = missing;
    EXPECT_STATUS(calq_config_create(m, &o, &c, &err), CALQ_ERR_BAD_PARAMETERS, &err,
                  "skip_layers: the model has no layer 'conv9'");
    /* A zeroed opts struct (calq_config_opts_init not called) is caught by batch_num. */
    calq_config_opts zero;
    memset(&zero, 0, sizeof zero);
    EXPECT_STATUS(calq_config_create(m, &zero, &c, &err), CALQ_ERR_BAD_PARAMETERS, &err, "batch_num is 0");
}

static void test_defaults_ultraface(void)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/models/ultraface/version-slim-320_simplified.onnx", fx_shared());
    if (!NEED_FILE(path)) return;
    calq_error err = {0};
    calq_model *m = NULL;
    if (calq_model_load_onnx(path, &m, &err) != CALQ_OK) {
        fprintf(stderr, "cannot load %s: %s\n", path, err.message);
        failures++;
        return;
    }
    int n_conv = 0, n_quant = 0;
    for (int i = 0; i < calq_model_num_nodes(m); i++) {
        calq_node_info ni;
        calq_model_node_info(m, i, &ni);
        n_conv += strcmp(ni.op_type, "Conv") == 0;
        n_quant += ni.quantizable;
    }
    EXPECT(n_conv == 42 && n_quant == 42); /* `calq inspect` lists 42 Conv, all quantizable */
    const char *json = tmp_path("ultraface.json");
    EXPECT_STATUS(calq_create_quant_config(m, NULL, json, &err), CALQ_OK, &err, NULL);
    calq_config *c = NULL;
    EXPECT_STATUS(calq_config_load(m, json, &c, &err), CALQ_OK, &err, NULL);
    if (c) {
        EXPECT(c->n_layers == 42);
        for (int i = 0; i < c->n_layers; i++)
            EXPECT(strcmp(c->layers[i].op_type, "Conv") == 0 && c->layers[i].wts.channel_wise &&
                   c->layers[i].quant_enable);
        EXPECT(layer(c, "Conv_0") && layer(c, "Conv_89"));
        calq_config_free(c);
    }
    /* Every Conv is listed in the file, each once. */
    size_t n = 0;
    char *text = slurp(json, &n);
    int entries = 0;
    for (const char *p = text; p && (p = strstr(p, "\"quant_enable\"")); p++) entries++;
    EXPECT(entries == 42);
    EXPECT(text && strstr(text, "    \"Conv_0\": {\n        \"quant_enable\": true,\n"));
    free(text);
    /* A skipped layer is left out of the JSON (AMCT, §7.2). */
    const char *skip[] = {"Conv_0"};
    calq_config_opts o;
    calq_config_opts_init(&o);
    o.skip_layers = skip;
    o.n_skip_layers = 1;
    EXPECT_STATUS(calq_create_quant_config(m, &o, json, &err), CALQ_OK, &err, NULL);
    text = slurp(json, &n);
    EXPECT(text && !strstr(text, "\"Conv_0\"") && strstr(text, "\"Conv_2\""));
    free(text);
    calq_model_free(m);
}

/* ---- JSON: writer and round trip ---------------------------------------------------------- */

static const char EXPECTED_HEAD[] = "{\n"
                                    "    \"version\": 1,\n"
                                    "    \"batch_num\": 1,\n"
                                    "    \"activation_offset\": true,\n"
                                    "    \"joint_quant\": false,\n"
                                    "    \"do_fusion\": true,\n"
                                    "    \"skip_fusion_layers\": [],\n"
                                    "    \"conv\": {\n"
                                    "        \"quant_enable\": true,\n"
                                    "        \"activation_quant_params\": {\n"
                                    "            \"num_bits\": 8,\n"
                                    "            \"max_percentile\": 0.999999,\n"
                                    "            \"min_percentile\": 0.999999,\n"
                                    "            \"search_range\": [0.7, 1.3],\n"
                                    "            \"search_step\": 0.01,\n"
                                    "            \"act_algo\": \"ifmr\",\n"
                                    "            \"asymmetric\": true\n"
                                    "        },\n"
                                    "        \"weight_quant_params\": {\n"
                                    "            \"num_bits\": 8,\n"
                                    "            \"wts_algo\": \"arq_quantize\",\n"
                                    "            \"channel_wise\": true\n"
                                    "        }\n"
                                    "    },\n"
                                    "    \"pool\": {\n"
                                    "        \"quant_enable\": true,\n"
                                    "        \"activation_quant_params\": {\n";

static void test_round_trip(calq_model *m)
{
    calq_error err = {0};
    const char *a = tmp_path("a.json"), *b = tmp_path("b.json");
    EXPECT_STATUS(calq_create_quant_config(m, NULL, a, &err), CALQ_OK, &err, NULL);
    size_t na = 0, nb = 0;
    char *ta = slurp(a, &na);
    EXPECT(ta && strncmp(ta, EXPECTED_HEAD, strlen(EXPECTED_HEAD)) == 0);
    /* AveragePool has no weights, so no weight_quant_params. */
    const char *pool = ta ? strstr(ta, "\"pool\"") : NULL, *fc = ta ? strstr(ta, "\"fc\"") : NULL;
    EXPECT(pool && fc);
    if (pool && fc) {
        const char *w = strstr(pool, "weight_quant_params");
        EXPECT(w && w > fc);
    }
    calq_config *c = NULL;
    EXPECT_STATUS(calq_config_load(m, a, &c, &err), CALQ_OK, &err, NULL);
    if (c) EXPECT_STATUS(calq_config_save(c, b, &err), CALQ_OK, &err, NULL);
    calq_config_free(c);
    char *tb = slurp(b, &nb);
    EXPECT(ta && tb && na == nb && memcmp(ta, tb, na) == 0);
    free(ta);
    free(tb);

    /* Non-default values everywhere, in AMCT's key order shuffled, with an older-style layer
     * (no num_bits / act_algo / asymmetric): read -> write -> read -> write is stable. */
    const char *src =
        write_text("custom.json", "{\n"
                                  "  \"batch_num\": 8, \"activation_offset\": false,\n"
                                  "  \"fc\": {\"activation_quant_params\": {\"max_percentile\": 0.9999, "
                                  "\"search_range\": [0.8, 1.2], \"search_step\": 0.05}},\n"
                                  "  \"conv\": {\"quant_enable\": false, \"activation_quant_params\": "
                                  "{\"act_algo\": \"hfmg\", \"num_of_bins\": 2048, \"asymmetric\": true}, "
                                  "\"weight_quant_params\": {\"channel_wise\": false}},\n"
                                  "  \"version\": 1, \"joint_quant\": true, \"do_fusion\": false,\n"
                                  "  \"skip_fusion_layers\": [\"conv\", \"relu\"],\n"
                                  "  \"pool\": {\"weight_quant_params\": {\"channel_wise\": false}}\n"
                                  "}\n");
    EXPECT_STATUS(calq_config_load(m, src, &c, &err), CALQ_OK, &err, NULL);
    if (!c) return;
    EXPECT(c->batch_num == 8 && !c->activation_offset && c->joint_quant && !c->do_fusion);
    EXPECT(c->n_skip_fusion_layers == 2 && strcmp(c->skip_fusion_layers[1], "relu") == 0);
    EXPECT(c->n_layers == 3 && strcmp(c->layers[0].name, "conv") == 0 && strcmp(c->layers[2].name, "fc") == 0);
    const calq_layer_config *lc = layer(c, "conv"), *lf = layer(c, "fc"), *lp = layer(c, "pool");
    EXPECT(lc && !lc->quant_enable && lc->act.algo == CALQ_ACT_HFMG && lc->act.num_of_bins == 2048 &&
           lc->act.asymmetric && !lc->wts.channel_wise);
    /* No "asymmetric": the global activation_offset (false) applies (§3.1, §7.2). */
    EXPECT(lf && lf->act.algo == CALQ_ACT_IFMR && !lf->act.asymmetric && lf->act.max_percentile == 0.9999 &&
           lf->act.min_percentile == 0.999999 && lf->act.search_range[0] == 0.8 && lf->act.search_step == 0.05);
    EXPECT(lp && !lp->has_weights && !lp->act.asymmetric);
    calq_hfmg_opts ho;
    if (lc) calq__config_hfmg_opts(lc, &ho);
    EXPECT(lc && ho.num_bins == 2048 && ho.asymmetric == 1);
    EXPECT_STATUS(calq_config_save(c, a, &err), CALQ_OK, &err, NULL);
    calq_config_free(c);
    c = NULL;
    EXPECT_STATUS(calq_config_load(m, a, &c, &err), CALQ_OK, &err, NULL);
    if (c) EXPECT_STATUS(calq_config_save(c, b, &err), CALQ_OK, &err, NULL);
    calq_config_free(c);
    ta = slurp(a, &na);
    tb = slurp(b, &nb);
    EXPECT(ta && tb && na == nb && memcmp(ta, tb, na) == 0);
    EXPECT(ta && strstr(ta, "    \"skip_fusion_layers\": [\"conv\", \"relu\"],\n"));
    EXPECT(ta && strstr(ta, "            \"act_algo\": \"hfmg\",\n            \"num_of_bins\": 2048,\n"));
    free(ta);
    free(tb);
}

/* DMQ balancing (§7.2 dmq_balancer_param, §7.3 dmq_balancer): read, written where §7.2's example
 * has it, read back the same; the .cfg's common_config applies it where balancing exists (not to
 * AveragePool), migration_strength defaults to 0.5. */
static void test_dmq(calq_model *m)
{
    calq_error err = {0};
    calq_config *c = NULL;
    const char *src = write_text("dmq.json", "{\"conv\": {\"dmq_balancer_param\": 0.35}, \"fc\": {}}\n");
    const char *a = tmp_path("dmq_a.json");
    EXPECT_STATUS(calq_config_load(m, src, &c, &err), CALQ_OK, &err, NULL);
    if (!c) return;
    EXPECT(layer(c, "conv")->dmq == 0.35 && layer(c, "fc")->dmq == 0.0);
    EXPECT_STATUS(calq_config_save(c, a, &err), CALQ_OK, &err, NULL);
    calq_config_free(c);
    size_t n = 0;
    char *t = slurp(a, &n);
    EXPECT(t && strstr(t, "\"conv\": {\n        \"quant_enable\": true,\n        \"dmq_balancer_param\": 0.35,\n"));
    EXPECT(t && n && !strstr(strstr(t, "dmq_balancer_param") + 1, "dmq_balancer_param")); /* conv's only */
    free(t);
    c = NULL;
    EXPECT_STATUS(calq_config_load(m, a, &c, &err), CALQ_OK, &err, NULL);
    if (c) EXPECT(layer(c, "conv")->dmq == 0.35);
    calq_config_free(c);
    c = NULL;
    const char *cfg = write_text("dmq.cfg", "common_config { dmq_balancer { } }\n"
                                            "override_layer_configs { layer_name: \"fc\" calibration_config { "
                                            "dmq_balancer { migration_strength: 0.8 } } }\n");
    EXPECT_STATUS(calq_config_load(m, cfg, &c, &err), CALQ_OK, &err, NULL);
    if (c) {
        EXPECT(layer(c, "conv")->dmq == 0.5 && layer(c, "mm")->dmq == 0.5 && layer(c, "fc")->dmq == 0.8);
        EXPECT(layer(c, "pool")->dmq == 0.0);
    }
    calq_config_free(c);
}

/* ---- JSON: every validation error --------------------------------------------------------- */

typedef struct bad_case {
    const char *json;
    calq_status status;
    const char *needle;
} bad_case;

static void test_json_errors(calq_model *m)
{
    static const bad_case cases[] = {
        {"{\"version\": 1, \"batchnum\": 2}", CALQ_ERR_BAD_FORMAT, "bad.json: unknown key 'batchnum'"},
        {"{\"conv\": {\"quant_enabled\": true}}", CALQ_ERR_BAD_FORMAT,
         "bad.json: layer 'conv': unknown key 'quant_enabled'"},
        {"{\"conv\": {\"activation_quant_params\": {\"max_percentil\": 0.9}}}", CALQ_ERR_BAD_FORMAT,
         "bad.json: layer 'conv': activation_quant_params: unknown key 'max_percentil'"},
        {"{\"fc\": {\"weight_quant_params\": {\"chanel_wise\": false}}}", CALQ_ERR_BAD_FORMAT,
         "layer 'fc': weight_quant_params: unknown key 'chanel_wise'"},
        {"{\"batch_num\": \"2\"}", CALQ_ERR_BAD_FORMAT, "'batch_num' must be a number, found a string"},
        {"{\"batch_num\": 1.5}", CALQ_ERR_BAD_FORMAT, "bad.json: 'batch_num' must be a whole number, found 1.5"},
        {"{\"batch_num\": 0}", CALQ_ERR_BAD_PARAMETERS, "bad.json: 'batch_num' is 0; it must be in [1, 1000000000]"},
        {"{\"batch_num\": 1e10}", CALQ_ERR_BAD_PARAMETERS, "'batch_num' is 10000000000; it must be in [1, 1000000000]"},
        {"{\"batch_num\": 4294967297}", CALQ_ERR_BAD_PARAMETERS, "'batch_num' is 4294967297; it must be in [1,"},
        {"{\"version\": 1.5}", CALQ_ERR_BAD_FORMAT, "'version' must be a whole number, found 1.5"},
        {"{\"conv\": {\"activation_quant_params\": {\"num_bits\": 8.5}}}", CALQ_ERR_BAD_FORMAT,
         "bad.json: layer 'conv': activation_quant_params: 'num_bits' must be a whole number, found 8.5"},
        {"{\"conv\": {\"activation_quant_params\": {\"num_bits\": \"8\"}}}", CALQ_ERR_BAD_FORMAT,
         "layer 'conv': activation_quant_params: 'num_bits' must be a number, found a string"},
        {"{\"conv\": {\"activation_quant_params\": {\"num_of_bins\": 4096.5, \"act_algo\": \"hfmg\"}}}",
         CALQ_ERR_BAD_FORMAT, "'num_of_bins' must be a whole number, found 4096.5"},
        {"{\"fc\": {\"weight_quant_params\": {\"num_bits\": 1e300}}}", CALQ_ERR_BAD_PARAMETERS,
         "layer 'fc': weight_quant_params: 'num_bits' is 1.0000000000000001e+300; it must be in ["},
        {"{\"version\": 2}", CALQ_ERR_BAD_PARAMETERS, "'version' is 2; AMCT's config format is version 1"},
        {"{\"activation_offset\": 1}", CALQ_ERR_BAD_FORMAT,
         "'activation_offset' must be true or false, found a number"},
        {"{\"conv\": {\"quant_enable\": \"yes\"}}", CALQ_ERR_BAD_FORMAT,
         "layer 'conv': 'quant_enable' must be true or false, found a string"},
        {"{\"conv\": {\"activation_quant_params\": []}}", CALQ_ERR_BAD_FORMAT,
         "'activation_quant_params' must be an object, found an array"},
        {"{\"conv\": {\"activation_quant_params\": {\"max_percentile\": 1.5}}}", CALQ_ERR_BAD_PARAMETERS,
         "bad.json: layer 'conv': activation_quant_params.max_percentile is 1.5; it must be in (0.5, 1]"},
        {"{\"conv\": {\"activation_quant_params\": {\"max_percentile\": 0.5}}}", CALQ_ERR_BAD_PARAMETERS,
         "max_percentile is 0.5; it must be in (0.5, 1]"},
        {"{\"conv\": {\"activation_quant_params\": {\"min_percentile\": 0.4}}}", CALQ_ERR_BAD_PARAMETERS,
         "min_percentile is 0.4; it must be in (0.5, 1]"},
        {"{\"conv\": {\"activation_quant_params\": {\"search_range\": [1.3, 0.7]}}}", CALQ_ERR_BAD_PARAMETERS,
         "search_range is [1.3, 0.7]; it must satisfy 0 < start < end"},
        {"{\"conv\": {\"activation_quant_params\": {\"search_range\": [0, 1]}}}", CALQ_ERR_BAD_PARAMETERS,
         "search_range is [0, 1]"},
        {"{\"conv\": {\"activation_quant_params\": {\"search_range\": [0.7]}}}", CALQ_ERR_BAD_FORMAT,
         "'search_range' must be an array of two numbers"},
        {"{\"conv\": {\"activation_quant_params\": {\"search_step\": 0}}}", CALQ_ERR_BAD_PARAMETERS,
         "search_step is 0; it must be in (0, end - start] = (0, 0.6]"},
        {"{\"conv\": {\"activation_quant_params\": {\"search_step\": 0.61}}}", CALQ_ERR_BAD_PARAMETERS,
         "search_step is 0.61"},
        {"{\"conv\": {\"activation_quant_params\": {\"search_range\": [0.7, 1000], \"search_step\": 0.0001}}}",
         CALQ_ERR_BAD_PARAMETERS, "bad.json: layer 'conv': IFMR of layer \"conv\": search_range / search_step gives"},
        {"{\"conv\": {\"activation_quant_params\": {\"num_bits\": 16}}}", CALQ_ERR_BAD_PARAMETERS,
         "activation_quant_params.num_bits is 16; calq quantizes activations to 8 bits only"},
        {"{\"conv\": {\"activation_quant_params\": {\"act_algo\": \"hfmg\", \"num_of_bins\": 1000}}}",
         CALQ_ERR_BAD_PARAMETERS, "num_of_bins is 1000; it must be 1024, 2048, 4096 or 8192"},
        {"{\"conv\": {\"activation_quant_params\": {\"act_algo\": \"entropy\"}}}", CALQ_ERR_BAD_PARAMETERS,
         "'act_algo' is \"entropy\"; it must be \"ifmr\", \"hfmg\" (AMCT's), \"minmax\""},
        {"{\"conv\": {\"activation_quant_params\": {\"act_algo\": \"hfmg\", \"search_step\": 0.02}}}",
         CALQ_ERR_BAD_PARAMETERS,
         "act_algo is \"hfmg\" but 'search_step' is an IFMR key: IFMR and HFMG keys cannot be "
         "mixed in one layer"},
        {"{\"conv\": {\"activation_quant_params\": {\"num_of_bins\": 2048}}}", CALQ_ERR_BAD_PARAMETERS,
         "act_algo is \"ifmr\" (the default) but 'num_of_bins' is an HFMG key"},
        {"{\"conv\": {\"weight_quant_params\": {\"num_bits\": 4}}}", CALQ_ERR_BAD_PARAMETERS,
         "weight_quant_params.num_bits is 4; calq quantizes weights to 8 bits only"},
        {"{\"conv\": {\"weight_quant_params\": {\"wts_algo\": \"nuq_quantize\"}}}", CALQ_ERR_UNSUPPORTED,
         "'wts_algo' \"nuq_quantize\" (non-uniform quantization) is an AMCT algorithm calq does not implement"},
        {"{\"conv\": {\"weight_quant_params\": {\"wts_algo\": \"ada_quantize\", \"beta_range\": [20]}}}",
         CALQ_ERR_BAD_FORMAT, "'beta_range' must be an array of two numbers [start, end]"},
        {"{\"conv\": {\"weight_quant_params\": {\"wts_algo\": \"ada_quantize\", \"num_iteration\": 0}}}",
         CALQ_ERR_BAD_PARAMETERS, "num_iteration is 0; it must be in [1, 10000000]"},
        {"{\"fc\": {\"weight_quant_params\": {\"channel_wise\": true}}}", CALQ_ERR_BAD_PARAMETERS,
         "layer 'fc': weight_quant_params.channel_wise is true but layer 'fc' is a Gemm"},
        {"{\"mm\": {\"weight_quant_params\": {\"channel_wise\": true}}}", CALQ_ERR_BAD_PARAMETERS,
         "channel_wise is true but layer 'mm' is a MatMul"},
        {"{\"pool\": {\"weight_quant_params\": {\"channel_wise\": true}}}", CALQ_ERR_BAD_PARAMETERS,
         "channel_wise is true but layer 'pool' is an AveragePool, which has no weights"},
        {"{\"relu\": {\"quant_enable\": true}}", CALQ_ERR_BAD_PARAMETERS,
         "bad.json: layer 'relu' is not a quantizable layer of the model (it is a Relu"},
        {"{\"conv7\": {\"quant_enable\": true}}", CALQ_ERR_BAD_PARAMETERS, "bad.json: the model has no layer 'conv7'"},
        {"{\"conv\": {}, \"conv\": {}}", CALQ_ERR_BAD_FORMAT, "key 'conv' appears twice"},
        {"{\"conv\": {\"dmq_balancer_param\": 0.9}}", CALQ_ERR_BAD_PARAMETERS,
         "layer 'conv': dmq_balancer_param is 0.9; it must be a number in [0.2, 0.8]"},
        {"{\"conv\": {\"dmq_balancer_param\": \"0.5\"}}", CALQ_ERR_BAD_FORMAT,
         "layer 'conv': 'dmq_balancer_param' must be a number in [0.2, 0.8]"},
        {"{\"conv\": {\"dmq_balancer_param\": 0}}", CALQ_ERR_BAD_PARAMETERS, "or be left out to disable DMQ"},
        {"{\"pool\": {\"dmq_balancer_param\": 0.5}}", CALQ_ERR_BAD_PARAMETERS,
         "layer 'pool': dmq_balancer_param is set but layer 'pool' is an AveragePool"},
        /* tensor_quantize (§7.2): an input of a float op, quantized on its own */
        {"{\"tensor_quantize\": [{\"layer_name\": \"pool\"}]}", CALQ_ERR_BAD_PARAMETERS,
         "bad.json: tensor_quantize: input 0 of layer 'pool' (a AveragePool) cannot be quantized on its own: "
         "tensor_quantize takes a variable float input of MaxPool, Add, Mul, Concat"},
        {"{\"tensor_quantize\": [{\"layer_name\": \"relu\", \"input_index\": 0}]}", CALQ_ERR_BAD_PARAMETERS,
         "input 0 of layer 'relu' (a Relu) cannot be quantized on its own"},
        {"{\"tensor_quantize\": [{\"layer_name\": \"add\", \"input_index\": 2}]}", CALQ_ERR_BAD_PARAMETERS,
         "tensor_quantize: input_index 2 of layer 'add': a Add with 2 inputs"},
        {"{\"tensor_quantize\": [{\"layer_name\": \"ad\"}]}", CALQ_ERR_BAD_PARAMETERS,
         "bad.json: tensor_quantize: the model has no layer 'ad'"},
        {"{\"tensor_quantize\": [{\"layer_name\": \"add\"}, {\"layer_name\": \"add\", \"input_index\": 0}]}",
         CALQ_ERR_BAD_PARAMETERS, "tensor_quantize[1]: input 0 of layer 'add' is listed twice"},
        {"{\"tensor_quantize\": [{\"layer_name\": \"add\", \"quant_enable\": true}]}", CALQ_ERR_BAD_FORMAT,
         "tensor_quantize[0]: unknown key 'quant_enable' (the keys here are layer_name, input_index, "
         "activation_quant_params)"},
        {"{\"tensor_quantize\": [{\"layer_name\": 3}]}", CALQ_ERR_BAD_FORMAT,
         "tensor_quantize[0]: 'layer_name' must be a layer name (a string), found a number"},
        {"{\"tensor_quantize\": {\"layer_name\": \"add\"}}", CALQ_ERR_BAD_FORMAT,
         "'tensor_quantize' must be an array of {layer_name, input_index, ...} objects"},
        {"{\"tensor_quantize\": [{\"layer_name\": \"add\", \"activation_quant_params\": {\"search_step\": 0}}]}",
         CALQ_ERR_BAD_PARAMETERS,
         "bad.json: tensor_quantize[0]: layer 'add' input 0: activation_quant_params.search_step is 0"},
        {"{\"skip_fusion_layers\": [\"nope\"]}", CALQ_ERR_BAD_PARAMETERS,
         "skip_fusion_layers: the model has no layer 'nope'"},
        {"{\"skip_fusion_layers\": [1]}", CALQ_ERR_BAD_FORMAT, "'skip_fusion_layers' must hold layer names"},
        {"[1, 2]", CALQ_ERR_BAD_FORMAT, "a quantization config is a JSON object"},
        {"{\n  \"version\": 1,\n  \"batch_num\": ,\n}\n", CALQ_ERR_BAD_FORMAT,
         "bad.json:3:16: JSON syntax error near ',"},
        {"{\n  \"version\": 1\n}\n}\n", CALQ_ERR_BAD_FORMAT,
         "bad.json:4:1: unexpected text after the JSON value near '}'"},
        {"{\"version\": 1", CALQ_ERR_BAD_FORMAT, "bad.json:1:"},
        {"", CALQ_ERR_BAD_FORMAT, "bad.json:1:1: JSON syntax error"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        /* chdir into the temporary folder so the message starts with the bare file name. */
        write_text("bad.json", cases[i].json);
        calq_error err = {0};
        calq_config *c = (calq_config *)1;
        calq_status st = calq_config_load(m, "bad.json", &c, &err);
        if (st != cases[i].status || !strstr(err.message, cases[i].needle))
            fprintf(stderr, "case %zu: %s\n", i, cases[i].json);
        EXPECT_STATUS(st, cases[i].status, &err, cases[i].needle);
        EXPECT(c == NULL);
    }
    /* Nested deeper than the JSON reader's limit: said so, with the limit, not "JSON syntax error" */
    {
        static char deep[2 * 1200 + 64];
        size_t at = (size_t)snprintf(deep, sizeof deep, "{\"version\": 1, \"x\": ");
        for (int i = 0; i < 1200; i++) deep[at++] = '[';
        for (int i = 0; i < 1200; i++) deep[at++] = ']';
        deep[at++] = '}';
        deep[at] = 0;
        write_text("bad.json", deep);
        calq_error err = {0};
        calq_config *c = NULL;
        EXPECT_STATUS(calq_config_load(m, "bad.json", &c, &err), CALQ_ERR_BAD_FORMAT, &err,
                      "bad.json:1:1020: arrays and objects are nested more than 1000 levels deep, the limit of "
                      "calq's JSON reader");
        EXPECT(c == NULL);
    }
    /* The layer is named in calq_error.layer. */
    write_text("bad.json", "{\"conv\": {\"activation_quant_params\": {\"search_step\": -1}}}");
    calq_error err = {0};
    calq_config *c = NULL;
    calq_config_load(m, "bad.json", &c, &err);
    EXPECT(strcmp(err.layer, "conv") == 0);
    /* A missing file. */
    EXPECT_STATUS(calq_config_load(m, "missing.json", &c, &err), CALQ_ERR_IO, &err, "missing.json");
}

/* ---- the simplified .cfg ------------------------------------------------------------------ */

static void test_cfg(calq_model *m)
{
    calq_error err = {0};
    calq_config *c = NULL;
    /* The example of §7.3. common_config's channel_wise applies where it can (Conv types). */
    const char *ex = write_text("example.cfg", "batch_num : 2\n"
                                               "activation_offset : true\n"
                                               "common_config : {\n"
                                               "    arq_quantize : {\n"
                                               "        channel_wise : true\n"
                                               "    }\n"
                                               "    ifmr_quantize : {\n"
                                               "        search_range_start : 0.7\n"
                                               "        search_range_end : 1.3\n"
                                               "        search_step : 0.01\n"
                                               "        max_percentile : 0.999999\n"
                                               "        min_percentile : 0.999999\n"
                                               "        asymmetric : true\n"
                                               "    }\n"
                                               "}\n");
    EXPECT_STATUS(calq_config_load(m, ex, &c, &err), CALQ_OK, &err, NULL);
    if (c) {
        EXPECT(c->batch_num == 2 && c->activation_offset && c->n_layers == 5);
        EXPECT(layer(c, "conv")->wts.channel_wise && !layer(c, "fc")->wts.channel_wise);
        EXPECT(layer(c, "conv")->act.search_step == 0.01 && layer(c, "mm")->act.asymmetric);
        /* Same as create_quant_config with batch_num 2: the .cfg spells out the defaults. */
        calq_config_opts o;
        calq_config_opts_init(&o);
        o.batch_num = 2;
        calq_config *d = NULL;
        EXPECT_STATUS(calq_config_create(m, &o, &d, &err), CALQ_OK, &err, NULL);
        const char *p1 = tmp_path("from_cfg.json"), *p2 = tmp_path("from_opts.json");
        calq_config_save(c, p1, &err);
        if (d) calq_config_save(d, p2, &err);
        size_t n1 = 0, n2 = 0;
        char *t1 = slurp(p1, &n1), *t2 = slurp(p2, &n2);
        EXPECT(t1 && t2 && n1 == n2 && memcmp(t1, t2, n1) == 0);
        free(t1);
        free(t2);
        calq_config_free(d);
        calq_config_free(c);
        c = NULL;
    }

    /* Precedence: layer > type > common > activation_offset; the last algorithm wins. */
    char prec[512];
    snprintf(prec, sizeof prec, "%s",
             write_text("prec.cfg", "activation_offset: false\n"
                                    "skip_layers: \"mm\"\n"
                                    "skip_layer_types: \"ConvTranspose\"\n"
                                    "common_config {\n"
                                    "  ifmr_quantize { search_step: 0.02 max_percentile: 0.9999 }\n"
                                    "  arq_quantize { channel_wise: true }\n"
                                    "}\n"
                                    "override_layer_types {\n"
                                    "  layer_type: \"Conv\"\n"
                                    "  calibration_config { ifmr_quantize { asymmetric: true search_step: 0.05 } }\n"
                                    "}\n"
                                    "override_layer_configs {\n"
                                    "  layer_name: \"conv\"\n"
                                    "  calibration_config {\n"
                                    "    hfmg_quantize { num_of_bins: 2048 }\n"
                                    "    arq_quantize { channel_wise: false }\n"
                                    "  }\n"
                                    "}\n"
                                    "override_layer_configs {\n"
                                    "  layer_name: \"fc\"\n"
                                    "  calibration_config {\n"
                                    "    ifmr_quantize { min_percentile: 0.99 }\n"
                                    "    hfmg_quantize { num_of_bins: 1024 }\n"
                                    "  }\n"
                                    "}\n"
                                    "do_fusion: false\n"
                                    "skip_fusion_layers: \"conv\"\n"));
    EXPECT_STATUS(calq_config_load(m, prec, &c, &err), CALQ_OK, &err, NULL);
    if (c) {
        EXPECT(c->n_layers == 3 && !layer(c, "mm") && !layer(c, "deconv"));
        EXPECT(!c->do_fusion && c->n_skip_fusion_layers == 1 && c->batch_num == 1 && !c->activation_offset);
        const calq_layer_config *conv = layer(c, "conv"), *fc = layer(c, "fc"), *pool = layer(c, "pool");
        /* conv: the layer's hfmg replaces the type's ifmr; asymmetric comes from the type level. */
        EXPECT(conv && conv->act.algo == CALQ_ACT_HFMG && conv->act.num_of_bins == 2048 && conv->act.asymmetric &&
               !conv->wts.channel_wise);
        /* fc: hfmg written after ifmr wins; asymmetric falls back to activation_offset. */
        EXPECT(fc && fc->act.algo == CALQ_ACT_HFMG && fc->act.num_of_bins == 1024 && !fc->act.asymmetric &&
               !fc->wts.channel_wise);
        /* pool: common only. */
        EXPECT(pool && pool->act.algo == CALQ_ACT_IFMR && pool->act.search_step == 0.02 &&
               pool->act.max_percentile == 0.9999 && pool->act.min_percentile == 0.999999 && !pool->act.asymmetric &&
               !pool->has_weights);
        calq_config_free(c);
        c = NULL;
    }
    /* Type override by its Caffe spelling; numbers accept a trailing f and ints. */
    const char *caffe = write_text("caffe.cfg", "override_layer_types { layer_type: \"InnerProduct\" "
                                                "calibration_config { ifmr_quantize { search_range_start: 0.5 "
                                                "search_range_end: 2 search_step: 0.1f } } }\n");
    EXPECT_STATUS(calq_config_load(m, caffe, &c, &err), CALQ_OK, &err, NULL);
    if (c) {
        const calq_layer_config *fc = layer(c, "fc");
        EXPECT(fc && fc->act.search_range[0] == 0.5 && fc->act.search_range[1] == 2.0 &&
               (float)fc->act.search_step == 0.1f);
        EXPECT(layer(c, "conv")->act.search_step == 0.01);
        calq_config_free(c);
        c = NULL;
    }

    static const bad_case cases[] = {
        {"batch_num: 2\nbatchnum: 3\n", CALQ_ERR_BAD_FORMAT,
         "bad.cfg:2:1: unknown field 'batchnum' in the AMCT config"},
        {"batch_num: 0\n", CALQ_ERR_BAD_PARAMETERS, "bad.cfg:1:1: batch_num is 0; it must be in [1, 1000000000]"},
        {"batch_num: 2000000000\n", CALQ_ERR_BAD_PARAMETERS, "batch_num is 2000000000; it must be in [1, 1000000000]"},
        {"batch_num: 1.5\n", CALQ_ERR_BAD_FORMAT, "bad.cfg:1:1: field 'batch_num': expected an integer, found '1.5'"},
        {"batch_num: \"3\"\n", CALQ_ERR_BAD_FORMAT, "field 'batch_num': expected an integer, found string \"3\""},
        {"batch_num: 3abc\n", CALQ_ERR_BAD_FORMAT, "bad.cfg:1:12: expected a number, found '3abc'"},
        {"common_config { hfmg_quantize { num_of_bins: 1024.5 } }\n", CALQ_ERR_BAD_FORMAT,
         "bad.cfg:1:33: field 'num_of_bins': expected an integer, found '1024.5'"},
        {"common_config { ifmr_quantize { max_percentile: \"0.9\" } }\n", CALQ_ERR_BAD_FORMAT,
         "field 'max_percentile': expected a number, found string \"0.9\""},
        {"batch_num: 2\nbatch_num: 3\n", CALQ_ERR_BAD_FORMAT, "bad.cfg:2:1: 'batch_num' is given twice (first at 1:1)"},
        {"common_config { ifmr_quantize { search_step: 0 } }\n", CALQ_ERR_BAD_PARAMETERS,
         "bad.cfg:1:33: search_step is 0; it must be in (0, search_range_end - search_range_start]"},
        {"common_config { ifmr_quantize { max_percentile: 1.01 } }\n", CALQ_ERR_BAD_PARAMETERS,
         "max_percentile is 1.01; it must be in (0.5, 1]"},
        {"common_config { hfmg_quantize { num_of_bins: 100 } }\n", CALQ_ERR_BAD_PARAMETERS,
         "bad.cfg:1:33: num_of_bins is 100; it must be 1024, 2048, 4096 or 8192"},
        {"common_config { ifmr_quantize { dst_type: INT16 } }\n", CALQ_ERR_UNSUPPORTED, "dst_type is INT16"},
        {"common_config { arq_quantize { quant_bits: 7 } }\n", CALQ_ERR_UNSUPPORTED, "quant_bits is 7"},
        {"common_config { ifmr_quantize { serch_step: 0.1 } }\n", CALQ_ERR_BAD_FORMAT,
         "bad.cfg:1:33: unknown field 'serch_step' in ifmr_quantize"},
        {"common_config { ifmr_quantize { search_range_start: 1.2 search_range_end: 1.3 search_step: 0.5 } }\n",
         CALQ_ERR_BAD_PARAMETERS,
         "bad.cfg: layer 'conv' (after common_config, override_layer_types and "
         "override_layer_configs are applied): ifmr_quantize.search_step is 0.5"},
        {"common_config { ifmr_quantize { search_range_start: 1.3 search_range_end: 0.7 } }\n", CALQ_ERR_BAD_PARAMETERS,
         "search_range_start/search_range_end is [1.3, 0.7]"},
        {"override_layer_types { layer_type: \"Relu\" calibration_config { } }\n", CALQ_ERR_BAD_PARAMETERS,
         "'Relu' is not a quantizable layer type"},
        {"override_layer_configs { layer_name: \"relu\" calibration_config { } }\n", CALQ_ERR_BAD_PARAMETERS,
         "bad.cfg:1:26: override_layer_configs: layer 'relu' is not a quantizable layer of the model (it is a Relu"},
        {"override_layer_configs { layer_name: \"nope\" calibration_config { } }\n", CALQ_ERR_BAD_PARAMETERS,
         "override_layer_configs: the model has no layer 'nope'"},
        {"override_layer_configs { layer_name: \"conv\" }\n", CALQ_ERR_BAD_FORMAT,
         "'override_layer_configs' needs both layer_name and calibration_config"},
        {"override_layer_configs { layer_name: \"fc\" calibration_config { arq_quantize { channel_wise: true } } }\n",
         CALQ_ERR_BAD_PARAMETERS, "arq_quantize.channel_wise is true but layer 'fc' is a Gemm"},
        {"override_layer_types { layer_type: \"Conv\" calibration_config { } }\n"
         "override_layer_types { layer_type: \"Convolution\" calibration_config { } }\n",
         CALQ_ERR_BAD_PARAMETERS, "bad.cfg:2:1: Conv is overridden twice (first at 1:1)"},
        {"skip_layers: \"conv\"\noverride_layer_configs { layer_name: \"conv\" calibration_config { } }\n",
         CALQ_ERR_BAD_PARAMETERS, "layer 'conv' has an override_layer_configs entry but is also in skip_layers"},
        {"skip_layers: \"relu\"\n", CALQ_ERR_BAD_PARAMETERS, "bad.cfg:1:1: skip_layers: layer 'relu' is not a"},
        {"common_config { ada_quantize { num_iteration: 0 } }\n", CALQ_ERR_BAD_PARAMETERS,
         "bad.cfg:1:32: num_iteration is 0; it must be in [1, 10000000]"},
        {"common_config { ada_quantize { } arq_quantize { } ada_quantize { } }\n", CALQ_ERR_BAD_FORMAT,
         "'ada_quantize' is given twice"},
        {"common_config { dmq_balancer { migration_strength: 0.19 } }\n", CALQ_ERR_BAD_PARAMETERS,
         "bad.cfg:1:32: migration_strength is 0.19; it must be a number in [0.2, 0.8]"},
        {"common_config { dmq_balancer { strength: 0.5 } }\n", CALQ_ERR_BAD_FORMAT, "migration_strength"},
        {"override_layer_configs { layer_name: \"pool\" calibration_config { dmq_balancer { } } }\n",
         CALQ_ERR_BAD_PARAMETERS, "dmq_balancer.migration_strength is set but layer 'pool' is an AveragePool"},
        {"fakequant_precision_mode: FORCE_FP16_QUANT\n", CALQ_ERR_UNSUPPORTED, "'fakequant_precision_mode'"},
        {"common_config: 3\n", CALQ_ERR_BAD_FORMAT, "'common_config' is a message"},
        {"common_config { ifmr_quantize { } ifmr_quantize { } }\n", CALQ_ERR_BAD_FORMAT,
         "'ifmr_quantize' is given twice"},
        {"activation_offset: maybe\n", CALQ_ERR_BAD_FORMAT, "bad.cfg:1:"},
        {"batch_num: : 2\n", CALQ_ERR_BAD_FORMAT, "bad.cfg:1:"},
        {"common_config {\n", CALQ_ERR_BAD_FORMAT, "bad.cfg:"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_text("bad.cfg", cases[i].json);
        calq_config *bad = (calq_config *)1;
        calq_status st = calq_config_load(m, "bad.cfg", &bad, &err);
        if (st != cases[i].status || !strstr(err.message, cases[i].needle))
            fprintf(stderr, "cfg case %zu: %s\n", i, cases[i].json);
        EXPECT_STATUS(st, cases[i].status, &err, cases[i].needle);
        EXPECT(bad == NULL);
    }

    /* create_quant_config with config_defination: the .cfg decides, the other options are ignored
     * (§1.1). */
    calq_config_opts o;
    calq_config_opts_init(&o);
    o.batch_num = 7;
    o.config_defination = prec;
    const char *out = tmp_path("prec.json");
    EXPECT_STATUS(calq_create_quant_config(m, &o, out, &err), CALQ_OK, &err, NULL);
    EXPECT_STATUS(calq_config_load(m, out, &c, &err), CALQ_OK, &err, NULL);
    if (c) {
        EXPECT(c->batch_num == 1 && c->n_layers == 3 && layer(c, "conv")->act.algo == CALQ_ACT_HFMG);
        calq_config_free(c);
    }
}

/* "skip_layers" (calq's extension, the remedy the calibration failure report prints) turns the
 * named layers off, whatever their own entries say; a name that is not a quantizable layer fails. */
/* tensor_quantize entries (§7.2): read with their own parameters (asymmetric from the global
 * activation_offset wherever it is in the file), written back after skip_fusion_layers, the
 * same bytes on a second round trip; a config without entries writes no key. */
static void test_tensor_quantize(calq_model *m)
{
    static const char json[] =
        "{\"tensor_quantize\": [{\"layer_name\": \"add\", \"input_index\": 1, \"activation_quant_params\": "
        "{\"act_algo\": \"hfmg\", \"num_of_bins\": 1024}}, {\"layer_name\": \"add\"}],\n"
        " \"activation_offset\": false, \"conv\": {}}";
    calq_error err = {0};
    calq_config *c = NULL;
    EXPECT(calq__config_parse_json(m, json, strlen(json), "t.json", &c, &err) == CALQ_OK);
    if (!c) return;
    EXPECT(c->n_tensors == 2 && c->n_layers == 1);
    const calq_layer_config *t0 = calq__config_find_tensor(c, "add", 0), *t1 = calq__config_find_tensor(c, "add", 1);
    EXPECT(t0 && t1 && t0 == &c->tensors[0] && t0->tensor && t0->quant_enable); /* sorted by input */
    EXPECT(t0 && !t0->act.asymmetric && t0->act.algo == CALQ_ACT_IFMR && !t0->has_weights);
    EXPECT(t1 && t1->act.algo == CALQ_ACT_HFMG && t1->act.num_of_bins == 1024 && !strcmp(t1->op_type, "Add"));
    EXPECT(!calq__config_find_tensor(c, "add", 2) && !calq__config_find(c, "add"));
    const char *p1 = tmp_path("t1.json"), *p2 = tmp_path("t2.json");
    EXPECT(calq_config_save(c, p1, &err) == CALQ_OK);
    calq_config *back = NULL;
    EXPECT(calq_config_load(m, p1, &back, &err) == CALQ_OK);
    if (back) EXPECT(calq_config_save(back, p2, &err) == CALQ_OK);
    size_t n1 = 0, n2 = 0;
    char *a = slurp(p1, &n1), *b = slurp(p2, &n2);
    EXPECT(a && b && n1 == n2 && !memcmp(a, b, n1));
    EXPECT(a && strstr(a, "\"skip_fusion_layers\": [],\n    \"tensor_quantize\": [\n        {\n            "
                          "\"layer_name\": \"add\",\n            \"input_index\": 0,"));
    calq_config *copy = calq__config_clone(c);
    EXPECT(copy && copy->n_tensors == 2 && copy->tensors[1].input == 1 && copy->tensors[1].name != c->tensors[1].name);
    free(a);
    free(b);
    calq_config_free(copy);
    calq_config_free(back);
    calq_config_free(c);
    /* no entries: no key (AMCT's files round-trip to the same bytes) */
    c = NULL;
    EXPECT(calq__config_parse_json(m, "{\"conv\": {}}", 12, "t.json", &c, &err) == CALQ_OK);
    if (c) EXPECT(calq_config_save(c, p1, &err) == CALQ_OK);
    a = slurp(p1, &n1);
    EXPECT(a && !strstr(a, "tensor_quantize"));
    free(a);
    calq_config_free(c);
}

static void test_skip_layers(calq_model *m)
{
    static const char text[] = "{\"skip_layers\": [\"conv\"], \"conv\": {\"quant_enable\": true}, "
                               "\"fc\": {\"quant_enable\": true}}";
    calq_error err = {0};
    calq_config *c = NULL;
    EXPECT_STATUS(calq__config_parse_json(m, text, strlen(text), "skip.json", &c, &err), CALQ_OK, &err, NULL);
    if (c) {
        EXPECT(layer(c, "conv") && !layer(c, "conv")->quant_enable);
        EXPECT(layer(c, "fc") && layer(c, "fc")->quant_enable);
        calq_config_free(c);
    }
    static const char bad[] = "{\"skip_layers\": [\"no_such_layer\"]}";
    c = NULL;
    EXPECT_STATUS(calq__config_parse_json(m, bad, strlen(bad), "skip.json", &c, &err), CALQ_ERR_BAD_PARAMETERS, &err,
                  "the model has no layer 'no_such_layer'");
    calq_config_free(c);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/calq_cfg_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    char cwd[1024];
    if (!getcwd(cwd, sizeof cwd) || chdir(tmpdir) != 0) return 1;
    calq_error err = {0};
    calq_model *m = calib_test_model(&err);
    if (!m) {
        fprintf(stderr, "cannot build the test model: %s\n", err.message);
        return 1;
    }
    test_defaults_tiny(m);
    test_round_trip(m);
    test_dmq(m);
    test_json_errors(m);
    test_skip_layers(m);
    test_tensor_quantize(m);
    test_cfg(m);
    calq_model_free(m);
    test_defaults_ultraface();
    if (chdir(cwd) != 0) return 1;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    if (failures)
        fprintf(stderr, "test_calib_config: %d failure(s)\n", failures);
    else
        printf("test_calib_config: all passed\n");
    return TEST_RESULT();
}
