/* Fused LayerNormalization and GELU steps (fused_transformer.h).
 *
 * LayerNorm: oneDNN's layer normalization (simple_layer_normalization, JIT statistics and data
 * kernels on AVX2 and AVX-512): 7.5 us for a ViT's 197x192 rows on one thread, where the nine
 * written-out layers take a pass over the tensor each. It sums in float32 where the layers' fast
 * kernels do too, but in another order, so results differ from the unfused layers by float
 * rounding (within the fast-vs-reference tolerance); each row is computed by one thread, so they
 * do not depend on the thread count. The `_ref` kernel computes the same formula in double.
 *
 * GELU: one pass of elementwise_mvec.c's gelu_parts row instead of five passes. */
#include "exec/kernels/fused_transformer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernels/dnnl_common.h"
#include "exec/kernels/elementwise_common.h"
#include "exec/kernels/elementwise_mvec.h"

/* Below this many elements the normalization runs on the calling thread (as reduce_dnnl.c). */
#define LN_SERIAL_ELEMS ((int64_t)1 << 17)

typedef struct fused_ln {
    float eps;
    int64_t rows, len;
    bool serial;
    dnnl_primitive_t prim;
    dnnl_stream_t stream;
    dnnl_memory_t src, dst, scale, shift;
} fused_ln;

static int64_t row_len(const calq_tensor *x)
{
    return x->ndim > 0 ? x->dims[x->ndim - 1] : 1;
}

static calq_status same_shape_infer(calq_op_ctx *c)
{
    calq__set_shape(c->out[0], c->in[0]->dtype, c->in[0]->dims, c->in[0]->ndim);
    return CALQ_OK;
}

/* The reference: (x - mean) / sqrt(var + eps) * scale + bias per row, in double. */
static calq_status ln_run_ref(calq_op_ctx *c)
{
    const fused_ln *s = c->state;
    const float *x = c->in[0]->data, *g = c->in[1] ? c->in[1]->data : NULL, *b = c->in[2] ? c->in[2]->data : NULL;
    float *y = c->out[0]->data;
    const int64_t len = row_len(c->in[0]), rows = len ? calq_tensor_numel(c->in[0]) / len : 0;
#pragma omp parallel for schedule(static) if (rows * len > LN_SERIAL_ELEMS)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * len;
        double mean = 0.0, var = 0.0;
        for (int64_t j = 0; j < len; j++) mean += xr[j];
        mean /= (double)len;
        for (int64_t j = 0; j < len; j++) var += ((double)xr[j] - mean) * ((double)xr[j] - mean);
        var /= (double)len;
        const double inv = 1.0 / sqrt(var + (double)s->eps);
        for (int64_t j = 0; j < len; j++)
            y[r * len + j] = (float)(((double)xr[j] - mean) * inv * (g ? g[j] : 1.0) + (b ? b[j] : 0.0));
    }
    return CALQ_OK;
}

static calq_status ln_run_fast(calq_op_ctx *c)
{
    const fused_ln *s = c->state;
    CALQ_DNNL(c, dnnl_memory_set_data_handle(s->src, c->in[0]->data));
    CALQ_DNNL(c, dnnl_memory_set_data_handle(s->dst, c->out[0]->data));
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, s->src}, {DNNL_ARG_DST, s->dst}};
    int n = 2;
    if (s->scale) {
        CALQ_DNNL(c, dnnl_memory_set_data_handle(s->scale, c->in[1]->data));
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_SCALE, s->scale};
    }
    if (s->shift) {
        CALQ_DNNL(c, dnnl_memory_set_data_handle(s->shift, c->in[2]->data));
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_SHIFT, s->shift};
    }
    int prev = calq__dnnl_serial_begin(s->serial);
    dnnl_status_t st = dnnl_primitive_execute(s->prim, s->stream, n, args);
    if (st == dnnl_success) st = dnnl_stream_wait(s->stream);
    calq__dnnl_serial_end(s->serial, prev);
    CALQ_DNNL(c, st);
    return CALQ_OK;
}

static void ln_release(void *state)
{
    fused_ln *s = state;
    if (!s) return;
    dnnl_memory_t mems[4] = {s->src, s->dst, s->scale, s->shift};
    for (int i = 0; i < 4; i++)
        if (mems[i]) dnnl_memory_destroy(mems[i]);
    if (s->stream) dnnl_stream_destroy(s->stream);
    if (s->prim) dnnl_primitive_destroy(s->prim);
    free(s);
}

