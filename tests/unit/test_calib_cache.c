/* The activation cache of calq_calibrate (src/calib/act_cache.h): pass 2 reads the layers'
 * inputs from the cache instead of running the model, and the record is the same bytes as
 * without a cache, whether the cache lives in memory, in its temporary file or in both, for any
 * thread count; with IFMR (UltraFace, ONNX; MTCNN det3, Caffe) and with a two-pass range
 * calibrator (mse; kl and auto replay through the same code). Also the cache itself: order kept
 * across the memory/file boundary, a failing progress callback stops a replay, a folder that
 * refuses the file makes it give up (the run then re-runs the model), and no file is left
 * behind. */
#include <dirent.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "calib/act_cache.h"
#include "calib/act_pack.h"

#include "expect.h"
#include "fixtures.h"

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)sz + 1);
    *n = b && fread(b, 1, (size_t)sz, f) == (size_t)sz ? (size_t)sz : 0;
    fclose(f);
    return b;
}

static int count_cache_files(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    if (!d) return 0;
    for (struct dirent *e; (e = readdir(d));) n += strncmp(e->d_name, ".calq_act_cache_", 16) == 0;
    closedir(d);
    return n;
}

/* One calibration into dir/<tag>_record.txt; returns the record's bytes (owned by the caller). */
static char *calibrate(calq_model *m, const char *images, const calq_image_opts *io, const char *algo, int batch_num,
                       int cache_mb, int threads, const char *dir, const char *tag, size_t *size)
{
    calq_error err = {0};
    calq_config_opts co;
    calq_config_opts_init(&co);
    co.batch_num = batch_num;
    co.act_algo = algo;
    calq_config *cfg = NULL;
    calq_data *data = NULL;
    char path[1200];
    snprintf(path, sizeof path, "%s/%s_record.txt", dir, tag);
    EXPECT_STATUS(calq_config_create(m, &co, &cfg, &err), CALQ_OK, &err, NULL);
    EXPECT_STATUS(calq_data_open_images(images, io, 1, &data, &err), CALQ_OK, &err, NULL);
    calq_calibrate_opts opts;
    calq_calibrate_opts_init(&opts);
    EXPECT(opts.cache_mb == CALQ_CALIBRATE_CACHE_MB_DEFAULT);
    opts.log = 0;
    opts.n_threads = threads;
    opts.cache_mb = cache_mb;
    char *bytes = NULL;
    *size = 0;
    if (cfg && data) {
        EXPECT_STATUS(calq_calibrate(m, cfg, data, &opts, path, &err), CALQ_OK, &err, NULL);
        bytes = slurp(path, size);
        unlink(path);
        snprintf(path, sizeof path, "%s/%s.lock", dir, tag);
        unlink(path);
    }
    EXPECT(count_cache_files(dir) == 0);
    calq_data_free(data);
    calq_config_free(cfg);
    return bytes;
}

/* The record with the cache equals the one without: in memory then in the file (mixed_mb holds
 * some batches but not all) at 1 thread, and with `all` also in memory only and in the file only. */
static void check_model(const char *label, calq_model *m, const char *images, const calq_image_opts *io,
                        const char *algo, int batch_num, int mixed_mb, bool all, const char *dir)
{
    size_t n0 = 0;
    char *want = calibrate(m, images, io, algo, batch_num, -1, 2, dir, "nocache", &n0);
    EXPECT(want && n0 > 0);
    const struct {
        int mb, threads;
        const char *what, *spill; /* CALQ_CACHE_SPILL */
    } runs[] = {{mixed_mb, 1, "memory, then file, 1 thread", "always"},
                {mixed_mb, 2, "memory, then the model again for the other batches", "never"},
                {CALQ_CALIBRATE_CACHE_MB_DEFAULT, 2, "memory", "auto"},
                {0, 2, "file only", "always"}};
    int same = 0, n_runs = all ? 4 : 2; /* not all: the mixed cases only */
    for (int r = 0; r < n_runs; r++) {
        size_t n = 0;
        setenv("CALQ_CACHE_SPILL", runs[r].spill, 1);
        char *got = calibrate(m, images, io, algo, batch_num, runs[r].mb, runs[r].threads, dir, "cache", &n);
        unsetenv("CALQ_CACHE_SPILL");
        bool eq = want && got && n == n0 && memcmp(want, got, n) == 0;
        if (!eq) fprintf(stderr, "%s, %s: the record with the cache (%s) differs\n", label, algo, runs[r].what);
        EXPECT(eq);
        same += eq;
        free(got);
    }
    printf("%s, %s, %d batches: the record is the same %zu bytes without a cache (2 threads) and with it (%d of %d "
           "runs: memory then file at 1 thread, memory then the model%s)\n",
           label, algo, batch_num, n0, same, n_runs, all ? ", memory only, file only" : "");
    free(want);
}

