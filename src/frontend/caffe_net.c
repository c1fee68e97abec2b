/* The net as Caffe's Net::Init sees it in the TEST phase: which layers are kept (include /
 * exclude rules, training-only layers), the net inputs in their three forms, blob names to SSA
 * values (in-place layers), and the net outputs. Layer mapping itself is in caffe_layers*.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/log.h"
#include "frontend/caffe.h"

typedef enum layer_kind {
    KIND_EXCLUDED, /* left out by the TEST-phase rules */
    KIND_TRAIN,    /* loss, Accuracy, Silence, HDF5Output: skipped with a note */
    KIND_DATA,     /* a data reader: its tops become net inputs when a kept layer reads them */
    KIND_INPUT,    /* an Input layer */
    KIND_MAPPED,   /* becomes IR nodes */
    KIND_UNKNOWN
} layer_kind;

typedef struct layer_rec {
    const calq_tp_node *tp;
    const char *name, *type;
    char fallback[48];
    layer_kind kind;
    int n_bottom, n_top;
    const char **bottom, **top;
} layer_rec;

/* V1LayerParameter.LayerType -> the LayerParameter type name (Caffe's UpgradeV1LayerType). */
static const struct {
    const char *v1;
    int number;
    const char *type;
} v1_types[] = {
    {"ABSVAL", 35, "AbsVal"},
    {"ACCURACY", 1, "Accuracy"},
    {"ARGMAX", 30, "ArgMax"},
    {"BNLL", 2, "BNLL"},
    {"CONCAT", 3, "Concat"},
    {"CONTRASTIVE_LOSS", 37, "ContrastiveLoss"},
    {"CONVOLUTION", 4, "Convolution"},
    {"DATA", 5, "Data"},
    {"DECONVOLUTION", 39, "Deconvolution"},
    {"DROPOUT", 6, "Dropout"},
    {"DUMMY_DATA", 32, "DummyData"},
    {"EUCLIDEAN_LOSS", 7, "EuclideanLoss"},
    {"ELTWISE", 25, "Eltwise"},
    {"EXP", 38, "Exp"},
    {"FLATTEN", 8, "Flatten"},
    {"HDF5_DATA", 9, "HDF5Data"},
    {"HDF5_OUTPUT", 10, "HDF5Output"},
    {"HINGE_LOSS", 28, "HingeLoss"},
    {"IM2COL", 11, "Im2col"},
    {"IMAGE_DATA", 12, "ImageData"},
    {"INFOGAIN_LOSS", 13, "InfogainLoss"},
    {"INNER_PRODUCT", 14, "InnerProduct"},
    {"LRN", 15, "LRN"},
    {"MEMORY_DATA", 29, "MemoryData"},
    {"MULTINOMIAL_LOGISTIC_LOSS", 16, "MultinomialLogisticLoss"},
    {"MVN", 34, "MVN"},
    {"POOLING", 17, "Pooling"},
    {"POWER", 26, "Power"},
    {"RELU", 18, "ReLU"},
    {"SIGMOID", 19, "Sigmoid"},
    {"SIGMOID_CROSS_ENTROPY_LOSS", 27, "SigmoidCrossEntropyLoss"},
    {"SILENCE", 36, "Silence"},
    {"SOFTMAX", 20, "Softmax"},
    {"SOFTMAX_LOSS", 21, "SoftmaxWithLoss"},
    {"SPLIT", 22, "Split"},
    {"SLICE", 33, "Slice"},
    {"TANH", 23, "TanH"},
    {"WINDOW_DATA", 24, "WindowData"},
    {"THRESHOLD", 31, "Threshold"},
};

static const char *const data_types[] = {"Data",       "ImageData", "HDF5Data",      "WindowData",
                                         "MemoryData", "DummyData", "AnnotatedData", "VideoData"};

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static layer_kind classify(const char *type)
{
    if (strcmp(type, "Input") == 0) return KIND_INPUT;
    for (size_t i = 0; i < sizeof data_types / sizeof *data_types; i++)
        if (strcmp(type, data_types[i]) == 0) return KIND_DATA;
    if (ends_with(type, "Loss") || strcmp(type, "Accuracy") == 0 || strcmp(type, "Silence") == 0 ||
        strcmp(type, "HDF5Output") == 0)
        return KIND_TRAIN;
    return calq__caffe_mapper(type) ? KIND_MAPPED : KIND_UNKNOWN;
}

