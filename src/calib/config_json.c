/* AMCT's JSON quantization config (amct-reference.md §7.2): reading with cJSON, every key
 * checked, and a byte-stable writer.
 *
 * A top-level key whose value is an object is a layer entry; every other top-level key is a
 * global setting. Global values are never objects, so a model layer that happens to be named
 * "batch_num" still gets its own entry without ambiguity. */
#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "calib/config.h"

/* ---- reading ------------------------------------------------------------------------------ */

typedef struct json_ctx {
    const calq_model *m;
    const char *file;
    calq_config *c;
    calq_error *err;
    const char *layer;               /* the layer entry being read (for calq_error.layer), or NULL */
    const cJSON *skip;               /* the "skip_layers" array, applied once every layer entry is read */
    const calq__act_algo_info *algo; /* the global "act_algo" (calq's extension), or NULL */
    const cJSON *tensors;            /* the "tensor_quantize" array, read once every global is (activation_offset) */
} json_ctx;

static const char *json_type(const cJSON *v)
{
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNull(v)) return "null";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsArray(v)) return "an array";
    if (cJSON_IsObject(v)) return "an object";
    return "an unknown value";
}

/* "file:line:col" of byte `pos`, 1-based, columns in bytes. */
static void text_position(const char *text, size_t pos, int *line, int *col)
{
    int l = 1, c = 1;
    for (size_t i = 0; i < pos; i++) {
        if (text[i] == '\n') {
            l++;
            c = 1;
        } else {
            c++;
        }
    }
    *line = l;
    *col = c;
}

/* Up to 20 bytes from pos on the same line, non-printables as '?', for "near '...'". */
static void snippet(const char *text, size_t len, size_t pos, char *buf, size_t n)
{
    size_t k = 0;
    for (size_t i = pos; i < len && k + 1 < n && k < 20; i++) {
        unsigned char ch = (unsigned char)text[i];
        if (ch == '\n' || ch == '\r') break;
        buf[k++] = (char)(ch >= 0x20 && ch < 0x7f ? ch : '?');
    }
    buf[k] = 0;
}

static calq_status syntax_error(const char *file, const char *text, size_t len, size_t pos, const char *what,
                                calq_error *err)
{
    int line, col;
    if (pos > len) pos = len;
    text_position(text, pos, &line, &col);
    char near[32];
    snippet(text, len, pos, near, sizeof near);
    if (near[0])
        return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL, "%s:%d:%d: %s near '%s'", file, line, col, what, near);
    return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL, "%s:%d:%d: %s at the end of %s", file, line, col, what,
                      pos >= len ? "the file" : "the line");
}

/* How many arrays and objects are open at text[pos] (strings skipped): cJSON stops at
 * CJSON_NESTING_LIMIT levels, against stack exhaustion, and reports it as any syntax error. */
static int nesting_at(const char *text, size_t len, size_t pos)
{
    int depth = 0;
    bool in_string = false;
    for (size_t i = 0; i < pos && i < len; i++) {
        char ch = text[i];
        if (in_string) {
            if (ch == '\\')
                i++;
            else if (ch == '"')
                in_string = false;
        } else if (ch == '"') {
            in_string = true;
        } else if (ch == '[' || ch == '{') {
            depth++;
        } else if ((ch == ']' || ch == '}') && depth > 0) {
            depth--;
        }
    }
    return depth;
}

static int cmp_str_ptr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Fails on a key given twice in one object (cJSON keeps both; AMCT requires unique layer
 * names, §7.2, and a repeated parameter is almost always an editing slip). */
