/* One-input elementwise operators (activations, float math, Neg/Abs/Sign/Not, IsNaN/IsInf,
 * Shrink) and Clip. */
#include <float.h>
#include <stdlib.h>
#include <tgmath.h>

#include "exec/kernels/elementwise_common.h"
#include "exec/kernels/elementwise_mvec.h"

/* Expressions of x (the input element) and p; T is the element type. <tgmath.h> picks the
 * float or double function from x's type, and constants are cast to T so float32 math stays
 * in float32 as the ONNX reference (numpy) does. */
#define EW_CLAMP01(v, T) ((v) < (T)0 ? (T)0 : (v) > (T)1 ? (T)1 : (v))

/* exp(-x) overflowing to inf for very negative x still gives the right limit, 0. */
#define SIGMOID(T)  ((T)1 / ((T)1 + exp(-x)))
#define TANH(T)     tanh(x)
#define EXP(T)      exp(x)
#define LOG(T)      log(x)
#define SQRT(T)     sqrt(x)
#define ERF(T)      erf(x)
#define SIN(T)      sin(x)
#define COS(T)      cos(x)
#define TAN(T)      tan(x)
#define ASIN(T)     asin(x)
#define ACOS(T)     acos(x)
#define ATAN(T)     atan(x)
#define SINH(T)     sinh(x)
#define COSH(T)     cosh(x)
#define ASINH(T)    asinh(x)
#define ACOSH(T)    acosh(x)
#define ATANH(T)    atanh(x)
#define RECIP(T)    ((T)1 / x)
#define FLOOR(T)    floor(x)
#define CEIL(T)     ceil(x)
#define ROUND(T)    nearbyint(x) /* the default rounding mode: half to even, as ONNX asks */
#define SOFTPLUS(T) (x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)))
#define SOFTSIGN(T) (x / ((T)1 + fabs(x)))
#define ELU(T)      (x < 0 ? (T)p->a * expm1(x) : x)
#define SELU(T)     (x <= 0 ? (T)p->g * ((T)p->a * exp(x) - (T)p->a) : (T)p->g * x)
#define CELU(T)     (x > 0 ? x : (T)p->a * expm1(x / (T)p->a))
#define HSIGMOID(T) EW_CLAMP01(((T)p->a * x + (T)p->b), T)
#define HSWISH(T)   (x * EW_CLAMP01(x * ((T)1 / (T)6) + (T)0.5, T))
#define LRELU(T)    (x < 0 ? (T)p->a * x : x)
#define TRELU(T)    (x > (T)p->a ? x : (T)0)
/* NaN passes through the comparisons below unchanged, as with numpy. */
#define RELU(T)   (x < 0 ? (T)0 : x)
#define NEG_F(T)  (-x)
#define NEG_S(T)  (T)(0 - (uint64_t)x) /* wraps like numpy instead of overflowing */
#define ABS_F(T)  fabs(x)
#define ABS_S(T)  (x < 0 ? (T)(0 - (uint64_t)x) : x)
#define ABS_U(T)  (x)
#define SIGN_F(T) (x > 0 ? (T)1 : x < 0 ? (T)-1 : x)
#define SIGN_S(T) ((x > 0) - (x < 0))
#define SIGN_U(T) (x > 0)
#define NOT_B(T)  (!x)
#define ISNAN(T)  (x != x)
#define ISINF(T)  (isinf(x) && (x > 0 ? p->a != 0 : p->b != 0)) /* a: detect_positive, b: detect_negative */
#define SHRINK(T) (x < -(T)p->a ? x + (T)p->b : x > (T)p->a ? x - (T)p->b : (T)0)
/* Mish (opset 18): x * tanh(softplus(x)); Gelu (opset 20): the exact erf form, or with
 * approximate = "tanh" the tanh form. */
#define MISH(T)      (x * tanh(SOFTPLUS(T)))
#define GELU(T)      ((T)0.5 * x * ((T)1 + erf(x * (T)0.70710678118654752440)))
#define GELU_TANH(T) ((T)0.5 * x * ((T)1 + tanh((T)0.79788456080286535588 * (x + (T)0.044715 * x * x * x))))
#define BITNOT(T)    (T)(~x)

#define UN_SAME(OP, SFX, T, M) EW_UN_ROW(OP##_##SFX, T, T, M(T))

