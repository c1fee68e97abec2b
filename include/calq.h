/*
 * calq: post-training INT8 quantization (calibration) of neural-network models.
 *
 * The one public header. Conventions:
 *  - every fallible call returns a calq_status (CALQ_OK == 0, negative on error) and fills the
 *    caller-owned calq_error with a message and, when one is involved, the layer (node) name;
 *  - there is no global error state;
 *  - every object a call allocates has one documented free function.
 */
#ifndef CALQ_H
#define CALQ_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && !defined(CALQ_STATIC)
#define CALQ_API __attribute__((visibility("default")))
#else
#define CALQ_API
#endif

#define CALQ_VERSION_MAJOR 0
#define CALQ_VERSION_MINOR 1
#define CALQ_VERSION_PATCH 0
#define CALQ_VERSION_STRING "0.1.0"

/* Status codes. The -655xx values are AMCT's own error codes (amct-reference.md §2.2), so a
 * calq failure and the AMCT failure it corresponds to carry the same number. The small
 * negative values are calq's own. */
typedef enum calq_status {
    CALQ_OK = 0,
    CALQ_ERR_IO = -1,          /* a file could not be opened, read or written */
    CALQ_ERR_INTERNAL = -2,    /* a bug in calq: please report it */
    CALQ_ERR_SHAPE = -3,       /* tensor shapes or dtypes do not fit the operation */
    CALQ_ERR_DATA = -4,        /* data values are unusable (NaN/Inf, wrong size) */
    CALQ_ERR_UNSUPPORTED = -5, /* an operator, attribute or dtype calq does not implement */
    CALQ_ERR_GENERIC = -65536,
    CALQ_ERR_BAD_FORMAT = -65531, /* malformed model, record, config or data file */
    CALQ_ERR_BAD_PARAMETERS = -65530,
    CALQ_ERR_RECORD_FILE = -65529,
    CALQ_ERR_RECORD_FACTOR = -65528,
    CALQ_ERR_OUT_OF_MEMORY = -65524,
    CALQ_ERR_SHORT_BUFFER = -65520,
    CALQ_ERR_NOT_SUPPORT = -65519, /* AMCT's "scale is illegal" family */
    CALQ_ERR_INDEX_OUT_OF_RANGE = -65517
} calq_status;

#define CALQ_ERROR_MESSAGE_MAX 4096
#define CALQ_ERROR_NAME_MAX 256

/* Filled by a failing call. Caller-owned; zero-initialise it ({0}) before the first use. */
typedef struct calq_error {
    calq_status status;
    char message[CALQ_ERROR_MESSAGE_MAX]; /* one paragraph: what, where, why, what to do */
    char layer[CALQ_ERROR_NAME_MAX];      /* node / layer name, or "" */
} calq_error;

/* A short, static description of a status code ("NOT_SUPPORT", ...). Never NULL. */
CALQ_API const char *calq_status_name(calq_status s);

/* ---------------------------------------------------------------------------------------- */
/* Tensors                                                                                   */
/* ---------------------------------------------------------------------------------------- */

typedef enum calq_dtype {
    CALQ_DTYPE_UNDEFINED = 0,
    CALQ_DTYPE_FLOAT32,
    CALQ_DTYPE_FLOAT64,
    CALQ_DTYPE_FLOAT16,
    CALQ_DTYPE_INT8,
    CALQ_DTYPE_UINT8,
    CALQ_DTYPE_INT16,
    CALQ_DTYPE_UINT16,
    CALQ_DTYPE_INT32,
    CALQ_DTYPE_UINT32,
    CALQ_DTYPE_INT64,
    CALQ_DTYPE_UINT64,
    CALQ_DTYPE_BOOL
} calq_dtype;

#define CALQ_MAX_DIMS 8

/* A dense, C-ordered tensor. A plain struct so callers can build one around their own buffer;
 * who owns `data` is stated by each function that hands one out. */
typedef struct calq_tensor {
    calq_dtype dtype;
    int ndim;
    int64_t dims[CALQ_MAX_DIMS];
    void *data;
} calq_tensor;

CALQ_API const char *calq_dtype_name(calq_dtype t); /* "float32", ...; never NULL */
CALQ_API size_t calq_dtype_size(calq_dtype t);      /* bytes per element; 0 for UNDEFINED */
CALQ_API int64_t calq_tensor_numel(const calq_tensor *t);

/* .npy files (float32, float64, int8, uint8, int32, int64; C order). On success *out holds a
 * tensor whose data the caller frees with calq_tensor_free_data(). */
CALQ_API calq_status calq_npy_read(const char *path, calq_tensor *out, calq_error *err);
/* Writes atomically (temporary file + rename): an existing file is never left half-written. */
CALQ_API calq_status calq_npy_write(const char *path, const calq_tensor *t, calq_error *err);
CALQ_API void calq_tensor_free_data(calq_tensor *t);

