/* Reading a record file (amct-reference.md §7.1) and the save-time checks of §4.4 (whose value
 * ranges, which need no model, are also checked as each field is read). The reader
 * takes AMCT's Caffe, ONNX and PyTorch flavours and calq's own: the five factor fields are read
 * and typed; the other fields §7.1 documents (skip_fusion, channels, height, width, act_type,
 * ...) are type-checked and otherwise read over; any other field is an error, as protobuf's
 * text parser makes it.
 *
 * Cost (issue 14): the file is parsed one `record { }` entry at a time (calq_tp_parse_each),
 * names are found through hash maps, and when the model is known each key is checked against
 * it as soon as it is read, so a hostile file stops at its first bad entry with memory for one
 * entry, and a good one takes time linear in its size. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/file.h"
#include "base/strmap.h"
#include "calib/record.h"
#include "frontend/model.h"
#include "graph/quantizable.h"
#include "textproto/textproto.h"

static const char *label_or(const char *s, const char *dflt)
{
    return s && *s ? s : dflt;
}

/* What the reader does with each field of a `value { }` (§7.1). */
typedef enum value_use {
    USE_SCALE_D,
    USE_OFFSET_D,
    USE_SCALE_W,
    USE_OFFSET_W,
    USE_SHIFT_BIT,
    IGNORE_UINT, /* Caffe's channels / height / width */
    IGNORE_BOOL, /* skip_fusion, is_tensor_quantize */
    IGNORE_ANY,  /* op_data_type, PyTorch's kv_cache_value / prune_record: read over */
    CHECK_INT8,  /* act_type / wts_type / dst_type: calq quantizes to INT8 only */
    USE_BALANCE  /* tensor_balance_factor (DMQ balancing, graph/balance.h) */
} value_use;

static const struct value_field {
    const char *name;
    value_use use;
} VALUE_FIELDS[] = {
    {"scale_d", USE_SCALE_D},
    {"offset_d", USE_OFFSET_D},
    {"scale_w", USE_SCALE_W},
    {"offset_w", USE_OFFSET_W},
    {"shift_bit", USE_SHIFT_BIT},
    {"channels", IGNORE_UINT},
    {"height", IGNORE_UINT},
    {"width", IGNORE_UINT},
    {"skip_fusion", IGNORE_BOOL},
    {"is_tensor_quantize", IGNORE_BOOL},
    {"tensor_balance_factor", USE_BALANCE},
    {"op_data_type", IGNORE_ANY},
    {"act_type", CHECK_INT8},
    {"wts_type", CHECK_INT8},
    {"dst_type", CHECK_INT8},
    {"kv_cache_value", IGNORE_ANY},
    {"prune_record", IGNORE_ANY},
};
#define N_VALUE_FIELDS ((int)(sizeof VALUE_FIELDS / sizeof VALUE_FIELDS[0]))

typedef struct reader {
    const char *file; /* labels messages */
    calq_record *r;
    const calq_model *m; /* NULL: keys are checked later, by calq__record_check */
    const char *mf;
    calq_strmap nodes; /* m's node names -> index */
    /* capacities of the arrays of the entry being read (one at a time) */
    int cap_scale_w, cap_offset_w, cap_shift_bit, cap_balance;
    int64_t max_scale_w; /* the entry's layer's output channels when known, else 0 */
} reader;

/* Appends a repeated scalar, doubling the array; false on out-of-memory. */
static bool push(void **arr, int *n, int *cap, size_t elem, const void *v)
{
    if (*n == *cap) {
        int nc = *cap ? 2 * *cap : 4;
        void *p = realloc(*arr, (size_t)nc * elem);
        if (!p) return false;
        *arr = p;
        *cap = nc;
    }
    memcpy((char *)*arr + (size_t)*n * elem, v, elem);
    (*n)++;
    return true;
}

static calq_status check_int8_type(const calq_tp_node *f, const char *file, const calq_record_layer *l, calq_error *err)
{
    const char *t;
    CALQ_TRY(calq_tp_string(f, file, &t, err));
    if (strcmp(t, "INT8") != 0)
        return calq__fail(err, CALQ_ERR_UNSUPPORTED, l->name,
                          "%s:%d:%d: %s of layer %s is \"%s\"; calq quantizes to INT8 only (AMCT's default, §7.1): "
                          "calibrate this layer for INT8 or remove its entry",
                          file, f->line, f->col, calq__cut(f->name).s, calq__cut(l->name).s, t);
    return CALQ_OK;
}