#define FLOAT_OP(OP, M) EW_FOR_F(UN_SAME, OP, M) static const ew_row OP##_tab[EW_NDT] = {EW_TAB_F(OP)};
FLOAT_OP(sigmoid, SIGMOID)
FLOAT_OP(tanh_, TANH)
FLOAT_OP(exp_, EXP)
FLOAT_OP(log_, LOG)
FLOAT_OP(sqrt_, SQRT)
FLOAT_OP(erf_, ERF)
FLOAT_OP(sin_, SIN)
FLOAT_OP(cos_, COS)
FLOAT_OP(tan_, TAN)
FLOAT_OP(asin_, ASIN)
FLOAT_OP(acos_, ACOS)
FLOAT_OP(atan_, ATAN)
FLOAT_OP(sinh_, SINH)
FLOAT_OP(cosh_, COSH)
FLOAT_OP(asinh_, ASINH)
FLOAT_OP(acosh_, ACOSH)
FLOAT_OP(atanh_, ATANH)
FLOAT_OP(recip, RECIP)
FLOAT_OP(floor_, FLOOR)
FLOAT_OP(ceil_, CEIL)
FLOAT_OP(round_, ROUND)
FLOAT_OP(softplus, SOFTPLUS)
FLOAT_OP(softsign, SOFTSIGN)
FLOAT_OP(elu, ELU)
FLOAT_OP(selu, SELU)
FLOAT_OP(celu, CELU)
FLOAT_OP(hsigmoid, HSIGMOID)
FLOAT_OP(hswish, HSWISH)
FLOAT_OP(lrelu, LRELU)
FLOAT_OP(trelu, TRELU)
FLOAT_OP(shrink, SHRINK)
FLOAT_OP(mish, MISH)
FLOAT_OP(gelu, GELU)
FLOAT_OP(gelu_tanh, GELU_TANH)
EW_FOR_SI(UN_SAME, bitnot, BITNOT)
EW_FOR_UI(UN_SAME, bitnot, BITNOT)
static const ew_row bitnot_tab[EW_NDT] = {EW_TAB_SI(bitnot), EW_TAB_UI(bitnot)};
EW_UN_ROW(isnan_f32, float, uint8_t, ISNAN(float))
EW_UN_ROW(isnan_f64, double, uint8_t, ISNAN(double))
EW_UN_ROW(isinf_f32, float, uint8_t, ISINF(float))
EW_UN_ROW(isinf_f64, double, uint8_t, ISINF(double))
static const ew_row isnan_tab[EW_NDT] = {EW_TAB_F(isnan)};
static const ew_row isinf_tab[EW_NDT] = {EW_TAB_F(isinf)};

EW_FOR_F(UN_SAME, relu, RELU)
EW_FOR_SI(UN_SAME, relu, RELU)
static const ew_row relu_tab[EW_NDT] = {EW_TAB_F(relu), EW_TAB_SI(relu)};
EW_FOR_F(UN_SAME, neg, NEG_F)
EW_FOR_SI(UN_SAME, neg, NEG_S)
static const ew_row neg_tab[EW_NDT] = {EW_TAB_F(neg), EW_TAB_SI(neg)};
EW_FOR_F(UN_SAME, abs_, ABS_F)
EW_FOR_SI(UN_SAME, abs_, ABS_S)
EW_FOR_UI(UN_SAME, abs_, ABS_U)
static const ew_row abs__tab[EW_NDT] = {EW_TAB_F(abs_), EW_TAB_SI(abs_), EW_TAB_UI(abs_)};
EW_FOR_F(UN_SAME, sign, SIGN_F)
EW_FOR_SI(UN_SAME, sign, SIGN_S)
EW_FOR_UI(UN_SAME, sign, SIGN_U)
static const ew_row sign_tab[EW_NDT] = {EW_TAB_F(sign), EW_TAB_SI(sign), EW_TAB_UI(sign)};
EW_UN_ROW(not_b, uint8_t, uint8_t, NOT_B(uint8_t))
static const ew_row not_tab[EW_NDT] = {[CALQ_DTYPE_BOOL] = not_b};

/* An op: its kernels by dtype, accepted dtypes (float16 is promoted to float32), up to three
 * attributes read into p->a, p->b, p->g, and whether it outputs bool. */
