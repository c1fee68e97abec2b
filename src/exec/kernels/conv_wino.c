/* Winograd 3x3 convolutions (conv_wino.h): oneDNN's Winograd kernel, one thread per
 * (image, output-channel group) task, so the arithmetic of every output does not depend on the
 * thread count.
 *
 * Why groups: with one image per call (batch 1, the common deployment case) a single-threaded
 * primitive per image leaves the other threads idle, and oneDNN's own threading of the Winograd
 * kernel splits the transforms differently for different thread counts (measured: 32 channels on
 * 112x112 and 64 on 160x160 give other bits with 2-8 threads than with 1). Two groups of output
 * channels per image keep 2 threads busy at batch 1 and cost the input transform twice; with 4
 * groups that repeated transform ate the gain (docs/performance.md, "Winograd"). The choice
 * depends on the machine (its online CPUs) and the shape only, so the same machine gives the same
 * bits for any --threads. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec/kernels/conv_wino.h"
#include "exec/kernels/dnnl_common.h"

/* Output-channel groups per image: tasks of (image, group). */
#define WINO_GROUPS 2
/* Where it beats oneDNN's direct (brgemm, channels-last) kernel at 2 threads, conversions
 * included (docs/performance.md, "Winograd"): ResNet's 64-256 channels on 56x56 to 14x14 maps,
 * and its 512 channels on 7x7. It loses on few channels (16 -> 32 on 128x128: 3x the time;
 * 48 -> 32 on 32x32: 5x), on large maps (64 -> 32 on 360x640: 1.3x), where a single-threaded
 * task's transformed tiles leave the cache, and on maps below 14x14 with fewer channels
 * (GoogLeNet's 128 -> 256 .. 160 -> 320 on 8x8: 6 % slower in all). On 7x7 with 512 channels
 * the layer alone gains little, but it keeps ResNet's last stage in nChw16c: ResNet-18 2-6 %
 * faster, ResNet-50 1-2 % (docs/performance.md, 2026-12-06). */
#define WINO_MIN_CHANNELS 64
#define WINO_MIN_SIDE     7
/* below this side, at least WINO_SMALL_MAP_CHANNELS in and out */
#define WINO_SMALL_MAP_SIDE     14
#define WINO_SMALL_MAP_CHANNELS 256
#define WINO_MAX_MAP            (112 * 112)
/* With more CPUs than this, two tasks per image leave most of them idle at batch 1, where the
 * direct kernel's own threading uses them all. */
#define WINO_MAX_CPUS 4

struct calq_conv_wino {
    int64_t n, c_in, cog;    /* images, input channels, output channels per group */
    int64_t in_map, out_map; /* input / output positions per channel */
    dnnl_primitive_t prim;   /* one image, cog output channels; planned for one thread */
    dnnl_memory_t w[WINO_GROUPS], b[WINO_GROUPS];
    calq__bulk w_buf[WINO_GROUPS]; /* w[i]'s buffers */
    float *bias;                   /* owned copy of the bias (c_out), NULL without one */
    size_t sp_bytes;               /* the primitive's scratchpad (user-managed: one per thread) */
    int slots;                     /* per-thread objects below */
    dnnl_memory_t *src, *dst, *sp;
    dnnl_stream_t *stream;
    int sum_post;     /* position of a residual sum in c->post, or -1 */
    size_t dst_bytes; /* the whole output, for the sum's copy */
    /* With another executor layout than nChw16c (channels last, on CPUs where oneDNN's direct
     * kernels prefer it), the input, the output and a residual sum's operand are converted
     * around the kernel through blocked copies in the calling thread's scratch. */
    dnnl_primitive_t in_r, out_r, sum_r;
    dnnl_memory_t x_nat, x_blk, y_blk, y_nat, s_nat;
    size_t x_blk_bytes;    /* 64-byte rounded */
    dnnl_stream_t stream0; /* the conversions' stream (the calling thread) */
};

static int online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 1024 ? 1024 : (int)n;
}

