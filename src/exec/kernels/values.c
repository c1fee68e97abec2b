#include "exec/kernels/values.h"

#include <stdint.h>

bool calq__k_numeric(calq_dtype t)
{
    return calq__dtype_is_float(t) || calq__dtype_is_int(t);
}

void calq__k_load(const calq_tensor *x, int64_t off, int64_t stride, int64_t n, double *dst)
{
    switch (x->dtype) {
    case CALQ_DTYPE_FLOAT32: {
        const float *p = (const float *)x->data + off;
        for (int64_t i = 0; i < n; i++) dst[i] = p[i * stride];
        break;
    }
    case CALQ_DTYPE_FLOAT64: {
        const double *p = (const double *)x->data + off;
        for (int64_t i = 0; i < n; i++) dst[i] = p[i * stride];
        break;
    }
    case CALQ_DTYPE_INT32: {
        const int32_t *p = (const int32_t *)x->data + off;
        for (int64_t i = 0; i < n; i++) dst[i] = p[i * stride];
        break;
    }
    case CALQ_DTYPE_INT64: {
        const int64_t *p = (const int64_t *)x->data + off;
        for (int64_t i = 0; i < n; i++) dst[i] = (double)p[i * stride];
        break;
    }
    default:
        for (int64_t i = 0; i < n; i++) dst[i] = calq__tensor_get_f64(x, off + i * stride);
        break;
    }
}

static int64_t sat_i64(double v, double lo, double hi)
{
    if (v != v) return 0;
    if (v <= lo) return (int64_t)lo;
    if (v >= hi) return (int64_t)hi;
    return (int64_t)v;
}

void calq__k_store(calq_tensor *y, int64_t off, int64_t stride, int64_t n, const double *src)
{
    switch (y->dtype) {
    case CALQ_DTYPE_FLOAT32: {
        float *p = (float *)y->data + off;
        for (int64_t i = 0; i < n; i++) p[i * stride] = (float)src[i];
        break;
    }
    case CALQ_DTYPE_FLOAT64: {
        double *p = (double *)y->data + off;
        for (int64_t i = 0; i < n; i++) p[i * stride] = src[i];
        break;
    }
    case CALQ_DTYPE_INT32: {
        int32_t *p = (int32_t *)y->data + off;
        for (int64_t i = 0; i < n; i++) p[i * stride] = (int32_t)sat_i64(src[i], INT32_MIN, INT32_MAX);
        break;
    }
    case CALQ_DTYPE_INT64: {
        int64_t *p = (int64_t *)y->data + off;
        /* 2^63 is exactly representable; INT64_MAX is not, so clamp just below it. */
        for (int64_t i = 0; i < n; i++) p[i * stride] = sat_i64(src[i], -9223372036854775808.0, 9223372036854774784.0);
        break;
    }
    default:
        for (int64_t i = 0; i < n; i++) calq__tensor_set_f64(y, off + i * stride, src[i]);
        break;
    }
}
