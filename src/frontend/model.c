/* calq_model: ONNX loading (src/api adds the op-support check) and the read-only model API. */
#include "frontend/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/file.h"
#include "base/tensor.h"
#include "frontend/caffe.h"
#include "graph/quantizable.h"
#include "frontend/pb_depth.h"
#include "onnx/onnx.pb-c.h"

#define CALQ_ONNX_MAX_DEPTH 64

static char *dupstr(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

calq_status calq__onnx_load_buffer(const void *data, size_t size, const char *base_dir, calq_model **out,
                                   calq_error *err)
{
    *out = NULL;
    if (!data && size) return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL, "no model data");
    /* ONNX nests graphs inside attributes; real models stay far below this depth. */
    if (!calq__pb_depth_ok(&onnx__model_proto__descriptor, data, size, CALQ_ONNX_MAX_DEPTH))
        return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL,
                          "not a valid ONNX model: messages are nested more than %d levels deep", CALQ_ONNX_MAX_DEPTH);
    Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, size, data);
    if (!mp)
        return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL,
                          "not a valid ONNX model: the protobuf data is malformed or truncated (%zu bytes)", size);
    calq_model *m = calloc(1, sizeof *m);
    if (!m) {
        onnx__model_proto__free_unpacked(mp, NULL);
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    }
    m->format = CALQ_FORMAT_ONNX;
    m->onnx = mp;
    m->base_dir = base_dir ? dupstr(base_dir) : NULL;
    if (base_dir && !m->base_dir) {
        calq_model_free(m);
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    }
    calq_status s = calq__onnx_import(m, err);
    if (s == CALQ_OK) s = calq__model_index_nodes(m, err);
    if (s != CALQ_OK) {
        calq_model_free(m);
        return s;
    }
    *out = m;
    return CALQ_OK;
}

calq_status calq__onnx_load_file(const char *onnx_path, calq_model **out, calq_error *err)
{
    *out = NULL;
    char *buf;
    size_t size;
    CALQ_TRY(calq__read_file_max(onnx_path, CALQ_READ_MAX_BYTES, "an ONNX model", &buf, &size, err));
    char dir[4096];
    calq__dirname(onnx_path, dir, sizeof dir);
    calq_status s = calq__onnx_load_buffer(buf, size, dir, out, err);
    free(buf);
    if (s != CALQ_OK) return calq__prefix(err, "%s", onnx_path);
    (*out)->path = dupstr(onnx_path);
    return CALQ_OK;
}

calq_status calq__model_index_nodes(calq_model *m, calq_error *err)
{
    const calq_graph *g = m->g;
    if (!calq__strmap_init(&m->node_index, (size_t)g->n_nodes))
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory indexing the model's layers");
    for (int i = g->n_nodes - 1; i >= 0; i--) /* the first of a name wins */
        if (!calq__strmap_put(&m->node_index, g->nodes[i].name, i))
            return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory indexing the model's layers");
    return CALQ_OK;
}

void calq_model_free(calq_model *m)
{
    if (!m) return;
    calq__strmap_free(&m->node_index);
    calq__graph_free(m->g);
    if (m->onnx) onnx__model_proto__free_unpacked(m->onnx, NULL);
    calq__caffe_release(m);
    free(m->path);
    free(m->weights_path);
    free(m->base_dir);
    free(m);
}

/* The accessors below answer a NULL model as they answer an index out of range (-1, NULL,
 * CALQ_ERR_BAD_PARAMETERS: calq.h's conventions): they have no calq_error to explain more. */
int calq_model_num_inputs(const calq_model *m)
{
    return m ? m->g->n_inputs : -1;
}
int calq_model_num_outputs(const calq_model *m)
{
    return m ? m->g->n_outputs : -1;
}

static void fill_info(const calq_value *v, calq_value_info *out)
{
    memset(out, 0, sizeof *out);
    out->name = v->name;
    out->dtype = v->dtype;
    out->ndim = v->ndim;
    for (int i = 0; i < v->ndim && i < CALQ_MAX_DIMS; i++) out->dims[i] = v->dims[i];
}

