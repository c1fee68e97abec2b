/* Weights computed from constants by data-movement nodes (passes.h, calq__pass_const_weights).
 * Only nodes that move float32 elements without arithmetic are folded, and Cast(to=float) of a
 * float16 / float64 constant (the conversion the Cast kernel makes, exact for float16), so the
 * folded constant holds exactly the bytes the node would compute at plan time and a run of the
 * model is unchanged. */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/tensor.h"
#include "graph/passes.h"
#include "graph/qkind.h"

/* Producers followed from a layer's weight back to its initializer: exporters write one or two
 * (Identity, Transpose); the bound keeps a hostile chain from recursing without end. */
#define MAX_CHAIN 16

typedef struct fold_ctx {
    calq_graph *g;
    bool *removed;  /* nodes folded away (compacted at the end) */
    bool *bypassed; /* Identity nodes some layer no longer reads through */
    int *readers;   /* per value: inputs of nodes not removed that name it (kept up to date) */
    bool *captured; /* per value: read by a node's subgraph (an input beyond n_formal) */
} fold_ctx;

/* Node i is removed: its inputs lose a reader. */
static void remove_node(fold_ctx *f, int i)
{
    const calq_node *n = &f->g->nodes[i];
    f->removed[i] = true;
    for (int k = 0; k < n->n_inputs; k++)
        if (n->inputs[k] >= 0) f->readers[n->inputs[k]]--;
}

static bool is_op(const calq_node *n, const char *op)
{
    return !n->domain[0] && strcmp(n->op_type, op) == 0;
}

/* A constant int64 vector input k of n (a Reshape's shape, Squeeze / Unsqueeze axes since opset
 * 13); *cnt = -1 when the input is absent, false when it is present but not such a constant. */
static bool int_input(const calq_graph *g, const calq_node *n, int k, const int64_t **v, int *cnt)
{
    *cnt = -1;
    if (k >= n->n_inputs || n->inputs[k] < 0) return true;
    const calq_tensor *t = g->values[n->inputs[k]].constant;
    if (!t || t->dtype != CALQ_DTYPE_INT64 || t->ndim > 1 || calq_tensor_numel(t) > CALQ_MAX_DIMS) return false;
    *v = t->data;
    *cnt = (int)calq_tensor_numel(t);
    return true;
}

static int norm_axis(int64_t a, int rank)
{
    if (a < -rank || a >= rank) return -1;
    return (int)(a < 0 ? a + rank : a);
}

/* The axes of Squeeze / Unsqueeze: the attribute before opset 13, input 1 since. */
static bool axes_of(const calq_graph *g, const calq_node *n, const int64_t **v, int *cnt)
{
    if (n->opset < 13) {
        *cnt = calq__attr_ints(n, "axes", v);
        return *cnt <= CALQ_MAX_DIMS;
    }
    return int_input(g, n, 1, v, cnt);
}

/* Output dims of the shape-only nodes (Reshape, Squeeze, Unsqueeze, Flatten) on input dims x,
 * with the ONNX rules of the executor's infer functions (exec/kernels/shape.c); false when the
 * node is not one of them or its shape is not a constant the rules accept. */
