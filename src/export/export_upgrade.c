/* Raising an ONNX model's default opset to 13 for the quantized export (issue 6), and the
 * final assembly of the output graph.
 *
 * Why 13: DequantizeLinear with a per-channel scale (the `axis` attribute) exists from opset
 * 13; the record's Conv weights are per channel (§8.2). Opset 10 would allow per-tensor
 * weights only, which would not reproduce the record's scale_w. So a model below 13 is raised
 * (AMCT's formats raise models below 11 only: export_onnx_qdq.c), and every node is checked, as
 * the ONNX version converter's adapters for 7..12 -> 13 do:
 *  - operators whose meaning did not change between the model's opset and 13 are kept;
 *  - attributes that became inputs are converted (Unsqueeze, Squeeze: axes at 13; Split: split
 *    at 13; ReduceSum: axes at 13; Slice: starts/ends/axes at 10; TopK: k at 10; Pad: pads and
 *    value at 11; Clip: min/max at 11; Dropout: ratio at 12, an identity at inference);
 *  - Upsample (opsets 7-9, deprecated at 10) and Resize-10 become Resize-13 with the asymmetric
 *    transform they implied and the nearest rounding calq and onnxruntime give them (floor when
 *    enlarging, ceil when shrinking); Resize-11's tf_half_pixel_for_nn (removed at 13) with
 *    floor rounding becomes half_pixel with round_prefer_ceil, the same positions;
 *  - Scatter becomes ScatterElements; BatchNormalization loses the opset 7-8 `spatial`
 *    attribute (1, its only form at 9+);
 *  - Softmax, LogSoftmax and Hardmax are kept when they act on the last axis, where their 2-D
 *    (before 13) and per-axis (13) definitions agree, and become Flatten -> op -> Reshape
 *    otherwise (the version converter's rewrite);
 *  - If, Loop and Scan are the same operators at 13; the nodes of their bodies are converted by
 *    these rules, at any depth (a torchvision detector exported at opset 11 has Ifs);
 *  - any other operator stops the save with its name. */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/strmap.h"
#include "base/tensor.h"
#include "export/export_onnx.h"

static calq_status oom(calq_error *err)
{
    return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "save: out of memory");
}

/* Operators whose signature and meaning are the same at every opset from 7 up to 13 for the
 * attributes a model below 13 can carry. */
/* Operators whose signature and meaning are the same at every opset from 7 up to 13 for the
 * attributes a model below 13 can carry (later opsets only added types or optional attributes
 * whose defaults keep the old meaning); and the quantizable kinds (graph/qkind.h), whose nodes
 * the writers copy as they are, so each kind's op is one of them by the table's rule. Sorted. */
static const char *const unchanged[] = {
    "Abs",
    "Acos",
    "Acosh",
    "Add",
    "And",
    "ArgMax",
    "ArgMin",
    "Asin",
    "Asinh",
    "Atan",
    "Atanh",
    "BitShift",
    "Cast",
    "Ceil",
    "Celu",
    "Compress",
    "Concat",
    "Constant",
    "ConstantOfShape",
    "Cos",
    "Cosh",
    "CumSum",
    "DepthToSpace",
    "DequantizeLinear",
    "Div",
    "Einsum",
    "Elu",
    "Equal",
    "Erf",
    "Exp",
    "Expand",
    "EyeLike",
    "Flatten",
    "Floor",
    "Gather",
    "GatherElements",
    "GatherND",
    "GlobalAveragePool",
    "GlobalMaxPool",
    "Greater",
    "GreaterOrEqual",
    "HardSigmoid",
    "Identity",
    "InstanceNormalization",
    "IsInf",
    "IsNaN",
    "LRN",
    "LeakyRelu",
    "Less",
    "LessOrEqual",
    "Log",
    "Max",
    "MaxPool",
    "Mean",
    "MeanVarianceNormalization",
    "Min",
    "Mod",
    "Mul",
    "Neg",
    "NonMaxSuppression",
    "NonZero",
    "Not",
    "OneHot",
    "Or",
    "PRelu",
    "Pow",
    "QuantizeLinear",
    "Range",
    "Reciprocal",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceMax",
    "ReduceMean",
    "ReduceMin",
    "ReduceProd",
    "ReduceSumSquare",
    "Relu",
    "Reshape",
    "ReverseSequence",
    "RoiAlign",
    "Round",
    "ScatterElements",
    "ScatterND",
    "Selu",
    "Shape",
    "Shrink",
    "Sigmoid",
    "Sign",
    "Sin",
    "Sinh",
    "Size",
    "Softplus",
    "Softsign",
    "SpaceToDepth",
    "Sqrt",
    "Sub",
    "Sum",
    "Tan",
    "Tanh",
    "ThresholdedRelu",
    "Tile",
    "Transpose",
    "Unique",
    "Where",
    "Xor",
};

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static bool is_unchanged(const char *op)
{
    const calq_qkind *k = calq__qkind_by_onnx(op); /* a layer kind; tensor-only ones are ordinary ops here */
    if (k && !k->tensor_only) return true;
    return bsearch(&op, unchanged, sizeof unchanged / sizeof unchanged[0], sizeof unchanged[0], cmp_name) != NULL;
}

