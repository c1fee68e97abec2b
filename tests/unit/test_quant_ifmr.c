/* IFMR (amct-reference.md §3): the golden values of §3.8, the failure diagnoses (§3.3, §4), and
 * calq's deliberate change: an illegal candidate is excluded instead of winning (§3.7.1). Each
 * case runs the whole-buffer reference and the two-pass stream, in both loss modes. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_harness.h"

static calq_status stream_run(const float *x, size_t n, size_t batch, const calq_ifmr_opts *o, const char *layer,
                              calq_ifmr_result *res, calq_error *err)
{
    calq_ifmr_stream *s = NULL;
    calq_status st = calq_ifmr_stream_create(o, 0, layer, &s, err);
    int done = 0;
    while (st == CALQ_OK && !done) {
        for (size_t j = 0; j < n && st == CALQ_OK; j += batch)
            st = calq_ifmr_stream_feed(s, x + j, n - j < batch ? n - j : batch, err);
        if (st == CALQ_OK) st = calq_ifmr_stream_end_pass(s, &done, err);
    }
    if (st == CALQ_OK) st = calq_ifmr_stream_result(s, res, err);
    calq_ifmr_stream_free(s);
    return st;
}

/* Both implementations and both loss modes must give (scale, offset). */
static void expect_factors(const char *what, const float *x, size_t n, int asymmetric, float scale, int offset)
{
    for (int amct = 0; amct < 2; amct++) {
        calq_ifmr_opts o;
        calq_ifmr_opts_init(&o);
        o.asymmetric = asymmetric;
        o.amct_float_loss = amct;
        calq_ifmr_result r1, r2;
        calq_error e1 = {0}, e2 = {0};
        calq_status s1 = calq_ifmr(x, n, &o, what, &r1, &e1);
        calq_status s2 = stream_run(x, n, 997, &o, what, &r2, &e2);
        EXPECT(s1 == CALQ_OK && s2 == CALQ_OK);
        if (s1 != CALQ_OK || s2 != CALQ_OK) {
            fprintf(stderr, "%s: %s | %s\n", what, e1.message, e2.message);
            continue;
        }
        printf("%-22s %s loss: scale %.9g (%.10g) offset %d, ratio index %d, %d candidates\n", what,
               amct ? "float " : "double", (double)r1.scale, (double)r1.scale, r1.offset, r1.best_index,
               r1.n_candidates);
        EXPECT(r1.n_candidates == 60);
        EXPECT(r1.scale == scale && r1.offset == offset);
        EXPECT(r2.scale == scale && r2.offset == offset);
        if (r1.scale != scale || r1.offset != offset)
            fprintf(stderr, "%s: expected %.9g / %d, got %.9g / %d\n", what, (double)scale, offset, (double)r1.scale,
                    r1.offset);
    }
}

static void test_golden(void)
{
    /* §3.8, on evenly spaced data that contains its end points, so the percentile (k = 1 for
     * fewer than ~1e6 elements) picks the true max and min */
    enum { N = 100001 };
    float *x = malloc(N * sizeof *x);
    for (int i = 0; i < N; i++) x[i] = (float)i / (float)(N - 1);
    EXPECT(x[N - 1] == 1.0f);
    expect_factors("U[0,1] asymmetric", x, N, 1, 1.0f / 255.0f, -128);
    char buf[32];
    snprintf(buf, sizeof buf, "%.7g", (double)(1.0f / 255.0f));
    EXPECT(strcmp(buf, "0.003921569") == 0);

    for (int i = 0; i < N; i++) x[i] = -(float)i / (float)(N - 1);
    expect_factors("U[-1,0] asymmetric", x, N, 1, 1.0f / 255.0f, 127);

    for (int i = 0; i < 1000; i++) x[i] = -5.0f + (float)i * 0.01f; /* -5 .. 4.99 */
    expect_factors("[-5,4.99] symmetric", x, 1000, 0, 5.0f / 128.0f, 0);
    EXPECT(5.0f / 128.0f == 0.0390625f);

    memset(x, 0, N * sizeof *x);
    expect_factors("zeros asymmetric", x, N, 1, 1.0f, -128);
    expect_factors("zeros symmetric", x, N, 0, 1.0f, 0);
    free(x);
}

/* Expects a failure whose message contains every string of `want` (NULL-terminated) and names
 * the layer, from both implementations. */
static void expect_failure(const char *what, const float *x, size_t n, int asymmetric, const char *const *want)
{
    const char *layer = "conv_1/relu";
    calq_ifmr_opts o;
    calq_ifmr_opts_init(&o);
    o.asymmetric = asymmetric;
    for (int impl = 0; impl < 2; impl++) {
        calq_ifmr_result r;
        calq_error e = {0};
        calq_status s = impl ? stream_run(x, n, 100, &o, layer, &r, &e) : calq_ifmr(x, n, &o, layer, &r, &e);
        EXPECT(s == CALQ_ERR_NOT_SUPPORT);
        EXPECT(e.status == CALQ_ERR_NOT_SUPPORT);
        EXPECT(strcmp(e.layer, layer) == 0);
        EXPECT(strstr(e.message, layer) != NULL);
        for (int i = 0; want[i]; i++) {
            int found = strstr(e.message, want[i]) != NULL;
            EXPECT(found);
            if (!found) fprintf(stderr, "%s: '%s' missing from: %s\n", what, want[i], e.message);
        }
        if (impl == 0) printf("%s (%s):\n  %s\n", what, asymmetric ? "with offset" : "without offset", e.message);
    }
}

