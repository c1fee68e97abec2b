/* Calibration data from a next-batch callback (calq_data_open_stream, src/calib/data_stream.c):
 * each batch asked for once and in order, later passes served from the spool, the preflight
 * reading up to batch_num (0: to the end) with the messages of a short stream, a wrong shape or
 * dtype and a failing callback, and a calibration from a stream writing the same record, byte
 * for byte, as the same batches given as .npy files. Uses calib_model.h (x [1,2,4,4], y [1,3]). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "calib_model.h"
#include "calq.h"

#include "expect.h"

/* Batch b: x = b*100 + i (float64, converted), y = b + 0.5*i (float32, given as [3]: a leading 1
 * left out). Knobs to break it. */
typedef struct gen {
    int n_batches;    /* batches before *end */
    int calls;        /* times next was called */
    int last_batch;   /* the batch argument of the last call */
    int in_order;     /* every call asked for the batch after the previous one */
    int bad_shape_at; /* -1, or the batch whose x has the wrong shape (2x4x2) */
    int fail_at;      /* -1, or the batch whose call fails */
    double x[32];
    float y[3];
} gen;

static calq_status next_batch(void *user, int batch, calq_tensor *in, int n, int *end, calq_error *err)
{
    gen *g = user;
    g->in_order &= batch == g->last_batch + 1;
    g->last_batch = batch;
    g->calls++;
    EXPECT(n == 2);
    EXPECT(in[0].data == NULL && in[0].ndim == 0); /* zeroed by calq */
    if (batch == g->fail_at) {
        snprintf(err->message, sizeof err->message, "camera %d unplugged", batch);
        return CALQ_ERR_IO;
    }
    if (batch >= g->n_batches) {
        *end = 1;
        return CALQ_OK;
    }
    for (int i = 0; i < 32; i++) g->x[i] = batch * 100.0 + i;
    for (int i = 0; i < 3; i++) g->y[i] = (float)batch + 0.5f * (float)i;
    in[0] = (calq_tensor){CALQ_DTYPE_FLOAT64, 4, {1, 2, 4, 4}, g->x};
    if (batch == g->bad_shape_at) in[0] = (calq_tensor){CALQ_DTYPE_FLOAT64, 3, {2, 4, 2}, g->x};
    in[1] = (calq_tensor){CALQ_DTYPE_FLOAT32, 1, {3}, g->y};
    return CALQ_OK;
}

static gen gen_of(int n)
{
    return (gen){.n_batches = n, .last_batch = -1, .in_order = 1, .bad_shape_at = -1, .fail_at = -1};
}

/* Spool files left in $TMPDIR (there must be none: the spool is unlinked when created). */
static int spool_files(void)
{
    DIR *dp = opendir(getenv("TMPDIR"));
    int n = 0;
    for (struct dirent *e = dp ? readdir(dp) : NULL; e; e = readdir(dp))
        n += strncmp(e->d_name, "calq_stream.", 12) == 0;
    if (dp) closedir(dp);
    return n;
}

