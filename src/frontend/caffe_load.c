/* Caffe model files: reading the prototxt and the caffemodel, the weight index (layer name ->
 * learned blobs), and turning blobs into constants with their sizes checked. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/file.h"
#include "base/tensor.h"
#include "frontend/caffe.h"

static char *dupstr(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* ---- weight index ----------------------------------------------------------------------------- */

calq_status calq__caffe_index_weights(calq_caffe_ctx *c)
{
    const CalqCaffe__NetParameter *w = c->weights;
    if (!w) return CALQ_OK;
    size_t n = w->n_layer + w->n_layers;
    c->weight_layers = calloc(n + 1, sizeof *c->weight_layers);
    if (!c->weight_layers) return calq__caffe_oom(c);
    for (size_t i = 0; i < n; i++) {
        const char *name;
        size_t n_blobs;
        CalqCaffe__BlobProto **blobs;
        if (i < w->n_layer) {
            name = w->layer[i]->name;
            n_blobs = w->layer[i]->n_blobs;
            blobs = w->layer[i]->blobs;
        } else {
            name = w->layers[i - w->n_layer]->name;
            n_blobs = w->layers[i - w->n_layer]->n_blobs;
            blobs = w->layers[i - w->n_layer]->blobs;
        }
        if (!name) continue;
        int k = calq__caffe_map_get(&c->weight_index, name);
        if (k < 0) {
            k = c->n_weight_layers++;
            if (calq__caffe_map_put(&c->weight_index, name, k) != 0) return calq__caffe_oom(c);
        }
        c->weight_layers[k].n_blobs = (int)n_blobs;
        c->weight_layers[k].blobs = blobs;
    }
    return CALQ_OK;
}

/* ---- blobs ------------------------------------------------------------------------------------ */

int calq__caffe_blob_dims(const CalqCaffe__BlobProto *b, int64_t *dims)
{
    if (b->shape) {
        int n = b->shape->n_dim < CALQ_MAX_DIMS ? (int)b->shape->n_dim : CALQ_MAX_DIMS;
        for (int i = 0; i < n; i++) dims[i] = b->shape->dim[i];
        return n;
    }
    if (b->has_num || b->has_channels || b->has_height || b->has_width) {
        dims[0] = b->num;
        dims[1] = b->channels;
        dims[2] = b->height;
        dims[3] = b->width;
        return 4;
    }
    return -1;
}

calq_dtype calq__caffe_blob_storage(const CalqCaffe__BlobProto *b)
{
    if (b->n_data || b->n_double_data) return CALQ_DTYPE_FLOAT32;
    if (b->has_int8_data && b->int8_data.len) return CALQ_DTYPE_INT8;
    if (b->n_int32_data) return CALQ_DTYPE_INT32;
    if (b->n_uint64_data) return CALQ_DTYPE_UINT64;
    return CALQ_DTYPE_FLOAT32;
}

int64_t calq__caffe_blob_count(const calq_caffe_layer *L, int i)
{
    if (i >= L->n_blobs) return -1;
    const CalqCaffe__BlobProto *b = L->blobs[i];
    switch (calq__caffe_blob_storage(b)) {
    case CALQ_DTYPE_INT8: return (int64_t)b->int8_data.len;
    case CALQ_DTYPE_INT32: return (int64_t)b->n_int32_data;
    case CALQ_DTYPE_UINT64: return (int64_t)b->n_uint64_data;
    default: return (int64_t)(b->n_data ? b->n_data : b->n_double_data);
    }
}

