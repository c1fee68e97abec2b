/* ONNX ModelProto -> calq IR. Weights held in initializers or in Constant nodes both become
 * constant values; initializers listed among the graph inputs (IR 3 models) are constants,
 * not user inputs. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/tensor.h"
#include "frontend/model.h"
#include "frontend/onnx_attr_check.h"
#include "frontend/onnx_tensor.h"
#include "graph/passes.h"

/* Operator semantics follow opsets 7 to 21 (every operator reads its node's opset where the
 * signature changed, docs/operators.md); older opsets load with those semantics (their
 * attributes are a subset), newer ones may change operators in ways calq would misread. */
#define CALQ_MAX_OPSET 21

static calq_status value_info_shape(calq_graph *g, int v, const Onnx__ValueInfoProto *vi)
{
    calq_value *val = &g->values[v];
    const Onnx__TypeProto *tp = vi->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type) return CALQ_OK;
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    if (tt->has_elem_type) val->dtype = calq__onnx_dtype(tt->elem_type);
    if (tt->shape && tt->shape->n_dim <= CALQ_MAX_DIMS) {
        val->ndim = (int)tt->shape->n_dim;
        for (size_t d = 0; d < tt->shape->n_dim; d++) {
            const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
            val->dims[d] =
                dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && dim->dim_value >= 0
                    ? dim->dim_value
                    : -1;
        }
    }
    return CALQ_OK;
}

/* What building one (sub)graph needs from its model. */
typedef struct import_ctx {
    const Onnx__ModelProto *mp;
    const char *base_dir;
    int opset;
    calq_error *err;
} import_ctx;

/* Subgraphs nest (If inside Loop inside If ...); deeper nesting is refused, so the recursion
 * stays bounded whatever the file says. */
#define MAX_SUBGRAPH_DEPTH 16

static calq_status import_graph(const import_ctx *ic, const Onnx__GraphProto *gp, int depth, calq_graph *g);

