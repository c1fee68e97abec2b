/* Internals shared by the quantization numerics (src/quant). Everything here is float32
 * arithmetic written so that each operation is one IEEE operation in a fixed order: the
 * factors must equal AMCT's bit for bit (amct-reference.md §10.1). Expressions that AMCT
 * evaluates as separate float operations are kept as separate statements so that no compiler
 * may contract them into an FMA (GCC's ISO C mode does not contract; clang contracts only
 * within one expression). */
#ifndef CALQ_QUANT_QUANT_H
#define CALQ_QUANT_QUANT_H

#include <float.h>
#include <math.h>
#include <stdint.h>

#include "calq.h"

/* The layer name as messages print it. */
static inline const char *calq__name(const char *layer)
{
    return layer && *layer ? layer : "(unnamed)";
}

/* ---- rounding (§0.3, §2.3) ---------------------------------------------------------------- */

/* Exactly C roundf() (ties away from zero), written with selects and a truncating conversion
 * so that loops using it vectorize. |t| >= 2^23 is already an integer and NaN passes through;
 * for smaller |t|, frac = a - trunc(a) is exact. */
static inline float calq__round_away(float t)
{
    float a = fabsf(t);
    int small = a < 8388608.0f;
    float ac = small ? a : 0.0f; /* keeps the int conversion defined */
    float i = (float)(int32_t)ac;
    float frac = ac - i;
    float r = frac >= 0.5f ? i + 1.0f : i;
    return small ? copysignf(r, t) : t;
}

/* Ties to even, independent of the FPU rounding mode (numpy round, the device's rint). */
static inline float calq__round_even(float t)
{
    float a = fabsf(t);
    if (!(a < 8388608.0f)) return t;
    float i = (float)(int32_t)a;
    float frac = a - i;
    float r = i;
    if (frac > 0.5f || (frac == 0.5f && ((int32_t)i & 1))) r = i + 1.0f;
    return copysignf(r, t);
}

static inline float calq__round_mode(float t, calq_round_mode mode)
{
    return mode == CALQ_ROUND_HALF_EVEN ? calq__round_even(t) : calq__round_away(t);
}

/* ---- process_scale (§2.1) ------------------------------------------------------------------ */

typedef enum calq__scale_rule {
    CALQ__SCALE_OK = 0,
    CALQ__SCALE_INF,       /* "Not support scale is +inf." */
    CALQ__SCALE_NAN,       /* "Not support scale is nan." */
    CALQ__SCALE_TOO_LARGE, /* "Not support scale greater than 1 / FLT_EPSILON. currentScale: %f" */
    CALQ__SCALE_NEGATIVE   /* IFMR's own "currentScale < 0" skip (§3.5); unreachable with zero forcing */
} calq__scale_rule;

/* AMCT's util::ProcessScale(float&) with its float comparisons: replaces a scale below
 * FLT_EPSILON by 1.0, then reports the first rule the (new) scale breaks. */
static inline calq__scale_rule calq__process_scale(float *s)
{
    if (*s < FLT_EPSILON) *s = 1.0f;
    if (isinf(*s)) return CALQ__SCALE_INF;
    if (isnan(*s)) return CALQ__SCALE_NAN;
    float inv = 1.0f / *s;
    if (inv < FLT_EPSILON) return CALQ__SCALE_TOO_LARGE;
    return CALQ__SCALE_OK;
}

/* AMCT's message for a broken rule, with the scale printed as AMCT prints it ("%f"). */
void calq__scale_rule_text(calq__scale_rule r, float scale, char *buf, size_t n);

/* ---- IFMR internals (ifmr.c, ifmr_loss.c, ifmr_stream.c) ----------------------------------- */

/* One candidate clip of the search grid (§3.4-3.6): elements are clipped to [lo, hi] and
 * quantized with `scale` (already through process_scale). */
