/* DMQ balancing on the IR (balance.h). */
#include "graph/balance.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/unique_name.h"
#include "graph/quantizable.h"
#include "graph/splice.h"

calq_status calq__balance_geom_of(const calq_graph *g, int ni, const calq_qkind *k, calq__balance_geom *geo,
                                  calq_error *err)
{
    const calq_node *n = &g->nodes[ni];
    memset(geo, 0, sizeof *geo);
    if (!k || !k->balance)
        return calq__fail(
            err, CALQ_ERR_BAD_PARAMETERS, n->name,
            "layer \"%s\" (%s) takes no DMQ balancing: it applies to Conv, ConvTranspose, Gemm and MatMul "
            "with a constant weight",
            n->name, n->op_type);
    const calq_tensor *w = k->weight_input >= 0 && n->n_inputs > k->weight_input && n->inputs[k->weight_input] >= 0
                               ? g->values[n->inputs[k->weight_input]].constant
                               : NULL;
    if (!w || w->dtype != CALQ_DTYPE_FLOAT32 || w->ndim < 2)
        return calq__fail(err, CALQ_ERR_UNSUPPORTED, n->name,
                          "DMQ balancing of layer \"%s\" (%s) needs a constant float32 weight of rank 2 or more",
                          n->name, n->op_type);
    int axis = k->weight_in_axis < 0 ? w->ndim + k->weight_in_axis : k->weight_in_axis;
    if (k->transpose_attr && calq__attr_int(n, k->transpose_attr, 0)) {
        if (axis == w->ndim - 1)
            axis = w->ndim - 2;
        else if (axis == w->ndim - 2)
            axis = w->ndim - 1;
    }
    geo->w_axis = axis;
    geo->w_len = w->dims[axis];
    geo->w_inner = 1;
    for (int d = axis + 1; d < w->ndim; d++) geo->w_inner *= w->dims[d];
    geo->group = 1;
    geo->n_ch = geo->w_len;
    /* a grouped Conv: group gi reads input channels gi*Cin/g .. (gi+1)*Cin/g - 1 with the output
     * channels gi*Cout/g .. (gi+1)*Cout/g - 1 (depthwise: Cin/g = 1). ConvTranspose keeps every
     * input channel on axis 0 whatever its group. */
    int group = k->layout == CALQ_WEIGHTS_CONV ? calq__qkind_group(k, n) : 1;
    if (group > 1) {
        if (w->dims[0] % group != 0)
            return calq__fail(err, CALQ_ERR_SHAPE, n->name,
                              "DMQ balancing of layer \"%s\": group %d does not divide its %lld output channels",
                              n->name, group, (long long)w->dims[0]);
        geo->group = group;
        geo->n_ch = geo->w_len * group;
        geo->out_per_group = w->dims[0] / group;
        geo->out_inner = 1;
        for (int d = 1; d < w->ndim; d++) geo->out_inner *= w->dims[d];
    }
    if (geo->n_ch <= 0)
        return calq__fail(err, CALQ_ERR_SHAPE, n->name,
                          "DMQ balancing of layer \"%s\": its weight has no input channel", n->name);
    return CALQ_OK;
}

int64_t calq__balance_channel(const calq__balance_geom *geo, int64_t i)
{
    int64_t c = (i / geo->w_inner) % geo->w_len;
    if (geo->group > 1) c += (i / geo->out_inner / geo->out_per_group) * geo->w_len;
    return c;
}

void calq__balance_weight_absmax(const calq__balance_geom *geo, const calq_tensor *w, float *wmax)
{
    for (int64_t c = 0; c < geo->n_ch; c++) wmax[c] = 0.0f;
    const float *d = w->data;
    int64_t numel = calq_tensor_numel(w);
    for (int64_t i = 0; i < numel; i++) {
        float a = fabsf(d[i]);
        int64_t c = calq__balance_channel(geo, i);
        if (isfinite(a) && a > wmax[c]) wmax[c] = a;
    }
}

int calq__balance_act_axis(const calq_qkind *k, int rank)
{
    if (!k || !k->balance || rank < 1) return -1;
    int axis = k->act_channel_axis < 0 ? rank + k->act_channel_axis : k->act_channel_axis;
    return axis >= 0 && axis < rank ? axis : -1;
}

static calq_tensor *new_float(int ndim, const int64_t *dims)
{
    calq_tensor *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->dtype = CALQ_DTYPE_FLOAT32;
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++) t->dims[d] = dims[d];
    int64_t numel = calq_tensor_numel(t);
    t->data = malloc(sizeof(float) * (size_t)(numel > 0 ? numel : 1));
    if (!t->data) {
        free(t);
        return NULL;
    }
    return t;
}

/* A new value of g named "<base><suffix>", made unique (calq__graph_unique_name), holding t (heap,
 * owned by g from here on; freed when this fails). Returns its index, or -1 with err set. */
