/* Broadcasting elementwise operators: arithmetic, Mod, BitShift, comparisons, logic, the variadic
 * Min/Max/Sum/Mean, PRelu and Pow. */
#include <limits.h>
#include <math.h>
#include <stdio.h>

#include "exec/kernels/elementwise_common.h"

/* Python's (and numpy's) modulo: the result takes the divisor's sign. */
static inline int64_t ew_pymod(int64_t x, int64_t y)
{
    int64_t r = y == -1 ? 0 : x % y; /* INT64_MIN % -1 overflows in C */
    return r != 0 && (r < 0) != (y < 0) ? r + y : r;
}
static inline float ew_pymodf(float x, float y)
{
    float r = fmodf(x, y);
    return r != 0 && (r < 0) != (y < 0) ? r + y : r;
}
static inline double ew_pymodd(double x, double y)
{
    double r = fmod(x, y);
    return r != 0 && (r < 0) != (y < 0) ? r + y : r;
}

/* Expressions of x (input 0) and y (input 1); T is the element type. Integer + - * go through
 * uint64_t so overflow wraps like numpy instead of being undefined behaviour. */
#define ADD_F(T) (x + y)
#define ADD_I(T) (T)((uint64_t)x + (uint64_t)y)
#define SUB_F(T) (x - y)
#define SUB_I(T) (T)((uint64_t)x - (uint64_t)y)
#define MUL_F(T) (x * y)
#define MUL_I(T) (T)((uint64_t)x * (uint64_t)y)
#define DIV_F(T) (x / y)
/* C truncates toward zero; MIN / -1 overflows, so it is negated with wrap-around instead.
 * Zero divisors are rejected before the kernel runs. */
#define DIV_S(T) (y == -1 ? (T)(0 - (uint64_t)x) : (T)(x / y))
#define DIV_U(T) (x / y)
/* Mod: fmod=1 keeps the dividend's sign (C's %), fmod=0 the divisor's (Python's %). */
#define FMOD_S(T)  (T)(y == -1 ? 0 : (int64_t)x % (int64_t)y)
#define PYMOD_S(T) ((T)ew_pymod((int64_t)x, (int64_t)y))
#define PYMOD_F(T) (sizeof(T) == 4 ? (T)ew_pymodf((float)x, (float)y) : (T)ew_pymodd(x, y))
#define MOD_U(T)   (x % y)
/* Shifting by the bit width or more is undefined in C; the bits are all gone, so 0. */
#define SHL_U(T) (y >= 8 * sizeof(T) ? (T)0 : (T)((uint64_t)x << y))
#define SHR_U(T) (y >= 8 * sizeof(T) ? (T)0 : (T)(x >> y))
/* NaN in either operand gives NaN, as numpy's minimum/maximum do. */
#define MIN_F(T)   ((x <= y || x != x) ? x : y)
#define MAX_F(T)   ((x >= y || x != x) ? x : y)
#define MIN_I(T)   (x < y ? x : y)
#define MAX_I(T)   (x > y ? x : y)
#define EQ(T)      (x == y)
#define EQ_B(T)    ((x != 0) == (y != 0))
#define GT(T)      (x > y)
#define LT(T)      (x < y)
#define GE(T)      (x >= y)
#define LE(T)      (x <= y)
#define AND_B(T)   ((x != 0) & (y != 0))
#define OR_B(T)    ((x != 0) | (y != 0))
#define XOR_B(T)   ((x != 0) ^ (y != 0))
#define BITAND(T)  (T)(x & y)
#define BITOR(T)   (T)(x | y)
#define BITXOR(T)  (T)(x ^ y)
#define PRELU_F(T) (x < 0 ? y * x : x)
#define PRELU_S(T) (x < 0 ? (T)((uint64_t)x * (uint64_t)y) : x)

