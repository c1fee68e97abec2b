/* Streaming IFMR equals the whole-buffer reference bit for bit (amct-reference.md §3), for any
 * batch split and thread count: scale, offset, winning index, loss and percentile values. Also
 * holds every vectorized loss kernel against the scalar one on arbitrary element positions; the
 * two stream runs of a case use the CPU's best kernels and the AVX2 ones. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "op_harness.h"
#include "quant/quant.h"

static uint64_t rs;
static uint64_t next64(void)
{
    uint64_t z = (rs += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static double unif(void)
{
    return (double)(next64() >> 11) * 0x1p-53;
}
static double normal(void)
{
    double u = unif(), v = unif();
    return sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v);
}

enum gen {
    G_UNIFORM,
    G_NORMAL,
    G_RELU,
    G_LAPLACE,
    G_NEGATIVE,
    G_CONST_POS,
    G_CONST_NEG,
    G_OUTLIERS,
    G_TINY,
    G_HUGE,
    G_DESCENDING,
    G_INTEGERS,
    G_ASCENDING,
    G_BIMODAL
};

static void generate(enum gen g, float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double v = 0;
        switch (g) {
        case G_UNIFORM: v = 2.0 * unif() - 1.0; break;
        case G_NORMAL: v = normal(); break;
        case G_RELU: v = fmax(0.0, normal() * 3.0 + 0.5); break;
        case G_LAPLACE: v = (unif() < 0.5 ? -1 : 1) * -log(unif() + 1e-300) * 10.0; break;
        case G_NEGATIVE: v = -(0.1 + 4.9 * unif()); break;
        case G_CONST_POS: v = 3.25; break;
        case G_CONST_NEG: v = -7.0; break;
        case G_OUTLIERS: v = normal() * (unif() < 0.001 ? 1000.0 : 1.0); break;
        case G_TINY: v = normal() * 1e-30; break;
        case G_HUGE: v = 3.0e9 * unif(); break;
        case G_DESCENDING: v = (double)(n - i) / (double)n; break;
        case G_INTEGERS: v = floor(normal() * 20.0) * 0.5; break;
        case G_ASCENDING: v = (double)i / (double)n - 0.25; break;
        case G_BIMODAL: v = (unif() < 0.7 ? -2.0 : 5.0) + 0.3 * normal(); break;
        }
        x[i] = (float)v;
    }
}

enum split { S_ONE, S_RANDOM, S_SINGLES, S_FIXED, S_PRIME, S_BIG_RANDOM };

static size_t next_batch(enum split sp, size_t left)
{
    size_t b = left;
    switch (sp) {
    case S_ONE: break;
    case S_RANDOM: b = 1 + next64() % 5000; break;
    case S_SINGLES: b = 1; break;
    case S_FIXED: b = 4096; break;
    case S_PRIME: b = 9973; break;
    case S_BIG_RANDOM: b = 1 + next64() % 2000000; break;
    }
    return b < left ? b : left;
}

typedef struct tcase {
    const char *name;
    enum gen gen;
    size_t n;
    int asym, amct;
    float pmax, pmin;
    enum split split;
    int declare_count, threads;
} tcase;

static int same(const calq_ifmr_result *a, const calq_ifmr_result *b)
{
    return !memcmp(&a->scale, &b->scale, sizeof(float)) && a->offset == b->offset && a->best_index == b->best_index &&
           !memcmp(&a->best_loss, &b->best_loss, sizeof(double)) &&
           !memcmp(&a->max_init, &b->max_init, sizeof(float)) && !memcmp(&a->min_init, &b->min_init, sizeof(float)) &&
           !memcmp(&a->clip_max, &b->clip_max, sizeof(float)) && a->n_illegal == b->n_illegal && a->count == b->count;
}

static calq__isa stream_isa; /* the loss kernels of the next stream_run */
static int stream_prune;     /* the next stream_run prunes whatever the count (ifmr_bound.c) */
static unsigned prune_exact, prune_legal;