static calq_status check_unique_keys(const json_ctx *x, const cJSON *obj, const char *where)
{
    int n = cJSON_GetArraySize(obj);
    if (n < 2) return CALQ_OK;
    const char **keys = malloc((size_t)n * sizeof *keys);
    if (!keys) return calq__fail(x->err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory reading %s", x->file);
    int k = 0;
    for (const cJSON *it = obj->child; it && k < n; it = it->next) keys[k++] = it->string ? it->string : "";
    qsort(keys, (size_t)k, sizeof *keys, cmp_str_ptr);
    for (int i = 1; i < k; i++)
        if (strcmp(keys[i - 1], keys[i]) == 0) {
            calq_status st = calq__fail(x->err, CALQ_ERR_BAD_FORMAT, NULL, "%s: %skey '%s' appears twice; %s", x->file,
                                        where, calq__cut(keys[i]).s,
                                        where[0] ? "each key may appear once"
                                                 : "layer names and keys must be unique "
                                                   "(amct-reference.md §7.2)");
            free(keys);
            return st;
        }
    free(keys);
    return CALQ_OK;
}

static calq_status type_error(const json_ctx *x, const char *where, const char *key, const char *want, const cJSON *v)
{
    return calq__fail(x->err, CALQ_ERR_BAD_FORMAT, x->layer, "%s: %s'%s' must be %s, found %s", x->file, where,
                      calq__cut(key).s, want, json_type(v));
}

/* `key` names the value in messages (array elements have no key of their own). */
static calq_status get_bool(const json_ctx *x, const char *where, const char *key, const cJSON *v, bool *out)
{
    if (!cJSON_IsBool(v)) return type_error(x, where, key, "true or false", v);
    *out = cJSON_IsTrue(v) != 0;
    return CALQ_OK;
}

static calq_status get_number(const json_ctx *x, const char *where, const char *key, const cJSON *v, double *out)
{
    if (!cJSON_IsNumber(v)) return type_error(x, where, key, "a number", v);
    if (!isfinite(v->valuedouble))
        return calq__fail(x->err, CALQ_ERR_BAD_PARAMETERS, x->layer, "%s: %s'%s' is out of the range of a double",
                          x->file, where, calq__cut(key).s);
    *out = v->valuedouble;
    return CALQ_OK;
}

/* A whole JSON number in [lo, hi]: 8 and 8.0 are 8; 8.5, "8" and 1e10 are errors naming the key. */
static calq_status get_int_in(const json_ctx *x, const char *where, const char *key, const cJSON *v, int lo, int hi,
                              int *out)
{
    double d = 0.0;
    CALQ_TRY(get_number(x, where, key, v, &d));
    if (d != floor(d))
        return calq__fail(x->err, CALQ_ERR_BAD_FORMAT, x->layer, "%s: %s'%s' must be a whole number, found %.17g",
                          x->file, where, calq__cut(key).s, d);
    if (d < lo || d > hi)
        return calq__fail(x->err, CALQ_ERR_BAD_PARAMETERS, x->layer, "%s: %s'%s' is %.17g; it must be in [%d, %d]",
                          x->file, where, calq__cut(key).s, d, lo, hi);
    *out = (int)d;
    return CALQ_OK;
}

static calq_status get_int(const json_ctx *x, const char *where, const char *key, const cJSON *v, int *out)
{
    return get_int_in(x, where, key, v, INT_MIN, INT_MAX, out);
}

static calq_status unknown_key(const json_ctx *x, const char *where, const char *key, const char *known)
{
    return calq__fail(x->err, CALQ_ERR_BAD_FORMAT, x->layer, "%s: %sunknown key '%s' (the keys here are %s)", x->file,
                      where, calq__cut(key).s, known);
}

static calq_status read_global(json_ctx *x, const cJSON *v)
{
    calq_config *c = x->c;
    const char *k = v->string;
    if (strcmp(k, "version") == 0) {
        CALQ_TRY(get_int(x, "", k, v, &c->version));
        if (c->version != 1)
            return calq__fail(x->err, CALQ_ERR_BAD_PARAMETERS, NULL,
                              "%s: 'version' is %d; AMCT's config format is version 1 (amct-reference.md §7.2)",
                              x->file, c->version);
    } else if (strcmp(k, "batch_num") == 0) {
        CALQ_TRY(get_int_in(x, "", k, v, 1, CALQ__BATCH_NUM_MAX, &c->batch_num)); /* > 0, amct-reference.md §7.2 */
    } else if (strcmp(k, "activation_offset") == 0) {
        CALQ_TRY(get_bool(x, "", k, v, &c->activation_offset));
    } else if (strcmp(k, "do_fusion") == 0) {
        CALQ_TRY(get_bool(x, "", k, v, &c->do_fusion));
    } else if (strcmp(k, "joint_quant") == 0) {
        CALQ_TRY(get_bool(x, "", k, v, &c->joint_quant));
        c->write_joint_quant = true;
    } else if (strcmp(k, "skip_fusion_layers") == 0) {
        if (!cJSON_IsArray(v)) return type_error(x, "", k, "an array of layer names", v);
        int n = cJSON_GetArraySize(v);
        c->skip_fusion_layers = calloc((size_t)(n > 0 ? n : 1), sizeof *c->skip_fusion_layers);
        if (!c->skip_fusion_layers)
            return calq__fail(x->err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory reading %s", x->file);
        for (const cJSON *it = v->child; it; it = it->next) {
            if (!cJSON_IsString(it))
                return calq__fail(x->err, CALQ_ERR_BAD_FORMAT, NULL,
                                  "%s: 'skip_fusion_layers' must hold layer names (strings), found %s", x->file,
                                  json_type(it));
            if (calq__model_find_node(x->m, it->valuestring) < 0)
                return calq__fail(x->err, CALQ_ERR_BAD_PARAMETERS, it->valuestring,
                                  "%s: skip_fusion_layers: the model has no layer '%s'", x->file,
                                  calq__cut(it->valuestring).s);
            for (int i = 0; i < c->n_skip_fusion_layers; i++)
                if (strcmp(c->skip_fusion_layers[i], it->valuestring) == 0)
                    return calq__fail(x->err, CALQ_ERR_BAD_PARAMETERS, it->valuestring,
                                      "%s: skip_fusion_layers lists '%s' twice", x->file, calq__cut(it->valuestring).s);
            char *s = strdup(it->valuestring);
            if (!s) return calq__fail(x->err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory reading %s", x->file);
            c->skip_fusion_layers[c->n_skip_fusion_layers++] = s;
        }
    } else if (strcmp(k, "skip_layers") == 0) {
        /* calq's extension, the remedy its failure report gives: the layers listed stay in
         * float, as AMCT's create_quant_config(skip_layers=...) would have left them out. */
        if (!cJSON_IsArray(v)) return type_error(x, "", k, "an array of layer names", v);
        for (const cJSON *it = v->child; it; it = it->next)
            if (!cJSON_IsString(it))
                return calq__fail(x->err, CALQ_ERR_BAD_FORMAT, NULL,
                                  "%s: 'skip_layers' must hold layer names (strings), found %s", x->file,
                                  json_type(it));
        x->skip = v;
    } else if (strcmp(k, "act_algo") == 0) {
        /* calq's extension: the algorithm of every layer entry that does not name its own */
        if (!cJSON_IsString(v)) return type_error(x, "", k, "a string such as \"kl\"", v);
        if (!(x->algo = calq__act_algo_by_name(v->valuestring)))
            return calq__fail(x->err, CALQ_ERR_BAD_PARAMETERS, NULL, "%s: 'act_algo' is \"%s\"; it must be %s", x->file,
                              v->valuestring, calq__act_algo_names());
    } else if (strcmp(k, "tensor_quantize") == 0) {
        if (!cJSON_IsArray(v)) return type_error(x, "", k, "an array of {layer_name, input_index, ...} objects", v);
        x->tensors = v;
    } else {
        return unknown_key(x, "", k,
                           "version, batch_num, activation_offset, joint_quant, do_fusion, skip_fusion_layers, "
                           "tensor_quantize, skip_layers, act_algo, and one object per layer");
    }
    return CALQ_OK;
}

static const char ACT_KEYS[] =
    "num_bits, act_algo, asymmetric; IFMR: max_percentile, min_percentile, search_range, search_step; HFMG: "
    "num_of_bins; calq's percentile: max_percentile, min_percentile; kl, mse: num_of_bins";

/* The activation keys a layer entry gave, by CALQ_ACT_KEY_* category (the first key of each
 * names it in messages). */
typedef struct act_keys {
    unsigned given;
    const char *first[3];
    bool have_algo, max_p, min_p;
} act_keys;

static void key_seen(act_keys *k, unsigned cat, const char *name)
{
    int i = cat == CALQ_ACT_KEY_PERCENTILES ? 0 : cat == CALQ_ACT_KEY_SEARCH ? 1 : 2;
    if (!(k->given & cat)) k->first[i] = name;
    k->given |= cat;
}

static calq_status read_act(json_ctx *x, calq_layer_config *l, const cJSON *obj, const char *where, act_keys *keys)
{
    char w[CALQ_ERROR_NAME_MAX + 64];
    snprintf(w, sizeof w, "%sactivation_quant_params: ", where);
    CALQ_TRY(check_unique_keys(x, obj, w));
    for (const cJSON *v = obj->child; v; v = v->next) {
        const char *k = v->string;
        if (strcmp(k, "num_bits") == 0) {
            CALQ_TRY(get_int(x, w, k, v, &l->act.num_bits));
        } else if (strcmp(k, "max_percentile") == 0) {
            CALQ_TRY(get_number(x, w, k, v, &l->act.max_percentile));
            key_seen(keys, CALQ_ACT_KEY_PERCENTILES, k);
            keys->max_p = true;
        } else if (strcmp(k, "min_percentile") == 0) {
            CALQ_TRY(get_number(x, w, k, v, &l->act.min_percentile));
            key_seen(keys, CALQ_ACT_KEY_PERCENTILES, k);
            keys->min_p = true;
        } else if (strcmp(k, "search_step") == 0) {
            CALQ_TRY(get_number(x, w, k, v, &l->act.search_step));
            key_seen(keys, CALQ_ACT_KEY_SEARCH, k);
        } else if (strcmp(k, "search_range") == 0) {
            if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 2 || !cJSON_IsNumber(v->child) ||
                !cJSON_IsNumber(v->child->next))
                return calq__fail(x->err, CALQ_ERR_BAD_FORMAT, l->name,
                                  "%s: %s'search_range' must be an array of two numbers [start, end], e.g. [0.7, 1.3]",
                                  x->file, w);
            CALQ_TRY(get_number(x, w, "search_range[0]", v->child, &l->act.search_range[0]));
            CALQ_TRY(get_number(x, w, "search_range[1]", v->child->next, &l->act.search_range[1]));
            key_seen(keys, CALQ_ACT_KEY_SEARCH, k);
        } else if (strcmp(k, "num_of_bins") == 0) {
            CALQ_TRY(get_int(x, w, k, v, &l->act.num_of_bins));
            key_seen(keys, CALQ_ACT_KEY_BINS, k);
        } else if (strcmp(k, "asymmetric") == 0) {
            CALQ_TRY(get_bool(x, w, k, v, &l->act.asymmetric));
        } else if (strcmp(k, "act_algo") == 0) {
            const calq__act_algo_info *a = cJSON_IsString(v) ? calq__act_algo_by_name(v->valuestring) : NULL;
            if (!cJSON_IsString(v)) return type_error(x, w, k, "a string such as \"ifmr\"", v);
            if (!a)
                return calq__fail(x->err, CALQ_ERR_BAD_PARAMETERS, l->name, "%s: %s'act_algo' is \"%s\"; it must be %s",
                                  x->file, w, calq__cut(v->valuestring).s, calq__act_algo_names());
            l->act.algo = a->algo;
            keys->have_algo = true;
        } else {
            return unknown_key(x, w, k, ACT_KEYS);
        }
    }
    return CALQ_OK;
}

/* After the entry is read: keys the algorithm does not take are an error (§5: IFMR and HFMG
 * keys cannot be combined on one layer; older files have no act_algo and mean IFMR, §7.2),
 * and the calq algorithms' own defaults fill the keys not given. */
static calq_status finish_act(json_ctx *x, calq_layer_config *l, const char *where, const act_keys *keys)
{
    const calq__act_algo_info *a = calq__act_algo(l->act.algo);
    unsigned extra = keys->given & ~a->keys;
    if (extra) {
        int i = extra & CALQ_ACT_KEY_PERCENTILES ? 0 : extra & CALQ_ACT_KEY_SEARCH ? 1 : 2;
        const char *key = keys->first[i];
        bool ifmr_key = i < 2, dflt = !keys->have_algo;
        if (l->act.algo == CALQ_ACT_HFMG && ifmr_key)
            return calq__fail(x->err, CALQ_ERR_BAD_PARAMETERS, l->name,
                              "%s: %sactivation_quant_params: act_algo is \"hfmg\" but '%s' is an IFMR key: IFMR and "
                              "HFMG keys cannot be mixed in one layer (amct-reference.md §5); remove the IFMR keys or "
                              "use \"ifmr\"",
                              x->file, where, key);
        if (l->act.algo == CALQ_ACT_IFMR && !ifmr_key)
            return calq__fail(x->err, CALQ_ERR_BAD_PARAMETERS, l->name,
                              "%s: %sactivation_quant_params: act_algo is \"ifmr\"%s but '%s' is an HFMG key: IFMR and "
                              "HFMG keys cannot be mixed in one layer (amct-reference.md §5); remove it or set "
                              "\"act_algo\": \"hfmg\"",
                              x->file, where, dflt ? " (the default)" : "", key);
        return calq__fail(x->err, CALQ_ERR_BAD_PARAMETERS, l->name,
                          "%s: %sactivation_quant_params: act_algo is \"%s\"%s, which does not take '%s'; \"%s\" "
                          "takes %s",
                          x->file, where, a->name, dflt ? " (the config's global act_algo)" : "", key, a->name,
                          a->keys_text);
    }
    if ((a->keys & CALQ_ACT_KEY_PERCENTILES) && !keys->max_p) l->act.max_percentile = a->percentile;
    if ((a->keys & CALQ_ACT_KEY_PERCENTILES) && !keys->min_p) l->act.min_percentile = a->percentile;
    if ((a->keys & CALQ_ACT_KEY_BINS) && !(keys->given & CALQ_ACT_KEY_BINS)) l->act.num_of_bins = a->num_of_bins;
    return CALQ_OK;
}

/* ada_quantize's keys (§7.2): "beta_range" is an array [start, end]. */
static calq_status read_ada_key(json_ctx *x, const char *w, const char *k, const cJSON *v, calq_ada_config *a)
{
    if (strcmp(k, "num_iteration") == 0) return get_int(x, w, k, v, &a->num_iteration);
    if (strcmp(k, "reg_param") == 0) return get_number(x, w, k, v, &a->reg_param);
    if (strcmp(k, "warm_start") == 0) return get_number(x, w, k, v, &a->warm_start);
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 2)
        return calq__fail(x->err, CALQ_ERR_BAD_FORMAT, x->layer,
                          "%s: %s'beta_range' must be an array of two numbers [start, end], e.g. [20, 2]", x->file, w);
    CALQ_TRY(get_number(x, w, "beta_range[0]", v->child, &a->beta_range[0]));
    return get_number(x, w, "beta_range[1]", v->child->next, &a->beta_range[1]);
}

static calq_status read_wts(json_ctx *x, calq_layer_config *l, const cJSON *obj, const char *where)
{
    char w[CALQ_ERROR_NAME_MAX + 64];
    snprintf(w, sizeof w, "%sweight_quant_params: ", where);
    CALQ_TRY(check_unique_keys(x, obj, w));
    calq_wts_config wts = l->wts;
    const char *ada_key = NULL; /* the first ada_quantize key given */
    for (const cJSON *v = obj->child; v; v = v->next) {
        const char *k = v->string;
        if (strcmp(k, "num_bits") == 0) {
            CALQ_TRY(get_int(x, w, k, v, &wts.num_bits));
        } else if (strcmp(k, "channel_wise") == 0) {
            CALQ_TRY(get_bool(x, w, k, v, &wts.channel_wise));
        } else if (strcmp(k, "num_iteration") == 0 || strcmp(k, "reg_param") == 0 || strcmp(k, "beta_range") == 0 ||
                   strcmp(k, "warm_start") == 0) {
            CALQ_TRY(read_ada_key(x, w, k, v, &wts.ada));
            if (!ada_key) ada_key = k;
        } else if (strcmp(k, "wts_algo") == 0) {
            if (!cJSON_IsString(v)) return type_error(x, w, k, "\"arq_quantize\"", v);
            if (strcmp(v->valuestring, "nuq_quantize") == 0)
                return calq__fail(x->err, CALQ_ERR_UNSUPPORTED, l->name,
                                  "%s: %s'wts_algo' \"%s\" (non-uniform quantization) is an AMCT algorithm calq does "
                                  "not implement; use \"arq_quantize\" (§6.1) or \"ada_quantize\" (AdaRound)",
                                  x->file, w, calq__cut(v->valuestring).s);
            if (strcmp(v->valuestring, "ada_quantize") == 0)
                wts.algo = CALQ_WTS_ADA;
            else if (strcmp(v->valuestring, "arq_quantize") == 0)
                wts.algo = CALQ_WTS_ARQ;
            else
                return calq__fail(x->err, CALQ_ERR_BAD_PARAMETERS, l->name,
                                  "%s: %s'wts_algo' is \"%s\"; it must be \"arq_quantize\" or \"ada_quantize\"",
                                  x->file, w, calq__cut(v->valuestring).s);
        } else {
            return unknown_key(x, w, k,
                               "num_bits, wts_algo, channel_wise; with \"ada_quantize\": num_iteration, reg_param, "
                               "beta_range, warm_start");
        }
    }
    if (ada_key && wts.algo != CALQ_WTS_ADA)
        return calq__fail(x->err, CALQ_ERR_BAD_PARAMETERS, l->name,
                          "%s: %s'%s' is an ada_quantize parameter but wts_algo is \"arq_quantize\"%s; set "
                          "\"wts_algo\": \"ada_quantize\" or remove it (§7.2)",
                          x->file, w, ada_key,
                          cJSON_GetObjectItemCaseSensitive(obj, "wts_algo") ? "" : " (the default)");
    if (!l->has_weights) {
        /* AveragePool has no weights; AMCT rejects channel_wise on non-global AVE pooling (§8.4). */
        if (wts.channel_wise)
            return calq__fail(x->err, CALQ_ERR_BAD_PARAMETERS, l->name,
                              "%s: %schannel_wise is true but layer '%s' is an %s, which has no weights: per-channel "
                              "quantization does not apply to pooling (amct-reference.md §8.4); set it to false",
                              x->file, w, l->name, l->op_type);
        return CALQ_OK;
    }
    l->wts = wts;
    return CALQ_OK;
}

/* One tensor_quantize entry (§7.2): {"layer_name", "input_index", "activation_quant_params"}. */
static calq_status read_tensor(json_ctx *x, const cJSON *obj, int i)
{
    char where[64];
    snprintf(where, sizeof where, "tensor_quantize[%d]: ", i);
    if (!cJSON_IsObject(obj))
        return type_error(x, where, "entry", "an object {\"layer_name\": ..., \"input_index\": ...}", obj);
    CALQ_TRY(check_unique_keys(x, obj, where));
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(obj, "layer_name");
    const cJSON *index = cJSON_GetObjectItemCaseSensitive(obj, "input_index");
    if (!cJSON_IsString(name)) return type_error(x, where, "layer_name", "a layer name (a string)", name);
    int input = 0, node;
    if (index) CALQ_TRY(get_int(x, where, "input_index", index, &input));
    x->layer = name->valuestring;
    const calq_qkind *k;
    CALQ_TRY(calq__config_check_tensor(x->m, name->valuestring, input, x->file, &node, &k, x->err));
    if (calq__config_find_tensor(x->c, name->valuestring, input))
        return calq__fail(x->err, CALQ_ERR_BAD_PARAMETERS, name->valuestring,
                          "%s: %sinput %d of layer '%s' is listed twice in tensor_quantize", x->file, where, input,
                          name->valuestring);
    calq_layer_config *l = calq__config_add_tensor(x->c, name->valuestring, input, k, node, x->err);
    if (!l) return x->err ? x->err->status : CALQ_ERR_OUT_OF_MEMORY;
    if (x->algo) l->act.algo = x->algo->algo; /* the global act_algo, unless the entry names one */
    act_keys keys = {0};
    for (const cJSON *v = obj->child; v; v = v->next) {
        const char *key = v->string;
        if (strcmp(key, "layer_name") == 0 || strcmp(key, "input_index") == 0) continue;
        if (strcmp(key, "activation_quant_params") == 0) {
            if (!cJSON_IsObject(v)) return type_error(x, where, key, "an object", v);
            CALQ_TRY(read_act(x, l, v, where, &keys));
        } else {
            return unknown_key(x, where, key, "layer_name, input_index, activation_quant_params");
        }
    }
    CALQ_TRY(finish_act(x, l, where, &keys));
    char vwhere[CALQ_ERROR_NAME_MAX + 512];
    snprintf(vwhere, sizeof vwhere, "%s: %slayer '%s' input %d", x->file, where, name->valuestring, input);
    return calq__layer_config_validate(l, vwhere, true, x->err);
}

static calq_status read_layer(json_ctx *x, const cJSON *obj)
{
    const char *name = obj->string;
    char where[CALQ_ERROR_NAME_MAX + 32];
    snprintf(where, sizeof where, "layer '%s': ", calq__cut(name).s);
    int node;
    x->layer = name;
    CALQ_TRY(calq__config_check_layer(x->m, name, x->file, &node, x->err));
    CALQ_TRY(check_unique_keys(x, obj, where));
    calq_layer_config *l = calq__config_add_layer(x->c, name, calq__model_qkind(x->m, node), node, x->err);
    if (!l) return x->err ? x->err->status : CALQ_ERR_OUT_OF_MEMORY;
    if (x->algo) l->act.algo = x->algo->algo; /* the global act_algo, unless the entry names one */
    act_keys keys = {0};
    for (const cJSON *v = obj->child; v; v = v->next) {
        const char *k = v->string;
        if (strcmp(k, "quant_enable") == 0) {
            CALQ_TRY(get_bool(x, where, k, v, &l->quant_enable));
        } else if (strcmp(k, "activation_quant_params") == 0) {
            if (!cJSON_IsObject(v)) return type_error(x, where, k, "an object", v);
            CALQ_TRY(read_act(x, l, v, where, &keys));
        } else if (strcmp(k, "weight_quant_params") == 0) {
            if (!cJSON_IsObject(v)) return type_error(x, where, k, "an object", v);
            CALQ_TRY(read_wts(x, l, v, where));
        } else if (strcmp(k, "dmq_balancer_param") == 0) {
            /* a number in [0.2, 0.8] (§7.2), checked in calq__layer_config_validate */
            if (!cJSON_IsNumber(v))
                return type_error(x, where, k, "a number in [0.2, 0.8] (the DMQ migration strength)", v);
            CALQ_TRY(get_number(x, where, k, v, &l->dmq));
            if (l->dmq == 0.0) /* 0 is calq's "off": say the range rather than accept it silently */
                return calq__fail(x->err, CALQ_ERR_BAD_PARAMETERS, l->name,
                                  "%s: %s'%s' is 0; it must be in [%g, %g] (amct-reference.md §7.2), or be left out "
                                  "to disable DMQ balancing",
                                  x->file, where, k, CALQ_DMQ_MIN, CALQ_DMQ_MAX);
        } else {
            return unknown_key(x, where, k,
                               "quant_enable, dmq_balancer_param, activation_quant_params, weight_quant_params");
        }
    }
    CALQ_TRY(finish_act(x, l, where, &keys));
    char vwhere[CALQ_ERROR_NAME_MAX + 512];
    snprintf(vwhere, sizeof vwhere, "%s: layer '%s'", x->file, calq__cut(name).s);
    return calq__layer_config_validate(l, vwhere, true, x->err);
}

calq_status calq__config_parse_json(const calq_model *m, const char *text, size_t len, const char *filename,
                                    calq_config **out, calq_error *err)
{
    *out = NULL;
    calq__cut_buf file_cut = calq__cut(filename ? filename : "config"); /* labels every message */
    const char *file = file_cut.s;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root) {
        size_t pos = end && end >= text ? (size_t)(end - text) : 0;
        if (pos < len && (text[pos] == '[' || text[pos] == '{') && nesting_at(text, len, pos) >= CJSON_NESTING_LIMIT) {
            char what[192];
            snprintf(what, sizeof what,
                     "arrays and objects are nested more than %d levels deep, the limit of calq's JSON reader (a "
                     "quantization config needs a few); remove the extra nesting",
                     CJSON_NESTING_LIMIT);
            return syntax_error(file, text, len, pos, what, err);
        }
        return syntax_error(file, text, len, pos, "JSON syntax error", err);
    }
    size_t pos = end && end >= text ? (size_t)(end - text) : len;
    while (pos < len && (text[pos] == ' ' || text[pos] == '\t' || text[pos] == '\n' || text[pos] == '\r')) pos++;
    if (pos < len) {
        cJSON_Delete(root);
        return syntax_error(file, text, len, pos, "unexpected text after the JSON value", err);
    }
    if (!cJSON_IsObject(root)) {
        calq_status st = calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL,
                                    "%s: a quantization config is a JSON object ({\"version\": 1, ...}), found %s",
                                    file, json_type(root));
        cJSON_Delete(root);
        return st;
    }
    json_ctx x = {m, file, calq__config_new(), err, NULL, NULL, NULL, NULL};
    calq_status st = x.c ? CALQ_OK : calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory reading %s", file);
    if (st == CALQ_OK) st = check_unique_keys(&x, root, "");
    /* Globals first: a layer without "asymmetric" takes the global activation_offset (§3.1). */
    /* tensor_quantize is a global whatever its value (an object there is a mistake, not a layer) */
    for (const cJSON *v = root->child; v && st == CALQ_OK; v = v->next)
        if (!cJSON_IsObject(v) || !strcmp(v->string, "tensor_quantize")) st = read_global(&x, v);
    int ti = 0;
    for (const cJSON *v = x.tensors ? x.tensors->child : NULL; v && st == CALQ_OK; v = v->next)
        st = read_tensor(&x, v, ti++);
    x.layer = NULL;
    for (const cJSON *v = root->child; v && st == CALQ_OK; v = v->next)
        if (cJSON_IsObject(v) && strcmp(v->string, "tensor_quantize") != 0) st = read_layer(&x, v);
    for (const cJSON *it = x.skip ? x.skip->child : NULL; it && st == CALQ_OK; it = it->next) {
        int node;
        st = calq__config_check_layer(m, it->valuestring, file, &node, err);
        calq_layer_config *l = st == CALQ_OK ? calq__config_find(x.c, it->valuestring) : NULL;
        if (l) l->quant_enable = false; /* a layer without an entry is not quantized anyway */
    }
    cJSON_Delete(root);
    if (st != CALQ_OK) {
        calq_config_free(x.c);
        return st;
    }
    calq__config_sort_layers(x.c);
    *out = x.c;
    return CALQ_OK;
}

