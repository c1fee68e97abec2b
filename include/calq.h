/*
 * calq: post-training INT8 quantization (calibration) of neural-network models.
 *
 * The one public header. Conventions (docs/c-api.md):
 *  - every fallible call returns a calq_status (CALQ_OK == 0, negative on error) and fills the
 *    caller-owned calq_error (may be NULL) with a message and, when one is involved, the layer
 *    (node) name; bad input is an error, never an exit or abort;
 *  - there is no global error state; the one process-wide setting is the log callback
 *    (calq_set_log), and without one the library prints nothing;
 *  - ownership: every object a call allocates has one documented free function, and every
 *    free function accepts NULL; strings and tensors the library hands out are owned by the
 *    object they come from and valid as long as it is (or as stated); pointer arguments are
 *    borrowed for the duration of the call unless the function says it keeps them;
 *  - arguments: a pointer may be NULL only where the function says so (err everywhere; the free
 *    and _opts_init functions, which then do nothing; the opts of the calls that take defaults;
 *    the optional arguments named so). A NULL pointer anywhere else, a negative count, a NULL
 *    array with a positive count (also in option structs) or an index out of range is the
 *    caller's bug and never crashes the library: a function returning calq_status fails with
 *    CALQ_ERR_BAD_PARAMETERS (CALQ_ERR_INDEX_OUT_OF_RANGE for an index) and, when it takes an
 *    err, a message naming the function and the argument ("calq_session_run: s is NULL"); an
 *    accessor returns its sentinel, NULL for a string, -1 for a count, an index or a pass, 0 for a
 *    byte count or a flag; a void function writes nothing. What calq cannot check is the size of
 *    a caller's buffer: a buffer shorter than the count given is undefined behaviour, as in libc;
 *  - option structs calq_<thing>_opts are filled by calq_<thing>_opts_init() before fields are
 *    set, so that fields added in later versions get their defaults.
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

/* The version, in one place: CMakeLists.txt reads these three lines, and the shared library's
 * file name (libcalq.so.MAJOR.MINOR.PATCH), its SONAME (libcalq.so.MAJOR), calq.pc and the CMake
 * package follow. Before 1.0 a minor release may change the API and the ABI (docs/c-api.md,
 * "Versions"). */
#define CALQ_VERSION_MAJOR 0
#define CALQ_VERSION_MINOR 5
#define CALQ_VERSION_PATCH 0

#define CALQ_VERSION_HEX   ((CALQ_VERSION_MAJOR << 16) | (CALQ_VERSION_MINOR << 8) | CALQ_VERSION_PATCH)
#define CALQ_STRINGIFY_(x) #x
#define CALQ_STRINGIFY(x)  CALQ_STRINGIFY_(x)
#define CALQ_VERSION_STRING                                                                                            \
    CALQ_STRINGIFY(CALQ_VERSION_MAJOR) "." CALQ_STRINGIFY(CALQ_VERSION_MINOR) "." CALQ_STRINGIFY(CALQ_VERSION_PATCH)

/* The version of the library that runs (which may differ from the header a program was built
 * with): CALQ_VERSION_HEX's value, and "MAJOR.MINOR.PATCH" (static). */
CALQ_API unsigned int calq_version(void);
CALQ_API const char *calq_version_string(void);

/* Status codes, from one list: CALQ_STATUS_MAP(XX) calls XX(symbol, value, name, description)
 * for each, and the enum, calq_status_name() and calq_strerror() are generated from it. The
 * -655xx values are AMCT's own error codes (amct-reference.md §2.2), so a calq failure and the
 * AMCT failure it corresponds to carry the same number (and AMCT's name). The small negative
 * values are calq's own. New codes may be added in any release; callers should treat an
 * unknown negative value as a failure. */
#define CALQ_STATUS_MAP(XX)                                                                                            \
    XX(CALQ_OK, 0, "OK", "success")                                                                                    \
    XX(CALQ_ERR_IO, -1, "IO", "a file could not be opened, read or written")                                           \
    XX(CALQ_ERR_INTERNAL, -2, "INTERNAL", "a bug in calq: please report it")                                           \
    XX(CALQ_ERR_SHAPE, -3, "SHAPE", "tensor shapes or dtypes do not fit the operation")                                \
    XX(CALQ_ERR_DATA, -4, "DATA", "data values are unusable (NaN/Inf, wrong size)")                                    \
    XX(CALQ_ERR_UNSUPPORTED, -5, "UNSUPPORTED", "an operator, attribute or dtype calq does not implement")             \
    XX(CALQ_ERR_GENERIC, -65536, "GENERIC_ERROR", "the operation failed (e.g. stopped by a callback)")                 \
    XX(CALQ_ERR_BAD_FORMAT, -65531, "BAD_FORMAT", "malformed model, record, config or data file")                      \
    XX(CALQ_ERR_BAD_PARAMETERS, -65530, "BAD_PARAMETERS", "an argument or option is invalid")                          \
    XX(CALQ_ERR_RECORD_FILE, -65529, "RECORD_FILE_ERROR", "the record file is malformed or misses a layer")            \
    XX(CALQ_ERR_RECORD_FACTOR, -65528, "RECORD_FACTOR_ERROR", "a factor in the record file is out of range")           \
    XX(CALQ_ERR_OUT_OF_MEMORY, -65524, "OUT_OF_MEMORY", "out of memory, or above a memory limit")                      \
    XX(CALQ_ERR_SHORT_BUFFER, -65520, "SHORT_BUFFER", "a buffer is too small")                                         \
    XX(CALQ_ERR_NOT_SUPPORT, -65519, "NOT_SUPPORT", "a quantization factor is illegal (AMCT's \"scale is illegal\")")  \
    XX(CALQ_ERR_INDEX_OUT_OF_RANGE, -65517, "INDEX_OUT_OF_RANGE", "an index is out of range")

typedef enum calq_status {
#define CALQ_STATUS_ENUM_(sym, value, name, description) sym = value,
    CALQ_STATUS_MAP(CALQ_STATUS_ENUM_)
#undef CALQ_STATUS_ENUM_
} calq_status;

#define CALQ_ERROR_MESSAGE_MAX 4096
#define CALQ_ERROR_NAME_MAX    256

/* Filled by a failing call (and left as it was by a successful one unless stated). Caller-owned;
 * zero-initialise it ({0}) before the first use. */
typedef struct calq_error {
    calq_status status;
    char message[CALQ_ERROR_MESSAGE_MAX]; /* one paragraph: what, where, why, what to do */
    char layer[CALQ_ERROR_NAME_MAX];      /* node / layer name, or "" */
} calq_error;

/* The status code's name ("NOT_SUPPORT", ...) and a one-line description of what it means
 * ("a quantization factor is illegal ..."); static strings, never NULL ("UNKNOWN" and
 * "unknown status code" for a value not in CALQ_STATUS_MAP). The message of the calq_error a
 * call filled says what happened; these say what the code means. */
CALQ_API const char *calq_status_name(calq_status s);
CALQ_API const char *calq_strerror(calq_status s);

/* ---------------------------------------------------------------------------------------- */
/* Logging                                                                                   */
/* ---------------------------------------------------------------------------------------- */

/* calq prints nothing. What it has to tell (AMCT's calibration progress lines, amct-reference.md
 * §1.4; notes such as a skipped training-only Caffe layer; warnings such as layers left in
 * float; the files a save wrote) goes to the callback installed with calq_set_log, one message
 * per call. Failures are not logged: they come back as a status and a calq_error. */
typedef enum calq_log_level {
    CALQ_LOG_WARNING = 1, /* something went differently than asked (a layer left in float, a record
                             value that differs from calq's own), the result is still valid */
    CALQ_LOG_INFO = 2,    /* progress and notes: what `calq` prints by default */
    CALQ_LOG_DEBUG = 3    /* details for developers (which kernel runs, what save folded) */
} calq_log_level;

/* `message` has no trailing newline (it may hold several lines) and is only valid during the
 * call. */
typedef void (*calq_log_fn)(void *user, calq_log_level level, const char *message);

/* Installs fn for the whole process, replacing the previous one; fn NULL (the default) turns
 * logging off. Messages above max_level are not even formatted. Thread safety: calq_set_log may
 * be called from any thread at any time; calls to fn are serialised (one at a time, from
 * whichever thread logs), and calq_set_log returns only once no call to the previous callback
 * is running, so its `user` may be freed then. fn may itself log or call calq_set_log. */
CALQ_API void calq_set_log(calq_log_fn fn, void *user, calq_log_level max_level);

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
/* Elements of t (1 for ndim 0); -1 for a shape that has no count: t NULL, ndim outside
 * 0..CALQ_MAX_DIMS, a negative dim, or a product above INT64_MAX. */
