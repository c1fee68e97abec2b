#include "base/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A message that did not fit ends in "..." so nobody mistakes it for the whole message. */
static void mark_cut(char *message, int len)
{
    if (len >= CALQ_ERROR_MESSAGE_MAX) memcpy(message + CALQ_ERROR_MESSAGE_MAX - 4, "...", 4);
}

calq_status calq__fail(calq_error *err, calq_status s, const char *layer, const char *fmt, ...)
{
    if (!err) return s;
    err->status = s;
    calq__cut_into(layer, err->layer, sizeof err->layer);
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    mark_cut(err->message, len);
    return s;
}

calq_status calq__prefix(calq_error *err, const char *fmt, ...)
{
    if (!err) return CALQ_ERR_INTERNAL;
    char head[1024], shown[CALQ__CUT_MAX * 2 + 1];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    char old[CALQ_ERROR_MESSAGE_MAX];
    memcpy(old, err->message, sizeof old);
    /* the context (usually a file name) is cut so the message it prefixes stays whole */
    int len = snprintf(err->message, sizeof err->message, "%s: %s", calq__cut_into(head, shown, sizeof shown), old);
    mark_cut(err->message, len);
    return err->status;
}

calq_status calq__require_array(calq_error *err, const char *func, const char *arr_name, int have_arr,
                                const char *n_name, long long n, const char *layer)
{
    const char *sep = layer ? " (layer \"" : "", *name = layer ? layer : "", *end = layer ? "\")" : "";
    if (n < 0)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, layer, "%s%s%s%s: %s is %lld; a count cannot be negative", func,
                          sep, name, end, n_name, n);
    if (n > 0 && !have_arr)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, layer, "%s%s%s%s: %s is NULL but %s is %lld", func, sep, name,
                          end, arr_name, n_name, n);
    return CALQ_OK;
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