static calq_status stream_run(const float *x, size_t n, const calq_ifmr_opts *o, enum split sp, int declare,
                              calq_ifmr_result *res, int *passes, size_t *bytes, calq_error *err)
{
    calq_ifmr_stream *s = NULL;
    calq_status st = calq_ifmr_stream_create(o, declare ? (uint64_t)n : 0, "t", &s, err);
    if (st == CALQ_OK) calq__ifmr_stream_set_isa(s, stream_isa);
    if (st == CALQ_OK && stream_prune) calq__ifmr_stream_set_prune(s, 0);
    int done = 0;
    *passes = 0;
    *bytes = 0;
    uint64_t seed = rs;
    while (st == CALQ_OK && !done) {
        rs = seed; /* every pass gets the same batches */
        for (size_t j = 0; j < n && st == CALQ_OK;) {
            size_t b = next_batch(sp, n - j);
            st = calq_ifmr_stream_feed(s, x + j, b, err);
            j += b;
        }
        size_t by = calq_ifmr_stream_bytes(s);
        if (by > *bytes) *bytes = by;
        if (st == CALQ_OK) st = calq_ifmr_stream_end_pass(s, &done, err);
        ++*passes;
    }
    if (st == CALQ_OK) st = calq_ifmr_stream_result(s, res, err);
    if (st == CALQ_OK) calq__ifmr_stream_prune_info(s, &prune_exact, &prune_legal);
    calq_ifmr_stream_free(s);
    return st;
}

static void run_case(const tcase *c)
{
    float *x = malloc(c->n * sizeof *x);
    rs = 0x1234567ull + (uint64_t)c->gen * 1000003ull + c->n;
    generate(c->gen, x, c->n);
    calq_ifmr_opts o;
    calq_ifmr_opts_init(&o);
    o.asymmetric = c->asym;
    o.amct_float_loss = c->amct;
    if (c->pmax > 0) o.max_percentile = c->pmax;
    if (c->pmin > 0) o.min_percentile = c->pmin;
    calq_ifmr_result ref, st1, st2;
    calq_error e = {0};
    clock_t t0 = clock();
    calq_status s0 = calq_ifmr(x, c->n, &o, "t", &ref, &e);
    double t_ref = (double)(clock() - t0) / CLOCKS_PER_SEC;
    EXPECT(s0 == CALQ_OK);
    if (s0 != CALQ_OK) {
        fprintf(stderr, "%s: reference failed: %s\n", c->name, e.message);
        free(x);
        return;
    }
    int passes1 = 0, passes2 = 0;
    size_t bytes1 = 0, bytes2 = 0;
    o.n_threads = c->threads;
    stream_isa = calq__ifmr_isa_best();
    rs = 42;
    calq_status s1 = stream_run(x, c->n, &o, c->split, c->declare_count, &st1, &passes1, &bytes1, &e);
    EXPECT(s1 == CALQ_OK);
    if (s1 != CALQ_OK) fprintf(stderr, "%s: stream failed: %s\n", c->name, e.message);
    /* a second run with another split, the other count mode and another thread count */
    o.n_threads = c->threads == 1 ? 2 : 1;
    stream_isa = calq__ifmr_isa_supported(CALQ__ISA_AVX2) ? CALQ__ISA_AVX2 : CALQ__ISA_C;
    rs = 7;
    calq_status s2 =
        stream_run(x, c->n, &o, c->split == S_ONE ? S_RANDOM : S_ONE, !c->declare_count, &st2, &passes2, &bytes2, &e);
    EXPECT(s2 == CALQ_OK);
    /* a third with the candidate search pruned whatever the size (the default prunes from 2^20
     * elements): the bounds must never drop the winner */
    calq_ifmr_result st3;
    int passes3 = 0;
    size_t bytes3 = 0;
    o.n_threads = 2;
    stream_isa = calq__ifmr_isa_best();
    stream_prune = 1;
    rs = 99;
    calq_status s3 = stream_run(x, c->n, &o, S_RANDOM, 0, &st3, &passes3, &bytes3, &e);
    stream_prune = 0;
    EXPECT(s3 == CALQ_OK);
    int ok =
        s1 == CALQ_OK && s2 == CALQ_OK && s3 == CALQ_OK && same(&ref, &st1) && same(&ref, &st2) && same(&ref, &st3);
    EXPECT(ok);
    printf("%-28s n=%-8zu %s %s p=%.6g/%.6g: scale %.9g offset %4d idx %2d loss %.6e illegal %2d | passes %d/%d, "
           "state %zu B, ref %.2fs | pruned: %u/%u exact, %d passes  %s\n",
           c->name, c->n, c->asym ? "asym" : "sym ", c->amct ? "float " : "double", (double)o.max_percentile,
           (double)o.min_percentile, (double)ref.scale, ref.offset, ref.best_index, ref.best_loss, ref.n_illegal,
           passes1, passes2, bytes1, t_ref, prune_exact, prune_legal, passes3, ok ? "same" : "DIFFERENT");
    if (!ok && s1 == CALQ_OK)
        fprintf(stderr, "  ref %.9g/%d/%d/%.17g  stream %.9g/%d/%d/%.17g  stream2 %.9g/%d/%d/%.17g\n",
                (double)ref.scale, ref.offset, ref.best_index, ref.best_loss, (double)st1.scale, st1.offset,
                st1.best_index, st1.best_loss, (double)st2.scale, st2.offset, st2.best_index, st2.best_loss);
    if (!ok && s3 == CALQ_OK)
        fprintf(stderr, "  pruned %.9g/%d/%d/%.17g\n", (double)st3.scale, st3.offset, st3.best_index, st3.best_loss);
    free(x);
}

