/* The quantization config: AMCT's JSON (amct-reference.md §7.2) and simplified .cfg (§7.3),
 * read into one struct that the calibration session (src/calib) consumes.
 *
 * The public face is the opaque calq_config of calq.h (load, create, save, a few accessors);
 * code inside the library includes this header to read every per-layer parameter. The struct
 * is fully validated when it leaves calq_config_load / calq__config_defaults: parameters are in
 * their §3.1/§5 ranges, every layer is a quantizable layer of the model the config was read
 * against, and nothing else needs checking before calibration.
 *
 * Ownership: a calq_config owns every string and array it points to; calq_config_free releases
 * all of it. */
#ifndef CALQ_CALIB_CONFIG_H
#define CALQ_CALIB_CONFIG_H

#include <stdbool.h>
#include <stdio.h>

#include "base/strmap.h"
#include "calq.h"
#include "graph/qkind.h"

/* Activation algorithm of a layer ("act_algo", §7.2): AMCT's two, then calq's own
 * (docs/numerics.md), which AMCT's tools do not know: the writer names them only for the
 * layers that use them. */
typedef enum calq_act_algo {
    CALQ_ACT_IFMR = 0,       /* default (§3) */
    CALQ_ACT_HFMG = 1,       /* histogram based (§5) */
    CALQ_ACT_MINMAX = 2,     /* calq: the data range */
    CALQ_ACT_PERCENTILE = 3, /* calq: max_percentile / min_percentile order statistics */
    CALQ_ACT_KL = 4,         /* calq: TensorRT's entropy calibration */
    CALQ_ACT_MSE = 5,        /* calq: smallest squared quantization error on a histogram */
    CALQ_ACT_AUTO = 6        /* calq: per layer, the candidate whose factors give the layer the smallest
                                output error on the calibration data (calibrate_auto.c) */
} calq_act_algo;
#define CALQ_ACT_N 7

/* The parameter keys of activation_quant_params an algorithm takes (besides num_bits and
 * asymmetric), as a mask. */
enum {
    CALQ_ACT_KEY_PERCENTILES = 1, /* max_percentile, min_percentile */
    CALQ_ACT_KEY_SEARCH = 2,      /* search_range, search_step */
    CALQ_ACT_KEY_BINS = 4         /* num_of_bins */
};

/* One row per algorithm: the one table config reading, writing, checking and calibration
 * look algorithms up in (config_algo.c). */
typedef struct calq__act_algo_info {
    calq_act_algo algo;
    const char *name;      /* the act_algo value */
    bool amct;             /* an AMCT algorithm (its tools accept it) */
    unsigned keys;         /* CALQ_ACT_KEY_* it takes */
    int range_method;      /* the calq_range_method computing it, or -1 */
    double percentile;     /* default max/min_percentile when it takes them */
    int num_of_bins;       /* default num_of_bins when it takes it */
    const char *keys_text; /* its parameter keys, for messages */
} calq__act_algo_info;

const calq__act_algo_info *calq__act_algo(calq_act_algo a);
/* NULL for an unknown name. */
const calq__act_algo_info *calq__act_algo_by_name(const char *name);
/* "ifmr", "hfmg", "minmax", ... for messages listing the choices. */
const char *calq__act_algo_names(void);

/* "activation_quant_params". The fields the algorithm takes (calq__act_algo(algo)->keys) are
 * meaningful; the others keep their defaults. Doubles, so that values such as 0.999999 are
 * written back exactly as read; the algorithms take them as float (calq__config_ifmr_opts). */
typedef struct calq_act_config {
    calq_act_algo algo;
    int num_bits;           /* 8 (the only value AMCT supports, §3.1) */
    double max_percentile;  /* (0.5, 1] */
    double min_percentile;  /* (0.5, 1] */
    double search_range[2]; /* 0 < a < b */
    double search_step;     /* (0, b - a] */
    bool asymmetric;        /* with offset; defaults to the global activation_offset */
    int num_of_bins;        /* 1024, 2048, 4096 (default) or 8192; kl, mse: default 2048 */
    double neg_weight;      /* mse: weight of the error below 0, the squared slope of the LeakyRelu that alone
                               reads the tensor (calibration's int8_tensors only, never in a config); 0: none */
} calq_act_config;

/* The weight algorithm ("wts_algo", §7.2; the .cfg's wts oneof, §7.3). */
typedef enum calq_wts_algo {
    CALQ_WTS_ARQ = 0, /* "arq_quantize": nearest rounding with ARQ's scale (§6.1), the default */
    CALQ_WTS_ADA = 1  /* "ada_quantize": ARQ's scale, learned rounding (AdaRound, docs/numerics.md) */
} calq_wts_algo;

