/* The activation cache (act_cache.h): a sequence of records (group, n, n floats) and batch ends,
 * the first ones in memory while they fit the budget, all later ones in an unlinked temporary
 * file, so the replay order is the store order. */
#include <errno.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "calib/act_cache.h"
#include "base/bulk_mem.h"
#include "calib/calibrate.h" /* calq__now */

#define BATCH_END (-1)

typedef struct rec {
    int group; /* BATCH_END: the end of a batch */
    size_t n;
    float *x; /* in one of the cache's arenas */
} rec;

/* The records' data live in large arenas, filled in order and freed together (a record is never
 * freed alone). An arena's pages are faulted in when it is mapped, on huge pages when free ones
 * exist (bulk_mem.h): first writes to fresh 4 KB pages were a third of a ResNet-18 calibration. */
#define ARENA_BYTES ((size_t)32 << 20)
#define ARENA_PAGE  ((size_t)4096)
typedef struct arena {
    calq__bulk mem; /* owned */
    size_t used;
} arena;

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
    float *buf; /* replay buffer for the file's records (owned; only during a replay) */
    size_t buf_n;
    arena *arenas; /* owned, with their memory */
    size_t n_arenas, cap_arenas;
    bool stopped;        /* calq__act_cache_stop: nothing more is stored */
    int batches;         /* complete batches stored */
    double file_seconds; /* time spent writing the file */
    unsigned *mark;      /* per group: the stamp of the last replayed batch that had it (owned) */
    size_t n_mark;
    unsigned stamp;
};

/* n bytes (64-aligned) from the current arena, or from a new one; NULL when memory runs out */
static void *arena_take(calq__act_cache *c, size_t n)
{
    n = (n + 63) & ~(size_t)63;
    arena *a = c->n_arenas ? &c->arenas[c->n_arenas - 1] : NULL;
    if (a && a->mem.size - a->used >= n) {
        void *p = a->mem.base + a->used;
        a->used += n;
        return p;
    }
    if (c->n_arenas == c->cap_arenas) {
        size_t cap = c->cap_arenas ? 2 * c->cap_arenas : 16;
        arena *na = realloc(c->arenas, cap * sizeof *na);
        if (!na) return NULL;
        c->arenas = na;
        c->cap_arenas = cap;
    }
    /* the last arena is no larger than the budget left (plus a page): memory stays in budget */
    size_t left = c->budget > c->used ? c->budget - c->used : 0;
    size_t size = n > ARENA_BYTES ? n : left < ARENA_BYTES ? (n > left ? n : left) : ARENA_BYTES;
    size = (size + ARENA_PAGE - 1) / ARENA_PAGE * ARENA_PAGE;
    arena *na = &c->arenas[c->n_arenas];
    if (!calq__bulk_alloc(size, &na->mem)) return NULL;
    na->used = n;
    c->n_arenas++;
    return na->mem.base;
}

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
    for (size_t i = 0; i < c->n_arenas; i++) calq__bulk_free(&c->arenas[i].mem);
    free(c->arenas);
    c->arenas = NULL;
    c->n_arenas = c->cap_arenas = 0;
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
    free(c->mark);
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
    double t0 = calq__now();
    if (!c->fp && !open_file(c)) return;
    file_head h = {.group = group, .zero = 0, .n = n};
    if (fwrite(&h, sizeof h, 1, c->fp) != 1 || (n && fwrite(x, sizeof *x, n, c->fp) != n)) {
        give_up(c, "writing the activation cache's temporary file failed (in %s: %s)", c->dirs[0], errno);
        return;
    }
    c->file_bytes += sizeof h + n * sizeof *x;
    c->file_seconds += calq__now() - t0;
}

