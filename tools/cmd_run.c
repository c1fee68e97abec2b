/* calq run: float inference of one input set; writes every graph output (and any requested
 * intermediate tensor) as DIR/<name>.npy. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli.h"

static const char usage_text[] =
    "usage: calq run MODEL.onnx | --model NET.prototxt --weights NET.caffemodel\n"
    "                --input NAME=FILE.npy [--input ...] --output-dir DIR\n"
    "                [--input-shape NAME:d0,d1,...] [--threads N] [--dump NAME,... | --dump-all] [--ref]\n"
    "\n"
    "  --input NAME=FILE.npy  data for graph input NAME (NAME= may be left out when the model has one input);\n"
    "                         float64 files are converted to the model's float32\n"
    "  --image NAME=PHOTO     a photo for input NAME (NAME= optional with one input), preprocessed with\n"
    "                         --resize WxH --mean M[,M,M] --std S[,S,S] --scale K [--bgr]: (x-M)/S*K, NCHW\n"
    "  --input-shape SPEC     bind dynamic dims, e.g. input:1,3,240,320 (several: a:..;b:...)\n"
    "  --output-dir DIR       where <output>.npy files go (created if missing)\n"
    "  --threads N            OpenMP threads (results are identical for any N)\n"
    "  --dump NAMES           also write these intermediate tensors (comma separated)\n"
    "  --dump-all             write every tensor the model computes\n"
    "  --ref                  use the plain reference kernels instead of oneDNN\n"
    "  --no-fusion            run the graph as written (by default Conv+BatchNorm and per-channel\n"
    "                         Mul/Add after a Conv are folded into it, as AMCT does, and QDQ groups\n"
    "                         DQ -> Conv/Gemm/MatMul [-> Q] become integer operators, as onnxruntime\n"
    "                         runs them; the float tensors inside a fused group are then not computed,\n"
    "                         so --dump / --dump-all cannot write them)\n";

/* Files written by this run, by tensor name. Sanitising can map two tensor names ("a/b", "a_b")
 * to one file name, so a later one gets a numeric suffix instead of overwriting; the same
 * tensor written twice (dumped, then written as a graph output) keeps its one file. */
typedef struct name_set {
    char **tensors, **files;
    int n, cap;
} name_set;

static const char *unique_name(name_set *set, const char *tensor, const char *safe, char *buf, size_t n)
{
    for (int i = 0; i < set->n; i++)
        if (strcmp(set->tensors[i], tensor) == 0) return set->files[i];
    snprintf(buf, n, "%s", safe);
    for (int k = 2;; k++) {
        int clash = 0;
        for (int i = 0; i < set->n && !clash; i++) clash = strcmp(set->files[i], buf) == 0;
        if (!clash) break;
        snprintf(buf, n, "%s_%d", safe, k);
    }
    if (set->n == set->cap) {
        int cap = set->cap ? set->cap * 2 : 64;
        char **t = realloc(set->tensors, sizeof(char *) * (size_t)cap);
        if (t) set->tensors = t;
        char **f = t ? realloc(set->files, sizeof(char *) * (size_t)cap) : NULL;
        if (f) set->files = f;
        if (!t || !f) return buf;
        set->cap = cap;
    }
    char *tc = strdup(tensor), *fc = strdup(buf);
    if (tc && fc) {
        set->tensors[set->n] = tc;
        set->files[set->n++] = fc;
    } else {
        free(tc);
        free(fc);
    }
    return buf;
}

typedef struct dump_ctx {
    const char *dir;
    int written;
    calq_error *err;
    name_set *names;
} dump_ctx;

static int write_tensor(const char *dir, name_set *names, const char *name, const calq_tensor *t, calq_error *err)
{
    char safe[512], uniq[600], path[4096];
    cli_safe_name(name, safe, sizeof safe);
    snprintf(path, sizeof path, "%s/%s.npy", dir, unique_name(names, name, safe, uniq, sizeof uniq));
    return calq_npy_write(path, t, err) == CALQ_OK ? 0 : -1;
}

static int dump_observer(void *user, const char *name, const calq_tensor *t)
{
    dump_ctx *d = user;
    if (write_tensor(d->dir, d->names, name, t, d->err) != 0) return 1;
    d->written++;
    return 0;
}