/* ---- writing ------------------------------------------------------------------------------ */

/* Shortest "%.Ng" that reads back as the same double: 0.999999 stays 0.999999. */
static void format_double(double v, char *buf, size_t n)
{
    if (v == floor(v) && fabs(v) < 1e15) { /* 20, not 2e+01 */
        snprintf(buf, n, "%.0f", v);
        return;
    }
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, n, "%.*g", p, v);
        if (strtod(buf, NULL) == v) return;
    }
}

static void put_string(FILE *fp, const char *s)
{
    fputc('"', fp);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", fp); break;
        case '\\': fputs("\\\\", fp); break;
        case '\n': fputs("\\n", fp); break;
        case '\r': fputs("\\r", fp); break;
        case '\t': fputs("\\t", fp); break;
        case '\b': fputs("\\b", fp); break;
        case '\f': fputs("\\f", fp); break;
        default:
            if (*p < 0x20)
                fprintf(fp, "\\u%04x", *p);
            else
                fputc(*p, fp);
        }
    }
    fputc('"', fp);
}

static void put_key(FILE *fp, int indent, const char *key)
{
    fprintf(fp, "%*s", indent * 4, "");
    put_string(fp, key);
    fputs(": ", fp);
}

static void put_double(FILE *fp, double v)
{
    char buf[40];
    format_double(v, buf, sizeof buf);
    fputs(buf, fp);
}

