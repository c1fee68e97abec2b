/* Operators that sort: TopK and Unique. Reference kernels.
 *
 * Order: values compare as doubles, NaN above every number (numpy's sort puts NaN last), and
 * equal values keep their input order (the ONNX rule for TopK: the lower index first), so the
 * result is fully determined. */
#include <stdlib.h>
#include <string.h>

#include "exec/kernels/values.h"
#include "exec/op.h"

#define PAR_WORK 32768

typedef struct keyed {
    double v;
    int64_t i;
} keyed;

/* a < b in the order above (ascending); NaN is the largest. */
static int cmp_value(double a, double b)
{
    bool na = a != a, nb = b != b;
    if (na || nb) return na == nb ? 0 : na ? 1 : -1;
    return a < b ? -1 : a > b ? 1 : 0;
}

static int cmp_desc(const void *pa, const void *pb)
{
    const keyed *a = pa, *b = pb;
    int c = cmp_value(b->v, a->v);
    return c ? c : (a->i > b->i) - (a->i < b->i);
}

static int cmp_asc(const void *pa, const void *pb)
{
    const keyed *a = pa, *b = pb;
    int c = cmp_value(a->v, b->v);
    return c ? c : (a->i > b->i) - (a->i < b->i);
}

/* ---- TopK ------------------------------------------------------------------------------------ */

static calq_status topk_params(calq_op_ctx *c, int *axis, int64_t *k)
{
    const calq_tensor *x = c->in[0];
    if (!calq__k_numeric(x->dtype))
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "input dtype %s is not supported", calq_dtype_name(x->dtype));
    int64_t av = calq__attr_int(c->node, "axis", -1);
    *axis = calq__norm_axis(av, x->ndim);
    if (*axis < 0)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "axis %lld is out of range for a rank-%d input", (long long)av,
                             x->ndim);
    if (c->opset < 10) {
        const calq_attr *a = calq__attr(c->node, "k");
        if (!a || a->type != CALQ_ATTR_INT) return calq__op_fail(c, CALQ_ERR_SHAPE, "the 'k' attribute is missing");
        *k = a->i;
    } else {
        const calq_tensor *kt = c->n_in > 1 ? c->in[1] : NULL;
        if (!kt) return calq__op_fail(c, CALQ_ERR_SHAPE, "K (input 1) is missing");
        if (!calq__dtype_is_int(kt->dtype) || calq_tensor_numel(kt) != 1)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "K (input 1) must hold one integer");
        if (!kt->data) return calq__op_fail(c, CALQ_ERR_INTERNAL, "K (input 1) is not known while inferring shapes");
        *k = calq__tensor_get_i64(kt, 0);
    }
    if (*k < 0 || *k > x->dims[*axis])
        return calq__op_fail(c, CALQ_ERR_SHAPE, "K = %lld is outside [0, %lld], the size of axis %d", (long long)*k,
                             (long long)x->dims[*axis], *axis);
    return CALQ_OK;
}

static calq_status topk_infer(calq_op_ctx *c)
{
    int axis = 0;
    int64_t k = 0;
    CALQ_TRY(topk_params(c, &axis, &k));
    const calq_tensor *x = c->in[0];
    int64_t d[CALQ_MAX_DIMS];
    memcpy(d, x->dims, sizeof d);
    d[axis] = k;
    calq__set_shape(c->out[0], x->dtype, d, x->ndim);
    if (c->n_out > 1 && c->out[1]) calq__set_shape(c->out[1], CALQ_DTYPE_INT64, d, x->ndim);
    return CALQ_OK;
}

static calq_status topk_run(calq_op_ctx *c)
{
    int axis = 0;
    int64_t k = 0;
    CALQ_TRY(topk_params(c, &axis, &k));
    const calq_tensor *x = c->in[0];
    bool largest = calq__attr_int(c->node, "largest", 1) != 0;
    int64_t len = x->dims[axis], inner = calq__shape_numel(x->dims + axis + 1, x->ndim - axis - 1);
    int64_t rows = calq__shape_numel(x->dims, axis) * inner;
    calq_tensor *vals = c->out[0], *idx = c->n_out > 1 ? c->out[1] : NULL;
    if (rows == 0 || k == 0) return CALQ_OK;
    int oom = 0;
#pragma omp parallel if (rows > 1 && rows * len > PAR_WORK)
    {
        keyed *kv = malloc(sizeof(keyed) * (size_t)len);
        double *v = malloc(sizeof(double) * (size_t)len);
        if (!kv || !v) {
#pragma omp atomic write
            oom = 1;
        }
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; r++) {
            if (!kv || !v) continue;
            int64_t o = r / inner, in = r % inner;
            calq__k_load(x, o * len * inner + in, inner, len, v);
            for (int64_t j = 0; j < len; j++) kv[j] = (keyed){v[j], j};
            qsort(kv, (size_t)len, sizeof *kv, largest ? cmp_desc : cmp_asc);
            for (int64_t j = 0; j < k; j++) {
                v[j] = kv[j].v;
                if (idx) ((int64_t *)idx->data)[o * k * inner + j * inner + in] = kv[j].i;
            }
            calq__k_store(vals, o * k * inner + in, inner, k, v);
        }
        free(kv);
        free(v);
    }
    if (oom) return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory for a row of %lld values", (long long)len);
    return CALQ_OK;
}

