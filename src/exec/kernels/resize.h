/* Resize and Upsample (resize.c) share these between their three files: resize_parse.c turns a
 * node's inputs and attributes into rz_params, resize_taps.c maps output coordinates to source
 * taps, resize.c runs the kernels. Private to src/exec/kernels. */
#ifndef CALQ_EXEC_KERNELS_RESIZE_H
#define CALQ_EXEC_KERNELS_RESIZE_H

#include <stdbool.h>
#include <stdint.h>

#include "exec/op.h"

typedef enum rz_mode { RZ_NEAREST, RZ_LINEAR, RZ_CUBIC } rz_mode;

typedef enum rz_coord {
    CT_HALF_PIXEL,
    CT_ASYMMETRIC,
    CT_PYTORCH_HALF_PIXEL,
    CT_ALIGN_CORNERS,
    CT_TF_HALF_PIXEL_FOR_NN,
    CT_TF_CROP_AND_RESIZE,
    CT_HALF_PIXEL_SYMMETRIC
} rz_coord;

typedef enum rz_round {
    NM_ROUND_PREFER_FLOOR,
    NM_ROUND_PREFER_CEIL,
    NM_FLOOR,
    NM_CEIL,
    NM_LEGACY /* Upsample and Resize-10: truncate when enlarging, ceil when shrinking (onnxruntime) */
} rz_round;

typedef struct rz_params {
    int rank;
    int64_t in[CALQ_MAX_DIMS], out[CALQ_MAX_DIMS];
    double scale[CALQ_MAX_DIMS];   /* output/input ratio in the coordinate formulas */
    double out_len[CALQ_MAX_DIMS]; /* resized length in the align_corners / crop formulas */
    double roi_lo[CALQ_MAX_DIMS], roi_hi[CALQ_MAX_DIMS];
    rz_mode mode;
    rz_coord coord;
    rz_round round;
    double cubic_a;
    bool exclude_outside;
    bool antialias;
    double extrapolation;
    int max_taps[CALQ_MAX_DIMS]; /* taps per output position on each axis */
} rz_params;

/* The (index, weight) taps of one output position on one axis: up to p->max_taps[a] of them,
 * in idx[] / w[] (storage the caller provides). */
typedef struct rz_taps {
    int64_t *idx;
    double *w;
    int n;
    bool outside;
} rz_taps;

/* Taps of every output position of one axis, with their storage. */
typedef struct rz_axis_taps {
    rz_taps *t;
    int64_t *idx;
    double *w;
} rz_axis_taps;

/* Resolves mode, coordinate rules and output shape for Resize or Upsample at any supported
 * opset, validating every input the kernels later read. */
calq_status calq__rz_parse(calq_op_ctx *c, rz_params *p);

/* The taps of output index xo on axis a (t->idx / t->w: p->max_taps[a] slots the caller owns). */
void calq__rz_make_taps(const rz_params *p, int a, int64_t xo, rz_taps *t);

/* Taps of every output position of axis a; false when out of memory. The arrays are owned by
 * `at` and freed by calq__rz_axis_taps_free. */
bool calq__rz_axis_taps_make(const rz_params *p, int a, rz_axis_taps *at);
void calq__rz_axis_taps_free(rz_axis_taps *at);

#endif