typedef struct calq__ifmr_cand {
    float lo, hi, scale;
    float scale_raw; /* before process_scale, for messages */
    calq__scale_rule rule;
} calq__ifmr_cand;

/* Loss accumulator of one candidate. Double mode: 8 lanes, element g goes to lane g % 8 by its
 * position in the whole data, each lane a sequential double sum, lanes combined in a fixed tree
 * at the end: the result is a function of the element sequence alone, never of batch
 * boundaries or threads. AMCT mode: one float running sum in element order, as AMCT's
 * std::accumulate. */
#define CALQ__IFMR_LANES 8
typedef struct calq__ifmr_acc {
    double lane[CALQ__IFMR_LANES];
    float f;
} calq__ifmr_acc;

/* Adds elements x[0..n), whose position in the whole data starts at g0, to acc. amct selects
 * the float-sum mode, whose per-element term is (d*d)/Lf. The _ref kernel is the plain scalar
 * transcription of §3.5 (C round()); the fast ones below must agree with it bit for bit. */
void calq__ifmr_loss_ref(const float *x, size_t n, uint64_t g0, const calq__ifmr_cand *c, int amct, float Lf,
                         calq__ifmr_acc *acc);

/* The fast kernels, by instruction set: the portable C one (vectorized by the compiler for the
 * baseline ISA), AVX2 and AVX-512 (ifmr_loss_avx2.c, ifmr_loss_avx512.c, compiled with
 * function-level targets: no global -march). calq__ifmr_isa_best() is what the CPU runs. */
typedef enum calq__isa { CALQ__ISA_C = 0, CALQ__ISA_AVX2, CALQ__ISA_AVX512 } calq__isa;
int calq__ifmr_isa_supported(calq__isa isa);
calq__isa calq__ifmr_isa_best(void);
const char *calq__isa_name(calq__isa isa);
/* Adds x[0..n) (positions from g0) to the sums of the k candidates cand[idx[0..k)] (their sums
 * acc[idx[..]]) with the kernels of `isa` (which must be supported). Every candidate's sums equal
 * what calq__ifmr_loss_ref gives over the same elements, bit for bit, for any n, g0 and k. */
void calq__ifmr_losses(calq__isa isa, const float *x, size_t n, uint64_t g0, const calq__ifmr_cand *cand,
                       const unsigned *idx, unsigned k, int amct, float Lf, calq__ifmr_acc *acc);
/* The nonzero elements (+-0 dropped, NaN kept) of x[0..n) in order into out, which has room for
 * n + 16; returns how many. */
size_t calq__compact_nonzero_ref(const float *x, size_t n, float *out);
size_t calq__compact_nonzero(calq__isa isa, const float *x, size_t n, float *out);
/* The kernels a stream's loss pass uses (tests compare them; an unsupported one is ignored). */
void calq__ifmr_stream_set_isa(calq_ifmr_stream *s, calq__isa isa);
/* The least element count at which a stream prunes its candidate search (default 2^20;
 * UINT64_MAX: never), and what the search computed: the legal candidates whose exact sums were
 * computed, of n_legal (tests and bench_ifmr read them). */
void calq__ifmr_stream_set_prune(calq_ifmr_stream *s, uint64_t min_count);
/* Before a feed of n elements in the first statistics pass: when they would exceed the declared
 * max_count, the stream forgets it and goes on as one created with max_count 0 (its first pass
 * then proves its order statistics or runs one more). Calibration declares the first batch's
 * size times the batch count, which a tensor of data-dependent size (rows after NonZero / NMS,
 * a dynamic width) can exceed; its factors are the same as with a correct bound. */
void calq__ifmr_stream_bound_feed(calq_ifmr_stream *s, size_t n);
void calq__ifmr_stream_prune_info(const calq_ifmr_stream *s, unsigned *n_exact, unsigned *n_legal);
/* The fixed-order total of the lanes. */
double calq__ifmr_acc_total(const calq__ifmr_acc *acc);