/* ---- Unique ---------------------------------------------------------------------------------- */

/* The input seen as n slices along `axis` (the flattened input: n elements of size 1). */
typedef struct slices {
    int64_t n, outer, inner; /* slice s is x[o, s, i] for o < outer, i < inner */
    const calq_tensor *x;
    double *v; /* the input in double */
} slices;

static int cmp_slices(const slices *s, int64_t a, int64_t b)
{
    for (int64_t o = 0; o < s->outer; o++)
        for (int64_t i = 0; i < s->inner; i++) {
            int c = cmp_value(s->v[(o * s->n + a) * s->inner + i], s->v[(o * s->n + b) * s->inner + i]);
            if (c) return c;
        }
    return 0;
}

/* qsort has no context argument: sort (slice, index) pairs by merge sort instead, which is also
 * stable (equal slices stay in input order). */
static void merge_sort(const slices *s, int64_t *a, int64_t *tmp, int64_t n)
{
    if (n < 2) return;
    int64_t h = n / 2;
    merge_sort(s, a, tmp, h);
    merge_sort(s, a + h, tmp, n - h);
    int64_t i = 0, j = h, k = 0;
    while (i < h && j < n) tmp[k++] = cmp_slices(s, a[j], a[i]) < 0 ? a[j++] : a[i++];
    while (i < h) tmp[k++] = a[i++];
    while (j < n) tmp[k++] = a[j++];
    memcpy(a, tmp, sizeof(int64_t) * (size_t)n);
}

typedef struct unique_result {
    int64_t n_unique;
    int64_t *first;   /* [n_unique] input slice of each unique slice, in output order */
    int64_t *inverse; /* [n] output position of each input slice */
    int64_t *count;   /* [n_unique] */
} unique_result;

static void unique_free(unique_result *u)
{
    free(u->first);
    free(u->inverse);
    free(u->count);
}

static calq_status unique_compute(calq_op_ctx *c, slices *s, unique_result *u)
{
    const calq_tensor *x = c->in[0];
    memset(u, 0, sizeof *u);
    if (!calq__k_numeric(x->dtype) && x->dtype != CALQ_DTYPE_BOOL)
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "input dtype %s is not supported", calq_dtype_name(x->dtype));
    const calq_attr *aa = calq__attr(c->node, "axis");
    s->x = x;
    if (aa && aa->type == CALQ_ATTR_INT) {
        int a = calq__norm_axis(aa->i, x->ndim);
        if (a < 0)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "axis %lld is out of range for a rank-%d input", (long long)aa->i,
                                 x->ndim);
        s->n = x->dims[a];
        s->outer = calq__shape_numel(x->dims, a);
        s->inner = calq__shape_numel(x->dims + a + 1, x->ndim - a - 1);
    } else {
        s->n = calq_tensor_numel(x);
        s->outer = s->inner = 1;
    }
    int64_t total = calq_tensor_numel(x), n = s->n;
    s->v = malloc(sizeof(double) * (size_t)(total + 1));
    int64_t *order = malloc(sizeof(int64_t) * (size_t)(n + 1)), *tmp = malloc(sizeof(int64_t) * (size_t)(n + 1));
    u->first = malloc(sizeof(int64_t) * (size_t)(n + 1));
    u->inverse = malloc(sizeof(int64_t) * (size_t)(n + 1));
    u->count = calloc((size_t)n + 1, sizeof(int64_t));
    if (!s->v || !order || !tmp || !u->first || !u->inverse || !u->count) {
        free(order);
        free(tmp);
        free(s->v);
        s->v = NULL;
        unique_free(u);
        return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory for %lld values", (long long)total);
    }
    if (x->dtype == CALQ_DTYPE_BOOL)
        for (int64_t i = 0; i < total; i++) s->v[i] = ((const uint8_t *)x->data)[i] != 0;
    else
        calq__k_load(x, 0, 1, total, s->v);
    for (int64_t i = 0; i < n; i++) order[i] = i;
    merge_sort(s, order, tmp, n);
    /* Groups of equal slices in sorted order; the first member is the first occurrence. */
    bool sorted = calq__attr_int(c->node, "sorted", 1) != 0;
    int64_t g = 0;
    for (int64_t i = 0; i < n; i++) {
        if (i == 0 || cmp_slices(s, order[i - 1], order[i]) != 0) u->first[g++] = order[i];
        tmp[order[i]] = g - 1; /* group of each input slice */
    }
    u->n_unique = g;
    if (!sorted) {
        /* Output in order of first occurrence: renumber groups by their first input slice. */
        int64_t *rank = order; /* reuse: group -> output position */
        int64_t pos = 0;
        for (int64_t i = 0; i < g; i++) rank[i] = -1;
        for (int64_t i = 0; i < n; i++)
            if (rank[tmp[i]] < 0) {
                rank[tmp[i]] = pos;
                u->first[pos++] = i;
            }
        for (int64_t i = 0; i < n; i++) tmp[i] = rank[tmp[i]];
    }
    for (int64_t i = 0; i < n; i++) {
        u->inverse[i] = tmp[i];
        u->count[tmp[i]]++;
    }
    free(order);
    free(tmp);
    return CALQ_OK;
}