/* Every fast kernel (portable C, AVX2, AVX-512: those the CPU has) against the scalar one:
 * the same sums bit for bit, for any start position, any split into calls and any number of
 * candidates at once (the SIMD kernels group 4 candidates in lane mode, 64 across vector
 * elements in float mode). Candidates: ordinary, exact halves after the division (ties), a
 * clip range far inside the data, a scale near 1/FLT_EPSILON, a tiny scale; data with runs of
 * +-0 (skipped by the SIMD kernels) and, for the last grouping, a candidate whose zeros count. */
static void test_kernels(void)
{
    enum { N = 50000, NC = 70 };
    float *x = malloc(N * sizeof *x);
    rs = 99;
    generate(G_OUTLIERS, x, N);
    x[5] = 0.5f;
    x[6] = -1.5f;                                                   /* exact halves after division by 1 */
    for (int i = 100; i < 400; i++) x[i] = (float)(i - 250) * 0.5f; /* a run of halves */
    x[401] = -0.0f;
    x[402] = 1e30f;
    x[403] = -1e30f;
    x[404] = 1e-40f; /* subnormal */
    for (int i = 1000; i < 30000; i++)
        if (next64() % 2) x[i] = i % 3 ? 0.0f : -0.0f; /* ReLU-like zeros (the kernels skip them) */
    for (int i = 30000; i < 30100; i++) x[i] = 0.0f;   /* a run of zeros longer than a row */
    calq__ifmr_cand c[NC];
    for (int k = 0; k < NC; k++) {
        float r = 0.7f + 0.01f * (float)k;
        switch (k % 5) {
        case 0: c[k] = (calq__ifmr_cand){-2.0f, 3.0f * r, 1.0f, 1.0f, CALQ__SCALE_OK}; break;
        case 1: c[k] = (calq__ifmr_cand){-1.0f, 0.75f * r, 0.0068627f * r, 0.0068627f, CALQ__SCALE_OK}; break;
        case 2: c[k] = (calq__ifmr_cand){-100.0f * r, 100.0f * r, 0.787f * r, 0.787f, CALQ__SCALE_OK}; break;
        case 3: c[k] = (calq__ifmr_cand){-1e9f, 2e9f * r, 8e6f * r, 8e6f, CALQ__SCALE_OK}; break;
        default: c[k] = (calq__ifmr_cand){0.0f, 1e-6f * r, 1.2e-7f * r, 1.2e-7f, CALQ__SCALE_OK}; break;
        }
    }
    c[0].lo = 0.5f; /* a clip range without 0 (not IFMR's): zeros count, so nothing is skipped */
    unsigned idx[NC];
    for (int k = 0; k < NC; k++) idx[k] = (unsigned)(NC - 1 - k); /* any order */
    calq__ifmr_acc *ref = calloc(2 * NC, sizeof *ref), *got = calloc(2 * NC, sizeof *got);
    for (int amct = 0; amct < 2; amct++)
        for (int k = 0; k < NC; k++) calq__ifmr_loss_ref(x, N, 3, &c[k], amct, (float)N, &ref[amct * NC + k]);
    const unsigned counts[] = {1, 2, 3, 4, 5, 7, 60, 64, 65, NC};
    int tried = 0;
    for (int isa = CALQ__ISA_C; isa <= CALQ__ISA_AVX512; isa++) {
        if (!calq__ifmr_isa_supported((calq__isa)isa)) {
            printf("kernels: %s not supported by this CPU, not tested\n", calq__isa_name((calq__isa)isa));
            continue;
        }
        for (int amct = 0; amct < 2; amct++)
            for (size_t t = 0; t < sizeof counts / sizeof counts[0]; t++) {
                unsigned k = counts[t];
                memset(got, 0, 2 * NC * sizeof *got);
                for (size_t j = 0; j < N;) {
                    size_t m = 1 + next64() % (t % 2 ? 700 : 5000);
                    if (m > N - j) m = N - j;
                    calq__ifmr_losses((calq__isa)isa, x + j, m, 3 + j, c, idx, k, amct, (float)N, got + amct * NC);
                    j += m;
                }
                int bad = 0;
                for (unsigned q = 0; q < k; q++)
                    bad += memcmp(&ref[amct * NC + idx[q]], &got[amct * NC + idx[q]], sizeof *ref) != 0;
                if (bad)
                    fprintf(stderr, "kernels: %s, %s sums, %u candidates at once: %d differ from _ref\n",
                            calq__isa_name((calq__isa)isa), amct ? "float" : "double", k, bad);
                EXPECT(bad == 0);
                tried++;
            }
    }
    printf("kernels: %d kernel/mode/grouping combinations equal the _ref kernel bit for bit (best here: %s)\n", tried,
           calq__isa_name(calq__ifmr_isa_best()));
    free(ref);
    free(got);
    free(x);
}

