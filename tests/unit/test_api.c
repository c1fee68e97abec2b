/* The library surface an embedder relies on (issue 10, item 4):
 *  - status codes: every code of CALQ_STATUS_MAP has its name and description;
 *  - the version the library reports is the header's;
 *  - an all-zero calq_session_opts (and NULL) runs the fast kernels, CALQ_KERNELS_REF none;
 *  - logging: without a callback the library writes nothing to stderr, even while it calibrates
 *    (stderr is redirected to a file here and must stay empty); with one it receives AMCT's
 *    lines at INFO and nothing above max_level; calls from many threads are serialised while
 *    another thread swaps the callback; a callback may call calq_set_log itself;
 *  - a progress callback sees every batch of both IFMR passes, and stopping it fails the run
 *    with CALQ_ERR_GENERIC and leaves an existing record untouched;
 *  - sessions on one model run in several threads at once with the single-threaded results. */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "exec/session.h"

#include "calib_model.h"
#include "expect.h"

static void test_status_map(void)
{
    int n = 0;
#define CHECK_STATUS_(sym, value, name, description)                                                                   \
    EXPECT(sym == value);                                                                                              \
    EXPECT(strcmp(calq_status_name(sym), name) == 0);                                                                  \
    EXPECT(strcmp(calq_strerror(sym), description) == 0);                                                              \
    n++;
    CALQ_STATUS_MAP(CHECK_STATUS_)
#undef CHECK_STATUS_
    EXPECT(n == 15);
    EXPECT(strcmp(calq_status_name(CALQ_ERR_NOT_SUPPORT), "NOT_SUPPORT") == 0);
    EXPECT(CALQ_ERR_NOT_SUPPORT == -65519); /* AMCT's number (amct-reference.md §2.2) */
    EXPECT(strcmp(calq_status_name((calq_status)-7), "UNKNOWN") == 0);
    EXPECT(strcmp(calq_strerror((calq_status)-7), "unknown status code") == 0);
}

static void test_version(void)
{
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", CALQ_VERSION_MAJOR, CALQ_VERSION_MINOR, CALQ_VERSION_PATCH);
    EXPECT(strcmp(calq_version_string(), want) == 0);
    EXPECT(strcmp(CALQ_VERSION_STRING, want) == 0);
    EXPECT(calq_version() == (unsigned)((CALQ_VERSION_MAJOR << 16) | (CALQ_VERSION_MINOR << 8) | CALQ_VERSION_PATCH));
}

/* Runs the test model once with opts; returns the number of steps on fast kernels. */
static int fast_steps(calq_model *m, const calq_session_opts *opts)
{
    calq_error err = {0};
    calq_session *s = NULL;
    float x[32] = {0}, y[3] = {0};
    calq_tensor in[2] = {{CALQ_DTYPE_FLOAT32, 4, {1, 2, 4, 4}, x}, {CALQ_DTYPE_FLOAT32, 2, {1, 3}, y}};
    EXPECT_STATUS(calq_session_create(m, opts, &s, &err), CALQ_OK, &err, NULL);
    if (!s) return -1;
    EXPECT_STATUS(calq_session_run(s, in, 2, &err), CALQ_OK, &err, NULL);
    int n = calq__session_fast_steps(s);
    calq_session_free(s);
    return n;
}

static void test_session_opts(calq_model *m)
{
    calq_session_opts zero, init, ref;
    memset(&zero, 0, sizeof zero);
    memset(&init, 0xff, sizeof init);
    calq_session_opts_init(&init);
    EXPECT(memcmp(&zero, &init, sizeof zero) == 0); /* the defaults are all zero */
    ref = init;
    ref.kernels = CALQ_KERNELS_REF;
    int n_zero = fast_steps(m, &zero), n_null = fast_steps(m, NULL), n_ref = fast_steps(m, &ref);
    EXPECT(n_zero >= 2); /* the Conv, ConvTranspose and Gemm / MatMul have oneDNN paths */
    EXPECT(n_null == n_zero);
    EXPECT(n_ref == 0);
    calq_session_opts bad = init;
    bad.kernels = (calq_kernels)7;
    calq_error err = {0};
    calq_session *s = NULL;
    EXPECT_STATUS(calq_session_create(m, &bad, &s, &err), CALQ_ERR_BAD_PARAMETERS, &err, "kernels is 7");
    EXPECT(s == NULL);
}

/* ---- logging ------------------------------------------------------------------------------- */

typedef struct log_capture {
    int n[4];   /* messages per level */
    int n_amct; /* AMCT progress lines among them */
    char last[256];
    char summary[256]; /* the last message before "calq: wrote" */
} log_capture;

