/* Calibration data sources (src/calib/data*.c): AMCT's raw .bin folders (name order, float64
 * conversion, size checks), .npy folders and lists, photo folders, provenance strings, and the
 * preflight with its messages (amct-reference.md §1.2, docs user-journeys §2). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "calib/data.h"
#include "calib_model.h"
#include "calq.h"

#include "expect.h"
#include "fixtures.h"

static void write_bytes(const char *path, const void *b, size_t n)
{
    FILE *fp = fopen(path, "wb");
    if (!fp || fwrite(b, 1, n, fp) != n) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
    fclose(fp);
}

/* A float32 file of n values v0, v0+1, ... */
static void write_f32(const char *path, size_t n, float v0)
{
    float *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++) v[i] = v0 + (float)i;
    write_bytes(path, v, n * sizeof *v);
    free(v);
}

static void write_f64(const char *path, size_t n, double v0)
{
    double *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++) v[i] = v0 + (double)i + 0.25;
    write_bytes(path, v, n * sizeof *v);
    free(v);
}

static calq_value_info info(const char *name, int ndim, const int64_t *dims)
{
    calq_value_info v = {.name = name, .dtype = CALQ_DTYPE_FLOAT32, .ndim = ndim};
    for (int i = 0; i < ndim; i++) v.dims[i] = dims[i];
    return v;
}

static calq_tensor alloc_f32(const calq_value_info *v)
{
    calq_tensor t = {.dtype = CALQ_DTYPE_FLOAT32, .ndim = v->ndim};
    memcpy(t.dims, v->dims, sizeof t.dims);
    t.data = calloc((size_t)calq_tensor_numel(&t), sizeof(float));
    return t;
}

/* ---- .bin --------------------------------------------------------------------------------- */

static void test_bin_single(void)
{
    static const int64_t dims[] = {1, 2, 4, 4};
    calq_value_info in = info("x", 4, dims);
    mkdir("bin1", 0777);
    /* Written out of order; "10.bin" sorts before "9.bin" (byte order, as AMCT's sorted()). */
    write_f32("bin1/9.bin", 32, 900.0f);
    write_f32("bin1/10.bin", 32, 100.0f);
    write_f32("bin1/.hidden.bin", 32, 0.0f);
    write_bytes("bin1/README.txt", "not data", 8);
    calq_error err = {0};
    calq_data *d = NULL;
    EXPECT_STATUS(calq_data_open_bin("bin1/", NULL, &d, &err), CALQ_OK, &err, NULL);
    if (!d) return;
    EXPECT(calq_data_num_batches(d) == 2);
    char buf[256];
    EXPECT(strcmp(calq_data_batch_source(d, 0, buf, sizeof buf), "bin1/10.bin") == 0);
    EXPECT(strcmp(calq_data_batch_source(d, 1, buf, sizeof buf), "bin1/9.bin") == 0);
    EXPECT(strcmp(calq_data_sample_source(d, 1, 0, buf, sizeof buf), "bin1/9.bin, sample 0") == 0);
    calq_data_describe(d, buf, sizeof buf);
    EXPECT(strcmp(buf, "bin1/: 2 .bin files") == 0);
    EXPECT_STATUS(calq__data_preflight(d, &in, 1, 2, &err), CALQ_OK, &err, NULL);
    calq_tensor t = alloc_f32(&in);
    EXPECT_STATUS(calq_data_read_batch(d, 0, &t, 1, &err), CALQ_OK, &err, NULL);
    EXPECT(((float *)t.data)[0] == 100.0f && ((float *)t.data)[31] == 131.0f);
    EXPECT_STATUS(calq_data_read_batch(d, 1, &t, 1, &err), CALQ_OK, &err, NULL);
    EXPECT(((float *)t.data)[0] == 900.0f && ((float *)t.data)[5] == 905.0f);
    EXPECT_STATUS(calq_data_read_batch(d, 2, &t, 1, &err), CALQ_ERR_INDEX_OUT_OF_RANGE, &err, "batch 2");
    calq_data_free(d);

    /* float64 data for a float32 input: converted. */
    mkdir("bin64", 0777);
    write_f64("bin64/a.bin", 32, 1.0);
    EXPECT_STATUS(calq_data_open_bin("bin64", "float64", &d, &err), CALQ_OK, &err, NULL);
    if (d) {
        EXPECT_STATUS(calq__data_preflight(d, &in, 1, 1, &err), CALQ_OK, &err, NULL);
        EXPECT_STATUS(calq_data_read_batch(d, 0, &t, 1, &err), CALQ_OK, &err, NULL);
        EXPECT(((float *)t.data)[0] == 1.25f && ((float *)t.data)[31] == 32.25f);
        EXPECT(strcmp(calq_data_batch_source(d, 0, buf, sizeof buf), "bin64/a.bin") == 0);
        calq_data_free(d);
    }
    /* The same float64 files read as float32 (the --data_types default): wrong size, with a hint. */
    EXPECT_STATUS(calq_data_open_bin("bin64", NULL, &d, &err), CALQ_OK, &err, NULL);
    if (d) {
        EXPECT_STATUS(calq__data_preflight(d, &in, 1, 1, &err), CALQ_ERR_DATA, &err,
                      "bin64/a.bin is 256 bytes but one batch of input 'x' (1x2x4x4 float32) is 128 bytes: each file "
                      "must hold exactly one batch");
        EXPECT(strstr(err.message, "It is the size of float64 data: set --data_types to float64"));
        /* Reading without the preflight reports it too. */
        EXPECT_STATUS(calq_data_read_batch(d, 0, &t, 1, &err), CALQ_ERR_DATA, &err, "bin64/a.bin is 256 bytes");
        calq_data_free(d);
    }
    /* A file of the wrong size among the batches used. */
    write_bytes("bin1/11.bin", "0123456789", 10);
    EXPECT_STATUS(calq_data_open_bin("bin1/", NULL, &d, &err), CALQ_OK, &err, NULL);
    if (d) {
        EXPECT_STATUS(calq__data_preflight(d, &in, 1, 2, &err), CALQ_ERR_DATA, &err,
                      "bin1/11.bin is 10 bytes but one batch of input 'x' (1x2x4x4 float32) is 128 bytes");
        calq_data_free(d);
    }
    free(t.data);
}

