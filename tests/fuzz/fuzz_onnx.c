/* libFuzzer target: the ONNX loader (protobuf decode, tensor conversion, IR build, checks)
 * must reject any byte string cleanly. */
#include <stddef.h>
#include <stdint.h>

#include "calq.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    calq_error err = {0};
    calq_model *m = NULL;
    if (calq_model_load_onnx_buffer(data, size, NULL, &m, &err) == CALQ_OK) {
        /* Also plan it when every input shape is concrete: shape inference sees the graph. */
        calq_session *s = NULL;
        /* a model may claim any shape: bound what planning may allocate (a clean error beyond) */
        calq_session_opts opts = {.n_threads = 1, .kernels = CALQ_KERNELS_REF, .max_arena_bytes = 256u << 20};
        if (calq_model_num_nodes(m) > 0 && calq_session_create(m, &opts, &s, &err) == CALQ_OK) {
            calq_value_info info;
            calq_session_tensor_info(s, calq_model_node_output(m, 0, 0), &info, &err);
            calq_session_free(s);
        }
        calq_model_free(m);
    }
    return 0;
}
