#include "base/tensor.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"

const char *calq_dtype_name(calq_dtype t)
{
    switch (t) {
    case CALQ_DTYPE_FLOAT32: return "float32";
    case CALQ_DTYPE_FLOAT64: return "float64";
    case CALQ_DTYPE_FLOAT16: return "float16";
    case CALQ_DTYPE_INT8: return "int8";
    case CALQ_DTYPE_UINT8: return "uint8";
    case CALQ_DTYPE_INT16: return "int16";
    case CALQ_DTYPE_UINT16: return "uint16";
    case CALQ_DTYPE_INT32: return "int32";
    case CALQ_DTYPE_UINT32: return "uint32";
    case CALQ_DTYPE_INT64: return "int64";
    case CALQ_DTYPE_UINT64: return "uint64";
    case CALQ_DTYPE_BOOL: return "bool";
    case CALQ_DTYPE_UNDEFINED: break;
    }
    return "undefined";
}

size_t calq_dtype_size(calq_dtype t)
{
    switch (t) {
    case CALQ_DTYPE_FLOAT64:
    case CALQ_DTYPE_INT64:
    case CALQ_DTYPE_UINT64: return 8;
    case CALQ_DTYPE_FLOAT32:
    case CALQ_DTYPE_INT32:
    case CALQ_DTYPE_UINT32: return 4;
    case CALQ_DTYPE_FLOAT16:
    case CALQ_DTYPE_INT16:
    case CALQ_DTYPE_UINT16: return 2;
    case CALQ_DTYPE_INT8:
    case CALQ_DTYPE_UINT8:
    case CALQ_DTYPE_BOOL: return 1;
    case CALQ_DTYPE_UNDEFINED: break;
    }
    return 0;
}

bool calq__dtype_is_float(calq_dtype t)
{
    return t == CALQ_DTYPE_FLOAT32 || t == CALQ_DTYPE_FLOAT64 || t == CALQ_DTYPE_FLOAT16;
}

bool calq__dtype_is_int(calq_dtype t)
{
    return t == CALQ_DTYPE_INT8 || t == CALQ_DTYPE_UINT8 || t == CALQ_DTYPE_INT16 || t == CALQ_DTYPE_UINT16 ||
           t == CALQ_DTYPE_INT32 || t == CALQ_DTYPE_UINT32 || t == CALQ_DTYPE_INT64 || t == CALQ_DTYPE_UINT64;
}

bool calq__dtype_is_q8(calq_dtype t)
{
    return t == CALQ_DTYPE_INT8 || t == CALQ_DTYPE_UINT8;
}

int64_t calq__shape_numel(const int64_t *dims, int ndim)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (dims[i] < 0) return -1;
        if (dims[i] != 0 && n > INT64_MAX / dims[i]) return -1;
        n *= dims[i];
    }
    return n;
}

int64_t calq_tensor_numel(const calq_tensor *t)
{
    /* the caller's struct holds CALQ_MAX_DIMS dims: a bigger ndim would read past it */
    if (!t || t->ndim < 0 || t->ndim > CALQ_MAX_DIMS) return -1;
    return calq__shape_numel(t->dims, t->ndim);
}

bool calq__shape_equal(const int64_t *a, int na, const int64_t *b, int nb)
{
    if (na != nb) return false;
    for (int i = 0; i < na; i++)
        if (a[i] != b[i]) return false;
    return true;
}

char *calq__shape_str(const int64_t *dims, int ndim, char *buf, size_t n)
{
    if (ndim == 0) {
        snprintf(buf, n, "scalar");
        return buf;
    }
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < ndim && at < n; i++) {
        int w = dims[i] < 0 ? snprintf(buf + at, n - at, "%s?", i ? "x" : "")
                            : snprintf(buf + at, n - at, "%s%lld", i ? "x" : "", (long long)dims[i]);
        if (w < 0) break;
        at += (size_t)w;
    }
    return buf;
}

size_t calq__tensor_nbytes(const calq_tensor *t)
{
    int64_t n = calq_tensor_numel(t);
    return n < 0 ? 0 : (size_t)n * calq_dtype_size(t->dtype);
}