typedef struct replay_log {
    int n, batches, bad, stop_at;
    float next;
} replay_log;

static void on_tensor(void *user, int batch, int group, const float *x, size_t n)
{
    replay_log *l = user;
    for (size_t i = 0; i < n; i++) l->bad += x[i] != l->next + (float)i;
    l->bad += group != l->n % 3 || batch != l->batches;
    l->next += (float)n;
    l->n++;
}

static calq_status on_batch(void *user, int batch, calq_error *err)
{
    replay_log *l = user;
    l->bad += batch != l->batches;
    l->batches++;
    if (l->stop_at && l->batches == l->stop_at)
        return calq__fail(err, CALQ_ERR_GENERIC, NULL, "stopped after batch %d", batch);
    return CALQ_OK;
}

static const calq__act_cache_fns plain_fns = {on_tensor, on_batch, NULL};

static void test_cache_unit(const char *dir)
{
    calq_error err = {0};
    float x[1000];
    for (int budget = 0; budget <= 1; budget++) {
        calq__act_cache *c = NULL;
        const char *dirs[2] = {"/nonexistent/calq", dir}; /* the first refuses: the second takes the file */
        EXPECT_STATUS(calq__act_cache_create(budget ? 20000 : 0, dirs, 2, 2, &c, &err), CALQ_OK, &err, NULL);
        float next = 0;
        for (int b = 0, k = 0; b < 10; b++) {
            for (int t = 0; t < 3; t++, k++) {
                size_t n = (size_t)(k * 37 % 1000);
                for (size_t i = 0; i < n; i++) x[i] = next + (float)i;
                next += (float)n;
                calq__act_cache_put(c, k % 3, x, n);
            }
            calq__act_cache_end_batch(c);
        }
        EXPECT(calq__act_cache_usable(c));
        EXPECT(calq__act_cache_file_bytes(c) > 0);
        EXPECT(budget ? calq__act_cache_mem_bytes(c) > 0 && calq__act_cache_mem_bytes(c) <= 20000
                      : calq__act_cache_mem_bytes(c) == 0);
        EXPECT(count_cache_files(dir) == 0);   /* unlinked while open */
        for (int pass = 0; pass < 2; pass++) { /* a third pass replays it again */
            replay_log l = {0};
            EXPECT_STATUS(calq__act_cache_replay(c, &plain_fns, &l, 1, &err), CALQ_OK, &err, NULL);
            EXPECT(l.n == 30 && l.batches == 10 && l.bad == 0 && l.next == next);
        }
        /* a batch callback that fails (the progress callback asked to stop) ends the replay there,
         * in the memory part and in the file part */
        for (int stop = 1; stop <= 10; stop += 9) {
            replay_log l = {.stop_at = stop};
            EXPECT_STATUS(calq__act_cache_replay(c, &plain_fns, &l, 1, &err), CALQ_ERR_GENERIC, &err,
                          "stopped after batch");
            EXPECT(l.batches == stop && l.n == 3 * stop && l.bad == 0);
        }
        calq__act_cache_free(c);
    }
    /* stopped after 6 batches: only those are replayed (the run's later passes infer the rest) */
    {
        calq__act_cache *c = NULL;
        const char *dirs[1] = {dir};
        EXPECT_STATUS(calq__act_cache_create(3000, dirs, 1, 2, &c, &err), CALQ_OK, &err, NULL);
        float next = 0;
        for (int b = 0, k = 0; b < 10; b++) {
            for (int t = 0; t < 3; t++, k++) {
                size_t n = (size_t)(k * 37 % 1000);
                for (size_t i = 0; i < n; i++) x[i] = next + (float)i;
                next += b < 6 ? (float)n : 0.0f;
                calq__act_cache_put(c, k % 3, x, n);
            }
            calq__act_cache_end_batch(c);
            if (b == 5) calq__act_cache_stop(c);
        }
        EXPECT(calq__act_cache_batches(c) == 6 && calq__act_cache_file_bytes(c) > 0);
        EXPECT(calq__act_cache_file_seconds(c) > 0.0);
        replay_log l = {0};
        EXPECT_STATUS(calq__act_cache_replay(c, &plain_fns, &l, 1, &err), CALQ_OK, &err, NULL);
        EXPECT(l.n == 18 && l.batches == 6 && l.bad == 0 && l.next == next);
        calq__act_cache_free(c);
    }
    /* no folder takes the file: the cache gives up and says why */
    calq__act_cache *c = NULL;
    const char *bad[1] = {"/nonexistent/calq"};
    EXPECT_STATUS(calq__act_cache_create(100, bad, 1, 1, &c, &err), CALQ_OK, &err, NULL);
    for (int i = 0; i < 100; i++) x[i] = (float)i;
    calq__act_cache_put(c, 0, x, 10); /* fits the 100 bytes */
    EXPECT(calq__act_cache_usable(c));
    calq__act_cache_put(c, 0, x, 100); /* does not */
    EXPECT(!calq__act_cache_usable(c));
    EXPECT(strstr(calq__act_cache_why(c), "/nonexistent/calq") != NULL);
    EXPECT(calq__act_cache_mem_bytes(c) == 0);
    calq__act_cache_free(c);
}

