/* Thread counts the library accepts (calq_thread_limit, issue 14 item 1): an n_threads of
 * 2147483647 in a session, a calibration or IFMR is used as the limit (before, libgomp crashed
 * creating the threads), a negative one is an error, and results equal those of one thread. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/file.h"
#include "base/threads.h"
#include "calib_model.h"
#include "expect.h"

static calq_tensor filled(int ndim, const int64_t *dims, unsigned seed)
{
    calq_tensor t = {0};
    t.dtype = CALQ_DTYPE_FLOAT32;
    t.ndim = ndim;
    memcpy(t.dims, dims, sizeof(int64_t) * (size_t)ndim);
    int64_t n = calq_tensor_numel(&t);
    float *f = malloc((size_t)n * sizeof *f);
    for (int64_t i = 0; i < n; i++) f[i] = (float)((seed * 2654435761u + (unsigned)i * 40503u) % 1000u) / 250.0f - 2;
    t.data = f;
    return t;
}

static void test_limit(void)
{
    int limit = calq_thread_limit();
    EXPECT(limit >= 4 && limit % 4 == 0);
    EXPECT(limit == 4 * (int)sysconf(_SC_NPROCESSORS_ONLN));
}

/* The waiting policy (calq_wait_policy_advice): a bounded spin only while the 1-minute load
 * leaves a processor idle; passive when the load is unknown or the machine is busy. */
static void test_wait_policy(void)
{
    calq_wait_policy w = calq__wait_policy_for(0.3, 0, 2);
    EXPECT(w.omp_wait_policy && !strcmp(w.omp_wait_policy, "passive"));
    EXPECT(w.gomp_spincount && atol(w.gomp_spincount) > 0 && atol(w.gomp_spincount) < 300000);
    w = calq__wait_policy_for(1.99, 1, 2);
    EXPECT(w.gomp_spincount != NULL);
    static const double busy[] = {2.0, 24.0, -1.0, NAN};
    for (int i = 0; i < 4; i++) {
        w = calq__wait_policy_for(busy[i], 0, 2);
        EXPECT(w.omp_wait_policy && !strcmp(w.omp_wait_policy, "passive") && w.gomp_spincount == NULL);
    }
    w = calq__wait_policy_for(0.1, 0, 0);
    EXPECT(w.gomp_spincount == NULL);
    /* a quiet average, but the processors busy right now (a second test job just started) */
    w = calq__wait_policy_for(0.1, 2, 2);
    EXPECT(w.gomp_spincount == NULL);
    w = calq__wait_policy_for(0.1, -1, 2);
    EXPECT(w.gomp_spincount == NULL);
    /* this machine's advice is one of the two */
    w = calq_wait_policy_advice();
    EXPECT(w.omp_wait_policy && !strcmp(w.omp_wait_policy, "passive"));
}

/* Runs the test model with n threads; the outputs go to out[2] (caller frees). */
static calq_status run_with(calq_model *m, int n, calq_tensor *out, calq_error *err)
{
    static const int64_t xd[] = {1, 2, 4, 4}, yd[] = {1, 3};
    calq_tensor in[2] = {filled(4, xd, 1), filled(2, yd, 2)};
    calq_session_opts o = {.n_threads = n};
    calq_session *s = NULL;
    calq_status st = calq_session_create(m, &o, &s, err);
    if (st == CALQ_OK) st = calq_session_run(s, in, 2, err);
    for (int k = 0; k < 2 && st == CALQ_OK; k++) {
        const calq_tensor *t;
        calq_session_output(s, k, &t);
        out[k] = *t;
        size_t bytes = (size_t)calq_tensor_numel(t) * sizeof(float);
        out[k].data = malloc(bytes);
        memcpy(out[k].data, t->data, bytes);
    }
    calq_session_free(s);
    calq_tensor_free_data(&in[0]);
    calq_tensor_free_data(&in[1]);
    return st;
}

static void test_session(calq_model *m)
{
    calq_error err = {0};
    calq_tensor one[2] = {{0}}, many[2] = {{0}};
    EXPECT_STATUS(run_with(m, 1, one, &err), CALQ_OK, &err, NULL);
    EXPECT_STATUS(run_with(m, INT_MAX, many, &err), CALQ_OK, &err, NULL);
    for (int k = 0; k < 2; k++) {
        EXPECT(one[k].data && many[k].data &&
               !memcmp(one[k].data, many[k].data, (size_t)calq_tensor_numel(&one[k]) * sizeof(float)));
        calq_tensor_free_data(&one[k]);
        calq_tensor_free_data(&many[k]);
    }
    calq_session *s = NULL;
    calq_session_opts o = {.n_threads = -1};
    EXPECT_STATUS(calq_session_create(m, &o, &s, &err), CALQ_ERR_BAD_PARAMETERS, &err,
                  "calq_session_opts.n_threads is -1; it must be 0 (OpenMP's default) or a positive number");
    EXPECT(s == NULL);
}

