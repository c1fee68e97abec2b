#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "exec/op.h"
#include "graph/passes.h"

static const calq_op_def *const tables[] = {
    calq__ops_elementwise,
    calq__ops_shape,
    calq__ops_conv,
    calq__ops_gemm,
    calq__ops_pool,
    calq__ops_reduce,
    calq__ops_resize,
    calq__ops_quant,
    calq__ops_ascend,
    calq__ops_norm,
    calq__ops_dynamic_quant,
    calq__ops_col2im,
    calq__ops_center_crop_pad,
    calq__ops_grid_sample,
    calq__ops_control,
    calq__ops_rnn,
    calq__ops_detection,
    calq__ops_einsum,
    calq__ops_masks,
    calq__ops_space_depth,
    calq__ops_axis,
    calq__ops_sort,
    calq__ops_scatter,
};

const calq_op_def *calq__op_find(const char *domain, const char *op_type)
{
    if (domain && strcmp(domain, "com.microsoft") == 0) { /* onnxruntime's contrib operators calq runs */
        for (const calq_op_def *d = calq__ops_msft; d->op_type; d++)
            if (strcmp(d->op_type, op_type) == 0) return d;
        for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++) /* QGemm, MatMulIntegerToFloat */
            for (const calq_op_def *d = tables[t]; d->op_type; d++)
                if ((d->flags & CALQ_OP_MSFT) && strcmp(d->op_type, op_type) == 0) return d;
        return NULL;
    }
    if (domain && domain[0] && strcmp(domain, "ai.onnx") != 0) return NULL;
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
        for (const calq_op_def *d = tables[t]; d->op_type; d++)
            if (strcmp(d->op_type, op_type) == 0) return d;
    return NULL;
}

/* Operators of domain CALQ_DOMAIN_INTERNAL. */
static const calq_op_def *const internal_tables[] = {calq__ops_ascend_int, calq__ops_ssd};

const calq_op_def *calq__op_of(const calq_node *n)
{
    if (!n->domain || strcmp(n->domain, CALQ_DOMAIN_INTERNAL) != 0) return calq__op_find(n->domain, n->op_type);
    for (size_t t = 0; t < sizeof internal_tables / sizeof internal_tables[0]; t++)
        for (const calq_op_def *d = internal_tables[t]; d->op_type; d++)
            if (strcmp(d->op_type, n->op_type) == 0) return d;
    return NULL;
}

const calq_op_def *calq__op_at(int i)
{
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
        for (const calq_op_def *d = tables[t]; d->op_type; d++)
            if (i-- == 0) return d;
    return NULL;
}

calq_status calq__op_fail(calq_op_ctx *c, calq_status s, const char *fmt, ...)
{
    char msg[CALQ_ERROR_MESSAGE_MAX - 512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* a float16 model fails at its first Conv / Gemm / ... (float32 kernels): say what to do */
    for (int i = 0; s == CALQ_ERR_UNSUPPORTED && i < c->n_in; i++)
        if (c->in[i] && c->in[i]->dtype == CALQ_DTYPE_FLOAT16)
            return calq__fail(c->err, s, c->node->name,
                              "%s node '%s': %s (input %d is float16: a model computing in float16 needs converting "
                              "to float32 first, docs/cli.md)",
                              c->node->op_type, c->node->name, msg, i);
    return calq__fail(c->err, s, c->node->name, "%s node '%s': %s", c->node->op_type, c->node->name, msg);
}

void calq__set_shape(calq_tensor *t, calq_dtype dt, const int64_t *dims, int ndim)
{
    t->dtype = dt;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->dims[i] = dims[i];
}

int calq__norm_axis(int64_t axis, int rank)
{
    if (axis < 0) axis += rank;
    return axis < 0 || axis >= rank ? -1 : (int)axis;
}

bool calq__broadcast_shape(const int64_t *a, int na, const int64_t *b, int nb, int64_t *out, int *nout)
{
    int n = na > nb ? na : nb;
    if (n > CALQ_MAX_DIMS) return false;
    for (int i = 0; i < n; i++) {
        int64_t da = i < n - na ? 1 : a[i - (n - na)];
        int64_t db = i < n - nb ? 1 : b[i - (n - nb)];
        if (da == db || db == 1)
            out[i] = da;
        else if (da == 1)
            out[i] = db;
        else
            return false;
    }
    *nout = n;
    return true;
}

void calq__broadcast_strides(const int64_t *dims, int n, int ndim, int64_t *strides)
{
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        int k = i - (ndim - n);
        if (k < 0 || dims[k] == 1) {
            strides[i] = 0;
        } else {
            strides[i] = s;
        }
        if (k >= 0) s *= dims[k];
    }
}

calq_dtype calq__op_onnx_dtype(int64_t to, const char **name)
{
    static const char *const names[] = {"UNDEFINED", "FLOAT",  "UINT8",     "INT8",       "UINT16",  "INT16",
                                        "INT32",     "INT64",  "STRING",    "BOOL",       "FLOAT16", "DOUBLE",
                                        "UINT32",    "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16"};
    static const calq_dtype map[] = {
        CALQ_DTYPE_UNDEFINED, CALQ_DTYPE_FLOAT32,  CALQ_DTYPE_UINT8,  CALQ_DTYPE_INT8,      CALQ_DTYPE_UINT16,
        CALQ_DTYPE_INT16,     CALQ_DTYPE_INT32,    CALQ_DTYPE_INT64,  CALQ_DTYPE_UNDEFINED, CALQ_DTYPE_BOOL,
        CALQ_DTYPE_FLOAT16,   CALQ_DTYPE_FLOAT64,  CALQ_DTYPE_UINT32, CALQ_DTYPE_UINT64,    CALQ_DTYPE_UNDEFINED,
        CALQ_DTYPE_UNDEFINED, CALQ_DTYPE_UNDEFINED};
    if (to < 0 || to >= (int64_t)(sizeof map / sizeof map[0])) {
        *name = "an unknown or float8 type";
        return CALQ_DTYPE_UNDEFINED;
    }
    *name = names[to];
    return map[to];
}