typedef struct un_desc {
    const char *name;
    const ew_row *tab;
    unsigned types;
    const char *attr[3];
    float dflt[3];
    bool bool_out;
    bool libm; /* each element is a libm call (cost CALQ__EW_COST_LIBM) */
} un_desc;

/* Selu's default constants, as float32 values like the ONNX spec states them. */
#define SELU_ALPHA 1.67326319217681884765625f
#define SELU_GAMMA 1.05070102214813232421875f

static const un_desc un_ops[] = {
    {"Relu", relu_tab, EW_F | EW_SI, {0}, {0}, false, false},
    {"LeakyRelu", lrelu_tab, EW_F, {"alpha"}, {0.01f}, false, false},
    {"Sigmoid", sigmoid_tab, EW_F, {0}, {0}, false, true},
    {"Tanh", tanh__tab, EW_F, {0}, {0}, false, true},
    {"HardSigmoid", hsigmoid_tab, EW_F, {"alpha", "beta"}, {0.2f, 0.5f}, false, false},
    {"HardSwish", hswish_tab, EW_F, {0}, {0}, false, false},
    {"Elu", elu_tab, EW_F, {"alpha"}, {1.0f}, false, true},
    {"Selu", selu_tab, EW_F, {"alpha", NULL, "gamma"}, {SELU_ALPHA, 0, SELU_GAMMA}, false, true},
    {"Celu", celu_tab, EW_F, {"alpha"}, {1.0f}, false, true},
    {"Softplus", softplus_tab, EW_F, {0}, {0}, false, true},
    {"Softsign", softsign_tab, EW_F, {0}, {0}, false, false},
    {"ThresholdedRelu", trelu_tab, EW_F, {"alpha"}, {1.0f}, false, false},
    {"Exp", exp__tab, EW_F, {0}, {0}, false, true},
    {"Log", log__tab, EW_F, {0}, {0}, false, true},
    {"Sqrt", sqrt__tab, EW_F, {0}, {0}, false, false},
    {"Erf", erf__tab, EW_F, {0}, {0}, false, true},
    {"Neg", neg_tab, EW_F | EW_SI, {0}, {0}, false, false},
    {"Abs", abs__tab, EW_NUM, {0}, {0}, false, false},
    {"Reciprocal", recip_tab, EW_F, {0}, {0}, false, false},
    {"Floor", floor__tab, EW_F, {0}, {0}, false, false},
    {"Ceil", ceil__tab, EW_F, {0}, {0}, false, false},
    {"Round", round__tab, EW_F, {0}, {0}, false, false},
    {"Sign", sign_tab, EW_NUM, {0}, {0}, false, false},
    {"Sin", sin__tab, EW_F, {0}, {0}, false, true},
    {"Cos", cos__tab, EW_F, {0}, {0}, false, true},
    {"Tan", tan__tab, EW_F, {0}, {0}, false, true},
    {"Asin", asin__tab, EW_F, {0}, {0}, false, true},
    {"Acos", acos__tab, EW_F, {0}, {0}, false, true},
    {"Atan", atan__tab, EW_F, {0}, {0}, false, true},
    {"Sinh", sinh__tab, EW_F, {0}, {0}, false, true},
    {"Cosh", cosh__tab, EW_F, {0}, {0}, false, true},
    {"Asinh", asinh__tab, EW_F, {0}, {0}, false, true},
    {"Acosh", acosh__tab, EW_F, {0}, {0}, false, true},
    {"Atanh", atanh__tab, EW_F, {0}, {0}, false, true},
    {"Not", not_tab, EW_BOOL, {0}, {0}, false, false},
    {"IsNaN", isnan_tab, EW_F, {0}, {0}, true, false},
    {"IsInf", isinf_tab, EW_F, {"detect_positive", "detect_negative"}, {1, 1}, true, false},
    {"Shrink", shrink_tab, EW_F, {"lambd", "bias"}, {0.5f, 0.0f}, false, false},
    {"Mish", mish_tab, EW_F, {0}, {0}, false, true},
    {"Gelu", gelu_tab, EW_F, {0}, {0}, false, true},
    {"BitwiseNot", bitnot_tab, EW_SI | EW_UI, {0}, {0}, false, false},
};

