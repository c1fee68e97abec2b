/* The oneDNN fast paths of the integer layers (src/exec/kernels/int_dnnl.c, int_epilogue.c) equal
 * their reference kernels bit for bit, with 1 and 2 threads: QLinearConv (grouped, depthwise,
 * strided, padded, dilated, 1-D; uint8 and int8 inputs with zero points at the ends of their
 * range; int8 weights per tensor and per channel, uint8 weights with zero point 128; with and
 * without bias; int8 input with zero point -128 recoded to uint8; uint8 / int8 outputs; power-of-two scales that put
 * many values on rounding ties), calq.AscendConv, QGemm (transA / transB, c as a vector, matrix or scalar, per-column b
 * zero points, float and requantized outputs), QLinearMatMul (batched a), MatMulIntegerToFloat (bias, per-column
 * scales), calq.AscendGemm and calq.AscendMatMul; inputs that would saturate oneDNN's pre-VNNI int16 pairs; biases
 * beyond the range where acc + bias is known to fit int32, and one that overflows (same error in both); weights whose
 * centered values do not fit int8 decline the fast path and still give the reference's result; QuantizeLinear and
 * DequantizeLinear (per tensor and per axis, uint8 / int8 / int32, rounding ties, NaN, infinities). */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/tensor.h"
#include "exec/kernels/int_dnnl.h"
#include "op_harness.h"

static uint64_t rng = 88172645463325252ull;

static int64_t rnd(int64_t lo, int64_t hi)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return lo + (int64_t)(rng % (uint64_t)(hi - lo + 1));
}

static calq_tensor tn(calq_dtype dt, int ndim, const int64_t *dims)
{
    calq_tensor t = {.dtype = dt, .ndim = ndim};
    if (ndim) memcpy(t.dims, dims, sizeof(int64_t) * (size_t)ndim);
    calq__tensor_alloc(&t, NULL);
    return t;
}

/* Random integers in [lo, hi] as dtype dt. */
static calq_tensor t_rand(calq_dtype dt, int ndim, const int64_t *dims, int64_t lo, int64_t hi)
{
    calq_tensor t = tn(dt, ndim, dims);
    for (int64_t i = 0; i < calq_tensor_numel(&t); i++) calq__tensor_set_i64(&t, i, rnd(lo, hi));
    return t;
}

static calq_tensor t_fill(calq_dtype dt, int ndim, const int64_t *dims, int64_t v)
{
    return t_rand(dt, ndim, dims, v, v);
}

static calq_tensor t_scalar_f(float v)
{
    calq_tensor t = tn(CALQ_DTYPE_FLOAT32, 0, NULL);
    *(float *)t.data = v;
    return t;
}

static calq_tensor t_scalar_i(calq_dtype dt, int64_t v)
{
    calq_tensor t = tn(dt, 0, NULL);
    calq__tensor_set_i64(&t, 0, v);
    return t;
}

static calq_tensor t_scale_1(float v)
{
    return t_scalar_f(v);
}

/* n scales: powers of two (many rounding ties) or arbitrary values in [lo, hi). */
static calq_tensor t_scales(int64_t n, bool pow2, float lo, float hi)
{
    calq_tensor t = tn(CALQ_DTYPE_FLOAT32, 1, &n);
    for (int64_t i = 0; i < n; i++)
        ((float *)t.data)[i] =
            pow2 ? 1.0f / (float)(1 << rnd(3, 9)) : lo + (hi - lo) * (float)rnd(0, 1 << 20) / (float)(1 << 20);
    return t;
}

static int64_t q_lo(calq_dtype t)
{
    return t == CALQ_DTYPE_UINT8 ? 0 : -128;
}
static int64_t q_hi(calq_dtype t)
{
    return t == CALQ_DTYPE_UINT8 ? 255 : 127;
}

/* Runs the node with the reference kernel, then the fast one with 1 and 2 threads: same status,
 * same message, same bytes. want_fast: whether the fast path must be taken. */
