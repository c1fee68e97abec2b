/* A tiny ONNX model built in memory, holding one layer of every quantizable kind and a few
 * that are not, for the config and data tests and fuzz targets (header only, so the fuzz
 * targets, which link only the library, can use it too).
 *
 *   x [1,2,4,4] -> conv (Conv 1x1) -> relu (Relu) -> pool (AveragePool 2x2) -> flat (Flatten)
 *               -> fc (Gemm, transB) -> mm (MatMul) -> add (Add, with input y [1,3]) -> out
 *   x -> deconv (ConvTranspose 1x1) -> dc
 *
 * Quantizable: conv, pool, fc, mm, deconv. Inputs: x (float32 [1,2,4,4]), y (float32 [1,3]). */
#ifndef CALQ_TEST_CALIB_MODEL_H
#define CALQ_TEST_CALIB_MODEL_H

#include <stdlib.h>
#include <string.h>

#include "calq.h"
#include "onnx/onnx.pb-c.h"

static Onnx__ValueInfoProto *cm_value(const char *name, int ndim, const int64_t *dims)
{
    static Onnx__ValueInfoProto vi[8];
    static Onnx__TypeProto tp[8];
    static Onnx__TypeProto__Tensor tt[8];
    static Onnx__TensorShapeProto sp[8];
    static Onnx__TensorShapeProto__Dimension dim[8][4];
    static Onnx__TensorShapeProto__Dimension *dimp[8][4];
    static int next;
    int k = next++ % 8;
    onnx__value_info_proto__init(&vi[k]);
    onnx__type_proto__init(&tp[k]);
    onnx__type_proto__tensor__init(&tt[k]);
    onnx__tensor_shape_proto__init(&sp[k]);
    for (int d = 0; d < ndim; d++) {
        onnx__tensor_shape_proto__dimension__init(&dim[k][d]);
        dim[k][d].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        dim[k][d].dim_value = dims[d];
        dimp[k][d] = &dim[k][d];
    }
    sp[k].n_dim = (size_t)ndim;
    sp[k].dim = dimp[k];
    tt[k].has_elem_type = 1;
    tt[k].elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    tt[k].shape = &sp[k];
    tp[k].value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp[k].tensor_type = &tt[k];
    vi[k].name = (char *)name;
    vi[k].type = &tp[k];
    return &vi[k];
}

static Onnx__TensorProto *cm_weight(const char *name, int ndim, const int64_t *dims)
{
    static Onnx__TensorProto t[4];
    static float data[4][64];
    static int next;
    int k = next++ % 4;
    onnx__tensor_proto__init(&t[k]);
    size_t n = 1;
    for (int d = 0; d < ndim; d++) n *= (size_t)dims[d];
    for (size_t i = 0; i < n && i < 64; i++) data[k][i] = 0.25f * (float)((int)(i % 7) - 3);
    t[k].name = (char *)name;
    t[k].n_dims = (size_t)ndim;
    t[k].dims = (int64_t *)dims;
    t[k].has_data_type = 1;
    t[k].data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    t[k].n_float_data = n;
    t[k].float_data = data[k];
    return &t[k];
}

static Onnx__NodeProto *cm_node(const char *name, const char *op, const char **in, int n_in, const char *out,
                                Onnx__AttributeProto **attrs, int n_attrs)
{
    static Onnx__NodeProto nd[10];
    static const char *outs[10][1];
    static int next;
    int k = next++ % 10;
    onnx__node_proto__init(&nd[k]);
    nd[k].name = (char *)name;
    nd[k].op_type = (char *)op;
    nd[k].n_input = (size_t)n_in;
    nd[k].input = (char **)in;
    outs[k][0] = out;
    nd[k].n_output = 1;
    nd[k].output = (char **)outs[k];
    nd[k].n_attribute = (size_t)n_attrs;
    nd[k].attribute = attrs;
    return &nd[k];
}