CALQ_API int64_t calq_tensor_numel(const calq_tensor *t);

/* .npy files (float32, float64, int8, uint8, int32, int64; C order). On success *out holds a
 * tensor whose data the caller frees with calq_tensor_free_data(); on failure out->data is NULL. */
CALQ_API calq_status calq_npy_read(const char *path, calq_tensor *out, calq_error *err);
/* Writes atomically (temporary file + rename): an existing file is never left half-written. */
CALQ_API calq_status calq_npy_write(const char *path, const calq_tensor *t, calq_error *err);
/* Frees t->data when the library allocated it (calq_npy_read, calq_image_load) and sets it to
 * NULL; t itself is the caller's. Never call it on a tensor around the caller's own buffer. */
CALQ_API void calq_tensor_free_data(calq_tensor *t);

/* ---------------------------------------------------------------------------------------- */
/* Models                                                                                    */
/* ---------------------------------------------------------------------------------------- */

typedef struct calq_model calq_model;

/* Loads an ONNX model (opsets 7..21). Fails with one message listing every unsupported
 * operator type and the nodes that use it. Free with calq_model_free(). */
CALQ_API calq_status calq_model_load_onnx(const char *onnx_path, calq_model **out, calq_error *err);
/* Same, from a buffer (the caller keeps ownership of `data`). `base_dir` is the folder that
 * external tensor data is read from; NULL refuses models with external data. */
CALQ_API calq_status calq_model_load_onnx_buffer(const void *data, size_t size, const char *base_dir, calq_model **out,
                                                 calq_error *err);
/* Loads a Caffe model: the net from `prototxt` (text), the learned blobs from `caffemodel`
 * (binary), matched by layer name; caffemodel may be NULL for a net without learned blobs. Both
 * `layer` and legacy V1 `layers` lists are read; layers are kept as in Caffe's TEST phase, and
 * training-only layers (losses, Accuracy, Silence, data readers) are skipped with a note. Fails
 * with one message listing every unsupported layer type and the layers using it. Tensor names
 * are Caffe's blob names; a blob written in place by several layers is one tensor per write,
 * the last write keeping the blob's name and earlier ones named "<blob>/<layer>_out". Inputs
 * may be reshaped to any size (calq_model_set_input_shape). Free with calq_model_free(). */
CALQ_API calq_status calq_model_load_caffe(const char *prototxt, const char *caffemodel, calq_model **out,
                                           calq_error *err);
/* Frees the model and every string it handed out. Free the sessions on it first. */
CALQ_API void calq_model_free(calq_model *m);

/* Graph inputs (constant initializers excluded) and outputs. `name` is owned by the model (valid
 * until calq_model_free). Dims of -1 are dynamic; bind them with calq_model_set_input_shape(). */
typedef struct calq_value_info {
    const char *name;
    calq_dtype dtype;
    int ndim;
    int64_t dims[CALQ_MAX_DIMS];
} calq_value_info;

/* -1 for m NULL. input_info / output_info: CALQ_ERR_INDEX_OUT_OF_RANGE for a bad i,
 * CALQ_ERR_BAD_PARAMETERS for m or out NULL (no calq_error: the status says it all). */
CALQ_API int calq_model_num_inputs(const calq_model *m);
CALQ_API int calq_model_num_outputs(const calq_model *m);
CALQ_API calq_status calq_model_input_info(const calq_model *m, int i, calq_value_info *out);
CALQ_API calq_status calq_model_output_info(const calq_model *m, int i, calq_value_info *out);
/* Fixes the shape of input `name` (all dims concrete), e.g. to bind "N" or "H". */
CALQ_API calq_status calq_model_set_input_shape(calq_model *m, const char *name, const int64_t *dims, int ndim,
                                                calq_error *err);

/* Nodes, in topological order. Strings are owned by the model (valid until calq_model_free). */
typedef struct calq_node_info {
    const char *name;
    const char *op_type;
    int n_inputs, n_outputs;
    int quantizable; /* calq would quantize this layer (amct-reference.md §8.1) */
} calq_node_info;

/* num_nodes: -1 for m NULL; node_info as calq_model_input_info. */
CALQ_API int calq_model_num_nodes(const calq_model *m);
CALQ_API calq_status calq_model_node_info(const calq_model *m, int i, calq_node_info *out);
/* Name of input/output j of node i ("" for an omitted optional input, NULL when m is NULL or i or
 * j is out of range); owned by the model. */
CALQ_API const char *calq_model_node_input(const calq_model *m, int i, int j);
CALQ_API const char *calq_model_node_output(const calq_model *m, int i, int j);

/* ---------------------------------------------------------------------------------------- */
/* Execution                                                                                 */
/* ---------------------------------------------------------------------------------------- */

typedef struct calq_session calq_session;

/* The most threads the library uses: 4 x the online processors. An n_threads above it (in
 * calq_session_opts, calq_calibrate_opts, calq_ifmr_opts) runs with this many, a negative one is
 * CALQ_ERR_BAD_PARAMETERS; results never depend on the count (docs/cli.md "Threads"). */
CALQ_API int calq_thread_limit(void);

/* How OpenMP's threads should wait between parallel regions on this machine now. libgomp reads
 * its environment once, when it loads, so a program sets these before that (the calq command
 * re-executes itself with them unless the user set either variable). Each field is the value
 * for the environment variable it names; NULL leaves that variable unset.
 *   - Idle cores (the 1-minute load average, and the tasks running now besides this one, below
 *     the online processors): a bounded spin,
 *     GOMP_SPINCOUNT=10000 with OMP_WAIT_POLICY=passive. A thread that sleeps at once costs a
 *     futex wake-up (60-70 us on a 2-core VM) at every parallel region, which made 2 threads no
 *     faster than 1; spinning briefly halves a 2-thread forward on such a machine.
 *   - A loaded machine: OMP_WAIT_POLICY=passive alone. Spinning holds the core a partner
 *     thread needs (a 2-thread MobileNetV2 at load 24 on 2 cores: 17 ms passive, 330 ms with
 *     the bounded spin).
 * Results never depend on it. docs/performance.md, "Threads and waiting". */
typedef struct calq_wait_policy {
    const char *omp_wait_policy; /* OMP_WAIT_POLICY */
    const char *gomp_spincount;  /* GOMP_SPINCOUNT, or NULL */
} calq_wait_policy;
CALQ_API calq_wait_policy calq_wait_policy_advice(void);

/* Which kernels a session runs. */
typedef enum calq_kernels {
    CALQ_KERNELS_DEFAULT = 0, /* the fast paths (oneDNN) where calq has them, the plain-C kernel elsewhere */
    CALQ_KERNELS_REF = 1      /* the plain-C _ref kernel of every operator: slower; what tests hold the fast
                                 ones against */
} calq_kernels;

/* Session options. All-zero (`calq_session_opts o = {0};`) or calq_session_opts_init() means
 * the defaults, and so does passing NULL. The struct may grow in a minor release (new fields
 * whose 0 keeps today's behaviour): initialise it with calq_session_opts_init() or {0}. */
typedef struct calq_session_opts {
    int n_threads;                         /* 0 (default): OpenMP's default; above calq_thread_limit(): the limit */
    calq_kernels kernels;                  /* CALQ_KERNELS_DEFAULT (0) or CALQ_KERNELS_REF */
    int no_fusion;                         /* 0 (default): fold BatchNormalization / per-channel Mul, Add into the Conv
                                              before them (their outputs keep their names; the Conv's own output is no
                                              longer computed), and run a QDQ model's DequantizeLinear -> layer ->
                                              QuantizeLinear as one integer operator, as onnxruntime does (the
                                              float tensors in between are then not computed); with use_fast, also
                                              keep oneDNN's activation layouts between layers and fold element-wise
                                              layers into convolutions as post-ops (observed tensors are always
                                              computed, unchanged); 1: run the graph exactly as the model has it */
    const char *const *skip_fusion_layers; /* Conv layers never folded (AMCT's skip_fusion_layers,
                                              amct-reference.md §8.3); read by calq_session_create
                                              only, not kept (the caller keeps ownership) */
    int n_skip_fusion_layers;
    size_t max_arena_bytes; /* 0 (default): no limit; else planning fails with CALQ_ERR_OUT_OF_MEMORY, naming the
                               size, instead of allocating an activation arena above it, or constants folded
                               while planning above it in all (a service bounding what an untrusted model may
                               claim) */
} calq_session_opts;

/* Fills *o with the defaults (every field 0). */
CALQ_API void calq_session_opts_init(calq_session_opts *o);

/* Called once for every tensor the executor produces (graph inputs first, then each node's
 * outputs in execution order), while the tensor is valid. `t` is only valid during the call:
 * copy what you need. Return 0 to continue, non-zero to stop the run (the run then fails
 * with CALQ_ERR_GENERIC and the observer's message). */