static void ref_vs_fast_status(op_case *oc, calq_tensor *in, int n_in, bool want_fast, calq_status want,
                               const char *what)
{
    calq_tensor ref = {0}, fast = {0};
    calq_error e_ref = {0}, e_fast = {0};
    const calq_status s_ref = op_case_run_ex(oc, in, n_in, &ref, 1, 0, NULL, &e_ref);
    if (s_ref != want) {
        fprintf(stderr, "%s: the reference gives status %d (%s), expected %d\n", what, (int)s_ref, e_ref.message,
                (int)want);
        failures++;
    }
    for (int threads = 1; threads <= 2; threads++) {
        const int saved = omp_get_max_threads();
        omp_set_num_threads(threads);
        bool took = false;
        memset(&e_fast, 0, sizeof e_fast);
        const calq_status s_fast = op_case_run_ex(oc, in, n_in, &fast, 1, 1, &took, &e_fast);
        omp_set_num_threads(saved);
        if (took != want_fast) {
            fprintf(stderr, "%s (%d threads): fast path %s\n", what, threads, took ? "taken" : "declined");
            failures++;
        }
        if (s_fast != s_ref || strcmp(e_fast.message, e_ref.message) != 0) {
            fprintf(stderr, "%s (%d threads): status %d '%s', reference %d '%s'\n", what, threads, (int)s_fast,
                    e_fast.message, (int)s_ref, e_ref.message);
            failures++;
        } else if (s_ref == CALQ_OK) {
            const size_t nb = calq__tensor_nbytes(&ref);
            if (fast.dtype != ref.dtype || calq__tensor_nbytes(&fast) != nb || memcmp(fast.data, ref.data, nb) != 0) {
                int64_t i = 0, n = calq_tensor_numel(&ref);
                while (i < n && calq__tensor_get_f64(&fast, i) == calq__tensor_get_f64(&ref, i)) i++;
                fprintf(stderr, "%s (%d threads): differs at %lld: %.9g vs reference %.9g\n", what, threads,
                        (long long)i, i < n ? calq__tensor_get_f64(&fast, i) : 0.0,
                        i < n ? calq__tensor_get_f64(&ref, i) : 0.0);
                failures++;
            }
        }
        calq_tensor_free_data(&fast);
    }
    calq_tensor_free_data(&ref);
}

static void ref_vs_fast(op_case *oc, calq_tensor *in, int n_in, bool want_fast, const char *what)
{
    ref_vs_fast_status(oc, in, n_in, want_fast, CALQ_OK, what);
}

static void free_all(calq_tensor *t, int n)
{
    for (int i = 0; i < n; i++) calq_tensor_free_data(&t[i]);
}

/* ---- convolutions -------------------------------------------------------------------------- */

typedef struct conv_spec {
    const char *what;
    int64_t n, c, h, w, m, kh, kw; /* w = 0: a 1-D convolution over h */
    int64_t stride, pad, dil, group;
    calq_dtype xt;
    int64_t x_zp;
    calq_dtype wt; /* uint8 weights use zero point 128 */
    int w_zp;      /* int8 weights: 0 none, 1 per-tensor 0, 2 per-channel in {-1, 0, 1}, 3 a value that does not fit */
    bool per_channel; /* w_scale per output channel */
    int64_t bias;     /* 0: no bias; else |bias| <= this */
    calq_dtype yt;
    int64_t y_zp;
    bool pow2;     /* power-of-two scales: ties */
    bool saturate; /* x at its maximum, w at -128 */
    bool want_fast;
} conv_spec;

static void conv_attrs(op_case *oc, const conv_spec *p)
{
    const int nsp = p->w ? 2 : 1;
    const int64_t pads[4] = {p->pad, p->pad, p->pad, p->pad}, st[2] = {p->stride, p->stride}, dl[2] = {p->dil, p->dil};
    op_attr_ints(oc, "pads", pads, 2 * nsp);
    op_attr_ints(oc, "strides", st, nsp);
    op_attr_ints(oc, "dilations", dl, nsp);
    op_attr_int(oc, "group", p->group);
}