static void test_bin_preflight_message(void)
{
    /* The user-journey example, word for word (docs/user-journeys.md §2). */
    static const int64_t dims[] = {16, 3, 48, 48};
    calq_value_info in = info("data", 4, dims);
    mkdir("calib", 0777);
    write_f32("calib/0000.bin", 16 * 3 * 48 * 48, 0.0f);
    calq_error err = {0};
    calq_data *d = NULL;
    EXPECT_STATUS(calq_data_open_bin("calib/", "float32", &d, &err), CALQ_OK, &err, NULL);
    if (!d) return;
    EXPECT_STATUS(calq__data_preflight(d, &in, 1, 2, &err), CALQ_ERR_BAD_PARAMETERS, &err, NULL);
    EXPECT(strcmp(err.message, "batch_num is 2 but calib/ holds 1 batch (1 file of 16x3x48x48 float32 = 442368 "
                               "bytes).\n  Add calibration batches, or lower --batch_num (fewer batches may cost "
                               "accuracy).") == 0);
    if (failures) fprintf(stderr, "got: %s\n", err.message);
    EXPECT_STATUS(calq__data_preflight(d, &in, 1, 1, &err), CALQ_OK, &err, NULL);
    /* 0: every batch the data hold (0.3; calq_data_open_stream's callers ask for "all") */
    EXPECT_STATUS(calq__data_preflight(d, &in, 1, 0, &err), CALQ_OK, &err, NULL);
    EXPECT_STATUS(calq__data_preflight(d, &in, 1, -1, &err), CALQ_ERR_BAD_PARAMETERS, &err,
                  "batch_num is -1; it must be > 0");
    /* A dynamic batch dim cannot be checked: the user must fix it. */
    calq_value_info dyn = in;
    dyn.dims[0] = -1;
    EXPECT_STATUS(calq__data_preflight(d, &dyn, 1, 1, &err), CALQ_ERR_SHAPE, &err,
                  "input 'data' has a dynamic shape (?x3x48x48, ? = unknown)");
    calq_data_free(d);
    /* Three batches for batch_num 4: plural, "each". */
    write_f32("calib/0001.bin", 16 * 3 * 48 * 48, 0.0f);
    write_f32("calib/0002.bin", 16 * 3 * 48 * 48, 0.0f);
    EXPECT_STATUS(calq_data_open_bin("calib/", NULL, &d, &err), CALQ_OK, &err, NULL);
    if (d) {
        EXPECT_STATUS(calq__data_preflight(d, &in, 1, 4, &err), CALQ_ERR_BAD_PARAMETERS, &err,
                      "batch_num is 4 but calib/ holds 3 batches (3 files of 16x3x48x48 float32 = 442368 bytes each)");
        calq_data_free(d);
    }
    /* An empty folder. */
    mkdir("empty", 0777);
    EXPECT_STATUS(calq_data_open_bin("empty/", NULL, &d, &err), CALQ_OK, &err, NULL);
    if (d) {
        EXPECT(calq_data_num_batches(d) == 0);
        EXPECT_STATUS(calq__data_preflight(d, &in, 1, 1, &err), CALQ_ERR_DATA, &err,
                      "empty/ holds no .bin files, so there is no calibration data for input 'data' (batch_num is 1)");
        calq_data_free(d);
    }
    /* A folder that does not exist, an empty --data_dir, a type list of the wrong length, an
     * unknown type. */
    EXPECT_STATUS(calq_data_open_bin("nowhere/", NULL, &d, &err), CALQ_ERR_IO, &err,
                  "--data_dir: cannot open the folder nowhere/");
    EXPECT(d == NULL);
    EXPECT_STATUS(calq_data_open_bin(" ; ", NULL, &d, &err), CALQ_ERR_BAD_PARAMETERS, &err, "--data_dir is empty");
    EXPECT_STATUS(calq_data_open_bin("calib/", "float32;float32", &d, &err), CALQ_ERR_BAD_PARAMETERS, &err,
                  "--data_types lists 2 types but --data_dir lists 1 folder");
    EXPECT_STATUS(calq_data_open_bin("calib/", "float", &d, &err), CALQ_ERR_BAD_PARAMETERS, &err,
                  "--data_types: 'float' (for calib/) is not a data type calq reads");
}