/* Bounds on the candidates' exact sums from a histogram with moments (ifmr_bound.c): the
 * stream's loss pass computes exact sums only for candidates that can still win. */
typedef struct calq__ifmr_bin {
    uint64_t n;
    double s1, s2; /* sums of e and e^2, e = x - the bin's base */
} calq__ifmr_bin;
typedef struct calq__ifmr_hist {
    unsigned nb;         /* interior bins over [flo, fhi]; bin 0 below flo, bin nb + 1 above fhi */
    float flo, fhi;      /* the union of the candidates' clip ranges */
    float dmin, dmax;    /* the data's finite range: the outer bins' far edges */
    double w, inv_w;     /* interior bin width */
    uint64_t added;      /* elements added (zeros included: they count for the rounding bound) */
    int bad;             /* a NaN was added: no bounds */
    calq__ifmr_bin *bin; /* nb + 2, owned */
} calq__ifmr_hist;
/* Returns 0 when the range is degenerate or memory runs out (no pruning then). */
int calq__ifmr_hist_init(calq__ifmr_hist *h, unsigned nb, float flo, float fhi, float dmin, float dmax);
void calq__ifmr_hist_free(calq__ifmr_hist *h);
void calq__ifmr_hist_clear(calq__ifmr_hist *h);
void calq__ifmr_hist_add(calq__ifmr_hist *h, const float *x, size_t n);
/* into += from (the same geometry) */
void calq__ifmr_hist_merge(calq__ifmr_hist *into, const calq__ifmr_hist *from);
/* The non-empty bins of a histogram, `group` interior bins merged into one (1: as they are),
 * laid out for calq__ifmr_binset_bounds. Returns 0 after a NaN or when memory runs out. */
typedef struct calq__ifmr_binset {
    size_t m;
    float *a, *b;                    /* float edges every element of the bin lies in */
    double *base, *n, *s1, *s2, *a1; /* a1: a bound of the sum of |e| */
    uint64_t added;
} calq__ifmr_binset;
int calq__ifmr_binset_make(const calq__ifmr_hist *h, unsigned group, calq__ifmr_binset *bs);
void calq__ifmr_binset_free(calq__ifmr_binset *bs);
/* lower <= the lane-sum total calq__ifmr_losses would give candidate c over the histogram's
 * elements <= upper; coarser bins give looser bounds. Returns 0 (no bounds) for a candidate
 * whose clip range misses 0 or whose scale is not finite and positive. */
int calq__ifmr_binset_bounds(const calq__ifmr_binset *bs, const calq__ifmr_cand *c, double *lower, double *upper);
/* The same with the per-bin terms of one instruction set (the same doubles on every one; tests
 * compare them); an ISA the CPU lacks falls back to the plain loop. */
int calq__ifmr_binset_bounds_isa(calq__isa isa, const calq__ifmr_binset *bs, const calq__ifmr_cand *c, double *lower,
                                 double *upper);

/* Checks options; fills the number of candidates. */
calq_status calq__ifmr_check_opts(const calq_ifmr_opts *o, const char *layer, unsigned *n_cand, calq_error *err);
/* k = the rank of the percentile value (§3.3, float32 product); 0 when out of [1, L]. */
uint64_t calq__ifmr_rank(float percentile, uint64_t L);
/* An upper bound of calq__ifmr_rank(p, L') over all L' <= L. */
uint64_t calq__ifmr_rank_bound(float percentile, uint64_t L);

/* Data statistics both implementations gather before the search. */
typedef struct calq__ifmr_stats {
    uint64_t count, nan_count, pos_inf_count, neg_inf_count;
    float data_min, data_max; /* finite values; +inf/-inf when there are none */
    float kth_max, kth_min;   /* k_max-th largest and k_min-th smallest value */
} calq__ifmr_stats;

/* The failures that only depend on the statistics: empty data, inf/NaN (§3.3), a rank out of
 * range. Returns CALQ_OK when the data are usable. */