static void conv_operands(const conv_spec *p, calq_tensor *x, calq_tensor *w, calq_tensor *b)
{
    const int nd = p->w ? 4 : 3;
    const int64_t xd[4] = {p->n, p->c, p->h, p->w}, wd[4] = {p->m, p->c / p->group, p->kh, p->kw}, bd = p->m;
    const calq_dtype wt = p->wt;
    *x = p->saturate ? t_fill(p->xt, nd, xd, q_hi(p->xt)) : t_rand(p->xt, nd, xd, q_lo(p->xt), q_hi(p->xt));
    if (p->saturate)
        *w = t_fill(wt, nd, wd, wt == CALQ_DTYPE_UINT8 ? 0 : -128);
    else if (wt == CALQ_DTYPE_UINT8)
        *w = t_rand(wt, nd, wd, 0, 255);
    else
        *w = t_rand(wt, nd, wd, p->w_zp == 2 ? -127 : -128, p->w_zp == 2 ? 126 : 127);
    *b = p->bias ? t_rand(CALQ_DTYPE_INT32, 1, &bd, -p->bias, p->bias) : (calq_tensor){0};
}

static void qlinearconv_case(const conv_spec *p)
{
    calq_tensor x, w, b;
    conv_operands(p, &x, &w, &b);
    const int64_t m = p->m;
    calq_tensor wz = {0};
    if (p->wt == CALQ_DTYPE_UINT8)
        wz = t_scalar_i(CALQ_DTYPE_UINT8, 128);
    else if (p->w_zp == 1)
        wz = t_scalar_i(CALQ_DTYPE_INT8, 0);
    else if (p->w_zp == 2)
        wz = t_rand(CALQ_DTYPE_INT8, 1, &m, -1, 1);
    else if (p->w_zp == 3)
        wz = t_scalar_i(CALQ_DTYPE_INT8, 5); /* w = -128 - 5 does not fit int8 */
    calq_tensor in[9] = {x,
                         t_scalar_f(p->pow2 ? 0.5f : 0.0173f),
                         t_scalar_i(p->xt, p->x_zp),
                         w,
                         p->per_channel ? t_scales(m, p->pow2, 0.001f, 0.02f) : t_scales(1, p->pow2, 0.001f, 0.02f),
                         wz,
                         t_scalar_f(p->pow2 ? 0.25f : 0.0911f),
                         t_scalar_i(p->yt, p->y_zp),
                         b};
    if (p->per_channel) { /* per-channel scales are 1-D of M; per-tensor ones a scalar */
    } else {
        in[4].ndim = 0;
    }
    op_case oc = op_case_new("QLinearConv", 10, p->bias ? 9 : 8, 1);
    conv_attrs(&oc, p);
    ref_vs_fast(&oc, in, p->bias ? 9 : 8, p->want_fast, p->what);
    op_case_free(&oc);
    free_all(in, 9);
}

static void ascendconv_case(const conv_spec *p)
{
    calq_tensor x, w, b;
    conv_operands(p, &x, &w, &b);
    calq_tensor in[3] = {x, w, b};
    op_case oc = op_case_new("Conv", 13, p->bias ? 3 : 2, 1);
    conv_attrs(&oc, p);
    op_case_from_ascend_quant(&oc, 0, (float)p->x_zp);
    ref_vs_fast(&oc, in, p->bias ? 3 : 2, p->want_fast, p->what);
    op_case_free(&oc);
    free_all(in, 3);
}