bool calq__conv_wino_fits(const calq_conv_geom *g, calq_layout native)
{
    if ((native != 16 && native != CALQ_LAYOUT_CHANNELS_LAST) || g->transpose || g->nsp != 2 || g->group != 1)
        return false;
    if (g->c_in % 16 != 0 || g->c_out % (16 * WINO_GROUPS) != 0) return false;
    if (g->c_in < WINO_MIN_CHANNELS || g->c_out < WINO_MIN_CHANNELS || g->out[0] * g->out[1] > WINO_MAX_MAP)
        return false;
    for (int i = 0; i < 2; i++) {
        if (g->k[i] != 3 || g->stride[i] != 1 || g->dil[i] != 1 || g->out_pad[i] != 0) return false;
        if (g->pad_b[i] < 0 || g->pad_b[i] > 1 || g->pad_e[i] < 0 || g->pad_e[i] > 1) return false;
        if (g->out[i] < WINO_MIN_SIDE) return false;
        if (g->out[i] < WINO_SMALL_MAP_SIDE &&
            (g->c_in < WINO_SMALL_MAP_CHANNELS || g->c_out < WINO_SMALL_MAP_CHANNELS))
            return false;
    }
    return online_cpus() <= WINO_MAX_CPUS;
}

void calq__conv_wino_free(calq_conv_wino *w)
{
    if (!w) return;
    if (w->prim) dnnl_primitive_destroy(w->prim);
    for (int i = 0; i < WINO_GROUPS; i++) {
        if (w->w[i]) dnnl_memory_destroy(w->w[i]);
        calq__bulk_free(&w->w_buf[i]);
        if (w->b[i]) dnnl_memory_destroy(w->b[i]);
    }
    for (int i = 0; i < w->slots; i++) {
        if (w->src && w->src[i]) dnnl_memory_destroy(w->src[i]);
        if (w->dst && w->dst[i]) dnnl_memory_destroy(w->dst[i]);
        if (w->sp && w->sp[i]) dnnl_memory_destroy(w->sp[i]);
        if (w->stream && w->stream[i]) dnnl_stream_destroy(w->stream[i]);
    }
    dnnl_primitive_t prims[] = {w->in_r, w->out_r, w->sum_r};
    for (int i = 0; i < 3; i++)
        if (prims[i]) dnnl_primitive_destroy(prims[i]);
    dnnl_memory_t mems[] = {w->x_nat, w->x_blk, w->y_blk, w->y_nat, w->s_nat};
    for (int i = 0; i < 5; i++)
        if (mems[i]) dnnl_memory_destroy(mems[i]);
    if (w->stream0) dnnl_stream_destroy(w->stream0);
    free(w->src);
    free(w->dst);
    free(w->sp);
    free(w->stream);
    free(w->bias);
    free(w);
}

/* The primitive descriptor for one (image, group), planned for one thread; NULL when oneDNN has
 * no Winograd kernel for it. */
static dnnl_primitive_desc_t wino_pd(const calq_op_ctx *c, const calq_conv_geom *g, int64_t cog, int n_post)
{
    dnnl_memory_desc_t smd, wmd, bmd, dmd;
    dnnl_dims_t sd = {1, g->c_in, g->in[0], g->in[1]}, dd = {1, cog, g->out[0], g->out[1]};
    dnnl_dims_t wd = {cog, g->c_in, 3, 3}, bd = {cog}, strides = {1, 1}, pl = {g->pad_b[0], g->pad_b[1]},
                pr = {g->pad_e[0], g->pad_e[1]};
    if (dnnl_memory_desc_init_by_tag(&smd, 4, sd, dnnl_f32, dnnl_aBcd16b) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&dmd, 4, dd, dnnl_f32, dnnl_aBcd16b) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&wmd, 4, wd, dnnl_f32, dnnl_format_tag_any) != dnnl_success ||
        calq__dnnl_plain_md(&bmd, bd, 1) != dnnl_success)
        return NULL;
    dnnl_convolution_desc_t cd;
    if (dnnl_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_winograd, &smd, &wmd,
                                           g->has_bias ? &bmd : NULL, &dmd, strides, pl, pr) != dnnl_success)
        return NULL;
    dnnl_primitive_attr_t attr = NULL;
    if (dnnl_primitive_attr_create(&attr) != dnnl_success) return NULL;
    dnnl_primitive_desc_t pd = NULL;
    if (calq__conv_post_ops(c, n_post, 4, cog, attr) == dnnl_success &&
        dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success) {
        /* oneDNN sizes its split of the work from OpenMP's thread count at creation */
        const int prev = omp_get_max_threads();
        omp_set_num_threads(1);
        if (dnnl_primitive_desc_create(&pd, &cd, attr, calq__dnnl_engine(), NULL) != dnnl_success) pd = NULL;
        omp_set_num_threads(prev);
    }
    dnnl_primitive_attr_destroy(attr);
    const char *impl = NULL;
    if (pd && (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl ||
               !strstr(impl, "wino"))) {
        dnnl_primitive_desc_destroy(pd);
        pd = NULL;
    }
    return pd;
}