/* A parallel replay: the tensors of a batch go to several threads at once, but each group still
 * gets its own in store order, batch by batch, and batch ends come after their tensors, in
 * order. A batch that holds a group twice is replayed in order. Tensor k holds k + i. */
typedef struct par_log {
    int last[8];  /* per group: the last tensor index seen */
    int batch_of; /* tensors seen when the current batch ended */
    int seen, bad, batches;
    int order[64]; /* the tensors of batch 3 (the one with a repeated group), in call order */
    int n_order;
} par_log;

static void on_tensor_par(void *user, int batch, int group, const float *x, size_t n)
{
    par_log *l = user;
    int k = n ? (int)x[0] : -1, bad = 0;
    for (size_t i = 0; i < n; i++) bad += x[i] != (float)k + (float)i;
    if (k == 24) /* batch 3's first tensor: parallel calls would overtake it */
        for (double t0 = omp_get_wtime(); omp_get_wtime() - t0 < 0.02;) {
        }
#pragma omp critical
    {
        l->bad += bad + (k <= l->last[group]) + (batch != l->batches);
        l->last[group] = k;
        l->seen++;
        if (batch == 3 && l->n_order < 64) l->order[l->n_order++] = k;
    }
}

static calq_status on_batch_par(void *user, int batch, calq_error *err)
{
    (void)err;
    par_log *l = user;
    l->bad += batch != l->batches || l->seen < l->batch_of;
    l->batch_of = l->seen;
    l->batches++;
    return CALQ_OK;
}

static const calq__act_cache_fns par_fns = {on_tensor_par, on_batch_par, NULL};

static void test_cache_parallel(const char *dir)
{
    calq_error err = {0};
    static float x[40000];
    calq__act_cache *c = NULL;
    const char *dirs[1] = {dir};
    EXPECT_STATUS(calq__act_cache_create((size_t)64 << 20, dirs, 1, 2, &c, &err), CALQ_OK, &err, NULL);
    int k = 0;
    for (int b = 0; b < 6; b++) {
        for (int g = 0; g < 8; g++, k++) {
            int group = b == 3 && g == 5 ? 2 : g; /* batch 3 feeds group 2 twice */
            size_t n = (size_t)(1000 + 4000 * ((g * 7 + b) % 9));
            for (size_t i = 0; i < n; i++) x[i] = (float)k + (float)i;
            calq__act_cache_put(c, group, x, n);
        }
        calq__act_cache_end_batch(c);
    }
    EXPECT(calq__act_cache_file_bytes(c) == 0);
    for (int threads = 1; threads <= 3; threads++) {
        par_log l = {.bad = 0};
        for (int g = 0; g < 8; g++) l.last[g] = -1;
        EXPECT_STATUS(calq__act_cache_replay(c, &par_fns, &l, threads, &err), CALQ_OK, &err, NULL);
        EXPECT(l.bad == 0 && l.seen == 48 && l.batches == 6);
        bool in_order = l.n_order == 8;
        for (int i = 0; in_order && i < 8; i++) in_order = l.order[i] == 24 + i;
        EXPECT(in_order);
    }
    calq__act_cache_free(c);
    printf("parallel replay: each group's tensors in store order and every batch end after its tensors, for 1-3 "
           "threads; a batch with a repeated group in store order\n");
}

