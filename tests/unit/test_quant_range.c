/* calq's range calibrators (src/quant/range.c, range_search.c; docs/numerics.md): the KL
 * closed form against its definition, the histogram error against numerical integration,
 * worked examples, AMCT's rules on edge data (zeros, NaN/Inf, scales beyond 1/FLT_EPSILON),
 * and independence of the batch split and the thread count. The formulas are checked against
 * an independent NumPy version on real activations by tests/peers/range_numpy_ref.py. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "quant/quant.h"

#include "expect.h"

static uint64_t rng = 88172645463325252ull;

static double uniform(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static float normal(void)
{
    double u = uniform() + 1e-12, v = uniform();
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

static void test_kl_closed_form(void)
{
    enum { B = 300 };
    uint64_t h[B];
    double kl[B];
    for (int trial = 0; trial < 6; trial++) {
        for (int j = 0; j < B; j++) {
            double g = exp(-(double)(j * j) / (2.0 * 60.0 * 60.0));
            h[j] = (uint64_t)(1000.0 * g * uniform());
            if (trial % 2 && j % 7 == 3) h[j] = 0; /* empty bins inside the windows */
        }
        h[B - 1] = trial; /* an outlier bin (0 in the first trial) */
        int nq = trial < 3 ? 32 : 64, i_min = nq;
        calq__range_kl(h, B, i_min, nq, trial % 2 + 1, kl);
        int bad = 0;
        for (int i = i_min; i <= B; i++) {
            double r = calq__range_kl_ref(h, B, i, nq), f = kl[i - i_min];
            if (isinf(r) || isinf(f)) {
                bad += isinf(r) != isinf(f);
                continue;
            }
            bad += !(fabs(r - f) <= 1e-9 * fabs(r) + 1e-12);
        }
        EXPECT(bad == 0);
    }
}

/* Numerical integration of the same staircase error, many points per bin, the samples below 0
 * weighted by nw (1: the plain error). */
static double sse_numeric_weighted(const uint64_t *h, int B, double lo, double w, double s, int o, int qmin, int qmax,
                                   double nw)
{
    double sum = 0.0;
    const int K = 4000;
    for (int j = 0; j < B; j++) {
        double e = 0.0;
        for (int k = 0; k < K; k++) {
            double x = lo + (j + (k + 0.5) / K) * w;
            double q = floor(x / s + 0.5) + o;
            q = q < qmin ? qmin : q > qmax ? qmax : q;
            double d = (q - o) * s - x;
            e += (x < 0.0 ? nw : 1.0) * d * d;
        }
        sum += (double)h[j] * e / K;
    }
    return sum;
}

static double sse_numeric(const uint64_t *h, int B, double lo, double w, double s, int o, int qmin, int qmax)
{
    return sse_numeric_weighted(h, B, lo, w, s, o, qmin, qmax, 1.0);
}

static void test_hist_sse(void)
{
    enum { B = 40 };
    uint64_t h[B];
    for (int j = 0; j < B; j++) h[j] = 1 + (uint64_t)(50 * uniform());
    const double lo = -1.0, w = 0.05;
    const double scales[] = {0.3, 0.01, 0.0009, 0.02}; /* wider than a bin, narrower, much narrower, clipping */
    const int offsets[] = {0, -3, 17, 100};
    for (int t = 0; t < 4; t++) {
        double a = calq__range_hist_sse(h, B, lo, w, scales[t], offsets[t], -128, 127);
        double b = sse_numeric(h, B, lo, w, scales[t], offsets[t], -128, 127);
        EXPECT(fabs(a - b) <= 1e-5 * b + 1e-12);
    }
}

static void test_hist_sse_weighted(void)
{
    enum { B = 40 };
    uint64_t h[B];
    for (int j = 0; j < B; j++) h[j] = 1 + (uint64_t)(50 * uniform());
    const double lo = -1.03, w = 0.05; /* a bin straddles 0 */
    const double scales[] = {0.3, 0.01, 0.0009, 0.02};
    const int offsets[] = {0, -3, 17, 100};
    for (int t = 0; t < 4; t++) {
        double a = calq__range_hist_sse_weighted(h, B, lo, w, scales[t], offsets[t], -128, 127, 0.01);
        double b = sse_numeric_weighted(h, B, lo, w, scales[t], offsets[t], -128, 127, 0.01);
        EXPECT(fabs(a - b) <= 1e-5 * b + 1e-12);
        double one = calq__range_hist_sse_weighted(h, B, lo, w, scales[t], offsets[t], -128, 127, 1.0);
        double plain = calq__range_hist_sse(h, B, lo, w, scales[t], offsets[t], -128, 127);
        EXPECT(fabs(one - plain) <= 1e-12 * plain + 1e-15);
    }
}

