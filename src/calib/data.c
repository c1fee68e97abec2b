/* Calibration data sources: the parts every kind shares (file lists, provenance strings,
 * dtype conversion) and the preflight that runs before any inference. */
#include "calib/data.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/error.h"
#include "base/npy.h"
#include "base/tensor.h"

/* ---- construction ------------------------------------------------------------------------- */

calq_status calq__data_new(calq_data_kind kind, int n_streams, calq_data **out, calq_error *err)
{
    *out = NULL;
    calq_data *d = calloc(1, sizeof *d);
    if (d) d->streams = calloc((size_t)(n_streams > 0 ? n_streams : 1), sizeof *d->streams);
    if (!d || !d->streams) {
        free(d);
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory opening calibration data");
    }
    d->kind = kind;
    d->n_streams = n_streams;
    for (int i = 0; i < n_streams; i++) d->streams[i].dtype = CALQ_DTYPE_FLOAT32;
    calq_image_opts_init(&d->image_opts);
    *out = d;
    return CALQ_OK;
}

void calq_data_free(calq_data *d)
{
    if (!d) return;
    for (int i = 0; i < d->n_streams; i++) {
        calq_data_stream *s = &d->streams[i];
        for (int k = 0; k < s->n_files; k++) free(s->files[k]);
        free(s->files);
        free(s->label);
    }
    free(d->streams);
    free(d->buf);
    calq__data_stream_free(d);
    free(d);
}

int calq__data_split(const char *spec, char sep, char ***items)
{
    *items = NULL;
    size_t len = strlen(spec);
    int cap = 1;
    for (size_t i = 0; i < len; i++) cap += spec[i] == sep;
    /* One block: the pointer array, then a copy of spec cut into items in place. */
    char **v = malloc((size_t)cap * sizeof *v + len + 1);
    if (!v) return -1;
    char *text = (char *)(v + cap);
    memcpy(text, spec, len + 1);
    int n = 0;
    char *p = text;
    for (;;) {
        char *end = strchr(p, sep);
        if (end) *end = 0;
        while (isspace((unsigned char)*p)) p++;
        size_t k = strlen(p);
        while (k > 0 && isspace((unsigned char)p[k - 1])) p[--k] = 0;
        if (*p) v[n++] = p;
        if (!end) break;
        p = end + 1;
    }
    *items = v;
    return n;
}

bool calq__data_has_ext(const char *name, const char *const *exts)
{
    size_t n = strlen(name);
    for (int i = 0; exts[i]; i++) {
        size_t k = strlen(exts[i]);
        if (n <= k) continue;
        bool same = true;
        for (size_t j = 0; j < k && same; j++)
            same = tolower((unsigned char)name[n - k + j]) == tolower((unsigned char)exts[i][j]);
        if (same) return true;
    }
    return false;
}

calq_status calq__data_add_file(calq_data_stream *s, const char *path, calq_error *err)
{
    char **grown = realloc(s->files, ((size_t)s->n_files + 1) * sizeof *grown);
    char *copy = strdup(path);
    if (!grown || !copy) {
        if (grown) s->files = grown;
        free(copy);
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory listing calibration files");
    }
    s->files = grown;
    s->files[s->n_files++] = copy;
    return CALQ_OK;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

calq_status calq__data_list_dir(calq_data_stream *s, const char *dir, const char *const *exts, const char *what,
                                calq_error *err)
{
    DIR *dp = opendir(dir);
    if (!dp)
        return calq__fail(err, CALQ_ERR_IO, NULL, "%s: cannot open the folder %s: %s%s", what, dir, strerror(errno),
                          errno == ENOTDIR ? " (it takes one folder per model input)" : "");
    size_t dlen = strlen(dir);
    bool slash = dlen > 0 && dir[dlen - 1] == '/';
    int first = s->n_files;
    calq_status st = CALQ_OK;
    for (struct dirent *e = readdir(dp); e && st == CALQ_OK; e = readdir(dp)) {
        if (e->d_name[0] == '.' || !calq__data_has_ext(e->d_name, exts)) continue;
        size_t n = dlen + strlen(e->d_name) + 2;
        char *path = malloc(n);
        if (!path) {
            st = calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory listing %s", dir);
            break;
        }
        snprintf(path, n, "%s%s%s", dir, slash ? "" : "/", e->d_name);
        struct stat sb;
        if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) st = calq__data_add_file(s, path, err);
        free(path);
    }
    closedir(dp);
    /* Paths share the folder prefix, so ordering the paths orders the names. */
    if (st == CALQ_OK && s->n_files - first > 1)
        qsort(s->files + first, (size_t)(s->n_files - first), sizeof *s->files, cmp_names);
    return st;
}

