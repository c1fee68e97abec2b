/* Activation layouts (exec/layout.h): what the executor needs to keep oneDNN's activation
 * layout between layers, and the conversion step at the boundaries with plain layers, graph
 * outputs and observed tensors. */
#include "exec/layout.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/tensor.h"
#include "exec/kernels/dnnl_common.h"

static int64_t ceil_div(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

bool calq__layout_blockable(const calq_tensor *t)
{
    if (t->dtype != CALQ_DTYPE_FLOAT32 || t->ndim < 3 || t->ndim > 5) return false;
    for (int i = 0; i < t->ndim; i++)
        if (t->dims[i] < 1) return false;
    return true;
}

static int64_t spatial(const calq_tensor *t)
{
    return calq__shape_numel(t->dims + 2, t->ndim - 2);
}

static bool blocked(calq_layout l)
{
    return l > CALQ_LAYOUT_CHANNELS_LAST;
}

size_t calq__layout_nbytes(const calq_tensor *t, calq_layout l)
{
    if (!blocked(l)) return calq__tensor_nbytes(t);
    return (size_t)(t->dims[0] * ceil_div(t->dims[1], l) * l * spatial(t)) * sizeof(float);
}

void calq__layout_phys(const calq_tensor *t, calq_layout l, calq_tensor *view)
{
    *view = *t;
    if (l == CALQ_LAYOUT_CHANNELS_LAST) {
        for (int d = 1; d + 1 < t->ndim; d++) view->dims[d] = t->dims[d + 1];
        view->dims[t->ndim - 1] = t->dims[1];
    } else if (blocked(l)) {
        view->dims[1] = ceil_div(t->dims[1], l);
        view->dims[t->ndim] = l;
        view->ndim = t->ndim + 1;
    }
}

void calq__layout_phys_bcast(const calq_tensor *t, int rank, calq_layout l, calq_tensor *view)
{
    calq_tensor lifted = *t;
    const int lift = rank - t->ndim;
    for (int d = rank - 1; d >= 0; d--) lifted.dims[d] = d >= lift ? t->dims[d - lift] : 1;
    lifted.ndim = rank;
    calq__layout_phys(&lifted, l, view); /* C = 1: one block of one lane, or a last axis of 1 */
    if (blocked(l)) view->dims[rank] = 1;
}

bool calq__layout_has_pads(const calq_tensor *t, calq_layout l)
{
    return blocked(l) && t->dims[1] % l != 0;
}

void calq__layout_zero_pads(const calq_tensor *t, calq_layout l)
{
    if (!calq__layout_has_pads(t, l)) return;
    const int64_t C = t->dims[1], cb = ceil_div(C, l), sp = spatial(t), used = C - (cb - 1) * l;
    float *x = t->data;
    for (int64_t n = 0; n < t->dims[0]; n++) {
        float *blk = x + ((n * cb + cb - 1) * sp) * l;
        for (int64_t s = 0; s < sp; s++) memset(blk + s * l + used, 0, sizeof(float) * (size_t)(l - used));
    }
}

/* ---- the native layout ------------------------------------------------------------------------- */

static calq_layout native_layout;
static pthread_once_t native_once = PTHREAD_ONCE_INIT;

/* A typical 3x3 convolution with every format left to oneDNN: the activation format it picks is
 * the one its fastest kernels use on this CPU. */
static void probe_native_layout(void)
{
    dnnl_engine_t eng = calq__dnnl_engine();
    if (!eng) return;
    dnnl_dims_t sd = {1, 64, 28, 28}, wd = {64, 64, 3, 3}, st = {1, 1}, dil = {0, 0}, pad = {1, 1};
    dnnl_memory_desc_t smd, wmd, dmd;
    dnnl_convolution_desc_t cd;
    dnnl_primitive_desc_t pd = NULL;
    if (dnnl_memory_desc_init_by_tag(&smd, 4, sd, dnnl_f32, dnnl_format_tag_any) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&wmd, 4, wd, dnnl_f32, dnnl_format_tag_any) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&dmd, 4, sd, dnnl_f32, dnnl_format_tag_any) != dnnl_success ||
        dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &smd, &wmd,
                                                   NULL, &dmd, st, dil, pad, pad) != dnnl_success ||
        dnnl_primitive_desc_create(&pd, &cd, NULL, eng, NULL) != dnnl_success)
        return;
    const dnnl_memory_desc_t *src = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    if (src && src->format_kind == dnnl_blocked) {
        const dnnl_blocking_desc_t *b = &src->format_desc.blocking;
        if (b->inner_nblks == 1 && b->inner_idxs[0] == 1 && (b->inner_blks[0] == 8 || b->inner_blks[0] == 16))
            native_layout = (calq_layout)b->inner_blks[0];
        else if (b->inner_nblks == 0 && b->strides[1] == 1 && b->strides[3] == 64)
            native_layout = CALQ_LAYOUT_CHANNELS_LAST;
    }
    dnnl_primitive_desc_destroy(pd);
}