static calq_status run(calq_range_method m, int asym, const float *x, size_t n, calq_range_result *r, calq_error *err);

/* The error after LeakyRelu(alpha) of x quantized with (scale, offset). */
static double leaky_error(const float *x, int n, float alpha, float scale, int offset)
{
    double e = 0.0;
    for (int i = 0; i < n; i++) {
        float q =
            (float)((fminf(fmaxf(roundf(x[i] / scale) + (float)offset, -128.0f), 127.0f) - (float)offset) * scale);
        double d = (double)(q < 0.0f ? alpha * q : q) - (double)(x[i] < 0.0f ? alpha * x[i] : x[i]);
        e += d * d;
    }
    return e;
}

/* A pre-activation whose negative side is twice as wide as its positive side, read by a
 * LeakyRelu(0.1): the weighted search (calq__range_stream_set_neg_weight) clips the negative side
 * harder than plain mse, gives a smaller error after the LeakyRelu, and the same bits with 1 and
 * 2 threads. */
static void test_neg_weight(void)
{
    enum { N = 200000 };
    float *x = malloc(sizeof(float) * N);
    if (!x) return;
    for (int i = 0; i < N; i++) {
        float v = normal();
        x[i] = v < 0.0f ? 2.0f * v : v;
    }
    calq_error err = {0};
    calq_range_result plain, wt[2];
    memset(wt, 0, sizeof wt);
    EXPECT_OK(run(CALQ_RANGE_MSE, 1, x, N, &plain, &err));
    for (int t = 0; t < 2; t++) {
        calq_range_opts o;
        calq_range_opts_init(&o, CALQ_RANGE_MSE);
        o.n_threads = t + 1;
        calq_range_stream *s = NULL;
        EXPECT_OK(calq_range_stream_create(&o, N, "t", &s, &err));
        if (!s) break;
        calq__range_stream_set_neg_weight(s, 0.01);
        int done = 0;
        for (int pass = 0; pass < 3 && !done; pass++) { /* two passes; a failure ends the loop too */
            EXPECT_OK(calq_range_stream_feed(s, x, N, &err));
            EXPECT_OK(calq_range_stream_end_pass(s, &done, &err));
        }
        EXPECT_OK(calq_range_stream_result(s, &wt[t], &err));
        calq_range_stream_free(s);
    }
    EXPECT(wt[0].scale == wt[1].scale && wt[0].offset == wt[1].offset);
    EXPECT(wt[0].clip_min > plain.clip_min);
    EXPECT(wt[0].n_candidates == 33 * 36);
    double ew = leaky_error(x, N, 0.1f, wt[0].scale, wt[0].offset);
    double ep = leaky_error(x, N, 0.1f, plain.scale, plain.offset);
    EXPECT(ew < 0.9 * ep);
    free(x);
}

static calq_status run(calq_range_method m, int asym, const float *x, size_t n, calq_range_result *r, calq_error *err)
{
    calq_range_opts o;
    calq_range_opts_init(&o, m);
    o.asymmetric = asym;
    memset(r, 0, sizeof *r);
    return calq_range(x, n, &o, "t", r, err);
}

