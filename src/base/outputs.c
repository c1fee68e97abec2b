/* calq_outputs: one run's files under one prefix (issue 14).
 *
 * All or nothing: every file is written to "<path>.tmp.<pid>" and renamed only when all are
 * complete (calq_staged_files), so a run that cannot write its record (the target is a folder,
 * the disk is full) leaves the config and the models of the earlier run as they were, instead
 * of a new config beside an old record.
 *
 * One writer at a time: begin takes flock(LOCK_EX | LOCK_NB) on "<prefix>.lock" and holds it to
 * the commit, so two runs on the same --save_path cannot interleave their renames into a mixed
 * set (seen in 1 of 24 concurrent runs before). A second run fails at once, naming the process
 * that holds the lock, rather than waiting: a calibration can take an hour, and two runs writing
 * one prefix is almost always a mistake in a script. The lock file holds the holder's pid and
 * is removed when the lock is released (removed while still held, and a run that locked a file
 * since unlinked tries again, so two runs never both believe they hold it).
 *
 * Crashes: SIGKILL during a save leaves "*.tmp.<pid>" files; the next begin on the prefix
 * removes those whose pid is gone and says so in one log line. */
#define _DEFAULT_SOURCE /* flock */
#include "base/outputs.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"
#include "base/log.h"

/* The pid in "<...>.tmp.<digits>", or 0 when name is not a temporary file of that form. */
static long tmp_pid(const char *name)
{
    const char *t = strstr(name, ".tmp.");
    if (!t) return 0;
    while (strstr(t + 1, ".tmp.")) t = strstr(t + 1, ".tmp.");
    const char *d = t + 5;
    if (!*d) return 0;
    for (const char *p = d; *p; p++)
        if (!isdigit((unsigned char)*p)) return 0;
    return strtol(d, NULL, 10);
}

static bool process_gone(long pid)
{
    return pid > 0 && pid != (long)getpid() && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

int calq__outputs_clean_stale(const char *prefix)
{
    char dir[4096];
    calq__dirname(prefix, dir, sizeof dir);
    const char *slash = strrchr(prefix, '/');
    const char *base = slash ? slash + 1 : prefix;
    size_t blen = strlen(base);
    DIR *dp = opendir(dir);
    if (!dp) return 0;
    char list[1024] = "";
    size_t at = 0;
    int n = 0;
    for (struct dirent *e = readdir(dp); e; e = readdir(dp)) {
        if (strncmp(e->d_name, base, blen) != 0) continue;
        long pid = tmp_pid(e->d_name);
        if (!process_gone(pid)) continue;
        char path[4096 + 256];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode) || unlink(path) != 0) continue;
        if (at < sizeof list) at += (size_t)snprintf(list + at, sizeof list - at, "%s%s", n ? ", " : "", e->d_name);
        n++;
    }
    closedir(dp);
    if (n)
        calq__log(CALQ_LOG_INFO,
                  "calq: removed %d temporary file%s that an interrupted run (a process that no longer exists) left "
                  "in %s: %s",
                  n, n == 1 ? "" : "s", dir, list);
    return n;
}

/* The pid written in an existing lock file, or 0. */
static long holder_pid(int fd)
{
    char buf[32] = "";
    ssize_t r = pread(fd, buf, sizeof buf - 1, 0);
    if (r <= 0) return 0;
    buf[r] = 0;
    return strtol(buf, NULL, 10);
}

static calq_status take_lock(calq_outputs *o, calq_error *err)
{
    for (int attempt = 0; attempt < 100; attempt++) {
        int fd = open(o->lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
        if (fd < 0)
            return calq__fail(err, CALQ_ERR_IO, NULL,
                              "cannot create the lock file %s (it keeps two runs from writing the outputs of %s at "
                              "once): %s",
                              o->lock_path, o->prefix, strerror(errno));
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            int e = errno;
            long pid = holder_pid(fd);
            close(fd);
            if (e == EWOULDBLOCK) {
                char who[64] = "another calq run";
                if (pid > 0) snprintf(who, sizeof who, "another calq run (pid %ld)", pid);
                return calq__fail(err, CALQ_ERR_IO, NULL,
                                  "%s is writing the outputs of %s now (it holds %s); nothing was written. Wait "
                                  "until it finishes, or give this run another --save_path",
                                  who, o->prefix, o->lock_path);
            }
            return calq__fail(err, CALQ_ERR_IO, NULL, "cannot lock %s: %s", o->lock_path, strerror(e));
        }
        /* the holder before us may have unlinked the file we opened: then lock the new one */
        struct stat a, b;
        if (fstat(fd, &a) == 0 && stat(o->lock_path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
            char pid[32];
            int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
            if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len) {
                /* the pid is only for the message a second run prints */
            }
            o->lock_fd = fd;
            return CALQ_OK;
        }
        close(fd);
    }
    return calq__fail(err, CALQ_ERR_IO, NULL, "cannot lock %s: it keeps being replaced", o->lock_path);
}