static void test_bin_two_inputs(calq_model *m)
{
    /* The test model: x [1,2,4,4] and y [1,3]. */
    mkdir("dx", 0777);
    mkdir("dy", 0777);
    write_f32("dx/0000.bin", 32, 0.0f);
    write_f32("dx/0001.bin", 32, 1000.0f);
    write_f64("dy/0000.bin", 3, 10.0);
    write_f64("dy/0001.bin", 3, 20.0);
    calq_error err = {0};
    calq_data *d = NULL;
    EXPECT_STATUS(calq_data_open_bin("dx/;dy/", "float32;float64", &d, &err), CALQ_OK, &err, NULL);
    if (!d) return;
    EXPECT_STATUS(calq_data_check(d, m, 2, &err), CALQ_OK, &err, NULL);
    char buf[256];
    EXPECT(strcmp(calq_data_batch_source(d, 1, buf, sizeof buf), "dx/0001.bin + dy/0001.bin") == 0);
    EXPECT(strcmp(calq_data_sample_source(d, 1, 0, buf, sizeof buf), "dx/0001.bin + dy/0001.bin, sample 0") == 0);
    calq_value_info ix, iy;
    calq_model_input_info(m, 0, &ix);
    calq_model_input_info(m, 1, &iy);
    calq_tensor t[2] = {alloc_f32(&ix), alloc_f32(&iy)};
    EXPECT_STATUS(calq_data_read_batch(d, 1, t, 2, &err), CALQ_OK, &err, NULL);
    EXPECT(((float *)t[0].data)[3] == 1003.0f && ((float *)t[1].data)[2] == 22.25f);
    EXPECT_STATUS(calq_data_read_batch(d, 1, t, 1, &err), CALQ_ERR_BAD_PARAMETERS, &err,
                  "the data feed 2 inputs but 1 tensors were given");
    EXPECT_STATUS(calq_data_check(d, m, 3, &err), CALQ_ERR_BAD_PARAMETERS, &err,
                  "batch_num is 3 but dx/ and dy/ hold 2 batches");
    calq_data_free(d);
    /* Batch counts that differ across inputs. */
    write_f64("dy/0002.bin", 3, 30.0);
    EXPECT_STATUS(calq_data_open_bin("dx/;dy/", "float32;float64", &d, &err), CALQ_OK, &err, NULL);
    if (d) {
        EXPECT_STATUS(calq_data_check(d, m, 1, &err), CALQ_ERR_DATA, &err,
                      "the inputs' data differ in batch count: dx/ (input 'x') holds 2 .bin files, dy/ (input 'y') "
                      "holds 3");
        calq_data_free(d);
    }
    /* One folder for a two-input model. */
    EXPECT_STATUS(calq_data_open_bin("dx/", NULL, &d, &err), CALQ_OK, &err, NULL);
    if (d) {
        EXPECT_STATUS(calq_data_check(d, m, 1, &err), CALQ_ERR_BAD_PARAMETERS, &err,
                      "the calibration data cover 1 input but the model has 2 (x, y)");
        calq_data_free(d);
    }
    /* Integer data for a float input are converted; float data for an int input are refused. */
    calq_value_info iv = ix;
    iv.dtype = CALQ_DTYPE_INT64;
    EXPECT_STATUS(calq_data_open_bin("dx/", "float32", &d, &err), CALQ_OK, &err, NULL);
    if (d) {
        EXPECT_STATUS(calq__data_preflight(d, &iv, 1, 1, &err), CALQ_ERR_DATA, &err,
                      "dx/ holds float32 data (--data_types) but input 'x' is int64");
        calq_data_free(d);
    }
    free(t[0].data);
    free(t[1].data);
}

