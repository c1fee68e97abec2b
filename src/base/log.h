/* The library's log lines (AMCT's calibration progress, notes, warnings) go to the callback
 * the caller installed with calq_set_log(), and nowhere else: without one calq prints nothing.
 * Logging only changes what a caller is told, never results. */
#ifndef CALQ_BASE_LOG_H
#define CALQ_BASE_LOG_H

#include <stdbool.h>

#include "base/error.h"

/* One message (no trailing newline; it may span several lines) at `level`. Cheap when no
 * callback takes that level: nothing is formatted. */
void calq__log(calq_log_level level, const char *fmt, ...) CALQ_PRINTF(2, 3);
/* True when a message at `level` would reach a callback (to skip building costly ones). */
bool calq__log_enabled(calq_log_level level);

#endif