/* ---- conversion --------------------------------------------------------------------------- */

bool calq__data_can_convert(calq_dtype st, calq_dtype dt)
{
    if (st == dt) return st != CALQ_DTYPE_UNDEFINED;
    return st != CALQ_DTYPE_UNDEFINED && st != CALQ_DTYPE_BOOL && calq__dtype_is_float(dt);
}

/* A finite value the conversion made infinite: 1e300 in a float64 file became inf in float32 and
 * calibrated a range of inf without a word. */
static calq_status overflowed(const calq_tensor *from, const calq_tensor *to, int64_t i, const char *what,
                              calq_error *err)
{
    double v = calq__tensor_get_f64(from, i);
    return calq__fail(err, CALQ_ERR_DATA, NULL,
                      "%s: element %lld is %g, beyond the largest %s (%g), so it would become %sinf; scale the data "
                      "into the input's range or fix the file",
                      what, (long long)i, v, calq_dtype_name(to->dtype),
                      to->dtype == CALQ_DTYPE_FLOAT16 ? 65504.0 : (double)FLT_MAX, v < 0 ? "-" : "");
}

calq_status calq__data_convert(const void *src, calq_dtype st, void *dst, calq_dtype dt, int64_t n, const char *what,
                               calq_error *err)
{
    if (!calq__data_can_convert(st, dt))
        return calq__fail(err, CALQ_ERR_INTERNAL, NULL, "%s: cannot convert %s values to %s", what, calq_dtype_name(st),
                          calq_dtype_name(dt));
    if (st == dt) {
        memcpy(dst, src, (size_t)n * calq_dtype_size(st));
        return CALQ_OK;
    }
    calq_tensor from = {.dtype = st, .ndim = 1, .dims = {n}, .data = (void *)src};
    calq_tensor to = {.dtype = dt, .ndim = 1, .dims = {n}, .data = dst};
    if (st == CALQ_DTYPE_FLOAT64 && dt == CALQ_DTYPE_FLOAT32) {
        /* The common case (AMCT's float64 data for a float32 model), without the generic path. */
        const double *s = src;
        float *d = dst;
        for (int64_t i = 0; i < n; i++) {
            d[i] = (float)s[i];
            if (isinf(d[i]) && isfinite(s[i])) return overflowed(&from, &to, i, what, err);
        }
        return CALQ_OK;
    }
    for (int64_t i = 0; i < n; i++) {
        double v = calq__tensor_get_f64(&from, i);
        calq__tensor_set_f64(&to, i, v);
        if (isfinite(v) && !isfinite(calq__tensor_get_f64(&to, i))) return overflowed(&from, &to, i, what, err);
    }
    return CALQ_OK;
}

bool calq__data_shape_fits(const int64_t *a, int na, const int64_t *b, int nb)
{
    int i = 0, j = 0;
    while (i < na - 1 && a[i] == 1) i++;
    while (j < nb - 1 && b[j] == 1) j++;
    return calq__shape_equal(a + i, na - i, b + j, nb - j);
}

const char *calq__data_shape(const calq_value_info *v, char *buf, size_t n)
{
    return calq__shape_str(v->dims, v->ndim, buf, n);
}

/* ---- public accessors --------------------------------------------------------------------- */

int calq_data_num_batches(const calq_data *d)
{
    if (!d) return -1; /* as the other accessors of a NULL object (calq.h) */
    if (d->kind == CALQ_DATA_STREAM) return d->spool.n_batches;
    if (d->n_streams == 0) return 0;
    if (d->kind == CALQ_DATA_IMAGES) return d->batch_size > 0 ? d->streams[0].n_files / d->batch_size : 0;
    int n = d->streams[0].n_files;
    for (int i = 1; i < d->n_streams; i++)
        if (d->streams[i].n_files < n) n = d->streams[i].n_files;
    return n;
}

static const char *kind_files(const calq_data *d)
{
    switch (d->kind) {
    case CALQ_DATA_BIN: return ".bin files";
    case CALQ_DATA_NPY: return ".npy files";
    case CALQ_DATA_IMAGES: return "images";
    case CALQ_DATA_STREAM: return "batches";
    }
    return "files";
}

