/* The config object: lifecycle, public accessors, model lookups and the parameter checks both
 * readers share (amct-reference.md §3.1, §5, §7.2, §8.4). */
#include "calib/config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/file.h"
#include "frontend/model.h"
#include "graph/quantizable.h"
#include "quant/quant.h"

/* ---- lifecycle ---------------------------------------------------------------------------- */

calq_config *calq__config_new(void)
{
    calq_config *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->version = 1;
    c->batch_num = 1;
    c->activation_offset = true;
    c->do_fusion = true;
    return c;
}

void calq_config_free(calq_config *c)
{
    if (!c) return;
    for (int i = 0; i < c->n_skip_fusion_layers; i++) free(c->skip_fusion_layers[i]);
    free(c->skip_fusion_layers);
    for (int i = 0; i < c->n_layers; i++) {
        free(c->layers[i].name);
        free(c->layers[i].op_type);
    }
    free(c->layers);
    for (int i = 0; i < c->n_tensors; i++) {
        free(c->tensors[i].name);
        free(c->tensors[i].op_type);
    }
    free(c->tensors);
    free(c);
}

calq_config *calq__config_clone(const calq_config *c)
{
    calq_config *d = calq__config_new();
    if (!d) return NULL;
    *d = *c;
    d->skip_fusion_layers = NULL;
    d->n_skip_fusion_layers = 0;
    d->layers = NULL;
    d->n_layers = 0;
    d->tensors = NULL;
    d->n_tensors = 0;
    if (c->n_skip_fusion_layers > 0) {
        d->skip_fusion_layers = calloc((size_t)c->n_skip_fusion_layers, sizeof *d->skip_fusion_layers);
        if (!d->skip_fusion_layers) goto oom;
        for (; d->n_skip_fusion_layers < c->n_skip_fusion_layers; d->n_skip_fusion_layers++) {
            d->skip_fusion_layers[d->n_skip_fusion_layers] = strdup(c->skip_fusion_layers[d->n_skip_fusion_layers]);
            if (!d->skip_fusion_layers[d->n_skip_fusion_layers]) goto oom;
        }
    }
    if (c->n_layers > 0) {
        d->layers = calloc((size_t)c->n_layers, sizeof *d->layers);
        if (!d->layers) goto oom;
        for (; d->n_layers < c->n_layers; d->n_layers++) {
            calq_layer_config *l = &d->layers[d->n_layers];
            *l = c->layers[d->n_layers];
            l->name = strdup(l->name);
            l->op_type = strdup(l->op_type);
            if (!l->name || !l->op_type) {
                d->n_layers++; /* so calq_config_free releases the half-copied entry */
                goto oom;
            }
        }
    }
    if (c->n_tensors > 0) {
        d->tensors = calloc((size_t)c->n_tensors, sizeof *d->tensors);
        if (!d->tensors) goto oom;
        for (; d->n_tensors < c->n_tensors; d->n_tensors++) {
            calq_layer_config *l = &d->tensors[d->n_tensors];
            *l = c->tensors[d->n_tensors];
            l->name = strdup(l->name);
            l->op_type = strdup(l->op_type);
            if (!l->name || !l->op_type) {
                d->n_tensors++;
                goto oom;
            }
        }
    }
    return d;
oom:
    calq_config_free(d);
    return NULL;
}

void calq__layer_config_defaults(calq_layer_config *l, const calq_qkind *k, bool activation_offset)
{
    l->quant_enable = true;
    l->act.algo = CALQ_ACT_IFMR;
    l->act.num_bits = 8;
    l->act.max_percentile = 0.999999;
    l->act.min_percentile = 0.999999;
    l->act.search_range[0] = 0.7;
    l->act.search_range[1] = 1.3;
    l->act.search_step = 0.01;
    /* §8.1: MatMul with two variable inputs is quantized symmetric whatever activation_offset says */
    l->act.asymmetric = activation_offset && !k->act_symmetric;
    l->act.num_of_bins = 4096;
    /* ARQ is channel-wise where the kind allows it (§8.1 CHANNEL_WISE_ONNX_TYPES, §11). */
    l->kind = k;
    l->has_weights = k->weights == CALQ_QKIND_WEIGHTS_CONST;
    l->wts.num_bits = 8;
    l->wts.channel_wise = k->channel_wise;
    l->wts.algo = CALQ_WTS_ARQ;
    l->wts.ada.num_iteration = 10000; /* ada_quantize's defaults (§7.2) */
    l->wts.ada.reg_param = 0.01;
    l->wts.ada.beta_range[0] = 20.0;
    l->wts.ada.beta_range[1] = 2.0;
    l->wts.ada.warm_start = 0.2;
}