/* Moves INTS attribute `attr` of nd into a new int64 initializer input at position pos. */
static bool attr_to_input(calq__xctx *c, Onnx__NodeProto *nd, const char *attr, int pos, bool as_float)
{
    const Onnx__AttributeProto *at = calq__xg_attr_find(nd, attr);
    char **in =
        calq__xa_alloc(&c->x.a, sizeof(char *) * (size_t)(pos + 1 > (int)nd->n_input ? pos + 1 : (int)nd->n_input));
    if (!in) return false;
    memcpy(in, nd->input, sizeof(char *) * nd->n_input);
    for (int k = (int)nd->n_input; k <= pos; k++) in[k] = "";
    nd->input = in;
    if ((int)nd->n_input < pos + 1) nd->n_input = (size_t)pos + 1;
    if (!at) return true;
    char *name = calq__xname(c, "%s.%s", nd->name && nd->name[0] ? nd->name : nd->output[0], attr);
    if (!name) return false;
    Onnx__TensorProto *t;
    if (as_float) {
        t = calq__xg_tensor(&c->x, name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, NULL, 0, &at->f, sizeof(float));
    } else {
        int64_t n = (int64_t)at->n_ints;
        t = calq__xg_tensor(&c->x, name, ONNX__TENSOR_PROTO__DATA_TYPE__INT64, &n, 1, at->ints,
                            sizeof(int64_t) * at->n_ints);
    }
    if (!calq__xg_init_add(&c->x, t)) return false;
    in[pos] = name;
    calq__xg_attr_remove(&c->x, nd, attr);
    return true;
}

static int proto_rank(Onnx__ValueInfoProto *const *vi, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(vi[i]->name, name) && vi[i]->type && vi[i]->type->tensor_type && vi[i]->type->tensor_type->shape)
            return (int)vi[i]->type->tensor_type->shape->n_dim;
    return -1;
}

/* Rank of a tensor: the IR's, else the model's declared shapes of the node's input or output
 * (Softmax keeps the rank). */
static int value_rank(const calq__xctx *c, const Onnx__NodeProto *n)
{
    int v = calq__graph_find(c->g, n->input[0]); /* the save's copy, with inferred shapes */
    if (v >= 0 && c->g->values[v].ndim >= 0) return c->g->values[v].ndim;
    const Onnx__GraphProto *g = c->mp->graph;
    for (int k = 0; k < 2; k++) {
        const char *nm = k ? n->output[0] : n->input[0];
        int r = proto_rank(g->value_info, g->n_value_info, nm);
        if (r < 0) r = proto_rank(g->output, g->n_output, nm);
        if (r < 0) r = proto_rank(g->input, g->n_input, nm);
        if (r >= 0) return r;
    }
    return -1;
}

/* The float values of constant tensor `name` (an initializer or Constant of the model), or -1
 * when it is not a constant. */
static int constant_floats(const calq__xctx *c, const char *name, double *v, int max)
{
    int id = calq__graph_find(c->m->g, name);
    const calq_tensor *t = id >= 0 ? c->m->g->values[id].constant : NULL;
    if (!t || !t->data || calq_tensor_numel(t) > max) return -1;
    int n = (int)calq_tensor_numel(t);
    for (int i = 0; i < n; i++) v[i] = calq__tensor_get_f64(t, i);
    return n;
}

