/* libFuzzer target: the caffemodel loader (protobuf decode of a NetParameter, weight lookup by
 * layer name, blob sizes against a fixed prototxt, IR build) must reject any byte string
 * cleanly. Models that load are also run once on a tiny input, so blob sizes that passed the
 * checks are proven to fit the kernels. The seeds in corpus/caffemodel match this prototxt. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "calq.h"
#include "frontend/caffe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Layers with learned blobs of every kind, with in-place chains. The caffemodel may hold
 * `layer` or legacy V1 `layers` entries: weights are matched by name from either list. */
static const char prototxt[] =
    "name: 'fuzz'\n"
    "input: 'data' input_shape { dim: 1 dim: 3 dim: 6 dim: 6 }\n"
    "layer { name: 'conv' type: 'Convolution' bottom: 'data' top: 'conv'\n"
    "        convolution_param { num_output: 4 kernel_size: 3 pad: 1 } }\n"
    "layer { name: 'bn' type: 'BatchNorm' bottom: 'conv' top: 'conv' }\n"
    "layer { name: 'scale' type: 'Scale' bottom: 'conv' top: 'conv' scale_param { bias_term: true } }\n"
    "layer { name: 'prelu' type: 'PReLU' bottom: 'conv' top: 'conv' }\n"
    "layer { name: 'up' type: 'Deconvolution' bottom: 'conv' top: 'up'\n"
    "        convolution_param { num_output: 4 group: 4 kernel_size: 2 stride: 2 bias_term: false } }\n"
    "layer { name: 'pool' type: 'Pooling' bottom: 'up' top: 'pool'\n"
    "        pooling_param { pool: AVE kernel_size: 3 stride: 2 pad: 1 } }\n"
    "layer { name: 'bias' type: 'Bias' bottom: 'pool' top: 'pool' }\n"
    "layer { name: 'ip' type: 'InnerProduct' bottom: 'pool' top: 'ip' inner_product_param { num_output: 5 } }\n"
    "layer { name: 'prob' type: 'Softmax' bottom: 'ip' top: 'prob' }\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    calq_error err = {0};
    calq_model *m = NULL;
    if (calq__caffe_load_buffers(prototxt, sizeof prototxt - 1, "fuzz.prototxt", data, size, "fuzz.caffemodel", &m,
                                 &err) != CALQ_OK)
        return 0;
    calq_session *s = NULL;
    calq_session_opts opts = {.n_threads = 1, .kernels = CALQ_KERNELS_REF, .max_arena_bytes = 256u << 20};
    if (calq_session_create(m, &opts, &s, &err) == CALQ_OK) {
        static float x[1 * 3 * 6 * 6];
        calq_tensor in = {CALQ_DTYPE_FLOAT32, 4, {1, 3, 6, 6}, x};
        calq_session_run(s, &in, 1, &err);
        calq_session_free(s);
    }
    calq_model_free(m);
    return 0;
}