static void capture(void *user, calq_log_level level, const char *message)
{
    log_capture *c = user;
    if (level >= 1 && level <= 3) c->n[level]++;
    if (strstr(message, "calibration") && strstr(message, "layer")) c->n_amct++;
    EXPECT(message[0] && message[strlen(message) - 1] != '\n');
    if (strncmp(message, "calq: wrote", 11) == 0) snprintf(c->summary, sizeof c->summary, "%s", c->last);
    snprintf(c->last, sizeof c->last, "%s", message);
}

/* Two batches of .npy data for the test model under dir (x/ and y/). */
static void write_batches(const char *dir, int n)
{
    char sub[512], path[600];
    for (int in = 0; in < 2; in++) {
        snprintf(sub, sizeof sub, "%s/%s", dir, in ? "y" : "x");
        mkdir(sub, 0700);
        for (int b = 0; b < n; b++) {
            float v[32];
            for (int i = 0; i < 32; i++) v[i] = (float)((i * 7 + b * 3) % 11) * 0.1f - 0.4f;
            calq_tensor t = in ? (calq_tensor){CALQ_DTYPE_FLOAT32, 2, {1, 3}, v}
                               : (calq_tensor){CALQ_DTYPE_FLOAT32, 4, {1, 2, 4, 4}, v};
            snprintf(path, sizeof path, "%s/%d.npy", sub, b);
            calq_error err = {0};
            EXPECT_STATUS(calq_npy_write(path, &t, &err), CALQ_OK, &err, NULL);
        }
    }
}

typedef struct progress_log {
    int n_calls, passes_seen[4], stop_after;
} progress_log;

static int on_progress(void *user, const calq_calibrate_progress *p)
{
    progress_log *l = user;
    l->n_calls++;
    if (p->pass >= 1 && p->pass <= 3) l->passes_seen[p->pass]++;
    EXPECT(p->batch >= 0 && p->batch < p->batch_num);
    EXPECT(p->runs_done <= p->runs_expected);
    return l->stop_after && l->n_calls >= l->stop_after;
}

static calq_status calibrate(calq_model *m, const char *dir, const char *record, progress_log *pl, calq_error *err)
{
    char spec[1200];
    snprintf(spec, sizeof spec, "%s/x;%s/y", dir, dir);
    calq_data *d = NULL;
    calq_config_opts co;
    calq_config_opts_init(&co);
    co.batch_num = 2;
    calq_config *cfg = NULL;
    calq_status st = calq_data_open_npy(spec, &d, err);
    if (st == CALQ_OK) st = calq_config_create(m, &co, &cfg, err);
    calq_calibrate_opts o;
    calq_calibrate_opts_init(&o);
    o.n_threads = 1;
    if (pl) {
        o.progress = on_progress;
        o.progress_user = pl;
    }
    if (st == CALQ_OK) st = calq_calibrate(m, cfg, d, &o, record, err);
    calq_config_free(cfg);
    calq_data_free(d);
    return st;
}

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static void test_log_calibration(calq_model *m)
{
    char dir[] = "/tmp/calq_api_XXXXXX";
    if (!mkdtemp(dir)) {
        EXPECT(0);
        return;
    }
    write_batches(dir, 2);
    char record[600], errfile[600];
    snprintf(record, sizeof record, "%s/record.txt", dir);
    snprintf(errfile, sizeof errfile, "%s/stderr.txt", dir);
    calq_error err = {0};

    /* no callback: nothing at all on stderr */
    calq_set_log(NULL, NULL, CALQ_LOG_DEBUG);
    fflush(stderr);
    int saved = dup(2);
    int fd = open(errfile, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 2);
    close(fd);
    calq_status st = calibrate(m, dir, record, NULL, &err);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    EXPECT_STATUS(st, CALQ_OK, &err, NULL);
    EXPECT(file_size(errfile) == 0);

    /* a callback at INFO gets AMCT's lines; at WARNING none of them */
    log_capture info = {0}, warn = {0};
    calq_set_log(capture, &info, CALQ_LOG_INFO);
    EXPECT(calq__log_enabled(CALQ_LOG_INFO) && !calq__log_enabled(CALQ_LOG_DEBUG));
    EXPECT_STATUS(calibrate(m, dir, record, NULL, &err), CALQ_OK, &err, NULL);
    EXPECT(info.n_amct >= 10); /* per layer: "data already stored 1/2", "2/2", "succeeded" ... */
    EXPECT(info.n[CALQ_LOG_INFO] >= info.n_amct && info.n[CALQ_LOG_DEBUG] == 0);
    /* the summary, then the commit of the record and config */
    EXPECT(strstr(info.summary, "calq: calibrated") != NULL);
    EXPECT(strstr(info.last, "calq: wrote") != NULL && strstr(info.last, record) != NULL);
    calq_set_log(capture, &warn, CALQ_LOG_WARNING);
    EXPECT_STATUS(calibrate(m, dir, record, NULL, &err), CALQ_OK, &err, NULL);
    EXPECT(warn.n[CALQ_LOG_INFO] == 0 && warn.n_amct == 0);
    calq_set_log(NULL, NULL, CALQ_LOG_DEBUG);
    EXPECT(!calq__log_enabled(CALQ_LOG_WARNING));

    /* progress: 2 batches x 2 IFMR passes; a stop leaves the earlier record as it was */
    progress_log pl = {0};
    EXPECT_STATUS(calibrate(m, dir, record, &pl, &err), CALQ_OK, &err, NULL);
    EXPECT(pl.n_calls == 4 && pl.passes_seen[1] == 2 && pl.passes_seen[2] == 2);
    long before = file_size(record);
    FILE *f = fopen(record, "a");
    if (f) {
        fputs("# marker\n", f);
        fclose(f);
    }
    progress_log stop = {.stop_after = 3};
    EXPECT_STATUS(calibrate(m, dir, record, &stop, &err), CALQ_ERR_GENERIC, &err, "stopped by its progress callback");
    EXPECT(stop.n_calls == 3);
    EXPECT(file_size(record) == before + 9);

    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    EXPECT(system(cmd) == 0);
}