/* ---- packed tensors (act_pack.h) ------------------------------------------------------------ */

/* Element i of tensor `k`: ReLU-like data with runs and scattered +0.0, and the values packing
 * must keep bit for bit: -0.0, NaNs with payloads, infinities, subnormals. */
static float sparse_value(int k, size_t i)
{
    uint32_t h = (uint32_t)(i * 2654435761u) ^ (uint32_t)(k * 40503u + 17u);
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    uint32_t u;
    switch (h % 23) {
    case 0: u = 0x80000000u; break;             /* -0.0 */
    case 1: u = 0x7fc00000u | (h >> 9); break;  /* NaN with a payload */
    case 2: u = 0x00000001u + (h >> 12); break; /* subnormal */
    case 3: u = h & 1 ? 0x7f800000u : 0xff800000u; break;
    default: {
        if ((i / 37 + (size_t)k) % 5 == 0 || h % 7 < 3) return 0.0f; /* runs and scattered zeros */
        float f = (float)(h >> 8) / 65536.0f;
        memcpy(&u, &f, sizeof u);
    }
    }
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* The kernels against their _ref forms, for every length up to 100 and a few long ones (AVX-512
 * blocks with tails), all-zero and no-zero inputs; unpacking gives back the same bytes. */
static void test_pack_kernels(void)
{
    static float x[70000], vals[70000 + 16], vals_ref[70000 + 16], back[70000];
    static uint8_t mask[70000 / 8 + 1], mask_ref[70000 / 8 + 1];
    size_t lens[] = {0, 1, 7, 15, 16, 17, 31, 33, 64, 100, 1000, 4099, 65536, 70000};
    int bad = 0, cases = 0;
    for (int mode = 0; mode < 3; mode++) {
        for (size_t L = 0; L < sizeof lens / sizeof lens[0] + 100; L++) {
            size_t n = L < 100 ? L : lens[L - 100];
            for (size_t i = 0; i < n; i++) x[i] = mode == 0 ? sparse_value(3, i) : mode == 1 ? 0.0f : 1.0f + (float)i;
            memset(mask, 0xAA, sizeof mask);
            memset(mask_ref, 0x55, sizeof mask_ref);
            size_t c = calq__act_pack(x, n, mask, vals);
            size_t c_ref = calq__act_pack_ref(x, n, mask_ref, vals_ref);
            bad += c != c_ref || c != calq__act_pack_count(x, n) || c != calq__act_pack_count_ref(x, n);
            bad += memcmp(mask, mask_ref, calq__pack_mask_bytes(n)) != 0 || memcmp(vals, vals_ref, c * 4) != 0;
            bad += mode == 1 ? c != 0 : mode == 2 ? c != n : 0;
            memset(back, 0xFF, sizeof back);
            bad += calq__act_unpack(mask, vals, n, back) != c;
            bad += memcmp(back, x, n * 4) != 0;
            memset(back, 0xFF, sizeof back);
            bad += calq__act_unpack_ref(mask, vals, n, back) != c;
            bad += memcmp(back, x, n * 4) != 0;
            cases++;
        }
    }
    EXPECT(bad == 0);
    printf("pack kernels: %d cases, fast = _ref and unpack(pack(x)) = x byte for byte\n", cases);
}

typedef struct packed_log {
    int seen, bad, batches, skipped_want;
    int refuse_group; /* want() refuses this group (-1: none) */
    size_t pos[4];    /* per group: elements of its tensor received in this batch */
    int pieces;       /* calls (a packed tensor comes in chunks) */
} packed_log;

static size_t packed_len(int k)
{
    static const size_t lens[] = {200000, 1000, 17, 65541, 64, 63, 131072, 5};
    return lens[k % 8];
}

/* A piece of tensor k = batch * 4 + group: the next elements of it, in order. */
static void on_tensor_packed(void *user, int batch, int group, const float *x, size_t n)
{
    packed_log *l = user;
    int k = batch * 4 + group;
    size_t at = l->pos[group];
    int bad = at + n > packed_len(k) || group == l->refuse_group;
    for (size_t i = 0; !bad && i < n; i++) {
        float want = sparse_value(k, at + i);
        bad = memcmp(&x[i], &want, sizeof want) != 0;
    }
    l->pos[group] = at + n; /* one thread per group at a time (act_cache.h) */
#pragma omp critical
    {
        l->bad += bad;
        l->pieces++;
    }
}

/* At a batch's end every group's tensor arrived whole (nothing of a refused one). */
static calq_status on_batch_packed(void *user, int batch, calq_error *err)
{
    (void)err;
    packed_log *l = user;
    l->bad += batch != l->batches;
    for (int g = 0; g < 4; g++) {
        size_t want = g == l->refuse_group ? 0 : packed_len(batch * 4 + g);
        l->bad += l->pos[g] != want;
        l->seen += g != l->refuse_group && l->pos[g] == want;
        l->pos[g] = 0;
    }
    l->batches++;
    return CALQ_OK;
}

static bool want_packed(void *user, int group)
{
    packed_log *l = user;
    return group != l->refuse_group;
}

static const calq__act_cache_fns packed_fns = {on_tensor_packed, on_batch_packed, want_packed};

/* A cache of sparse tensors (chunked, odd lengths, too small to pack) in memory only, file only
 * and both, stored with 1-3 threads: replayed byte for byte with 1-3 threads, the stored bytes
 * the same for every thread count and, in memory, well under the raw size; a refused group is
 * skipped. */
static void test_cache_packed(const char *dir)
{
    calq_error err = {0};
    static float x[200000];
    const size_t budgets[3] = {(size_t)64 << 20, 0, (size_t)3 << 19};
    int bad = 0;
    for (int bi = 0; bi < 3; bi++) {
        uint64_t mem0 = 0, file0 = 0;
        for (int put_threads = 1; put_threads <= 3; put_threads++) {
            calq__act_cache *c = NULL;
            const char *dirs[1] = {dir};
            EXPECT_STATUS(calq__act_cache_create(budgets[bi], dirs, 1, put_threads, &c, &err), CALQ_OK, &err, NULL);
            uint64_t raw = 0;
            for (int b = 0; b < 6; b++) {
                for (int g = 0; g < 4; g++) {
                    int k = b * 4 + g;
                    size_t n = packed_len(k);
                    for (size_t i = 0; i < n; i++) x[i] = sparse_value(k, i);
                    raw += n * 4;
                    calq__act_cache_put(c, g, x, n);
                }
                calq__act_cache_end_batch(c);
            }
            EXPECT(calq__act_cache_usable(c));
            uint64_t mem = calq__act_cache_mem_bytes(c), file = calq__act_cache_file_bytes(c);
            if (put_threads == 1) mem0 = mem, file0 = file;
            bad += mem != mem0 || file != file0;
            if (bi == 0) EXPECT(file == 0 && mem < raw * 3 / 4); /* about 45 % +0.0 */
            if (bi == 1) EXPECT(mem == 0 && file < raw * 3 / 4);
            if (bi == 2) EXPECT(mem > 0 && file > 0);
            for (int threads = 1; threads <= 3; threads++)
                for (int refuse = -1; refuse <= 2; refuse += 3) {
                    packed_log l = {.refuse_group = refuse};
                    EXPECT_STATUS(calq__act_cache_replay(c, &packed_fns, &l, threads, &err), CALQ_OK, &err, NULL);
                    /* 24 tensors (18 without the refused group); the long packed ones in chunks */
                    bad += l.bad != 0 || l.batches != 6 || l.seen != (refuse < 0 ? 24 : 18) || l.pieces <= l.seen;
                }
            calq__act_cache_free(c);
        }
    }
    EXPECT(bad == 0);
    printf("packed cache: memory, file and both, stored with 1-3 threads (same bytes) and replayed with 1-3, byte "
           "for byte, long tensors in chunks; refused groups skipped\n");
}

static void on_tensor_any(void *user, int batch, int group, const float *x, size_t n)
{
    (void)user, (void)batch, (void)group, (void)x, (void)n;
}

static calq_status on_batch_any(void *user, int batch, calq_error *err)
{
    (void)user, (void)batch, (void)err;
    return CALQ_OK;
}

static const calq__act_cache_fns packed_fns_any = {on_tensor_any, on_batch_any, NULL};

typedef struct zero_log {
    size_t n, nonzero;
    int batches;
} zero_log;

static void on_tensor_zero(void *user, int batch, int group, const float *x, size_t n)
{
    (void)batch, (void)group;
    zero_log *z = user;
    size_t nz = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        nz += u != 0;
    }
#pragma omp critical
    {
        z->n += n;
        z->nonzero += nz;
    }
}

