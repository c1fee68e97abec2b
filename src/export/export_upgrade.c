/* Raising an ONNX model's default opset to 13 for the quantized export (issue 6), and the
 * final assembly of the output graph.
 *
 * Why 13: DequantizeLinear with a per-channel scale (the `axis` attribute) exists from opset
 * 13; the record's Conv weights are per channel (§8.2). Opset 10 would allow per-tensor
 * weights only, which would not reproduce the record's scale_w. So a model below 13 is raised,
 * and every node is checked: operators whose meaning did not change between the model's opset
 * and 13 are kept; those whose attributes became inputs are converted (Unsqueeze, Squeeze:
 * axes at 13; Split: split at 13; ReduceSum: axes at 13; Slice: starts/ends/axes at 10; Clip:
 * min/max at 11; Dropout: ratio at 12, an identity at inference); Pad and Resize from opset 11
 * are the same at 13 (but Resize's removed tf_half_pixel_for_nn mode); Softmax, LogSoftmax
 * and Hardmax are kept when they act on the last axis, where their 2-D (before 13) and per-axis
 * (13) definitions agree; any other operator stops the save with its name. */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "export/export_onnx.h"

static calq_status oom(calq_error *err)
{
    return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "save: out of memory");
}

/* Operators whose signature and meaning are the same at every opset from 7 up to 13 for the
 * attributes a model below 13 can carry; and the quantizable kinds (graph/qkind.h), whose
 * nodes the writers copy as they are, so each kind's op is one of them by the table's rule. */
static const char *const unchanged[] = {
    "Abs",
    "Add",
    "And",
    "ArgMax",
    "ArgMin",
    "BatchNormalization",
    "Cast",
    "Ceil",
    "Concat",
    "Constant",
    "ConstantOfShape",
    "Div",
    "Elu",
    "Equal",
    "Erf",
    "Exp",
    "Expand",
    "Flatten",
    "Floor",
    "Gather",
    "GlobalAveragePool",
    "GlobalMaxPool",
    "Greater",
    "HardSigmoid",
    "Identity",
    "InstanceNormalization",
    "LeakyRelu",
    "Less",
    "Log",
    "LRN",
    "Max",
    "MaxPool",
    "Mean",
    "Min",
    "Mul",
    "Neg",
    "Not",
    "Or",
    "PRelu",
    "Pow",
    "Reciprocal",
    "ReduceL2",
    "ReduceMax",
    "ReduceMean",
    "ReduceMin",
    "ReduceProd",
    "Relu",
    "Reshape",
    "Selu",
    "Shape",
    "Sigmoid",
    "Sign",
    "Sin",
    "Cos",
    "Softplus",
    "Softsign",
    "Sqrt",
    "Sub",
    "Sum",
    "Tanh",
    "Tile",
    "Transpose",
    "Where",
    "Xor",
};

static bool is_unchanged(const char *op)
{
    if (calq__qkind_by_onnx(op)) return true;
    for (size_t i = 0; i < sizeof unchanged / sizeof unchanged[0]; i++)
        if (strcmp(op, unchanged[i]) == 0) return true;
    return false;
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
    int v = calq__graph_find(c->m->g, n->input[0]);
    if (v >= 0 && c->m->g->values[v].ndim >= 0) return c->m->g->values[v].ndim;
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

calq_status calq__export_upgrade_node(calq__xctx *c, const Onnx__NodeProto *src, Onnx__NodeProto **out, calq_error *err)
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
    } else if (!strcmp(op, "Resize") && c->opset_in >= 11) {
        const Onnx__AttributeProto *at = calq__xg_attr_find(src, "coordinate_transformation_mode");
        if (at && at->has_s && at->s.len == 20 && !memcmp(at->s.data, "tf_half_pixel_for_nn", 20))
            return calq__fail(err, CALQ_ERR_UNSUPPORTED, name,
                              "save: Resize \"%s\" uses coordinate_transformation_mode tf_half_pixel_for_nn, which "
                              "opset 13 (needed for per-channel weights) removed; re-export the model at opset 13",
                              name);
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
        if (r < 0 || (axis < 0 ? axis + r : axis) != r - 1)
            return calq__fail(err, CALQ_ERR_UNSUPPORTED, name,
                              "save: %s \"%s\" (opset %d) works on axis %lld of a rank-%d input; raising the model to "
                              "opset 13 (needed for per-channel weights) changes its meaning unless the axis is the "
                              "last one (rank -1: unknown). Re-export the model at opset 13 or later",
                              op, name, c->opset_in, (long long)axis, r);
        calq__xg_attr_remove(&c->x, nd, "axis");
        ok = calq__xg_attr_int(&c->x, nd, "axis", -1);
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

static bool name_in(const char *name, Onnx__NodeProto *const *nodes, size_t n, bool outputs)
{
    for (size_t i = 0; i < n; i++) {
        size_t m = outputs ? nodes[i]->n_output : nodes[i]->n_input;
        char **v = outputs ? nodes[i]->output : nodes[i]->input;
        for (size_t k = 0; k < m; k++)
            if (strcmp(v[k], name) == 0) return true;
    }
    return false;
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
    Onnx__OperatorSetIdProto **ops = calq__xa_alloc(&x->a, sizeof(void *) * (mp->n_opset_import + 1));
    Onnx__OperatorSetIdProto *def = calq__xa_alloc(&x->a, sizeof *def);
    Onnx__GraphProto *g = calq__xa_alloc(&x->a, sizeof *g);
    if (!inits || !inputs || !vinfo || !ops || !def || !g) return oom(err);
    size_t ni = 0, nin = 0, nvi = 0;
    for (size_t i = 0; i < gp->n_initializer; i++)
        if (name_in(gp->initializer[i]->name, x->nodes, x->n_nodes, false)) inits[ni++] = gp->initializer[i];
    for (size_t i = 0; i < n_new; i++) inits[ni++] = x->inits[i];
    for (size_t i = 0; i < gp->n_input; i++) {
        bool dropped_init = false;
        for (size_t k = 0; k < gp->n_initializer && !dropped_init; k++)
            dropped_init = strcmp(gp->initializer[k]->name, gp->input[i]->name) == 0 &&
                           !name_in(gp->input[i]->name, x->nodes, x->n_nodes, false);
        if (!dropped_init) inputs[nin++] = gp->input[i];
    }
    /* shape hints only for tensors that still exist */
    for (size_t i = 0; i < gp->n_value_info; i++)
        if (name_in(gp->value_info[i]->name, x->nodes, x->n_nodes, true)) vinfo[nvi++] = gp->value_info[i];
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
            if (def->version < 13) def->version = 13;
            ops[i] = def;
            have_default = true;
        } else {
            ops[i] = (Onnx__OperatorSetIdProto *)o;
        }
    }
    m.opset_import = ops;
    m.n_opset_import = mp->n_opset_import;
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
