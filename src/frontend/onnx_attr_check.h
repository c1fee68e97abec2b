/* Attribute types of default-domain ONNX nodes checked against the operator schemas. */
#ifndef CALQ_FRONTEND_ONNX_ATTR_CHECK_H
#define CALQ_FRONTEND_ONNX_ATTR_CHECK_H

#include "graph/graph.h"

/* CALQ_ERR_BAD_FORMAT, naming node, attribute and both types, when ONNX's schema for n's
 * operator gives attribute `a` other types than it has; CALQ_OK otherwise (also for operators
 * and attributes the schemas do not know). */
calq_status calq__onnx_check_attr_type(const calq_node *n, const calq_attr *a, calq_error *err);
/* CALQ_ERR_BAD_FORMAT, naming node and attribute, when n (default domain) lacks an attribute
 * that every version of its operator's schema requires (If's branches, Loop's body, Cast's to,
 * MaxPool's kernel_shape, ...); CALQ_OK otherwise. */
calq_status calq__onnx_check_required_attrs(const calq_node *n, calq_error *err);

#endif
