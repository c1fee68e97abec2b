/* calq run: float inference of one input set; writes every graph output (and any requested
 * intermediate tensor) as DIR/<name>.npy. */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

typedef struct run_args {
    const char *model, *weights, *outdir, *shapes, *dump;
    cli_list inputs; /* tag 0: --input NAME=FILE.npy, 1: --image NAME=PHOTO */
    int threads, dump_all, ref, no_fusion, max_arena_mb;
    calq_image_opts img;
} run_args;

static const cli_flag flags[] = {
    {.name = "--model",
     .type = CLI_STRING,
     .offset = offsetof(run_args, model),
     .metavar = "M",
     .required = 1,
     .help = "the model (also the first bare argument): MODEL.onnx, or NET.prototxt with --weights"},
    {.name = "--weights",
     .type = CLI_STRING,
     .offset = offsetof(run_args, weights),
     .metavar = "W",
     .help = "the Caffe weights (NET.caffemodel)"},
    {.name = "--input",
     .type = CLI_LIST,
     .offset = offsetof(run_args, inputs),
     .metavar = "NAME=FILE.npy",
     .tag = 0,
     .help = "data for graph input NAME (NAME= may be left out when the model has one input);\n"
             "float64 files are converted to the model's float32"},
    {.name = "--image",
     .type = CLI_LIST,
     .offset = offsetof(run_args, inputs),
     .metavar = "NAME=PHOTO",
     .tag = 1,
     .help = "a photo for input NAME (NAME= optional with one input), preprocessed with the\n"
             "five options below"},
    CLI_IMAGE_FLAGS(run_args, img),
    {.name = "--input-shape",
     .alias = "--input_shape",
     .type = CLI_CUSTOM,
     .offset = offsetof(run_args, shapes),
     .metavar = "SPEC",
     .parse = cli_parse_input_shapes,
     .help = "bind dynamic dims, e.g. input:1,3,240,320 (several: a:..;b:...)"},
    {.name = "--output-dir",
     .type = CLI_STRING,
     .offset = offsetof(run_args, outdir),
     .metavar = "DIR",
     .required = 1,
     .help = "where <output>.npy files go (created if missing)"},
    {.name = "--threads",
     .type = CLI_THREADS,
     .offset = offsetof(run_args, threads),
     .metavar = "N",
     .help = "OpenMP threads (results are identical for any N; at most 4 per processor)"},
    {.name = "--max-arena-mb",
     .type = CLI_INT,
     .offset = offsetof(run_args, max_arena_mb),
     .metavar = "N",
     .lo = 0,
     .hi = 1073741824,
     .help = CLI_MAX_ARENA_HELP},
    {.name = "--dump",
     .type = CLI_STRING,
     .offset = offsetof(run_args, dump),
     .metavar = "NAMES",
     .help = "also write these intermediate tensors (comma separated)"},
    {.name = "--dump-all",
     .type = CLI_SWITCH,
     .offset = offsetof(run_args, dump_all),
     .help = "write every tensor the model computes"},
    {.name = "--ref",
     .type = CLI_SWITCH,
     .offset = offsetof(run_args, ref),
     .help = "use the plain reference kernels instead of oneDNN"},
    {.name = "--no-fusion",
     .type = CLI_SWITCH,
     .offset = offsetof(run_args, no_fusion),
     .help = "run the graph as written (by default Conv+BatchNorm and per-channel\n"
             "Mul/Add after a Conv are folded into it, as AMCT does, and QDQ groups\n"
             "DQ -> Conv/Gemm/MatMul [-> Q] become integer operators, as onnxruntime\n"
             "runs them; the float tensors inside a fused group are then not computed,\n"
             "so --dump / --dump-all cannot write them)"},
};

static const cli_command command = {
    .name = "run",
    .synopsis = "MODEL.onnx | --model NET.prototxt --weights NET.caffemodel\n"
                "--input NAME=FILE.npy [--input ...] --output-dir DIR\n"
                "[--image NAME=PHOTO --resize WxH --mean M[,M,M] --std S[,S,S] --scale K --bgr]\n"
                "[--input-shape NAME:d0,d1,...] [--threads N] [--max-arena-mb N] [--dump NAME,... | --dump-all]\n"
                "[--ref] [--no-fusion]",
    .flags = CLI_FLAGS(flags),
    .positional = offsetof(run_args, model),
};

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