static void test_examples(void)
{
    calq_error err = {0};
    calq_range_result r;
    enum { N = 100000 };
    float *x = malloc(sizeof(float) * N);
    if (!x) return;
    /* minmax of [0, 1]: scale 1/255, offset -128; of [-5, 4.99] symmetric: the negative side with
     * limit 128 (amct-reference.md §3.8's IFMR examples, where the percentiles keep the extremes) */
    for (int i = 0; i < N; i++) x[i] = (float)i / (float)(N - 1);
    EXPECT_STATUS(run(CALQ_RANGE_MINMAX, 1, x, N, &r, &err), CALQ_OK, &err, NULL);
    EXPECT(r.scale == 1.0f / 255.0f && r.offset == -128 && r.clip_min == 0.0f && r.clip_max == 1.0f);
    for (int i = 0; i < N; i++) x[i] = -5.0f + 9.99f * (float)i / (float)(N - 1);
    EXPECT_STATUS(run(CALQ_RANGE_MINMAX, 0, x, N, &r, &err), CALQ_OK, &err, NULL);
    EXPECT(r.scale == 5.0f / 128.0f && r.offset == 0);
    /* percentile 0.99 of 0..999: rank 1000 - floor(0.99*1000) = 10, the 10th largest is 990 */
    for (int i = 0; i < 1000; i++) x[i] = (float)((i * 7919) % 1000);
    calq_range_opts o;
    calq_range_opts_init(&o, CALQ_RANGE_PERCENTILE);
    o.max_percentile = o.min_percentile = 0.99f;
    EXPECT_STATUS(calq_range(x, 1000, &o, "p", &r, &err), CALQ_OK, &err, NULL);
    EXPECT(r.clip_min == 0.0f && r.clip_max == 990.0f);
    /* all zeros: every method gives AMCT's scale 1.0 (process_scale, §2.1, §3.7.6) */
    memset(x, 0, sizeof(float) * N);
    for (int m = CALQ_RANGE_MINMAX; m <= CALQ_RANGE_MSE; m++)
        for (int asym = 0; asym < 2; asym++) {
            EXPECT_STATUS(run((calq_range_method)m, asym, x, N, &r, &err), CALQ_OK, &err, NULL);
            EXPECT(r.scale == 1.0f && r.offset == (asym ? -128 : 0));
        }
    /* a Gaussian: kl's and mse's clips fall inside the range and mse's error is below minmax's */
    for (int i = 0; i < N; i++) x[i] = normal();
    calq_range_result mm, kl, ms;
    EXPECT_STATUS(run(CALQ_RANGE_MINMAX, 0, x, N, &mm, &err), CALQ_OK, &err, NULL);
    EXPECT_STATUS(run(CALQ_RANGE_KL, 0, x, N, &kl, &err), CALQ_OK, &err, NULL);
    EXPECT_STATUS(run(CALQ_RANGE_MSE, 0, x, N, &ms, &err), CALQ_OK, &err, NULL);
    EXPECT(kl.scale < mm.scale && ms.scale < mm.scale && kl.scale > 0.3f * mm.scale && ms.scale > 0.3f * mm.scale);
    EXPECT(kl.best_bins > 128 && kl.best_bins < 2048 && ms.best_bins > 0 && ms.best_bins < 2048);
    free(x);
}

static void test_edge_data(void)
{
    calq_error err = {0};
    calq_range_result r;
    float x[1000];
    for (int i = 0; i < 1000; i++) x[i] = (float)i;
    x[500] = NAN;
    for (int m = CALQ_RANGE_MINMAX; m <= CALQ_RANGE_MSE; m++)
        EXPECT_STATUS(run((calq_range_method)m, 1, x, 1000, &r, &err), CALQ_ERR_NOT_SUPPORT, &err,
                      "The activation to be quantized has invalid value inf or nan!");
    x[500] = -INFINITY;
    EXPECT_STATUS(run(CALQ_RANGE_KL, 0, x, 1000, &r, &err), CALQ_ERR_NOT_SUPPORT, &err, "-Inf: 1");
    /* [0, 3e9]: the full range needs a scale above 1/FLT_EPSILON (§2.1); minmax fails with AMCT's
     * text, kl and mse leave the illegal windows out and choose a legal one */
    for (int i = 0; i < 1000; i++) x[i] = 3.0e9f * (float)i / 999.0f;
    EXPECT_STATUS(run(CALQ_RANGE_MINMAX, 1, x, 1000, &r, &err), CALQ_ERR_NOT_SUPPORT, &err,
                  "Not support scale greater than 1 / FLT_EPSILON. currentScale:");
    EXPECT(strcmp(err.layer, "t") == 0);
    for (int m = CALQ_RANGE_KL; m <= CALQ_RANGE_MSE; m++) {
        memset(&err, 0, sizeof err);
        EXPECT_STATUS(run((calq_range_method)m, 1, x, 1000, &r, &err), CALQ_OK, &err, NULL);
        float s = r.scale;
        EXPECT(r.n_illegal > 0 && calq__process_scale(&s) == CALQ__SCALE_OK);
    }
    EXPECT_STATUS(run(CALQ_RANGE_MINMAX, 1, x, 0, &r, &err), CALQ_ERR_BAD_PARAMETERS, &err, "is empty");
    calq_range_opts o;
    calq_range_opts_init(&o, CALQ_RANGE_KL);
    o.num_bins = 1000;
    EXPECT_STATUS(calq_range(x, 10, &o, "t", &r, &err), CALQ_ERR_BAD_PARAMETERS, &err, "num_of_bins 1000");
}