/* ---- .npy --------------------------------------------------------------------------------- */

static void write_npy(const char *path, calq_dtype dtype, int ndim, const int64_t *dims, double v0)
{
    calq_tensor t = {.dtype = dtype, .ndim = ndim};
    memcpy(t.dims, dims, (size_t)ndim * sizeof *dims);
    int64_t n = calq_tensor_numel(&t);
    t.data = calloc((size_t)n, calq_dtype_size(dtype));
    for (int64_t i = 0; i < n; i++) {
        if (dtype == CALQ_DTYPE_FLOAT64)
            ((double *)t.data)[i] = v0 + (double)i;
        else
            ((float *)t.data)[i] = (float)v0 + (float)i;
    }
    calq_error err = {0};
    if (calq_npy_write(path, &t, &err) != CALQ_OK) {
        fprintf(stderr, "%s\n", err.message);
        exit(1);
    }
    free(t.data);
}

static void test_npy(void)
{
    static const int64_t dims[] = {1, 2, 4, 4}, chw[] = {2, 4, 4}, wrong[] = {1, 2, 4, 5};
    calq_value_info in = info("x", 4, dims);
    mkdir("npy", 0777);
    write_npy("npy/b.npy", CALQ_DTYPE_FLOAT64, 4, dims, 50.0);
    write_npy("npy/a.npy", CALQ_DTYPE_FLOAT32, 3, chw, 7.0); /* leading 1 left out */
    calq_error err = {0};
    calq_data *d = NULL;
    EXPECT_STATUS(calq_data_open_npy("npy", &d, &err), CALQ_OK, &err, NULL);
    if (!d) return;
    EXPECT(calq_data_num_batches(d) == 2);
    EXPECT_STATUS(calq__data_preflight(d, &in, 1, 2, &err), CALQ_OK, &err, NULL);
    calq_tensor t = alloc_f32(&in);
    EXPECT_STATUS(calq_data_read_batch(d, 0, &t, 1, &err), CALQ_OK, &err, NULL);
    EXPECT(((float *)t.data)[0] == 7.0f && ((float *)t.data)[31] == 38.0f);
    EXPECT_STATUS(calq_data_read_batch(d, 1, &t, 1, &err), CALQ_OK, &err, NULL);
    EXPECT(((float *)t.data)[1] == 51.0f);
    char buf[256];
    EXPECT(strcmp(calq_data_sample_source(d, 1, 0, buf, sizeof buf), "npy/b.npy, sample 0") == 0);
    EXPECT_STATUS(calq__data_preflight(d, &in, 1, 3, &err), CALQ_ERR_BAD_PARAMETERS, &err,
                  "batch_num is 3 but npy holds 2 batches (2 .npy files of 1x2x4x4).\n  Add calibration batches");
    calq_data_free(d);
    /* An explicit list, in the order given; a wrong shape is named with both shapes. */
    write_npy("npy_wrong.npy", CALQ_DTYPE_FLOAT32, 4, wrong, 0.0);
    EXPECT_STATUS(calq_data_open_npy("npy/b.npy, npy/a.npy,npy_wrong.npy", &d, &err), CALQ_OK, &err, NULL);
    if (d) {
        EXPECT(calq_data_num_batches(d) == 3);
        EXPECT(strcmp(calq_data_batch_source(d, 0, buf, sizeof buf), "npy/b.npy") == 0);
        EXPECT_STATUS(calq__data_preflight(d, &in, 1, 2, &err), CALQ_OK, &err, NULL);
        EXPECT_STATUS(calq__data_preflight(d, &in, 1, 3, &err), CALQ_ERR_SHAPE, &err,
                      "npy_wrong.npy holds a 1x2x4x5 float32 array but input 'x' takes 1x2x4x4 float32");
        calq_data_free(d);
    }
    /* float64 values beyond float32's range became inf: refused, naming the file and the element */
    double big[32] = {0};
    big[5] = -1e300;
    calq_tensor bt = {.dtype = CALQ_DTYPE_FLOAT64, .ndim = 4, .dims = {1, 2, 4, 4}, .data = big};
    EXPECT_STATUS(calq_npy_write("npy_big.npy", &bt, &err), CALQ_OK, &err, NULL);
    EXPECT_STATUS(calq_data_open_npy("npy_big.npy", &d, &err), CALQ_OK, &err, NULL);
    if (d) {
        EXPECT_STATUS(calq_data_read_batch(d, 0, &t, 1, &err), CALQ_ERR_DATA, &err,
                      "npy_big.npy: element 5 is -1e+300, beyond the largest float32 (3.40282e+38), so it would "
                      "become -inf");
        calq_data_free(d);
    }
    mkdir("bin_big", 0777);
    big[5] = 0;
    big[31] = 1e39;
    write_bytes("bin_big/a.bin", big, sizeof big);
    EXPECT_STATUS(calq_data_open_bin("bin_big", "float64", &d, &err), CALQ_OK, &err, NULL);
    if (d) {
        EXPECT_STATUS(calq_data_read_batch(d, 0, &t, 1, &err), CALQ_ERR_DATA, &err,
                      "bin_big/a.bin: element 31 is 1e+39, beyond the largest float32");
        calq_data_free(d);
    }
    EXPECT_STATUS(calq_data_open_npy("no_such_dir", &d, &err), CALQ_ERR_IO, &err, "no_such_dir");
    /* A file named in a list that does not exist is reported at the preflight. */
    EXPECT_STATUS(calq_data_open_npy("npy/a.npy,gone.npy", &d, &err), CALQ_OK, &err, NULL);
    if (d) {
        EXPECT(calq__data_preflight(d, &in, 1, 2, &err) != CALQ_OK && strstr(err.message, "gone.npy"));
        calq_data_free(d);
    }
    free(t.data);
}

