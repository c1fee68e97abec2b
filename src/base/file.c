#include "base/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"

/* What kind of file st is, for the message refusing it. */
static const char *file_kind(const struct stat *st)
{
    if (S_ISDIR(st->st_mode)) return "a folder";
    if (S_ISFIFO(st->st_mode)) return "a FIFO (named pipe)";
    if (S_ISCHR(st->st_mode)) return "a character device";
    if (S_ISBLK(st->st_mode)) return "a block device";
    if (S_ISSOCK(st->st_mode)) return "a socket";
    return "not a regular file";
}

/* The open descriptor of a regular file of at most max bytes, or -1 with err filled. */
static int open_regular_fd(const char *path, size_t max, const char *what, size_t *size, calq_error *err)
{
    /* O_NONBLOCK: opening a FIFO would otherwise wait for a writer; it does nothing for the
     * regular files that pass the check below */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        calq__fail(err, CALQ_ERR_IO, NULL, "cannot open %s: %s", calq__cut(path).s, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        calq__fail(err, CALQ_ERR_IO, NULL, "cannot read %s: %s", calq__cut(path).s, strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        calq__fail(err, CALQ_ERR_IO, NULL, "cannot read %s as %s: it is %s; calq reads only regular files",
                   calq__cut(path).s, what, file_kind(&st));
        close(fd);
        return -1;
    }
    if (st.st_size < 0 || (unsigned long long)st.st_size > (unsigned long long)max) {
        calq__fail(err, CALQ_ERR_IO, NULL,
                   "cannot read %s as %s: it has %lld bytes, more than the %zu calq reads as %s (is it the right "
                   "file?)",
                   calq__cut(path).s, what, (long long)st.st_size, max, what);
        close(fd);
        return -1;
    }
    *size = (size_t)st.st_size;
    return fd;
}

calq_status calq__open_regular(const char *path, size_t max, const char *what, FILE **fp, size_t *size, calq_error *err)
{
    *fp = NULL;
    int fd = open_regular_fd(path, max, what, size, err);
    if (fd < 0) return err->status;
    *fp = fdopen(fd, "rb");
    if (!*fp) {
        close(fd);
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory opening %s", calq__cut(path).s);
    }
    return CALQ_OK;
}

calq_status calq__read_file_max(const char *path, size_t max, const char *what, char **out, size_t *size,
                                calq_error *err)
{
    *out = NULL;
    *size = 0;
    if (max > CALQ_READ_MAX_BYTES) max = CALQ_READ_MAX_BYTES;
    size_t want;
    int fd = open_regular_fd(path, max, what, &want, err);
    if (fd < 0) return err->status;
    /* The size is a hint (a file can grow while it is read; /proc files say 0): read until the
     * end, but never past max. */
    size_t cap = want + 1 > 4096 ? want + 1 : 4096, n = 0;
    char *buf = malloc(cap);
    calq_status st =
        buf ? CALQ_OK : calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory reading %s", calq__cut(path).s);
    while (st == CALQ_OK) {
        if (cap - n < 2) {
            if (n > max) {
                st = calq__fail(err, CALQ_ERR_IO, NULL,
                                "cannot read %s as %s: it grew past the %zu bytes calq reads as %s", calq__cut(path).s,
                                what, max, what);
                break;
            }
            size_t nc = cap > max / 2 ? max + 2 : cap * 2;
            char *nb = realloc(buf, nc);
            if (!nb) {
                st = calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory reading %s", calq__cut(path).s);
                break;
            }
            buf = nb;
            cap = nc;
        }
        ssize_t r = read(fd, buf + n, cap - n - 1);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) st = calq__fail(err, CALQ_ERR_IO, NULL, "cannot read %s: %s", calq__cut(path).s, strerror(errno));
        if (r <= 0) break;
        n += (size_t)r;
    }
    close(fd);
    if (st == CALQ_OK && n > max)
        st = calq__fail(err, CALQ_ERR_IO, NULL, "cannot read %s as %s: it grew past the %zu bytes calq reads as %s",
                        calq__cut(path).s, what, max, what);
    if (st != CALQ_OK) {
        free(buf);
        return st;
    }
    buf[n] = 0;
    *out = buf;
    *size = n;
    return CALQ_OK;
}

