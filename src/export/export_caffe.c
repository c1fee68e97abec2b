/* calq__export_caffe: the plan of a Caffe save, then the two files (export_caffe.h).
 *
 * The plan works on calq's IR of the model with Conv+BN(+Scale) folded exactly as calibration
 * folds it (calq__pass_fold_conv_affine with the config's do_fusion / skip_fusion_layers,
 * §8.3), because the record's scale_w were computed on those folded weights. IR nodes carry
 * the prototxt position of their layer (src_index), which ties the folded graph back to the
 * prototxt entries to patch: a layer whose node the fold removed is dropped from both files,
 * and the Conv that absorbed it writes its top instead. */
#include "export/export_caffe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/log.h"
#include "base/unique_name.h"
#include "graph/passes.h"
#include "graph/quantizable.h"

static calq_status oom(calq_error *err)
{
    return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "save: out of memory");
}

const char *calq__xc_string(const calq_tp_node *msg, const char *field)
{
    int n = msg ? calq_tp_count(msg, field) : 0;
    const calq_tp_node *s = n ? calq_tp_nth(msg, field, n - 1) : NULL;
    return s && s->kind == CALQ_TP_SCALAR && s->type == CALQ_TP_STRING ? s->text : NULL;
}

/* The i-th string of repeated field `field` (bottom, top), or NULL. */
static const char *nth_string(const calq_tp_node *msg, const char *field, int i)
{
    const calq_tp_node *s = calq_tp_nth(msg, field, i);
    return s && s->kind == CALQ_TP_SCALAR && s->type == CALQ_TP_STRING ? s->text : NULL;
}

/* ---- names ---------------------------------------------------------------------------------- */

/* The layer names the frontend gave the prototxt's entries (unnamed ones: "layer<i>"). */
static const char *entry_name(calq__xc_plan *p, int i)
{
    const char *nm = calq__xc_string(p->proto[i], "name");
    return nm && nm[0] ? nm : calq__xa_printf(&p->a, "layer%d", i);
}

/* A layer or blob of the prototxt, or a name this export already gave, is called s. Hashed (a
 * per-name scan of every layer made the export quadratic in the layer count). */
static bool index_names(calq__xc_plan *p)
{
    if (p->names.cap) return true;
    if (!calq__strmap_init(&p->names, (size_t)p->n_proto * 3)) return false;
    for (int i = 0; i < p->n_proto; i++) {
        const calq_tp_node *L = p->proto[i];
        const char *nm = calq__xc_string(L, "name");
        if (nm && !calq__strmap_put(&p->names, nm, 1)) return false;
        for (int k = 0; k < L->n_children; k++) {
            const calq_tp_node *f = L->children[k];
            if ((!strcmp(f->name, "bottom") || !strcmp(f->name, "top")) && f->kind == CALQ_TP_SCALAR && f->text &&
                !calq__strmap_put(&p->names, f->text, 1))
                return false;
        }
    }
    return true;
}

static bool name_taken(const void *names, const char *name)
{
    return calq__strmap_get(names, name) >= 0;
}

/* A fresh name no layer or blob has (export_caffe.h). */
char *calq__xc_fresh_name(calq__xc_plan *p, const char *base, const char *suffix)
{
    if (!index_names(p)) return NULL;
    char *heap = calq__unique_name(base, suffix, "_", 2, name_taken, &p->names);
    char *s = heap ? calq__xa_strdup(&p->a, heap) : NULL;
    free(heap);
    if (s && !calq__strmap_put(&p->names, s, 1)) return NULL;
    return s;
}

/* ---- folding ---------------------------------------------------------------------------------- */

/* Which entries the fold removed and which Conv absorbed each: Caffe is positional, so walking
 * the prototxt in order with "which Conv last wrote this blob" follows the chains
 * conv -> BatchNorm -> Scale, in place or not. */
