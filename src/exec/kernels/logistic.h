/* The logistic function and SiLU / swish (x * logistic(a x)) over float32 rows, for the
 * convolutions that end in them (conv_dnnl.c: the "tail" of a fused chain).
 *
 * Why calq's own: oneDNN 2.6's swish post-op doubles the time of a depthwise convolution
 * (a 32 x 112 x 112 one: 55 us alone, 130 us with swish, 2 threads), and a separate pass over
 * the output with libmvec's expf still costs 60 us. EfficientNet-B0 has 6.2 M such elements per
 * image; every YOLOv5/v8-style detector has SiLU after every convolution. This kernel's exp is a
 * degree-6 polynomial on [-ln2/2, ln2/2] scaled by 2^n (vscalefps), and the result one
 * division: 37 us for the same pass, within 3 ulp of the correctly rounded logistic (tested).
 *
 * The AVX-512 form and the plain _ref form compute the same operations in the same order (fused
 * multiply-adds where the vector form fuses) and give the same bits; each element's result
 * depends on its value only, so the output does not depend on how rows are split between
 * threads. */
#ifndef CALQ_EXEC_KERNELS_LOGISTIC_H
#define CALQ_EXEC_KERNELS_LOGISTIC_H

#include <stdbool.h>
#include <stddef.h>

/* y[i] = 1 / (1 + exp(-x[i])) (swish false) or x[i] / (1 + exp(-alpha x[i])) (swish true), in
 * place allowed (y == x). exp's argument t is clamped to [-87, 89]: below, 1 + exp(t) is 1 in
 * float32 anyway; above ~88.4 exp(t) is +inf, so the logistic is 0 (swish: 0 with x's sign)
 * where the exact value would be a subnormal below 4e-39. NaN gives NaN, as do swish(-inf)
 * (-inf / inf) and the unfused layers (-inf * 0). */
void calq__logistic_rows(float *y, const float *x, size_t n, bool swish, float alpha);
void calq__logistic_rows_ref(float *y, const float *x, size_t n, bool swish, float alpha);

/* Whether calq__logistic_rows has its vector form on this CPU: without it the convolutions keep
 * oneDNN's post-op, which is faster than the plain loop. */
bool calq__logistic_fast(void);

#endif
