/* calq.h: every fallible call "fills the caller-owned calq_error (may be NULL)". A failing call
 * with err NULL must return the same status as with an err, and must not crash: the code below
 * the public functions reads err->status and prefixes err->message on its failure paths (a file
 * that cannot be opened crashed; a model file that does not parse returned CALQ_ERR_INTERNAL,
 * the prefix having no status to keep). Each failure is made twice, with and without an err. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "calib_model.h"
#include "expect.h"

static char dir[512];

static void path_in(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", dir, name);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    EXPECT(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* The status a call gives with an err (which must carry a message) and without one. */
#define SAME_STATUS(want, call_with_err)                                                                               \
    do {                                                                                                               \
        calq_error got = {0};                                                                                          \
        calq_error *e = &got;                                                                                          \
        calq_status with = (call_with_err);                                                                            \
        EXPECT_STATUS(with, (want), &got, NULL);                                                                       \
        EXPECT(got.message[0] != 0);                                                                                   \
        e = NULL;                                                                                                      \
        calq_status without = (call_with_err);                                                                         \
        if (without != with)                                                                                           \
            fprintf(stderr, "%s:%d: err NULL gives %s, err %s: %s\n", __FILE__, __LINE__, calq_status_name(without),   \
                    calq_status_name(with), #call_with_err);                                                           \
        EXPECT(without == with);                                                                                       \
    } while (0)

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/calq_null_err_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    char missing[600], garbage[600], npy[600], record[600], bad_dir[600], prefix[600];
    path_in(missing, sizeof missing, "missing.onnx");
    path_in(garbage, sizeof garbage, "garbage.onnx");
    path_in(npy, sizeof npy, "garbage.npy");
    path_in(record, sizeof record, "garbage_record.txt");
    path_in(bad_dir, sizeof bad_dir, "no/such/dir/out");
    path_in(prefix, sizeof prefix, "out");
    write_text(garbage, "this is not an ONNX model\n");
    write_text(npy, "this is not a .npy file\n");
    write_text(record, "not a record\n");

    calq_model *m = NULL;
    SAME_STATUS(CALQ_ERR_IO, calq_model_load_onnx(missing, &m, e));
    SAME_STATUS(CALQ_ERR_BAD_FORMAT, calq_model_load_onnx(garbage, &m, e));
    SAME_STATUS(CALQ_ERR_IO, calq_model_load_caffe(missing, NULL, &m, e));
    calq_tensor t = {0};
    SAME_STATUS(CALQ_ERR_IO, calq_npy_read(missing, &t, e));
    SAME_STATUS(CALQ_ERR_BAD_FORMAT, calq_npy_read(npy, &t, e));
    calq_image_opts io;
    calq_image_opts_init(&io);
    SAME_STATUS(CALQ_ERR_IO, calq_image_load(missing, &io, &t, e));
    calq_data *d = NULL;
    SAME_STATUS(CALQ_ERR_IO, calq_data_open_npy(missing, &d, e));
    calq_outputs *o = NULL;
    SAME_STATUS(CALQ_ERR_IO, calq_outputs_begin(bad_dir, &o, e));

    calq_error err = {0};
    m = calib_test_model(&err);
    EXPECT(m != NULL);
    if (m) {
        calq_config *c = NULL;
        SAME_STATUS(CALQ_ERR_IO, calq_config_load(m, missing, &c, e));
        SAME_STATUS(CALQ_ERR_IO, calq_save_model(m, missing, CALQ_SAVE_QDQ, prefix, e));
        SAME_STATUS(CALQ_ERR_BAD_FORMAT, calq_save_model(m, record, CALQ_SAVE_QDQ, prefix, e));
        EXPECT_STATUS(calq_config_create(m, NULL, &c, &err), CALQ_OK, &err, NULL);
        if (c) {
            char json[700];
            snprintf(json, sizeof json, "%s.json", bad_dir);
            SAME_STATUS(CALQ_ERR_IO, calq_config_save(c, json, e));
            calq_config_free(c);
        }
        calq_model_free(m);
    }
    return TEST_RESULT();
}
