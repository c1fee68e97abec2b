/* A program that uses calq the way an embedder does: only <calq.h>, linked against the
 * installed library (tests/install/install.sh builds it with pkg-config, statically, and with
 * find_package(calq)). It loads a model, feeds a photo (or zeros) to its one image input, runs it
 * and prints every output's shape, plus the largest value of output 0's last channel (for
 * UltraFace: the best face score, which must be high on a photo of a face).
 *
 * Usage: run_model MODEL.onnx [PHOTO] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <calq.h>

static int n_log_lines;

static void count_lines(void *user, calq_log_level level, const char *message)
{
    (void)user;
    (void)level;
    (void)message;
    n_log_lines++;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: run_model MODEL.onnx [PHOTO]\n");
        return 2;
    }
    if (calq_version() != CALQ_VERSION_HEX || strcmp(calq_version_string(), CALQ_VERSION_STRING) != 0) {
        fprintf(stderr, "header %s, library %s\n", CALQ_VERSION_STRING, calq_version_string());
        return 1;
    }
    calq_set_log(count_lines, NULL, CALQ_LOG_DEBUG);
    calq_error err = {0};
    calq_model *m = NULL;
    /* a failure is a status and a message, never an exit */
    if (calq_model_load_onnx("/nonexistent/model.onnx", &m, &err) != CALQ_ERR_IO || !err.message[0] || m) {
        fprintf(stderr, "loading a missing file: status %s (%s)\n", calq_status_name(err.status), err.message);
        return 1;
    }
    if (calq_model_load_onnx(argv[1], &m, &err) != CALQ_OK) {
        fprintf(stderr, "%s: %s\n", calq_status_name(err.status), err.message);
        return 1;
    }
    calq_value_info in;
    calq_model_input_info(m, 0, &in);
    calq_tensor x = {0};
    if (argc > 2) {
        calq_image_opts io;
        calq_image_opts_init(&io);
        io.width = (int)in.dims[3];
        io.height = (int)in.dims[2];
        io.mean[0] = io.mean[1] = io.mean[2] = 127.0f;
        io.std[0] = io.std[1] = io.std[2] = 128.0f;
        if (calq_image_load(argv[2], &io, &x, &err) != CALQ_OK) {
            fprintf(stderr, "%s\n", err.message);
            calq_model_free(m);
            return 1;
        }
    } else {
        x.dtype = CALQ_DTYPE_FLOAT32;
        x.ndim = in.ndim;
        memcpy(x.dims, in.dims, sizeof x.dims);
        x.data = calloc((size_t)calq_tensor_numel(&x), sizeof(float));
    }
    calq_session_opts so;
    calq_session_opts_init(&so);
    so.n_threads = 1;
    calq_session *s = NULL;
    int rc = 1;
    if (calq_session_create(m, &so, &s, &err) != CALQ_OK || calq_session_run(s, &x, 1, &err) != CALQ_OK) {
        fprintf(stderr, "%s: %s\n", calq_status_name(err.status), err.message);
        goto done;
    }
    for (int i = 0; i < calq_model_num_outputs(m); i++) {
        calq_value_info oi;
        const calq_tensor *t;
        calq_model_output_info(m, i, &oi);
        if (calq_session_output(s, i, &t) != CALQ_OK) goto done;
        printf("output %s:", oi.name);
        for (int d = 0; d < t->ndim; d++) printf("%s%lld", d ? "x" : " ", (long long)t->dims[d]);
        printf("\n");
        if (i == 0 && t->dtype == CALQ_DTYPE_FLOAT32) {
            const float *v = t->data;
            int64_t n = calq_tensor_numel(t), c = t->dims[t->ndim - 1];
            float best = -1e30f;
            for (int64_t k = c - 1; k < n; k += c) best = v[k] > best ? v[k] : best;
            printf("max %s[..., %lld]: %.4f\n", oi.name, (long long)(c - 1), best);
        }
    }
    printf("log lines: %d\n", n_log_lines);
    rc = 0;
done:
    calq_session_free(s);
    calq_tensor_free_data(&x);
    calq_model_free(m);
    calq_set_log(NULL, NULL, CALQ_LOG_WARNING);
    return rc;
}