/* ---- TEST-phase rules (Caffe's Net::StateMeetsRule / FilterNet) --------------------------------- */

typedef struct net_state {
    int64_t level;
    int n_stages;
    const calq_tp_node *state; /* the prototxt's `state`, or NULL */
} net_state;

static bool has_stage(const net_state *st, const char *stage)
{
    for (int i = 0; i < st->n_stages; i++) {
        const calq_tp_node *s = calq_tp_nth(st->state, "stage", i);
        if (s->kind == CALQ_TP_SCALAR && strcmp(s->text, stage) == 0) return true;
    }
    return false;
}

static calq_status rule_met(calq_caffe_ctx *c, const calq_tp_node *rule, const net_state *st, bool *met)
{
    static const char *const phases[] = {"TRAIN", "TEST"};
    *met = false;
    int phase;
    CALQ_TRY(calq__caffe_get_enum(c, rule, "phase", phases, 2, 1, &phase));
    if (phase != 1) return CALQ_OK;
    int64_t lo, hi;
    CALQ_TRY(calq__caffe_get_int(c, rule, "min_level", st->level, &lo));
    CALQ_TRY(calq__caffe_get_int(c, rule, "max_level", st->level, &hi));
    if (st->level < lo || st->level > hi) return CALQ_OK;
    for (int i = 0; i < calq_tp_count(rule, "stage"); i++) {
        const char *s;
        CALQ_TRY(calq_tp_string(calq_tp_nth(rule, "stage", i), c->proto_name, &s, c->err));
        if (!has_stage(st, s)) return CALQ_OK;
    }
    for (int i = 0; i < calq_tp_count(rule, "not_stage"); i++) {
        const char *s;
        CALQ_TRY(calq_tp_string(calq_tp_nth(rule, "not_stage", i), c->proto_name, &s, c->err));
        if (has_stage(st, s)) return CALQ_OK;
    }
    *met = true;
    return CALQ_OK;
}

static calq_status layer_included(calq_caffe_ctx *c, const calq_tp_node *layer, const net_state *st, bool *inc)
{
    int n_inc = calq_tp_count(layer, "include"), n_exc = calq_tp_count(layer, "exclude");
    *inc = n_inc == 0;
    for (int i = 0; i < n_exc; i++) {
        bool met;
        CALQ_TRY(rule_met(c, calq_tp_nth(layer, "exclude", i), st, &met));
        if (met) *inc = false;
    }
    for (int i = 0; i < n_inc; i++) {
        bool met;
        CALQ_TRY(rule_met(c, calq_tp_nth(layer, "include", i), st, &met));
        if (met) *inc = true;
    }
    return CALQ_OK;
}

/* ---- reading the layer list --------------------------------------------------------------------- */

static calq_status read_strings(calq_caffe_ctx *c, const calq_tp_node *msg, const char *field, const char ***out,
                                int *n)
{
    *n = calq_tp_count(msg, field);
    *out = calloc((size_t)*n + 1, sizeof **out);
    if (!*out) return calq__caffe_oom(c);
    for (int i = 0; i < *n; i++) {
        c->status = calq_tp_string(calq_tp_nth(msg, field, i), c->proto_name, &(*out)[i], c->err);
        if (c->status != CALQ_OK) return c->status;
    }
    return CALQ_OK;
}

static calq_status read_type(calq_caffe_ctx *c, const calq_tp_node *layer, layer_rec *r)
{
    const calq_tp_node *t = calq_tp_find(layer, "type");
    r->type = "";
    if (!t || t->kind != CALQ_TP_SCALAR)
        return calq__caffe_fail(c, NULL, CALQ_ERR_BAD_FORMAT, "%d: layer '%s' has no type", layer->line, r->name);
    if (t->type == CALQ_TP_STRING) {
        r->type = t->text;
        return CALQ_OK;
    }
    /* V1: an enum, by name or number. */
    int64_t number = -1;
    if (t->type == CALQ_TP_NUMBER) CALQ_TRY(calq__caffe_get_int(c, layer, "type", -1, &number));
    for (size_t i = 0; i < sizeof v1_types / sizeof *v1_types; i++)
        if (number == v1_types[i].number || (t->type == CALQ_TP_IDENT && strcmp(t->text, v1_types[i].v1) == 0)) {
            r->type = v1_types[i].type;
            return CALQ_OK;
        }
    r->type = t->text; /* an unknown V1 enum: reported with the other unsupported types */
    return CALQ_OK;
}

