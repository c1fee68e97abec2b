/* Streaming IFMR: AMCT keeps every activation of every batch and sorts them (amct-reference.md
 * §3.2, the std::bad_alloc FAQ). calq makes two passes over the same batches instead:
 *   pass 1 (statistics): count, finite range, NaN/Inf counts, and the two percentile tails in
 *          bounded heaps (calq__tail), which give the k-th largest/smallest values exactly;
 *   pass 2 (losses): the candidate loss sums, with the split-independent accumulation of
 *          ifmr_loss.c.
 * The percentile rank k depends on the final count L (§3.3). With max_count given, the tails
 * are sized for the largest rank any L <= max_count can need and pass 1 is always exact. With
 * max_count == 0 they grow with the count seen so far (twice the bound, plus 64) and pass 1
 * proves its result exact at the end; if it cannot, the now-known L drives one more
 * statistics pass. */
#include <inttypes.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/threads.h"
#include "quant/quant.h"

#define SCAN_BLOCK 64    /* elements per pass-1 screening step */
#define SCREEN_RUN 64    /* blocks screened per call of screen() */
#define LOSS_CHUNK 16384 /* elements per pass-2 step (64 KB: stays in L2 across candidates) */

/* Pruning is chosen by the largest single feed (one batch's elements), not by the total: the
 * histogram's memory (PRUNE_BINS bins of 24 bytes, ~0.4 MB per layer) then does not depend on
 * batch_num, so peak memory stays flat as batches are added (bench/calib_memory.sh). A batch of
 * 64K elements costs the exact search 60 x 64K element steps; the histogram, its bounds and the few
 * exact sums left cost a fraction of that. */
#define PRUNE_MIN    (1u << 16)
#define PRUNE_BINS   16384 /* ~50 bins per quantization step at ratio 1: bounds within ~0.5 % */
#define PRUNE_MARGIN 0.02  /* a candidate this close to the first batches' best keeps its sum */
#define PRUNE_LEGAL  4     /* fewer legal candidates than this: nothing to gain */

struct calq_ifmr_stream {
    calq_ifmr_opts o;
    char layer[CALQ_ERROR_NAME_MAX];
    unsigned n_cand;
    int pass;           /* 1 statistics, 2 losses, 0 done, -1 failed */
    uint64_t max_count; /* declared bound, or the count learned by a first pass (0: unknown) */
    int count_learned;

    calq__ifmr_stats st;
    calq__tail top, bottom; /* bottom keeps -x */
    uint64_t sum1, sum2;    /* checksum of the statistics pass */
    uint64_t first_count, first_sum1, first_sum2;
    int repeated;

    uint64_t seen; /* pass 2 */
    uint64_t psum1, psum2;
    calq__ifmr_cand *cand;
    calq__ifmr_acc *acc;
    unsigned *legal;
    unsigned n_legal;
    calq__isa isa; /* the loss kernels (the CPU's best; a test may choose) */
    float max_init, min_init;
    calq_ifmr_result res;

    /* pruning (ifmr_bound.c; docs/numerics.md "Pruning the candidate search") */
    uint64_t prune_min;     /* the least largest-feed element count that prunes (tests lower it) */
    uint64_t max_feed;      /* the largest feed of the statistics pass */
    int prune;              /* this loss pass prunes */
    int decided;            /* the candidates that keep exact sums are chosen */
    calq__ifmr_hist *thist; /* [0]: the pass's histogram; [1..]: a feed's other threads, merged into [0]
                             * and freed at the end of the feed (memory: one histogram per layer) */
    int n_thist;
    unsigned char *exact; /* per candidate: its sum covers every element fed so far */
    unsigned *active;     /* the candidates the kernels run on, in index order */
    unsigned n_active;
    unsigned n_exact; /* statistics: candidates whose exact sums were computed */
};

static void stats_reset(calq_ifmr_stream *s)
{
    memset(&s->st, 0, sizeof s->st);
    s->st.data_min = INFINITY;
    s->st.data_max = -INFINITY;
    calq__tail_reset(&s->top);
    calq__tail_reset(&s->bottom);
    s->sum1 = s->sum2 = 0;
    s->max_feed = 0;
}

static int tails_sized_for(calq_ifmr_stream *s, uint64_t count)
{
    return calq__tails_size(&s->top, &s->bottom, s->o.max_percentile, s->o.min_percentile, s->max_count, count);
}

