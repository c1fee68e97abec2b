/* What `calq` prints while it works: the library says nothing by itself, so the command line
 * installs a logger that prints every message up to INFO on stderr, one line each (AMCT's
 * progress lines, notes, warnings), and, when stderr is a terminal, draws calibration's
 * progress bar from the library's progress callback. A log line first clears the bar. */
#include <stdbool.h>
#include <stdio.h>
#include <unistd.h>

#include "cli.h"

static bool bar_shown; /* the CLI is single-threaded; the library serialises log calls */

static void bar_clear(void)
{
    if (!bar_shown) return;
    fputs("\r\033[K", stderr);
    bar_shown = false;
}

static void print_line(void *user, calq_log_level level, const char *message)
{
    (void)user;
    (void)level;
    bar_clear();
    fputs(message, stderr);
    fputc('\n', stderr);
}

void cli_log_install(void)
{
    calq_set_log(print_line, NULL, CALQ_LOG_INFO);
}

static int draw_bar(void *user, const calq_calibrate_progress *p)
{
    (void)user;
    int total = p->runs_expected;
    double eta = p->runs_done ? p->elapsed_s / p->runs_done * (total - p->runs_done) : 0.0;
    char bar[31];
    int fill = total ? (int)(30.0 * p->runs_done / total) : 0;
    for (int i = 0; i < 30; i++) bar[i] = i < fill ? '#' : '.';
    bar[30] = 0;
    fprintf(stderr, "\r\033[Kcalq: [%s] pass %d, batch %d/%d, %.1f s, ETA %.1f s", bar, p->pass, p->batch + 1,
            p->batch_num, p->elapsed_s, eta);
    fflush(stderr);
    bar_shown = true;
    return 0;
}

void cli_progress_attach(calq_calibrate_opts *o)
{
    if (!o->log || !isatty(2)) return;
    o->progress = draw_bar;
    o->progress_user = NULL;
}

void cli_progress_end(void)
{
    bar_clear();
}
