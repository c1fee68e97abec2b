/* Calibration data as .npy files: per model input (separated by ';') a folder of .npy files
 * read in name order, one file, or a list of files separated by ','. Each file is one batch:
 * an array of the input's shape (leading dims of 1 may be left out or added, so a [3,H,W]
 * array feeds a [1,3,H,W] input). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/error.h"
#include "base/tensor.h"
#include "calib/data.h"

static const char *const NPY_EXTS[] = {".npy", NULL};

static calq_status add_entry(calq_data_stream *s, const char *entry, calq_error *err)
{
    if (strchr(entry, ',')) {
        char **files = NULL;
        int n = calq__data_split(entry, ',', &files);
        if (n < 0) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
        calq_status st = CALQ_OK;
        for (int i = 0; i < n && st == CALQ_OK; i++) st = calq__data_add_file(s, files[i], err);
        free(files);
        return st;
    }
    struct stat sb;
    if (stat(entry, &sb) != 0)
        return calq__fail(err, CALQ_ERR_IO, NULL, "cannot find the .npy data %s: %s", entry, strerror(errno));
    if (S_ISDIR(sb.st_mode)) return calq__data_list_dir(s, entry, NPY_EXTS, ".npy data", err);
    return calq__data_add_file(s, entry, err);
}

calq_status calq_data_open_npy(const char *spec, calq_data **out, calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, out);
    *out = NULL;
    char **entries = NULL;
    int n = calq__data_split(spec ? spec : "", ';', &entries);
    if (n < 0) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    if (n == 0) {
        free(entries);
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL,
                          "no .npy data given: name one folder (or a list of .npy files) per model input");
    }
    calq_data *d = NULL;
    calq_status st = calq__data_new(CALQ_DATA_NPY, n, &d, err);
    for (int i = 0; st == CALQ_OK && i < n; i++) {
        d->streams[i].label = strdup(entries[i]);
        st = d->streams[i].label ? add_entry(&d->streams[i], entries[i], err)
                                 : calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    }
    free(entries);
    if (st != CALQ_OK) {
        calq_data_free(d);
        return st;
    }
    *out = d;
    return CALQ_OK;
}

/* Checks an array read from `file` against input `name` (dims, dtype). */
static calq_status check_array(const char *file, const calq_tensor *a, const char *name, calq_dtype dtype,
                               const int64_t *dims, int ndim, calq_error *err)
{
    char have[128], want[128];
    calq__shape_str(a->dims, a->ndim, have, sizeof have);
    calq__shape_str(dims, ndim, want, sizeof want);
    if (!calq__data_shape_fits(a->dims, a->ndim, dims, ndim))
        return calq__fail(err, CALQ_ERR_SHAPE, NULL,
                          "%s holds a %s %s array but input '%s' takes %s %s: each .npy file holds one batch of the "
                          "input's shape (fix the file, or the batch dim with --input_shape)",
                          file, have, calq_dtype_name(a->dtype), name, want, calq_dtype_name(dtype));
    if (!calq__data_can_convert(a->dtype, dtype))
        return calq__fail(err, CALQ_ERR_DATA, NULL,
                          "%s holds %s values but input '%s' is %s; calq converts only to "
                          "float inputs",
                          file, calq_dtype_name(a->dtype), name, calq_dtype_name(dtype));
    return CALQ_OK;
}

/* The array fits dims but for dims in `free` (bits of dims the model leaves unknown), which
 * it may hold at any size; right-aligned, a left-out leading dim counts as 1. */
static bool fits_free(const calq_tensor *a, const int64_t *dims, int ndim, unsigned free)
{
    int lead = ndim - a->ndim;
    if (lead < 0 || a->ndim < 1) return false;
    for (int k = 0; k < ndim; k++) {
        int64_t have = k < lead ? 1 : a->dims[k - lead];
        if (have != dims[k] && (!((free >> k) & 1u) || have <= 0)) return false;
    }
    return true;
}

calq_status calq__data_npy_check(calq_data *d, const calq_value_info *inputs, int n_batches, calq_error *err)
{
    /* Reads each file once, one at a time: memory stays that of one batch. */
    d->shapes_vary = false;
    for (int i = 0; i < d->n_streams; i++)
        for (int k = 0; k < n_batches; k++) {
            calq_tensor a;
            CALQ_TRY(calq_npy_read(d->streams[i].files[k], &a, err));
            const calq_value_info *in = &inputs[i];
            calq_status st = CALQ_OK;
            if (!calq__data_shape_fits(a.dims, a.ndim, in->dims, in->ndim) &&
                fits_free(&a, in->dims, in->ndim, d->streams[i].free_dims))
                d->shapes_vary = true; /* read at its own shape (calq__data_read_batch_resize) */
            else
                st = check_array(d->streams[i].files[k], &a, in->name, in->dtype, in->dims, in->ndim, err);
            if (st == CALQ_OK && !calq__data_can_convert(a.dtype, in->dtype))
                st = check_array(d->streams[i].files[k], &a, in->name, in->dtype, a.dims, a.ndim, err);
            calq_tensor_free_data(&a);
            CALQ_TRY(st);
        }
    return CALQ_OK;
}

/* Gives t the array's shape (right-aligned into t's rank), reallocating its data. */
static calq_status take_shape(calq_tensor *t, const calq_tensor *a, calq_error *err)
{
    int lead = t->ndim - a->ndim;
    int64_t dims[CALQ_MAX_DIMS];
    for (int k = 0; k < t->ndim; k++) dims[k] = k < lead ? 1 : a->dims[k - lead];
    if (calq__shape_equal(dims, t->ndim, t->dims, t->ndim)) return CALQ_OK;
    int64_t n = calq__shape_numel(dims, t->ndim);
    void *p = realloc(t->data, (size_t)(n > 0 ? n : 1) * calq_dtype_size(t->dtype));
    if (!p) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory for a %lld-value batch", (long long)n);
    t->data = p;
    memcpy(t->dims, dims, sizeof(int64_t) * (size_t)t->ndim);
    return CALQ_OK;
}

calq_status calq__data_npy_read(calq_data *d, int batch, calq_tensor *inputs, bool resize, calq_error *err)
{
    for (int i = 0; i < d->n_streams; i++) {
        const char *file = d->streams[i].files[batch];
        calq_tensor *t = &inputs[i];
        calq_tensor a;
        CALQ_TRY(calq_npy_read(file, &a, err));
        char name[32];
        snprintf(name, sizeof name, "#%d", i + 1);
        calq_status st = CALQ_OK;
        if (resize && d->shapes_vary && !calq__data_shape_fits(a.dims, a.ndim, t->dims, t->ndim) &&
            fits_free(&a, t->dims, t->ndim, d->streams[i].free_dims))
            st = take_shape(t, &a, err);
        if (st == CALQ_OK) st = check_array(file, &a, name, t->dtype, t->dims, t->ndim, err);
        if (st == CALQ_OK) st = calq__data_convert(a.data, a.dtype, t->data, t->dtype, calq_tensor_numel(t), file, err);
        calq_tensor_free_data(&a);
        CALQ_TRY(st);
    }
    return CALQ_OK;
}
