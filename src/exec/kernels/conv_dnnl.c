/* oneDNN fast paths for Conv and ConvTranspose.
 *
 * calq's activations are plain C-ordered (NCHW) tensors, and that is what these kernels read
 * and write. Inside, the method is chosen per node (timings: UltraFace slim-320, AVX-512,
 * 2 threads):
 *   - 1x1 ungrouped convolutions with stride 1 and no padding are a matrix product per image,
 *     Y[n] (M x P) = W (M x C) . X[n] (C x P): oneDNN's sgemm on fixed tiles of Y, so no
 *     conversion of the activations is needed;
 *   - everything else runs oneDNN's convolution on its channel-blocked layout (nChw16c):
 *     depthwise and k > 1 convolutions are 3-12x slower on NCHW (oneDNN then falls back to
 *     im2col + GEMM), far more than the cost of converting. The input is reordered into that
 *     layout, convolved and the output reordered back; the blocked copies live in a
 *     per-thread scratch buffer that every node reuses (calq__dnnl_scratch).
 * Determinism across thread counts: oneDNN's threaded GEMM splits the reduction (K) between
 * threads when it has many threads and little M x N work, which changes the rounding; its
 * GEMM-based convolutions inherit that (seen with 6+ threads on 1x1 convolutions). So the
 * GEMM path above runs each fixed tile single-threaded (oneDNN's GEMM uses one thread inside
 * an OpenMP parallel region), GEMM-based convolution implementations are never accepted, and
 * nodes oneDNN can only run that way (or with its slow reference code) use calq's reference
 * kernel. The direct (jit) convolution kernels parallelise over images, channel blocks and
 * output positions only, never over the reduction.
 * With the executor's layouts (c->in_layout set, exec/plan_fast.c), activations stay in
 * oneDNN's blocked layout between layers instead: the convolution reads its input as the
 * producer wrote it (blocked, or plain for a first layer with few channels), writes blocked
 * output, and applies the element-wise layers the planner offers as post-ops (ReLU, clip,
 * residual sum, ...): the longest prefix of them for which oneDNN still has a direct kernel.
 * The 1x1 convolutions then run on oneDNN's jit 1x1 kernel, which, like the other direct
 * kernels, keeps each output's summation order whatever the thread count (tested).
 * On AVX-512 machines with few CPUs, ungrouped 3x3 stride-1 convolutions with 64+ channels on
 * maps of 14x14 to 112x112 run oneDNN's Winograd kernel instead, unless something is observed
 * (conv_wino.h: one thread per image and half of the output channels, so the bits do not depend
 * on the thread count).
 * Weights are reordered into the layout oneDNN picks. When the executor marks them constant
 * (c->const_inputs) that happens once in prepare; otherwise the weight input may change from
 * run to run (a graph input, as in the ONNX conformance tests) and it is reordered on every
 * execution. */
#include <stdlib.h>
#include <string.h>

#include "exec/kernels/conv_dnnl.h"
#include "exec/kernels/conv_wino.h"
#include "exec/kernels/deconv_gemm.h"
#include "exec/kernels/dnnl_common.h"
#include "exec/kernels/logistic.h"
#include "exec/layout.h"

/* ---- Conv / ConvTranspose ------------------------------------------------------------------ */

/* Output tiling of the 1x1 GEMM path. Tile sizes depend on the shape only, never on the
 * thread count, so the arithmetic is the same however many threads share the tiles. Tiles
 * are at most 64 channels x 1024 positions, split further (down to 128 positions, then down
 * to 16 channels) until there are enough of them to keep a few threads busy, and
 * equal-sized so they balance. */
#define GEMM_MAX_TILE_M 64
#define GEMM_MAX_TILE_P 1024
#define GEMM_MIN_TILE_P 128
#define GEMM_MIN_TILE_M 16
#define GEMM_MIN_TILES  8

