/* The activation cache of a calibration run (calibrate.c): while pass 1 runs the model, it keeps
 * every tensor a later pass needs (IFMR's loss pass, kl/mse's second pass), first in memory up
 * to a budget, then in a temporary file; passes 2.. replay it in the same order instead of
 * running the model again, so each batch is inferred once.
 *
 * The file is created in the first folder of a list that accepts it (the record's folder, then
 * TMPDIR, then /tmp) and unlinked at once: it is gone when the run ends, fails or is killed.
 * When no folder accepts it or a write fails (disk full), the cache gives up quietly
 * (calq__act_cache_usable false, its memory freed) and the run re-runs the model for the later
 * passes, as without a cache. Memory: at most the budget plus one tensor's buffer for replaying
 * from the file, whatever batch_num. Owner: the calq__calib (calq__act_cache_free). */
#ifndef CALQ_CALIB_ACT_CACHE_H
#define CALQ_CALIB_ACT_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "calq.h"

typedef struct calq__act_cache calq__act_cache;

/* mem_bytes: the memory budget (0: everything goes to the file). dirs: candidate folders for the
 * file, in order (NULL entries are skipped). */
calq_status calq__act_cache_create(size_t mem_bytes, const char *const *dirs, int n_dirs, calq__act_cache **out,
                                   calq_error *err);
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

/* Calls tensor(user, batch, group, x, n) for every stored tensor and end_batch(user, batch, err)
 * after each complete batch, in the order they were stored (a batch cut by calq__act_cache_stop
 * is not replayed). The tensors of one batch in memory go to up to n_threads threads at once
 * (at most one per group, and each group's in store order): `tensor` must accept concurrent calls
 * for different groups. Those from the file come in order, one at a time. Fails when the file cannot be read back, or
 * with end_batch's status when it is not CALQ_OK (the replay stops there). */
typedef void (*calq__act_cache_tensor_fn)(void *user, int batch, int group, const float *x, size_t n);
typedef calq_status (*calq__act_cache_batch_fn)(void *user, int batch, calq_error *err);
calq_status calq__act_cache_replay(calq__act_cache *c, calq__act_cache_tensor_fn tensor,
                                   calq__act_cache_batch_fn end_batch, void *user, int n_threads, calq_error *err);

#endif
