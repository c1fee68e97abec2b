/* ONNX backend conformance: runs the node / pytorch-converted / pytorch-operator tests from
 * Debian's libonnx-testdata through calq and compares every output with the reference
 * (|calq - ref| <= 1e-5 + 1e-4 * |ref|; `loose[]` lists the few tests with a wider absolute tolerance).
 *
 * A test whose model uses an operator calq does not implement is skipped (and counted). Every
 * other test must pass, except those listed in `known[]` below with the reason.
 * Usage: calq_conformance [--filter SUBSTR] [--ref|--fast] [-v] [--pretend-unsupported SUBSTR] [SUITE_DIR...]
 * --pretend-unsupported counts the tests whose name contains SUBSTR as skipped without running
 * them, as if calq had lost their operator: the floors' own test (conformance.floor).
 * Prints "N passed, N failed" as its last line; exits non-zero if anything failed, or (the
 * default suites, no filter) when a suite passes fewer tests than its floor in `floors[]`;
 * exits 77 (ctest's skip) when libonnx-testdata is not installed. */
#include <dirent.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/file.h"
#include "base/tensor.h"
#include "calq.h"
#include "frontend/onnx_tensor.h"

static const struct {
    const char *test, *reason;
} known[] = {
    /* Training-only semantics: calq runs inference. */
    {"test_batchnorm_epsilon_training_mode", "BatchNormalization in training mode (batch statistics as outputs)"},
    {"test_batchnorm_example_training_mode", "BatchNormalization in training mode (batch statistics as outputs)"},
    {"test_training_dropout", "Dropout with training_mode=true draws random masks (NumPy's generator)"},
    {"test_training_dropout_default", "Dropout with training_mode=true draws random masks (NumPy's generator)"},
    {"test_training_dropout_default_mask", "Dropout with training_mode=true draws random masks (NumPy's generator)"},
    {"test_training_dropout_mask", "Dropout with training_mode=true draws random masks (NumPy's generator)"},
    /* Scan's opset 8 form (a batch axis and sequence_lens) is not implemented; opset 9+ is. */
    {"test_scan_sum", "Scan before opset 9 (batched, with sequence_lens) is not supported"},
    /* Data types calq does not represent. */
    {"test_cast_FLOAT_to_BFLOAT16", "calq has no bfloat16 tensors"},
    {"test_cast_FLOAT_to_STRING", "calq has no string tensors"},
    /* The reference outputs of these expanded window functions are off by up to 7e-5 from the
     * exact window (e.g. periodic Hann(10)[8] = 0.5 - 0.5 cos(1.6 pi) = 0.3454915; the file says
     * 0.3455620). calq's float32 result is the exact value to 1e-7, outside the 1e-4 relative
     * tolerance of the stored one. */
    {"test_blackmanwindow_expanded", "stored reference output is inexact (see comment)"},
    {"test_blackmanwindow_symmetric_expanded", "stored reference output is inexact (see comment)"},
    {"test_hammingwindow_expanded", "stored reference output is inexact (see comment)"},
    {"test_hammingwindow_symmetric_expanded", "stored reference output is inexact (see comment)"},
    {"test_hannwindow_expanded", "stored reference output is inexact (see comment)"},
    {"test_hannwindow_symmetric_expanded", "stored reference output is inexact (see comment)"},
    {NULL, NULL},
};

/* Tests whose stored outputs carry only about four decimals: compared with this absolute
 * tolerance instead. calq's values were checked against onnxruntime (max difference 1.2e-6). */
static const struct {
    const char *test;
    double atol;
} loose[] = {
    {"test_roialign_aligned_false", 1e-4},
    {"test_roialign_aligned_true", 1e-4},
    {"test_gridsample_bicubic", 1e-4},
    {NULL, 0},
};

static double test_atol(const char *dir)
{
    const char *name = strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir;
    for (int i = 0; loose[i].test; i++)
        if (strcmp(loose[i].test, name) == 0) return loose[i].atol;
    return 1e-5;
}

static const char *known_reason(const char *name)
{
    for (int i = 0; known[i].test; i++)
        if (strcmp(known[i].test, name) == 0) return known[i].reason;
    return NULL;
}

static int verbose = 0;

static calq_status load_pb(const char *path, calq_tensor *t, calq_error *err)
{
    char *buf;
    size_t n;
    calq_status s = calq__read_file(path, &buf, &n, err);
    if (s != CALQ_OK) return s;
    Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, n, (const uint8_t *)buf);
    free(buf);
    if (!tp) {
        snprintf(err->message, sizeof err->message, "%s: not a TensorProto (maybe a sequence/optional)", path);
        return err->status = CALQ_ERR_UNSUPPORTED;
    }
    s = calq__onnx_tensor_load(tp, NULL, t, err);
    onnx__tensor_proto__free_unpacked(tp, NULL);
    return s;
}

