/* HFMG (amct-reference.md §5): the constant-data case (§10.6), a hand-checked merge with
 * redistribution, and a hand-checked search. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "op_harness.h"

static calq_hfmg *make(int bins, int asym, int left_clip_loss)
{
    calq_hfmg_opts o;
    calq_hfmg_opts_init(&o);
    o.num_bins = bins;
    o.asymmetric = asym;
    o.left_clip_loss = left_clip_loss;
    calq_hfmg *h = NULL;
    calq_error e = {0};
    EXPECT(calq_hfmg_create(&o, "pool1", &h, &e) == CALQ_OK);
    return h;
}

static void test_constant(void)
{
    const int bins[] = {1024, 2048, 4096, 8192};
    float x[1000];
    for (int i = 0; i < 1000; i++) x[i] = 3.0f;
    for (int b = 0; b < 4; b++) {
        calq_hfmg *h = make(bins[b], 1, 0);
        calq_error e = {0};
        EXPECT(calq_hfmg_feed(h, x, 1000, &e) == CALQ_OK);
        EXPECT(calq_hfmg_feed(h, x, 600, &e) == CALQ_OK);
        const uint64_t *c = NULL;
        int n = calq_hfmg_bins(h, &c, NULL, NULL);
        EXPECT(n == bins[b]);
        int others = 0;
        for (int i = 0; i < n; i++)
            if (i != n / 2 && c[i]) others++;
        EXPECT(c[n / 2] == 1600 && others == 0);
        calq_hfmg_result r;
        EXPECT(calq_hfmg_compute(h, &r, &e) == CALQ_OK);
        /* clip [3, 3]; zero forcing gives [0, 3]: scale 3/255 (double division), offset -128 */
        EXPECT(r.scale == (float)(3.0 / 255.0) && r.offset == -128);
        if (b == 0)
            printf("constant 3.0: all %llu counts in bin %d, scale %.9g offset %d\n", (unsigned long long)c[n / 2],
                   n / 2, (double)r.scale, r.offset);
        calq_hfmg_free(h);
    }
}

static void test_merge(void)
{
    /* batch 1 {0, 1}: width 1/1024, one count in bin 0 and one in bin 1023. batch 2 {2}: merged
     * range [0, 2], width 2/1024. The new value lands in bin floor(1024), clamped to 1023. Old bin
     * 0 = [0, 1/1024] lies inside new bin 0. Old bin 1023 = [1023/1024, 1] covers [511.5, 512] in
     * new bins: the upper edge sits on the boundary, so the split gives share (1 - 1023/1024) /
     * (1/1024) = 1 and floor(1 * 1) = 1 count to bin 511, none to 512. */
    calq_hfmg *h = make(1024, 1, 0);
    calq_error e = {0};
    const float b1[] = {0.0f, 1.0f}, b2[] = {2.0f};
    EXPECT(calq_hfmg_feed(h, b1, 2, &e) == CALQ_OK);
    EXPECT(calq_hfmg_feed(h, b2, 1, &e) == CALQ_OK);
    const uint64_t *c = NULL;
    float lo = 0, w = 0;
    EXPECT(calq_hfmg_bins(h, &c, &lo, &w) == 1024);
    EXPECT(lo == 0.0f && w == 2.0f / 1024.0f);
    uint64_t sum = 0;
    for (int i = 0; i < 1024; i++) sum += c[i];
    EXPECT(sum == 3 && c[0] == 1 && c[511] == 1 && c[512] == 0 && c[1023] == 1);
    calq_hfmg_free(h);

    /* A true straddle, all in exact binary fractions: batch 1 {0, 1, 1, 1, 1, 1} puts 5 counts in
     * bin 1023 = [1023/1024, 1]. batch 2 {11.5}: width 11.5/1024 = 23/2048, and new bin 88 ends
     * at 89 * 23/2048 = 2047/2048, the middle of the old bin. Share 0.5: floor(0.5 * 5) = 2
     * counts go to bin 88 and the remaining 3 to bin 89. */
    h = make(1024, 1, 0);
    const float b3[6] = {0.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f}, b4[1] = {11.5f};
    EXPECT(calq_hfmg_feed(h, b3, 6, &e) == CALQ_OK);
    EXPECT(calq_hfmg_feed(h, b4, 1, &e) == CALQ_OK);
    calq_hfmg_bins(h, &c, &lo, &w);
    sum = 0;
    for (int i = 0; i < 1024; i++) sum += c[i];
    EXPECT(w == 23.0f / 2048.0f);
    EXPECT(sum == 7 && c[0] == 1 && c[88] == 2 && c[89] == 3 && c[1023] == 1);
    printf("merge with a straddling bin: bins 0:%llu 88:%llu 89:%llu 1023:%llu\n", (unsigned long long)c[0],
           (unsigned long long)c[88], (unsigned long long)c[89], (unsigned long long)c[1023]);
    calq_hfmg_free(h);
}

/* {0, 1, 2, 3} in one batch of 1024 bins: counts at 0, 341, 682, 1023; step = 1 count and
 * min_bins = 256 give the candidates (0,1022), (0,681), (0,340), (0,1): each trim removes the
 * top value's bin range since the right side needs no more bins than the left. */