calq_status calq__caffe_need_blobs(calq_caffe_ctx *c, const calq_caffe_layer *L, int n, const char *what)
{
    if (L->n_blobs == n) return CALQ_OK;
    if (!c->weights)
        return calq__caffe_fail(c, L, CALQ_ERR_BAD_FORMAT,
                                "needs %d learned blob%s (%s) but no caffemodel was given. Pass the weights file "
                                "(calq ... --weights MODEL.caffemodel).",
                                n, n == 1 ? "" : "s", what);
    if (!L->in_caffemodel)
        return calq__caffe_fail_weights(c, L,
                                        "needs %d learned blob%s (%s) but the caffemodel has no layer named '%s'. "
                                        "Check that the prototxt and the caffemodel belong to the same model (layers "
                                        "are matched by name).",
                                        n, n == 1 ? "" : "s", what, L->name);
    return calq__caffe_fail_weights(c, L,
                                    "has %d learned blob%s in the caffemodel; calq expects %d (%s) for this layer's "
                                    "parameters in the prototxt. Check that both files belong to the same model.",
                                    L->n_blobs, L->n_blobs == 1 ? "" : "s", n, what);
}

float *calq__caffe_blob_floats(calq_caffe_ctx *c, const calq_caffe_layer *L, int i, int64_t *n)
{
    const CalqCaffe__BlobProto *b = L->blobs[i];
    if (calq__caffe_check_blob(c, L, i, "values", NULL, 0, NULL) != CALQ_OK) return NULL;
    *n = calq__caffe_blob_count(L, i);
    float *f = malloc(sizeof(float) * (size_t)(*n + 1));
    if (!f) {
        calq__caffe_oom(c);
        return NULL;
    }
    switch (calq__caffe_blob_storage(b)) {
    case CALQ_DTYPE_INT8:
        for (int64_t k = 0; k < *n; k++) f[k] = (float)(int8_t)b->int8_data.data[k];
        break;
    case CALQ_DTYPE_INT32:
        for (int64_t k = 0; k < *n; k++) f[k] = (float)b->int32_data[k];
        break;
    case CALQ_DTYPE_UINT64:
        for (int64_t k = 0; k < *n; k++) f[k] = (float)b->uint64_data[k];
        break;
    default:
        if (b->n_data)
            memcpy(f, b->data, sizeof(float) * b->n_data);
        else
            for (size_t k = 0; k < b->n_double_data; k++) f[k] = (float)b->double_data[k];
    }
    return f;
}

static int blob_const(calq_caffe_ctx *c, const calq_caffe_layer *L, int i, const char *what, const int64_t *dims,
                      int ndim, const char *expect, bool integer_ok)
{
    calq_dtype st = calq__caffe_blob_storage(L->blobs[i]);
    if (st != CALQ_DTYPE_FLOAT32 && !integer_ok) {
        calq__caffe_fail_weights(c, L,
                                 "blob %d (%s) holds %s values; only the weights and bias of a quantized "
                                 "Convolution, Deconvolution or InnerProduct layer of an AMCT deploy model, and a "
                                 "DeQuant layer's deq_scale, are integers (amct-reference.md §9.1)",
                                 i, what, calq_dtype_name(st));
        return -1;
    }
    if (calq__caffe_check_blob(c, L, i, what, dims, ndim, expect) != CALQ_OK) return -1;
    const CalqCaffe__BlobProto *b = L->blobs[i];
    if (st == CALQ_DTYPE_INT8) return calq__caffe_const_typed(c, L, what, st, b->int8_data.data, dims, ndim);
    if (st == CALQ_DTYPE_INT32) return calq__caffe_const_typed(c, L, what, st, b->int32_data, dims, ndim);
    if (st == CALQ_DTYPE_UINT64) return calq__caffe_const_typed(c, L, what, st, b->uint64_data, dims, ndim);
    int64_t n;
    float *f = calq__caffe_blob_floats(c, L, i, &n);
    if (!f) return -1;
    int v = calq__caffe_const_f32(c, L, what, f, dims, ndim);
    free(f);
    return v;
}

int calq__caffe_blob_const(calq_caffe_ctx *c, const calq_caffe_layer *L, int i, const char *what, const int64_t *dims,
                           int ndim, const char *expect)
{
    return blob_const(c, L, i, what, dims, ndim, expect, false);
}

int calq__caffe_blob_const_any(calq_caffe_ctx *c, const calq_caffe_layer *L, int i, const char *what,
                               const int64_t *dims, int ndim, const char *expect)
{
    return blob_const(c, L, i, what, dims, ndim, expect, true);
}

/* ---- loading ---------------------------------------------------------------------------------- */

