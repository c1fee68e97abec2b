/* calq_set_log and calq__log. The callback, its user pointer and the level filter are the one
 * piece of process-wide state calq has (as libuv's allocator and ggml's logger are): a mutex
 * guards them, and it is held while the callback runs, so that calls from several threads come
 * one at a time (a callback need not be thread-safe) and calq_set_log returns only when no call
 * to the previous callback is in progress (its user data can then be freed). The mutex is
 * recursive: a callback may log or call calq_set_log itself. */
#include "base/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t log_mutex;
static calq_log_fn log_fn;     /* NULL: calq says nothing */
static void *log_user;         /* handed to log_fn, never read */
static calq_log_level log_max; /* messages above it are not formatted */

static void init_mutex(void)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&log_mutex, &a);
    pthread_mutexattr_destroy(&a);
}

static void lock(void)
{
    pthread_once(&log_once, init_mutex);
    pthread_mutex_lock(&log_mutex);
}

void calq_set_log(calq_log_fn fn, void *user, calq_log_level max_level)
{
    lock();
    log_fn = fn;
    log_user = fn ? user : NULL;
    log_max = max_level;
    pthread_mutex_unlock(&log_mutex);
}

bool calq__log_enabled(calq_log_level level)
{
    lock();
    bool on = log_fn && level <= log_max;
    pthread_mutex_unlock(&log_mutex);
    return on;
}

void calq__log(calq_log_level level, const char *fmt, ...)
{
    lock();
    if (!log_fn || level > log_max) {
        pthread_mutex_unlock(&log_mutex);
        return;
    }
    char small[1024];
    char *msg = small;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof small) { /* a long message (a list of layers): format it whole */
        char *big = malloc((size_t)n + 1);
        if (big) {
            va_start(ap, fmt);
            vsnprintf(big, (size_t)n + 1, fmt, ap);
            va_end(ap);
            msg = big;
        }
    }
    if (n >= 0) log_fn(log_user, level, msg);
    if (msg != small) free(msg);
    pthread_mutex_unlock(&log_mutex);
}
