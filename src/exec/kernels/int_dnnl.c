/* oneDNN int8 convolution and matrix product for calq's integer layers: the exact int32 sums
 * (int_dnnl.h has the contract and why it is exact).
 *
 * Weights are centered once in prepare (w - w_zp, which must fit int8: symmetric int8 weights,
 * or uint8 ones with zero point 128) and reordered into oneDNN's layout. The activation's zero
 * point is a oneDNN attribute: oneDNN computes sum (x - x_zp) * w over the taps inside the input,
 * i.e. padding counts as x_zp, zero once centered, as calq's reference kernels define it
 * (conv_int.c). oneDNN's integer kernels run on channels-last activations, so the input is
 * reordered into a per-thread scratch buffer first and the sums are written channels-last too.
 * oneDNN threads these primitives itself (OpenMP, the session's thread count); integer sums do
 * not depend on how it splits them. */
#include "exec/kernels/int_dnnl.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernels/dnnl_common.h"
#include "exec/kernels/int_accum.h"

static bool exact_isa;
static pthread_once_t isa_once = PTHREAD_ONCE_INIT;

static void isa_init(void)
{
    /* avx512_core_vnni and every ISA above it (bf16, amx) carry its bits */
    const unsigned vnni = (unsigned)dnnl_cpu_isa_avx512_core_vnni;
    exact_isa = ((unsigned)dnnl_get_effective_cpu_isa() & vnni) == vnni;
}

bool calq__int_dnnl_exact(void)
{
    pthread_once(&isa_once, isa_init);
    return exact_isa && calq__dnnl_engine() != NULL;
}

static size_t round64(size_t n)
{
    return (n + 63) & ~(size_t)63;
}

static dnnl_data_type_t dnnl_q8(calq_dtype t)
{
    return t == CALQ_DTYPE_UINT8 ? dnnl_u8 : dnnl_s8;
}

/* w - zp as int8, element i using zp[(i / inner) % numel(zp)]; NULL when a value does not fit
 * int8 (or out of memory). Owner: the caller (free). */
static int8_t *centered_s8(const calq_tensor *w, const calq_tensor *zp, int64_t inner)
{
    const int64_t n = calq_tensor_numel(w);
    int16_t *c16 = calq__int_centered(w, 0, zp, inner > 0 ? inner : 1); /* owner: this function */
    int8_t *c8 = c16 ? malloc((size_t)(n + 1)) : NULL;
    bool fits = c8 != NULL;
    for (int64_t i = 0; fits && i < n; i++) {
        fits = c16[i] >= -128 && c16[i] <= 127;
        c8[i] = (int8_t)c16[i];
    }
    free(c16);
    if (!fits) {
        free(c8);
        return NULL;
    }
    return c8;
}

/* oneDNN's reference implementations are slower than calq's own loops; the VNNI kernels are
 * the ones this file is for (and GEMM-based ones run the same integer kernels). */
static bool usable_impl(dnnl_primitive_desc_t pd)
{
    const char *impl = NULL;
    return dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl &&
           strncmp(impl, "ref", 3) != 0;
}

/* An attribute with the activation's zero point (none when 0). Owner: the caller. */
static dnnl_status_t zp_attr(dnnl_primitive_attr_t *attr, const int32_t *zp)
{
    dnnl_status_t ds = dnnl_primitive_attr_create(attr);
    if (ds == dnnl_success && *zp != 0) ds = dnnl_primitive_attr_set_zero_points(*attr, DNNL_ARG_SRC, 1, 0, zp);
    return ds;
}

/* Reorders the centered weights (user layout) into the primitive's and keeps them in *w. */
static dnnl_status_t load_weights(const dnnl_memory_desc_t *user, const dnnl_memory_desc_t *want, const int8_t *data,
                                  dnnl_stream_t stream, dnnl_memory_t *w, calq__bulk *buf)
{
    dnnl_engine_t eng = calq__dnnl_engine();
    dnnl_memory_t from = NULL;
    dnnl_primitive_t r = NULL;
    dnnl_status_t ds = calq__dnnl_memory_bulk(w, want, buf);
    if (ds == dnnl_success) ds = dnnl_memory_create(&from, user, eng, (void *)data);
    if (ds == dnnl_success) ds = calq__dnnl_reorder(&r, user, want);
    if (ds == dnnl_success) {
        dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, *w}};
        ds = dnnl_primitive_execute(r, stream, 2, args);
    }
    if (ds == dnnl_success) ds = dnnl_stream_wait(stream);
    if (r) dnnl_primitive_destroy(r);
    if (from) dnnl_memory_destroy(from);
    return ds;
}