/* ---- images ------------------------------------------------------------------------------- */

static void test_images(void)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/data/faces", fx_shared());
    if (!NEED_FILE(dir)) return;
    static const int64_t dims[] = {2, 3, 24, 32};
    calq_value_info in = info("input", 4, dims);
    calq_image_opts o;
    calq_image_opts_init(&o);
    o.width = 32;
    o.height = 24;
    o.mean[0] = o.mean[1] = o.mean[2] = 127.0f;
    o.std[0] = o.std[1] = o.std[2] = 128.0f;
    calq_error err = {0};
    calq_data *d = NULL;
    EXPECT_STATUS(calq_data_open_images(dir, &o, 2, &d, &err), CALQ_OK, &err, NULL);
    if (!d) return;
    /* 13 photos at 2 per batch: 6 batches, the 13th unused. */
    EXPECT(d->streams[0].n_files == 13 && calq_data_num_batches(d) == 6);
    char buf[2048], want[2048];
    snprintf(want, sizeof want, "%s/mtcnn_test1.jpg..%s/mtcnn_test2.jpg", dir, dir);
    EXPECT(strcmp(calq_data_batch_source(d, 0, buf, sizeof buf), want) == 0);
    snprintf(want, sizeof want, "%s/ultraface_10.jpg", dir); /* name order: _10 before _2 */
    EXPECT(strcmp(calq_data_sample_source(d, 1, 1, buf, sizeof buf), want) == 0);
    EXPECT_STATUS(calq__data_preflight(d, &in, 1, 6, &err), CALQ_OK, &err, NULL);
    EXPECT_STATUS(calq__data_preflight(d, &in, 1, 7, &err), CALQ_ERR_BAD_PARAMETERS, &err,
                  "holds 6 batches (13 images, 2 per batch for input 'input' 2x3x24x32).\n  Add calibration images, "
                  "or lower --batch_num");
    calq_tensor t = alloc_f32(&in);
    EXPECT_STATUS(calq_data_read_batch(d, 1, &t, 1, &err), CALQ_OK, &err, NULL);
    /* Slot k of batch 1 is image 2 + k, preprocessed exactly as calq_image_load does it. */
    for (int k = 0; k < 2; k++) {
        calq_tensor one;
        EXPECT_STATUS(calq_image_load(d->streams[0].files[2 + k], &o, &one, &err), CALQ_OK, &err, NULL);
        size_t plane = 3 * 24 * 32;
        EXPECT(one.data && memcmp((float *)t.data + (size_t)k * plane, one.data, plane * sizeof(float)) == 0);
        calq_tensor_free_data(&one);
    }
    calq_data_free(d);

    /* Without --resize, sizes must already fit. */
    EXPECT_STATUS(calq_data_open_images(dir, NULL, 2, &d, &err), CALQ_OK, &err, NULL);
    if (d) {
        snprintf(want, sizeof want,
                 "%s/mtcnn_test1.jpg is 450x344 but input 'input' takes 32x24 images (W x H): add "
                 "--resize 32x24",
                 dir);
        EXPECT_STATUS(calq__data_preflight(d, &in, 1, 1, &err), CALQ_ERR_SHAPE, &err, want);
        calq_data_free(d);
    }
    /* The batch size must be the input's dim 0; a resize that misses the input's size. */
    EXPECT_STATUS(calq_data_open_images(dir, &o, 1, &d, &err), CALQ_OK, &err, NULL);
    if (d) {
        EXPECT_STATUS(calq__data_preflight(d, &in, 1, 1, &err), CALQ_ERR_SHAPE, &err,
                      "so a batch is 2 images, but the image data were opened with 1 per batch");
        calq_data_free(d);
    }
    o.width = 30;
    EXPECT_STATUS(calq_data_open_images(dir, &o, 2, &d, &err), CALQ_OK, &err, NULL);
    if (d) {
        EXPECT_STATUS(calq__data_preflight(d, &in, 1, 1, &err), CALQ_ERR_SHAPE, &err,
                      "--resize 30x24 makes 30x24 images but input 'input' (2x3x24x32) takes 32x24 (W x H)");
        calq_data_free(d);
    }
    o.width = 32;
    /* A file that is not an image, named; an empty folder. */
    mkdir("photos", 0777);
    write_bytes("photos/a.jpg", "this is not a JPEG", 18);
    write_bytes("photos/b.png", "nor is this a PNG", 17);
    EXPECT_STATUS(calq_data_open_images("photos", &o, 2, &d, &err), CALQ_OK, &err, NULL);
    if (d) {
        EXPECT_STATUS(calq__data_preflight(d, &in, 1, 1, &err), CALQ_ERR_BAD_FORMAT, &err,
                      "photos/a.jpg: not a readable image");
        EXPECT_STATUS(calq_data_read_batch(d, 0, &t, 1, &err), CALQ_ERR_BAD_FORMAT, &err, "photos/a.jpg");
        calq_data_free(d);
    }
    /* Decompression bombs (issue: "unknown image type"): PNG headers declaring 100000 x 100000
     * RGB pixels, or 11000 x 11000 (under the pixel cap) in a file of a few bytes, are refused
     * before stb_image decodes anything, naming the size. */
    {
        static const unsigned char png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0,    13,
                                            'I',  'H', 'D', 'R', 0,    1,    0x86, 0xa0, 0, 1, 0x86, 0xa0,
                                            8,    2,   0,   0,   0,    0,    0,    0,    0, 0};
        unsigned char b[sizeof png];
        mkdir("bombs", 0777);
        write_bytes("bombs/a.png", (const char *)png, sizeof png);
        write_bytes("bombs/b.png", (const char *)png, sizeof png);
        EXPECT_STATUS(calq_data_open_images("bombs", &o, 2, &d, &err), CALQ_OK, &err, NULL);
        if (d) {
            EXPECT_STATUS(calq__data_preflight(d, &in, 1, 1, &err), CALQ_ERR_BAD_FORMAT, &err,
                          "bombs/a.png: the PNG declares 100000x100000 pixels (30000100000 bytes decoded) in a file of "
                          "34 bytes, more than calq decodes");
            calq_data_free(d);
        }
        memcpy(b, png, sizeof b);
        b[18] = b[22] = 0x2a; /* 0x00002af8 = 11000 */
        b[17] = b[21] = 0;
        b[19] = b[23] = 0xf8;
        write_bytes("bombs/a.png", (const char *)b, sizeof b);
        write_bytes("bombs/b.png", (const char *)b, sizeof b);
        EXPECT_STATUS(calq_data_open_images("bombs", &o, 2, &d, &err), CALQ_OK, &err, NULL);
        if (d) {
            EXPECT_STATUS(calq__data_preflight(d, &in, 1, 1, &err), CALQ_ERR_BAD_FORMAT, &err,
                          "the PNG declares 11000x11000 pixels (363011000 bytes decoded) in a file of 34 bytes, more "
                          "than its compressed data can hold");
            calq_data_free(d);
        }
    }
    mkdir("nophotos", 0777);
    EXPECT_STATUS(calq_data_open_images("nophotos", &o, 2, &d, &err), CALQ_OK, &err, NULL);
    if (d) {
        EXPECT_STATUS(calq__data_preflight(d, &in, 1, 1, &err), CALQ_ERR_DATA, &err,
                      "nophotos holds no images (JPEG, PNG or BMP files)");
        calq_data_free(d);
    }
    /* Images feed one input only. */
    calq_value_info two[2] = {in, in};
    EXPECT_STATUS(calq_data_open_images(dir, &o, 2, &d, &err), CALQ_OK, &err, NULL);
    if (d) {
        EXPECT_STATUS(calq__data_preflight(d, two, 2, 1, &err), CALQ_ERR_BAD_PARAMETERS, &err,
                      "a folder of images feeds a model with one input, but this model has 2 inputs");
        calq_data_free(d);
    }
    EXPECT_STATUS(calq_data_open_images(dir, &o, 0, &d, &err), CALQ_ERR_BAD_PARAMETERS, &err, "images per batch is 0");
    free(t.data);
}

