/* The assertion every unit test uses: report the failed condition with its line and count it;
 * main returns non-zero when `failures` is not 0. One copy per test program (static).
 * EXPECT_STATUS also checks the message of a failing call. */
#ifndef CALQ_TESTS_EXPECT_H
#define CALQ_TESTS_EXPECT_H

#include <stdio.h>
#include <string.h>

#include "calq.h"

static int failures;

#define EXPECT(cond)                                                                                                   \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            fprintf(stderr, "%s:%d: EXPECT failed: %s\n", __FILE__, __LINE__, #cond);                                  \
            failures++;                                                                                                \
        }                                                                                                              \
    } while (0)

/* A call's status, and (needle non-NULL) a piece of its error message. */
#define EXPECT_STATUS(got, want, err, needle) expect_status_at(__FILE__, __LINE__, (got), (want), (err), (needle))

static inline void expect_status_at(const char *file, int line, calq_status got, calq_status want,
                                    const calq_error *err, const char *needle)
{
    if (got != want) {
        fprintf(stderr, "%s:%d: status %s, expected %s (message: %s)\n", file, line, calq_status_name(got),
                calq_status_name(want), got != CALQ_OK ? err->message : "");
        failures++;
        return;
    }
    if (needle && !strstr(err->message, needle)) {
        fprintf(stderr, "%s:%d: message lacks \"%s\": %s\n", file, line, needle, err->message);
        failures++;
    }
}

#endif
