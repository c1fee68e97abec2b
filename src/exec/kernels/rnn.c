/* Recurrent layers: RNN, GRU and LSTM (opsets 7 and 14: every attribute — directions,
 * activations with their alpha / beta, clip, sequence_lens, initial states, LSTM peepholes and
 * input_forget, GRU linear_before_reset, layout).
 *
 * Layout of the work: W and R are transposed to [input, gates*hidden] and
 * [hidden, gates*hidden], so the input projection of every step (X W^T + biases) and the
 * recurrent product h R^T are sums over k of a scalar times a contiguous row, accumulated in
 * float in increasing k: the inner loop vectorises without reassociating anything, and the
 * result is the same on every run and for any thread count (threads split batch rows, which
 * are independent). The reference does this on every run; the fast path (constant W, R, B)
 * transposes them once in prepare, computes the input projection with oneDNN's sgemm on fixed
 * row tiles, runs the recurrence in a copy compiled for AVX-512 / AVX2 and, with the default
 * activations, applies them with the vector math library (libm's scalar tanhf / expf were half
 * of a CRNN text recogniser's bidirectional LSTM; the rest was transposing and 4-wide SSE
 * loops). Its results differ from the reference's by float rounding only.
 *
 * Gate order in W, R and B is ONNX's: RNN (i), GRU (z, r, h), LSTM (i, o, f, c); peepholes P are
 * (i, o, f). Steps at or past sequence_lens[b] write zeros to Y and leave the state unchanged;
 * the reverse direction runs each row from its own last valid step back to step 0. */
#include <ctype.h>
#include <math.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernels/dnnl_common.h"
#include "exec/kernels/elementwise_mvec.h"
#include "exec/kernels/values.h"
#include "exec/op.h"

typedef enum { K_RNN, K_GRU, K_LSTM } rnn_kind;

typedef enum {
    ACT_RELU,
    ACT_TANH,
    ACT_SIGMOID,
    ACT_AFFINE,
    ACT_LEAKYRELU,
    ACT_THRESHOLDEDRELU,
    ACT_SCALEDTANH,
    ACT_HARDSIGMOID,
    ACT_ELU,
    ACT_SOFTSIGN,
    ACT_SOFTPLUS
} act_kind;

typedef struct act {
    act_kind kind;
    float alpha, beta;
} act;

/* name, takes alpha, takes beta, default alpha, default beta (those of the ONNX operators). */
static const struct {
    const char *name;
    act_kind kind;
    bool has_alpha, has_beta;
    float alpha, beta;
} act_table[] = {
    {"relu", ACT_RELU, false, false, 0, 0},
    {"tanh", ACT_TANH, false, false, 0, 0},
    {"sigmoid", ACT_SIGMOID, false, false, 0, 0},
    {"affine", ACT_AFFINE, true, true, 1.0f, 0.0f},
    {"leakyrelu", ACT_LEAKYRELU, true, false, 0.01f, 0},
    {"thresholdedrelu", ACT_THRESHOLDEDRELU, true, false, 1.0f, 0},
    {"scaledtanh", ACT_SCALEDTANH, true, true, 1.0f, 1.0f},
    {"hardsigmoid", ACT_HARDSIGMOID, true, true, 0.2f, 0.5f},
    {"elu", ACT_ELU, true, false, 1.0f, 0},
    {"softsign", ACT_SOFTSIGN, false, false, 0, 0},
    {"softplus", ACT_SOFTPLUS, false, false, 0, 0},
};