calq_status calq_ifmr_stream_create(const calq_ifmr_opts *o, uint64_t max_count, const char *layer,
                                    calq_ifmr_stream **out, calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, out);
    *out = NULL;
    CALQ_REQUIRE(err, o);
    unsigned n_cand = 0;
    CALQ_TRY(calq__ifmr_check_opts(o, layer, &n_cand, err));
    calq_ifmr_stream *s = calloc(1, sizeof *s);
    if (!s) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, layer, "IFMR: out of memory");
    s->o = *o;
    calq__threads_resolve(o->n_threads, "n_threads", &s->o.n_threads, NULL); /* checked above: caps only */
    snprintf(s->layer, sizeof s->layer, "%s", layer ? layer : "");
    s->n_cand = n_cand;
    s->pass = 1;
    s->max_count = max_count;
    s->isa = calq__ifmr_isa_best();
    s->prune_min = PRUNE_MIN;
    stats_reset(s);
    s->cand = calloc(n_cand, sizeof *s->cand);
    s->acc = calloc(n_cand, sizeof *s->acc);
    s->legal = calloc(n_cand, sizeof *s->legal);
    s->active = calloc(n_cand, sizeof *s->active);
    s->exact = calloc(n_cand, 1);
    if (!s->cand || !s->acc || !s->legal || !s->active || !s->exact || !tails_sized_for(s, 0)) {
        calq_ifmr_stream_free(s);
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, layer, "IFMR: out of memory for the percentile tails");
    }
    *out = s;
    return CALQ_OK;
}

static void hists_free(calq_ifmr_stream *s)
{
    for (int t = 0; t < s->n_thist; t++) calq__ifmr_hist_free(&s->thist[t]);
    free(s->thist);
    s->thist = NULL;
    s->n_thist = 0;
}

void calq_ifmr_stream_free(calq_ifmr_stream *s)
{
    if (!s) return;
    calq__tail_free(&s->top);
    calq__tail_free(&s->bottom);
    hists_free(s);
    free(s->cand);
    free(s->acc);
    free(s->legal);
    free(s->active);
    free(s->exact);
    free(s);
}

void calq__ifmr_stream_set_prune(calq_ifmr_stream *s, uint64_t min_count)
{
    s->prune_min = min_count;
}

void calq__ifmr_stream_bound_feed(calq_ifmr_stream *s, size_t n)
{
    if (s->max_count && !s->count_learned && s->st.count + n > s->max_count) s->max_count = 0;
}

void calq__ifmr_stream_prune_info(const calq_ifmr_stream *s, unsigned *n_exact, unsigned *n_legal)
{
    *n_exact = s->n_exact;
    *n_legal = s->n_legal;
}

void calq__ifmr_stream_set_isa(calq_ifmr_stream *s, calq__isa isa)
{
    if (calq__ifmr_isa_supported(isa)) s->isa = isa;
}

int calq_ifmr_stream_pass(const calq_ifmr_stream *s)
{
    if (!s) return -1; /* no stream: no pass (calq.h's sentinel for a NULL object) */
    return s->pass < 0 ? 0 : s->pass;
}

size_t calq_ifmr_stream_bytes(const calq_ifmr_stream *s)
{
    if (!s) return 0;
    size_t hist = 0;
    for (int t = 0; t < s->n_thist; t++)
        if (s->thist[t].bin) hist += ((size_t)s->thist[t].nb + 2) * sizeof(calq__ifmr_bin);
    return sizeof *s + (s->top.alloc + s->bottom.alloc) * sizeof(float) + hist +
           s->n_cand * (sizeof *s->cand + sizeof *s->acc + sizeof *s->legal + sizeof *s->active + 1);
}

static void scan_one(calq_ifmr_stream *s, float v)
{
    if (isnan(v)) {
        s->st.nan_count++;
        return;
    }
    if (isinf(v)) {
        if (v > 0)
            s->st.pos_inf_count++;
        else
            s->st.neg_inf_count++;
        return;
    }
    if (v < s->st.data_min) s->st.data_min = v;
    if (v > s->st.data_max) s->st.data_max = v;
    calq__tail_push(&s->top, v);
    calq__tail_push(&s->bottom, -v);
}

