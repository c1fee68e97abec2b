/* Every public function of calq.h called with each bad argument in turn (probe h3): a NULL
 * pointer the header does not allow, an index or count out of range. The rule (calq.h's
 * conventions, docs/c-api.md "Arguments"): a function returning calq_status fails with
 * CALQ_ERR_BAD_PARAMETERS (CALQ_ERR_INDEX_OUT_OF_RANGE for an index) and a message naming the
 * argument, the same with err NULL; an accessor returns its sentinel (NULL, -1, 0); a void
 * function does nothing; free and _opts_init functions take NULL. On the code before it, 106 of
 * the 250 cases crashed the process (SIGSEGV; 109 under ASan/UBSan, which also sees
 * calq_deq_scale read past scale_w) and 78 more answered without naming the argument.
 *
 * Each case runs in a child process of its own, so that a case that crashes is counted and
 * named and the others still run. The parent only lists the cases (no model, no session: no
 * OpenMP threads exist when it forks); a child builds the objects its case needs. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "calib_model.h"
#include "expect.h"

#define EXIT_NO_CASE 99 /* the child's target is past the last case: the parent stops there */
#define EXIT_FAILED  2  /* the case ran and an EXPECT failed */
#define MAX_CASES    512

static int target = -1, n_seen;
static int listing; /* 1: only collect the labels (the parent) */
static const char *labels[MAX_CASES];
static char dir[512];

static int note(const char *label)
{
    if (listing && n_seen < MAX_CASES) labels[n_seen] = label;
    return n_seen++ == target;
}

/* CASE(label) { body }: the body runs in the child whose target is this case. */
#define CASE(label) if (note(label))

/* A status call made with err and with err NULL: both give `want`, and the message names the
 * argument (needle). The call uses `e` for its calq_error *. */
#define BAD_WITH(want, needle, call)                                                                                   \
    do {                                                                                                               \
        calq_error got_ = {0};                                                                                         \
        calq_error *e = &got_;                                                                                         \
        calq_status with_ = (call);                                                                                    \
        EXPECT_STATUS(with_, (want), &got_, (needle));                                                                 \
        e = NULL;                                                                                                      \
        calq_status without_ = (call);                                                                                 \
        EXPECT(without_ == with_);                                                                                     \
    } while (0)
#define BAD(needle, call)          BAD_WITH(CALQ_ERR_BAD_PARAMETERS, (needle), call)
#define OUT_OF_RANGE(needle, call) BAD_WITH(CALQ_ERR_INDEX_OUT_OF_RANGE, (needle), call)

/* ---- the objects the cases pass as the valid arguments (built in the child, on first use) ---- */
static calq_model *fx_m;
static calq_session *fx_s;
static calq_config *fx_c;
static calq_data *fx_d;
static calq_ifmr_stream *fx_is;
static calq_hfmg *fx_h;
static calq_range_stream *fx_rs;
static calq_shift_bit *fx_sb;
static calq_outputs *fx_o;

static calq_model *M(void)
{
    calq_error err = {0};
    if (!fx_m) fx_m = calib_test_model(&err);
    if (!fx_m) {
        fprintf(stderr, "the test model: %s\n", err.message);
        exit(1);
    }
    return fx_m;
}

static calq_session *S(void)
{
    calq_error err = {0};
    if (!fx_s && calq_session_create(M(), NULL, &fx_s, &err) != CALQ_OK) {
        fprintf(stderr, "session: %s\n", err.message);
        exit(1);
    }
    return fx_s;
}

static calq_config *C(void)
{
    calq_error err = {0};
    if (!fx_c && calq_config_create(M(), NULL, &fx_c, &err) != CALQ_OK) {
        fprintf(stderr, "config: %s\n", err.message);
        exit(1);
    }
    return fx_c;
}

static calq_status no_batches(void *user, int batch, calq_tensor *inputs, int n_inputs, int *end, calq_error *err)
{
    *end = 1;
    return CALQ_OK;
}

static calq_data *D(void)
{
    calq_error err = {0};
    if (!fx_d && calq_data_open_stream(no_batches, NULL, "test", &fx_d, &err) != CALQ_OK) {
        fprintf(stderr, "data: %s\n", err.message);
        exit(1);
    }
    return fx_d;
}

static calq_ifmr_stream *IS(void)
{
    calq_ifmr_opts o;
    calq_ifmr_opts_init(&o);
    if (!fx_is && calq_ifmr_stream_create(&o, 0, "l", &fx_is, NULL) != CALQ_OK) exit(1);
    return fx_is;
}

static calq_hfmg *H(void)
{
    calq_hfmg_opts o;
    calq_hfmg_opts_init(&o);
    if (!fx_h && calq_hfmg_create(&o, "l", &fx_h, NULL) != CALQ_OK) exit(1);
    return fx_h;
}

static calq_range_stream *RS(void)
{
    calq_range_opts o;
    calq_range_opts_init(&o, CALQ_RANGE_MINMAX);
    if (!fx_rs && calq_range_stream_create(&o, 0, "l", &fx_rs, NULL) != CALQ_OK) exit(1);
    return fx_rs;
}

static calq_shift_bit *SB(void)
{
    static const float deq[2] = {0.5f, 0.25f};
    if (!fx_sb && calq_shift_bit_create(2, deq, 0, &fx_sb, NULL) != CALQ_OK) exit(1);
    return fx_sb;
}

static char prefix[600], record[600], json[600];

static calq_outputs *O(void)
{
    calq_error err = {0};
    if (!fx_o && calq_outputs_begin(prefix, &fx_o, &err) != CALQ_OK) {
        fprintf(stderr, "outputs: %s\n", err.message);
        exit(1);
    }
    return fx_o;
}

static void fixtures_free(void)
{
    calq_outputs_abort(fx_o);
    calq_shift_bit_free(fx_sb);
    calq_range_stream_free(fx_rs);
    calq_hfmg_free(fx_h);
    calq_ifmr_stream_free(fx_is);
    calq_data_free(fx_d);
    calq_config_free(fx_c);
    calq_session_free(fx_s);
    calq_model_free(fx_m);
}

static int count_calls(void *user, const char *name, const calq_tensor *t)
{
    return 0;
}

static calq_status evaluator(void *user, const char *model_path, const char *weights_path, double *metric,
                             calq_error *err)
{
    *metric = 1;
    return CALQ_OK;
}

/* ---- the cases, in calq.h's order ---------------------------------------------------------- */