static void test_conv(void)
{
    const calq_dtype U8 = CALQ_DTYPE_UINT8, S8 = CALQ_DTYPE_INT8;
    /* clang-format off */
    const conv_spec specs[] = {
        /* what                                n  c   h   w   m   kh kw st pd dl grp xt  x_zp wt  w_zp perch bias        yt  y_zp  pow2   sat    fast */
        {"3x3 pad 1, u8 zp 7, per-channel",    1, 16, 9,  11, 24, 3, 3, 1, 1, 1, 1,  U8, 7,    S8, 1, true,  5000,       U8, 3,    false, false, true},
        {"3x3 stride 2, s8 zp -5, ties",       2, 8,  12, 10, 16, 3, 3, 2, 1, 1, 1,  S8, -5,   S8, 0, true,  300,        S8, -2,   true,  false, true},
        {"1x1, u8 zp 0, no bias",              1, 32, 7,  7,  64, 1, 1, 1, 0, 1, 1,  U8, 0,    S8, 0, false, 0,          U8, 0,    false, false, true},
        {"grouped 4, pad 2, dilation 2",       1, 16, 10, 9,  8,  3, 3, 1, 2, 2, 4,  U8, 200,  S8, 1, true,  100000,     U8, 128,  false, false, true},
        {"depthwise 3x3 stride 2",             2, 24, 13, 13, 24, 3, 3, 2, 1, 1, 24, U8, 128,  S8, 1, true,  2000,       U8, 5,    true,  false, true},
        {"depthwise s8 zp 127",                1, 16, 8,  8,  16, 3, 3, 1, 1, 1, 16, S8, 127,  S8, 1, true,  0,          S8, 0,    false, false, true},
        {"u8 zp 255, 5x5 pad 2",               1, 3,  17, 15, 10, 5, 5, 1, 2, 1, 1,  U8, 255,  S8, 0, true,  9000,       U8, 255,  false, false, true},
        {"s8 zp -128, 7x7 stride 2 pad 3",     1, 3,  20, 20, 12, 7, 7, 2, 3, 1, 1,  S8, -128, S8, 1, false, 77,         S8, -128, true,  false, true},
        {"s8 zp -128 recoded to u8",           2, 16, 7,  6,  128,3, 3, 1, 1, 1, 1,  S8, -128, S8, 1, true,  3000,       U8, 0,    true,  false, true},
        {"s8 zp -128 recoded, saturating",     1, 32, 5,  5,  128,3, 3, 1, 1, 1, 1,  S8, -128, S8, 1, false, 0,          S8, 0,    false, true,  true},
        {"uint8 weights zp 128",               1, 8,  6,  6,  8,  3, 3, 1, 1, 1, 1,  U8, 3,    U8, 0, true,  10,         U8, 1,    true,  false, true},
        {"per-channel weight zero points",     1, 8,  6,  5,  8,  3, 3, 1, 0, 1, 2,  U8, 9,    S8, 2, true,  10,         U8, 1,    false, false, true},
        {"1-D",                                2, 6,  25, 0,  10, 5, 1, 2, 2, 1, 1,  U8, 30,   S8, 1, true,  500,        U8, 12,   false, false, true},
        {"saturating pairs",                   1, 64, 6,  6,  32, 3, 3, 1, 1, 1, 1,  U8, 0,    S8, 1, false, 0,          U8, 0,    true,  true,  true},
        {"bias beyond the safe range",         1, 4,  5,  5,  6,  3, 3, 1, 1, 1, 1,  U8, 1,    S8, 1, true,  2100000000, U8, 1,    true,  false, true},
        {"centered weights beyond int8",       1, 4,  5,  5,  6,  3, 3, 1, 1, 1, 1,  U8, 1,    S8, 3, false, 10,         U8, 1,    false, true,  false},
    };
    /* clang-format on */
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) qlinearconv_case(&specs[i]);
    /* calq.AscendConv: int8 in (offset = the AscendQuant's), int8 weights, int32 out */
    /* clang-format off */
    const conv_spec asc[] = {
        {"AscendConv 3x3",                     1, 16, 9,  8,  20, 3, 3, 1, 1, 1, 1,  S8, -3,   S8, 0, false, 100000,     S8, 0,    false, false, true},
        {"AscendConv depthwise stride 2",      2, 8,  11, 11, 8,  3, 3, 2, 1, 1, 8,  S8, 12,   S8, 0, false, 0,          S8, 0,    false, false, true},
        {"AscendConv offset -128, recoded",    1, 8,  6,  6,  160,3, 3, 1, 1, 1, 1,  S8, -128, S8, 0, false, 5000,       S8, 0,    false, false, true},
        {"AscendConv saturating",              1, 32, 5,  5,  8,  3, 3, 1, 1, 1, 1,  S8, -128, S8, 0, false, 0,          S8, 0,    false, true,  true},
        {"AscendConv bias beyond safe range",  1, 4,  4,  4,  4,  3, 3, 1, 1, 1, 1,  S8, 0,    S8, 0, false, 2147483000, S8, 0,    false, false, true},
    };
    /* clang-format on */
    for (size_t i = 0; i < sizeof asc / sizeof asc[0]; i++) ascendconv_case(&asc[i]);

    /* an exact sum beyond int32 through the bias: the same error from both */
    {
        conv_spec p = {"overflow", 1, 4, 4, 4, 4, 3, 3, 1, 1, 1, 1, S8, 0, S8, 0, false, 1, S8, 0, false, true, true};
        calq_tensor x, w, b;
        conv_operands(&p, &x, &w, &b); /* x = 127, w = -128: every sum is negative */
        for (int64_t i = 0; i < 4; i++) ((int32_t *)b.data)[i] = INT32_MIN + 1000;
        calq_tensor in[3] = {x, w, b};
        op_case oc = op_case_new("Conv", 13, 3, 1);
        conv_attrs(&oc, &p);
        op_case_from_ascend_quant(&oc, 0, 0.0f);
        calq_tensor y = {0};
        calq_error err = {0};
        EXPECT(op_case_run(&oc, in, 3, &y, 1, 1, &err) == CALQ_ERR_DATA && strstr(err.message, "int32 accumulator"));
        calq_tensor_free_data(&y);
        ref_vs_fast_status(&oc, in, 3, true, CALQ_ERR_DATA, "overflow");
        op_case_free(&oc);
        free_all(in, 3);
    }
}

