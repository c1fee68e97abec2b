/* IFMR's SIMD loss kernels (AVX2, AVX-512: those this CPU has) against the scalar _ref kernel on
 * real activations: the input of every quantizable layer of UltraFace (ONNX), MTCNN's PNet
 * (Caffe) and FastestDet (ONNX, from the zoo) on one photo each. For every tensor (double lanes)
 * and every eighth one (AMCT's float sums too): all 60 candidates' sums equal the _ref kernel's bit
 * for bit (not only the winner's), and the streamed factors (scale, offset, index, loss) with
 * each kernel set at 1 and 2 threads equal those of the _ref sums (amct-reference.md §3.4-3.6).
 * A NaN is refused the same way whatever the kernels. Synthetic adversarial inputs (ties, tiny
 * and huge ranges, 1-element batches) are in test_quant_stream. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "quant/quant.h"

#include "expect.h"
#include "fixtures.h"

typedef struct gathered {
    const char *name;
    float *x;
    size_t n;
} gathered;

typedef struct gather_ctx {
    gathered *t;
    int n;
} gather_ctx;

static int gather(void *user, const char *name, const calq_tensor *t)
{
    gather_ctx *c = user;
    for (int i = 0; i < c->n; i++) {
        if (strcmp(c->t[i].name, name) != 0) continue;
        size_t add = (size_t)calq_tensor_numel(t);
        float *p = realloc(c->t[i].x, (c->t[i].n + add) * sizeof(float));
        if (!p) return 1;
        memcpy(p + c->t[i].n, t->data, add * sizeof(float));
        c->t[i].x = p;
        c->t[i].n += add;
    }
    return 0;
}

static uint64_t rs = 12345;
static uint64_t next64(void)
{
    uint64_t z = (rs += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static calq_status stream_run(const float *x, size_t n, const calq_ifmr_opts *o, calq__isa isa, calq_ifmr_result *r,
                              calq_error *err)
{
    calq_ifmr_stream *s = NULL;
    calq_status st = calq_ifmr_stream_create(o, 0, "t", &s, err);
    if (st != CALQ_OK) return st;
    calq__ifmr_stream_set_isa(s, isa);
    int done = 0;
    while (st == CALQ_OK && !done) {
        for (size_t j = 0; j < n && st == CALQ_OK; j += 40000)
            st = calq_ifmr_stream_feed(s, x + j, n - j < 40000 ? n - j : 40000, err);
        if (st == CALQ_OK) st = calq_ifmr_stream_end_pass(s, &done, err);
    }
    if (st == CALQ_OK) st = calq_ifmr_stream_result(s, r, err);
    calq_ifmr_stream_free(s);
    return st;
}

static int same_result(const calq_ifmr_result *a, const calq_ifmr_result *b)
{
    return memcmp(&a->scale, &b->scale, sizeof a->scale) == 0 && a->offset == b->offset &&
           a->best_index == b->best_index && memcmp(&a->best_loss, &b->best_loss, sizeof a->best_loss) == 0;
}

static int n_tensors, n_sums_equal, n_sums, n_results_equal, n_results;

/* One tensor: the grid of the stream's percentile values, the _ref sums of every legal candidate,
 * each SIMD kernel's sums over random splits, and the streams' factors. */