static void cases_base(void)
{
    /* no arguments: listed so that every function of calq.h has a case (check_every_function) */
    CASE("calq_version()") EXPECT(calq_version() == CALQ_VERSION_HEX);
    CASE("calq_version_string()") EXPECT(strcmp(calq_version_string(), CALQ_VERSION_STRING) == 0);
    CASE("calq_thread_limit()") EXPECT(calq_thread_limit() >= 4);
    CASE("calq_wait_policy_advice()") EXPECT(calq_wait_policy_advice().omp_wait_policy != NULL);
    CASE("calq_status_name(unknown value)") EXPECT(strcmp(calq_status_name((calq_status)12345), "UNKNOWN") == 0);
    CASE("calq_strerror(unknown value)") EXPECT(calq_strerror((calq_status)12345) != NULL);
    CASE("calq_set_log(NULL, NULL, absurd level)") calq_set_log(NULL, NULL, (calq_log_level)99);
    CASE("calq_dtype_name(unknown dtype)") EXPECT(strcmp(calq_dtype_name((calq_dtype)99), "undefined") == 0);
    CASE("calq_dtype_size(unknown dtype)") EXPECT(calq_dtype_size((calq_dtype)-7) == 0);
    CASE("calq_tensor_numel(NULL)") EXPECT(calq_tensor_numel(NULL) == -1);
    CASE("calq_npy_read(path NULL)")
    {
        calq_tensor t;
        BAD("path", calq_npy_read(NULL, &t, e));
    }
    CASE("calq_npy_read(out NULL)") BAD("out", calq_npy_read(record, NULL, e));
    CASE("calq_npy_write(path NULL)")
    {
        float x[2] = {0};
        calq_tensor t = {CALQ_DTYPE_FLOAT32, 1, {2}, x};
        BAD("path", calq_npy_write(NULL, &t, e));
    }
    CASE("calq_npy_write(t NULL)") BAD("t is NULL", calq_npy_write(json, NULL, e));
    CASE("calq_npy_write(t->data NULL)")
    {
        calq_tensor t = {CALQ_DTYPE_FLOAT32, 1, {2}, NULL};
        BAD("no data", calq_npy_write(json, &t, e));
    }
    CASE("calq_tensor_free_data(NULL)") calq_tensor_free_data(NULL);
}

static void cases_model(void)
{
    CASE("calq_model_load_onnx(onnx_path NULL)")
    {
        calq_model *m = NULL;
        BAD("onnx_path is NULL", calq_model_load_onnx(NULL, &m, e));
    }
    CASE("calq_model_load_onnx(out NULL)") BAD("out is NULL", calq_model_load_onnx(record, NULL, e));
    CASE("calq_model_load_onnx_buffer(data NULL, size 10)")
    {
        calq_model *m = NULL;
        BAD("data is NULL", calq_model_load_onnx_buffer(NULL, 10, NULL, &m, e));
    }
    CASE("calq_model_load_onnx_buffer(out NULL)")
    BAD("out is NULL", calq_model_load_onnx_buffer("x", 1, NULL, NULL, e));
    CASE("calq_model_load_caffe(prototxt NULL)")
    {
        calq_model *m = NULL;
        BAD("prototxt is NULL", calq_model_load_caffe(NULL, NULL, &m, e));
    }
    CASE("calq_model_load_caffe(out NULL)") BAD("out is NULL", calq_model_load_caffe(record, NULL, NULL, e));
    CASE("calq_model_free(NULL)") calq_model_free(NULL);
    CASE("calq_model_num_inputs(NULL)") EXPECT(calq_model_num_inputs(NULL) == -1);
    CASE("calq_model_num_outputs(NULL)") EXPECT(calq_model_num_outputs(NULL) == -1);
    CASE("calq_model_input_info(m NULL)")
    {
        calq_value_info v;
        EXPECT(calq_model_input_info(NULL, 0, &v) == CALQ_ERR_BAD_PARAMETERS);
    }
    CASE("calq_model_input_info(out NULL)") EXPECT(calq_model_input_info(M(), 0, NULL) == CALQ_ERR_BAD_PARAMETERS);
    CASE("calq_model_input_info(i 99)")
    {
        calq_value_info v;
        EXPECT(calq_model_input_info(M(), 99, &v) == CALQ_ERR_INDEX_OUT_OF_RANGE);
    }
    CASE("calq_model_input_info(i -1)")
    {
        calq_value_info v;
        EXPECT(calq_model_input_info(M(), -1, &v) == CALQ_ERR_INDEX_OUT_OF_RANGE);
    }
    CASE("calq_model_output_info(m NULL)")
    {
        calq_value_info v;
        EXPECT(calq_model_output_info(NULL, 0, &v) == CALQ_ERR_BAD_PARAMETERS);
    }
    CASE("calq_model_output_info(out NULL)") EXPECT(calq_model_output_info(M(), 0, NULL) == CALQ_ERR_BAD_PARAMETERS);
    CASE("calq_model_output_info(i 99)")
    {
        calq_value_info v;
        EXPECT(calq_model_output_info(M(), 99, &v) == CALQ_ERR_INDEX_OUT_OF_RANGE);
    }
    static const int64_t dims[4] = {1, 2, 4, 4};
    CASE("calq_model_set_input_shape(m NULL)") BAD("m is NULL", calq_model_set_input_shape(NULL, "x", dims, 4, e));
    CASE("calq_model_set_input_shape(name NULL)")
    BAD("name is NULL", calq_model_set_input_shape(M(), NULL, dims, 4, e));
    CASE("calq_model_set_input_shape(dims NULL, ndim 4)")
    BAD("dims is NULL", calq_model_set_input_shape(M(), "x", NULL, 4, e));
    CASE("calq_model_set_input_shape(ndim -1)") BAD("-1", calq_model_set_input_shape(M(), "x", dims, -1, e));
    CASE("calq_model_set_input_shape(ndim 99)") BAD("99", calq_model_set_input_shape(M(), "x", dims, 99, e));
    CASE("calq_model_num_nodes(NULL)") EXPECT(calq_model_num_nodes(NULL) == -1);
    CASE("calq_model_node_info(m NULL)")
    {
        calq_node_info n;
        EXPECT(calq_model_node_info(NULL, 0, &n) == CALQ_ERR_BAD_PARAMETERS);
    }
    CASE("calq_model_node_info(out NULL)") EXPECT(calq_model_node_info(M(), 0, NULL) == CALQ_ERR_BAD_PARAMETERS);
    CASE("calq_model_node_info(i 99)")
    {
        calq_node_info n;
        EXPECT(calq_model_node_info(M(), 99, &n) == CALQ_ERR_INDEX_OUT_OF_RANGE);
    }
    CASE("calq_model_node_input(m NULL)") EXPECT(calq_model_node_input(NULL, 0, 0) == NULL);
    CASE("calq_model_node_input(j 99)") EXPECT(calq_model_node_input(M(), 0, 99) == NULL);
    CASE("calq_model_node_input(i -1)") EXPECT(calq_model_node_input(M(), -1, 0) == NULL);
    CASE("calq_model_node_output(m NULL)") EXPECT(calq_model_node_output(NULL, 0, 0) == NULL);
    CASE("calq_model_node_output(i 99)") EXPECT(calq_model_node_output(M(), 99, 0) == NULL);
}