/* ada_quantize's parameters (§7.2 defaults: 10000, 0.01, [20, 2], 0.2). */
typedef struct calq_ada_config {
    int num_iteration;    /* [1, 10^7] */
    double reg_param;     /* [0, 1e6], the rounding regulariser's weight */
    double beta_range[2]; /* start, end of the annealed exponent; each in (0, 1000] */
    double warm_start;    /* [0, 1): fraction of the iterations without the regulariser */
} calq_ada_config;

/* True when kind k can take ada_quantize (Conv, Gemm, MatMul with a constant weight). */
bool calq__ada_kind_ok(const calq_qkind *k);

/* "weight_quant_params". */
typedef struct calq_wts_config {
    int num_bits;      /* 8 */
    bool channel_wise; /* the kind's default (§8.1 CHANNEL_WISE_ONNX_TYPES); true only where the kind allows it */
    calq_wts_algo algo;
    calq_ada_config ada; /* meaningful with CALQ_WTS_ADA; the defaults otherwise */
} calq_wts_config;

/* One layer entry. Layers of the model that are absent from the config are not quantized
 * (§7.2: "Deleting a layer's entry or setting quant_enable: false skips the layer"). */
typedef struct calq_layer_config {
    char *name;             /* node name in the model */
    char *op_type;          /* calq's op type of that node (kind->onnx) */
    const calq_qkind *kind; /* its quantizable kind (graph/qkind.h; static) */
    int node;               /* index of the node (calq_model_node_info order) */
    bool quant_enable;
    calq_act_config act;
    bool has_weights; /* the kind has constant weights (false for AveragePool) */
    calq_wts_config wts;
    /* DMQ balancing ("dmq_balancer_param", §7.2; .cfg dmq_balancer { migration_strength }, §7.3):
     * dmq > 0 is the migration strength alpha in [CALQ_DMQ_MIN, CALQ_DMQ_MAX]; 0 = off (the
     * default). Only kinds with qkind.balance take it (docs/numerics.md, "DMQ balancing"). */
    double dmq;
    /* A tensor_quantize entry (§7.2; calq_config.tensors): input `input` of layer `name` is
     * quantized on its own (record key "<name>:<input>", §7.1), kind is its tensor-only row. */
    bool tensor;
    int input;
} calq_layer_config;

/* The range of dmq_balancer_param / migration_strength AMCT accepts (§7.2). */
#define CALQ_DMQ_MIN     0.2
#define CALQ_DMQ_MAX     0.8
#define CALQ_DMQ_DEFAULT 0.5 /* migration_strength's default (§7.3) */

struct calq_config {
    int version;            /* 1 */
    int batch_num;          /* > 0 */
    bool activation_offset; /* the global default for asymmetric activations */
    bool do_fusion;         /* Conv+BN(+Scale) folding (§8.3) */
    bool joint_quant;       /* shift_bit search (§6.4) */
    bool write_joint_quant; /* the key is written (ONNX models, or when it was read) */
    int n_skip_fusion_layers;
    char **skip_fusion_layers;
    int n_layers; /* entries, in the model's node order */
    calq_layer_config *layers;
    int n_tensors; /* "tensor_quantize" entries (§7.2), in the model's node order, then input order */
    calq_layer_config *tensors;
};

/* Allocates an empty config with AMCT's global defaults (version 1, batch_num 1,
 * activation_offset true, do_fusion true). NULL on out-of-memory. */
calq_config *calq__config_new(void);

/* A deep copy (e.g. to disable layers in the config written next to a record without touching
 * the caller's). NULL on out-of-memory. Free with calq_config_free. */
calq_config *calq__config_clone(const calq_config *c);

/* Default parameters of a layer of kind k (§7.2, §11): IFMR 0.999999/0.999999, [0.7, 1.3],
 * step 0.01, asymmetric = activation_offset, 8 bits, 4096 bins for HFMG; ARQ channel-wise where
 * the kind allows it (Conv, ConvTranspose); weights only for kinds with constant weights. */
void calq__layer_config_defaults(calq_layer_config *l, const calq_qkind *k, bool activation_offset);

/* Appends a layer entry (name copied) of kind k with the defaults above and quant_enable true.
 * Returns the entry, or NULL on out-of-memory (err filled). */
calq_layer_config *calq__config_add_layer(calq_config *c, const char *name, const calq_qkind *k, int node,
                                          calq_error *err);

/* Appends a tensor_quantize entry for input `input` of layer `name` (node `node` of m), whose
 * input is quantized under tensor-only row k, with the layer defaults above (asymmetric =
 * activation_offset). NULL on out-of-memory (err filled). */
calq_layer_config *calq__config_add_tensor(calq_config *c, const char *name, int input, const calq_qkind *k, int node,
                                           calq_error *err);
/* Checks that input `input` of layer `name` of m may be a tensor_quantize entry and returns its
 * node and tensor-only row; otherwise fails with CALQ_ERR_BAD_PARAMETERS naming what is wrong. */
