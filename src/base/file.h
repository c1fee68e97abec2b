/* Whole-file reads and atomic writes (temporary file in the same folder, then rename), so a
 * failed write never leaves a half-written or damaged output behind. */
#ifndef CALQ_BASE_FILE_H
#define CALQ_BASE_FILE_H

#include <stdio.h>

#include "calq.h"

/* Reads all of `path`. *out is malloc'ed (owner: caller, free()) and NUL-terminated one byte
 * past *size, so text parsers can use it directly. */
calq_status calq__read_file(const char *path, char **out, size_t *size, calq_error *err);

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
/* Flushes and checks every output, then renames them all. On a write error nothing is renamed.
 * Always releases s. */
calq_status calq__staged_commit(calq_staged_files *s, calq_error *err);
/* Drops every temporary file; the final paths stay as they were. Safe on a released s. */
void calq__staged_abort(calq_staged_files *s);
/* Drops the outputs opened after the first n (a part of the operation that failed). */
void calq__staged_truncate(calq_staged_files *s, int n);

/* Directory part of `path` ("." when none) into buf. */
void calq__dirname(const char *path, char *buf, size_t n);

#endif