static void cases_session(void)
{
    CASE("calq_session_opts_init(NULL)") calq_session_opts_init(NULL);
    CASE("calq_session_create(m NULL)")
    {
        calq_session *s = NULL;
        BAD("m is NULL", calq_session_create(NULL, NULL, &s, e));
    }
    CASE("calq_session_create(out NULL)") BAD("out is NULL", calq_session_create(M(), NULL, NULL, e));
    CASE("calq_session_free(NULL)") calq_session_free(NULL);
    CASE("calq_session_set_observer(s NULL)")
    BAD("s is NULL", calq_session_set_observer(NULL, count_calls, NULL, NULL, 0, e));
    CASE("calq_session_set_observer(n -1)")
    {
        const char *names[1] = {"c"};
        BAD("n is -1", calq_session_set_observer(S(), count_calls, NULL, names, -1, e));
    }
    CASE("calq_session_set_observer(names NULL, n 2)")
    BAD("names is NULL", calq_session_set_observer(S(), count_calls, NULL, NULL, 2, e));
    float x[32] = {0}, y[3] = {0};
    calq_tensor in[2] = {{CALQ_DTYPE_FLOAT32, 4, {1, 2, 4, 4}, x}, {CALQ_DTYPE_FLOAT32, 2, {1, 3}, y}};
    CASE("calq_session_run(s NULL)") BAD("s is NULL", calq_session_run(NULL, in, 2, e));
    CASE("calq_session_run(inputs NULL, n_inputs 2)") BAD("inputs is NULL", calq_session_run(S(), NULL, 2, e));
    CASE("calq_session_run(n_inputs -1)") BAD("n_inputs is -1", calq_session_run(S(), in, -1, e));
    CASE("calq_session_run(n_inputs INT_MAX)") BAD("2147483647", calq_session_run(S(), in, INT_MAX, e));
    CASE("calq_session_output(s NULL)")
    {
        const calq_tensor *t = (const calq_tensor *)1;
        EXPECT(calq_session_output(NULL, 0, &t) == CALQ_ERR_BAD_PARAMETERS);
        EXPECT(t == NULL);
    }
    CASE("calq_session_output(out NULL)") EXPECT(calq_session_output(S(), 0, NULL) == CALQ_ERR_BAD_PARAMETERS);
    CASE("calq_session_output(i 99)")
    {
        const calq_tensor *t = NULL;
        calq_error err = {0};
        EXPECT_STATUS(calq_session_run(S(), in, 2, &err), CALQ_OK, &err, NULL);
        EXPECT(calq_session_output(S(), 99, &t) == CALQ_ERR_INDEX_OUT_OF_RANGE);
        EXPECT(calq_session_output(S(), -1, &t) == CALQ_ERR_INDEX_OUT_OF_RANGE);
        EXPECT(t == NULL);
    }
    CASE("calq_session_tensor_info(s NULL)")
    {
        calq_value_info v;
        BAD("s is NULL", calq_session_tensor_info(NULL, "c", &v, e));
    }
    CASE("calq_session_tensor_info(name NULL)")
    {
        calq_value_info v;
        BAD("name is NULL", calq_session_tensor_info(S(), NULL, &v, e));
    }
    CASE("calq_session_tensor_info(out NULL)") BAD("out is NULL", calq_session_tensor_info(S(), "c", NULL, e));
    CASE("calq_session_memory(s NULL)")
    {
        size_t a = 7, b = 7;
        calq_session_memory(NULL, &a, &b);
        EXPECT(a == 0 && b == 0);
    }
    CASE("calq_session_memory(arena_bytes, sum_bytes NULL)") calq_session_memory(S(), NULL, NULL);
}

static void cases_images_config(void)
{
    CASE("calq_image_opts_init(NULL)") calq_image_opts_init(NULL);
    CASE("calq_image_load(path NULL)")
    {
        calq_tensor t;
        BAD("path is NULL", calq_image_load(NULL, NULL, &t, e));
    }
    CASE("calq_image_load(out NULL)") BAD("out is NULL", calq_image_load(record, NULL, NULL, e));
    CASE("calq_config_opts_init(NULL)") calq_config_opts_init(NULL);
    CASE("calq_create_quant_config(m NULL)") BAD("m is NULL", calq_create_quant_config(NULL, NULL, json, e));
    CASE("calq_create_quant_config(json_out NULL)")
    BAD("json_out is NULL", calq_create_quant_config(M(), NULL, NULL, e));
    CASE("calq_config_create(m NULL)")
    {
        calq_config *c = NULL;
        BAD("m is NULL", calq_config_create(NULL, NULL, &c, e));
    }
    CASE("calq_config_create(out NULL)") BAD("out is NULL", calq_config_create(M(), NULL, NULL, e));
    CASE("calq_config_load(m NULL)")
    {
        calq_config *c = NULL;
        BAD("m is NULL", calq_config_load(NULL, json, &c, e));
    }
    CASE("calq_config_load(path NULL)")
    {
        calq_config *c = NULL;
        BAD("path is NULL", calq_config_load(M(), NULL, &c, e));
    }
    CASE("calq_config_load(out NULL)") BAD("out is NULL", calq_config_load(M(), json, NULL, e));
    CASE("calq_config_save(c NULL)") BAD("c is NULL", calq_config_save(NULL, json, e));
    CASE("calq_config_save(json_path NULL)") BAD("json_path is NULL", calq_config_save(C(), NULL, e));
    CASE("calq_config_free(NULL)") calq_config_free(NULL);
    CASE("calq_config_batch_num(NULL)") EXPECT(calq_config_batch_num(NULL) == -1);
    CASE("calq_config_set_batch_num(c NULL)") BAD("c is NULL", calq_config_set_batch_num(NULL, 1, e));
    CASE("calq_config_num_layers(NULL)") EXPECT(calq_config_num_layers(NULL) == -1);
    CASE("calq_config_layer_name(c NULL)") EXPECT(calq_config_layer_name(NULL, 0) == NULL);
    CASE("calq_config_layer_name(i 99)") EXPECT(calq_config_layer_name(C(), 99) == NULL);
    CASE("calq_config_layer_enabled(c NULL)") EXPECT(calq_config_layer_enabled(NULL, 0) == 0);
    CASE("calq_config_layer_enabled(i -1)") EXPECT(calq_config_layer_enabled(C(), -1) == 0);
    CASE("calq_config_find_layer(c NULL)") EXPECT(calq_config_find_layer(NULL, "conv") == -1);
    CASE("calq_config_find_layer(layer NULL)") EXPECT(calq_config_find_layer(C(), NULL) == -1);
    CASE("calq_config_set_layer_enabled(c NULL)") BAD("c is NULL", calq_config_set_layer_enabled(NULL, 0, 1, e));
    CASE("calq_config_set_layer_enabled(i 99)") OUT_OF_RANGE("99", calq_config_set_layer_enabled(C(), 99, 1, e));
}