static int64_t ceil_div(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

static void gemm_tiles(int64_t n, int64_t m, int64_t p, int64_t *tile_m, int64_t *tile_p)
{
    int64_t tm = ceil_div(m, GEMM_MAX_TILE_M), tp = ceil_div(p, GEMM_MAX_TILE_P);
    while (n * tm * tp < GEMM_MIN_TILES && p / (tp + 1) >= GEMM_MIN_TILE_P) tp++;
    while (n * tm * tp < GEMM_MIN_TILES && m / (tm + 1) >= GEMM_MIN_TILE_M) tm++;
    *tile_m = ceil_div(m, tm);
    *tile_p = ceil_div(ceil_div(p, tp), 16) * 16; /* whole cache lines */
    if (*tile_p > p) *tile_p = p;
}

typedef struct conv_state {
    /* 1x1 GEMM path (prim == NULL): Y[n] = W . X[n] (+ bias) */
    int64_t g_n, g_m, g_k, g_p, tile_m, tile_p;
    /* convolution primitive path */
    dnnl_primitive_t prim;
    dnnl_primitive_t w_reorder;              /* ONNX weight layout -> the primitive's; NULL when equal */
    dnnl_primitive_t src_reorder;            /* NCHW -> blocked input; NULL when the primitive reads NCHW */
    dnnl_primitive_t dst_reorder;            /* blocked -> NCHW output; NULL when it writes NCHW */
    dnnl_memory_t src, w_user, w, bias, dst; /* src/dst: the NCHW tensors */
    dnnl_memory_t src_blk, dst_blk;          /* blocked copies (handles: the scratch) */
    size_t src_blk_bytes, dst_blk_bytes;     /* 64-byte rounded */
    dnnl_stream_t stream;
    bool w_ready;     /* s->w already holds the (constant) weights */
    calq__bulk w_buf; /* s->w's buffer when it is not w_user's */
    /* post-ops (executor layouts only) */
    int n_bin;                       /* binary post-ops (per-channel add / multiply) */
    int bin_idx[CALQ_CONV_MAX_POST]; /* their positions in the post-op chain */
    dnnl_memory_t bin_mem[CALQ_CONV_MAX_POST];
    int sum_post; /* position of the residual sum, or -1 */
    /* the chain's last post-op, SiLU or the logistic, run as calq's own pass over the output
     * (tail_of); has_tail false when oneDNN applies every post-op */
    bool has_tail;
    calq_post_kind tail;
    float tail_alpha;
    calq_layout tail_layout; /* the output's layout, for its size with padding channels */
    bool serial;             /* little work: created for and run on one thread */
    size_t dst_bytes;        /* blocked output size, for the sum's copy */
    /* Winograd path (conv_wino.h): when set, nothing above but `serial` is used */
    calq_conv_wino *wino;
    /* ConvTranspose as matrix products (deconv_gemm.h): when set, nothing above is used */
    calq_deconv_gemm *dgemm;
} conv_state;

void calq__conv_dnnl_release(void *state)
{
    conv_state *s = state;
    if (!s) return;
    dnnl_primitive_t prims[] = {s->prim, s->w_reorder, s->src_reorder, s->dst_reorder};
    for (size_t i = 0; i < sizeof prims / sizeof prims[0]; i++)
        if (prims[i]) dnnl_primitive_destroy(prims[i]);
    if (s->w && s->w != s->w_user) dnnl_memory_destroy(s->w);
    calq__bulk_free(&s->w_buf);
    dnnl_memory_t mems[] = {s->src, s->w_user, s->bias, s->dst, s->src_blk, s->dst_blk};
    for (size_t i = 0; i < sizeof mems / sizeof mems[0]; i++)
        if (mems[i]) dnnl_memory_destroy(mems[i]);
    for (int i = 0; i < s->n_bin; i++)
        if (s->bin_mem[i]) dnnl_memory_destroy(s->bin_mem[i]);
    if (s->stream) dnnl_stream_destroy(s->stream);
    calq__conv_wino_free(s->wino);
    calq__deconv_gemm_free(s->dgemm);
    free(s);
}

bool calq__conv_dnnl_is_wino(const void *state)
{
    return state && ((const conv_state *)state)->wino != NULL;
}

bool calq__conv_dnnl_has_tail(const void *state)
{
    return state && ((const conv_state *)state)->has_tail;
}

bool calq__conv_dnnl_is_deconv_gemm(const void *state)
{
    return state && ((const conv_state *)state)->dgemm != NULL;
}

/* The memory descriptor of ONNX weights as oneDNN sees them. oneDNN's logical weight dims are
 * [OC, IC, k...] (or [G, OC/G, IC/G, k...] when grouped) for both convolution and
 * deconvolution. ONNX Conv's W [M, C/G, k...] is exactly that in plain order; ConvTranspose's
 * W [C, M/G, k...] = [G, C/G, M/G, k...] has the two channel axes swapped. */
static dnnl_status_t onnx_weights_md(const calq_conv_geom *g, dnnl_memory_desc_t *md, dnnl_dims_t dims, int *ndims)
{
    int nd = 0;
    if (g->group > 1) dims[nd++] = g->group;
    dims[nd++] = g->c_out / g->group;
    dims[nd++] = g->c_in / g->group;
    for (int i = 0; i < g->nsp; i++) dims[nd++] = g->k[i];
    *ndims = nd;
    if (!g->transpose) return calq__dnnl_plain_md(md, dims, nd);
    /* Tags by (grouped, spatial rank): the first two weight axes after any group axis swap. */
    static const dnnl_format_tag_t plain_swapped[] = {dnnl_bac, dnnl_bacd, dnnl_bacde};
    static const dnnl_format_tag_t grouped_swapped[] = {dnnl_acbd, dnnl_acbde, dnnl_acbdef};
    const dnnl_format_tag_t tag = g->group > 1 ? grouped_swapped[g->nsp - 1] : plain_swapped[g->nsp - 1];
    return dnnl_memory_desc_init_by_tag(md, nd, dims, dnnl_f32, tag);
}

/* Channel-blocked activation tags for 1-D, 2-D, 3-D: by 16 (AVX-512's direct kernels), then by
 * 8 (AVX2's: on a CPU without AVX-512 oneDNN has only its reference code for nChw16c). */
static const dnnl_format_tag_t blocked_tags[2][3] = {{dnnl_aBc16b, dnnl_aBcd16b, dnnl_aBcde16b},
                                                     {dnnl_aBc8b, dnnl_aBcd8b, dnnl_aBcde8b}};

typedef struct conv_descs {
    dnnl_dims_t sdims, ddims, wdims, bdims, strides, dil, pad_l, pad_r;
    int nd, wnd;
    dnnl_memory_desc_t src_plain, dst_plain, bias, w_user, w_any;
} conv_descs;

/* A primitive descriptor with src/dst in the given layouts (weights: oneDNN's choice), or
 * NULL if oneDNN cannot build one with a direct (non-GEMM, non-reference) implementation. */
static dnnl_primitive_desc_t try_pd(const calq_conv_geom *g, conv_descs *d, dnnl_format_tag_t stag,
                                    dnnl_format_tag_t dtag, const_dnnl_primitive_attr_t attr)
{
    dnnl_engine_t eng = calq__dnnl_engine();
    dnnl_memory_desc_t smd, dmd;
    if (dnnl_memory_desc_init_by_tag(&smd, d->nd, d->sdims, dnnl_f32, stag) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&dmd, d->nd, d->ddims, dnnl_f32, dtag) != dnnl_success)
        return NULL;
    const dnnl_memory_desc_t *bmd = g->has_bias ? &d->bias : NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t st;
    if (!g->transpose) {
        dnnl_convolution_desc_t cd;
        st = dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &smd,
                                                        &d->w_any, bmd, &dmd, d->strides, d->dil, d->pad_l, d->pad_r);
        if (st == dnnl_success) st = dnnl_primitive_desc_create(&pd, &cd, attr, eng, NULL);
    } else {
        dnnl_deconvolution_desc_t cd;
        st = dnnl_dilated_deconvolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_deconvolution_direct, &smd,
                                                          &d->w_any, bmd, &dmd, d->strides, d->dil, d->pad_l, d->pad_r);
        if (st == dnnl_success) st = dnnl_primitive_desc_create(&pd, &cd, attr, eng, NULL);
    }
    if (st != dnnl_success) return NULL;
    const char *impl = NULL;
    /* See the top of the file: GEMM-based implementations ("gemm:jit", "x64:gemm:jit") are
     * not deterministic across thread counts, and "ref" is slower than calq's own loops. */
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl ||
        strncmp(impl, "ref", 3) == 0 || strstr(impl, "gemm:") != NULL) {
        dnnl_primitive_desc_destroy(pd);
        return NULL;
    }
    return pd;
}

