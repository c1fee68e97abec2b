/* Exact integer accumulation shared by calq's integer layers: ONNX's QLinearConv / QLinearMatMul
 * (quant_ops.c) and the integer layers of Ascend deploy models (conv_int.c, gemm.c, pool.c;
 * amct-reference.md §9.1).
 *
 * Operands are first "centered", q - zero_point, which for 8-bit data always fits int16
 * (|q - zp| <= 255), so the kernels multiply int16 by int16 and add into int64: every sum is
 * exact, in a fixed order, and only then checked against the int32 range the layers define. */
#ifndef CALQ_EXEC_KERNELS_INT_ACCUM_H
#define CALQ_EXEC_KERNELS_INT_ACCUM_H

#include <stdbool.h>
#include <stdint.h>

#include "calq.h"

/* t (int8 or uint8) minus its zero point, as int16. Element i uses zp[(i / inner) % numel(zp)]
 * (zp: an int8 / uint8 / int32 tensor, e.g. a per-output-channel w_zero_point with inner =
 * elements per channel), or zp0 when zp is NULL. Returns NULL when out of memory or when t is
 * not 8-bit. Owner: the caller, released with free(). */
int16_t *calq__int_centered(const calq_tensor *t, int64_t zp0, const calq_tensor *zp, int64_t inner);

/* acc[n] = sum over k < K, ascending, of a[k * a_cs] * b[k * b_rs + n * b_cs], for n < N: one row
 * of an integer matrix product (B streamed by rows when b_cs == 1, dotted by columns otherwise;
 * the sums are exact either way). */
void calq__int_dot_row(const int16_t *a, int64_t a_cs, const int16_t *b, int64_t b_rs, int64_t b_cs, int64_t K,
                       int64_t N, int64_t *acc);

/* Round-half-to-even of the exact quotient s / d (d > 0), as the Ascend AvgPool integer path
 * rounds its mean (§9.1). */
int64_t calq__int_div_round_even(int64_t s, int64_t d);

static inline bool calq__int_fits_i32(int64_t v)
{
    return v >= INT32_MIN && v <= INT32_MAX;
}

/* The first int32 overflow (lowest output index) of a parallel loop, so the error can name it
 * whatever the thread count; at < 0: none. Initialise with CALQ_I32_OVERFLOW_NONE. */
typedef struct calq__i32_overflow {
    int64_t at, sum;
} calq__i32_overflow;
#define CALQ_I32_OVERFLOW_NONE                                                                                         \
    {                                                                                                                  \
        -1, 0                                                                                                          \
    }

/* Records an overflow of sum v at output idx if it is the first so far (thread-safe). */
void calq__int_overflow_note(calq__i32_overflow *ov, int64_t idx, int64_t v);

/* An exact sum stored as int32: saturated, and an overflow recorded in ov. */
static inline int32_t calq__int_store_i32(int64_t v, int64_t idx, calq__i32_overflow *ov)
{
    if (calq__int_fits_i32(v)) return (int32_t)v;
    calq__int_overflow_note(ov, idx, v);
    return v < 0 ? INT32_MIN : INT32_MAX;
}

#endif