/* Screens the blocks of SCAN_BLOCK elements of x[0..n): each block's extremes, and whether it holds
 * a NaN or an inf (v - v is NaN). Cloned per instruction set (static, so that the resolver is not
 * exported): every element of pass 1 goes through it, and a maximum or minimum is the same
 * value in any order (a -0 / +0 choice among equal extremes only meets comparisons). */
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
static void
screen(const float *x, size_t n, float *bmx, float *bmn, unsigned char *bfin)
{
    for (size_t j = 0, q = 0; j < n; j += SCAN_BLOCK, q++) {
        size_t m = n - j < SCAN_BLOCK ? n - j : SCAN_BLOCK;
        const float *b = x + j;
        float mx = -INFINITY, mn = INFINITY;
        int finite = 1;
#if !defined(__clang__) /* clang refuses (-Wpass-failed) what GCC vectorizes here */
#pragma omp simd reduction(max : mx) reduction(min : mn) reduction(& : finite)
#endif
        for (size_t i = 0; i < m; i++) {
            float v = b[i];
            mx = v > mx ? v : mx;
            mn = v < mn ? v : mn;
            finite &= (v - v) == 0.0f;
        }
        bmx[q] = mx;
        bmn[q] = mn;
        bfin[q] = (unsigned char)finite;
    }
}

/* One block's share of the statistics, given its screen (screen()): a block holding a NaN or an
 * inf goes element by element. */
static void block_statistics(calq_ifmr_stream *s, const float *b, size_t m, float mx, float mn, int finite)
{
    if (!finite) {
        for (size_t i = 0; i < m; i++) scan_one(s, b[i]);
        return;
    }
    /* a new extreme is taken element by element: the first of equal values (+0 before -0 or
     * after) is the one kept, as a sequential minimum keeps it */
    if (mn < s->st.data_min)
        for (size_t i = 0; i < m; i++) s->st.data_min = b[i] < s->st.data_min ? b[i] : s->st.data_min;
    if (mx > s->st.data_max)
        for (size_t i = 0; i < m; i++) s->st.data_max = b[i] > s->st.data_max ? b[i] : s->st.data_max;
    if (calq__tail_rejects(&s->top, mx))
        calq__tail_drop(&s->top, mx);
    else
        for (size_t i = 0; i < m; i++) calq__tail_push(&s->top, b[i]);
    if (calq__tail_rejects(&s->bottom, -mn))
        calq__tail_drop(&s->bottom, -mn);
    else
        for (size_t i = 0; i < m; i++) calq__tail_push(&s->bottom, -b[i]);
}

static calq_status feed_statistics(calq_ifmr_stream *s, const float *x, size_t n, calq_error *err)
{
    uint64_t after = s->st.count + n;
    if (s->max_count && after > s->max_count)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, s->layer,
                          "IFMR of layer \"%s\": %" PRIu64 " elements fed, more than the %" PRIu64
                          " declared as max_count%s",
                          calq__name(s->layer), after, s->max_count,
                          s->count_learned ? " (the count of the first statistics pass: feed the same batches)" : "");
    if (!tails_sized_for(s, after))
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, s->layer, "IFMR: out of memory for the percentile tails");
    calq__values_checksum(x, n, &s->sum1, &s->sum2);
    s->st.count = after;
    if (n > s->max_feed) s->max_feed = n;
    for (size_t j0 = 0; j0 < n; j0 += SCAN_BLOCK * SCREEN_RUN) {
        size_t r = n - j0 < SCAN_BLOCK * SCREEN_RUN ? n - j0 : SCAN_BLOCK * SCREEN_RUN;
        float bmx[SCREEN_RUN], bmn[SCREEN_RUN];
        unsigned char bfin[SCREEN_RUN];
        screen(x + j0, r, bmx, bmn, bfin);
        for (size_t j = j0, q = 0; j < j0 + r; j += SCAN_BLOCK, q++) {
            size_t m = n - j < SCAN_BLOCK ? n - j : SCAN_BLOCK;
            block_statistics(s, x + j, m, bmx[q], bmn[q], bfin[q]);
        }
    }
    return CALQ_OK;
}

/* One thread inside a parallel region: calibration feeds several layers at once from its
 * activation cache (act_cache.h), one thread each; nesting teams would only add wake-ups. The
 * sums do not depend on the count either way. */