static calq_status unknown_value_field(const calq_tp_node *f, const char *file, const calq_record_layer *l,
                                       calq_error *err)
{
    char names[512];
    size_t at = 0;
    names[0] = 0;
    for (int i = 0; i < N_VALUE_FIELDS && at < sizeof names; i++)
        at += (size_t)snprintf(names + at, sizeof names - at, "%s%s", i ? ", " : "", VALUE_FIELDS[i].name);
    return calq__fail(err, CALQ_ERR_BAD_FORMAT, l->name,
                      "%s:%d:%d: unknown field '%s' in the value of layer \"%s\" (a record value holds %s: the "
                      "fields of AMCT's record flavours, amct-reference.md §7.1); check its spelling",
                      file, f->line, f->col, calq__cut(f->name).s, calq__cut(l->name).s, names);
}

/* Why a scale (scale_d, scale_w, tensor_balance_factor) cannot be used, or NULL. §4.4 demands
 * the open interval (0, +inf); calq also refuses subnormal values (below FLT_MIN): the deploy
 * model stores 1/scale_d (AscendQuant's scale, §0.3), deq_scale = scale_d * scale_w (§6.3) and
 * quantization divides by the scale, and 1/x overflows float32 to +inf for them. AMCT's
 * calibration never writes one (process_scale, §2.1, replaces scales below FLT_EPSILON by 1.0). */
static const char *scale_flaw(float x)
{
    if (isnan(x)) return "NaN";
    if (!(x > 0.0f)) return "not > 0";
    if (isinf(x)) return "infinite";
    if (x < FLT_MIN)
        return "subnormal: 1/scale overflows float32 to inf, so calq needs at least FLT_MIN = 1.17549435e-38";
    return NULL;
}

/* The range rules of §4.4 applied to each field as it is read, naming its line and column: a
 * hostile record is refused by every reader (save, search, calibration into an existing record),
 * not only at save time after a run has used it. */
static calq_status check_scale(const calq_tp_node *f, const char *file, const calq_record_layer *l, int index, float x,
                               calq_error *err)
{
    const char *why = scale_flaw(x);
    if (!why) return CALQ_OK;
    char idx[24] = "";
    if (index >= 0) snprintf(idx, sizeof idx, "[%d]", index);
    return calq__fail(err, CALQ_ERR_RECORD_FACTOR, l->name,
                      "%s:%d:%d: %s's value shoule be in positivate range of float32 in layer %s. (%s%s is %.9g: "
                      "%s; amct-reference.md §4.4). Recalibrate the layer or correct the record",
                      file, f->line, f->col, calq__cut(f->name).s, calq__cut(l->name).s, calq__cut(f->name).s, idx,
                      (double)x, why);
}

static calq_status check_offset(const calq_tp_node *f, const char *file, const calq_record_layer *l, int index,
                                int64_t x, calq_error *err)
{
    if (index < 0 && (x < -128 || x > 127))
        return calq__fail(
            err, CALQ_ERR_RECORD_FACTOR, l->name,
            "%s:%d:%d: offset_d's value should be in [-128, 127] in layer %s. (offset_d is %lld; "
            "amct-reference.md §4.4: calq quantizes to INT8). Recalibrate the layer or correct the record",
            file, f->line, f->col, calq__cut(l->name).s, (long long)x);
    if (index >= 0 && x != 0)
        return calq__fail(err, CALQ_ERR_RECORD_FACTOR, l->name,
                          "%s:%d:%d: offset_w's value should be 0 in layer %s. (offset_w[%d] is %lld; "
                          "amct-reference.md §4.4: weights are quantized symmetrically). Correct the record",
                          file, f->line, f->col, calq__cut(l->name).s, index, (long long)x);
    return CALQ_OK;
}

/* shift_bit: all 0 or all in [1, 16] (§4.4); a value above 16 fails as soon as it is read. */
static bool shift_bits_ok(const uint64_t *v, int n)
{
    bool all_zero = true, all_in = true;
    for (int c = 0; c < n; c++) {
        all_zero &= v[c] == 0;
        all_in &= v[c] >= 1 && v[c] <= 16;
    }
    return all_zero || all_in;
}

