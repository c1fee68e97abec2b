/* The assertion every unit test uses: report the failed condition with its line and count it;
 * main returns non-zero when `failures` is not 0. One copy per test program (static). */
#ifndef CALQ_TESTS_EXPECT_H
#define CALQ_TESTS_EXPECT_H

#include <stdio.h>

static int failures;

#define EXPECT(cond)                                                                                                   \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            fprintf(stderr, "%s:%d: EXPECT failed: %s\n", __FILE__, __LINE__, #cond);                                  \
            failures++;                                                                                                \
        }                                                                                                              \
    } while (0)

#endif