static int loss_threads(const calq_ifmr_stream *s, size_t n)
{
    int nt = s->o.n_threads > 0 ? s->o.n_threads : omp_get_max_threads();
    return n < LOSS_CHUNK / 4 || nt < 1 || omp_in_parallel() ? 1 : nt;
}

/* Merges the other threads' histograms of a feed into thist[0] and frees them. */
static void hists_fold(calq_ifmr_stream *s)
{
    for (int t = 1; t < s->n_thist; t++)
        if (s->thist[t].bin) {
            calq__ifmr_hist_merge(&s->thist[0], &s->thist[t]);
            calq__ifmr_hist_free(&s->thist[t]);
        }
}

/* The histogram of everything fed in this pass. */
static calq__ifmr_hist *hist_merged(calq_ifmr_stream *s)
{
    hists_fold(s);
    return &s->thist[0];
}

/* The bounds are read from merged bins first (cheap, looser) and from finer ones only for the
 * candidates the coarser cannot settle: bins merged by LEVEL[0], then LEVEL[1], ... */
static const unsigned LEVEL[] = {64, 8, 1};
#define N_LEVEL ((int)(sizeof LEVEL / sizeof LEVEL[0]))

static int binsets_make(const calq__ifmr_hist *h, calq__ifmr_binset *bs)
{
    int ok = 1;
    for (int l = 0; l < N_LEVEL; l++) ok &= calq__ifmr_binset_make(h, LEVEL[l], &bs[l]);
    return ok;
}

static void binsets_free(calq__ifmr_binset *bs)
{
    for (int l = 0; l < N_LEVEL; l++) calq__ifmr_binset_free(&bs[l]);
}

/* Chooses the candidates that keep computing exact sums, from the bounds over the data seen so
 * far: those whose lower bound is within PRUNE_MARGIN of the smallest upper bound. The others'
 * partial sums are dropped; the end of the pass proves them unneeded or computes them again. */
static void decide(calq_ifmr_stream *s)
{
    calq__ifmr_hist *h = hist_merged(s);
    calq__ifmr_binset bs[N_LEVEL];
    int ok = binsets_make(h, bs);
    double *lower = ok ? malloc(2 * (size_t)s->n_legal * sizeof *lower) : NULL;
    double *upper = lower ? lower + s->n_legal : NULL, min_up = INFINITY;
    ok = lower != NULL;
    for (int l = 0; ok && l < N_LEVEL; l++) {
        double cut = min_up * (1.0 + PRUNE_MARGIN); /* the candidates the previous level kept */
        min_up = INFINITY;
        for (unsigned q = 0; ok && q < s->n_legal; q++) {
            if (l > 0 && lower[q] > cut) continue;
            ok = calq__ifmr_binset_bounds(&bs[l], &s->cand[s->legal[q]], &lower[q], &upper[q]);
            if (ok && upper[q] < min_up) min_up = upper[q];
        }
    }
    binsets_free(bs);
    if (!ok) { /* no bounds (or no memory): every candidate keeps its exact sum */
        free(lower);
        s->prune = 0;
        hists_free(s);
        return;
    }
    s->n_active = 0;
    for (unsigned q = 0; q < s->n_legal; q++) {
        unsigned i = s->legal[q];
        s->exact[i] = lower[q] <= min_up * (1.0 + PRUNE_MARGIN);
        if (s->exact[i]) s->active[s->n_active++] = i;
    }
    free(lower);
    s->decided = 1;
}

/* At the end of a pruned loss pass: the candidates without exact sums whose lower bound over all
 * the data does not exceed the best exact total could still win (or tie with a smaller index):
 * they go to a third pass. Returns how many; 0 when the search is settled. A candidate that
 * gets no bound is needed. */
static unsigned still_needed(calq_ifmr_stream *s)
{
    double best = INFINITY;
    for (unsigned q = 0; q < s->n_legal; q++) {
        unsigned i = s->legal[q];
        double t = s->exact[i] ? calq__ifmr_acc_total(&s->acc[i]) : INFINITY;
        if (t < best) best = t;
    }
    calq__ifmr_hist *h = hist_merged(s);
    calq__ifmr_binset bs[N_LEVEL];
    int ok = binsets_make(h, bs);
    s->n_active = 0;
    for (unsigned q = 0; q < s->n_legal; q++) {
        unsigned i = s->legal[q];
        if (s->exact[i]) continue;
        int settled = 0;
        for (int l = 0; ok && !settled && l < N_LEVEL; l++) {
            double lo = 0.0, up = 0.0;
            settled = calq__ifmr_binset_bounds(&bs[l], &s->cand[i], &lo, &up) && lo > best;
        }
        if (!settled) s->active[s->n_active++] = i;
    }
    binsets_free(bs);
    return s->n_active;
}