static calq_status map_folds(calq__xc_plan *p, const bool *in_ir, const char **names, calq_error *err)
{
    int cap = 0;
    for (int i = 0; i < p->n_proto; i++) cap += calq_tp_count(p->proto[i], "top");
    const char **blob = calq__xa_alloc(&p->a, sizeof(char *) * (size_t)(cap + 1));
    int *writer = calq__xa_alloc(&p->a, sizeof(int) * (size_t)(cap + 1)), n = 0;
    if (!blob || !writer) return oom(err);
    for (int i = 0; i < p->n_proto; i++) {
        const calq_tp_node *L = p->proto[i];
        if (in_ir[i] && p->node_of[i] < 0) { /* folded away */
            const char *b = nth_string(L, "bottom", 0), *t = nth_string(L, "top", 0);
            int owner = -1, k = n - 1;
            while (k >= 0 && b && strcmp(blob[k], b) != 0) k--;
            if (k >= 0 && b) owner = writer[k]; /* the last write of the blob before this layer */
            if (owner < 0 || !t)
                return calq__fail(err, CALQ_ERR_INTERNAL, names[i],
                                  "save: layer \"%s\" was folded (§8.3) but no Convolution writes its bottom",
                                  names[i]);
            p->folded_into[i] = owner;
            p->top_after[owner] = t;
            p->changed[owner] = true;
            blob[n] = t;
            writer[n++] = owner;
            continue;
        }
        bool conv = p->node_of[i] >= 0 && calq__node_folds_bn(&p->g->nodes[p->node_of[i]]);
        for (int k = 0; k < calq_tp_count(L, "top"); k++) {
            const char *t = nth_string(L, "top", k);
            if (!t) continue;
            blob[n] = t;
            writer[n++] = conv ? i : -1;
        }
    }
    /* a layer is folded whole or not at all (Scale with a bias is a Mul and an Add) */
    for (int j = 0; j < p->g->n_nodes; j++) {
        const char *nm = p->g->nodes[j].name;
        for (int i = 0; i < p->n_proto; i++) {
            size_t len = strlen(names[i]);
            if (p->folded_into[i] >= 0 && !strncmp(nm, names[i], len) && nm[len] == '/')
                return calq__fail(err, CALQ_ERR_UNSUPPORTED, names[i],
                                  "save: layer \"%s\" was only partly folded into its Convolution (§8.3); add the "
                                  "Convolution to skip_fusion_layers in the config",
                                  names[i]);
        }
    }
    return CALQ_OK;
}

/* ---- quantized layers --------------------------------------------------------------------------- */

/* Output channels of quantized layer node n of kind k (its deq_scale / bias length, §8.2). */
static int64_t out_channels(const calq_graph *g, const calq_qkind *k, const calq_node *n)
{
    if (k->weights != CALQ_QKIND_WEIGHTS_CONST) return 1;
    const calq_tensor *w = g->values[n->inputs[k->weight_input]].constant;
    return calq__qkind_out_channels(k, n, w->ndim, w->dims);
}

/* The Quant of value v (bottom blob `bottom`) with factors rl, first read by entry i: an existing
 * one with the same factors (AMCT's quant fusion, §8.3), or a new one. -1 on out-of-memory. */
static int quant_of(calq__xc_plan *p, int v, const char *bottom, const calq_record_layer *rl, bool with_offset,
                    const char *object, int i)
{
    for (int q = 0; q < p->n_quants; q++)
        if (p->quants[q].value == v && p->quants[q].scale_d == rl->scale_d && p->quants[q].offset_d == rl->offset_d) {
            if (i < p->quants[q].before) p->quants[q].before = i; /* before its first reader */
            return q;
        }
    calq__xc_quant *q = &p->quants[p->n_quants];
    q->value = v;
    q->bottom = bottom;
    q->scale_d = rl->scale_d;
    q->offset_d = rl->offset_d;
    q->with_offset = with_offset;
    q->object_layer = object;
    q->before = i;
    if (!(q->name = calq__xc_fresh_name(p, object, "_quant_layer"))) return -1;
    return p->n_quants++;
}

