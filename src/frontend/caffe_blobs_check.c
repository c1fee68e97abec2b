/* Learned blobs against their layers (issue 14): the caffemodel's declared shape of every blob
 * must agree with the values it holds and with what the prototxt's parameters (num_output,
 * kernel, group, channels, bias_term, axis / num_axes, channel_shared) make of it, and a layer
 * type without learned parameters must get none. Before, only the value count was checked: a
 * conv1 whose blob claimed 100000 x 10000 x 5 x 5 with the 500 values the layer needs ran, and
 * the bogus shape was copied into the saved caffemodels.
 *
 * Caffe's own rule (Net::CopyTrainedLayersFrom, Blob::ShapeEquals) compares the legacy
 * num/channels/height/width form right-aligned with 1s in front, and the `shape` form exactly;
 * OpenCV's reader requires only that the declared shape holds the values. calq compares both
 * forms with their leading and trailing 1s dropped: every shape Caffe accepts passes, and
 * so does a shape that differs only in axes of size 1 (e.g. a per-channel slope stored as
 * C x 1 x 1), whose values are laid out the same. */
#include <stdio.h>
#include <string.h>

#include "base/tensor.h"
#include "frontend/caffe.h"
#include "graph/qkind.h"

/* Layer types that have learned blobs in Caffe besides the quantizable kinds with weights (the
 * kind table, graph/qkind.h), and AMCT's DeQuant; every other type must get none from the
 * caffemodel. Their mappers check how many (calq__caffe_need_blobs). */
static const char *const TYPES_WITH_BLOBS[] = {"BatchNorm", "PReLU", "Scale", "Bias", "Normalize", "DeQuant"};

calq_status calq__caffe_check_blob_count(calq_caffe_ctx *c, const calq_caffe_layer *L)
{
    if (L->n_blobs == 0) return CALQ_OK;
    const calq_qkind *k = calq__qkind_by_caffe(L->type);
    if (k && k->weights == CALQ_QKIND_WEIGHTS_CONST) return CALQ_OK;
    for (size_t i = 0; i < sizeof TYPES_WITH_BLOBS / sizeof *TYPES_WITH_BLOBS; i++)
        if (strcmp(L->type, TYPES_WITH_BLOBS[i]) == 0) return CALQ_OK;
    return calq__caffe_fail_weights(c, L,
                                    "the caffemodel gives this layer %d learned blob%s, but a %s layer has no learned "
                                    "parameters (Caffe refuses the file too: \"Incompatible number of blobs\"). Check "
                                    "that the prototxt and the caffemodel belong to the same model.",
                                    L->n_blobs, L->n_blobs == 1 ? "" : "s", L->type);
}

/* Drops leading and trailing 1s: *n becomes the kept count, the return the first kept dim. */
static const int64_t *squeeze_ends(const int64_t *dims, int *n)
{
    int lo = 0, hi = *n;
    while (lo < hi && dims[lo] == 1) lo++;
    while (hi > lo && dims[hi - 1] == 1) hi--;
    *n = hi - lo;
    return dims + lo;
}

/* The declared dims as written (negative ones too), "[]" for none. */
static void describe(const CalqCaffe__BlobProto *b, const int64_t *dims, int nd, char *buf, size_t n)
{
    size_t at = 0;
    buf[0] = 0;
    if (nd == 0) snprintf(buf, n, "[]");
    for (int i = 0; i < nd && at < n; i++)
        at += (size_t)snprintf(buf + at, n - at, "%s%lld", i ? "x" : "", (long long)dims[i]);
    if (!b->shape && at < n) {
        at = strlen(buf);
        snprintf(buf + at, n - at, " (num x channels x height x width)");
    }
}

calq_status calq__caffe_check_blob(calq_caffe_ctx *c, const calq_caffe_layer *L, int i, const char *what,
                                   const int64_t *want, int want_nd, const char *expect)
{
    const CalqCaffe__BlobProto *b = L->blobs[i];
    if (b->n_data && b->n_double_data && b->n_double_data != b->n_data)
        return calq__caffe_fail_weights(c, L, "blob %d (%s) holds %zu float and %zu double values; they must agree", i,
                                        what, b->n_data, b->n_double_data);
    int64_t have = calq__caffe_blob_count(L, i);
    if (b->shape && b->shape->n_dim > CALQ_MAX_DIMS)
        return calq__caffe_fail_weights(c, L, "blob %d (%s) declares %zu axes; calq supports up to %d", i, what,
                                        b->shape->n_dim, CALQ_MAX_DIMS);
    int64_t dims[CALQ_MAX_DIMS];
    int nd = calq__caffe_blob_dims(b, dims);
    char declared[192], shape[128];
    if (nd >= 0) {
        describe(b, dims, nd, declared, sizeof declared);
        int64_t n = calq__caffe_numel(dims, nd);
        if (n != have)
            return calq__caffe_fail_weights(c, L,
                                            "blob %d (%s) declares shape %s%s but holds %lld values: the caffemodel is "
                                            "damaged or was written by a broken converter",
                                            i, what, declared, n < 0 ? " (a negative or overflowing size)" : "",
                                            (long long)have);
    }
    if (!want) return CALQ_OK;
    int64_t need = calq__caffe_numel(want, want_nd);
    calq__shape_str(want, want_nd, shape, sizeof shape);
    if (have != need)
        return calq__caffe_fail_weights(c, L,
                                        "blob %d (%s) holds %lld values (declared shape %s); the prototxt's parameters "
                                        "need %s = %lld (%s). Check that the prototxt and the caffemodel belong to the "
                                        "same model.",
                                        i, what, (long long)have, nd >= 0 ? declared : "none", shape, (long long)need,
                                        expect);
    if (nd < 0) return CALQ_OK; /* no shape given: the count is all there is to check */
    int na = nd, nb = want_nd;
    const int64_t *da = squeeze_ends(dims, &na), *db = squeeze_ends(want, &nb);
    if (na != nb || memcmp(da, db, sizeof *da * (size_t)na) != 0)
        return calq__caffe_fail_weights(c, L,
                                        "blob %d (%s) has shape %s; the prototxt's parameters need %s (%s). The values "
                                        "would be read in the wrong layout: check that the prototxt and the caffemodel "
                                        "belong to the same model.",
                                        i, what, declared, shape, expect);
    return CALQ_OK;
}
