/* --evaluator "CMD {model}": the user's command measures a candidate model (AMCT's evaluator
 * class, amct-reference.md §1.2, as a shell command). {model} becomes the candidate's model file
 * and {weights} its caffemodel (Caffe), both shell-quoted; without {model} the path is appended.
 * The metric is the last number the command prints on stdout, and it must be finite; a non-zero
 * exit status, no number, NaN or infinity fails the search with the command's last output.
 *
 * One run is bounded (cli_evaluator: --evaluator-timeout, and what is left of --time-budget):
 * the command runs in a process group of its own, so that when it outlasts its limit, or calq is
 * interrupted, everything it started (a Python evaluator's workers, a pipeline's stages) can be
 * ended together: SIGTERM, then SIGKILL after EVAL_GRACE_S. Whatever the command leaves running in
 * its group when it exits is ended the same way, so no run leaves processes behind. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "cli.h"

/* Appends s single-quoted for sh. */
static void put_quoted(char **buf, size_t *len, size_t *cap, const char *s)
{
    for (const char *p = "'"; *p; p++) {
        if (*len + 8 >= *cap) return;
        (*buf)[(*len)++] = *p;
    }
    for (; *s; s++) {
        const char *piece = *s == '\'' ? "'\\''" : NULL;
        size_t k = piece ? strlen(piece) : 1;
        if (*len + k + 8 >= *cap) {
            size_t nc = *cap * 2 + k;
            char *nb = realloc(*buf, nc);
            if (!nb) return;
            *buf = nb;
            *cap = nc;
        }
        if (piece) {
            memcpy(*buf + *len, piece, k);
            *len += k;
        } else {
            (*buf)[(*len)++] = *s;
        }
    }
    (*buf)[(*len)++] = '\'';
    (*buf)[*len] = 0;
}

static char *command_for(const char *tmpl, const char *model, const char *weights)
{
    size_t cap = strlen(tmpl) + 2 * (strlen(model) + (weights ? strlen(weights) : 0)) + 64, len = 0;
    char *buf = malloc(cap);
    if (!buf) return NULL;
    buf[0] = 0;
    bool had_model = false;
    for (const char *p = tmpl; *p;) {
        if (!strncmp(p, "{model}", 7)) {
            put_quoted(&buf, &len, &cap, model);
            had_model = true;
            p += 7;
        } else if (!strncmp(p, "{weights}", 9)) {
            put_quoted(&buf, &len, &cap, weights ? weights : "");
            p += 9;
        } else {
            if (len + 8 >= cap) {
                char *nb = realloc(buf, cap *= 2);
                if (!nb) {
                    free(buf);
                    return NULL;
                }
                buf = nb;
            }
            buf[len++] = *p++;
            buf[len] = 0;
        }
    }
    if (!had_model) {
        buf[len++] = ' ';
        buf[len] = 0;
        put_quoted(&buf, &len, &cap, model);
    }
    return buf;
}

#define EVAL_GRACE_S 2.0 /* from SIGTERM to SIGKILL: time for the command to flush and clean up */

double cli_monotonic(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void nap(double seconds) /* below 1 s */
{
    struct timespec ts = {0, (long)(seconds * 1e9)};
    nanosleep(&ts, NULL);
}

/* A signal that would end calq (Ctrl-C, SIGTERM, a closed terminal) while the command runs. Its
 * group is not the terminal's foreground group, so Ctrl-C no longer reaches it: the handler passes
 * SIGTERM on to the group at once, the run then ends the group, and calq re-raises the signal.
 * Signals calq ignores (nohup) stay ignored. */
static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP};
#define N_FORWARDED (sizeof forwarded / sizeof forwarded[0])
static volatile sig_atomic_t got_signal, running_group;

static void on_signal(int sig)
{
    const int saved_errno = errno; /* the interrupted code may be between a call and its errno check */
    if (got_signal) {              /* a second one: calq is stuck ending the group; the signal's default action */
        signal(sig, SIG_DFL);
        raise(sig);
    }
    got_signal = sig;
    if (running_group > 0) kill(-(pid_t)running_group, SIGTERM);
    errno = saved_errno;
}

typedef struct saved_signals {
    struct sigaction old[N_FORWARDED];
    bool set[N_FORWARDED];
    struct sigaction old_chld; /* SIGCHLD as the run found it: SIG_IGN (inheritable through exec) */
    bool chld_set;             /* would make the kernel reap the shell, and waitpid never see it */
} saved_signals;