static bool reshaped_dims(const calq_graph *g, const calq_node *n, const calq_tensor *x, int64_t *dims, int *nd)
{
    const int64_t *v = NULL;
    int cnt;
    if (is_op(n, "Reshape")) {
        if (!int_input(g, n, 1, &v, &cnt) || cnt < 0) return false;
        bool allowzero = calq__attr_int(n, "allowzero", 0) != 0;
        int64_t known = 1;
        int minus_one = -1;
        for (int i = 0; i < cnt; i++) {
            int64_t d = v[i];
            if (d == 0 && !allowzero) {
                if (i >= x->ndim) return false;
                d = x->dims[i];
            }
            if (d == -1) {
                if (minus_one >= 0) return false;
                minus_one = i;
                continue;
            }
            if (d < 0 || (d > 0 && known > INT64_MAX / d)) return false;
            known *= d;
            dims[i] = d;
        }
        int64_t total = calq_tensor_numel(x);
        if (minus_one >= 0) {
            if (known == 0 || total % known != 0) return false;
            dims[minus_one] = total / known;
        } else if (known != total) {
            return false;
        }
        *nd = cnt;
        return true;
    }
    if (is_op(n, "Flatten")) {
        int64_t axis = calq__attr_int(n, "axis", 1);
        if (axis < -x->ndim || axis > x->ndim) return false;
        if (axis < 0) axis += x->ndim;
        dims[0] = calq__shape_numel(x->dims, (int)axis);
        dims[1] = calq__shape_numel(x->dims + axis, x->ndim - (int)axis);
        *nd = 2;
        return true;
    }
    bool squeeze = is_op(n, "Squeeze");
    if (!squeeze && !is_op(n, "Unsqueeze")) return false;
    if (!axes_of(g, n, &v, &cnt)) return false;
    bool mark[CALQ_MAX_DIMS] = {false};
    if (squeeze) {
        for (int i = 0; i < x->ndim; i++) mark[i] = cnt <= 0 && x->dims[i] == 1;
        for (int i = 0; i < cnt; i++) {
            int a = norm_axis(v[i], x->ndim);
            if (a < 0 || mark[a] || x->dims[a] != 1) return false;
            mark[a] = true;
        }
        *nd = 0;
        for (int i = 0; i < x->ndim; i++)
            if (!mark[i]) dims[(*nd)++] = x->dims[i];
        return true;
    }
    int r = x->ndim + cnt;
    if (cnt < 0 || r > CALQ_MAX_DIMS) return false;
    for (int i = 0; i < cnt; i++) {
        int a = norm_axis(v[i], r);
        if (a < 0 || mark[a]) return false;
        mark[a] = true;
    }
    for (int i = 0, j = 0; i < r; i++) dims[i] = mark[i] ? 1 : x->dims[j++];
    *nd = r;
    return true;
}

/* Transpose's output: its perm (default: the axes reversed) applied to x, into out (allocated
 * here); *ok = false when perm is not a permutation of x's axes. */
static calq_status transpose_into(const calq_node *n, const calq_tensor *x, calq_tensor *out, bool *ok, calq_error *err)
{
    int r = x->ndim, perm[CALQ_MAX_DIMS];
    const int64_t *p;
    int cnt = calq__attr_ints(n, "perm", &p);
    bool seen[CALQ_MAX_DIMS] = {false};
    *ok = false;
    if (cnt >= 0 && cnt != r) return CALQ_OK;
    for (int i = 0; i < r; i++) {
        int64_t a = cnt >= 0 ? p[i] : r - 1 - i;
        if (a < 0 || a >= r || seen[a]) return CALQ_OK;
        seen[a] = true;
        perm[i] = (int)a;
    }
    int64_t in_stride[CALQ_MAX_DIMS], idx[CALQ_MAX_DIMS] = {0};
    int64_t s = 1;
    for (int i = r - 1; i >= 0; i--) {
        in_stride[i] = s;
        s *= x->dims[i];
    }
    out->dtype = x->dtype;
    out->ndim = r;
    for (int i = 0; i < r; i++) out->dims[i] = x->dims[perm[i]];
    CALQ_TRY(calq__tensor_alloc(out, err));
    const float *src = x->data;
    float *dst = out->data;
    int64_t numel = calq_tensor_numel(out);
    for (int64_t o = 0; o < numel; o++) {
        int64_t off = 0;
        for (int i = 0; i < r; i++) off += idx[i] * in_stride[perm[i]];
        dst[o] = src[off];
        for (int i = r - 1; i >= 0 && ++idx[i] == out->dims[i]; i--) idx[i] = 0; /* odometer */
    }
    *ok = true;
    return CALQ_OK;
}

/* Cast(to=float) of float constant x into out (allocated here): models halved for download and
 * mixed-precision exports keep their weights as float16 initializers behind such a Cast and
 * compute in float32. The element conversions are the Cast kernel's (exec/kernels/elementwise.c):
 * exact for float16, round to nearest for float64. *ok = false for any other Cast. */
static calq_status cast_into(const calq_node *n, const calq_tensor *x, calq_tensor *out, bool *ok, calq_error *err)
{
    *ok = false;
    if (calq__attr_int(n, "to", 0) != 1 /* ONNX FLOAT */ ||
        (x->dtype != CALQ_DTYPE_FLOAT16 && x->dtype != CALQ_DTYPE_FLOAT64 && x->dtype != CALQ_DTYPE_FLOAT32))
        return CALQ_OK;
    out->dtype = CALQ_DTYPE_FLOAT32;
    out->ndim = x->ndim;
    memcpy(out->dims, x->dims, sizeof x->dims);
    CALQ_TRY(calq__tensor_alloc(out, err));
    float *dst = out->data;
    const int64_t numel = calq_tensor_numel(x);
    if (x->dtype == CALQ_DTYPE_FLOAT16) {
        const uint16_t *src = x->data;
        for (int64_t i = 0; i < numel; i++) dst[i] = calq__f16_to_f32(src[i]);
    } else if (x->dtype == CALQ_DTYPE_FLOAT64) {
        const double *src = x->data;
        for (int64_t i = 0; i < numel; i++) dst[i] = (float)src[i];
    } else if (numel) {
        memcpy(dst, x->data, (size_t)numel * sizeof *dst);
    }
    *ok = true;
    return CALQ_OK;
}