static inline float act_apply(const act *a, float x)
{
    switch (a->kind) {
    case ACT_RELU: return x > 0 ? x : 0;
    case ACT_TANH: return tanhf(x);
    case ACT_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case ACT_AFFINE: return a->alpha * x + a->beta;
    case ACT_LEAKYRELU: return x >= 0 ? x : a->alpha * x;
    case ACT_THRESHOLDEDRELU: return x > a->alpha ? x : 0;
    case ACT_SCALEDTANH: return a->alpha * tanhf(a->beta * x);
    case ACT_HARDSIGMOID: {
        float v = a->alpha * x + a->beta;
        return v < 0 ? 0 : v > 1 ? 1 : v;
    }
    case ACT_ELU: return x >= 0 ? x : a->alpha * (expf(x) - 1.0f);
    case ACT_SOFTSIGN: return x / (1.0f + fabsf(x));
    case ACT_SOFTPLUS: return x > 20.0f ? x : log1pf(expf(x));
    }
    return x;
}

typedef struct rnn_cfg {
    rnn_kind kind;
    int G;                  /* gates: 1, 3, 4 */
    int n_act;              /* activations per direction: 1, 2, 3 */
    int64_t T, B, I, H, nd; /* steps, batch, input size, hidden size, directions */
    bool layout1, reverse_only;
    float clip;             /* 0: none */
    bool lbr, input_forget; /* GRU linear_before_reset, LSTM input_forget */
    act acts[2][3];         /* per direction */
} rnn_cfg;

static calq_status parse_activations(calq_op_ctx *c, rnn_cfg *p)
{
    static const act_kind dflt[3][3] = {{ACT_TANH}, {ACT_SIGMOID, ACT_TANH}, {ACT_SIGMOID, ACT_TANH, ACT_TANH}};
    const calq_attr *names = calq__attr(c->node, "activations");
    const float *alphas = NULL, *betas = NULL;
    int na = calq__attr_floats(c->node, "activation_alpha", &alphas),
        nb = calq__attr_floats(c->node, "activation_beta", &betas);
    int ia = 0, ib = 0, n = names && names->type == CALQ_ATTR_STRINGS ? names->n : 0;
    if (n && n != p->n_act && n != p->n_act * p->nd)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "%d activations given; %s takes %d per direction (%lld directions)", n,
                             c->node->op_type, p->n_act, (long long)p->nd);
    for (int d = 0; d < p->nd; d++)
        for (int k = 0; k < p->n_act; k++) {
            act *a = &p->acts[d][k];
            if (!n) {
                a->kind = dflt[p->n_act - 1][k];
                continue;
            }
            /* A single direction's list serves both directions (onnxruntime does the same). */
            const char *s = names->strings[(n == p->n_act ? 0 : d * p->n_act) + k];
            char low[32];
            size_t L = strlen(s);
            if (L >= sizeof low) L = sizeof low - 1;
            for (size_t i = 0; i < L; i++) low[i] = (char)tolower((unsigned char)s[i]);
            low[L] = 0;
            size_t t = 0;
            while (t < sizeof act_table / sizeof *act_table && strcmp(act_table[t].name, low) != 0) t++;
            if (t == sizeof act_table / sizeof *act_table)
                return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "activation '%s' is not one ONNX defines for %s", s,
                                     c->node->op_type);
            a->kind = act_table[t].kind;
            a->alpha = act_table[t].alpha;
            a->beta = act_table[t].beta;
            /* activation_alpha / beta are consumed in order by the activations that take them. */
            if (n == p->n_act && d > 0) {
                *a = p->acts[0][k];
                continue;
            }
            if (act_table[t].has_alpha && ia < na) a->alpha = alphas[ia++];
            if (act_table[t].has_beta && ib < nb) a->beta = betas[ib++];
        }
    return CALQ_OK;
}

static calq_status float_in(calq_op_ctx *c, int i, const char *what, int nd, const int64_t *dims)
{
    const calq_tensor *t = c->in[i];
    if (t->dtype != CALQ_DTYPE_FLOAT32)
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "%s (input %d) is %s; calq runs float32 recurrent layers", what,
                             i, calq_dtype_name(t->dtype));
    if (!calq__shape_equal(t->dims, t->ndim, dims, nd)) {
        char a[96], b[96];
        return calq__op_fail(c, CALQ_ERR_SHAPE, "%s (input %d) has shape %s; %s is expected", what, i,
                             calq__shape_str(t->dims, t->ndim, a, sizeof a), calq__shape_str(dims, nd, b, sizeof b));
    }
    return CALQ_OK;
}