/* ---- matrix products ----------------------------------------------------------------------- */

typedef struct mm_spec {
    const char *what;
    int64_t M, K, N;
    bool ta, tb;
    calq_dtype at;
    int64_t a_zp;
    int b_zp;     /* 0 none, 1 per tensor 0, 2 per column in {-2..2} */
    int bias;     /* QGemm c: 0 none, 1 [N], 2 [M, N], 3 scalar, 4 [M, 1] */
    bool y_scale; /* QGemm: requantized output */
    calq_dtype yt;
    bool per_col; /* b_scale per column */
    bool pow2;
} mm_spec;

static void qgemm_case(const mm_spec *p)
{
    const int64_t ad[2] = {p->ta ? p->K : p->M, p->ta ? p->M : p->K},
                  bd[2] = {p->tb ? p->N : p->K, p->tb ? p->K : p->N};
    const int64_t n = p->N, cd2[2] = {p->M, p->N}, cd_m1[2] = {p->M, 1};
    calq_tensor bz = {0}; /* as many values as b_scale */
    if (p->b_zp == 1) bz = p->per_col ? t_fill(CALQ_DTYPE_INT8, 1, &n, 0) : t_scalar_i(CALQ_DTYPE_INT8, 0);
    if (p->b_zp == 2) bz = t_rand(CALQ_DTYPE_INT8, 1, &n, -2, 2);
    calq_tensor c = {0};
    if (p->bias == 1) c = t_rand(CALQ_DTYPE_INT32, 1, &n, -40000, 40000);
    if (p->bias == 2) c = t_rand(CALQ_DTYPE_INT32, 2, cd2, -40000, 40000);
    if (p->bias == 3) c = t_rand(CALQ_DTYPE_INT32, 0, NULL, -40000, 40000);
    if (p->bias == 4) c = t_rand(CALQ_DTYPE_INT32, 2, cd_m1, -40000, 40000);
    calq_tensor in[9] = {t_rand(p->at, 2, ad, q_lo(p->at), q_hi(p->at)),
                         t_scalar_f(p->pow2 ? 0.5f : 0.031f),
                         t_scalar_i(p->at, p->a_zp),
                         t_rand(CALQ_DTYPE_INT8, 2, bd, -125, 125),
                         p->per_col ? t_scales(n, p->pow2, 0.002f, 0.01f) : t_scales(1, p->pow2, 0.002f, 0.01f),
                         bz,
                         c,
                         p->y_scale ? t_scalar_f(p->pow2 ? 0.125f : 0.07f) : (calq_tensor){0},
                         p->y_scale ? t_scalar_i(p->yt, 3) : (calq_tensor){0}};
    if (!p->per_col) in[4].ndim = 0;
    const int n_in = p->y_scale ? 9 : p->bias ? 7 : 6;
    op_case oc = op_case_new("QGemm", 1, n_in, 1);
    op_attr_int(&oc, "transA", p->ta);
    op_attr_int(&oc, "transB", p->tb);
    ref_vs_fast(&oc, in, n_in, true, p->what);
    op_case_free(&oc);
    free_all(in, 9);
}