/* ---- convolution --------------------------------------------------------------------------- */

struct calq_int_conv_dnnl {
    dnnl_primitive_t prim, src_reorder; /* src_reorder NULL when NCHW is already channels-last */
    dnnl_memory_t src, src_cl, w, dst;  /* src: the NCHW input; src_cl, dst: scratch handles */
    calq__bulk w_buf;                   /* w's buffer */
    size_t src_cl_bytes, dst_bytes;
    dnnl_stream_t stream;
};

void calq__int_conv_dnnl_free(calq_int_conv_dnnl *s)
{
    if (!s) return;
    if (s->prim) dnnl_primitive_destroy(s->prim);
    if (s->src_reorder) dnnl_primitive_destroy(s->src_reorder);
    dnnl_memory_t mems[] = {s->src, s->src_cl, s->w, s->dst};
    for (size_t i = 0; i < sizeof mems / sizeof mems[0]; i++)
        if (mems[i]) dnnl_memory_destroy(mems[i]);
    calq__bulk_free(&s->w_buf);
    if (s->stream) dnnl_stream_destroy(s->stream);
    free(s);
}

/* The conv's oneDNN shapes, 1-D as 2-D with height 1 (identical memory layouts). */
typedef struct conv_dims {
    dnnl_dims_t src, dst, w, strides, dil, pad_l, pad_r;
    int wnd;
} conv_dims;

static bool conv_dims_of(const calq_conv_geom *g, conv_dims *d)
{
    if (g->transpose || g->nsp < 1 || g->nsp > 2) return false;
    const int lead = 2 - g->nsp;
    int64_t in[2] = {1, 1}, out[2] = {1, 1}, k[2] = {1, 1}, st[2] = {1, 1}, dl[2] = {1, 1}, pb[2] = {0, 0},
            pe[2] = {0, 0};
    for (int i = 0; i < g->nsp; i++) {
        in[lead + i] = g->in[i];
        out[lead + i] = g->out[i];
        k[lead + i] = g->k[i];
        st[lead + i] = g->stride[i];
        dl[lead + i] = g->dil[i];
        pb[lead + i] = g->pad_b[i];
        pe[lead + i] = g->pad_e[i];
    }
    int64_t src[4] = {g->n, g->c_in, in[0], in[1]}, dst[4] = {g->n, g->c_out, out[0], out[1]};
    memcpy(d->src, src, sizeof src);
    memcpy(d->dst, dst, sizeof dst);
    for (int i = 0; i < 2; i++) {
        if (pb[i] < 0 || pe[i] < 0) return false;
        d->strides[i] = st[i];
        d->dil[i] = dl[i] - 1; /* oneDNN counts the gaps between taps */
        d->pad_l[i] = pb[i];
        d->pad_r[i] = pe[i];
    }
    int nd = 0;
    if (g->group > 1) d->w[nd++] = g->group;
    d->w[nd++] = g->c_out / g->group;
    d->w[nd++] = g->c_in / g->group;
    d->w[nd++] = k[0];
    d->w[nd++] = k[1];
    d->wnd = nd;
    return true;
}

/* oneDNN's fastest integer convolutions (brgconv) take uint8 input without a zero point. An int8
 * input with zero point -128 (what a ReLU's output quantizes to) is that data recoded: q + 128
 * with zero point 0, exactly, so the channels-last reorder recodes it on the way (a reorder with
 * a source zero point of -128). That reorder costs about three plain ones, which pays where each
 * input element feeds enough multiply-adds. */
#define RECODE_MIN_WORK 1024