size_t calq__tensor_max_bytes(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0 || (uint64_t)pages > (UINT64_C(1) << 40) / (uint64_t)page) return (size_t)1 << 40;
    return (size_t)pages * (size_t)page / 2;
}

calq_status calq__tensor_alloc(calq_tensor *t, calq_error *err)
{
    int64_t n = calq_tensor_numel(t);
    size_t es = calq_dtype_size(t->dtype);
    if (n < 0 || es == 0 || (uint64_t)n > SIZE_MAX / es / 2)
        return calq__fail(err, CALQ_ERR_SHAPE, NULL, "cannot allocate a %s tensor with %d dims: invalid size",
                          calq_dtype_name(t->dtype), t->ndim);
    size_t bytes = (size_t)n * es;
    if (bytes > calq__tensor_max_bytes())
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL,
                          "a %s tensor of %lld elements (%zu bytes) is above calq's limit of %zu bytes for one "
                          "tensor (half of this machine's memory)",
                          calq_dtype_name(t->dtype), (long long)n, bytes, calq__tensor_max_bytes());
    t->data = calloc(bytes ? bytes : 1, 1);
    if (!t->data) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory allocating %zu bytes", bytes);
    return CALQ_OK;
}

calq_status calq__tensor_clone(calq_tensor *dst, const calq_tensor *src, calq_error *err)
{
    *dst = *src;
    dst->data = NULL;
    CALQ_TRY(calq__tensor_alloc(dst, err));
    size_t nb = calq__tensor_nbytes(src);
    if (nb) memcpy(dst->data, src->data, nb);
    return CALQ_OK;
}

void calq_tensor_free_data(calq_tensor *t)
{
    if (!t) return;
    free(t->data);
    t->data = NULL;
}

float calq__f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: renormalise */
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while (!(man & 0x400));
            bits = sign | (uint32_t)(127 - 15 - e) << 23 | (man & 0x3ff) << 13;
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | man << 13;
    } else {
        bits = sign | (exp + 127 - 15) << 23 | man << 13;
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t calq__f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    int32_t exp = (int32_t)((x >> 23) & 0xff);
    uint32_t man = x & 0x7fffff;
    if (exp == 255) return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
    int32_t e = exp - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | 0x7c00);
    if (e <= 0) {
        if (e < -10) return (uint16_t)sign;
        man |= 0x800000;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t half = 1u << (shift - 1), rest = man & ((1u << shift) - 1);
        uint32_t r = man >> shift;
        if (rest > half || (rest == half && (r & 1))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = man >> 13, rest = man & 0x1fff;
    uint32_t h = sign | (uint32_t)e << 10 | r;
    if (rest > 0x1000 || (rest == 0x1000 && (r & 1))) h++; /* ties to even; carries into exp */
    return (uint16_t)h;
}

double calq__tensor_get_f64(const calq_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case CALQ_DTYPE_FLOAT32: return ((const float *)t->data)[i];
    case CALQ_DTYPE_FLOAT64: return ((const double *)t->data)[i];
    case CALQ_DTYPE_FLOAT16: return calq__f16_to_f32(((const uint16_t *)t->data)[i]);
    case CALQ_DTYPE_INT8: return ((const int8_t *)t->data)[i];
    case CALQ_DTYPE_UINT8: return ((const uint8_t *)t->data)[i];
    case CALQ_DTYPE_INT16: return ((const int16_t *)t->data)[i];
    case CALQ_DTYPE_UINT16: return ((const uint16_t *)t->data)[i];
    case CALQ_DTYPE_INT32: return ((const int32_t *)t->data)[i];
    case CALQ_DTYPE_UINT32: return ((const uint32_t *)t->data)[i];
    case CALQ_DTYPE_INT64: return (double)((const int64_t *)t->data)[i];
    case CALQ_DTYPE_UINT64: return (double)((const uint64_t *)t->data)[i];
    case CALQ_DTYPE_BOOL: return ((const uint8_t *)t->data)[i] ? 1.0 : 0.0;
    case CALQ_DTYPE_UNDEFINED: break;
    }
    return 0.0;
}