void calq_data_describe(const calq_data *d, char *buf, size_t n)
{
    size_t at = 0;
    if (n == 0 || !buf) return; /* snprintf's contract: n 0 writes nothing, not even the terminator */
    buf[0] = 0;
    if (!d) return; /* nothing to describe: "" */
    if (d->kind == CALQ_DATA_STREAM) {
        calq__data_stream_describe(d, buf, n);
        return;
    }
    for (int i = 0; i < d->n_streams && at < n; i++)
        at += (size_t)snprintf(buf + at, n - at, "%s%s: %d %s", i ? "; " : "", d->streams[i].label,
                               d->streams[i].n_files, kind_files(d));
    if (d->kind == CALQ_DATA_IMAGES && at < n)
        snprintf(buf + at, n - at, " (%d batch%s of %d)", calq_data_num_batches(d),
                 calq_data_num_batches(d) == 1 ? "" : "es", d->batch_size);
}

const char *calq_data_batch_source(const calq_data *d, int batch, char *buf, size_t n)
{
    if (n == 0 || !buf) return buf; /* as calq_data_describe */
    buf[0] = 0;
    if (!d) return buf;
    if (batch < 0 || batch >= calq_data_num_batches(d)) {
        snprintf(buf, n, "batch %d (not in the data)", batch);
        return buf;
    }
    if (d->kind == CALQ_DATA_STREAM) {
        snprintf(buf, n, "%s, batch %d", d->spool.label, batch);
        return buf;
    }
    if (d->kind == CALQ_DATA_IMAGES) {
        const calq_data_stream *s = &d->streams[0];
        int first = batch * d->batch_size, last = first + d->batch_size - 1;
        if (first == last)
            snprintf(buf, n, "%s", s->files[first]);
        else
            snprintf(buf, n, "%s..%s", s->files[first], s->files[last]);
        return buf;
    }
    size_t at = 0;
    for (int i = 0; i < d->n_streams && at < n; i++)
        at += (size_t)snprintf(buf + at, n - at, "%s%s", i ? " + " : "", d->streams[i].files[batch]);
    return buf;
}

const char *calq_data_sample_source(const calq_data *d, int batch, int sample, char *buf, size_t n)
{
    if (n == 0 || !buf) return buf; /* as calq_data_describe */
    buf[0] = 0;
    if (!d) return buf;
    if (d->kind == CALQ_DATA_IMAGES && batch >= 0 && batch < calq_data_num_batches(d) && sample >= 0 &&
        sample < d->batch_size) {
        snprintf(buf, n, "%s", d->streams[0].files[batch * d->batch_size + sample]);
        return buf;
    }
    char src[2048];
    calq_data_batch_source(d, batch, src, sizeof src);
    snprintf(buf, n, "%s, sample %d", src, sample);
    return buf;
}

/* ---- preflight ---------------------------------------------------------------------------- */

static const char REMEDY[] = "Add calibration batches, or lower --batch_num (fewer batches may cost accuracy).";

/* "calib/" or "d1/, d2/" and the verb to go with it. */
static void stream_labels(const calq_data *d, char *buf, size_t n, const char **verb)
{
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < d->n_streams && at < n; i++)
        at += (size_t)snprintf(buf + at, n - at, "%s%s", i ? (i + 1 == d->n_streams ? " and " : ", ") : "",
                               d->streams[i].label);
    *verb = d->n_streams > 1 ? "hold" : "holds";
}

static calq_status too_few(const calq_data *d, const calq_value_info *in, int have, int batch_num, calq_error *err)
{
    char labels[1024], shape[128];
    const char *verb;
    stream_labels(d, labels, sizeof labels, &verb);
    calq__data_shape(&in[0], shape, sizeof shape);
    const char *batches = have == 1 ? "batch" : "batches";
    if (d->kind == CALQ_DATA_BIN) {
        const calq_data_stream *s = &d->streams[0];
        int64_t numel = calq__shape_numel(in[0].dims, in[0].ndim);
        unsigned long long bytes = (unsigned long long)numel * calq_dtype_size(s->dtype);
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL,
                          "batch_num is %d but %s %s %d %s (%d file%s of %s %s = %llu bytes%s%s).\n  %s", batch_num,
                          labels, verb, have, batches, have, have == 1 ? "" : "s", shape, calq_dtype_name(s->dtype),
                          bytes, have == 1 ? "" : " each", d->n_streams > 1 ? " for the first input" : "", REMEDY);
    }
    if (d->kind == CALQ_DATA_NPY)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL,
                          "batch_num is %d but %s %s %d %s (%d .npy file%s of %s%s).\n  %s", batch_num, labels, verb,
                          have, batches, have, have == 1 ? "" : "s", shape,
                          d->n_streams > 1 ? " for the first input" : "", REMEDY);
    int n_img = d->streams[0].n_files;
    return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL,
                      "batch_num is %d but %s %s %d %s (%d image%s, %d per batch for input '%s' %s).\n  Add "
                      "calibration images, or lower --batch_num (fewer batches may cost accuracy).",
                      batch_num, labels, verb, have, batches, n_img, n_img == 1 ? "" : "s", d->batch_size, in[0].name,
                      shape);
}