static const calq_tensor *opt_in(const calq_op_ctx *c, int i)
{
    return i < c->n_in && c->in[i] && calq_tensor_numel(c->in[i]) > 0 ? c->in[i] : NULL;
}

static calq_status cfg_make(calq_op_ctx *c, rnn_cfg *p)
{
    memset(p, 0, sizeof *p);
    const char *op = c->node->op_type;
    p->kind = strcmp(op, "LSTM") == 0 ? K_LSTM : strcmp(op, "GRU") == 0 ? K_GRU : K_RNN;
    p->G = p->kind == K_LSTM ? 4 : p->kind == K_GRU ? 3 : 1;
    p->n_act = p->kind == K_LSTM ? 3 : p->kind == K_GRU ? 2 : 1;
    const calq_tensor *x = c->in[0], *w = c->in[1];
    p->layout1 = c->opset >= 14 && calq__attr_int(c->node, "layout", 0) != 0;
    if (x->ndim != 3) return calq__op_fail(c, CALQ_ERR_SHAPE, "X must be 3-D, not %d-D", x->ndim);
    p->T = p->layout1 ? x->dims[1] : x->dims[0];
    p->B = p->layout1 ? x->dims[0] : x->dims[1];
    p->I = x->dims[2];
    const char *dir = calq__attr_str(c->node, "direction", "forward");
    if (strcmp(dir, "forward") == 0 || strcmp(dir, "reverse") == 0) {
        p->nd = 1;
        p->reverse_only = dir[0] == 'r';
    } else if (strcmp(dir, "bidirectional") == 0) {
        p->nd = 2;
    } else {
        return calq__op_fail(c, CALQ_ERR_SHAPE, "direction '%s' is not forward, reverse or bidirectional", dir);
    }
    const calq_attr *hs = calq__attr(c->node, "hidden_size");
    if (w->ndim != 3) return calq__op_fail(c, CALQ_ERR_SHAPE, "W must be 3-D, not %d-D", w->ndim);
    p->H = hs && hs->type == CALQ_ATTR_INT ? hs->i : w->dims[1] / p->G;
    if (p->H <= 0 || p->H > (1 << 20) || p->I <= 0 || p->T < 0 || p->B < 0)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "hidden size %lld / input size %lld are invalid", (long long)p->H,
                             (long long)p->I);
    const int64_t GH = p->G * p->H;
    int64_t dw[3] = {p->nd, GH, p->I}, dr[3] = {p->nd, GH, p->H}, db[2] = {p->nd, 2 * GH}, dl[1] = {p->B};
    int64_t ds[3] = {p->nd, p->B, p->H}, dsl[3] = {p->B, p->nd, p->H}, dp[2] = {p->nd, 3 * p->H};
    if (x->dtype != CALQ_DTYPE_FLOAT32)
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "X is %s; calq runs float32 recurrent layers",
                             calq_dtype_name(x->dtype));
    CALQ_TRY(float_in(c, 1, "W", 3, dw));
    CALQ_TRY(float_in(c, 2, "R", 3, dr));
    if (opt_in(c, 3)) CALQ_TRY(float_in(c, 3, "B", 2, db));
    const calq_tensor *sl = opt_in(c, 4);
    if (sl && (!calq__dtype_is_int(sl->dtype) || !calq__shape_equal(sl->dims, sl->ndim, dl, 1)))
        return calq__op_fail(c, CALQ_ERR_SHAPE, "sequence_lens (input 4) must be an integer [%lld] tensor",
                             (long long)p->B);
    for (int i = 5; i < 7 && i < c->n_in; i++)
        if (opt_in(c, i) && (i == 5 || p->kind == K_LSTM))
            CALQ_TRY(float_in(c, i, i == 5 ? "initial_h" : "initial_c", 3, p->layout1 ? dsl : ds));
    if (p->kind == K_LSTM && opt_in(c, 7)) CALQ_TRY(float_in(c, 7, "P", 2, dp));
    const calq_attr *clip = calq__attr(c->node, "clip");
    if (clip && clip->type == CALQ_ATTR_FLOAT) {
        if (!(clip->f > 0)) return calq__op_fail(c, CALQ_ERR_SHAPE, "clip %g must be positive", clip->f);
        p->clip = clip->f;
    }
    p->lbr = p->kind == K_GRU && calq__attr_int(c->node, "linear_before_reset", 0) != 0;
    p->input_forget = p->kind == K_LSTM && calq__attr_int(c->node, "input_forget", 0) != 0;
    return parse_activations(c, p);
}