static bool recode_pays(const calq_int_conv_desc *d, const conv_dims *cd)
{
    const int64_t k = cd->w[cd->wnd - 1] * cd->w[cd->wnd - 2], st = cd->strides[0] * cd->strides[1];
    return d->x_type == CALQ_DTYPE_INT8 && d->x_zp == -128 && d->g.group == 1 &&
           d->g.c_out / d->g.group * k >= RECODE_MIN_WORK * st;
}

calq_status calq__int_conv_dnnl_create(calq_op_ctx *c, const calq_int_conv_desc *d, calq_int_conv_dnnl **out)
{
    *out = NULL;
    const calq_conv_geom *g = &d->g;
    conv_dims cd;
    if (!calq__int_dnnl_exact() || g->n == 0 || !conv_dims_of(g, &cd)) return CALQ_OK;
    const int64_t per_m = (g->c_in / g->group) * cd.w[cd.wnd - 1] * cd.w[cd.wnd - 2];
    if (per_m > CALQ_INT_DNNL_MAX_K || !d->w->data) return CALQ_OK;
    int8_t *w8 = centered_s8(d->w, d->w_zp, per_m); /* owner: this function */
    if (!w8) return CALQ_OK;

    dnnl_engine_t eng = calq__dnnl_engine();
    const bool recode = recode_pays(d, &cd);
    const int32_t conv_zp = recode ? 0 : d->x_zp, reorder_zp = recode ? -128 : 0;
    const dnnl_data_type_t xt = dnnl_q8(d->x_type), ct = recode ? dnnl_u8 : xt;
    dnnl_memory_desc_t src_nchw, src_cl, dst_cl, w_user, w_any;
    dnnl_primitive_attr_t attr = NULL, rattr = NULL;
    dnnl_primitive_desc_t pd = NULL, rpd = NULL;
    calq_int_conv_dnnl *s = NULL;
    calq_status st = CALQ_OK;
    dnnl_status_t ds = dnnl_memory_desc_init_by_tag(&src_nchw, 4, cd.src, xt, dnnl_nchw);
    if (ds == dnnl_success) ds = dnnl_memory_desc_init_by_tag(&src_cl, 4, cd.src, ct, dnnl_nhwc);
    if (ds == dnnl_success) ds = dnnl_memory_desc_init_by_tag(&dst_cl, 4, cd.dst, dnnl_s32, dnnl_nhwc);
    if (ds == dnnl_success)
        ds = dnnl_memory_desc_init_by_tag(&w_user, cd.wnd, cd.w, dnnl_s8, cd.wnd == 5 ? dnnl_goihw : dnnl_oihw);
    if (ds == dnnl_success) ds = dnnl_memory_desc_init_by_tag(&w_any, cd.wnd, cd.w, dnnl_s8, dnnl_format_tag_any);
    if (ds == dnnl_success) ds = zp_attr(&attr, &conv_zp);
    if (ds == dnnl_success) {
        dnnl_convolution_desc_t cv;
        ds = dnnl_dilated_convolution_forward_desc_init(&cv, dnnl_forward_inference, dnnl_convolution_direct, &src_cl,
                                                        &w_any, NULL, &dst_cl, cd.strides, cd.dil, cd.pad_l, cd.pad_r);
        if (ds == dnnl_success) ds = dnnl_primitive_desc_create(&pd, &cv, attr, eng, NULL);
    }
    if (ds != dnnl_success || !usable_impl(pd)) goto out; /* oneDNN cannot: decline */
    if (recode || !dnnl_memory_desc_equal(&src_nchw, &src_cl)) {
        ds = zp_attr(&rattr, &reorder_zp);
        if (ds == dnnl_success) ds = dnnl_reorder_primitive_desc_create(&rpd, &src_nchw, eng, &src_cl, eng, rattr);
        if (ds != dnnl_success) goto out; /* decline */
    }

    s = calloc(1, sizeof *s);
    if (!s) {
        st = calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory building the integer convolution");
        goto out;
    }
    ds = dnnl_primitive_create(&s->prim, pd);
    if (ds == dnnl_success) ds = dnnl_stream_create(&s->stream, eng, dnnl_stream_default_flags);
    if (ds == dnnl_success)
        ds = load_weights(&w_user, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0), w8, s->stream, &s->w,
                          &s->w_buf);
    if (ds == dnnl_success) ds = dnnl_memory_create(&s->src, &src_nchw, eng, DNNL_MEMORY_NONE);
    if (ds == dnnl_success) ds = dnnl_memory_create(&s->dst, &dst_cl, eng, DNNL_MEMORY_NONE);
    if (ds == dnnl_success && rpd) {
        ds = dnnl_memory_create(&s->src_cl, &src_cl, eng, DNNL_MEMORY_NONE);
        if (ds == dnnl_success) ds = dnnl_primitive_create(&s->src_reorder, rpd);
        s->src_cl_bytes = round64(dnnl_memory_desc_get_size(&src_cl));
    }
    s->dst_bytes = round64(dnnl_memory_desc_get_size(&dst_cl));
    if (ds != dnnl_success) {
        st = calq__dnnl_check(c, ds, "building the integer convolution");
        goto out;
    }
    *out = s;
    s = NULL;