#define BIN_SAME(OP, SFX, T, M) EW_BIN_ROW(OP##_##SFX, T, T, T, M(T))
#define BIN_BOOL(OP, SFX, T, M) EW_BIN_ROW(OP##_##SFX, T, T, uint8_t, M(T))

/* Rows for every numeric dtype (float, signed, unsigned expressions) and their table. */
#define NUM_ROWS(GEN, OP, MF, MS, MU) EW_FOR_F(GEN, OP, MF) EW_FOR_SI(GEN, OP, MS) EW_FOR_UI(GEN, OP, MU)
#define NUM_TAB(OP)                   EW_TAB_F(OP), EW_TAB_SI(OP), EW_TAB_UI(OP)

NUM_ROWS(BIN_SAME, add, ADD_F, ADD_I, ADD_I)
NUM_ROWS(BIN_SAME, sub, SUB_F, SUB_I, SUB_I)
NUM_ROWS(BIN_SAME, mul, MUL_F, MUL_I, MUL_I)
NUM_ROWS(BIN_SAME, div, DIV_F, DIV_S, DIV_U)
NUM_ROWS(BIN_SAME, min, MIN_F, MIN_I, MIN_I)
NUM_ROWS(BIN_SAME, max, MAX_F, MAX_I, MAX_I)
NUM_ROWS(BIN_BOOL, gt, GT, GT, GT)
NUM_ROWS(BIN_BOOL, lt, LT, LT, LT)
NUM_ROWS(BIN_BOOL, ge, GE, GE, GE)
NUM_ROWS(BIN_BOOL, le, LE, LE, LE)
NUM_ROWS(BIN_BOOL, eq, EQ, EQ, EQ)
static const ew_row add_tab[EW_NDT] = {NUM_TAB(add)};
static const ew_row sub_tab[EW_NDT] = {NUM_TAB(sub)};
static const ew_row mul_tab[EW_NDT] = {NUM_TAB(mul)};
static const ew_row div_tab[EW_NDT] = {NUM_TAB(div)};
static const ew_row min_tab[EW_NDT] = {NUM_TAB(min)};
static const ew_row max_tab[EW_NDT] = {NUM_TAB(max)};
static const ew_row gt_tab[EW_NDT] = {NUM_TAB(gt)};
static const ew_row lt_tab[EW_NDT] = {NUM_TAB(lt)};
static const ew_row ge_tab[EW_NDT] = {NUM_TAB(ge)};
static const ew_row le_tab[EW_NDT] = {NUM_TAB(le)};
EW_FOR_SI(BIN_SAME, fmod, FMOD_S)
EW_FOR_F(BIN_SAME, pymod, PYMOD_F)
EW_FOR_SI(BIN_SAME, pymod, PYMOD_S)
EW_FOR_UI(BIN_SAME, mod, MOD_U)
EW_FOR_UI(BIN_SAME, shl, SHL_U)
EW_FOR_UI(BIN_SAME, shr, SHR_U)
EW_BIN_ROW(fmod_f32, float, float, float, fmodf(x, y))
EW_BIN_ROW(fmod_f64, double, double, double, fmod(x, y))
static const ew_row fmod_tab[EW_NDT] = {EW_TAB_F(fmod), EW_TAB_SI(fmod), EW_TAB_UI(mod)};
static const ew_row pymod_tab[EW_NDT] = {EW_TAB_F(pymod), EW_TAB_SI(pymod), EW_TAB_UI(mod)};
static const ew_row shl_tab[EW_NDT] = {EW_TAB_UI(shl)};
static const ew_row shr_tab[EW_NDT] = {EW_TAB_UI(shr)};
EW_BIN_ROW(eq_b, uint8_t, uint8_t, uint8_t, EQ_B(uint8_t))
static const ew_row eq_tab[EW_NDT] = {NUM_TAB(eq), [CALQ_DTYPE_BOOL] = eq_b};