static calq_status on_batch_zero(void *user, int batch, calq_error *err)
{
    (void)batch, (void)err;
    ((zero_log *)user)->batches++;
    return CALQ_OK;
}

static const calq__act_cache_fns zero_fns = {on_tensor_zero, on_batch_zero, NULL};

/* The cache's unlinked temporary file, found through /proc/self/fd (-1 when none). */
static int cache_file_fd(void)
{
    DIR *d = opendir("/proc/self/fd");
    int found = -1;
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d));) {
        char path[64], target[1024];
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        ssize_t k = readlink(path, target, sizeof target - 1);
        if (k <= 0) continue;
        target[k] = 0;
        if (strstr(target, "/.calq_act_cache_")) found = atoi(e->d_name);
    }
    closedir(d);
    return found;
}

/* A packed record whose mask was damaged in the file (more bits than its values, or fewer) fails
 * the replay with the "damaged" error instead of unpacking past its values (ASan would see it);
 * a tensor of +0.0 only goes through memory and file; packing and unpacking in a buffer of
 * exactly nnz values plus the slack (the ASan build checks the slack is enough). */
static void test_cache_damaged(const char *dir)
{
    calq_error err = {0};
    static float x[150000];
    for (int flip = 0; flip < 2; flip++) {
        calq__act_cache *c = NULL;
        const char *dirs[1] = {dir};
        EXPECT_STATUS(calq__act_cache_create(0, dirs, 1, 2, &c, &err), CALQ_OK, &err, NULL);
        for (size_t i = 0; i < 150000; i++) x[i] = i % 3 ? 0.0f : 1.0f + (float)i;
        calq__act_cache_put(c, 0, x, 150000);
        calq__act_cache_end_batch(c);
        int fd = cache_file_fd();
        EXPECT(fd >= 0);
        if (fd >= 0) {
            /* the second chunk's mask: all bits set (flip 0) or none (flip 1) */
            unsigned char junk[64];
            memset(junk, flip ? 0x00 : 0xFF, sizeof junk);
            off_t at = 24 + 8192 + (off_t)(65536 / 3 + 1) * 4 + 100; /* header, mask 0, values 0, into mask 1 */
            EXPECT(pwrite(fd, junk, sizeof junk, at) == (ssize_t)sizeof junk);
            packed_log l = {.refuse_group = -1};
            EXPECT_STATUS(calq__act_cache_replay(c, &packed_fns_any, &l, 1, &err), CALQ_ERR_IO, &err, "damaged");
        }
        calq__act_cache_free(c);
    }
    /* +0.0 only: nothing kept, the same bytes back from memory and from the file */
    for (int budget = 0; budget < 2; budget++) {
        calq__act_cache *c = NULL;
        const char *dirs[1] = {dir};
        EXPECT_STATUS(calq__act_cache_create(budget ? (size_t)1 << 20 : 0, dirs, 1, 2, &c, &err), CALQ_OK, &err, NULL);
        memset(x, 0, sizeof x);
        calq__act_cache_put(c, 0, x, 150000);
        calq__act_cache_end_batch(c);
        EXPECT(budget ? calq__act_cache_mem_bytes(c) < 150000 / 4 : calq__act_cache_file_bytes(c) < 150000 / 4);
        zero_log z = {0};
        EXPECT_STATUS(calq__act_cache_replay(c, &zero_fns, &z, 2, &err), CALQ_OK, &err, NULL);
        EXPECT(z.n == 150000 && z.nonzero == 0 && z.batches == 1);
        calq__act_cache_free(c);
    }
    /* the slack: a heap buffer of exactly nnz floats and CALQ__PACK_SLACK bytes */
    size_t n = 70001, nnz = 0;
    for (size_t i = 0; i < n; i++) x[i] = sparse_value(5, i);
    nnz = calq__act_pack_count(x, n);
    uint8_t *mask = malloc(calq__pack_mask_bytes(n));
    float *vals = malloc(nnz * sizeof *vals + CALQ__PACK_SLACK), *back = malloc(n * sizeof *back);
    EXPECT(calq__act_pack(x, n, mask, vals) == nnz);
    EXPECT(calq__act_unpack(mask, vals, n, back) == nnz && !memcmp(back, x, n * sizeof *x));
    free(mask);
    free(vals);
    free(back);
    printf("damaged packed records refused; an all-zero tensor; the unpacking's slack\n");
}

