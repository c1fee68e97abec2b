/* Progress and diagnostic lines on stderr. The verbosity is process-wide (like kann_verbose):
 * it only changes what is printed, never results. */
#ifndef CALQ_BASE_LOG_H
#define CALQ_BASE_LOG_H

#include "base/error.h"

enum { CALQ_LOG_QUIET = 0, CALQ_LOG_INFO = 1, CALQ_LOG_DEBUG = 2 };

void calq__log_set_level(int level);
int calq__log_level(void);
void calq__log(int level, const char *fmt, ...) CALQ_PRINTF(2, 3);

#endif