out:
    calq__int_conv_dnnl_free(s);
    if (rpd) dnnl_primitive_desc_destroy(rpd);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (rattr) dnnl_primitive_attr_destroy(rattr);
    if (attr) dnnl_primitive_attr_destroy(attr);
    free(w8);
    return st;
}

calq_status calq__int_conv_dnnl_run(calq_op_ctx *c, const calq_int_conv_dnnl *s, const void *x, const int32_t **acc)
{
    char *scratch = calq__dnnl_scratch(CALQ_SCRATCH_INT, s->src_cl_bytes + s->dst_bytes);
    if (!scratch)
        return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory for the integer convolution's scratch");
    CALQ_DNNL(c, dnnl_memory_set_data_handle(s->src, (void *)x));
    CALQ_DNNL(c, dnnl_memory_set_data_handle(s->dst, scratch + s->src_cl_bytes));
    if (s->src_reorder) {
        CALQ_DNNL(c, dnnl_memory_set_data_handle(s->src_cl, scratch));
        dnnl_exec_arg_t rargs[] = {{DNNL_ARG_FROM, s->src}, {DNNL_ARG_TO, s->src_cl}};
        CALQ_DNNL(c, dnnl_primitive_execute(s->src_reorder, s->stream, 2, rargs));
    }
    dnnl_exec_arg_t args[] = {
        {DNNL_ARG_SRC, s->src_reorder ? s->src_cl : s->src}, {DNNL_ARG_WEIGHTS, s->w}, {DNNL_ARG_DST, s->dst}};
    CALQ_DNNL(c, dnnl_primitive_execute(s->prim, s->stream, 3, args));
    CALQ_DNNL(c, dnnl_stream_wait(s->stream));
    *acc = (const int32_t *)(scratch + s->src_cl_bytes);
    return CALQ_OK;
}

/* ---- matrix product ------------------------------------------------------------------------ */

struct calq_int_mm_dnnl {
    dnnl_primitive_t prim;
    dnnl_memory_t src, w, dst; /* src: the caller's a; dst: scratch handle */
    calq__bulk w_buf;          /* w's buffer */
    size_t dst_bytes;
    dnnl_stream_t stream;
};

void calq__int_mm_dnnl_free(calq_int_mm_dnnl *s)
{
    if (!s) return;
    if (s->prim) dnnl_primitive_destroy(s->prim);
    dnnl_memory_t mems[] = {s->src, s->w, s->dst};
    for (size_t i = 0; i < sizeof mems / sizeof mems[0]; i++)
        if (mems[i]) dnnl_memory_destroy(mems[i]);
    calq__bulk_free(&s->w_buf);
    if (s->stream) dnnl_stream_destroy(s->stream);
    free(s);
}

