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
#include "calib/act_pack.h"
#include "base/bulk_mem.h"
#include "calib/calibrate.h" /* calq__now */

#define BATCH_END (-1)

typedef struct rec {
    int group; /* BATCH_END: the end of a batch */
    size_t n;
    float *x;      /* in one of the cache's arenas: n floats, or nnz packed ones after mask */
    uint8_t *mask; /* the packed form's mask (act_pack.h), NULL when x holds all n floats */
    size_t nnz;
} rec;

/* The mask's bytes rounded up to a cache line: the values after it start aligned. */
static size_t mask_room(size_t n)
{
    return (calq__pack_mask_bytes(n) + 63) & ~(size_t)63;
}

/* Elements of the chunk that starts at element j of n. */
static size_t chunk_len(size_t n, size_t j)
{
    return n - j < CALQ__PACK_CHUNK ? n - j : CALQ__PACK_CHUNK;
}

/* A tensor is packed when that saves at least an eighth of its bytes (mask included). */
static bool worth_packing(size_t n, size_t nnz)
{
    return n >= 64 && mask_room(n) + nnz * sizeof(float) + CALQ__PACK_SLACK <= n * sizeof(float) / 8 * 7;
}

/* The records' data live in large arenas, filled in order and freed together (a record is never
 * freed alone). An arena's pages are faulted in when it is mapped, on huge pages when free ones
 * exist (bulk_mem.h): first writes to fresh 4 KB pages were a third of a ResNet-18 calibration. */
#define ARENA_BYTES ((size_t)32 << 20)
#define ARENA_PAGE  ((size_t)4096)
typedef struct arena {
    calq__bulk mem; /* owned */
    size_t used;
} arena;

/* a record in the file: this header, then n floats, or when packed the mask's bytes and nnz floats */
typedef struct file_head {
    int32_t group;
    uint32_t packed; /* 1: the mask's bytes, then nnz floats; 0: n floats */
    uint64_t n, nnz;
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
    void *stage; /* a packed tensor on its way to or from the file (owned) */
    size_t stage_bytes;
    size_t *offs; /* per chunk of the tensor being packed: its first value's index (owned) */
    size_t n_offs;
    float **xbuf; /* per replay thread: a chunk of a packed record unpacked (owned; only during a replay) */
    int n_xbuf;
    bool any_packed; /* some record in memory is packed */
    int n_threads;   /* for packing and copying a tensor */
    arena *arenas;   /* owned, with their memory */
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
    if (!calq__bulk_alloc_threads(size, c->n_threads, &na->mem)) return NULL;
    na->used = n;
    c->n_arenas++;
    return na->mem.base;
}