static calq_status shift_bit_fail(const char *file, int line, int col, const calq_record_layer *l, calq_error *err)
{
    return calq__fail(err, CALQ_ERR_RECORD_FACTOR, l->name,
                      "shift_bit's value shoule be in [1, 16] or all be 0 in layer %s (%s, line %d, column %d; "
                      "amct-reference.md §4.4). Correct the record",
                      calq__cut(l->name).s, file, line, col);
}

static calq_status read_value(reader *rd, const calq_tp_node *v, calq_record_layer *l, calq_error *err)
{
    const char *file = rd->file;
    for (int i = 0; i < v->n_children; i++) {
        const calq_tp_node *f = v->children[i];
        int k = 0;
        while (k < N_VALUE_FIELDS && strcmp(f->name, VALUE_FIELDS[k].name) != 0) k++;
        if (k == N_VALUE_FIELDS) return unknown_value_field(f, file, l, err);
        bool ok = true;
        switch (VALUE_FIELDS[k].use) {
        case USE_SCALE_D:
            if (l->has_scale_d)
                return calq__fail(err, CALQ_ERR_BAD_FORMAT, l->name, "%s:%d:%d: scale_d of layer %s is given twice",
                                  file, f->line, f->col, calq__cut(l->name).s);
            CALQ_TRY(calq_tp_float(f, file, &l->scale_d, err));
            CALQ_TRY(check_scale(f, file, l, -1, l->scale_d, err));
            l->has_scale_d = true;
            break;
        case USE_OFFSET_D:
            if (l->has_offset_d)
                return calq__fail(err, CALQ_ERR_BAD_FORMAT, l->name, "%s:%d:%d: offset_d of layer %s is given twice",
                                  file, f->line, f->col, calq__cut(l->name).s);
            CALQ_TRY(calq_tp_int(f, file, &l->offset_d, err));
            CALQ_TRY(check_offset(f, file, l, -1, l->offset_d, err));
            l->has_offset_d = true;
            break;
        case USE_SCALE_W: {
            float x;
            CALQ_TRY(calq_tp_float(f, file, &x, err));
            CALQ_TRY(check_scale(f, file, l, l->n_scale_w, x, err));
            if (rd->max_scale_w > 1 && l->n_scale_w == rd->max_scale_w)
                return calq__fail(err, CALQ_ERR_RECORD_FACTOR, l->name,
                                  "%s:%d:%d: layer %s has more scale_w values than its weight's %lld output channels; "
                                  "give one per output channel or a single one",
                                  file, f->line, f->col, calq__cut(l->name).s, (long long)rd->max_scale_w);
            ok = push((void **)&l->scale_w, &l->n_scale_w, &rd->cap_scale_w, sizeof x, &x);
            break;
        }
        case USE_OFFSET_W: {
            int64_t x;
            CALQ_TRY(calq_tp_int(f, file, &x, err));
            CALQ_TRY(check_offset(f, file, l, l->n_offset_w, x, err));
            ok = push((void **)&l->offset_w, &l->n_offset_w, &rd->cap_offset_w, sizeof x, &x);
            break;
        }
        case USE_SHIFT_BIT: {
            uint64_t x;
            CALQ_TRY(calq_tp_uint(f, file, &x, err));
            if (x > 16) return shift_bit_fail(file, f->line, f->col, l, err);
            ok = push((void **)&l->shift_bit, &l->n_shift_bit, &rd->cap_shift_bit, sizeof x, &x);
            break;
        }
        case IGNORE_UINT: {
            uint64_t x;
            CALQ_TRY(calq_tp_uint(f, file, &x, err));
            break;
        }
        case IGNORE_BOOL: {
            bool x;
            CALQ_TRY(calq_tp_bool(f, file, &x, err));
            break;
        }
        case IGNORE_ANY: break;
        case CHECK_INT8: CALQ_TRY(check_int8_type(f, file, l, err)); break;
        case USE_BALANCE: {
            float x;
            CALQ_TRY(calq_tp_float(f, file, &x, err));
            if (scale_flaw(x))
                return calq__fail(err, CALQ_ERR_RECORD_FACTOR, l->name,
                                  "%s:%d:%d: layer %s has tensor_balance_factor %.9g (%s); a DMQ balance factor must "
                                  "be finite and > 0 (§7.1)",
                                  file, f->line, f->col, calq__cut(l->name).s, (double)x, scale_flaw(x));
            ok = push((void **)&l->balance, &l->n_balance, &rd->cap_balance, sizeof x, &x);
            break;
        }
        }
        if (!ok) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, l->name, "%s: out of memory", file);
    }
    return CALQ_OK;
}