static void cases_data(void)
{
    CASE("calq_data_open_bin(out NULL)") BAD("out is NULL", calq_data_open_bin(dir, NULL, NULL, e));
    CASE("calq_data_open_bin(data_dir NULL)")
    {
        calq_data *d = NULL;
        BAD("data_dir", calq_data_open_bin(NULL, NULL, &d, e));
    }
    CASE("calq_data_open_npy(spec NULL)")
    {
        calq_data *d = NULL;
        BAD(".npy", calq_data_open_npy(NULL, &d, e));
    }
    CASE("calq_data_open_npy(out NULL)") BAD("out is NULL", calq_data_open_npy(dir, NULL, e));
    CASE("calq_data_open_images(out NULL)") BAD("out is NULL", calq_data_open_images(dir, NULL, 1, NULL, e));
    CASE("calq_data_open_images(dir NULL)")
    {
        calq_data *d = NULL;
        BAD("dir is NULL", calq_data_open_images(NULL, NULL, 1, &d, e));
    }
    CASE("calq_data_open_images(batch_size -1)")
    {
        calq_data *d = NULL;
        BAD("-1", calq_data_open_images(dir, NULL, -1, &d, e));
    }
    CASE("calq_data_open_stream(next NULL)")
    {
        calq_data *d = NULL;
        BAD("next", calq_data_open_stream(NULL, NULL, NULL, &d, e));
    }
    CASE("calq_data_open_stream(out NULL)") BAD("out is NULL", calq_data_open_stream(no_batches, NULL, NULL, NULL, e));
    CASE("calq_data_free(NULL)") calq_data_free(NULL);
    CASE("calq_data_num_batches(NULL)") EXPECT(calq_data_num_batches(NULL) == -1);
    CASE("calq_data_describe(d NULL)")
    {
        char buf[16] = "xyz";
        calq_data_describe(NULL, buf, sizeof buf);
        EXPECT(buf[0] == 0);
    }
    CASE("calq_data_describe(buf NULL, n 16)") calq_data_describe(D(), NULL, 16);
    CASE("calq_data_batch_source(d NULL)")
    {
        char buf[16] = "xyz";
        EXPECT(calq_data_batch_source(NULL, 0, buf, sizeof buf) == buf);
        EXPECT(buf[0] == 0);
    }
    CASE("calq_data_batch_source(buf NULL, n 16)") EXPECT(calq_data_batch_source(D(), 0, NULL, 16) == NULL);
    CASE("calq_data_batch_source(batch 99)")
    {
        char buf[64];
        EXPECT(calq_data_batch_source(D(), 99, buf, sizeof buf) == buf);
        EXPECT(strstr(buf, "99") != NULL);
    }
    CASE("calq_data_sample_source(d NULL)")
    {
        char buf[16] = "xyz";
        EXPECT(calq_data_sample_source(NULL, 0, 0, buf, sizeof buf) == buf);
        EXPECT(buf[0] == 0);
    }
    CASE("calq_data_sample_source(buf NULL, n 16)") EXPECT(calq_data_sample_source(D(), 0, 0, NULL, 16) == NULL);
    CASE("calq_data_sample_source(n 0)")
    {
        char buf[4] = "xyz";
        EXPECT(calq_data_sample_source(D(), 0, 0, buf, 0) == buf);
        EXPECT(strcmp(buf, "xyz") == 0);
    }
    CASE("calq_data_input_info(d NULL)")
    {
        calq_value_info v;
        BAD("d is NULL", calq_data_input_info(NULL, M(), 0, &v, e));
    }
    CASE("calq_data_input_info(m NULL)")
    {
        calq_value_info v;
        BAD("m is NULL", calq_data_input_info(D(), NULL, 0, &v, e));
    }
    CASE("calq_data_input_info(out NULL)") BAD("out is NULL", calq_data_input_info(D(), M(), 0, NULL, e));
    CASE("calq_data_input_info(i 99)")
    {
        calq_value_info v;
        OUT_OF_RANGE("99", calq_data_input_info(D(), M(), 99, &v, e));
    }
    CASE("calq_data_check(d NULL)") BAD("d is NULL", calq_data_check(NULL, M(), 1, e));
    CASE("calq_data_check(m NULL)") BAD("m is NULL", calq_data_check(D(), NULL, 1, e));
    CASE("calq_data_check(batch_num -1)") BAD("-1", calq_data_check(D(), M(), -1, e));
    float x[32] = {0}, y[3] = {0};
    calq_tensor in[2] = {{CALQ_DTYPE_FLOAT32, 4, {1, 2, 4, 4}, x}, {CALQ_DTYPE_FLOAT32, 2, {1, 3}, y}};
    CASE("calq_data_read_batch(d NULL)") BAD("d is NULL", calq_data_read_batch(NULL, 0, in, 2, e));
    CASE("calq_data_read_batch(inputs NULL)") BAD("inputs is NULL", calq_data_read_batch(D(), 0, NULL, 2, e));
    CASE("calq_data_read_batch(n_inputs -1)") BAD("n_inputs is -1", calq_data_read_batch(D(), 0, in, -1, e));
    CASE("calq_data_read_batch_resize(d NULL)") BAD("d is NULL", calq_data_read_batch_resize(NULL, 0, in, 2, e));
    CASE("calq_data_read_batch_resize(inputs NULL)")
    BAD("inputs is NULL", calq_data_read_batch_resize(D(), 0, NULL, 2, e));
    CASE("calq_data_read_batch_resize(n_inputs -1)") BAD("-1", calq_data_read_batch_resize(D(), 0, in, -1, e));
}