typedef int (*calq_observer_fn)(void *user, const char *tensor_name, const calq_tensor *t);

/* A session plans and runs `m` (borrowed: the model must outlive the session; the session never
 * modifies it). opts NULL: the defaults; opts is read here only. Free with calq_session_free().
 * A session is used by one thread at a time; sessions on the same model may run in different
 * threads as long as nothing changes the model meanwhile (calq_model_set_input_shape). */
CALQ_API calq_status calq_session_create(calq_model *m, const calq_session_opts *opts, calq_session **out,
                                         calq_error *err);
CALQ_API void calq_session_free(calq_session *s);

/* Observe the named tensors (names[n], read here only); n == 0 with names == NULL observes every
 * tensor. fn == NULL removes the observer. `user` is handed to fn, never touched. Fails if a name
 * is not a tensor of the model, or is NULL, or n is negative (the observer is then unchanged). */
CALQ_API calq_status calq_session_set_observer(calq_session *s, calq_observer_fn fn, void *user,
                                               const char *const *names, int n, calq_error *err);

/* Runs the model once. inputs[i] is graph input i (calq_model_input_info order) and must be
 * float32 unless the model says otherwise; the data is read, never kept. Input shapes may
 * change between runs (the session re-plans). */
CALQ_API calq_status calq_session_run(calq_session *s, const calq_tensor *inputs, int n_inputs, calq_error *err);

/* Output i of the last run. The tensor and its data belong to the session and stay valid
 * until the next run or calq_session_free(). *out is NULL on failure: CALQ_ERR_INDEX_OUT_OF_RANGE
 * for a bad i, CALQ_ERR_BAD_PARAMETERS for s or out NULL or no successful run since the last
 * change. */
CALQ_API calq_status calq_session_output(const calq_session *s, int i, const calq_tensor **out);

/* Shape and dtype of any tensor named `name` as planned for the current input shapes (plans
 * first if needed). out->name is owned by the session. */
CALQ_API calq_status calq_session_tensor_info(calq_session *s, const char *name, calq_value_info *out, calq_error *err);

/* Peak bytes of the activation arena of the current plan, and the sum of all activation
 * sizes (what it would take without buffer reuse). Either output may be NULL (not wanted); 0
 * before the first plan and for s NULL. */
CALQ_API void calq_session_memory(const calq_session *s, size_t *arena_bytes, size_t *sum_bytes);

/* ---------------------------------------------------------------------------------------- */
/* Images (calibration data and quick checks)                                                */
/* ---------------------------------------------------------------------------------------- */

/* How a photo becomes a model input: decoded (JPEG/PNG/BMP/...), resized to width x height
 * (0 keeps the size), channels in RGB order (or BGR), then y = (x - mean[c]) / std[c] * scale,
 * laid out NCHW as a 1x3xHxW float32 tensor. */
typedef struct calq_image_opts {
    int width, height;
    float mean[3];
    float std[3];
    float scale;
    int bgr;
} calq_image_opts;

/* Defaults: keep size, mean 0, std 1, scale 1, RGB. */
CALQ_API void calq_image_opts_init(calq_image_opts *o);
/* Loads one image into *out (data owned by the caller: calq_tensor_free_data; NULL on failure). */
CALQ_API calq_status calq_image_load(const char *path, const calq_image_opts *o, calq_tensor *out, calq_error *err);

/* ---- Calibration config and data (src/calib) ---- */
/* The quantization config is AMCT's (amct-reference.md §7.2 JSON, §7.3 simplified .cfg): the
 * global batch_num / activation_offset / fusion switches and, per quantizable layer, the
 * activation algorithm (IFMR or HFMG) and the weight algorithm (ARQ) with their parameters.
 * Layers of the model that the config does not list are left in float. */

/* AMCT's create_quant_config arguments (§1.1). Initialise with calq_config_opts_init(). */
typedef struct calq_config_opts {
    const char *const *skip_layers; /* layer names left out of the config (not quantized) */
    int n_skip_layers;
    int batch_num;                 /* calibration batches, > 0 (default 1) */
    int activation_offset;         /* 1 (default): asymmetric activations (with offset); 0: symmetric */
    const char *config_defination; /* a simplified .cfg (§7.3) or NULL. When set, the config is derived
                                      from it and the three fields above are ignored, as in AMCT
                                      (AMCT's own spelling of the keyword) */
    const char *act_algo;          /* NULL or "ifmr" (default): AMCT's IFMR for every layer; "hfmg", or calq's
                                      "minmax", "percentile", "kl", "mse", "auto" (docs/numerics.md) with their
                                      default parameters; ignored with config_defination */
} calq_config_opts;

/* Defaults: no skipped layers, batch_num 1, activation_offset 1, no .cfg. */
CALQ_API void calq_config_opts_init(calq_config_opts *o);

/* Writes the JSON config of model m to json_out (atomically): every quantizable layer
 * (§8.1, calq_node_info.quantizable) with AMCT's defaults, minus skip_layers. opts NULL means
 * defaults. */
CALQ_API calq_status calq_create_quant_config(const calq_model *m, const calq_config_opts *opts, const char *json_out,
                                              calq_error *err);

/* A validated config, read against a model. Free with calq_config_free(). It keeps no pointer
 * to the model (it holds layer names and node indices of it): use it with the model it was
 * made for. The library's calibration code reads every parameter through src/calib/config.h;
 * this header offers the lifecycle and what a command line needs. */
typedef struct calq_config calq_config;

/* The same config calq_create_quant_config writes, in memory. */
CALQ_API calq_status calq_config_create(const calq_model *m, const calq_config_opts *opts, calq_config **out,
                                        calq_error *err);
/* Reads a JSON config (any path not ending in .cfg) or a simplified .cfg and checks all of it:
 * unknown keys, JSON types, parameter ranges (§3.1, §5), layers that are not quantizable
 * layers of m, IFMR and HFMG keys mixed in one layer, channel_wise where it is not allowed
 * (§8.4). Messages name the file, the key and the layer; JSON syntax errors give
 * file:line:column. */
CALQ_API calq_status calq_config_load(const calq_model *m, const char *path, calq_config **out, calq_error *err);
/* Writes c as AMCT's JSON (atomically). The bytes depend only on c: writing a config that was
 * read from calq's own output reproduces that output byte for byte. */
CALQ_API calq_status calq_config_save(const calq_config *c, const char *json_path, calq_error *err);
CALQ_API void calq_config_free(calq_config *c);

/* The accessors below answer c NULL as an index out of range: -1 (batch_num, num_layers,
 * find_layer), NULL (layer_name), 0 (layer_enabled). */
CALQ_API int calq_config_batch_num(const calq_config *c);
CALQ_API calq_status calq_config_set_batch_num(calq_config *c, int batch_num, calq_error *err);
/* Layer entries, in the model's node order (enabled or not). Names are owned by c. */
CALQ_API int calq_config_num_layers(const calq_config *c);
CALQ_API const char *calq_config_layer_name(const calq_config *c, int i); /* NULL when out of range */
CALQ_API int calq_config_layer_enabled(const calq_config *c, int i);      /* quant_enable */
/* Index of the entry for `layer`, or -1 when the config does not list it (or layer is NULL). */
CALQ_API int calq_config_find_layer(const calq_config *c, const char *layer);
/* Sets quant_enable of an entry (e.g. to leave a layer in float after a failed calibration). */
CALQ_API calq_status calq_config_set_layer_enabled(calq_config *c, int i, int enabled, calq_error *err);

/* Calibration data: batch i of a source is one set of model inputs. Three kinds:
 *  - AMCT's raw folders (§1.2): one folder per model input, each file one batch of raw
 *    little-endian values, files in ascending name order;
 *  - .npy files: per input, a folder of .npy files (name order) or a list of files;
 *  - a folder of photos (JPEG/PNG/BMP, name order) for a model with one image input: a batch
 *    is batch_size consecutive images, each through calq_image_load.
 * Opening only lists the files (the path strings and opts are copied); calq_data_check then
 * compares every batch it will use with the model's inputs before any inference. Free with
 * calq_data_free(). */
typedef struct calq_data calq_data;

/* data_dir: "dir1/;dir2/" (one folder per input, in model input order; .bin files).
 * data_types: "float32;float64" (one per folder; NULL or "" means float32 for all). A file
 * must hold exactly numel(input shape) values of its data type; float64 (or float16) data are
 * converted to a float32 input. */
CALQ_API calq_status calq_data_open_bin(const char *data_dir, const char *data_types, calq_data **out, calq_error *err);
/* spec: per input (separated by ';'), a folder of .npy files, one .npy file, or a list of
 * .npy files separated by ','. Each file holds one batch: an array of the input's shape. */