calq_layout calq__layout_native(void)
{
    pthread_once(&native_once, probe_native_layout);
    return native_layout;
}

/* ---- the conversion step ----------------------------------------------------------------------- */

/* Offset of element (n, c, s) of an [N, C, spatial] tensor stored in layout l. */
static int64_t at(calq_layout l, int64_t C, int64_t sp, int64_t n, int64_t c, int64_t s)
{
    if (l == CALQ_LAYOUT_CHANNELS_LAST) return (n * sp + s) * C + c;
    if (blocked(l)) return ((n * ceil_div(C, l) + c / l) * sp + s) * l + c % l;
    return (n * C + c) * sp + s;
}

/* Reference: element by element. Padding channels of a blocked destination are written as
 * zeros. */
static void convert_ref(const calq_tensor *x, calq_layout from, calq_tensor *y, calq_layout to)
{
    const int64_t N = x->dims[0], C = x->dims[1], sp = spatial(x);
    const float *src = x->data;
    float *dst = y->data;
    if (blocked(to)) memset(dst, 0, calq__layout_nbytes(y, to));
#pragma omp parallel for collapse(2) schedule(static) if (N * C * sp >= 65536)
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t s = 0; s < sp; s++) dst[at(to, C, sp, n, c, s)] = src[at(from, C, sp, n, c, s)];
}

static calq_status convert_infer(calq_op_ctx *c)
{
    calq__set_shape(c->out[0], c->in[0]->dtype, c->in[0]->dims, c->in[0]->ndim);
    return CALQ_OK;
}

static calq_status convert_run(calq_op_ctx *c)
{
    convert_ref(c->in[0], c->in_layout ? c->in_layout[0] : 0, c->out[0], c->out_layout ? c->out_layout[0] : 0);
    return CALQ_OK;
}

/* Conversions of fewer elements than this run on the calling thread: a copy of 512 KB takes a
 * few microseconds, about what waking the other threads costs (ShuffleNet's 47 conversions per
 * image, around its channel shuffles, took more time than its convolutions). A pure copy: the
 * result does not depend on the thread count. */
#define CONVERT_SERIAL_ELEMS ((int64_t)1 << 17)

typedef struct convert_state {
    dnnl_primitive_t prim;
    dnnl_memory_t src, dst;
    dnnl_stream_t stream;
    bool serial;
} convert_state;

static void convert_release(void *state)
{
    convert_state *s = state;
    if (!s) return;
    if (s->prim) dnnl_primitive_destroy(s->prim);
    if (s->src) dnnl_memory_destroy(s->src);
    if (s->dst) dnnl_memory_destroy(s->dst);
    if (s->stream) dnnl_stream_destroy(s->stream);
    free(s);
}

dnnl_format_tag_t calq__layout_tag(calq_layout l, int ndim)
{
    static const dnnl_format_tag_t plain[] = {dnnl_abc, dnnl_abcd, dnnl_abcde};
    static const dnnl_format_tag_t last[] = {dnnl_acb, dnnl_acdb, dnnl_acdeb};
    static const dnnl_format_tag_t b8[] = {dnnl_aBc8b, dnnl_aBcd8b, dnnl_aBcde8b};
    static const dnnl_format_tag_t b16[] = {dnnl_aBc16b, dnnl_aBcd16b, dnnl_aBcde16b};
    if (ndim < 3 || ndim > 5) return dnnl_format_tag_undef;
    switch (l) {
    case CALQ_LAYOUT_PLAIN: return plain[ndim - 3];
    case CALQ_LAYOUT_CHANNELS_LAST: return last[ndim - 3];
    case 8: return b8[ndim - 3];
    case 16: return b16[ndim - 3];
    default: return dnnl_format_tag_undef;
    }
}