/* Upsample (opsets 7-9) and Resize-10 as Resize-13: inputs (X, roi "", scales), the
 * asymmetric transform (output x reads input x / scale) and, for nearest, the rounding the old
 * operators had in calq and onnxruntime: down when enlarging, up when shrinking. Opset 13 has
 * one rounding for every axis, so a resize that enlarges one axis and shrinks another cannot be
 * expressed and is refused. */
static calq_status legacy_resize(calq__xctx *c, Onnx__NodeProto *nd, const Onnx__NodeProto *src, const char *name,
                                 calq_error *err)
{
    double sc[CALQ_MAX_DIMS];
    int n = -1;
    const char *scales = NULL;
    const Onnx__AttributeProto *at = calq__xg_attr_find(src, "scales");
    if (at && at->n_floats) { /* Upsample-7: scales is an attribute */
        n = (int)at->n_floats > CALQ_MAX_DIMS ? -1 : (int)at->n_floats;
        for (int i = 0; i < n; i++) sc[i] = at->floats[i];
        int64_t dims = n;
        char *sname = calq__xname(c, "%s.scales", name);
        Onnx__TensorProto *t = sname ? calq__xg_tensor(&c->x, sname, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, &dims, 1,
                                                       at->floats, sizeof(float) * at->n_floats)
                                     : NULL;
        if (!t || !calq__xg_init_add(&c->x, t)) return oom(err);
        scales = sname;
        calq__xg_attr_remove(&c->x, nd, "scales");
    } else if (src->n_input >= 2) {
        scales = src->input[1];
        n = constant_floats(c, scales, sc, CALQ_MAX_DIMS);
    }
    if (!scales) return calq__fail(err, CALQ_ERR_BAD_FORMAT, name, "save: %s \"%s\" has no scales", src->op_type, name);
    const Onnx__AttributeProto *ma = calq__xg_attr_find(src, "mode");
    bool nearest = !ma || !ma->has_s || (ma->s.len == 7 && !memcmp(ma->s.data, "nearest", 7));
    bool grow = false, shrink = false;
    for (int i = 0; i < n; i++) {
        grow |= sc[i] > 1.0;
        shrink |= sc[i] < 1.0;
    }
    if (nearest && (n < 0 || (grow && shrink)))
        return calq__fail(err, CALQ_ERR_UNSUPPORTED, name,
                          n < 0
                              ? "save: %s \"%s\" (nearest) has computed scales; opset 13's Resize (needed for "
                                "per-channel weights) fixes one rounding for all axes and calq cannot tell which the "
                                "model needs. Re-export the model at opset 13 or later"
                              : "save: %s \"%s\" (nearest) enlarges one axis and shrinks another; opset 13's Resize "
                                "(needed for per-channel weights) rounds every axis the same way. Re-export the model "
                                "at opset 13 or later",
                          src->op_type, name);
    char **in = calq__xa_alloc(&c->x.a, sizeof(char *) * 3);
    if (!in) return oom(err);
    in[0] = src->input[0];
    in[1] = "";
    in[2] = (char *)scales;
    nd->input = in;
    nd->n_input = 3;
    nd->op_type = "Resize";
    calq__xg_attr_remove(&c->x, nd, "mode");
    bool ok = calq__xg_attr_str(&c->x, nd, "mode", nearest ? "nearest" : "linear") &&
              calq__xg_attr_str(&c->x, nd, "coordinate_transformation_mode", "asymmetric") &&
              (!nearest || calq__xg_attr_str(&c->x, nd, "nearest_mode", shrink ? "ceil" : "floor"));
    return ok ? CALQ_OK : oom(err);
}

static calq_status upgrade_bodies(calq__xctx *c, Onnx__NodeProto *nd, const char *name, int depth, calq_error *err);