calq_status calq__read_file(const char *path, char **out, size_t *size, calq_error *err)
{
    return calq__read_file_max(path, CALQ_READ_MAX_BYTES, "a model or data file", out, size, err);
}

void calq__dirname(const char *path, char *buf, size_t n)
{
    const char *slash = strrchr(path, '/');
    if (!slash) {
        snprintf(buf, n, ".");
    } else if (slash == path) {
        snprintf(buf, n, "/");
    } else {
        snprintf(buf, n, "%.*s", (int)(slash - path), path);
    }
}

calq_status calq__atomic_open(calq_atomic_file *f, const char *path, calq_error *err)
{
    memset(f, 0, sizeof *f);
    /* the rename at the end replaces whatever is there: --config_file /dev/null replaced the
     * device with a regular file, --json /dev/stdout the link (folders fail at the rename; a
     * link to a regular file is replaced, as before) */
    struct stat ls, ts;
    bool link = false, in_way = false;
    if (lstat(path, &ls) == 0) {
        link = S_ISLNK(ls.st_mode);
        if (link)
            in_way = stat(path, &ts) == 0 && !S_ISREG(ts.st_mode) && !S_ISDIR(ts.st_mode);
        else
            in_way = !S_ISREG(ls.st_mode) && !S_ISDIR(ls.st_mode);
    }
    if (in_way)
        return calq__fail(err, CALQ_ERR_IO, NULL,
                          "cannot write %s: it is %s%s, which writing the output would replace with a regular file; "
                          "give the path of a regular file",
                          calq__cut(path).s, link ? "a link to " : "", file_kind(link ? &ts : &ls));
    size_t len = strlen(path);
    f->path = malloc(len + 1);
    f->tmp_path = malloc(len + 32);
    if (!f->path || !f->tmp_path) {
        calq__atomic_abort(f);
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    }
    memcpy(f->path, path, len + 1);
    snprintf(f->tmp_path, len + 32, "%s.tmp.%ld", path, (long)getpid());
    f->fp = fopen(f->tmp_path, "wb");
    if (!f->fp) {
        calq__fail(err, CALQ_ERR_IO, NULL, "cannot write %s: %s", calq__cut(path).s, strerror(errno));
        free(f->path);
        free(f->tmp_path);
        memset(f, 0, sizeof *f);
        return CALQ_ERR_IO;
    }
    return CALQ_OK;
}

calq_status calq__atomic_commit(calq_atomic_file *f, calq_error *err)
{
    calq_status st = CALQ_OK;
    int bad = ferror(f->fp) || fflush(f->fp) != 0 || fsync(fileno(f->fp)) != 0;
    if (fclose(f->fp) != 0) bad = 1;
    f->fp = NULL;
    if (bad) {
        st = calq__fail(err, CALQ_ERR_IO, NULL, "cannot write %s: %s (the previous file, if any, is unchanged)",
                        calq__cut(f->path).s, strerror(errno));
        remove(f->tmp_path);
    } else if (rename(f->tmp_path, f->path) != 0) {
        st = calq__fail(err, CALQ_ERR_IO, NULL, "cannot replace %s: %s", calq__cut(f->path).s, strerror(errno));
        remove(f->tmp_path);
    }
    free(f->path);
    free(f->tmp_path);
    memset(f, 0, sizeof *f);
    return st;
}

void calq__atomic_abort(calq_atomic_file *f)
{
    if (f->fp) {
        fclose(f->fp);
        remove(f->tmp_path);
    }
    free(f->path);
    free(f->tmp_path);
    memset(f, 0, sizeof *f);
}

calq_status calq__staged_open(calq_staged_files *s, const char *path, FILE **fp, calq_error *err)
{
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->f[i].path, path) == 0)
            return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL, "%s would be written twice by one save",
                              calq__cut(path).s);
    if (s->n == CALQ_STAGED_MAX)
        return calq__fail(err, CALQ_ERR_INTERNAL, NULL, "more than %d output files at once", CALQ_STAGED_MAX);
    CALQ_TRY(calq__atomic_open(&s->f[s->n], path, err));
    *fp = s->f[s->n++].fp;
    return CALQ_OK;
}

