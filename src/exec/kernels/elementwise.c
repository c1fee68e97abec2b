/* Elementwise operators: the broadcasting driver and helpers they share, the data-movement ops
 * (Identity, Dropout, Where, Cast, CastLike) and the op table. Math lives in
 * elementwise_unary.c (one input, incl. Clip) and elementwise_binary.c (broadcasting ops). */
#include <stdio.h>
#include <stdlib.h>

#include "exec/kernels/elementwise_common.h"

/* ---- broadcasting driver ------------------------------------------------------------------- */

/* Blocks are the unit of parallel work; tensors with less work than EW_PAR_WORK (elements times
 * ew_par.cost) run as one block on the calling thread. Waking the other threads costs more than
 * it saves below that: with passive OpenMP waiting (docs/cli.md, "Threads") one parallel region
 * took 60-70 us on this 2-core VM whatever its size, against 9 us for an Add over 196x192
 * elements on one thread, so a ViT's 150 small element-wise layers spent more time waking
 * threads than computing (docs/performance.md, "Small layers on one thread"). The decision
 * depends on the shape and the op only, so results stay identical for any thread count. */
#define EW_BLOCK    (1 << 14)
#define EW_PAR_WORK ((int64_t)1 << 18)

typedef struct ew_plan {
    ew_row row;
    const ew_par *p;
    int nin, nd;                   /* inputs, merged rank (>= 1) */
    int64_t dims[CALQ_MAX_DIMS];   /* merged output dims */
    int64_t str[3][CALQ_MAX_DIMS]; /* per input, element strides for the merged dims */
    const char *in[3];
    size_t isz[3], osz;
    char *out;
} ew_plan;

/* Output elements [s, e): the multi-index is derived once, then rows of the innermost merged
 * dim are handed to the row function and the index carried with additions only. */
static void ew_block(const ew_plan *pl, int64_t s, int64_t e)
{
    int64_t idx[CALQ_MAX_DIMS], off[3] = {0, 0, 0}, st[3] = {0, 0, 0}, rem = s;
    const int last = pl->nd - 1;
    for (int d = last; d >= 0; d--) {
        idx[d] = rem % pl->dims[d];
        rem /= pl->dims[d];
        for (int k = 0; k < pl->nin; k++) off[k] += idx[d] * pl->str[k][d];
    }
    for (int k = 0; k < pl->nin; k++) st[k] = pl->str[k][last];
    const void *ip[3] = {NULL, NULL, NULL};
    for (int64_t pos = s; pos < e;) {
        int64_t len = pl->dims[last] - idx[last];
        if (len > e - pos) len = e - pos;
        for (int k = 0; k < pl->nin; k++) ip[k] = pl->in[k] + (size_t)off[k] * pl->isz[k];
        pl->row(pl->p, pl->out + (size_t)pos * pl->osz, ip, st, len);
        pos += len;
        idx[last] += len;
        for (int k = 0; k < pl->nin; k++) off[k] += len * st[k];
        for (int d = last; d > 0 && idx[d] == pl->dims[d]; d--) {
            idx[d] = 0;
            idx[d - 1]++;
            for (int k = 0; k < pl->nin; k++) off[k] += pl->str[k][d - 1] - pl->dims[d] * pl->str[k][d];
        }
    }
}

