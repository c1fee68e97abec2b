#include "base/log.h"

#include <stdarg.h>
#include <stdio.h>

static int log_level = CALQ_LOG_INFO;

void calq__log_set_level(int level)
{
    log_level = level;
}
int calq__log_level(void)
{
    return log_level;
}

void calq__log(int level, const char *fmt, ...)
{
    if (level > log_level) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}