EW_BIN_ROW(and_b, uint8_t, uint8_t, uint8_t, AND_B(uint8_t))
EW_BIN_ROW(or_b, uint8_t, uint8_t, uint8_t, OR_B(uint8_t))
EW_BIN_ROW(xor_b, uint8_t, uint8_t, uint8_t, XOR_B(uint8_t))
static const ew_row and_tab[EW_NDT] = {[CALQ_DTYPE_BOOL] = and_b};
static const ew_row or_tab[EW_NDT] = {[CALQ_DTYPE_BOOL] = or_b};
static const ew_row xor_tab[EW_NDT] = {[CALQ_DTYPE_BOOL] = xor_b};

/* Bitwise operators (opset 18) on every integer type. */
EW_FOR_SI(BIN_SAME, bitand, BITAND)
EW_FOR_UI(BIN_SAME, bitand, BITAND)
EW_FOR_SI(BIN_SAME, bitor, BITOR)
EW_FOR_UI(BIN_SAME, bitor, BITOR)
EW_FOR_SI(BIN_SAME, bitxor, BITXOR)
EW_FOR_UI(BIN_SAME, bitxor, BITXOR)
static const ew_row bitand_tab[EW_NDT] = {EW_TAB_SI(bitand), EW_TAB_UI(bitand)};
static const ew_row bitor_tab[EW_NDT] = {EW_TAB_SI(bitor), EW_TAB_UI(bitor)};
static const ew_row bitxor_tab[EW_NDT] = {EW_TAB_SI(bitxor), EW_TAB_UI(bitxor)};

/* Mean's final division by the input count (in p->a), in place. */
EW_UN_ROW(mean_f32, float, float, x / (float)p->a)
EW_UN_ROW(mean_f64, double, double, x / p->a)
static const ew_row mean_tab[EW_NDT] = {EW_TAB_F(mean)};

enum { BIN_BOOL_OUT = 1, BIN_INT_DIV = 2, BIN_MEAN = 4, BIN_VARIADIC = 8 };

typedef struct bin_desc {
    const char *name;
    const ew_row *tab;
    unsigned types; /* float16 is promoted to float32 */
    unsigned flags;
} bin_desc;

static const bin_desc bin_ops[] = {
    {"Add", add_tab, EW_NUM, 0},
    {"Sub", sub_tab, EW_NUM, 0},
    {"Mul", mul_tab, EW_NUM, 0},
    {"Div", div_tab, EW_NUM, BIN_INT_DIV},
    {"Equal", eq_tab, EW_NUM | EW_BOOL, BIN_BOOL_OUT},
    {"Greater", gt_tab, EW_NUM, BIN_BOOL_OUT},
    {"Less", lt_tab, EW_NUM, BIN_BOOL_OUT},
    {"GreaterOrEqual", ge_tab, EW_NUM, BIN_BOOL_OUT},
    {"LessOrEqual", le_tab, EW_NUM, BIN_BOOL_OUT},
    {"And", and_tab, EW_BOOL, BIN_BOOL_OUT},
    {"Or", or_tab, EW_BOOL, BIN_BOOL_OUT},
    {"Xor", xor_tab, EW_BOOL, BIN_BOOL_OUT},
    {"Mod", pymod_tab, EW_NUM, BIN_INT_DIV},
    {"BitShift", shl_tab, EW_UI, 0},
    {"BitwiseAnd", bitand_tab, EW_SI | EW_UI, 0},
    {"BitwiseOr", bitor_tab, EW_SI | EW_UI, 0},
    {"BitwiseXor", bitxor_tab, EW_SI | EW_UI, 0},
    {"Min", min_tab, EW_NUM, BIN_VARIADIC},
    {"Max", max_tab, EW_NUM, BIN_VARIADIC},
    {"Sum", add_tab, EW_NUM, BIN_VARIADIC},
    {"Mean", add_tab, EW_F, BIN_MEAN | BIN_VARIADIC},
};

