/* Calibration data from the caller's next-batch callback (calq_data_open_stream): a Python
 * generator, a preprocessing pipeline. Each batch is asked for once, checked against the model
 * inputs, converted to their dtypes and appended to an unlinked temporary file (the spool);
 * every later read of it (IFMR's second pass, act_algo auto's evaluation pass, compare) comes
 * from the file. Memory is one batch whatever the number of batches; the disk holds them all
 * until calq_data_free, as a folder of .npy files would. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "base/tensor.h"
#include "calib/data.h"

calq_status calq_data_open_stream(calq_data_next_fn next, void *user, const char *label, calq_data **out,
                                  calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    if (!out) return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL, "calq_data_open_stream: out is NULL");
    *out = NULL;
    if (!next) return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL, "calq_data_open_stream: no next-batch callback");
    calq_data *d = NULL;
    CALQ_TRY(calq__data_new(CALQ_DATA_STREAM, 0, &d, err));
    d->spool.next = next;
    d->spool.user = user;
    d->spool.label = strdup(label && label[0] ? label : "the stream");
    if (!d->spool.label) {
        calq_data_free(d);
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory opening calibration data");
    }
    *out = d;
    return CALQ_OK;
}

void calq__data_stream_free(calq_data *d)
{
    calq_data_spool *s = &d->spool;
    if (s->file) fclose(s->file);
    for (int i = 0; s->in && i < s->n_inputs; i++) free((char *)s->in[i].name);
    free(s->in);
    free(s->label);
    memset(s, 0, sizeof *s);
}

void calq__data_stream_describe(const calq_data *d, char *buf, size_t n)
{
    const calq_data_spool *s = &d->spool;
    snprintf(buf, n, "%s: %d batch%s%s", s->label, s->n_batches, s->n_batches == 1 ? "" : "es",
             s->ended ? "" : " read so far");
}

static calq_dtype input_dtype(const calq_value_info *v)
{
    return v->dtype == CALQ_DTYPE_UNDEFINED ? CALQ_DTYPE_FLOAT32 : v->dtype;
}

/* The first batch fixes what every batch is checked against: the model's inputs. */
static calq_status adopt_inputs(calq_data_spool *s, const calq_value_info *inputs, int n_inputs, calq_error *err)
{
    s->in = calloc((size_t)n_inputs, sizeof *s->in);
    if (!s->in) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory reading %s", s->label);
    s->n_inputs = n_inputs;
    s->batch_bytes = 0;
    for (int i = 0; i < n_inputs; i++) {
        s->in[i] = inputs[i];
        s->in[i].dtype = input_dtype(&inputs[i]);
        s->in[i].name = strdup(inputs[i].name ? inputs[i].name : "");
        if (!s->in[i].name) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory reading %s", s->label);
        int64_t ne = calq__shape_numel(inputs[i].dims, inputs[i].ndim);
        if (ne < 0)
            return calq__fail(err, CALQ_ERR_SHAPE, NULL, "input '%s' has no fixed shape to read %s batches into",
                              s->in[i].name, s->label);
        s->batch_bytes += (size_t)ne * calq_dtype_size(s->in[i].dtype);
    }
    return CALQ_OK;
}

/* Later calls must be for the same inputs (shapes may not change under a spool). */
static calq_status same_inputs(const calq_data_spool *s, const calq_value_info *inputs, int n_inputs, calq_error *err)
{
    if (n_inputs != s->n_inputs)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL,
                          "%s was read for a model with %d input%s, not %d: open one stream per model", s->label,
                          s->n_inputs, s->n_inputs == 1 ? "" : "s", n_inputs);
    for (int i = 0; i < n_inputs; i++)
        if (input_dtype(&inputs[i]) != s->in[i].dtype ||
            !calq__shape_equal(inputs[i].dims, inputs[i].ndim, s->in[i].dims, s->in[i].ndim)) {
            char was[128], now[128];
            calq__shape_str(s->in[i].dims, s->in[i].ndim, was, sizeof was);
            calq__shape_str(inputs[i].dims, inputs[i].ndim, now, sizeof now);
            return calq__fail(err, CALQ_ERR_SHAPE, NULL,
                              "%s was read for input '%s' of shape %s %s, now asked for %s %s: the batches already "
                              "read keep their shape; open a new stream after changing the input shape",
                              s->label, s->in[i].name, was, calq_dtype_name(s->in[i].dtype), now,
                              calq_dtype_name(input_dtype(&inputs[i])));
        }
    return CALQ_OK;
}

