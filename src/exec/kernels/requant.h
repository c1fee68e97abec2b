/* Requantization to 8 bits as the reference kernels do it (calq__store_q: saturate(
 * round_half_even(v) + zp), NaN to the type's minimum), written so that the compiler vectorises
 * it: round half to even as (v + 1.5 * 2^23) - 1.5 * 2^23, which is exact for |v| <= 2^22 in
 * the default rounding mode (the sum lands where the floats are exactly the integers); a larger
 * |v| is clamped to the bound either way, as the result lies beyond [-128, 255] in both forms.
 * ISO C mode compiles with -ffp-contract=off, so no operation is fused with another. */
#ifndef CALQ_EXEC_KERNELS_REQUANT_H
#define CALQ_EXEC_KERNELS_REQUANT_H

#define CALQ_ROUND_MAGIC 12582912.0f /* 1.5 * 2^23 */

/* The 8-bit level of v with zero point zp in [lo, hi], as a float holding an integer. */
static inline float calq__requant_level(float v, float zp, float lo, float hi)
{
    float r = (v + CALQ_ROUND_MAGIC) - CALQ_ROUND_MAGIC;
    r += zp;
    r = r < lo ? lo : r;
    r = r > hi ? hi : r;
    return v != v ? lo : r;
}

#endif