static calq_status upgrade_node(calq__xctx *c, const Onnx__NodeProto *src, Onnx__NodeProto **out, int depth,
                                calq_error *err)
{
    *out = (Onnx__NodeProto *)src;
    if (!c->upgrade || (src->domain && src->domain[0] && strcmp(src->domain, "ai.onnx") != 0)) return CALQ_OK;
    const char *op = src->op_type;
    if (is_unchanged(op)) return CALQ_OK;
    const char *name = src->name && src->name[0] ? src->name : src->output[0];
    Onnx__NodeProto *nd = calq__xg_copy_node(&c->x, src);
    if (!nd) return oom(err);
    bool ok = true;
    if (!strcmp(op, "Unsqueeze") || !strcmp(op, "Squeeze")) {
        ok = attr_to_input(c, nd, "axes", 1, false);
    } else if (!strcmp(op, "Slice") && c->opset_in < 10) {
        ok = attr_to_input(c, nd, "starts", 1, false) && attr_to_input(c, nd, "ends", 2, false) &&
             attr_to_input(c, nd, "axes", 3, false);
        if (ok && nd->input[3][0] == '\0') nd->n_input = 3;
    } else if (!strcmp(op, "Slice")) {
        /* opset 10 Slice already takes inputs */
    } else if (!strcmp(op, "Split") || !strcmp(op, "ReduceSum")) {
        /* Split's `split` and ReduceSum's `axes` became inputs at 13 */
        ok = attr_to_input(c, nd, !strcmp(op, "Split") ? "split" : "axes", 1, false);
        if (ok && nd->input[1][0] == '\0') nd->n_input = 1;
    } else if (!strcmp(op, "Pad") && c->opset_in >= 11) {
        /* pads and constant_value are inputs since 11 */
    } else if (!strcmp(op, "Pad")) {
        /* before 11: pads and value were attributes (value a float; calq's models pad float data) */
        const Onnx__AttributeProto *va = calq__xg_attr_find(src, "value");
        ok = attr_to_input(c, nd, "pads", 1, false) && (!va || va->f == 0.0f || attr_to_input(c, nd, "value", 2, true));
        calq__xg_attr_remove(&c->x, nd, "value");
    } else if (!strcmp(op, "TopK") && c->opset_in < 10) {
        /* k became an input at 10 (a 1-D int64 tensor) */
        const Onnx__AttributeProto *ka = calq__xg_attr_find(src, "k");
        char *kname = calq__xname(c, "%s.k", name);
        int64_t one = 1, k = ka ? ka->i : 0;
        Onnx__TensorProto *t =
            kname ? calq__xg_tensor(&c->x, kname, ONNX__TENSOR_PROTO__DATA_TYPE__INT64, &one, 1, &k, sizeof k) : NULL;
        char **in = calq__xa_alloc(&c->x.a, sizeof(char *) * 2);
        ok = t && in && calq__xg_init_add(&c->x, t);
        if (ok) {
            in[0] = src->input[0];
            in[1] = kname;
            nd->input = in;
            nd->n_input = 2;
            calq__xg_attr_remove(&c->x, nd, "k");
        }
    } else if (!strcmp(op, "TopK")) {
    } else if (!strcmp(op, "Upsample") || (!strcmp(op, "Resize") && c->opset_in < 11)) {
        CALQ_TRY(legacy_resize(c, nd, src, name, err));
    } else if (!strcmp(op, "Scatter")) {
        nd->op_type = "ScatterElements"; /* renamed at 11, same meaning */
    } else if (!strcmp(op, "BatchNormalization")) {
        /* opsets 7-8 had `spatial`; 9 kept only its default form (per channel) */
        const Onnx__AttributeProto *sp = calq__xg_attr_find(src, "spatial");
        if (sp && sp->i == 0)
            return calq__fail(err, CALQ_ERR_UNSUPPORTED, name,
                              "save: BatchNormalization \"%s\" has spatial = 0 (statistics per channel and position), "
                              "which opset 13 (needed for per-channel weights) cannot express",
                              name);
        calq__xg_attr_remove(&c->x, nd, "spatial");
    } else if (!strcmp(op, "Resize") && c->opset_in >= 11) {
        const Onnx__AttributeProto *at = calq__xg_attr_find(src, "coordinate_transformation_mode");
        const Onnx__AttributeProto *nm = calq__xg_attr_find(src, "nearest_mode");
        bool floor_mode = nm && nm->has_s && nm->s.len == 5 && !memcmp(nm->s.data, "floor", 5);
        if (at && at->has_s && at->s.len == 20 && !memcmp(at->s.data, "tf_half_pixel_for_nn", 20)) {
            /* Opset 13 removed the mode. With floor rounding (TensorFlow's half_pixel_centers
             * nearest resize) it is exactly half_pixel with round_prefer_ceil:
             * floor((x + 0.5) / s) = round_prefer_ceil((x + 0.5) / s - 0.5). */
            if (!floor_mode)
                return calq__fail(err, CALQ_ERR_UNSUPPORTED, name,
                                  "save: Resize \"%s\" uses coordinate_transformation_mode tf_half_pixel_for_nn with a "
                                  "nearest_mode other than floor, which opset 13 (needed for per-channel weights) "
                                  "cannot express; re-export the model at opset 13",
                                  name);
            calq__xg_attr_remove(&c->x, nd, "coordinate_transformation_mode");
            calq__xg_attr_remove(&c->x, nd, "nearest_mode");
            ok = calq__xg_attr_str(&c->x, nd, "coordinate_transformation_mode", "half_pixel") &&
                 calq__xg_attr_str(&c->x, nd, "nearest_mode", "round_prefer_ceil");
        }
    } else if (!strcmp(op, "Dropout")) {
        /* inference: the identity at every opset; `ratio` became an input at 12 */
        calq__xg_attr_remove(&c->x, nd, "ratio");
        calq__xg_attr_remove(&c->x, nd, "is_test");
    } else if (!strcmp(op, "Clip") && c->opset_in < 11) {
        ok = attr_to_input(c, nd, "min", 1, true) && attr_to_input(c, nd, "max", 2, true);
    } else if (!strcmp(op, "Clip")) {
    } else if (!strcmp(op, "Softmax") || !strcmp(op, "LogSoftmax") || !strcmp(op, "Hardmax")) {
        const Onnx__AttributeProto *at = calq__xg_attr_find(src, "axis");
        int64_t axis = at ? at->i : 1;
        int r = value_rank(c, src);
        calq__xg_attr_remove(&c->x, nd, "axis");
        ok = calq__xg_attr_int(&c->x, nd, "axis", -1);
        if (ok && (r < 0 || (axis < 0 ? axis + r : axis) != r - 1)) {
            /* Before 13 the operator normalised the input flattened to 2-D at `axis`; at 13 it
             * works on one axis. Exact for any rank (the version converter's rewrite):
             * Flatten(axis) -> op(axis -1) -> Reshape to Shape(x). */
            char *shp = calq__xname(c, "%s.shape", name), *flat = calq__xname(c, "%s.flat", name);
            char *soft = calq__xname(c, "%s.2d", name);
            /* node names: the Shape and Flatten after their outputs, the Reshape "<name>.reshape" (it
             * had the op's own name, which the op keeps: two nodes of one name) */
            char *n_shp = shp ? calq__xnode_name(c, "%s", shp) : NULL,
                 *n_flat = flat ? calq__xnode_name(c, "%s", flat) : NULL;
            char *n_r = calq__xnode_name(c, "%s.reshape", name);
            const char *in0[1] = {src->input[0]}, *o_shp[1] = {shp}, *o_flat[1] = {flat};
            Onnx__NodeProto *ns =
                n_shp && n_flat && n_r && soft ? calq__xg_new_node(&c->x, "Shape", n_shp, in0, 1, o_shp, 1) : NULL;
            Onnx__NodeProto *nf = ns ? calq__xg_new_node(&c->x, "Flatten", n_flat, in0, 1, o_flat, 1) : NULL;
            ok = nf && calq__xg_attr_int(&c->x, nf, "axis", axis) && calq__xg_node(&c->x, ns) &&
                 calq__xg_node(&c->x, nf);
            if (ok) {
                nd->input[0] = flat;
                nd->output = calq__xa_alloc(&c->x.a, sizeof(char *));
                ok = nd->output != NULL;
            }
            if (ok) {
                nd->output[0] = soft;
                nd->n_output = 1;
                ok = calq__xg_node(&c->x, nd);
            }
            const char *in_r[2] = {soft, shp}, *o_r[1] = {src->output[0]};
            Onnx__NodeProto *nr = ok ? calq__xg_new_node(&c->x, "Reshape", n_r, in_r, 2, o_r, 1) : NULL;
            if (!nr) return oom(err);
            *out = nr;
            return CALQ_OK;
        }
    } else if (!strcmp(op, "If") || !strcmp(op, "Loop") || !strcmp(op, "Scan")) {
        /* The same operators at 13 (Scan-11 is Scan-9 with negative axes); their bodies' nodes are
         * read at the model's default opset too, so each body is converted as the main graph is */
        CALQ_TRY(upgrade_bodies(c, nd, name, depth, err));
    } else {
        return calq__fail(err, CALQ_ERR_UNSUPPORTED, name,
                          "save: the model is opset %d and per-channel DequantizeLinear needs opset 13; calq does not "
                          "convert %s \"%s\" to opset 13. Re-export the model at opset 13 or later (for example with "
                          "onnx.version_converter) and calibrate again",
                          c->opset_in, op, name);
    }
    if (!ok) return oom(err);
    *out = nd;
    return CALQ_OK;
}