void calq__ew_apply(ew_row row, const ew_par *p, calq_tensor *out, const calq_tensor *const *in, int nin)
{
    int64_t total = calq_tensor_numel(out);
    if (total <= 0) return;
    ew_plan pl;
    memset(&pl, 0, sizeof pl);
    pl.row = row;
    pl.p = p;
    pl.nin = nin;
    pl.out = out->data;
    pl.osz = calq_dtype_size(out->dtype);
    int64_t full[3][CALQ_MAX_DIMS];
    for (int k = 0; k < nin; k++) {
        calq__broadcast_strides(in[k]->dims, in[k]->ndim, out->ndim, full[k]);
        pl.in[k] = in[k]->data;
        pl.isz[k] = calq_dtype_size(in[k]->dtype);
    }
    /* Drop size-1 dims and fuse neighbours every input walks contiguously (or not at all), so
     * same-shape, scalar and per-channel cases end up with one or two long inner runs. */
    for (int d = 0; d < out->ndim; d++) {
        int64_t n = out->dims[d];
        if (n == 1) continue;
        bool fuse = pl.nd > 0;
        for (int k = 0; k < nin && fuse; k++) fuse = pl.str[k][pl.nd - 1] == full[k][d] * n;
        if (fuse) {
            pl.dims[pl.nd - 1] *= n;
            for (int k = 0; k < nin; k++) pl.str[k][pl.nd - 1] = full[k][d];
        } else {
            pl.dims[pl.nd] = n;
            for (int k = 0; k < nin; k++) pl.str[k][pl.nd] = full[k][d];
            pl.nd++;
        }
    }
    if (pl.nd == 0) {
        pl.dims[0] = 1;
        pl.nd = 1;
    }
    int64_t cost = p->cost > 0 ? p->cost : 1;
    int64_t blk = total * cost >= EW_PAR_WORK ? EW_BLOCK : total;
    int64_t nblk = (total + blk - 1) / blk;
#pragma omp parallel for schedule(static) if (nblk > 1)
    for (int64_t b = 0; b < nblk; b++) {
        int64_t s = b * blk, e = s + blk < total ? s + blk : total;
        ew_block(&pl, s, e);
    }
}

/* ---- checks -------------------------------------------------------------------------------- */

static const char *ew_types_str(unsigned types, char *buf, size_t n)
{
    size_t at = 0;
    buf[0] = 0;
    for (int t = 1; t < EW_NDT; t++) {
        if (!(types & EW_DT(t))) continue;
        int w = snprintf(buf + at, n - at, "%s%s", at ? ", " : "", calq_dtype_name((calq_dtype)t));
        if (w < 0 || (size_t)w >= n - at) break;
        at += (size_t)w;
    }
    return buf;
}

calq_status calq__ew_input(calq_op_ctx *c, int i, unsigned types, const char *what)
{
    if (i >= c->n_in || !c->in[i]) return calq__op_fail(c, CALQ_ERR_SHAPE, "%s is missing", what);
    calq_dtype t = c->in[i]->dtype;
    if ((int)t <= 0 || (int)t >= EW_NDT || !(types & EW_DT(t))) {
        char b[160];
        return calq__op_fail(c, CALQ_ERR_SHAPE, "%s has dtype %s; this operator takes %s", what, calq_dtype_name(t),
                             ew_types_str(types, b, sizeof b));
    }
    return CALQ_OK;
}

calq_status calq__ew_arity(calq_op_ctx *c, int in_lo, int in_hi, int out_hi)
{
    if (c->n_in < in_lo || c->n_in > in_hi) {
        if (in_lo == in_hi)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "takes %d input%s, the node has %d", in_lo, in_lo > 1 ? "s" : "",
                                 c->n_in);
        return calq__op_fail(c, CALQ_ERR_SHAPE, "takes %d to %d inputs, the node has %d", in_lo, in_hi, c->n_in);
    }
    if (c->n_out < 1 || c->n_out > out_hi)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "has at most %d output%s, the node has %d", out_hi,
                             out_hi > 1 ? "s" : "", c->n_out);
    return CALQ_OK;
}

calq_status calq__ew_output(calq_op_ctx *c, int i)
{
    if (i >= c->n_out || !c->out[i]) return calq__op_fail(c, CALQ_ERR_SHAPE, "output %d is missing", i);
    return CALQ_OK;
}

calq_status calq__ew_same_dtype(calq_op_ctx *c, int i, int j)
{
    if (c->in[i]->dtype != c->in[j]->dtype)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "input %d is %s but input %d is %s; they must have the same dtype", i,
                             calq_dtype_name(c->in[i]->dtype), j, calq_dtype_name(c->in[j]->dtype));
    return CALQ_OK;
}