calq_status calq__config_check_tensor(const calq_model *m, const char *name, int input, const char *where, int *node,
                                      const calq_qkind **kind, calq_error *err);
/* The tensor_quantize entry of input `input` of layer `name`, or NULL. */
calq_layer_config *calq__config_find_tensor(const calq_config *c, const char *name, int input);

/* Sorts the entries into the model's node order (the writer's order). */
void calq__config_sort_layers(calq_config *c);

/* Entry for `name`, or NULL. */
calq_layer_config *calq__config_find(const calq_config *c, const char *name);
/* c's layer names -> index into c->layers, for many lookups (calq__config_find is a linear
 * search); false on out-of-memory. Keys borrowed from c. */
bool calq__config_index(const calq_config *c, calq_strmap *map);

/* ---- model lookups shared by the readers -------------------------------------------------- */

/* Node index of `name` in m, or -1. */
int calq__model_find_node(const calq_model *m, const char *name);
/* Checks that `name` is a quantizable layer of m and returns its node index; otherwise fails
 * with CALQ_ERR_BAD_PARAMETERS: "<where>: the model has no layer X" or "<where>: layer X is
 * not a quantizable layer of the model (it is a Relu)". */
calq_status calq__config_check_layer(const calq_model *m, const char *name, const char *where, int *node,
                                     calq_error *err);
/* The quantizable kind of node i of m (calq__qkind_of_node on the model's graph), or NULL. */
const calq_qkind *calq__model_qkind(const calq_model *m, int i);
/* True when the model is an ONNX model (AMCT writes joint_quant for ONNX only, §7.2). */
bool calq__model_is_onnx(const calq_model *m);

/* ---- validation shared by the JSON and .cfg readers ---------------------------------------- */

/* The largest batch_num a config file may give (and `calq --batch_num` takes): more batches
 * than any data set holds; a bigger number is a typo. */
#define CALQ__BATCH_NUM_MAX 1000000000

/* Checks one layer's parameters against §3.1, §5 and §8.4. `where` prefixes the message (file
 * name and layer, e.g. "config.json: layer 'conv1'"); keys are named in JSON spelling when
 * json is true, in .cfg spelling otherwise. */
calq_status calq__layer_config_validate(const calq_layer_config *l, const char *where, bool json, calq_error *err);

/* ---- the readers and the writer ------------------------------------------------------------ */

/* AMCT's JSON (§7.2) from a buffer; `filename` labels messages (NULL: "config"). */
/* calq_config_load reading the file `src` (a staged temporary file) for the config `path`,
 * which names it in messages and whose extension (.cfg or not) gives the format. */
calq_status calq__config_load_as(const calq_model *m, const char *src, const char *path, calq_config **out,
                                 calq_error *err);
calq_status calq__config_parse_json(const calq_model *m, const char *text, size_t len, const char *filename,
                                    calq_config **out, calq_error *err);
/* The simplified .cfg (§7.3) from a buffer, resolved against the model's layers. */
calq_status calq__config_parse_cfg(const calq_model *m, const char *text, size_t len, const char *filename,
                                   calq_config **out, calq_error *err);
/* Defaults for every quantizable layer of m, minus skip_layers (§1.1 create_quant_config). */
calq_status calq__config_defaults(const calq_model *m, const calq_config_opts *o, calq_config **out, calq_error *err);

/* Writes the JSON, pretty-printed as in §7.2 with 4-space indentation. The bytes depend only
 * on the struct (same config, same bytes). */
calq_status calq__config_write_json(const calq_config *c, FILE *fp, calq_error *err);
/* c as JSON, one more file of staged set s (committed with the others). */
struct calq_staged_files;
calq_status calq__config_stage(const calq_config *c, struct calq_staged_files *s, const char *json_path,
                               calq_error *err);

/* Fails with CALQ_ERR_BAD_PARAMETERS when the config enables no layer: there is nothing to
 * `task` ("calibrate", "save"); calibration and save refuse it with one message. */
calq_status calq__config_require_layers(const calq_config *c, const char *task, calq_error *err);

/* ---- what the algorithms take ---------------------------------------------------------------- */

/* The entry's activation parameters as IFMR / HFMG options, and its weight parameters as ARQ
 * options (other fields of the options keep their defaults). */
void calq__config_ifmr_opts(const calq_layer_config *l, calq_ifmr_opts *o);
void calq__config_hfmg_opts(const calq_layer_config *l, calq_hfmg_opts *o);
/* For MINMAX, PERCENTILE, KL, MSE. */
void calq__config_range_opts(const calq_layer_config *l, calq_range_opts *o);
void calq__config_arq_opts(const calq_layer_config *l, calq_arq_opts *o);

#endif
