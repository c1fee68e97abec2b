/* Shared machinery of the elementwise kernels (elementwise*.c): a broadcasting driver that
 * calls per-dtype "row" functions on contiguous runs, input checks, and float16 promotion.
 * Private to those files. */
#ifndef CALQ_EXEC_KERNELS_ELEMENTWISE_COMMON_H
#define CALQ_EXEC_KERNELS_ELEMENTWISE_COMMON_H

#include <stdint.h>
#include <string.h>

#include "exec/op.h"

/* dtype sets, one bit per calq_dtype */
#define EW_DT(t) (1u << (t))
#define EW_F     (EW_DT(CALQ_DTYPE_FLOAT32) | EW_DT(CALQ_DTYPE_FLOAT64) | EW_DT(CALQ_DTYPE_FLOAT16))
#define EW_SI    (EW_DT(CALQ_DTYPE_INT8) | EW_DT(CALQ_DTYPE_INT16) | EW_DT(CALQ_DTYPE_INT32) | EW_DT(CALQ_DTYPE_INT64))
#define EW_UI    (EW_DT(CALQ_DTYPE_UINT8) | EW_DT(CALQ_DTYPE_UINT16) | EW_DT(CALQ_DTYPE_UINT32) | EW_DT(CALQ_DTYPE_UINT64))
#define EW_NUM   (EW_F | EW_SI | EW_UI)
#define EW_BOOL  EW_DT(CALQ_DTYPE_BOOL)
#define EW_ANY   (EW_NUM | EW_BOOL)
#define EW_NDT   (CALQ_DTYPE_BOOL + 1)

/* Scalars a row function may need besides its inputs. */
typedef struct ew_par {
    double a, b, g;        /* op attributes (alpha, beta, gamma) */
    calq_dtype ta, tb, to; /* input / output dtypes, for rows that convert */
    uint64_t lo, hi;       /* Clip bounds, stored as raw values of the input dtype */
    unsigned form;         /* a row's variant (calq__ew_mvec_gelu_parts_row's GELU_PARTS_* bits) */
    int cost;              /* work per element in units of one add (0 = 1): a libm call is
                              CALQ__EW_COST_LIBM; decides when the kernel runs in parallel */
} ew_par;

/* The cost of an element computed by a libm function (erff, expf, tanhf, powf, ...) in units of
 * an add: about 4 ns against 0.25 ns, measured on Erf and Add over the same 1x196x768 tensor. */
#define CALQ__EW_COST_LIBM 16

/* Computes n consecutive output elements at `out`; input k is read at in[k] + i*st[k]
 * (st[k] is 0 for a broadcast input, 1 otherwise). */
typedef void (*ew_row)(const ew_par *p, void *out, const void *const *in, const int64_t *st, int64_t n);

/* out = row(in[0], ..., in[nin-1]) elementwise; each input broadcasts numpy-style to out's
 * shape (the caller checked that it does). Parallel for big tensors, bit-identical results
 * for any thread count. nin <= 3. */
void calq__ew_apply(ew_row row, const ew_par *p, calq_tensor *out, const calq_tensor *const *in, int nin);

/* Input i exists and has a dtype in `types` (what: e.g. "input 0 (X)"). */
calq_status calq__ew_input(calq_op_ctx *c, int i, unsigned types, const char *what);
/* The node has in_lo..in_hi inputs and 1..out_hi outputs. */
calq_status calq__ew_arity(calq_op_ctx *c, int in_lo, int in_hi, int out_hi);
/* Output i exists (it is not an omitted optional output). */
calq_status calq__ew_output(calq_op_ctx *c, int i);
/* The numpy broadcast of inputs first..first+n-1 into dims/nd, or a shape error naming them. */
calq_status calq__ew_broadcast(calq_op_ctx *c, int first, int n, int64_t *dims, int *nd);
/* Input i has the same dtype as input j. */
calq_status calq__ew_same_dtype(calq_op_ctx *c, int i, int j);

/* True when some input or output is float16. */
bool calq__ew_has_f16(const calq_op_ctx *c);
/* Runs `run` on float32 copies of every float16 input and output, converting float16 outputs
 * back: the float kernels then serve float16 too (numpy also computes half in float). */
calq_status calq__ew_run_promoted(calq_op_ctx *c, calq_status (*run)(calq_op_ctx *c));

/* Converting row for dtype `from` to `to` (p->ta / p->to must be set for the generic one). */
ew_row calq__ew_cast_row(calq_dtype from, calq_dtype to);

/* Exported op entry points (the op table lives in elementwise.c). */
calq_status calq__ew_unary_infer(calq_op_ctx *c);
calq_status calq__ew_unary_run(calq_op_ctx *c);
/* The fast path of the ops elementwise_mvec.c vectorizes: prepare leaves c->state NULL (the
 * reference row runs) unless the input is float32 and the CPU has a vector row for the op. */
