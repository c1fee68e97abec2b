/* Careless arguments to the public functions an embedder calls (probe h2): each is refused with
 * a message, or answered as the header says, instead of reading or writing outside the caller's
 * memory or being taken silently for something else. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib_model.h"
#include "expect.h"

/* calq_tensor_numel read dims[ndim - 1] for any ndim: a tensor of 9 or more dims read past the
 * struct (ASan: stack-buffer-overflow), and a negative ndim gave 1 element. */
static void test_numel_bad_ndim(void)
{
    calq_tensor t = {CALQ_DTYPE_FLOAT32, 2, {2, 3}, NULL};
    EXPECT(calq_tensor_numel(&t) == 6);
    t.ndim = 0;
    EXPECT(calq_tensor_numel(&t) == 1); /* a scalar */
    t.ndim = CALQ_MAX_DIMS + 1;
    EXPECT(calq_tensor_numel(&t) == -1);
    t.ndim = INT_MAX;
    EXPECT(calq_tensor_numel(&t) == -1);
    t.ndim = -1;
    EXPECT(calq_tensor_numel(&t) == -1);
    EXPECT(calq_tensor_numel(NULL) == -1);
}

static calq_status no_batches(void *user, int batch, calq_tensor *inputs, int n_inputs, int *end, calq_error *err)
{
    *end = 1;
    return CALQ_OK;
}

/* calq_data_describe / _batch_source / _sample_source take (buf, n) as snprintf does, but wrote
 * buf[0] even when n is 0 (a caller asking for nothing, or handing a zero-size buffer). */
static void test_describe_zero_size(void)
{
    calq_error err = {0};
    calq_data *d = NULL;
    EXPECT_STATUS(calq_data_open_stream(no_batches, NULL, "test", &d, &err), CALQ_OK, &err, NULL);
    if (!d) return;
    char buf[8] = "xyz";
    calq_data_describe(d, buf, 0);
    EXPECT(strcmp(buf, "xyz") == 0);
    EXPECT(calq_data_batch_source(d, 0, buf, 0) == buf);
    EXPECT(strcmp(buf, "xyz") == 0);
    EXPECT(calq_data_sample_source(d, 0, 0, buf, 0) == buf);
    EXPECT(strcmp(buf, "xyz") == 0);
    calq_data_describe(d, buf, sizeof buf); /* cut to the buffer, terminated */
    EXPECT(strlen(buf) == sizeof buf - 1);
    calq_data_free(d);
}

/* A batch_num the config files refuse (above CALQ__BATCH_NUM_MAX, 10^9) was taken by
 * calq_config_set_batch_num and calq_config_create, and calq_config_save then wrote a config
 * that calq_config_load (and calq calibration --config) rejects. */
static void test_batch_num_bound(void)
{
    calq_error err = {0};
    calq_model *m = calib_test_model(&err);
    EXPECT(m != NULL);
    if (!m) return;
    calq_config_opts o;
    calq_config_opts_init(&o);
    o.batch_num = INT_MAX;
    calq_config *c = NULL;
    EXPECT_STATUS(calq_config_create(m, &o, &c, &err), CALQ_ERR_BAD_PARAMETERS, &err, "batch_num is 2147483647");
    EXPECT(c == NULL);
    o.batch_num = 1000000000;
    EXPECT_STATUS(calq_config_create(m, &o, &c, &err), CALQ_OK, &err, NULL);
    if (c) {
        EXPECT_STATUS(calq_config_set_batch_num(c, 1000000001, &err), CALQ_ERR_BAD_PARAMETERS, &err, "1000000001");
        EXPECT(calq_config_batch_num(c) == 1000000000);
        /* what is accepted reads back */
        const char *tmp = getenv("TMPDIR");
        char path[600];
        snprintf(path, sizeof path, "%s/calq_api_args_%d.json", tmp && *tmp ? tmp : "/tmp", (int)getpid());
        EXPECT_STATUS(calq_config_save(c, path, &err), CALQ_OK, &err, NULL);
        calq_config *back = NULL;
        EXPECT_STATUS(calq_config_load(m, path, &back, &err), CALQ_OK, &err, NULL);
        if (back) EXPECT(calq_config_batch_num(back) == 1000000000);
        calq_config_free(back);
        remove(path);
        calq_config_free(c);
    }
    calq_model_free(m);
}

static int count_calls(void *user, const char *name, const calq_tensor *t)
{
    (*(int *)user)++;
    return 0;
}

/* calq_session_set_observer took a negative n as "every tensor" (the header gives that meaning
 * to n 0 with names NULL only), read names[] when it was NULL with n > 0, and printed a NULL
 * entry with %s. */