static void test_mm(void)
{
    const calq_dtype U8 = CALQ_DTYPE_UINT8, S8 = CALQ_DTYPE_INT8;
    /* clang-format off */
    const mm_spec qg[] = {
        /* what                                 M  K    N     ta     tb     at  a_zp b_zp bias y_scale yt  per_col pow2 */
        {"QGemm transB, c [N], u8 out",         3, 70,  9,    false, true,  U8, 130, 1,   1,   true,   U8, true,   false},
        {"QGemm c [M, N], s8 a, ties",          5, 33,  17,   false, false, S8, -7,  0,   2,   true,   S8, false,  true},
        {"QGemm transA, float out, c scalar",   4, 64,  10,   true,  false, U8, 0,   2,   3,   false,  U8, true,   false},
        {"QGemm c [M, 1], batch-1 FC",          1, 512, 1000, false, true,  U8, 255, 1,   4,   false,  U8, true,   false},
        {"QGemm no c",                          2, 8,   3,    true,  true,  S8, 127, 0,   0,   true,   U8, false,  true},
    };
    /* clang-format on */
    for (size_t i = 0; i < sizeof qg / sizeof qg[0]; i++) qgemm_case(&qg[i]);

    /* QLinearMatMul: batched a [2, 3, K] by b [K, N]; MatMulIntegerToFloat with bias */
    for (int kind = 0; kind < 2; kind++) {
        const int64_t ad[3] = {2, 3, 40}, bd[2] = {40, 12}, n = 12;
        calq_tensor a = t_rand(U8, 3, ad, 0, 255), b = t_rand(S8, 2, bd, -127, 126);
        calq_tensor as = t_scalar_f(0.25f), az = t_scalar_i(U8, 100), bs = t_scales(n, true, 0, 0),
                    bz = t_rand(S8, 1, &n, -1, 1);
        if (kind == 0) {
            calq_tensor in[8] = {
                a, as, az, b, t_scalar_f(0.0625f), t_scalar_i(S8, 0), t_scalar_f(0.5f), t_scalar_i(U8, 10)};
            in[4].ndim = 0;
            op_case oc = op_case_new("QLinearMatMul", 10, 8, 1);
            ref_vs_fast(&oc, in, 8, true, "QLinearMatMul batched");
            op_case_free(&oc);
            free_all(in, 8);
            free_all((calq_tensor[]){bs, bz}, 2);
        } else {
            calq_tensor bias = tn(CALQ_DTYPE_FLOAT32, 1, &n);
            for (int64_t i = 0; i < n; i++) ((float *)bias.data)[i] = (float)rnd(-1000, 1000) / 64.0f;
            calq_tensor in[7] = {a, b, as, bs, az, bz, bias};
            op_case oc = op_case_new("MatMulIntegerToFloat", 1, 7, 1);
            ref_vs_fast(&oc, in, 7, true, "MatMulIntegerToFloat per-column, bias");
            op_case_free(&oc);
            free_all(in, 7);
        }
    }

    /* calq.AscendGemm / AscendMatMul */
    {
        const int64_t ad[2] = {4, 50}, bd[2] = {30, 50}, n = 30;
        calq_tensor in[3] = {t_rand(S8, 2, ad, -128, 127), t_rand(S8, 2, bd, -128, 127),
                             t_rand(CALQ_DTYPE_INT32, 1, &n, -100000, 100000)};
        op_case oc = op_case_new("Gemm", 13, 3, 1);
        op_attr_int(&oc, "transB", 1);
        op_case_from_ascend_quant(&oc, 0, -17.0f);
        ref_vs_fast(&oc, in, 3, true, "AscendGemm transB");
        op_case_free(&oc);
        free_all(in, 3);
    }
    {
        const int64_t ad[3] = {3, 5, 20}, bd[2] = {20, 7};
        calq_tensor in[2] = {t_rand(S8, 3, ad, -128, 127), t_rand(S8, 2, bd, -128, 127)};
        op_case oc = op_case_new("MatMul", 13, 2, 1);
        op_case_from_ascend_quant(&oc, 0, 100.0f);
        ref_vs_fast(&oc, in, 2, true, "AscendMatMul batched");
        op_case_free(&oc);
        free_all(in, 2);
    }
}

