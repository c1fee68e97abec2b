/* Attribute types against the ONNX operator schemas (onnx_attr_schema.inc). calq's kernels read
 * an attribute of the wrong type as absent (calq__attr_ints returns -1 for a FLOATS `strides`),
 * so without this check a Conv with `strides=[2.0, 2.0]` silently ran with stride 1; onnxruntime
 * refuses such a model at load, and so does calq now (issue 14). Operators and attributes the
 * schemas do not know are left alone: other domains have no schema here, and an unknown name
 * is not read by any kernel. An attribute every version of an operator requires must be there:
 * an If without else_branch ran as long as its condition was true (issue 14). */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/cut.h"
#include "base/error.h"
#include "frontend/onnx_attr_check.h"

#define M(t) (1u << CALQ_ATTR_##t)

typedef struct attr_schema {
    const char *op, *attr;
    unsigned types; /* bit CALQ_ATTR_x set: the attribute may have that type */
    int required;   /* 1: every version of the operator requires the attribute */
} attr_schema;

static const attr_schema schema[] = {
#include "frontend/onnx_attr_schema.inc"
};

static int cmp(const void *key, const void *row)
{
    const attr_schema *k = key, *r = row;
    int c = strcmp(k->op, r->op);
    return c ? c : strcmp(k->attr, r->attr);
}

static const char *type_name(calq_attr_type t)
{
    switch (t) {
    case CALQ_ATTR_INT: return "INT";
    case CALQ_ATTR_FLOAT: return "FLOAT";
    case CALQ_ATTR_STRING: return "STRING";
    case CALQ_ATTR_INTS: return "INTS";
    case CALQ_ATTR_FLOATS: return "FLOATS";
    case CALQ_ATTR_STRINGS: return "STRINGS";
    case CALQ_ATTR_TENSOR: return "TENSOR";
    case CALQ_ATTR_GRAPH: return "GRAPH";
    default: return "another type";
    }
}

calq_status calq__onnx_check_attr_type(const calq_node *n, const calq_attr *a, calq_error *err)
{
    if (n->domain && n->domain[0]) return CALQ_OK;
    const attr_schema key = {n->op_type, a->name, 0, 0};
    const attr_schema *r = bsearch(&key, schema, sizeof schema / sizeof schema[0], sizeof schema[0], cmp);
    if (!r || (r->types & (1u << a->type))) return CALQ_OK;
    char want[96] = "";
    for (int t = 0; t <= CALQ_ATTR_OTHER; t++)
        if (r->types & (1u << t)) {
            if (want[0]) strncat(want, " or ", sizeof want - strlen(want) - 1);
            strncat(want, type_name((calq_attr_type)t), sizeof want - strlen(want) - 1);
        }
    return calq__fail(err, CALQ_ERR_BAD_FORMAT, n->name,
                      "node '%s' (%s): attribute '%s' is %s, but ONNX defines it as %s; the model is invalid "
                      "(onnx.checker and onnxruntime refuse it too)",
                      calq__cut(n->name).s, n->op_type, calq__cut(a->name).s, type_name(a->type), want);
}

static int cmp_op(const void *key, const void *row)
{
    return strcmp(key, ((const attr_schema *)row)->op);
}

calq_status calq__onnx_check_required_attrs(const calq_node *n, calq_error *err)
{
    if (n->domain && n->domain[0]) return CALQ_OK;
    const size_t count = sizeof schema / sizeof schema[0];
    const attr_schema *hit = bsearch(n->op_type, schema, count, sizeof schema[0], cmp_op);
    if (!hit) return CALQ_OK;
    const attr_schema *r = hit;
    while (r > schema && strcmp(r[-1].op, n->op_type) == 0) r--;
    for (; r < schema + count && strcmp(r->op, n->op_type) == 0; r++) {
        if (!r->required) continue;
        bool found = false;
        for (int k = 0; k < n->n_attrs && !found; k++) found = strcmp(n->attrs[k].name, r->attr) == 0;
        if (!found)
            return calq__fail(err, CALQ_ERR_BAD_FORMAT, n->name,
                              "node '%s' (%s): the required attribute '%s' is missing; the model is invalid "
                              "(onnx.checker and onnxruntime refuse it too)",
                              calq__cut(n->name).s, n->op_type, r->attr);
    }
    return CALQ_OK;
}