CALQ_API calq_status calq_data_open_npy(const char *spec, calq_data **out, calq_error *err);
/* dir: a folder of photos; opts: preprocessing (NULL: calq_image_opts_init defaults);
 * batch_size: images per batch, which must equal dim 0 of the model's input. */
CALQ_API calq_status calq_data_open_images(const char *dir, const calq_image_opts *opts, int batch_size,
                                           calq_data **out, calq_error *err);

/* A caller's batches, delivered one at a time (a Python generator, a preprocessing pipeline,
 * a socket): calq calls next(user, batch, inputs, n_inputs, &end, err) with batch = 0, 1, 2, ...
 * in order, each once, from the thread that called calq_data_check, calq_data_read_batch or
 * calq_calibrate (never concurrently). inputs[0..n_inputs) are zeroed, one per model input in
 * calq_model_input_info order; next sets each one's dtype, ndim, dims and data, or sets *end to
 * 1 when there are no more batches (the tensors are then ignored). The data stay the caller's:
 * calq copies them before it calls next again, so they need only stay valid until then (or
 * until calq_data_free). A batch must have the input's shape (leading dims of 1 may be left out
 * or added) and a dtype calq converts to the input's (any to a float input). A non-OK return
 * (with err filled) fails the call that asked for the batch, its message prefixed with the
 * batch number.
 *
 * Every batch is read from next once: calq keeps the batches it was given in an unlinked
 * temporary file (in $TMPDIR, else /tmp), so the passes of a calibration (IFMR's two, act_algo
 * auto's third) read them again from there. Memory stays that of one batch however many
 * batches there are; the disk holds all of them until calq_data_free. label names the source
 * in messages ("numpy batches"; NULL: "the stream"; copied). */
typedef calq_status (*calq_data_next_fn)(void *user, int batch, calq_tensor *inputs, int n_inputs, int *end,
                                         calq_error *err);
CALQ_API calq_status calq_data_open_stream(calq_data_next_fn next, void *user, const char *label, calq_data **out,
                                           calq_error *err);
CALQ_API void calq_data_free(calq_data *d);

/* Number of complete batches available (bin/npy: files per input; images: images /
 * batch_size, a partial last batch is not counted; a stream: the batches read from it so far,
 * all of them once calq_data_check(d, m, 0, err) has read it to its end); -1 for d NULL. */
CALQ_API int calq_data_num_batches(const calq_data *d);
/* What the source holds, for a log line, e.g. "calib/: 2 .bin files" or "photos/: 13 images".
 * These three write at most n bytes (snprintf's rule: nothing when n is 0 or buf NULL) and
 * write "" for d NULL. */
CALQ_API void calq_data_describe(const calq_data *d, char *buf, size_t n);
/* Where batch i comes from: "calib/0001.bin" (inputs joined with " + "), or
 * "photos/a.jpg..photos/h.jpg". Returns buf. */
CALQ_API const char *calq_data_batch_source(const calq_data *d, int batch, char *buf, size_t n);
/* Where sample k of batch i comes from: the image file, or "calib/0001.bin, sample 3". */
CALQ_API const char *calq_data_sample_source(const calq_data *d, int batch, int sample, char *buf, size_t n);

/* The shape input i of m is fed at: m's, except that data whose first batch holds another
 * batch size of the same per-sample shape give theirs (.npy: the array's dim 0; .bin: the file
 * size over one sample's), also when m leaves the batch dim unknown (?xCxHxW), and that .npy
 * data give every other dim m leaves unknown too (a text line's width: 1x1x32x?; calibration
 * reads a later file of another width at its own shape, calq_data_read_batch does not), photos N (the
 * images per batch), H and W (the resize size, else the first photo's). CALQ_OK;
 * CALQ_ERR_INDEX_OUT_OF_RANGE for a bad i, CALQ_ERR_BAD_PARAMETERS for a NULL argument. */
CALQ_API calq_status calq_data_input_info(const calq_data *d, const calq_model *m, int i, calq_value_info *out,
                                          calq_error *err);

/* Preflight: checks, before any inference, that the source holds at least batch_num batches
 * for every input of m with the right size and type (m's input shapes must be fixed, e.g. by
 * calq_model_set_input_shape, or a dynamic batch dim by the data, calq_data_input_info), and that the batch counts
 * agree across inputs. batch_num 0: every batch the source holds (at least one). The message says how many batches were
 * found, how many batch_num needs, and what to do. A stream is read here, up to batch_num batches (0: to its end), so d
 * is not const. */
CALQ_API calq_status calq_data_check(calq_data *d, const calq_model *m, int batch_num, calq_error *err);

/* Reads batch i into inputs[0..n_inputs), one tensor per model input in input order. The
 * caller owns the tensors and sets dtype and dims (the model input's) and data (room for
 * numel elements); the source converts its values into them. Reusing the same tensors for
 * every batch keeps memory constant. */
CALQ_API calq_status calq_data_read_batch(calq_data *d, int batch, calq_tensor *inputs, int n_inputs, calq_error *err);
/* The same for tensors whose data come from malloc: when the .npy files differ in the dims the
 * model leaves unknown (text lines of several widths, sentences of several lengths), each batch
 * is read at its own shape, the tensor's dims set and its data realloc'ed (free them with
 * calq_tensor_free_data). Other sources read as calq_data_read_batch does. */
CALQ_API calq_status calq_data_read_batch_resize(calq_data *d, int batch, calq_tensor *inputs, int n_inputs,
                                                 calq_error *err);

/* ---- One run's output files (src/base/outputs.c) ---- */
/* The files one run writes under one prefix (AMCT's --save_path: the record and config of a
 * calibration, the models of its save) are staged together and committed all or nothing: each
 * is written to "<file>.tmp.<pid>", and only when every one is complete are they renamed, so a
 * failure anywhere leaves every earlier output as it was. From begin to commit / abort the run
 * holds an advisory lock, flock on "<prefix>.lock" (removed at the end): a second run on the
 * same prefix fails at begin, naming the first one's pid, instead of mixing its files with the
 * first run's. Begin also removes the temporary files a killed run left beside the prefix
 * ("<prefix>...tmp.<pid>" of a process that is gone), with one log line. calq_save_models and
 * calq_calibrate use a set of their own when not given one. */
typedef struct calq_outputs calq_outputs;
CALQ_API calq_status calq_outputs_begin(const char *prefix, calq_outputs **out, calq_error *err);
/* Renames every staged file (logging "calq: wrote ..."), releases the lock and frees o, also on
 * failure, when nothing was renamed. */
CALQ_API calq_status calq_outputs_commit(calq_outputs *o, calq_error *err);
/* Drops every staged file, releases the lock and frees o (NULL: nothing). */
CALQ_API void calq_outputs_abort(calq_outputs *o);

/* ---- Calibration (src/calib) ---- */
/* The calibration run (amct-reference.md §1.1 steps 3-4): ARQ on the (folded) weights of every
 * enabled layer, then batch_num batches of data through the model with an IFMR (two passes over
 * the same batches) or HFMG (one pass) calibrator on the input tensor of every enabled layer;
 * layers reading the same tensor share one calibrator (§3.2). Memory does not grow with
 * batch_num: activations are never kept across batches. Every layer is looked at before a
 * failure is reported: the error lists all layers whose factors are illegal, with their data
 * range, NaN/Inf counts, the first batch and sample (and file) where the bad value appeared,
 * and the skip_layers line that leaves them in float. */
/* Progress of a calibration run, after each batch (for a progress bar; `calq calibration` draws
 * one when stderr is a terminal). */
typedef struct calq_calibrate_progress {
    int pass;          /* 1: statistics (IFMR) / histograms (HFMG); 2: IFMR losses (3: rare, numerics.md) */
    int batch;         /* the batch just run, 0-based */
    int batch_num;     /* batches per pass */
    int runs_done;     /* batches done so far, all passes (a later pass may replay them from the
                          activation cache instead of running the model: cache_mb) */
    int runs_expected; /* batches in total, as far as known (grows if a third pass is needed) */
    double elapsed_s;  /* seconds since calq_calibrate started */
} calq_calibrate_progress;

/* Return 0 to go on, non-zero to stop the run (calq_calibrate then fails with CALQ_ERR_GENERIC
 * and writes nothing). `p` is only valid during the call. */
typedef int (*calq_progress_fn)(void *user, const calq_calibrate_progress *p);

