#include "frontend/onnx_tensor.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/file.h"
#include "base/tensor.h"

calq_dtype calq__onnx_dtype(int32_t t)
{
    switch (t) {
    case 1: return CALQ_DTYPE_FLOAT32;
    case 2: return CALQ_DTYPE_UINT8;
    case 3: return CALQ_DTYPE_INT8;
    case 4: return CALQ_DTYPE_UINT16;
    case 5: return CALQ_DTYPE_INT16;
    case 6: return CALQ_DTYPE_INT32;
    case 7: return CALQ_DTYPE_INT64;
    case 9: return CALQ_DTYPE_BOOL;
    case 10: return CALQ_DTYPE_FLOAT16;
    case 11: return CALQ_DTYPE_FLOAT64;
    case 12: return CALQ_DTYPE_UINT32;
    case 13: return CALQ_DTYPE_UINT64;
    default: return CALQ_DTYPE_UNDEFINED;
    }
}

int32_t calq__onnx_dtype_to_onnx(calq_dtype t)
{
    switch (t) {
    case CALQ_DTYPE_FLOAT32: return 1;
    case CALQ_DTYPE_UINT8: return 2;
    case CALQ_DTYPE_INT8: return 3;
    case CALQ_DTYPE_UINT16: return 4;
    case CALQ_DTYPE_INT16: return 5;
    case CALQ_DTYPE_INT32: return 6;
    case CALQ_DTYPE_INT64: return 7;
    case CALQ_DTYPE_BOOL: return 9;
    case CALQ_DTYPE_FLOAT16: return 10;
    case CALQ_DTYPE_FLOAT64: return 11;
    case CALQ_DTYPE_UINT32: return 12;
    case CALQ_DTYPE_UINT64: return 13;
    case CALQ_DTYPE_UNDEFINED: break;
    }
    return 0;
}

static const char *onnx_type_name(int32_t t)
{
    static const char *names[] = {"UNDEFINED", "FLOAT",  "UINT8",     "INT8",       "UINT16",  "INT16",
                                  "INT32",     "INT64",  "STRING",    "BOOL",       "FLOAT16", "DOUBLE",
                                  "UINT32",    "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16"};
    return t >= 0 && t < (int32_t)(sizeof names / sizeof names[0]) ? names[t] : "unknown";
}

/* An external data offset or length: a whole decimal number of bytes, 0 to 2^63 - 1. strtoll
 * took "12abc" for 12, "-5" for -5 (a length then ignored) and 10^20 for 2^63 - 1. */
static bool external_number(const char *v, long long *out)
{
    unsigned long long n = 0;
    if (!*v) return false;
    for (; *v; v++) {
        if (*v < '0' || *v > '9' || n > ((unsigned long long)LLONG_MAX - (unsigned)(*v - '0')) / 10) return false;
        n = n * 10 + (unsigned)(*v - '0');
    }
    *out = (long long)n;
    return true;
}

/* External data: only files inside the model's folder (ONNX's own rule), so a model cannot
 * make calq read arbitrary files. Opens the file positioned at the tensor's bytes, after
 * checking that the file holds them (before anything is allocated for them). */
static calq_status open_external(const Onnx__TensorProto *tp, const char *base_dir, const char *name, size_t nbytes,
                                 FILE **out, calq_error *err)
{
    const char *location = NULL;
    long long offset = 0, length = -1;
    *out = NULL;
    for (size_t i = 0; i < tp->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = tp->external_data[i];
        if (!e->key || !e->value) continue;
        if (strcmp(e->key, "location") == 0) location = e->value;
        bool is_offset = strcmp(e->key, "offset") == 0, is_length = strcmp(e->key, "length") == 0;
        if ((is_offset || is_length) && !external_number(e->value, is_offset ? &offset : &length))
            return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL,
                              "tensor '%s': external data %s '%s' is not a whole number of bytes (0 to 2^63 - 1)", name,
                              e->key, calq__cut(e->value).s);
    }
    if (!location || !location[0])
        return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL, "tensor '%s' has external data without a location", name);
    if (!base_dir)
        return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL,
                          "tensor '%s' keeps its data in the external file '%s', but the model was not loaded from a "
                          "file, so there is no folder to find it in",
                          name, location);
    if (location[0] == '/' || strstr(location, ".."))
        return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL,
                          "tensor '%s': external data location '%s' points outside the model's folder", name, location);
    if (offset < 0 || (length >= 0 && (size_t)length != nbytes))
        return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL,
                          "tensor '%s': external data length %lld does not match its shape (%zu bytes)", name, length,
                          nbytes);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", base_dir, location);
    FILE *fp;
    size_t fsize;
    if (calq__open_regular(path, SIZE_MAX, "external data", &fp, &fsize, err) != CALQ_OK)
        return calq__prefix(err, "tensor '%s'", name);
    long size = fseek(fp, 0, SEEK_END) == 0 ? ftell(fp) : -1;
    if (size < 0 || (unsigned long long)offset > (unsigned long long)size ||
        (unsigned long long)size - (unsigned long long)offset < nbytes || fseek(fp, (long)offset, SEEK_SET) != 0) {
        fclose(fp);
        return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL,
                          "tensor '%s': external data file %s is too short (needs %zu bytes at offset %lld, has %ld)",
                          name, path, nbytes, offset, size);
    }
    *out = fp;
    return CALQ_OK;
}