calq_status calq__staged_write(calq_staged_files *s, const char *path, const void *data, size_t size, calq_error *err)
{
    FILE *fp;
    CALQ_TRY(calq__staged_open(s, path, &fp, err));
    if (size && fwrite(data, 1, size, fp) != size)
        return calq__fail(err, CALQ_ERR_IO, NULL, "cannot write %s: %s (disk full?)", calq__cut(path).s,
                          strerror(errno));
    return CALQ_OK;
}

calq_status calq__staged_remove(calq_staged_files *s, const char *path, calq_error *err)
{
    if (s->n >= CALQ_STAGED_MAX)
        return calq__fail(err, CALQ_ERR_INTERNAL, NULL, "more than %d outputs in one operation", CALQ_STAGED_MAX);
    char *p = strdup(path);
    if (!p) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    s->f[s->n++] = (calq_atomic_file){.path = p};
    return CALQ_OK;
}

calq_status calq__staged_commit(calq_staged_files *s, calq_error *err)
{
    calq_status st = CALQ_OK;
    /* phase 1: every temporary file complete on disk, or nothing is renamed */
    for (int i = 0; i < s->n && st == CALQ_OK; i++) {
        calq_atomic_file *f = &s->f[i];
        if (calq__staged_is_removal(s, i)) continue;
        errno = 0; /* ferror alone leaves errno as it was */
        int bad = ferror(f->fp) || fflush(f->fp) != 0 || fsync(fileno(f->fp)) != 0;
        if (fclose(f->fp) != 0) bad = 1;
        f->fp = NULL;
        struct stat sb;
        int saved = errno;
        if (bad)
            st = calq__fail(err, CALQ_ERR_IO, NULL,
                            "cannot write %s: %s (nothing was replaced; earlier outputs are unchanged)",
                            calq__cut(f->path).s, saved ? strerror(saved) : "write error");
        else if (lstat(f->path, &sb) == 0 && S_ISDIR(sb.st_mode)) /* rename would fail in phase 2 */
            st = calq__fail(err, CALQ_ERR_IO, NULL,
                            "cannot write %s: it is a folder (nothing was replaced; earlier outputs are unchanged)",
                            calq__cut(f->path).s);
    }
    /* phase 2: renames (same folder, so they cannot run out of space; what phase 1 checked
     * leaves only a permission change during the save, which is reported with the file) */
    for (int i = 0; i < s->n && st == CALQ_OK; i++)
        if (!calq__staged_is_removal(s, i) && rename(s->f[i].tmp_path, s->f[i].path) != 0)
            st =
                calq__fail(err, CALQ_ERR_IO, NULL, "cannot replace %s: %s", calq__cut(s->f[i].path).s, strerror(errno));
    /* phase 3: the earlier run's files the set replaces by nothing */
    for (int i = 0; i < s->n && st == CALQ_OK; i++)
        if (calq__staged_is_removal(s, i) && unlink(s->f[i].path) != 0 && errno != ENOENT)
            st = calq__fail(err, CALQ_ERR_IO, NULL, "cannot remove %s: %s", calq__cut(s->f[i].path).s, strerror(errno));
    calq__staged_abort(s); /* the temporary files left (none after a complete commit) */
    return st;
}

void calq__staged_truncate(calq_staged_files *s, int n)
{
    for (int i = n; i < s->n; i++) {
        calq_atomic_file *f = &s->f[i];
        if (f->fp) fclose(f->fp);
        if (f->tmp_path) remove(f->tmp_path); /* fails harmlessly for a renamed file */
        free(f->path);
        free(f->tmp_path);
        memset(f, 0, sizeof *f);
    }
    if (n < s->n) s->n = n;
}

void calq__staged_abort(calq_staged_files *s)
{
    calq__staged_truncate(s, 0);
}
