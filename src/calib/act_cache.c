/* The activation cache (act_cache.h): a sequence of records (group, n, n floats) and batch ends,
 * the first ones in memory while they fit the budget, all later ones in an unlinked temporary
 * file, so the replay order is the store order. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "calib/act_cache.h"

#define BATCH_END (-1)

typedef struct rec {
    int group; /* BATCH_END: the end of a batch */
    size_t n;
    float *x; /* owned */
} rec;

/* a record in the file: this header, then n floats */
typedef struct file_head {
    int32_t group;
    uint32_t zero;
    uint64_t n;
} file_head;

struct calq__act_cache {
    size_t budget, used; /* memory: the records' data and their entries */
    rec *recs;           /* the records in memory (owned) */
    size_t n_recs, cap_recs;
    char dirs[3][1024];
    int n_dirs;
    FILE *fp; /* the file, unlinked (owned); NULL until the budget is exceeded */
    uint64_t file_bytes;
    bool spilling, broken;
    char why[1400];
    float *buf; /* replay buffer for the file's records (owned) */
    size_t buf_n;
};

calq_status calq__act_cache_create(size_t mem_bytes, const char *const *dirs, int n_dirs, calq__act_cache **out,
                                   calq_error *err)
{
    calq__act_cache *c = calloc(1, sizeof *c);
    if (!c) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory for the activation cache");
    c->budget = mem_bytes;
    for (int i = 0; i < n_dirs && c->n_dirs < 3; i++)
        if (dirs[i] && *dirs[i]) snprintf(c->dirs[c->n_dirs++], sizeof c->dirs[0], "%s", dirs[i]);
    *out = c;
    return CALQ_OK;
}

static void free_records(calq__act_cache *c)
{
    for (size_t i = 0; i < c->n_recs; i++) free(c->recs[i].x);
    free(c->recs);
    c->recs = NULL;
    c->n_recs = c->cap_recs = 0;
    c->used = 0;
}

void calq__act_cache_free(calq__act_cache *c)
{
    if (!c) return;
    free_records(c);
    if (c->fp) fclose(c->fp);
    free(c->buf);
    free(c);
}

static void give_up(calq__act_cache *c, const char *fmt, const char *what, int e)
{
    if (c->broken) return;
    c->broken = true;
    snprintf(c->why, sizeof c->why, fmt, what, strerror(e));
    free_records(c);
    if (c->fp) fclose(c->fp);
    c->fp = NULL;
}

/* The file, in the first folder that takes it; unlinked at once so nothing is left behind. */
static bool open_file(calq__act_cache *c)
{
    int e = ENOENT;
    for (int i = 0; i < c->n_dirs; i++) {
        char path[1100];
        snprintf(path, sizeof path, "%s/.calq_act_cache_XXXXXX", c->dirs[i]);
        int fd = mkstemp(path);
        if (fd < 0) {
            e = errno;
            continue;
        }
        unlink(path);
        c->fp = fdopen(fd, "w+b");
        if (c->fp) return true;
        e = errno;
        close(fd);
    }
    give_up(c, "no folder accepts the activation cache's temporary file (%s: %s)", c->n_dirs ? c->dirs[0] : "none", e);
    return false;
}

static void file_put(calq__act_cache *c, int group, const float *x, size_t n)
{
    if (!c->fp && !open_file(c)) return;
    file_head h = {.group = group, .zero = 0, .n = n};
    if (fwrite(&h, sizeof h, 1, c->fp) != 1 || (n && fwrite(x, sizeof *x, n, c->fp) != n)) {
        give_up(c, "writing the activation cache's temporary file failed (in %s: %s)", c->dirs[0], errno);
        return;
    }
    c->file_bytes += sizeof h + n * sizeof *x;
}

