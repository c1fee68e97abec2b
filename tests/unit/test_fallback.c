/* calq_fallback with the user's evaluator (include/calq.h, src/search/fallback.c): a metric that is
 * NaN or infinite would be compared as a number (NaN never meets a target and makes every
 * comparison false, infinity meets any), so it stops the search with CALQ_ERR_DATA naming the
 * model and the value, whether it is the float model's metric or a later trial's, and the record
 * and config stay as calibration wrote them; finite metrics run the search. The CLI refuses a
 * non-finite number its --evaluator prints before the library sees it (tools/cli_evaluator.c), so
 * only this test holds the library's own check. On MTCNN's PNet (Caffe, 12x12 input, 4 layers)
 * and the face photos. */
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calq.h"
#include "expect.h"
#include "fixtures.h"

/* An evaluator whose calls before `bad_at` return 0.5, and the others `bad`. */
typedef struct fake_eval {
    int calls;
    int bad_at;
    double bad;
} fake_eval;

static calq_status fake_evaluator(void *user, const char *model_path, const char *weights_path, double *metric,
                                  calq_error *err)
{
    (void)model_path;
    (void)weights_path;
    (void)err;
    fake_eval *e = user;
    *metric = e->calls++ >= e->bad_at ? e->bad : 0.5;
    return CALQ_OK;
}

/* The whole file (malloc'd, *n bytes), or NULL. */
static char *read_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *b = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long len = ftell(f);
        rewind(f);
        b = len >= 0 ? malloc((size_t)len + 1) : NULL;
        if (b && fread(b, 1, (size_t)len, f) != (size_t)len) {
            free(b);
            b = NULL;
        }
        *n = (size_t)len;
    }
    fclose(f);
    return b;
}

static bool same_file(const char *path, const char *bytes, size_t n)
{
    size_t m = 0;
    char *now = read_all(path, &m);
    bool same = now && bytes && m == n && memcmp(now, bytes, n) == 0;
    free(now);
    return same;
}

