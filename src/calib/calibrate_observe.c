/* What one batch feeds: the session calls calq__calib_observe for every observed tensor (the
 * input of each calibrator group). Pass 1 feeds IFMR's statistics pass or HFMG's histogram and
 * records where bad values are (batch, sample), so a failure can say where it came from
 * without keeping any activation; later passes feed IFMR's loss pass only. Nothing is kept
 * across batches but the calibrators' bounded state (amct-reference.md §3.2 is what AMCT does
 * instead: it stores every batch) and the activation cache (act_cache.h), which pass 1 fills for
 * the groups that need more passes, so that they replay it instead of running the model. */
#include <math.h>
#include <string.h>
#include <time.h>

#include "base/error.h"
#include "calib/calibrate.h"
#include "calib/data.h"

/* The batch count the calibrators may size their tails by (count = numel x batches): 0, i.e.
 * unknown, when the batches differ in shape (text lines of several widths) */
static int feed_batches(const calq__calib *cal)
{
    return cal->data && cal->data->shapes_vary ? 0 : cal->batch_num;
}

double calq__now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Per-batch scan: counts, finite range, first non-finite value and the largest |x|, each with
 * its sample (dim 0 of the activation). The element-by-element rules are scan_one's. */
static void scan_one(calq__tensor_stats *s, float v, int64_t j, int64_t per_sample, int batch)
{
    if (!isfinite(v)) {
        int kind = isnan(v) ? 0 : v > 0 ? 1 : 2;
        if (kind == 0)
            s->nan_count++;
        else if (kind == 1)
            s->pos_inf_count++;
        else
            s->neg_inf_count++;
        if (s->bad_batch < 0) {
            s->bad_batch = batch;
            s->bad_sample = (int)(j / per_sample);
            s->bad_kind = kind;
        }
        return;
    }
    if (s->min > s->max) s->min = s->max = v;
    if (v < s->min) s->min = v;
    if (v > s->max) s->max = v;
    float a = fabsf(v);
    if (s->absmax_batch < 0 || a > s->absmax) {
        s->absmax = a;
        s->absmax_batch = batch;
        s->absmax_sample = (int)(j / per_sample);
    }
}

#define SCAN_BLOCK 256
#define SCREEN_RUN 64 /* blocks screened per call of screen() */

/* Each block's minimum, maximum, largest |x| and whether it is finite, for the blocks of
 * SCAN_BLOCK elements of x[0..n). Cloned per instruction set (static, so that the resolver is
 * not exported): every observed element goes through it, and the extremes are the same values
 * in any order (they are only compared below). */
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
static void
screen(const float *x, int64_t n, float *bmn, float *bmx, float *bamx, unsigned char *bfin)
{
    for (int64_t j0 = 0, q = 0; j0 < n; j0 += SCAN_BLOCK, q++) {
        int64_t m = n - j0 < SCAN_BLOCK ? n - j0 : SCAN_BLOCK;
        const float *b = x + j0;
        float mn = INFINITY, mx = -INFINITY, amx = 0.0f;
        int finite = 1;
#if !defined(__clang__) /* clang refuses (-Wpass-failed) what GCC vectorizes here */
#pragma omp simd reduction(min : mn) reduction(max : mx, amx) reduction(& : finite)
#endif
        for (int64_t i = 0; i < m; i++) {
            float v = b[i];
            mn = v < mn ? v : mn;
            mx = v > mx ? v : mx;
            float a = fabsf(v);
            amx = a > amx ? a : amx;
            finite &= (v - v) == 0.0f;
        }
        bmn[q] = mn;
        bmx[q] = mx;
        bamx[q] = amx;
        bfin[q] = (unsigned char)finite;
    }
}

/* A block that is finite and holds no new extreme changes nothing: that is screened with a
 * vectorized loop; any other block goes element by element. */
static void scan(calq__tensor_stats *s, const float *x, int64_t n, int64_t per_sample, int batch)
{
    for (int64_t r0 = 0; r0 < n; r0 += SCAN_BLOCK * SCREEN_RUN) {
        int64_t r = n - r0 < SCAN_BLOCK * SCREEN_RUN ? n - r0 : SCAN_BLOCK * SCREEN_RUN;
        float bmn[SCREEN_RUN], bmx[SCREEN_RUN], bamx[SCREEN_RUN];
        unsigned char bfin[SCREEN_RUN];
        screen(x + r0, r, bmn, bmx, bamx, bfin);
        for (int64_t j0 = r0, q = 0; j0 < r0 + r; j0 += SCAN_BLOCK, q++) {
            int64_t m = n - j0 < SCAN_BLOCK ? n - j0 : SCAN_BLOCK;
            /* nothing in the block would change the statistics (compared, not copied: which of +0
             * and -0 the range keeps stays the element loop's choice) */
            if (bfin[q] && s->absmax_batch >= 0 && !(bamx[q] > s->absmax) && !(s->min > s->max) && bmn[q] >= s->min &&
                bmx[q] <= s->max)
                continue;
            for (int64_t i = 0; i < m; i++) scan_one(s, x[j0 + i], j0 + i, per_sample, batch);
        }
    }
    s->count += (uint64_t)n;
}