static const bin_desc *bin_find(const calq_op_ctx *c)
{
    for (size_t i = 0; i < sizeof bin_ops / sizeof bin_ops[0]; i++)
        if (strcmp(bin_ops[i].name, c->node->op_type) == 0) return &bin_ops[i];
    return NULL;
}

/* The kernels of ops whose attributes pick the operation; NULL for an invalid attribute. */
static const ew_row *bin_table(const calq_op_ctx *c, const bin_desc *d)
{
    if (strcmp(d->name, "Mod") == 0) return calq__attr_int(c->node, "fmod", 0) ? fmod_tab : pymod_tab;
    if (strcmp(d->name, "BitShift") == 0) {
        const char *dir = calq__attr_str(c->node, "direction", "");
        return strcmp(dir, "LEFT") == 0 ? shl_tab : strcmp(dir, "RIGHT") == 0 ? shr_tab : NULL;
    }
    return d->tab;
}

calq_status calq__ew_binary_infer(calq_op_ctx *c)
{
    const bin_desc *d = bin_find(c);
    if (!d) return calq__op_fail(c, CALQ_ERR_INTERNAL, "no elementwise kernel registered under this name");
    bool variadic = d->flags & BIN_VARIADIC;
    CALQ_TRY(calq__ew_arity(c, variadic ? 1 : 2, variadic ? INT_MAX : 2, 1));
    if (!bin_table(c, d))
        return calq__op_fail(c, CALQ_ERR_BAD_FORMAT, "attribute 'direction' must be \"LEFT\" or \"RIGHT\", got \"%s\"",
                             calq__attr_str(c->node, "direction", ""));
    for (int i = 0; i < c->n_in; i++) {
        char what[32];
        snprintf(what, sizeof what, "input %d", i);
        CALQ_TRY(calq__ew_input(c, i, d->types, what));
        CALQ_TRY(calq__ew_same_dtype(c, 0, i));
    }
    CALQ_TRY(calq__ew_output(c, 0));
    int64_t dims[CALQ_MAX_DIMS];
    int nd = 0;
    CALQ_TRY(calq__ew_broadcast(c, 0, c->n_in, dims, &nd));
    calq__set_shape(c->out[0], d->flags & BIN_BOOL_OUT ? CALQ_DTYPE_BOOL : c->in[0]->dtype, dims, nd);
    return CALQ_OK;
}

calq_status calq__ew_binary_run(calq_op_ctx *c)
{
    if (calq__ew_has_f16(c)) return calq__ew_run_promoted(c, calq__ew_binary_run);
    const bin_desc *d = bin_find(c);
    const ew_row *tab = d ? bin_table(c, d) : NULL;
    calq_dtype t = c->in[0]->dtype;
    ew_row row = tab ? tab[t] : NULL;
    if (!row) return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "no kernel for dtype %s", calq_dtype_name(t));
    calq_tensor *out = c->out[0];
    if (calq_tensor_numel(out) <= 0) return CALQ_OK;
    if ((d->flags & BIN_INT_DIV) && calq__dtype_is_int(t)) {
        const calq_tensor *b = c->in[1];
        for (int64_t i = 0, n = calq_tensor_numel(b); i < n; i++)
            if (calq__tensor_get_i64(b, i) == 0)
                return calq__op_fail(c, CALQ_ERR_DATA,
                                     "integer division by zero: element %lld of input 1 (the divisor) is 0",
                                     (long long)i);
    }
    ew_par p;
    memset(&p, 0, sizeof p);
    if (c->n_in == 1) {
        memcpy(out->data, c->in[0]->data, calq__tensor_nbytes(out));
        return CALQ_OK;
    }
    /* Variadic ops fold left to right into the output, which has the final broadcast shape. */
    const calq_tensor *in[2] = {c->in[0], c->in[1]};
    calq__ew_apply(row, &p, out, in, 2);
    for (int k = 2; k < c->n_in; k++) {
        in[0] = out;
        in[1] = c->in[k];
        calq__ew_apply(row, &p, out, in, 2);
    }
    if (d->flags & BIN_MEAN) {
        p.a = c->n_in;
        in[0] = out;
        calq__ew_apply(mean_tab[t], &p, out, in, 1);
    }
    return CALQ_OK;
}