calq_status calq__conv_wino_create(calq_op_ctx *c, const calq_conv_geom *g, int n_post, bool out_blocked,
                                   calq_conv_wino **out)
{
    *out = NULL;
    /* The weights are reordered per group once, here. */
    if (!(c->const_inputs & 2u) || !c->in[1]->data) return CALQ_OK;
    if (g->has_bias && (!(c->const_inputs & 4u) || !c->in[2]->data)) return CALQ_OK;
    int sum_post = -1;
    for (int i = 0; i < n_post; i++) {
        const calq_post_kind k = c->post[i].kind;
        /* per-channel operands would need a per-group offset: the direct kernel takes those */
        if (k == CALQ_POST_ADD_CHANNEL || k == CALQ_POST_MUL_CHANNEL) return CALQ_OK;
        if (k == CALQ_POST_SUM) {
            if (sum_post >= 0) return CALQ_OK; /* one sum: it reads the output's old contents */
            sum_post = i;
        }
    }
    const int64_t cog = g->c_out / WINO_GROUPS;
    dnnl_primitive_desc_t pd = wino_pd(c, g, cog, n_post);
    if (!pd) return CALQ_OK;

    calq_status st = CALQ_OK;
    dnnl_engine_t eng = calq__dnnl_engine();
    dnnl_stream_t s0 = NULL;
    dnnl_memory_t w_user = NULL;
    dnnl_primitive_t w_reorder = NULL;
    calq_conv_wino *w = calloc(1, sizeof *w);
    if (!w) goto oom;
    w->n = g->n;
    w->c_in = g->c_in;
    w->cog = cog;
    w->in_map = g->in[0] * g->in[1];
    w->out_map = g->out[0] * g->out[1];
    w->sum_post = sum_post;
    w->dst_bytes = (size_t)(g->n * g->c_out * w->out_map) * sizeof(float);
    CALQ_DNNL_OR_OUT(c, dnnl_primitive_create(&w->prim, pd));

    /* weights: each group's slice of the ONNX [M, C, 3, 3] array, in the kernel's layout */
    const dnnl_memory_desc_t *w_md = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    dnnl_memory_desc_t wu_md;
    dnnl_dims_t wd = {cog, g->c_in, 3, 3};
    CALQ_DNNL_OR_OUT(c, calq__dnnl_plain_md(&wu_md, wd, 4));
    CALQ_DNNL_OR_OUT(c, dnnl_memory_create(&w_user, &wu_md, eng, DNNL_MEMORY_NONE));
    CALQ_DNNL_OR_OUT(c, calq__dnnl_reorder(&w_reorder, &wu_md, w_md));
    CALQ_DNNL_OR_OUT(c, dnnl_stream_create(&s0, eng, dnnl_stream_default_flags));
    const float *wsrc = c->in[1]->data;
    for (int gi = 0; gi < WINO_GROUPS; gi++) {
        CALQ_DNNL_OR_OUT(c, calq__dnnl_memory_bulk(&w->w[gi], w_md, &w->w_buf[gi]));
        CALQ_DNNL_OR_OUT(c, dnnl_memory_set_data_handle(w_user, (void *)(wsrc + gi * cog * g->c_in * 9)));
        dnnl_exec_arg_t rargs[] = {{DNNL_ARG_FROM, w_user}, {DNNL_ARG_TO, w->w[gi]}};
        CALQ_DNNL_OR_OUT(c, dnnl_primitive_execute(w_reorder, s0, 2, rargs));
        CALQ_DNNL_OR_OUT(c, dnnl_stream_wait(s0));
    }
    if (g->has_bias) {
        w->bias = malloc((size_t)g->c_out * sizeof(float));
        if (!w->bias) goto oom;
        memcpy(w->bias, c->in[2]->data, (size_t)g->c_out * sizeof(float));
        const dnnl_memory_desc_t *b_md = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 1);
        for (int gi = 0; gi < WINO_GROUPS; gi++)
            CALQ_DNNL_OR_OUT(c, dnnl_memory_create(&w->b[gi], b_md, eng, w->bias + gi * cog));
    }

    /* per-thread memories and streams: a primitive may run on several threads at once only with
     * its own arguments and scratchpad on each */
    const dnnl_memory_desc_t *s_md = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *d_md = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    const dnnl_memory_desc_t *sp_md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    w->sp_bytes = sp_md ? dnnl_memory_desc_get_size(sp_md) : 0;
    const int slots = omp_get_max_threads() < 1 ? 1 : omp_get_max_threads();
    w->src = calloc((size_t)slots, sizeof *w->src);
    w->dst = calloc((size_t)slots, sizeof *w->dst);
    w->sp = calloc((size_t)slots, sizeof *w->sp);
    w->stream = calloc((size_t)slots, sizeof *w->stream);
    if (!w->src || !w->dst || !w->sp || !w->stream) goto oom;
    w->slots = slots;
    for (int i = 0; i < slots; i++) {
        CALQ_DNNL_OR_OUT(c, dnnl_memory_create(&w->src[i], s_md, eng, DNNL_MEMORY_NONE));
        CALQ_DNNL_OR_OUT(c, dnnl_memory_create(&w->dst[i], d_md, eng, DNNL_MEMORY_NONE));
        if (w->sp_bytes) CALQ_DNNL_OR_OUT(c, dnnl_memory_create(&w->sp[i], sp_md, eng, DNNL_MEMORY_NONE));
        CALQ_DNNL_OR_OUT(c, dnnl_stream_create(&w->stream[i], eng, dnnl_stream_default_flags));
    }
    /* Conversions: the input unless the producer wrote nChw16c, the output unless its
     * readers take nChw16c (in_layout / out_blocked, set by the caller). */
    const bool in_blk = c->in_layout[0] == 16 || c->native == 16, out_blk = out_blocked || c->native == 16;
    if (!in_blk || !out_blk) {
        dnnl_memory_desc_t xn, xb, yn, yb;
        int64_t xd[4] = {g->n, g->c_in, g->in[0], g->in[1]}, yd[4] = {g->n, g->c_out, g->out[0], g->out[1]};
        if (calq__layout_md(xd, 4, c->native, &xn) != CALQ_OK || calq__layout_md(yd, 4, c->native, &yn) != CALQ_OK ||
            calq__layout_md(xd, 4, 16, &xb) != CALQ_OK || calq__layout_md(yd, 4, 16, &yb) != CALQ_OK) {
            calq__conv_wino_free(w);
            w = NULL;
            goto out; /* declined */
        }
        CALQ_DNNL_OR_OUT(c, dnnl_stream_create(&w->stream0, eng, dnnl_stream_default_flags));
        if (!in_blk) {
            CALQ_DNNL_OR_OUT(c, calq__dnnl_reorder(&w->in_r, &xn, &xb));
            CALQ_DNNL_OR_OUT(c, dnnl_memory_create(&w->x_nat, &xn, eng, DNNL_MEMORY_NONE));
            CALQ_DNNL_OR_OUT(c, dnnl_memory_create(&w->x_blk, &xb, eng, DNNL_MEMORY_NONE));
            w->x_blk_bytes = (dnnl_memory_desc_get_size(&xb) + 63) & ~(size_t)63;
        }
        if (!out_blk) {
            CALQ_DNNL_OR_OUT(c, calq__dnnl_reorder(&w->out_r, &yb, &yn));
            if (sum_post >= 0) {
                CALQ_DNNL_OR_OUT(c, calq__dnnl_reorder(&w->sum_r, &yn, &yb));
                CALQ_DNNL_OR_OUT(c, dnnl_memory_create(&w->s_nat, &yn, eng, DNNL_MEMORY_NONE));
            }
            CALQ_DNNL_OR_OUT(c, dnnl_memory_create(&w->y_blk, &yb, eng, DNNL_MEMORY_NONE));
            CALQ_DNNL_OR_OUT(c, dnnl_memory_create(&w->y_nat, &yn, eng, DNNL_MEMORY_NONE));
        }
    }
    *out = w;
    w = NULL;
    goto out;