calq_status calq__export_upgrade_node(calq__xctx *c, const Onnx__NodeProto *src, Onnx__NodeProto **out, calq_error *err)
{
    return upgrade_node(c, src, out, 0, err);
}

/* A copy of `body` whose nodes are upgrade_node's conversions, in order (with the nodes a
 * conversion adds before its node). They are collected in c->x's node list, swapped for a fresh
 * one meanwhile; the initializers conversions add go to the main graph, which a body may read
 * (outer-scope names). Names stay unique model-wide: c->x.names sees every one. */
static calq_status upgrade_body(calq__xctx *c, const Onnx__GraphProto *body, Onnx__GraphProto **out, int depth,
                                calq_error *err)
{
    calq__xgraph *x = &c->x;
    Onnx__NodeProto **outer = x->nodes;
    const size_t outer_n = x->n_nodes, outer_cap = x->cap_nodes;
    x->nodes = NULL;
    x->n_nodes = x->cap_nodes = 0;
    calq_status st = CALQ_OK;
    for (size_t i = 0; st == CALQ_OK && i < body->n_node; i++) {
        Onnx__NodeProto *u = NULL;
        st = upgrade_node(c, body->node[i], &u, depth + 1, err);
        if (st == CALQ_OK && !calq__xg_node(x, u)) st = oom(err);
    }
    Onnx__GraphProto *g = st == CALQ_OK ? calq__xa_alloc(&x->a, sizeof *g) : NULL;
    if (st == CALQ_OK && !g) st = oom(err);
    if (g) {
        *g = *body;
        g->node = x->nodes;
        g->n_node = x->n_nodes;
    }
    x->nodes = outer;
    x->n_nodes = outer_n;
    x->cap_nodes = outer_cap;
    *out = g;
    return st;
}

