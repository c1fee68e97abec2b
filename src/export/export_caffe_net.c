/* The output prototxt: a copy of the model's tree with the plan applied (export_caffe.h).
 *
 *   layer { name: "conv2_quant_layer" type: "Quant" bottom: "pool1" top: "conv2_quant_layer"
 *           quant_param { with_offset: true scale: 1/scale_d offset: "<offset_d as one byte>"
 *                         object_layer: "conv2" } }
 *   layer { name: "conv2" ... bottom: "conv2_quant_layer" top: "conv2" ... }
 *   layer { name: "conv2_dequant_layer" type: "DeQuant" bottom: "conv2" top: "conv2"
 *           dequant_param { channel_wise: true object_layer: "conv2" } }
 *
 * The DeQuant works in place on the layer's top, so every later layer, and the net outputs,
 * keep their blob names. Quant fields follow AMCT's QuantParameter (§9.1): scale is the
 * reciprocal 1/scale_d, offset the int8 offset_d as a one-byte string. The deq_scale values
 * live in the DeQuant's blobs (export_caffe_blobs.c), as in AMCT's DeQuant layer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "export/export_caffe.h"

static calq_status oom(calq_error *err)
{
    return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "save: out of memory");
}

/* A deep copy of a tree: written out and read back (the writer's output re-parses to the same
 * tree, textproto.h). Owner: caller. */
static calq_status copy_tree(const calq_tp_node *root, calq_tp_node **out, calq_error *err)
{
    char *text = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&text, &len);
    if (!fp) return oom(err);
    calq_status st = calq_tp_write(root, fp, err);
    if (fclose(fp) != 0 && st == CALQ_OK) st = oom(err);
    if (st == CALQ_OK) st = calq_tp_parse(text, len, "prototxt copy", out, err);
    free(text);
    return st;
}

static int child_index(const calq_tp_node *parent, const calq_tp_node *child)
{
    for (int k = 0; k < parent->n_children; k++)
        if (parent->children[k] == child) return k;
    return -1;
}

calq_tp_node *calq__xc_detach(calq_tp_node *scratch, const calq_tp_node *made)
{
    if (!made) {
        calq_tp_free(scratch);
        return NULL;
    }
    calq_tp_node *n = scratch->children[0];
    scratch->n_children = 0;
    calq_tp_free(scratch);
    return n;
}

/* Replaces the i-th `field` string of msg by s (field present). */
static bool set_string(calq_tp_node *msg, const char *field, int i, const char *s)
{
    const calq_tp_node *old = calq_tp_nth(msg, field, i);
    int k = child_index(msg, old);
    calq_tp_node *scratch = calq_tp_new_root();
    if (k < 0 || !scratch) {
        calq_tp_free(scratch);
        return false;
    }
    calq_tp_node *n = calq__xc_detach(scratch, calq_tp_add_string(scratch, field, s, strlen(s)));
    if (!n) return false;
    calq_tp_free(msg->children[k]);
    msg->children[k] = n;
    return true;
}

/* convolution_param { bias_term: false } becomes true: folding gave the Conv a bias (§8.3). */
static bool enable_bias(calq_tp_node *layer)
{
    int np = calq_tp_count(layer, "convolution_param");
    calq_tp_node *p = np ? (calq_tp_node *)calq_tp_nth(layer, "convolution_param", np - 1) : NULL;
    if (!p || p->kind != CALQ_TP_MESSAGE) return true;
    for (int k = 0; k < p->n_children; k++) {
        if (strcmp(p->children[k]->name, "bias_term") != 0) continue;
        calq_tp_node *scratch = calq_tp_new_root();
        calq_tp_node *n = scratch ? calq__xc_detach(scratch, calq_tp_add_bool(scratch, "bias_term", true)) : NULL;
        if (!n) return false;
        calq_tp_free(p->children[k]);
        p->children[k] = n;
    }
    return true;
}

static calq_tp_node *quant_layer(const calq__xc_quant *q)
{
    calq_tp_node *scratch = calq_tp_new_root();
    calq_tp_node *L = scratch ? calq_tp_add_message(scratch, "layer") : NULL;
    if (!L) return calq__xc_detach(scratch, NULL);
    char offset = (char)(int8_t)q->offset_d; /* one int8 byte (§9.1) */
    calq_tp_node *qp = NULL;
    bool ok = calq_tp_add_string(L, "name", q->name, strlen(q->name)) && calq_tp_add_string(L, "type", "Quant", 5) &&
              calq_tp_add_string(L, "bottom", q->bottom, strlen(q->bottom)) &&
              calq_tp_add_string(L, "top", q->name, strlen(q->name)) && (qp = calq_tp_add_message(L, "quant_param")) &&
              calq_tp_add_bool(qp, "with_offset", q->with_offset) &&
              calq_tp_add_float(qp, "scale", 1.0f / q->scale_d) && calq_tp_add_string(qp, "offset", &offset, 1) &&
              calq_tp_add_string(qp, "object_layer", q->object_layer, strlen(q->object_layer));
    return calq__xc_detach(scratch, ok ? L : NULL);
}

