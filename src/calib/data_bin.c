/* AMCT's raw calibration folders (amct-reference.md §1.2): --data_dir "d1/;d2/" holds one
 * folder per model input, each file one batch of raw (native little-endian) values of the
 * --data_types entry for that folder, read in ascending name order. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/error.h"
#include "base/file.h"
#include "base/tensor.h"
#include "calib/data.h"

static const char *const BIN_EXTS[] = {".bin", NULL};

static calq_dtype dtype_by_name(const char *s)
{
    for (int t = CALQ_DTYPE_FLOAT32; t <= CALQ_DTYPE_BOOL; t++)
        if (strcmp(s, calq_dtype_name((calq_dtype)t)) == 0) return (calq_dtype)t;
    return CALQ_DTYPE_UNDEFINED;
}

calq_status calq_data_open_bin(const char *data_dir, const char *data_types, calq_data **out, calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, out);
    *out = NULL;
    char **dirs = NULL, **types = NULL;
    int n_dirs = calq__data_split(data_dir ? data_dir : "", ';', &dirs);
    int n_types = data_types ? calq__data_split(data_types, ';', &types) : 0;
    calq_data *d = NULL;
    calq_status st = CALQ_OK;
    if (n_dirs < 0 || n_types < 0) {
        st = calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    } else if (n_dirs == 0) {
        st = calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL,
                        "--data_dir is empty: give one folder of .bin files per model input, e.g. \"calib/\"");
    } else if (n_types > 0 && n_types != n_dirs) {
        st = calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL,
                        "--data_types lists %d type%s but --data_dir lists %d folder%s: give one type per folder, in "
                        "the same order (e.g. \"float32;float64\")",
                        n_types, n_types == 1 ? "" : "s", n_dirs, n_dirs == 1 ? "" : "s");
    } else {
        st = calq__data_new(CALQ_DATA_BIN, n_dirs, &d, err);
    }
    for (int i = 0; st == CALQ_OK && i < n_dirs; i++) {
        calq_data_stream *s = &d->streams[i];
        if (n_types > 0) {
            s->dtype = dtype_by_name(types[i]);
            if (s->dtype == CALQ_DTYPE_UNDEFINED || s->dtype == CALQ_DTYPE_BOOL) {
                st = calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL,
                                "--data_types: '%s' (for %s) is not a data type calq reads; use float32, float64, "
                                "float16, int8, uint8, int16, uint16, int32, uint32, int64 or uint64",
                                types[i], dirs[i]);
                break;
            }
        }
        s->label = strdup(dirs[i]);
        if (!s->label) {
            st = calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
            break;
        }
        st = calq__data_list_dir(s, dirs[i], BIN_EXTS, "--data_dir", err);
    }
    free(dirs);
    free(types);
    if (st != CALQ_OK) {
        calq_data_free(d);
        return st;
    }
    *out = d;
    return CALQ_OK;
}

/* Why a file has the wrong size, when the size tells (another dtype, several batches). */
static void size_hint(long long have, int64_t numel, calq_dtype dtype, char *buf, size_t n)
{
    buf[0] = 0;
    size_t es = calq_dtype_size(dtype);
    if (numel <= 0) return;
    if (dtype == CALQ_DTYPE_FLOAT32 && have == numel * 8)
        snprintf(buf, n, " It is the size of float64 data: set --data_types to float64 for this folder.");
    else if (dtype == CALQ_DTYPE_FLOAT64 && have == numel * 4)
        snprintf(buf, n, " It is the size of float32 data: set --data_types to float32 for this folder.");
    else if (have > 0 && (unsigned long long)have % ((unsigned long long)numel * es) == 0)
        snprintf(buf, n, " It holds %lld batches' worth: is the batch dim (n) of --input_shape right?",
                 have / (long long)((unsigned long long)numel * es));
}

static calq_status wrong_size(const char *file, long long have, const calq_value_info *in, calq_dtype dtype,
                              calq_error *err)
{
    char shape[128], hint[256];
    int64_t numel = calq__shape_numel(in->dims, in->ndim);
    size_hint(have, numel, dtype, hint, sizeof hint);
    return calq__fail(err, CALQ_ERR_DATA, NULL,
                      "%s is %lld bytes but one batch of input '%s' (%s %s) is %llu bytes: each file must hold "
                      "exactly one batch (AMCT's --data_dir format, amct-reference.md §1.2); check --input_shape and "
                      "--data_types.%s",
                      file, have, in->name, calq__data_shape(in, shape, sizeof shape), calq_dtype_name(dtype),
                      (unsigned long long)numel * calq_dtype_size(dtype), hint);
}

