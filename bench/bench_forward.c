/* calq half of bench/forward: times calq's inference of MODEL on a seeded random input.
 * Model load and planning are excluded (a warm-up run plans); prints the median of N runs and
 * writes the input it used (for the onnxruntime half) to --save-input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "calq.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void apply_shapes(calq_model *m, const char *spec)
{
    char *copy = strdup(spec), *save = NULL;
    for (char *item = strtok_r(copy, ";", &save); item; item = strtok_r(NULL, ";", &save)) {
        char *colon = strrchr(item, ':');
        if (!colon) continue;
        *colon = 0;
        int64_t dims[CALQ_MAX_DIMS];
        int nd = 0;
        for (char *p = colon + 1; *p && nd < CALQ_MAX_DIMS;) {
            dims[nd++] = strtoll(p, &p, 10);
            if (*p == ',') p++;
        }
        calq_error err = {0};
        if (calq_model_set_input_shape(m, item, dims, nd, &err) != CALQ_OK) {
            fprintf(stderr, "bench: %s\n", err.message);
            exit(1);
        }
    }
    free(copy);
}

int main(int argc, char **argv)
{
    /* Measure what the calq command line runs with (tools/calq.c: active OpenMP waiting unless
     * the user chose a policy). */
    if (!getenv("OMP_WAIT_POLICY") && setenv("OMP_WAIT_POLICY", "active", 1) == 0) {
        execv("/proc/self/exe", argv);
        unsetenv("OMP_WAIT_POLICY");
    }
    const char *model = NULL, *shapes = NULL, *save = NULL;
    int threads = 2, runs = 20, ref = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--input-shape") && i + 1 < argc)
            shapes = argv[++i];
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--save-input") && i + 1 < argc)
            save = argv[++i];
        else if (!strcmp(argv[i], "--ref"))
            ref = 1;
        else
            model = argv[i];
    }
    if (!model || runs < 1) {
        fprintf(stderr, "usage: calq_bench_forward MODEL.onnx [--input-shape N:d,..] [--threads T] [--runs N] "
                        "[--save-input DIR] [--ref]\n");
        return 2;
    }
    calq_error err = {0};
    calq_model *m;
    if (calq_model_load_onnx(model, &m, &err) != CALQ_OK) {
        fprintf(stderr, "bench: %s\n", err.message);
        return 1;
    }
    if (shapes) apply_shapes(m, shapes);
    int n_in = calq_model_num_inputs(m);
    calq_tensor *ins = calloc((size_t)n_in, sizeof *ins);
    uint64_t s = 12345;
    for (int i = 0; i < n_in; i++) {
        calq_value_info info;
        calq_model_input_info(m, i, &info);
        ins[i].dtype = info.dtype;
        ins[i].ndim = info.ndim;
        for (int d = 0; d < info.ndim; d++) ins[i].dims[d] = info.dims[d] > 0 ? info.dims[d] : 1;
        int64_t n = calq_tensor_numel(&ins[i]);
        float *p = malloc((size_t)n * sizeof(float));
        for (int64_t k = 0; k < n; k++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            p[k] = (float)((s >> 40) & 0xffffff) / 8388608.0f - 1.0f;
        }
        ins[i].data = p;
        if (save) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s.npy", save, info.name);
            if (calq_npy_write(path, &ins[i], &err) != CALQ_OK) {
                fprintf(stderr, "bench: %s\n", err.message);
                return 1;
            }
        }
    }
    calq_session *sess;
    calq_session_opts opts = {.n_threads = threads, .use_fast = !ref};
    if (calq_session_create(m, &opts, &sess, &err) != CALQ_OK) {
        fprintf(stderr, "bench: %s\n", err.message);
        return 1;
    }
    double *t = malloc(sizeof(double) * (size_t)runs);
    for (int r = -3; r < runs; r++) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        if (calq_session_run(sess, ins, n_in, &err) != CALQ_OK) {
            fprintf(stderr, "bench: %s\n", err.message);
            return 1;
        }
        clock_gettime(CLOCK_MONOTONIC, &b);
        if (r >= 0) t[r] = (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
    }
    qsort(t, (size_t)runs, sizeof *t, cmp_double);
    size_t arena, sum;
    calq_session_memory(sess, &arena, &sum);
    printf("calq: median %.3f ms over %d runs (threads %d); activation arena %.1f MB (sum of activations %.1f MB)\n",
           t[runs / 2], runs, threads, (double)arena / 1e6, (double)sum / 1e6);
    printf("calq_ms %.4f\n", t[runs / 2]);
    free(t);
    calq_session_free(sess);
    for (int i = 0; i < n_in; i++) calq_tensor_free_data(&ins[i]);
    free(ins);
    calq_model_free(m);
    return 0;
}
