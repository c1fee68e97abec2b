/* LSTM / GRU / RNN beyond the ONNX node tests (which peers/ops_vs_ort.py extends against
 * onnxruntime): the same bits for any thread count when batch rows run in parallel, rows past
 * their sequence length give zeros and keep their state, and bad lengths or shapes fail with a
 * message. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expect.h"
#include "op_harness.h"

enum { T = 40, B = 5, I = 16, H = 32 };

static void free_all(calq_tensor *t, int n)
{
    for (int i = 0; i < n; i++) calq_tensor_free_data(&t[i]);
}

/* X, W, R, B, sequence_lens (int64) for a forward LSTM. */
static void lstm_inputs(calq_tensor *in, const int64_t *lens)
{
    const int64_t dx[3] = {T, B, I}, dw[3] = {1, 4 * H, I}, dr[3] = {1, 4 * H, H}, db[2] = {1, 8 * H}, dl[1] = {B};
    in[0] = t_rand_f32(1, 3, dx, -1, 1);
    in[1] = t_rand_f32(2, 3, dw, -0.3f, 0.3f);
    in[2] = t_rand_f32(3, 3, dr, -0.3f, 0.3f);
    in[3] = t_rand_f32(4, 2, db, -0.1f, 0.1f);
    in[4] = t_i64(lens, 1, dl);
}

static calq_status run_lstm(const calq_tensor *in, calq_tensor *out, calq_error *err)
{
    op_case oc = op_case_new("LSTM", 14, 5, 3);
    op_attr_int(&oc, "hidden_size", H);
    calq_status s = op_case_run(&oc, in, 5, out, 3, 0, err);
    op_case_free(&oc);
    return s;
}

static void threads_and_lengths(void)
{
    const int64_t lens[B] = {T, 3, 0, T - 1, 17};
    calq_tensor in[5], out[2][3] = {{{0}}};
    lstm_inputs(in, lens);
    calq_error err = {0};
    for (int t = 0; t < 2; t++) {
        omp_set_num_threads(t + 1);
        EXPECT_STATUS(run_lstm(in, out[t], &err), CALQ_OK, &err, NULL);
    }
    omp_set_num_threads(2);
    for (int k = 0; k < 3; k++) EXPECT(memcmp(out[0][k].data, out[1][k].data, calq__tensor_nbytes(&out[0][k])) == 0);
    /* Y [T, 1, B, H]: zero at and past each row's length; Y_h = Y at the row's last step. */
    const float *y = out[0][0].data, *yh = out[0][1].data;
    for (int b = 0; b < B; b++) {
        int zeros_ok = 1, last_ok = 1;
        for (int t = (int)lens[b]; t < T; t++)
            for (int j = 0; j < H; j++) zeros_ok &= y[(t * B + b) * H + j] == 0.0f;
        for (int j = 0; j < H && lens[b] > 0; j++) last_ok &= yh[b * H + j] == y[((lens[b] - 1) * B + b) * H + j];
        for (int j = 0; j < H && lens[b] == 0; j++) last_ok &= yh[b * H + j] == 0.0f; /* initial state */
        EXPECT(zeros_ok);
        EXPECT(last_ok);
    }
    free_all(out[0], 3);
    free_all(out[1], 3);
    /* A length past the sequence fails naming the row. */
    ((int64_t *)in[4].data)[3] = T + 1;
    calq_tensor bad[3] = {{0}};
    EXPECT_STATUS(run_lstm(in, bad, &err), CALQ_ERR_DATA, &err, "sequence_lens[3] = 41 is outside [0, 40]");
    free_all(bad, 3);
    free_all(in, 5);
}

static void bad_shapes(void)
{
    const int64_t dx[3] = {T, B, I}, dw[3] = {1, 3 * H, I}, dr[3] = {1, 3 * H, H + 1};
    calq_tensor in[3] = {t_rand_f32(1, 3, dx, -1, 1), t_rand_f32(2, 3, dw, -1, 1), t_rand_f32(3, 3, dr, -1, 1)};
    calq_tensor out[2] = {{0}};
    calq_error err = {0};
    op_case oc = op_case_new("GRU", 14, 3, 2);
    op_attr_int(&oc, "hidden_size", H);
    EXPECT_STATUS(op_case_run(&oc, in, 3, out, 2, 0, &err), CALQ_ERR_SHAPE, &err, "R (input 2) has shape 1x96x33");
    op_case_free(&oc);
    oc = op_case_new("GRU", 14, 3, 2);
    op_attr_int(&oc, "hidden_size", H);
    const char *acts[2] = {"Sigmoid", "Cube"};
    calq_attr *a = calq__node_add_attr(oc.g, oc.node, "activations", CALQ_ATTR_STRINGS);
    a->n = 2;
    a->strings = calloc(3, sizeof(char *));
    for (int i = 0; i < 2; i++) a->strings[i] = strdup(acts[i]);
    calq_tensor_free_data(&in[2]);
    const int64_t dr2[3] = {1, 3 * H, H};
    in[2] = t_rand_f32(3, 3, dr2, -1, 1);
    EXPECT_STATUS(op_case_run(&oc, in, 3, out, 2, 0, &err), CALQ_ERR_UNSUPPORTED, &err, "activation 'Cube'");
    op_case_free(&oc);
    free_all(out, 2);
    free_all(in, 3);
}