/* ---- PRelu --------------------------------------------------------------------------------- */

EW_FOR_F(BIN_SAME, prelu, PRELU_F)
EW_FOR_SI(BIN_SAME, prelu, PRELU_S)
static const ew_row prelu_tab[EW_NDT] = {EW_TAB_F(prelu), EW_TAB_SI(prelu)};

/* The slope as it broadcasts to X: numpy rules (unidirectional), or else a 1-D slope of X's
 * channel count read per channel ([C] as [C,1,...,1]), which some exporters emit. */
static bool prelu_slope(const calq_tensor *x, const calq_tensor *s, calq_tensor *view)
{
    int64_t dims[CALQ_MAX_DIMS];
    int nd = 0;
    *view = *s;
    if (calq__broadcast_shape(x->dims, x->ndim, s->dims, s->ndim, dims, &nd) &&
        calq__shape_equal(dims, nd, x->dims, x->ndim))
        return true;
    if (s->ndim == 1 && x->ndim >= 3 && s->dims[0] == x->dims[1]) {
        view->ndim = x->ndim - 1;
        for (int d = 1; d < view->ndim; d++) view->dims[d] = 1;
        return true;
    }
    return false;
}

calq_status calq__ew_prelu_infer(calq_op_ctx *c)
{
    CALQ_TRY(calq__ew_arity(c, 2, 2, 1));
    CALQ_TRY(calq__ew_input(c, 0, EW_F | EW_SI, "input 0 (X)"));
    CALQ_TRY(calq__ew_input(c, 1, EW_F | EW_SI, "input 1 (slope)"));
    CALQ_TRY(calq__ew_same_dtype(c, 0, 1));
    CALQ_TRY(calq__ew_output(c, 0));
    calq_tensor view;
    if (!prelu_slope(c->in[0], c->in[1], &view)) {
        char sx[96], ss[96];
        return calq__op_fail(c, CALQ_ERR_SHAPE, "slope shape %s does not broadcast to X's shape %s",
                             calq__shape_str(c->in[1]->dims, c->in[1]->ndim, ss, sizeof ss),
                             calq__shape_str(c->in[0]->dims, c->in[0]->ndim, sx, sizeof sx));
    }
    calq__set_shape(c->out[0], c->in[0]->dtype, c->in[0]->dims, c->in[0]->ndim);
    return CALQ_OK;
}

calq_status calq__ew_prelu_run(calq_op_ctx *c)
{
    if (calq__ew_has_f16(c)) return calq__ew_run_promoted(c, calq__ew_prelu_run);
    ew_row row = prelu_tab[c->in[0]->dtype];
    calq_tensor view;
    if (!row || !prelu_slope(c->in[0], c->in[1], &view))
        return calq__op_fail(c, CALQ_ERR_INTERNAL, "inputs changed since shape inference");
    ew_par p;
    memset(&p, 0, sizeof p);
    const calq_tensor *in[2] = {c->in[0], &view};
    calq__ew_apply(row, &p, c->out[0], in, 2);
    return CALQ_OK;
}

/* ---- Pow ----------------------------------------------------------------------------------- */

EW_BIN_ROW(pow_f32, float, float, float, powf(x, y))
EW_BIN_ROW(pow_f64, double, double, double, pow(x, y))

/* Pow(x, 2) as x * x: the correctly rounded square, which libm's powf only comes within 0.82
 * ULP of, at a fraction of the cost. Decomposed LayerNorms (torch.onnx's ReduceMean-Sub-Pow-
 * ReduceMean) spend ~9% of a ViT forward in powf otherwise; onnxruntime squares too. */