/* "key": [a, b],\n */
static void put_pair(FILE *fp, int indent, const char *key, const double v[2])
{
    put_key(fp, indent, key);
    fputc('[', fp);
    put_double(fp, v[0]);
    fputs(", ", fp);
    put_double(fp, v[1]);
    fputs("],\n", fp);
}

/* activation_quant_params at depth `d` (its keys at d + 1), without the closing brace. */
static void write_act(FILE *fp, const calq_act_config *a, int d)
{
    put_key(fp, d, "activation_quant_params");
    fputs("{\n", fp);
    const int d3 = d + 1;
    put_key(fp, d3, "num_bits");
    fprintf(fp, "%d,\n", a->num_bits);
    const calq__act_algo_info *info = calq__act_algo(a->algo);
    if (info->keys & CALQ_ACT_KEY_PERCENTILES) {
        put_key(fp, d3, "max_percentile");
        put_double(fp, a->max_percentile);
        fputs(",\n", fp);
        put_key(fp, d3, "min_percentile");
        put_double(fp, a->min_percentile);
        fputs(",\n", fp);
    }
    if (a->algo == CALQ_ACT_IFMR) {
        put_pair(fp, d3, "search_range", a->search_range);
        put_key(fp, d3, "search_step");
        put_double(fp, a->search_step);
        fputs(",\n", fp);
        put_key(fp, d3, "act_algo");
        fputs("\"ifmr\",\n", fp);
    } else { /* HFMG's order (act_algo, num_of_bins); calq's algorithms are named only where used */
        put_key(fp, d3, "act_algo");
        put_string(fp, info->name);
        fputs(",\n", fp);
        if (info->keys & CALQ_ACT_KEY_BINS) {
            put_key(fp, d3, "num_of_bins");
            fprintf(fp, "%d,\n", a->num_of_bins);
        }
    }
    put_key(fp, d3, "asymmetric");
    fprintf(fp, "%s\n", a->asymmetric ? "true" : "false");
}