static void put(calq__act_cache *c, int group, const float *x, size_t n)
{
    if (c->broken) return;
    size_t bytes = n * sizeof *x + sizeof(rec);
    if (!c->spilling && c->used + bytes > c->budget) c->spilling = true; /* from here on, in order, to the file */
    if (c->spilling) {
        file_put(c, group, x, n);
        return;
    }
    if (c->n_recs == c->cap_recs) {
        size_t cap = c->cap_recs ? 2 * c->cap_recs : 64;
        rec *r = realloc(c->recs, cap * sizeof *r);
        if (!r) {
            give_up(c, "out of memory for the activation cache%s (%s)", "", ENOMEM);
            return;
        }
        c->recs = r;
        c->cap_recs = cap;
    }
    rec *r = &c->recs[c->n_recs];
    r->group = group;
    r->n = n;
    r->x = NULL;
    if (n) {
        r->x = malloc(n * sizeof *x);
        if (!r->x) {
            give_up(c, "out of memory for the activation cache%s (%s)", "", ENOMEM);
            return;
        }
        memcpy(r->x, x, n * sizeof *x);
    }
    c->n_recs++;
    c->used += bytes;
}

void calq__act_cache_put(calq__act_cache *c, int group, const float *x, size_t n)
{
    put(c, group, x, n);
}

void calq__act_cache_end_batch(calq__act_cache *c)
{
    put(c, BATCH_END, NULL, 0);
}

bool calq__act_cache_usable(const calq__act_cache *c)
{
    return c && !c->broken;
}

const char *calq__act_cache_why(const calq__act_cache *c)
{
    return c ? c->why : "";
}

uint64_t calq__act_cache_mem_bytes(const calq__act_cache *c)
{
    return c ? c->used : 0;
}

uint64_t calq__act_cache_file_bytes(const calq__act_cache *c)
{
    return c ? c->file_bytes : 0;
}

calq_status calq__act_cache_replay(calq__act_cache *c, calq__act_cache_tensor_fn tensor,
                                   calq__act_cache_batch_fn end_batch, void *user, calq_error *err)
{
    if (c->broken)
        return calq__fail(err, CALQ_ERR_INTERNAL, NULL, "the activation cache was replayed after it gave up: %s",
                          c->why);
    int batch = 0;
    for (size_t i = 0; i < c->n_recs; i++) {
        const rec *r = &c->recs[i];
        if (r->group == BATCH_END) {
            CALQ_TRY(end_batch(user, batch++, err));
        } else
            tensor(user, batch, r->group, r->x, r->n);
    }
    if (!c->fp) return CALQ_OK;
    if (fflush(c->fp) != 0 || fseek(c->fp, 0, SEEK_SET) != 0)
        return calq__fail(err, CALQ_ERR_IO, NULL, "the activation cache's temporary file (in %s) cannot be read: %s",
                          c->dirs[0], strerror(errno));
    uint64_t left = c->file_bytes;
    while (left) {
        file_head h;
        if (left < sizeof h || fread(&h, sizeof h, 1, c->fp) != 1 || h.zero != 0 || h.n > (left - sizeof h) / 4)
            return calq__fail(err, CALQ_ERR_IO, NULL,
                              "the activation cache's temporary file is shorter than written or damaged (%llu of "
                              "%llu bytes left to read); was the disk full or the file changed?",
                              (unsigned long long)left, (unsigned long long)c->file_bytes);
        left -= sizeof h;
        if (h.group == BATCH_END) {
            CALQ_TRY(end_batch(user, batch++, err));
            continue;
        }
        if (h.n > c->buf_n) {
            float *b = realloc(c->buf, (size_t)h.n * sizeof *b);
            if (!b)
                return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL,
                                  "out of memory reading back a cached activation of %llu floats",
                                  (unsigned long long)h.n);
            c->buf = b;
            c->buf_n = (size_t)h.n;
        }
        if (h.n && fread(c->buf, sizeof *c->buf, (size_t)h.n, c->fp) != h.n)
            return calq__fail(err, CALQ_ERR_IO, NULL, "the activation cache's temporary file could not be read back");
        left -= h.n * sizeof *c->buf;
        tensor(user, batch, h.group, c->buf, (size_t)h.n);
    }
    return CALQ_OK;
}