calq_status calq__int_mm_dnnl_create(calq_op_ctx *c, const calq_int_mm_desc *d, calq_int_mm_dnnl **out)
{
    *out = NULL;
    if (!calq__int_dnnl_exact() || d->M < 1 || d->N < 1 || d->K < 1 || d->K > CALQ_INT_DNNL_MAX_K || !d->b->data)
        return CALQ_OK;
    /* b's zero point is per column: [K, N] holds column i % N, a transposed [N, K] column i / K */
    int8_t *b8 = centered_s8(d->b, d->b_zp, d->trans_b ? d->K : 1); /* owner: this function */
    if (!b8) return CALQ_OK;
    dnnl_engine_t eng = calq__dnnl_engine();
    dnnl_dims_t a_dims = {d->M, d->K}, b_dims = {d->K, d->N}, y_dims = {d->M, d->N};
    dnnl_dims_t a_str = {d->trans_a ? 1 : d->K, d->trans_a ? d->M : 1};
    dnnl_dims_t b_str = {d->trans_b ? 1 : d->N, d->trans_b ? d->K : 1};
    dnnl_memory_desc_t a_md, b_user, b_any, y_md;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    calq_int_mm_dnnl *s = NULL;
    calq_status st = CALQ_OK;
    dnnl_status_t ds = dnnl_memory_desc_init_by_strides(&a_md, 2, a_dims, dnnl_q8(d->a_type), a_str);
    if (ds == dnnl_success) ds = dnnl_memory_desc_init_by_strides(&b_user, 2, b_dims, dnnl_s8, b_str);
    if (ds == dnnl_success) ds = dnnl_memory_desc_init_by_tag(&b_any, 2, b_dims, dnnl_s8, dnnl_format_tag_any);
    if (ds == dnnl_success) ds = dnnl_memory_desc_init_by_tag(&y_md, 2, y_dims, dnnl_s32, dnnl_ab);
    if (ds == dnnl_success) ds = zp_attr(&attr, &d->a_zp);
    if (ds == dnnl_success) {
        dnnl_matmul_desc_t md;
        ds = dnnl_matmul_desc_init(&md, &a_md, &b_any, NULL, &y_md);
        if (ds == dnnl_success) ds = dnnl_primitive_desc_create(&pd, &md, attr, eng, NULL);
    }
    if (ds != dnnl_success || !usable_impl(pd)) goto out; /* oneDNN cannot: decline */
    s = calloc(1, sizeof *s);
    if (!s) {
        st = calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory building the integer matrix product");
        goto out;
    }
    ds = dnnl_primitive_create(&s->prim, pd);
    if (ds == dnnl_success) ds = dnnl_stream_create(&s->stream, eng, dnnl_stream_default_flags);
    if (ds == dnnl_success)
        ds = load_weights(&b_user, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0), b8, s->stream, &s->w,
                          &s->w_buf);
    if (ds == dnnl_success) ds = dnnl_memory_create(&s->src, &a_md, eng, DNNL_MEMORY_NONE);
    if (ds == dnnl_success) ds = dnnl_memory_create(&s->dst, &y_md, eng, DNNL_MEMORY_NONE);
    s->dst_bytes = round64(dnnl_memory_desc_get_size(&y_md));
    if (ds != dnnl_success) {
        st = calq__dnnl_check(c, ds, "building the integer matrix product");
        goto out;
    }
    *out = s;
    s = NULL;
out:
    calq__int_mm_dnnl_free(s);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    free(b8);
    return st;
}

calq_status calq__int_mm_dnnl_run(calq_op_ctx *c, const calq_int_mm_dnnl *s, const void *a, const int32_t **acc)
{
    char *scratch = calq__dnnl_scratch(CALQ_SCRATCH_INT, s->dst_bytes);
    if (!scratch)
        return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory for the integer matrix product's scratch");
    CALQ_DNNL(c, dnnl_memory_set_data_handle(s->src, (void *)a));
    CALQ_DNNL(c, dnnl_memory_set_data_handle(s->dst, scratch));
    dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, s->src}, {DNNL_ARG_WEIGHTS, s->w}, {DNNL_ARG_DST, s->dst}};
    CALQ_DNNL(c, dnnl_primitive_execute(s->prim, s->stream, 3, args));
    CALQ_DNNL(c, dnnl_stream_wait(s->stream));
    *acc = (const int32_t *)scratch;
    return CALQ_OK;
}
