/* calq's activation calibrators in configs and calibration runs (issue 11, item 3):
 *  - the JSON config: act_algo per layer and globally, each algorithm's keys and defaults, the
 *    writer naming calq's algorithms only where they are used, byte-stable round trips, errors;
 *  - calq_calibrate on MTCNN det3 (Caffe) with minmax / percentile / kl / mse: every record entry
 *    equals the whole-buffer calq_range() of that layer's input over the same three photos (so the
 *    streams fed batch by batch by the observer lose nothing), and auto's entries are each one of
 *    its candidates' factors; records identical for 1 and 2 threads. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calib/config.h"
#include "calib/record.h"
#include "calib_model.h"
#include "frontend/model.h"

#include "expect.h"
#include "fixtures.h"

static char *slurp(const char *path)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, fp) != (size_t)n) n = 0;
    if (s) s[n] = 0;
    fclose(fp);
    return s;
}

static void write_text(const char *path, const char *text)
{
    FILE *fp = fopen(path, "wb");
    if (fp) {
        fputs(text, fp);
        fclose(fp);
    }
}

static const calq_layer_config *layer(const calq_config *c, const char *name)
{
    for (int i = 0; i < c->n_layers; i++)
        if (strcmp(c->layers[i].name, name) == 0) return &c->layers[i];
    return NULL;
}

/* The text of one layer's entry in a written config. */
static const char *entry(const char *text, const char *name, char *buf, size_t n)
{
    char key[128];
    snprintf(key, sizeof key, "    \"%s\": {", name);
    const char *a = strstr(text, key), *b = a ? strstr(a, "\n    }") : NULL;
    if (!a || !b) return "";
    snprintf(buf, n, "%.*s", (int)(b - a), a);
    return buf;
}

