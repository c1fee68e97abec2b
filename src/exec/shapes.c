/* Shapes of a whole graph for given input shapes, without running it: a plan is built (constant
 * sub-graphs folded, every static step inferred, exec/plan.h) and its shapes copied into the
 * graph's values. Save uses it on models whose shapes depend on their inputs (dynamic axes):
 * the ranks the ONNX writers need (Softmax's axis when the opset is raised, the layout of a
 * dequantization scale) are those of the shapes calibration ran with. */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "exec/plan.h"

calq_status calq__infer_value_shapes(calq_graph *g, int64_t dflt_dim, int *n_filled, calq_error *err)
{
    *n_filled = 0;
    int n_in = g->n_inputs;
    calq_tensor *ins = calloc((size_t)n_in + 1, sizeof *ins);
    if (!ins) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    calq_status st = CALQ_OK;
    for (int i = 0; i < n_in && st == CALQ_OK; i++) {
        const calq_value *v = &g->values[g->inputs[i]];
        if (v->ndim < 0)
            st = calq__fail(err, CALQ_ERR_SHAPE, v->name,
                            "input '%s' has no declared rank, so the model's shapes cannot be inferred; give its shape "
                            "(--input_shape %s:...)",
                            v->name, v->name);
        ins[i].dtype = v->dtype == CALQ_DTYPE_UNDEFINED ? CALQ_DTYPE_FLOAT32 : v->dtype;
        ins[i].ndim = v->ndim;
        for (int d = 0; d < v->ndim; d++) ins[i].dims[d] = v->dims[d] >= 0 ? v->dims[d] : dflt_dim;
    }
    calq_plan *p = NULL;
    if (st == CALQ_OK) st = calq__plan_build(g, ins, n_in, false, 0, &p, err);
    for (int v = 0; st == CALQ_OK && v < g->n_values; v++) {
        const calq_plan_value *pv = &p->vals[v];
        calq_value *x = &g->values[v];
        if (x->ndim >= 0 || pv->kind == CALQ_PV_NONE || pv->kind == CALQ_PV_DYNAMIC || pv->t.ndim < 0) continue;
        x->ndim = pv->t.ndim;
        memcpy(x->dims, pv->t.dims, sizeof(int64_t) * (size_t)pv->t.ndim);
        if (x->dtype == CALQ_DTYPE_UNDEFINED) x->dtype = pv->t.dtype;
        (*n_filled)++;
    }
    calq__plan_free(p);
    free(ins);
    return st;
}
