/* Gemm and MatMul: hand-computed cases for the reference kernel, shape validation, the
 * oneDNN fast path against the reference, and bit-identity across thread counts, also with
 * oneDNN capped at AVX2 (whose jit gemm splits K across threads when left to itself). */
#include <math.h>
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exec/kernels/gemm_dnnl.h"
#include "exec/op.h"
#include "op_harness.h"

static void free_all(calq_tensor *t, int n)
{
    for (int i = 0; i < n; i++) calq_tensor_free_data(&t[i]);
}

static int same_bits(const calq_tensor *a, const calq_tensor *b)
{
    return calq__shape_equal(a->dims, a->ndim, b->dims, b->ndim) && a->dtype == b->dtype &&
           memcmp(a->data, b->data, calq__tensor_nbytes(a)) == 0;
}

static int expect_f32(const calq_tensor *t, const float *want, int64_t n, const char *what)
{
    int ok = calq_tensor_numel(t) == n;
    for (int64_t i = 0; ok && i < n; i++) {
        float v = ((const float *)t->data)[i];
        if (fabsf(v - want[i]) > 1e-5f * (1.0f + fabsf(want[i]))) {
            fprintf(stderr, "%s: element %lld is %.9g, want %.9g\n", what, (long long)i, v, want[i]);
            ok = 0;
        }
    }
    if (calq_tensor_numel(t) != n)
        fprintf(stderr, "%s: %lld elements, want %lld\n", what, (long long)calq_tensor_numel(t), (long long)n);
    return ok;
}

/* Whether prepare builds a fast-path state for this case (the harness would silently fall
 * back to the reference kernel otherwise). */
static int fast_path_taken_ex(op_case *oc, calq_tensor *in, int n_in, bool *packed)
{
    const calq_node *node = &oc->g->nodes[oc->node];
    const calq_op_def *d = calq__op_find("", node->op_type);
    calq_tensor out = {0}, *inp[4], *outp[1] = {&out};
    for (int i = 0; i < n_in; i++) inp[i] = &in[i];
    calq_error err = {0};
    calq_op_ctx ctx = {
        .node = node, .opset = node->opset, .n_in = n_in, .in = inp, .n_out = 1, .out = outp, .err = &err};
    for (int i = 0; i < n_in; i++) ctx.const_inputs |= 1u << i; /* as op_case_run runs it */
    if (d->infer(&ctx) != CALQ_OK || !d->prepare || d->prepare(&ctx) != CALQ_OK) return 0;
    int taken = ctx.state != NULL;
    if (packed) *packed = calq__mm_dnnl_packed(ctx.state);
    if (ctx.state) d->release(ctx.state);
    return taken;
}

static int fast_path_taken(op_case *oc, calq_tensor *in, int n_in)
{
    return fast_path_taken_ex(oc, in, n_in, NULL);
}

/* ---- hand-computed -------------------------------------------------------------------- */

