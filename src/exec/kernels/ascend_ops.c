/* AMCT's Ascend operators, which deploy and fake-quant models carry as custom nodes in the
 * default ONNX domain (amct-reference.md §9.1, §9.3), as plain reference kernels:
 *   AscendQuant      float -> int8:  q = clamp(round(x*scale) + offset, -128, 127), scale = 1/scale_d,
 *                    offset = offset_d. Rounding first, then adding the integral offset, is the
 *                    fake-quant form Mul(1/scale_d) -> Round -> Add(offset) -> Clip of §9.2.
 *   AscendDequant    int32 -> float: y = x * deq_scale, deq_scale a packed uint64 per tensor or
 *                    per channel (§6.3), with the shift_n requantization of §6.4.
 *   AscendAntiQuant  int8 -> float:  y = (x + offset) * scale (calq writes offset = -offset_d,
 *                    so y = (q - offset_d) * scale_d; §9.3, §13.4).
 * sqrt_mode applies the scale twice (a scale beyond the fp16 range is stored as its root, §9.1).
 * Every output element depends on its input element only, so the OpenMP loops give the same
 * bits for any thread count.
 *
 * The integer layers between AscendQuant and AscendDequant (int8 Conv, Gemm, ... -> int32) are
 * the internal operators of calq__ops_ascend_int below (ascend.h), which the lowering pass
 * creates; their kernels are in their families' files. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/tensor.h"
#include "exec/kernels/ascend.h"
#include "exec/kernels/conv_dnnl.h"
#include "exec/kernels/pool_dnnl.h"
#include "exec/kernels/quant_gemm.h"
#include "exec/op.h"

/* Below this many elements the OpenMP fork costs more than the work. */
#define ASCEND_PAR_MIN 32768

typedef enum { RND_ROUND, RND_FLOOR, RND_CEIL, RND_TRUNC, RND_HALF_AWAY } round_kind;

typedef struct quant_params {
    float scale, offset;
    bool sqrt_mode;
    round_kind round;
} quant_params;

/* A 0/1 attribute (sqrt_mode, relu_flag), default 0: false when it holds another value. */
static bool flag_attr(const calq_node *n, const char *name, bool *out)
{
    int64_t v = calq__attr_int(n, name, 0);
    *out = v == 1;
    return v == 0 || v == 1;
}

/* AscendQuant's attributes (§9.1), validated: CALQ_OK, or the status and the reason in why.
 * Shared by the kernel and by the integer layers reading the offset, so both reject the same
 * nodes. Values outside the attributes' domains are malformed models (CALQ_ERR_BAD_FORMAT);
 * valid AMCT settings calq does not implement (dst_type other than INT8) are CALQ_ERR_UNSUPPORTED. */
static calq_status quant_params_of(const calq_node *n, quant_params *p, char *why, size_t nwhy)
{
    p->scale = calq__attr_float(n, "scale", NAN);
    p->offset = calq__attr_float(n, "offset", 0.0f);
    p->round = RND_ROUND;
    if (!calq__attr(n, "scale")) {
        snprintf(why, nwhy, "the scale attribute (1/scale_d) is required");
        return CALQ_ERR_BAD_FORMAT;
    }
    if (!isfinite(p->scale) || p->scale <= 0.0f) {
        snprintf(why, nwhy, "scale %g must be finite and > 0 (it is 1/scale_d)", (double)p->scale);
        return CALQ_ERR_BAD_FORMAT;
    }
    if (p->offset != floorf(p->offset) || p->offset < -128.0f || p->offset > 127.0f) {
        snprintf(why, nwhy, "offset %g must be an integer in [-128, 127] (it is offset_d, §0.3)", (double)p->offset);
        return CALQ_ERR_BAD_FORMAT;
    }
    if (!flag_attr(n, "sqrt_mode", &p->sqrt_mode)) {
        snprintf(why, nwhy, "sqrt_mode must be 0 or 1");
        return CALQ_ERR_BAD_FORMAT;
    }
    /* round_kind order; "RoundHalfAway" is calq's own, for AMCT's Caffe fake Quant layer */
    static const char *const modes[] = {"Round", "Floor", "Ceil", "Trunc", "RoundHalfAway"};
    const char *rm = calq__attr_str(n, "round_mode", "Round");
    size_t k = 0;
    while (k < 5 && strcmp(rm, modes[k]) != 0) k++;
    if (k == 5) {
        snprintf(why, nwhy, "round_mode '%.64s' is not one of Round, Floor, Ceil, Trunc, RoundHalfAway", rm);
        return CALQ_ERR_BAD_FORMAT;
    }
    p->round = (round_kind)k;
    const char *dst = calq__attr_str(n, "dst_type", "INT8");
    if (strcmp(dst, "INT8") != 0) {
        snprintf(why, nwhy, "dst_type '%.64s' is not supported: calq implements INT8 only", dst);
        return CALQ_ERR_UNSUPPORTED;
    }
    return CALQ_OK;
}

