/* Filling calq_error: every failure path goes through calq__fail so messages and layer
 * names are set in one way. */
#ifndef CALQ_BASE_ERROR_H
#define CALQ_BASE_ERROR_H

#include "base/cut.h"
#include "calq.h"

#if defined(__GNUC__)
#define CALQ_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define CALQ_PRINTF(a, b)
#endif

/* Sets err (when non-NULL) to status s, layer (may be NULL) and the formatted message.
 * Returns s so callers can `return calq__fail(...)`. */
calq_status calq__fail(calq_error *err, calq_status s, const char *layer, const char *fmt, ...) CALQ_PRINTF(4, 5);

/* Prepends "context: " to an existing message (e.g. the file name) and keeps the status. */
calq_status calq__prefix(calq_error *err, const char *fmt, ...) CALQ_PRINTF(2, 3);

/* calq.h lets a caller pass err NULL, but the failure paths below the public functions read
 * err->status and prefix err->message (and calq__prefix cannot keep a status it cannot read).
 * Every public function taking an err starts with this: a NULL err then points at a scratch
 * calq_error in the function's own frame, so the code under it never sees NULL. */
#define CALQ_ERR_OR_SCRATCH(err)                                                                                       \
    calq_error calq__scratch_err;                                                                                      \
    if (!(err)) {                                                                                                      \
        calq__scratch_err.status = CALQ_OK;                                                                            \
        calq__scratch_err.message[0] = 0;                                                                              \
        calq__scratch_err.layer[0] = 0;                                                                                \
        (err) = &calq__scratch_err;                                                                                    \
    }

/* Arguments calq.h does not let be NULL or out of range. A caller's slip (a NULL model, a
 * negative count) is a status and a message naming the function and the argument, never a
 * segfault inside the library that leaves the embedder a core dump to read. One check per
 * argument at the top of a public function, after CALQ_ERR_OR_SCRATCH; the message is
 * "<function>: <argument> is NULL" (tests/unit/test_api_null.c looks for it). */
#define CALQ_REQUIRE(err, arg)                                                                                         \
    do {                                                                                                               \
        if (!(arg)) return calq__fail((err), CALQ_ERR_BAD_PARAMETERS, NULL, "%s: %s is NULL", __func__, #arg);         \
    } while (0)

/* An array argument and its element count: a negative count, or a NULL array with a positive
 * count, fails as CALQ_REQUIRE does ("<function>: <n> is -1" / "<arr> is NULL but <n> is 3"). */
#define CALQ_REQUIRE_ARRAY(err, arr, n)                                                                                \
    CALQ_TRY(calq__require_array((err), __func__, #arr, (arr) != NULL, #n, (long long)(n), NULL))
/* The same for a call on an object that belongs to a layer (a calibration stream): the error
 * names it, as the object's other errors do. */
#define CALQ_REQUIRE_ARRAY_OF(err, arr, n, layer)                                                                      \
    CALQ_TRY(calq__require_array((err), __func__, #arr, (arr) != NULL, #n, (long long)(n), (layer)))
calq_status calq__require_array(calq_error *err, const char *func, const char *arr_name, int have_arr,
                                const char *n_name, long long n, const char *layer);

/* Programmer errors only: abort with location. Runtime problems return a status. */
#define CALQ_ASSERT(x)                                                                                                 \
    do {                                                                                                               \
        if (!(x)) calq__abort(__FILE__, __LINE__, #x);                                                                 \
    } while (0)
_Noreturn void calq__abort(const char *file, int line, const char *what);

#define CALQ_TRY(expr)                                                                                                 \
    do {                                                                                                               \
        calq_status calq__s = (expr);                                                                                  \
        if (calq__s != CALQ_OK) return calq__s;                                                                        \
    } while (0)

#endif
