/* The output caffemodel: the model's NetParameter with the plan applied (export_caffe.h).
 *
 * Quantized layer (record factors scale_d, offset_d, scale_w[c]; weights as folded, §8.3):
 *   w_q[i]    = clamp(round_half_away(w[i] / scale_w[c]), -128, 127)       (ARQ's rounding, §6.1)
 *   bias_q[c] = round_half_even(b[c] / deq[c]), deq[c] = scale_d * scale_w[c] (§6.2, int32-checked)
 *   fake-quant: blobs w_q * scale_w[c] and bias_q * deq[c] (floats); DeQuant blobs deqscale,
 *               shift_bit, offset_w (floats, AMCT's DeQuant layer layout, §9.2)
 *   deploy:     blobs int8_data w_q and int32_data bias_q; DeQuant blob uint64_data
 *               calq_deq_scale_pack(deq[c], shift_bit[c], 0) (§6.3)
 * A DMQ-balanced layer's w is W·s (the plan's graph is rewritten, export_caffe_dmq.c), and its
 * Scale layer gets one float blob, 1/s.
 * A Conv that absorbed a BatchNorm / Scale and is not quantized gets its folded float weights;
 * the folded layers are dropped; every other layer entry is kept as it was (borrowed, so fields
 * calq does not know, kept by protobuf-c as unknown fields, are written back unchanged). The
 * output lists every layer in `layer`: legacy V1 `layers` entries become LayerParameters with
 * the same name and blobs, which is all Caffe matches weights by. */
#include <string.h>

#include "base/error.h"
#include "caffe.pb-c.h"
#include "calib/adaround.h"
#include "export/export_caffe.h"

static calq_status oom(calq_error *err)
{
    return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "save: out of memory");
}

/* A blob like `like` (its shape fields) without values, or a new one of shape [n] when like
 * is NULL. Arena memory. */
static CalqCaffe__BlobProto *empty_blob(calq__xa *a, const CalqCaffe__BlobProto *like, int64_t n)
{
    CalqCaffe__BlobProto *b = calq__xa_alloc(a, sizeof *b);
    if (!b) return NULL;
    if (like) {
        *b = *like; /* shape and legacy dims borrowed; values replaced below */
        b->n_data = b->n_diff = b->n_double_data = b->n_double_diff = b->n_int32_data = b->n_uint64_data = 0;
        b->data = b->diff = NULL;
        b->double_data = b->double_diff = NULL;
        b->int32_data = NULL;
        b->uint64_data = NULL;
        b->has_int8_data = 0;
        b->int8_data.len = 0;
        b->int8_data.data = NULL;
        return b;
    }
    calq_caffe__blob_proto__init(b);
    b->shape = calq__xa_alloc(a, sizeof *b->shape);
    int64_t *dim = calq__xa_alloc(a, sizeof(int64_t));
    if (!b->shape || !dim) return NULL;
    calq_caffe__blob_shape__init(b->shape);
    dim[0] = n;
    b->shape->n_dim = 1;
    b->shape->dim = dim;
    return b;
}

static float *alloc_floats(calq__xa *a, int64_t n)
{
    return calq__xa_alloc(a, sizeof(float) * (size_t)(n > 0 ? n : 1));
}

/* The quantized (or, for a folded float Conv, the folded float) weight and bias blobs of entry
 * k, replacing blobs[0..1] of the caffemodel's entry. *n_out blobs in *out (arena). */
