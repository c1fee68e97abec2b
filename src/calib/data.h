/* Calibration data sources behind the opaque calq_data of calq.h: AMCT's raw .bin folders
 * (amct-reference.md §1.2), .npy files, and photo folders. A source is a list of files per
 * model input ("stream"); batch i is file i of every stream (bin, npy) or images
 * [i*N, (i+1)*N) of the one stream (images). Opening only lists files; nothing is read until
 * the preflight or a batch read.
 *
 * Ownership: a calq_data owns its labels, file paths and read buffer; calq_data_free releases
 * them. */
#ifndef CALQ_CALIB_DATA_H
#define CALQ_CALIB_DATA_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "calq.h"

typedef enum calq_data_kind {
    CALQ_DATA_BIN = 1,
    CALQ_DATA_NPY = 2,
    CALQ_DATA_IMAGES = 3,
    CALQ_DATA_STREAM = 4 /* the caller's next-batch callback (data_stream.c); no file streams */
} calq_data_kind;

/* A stream source: the callback, and the spool holding every batch it gave (model input dtypes,
 * inputs one after the other), so later passes read them again without the callback. */
typedef struct calq_data_spool {
    calq_data_next_fn next;
    void *user;
    char *label;
    FILE *file;          /* unlinked temporary file, or NULL before the first batch */
    int n_batches;       /* batches in the file */
    bool ended;          /* next said there are no more */
    int n_inputs;        /* fixed by the first batch read (0 before) */
    calq_value_info *in; /* the inputs the batches were checked against; names copied */
    size_t batch_bytes;  /* one batch in the file: every input's numel x dtype size */
} calq_data_spool;

typedef struct calq_data_stream {
    char *label; /* the folder (or file list) as the user wrote it, for messages */
    int n_files;
    char **files;       /* paths in batch order */
    calq_dtype dtype;   /* .bin: element type of the files (--data_types) */
    unsigned free_dims; /* .npy: bit k set when the model leaves dim k of this input unknown
                           (calq_data_check): a file may differ from the first there */
} calq_data_stream;

struct calq_data {
    calq_data_kind kind;
    int n_streams;
    calq_data_stream *streams;
    calq_image_opts image_opts; /* images */
    int batch_size;             /* images: images per batch */
    void *buf;                  /* .bin, stream: buffer reused across batches (memory stays flat) */
    size_t buf_bytes;
    calq_data_spool spool; /* stream */
    bool shapes_vary;      /* .npy: a file differs from the first in a free dim (the preflight) */
};

/* Allocates a source of `kind` with n_streams empty streams. */
calq_status calq__data_new(calq_data_kind kind, int n_streams, calq_data **out, calq_error *err);

/* Splits `spec` at `sep` into trimmed, non-empty items: *items is one malloc'ed block (owner:
 * caller, free()) holding the pointers and the strings. Returns the item count, -1 on OOM. */
int calq__data_split(const char *spec, char sep, char ***items);

/* Appends to s the regular files of folder `dir` whose names end in one of exts
 * (case-insensitive, NULL-terminated list), skipping hidden files, in ascending byte order
 * of their names (AMCT reads its data folders in name order, §1.2). `what` names the option
 * in messages ("--data_dir"). */
calq_status calq__data_list_dir(calq_data_stream *s, const char *dir, const char *const *exts, const char *what,
                                calq_error *err);
/* Appends one path to s. */
calq_status calq__data_add_file(calq_data_stream *s, const char *path, calq_error *err);
bool calq__data_has_ext(const char *name, const char *const *exts);

/* Converts n values of type st at src into type dt at dst: the same type is copied, floats
 * and integers become float16/32/64. Fails (CALQ_ERR_DATA, naming `what` (the file) and the
 * element) on a finite value the target type cannot hold, which would become inf, and
 * (CALQ_ERR_INTERNAL) on other pairs. dst is then partly written. */
calq_status calq__data_convert(const void *src, calq_dtype st, void *dst, calq_dtype dt, int64_t n, const char *what,
                               calq_error *err);