static calq_status open_file(calq_data_spool *s, calq_error *err)
{
    const char *dir = getenv("TMPDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/calq_stream.XXXXXX", dir && dir[0] ? dir : "/tmp");
    int fd = mkstemp(path);
    if (fd < 0)
        return calq__fail(err, CALQ_ERR_IO, NULL,
                          "cannot create a temporary file for the batches of %s in %s: %s (set TMPDIR to a writable "
                          "folder)",
                          s->label, dir && dir[0] ? dir : "/tmp", strerror(errno));
    unlink(path); /* gone with the last descriptor, even if the process is killed */
    s->file = fdopen(fd, "w+b");
    if (!s->file) {
        close(fd);
        return calq__fail(err, CALQ_ERR_IO, NULL, "cannot open the temporary file of %s: %s", s->label,
                          strerror(errno));
    }
    return CALQ_OK;
}

/* Asks the callback for batch s->n_batches, checks it and appends it to the spool. */
static calq_status pull(calq_data *d, calq_error *err)
{
    calq_data_spool *s = &d->spool;
    int b = s->n_batches;
    calq_tensor *t = calloc((size_t)s->n_inputs, sizeof *t);
    if (!t) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory reading %s", s->label);
    int end = 0;
    calq_error cb = {0}; /* the callback always gets one, even when the caller passed err NULL */
    calq_status st = s->next(s->user, b, t, s->n_inputs, &end, &cb);
    if (st != CALQ_OK) {
        free(t);
        return calq__fail(err, st, cb.layer[0] ? cb.layer : NULL, "%s, batch %d: %s", s->label, b,
                          cb.message[0] ? cb.message : "the next-batch callback failed");
    }
    if (end) {
        s->ended = true;
        free(t);
        return CALQ_OK;
    }
    if (!s->file) st = open_file(s, err);
    if (st == CALQ_OK && fseeko(s->file, (off_t)b * (off_t)s->batch_bytes, SEEK_SET) != 0)
        st = calq__fail(err, CALQ_ERR_IO, NULL, "cannot seek in the temporary file of %s: %s", s->label,
                        strerror(errno));
    for (int i = 0; st == CALQ_OK && i < s->n_inputs; i++) {
        const calq_value_info *v = &s->in[i];
        char have[128], want[128];
        calq__shape_str(t[i].dims, t[i].ndim, have, sizeof have);
        calq__shape_str(v->dims, v->ndim, want, sizeof want);
        if (!t[i].data || t[i].ndim < 0 || t[i].ndim > CALQ_MAX_DIMS ||
            !calq__data_shape_fits(t[i].dims, t[i].ndim, v->dims, v->ndim))
            st = calq__fail(err, CALQ_ERR_SHAPE, NULL,
                            "%s, batch %d: input '%s' is %s %s%s but the model takes %s %s: give every batch the "
                            "input's shape (or fix the batch dim with the model's input shape)",
                            s->label, b, v->name, have, calq_dtype_name(t[i].dtype), t[i].data ? "" : " without data",
                            want, calq_dtype_name(v->dtype));
        else if (!calq__data_can_convert(t[i].dtype, v->dtype))
            st = calq__fail(err, CALQ_ERR_DATA, NULL,
                            "%s, batch %d: input '%s' has %s values but the model takes %s; calq converts only to "
                            "float inputs",
                            s->label, b, v->name, calq_dtype_name(t[i].dtype), calq_dtype_name(v->dtype));
        if (st != CALQ_OK) break;
        int64_t ne = calq__shape_numel(v->dims, v->ndim);
        size_t bytes = (size_t)ne * calq_dtype_size(v->dtype);
        if (bytes > d->buf_bytes) {
            void *grown = realloc(d->buf, bytes);
            if (!grown) {
                st = calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory for a batch of %s (%zu bytes)",
                                s->label, bytes);
                break;
            }
            d->buf = grown;
            d->buf_bytes = bytes;
        }
        char what[512];
        snprintf(what, sizeof what, "%s, batch %d, input '%s'", s->label, b, v->name);
        if ((st = calq__data_convert(t[i].data, t[i].dtype, d->buf, v->dtype, ne, what, err)) != CALQ_OK) break;
        if (fwrite(d->buf, 1, bytes, s->file) != bytes)
            st = calq__fail(err, CALQ_ERR_IO, NULL,
                            "cannot keep batch %d of %s in its temporary file (%zu bytes): %s (the disk of TMPDIR "
                            "holds every batch)",
                            b, s->label, s->batch_bytes, strerror(errno));
    }
    if (st == CALQ_OK && fflush(s->file) != 0) /* a full disk shows here, not at the read */
        st = calq__fail(err, CALQ_ERR_IO, NULL,
                        "cannot keep batch %d of %s in its temporary file (%zu bytes): %s (the disk of TMPDIR holds "
                        "every batch)",
                        b, s->label, s->batch_bytes, strerror(errno));
    free(t);
    if (st == CALQ_OK) s->n_batches++;
    return st;
}