/* ---- AscendQuant -------------------------------------------------------------------------- */

static calq_status quant_check(calq_op_ctx *c, quant_params *p)
{
    char why[160];
    calq_status st = quant_params_of(c->node, p, why, sizeof why);
    if (st != CALQ_OK) return calq__op_fail(c, st, "%s", why);
    calq_dtype t = c->in[0]->dtype;
    if (t != CALQ_DTYPE_FLOAT32 && t != CALQ_DTYPE_FLOAT16)
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "input must be float32 or float16, not %s", calq_dtype_name(t));
    return CALQ_OK;
}

static calq_status quant_infer(calq_op_ctx *c)
{
    quant_params p;
    CALQ_TRY(quant_check(c, &p));
    calq__set_shape(c->out[0], CALQ_DTYPE_INT8, c->in[0]->dims, c->in[0]->ndim);
    return CALQ_OK;
}

static float round_as(float v, round_kind k)
{
    switch (k) {
    case RND_FLOOR: return floorf(v);
    case RND_CEIL: return ceilf(v);
    case RND_TRUNC: return truncf(v);
    case RND_HALF_AWAY:
        return roundf(v); /* Caffe's fake Quant (IFMR's ClipAndQuant, §9.2) */
    /* "Round": ties to even, the device's conversion (amct-reference.md §0.3, §10 "rint path");
     * it is also what the ONNX Round of AMCT's fake-quant model does (§9.2), so the deploy and
     * fake-quant models agree at ties */
    default: return calq_round(v, CALQ_ROUND_HALF_EVEN);
    }
}

/* The float arithmetic is exact where it matters: round() gives an integer, and adding the
 * offset (|offset| <= 128) to it is exact below 2^24, beyond which the clamp decides anyway.
 * NaN becomes 0, as calq's float-to-integer Cast does. */
static int8_t quant_one(float x, const quant_params *p)
{
    float v = x * p->scale;
    if (p->sqrt_mode) v *= p->scale;
    float q = round_as(v, p->round) + p->offset;
    if (isnan(q)) return 0;
    return (int8_t)(q < -128.0f ? -128.0f : q > 127.0f ? 127.0f : q);
}

static calq_status quant_run(calq_op_ctx *c)
{
    quant_params p;
    CALQ_TRY(quant_check(c, &p));
    const calq_tensor *x = c->in[0];
    const int64_t n = calq_tensor_numel(x);
    const bool f16 = x->dtype == CALQ_DTYPE_FLOAT16;
    int8_t *y = c->out[0]->data;
#pragma omp parallel for schedule(static) if (n >= ASCEND_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        y[i] = quant_one(f16 ? calq__f16_to_f32(((const uint16_t *)x->data)[i]) : ((const float *)x->data)[i], &p);
    return CALQ_OK;
}

/* ---- float outputs (dtype attribute) ------------------------------------------------------ */

/* AscendDequant / AscendAntiQuant `dtype`: 0 = float32, 1 = float16 (§9.1). */
static calq_status out_dtype(calq_op_ctx *c, calq_dtype *t)
{
    int64_t d = calq__attr_int(c->node, "dtype", 0);
    if (d != 0 && d != 1)
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "dtype %lld is not supported (0 = float32, 1 = float16)",
                             (long long)d);
    *t = d == 1 ? CALQ_DTYPE_FLOAT16 : CALQ_DTYPE_FLOAT32;
    return CALQ_OK;
}

