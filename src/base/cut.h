/* Names and paths in messages, bounded. A 5 MB layer key or a 100 KB path echoed in full fills
 * calq_error.message (CALQ_ERROR_MESSAGE_MAX bytes) and pushes out what went wrong and what to
 * do, so every message that prints a name it did not make itself prints it through calq__cut. */
#ifndef CALQ_BASE_CUT_H
#define CALQ_BASE_CUT_H

#include <stddef.h>

/* Bytes of a name a message keeps: longer names become head "..." tail. */
#define CALQ__CUT_MAX 120

typedef struct calq__cut_buf {
    char s[CALQ__CUT_MAX + 1];
} calq__cut_buf;

/* s (NULL: "") as it is when it has at most CALQ__CUT_MAX bytes, else its first bytes, "...",
 * and its last bytes, cut between UTF-8 characters. The result is a temporary that lives until
 * the end of the full expression, so it is meant as a printf argument:
 *     calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL, "%s: no layer '%s'", calq__cut(file).s, calq__cut(name).s); */
calq__cut_buf calq__cut(const char *s);

/* The same into buf[n] (n >= 8), at most n - 1 bytes. Returns buf. */
char *calq__cut_into(const char *s, char *buf, size_t n);

#endif
