/* The epilogue of the integer layers' fast paths (int_dnnl.h): exact sums to outputs, with the
 * reference kernels' arithmetic, in loops the compiler vectorises.
 *
 * Why the results are the reference's bits:
 *  - oneDNN's sums satisfy |acc| <= CALQ_INT_DNNL_MAX_K * 255 * 128, so acc + bias fits int32
 *    whenever |bias| <= BIAS_SAFE; other biases take a scalar path that adds in int64 and records
 *    the sums leaving int32 (the reference fails on them);
 *  - (float)v * mult (+ fbias) are the reference's float operations in its order (no contraction:
 *    ISO C mode compiles with -ffp-contract=off);
 *  - the 8-bit requantization is calq__requant_level (requant.h), calq__store_q's rule.
 * Threads split rows / position tiles only; every output element is computed once. */
#include <math.h>
#include <string.h>

#include "exec/kernels/int_dnnl.h"
#include "exec/kernels/requant.h"

#define MAX_ABS_SUM ((int64_t)CALQ_INT_DNNL_MAX_K * 255 * 128)
#define BIAS_SAFE   ((int64_t)INT32_MAX - MAX_ABS_SUM)

/* Position tiles of the channels-last epilogue: TILE_P positions x TILE_M channels transposed
 * through a stack buffer, so both the sums read and the outputs written are contiguous. */
#define TILE_P 64
#define TILE_M 16

/* Is every bias value small enough that acc + bias cannot leave int32? */
static bool bias_safe(const calq_int_epi *e, int64_t rows, int64_t ch)
{
    if (!e->bias) return true;
    for (int64_t r = 0; r < (e->bias_rs ? rows : 1); r++)
        for (int64_t c = 0; c < (e->bias_cs ? ch : 1); c++) {
            const int64_t b = e->bias[r * e->bias_rs + c * e->bias_cs];
            if (b > BIAS_SAFE || b < -BIAS_SAFE) return false;
        }
    return true;
}

/* ---- one channel, a contiguous run (the channels-last tiles) ----------------------------- */

/* y[j] for j < n from sums a[j] + b of channel ch; y is the element address of output index i0. */
static void run_one_channel(const calq_int_epi *e, const int32_t *a, int64_t n, int32_t b, int64_t ch, void *y)
{
    switch (e->out) {
    case CALQ_DTYPE_INT32: {
        int32_t *o = y;
        for (int64_t j = 0; j < n; j++) o[j] = a[j] + b;
        break;
    }
    case CALQ_DTYPE_FLOAT32: {
        float *o = y;
        const float m = e->mult[ch];
        if (e->fbias) {
            const float fb = e->fbias[ch];
            for (int64_t j = 0; j < n; j++) o[j] = (float)(a[j] + b) * m + fb;
        } else {
            for (int64_t j = 0; j < n; j++) o[j] = (float)(a[j] + b) * m;
        }
        break;
    }
    case CALQ_DTYPE_UINT8: {
        uint8_t *o = y;
        const float m = e->mult[ch], zp = (float)e->zp;
        for (int64_t j = 0; j < n; j++)
            o[j] = (uint8_t)(int32_t)calq__requant_level((float)(a[j] + b) * m, zp, 0.0f, 255.0f);
        break;
    }
    default: {
        int8_t *o = y;
        const float m = e->mult[ch], zp = (float)e->zp;
        for (int64_t j = 0; j < n; j++)
            o[j] = (int8_t)(int32_t)calq__requant_level((float)(a[j] + b) * m, zp, -128.0f, 127.0f);
        break;
    }
    }
}

/* The scalar path for sums that may leave int32: exact int64 sums, the first overflow recorded
 * (index i0 + j), then the reference's own store. */
static void store_checked(const calq_int_epi *e, int64_t v, int64_t ch, void *y, int64_t j, int64_t idx,
                          calq__i32_overflow *ov)
{
    if (!calq__int_fits_i32(v)) calq__int_overflow_note(ov, idx, v);
    const int32_t v32 = calq__int_fits_i32(v) ? (int32_t)v : v < 0 ? INT32_MIN : INT32_MAX;
    switch (e->out) {
    case CALQ_DTYPE_INT32: ((int32_t *)y)[j] = v32; break;
    case CALQ_DTYPE_FLOAT32: {
        const float f = (float)v * e->mult[ch];
        ((float *)y)[j] = e->fbias ? f + e->fbias[ch] : f;
        break;
    }
    case CALQ_DTYPE_UINT8:
        ((uint8_t *)y)[j] = (uint8_t)(int32_t)calq__requant_level((float)v * e->mult[ch], (float)e->zp, 0.0f, 255.0f);
        break;
    default:
        ((int8_t *)y)[j] = (int8_t)(int32_t)calq__requant_level((float)v * e->mult[ch], (float)e->zp, -128.0f, 127.0f);
        break;
    }
}