static void unique_shapes(calq_op_ctx *c, const unique_result *u)
{
    const calq_tensor *x = c->in[0];
    const calq_attr *aa = calq__attr(c->node, "axis");
    int64_t d[CALQ_MAX_DIMS];
    if (aa && aa->type == CALQ_ATTR_INT) {
        memcpy(d, x->dims, sizeof d);
        d[calq__norm_axis(aa->i, x->ndim)] = u->n_unique;
        calq__set_shape(c->out[0], x->dtype, d, x->ndim);
    } else {
        d[0] = u->n_unique;
        calq__set_shape(c->out[0], x->dtype, d, 1);
    }
    int64_t n = aa && aa->type == CALQ_ATTR_INT ? x->dims[calq__norm_axis(aa->i, x->ndim)] : calq_tensor_numel(x);
    for (int k = 1; k < c->n_out && k < 4; k++) {
        if (!c->out[k]) continue;
        d[0] = k == 2 ? n : u->n_unique;
        calq__set_shape(c->out[k], CALQ_DTYPE_INT64, d, 1);
    }
}

static calq_status unique_infer(calq_op_ctx *c)
{
    slices s = {0};
    unique_result u;
    CALQ_TRY(unique_compute(c, &s, &u));
    unique_shapes(c, &u);
    free(s.v);
    unique_free(&u);
    return CALQ_OK;
}

static calq_status unique_run(calq_op_ctx *c)
{
    slices s = {0};
    unique_result u;
    CALQ_TRY(unique_compute(c, &s, &u));
    size_t es = calq_dtype_size(s.x->dtype);
    char *y = c->out[0]->data;
    const char *xd = s.x->data;
    for (int64_t o = 0; o < s.outer; o++)
        for (int64_t g = 0; g < u.n_unique; g++)
            memcpy(y + (size_t)((o * u.n_unique + g) * s.inner) * es,
                   xd + (size_t)((o * s.n + u.first[g]) * s.inner) * es, (size_t)s.inner * es);
    if (c->n_out > 1 && c->out[1]) memcpy(c->out[1]->data, u.first, sizeof(int64_t) * (size_t)u.n_unique);
    if (c->n_out > 2 && c->out[2]) memcpy(c->out[2]->data, u.inverse, sizeof(int64_t) * (size_t)s.n);
    if (c->n_out > 3 && c->out[3]) memcpy(c->out[3]->data, u.count, sizeof(int64_t) * (size_t)u.n_unique);
    free(s.v);
    unique_free(&u);
    return CALQ_OK;
}

const calq_op_def calq__ops_sort[] = {
    {"TopK", 1, 2, 1, 2, 1u << 1, false, topk_infer, topk_run, NULL, NULL, NULL, 0},
    {"Unique", 1, 1, 1, 4, 1u << 0, false, unique_infer, unique_run, NULL, NULL, NULL, 0},
    {0},
};
