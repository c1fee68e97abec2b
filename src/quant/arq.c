/* ARQ weight quantization (amct-reference.md §6.1): per output channel or per tensor, max-abs
 * symmetric (or min/max asymmetric), float32 as AMCT's WtsArqCalibrationCpuKernel, then the int8
 * weights as ArqQuantReal and the fake-quant weights as ArqClipAndQuant.
 *
 * Output channels (§8.2). Conv weights are [Cout, Cin/group, k...] for plain, group and depthwise
 * convolutions alike, so channel c is the contiguous block c of dim 0. ConvTranspose weights are
 * [Cin, Cout/group, k...]: output channel g*(Cout/group) + j collects, for every input channel
 * ci of group g, the slice [ci, j, ...]. AMCT transposes such a weight so output channels come
 * first; calq indexes it in place and writes the int8 weight in the original layout. Recurrent
 * weights (LSTM / GRU / RNN W and R, [directions, gates*hidden, in]) have one channel per
 * direction and gate row (§8.1 CHANNEL_WISE_ONNX_TYPES), a contiguous run of the last axis. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "quant/quant.h"

void calq_arq_opts_init(calq_arq_opts *o)
{
    if (!o) return; /* as the free functions: nothing to fill */
    memset(o, 0, sizeof *o);
    o->channel_wise = 1;
    o->asymmetric = 0;
    o->num_bits = 8;
    o->round_mode = CALQ_ROUND_HALF_AWAY;
}

/* Geometry of the output channels: numel = outer * c_in_block ... see run_len(). */
typedef struct arq_geom {
    int64_t numel, n_scales;
    int64_t d0, d1, inner; /* dims[0], dims[1], product of the rest */
    int64_t last;          /* the last dim (RNN rows) */
    int64_t cin_per_group; /* ConvTranspose */
} arq_geom;

static int geometry(const calq_tensor *w, calq_weight_layout layout, int group, const calq_arq_opts *o, arq_geom *g)
{
    memset(g, 0, sizeof *g);
    if (!w || w->ndim < 1 || w->ndim > CALQ_MAX_DIMS) return 0;
    g->numel = calq_tensor_numel(w);
    if (g->numel <= 0) return 0;
    g->d0 = w->dims[0];
    g->d1 = w->ndim > 1 ? w->dims[1] : 1;
    g->inner = 1;
    for (int i = 2; i < w->ndim; i++) g->inner *= w->dims[i];
    g->last = w->dims[w->ndim - 1];
    if (group < 1) group = 1;
    if (!o->channel_wise) {
        g->n_scales = 1;
        return 1;
    }
    switch (layout) {
    case CALQ_WEIGHTS_CONV: g->n_scales = g->d0; return 1;
    case CALQ_WEIGHTS_CONV_TRANSPOSE:
        if (w->ndim < 2 || g->d0 % group != 0) return 0;
        g->cin_per_group = g->d0 / group;
        g->n_scales = (int64_t)group * g->d1;
        return 1;
    case CALQ_WEIGHTS_MATRIX: return 0; /* channel_wise on FC is an error (§8.4) */
    case CALQ_WEIGHTS_RNN:
        if (w->ndim < 2 || g->last <= 0) return 0;
        g->n_scales = g->numel / g->last;
        return 1;
    }
    return 0;
}

int64_t calq_arq_num_scales(const calq_tensor *w, calq_weight_layout layout, int group, const calq_arq_opts *o)
{
    calq_arq_opts d;
    if (!o) {
        calq_arq_opts_init(&d);
        o = &d;
    }
    arq_geom g;
    return geometry(w, layout, group, o, &g) ? g.n_scales : -1;
}

/* The elements of one output channel come in contiguous runs of run_len() elements (a whole
 * channel for convolutions, a row for recurrent weights, a [ci, j] slice for ConvTranspose), so
 * the loops below find a run's channel once instead of dividing per element (ARQ was 2-3 % of a
 * ResNet-18 calibration in `perf`, mostly those 64-bit divisions). */
static int64_t run_len(const arq_geom *g, calq_weight_layout layout, int channel_wise)
{
    if (!channel_wise) return g->numel;
    if (layout == CALQ_WEIGHTS_CONV) return g->numel / g->d0;
    if (layout == CALQ_WEIGHTS_RNN) return g->last;
    return g->inner;
}

/* The output channel of run r. */
static int64_t channel_of_run(const arq_geom *g, calq_weight_layout layout, int channel_wise, int64_t r)
{
    if (!channel_wise) return 0;
    if (layout == CALQ_WEIGHTS_CONV || layout == CALQ_WEIGHTS_RNN) return r;
    /* ConvTranspose: run r = ci * d1 + j */
    int64_t ci = r / g->d1, j = r % g->d1;
    return (ci / g->cin_per_group) * g->d1 + j;
}