static int cmp_tensor(const calq_tensor *got, const calq_tensor *want, double atol, char *why, size_t n)
{
    char a[128], b[128];
    if (!calq__shape_equal(got->dims, got->ndim, want->dims, want->ndim)) {
        snprintf(why, n, "shape %s, expected %s", calq__shape_str(got->dims, got->ndim, a, sizeof a),
                 calq__shape_str(want->dims, want->ndim, b, sizeof b));
        return 0;
    }
    if (got->dtype != want->dtype) {
        snprintf(why, n, "dtype %s, expected %s", calq_dtype_name(got->dtype), calq_dtype_name(want->dtype));
        return 0;
    }
    int64_t cnt = calq_tensor_numel(want);
    for (int64_t i = 0; i < cnt; i++) {
        double x = calq__tensor_get_f64(got, i), y = calq__tensor_get_f64(want, i);
        if (isnan(y) ? !isnan(x) : (isinf(y) ? x != y : !(fabs(x - y) <= atol + 1e-4 * fabs(y)))) {
            snprintf(why, n, "element %lld: %.9g, expected %.9g", (long long)i, x, y);
            return 0;
        }
    }
    return 1;
}

typedef enum { R_PASS, R_FAIL, R_SKIP } result;

/* Runs one test directory; why gets the failure or skip reason. */
static result run_test(const char *dir, int fast, char *why, size_t whyn)
{
    char path[4096];
    calq_error err = {0};
    calq_model *m = NULL;
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    if (calq_model_load_onnx(path, &m, &err) != CALQ_OK) {
        snprintf(why, whyn, "%s", err.message);
        return err.status == CALQ_ERR_UNSUPPORTED ? R_SKIP : R_FAIL;
    }
    result r = R_PASS;
    int n_in = calq_model_num_inputs(m), n_out = calq_model_num_outputs(m);
    for (int set = 0; r == R_PASS; set++) {
        char sd[4096];
        struct stat stbuf;
        snprintf(sd, sizeof sd, "%s/test_data_set_%d", dir, set);
        if (stat(sd, &stbuf) != 0) break;
        calq_tensor *ins = calloc((size_t)n_in + 1, sizeof *ins);
        calq_session *s = NULL;
        calq_session_opts opts = {.kernels = fast ? CALQ_KERNELS_DEFAULT : CALQ_KERNELS_REF};
        int loaded = 0;
        for (int i = 0; i < n_in; i++, loaded++) {
            snprintf(path, sizeof path, "%s/input_%d.pb", sd, i);
            if (load_pb(path, &ins[i], &err) != CALQ_OK) {
                snprintf(why, whyn, "input %d: %s", i, err.message);
                r = err.status == CALQ_ERR_UNSUPPORTED ? R_SKIP : R_FAIL;
                break;
            }
        }
        if (r == R_PASS &&
            (calq_session_create(m, &opts, &s, &err) != CALQ_OK || calq_session_run(s, ins, n_in, &err) != CALQ_OK)) {
            snprintf(why, whyn, "%s", err.message);
            r = R_FAIL;
        }
        for (int o = 0; r == R_PASS && o < n_out; o++) {
            calq_tensor want = {0};
            const calq_tensor *got;
            snprintf(path, sizeof path, "%s/output_%d.pb", sd, o);
            if (load_pb(path, &want, &err) != CALQ_OK) {
                snprintf(why, whyn, "output %d: %s", o, err.message);
                r = err.status == CALQ_ERR_UNSUPPORTED ? R_SKIP : R_FAIL;
                break;
            }
            calq_session_output(s, o, &got);
            char w[512];
            if (!cmp_tensor(got, &want, test_atol(dir), w, sizeof w)) {
                snprintf(why, whyn, "set %d output %d: %s", set, o, w);
                r = R_FAIL;
            }
            calq_tensor_free_data(&want);
        }
        calq_session_free(s);
        for (int i = 0; i < loaded; i++) calq_tensor_free_data(&ins[i]);
        free(ins);
    }
    calq_model_free(m);
    return r;
}

/* The tests each default suite passed when its floor was set (2026-12-02, Debian's
 * libonnx-testdata). A test whose operator calq loses, or whose model the importer stops
 * accepting, becomes a skip (CALQ_ERR_UNSUPPORTED), not a failure: without a floor a lost
 * operator would pass silently. Raise a floor when calq passes more; lowering one needs a reason
 * in the commit. */
