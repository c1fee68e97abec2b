/* .npy files: the internal, buffer-based entry point (calq_npy_read / calq_npy_write in calq.h
 * are the file-based ones). Exposed for the fuzzer and for callers that already hold the bytes. */
#ifndef CALQ_BASE_NPY_H
#define CALQ_BASE_NPY_H

#include <stddef.h>

#include "calq.h"

/* Parses a whole .npy file held in buf[0..n). `what` names the source in error messages (a file
 * name; NULL gives "npy data"). On success *out holds a copy of the array (the caller frees it
 * with calq_tensor_free_data()); buf is only read, never kept. On failure out->data is NULL. */
calq_status calq__npy_parse(const void *buf, size_t n, const char *what, calq_tensor *out, calq_error *err);

#endif