static calq_status rnn_infer(calq_op_ctx *c)
{
    rnn_cfg p;
    CALQ_TRY(cfg_make(c, &p));
    int64_t y[4] = {p.T, p.nd, p.B, p.H}, yl[4] = {p.B, p.T, p.nd, p.H};
    int64_t s[3] = {p.nd, p.B, p.H}, sl[3] = {p.B, p.nd, p.H};
    if (c->out[0]) calq__set_shape(c->out[0], CALQ_DTYPE_FLOAT32, p.layout1 ? yl : y, 4);
    for (int k = 1; k < c->n_out && k < 3; k++)
        if (c->out[k]) calq__set_shape(c->out[k], CALQ_DTYPE_FLOAT32, p.layout1 ? sl : s, 3);
    if (p.kind != K_LSTM && c->n_out > 2 && c->out[2])
        return calq__op_fail(c, CALQ_ERR_SHAPE, "%s has two outputs (Y, Y_h), not three", c->node->op_type);
    return CALQ_OK;
}

/* y[0..n) += a * row[0..n) */
static inline void axpy(float *restrict y, float a, const float *restrict row, int64_t n)
{
    for (int64_t j = 0; j < n; j++) y[j] += a * row[j];
}

static inline float clipped(const rnn_cfg *p, float v)
{
    if (p->clip > 0) v = v < -p->clip ? -p->clip : v > p->clip ? p->clip : v;
    return v;
}

/* Buffers of one direction: transposed weights, biases, the input projection of every step. */
typedef struct dir_work {
    float *wt, *rt; /* [I, GH], [H, GH] */
    float *bw, *br; /* [GH] each */
    float *xw;      /* [T*B, GH]: X W^T + bw (+ br, except GRU's h gate with linear_before_reset) */
} dir_work;

static void dir_free(dir_work *w)
{
    free(w->wt);
    free(w->rt);
    free(w->bw);
    free(w->br);
    free(w->xw);
}

/* The transposed weights and the biases of direction d (everything but xw). */
static calq_status dir_weights(calq_op_ctx *c, const rnn_cfg *p, int d, dir_work *w)
{
    const int64_t GH = p->G * p->H, I = p->I, H = p->H;
    memset(w, 0, sizeof *w);
    w->wt = malloc(sizeof(float) * (size_t)(I * GH));
    w->rt = malloc(sizeof(float) * (size_t)(H * GH));
    w->bw = calloc((size_t)GH, sizeof(float));
    w->br = calloc((size_t)GH, sizeof(float));
    if (!w->wt || !w->rt || !w->bw || !w->br) {
        dir_free(w);
        return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory for the weights of direction %d", d);
    }
    const float *W = (const float *)c->in[1]->data + d * GH * I, *R = (const float *)c->in[2]->data + d * GH * H;
    for (int64_t j = 0; j < GH; j++) {
        for (int64_t k = 0; k < I; k++) w->wt[k * GH + j] = W[j * I + k];
        for (int64_t k = 0; k < H; k++) w->rt[k * GH + j] = R[j * H + k];
    }
    const calq_tensor *B = opt_in(c, 3);
    if (B) {
        const float *b = (const float *)B->data + d * 2 * GH;
        memcpy(w->bw, b, sizeof(float) * (size_t)GH);
        memcpy(w->br, b + GH, sizeof(float) * (size_t)GH);
    }
    return CALQ_OK;
}