static void test_gemm_hand(void)
{
    /* A = [[1,2,3],[4,5,6]], B = [[1,0],[0,1],[1,1]]: A*B = [[4,5],[10,11]]. */
    const float a[] = {1, 2, 3, 4, 5, 6}, at[] = {1, 4, 2, 5, 3, 6};
    const float b[] = {1, 0, 0, 1, 1, 1}, bt[] = {1, 0, 1, 0, 1, 1};
    const int64_t d23[] = {2, 3}, d32[] = {3, 2}, d22[] = {2, 2}, d2[] = {2}, d21[] = {2, 1}, d1[] = {1};
    for (int fast = 0; fast < 2; fast++) {
        for (int ta = 0; ta < 2; ta++) {
            for (int tb = 0; tb < 2; tb++) {
                /* Y = 0.5 * op(A) op(B) + 2 * C, C = [10, 20] broadcast over rows. */
                op_case oc = op_case_new("Gemm", 13, 3, 1);
                op_attr_int(&oc, "transA", ta);
                op_attr_int(&oc, "transB", tb);
                op_attr_float(&oc, "alpha", 0.5f);
                op_attr_float(&oc, "beta", 2.0f);
                const float cv[] = {10, 20};
                calq_tensor in[3] = {t_f32(ta ? at : a, 2, ta ? d32 : d23), t_f32(tb ? bt : b, 2, tb ? d23 : d32),
                                     t_f32(cv, 1, d2)},
                            out[1];
                EXPECT_OK(op_case_run(&oc, in, 3, out, 1, fast, &e_));
                const float want[] = {22, 42.5f, 25, 45.5f};
                char what[64];
                snprintf(what, sizeof what, "Gemm transA=%d transB=%d fast=%d", ta, tb, fast);
                EXPECT(expect_f32(&out[0], want, 4, what));
                EXPECT(out[0].ndim == 2 && out[0].dims[0] == 2 && out[0].dims[1] == 2);
                free_all(in, 3);
                free_all(out, 1);
                op_case_free(&oc);
            }
        }
        { /* C as a column [2,1], then as a scalar [1], then [2,2]; default alpha = beta = 1. */
            const float ccol[] = {100, 200}, cone[] = {7}, cfull[] = {1, 2, 3, 4};
            const float *cs[] = {ccol, cone, cfull};
            const int64_t *cd[] = {d21, d1, d22};
            int cn[] = {2, 1, 2};
            const float want[3][4] = {{104, 105, 210, 211}, {11, 12, 17, 18}, {5, 7, 13, 15}};
            for (int k = 0; k < 3; k++) {
                op_case oc = op_case_new("Gemm", 13, 3, 1);
                calq_tensor in[3] = {t_f32(a, 2, d23), t_f32(b, 2, d32), t_f32(cs[k], cn[k], cd[k])}, out[1];
                EXPECT_OK(op_case_run(&oc, in, 3, out, 1, fast, &e_));
                EXPECT(expect_f32(&out[0], want[k], 4, "Gemm broadcast C"));
                free_all(in, 3);
                free_all(out, 1);
                op_case_free(&oc);
            }
        }
        { /* No C (omitted optional input). */
            op_case oc = op_case_new("Gemm", 13, 3, 1);
            calq_tensor in[3] = {t_f32(a, 2, d23), t_f32(b, 2, d32), {0}}, out[1];
            EXPECT_OK(op_case_run(&oc, in, 3, out, 1, fast, &e_));
            const float want[] = {4, 5, 10, 11};
            EXPECT(expect_f32(&out[0], want, 4, "Gemm without C"));
            free_all(in, 3);
            free_all(out, 1);
            op_case_free(&oc);
        }
    }
}

static void test_matmul_vectors(void)
{
    const float a[] = {1, 2, 3, 4, 5, 6}, v[] = {1, -1, 2};
    const int64_t d23[] = {2, 3}, d32[] = {3, 2}, d3[] = {3};
    for (int fast = 0; fast < 2; fast++) {
        { /* [3] x [3,2] -> [2]: v * B with B = a viewed as 3x2 = [[1,2],[3,4],[5,6]]. */
            op_case oc = op_case_new("MatMul", 13, 2, 1);
            calq_tensor in[2] = {t_f32(v, 1, d3), t_f32(a, 2, d32)}, out[1];
            EXPECT_OK(op_case_run(&oc, in, 2, out, 1, fast, &e_));
            const float want[] = {8, 10};
            EXPECT(out[0].ndim == 1 && out[0].dims[0] == 2);
            EXPECT(expect_f32(&out[0], want, 2, "MatMul 1-D x 2-D"));
            free_all(in, 2);
            free_all(out, 1);
            op_case_free(&oc);
        }
        { /* [2,3] x [3] -> [2]. */
            op_case oc = op_case_new("MatMul", 13, 2, 1);
            calq_tensor in[2] = {t_f32(a, 2, d23), t_f32(v, 1, d3)}, out[1];
            EXPECT_OK(op_case_run(&oc, in, 2, out, 1, fast, &e_));
            const float want[] = {5, 11};
            EXPECT(out[0].ndim == 1 && out[0].dims[0] == 2);
            EXPECT(expect_f32(&out[0], want, 2, "MatMul 2-D x 1-D"));
            free_all(in, 2);
            free_all(out, 1);
            op_case_free(&oc);
        }
        { /* [3] x [3] -> scalar. */
            op_case oc = op_case_new("MatMul", 13, 2, 1);
            calq_tensor in[2] = {t_f32(v, 1, d3), t_f32(v, 1, d3)}, out[1];
            EXPECT_OK(op_case_run(&oc, in, 2, out, 1, fast, &e_));
            const float want[] = {6};
            EXPECT(out[0].ndim == 0);
            EXPECT(expect_f32(&out[0], want, 1, "MatMul 1-D x 1-D"));
            free_all(in, 2);
            free_all(out, 1);
            op_case_free(&oc);
        }
    }
}