/* The node a key names through the map of node names (calq__record_key_node's rule, in
 * constant time). */
static int key_node(const calq_graph *g, const calq_strmap *nodes, const char *key, int *input)
{
    int whole = calq__strmap_get(nodes, key), split = -1, k = -1;
    size_t len = 0;
    if (calq__record_key_split(key, &len, &k)) {
        char *layer = malloc(len + 1);
        if (!layer) return -1;
        memcpy(layer, key, len);
        layer[len] = 0;
        split = calq__strmap_get(nodes, layer);
        free(layer);
    }
    return calq__record_key_pick(g, whole, split, k, input);
}

/* The key checks of §4.4 (the layer exists, it is quantizable, or the input a "<layer>:<input>"
 * key names is), shared by the reader and calq__record_check. ni: the node, or -1. */
static calq_status check_key(const calq_model *m, int ni, int input, const calq_record_layer *l, const char *mf,
                             const char *rf, calq_error *err)
{
    if (ni < 0)
        return calq__fail(err, CALQ_ERR_RECORD_FILE, l->name,
                          "find %s failure in %s. Please match %s and %s. (line %d of the record names a layer the "
                          "model does not have; the record belongs to another model, or the layer was renamed)",
                          calq__cut(l->name).s, mf, mf, rf, l->line);
    calq_node_info info;
    calq_model_node_info(m, ni, &info);
    if (input < 0 && !info.quantizable)
        return calq__fail(err, CALQ_ERR_RECORD_FILE, l->name,
                          "layer %s cannot be quantized (%s: line %d; it is a %s, not one of the quantizable layer "
                          "types of amct-reference.md §8.1). Remove its entry from the record.",
                          calq__cut(l->name).s, rf, l->line, info.op_type);
    const calq_graph *g = m->g;
    if (input >= 0 && !calq__qkind_of_input(g, ni, input))
        return calq__fail(err, CALQ_ERR_RECORD_FILE, l->name,
                          "input %d of layer %s (a %s with %d inputs) cannot be quantized on its own (%s: line %d, "
                          "key \"%s\"): a \"<layer>:<input>\" key is for a variable input of MaxPool, Add, ... "
                          "(tensor_quantize, amct-reference.md §7.2) or input 1 of a MatMul with two variable "
                          "inputs (§8.1). Remove the entry from the record (a record from before calq read a weight "
                          "behind Identity / Transpose / a Cast from float16 as a constant: calibrate again).",
                          input, calq__cut(g->nodes[ni].name).s, info.op_type, g->nodes[ni].n_inputs, rf, l->line,
                          calq__cut(l->name).s);
    return CALQ_OK;
}

static int64_t weight_channels(const calq_graph *g, int i, const calq_qkind *k);