/* The same data in one batch and in 7 uneven ones, with 1 and 2 threads: identical results. */
static void test_split_and_threads(void)
{
    enum { N = 200003 };
    float *x = malloc(sizeof(float) * N);
    if (!x) return;
    for (int i = 0; i < N; i++) x[i] = normal() * (i % 5 ? 1.0f : 3.0f) + (i % 11 == 0 ? 0.0f : 0.5f);
    for (int m = CALQ_RANGE_MINMAX; m <= CALQ_RANGE_MSE; m++)
        for (int asym = 0; asym < 2; asym++) {
            calq_range_result r[2];
            for (int v = 0; v < 2; v++) {
                calq_error err = {0};
                calq_range_opts o;
                calq_range_opts_init(&o, (calq_range_method)m);
                o.asymmetric = asym;
                o.n_threads = v + 1;
                calq_range_stream *s = NULL;
                EXPECT_STATUS(calq_range_stream_create(&o, v ? 0 : N, "s", &s, &err), CALQ_OK, &err, NULL);
                if (!s) continue;
                static const size_t cuts[] = {0, 1, 17, 40000, 40001, 123456, 190000, N};
                int done = 0, passes = 0;
                size_t peak = 0;
                while (!done && passes < 4) {
                    for (int b = 0; b < (v ? 7 : 1); b++) {
                        size_t a = v ? cuts[b] : 0, e = v ? cuts[b + 1] : N;
                        EXPECT_STATUS(calq_range_stream_feed(s, x + a, e - a, &err), CALQ_OK, &err, NULL);
                        size_t bytes = calq_range_stream_bytes(s);
                        peak = bytes > peak ? bytes : peak;
                    }
                    EXPECT_STATUS(calq_range_stream_end_pass(s, &done, &err), CALQ_OK, &err, NULL);
                    passes++;
                }
                EXPECT(done && passes == (m >= CALQ_RANGE_KL ? 2 : 1));
                /* bounded state: the histogram, or the tails (about 2 * (1 - p) * N values) */
                EXPECT(peak < sizeof(uint64_t) * 2048 + 4096 + (m == CALQ_RANGE_PERCENTILE ? 64 * 1024 : 0));
                memset(&r[v], 0, sizeof r[v]);
                EXPECT_STATUS(calq_range_stream_result(s, &r[v], &err), CALQ_OK, &err, NULL);
                calq_range_stream_free(s);
            }
            EXPECT(memcmp(&r[0], &r[1], sizeof r[0]) == 0);
        }
    /* a second pass fed other data fails */
    calq_error err = {0};
    calq_range_opts o;
    calq_range_opts_init(&o, CALQ_RANGE_MSE);
    calq_range_stream *s = NULL;
    int done = 0;
    EXPECT_STATUS(calq_range_stream_create(&o, N, "s", &s, &err), CALQ_OK, &err, NULL);
    if (s) {
        EXPECT_STATUS(calq_range_stream_feed(s, x, N, &err), CALQ_OK, &err, NULL);
        EXPECT_STATUS(calq_range_stream_end_pass(s, &done, &err), CALQ_OK, &err, NULL);
        EXPECT_STATUS(calq_range_stream_feed(s, x, N - 1, &err), CALQ_OK, &err, NULL);
        EXPECT_STATUS(calq_range_stream_end_pass(s, &done, &err), CALQ_ERR_BAD_PARAMETERS, &err,
                      "pass 2 was fed other data than pass 1");
        calq_range_stream_free(s);
    }
    free(x);
}

int main(void)
{
    test_kl_closed_form();
    test_hist_sse();
    test_hist_sse_weighted();
    test_examples();
    test_edge_data();
    test_split_and_threads();
    test_neg_weight();
    if (failures)
        fprintf(stderr, "test_quant_range: %d failure(s)\n", failures);
    else
        printf("test_quant_range: all passed\n");
    return failures != 0;
}