static calq_status copy_attr(const import_ctx *ic, calq_graph *g, int ni, const Onnx__AttributeProto *a, int depth)
{
    const char *base_dir = ic->base_dir;
    calq_error *err = ic->err;
    const char *nodename = g->nodes[ni].name;
    calq_attr_type type;
    switch (a->type) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT: type = CALQ_ATTR_FLOAT; break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT: type = CALQ_ATTR_INT; break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING: type = CALQ_ATTR_STRING; break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR: type = CALQ_ATTR_TENSOR; break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS: type = CALQ_ATTR_FLOATS; break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS: type = CALQ_ATTR_INTS; break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS: type = CALQ_ATTR_STRINGS; break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH: type = CALQ_ATTR_GRAPH; break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED:
        /* IR < 3 writers leave `type` unset; infer it from the field that is present. */
        type = a->has_f       ? CALQ_ATTR_FLOAT
               : a->has_i     ? CALQ_ATTR_INT
               : a->has_s     ? CALQ_ATTR_STRING
               : a->t         ? CALQ_ATTR_TENSOR
               : a->n_floats  ? CALQ_ATTR_FLOATS
               : a->n_ints    ? CALQ_ATTR_INTS
               : a->n_strings ? CALQ_ATTR_STRINGS
               : a->g         ? CALQ_ATTR_GRAPH
                              : CALQ_ATTR_OTHER;
        break;
    default: type = CALQ_ATTR_OTHER; break;
    }
    calq_attr *ca = calq__node_add_attr(g, ni, a->name ? a->name : "", type);
    if (!ca) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, nodename, "out of memory");
    switch (type) {
    case CALQ_ATTR_FLOAT: ca->f = a->f; break;
    case CALQ_ATTR_INT: ca->i = a->i; break;
    case CALQ_ATTR_STRING:
        ca->s = malloc(a->s.len + 1);
        if (!ca->s) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, nodename, "out of memory");
        if (a->s.len) memcpy(ca->s, a->s.data, a->s.len);
        ca->s[a->s.len] = 0;
        break;
    case CALQ_ATTR_FLOATS:
        ca->n = (int)a->n_floats;
        ca->floats = malloc(sizeof(float) * (a->n_floats + 1));
        if (!ca->floats) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, nodename, "out of memory");
        if (a->n_floats) memcpy(ca->floats, a->floats, sizeof(float) * a->n_floats);
        break;
    case CALQ_ATTR_INTS:
        ca->n = (int)a->n_ints;
        ca->ints = malloc(sizeof(int64_t) * (a->n_ints + 1));
        if (!ca->ints) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, nodename, "out of memory");
        if (a->n_ints) memcpy(ca->ints, a->ints, sizeof(int64_t) * a->n_ints);
        break;
    case CALQ_ATTR_STRINGS:
        ca->strings = calloc(a->n_strings + 1, sizeof(char *));
        if (!ca->strings) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, nodename, "out of memory");
        ca->n = (int)a->n_strings;
        for (size_t i = 0; i < a->n_strings; i++) {
            ca->strings[i] = malloc(a->strings[i].len + 1);
            if (!ca->strings[i]) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, nodename, "out of memory");
            if (a->strings[i].len) memcpy(ca->strings[i], a->strings[i].data, a->strings[i].len);
            ca->strings[i][a->strings[i].len] = 0;
        }
        break;
    case CALQ_ATTR_TENSOR:
        if (!a->t)
            return calq__fail(err, CALQ_ERR_BAD_FORMAT, nodename,
                              "node '%s': attribute '%s' is a TENSOR without a tensor", nodename, ca->name);
        ca->t = calloc(1, sizeof(calq_tensor));
        if (!ca->t) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, nodename, "out of memory");
        if (calq__onnx_tensor_load(a->t, base_dir, ca->t, err) != CALQ_OK)
            return calq__prefix(err, "node '%s', attribute '%s'", nodename, ca->name);
        break;
    case CALQ_ATTR_GRAPH: {
        if (!a->g)
            return calq__fail(err, CALQ_ERR_BAD_FORMAT, nodename,
                              "node '%s': attribute '%s' is a GRAPH without a graph", nodename, ca->name);
        if (depth + 1 > MAX_SUBGRAPH_DEPTH)
            return calq__fail(err, CALQ_ERR_UNSUPPORTED, nodename,
                              "node '%s': subgraphs nest deeper than %d levels; calq stops there", nodename,
                              MAX_SUBGRAPH_DEPTH);
        if (!(ca->g = calq__graph_new())) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, nodename, "out of memory");
        ca->g->opset = ic->opset;
        if (import_graph(ic, a->g, depth + 1, ca->g) != CALQ_OK)
            return calq__prefix(err, "node '%s' (%s), subgraph '%s'", nodename, g->nodes[ni].op_type, ca->name);
        break;
    }
    case CALQ_ATTR_OTHER: break;
    }
    return CALQ_OK;
}

/* The values a subgraph reads that it neither computes nor gets as formal inputs nor holds as
 * constants: names of the enclosing scopes. They become inputs of the subgraph after its formal
 * ones, in first-use order (the node holding the subgraph feeds them; see capture_outer). */
static calq_status mark_free_values(calq_graph *g, calq_error *err)
{
    int *add = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    char *seen = calloc((size_t)g->n_values + 1, 1);
    if (!add || !seen) {
        free(add);
        free(seen);
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    }
    int n = 0;
    for (int i = 0; i <= g->n_nodes; i++) {
        int cnt = i < g->n_nodes ? g->nodes[i].n_inputs : g->n_outputs;
        const int *vs = i < g->n_nodes ? g->nodes[i].inputs : g->outputs;
        for (int k = 0; k < cnt; k++) {
            int v = vs[k];
            if (v < 0 || seen[v]) continue;
            const calq_value *val = &g->values[v];
            if (val->producer < 0 && !val->is_input && !val->constant) {
                seen[v] = 1;
                add[n++] = v;
            }
        }
    }
    free(seen);
    int *ins = realloc(g->inputs, sizeof(int) * ((size_t)(g->n_inputs + n) + 1));
    if (!ins) {
        free(add);
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    }
    g->inputs = ins;
    for (int k = 0; k < n; k++) {
        g->values[add[k]].is_input = true;
        g->inputs[g->n_inputs++] = add[k];
    }
    free(add);
    return CALQ_OK;
}