static calq_status read_entry(const calq_tp_node *rec, void *user, calq_error *err)
{
    reader *rd = user;
    const char *file = rd->file;
    if (strcmp(rec->name, "record") != 0)
        return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL,
                          "%s:%d:%d: unknown field '%s' at the top of a record file (only 'record' entries belong "
                          "there, amct-reference.md §7.1)",
                          file, rec->line, rec->col, calq__cut(rec->name).s);
    if (rec->kind != CALQ_TP_MESSAGE)
        return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL,
                          "%s:%d:%d: 'record' must be a message: record { key: ... value { ... } }", file, rec->line,
                          rec->col);
    const calq_tp_node *key = NULL, *value = NULL;
    for (int i = 0; i < rec->n_children; i++) {
        const calq_tp_node *f = rec->children[i];
        const calq_tp_node **slot = strcmp(f->name, "key") == 0 ? &key : strcmp(f->name, "value") == 0 ? &value : NULL;
        if (!slot)
            return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL,
                              "%s:%d:%d: unknown field '%s' in a record entry (only key and value belong there)", file,
                              f->line, f->col, calq__cut(f->name).s);
        if (*slot)
            return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL, "%s:%d:%d: a record entry has two '%s' fields", file,
                              f->line, f->col, calq__cut(f->name).s);
        *slot = f;
    }
    if (!key)
        return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL, "%s:%d:%d: a record entry has no key (the layer name)", file,
                          rec->line, rec->col);
    const char *name;
    CALQ_TRY(calq_tp_string(key, file, &name, err));
    if (key->type != CALQ_TP_STRING || strlen(name) != key->text_len || !*name)
        return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL, "%s:%d:%d: key must be a non-empty quoted layer name", file,
                          key->line, key->col);
    const calq_record_layer *dup = calq__record_find(rd->r, name);
    if (dup)
        return calq__fail(err, CALQ_ERR_BAD_FORMAT, name,
                          "%s:%d:%d: layer \"%s\" appears twice in the record (first at line %d); keep one entry", file,
                          key->line, key->col, calq__cut(name).s, dup->line);
    calq_record_layer *l = calq__record_add(rd->r, name, err);
    if (!l) return err->status;
    l->line = rec->line;
    l->col = rec->col;
    rd->max_scale_w = 0;
    if (rd->m) {
        int input;
        int ni = key_node(rd->m->g, &rd->nodes, name, &input);
        CALQ_TRY(check_key(rd->m, ni, input, l, rd->mf, file, err));
        const calq_qkind *k = input < 0 ? calq__qkind_of_node(rd->m->g, ni) : NULL;
        /* LSTM / GRU / RNN carry W's per-channel values then R's: the cap is per weight times their count */
        if (k && k->weights == CALQ_QKIND_WEIGHTS_CONST)
            rd->max_scale_w = weight_channels(rd->m->g, ni, k) * calq__qkind_n_weights(k);
    }
    if (value && value->kind != CALQ_TP_MESSAGE)
        return calq__fail(err, CALQ_ERR_BAD_FORMAT, name, "%s:%d:%d: 'value' of layer \"%s\" must be a message", file,
                          value->line, value->col, calq__cut(name).s);
    rd->cap_scale_w = rd->cap_offset_w = rd->cap_shift_bit = rd->cap_balance = 0;
    CALQ_TRY(value ? read_value(rd, value, l, err) : CALQ_OK);
    if (!shift_bits_ok(l->shift_bit, l->n_shift_bit)) return shift_bit_fail(file, value->line, value->col, l, err);
    /* all 1 (what AMCT writes for a layer it did not balance) is no balancing: the model is the
     * one without it, as before calq read the field */
    bool neutral = true;
    for (int c = 0; c < l->n_balance && neutral; c++) neutral = l->balance[c] == 1.0f;
    if (neutral) {
        free(l->balance);
        l->balance = NULL;
        l->n_balance = 0;
    }
    return CALQ_OK;
}

/* m's node names -> node index; false on out-of-memory. */
static bool index_nodes(const calq_graph *g, calq_strmap *map)
{
    if (!calq__strmap_init(map, (size_t)g->n_nodes)) return false;
    for (int i = g->n_nodes - 1; i >= 0; i--) /* the first node of a name wins, as a linear search finds it */
        if (!calq__strmap_put(map, g->nodes[i].name, i)) return false;
    return true;
}

calq_status calq__record_parse_for(const char *text, size_t len, const char *filename, const calq_model *m,
                                   const char *model_label, calq_record **out, calq_error *err)
{
    *out = NULL;
    calq__cut_buf file_cut = calq__cut(label_or(filename, "record")), /* label every message */
        mf_cut = calq__cut(label_or(model_label, "model"));
    reader rd = {.file = file_cut.s, .m = m, .mf = mf_cut.s};
    rd.r = calq__record_new();
    calq_status st = rd.r ? CALQ_OK : calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "%s: out of memory", rd.file);
    if (st == CALQ_OK && m && !index_nodes(m->g, &rd.nodes))
        st = calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "%s: out of memory", rd.file);
    if (st == CALQ_OK) st = calq_tp_parse_each(text, len, rd.file, read_entry, &rd, err);
    calq__strmap_free(&rd.nodes);
    if (st != CALQ_OK) {
        calq__record_free(rd.r);
        return st;
    }
    *out = rd.r;
    return CALQ_OK;
}

calq_status calq__record_parse(const char *text, size_t len, const char *filename, calq_record **out, calq_error *err)
{
    return calq__record_parse_for(text, len, filename, NULL, NULL, out, err);
}

