/* The activation cache of a calibration run (calibrate.c): while pass 1 runs the model, it keeps
 * every tensor a later pass needs (IFMR's loss pass, kl/mse's second pass), first in memory up
 * to a budget, then in a temporary file; passes 2.. replay it in the same order instead of
 * running the model again, so each batch is inferred once.
 *
 * The file is created in the first folder of a list that accepts it (the record's folder, then
 * TMPDIR, then /tmp) and unlinked at once: it is gone when the run ends, fails or is killed.
 * When no folder accepts it or a write fails (disk full), the cache gives up quietly
 * (calq__act_cache_usable false, its memory freed) and the run re-runs the model for the later
 * passes, as without a cache.
 *
 * Tensors are stored without their +0.0 elements when that saves an eighth of their bytes
 * (act_pack.h): a mask and the other elements, replayed as the same bytes. A calibration's
 * layer inputs are mostly ReLU outputs, so the budget holds about twice the batches and there is
 * half the memory to fault in.
 *
 * Memory: at most the budget, plus a chunk's buffer per replay thread, one tensor's buffer while
 * replaying the file's unpacked records, and a chunk's buffer while writing or reading the file's
 * packed ones (they are stored chunk by chunk), whatever batch_num. Owner: the calq__calib
 * (calq__act_cache_free). */
#ifndef CALQ_CALIB_ACT_CACHE_H
#define CALQ_CALIB_ACT_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "calq.h"

typedef struct calq__act_cache calq__act_cache;

/* mem_bytes: the memory budget (0: everything goes to the file). dirs: candidate folders for the
 * file, in order (NULL entries are skipped). n_threads: threads that pack and copy a stored
 * tensor (the stored bytes do not depend on it). */
calq_status calq__act_cache_create(size_t mem_bytes, const char *const *dirs, int n_dirs, int n_threads,
                                   calq__act_cache **out, calq_error *err);
void calq__act_cache_free(calq__act_cache *c);

/* Appends tensor x[0..n) of calibration group `group` to the current batch; end_batch closes the
 * batch. Both do nothing once the cache gave up. */
void calq__act_cache_put(calq__act_cache *c, int group, const float *x, size_t n);
void calq__act_cache_end_batch(calq__act_cache *c);
bool calq__act_cache_usable(const calq__act_cache *c);
/* Stores nothing more (the batches after the last complete one are then run again by the later
 * passes); the number of complete batches stored; the seconds spent writing the file so far. */
void calq__act_cache_stop(calq__act_cache *c);
int calq__act_cache_batches(const calq__act_cache *c);
double calq__act_cache_file_seconds(const calq__act_cache *c);
/* Why it gave up (a sentence), or "". */
const char *calq__act_cache_why(const calq__act_cache *c);

/* Bytes held in memory and in the file. */
uint64_t calq__act_cache_mem_bytes(const calq__act_cache *c);
uint64_t calq__act_cache_file_bytes(const calq__act_cache *c);

/* Calls fn->tensor(user, batch, group, x, n) for every stored tensor and fn->end_batch(user,
 * batch, err) after each complete batch, in the order they were stored (a batch cut by
 * calq__act_cache_stop is not replayed). A packed tensor comes in consecutive pieces of
 * CALQ__PACK_CHUNK elements (the last one shorter), in order: `tensor` must take a tensor in
 * pieces as it takes it whole (the calibrators' later passes do: their sums and histograms
 * follow the elements' order, not the calls). fn->want (optional) is asked first for each tensor: a
 * tensor whose group it refuses is skipped (not unpacked, not read from the file). The tensors
 * of one batch in memory go to up to n_threads threads at once (at most one per group, and each
 * group's in store order): `tensor` and `want` must accept concurrent calls for different
 * groups. Those from the file come in order, one at a time. Fails when the file cannot be read
 * back, without memory for unpacking, or with end_batch's status when it is not CALQ_OK (the
 * replay stops there). */
typedef struct calq__act_cache_fns {
    void (*tensor)(void *user, int batch, int group, const float *x, size_t n);
    calq_status (*end_batch)(void *user, int batch, calq_error *err);
    bool (*want)(void *user, int group);
} calq__act_cache_fns;
calq_status calq__act_cache_replay(calq__act_cache *c, const calq__act_cache_fns *fn, void *user, int n_threads,
                                   calq_error *err);

#endif