/* Value v as a constant: v when it is one, the initializer an Identity chain reads, or v itself
 * turned into a constant when its producer is a Transpose / Reshape / Squeeze / Unsqueeze /
 * Flatten of one or a Cast of one to float32 (the node is then removed). *out = -1 when v is not
 * computed from constants so. */
static calq_status resolve(fold_ctx *f, int v, int depth, int *out, calq_error *err)
{
    calq_graph *g = f->g;
    *out = -1;
    if (g->values[v].constant) {
        *out = v;
        return CALQ_OK;
    }
    int p = g->values[v].producer;
    if (p < 0 || depth >= MAX_CHAIN || f->removed[p]) return CALQ_OK;
    const calq_node *n = &g->nodes[p];
    if (n->domain[0] || n->n_outputs != 1 || n->outputs[0] != v || n->n_inputs < 1 || n->inputs[0] < 0) return CALQ_OK;
    bool identity = is_op(n, "Identity"), transpose = is_op(n, "Transpose"), cast = is_op(n, "Cast");
    if (!identity && !transpose && !cast && !is_op(n, "Reshape") && !is_op(n, "Squeeze") && !is_op(n, "Unsqueeze") &&
        !is_op(n, "Flatten"))
        return CALQ_OK;
    /* a value a subgraph captures is read by name inside it, and a graph output must stay
     * computed by its node: neither is replaced */
    if (g->values[v].is_output || f->captured[v]) return CALQ_OK;
    int src;
    CALQ_TRY(resolve(f, n->inputs[0], depth + 1, &src, err));
    if (src < 0) return CALQ_OK;
    const calq_tensor *x = g->values[src].constant;
    /* weights are float32 (quantizable.c): only a Cast makes them from another type */
    if (x->dtype != CALQ_DTYPE_FLOAT32 && !cast) return CALQ_OK;
    if (identity) {
        f->bypassed[p] = true;
        *out = src;
        return CALQ_OK;
    }
    calq_tensor *t = calloc(1, sizeof *t);
    if (!t) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    bool ok = false;
    calq_status st = CALQ_OK;
    if (transpose) {
        st = transpose_into(n, x, t, &ok, err);
    } else if (cast) {
        st = cast_into(n, x, t, &ok, err);
    } else {
        int64_t dims[CALQ_MAX_DIMS];
        int ndim = 0;
        if (reshaped_dims(g, n, x, dims, &ndim)) { /* the same elements in the same order */
            st = calq__tensor_clone(t, x, err);
            if (st == CALQ_OK) {
                memcpy(t->dims, dims, sizeof dims);
                t->ndim = ndim;
            }
            ok = st == CALQ_OK;
        }
    }
    if (st != CALQ_OK || !ok) {
        calq_tensor_free_data(t);
        free(t);
        return st;
    }
    calq_value *val = &g->values[v];
    val->constant = t;
    val->constant_shared = false;
    val->folded = true;
    val->producer = -1;
    val->dtype = t->dtype;
    val->ndim = t->ndim;
    memcpy(val->dims, t->dims, sizeof t->dims);
    remove_node(f, p);
    *out = v;
    return CALQ_OK;
}

/* The op types of the kinds with constant weights (qkind.h), whose weight, second weight and bias
 * inputs are resolved. */
static bool const_weight_layer(const calq_node *n, const calq_qkind **kinds, int *n_kinds)
{
    *n_kinds = 0;
    for (int r = 0; r < calq__qkind_count(); r++) {
        const calq_qkind *k = calq__qkind_at(r);
        if (!k->tensor_only && k->weights == CALQ_QKIND_WEIGHTS_CONST && is_op(n, k->onnx) && *n_kinds < 4)
            kinds[(*n_kinds)++] = k;
    }
    return *n_kinds > 0;
}

static bool read_by_any(const fold_ctx *f, int v)
{
    return f->g->values[v].is_output || f->readers[v] > 0;
}