bool calq__ada_kind_ok(const calq_qkind *k)
{
    return k && (k->id == CALQ_QKIND_CONV || k->id == CALQ_QKIND_GEMM || k->id == CALQ_QKIND_MATMUL);
}

/* Appends an entry for `name` (kind k, node) to *arr, with the kind's defaults (§7.2); NULL
 * with err set when out of memory. The strings are the config's. */
static calq_layer_config *append_entry(calq_layer_config **arr, int *n, const char *name, const calq_qkind *k, int node,
                                       int activation_offset, calq_error *err)
{
    calq_layer_config *grown = realloc(*arr, ((size_t)*n + 1) * sizeof *grown);
    if (!grown) {
        calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, name, "out of memory building the config");
        return NULL;
    }
    *arr = grown;
    calq_layer_config *l = &grown[*n];
    memset(l, 0, sizeof *l);
    l->name = strdup(name);
    l->op_type = strdup(k->onnx);
    if (!l->name || !l->op_type) {
        free(l->name);
        free(l->op_type);
        calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, name, "out of memory building the config");
        return NULL;
    }
    l->node = node;
    calq__layer_config_defaults(l, k, activation_offset);
    (*n)++;
    return l;
}

calq_layer_config *calq__config_add_layer(calq_config *c, const char *name, const calq_qkind *k, int node,
                                          calq_error *err)
{
    if (!k) {
        calq__fail(err, CALQ_ERR_INTERNAL, name, "config: layer '%s' is not of a quantizable kind", calq__cut(name).s);
        return NULL;
    }
    return append_entry(&c->layers, &c->n_layers, name, k, node, c->activation_offset, err);
}

calq_layer_config *calq__config_add_tensor(calq_config *c, const char *name, int input, const calq_qkind *k, int node,
                                           calq_error *err)
{
    calq_layer_config *l = append_entry(&c->tensors, &c->n_tensors, name, k, node, c->activation_offset, err);
    if (!l) return NULL;
    l->tensor = true;
    l->input = input;
    return l;
}

calq_layer_config *calq__config_find_tensor(const calq_config *c, const char *name, int input)
{
    for (int i = 0; i < c->n_tensors; i++)
        if (c->tensors[i].input == input && strcmp(c->tensors[i].name, name) == 0) return &c->tensors[i];
    return NULL;
}

static int by_node(const void *a, const void *b)
{
    const calq_layer_config *x = a, *y = b;
    if (x->node != y->node) return (x->node > y->node) - (x->node < y->node);
    return (x->input > y->input) - (x->input < y->input);
}

void calq__config_sort_layers(calq_config *c)
{
    if (c->n_layers > 1) qsort(c->layers, (size_t)c->n_layers, sizeof *c->layers, by_node);
    if (c->n_tensors > 1) qsort(c->tensors, (size_t)c->n_tensors, sizeof *c->tensors, by_node);
}

bool calq__config_index(const calq_config *c, calq_strmap *map)
{
    if (!calq__strmap_init(map, (size_t)c->n_layers)) return false;
    for (int i = c->n_layers - 1; i >= 0; i--) /* the first of a name wins, as in calq__config_find */
        if (!calq__strmap_put(map, c->layers[i].name, i)) return false;
    return true;
}

calq_layer_config *calq__config_find(const calq_config *c, const char *name)
{
    for (int i = 0; i < c->n_layers; i++)
        if (strcmp(c->layers[i].name, name) == 0) return &c->layers[i];
    return NULL;
}

/* ---- model lookups ------------------------------------------------------------------------ */

int calq__model_find_node(const calq_model *m, const char *name)
{
    if (m->node_index.cap) return calq__strmap_get(&m->node_index, name); /* hashed at load (frontend/model.h) */
    /* a model made on the stack around another graph (compare, act_algo auto) has no index */
    const calq_graph *g = m->g;
    for (int i = 0; i < g->n_nodes; i++)
        if (strcmp(g->nodes[i].name, name) == 0) return i;
    return -1;
}