/* The pruning bounds (ifmr_bound.c) hold the exact sums of the _ref kernel between them, at
 * every bin grouping, on data built to be hard for them (exact halves, +-0, subnormals, +-1e30,
 * outliers) and candidates from ordinary to a scale near 1/FLT_EPSILON; with the histogram over
 * the candidates' clip ranges (as the stream builds it) and over a narrower range (more elements
 * in the outer bins). And the nonzero compaction of every ISA equals the plain one. */
static void test_bounds(void)
{
    enum { N = 200000, NC = 60 };
    float *x = malloc(N * sizeof *x);
    float *buf = malloc((N + 16) * sizeof *buf), *ref = malloc((N + 16) * sizeof *ref);
    rs = 4242;
    generate(G_OUTLIERS, x, N);
    for (int i = 100; i < 400; i++) x[i] = (float)(i - 250) * 0.5f;
    x[401] = -0.0f;
    x[402] = 1e30f;
    x[403] = -1e30f;
    x[404] = 1e-40f;
    for (int i = 1000; i < 90000; i++)
        if (next64() % 2) x[i] = i % 3 ? 0.0f : -0.0f;
    x[N - 1] = NAN; /* only for the compaction check below */
    size_t c_ref = calq__compact_nonzero_ref(x, N, ref);
    for (int isa = CALQ__ISA_C; isa <= CALQ__ISA_AVX512; isa++) {
        if (!calq__ifmr_isa_supported((calq__isa)isa)) continue;
        size_t c = calq__compact_nonzero((calq__isa)isa, x, N, buf);
        EXPECT(c == c_ref && !memcmp(buf, ref, c * sizeof *buf));
    }
    x[N - 1] = 0.25f;
    int checked = 0, held = 0, same_isa = 0;
    for (int huge = 1; huge >= 0; huge--) { /* with +-1e30 (they dominate every sum), then without */
        x[402] = huge ? 1e30f : 3.0f;
        x[403] = huge ? -1e30f : -3.0f;
        float dmin = INFINITY, dmax = -INFINITY;
        for (int i = 0; i < N; i++) {
            dmin = x[i] < dmin ? x[i] : dmin;
            dmax = x[i] > dmax ? x[i] : dmax;
        }
        calq__ifmr_cand c[NC];
        for (int k = 0; k < NC; k++) {
            float r = 0.7f + 0.01f * (float)k;
            switch (k % 4) {
            case 0: c[k] = (calq__ifmr_cand){-2.0f, 3.0f * r, 5.0f * r / 255.0f, 0, CALQ__SCALE_OK}; break;
            case 1: c[k] = (calq__ifmr_cand){-1.0f, 0.75f * r, 0.0068627f * r, 0, CALQ__SCALE_OK}; break;
            case 2: c[k] = (calq__ifmr_cand){-100.0f * r, 100.0f * r, 0.787f * r, 0, CALQ__SCALE_OK}; break;
            default: c[k] = (calq__ifmr_cand){-1e9f, 2e9f * r, 8e6f * r, 0, CALQ__SCALE_OK}; break;
            }
        }
        for (int range = 0; range < 2; range++) {
            float flo = range ? -1.5f : INFINITY, fhi = range ? 2.0f : -INFINITY;
            for (int k = 0; !range && k < NC; k++) {
                flo = c[k].lo < flo ? c[k].lo : flo;
                fhi = c[k].hi > fhi ? c[k].hi : fhi;
            }
            calq__ifmr_hist h;
            EXPECT(calq__ifmr_hist_init(&h, 16384, flo, fhi, dmin, dmax));
            calq__ifmr_hist_add(&h, x, N / 3); /* in two calls */
            calq__ifmr_hist_add(&h, x + N / 3, N - N / 3);
            for (unsigned group = 1; group <= 64; group *= 8) {
                calq__ifmr_binset bs;
                EXPECT(calq__ifmr_binset_make(&h, group, &bs));
                for (int k = 0; k < NC; k++) {
                    calq__ifmr_acc acc;
                    memset(&acc, 0, sizeof acc);
                    calq__ifmr_loss_ref(x, N, 0, &c[k], 0, (float)N, &acc);
                    double t = calq__ifmr_acc_total(&acc), lo = 0, up = 0;
                    EXPECT(calq__ifmr_binset_bounds(&bs, &c[k], &lo, &up));
                    /* every ISA's per-bin terms give the plain loop's doubles */
                    for (int isa = CALQ__ISA_C; isa <= CALQ__ISA_AVX512; isa++) {
                        double li = 0, ui = 0, lc = 0, uc = 0;
                        EXPECT(calq__ifmr_binset_bounds_isa((calq__isa)isa, &bs, &c[k], &li, &ui));
                        EXPECT(calq__ifmr_binset_bounds_isa(CALQ__ISA_C, &bs, &c[k], &lc, &uc));
                        EXPECT(!memcmp(&li, &lc, sizeof li) && !memcmp(&ui, &uc, sizeof ui));
                        same_isa += !memcmp(&li, &lc, sizeof li) && !memcmp(&ui, &uc, sizeof ui);
                    }
                    checked++;
                    held += lo <= t && t <= up;
                    if (!(lo <= t && t <= up))
                        fprintf(stderr, "bounds: candidate %d group %u range %d: %.17g not in [%.17g, %.17g]\n", k,
                                group, range, t, lo, up);
                }
                calq__ifmr_binset_free(&bs);
            }
            calq__ifmr_hist_free(&h);
        }
    }
    EXPECT(held == checked);
    EXPECT(same_isa == 3 * checked);
    printf("bounds: %d of %d exact sums within their bounds, the same bounds on every ISA; compaction equal on "
           "every ISA\n",
           held, checked);
    free(x);
    free(buf);
    free(ref);
}

