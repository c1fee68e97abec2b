/* The activation cache's packed form of a tensor (act_cache.c): a bit mask with one bit per
 * element (bit j % 8 of byte j / 8, set when the element's bits are not all zero) and the
 * elements whose bit is set, in order. Only +0.0 is left out: -0.0, NaN and everything else are
 * kept bit for bit, so unpacking gives back the same bytes.
 *
 * Why: the layers' inputs a calibration caches are mostly ReLU outputs, a third to two thirds
 * +0.0 (ResNet-18 on random data: 27-53 %), and on this project's VMs the cache's memory costs
 * more to fault in than to fill (docs/performance.md).
 *
 * The tensor is cut into chunks of CALQ__PACK_CHUNK elements (a multiple of 16, so each chunk's
 * mask starts on a byte): the callers count and pack chunks on several threads, and the bytes
 * do not depend on the thread count. Each kernel has a plain _ref form; the others use AVX-512
 * when the CPU has it and give the same bytes. */
#ifndef CALQ_CALIB_ACT_PACK_H
#define CALQ_CALIB_ACT_PACK_H

#include <stddef.h>
#include <stdint.h>

#define CALQ__PACK_CHUNK ((size_t)1 << 16)
/* bytes readable past the packed values that calq__act_unpack may load (it never uses them) */
#define CALQ__PACK_SLACK 64

/* Bytes of the mask of n elements. */
static inline size_t calq__pack_mask_bytes(size_t n)
{
    return (n + 7) / 8;
}

/* Elements of x[0..n) whose bits are not all zero. */
size_t calq__act_pack_count(const float *x, size_t n);
size_t calq__act_pack_count_ref(const float *x, size_t n);

/* Writes the mask of x[0..n) (calq__pack_mask_bytes(n) bytes; the last byte's unused bits 0) and
 * its kept elements to vals; returns how many were kept. */
size_t calq__act_pack(const float *x, size_t n, uint8_t *mask, float *vals);
size_t calq__act_pack_ref(const float *x, size_t n, uint8_t *mask, float *vals);

/* The inverse: out[0..n) from a mask and its kept values (vals must have CALQ__PACK_SLACK
 * readable bytes after the last one it uses); returns how many values it used. A tensor unpacks
 * piece by piece: chunk k's mask starts at mask + k * CALQ__PACK_CHUNK / 8, its values where the
 * previous chunk's ended. */
size_t calq__act_unpack(const uint8_t *mask, const float *vals, size_t n, float *out);
size_t calq__act_unpack_ref(const uint8_t *mask, const float *vals, size_t n, float *out);

#endif