static calq_status read_layers(calq_caffe_ctx *c, const calq_tp_node *root, const net_state *st, layer_rec **out,
                               int *n_out)
{
    int n_new = calq_tp_count(root, "layer"), n_v1 = calq_tp_count(root, "layers");
    if (n_new && n_v1)
        return calq__caffe_fail(c, NULL, CALQ_ERR_BAD_FORMAT,
                                "the net has both 'layer' and legacy 'layers' entries; Caffe refuses such a net. "
                                "Upgrade it with Caffe's upgrade_net_proto_text so only 'layer' remains.");
    const char *field = n_v1 ? "layers" : "layer";
    int n = n_v1 ? n_v1 : n_new;
    layer_rec *recs = calloc((size_t)n + 1, sizeof *recs);
    if (!recs) return calq__caffe_oom(c);
    *out = recs;
    *n_out = n;
    /* k walks root's children once (calq_tp_nth per layer made a 10k-layer net quadratic) */
    for (int i = 0, k = 0; i < n; i++, k++) {
        layer_rec *r = &recs[i];
        while (strcmp(root->children[k]->name, field) != 0) k++; /* n counted them: k stays in range */
        const calq_tp_node *tp = root->children[k];
        r->tp = tp;
        if (tp->kind != CALQ_TP_MESSAGE)
            return calq__caffe_fail(c, NULL, CALQ_ERR_BAD_FORMAT, "%d: '%s' must be a message { ... }", tp->line,
                                    field);
        if (calq_tp_find(tp, "layer"))
            return calq__caffe_fail(c, NULL, CALQ_ERR_UNSUPPORTED,
                                    "%d: this net uses Caffe's V0 layer format (layers { layer { ... } }), which calq "
                                    "does not read. Upgrade it with Caffe's upgrade_net_proto_text.",
                                    tp->line);
        const calq_tp_node *nm = calq_tp_find(tp, "name");
        r->name = NULL;
        if (nm) CALQ_TRY((c->status = calq_tp_string(nm, c->proto_name, &r->name, c->err)));
        if (!r->name || !r->name[0]) {
            snprintf(r->fallback, sizeof r->fallback, "layer%d", i);
            r->name = r->fallback;
        }
        CALQ_TRY(read_type(c, tp, r));
        CALQ_TRY(read_strings(c, tp, "bottom", &r->bottom, &r->n_bottom));
        CALQ_TRY(read_strings(c, tp, "top", &r->top, &r->n_top));
        bool inc;
        CALQ_TRY(layer_included(c, tp, st, &inc));
        r->kind = inc ? classify(r->type) : KIND_EXCLUDED;
    }
    return CALQ_OK;
}

/* One message naming every unsupported type and the layers using it. */
static calq_status check_unknown(calq_caffe_ctx *c, const layer_rec *recs, int n)
{
    char msg[CALQ_ERROR_MESSAGE_MAX];
    size_t at = 0;
    int n_types = 0;
    for (int i = 0; i < n; i++) {
        if (recs[i].kind != KIND_UNKNOWN) continue;
        bool seen = false;
        for (int j = 0; j < i && !seen; j++) seen = recs[j].kind == KIND_UNKNOWN && !strcmp(recs[j].type, recs[i].type);
        if (seen) continue;
        n_types++;
        if (at < sizeof msg)
            at +=
                (size_t)snprintf(msg + at, sizeof msg - at, "\n  %s (layers:", recs[i].type[0] ? recs[i].type : "\"\"");
        int listed = 0;
        for (int j = i; j < n; j++) {
            if (recs[j].kind != KIND_UNKNOWN || strcmp(recs[j].type, recs[i].type)) continue;
            if (listed < 8 && at < sizeof msg)
                at += (size_t)snprintf(msg + at, sizeof msg - at, " %s", recs[j].name);
            else if (listed == 8 && at < sizeof msg)
                at += (size_t)snprintf(msg + at, sizeof msg - at, " ...");
            listed++;
        }
        if (at < sizeof msg) at += (size_t)snprintf(msg + at, sizeof msg - at, ")");
    }
    if (!n_types) return CALQ_OK;
    return calq__caffe_fail(
        c, NULL, CALQ_ERR_UNSUPPORTED,
        "the net uses %d layer type%s calq does not support:%s\nSupported: Convolution, "
        "Deconvolution, InnerProduct, Pooling, ReLU, PReLU, Sigmoid, TanH, ELU, AbsVal, Power, Exp, "
        "Log, BatchNorm, Scale, Bias, Eltwise, Concat, Slice, Split, Flatten, Reshape, Permute, "
        "Softmax, Dropout, LRN, Crop, Interp, SSD's PriorBox, DetectionOutput and Normalize, Input, and AMCT's "
        "Quant and DeQuant.",
        n_types, n_types == 1 ? "" : "s", msg);
}