static calq_tp_node *dequant_layer(const calq__xc_layer *l, const char *top)
{
    calq_tp_node *scratch = calq_tp_new_root();
    calq_tp_node *L = scratch ? calq_tp_add_message(scratch, "layer") : NULL;
    if (!L) return calq__xc_detach(scratch, NULL);
    calq_tp_node *dp = NULL;
    bool ok = calq_tp_add_string(L, "name", l->dequant, strlen(l->dequant)) &&
              calq_tp_add_string(L, "type", "DeQuant", 7) && calq_tp_add_string(L, "bottom", top, strlen(top)) &&
              calq_tp_add_string(L, "top", top, strlen(top)) && (dp = calq_tp_add_message(L, "dequant_param")) &&
              calq_tp_add_bool(dp, "channel_wise", l->n_deq > 1) &&
              calq_tp_add_string(dp, "object_layer", l->name, strlen(l->name));
    return calq__xc_detach(scratch, ok ? L : NULL);
}

/* AntiQuant (§9.3): quant_param as the Quant's (scale 1/scale_d, offset_d as one byte), which
 * AMCT's Caffe AntiQuant layer carries no message of its own for (§13.4, §13.7): calq's reading is
 * AscendAntiQuant{scale_d, -offset_d} in the deploy model, the identity in the fake-quant one
 * (whose Quant already restores the values, §9.2). */
static calq_tp_node *antiquant_layer(const calq__xc_anti *a, const calq__xc_quant *q)
{
    calq_tp_node *scratch = calq_tp_new_root();
    calq_tp_node *L = scratch ? calq_tp_add_message(scratch, "layer") : NULL;
    if (!L) return calq__xc_detach(scratch, NULL);
    char offset = (char)(int8_t)q->offset_d;
    calq_tp_node *qp = NULL;
    bool ok = calq_tp_add_string(L, "name", a->name, strlen(a->name)) &&
              calq_tp_add_string(L, "type", "AntiQuant", 9) &&
              calq_tp_add_string(L, "bottom", q->name, strlen(q->name)) &&
              calq_tp_add_string(L, "top", a->name, strlen(a->name)) && (qp = calq_tp_add_message(L, "quant_param")) &&
              calq_tp_add_bool(qp, "with_offset", q->with_offset) &&
              calq_tp_add_float(qp, "scale", 1.0f / q->scale_d) && calq_tp_add_string(qp, "offset", &offset, 1) &&
              calq_tp_add_string(qp, "object_layer", q->object_layer, strlen(q->object_layer));
    return calq__xc_detach(scratch, ok ? L : NULL);
}

static bool insert_at(calq_tp_node *root, int index, calq_tp_node *n)
{
    if (!n) return false;
    if (calq_tp_insert(root, index, n) != 0) {
        calq_tp_free(n);
        return false;
    }
    return true;
}

calq_status calq__xc_prototxt(const calq__xc_plan *p, calq_tp_node **out, calq_error *err)
{
    *out = NULL;
    calq_tp_node *root = NULL;
    CALQ_TRY(copy_tree(p->m->prototxt, &root, err));
    calq_tp_node **L = malloc(sizeof *L * (size_t)(p->n_proto + 1));
    if (!L || calq_tp_count(root, "layer") != p->n_proto) {
        free(L);
        calq_tp_free(root);
        return L ? calq__fail(err, CALQ_ERR_INTERNAL, NULL, "save: the prototxt copy differs from the model's")
                 : oom(err);
    }
    /* one pass (calq_tp_nth per layer made a 10k-layer prototxt quadratic) */
    for (int k = 0, i = 0; k < root->n_children && i < p->n_proto; k++)
        if (strcmp(root->children[k]->name, "layer") == 0) L[i++] = root->children[k];
    bool ok = true;
    for (int i = 0; ok && i < p->n_proto; i++) {
        if (p->folded_into[i] >= 0) { /* folded into its Convolution (§8.3) */
            calq_tp_remove(root, child_index(root, L[i]));
            continue;
        }
        const char *top = p->top_after[i];
        if (top) {
            ok = set_string(L[i], "top", 0, top);
            const calq_node *n = &p->g->nodes[p->node_of[i]];
            if (ok && n->n_inputs > 2 && n->inputs[2] >= 0) ok = enable_bias(L[i]);
        }
        /* a balanced layer's DMQ Scale (export_caffe_dmq.c), then the Quants first read here
         * (its Quant reads the Scale), then the AntiQuants of this layer's bottoms (§9.3) */
        if (ok && p->dmq_of[i] >= 0)
            ok = insert_at(root, child_index(root, L[i]), calq__xc_dmq_layer(&p->dmqs[p->dmq_of[i]]));
        for (int k = 0; ok && k < p->n_quants; k++)
            if (p->quants[k].before == i) ok = insert_at(root, child_index(root, L[i]), quant_layer(&p->quants[k]));
        for (int k = 0; ok && k < p->n_antis; k++) {
            const calq__xc_anti *a = &p->antis[k];
            if (a->index != i) continue;
            ok = insert_at(root, child_index(root, L[i]), antiquant_layer(a, &p->quants[a->quant])) &&
                 set_string(L[i], "bottom", a->bottom, a->name);
        }
        if (!ok || p->quantized[i] < 0) continue;
        const calq__xc_layer *l = &p->layers[p->quantized[i]];
        const calq__xc_quant *q = &p->quants[l->quant];
        if (ok) ok = set_string(L[i], "bottom", 0, q->name);
        if (ok && !top) top = calq_tp_nth(L[i], "top", 0)->text;
        if (ok) ok = insert_at(root, child_index(root, L[i]) + 1, dequant_layer(l, top));
    }
    free(L);
    if (!ok) {
        calq_tp_free(root);
        return oom(err);
    }
    *out = root;
    return CALQ_OK;
}