static size_t round64(size_t n)
{
    return (n + 63) & ~(size_t)63;
}

/* A 1-D convolution as a 2-D one of height 1: oneDNN's direct kernels for depthwise
 * convolutions exist only in 2-D, and the memory layouts are identical. */
static void promote_1d(calq_conv_geom *g)
{
    if (g->nsp != 1) return;
    int64_t *v[] = {g->in, g->out, g->k, g->stride, g->dil, g->pad_b, g->pad_e, g->out_pad};
    static const int64_t unit[] = {1, 1, 1, 1, 1, 0, 0, 0};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        v[i][1] = v[i][0];
        v[i][0] = unit[i];
    }
    g->nsp = 2;
}

/* The oneDNN post-ops of the planner's chain c->post[0..n): element-wise layers, the residual
 * sum, per-channel add / multiply (binary post-ops reading a [1, C, 1...] constant). */
dnnl_status_t calq__conv_post_ops(const calq_op_ctx *c, int n, int nd, int64_t c_out, dnnl_primitive_attr_t attr)
{
    dnnl_post_ops_t ops;
    dnnl_status_t st = dnnl_post_ops_create(&ops);
    if (st != dnnl_success) return st;
    for (int i = 0; i < n && st == dnnl_success; i++) {
        const calq_post_op *op = &c->post[i];
        switch (op->kind) {
        case CALQ_POST_RELU: st = dnnl_post_ops_append_eltwise(ops, 1.0f, dnnl_eltwise_relu, op->alpha, 0.0f); break;
        case CALQ_POST_CLIP:
            st = dnnl_post_ops_append_eltwise(ops, 1.0f, dnnl_eltwise_clip, op->alpha, op->beta);
            break;
        case CALQ_POST_HARD_SIGMOID: /* oneDNN 2.6 has no hardsigmoid: clip(alpha * x + beta, 0, 1) */
            st = dnnl_post_ops_append_eltwise(ops, 1.0f, dnnl_eltwise_linear, op->alpha, op->beta);
            if (st == dnnl_success) st = dnnl_post_ops_append_eltwise(ops, 1.0f, dnnl_eltwise_clip, 0.0f, 1.0f);
            break;
        case CALQ_POST_HARD_SWISH: st = dnnl_post_ops_append_eltwise(ops, 1.0f, dnnl_eltwise_hardswish, 0, 0); break;
        case CALQ_POST_SWISH: st = dnnl_post_ops_append_eltwise(ops, 1.0f, dnnl_eltwise_swish, op->alpha, 0); break;
        case CALQ_POST_SIGMOID: st = dnnl_post_ops_append_eltwise(ops, 1.0f, dnnl_eltwise_logistic, 0, 0); break;
        case CALQ_POST_TANH: st = dnnl_post_ops_append_eltwise(ops, 1.0f, dnnl_eltwise_tanh, 0, 0); break;
        case CALQ_POST_ELU: st = dnnl_post_ops_append_eltwise(ops, 1.0f, dnnl_eltwise_elu, op->alpha, 0); break;
        case CALQ_POST_SUM: st = dnnl_post_ops_append_sum(ops, 1.0f); break;
        case CALQ_POST_ADD_CHANNEL:
        case CALQ_POST_MUL_CHANNEL: {
            dnnl_dims_t dims;
            for (int k = 0; k < nd; k++) dims[k] = 1;
            if (calq_tensor_numel(op->operand) > 1) dims[1] = c_out;
            dnnl_memory_desc_t md;
            st = calq__dnnl_plain_md(&md, dims, nd);
            if (st == dnnl_success)
                st = dnnl_post_ops_append_binary(
                    ops, op->kind == CALQ_POST_ADD_CHANNEL ? dnnl_binary_add : dnnl_binary_mul, &md);
            break;
        }
        default: st = dnnl_unimplemented; break;
        }
    }
    if (st == dnnl_success) st = dnnl_primitive_attr_set_post_ops(attr, ops);
    dnnl_post_ops_destroy(ops);
    return st;
}