static void catch_signals(saved_signals *sv)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    got_signal = 0;
    for (size_t i = 0; i < N_FORWARDED; i++)
        sv->set[i] = sigaction(forwarded[i], NULL, &sv->old[i]) == 0 && sv->old[i].sa_handler != SIG_IGN &&
                     sigaction(forwarded[i], &sa, NULL) == 0;
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sv->chld_set = sigaction(SIGCHLD, NULL, &sv->old_chld) == 0 && sv->old_chld.sa_handler == SIG_IGN &&
                   sigaction(SIGCHLD, &dfl, NULL) == 0;
}

static void restore_signals(const saved_signals *sv)
{
    for (size_t i = 0; i < N_FORWARDED; i++)
        if (sv->set[i]) sigaction(forwarded[i], &sv->old[i], NULL);
    if (sv->chld_set) sigaction(SIGCHLD, &sv->old_chld, NULL);
}

/* The forwarded signals blocked (how SIG_BLOCK) or unblocked around fork, so that the child cannot
 * take one in calq's handler before it has reset them (calq has OpenMP threads: the calling
 * thread's mask). */
static void mask_forwarded(int how)
{
    sigset_t set;
    sigemptyset(&set);
    for (size_t i = 0; i < N_FORWARDED; i++) sigaddset(&set, forwarded[i]);
    pthread_sigmask(how, &set, NULL);
}

/* One run of the command: the shell, leader of process group `pid`, and the pipe of its stdout. */
typedef struct eval_run {
    pid_t pid;
    int fd; /* the pipe's read end; -1 once at its end */
    char tail[8192];
    size_t nt; /* the last 8 KB of the output are kept: the metric and the message come from them */
    int status;
    bool reaped;
} eval_run;

static void keep(eval_run *r, const char *b, size_t n)
{
    size_t room = sizeof r->tail - 1;
    if (n > room) {
        b += n - room;
        n = room;
    }
    if (r->nt + n > room) {
        size_t drop = r->nt + n - room;
        memmove(r->tail, r->tail + drop, r->nt - drop);
        r->nt -= drop;
    }
    memcpy(r->tail + r->nt, b, n);
    r->nt += n;
    r->tail[r->nt] = 0;
}

/* Reads what the pipe holds (blocking unless it is non-blocking); false when there is nothing more
 * to read now: at its end (closed), or EAGAIN. */
static bool read_some(eval_run *r)
{
    char b[4096];
    ssize_t n = read(r->fd, b, sizeof b);
    if (n > 0) {
        keep(r, b, (size_t)n);
        return true;
    }
    if (n < 0 && errno == EINTR) return true;
    if (n < 0 && errno == EAGAIN) return false;
    close(r->fd);
    r->fd = -1;
    return false;
}

/* Reaps the group's members that have ended: the shell (its status kept) and the orphans calq
 * adopted as their subreaper. */
static void reap(eval_run *r)
{
    int st;
    if (!r->reaped) { /* by its pid too: setpgid may have failed */
        pid_t w = waitpid(r->pid, &st, WNOHANG);
        if (w == r->pid) {
            r->status = st;
            r->reaped = true;
        } else if (w < 0 && errno == ECHILD) { /* reaped by someone else: its status is lost */
            r->status = -1;
            r->reaped = true;
        }
    }
    while (waitpid(-r->pid, &st, WNOHANG) > 0) continue;
}

static void signal_run(const eval_run *r, int sig)
{
    kill(-r->pid, sig);
    if (!r->reaped) kill(r->pid, sig);
}

/* Ends every process of the group: SIGTERM (and SIGCONT, which a stopped one needs to act on it),
 * then SIGKILL to what is left after EVAL_GRACE_S. Returns once the shell is reaped and the group
 * is empty. The shell is not reaped before the group is signalled: while it exists, even as a
 * zombie, the group's id cannot be reused by an unrelated process. */
