/* Every file calq reads goes through a check that it is a regular file of a size its format
 * allows (issue 14): reading /dev/zero, a FIFO or a folder as a record, model, config, .npy,
 * image used to run until out of memory (or, for a FIFO, wait forever for a
 * writer). Each reader must refuse them at once with a message naming the file and why. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file.h"
#include "calib/record.h"

#include "calib_model.h"
#include "expect.h"

static char dir[64], fifo[128], sparse[128];

typedef calq_status (*reader_fn)(const char *path, calq_error *err);

static calq_status read_record(const char *p, calq_error *err)
{
    calq_record *r = NULL;
    calq_status st = calq__record_read_file(p, &r, err);
    calq__record_free(r);
    return st;
}

static calq_status read_onnx(const char *p, calq_error *err)
{
    calq_model *m = NULL;
    calq_status st = calq_model_load_onnx(p, &m, err);
    calq_model_free(m);
    return st;
}

static calq_status read_prototxt(const char *p, calq_error *err)
{
    calq_model *m = NULL;
    calq_status st = calq_model_load_caffe(p, NULL, &m, err);
    calq_model_free(m);
    return st;
}

static calq_status read_caffemodel(const char *p, calq_error *err)
{
    char proto[160];
    snprintf(proto, sizeof proto, "%s/net.prototxt", dir);
    FILE *fp = fopen(proto, "w");
    if (fp) {
        fputs("name: \"n\"\ninput: \"data\"\ninput_dim: 1\ninput_dim: 1\ninput_dim: 2\ninput_dim: 2\n", fp);
        fclose(fp);
    }
    calq_model *m = NULL;
    calq_status st = calq_model_load_caffe(proto, p, &m, err);
    calq_model_free(m);
    return st;
}

/* the file is read before the model is looked at, but calq_config_load requires one (calq.h) */
static calq_status read_config(const char *p, calq_error *err)
{
    calq_model *m = calib_test_model(err);
    if (!m) return err->status;
    calq_config *c = NULL;
    calq_status st = calq_config_load(m, p, &c, err);
    calq_config_free(c);
    calq_model_free(m);
    return st;
}

static calq_status read_npy(const char *p, calq_error *err)
{
    calq_tensor t;
    calq_status st = calq_npy_read(p, &t, err);
    if (st == CALQ_OK) calq_tensor_free_data(&t);
    return st;
}

static calq_status read_image(const char *p, calq_error *err)
{
    calq_tensor t;
    calq_status st = calq_image_load(p, NULL, &t, err);
    if (st == CALQ_OK) calq_tensor_free_data(&t);
    return st;
}

static const struct {
    const char *what;
    reader_fn fn;
    bool capped; /* refuses a 65 MiB text file */
} READERS[] = {
    {"record", read_record, true},          {"ONNX model", read_onnx, false}, {"Caffe prototxt", read_prototxt, true},
    {"caffemodel", read_caffemodel, false}, {"config", read_config, true},    {".npy file", read_npy, false},
    {"image", read_image, false},
};

static void test_not_regular(void)
{
    const char *paths[] = {"/dev/zero", fifo, dir};
    const char *kinds[] = {"a character device", "a FIFO (named pipe)", "a folder"};
    for (size_t r = 0; r < sizeof READERS / sizeof READERS[0]; r++) {
        for (int k = 0; k < 3; k++) {
            calq_error err = {0};
            calq_status st = READERS[r].fn(paths[k], &err);
            if (st == CALQ_OK || !strstr(err.message, kinds[k]) || !strstr(err.message, paths[k])) {
                fprintf(stderr, "  %s from %s: %s (%s)\n", READERS[r].what, paths[k], calq_status_name(st),
                        err.message);
                failures++;
            }
        }
    }
}

static void test_caps(void)
{
    for (size_t r = 0; r < sizeof READERS / sizeof READERS[0]; r++) {
        if (!READERS[r].capped) continue;
        calq_error err = {0};
        calq_status st = READERS[r].fn(sparse, &err);
        if (st != CALQ_ERR_IO || !strstr(err.message, "has 68157440 bytes, more than the 67108864")) {
            fprintf(stderr, "  %s of 65 MiB: %s (%s)\n", READERS[r].what, calq_status_name(st), err.message);
            failures++;
        }
    }
    /* the caps are a size check, not a read: a sparse 65 MiB file costs nothing */
    calq_error err = {0};
    char *buf = NULL;
    size_t n = 0;
    EXPECT_STATUS(calq__read_file_max(sparse, 1000, "a test file", &buf, &n, &err), CALQ_ERR_IO, &err,
                  "more than the 1000 calq reads as a test file");
    EXPECT(buf == NULL);
}

int main(void)
{
    alarm(60); /* a reader that waits on the FIFO fails the test instead of hanging it */
    snprintf(dir, sizeof dir, "/tmp/calq_limits_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    snprintf(fifo, sizeof fifo, "%s/pipe", dir);
    snprintf(sparse, sizeof sparse, "%s/huge.txt", dir);
    int fd = open(sparse, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (mkfifo(fifo, 0644) != 0 || fd < 0 || ftruncate(fd, 65 << 20) != 0) return 1;
    close(fd);
    test_not_regular();
    test_caps();
    char proto[160];
    snprintf(proto, sizeof proto, "%s/net.prototxt", dir);
    unlink(proto);
    unlink(fifo);
    unlink(sparse);
    rmdir(dir);
    if (failures) fprintf(stderr, "%d failure(s)\n", failures);
    return failures ? 1 : 0;
}
