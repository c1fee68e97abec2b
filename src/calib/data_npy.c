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

calq_status calq__data_npy_check(const calq_data *d, const calq_value_info *inputs, int n_batches, calq_error *err)
{
    /* Reads each file once, one at a time: memory stays that of one batch. */
    for (int i = 0; i < d->n_streams; i++)
        for (int k = 0; k < n_batches; k++) {
            calq_tensor a;
            CALQ_TRY(calq_npy_read(d->streams[i].files[k], &a, err));
            calq_status st = check_array(d->streams[i].files[k], &a, inputs[i].name, inputs[i].dtype, inputs[i].dims,
                                         inputs[i].ndim, err);
            calq_tensor_free_data(&a);
            CALQ_TRY(st);
        }
    return CALQ_OK;
}

calq_status calq__data_npy_read(calq_data *d, int batch, calq_tensor *inputs, calq_error *err)
{
    for (int i = 0; i < d->n_streams; i++) {
        const char *file = d->streams[i].files[batch];
        calq_tensor *t = &inputs[i];
        calq_tensor a;
        CALQ_TRY(calq_npy_read(file, &a, err));
        char name[32];
        snprintf(name, sizeof name, "#%d", i + 1);
        calq_status st = check_array(file, &a, name, t->dtype, t->dims, t->ndim, err);
        if (st == CALQ_OK) st = calq__data_convert(a.data, a.dtype, t->data, t->dtype, calq_tensor_numel(t), file, err);
        calq_tensor_free_data(&a);
        CALQ_TRY(st);
    }
    return CALQ_OK;
}