calq_status calq__record_read_file_for(const char *path, const calq_model *m, const char *model_label,
                                       calq_record **out, calq_error *err)
{
    char *text = NULL;
    size_t size = 0;
    *out = NULL;
    CALQ_TRY(calq__read_file_max(path, CALQ_RECORD_MAX_BYTES, "a record file", &text, &size, err));
    calq_status st = calq__record_parse_for(text, size, path, m, model_label, out, err);
    free(text);
    return st;
}

calq_status calq__record_read_file(const char *path, calq_record **out, calq_error *err)
{
    return calq__record_read_file_for(path, NULL, NULL, out, err);
}

/* ---- §4.4 ---------------------------------------------------------------------------------- */

/* Output channels a per-channel scale_w must have for node i of kind k (§8.2): 1 for kinds
 * quantized per tensor only (§8.4), 0 when unknown. */
static int64_t weight_channels(const calq_graph *g, int i, const calq_qkind *k)
{
    const calq_node *n = &g->nodes[i];
    if (k->weight_input < 0 || n->n_inputs <= k->weight_input || n->inputs[k->weight_input] < 0) return 0;
    const calq_value *w = &g->values[n->inputs[k->weight_input]];
    int ndim = w->constant ? w->constant->ndim : w->ndim;
    const int64_t *dims = w->constant ? w->constant->dims : w->dims;
    if (ndim < 2) return 0;
    if (!k->channel_wise) return 1;
    return calq__qkind_out_channels(k, n, ndim, dims);
}

/* The field checks of calq__record_check; entry i names node idx[i] (input inputs[i] when >= 0). */
/* Each field in range does not make the numbers the saved models carry: the deploy Quant's scale
 * 1/scale_d (§9.1) and deq_scale = scale_d * scale_w[c] in float32 (§6.2) must be normal floats,
 * or the models would scale by inf, 0 or a subnormal (a record of scale_d 3e38 and scale_w 3e38
 * was saved with inf deq_scales, exit 0). No calibration writes such factors. */
static calq_status check_products(const calq_record_layer *l, const char *rf, calq_error *err)
{
    const float inv = 1.0f / l->scale_d;
    if (inv < FLT_MIN)
        return calq__fail(err, CALQ_ERR_RECORD_FACTOR, l->name,
                          "scale_d of layer %s is %.9g (%s, line %d): 1/scale_d, the quantization scale of the saved "
                          "models (amct-reference.md §9.1), is %.9g, below the smallest normal float32; a scale_d "
                          "above 8.5e37 comes from no data calibration. Recalibrate the layer or correct the record",
                          calq__cut(l->name).s, (double)l->scale_d, rf, l->line, (double)inv);
    for (int c = 0; c < l->n_scale_w; c++) {
        const float deq = l->scale_d * l->scale_w[c];
        if (!(deq >= FLT_MIN) || isinf(deq))
            return calq__fail(err, CALQ_ERR_RECORD_FACTOR, l->name,
                              "layer %s (%s, line %d): deq_scale = scale_d * scale_w[%d] = %.9g * %.9g is %.9g in "
                              "float32 (amct-reference.md §6.2), %s; the saved models would scale the layer's output "
                              "by it. Recalibrate the layer or correct the record",
                              calq__cut(l->name).s, rf, l->line, c, (double)l->scale_d, (double)l->scale_w[c],
                              (double)deq, isinf(deq) ? "infinite" : "below the smallest normal float32");
    }
    return CALQ_OK;
}