/* Prepares the histograms of a pruned loss pass, or leaves pruning off. */
static void prune_setup(calq_ifmr_stream *s)
{
    hists_free(s);
    s->prune = s->decided = 0;
    s->n_active = 0;
    for (unsigned q = 0; q < s->n_legal; q++) {
        s->active[s->n_active++] = s->legal[q];
        s->exact[s->legal[q]] = 1;
    }
    if (s->o.amct_float_loss || s->max_feed < s->prune_min || s->n_legal < PRUNE_LEGAL) return;
    float flo = INFINITY, fhi = -INFINITY;
    for (unsigned q = 0; q < s->n_legal; q++) {
        const calq__ifmr_cand *c = &s->cand[s->legal[q]];
        flo = c->lo < flo ? c->lo : flo;
        fhi = c->hi > fhi ? c->hi : fhi;
    }
    int nt = s->o.n_threads > 0 ? s->o.n_threads : omp_get_max_threads();
    s->thist = calloc((size_t)(nt > 0 ? nt : 1), sizeof *s->thist);
    if (!s->thist) return;
    s->n_thist = nt > 0 ? nt : 1;
    if (!calq__ifmr_hist_init(&s->thist[0], PRUNE_BINS, flo, fhi, s->st.data_min, s->st.data_max)) {
        hists_free(s);
        return;
    }
    s->prune = 1;
}

/* Sets the sums of the candidates left without exact sums to +inf: never the first minimum. */
static void exclude_pruned(calq_ifmr_stream *s)
{
    s->n_exact = 0;
    for (unsigned q = 0; q < s->n_legal; q++) {
        unsigned i = s->legal[q];
        if (s->exact[i]) {
            s->n_exact++;
            continue;
        }
        for (int l = 0; l < CALQ__IFMR_LANES; l++) s->acc[i].lane[l] = INFINITY;
    }
}