static void write_layer(FILE *fp, const calq_layer_config *l)
{
    put_key(fp, 1, l->name);
    fputs("{\n", fp);
    put_key(fp, 2, "quant_enable");
    fprintf(fp, "%s,\n", l->quant_enable ? "true" : "false");
    if (l->dmq != 0.0) { /* where §7.2's example has it */
        put_key(fp, 2, "dmq_balancer_param");
        put_double(fp, l->dmq);
        fputs(",\n", fp);
    }
    write_act(fp, &l->act, 2);
    fprintf(fp, "%*s}%s\n", 8, "", l->has_weights ? "," : "");
    if (l->has_weights) {
        put_key(fp, 2, "weight_quant_params");
        fputs("{\n", fp);
        put_key(fp, 3, "num_bits");
        fprintf(fp, "%d,\n", l->wts.num_bits);
        put_key(fp, 3, "wts_algo");
        if (l->wts.algo == CALQ_WTS_ADA) { /* §7.2's ada_quantize keys, after the algorithm's name */
            const calq_ada_config *d = &l->wts.ada;
            fputs("\"ada_quantize\",\n", fp);
            put_key(fp, 3, "num_iteration");
            fprintf(fp, "%d,\n", d->num_iteration);
            put_key(fp, 3, "reg_param");
            put_double(fp, d->reg_param);
            fputs(",\n", fp);
            put_pair(fp, 3, "beta_range", d->beta_range);
            put_key(fp, 3, "warm_start");
            put_double(fp, d->warm_start);
            fputs(",\n", fp);
        } else {
            fputs("\"arq_quantize\",\n", fp);
        }
        put_key(fp, 3, "channel_wise");
        fprintf(fp, "%s\n", l->wts.channel_wise ? "true" : "false");
        fprintf(fp, "%*s}\n", 8, "");
    }
    fprintf(fp, "    }");
}