/* The graph outputs of one run, written to "<file>.tmp.<pid>" first and renamed only when every
 * one is complete: a failure (a folder in the way of one, a full disk) left the outputs written
 * before it replaced and the others as an earlier run left them. */
typedef struct staged_outputs {
    char **final, **tmp;
    int n;
} staged_outputs;

static int stage_tensor(staged_outputs *so, const char *dir, name_set *names, const char *name, const calq_tensor *t,
                        calq_error *err)
{
    char safe[512], uniq[600], path[4096], tmp[4200];
    cli_safe_name(name, safe, sizeof safe);
    snprintf(path, sizeof path, "%s/%s.npy", dir, unique_name(names, name, safe, uniq, sizeof uniq));
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    char **f = realloc(so->final, sizeof(char *) * (size_t)(so->n + 1));
    if (f) so->final = f;
    char **tm = f ? realloc(so->tmp, sizeof(char *) * (size_t)(so->n + 1)) : NULL;
    if (tm) so->tmp = tm;
    char *fc = tm ? strdup(path) : NULL, *tc = fc ? strdup(tmp) : NULL;
    if (!tc) {
        free(fc);
        cli_failf("out of memory");
        return -1;
    }
    so->final[so->n] = fc;
    so->tmp[so->n++] = tc;
    return calq_npy_write(tmp, t, err) == CALQ_OK ? 0 : -1;
}

static int commit_outputs(staged_outputs *so)
{
    struct stat sb;
    for (int i = 0; i < so->n; i++) {
        /* what is in the way, through a link (a dangling one counts as a regular file) */
        if (lstat(so->final[i], &sb) != 0 || (S_ISLNK(sb.st_mode) && stat(so->final[i], &sb) != 0)) continue;
        if (!S_ISREG(sb.st_mode)) {
            /* the rename replaced a FIFO or a device in the way with the output */
            char shown[CLI_CUT_BUF];
            cli_failf("cannot write %s: it is %s (no output was replaced)", cli_cut(so->final[i], shown),
                      S_ISDIR(sb.st_mode) ? "a folder" : "not a regular file (a FIFO, a device or a socket)");
            return -1;
        }
    }
    for (int i = 0; i < so->n; i++)
        if (rename(so->tmp[i], so->final[i]) != 0) {
            char shown[CLI_CUT_BUF];
            cli_failf("cannot replace %s: %s", cli_cut(so->final[i], shown), strerror(errno));
            return -1;
        }
    return 0;
}

/* Removes what commit did not rename (all of it after a failure) and frees the set. */
static void release_outputs(staged_outputs *so)
{
    for (int i = 0; i < so->n; i++) {
        remove(so->tmp[i]); /* fails harmlessly once renamed */
        free(so->final[i]);
        free(so->tmp[i]);
    }
    free(so->final);
    free(so->tmp);
}

static int dump_observer(void *user, const char *name, const calq_tensor *t)
{
    dump_ctx *d = user;
    if (write_tensor(d->dir, d->names, name, t, d->err) != 0) return 1;
    d->written++;
    return 0;
}

/* Converts float64 input data to float32 in place of `t` (the model's inputs are float32). */
static calq_status to_float32(calq_tensor *t, const char *file, calq_error *err)
{
    int64_t n = calq_tensor_numel(t);
    float *f = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    if (!f) {
        snprintf(err->message, sizeof err->message, "out of memory");
        return err->status = CALQ_ERR_OUT_OF_MEMORY;
    }
    for (int64_t i = 0; i < n; i++) {
        double v = ((const double *)t->data)[i];
        f[i] = (float)v;
        /* 1e300 became inf without a word */
        if (isinf(f[i]) && isfinite(v)) {
            free(f);
            char shown[CLI_CUT_BUF];
            snprintf(err->message, sizeof err->message,
                     "%s: element %lld is %g, beyond the largest float32 (%g), so it would become %sinf; scale the "
                     "data into the input's range or fix the file",
                     cli_cut(file, shown), (long long)i, v, (double)FLT_MAX, v < 0 ? "-" : "");
            return err->status = CALQ_ERR_DATA;
        }
    }
    calq_tensor_free_data(t);
    t->data = f;
    t->dtype = CALQ_DTYPE_FLOAT32;
    return CALQ_OK;
}