calq_status calq__ew_broadcast(calq_op_ctx *c, int first, int n, int64_t *dims, int *nd)
{
    const calq_tensor *t0 = c->in[first];
    int cur = t0->ndim;
    for (int d = 0; d < cur; d++) dims[d] = t0->dims[d];
    for (int k = first + 1; k < first + n; k++) {
        const calq_tensor *t = c->in[k];
        int64_t tmp[CALQ_MAX_DIMS];
        int nt = 0;
        if (!calq__broadcast_shape(dims, cur, t->dims, t->ndim, tmp, &nt)) {
            char sa[96], sb[96];
            return calq__op_fail(c, CALQ_ERR_SHAPE,
                                 "input %d has shape %s, which does not broadcast with shape %s (of input%s %d%s): "
                                 "each dim must match or be 1, aligned from the right",
                                 k, calq__shape_str(t->dims, t->ndim, sb, sizeof sb),
                                 calq__shape_str(dims, cur, sa, sizeof sa), k - first > 1 ? "s" : "", first,
                                 k - first > 1 ? " and on" : "");
        }
        for (int d = 0; d < nt; d++) dims[d] = tmp[d];
        cur = nt;
    }
    *nd = cur;
    return CALQ_OK;
}

/* ---- conversions and float16 promotion ----------------------------------------------------- */

/* Any dtype to any dtype through the tensor helpers: ints convert with wrap-around like numpy's
 * astype, floats to ints truncate and saturate (NaN -> 0), anything to bool tests != 0. */
static void cast_generic(const ew_par *p, void *o, const void *const *in, const int64_t *st, int64_t n)
{
    (void)st;
    calq_tensor s = {.dtype = p->ta, .data = (void *)in[0]}, d = {.dtype = p->to, .data = o};
    bool int_src = calq__dtype_is_int(p->ta) || p->ta == CALQ_DTYPE_BOOL;
    if (int_src && calq__dtype_is_int(p->to)) {
        for (int64_t i = 0; i < n; i++) calq__tensor_set_i64(&d, i, calq__tensor_get_i64(&s, i));
    } else {
        for (int64_t i = 0; i < n; i++) calq__tensor_set_f64(&d, i, calq__tensor_get_f64(&s, i));
    }
}

EW_UN_ROW(cast_f32_f16, float, uint16_t, calq__f32_to_f16(x))
EW_UN_ROW(cast_f16_f32, uint16_t, float, calq__f16_to_f32(x))
EW_UN_ROW(cast_f32_f64, float, double, x)
EW_UN_ROW(cast_f64_f32, double, float, x)
EW_UN_ROW(cast_i32_i64, int32_t, int64_t, x)
EW_UN_ROW(cast_i64_i32, int64_t, int32_t, x)
EW_UN_ROW(cast_i64_f32, int64_t, float, x)
EW_UN_ROW(cast_i32_f32, int32_t, float, x)
EW_UN_ROW(cast_i64_f64, int64_t, double, x)
EW_UN_ROW(cast_u8_f32, uint8_t, float, x)
EW_UN_ROW(cast_b_f32, uint8_t, float, x != 0)
EW_UN_ROW(cast_f32_b, float, uint8_t, x != 0)

ew_row calq__ew_cast_row(calq_dtype from, calq_dtype to)
{
    static const struct {
        calq_dtype from, to;
        ew_row row;
    } fast[] = {
        {CALQ_DTYPE_FLOAT32, CALQ_DTYPE_FLOAT16, cast_f32_f16}, {CALQ_DTYPE_FLOAT16, CALQ_DTYPE_FLOAT32, cast_f16_f32},
        {CALQ_DTYPE_FLOAT32, CALQ_DTYPE_FLOAT64, cast_f32_f64}, {CALQ_DTYPE_FLOAT64, CALQ_DTYPE_FLOAT32, cast_f64_f32},
        {CALQ_DTYPE_INT32, CALQ_DTYPE_INT64, cast_i32_i64},     {CALQ_DTYPE_INT64, CALQ_DTYPE_INT32, cast_i64_i32},
        {CALQ_DTYPE_INT64, CALQ_DTYPE_FLOAT32, cast_i64_f32},   {CALQ_DTYPE_INT32, CALQ_DTYPE_FLOAT32, cast_i32_f32},
        {CALQ_DTYPE_INT64, CALQ_DTYPE_FLOAT64, cast_i64_f64},   {CALQ_DTYPE_UINT8, CALQ_DTYPE_FLOAT32, cast_u8_f32},
        {CALQ_DTYPE_BOOL, CALQ_DTYPE_FLOAT32, cast_b_f32},      {CALQ_DTYPE_FLOAT32, CALQ_DTYPE_BOOL, cast_f32_b},
    };
    for (size_t i = 0; i < sizeof fast / sizeof fast[0]; i++)
        if (fast[i].from == from && fast[i].to == to) return fast[i].row;
    return cast_generic;
}