/* nd (an arena copy of an If, Loop or Scan) gets copies of its graph attributes with converted
 * bodies; the original attributes are left as they are. */
static calq_status upgrade_bodies(calq__xctx *c, Onnx__NodeProto *nd, const char *name, int depth, calq_error *err)
{
    /* the importer bounds nesting far below this; a hand-built proto cannot recurse without end */
    if (depth > 64)
        return calq__fail(err, CALQ_ERR_UNSUPPORTED, name, "save: \"%s\" nests subgraphs more than 64 deep", name);
    for (size_t a = 0; a < nd->n_attribute; a++) {
        const Onnx__AttributeProto *at = nd->attribute[a];
        if (!at->g && !at->n_graphs) continue;
        Onnx__AttributeProto *na = calq__xa_alloc(&c->x.a, sizeof *na);
        if (!na) return oom(err);
        *na = *at;
        if (at->g) CALQ_TRY(upgrade_body(c, at->g, &na->g, depth, err));
        if (at->n_graphs) {
            na->graphs = calq__xa_alloc(&c->x.a, sizeof *na->graphs * at->n_graphs);
            if (!na->graphs) return oom(err);
            for (size_t k = 0; k < at->n_graphs; k++)
                CALQ_TRY(upgrade_body(c, at->graphs[k], &na->graphs[k], depth, err));
        }
        nd->attribute[a] = na;
    }
    return CALQ_OK;
}