int main(void)
{
    char faces[1024], a[1024], b[1024];
    fx_shared_path(faces, sizeof faces, FX_FACES);
    char dir[] = "/tmp/calq_cache_test_XXXXXX";
    if (!mkdtemp(dir)) return 1;
    test_cache_unit(dir);
    test_cache_parallel(dir);
    test_pack_kernels();
    test_cache_packed(dir);
    test_cache_damaged(dir);
    calq_error err = {0};
    calq_model *m = NULL;
    /* a model that is there must load: only a missing file is a skip */
    fx_shared_path(a, sizeof a, FX_ULTRAFACE);
    if (NEED_FILE(faces) && NEED_FILE(a)) {
        EXPECT_STATUS(fx_ultraface_load(a, &m, &err), CALQ_OK, &err, NULL);
        calq_image_opts io;
        fx_ultraface_image_opts(&io);
        /* one photo's layer inputs are 12.9 MB: 20 MB holds one batch and a half. The mixed case
         * only (6 MB in the file): det3 below covers memory only and file only with little disk
         * traffic (a loaded disk once stalled the 26 MB file-only run past ctest's timeout) */
        if (m) check_model("UltraFace slim-320", m, faces, &io, "ifmr", 2, 20, false, dir);
        calq_model_free(m);
        m = NULL;
    }
    fx_shared_path(a, sizeof a, "models/mtcnn/det3.prototxt");
    fx_shared_path(b, sizeof b, "models/mtcnn/det3.caffemodel");
    if (NEED_FILE(faces) && NEED_FILE(a) && NEED_FILE(b)) {
        EXPECT_STATUS(calq_model_load_caffe(a, b, &m, &err), CALQ_OK, &err, NULL);
        calq_value_info in;
        int64_t dims[4] = {1, 3, 48, 48};
        if (m) calq_model_input_info(m, 0, &in);
        if (m) EXPECT_STATUS(calq_model_set_input_shape(m, in.name, dims, 4, &err), CALQ_OK, &err, NULL);
        calq_image_opts io;
        calq_image_opts_init(&io);
        io.width = 48;
        io.height = 48;
        for (int c = 0; c < 3; c++) io.mean[c] = 127.5f, io.std[c] = 128.0f;
        /* det3's layer inputs are about 0.1 MB per photo: a 0 MB budget spills from the start,
         * the default keeps everything, 1 MB about one batch */
        if (m) check_model("MTCNN det3", m, faces, &io, "ifmr", 3, 1, true, dir);
        if (m) check_model("MTCNN det3", m, faces, &io, "mse", 3, 1, false, dir); /* a two-pass range calibrator */
        calq_model_free(m);
    }
    rmdir(dir);
    return TEST_RESULT();
}