calq_status calq__config_write_json(const calq_config *c, FILE *fp, calq_error *err)
{
    /* Key order follows AMCT's example (§7.2): globals, then one entry per layer. */
    fputs("{\n", fp);
    put_key(fp, 1, "version");
    fprintf(fp, "%d,\n", c->version);
    put_key(fp, 1, "batch_num");
    fprintf(fp, "%d,\n", c->batch_num);
    put_key(fp, 1, "activation_offset");
    fprintf(fp, "%s,\n", c->activation_offset ? "true" : "false");
    if (c->write_joint_quant) {
        put_key(fp, 1, "joint_quant");
        fprintf(fp, "%s,\n", c->joint_quant ? "true" : "false");
    }
    put_key(fp, 1, "do_fusion");
    fprintf(fp, "%s,\n", c->do_fusion ? "true" : "false");
    put_key(fp, 1, "skip_fusion_layers");
    fputc('[', fp);
    for (int i = 0; i < c->n_skip_fusion_layers; i++) {
        if (i) fputs(", ", fp);
        put_string(fp, c->skip_fusion_layers[i]);
    }
    fputc(']', fp);
    int nt = 0;
    for (int i = 0; i < c->n_tensors; i++) nt += c->tensors[i].quant_enable;
    if (nt) { /* tensor_quantize (§7.2), only when there is one: AMCT's files without it stay the same */
        fputs(",\n", fp);
        put_key(fp, 1, "tensor_quantize");
        fputs("[", fp);
        for (int i = 0, k = 0; i < c->n_tensors; i++) {
            const calq_layer_config *t = &c->tensors[i];
            if (!t->quant_enable) continue;
            fprintf(fp, "%s\n%*s{\n", k++ ? "," : "", 8, "");
            put_key(fp, 3, "layer_name");
            put_string(fp, t->name);
            fputs(",\n", fp);
            put_key(fp, 3, "input_index");
            fprintf(fp, "%d,\n", t->input);
            write_act(fp, &t->act, 3);
            fprintf(fp, "%*s}\n%*s}", 12, "", 8, "");
        }
        fputs("\n    ]", fp);
    }
    for (int i = 0; i < c->n_layers; i++) {
        fputs(",\n", fp);
        write_layer(fp, &c->layers[i]);
    }
    fputs("\n}\n", fp);
    if (ferror(fp)) return calq__fail(err, CALQ_ERR_IO, NULL, "writing the JSON config failed");
    return CALQ_OK;
}