/* Every name the nodes read (inputs, and inputs of the nodes of their subgraphs at any depth: an
 * If/Loop/Scan body reads the outer graph's initializers by name) into `read`, and every name
 * they define into `defined`; values 1. Hashed: one scan of every node per initializer made saving
 * a 10k-layer model take minutes (issue 14). false on out-of-memory. */
static bool add_graph_reads(calq_strmap *read, const Onnx__GraphProto *g, int depth);

static bool add_node_reads(calq_strmap *read, const Onnx__NodeProto *n, int depth)
{
    for (size_t k = 0; k < n->n_input; k++)
        if (n->input[k] && n->input[k][0] && !calq__strmap_put(read, n->input[k], 1)) return false;
    /* the importer bounds subgraph nesting; this guard keeps a hand-built proto from recursing
     * without end */
    if (depth > 64) return true;
    for (size_t a = 0; a < n->n_attribute; a++) {
        const Onnx__AttributeProto *at = n->attribute[a];
        if (at->g && !add_graph_reads(read, at->g, depth + 1)) return false;
        for (size_t k = 0; k < at->n_graphs; k++)
            if (!add_graph_reads(read, at->graphs[k], depth + 1)) return false;
    }
    return true;
}

static bool add_graph_reads(calq_strmap *read, const Onnx__GraphProto *g, int depth)
{
    for (size_t i = 0; i < g->n_node; i++)
        if (!add_node_reads(read, g->node[i], depth)) return false;
    return true;
}

static bool index_nodes(Onnx__NodeProto *const *nodes, size_t n, calq_strmap *read, calq_strmap *defined)
{
    if (!calq__strmap_init(read, 2 * n) || !calq__strmap_init(defined, n)) return false;
    for (size_t i = 0; i < n; i++) {
        if (!add_node_reads(read, nodes[i], 0)) return false;
        for (size_t k = 0; k < nodes[i]->n_output; k++)
            if (nodes[i]->output[k] && !calq__strmap_put(defined, nodes[i]->output[k], 1)) return false;
    }
    return true;
}