calq_status calq__config_check_layer(const calq_model *m, const char *name, const char *where, int *node,
                                     calq_error *err)
{
    int i = calq__model_find_node(m, name);
    if (i < 0)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, name,
                          "%s: the model has no layer '%s' (layer names are listed by 'calq inspect')", where,
                          calq__cut(name).s);
    calq_node_info ni;
    calq_model_node_info(m, i, &ni);
    if (!ni.quantizable) {
        char kinds[256];
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, name,
                          "%s: layer '%s' is not a quantizable layer of the model (it is a %s; quantizable are %s, "
                          "with the conditions of amct-reference.md §8.1)",
                          where, calq__cut(name).s, ni.op_type,
                          calq__qkind_names(CALQ_QKIND_NAMES_ONNX, kinds, sizeof kinds));
    }
    *node = i;
    return CALQ_OK;
}

calq_status calq__config_check_tensor(const calq_model *m, const char *name, int input, const char *where, int *node,
                                      const calq_qkind **kind, calq_error *err)
{
    int i = calq__model_find_node(m, name);
    if (i < 0)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, name,
                          "%s: tensor_quantize: the model has no layer '%s' (layer names are listed by 'calq inspect')",
                          where, name);
    const calq_node *n = &m->g->nodes[i];
    const calq_qkind *k = calq__qkind_of_input(m->g, i, input);
    char kinds[256];
    if (input < 0 || input >= n->n_inputs)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, name,
                          "%s: tensor_quantize: input_index %d of layer '%s': a %s with %d input%s", where, input, name,
                          n->op_type, n->n_inputs, n->n_inputs == 1 ? "" : "s");
    if (k && !k->tensor_only)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, name,
                          "%s: tensor_quantize: input %d of layer '%s' is quantized with its layer (a %s with two "
                          "variable inputs, amct-reference.md §8.1): configure the layer's own entry instead",
                          where, input, name, n->op_type);
    if (!k)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, name,
                          "%s: tensor_quantize: input %d of layer '%s' (a %s) cannot be quantized on its own: "
                          "tensor_quantize takes a variable float input of %s (amct-reference.md §7.2)",
                          where, input, name, n->op_type,
                          calq__qkind_names(CALQ_QKIND_NAMES_TENSOR, kinds, sizeof kinds));
    *node = i;
    *kind = k;
    return CALQ_OK;
}

const calq_qkind *calq__model_qkind(const calq_model *m, int i)
{
    return i >= 0 && i < m->g->n_nodes ? calq__qkind_of_node(m->g, i) : NULL;
}

bool calq__model_is_onnx(const calq_model *m)
{
    return m->format == CALQ_FORMAT_ONNX;
}

/* ---- checks ------------------------------------------------------------------------------- */