int main(void)
{
    char proto[1024], weights[1024], faces[1024];
    fx_shared_path(proto, sizeof proto, "models/mtcnn/det1.prototxt");
    fx_shared_path(weights, sizeof weights, "models/mtcnn/det1.caffemodel");
    fx_shared_path(faces, sizeof faces, "data/faces");
    if (!NEED_FILE(proto) || !NEED_FILE(weights) || !NEED_FILE(faces)) return TEST_RESULT();
    const char *tmp = getenv("TMPDIR");
    char dir[1024], record[1100], config[1100];
    snprintf(dir, sizeof dir, "%s/calq_fallback_test_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(record, sizeof record, "%s/pnet_record.txt", dir);
    snprintf(config, sizeof config, "%s/pnet_config.json", dir);

    calq_error err = {0};
    calq_model *m = NULL;
    calq_data *data = NULL;
    calq_config *cfg = NULL;
    EXPECT_STATUS(calq_model_load_caffe(proto, weights, &m, &err), CALQ_OK, &err, NULL);
    calq_image_opts io;
    calq_image_opts_init(&io);
    io.width = io.height = 12;
    for (int c = 0; c < 3; c++) io.mean[c] = 127.5f, io.std[c] = 128.0f;
    if (m) EXPECT_STATUS(calq_data_open_images(faces, &io, 1, &data, &err), CALQ_OK, &err, NULL);
    calq_config_opts co;
    calq_config_opts_init(&co);
    co.batch_num = 2;
    if (data) EXPECT_STATUS(calq_config_create(m, &co, &cfg, &err), CALQ_OK, &err, NULL);
    calq_calibrate_opts cal;
    calq_calibrate_opts_init(&cal);
    cal.log = 0;
    cal.n_threads = 2;
    cal.config_out = config;
    if (cfg) EXPECT_STATUS(calq_calibrate(m, cfg, data, &cal, record, &err), CALQ_OK, &err, NULL);
    size_t n_record = 0, n_config = 0;
    char *record_bytes = read_all(record, &n_record), *config_bytes = read_all(config, &n_config);
    EXPECT(record_bytes && config_bytes);

    /* NaN / +inf for the float model's metric (the first call), -inf / NaN for the all-quantized
     * model's (the second), higher and lower is better */
    static const struct {
        int bad_at;
        double bad;
        int lower_is_better;
        const char *shown;
    } cases[] = {{0, NAN, 0, "is nan, not a finite number"},
                 {0, INFINITY, 0, "is inf, not a finite number"},
                 {1, -INFINITY, 0, "is -inf, not a finite number"},
                 {1, NAN, 1, "is nan, not a finite number"}};
    for (size_t i = 0; record_bytes && config_bytes && i < sizeof cases / sizeof cases[0]; i++) {
        fake_eval e = {0, cases[i].bad_at, cases[i].bad};
        calq_fallback_opts fo;
        calq_fallback_opts_init(&fo);
        fo.evaluator = fake_evaluator;
        fo.evaluator_user = &e;
        fo.target = cases[i].lower_is_better ? 0.1 : 0.9;
        fo.lower_is_better = cases[i].lower_is_better;
        fo.n_threads = 2;
        fo.log = 0;
        calq_fallback_result *r = (calq_fallback_result *)1;
        memset(&err, 0, sizeof err);
        EXPECT_STATUS(calq_fallback(m, record, config, data, &fo, &r, &err), CALQ_ERR_DATA, &err, cases[i].shown);
        EXPECT(strstr(err.message, "the evaluator's metric for ") != NULL);
        EXPECT(r == NULL);
        if (e.calls != cases[i].bad_at + 1)
            fprintf(stderr, "case %zu: %d evaluator calls, expected the search to stop at call %d\n", i, e.calls,
                    cases[i].bad_at + 1);
        EXPECT(e.calls == cases[i].bad_at + 1);
        EXPECT(same_file(record, record_bytes, n_record));
        EXPECT(same_file(config, config_bytes, n_config));
        if (r != (calq_fallback_result *)1) calq_fallback_result_free(r);
    }

    /* a non-finite target or time budget, or a negative budget: refused before any evaluation
     * (a NaN target ran the whole search and reported "not met") */
    static const double bad_target[] = {NAN, INFINITY, 0.9, 0.9, 0.9}, bad_budget[] = {0, 0, NAN, INFINITY, -1};
    for (size_t i = 0; record_bytes && config_bytes && i < sizeof bad_target / sizeof bad_target[0]; i++) {
        fake_eval e = {0, INT_MAX, 0.0};
        calq_fallback_opts fo;
        calq_fallback_opts_init(&fo);
        fo.evaluator = fake_evaluator;
        fo.evaluator_user = &e;
        fo.target = bad_target[i];
        fo.time_budget = bad_budget[i];
        fo.log = 0;
        calq_fallback_result *r = NULL;
        memset(&err, 0, sizeof err);
        EXPECT_STATUS(calq_fallback(m, record, config, data, &fo, &r, &err), CALQ_ERR_BAD_PARAMETERS, &err,
                      "must be finite numbers");
        EXPECT(r == NULL && e.calls == 0);
        EXPECT(same_file(record, record_bytes, n_record));
        EXPECT(same_file(config, config_bytes, n_config));
    }

    /* finite metrics: 0.5 meets 0.4 with every layer quantized */
    if (record_bytes && config_bytes) {
        fake_eval e = {0, INT_MAX, 0.0};
        calq_fallback_opts fo;
        calq_fallback_opts_init(&fo);
        fo.evaluator = fake_evaluator;
        fo.evaluator_user = &e;
        fo.target = 0.4;
        fo.n_threads = 2;
        fo.log = 0;
        calq_fallback_result *r = NULL;
        EXPECT_STATUS(calq_fallback(m, record, config, data, &fo, &r, &err), CALQ_OK, &err, NULL);
        EXPECT(r && r->met && r->n_float == 0 && r->metric_before == 0.5 && r->n_layers > 0);
        EXPECT(e.calls >= 2);
        calq_fallback_result_free(r);
    }

    free(record_bytes);
    free(config_bytes);
    calq_data_free(data);
    calq_config_free(cfg);
    calq_model_free(m);
    unlink(record);
    unlink(config);
    rmdir(dir);
    return TEST_RESULT();
}