calq_status calq_arq_quantize(const calq_tensor *w, calq_weight_layout layout, int group, const calq_arq_opts *o,
                              const char *layer, float *scale_w, int *offset_w, int8_t *w_q, float *w_fake,
                              calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    calq_arq_opts d;
    if (!o) {
        calq_arq_opts_init(&d);
        o = &d;
    }
    CALQ_REQUIRE(err, w);
    CALQ_REQUIRE(err, scale_w);
    CALQ_REQUIRE(err, offset_w);
    if ((unsigned)layout > CALQ_WEIGHTS_RNN)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, layer,
                          "calq_arq_quantize: layout %d is not a calq_weight_layout", (int)layout);
    const char *name = calq__name(layer);
    if (w->dtype != CALQ_DTYPE_FLOAT32 || !w->data)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, layer, "ARQ of layer \"%s\": the weight must be float32", name);
    if (o->num_bits < 2)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, layer,
                          "arqParam.numBits = %d, it should be greater than 2. (layer \"%s\")", o->num_bits, name);
    if (o->num_bits > 8)
        return calq__fail(err, CALQ_ERR_UNSUPPORTED, layer,
                          "ARQ of layer \"%s\": num_bits %d; calq writes int8 weights (at most 8 bits)", name,
                          o->num_bits);
    if (layout == CALQ_WEIGHTS_MATRIX && o->channel_wise)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, layer,
                          "ARQ of layer \"%s\": channel_wise is not supported for Gemm/InnerProduct/MatMul weights; "
                          "set channel_wise to false",
                          name);
    arq_geom g;
    if (!geometry(w, layout, group, o, &g))
        return calq__fail(err, CALQ_ERR_SHAPE, layer,
                          "ARQ of layer \"%s\": a weight of %d dims (%" PRId64 " elements) does not fit the %s layout "
                          "with group %d",
                          name, w->ndim, calq_tensor_numel(w),
                          layout == CALQ_WEIGHTS_CONV             ? "convolution [Cout, Cin/group, k...]"
                          : layout == CALQ_WEIGHTS_CONV_TRANSPOSE ? "transposed convolution [Cin, Cout/group, k...]"
                          : layout == CALQ_WEIGHTS_RNN            ? "recurrent [directions, gates*hidden, in]"
                                                                  : "matrix",
                          group);
    const float *x = w->data;
    for (int64_t e = 0; e < g.numel; e++)
        if (isnan(x[e]))
            return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, layer,
                              "Exist NaN in input data, cannot do ARQ quantize. (layer \"%s\", element %" PRId64 ")",
                              name, e);

    const int64_t C = g.n_scales;
    float *mx = malloc((size_t)C * sizeof *mx), *mn = malloc((size_t)C * sizeof *mn);
    int *offs = malloc((size_t)C * sizeof *offs);
    if (!mx || !mn || !offs) {
        free(mx);
        free(mn);
        free(offs);
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, layer, "ARQ: out of memory");
    }
    for (int64_t c = 0; c < C; c++) {
        mx[c] = -FLT_MAX;
        mn[c] = FLT_MAX;
    }
    const int64_t run = run_len(&g, layout, o->channel_wise);
    for (int64_t r = 0; r < g.numel / run; r++) {
        const int64_t c = channel_of_run(&g, layout, o->channel_wise, r);
        float lo = mn[c], hi = mx[c];
        for (const float *p = x + r * run, *end = p + run; p < end; p++) {
            if (*p < lo) lo = *p;
            if (*p > hi) hi = *p;
        }
        mn[c] = lo;
        mx[c] = hi;
    }
    const float max_limit = (float)((1 << (o->num_bits - 1)) - 1), min_limit = (float)-(1 << (o->num_bits - 1));
    calq_status st = CALQ_OK;
    for (int64_t c = 0; c < C && st == CALQ_OK; c++) {
        float s;
        int off;
        if (!o->asymmetric) {
            /* max-abs with its sign; a tie picks the negative side; all zeros gives 0 -> 1.0 */
            float t = fabsf(mx[c]) > fabsf(mn[c]) ? mx[c] : mn[c];
            s = t > 0.0f ? t / max_limit : t / min_limit;
            off = 0;
        } else {
            float hi = mx[c] < 0.0f ? 0.0f : mx[c], lo = mn[c] > 0.0f ? 0.0f : mn[c];
            float span = hi - lo;
            s = span / (max_limit - min_limit);
            off = 0;
        }
        float raw = s;
        calq__scale_rule r = calq__process_scale(&s);
        if (r != CALQ__SCALE_OK) {
            char text[256];
            calq__scale_rule_text(r, s, text, sizeof text);
            st = calq__fail(err, CALQ_ERR_NOT_SUPPORT, layer,
                            "ArqQuantCPU scale is illegal. %s Layer \"%s\", channel %" PRId64 " of %" PRId64
                            ": weight range [%.9g, %.9g], scale %.9g. Add the layer to skip_layers.",
                            text, name, c, C, (double)mn[c], (double)mx[c], (double)raw);
            break;
        }
        if (o->asymmetric) {
            float lo = mn[c] > 0.0f ? 0.0f : mn[c];
            float q = -lo / s;
            float rq = roundf(q);
            off = (int)(rq + min_limit);
        }
        scale_w[c] = s;
        offs[c] = off;
        if (offset_w) offset_w[c] = off;
    }
    free(mx);
    free(mn);
    if (st != CALQ_OK) {
        free(offs);
        return st;
    }

    const int lo_q = -(1 << (o->num_bits - 1)), hi_q = (1 << (o->num_bits - 1)) - 1;
    if (w_q || w_fake) {
        for (int64_t r0 = 0; r0 < g.numel / run; r0++) {
            const int64_t c = channel_of_run(&g, layout, o->channel_wise, r0);
            const float s = scale_w[c];
            const int off = offs[c];
            for (int64_t e = r0 * run; e < (r0 + 1) * run; e++) {
                float t = x[e] / s;
                float r = calq__round_mode(t, o->round_mode);
                /* static_cast<int>(round(w/s) + offset); |w/s| <= 2^(n-1) by construction, inf stays clamped */
                float v = r + (float)off;
                int q = v >= 2147483520.0f ? INT32_MAX : v <= -2147483520.0f ? INT32_MIN : (int)v;
                q = q < lo_q ? lo_q : q > hi_q ? hi_q : q;
                if (w_q) w_q[e] = (int8_t)q;
                if (w_fake) w_fake[e] = (float)(q - off) * s;
            }
        }
    }
    free(offs);
    return CALQ_OK;
}