static void cases_outputs_calibrate(void)
{
    CASE("calq_outputs_begin(prefix NULL)")
    {
        calq_outputs *o = NULL;
        BAD("prefix is NULL", calq_outputs_begin(NULL, &o, e));
    }
    CASE("calq_outputs_begin(out NULL)") BAD("out is NULL", calq_outputs_begin(prefix, NULL, e));
    CASE("calq_outputs_commit(o NULL)") BAD("o is NULL", calq_outputs_commit(NULL, e));
    CASE("calq_outputs_abort(NULL)") calq_outputs_abort(NULL);
    CASE("calq_calibrate_opts_init(NULL)") calq_calibrate_opts_init(NULL);
    CASE("calq_calibrate(m NULL)") BAD("m is NULL", calq_calibrate(NULL, NULL, D(), NULL, record, e));
    CASE("calq_calibrate(data NULL)") BAD("data is NULL", calq_calibrate(M(), NULL, NULL, NULL, record, e));
    CASE("calq_calibrate(record_out NULL)") BAD("record_out is NULL", calq_calibrate(M(), NULL, D(), NULL, NULL, e));
}

static void cases_numerics(void)
{
    float x[4] = {0.5f, -1, 2, 3}, f[4] = {0};
    int8_t q[4] = {0};
    CASE("calq_round(absurd mode)") EXPECT(calq_round(2.5f, (calq_round_mode)99) == 3.0f);
    CASE("calq_process_scale(scale NULL)") BAD("scale is NULL", calq_process_scale(NULL, "l", e));
    CASE("calq_process_scale(layer NULL)")
    {
        float s = INFINITY;
        BAD_WITH(CALQ_ERR_NOT_SUPPORT, NULL, calq_process_scale(&s, NULL, e));
    }
    CASE("calq_quantize(x NULL)") calq_quantize(NULL, 4, 1, 0, 8, CALQ_ROUND_HALF_AWAY, q);
    CASE("calq_quantize(q NULL)") calq_quantize(x, 4, 1, 0, 8, CALQ_ROUND_HALF_AWAY, NULL);
    CASE("calq_fake_quant(x NULL)") calq_fake_quant(NULL, 4, 1, 0, 8, CALQ_ROUND_HALF_AWAY, f);
    CASE("calq_fake_quant(y NULL)") calq_fake_quant(x, 4, 1, 0, 8, CALQ_ROUND_HALF_AWAY, NULL);
    calq_ifmr_opts io;
    calq_ifmr_opts_init(&io);
    calq_ifmr_result ir;
    CASE("calq_ifmr_opts_init(NULL)") calq_ifmr_opts_init(NULL);
    CASE("calq_ifmr(x NULL)") BAD("(layer \"l\"): x is NULL", calq_ifmr(NULL, 4, &io, "l", &ir, e));
    CASE("calq_ifmr(o NULL)") BAD("o is NULL", calq_ifmr(x, 4, NULL, "l", &ir, e));
    CASE("calq_ifmr(out NULL)") BAD("out is NULL", calq_ifmr(x, 4, &io, "l", NULL, e));
    CASE("calq_ifmr_stream_create(o NULL)")
    {
        calq_ifmr_stream *s = NULL;
        BAD("o is NULL", calq_ifmr_stream_create(NULL, 0, "l", &s, e));
    }
    CASE("calq_ifmr_stream_create(out NULL)") BAD("out is NULL", calq_ifmr_stream_create(&io, 0, "l", NULL, e));
    CASE("calq_ifmr_stream_feed(s NULL)") BAD("s is NULL", calq_ifmr_stream_feed(NULL, x, 4, e));
    CASE("calq_ifmr_stream_feed(x NULL)") BAD("(layer \"l\"): x is NULL", calq_ifmr_stream_feed(IS(), NULL, 4, e));
    CASE("calq_ifmr_stream_end_pass(s NULL)")
    {
        int done = 0;
        BAD("s is NULL", calq_ifmr_stream_end_pass(NULL, &done, e));
    }
    CASE("calq_ifmr_stream_end_pass(done NULL)") BAD("done is NULL", calq_ifmr_stream_end_pass(IS(), NULL, e));
    CASE("calq_ifmr_stream_result(s NULL)") BAD("s is NULL", calq_ifmr_stream_result(NULL, &ir, e));
    CASE("calq_ifmr_stream_result(out NULL)") BAD("out is NULL", calq_ifmr_stream_result(IS(), NULL, e));
    CASE("calq_ifmr_stream_pass(NULL)") EXPECT(calq_ifmr_stream_pass(NULL) == -1);
    CASE("calq_ifmr_stream_bytes(NULL)") EXPECT(calq_ifmr_stream_bytes(NULL) == 0);
    CASE("calq_ifmr_stream_free(NULL)") calq_ifmr_stream_free(NULL);

    calq_hfmg_opts ho;
    calq_hfmg_opts_init(&ho);
    calq_hfmg_result hr;
    CASE("calq_hfmg_opts_init(NULL)") calq_hfmg_opts_init(NULL);
    CASE("calq_hfmg_create(o NULL)")
    {
        calq_hfmg *h = NULL;
        BAD("o is NULL", calq_hfmg_create(NULL, "l", &h, e));
    }
    CASE("calq_hfmg_create(out NULL)") BAD("out is NULL", calq_hfmg_create(&ho, "l", NULL, e));
    CASE("calq_hfmg_feed(h NULL)") BAD("h is NULL", calq_hfmg_feed(NULL, x, 4, e));
    CASE("calq_hfmg_feed(x NULL)") BAD("x is NULL", calq_hfmg_feed(H(), NULL, 4, e));
    CASE("calq_hfmg_compute(h NULL)") BAD("h is NULL", calq_hfmg_compute(NULL, &hr, e));
    CASE("calq_hfmg_compute(out NULL)")
    {
        calq_error err = {0};
        EXPECT_STATUS(calq_hfmg_feed(H(), x, 4, &err), CALQ_OK, &err, NULL);
        BAD("out is NULL", calq_hfmg_compute(H(), NULL, e));
    }
    CASE("calq_hfmg_bins(h NULL)")
    {
        const uint64_t *counts = NULL;
        EXPECT(calq_hfmg_bins(NULL, &counts, NULL, NULL) == -1);
    }
    CASE("calq_hfmg_bins(counts, lo, width NULL)")
    {
        calq_error err = {0};
        EXPECT_STATUS(calq_hfmg_feed(H(), x, 4, &err), CALQ_OK, &err, NULL);
        EXPECT(calq_hfmg_bins(H(), NULL, NULL, NULL) > 0);
    }
    CASE("calq_hfmg_free(NULL)") calq_hfmg_free(NULL);

    calq_range_opts ro;
    calq_range_opts_init(&ro, CALQ_RANGE_MINMAX);
    calq_range_result rr;
    CASE("calq_range_opts_init(NULL)") calq_range_opts_init(NULL, CALQ_RANGE_KL);
    CASE("calq_range_method_name(absurd method)") EXPECT(calq_range_method_name((calq_range_method)-1) == NULL);
    CASE("calq_range_stream_create(o NULL)")
    {
        calq_range_stream *s = NULL;
        BAD("o is NULL", calq_range_stream_create(NULL, 0, "l", &s, e));
    }
    CASE("calq_range_stream_create(out NULL)") BAD("out is NULL", calq_range_stream_create(&ro, 0, "l", NULL, e));
    CASE("calq_range_stream_feed(s NULL)") BAD("s is NULL", calq_range_stream_feed(NULL, x, 4, e));
    CASE("calq_range_stream_feed(x NULL)") BAD("(layer \"l\"): x is NULL", calq_range_stream_feed(RS(), NULL, 4, e));
    CASE("calq_range_stream_end_pass(s NULL)")
    {
        int done = 0;
        BAD("s is NULL", calq_range_stream_end_pass(NULL, &done, e));
    }
    CASE("calq_range_stream_end_pass(done NULL)") BAD("done is NULL", calq_range_stream_end_pass(RS(), NULL, e));
    CASE("calq_range_stream_result(s NULL)") BAD("s is NULL", calq_range_stream_result(NULL, &rr, e));
    CASE("calq_range_stream_result(out NULL)") BAD("out is NULL", calq_range_stream_result(RS(), NULL, e));
    CASE("calq_range_stream_pass(NULL)") EXPECT(calq_range_stream_pass(NULL) == -1);
    CASE("calq_range_stream_bytes(NULL)") EXPECT(calq_range_stream_bytes(NULL) == 0);
    CASE("calq_range_stream_free(NULL)") calq_range_stream_free(NULL);
    CASE("calq_range(x NULL)") BAD("(layer \"l\"): x is NULL", calq_range(NULL, 4, &ro, "l", &rr, e));
    CASE("calq_range(o NULL)") BAD("o is NULL", calq_range(x, 4, NULL, "l", &rr, e));
    CASE("calq_range(out NULL)") BAD("out is NULL", calq_range(x, 4, &ro, "l", NULL, e));

    float w[8] = {1, -2, 3, -4, 5, -6, 7, -8}, sw[2] = {0.1f, 0.2f};
    calq_tensor wt = {CALQ_DTYPE_FLOAT32, 4, {2, 4, 1, 1}, w};
    int ow[2];
    CASE("calq_arq_opts_init(NULL)") calq_arq_opts_init(NULL);
    CASE("calq_arq_num_scales(w NULL)") EXPECT(calq_arq_num_scales(NULL, CALQ_WEIGHTS_CONV, 1, NULL) == -1);
    CASE("calq_arq_num_scales(absurd layout)") EXPECT(calq_arq_num_scales(&wt, (calq_weight_layout)99, 1, NULL) == -1);
    CASE("calq_arq_quantize(w NULL)")
    BAD("w is NULL", calq_arq_quantize(NULL, CALQ_WEIGHTS_CONV, 1, NULL, "l", sw, ow, NULL, NULL, e));
    CASE("calq_arq_quantize(scale_w NULL)")
    BAD("scale_w is NULL", calq_arq_quantize(&wt, CALQ_WEIGHTS_CONV, 1, NULL, "l", NULL, ow, NULL, NULL, e));
    CASE("calq_arq_quantize(offset_w NULL)")
    BAD("offset_w is NULL", calq_arq_quantize(&wt, CALQ_WEIGHTS_CONV, 1, NULL, "l", sw, NULL, NULL, NULL, e));
    CASE("calq_arq_quantize(absurd layout)")
    BAD("layout", calq_arq_quantize(&wt, (calq_weight_layout)99, 1, NULL, "l", sw, ow, NULL, NULL, e));

    float deq[5] = {0}, bias[2] = {1, 2};
    int32_t bq[2];
    CASE("calq_deq_scale(scale_w NULL)") calq_deq_scale(0.5f, NULL, 2, 2, deq);
    CASE("calq_deq_scale(deq NULL)") calq_deq_scale(0.5f, sw, 2, 2, NULL);
    CASE("calq_deq_scale(n_scale_w 2, n 5: would read past scale_w)")
    {
        float *heap_sw = malloc(2 * sizeof *heap_sw); /* on the heap, so ASan sees a read past it */
        if (heap_sw) {
            heap_sw[0] = heap_sw[1] = 0.25f;
            deq[4] = 7;
            calq_deq_scale(0.5f, heap_sw, 2, 5, deq);
            EXPECT(deq[4] == 7); /* nothing written */
            free(heap_sw);
        }
    }
    CASE("calq_quant_bias(bias NULL)") BAD("bias is NULL", calq_quant_bias(NULL, 2, 0.5f, sw, 2, "l", bq, e));
    CASE("calq_quant_bias(scale_w NULL)") BAD("scale_w is NULL", calq_quant_bias(bias, 2, 0.5f, NULL, 2, "l", bq, e));
    CASE("calq_quant_bias(bias_q NULL)") BAD("bias_q is NULL", calq_quant_bias(bias, 2, 0.5f, sw, 2, "l", NULL, e));
    CASE("calq_quant_bias(n -1)") BAD("n is -1", calq_quant_bias(bias, -1, 0.5f, sw, 1, "l", bq, e));
    CASE("calq_deq_scale_unpack(every output NULL)") calq_deq_scale_unpack(UINT64_MAX, NULL, NULL, NULL);
    CASE("calq_deq_scale_pack(shift_n, offset_w out of range)")
    {
        /* the fields are 8 bits wide: the rest of the values is cut, never spilled into other bits */
        uint64_t v = calq_deq_scale_pack(1.0f, UINT_MAX, INT_MIN);
        unsigned shift = 0;
        int off = 0;
        calq_deq_scale_unpack(v, NULL, &shift, &off);
        EXPECT(shift == 0xFF && off == 0 && (v >> 48) == 0);
    }
    CASE("calq_deq_scale_s19(NaN)") EXPECT(isnan(calq_deq_scale_s19(NAN)));

    int shift[2];
    CASE("calq_shift_bit_create(out NULL)") BAD("out is NULL", calq_shift_bit_create(2, sw, 0, NULL, e));
    CASE("calq_shift_bit_create(deq_scale NULL)")
    {
        calq_shift_bit *s = NULL;
        BAD("deq_scale is NULL", calq_shift_bit_create(2, NULL, 0, &s, e));
    }
    CASE("calq_shift_bit_create(n_channels -1)")
    {
        calq_shift_bit *s = NULL;
        BAD("-1", calq_shift_bit_create(-1, sw, 0, &s, e));
    }
    CASE("calq_shift_bit_feed(s NULL)") BAD("s is NULL", calq_shift_bit_feed(NULL, w, 1, 4, e));
    CASE("calq_shift_bit_feed(y NULL)") BAD("y is NULL", calq_shift_bit_feed(SB(), NULL, 1, 4, e));
    CASE("calq_shift_bit_feed(outer -1)") BAD("outer is -1", calq_shift_bit_feed(SB(), w, -1, 4, e));
    CASE("calq_shift_bit_result(s NULL)") BAD("s is NULL", calq_shift_bit_result(NULL, shift, e));
    CASE("calq_shift_bit_result(shift_bit NULL)") BAD("shift_bit is NULL", calq_shift_bit_result(SB(), NULL, e));
    CASE("calq_shift_bit_free(NULL)") calq_shift_bit_free(NULL);
}

