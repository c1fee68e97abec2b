/* Division by a power of two as a multiplication, bit for bit. */
#ifndef CALQ_EXEC_KERNELS_EXACT_RECIP_H
#define CALQ_EXEC_KERNELS_EXACT_RECIP_H

#include <math.h>

/* 1 / c when c is a power of two (of either sign) whose reciprocal is a normal float32, else 0.
 * Then x / c and x * (1 / c) are the same real number, so IEEE rounding gives the same float for
 * every x (subnormal, infinite and NaN results included); a divide costs many multiplies. */
static inline float calq__exact_recip(float c)
{
    int e;
    const float m = frexpf(c, &e); /* c = m * 2^e, 0.5 <= |m| < 1 */
    if ((m != 0.5f && m != -0.5f) || e - 1 < -126 || e - 1 > 126) return 0.0f;
    return 1.0f / c;
}

#endif
