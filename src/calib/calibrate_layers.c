/* Which layers a calibration run quantizes, which calibrator each gets, and their weights.
 * Layers come from the config (enabled entries, model order). Layers reading the same tensor
 * share one activation calibrator and so get the same scale_d / offset_d (amct-reference.md
 * §3.2). Weights are quantized right away with ARQ on the folded weight (§1.1 3b, §6.1, §8.3). */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/log.h"
#include "calib/calibrate.h"
#include "calib/record.h"
#include "graph/quantizable.h"

static calq_status new_group(calq__calib *cal, const char *tensor, int layer, calq_error *err)
{
    calq__calib_group *gr = &cal->groups[cal->n_groups];
    const calq_layer_config *lc = cal->layers[layer].cfg;
    memset(gr, 0, sizeof *gr);
    gr->tensor = tensor;
    gr->first_layer = layer;
    gr->next_same = -1;
    gr->stats.min = 1.0f;
    gr->stats.max = -1.0f;
    gr->stats.bad_batch = -1;
    gr->stats.absmax_batch = -1;
    cal->n_groups++; /* counted first, so calq__calib_free releases a half-made group */
    return calq__group_setup(gr, lc, cal->n_threads, err);
}

/* The group calibrating `tensor` the way entry li wants it, or a new one. Layers reading one
 * tensor share it (§3.2), except that a symmetric-only kind (§8.1) does not share with an
 * asymmetric reader: its factors must have offset 0. */
static calq_status join_group(calq__calib *cal, int li, const char *tensor, calq_error *err)
{
    bool asym = cal->layers[li].cfg->act.asymmetric;
    /* a balanced input (DMQ) is X·(1/s) with the layer's own s: its group is its own, kept out of
     * the tensor map until calibrate_dmq.c points it at the balancing Mul's output */
    bool own = cal->layers[li].input == 0 && cal->layers[li].cfg->dmq > 0.0;
    /* hashed by tensor: a scan of every group per layer made a 10k-layer setup quadratic */
    int gi = -1, last = -1;
    for (int k = own ? -1 : calq__strmap_get(&cal->group_of, tensor); k >= 0 && gi < 0; k = cal->groups[k].next_same) {
        if (cal->layers[cal->groups[k].first_layer].cfg->act.asymmetric == asym) gi = k;
        last = k;
    }
    if (gi < 0) {
        gi = cal->n_groups;
        CALQ_TRY(new_group(cal, tensor, li, err));
        /* an own group is mapped by calibrate_dmq.c, under the balanced tensor */
        if (!own && last >= 0)
            cal->groups[last].next_same = gi;
        else if (!own && !calq__strmap_put(&cal->group_of, tensor, gi))
            return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "calibration: out of memory");
    }
    cal->layers[li].group = gi;
    cal->groups[gi].n_layers++;
    return CALQ_OK;
}

/* The input of a LeakyRelu is the output of the layer before it: onnxruntime needs it quantized
 * (the Q after a QLinearConv), though only LeakyRelu(x) goes on. IFMR, minimising the error of x
 * with the negative end kept at the data's minimum (§3.5), spends about as many of the 256 codes
 * on the negative side as on the positive one, where LeakyRelu shrinks the negative side by alpha
 * (0.1 in NanoDet: the range [-3.6, 2.7] becomes [-0.36, 2.7]). This input is calibrated instead
 * with mse, the error weighted by alpha^2 below 0 (the error after the LeakyRelu) and both clip
 * ends searched: NanoDet-m's worst output cosine in onnxruntime went from 0.9854 to 0.9897
 * (docs/performance.md, "onnxruntime int8"). Only for an entry whose tensor no layer reads (the
 * first reader's calibrator serves a shared tensor, §3.2). */
static void leaky_input(const calq_node *n, calq_layer_config *l)
{
    if (n->domain[0] || strcmp(n->op_type, "LeakyRelu") || l->input != 0 || !l->act.asymmetric) return;
    float alpha = calq__attr_float(n, "alpha", 0.01f);
    if (!(alpha > 0.0f && alpha < 1.0f)) return;
    l->act.algo = CALQ_ACT_MSE;
    l->act.num_of_bins = 2048;
    l->act.neg_weight = (double)alpha * (double)alpha;
}