static void end_group(eval_run *r)
{
    signal_run(r, SIGTERM);
    signal_run(r, SIGCONT);
    double t0 = cli_monotonic(), t_kill = 0.0;
    for (;;) {
        reap(r);
        bool empty = kill(-r->pid, 0) != 0;
        /* past SIGKILL, members that are not calq's children (no subreaper) may linger as zombies
         * of an init that does not reap: at most 1 s more */
        if (r->reaped && (empty || (t_kill > 0.0 && cli_monotonic() - t_kill > 1.0))) return;
        /* a shell that never becomes reapable (uninterruptible I/O): give up rather than hang */
        if (t_kill > 0.0 && cli_monotonic() - t_kill > 5.0) return;
        if (t_kill == 0.0 && cli_monotonic() - t0 >= EVAL_GRACE_S) {
            signal_run(r, SIGKILL);
            t_kill = cli_monotonic();
        }
        nap(0.01);
    }
}

/* The last number in s: a token strtod reads up to a separator. A token strtod reads as a word
 * (nan, inf, infinity) counts only at the start of a word, so "banana:" holds no NaN. */
static bool last_number(const char *s, double *v, const char **tok, int *len)
{
    bool found = false;
    for (const char *t = s; *t;) {
        if (isspace((unsigned char)*t)) { /* strtod would skip it: the token starts after */
            t++;
            continue;
        }
        char *end;
        double x = strtod(t, &end);
        const char *first = t + (*t == '+' || *t == '-');
        bool word = isalpha((unsigned char)*first), starts = t == s || !isalnum((unsigned char)t[-1]);
        if (end != t && (*end == 0 || strchr(" \t\r\n,;:%)]", *end)) && (!word || starts)) {
            *v = x;
            *tok = t;
            *len = (int)(end - t);
            found = true;
            t = end;
        } else {
            t++;
        }
    }
    return found;
}