calq_status calq__data_preflight(calq_data *d, const calq_value_info *inputs, int n_inputs, int batch_num,
                                 calq_error *err)
{
    if (batch_num < 0)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL,
                          "batch_num is %d; it must be > 0 (amct-reference.md §7.2), or 0 for every batch of the data",
                          batch_num);
    if (n_inputs <= 0)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL, "the model has no inputs to feed calibration data to");
    if (d->kind == CALQ_DATA_STREAM) {
        /* the shapes must be fixed (below) before the stream is read */
    } else if (d->kind == CALQ_DATA_IMAGES) {
        if (n_inputs != 1)
            return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL,
                              "a folder of images feeds a model with one input, but this model has %d inputs; give "
                              "one --data_dir folder (or .npy files) per input instead",
                              n_inputs);
    } else if (d->n_streams != n_inputs) {
        char names[1024];
        size_t at = 0;
        names[0] = 0;
        for (int i = 0; i < n_inputs && at < sizeof names; i++)
            at += (size_t)snprintf(names + at, sizeof names - at, "%s%s", i ? ", " : "", inputs[i].name);
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL,
                          "the calibration data cover %d input%s but the model has %d (%s): give one folder (or .npy "
                          "list) per input, in this order, separated by ';' (e.g. --data_dir \"d1/;d2/\")",
                          d->n_streams, d->n_streams == 1 ? "" : "s", n_inputs, names);
    }
    for (int i = 0; i < n_inputs; i++) {
        const calq_value_info *v = &inputs[i];
        bool fixed = v->ndim >= 0;
        for (int k = 0; k < v->ndim && fixed; k++) fixed = v->dims[k] >= 0;
        if (!fixed) {
            char shape[128];
            calq__data_shape(v, shape, sizeof shape);
            return calq__fail(err, CALQ_ERR_SHAPE, NULL,
                              "input '%s' has a dynamic shape (%s, ? = unknown): the size of a calibration batch "
                              "depends on it; fix it with --input_shape \"%s:n,c,h,w\"",
                              v->name, shape, v->name);
        }
    }
    for (int i = 0; i < d->n_streams; i++)
        if (d->streams[i].n_files == 0) {
            const calq_data_stream *s = &d->streams[i];
            if (d->kind == CALQ_DATA_IMAGES)
                return calq__fail(err, CALQ_ERR_DATA, NULL,
                                  "%s holds no images (JPEG, PNG or BMP files), so there is no calibration data "
                                  "(batch_num is %d)",
                                  s->label, batch_num);
            return calq__fail(err, CALQ_ERR_DATA, NULL,
                              "%s holds no %s, so there is no calibration data for input '%s' (batch_num is %d).\n"
                              "  Put one %s file per batch there, read in name order%s",
                              s->label, kind_files(d), inputs[i].name, batch_num,
                              d->kind == CALQ_DATA_BIN ? "raw" : ".npy",
                              d->kind == CALQ_DATA_BIN ? " (AMCT's --data_dir format, amct-reference.md §1.2)." : ".");
        }
    if (d->kind != CALQ_DATA_IMAGES)
        for (int i = 1; i < d->n_streams; i++)
            if (d->streams[i].n_files != d->streams[0].n_files)
                return calq__fail(err, CALQ_ERR_DATA, NULL,
                                  "the inputs' data differ in batch count: %s (input '%s') holds %d %s, %s (input "
                                  "'%s') holds %d. Batch i is file i of every input's folder, so each needs the same "
                                  "number of files",
                                  d->streams[0].label, inputs[0].name, d->streams[0].n_files, kind_files(d),
                                  d->streams[i].label, inputs[i].name, d->streams[i].n_files);
    if (d->kind == CALQ_DATA_STREAM) return calq__data_stream_check(d, inputs, n_inputs, batch_num, err);
    int have = calq_data_num_batches(d);
    if (batch_num == 0) batch_num = have; /* every batch; none at all was refused above */
    int n_check = have < batch_num ? have : batch_num;
    switch (d->kind) {
    case CALQ_DATA_BIN: CALQ_TRY(calq__data_bin_check(d, inputs, n_check, err)); break;
    case CALQ_DATA_NPY: CALQ_TRY(calq__data_npy_check(d, inputs, n_check, err)); break;
    case CALQ_DATA_IMAGES: CALQ_TRY(calq__data_images_check(d, inputs, n_check, err)); break;
    case CALQ_DATA_STREAM: break;
    }
    if (have < batch_num) return too_few(d, inputs, have, batch_num, err);
    return CALQ_OK;
}