/* int8_tensors: an entry for every variable float input of the tensor-only kinds' nodes (the
 * float ops onnxruntime runs on int8 tensors, graph/qkind.c) that tensor_quantize does not list
 * already, with the layer defaults; the int8 QDQ / QOperator writers take their factors from the
 * record (export_onnx_int8.c). Not the inputs of an Add / Mul with a constant operand
 * (calq__qkind_int8_input): both writers leave it float, so the record needs no factors for it. */
static calq_status add_implicit(calq__calib *cal, calq_error *err)
{
    if (!cal->int8_tensors) return CALQ_OK;
    const calq_graph *g = cal->g;
    int cap = 0;
    for (int i = 0; i < g->n_nodes; i++) cap += g->nodes[i].n_inputs;
    cal->implicit = calloc((size_t)cap + 1, sizeof *cal->implicit);
    if (!cal->implicit) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "calibration: out of memory");
    for (int i = 0; i < g->n_nodes; i++) {
        const calq_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_inputs; k++) {
            const calq_qkind *kind = calq__qkind_int8_input(g, i, k);
            if (!kind || !kind->tensor_only || calq__config_find_tensor(cal->cfg, n->name, k)) continue;
            calq_layer_config *l = &cal->implicit[cal->n_implicit++];
            calq__layer_config_defaults(l, kind, cal->cfg->activation_offset);
            l->name = n->name; /* borrowed from the run's graph */
            l->op_type = (char *)kind->onnx;
            l->node = i;
            l->tensor = true;
            l->input = k;
            leaky_input(n, l);
        }
    }
    return CALQ_OK;
}

static calq_status setup_layers(calq__calib *cal, const calq_strmap *node_of, calq_error *err);

calq_status calq__calib_setup(calq__calib *cal, calq_error *err)
{
    const calq_config *c = cal->cfg;
    /* at most two calibrated inputs per layer entry (graph/qkind.h act_inputs) */
    CALQ_TRY(add_implicit(cal, err));
    size_t cap = 2 * (size_t)c->n_layers + (size_t)c->n_tensors + (size_t)cal->n_implicit + 1;
    cal->layers = calloc(cap, sizeof *cal->layers);
    cal->groups = calloc(cap, sizeof *cal->groups);
    calq_strmap node_of = {0}; /* node names of the run's graph (the config's names are looked up) */
    if (!cal->layers || !cal->groups || !calq__strmap_init(&node_of, (size_t)cal->g->n_nodes))
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "calibration: out of memory");
    for (int i = cal->g->n_nodes - 1; i >= 0; i--) /* the first of a name wins, as the scan gave */
        if (!calq__strmap_put(&node_of, cal->g->nodes[i].name, i)) {
            calq__strmap_free(&node_of);
            return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "calibration: out of memory");
        }
    calq_status st = setup_layers(cal, &node_of, err);
    calq__strmap_free(&node_of);
    return st;
}

/* An input's "<layer>:<input>" key that is also the name of a quantizable layer: the record
 * could not tell the two entries apart (a non-layer node of that name is no clash: readers take
 * the input then, calq__record_key_pick). Diagnosed before anything is computed. */
static calq_status key_clash(const calq__calib *cal, const calq_strmap *node_of, const calq__calib_layer *l,
                             calq_error *err)
{
    const int other = calq__strmap_get(node_of, l->key);
    if (other < 0 || !calq__node_quantizable(cal->g, other)) return CALQ_OK;
    return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, l->key,
                      "calibration: input %d of layer \"%s\" gets the record key \"%s\" (amct-reference.md §7.2), "
                      "which is also the name of the %s layer \"%s\": the record could not tell their factors "
                      "apart. Rename one of them in the model, or skip layer \"%s\" (skip_layers: skipping the "
                      "other one leaves the key ambiguous)",
                      l->input, calq__cut(cal->g->nodes[l->node].name).s, calq__cut(l->key).s,
                      cal->g->nodes[other].op_type, calq__cut(cal->g->nodes[other].name).s,
                      calq__cut(cal->g->nodes[l->node].name).s);
}