calq_status calq__layer_config_validate(const calq_layer_config *l, const char *where, bool json, calq_error *err)
{
    const calq_act_config *a = &l->act;
    const char *act =
        json ? "activation_quant_params." : (a->algo == CALQ_ACT_HFMG ? "hfmg_quantize." : "ifmr_quantize.");
    if (a->num_bits != 8)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, l->name,
                          "%s: %s%s is %d; calq quantizes activations to 8 bits only (INT8, amct-reference.md §3.1)",
                          where, act, json ? "num_bits" : "dst_type", a->num_bits);
    const calq__act_algo_info *info = calq__act_algo(a->algo);
    if (a->algo == CALQ_ACT_PERCENTILE && (!(a->max_percentile > 0.5 && a->max_percentile <= 1.0) ||
                                           !(a->min_percentile > 0.5 && a->min_percentile <= 1.0)))
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, l->name,
                          "%s: %smax_percentile %.9g and min_percentile %.9g must be in (0.5, 1] (act_algo "
                          "\"percentile\")",
                          where, act, a->max_percentile, a->min_percentile);
    if (a->algo == CALQ_ACT_IFMR) {
        /* Written as !(in range) so NaN fails too. */
        if (!(a->max_percentile > 0.5 && a->max_percentile <= 1.0))
            return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, l->name,
                              "%s: %smax_percentile is %.9g; it must be in (0.5, 1] (amct-reference.md §3.1)", where,
                              act, a->max_percentile);
        if (!(a->min_percentile > 0.5 && a->min_percentile <= 1.0))
            return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, l->name,
                              "%s: %smin_percentile is %.9g; it must be in (0.5, 1] (amct-reference.md §3.1)", where,
                              act, a->min_percentile);
        double lo = a->search_range[0], hi = a->search_range[1];
        const char *range = json ? "search_range" : "search_range_start/search_range_end";
        if (!(lo > 0.0 && lo < hi && isfinite(hi)))
            return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, l->name,
                              "%s: %s%s is [%.9g, %.9g]; it must satisfy 0 < start < end (amct-reference.md §3.1)",
                              where, act, range, lo, hi);
        if (!(a->search_step > 0.0 && a->search_step <= hi - lo))
            return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, l->name,
                              "%s: %ssearch_step is %.9g; it must be in (0, end - start] = (0, %.9g] for the search "
                              "range [%.9g, %.9g] (amct-reference.md §3.1)",
                              where, act, a->search_step, hi - lo, lo, hi);
        /* The algorithm takes float32 parameters and bounds the candidate grid (§3.4): check
         * what it will see, so a config that loads never fails later on its parameters. */
        calq_ifmr_opts io;
        unsigned n_cand;
        calq__config_ifmr_opts(l, &io);
        if (calq__ifmr_check_opts(&io, l->name, &n_cand, err) != CALQ_OK) return calq__prefix(err, "%s", where);
    } else if (info->keys & CALQ_ACT_KEY_BINS) {
        int b = a->num_of_bins;
        if (b != 1024 && b != 2048 && b != 4096 && b != 8192)
            return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, l->name,
                              "%s: %snum_of_bins is %d; it must be 1024, 2048, 4096 or 8192 (amct-reference.md §5)",
                              where, act, b);
    }
    if (a->asymmetric && l->kind->act_symmetric)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, l->name,
                          "%s: %sasymmetric is true but layer '%s' is a %s with two variable inputs, which AMCT "
                          "quantizes as INT8 symmetric only (amct-reference.md §8.1); set it to false",
                          where, act, l->name, l->op_type);
    const char *dmq = json ? "dmq_balancer_param" : "dmq_balancer.migration_strength";
    /* Written as !(in range) so NaN fails too. */
    if (l->dmq != 0.0 && !(l->dmq >= CALQ_DMQ_MIN && l->dmq <= CALQ_DMQ_MAX))
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, l->name,
                          "%s: %s is %.9g; it must be a number in [%g, %g] (amct-reference.md §7.2)", where, dmq,
                          l->dmq, CALQ_DMQ_MIN, CALQ_DMQ_MAX);
    if (l->dmq != 0.0 && !l->kind->balance)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, l->name,
                          "%s: %s is set but layer '%s' is a%s %s: DMQ balancing moves range between an activation "
                          "and a constant weight, so it applies to Conv, ConvTranspose, Gemm and MatMul with a "
                          "constant weight only; remove it from this layer",
                          where, dmq, l->name, l->kind->weights == CALQ_QKIND_WEIGHTS_CONST ? "" : "n", l->op_type);
    const char *wts = json ? "weight_quant_params." : "arq_quantize.";
    if (!l->has_weights && l->wts.channel_wise)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, l->name,
                          "%s: %schannel_wise is true but layer '%s' is an %s, which has no weights: per-channel "
                          "quantization does not apply to pooling (amct-reference.md §8.4); set it to false",
                          where, wts, l->name, l->op_type);
    if (l->has_weights) {
        if (l->wts.num_bits != 8)
            return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, l->name,
                              "%s: %s%s is %d; calq quantizes weights to 8 bits only (INT8)", where, wts,
                              json ? "num_bits" : "quant_bits", l->wts.num_bits);
        const calq_ada_config *d = &l->wts.ada;
        const char *ada = json ? "weight_quant_params." : "ada_quantize.";
        if (l->wts.algo == CALQ_WTS_ADA && !calq__ada_kind_ok(l->kind))
            return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, l->name,
                              "%s: %swts_algo is \"ada_quantize\" but layer '%s' is a %s: calq learns the rounding of "
                              "Conv, Gemm and MatMul weights only; use \"arq_quantize\" for it",
                              where, wts, l->name, l->op_type);
        if (l->wts.algo == CALQ_WTS_ADA && (d->num_iteration < 1 || d->num_iteration > 10000000))
            return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, l->name,
                              "%s: %snum_iteration is %d; it must be in [1, 10000000] (AMCT's default 10000, §7.2)",
                              where, ada, d->num_iteration);
        if (l->wts.algo == CALQ_WTS_ADA && !(d->reg_param >= 0.0 && d->reg_param <= 1e6))
            return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, l->name,
                              "%s: %sreg_param is %.9g; it must be in [0, 1e6] (AMCT's default 0.01, §7.2)", where, ada,
                              d->reg_param);
        for (int i = 0; l->wts.algo == CALQ_WTS_ADA && i < 2; i++)
            if (!(d->beta_range[i] > 0.0 && d->beta_range[i] <= 1000.0))
                return calq__fail(
                    err, CALQ_ERR_BAD_PARAMETERS, l->name,
                    "%s: %s%s is %.9g; it must be in (0, 1000] (AMCT's beta_range [20, 2], §7.2)", where, ada,
                    json ? (i ? "beta_range[1]" : "beta_range[0]") : (i ? "beta_range_end" : "beta_range_start"),
                    d->beta_range[i]);
        if (l->wts.algo == CALQ_WTS_ADA && !(d->warm_start >= 0.0 && d->warm_start < 1.0))
            return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, l->name,
                              "%s: %swarm_start is %.9g; it must be in [0, 1) (AMCT's default 0.2, §7.2)", where, ada,
                              d->warm_start);
        char kinds[256];
        if (l->wts.channel_wise && !l->kind->channel_wise)
            return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, l->name,
                              "%s: %schannel_wise is true but layer '%s' is a %s: per-channel weights apply to %s "
                              "only (amct-reference.md §8.4); set it to false",
                              where, wts, l->name, l->op_type,
                              calq__qkind_names(CALQ_QKIND_NAMES_CHANNEL_WISE, kinds, sizeof kinds));
    }
    return CALQ_OK;
}

