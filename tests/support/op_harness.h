/* Runs one operator directly (no model file): build a one-node graph, give it tensors, and
 * execute its reference or fast kernel. For kernel unit tests. */
#ifndef CALQ_TEST_OP_HARNESS_H
#define CALQ_TEST_OP_HARNESS_H

#include "exec/op.h"
#include "expect.h" /* the assertions (EXPECT, EXPECT_OK): one harness for every test */

typedef struct op_case {
    calq_graph *g;
    int node;
} op_case;

/* A one-node graph with n_in inputs and n_out outputs. */
op_case op_case_new(const char *op_type, int opset, int n_in, int n_out);
void op_case_free(op_case *c);
void op_attr_int(op_case *c, const char *name, int64_t v);
void op_attr_float(op_case *c, const char *name, float v);
void op_attr_str(op_case *c, const char *name, const char *v);
void op_attr_ints(op_case *c, const char *name, const int64_t *v, int n);
void op_attr_floats(op_case *c, const char *name, const float *v, int n);

/* Graph building for pass tests: a user-fed graph input `name` (dtype, shape) and a graph
 * output v, appended to g's input / output lists. Returns the input's value index. */
int op_graph_input(calq_graph *g, const char *name, calq_dtype dt, int ndim, const int64_t *dims);
void op_graph_output(calq_graph *g, int v);

/* Makes input k of the node the output of a new AscendQuant node (scale 1, the given offset,
 * reading a new float value), as in an Ascend deploy model, so that the lowering pass op_case_run
 * applies makes the node an integer layer with that input offset (amct-reference.md §9.1). The
 * test still feeds input k's int8 data itself. Returns the AscendQuant's node index. */
int op_case_from_ascend_quant(op_case *c, int k, float offset);

/* Runs the node as a session would, after the graph passes every session applies
 * (calq__pass_lower_ascend, which keeps node indices): infer, allocate outputs (out[i].data owned by the caller
 * afterwards: free with calq_tensor_free_data), then the reference kernel (fast = 0) or prepare + run_fast (fast = 1;
 * falls back to the reference kernel when prepare declines). in[i].data may be NULL for an omitted optional input. */
calq_status op_case_run(op_case *c, const calq_tensor *in, int n_in, calq_tensor *out, int n_out, int fast,
                        calq_error *err);

/* op_case_run that also reports whether the fast kernel ran (took_fast may be NULL). */
calq_status op_case_run_ex(op_case *c, const calq_tensor *in, int n_in, calq_tensor *out, int n_out, int fast,
                           bool *took_fast, calq_error *err);

/* Tensor helpers for tests. Data is malloc'ed; free with calq_tensor_free_data. */
calq_tensor t_f32(const float *vals, int ndim, const int64_t *dims);
calq_tensor t_i64(const int64_t *vals, int ndim, const int64_t *dims);
calq_tensor t_rand_f32(unsigned seed, int ndim, const int64_t *dims, float lo, float hi);
/* Max |a-b| relative to (atol + rtol*|b|); returns 1 if within tolerance, prints the worst. */
int t_close(const calq_tensor *a, const calq_tensor *b, double rtol, double atol, const char *what);

#endif
