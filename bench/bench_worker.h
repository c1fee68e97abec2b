/* What calq's benchmark workers share (bench/forward, bench/calibration drive them, see
 * bench/rounds.py): input shapes from the command line, seeded inputs, and the round protocol.
 *
 * Protocol: a worker loads and warms up, prints "ready", then answers each line of stdin:
 *   "run K"  -> runs the timed action K times and prints "times t1 ... tK cpu c1 ... cK"
 *               (wall-clock milliseconds, then the process's CPU milliseconds of each run: on a
 *               busy machine the CPU time still says what the work costs);
 *   "quit" or end of input -> exits.
 * So the driver can alternate rounds of several workers (calq, onnxruntime, PyTorch), each one
 * loaded once, and compare rounds taken at the same moment on a shared machine. */
#ifndef CALQ_BENCH_WORKER_H
#define CALQ_BENCH_WORKER_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "calq.h"

/* Measure what the calq command line runs with (tools/calq.c): unless the caller chose an
 * OpenMP waiting policy, the library's advice for this machine's load, set before libgomp
 * loads by re-executing once. */
static inline void bench_wait_policy(char **argv)
{
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return;
    calq_wait_policy w = calq_wait_policy_advice();
    if (setenv("OMP_WAIT_POLICY", w.omp_wait_policy, 1) != 0) return;
    if (!w.gomp_spincount || setenv("GOMP_SPINCOUNT", w.gomp_spincount, 1) == 0) execv("/proc/self/exe", argv);
    unsetenv("OMP_WAIT_POLICY");
    unsetenv("GOMP_SPINCOUNT");
}

static inline double bench_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static inline double bench_cpu_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static inline void bench_die(const char *what, const calq_error *err)
{
    fprintf(stderr, "bench: %s%s%s\n", what, err ? ": " : "", err ? err->message : "");
    exit(1);
}

/* "name:d0,d1,..;name2:..." as calq run's --input-shape. */
static inline void bench_apply_shapes(calq_model *m, const char *spec)
{
    char *copy = strdup(spec), *save = NULL;
    for (char *item = strtok_r(copy, ";", &save); item; item = strtok_r(NULL, ";", &save)) {
        char *colon = strrchr(item, ':');
        if (!colon) bench_die("--input-shape wants NAME:DIMS", NULL);
        *colon = 0;
        int64_t dims[CALQ_MAX_DIMS];
        int nd = 0;
        for (char *p = colon + 1; *p && nd < CALQ_MAX_DIMS;) {
            dims[nd++] = strtoll(p, &p, 10);
            if (*p == ',') p++;
        }
        calq_error err = {0};
        if (calq_model_set_input_shape(m, item, dims, nd, &err) != CALQ_OK) bench_die("--input-shape", &err);
    }
    free(copy);
}

/* Sets dim 0 of every input to `batch` (the models' batch axis). */
static inline void bench_apply_batch(calq_model *m, int64_t batch)
{
    for (int i = 0; i < calq_model_num_inputs(m); i++) {
        calq_value_info info;
        calq_model_input_info(m, i, &info);
        if (info.ndim < 1) continue;
        info.dims[0] = batch;
        for (int d = 1; d < info.ndim; d++)
            if (info.dims[d] < 0) bench_die("an input has dynamic dims beyond the batch: give --input-shape", NULL);
        calq_error err = {0};
        if (calq_model_set_input_shape(m, info.name, info.dims, info.ndim, &err) != CALQ_OK) bench_die("--batch", &err);
    }
}

/* Input tensors of the model's (fixed) input shapes: float inputs uniform in [-1, 1) from a
 * fixed seed, integer inputs 1 (owner: caller, calq_tensor_free_data per tensor). */
static inline calq_tensor *bench_inputs(calq_model *m, int *n_out)
{
    int n = calq_model_num_inputs(m);
    calq_tensor *ins = calloc((size_t)n + 1, sizeof *ins);
    uint64_t s = 12345;
    for (int i = 0; i < n; i++) {
        calq_value_info info;
        calq_model_input_info(m, i, &info);
        ins[i].dtype = info.dtype;
        ins[i].ndim = info.ndim;
        for (int d = 0; d < info.ndim; d++) ins[i].dims[d] = info.dims[d] > 0 ? info.dims[d] : 1;
        int64_t k = calq_tensor_numel(&ins[i]);
        size_t es = calq_dtype_size(info.dtype);
        ins[i].data = calloc((size_t)(k > 0 ? k : 1), es ? es : 1);
        for (int64_t j = 0; j < k; j++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            float v = (float)((s >> 40) & 0xffffff) / 8388608.0f - 1.0f;
            if (info.dtype == CALQ_DTYPE_FLOAT32)
                ((float *)ins[i].data)[j] = v;
            else if (info.dtype == CALQ_DTYPE_INT64)
                ((int64_t *)ins[i].data)[j] = 1;
            else if (info.dtype == CALQ_DTYPE_INT32)
                ((int32_t *)ins[i].data)[j] = 1;
        }
    }
    *n_out = n;
    return ins;
}

/* The round loop: answers "run K" with K timings of action(user). */
static inline void bench_serve(double (*action)(void *user), void *user)
{
    printf("ready\n");
    fflush(stdout);
    char line[256];
    while (fgets(line, sizeof line, stdin)) {
        int k = 0;
        if (strncmp(line, "quit", 4) == 0) break;
        if (sscanf(line, "run %d", &k) != 1 || k < 1) {
            fprintf(stderr, "bench: unknown command '%s'\n", line);
            exit(2);
        }
        double *cpu = malloc(sizeof(double) * (size_t)k);
        printf("times");
        for (int r = 0; r < k; r++) {
            double c0 = bench_cpu_ms();
            printf(" %.4f", action(user));
            cpu[r] = bench_cpu_ms() - c0;
        }
        printf(" cpu");
        for (int r = 0; r < k; r++) printf(" %.4f", cpu[r]);
        printf("\n");
        free(cpu);
        fflush(stdout);
    }
}

#endif