static void test_stream_reads(calq_model *m)
{
    calq_error err = {0};
    gen g = gen_of(5);
    calq_data *d = NULL;
    EXPECT_STATUS(calq_data_open_stream(next_batch, &g, "camera", &d, &err), CALQ_OK, &err, NULL);
    if (!d) return;
    EXPECT(calq_data_num_batches(d) == 0 && g.calls == 0); /* nothing read at open */
    EXPECT_STATUS(calq_data_check(d, m, 3, &err), CALQ_OK, &err, NULL);
    EXPECT(calq_data_num_batches(d) == 3 && g.calls == 3); /* no more than batch_num */
    EXPECT(spool_files() == 0);
    char buf[256];
    calq_data_describe(d, buf, sizeof buf);
    EXPECT(strcmp(buf, "camera: 3 batches read so far") == 0);
    EXPECT(strcmp(calq_data_batch_source(d, 2, buf, sizeof buf), "camera, batch 2") == 0);
    float x[32], y[3];
    calq_tensor t[2] = {{CALQ_DTYPE_FLOAT32, 4, {1, 2, 4, 4}, x}, {CALQ_DTYPE_FLOAT32, 2, {1, 3}, y}};
    /* two passes over the batches: served from the spool, the callback is not asked again */
    for (int pass = 0; pass < 2; pass++)
        for (int b = 0; b < 3; b++) {
            EXPECT_STATUS(calq_data_read_batch(d, b, t, 2, &err), CALQ_OK, &err, NULL);
            EXPECT(x[0] == (float)(b * 100) && x[31] == (float)(b * 100 + 31) && y[2] == (float)b + 1.0f);
        }
    EXPECT(g.calls == 3);
    /* the next batch is read on demand; beyond the end is an error */
    EXPECT_STATUS(calq_data_read_batch(d, 3, t, 2, &err), CALQ_OK, &err, NULL);
    EXPECT(x[1] == 301.0f && g.calls == 4);
    EXPECT_STATUS(calq_data_read_batch(d, 7, t, 2, &err), CALQ_ERR_INDEX_OUT_OF_RANGE, &err,
                  "batch 7 is not in camera (it ended after 5)");
    EXPECT_STATUS(calq_data_read_batch(d, 1, t, 1, &err), CALQ_ERR_BAD_PARAMETERS, &err,
                  "the data feed 2 inputs but 1 tensors were given");
    /* 0: to the end */
    EXPECT_STATUS(calq_data_check(d, m, 0, &err), CALQ_OK, &err, NULL);
    EXPECT(calq_data_num_batches(d) == 5 && g.in_order && g.calls == 6);
    calq_data_describe(d, buf, sizeof buf);
    EXPECT(strcmp(buf, "camera: 5 batches") == 0);
    EXPECT_STATUS(calq_data_check(d, m, 6, &err), CALQ_ERR_BAD_PARAMETERS, &err,
                  "batch_num is 6 but camera ended after 5 batches");
    calq_data_free(d);
}

static void test_stream_errors(calq_model *m)
{
    calq_error err = {0};
    calq_data *d = NULL;
    EXPECT_STATUS(calq_data_open_stream(NULL, NULL, NULL, &d, &err), CALQ_ERR_BAD_PARAMETERS, &err,
                  "no next-batch callback");
    gen g = gen_of(2);
    EXPECT_STATUS(calq_data_open_stream(next_batch, &g, NULL, &d, &err), CALQ_OK, &err, NULL);
    EXPECT_STATUS(calq_data_check(d, m, 3, &err), CALQ_ERR_BAD_PARAMETERS, &err,
                  "batch_num is 3 but the stream ended after 2 batches");
    calq_data_free(d);
    g = gen_of(0);
    EXPECT_STATUS(calq_data_open_stream(next_batch, &g, "empty", &d, &err), CALQ_OK, &err, NULL);
    EXPECT_STATUS(calq_data_check(d, m, 0, &err), CALQ_ERR_DATA, &err, "empty gave no batches");
    calq_data_free(d);
    g = gen_of(4);
    g.bad_shape_at = 1;
    EXPECT_STATUS(calq_data_open_stream(next_batch, &g, "cam", &d, &err), CALQ_OK, &err, NULL);
    EXPECT_STATUS(calq_data_check(d, m, 4, &err), CALQ_ERR_SHAPE, &err,
                  "cam, batch 1: input 'x' is 2x4x2 float64 but the model takes 1x2x4x4 float32");
    EXPECT(g.calls == 2);
    calq_data_free(d);
    g = gen_of(4);
    g.fail_at = 2;
    EXPECT_STATUS(calq_data_open_stream(next_batch, &g, "cam", &d, &err), CALQ_OK, &err, NULL);
    EXPECT_STATUS(calq_data_check(d, m, 4, &err), CALQ_ERR_IO, &err, "cam, batch 2: camera 2 unplugged");
    calq_data_free(d);
}