/* dst (already shaped and allocated) = src converted to dst's dtype. */
static void ew_convert(calq_tensor *dst, const calq_tensor *src)
{
    if (dst->dtype == src->dtype) {
        size_t nb = calq__tensor_nbytes(src);
        if (nb && dst->data != src->data) memcpy(dst->data, src->data, nb);
        return;
    }
    ew_par p;
    memset(&p, 0, sizeof p);
    p.ta = src->dtype;
    p.to = dst->dtype;
    const calq_tensor *in[1] = {src};
    calq__ew_apply(calq__ew_cast_row(src->dtype, dst->dtype), &p, dst, in, 1);
}

bool calq__ew_has_f16(const calq_op_ctx *c)
{
    for (int i = 0; i < c->n_in; i++)
        if (c->in[i] && c->in[i]->dtype == CALQ_DTYPE_FLOAT16) return true;
    for (int i = 0; i < c->n_out; i++)
        if (c->out[i] && c->out[i]->dtype == CALQ_DTYPE_FLOAT16) return true;
    return false;
}

calq_status calq__ew_run_promoted(calq_op_ctx *c, calq_status (*run)(calq_op_ctx *c))
{
    int n = c->n_in + c->n_out;
    calq_tensor *tmp = calloc((size_t)n + 1, sizeof *tmp);
    calq_tensor **ptr = calloc((size_t)n + 1, sizeof *ptr);
    calq_status s = CALQ_OK;
    if (!tmp || !ptr) {
        s = calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory converting float16 tensors to float32");
        goto done;
    }
    for (int i = 0; i < n && s == CALQ_OK; i++) {
        calq_tensor *t = i < c->n_in ? c->in[i] : c->out[i - c->n_in];
        ptr[i] = t;
        if (!t || t->dtype != CALQ_DTYPE_FLOAT16) continue;
        tmp[i] = *t;
        tmp[i].dtype = CALQ_DTYPE_FLOAT32;
        tmp[i].data = NULL;
        s = calq__tensor_alloc(&tmp[i], c->err);
        if (s != CALQ_OK) break;
        if (i < c->n_in) ew_convert(&tmp[i], t);
        ptr[i] = &tmp[i];
    }
    if (s == CALQ_OK) {
        calq_op_ctx sub = *c;
        sub.in = ptr;
        sub.out = ptr + c->n_in;
        s = run(&sub);
    }
    if (s == CALQ_OK)
        for (int j = 0; j < c->n_out; j++)
            if (tmp[c->n_in + j].data) ew_convert(c->out[j], &tmp[c->n_in + j]);
done:
    if (tmp)
        for (int i = 0; i < n; i++) free(tmp[i].data);
    free(tmp);
    free(ptr);
    return s;
}

/* ---- Identity, Dropout --------------------------------------------------------------------- */

static calq_status identity_infer(calq_op_ctx *c)
{
    CALQ_TRY(calq__ew_arity(c, 1, 1, 1));
    CALQ_TRY(calq__ew_input(c, 0, EW_ANY, "input 0"));
    CALQ_TRY(calq__ew_output(c, 0));
    calq__set_shape(c->out[0], c->in[0]->dtype, c->in[0]->dims, c->in[0]->ndim);
    return CALQ_OK;
}

static calq_status identity_run(calq_op_ctx *c)
{
    ew_convert(c->out[0], c->in[0]);
    return CALQ_OK;
}