static bool has_sum(const calq_op_ctx *c, int n)
{
    for (int i = 0; i < n; i++)
        if (c->post[i].kind == CALQ_POST_SUM) return true;
    return false;
}

/* Whether the chain's first n post-ops end in one calq runs itself after the kernel (logistic.h:
 * SiLU and the logistic, twice as fast as oneDNN 2.6's post-ops, which double a depthwise
 * convolution's time). Only the last one: a post-op after it would see oneDNN's input, not the
 * pass's result. The logistic of a padding channel's 0 is 1/2, so only on outputs without padding
 * channels; SiLU keeps them 0. */
static bool tail_of(const calq_op_ctx *c, int n, calq_layout out_layout)
{
    if (n < 1 || !calq__logistic_fast()) return false;
    const calq_post_kind k = c->post[n - 1].kind;
    return k == CALQ_POST_SWISH || (k == CALQ_POST_SIGMOID && !calq__layout_has_pads(c->out[0], out_layout));
}

static void set_tail(conv_state *s, const calq_op_ctx *c, int n, calq_layout out_layout)
{
    s->has_tail = true;
    s->tail = c->post[n - 1].kind;
    s->tail_alpha = c->post[n - 1].alpha;
    s->tail_layout = out_layout;
}

static bool brgemm_impl(const_dnnl_primitive_desc_t pd)
{
    const char *impl = NULL;
    return dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl &&
           (strncmp(impl, "brgconv", 7) == 0 || strncmp(impl, "brdgmm", 6) == 0);
}

/* Executor layouts: the input as the producer wrote it (in the executor's layout, or plain for
 * a first layer with few channels where a kernel reads that; otherwise it asks for the
 * executor's layout), output in the executor's layout, and the longest prefix of the offered
 * post-ops oneDNN runs with a direct kernel. NULL: no direct kernel at all. */
static dnnl_primitive_desc_t layout_pd(calq_op_ctx *c, const calq_conv_geom *g, conv_descs *d, int *n_post, bool *tail)
{
    const dnnl_format_tag_t ltag = calq__layout_tag(c->native, d->nd), ptag = calq__layout_tag(0, d->nd);
    const bool narrow_in = g->group == 1 && g->c_in < 16;
    /* One residual sum at most (it reads the output buffer's old contents); with c->exact_only,
     * only post-ops whose results equal the unfused layers'. */
    int n = 0, sums = 0;
    for (; n < c->n_post && n < CALQ_CONV_MAX_POST; n++) {
        if (c->post[n].kind == CALQ_POST_SUM && ++sums > 1) break;
        if (c->exact_only && !c->post[n].exact) break;
    }
    for (; n >= 0; n--) {
        dnnl_primitive_attr_t attr = NULL;
        if (dnnl_primitive_attr_create(&attr) != dnnl_success) return NULL;
        dnnl_primitive_desc_t pd = NULL;
        const bool t = tail_of(c, n, c->native);
        if (calq__conv_post_ops(c, n - t, d->nd, d->ddims[1], attr) == dnnl_success) {
            if (c->in_layout[0] == c->native)
                pd = try_pd(g, d, ltag, ltag, attr);
            else if (narrow_in && (pd = try_pd(g, d, ptag, ltag, attr)) != NULL)
                c->in_layout[0] = CALQ_LAYOUT_PLAIN;
            else if ((pd = try_pd(g, d, ltag, ltag, attr)) != NULL)
                c->in_layout[0] = c->native; /* the executor converts the input */
        }
        dnnl_primitive_attr_destroy(attr);
        /* oneDNN's older direct kernels (jit, jit_1x1, jit_dw) accumulate onto the residual
         * instead of adding it to the finished sum: a different rounding than Conv then Add.
         * Its brgemm kernels (brgconv, brdgmm) add it afterwards, bit for bit (tested). */
        if (pd && c->exact_only && has_sum(c, n) && !brgemm_impl(pd)) {
            dnnl_primitive_desc_destroy(pd);
            pd = NULL;
        }
        if (pd) {
            *n_post = n;
            *tail = t;
            return pd;
        }
    }
    return NULL;
}