/* Loads the model (free with calq_model_free), or returns NULL with err filled. */
static calq_model *calib_test_model(calq_error *err)
{
    static const int64_t x_dims[] = {1, 2, 4, 4}, y_dims[] = {1, 3}, out_dims[] = {1, 3}, dc_dims[] = {1, 2, 4, 4};
    static const int64_t conv_w[] = {2, 2, 1, 1}, fc_w[] = {4, 8}, mm_w[] = {4, 3}, de_w[] = {2, 2, 1, 1};
    static const char *conv_in[] = {"x", "conv_w"}, *relu_in[] = {"c"}, *pool_in[] = {"r"}, *flat_in[] = {"p"},
                      *fc_in[] = {"f", "fc_w"}, *mm_in[] = {"g", "mm_w"}, *add_in[] = {"h", "y"},
                      *de_in[] = {"x", "de_w"};
    static int64_t k22[] = {2, 2};
    static Onnx__AttributeProto a_kernel, a_strides, a_transb;
    static Onnx__AttributeProto *pool_attrs[2], *fc_attrs[1];
    onnx__attribute_proto__init(&a_kernel);
    a_kernel.name = "kernel_shape";
    a_kernel.has_type = 1;
    a_kernel.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    a_kernel.n_ints = 2;
    a_kernel.ints = k22;
    a_strides = a_kernel;
    a_strides.name = "strides";
    onnx__attribute_proto__init(&a_transb);
    a_transb.name = "transB";
    a_transb.has_type = 1;
    a_transb.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    a_transb.has_i = 1;
    a_transb.i = 1;
    pool_attrs[0] = &a_kernel;
    pool_attrs[1] = &a_strides;
    fc_attrs[0] = &a_transb;

    Onnx__NodeProto *nodes[] = {
        cm_node("conv", "Conv", conv_in, 2, "c", NULL, 0),
        cm_node("relu", "Relu", relu_in, 1, "r", NULL, 0),
        cm_node("pool", "AveragePool", pool_in, 1, "p", pool_attrs, 2),
        cm_node("flat", "Flatten", flat_in, 1, "f", NULL, 0),
        cm_node("fc", "Gemm", fc_in, 2, "g", fc_attrs, 1),
        cm_node("mm", "MatMul", mm_in, 2, "h", NULL, 0),
        cm_node("add", "Add", add_in, 2, "out", NULL, 0),
        cm_node("deconv", "ConvTranspose", de_in, 2, "dc", NULL, 0),
    };
    Onnx__TensorProto *inits[] = {cm_weight("conv_w", 4, conv_w), cm_weight("fc_w", 2, fc_w),
                                  cm_weight("mm_w", 2, mm_w), cm_weight("de_w", 4, de_w)};
    Onnx__ValueInfoProto *inputs[] = {cm_value("x", 4, x_dims), cm_value("y", 2, y_dims)};
    Onnx__ValueInfoProto *outputs[] = {cm_value("out", 2, out_dims), cm_value("dc", 4, dc_dims)};

    Onnx__GraphProto g;
    onnx__graph_proto__init(&g);
    g.name = "calib_test";
    g.n_node = sizeof nodes / sizeof nodes[0];
    g.node = nodes;
    g.n_initializer = 4;
    g.initializer = inits;
    g.n_input = 2;
    g.input = inputs;
    g.n_output = 2;
    g.output = outputs;
    Onnx__OperatorSetIdProto opset;
    onnx__operator_set_id_proto__init(&opset);
    opset.domain = "";
    opset.has_version = 1;
    opset.version = 13;
    Onnx__OperatorSetIdProto *opsets[] = {&opset};
    Onnx__ModelProto mp;
    onnx__model_proto__init(&mp);
    mp.has_ir_version = 1;
    mp.ir_version = 7;
    mp.n_opset_import = 1;
    mp.opset_import = opsets;
    mp.graph = &g;
    size_t n = onnx__model_proto__get_packed_size(&mp);
    uint8_t *buf = malloc(n);
    if (!buf) return NULL;
    onnx__model_proto__pack(&mp, buf);
    calq_model *m = NULL;
    calq_status st = calq_model_load_onnx_buffer(buf, n, NULL, &m, err);
    free(buf);
    return st == CALQ_OK ? m : NULL;
}

#endif