/* .npy data describe themselves: the first file's array gives every dim input `in` leaves
 * unknown (a text recogniser's ?-wide line, ?xCxHxW), and dim 0 when it holds another batch of
 * the same per-sample shape. Right-aligned, so a left-out leading dim counts as 1. Leaves `in`
 * as it is when the array does not fit it (the preflight reports that). */
static void npy_dims(const char *file, calq_value_info *in)
{
    calq_tensor a;
    calq_error e = {0};
    if (calq_npy_read(file, &a, &e) != CALQ_OK) return;
    int lead = in->ndim - a.ndim;
    int64_t dims[CALQ_MAX_DIMS];
    bool fits = a.ndim >= 1 && lead >= 0;
    for (int k = 0; k < in->ndim && fits; k++) {
        int64_t have = k < lead ? 1 : a.dims[k - lead];
        bool free_dim = in->dims[k] < 0 || (k == 0 && lead == 0);
        dims[k] = free_dim ? have : in->dims[k];
        fits = have > 0 && dims[k] == have;
    }
    if (fits) memcpy(in->dims, dims, (size_t)in->ndim * sizeof dims[0]);
    calq_tensor_free_data(&a);
}

/* The batch the first file of stream i holds when it is not input `in`'s fixed dim 0 but the
 * rest of its shape is in's; 0 when it holds in's shape (or cannot tell). */
static int64_t other_batch_bin(const calq_data *d, int i, const calq_value_info *in)
{
    /* a dynamic batch dim (?xCxHxW) takes the data's too: only the data can say it */
    const char *file = d->streams[i].files[0];
    int64_t per = calq__shape_numel(in->dims + 1, in->ndim - 1), b = 0;
    if (per <= 0) return 0;
    struct stat st;
    size_t es = calq_dtype_size(d->streams[i].dtype);
    if (es && stat(file, &st) == 0 && st.st_size > 0 && (uint64_t)st.st_size % ((uint64_t)per * es) == 0)
        b = (int64_t)((uint64_t)st.st_size / ((uint64_t)per * es));
    return b > 0 && b != in->dims[0] ? b : 0;
}

/* Photos feed N x 3 x H x W: a dynamic N is the images per batch, a dynamic H or W the --resize
 * size, else the first photo's (the preflight then wants every photo that size). */
static void image_dims(const calq_data *d, calq_value_info *in)
{
    if (in->dims[0] < 0) in->dims[0] = d->batch_size;
    if (in->dims[1] < 0) in->dims[1] = 3;
    if (in->dims[2] >= 0 && in->dims[3] >= 0) return;
    int w = d->image_opts.width, h = d->image_opts.height;
    if (!w || !h) {
        FILE *fp;
        calq_error e = {0};
        if (calq__image_open(d->streams[0].files[0], &fp, &w, &h, &e) != CALQ_OK) return; /* the preflight says why */
        fclose(fp);
    }
    if (in->dims[2] < 0) in->dims[2] = h;
    if (in->dims[3] < 0) in->dims[3] = w;
}

/* The shape stream i's batches feed input `in` at (see calq_data_input_info). */
static void data_dims(const calq_data *d, int i, calq_value_info *in)
{
    if (i >= d->n_streams || d->streams[i].n_files == 0 || in->ndim < 1 || in->ndim > CALQ_MAX_DIMS) return;
    if (d->kind == CALQ_DATA_NPY) {
        npy_dims(d->streams[i].files[0], in);
    } else if (d->kind == CALQ_DATA_BIN) {
        int64_t b = other_batch_bin(d, i, in);
        if (b > 0) in->dims[0] = b;
    } else if (d->kind == CALQ_DATA_IMAGES && in->ndim == 4) {
        image_dims(d, in);
    }
}

