/* The loaded model: calq's IR plus a handle on the original file, which save patches. */
#ifndef CALQ_FRONTEND_MODEL_H
#define CALQ_FRONTEND_MODEL_H

#include "base/strmap.h"
#include "graph/graph.h"

typedef enum calq_model_format { CALQ_FORMAT_ONNX = 1, CALQ_FORMAT_CAFFE = 2 } calq_model_format;

struct calq_model {
    calq_graph *g;
    calq_model_format format;
    char *path;     /* the model file, or NULL when loaded from a buffer */
    char *base_dir; /* folder for external data */
    void *onnx;     /* Onnx__ModelProto* (owned), kept for save */
    /* Caffe (format == CALQ_FORMAT_CAFFE), kept for save: */
    char *weights_path;            /* the caffemodel, or NULL */
    struct calq_tp_node *prototxt; /* the parsed prototxt (owned; calq_tp_free) */
    void *caffe_net;               /* CalqCaffe__NetParameter* unpacked from the caffemodel (owned), or NULL */
    calq_strmap node_index;        /* node name -> the first node of g with it (calq__model_index_nodes;
                                      keys borrowed from g, whose node names never change after load) */
};

/* The frontend's loads: the model as the file describes it, operators not yet checked against
 * the executor (src/api's calq_model_load_* do that). On success *out is owned by the caller
 * (calq_model_free). */
calq_status calq__onnx_load_buffer(const void *data, size_t size, const char *base_dir, calq_model **out,
                                   calq_error *err);
/* Errors are prefixed with the path. */
calq_status calq__onnx_load_file(const char *onnx_path, calq_model **out, calq_error *err);
calq_status calq__caffe_load_files(const char *prototxt, const char *caffemodel, calq_model **out, calq_error *err);
/* Fills m->node_index once g is final (after the toposort), so name lookups from configs and
 * records are hashed (a per-name scan of every node made a 10k-layer config quadratic). */
calq_status calq__model_index_nodes(struct calq_model *m, calq_error *err);

/* Builds m->g from the ONNX ModelProto in m->onnx. */
calq_status calq__onnx_import(struct calq_model *m, calq_error *err);

#endif