int64_t calq__tensor_get_i64(const calq_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case CALQ_DTYPE_INT64: return ((const int64_t *)t->data)[i];
    case CALQ_DTYPE_UINT64: return (int64_t)((const uint64_t *)t->data)[i];
    case CALQ_DTYPE_INT32: return ((const int32_t *)t->data)[i];
    case CALQ_DTYPE_UINT32: return ((const uint32_t *)t->data)[i];
    case CALQ_DTYPE_INT16: return ((const int16_t *)t->data)[i];
    case CALQ_DTYPE_UINT16: return ((const uint16_t *)t->data)[i];
    case CALQ_DTYPE_INT8: return ((const int8_t *)t->data)[i];
    case CALQ_DTYPE_UINT8:
    case CALQ_DTYPE_BOOL: return ((const uint8_t *)t->data)[i];
    default: {
        double v = calq__tensor_get_f64(t, i);
        if (!(v == v)) return 0;
        if (v >= 9.2e18) return INT64_MAX;
        if (v <= -9.2e18) return INT64_MIN;
        return (int64_t)v;
    }
    }
}

static int64_t sat_i64(double v, double lo, double hi)
{
    if (!(v == v)) return 0;
    if (v < lo) return (int64_t)lo;
    if (v > hi) return (int64_t)hi;
    return (int64_t)v;
}

void calq__tensor_set_f64(calq_tensor *t, int64_t i, double v)
{
    switch (t->dtype) {
    case CALQ_DTYPE_FLOAT32: ((float *)t->data)[i] = (float)v; break;
    case CALQ_DTYPE_FLOAT64: ((double *)t->data)[i] = v; break;
    case CALQ_DTYPE_FLOAT16: ((uint16_t *)t->data)[i] = calq__f32_to_f16((float)v); break;
    case CALQ_DTYPE_INT8: ((int8_t *)t->data)[i] = (int8_t)sat_i64(v, -128, 127); break;
    case CALQ_DTYPE_UINT8: ((uint8_t *)t->data)[i] = (uint8_t)sat_i64(v, 0, 255); break;
    case CALQ_DTYPE_INT16: ((int16_t *)t->data)[i] = (int16_t)sat_i64(v, -32768, 32767); break;
    case CALQ_DTYPE_UINT16: ((uint16_t *)t->data)[i] = (uint16_t)sat_i64(v, 0, 65535); break;
    case CALQ_DTYPE_INT32: ((int32_t *)t->data)[i] = (int32_t)sat_i64(v, -2147483648.0, 2147483647.0); break;
    case CALQ_DTYPE_UINT32: ((uint32_t *)t->data)[i] = (uint32_t)sat_i64(v, 0, 4294967295.0); break;
    case CALQ_DTYPE_INT64: ((int64_t *)t->data)[i] = sat_i64(v, -9.2e18, 9.2e18); break;
    case CALQ_DTYPE_UINT64: ((uint64_t *)t->data)[i] = (uint64_t)sat_i64(v, 0, 9.2e18); break;
    case CALQ_DTYPE_BOOL: ((uint8_t *)t->data)[i] = v != 0.0; break;
    case CALQ_DTYPE_UNDEFINED: break;
    }
}

void calq__tensor_set_i64(calq_tensor *t, int64_t i, int64_t v)
{
    switch (t->dtype) {
    case CALQ_DTYPE_INT64: ((int64_t *)t->data)[i] = v; break;
    case CALQ_DTYPE_UINT64: ((uint64_t *)t->data)[i] = (uint64_t)v; break;
    case CALQ_DTYPE_INT32: ((int32_t *)t->data)[i] = (int32_t)v; break;
    case CALQ_DTYPE_UINT32: ((uint32_t *)t->data)[i] = (uint32_t)v; break;
    case CALQ_DTYPE_INT16: ((int16_t *)t->data)[i] = (int16_t)v; break;
    case CALQ_DTYPE_UINT16: ((uint16_t *)t->data)[i] = (uint16_t)v; break;
    case CALQ_DTYPE_INT8: ((int8_t *)t->data)[i] = (int8_t)v; break;
    case CALQ_DTYPE_UINT8: ((uint8_t *)t->data)[i] = (uint8_t)v; break;
    case CALQ_DTYPE_BOOL: ((uint8_t *)t->data)[i] = v != 0; break;
    default: calq__tensor_set_f64(t, i, (double)v); break;
    }
}