static calq_status setup_layers(calq__calib *cal, const calq_strmap *node_of, calq_error *err)
{
    const calq_config *c = cal->cfg;
    for (int i = 0; i < c->n_layers; i++) {
        const calq_layer_config *lc = &c->layers[i];
        if (!lc->quant_enable) continue;
        int ni = calq__strmap_get(node_of, lc->name);
        const calq_node *n = ni >= 0 ? &cal->g->nodes[ni] : NULL;
        if (!n || n->n_inputs < 1 || n->inputs[0] < 0)
            return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, lc->name,
                              "calibration: the config enables layer \"%s\", which the model (after fusion, "
                              "amct-reference.md §8.3) does not have; was the config written for another model?",
                              lc->name);
        int primary = cal->n_layers;
        for (int in = 0; in < n->n_inputs && in < 2; in++) {
            if (!((lc->kind->act_inputs >> in) & 1u) || n->inputs[in] < 0) continue;
            int li = cal->n_layers++;
            calq__calib_layer *l = &cal->layers[li];
            l->cfg = lc;
            l->input = in;
            l->node = ni;
            l->primary = primary;
            l->key = in == 0 ? strdup(lc->name) : calq__record_key(lc->name, in);
            if (!l->key) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, lc->name, "calibration: out of memory");
            if (in > 0) CALQ_TRY(key_clash(cal, node_of, l, err));
            CALQ_TRY(join_group(cal, li, cal->g->values[n->inputs[in]].name, err));
        }
    }
    /* tensor_quantize entries (§7.2), then the int8 exports' own: the input named, under
     * "<layer>:<input>" */
    for (int i = 0; i < c->n_tensors + cal->n_implicit; i++) {
        const calq_layer_config *tc = i < c->n_tensors ? &c->tensors[i] : &cal->implicit[i - c->n_tensors];
        if (!tc->quant_enable) continue;
        int ni = calq__strmap_get(node_of, tc->name);
        const calq_node *n = ni >= 0 ? &cal->g->nodes[ni] : NULL;
        if (!n || tc->input >= n->n_inputs || n->inputs[tc->input] < 0)
            return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, tc->name,
                              "calibration: tensor_quantize names input %d of layer \"%s\", which the model (after "
                              "fusion, amct-reference.md §8.3) does not have",
                              tc->input, tc->name);
        int li = cal->n_layers++;
        calq__calib_layer *l = &cal->layers[li];
        l->cfg = tc;
        l->input = tc->input;
        l->node = ni;
        l->primary = li;
        if (!(l->key = calq__record_key(tc->name, tc->input)))
            return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, tc->name, "calibration: out of memory");
        CALQ_TRY(key_clash(cal, node_of, l, err));
        CALQ_TRY(join_group(cal, li, cal->g->values[n->inputs[tc->input]].name, err));
    }
    return CALQ_OK;
}