static dnnl_status_t ln_init(fused_ln *s, bool scale, bool shift, dnnl_engine_t eng)
{
    dnnl_memory_desc_t md, vmd;
    const dnnl_dims_t d = {s->rows, s->len}, v = {s->len};
    dnnl_status_t st = dnnl_memory_desc_init_by_tag(&md, 2, d, dnnl_f32, dnnl_ab);
    if (st == dnnl_success) st = dnnl_memory_desc_init_by_tag(&vmd, 1, v, dnnl_f32, dnnl_a);
    dnnl_layer_normalization_desc_t desc;
    unsigned flags = (scale ? (unsigned)dnnl_use_scale : 0u) | (shift ? (unsigned)dnnl_use_shift : 0u);
    if (st == dnnl_success)
        st = dnnl_layer_normalization_forward_desc_init(&desc, dnnl_forward_inference, &md, NULL, s->eps, flags);
    dnnl_primitive_desc_t pd = NULL;
    if (st == dnnl_success) st = dnnl_primitive_desc_create(&pd, &desc, NULL, eng, NULL);
    if (st != dnnl_success) return st;
    const char *impl = NULL;
    /* oneDNN's reference layer normalization is a scalar loop: not worth a fused step */
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl ||
        strncmp(impl, "ref", 3) == 0)
        st = dnnl_unimplemented;
    if (st == dnnl_success) st = dnnl_primitive_create(&s->prim, pd);
    if (st == dnnl_success) st = dnnl_stream_create(&s->stream, eng, dnnl_stream_default_flags);
    if (st == dnnl_success) st = dnnl_memory_create(&s->src, &md, eng, DNNL_MEMORY_NONE);
    if (st == dnnl_success) st = dnnl_memory_create(&s->dst, &md, eng, DNNL_MEMORY_NONE);
    if (st == dnnl_success && scale) st = dnnl_memory_create(&s->scale, &vmd, eng, DNNL_MEMORY_NONE);
    if (st == dnnl_success && shift) st = dnnl_memory_create(&s->shift, &vmd, eng, DNNL_MEMORY_NONE);
    dnnl_primitive_desc_destroy(pd);
    return st;
}

calq_status calq__fused_layer_norm_prepare(calq_op_ctx *c, float eps)
{
    c->state = NULL;
    const calq_tensor *x = c->in[0];
    dnnl_engine_t eng = calq__dnnl_engine();
    if (!eng || x->dtype != CALQ_DTYPE_FLOAT32 || x->ndim < 1) return CALQ_OK;
    fused_ln *s = calloc(1, sizeof *s);
    if (!s) return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory for the oneDNN state");
    s->eps = eps;
    s->len = row_len(x);
    s->rows = s->len > 0 ? calq_tensor_numel(x) / s->len : 0;
    s->serial = s->rows * s->len < LN_SERIAL_ELEMS;
    if (s->rows <= 0 || s->len <= 0) {
        free(s);
        return CALQ_OK;
    }
    int prev = calq__dnnl_serial_begin(s->serial);
    dnnl_status_t st = ln_init(s, c->in[1] != NULL, c->in[2] != NULL, eng);
    calq__dnnl_serial_end(s->serial, prev);
    if (st != dnnl_success) {
        ln_release(s);
        return CALQ_OK;
    }
    c->state = s;
    return CALQ_OK;
}

const calq_op_def calq__op_fused_layer_norm = {.op_type = "calq.FusedLayerNorm",
                                               .min_inputs = 1,
                                               .max_inputs = 3,
                                               .min_outputs = 1,
                                               .max_outputs = 1,
                                               .infer = same_shape_infer,
                                               .run = ln_run_ref,
                                               .run_fast = ln_run_fast,
                                               .release = ln_release};

/* ---- GELU ------------------------------------------------------------------------------------ */

typedef struct fused_gelu {
    ew_par par;
    ew_row row;
} fused_gelu;

static void gelu_parts_ref(const ew_par *p, void *out, const void *const *in, const int64_t *st, int64_t n)
{
    float *y = out;
    const float *x = in[0];
    const float c1 = (float)p->a, c2 = (float)p->b, c3 = (float)p->g;
    for (int64_t i = 0; i < n; i++) {
        const float v = x[i * st[0]];
        const float a = erff((p->form & GELU_PARTS_MUL_FIRST) ? v * c1 : v / c1) + c2;
        y[i] = (p->form & GELU_PARTS_SCALE_FIRST) ? (v * c3) * a : (v * a) * c3;
    }
}

static calq_status gelu_run(calq_op_ctx *c, bool fast)
{
    const fused_gelu *s = c->state;
    const calq_tensor *in[1] = {c->in[0]};
    calq__ew_apply(fast ? s->row : gelu_parts_ref, &s->par, c->out[0], in, 1);
    return CALQ_OK;
}

static calq_status gelu_run_ref(calq_op_ctx *c)
{
    return gelu_run(c, false);
}

static calq_status gelu_run_fast(calq_op_ctx *c)
{
    return gelu_run(c, true);
}

calq_status calq__fused_gelu_prepare(calq_op_ctx *c, float c1, float c2, float c3, unsigned form)
{
    c->state = NULL;
    ew_row row = calq__ew_mvec_gelu_parts_row();
    if (!row || c->in[0]->dtype != CALQ_DTYPE_FLOAT32) return CALQ_OK;
    fused_gelu *s = calloc(1, sizeof *s);
    if (!s) return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory");
    s->row = row;
    s->par.a = c1;
    s->par.b = c2;
    s->par.g = c3;
    s->par.form = form;
    s->par.cost = 3; /* a vector erf per 8 or 16 elements and four float operations */
    c->state = s;
    return CALQ_OK;
}

static void gelu_release(void *state)
{
    free(state);
}

const calq_op_def calq__op_fused_gelu = {.op_type = "calq.FusedGelu",
                                         .min_inputs = 1,
                                         .max_inputs = 1,
                                         .min_outputs = 1,
                                         .max_outputs = 1,
                                         .infer = same_shape_infer,
                                         .run = gelu_run_ref,
                                         .run_fast = gelu_run_fast,
                                         .release = gelu_release,
                                         .flags = CALQ_OP_ELEMENTWISE};