calq_status calq__ifmr_check_stats(const calq__ifmr_stats *st, const calq_ifmr_opts *o, const char *layer,
                                   calq_error *err);
/* Fills max_init/min_init (zero forcing) and the candidate grid cand[n_cand]; returns the number
 * of legal candidates. When none is legal, fails with the diagnosis. */
calq_status calq__ifmr_grid(const calq__ifmr_stats *st, const calq_ifmr_opts *o, unsigned n_cand, const char *layer,
                            calq__ifmr_cand *cand, float *max_init, float *min_init, calq_error *err);
/* Picks the first minimum among legal candidates and computes scale/offset (§3.5, §3.6). */
calq_status calq__ifmr_select(const calq__ifmr_stats *st, const calq_ifmr_opts *o, unsigned n_cand,
                              const calq__ifmr_cand *cand, const calq__ifmr_acc *acc, float max_init, float min_init,
                              const char *layer, calq_ifmr_result *out, calq_error *err);

/* ---- range calibrators (range.c, range_search.c) ------------------------------------------- */

/* IFMR's final step (§3.5, §3.6) for a clip range [lo, hi] that contains 0: asymmetric
 * scale = (hi - lo)/(2^n - 1), offset = -round(lo/scale) - 2^(n-1); symmetric: the side with the
 * larger magnitude (a tie picks the negative one) over 2^(n-1) - 1 (positive) or 2^(n-1)
 * (negative), offset 0. process_scale (§2.1) applies; *rule reports a broken rule (scale then
 * holds the value it would have had) and the function returns 0, else 1. */
int calq__range_factors(float lo, float hi, int asymmetric, int num_bits, float *scale, int *offset,
                        calq__scale_rule *rule);

/* TensorRT's entropy search on a histogram whose window grows from bin 0: for every window of
 * i in [i_min, B] bins, P = h[0..i) with the mass of h[i..B) added to its last bin, Q = h[0..i)
 * merged into nq groups (group g = bins [g*i/nq, (g+1)*i/nq)) and spread evenly over the bins
 * where P is not 0; kl[i - i_min] = KL(P/|P| || Q/|Q|), +inf when Q is 0 where P is not.
 * kl has B - i_min + 1 entries. Windows are independent (parallel over i, any thread count). */
void calq__range_kl(const uint64_t *h, int B, int i_min, int nq, int n_threads, double *kl);
/* The same divergence for one window, from P and Q built bin by bin (the definition). */
double calq__range_kl_ref(const uint64_t *h, int B, int i, int nq);

/* The squared quantization error of a histogram, each bin's count spread uniformly over
 * [lo + j*w, lo + (j+1)*w], under fq(x) = (clamp(round(x/s) + o, qmin, qmax) - o) * s: the sum
 * of count_j / w * integral of (fq(x) - x)^2 over the bin, in double. */
double calq__range_hist_sse(const uint64_t *h, int B, double lo, double w, double s, int o, int qmin, int qmax);
/* The same with the error of the bins below 0 weighted by neg_weight (a bin straddling 0 split at
 * 0): the squared error after a LeakyRelu of slope alpha = sqrt(neg_weight) that reads the
 * quantized tensor, since LeakyRelu(q) - LeakyRelu(x) = alpha (q - x) where both are negative. */
double calq__range_hist_sse_weighted(const uint64_t *h, int B, double lo, double w, double s, int o, int qmin, int qmax,
                                     double neg_weight);
/* For the int8 exports' tensors that only a LeakyRelu reads (issue 12, item 5): the mse search
 * then minimises the error after the LeakyRelu, neg_weight = alpha^2 in (0, 1), over a grid of
 * both clip ends (the negative side may be clipped harder than the positive one, which it cannot
 * be with the one-sided windows). 0 (the default): plain mse. Set before the first feed. */
void calq__range_stream_set_neg_weight(calq_range_stream *s, double neg_weight);
/* As calq__ifmr_stream_bound_feed, for the range stream. */
void calq__range_stream_bound_feed(calq_range_stream *s, size_t n);