calq_status calq__data_stream_check(calq_data *d, const calq_value_info *inputs, int n_inputs, int batch_num,
                                    calq_error *err)
{
    calq_data_spool *s = &d->spool;
    if (!s->in)
        CALQ_TRY(adopt_inputs(s, inputs, n_inputs, err));
    else
        CALQ_TRY(same_inputs(s, inputs, n_inputs, err));
    while (!s->ended && (batch_num == 0 || s->n_batches < batch_num)) CALQ_TRY(pull(d, err));
    if (s->n_batches == 0)
        return calq__fail(err, CALQ_ERR_DATA, NULL, "%s gave no batches, so there is no calibration data%s", s->label,
                          batch_num ? "" : " (batch_num 0: every batch)");
    if (s->n_batches < batch_num)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL,
                          "batch_num is %d but %s ended after %d batch%s.\n  Give more batches, or lower batch_num "
                          "(fewer batches may cost accuracy).",
                          batch_num, s->label, s->n_batches, s->n_batches == 1 ? "" : "es");
    return CALQ_OK;
}

calq_status calq__data_stream_read(calq_data *d, int batch, calq_tensor *inputs, int n_inputs, calq_error *err)
{
    /* calq_data_read_batch checked the tensors. Read before any check: they say what the inputs are. */
    calq_data_spool *s = &d->spool;
    if (!s->in) {
        calq_value_info *v = calloc((size_t)n_inputs, sizeof *v);
        if (!v) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory reading %s", s->label);
        for (int i = 0; i < n_inputs; i++) {
            v[i].name = "";
            v[i].dtype = inputs[i].dtype;
            v[i].ndim = inputs[i].ndim;
            memcpy(v[i].dims, inputs[i].dims, sizeof v[i].dims);
        }
        calq_status st = adopt_inputs(s, v, n_inputs, err);
        free(v);
        CALQ_TRY(st);
    } else if (n_inputs != s->n_inputs) {
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL, "the data feed %d input%s but %d tensors were given",
                          s->n_inputs, s->n_inputs == 1 ? "" : "s", n_inputs);
    }
    if (batch < 0) return calq__fail(err, CALQ_ERR_INDEX_OUT_OF_RANGE, NULL, "batch %d is not in %s", batch, s->label);
    while (batch >= s->n_batches && !s->ended) CALQ_TRY(pull(d, err));
    if (batch >= s->n_batches)
        return calq__fail(err, CALQ_ERR_INDEX_OUT_OF_RANGE, NULL, "batch %d is not in %s (it ended after %d)", batch,
                          s->label, s->n_batches);
    if (fseeko(s->file, (off_t)batch * (off_t)s->batch_bytes, SEEK_SET) != 0)
        return calq__fail(err, CALQ_ERR_IO, NULL, "cannot seek in the temporary file of %s: %s", s->label,
                          strerror(errno));
    for (int i = 0; i < n_inputs; i++) {
        const calq_value_info *v = &s->in[i];
        int64_t ne = calq__shape_numel(v->dims, v->ndim);
        if (calq_tensor_numel(&inputs[i]) != ne || !calq__data_can_convert(v->dtype, inputs[i].dtype))
            return calq__fail(err, CALQ_ERR_SHAPE, NULL,
                              "input tensor %d (%s, %lld values) does not fit the batches of %s (%s, %lld values)", i,
                              calq_dtype_name(inputs[i].dtype), (long long)calq_tensor_numel(&inputs[i]), s->label,
                              calq_dtype_name(v->dtype), (long long)ne);
        size_t bytes = (size_t)ne * calq_dtype_size(v->dtype);
        void *dst = v->dtype == inputs[i].dtype ? inputs[i].data : NULL;
        if (!dst) {
            if (bytes > d->buf_bytes) {
                void *grown = realloc(d->buf, bytes);
                if (!grown) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory reading %s", s->label);
                d->buf = grown;
                d->buf_bytes = bytes;
            }
            dst = d->buf;
        }
        if (fread(dst, 1, bytes, s->file) != bytes)
            return calq__fail(err, CALQ_ERR_IO, NULL, "cannot read batch %d of %s back from its temporary file: %s",
                              batch, s->label, ferror(s->file) ? strerror(errno) : "short read");
        if (dst != inputs[i].data)
            CALQ_TRY(calq__data_convert(dst, v->dtype, inputs[i].data, inputs[i].dtype, ne, s->label, err));
    }
    return CALQ_OK;
}