static void test_ifmr(void)
{
    static const int64_t d[] = {4096};
    calq_tensor t = filled(1, d, 3);
    calq_ifmr_opts o;
    calq_ifmr_opts_init(&o);
    calq_ifmr_result r1, r2;
    calq_error err = {0};
    o.n_threads = 1;
    EXPECT_STATUS(calq_ifmr(t.data, 4096, &o, "x", &r1, &err), CALQ_OK, &err, NULL);
    o.n_threads = INT_MAX;
    EXPECT_STATUS(calq_ifmr(t.data, 4096, &o, "x", &r2, &err), CALQ_OK, &err, NULL);
    EXPECT(r1.scale == r2.scale && r1.offset == r2.offset && r1.best_index == r2.best_index);
    calq_ifmr_stream *s = NULL;
    EXPECT_STATUS(calq_ifmr_stream_create(&o, 4096, "x", &s, &err), CALQ_OK, &err, NULL);
    calq_ifmr_stream_free(s);
    o.n_threads = -5;
    EXPECT_STATUS(calq_ifmr(t.data, 4096, &o, "x", &r2, &err), CALQ_ERR_BAD_PARAMETERS, &err, "n_threads is -5");
    calq_tensor_free_data(&t);
}

static calq_status calibrate_with(calq_model *m, const char *dir, int n, const char *record, calq_error *err)
{
    char spec[1200];
    snprintf(spec, sizeof spec, "%s/x.npy;%s/y.npy", dir, dir);
    calq_data *d = NULL;
    calq_status st = calq_data_open_npy(spec, &d, err);
    calq_calibrate_opts o;
    calq_calibrate_opts_init(&o);
    o.n_threads = n;
    o.log = 0;
    if (st == CALQ_OK) st = calq_calibrate(m, NULL, d, &o, record, err);
    calq_data_free(d);
    return st;
}

static void test_calibrate(calq_model *m)
{
    char dir[] = "/tmp/calq_test_threads.XXXXXX", p[1100], r1[1100], r2[1100];
    EXPECT(mkdtemp(dir) != NULL);
    static const int64_t xd[] = {1, 2, 4, 4}, yd[] = {1, 3};
    calq_tensor x = filled(4, xd, 4), y = filled(2, yd, 5);
    calq_error err = {0};
    snprintf(p, sizeof p, "%s/x.npy", dir);
    EXPECT_STATUS(calq_npy_write(p, &x, &err), CALQ_OK, &err, NULL);
    snprintf(p, sizeof p, "%s/y.npy", dir);
    EXPECT_STATUS(calq_npy_write(p, &y, &err), CALQ_OK, &err, NULL);
    snprintf(r1, sizeof r1, "%s/one_record.txt", dir);
    snprintf(r2, sizeof r2, "%s/many_record.txt", dir);
    EXPECT_STATUS(calibrate_with(m, dir, 1, r1, &err), CALQ_OK, &err, NULL);
    EXPECT_STATUS(calibrate_with(m, dir, INT_MAX, r2, &err), CALQ_OK, &err, NULL);
    char *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    EXPECT(calq__read_file(r1, &a, &na, &err) == CALQ_OK && calq__read_file(r2, &b, &nb, &err) == CALQ_OK);
    EXPECT(a && b && na == nb && na > 0 && !memcmp(a, b, na));
    free(a);
    free(b);
    snprintf(p, sizeof p, "%s/neg_record.txt", dir);
    EXPECT_STATUS(calibrate_with(m, dir, -2, p, &err), CALQ_ERR_BAD_PARAMETERS, &err,
                  "calq_calibrate_opts.n_threads is -2");
    EXPECT(access(p, F_OK) != 0);
    const char *names[] = {"x.npy", "y.npy", "one_record.txt", "many_record.txt"};
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
    }
    rmdir(dir);
    calq_tensor_free_data(&x);
    calq_tensor_free_data(&y);
}

int main(void)
{
    calq_error err = {0};
    calq_model *m = calib_test_model(&err);
    EXPECT(m != NULL);
    test_limit();
    test_wait_policy();
    test_ifmr();
    if (m) {
        test_session(m);
        test_calibrate(m);
    }
    calq_model_free(m);
    if (!failures) printf("test_threads: all passed\n");
    return failures ? 1 : 0;
}