/* The kernels of ops whose string attributes pick the formula; NULL for an invalid one. */
static const ew_row *un_table(const calq_op_ctx *c, const un_desc *d)
{
    if (strcmp(d->name, "Gelu") == 0) {
        const char *a = calq__attr_str(c->node, "approximate", "none");
        return strcmp(a, "none") == 0 ? gelu_tab : strcmp(a, "tanh") == 0 ? gelu_tanh_tab : NULL;
    }
    return d->tab;
}

static const un_desc *un_find(const calq_op_ctx *c)
{
    for (size_t i = 0; i < sizeof un_ops / sizeof un_ops[0]; i++)
        if (strcmp(un_ops[i].name, c->node->op_type) == 0) return &un_ops[i];
    return NULL;
}

calq_status calq__ew_unary_infer(calq_op_ctx *c)
{
    const un_desc *d = un_find(c);
    if (!d) return calq__op_fail(c, CALQ_ERR_INTERNAL, "no elementwise kernel registered under this name");
    CALQ_TRY(calq__ew_arity(c, 1, 1, 1));
    CALQ_TRY(calq__ew_input(c, 0, d->types, "input 0"));
    CALQ_TRY(calq__ew_output(c, 0));
    if (!un_table(c, d))
        return calq__op_fail(c, CALQ_ERR_BAD_FORMAT, "attribute 'approximate' must be \"none\" or \"tanh\", got \"%s\"",
                             calq__attr_str(c->node, "approximate", ""));
    calq__set_shape(c->out[0], d->bool_out ? CALQ_DTYPE_BOOL : c->in[0]->dtype, c->in[0]->dims, c->in[0]->ndim);
    return CALQ_OK;
}

typedef struct un_fast {
    ew_row row; /* libmvec's row for the op (elementwise_mvec.c) */
} un_fast;

calq_status calq__ew_unary_prepare(calq_op_ctx *c)
{
    c->state = NULL;
    if (c->in[0]->dtype != CALQ_DTYPE_FLOAT32) return CALQ_OK;
    if (strcmp(c->node->op_type, "Gelu") == 0 && strcmp(calq__attr_str(c->node, "approximate", "none"), "none") != 0)
        return CALQ_OK; /* the tanh form stays on the reference row */
    ew_row row = calq__ew_mvec_row(c->node->op_type);
    if (!row) return CALQ_OK;
    un_fast *f = malloc(sizeof *f);
    if (!f) return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory");
    f->row = row;
    c->state = f;
    return CALQ_OK;
}

calq_status calq__ew_unary_run_fast(calq_op_ctx *c)
{
    const un_fast *f = c->state;
    ew_par p;
    memset(&p, 0, sizeof p);
    p.cost = 2; /* a vector libm call per 8 or 16 elements */
    const calq_tensor *in[1] = {c->in[0]};
    calq__ew_apply(f->row, &p, c->out[0], in, 1);
    return CALQ_OK;
}

void calq__ew_unary_release(void *state)
{
    free(state);
}

calq_status calq__ew_unary_run(calq_op_ctx *c)
{
    if (calq__ew_has_f16(c)) return calq__ew_run_promoted(c, calq__ew_unary_run);
    const un_desc *d = un_find(c);
    const ew_row *tab = d ? un_table(c, d) : NULL;
    ew_row row = tab ? tab[c->in[0]->dtype] : NULL;
    if (!row) return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "no kernel for dtype %s", calq_dtype_name(c->in[0]->dtype));
    ew_par p;
    memset(&p, 0, sizeof p);
    double *dst[3] = {&p.a, &p.b, &p.g};
    for (int k = 0; k < 3; k++)
        if (d->attr[k]) *dst[k] = calq__attr_float(c->node, d->attr[k], d->dflt[k]);
    p.cost = d->libm ? CALQ__EW_COST_LIBM : 1;
    const calq_tensor *in[1] = {c->in[0]};
    calq__ew_apply(row, &p, c->out[0], in, 1);
    return CALQ_OK;
}

/* ---- Clip ---------------------------------------------------------------------------------- */

