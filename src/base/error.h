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