static calq_status dropout_infer(calq_op_ctx *c)
{
    CALQ_TRY(calq__ew_arity(c, 1, 3, 2));
    CALQ_TRY(calq__ew_input(c, 0, EW_ANY, "input 0"));
    CALQ_TRY(calq__ew_output(c, 0));
    calq__set_shape(c->out[0], c->in[0]->dtype, c->in[0]->dims, c->in[0]->ndim);
    if (c->n_in > 1 && c->in[1]) {
        CALQ_TRY(calq__ew_input(c, 1, EW_F, "input 1 (ratio)"));
        if (calq_tensor_numel(c->in[1]) != 1)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "input 1 (ratio) must hold one value, it has %lld",
                                 (long long)calq_tensor_numel(c->in[1]));
    }
    if (c->n_in > 2 && c->in[2]) {
        CALQ_TRY(calq__ew_input(c, 2, EW_BOOL, "input 2 (training_mode)"));
        if (calq_tensor_numel(c->in[2]) != 1)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "input 2 (training_mode) must hold one value, it has %lld",
                                 (long long)calq_tensor_numel(c->in[2]));
    }
    if (c->n_out > 1 && c->out[1]) {
        /* The mask was of the data's type before opset 10, bool since. */
        calq_dtype mt = c->opset < 10 ? c->in[0]->dtype : CALQ_DTYPE_BOOL;
        calq__set_shape(c->out[1], mt, c->in[0]->dims, c->in[0]->ndim);
    }
    return CALQ_OK;
}

static calq_status dropout_run(calq_op_ctx *c)
{
    const calq_tensor *tm = c->n_in > 2 ? c->in[2] : NULL, *ratio = c->n_in > 1 ? c->in[1] : NULL;
    bool training = tm && tm->data && calq_tensor_numel(tm) == 1 && ((const uint8_t *)tm->data)[0];
    /* Training mode with ratio 0 drops nothing, so it is still deterministic. */
    double r = ratio && ratio->data && calq_tensor_numel(ratio) == 1 ? calq__tensor_get_f64(ratio, 0) : 0.5;
    if (training && r != 0.0)
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED,
                             "training_mode is true with ratio %g, which drops random elements; calq runs models for "
                             "inference only: export the model in eval mode",
                             r);
    ew_convert(c->out[0], c->in[0]);
    if (c->n_out > 1 && c->out[1]) {
        calq_tensor *m = c->out[1];
        int64_t n = calq_tensor_numel(m);
        if (m->dtype == CALQ_DTYPE_BOOL) {
            if (n > 0) memset(m->data, 1, (size_t)n);
        } else {
            for (int64_t i = 0; i < n; i++) calq__tensor_set_f64(m, i, 1.0);
        }
    }
    return CALQ_OK;
}

/* ---- Where --------------------------------------------------------------------------------- */

/* Selection copies elements by size: bit patterns (NaN payloads, -0) pass through unchanged. */
#define WHERE_ROW(NAME, T)                                                                                             \
    static void NAME(const ew_par *p, void *o_, const void *const *in, const int64_t *st, int64_t n)                   \
    {                                                                                                                  \
        T *o = o_;                                                                                                     \
        const uint8_t *cond = in[0];                                                                                   \
        const T *x = in[1], *y = in[2];                                                                                \
        (void)p;                                                                                                       \
        if (st[0] == 1 && st[1] == 1 && st[2] == 1) {                                                                  \
            for (int64_t i = 0; i < n; i++) o[i] = cond[i] ? x[i] : y[i];                                              \
        } else {                                                                                                       \
            for (int64_t i = 0; i < n; i++) o[i] = cond[i * st[0]] ? x[i * st[1]] : y[i * st[2]];                      \
        }                                                                                                              \
    }
WHERE_ROW(where_1, uint8_t)
WHERE_ROW(where_2, uint16_t)
WHERE_ROW(where_4, uint32_t)
WHERE_ROW(where_8, uint64_t)