/* ---- public API --------------------------------------------------------------------------- */

void calq_config_opts_init(calq_config_opts *o)
{
    if (!o) return; /* as the free functions: nothing to fill */
    memset(o, 0, sizeof *o);
    o->batch_num = 1;
    o->activation_offset = 1;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

calq_status calq__config_load_as(const calq_model *m, const char *src, const char *path, calq_config **out,
                                 calq_error *err)
{
    *out = NULL;
    char *text = NULL;
    size_t len = 0;
    CALQ_TRY(calq__read_file_max(src, CALQ_TEXT_MAX_BYTES, "a config file", &text, &len, err));
    calq_status st = ends_with(path, ".cfg") ? calq__config_parse_cfg(m, text, len, path, out, err)
                                             : calq__config_parse_json(m, text, len, path, out, err);
    free(text);
    return st;
}

calq_status calq_config_load(const calq_model *m, const char *path, calq_config **out, calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, out);
    *out = NULL;
    CALQ_REQUIRE(err, m);
    CALQ_REQUIRE(err, path);
    return calq__config_load_as(m, path, path, out, err);
}

calq_status calq_config_create(const calq_model *m, const calq_config_opts *opts, calq_config **out, calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, out);
    *out = NULL;
    CALQ_REQUIRE(err, m);
    /* a config for a model computing in float16 would list no layer (or layers calibration then
     * refuses): the same refusal, at the first step a user takes */
    CALQ_TRY(calq__refuse_float16(m->g, err));
    calq_config_opts dflt;
    if (!opts) {
        calq_config_opts_init(&dflt);
        opts = &dflt;
    }
    /* AMCT: with config_defination the other arguments are ignored (§1.1). */
    if (opts->config_defination) {
        char *text = NULL;
        size_t len = 0;
        CALQ_TRY(calq__read_file_max(opts->config_defination, CALQ_TEXT_MAX_BYTES, "a config file", &text, &len, err));
        calq_status st = calq__config_parse_cfg(m, text, len, opts->config_defination, out, err);
        free(text);
        return st;
    }
    return calq__config_defaults(m, opts, out, err);
}

calq_status calq__config_stage(const calq_config *c, calq_staged_files *s, const char *json_path, calq_error *err)
{
    FILE *fp;
    CALQ_TRY(calq__staged_open(s, json_path, &fp, err));
    return calq__config_write_json(c, fp, err);
}

calq_status calq_config_save(const calq_config *c, const char *json_path, calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, c);
    CALQ_REQUIRE(err, json_path);
    calq_atomic_file f = {0};
    CALQ_TRY(calq__atomic_open(&f, json_path, err));
    calq_status st = calq__config_write_json(c, f.fp, err);
    if (st != CALQ_OK) {
        calq__atomic_abort(&f);
        return st;
    }
    return calq__atomic_commit(&f, err);
}