/* Rows of the input projection per single-threaded sgemm in the fast path: fixed, so the
 * arithmetic does not depend on the thread count. */
#define PROJ_TILE 16

/* w->xw: the input projection of every step. fast: oneDNN's sgemm on fixed row tiles (layout 0,
 * where the rows of X are the rows of the product) instead of the reference's row-by-row sums. */
static calq_status dir_project(calq_op_ctx *c, const rnn_cfg *p, int d, dir_work *w, bool fast)
{
    const int64_t GH = p->G * p->H, I = p->I, H = p->H;
    w->xw = malloc(sizeof(float) * (size_t)(p->T * p->B * GH + 1));
    float *bias = malloc(sizeof(float) * (size_t)GH);
    if (!w->xw || !bias) {
        free(bias);
        return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory for the input projection of direction %d", d);
    }
    for (int64_t j = 0; j < GH; j++) bias[j] = w->bw[j] + (p->lbr && j >= 2 * H ? 0.0f : w->br[j]);
    const float *X = c->in[0]->data;
    const int64_t rows = p->T * p->B;
    if (fast && !p->layout1) {
        const int64_t tiles = (rows + PROJ_TILE - 1) / PROJ_TILE;
        int failed = 0;
        /* a parallel region, inside which oneDNN's sgemm runs on the calling thread; for little
         * work a team of one, oneDNN told so too */
        const bool serial = rows * GH * I < CALQ_DNNL_SERIAL_WORK;
        const int prev = calq__dnnl_serial_begin(serial);
#pragma omp parallel for schedule(static) reduction(| : failed)
        for (int64_t t = 0; t < tiles; t++) {
            const int64_t r0 = t * PROJ_TILE, n = rows - r0 < PROJ_TILE ? rows - r0 : PROJ_TILE;
            float *y = w->xw + r0 * GH;
            for (int64_t r = 0; r < n; r++) memcpy(y + r * GH, bias, sizeof(float) * (size_t)GH);
            if (dnnl_sgemm('N', 'N', n, GH, I, 1.0f, X + r0 * I, I, w->wt, GH, 1.0f, y, GH) != dnnl_success) failed = 1;
        }
        calq__dnnl_serial_end(serial, prev);
        free(bias);
        return failed ? calq__op_fail(c, CALQ_ERR_INTERNAL, "oneDNN sgemm failed") : CALQ_OK;
    }
#pragma omp parallel for schedule(static) if (rows * GH * I > (1 << 16))
    for (int64_t r = 0; r < rows; r++) {
        /* Row r is step t, batch b; X is [T, B, I] or (layout 1) [B, T, I]. */
        int64_t t = r / p->B, b = r % p->B;
        const float *x = X + (p->layout1 ? b * p->T + t : t * p->B + b) * I;
        float *y = w->xw + r * GH;
        memcpy(y, bias, sizeof(float) * (size_t)GH);
        for (int64_t k = 0; k < I; k++) axpy(y, x[k], w->wt + k * GH, GH);
    }
    free(bias);
    return CALQ_OK;
}

/* The fast path's vector activations (elementwise_mvec.c's rows): used for a direction whose
 * activations are the defaults (sigmoid for the gates, tanh otherwise) when nothing else (clip,
 * peepholes, coupled gates) enters between them; NULL rows on CPUs without them. */
typedef struct rnn_vec {
    ew_row sigmoid, tanh;
} rnn_vec;

static void vec_apply(ew_row row, float *y, const float *x, int64_t n)
{
    const void *in[1] = {x};
    const int64_t st[1] = {1};
    row(NULL, y, in, st, n);
}