/* Node ni holds subgraphs whose inputs end with the outer values they read (mark_free_values).
 * Every subgraph of the node gets the same list (the union, so the kernel feeds any branch the
 * same tensors) and the node reads those values after its own inputs. */
static calq_status capture_outer(calq_graph *g, int ni, calq_error *err)
{
    calq_node *n = &g->nodes[ni];
    int n_names = 0, cap = 0;
    const char **names = NULL;
    for (int a = 0; a < n->n_attrs; a++) {
        const calq_graph *sg = n->attrs[a].g;
        for (int k = sg ? sg->n_formal_inputs : 0; sg && k < sg->n_inputs; k++) {
            const char *nm = sg->values[sg->inputs[k]].name;
            bool dup = false;
            for (int j = 0; j < n_names && !dup; j++) dup = strcmp(names[j], nm) == 0;
            if (dup) continue;
            if (n_names == cap) {
                const char **nn = realloc(names, sizeof(char *) * (size_t)(cap = cap ? 2 * cap : 8));
                if (!nn) {
                    free(names);
                    return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
                }
                names = nn;
            }
            names[n_names++] = nm;
        }
    }
    calq_status st = CALQ_OK;
    /* Each subgraph: formal inputs, then the union in one order. */
    for (int a = 0; a < n->n_attrs && st == CALQ_OK && n_names; a++) {
        calq_graph *sg = n->attrs[a].g;
        if (!sg) continue;
        int *ins = malloc(sizeof(int) * ((size_t)(sg->n_formal_inputs + n_names) + 1));
        if (!ins) {
            st = calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
            break;
        }
        memcpy(ins, sg->inputs, sizeof(int) * (size_t)sg->n_formal_inputs);
        for (int j = 0; j < n_names && st == CALQ_OK; j++) {
            int v = calq__graph_value(sg, names[j]);
            if (v < 0) {
                st = calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
                break;
            }
            sg->values[v].is_input = true;
            ins[sg->n_formal_inputs + j] = v;
        }
        free(sg->inputs);
        sg->inputs = ins;
        sg->n_inputs = sg->n_formal_inputs + n_names;
    }
    /* The node: its own inputs, then the captured values (names copied: they live in the
     * subgraphs, whose value tables the parent must not point into). */
    if (st == CALQ_OK && n_names) {
        int *in = realloc(n->inputs, sizeof(int) * ((size_t)(n->n_inputs + n_names) + 1));
        if (!in) {
            st = calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
        } else {
            n->inputs = in;
            for (int j = 0; j < n_names && st == CALQ_OK; j++) {
                int v = calq__graph_value(g, names[j]);
                if (v < 0)
                    st = calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
                else
                    g->nodes[ni].inputs[g->nodes[ni].n_inputs++] = v;
            }
        }
    }
    free(names);
    return st;
}

/* A Constant node's value as a tensor (the forms of opsets 1-17). Returns NULL with *err set
 * when the node has a form calq cannot turn into a constant. */