typedef struct calq_calibrate_opts {
    int n_threads;             /* 0: OpenMP's default; capped at calq_thread_limit(). The record never
                                  depends on it. */
    int skip_illegal;          /* 1: layers with illegal factors are left out of the record (kept in
                                  float), logged as a warning and disabled in config_out; 0 (default):
                                  they fail the run and nothing is written */
    int log;                   /* 1 (default): AMCT's progress lines (§1.4) and a summary go to the
                                  calq_set_log callback (CALQ_LOG_INFO); 0: not */
    const char *config_out;    /* NULL or a path: the config actually used (JSON, §7.2) is written
                                  there (atomically) when the run succeeds */
    calq_outputs *outputs;     /* NULL: the record and config_out are committed together at the end
                                  of the run, under the lock of the record's prefix (record_out
                                  without "_record.txt"); else they are staged in `outputs`, for
                                  the caller to commit with the models it saves from them */
    calq_progress_fn progress; /* NULL (default) or called after every batch of every pass */
    void *progress_user;       /* handed to progress */
    int int8_tensors;          /* 1: also calibrate the inputs of the float ops onnxruntime runs on
                                  int8 tensors (Add, Mul, Concat, MaxPool, GlobalAveragePool, Resize,
                                  Sigmoid, LeakyRelu, Softmax) and record them as "<layer>:<input>"
                                  (§7.1), so that the QDQ / QOperator files quantize the tensors
                                  between layers (docs/cli.md "int8 end to end"); not in config_out,
                                  and AMCT's fake-quant / deploy models ignore them. 0 (default):
                                  AMCT's scheme */
    int cache_mb;              /* the activation cache, so that each batch is inferred once: pass 1
                                  keeps the inputs of the layers whose calibrators read the batches
                                  again (IFMR, kl, mse, auto), up to cache_mb MiB in memory, the rest
                                  in a temporary file (the record's folder, else TMPDIR or /tmp;
                                  unlinked at once); later passes read them from there. If no folder
                                  takes the file or the disk fills, the later passes run the model
                                  again. 0: file only; negative: no cache. The record is the same
                                  bytes either way. Default CALQ_CALIBRATE_CACHE_MB_DEFAULT */
    size_t max_arena_bytes;    /* the sessions' calq_session_opts.max_arena_bytes: 0 (default) no limit */
} calq_calibrate_opts;

#define CALQ_CALIBRATE_CACHE_MB_DEFAULT 256

/* Defaults: threads 0, skip_illegal 0, log 1, no config_out, no outputs, no progress callback,
 * int8_tensors 0, cache_mb 256. */
CALQ_API void calq_calibrate_opts_init(calq_calibrate_opts *o);

/* Calibrates m on `data` and writes the record (§7.1 text format) to record_out, atomically and
 * only when the whole run succeeds; an existing file there is left untouched on failure.
 * cfg NULL: AMCT's defaults for every quantizable layer (batch_num 1). The model's input
 * shapes must be fixed (calq_model_set_input_shape). opts NULL: defaults. With log on, the
 * summary ("calibrated N layers in X s; record PATH", the layers skipped) is logged. m is
 * borrowed and left as it was; cfg and data are borrowed. Errors: the preflight's (too few
 * batches; no inference was run), CALQ_ERR_NOT_SUPPORT (-65519) for illegal factors, I/O, a
 * data source's or the progress callback's failure. */
CALQ_API calq_status calq_calibrate(calq_model *m, const calq_config *cfg, calq_data *data,
                                    const calq_calibrate_opts *opts, const char *record_out, calq_error *err);

/* ---- Quantization numerics (src/quant) ---- */
/* The calibration algorithms as pure functions: arrays in, factors out. Every rule reproduces
 * AMCT's float32 arithmetic (amct-reference.md §2, §3, §5, §6); docs/numerics.md lists the few
 * places where calq deliberately differs. Scales are AMCT's step sizes: x ~ (q - offset) * scale.
 * Objects created here are freed by the matching *_free(); results are plain caller-owned
 * structs. */

typedef enum calq_round_mode {
    CALQ_ROUND_HALF_AWAY = 0, /* C round(): AMCT's searches, fake quant and ARQ (§2.3) */
    CALQ_ROUND_HALF_EVEN = 1  /* ties to even: the device's AscendQuant, numpy (§0.3) */
} calq_round_mode;

/* Rounds v to an integer value in the given mode (independent of the FPU rounding mode). */
CALQ_API float calq_round(float v, calq_round_mode mode);

/* AMCT's process_scale (§2.1): *scale < FLT_EPSILON (zero, negative, tiny) becomes 1.0; +inf,
 * NaN and scales above 1/FLT_EPSILON fail with CALQ_ERR_NOT_SUPPORT and AMCT's message. */
CALQ_API calq_status calq_process_scale(float *scale, const char *layer, calq_error *err);

/* q = clamp(round(x/scale) + offset, -2^(b-1), 2^(b-1)-1) for n elements; num_bits in [2, 8]. */
CALQ_API void calq_quantize(const float *x, size_t n, float scale, int offset, int num_bits, calq_round_mode mode,
                            int8_t *q);
/* Fake quant (§2.3): y = (q - offset) * scale with q as above; num_bits in [2, 16]. y may be x.
 * Both write nothing when x or the output is NULL. */
CALQ_API void calq_fake_quant(const float *x, size_t n, float scale, int offset, int num_bits, calq_round_mode mode,
                              float *y);

/* IFMR activation calibration (§3). */
typedef struct calq_ifmr_opts {
    float max_percentile, min_percentile; /* (0.5, 1]; default 0.999999 */
    float search_start, search_end;       /* 0 < start < end; default 0.7, 1.3 */
    float search_step;                    /* (0, end - start]; default 0.01 (60 candidates) */
    int asymmetric;                       /* 1 (default): with offset; 0: symmetric, offset 0 */
    int num_bits;                         /* default 8; [2, 16] */
    int amct_float_loss;                  /* 0 (default): losses summed in double, split-independent (docs/numerics.md);
                                             1: AMCT's float running sum of per-element (d*d)/L terms */
    int n_threads;                        /* 0: OpenMP's default; capped at calq_thread_limit(). Results never
                                             depend on it. */
} calq_ifmr_opts;

CALQ_API void calq_ifmr_opts_init(calq_ifmr_opts *o);

typedef struct calq_ifmr_result {
    float scale;                 /* scale_d */
    int offset;                  /* offset_d (0 when symmetric) */
    float clip_max;              /* the winning clip: r_best * max_init, or r_best * |a| (symmetric) */
    float max_init, min_init;    /* percentile values after zero forcing (§3.3) */
    int best_index;              /* index of the winning ratio (search_start + i * search_step) */
    int n_candidates, n_illegal; /* grid size; candidates excluded because process_scale fails */
    double best_loss;            /* mean squared error of the winner (float value when amct_float_loss) */
    uint64_t count, nan_count, pos_inf_count, neg_inf_count;
    float data_min, data_max; /* range of the finite values */
} calq_ifmr_result;

/* Whole-buffer IFMR (the reference: sorts a copy of x). `layer` names the tensor in errors. */
CALQ_API calq_status calq_ifmr(const float *x, size_t n, const calq_ifmr_opts *o, const char *layer,
                               calq_ifmr_result *out, calq_error *err);

/* Streaming IFMR: the same factors, bit for bit, from data that arrive batch by batch, with state
 * bounded by the percentile tails (about 2*(1-p)*count values) instead of the whole data.
 * Protocol: feed every batch, call end_pass; while *done == 0, feed the same batches again in
 * the same order and call end_pass again. Usually two passes (statistics, then losses); a third
 * happens only when max_count was 0 and the first pass could not prove its order statistics
 * exact. max_count: an upper bound on the total element count, or 0 when unknown. */
typedef struct calq_ifmr_stream calq_ifmr_stream;

CALQ_API calq_status calq_ifmr_stream_create(const calq_ifmr_opts *o, uint64_t max_count, const char *layer,
                                             calq_ifmr_stream **out, calq_error *err);
CALQ_API calq_status calq_ifmr_stream_feed(calq_ifmr_stream *s, const float *x, size_t n, calq_error *err);
CALQ_API calq_status calq_ifmr_stream_end_pass(calq_ifmr_stream *s, int *done, calq_error *err);
/* Valid once end_pass reported done. */
CALQ_API calq_status calq_ifmr_stream_result(const calq_ifmr_stream *s, calq_ifmr_result *out, calq_error *err);
CALQ_API int calq_ifmr_stream_pass(const calq_ifmr_stream *s);     /* 1: statistics, 2-3: losses, 0: done; -1: s NULL */
CALQ_API size_t calq_ifmr_stream_bytes(const calq_ifmr_stream *s); /* current heap memory of the state; 0: s NULL */
CALQ_API void calq_ifmr_stream_free(calq_ifmr_stream *s);

