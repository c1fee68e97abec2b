/* Normalizations that compute statistics at run time: LayerNormalization (opset 17),
 * InstanceNormalization, GroupNormalization (opsets 18 and 21) and MeanVarianceNormalization.
 * Reference kernels only.
 *
 * The first three normalize contiguous rows of the input (LayerNormalization: everything from
 * `axis` on; InstanceNormalization: one channel of one sample; GroupNormalization: one group of
 * channels of one sample). Each row is widened to double, its mean and variance are taken in
 * two passes (mean, then the mean of squared deviations, as the ONNX reference computes them),
 * and the affine scale / bias is applied per element. Rows are independent, so threads split
 * rows and results are identical for any thread count. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernels/values.h"
#include "exec/op.h"

/* Below this many elements the normalizations run on the calling thread (a parallel region's
 * wake-up costs more: exec/kernels/elementwise.c, EW_PAR_WORK); an element costs about 3 adds. */
#define PAR_WORK ((int64_t)1 << 16)

/* Where the scale and bias of element j of row r are: s[(r % mod) * rstride + j / jdiv]. */
typedef struct affine_map {
    int64_t mod, rstride, jdiv;
} affine_map;

/* Input i is present and float. */
static calq_status float_input(calq_op_ctx *c, int i, const char *what)
{
    const calq_tensor *t = c->in[i];
    if (!t) return calq__op_fail(c, CALQ_ERR_SHAPE, "%s (input %d) is missing", what, i);
    if (!calq__dtype_is_float(t->dtype))
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "%s (input %d) is %s; a float tensor is required", what, i,
                             calq_dtype_name(t->dtype));
    return CALQ_OK;
}

/* Per-parameter vector of n values from input i: its numel must be n (any shape). */
static calq_status param_vector(calq_op_ctx *c, int i, const char *what, int64_t n, double dflt, double **out)
{
    *out = malloc(sizeof(double) * (size_t)(n + 1));
    if (!*out) return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory for %lld %s values", (long long)n, what);
    const calq_tensor *t = i < c->n_in ? c->in[i] : NULL;
    if (!t) {
        for (int64_t k = 0; k < n; k++) (*out)[k] = dflt;
        return CALQ_OK;
    }
    calq_status s = float_input(c, i, what);
    if (s == CALQ_OK && calq_tensor_numel(t) != n) {
        char a[96];
        s = calq__op_fail(c, CALQ_ERR_SHAPE, "%s (input %d) has shape %s; %lld values are needed", what, i,
                          calq__shape_str(t->dims, t->ndim, a, sizeof a), (long long)n);
    }
    if (s != CALQ_OK) {
        free(*out);
        *out = NULL;
        return s;
    }
    calq__k_load(t, 0, 1, n, *out);
    return CALQ_OK;
}

/* Normalizes `rows` rows of `len` elements of x into y; mean / inv_std (when non-NULL) get one
 * value per row. */
static calq_status normalize_rows(calq_op_ctx *c, const calq_tensor *x, calq_tensor *y, int64_t rows, int64_t len,
                                  double eps, const double *scale, const double *bias, affine_map m,
                                  calq_tensor *mean_out, calq_tensor *inv_out)
{
    if (rows == 0) return CALQ_OK;
    int oom = 0;
#pragma omp parallel if (rows > 1 && rows * len > PAR_WORK)
    {
        double *v = malloc(sizeof(double) * (size_t)(len + 1));
        if (!v) {
#pragma omp atomic write
            oom = 1;
        }
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; r++) {
            if (!v) continue;
            calq__k_load(x, r * len, 1, len, v);
            double mean = 0.0, var = 0.0;
            for (int64_t j = 0; j < len; j++) mean += v[j];
            mean = len ? mean / (double)len : 0.0;
            for (int64_t j = 0; j < len; j++) var += (v[j] - mean) * (v[j] - mean);
            var = len ? var / (double)len : 0.0;
            double inv = 1.0 / sqrt(var + eps);
            const int64_t base = (r % m.mod) * m.rstride;
            for (int64_t j = 0; j < len; j++) {
                int64_t k = base + j / m.jdiv;
                v[j] = (v[j] - mean) * inv * scale[k] + bias[k];
            }
            calq__k_store(y, r * len, 1, len, v);
            if (mean_out) calq__k_store(mean_out, r, 1, 1, &mean);
            if (inv_out) calq__k_store(inv_out, r, 1, 1, &inv);
        }
        free(v);
    }
    if (oom) return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory for a row of %lld values", (long long)len);
    return CALQ_OK;
}