/* ---------------------------------------------------------------------------------------- */
/* Models                                                                                    */
/* ---------------------------------------------------------------------------------------- */

typedef struct calq_model calq_model;

/* Loads an ONNX model (opsets 7..17). Fails with one message listing every unsupported
 * operator type and the nodes that use it. Free with calq_model_free(). */
CALQ_API calq_status calq_model_load_onnx(const char *onnx_path, calq_model **out, calq_error *err);
/* Same, from a buffer (the caller keeps ownership of `data`). `base_dir` resolves external
 * tensor data; NULL means the current directory. */
CALQ_API calq_status calq_model_load_onnx_buffer(const void *data, size_t size, const char *base_dir,
                                                 calq_model **out, calq_error *err);
CALQ_API void calq_model_free(calq_model *m);

/* Graph inputs (constant initializers excluded) and outputs. Names are owned by the model.
 * Dims of -1 are dynamic; bind them with calq_model_set_input_shape(). */
typedef struct calq_value_info {
    const char *name;
    calq_dtype dtype;
    int ndim;
    int64_t dims[CALQ_MAX_DIMS];
} calq_value_info;

CALQ_API int calq_model_num_inputs(const calq_model *m);
CALQ_API int calq_model_num_outputs(const calq_model *m);
CALQ_API calq_status calq_model_input_info(const calq_model *m, int i, calq_value_info *out);
CALQ_API calq_status calq_model_output_info(const calq_model *m, int i, calq_value_info *out);
/* Fixes the shape of input `name` (all dims concrete), e.g. to bind "N" or "H". */
CALQ_API calq_status calq_model_set_input_shape(calq_model *m, const char *name, const int64_t *dims, int ndim,
                                                calq_error *err);

/* Nodes, in topological order. Strings are owned by the model. */
typedef struct calq_node_info {
    const char *name;
    const char *op_type;
    int n_inputs, n_outputs;
    int quantizable; /* calq would quantize this layer (amct-reference.md §8.1) */
} calq_node_info;

CALQ_API int calq_model_num_nodes(const calq_model *m);
CALQ_API calq_status calq_model_node_info(const calq_model *m, int i, calq_node_info *out);
/* Name of input/output j of node i ("" for an omitted optional input). */
CALQ_API const char *calq_model_node_input(const calq_model *m, int i, int j);
CALQ_API const char *calq_model_node_output(const calq_model *m, int i, int j);

/* ---------------------------------------------------------------------------------------- */
/* Execution                                                                                 */
/* ---------------------------------------------------------------------------------------- */

typedef struct calq_session calq_session;

typedef struct calq_session_opts {
    int n_threads;    /* 0: OpenMP's default */
    int use_fast;     /* 1 (default when opts is NULL): oneDNN kernels; 0: plain _ref kernels */
} calq_session_opts;

/* Called once for every tensor the executor produces (graph inputs first, then each node's
 * outputs in execution order), while the tensor is valid. `t` is only valid during the call:
 * copy what you need. Return 0 to continue, non-zero to stop the run (the run then fails
 * with CALQ_ERR_GENERIC and the observer's message). */
typedef int (*calq_observer_fn)(void *user, const char *tensor_name, const calq_tensor *t);

/* A session plans and runs `m`. The model must outlive the session. Free with
 * calq_session_free(). */
CALQ_API calq_status calq_session_create(calq_model *m, const calq_session_opts *opts, calq_session **out,
                                         calq_error *err);
CALQ_API void calq_session_free(calq_session *s);

/* Observe the named tensors (names[n]); n == 0 with names == NULL observes every tensor.
 * Fails if a name is not a tensor of the model. */
CALQ_API calq_status calq_session_set_observer(calq_session *s, calq_observer_fn fn, void *user,
                                               const char *const *names, int n, calq_error *err);

/* Runs the model once. inputs[i] is graph input i (calq_model_input_info order) and must be
 * float32 unless the model says otherwise; the data is read, never kept. Input shapes may
 * change between runs (the session re-plans). */
CALQ_API calq_status calq_session_run(calq_session *s, const calq_tensor *inputs, int n_inputs, calq_error *err);

/* Output i of the last run. The tensor and its data belong to the session and stay valid
 * until the next run or calq_session_free(). */
CALQ_API calq_status calq_session_output(const calq_session *s, int i, const calq_tensor **out);

/* Shape and dtype of any tensor named `name` as planned for the current input shapes (plans
 * first if needed). */
CALQ_API calq_status calq_session_tensor_info(calq_session *s, const char *name, calq_value_info *out,
                                              calq_error *err);

/* Peak bytes of the activation arena of the current plan, and the sum of all activation
 * sizes (what it would take without buffer reuse). */
CALQ_API void calq_session_memory(const calq_session *s, size_t *arena_bytes, size_t *sum_bytes);

#ifdef __cplusplus
}
#endif
#endif /* CALQ_H */