/* Whether direction d of p takes the vector activations. */
static bool vec_ok(const rnn_cfg *p, const rnn_vec *v, int d, bool peep)
{
    if (!v || !v->sigmoid || !v->tanh || p->clip > 0) return false;
    const act *A = p->acts[d];
    switch (p->kind) {
    case K_RNN: return A[0].kind == ACT_TANH;
    case K_GRU: return A[0].kind == ACT_SIGMOID && A[1].kind == ACT_TANH;
    case K_LSTM:
        return !peep && !p->input_forget && A[0].kind == ACT_SIGMOID && A[1].kind == ACT_TANH && A[2].kind == ACT_TANH;
    }
    return false;
}

/* One batch row of one direction through all its steps. h, cst: [H] state (in/out); g: [GH]
 * scratch; tmp: [H] scratch. Writes Y (when y != NULL) at its [t, d, b] positions. */
#if defined(__x86_64__) && defined(__GNUC__)
/* cloned per instruction set (the build targets baseline x86-64): the row sums are float
 * multiply-adds in a fixed order, never contracted in C11 mode, so every clone gives the same
 * bits */
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
static void
run_row(const calq_op_ctx *c, const rnn_cfg *p, const rnn_vec *v, int d, const dir_work *w, int64_t b, int64_t len,
        float *h, float *cst, float *g, float *tmp, float *y)
{
    const int64_t H = p->H, GH = p->G * H, T = p->T;
    const act *A = p->acts[d];
    const float *P = opt_in(c, 7) && p->kind == K_LSTM ? (const float *)c->in[7]->data + d * 3 * H : NULL;
    bool rev = p->reverse_only || d == 1;
    const bool vec = vec_ok(p, v, d, P != NULL);
    for (int64_t s = 0; s < len; s++) {
        int64_t t = rev ? len - 1 - s : s;
        memcpy(g, w->xw + (t * p->B + b) * GH, sizeof(float) * (size_t)GH);
        if (p->kind == K_GRU) {
            /* z and r first: the h gate needs r. */
            for (int64_t k = 0; k < H; k++) axpy(g, h[k], w->rt + k * GH, 2 * H);
            float *z = g, *r = g + H, *hh = g + 2 * H;
            if (vec)
                vec_apply(v->sigmoid, g, g, 2 * H);
            else
                for (int64_t j = 0; j < 2 * H; j++) g[j] = act_apply(&A[0], clipped(p, g[j]));
            if (p->lbr) {
                memcpy(tmp, w->br + 2 * H, sizeof(float) * (size_t)H);
                for (int64_t k = 0; k < H; k++) axpy(tmp, h[k], w->rt + k * GH + 2 * H, H);
                for (int64_t j = 0; j < H; j++) hh[j] += r[j] * tmp[j];
            } else {
                for (int64_t k = 0; k < H; k++) axpy(hh, r[k] * h[k], w->rt + k * GH + 2 * H, H);
            }
            if (vec) {
                vec_apply(v->tanh, hh, hh, H);
                for (int64_t j = 0; j < H; j++) h[j] = (1.0f - z[j]) * hh[j] + z[j] * h[j];
            } else {
                for (int64_t j = 0; j < H; j++) {
                    float cand = act_apply(&A[1], clipped(p, hh[j]));
                    h[j] = (1.0f - z[j]) * cand + z[j] * h[j];
                }
            }
        } else {
            for (int64_t k = 0; k < H; k++) axpy(g, h[k], w->rt + k * GH, GH);
            if (p->kind == K_RNN && vec) {
                vec_apply(v->tanh, h, g, H);
            } else if (p->kind == K_RNN) {
                for (int64_t j = 0; j < H; j++) h[j] = act_apply(&A[0], clipped(p, g[j]));
            } else if (vec) {
                /* LSTM with its default activations: the gates i, o, f in one vector pass */
                float *gi = g, *go = g + H, *gf = g + 2 * H, *gc = g + 3 * H;
                vec_apply(v->sigmoid, g, g, 3 * H);
                vec_apply(v->tanh, gc, gc, H);
                for (int64_t j = 0; j < H; j++) cst[j] = gf[j] * cst[j] + gi[j] * gc[j];
                vec_apply(v->tanh, tmp, cst, H);
                for (int64_t j = 0; j < H; j++) h[j] = go[j] * tmp[j];
            } else {
                float *gi = g, *go = g + H, *gf = g + 2 * H, *gc = g + 3 * H;
                for (int64_t j = 0; j < H; j++) {
                    float i = gi[j] + (P ? P[j] * cst[j] : 0.0f);
                    i = act_apply(&A[0], clipped(p, i));
                    float f;
                    if (p->input_forget) {
                        f = 1.0f - i; /* coupled input and forget gates */
                    } else {
                        f = gf[j] + (P ? P[2 * H + j] * cst[j] : 0.0f);
                        f = act_apply(&A[0], clipped(p, f));
                    }
                    float cc = act_apply(&A[1], clipped(p, gc[j]));
                    cst[j] = f * cst[j] + i * cc;
                    float o = go[j] + (P ? P[H + j] * cst[j] : 0.0f);
                    o = act_apply(&A[0], clipped(p, o));
                    h[j] = o * act_apply(&A[2], cst[j]);
                }
            }
        }
        if (y) {
            float *dst = y + (p->layout1 ? ((b * T + t) * p->nd + d) * H : ((t * p->nd + d) * p->B + b) * H);
            memcpy(dst, h, sizeof(float) * (size_t)H);
        }
    }
}