static void cases_save(void)
{
    calq_save_format fmts[1] = {CALQ_SAVE_QDQ};
    calq_save_skip skips[1];
    int n_skipped = 0;
    CASE("calq_save_model(m NULL)") BAD("m is NULL", calq_save_model(NULL, record, CALQ_SAVE_QDQ, prefix, e));
    CASE("calq_save_model(record NULL)") BAD("record is NULL", calq_save_model(M(), NULL, CALQ_SAVE_QDQ, prefix, e));
    CASE("calq_save_model(prefix NULL)") BAD("prefix is NULL", calq_save_model(M(), record, CALQ_SAVE_QDQ, NULL, e));
    CASE("calq_save_model_config(m NULL)")
    BAD("m is NULL", calq_save_model_config(NULL, record, NULL, CALQ_SAVE_QDQ, prefix, e));
    CASE("calq_save_model_config(record NULL)")
    BAD("record is NULL", calq_save_model_config(M(), NULL, NULL, CALQ_SAVE_QDQ, prefix, e));
    CASE("calq_save_model_config(prefix NULL)")
    BAD("prefix is NULL", calq_save_model_config(M(), record, NULL, CALQ_SAVE_QDQ, NULL, e));
    CASE("calq_save_models(m NULL)") BAD("m is NULL", calq_save_models(NULL, record, NULL, fmts, 1, prefix, e));
    CASE("calq_save_models(fmts NULL, n_fmts 1)")
    BAD("fmts is NULL", calq_save_models(M(), record, NULL, NULL, 1, prefix, e));
    CASE("calq_save_models(record NULL)") BAD("record is NULL", calq_save_models(M(), NULL, NULL, fmts, 1, prefix, e));
    CASE("calq_save_models(prefix NULL)") BAD("prefix is NULL", calq_save_models(M(), record, NULL, fmts, 1, NULL, e));
    CASE("calq_save_models_available(fmts NULL)")
    BAD("fmts is NULL", calq_save_models_available(M(), record, NULL, NULL, 1, prefix, skips, &n_skipped, e));
    CASE("calq_save_models_available(prefix NULL)")
    BAD("prefix is NULL", calq_save_models_available(M(), record, NULL, fmts, 1, NULL, skips, &n_skipped, e));
    CASE("calq_save_models_staged(prefix NULL)")
    BAD("prefix is NULL", calq_save_models_staged(O(), M(), record, NULL, fmts, 1, NULL, NULL, NULL, e));
    CASE("calq_save_models_staged(skipped NULL, n_skipped given)")
    BAD("skipped", calq_save_models_staged(O(), M(), record, NULL, fmts, 1, prefix, NULL, &n_skipped, e));
    CASE("calq_save_models(n_fmts -1)") BAD("n_fmts is -1", calq_save_models(M(), record, NULL, fmts, -1, prefix, e));
    CASE("calq_save_models_available(m NULL)")
    BAD("m is NULL", calq_save_models_available(NULL, record, NULL, fmts, 1, prefix, skips, &n_skipped, e));
    CASE("calq_save_models_available(skipped NULL)")
    BAD("skipped is NULL", calq_save_models_available(M(), record, NULL, fmts, 1, prefix, NULL, &n_skipped, e));
    CASE("calq_save_models_available(n_skipped NULL)")
    BAD("n_skipped is NULL", calq_save_models_available(M(), record, NULL, fmts, 1, prefix, skips, NULL, e));
    CASE("calq_save_models_available(n_fmts -1)")
    BAD("n_fmts is -1", calq_save_models_available(M(), record, NULL, fmts, -1, prefix, skips, &n_skipped, e));
    CASE("calq_save_models_staged(outputs NULL)")
    BAD("outputs is NULL", calq_save_models_staged(NULL, M(), record, NULL, fmts, 1, prefix, NULL, NULL, e));
    CASE("calq_save_models_staged(m NULL)")
    BAD("m is NULL", calq_save_models_staged(O(), NULL, record, NULL, fmts, 1, prefix, NULL, NULL, e));
    CASE("calq_save_models_staged(record NULL)")
    BAD("record is NULL", calq_save_models_staged(O(), M(), NULL, NULL, fmts, 1, prefix, NULL, NULL, e));
    CASE("calq_save_models_staged(fmts NULL)")
    BAD("fmts is NULL", calq_save_models_staged(O(), M(), record, NULL, NULL, 1, prefix, NULL, NULL, e));
    CASE("calq_outputs_drop_models(outputs NULL)")
    BAD("outputs is NULL", calq_outputs_drop_models(NULL, M(), fmts, 1, e));
    CASE("calq_outputs_drop_models(m NULL)") BAD("m is NULL", calq_outputs_drop_models(O(), NULL, fmts, 1, e));
    CASE("calq_outputs_drop_models(fmts NULL)") BAD("fmts is NULL", calq_outputs_drop_models(O(), M(), NULL, 1, e));
    CASE("calq_outputs_drop_models(n_fmts -1)") BAD("n_fmts is -1", calq_outputs_drop_models(O(), M(), fmts, -1, e));
}