static void test_search(void)
{
    for (int lcl = 0; lcl < 2; lcl++) {
        calq_hfmg *h = make(1024, 1, lcl);
        calq_error e = {0};
        const float x[] = {0.0f, 1.0f, 2.0f, 3.0f};
        EXPECT(calq_hfmg_feed(h, x, 4, &e) == CALQ_OK);
        const uint64_t *c = NULL;
        calq_hfmg_bins(h, &c, NULL, NULL);
        EXPECT(c[0] == 1 && c[341] == 1 && c[682] == 1 && c[1023] == 1);
        calq_hfmg_result r;
        EXPECT(calq_hfmg_compute(h, &r, &e) == CALQ_OK);
        EXPECT(r.n_candidates == 4);
        EXPECT(r.best_left == 0 && r.best_right == 1022);
        /* the winner's L2 by hand: dst width dw = bw*1023/256; each value's source bin lies in one
         * dst bin (0, 85, 170, and 255 for the clipped top bin) */
        double bw = 3.0 / 1024.0, dw = bw * 1023.0 / 256.0, want = 0.0;
        const int src[] = {0, 341, 682, 1023}, dst[] = {0, 85, 170, 255};
        for (int k = 0; k < 4; k++) {
            double sb = src[k] * bw, se = sb + bw, ctr = dst[k] * dw + dw / 2;
            want += (pow(se - ctr, 3) - pow(sb - ctr, 3)) / 3.0 / bw;
        }
        EXPECT(fabs(r.best_loss - want) <= 1e-5 * want);
        float clip_max = 0.0f + 1023.0f * (3.0f / 1024.0f);
        EXPECT(r.clip_max == clip_max && r.clip_min == 0.0f);
        EXPECT(r.scale == (float)((double)clip_max / 255.0) && r.offset == -128);
        printf("{0,1,2,3}%s: %d candidates, best bins %d..%d, L2 %.6g (by hand %.6g), scale %.9g offset %d\n",
               lcl ? " (left clip loss)" : "", r.n_candidates, r.best_left, r.best_right, (double)r.best_loss, want,
               (double)r.scale, r.offset);
        calq_hfmg_free(h);
    }
}

static void test_errors(void)
{
    calq_hfmg_opts o;
    calq_hfmg_opts_init(&o);
    o.num_bins = 1000;
    calq_hfmg *h = NULL;
    calq_error e = {0};
    EXPECT(calq_hfmg_create(&o, "x", &h, &e) == CALQ_ERR_BAD_PARAMETERS);
    h = make(2048, 0, 0);
    float x[4] = {1.0f, NAN, -2.0f, INFINITY};
    EXPECT(calq_hfmg_feed(h, x, 4, &e) == CALQ_OK);
    calq_hfmg_result r;
    EXPECT(calq_hfmg_compute(h, &r, &e) == CALQ_ERR_NOT_SUPPORT);
    EXPECT(strstr(e.message, "invalid value inf or nan") && strstr(e.message, "NaN: 1") &&
           strstr(e.message, "+Inf: 1") && strstr(e.message, "pool1"));
    calq_hfmg_free(h);
    /* finite values whose span overflows float32: refused, not scale 1 from a NaN clip range;
     * also when a later batch widens the histogram that far */
    float wide[2] = {3e38f, -3e38f}, small[2] = {1.0f, 2.0f};
    for (int later = 0; later < 2; later++) {
        h = make(2048, 1, 0);
        if (later) EXPECT(calq_hfmg_feed(h, small, 2, &e) == CALQ_OK);
        EXPECT(calq_hfmg_feed(h, wide, 2, &e) == CALQ_OK);
        EXPECT(calq_hfmg_feed(h, small, 2, &e) == CALQ_OK);
        EXPECT(calq_hfmg_compute(h, &r, &e) == CALQ_ERR_NOT_SUPPORT);
        EXPECT(strstr(e.message, "pool1") && strstr(e.message, "span [-3.00000001e+38, 3.00000001e+38], wider than "
                                                               "float32 holds"));
        calq_hfmg_free(h);
    }
}

/* AMCT's code lets bins left of the clip range add nothing to the loss, so on a normal sample
 * (600k values: the search trims 6 counts per step) it clips the negative side further than the
 * loss of §5 (left_clip_loss = 1) does. */
static void test_left_clip(void)
{
    enum { N = 600000 };
    static float x[N];
    uint32_t s = 1;
    for (int i = 0; i < N; i++) {
        s = s * 1664525u + 1013904223u;
        float u = ((float)(s >> 8) + 0.5f) / 16777216.0f;
        s = s * 1664525u + 1013904223u;
        float v = (float)(s >> 8) / 16777216.0f;
        x[i] = sqrtf(-2.0f * logf(u)) * cosf(6.2831853f * v);
    }
    calq_hfmg_result r[2];
    for (int sym = 0; sym < 2; sym++) {
        for (int lcl = 0; lcl < 2; lcl++) {
            calq_hfmg *h = make(4096, !sym, lcl);
            calq_error e = {0};
            EXPECT(calq_hfmg_feed(h, x, N / 2, &e) == CALQ_OK);
            EXPECT(calq_hfmg_feed(h, x + N / 2, N / 2, &e) == CALQ_OK);
            EXPECT(calq_hfmg_compute(h, &r[lcl], &e) == CALQ_OK);
            EXPECT(sym ? r[lcl].offset == 0 : 1);
            printf("normal, %s%s: bins %d..%d of %d candidates, clip [%.6g, %.6g], scale %.9g offset %d\n",
                   sym ? "symmetric" : "asymmetric", lcl ? " (left clip loss)" : " (AMCT)", r[lcl].best_left,
                   r[lcl].best_right, r[lcl].n_candidates, (double)r[lcl].clip_min, (double)r[lcl].clip_max,
                   (double)r[lcl].scale, r[lcl].offset);
            calq_hfmg_free(h);
        }
        EXPECT(r[0].best_left > r[1].best_left);
    }
}

int main(void)
{
    test_constant();
    test_merge();
    test_search();
    test_errors();
    test_left_clip();
    if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
    return failures ? 1 : 0;
}