static calq_status same_shape_infer(calq_op_ctx *c)
{
    CALQ_TRY(float_input(c, 0, "X"));
    calq__set_shape(c->out[0], c->in[0]->dtype, c->in[0]->dims, c->in[0]->ndim);
    return CALQ_OK;
}

/* ---- LayerNormalization ---------------------------------------------------------------------- */

static calq_status layer_norm_axis(calq_op_ctx *c, int *axis)
{
    CALQ_TRY(float_input(c, 0, "X"));
    CALQ_TRY(float_input(c, 1, "Scale"));
    const calq_tensor *x = c->in[0];
    int64_t a = calq__attr_int(c->node, "axis", -1);
    *axis = calq__norm_axis(a, x->ndim);
    if (*axis < 0)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "axis %lld is out of range for a rank-%d input", (long long)a, x->ndim);
    /* Scale and B broadcast (unidirectionally) to X.shape[axis:]; leading dims of 1 beyond it
     * (a [1, D] scale for a last-axis norm, as some exporters write it and onnxruntime takes)
     * are allowed up to X's rank, which they cannot change. */
    for (int i = 1; i < 3 && i < c->n_in; i++) {
        const calq_tensor *t = c->in[i];
        if (!t) continue;
        int n = x->ndim - *axis;
        bool ok = t->ndim <= x->ndim;
        for (int k = n; ok && k < t->ndim; k++) ok = t->dims[t->ndim - 1 - k] == 1;
        for (int k = 0; ok && k < t->ndim && k < n; k++) {
            int64_t d = t->dims[t->ndim - 1 - k], xd = x->dims[x->ndim - 1 - k];
            ok = d == xd || d == 1;
        }
        if (!ok) {
            char a1[96], a2[96];
            return calq__op_fail(c, CALQ_ERR_SHAPE, "%s of shape %s does not broadcast to the normalized shape %s",
                                 i == 1 ? "Scale" : "B", calq__shape_str(t->dims, t->ndim, a1, sizeof a1),
                                 calq__shape_str(x->dims + *axis, n, a2, sizeof a2));
        }
    }
    return CALQ_OK;
}

static calq_status layer_norm_infer(calq_op_ctx *c)
{
    int axis;
    CALQ_TRY(layer_norm_axis(c, &axis));
    const calq_tensor *x = c->in[0];
    calq__set_shape(c->out[0], x->dtype, x->dims, x->ndim);
    /* Mean and InvStdDev: X.shape[:axis] followed by ones, in float32 (stash_type 1). */
    int64_t d[CALQ_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) d[i] = i < axis ? x->dims[i] : 1;
    for (int k = 1; k < 3 && k < c->n_out; k++)
        if (c->out[k]) calq__set_shape(c->out[k], CALQ_DTYPE_FLOAT32, d, x->ndim);
    return CALQ_OK;
}

/* Input i broadcast to the trailing n dims of x, as n values (1 when absent and ones). */
static calq_status broadcast_trailing(calq_op_ctx *c, int i, int axis, double dflt, double **out)
{
    const calq_tensor *x = c->in[0], *t = i < c->n_in ? c->in[i] : NULL;
    int n = x->ndim - axis;
    int64_t len = calq__shape_numel(x->dims + axis, n);
    *out = malloc(sizeof(double) * (size_t)(len + 1));
    if (!*out) return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory for %lld values", (long long)len);
    if (!t) {
        for (int64_t k = 0; k < len; k++) (*out)[k] = dflt;
        return CALQ_OK;
    }
    int64_t st[CALQ_MAX_DIMS];
    const int lead = t->ndim > n ? t->ndim - n : 0; /* dims of 1 (layer_norm_axis) */
    calq__broadcast_strides(t->dims + lead, t->ndim - lead, n, st);
    for (int64_t k = 0; k < len; k++) {
        int64_t rem = k, off = 0;
        for (int d = n - 1; d >= 0; d--) {
            off += (rem % x->dims[axis + d]) * st[d];
            rem /= x->dims[axis + d];
        }
        (*out)[k] = calq__tensor_get_f64(t, off);
    }
    return CALQ_OK;
}

