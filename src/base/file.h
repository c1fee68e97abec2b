/* Whole-file reads and atomic writes (temporary file in the same folder, then rename), so a
 * failed write never leaves a half-written or damaged output behind. */
#ifndef CALQ_BASE_FILE_H
#define CALQ_BASE_FILE_H

#include <stdbool.h>
#include <stdio.h>

#include "calq.h"

/* Reads all of `path`. *out is malloc'ed (owner: caller, free()) and NUL-terminated one byte
 * past *size, so text parsers can use it directly. Only regular files are read (a folder, a
 * FIFO or a device such as /dev/zero is refused before anything is read or allocated, and
 * opening a FIFO does not wait for a writer), and at most CALQ_READ_MAX_BYTES. */
calq_status calq__read_file(const char *path, char **out, size_t *size, calq_error *err);
/* The same with a smaller cap: a file of more than `max` bytes is refused naming `what` (e.g.
 * "a record file") and the cap, before it is read. */
calq_status calq__read_file_max(const char *path, size_t max, const char *what, char **out, size_t *size,
                                calq_error *err);
/* Everything calq reads whole is a protobuf message (ONNX, caffemodel) or smaller text: protobuf
 * limits a message to 2 GiB (larger ONNX models keep their weights in external data files). */
#define CALQ_READ_MAX_BYTES ((size_t)0x7fffffff)
/* Text files calq reads whole (prototxt, JSON and .cfg configs): real ones are kilobytes. */
#define CALQ_TEXT_MAX_BYTES ((size_t)64 << 20)

/* Opens `path` for reading when it is a regular file of at most `max` bytes (its size in
 * *size), with the messages of calq__read_file_max; for readers that stream (.npy, .bin data,
 * images, external ONNX data). */
calq_status calq__open_regular(const char *path, size_t max, const char *what, FILE **fp, size_t *size,
                               calq_error *err);

/* An output being written: `fp` writes to a temporary file next to `path`. */
typedef struct calq_atomic_file {
    FILE *fp;
    char *path;
    char *tmp_path;
} calq_atomic_file;

calq_status calq__atomic_open(calq_atomic_file *f, const char *path, calq_error *err);
/* Flushes, checks every write succeeded, renames over `path`. Always releases f. */
calq_status calq__atomic_commit(calq_atomic_file *f, calq_error *err);
/* Drops the temporary file; `path` stays as it was. Safe on a zeroed or released f. */
void calq__atomic_abort(calq_atomic_file *f);

/* The outputs of one operation that writes several files (a save writes a model and its
 * weights, a fake-quant and a deploy model): each is written to its own temporary file; only
 * when all are complete are they renamed, so a failure anywhere leaves every earlier output
 * as it was. Zero-initialise; owner: the caller, released by _commit or _abort. */
#define CALQ_STAGED_MAX 16
typedef struct calq_staged_files {
    calq_atomic_file f[CALQ_STAGED_MAX];
    int n;
} calq_staged_files;

/* Opens one more output; *fp is its stream (valid until commit/abort). */
calq_status calq__staged_open(calq_staged_files *s, const char *path, FILE **fp, calq_error *err);
/* One more output holding `size` bytes of data. */
calq_status calq__staged_write(calq_staged_files *s, const char *path, const void *data, size_t size, calq_error *err);
/* One more entry that removes `path` at commit, after the renames (a file of an earlier run that
 * would no longer match the set: calq_outputs_drop_models). A missing file is no error. */
calq_status calq__staged_remove(calq_staged_files *s, const char *path, calq_error *err);
/* Whether entry i is such a removal. */
static inline bool calq__staged_is_removal(const calq_staged_files *s, int i)
{
    return !s->f[i].fp && !s->f[i].tmp_path && s->f[i].path;
}
/* Flushes and checks every output, then renames them all, then removes the removal entries'
 * files. On a write error nothing is renamed or removed. Always releases s. */
calq_status calq__staged_commit(calq_staged_files *s, calq_error *err);
/* Drops every temporary file; the final paths stay as they were. Safe on a released s. */
void calq__staged_abort(calq_staged_files *s);
/* Drops the outputs opened after the first n (a part of the operation that failed). */
void calq__staged_truncate(calq_staged_files *s, int n);

/* Directory part of `path` ("." when none) into buf. */
void calq__dirname(const char *path, char *buf, size_t n);

#endif