/* A declared max_count that a later feed exceeds (calibration declares the first batch's size
 * times the batch count; rows after NonZero / NMS vary from batch to batch): with
 * calq__ifmr_stream_bound_feed / calq__range_stream_bound_feed before each first-pass feed, as
 * calq__group_feed does, the stream ends with the factors of one declared 0 on the same feeds.
 * Without the call the feed is refused (the check that makes this test able to fail). */
static void test_bound_exceeded(void)
{
    const size_t n = 60000;
    float *x = malloc(n * sizeof *x);
    const enum gen gens[] = {G_NORMAL, G_DESCENDING, G_RELU};
    for (size_t gi = 0; gi < sizeof gens / sizeof gens[0]; gi++) {
        generate(gens[gi], x, n);
        calq_ifmr_opts o;
        calq_ifmr_opts_init(&o);
        o.max_percentile = o.min_percentile = gens[gi] == G_DESCENDING ? 0.9f : 0.999f; /* descending: a repeat */
        const size_t first = 7000;                                                      /* then 53000 */
        calq_ifmr_result want, got;
        calq_error err = {0};
        int passes_want = 0;
        size_t bytes = 0;
        rs = 99;
        EXPECT(stream_run(x, n, &o, S_ONE, 0, &want, &passes_want, &bytes, &err) == CALQ_OK);
        for (int relax = 1; relax >= 0; relax--) {
            calq_ifmr_stream *s = NULL;
            EXPECT(calq_ifmr_stream_create(&o, 3 * first, "t", &s, &err) == CALQ_OK);
            calq_status st = CALQ_OK;
            int done = 0, pass = 0;
            while (st == CALQ_OK && !done) {
                ++pass;
                for (size_t j = 0; j < n && st == CALQ_OK;) {
                    const size_t b = j == 0 ? first : n - j;
                    if (relax && pass == 1) calq__ifmr_stream_bound_feed(s, b);
                    st = calq_ifmr_stream_feed(s, x + j, b, &err);
                    j += b;
                }
                if (st == CALQ_OK) st = calq_ifmr_stream_end_pass(s, &done, &err);
            }
            if (relax) {
                EXPECT(st == CALQ_OK && calq_ifmr_stream_result(s, &got, &err) == CALQ_OK && same(&got, &want));
            } else {
                EXPECT(st == CALQ_ERR_BAD_PARAMETERS && strstr(err.message, "declared as max_count"));
            }
            calq_ifmr_stream_free(s);
        }
        /* the range stream's percentile, the same way */
        calq_range_opts ro;
        calq_range_opts_init(&ro, CALQ_RANGE_PERCENTILE);
        ro.max_percentile = ro.min_percentile = o.max_percentile;
        calq_range_result rwant = {0}, rgot = {0};
        for (int mode = 0; mode < 2; mode++) {
            calq_range_stream *s = NULL;
            EXPECT(calq_range_stream_create(&ro, mode ? 3 * first : 0, "t", &s, &err) == CALQ_OK);
            calq_status st = CALQ_OK;
            int done = 0, pass = 0;
            while (st == CALQ_OK && !done) {
                ++pass;
                for (size_t j = 0; j < n && st == CALQ_OK;) {
                    const size_t b = j == 0 ? first : n - j;
                    if (pass == 1) calq__range_stream_bound_feed(s, b);
                    st = calq_range_stream_feed(s, x + j, b, &err);
                    j += b;
                }
                if (st == CALQ_OK) st = calq_range_stream_end_pass(s, &done, &err);
            }
            EXPECT(st == CALQ_OK && calq_range_stream_result(s, mode ? &rgot : &rwant, &err) == CALQ_OK);
            calq_range_stream_free(s);
        }
        EXPECT(!memcmp(&rgot.scale, &rwant.scale, sizeof(float)) && rgot.offset == rwant.offset &&
               rgot.count == rwant.count && rgot.count == n);
    }
    free(x);
}