static void test_config(calq_model *m, const char *dir)
{
    calq_error err = {0};
    char path[600], out1[600], out2[600], e[4096];
    snprintf(path, sizeof path, "%s/algos.json", dir);
    snprintf(out1, sizeof out1, "%s/out1.json", dir);
    snprintf(out2, sizeof out2, "%s/out2.json", dir);
    write_text(path, "{\"act_algo\": \"mse\",\n"
                     " \"conv\": {\"activation_quant_params\": {\"act_algo\": \"kl\", \"num_of_bins\": 4096}},\n"
                     " \"fc\": {\"activation_quant_params\": {\"act_algo\": \"percentile\", \"asymmetric\": false}},\n"
                     " \"pool\": {},\n"
                     " \"mm\": {\"activation_quant_params\": {\"act_algo\": \"ifmr\"}},\n"
                     " \"deconv\": {\"activation_quant_params\": {\"act_algo\": \"auto\"}}}\n");
    calq_config *c = NULL;
    EXPECT_STATUS(calq_config_load(m, path, &c, &err), CALQ_OK, &err, NULL);
    if (!c) return;
    const calq_layer_config *conv = layer(c, "conv"), *fc = layer(c, "fc"), *pool = layer(c, "pool"),
                            *mm = layer(c, "mm"), *dc = layer(c, "deconv");
    EXPECT(conv && conv->act.algo == CALQ_ACT_KL && conv->act.num_of_bins == 4096);
    EXPECT(fc && fc->act.algo == CALQ_ACT_PERCENTILE && fc->act.max_percentile == 0.99999 && !fc->act.asymmetric);
    EXPECT(pool && pool->act.algo == CALQ_ACT_MSE && pool->act.num_of_bins == 2048); /* the global act_algo */
    EXPECT(mm && mm->act.algo == CALQ_ACT_IFMR && mm->act.max_percentile == 0.999999);
    EXPECT(dc && dc->act.algo == CALQ_ACT_AUTO);
    calq_range_opts ro;
    if (fc) calq__config_range_opts(fc, &ro);
    EXPECT(fc && ro.method == CALQ_RANGE_PERCENTILE && ro.max_percentile == 0.99999f && ro.asymmetric == 0);
    EXPECT_STATUS(calq_config_save(c, out1, &err), CALQ_OK, &err, NULL);
    calq_config_free(c);
    c = NULL;
    /* read back and written again: the same bytes */
    EXPECT_STATUS(calq_config_load(m, out1, &c, &err), CALQ_OK, &err, NULL);
    if (c) EXPECT_STATUS(calq_config_save(c, out2, &err), CALQ_OK, &err, NULL);
    calq_config_free(c);
    char *t1 = slurp(out1), *t2 = slurp(out2);
    EXPECT(t1 && t2 && strcmp(t1, t2) == 0);
    if (t1) {
        EXPECT(!strstr(t1, "\n    \"act_algo\"")); /* the global key is expanded into the layers */
        EXPECT(strstr(entry(t1, "conv", e, sizeof e), "\"act_algo\": \"kl\",\n            \"num_of_bins\": 4096,\n"));
        EXPECT(!strstr(e, "percentile") && !strstr(e, "search_"));
        EXPECT(strstr(entry(t1, "fc", e, sizeof e), "\"max_percentile\": 0.99999,\n            \"min_percentile\": "
                                                    "0.99999,\n            \"act_algo\": \"percentile\",\n"));
        EXPECT(!strstr(e, "search_") && !strstr(e, "num_of_bins"));
        EXPECT(strstr(entry(t1, "mm", e, sizeof e), "\"search_range\": [0.7, 1.3],\n            \"search_step\": "
                                                    "0.01,\n            \"act_algo\": \"ifmr\",\n"));
        EXPECT(strstr(entry(t1, "deconv", e, sizeof e), "\"num_bits\": 8,\n            \"act_algo\": \"auto\",\n"));
    }
    free(t1);
    free(t2);

    /* errors */
    static const struct {
        const char *json, *needle;
    } bad[] = {
        {"{\"conv\": {\"activation_quant_params\": {\"act_algo\": \"kl\", \"search_step\": 0.1}}}",
         "act_algo is \"kl\", which does not take 'search_step'; \"kl\" takes num_of_bins"},
        {"{\"act_algo\": \"auto\", \"conv\": {\"activation_quant_params\": {\"max_percentile\": 0.9}}}",
         "act_algo is \"auto\" (the config's global act_algo), which does not take 'max_percentile'"},
        {"{\"act_algo\": \"fast\"}", "'act_algo' is \"fast\"; it must be \"ifmr\", \"hfmg\" (AMCT's)"},
        {"{\"act_algo\": 3}", "'act_algo' must be a string"},
        {"{\"conv\": {\"activation_quant_params\": {\"act_algo\": \"percentile\", \"max_percentile\": 0.3}}}",
         "max_percentile 0.3 and min_percentile 0.99999 must be in (0.5, 1]"},
        {"{\"conv\": {\"activation_quant_params\": {\"act_algo\": \"mse\", \"num_of_bins\": 100}}}",
         "num_of_bins is 100; it must be 1024, 2048, 4096 or 8192"},
        {"{\"conv\": {\"activation_quant_params\": {\"act_algo\": \"minmax\", \"num_of_bins\": 1024}}}",
         "\"minmax\" takes no parameter"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_text(path, bad[i].json);
        c = NULL;
        calq_status st = calq_config_load(m, path, &c, &err);
        EXPECT(st != CALQ_OK && c == NULL);
        EXPECT_STATUS(st, st == CALQ_ERR_BAD_FORMAT ? CALQ_ERR_BAD_FORMAT : CALQ_ERR_BAD_PARAMETERS, &err,
                      bad[i].needle);
        calq_config_free(c);
    }

    /* create_quant_config with act_algo; "ifmr" writes exactly the default (AMCT's) config */
    calq_config_opts o;
    calq_config_opts_init(&o);
    EXPECT_STATUS(calq_create_quant_config(m, &o, out1, &err), CALQ_OK, &err, NULL);
    o.act_algo = "ifmr";
    EXPECT_STATUS(calq_create_quant_config(m, &o, out2, &err), CALQ_OK, &err, NULL);
    t1 = slurp(out1);
    t2 = slurp(out2);
    EXPECT(t1 && t2 && strcmp(t1, t2) == 0 && !strstr(t1, "\"kl\""));
    free(t1);
    free(t2);
    o.act_algo = "kl";
    c = NULL;
    EXPECT_STATUS(calq_config_create(m, &o, &c, &err), CALQ_OK, &err, NULL);
    for (int i = 0; c && i < c->n_layers; i++)
        EXPECT(c->layers[i].act.algo == CALQ_ACT_KL && c->layers[i].act.num_of_bins == 2048);
    calq_config_free(c);
    o.act_algo = "nope";
    c = NULL;
    EXPECT_STATUS(calq_config_create(m, &o, &c, &err), CALQ_ERR_BAD_PARAMETERS, &err, "act_algo is \"nope\"");
}

/* ---- calibration on MTCNN det3 ------------------------------------------------------------- */

static calq_record *calibrate(calq_model *m, calq_data *data, const char *algo, int threads, const char *path)
{
    calq_error err = {0};
    calq_config_opts co;
    calq_config_opts_init(&co);
    co.batch_num = 3;
    co.act_algo = algo;
    calq_config *cfg = NULL;
    calq_calibrate_opts opts;
    calq_calibrate_opts_init(&opts);
    opts.log = 0;
    opts.n_threads = threads;
    calq_record *rec = NULL;
    EXPECT_STATUS(calq_config_create(m, &co, &cfg, &err), CALQ_OK, &err, NULL);
    if (cfg && calq_calibrate(m, cfg, data, &opts, path, &err) == CALQ_OK)
        EXPECT_STATUS(calq__record_read_file(path, &rec, &err), CALQ_OK, &err, NULL);
    else
        fprintf(stderr, "calibration with %s: %s\n", algo, err.message);
    calq_config_free(cfg);
    EXPECT(rec != NULL);
    return rec;
}

static void test_det3(const char *shared, const char *dir)
{
    char proto[1024], weights[1024], faces[1024], photos[3][1200];
    snprintf(proto, sizeof proto, "%s/models/mtcnn/det3.prototxt", shared);
    snprintf(weights, sizeof weights, "%s/models/mtcnn/det3.caffemodel", shared);
    snprintf(faces, sizeof faces, "%s/data/faces", shared);
    /* batches 0..2: the first three photos in name order */
    snprintf(photos[0], sizeof photos[0], "%s/mtcnn_test1.jpg", faces);
    snprintf(photos[1], sizeof photos[1], "%s/mtcnn_test2.jpg", faces);
    snprintf(photos[2], sizeof photos[2], "%s/ultraface_1.jpg", faces);
    calq_error err = {0};
    calq_model *m = NULL;
    if (!NEED_FILE(proto) || !NEED_FILE(weights) || !NEED_FILE(photos[0]) || !NEED_FILE(photos[2])) return;
    EXPECT_STATUS(calq_model_load_caffe(proto, weights, &m, &err), CALQ_OK, &err, NULL);
    if (!m) return;
    calq_value_info in;
    calq_model_input_info(m, 0, &in);
    int64_t dims[4] = {1, 3, 48, 48};
    EXPECT(calq_model_set_input_shape(m, in.name, dims, 4, &err) == CALQ_OK);
    calq_image_opts io;
    calq_image_opts_init(&io);
    io.width = 48;
    io.height = 48;
    for (int c = 0; c < 3; c++) io.mean[c] = 127.5f, io.std[c] = 128.0f;
    calq_data *data = NULL;
    EXPECT_STATUS(calq_data_open_images(faces, &io, 1, &data, &err), CALQ_OK, &err, NULL);

    /* every layer's input over the three photos, through a plain session (the session folds BN as
     * calibration does, and a folded Conv's input is unchanged) */
    int n = calq_model_num_nodes(m);
    fx_gather gc = {calloc((size_t)n + 1, sizeof(fx_gathered)), 0};
    const char **names = calloc((size_t)n + 1, sizeof *names);
    for (int i = 0; i < n; i++) {
        calq_node_info ni;
        calq_model_node_info(m, i, &ni);
        if (!ni.quantizable) continue;
        const char *t = calq_model_node_input(m, i, 0);
        int k = 0;
        while (k < gc.n && strcmp(gc.t[k].name, t) != 0) k++;
        if (k == gc.n) names[gc.n] = gc.t[gc.n].name = t, gc.n++;
    }
    calq_session *s = NULL;
    EXPECT_STATUS(calq_session_create(m, NULL, &s, &err), CALQ_OK, &err, NULL);
    EXPECT_STATUS(calq_session_set_observer(s, fx_gather_observer, &gc, names, gc.n, &err), CALQ_OK, &err, NULL);
    for (int b = 0; b < 3; b++) {
        calq_tensor x;
        EXPECT(calq_image_load(photos[b], &io, &x, &err) == CALQ_OK);
        EXPECT(calq_session_run(s, &x, 1, &err) == CALQ_OK);
        calq_tensor_free_data(&x);
    }
    calq_session_free(s);

    static const char *const algos[] = {"minmax", "percentile", "kl", "mse"};
    char path[700], path2[700];
    calq_record *rec[4] = {0};
    for (int a = 0; a < 4; a++) {
        snprintf(path, sizeof path, "%s/%s_record.txt", dir, algos[a]);
        rec[a] = calibrate(m, data, algos[a], 2, path);
        int n_equal = 0;
        for (int i = 0; rec[a] && i < rec[a]->n_layers; i++) {
            const calq_record_layer *l = &rec[a]->layers[i];
            const char *t = calq_model_node_input(m, calq__model_find_node(m, l->name), 0);
            const fx_gathered *g = fx_gather_find(&gc, t);
            calq_range_opts o;
            calq_range_opts_init(&o, (calq_range_method)a);
            calq_range_result r;
            EXPECT(g && calq_range(g->x, g->n, &o, l->name, &r, &err) == CALQ_OK);
            bool same = g && r.scale == l->scale_d && r.offset == l->offset_d;
            if (!same)
                fprintf(stderr, "%s %s: record %.9g/%lld, whole buffer %.9g/%d\n", algos[a], l->name,
                        (double)l->scale_d, (long long)l->offset_d, (double)r.scale, r.offset);
            EXPECT(same);
            n_equal += same;
        }
        printf("act_algo %s: %d of %d record entries equal the whole-buffer calculation\n", algos[a], n_equal,
               rec[a] ? rec[a]->n_layers : 0);
    }

    /* auto: every entry is one of its candidates' factors (IFMR's from a plain run, and the four
     * above; HFMG's depend on the batch split, so they are not recomputed here), and the record
     * is the same for 1 and 2 threads */
    snprintf(path, sizeof path, "%s/auto1_record.txt", dir);
    snprintf(path2, sizeof path2, "%s/auto2_record.txt", dir);
    calq_record *r1 = calibrate(m, data, "auto", 1, path), *r2 = calibrate(m, data, "auto", 2, path2);
    snprintf(path2, sizeof path2, "%s/ifmr_record.txt", dir);
    calq_record *ri = calibrate(m, data, "ifmr", 2, path2);
    char *t1 = slurp(path);
    snprintf(path2, sizeof path2, "%s/auto2_record.txt", dir);
    char *t2 = slurp(path2);
    EXPECT(t1 && t2 && strcmp(t1, t2) == 0);
    free(t1);
    free(t2);
    int from[6] = {0}, n_other = 0;
    for (int i = 0; r1 && ri && i < r1->n_layers; i++) {
        const calq_record_layer *l = &r1->layers[i];
        int k = -1;
        if (ri->layers[i].scale_d == l->scale_d && ri->layers[i].offset_d == l->offset_d) k = 0;
        for (int a = 0; a < 4 && k < 0; a++)
            if (rec[a] && rec[a]->layers[i].scale_d == l->scale_d && rec[a]->layers[i].offset_d == l->offset_d)
                k = a + 1;
        if (k < 0)
            n_other++; /* HFMG's */
        else
            from[k]++;
    }
    printf("act_algo auto: ifmr %d, minmax %d, percentile %d, kl %d, mse %d, other (hfmg) %d layers\n", from[0],
           from[1], from[2], from[3], from[4], n_other);
    EXPECT(r1 && from[0] + from[1] + from[2] + from[3] + from[4] + n_other == r1->n_layers);
    EXPECT(from[0] < (r1 ? r1->n_layers : 0)); /* det3 has layers where another candidate wins */
    calq__record_free(r1);
    calq__record_free(r2);
    calq__record_free(ri);
    for (int a = 0; a < 4; a++) calq__record_free(rec[a]);
    fx_gather_free(&gc);
    free(names);
    calq_data_free(data);
    calq_model_free(m);
}

int main(void)
{
    char dir[] = "/tmp/calq_algos_XXXXXX";
    if (!mkdtemp(dir)) return 1;
    calq_error err = {0};
    calq_model *m = calib_test_model(&err);
    if (!m) {
        fprintf(stderr, "cannot build the test model: %s\n", err.message);
        return 1;
    }
    test_config(m, dir);
    calq_model_free(m);
    test_det3(fx_shared(), dir);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    if (failures)
        fprintf(stderr, "test_calib_algos: %d failure(s)\n", failures);
    else
        printf("test_calib_algos: all passed\n");
    return TEST_RESULT();
}