/* HFMG activation calibration (§5): a histogram merged batch by batch (one feed = one batch). */
typedef struct calq_hfmg_opts {
    int num_bins;       /* 1024, 2048, 4096 (default) or 8192 */
    int asymmetric;     /* default 1 */
    int num_bits;       /* default 8 */
    int left_clip_loss; /* 0 (default): AMCT's loss as its code computes it, where bins left of the clip
                           range add nothing (docs/numerics.md); 1: their clipping error counts, as
                           §5 describes it and PyTorch's HistogramObserver does */
} calq_hfmg_opts;

CALQ_API void calq_hfmg_opts_init(calq_hfmg_opts *o);

typedef struct calq_hfmg_result {
    float scale;
    int offset;
    float clip_min, clip_max;  /* the winning clip range, before zero forcing */
    int best_left, best_right; /* winning bin range */
    int n_candidates;
    float best_loss;
    uint64_t count, nan_count, pos_inf_count, neg_inf_count;
} calq_hfmg_result;

typedef struct calq_hfmg calq_hfmg;

CALQ_API calq_status calq_hfmg_create(const calq_hfmg_opts *o, const char *layer, calq_hfmg **out, calq_error *err);
CALQ_API calq_status calq_hfmg_feed(calq_hfmg *h, const float *x, size_t n, calq_error *err);
CALQ_API calq_status calq_hfmg_compute(const calq_hfmg *h, calq_hfmg_result *out, calq_error *err);
/* The current histogram: *counts (owned by h, valid until the next feed) and the float bounds
 * of bin i, lo + i*width .. lo + (i+1)*width; counts, lo, width may each be NULL (not wanted).
 * Returns the bin count (0 before the first batch, -1 for h NULL). */
CALQ_API int calq_hfmg_bins(const calq_hfmg *h, const uint64_t **counts, float *lo, float *width);
CALQ_API void calq_hfmg_free(calq_hfmg *h);

/* calq's range calibrators (docs/numerics.md, "calq's activation calibrators"): not AMCT
 * algorithms (AMCT's tools reject configs naming them), each a clip range chosen from the data
 * and turned into factors with IFMR's final rules (§3.5 / §3.6: zero forced into the range,
 * process_scale §2.1, offset -round(min/scale) - 2^(n-1)). Streaming with the protocol of
 * calq_ifmr_stream (feed every batch, end_pass, repeat while not done); the state is bounded
 * (a histogram, or the percentile tails) and the result depends neither on the batch split nor
 * on the thread count. */
typedef enum calq_range_method {
    CALQ_RANGE_MINMAX = 0,     /* the data range; one pass */
    CALQ_RANGE_PERCENTILE = 1, /* the max_percentile / min_percentile order statistics (IFMR's §3.3 ranks), no
                                  search; one pass */
    CALQ_RANGE_KL = 2,         /* TensorRT's entropy calibration: the histogram window whose quantized form has the
                                  smallest KL divergence from the clipped distribution; two passes */
    CALQ_RANGE_MSE = 3         /* the clip, on a grid of histogram bins, with the smallest mean squared
                                  quantization error (uniform density inside a bin); two passes */
} calq_range_method;

typedef struct calq_range_opts {
    calq_range_method method;
    int asymmetric;                       /* 1 (default): with offset; 0: symmetric, offset 0 */
    int num_bits;                         /* default 8; [2, 8] */
    float max_percentile, min_percentile; /* PERCENTILE: (0.5, 1]; default 0.99999 */
    int num_bins;                         /* KL, MSE: 1024, 2048 (default), 4096 or 8192 */
    int n_threads;                        /* KL, MSE search: 0 = OpenMP's default; results never depend on it */
} calq_range_opts;

/* Defaults for method m. */
CALQ_API void calq_range_opts_init(calq_range_opts *o, calq_range_method m);
/* "minmax", "percentile", "kl", "mse"; NULL for an unknown value. */
CALQ_API const char *calq_range_method_name(calq_range_method m);

typedef struct calq_range_result {
    float scale; /* scale_d */
    int offset;  /* offset_d (0 when symmetric) */
    float clip_min,
        clip_max;  /* the chosen range after zero forcing; symmetric: the dominant side's [-T, 0] or [0, T] */
    int best_bins; /* KL / MSE: the winning window in bins */
    int n_candidates, n_illegal; /* KL / MSE: windows searched; excluded (illegal scale, or infinite divergence) */
    double best_loss;            /* KL: divergence (nats); MSE: mean squared error per element; else 0 */
    uint64_t count, nan_count, pos_inf_count, neg_inf_count;
    float data_min, data_max; /* range of the finite values */
} calq_range_result;

typedef struct calq_range_stream calq_range_stream;

/* max_count: an upper bound on the total element count (sizes the percentile tails so one
 * pass is exact), or 0 when unknown (a second statistics pass may then be needed). */
CALQ_API calq_status calq_range_stream_create(const calq_range_opts *o, uint64_t max_count, const char *layer,
                                              calq_range_stream **out, calq_error *err);
CALQ_API calq_status calq_range_stream_feed(calq_range_stream *s, const float *x, size_t n, calq_error *err);
CALQ_API calq_status calq_range_stream_end_pass(calq_range_stream *s, int *done, calq_error *err);
/* Valid once end_pass reported done. */
CALQ_API calq_status calq_range_stream_result(const calq_range_stream *s, calq_range_result *out, calq_error *err);
CALQ_API int calq_range_stream_pass(const calq_range_stream *s); /* 1: statistics, 2: histogram, 0: done; -1: s NULL */
CALQ_API size_t calq_range_stream_bytes(const calq_range_stream *s); /* current heap memory of the state; 0: s NULL */
CALQ_API void calq_range_stream_free(calq_range_stream *s);
/* The same on one buffer (all passes over x). */
CALQ_API calq_status calq_range(const float *x, size_t n, const calq_range_opts *o, const char *layer,
                                calq_range_result *out, calq_error *err);

/* ARQ weight quantization (§6.1). Where the output channel of a weight is: */
typedef enum calq_weight_layout {
    CALQ_WEIGHTS_CONV = 0,           /* Conv [Cout, Cin/group, k...] incl. depthwise: channel = dim 0 */
    CALQ_WEIGHTS_CONV_TRANSPOSE = 1, /* ConvTranspose [Cin, Cout/group, k...]: channel of element
                                        (ci, j, ...) = (ci / (Cin/group)) * (Cout/group) + j */
    CALQ_WEIGHTS_MATRIX = 2,         /* Gemm / InnerProduct / MatMul: per tensor only */
    CALQ_WEIGHTS_RNN = 3             /* LSTM / GRU / RNN W and R [directions, gates*hidden, in]: one channel per
                                        direction and gate row (element e is in channel e / in) */
} calq_weight_layout;

typedef struct calq_arq_opts {
    int channel_wise;           /* default 1: one scale per output channel; an error for MATRIX (§8.4) */
    int asymmetric;             /* default 0 (the only mode the record check accepts, §4.4) */
    int num_bits;               /* default 8; [2, 8] */
    calq_round_mode round_mode; /* default CALQ_ROUND_HALF_AWAY (AMCT) */
} calq_arq_opts;

CALQ_API void calq_arq_opts_init(calq_arq_opts *o);
/* Number of scales calq_arq_quantize writes (Cout when channel-wise, else 1); -1 if the shape
 * does not fit the layout. */
CALQ_API int64_t calq_arq_num_scales(const calq_tensor *w, calq_weight_layout layout, int group,
                                     const calq_arq_opts *o);
/* Computes scale_w/offset_w (calq_arq_num_scales entries, caller-owned) and, when non-NULL, the
 * int8 weights w_q and the fake-quant weights w_fake (numel entries each, in w's own layout). */
CALQ_API calq_status calq_arq_quantize(const calq_tensor *w, calq_weight_layout layout, int group,
                                       const calq_arq_opts *o, const char *layer, float *scale_w, int *offset_w,
                                       int8_t *w_q, float *w_fake, calq_error *err);

/* deq_scale[c] = scale_d * scale_w[c] in float32 (§6.2); n_scale_w is n or 1 (broadcast).
 * Writes nothing when scale_w or deq is NULL or n_scale_w is neither. */
CALQ_API void calq_deq_scale(float scale_d, const float *scale_w, int64_t n_scale_w, int64_t n, float *deq);
/* bias_q[c] = round_half_even(bias[c] / deq_scale[c]) in float32, checked against int32 (§6.2, §8.4). */
CALQ_API calq_status calq_quant_bias(const float *bias, int64_t n, float scale_d, const float *scale_w,
                                     int64_t n_scale_w, const char *layer, int32_t *bias_q, calq_error *err);