/* Results are computed in float32; a float16 output is their round-to-nearest-even conversion. */
static inline void put_float(calq_tensor *y, int64_t i, float v)
{
    if (y->dtype == CALQ_DTYPE_FLOAT16)
        ((uint16_t *)y->data)[i] = calq__f32_to_f16(v);
    else
        ((float *)y->data)[i] = v;
}

/* ---- AscendDequant ------------------------------------------------------------------------ */

/* Elements per channel and channel count of x for a deq_scale of `nd` entries: per tensor (1)
 * or per channel on axis 1 (§6.3: one entry per output channel). */
static calq_status deq_layout(calq_op_ctx *c, int64_t *inner, int64_t *nch)
{
    const calq_tensor *x = c->in[0], *d = c->in[1];
    if (x->dtype != CALQ_DTYPE_INT32)
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "input x must be int32, not %s", calq_dtype_name(x->dtype));
    if (d->dtype != CALQ_DTYPE_UINT64)
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "deq_scale must be uint64 (packed, §6.3), not %s",
                             calq_dtype_name(d->dtype));
    const int64_t nd = calq_tensor_numel(d);
    char sx[96], sd[96];
    calq__shape_str(x->dims, x->ndim, sx, sizeof sx);
    calq__shape_str(d->dims, d->ndim, sd, sizeof sd);
    if (d->ndim > 1 || nd < 1) return calq__op_fail(c, CALQ_ERR_SHAPE, "deq_scale %s must be 1-D and not empty", sd);
    *inner = 1;
    *nch = 1;
    if (nd == 1) return CALQ_OK;
    if (x->ndim < 2 || x->dims[1] != nd)
        return calq__op_fail(c, CALQ_ERR_SHAPE,
                             "deq_scale has %lld entries: per channel it needs x's axis 1 to match, x is %s",
                             (long long)nd, sx);
    *inner = calq__shape_numel(x->dims + 2, x->ndim - 2);
    *nch = nd;
    return CALQ_OK;
}

typedef struct deq_entry {
    float deq;
    unsigned shift_n;
} deq_entry;

/* Unpacks every deq_scale entry (§6.3) into e (nd entries), checking what calq can execute. */
static calq_status deq_unpack(calq_op_ctx *c, const calq_tensor *d, deq_entry *e, int64_t nd)
{
    const uint64_t *v = d->data;
    for (int64_t i = 0; i < nd; i++) {
        int offset_w;
        calq_deq_scale_unpack(v[i], &e[i].deq, &e[i].shift_n, &offset_w);
        /* Always 0 in AMCT's output, and its bit position is disputed (§13.5). */
        if (offset_w != 0)
            return calq__op_fail(c, CALQ_ERR_UNSUPPORTED,
                                 "deq_scale entry %lld has offset_w %d: only 0 is supported (amct-reference.md §13.5)",
                                 (long long)i, offset_w);
        if (e[i].shift_n > 31)
            return calq__op_fail(c, CALQ_ERR_UNSUPPORTED,
                                 "deq_scale entry %lld has shift_n %u: at most 31 is supported", (long long)i,
                                 e[i].shift_n);
    }
    return CALQ_OK;
}

typedef struct deq_flags {
    bool sqrt_mode, relu;
} deq_flags;

static calq_status deq_check(calq_op_ctx *c, int64_t *inner, int64_t *nch, deq_flags *f, calq_dtype *t)
{
    CALQ_TRY(deq_layout(c, inner, nch));
    CALQ_TRY(out_dtype(c, t));
    if (!flag_attr(c->node, "sqrt_mode", &f->sqrt_mode))
        return calq__op_fail(c, CALQ_ERR_BAD_FORMAT, "sqrt_mode must be 0 or 1");
    if (!flag_attr(c->node, "relu_flag", &f->relu))
        return calq__op_fail(c, CALQ_ERR_BAD_FORMAT, "relu_flag must be 0 or 1");
    return CALQ_OK;
}

