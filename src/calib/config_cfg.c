/* AMCT's simplified config (amct-reference.md §7.3): an AMCTConfig message in protobuf text
 * format, read with src/textproto and resolved against the model into the same calq_config as
 * the JSON.
 *
 * Resolution, per quantizable layer in model order:
 *  1. a layer named in skip_layers, or whose type is in skip_layer_types, is left out (as
 *     create_quant_config leaves skipped layers out of the JSON);
 *  2. parameters start from the defaults (§7.2), with asymmetric = activation_offset;
 *  3. common_config, then the override_layer_types entry of the layer's type, then the
 *     override_layer_configs entry of the layer are applied in that order, each overriding
 *     the fields it sets (layer > type > common, §7.3; for asymmetric the chain ends at
 *     activation_offset, §3.1). The activation algorithm is the one of the highest level that
 *     names one; within one CalibrationConfig, ifmr_quantize and hfmg_quantize are a protobuf
 *     oneof, so the one written last wins and the earlier one is dropped. channel_wise from
 *     common_config only reaches the layers that have per-channel weights (Conv,
 *     ConvTranspose); set for a Gemm/MatMul/AveragePool type or layer it is an error (§8.4).
 *     The weight algorithm is likewise the oneof arq_quantize | ada_quantize (the one written
 *     last wins); ada_quantize reaches the kinds AdaRound takes (Conv, Gemm, MatMul), the others
 *     keep ARQ.
 * Layer types may be written as the ONNX or the Caffe names of the quantizable kinds
 * (graph/qkind.h: Conv, ConvTranspose, Gemm, MatMul, AveragePool; Convolution, Deconvolution,
 * InnerProduct, Pooling). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "calib/config.h"
#include "textproto/textproto.h"

/* One CalibrationConfig: which fields it sets and their values. */
typedef struct cfg_level {
    const calq_tp_node *node; /* NULL: the level is absent */
    int act_algo;             /* -1: no activation block; else calq_act_algo */
    bool has_max_p, has_min_p, has_start, has_end, has_step, has_asym, has_act_bits, has_bins;
    double max_p, min_p, start, end, step;
    bool asym;
    int act_bits, bins;
    bool has_cw, has_wts_bits;
    bool cw;
    int wts_bits;
    int wts_algo; /* -1: no weight block; else calq_wts_algo (the wts oneof, the one written last) */
    bool has_iter, has_reg, has_beta0, has_beta1, has_warm;
    calq_ada_config ada;
    bool has_dmq;
    double dmq; /* dmq_balancer.migration_strength */
} cfg_level;

typedef struct cfg_override {
    const char *key; /* layer name, or normalised op type */
    const calq_tp_node *node;
    cfg_level level;
} cfg_override;

typedef struct cfg_ctx {
    const calq_model *m;
    const char *file;
    calq_error *err;
    /* AMCTConfig */
    const calq_tp_node *seen[16]; /* singular fields already given, for "given twice" */
    int n_seen;
    int batch_num;
    bool activation_offset, do_fusion, joint_quant, has_joint_quant;
    cfg_level common;
    cfg_override *types, *layers;
    int n_types, n_layers;
    const char **skip_layers, **skip_types, **skip_fusion;
    int n_skip_layers, n_skip_types, n_skip_fusion;
} cfg_ctx;