static calq_status constant_value(const calq_node *n, calq_tensor *out, calq_error *err)
{
    const calq_attr *a = calq__attr(n, "value");
    memset(out, 0, sizeof *out);
    if (a && a->type == CALQ_ATTR_TENSOR) return calq__tensor_clone(out, a->t, err);
    if ((a = calq__attr(n, "value_float")) && a->type == CALQ_ATTR_FLOAT) {
        out->dtype = CALQ_DTYPE_FLOAT32;
        CALQ_TRY(calq__tensor_alloc(out, err));
        *(float *)out->data = a->f;
        return CALQ_OK;
    }
    if ((a = calq__attr(n, "value_int")) && a->type == CALQ_ATTR_INT) {
        out->dtype = CALQ_DTYPE_INT64;
        CALQ_TRY(calq__tensor_alloc(out, err));
        *(int64_t *)out->data = a->i;
        return CALQ_OK;
    }
    if ((a = calq__attr(n, "value_floats")) && a->type == CALQ_ATTR_FLOATS) {
        out->dtype = CALQ_DTYPE_FLOAT32;
        out->ndim = 1;
        out->dims[0] = a->n;
        CALQ_TRY(calq__tensor_alloc(out, err));
        if (a->n) memcpy(out->data, a->floats, sizeof(float) * (size_t)a->n);
        return CALQ_OK;
    }
    if ((a = calq__attr(n, "value_ints")) && a->type == CALQ_ATTR_INTS) {
        out->dtype = CALQ_DTYPE_INT64;
        out->ndim = 1;
        out->dims[0] = a->n;
        CALQ_TRY(calq__tensor_alloc(out, err));
        if (a->n) memcpy(out->data, a->ints, sizeof(int64_t) * (size_t)a->n);
        return CALQ_OK;
    }
    return calq__fail(err, CALQ_ERR_UNSUPPORTED, n->name,
                      "Constant node '%s' has no value calq can read (sparse and string constants are not supported)",
                      n->name);
}

static bool is_constant_node(const calq_node *n)
{
    return strcmp(n->op_type, "Constant") == 0 && !n->domain[0] && n->n_outputs == 1 && n->outputs[0] >= 0;
}

/* The version opset_import gives domain, or -1 when it has none. */
static int64_t find_opset_version(const Onnx__ModelProto *mp, const char *domain)
{
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = mp->opset_import[i];
        const char *d = o->domain ? o->domain : "";
        if (strcmp(d, domain) == 0 || (!domain[0] && strcmp(d, "ai.onnx") == 0)) return o->version < 0 ? 0 : o->version;
    }
    return -1;
}

/* The same clamped to an int, not truncated: 2^32 + 13 must not read as opset 13 (nor 2^62 as 0). */
static int find_opset(const Onnx__ModelProto *mp, const char *domain)
{
    int64_t v = find_opset_version(mp, domain);
    return v > INT_MAX ? INT_MAX : (int)v;
}

/* Builds g from gp. depth 0 is the model's graph; deeper ones are subgraphs, whose formal inputs
 * are their declared inputs and whose reads of enclosing scopes become further inputs. */