static calq_status where_infer(calq_op_ctx *c)
{
    CALQ_TRY(calq__ew_arity(c, 3, 3, 1));
    CALQ_TRY(calq__ew_input(c, 0, EW_BOOL, "input 0 (condition)"));
    CALQ_TRY(calq__ew_input(c, 1, EW_ANY, "input 1 (X)"));
    CALQ_TRY(calq__ew_input(c, 2, EW_ANY, "input 2 (Y)"));
    CALQ_TRY(calq__ew_same_dtype(c, 1, 2));
    CALQ_TRY(calq__ew_output(c, 0));
    int64_t dims[CALQ_MAX_DIMS];
    int nd = 0;
    CALQ_TRY(calq__ew_broadcast(c, 0, 3, dims, &nd));
    calq__set_shape(c->out[0], c->in[1]->dtype, dims, nd);
    return CALQ_OK;
}

static calq_status where_run(calq_op_ctx *c)
{
    ew_row row = NULL;
    switch (calq_dtype_size(c->in[1]->dtype)) {
    case 1: row = where_1; break;
    case 2: row = where_2; break;
    case 4: row = where_4; break;
    case 8: row = where_8; break;
    default: return calq__op_fail(c, CALQ_ERR_INTERNAL, "unexpected element size");
    }
    ew_par p;
    memset(&p, 0, sizeof p);
    const calq_tensor *in[3] = {c->in[0], c->in[1], c->in[2]};
    calq__ew_apply(row, &p, c->out[0], in, 3);
    return CALQ_OK;
}

/* ---- Cast, CastLike ------------------------------------------------------------------------ */

static calq_status cast_set_out(calq_op_ctx *c, calq_dtype to)
{
    CALQ_TRY(calq__ew_output(c, 0));
    calq__set_shape(c->out[0], to, c->in[0]->dims, c->in[0]->ndim);
    return CALQ_OK;
}

static calq_status cast_infer(calq_op_ctx *c)
{
    CALQ_TRY(calq__ew_arity(c, 1, 1, 1));
    CALQ_TRY(calq__ew_input(c, 0, EW_ANY, "input 0"));
    const calq_attr *a = calq__attr(c->node, "to");
    if (!a || a->type != CALQ_ATTR_INT)
        return calq__op_fail(c, CALQ_ERR_BAD_FORMAT, "the required integer attribute 'to' is missing");
    const char *name = "";
    calq_dtype to = calq__op_onnx_dtype(a->i, &name);
    if (to == CALQ_DTYPE_UNDEFINED)
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED,
                             "'to' = %lld asks for %s, which calq cannot represent (it supports float32/64/16, "
                             "bool and 8- to 64-bit integers)",
                             (long long)a->i, name);
    return cast_set_out(c, to);
}

static calq_status castlike_infer(calq_op_ctx *c)
{
    CALQ_TRY(calq__ew_arity(c, 2, 2, 1));
    CALQ_TRY(calq__ew_input(c, 0, EW_ANY, "input 0"));
    CALQ_TRY(calq__ew_input(c, 1, EW_ANY, "input 1 (target_type)"));
    return cast_set_out(c, c->in[1]->dtype);
}

static calq_status cast_run(calq_op_ctx *c)
{
    ew_convert(c->out[0], c->in[0]);
    return CALQ_OK;
}

/* ---- the table ----------------------------------------------------------------------------- */

#define EW_MANY 2147483647
/* CALQ_OP_ELEMENTWISE: the executor may run these on blocked activations (exec/op.h); it does
 * so for float32 tensors only, so the integer and bool forms never see a blocked view. */
#define UNARY(name)                                                                                                    \
    {                                                                                                                  \
        name, 1, 1, 1, 1, 0, false, calq__ew_unary_infer, calq__ew_unary_run, NULL, NULL, NULL, CALQ_OP_ELEMENTWISE    \
    }
/* the ones with a vectorized float32 kernel (elementwise_mvec.c) */
#define UNARY_MVEC(name)                                                                                               \
    {                                                                                                                  \
        name, 1, 1, 1, 1, 0, false, calq__ew_unary_infer, calq__ew_unary_run, calq__ew_unary_prepare,                  \
            calq__ew_unary_run_fast, calq__ew_unary_release, CALQ_OP_ELEMENTWISE                                       \
    }
