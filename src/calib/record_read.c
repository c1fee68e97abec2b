/* Reading a record file (amct-reference.md §7.1) and the save-time checks of §4.4. The reader
 * takes AMCT's Caffe and ONNX flavours and calq's own: the five factor fields are read and
 * typed; every other field of a value (skip_fusion, channels, height, width, act_type, ...) is
 * read over, as protobuf would accept it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/file.h"
#include "calib/record.h"
#include "frontend/model.h"
#include "graph/quantizable.h"
#include "textproto/textproto.h"

static const char *label_or(const char *s, const char *dflt)
{
    return s && *s ? s : dflt;
}

/* Appends a repeated scalar; false on out-of-memory. */
static bool push(void **arr, int *n, size_t elem, const void *v)
{
    void *p = realloc(*arr, (size_t)(*n + 1) * elem);
    if (!p) return false;
    memcpy((char *)p + (size_t)*n * elem, v, elem);
    *arr = p;
    (*n)++;
    return true;
}

static calq_status read_value(const calq_tp_node *v, const char *file, calq_record_layer *l, calq_error *err)
{
    for (int i = 0; i < v->n_children; i++) {
        const calq_tp_node *f = v->children[i];
        bool ok = true;
        if (strcmp(f->name, "scale_d") == 0) {
            if (l->has_scale_d)
                return calq__fail(err, CALQ_ERR_BAD_FORMAT, l->name, "%s:%d:%d: scale_d of layer %s is given twice",
                                  file, f->line, f->col, l->name);
            CALQ_TRY(calq_tp_float(f, file, &l->scale_d, err));
            l->has_scale_d = true;
        } else if (strcmp(f->name, "offset_d") == 0) {
            if (l->has_offset_d)
                return calq__fail(err, CALQ_ERR_BAD_FORMAT, l->name, "%s:%d:%d: offset_d of layer %s is given twice",
                                  file, f->line, f->col, l->name);
            CALQ_TRY(calq_tp_int(f, file, &l->offset_d, err));
            l->has_offset_d = true;
        } else if (strcmp(f->name, "scale_w") == 0) {
            float x;
            CALQ_TRY(calq_tp_float(f, file, &x, err));
            ok = push((void **)&l->scale_w, &l->n_scale_w, sizeof x, &x);
        } else if (strcmp(f->name, "offset_w") == 0) {
            int64_t x;
            CALQ_TRY(calq_tp_int(f, file, &x, err));
            ok = push((void **)&l->offset_w, &l->n_offset_w, sizeof x, &x);
        } else if (strcmp(f->name, "shift_bit") == 0) {
            uint64_t x;
            CALQ_TRY(calq_tp_uint(f, file, &x, err));
            ok = push((void **)&l->shift_bit, &l->n_shift_bit, sizeof x, &x);
        }
        /* any other field belongs to one of AMCT's flavours (§7.1) and does not matter here */
        if (!ok) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, l->name, "%s: out of memory", file);
    }
    return CALQ_OK;
}

static calq_status read_entry(const calq_tp_node *rec, const char *file, calq_record *r, calq_error *err)
{
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
                              f->line, f->col, f->name);
        if (*slot)
            return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL, "%s:%d:%d: a record entry has two '%s' fields", file,
                              f->line, f->col, f->name);
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
    const calq_record_layer *dup = calq__record_find(r, name);
    if (dup)
        return calq__fail(err, CALQ_ERR_BAD_FORMAT, name,
                          "%s:%d:%d: layer \"%s\" appears twice in the record (first at line %d); keep one entry", file,
                          key->line, key->col, name, dup->line);
    calq_record_layer *l = calq__record_add(r, name, err);
    if (!l) return err->status;
    l->line = rec->line;
    l->col = rec->col;
    if (value && value->kind != CALQ_TP_MESSAGE)
        return calq__fail(err, CALQ_ERR_BAD_FORMAT, name, "%s:%d:%d: 'value' of layer \"%s\" must be a message", file,
                          value->line, value->col, name);
    return value ? read_value(value, file, l, err) : CALQ_OK;
}