int main(void)
{
    test_kernels();
    test_bounds();
    test_bound_exceeded();
    const tcase cases[] = {
        {"uniform", G_UNIFORM, 200000, 1, 0, 0, 0, S_RANDOM, 0, 2},
        {"uniform sym", G_UNIFORM, 200000, 0, 0, 0, 0, S_FIXED, 1, 1},
        {"normal", G_NORMAL, 300000, 1, 0, 0, 0, S_PRIME, 0, 2},
        {"normal sym p=0.999", G_NORMAL, 300000, 0, 0, 0.999f, 0.999f, S_RANDOM, 0, 2},
        {"relu", G_RELU, 250000, 1, 0, 0, 0, S_RANDOM, 1, 2},
        {"relu float loss", G_RELU, 250000, 1, 1, 0, 0, S_RANDOM, 0, 2},
        {"laplace", G_LAPLACE, 150000, 1, 0, 0.9999f, 0.99f, S_RANDOM, 0, 2},
        {"laplace sym float loss", G_LAPLACE, 150000, 0, 1, 0, 0, S_PRIME, 1, 1},
        {"all negative", G_NEGATIVE, 100000, 1, 0, 0, 0, S_RANDOM, 0, 2},
        {"all negative sym", G_NEGATIVE, 100000, 0, 0, 0, 0, S_FIXED, 0, 2},
        {"constant 3.25", G_CONST_POS, 70000, 1, 0, 0, 0, S_RANDOM, 0, 2},
        {"constant -7 sym", G_CONST_NEG, 70000, 0, 0, 0, 0, S_PRIME, 1, 2},
        {"outliers", G_OUTLIERS, 400000, 1, 0, 0.9995f, 0.9995f, S_RANDOM, 0, 2},
        {"tiny (scale -> 1.0)", G_TINY, 50000, 1, 0, 0, 0, S_RANDOM, 0, 2},
        {"huge (some illegal)", G_HUGE, 60000, 1, 0, 0, 0, S_RANDOM, 0, 2},
        {"descending p=0.9 (repeat)", G_DESCENDING, 100000, 1, 0, 0.9f, 0.9f, S_RANDOM, 0, 2},
        {"integers (ties)", G_INTEGERS, 120000, 1, 0, 0, 0, S_RANDOM, 0, 2},
        {"integers sym float loss", G_INTEGERS, 120000, 0, 1, 0, 0, S_FIXED, 0, 2},
        {"ascending p=0.6", G_ASCENDING, 80000, 1, 0, 0.6f, 0.75f, S_RANDOM, 0, 2},
        {"bimodal", G_BIMODAL, 90000, 0, 0, 0, 0, S_RANDOM, 0, 2},
        {"1-element batches", G_NORMAL, 20000, 1, 0, 0, 0, S_SINGLES, 0, 2},
        {"1-element batches float", G_RELU, 12000, 1, 1, 0.99f, 0.99f, S_SINGLES, 1, 1},
        {"1-element batches sym", G_LAPLACE, 15000, 0, 0, 0.999f, 0.999f, S_SINGLES, 0, 2},
        {"single element", G_NORMAL, 1, 1, 0, 0, 0, S_ONE, 0, 1},
        {"ten million", G_NORMAL, 10000000, 1, 0, 0, 0, S_BIG_RANDOM, 0, 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i]);
    if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
    return failures ? 1 : 0;
}
