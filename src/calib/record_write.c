/* Building and writing the record file (amct-reference.md §7.1). The layout is the one AMCT's
 * writers produce: `record { key value { scale_d offset_d scale_w* offset_w* shift_bit* } }`,
 * floats in shortest round-trip form (calq_tp_add_float), so reading the file back gives the
 * same bits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/file.h"
#include "calib/record.h"
#include "graph/quantizable.h"
#include "textproto/textproto.h"

calq_record *calq__record_new(void)
{
    return calloc(1, sizeof(calq_record));
}

static void layer_release(calq_record_layer *l)
{
    free(l->name);
    free(l->scale_w);
    free(l->offset_w);
    free(l->shift_bit);
    free(l->ada_w);
    free(l->balance);
}

void calq__record_free(calq_record *r)
{
    if (!r) return;
    for (int i = 0; i < r->n_layers; i++) layer_release(&r->layers[i]);
    free(r->layers);
    calq__strmap_free(&r->index);
    free(r);
}

calq_record_layer *calq__record_add(calq_record *r, const char *name, calq_error *err)
{
    if (r->n_layers == r->cap_layers) {
        int cap = r->cap_layers ? 2 * r->cap_layers : 16;
        calq_record_layer *p = realloc(r->layers, (size_t)cap * sizeof *p);
        if (!p) {
            calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, name, "record: out of memory");
            return NULL;
        }
        r->layers = p;
        r->cap_layers = cap;
    }
    calq_record_layer *l = &r->layers[r->n_layers];
    memset(l, 0, sizeof *l);
    l->name = strdup(name);
    if (!l->name || !calq__strmap_put(&r->index, l->name, r->n_layers)) {
        free(l->name);
        l->name = NULL;
        calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, name, "record: out of memory");
        return NULL;
    }
    r->n_layers++;
    return l;
}

const calq_record_layer *calq__record_find(const calq_record *r, const char *name)
{
    int i = calq__strmap_get(&r->index, name);
    return i >= 0 ? &r->layers[i] : NULL;
}

char *calq__record_key(const char *layer, int input)
{
    size_t n = strlen(layer) + 16;
    char *k = malloc(n);
    if (k) snprintf(k, n, "%s:%d", layer, input);
    return k;
}

bool calq__record_key_split(const char *key, size_t *len, int *input)
{
    const char *colon = strrchr(key, ':');
    if (!colon || colon == key || !colon[1] || strlen(colon + 1) > 4) return false;
    int k = 0;
    for (const char *p = colon + 1; *p; p++) {
        if (*p < '0' || *p > '9') return false;
        k = 10 * k + (*p - '0');
    }
    *len = (size_t)(colon - key);
    *input = k;
    return true;
}

int calq__record_key_pick(const calq_graph *g, int whole, int split, int split_input, int *input)
{
    /* the node of that name, unless it is no layer while the other reading names an input that
     * is quantized on its own (a node named "mm:1" beside MatMul "mm", whose input 1 calq keys
     * so) */
    const bool split_ok = split >= 0 && calq__qkind_of_input(g, split, split_input) != NULL;
    if (whole >= 0 && (!split_ok || calq__node_quantizable(g, whole))) {
        *input = -1;
        return whole;
    }
    *input = split >= 0 ? split_input : -1;
    return split;
}

int calq__record_key_node(const calq_graph *g, const char *key, int *input)
{
    int whole = -1, split = -1, k = -1;
    size_t len = 0;
    for (int i = 0; i < g->n_nodes && whole < 0; i++)
        if (strcmp(g->nodes[i].name, key) == 0) whole = i;
    if (calq__record_key_split(key, &len, &k))
        for (int i = 0; i < g->n_nodes && split < 0; i++)
            if (strlen(g->nodes[i].name) == len && strncmp(g->nodes[i].name, key, len) == 0) split = i;
    return calq__record_key_pick(g, whole, split, k, input);
}

/* One `record { ... }` entry; false on out-of-memory. */
static bool add_entry(calq_tp_node *root, const calq_record_layer *l)
{
    calq_tp_node *rec = calq_tp_add_message(root, "record");
    if (!rec || !calq_tp_add_string(rec, "key", l->name, strlen(l->name))) return false;
    calq_tp_node *v = calq_tp_add_message(rec, "value");
    if (!v) return false;
    if (l->has_scale_d && !calq_tp_add_float(v, "scale_d", l->scale_d)) return false;
    if (l->has_offset_d && !calq_tp_add_int(v, "offset_d", l->offset_d)) return false;
    for (int c = 0; c < l->n_scale_w; c++)
        if (!calq_tp_add_float(v, "scale_w", l->scale_w[c])) return false;
    for (int c = 0; c < l->n_offset_w; c++)
        if (!calq_tp_add_int(v, "offset_w", l->offset_w[c])) return false;
    for (int c = 0; c < l->n_shift_bit; c++)
        if (!calq_tp_add_uint(v, "shift_bit", l->shift_bit[c])) return false;
    /* §7.1's ONNX field (13), after the factors as in AMCT's message order */
    for (int c = 0; c < l->n_balance; c++)
        if (!calq_tp_add_float(v, "tensor_balance_factor", l->balance[c])) return false;
    return true;
}

/* r as a text-format tree (owner: caller, calq_tp_free); NULL after failing. */
static calq_tp_node *record_tree(const calq_record *r, const char *path, calq_error *err)
{
    calq_tp_node *root = calq_tp_new_root();
    if (!root) {
        calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "record %s: out of memory", path);
        return NULL;
    }
    for (int i = 0; i < r->n_layers; i++) {
        if (!add_entry(root, &r->layers[i])) {
            calq_tp_free(root);
            calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, r->layers[i].name, "record %s: out of memory", path);
            return NULL;
        }
    }
    return root;
}

calq_status calq__record_write_file(const calq_record *r, const char *path, calq_error *err)
{
    calq_tp_node *root = record_tree(r, path, err);
    if (!root) return err->status;
    calq_status st = calq_tp_write_file(root, path, err);
    calq_tp_free(root);
    return st;
}

calq_status calq__record_stage(const calq_record *r, calq_staged_files *s, const char *path, calq_error *err)
{
    calq_tp_node *root = record_tree(r, path, err);
    if (!root) return err->status;
    FILE *fp;
    calq_status st = calq__staged_open(s, path, &fp, err);
    if (st == CALQ_OK) st = calq_tp_write(root, fp, err);
    calq_tp_free(root);
    return st;
}