static calq_status check_fields(const calq_record *r, const calq_graph *g, const int *idx, const int *inputs,
                                const char *rf, calq_error *err)
{
    /* presence and shape of the fields */
    for (int i = 0; i < r->n_layers; i++) {
        const calq_record_layer *l = &r->layers[i];
        int ni = idx[i], input = inputs[i];
        const calq_node *n = &g->nodes[ni];
        const calq_qkind *k = input < 0 ? calq__qkind_of_node(g, ni) : calq__qkind_of_input(g, ni, input);
        /* AveragePool has no weights but a scale_w of 1 (§7.1); tensor-only kinds and the inputs
         * keyed on their own (scale_d / offset_d only, §7.1) none at all */
        bool weights = input < 0 && k->weights == CALQ_QKIND_WEIGHTS_CONST;
        bool unit = input < 0 && k->weights == CALQ_QKIND_WEIGHTS_UNIT;
        if (!l->has_scale_d || !l->has_offset_d)
            return calq__fail(err, CALQ_ERR_RECORD_FILE, l->name,
                              "cannot find %s of layer %s in record_file, please check data calibration process! (%s, "
                              "line %d)",
                              l->has_scale_d ? "offset_d" : "scale_d", calq__cut(l->name).s, rf, l->line);
        if (weights && l->n_scale_w == 0)
            return calq__fail(err, CALQ_ERR_RECORD_FILE, l->name,
                              "cannot find scale_w of layer %s in record_file (%s, line %d): the weights of this %s "
                              "were not calibrated",
                              calq__cut(l->name).s, rf, l->line, n->op_type);
        if (weights && l->n_offset_w == 0)
            return calq__fail(err, CALQ_ERR_RECORD_FILE, l->name,
                              "cannot find offset_w of layer %s in record_file (%s, line %d)", calq__cut(l->name).s, rf,
                              l->line);
        if (!weights && (l->n_scale_w > (unit ? 1 : 0) || (l->n_scale_w == 1 && l->scale_w[0] != 1.0f)))
            return calq__fail(err, CALQ_ERR_RECORD_FILE, l->name,
                              "find undesirable scale_w of layer %s in record_file (%s, line %d): %s layers have no "
                              "weights; AMCT writes %s for them (§7.1)",
                              calq__cut(l->name).s, rf, l->line, n->op_type, unit ? "only scale_w: 1" : "no scale_w");
        if ((!k->shift_bit || input >= 0) && l->n_shift_bit)
            return calq__fail(err, CALQ_ERR_RECORD_FILE, l->name,
                              "shift_bit is not support, please delete shift_bit of layer %s in record_file (%s, line "
                              "%d): %s layers have no shift_bit (§6.4)",
                              calq__cut(l->name).s, rf, l->line, n->op_type);
        if (l->n_offset_w != l->n_scale_w)
            return calq__fail(err, CALQ_ERR_RECORD_FACTOR, l->name,
                              "layer %s in %s (line %d) has %d scale_w but %d offset_w values; they must be equally "
                              "many (one per output channel, or one per tensor)",
                              calq__cut(l->name).s, rf, l->line, l->n_scale_w, l->n_offset_w);
        if (l->n_shift_bit && l->n_shift_bit != l->n_scale_w)
            return calq__fail(err, CALQ_ERR_RECORD_FACTOR, l->name,
                              "layer %s in %s (line %d) has %d shift_bit but %d scale_w values; they must be equally "
                              "many (§7.1)",
                              calq__cut(l->name).s, rf, l->line, l->n_shift_bit, l->n_scale_w);
        int64_t channels = weights ? weight_channels(g, ni, k) : 1;
        /* one scale_w per weight (per tensor) or per output channel of each weight; LSTM / GRU /
         * RNN have two weights, W's values first */
        int nw = weights ? calq__qkind_n_weights(k) : 1;
        if (channels > 0 && l->n_scale_w > nw && l->n_scale_w != nw * channels)
            return calq__fail(
                err, CALQ_ERR_RECORD_FACTOR, l->name,
                nw > 1 ? "layer %s in %s (line %d) has %d scale_w values, but its W and R have %lld output "
                         "channels each; give %lld (W's, then R's) or one per weight"
                       : "layer %s in %s (line %d) has %d scale_w values, but its weight has %lld output "
                         "channels; give one per output channel or a single one",
                calq__cut(l->name).s, rf, l->line, l->n_scale_w, (long long)channels, (long long)(nw * channels));
        if (nw > 1 && l->n_scale_w < nw)
            return calq__fail(err, CALQ_ERR_RECORD_FACTOR, l->name,
                              "layer %s in %s (line %d) has %d scale_w value; its W and R take one each at least",
                              calq__cut(l->name).s, rf, l->line, l->n_scale_w);
    }
    /* the range checks, in parse_record_file.py's order */
    for (int i = 0; i < r->n_layers; i++) {
        const calq_record_layer *l = &r->layers[i];
        if (l->offset_d < -128 || l->offset_d > 127)
            return calq__fail(err, CALQ_ERR_RECORD_FACTOR, l->name,
                              "offset_d's value should be in [-128, 127] in layer %s. (%s, line %d: offset_d is %lld)",
                              calq__cut(l->name).s, rf, l->line, (long long)l->offset_d);
        int input = inputs[i], ni = idx[i];
        const calq_qkind *k = input < 0 ? calq__qkind_of_node(g, ni) : calq__qkind_of_input(g, ni, input);
        if (k->act_symmetric && l->offset_d != 0)
            return calq__fail(err, CALQ_ERR_RECORD_FACTOR, l->name,
                              "offset_d of %s is %lld (%s, line %d); a %s with two variable inputs is quantized INT8 "
                              "symmetric (amct-reference.md §8.1), offset_d 0",
                              calq__cut(l->name).s, (long long)l->offset_d, rf, l->line, g->nodes[ni].op_type);
        for (int c = 0; c < l->n_offset_w; c++)
            if (l->offset_w[c] != 0)
                return calq__fail(err, CALQ_ERR_RECORD_FACTOR, l->name,
                                  "offset_w's value should be 0 in layer %s. (%s, line %d: offset_w[%d] is %lld; calq "
                                  "and AMCT quantize weights symmetrically)",
                                  calq__cut(l->name).s, rf, l->line, c, (long long)l->offset_w[c]);
        if (scale_flaw(l->scale_d))
            return calq__fail(err, CALQ_ERR_RECORD_FACTOR, l->name,
                              "scale_d's value shoule be in positivate range of float32 in layer %s. (%s, line %d: "
                              "scale_d is %.9g: %s)",
                              calq__cut(l->name).s, rf, l->line, (double)l->scale_d, scale_flaw(l->scale_d));
        for (int c = 0; c < l->n_scale_w; c++)
            if (scale_flaw(l->scale_w[c]))
                return calq__fail(err, CALQ_ERR_RECORD_FACTOR, l->name,
                                  "scale_w's value shoule be in positivate range of float32 in layer %s. (%s, line %d: "
                                  "scale_w[%d] is %.9g: %s)",
                                  calq__cut(l->name).s, rf, l->line, c, (double)l->scale_w[c],
                                  scale_flaw(l->scale_w[c]));
        if (!shift_bits_ok(l->shift_bit, l->n_shift_bit))
            return calq__fail(err, CALQ_ERR_RECORD_FACTOR, l->name,
                              "shift_bit's value shoule be in [1, 16] or all be 0 in layer %s (%s, line %d)",
                              calq__cut(l->name).s, rf, l->line);
        CALQ_TRY(check_products(l, rf, err));
    }
    return CALQ_OK;
}

