/* calq's workers for bench/calibration, answering bench_worker.h's rounds:
 *   --mode calib:   one timed action = calq_calibrate over the N batches (AMCT's default config
 *                   for every quantizable layer with batch_num N, data read from the .npy
 *                   files, the record written to a temporary file): everything calibration
 *                   does after the model is loaded;
 *   --mode forward: one timed action = N float inferences, one per batch (batches preloaded,
 *                   session planned during warm-up): what one pass over the data costs.
 *
 *   calq_bench_calibration MODEL.onnx --input-shape NAME:DIMS --data SPEC --batch-num N
 *                          [--threads T] --mode calib|forward [--record PATH]
 * SPEC is calq_data_open_npy's: per model input a folder of .npy batches (';' between inputs). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_worker.h"
#include "calq.h"

typedef struct calib_bench {
    calq_model *m;
    calq_config *cfg;
    calq_data *data;
    int threads, batch_num;
    const char *record;
    calq_session *s;
    calq_tensor **batches; /* [batch][input] */
    int n_in;
} calib_bench;

static double calibrate_once(void *user)
{
    calib_bench *b = user;
    calq_calibrate_opts o;
    calq_calibrate_opts_init(&o);
    o.n_threads = b->threads;
    o.log = 0;
    calq_error err = {0};
    double t = bench_now_ms();
    if (calq_calibrate(b->m, b->cfg, b->data, &o, b->record, &err) != CALQ_OK) bench_die("calibrate", &err);
    return bench_now_ms() - t;
}

static double forward_once(void *user)
{
    calib_bench *b = user;
    calq_error err = {0};
    double t = bench_now_ms();
    for (int k = 0; k < b->batch_num; k++)
        if (calq_session_run(b->s, b->batches[k], b->n_in, &err) != CALQ_OK) bench_die("run", &err);
    return bench_now_ms() - t;
}

int main(int argc, char **argv)
{
    bench_wait_policy(argv);
    const char *model = NULL, *shapes = NULL, *spec = NULL, *mode = NULL, *record = "/tmp/calq_bench_record.txt";
    calib_bench b = {.threads = 2, .batch_num = 1};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--input-shape") && i + 1 < argc)
            shapes = argv[++i];
        else if (!strcmp(argv[i], "--data") && i + 1 < argc)
            spec = argv[++i];
        else if (!strcmp(argv[i], "--batch-num") && i + 1 < argc)
            b.batch_num = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            b.threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--mode") && i + 1 < argc)
            mode = argv[++i];
        else if (!strcmp(argv[i], "--record") && i + 1 < argc)
            record = argv[++i];
        else if (argv[i][0] != '-' && !model)
            model = argv[i];
        else
            model = NULL, i = argc;
    }
    if (!model || !spec || !mode || b.batch_num < 1 || (strcmp(mode, "calib") && strcmp(mode, "forward"))) {
        fprintf(stderr, "usage: calq_bench_calibration MODEL.onnx --input-shape NAME:DIMS --data SPEC --batch-num N "
                        "[--threads T] --mode calib|forward [--record PATH]\n");
        return 2;
    }
    b.record = record;
    calq_error err = {0};
    if (calq_model_load_onnx(model, &b.m, &err) != CALQ_OK) bench_die("load", &err);
    if (shapes) bench_apply_shapes(b.m, shapes);
    if (calq_data_open_npy(spec, &b.data, &err) != CALQ_OK) bench_die("--data", &err);
    if (calq_data_check(b.data, b.m, b.batch_num, &err) != CALQ_OK) bench_die("--data", &err);
    if (!strcmp(mode, "calib")) {
        calq_config_opts co;
        calq_config_opts_init(&co);
        co.batch_num = b.batch_num;
        if (calq_config_create(b.m, &co, &b.cfg, &err) != CALQ_OK) bench_die("config", &err);
        calibrate_once(&b); /* warm-up: page cache, oneDNN's kernel generation */
        bench_serve(calibrate_once, &b);
        calq_config_free(b.cfg);
        unlink(record);
    } else {
        b.batches = calloc((size_t)b.batch_num, sizeof *b.batches);
        for (int k = 0; k < b.batch_num; k++) {
            b.batches[k] = bench_inputs(b.m, &b.n_in);
            if (calq_data_read_batch(b.data, k, b.batches[k], b.n_in, &err) != CALQ_OK) bench_die("--data", &err);
        }
        calq_session_opts so = {.n_threads = b.threads};
        if (calq_session_create(b.m, &so, &b.s, &err) != CALQ_OK) bench_die("session", &err);
        forward_once(&b);
        bench_serve(forward_once, &b);
        calq_session_free(b.s);
        for (int k = 0; k < b.batch_num; k++) {
            for (int i = 0; i < b.n_in; i++) calq_tensor_free_data(&b.batches[k][i]);
            free(b.batches[k]);
        }
        free(b.batches);
    }
    calq_data_free(b.data);
    calq_model_free(b.m);
    return 0;
}