static void test_observer_args(void)
{
    calq_error err = {0};
    calq_model *m = calib_test_model(&err);
    EXPECT(m != NULL);
    if (!m) return;
    calq_session *s = NULL;
    EXPECT_STATUS(calq_session_create(m, NULL, &s, &err), CALQ_OK, &err, NULL);
    if (s) {
        int calls = 0;
        const char *names[] = {"c", NULL};
        EXPECT_STATUS(calq_session_set_observer(s, count_calls, &calls, names, -1, &err), CALQ_ERR_BAD_PARAMETERS, &err,
                      "n is -1");
        EXPECT_STATUS(calq_session_set_observer(s, count_calls, &calls, NULL, 2, &err), CALQ_ERR_BAD_PARAMETERS, &err,
                      "names is NULL");
        EXPECT_STATUS(calq_session_set_observer(s, count_calls, &calls, names, 2, &err), CALQ_ERR_BAD_PARAMETERS, &err,
                      "names[1] is NULL");
        /* a refused call leaves the observer as it was: none */
        float x[32] = {0}, y[3] = {0};
        calq_tensor in[2] = {{CALQ_DTYPE_FLOAT32, 4, {1, 2, 4, 4}, x}, {CALQ_DTYPE_FLOAT32, 2, {1, 3}, y}};
        EXPECT_STATUS(calq_session_run(s, in, 2, &err), CALQ_OK, &err, NULL);
        EXPECT(calls == 0);
        EXPECT_STATUS(calq_session_set_observer(s, count_calls, &calls, names, 1, &err), CALQ_OK, &err, NULL);
        EXPECT_STATUS(calq_session_run(s, in, 2, &err), CALQ_OK, &err, NULL);
        EXPECT(calls == 1);
        calq_session_free(s);
    }
    calq_model_free(m);
}

/* A stream whose end_pass failed (nothing fed) answered calq_*_stream_result with "no result yet
 * (pass -1 is not finished)": an internal state, not what happened. */
static void test_failed_stream_result(void)
{
    calq_error err = {0};
    calq_ifmr_opts io;
    calq_ifmr_opts_init(&io);
    calq_ifmr_stream *is = NULL;
    int done = 0;
    EXPECT_STATUS(calq_ifmr_stream_create(&io, 0, "l", &is, &err), CALQ_OK, &err, NULL);
    if (is) {
        EXPECT_STATUS(calq_ifmr_stream_end_pass(is, &done, &err), CALQ_ERR_BAD_PARAMETERS, &err, "empty");
        calq_ifmr_result ir;
        EXPECT_STATUS(calq_ifmr_stream_result(is, &ir, &err), CALQ_ERR_BAD_PARAMETERS, &err, "failed earlier");
        EXPECT(!strstr(err.message, "pass -1"));
        calq_ifmr_stream_free(is);
    }
    calq_range_opts ro;
    calq_range_opts_init(&ro, CALQ_RANGE_KL);
    calq_range_stream *rs = NULL;
    EXPECT_STATUS(calq_range_stream_create(&ro, 0, "l", &rs, &err), CALQ_OK, &err, NULL);
    if (rs) {
        EXPECT_STATUS(calq_range_stream_end_pass(rs, &done, &err), CALQ_ERR_BAD_PARAMETERS, &err, "empty");
        calq_range_result rr;
        EXPECT_STATUS(calq_range_stream_result(rs, &rr, &err), CALQ_ERR_BAD_PARAMETERS, &err, "failed earlier");
        EXPECT(!strstr(err.message, "pass -1"));
        calq_range_stream_free(rs);
    }
}

/* calq_session_opts.skip_fusion_layers NULL with n_skip_fusion_layers > 0 was read (segfault in
 * the Conv+BN fold), a NULL entry too, and a negative count was taken as none; the same fields
 * of calq_config_opts are refused with a message. */
static void test_skip_fusion_args(void)
{
    calq_error err = {0};
    calq_model *m = calib_test_model(&err);
    EXPECT(m != NULL);
    if (!m) return;
    calq_session_opts o;
    calq_session *s = NULL;
    const char *names[] = {"conv", NULL};
    calq_session_opts_init(&o);
    o.n_skip_fusion_layers = 3;
    EXPECT_STATUS(calq_session_create(m, &o, &s, &err), CALQ_ERR_BAD_PARAMETERS, &err, "none given");
    o.skip_fusion_layers = names;
    o.n_skip_fusion_layers = 2;
    EXPECT_STATUS(calq_session_create(m, &o, &s, &err), CALQ_ERR_BAD_PARAMETERS, &err, "NULL");
    o.n_skip_fusion_layers = -1;
    EXPECT_STATUS(calq_session_create(m, &o, &s, &err), CALQ_ERR_BAD_PARAMETERS, &err, "-1");
    EXPECT(s == NULL);
    o.n_skip_fusion_layers = 1;
    EXPECT_STATUS(calq_session_create(m, &o, &s, &err), CALQ_OK, &err, NULL);
    calq_session_free(s);
    calq_model_free(m);
}

int main(void)
{
    test_numel_bad_ndim();
    test_describe_zero_size();
    test_batch_num_bound();
    test_observer_args();
    test_failed_stream_result();
    test_skip_fusion_args();
    return TEST_RESULT();
}
