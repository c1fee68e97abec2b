/* Arena, message builders, pre-save checks and the atomic write shared by the ONNX exporters
 * (export_common.h). */
#include "export/export_common.h"
#include "quant/quant.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/file.h"
#include "graph/balance.h"

void *calq__xa_alloc(calq__xa *a, size_t size)
{
    if (a->oom) return NULL;
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 256;
        void **b = realloc(a->blocks, cap * sizeof *b);
        if (!b) {
            a->oom = true;
            return NULL;
        }
        a->blocks = b;
        a->cap = cap;
    }
    void *p = calloc(1, size ? size : 1);
    if (!p) {
        a->oom = true;
        return NULL;
    }
    a->blocks[a->n++] = p;
    return p;
}

char *calq__xa_strdup(calq__xa *a, const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = calq__xa_alloc(a, n);
    if (p) memcpy(p, s, n);
    return p;
}

char *calq__xa_printf(calq__xa *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *p = n < 0 ? NULL : calq__xa_alloc(a, (size_t)n + 1);
    if (!p) return NULL;
    va_start(ap, fmt);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return p;
}

void calq__xa_free(calq__xa *a)
{
    for (size_t i = 0; i < a->n; i++) free(a->blocks[i]);
    free(a->blocks);
    memset(a, 0, sizeof *a);
}

calq_status calq__xg_init(calq__xgraph *x, size_t cap_nodes, size_t cap_inits, calq_error *err)
{
    memset(x, 0, sizeof *x);
    x->nodes = calq__xa_alloc(&x->a, cap_nodes * sizeof *x->nodes);
    x->inits = calq__xa_alloc(&x->a, cap_inits * sizeof *x->inits);
    if (!x->nodes || !x->inits) {
        calq__xa_free(&x->a);
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "save: out of memory");
    }
    x->cap_nodes = cap_nodes;
    x->cap_inits = cap_inits;
    return CALQ_OK;
}

void calq__xg_free(calq__xgraph *x)
{
    calq__strmap_free(&x->names);
    calq__xa_free(&x->a);
}

/* A full pointer list moves to one twice its size in the arena (the old block stays there until
 * calq__xa_free: at most as much again). The initial capacities are estimates: converting the
 * nodes of If / Loop / Scan bodies (export_upgrade.c) adds initializers per body node. */
static bool ensure_room(calq__xa *a, void ***list, size_t *cap, size_t n)
{
    if (n < *cap) return true;
    size_t ncap = *cap ? 2 * *cap : 16;
    if (ncap > SIZE_MAX / sizeof(void *)) return false;
    void **p = calq__xa_alloc(a, ncap * sizeof(void *));
    if (!p) return false;
    if (n) memcpy(p, *list, n * sizeof(void *));
    *list = p;
    *cap = ncap;
    return true;
}

bool calq__xg_node(calq__xgraph *x, Onnx__NodeProto *n)
{
    if (!n || !ensure_room(&x->a, (void ***)&x->nodes, &x->cap_nodes, x->n_nodes)) return false;
    for (size_t k = 0; k < n->n_output; k++)
        if (n->output[k] && n->output[k][0] && !calq__strmap_put(&x->names, n->output[k], 1)) return false;
    x->nodes[x->n_nodes++] = n;
    return true;
}

bool calq__xg_init_add(calq__xgraph *x, Onnx__TensorProto *t)
{
    if (!t || !ensure_room(&x->a, (void ***)&x->inits, &x->cap_inits, x->n_inits)) return false;
    if (t->name && !calq__strmap_put(&x->names, t->name, 1)) return false;
    x->inits[x->n_inits++] = t;
    return true;
}

