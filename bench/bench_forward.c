/* calq's worker for bench/forward: inference of MODEL (float, or a quantized model calq runs:
 * QDQ, QOperator, AMCT deploy) on seeded inputs, answering bench_worker.h's rounds. Model load
 * and planning are excluded (three warm-up runs plan first). --save-input DIR writes the inputs
 * it uses as DIR/<input name>.npy, for the onnxruntime worker.
 *
 *   calq_bench_forward MODEL.onnx [--input-shape N:d,..] [--batch B] [--threads T]
 *                      [--save-input DIR] [--ref] [--no-fusion]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_worker.h"
#include "calq.h"

typedef struct fwd {
    calq_session *s;
    calq_tensor *ins;
    int n_in;
} fwd;

static double run_once(void *user)
{
    fwd *f = user;
    calq_error err = {0};
    double a = bench_now_ms();
    if (calq_session_run(f->s, f->ins, f->n_in, &err) != CALQ_OK) bench_die("run", &err);
    return bench_now_ms() - a;
}

/* Input names as the onnxruntime worker looks them up (ort_forward.js: unsafe characters -> _). */
static void safe_name(const char *in, char *out, size_t n)
{
    size_t k = 0;
    for (; in[k] && k + 1 < n; k++) {
        char ch = in[k];
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
                 ch == '_' || ch == '-';
        out[k] = ok ? ch : '_';
    }
    out[k] = 0;
}

int main(int argc, char **argv)
{
    bench_wait_policy(argv);
    const char *model = NULL, *shapes = NULL, *save = NULL;
    int threads = 2, ref = 0, no_fusion = 0;
    long batch = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--input-shape") && i + 1 < argc)
            shapes = argv[++i];
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            batch = atol(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--save-input") && i + 1 < argc)
            save = argv[++i];
        else if (!strcmp(argv[i], "--ref"))
            ref = 1;
        else if (!strcmp(argv[i], "--no-fusion"))
            no_fusion = 1;
        else if (argv[i][0] != '-' && !model)
            model = argv[i];
        else
            model = NULL, i = argc;
    }
    if (!model) {
        fprintf(stderr, "usage: calq_bench_forward MODEL.onnx [--input-shape N:d,..] [--batch B] [--threads T] "
                        "[--save-input DIR] [--ref] [--no-fusion]\n");
        return 2;
    }
    calq_error err = {0};
    calq_model *m;
    if (calq_model_load_onnx(model, &m, &err) != CALQ_OK) bench_die("load", &err);
    if (batch > 0) bench_apply_batch(m, batch);
    if (shapes) bench_apply_shapes(m, shapes);
    fwd f = {0};
    f.ins = bench_inputs(m, &f.n_in);
    for (int i = 0; save && i < f.n_in; i++) {
        calq_value_info info;
        calq_model_input_info(m, i, &info);
        char name[512], path[4096];
        safe_name(info.name, name, sizeof name);
        snprintf(path, sizeof path, "%s/%s.npy", save, name);
        if (calq_npy_write(path, &f.ins[i], &err) != CALQ_OK) bench_die("--save-input", &err);
    }
    calq_session_opts opts = {
        .n_threads = threads, .kernels = ref ? CALQ_KERNELS_REF : CALQ_KERNELS_DEFAULT, .no_fusion = no_fusion};
    if (calq_session_create(m, &opts, &f.s, &err) != CALQ_OK) bench_die("session", &err);
    for (int r = 0; r < 3; r++) run_once(&f);
    bench_serve(run_once, &f);
    calq_session_free(f.s);
    for (int i = 0; i < f.n_in; i++) calq_tensor_free_data(&f.ins[i]);
    free(f.ins);
    calq_model_free(m);
    return 0;
}