static calq_status dequant_infer(calq_op_ctx *c)
{
    int64_t inner, nch;
    deq_flags f;
    calq_dtype t = CALQ_DTYPE_FLOAT32;
    CALQ_TRY(deq_check(c, &inner, &nch, &f, &t));
    calq__set_shape(c->out[0], t, c->in[0]->dims, c->in[0]->ndim);
    return CALQ_OK;
}

/* floor(x / 2^n) for 0 < n <= 31, without relying on >> of negative values. */
static int64_t floor_shift(int64_t x, unsigned n)
{
    const int64_t d = (int64_t)1 << n;
    int64_t q = x / d;
    if (x % d != 0 && x < 0) q--;
    return q;
}

/* y = x * deq (twice with sqrt_mode); with shift_n = N > 0 the device first requantizes the
 * int32 to int16: t = clamp(floor(x / 2^N), -32768, 32767), y = t * deq * 2^N (§6.4). */
static float dequant_one(int32_t x, const deq_entry *e, deq_flags f)
{
    float v;
    if (e->shift_n > 0) {
        int64_t t = floor_shift(x, e->shift_n);
        t = t < -32768 ? -32768 : t > 32767 ? 32767 : t;
        v = (float)t * e->deq;
        if (f.sqrt_mode) v *= e->deq;
        v = ldexpf(v, (int)e->shift_n);
    } else {
        v = (float)x * e->deq;
        if (f.sqrt_mode) v *= e->deq;
    }
    if (f.relu && v < 0.0f) v = 0.0f;
    return v;
}

static calq_status dequant_run(calq_op_ctx *c)
{
    int64_t inner, nch;
    deq_flags f;
    calq_dtype t = CALQ_DTYPE_FLOAT32;
    CALQ_TRY(deq_check(c, &inner, &nch, &f, &t));
    deq_entry one, *e = nch == 1 ? &one : malloc(sizeof(deq_entry) * (size_t)nch); /* owner: this function */
    if (!e) return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory for %lld deq_scale entries", (long long)nch);
    calq_status st = deq_unpack(c, c->in[1], e, nch);
    if (st == CALQ_OK) {
        const int32_t *x = c->in[0]->data;
        calq_tensor *y = c->out[0];
        const int64_t n = calq_tensor_numel(c->in[0]);
#pragma omp parallel for schedule(static) if (n >= ASCEND_PAR_MIN)
        for (int64_t i = 0; i < n; i++) put_float(y, i, dequant_one(x[i], &e[nch == 1 ? 0 : (i / inner) % nch], f));
    }
    if (e != &one) free(e);
    return st;
}

/* ---- AscendAntiQuant ---------------------------------------------------------------------- */

typedef struct antiquant_params {
    float scale, offset;
    bool sqrt_mode;
} antiquant_params;

static calq_status antiquant_check(calq_op_ctx *c, antiquant_params *p, calq_dtype *t)
{
    if (c->in[0]->dtype != CALQ_DTYPE_INT8)
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "input must be int8, not %s", calq_dtype_name(c->in[0]->dtype));
    if (!calq__attr(c->node, "scale")) return calq__op_fail(c, CALQ_ERR_BAD_FORMAT, "the scale attribute is required");
    p->scale = calq__attr_float(c->node, "scale", 1.0f);
    p->offset = calq__attr_float(c->node, "offset", 0.0f);
    if (!isfinite(p->scale) || !isfinite(p->offset))
        return calq__op_fail(c, CALQ_ERR_BAD_FORMAT, "scale %g and offset %g must be finite", (double)p->scale,
                             (double)p->offset);
    if (!flag_attr(c->node, "sqrt_mode", &p->sqrt_mode))
        return calq__op_fail(c, CALQ_ERR_BAD_FORMAT, "sqrt_mode must be 0 or 1");
    return out_dtype(c, t);
}

static calq_status antiquant_infer(calq_op_ctx *c)
{
    antiquant_params p;
    calq_dtype t = CALQ_DTYPE_FLOAT32;
    CALQ_TRY(antiquant_check(c, &p, &t));
    calq__set_shape(c->out[0], t, c->in[0]->dims, c->in[0]->ndim);
    return CALQ_OK;
}