Onnx__TensorProto *calq__xg_tensor(calq__xgraph *x, const char *name, int data_type, const int64_t *dims, int ndim,
                                   const void *data, size_t nbytes)
{
    Onnx__TensorProto *t = calq__xa_alloc(&x->a, sizeof *t);
    int64_t *d = calq__xa_alloc(&x->a, sizeof(int64_t) * (size_t)(ndim > 0 ? ndim : 1));
    uint8_t *raw = calq__xa_alloc(&x->a, nbytes);
    char *nm = calq__xa_strdup(&x->a, name);
    if (!t || !d || !raw || !nm) return NULL;
    onnx__tensor_proto__init(t);
    if (ndim > 0) memcpy(d, dims, sizeof(int64_t) * (size_t)ndim);
    t->n_dims = (size_t)ndim;
    t->dims = d;
    t->has_data_type = 1;
    t->data_type = data_type;
    t->name = nm;
    memcpy(raw, data, nbytes);
    t->has_raw_data = 1;
    t->raw_data.len = nbytes;
    t->raw_data.data = raw;
    return t;
}

static char **name_array(calq__xa *a, const char *const *names, int n)
{
    char **v = calq__xa_alloc(a, sizeof(char *) * (size_t)(n > 0 ? n : 1));
    if (!v) return NULL;
    for (int i = 0; i < n; i++)
        if (!(v[i] = calq__xa_strdup(a, names[i] ? names[i] : ""))) return NULL;
    return v;
}

Onnx__NodeProto *calq__xg_new_node(calq__xgraph *x, const char *op, const char *name, const char *const *inputs,
                                   int n_inputs, const char *const *outputs, int n_outputs)
{
    Onnx__NodeProto *n = calq__xa_alloc(&x->a, sizeof *n);
    if (!n) return NULL;
    onnx__node_proto__init(n);
    n->op_type = calq__xa_strdup(&x->a, op);
    n->name = calq__xa_strdup(&x->a, name);
    n->input = name_array(&x->a, inputs, n_inputs);
    n->output = name_array(&x->a, outputs, n_outputs);
    n->n_input = (size_t)n_inputs;
    n->n_output = (size_t)n_outputs;
    /* room for a few attributes (axis; AscendQuant's five; the upgrades add none) */
    n->attribute = calq__xa_alloc(&x->a, sizeof(Onnx__AttributeProto *) * 8);
    if (!n->op_type || !n->name || !n->input || !n->output || !n->attribute) return NULL;
    return n;
}

Onnx__NodeProto *calq__xg_copy_node(calq__xgraph *x, const Onnx__NodeProto *src)
{
    Onnx__NodeProto *n = calq__xa_alloc(&x->a, sizeof *n);
    if (!n) return NULL;
    *n = *src;
    n->input = name_array(&x->a, (const char *const *)src->input, (int)src->n_input);
    n->output = name_array(&x->a, (const char *const *)src->output, (int)src->n_output);
    /* the attribute pointers are shared; the array is the arena's (+4 slots) so it can change */
    n->attribute = calq__xa_alloc(&x->a, sizeof(Onnx__AttributeProto *) * (src->n_attribute + 4));
    if (!n->input || !n->output || !n->attribute) return NULL;
    if (src->n_attribute) memcpy(n->attribute, src->attribute, sizeof(Onnx__AttributeProto *) * src->n_attribute);
    return n;
}

bool calq__xg_attr_int(calq__xgraph *x, Onnx__NodeProto *n, const char *name, int64_t v)
{
    Onnx__AttributeProto *at = calq__xa_alloc(&x->a, sizeof *at);
    if (!at) return false;
    onnx__attribute_proto__init(at);
    at->name = calq__xa_strdup(&x->a, name);
    if (!at->name) return false;
    at->has_type = 1;
    at->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    at->has_i = 1;
    at->i = v;
    n->attribute[n->n_attribute++] = at;
    return true;
}

static Onnx__AttributeProto *new_attr(calq__xgraph *x, Onnx__NodeProto *n, const char *name, int type)
{
    Onnx__AttributeProto *at = calq__xa_alloc(&x->a, sizeof *at);
    if (!at) return NULL;
    onnx__attribute_proto__init(at);
    at->name = calq__xa_strdup(&x->a, name);
    if (!at->name) return NULL;
    at->has_type = 1;
    at->type = type;
    n->attribute[n->n_attribute++] = at;
    return at;
}

