/* Thread counts the library accepts (calq_thread_limit in calq.h, docs/cli.md "Threads"). */
#ifndef CALQ_BASE_THREADS_H
#define CALQ_BASE_THREADS_H

#include "calq.h"

/* Checks a caller's n_threads (`what` names the option in the message): negative is an error;
 * 0 (OpenMP's default) and values up to calq_thread_limit() are kept; larger ones become the
 * limit (libgomp crashes creating 100000 threads, and 1000 threads spinning on 2 cores take
 * seconds where 2 take milliseconds; results never depend on the count). */
calq_status calq__threads_resolve(int requested, const char *what, int *out, calq_error *err);

/* calq_wait_policy_advice's rule for a 1-minute load average (negative or NaN: unknown), the
 * tasks running now besides the caller (negative: unknown) and the online processors. */
calq_wait_policy calq__wait_policy_for(double load, long others, long cpus);

#endif