calq_status calq__ew_unary_prepare(calq_op_ctx *c);
calq_status calq__ew_unary_run_fast(calq_op_ctx *c);
void calq__ew_unary_release(void *state);
calq_status calq__ew_clip_infer(calq_op_ctx *c);
calq_status calq__ew_clip_run(calq_op_ctx *c);
calq_status calq__ew_binary_infer(calq_op_ctx *c);
calq_status calq__ew_binary_run(calq_op_ctx *c);
calq_status calq__ew_prelu_infer(calq_op_ctx *c);
calq_status calq__ew_prelu_run(calq_op_ctx *c);
calq_status calq__ew_pow_infer(calq_op_ctx *c);
calq_status calq__ew_pow_run(calq_op_ctx *c);

/* ---- row generators ------------------------------------------------------------------------
 * EXPR sees x (input 0), y (input 1) and p. Unary rows are only used on same-shape tensors,
 * where the driver always passes stride 1. */

#define EW_UN_ROW(NAME, TI, TO, EXPR)                                                                                  \
    static void NAME(const ew_par *p, void *o_, const void *const *in, const int64_t *st, int64_t n)                   \
    {                                                                                                                  \
        TO *o = o_;                                                                                                    \
        const TI *a = in[0];                                                                                           \
        (void)p;                                                                                                       \
        (void)st;                                                                                                      \
        for (int64_t i = 0; i < n; i++) {                                                                              \
            const TI x = a[i];                                                                                         \
            o[i] = (TO)(EXPR);                                                                                         \
        }                                                                                                              \
    }

/* The stride cases get their own loops so the common ones (same shape, scalar or
 * per-channel operand) vectorise without index arithmetic. */
#define EW_BIN_ROW(NAME, TA, TB, TO, EXPR)                                                                             \
    static void NAME(const ew_par *p, void *o_, const void *const *in, const int64_t *st, int64_t n)                   \
    {                                                                                                                  \
        TO *o = o_;                                                                                                    \
        const TA *a = in[0];                                                                                           \
        const TB *b = in[1];                                                                                           \
        (void)p;                                                                                                       \
        if (st[0] == 1 && st[1] == 1) {                                                                                \
            for (int64_t i = 0; i < n; i++) {                                                                          \
                const TA x = a[i];                                                                                     \
                const TB y = b[i];                                                                                     \
                o[i] = (TO)(EXPR);                                                                                     \
            }                                                                                                          \
        } else if (st[0] == 1 && st[1] == 0) {                                                                         \
            const TB y = b[0];                                                                                         \
            for (int64_t i = 0; i < n; i++) {                                                                          \
                const TA x = a[i];                                                                                     \
                o[i] = (TO)(EXPR);                                                                                     \
            }                                                                                                          \
        } else if (st[0] == 0 && st[1] == 1) {                                                                         \
            const TA x = a[0];                                                                                         \
            for (int64_t i = 0; i < n; i++) {                                                                          \
                const TB y = b[i];                                                                                     \
                o[i] = (TO)(EXPR);                                                                                     \
            }                                                                                                          \
        } else {                                                                                                       \
            for (int64_t i = 0; i < n; i++) {                                                                          \
                const TA x = a[i * st[0]];                                                                             \
                const TB y = b[i * st[1]];                                                                             \
                o[i] = (TO)(EXPR);                                                                                     \
            }                                                                                                          \
        }                                                                                                              \
    }

/* GEN(OP, suffix, C type, EXPR-macro) for each dtype of a family. */
#define EW_FOR_F(GEN, OP, M) GEN(OP, f32, float, M) GEN(OP, f64, double, M)
#define EW_FOR_SI(GEN, OP, M)                                                                                          \
    GEN(OP, i8, int8_t, M) GEN(OP, i16, int16_t, M) GEN(OP, i32, int32_t, M) GEN(OP, i64, int64_t, M)
#define EW_FOR_UI(GEN, OP, M)                                                                                          \
    GEN(OP, u8, uint8_t, M) GEN(OP, u16, uint16_t, M) GEN(OP, u32, uint32_t, M) GEN(OP, u64, uint64_t, M)

/* Designated initialisers of a dtype-indexed ew_row table. */
#define EW_TAB_F(OP) [CALQ_DTYPE_FLOAT32] = OP##_f32, [CALQ_DTYPE_FLOAT64] = OP##_f64
#define EW_TAB_SI(OP)                                                                                                  \
    [CALQ_DTYPE_INT8] = OP##_i8, [CALQ_DTYPE_INT16] = OP##_i16, [CALQ_DTYPE_INT32] = OP##_i32,                         \
    [CALQ_DTYPE_INT64] = OP##_i64
#define EW_TAB_UI(OP)                                                                                                  \
    [CALQ_DTYPE_UINT8] = OP##_u8, [CALQ_DTYPE_UINT16] = OP##_u16, [CALQ_DTYPE_UINT32] = OP##_u32,                      \
    [CALQ_DTYPE_UINT64] = OP##_u64

#endif