/* A 24-bit BMP of w x h pixels, pixel (x, y) (y = 0 the top row) RGB = (10 x + 1, 20 y + 2, 40 + x + y), rows
 * padded to 4 bytes: bottom row first as usual, or with top_down the top row first, which the header says with a
 * negative height. Written by hand so the layout the test checks is the one the BMP format defines. */
static void write_bmp(const char *path, int w, int h, bool top_down)
{
    int row = (w * 3 + 3) / 4 * 4;
    size_t n = 54 + (size_t)row * (size_t)h;
    unsigned char *b = calloc(n, 1);
    int32_t hdr_h = top_down ? -h : h;
    uint32_t v[13] = {(uint32_t)n, 0,    54, 40, (uint32_t)w, (uint32_t)hdr_h, 1u | 24u << 16, 0, (uint32_t)(row * h),
                      2835,        2835, 0,  0};
    b[0] = 'B';
    b[1] = 'M';
    for (int i = 0; i < 13; i++)
        for (int k = 0; k < 4; k++) b[2 + 4 * i + k] = (unsigned char)(v[i] >> (8 * k));
    for (int y = 0; y < h; y++) {
        unsigned char *r = b + 54 + (size_t)row * (size_t)(top_down ? y : h - 1 - y);
        for (int x = 0; x < w; x++) {
            r[3 * x + 0] = (unsigned char)(40 + x + y); /* BMP stores B, G, R */
            r[3 * x + 1] = (unsigned char)(20 * y + 2);
            r[3 * x + 2] = (unsigned char)(10 * x + 1);
        }
    }
    write_bytes(path, b, n);
    free(b);
}