/* [2,1,3,4] x [5,4,2] -> [2,5,3,2], against a direct loop written from the numpy rule. */
static void test_matmul_batched(void)
{
    const int64_t da[] = {2, 1, 3, 4}, db[] = {5, 4, 2};
    calq_tensor in[2] = {t_rand_f32(11, 4, da, -1, 1), t_rand_f32(12, 3, db, -1, 1)};
    const float *A = in[0].data, *B = in[1].data;
    float want[2 * 5 * 3 * 2];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 5; j++)
            for (int m = 0; m < 3; m++)
                for (int n = 0; n < 2; n++) {
                    double s = 0;
                    for (int k = 0; k < 4; k++) s += (double)A[(i * 3 + m) * 4 + k] * B[(j * 4 + k) * 2 + n];
                    want[((i * 5 + j) * 3 + m) * 2 + n] = (float)s;
                }
    for (int fast = 0; fast < 2; fast++) {
        op_case oc = op_case_new("MatMul", 13, 2, 1);
        calq_tensor out[1];
        EXPECT_OK(op_case_run(&oc, in, 2, out, 1, fast, &e_));
        EXPECT(out[0].ndim == 4 && out[0].dims[0] == 2 && out[0].dims[1] == 5 && out[0].dims[2] == 3 &&
               out[0].dims[3] == 2);
        EXPECT(expect_f32(&out[0], want, 60, fast ? "batched MatMul (fast)" : "batched MatMul"));
        if (fast) EXPECT(fast_path_taken(&oc, in, 2));
        free_all(out, 1);
        op_case_free(&oc);
    }
    free_all(in, 2);
}

static void test_other_dtypes(void)
{
    { /* float64 Gemm with transB. */
        op_case oc = op_case_new("Gemm", 13, 2, 1);
        op_attr_int(&oc, "transB", 1);
        calq_tensor in[2] = {{0}, {0}}, out[1];
        const double a[] = {1, 2, 3, 4}, b[] = {1, 1, 0, 1};
        for (int i = 0; i < 2; i++) {
            in[i].dtype = CALQ_DTYPE_FLOAT64;
            in[i].ndim = 2;
            in[i].dims[0] = in[i].dims[1] = 2;
            in[i].data = malloc(sizeof a);
        }
        memcpy(in[0].data, a, sizeof a);
        memcpy(in[1].data, b, sizeof b);
        EXPECT_OK(op_case_run(&oc, in, 2, out, 1, 1, &e_));
        const double *y = out[0].data;
        EXPECT(out[0].dtype == CALQ_DTYPE_FLOAT64 && y[0] == 3 && y[1] == 2 && y[2] == 7 && y[3] == 4);
        free_all(in, 2);
        free_all(out, 1);
        op_case_free(&oc);
    }
    { /* int64 MatMul. */
        op_case oc = op_case_new("MatMul", 13, 2, 1);
        const int64_t a[] = {1, 2, 3, 4, 5, 6}, b[] = {1, -1, 2}, d23[] = {2, 3}, d3[] = {3};
        calq_tensor in[2] = {t_i64(a, 2, d23), t_i64(b, 1, d3)}, out[1];
        EXPECT_OK(op_case_run(&oc, in, 2, out, 1, 0, &e_));
        const int64_t *y = out[0].data;
        EXPECT(out[0].dtype == CALQ_DTYPE_INT64 && out[0].ndim == 1 && y[0] == 5 && y[1] == 11);
        free_all(in, 2);
        free_all(out, 1);
        op_case_free(&oc);
    }
}

/* ---- shape validation ------------------------------------------------------------------- */

static void expect_shape_error(const char *op, int n_in, const calq_tensor *in, const char *needle)
{
    op_case oc = op_case_new(op, 13, n_in, 1);
    calq_tensor out[1] = {{0}};
    calq_error err = {0};
    calq_status s = op_case_run(&oc, in, n_in, out, 1, 0, &err);
    EXPECT(s == CALQ_ERR_SHAPE);
    if (!strstr(err.message, needle)) {
        fprintf(stderr, "error message '%s' lacks '%s'\n", err.message, needle);
        failures++;
    }
    calq_tensor_free_data(&out[0]);
    op_case_free(&oc);
}

static void test_shape_errors(void)
{
    const int64_t d23[] = {2, 3}, d45[] = {4, 5}, d234[] = {2, 3, 4}, d345[] = {3, 4, 5}, d35[] = {3, 5}, d3[] = {3};
    calq_tensor in[3] = {t_rand_f32(1, 2, d23, 0, 1), t_rand_f32(2, 2, d45, 0, 1)};
    expect_shape_error("MatMul", 2, in, "A is 2x3, B is 4x5: inner dims 3 and 4 differ");
    expect_shape_error("Gemm", 2, in, "inner dims 3 and 4 differ");
    free_all(in, 2);

    in[0] = t_rand_f32(1, 3, d234, 0, 1);
    in[1] = t_rand_f32(2, 3, d345, 0, 1);
    expect_shape_error("MatMul", 2, in, "batch dims do not broadcast");
    free_all(in, 2);

    in[0] = t_rand_f32(1, 2, d23, 0, 1);
    in[1] = t_rand_f32(2, 2, d35, 0, 1);
    in[2] = t_rand_f32(3, 1, d3, 0, 1);
    expect_shape_error("Gemm", 3, in, "C is 3, which does not broadcast to MxN = 2x5");
    free_all(in, 3);
}

