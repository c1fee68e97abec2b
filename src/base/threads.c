#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "base/threads.h"

#include <sched.h>

#include <stdio.h>
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

/* A bounded spin of this many polls (a few microseconds to tens of them) before sleeping:
 * 10000 and 30000 measured the same on the bench zoo; libgomp's own default, 300000, spins
 * long enough to hurt a machine with other work (docs/performance.md). */
#define SPIN_POLLS "10000"

calq_wait_policy calq__wait_policy_for(double load, long others, long cpus)
{
    calq_wait_policy passive = {"passive", NULL}, spin = {"passive", SPIN_POLLS};
    /* unknown load or processors: the choice that is never ruinous */
    if (cpus < 1 || !(load >= 0) || others < 0) return passive;
    /* the 1-minute average lags: a test runner that just started a second job shows in the
     * tasks running right now */
    return load < (double)cpus && others < cpus ? spin : passive;
}

calq_wait_policy calq_wait_policy_advice(void)
{
    double load = -1;
    long running = 0;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        /* "0.52 0.80 1.01 2/87 24967": the averages, then running/total tasks (this one included) */
        if (fscanf(f, "%lf %*f %*f %ld/", &load, &running) != 2) load = -1;
        fclose(f);
    }
    /* the processors this process may run on (a container pinned to 2 of 64 gets 2) */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0 && CPU_COUNT(&set) < cpus)
        cpus = CPU_COUNT(&set);
    return calq__wait_policy_for(load, running - 1, cpus);
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