bool calq__data_can_convert(calq_dtype st, calq_dtype dt);
/* Shapes match when they agree after dropping leading dims of 1 (a [3,H,W] array feeds a
 * [1,3,H,W] input). */
bool calq__data_shape_fits(const int64_t *a, int na, const int64_t *b, int nb);
/* "16x3x48x48" into buf. */
const char *calq__data_shape(const calq_value_info *v, char *buf, size_t n);

/* The preflight (calq_data_check): before any inference, the source holds at least
 * batch_num batches of the right size and type for every one of the n_inputs model inputs
 * (in model input order, shapes fixed), and the batch counts agree across inputs. */
calq_status calq__data_preflight(calq_data *d, const calq_value_info *inputs, int n_inputs, int batch_num,
                                 calq_error *err);

/* Per kind (data_bin.c, data_npy.c, data_images.c). `check` runs after the common checks
 * (input count, fixed shapes, non-empty and equal counts) and examines the first
 * n_batches = min(batch_num, available) batches; `read` fills caller tensors. */
calq_status calq__data_bin_check(const calq_data *d, const calq_value_info *inputs, int n_batches, calq_error *err);
calq_status calq__data_bin_read(calq_data *d, int batch, calq_tensor *inputs, calq_error *err);
calq_status calq__data_npy_check(calq_data *d, const calq_value_info *inputs, int n_batches, calq_error *err);
/* resize: a file of another shape in the input's free dims gives the tensor its shape, its data
 * realloc'ed (the tensors must be malloc'ed: calq__data_read_batch_resize) */
calq_status calq__data_npy_read(calq_data *d, int batch, calq_tensor *inputs, bool resize, calq_error *err);
/* As calq_data_read_batch, for tensors calq malloc'ed: when the .npy files differ in a dim the
 * model leaves unknown (text lines of several widths), each batch is read at its own shape. */
calq_status calq__data_read_batch_resize(calq_data *d, int batch, calq_tensor *inputs, int n_inputs, calq_error *err);
/* The shapes of the model's inputs as the data feed them (calq_data_input_info for each): the
 * model's, except that a source whose first file holds another batch (dim 0) of the same
 * per-sample shape gives that batch (.npy: the array's dim 0; .bin: the file size over one
 * sample's), so a net fixed at batch 1 calibrates on batches of 8, as Caffe reshapes (issue 14),
 * and a net exported with a dynamic batch dim calibrates at the data's. The session checks that
 * the graph computes each sample on its own at that batch. */
calq_status calq__data_input_shapes(const calq_data *d, const calq_model *m, calq_value_info *in, int n);

/* Images: at most 256 MiB of file and 2^27 pixels (134 megapixels, 400 MB decoded), so a
 * hostile header cannot make stb allocate gigabytes (issue 14). */
#define CALQ_IMAGE_MAX_BYTES  ((size_t)256 << 20)
#define CALQ_IMAGE_MAX_PIXELS ((uint64_t)1 << 27)
/* Opens an image file and reads its header: *fp is positioned for stbi_load_from_file (owner:
 * the caller, fclose); *w x *h within the caps above. */
calq_status calq__image_open(const char *path, FILE **fp, int *w, int *h, calq_error *err);
calq_status calq__data_images_check(const calq_data *d, const calq_value_info *inputs, int n_batches, calq_error *err);
calq_status calq__data_images_read(calq_data *d, int batch, calq_tensor *inputs, calq_error *err);
/* Stream (data_stream.c): check reads up to batch_num batches from the callback into the spool
 * (0: to the end) and fails when it ends sooner; read returns batch i from the spool, reading
 * from the callback first when i is the next one; free closes the spool. */
calq_status calq__data_stream_check(calq_data *d, const calq_value_info *inputs, int n_inputs, int batch_num,
                                    calq_error *err);
calq_status calq__data_stream_read(calq_data *d, int batch, calq_tensor *inputs, int n_inputs, calq_error *err);
void calq__data_stream_free(calq_data *d);
void calq__data_stream_describe(const calq_data *d, char *buf, size_t n);

#endif