static int named_value(calq_graph *g, const char *base, const char *suffix, calq_tensor *t, bool constant,
                       const char *layer, calq_error *err)
{
    char *name = calq__graph_unique_name(g, base, suffix, "_calq", 1);
    if (!name) {
        if (t) {
            calq_tensor_free_data(t);
            free(t);
        }
        calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, layer, "DMQ balancing: out of memory");
        return -1;
    }
    const int v = calq__graph_new_value(g, name, t, constant, err);
    free(name);
    return v;
}

calq_status calq__pass_balance(calq_graph *g, int ni, const float *s, int64_t n, int *mul_out, calq_error *err)
{
    const calq_qkind *k = calq__qkind_of_node(g, ni);
    calq__balance_geom geo;
    CALQ_TRY(calq__balance_geom_of(g, ni, k, &geo, err));
    const calq_node *nd = &g->nodes[ni];
    const char *layer = nd->name;
    if (n != geo.n_ch)
        return calq__fail(
            err, CALQ_ERR_RECORD_FILE, layer,
            "layer \"%s\" has %lld DMQ balance factors (tensor_balance_factor); its weight has %lld input "
            "channels, and it takes one per channel",
            layer, (long long)n, (long long)geo.n_ch);
    for (int64_t c = 0; c < n; c++)
        if (!(s[c] > 0.0f) || !isfinite(s[c]))
            return calq__fail(err, CALQ_ERR_RECORD_FACTOR, layer,
                              "layer \"%s\": DMQ balance factor %lld is %g; every factor must be finite and > 0", layer,
                              (long long)c, (double)s[c]);
    int wi = k->weight_input;
    const calq_value *wv = &g->values[nd->inputs[wi]];
    const calq_tensor *w = wv->constant;
    int x = nd->inputs[0];
    /* NCHW layers: the input has the weight's rank, the factors broadcast as [C, 1, ...]; matrix
     * products: the channels are the last axis whatever the rank, [C] */
    int rank = k->act_channel_axis > 0 ? w->ndim : 1;

    /* W·s, one multiply per element (calibration's ARQ and every writer see these values) */
    calq_tensor *wb = new_float(w->ndim, w->dims);
    int64_t sd[CALQ_MAX_DIMS] = {n};
    int snd = k->act_channel_axis > 0 ? rank - k->act_channel_axis : 1; /* [C, 1, ...] or [C] */
    for (int d = 1; d < snd; d++) sd[d] = 1;
    calq_tensor *inv = new_float(snd, sd);
    if (!wb || !inv) {
        if (wb) calq_tensor_free_data(wb);
        if (inv) calq_tensor_free_data(inv);
        free(wb);
        free(inv);
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, layer, "DMQ balancing: out of memory");
    }
    const float *wd = w->data;
    float *bd = wb->data, *id = inv->data;
    int64_t numel = calq_tensor_numel(w);
    for (int64_t i = 0; i < numel; i++) bd[i] = wd[i] * s[calq__balance_channel(&geo, i)];
    for (int64_t c = 0; c < n; c++) id[c] = 1.0f / s[c];

    /* value names not yet in g: "<base>", else "<base>_calq<k>" (graph.h) */
    const int wnew = named_value(g, wv->name, ".dmq", wb, true, layer, err);
    if (wnew < 0) {
        calq_tensor_free_data(inv);
        free(inv);
        return err->status;
    }
    const int snew = named_value(g, g->nodes[ni].name, ".dmq.scale", inv, true, layer, err);
    if (snew < 0) return err->status;
    const int y = named_value(g, g->nodes[ni].name, ".dmq.output0", NULL, false, layer, err);
    if (y < 0) return err->status;
    g->values[y].dtype = CALQ_DTYPE_FLOAT32;
    g->values[y].ndim = g->values[x].ndim;
    memcpy(g->values[y].dims, g->values[x].dims, sizeof g->values[y].dims);
    /* balance.h's "<layer>.dmq", in full, unless a node has that name: the IR does not require node
     * names to be unique, but the config, the record and the writers find layers by name, and a
     * model's layer "<layer>.dmq" would be found as this Mul */
    char *mname = calq__unique_name(g->nodes[ni].name, ".dmq", "_calq", 1, calq__graph_node_name_taken, g);
    int in[2] = {x, snew};
    int mul = mname ? calq__graph_new_node(g, mname, "Mul", in, 2, &y, 1, err) : -1;
    free(mname);
    if (mul < 0)
        return mname ? err->status : calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, layer, "DMQ balancing: out of memory");
    g->nodes[ni].inputs[0] = y; /* ni is still the layer: new nodes are appended */
    g->nodes[ni].inputs[wi] = wnew;
    if (mul_out) *mul_out = y;
    return calq__graph_toposort(g, err);
}
