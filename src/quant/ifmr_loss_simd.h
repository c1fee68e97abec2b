/* The x86 candidate-loss kernels (ifmr_loss_avx2.c, ifmr_loss_avx512.c), private to src/quant:
 * ifmr_loss.c dispatches to them at run time. Each computes, per candidate, the same float
 * operations as calq__ifmr_loss_ref (clip, divide, round half away, multiply, subtract) and adds
 * the terms in the same order, so every candidate's sums equal the _ref kernel's bit for bit.
 *
 * lanes: the double-lane mode for up to CALQ__IFMR_SIMD_GROUP candidates at once (independent
 *        addition chains, so the lane sums' latency is hidden); x[0] is at lane 0 and m is a
 *        multiple of CALQ__IFMR_LANES. Within a candidate the 8 lanes are 8 vector elements:
 *        lane l still adds elements l, l+8, l+16, ... in that order.
 * fsum:  AMCT's float running sum, one per candidate, vectorized across candidates (a vector
 *        holds one element's term for 8 or 16 candidates), elements strictly in order. */
#ifndef CALQ_QUANT_IFMR_LOSS_SIMD_H
#define CALQ_QUANT_IFMR_LOSS_SIMD_H

#include <stddef.h>

#include "quant/quant.h"

#define CALQ__IFMR_SIMD_GROUP 4

#if defined(__x86_64__) || defined(__i386__)
#define CALQ__IFMR_X86 1
void calq__ifmr_lanes_avx2(const float *x, size_t m, unsigned k, const calq__ifmr_cand *const *c,
                           calq__ifmr_acc *const *a);
void calq__ifmr_fsum_avx2(const float *x, size_t n, unsigned k, const calq__ifmr_cand *const *c, float Lf,
                          calq__ifmr_acc *const *a);
void calq__ifmr_lanes_avx512(const float *x, size_t m, unsigned k, const calq__ifmr_cand *const *c,
                             calq__ifmr_acc *const *a);
void calq__ifmr_fsum_avx512(const float *x, size_t n, unsigned k, const calq__ifmr_cand *const *c, float Lf,
                            calq__ifmr_acc *const *a);
/* The nonzero elements of x[0..n) in order into out (which has room for n + 16); returns how many */
size_t calq__compact_nonzero_avx512(const float *x, size_t n, float *out);
/* The lower and upper terms bounds() (ifmr_bound.c) adds for bins [j0, j0 + m) of bs and
 * candidate c, into lo[0..m) and up[0..m), each the scalar loop's bit for bit
 * (ifmr_bound_avx512.c). */
void calq__ifmr_bound_terms_avx512(const calq__ifmr_binset *bs, size_t j0, size_t m, const calq__ifmr_cand *c,
                                   double *lo, double *up);
#endif

#endif