/* Image headers the probe of 12-06 found misread: a top-down BMP (negative height) was refused
 * as "8x-8 pixels, more than the 134217728 calq decodes", a 0x0 image got the same "more than",
 * and a truncated PNG or an image-less GIF failed with an empty reason "()". */
static void test_image_headers(void)
{
    calq_error err = {0};
    calq_tensor up, down;
    /* 3 x 2: rows of 9 bytes padded to 12, so a wrong row order or stride shows */
    write_bmp("up.bmp", 3, 2, false);
    write_bmp("down.bmp", 3, 2, true);
    EXPECT_STATUS(calq_image_load("up.bmp", NULL, &up, &err), CALQ_OK, &err, NULL);
    EXPECT_STATUS(calq_image_load("down.bmp", NULL, &down, &err), CALQ_OK, &err, NULL);
    if (up.data && down.data) {
        EXPECT(down.ndim == 4 && down.dims[1] == 3 && down.dims[2] == 2 && down.dims[3] == 3);
        EXPECT(memcmp(up.data, down.data, 3 * 2 * 3 * sizeof(float)) == 0);
        const float *px = down.data;
        for (int y = 0; y < 2; y++)
            for (int x = 0; x < 3; x++) {
                EXPECT(px[0 * 6 + y * 3 + x] == (float)(10 * x + 1));
                EXPECT(px[1 * 6 + y * 3 + x] == (float)(20 * y + 2));
                EXPECT(px[2 * 6 + y * 3 + x] == (float)(40 + x + y));
            }
    }
    calq_tensor_free_data(&up);
    calq_tensor_free_data(&down);
    calq_tensor t;
    write_bmp("zero.bmp", 0, 0, false);
    EXPECT_STATUS(calq_image_load("zero.bmp", NULL, &t, &err), CALQ_ERR_BAD_FORMAT, &err,
                  "zero.bmp: the BMP has no pixels (its header says 0x0)");
    write_bmp("zero_w.bmp", 0, 5, true);
    EXPECT_STATUS(calq_image_load("zero_w.bmp", NULL, &t, &err), CALQ_ERR_BAD_FORMAT, &err,
                  "zero_w.bmp: the BMP has no pixels (its header says 0x5)");
    /* a 2 x 2 RGB PNG: signature, IHDR, IDAT, with IEND cut off (the data complete) */
    static const unsigned char png[] = {0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49,
                                        0x48, 0x44, 0x52, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x02, 0x08, 0x02,
                                        0x00, 0x00, 0x00, 0xfd, 0xd4, 0x9a, 0x73, 0x00, 0x00, 0x00, 0x11, 0x49, 0x44,
                                        0x41, 0x54, 0x78, 0x9c, 0x63, 0x60, 0x60, 0x64, 0x62, 0x66, 0x61, 0x65, 0x80,
                                        0x50, 0x00, 0x00, 0xbd, 0x00, 0x1f, 0xd7, 0x95, 0x90, 0x43};
    write_bytes("trunc.png", png, sizeof png);
    EXPECT_STATUS(calq_image_load("trunc.png", NULL, &t, &err), CALQ_ERR_BAD_FORMAT, &err,
                  "trunc.png: cannot decode the PNG (truncated or unsupported file)");
    unsigned char zero[sizeof png];
    memcpy(zero, png, sizeof zero);
    memset(zero + 16, 0, 8); /* IHDR's width and height */
    write_bytes("zero.png", zero, sizeof zero);
    EXPECT_STATUS(calq_image_load("zero.png", NULL, &t, &err), CALQ_ERR_BAD_FORMAT, &err,
                  "zero.png: the PNG has no pixels (its header declares 0x0)");
    /* JPEGs whose frame header (SOF0, after a JFIF APP0 segment) declares 8 x 0 and 0 x 5 pixels: stb_image
     * refuses the header ("no header height", "0 width") and then reports the last format it tried, so
     * they were "not a readable JPEG (stb_image refuses its header ...)" where BMP and PNG have no pixels */
    unsigned char jpeg[] = {0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10, 'J',  'F',  'I',  'F',  0x00, 0x01, 0x01, 0x00,
                            0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0xff, 0xc0, 0x00, 0x11, 0x08, 0x00, 0x00, 0x00,
                            0x08, 0x03, 0x01, 0x11, 0x00, 0x02, 0x11, 0x01, 0x03, 0x11, 0x01, 0xff, 0xd9};
    write_bytes("zero_h.jpg", jpeg, sizeof jpeg);
    EXPECT_STATUS(calq_image_load("zero_h.jpg", NULL, &t, &err), CALQ_ERR_BAD_FORMAT, &err,
                  "zero_h.jpg: the JPEG has no pixels (its header says 8x0)");
    jpeg[26] = 0x05; /* height 5 */
    jpeg[28] = 0x00; /* width 0 */
    write_bytes("zero_w.jpg", jpeg, sizeof jpeg);
    EXPECT_STATUS(calq_image_load("zero_w.jpg", NULL, &t, &err), CALQ_ERR_BAD_FORMAT, &err,
                  "zero_w.jpg: the JPEG has no pixels (its header says 0x5)");
    /* a GIF's header and trailer with no image in between */
    write_bytes("empty.gif", "GIF89a\x01\x00\x01\x00\x00\x00\x00;", 14);
    EXPECT_STATUS(calq_image_load("empty.gif", NULL, &t, &err), CALQ_ERR_BAD_FORMAT, &err,
                  "empty.gif: cannot decode the GIF (truncated or unsupported file)");
}

int main(void)
{
    char tmpdir[] = "/tmp/calq_data_XXXXXX";
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
    test_bin_single();
    test_bin_preflight_message();
    test_bin_two_inputs(m);
    test_npy();
    test_images();
    test_image_headers();
    calq_model_free(m);
    if (chdir(cwd) != 0) return 1;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    if (failures)
        fprintf(stderr, "test_calib_data: %d failure(s)\n", failures);
    else
        printf("test_calib_data: all passed\n");
    return TEST_RESULT();
}