static calq_status import_graph(const import_ctx *ic, const Onnx__GraphProto *gp, int depth, calq_graph *g)
{
    calq_error *err = ic->err;

    for (size_t i = 0; i < gp->n_initializer; i++) {
        const Onnx__TensorProto *tp = gp->initializer[i];
        if (!tp->name || !tp->name[0]) return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL, "an initializer has no name");
        int v = calq__graph_value(g, tp->name);
        if (v < 0) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
        if (g->values[v].constant)
            return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL, "initializer '%s' is defined twice", tp->name);
        calq_tensor *t = calloc(1, sizeof *t);
        if (!t) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
        if (calq__onnx_tensor_load(tp, ic->base_dir, t, err) != CALQ_OK) {
            free(t);
            return err ? err->status : CALQ_ERR_BAD_FORMAT;
        }
        g->values[v].constant = t;
        g->values[v].dtype = t->dtype;
        g->values[v].ndim = t->ndim;
        memcpy(g->values[v].dims, t->dims, sizeof t->dims);
    }

    int *ins = malloc(sizeof(int) * (gp->n_input + 1));
    if (!ins) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    int n_ins = 0;
    for (size_t i = 0; i < gp->n_input; i++) {
        const Onnx__ValueInfoProto *vi = gp->input[i];
        if (!vi->name || !vi->name[0]) {
            free(ins);
            return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL, "graph input %zu has no name", i);
        }
        int v = calq__graph_value(g, vi->name);
        if (v < 0) {
            free(ins);
            return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
        }
        if (g->values[v].constant) continue; /* an initializer listed as input (IR 3) */
        if (g->values[v].is_input) {
            free(ins);
            return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL, "graph input '%s' is listed twice", vi->name);
        }
        value_info_shape(g, v, vi);
        /* a shape of more dims than calq holds was dropped, and the input then took any shape */
        const Onnx__TypeProto *tp = vi->type;
        if (depth == 0 && tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && tp->tensor_type &&
            tp->tensor_type->shape && tp->tensor_type->shape->n_dim > CALQ_MAX_DIMS) {
            free(ins);
            return calq__fail(
                err, CALQ_ERR_UNSUPPORTED, NULL,
                "graph input '%s' has %zu dims; calq supports tensors of up to %d dims (export it with fewer)",
                vi->name, tp->tensor_type->shape->n_dim, CALQ_MAX_DIMS);
        }
        if (g->values[v].dtype == CALQ_DTYPE_UNDEFINED && depth == 0) {
            free(ins);
            return calq__fail(err, CALQ_ERR_UNSUPPORTED, NULL,
                              "graph input '%s' is not a tensor of a type calq supports", vi->name);
        }
        g->values[v].is_input = true;
        ins[n_ins++] = v;
    }
    g->inputs = ins;
    g->n_inputs = n_ins;

    for (size_t i = 0; i < gp->n_value_info; i++)
        if (gp->value_info[i]->name) {
            int v = calq__graph_value(g, gp->value_info[i]->name);
            if (v >= 0 && !g->values[v].constant && !g->values[v].is_input) value_info_shape(g, v, gp->value_info[i]);
        }

    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *np = gp->node[i];
        if (!np->op_type || !np->op_type[0])
            return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL, "node %zu has no op_type", i);
        char fallback[96];
        snprintf(fallback, sizeof fallback, "%s_%zu", np->op_type, i);
        const char *name = np->name && np->name[0] ? np->name : fallback;
        int *io = malloc(sizeof(int) * (np->n_input + np->n_output + 1));
        if (!io) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, name, "out of memory");
        for (size_t k = 0; k < np->n_input; k++)
            io[k] = np->input[k] && np->input[k][0] ? calq__graph_value(g, np->input[k]) : -1;
        for (size_t k = 0; k < np->n_output; k++)
            io[np->n_input + k] = np->output[k] && np->output[k][0] ? calq__graph_value(g, np->output[k]) : -1;
        const char *domain = np->domain ? np->domain : "";
        int ni = calq__graph_add_node(g, name, np->op_type, strcmp(domain, "ai.onnx") == 0 ? "" : domain, io,
                                      (int)np->n_input, io + np->n_input, (int)np->n_output);
        free(io);
        if (ni < 0) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, name, "out of memory");
        g->nodes[ni].src_index = (int)i;
        g->nodes[ni].opset = domain[0] && strcmp(domain, "ai.onnx") != 0 ? find_opset(ic->mp, domain) : ic->opset;
        bool has_graph = false;
        for (size_t k = 0; k < np->n_attribute; k++) {
            CALQ_TRY(copy_attr(ic, g, ni, np->attribute[k], depth));
            CALQ_TRY(calq__onnx_check_attr_type(&g->nodes[ni], &g->nodes[ni].attrs[g->nodes[ni].n_attrs - 1], err));
            has_graph |= g->nodes[ni].attrs[g->nodes[ni].n_attrs - 1].g != NULL;
        }
        CALQ_TRY(calq__onnx_check_required_attrs(&g->nodes[ni], err));
        if (has_graph) CALQ_TRY(capture_outer(g, ni, err));
    }

    int *outs = malloc(sizeof(int) * (gp->n_output + 1));
    if (!outs) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    g->outputs = outs;
    for (size_t i = 0; i < gp->n_output; i++) {
        if (!gp->output[i]->name || !gp->output[i]->name[0])
            return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL, "graph output %zu has no name", i);
        int v = calq__graph_value(g, gp->output[i]->name);
        if (v < 0) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
        /* a subgraph's declared output types: what an If's branch not taken would give */
        const Onnx__TypeProto *tp = gp->output[i]->type;
        if (depth > 0 && g->values[v].dtype == CALQ_DTYPE_UNDEFINED && tp &&
            tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && tp->tensor_type && tp->tensor_type->has_elem_type)
            g->values[v].dtype = calq__onnx_dtype(tp->tensor_type->elem_type);
        g->values[v].is_output = true;
        outs[g->n_outputs++] = v;
    }

    /* Constant nodes become constant values: weights in Constant nodes are then weights like
     * initializers (some exporters store every weight that way). Two passes, so that a failure
     * in the first leaves every node intact for calq__graph_free. */
    for (int i = 0; i < g->n_nodes; i++) {
        calq_node *n = &g->nodes[i];
        if (!is_constant_node(n)) continue;
        calq_value *val = &g->values[n->outputs[0]];
        if (val->constant || val->is_input)
            return calq__fail(err, CALQ_ERR_BAD_FORMAT, n->name, "tensor '%s' is produced twice", val->name);
        calq_tensor *t = calloc(1, sizeof *t);
        if (!t) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
        calq_status s = constant_value(n, t, err);
        if (s != CALQ_OK) {
            free(t);
            return s;
        }
        val->constant = t;
        val->dtype = t->dtype;
        val->ndim = t->ndim;
        memcpy(val->dims, t->dims, sizeof t->dims);
    }
    int kept = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        if (is_constant_node(&g->nodes[i]))
            calq__node_release(&g->nodes[i]);
        else
            g->nodes[kept++] = g->nodes[i];
    }
    g->n_nodes = kept;

    if (depth == 0) return CALQ_OK;
    g->n_formal_inputs = g->n_inputs;
    CALQ_TRY(calq__graph_toposort(g, err));
    return mark_free_values(g, err);
}