static calq_status layer_norm_run(calq_op_ctx *c)
{
    int axis;
    CALQ_TRY(layer_norm_axis(c, &axis));
    const calq_tensor *x = c->in[0];
    int64_t rows = calq__shape_numel(x->dims, axis), len = calq__shape_numel(x->dims + axis, x->ndim - axis);
    double *scale = NULL, *bias = NULL;
    calq_status s = broadcast_trailing(c, 1, axis, 1.0, &scale);
    if (s == CALQ_OK) s = broadcast_trailing(c, 2, axis, 0.0, &bias);
    if (s == CALQ_OK) {
        affine_map m = {1, 0, 1};
        s = normalize_rows(c, x, c->out[0], rows, len, calq__attr_float(c->node, "epsilon", 1e-5f), scale, bias, m,
                           c->n_out > 1 ? c->out[1] : NULL, c->n_out > 2 ? c->out[2] : NULL);
    }
    free(scale);
    free(bias);
    return s;
}

/* ---- InstanceNormalization and GroupNormalization ------------------------------------------- */

static calq_status channels_input(calq_op_ctx *c)
{
    CALQ_TRY(float_input(c, 0, "X"));
    if (c->in[0]->ndim < 2)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "X must be N x C x ...; it has %d dims", c->in[0]->ndim);
    return CALQ_OK;
}

static calq_status instance_norm_run(calq_op_ctx *c)
{
    CALQ_TRY(channels_input(c));
    const calq_tensor *x = c->in[0];
    int64_t C = x->dims[1], spatial = calq__shape_numel(x->dims + 2, x->ndim - 2);
    double *scale = NULL, *bias = NULL;
    calq_status s = param_vector(c, 1, "scale", C, 1.0, &scale);
    if (s == CALQ_OK) s = param_vector(c, 2, "B", C, 0.0, &bias);
    if (s == CALQ_OK) {
        affine_map m = {C > 0 ? C : 1, 1, spatial > 0 ? spatial : 1};
        s = normalize_rows(c, x, c->out[0], x->dims[0] * C, spatial, calq__attr_float(c->node, "epsilon", 1e-5f), scale,
                           bias, m, NULL, NULL);
    }
    free(scale);
    free(bias);
    return s;
}

static calq_status group_norm_groups(calq_op_ctx *c, int64_t *groups)
{
    CALQ_TRY(channels_input(c));
    int64_t C = c->in[0]->dims[1];
    const calq_attr *a = calq__attr(c->node, "num_groups");
    if (!a || a->type != CALQ_ATTR_INT)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "the 'num_groups' attribute is missing");
    if (a->i <= 0 || C % a->i != 0)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "num_groups %lld does not divide the %lld channels", (long long)a->i,
                             (long long)C);
    *groups = a->i;
    return CALQ_OK;
}

static calq_status group_norm_infer(calq_op_ctx *c)
{
    int64_t g = 1;
    CALQ_TRY(group_norm_groups(c, &g));
    return same_shape_infer(c);
}

/* Opset 18 gives one scale and bias per group; opset 21 one per channel (the opset 18 form
 * was deprecated because other frameworks scale per channel). */
