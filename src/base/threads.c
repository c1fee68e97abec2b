#include "base/threads.h"

#include <unistd.h>

#include "base/error.h"

/* More threads than 4 per online processor only add waiting: every kernel splits independent
 * outputs, so beyond the processors each extra thread just queues (docs/cli.md "Threads"). */
#define THREADS_PER_CPU 4

int calq_thread_limit(void)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus < 1) cpus = 1;
    if (cpus > 1024) cpus = 1024;
    return (int)cpus * THREADS_PER_CPU;
}

calq_status calq__threads_resolve(int requested, const char *what, int *out, calq_error *err)
{
    if (requested < 0)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL,
                          "%s is %d; it must be 0 (OpenMP's default) or a positive number of threads", what, requested);
    int limit = calq_thread_limit();
    *out = requested > limit ? limit : requested;
    return CALQ_OK;
}