static void release(calq_outputs *o)
{
    if (o->lock_fd >= 0) {
        unlink(o->lock_path); /* while still held: see the top of the file */
        close(o->lock_fd);
    }
    free(o->prefix);
    free(o->lock_path);
    free(o);
}

calq_status calq__outputs_begin(const char *prefix, calq_outputs **out, calq_error *err)
{
    *out = NULL;
    if (!prefix || !*prefix)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL, "calq_outputs_begin: no prefix (the --save_path)");
    calq_outputs *o = calloc(1, sizeof *o);
    size_t n = strlen(prefix);
    if (o) {
        o->lock_fd = -1;
        o->prefix = malloc(n + 1);
        o->lock_path = malloc(n + 6);
    }
    if (!o || !o->prefix || !o->lock_path) {
        if (o) release(o);
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    }
    memcpy(o->prefix, prefix, n + 1);
    snprintf(o->lock_path, n + 6, "%s.lock", prefix);
    calq_status st = take_lock(o, err);
    if (st != CALQ_OK) {
        release(o);
        return st;
    }
    calq__outputs_clean_stale(prefix); /* under the lock: no live run of this prefix is writing */
    *out = o;
    return CALQ_OK;
}

calq_status calq__outputs_commit(calq_outputs *o, bool log, calq_error *err)
{
    if (!o) return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL, "calq_outputs_commit: no outputs");
    /* "wrote" names the staged files, "removed" the removal entries whose file exists (under the
     * lock, no other calq run changes that before the commit) */
    char *names[2] = {NULL, NULL};
    size_t len = 1;
    for (int i = 0; i < o->staged.n; i++) len += strlen(o->staged.f[i].path) + 2;
    for (int k = 0; log && k < 2; k++)
        if ((names[k] = malloc(len)) != NULL) names[k][0] = 0;
    for (int i = 0; log && i < o->staged.n; i++) {
        const bool rm = calq__staged_is_removal(&o->staged, i);
        char *list = names[rm];
        if (!list || (rm && access(o->staged.f[i].path, F_OK) != 0)) continue;
        strcat(strcat(list, list[0] ? ", " : ""), o->staged.f[i].path);
    }
    calq_status st = calq__staged_commit(&o->staged, err);
    if (st == CALQ_OK && names[0] && names[0][0]) calq__log(CALQ_LOG_INFO, "calq: wrote %s", names[0]);
    if (st == CALQ_OK && names[1] && names[1][0])
        calq__log(CALQ_LOG_INFO, "calq: removed %s (an earlier run's, which the files above replace)", names[1]);
    free(names[0]);
    free(names[1]);
    release(o);
    return st;
}

const char *calq__outputs_source(calq_outputs *o, const char *path)
{
    if (!o) return path;
    for (int i = 0; i < o->staged.n; i++)
        if (!calq__staged_is_removal(&o->staged, i) && strcmp(o->staged.f[i].path, path) == 0) {
            if (o->staged.f[i].fp) fflush(o->staged.f[i].fp);
            return o->staged.f[i].tmp_path;
        }
    return path;
}

/* ---- public ------------------------------------------------------------------------------- */

calq_status calq_outputs_begin(const char *prefix, calq_outputs **out, calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, out);
    *out = NULL;
    CALQ_REQUIRE(err, prefix);
    return calq__outputs_begin(prefix, out, err);
}

calq_status calq_outputs_commit(calq_outputs *o, calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, o);
    return calq__outputs_commit(o, true, err);
}

void calq_outputs_abort(calq_outputs *o)
{
    if (!o) return;
    calq__staged_abort(&o->staged);
    release(o);
}