static calq_status conv_prepare_on(calq_op_ctx *c, bool transpose, bool serial)
{
    c->state = NULL;
    c->n_post_used = 0;
    calq_conv_geom g;
    CALQ_TRY(calq__conv_geom(c, transpose, &g));
    const int logical_nsp = g.nsp;
    promote_1d(&g);
    dnnl_engine_t eng = calq__dnnl_engine();
    if (!eng || g.n == 0) return CALQ_OK; /* no engine / empty batch: the reference kernel copes */
    /* Blocked layouts need a tag for the tensor's own rank (a 1-D convolution's [N, C, W] is
     * the same memory as its 2-D promotion's [N, C, 1, W]). */
    const bool layouts = c->in_layout && c->out_layout && c->native != CALQ_LAYOUT_PLAIN &&
                         calq__layout_tag(c->native, 2 + logical_nsp) != dnnl_format_tag_undef;

    conv_descs d;
    d.nd = 2 + g.nsp;
    d.sdims[0] = d.ddims[0] = g.n;
    d.sdims[1] = g.c_in;
    d.ddims[1] = g.c_out;
    d.bdims[0] = g.c_out;
    bool gemm = !transpose && g.group == 1 && !layouts;
    for (int i = 0; i < g.nsp; i++) {
        d.sdims[2 + i] = g.in[i];
        d.ddims[2 + i] = g.out[i];
        d.strides[i] = g.stride[i];
        d.dil[i] = g.dil[i] - 1; /* oneDNN counts the gaps between taps: ONNX dilation 1 is 0 */
        d.pad_l[i] = g.pad_b[i];
        /* ONNX output_padding extends the output at the end, which for oneDNN's deconvolution
         * is right padding reduced by the same amount. */
        d.pad_r[i] = g.pad_e[i] - g.out_pad[i];
        /* oneDNN has no negative padding: such (rare) ConvTransposes use the reference. */
        if (d.pad_l[i] < 0 || d.pad_r[i] < 0) return CALQ_OK;
        if (g.k[i] != 1 || g.stride[i] != 1 || g.pad_b[i] != 0 || g.pad_e[i] != 0) gemm = false;
    }
    if (calq__dnnl_plain_md(&d.src_plain, d.sdims, d.nd) != dnnl_success ||
        calq__dnnl_plain_md(&d.dst_plain, d.ddims, d.nd) != dnnl_success ||
        calq__dnnl_plain_md(&d.bias, d.bdims, 1) != dnnl_success ||
        onnx_weights_md(&g, &d.w_user, d.wdims, &d.wnd) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&d.w_any, d.wnd, d.wdims, dnnl_f32, dnnl_format_tag_any) != dnnl_success)
        return CALQ_OK;

    if (gemm) {
        conv_state *s = calloc(1, sizeof *s);
        if (!s) return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory building the 1x1 convolution");
        s->g_n = g.n;
        s->g_m = g.c_out;
        s->g_k = g.c_in;
        s->g_p = 1;
        for (int i = 0; i < g.nsp; i++) s->g_p *= g.out[i];
        gemm_tiles(s->g_n, s->g_m, s->g_p, &s->tile_m, &s->tile_p);
        s->sum_post = -1;
        c->state = s;
        return CALQ_OK;
    }

    dnnl_primitive_desc_t pd = NULL;
    int n_post = 0;
    bool tail = false;
    /* Winograd, with the longest prefix of the offered post-ops it applies; not where the unfused
     * bits are required (c->exact_only: some tensor is observed, as in calibration, or the chain
     * ends in a graph output): the tensors observed then are the direct kernel's whether the
     * graph around them is fused or not (with --dump-all nothing is fused, and Winograd without
     * the residual sum would otherwise be chosen where a fused chain takes the direct kernel). */
    /* A ConvTranspose on channels-last data: matrix products and a col2im (deconv_gemm.h), with
     * the exact post-ops it applies. Not where the unfused bits are required, as for Winograd. */
    if (layouts && !c->exact_only && c->native == CALQ_LAYOUT_CHANNELS_LAST && calq__deconv_gemm_fits(&g)) {
        calq_deconv_gemm *t = NULL;
        int used = 0;
        CALQ_TRY(calq__deconv_gemm_create(c, &g, c->n_post, &used, &t));
        if (t) {
            conv_state *s = calloc(1, sizeof *s);
            if (!s) {
                calq__deconv_gemm_free(t);
                return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory building the convolution");
            }
            s->dgemm = t;
            s->sum_post = -1;
            c->in_layout[0] = c->out_layout[0] = CALQ_LAYOUT_CHANNELS_LAST;
            c->n_post_used = used;
            c->state = s;
            return CALQ_OK;
        }
    }
    if (layouts && !c->exact_only && calq__conv_wino_fits(&g, c->native)) {
        int n = c->n_post < CALQ_CONV_MAX_POST ? c->n_post : CALQ_CONV_MAX_POST;
        for (; n >= 0; n--) {
            calq_conv_wino *w = NULL;
            /* nChw16c out when only convolutions and element-wise layers read it: the next
             * Winograd layer takes it as it is */
            const bool out16 = c->out_conv_readers && c->out_conv_readers[n];
            const calq_layout out_layout = out16 ? 16 : c->native;
            const bool wtail = tail_of(c, n, out_layout);
            CALQ_TRY(calq__conv_wino_create(c, &g, n - wtail, out16, &w));
            if (!w) continue;
            conv_state *s = calloc(1, sizeof *s);
            if (!s) {
                calq__conv_wino_free(w);
                return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory building the convolution");
            }
            s->wino = w;
            s->serial = serial;
            s->sum_post = -1;
            if (wtail) set_tail(s, c, n, out_layout);
            if (c->in_layout[0] != 16) c->in_layout[0] = c->native;
            c->out_layout[0] = out16 ? 16 : c->native;
            c->n_post_used = n;
            c->state = s;
            return CALQ_OK;
        }
    }
    if (layouts) {
        pd = layout_pd(c, &g, &d, &n_post, &tail);
        if (!pd) return CALQ_OK; /* the reference kernel, on plain tensors */
        c->out_layout[0] = c->native;
    } else {
        /* A convolution with few input channels per group (a network's first layer) reads NCHW
         * directly into a blocked output, which oneDNN's blocked kernels support, saving the
         * input conversion. */
        static const dnnl_format_tag_t plain_tags[] = {dnnl_abc, dnnl_abcd, dnnl_abcde};
        const dnnl_format_tag_t ptag = plain_tags[g.nsp - 1];
        for (int b = 0; b < 2 && !pd; b++) {
            const dnnl_format_tag_t btag = blocked_tags[b][g.nsp - 1];
            const bool narrow_in = g.group == 1 && g.c_in < (b == 0 ? 16 : 8);
            pd = try_pd(&g, &d, narrow_in ? ptag : btag, btag, NULL);
            if (!pd && narrow_in) pd = try_pd(&g, &d, btag, btag, NULL);
        }
        if (!pd) return CALQ_OK;
    }

    calq_status st = CALQ_OK;
    conv_state *s = calloc(1, sizeof *s);
    if (!s) {
        dnnl_primitive_desc_destroy(pd);
        return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory building the oneDNN convolution");
    }
    s->sum_post = -1;
    s->serial = serial;
    if (tail) set_tail(s, c, n_post, c->native);
    CALQ_DNNL_OR_OUT(c, dnnl_primitive_create(&s->prim, pd));
    const dnnl_memory_desc_t *w_md = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *s_md = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *o_md = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    if (layouts) {
        /* the tensors are in the primitive's own formats: no conversions here */
        CALQ_DNNL_OR_OUT(c, dnnl_memory_create(&s->src, s_md, eng, DNNL_MEMORY_NONE));
        CALQ_DNNL_OR_OUT(c, dnnl_memory_create(&s->dst, o_md, eng, DNNL_MEMORY_NONE));
        s->dst_bytes = dnnl_memory_desc_get_size(o_md);
        for (int i = 0; i < n_post; i++) {
            const calq_post_op *op = &c->post[i];
            if (op->kind == CALQ_POST_SUM) s->sum_post = i;
            if (op->kind != CALQ_POST_ADD_CHANNEL && op->kind != CALQ_POST_MUL_CHANNEL) continue;
            dnnl_dims_t dims;
            for (int k = 0; k < d.nd; k++) dims[k] = 1;
            if (calq_tensor_numel(op->operand) > 1) dims[1] = d.ddims[1];
            dnnl_memory_desc_t md;
            CALQ_DNNL_OR_OUT(c, calq__dnnl_plain_md(&md, dims, d.nd));
            /* HardSigmoid takes two oneDNN post-ops: count the positions before this one */
            int pos = 0;
            for (int k = 0; k < i; k++) pos += c->post[k].kind == CALQ_POST_HARD_SIGMOID ? 2 : 1;
            s->bin_idx[s->n_bin] = pos;
            CALQ_DNNL_OR_OUT(c, dnnl_memory_create(&s->bin_mem[s->n_bin++], &md, eng, DNNL_MEMORY_NONE));
        }
        c->n_post_used = n_post;
    } else {
        CALQ_DNNL_OR_OUT(c, dnnl_memory_create(&s->src, &d.src_plain, eng, DNNL_MEMORY_NONE));
        CALQ_DNNL_OR_OUT(c, dnnl_memory_create(&s->dst, &d.dst_plain, eng, DNNL_MEMORY_NONE));
        if (!dnnl_memory_desc_equal(s_md, &d.src_plain)) {
            CALQ_DNNL_OR_OUT(c, dnnl_memory_create(&s->src_blk, s_md, eng, DNNL_MEMORY_NONE));
            CALQ_DNNL_OR_OUT(c, calq__dnnl_reorder(&s->src_reorder, &d.src_plain, s_md));
            s->src_blk_bytes = round64(dnnl_memory_desc_get_size(s_md));
        }
        if (!dnnl_memory_desc_equal(o_md, &d.dst_plain)) {
            CALQ_DNNL_OR_OUT(c, dnnl_memory_create(&s->dst_blk, o_md, eng, DNNL_MEMORY_NONE));
            CALQ_DNNL_OR_OUT(c, calq__dnnl_reorder(&s->dst_reorder, o_md, &d.dst_plain));
            s->dst_blk_bytes = round64(dnnl_memory_desc_get_size(o_md));
        }
    }
    if (g.has_bias) CALQ_DNNL_OR_OUT(c, dnnl_memory_create(&s->bias, &d.bias, eng, DNNL_MEMORY_NONE));
    CALQ_DNNL_OR_OUT(c, dnnl_memory_create(&s->w_user, &d.w_user, eng, DNNL_MEMORY_NONE));
    if (dnnl_memory_desc_equal(w_md, &d.w_user)) {
        s->w = s->w_user;
    } else {
        CALQ_DNNL_OR_OUT(c, calq__dnnl_memory_bulk(&s->w, w_md, &s->w_buf));
        CALQ_DNNL_OR_OUT(c, calq__dnnl_reorder(&s->w_reorder, &d.w_user, w_md));
    }
    CALQ_DNNL_OR_OUT(c, dnnl_stream_create(&s->stream, eng, dnnl_stream_default_flags));
    if ((c->const_inputs & 2u) && c->in[1]->data) {
        CALQ_DNNL_OR_OUT(c, dnnl_memory_set_data_handle(s->w_user, c->in[1]->data));
        if (s->w_reorder) {
            dnnl_exec_arg_t rargs[] = {{DNNL_ARG_FROM, s->w_user}, {DNNL_ARG_TO, s->w}};
            CALQ_DNNL_OR_OUT(c, dnnl_primitive_execute(s->w_reorder, s->stream, 2, rargs));
            CALQ_DNNL_OR_OUT(c, dnnl_stream_wait(s->stream));
        }
        s->w_ready = true;
    }
    c->state = s;
    s = NULL;