/* Every Cast to float32 of a float16 / float64 constant, whoever reads it: a model whose weights
 * were halved keeps its BatchNormalization parameters, per-channel Mul / Add constants and biases
 * behind such Casts too, and Conv+BN folding (fold_conv_affine.c) needs them constant to quantize
 * the layer as the float32 model's. */
static calq_status fold_casts(fold_ctx *f, calq_error *err)
{
    calq_graph *g = f->g;
    for (int i = 0; i < g->n_nodes; i++) {
        const calq_node *n = &g->nodes[i];
        if (f->removed[i] || !is_op(n, "Cast") || n->n_inputs < 1 || n->inputs[0] < 0 || n->n_outputs != 1) continue;
        const calq_tensor *x = g->values[n->inputs[0]].constant;
        if (!x || (x->dtype != CALQ_DTYPE_FLOAT16 && x->dtype != CALQ_DTYPE_FLOAT64)) continue;
        int c;
        CALQ_TRY(resolve(f, n->outputs[0], 0, &c, err));
    }
    return CALQ_OK;
}

static calq_status fold_layers(fold_ctx *f, int *n_folded, calq_error *err)
{
    calq_graph *g = f->g;
    CALQ_TRY(fold_casts(f, err));
    for (int i = 0; i < g->n_nodes; i++) {
        const calq_qkind *kinds[4];
        int nk;
        if (f->removed[i] || !const_weight_layer(&g->nodes[i], kinds, &nk)) continue;
        for (int r = 0; r < nk; r++) {
            const int slots[3] = {kinds[r]->weight_input, kinds[r]->weight2_input, kinds[r]->bias_input};
            for (int s = 0; s < 3; s++) {
                int k = slots[s];
                calq_node *n = &g->nodes[i];
                if (k < 0 || k >= n->n_formal || n->inputs[k] < 0 || g->values[n->inputs[k]].constant) continue;
                int c;
                CALQ_TRY(resolve(f, n->inputs[k], 0, &c, err));
                if (c < 0) continue;
                f->readers[g->nodes[i].inputs[k]]--;
                f->readers[c]++;
                g->nodes[i].inputs[k] = c;
                (*n_folded)++;
            }
        }
    }
    /* Identity nodes nothing reads any more go too, innermost last (a chain empties from its
     * reader's end); their outputs become views of the initializer, so no value is left without
     * a producer or a constant. */
    for (bool again = true; again;) {
        again = false;
        for (int i = 0; i < g->n_nodes; i++) {
            if (!f->bypassed[i] || f->removed[i] || read_by_any(f, g->nodes[i].outputs[0])) continue;
            int c;
            CALQ_TRY(resolve(f, g->nodes[i].inputs[0], 0, &c, err));
            if (c < 0) continue;
            calq_value *val = &g->values[g->nodes[i].outputs[0]];
            val->constant = g->values[c].constant;
            val->constant_shared = true;
            val->folded = true;
            val->producer = -1;
            remove_node(f, i);
            again = true;
        }
    }
    return CALQ_OK;
}

calq_status calq__pass_const_weights(calq_graph *g, int *n_folded, calq_error *err)
{
    *n_folded = 0;
    fold_ctx f = {g, calloc((size_t)g->n_nodes + 1, sizeof(bool)), calloc((size_t)g->n_nodes + 1, sizeof(bool)),
                  calloc((size_t)g->n_values + 1, sizeof(int)), calloc((size_t)g->n_values + 1, sizeof(bool))};
    /* readers and captures counted once: a scan of every node per value made the import of a
     * model with many Identity / Transpose weights quadratic (20k layers: 5.4 s against 0.76) */
    if (f.readers && f.captured)
        for (int i = 0; i < g->n_nodes; i++)
            for (int k = 0; k < g->nodes[i].n_inputs; k++) {
                const int v = g->nodes[i].inputs[k];
                if (v < 0) continue;
                f.readers[v]++;
                if (k >= g->nodes[i].n_formal) f.captured[v] = true;
            }
    calq_status st = f.removed && f.bypassed && f.readers && f.captured
                         ? fold_layers(&f, n_folded, err)
                         : calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    int kept = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        if (f.removed && f.removed[i])
            calq__node_release(&g->nodes[i]);
        else
            g->nodes[kept++] = g->nodes[i];
    }
    bool changed = kept != g->n_nodes;
    g->n_nodes = kept;
    free(f.removed);
    free(f.bypassed);
    free(f.readers);
    free(f.captured);
    if (st == CALQ_OK && changed) st = calq__graph_toposort(g, err);
    return st;
}