static void feed_losses(calq_ifmr_stream *s, const float *x, size_t n)
{
    const uint64_t g = s->seen;
    const int amct = s->o.amct_float_loss;
    const float Lf = (float)s->st.count;
    int nt = loss_threads(s, n);
    if (s->prune && s->pass == 2 && s->decided && nt >= 2) {
        /* Every thread bins a contiguous share of the batch into its own histogram, then computes
         * the exact sums of its share of the few candidates left: binning costs more than those
         * sums, so a thread that only summed would wait for the one binning. (How the histogram is
         * split changes its moments' last bits, never a bound's validity, as for the thread count.) */
        int nh = nt < s->n_thist ? nt : s->n_thist;
        const calq__ifmr_hist *h0 = &s->thist[0];
        for (int t = 1; t < nh; t++) /* without memory for another thread's bins, fewer threads bin */
            if (!calq__ifmr_hist_init(&s->thist[t], h0->nb, h0->flo, h0->fhi, h0->dmin, h0->dmax)) nh = t;
#pragma omp parallel num_threads(nt)
        {
            unsigned T = (unsigned)omp_get_num_threads(), t = (unsigned)omp_get_thread_num();
            unsigned B = T < (unsigned)nh ? T : (unsigned)nh; /* (the runtime may give fewer threads than asked) */
            if (t < B) {
                size_t j0 = (size_t)((uint64_t)n * t / B), j1 = (size_t)((uint64_t)n * (t + 1) / B);
                calq__ifmr_hist_add(&s->thist[t], x + j0, j1 - j0);
            }
            unsigned c0 = (unsigned)((uint64_t)s->n_active * t / T);
            unsigned c1 = (unsigned)((uint64_t)s->n_active * (t + 1) / T);
            for (size_t j = 0; j < n && c1 > c0; j += LOSS_CHUNK) {
                size_t m = n - j < LOSS_CHUNK ? n - j : LOSS_CHUNK;
                calq__ifmr_losses(s->isa, x + j, m, g + j, s->cand, s->active + c0, c1 - c0, amct, Lf, s->acc);
            }
        }
        hists_fold(s);
        return;
    }
    if (s->prune && s->pass == 2) {
        int nh = nt < s->n_thist ? nt : s->n_thist;
        const calq__ifmr_hist *h0 = &s->thist[0];
        for (int t = 1; t < nh; t++) /* without memory for another thread's bins, fewer threads bin */
            if (!calq__ifmr_hist_init(&s->thist[t], h0->nb, h0->flo, h0->fhi, h0->dmin, h0->dmax)) nh = t;
                /* each thread bins a contiguous share of the batch into its own histogram */
#pragma omp parallel num_threads(nh)
        {
            int T = omp_get_num_threads(), t = omp_get_thread_num();
            size_t j0 = (size_t)((uint64_t)n * (uint64_t)t / (uint64_t)T);
            size_t j1 = (size_t)((uint64_t)n * (uint64_t)(t + 1) / (uint64_t)T);
            calq__ifmr_hist_add(&s->thist[t], x + j0, j1 - j0);
        }
        hists_fold(s);
        /* decide once the histogram holds an eighth of the data (the first batch of a run of 8).
         * The activation cache feeds packed tensors in chunks (act_cache.h), so the decision no
         * longer waits for a whole first tensor: deciding on a sixteenth of MobileNetV2's and
         * detector_fpn's data kept more candidates and sent more layers to a third pass (their
         * calibration 1.2-1.3x slower in bench/calibration). */
        uint64_t at = s->st.count / 8 > (1u << 16) ? s->st.count / 8 : (1u << 16);
        if (!s->decided && s->seen + n >= (at < s->st.count ? at : s->st.count)) decide(s);
    }
    if (nt > (int)s->n_active) nt = (int)s->n_active;
        /* each thread owns whole candidates and walks the batch in order, chunk by chunk */
#pragma omp parallel num_threads(nt > 0 ? nt : 1)
    {
        unsigned T = (unsigned)omp_get_num_threads(), t = (unsigned)omp_get_thread_num();
        unsigned c0 = (unsigned)((uint64_t)s->n_active * t / T), c1 = (unsigned)((uint64_t)s->n_active * (t + 1) / T);
        for (size_t j = 0; j < n; j += LOSS_CHUNK) {
            size_t m = n - j < LOSS_CHUNK ? n - j : LOSS_CHUNK;
            if (c1 > c0) calq__ifmr_losses(s->isa, x + j, m, g + j, s->cand, s->active + c0, c1 - c0, amct, Lf, s->acc);
        }
    }
}

calq_status calq_ifmr_stream_feed(calq_ifmr_stream *s, const float *x, size_t n, calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, s);
    CALQ_REQUIRE_ARRAY_OF(err, x, n, s->layer);
    if (s->pass == 1) return feed_statistics(s, x, n, err);
    if (s->pass == 2 || s->pass == 3) {
        if (s->seen + n > s->st.count)
            return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, s->layer,
                              "IFMR of layer \"%s\": the loss pass received more than the %" PRIu64
                              " elements of the statistics pass; feed the same batches in the same order",
                              calq__name(s->layer), s->st.count);
        calq__values_checksum(x, n, &s->psum1, &s->psum2);
        feed_losses(s, x, n);
        s->seen += n;
        return CALQ_OK;
    }
    return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, s->layer, "IFMR of layer \"%s\": the stream is %s",
                      calq__name(s->layer), s->pass == 0 ? "finished" : "failed");
}