out:
    dnnl_primitive_desc_destroy(pd);
    calq__conv_dnnl_release(s);
    if (st != CALQ_OK) c->n_post_used = 0;
    return st;
}

/* Multiply-adds of the convolution. */
static int64_t conv_work(const calq_conv_geom *g)
{
    int64_t w = g->n * g->c_out * (g->c_in / g->group);
    for (int i = 0; i < g->nsp; i++) w *= (g->transpose ? g->in[i] : g->out[i]) * g->k[i];
    return w;
}

static calq_status conv_prepare(calq_op_ctx *c, bool transpose)
{
    calq_conv_geom g;
    c->state = NULL;
    CALQ_TRY(calq__conv_geom(c, transpose, &g));
    const bool serial = conv_work(&g) < CALQ_DNNL_SERIAL_WORK;
    const int prev = calq__dnnl_serial_begin(serial);
    calq_status st = conv_prepare_on(c, transpose, serial);
    calq__dnnl_serial_end(serial, prev);
    return st;
}

calq_status calq__conv_dnnl_prepare(calq_op_ctx *c)
{
    return conv_prepare(c, false);
}
calq_status calq__convtranspose_dnnl_prepare(calq_op_ctx *c)
{
    return conv_prepare(c, true);
}

/* The 1x1 path: tiles of (image, output-channel block, position block), each one bias fill
 * plus one single-threaded sgemm. */