/* ---- blobs and inputs ----------------------------------------------------------------------------- */

static int blob_entry(calq_caffe_ctx *c, const char *name)
{
    int k = calq__caffe_map_get(&c->blob_index, name);
    if (k >= 0) return k;
    if (c->n_blobs == c->cap_blobs) {
        int cap = c->cap_blobs ? c->cap_blobs * 2 : 64;
        calq_caffe_blob *b = realloc(c->blobs, sizeof *b * (size_t)cap);
        if (!b) return -1;
        c->blobs = b;
        c->cap_blobs = cap;
    }
    k = c->n_blobs++;
    memset(&c->blobs[k], 0, sizeof c->blobs[k]);
    c->blobs[k].name = name;
    c->blobs[k].current = -1;
    if (calq__caffe_map_put(&c->blob_index, name, k) != 0) return -1;
    return k;
}

typedef struct input_list {
    int *v;
    int n, cap;
} input_list;

/* A net input named `name` of the given shape (ndim -1: unknown). */
static calq_status add_input(calq_caffe_ctx *c, input_list *ins, const char *name, int ndim, const int64_t *dims,
                             int line)
{
    int bi = blob_entry(c, name);
    if (bi < 0) return calq__caffe_oom(c);
    if (calq__graph_find(c->g, name) >= 0)
        return calq__caffe_fail(c, NULL, CALQ_ERR_BAD_FORMAT, "%d: net input '%s' is declared twice", line, name);
    if (ndim > CALQ_MAX_DIMS)
        return calq__caffe_fail(c, NULL, CALQ_ERR_UNSUPPORTED, "%d: net input '%s' has %d dims; calq supports up to %d",
                                line, name, ndim,
                                CALQ_MAX_DIMS); /* a size, or -1 / 0 for one the data gives (what converters write for a
                                                 * free batch); -12 was read as "given by the data" too */
    for (int d = 0; d < ndim; d++)
        if (dims[d] < -1)
            return calq__caffe_fail(c, NULL, CALQ_ERR_BAD_FORMAT,
                                    "%d: net input '%s' has dim %d = %lld; a dim is a size, or -1 / 0 for one the "
                                    "data gives",
                                    line, name, d, (long long)dims[d]);
    int v = calq__caffe_named_value(c, name);
    if (v < 0) return c->status;
    calq_value *val = &c->g->values[v];
    calq_caffe_shape sh = {.ndim = ndim};
    val->is_input = true;
    val->dtype = CALQ_DTYPE_FLOAT32;
    val->ndim = ndim;
    for (int d = 0; d < ndim; d++) val->dims[d] = sh.dims[d] = dims[d] > 0 ? dims[d] : -1;
    calq__caffe_set_shape(c, v, &sh);
    if (ins->n == ins->cap) {
        int cap = ins->cap ? ins->cap * 2 : 8;
        int *p = realloc(ins->v, sizeof *p * (size_t)cap);
        if (!p) return calq__caffe_oom(c);
        ins->v = p;
        ins->cap = cap;
    }
    ins->v[ins->n++] = v;
    c->blobs[bi].input = true;
    c->blobs[bi].current = v;
    return CALQ_OK;
}