/* The same batches through a stream and through .npy files: the same record, byte for byte. */
static char *slurp(const char *path, long *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)*n + 1);
    if (b && fread(b, 1, (size_t)*n, f) != (size_t)*n) *n = -1;
    fclose(f);
    return b;
}

static calq_status calibrate(calq_model *m, calq_data *d, const char *record, calq_error *err)
{
    calq_config_opts co;
    calq_config_opts_init(&co);
    co.batch_num = 3;
    calq_config *cfg = NULL;
    calq_status st = calq_config_create(m, &co, &cfg, err);
    calq_calibrate_opts o;
    calq_calibrate_opts_init(&o);
    o.n_threads = 1;
    if (st == CALQ_OK) st = calq_calibrate(m, cfg, d, &o, record, err);
    calq_config_free(cfg);
    return st;
}

static void test_stream_record(calq_model *m, const char *dir)
{
    calq_error err = {0};
    gen g = gen_of(3);
    char path[1200], spec[2600], rec_npy[1200], rec_stream[1200];
    for (int in = 0; in < 2; in++) {
        snprintf(path, sizeof path, "%s/%s", dir, in ? "y" : "x");
        mkdir(path, 0777);
    }
    /* the .npy files hold what the stream gives (x converted to float32, as calq does) */
    for (int b = 0; b < 3; b++) {
        calq_tensor t[2];
        int end = 0;
        next_batch(&g, b, (calq_tensor[2]){{0}}, 2, &end, &err);
        float x[32];
        for (int i = 0; i < 32; i++) x[i] = (float)g.x[i];
        t[0] = (calq_tensor){CALQ_DTYPE_FLOAT32, 4, {1, 2, 4, 4}, x};
        t[1] = (calq_tensor){CALQ_DTYPE_FLOAT32, 2, {1, 3}, g.y};
        for (int in = 0; in < 2; in++) {
            snprintf(path, sizeof path, "%s/%s/%d.npy", dir, in ? "y" : "x", b);
            EXPECT_STATUS(calq_npy_write(path, &t[in], &err), CALQ_OK, &err, NULL);
        }
    }
    snprintf(spec, sizeof spec, "%s/x;%s/y", dir, dir);
    snprintf(rec_npy, sizeof rec_npy, "%s/npy_record.txt", dir);
    snprintf(rec_stream, sizeof rec_stream, "%s/stream_record.txt", dir);
    calq_data *d = NULL;
    EXPECT_STATUS(calq_data_open_npy(spec, &d, &err), CALQ_OK, &err, NULL);
    EXPECT_STATUS(calibrate(m, d, rec_npy, &err), CALQ_OK, &err, NULL);
    calq_data_free(d);
    g = gen_of(100); /* more than batch_num: only 3 are read */
    EXPECT_STATUS(calq_data_open_stream(next_batch, &g, NULL, &d, &err), CALQ_OK, &err, NULL);
    EXPECT_STATUS(calibrate(m, d, rec_stream, &err), CALQ_OK, &err, NULL);
    EXPECT(g.calls == 3 && g.in_order); /* IFMR's two passes, one read of each batch */
    calq_data_free(d);
    long na = 0, nb = 0;
    char *a = slurp(rec_npy, &na), *b = slurp(rec_stream, &nb);
    EXPECT(a && b && na > 100 && na == nb && memcmp(a, b, (size_t)na) == 0);
    free(a);
    free(b);
}

int main(void)
{
    char dir[] = "/tmp/calq_stream_XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    setenv("TMPDIR", dir, 1); /* the spool goes there, and is gone (unlinked) at once */
    calq_error err = {0};
    calq_model *m = calib_test_model(&err);
    if (!m) {
        fprintf(stderr, "cannot build the test model: %s\n", err.message);
        return 1;
    }
    test_stream_reads(m);
    test_stream_errors(m);
    test_stream_record(m, dir);
    calq_model_free(m);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    if (failures)
        fprintf(stderr, "test_calib_stream: %d failure(s)\n", failures);
    else
        printf("test_calib_stream: all passed\n");
    return failures != 0;
}