static calq_status gemm_run(calq_op_ctx *c, const conv_state *s)
{
    const float *x = c->in[0]->data, *w = c->in[1]->data;
    const float *b = c->n_in > 2 && c->in[2] ? c->in[2]->data : NULL;
    float *y = c->out[0]->data;
    const int64_t N = s->g_n, M = s->g_m, K = s->g_k, P = s->g_p;
    const int64_t TM = s->tile_m, TP = s->tile_p, tm = ceil_div(M, TM), tp = ceil_div(P, TP);
    int failed = 0;
#pragma omp parallel for collapse(3) schedule(static) reduction(| : failed)
    for (int64_t n = 0; n < N; n++) {
        for (int64_t im = 0; im < tm; im++) {
            for (int64_t ip = 0; ip < tp; ip++) {
                const int64_t m0 = im * TM, p0 = ip * TP;
                const int64_t ml = M - m0 < TM ? M - m0 : TM, pl = P - p0 < TP ? P - p0 : TP;
                float *yt = y + (n * M + m0) * P + p0;
                if (b)
                    for (int64_t i = 0; i < ml; i++)
                        for (int64_t j = 0; j < pl; j++) yt[i * P + j] = b[m0 + i];
                if (dnnl_sgemm('N', 'N', ml, pl, K, 1.0f, w + m0 * K, K, x + n * K * P + p0, P, b ? 1.0f : 0.0f, yt,
                               P) != dnnl_success)
                    failed = 1;
            }
        }
    }
    if (failed) return calq__op_fail(c, CALQ_ERR_INTERNAL, "oneDNN sgemm failed");
    return CALQ_OK;
}

static calq_status conv_run(calq_op_ctx *c, conv_state *s);

/* Elements per task of the tail pass: a multiple of 16, so every task but the last runs whole
 * vectors (the bits do not depend on the split anyway: each element's result is its own). */
#define TAIL_CHUNK ((size_t)1 << 14)