/* min then max, like numpy.clip: with lo > hi every element becomes hi. */
#define CLIP_ROW(OP, SFX, T, M)                                                                                        \
    static void OP##_##SFX(const ew_par *p, void *o_, const void *const *in, const int64_t *st, int64_t n)             \
    {                                                                                                                  \
        T *o = o_, lo, hi;                                                                                             \
        const T *a = in[0];                                                                                            \
        (void)st;                                                                                                      \
        memcpy(&lo, &p->lo, sizeof lo);                                                                                \
        memcpy(&hi, &p->hi, sizeof hi);                                                                                \
        for (int64_t i = 0; i < n; i++) {                                                                              \
            T v = a[i] < lo ? lo : a[i];                                                                               \
            o[i] = v > hi ? hi : v;                                                                                    \
        }                                                                                                              \
    }
EW_FOR_F(CLIP_ROW, clip, _)
EW_FOR_SI(CLIP_ROW, clip, _)
EW_FOR_UI(CLIP_ROW, clip, _)
static const ew_row clip_tab[EW_NDT] = {EW_TAB_F(clip), EW_TAB_SI(clip), EW_TAB_UI(clip)};

calq_status calq__ew_clip_infer(calq_op_ctx *c)
{
    CALQ_TRY(calq__ew_arity(c, 1, 3, 1));
    CALQ_TRY(calq__ew_input(c, 0, c->opset < 11 ? EW_F : EW_NUM, "input 0"));
    CALQ_TRY(calq__ew_output(c, 0));
    static const char *const what[3] = {"", "input 1 (min)", "input 2 (max)"};
    for (int i = 1; i < 3 && i < c->n_in; i++) {
        if (!c->in[i]) continue;
        if (c->opset < 11)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "opset %d Clip takes min/max as attributes, not as inputs",
                                 c->opset);
        CALQ_TRY(calq__ew_input(c, i, EW_NUM, what[i]));
        CALQ_TRY(calq__ew_same_dtype(c, 0, i));
        if (calq_tensor_numel(c->in[i]) != 1) {
            char b[96];
            return calq__op_fail(c, CALQ_ERR_SHAPE, "%s must be a scalar, got shape %s", what[i],
                                 calq__shape_str(c->in[i]->dims, c->in[i]->ndim, b, sizeof b));
        }
    }
    calq__set_shape(c->out[0], c->in[0]->dtype, c->in[0]->dims, c->in[0]->ndim);
    return CALQ_OK;
}

/* The lowest (hi = false) or highest value of dtype t, as raw bits of that dtype. */
static uint64_t clip_limit(calq_dtype t, bool hi)
{
    uint64_t raw = 0;
    calq_tensor v = {.dtype = t, .data = &raw};
    switch (t) {
    case CALQ_DTYPE_INT64: raw = hi ? (uint64_t)INT64_MAX : (uint64_t)INT64_MIN; break;
    case CALQ_DTYPE_UINT64: raw = hi ? UINT64_MAX : 0; break;
    default: calq__tensor_set_f64(&v, 0, hi ? INFINITY : -INFINITY); break; /* saturates for ints */
    }
    return raw;
}

calq_status calq__ew_clip_run(calq_op_ctx *c)
{
    if (calq__ew_has_f16(c)) return calq__ew_run_promoted(c, calq__ew_clip_run);
    calq_dtype t = c->in[0]->dtype;
    ew_row row = clip_tab[t];
    if (!row) return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "no kernel for dtype %s", calq_dtype_name(t));
    ew_par p;
    memset(&p, 0, sizeof p);
    p.lo = clip_limit(t, false);
    p.hi = clip_limit(t, true);
    if (c->opset < 11) {
        /* Before opset 11 the bounds were attributes defaulting to the float range. */
        calq_tensor v = {.dtype = t};
        v.data = &p.lo;
        calq__tensor_set_f64(&v, 0, calq__attr_float(c->node, "min", -FLT_MAX));
        v.data = &p.hi;
        calq__tensor_set_f64(&v, 0, calq__attr_float(c->node, "max", FLT_MAX));
    } else {
        size_t es = calq_dtype_size(t);
        if (c->n_in > 1 && c->in[1] && c->in[1]->data) memcpy(&p.lo, c->in[1]->data, es);
        if (c->n_in > 2 && c->in[2] && c->in[2]->data) memcpy(&p.hi, c->in[2]->data, es);
    }
    const calq_tensor *in[1] = {c->in[0]};
    calq__ew_apply(row, &p, c->out[0], in, 1);
    return CALQ_OK;
}