static void test_diagnoses(void)
{
    enum { N = 1000 };
    float x[N];
    for (int asym = 0; asym < 2; asym++) {
        for (int i = 0; i < N; i++) x[i] = (float)i / N - 0.5f;
        x[17] = INFINITY;
        const char *inf_want[] = {"IFMR calibration data has inf value.", "+Inf: 1", "-Inf: 0", "NaN: 0",
                                  "finite range [-0.5, 0.499000013]",     NULL};
        expect_failure("+inf in data", x, N, asym, inf_want);

        x[17] = NAN;
        x[18] = NAN;
        const char *nan_want[] = {"IFMR calibration data has nan value.", "NaN: 2", "+Inf: 0", NULL};
        expect_failure("NaN in data", x, N, asym, nan_want);

        /* ±1e13: every candidate scale is far above 1/FLT_EPSILON */
        for (int i = 0; i < N; i++) x[i] = -1e13f + 2e13f * (float)i / (float)(N - 1);
        /* AMCT's final message names candidate 0 (all losses 0): ratio 0.7 */
        float amax = x[N - 1], amin = x[0];
        float c0 = 0.7f * (asym ? amax : fmaxf(fabsf(amax), fabsf(amin)));
        float s0 = asym ? (c0 - amin) / 255.0f : c0 / (fabsf(amax) > fabsf(amin) ? 127.0f : 128.0f);
        char scale_text[160];
        snprintf(scale_text, sizeof scale_text, "Not support scale greater than 1 / FLT_EPSILON. currentScale: %f",
                 (double)s0);
        const char *big_want[] = {scale_text,
                                  "no candidate scale is legal",
                                  "finite range [-9.99999983e+12, "
                                  "9.99999983e+12]",
                                  "NaN: 0, +Inf: 0, -Inf: 0",
                                  asym ? "asymmetric (with offset)" : "symmetric (without offset)",
                                  NULL};
        expect_failure("data spanning +-1e13", x, N, asym, big_want);
    }
}

/* Only the largest candidates are illegal: AMCT fails (an illegal candidate wins with loss 0 and
 * the final process_scale fails); calq excludes them and succeeds. */
static void test_some_illegal(void)
{
    enum { N = 20001 };
    float *x = malloc(N * sizeof *x);
    for (int i = 0; i < N; i++) x[i] = 2.0e9f * (float)i / (float)(N - 1);
    calq_ifmr_opts o;
    calq_ifmr_opts_init(&o);
    calq_ifmr_result r1, r2;
    calq_error e = {0};
    EXPECT(calq_ifmr(x, N, &o, "big", &r1, &e) == CALQ_OK);
    EXPECT(stream_run(x, N, 333, &o, "big", &r2, &e) == CALQ_OK);
    /* ratio r is legal while r * 2e9 / 255 <= 2^23, i.e. up to r = 1.06 */
    int illegal = 0;
    for (int i = 0; i < 60; i++) {
        float s = (0.7f + (float)i * 0.01f) * 2.0e9f / 255.0f;
        if (1.0f / s < FLT_EPSILON) illegal++;
    }
    printf("[0, 2e9] asymmetric: %d of 60 candidates illegal; calq picks index %d, scale %.9g offset %d\n",
           r1.n_illegal, r1.best_index, (double)r1.scale, r1.offset);
    EXPECT(illegal > 0 && illegal < 60);
    EXPECT(r1.n_illegal == illegal);
    EXPECT(r1.best_index == 30 && r1.scale == 2.0e9f / 255.0f && r1.offset == -128);
    EXPECT(r2.scale == r1.scale && r2.offset == r1.offset && r2.best_index == r1.best_index);
    free(x);
}

static void test_options(void)
{
    calq_ifmr_opts o;
    calq_ifmr_opts_init(&o);
    float x[4] = {1, 2, 3, 4};
    calq_ifmr_result r;
    calq_error e = {0};
    o.search_step = 0.0f;
    EXPECT(calq_ifmr(x, 4, &o, "L", &r, &e) == CALQ_ERR_BAD_PARAMETERS);
    calq_ifmr_opts_init(&o);
    o.max_percentile = 0.5f;
    EXPECT(calq_ifmr(x, 4, &o, "L", &r, &e) == CALQ_ERR_BAD_PARAMETERS);
    calq_ifmr_opts_init(&o);
    EXPECT(calq_ifmr(x, 0, &o, "L", &r, &e) == CALQ_ERR_BAD_PARAMETERS);
    EXPECT(strstr(e.message, "empty") != NULL);
}

int main(void)
{
    test_golden();
    test_diagnoses();
    test_some_illegal();
    test_options();
    if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
    return failures ? 1 : 0;
}