/* The fast path's state: every direction's transposed weights and biases, made once from
 * constant W, R and B (the reference transposes them on every run). */
typedef struct rnn_fast {
    int64_t nd;
    dir_work w[2];
    rnn_vec vec;
} rnn_fast;

static void rnn_fast_free(void *state)
{
    rnn_fast *f = state;
    if (!f) return;
    for (int64_t d = 0; d < f->nd; d++) dir_free(&f->w[d]);
    free(f);
}

/* f: the fast path's weights, or NULL (the reference). */
static calq_status rnn_exec(calq_op_ctx *c, const rnn_fast *f)
{
    rnn_cfg p;
    CALQ_TRY(cfg_make(c, &p));
    const int64_t H = p.H, GH = p.G * H;
    const calq_tensor *sl = opt_in(c, 4), *h0 = opt_in(c, 5), *c0 = p.kind == K_LSTM ? opt_in(c, 6) : NULL;
    for (int64_t b = 0; sl && b < p.B; b++) {
        int64_t L = calq__tensor_get_i64(sl, b);
        if (L < 0 || L > p.T)
            return calq__op_fail(c, CALQ_ERR_DATA, "sequence_lens[%lld] = %lld is outside [0, %lld]", (long long)b,
                                 (long long)L, (long long)p.T);
    }
    float *y = c->out[0] ? c->out[0]->data : NULL;
    if (y) memset(y, 0, calq__tensor_nbytes(c->out[0])); /* steps past a row's length stay zero */
    float *yh = c->n_out > 1 && c->out[1] ? c->out[1]->data : NULL;
    float *yc = c->n_out > 2 && c->out[2] ? c->out[2]->data : NULL;
    /* Both directions' weights and input projections first, then every (direction, batch row)
     * on its own thread: a bidirectional layer at batch 1 (a CRNN's) runs its two recurrences
     * side by side. Each row is computed by one thread in a fixed order, so any split gives the
     * same bits. */
    calq_status st = CALQ_OK;
    dir_work w[2];
    int ready = 0;
    for (int d = 0; d < p.nd && st == CALQ_OK; d++) {
        if (f) {
            w[d] = f->w[d];
            w[d].xw = NULL;
        } else if ((st = dir_weights(c, &p, d, &w[d])) != CALQ_OK) {
            break;
        }
        ready = d + 1;
        st = dir_project(c, &p, d, &w[d], f != NULL);
    }
    int oom = 0;
    const int64_t nd = p.nd, rows = p.nd * p.B;
#pragma omp parallel if (st == CALQ_OK && rows > 1 && p.T * GH * H > (1 << 16))
    {
        float *buf = st == CALQ_OK ? malloc(sizeof(float) * (size_t)(3 * H + GH)) : NULL;
        if (st == CALQ_OK && !buf) {
#pragma omp atomic write
            oom = 1;
        }
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; r++) {
            if (!buf) continue;
            const int d = (int)(r / p.B);
            const int64_t b = r % p.B;
            float *h = buf, *cs = buf + H, *tmp = buf + 2 * H, *g = buf + 3 * H;
            /* initial states: [nd, B, H], or [B, nd, H] with layout 1 */
            int64_t so = p.layout1 ? (b * nd + d) * H : (d * p.B + b) * H;
            if (h0)
                memcpy(h, (const float *)h0->data + so, sizeof(float) * (size_t)H);
            else
                memset(h, 0, sizeof(float) * (size_t)H);
            if (c0)
                memcpy(cs, (const float *)c0->data + so, sizeof(float) * (size_t)H);
            else
                memset(cs, 0, sizeof(float) * (size_t)H);
            int64_t len = sl ? calq__tensor_get_i64(sl, b) : p.T;
            run_row(c, &p, f ? &f->vec : NULL, d, &w[d], b, len, h, cs, g, tmp, y);
            if (yh) memcpy(yh + so, h, sizeof(float) * (size_t)H);
            if (yc) memcpy(yc + so, cs, sizeof(float) * (size_t)H);
        }
        free(buf);
    }
    for (int d = 0; d < ready; d++) {
        if (f)
            free(w[d].xw); /* the weights belong to the state */
        else
            dir_free(&w[d]);
    }
    if (st == CALQ_OK && oom)
        st = calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory for the state of %lld units", (long long)H);
    return st;
}