static calq_status add_anti(calq__xc_plan *p, int i, int k, const char *name, const calq_record_layer *rl,
                            bool with_offset, calq_error *err)
{
    const calq_node *n = &p->g->nodes[p->node_of[i]];
    const char *bottom = nth_string(p->proto[i], "bottom", k);
    if (!bottom || k >= n->n_inputs)
        return calq__fail(err, CALQ_ERR_UNSUPPORTED, name,
                          "save: layer \"%s\": bottom %d is not an input of its node (an Eltwise of more than two "
                          "bottoms, or with coefficients, quantizes its first two bottoms only)",
                          name, k);
    char sfx[32];
    sfx[0] = 0;
    if (k) snprintf(sfx, sizeof sfx, "_input%d", k);
    char *obj = calq__xa_printf(&p->a, "%s%s", name, sfx);
    int q = obj ? quant_of(p, n->inputs[k], bottom, rl, with_offset, obj, i) : -1;
    calq__xc_anti *a = &p->antis[p->n_antis];
    if (q < 0 || !(a->name = calq__xc_fresh_name(p, obj, "_antiquant_layer"))) return oom(err);
    a->index = i;
    a->bottom = k;
    a->quant = q;
    p->n_antis++;
    return CALQ_OK;
}

static calq_status add_layer(calq__xc_plan *p, int i, const char *name, const calq_record_layer *rl,
                             const calq_layer_config *lc, calq_error *err)
{
    int ni = p->node_of[i];
    const calq_node *n = &p->g->nodes[ni];
    const calq_qkind *kind = calq__qkind_of_node(p->g, ni);
    if (!kind)
        return calq__fail(err, CALQ_ERR_RECORD_FILE, name,
                          "save: layer \"%s\" has factors in the record but cannot be quantized in the model after "
                          "fusion (its weight is not constant, or fusion changed it); skip it in the config",
                          name);
    if (calq_tp_count(p->proto[i], "bottom") != 1 || !nth_string(p->proto[i], "bottom", 0) ||
        !nth_string(p->proto[i], "top", 0))
        return calq__fail(err, CALQ_ERR_UNSUPPORTED, name,
                          "save: layer \"%s\" has %d bottoms; calq quantizes layers with one bottom and one top", name,
                          calq_tp_count(p->proto[i], "bottom"));
    bool weights = kind->weights == CALQ_QKIND_WEIGHTS_CONST; /* else AVE pooling: scale_w 1 (§7.1) */
    int64_t C = out_channels(p->g, kind, n);
    bool channel_wise = kind->channel_wise;
    if (weights && rl->n_scale_w != 1 && !(channel_wise && rl->n_scale_w == C))
        return calq__fail(err, CALQ_ERR_RECORD_FILE, name,
                          "save: layer \"%s\" has %d scale_w in the record; it takes 1%s (§8.2, §8.4)", name,
                          rl->n_scale_w, channel_wise ? " or one per output channel" : "");
    calq__xc_layer *l = &p->layers[p->n_layers];
    memset(l, 0, sizeof *l);
    l->index = i;
    l->node = ni;
    l->kind = kind;
    l->name = name;
    l->rl = rl;
    /* one Quant per (tensor, scale_d, offset_d): AMCT's quant fusion (§8.3) */
    /* a balanced layer's Quant reads its DMQ Scale (export_caffe_dmq.c) */
    const char *bottom = p->dmq_of[i] >= 0 ? p->dmqs[p->dmq_of[i]].name : nth_string(p->proto[i], "bottom", 0);
    l->quant = quant_of(p, n->inputs[0], bottom, rl, lc->act.asymmetric, name, i);
    if (l->quant < 0) return oom(err);
    /* deq_scale[c] = scale_d * scale_w[c] (§6.2; AvgPool: scale_w = 1), shift_bit (§6.4) */
    static const float one = 1.0f;
    l->n_deq = weights && rl->n_scale_w > 1 ? C : 1;
    l->deq = calq__xa_alloc(&p->a, sizeof(float) * (size_t)l->n_deq);
    l->shift = calq__xa_alloc(&p->a, sizeof(unsigned) * (size_t)l->n_deq);
    if (!l->deq || !l->shift || !(l->dequant = calq__xc_fresh_name(p, name, "_dequant_layer"))) return oom(err);
    calq_deq_scale(rl->scale_d, weights ? rl->scale_w : &one, weights ? rl->n_scale_w : 1, l->n_deq, l->deq);
    for (int64_t c = 0; c < l->n_deq; c++)
        l->shift[c] = rl->n_shift_bit ? (unsigned)rl->shift_bit[rl->n_shift_bit > 1 ? c : 0] : 0;
    p->quantized[i] = p->n_layers++;
    return CALQ_OK;
}