/* Net-level inputs: `input` with `input_shape { dim }` or `input_dim` (k per input). */
static calq_status net_inputs(calq_caffe_ctx *c, const calq_tp_node *root, input_list *ins)
{
    int n_in = calq_tp_count(root, "input"), n_shape = calq_tp_count(root, "input_shape");
    int n_dim = calq_tp_count(root, "input_dim");
    if (!n_in && (n_shape || n_dim))
        return calq__caffe_fail(c, NULL, CALQ_ERR_BAD_FORMAT, "input_shape / input_dim given without 'input' names");
    if (n_shape && n_dim)
        return calq__caffe_fail(c, NULL, CALQ_ERR_BAD_FORMAT, "the net gives both input_shape and input_dim");
    if (n_shape && n_shape != n_in)
        return calq__caffe_fail(c, NULL, CALQ_ERR_BAD_FORMAT, "%d inputs but %d input_shape entries", n_in, n_shape);
    if (n_dim && n_dim % n_in)
        return calq__caffe_fail(c, NULL, CALQ_ERR_BAD_FORMAT,
                                "%d input_dim values do not divide among %d inputs (4 per input: N, C, H, W)", n_dim,
                                n_in);
    for (int i = 0; i < n_in; i++) {
        const calq_tp_node *nm = calq_tp_nth(root, "input", i);
        const char *name;
        CALQ_TRY((c->status = calq_tp_string(nm, c->proto_name, &name, c->err)));
        int64_t dims[CALQ_MAX_DIMS];
        int nd = -1;
        if (n_shape) {
            const calq_tp_node *sh = calq_tp_nth(root, "input_shape", i);
            nd = calq__caffe_count(sh, "dim");
            for (int d = 0; d < nd && d < CALQ_MAX_DIMS; d++)
                CALQ_TRY(calq__caffe_get_int_at(c, sh, "dim", d, &dims[d]));
        } else if (n_dim) {
            nd = n_dim / n_in;
            for (int d = 0; d < nd && d < CALQ_MAX_DIMS; d++)
                CALQ_TRY(calq__caffe_get_int_at(c, root, "input_dim", i * nd + d, &dims[d]));
        }
        CALQ_TRY(add_input(c, ins, name, nd, dims, nm->line));
    }
    return CALQ_OK;
}

/* An Input layer's tops: one shape for all, or one per top (InputParameter). */
static calq_status input_layer(calq_caffe_ctx *c, const layer_rec *r, input_list *ins)
{
    const calq_tp_node *p = calq_tp_find(r->tp, "input_param");
    int n_shape = calq__caffe_count(p, "shape");
    if (n_shape > 1 && n_shape != r->n_top)
        return calq__caffe_fail(c, NULL, CALQ_ERR_BAD_FORMAT,
                                "%d: Input layer '%s' has %d tops but %d shapes (give one shape, or one per top)",
                                r->tp->line, r->name, r->n_top, n_shape);
    for (int t = 0; t < r->n_top; t++) {
        int64_t dims[CALQ_MAX_DIMS];
        int nd = -1;
        if (n_shape) {
            const calq_tp_node *sh = calq_tp_nth(p, "shape", n_shape == 1 ? 0 : t);
            nd = calq__caffe_count(sh, "dim");
            for (int d = 0; d < nd && d < CALQ_MAX_DIMS; d++)
                CALQ_TRY(calq__caffe_get_int_at(c, sh, "dim", d, &dims[d]));
        }
        CALQ_TRY(add_input(c, ins, r->top[t], nd, dims, r->tp->line));
    }
    return CALQ_OK;
}

/* A data layer's top read by a kept layer becomes a net input. MemoryData and DummyData say
 * their shapes; the readers of files do not (N x C x H x W for the data, unknown for labels). */