static calq_status antiquant_run(calq_op_ctx *c)
{
    antiquant_params p;
    calq_dtype t = CALQ_DTYPE_FLOAT32;
    CALQ_TRY(antiquant_check(c, &p, &t));
    const int8_t *x = c->in[0]->data;
    calq_tensor *y = c->out[0];
    const int64_t n = calq_tensor_numel(c->in[0]);
#pragma omp parallel for schedule(static) if (n >= ASCEND_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        float v = ((float)x[i] + p.offset) * p.scale;
        if (p.sqrt_mode) v *= p.scale;
        put_float(y, i, v);
    }
    return CALQ_OK;
}

/* ---- the integer layers ----------------------------------------------------------------- */

calq_status calq__ascend_unlowered(calq_op_ctx *c)
{
    return calq__op_fail(
        c, CALQ_ERR_UNSUPPORTED,
        "input 0 is int8 but does not come from an AscendQuant node (directly or through Flatten, "
        "Reshape, Squeeze, Unsqueeze, Identity): calq runs an int8 %s only as the integer layer of an "
        "Ascend deploy model (AscendQuant -> %s -> AscendDequant, amct-reference.md §9.1), whose input "
        "offset is the AscendQuant's",
        c->node->op_type, c->node->op_type);
}

calq_status calq__ascend_input_offset(calq_op_ctx *c, int32_t *offset)
{
    const calq_attr *a = calq__attr(c->node, "input_offset");
    *offset = 0;
    if (!a || a->type != CALQ_ATTR_INT || a->i < -128 || a->i > 127)
        return calq__op_fail(
            c, CALQ_ERR_BAD_FORMAT,
            "needs an integer attribute input_offset in [-128, 127] (the offset_d of its AscendQuant)");
    *offset = (int32_t)a->i;
    return CALQ_OK;
}

const calq_op_def calq__ops_ascend[] = {
    {"AscendQuant", 1, 1, 1, 1, 0, false, quant_infer, quant_run, NULL, NULL, NULL, 0},
    {"AscendDequant", 2, 2, 1, 1, 0, false, dequant_infer, dequant_run, NULL, NULL, NULL, 0},
    {"AscendAntiQuant", 1, 1, 1, 1, 0, false, antiquant_infer, antiquant_run, NULL, NULL, NULL, 0},
    {NULL, 0, 0, 0, 0, 0, false, NULL, NULL, NULL, NULL, NULL, 0},
};

/* Domain calq (CALQ_DOMAIN_INTERNAL): created by calq__pass_lower_ascend, never read from a file.
 * Input and attribute lists are those of the ONNX layer they replace, plus input_offset. */
const calq_op_def calq__ops_ascend_int[] = {
    {"AscendConv", 2, 3, 1, 1, 0, false, calq__ascend_conv_infer, calq__ascend_conv_run, calq__ascend_conv_prepare,
     calq__ascend_conv_run_fast, calq__int_conv_release, 0},
    {"AscendConvTranspose", 2, 3, 1, 1, 0, false, calq__ascend_convtranspose_infer, calq__ascend_convtranspose_run,
     NULL, NULL, NULL, 0},
    {"AscendGemm", 2, 3, 1, 1, 0, false, calq__ascend_gemm_infer, calq__ascend_gemm_run, calq__ascend_gemm_prepare,
     calq__ascend_gemm_run_fast, calq__int_mm_release, 0},
    {"AscendMatMul", 2, 2, 1, 1, 0, false, calq__ascend_matmul_infer, calq__ascend_matmul_run,
     calq__ascend_matmul_prepare, calq__ascend_matmul_run_fast, calq__int_mm_release, 0},
    {"AscendAveragePool", 1, 1, 1, 1, 0, false, calq__ascend_avgpool_infer, calq__ascend_avgpool_run, NULL, NULL, NULL,
     0},
    {NULL, 0, 0, 0, 0, 0, false, NULL, NULL, NULL, NULL, NULL, 0},
};