calq_status calq__onnx_import(struct calq_model *m, calq_error *err)
{
    const Onnx__ModelProto *mp = m->onnx;
    if (!mp->graph) return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL, "the model has no graph");
    const Onnx__GraphProto *gp = mp->graph;
    int64_t version = find_opset_version(mp, "");
    if (version == 0)
        return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL,
                          "the model imports the ONNX operator set at version 0 or below; ONNX opset versions start at "
                          "1 (the file is damaged or was not written by an ONNX exporter)");
    if (version > CALQ_MAX_OPSET)
        return calq__fail(err, CALQ_ERR_UNSUPPORTED, NULL,
                          "the model uses ONNX opset %lld; calq supports opsets up to %d. Re-export with opset %d or "
                          "lower (e.g. torch.onnx.export(..., opset_version=%d)).",
                          (long long)version, CALQ_MAX_OPSET, CALQ_MAX_OPSET, CALQ_MAX_OPSET);
    int opset = (int)version;
    if (opset < 0) opset = mp->n_opset_import ? 1 : 7; /* IR 2 files may omit opset_import */
    calq_graph *g = calq__graph_new();
    if (!g) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    m->g = g;
    g->opset = opset;
    import_ctx ic = {mp, m->base_dir, opset, err};
    CALQ_TRY(import_graph(&ic, gp, 0, g));
    CALQ_TRY(calq__graph_toposort(g, err));

    /* Every node input must be produced, fed, or constant. */
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_inputs; k++) {
            int v = g->nodes[i].inputs[k];
            if (v < 0) continue;
            const calq_value *val = &g->values[v];
            if (val->producer < 0 && !val->is_input && !val->constant)
                return calq__fail(err, CALQ_ERR_BAD_FORMAT, g->nodes[i].name,
                                  "node '%s' (%s) reads tensor '%s', which no node, input or initializer provides",
                                  g->nodes[i].name, g->nodes[i].op_type, val->name);
        }
    for (int i = 0; i < g->n_outputs; i++) {
        const calq_value *val = &g->values[g->outputs[i]];
        if (val->producer < 0 && !val->is_input && !val->constant)
            return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL, "graph output '%s' is not produced by any node",
                              val->name);
    }
    /* weights behind Identity / Transpose (tied or unfolded torch exports) are weights all the same:
     * folded once here, so every reader of the model sees the same layers */
    int n_folded = 0;
    return calq__pass_const_weights(g, &n_folded, err);
}