static calq_status data_input(calq_caffe_ctx *c, const layer_rec *r, int top, input_list *ins)
{
    int64_t dims[CALQ_MAX_DIMS] = {-1, -1, -1, -1};
    int nd = top == 0 ? 4 : -1;
    if (strcmp(r->type, "MemoryData") == 0 && top == 0) {
        const calq_tp_node *p = calq_tp_find(r->tp, "memory_data_param");
        static const char *const f[] = {"batch_size", "channels", "height", "width"};
        for (int d = 0; d < 4; d++) CALQ_TRY(calq__caffe_get_int(c, p, f[d], -1, &dims[d]));
    } else if (strcmp(r->type, "DummyData") == 0) {
        const calq_tp_node *p = calq_tp_find(r->tp, "dummy_data_param");
        int n_shape = calq__caffe_count(p, "shape");
        if (n_shape) {
            const calq_tp_node *sh = calq_tp_nth(p, "shape", n_shape == 1 ? 0 : (top < n_shape ? top : 0));
            nd = calq__caffe_count(sh, "dim");
            for (int d = 0; d < nd && d < CALQ_MAX_DIMS; d++)
                CALQ_TRY(calq__caffe_get_int_at(c, sh, "dim", d, &dims[d]));
        }
    }
    calq__log(CALQ_LOG_INFO,
              "calq: note: %s:%d: layer '%s' (%s) reads training data; its top '%s' is a model input instead%s",
              c->proto_name, r->tp->line, r->name, r->type, r->top[top],
              nd == 4 && dims[2] < 0 ? " (give its shape with --input-shape)" : "");
    return add_input(c, ins, r->top[top], nd, dims, r->tp->line);
}

/* ---- the build ---------------------------------------------------------------------------------- */

static calq_status resolve_bottoms(calq_caffe_ctx *c, const layer_rec *recs, const layer_rec *r, int *bottom,
                                   input_list *ins)
{
    for (int i = 0; i < r->n_bottom; i++) {
        int bi = calq__caffe_map_get(&c->blob_index, r->bottom[i]);
        calq_caffe_blob *b = bi >= 0 ? &c->blobs[bi] : NULL;
        if (b && b->current < 0 && b->data_layer) {
            CALQ_TRY(data_input(c, &recs[b->data_layer - 1], b->data_top, ins));
            b = &c->blobs[bi];
        }
        if (!b || b->current < 0) {
            if (b && b->dropped_by)
                return calq__caffe_fail(c, NULL, CALQ_ERR_UNSUPPORTED,
                                        "%d: layer '%s' reads blob '%s', which only layer '%s' produces; calq skips "
                                        "that layer because it only matters in training",
                                        r->tp->line, r->name, r->bottom[i], b->dropped_by);
            return calq__caffe_fail(c, NULL, CALQ_ERR_BAD_FORMAT,
                                    "%d: layer '%s' reads blob '%s', which no earlier layer or net input produces",
                                    r->tp->line, r->name, r->bottom[i]);
        }
        bottom[i] = b->current;
        c->consumed[b->current] = true;
    }
    return CALQ_OK;
}

static calq_status map_layer(calq_caffe_ctx *c, const layer_rec *recs, int index, input_list *ins)
{
    const layer_rec *r = &recs[index];
    int *bottom = calloc((size_t)r->n_bottom + 1, sizeof *bottom);
    if (!bottom) return calq__caffe_oom(c);
    calq_caffe_layer L = {.tp = r->tp,
                          .name = r->name,
                          .type = r->type,
                          .index = index,
                          .line = r->tp->line,
                          .n_bottom = r->n_bottom,
                          .bottom = bottom,
                          .n_top = r->n_top,
                          .top = r->top};
    calq_status s = resolve_bottoms(c, recs, r, bottom, ins);
    int w = r->name == r->fallback ? calq__caffe_map_get(&c->weight_index, "")
                                   : calq__caffe_map_get(&c->weight_index, r->name);
    if (w >= 0) {
        L.in_caffemodel = true;
        L.n_blobs = c->weight_layers[w].n_blobs;
        L.blobs = c->weight_layers[w].blobs;
    }
    if (s == CALQ_OK) s = calq__caffe_check_blob_count(c, &L);
    if (s == CALQ_OK) s = calq__caffe_mapper(r->type)(c, &L);
    if (s == CALQ_OK && c->status != CALQ_OK) s = c->status;
    free(bottom);
    return s;
}