calq_status calq__data_input_shapes(const calq_data *d, const calq_model *m, calq_value_info *in, int n)
{
    for (int i = 0; i < n; i++) CALQ_TRY(calq_data_input_info(d, m, i, &in[i], NULL));
    return CALQ_OK;
}

calq_status calq_data_input_info(const calq_data *d, const calq_model *m, int i, calq_value_info *out, calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, d);
    CALQ_REQUIRE(err, m);
    CALQ_REQUIRE(err, out);
    int n = calq_model_num_inputs(m);
    if (i < 0 || i >= n)
        return calq__fail(err, CALQ_ERR_INDEX_OUT_OF_RANGE, NULL, "input %d: the model has %d input%s", i, n,
                          n == 1 ? "" : "s");
    calq_model_input_info(m, i, out);
    data_dims(d, i, out);
    return CALQ_OK;
}

calq_status calq_data_check(calq_data *d, const calq_model *m, int batch_num, calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, d);
    CALQ_REQUIRE(err, m);
    int n = calq_model_num_inputs(m);
    calq_value_info *in = calloc((size_t)(n > 0 ? n : 1), sizeof *in);
    if (!in) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    for (int i = 0; d->kind == CALQ_DATA_NPY && i < n && i < d->n_streams; i++) {
        calq_model_input_info(m, i, &in[i]);
        d->streams[i].free_dims = 0;
        for (int k = 0; k < in[i].ndim && k < CALQ_MAX_DIMS; k++)
            if (in[i].dims[k] < 0) d->streams[i].free_dims |= 1u << k;
    }
    calq__data_input_shapes(d, m, in, n); /* a batch other than the model's is checked by the session */
    calq_status st = calq__data_preflight(d, in, n, batch_num, err);
    free(in);
    return st;
}

calq_status calq__data_read_batch_resize(calq_data *d, int batch, calq_tensor *inputs, int n_inputs, calq_error *err)
{
    if (d->kind != CALQ_DATA_NPY || !d->shapes_vary) return calq_data_read_batch(d, batch, inputs, n_inputs, err);
    if (batch < 0 || batch >= calq_data_num_batches(d) || n_inputs != d->n_streams)
        return calq_data_read_batch(d, batch, inputs, n_inputs, err); /* which says what is wrong */
    return calq__data_npy_read(d, batch, inputs, true, err);
}

calq_status calq_data_read_batch_resize(calq_data *d, int batch, calq_tensor *inputs, int n_inputs, calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, d);
    CALQ_REQUIRE_ARRAY(err, inputs, n_inputs);
    return calq__data_read_batch_resize(d, batch, inputs, n_inputs, err);
}

calq_status calq_data_read_batch(calq_data *d, int batch, calq_tensor *inputs, int n_inputs, calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, d);
    CALQ_REQUIRE_ARRAY(err, inputs, n_inputs);
    if (n_inputs == 0)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL, "calq_data_read_batch: no input tensors (n_inputs is 0)");
    for (int i = 0; i < n_inputs; i++)
        if (!inputs[i].data || calq__shape_numel(inputs[i].dims, inputs[i].ndim) < 0)
            return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL,
                              "input tensor %d has no data buffer or an invalid shape; allocate it with the model "
                              "input's shape",
                              i);
    if (d->kind == CALQ_DATA_STREAM) return calq__data_stream_read(d, batch, inputs, n_inputs, err);
    int have = calq_data_num_batches(d);
    if (batch < 0 || batch >= have)
        return calq__fail(err, CALQ_ERR_INDEX_OUT_OF_RANGE, NULL, "batch %d is not in the data (it holds %d)", batch,
                          have);
    int want = d->kind == CALQ_DATA_IMAGES ? 1 : d->n_streams;
    if (n_inputs != want)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL, "the data feed %d input%s but %d tensors were given",
                          want, want == 1 ? "" : "s", n_inputs);
    switch (d->kind) {
    case CALQ_DATA_BIN: return calq__data_bin_read(d, batch, inputs, err);
    case CALQ_DATA_NPY: return calq__data_npy_read(d, batch, inputs, false, err);
    case CALQ_DATA_IMAGES: return calq__data_images_read(d, batch, inputs, err);
    case CALQ_DATA_STREAM: break;
    }
    return calq__fail(err, CALQ_ERR_INTERNAL, NULL, "unknown calibration data kind %d", (int)d->kind);
}