static void cases_compare_fallback(void)
{
    calq_compare_result *res = NULL;
    calq_compare_result empty;
    memset(&empty, 0, sizeof empty);
    CASE("calq_compare_opts_init(NULL)") calq_compare_opts_init(NULL);
    CASE("calq_compare(fm NULL)") BAD("fm is NULL", calq_compare(NULL, M(), D(), NULL, NULL, NULL, &res, e));
    CASE("calq_compare(qm NULL)") BAD("qm is NULL", calq_compare(M(), NULL, D(), NULL, NULL, NULL, &res, e));
    CASE("calq_compare(data NULL)") BAD("data is NULL", calq_compare(M(), M(), NULL, NULL, NULL, NULL, &res, e));
    CASE("calq_compare(out NULL)") BAD("out is NULL", calq_compare(M(), M(), D(), NULL, NULL, NULL, NULL, e));
    CASE("calq_compare_result_free(NULL)") calq_compare_result_free(NULL);
    CASE("calq_compare_worst_first(r NULL)")
    {
        int order[2] = {0};
        calq_compare_worst_first(NULL, order);
    }
    CASE("calq_compare_worst_first(order NULL)")
    {
        calq_compare_layer layers[2];
        memset(layers, 0, sizeof layers);
        calq_compare_result r = empty;
        r.n_layers = 2;
        r.layers = layers;
        calq_compare_worst_first(&r, NULL);
    }
    CASE("calq_compare_write_json(r NULL)") BAD("r is NULL", calq_compare_write_json(NULL, json, e));
    CASE("calq_compare_write_json(path NULL)") BAD("path is NULL", calq_compare_write_json(&empty, NULL, e));
    CASE("calq_compare_write_html(r NULL)") BAD("r is NULL", calq_compare_write_html(NULL, json, e));
    CASE("calq_compare_write_html(path NULL)") BAD("path is NULL", calq_compare_write_html(&empty, NULL, e));

    calq_fallback_result *fr = NULL;
    calq_fallback_opts fo;
    calq_fallback_opts_init(&fo);
    fo.evaluator = evaluator;
    CASE("calq_fallback_opts_init(NULL)") calq_fallback_opts_init(NULL);
    CASE("calq_fallback(m NULL)") BAD("m is NULL", calq_fallback(NULL, record, json, D(), &fo, &fr, e));
    CASE("calq_fallback(record NULL)") BAD("record is NULL", calq_fallback(M(), NULL, json, D(), &fo, &fr, e));
    CASE("calq_fallback(config NULL)") BAD("config is NULL", calq_fallback(M(), record, NULL, D(), &fo, &fr, e));
    CASE("calq_fallback(data NULL)") BAD("data is NULL", calq_fallback(M(), record, json, NULL, &fo, &fr, e));
    CASE("calq_fallback(out NULL)") BAD("out is NULL", calq_fallback(M(), record, json, D(), &fo, NULL, e));
    CASE("calq_fallback_result_free(NULL)") calq_fallback_result_free(NULL);
}