calq_status calq__export_finish(calq__xctx *c, const char *path, calq_error *err)
{
    const Onnx__ModelProto *mp = c->mp;
    const Onnx__GraphProto *gp = mp->graph;
    calq__xgraph *x = &c->x;
    /* initializers: the original ones still read (the folded BatchNorm parameters and the
     * float weights replaced by int8 ones are dropped), then the new ones */
    size_t n_new = x->n_inits;
    Onnx__TensorProto **inits = calq__xa_alloc(&x->a, sizeof(void *) * (gp->n_initializer + n_new + 1));
    Onnx__ValueInfoProto **inputs = calq__xa_alloc(&x->a, sizeof(void *) * (gp->n_input + 1));
    Onnx__ValueInfoProto **vinfo = calq__xa_alloc(&x->a, sizeof(void *) * (gp->n_value_info + 1));
    Onnx__OperatorSetIdProto **ops = calq__xa_alloc(&x->a, sizeof(void *) * (mp->n_opset_import + 2));
    Onnx__OperatorSetIdProto *def = calq__xa_alloc(&x->a, sizeof *def);
    Onnx__GraphProto *g = calq__xa_alloc(&x->a, sizeof *g);
    if (!inits || !inputs || !vinfo || !ops || !def || !g) return oom(err);
    size_t ni = 0, nin = 0, nvi = 0;
    calq_strmap read = {0}, defined = {0}, init_names = {0};
    bool ok = index_nodes(x->nodes, x->n_nodes, &read, &defined);
    /* Constant nodes nothing reads any more go like unread initializers: the import folded the
     * Cast / Transpose of a weight held in one (calq__pass_const_weights) and the writers read the
     * folded constant instead, which left the Constant node dead in the file */
    size_t kept = 0;
    for (size_t i = 0; ok && i < x->n_nodes; i++) {
        const Onnx__NodeProto *nd = x->nodes[i];
        bool dead = nd->op_type && !strcmp(nd->op_type, "Constant") && (!nd->domain || !nd->domain[0]) &&
                    !nd->n_input && nd->n_output == 1 && nd->output[0] && calq__strmap_get(&read, nd->output[0]) < 0;
        for (size_t k = 0; dead && k < gp->n_output; k++)
            dead = !gp->output[k]->name || strcmp(gp->output[k]->name, nd->output[0]) != 0;
        if (!dead) x->nodes[kept++] = x->nodes[i];
    }
    if (ok && kept != x->n_nodes) { /* index again: value_info of the dropped outputs goes too */
        x->n_nodes = kept;
        calq__strmap_free(&read);
        calq__strmap_free(&defined);
        ok = index_nodes(x->nodes, x->n_nodes, &read, &defined);
    }
    ok = ok && calq__strmap_init(&init_names, gp->n_initializer);
    for (size_t i = 0; ok && i < gp->n_initializer; i++) {
        const char *nm = gp->initializer[i]->name ? gp->initializer[i]->name : "";
        ok = calq__strmap_put(&init_names, nm, 1);
        if (calq__strmap_get(&read, nm) >= 0) inits[ni++] = gp->initializer[i];
    }
    /* the new ones too: a QOperator int8 file asked a value's factors for a QuantizeLinear a
     * QLinear op then made redundant (ViT: 8 scale / zero point pairs left unread) */
    for (size_t i = 0; ok && i < n_new; i++)
        if (x->inits[i]->name && calq__strmap_get(&read, x->inits[i]->name) >= 0) inits[ni++] = x->inits[i];
    for (size_t i = 0; ok && i < gp->n_input; i++) {
        const char *nm = gp->input[i]->name ? gp->input[i]->name : "";
        /* an initializer listed as a graph input (IR < 4) goes with its initializer */
        bool dropped_init = calq__strmap_get(&init_names, nm) >= 0 && calq__strmap_get(&read, nm) < 0;
        if (!dropped_init) inputs[nin++] = gp->input[i];
    }
    /* shape hints only for tensors that still exist */
    for (size_t i = 0; ok && i < gp->n_value_info; i++)
        if (gp->value_info[i]->name && calq__strmap_get(&defined, gp->value_info[i]->name) >= 0)
            vinfo[nvi++] = gp->value_info[i];
    calq__strmap_free(&read);
    calq__strmap_free(&defined);
    calq__strmap_free(&init_names);
    if (!ok) return oom(err);
    *g = *gp;
    g->node = x->nodes;
    g->n_node = x->n_nodes;
    g->initializer = inits;
    g->n_initializer = ni;
    g->input = inputs;
    g->n_input = nin;
    g->value_info = vinfo;
    g->n_value_info = nvi;
    Onnx__ModelProto m = *mp;
    bool have_default = false;
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = mp->opset_import[i];
        if (!o->domain || !o->domain[0] || !strcmp(o->domain, "ai.onnx")) {
            *def = *o;
            if (c->upgrade && def->version < 13) def->version = 13;
            ops[i] = def;
            have_default = true;
        } else {
            ops[i] = (Onnx__OperatorSetIdProto *)o;
        }
    }
    m.opset_import = ops;
    m.n_opset_import = mp->n_opset_import;
    bool have_msft = false;
    for (size_t i = 0; i < mp->n_opset_import; i++)
        have_msft |= mp->opset_import[i]->domain && !strcmp(mp->opset_import[i]->domain, "com.microsoft");
    if (c->uses_msft && !have_msft) { /* onnxruntime's contrib operators (QLinearAdd, QGemm, ...) */
        Onnx__OperatorSetIdProto *ms = calq__xa_alloc(&x->a, sizeof *ms);
        if (!ms) return oom(err);
        onnx__operator_set_id_proto__init(ms);
        ms->domain = "com.microsoft";
        ms->has_version = 1;
        ms->version = 1;
        ops[m.n_opset_import++] = ms;
    }
    if (!have_default) {
        onnx__operator_set_id_proto__init(def);
        def->domain = "";
        def->has_version = 1;
        def->version = 13;
        ops[m.n_opset_import++] = def;
    }
    /* opset 13 needs IR version 7 (ONNX 1.8) */
    if (!m.has_ir_version || m.ir_version < 7) {
        m.has_ir_version = 1;
        m.ir_version = 7;
    }
    return calq__xg_write(&m, g, path, c->out, err);
}
