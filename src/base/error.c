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

/* Both from CALQ_STATUS_MAP (calq.h), so a new code cannot lack a name. */
const char *calq_status_name(calq_status s)
{
    switch (s) {
#define CALQ_STATUS_NAME_(sym, value, name, description)                                                               \
    case sym: return name;
        CALQ_STATUS_MAP(CALQ_STATUS_NAME_)
#undef CALQ_STATUS_NAME_
    }
    return "UNKNOWN";
}

const char *calq_strerror(calq_status s)
{
    switch (s) {
#define CALQ_STATUS_DESCRIPTION_(sym, value, name, description)                                                        \
    case sym: return description;
        CALQ_STATUS_MAP(CALQ_STATUS_DESCRIPTION_)
#undef CALQ_STATUS_DESCRIPTION_
    }
    return "unknown status code";
}