/* Many threads log while one swaps the callback: the callback never runs twice at once, and
 * once calq_set_log(NULL) returned it is never called again. */
static atomic_int in_flight, max_in_flight, n_calls, n_calls_after_off;
static atomic_int logging_off, stop_logging;

static void serial_check(void *user, calq_log_level level, const char *message)
{
    (void)user;
    (void)level;
    (void)message;
    int now = atomic_fetch_add(&in_flight, 1) + 1;
    if (now > atomic_load(&max_in_flight)) atomic_store(&max_in_flight, now);
    atomic_fetch_add(&n_calls, 1);
    if (atomic_load(&logging_off)) atomic_fetch_add(&n_calls_after_off, 1);
    for (volatile int i = 0; i < 200; i++) {
    }
    atomic_fetch_sub(&in_flight, 1);
}

static void *log_many(void *arg)
{
    for (int i = 0; !atomic_load(&stop_logging); i++) calq__log(CALQ_LOG_INFO, "thread %d line %d", *(int *)arg, i);
    return NULL;
}

static void reentrant(void *user, calq_log_level level, const char *message)
{
    int *depth = user;
    (*depth)++;
    if (*depth == 1) {
        calq__log(CALQ_LOG_INFO, "nested"); /* the mutex is recursive */
        calq_set_log(NULL, NULL, CALQ_LOG_WARNING);
    }
    (void)level;
    (void)message;
}

static void test_log_threads(void)
{
    pthread_t th[4];
    int ids[4] = {0, 1, 2, 3};
    calq_set_log(serial_check, NULL, CALQ_LOG_INFO);
    for (int i = 0; i < 4; i++) EXPECT(pthread_create(&th[i], NULL, log_many, &ids[i]) == 0);
    /* swap while the threads log, until a good share of their lines went through (at most ~5 s) */
    for (int k = 0; k < 100000 && atomic_load(&n_calls) < 500; k++) {
        calq_set_log(serial_check, NULL, k % 2 ? CALQ_LOG_INFO : CALQ_LOG_WARNING);
        nanosleep(&(struct timespec){0, 50000}, NULL); /* a mutex is not fair: let the loggers in */
    }
    calq_set_log(NULL, NULL, CALQ_LOG_DEBUG);
    atomic_store(&logging_off, 1);
    nanosleep(&(struct timespec){0, 20000000}, NULL); /* the threads go on logging into the void */
    atomic_store(&stop_logging, 1);
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    EXPECT(atomic_load(&n_calls) >= 500);
    EXPECT(atomic_load(&max_in_flight) == 1);
    EXPECT(atomic_load(&n_calls_after_off) == 0);

    int depth = 0;
    calq_set_log(reentrant, &depth, CALQ_LOG_INFO);
    calq__log(CALQ_LOG_INFO, "outer");
    EXPECT(depth == 2); /* the outer message and the nested one; then the callback removed itself */
    calq__log(CALQ_LOG_INFO, "not delivered");
    EXPECT(depth == 2);
}

/* Sessions on one model in several threads (docs/c-api.md, "Threads"): each thread creates its
 * own session and runs it; every output equals the single-threaded one bit for bit. */
typedef struct session_job {
    calq_model *m;
    float want[3];
    int ok;
} session_job;