calq_status calq__act_cache_create(size_t mem_bytes, const char *const *dirs, int n_dirs, int n_threads,
                                   calq__act_cache **out, calq_error *err)
{
    calq__act_cache *c = calloc(1, sizeof *c);
    if (!c) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory for the activation cache");
    c->budget = mem_bytes;
    c->n_threads = n_threads > 0 ? n_threads : 1;
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

static void free_xbufs(calq__act_cache *c)
{
    for (int t = 0; t < c->n_xbuf; t++) free(c->xbuf[t]);
    free(c->xbuf);
    c->xbuf = NULL;
    c->n_xbuf = 0;
}

void calq__act_cache_free(calq__act_cache *c)
{
    if (!c) return;
    free_records(c);
    if (c->fp) fclose(c->fp);
    free(c->buf);
    free(c->stage);
    free(c->offs);
    free_xbufs(c);
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

/* Counts x's kept elements per chunk (act_pack.h) on the cache's threads and turns the counts
 * into each chunk's first value index; false without memory for them. */
static bool chunk_offsets(calq__act_cache *c, const float *x, size_t n, size_t *nnz)
{
    size_t nc = (n + CALQ__PACK_CHUNK - 1) / CALQ__PACK_CHUNK;
    if (nc > c->n_offs) {
        size_t *o = realloc(c->offs, nc * sizeof *o);
        if (!o) return false;
        c->offs = o;
        c->n_offs = nc;
    }
    size_t *offs = c->offs;
#pragma omp parallel for schedule(static) num_threads(c->n_threads) if (nc > 1)
    for (size_t k = 0; k < nc; k++) {
        size_t j = k * CALQ__PACK_CHUNK, m = chunk_len(n, j);
        offs[k] = calq__act_pack_count(x + j, m);
    }
    size_t sum = 0;
    for (size_t k = 0; k < nc; k++) {
        size_t cnt = offs[k];
        offs[k] = sum;
        sum += cnt;
    }
    *nnz = sum;
    return true;
}

/* Packs x into mask and vals, chunk by chunk at the offsets chunk_offsets left. */
static void pack_chunks(const calq__act_cache *c, const float *x, size_t n, uint8_t *mask, float *vals)
{
    size_t nc = (n + CALQ__PACK_CHUNK - 1) / CALQ__PACK_CHUNK;
    const size_t *offs = c->offs;
#pragma omp parallel for schedule(static) num_threads(c->n_threads) if (nc > 1)
    for (size_t k = 0; k < nc; k++) {
        size_t j = k * CALQ__PACK_CHUNK, m = chunk_len(n, j);
        calq__act_pack(x + j, m, mask + j / 8, vals + offs[k]);
    }
}

/* memcpy of a tensor on the cache's threads */
static void copy_chunks(const calq__act_cache *c, float *dst, const float *x, size_t n)
{
    size_t nc = (n + CALQ__PACK_CHUNK - 1) / CALQ__PACK_CHUNK;
#pragma omp parallel for schedule(static) num_threads(c->n_threads) if (nc > 1)
    for (size_t k = 0; k < nc; k++) {
        size_t j = k * CALQ__PACK_CHUNK, m = chunk_len(n, j);
        memcpy(dst + j, x + j, m * sizeof *x);
    }
}

/* c->stage with room for `bytes`; false without memory */
static bool stage_room(calq__act_cache *c, size_t bytes)
{
    if (bytes <= c->stage_bytes) return true;
    void *p = realloc(c->stage, bytes);
    if (!p) return false;
    c->stage = p;
    c->stage_bytes = bytes;
    return true;
}

/* The bytes after a record's header in the file (a damaged header may claim any n). */
static uint64_t stored_bytes(const file_head *h)
{
    if (h->n > UINT64_MAX / 8) return UINT64_MAX;
    return h->packed ? (h->n + 7) / 8 + h->nnz * sizeof(float) : h->n * sizeof(float);
}

/* Bytes of one chunk's mask and values in c->stage (a chunk of a packed record on its way to or
 * from the file). */
#define STAGE_BYTES (CALQ__PACK_CHUNK / 8 + CALQ__PACK_CHUNK * sizeof(float) + CALQ__PACK_SLACK)

/* A packed record goes to the file chunk by chunk, each chunk's mask then its values, so writing
 * and reading it need a chunk's buffer, not a tensor's. */
static void file_put(calq__act_cache *c, int group, const float *x, size_t n, bool packed, size_t nnz)
{
    double t0 = calq__now();
    if (!c->fp && !open_file(c)) return;
    file_head h = {.group = group, .packed = packed, .n = n, .nnz = packed ? nnz : n};
    bool ok = fwrite(&h, sizeof h, 1, c->fp) == 1;
    if (packed) {
        if (ok && !stage_room(c, STAGE_BYTES)) {
            give_up(c, "out of memory for the activation cache%s (%s)", "", ENOMEM);
            return;
        }
        uint8_t *mask = c->stage;
        float *vals = (float *)(mask + CALQ__PACK_CHUNK / 8);
        for (size_t j = 0; ok && j < n; j += CALQ__PACK_CHUNK) {
            size_t m = chunk_len(n, j), mb = calq__pack_mask_bytes(m);
            size_t k = calq__act_pack(x + j, m, mask, vals);
            ok = fwrite(mask, 1, mb, c->fp) == mb && (!k || fwrite(vals, sizeof *vals, k, c->fp) == k);
        }
    } else {
        ok = ok && (!n || fwrite(x, sizeof *x, n, c->fp) == n);
    }
    if (!ok) {
        give_up(c, "writing the activation cache's temporary file failed (in %s: %s)", c->dirs[0], errno);
        return;
    }
    c->file_bytes += sizeof h + stored_bytes(&h);
    c->file_seconds += calq__now() - t0;
}

static void put(calq__act_cache *c, int group, const float *x, size_t n)
{
    if (c->broken || c->stopped) return;
    if (group == BATCH_END) c->batches++;
    size_t nnz = n;
    if (n >= 64 && !chunk_offsets(c, x, n, &nnz)) {
        give_up(c, "out of memory for the activation cache%s (%s)", "", ENOMEM);
        return;
    }
    const bool packed = worth_packing(n, nnz);
    size_t data = packed ? mask_room(n) + nnz * sizeof *x + CALQ__PACK_SLACK : n * sizeof *x;
    size_t bytes = data + sizeof(rec);
    if (!c->spilling && c->used + bytes > c->budget) c->spilling = true; /* from here on, in order, to the file */
    if (c->spilling) {
        file_put(c, group, x, n, packed, nnz);
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
    *r = (rec){.group = group, .n = n, .nnz = packed ? nnz : n};
    if (n) {
        char *p = arena_take(c, data);
        if (!p) {
            give_up(c, "out of memory for the activation cache%s (%s)", "", ENOMEM);
            return;
        }
        if (packed) {
            r->mask = (uint8_t *)p;
            r->x = (float *)(p + mask_room(n));
            pack_chunks(c, x, n, r->mask, r->x);
            c->any_packed = true;
        } else {
            r->x = (float *)p;
            copy_chunks(c, r->x, x, n);
        }
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

static calq_status replay_file(calq__act_cache *c, const calq__act_cache_fns *fn, void *user, int batch,
                               calq_error *err);

static void replay_rec(const rec *r, const calq__act_cache_fns *fn, void *user, int batch, float *buf);
static void unpack_chunks(const uint8_t *mask, const float *vals, size_t n, int group, const calq__act_cache_fns *fn,
                          void *user, int batch, float *buf);

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
static void replay_batch(calq__act_cache *c, size_t i0, size_t i1, const calq__act_cache_fns *fn, void *user, int batch,
                         int n_threads)
{
    bool once = n_threads > 1 && i1 - i0 > 1 && groups_once(c, i0, i1);
    if (!once) {
        for (size_t i = i0; i < i1; i++) replay_rec(&c->recs[i], fn, user, batch, c->xbuf ? c->xbuf[0] : NULL);
        return;
    }
#pragma omp parallel for schedule(dynamic, 1) num_threads(n_threads)
    for (size_t i = i0; i < i1; i++)
        replay_rec(&c->recs[i], fn, user, batch, c->xbuf ? c->xbuf[omp_get_thread_num()] : NULL);
}

/* One record to fn->tensor: its own floats, or a packed one chunk by chunk, each unpacked into
 * buf (CALQ__PACK_CHUNK floats, which stay in the core's cache for the calibrators: unpacking a
 * whole layer input first wrote and read back every byte of it); nothing when fn->want says its
 * group takes no more data (a third pass wants a few layers: unpacking the others would cost as
 * much as the pass). */
static void replay_rec(const rec *r, const calq__act_cache_fns *fn, void *user, int batch, float *buf)
{
    if (fn->want && !fn->want(user, r->group)) return;
    if (!r->mask) {
        fn->tensor(user, batch, r->group, r->x, r->n);
        return;
    }
    unpack_chunks(r->mask, r->x, r->n, r->group, fn, user, batch, buf);
}

/* A packed tensor's chunks to fn->tensor, in order. */
static void unpack_chunks(const uint8_t *mask, const float *vals, size_t n, int group, const calq__act_cache_fns *fn,
                          void *user, int batch, float *buf)
{
    size_t used = 0;
    for (size_t j = 0; j < n; j += CALQ__PACK_CHUNK) {
        size_t m = chunk_len(n, j);
        used += calq__act_unpack(mask + j / 8, vals + used, m, buf);
        fn->tensor(user, batch, group, buf, m);
    }
}

/* One chunk's buffer per replay thread for the packed records. */
static bool alloc_xbufs(calq__act_cache *c, int n_threads)
{
    if (!c->any_packed) return true;
    c->xbuf = calloc((size_t)n_threads, sizeof *c->xbuf);
    if (!c->xbuf) return false;
    c->n_xbuf = n_threads;
    for (int t = 0; t < n_threads; t++)
        if (!(c->xbuf[t] = aligned_alloc(64, CALQ__PACK_CHUNK * sizeof(float)))) return false;
    return true;
}

calq_status calq__act_cache_replay(calq__act_cache *c, const calq__act_cache_fns *fn, void *user, int n_threads,
                                   calq_error *err)
{
    if (c->broken)
        return calq__fail(err, CALQ_ERR_INTERNAL, NULL, "the activation cache was replayed after it gave up: %s",
                          c->why);
    if (n_threads < 1) n_threads = 1;
    if (!alloc_xbufs(c, n_threads)) {
        free_xbufs(c);
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL,
                          "out of memory replaying the activation cache (%d buffers of %zu floats)", n_threads,
                          CALQ__PACK_CHUNK);
    }
    int batch = 0;
    size_t i0 = 0;
    for (size_t i = 0; i < c->n_recs; i++) {
        if (c->recs[i].group != BATCH_END) continue;
        replay_batch(c, i0, i, fn, user, batch, n_threads);
        i0 = i + 1;
        calq_status st = fn->end_batch(user, batch++, err);
        if (st != CALQ_OK) {
            free_xbufs(c);
            return st;
        }
    }
    /* the batch the file continues: its first tensors, in order */
    replay_batch(c, i0, c->n_recs, fn, user, batch, 1);
    free_xbufs(c); /* as c->buf below */
    if (!c->fp) return CALQ_OK;
    calq_status st = replay_file(c, fn, user, batch, err);
    /* The buffer goes now, not with the cache: when the cache holds only the first batches, the
     * model runs for the others after the replay, and the buffer (one layer input, 2.4 MB on
     * UltraFace) would add to that run's peak, so the peak would depend on whether batch_num
     * exceeds what the cache holds (bench/calib_memory.sh, CALQ_CACHE_SPILL=never). */
    free(c->buf);
    c->buf = NULL;
    c->buf_n = 0;
    free(c->stage);
    c->stage = NULL;
    c->stage_bytes = 0;
    return st;
}

static calq_status damaged(const calq__act_cache *c, calq_error *err)
{
    return calq__fail(err, CALQ_ERR_IO, NULL,
                      "the activation cache's temporary file is shorter than written or damaged (in %s); was the "
                      "disk full or the file changed?",
                      c->dirs[0]);
}

/* A packed record of the file, chunk by chunk to fn->tensor: each chunk's values are as many as
 * its mask has bits, and all of them the header's nnz, or the file is damaged (a mask with more
 * bits would have the unpacking read past the values). */
static calq_status file_chunks(calq__act_cache *c, const file_head *h, const calq__act_cache_fns *fn, void *user,
                               int batch, calq_error *err)
{
    if (!stage_room(c, STAGE_BYTES))
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory reading back a cached activation");
    uint8_t *mask = c->stage;
    float *vals = (float *)(mask + CALQ__PACK_CHUNK / 8);
    uint64_t total = 0;
    for (size_t j = 0; j < h->n; j += CALQ__PACK_CHUNK) {
        size_t m = chunk_len((size_t)h->n, j), mb = calq__pack_mask_bytes(m);
        if (fread(mask, 1, mb, c->fp) != mb) return damaged(c, err);
        if (m % 8) mask[mb - 1] &= (uint8_t)((1u << (m % 8)) - 1u); /* bits past the tensor: not values */
        size_t k = 0;
        for (size_t b = 0; b < mb; b++) k += (size_t)__builtin_popcount(mask[b]);
        total += k;
        if (total > h->nnz || (k && fread(vals, sizeof *vals, k, c->fp) != k)) return damaged(c, err);
        calq__act_unpack(mask, vals, m, c->buf);
        fn->tensor(user, batch, h->group, c->buf, m);
    }
    return total == h->nnz ? CALQ_OK : damaged(c, err);
}

/* The file's part of a replay, after the memory's (which ended at batch `batch`). */
static calq_status replay_file(calq__act_cache *c, const calq__act_cache_fns *fn, void *user, int batch,
                               calq_error *err)
{
    if (fflush(c->fp) != 0 || fseek(c->fp, 0, SEEK_SET) != 0)
        return calq__fail(err, CALQ_ERR_IO, NULL, "the activation cache's temporary file (in %s) cannot be read: %s",
                          c->dirs[0], strerror(errno));
    uint64_t left = c->file_bytes;
    while (left) {
        file_head h;
        if (left < sizeof h || fread(&h, sizeof h, 1, c->fp) != 1 || h.group < BATCH_END || h.packed > 1 ||
            h.nnz > h.n || (!h.packed && h.nnz != h.n) || stored_bytes(&h) > left - sizeof h)
            return calq__fail(err, CALQ_ERR_IO, NULL,
                              "the activation cache's temporary file is shorter than written or damaged (%llu of "
                              "%llu bytes left to read); was the disk full or the file changed?",
                              (unsigned long long)left, (unsigned long long)c->file_bytes);
        left -= sizeof h;
        if (h.group == BATCH_END) {
            CALQ_TRY(fn->end_batch(user, batch++, err));
            continue;
        }
        if (fn->want && !fn->want(user, h.group)) {
            if (fseeko(c->fp, (off_t)stored_bytes(&h), SEEK_CUR) != 0)
                return calq__fail(err, CALQ_ERR_IO, NULL,
                                  "the activation cache's temporary file could not be read back: %s", strerror(errno));
            left -= stored_bytes(&h);
            continue;
        }
        size_t n = (size_t)h.n;
        size_t need = h.packed && n > CALQ__PACK_CHUNK ? CALQ__PACK_CHUNK : n; /* packed: a chunk at a time */
        if (need > c->buf_n) {
            float *b = realloc(c->buf, need * sizeof *b);
            if (!b)
                return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL,
                                  "out of memory reading back a cached activation of %zu floats", n);
            c->buf = b;
            c->buf_n = need;
        }
        if (h.packed)
            CALQ_TRY(file_chunks(c, &h, fn, user, batch, err));
        else if (n && fread(c->buf, sizeof *c->buf, n, c->fp) != n)
            return calq__fail(err, CALQ_ERR_IO, NULL, "the activation cache's temporary file could not be read back");
        else
            fn->tensor(user, batch, h.group, c->buf, n);
        left -= stored_bytes(&h);
    }
    return CALQ_OK;
}