/* ---- fast vs reference, thread-count identity ------------------------------------------- */

typedef struct mm_case {
    const char *op;
    int na, nb;
    int64_t a[4], b[4];
    int ta, tb, with_c;
    int64_t c[2];
    int nc;
    float alpha, beta;
} mm_case;

static const mm_case cases[] = {
    {"MatMul", 2, 2, {1, 1024}, {1024, 1000}, 0, 0, 0, {0}, 0, 1, 1},
    {"MatMul", 2, 2, {8, 256}, {256, 10}, 0, 0, 0, {0}, 0, 1, 1},
    {"MatMul", 3, 2, {3, 17, 33}, {33, 9}, 0, 0, 0, {0}, 0, 1, 1},
    {"MatMul", 4, 3, {2, 1, 37, 64}, {5, 64, 129}, 0, 0, 0, {0}, 0, 1, 1},
    /* B broadcast over A's contiguous batches: one [42, 40] product (Swin's Linear on [B, H, W, C]) */
    {"MatMul", 4, 2, {2, 3, 7, 40}, {40, 50}, 0, 0, 0, {0}, 0, 1, 1},
    {"MatMul", 2, 2, {300, 513}, {513, 200}, 0, 0, 0, {0}, 0, 1, 1},
    {"MatMul", 2, 2, {4, 60000}, {60000, 3}, 0, 0, 0, {0}, 0, 1, 1},
    {"Gemm", 2, 2, {1, 1024}, {1000, 1024}, 0, 1, 1, {1000}, 1, 1, 1},
    {"Gemm", 2, 2, {300, 64}, {300, 130}, 1, 0, 1, {64, 1}, 2, 0.25f, 0.5f},
    {"Gemm", 2, 2, {513, 77}, {200, 513}, 1, 1, 1, {77, 200}, 2, -1.5f, 2.0f},
    {"Gemm", 2, 2, {16, 4096}, {4096, 512}, 0, 0, 0, {0}, 0, 2.0f, 1},
};

static op_case case_op(const mm_case *k)
{
    op_case oc = op_case_new(k->op, 13, k->with_c ? 3 : 2, 1);
    if (strcmp(k->op, "Gemm") == 0) {
        op_attr_int(&oc, "transA", k->ta);
        op_attr_int(&oc, "transB", k->tb);
        op_attr_float(&oc, "alpha", k->alpha);
        op_attr_float(&oc, "beta", k->beta);
    }
    return oc;
}

/* With constant B broadcast over the batch (every case here but the one whose B has its own
 * batch), AVX-512's brgemm matmul takes B packed once (gemm_dnnl.h); checked on such machines,
 * bit 0 of the result per case. */
static unsigned test_fast_vs_ref(void)
{
    unsigned packed_cases = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const mm_case *k = &cases[i];
        int n_in = k->with_c ? 3 : 2;
        calq_tensor in[3] = {t_rand_f32(100 + (unsigned)i, k->na, k->a, -1, 1),
                             t_rand_f32(200 + (unsigned)i, k->nb, k->b, -1, 1)};
        if (k->with_c) in[2] = t_rand_f32(300 + (unsigned)i, k->nc, k->c, -1, 1);
        op_case oc = case_op(k);
        calq_tensor ref[1], fast[1], ref2[1], fast2[1], fast3[1];
        char what[96];
        snprintf(what, sizeof what, "%s case %zu fast vs ref", k->op, i);
        int prev = omp_get_max_threads();
        omp_set_num_threads(2);
        EXPECT_OK(op_case_run(&oc, in, n_in, ref, 1, 0, &e_));
        EXPECT_OK(op_case_run(&oc, in, n_in, fast, 1, 1, &e_));
        bool packed = false;
        EXPECT(fast_path_taken_ex(&oc, in, n_in, &packed));
        if (packed) packed_cases |= 1u << i;
        /* 1e-4 relative plus an absolute term scaled by sqrt(K): float32 accumulation error
         * of values near zero that result from cancelling sums. */
        EXPECT(t_close(&fast[0], &ref[0], 1e-4, 1e-5 * 64, what));
        omp_set_num_threads(1);
        EXPECT_OK(op_case_run(&oc, in, n_in, ref2, 1, 0, &e_));
        EXPECT_OK(op_case_run(&oc, in, n_in, fast2, 1, 1, &e_));
        omp_set_num_threads(3);
        EXPECT_OK(op_case_run(&oc, in, n_in, fast3, 1, 1, &e_));
        omp_set_num_threads(prev);
        if (!same_bits(&ref[0], &ref2[0])) {
            fprintf(stderr, "%s case %zu: reference differs between 1 and 2 threads\n", k->op, i);
            failures++;
        }
        if (!same_bits(&fast[0], &fast2[0]) || !same_bits(&fast[0], &fast3[0])) {
            fprintf(stderr, "%s case %zu: fast path differs between 1, 2 and 3 threads\n", k->op, i);
            failures++;
        }
        free_all(in, n_in);
        free_all(ref, 1);
        free_all(fast, 1);
        free_all(ref2, 1);
        free_all(fast2, 1);
        free_all(fast3, 1);
        op_case_free(&oc);
    }
    return packed_cases;
}