static calq_status build_plan(calq__xc_plan *p, calq_error *err)
{
    const calq_config *cfg = p->cfg;
    const calq_tp_node *root = p->m->prototxt;
    if (calq_tp_count(root, "layers"))
        return calq__fail(err, CALQ_ERR_UNSUPPORTED, NULL,
                          "save: %s uses Caffe's legacy 'layers' (V1) format, which has no Quant layer type; upgrade "
                          "it with Caffe's upgrade_net_proto_text, then calibrate and save the upgraded net",
                          p->m->path ? p->m->path : "the prototxt");
    int n = p->n_proto = calq_tp_count(root, "layer");
    size_t sz = (size_t)n + 1;
    p->proto = calq__xa_alloc(&p->a, sizeof *p->proto * sz);
    p->node_of = calq__xa_alloc(&p->a, sizeof(int) * sz);
    p->folded_into = calq__xa_alloc(&p->a, sizeof(int) * sz);
    p->top_after = calq__xa_alloc(&p->a, sizeof(char *) * sz);
    p->changed = calq__xa_alloc(&p->a, sizeof(bool) * sz);
    p->quantized = calq__xa_alloc(&p->a, sizeof(int) * sz);
    p->layers = calq__xa_alloc(&p->a, sizeof *p->layers * sz);
    p->quants = calq__xa_alloc(&p->a, sizeof *p->quants * (sz + (size_t)cfg->n_tensors + 1));
    p->antis = calq__xa_alloc(&p->a, sizeof *p->antis * (sz + (size_t)cfg->n_tensors + 1));
    const char **names = calq__xa_alloc(&p->a, sizeof(char *) * sz);
    bool *in_ir = calq__xa_alloc(&p->a, sizeof(bool) * sz);
    if (p->a.oom) return oom(err);
    /* the layers in one pass (calq_tp_nth per layer is quadratic in the layer count) */
    for (int k = 0, i = 0; k < root->n_children && i < n; k++)
        if (strcmp(root->children[k]->name, "layer") == 0) p->proto[i++] = root->children[k];
    for (int i = 0; i < n; i++) {
        p->node_of[i] = p->folded_into[i] = p->quantized[i] = -1;
        if (!(names[i] = entry_name(p, i))) return oom(err);
    }
    CALQ_TRY(calq__graph_clone(p->m->g, &p->g, err));
    int n_fold = 0;
    if (cfg->do_fusion)
        CALQ_TRY(calq__pass_fold_conv_affine(p->g, (const char *const *)cfg->skip_fusion_layers,
                                             cfg->n_skip_fusion_layers, &n_fold, err));
    /* DMQ balancing after the fold, as calibration does it (calibrate.c), before the entries are
     * mapped to nodes: the rewrite sorts the graph again */
    CALQ_TRY(calq__xc_balance(p, names, err));
    /* each entry's own node: the one named after the layer (a layer's helpers are "<layer>/...") */
    for (int j = 0; j < p->m->g->n_nodes; j++) {
        int s = p->m->g->nodes[j].src_index;
        if (s >= 0 && s < n && !strcmp(p->m->g->nodes[j].name, names[s])) in_ir[s] = true;
    }
    for (int j = 0; j < p->g->n_nodes; j++) {
        int s = p->g->nodes[j].src_index;
        if (s >= 0 && s < n && !strcmp(p->g->nodes[j].name, names[s])) p->node_of[s] = j;
    }
    CALQ_TRY(map_folds(p, in_ir, names, err));
    calq_strmap cfg_index = {0};
    if (!calq__config_index(cfg, &cfg_index)) return oom(err);
    calq_status st = CALQ_OK;
    for (int i = 0; i < n && st == CALQ_OK; i++) {
        if (p->node_of[i] < 0) continue;
        int li = calq__strmap_get(&cfg_index, names[i]);
        const calq_layer_config *lc = li >= 0 ? &cfg->layers[li] : NULL;
        const calq_record_layer *rl = calq__record_find(p->rec, names[i]);
        if (lc && lc->quant_enable && rl) st = add_layer(p, i, names[i], rl, lc, err);
    }
    calq__strmap_free(&cfg_index);
    CALQ_TRY(st);
    /* tensor_quantize entries (§7.2) and AMCT's pair before a MAX Pooling sharing a quantized
     * bottom (§9.3), after the layers, so their Quants are shared with the layers' */
    for (int i = 0; i < n; i++) {
        if (p->node_of[i] < 0) continue;
        const calq_node *nd = &p->g->nodes[p->node_of[i]];
        bool any = false;
        for (int k = 0; k < nd->n_inputs; k++) {
            const calq_layer_config *tc = calq__config_find_tensor(cfg, names[i], k);
            char *key = tc && tc->quant_enable ? calq__xa_printf(&p->a, "%s:%d", names[i], k) : NULL;
            const calq_record_layer *rl = key ? calq__record_find(p->rec, key) : NULL;
            if (!rl) continue;
            CALQ_TRY(add_anti(p, i, k, names[i], rl, tc->act.asymmetric, err));
            any = true;
        }
        if (any || strcmp(nd->op_type, "MaxPool") != 0 || nd->n_inputs < 1) continue;
        for (int l = 0; l < p->n_layers; l++) {
            const calq__xc_quant *q = &p->quants[p->layers[l].quant];
            if (q->value != nd->inputs[0]) continue;
            calq_record_layer shared = {.scale_d = q->scale_d, .offset_d = q->offset_d};
            CALQ_TRY(add_anti(p, i, 0, names[i], &shared, q->with_offset, err));
            break;
        }
    }
    if (n_fold)
        calq__log(CALQ_LOG_DEBUG, "calq: save: %d BatchNorm/Scale layer%s folded into their Convolution (§8.3)", n_fold,
                  n_fold == 1 ? "" : "s");
    return CALQ_OK;
}