calq_status calq_create_quant_config(const calq_model *m, const calq_config_opts *opts, const char *json_out,
                                     calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, m);
    CALQ_REQUIRE(err, json_out);
    calq_config *c = NULL;
    CALQ_TRY(calq_config_create(m, opts, &c, err));
    calq_status st = calq_config_save(c, json_out, err);
    calq_config_free(c);
    return st;
}

/* The accessors answer a NULL config as an index out of range (-1, NULL, 0: calq.h). */
int calq_config_batch_num(const calq_config *c)
{
    return c ? c->batch_num : -1;
}

calq_status calq_config_set_batch_num(calq_config *c, int batch_num, calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, c);
    /* the config files' bound too, so that calq_config_save writes what calq_config_load reads */
    if (batch_num <= 0 || batch_num > CALQ__BATCH_NUM_MAX)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL,
                          "batch_num is %d; it must be in [1, %d] (amct-reference.md §7.2)", batch_num,
                          CALQ__BATCH_NUM_MAX);
    c->batch_num = batch_num;
    return CALQ_OK;
}

int calq_config_num_layers(const calq_config *c)
{
    return c ? c->n_layers : -1;
}

const char *calq_config_layer_name(const calq_config *c, int i)
{
    return c && i >= 0 && i < c->n_layers ? c->layers[i].name : NULL;
}

int calq_config_layer_enabled(const calq_config *c, int i)
{
    return c && i >= 0 && i < c->n_layers && c->layers[i].quant_enable;
}

int calq_config_find_layer(const calq_config *c, const char *layer)
{
    for (int i = 0; c && layer && i < c->n_layers; i++)
        if (strcmp(c->layers[i].name, layer) == 0) return i;
    return -1;
}

calq_status calq_config_set_layer_enabled(calq_config *c, int i, int enabled, calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, c);
    if (i < 0 || i >= c->n_layers)
        return calq__fail(err, CALQ_ERR_INDEX_OUT_OF_RANGE, NULL, "config layer index %d is out of range (0..%d)", i,
                          c->n_layers - 1);
    c->layers[i].quant_enable = enabled != 0;
    return CALQ_OK;
}

calq_status calq__config_require_layers(const calq_config *c, const char *task, calq_error *err)
{
    for (int i = 0; i < c->n_layers; i++)
        if (c->layers[i].quant_enable) return CALQ_OK;
    return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL,
                      "the config enables no layer, so there is nothing to %s (every layer is skipped or has "
                      "quant_enable false)",
                      task);
}

/* ---- what the algorithms take ------------------------------------------------------------- */

void calq__config_ifmr_opts(const calq_layer_config *l, calq_ifmr_opts *o)
{
    calq_ifmr_opts_init(o);
    o->max_percentile = (float)l->act.max_percentile;
    o->min_percentile = (float)l->act.min_percentile;
    o->search_start = (float)l->act.search_range[0];
    o->search_end = (float)l->act.search_range[1];
    o->search_step = (float)l->act.search_step;
    o->asymmetric = l->act.asymmetric;
    o->num_bits = l->act.num_bits;
}

void calq__config_hfmg_opts(const calq_layer_config *l, calq_hfmg_opts *o)
{
    calq_hfmg_opts_init(o);
    o->num_bins = l->act.num_of_bins;
    o->asymmetric = l->act.asymmetric;
    o->num_bits = l->act.num_bits;
}

void calq__config_range_opts(const calq_layer_config *l, calq_range_opts *o)
{
    const calq__act_algo_info *info = calq__act_algo(l->act.algo);
    calq_range_opts_init(o, info->range_method >= 0 ? (calq_range_method)info->range_method : CALQ_RANGE_MINMAX);
    o->asymmetric = l->act.asymmetric;
    o->num_bits = l->act.num_bits;
    if (info->keys & CALQ_ACT_KEY_PERCENTILES) {
        o->max_percentile = (float)l->act.max_percentile;
        o->min_percentile = (float)l->act.min_percentile;
    }
    if (info->keys & CALQ_ACT_KEY_BINS) o->num_bins = l->act.num_of_bins;
}

void calq__config_arq_opts(const calq_layer_config *l, calq_arq_opts *o)
{
    calq_arq_opts_init(o);
    o->channel_wise = l->wts.channel_wise;
    o->num_bits = l->wts.num_bits;
}