oom:
    st = calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory building the Winograd convolution");
out:
    if (s0) dnnl_stream_destroy(s0);
    if (w_reorder) dnnl_primitive_destroy(w_reorder);
    if (w_user) dnnl_memory_destroy(w_user);
    dnnl_primitive_desc_destroy(pd);
    calq__conv_wino_free(w);
    return st;
}

calq_status calq__conv_wino_run(calq_op_ctx *c, calq_conv_wino *w)
{
    const float *x = c->in[0]->data;
    float *y = c->out[0]->data;
    if (w->in_r || w->out_r) {
        char *scratch = calq__dnnl_scratch(CALQ_SCRATCH_CONV, w->x_blk_bytes + (w->out_r ? w->dst_bytes : 0));
        if (!scratch) return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory for the convolution's scratch");
        if (w->in_r) {
            CALQ_DNNL(c, dnnl_memory_set_data_handle(w->x_nat, c->in[0]->data));
            CALQ_DNNL(c, dnnl_memory_set_data_handle(w->x_blk, scratch));
            dnnl_exec_arg_t rargs[] = {{DNNL_ARG_FROM, w->x_nat}, {DNNL_ARG_TO, w->x_blk}};
            CALQ_DNNL(c, dnnl_primitive_execute(w->in_r, w->stream0, 2, rargs));
            x = (const float *)scratch;
        }
        if (w->out_r) {
            y = (float *)(scratch + w->x_blk_bytes);
            CALQ_DNNL(c, dnnl_memory_set_data_handle(w->y_blk, y));
            CALQ_DNNL(c, dnnl_memory_set_data_handle(w->y_nat, c->out[0]->data));
            if (w->sum_r) {
                CALQ_DNNL(c, dnnl_memory_set_data_handle(w->s_nat, c->post[w->sum_post].operand->data));
                dnnl_exec_arg_t sargs[] = {{DNNL_ARG_FROM, w->s_nat}, {DNNL_ARG_TO, w->y_blk}};
                CALQ_DNNL(c, dnnl_primitive_execute(w->sum_r, w->stream0, 2, sargs));
            }
        }
        CALQ_DNNL(c, dnnl_stream_wait(w->stream0));
    }
    if (!w->out_r && w->sum_post >= 0 && c->post[w->sum_post].operand->data != y) {
        /* The residual sum adds the output buffer's contents: start from the other operand
         * (the executor gives it in the output's layout), unless it placed the output over it. */
        memcpy(y, c->post[w->sum_post].operand->data, w->dst_bytes);
    }
    const int64_t tasks = w->n * WINO_GROUPS;
    int nt = omp_get_max_threads();
    if (nt > w->slots) nt = w->slots;
    if (nt > tasks) nt = (int)tasks;
    int failed = 0, oom = 0;
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) reduction(| : failed, oom)
    for (int64_t t = 0; t < tasks; t++) {
        const int slot = omp_get_thread_num();
        const int64_t img = t / WINO_GROUPS, gi = t % WINO_GROUPS;
        void *sp = w->sp_bytes ? calq__dnnl_scratch(CALQ_SCRATCH_WINO, w->sp_bytes) : NULL;
        if (w->sp_bytes && !sp) {
            oom = 1;
            continue;
        }
        float *yt = y + (img * WINO_GROUPS + gi) * w->cog * w->out_map;
        if (dnnl_memory_set_data_handle(w->src[slot], (void *)(x + img * w->c_in * w->in_map)) != dnnl_success ||
            dnnl_memory_set_data_handle(w->dst[slot], yt) != dnnl_success ||
            (sp && dnnl_memory_set_data_handle(w->sp[slot], sp) != dnnl_success)) {
            failed = 1;
            continue;
        }
        dnnl_exec_arg_t args[5] = {
            {DNNL_ARG_SRC, w->src[slot]}, {DNNL_ARG_WEIGHTS, w->w[gi]}, {DNNL_ARG_DST, w->dst[slot]}};
        int nargs = 3;
        if (w->b[gi]) args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, w->b[gi]};
        if (sp) args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, w->sp[slot]};
        if (dnnl_primitive_execute(w->prim, w->stream[slot], nargs, args) != dnnl_success ||
            dnnl_stream_wait(w->stream[slot]) != dnnl_success)
            failed = 1;
    }
    if (oom) return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory for the Winograd convolution's scratch");
    if (failed) return calq__op_fail(c, CALQ_ERR_INTERNAL, "oneDNN's Winograd convolution failed");
    if (w->out_r) {
        dnnl_exec_arg_t rargs[] = {{DNNL_ARG_FROM, w->y_blk}, {DNNL_ARG_TO, w->y_nat}};
        CALQ_DNNL(c, dnnl_primitive_execute(w->out_r, w->stream0, 2, rargs));
        CALQ_DNNL(c, dnnl_stream_wait(w->stream0));
    }
    return CALQ_OK;
}