static calq_status end_statistics(calq_ifmr_stream *s, int *done, calq_error *err)
{
    calq_status st = calq__ifmr_check_stats(&s->st, &s->o, s->layer, err);
    if (st != CALQ_OK) return st;
    if (s->repeated && (s->st.count != s->first_count || s->sum1 != s->first_sum1 || s->sum2 != s->first_sum2))
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, s->layer,
                          "IFMR of layer \"%s\": the repeated statistics pass saw different data (%" PRIu64
                          " elements, first pass %" PRIu64 "); feed the same batches in the same order",
                          calq__name(s->layer), s->st.count, s->first_count);
    uint64_t kmax = calq__ifmr_rank(s->o.max_percentile, s->st.count);
    uint64_t kmin = calq__ifmr_rank(s->o.min_percentile, s->st.count);
    float neg_kth_min = 0.0f;
    int exact = calq__tail_kth(&s->top, kmax, &s->st.kth_max);
    exact &= calq__tail_kth(&s->bottom, kmin, &neg_kth_min);
    s->st.kth_min = -neg_kth_min;
    if (!exact) {
        if (s->max_count)
            return calq__fail(err, CALQ_ERR_INTERNAL, s->layer,
                              "IFMR: percentile tails too small for a declared count (a bug in calq)");
        /* the count is known now: one more statistics pass with tails sized for it */
        s->first_count = s->st.count;
        s->first_sum1 = s->sum1;
        s->first_sum2 = s->sum2;
        s->repeated = 1;
        s->max_count = s->st.count;
        s->count_learned = 1;
        stats_reset(s);
        if (!tails_sized_for(s, 0))
            return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, s->layer, "IFMR: out of memory for the percentile tails");
        *done = 0;
        return CALQ_OK;
    }
    /* the tails are not needed any more */
    calq__tail_free(&s->top);
    calq__tail_free(&s->bottom);
    st = calq__ifmr_grid(&s->st, &s->o, s->n_cand, s->layer, s->cand, &s->max_init, &s->min_init, err);
    if (st != CALQ_OK) return st;
    s->n_legal = 0;
    for (unsigned i = 0; i < s->n_cand; i++)
        if (s->cand[i].rule == CALQ__SCALE_OK) s->legal[s->n_legal++] = i;
    memset(s->acc, 0, s->n_cand * sizeof *s->acc);
    prune_setup(s);
    s->seen = 0;
    s->psum1 = s->psum2 = 0;
    s->pass = 2;
    *done = 0;
    return CALQ_OK;
}

calq_status calq_ifmr_stream_end_pass(calq_ifmr_stream *s, int *done, calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, s);
    CALQ_REQUIRE(err, done);
    *done = 0;
    calq_status st;
    if (s->pass == 1) {
        st = end_statistics(s, done, err);
    } else if (s->pass == 2 || s->pass == 3) {
        if (s->seen != s->st.count || s->psum1 != s->sum1 || s->psum2 != s->sum2) {
            st = calq__fail(err, CALQ_ERR_BAD_PARAMETERS, s->layer,
                            "IFMR of layer \"%s\": the loss pass saw different data than the statistics pass (%" PRIu64
                            " elements, statistics pass %" PRIu64 "); feed the same batches in the same order",
                            calq__name(s->layer), s->seen, s->st.count);
        } else if (s->pass == 2 && s->prune && still_needed(s)) {
            /* a rare third pass computes the exact sums of the candidates the bounds cannot rule out */
            hists_free(s);
            for (unsigned q = 0; q < s->n_active; q++) {
                memset(&s->acc[s->active[q]], 0, sizeof s->acc[0]);
                s->exact[s->active[q]] = 1;
            }
            s->prune = 0;
            s->seen = 0;
            s->psum1 = s->psum2 = 0;
            s->pass = 3;
            return CALQ_OK;
        } else {
            hists_free(s);
            exclude_pruned(s);
            st = calq__ifmr_select(&s->st, &s->o, s->n_cand, s->cand, s->acc, s->max_init, s->min_init, s->layer,
                                   &s->res, err);
            if (st == CALQ_OK) {
                s->pass = 0;
                *done = 1;
            }
        }
    } else if (s->pass == 0) {
        *done = 1;
        return CALQ_OK;
    } else {
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, s->layer, "IFMR of layer \"%s\": the stream failed earlier",
                          calq__name(s->layer));
    }
    if (st != CALQ_OK) s->pass = -1;
    return st;
}

calq_status calq_ifmr_stream_result(const calq_ifmr_stream *s, calq_ifmr_result *out, calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, s);
    CALQ_REQUIRE(err, out);
    /* pass -1 is the failed state: "pass -1 is not finished" would not say that */
    if (s->pass < 0)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, s->layer,
                          "IFMR of layer \"%s\": no result: the stream failed earlier (the feed or end_pass that "
                          "failed said why); create a new one",
                          calq__name(s->layer));
    if (s->pass != 0)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, s->layer,
                          "IFMR of layer \"%s\": no result yet (pass %d is not finished)", calq__name(s->layer),
                          s->pass);
    *out = s->res;
    return CALQ_OK;
}
