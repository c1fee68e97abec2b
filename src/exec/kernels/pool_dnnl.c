/* oneDNN pooling for MaxPool/AveragePool on plain (NCW, NCHW, NCDHW) tensors.
 *
 * oneDNN derives its output size with floor arithmetic, so ONNX ceil_mode is expressed as
 * extra right padding. That is exact for max pooling and for averages that exclude padding
 * (oneDNN neither reads nor counts padding there); averages that include padding would count
 * the extra columns, so those windows are declined. Windows lying wholly in padding are
 * declined too: the result of an empty window is an implementation choice.
 *
 * On plain layouts oneDNN 2.6 has JIT pooling only for AVX-512; elsewhere it falls back to
 * its simple_nchw / ref implementations, which measured 4-20x slower than calq's reference
 * kernel (e.g. 2x2/2 max on 1x16x120x160: 2.8 ms vs 0.39 ms, one thread). So only JIT
 * implementations are kept, and everything else runs the reference kernel.
 * With the executor's layouts (c->in_layout), a float32 input that arrives in the executor's
 * layout (channels last or blocked, where oneDNN's JIT kernels exist for AVX2 too) is pooled in
 * it and the output stays in it. Every output is computed by one thread, whatever the thread
 * count. */
#include <stdlib.h>
#include <string.h>

#include "exec/kernels/dnnl_common.h"
#include "exec/kernels/pool_dnnl.h"

/* True when every output position along one axis has at least one tap inside the input. */
static bool axis_windows_touch_input(const calq_pool_geom *g, int i)
{
    for (int64_t o = 0; o < g->out[i]; o++) {
        int64_t start = o * g->stride[i] - g->pad_begin[i], d = g->dilation[i];
        int64_t j0 = start >= 0 ? 0 : (-start + d - 1) / d;
        if (j0 >= g->kernel[i] || start + j0 * d >= g->in[i]) return false;
    }
    return true;
}

/* A memory descriptor in layout l (plain for integer data). */
static dnnl_status_t pool_md(dnnl_memory_desc_t *md, dnnl_data_type_t dt, const int64_t *dims, int ndim, calq_layout l)
{
    dnnl_dims_t d = {0};
    for (int i = 0; i < ndim; i++) d[i] = dims[i];
    const dnnl_format_tag_t tag = calq__layout_tag(l, ndim);
    return tag == dnnl_format_tag_undef ? dnnl_unimplemented : dnnl_memory_desc_init_by_tag(md, ndim, d, dt, tag);
}

/* The pooling's operation descriptor; any oneDNN refusal just declines. */
static dnnl_status_t describe(dnnl_pooling_v2_desc_t *desc, const calq_pool_geom *g, dnnl_data_type_t dt,
                              const int64_t *pad_r, calq_layout block)
{
    int ndim = 2 + g->nsp;
    int64_t sdims[2 + CALQ_POOL_MAX_SPATIAL] = {g->n, g->c}, ddims[2 + CALQ_POOL_MAX_SPATIAL] = {g->n, g->c};
    dnnl_dims_t strides = {0}, kernel = {0}, dil = {0}, pl = {0}, pr = {0};
    for (int i = 0; i < g->nsp; i++) {
        sdims[2 + i] = g->in[i];
        ddims[2 + i] = g->out[i];
        strides[i] = g->stride[i];
        kernel[i] = g->kernel[i];
        dil[i] = g->dilation[i] - 1; /* oneDNN counts dilation from 0 */
        pl[i] = g->pad_begin[i];
        pr[i] = pad_r[i];
    }
    dnnl_memory_desc_t smd, dmd;
    dnnl_status_t s;
    if ((s = pool_md(&smd, dt, sdims, ndim, block)) != dnnl_success) return s;
    if ((s = pool_md(&dmd, dt, ddims, ndim, block)) != dnnl_success) return s;
    dnnl_alg_kind_t alg = g->kind == CALQ_POOL_MAX ? dnnl_pooling_max
                          : g->count_include_pad   ? dnnl_pooling_avg_include_padding
                                                   : dnnl_pooling_avg_exclude_padding;
    return dnnl_pooling_v2_forward_desc_init(desc, dnnl_forward_inference, alg, &smd, &dmd, strides, kernel, dil, pl,
                                             pr);
}

calq_status calq__pool_dnnl_prepare(calq_op_ctx *c, const calq_pool_geom *g, bool jit_only)
{
    c->state = NULL;
    dnnl_data_type_t dt;
    switch (c->in[0]->dtype) {
    case CALQ_DTYPE_FLOAT32: dt = dnnl_f32; break;
    case CALQ_DTYPE_UINT8: dt = dnnl_u8; break;
    case CALQ_DTYPE_INT8: dt = dnnl_s8; break;
    default: return CALQ_OK;
    }
    /* Integer inputs reach here only for MaxPool (AveragePool's infer accepts float32 only);
     * an integer average would round inside oneDNN, so keep that case out explicitly. */
    if (dt != dnnl_f32 && g->kind != CALQ_POOL_MAX) return CALQ_OK;
    if (g->n <= 0 || g->c <= 0) return CALQ_OK;

    int64_t pad_r[CALQ_POOL_MAX_SPATIAL];
    for (int i = 0; i < g->nsp; i++) {
        if (g->out[i] <= 0 || !axis_windows_touch_input(g, i)) return CALQ_OK;
        int64_t eff = (g->kernel[i] - 1) * g->dilation[i] + 1, s = g->stride[i];
        pad_r[i] = g->pad_end[i];
        if ((g->in[i] + g->pad_begin[i] + pad_r[i] - eff) / s + 1 != g->out[i]) {
            /* ceil_mode: pad on the right just enough for the last window. */
            pad_r[i] = (g->out[i] - 1) * s + eff - g->in[i] - g->pad_begin[i];
            if (pad_r[i] < 0) return CALQ_OK;
            if (g->kind == CALQ_POOL_AVG && g->count_include_pad && pad_r[i] > g->pad_end[i]) return CALQ_OK;
        }
    }

    /* in the executor's layout when the input arrives in it, the output in the same */
    const calq_layout block =
        c->in_layout && c->out_layout && dt == dnnl_f32 && c->in_layout[0] == c->native ? c->native : CALQ_LAYOUT_PLAIN;
    dnnl_pooling_v2_desc_t desc;
    if (describe(&desc, g, dt, pad_r, block) != dnnl_success) return CALQ_OK;
    /* Pooling reads an input element in well under a nanosecond: below 2^18 elements a wake-up of
     * the other thread (60-70 us on this VM) costs more than the work (the squeeze-excite pools
     * of a MobileNetV3 took 50 us each on two threads). Each output is one thread's either way. */
    int64_t in_elems = g->n * g->c;
    for (int i = 0; i < g->nsp; i++) in_elems *= g->in[i];
    CALQ_TRY(calq__dnnl_unary_prepare(c, &desc, in_elems < ((int64_t)1 << 18), jit_only));
    if (c->state && c->out_layout) c->out_layout[0] = block;
    return CALQ_OK;
}