bool calq__xg_attr_float(calq__xgraph *x, Onnx__NodeProto *n, const char *name, float v)
{
    Onnx__AttributeProto *at = new_attr(x, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    if (!at) return false;
    at->has_f = 1;
    at->f = v;
    return true;
}

bool calq__xg_attr_str(calq__xgraph *x, Onnx__NodeProto *n, const char *name, const char *v)
{
    Onnx__AttributeProto *at = new_attr(x, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    char *d = calq__xa_strdup(&x->a, v);
    if (!at || !d) return false;
    at->has_s = 1;
    at->s.data = (uint8_t *)d;
    at->s.len = strlen(d);
    return true;
}

void calq__xg_attr_remove(calq__xgraph *x, Onnx__NodeProto *n, const char *name)
{
    (void)x;
    size_t k = 0;
    for (size_t i = 0; i < n->n_attribute; i++)
        if (strcmp(n->attribute[i]->name, name) != 0) n->attribute[k++] = n->attribute[i];
    n->n_attribute = k;
}

const Onnx__AttributeProto *calq__xg_attr_find(const Onnx__NodeProto *n, const char *name)
{
    for (size_t i = 0; i < n->n_attribute; i++)
        if (n->attribute[i]->name && strcmp(n->attribute[i]->name, name) == 0) return n->attribute[i];
    return NULL;
}

void calq__wchan_init(const calq_qkind *k, const calq_node *n, const calq_tensor *w, calq__wchan *m)
{
    int64_t numel = calq_tensor_numel(w);
    *m = (calq__wchan){.deconv = k->layout == CALQ_WEIGHTS_CONV_TRANSPOSE, .rnn = k->layout == CALQ_WEIGHTS_RNN};
    m->d0 = w->ndim > 0 ? w->dims[0] : 1;
    m->d1 = w->ndim > 1 ? w->dims[1] : 1;
    m->last = w->ndim > 0 ? w->dims[w->ndim - 1] : 1;
    m->g = m->deconv ? calq__qkind_group(k, n) : 1;
    int64_t div = m->deconv ? m->d0 * m->d1 : m->d0;
    m->per = div > 0 ? numel / div : 0; /* no elements: never asked */
}

void calq__quantize_weights(const calq__wchan *m, const float *w, int64_t numel, const float *scales, int n_scales,
                            float lo, float hi, const int8_t *ada, int8_t *out, float *fq)
{
    for (int64_t i = 0; i < numel;) {
        int64_t len = n_scales > 1 ? calq__wchan_run(m, i, numel) : numel;
        const float s = scales[n_scales > 1 ? calq__wchan_of(m, i) : 0];
        for (int64_t j = i; j < i + len; j++) {
            float q = calq__round_away(w[j] / s);
            q = q > hi ? hi : q < lo ? lo : q;
            if (ada) q = ada[j];
            out[j] = (int8_t)q;
            if (fq) fq[j] = q * s; /* -0.0 stays */
        }
        i += len;
    }
}

void calq__dequantize_weights(const calq__wchan *m, const int8_t *wq, int64_t numel, const float *scales, int n_scales,
                              float *out)
{
    for (int64_t i = 0; i < numel;) {
        int64_t len = n_scales > 1 ? calq__wchan_run(m, i, numel) : numel;
        const float s = scales[n_scales > 1 ? calq__wchan_of(m, i) : 0];
        for (int64_t j = i; j < i + len; j++) out[j] = (float)wq[j] * s;
        i += len;
    }
}

int64_t calq__weight_channels(const calq_qkind *k, const calq_node *n, const calq_tensor *w)
{
    return calq__qkind_out_channels(k, n, w->ndim, w->dims);
}

calq_status calq__save_check(const calq_model *m, const calq_record *r, const calq_config *cfg,
                             const char *record_label, calq_error *err)
{
    CALQ_TRY(calq__config_require_layers(cfg, "save", err));
    CALQ_TRY(calq__record_check(r, m, m->path, record_label, err));
    /* DMQ factors (tensor_balance_factor, §7.1): a layer that takes balancing, one per input
     * channel (folding changes output channels only, so the model's own graph tells) */
    for (int i = 0; i < r->n_layers; i++) {
        const calq_record_layer *rl = &r->layers[i];
        if (!rl->n_balance) continue;
        int ni = -1;
        for (int k = 0; k < m->g->n_nodes && ni < 0; k++)
            if (!strcmp(m->g->nodes[k].name, rl->name)) ni = k;
        calq__balance_geom geo;
        calq_error why = {0};
        if (ni < 0 || calq__balance_geom_of(m->g, ni, calq__qkind_of_node(m->g, ni), &geo, &why) != CALQ_OK)
            return calq__fail(err, CALQ_ERR_RECORD_FILE, rl->name,
                              "%s: key \"%s\" has tensor_balance_factor, but it is not a layer DMQ balancing applies "
                              "to (%s)",
                              record_label ? record_label : "record", rl->name,
                              ni < 0 ? "the model has no such layer" : why.message);
        if (geo.n_ch != rl->n_balance)
            return calq__fail(err, CALQ_ERR_RECORD_FILE, rl->name,
                              "%s: layer \"%s\" has %d tensor_balance_factor values; its weight has %lld input "
                              "channels, and DMQ balancing takes one per channel",
                              record_label ? record_label : "record", rl->name, rl->n_balance, (long long)geo.n_ch);
    }
    /* every enabled layer must have its factors: list all of them at once (user-journeys §2) */
    size_t cap = 64, len = 0;
    int n_missing = 0;
    char *list = malloc(cap);
    if (!list) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "save: out of memory");
    list[0] = '\0';
    const char *first = NULL;
    for (int i = 0; i < cfg->n_layers * 2 + cfg->n_tensors; i++) {
        /* each enabled layer's key, "<layer>:1" of a MatMul with two variable inputs (§8.1), and
         * "<layer>:<input>" of each tensor_quantize entry (§7.1) */
        const bool tensor = i >= cfg->n_layers * 2;
        const calq_layer_config *lc = tensor ? &cfg->tensors[i - cfg->n_layers * 2] : &cfg->layers[i / 2];
        const bool second = !tensor && i % 2;
        if (!lc->quant_enable || (second && !((lc->kind->act_inputs >> 1) & 1u))) continue;
        char *own = second || tensor ? calq__record_key(lc->name, tensor ? lc->input : 1) : NULL;
        const char *key = second || tensor ? own : lc->name;
        if (!key) {
            free(list);
            return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "save: out of memory");
        }
        bool have = calq__record_find(r, key) != NULL;
        size_t need = len + strlen(key) + 3;
        if (have) {
            free(own);
            continue;
        }
        if (need > cap) {
            while (cap < need) cap *= 2;
            char *p = realloc(list, cap);
            if (!p) {
                free(own);
                free(list);
                return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "save: out of memory");
            }
            list = p;
        }
        len += (size_t)sprintf(list + len, "%s%s", n_missing ? ", " : "", key);
        if (!n_missing) first = lc->name;
        n_missing++;
        free(own);
    }
    calq_status st = CALQ_OK;
    if (n_missing)
        st = calq__fail(err, CALQ_ERR_RECORD_FILE, n_missing == 1 ? first : NULL,
                        "the record %s has no factors for %d quantizable layer%s: %s (the config enables them; AMCT: "
                        "\"%s is quantizable in config but has no record in record_file\"). Likely causes: calibration "
                        "was stopped before batch_num batches; the layers were skipped during calibration (pass the "
                        "config calibration wrote with --config); the record belongs to another model. Nothing "
                        "written.",
                        record_label, n_missing, n_missing == 1 ? "" : "s", list, first);
    free(list);
    return st;
}

calq_status calq__xg_write(const Onnx__ModelProto *mp, const Onnx__GraphProto *graph, const char *path,
                           calq_staged_files *out, calq_error *err)
{
    Onnx__ModelProto m = *mp;
    m.graph = (Onnx__GraphProto *)graph;
    size_t size = onnx__model_proto__get_packed_size(&m);
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "save: out of memory for %zu bytes", size);
    size_t n = onnx__model_proto__pack(&m, buf);
    calq_status st =
        n == size ? calq__staged_write(out, path, buf, size, err)
                  : calq__fail(err, CALQ_ERR_INTERNAL, NULL, "save: protobuf packing gave %zu of %zu bytes", n, size);
    free(buf);
    return st;
}
