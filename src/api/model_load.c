/* calq_model_load_*: the frontend's import, then the executor's op-support check, so that a
 * model calq cannot run fails at load with one message listing every unsupported operator
 * (issue 2). The frontend builds the graph without knowing the registry; exec checks a graph
 * without knowing the model struct; this file is where the two meet. */
#include "base/error.h"
#include "exec/session.h"
#include "frontend/model.h"

/* Takes ownership of m: returns it in *out when every operator is implemented, else frees it.
 * `label` (the file) prefixes the message, as the frontend's own errors are prefixed. */
static calq_status check_ops(calq_model *m, const char *label, calq_model **out, calq_error *err)
{
    calq_status s = calq__graph_check_ops(m->g, err);
    if (s != CALQ_OK) {
        calq_model_free(m);
        return label ? calq__prefix(err, "%s", label) : s;
    }
    *out = m;
    return CALQ_OK;
}

calq_status calq_model_load_onnx(const char *onnx_path, calq_model **out, calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, out);
    *out = NULL;
    CALQ_REQUIRE(err, onnx_path);
    calq_model *m = NULL;
    CALQ_TRY(calq__onnx_load_file(onnx_path, &m, err));
    return check_ops(m, onnx_path, out, err);
}

calq_status calq_model_load_onnx_buffer(const void *data, size_t size, const char *base_dir, calq_model **out,
                                        calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, out);
    *out = NULL;
    CALQ_REQUIRE_ARRAY(err, data, size);
    calq_model *m = NULL;
    CALQ_TRY(calq__onnx_load_buffer(data, size, base_dir, &m, err));
    return check_ops(m, NULL, out, err);
}

calq_status calq_model_load_caffe(const char *prototxt, const char *caffemodel, calq_model **out, calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, out);
    *out = NULL;
    CALQ_REQUIRE(err, prototxt);
    calq_model *m = NULL;
    CALQ_TRY(calq__caffe_load_files(prototxt, caffemodel, &m, err));
    /* every Caffe layer maps onto registered operators; the check guards that mapping */
    return check_ops(m, prototxt, out, err);
}