static void square_f32(const ew_par *p, void *o_, const void *const *in, const int64_t *st, int64_t n)
{
    float *o = o_;
    const float *a = in[0];
    (void)p;
    if (st[0] == 1) {
        for (int64_t i = 0; i < n; i++) o[i] = a[i] * a[i];
    } else {
        for (int64_t i = 0; i < n; i++) o[i] = a[i * st[0]] * a[i * st[0]];
    }
}

/* True when Y is a float32 scalar (any rank, one element) equal to 2. */
static bool pow_is_square(const calq_tensor *y)
{
    if (y->dtype != CALQ_DTYPE_FLOAT32 || !y->data) return false;
    int64_t n = 1;
    for (int d = 0; d < y->ndim; d++) n *= y->dims[d];
    return n == 1 && ((const float *)y->data)[0] == 2.0f;
}

/* x^e for e >= 0 by squaring, wrapping on overflow like numpy's integer power. */
static int64_t ipow(int64_t x, int64_t e)
{
    uint64_t r = 1, b = (uint64_t)x;
    for (; e > 0; e >>= 1) {
        if (e & 1) r *= b;
        b *= b;
    }
    return (int64_t)r;
}

/* Mixed dtypes: integer^integer exactly, everything else in double and converted to the base's
 * dtype (truncating, saturating), matching numpy's promotion followed by a cast. */
static void pow_mixed(const ew_par *p, void *o, const void *const *in, const int64_t *st, int64_t n)
{
    calq_tensor a = {.dtype = p->ta, .data = (void *)in[0]}, b = {.dtype = p->tb, .data = (void *)in[1]};
    calq_tensor d = {.dtype = p->to, .data = o};
    bool ints = calq__dtype_is_int(p->ta) && calq__dtype_is_int(p->tb);
    for (int64_t i = 0; i < n; i++) {
        int64_t ia = i * st[0], ib = i * st[1];
        if (ints && calq__tensor_get_i64(&b, ib) >= 0)
            calq__tensor_set_i64(&d, i, ipow(calq__tensor_get_i64(&a, ia), calq__tensor_get_i64(&b, ib)));
        else
            calq__tensor_set_f64(&d, i, pow(calq__tensor_get_f64(&a, ia), calq__tensor_get_f64(&b, ib)));
    }
}

calq_status calq__ew_pow_infer(calq_op_ctx *c)
{
    CALQ_TRY(calq__ew_arity(c, 2, 2, 1));
    CALQ_TRY(calq__ew_input(c, 0, EW_NUM, "input 0 (X)"));
    CALQ_TRY(calq__ew_input(c, 1, EW_NUM, "input 1 (Y)"));
    CALQ_TRY(calq__ew_output(c, 0));
    int64_t dims[CALQ_MAX_DIMS];
    int nd = 0;
    CALQ_TRY(calq__ew_broadcast(c, 0, 2, dims, &nd));
    calq__set_shape(c->out[0], c->in[0]->dtype, dims, nd);
    return CALQ_OK;
}

calq_status calq__ew_pow_run(calq_op_ctx *c)
{
    if (calq__ew_has_f16(c)) return calq__ew_run_promoted(c, calq__ew_pow_run);
    ew_par p;
    memset(&p, 0, sizeof p);
    p.ta = c->in[0]->dtype;
    p.tb = c->in[1]->dtype;
    p.to = c->out[0]->dtype;
    ew_row row = pow_mixed;
    if (p.ta == CALQ_DTYPE_FLOAT32 && p.tb == CALQ_DTYPE_FLOAT32) row = pow_is_square(c->in[1]) ? square_f32 : pow_f32;
    p.cost = row == square_f32 ? 1 : CALQ__EW_COST_LIBM;
    if (p.ta == CALQ_DTYPE_FLOAT64 && p.tb == CALQ_DTYPE_FLOAT64) row = pow_f64;
    const calq_tensor *in[2] = {c->in[0], c->in[1]};
    calq__ew_apply(row, &p, c->out[0], in, 2);
    return CALQ_OK;
}