static calq_status run_once(calq_model *m, float *out3)
{
    calq_error err = {0};
    calq_session *s = NULL;
    float x[32], y[3] = {0.5f, -1.0f, 2.0f};
    for (int i = 0; i < 32; i++) x[i] = (float)(i % 5) - 2.0f;
    calq_tensor in[2] = {{CALQ_DTYPE_FLOAT32, 4, {1, 2, 4, 4}, x}, {CALQ_DTYPE_FLOAT32, 2, {1, 3}, y}};
    calq_session_opts o = {.n_threads = 1};
    calq_status st = calq_session_create(m, &o, &s, &err);
    for (int r = 0; st == CALQ_OK && r < 20; r++) st = calq_session_run(s, in, 2, &err);
    const calq_tensor *t = NULL;
    if (st == CALQ_OK) st = calq_session_output(s, 0, &t);
    if (st == CALQ_OK) memcpy(out3, t->data, 3 * sizeof(float));
    calq_session_free(s);
    return st;
}

static void *session_thread(void *arg)
{
    session_job *j = arg;
    float got[3];
    j->ok = run_once(j->m, got) == CALQ_OK && memcmp(got, j->want, sizeof got) == 0;
    return NULL;
}

static void test_sessions_in_threads(calq_model *m)
{
    session_job jobs[4];
    float want[3];
    EXPECT(run_once(m, want) == CALQ_OK);
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        jobs[i].m = m;
        memcpy(jobs[i].want, want, sizeof want);
        jobs[i].ok = 0;
        pthread_create(&th[i], NULL, session_thread, &jobs[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        EXPECT(jobs[i].ok);
    }
}

/* max_arena_bytes bounds what planning folds too: a 100-byte model whose ConstantOfShape of a
 * constant [4096, 4096] is computed while planning (64 MiB) is refused under a 1 MiB limit (it
 * was allocated and filled: the limit covered the arena only; a OneHot of depth 2^31 took 7.6 GB
 * past the fuzz target's 256 MiB). tests/fuzz/corpus/onnx/regression-fold-64mb-constant.onnx. */
static void test_arena_limit_folds(void)
{
    static const unsigned char model[] = {
        0x08, 0x07, 0x12, 0x00, 0x3a, 0x58, 0x0a, 0x1c, 0x0a, 0x01, 0x73, 0x12, 0x01, 0x79, 0x1a, 0x03, 0x63,
        0x6f, 0x73, 0x22, 0x0f, 0x43, 0x6f, 0x6e, 0x73, 0x74, 0x61, 0x6e, 0x74, 0x4f, 0x66, 0x53, 0x68, 0x61,
        0x70, 0x65, 0x12, 0x01, 0x67, 0x2a, 0x19, 0x08, 0x02, 0x10, 0x07, 0x42, 0x01, 0x73, 0x4a, 0x10, 0x00,
        0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x5a, 0x0f,
        0x0a, 0x01, 0x78, 0x12, 0x0a, 0x0a, 0x08, 0x08, 0x01, 0x12, 0x04, 0x0a, 0x02, 0x08, 0x01, 0x62, 0x09,
        0x0a, 0x01, 0x79, 0x12, 0x04, 0x0a, 0x02, 0x08, 0x01, 0x42, 0x04, 0x0a, 0x00, 0x10, 0x0d};
    calq_error err = {0};
    calq_model *m = NULL;
    EXPECT(calq_model_load_onnx_buffer(model, sizeof model, NULL, &m, &err) == CALQ_OK);
    if (!m) return;
    calq_session *s = NULL;
    calq_session_opts lim = {.n_threads = 1, .max_arena_bytes = 1u << 20};
    calq_status st = calq_session_create(m, &lim, &s, &err);
    if (st == CALQ_OK) {
        calq_value_info info;
        st = calq_session_tensor_info(s, calq_model_node_output(m, 0, 0), &info, &err);
    }
    EXPECT(st == CALQ_ERR_OUT_OF_MEMORY);
    EXPECT(strstr(err.message, "constants folded while planning would take 67108864 bytes") != NULL);
    calq_session_free(s);
    calq_model_free(m);
}

int main(void)
{
    test_status_map();
    test_version();
    test_arena_limit_folds();
    calq_error err = {0};
    calq_model *m = calib_test_model(&err);
    if (!m) {
        fprintf(stderr, "test model: %s\n", err.message);
        return 1;
    }
    test_session_opts(m);
    test_log_calibration(m);
    test_log_threads();
    test_sessions_in_threads(m);
    calq_model_free(m);
    printf("test_api: %d failure(s)\n", failures);
    return failures != 0;
}