static calq_status rnn_run(calq_op_ctx *c)
{
    return rnn_exec(c, NULL);
}

static calq_status rnn_run_fast(calq_op_ctx *c)
{
    return rnn_exec(c, c->state);
}

/* The fast path needs constant W, R (and B when given): it transposes them once, here. */
static calq_status rnn_prepare(calq_op_ctx *c)
{
    c->state = NULL;
    const calq_tensor *B = opt_in(c, 3);
    if (!(c->const_inputs & 2u) || !(c->const_inputs & 4u) || !c->in[1]->data || !c->in[2]->data) return CALQ_OK;
    if (B && (!(c->const_inputs & 8u) || !B->data)) return CALQ_OK;
    rnn_cfg p;
    CALQ_TRY(cfg_make(c, &p));
    rnn_fast *f = calloc(1, sizeof *f);
    if (!f) return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory");
    for (; f->nd < p.nd; f->nd++) {
        calq_status st = dir_weights(c, &p, (int)f->nd, &f->w[f->nd]);
        if (st != CALQ_OK) {
            rnn_fast_free(f);
            return st;
        }
    }
    f->vec.sigmoid = calq__ew_mvec_row("Sigmoid");
    f->vec.tanh = calq__ew_mvec_row("Tanh");
    c->state = f;
    return CALQ_OK;
}

const calq_op_def calq__ops_rnn[] = {
    {"RNN", 3, 6, 0, 2, 0, false, rnn_infer, rnn_run, rnn_prepare, rnn_run_fast, rnn_fast_free, 0},
    {"GRU", 3, 6, 0, 2, 0, false, rnn_infer, rnn_run, rnn_prepare, rnn_run_fast, rnn_fast_free, 0},
    {"LSTM", 3, 8, 0, 3, 0, false, rnn_infer, rnn_run, rnn_prepare, rnn_run_fast, rnn_fast_free, 0},
    {0},
};