static void run_cases(void)
{
    cases_base();
    cases_model();
    cases_session();
    cases_images_config();
    cases_data();
    cases_outputs_calibrate();
    cases_numerics();
    cases_save();
    cases_compare_fallback();
}

/* Every function calq.h declares (each "CALQ_API ... name(") has at least one case above: a
 * function added to the header without one fails here. calq.h is read from the source tree
 * (ctest runs this test there, tests/more.cmake). */
static int check_every_function(void)
{
    FILE *f = fopen("include/calq.h", "r");
    if (!f) {
        perror("include/calq.h (run from the source tree)");
        return 1;
    }
    static char text[1 << 18];
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = 0;
    int missing = 0, n_functions = 0;
    for (const char *p = strstr(text, "\nCALQ_API "); p; p = strstr(p + 1, "\nCALQ_API ")) {
        const char *paren = strchr(p, '(');
        if (!paren) break;
        const char *end = paren, *start = paren;
        while (start > p &&
               (start[-1] == '_' || (start[-1] >= 'a' && start[-1] <= 'z') || (start[-1] >= '0' && start[-1] <= '9')))
            start--;
        char name[128];
        snprintf(name, sizeof name, "%.*s(", (int)(end - start), start);
        n_functions++;
        int found = 0;
        for (int k = 0; k < n_seen && k < MAX_CASES && !found; k++) found = strncmp(labels[k], name, strlen(name)) == 0;
        if (!found) {
            fprintf(stderr, "no case for %s...) (calq.h declares it)\n", name);
            missing++;
        }
    }
    if (n_functions < 100) {
        fprintf(stderr, "found only %d functions in include/calq.h\n", n_functions);
        return 1;
    }
    if (!missing) fprintf(stderr, "%d functions in include/calq.h, each with a case\n", n_functions);
    return missing;
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/calq_api_null_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(prefix, sizeof prefix, "%s/out", dir);
    snprintf(record, sizeof record, "%s/missing_record.txt", dir);
    snprintf(json, sizeof json, "%s/out.json", dir);

    listing = 1;
    run_cases();
    listing = 0;
    if (check_every_function() != 0) return 1;
    int n_cases = n_seen < MAX_CASES ? n_seen : MAX_CASES, crashed = 0, failed = 0;
    for (int k = 0; k < n_cases; k++) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 1;
        }
        if (pid == 0) {
            target = k;
            n_seen = 0;
            run_cases();
            fixtures_free();
            _exit(n_seen <= target ? EXIT_NO_CASE : failures ? EXIT_FAILED : 0);
        }
        int status = 0;
        if (waitpid(pid, &status, 0) != pid) {
            perror("waitpid");
            return 1;
        }
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) continue;
        if (WIFEXITED(status) && WEXITSTATUS(status) == EXIT_FAILED) {
            fprintf(stderr, "FAILED  %s\n", labels[k]);
            failed++;
        } else {
            /* a signal, or a sanitizer's report (ASan and UBSan exit with 1) */
            if (WIFSIGNALED(status))
                fprintf(stderr, "CRASHED %s (signal %d)\n", labels[k], WTERMSIG(status));
            else
                fprintf(stderr, "CRASHED %s (exit %d)\n", labels[k], WEXITSTATUS(status));
            crashed++;
        }
    }
    fprintf(stderr, "%d cases: %d passed, %d failed, %d crashed\n", n_cases, n_cases - failed - crashed, failed,
            crashed);
    remove(json); /* what a case may have written before the fix */
    rmdir(dir);
    return failed || crashed ? 1 : 0;
}