static size_t out_size(calq_dtype t)
{
    return t == CALQ_DTYPE_INT32 || t == CALQ_DTYPE_FLOAT32 ? 4 : 1;
}

void calq__int_epi_channels_last(const calq_int_epi *e, const int32_t *acc, int64_t N, int64_t P, int64_t M, void *y,
                                 calq__i32_overflow *ov)
{
    const bool safe = bias_safe(e, N, M);
    const size_t es = out_size(e->out);
    char *yb = y;
    const int64_t tiles = (P + TILE_P - 1) / TILE_P;
#pragma omp parallel for collapse(2) schedule(static) if (N * P * M >= 16384)
    for (int64_t n = 0; n < N; n++) {
        for (int64_t t = 0; t < tiles; t++) {
            const int64_t p0 = t * TILE_P, np = P - p0 < TILE_P ? P - p0 : TILE_P;
            const int32_t *at = acc + (n * P + p0) * M;
            int32_t tmp[TILE_M][TILE_P];
            for (int64_t m0 = 0; m0 < M; m0 += TILE_M) {
                const int64_t nm = M - m0 < TILE_M ? M - m0 : TILE_M;
                for (int64_t p = 0; p < np; p++)
                    for (int64_t i = 0; i < nm; i++) tmp[i][p] = at[p * M + m0 + i];
                for (int64_t i = 0; i < nm; i++) {
                    const int64_t m = m0 + i, i0 = (n * M + m) * P + p0;
                    const int64_t b = e->bias ? e->bias[n * e->bias_rs + m * e->bias_cs] : 0;
                    if (safe) {
                        run_one_channel(e, tmp[i], np, (int32_t)b, m, yb + (size_t)i0 * es);
                    } else {
                        for (int64_t p = 0; p < np; p++)
                            store_checked(e, (int64_t)tmp[i][p] + b, m, yb + (size_t)i0 * es, p, i0 + p, ov);
                    }
                }
            }
        }
    }
}

/* ---- rows of channels (the matrix products) ---------------------------------------------- */

/* One row r: y[j] for channels j < M. */
static void run_row(const calq_int_epi *e, const int32_t *a, int64_t r, int64_t M, void *y)
{
    const int32_t *br = e->bias ? e->bias + r * e->bias_rs : NULL;
    const int64_t cs = e->bias_cs;
    switch (e->out) {
    case CALQ_DTYPE_INT32: {
        int32_t *o = y;
        for (int64_t j = 0; j < M; j++) o[j] = a[j] + (br ? br[j * cs] : 0);
        break;
    }
    case CALQ_DTYPE_FLOAT32: {
        float *o = y;
        for (int64_t j = 0; j < M; j++) o[j] = (float)(a[j] + (br ? br[j * cs] : 0)) * e->mult[j];
        if (e->fbias)
            for (int64_t j = 0; j < M; j++) o[j] = o[j] + e->fbias[j];
        break;
    }
    case CALQ_DTYPE_UINT8: {
        uint8_t *o = y;
        const float zp = (float)e->zp;
        for (int64_t j = 0; j < M; j++)
            o[j] = (uint8_t)(int32_t)calq__requant_level((float)(a[j] + (br ? br[j * cs] : 0)) * e->mult[j], zp, 0.0f,
                                                         255.0f);
        break;
    }
    default: {
        int8_t *o = y;
        const float zp = (float)e->zp;
        for (int64_t j = 0; j < M; j++)
            o[j] = (int8_t)(int32_t)calq__requant_level((float)(a[j] + (br ? br[j * cs] : 0)) * e->mult[j], zp, -128.0f,
                                                        127.0f);
        break;
    }
    }
}

void calq__int_epi_rows(const calq_int_epi *e, const int32_t *acc, int64_t R, int64_t M, void *y,
                        calq__i32_overflow *ov)
{
    const bool safe = bias_safe(e, R, M);
    const size_t es = out_size(e->out);
    char *yb = y;
#pragma omp parallel for schedule(static) if (R * M >= 16384)
    for (int64_t r = 0; r < R; r++) {
        const int32_t *a = acc + r * M;
        void *yr = yb + (size_t)(r * M) * es;
        if (safe) {
            run_row(e, a, r, M, yr);
        } else {
            for (int64_t j = 0; j < M; j++) {
                const int64_t b = e->bias ? e->bias[r * e->bias_rs + j * e->bias_cs] : 0;
                store_checked(e, (int64_t)a[j] + b, j, yr, j, r * M + j, ov);
            }
        }
    }
}