/* Fails with "file:line:col: <message>" at node n. */
static calq_status at(const cfg_ctx *x, const calq_tp_node *n, calq_status s, const char *fmt, ...) CALQ_PRINTF(4, 5);
static calq_status at(const cfg_ctx *x, const calq_tp_node *n, calq_status s, const char *fmt, ...)
{
    char what[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return calq__fail(x->err, s, NULL, "%s:%d:%d: %s", x->file, n->line, n->col, what);
}

static calq_status need_message(const cfg_ctx *x, const calq_tp_node *n)
{
    if (n->kind == CALQ_TP_MESSAGE) return CALQ_OK;
    return at(x, n, CALQ_ERR_BAD_FORMAT, "'%s' is a message: write %s { ... }", calq__cut(n->name).s,
              calq__cut(n->name).s);
}

static calq_status unknown_field(const cfg_ctx *x, const calq_tp_node *n, const char *msg, const char *known)
{
    return at(x, n, CALQ_ERR_BAD_FORMAT, "unknown field '%s' in %s (the fields there are %s)", calq__cut(n->name).s,
              msg, known);
}

static calq_status unsupported(const cfg_ctx *x, const calq_tp_node *n, const char *what)
{
    return at(x, n, CALQ_ERR_UNSUPPORTED, "'%s' (%s) is an AMCT option calq does not implement; remove it",
              calq__cut(n->name).s, what);
}

/* Singular fields may appear once per message: `seen` holds those already read. */
static calq_status once(const cfg_ctx *x, const calq_tp_node **seen, int *n_seen, int cap, const calq_tp_node *n)
{
    for (int i = 0; i < *n_seen; i++)
        if (strcmp(seen[i]->name, n->name) == 0) {
            char first[64];
            snprintf(first, sizeof first, "%d:%d", seen[i]->line, seen[i]->col);
            return at(x, n, CALQ_ERR_BAD_FORMAT, "'%s' is given twice (first at %s); it may appear once",
                      calq__cut(n->name).s, first);
        }
    if (*n_seen < cap) seen[(*n_seen)++] = n;
    return CALQ_OK;
}

static calq_status read_double_in(const cfg_ctx *x, const calq_tp_node *n, double lo, bool lo_open, double hi,
                                  const char *range, double *out)
{
    CALQ_TRY(calq_tp_double(n, x->file, out, x->err));
    double v = *out;
    bool ok = (lo_open ? v > lo : v >= lo) && v <= hi;
    if (!ok)
        return at(x, n, CALQ_ERR_BAD_PARAMETERS, "%s is %.9g; it must be in %s (amct-reference.md §3.1)",
                  calq__cut(n->name).s, v, range);
    return CALQ_OK;
}

static calq_status read_dst_type(const cfg_ctx *x, const calq_tp_node *n, int *bits)
{
    const char *s;
    CALQ_TRY(calq_tp_string(n, x->file, &s, x->err));
    if (strcmp(s, "INT8") == 0) {
        *bits = 8;
        return CALQ_OK;
    }
    if (strcmp(s, "INT16") == 0)
        return at(x, n, CALQ_ERR_UNSUPPORTED,
                  "dst_type is INT16; calq quantizes activations to INT8 only (amct-reference.md §3.1, §11)");
    return at(x, n, CALQ_ERR_BAD_PARAMETERS, "dst_type is '%s'; it must be INT8", calq__cut(s).s);
}

static void clear_act(cfg_level *l)
{
    l->has_max_p = l->has_min_p = l->has_start = l->has_end = l->has_step = false;
    l->has_asym = l->has_act_bits = l->has_bins = false;
}

static calq_status read_ifmr(const cfg_ctx *x, const calq_tp_node *msg, cfg_level *l)
{
    CALQ_TRY(need_message(x, msg));
    clear_act(l);
    l->act_algo = CALQ_ACT_IFMR;
    const calq_tp_node *seen[8];
    int n_seen = 0;
    for (int i = 0; i < msg->n_children; i++) {
        const calq_tp_node *n = msg->children[i];
        CALQ_TRY(once(x, seen, &n_seen, 8, n));
        if (strcmp(n->name, "search_range_start") == 0) {
            CALQ_TRY(read_double_in(x, n, 0.0, true, 1e300, "(0, search_range_end)", &l->start));
            l->has_start = true;
        } else if (strcmp(n->name, "search_range_end") == 0) {
            CALQ_TRY(read_double_in(x, n, 0.0, true, 1e300, "(search_range_start, inf)", &l->end));
            l->has_end = true;
        } else if (strcmp(n->name, "search_step") == 0) {
            CALQ_TRY(read_double_in(x, n, 0.0, true, 1e300, "(0, search_range_end - search_range_start]", &l->step));
            l->has_step = true;
        } else if (strcmp(n->name, "max_percentile") == 0) {
            CALQ_TRY(read_double_in(x, n, 0.5, true, 1.0, "(0.5, 1]", &l->max_p));
            l->has_max_p = true;
        } else if (strcmp(n->name, "min_percentile") == 0) {
            CALQ_TRY(read_double_in(x, n, 0.5, true, 1.0, "(0.5, 1]", &l->min_p));
            l->has_min_p = true;
        } else if (strcmp(n->name, "asymmetric") == 0) {
            CALQ_TRY(calq_tp_bool(n, x->file, &l->asym, x->err));
            l->has_asym = true;
        } else if (strcmp(n->name, "dst_type") == 0) {
            CALQ_TRY(read_dst_type(x, n, &l->act_bits));
            l->has_act_bits = true;
        } else {
            return unknown_field(x, n, "ifmr_quantize",
                                 "search_range_start, search_range_end, search_step, max_percentile, min_percentile, "
                                 "asymmetric, dst_type");
        }
    }
    return CALQ_OK;
}

static calq_status read_hfmg(const cfg_ctx *x, const calq_tp_node *msg, cfg_level *l)
{
    CALQ_TRY(need_message(x, msg));
    clear_act(l);
    l->act_algo = CALQ_ACT_HFMG;
    const calq_tp_node *seen[4];
    int n_seen = 0;
    for (int i = 0; i < msg->n_children; i++) {
        const calq_tp_node *n = msg->children[i];
        CALQ_TRY(once(x, seen, &n_seen, 4, n));
        if (strcmp(n->name, "num_of_bins") == 0) {
            int64_t v;
            CALQ_TRY(calq_tp_int(n, x->file, &v, x->err));
            if (v != 1024 && v != 2048 && v != 4096 && v != 8192)
                return at(x, n, CALQ_ERR_BAD_PARAMETERS,
                          "num_of_bins is %lld; it must be 1024, 2048, 4096 or 8192 (amct-reference.md §5)",
                          (long long)v);
            l->bins = (int)v;
            l->has_bins = true;
        } else if (strcmp(n->name, "asymmetric") == 0) {
            CALQ_TRY(calq_tp_bool(n, x->file, &l->asym, x->err));
            l->has_asym = true;
        } else if (strcmp(n->name, "dst_type") == 0) {
            CALQ_TRY(read_dst_type(x, n, &l->act_bits));
            l->has_act_bits = true;
        } else {
            return unknown_field(x, n, "hfmg_quantize", "num_of_bins, asymmetric, dst_type");
        }
    }
    return CALQ_OK;
}

/* arq_quantize { channel_wise quant_bits } (§7.3) and ada_quantize { the same, num_iteration
 * reg_param beta_range_start beta_range_end warm_start }: §7.3 lists ada_quantize without its
 * fields, so calq spells §7.2's JSON keys, the range as two fields like ifmr_quantize's
 * search_range_start / _end. */
static calq_status read_wts_msg(const cfg_ctx *x, const calq_tp_node *msg, cfg_level *l, bool ada)
{
    CALQ_TRY(need_message(x, msg));
    const calq_tp_node *seen[8];
    int n_seen = 0;
    for (int i = 0; i < msg->n_children; i++) {
        const calq_tp_node *n = msg->children[i];
        CALQ_TRY(once(x, seen, &n_seen, 8, n));
        if (strcmp(n->name, "channel_wise") == 0) {
            CALQ_TRY(calq_tp_bool(n, x->file, &l->cw, x->err));
            l->has_cw = true;
        } else if (strcmp(n->name, "quant_bits") == 0) {
            int64_t v;
            CALQ_TRY(calq_tp_int(n, x->file, &v, x->err));
            if (v != 8)
                return at(x, n, CALQ_ERR_UNSUPPORTED, "quant_bits is %lld; calq quantizes weights to 8 bits only",
                          (long long)v);
            l->wts_bits = 8;
            l->has_wts_bits = true;
        } else if (ada && strcmp(n->name, "num_iteration") == 0) {
            int64_t v;
            CALQ_TRY(calq_tp_int(n, x->file, &v, x->err));
            if (v < 1 || v > 10000000)
                return at(x, n, CALQ_ERR_BAD_PARAMETERS, "num_iteration is %lld; it must be in [1, 10000000]",
                          (long long)v);
            l->ada.num_iteration = (int)v;
            l->has_iter = true;
        } else if (ada && strcmp(n->name, "reg_param") == 0) {
            CALQ_TRY(calq_tp_double(n, x->file, &l->ada.reg_param, x->err));
            l->has_reg = true;
        } else if (ada && strcmp(n->name, "beta_range_start") == 0) {
            CALQ_TRY(calq_tp_double(n, x->file, &l->ada.beta_range[0], x->err));
            l->has_beta0 = true;
        } else if (ada && strcmp(n->name, "beta_range_end") == 0) {
            CALQ_TRY(calq_tp_double(n, x->file, &l->ada.beta_range[1], x->err));
            l->has_beta1 = true;
        } else if (ada && strcmp(n->name, "warm_start") == 0) {
            CALQ_TRY(calq_tp_double(n, x->file, &l->ada.warm_start, x->err));
            l->has_warm = true;
        } else {
            return unknown_field(x, n, ada ? "ada_quantize" : "arq_quantize",
                                 ada ? "channel_wise, quant_bits, num_iteration, reg_param, beta_range_start, "
                                       "beta_range_end, warm_start"
                                     : "channel_wise, quant_bits");
        }
    }
    return CALQ_OK;
}

/* dmq_balancer { migration_strength: [0.5] } (§7.3); the range is AMCT's JSON one (§7.2). */
static calq_status read_dmq(const cfg_ctx *x, const calq_tp_node *msg, cfg_level *l)
{
    CALQ_TRY(need_message(x, msg));
    l->has_dmq = true;
    l->dmq = CALQ_DMQ_DEFAULT;
    const calq_tp_node *seen[1];
    int n_seen = 0;
    for (int i = 0; i < msg->n_children; i++) {
        const calq_tp_node *n = msg->children[i];
        if (strcmp(n->name, "migration_strength") != 0)
            return unknown_field(x, n, "dmq_balancer", "migration_strength");
        CALQ_TRY(once(x, seen, &n_seen, 1, n));
        CALQ_TRY(calq_tp_double(n, x->file, &l->dmq, x->err));
        if (!(l->dmq >= CALQ_DMQ_MIN && l->dmq <= CALQ_DMQ_MAX))
            return at(x, n, CALQ_ERR_BAD_PARAMETERS,
                      "migration_strength is %.9g; it must be a number in [%g, %g] (amct-reference.md §7.2, §7.3)",
                      l->dmq, CALQ_DMQ_MIN, CALQ_DMQ_MAX);
    }
    return CALQ_OK;
}

/* A CalibrationConfig message (§7.3). */
static calq_status read_level(const cfg_ctx *x, const calq_tp_node *msg, cfg_level *l)
{
    CALQ_TRY(need_message(x, msg));
    memset(l, 0, sizeof *l);
    l->node = msg;
    l->act_algo = -1;
    l->wts_algo = -1;
    const calq_tp_node *seen[8];
    int n_seen = 0;
    for (int i = 0; i < msg->n_children; i++) {
        const calq_tp_node *n = msg->children[i];
        if (strcmp(n->name, "ifmr_quantize") == 0 || strcmp(n->name, "hfmg_quantize") == 0) {
            /* The acts oneof: the member written last replaces an earlier one (§7.3); the same
             * member twice is a slip. */
            for (int k = 0; k < n_seen; k++)
                if (strcmp(seen[k]->name, n->name) == 0) return once(x, seen, &n_seen, 8, n);
            if (n_seen < 8) seen[n_seen++] = n;
            CALQ_TRY(strcmp(n->name, "ifmr_quantize") == 0 ? read_ifmr(x, n, l) : read_hfmg(x, n, l));
        } else if (strcmp(n->name, "arq_quantize") == 0 || strcmp(n->name, "ada_quantize") == 0) {
            /* The wts oneof: the member written last wins (§7.3), dropping what an earlier one set;
             * the same member twice is a slip. */
            for (int k = 0; k < n_seen; k++)
                if (strcmp(seen[k]->name, n->name) == 0) return once(x, seen, &n_seen, 8, n);
            if (n_seen < 8) seen[n_seen++] = n;
            l->has_cw = l->has_wts_bits = l->has_iter = l->has_reg = l->has_beta0 = l->has_beta1 = l->has_warm = false;
            bool ada = strcmp(n->name, "ada_quantize") == 0;
            l->wts_algo = ada ? CALQ_WTS_ADA : CALQ_WTS_ARQ;
            CALQ_TRY(read_wts_msg(x, n, l, ada));
        } else if (strcmp(n->name, "dmq_balancer") == 0) {
            CALQ_TRY(once(x, seen, &n_seen, 8, n));
            CALQ_TRY(read_dmq(x, n, l));
        } else {
            return unknown_field(x, n, "a calibration config",
                                 "arq_quantize, ada_quantize, ifmr_quantize, hfmg_quantize, dmq_balancer");
        }
    }
    return CALQ_OK;
}

static void apply_level(calq_layer_config *l, const cfg_level *v)
{
    if (!v->node) return;
    if (v->act_algo >= 0) l->act.algo = (calq_act_algo)v->act_algo;
    if (v->has_max_p) l->act.max_percentile = v->max_p;
    if (v->has_min_p) l->act.min_percentile = v->min_p;
    if (v->has_start) l->act.search_range[0] = v->start;
    if (v->has_end) l->act.search_range[1] = v->end;
    if (v->has_step) l->act.search_step = v->step;
    if (v->has_asym) l->act.asymmetric = v->asym;
    if (v->has_act_bits) l->act.num_bits = v->act_bits;
    if (v->has_bins) l->act.num_of_bins = v->bins;
    if (v->has_cw) l->wts.channel_wise = v->cw;
    if (v->has_wts_bits) l->wts.num_bits = v->wts_bits;
    /* a level naming ada_quantize speaks for the kinds that can take it (calq__ada_kind_ok); the
     * others (ConvTranspose, AveragePool) keep ARQ */
    if (v->wts_algo >= 0 && (v->wts_algo == CALQ_WTS_ARQ || calq__ada_kind_ok(l->kind)))
        l->wts.algo = (calq_wts_algo)v->wts_algo;
    if (v->has_iter) l->wts.ada.num_iteration = v->ada.num_iteration;
    if (v->has_reg) l->wts.ada.reg_param = v->ada.reg_param;
    if (v->has_beta0) l->wts.ada.beta_range[0] = v->ada.beta_range[0];
    if (v->has_beta1) l->wts.ada.beta_range[1] = v->ada.beta_range[1];
    if (v->has_warm) l->wts.ada.warm_start = v->ada.warm_start;
    if (v->has_dmq) l->dmq = v->dmq;
}

/* ---- layer types -------------------------------------------------------------------------- */

/* calq's op type for a layer_type as written (an ONNX or a Caffe name of a quantizable kind,
 * §7.3, §8.1), or NULL when it is not a quantizable type. */
static const char *normalise_type(const char *t)
{
    const calq_qkind *k = calq__qkind_by_onnx(t);
    if (!k) k = calq__qkind_by_caffe(t);
    return k && !k->tensor_only ? k->onnx : NULL; /* tensor-only kinds are not layers of the .cfg (§7.3) */
}

static calq_status read_type(const cfg_ctx *x, const calq_tp_node *n, const char **out)
{
    const char *s;
    CALQ_TRY(calq_tp_string(n, x->file, &s, x->err));
    *out = normalise_type(s);
    char onnx[256], caffe[256];
    if (!*out)
        return at(x, n, CALQ_ERR_BAD_PARAMETERS,
                  "'%s' is not a quantizable layer type (quantizable: %s; Caffe spellings %s; amct-reference.md §8.1)",
                  calq__cut(s).s, calq__qkind_names(CALQ_QKIND_NAMES_ONNX, onnx, sizeof onnx),
                  calq__qkind_names(CALQ_QKIND_NAMES_CAFFE, caffe, sizeof caffe));
    return CALQ_OK;
}

/* ---- AMCTConfig --------------------------------------------------------------------------- */

static calq_status push_name(const cfg_ctx *x, const char ***list, int *n, const char *s)
{
    const char **grown = realloc(*list, ((size_t)*n + 1) * sizeof *grown);
    if (!grown) return calq__fail(x->err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory reading %s", x->file);
    *list = grown;
    grown[(*n)++] = s;
    return CALQ_OK;
}

static calq_status read_override(cfg_ctx *x, const calq_tp_node *msg, bool by_type)
{
    CALQ_TRY(need_message(x, msg));
    const char *key_name = by_type ? "layer_type" : "layer_name";
    const calq_tp_node *key = NULL, *cc = NULL;
    for (int i = 0; i < msg->n_children; i++) {
        const calq_tp_node *n = msg->children[i];
        if (strcmp(n->name, key_name) == 0 || strcmp(n->name, "calibration_config") == 0) {
            const calq_tp_node **slot = strcmp(n->name, key_name) == 0 ? &key : &cc;
            if (*slot) {
                char first[64];
                snprintf(first, sizeof first, "%d:%d", (*slot)->line, (*slot)->col);
                return at(x, n, CALQ_ERR_BAD_FORMAT, "'%s' is given twice (first at %s); it may appear once",
                          calq__cut(n->name).s, first);
            }
            *slot = n;
        } else {
            return unknown_field(x, n, msg->name,
                                 by_type ? "layer_type, calibration_config" : "layer_name, calibration_config");
        }
    }
    if (!key || !cc)
        return at(x, msg, CALQ_ERR_BAD_FORMAT, "'%s' needs both %s and calibration_config (%s is missing)", msg->name,
                  key_name, !key ? key_name : "calibration_config");
    cfg_override o = {0};
    o.node = msg;
    if (by_type) {
        CALQ_TRY(read_type(x, key, &o.key));
    } else {
        CALQ_TRY(calq_tp_string(key, x->file, &o.key, x->err));
        char where[256];
        snprintf(where, sizeof where, "%s:%d:%d: override_layer_configs", x->file, key->line, key->col);
        int node;
        CALQ_TRY(calq__config_check_layer(x->m, o.key, where, &node, x->err));
    }
    cfg_override *list = by_type ? x->types : x->layers;
    int n = by_type ? x->n_types : x->n_layers;
    for (int i = 0; i < n; i++)
        if (strcmp(list[i].key, o.key) == 0) {
            char first[64];
            snprintf(first, sizeof first, "%d:%d", list[i].node->line, list[i].node->col);
            return at(x, msg, CALQ_ERR_BAD_PARAMETERS, "%s is overridden twice (first at %s)", calq__cut(o.key).s,
                      first);
        }
    CALQ_TRY(read_level(x, cc, &o.level));
    cfg_override *grown = realloc(list, ((size_t)n + 1) * sizeof *grown);
    if (!grown) return calq__fail(x->err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory reading %s", x->file);
    grown[n] = o;
    if (by_type) {
        x->types = grown;
        x->n_types++;
    } else {
        x->layers = grown;
        x->n_layers++;
    }
    return CALQ_OK;
}

static calq_status read_amct_config(cfg_ctx *x, const calq_tp_node *root)
{
    for (int i = 0; i < root->n_children; i++) {
        const calq_tp_node *n = root->children[i];
        const char *f = n->name;
        bool repeated = strcmp(f, "skip_layers") == 0 || strcmp(f, "skip_layer_types") == 0 ||
                        strcmp(f, "skip_fusion_layers") == 0 || strcmp(f, "override_layer_types") == 0 ||
                        strcmp(f, "override_layer_configs") == 0;
        if (!repeated) CALQ_TRY(once(x, x->seen, &x->n_seen, 16, n));
        if (strcmp(f, "batch_num") == 0) {
            int64_t v;
            CALQ_TRY(calq_tp_int(n, x->file, &v, x->err));
            if (v <= 0 || v > CALQ__BATCH_NUM_MAX)
                return at(x, n, CALQ_ERR_BAD_PARAMETERS,
                          "batch_num is %lld; it must be in [1, %d] (> 0, amct-reference.md §7.2)", (long long)v,
                          CALQ__BATCH_NUM_MAX);
            x->batch_num = (int)v;
        } else if (strcmp(f, "activation_offset") == 0) {
            CALQ_TRY(calq_tp_bool(n, x->file, &x->activation_offset, x->err));
        } else if (strcmp(f, "do_fusion") == 0) {
            CALQ_TRY(calq_tp_bool(n, x->file, &x->do_fusion, x->err));
        } else if (strcmp(f, "joint_quant") == 0) {
            CALQ_TRY(calq_tp_bool(n, x->file, &x->joint_quant, x->err));
            x->has_joint_quant = true;
        } else if (strcmp(f, "skip_layers") == 0 || strcmp(f, "skip_fusion_layers") == 0) {
            const char *s;
            CALQ_TRY(calq_tp_string(n, x->file, &s, x->err));
            char where[256];
            snprintf(where, sizeof where, "%s:%d:%d: %s", x->file, n->line, n->col, f);
            if (strcmp(f, "skip_layers") == 0) {
                int node;
                CALQ_TRY(calq__config_check_layer(x->m, s, where, &node, x->err));
                CALQ_TRY(push_name(x, &x->skip_layers, &x->n_skip_layers, s));
            } else {
                if (calq__model_find_node(x->m, s) < 0)
                    return calq__fail(x->err, CALQ_ERR_BAD_PARAMETERS, s, "%s: the model has no layer '%s'", where,
                                      calq__cut(s).s);
                for (int k = 0; k < x->n_skip_fusion; k++)
                    if (strcmp(x->skip_fusion[k], s) == 0)
                        return at(x, n, CALQ_ERR_BAD_PARAMETERS, "skip_fusion_layers lists '%s' twice", calq__cut(s).s);
                CALQ_TRY(push_name(x, &x->skip_fusion, &x->n_skip_fusion, s));
            }
        } else if (strcmp(f, "skip_layer_types") == 0) {
            const char *t;
            CALQ_TRY(read_type(x, n, &t));
            CALQ_TRY(push_name(x, &x->skip_types, &x->n_skip_types, t));
        } else if (strcmp(f, "common_config") == 0) {
            CALQ_TRY(read_level(x, n, &x->common));
        } else if (strcmp(f, "override_layer_types") == 0) {
            CALQ_TRY(read_override(x, n, true));
        } else if (strcmp(f, "override_layer_configs") == 0) {
            CALQ_TRY(read_override(x, n, false));
        } else if (strcmp(f, "fakequant_precision_mode") == 0) {
            return unsupported(x, n, "the fake-quant model's deq_scale precision");
        } else {
            return unknown_field(x, n, "the AMCT config",
                                 "batch_num, activation_offset, skip_layers, skip_layer_types, common_config, "
                                 "override_layer_types, override_layer_configs, do_fusion, skip_fusion_layers, "
                                 "joint_quant");
        }
    }
    return CALQ_OK;
}

static bool listed(const char *const *list, int n, const char *s)
{
    for (int i = 0; i < n; i++)
        if (strcmp(list[i], s) == 0) return true;
    return false;
}

static calq_status build(cfg_ctx *x, calq_config *c)
{
    c->batch_num = x->batch_num;
    c->activation_offset = x->activation_offset;
    c->do_fusion = x->do_fusion;
    c->joint_quant = x->joint_quant;
    c->write_joint_quant = x->has_joint_quant || calq__model_is_onnx(x->m);
    if (x->n_skip_fusion) {
        c->skip_fusion_layers = calloc((size_t)x->n_skip_fusion, sizeof *c->skip_fusion_layers);
        if (!c->skip_fusion_layers)
            return calq__fail(x->err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory reading %s", x->file);
        for (int i = 0; i < x->n_skip_fusion; i++) {
            c->skip_fusion_layers[i] = strdup(x->skip_fusion[i]);
            if (!c->skip_fusion_layers[i])
                return calq__fail(x->err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory reading %s", x->file);
            c->n_skip_fusion_layers++;
        }
    }
    for (int i = 0; i < x->n_layers; i++)
        if (listed(x->skip_layers, x->n_skip_layers, x->layers[i].key))
            return at(x, x->layers[i].node, CALQ_ERR_BAD_PARAMETERS,
                      "layer '%s' has an override_layer_configs entry but is also in skip_layers; remove one of "
                      "the two",
                      x->layers[i].key);
    int n = calq_model_num_nodes(x->m);
    for (int i = 0; i < n; i++) {
        calq_node_info ni;
        if (calq_model_node_info(x->m, i, &ni) != CALQ_OK || !ni.quantizable) continue;
        if (listed(x->skip_layers, x->n_skip_layers, ni.name) || listed(x->skip_types, x->n_skip_types, ni.op_type))
            continue;
        if (calq__model_find_node(x->m, ni.name) != i)
            return calq__fail(x->err, CALQ_ERR_BAD_PARAMETERS, ni.name,
                              "the model has several layers named '%s'; AMCT's config keys layers by name, so "
                              "quantizable layers need unique names (amct-reference.md §7.2)",
                              ni.name);
        calq_layer_config *l = calq__config_add_layer(c, ni.name, calq__model_qkind(x->m, i), i, x->err);
        if (!l) return x->err ? x->err->status : CALQ_ERR_OUT_OF_MEMORY;
        apply_level(l, &x->common);
        /* common_config speaks for every layer, so its channel_wise applies where channel-wise
         * weights exist (the kinds that allow them, §8.1); asked of a Gemm by name or type, it is
         * an error (§8.4). */
        if (!l->kind->channel_wise) l->wts.channel_wise = false;
        /* and its dmq_balancer where balancing applies (a constant weight, qkind.balance) */
        if (!l->kind->balance) l->dmq = 0.0;
        for (int k = 0; k < x->n_types; k++)
            if (strcmp(x->types[k].key, ni.op_type) == 0) apply_level(l, &x->types[k].level);
        /* likewise common_config's and a MatMul type's asymmetric: MatMul with two variable inputs
         * is symmetric only (§8.1); asked of the layer by name, it is an error */
        if (l->kind->act_symmetric) l->act.asymmetric = false;
        for (int k = 0; k < x->n_layers; k++)
            if (strcmp(x->layers[k].key, ni.name) == 0) apply_level(l, &x->layers[k].level);
        char where[CALQ_ERROR_NAME_MAX + 512];
        snprintf(where, sizeof where,
                 "%s: layer '%s' (after common_config, override_layer_types and "
                 "override_layer_configs are applied)",
                 x->file, calq__cut(ni.name).s);
        CALQ_TRY(calq__layer_config_validate(l, where, false, x->err));
    }
    return CALQ_OK;
}

calq_status calq__config_parse_cfg(const calq_model *m, const char *text, size_t len, const char *filename,
                                   calq_config **out, calq_error *err)
{
    *out = NULL;
    calq_tp_node *root = NULL;
    calq__cut_buf file_cut = calq__cut(filename ? filename : "config.cfg"); /* labels every message */
    const char *file = file_cut.s;
    CALQ_TRY(calq_tp_parse(text, len, file, &root, err));
    cfg_ctx x;
    memset(&x, 0, sizeof x);
    x.m = m;
    x.file = file;
    x.err = err;
    x.batch_num = 1;
    x.activation_offset = true;
    x.do_fusion = true;
    x.common.act_algo = -1;
    calq_config *c = calq__config_new();
    calq_status st = c ? CALQ_OK : calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory reading %s", file);
    if (st == CALQ_OK) st = read_amct_config(&x, root);
    if (st == CALQ_OK) st = build(&x, c);
    free(x.types);
    free(x.layers);
    free(x.skip_layers);
    free(x.skip_types);
    free(x.skip_fusion);
    calq_tp_free(root);
    if (st != CALQ_OK) {
        calq_config_free(c);
        return st;
    }
    *out = c;
    return CALQ_OK;
}