/* The fast path (constant weights: transposed once, sgemm input projection, vector
 * activations) against the reference, and the same bits for 1, 2 and 3 threads: LSTM, GRU (both
 * linear_before_reset values) and RNN, forward and bidirectional, both layouts, with sequence
 * lengths, and an LSTM with clip (scalar activations in the fast path). */
static void fast_path(void)
{
    static const struct {
        const char *op;
        int gates;
        const char *dir;
        int layout, lbr;
        float clip;
    } cases[] = {
        {"LSTM", 4, "forward", 0, 0, 0},       {"LSTM", 4, "bidirectional", 0, 0, 0},
        {"LSTM", 4, "bidirectional", 1, 0, 0}, {"LSTM", 4, "reverse", 0, 0, 2.0f},
        {"GRU", 3, "bidirectional", 0, 0, 0},  {"GRU", 3, "forward", 0, 1, 0},
        {"GRU", 3, "forward", 1, 1, 0},        {"RNN", 1, "bidirectional", 0, 0, 0},
    };
    const int64_t lens[B] = {T, 3, 0, T - 1, 17};
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const int nd = cases[ci].dir[0] == 'b' ? 2 : 1, G = cases[ci].gates;
        const int64_t dx0[3] = {T, B, I}, dx1[3] = {B, T, I}, dw[3] = {nd, G * H, I}, dr[3] = {nd, G * H, H},
                      db[2] = {nd, 2 * G * H}, dl[1] = {B};
        calq_tensor in[5];
        in[0] = t_rand_f32(11, 3, cases[ci].layout ? dx1 : dx0, -1, 1);
        in[1] = t_rand_f32(12, 3, dw, -0.3f, 0.3f);
        in[2] = t_rand_f32(13, 3, dr, -0.3f, 0.3f);
        in[3] = t_rand_f32(14, 2, db, -0.1f, 0.1f);
        in[4] = t_i64(lens, 1, dl);
        calq_tensor ref[2] = {{0}}, fast[3][2] = {{{0}}};
        calq_error err = {0};
        char what[96];
        snprintf(what, sizeof what, "%s %s layout %d lbr %d clip %g: fast vs reference", cases[ci].op, cases[ci].dir,
                 cases[ci].layout, cases[ci].lbr, (double)cases[ci].clip);
        for (int run = 0; run < 4; run++) {
            op_case oc = op_case_new(cases[ci].op, 14, 5, 2);
            op_attr_int(&oc, "hidden_size", H);
            op_attr_str(&oc, "direction", cases[ci].dir);
            if (cases[ci].layout) op_attr_int(&oc, "layout", 1);
            if (cases[ci].lbr) op_attr_int(&oc, "linear_before_reset", 1);
            if (cases[ci].clip > 0) op_attr_float(&oc, "clip", cases[ci].clip);
            bool took = false;
            omp_set_num_threads(run == 0 ? 2 : run);
            EXPECT_STATUS(op_case_run_ex(&oc, in, 5, run == 0 ? ref : fast[run - 1], 2, run > 0, &took, &err), CALQ_OK,
                          &err, NULL);
            if (run > 0) EXPECT(took);
            op_case_free(&oc);
        }
        omp_set_num_threads(2);
        for (int k = 0; k < 2; k++) {
            EXPECT(t_close(&fast[0][k], &ref[k], 1e-4, 1e-5, what));
            EXPECT(memcmp(fast[0][k].data, fast[1][k].data, calq__tensor_nbytes(&ref[k])) == 0);
            EXPECT(memcmp(fast[0][k].data, fast[2][k].data, calq__tensor_nbytes(&ref[k])) == 0);
        }
        free_all(ref, 2);
        for (int r = 0; r < 3; r++) free_all(fast[r], 2);
        free_all(in, 5);
    }
}

int main(void)
{
    threads_and_lengths();
    bad_shapes();
    fast_path();
    printf("test_kernels_rnn: %d failure(s)\n", failures + failures);
    return failures + failures != 0;
}