/* ---- the entry point ---------------------------------------------------------------------------- */

calq_status calq__export_caffe(const calq_model *m, const calq_record *rec, const calq_config *cfg, bool deploy,
                               const char *prefix, calq_staged_files *out, calq_error *err)
{
    if (!m || m->format != CALQ_FORMAT_CAFFE || !m->prototxt)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL, "save: the Caffe outputs need a Caffe model");
    calq__xc_plan p = {.m = m, .rec = rec, .cfg = cfg, .deploy = deploy};
    calq_tp_node *net = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;
    const char *kind = deploy ? "deploy" : "fake_quant";
    char *model_path = NULL, *weights_path = NULL;
    calq_status st = build_plan(&p, err);
    if (st == CALQ_OK) st = calq__xc_prototxt(&p, &net, err);
    if (st == CALQ_OK) st = calq__xc_caffemodel(&p, &buf, &len, err);
    if (st == CALQ_OK) {
        /* AMCT's file names (§1.3) */
        model_path = calq__xa_printf(&p.a, "%s_%s_model.prototxt", prefix, kind);
        weights_path = calq__xa_printf(&p.a, "%s_%s_weights.caffemodel", prefix, kind);
        if (!model_path || !weights_path) st = oom(err);
    }
    FILE *fp = NULL;
    if (st == CALQ_OK) st = calq__staged_open(out, model_path, &fp, err);
    if (st == CALQ_OK) {
        st = calq_tp_write(net, fp, err);
        if (st != CALQ_OK) st = calq__fail(err, CALQ_ERR_IO, NULL, "save: cannot write %s (disk full?)", model_path);
    }
    if (st == CALQ_OK) st = calq__staged_write(out, weights_path, buf, len, err);
    if (st == CALQ_OK)
        calq__log(CALQ_LOG_DEBUG, "calq: %s model: %d quantized layer%s, %d Quant layer%s: %s, %s", kind, p.n_layers,
                  p.n_layers == 1 ? "" : "s", p.n_quants, p.n_quants == 1 ? "" : "s", model_path, weights_path);
    if (st == CALQ_OK && p.n_antis)
        calq__log(CALQ_LOG_DEBUG, "calq: %s model: %d Quant -> AntiQuant pair%s before float layers (§9.3)", kind,
                  p.n_antis, p.n_antis == 1 ? "" : "s");
    calq_tp_free(net);
    calq__strmap_free(&p.names);
    calq__xa_free(&p.a);
    calq__graph_free(p.g);
    return st;
}
