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

/* Directory part of `path` ("." when none) into buf. */
void calq__dirname(const char *path, char *buf, size_t n);

#endif