static void group_fail(calq__calib_group *gr, const calq_error *e)
{
    gr->failed = true;
    gr->err = *e;
}

/* One group's share of an observed tensor. */
static void observe_group(calq__calib *cal, calq__calib_group *gr, const char *tensor_name, const calq_tensor *t)
{
    if (gr->failed || gr->done || gr->auto_pending) return;
    calq_error e = {0};
    const char *layer = cal->layers[gr->first_layer].key;
    if (t->dtype != CALQ_DTYPE_FLOAT32) {
        calq__fail(&e, CALQ_ERR_UNSUPPORTED, layer,
                   "the input of layer \"%s\" (tensor \"%s\") is %s; activations must be float32 to be calibrated "
                   "(amct-reference.md §8.4)",
                   layer, tensor_name, calq_dtype_name(t->dtype));
        group_fail(gr, &e);
        return;
    }
    int64_t n = calq_tensor_numel(t);
    const float *x = t->data;
    if (cal->pass == 1) calq__ada_feed(cal, (int)(gr - cal->groups), t); /* ada_quantize's reservoirs */
    if (cal->pass == 1) {
        int64_t per_sample = t->ndim > 0 && t->dims[0] > 0 ? n / t->dims[0] : n;
        scan(&gr->stats, x, n, per_sample > 0 ? per_sample : 1, cal->batch);
    }
    calq__group_feed(gr, x, (size_t)n, cal->pass, feed_batches(cal), layer);
}

/* Every group calibrating the tensor gets it (an asymmetric one and a symmetric-only one may
 * share a tensor: calibrate_layers.c join_group). In pass 1 the tensor also goes to the
 * activation cache once, under its first group, when a group of it reads the batches again:
 * the later passes then replay it (calq__calib_replay_tensor) instead of running the model. */
int calq__calib_observe(void *user, const char *tensor_name, const calq_tensor *t)
{
    calq__calib *cal = user;
    const double t0 = calq__now();
    int first = calq__strmap_get(&cal->group_of, tensor_name);
    bool again = false;
    for (int k = first; k >= 0; k = cal->groups[k].next_same) {
        observe_group(cal, &cal->groups[k], tensor_name, t);
        again |= calq__group_multipass(&cal->groups[k]);
    }
    if (cal->pass == 1 && cal->cache && again && first >= 0 && t->dtype == CALQ_DTYPE_FLOAT32)
        calq__act_cache_put(cal->cache, first, t->data, (size_t)calq_tensor_numel(t));
    cal->observe_s += calq__now() - t0;
    return 0;
}

/* As calq__calib_observe in a later pass, from the cache: the same groups in the same order,
 * skipped on the same conditions (observe_group), so the record is the same bytes. A packed
 * tensor comes in consecutive pieces (act_cache.h): the later passes' calibrators (IFMR's loss
 * sums, histograms and checksum, the range histograms) follow the elements' order, not the
 * calls, so pieces give the same bytes as the whole tensor. The cache
 * calls it for the tensors of one batch from several threads at once (act_cache.h): it touches
 * only the groups of `first`'s chain, which no other tensor feeds, and reads cal's settings. */
void calq__calib_replay_tensor(void *user, int batch, int first, const float *x, size_t n)
{
    (void)batch;
    const calq__calib *cal = user;
    for (int k = first; k >= 0; k = cal->groups[k].next_same) {
        calq__calib_group *gr = &cal->groups[k];
        if (gr->failed || gr->done || gr->auto_pending) continue;
        calq__group_feed(gr, x, n, cal->pass, feed_batches(cal), cal->layers[gr->first_layer].key);
    }
}

bool calq__calib_replay_wants(void *user, int first)
{
    const calq__calib *cal = user;
    for (int k = first; k >= 0; k = cal->groups[k].next_same) {
        const calq__calib_group *gr = &cal->groups[k];
        if (!gr->failed && !gr->done && !gr->auto_pending) return true;
    }
    return false;
}

/* ---- progress (the caller's callback; the library draws nothing) -------------------------------- */

calq_status calq__calib_progress(calq__calib *cal, calq_error *err)
{
    if (!cal->progress) return CALQ_OK;
    calq_calibrate_progress p = {
        .pass = cal->pass,
        .batch = cal->batch,
        .batch_num = cal->batch_num,
        .runs_done = cal->runs_done,
        .runs_expected = cal->runs_expected > cal->runs_done ? cal->runs_expected : cal->runs_done,
        .elapsed_s = calq__now() - cal->t_start,
    };
    if (cal->progress(cal->progress_user, &p) == 0) return CALQ_OK;
    return calq__fail(err, CALQ_ERR_GENERIC, NULL,
                      "calibration stopped by its progress callback after batch %d of pass %d; nothing was written",
                      cal->batch, cal->pass);
}
