#include "base/unique_name.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *calq__unique_name(const char *base, const char *suffix, const char *sep, int first, calq_name_taken_fn taken,
                        const void *ctx)
{
    size_t nb = strlen(base), ns = strlen(suffix), nsep = strlen(sep);
    /* room for the stem, the separator and any int counter (11 characters with its sign) */
    char *name = malloc(nb + ns + nsep + 16);
    if (!name) return NULL;
    memcpy(name, base, nb);
    memcpy(name + nb, suffix, ns + 1);
    if (!taken(ctx, name)) return name;
    char *tail = name + nb + ns;
    memcpy(tail, sep, nsep);
    /* long long: first + CALQ_UNIQUE_NAME_TRIES must not overflow, whatever first is */
    long long k = first;
    for (long tries = 0; tries < CALQ_UNIQUE_NAME_TRIES; tries++, k++) {
        snprintf(tail + nsep, 16, "%lld", k); /* at most 11 characters: |k| < 2^31 + 2^24 */
        if (!taken(ctx, name)) return name;
    }
    free(name);
    return NULL;
}

char *calq__vstrdup_printf(const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    char *p = n < 0 ? NULL : malloc((size_t)n + 1);
    if (p) vsnprintf(p, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    return p;
}

char *calq__strdup_printf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *p = calq__vstrdup_printf(fmt, ap);
    va_end(ap);
    return p;
}