calq_status calq__record_parse(const char *text, size_t len, const char *filename, calq_record **out, calq_error *err)
{
    *out = NULL;
    const char *file = label_or(filename, "record");
    calq_tp_node *root = NULL;
    CALQ_TRY(calq_tp_parse(text, len, file, &root, err));
    calq_record *r = calq__record_new();
    calq_status st = r ? CALQ_OK : calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "%s: out of memory", file);
    for (int i = 0; st == CALQ_OK && i < root->n_children; i++) {
        const calq_tp_node *f = root->children[i];
        if (strcmp(f->name, "record") != 0)
            st = calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL,
                            "%s:%d:%d: unknown field '%s' at the top of a record file (only 'record' entries belong "
                            "there, amct-reference.md §7.1)",
                            file, f->line, f->col, f->name);
        else
            st = read_entry(f, file, r, err);
    }
    calq_tp_free(root);
    if (st != CALQ_OK) {
        calq__record_free(r);
        return st;
    }
    *out = r;
    return CALQ_OK;
}

calq_status calq__record_read_file(const char *path, calq_record **out, calq_error *err)
{
    char *text = NULL;
    size_t size = 0;
    *out = NULL;
    CALQ_TRY(calq__read_file(path, &text, &size, err));
    calq_status st = calq__record_parse(text, size, path, out, err);
    free(text);
    return st;
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

static bool positive_finite(float x)
{
    return x > 0.0f && isfinite(x);
}

calq_status calq__record_check(const calq_record *r, const calq_model *m, const char *model_label,
                               const char *record_label, calq_error *err)
{
    const char *mf = label_or(model_label, "model"), *rf = label_or(record_label, "record");
    const calq_graph *g = m->g;
    if (r->n_layers == 0)
        return calq__fail(err, CALQ_ERR_RECORD_FILE, NULL,
                          "%s: record_file is empty, no layers to be quantized. please ensure calibration is finished "
                          "(run calq calibration for batch_num batches) or that the config enables some layer.",
                          rf);
    /* keys against the graph: a quantizable layer, or "<layer>:<input>" for an input quantized
     * on its own (§7.1: tensor_quantize, and input 1 of MatMul with two variable inputs) */
    for (int i = 0; i < r->n_layers; i++) {
        const calq_record_layer *l = &r->layers[i];
        int input;
        int ni = calq__record_key_node(g, l->name, &input);
        if (ni < 0)
            return calq__fail(err, CALQ_ERR_RECORD_FILE, l->name,
                              "find %s failure in %s. Please match %s and %s. (line %d of the record names a layer the "
                              "model does not have; the record belongs to another model, or the layer was renamed)",
                              l->name, mf, mf, rf, l->line);
        calq_node_info info;
        calq_model_node_info(m, ni, &info);
        if (input < 0 && !info.quantizable)
            return calq__fail(err, CALQ_ERR_RECORD_FILE, l->name,
                              "layer %s cannot be quantized (%s: line %d; it is a %s, not one of the quantizable layer "
                              "types of amct-reference.md §8.1). Remove its entry from the record.",
                              l->name, rf, l->line, info.op_type);
        if (input >= 0 && !calq__qkind_of_input(g, ni, input))
            return calq__fail(err, CALQ_ERR_RECORD_FILE, l->name,
                              "input %d of layer %s (a %s with %d inputs) cannot be quantized on its own (%s: line %d, "
                              "key \"%s\"): a \"<layer>:<input>\" key is for a variable input of MaxPool, Add, ... "
                              "(tensor_quantize, amct-reference.md §7.2) or input 1 of a MatMul with two variable "
                              "inputs (§8.1). Remove the entry from the record.",
                              input, g->nodes[ni].name, info.op_type, g->nodes[ni].n_inputs, rf, l->line, l->name);
    }
    /* presence and shape of the fields */
    for (int i = 0; i < r->n_layers; i++) {
        const calq_record_layer *l = &r->layers[i];
        int input;
        int ni = calq__record_key_node(g, l->name, &input);
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
                              l->has_scale_d ? "offset_d" : "scale_d", l->name, rf, l->line);
        if (weights && l->n_scale_w == 0)
            return calq__fail(err, CALQ_ERR_RECORD_FILE, l->name,
                              "cannot find scale_w of layer %s in record_file (%s, line %d): the weights of this %s "
                              "were not calibrated",
                              l->name, rf, l->line, n->op_type);
        if (weights && l->n_offset_w == 0)
            return calq__fail(err, CALQ_ERR_RECORD_FILE, l->name,
                              "cannot find offset_w of layer %s in record_file (%s, line %d)", l->name, rf, l->line);
        if (!weights && (l->n_scale_w > (unit ? 1 : 0) || (l->n_scale_w == 1 && l->scale_w[0] != 1.0f)))
            return calq__fail(err, CALQ_ERR_RECORD_FILE, l->name,
                              "find undesirable scale_w of layer %s in record_file (%s, line %d): %s layers have no "
                              "weights; AMCT writes %s for them (§7.1)",
                              l->name, rf, l->line, n->op_type, unit ? "only scale_w: 1" : "no scale_w");
        if ((!k->shift_bit || input >= 0) && l->n_shift_bit)
            return calq__fail(err, CALQ_ERR_RECORD_FILE, l->name,
                              "shift_bit is not support, please delete shift_bit of layer %s in record_file (%s, line "
                              "%d): %s layers have no shift_bit (§6.4)",
                              l->name, rf, l->line, n->op_type);
        if (l->n_offset_w != l->n_scale_w)
            return calq__fail(err, CALQ_ERR_RECORD_FACTOR, l->name,
                              "layer %s in %s (line %d) has %d scale_w but %d offset_w values; they must be equally "
                              "many (one per output channel, or one per tensor)",
                              l->name, rf, l->line, l->n_scale_w, l->n_offset_w);
        if (l->n_shift_bit && l->n_shift_bit != l->n_scale_w)
            return calq__fail(err, CALQ_ERR_RECORD_FACTOR, l->name,
                              "layer %s in %s (line %d) has %d shift_bit but %d scale_w values; they must be equally "
                              "many (§7.1)",
                              l->name, rf, l->line, l->n_shift_bit, l->n_scale_w);
        int64_t channels = weights ? weight_channels(g, ni, k) : 1;
        if (channels > 0 && l->n_scale_w > 1 && l->n_scale_w != channels)
            return calq__fail(
                err, CALQ_ERR_RECORD_FACTOR, l->name,
                "layer %s in %s (line %d) has %d scale_w values, but its weight has %lld output channels; "
                "give one per output channel or a single one",
                l->name, rf, l->line, l->n_scale_w, (long long)channels);
    }
    /* the range checks, in parse_record_file.py's order */
    for (int i = 0; i < r->n_layers; i++) {
        const calq_record_layer *l = &r->layers[i];
        if (l->offset_d < -128 || l->offset_d > 127)
            return calq__fail(err, CALQ_ERR_RECORD_FACTOR, l->name,
                              "offset_d's value should be in [-128, 127] in layer %s. (%s, line %d: offset_d is %lld)",
                              l->name, rf, l->line, (long long)l->offset_d);
        int input;
        int ni = calq__record_key_node(g, l->name, &input);
        const calq_qkind *k = input < 0 ? calq__qkind_of_node(g, ni) : calq__qkind_of_input(g, ni, input);
        if (k->act_symmetric && l->offset_d != 0)
            return calq__fail(err, CALQ_ERR_RECORD_FACTOR, l->name,
                              "offset_d of %s is %lld (%s, line %d); a %s with two variable inputs is quantized INT8 "
                              "symmetric (amct-reference.md §8.1), offset_d 0",
                              l->name, (long long)l->offset_d, rf, l->line, g->nodes[ni].op_type);
        for (int c = 0; c < l->n_offset_w; c++)
            if (l->offset_w[c] != 0)
                return calq__fail(err, CALQ_ERR_RECORD_FACTOR, l->name,
                                  "offset_w's value should be 0 in layer %s. (%s, line %d: offset_w[%d] is %lld; calq "
                                  "and AMCT quantize weights symmetrically)",
                                  l->name, rf, l->line, c, (long long)l->offset_w[c]);
        if (!positive_finite(l->scale_d))
            return calq__fail(err, CALQ_ERR_RECORD_FACTOR, l->name,
                              "scale_d's value shoule be in positivate range of float32 in layer %s. (%s, line %d: "
                              "scale_d is %.9g)",
                              l->name, rf, l->line, (double)l->scale_d);
        for (int c = 0; c < l->n_scale_w; c++)
            if (!positive_finite(l->scale_w[c]))
                return calq__fail(err, CALQ_ERR_RECORD_FACTOR, l->name,
                                  "scale_w's value shoule be in positivate range of float32 in layer %s. (%s, line %d: "
                                  "scale_w[%d] is %.9g)",
                                  l->name, rf, l->line, c, (double)l->scale_w[c]);
        if (l->n_shift_bit) {
            bool all_zero = true, all_in = true;
            for (int c = 0; c < l->n_shift_bit; c++) {
                all_zero &= l->shift_bit[c] == 0;
                all_in &= l->shift_bit[c] >= 1 && l->shift_bit[c] <= 16;
            }
            if (!all_zero && !all_in)
                return calq__fail(err, CALQ_ERR_RECORD_FACTOR, l->name,
                                  "shift_bit's value shoule be in [1, 16] or all be 0 in layer %s (%s, line %d)",
                                  l->name, rf, l->line);
        }
    }
    return CALQ_OK;
}