/* ---- bounded tails for exact order statistics (tail.c) ------------------------------------ */

/* Keeps the largest values fed to it in a min-heap of at most `cap` entries. Everything it
 * drops is <= `edge` (the largest value ever dropped). After sorting, the k-th largest value of
 * all the data fed is known exactly when k <= n and v[k-1] >= edge: every value above edge was
 * kept, so the kept values at or above edge are the data's own top values. With a capacity that
 * never falls below the k finally needed this always holds. The smallest values are kept by
 * feeding -x. */
typedef struct calq__tail {
    float *v;
    size_t n, cap, alloc;
    int dropped;
    float edge;
} calq__tail;

void calq__tail_reset(calq__tail *t);
void calq__tail_free(calq__tail *t);
/* Raises the capacity to cap (never lowers it). Returns 0 when memory runs out. */
int calq__tail_set_cap(calq__tail *t, size_t cap);
void calq__tail_push(calq__tail *t, float x);
/* Counts values known to be dropped without pushing them (all <= x). */
static inline void calq__tail_drop(calq__tail *t, float x)
{
    if (!t->dropped || x > t->edge) t->edge = x;
    t->dropped = 1;
}
/* The heap's smallest kept value once full; values <= it would only be dropped. */
static inline int calq__tail_rejects(const calq__tail *t, float x)
{
    return t->n == t->cap && t->n && x <= t->v[0];
}
/* Sorts the kept values (largest first; the heap is gone afterwards) and reads the k-th
 * largest. Returns 1 when it is provably exact, 0 when values it would need were dropped. */
int calq__tail_kth(calq__tail *t, uint64_t k, float *out);

/* Sizes the two percentile tails of a stream (top: the largest values, bottom: the smallest, kept
 * as -x) for the ranks of max_p / min_p (§3.3): for any count up to max_count when it is known,
 * else for twice the rank the count so far needs plus CALQ__TAIL_SLACK (the stream then proves
 * its order statistics exact at the end). Returns 0 when memory runs out. */
#define CALQ__TAIL_SLACK 64
int calq__tails_size(calq__tail *top, calq__tail *bottom, float max_p, float min_p, uint64_t max_count, uint64_t count);

/* An order-independent checksum of the values (added to *s1, *s2), so a stream's later pass can
 * tell it was fed other data than its first. */
void calq__values_checksum(const float *x, size_t n, uint64_t *s1, uint64_t *s2);

/* ---- DMQ balancing (§7.2 dmq_balancer_param; docs/numerics.md, "DMQ balancing") ---------------- */

/* The clamp of a balance factor: s stays in [1/CALQ_DMQ_S_MAX, CALQ_DMQ_S_MAX], so neither the
 * balanced activation nor the balanced weight moves more than 2^16 in range (an input channel
 * that is almost always 0 would otherwise get a factor that overflows a weight). */
#define CALQ_DMQ_S_MAX 65536.0
/* s_j = xmax_j^alpha / wmax_j^(1-alpha) for j < n (SmoothQuant's factor, alpha the migration
 * strength), computed in double and rounded once to float32; s_j = 1 where either max is 0 or
 * not finite (nothing to balance); clamped as above. */
void calq__dmq_factors(const float *xmax, const float *wmax, int64_t n, double alpha, float *s);
/* Folds max |x| per channel of x (float32, shape dims[ndim]) along `axis` into xmax[dims[axis]]
 * (non-finite values ignored, xmax starts at 0): the streaming statistic of calibration's
 * balancing pass. The _ref kernel is the plain loop; the fast one walks contiguous runs. */
void calq__dmq_absmax_ref(const float *x, int ndim, const int64_t *dims, int axis, float *xmax);
void calq__dmq_absmax(const float *x, int ndim, const int64_t *dims, int axis, float *xmax);

#endif
