/* Attribute types against the ONNX operator schemas (onnx_attr_schema.inc). calq's kernels read
 * an attribute of the wrong type as absent (calq__attr_ints returns -1 for a FLOATS `strides`),
 * so without this check a Conv with `strides=[2.0, 2.0]` silently ran with stride 1; onnxruntime
 * refuses such a model at load, and so does calq now (issue 14). Operators and attributes the
 * schemas do not know are left alone: other domains have no schema here, and an unknown name
 * is not read by any kernel. */
#include <stdlib.h>
#include <string.h>

#include "base/cut.h"
#include "base/error.h"
#include "frontend/onnx_attr_check.h"

#define M(t) (1u << CALQ_ATTR_##t)

typedef struct attr_schema {
    const char *op, *attr;
    unsigned types; /* bit CALQ_ATTR_x set: the attribute may have that type */
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
    const attr_schema key = {n->op_type, a->name, 0};
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