static void put(calq__act_cache *c, int group, const float *x, size_t n)
{
    if (c->broken || c->stopped) return;
    if (group == BATCH_END) c->batches++;
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
        r->x = arena_take(c, n * sizeof *x);
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

void calq__act_cache_stop(calq__act_cache *c)
{
    if (c) c->stopped = true;
}

int calq__act_cache_batches(const calq__act_cache *c)
{
    return c ? c->batches : 0;
}

double calq__act_cache_file_seconds(const calq__act_cache *c)
{
    return c ? c->file_seconds : 0.0;
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

static calq_status replay_file(calq__act_cache *c, calq__act_cache_tensor_fn tensor, calq__act_cache_batch_fn end_batch,
                               void *user, int batch, calq_error *err);

/* Whether no group has two of the records [i0, i1) (false also without memory for the marks). */
static bool groups_once(calq__act_cache *c, size_t i0, size_t i1)
{
    int top = 0;
    for (size_t i = i0; i < i1; i++) top = c->recs[i].group > top ? c->recs[i].group : top;
    if ((size_t)top >= c->n_mark) {
        unsigned *m = realloc(c->mark, ((size_t)top + 1) * sizeof *m);
        if (!m) return false;
        memset(m + c->n_mark, 0, ((size_t)top + 1 - c->n_mark) * sizeof *m);
        c->mark = m;
        c->n_mark = (size_t)top + 1;
    }
    c->stamp++;
    for (size_t i = i0; i < i1; i++) {
        unsigned *m = &c->mark[c->recs[i].group];
        if (*m == c->stamp) return false;
        *m = c->stamp;
    }
    return true;
}

/* The records [i0, i1) of one batch. Each group stores at most one tensor per batch (a tensor is
 * computed once per run), so they touch disjoint calibrators and go to the threads in any order;
 * a batch that holds a group twice (never seen, but not excluded by the types) goes in order. */
static void replay_batch(calq__act_cache *c, size_t i0, size_t i1, calq__act_cache_tensor_fn tensor, void *user,
                         int batch, int n_threads)
{
    bool once = n_threads > 1 && i1 - i0 > 1 && groups_once(c, i0, i1);
    if (!once) {
        for (size_t i = i0; i < i1; i++) tensor(user, batch, c->recs[i].group, c->recs[i].x, c->recs[i].n);
        return;
    }
#pragma omp parallel for schedule(dynamic, 1) num_threads(n_threads)
    for (size_t i = i0; i < i1; i++) tensor(user, batch, c->recs[i].group, c->recs[i].x, c->recs[i].n);
}

calq_status calq__act_cache_replay(calq__act_cache *c, calq__act_cache_tensor_fn tensor,
                                   calq__act_cache_batch_fn end_batch, void *user, int n_threads, calq_error *err)
{
    if (c->broken)
        return calq__fail(err, CALQ_ERR_INTERNAL, NULL, "the activation cache was replayed after it gave up: %s",
                          c->why);
    int batch = 0;
    size_t i0 = 0;
    for (size_t i = 0; i < c->n_recs; i++) {
        if (c->recs[i].group != BATCH_END) continue;
        replay_batch(c, i0, i, tensor, user, batch, n_threads);
        i0 = i + 1;
        CALQ_TRY(end_batch(user, batch++, err));
    }
    /* the batch the file continues: its first tensors, in order */
    replay_batch(c, i0, c->n_recs, tensor, user, batch, 1);
    if (!c->fp) return CALQ_OK;
    calq_status st = replay_file(c, tensor, end_batch, user, batch, err);
    /* The buffer goes now, not with the cache: when the cache holds only the first batches, the
     * model runs for the others after the replay, and the buffer (one layer input, 2.4 MB on
     * UltraFace) would add to that run's peak, so the peak would depend on whether batch_num
     * exceeds what the cache holds (bench/calib_memory.sh, CALQ_CACHE_SPILL=never). */
    free(c->buf);
    c->buf = NULL;
    c->buf_n = 0;
    return st;
}

/* The file's part of a replay, after the memory's (which ended at batch `batch`). */
static calq_status replay_file(calq__act_cache *c, calq__act_cache_tensor_fn tensor, calq__act_cache_batch_fn end_batch,
                               void *user, int batch, calq_error *err)
{
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