/* The AscendDequant uint64 (§6.3): bits 0..31 float bits, 32..39 shift_n, 40..47 offset_w. */
CALQ_API uint64_t calq_deq_scale_pack(float deq_scale, unsigned shift_n, int offset_w);
CALQ_API void calq_deq_scale_unpack(uint64_t v, float *deq_scale, unsigned *shift_n, int *offset_w);
/* FORCE_FP16_QUANT's "s19" truncation of a deq_scale (keeps bits & 0xFFFFE000, §6.3). */
CALQ_API float calq_deq_scale_s19(float deq_scale);

/* shift_bit search (§6.4) over the float outputs of one layer, batch by batch. */
typedef struct calq_shift_bit calq_shift_bit;

/* deq_scale has n_channels entries (copied). broadcast: one error sum over all channels (a
 * "global conv"), the same shift for every channel. */
CALQ_API calq_status calq_shift_bit_create(int n_channels, const float *deq_scale, int broadcast, calq_shift_bit **out,
                                           calq_error *err);
/* One batch y laid out [outer, n_channels, inner] (NCHW: outer = N, inner = H*W). */
CALQ_API calq_status calq_shift_bit_feed(calq_shift_bit *s, const float *y, int64_t outer, int64_t inner,
                                         calq_error *err);
/* shift_bit[c] in [1, 16] for every channel. */
CALQ_API calq_status calq_shift_bit_result(const calq_shift_bit *s, int *shift_bit, calq_error *err);
CALQ_API void calq_shift_bit_free(calq_shift_bit *s);

/* ---- Save (src/export) ---- */

/* Quantized model formats calq_save_model writes (docs/cli.md, "calq save"). */
typedef enum calq_save_format {
    CALQ_SAVE_QDQ = 0,       /* <prefix>_qdq.onnx: QuantizeLinear / DequantizeLinear pairs, int8 weights, int32 bias */
    CALQ_SAVE_QOPERATOR = 1, /* <prefix>_qoperator.onnx: QLinearConv / QLinearMatMul where output factors are known */
    /* AMCT's fake-quant model (amct-reference.md §9.2), AMCT's file names (§1.3): ONNX
     * <prefix>_fake_quant_model.onnx; Caffe <prefix>_fake_quant_model.prototxt + _fake_quant_weights.caffemodel */
    CALQ_SAVE_ASCEND_FAKE_QUANT = 2,
    /* AMCT's deploy model for ATC (§9.1: AscendQuant, int8 weights, int32 bias, AscendDequant with the uint64
     * deq_scale): ONNX <prefix>_deploy_model.onnx; Caffe <prefix>_deploy_model.prototxt + _deploy_weights.caffemodel */
    CALQ_SAVE_ASCEND_DEPLOY = 3
} calq_save_format;

/* OR-ed into CALQ_SAVE_QDQ or CALQ_SAVE_QOPERATOR (an error with the others): the same file with
 * 7-bit weights, for onnxruntime on x86 CPUs without VNNI. Their u8s8 kernels add pairs of
 * u8 x s8 products in 16 bits with saturation (vpmaddubsw): 255 * 127 * 2 overflows, and the
 * results drift from the integer ones (13 steps on UltraFace); with |w_q| <= 64 no pair reaches
 * 2^15 and the kernels are exact. scale_w becomes the record's * 127/63 (ARQ's max|w| / 63), the
 * weights are clamped to [-64, 63] and the int32 biases follow; activations and the record are
 * unchanged. Costs one bit of weight precision (docs/cli.md "--reduce-range"). */
#define CALQ_SAVE_REDUCE_RANGE 0x100

/* Checks the record file against m (amct-reference.md §4.4: factor ranges, keys, every
 * quantizable layer present, int32 bias range) and writes the quantized ONNX model, atomically:
 * on any failure nothing is written and an existing output is untouched. Conv+BatchNorm is
 * folded as calibration folds it (§8.3). Caffe models take the CALQ_SAVE_ASCEND_* formats. */
CALQ_API calq_status calq_save_model(const calq_model *m, const char *record, calq_save_format fmt, const char *prefix,
                                     calq_error *err);
/* The same with the config calibration used (JSON or .cfg; NULL: every quantizable layer, as
 * calibration without a config): its enabled layers are the ones the record must have, and its
 * fusion switches (do_fusion, skip_fusion_layers) are applied. */
CALQ_API calq_status calq_save_model_config(const calq_model *m, const char *record, const char *config,
                                            calq_save_format fmt, const char *prefix, calq_error *err);
/* Several formats from one record check, committed together: every file is written to a
 * temporary file first and all are renamed only when all are complete, so a failure in any of
 * them leaves every earlier output untouched. ONNX models take any format; Caffe models the
 * two CALQ_SAVE_ASCEND_* ones. */
CALQ_API calq_status calq_save_models(const calq_model *m, const char *record, const char *config,
                                      const calq_save_format *fmts, int n_fmts, const char *prefix, calq_error *err);

/* A format calq_save_models_available left out, and why (the message its save gave). */
typedef struct calq_save_skip {
    calq_save_format format;
    calq_status status;
    char reason[512];
} calq_save_skip;

/* calq_save_models for formats the user did not choose one by one (the CLI's default "all"):
 * a format that cannot be written for this model (QDQ / QOperator when the model cannot be
 * raised to opset 13, ...) is skipped and listed in skipped[0 .. *n_skipped) (room for n_fmts
 * entries) instead of failing the save; the others are written and committed together. Fails,
 * writing nothing, when the record or config check fails or no format can be written. */
CALQ_API calq_status calq_save_models_available(const calq_model *m, const char *record, const char *config,
                                                const calq_save_format *fmts, int n_fmts, const char *prefix,
                                                calq_save_skip *skipped, int *n_skipped, calq_error *err);

/* The save of either function above (skipped NULL: calq_save_models; else
 * calq_save_models_available) staged in `outputs` instead of committed, so a calibration's
 * record and config and the models saved from them are renamed together by
 * calq_outputs_commit (the record and config may be files staged there). On failure the files
 * this save staged are dropped and the ones staged before it stay staged. */
CALQ_API calq_status calq_save_models_staged(calq_outputs *outputs, const calq_model *m, const char *record,
                                             const char *config, const calq_save_format *fmts, int n_fmts,
                                             const char *prefix, calq_save_skip *skipped, int *n_skipped,
                                             calq_error *err);
/* Stages in `outputs` the removal of the model files that formats fmts write for m under the
 * set's prefix (done at calq_outputs_commit after the renames; a missing file is no error). For a
 * run that commits a new record but no model, its save having failed: the models an earlier run
 * left under the prefix would otherwise stay beside a record they do not match. */
CALQ_API calq_status calq_outputs_drop_models(calq_outputs *outputs, const calq_model *m, const calq_save_format *fmts,
                                              int n_fmts, calq_error *err);
/* ---- Accuracy comparison (src/compare) ---- */
/* calq_compare runs a float model and a quantized model calq wrote from it (AMCT's fake-quant or
 * deploy model, QDQ, QOperator; ONNX or Caffe) on the same data and measures, for every model
 * output and every quantized layer, how far the quantized values are from the float ones.
 * Layers are matched by calq's naming (docs/cli.md, "calq compare"). Accumulated: Q as it is.
 * Isolated (opts.isolated): each layer quantized alone, fed the float model's input, from one
 * pass of a float model holding a copy of every quantized layer (not one model per layer). The
 * data are streamed: memory does not depend on the number of batches.
 * Sensitivity (opts.sensitivity): each layer quantized alone in the float model, measured at the
 * model outputs: what that one layer costs the outputs, amplification downstream included (a
 * layer with a small error of its own can be the one that ruins the outputs, and the reverse).
 * One run of the model per layer and batch; the batches' inputs and float outputs are held
 * meanwhile (memory grows with batch_num here: bound it with opts.batch_num). */
typedef struct calq_compare_opts {
    int isolated;           /* 1: also each layer quantized alone (0: accumulated only) */
    int sensitivity;        /* 1: also each layer quantized alone, measured at the model outputs */
    int outputs_only;       /* 1: the model outputs only (no per-layer figures; faster) */
    int batch_num;          /* batches of the data to run (0: all of them) */
    int n_threads;          /* 0: OpenMP's default. The figures never depend on it. */
    int log;                /* 1 (default): a CALQ_LOG_DEBUG line per batch (calq_set_log); 0: quiet */
    size_t max_arena_bytes; /* the sessions' calq_session_opts.max_arena_bytes: 0 (default) no limit */
} calq_compare_opts;

/* Defaults: accumulated, every layer, every batch, log 1. */
CALQ_API void calq_compare_opts_init(calq_compare_opts *o);

