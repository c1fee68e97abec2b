/* DMQ balancing in AMCT's Caffe models (export_caffe.h; amct-reference.md §7.1
 * tensor_balance_factor, §7.2 dmq_balancer_param, §7.3 dmq_balancer; docs/numerics.md "DMQ
 * balancing", docs/caffe.md).
 *
 * Calibration rewrote each balanced layer as Mul(X, 1/s) -> layer(W·s) (graph/balance.h) and
 * computed its scale_d on the Mul's output and its scale_w on W·s. The Caffe files say the same
 * with Caffe's own layers: a Scale layer (one bottom, one learned blob holding 1/s, no bias) on
 * the layer's bottom, read by the layer's Quant, and the layer's weights W·s quantized with the
 * record's scale_w (export_caffe_blobs.c reads them from the rewritten plan.g).
 *
 * The Scale is always written, never folded into the layer that produces the bottom: that layer
 * may be quantized itself (its record scale_w are of its unbalanced weights, so folding 1/s into
 * them would quantize other values than calibration did), may feed other readers, or be
 * followed by a non-linear layer (MTCNN's PReLU); a Scale is one float multiply per element that
 * Caffe, OpenCV's DNN and calq all run. */
#include <string.h>

#include "base/error.h"
#include "base/log.h"
#include "exec/plan.h"
#include "export/export_caffe.h"
#include "graph/balance.h"
#include "graph/quantizable.h"

static calq_status oom(calq_error *err)
{
    return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "save: out of memory");
}

static int find_node(const calq_graph *g, const char *name)
{
    for (int i = 0; i < g->n_nodes; i++)
        if (!strcmp(g->nodes[i].name, name)) return i;
    return -1;
}

/* The Scale's axis and blob shape for layer node ni with n factors. Convolution and
 * Deconvolution: their input channels, axis 1 of the bottom, [C]. InnerProduct is Flatten(axis) +
 * Gemm in the IR (docs/caffe.md) and its factors are per flattened input: Caffe's Scale covers
 * the bottom's axes from `axis` (num_axes -1 in Caffe's terms, written as their count), the
 * blob shaped as those axes, whose row-major order is the flattening's. */
static calq_status scale_shape(const calq__xc_plan *p, int ni, int64_t n, const char *name, calq__xc_dmq *d,
                               calq_error *err)
{
    const calq_graph *g = p->g;
    const calq_node *nd = &g->nodes[ni];
    const calq_qkind *k = calq__qkind_of_node(g, ni);
    d->axis = 1;
    d->n_dims = 1;
    d->dims[0] = n;
    if (!k || k->act_channel_axis >= 0 || nd->n_inputs < 1 || nd->inputs[0] < 0) return CALQ_OK;
    int pr = g->values[nd->inputs[0]].producer;
    if (pr < 0 || strcmp(g->nodes[pr].op_type, "Flatten") != 0 || g->nodes[pr].n_inputs < 1)
        return CALQ_OK; /* a 2-axis bottom, flattened from axis 1: [K] on axis 1 */
    const calq_node *f = &g->nodes[pr];
    const calq_value *b = &g->values[f->inputs[0]];
    int a = (int)calq__attr_int(f, "axis", 1);
    if (a < 0) a += b->ndim;
    int64_t numel = a >= 0 && a < b->ndim ? 1 : -1; /* -1: unknown */
    for (int i = a; numel > 0 && i < b->ndim; i++) numel = b->dims[i] > 0 ? numel * b->dims[i] : -1;
    if (numel != n)
        return calq__fail(err, CALQ_ERR_SHAPE, name,
                          "save: layer \"%s\" has %lld DMQ balance factors (tensor_balance_factor), one per input of "
                          "its InnerProduct, but the shape of its bottom \"%s\" from axis %d is not known to hold "
                          "that many (rank %d); give the net's inputs a fixed shape (--input_shape)",
                          name, (long long)n, b->name, a, b->ndim);
    d->axis = a;
    d->n_dims = b->ndim - a;
    for (int i = 0; i < d->n_dims; i++) d->dims[i] = b->dims[a + i];
    return CALQ_OK;
}