static calq_status group_norm_run(calq_op_ctx *c)
{
    int64_t G = 1;
    CALQ_TRY(group_norm_groups(c, &G));
    const calq_tensor *x = c->in[0];
    int64_t C = x->dims[1], spatial = calq__shape_numel(x->dims + 2, x->ndim - 2);
    int64_t per_channel = c->opset >= 21, n = per_channel ? C : G;
    double *scale = NULL, *bias = NULL;
    calq_status s = param_vector(c, 1, "scale", n, 1.0, &scale);
    if (s == CALQ_OK) s = param_vector(c, 2, "bias", n, 0.0, &bias);
    if (s == CALQ_OK) {
        int64_t len = (C / G) * spatial;
        affine_map m =
            per_channel ? (affine_map){G, C / G, spatial > 0 ? spatial : 1} : (affine_map){G, 1, len > 0 ? len : 1};
        s = normalize_rows(c, x, c->out[0], x->dims[0] * G, len, calq__attr_float(c->node, "epsilon", 1e-5f), scale,
                           bias, m, NULL, NULL);
    }
    free(scale);
    free(bias);
    return s;
}

/* ---- MeanVarianceNormalization --------------------------------------------------------------- */

/* (X - mean) / (sqrt(var) + 1e-9) over `axes` (default N, H, W): the function body of the
 * ONNX definition. Statistics are accumulated per kept position in the input's C order. */
static calq_status mvn_run(calq_op_ctx *c)
{
    CALQ_TRY(float_input(c, 0, "X"));
    const calq_tensor *x = c->in[0];
    int r = x->ndim;
    static const int64_t dflt[] = {0, 2, 3};
    const int64_t *axes = dflt;
    int na = calq__attr_ints(c->node, "axes", &axes);
    if (na < 0) {
        axes = dflt;
        na = 3;
    }
    bool red[CALQ_MAX_DIMS] = {false};
    for (int i = 0; i < na; i++) {
        int a = calq__norm_axis(axes[i], r);
        if (a < 0)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "axis %lld is out of range for a rank-%d input", (long long)axes[i],
                                 r);
        red[a] = true;
    }
    int64_t n = calq_tensor_numel(x), kept = 1, count = 1;
    for (int i = 0; i < r; i++) {
        if (red[i])
            count *= x->dims[i];
        else
            kept *= x->dims[i];
    }
    double *v = malloc(sizeof(double) * (size_t)(n + 1)), *mean = calloc((size_t)kept + 1, sizeof(double));
    double *var = calloc((size_t)kept + 1, sizeof(double));
    int64_t *bucket = malloc(sizeof(int64_t) * (size_t)(n + 1));
    if (!v || !mean || !var || !bucket) {
        free(v);
        free(mean);
        free(var);
        free(bucket);
        return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory for %lld values", (long long)n);
    }
    calq__k_load(x, 0, 1, n, v);
    for (int64_t i = 0; i < n; i++) {
        int64_t rem = i, b = 0, mul = 1;
        for (int d = r - 1; d >= 0; d--) {
            if (!red[d]) {
                b += (rem % x->dims[d]) * mul;
                mul *= x->dims[d];
            }
            rem /= x->dims[d];
        }
        bucket[i] = b;
        mean[b] += v[i];
    }
    for (int64_t k = 0; k < kept; k++) mean[k] /= (double)(count ? count : 1);
    for (int64_t i = 0; i < n; i++) var[bucket[i]] += (v[i] - mean[bucket[i]]) * (v[i] - mean[bucket[i]]);
    for (int64_t k = 0; k < kept; k++) var[k] = sqrt(var[k] / (double)(count ? count : 1)) + 1e-9;
    for (int64_t i = 0; i < n; i++) v[i] = (v[i] - mean[bucket[i]]) / var[bucket[i]];
    calq__k_store(c->out[0], 0, 1, n, v);
    free(v);
    free(mean);
    free(var);
    free(bucket);
    return CALQ_OK;
}

const calq_op_def calq__ops_norm[] = {
    {"LayerNormalization", 2, 3, 1, 3, 0, false, layer_norm_infer, layer_norm_run, NULL, NULL, NULL, 0},
    {"InstanceNormalization", 3, 3, 1, 1, 0, false, same_shape_infer, instance_norm_run, NULL, NULL, NULL, 0},
    {"GroupNormalization", 3, 3, 1, 1, 0, false, group_norm_infer, group_norm_run, NULL, NULL, NULL, 0},
    {"MeanVarianceNormalization", 1, 1, 1, 1, 0, false, same_shape_infer, mvn_run, NULL, NULL, NULL, 0},
    {0},
};