calq_status cli_run_evaluator(void *user, const char *model, const char *weights, double *metric, calq_error *err)
{
    const cli_evaluator *ev = user;
    double start = cli_monotonic(), limit = ev->timeout;
    bool by_budget = ev->deadline > 0.0 && ev->deadline - start < limit;
    if (by_budget) limit = ev->deadline - start;
    char *cmd = command_for(ev->command, model, weights);
    if (!cmd) {
        snprintf(err->message, sizeof err->message, "--evaluator: out of memory");
        return err->status = CALQ_ERR_OUT_OF_MEMORY;
    }
    if (limit <= 0.0) {
        snprintf(err->message, sizeof err->message,
                 "--evaluator: --time-budget %g s was spent before '%s' could run (a larger --time-budget gives the "
                 "search more time)",
                 ev->budget, cmd);
        free(cmd);
        return err->status = CALQ_ERR_GENERIC;
    }
#ifdef __linux__
    /* Orphans of the command (a child whose parent exited) come to calq rather than to init, which
     * in a container may never reap them: calq reaps them, and sees when the group is empty. */
    static bool subreaper;
    if (!subreaper) subreaper = prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0;
#endif
    int fds[2];
    if (pipe(fds) != 0) {
        snprintf(err->message, sizeof err->message, "--evaluator: cannot run '%s' (pipe: %s)", cmd, strerror(errno));
        free(cmd);
        return err->status = CALQ_ERR_IO;
    }
    fcntl(fds[0], F_SETFD, FD_CLOEXEC);
    fflush(stdout);
    fflush(stderr);
    saved_signals sv;
    catch_signals(&sv);
    eval_run r = {.fd = fds[0]};
    mask_forwarded(SIG_BLOCK);
    r.pid = fork();
    if (r.pid == 0) {
        /* the child: only async-signal-safe calls until exec (calq has OpenMP threads). Its stdin is
         * /dev/null: a group other than the terminal's foreground one would be stopped reading it. */
        for (size_t i = 0; i < N_FORWARDED; i++)
            if (sv.set[i]) signal(forwarded[i], SIG_DFL);
        mask_forwarded(SIG_UNBLOCK);
        setpgid(0, 0);
        int nul = open("/dev/null", O_RDONLY);
        if (nul > 0) {
            dup2(nul, 0);
            close(nul);
        }
        if (fds[1] != 1) {
            dup2(fds[1], 1);
            close(fds[1]);
        }
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    int fork_errno = errno;
    mask_forwarded(SIG_UNBLOCK);
    close(fds[1]);
    if (r.pid < 0) {
        close(fds[0]);
        restore_signals(&sv);
        snprintf(err->message, sizeof err->message, "--evaluator: cannot run '%s' (fork: %s)", cmd,
                 strerror(fork_errno));
        free(cmd);
        return err->status = CALQ_ERR_IO;
    }
    /* here too, so that the group exists before the parent signals it (EACCES once the child has
     * exec'd: it has then made the group itself) */
    setpgid(r.pid, r.pid);
    running_group = r.pid;
    enum { EXITED, TIMED_OUT, INTERRUPTED } why = EXITED;
    for (;;) {
        if (got_signal) {
            why = INTERRUPTED;
            break;
        }
        double left = start + limit - cli_monotonic();
        if (left <= 0.0) {
            why = TIMED_OUT;
            break;
        }
        int ms = left < 0.1 ? (int)(left * 1000.0) + 1 : 100;
        if (r.fd >= 0) {
            struct pollfd p = {.fd = r.fd, .events = POLLIN};
            if (poll(&p, 1, ms) > 0) read_some(&r);
        } else {
            nap(ms < 10 ? ms / 1000.0 : 0.01);
        }
        /* the shell ended (not reaped yet: see end_group); a child it left in the background may
         * still hold the pipe, so its end is no sign */
        siginfo_t si;
        memset(&si, 0, sizeof si);
        const int w = waitid(P_PID, (id_t)r.pid, &si, WEXITED | WNOHANG | WNOWAIT);
        if ((w == 0 && si.si_pid == r.pid) || (w < 0 && errno == ECHILD)) break;
    }
    double ran = cli_monotonic() - start;
    end_group(&r);
    running_group = 0;
    /* orphans that left the group (setsid) and ended since: calq adopted them as subreaper; calq
     * has no other child processes */
    int zst;
    while (waitpid(-1, &zst, WNOHANG) > 0) continue;
    if (r.fd >= 0) { /* what the group wrote before it ended */
        fcntl(r.fd, F_SETFL, fcntl(r.fd, F_GETFL) | O_NONBLOCK);
        while (read_some(&r)) continue;
        if (r.fd >= 0) close(r.fd);
    }
    restore_signals(&sv);
    int sig = got_signal;
    if (sig) raise(sig); /* its default action ends calq; a handler of the embedder's returns here */
    const char *shown = r.nt > 600 ? r.tail + r.nt - 600 : r.nt ? r.tail : "(nothing)";
    double v = 0.0;
    const char *tok = NULL;
    int tok_len = 0;
    bool found = last_number(r.tail, &v, &tok, &tok_len);
    calq_status st = CALQ_ERR_GENERIC;
    if (sig || why == INTERRUPTED) {
        snprintf(err->message, sizeof err->message, "--evaluator: '%s' was stopped: calq received signal %d", cmd, sig);
    } else if (why == TIMED_OUT && by_budget) {
        snprintf(err->message, sizeof err->message,
                 "--evaluator: '%s' was still running when --time-budget %g s ran out (after %.1f s of its run); it "
                 "and what it started were stopped (a larger --time-budget gives the search more time); its last "
                 "output:\n%s",
                 cmd, ev->budget, ran, shown);
    } else if (why == TIMED_OUT) {
        snprintf(err->message, sizeof err->message,
                 "--evaluator: '%s' ran longer than --evaluator-timeout %g s; it and what it started were stopped (a "
                 "larger --evaluator-timeout gives it more time); its last output:\n%s",
                 cmd, ev->timeout, shown);
    } else if (!r.reaped || !WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0) {
        char how[64];
        if (r.reaped && WIFSIGNALED(r.status))
            snprintf(how, sizeof how, "killed by signal %d", WTERMSIG(r.status));
        else
            snprintf(how, sizeof how, "exit status %d", r.reaped && WIFEXITED(r.status) ? WEXITSTATUS(r.status) : -1);
        snprintf(err->message, sizeof err->message, "--evaluator: '%s' failed (%s); its last output:\n%s", cmd, how,
                 shown);
    } else if (!found) {
        snprintf(err->message, sizeof err->message,
                 "--evaluator: '%s' printed no number (the metric is the last number on its stdout); its output:\n%s",
                 cmd, shown);
    } else if (!isfinite(v)) {
        snprintf(err->message, sizeof err->message,
                 "--evaluator: '%s' printed '%.*s' as its metric (the last number on its stdout), which is not a "
                 "finite number; its output:\n%s",
                 cmd, tok_len < 64 ? tok_len : 64, tok, shown);
    } else {
        *metric = v;
        st = CALQ_OK;
    }
    if (st != CALQ_OK) err->status = st;
    free(cmd);
    return st;
}