/* The tail post-op (tail_of) over the whole output, padding channels included. */
static void run_tail(const calq_op_ctx *c, const conv_state *s)
{
    float *y = c->out[0]->data;
    const size_t n = calq__layout_nbytes(c->out[0], s->tail_layout) / sizeof(float);
    const bool swish = s->tail == CALQ_POST_SWISH;
    const size_t chunks = (n + TAIL_CHUNK - 1) / TAIL_CHUNK;
    if (s->serial || chunks < 2) {
        calq__logistic_rows(y, y, n, swish, s->tail_alpha);
        return;
    }
#pragma omp parallel for schedule(static)
    for (size_t k = 0; k < chunks; k++) {
        const size_t i = k * TAIL_CHUNK, len = n - i < TAIL_CHUNK ? n - i : TAIL_CHUNK;
        calq__logistic_rows(y + i, y + i, len, swish, s->tail_alpha);
    }
}

calq_status calq__conv_dnnl_run(calq_op_ctx *c)
{
    conv_state *s = c->state;
    if (s->dgemm) return calq__deconv_gemm_run(c, s->dgemm);
    if (!s->prim && !s->wino) return gemm_run(c, s);
    const int prev = calq__dnnl_serial_begin(s->serial);
    calq_status st = s->wino ? calq__conv_wino_run(c, s->wino) : conv_run(c, s);
    calq__dnnl_serial_end(s->serial, prev);
    if (st == CALQ_OK && s->has_tail) run_tail(c, s);
    return st;
}

static calq_status conv_run(calq_op_ctx *c, conv_state *s)
{
    CALQ_DNNL(c, dnnl_memory_set_data_handle(s->src, c->in[0]->data));
    CALQ_DNNL(c, dnnl_memory_set_data_handle(s->dst, c->out[0]->data));
    if (s->src_blk || s->dst_blk) {
        char *scratch = calq__dnnl_scratch(CALQ_SCRATCH_CONV, s->src_blk_bytes + s->dst_blk_bytes);
        if (!scratch) return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory for the convolution's scratch");
        if (s->src_blk) CALQ_DNNL(c, dnnl_memory_set_data_handle(s->src_blk, scratch));
        if (s->dst_blk) CALQ_DNNL(c, dnnl_memory_set_data_handle(s->dst_blk, scratch + s->src_blk_bytes));
    }
    if (!s->w_ready) {
        CALQ_DNNL(c, dnnl_memory_set_data_handle(s->w_user, c->in[1]->data));
        if (s->w_reorder) {
            /* weights that change per run (a channel scale folded in, exec/plan_fuse_scale.c) are
             * small next to the activations: waking the other threads for their conversion cost
             * more than the conversion (10-15 us a layer, EfficientNet-B0) */
            const bool one = calq_tensor_numel(c->in[1]) < CALQ_DNNL_SERIAL_WORK / 16;
            const int prev = calq__dnnl_serial_begin(one);
            dnnl_exec_arg_t rargs[] = {{DNNL_ARG_FROM, s->w_user}, {DNNL_ARG_TO, s->w}};
            const dnnl_status_t rs = dnnl_primitive_execute(s->w_reorder, s->stream, 2, rargs);
            calq__dnnl_serial_end(one, prev);
            CALQ_DNNL(c, rs);
        }
    }
    if (s->src_reorder) {
        dnnl_exec_arg_t rargs[] = {{DNNL_ARG_FROM, s->src}, {DNNL_ARG_TO, s->src_blk}};
        CALQ_DNNL(c, dnnl_primitive_execute(s->src_reorder, s->stream, 2, rargs));
    }
    dnnl_exec_arg_t args[4 + CALQ_CONV_MAX_POST] = {{DNNL_ARG_SRC, s->src_blk ? s->src_blk : s->src},
                                                    {DNNL_ARG_WEIGHTS, s->w},
                                                    {DNNL_ARG_DST, s->dst_blk ? s->dst_blk : s->dst}};
    int nargs = 3;
    if (s->bias) {
        CALQ_DNNL(c, dnnl_memory_set_data_handle(s->bias, c->in[2]->data));
        args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, s->bias};
    }
    /* The residual sum adds the output buffer's contents: start from the other operand, unless
     * the executor placed the output over it. */
    if (s->sum_post >= 0 && c->post[s->sum_post].operand->data != c->out[0]->data)
        memcpy(c->out[0]->data, c->post[s->sum_post].operand->data, s->dst_bytes);
    for (int i = 0, b = 0; i < c->n_post && b < s->n_bin; i++) {
        if (c->post[i].kind != CALQ_POST_ADD_CHANNEL && c->post[i].kind != CALQ_POST_MUL_CHANNEL) continue;
        CALQ_DNNL(c, dnnl_memory_set_data_handle(s->bin_mem[b], c->post[i].operand->data));
        args[nargs++] =
            (dnnl_exec_arg_t){DNNL_ARG_ATTR_MULTIPLE_POST_OP(s->bin_idx[b]) | DNNL_ARG_SRC_1, s->bin_mem[b]};
        b++;
    }
    CALQ_DNNL(c, dnnl_primitive_execute(s->prim, s->stream, nargs, args));
    if (s->dst_reorder) {
        dnnl_exec_arg_t rargs[] = {{DNNL_ARG_FROM, s->dst_blk}, {DNNL_ARG_TO, s->dst}};
        CALQ_DNNL(c, dnnl_primitive_execute(s->dst_reorder, s->stream, 2, rargs));
    }
    CALQ_DNNL(c, dnnl_stream_wait(s->stream));
    return CALQ_OK;
}