static const struct {
    const char *suite;
    int floor;
} floors[] = {
    {"/usr/share/libonnx-testdata/data/node", 748},
    {"/usr/share/libonnx-testdata/data/pytorch-converted", 82},
    {"/usr/share/libonnx-testdata/data/pytorch-operator", 35},
};
#define N_FLOORS (int)(sizeof floors / sizeof floors[0])

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    const char *filter = NULL, *pretend = NULL;
    int modes[2] = {0, 1}, n_modes = 2;
    const char *suites[8];
    int n_suites = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--filter") && i + 1 < argc)
            filter = argv[++i];
        else if (!strcmp(argv[i], "--pretend-unsupported") && i + 1 < argc)
            pretend = argv[++i];
        else if (!strcmp(argv[i], "--ref"))
            modes[0] = 0, n_modes = 1;
        else if (!strcmp(argv[i], "--fast"))
            modes[0] = 1, n_modes = 1;
        else if (!strcmp(argv[i], "-v"))
            verbose = 1;
        else if (n_suites < 8)
            suites[n_suites++] = argv[i];
    }
    bool default_run = !n_suites && !filter; /* the floors hold for this run only */
    if (!n_suites)
        for (int k = 0; k < N_FLOORS; k++) suites[n_suites++] = floors[k].suite;
    int passed = 0, failed = 0, skipped = 0, known_fail = 0, missing = 0, below = 0;
    for (int su = 0; su < n_suites; su++) {
        DIR *d = opendir(suites[su]);
        if (!d) {
            fprintf(stderr, "SKIP: cannot open %s (install Debian's libonnx-testdata)\n", suites[su]);
            missing++;
            continue;
        }
        char **names = NULL;
        int n = 0, cap = 0;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (strncmp(e->d_name, "test_", 5) != 0) continue;
            if (filter && !strstr(e->d_name, filter)) continue;
            if (n == cap) names = realloc(names, sizeof(char *) * (size_t)(cap = cap ? cap * 2 : 256));
            names[n++] = strdup(e->d_name);
        }
        closedir(d);
        if (n) qsort(names, (size_t)n, sizeof *names, cmp_str);
        int sp = 0, sf = 0, ss = 0;
        for (int i = 0; i < n; i++) {
            char dir[4096], why[2048] = "";
            snprintf(dir, sizeof dir, "%s/%s", suites[su], names[i]);
            result r = pretend && strstr(names[i], pretend) ? R_SKIP : R_PASS;
            for (int mi = 0; mi < n_modes && r == R_PASS; mi++) {
                r = run_test(dir, modes[mi], why, sizeof why);
                if (r == R_FAIL && n_modes > 1) {
                    char tmp[2048];
                    snprintf(tmp, sizeof tmp, "[%s] %s", modes[mi] ? "fast" : "ref", why);
                    memcpy(why, tmp, sizeof why);
                }
            }
            const char *kr = known_reason(names[i]);
            if (r == R_PASS) {
                sp++;
                if (kr) printf("NOTE  %s passes although listed as known failure (%s)\n", names[i], kr);
                if (verbose) printf("PASS  %s\n", names[i]);
            } else if (r == R_SKIP) {
                ss++;
                if (verbose) printf("SKIP  %s: %s\n", names[i], why);
            } else if (kr) {
                known_fail++;
                if (verbose) printf("KNOWN %s: %s\n", names[i], kr);
            } else {
                sf++;
                printf("FAIL  %s: %s\n", names[i], why);
            }
            free(names[i]);
        }
        free(names);
        printf("%s: %d passed, %d failed, %d skipped (operators calq does not implement)\n", suites[su], sp, sf, ss);
        for (int k = 0; default_run && k < N_FLOORS; k++) {
            if (strcmp(suites[su], floors[k].suite) != 0) continue;
            printf("%s: %d passed, floor %d%s\n", suites[su], sp, floors[k].floor,
                   sp < floors[k].floor ? ": FAIL, fewer tests pass than the floor in tests/conformance/onnx_backend.c "
                                          "(a lost operator or a model the importer no longer accepts: run with -v)"
                                        : "");
            if (sp < floors[k].floor) below++;
        }
        passed += sp;
        failed += sf;
        skipped += ss;
    }
    printf("known failures (listed in tests/conformance/onnx_backend.c with reasons): %d\n", known_fail);
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    if (failed || below) return 1;
    return missing ? 77 : 0;
}