/* ARQ of one layer into l->scale_w / offset_w; a failure is kept in l->w_err. */
static calq_status layer_weights(calq__calib *cal, calq__calib_layer *l, calq_error *err)
{
    const calq_layer_config *lc = l->cfg;
    const calq_qkind *k = lc->kind;
    if (l->input != 0 || lc->tensor) return CALQ_OK; /* the weights go with the layer's first entry */
    if (k->weights == CALQ_QKIND_WEIGHTS_UNIT) { /* AveragePool: AMCT writes scale_w 1.0, offset_w 0 itself (§7.1) */
        l->n_w = 1;
        l->scale_w = malloc(sizeof(float));
        l->offset_w = malloc(sizeof(int));
        if (!l->scale_w || !l->offset_w) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, lc->name, "out of memory");
        l->scale_w[0] = 1.0f;
        l->offset_w[0] = 0;
        return CALQ_OK;
    }
    if (k->weights != CALQ_QKIND_WEIGHTS_CONST) return CALQ_OK; /* no weight factors (§7.1) */
    const calq_node *n = &cal->g->nodes[l->node];
    /* One weight, or two (LSTM / GRU / RNN: W then R, their scale_w one after the other, §8.1). */
    const int nw = calq__qkind_n_weights(k), wi[2] = {k->weight_input, k->weight2_input};
    const calq_tensor *ws[2] = {NULL, NULL};
    for (int j = 0; j < nw; j++) {
        ws[j] = n->n_inputs > wi[j] && n->inputs[wi[j]] >= 0 ? cal->g->values[n->inputs[wi[j]]].constant : NULL;
        if (!ws[j]) {
            l->w_failed = true;
            calq__fail(&l->w_err, CALQ_ERR_UNSUPPORTED, lc->name,
                       "the weight (input %d) of layer \"%s\" (%s) is not a constant, so ARQ cannot quantize it (§8.1)",
                       wi[j], lc->name, n->op_type);
            return CALQ_OK;
        }
    }
    calq_weight_layout layout = k->layout;
    int group = calq__qkind_group(k, n);
    /* Gemm / MatMul are per tensor (§8.4), so transB does not change the factors */
    calq_arq_opts ao;
    calq__config_arq_opts(lc, &ao);
    int64_t ns[2] = {0, 0}, total = 0;
    for (int j = 0; j < nw; j++) {
        ns[j] = calq_arq_num_scales(ws[j], layout, group, &ao);
        if (ns[j] <= 0) {
            l->w_failed = true;
            calq__fail(&l->w_err, CALQ_ERR_SHAPE, lc->name,
                       "the weight of layer \"%s\" (%s, %d dims) does not fit its layer type for ARQ (§8.2)", lc->name,
                       n->op_type, ws[j]->ndim);
            return CALQ_OK;
        }
        total += ns[j];
    }
    l->n_w = (int)total;
    l->scale_w = malloc((size_t)total * sizeof(float));
    l->offset_w = malloc((size_t)total * sizeof(int));
    if (!l->scale_w || !l->offset_w) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, lc->name, "out of memory");
    for (int j = 0, at = 0; j < nw && !l->w_failed; at += (int)ns[j], j++)
        if (calq_arq_quantize(ws[j], layout, group, &ao, lc->name, l->scale_w + at, l->offset_w + at, NULL, NULL,
                              &l->w_err) != CALQ_OK)
            l->w_failed = true;
    return CALQ_OK;
}

/* The layers' ARQ runs on the run's threads, one layer each: the layers share nothing and each
 * one's factors are computed as alone, so the record is the same for any thread count. The
 * first failing layer (in layer order) gives the error, and the log lines keep layer order. */
calq_status calq__calib_weights(calq__calib *cal, calq_error *err)
{
    calq_status *st = calloc((size_t)cal->n_layers + 1, sizeof *st);
    calq_error *errs = calloc((size_t)cal->n_layers + 1, sizeof *errs);
    if (!st || !errs) {
        free(st);
        free(errs);
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "calibration: out of memory");
    }
    int nt = cal->n_threads > 0 ? cal->n_threads : omp_get_max_threads();
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt > 0 ? nt : 1)
    for (int i = 0; i < cal->n_layers; i++) st[i] = layer_weights(cal, &cal->layers[i], &errs[i]);
    calq_status r = CALQ_OK;
    for (int i = 0; i < cal->n_layers && r == CALQ_OK; i++) {
        const calq__calib_layer *l = &cal->layers[i];
        if (st[i] != CALQ_OK) {
            if (err) *err = errs[i];
            r = st[i];
        } else if (!l->w_failed && l->cfg->has_weights && l->input == 0 && cal->log) {
            calq__log(CALQ_LOG_INFO, "Do layer:'%s' weights calibration success!", l->cfg->name);
        }
    }
    free(st);
    free(errs);
    return r;
}

void calq__calib_free(calq__calib *cal)
{
    for (int i = 0; i < cal->n_groups; i++) calq__group_free(&cal->groups[i]);
    for (int i = 0; i < cal->n_layers; i++) {
        free(cal->layers[i].scale_w);
        free(cal->layers[i].offset_w);
        free(cal->layers[i].key);
        calq__ada_free(cal->layers[i].ada);
        free(cal->layers[i].balance);
        free(cal->layers[i].xmax);
    }
    free(cal->groups);
    free(cal->layers);
    calq__strmap_free(&cal->group_of);
    free(cal->implicit); /* its names are the graph's */
    cal->implicit = NULL;
    if (cal->g_owned) calq__graph_free(cal->g_owned);
    cal->groups = NULL;
    cal->layers = NULL;
    cal->g_owned = NULL;
}