/* Number of values in the typed field that holds this data type (onnx.proto). */
static size_t typed_count(const Onnx__TensorProto *tp, calq_dtype dt)
{
    switch (dt) {
    case CALQ_DTYPE_FLOAT32: return tp->n_float_data;
    case CALQ_DTYPE_FLOAT64: return tp->n_double_data;
    case CALQ_DTYPE_INT64: return tp->n_int64_data;
    case CALQ_DTYPE_UINT32:
    case CALQ_DTYPE_UINT64: return tp->n_uint64_data;
    default: return tp->n_int32_data;
    }
}

calq_status calq__onnx_tensor_load(const Onnx__TensorProto *tp, const char *base_dir, calq_tensor *out, calq_error *err)
{
    memset(out, 0, sizeof *out);
    if (!tp) return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL, "a tensor value is missing");
    const char *name = tp->name && tp->name[0] ? tp->name : "(unnamed)";
    out->dtype = calq__onnx_dtype(tp->data_type);
    if (out->dtype == CALQ_DTYPE_UNDEFINED)
        return calq__fail(err, CALQ_ERR_UNSUPPORTED, NULL,
                          "tensor '%s' has data type %s (%d), which calq does not support", name,
                          onnx_type_name(tp->data_type), (int)tp->data_type);
    if (tp->n_dims > CALQ_MAX_DIMS)
        return calq__fail(err, CALQ_ERR_UNSUPPORTED, NULL, "tensor '%s' has %zu dims; calq supports up to %d", name,
                          tp->n_dims, CALQ_MAX_DIMS);
    out->ndim = (int)tp->n_dims;
    for (size_t i = 0; i < tp->n_dims; i++) {
        if (tp->dims[i] < 0)
            return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL, "tensor '%s' has a negative dimension", name);
        out->dims[i] = tp->dims[i];
    }
    int64_t n = calq_tensor_numel(out);
    if (n < 0 || (uint64_t)n > ((uint64_t)1 << 40))
        return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL, "tensor '%s' is impossibly large", name);
    size_t es = calq_dtype_size(out->dtype), nbytes = (size_t)n * es;
    /* Check that the data is there before allocating for it: a header can claim any shape. */
    bool external = tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    if (!external) {
        size_t have = tp->has_raw_data ? tp->raw_data.len / es : typed_count(tp, out->dtype);
        if (tp->has_raw_data ? tp->raw_data.len != nbytes : have != (size_t)n)
            return tp->has_raw_data
                       ? calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL,
                                    "tensor '%s': raw data holds %zu bytes, its shape and type need %zu", name,
                                    tp->raw_data.len, nbytes)
                       : calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL,
                                    "tensor '%s': holds %zu values, its shape needs %lld", name, have, (long long)n);
    }
    FILE *ext = NULL;
    if (external) CALQ_TRY(open_external(tp, base_dir, name, nbytes, &ext, err));
    calq_status st = calq__tensor_alloc(out, err);
    if (st != CALQ_OK) {
        if (ext) fclose(ext);
        return st;
    }

    if (ext) {
        if (nbytes && fread(out->data, 1, nbytes, ext) != nbytes)
            st = calq__fail(err, CALQ_ERR_IO, NULL, "tensor '%s': cannot read its external data", name);
        fclose(ext);
    } else if (tp->has_raw_data) {
        if (nbytes) memcpy(out->data, tp->raw_data.data, nbytes);
    } else if (n) {
        /* Typed fields (counts checked above): which one holds the values depends on the type. */
        switch (out->dtype) {
        case CALQ_DTYPE_FLOAT32: memcpy(out->data, tp->float_data, nbytes); break;
        case CALQ_DTYPE_FLOAT64: memcpy(out->data, tp->double_data, nbytes); break;
        case CALQ_DTYPE_INT64: memcpy(out->data, tp->int64_data, nbytes); break;
        case CALQ_DTYPE_UINT32:
        case CALQ_DTYPE_UINT64:
            for (int64_t i = 0; i < n; i++) calq__tensor_set_i64(out, i, (int64_t)tp->uint64_data[i]);
            break;
        case CALQ_DTYPE_FLOAT16: /* fp16 bit patterns, one per int32 */
            for (int64_t i = 0; i < n; i++) ((uint16_t *)out->data)[i] = (uint16_t)tp->int32_data[i];
            break;
        default:
            for (int64_t i = 0; i < n; i++) calq__tensor_set_i64(out, i, tp->int32_data[i]);
            break;
        }
    }
    if (st != CALQ_OK) calq_tensor_free_data(out);
    return st;
}
