/* The assertion every unit test uses: report the failed condition with its line and count it;
 * main returns non-zero when `failures` is not 0. One copy per test program (static).
 * EXPECT_STATUS also checks the message of a failing call. */
#ifndef CALQ_TESTS_EXPECT_H
#define CALQ_TESTS_EXPECT_H

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "calq.h"

/* unused in op_harness.c, which includes this file through op_harness.h but asserts nothing */
static int failures __attribute__((unused));
static int skipped __attribute__((unused));

#define EXPECT(cond)                                                                                                   \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            fprintf(stderr, "%s:%d: EXPECT failed: %s\n", __FILE__, __LINE__, #cond);                                  \
            failures++;                                                                                                \
        }                                                                                                              \
    } while (0)

/* A call that must succeed. expr may use `e_`, a fresh calq_error, whose message is printed
 * when it fails: EXPECT_OK(op_case_run(&oc, in, 2, out, 1, 0, &e_)). */
#define EXPECT_OK(expr)                                                                                                \
    do {                                                                                                               \
        calq_error e_ = {0};                                                                                           \
        (void)e_;                                                                                                      \
        calq_status s_ = (expr);                                                                                       \
        if (s_ != CALQ_OK) {                                                                                           \
            fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", __FILE__, __LINE__, #expr, calq_status_name(s_),            \
                    e_.message);                                                                                       \
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

/* Files a test needs that are not part of the repository (the shared models and photos,
 * /usr/share/libonnx-testdata): NEED_FILE(path) is true when path is readable; when it is not,
 * it says so and counts a skip, and the test's main returns TEST_RESULT(): 1 when an EXPECT
 * failed, else ctest's skip code 77 (SKIP_RETURN_CODE, tests/CMakeLists.txt) when something was
 * skipped, else 0. A missing file never lets a test pass. */
#define TEST_SKIP_CODE  77
#define NEED_FILE(path) need_file_at(__FILE__, __LINE__, (path))
#define TEST_RESULT()   (failures ? 1 : skipped ? TEST_SKIP_CODE : 0)
/* A skip for a need that is not one file (no numpy for the interoperability checks). */
#define SKIP_BECAUSE(why) (fprintf(stderr, "%s:%d: SKIP: %s\n", __FILE__, __LINE__, (why)), skipped++)

static inline int need_file_at(const char *file, int line, const char *path)
{
    if (access(path, R_OK) == 0) return 1;
    fprintf(stderr, "%s:%d: SKIP: %s is missing (set CALQ_SHARED to the shared folder)\n", file, line, path);
    skipped++;
    return 0;
}

#endif