static void check_tensor(const char *model, const gathered *g, int amct)
{
    calq_error err = {0};
    calq_ifmr_opts o;
    calq_ifmr_opts_init(&o);
    o.amct_float_loss = amct;
    o.n_threads = 1;
    calq_ifmr_result base;
    if (stream_run(g->x, g->n, &o, CALQ__ISA_C, &base, &err) != CALQ_OK) {
        /* a tensor IFMR refuses (e.g. all candidates illegal) must be refused by every kernel set */
        for (int isa = CALQ__ISA_AVX2; isa <= CALQ__ISA_AVX512; isa++) {
            calq_error e2 = {0};
            calq_ifmr_result r;
            if (!calq__ifmr_isa_supported((calq__isa)isa)) continue;
            EXPECT(stream_run(g->x, g->n, &o, (calq__isa)isa, &r, &e2) == err.status);
        }
        return;
    }
    unsigned n_cand = 0;
    EXPECT(calq__ifmr_check_opts(&o, "t", &n_cand, &err) == CALQ_OK);
    calq__ifmr_stats st = {.count = g->n, .kth_max = base.max_init, .kth_min = base.min_init};
    calq__ifmr_cand *cand = calloc(n_cand, sizeof *cand);
    calq__ifmr_acc *ref = calloc(n_cand, sizeof *ref), *got = calloc(n_cand, sizeof *got);
    unsigned *legal = calloc(n_cand, sizeof *legal), n_legal = 0;
    float mx = 0, mn = 0;
    EXPECT(calq__ifmr_grid(&st, &o, n_cand, "t", cand, &mx, &mn, &err) == CALQ_OK);
    for (unsigned i = 0; i < n_cand; i++)
        if (cand[i].rule == CALQ__SCALE_OK) {
            legal[n_legal++] = i;
            calq__ifmr_loss_ref(g->x, g->n, 0, &cand[i], amct, (float)g->n, &ref[i]);
        }
    calq_ifmr_result want;
    EXPECT(calq__ifmr_select(&st, &o, n_cand, cand, ref, mx, mn, "t", &want, &err) == CALQ_OK);
    n_results++;
    n_results_equal += same_result(&want, &base);
    EXPECT(same_result(&want, &base));
    for (int isa = CALQ__ISA_AVX2; isa <= CALQ__ISA_AVX512; isa++) {
        if (!calq__ifmr_isa_supported((calq__isa)isa)) continue;
        memset(got, 0, n_cand * sizeof *got);
        for (size_t j = 0; j < g->n;) {
            size_t m = 1 + next64() % 30000;
            if (m > g->n - j) m = g->n - j;
            calq__ifmr_losses((calq__isa)isa, g->x + j, m, j, cand, legal, n_legal, amct, (float)g->n, got);
            j += m;
        }
        int bad = 0;
        for (unsigned k = 0; k < n_legal; k++) bad += memcmp(&ref[legal[k]], &got[legal[k]], sizeof *ref) != 0;
        n_sums += (int)n_legal;
        n_sums_equal += (int)n_legal - bad;
        if (bad)
            fprintf(stderr, "%s, %s (%zu elements, %s sums): %s: %d of %u candidate sums differ from _ref\n", model,
                    g->name, g->n, amct ? "float" : "double", calq__isa_name((calq__isa)isa), bad, n_legal);
        EXPECT(bad == 0);
        for (int threads = 1; threads <= 2; threads++) {
            calq_ifmr_result r;
            o.n_threads = threads;
            EXPECT(stream_run(g->x, g->n, &o, (calq__isa)isa, &r, &err) == CALQ_OK);
            n_results++;
            n_results_equal += same_result(&want, &r);
            if (!same_result(&want, &r))
                fprintf(stderr, "%s, %s: %s, %d threads: scale %.9g offset %d index %d, _ref %.9g %d %d\n", model,
                        g->name, calq__isa_name((calq__isa)isa), threads, (double)r.scale, r.offset, r.best_index,
                        (double)want.scale, want.offset, want.best_index);
            EXPECT(same_result(&want, &r));
        }
    }
    free(cand);
    free(ref);
    free(got);
    free(legal);
}

/* The inputs of every quantizable layer of m on one photo, checked; returns 0 when skipped. */
static int run_model(const char *label, calq_model *m, int h, int w, const char *photo, float mean, float std)
{
    calq_error err = {0};
    calq_value_info in;
    calq_model_input_info(m, 0, &in);
    int64_t dims[4] = {1, 3, h, w};
    EXPECT_STATUS(calq_model_set_input_shape(m, in.name, dims, 4, &err), CALQ_OK, &err, NULL);
    int nn = calq_model_num_nodes(m);
    gather_ctx gc = {calloc((size_t)nn + 1, sizeof(gathered)), 0};
    const char **names = calloc((size_t)nn + 1, sizeof *names);
    for (int i = 0; i < nn; i++) {
        calq_node_info ni;
        calq_model_node_info(m, i, &ni);
        if (!ni.quantizable) continue;
        const char *t = calq_model_node_input(m, i, 0);
        int k = 0;
        while (k < gc.n && strcmp(gc.t[k].name, t) != 0) k++;
        if (k == gc.n) names[gc.n] = gc.t[gc.n].name = t, gc.n++;
    }
    calq_image_opts io;
    calq_image_opts_init(&io);
    io.width = w;
    io.height = h;
    for (int c = 0; c < 3; c++) io.mean[c] = mean, io.std[c] = std;
    calq_session *s = NULL;
    calq_tensor x = {0};
    EXPECT_STATUS(calq_session_create(m, NULL, &s, &err), CALQ_OK, &err, NULL);
    EXPECT_STATUS(calq_session_set_observer(s, gather, &gc, names, gc.n, &err), CALQ_OK, &err, NULL);
    EXPECT_STATUS(calq_image_load(photo, &io, &x, &err), CALQ_OK, &err, NULL);
    EXPECT_STATUS(calq_session_run(s, &x, 1, &err), CALQ_OK, &err, NULL);
    calq_tensor_free_data(&x);
    calq_session_free(s);
    size_t total = 0;
    for (int k = 0; k < gc.n; k++) {
        EXPECT(gc.t[k].n > 0);
        total += gc.t[k].n;
        /* AMCT's float sums on every eighth tensor (their kernels are the slower ones to check) */
        for (int amct = 0; amct < (k % 8 ? 1 : 2); amct++)
            if (gc.t[k].n) check_tensor(label, &gc.t[k], amct);
        n_tensors++;
        free(gc.t[k].x);
    }
    printf("%s: %d layer inputs, %zu elements\n", label, gc.n, total);
    free(gc.t);
    free(names);
    return 1;
}