calq_status calq__record_check(const calq_record *r, const calq_model *m, const char *model_label,
                               const char *record_label, calq_error *err)
{
    calq__cut_buf mf_cut = calq__cut(label_or(model_label, "model")),
                  rf_cut = calq__cut(label_or(record_label, "record"));
    const char *mf = mf_cut.s, *rf = rf_cut.s;
    if (r->n_layers == 0)
        return calq__fail(err, CALQ_ERR_RECORD_FILE, NULL,
                          "%s: record_file is empty, no layers to be quantized. please ensure calibration is finished "
                          "(run calq calibration for batch_num batches) or that the config enables some layer.",
                          rf);
    /* keys against the graph, through a map of its node names (linear, not n^2): a quantizable
     * layer, or "<layer>:<input>" for an input quantized on its own (§7.1: tensor_quantize, and
     * input 1 of MatMul with two variable inputs) */
    calq_strmap nodes = {0};
    int *idx = malloc((size_t)r->n_layers * 2 * sizeof *idx), *inputs = idx + r->n_layers;
    if (!idx || !index_nodes(m->g, &nodes)) {
        free(idx);
        calq__strmap_free(&nodes);
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "%s: out of memory", rf);
    }
    calq_status st = CALQ_OK;
    for (int i = 0; i < r->n_layers && st == CALQ_OK; i++) {
        idx[i] = key_node(m->g, &nodes, r->layers[i].name, &inputs[i]);
        st = check_key(m, idx[i], inputs[i], &r->layers[i], mf, rf, err);
    }
    calq__strmap_free(&nodes);
    if (st == CALQ_OK) st = check_fields(r, m->g, idx, inputs, rf, err);
    free(idx);
    return st;
}