int calq_cmd_run(int argc, char **argv)
{
    run_args a = {.max_arena_mb = -1};
    calq_image_opts_init(&a.img);
    int rc = cli_parse(&command, argc, argv, &a);
    if (rc) return rc < 0 ? 0 : rc;
    size_t max_arena;
    if ((rc = cli_max_arena(a.max_arena_mb, &max_arena)) != 0) return rc;
    const char *model = a.model, *outdir = a.outdir, *dump = a.dump;
    int n_specs = a.inputs.n, dump_all = a.dump_all;
    const char *const *input_specs = a.inputs.value; /* --input and --image, in order */
    const int *is_image = a.inputs.tag;

    calq_error err = {0};
    calq_model *m = NULL;
    if (cli_load_model(model, a.weights, &m, &err) != CALQ_OK) return cli_fail(&err);
    rc = 1;
    int n_in = calq_model_num_inputs(m);
    calq_tensor *ins = calloc((size_t)n_in + 1, sizeof *ins);
    calq_session *s = NULL;
    char **dump_names = NULL, outdir_slash[4096] = "", created[4096] = "";
    name_set written = {0};
    staged_outputs staged = {0};
    if (!ins) goto done;
    if (a.shapes && cli_apply_input_shapes(m, a.shapes, &err) != CALQ_OK) {
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
            char shown[CLI_CUT_BUF];
            cli_failf("--input %s: %s", cli_cut(input_specs[k], shown),
                      eq ? "the model has no input of that name (see 'calq inspect')"
                         : "the model has several inputs: write --input NAME=FILE.npy");
            goto done;
        }
        calq_tensor_free_data(&ins[idx]);
        if ((is_image[k] ? calq_image_load(file, &a.img, &ins[idx], &err) : calq_npy_read(file, &ins[idx], &err)) !=
            CALQ_OK) {
            cli_fail(&err);
            goto done;
        }
        calq_model_input_info(m, idx, &info);
        if (ins[idx].dtype == CALQ_DTYPE_FLOAT64 && info.dtype == CALQ_DTYPE_FLOAT32 &&
            to_float32(&ins[idx], file, &err) != CALQ_OK) {
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
    /* the folders it makes are removed again when the run fails (a refused model left an empty
     * --output-dir behind) */
    if (snprintf(outdir_slash, sizeof outdir_slash, "%s/", outdir) >= (int)sizeof outdir_slash ||
        cli_make_parent("--output-dir", outdir_slash, created) != 0) {
        char shown[CLI_CUT_BUF];
        if (strlen(outdir) + 1 >= sizeof outdir_slash)
            cli_failf("cannot create --output-dir %s: %s", cli_cut(outdir, shown), strerror(ENAMETOOLONG));
        goto done;
    }
    calq_session_opts opts = {
        .n_threads = a.threads, .kernels = a.ref ? CALQ_KERNELS_REF : CALQ_KERNELS_DEFAULT, .no_fusion = a.no_fusion};
    opts.max_arena_bytes = max_arena;
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
        if (stage_tensor(&staged, outdir, &written, info.name, t, &err) != 0) {
            if (err.status != CALQ_OK) cli_fail(&err);
            goto done;
        }
        char shape[128] = "";
        size_t at = 0;
        for (int d = 0; d < t->ndim && at < sizeof shape; d++)
            at += (size_t)snprintf(shape + at, sizeof shape - at, "%s%lld", d ? "x" : "", (long long)t->dims[d]);
        fprintf(stderr, "calq: output %s: %s %s\n", info.name, shape[0] ? shape : "scalar", calq_dtype_name(t->dtype));
    }
    if (commit_outputs(&staged) != 0) goto done;
    if (dump_all || n_dump) fprintf(stderr, "calq: dumped %d tensors into %s\n", dctx.written, outdir);
    rc = 0;
done:
    if (rc != 0) cli_unmake_parent(outdir_slash, created);
    release_outputs(&staged);
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