calq_status calq_model_input_info(const calq_model *m, int i, calq_value_info *out)
{
    if (!m || !out) return CALQ_ERR_BAD_PARAMETERS;
    if (i < 0 || i >= m->g->n_inputs) return CALQ_ERR_INDEX_OUT_OF_RANGE;
    fill_info(&m->g->values[m->g->inputs[i]], out);
    return CALQ_OK;
}

calq_status calq_model_output_info(const calq_model *m, int i, calq_value_info *out)
{
    if (!m || !out) return CALQ_ERR_BAD_PARAMETERS;
    if (i < 0 || i >= m->g->n_outputs) return CALQ_ERR_INDEX_OUT_OF_RANGE;
    fill_info(&m->g->values[m->g->outputs[i]], out);
    return CALQ_OK;
}

calq_status calq_model_set_input_shape(calq_model *m, const char *name, const int64_t *dims, int ndim, calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, m);
    CALQ_REQUIRE(err, name);
    CALQ_REQUIRE_ARRAY(err, dims, ndim);
    int v = calq__graph_find(m->g, name);
    if (v < 0 || !m->g->values[v].is_input) {
        char names[1024] = "";
        size_t at = 0;
        for (int i = 0; i < m->g->n_inputs && at < sizeof names; i++)
            at += (size_t)snprintf(names + at, sizeof names - at, "%s%s", i ? ", " : "",
                                   m->g->values[m->g->inputs[i]].name);
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL, "the model has no input named '%s' (its inputs: %s)",
                          name, names);
    }
    calq_value *val = &m->g->values[v];
    if (ndim < 0 || ndim > CALQ_MAX_DIMS)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL, "input '%s': %d dims is not supported", name, ndim);
    if (val->ndim >= 0 && val->ndim != ndim) {
        char have[128];
        return calq__fail(err, CALQ_ERR_SHAPE, NULL, "input '%s' has %d dims (%s) in the model; the shape given has %d",
                          name, val->ndim, calq__shape_str(val->dims, val->ndim, have, sizeof have), ndim);
    }
    for (int i = 0; i < ndim; i++) {
        if (dims[i] <= 0)
            return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL, "input '%s': dim %d must be positive, got %lld", name,
                              i, (long long)dims[i]);
        /* Caffe nets reshape to any input size (Net::Reshape); ONNX models fix non-batch dims. */
        if (m->format != CALQ_FORMAT_CAFFE && val->ndim >= 0 && val->dims[i] >= 0 && val->dims[i] != dims[i] &&
            i != 0) {
            char have[128];
            return calq__fail(err, CALQ_ERR_SHAPE, NULL,
                              "input '%s' is %s in the model; dim %d cannot become %lld (only dynamic dims and the "
                              "batch dim can be set)",
                              name, calq__shape_str(val->dims, val->ndim, have, sizeof have), i, (long long)dims[i]);
        }
    }
    val->ndim = ndim;
    for (int i = 0; i < ndim; i++) val->dims[i] = dims[i];
    return CALQ_OK;
}

int calq_model_num_nodes(const calq_model *m)
{
    return m ? m->g->n_nodes : -1;
}

calq_status calq_model_node_info(const calq_model *m, int i, calq_node_info *out)
{
    if (!m || !out) return CALQ_ERR_BAD_PARAMETERS;
    if (i < 0 || i >= m->g->n_nodes) return CALQ_ERR_INDEX_OUT_OF_RANGE;
    const calq_node *n = &m->g->nodes[i];
    out->name = n->name;
    out->op_type = n->op_type;
    out->n_inputs = n->n_inputs;
    out->n_outputs = n->n_outputs;
    out->quantizable = calq__node_quantizable(m->g, i);
    return CALQ_OK;
}

const char *calq_model_node_input(const calq_model *m, int i, int j)
{
    if (!m || i < 0 || i >= m->g->n_nodes || j < 0 || j >= m->g->nodes[i].n_inputs) return NULL;
    int v = m->g->nodes[i].inputs[j];
    return v < 0 ? "" : m->g->values[v].name;
}

const char *calq_model_node_output(const calq_model *m, int i, int j)
{
    if (!m || i < 0 || i >= m->g->n_nodes || j < 0 || j >= m->g->nodes[i].n_outputs) return NULL;
    int v = m->g->nodes[i].outputs[j];
    return v < 0 ? "" : m->g->values[v].name;
}