void calq__caffe_release(struct calq_model *m)
{
    if (m->prototxt) calq_tp_free(m->prototxt);
    if (m->caffe_net) calq_caffe__net_parameter__free_unpacked(m->caffe_net, NULL);
    m->prototxt = NULL;
    m->caffe_net = NULL;
}

calq_status calq__caffe_load_buffers(const char *prototxt, size_t prototxt_len, const char *prototxt_name,
                                     const void *caffemodel, size_t caffemodel_len, const char *caffemodel_name,
                                     calq_model **out, calq_error *err)
{
    *out = NULL;
    if (!prototxt_name) prototxt_name = "<prototxt>";
    if (!caffemodel_name) caffemodel_name = "<caffemodel>";
    calq_model *m = calloc(1, sizeof *m);
    if (!m) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    m->format = CALQ_FORMAT_CAFFE;
    calq_tp_node *root = NULL;
    calq_status s = calq_tp_parse(prototxt ? prototxt : "", prototxt ? prototxt_len : 0, prototxt_name, &root, err);
    if (s != CALQ_OK) {
        calq_model_free(m);
        return s;
    }
    m->prototxt = root;
    if (caffemodel) {
        CalqCaffe__NetParameter *net = calq_caffe__net_parameter__unpack(NULL, caffemodel_len, caffemodel);
        if (!net) {
            calq_model_free(m);
            return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL,
                              "%s: not a valid caffemodel: the protobuf data is malformed or truncated (%zu bytes). "
                              "Check that the file was copied completely and is a binary NetParameter, not a "
                              "prototxt.",
                              caffemodel_name, caffemodel_len);
        }
        m->caffe_net = net;
    }
    calq_caffe_ctx c = {0};
    c.err = err;
    c.proto_name = prototxt_name;
    c.weights_name = caffemodel_name;
    c.weights = m->caffe_net;
    c.g = calq__graph_new();
    m->g = c.g;
    if (!c.g) {
        s = calq__caffe_oom(&c);
    } else {
        c.g->opset = 13;
        c.g->any_input_dims = true; /* Caffe reshapes a net to its data */
        s = calq__caffe_index_weights(&c);
        if (s == CALQ_OK) s = calq__caffe_build(&c, root);
        if (s == CALQ_OK) s = calq__graph_toposort(c.g, err);
        if (s == CALQ_OK) s = calq__model_index_nodes(m, err);
    }
    calq__caffe_map_free(&c.weight_index);
    calq__caffe_map_free(&c.blob_index);
    free(c.weight_layers);
    free(c.blobs);
    free(c.shapes);
    free(c.consumed);
    free(c.produced);
    if (s != CALQ_OK) {
        calq_model_free(m);
        return s;
    }
    *out = m;
    return CALQ_OK;
}

calq_status calq__caffe_load_files(const char *prototxt, const char *caffemodel, calq_model **out, calq_error *err)
{
    *out = NULL;
    if (!prototxt) return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL, "no prototxt given");
    char *text = NULL, *bin = NULL;
    size_t text_len = 0, bin_len = 0;
    CALQ_TRY(calq__read_file_max(prototxt, CALQ_TEXT_MAX_BYTES, "a Caffe prototxt", &text, &text_len, err));
    if (caffemodel) {
        calq_status s = calq__read_file_max(caffemodel, CALQ_READ_MAX_BYTES, "a caffemodel", &bin, &bin_len, err);
        if (s != CALQ_OK) {
            free(text);
            return s;
        }
    }
    calq_status s = calq__caffe_load_buffers(text, text_len, prototxt, bin, bin_len, caffemodel, out, err);
    free(text);
    free(bin);
    if (s != CALQ_OK) return s;
    (*out)->path = dupstr(prototxt);
    if (!(*out)->path) {
        calq_model_free(*out);
        *out = NULL;
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    }
    if (caffemodel) {
        (*out)->weights_path = dupstr(caffemodel);
        if (!(*out)->weights_path) {
            calq_model_free(*out);
            *out = NULL;
            return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
        }
    }
    return CALQ_OK;
}