static calq_status layer_blobs(calq__xc_plan *p, int k, CalqCaffe__BlobProto *const *orig, size_t n_orig,
                               CalqCaffe__BlobProto ***out, size_t *n_out, calq_error *err)
{
    calq__xa *a = &p->a;
    const calq_node *n = &p->g->nodes[p->node_of[k]];
    const calq__xc_layer *l = p->quantized[k] >= 0 ? &p->layers[p->quantized[k]] : NULL;
    const calq_tensor *w = n->n_inputs > 1 && n->inputs[1] >= 0 ? p->g->values[n->inputs[1]].constant : NULL;
    const calq_tensor *bias = n->n_inputs > 2 && n->inputs[2] >= 0 ? p->g->values[n->inputs[2]].constant : NULL;
    if (!w) { /* AVE pooling: no blobs to change */
        *out = (CalqCaffe__BlobProto **)orig;
        *n_out = n_orig;
        return CALQ_OK;
    }
    int64_t numel = calq_tensor_numel(w), nb = bias ? calq_tensor_numel(bias) : 0;
    if (n_orig < 1 || w->dtype != CALQ_DTYPE_FLOAT32 || (bias && bias->dtype != CALQ_DTYPE_FLOAT32))
        return calq__fail(err, CALQ_ERR_INTERNAL, n->name, "save: layer \"%s\": unexpected weights", n->name);
    size_t n_new = n_orig > (bias ? 2u : 1u) ? n_orig : (bias ? 2u : 1u);
    CalqCaffe__BlobProto **blobs = calq__xa_alloc(a, sizeof *blobs * n_new);
    if (!blobs) return oom(err);
    memcpy(blobs, orig, sizeof *blobs * n_orig);
    CalqCaffe__BlobProto *wb = empty_blob(a, orig[0], numel);
    CalqCaffe__BlobProto *bb = bias ? empty_blob(a, n_orig > 1 ? orig[1] : NULL, nb) : NULL;
    if (!wb || (bias && !bb)) return oom(err);
    blobs[0] = wb;
    if (bias) blobs[1] = bb;
    *out = blobs;
    *n_out = n_new;
    const float *wd = w->data;
    if (!l) { /* a float Conv with BatchNorm / Scale folded in: the folded values (read-only borrow) */
        wb->n_data = (size_t)numel;
        wb->data = (float *)wd;
        if (bias) {
            bb->n_data = (size_t)nb;
            bb->data = (float *)bias->data;
        }
        return CALQ_OK;
    }
    const calq_record_layer *rl = l->rl;
    int8_t *wq = calq__xa_alloc(a, (size_t)numel);
    float *wf = p->deploy ? NULL : alloc_floats(a, numel);
    if (!wq || (!p->deploy && !wf)) return oom(err);
    const int8_t *ada; /* ada_quantize: the learned rounding from the record's side file */
    CALQ_TRY(calq__ada_weights(rl, w, &ada, err));
    calq__wchan wc;
    calq__wchan_init(l->kind, n, w, &wc);
    calq__quantize_weights(&wc, wd, numel, rl->scale_w, rl->n_scale_w, -128.0f, 127.0f, ada, wq, wf);
    if (p->deploy) {
        wb->has_int8_data = 1;
        wb->int8_data.len = (size_t)numel;
        wb->int8_data.data = (uint8_t *)wq;
    } else {
        wb->n_data = (size_t)numel;
        wb->data = wf;
    }
    if (!bias) return CALQ_OK;
    if (nb != l->n_deq && l->n_deq != 1)
        return calq__fail(err, CALQ_ERR_INTERNAL, n->name, "save: layer \"%s\": %lld biases for %lld channels", n->name,
                          (long long)nb, (long long)l->n_deq);
    int32_t *bq = calq__xa_alloc(a, sizeof(int32_t) * (size_t)nb);
    if (!bq) return oom(err);
    if (calq_quant_bias(bias->data, nb, rl->scale_d, rl->scale_w, rl->n_scale_w, n->name, bq, err) != CALQ_OK)
        return calq__prefix(err, "save: layer \"%s\" (scale_d %g in the record)", n->name, (double)rl->scale_d);
    if (p->deploy) {
        bb->n_int32_data = (size_t)nb;
        bb->int32_data = bq;
        return CALQ_OK;
    }
    float *bf = alloc_floats(a, nb);
    if (!bf) return oom(err);
    for (int64_t c = 0; c < nb; c++) bf[c] = (float)bq[c] * l->deq[l->n_deq > 1 ? c : 0]; /* §6.2 */
    bb->n_data = (size_t)nb;
    bb->data = bf;
    return CALQ_OK;
}