/* B changes between runs of one prepared state (B may be a graph input, not a constant). */
static void test_fresh_weights(void)
{
    const int64_t da[] = {4, 64}, db[] = {64, 48};
    op_case oc = op_case_new("MatMul", 13, 2, 1);
    const calq_node *node = &oc.g->nodes[oc.node];
    const calq_op_def *d = calq__op_find("", "MatMul");
    calq_tensor in[2] = {t_rand_f32(1, 2, da, -1, 1), t_rand_f32(2, 2, db, -1, 1)}, out = {0}, ref[1];
    calq_tensor *inp[2] = {&in[0], &in[1]}, *outp[1] = {&out};
    calq_error err = {0};
    calq_op_ctx ctx = {.node = node, .opset = 13, .n_in = 2, .in = inp, .n_out = 1, .out = outp, .err = &err};
    EXPECT(d->infer(&ctx) == CALQ_OK && calq__tensor_alloc(&out, &err) == CALQ_OK);
    EXPECT(d->prepare(&ctx) == CALQ_OK && ctx.state);
    for (int run = 0; run < 2 && ctx.state; run++) {
        if (run) {
            calq_tensor_free_data(&in[1]);
            in[1] = t_rand_f32(3, 2, db, -1, 1);
        }
        EXPECT(d->run_fast(&ctx) == CALQ_OK);
        EXPECT_OK(op_case_run(&oc, in, 2, ref, 1, 0, &e_));
        EXPECT(t_close(&out, &ref[0], 1e-4, 1e-5, run ? "second run, new B" : "first run"));
        free_all(ref, 1);
    }
    if (ctx.state) d->release(ctx.state);
    calq_tensor_free_data(&out);
    free_all(in, 2);
    op_case_free(&oc);
}

/* The fast-path checks with oneDNN capped at AVX2, in a child process: the ISA cap must be
 * set before oneDNN's first use, and the parent runs with the machine's full ISA. */
static int run_avx2_child(void)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
        if (dnnl_set_max_cpu_isa(dnnl_cpu_isa_avx2) != dnnl_success) _exit(1);
        (void)test_fast_vs_ref();
        _exit(failures != 0);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "fast path with oneDNN capped at AVX2: failed\n");
        return 1;
    }
    return 0;
}

int main(void)
{
    /* Before anything starts OpenMP threads or oneDNN in this process. */
    failures += run_avx2_child();
    test_gemm_hand();
    test_matmul_vectors();
    test_matmul_batched();
    test_other_dtypes();
    test_shape_errors();
    const unsigned packed = test_fast_vs_ref();
    const unsigned avx512 = (unsigned)dnnl_cpu_isa_avx512_core;
    if (((unsigned)dnnl_get_effective_cpu_isa() & avx512) == avx512) {
        /* the batch-1 products (a classifier head, either B layout) and the collapsed batch */
        const unsigned want = 1u << 0 | 1u << 4 | 1u << 7;
        if ((packed & want) != want || (packed & (1u << 3))) {
            fprintf(stderr, "packed B in cases 0x%x, expected 0x%x and not case 3\n", packed, want);
            failures++;
        }
    }
    test_fresh_weights();
    if (failures)
        fprintf(stderr, "%d failure(s)\n", failures);
    else
        printf("test_kernels_gemm: all passed\n");
    return failures != 0;
}