static calq_status set_outputs(calq_caffe_ctx *c)
{
    bool *current = calloc((size_t)c->g->n_values + 1, sizeof *current);
    int *outs = malloc(sizeof *outs * (size_t)(c->n_produced + 1));
    if (!current || !outs) {
        free(current);
        free(outs);
        return calq__caffe_oom(c);
    }
    for (int k = 0; k < c->n_blobs; k++)
        if (c->blobs[k].current >= 0) current[c->blobs[k].current] = true;
    /* Caffe's rule: a blob whose last write no layer reads afterwards is a net output. */
    int n = 0;
    for (int i = 0; i < c->n_produced; i++) {
        int v = c->produced[i];
        if (current[v] && !c->consumed[v]) outs[n++] = v;
    }
    free(current);
    c->g->outputs = outs;
    c->g->n_outputs = n;
    for (int i = 0; i < n; i++) c->g->values[outs[i]].is_output = true;
    if (!n)
        return calq__caffe_fail(c, NULL, CALQ_ERR_BAD_FORMAT,
                                "the net has no outputs (no layer produces a blob that is not read again)");
    return CALQ_OK;
}

static void free_recs(layer_rec *recs, int n)
{
    for (int i = 0; recs && i < n; i++) {
        free(recs[i].bottom);
        free(recs[i].top);
    }
    free(recs);
}

calq_status calq__caffe_build(calq_caffe_ctx *c, const calq_tp_node *root)
{
    net_state st = {0};
    st.state = calq_tp_find(root, "state");
    if (st.state && st.state->kind != CALQ_TP_MESSAGE) st.state = NULL;
    CALQ_TRY(calq__caffe_get_int(c, st.state, "level", 0, &st.level));
    st.n_stages = calq__caffe_count(st.state, "stage");

    layer_rec *recs = NULL;
    int n = 0;
    input_list ins = {0};
    calq_status s = read_layers(c, root, &st, &recs, &n);
    if (s == CALQ_OK) s = check_unknown(c, recs, n);

    /* Register every blob name first: helper values must never take a name a later layer
     * gives a blob, and the last writer of each blob must be known in advance. */
    for (int i = 0; s == CALQ_OK && i < calq_tp_count(root, "input"); i++) {
        const char *name;
        s = c->status = calq_tp_string(calq_tp_nth(root, "input", i), c->proto_name, &name, c->err);
        if (s == CALQ_OK && blob_entry(c, name) < 0) s = calq__caffe_oom(c);
    }
    for (int i = 0; s == CALQ_OK && i < n; i++) {
        layer_rec *r = &recs[i];
        if (r->kind == KIND_EXCLUDED) continue;
        for (int k = 0; s == CALQ_OK && k < r->n_bottom; k++)
            if (blob_entry(c, r->bottom[k]) < 0) s = calq__caffe_oom(c);
        for (int k = 0; s == CALQ_OK && k < r->n_top; k++) {
            int bi = blob_entry(c, r->top[k]);
            if (bi < 0) {
                s = calq__caffe_oom(c);
                break;
            }
            calq_caffe_blob *b = &c->blobs[bi];
            if (r->kind == KIND_MAPPED) b->writes++;
        }
        if (r->kind == KIND_TRAIN)
            calq__log(CALQ_LOG_INFO, "calq: note: %s:%d: skipping layer '%s' (%s): it only matters in training",
                      c->proto_name, r->tp->line, r->name, r->type);
    }
    if (s == CALQ_OK) s = net_inputs(c, root, &ins);
    for (int i = 0; s == CALQ_OK && i < n; i++) {
        layer_rec *r = &recs[i];
        switch (r->kind) {
        case KIND_INPUT: s = input_layer(c, r, &ins); break;
        case KIND_MAPPED: s = map_layer(c, recs, i, &ins); break;
        case KIND_DATA:
        case KIND_TRAIN:
            for (int k = 0; k < r->n_top; k++) {
                calq_caffe_blob *b = &c->blobs[calq__caffe_map_get(&c->blob_index, r->top[k])];
                b->current = -1;
                b->dropped_by = r->kind == KIND_TRAIN ? r->name : NULL;
                b->data_layer = r->kind == KIND_DATA ? i + 1 : 0;
                b->data_top = k;
            }
            break;
        default: break;
        }
    }
    if (s == CALQ_OK) {
        c->g->inputs = ins.v;
        c->g->n_inputs = ins.n;
        ins.v = NULL;
        s = set_outputs(c);
    }
    free(ins.v);
    free_recs(recs, n);
    return s;
}