/* A NaN is refused by the statistics pass, before any loss kernel, with the same message. */
static void test_nan(void)
{
    enum { N = 5000 };
    float *x = malloc(N * sizeof *x);
    for (int i = 0; i < N; i++) x[i] = (float)(i % 97) * 0.25f;
    x[1234] = NAN;
    calq_ifmr_opts o;
    calq_ifmr_opts_init(&o);
    char first[sizeof((calq_error *)0)->message] = "";
    for (int isa = CALQ__ISA_C; isa <= CALQ__ISA_AVX512; isa++) {
        if (!calq__ifmr_isa_supported((calq__isa)isa)) continue;
        calq_error err = {0};
        calq_ifmr_result r;
        EXPECT_STATUS(stream_run(x, N, &o, (calq__isa)isa, &r, &err), CALQ_ERR_NOT_SUPPORT, &err,
                      "IFMR calibration data has nan value.");
        if (!first[0]) memcpy(first, err.message, sizeof first);
        EXPECT(strcmp(first, err.message) == 0);
    }
    free(x);
}

int main(void)
{
    char a[1024], b[1024], photo[1024], photo2[1024];
    fx_shared_path(photo, sizeof photo, "data/faces/mtcnn_test1.jpg");
    printf("kernels here: best %s (avx2 %s, avx512 %s)\n", calq__isa_name(calq__ifmr_isa_best()),
           calq__ifmr_isa_supported(CALQ__ISA_AVX2) ? "yes" : "no",
           calq__ifmr_isa_supported(CALQ__ISA_AVX512) ? "yes" : "no");
    test_nan();
    if (!NEED_FILE(photo)) return TEST_RESULT();
    calq_error err = {0};
    calq_model *m = NULL;
    /* a model that is there must load: only a missing file is a skip */
    fx_shared_path(a, sizeof a, FX_ULTRAFACE);
    if (NEED_FILE(a)) {
        EXPECT_STATUS(calq_model_load_onnx(a, &m, &err), CALQ_OK, &err, NULL);
        if (m) run_model("UltraFace slim-320", m, 240, 320, photo, 127.0f, 128.0f);
        calq_model_free(m);
        m = NULL;
    }
    fx_shared_path(a, sizeof a, "models/mtcnn/det1.prototxt");
    fx_shared_path(b, sizeof b, "models/mtcnn/det1.caffemodel");
    if (NEED_FILE(a) && NEED_FILE(b)) {
        EXPECT_STATUS(calq_model_load_caffe(a, b, &m, &err), CALQ_OK, &err, NULL);
        if (m) run_model("MTCNN PNet (det1)", m, 120, 160, photo, 127.5f, 128.0f);
        calq_model_free(m);
        m = NULL;
    }
    fx_shared_path(a, sizeof a, "models/zoo/fastestdet_352/FastestDet.onnx");
    fx_shared_path(photo2, sizeof photo2, "models/zoo/fastestdet_352/images/fastestdet_data_0.jpg");
    if (NEED_FILE(a) && NEED_FILE(photo2)) {
        EXPECT_STATUS(calq_model_load_onnx(a, &m, &err), CALQ_OK, &err, NULL);
        if (m) run_model("FastestDet 352", m, 352, 352, photo2, 0.0f, 255.0f);
        calq_model_free(m);
    }
    printf("%d tensors (an eighth also in float mode): %d of %d SIMD candidate sums equal _ref bit for bit; %d of %d "
           "streamed "
           "factors (C, AVX2, AVX-512 kernels, 1 and 2 threads) equal those of the _ref sums\n",
           n_tensors, n_sums_equal, n_sums, n_results_equal, n_results);
    EXPECT(n_sums_equal == n_sums && n_results_equal == n_results);
    EXPECT(skipped || n_sums > 0); /* every model ran: there were sums to compare */
    return TEST_RESULT();
}