/* ---- QuantizeLinear / DequantizeLinear ---------------------------------------------------- */

static void test_qdq(void)
{
    const int64_t xd[4] = {2, 5, 7, 300}, nc = 5;
    for (int per_axis = 0; per_axis < 2; per_axis++)
        for (int u8 = 0; u8 < 2; u8++) {
            const calq_dtype qt = u8 ? CALQ_DTYPE_UINT8 : CALQ_DTYPE_INT8;
            calq_tensor x = tn(CALQ_DTYPE_FLOAT32, 4, xd);
            calq_tensor sc = per_axis ? t_scales(nc, true, 0, 0) : t_scale_1(0.0625f);
            calq_tensor zp = per_axis ? t_rand(qt, 1, &nc, q_lo(qt), q_hi(qt)) : t_scalar_i(qt, u8 ? 128 : -3);
            float *xv = x.data;
            for (int64_t i = 0; i < calq_tensor_numel(&x); i++) /* many exact ties k / 2 * scale, and extremes */
                xv[i] = (float)rnd(-4000, 4000) / 2.0f * 0.0625f;
            xv[3] = NAN;
            xv[5] = INFINITY;
            xv[7] = -INFINITY;
            xv[9] = 3e38f;
            xv[11] = -1e-30f;
            calq_tensor in[3] = {x, sc, zp};
            op_case oc = op_case_new("QuantizeLinear", 13, 3, 1);
            op_attr_int(&oc, "axis", 1);
            ref_vs_fast(&oc, in, 3, true, per_axis ? "QuantizeLinear per axis" : "QuantizeLinear");
            op_case_free(&oc);
            /* DequantizeLinear of the same factors on 8-bit data */
            calq_tensor q = t_rand(qt, 4, xd, q_lo(qt), q_hi(qt));
            calq_tensor din[3] = {q, sc, zp};
            oc = op_case_new("DequantizeLinear", 13, 3, 1);
            op_attr_int(&oc, "axis", 1);
            ref_vs_fast(&oc, din, 3, true, per_axis ? "DequantizeLinear per axis" : "DequantizeLinear");
            op_case_free(&oc);
            free_all(in, 3);
            calq_tensor_free_data(&q);
        }
    /* int32 (a bias) per axis 0, zero point 0 */
    const int64_t bd = 9;
    calq_tensor in[3] = {t_rand(CALQ_DTYPE_INT32, 1, &bd, -2000000000, 2000000000), t_scales(bd, false, 1e-6f, 1e-3f),
                         t_fill(CALQ_DTYPE_INT32, 1, &bd, 0)};
    op_case oc = op_case_new("DequantizeLinear", 13, 3, 1);
    op_attr_int(&oc, "axis", 0);
    ref_vs_fast(&oc, in, 3, true, "DequantizeLinear int32");
    op_case_free(&oc);
    free_all(in, 3);
}

int main(void)
{
    if (!calq__int_dnnl_exact()) {
        printf("test_kernels_int_fast: this CPU has no VNNI, the integer fast paths are off\n");
        return 77;
    }
    test_conv();
    test_mm();
    test_qdq();
    printf("test_kernels_int_fast: %d failure(s)\n", failures);
    return TEST_RESULT();
}