/* Converts float64 input data to float32 in place of `t` (the model's inputs are float32). */
static calq_status to_float32(calq_tensor *t, calq_error *err)
{
    int64_t n = calq_tensor_numel(t);
    float *f = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    if (!f) {
        snprintf(err->message, sizeof err->message, "out of memory");
        return err->status = CALQ_ERR_OUT_OF_MEMORY;
    }
    for (int64_t i = 0; i < n; i++) f[i] = (float)((const double *)t->data)[i];
    calq_tensor_free_data(t);
    t->data = f;
    t->dtype = CALQ_DTYPE_FLOAT32;
    return CALQ_OK;
}

int calq_cmd_run(int argc, char **argv)
{
    const char *model = NULL, *weights = NULL, *outdir = NULL, *shapes = NULL, *dump = NULL, *v;
    const char *input_specs[64];
    int is_image[64];
    calq_image_opts img;
    calq_image_opts_init(&img);
    int n_specs = 0, threads = 0, dump_all = 0, ref = 0, no_fusion = 0;
    for (int i = 1; i < argc; i++) {
        int r;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage_text, stdout);
            return 0;
        } else if ((r = cli_opt(argc, argv, &i, "--input", &v))) {
            if (r < 0) return CLI_USAGE;
            if (n_specs == 64) return cli_failf("too many --input options");
            is_image[n_specs] = 0;
            input_specs[n_specs++] = v;
        } else if ((r = cli_opt(argc, argv, &i, "--image", &v))) {
            if (r < 0) return CLI_USAGE;
            if (n_specs == 64) return cli_failf("too many --image options");
            is_image[n_specs] = 1;
            input_specs[n_specs++] = v;
        } else if ((r = cli_image_opt(argc, argv, &i, &img))) {
            if (r < 0) return CLI_USAGE;
        } else if ((r = cli_opt(argc, argv, &i, "--input-shape", &v)) ||
                   (r = cli_opt(argc, argv, &i, "--input_shape", &v))) {
            if (r < 0) return CLI_USAGE;
            shapes = v;
        } else if ((r = cli_opt(argc, argv, &i, "--output-dir", &v))) {
            if (r < 0) return CLI_USAGE;
            outdir = v;
        } else if ((r = cli_opt(argc, argv, &i, "--threads", &v))) {
            if (r < 0) return CLI_USAGE;
            threads = atoi(v);
            if (threads <= 0) return cli_failf("--threads needs a positive number, got '%s'", v);
        } else if ((r = cli_opt(argc, argv, &i, "--dump", &v))) {
            if (r < 0) return CLI_USAGE;
            dump = v;
        } else if ((r = cli_opt(argc, argv, &i, "--model", &v))) {
            if (r < 0) return CLI_USAGE;
            model = v;
        } else if ((r = cli_opt(argc, argv, &i, "--weights", &v))) {
            if (r < 0) return CLI_USAGE;
            weights = v;
        } else if (!strcmp(argv[i], "--dump-all")) {
            dump_all = 1;
        } else if (!strcmp(argv[i], "--ref")) {
            ref = 1;
        } else if (!strcmp(argv[i], "--no-fusion")) {
            no_fusion = 1;
        } else if (argv[i][0] != '-' && !model) {
            model = argv[i];
        } else {
            fprintf(stderr, "calq run: unknown option '%s'\n\n%s", argv[i], usage_text);
            return CLI_USAGE;
        }
    }
    if (!model || !outdir) {
        fprintf(stderr, "calq run: %s\n\n%s", !model ? "no model given" : "--output-dir is required", usage_text);
        return CLI_USAGE;
    }

    calq_error err = {0};
    calq_model *m = NULL;
    if (cli_load_model(model, weights, &m, &err) != CALQ_OK) return cli_fail(&err);
    int rc = 1, n_in = calq_model_num_inputs(m);
    calq_tensor *ins = calloc((size_t)n_in + 1, sizeof *ins);
    calq_session *s = NULL;
    char **dump_names = NULL;
    name_set written = {0};
    if (!ins) goto done;
    if (shapes && cli_apply_input_shapes(m, shapes, &err) != CALQ_OK) {
        cli_fail(&err);
        goto done;
    }
    for (int k = 0; k < n_specs; k++) {
        const char *eq = strchr(input_specs[k], '='), *file = eq ? eq + 1 : input_specs[k];
        int idx = -1;
        calq_value_info info;
        if (!eq && n_in == 1) idx = 0;
        for (int i = 0; eq && i < n_in; i++) {
            calq_model_input_info(m, i, &info);
            if (strlen(info.name) == (size_t)(eq - input_specs[k]) &&
                !strncmp(info.name, input_specs[k], (size_t)(eq - input_specs[k])))
                idx = i;
        }
        if (idx < 0) {
            cli_failf("--input %s: %s", input_specs[k],
                      eq ? "the model has no input of that name (see 'calq inspect')"
                         : "the model has several inputs: write --input NAME=FILE.npy");
            goto done;
        }
        calq_tensor_free_data(&ins[idx]);
        if ((is_image[k] ? calq_image_load(file, &img, &ins[idx], &err) : calq_npy_read(file, &ins[idx], &err)) !=
            CALQ_OK) {
            cli_fail(&err);
            goto done;
        }
        calq_model_input_info(m, idx, &info);
        if (ins[idx].dtype == CALQ_DTYPE_FLOAT64 && info.dtype == CALQ_DTYPE_FLOAT32 &&
            to_float32(&ins[idx], &err) != CALQ_OK) {
            cli_fail(&err);
            goto done;
        }
    }
    for (int i = 0; i < n_in; i++)
        if (!ins[i].data) {
            calq_value_info info;
            calq_model_input_info(m, i, &info);
            cli_failf("no data for input '%s': add --input %s=FILE.npy", info.name, info.name);
            goto done;
        }
    if (cli_mkdir_p(outdir) != 0) {
        cli_failf("cannot create %s: %s", outdir, strerror(errno));
        goto done;
    }
    calq_session_opts opts = {
        .n_threads = threads, .kernels = ref ? CALQ_KERNELS_REF : CALQ_KERNELS_DEFAULT, .no_fusion = no_fusion};
    if (calq_session_create(m, &opts, &s, &err) != CALQ_OK) {
        cli_fail(&err);
        goto done;
    }
    dump_ctx dctx = {outdir, 0, &err, &written};
    int n_dump = 0;
    if (dump) {
        char *copy = strdup(dump), *save = NULL;
        dump_names = calloc(strlen(dump) + 2, sizeof(char *));
        for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) dump_names[n_dump++] = strdup(t);
        free(copy);
    }
    if ((dump_all || n_dump) &&
        calq_session_set_observer(s, dump_observer, &dctx, (const char *const *)dump_names, n_dump, &err) != CALQ_OK) {
        cli_fail(&err);
        goto done;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (calq_session_run(s, ins, n_in, &err) != CALQ_OK) {
        cli_fail(&err);
        goto done;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    fprintf(stderr, "calq: ran %s in %.1f ms (first run, includes planning)\n", model, ms);
    for (int o = 0; o < calq_model_num_outputs(m); o++) {
        const calq_tensor *t;
        calq_value_info info;
        calq_model_output_info(m, o, &info);
        calq_session_output(s, o, &t);
        if (write_tensor(outdir, &written, info.name, t, &err) != 0) {
            cli_fail(&err);
            goto done;
        }
        char shape[128] = "";
        size_t at = 0;
        for (int d = 0; d < t->ndim && at < sizeof shape; d++)
            at += (size_t)snprintf(shape + at, sizeof shape - at, "%s%lld", d ? "x" : "", (long long)t->dims[d]);
        fprintf(stderr, "calq: output %s: %s %s\n", info.name, shape[0] ? shape : "scalar", calq_dtype_name(t->dtype));
    }
    if (dump_all || n_dump) fprintf(stderr, "calq: dumped %d tensors into %s\n", dctx.written, outdir);
    rc = 0;
done:
    if (dump_names)
        for (int i = 0; dump_names[i]; i++) free(dump_names[i]);
    free(dump_names);
    for (int i = 0; i < written.n; i++) {
        free(written.tensors[i]);
        free(written.files[i]);
    }
    free(written.tensors);
    free(written.files);
    calq_session_free(s);
    for (int i = 0; ins && i < n_in; i++) calq_tensor_free_data(&ins[i]);
    free(ins);
    calq_model_free(m);
    return rc;
}