calq_status calq__data_bin_check(const calq_data *d, const calq_value_info *inputs, int n_batches, calq_error *err)
{
    for (int i = 0; i < d->n_streams; i++) {
        const calq_data_stream *s = &d->streams[i];
        const calq_value_info *in = &inputs[i];
        if (!calq__data_can_convert(s->dtype, in->dtype))
            return calq__fail(err, CALQ_ERR_DATA, NULL,
                              "%s holds %s data (--data_types) but input '%s' is %s, and calq converts only to float "
                              "inputs: set --data_types to %s for this folder",
                              s->label, calq_dtype_name(s->dtype), in->name, calq_dtype_name(in->dtype),
                              calq_dtype_name(in->dtype));
        unsigned long long want = (unsigned long long)calq__shape_numel(in->dims, in->ndim) * calq_dtype_size(s->dtype);
        for (int k = 0; k < n_batches; k++) {
            struct stat sb;
            if (stat(s->files[k], &sb) != 0)
                return calq__fail(err, CALQ_ERR_IO, NULL, "cannot read %s: %s", s->files[k], strerror(errno));
            if (!S_ISREG(sb.st_mode))
                return calq__fail(err, CALQ_ERR_IO, NULL,
                                  "cannot read %s as a .bin data file: it is not a regular file (a folder, FIFO or "
                                  "device); calq reads only regular files",
                                  s->files[k]);
            if ((unsigned long long)sb.st_size != want)
                return wrong_size(s->files[k], (long long)sb.st_size, in, s->dtype, err);
        }
    }
    return CALQ_OK;
}

calq_status calq__data_bin_read(calq_data *d, int batch, calq_tensor *inputs, calq_error *err)
{
    for (int i = 0; i < d->n_streams; i++) {
        const calq_data_stream *s = &d->streams[i];
        calq_tensor *t = &inputs[i];
        const char *file = s->files[batch];
        if (!calq__data_can_convert(s->dtype, t->dtype))
            return calq__fail(err, CALQ_ERR_DATA, NULL, "%s: cannot convert %s data to a %s input", file,
                              calq_dtype_name(s->dtype), calq_dtype_name(t->dtype));
        int64_t numel = calq_tensor_numel(t);
        size_t bytes = (size_t)numel * calq_dtype_size(s->dtype);
        FILE *fp;
        size_t fsize;
        CALQ_TRY(calq__open_regular(file, SIZE_MAX, "a .bin data file", &fp, &fsize, err));
        struct stat sb;
        if (fstat(fileno(fp), &sb) != 0 || (unsigned long long)sb.st_size != bytes) {
            long long have = fstat(fileno(fp), &sb) == 0 ? (long long)sb.st_size : -1;
            fclose(fp);
            char name[32];
            snprintf(name, sizeof name, "#%d", i + 1);
            calq_value_info in = {.name = name, .dtype = t->dtype, .ndim = t->ndim};
            memcpy(in.dims, t->dims, sizeof in.dims);
            return wrong_size(file, have, &in, s->dtype, err);
        }
        /* Same type: straight into the caller's tensor; otherwise through the reused buffer. */
        void *dst = t->data;
        if (s->dtype != t->dtype) {
            if (d->buf_bytes < bytes) {
                void *grown = realloc(d->buf, bytes);
                if (!grown) {
                    fclose(fp);
                    return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory reading %s", file);
                }
                d->buf = grown;
                d->buf_bytes = bytes;
            }
            dst = d->buf;
        }
        size_t got = bytes ? fread(dst, 1, bytes, fp) : 0;
        int failed = ferror(fp);
        fclose(fp);
        if (got != bytes || failed)
            return calq__fail(err, CALQ_ERR_IO, NULL, "%s: read %zu of %zu bytes", file, got, bytes);
        if (dst != t->data) CALQ_TRY(calq__data_convert(d->buf, s->dtype, t->data, t->dtype, numel, file, err));
    }
    return CALQ_OK;
}
