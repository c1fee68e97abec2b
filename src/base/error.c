#include "base/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

calq_status calq__fail(calq_error *err, calq_status s, const char *layer, const char *fmt, ...)
{
    if (!err) return s;
    err->status = s;
    snprintf(err->layer, sizeof err->layer, "%s", layer ? layer : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return s;
}

calq_status calq__prefix(calq_error *err, const char *fmt, ...)
{
    if (!err) return CALQ_ERR_INTERNAL;
    char head[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    char old[CALQ_ERROR_MESSAGE_MAX];
    memcpy(old, err->message, sizeof old);
    snprintf(err->message, sizeof err->message, "%s: %s", head, old);
    return err->status;
}

_Noreturn void calq__abort(const char *file, int line, const char *what)
{
    fprintf(stderr, "calq: internal error: %s:%d: assertion failed: %s\n", file, line, what);
    abort();
}

const char *calq_status_name(calq_status s)
{
    switch (s) {
    case CALQ_OK: return "OK";
    case CALQ_ERR_IO: return "IO";
    case CALQ_ERR_INTERNAL: return "INTERNAL";
    case CALQ_ERR_SHAPE: return "SHAPE";
    case CALQ_ERR_DATA: return "DATA";
    case CALQ_ERR_UNSUPPORTED: return "UNSUPPORTED";
    case CALQ_ERR_GENERIC: return "GENERIC_ERROR";
    case CALQ_ERR_BAD_FORMAT: return "BAD_FORMAT";
    case CALQ_ERR_BAD_PARAMETERS: return "BAD_PARAMETERS";
    case CALQ_ERR_RECORD_FILE: return "RECORD_FILE_ERROR";
    case CALQ_ERR_RECORD_FACTOR: return "RECORD_FACTOR_ERROR";
    case CALQ_ERR_OUT_OF_MEMORY: return "OUT_OF_MEMORY";
    case CALQ_ERR_SHORT_BUFFER: return "SHORT_BUFFER";
    case CALQ_ERR_NOT_SUPPORT: return "NOT_SUPPORT";
    case CALQ_ERR_INDEX_OUT_OF_RANGE: return "INDEX_OUT_OF_RANGE";
    }
    return "UNKNOWN";
}