/* The DeQuant layer of quantized layer l and its blobs. */
static CalqCaffe__LayerParameter *dequant_entry(calq__xc_plan *p, const calq__xc_layer *l)
{
    calq__xa *a = &p->a;
    CalqCaffe__LayerParameter *lp = calq__xa_alloc(a, sizeof *lp);
    if (!lp) return NULL;
    calq_caffe__layer_parameter__init(lp);
    lp->name = l->dequant;
    lp->type = "DeQuant";
    lp->n_blobs = p->deploy ? 1 : 3;
    lp->blobs = calq__xa_alloc(a, sizeof *lp->blobs * lp->n_blobs);
    if (!lp->blobs) return NULL;
    for (size_t i = 0; i < lp->n_blobs; i++)
        if (!(lp->blobs[i] = empty_blob(a, NULL, l->n_deq))) return NULL;
    size_t n = (size_t)l->n_deq;
    if (p->deploy) {
        uint64_t *v = calq__xa_alloc(a, sizeof(uint64_t) * n);
        if (!v) return NULL;
        for (size_t c = 0; c < n; c++) v[c] = calq_deq_scale_pack(l->deq[c], l->shift[c], 0); /* §6.3 */
        lp->blobs[0]->n_uint64_data = n;
        lp->blobs[0]->uint64_data = v;
        return lp;
    }
    float *shift = alloc_floats(a, (int64_t)n), *offset_w = alloc_floats(a, (int64_t)n);
    if (!shift || !offset_w) return NULL;
    for (size_t c = 0; c < n; c++) shift[c] = (float)l->shift[c];
    lp->blobs[0]->n_data = lp->blobs[1]->n_data = lp->blobs[2]->n_data = n;
    lp->blobs[0]->data = l->deq;
    lp->blobs[1]->data = shift;
    lp->blobs[2]->data = offset_w;
    return lp;
}

/* Entry index of the prototxt layer named `name` (the frontend's names), or -1. */
static int entry_of(const calq__xc_plan *p, const char *name)
{
    for (int i = 0; name && i < p->n_proto; i++) {
        const char *nm = calq__xc_string(p->proto[i], "name");
        if (nm && !strcmp(nm, name)) return i;
    }
    return -1;
}

calq_status calq__xc_caffemodel(calq__xc_plan *p, uint8_t **buf, size_t *len, calq_error *err)
{
    calq__xa *a = &p->a;
    const CalqCaffe__NetParameter *src = p->m->caffe_net;
    CalqCaffe__NetParameter net;
    if (src)
        net = *src;
    else
        calq_caffe__net_parameter__init(&net);
    size_t n_src = src ? src->n_layer + src->n_layers : 0, n = 0;
    CalqCaffe__LayerParameter **out =
        calq__xa_alloc(a, sizeof *out * (n_src + (size_t)p->n_layers + (size_t)p->n_dmqs + 1));
    if (!out) return oom(err);
    for (size_t i = 0; i < n_src; i++) {
        bool v1 = i >= src->n_layer;
        CalqCaffe__LayerParameter *lp = v1 ? NULL : src->layer[i];
        const CalqCaffe__V1LayerParameter *vp = v1 ? src->layers[i - src->n_layer] : NULL;
        const char *name = v1 ? vp->name : lp->name;
        int k = entry_of(p, name);
        if (k >= 0 && p->folded_into[k] >= 0) continue; /* folded away (§8.3) */
        bool patch = k >= 0 && p->node_of[k] >= 0 && (p->quantized[k] >= 0 || p->changed[k]);
        if (v1 || patch) {
            CalqCaffe__LayerParameter *np = calq__xa_alloc(a, sizeof *np);
            if (!np) return oom(err);
            if (v1) {
                calq_caffe__layer_parameter__init(np);
                np->name = vp->name;
                np->n_blobs = vp->n_blobs;
                np->blobs = vp->blobs;
            } else {
                *np = *lp; /* a shallow copy: only the blob list changes */
            }
            if (patch) CALQ_TRY(layer_blobs(p, k, np->blobs, np->n_blobs, &np->blobs, &np->n_blobs, err));
            lp = np;
        }
        out[n++] = lp;
    }
    for (int l = 0; l < p->n_layers; l++)
        if (!(out[n++] = dequant_entry(p, &p->layers[l]))) return oom(err);
    for (int d = 0; d < p->n_dmqs; d++) /* the DMQ Scales' 1/s blobs (export_caffe_dmq.c) */
        if (!(out[n++] = calq__xc_dmq_entry(p, &p->dmqs[d]))) return oom(err);
    net.n_layer = n;
    net.layer = out;
    net.n_layers = 0;
    net.layers = NULL;
    *len = calq_caffe__net_parameter__get_packed_size(&net);
    *buf = calq__xa_alloc(a, *len);
    if (!*buf) return oom(err);
    size_t packed = calq_caffe__net_parameter__pack(&net, *buf);
    if (packed != *len)
        return calq__fail(err, CALQ_ERR_INTERNAL, NULL, "save: protobuf packing gave %zu of %zu bytes", packed, *len);
    return CALQ_OK;
}
