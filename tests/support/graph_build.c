/* tests/support/graph_build.h */
#include "graph_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/tensor.h"
#include "op_harness.h"

gb gb_new(void)
{
    gb b = {calq__graph_new(), 1, 0};
    b.g->outputs = malloc(sizeof(int) * 16);
    b.g->inputs = malloc(sizeof(int) * 4);
    return b;
}

int gb_input(gb *b, const char *name, const int64_t *dims, int nd)
{
    int v = calq__graph_value(b->g, name);
    calq_value *val = &b->g->values[v];
    val->is_input = true;
    val->dtype = CALQ_DTYPE_FLOAT32;
    val->ndim = nd;
    memcpy(val->dims, dims, sizeof(int64_t) * (size_t)nd);
    b->g->inputs[b->g->n_inputs++] = v;
    return v;
}

int gb_const_t(gb *b, const char *name, calq_tensor t)
{
    int v = calq__graph_value(b->g, name);
    calq_tensor *c = malloc(sizeof *c);
    *c = t;
    calq_value *val = &b->g->values[v];
    val->constant = c;
    val->dtype = t.dtype;
    val->ndim = t.ndim;
    memcpy(val->dims, t.dims, sizeof t.dims);
    return v;
}

int gb_const(gb *b, const char *name, const int64_t *dims, int nd, float lo, float hi)
{
    return gb_const_t(b, name, t_rand_f32(b->seed++, nd, dims, lo, hi));
}

int gb_scalar(gb *b, const char *name, float v)
{
    return gb_const_t(b, name, t_f32(&v, 0, NULL));
}

int gb_node(gb *b, const char *name, const char *op, const int *ins, int n)
{
    char out[96];
    snprintf(out, sizeof out, "%s.out", name);
    int y = calq__graph_value(b->g, out);
    int ni = calq__graph_add_node(b->g, name, op, "", ins, n, &y, 1);
    b->g->nodes[ni].opset = 13;
    return y;
}

int gb_unary(gb *b, const char *name, const char *op, int x)
{
    return gb_node(b, name, op, &x, 1);
}

int gb_binary(gb *b, const char *name, const char *op, int x, int y)
{
    int ins[2] = {x, y};
    return gb_node(b, name, op, ins, 2);
}

int gb_last_node(const gb *b)
{
    return b->g->n_nodes - 1;
}

void gb_ints(gb *b, const char *name, const int64_t *v, int n)
{
    calq_attr *a = calq__node_add_attr(b->g, gb_last_node(b), name, CALQ_ATTR_INTS);
    a->n = n;
    a->ints = malloc(sizeof(int64_t) * (size_t)n);
    memcpy(a->ints, v, sizeof(int64_t) * (size_t)n);
}

void gb_int(gb *b, const char *name, int64_t v)
{
    calq__node_add_attr(b->g, gb_last_node(b), name, CALQ_ATTR_INT)->i = v;
}

void gb_float(gb *b, const char *name, float v)
{
    calq__node_add_attr(b->g, gb_last_node(b), name, CALQ_ATTR_FLOAT)->f = v;
}

void gb_str(gb *b, const char *name, const char *v)
{
    calq__node_add_attr(b->g, gb_last_node(b), name, CALQ_ATTR_STRING)->s = strdup(v);
}

void gb_output(gb *b, int v)
{
    b->g->outputs[b->g->n_outputs++] = v;
    b->g->values[v].is_output = true;
}

bool t_same_bits(const calq_tensor *a, const calq_tensor *b)
{
    return a->data && b->data && calq__tensor_nbytes(a) == calq__tensor_nbytes(b) &&
           memcmp(a->data, b->data, calq__tensor_nbytes(a)) == 0;
}

void t_free_all(calq_tensor *t, int n)
{
    for (int i = 0; i < n; i++) calq_tensor_free_data(&t[i]);
}