calq_status calq__layout_md(const int64_t *dims, int ndim, calq_layout l, dnnl_memory_desc_t *md)
{
    if (l == CALQ_LAYOUT_PLAIN)
        return calq__dnnl_plain_md(md, dims, ndim) == dnnl_success ? CALQ_OK : CALQ_ERR_UNSUPPORTED;
    const dnnl_format_tag_t tag = calq__layout_tag(l, ndim);
    if (tag == dnnl_format_tag_undef) return CALQ_ERR_UNSUPPORTED;
    dnnl_dims_t d;
    for (int i = 0; i < ndim; i++) d[i] = dims[i];
    return dnnl_memory_desc_init_by_tag(md, ndim, d, dnnl_f32, tag) == dnnl_success ? CALQ_OK : CALQ_ERR_UNSUPPORTED;
}

static calq_status convert_prepare(calq_op_ctx *c)
{
    c->state = NULL;
    dnnl_engine_t eng = calq__dnnl_engine();
    if (!eng || !c->in_layout || !c->out_layout) return CALQ_OK;
    dnnl_memory_desc_t smd, dmd;
    if (calq__layout_md(c->in[0]->dims, c->in[0]->ndim, c->in_layout[0], &smd) != CALQ_OK ||
        calq__layout_md(c->out[0]->dims, c->out[0]->ndim, c->out_layout[0], &dmd) != CALQ_OK)
        return CALQ_OK;
    convert_state *s = calloc(1, sizeof *s);
    if (!s) return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory for a layout conversion");
    s->serial = calq_tensor_numel(c->in[0]) < CONVERT_SERIAL_ELEMS;
    dnnl_primitive_desc_t pd = NULL;
    const int prev = calq__dnnl_serial_begin(s->serial);
    dnnl_status_t ds = dnnl_reorder_primitive_desc_create(&pd, &smd, eng, &dmd, eng, NULL);
    if (ds == dnnl_success) ds = dnnl_primitive_create(&s->prim, pd);
    calq__dnnl_serial_end(s->serial, prev);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (ds == dnnl_success) ds = dnnl_memory_create(&s->src, &smd, eng, DNNL_MEMORY_NONE);
    if (ds == dnnl_success) ds = dnnl_memory_create(&s->dst, &dmd, eng, DNNL_MEMORY_NONE);
    if (ds == dnnl_success) ds = dnnl_stream_create(&s->stream, eng, dnnl_stream_default_flags);
    if (ds != dnnl_success) {
        convert_release(s);
        return CALQ_OK; /* the plain loop converts instead */
    }
    c->state = s;
    return CALQ_OK;
}

static calq_status convert_run_fast(calq_op_ctx *c)
{
    convert_state *s = c->state;
    CALQ_DNNL(c, dnnl_memory_set_data_handle(s->src, c->in[0]->data));
    CALQ_DNNL(c, dnnl_memory_set_data_handle(s->dst, c->out[0]->data));
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, s->src}, {DNNL_ARG_TO, s->dst}};
    const int prev = calq__dnnl_serial_begin(s->serial);
    dnnl_status_t st = dnnl_primitive_execute(s->prim, s->stream, 2, args);
    if (st == dnnl_success) st = dnnl_stream_wait(s->stream);
    calq__dnnl_serial_end(s->serial, prev);
    CALQ_DNNL(c, st);
    return CALQ_OK;
}

const calq_op_def calq__op_layout_convert = {.op_type = "calq.LayoutConvert",
                                             .min_inputs = 1,
                                             .max_inputs = 1,
                                             .min_outputs = 1,
                                             .max_outputs = 1,
                                             .infer = convert_infer,
                                             .run = convert_run,
                                             .prepare = convert_prepare,
                                             .run_fast = convert_run_fast,
                                             .release = convert_release,
                                             .flags = CALQ_OP_LAYOUTS};
