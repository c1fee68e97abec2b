/* IFMR throughput, per pass, in elements per second per core (amct-reference.md §3 with calq's
 * two-pass stream): pass 1 gathers the statistics and percentile tails, pass 2 sums the losses
 * of the 60 candidates. Usage: bench_ifmr [elements] [threads] [batch]. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "calq.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? (size_t)atof(argv[1]) : 10000000;
    int threads = argc > 2 ? atoi(argv[2]) : 1;
    size_t batch = argc > 3 ? (size_t)atof(argv[3]) : 1000000;
    if (n == 0 || batch == 0 || threads < 1) {
        fprintf(stderr, "usage: bench_ifmr [elements] [threads] [batch]\n");
        return 2;
    }
    float *x = malloc(n * sizeof *x);
    if (!x) return 1;
    /* ReLU-like activations: half zeros, a normal tail */
    uint64_t s = 12345;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        double u = ((double)(s >> 11) + 0.5) * 0x1p-53;
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        double v = (double)(s >> 11) * 0x1p-53;
        double g = sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
        x[i] = (float)(g > 0 ? g * 2.0 : 0.0);
    }
    for (int amct = 0; amct < 2; amct++) {
        calq_ifmr_opts o;
        calq_ifmr_opts_init(&o);
        o.n_threads = threads;
        o.amct_float_loss = amct;
        calq_error err = {0};
        calq_ifmr_stream *st = NULL;
        if (calq_ifmr_stream_create(&o, n, "bench", &st, &err) != CALQ_OK) {
            fprintf(stderr, "%s\n", err.message);
            return 1;
        }
        double wall[2] = {0, 0}, cpu[2] = {0, 0};
        int done = 0, pass = 0;
        while (!done) {
            int p = calq_ifmr_stream_pass(st);
            double t0 = now(), c0 = cpu_now();
            for (size_t j = 0; j < n; j += batch)
                if (calq_ifmr_stream_feed(st, x + j, n - j < batch ? n - j : batch, &err) != CALQ_OK) {
                    fprintf(stderr, "%s\n", err.message);
                    return 1;
                }
            if (calq_ifmr_stream_end_pass(st, &done, &err) != CALQ_OK) {
                fprintf(stderr, "%s\n", err.message);
                return 1;
            }
            wall[p - 1] += now() - t0;
            cpu[p - 1] += cpu_now() - c0;
            pass++;
        }
        calq_ifmr_result r;
        calq_ifmr_stream_result(st, &r, &err);
        calq_ifmr_stream_free(st);
        printf("IFMR %s loss, %zu elements, batches of %zu, %d thread(s): scale %.9g offset %d\n",
               amct ? "float (AMCT)" : "double (calq)", n, batch, threads, (double)r.scale, r.offset);
        const char *name[2] = {"pass 1 (statistics)", "pass 2 (60-candidate loss)"};
        for (int p = 0; p < 2; p++)
            printf("  %-28s %8.3f s wall %8.3f s cpu  %10.3g elements/s  %10.3g elements/s/core\n", name[p], wall[p],
                   cpu[p], (double)n / wall[p], (double)n / (cpu[p] > 0 ? cpu[p] : wall[p]));
    }
    /* the whole-buffer reference, for comparison (sort + scalar loss) */
    calq_ifmr_opts o;
    calq_ifmr_opts_init(&o);
    o.n_threads = threads;
    calq_ifmr_result r;
    calq_error err = {0};
    double t0 = now(), c0 = cpu_now();
    calq_ifmr(x, n, &o, "bench", &r, &err);
    double w = now() - t0, c = cpu_now() - c0;
    printf("whole-buffer reference: %.3f s wall %.3f s cpu  %10.3g elements/s/core (both passes)\n", w, c,
           (double)n / c);
    free(x);
    return 0;
}