calq_status calq__xc_balance(calq__xc_plan *p, const char *const *names, calq_error *err)
{
    const calq_config *cfg = p->cfg;
    p->dmq_of = calq__xa_alloc(&p->a, sizeof(int) * ((size_t)p->n_proto + 1));
    if (!p->dmq_of) return oom(err);
    for (int i = 0; i < p->n_proto; i++) p->dmq_of[i] = -1;
    int n_bal = 0;
    for (int i = 0; i < cfg->n_layers; i++) {
        const calq_record_layer *rl = calq__record_find(p->rec, cfg->layers[i].name);
        if (cfg->layers[i].quant_enable && rl && rl->n_balance) n_bal++;
    }
    if (!n_bal) return CALQ_OK;
    p->dmqs = calq__xa_alloc(&p->a, sizeof *p->dmqs * (size_t)n_bal);
    /* an InnerProduct's Scale covers its bottom's axes, whose sizes the graph of a Caffe net
     * does not carry: inferred from the input shapes the model has now (those calibration ran
     * with, or --input_shape), as the ONNX writers do (export_onnx_qdq.c infer_shapes) */
    bool unknown = false;
    for (int v = 0; v < p->g->n_values && !unknown; v++)
        unknown = p->g->values[v].ndim < 0 && !p->g->values[v].constant;
    calq_error e = {0};
    int n_inferred = 0;
    if (unknown && calq__infer_value_shapes(p->g, 1, &n_inferred, &e) != CALQ_OK)
        calq__log(CALQ_LOG_DEBUG, "calq: save: the model's shapes could not be inferred (%s)", e.message);
    calq_strmap entry = {0};
    if (!p->dmqs || !calq__strmap_init(&entry, (size_t)p->n_proto)) return oom(err);
    bool ok = true;
    for (int i = p->n_proto - 1; i >= 0 && ok; i--) ok = calq__strmap_put(&entry, names[i], i);
    calq_status st = ok ? CALQ_OK : oom(err);
    for (int li = 0; st == CALQ_OK && li < cfg->n_layers; li++) {
        const calq_layer_config *lc = &cfg->layers[li];
        const calq_record_layer *rl = calq__record_find(p->rec, lc->name);
        if (!lc->quant_enable || !rl || !rl->n_balance) continue;
        int i = calq__strmap_get(&entry, lc->name), ni = find_node(p->g, lc->name);
        if (i < 0 || ni < 0) continue; /* not a layer of this net: calq__save_check named it */
        calq__xc_dmq *d = &p->dmqs[p->n_dmqs];
        memset(d, 0, sizeof *d);
        d->index = i;
        d->bottom = calq__xc_string(p->proto[i], "bottom");
        if (!d->bottom) {
            st = calq__fail(err, CALQ_ERR_BAD_FORMAT, lc->name, "save: layer \"%s\" has no bottom", lc->name);
            break;
        }
        if ((st = scale_shape(p, ni, rl->n_balance, lc->name, d, err)) != CALQ_OK) break;
        int y = -1;
        /* the rewrite calibration made (calibrate_dmq.c): the weights become W·s in p->g */
        if ((st = calq__pass_balance(p->g, ni, rl->balance, rl->n_balance, &y, err)) != CALQ_OK) {
            calq__prefix(err, "save");
            break;
        }
        int mul = p->g->values[y].producer;
        const calq_tensor *inv =
            mul >= 0 && p->g->nodes[mul].n_inputs > 1 ? p->g->values[p->g->nodes[mul].inputs[1]].constant : NULL;
        if (!inv || calq_tensor_numel(inv) != rl->n_balance) {
            st = calq__fail(err, CALQ_ERR_INTERNAL, lc->name, "save: layer \"%s\": no balancing Mul", lc->name);
            break;
        }
        d->inv = inv->data;
        if (!(d->name = calq__xc_fresh_name(p, names[i], "_dmq_scale"))) {
            st = oom(err);
            break;
        }
        p->dmq_of[i] = p->n_dmqs++;
    }
    calq__strmap_free(&entry);
    return st;
}

calq_tp_node *calq__xc_dmq_layer(const calq__xc_dmq *d)
{
    calq_tp_node *scratch = calq_tp_new_root();
    calq_tp_node *L = scratch ? calq_tp_add_message(scratch, "layer") : NULL, *sp = NULL;
    bool ok = L && calq_tp_add_string(L, "name", d->name, strlen(d->name)) &&
              calq_tp_add_string(L, "type", "Scale", 5) &&
              calq_tp_add_string(L, "bottom", d->bottom, strlen(d->bottom)) &&
              calq_tp_add_string(L, "top", d->name, strlen(d->name)) && (sp = calq_tp_add_message(L, "scale_param")) &&
              calq_tp_add_int(sp, "axis", d->axis) && calq_tp_add_int(sp, "num_axes", d->n_dims) &&
              calq_tp_add_bool(sp, "bias_term", false);
    return calq__xc_detach(scratch, ok ? L : NULL);
}

CalqCaffe__LayerParameter *calq__xc_dmq_entry(calq__xc_plan *p, const calq__xc_dmq *d)
{
    calq__xa *a = &p->a;
    CalqCaffe__LayerParameter *lp = calq__xa_alloc(a, sizeof *lp);
    CalqCaffe__BlobProto **blobs = calq__xa_alloc(a, sizeof *blobs);
    CalqCaffe__BlobProto *b = calq__xa_alloc(a, sizeof *b);
    CalqCaffe__BlobShape *shape = calq__xa_alloc(a, sizeof *shape);
    int64_t *dims = calq__xa_alloc(a, sizeof(int64_t) * (size_t)d->n_dims);
    if (!lp || !blobs || !b || !shape || !dims) return NULL;
    calq_caffe__layer_parameter__init(lp);
    calq_caffe__blob_proto__init(b);
    calq_caffe__blob_shape__init(shape);
    int64_t numel = 1;
    for (int i = 0; i < d->n_dims; i++) numel *= dims[i] = d->dims[i];
    shape->n_dim = (size_t)d->n_dims;
    shape->dim = dims;
    b->shape = shape;
    b->n_data = (size_t)numel;
    b->data = (float *)d->inv; /* read-only borrow from plan.g, packed before it is freed */
    blobs[0] = b;
    lp->name = d->name;
    lp->type = "Scale";
    lp->n_blobs = 1;
    lp->blobs = blobs;
    return lp;
}