#define BINARY(name, max_in)                                                                                           \
    {                                                                                                                  \
        name, max_in == 2 ? 2 : 1, max_in, 1, 1, 0, false, calq__ew_binary_infer, calq__ew_binary_run, NULL, NULL,     \
            NULL, CALQ_OP_ELEMENTWISE                                                                                  \
    }

const calq_op_def calq__ops_elementwise[] = {
    UNARY("Relu"),
    UNARY("LeakyRelu"),
    UNARY_MVEC("Sigmoid"),
    UNARY_MVEC("Tanh"),
    UNARY("HardSigmoid"),
    UNARY("HardSwish"),
    UNARY("Elu"),
    UNARY("Selu"),
    UNARY("Celu"),
    UNARY("Softplus"),
    UNARY("Softsign"),
    UNARY("Mish"),
    UNARY_MVEC("Gelu"),
    UNARY("BitwiseNot"),
    UNARY("ThresholdedRelu"),
    UNARY_MVEC("Exp"),
    UNARY("Log"),
    UNARY("Sqrt"),
    UNARY_MVEC("Erf"),
    UNARY("Neg"),
    UNARY("Abs"),
    UNARY("Reciprocal"),
    UNARY("Floor"),
    UNARY("Ceil"),
    UNARY("Round"),
    UNARY("Sign"),
    UNARY("Sin"),
    UNARY("Cos"),
    UNARY("Tan"),
    UNARY("Asin"),
    UNARY("Acos"),
    UNARY("Atan"),
    UNARY("Sinh"),
    UNARY("Cosh"),
    UNARY("Asinh"),
    UNARY("Acosh"),
    UNARY("Atanh"),
    UNARY("Not"),
    UNARY("IsNaN"),
    UNARY("IsInf"),
    UNARY("Shrink"),
    {"Clip", 1, 3, 1, 1, 0, false, calq__ew_clip_infer, calq__ew_clip_run, NULL, NULL, NULL, CALQ_OP_ELEMENTWISE},
    BINARY("Add", 2),
    BINARY("Sub", 2),
    BINARY("Mul", 2),
    BINARY("Div", 2),
    BINARY("Equal", 2),
    BINARY("Greater", 2),
    BINARY("Less", 2),
    BINARY("GreaterOrEqual", 2),
    BINARY("LessOrEqual", 2),
    BINARY("And", 2),
    BINARY("Or", 2),
    BINARY("Xor", 2),
    BINARY("Mod", 2),
    BINARY("BitShift", 2),
    BINARY("BitwiseAnd", 2),
    BINARY("BitwiseOr", 2),
    BINARY("BitwiseXor", 2),
    BINARY("Min", EW_MANY),
    BINARY("Max", EW_MANY),
    BINARY("Sum", EW_MANY),
    BINARY("Mean", EW_MANY),
    {"PRelu", 2, 2, 1, 1, 0, false, calq__ew_prelu_infer, calq__ew_prelu_run, NULL, NULL, NULL, CALQ_OP_ELEMENTWISE},
    {"Pow", 2, 2, 1, 1, 0, false, calq__ew_pow_infer, calq__ew_pow_run, NULL, NULL, NULL, CALQ_OP_ELEMENTWISE},
    {"Where", 3, 3, 1, 1, 0, false, where_infer, where_run, NULL, NULL, NULL, 0},
    {"Cast", 1, 1, 1, 1, 0, false, cast_infer, cast_run, NULL, NULL, NULL, 0},
    {"CastLike", 2, 2, 1, 1, 0, false, castlike_infer, cast_run, NULL, NULL, NULL, 0},
    {"Identity", 1, 1, 1, 1, 0, false, identity_infer, identity_run, NULL, NULL, NULL,
     CALQ_OP_ELEMENTWISE | CALQ_OP_VIEW},
    {"Dropout", 1, 3, 1, 2, 0, false, dropout_infer, dropout_run, NULL, NULL, NULL, 0},
    {0},
};