/* Float y against quantized q over every element of every batch (double sums in element order). */
typedef struct calq_compare_stats {
    double cosine;     /* sum(y*q) / sqrt(sum(y^2) * sum(q^2)); 1 when both are all zero */
    double cosine_min; /* the smallest cosine of a single batch */
    double rel_l2;     /* sqrt(sum((q-y)^2) / sum(y^2)) */
    double sqnr_db;    /* 10*log10(sum(y^2) / sum((q-y)^2)); +inf when q == y */
    double max_abs;    /* max |q - y| */
    uint64_t count;    /* elements compared */
} calq_compare_stats;

typedef struct calq_compare_output {
    char *name;
    calq_compare_stats s;
} calq_compare_output;

#define CALQ_COMPARE_HIST_BINS 64

typedef struct calq_compare_layer {
    char *name;           /* the layer (node) name */
    char *op;             /* its operator in the float model */
    char *input, *output; /* the float model's tensors: the layer's input, and the output compared
                             (the layer's own, or the Relu's a QOperator layer absorbed) */
    int has_range;        /* the input's quantization was found in the quantized model */
    float scale;          /* scale_d, offset_d of the layer's input: x ~ (q - offset) * scale */
    int offset;
    float clip_min, clip_max; /* the range they represent: (-128 - offset) * scale .. (127 - offset) * scale */
    calq_compare_stats acc;   /* the quantized model as it is */
    int has_isolated;
    calq_compare_stats iso; /* this layer alone quantized, fed the float input */
    int has_sensitivity;
    calq_compare_stats sens; /* the model outputs with this layer alone quantized: the figures of the
                                output whose cosine is lowest (opts.sensitivity) */
    int sens_output;         /* that output's index in calq_compare_result.outputs */
    double clip_fraction;    /* of the float input's elements outside [clip_min, clip_max] */
    uint64_t n_clipped, n_input;
    float in_min, in_max; /* the float input's range */
    /* histogram of the float input over [hist_lo, hist_hi] (the clip range widened by a quarter
     * on each side), and the counts below and above it */
    float hist_lo, hist_hi;
    uint64_t hist[CALQ_COMPARE_HIST_BINS];
    uint64_t hist_below, hist_above;
} calq_compare_layer;

typedef struct calq_compare_result {
    char *model, *quantized; /* labels (the paths given, or "") */
    int n_outputs;
    calq_compare_output *outputs;
    int n_layers;
    calq_compare_layer *layers; /* in the float model's graph order */
    int n_float_layers;         /* quantizable layers the quantized model keeps in float */
    int n_batches;
    double seconds;
} calq_compare_result;

/* Runs both models on `data` (batch_num batches, or all) and fills *out (free with
 * calq_compare_result_free). Both models' input shapes must be fixed. fm is not modified; qm is
 * run as its file says (QDQ pairs as float fake-quant, so every layer's float output exists).
 * model_label / quantized_label name the models in reports (NULL: ""). Errors: no quantized
 * layer and no common output, outputs that do not match, data that do not fit the inputs. */
CALQ_API calq_status calq_compare(calq_model *fm, calq_model *qm, calq_data *data, const calq_compare_opts *opts,
                                  const char *model_label, const char *quantized_label, calq_compare_result **out,
                                  calq_error *err);
CALQ_API void calq_compare_result_free(calq_compare_result *r);
/* The layers worst first (order[] gets r->n_layers indices): by the model outputs' cosine with the
 * layer alone quantized where there is one (sensitivity), else by isolated cosine (the layer's own
 * damage), else accumulated; ties in graph order. Nothing when r or order is NULL. */
CALQ_API void calq_compare_worst_first(const calq_compare_result *r, int *order);
/* The result as JSON ({"outputs": [...], "layers": [...], ...}, docs/cli.md) or as one
 * self-contained HTML report (inline CSS and SVG, nothing fetched), written atomically. */
CALQ_API calq_status calq_compare_write_json(const calq_compare_result *r, const char *path, calq_error *err);
CALQ_API calq_status calq_compare_write_html(const calq_compare_result *r, const char *path, calq_error *err);

/* ---- Automatic fallback to an accuracy target (src/search) ---- */
/* After calq_calibrate: keeps the layers that cost most accuracy in float until the quantized
 * model reaches a target (user-journeys §5; AMCT's accuracy_based_auto_calibration, done
 * better). The factors are computed once (the record); only quant_enable changes between
 * trials, each trial being AMCT's fake-quant model saved from the record and measured. The
 * layers are ranked by what each alone costs the model outputs (calq_compare's sensitivity; with
 * rank_isolated, by their isolated error, one pass for all layers), then
 * added greedily, each step measuring the few best-ranked layers and keeping the one that helps
 * most (the ranking is re-ordered by what was measured), then pruned: a layer whose removal
 * keeps the target met is quantized again. Ends with the best set found, written into the
 * record (those layers left out) and the config (quant_enable false), so calq_calibrate with
 * that config reproduces the record. */

/* The user's measure of a candidate model (model_path: ONNX file or prototxt; weights_path: the
 * caffemodel, or NULL). Fills *metric, a finite number (NaN or infinity fails the search with
 * CALQ_ERR_DATA); a failure stops the search with its error. The search checks its time budget
 * only between trials: an evaluator that may hang bounds its own runs (calq's CLI does). */
typedef calq_status (*calq_evaluator_fn)(void *user, const char *model_path, const char *weights_path, double *metric,
                                         calq_error *err);

typedef struct calq_fallback_opts {
    double target;               /* the metric to reach (with no evaluator: the minimum, over the batches and
                                    the model outputs, of the cosine fake-quant vs float); finite */
    calq_evaluator_fn evaluator; /* NULL: the cosine metric */
    void *evaluator_user;
    int lower_is_better;      /* the evaluator's metric is an error (default: higher is better) */
    calq_data *eval_data;     /* data for the metric and the ranking; NULL: the calibration data */
    int eval_batches;         /* batches of it (0: all of eval_data, or the config's batch_num) */
    int max_float_layers;     /* at most this many layers in float (0: no limit) */
    double time_budget;       /* seconds for the search (0: no limit); it stops before a trial that
                                 would exceed it */
    int lookahead;            /* layers measured per step (0: 4) */
    int rank_isolated;        /* 1: rank by isolated cosine (one float pass) instead of by the model
                                 outputs with each layer alone quantized (one run per layer and batch) */
    calq_save_format measure; /* the model each trial saves and measures (and the evaluator gets):
                                 CALQ_SAVE_ASCEND_FAKE_QUANT (the default: AMCT's fake-quant model) or
                                 CALQ_SAVE_QDQ, optionally | CALQ_SAVE_REDUCE_RANGE (what the QDQ /
                                 QOperator files compute: their scheme and weight bits); ONNX only */
    int n_threads;
    int log;               /* 1 (default): the ranking, every step and the summary */
    const char *work_dir;  /* folder for the trial models (NULL: a new temporary folder, removed) */
    calq_outputs *outputs; /* NULL: record and config are files; else the set calq_calibrate staged them in
                              (calq_calibrate_opts.outputs): they are read and rewritten there, and renamed
                              with everything else at calq_outputs_commit */
} calq_fallback_opts;

CALQ_API void calq_fallback_opts_init(calq_fallback_opts *o);

typedef struct calq_fallback_step {
    char *layer;   /* kept in float at this step (removed from the set when pruned) */
    int pruned;    /* 1: the layer went back to int8 */
    double metric; /* the metric after the step */
} calq_fallback_step;

typedef struct calq_fallback_result {
    double metric_before; /* every enabled layer quantized */
    double metric_after;  /* with float_layers in float */
    double metric_float;  /* the float model's (cosine: 1) */
    int met;              /* the target is met */
    int n_layers;         /* layers the config enables */
    int n_float;
    char **float_layers; /* in graph order */
    int n_ranked;
    char **ranked;           /* worst first, by ranking_cosine */
    double *isolated_cosine; /* per ranked layer: its isolated cosine (NaN when not measured) */
    double *ranking_cosine;  /* per ranked layer: the figure it was ranked by (the worst output's
                                cosine with it alone quantized, or its isolated cosine) */
    int ranked_by_outputs;   /* 1: ranking_cosine is the outputs' (sensitivity) */
    int n_steps;
    calq_fallback_step *steps;
    int n_trials;
    double seconds, ranking_seconds;
} calq_fallback_result;

/* m: the model calibrated; record / config: calq_calibrate's record_out and config_out (both
 * rewritten, atomically, with the result); data: the calibration data. The target not being met
 * is not an error here (result->met is 0): the best set found is written all the same. */
CALQ_API calq_status calq_fallback(calq_model *m, const char *record, const char *config, calq_data *data,
                                   const calq_fallback_opts *opts, calq_fallback_result **out, calq_error *err);
CALQ_API void calq_fallback_result_free(calq_fallback_result *r);

#ifdef __cplusplus
}
#endif
#endif /* CALQ_H */
