/* Reductions (ReduceSum, ReduceMean, ReduceMax, ...), Softmax, LogSoftmax, Hardmax, ArgMax
 * and ArgMin: the reference kernels; float32 Softmax/LogSoftmax and ReduceSum/ReduceMean also
 * have oneDNN fast paths (softmax_dnnl.c, reduce_dnnl.c).
 *
 * Numerics: values are widened to double and accumulated in a fixed order (the input's C
 * order over the reduced elements of each output), so results are bit-identical for any
 * thread count. Threads only split independent outputs.
 *
 * Layout trick: dims of size 1 are dropped and neighbouring dims that are both reduced or
 * both kept are merged, so any axes set becomes an alternation of kept and reduced groups.
 * If the innermost group is reduced, each output sums contiguous runs; if it is kept, a
 * vector of neighbouring outputs is accumulated at once from contiguous input rows. Both
 * read the input sequentially. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernels/dnnl_common.h"
#include "exec/kernels/reduce_dnnl.h"
#include "exec/kernels/softmax_dnnl.h"
#include "exec/kernels/values.h"
#include "exec/op.h"

/* Values are converted through a small double buffer: one dtype switch per chunk and tight
 * loops within it. */
#define CHUNK 256
/* Below this many input elements a parallel region costs more than it saves (waking a thread
 * took 60-70 us on this 2-core VM, exec/kernels/elementwise.c, EW_PAR_WORK): a reduction reads
 * an element in about 0.8 ns, Softmax and the arg ops spend 4-5 ns on one (an exp). */
#define PAR_WORK    ((int64_t)1 << 17)
#define SM_PAR_WORK ((int64_t)1 << 15)

/* ---- reductions --------------------------------------------------------------------------- */

typedef enum red_kind { R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD, R_L1, R_L2, R_SUMSQ, R_LOGSUM, R_LOGSUMEXP } red_kind;

/* What is accumulated per element. */
typedef enum acc_kind { A_SUM, A_SUMSQ, A_ABS, A_PROD, A_MAX, A_MIN, A_SUMEXP } acc_kind;

static const struct {
    const char *op;
    red_kind kind;
} red_ops[] = {
    {"ReduceSum", R_SUM},       {"ReduceMean", R_MEAN},
    {"ReduceMax", R_MAX},       {"ReduceMin", R_MIN},
    {"ReduceProd", R_PROD},     {"ReduceL1", R_L1},
    {"ReduceL2", R_L2},         {"ReduceSumSquare", R_SUMSQ},
    {"ReduceLogSum", R_LOGSUM}, {"ReduceLogSumExp", R_LOGSUMEXP},
};

static red_kind kind_of(const calq_op_ctx *c)
{
    for (size_t i = 0; i < sizeof red_ops / sizeof red_ops[0]; i++)
        if (strcmp(red_ops[i].op, c->node->op_type) == 0) return red_ops[i].kind;
    return R_SUM;
}

static acc_kind acc_of(red_kind k)
{
    switch (k) {
    case R_SUM:
    case R_MEAN:
    case R_LOGSUM: return A_SUM;
    case R_MAX: return A_MAX;
    case R_MIN: return A_MIN;
    case R_PROD: return A_PROD;
    case R_L1: return A_ABS;
    case R_L2:
    case R_SUMSQ: return A_SUMSQ;
    case R_LOGSUMEXP: return A_SUMEXP;
    }
    return A_SUM;
}

static double acc_init(acc_kind a)
{
    switch (a) {
    case A_PROD: return 1.0;
    case A_MAX: return -INFINITY;
    case A_MIN: return INFINITY;
    default: return 0.0;
    }
}

/* Max/min propagate NaN like numpy: once NaN, the accumulator stays NaN. */
static inline double take_max(double acc, double v)
{
    return v > acc || v != v ? v : acc;
}
static inline double take_min(double acc, double v)
{
    return v < acc || v != v ? v : acc;
}

/* Folds v[0..n) into one accumulator, in order. */
static double fold_run(acc_kind a, double acc, const double *v, int64_t n, double shift)
{
    switch (a) {
    case A_SUM:
        for (int64_t i = 0; i < n; i++) acc += v[i];
        break;
    case A_SUMSQ:
        for (int64_t i = 0; i < n; i++) acc += v[i] * v[i];
        break;
    case A_ABS:
        for (int64_t i = 0; i < n; i++) acc += fabs(v[i]);
        break;
    case A_PROD:
        for (int64_t i = 0; i < n; i++) acc *= v[i];
        break;
    case A_MAX:
        for (int64_t i = 0; i < n; i++) acc = take_max(acc, v[i]);
        break;
    case A_MIN:
        for (int64_t i = 0; i < n; i++) acc = take_min(acc, v[i]);
        break;
    case A_SUMEXP:
        for (int64_t i = 0; i < n; i++) acc += exp(v[i] - shift);
        break;
    }
    return acc;
}

/* Folds v[i] into acc[i] for i < n (one step for n neighbouring outputs). */
static void fold_vec(acc_kind a, double *acc, const double *v, int64_t n, const double *shift)
{
    switch (a) {
    case A_SUM:
        for (int64_t i = 0; i < n; i++) acc[i] += v[i];
        break;
    case A_SUMSQ:
        for (int64_t i = 0; i < n; i++) acc[i] += v[i] * v[i];
        break;
    case A_ABS:
        for (int64_t i = 0; i < n; i++) acc[i] += fabs(v[i]);
        break;
    case A_PROD:
        for (int64_t i = 0; i < n; i++) acc[i] *= v[i];
        break;
    case A_MAX:
        for (int64_t i = 0; i < n; i++) acc[i] = take_max(acc[i], v[i]);
        break;
    case A_MIN:
        for (int64_t i = 0; i < n; i++) acc[i] = take_min(acc[i], v[i]);
        break;
    case A_SUMEXP:
        for (int64_t i = 0; i < n; i++) acc[i] += exp(v[i] - shift[i]);
        break;
    }
}

/* Axes and output shape of one reduction node. */
typedef struct red_plan {
    bool noop; /* empty axes with noop_with_empty_axes: nothing is reduced (see reduce_run) */
    bool red[CALQ_MAX_DIMS];
    int out_nd;
    int64_t out[CALQ_MAX_DIMS];
    int64_t count; /* elements folded into each output */
} red_plan;

static bool axes_from_input(const calq_op_ctx *c)
{
    return c->opset >= 18 || (c->opset >= 13 && strcmp(c->node->op_type, "ReduceSum") == 0);
}

static calq_status red_plan_make(calq_op_ctx *c, red_plan *p)
{
    const calq_tensor *x = c->in[0];
    int rank = x->ndim;
    const calq_tensor *ax = c->n_in > 1 ? c->in[1] : NULL;
    int64_t axes[CALQ_MAX_DIMS];
    int n = 0;
    memset(p, 0, sizeof *p);
    /* Opset 20 lets ReduceMax / ReduceMin take bool (any / all). */
    bool bool_ok = x->dtype == CALQ_DTYPE_BOOL && c->opset >= 20 &&
                   (strcmp(c->node->op_type, "ReduceMax") == 0 || strcmp(c->node->op_type, "ReduceMin") == 0);
    if (!calq__k_numeric(x->dtype) && !bool_ok)
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "input dtype %s is not supported", calq_dtype_name(x->dtype));
    if (axes_from_input(c)) {
        if (ax) {
            int64_t na = calq_tensor_numel(ax);
            if (!calq__dtype_is_int(ax->dtype))
                return calq__op_fail(c, CALQ_ERR_SHAPE, "the axes input is %s, not an integer tensor",
                                     calq_dtype_name(ax->dtype));
            if (na > rank || na < 0)
                return calq__op_fail(c, CALQ_ERR_SHAPE, "%lld axes given for a rank-%d input", (long long)na, rank);
            /* An empty axes tensor may come without a buffer. */
            if (na > 0 && !ax->data)
                return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "the axes input must be known before the run");
            n = (int)na;
            for (int i = 0; i < n; i++) axes[i] = calq__tensor_get_i64(ax, i);
        }
    } else {
        if (ax)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "opset %d takes axes as an attribute, not as input 1", c->opset);
        const int64_t *v = NULL;
        int na = calq__attr_ints(c->node, "axes", &v);
        if (na > rank) return calq__op_fail(c, CALQ_ERR_SHAPE, "%d axes given for a rank-%d input", na, rank);
        for (int i = 0; i < na; i++) axes[n++] = v[i];
    }
    bool keep = calq__attr_int(c->node, "keepdims", 1) != 0;
    if (n == 0) {
        if (calq__attr_int(c->node, "noop_with_empty_axes", 0)) {
            p->noop = true;
        } else {
            for (int i = 0; i < rank; i++) p->red[i] = true;
        }
    }
    for (int i = 0; i < n; i++) {
        int a = calq__norm_axis(axes[i], rank);
        if (a < 0)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "axis %lld is out of range for a rank-%d input", (long long)axes[i],
                                 rank);
        if (p->red[a]) return calq__op_fail(c, CALQ_ERR_SHAPE, "axis %lld is given twice", (long long)axes[i]);
        p->red[a] = true;
    }
    p->count = 1;
    for (int i = 0; i < rank; i++) {
        if (!p->red[i] || p->noop) {
            p->out[p->out_nd++] = x->dims[i];
        } else {
            p->count *= x->dims[i];
            if (keep) p->out[p->out_nd++] = 1;
        }
    }
    if (calq_tensor_numel(x) < 0) return calq__op_fail(c, CALQ_ERR_SHAPE, "invalid input size");
    return CALQ_OK;
}

static calq_status reduce_infer(calq_op_ctx *c)
{
    red_plan p;
    CALQ_TRY(red_plan_make(c, &p));
    calq__set_shape(c->out[0], c->in[0]->dtype, p.out, p.out_nd);
    return CALQ_OK;
}

/* Coalesced view of the input: groups of merged dims, alternately kept and reduced. */
typedef struct red_geo {
    int ng;
    int64_t size[CALQ_MAX_DIMS], stride[CALQ_MAX_DIMS];
    bool red[CALQ_MAX_DIMS];
} red_geo;

static void red_geo_make(const calq_tensor *x, const red_plan *p, red_geo *g)
{
    g->ng = 0;
    for (int i = 0; i < x->ndim; i++) {
        if (x->dims[i] == 1) continue;
        if (g->ng > 0 && g->red[g->ng - 1] == p->red[i]) {
            g->size[g->ng - 1] *= x->dims[i];
        } else {
            g->size[g->ng] = x->dims[i];
            g->red[g->ng] = p->red[i];
            g->ng++;
        }
    }
    int64_t s = 1;
    for (int i = g->ng - 1; i >= 0; i--) {
        g->stride[i] = s;
        s *= g->size[i];
    }
}

/* Input offset of the kept groups [0, upto) for output position o (C order over them). */
static int64_t kept_base(const red_geo *g, int upto, int64_t o)
{
    int64_t off = 0;
    for (int i = upto - 1; i >= 0; i--) {
        if (g->red[i]) continue;
        off += (o % g->size[i]) * g->stride[i];
        o /= g->size[i];
    }
    return off;
}

/* Reduced groups [0, upto) walked in C order: an odometer over their indices. */
typedef struct red_walk {
    int n;
    int64_t size[CALQ_MAX_DIMS], stride[CALQ_MAX_DIMS], idx[CALQ_MAX_DIMS];
    int64_t total;
} red_walk;

static void walk_make(const red_geo *g, int upto, red_walk *w)
{
    w->n = 0;
    w->total = 1;
    for (int i = 0; i < upto; i++) {
        if (!g->red[i]) continue;
        w->size[w->n] = g->size[i];
        w->stride[w->n] = g->stride[i];
        w->idx[w->n] = 0;
        w->total *= g->size[i];
        w->n++;
    }
}

/* Advances the odometer; returns the offset delta relative to the previous position. */
static int64_t walk_next(red_walk *w)
{
    int64_t delta = 0;
    for (int i = w->n - 1; i >= 0; i--) {
        delta += w->stride[i];
        if (++w->idx[i] < w->size[i]) return delta;
        delta -= w->size[i] * w->stride[i];
        w->idx[i] = 0;
    }
    return delta;
}

/* Innermost group reduced: one output folds contiguous runs of `run` elements. */
static double fold_one(const calq_tensor *x, const red_geo *g, int64_t base, int64_t run, acc_kind a, double shift)
{
    red_walk w;
    walk_make(g, g->ng - 1, &w);
    double acc = acc_init(a), buf[CHUNK];
    int64_t off = base;
    for (int64_t r = 0; r < w.total; r++) {
        for (int64_t i = 0; i < run; i += CHUNK) {
            int64_t n = run - i < CHUNK ? run - i : CHUNK;
            calq__k_load(x, off + i, 1, n, buf);
            acc = fold_run(a, acc, buf, n, shift);
        }
        off += walk_next(&w);
    }
    return acc;
}

/* Innermost group kept: folds n neighbouring outputs at once into acc[0..n). */
static void fold_many(const calq_tensor *x, const red_geo *g, int64_t base, int64_t n, acc_kind a, const double *shift,
                      double *acc)
{
    red_walk w;
    walk_make(g, g->ng - 1, &w);
    double buf[CHUNK], init = acc_init(a);
    for (int64_t i = 0; i < n; i++) acc[i] = init;
    int64_t off = base;
    for (int64_t r = 0; r < w.total; r++) {
        calq__k_load(x, off, 1, n, buf);
        fold_vec(a, acc, buf, n, shift);
        off += walk_next(&w);
    }
}

static double finish(red_kind k, double acc, double shift, int64_t count, bool is_int)
{
    switch (k) {
    case R_MEAN: return is_int ? trunc(acc / (double)count) : acc / (double)count;
    case R_L2: return sqrt(acc);
    case R_LOGSUM: return log(acc);
    case R_LOGSUMEXP: return shift + log(acc);
    default: return acc;
    }
}

/* The shift of log-sum-exp: the maximum, or 0 when that is infinite (so that an all -inf
 * input gives -inf and a +inf input gives +inf, instead of inf - inf = NaN). */
static double lse_shift(double m)
{
    return isfinite(m) ? m : 0.0;
}

static calq_status reduce_run(calq_op_ctx *c)
{
    red_plan p;
    CALQ_TRY(red_plan_make(c, &p));
    const calq_tensor *x = c->in[0];
    calq_tensor *y = c->out[0];
    red_kind k = kind_of(c);
    acc_kind a = acc_of(k);
    bool is_int = calq__dtype_is_int(x->dtype);
    if (p.noop) {
        /* Nothing is summed, but each element still goes through the reduction's own map
         * (ReduceSumSquare squares, ReduceL1 takes |x|, ReduceLogSum the log, ...), as the
         * ONNX reference and onnxruntime do. */
        if (k == R_SUM || k == R_MEAN || k == R_MAX || k == R_MIN || k == R_PROD || k == R_LOGSUMEXP) {
            memcpy(y->data, x->data, calq__tensor_nbytes(x));
            return CALQ_OK;
        }
        int64_t n = calq_tensor_numel(x);
        for (int64_t i = 0; i < n; i++) {
            double v;
            calq__k_load(x, i, 1, 1, &v);
            v = finish(k, fold_run(a, acc_init(a), &v, 1, 0.0), 0.0, 1, is_int);
            calq__k_store(y, i, 1, 1, &v);
        }
        return CALQ_OK;
    }
    int64_t n_out = calq__shape_numel(p.out, p.out_nd);
    if (n_out == 0) return CALQ_OK;
    if (p.count == 0) { /* empty reduction: the identity of the operation */
        double v = finish(k, acc_init(a), 0.0, 0, is_int);
        for (int64_t o = 0; o < n_out; o++) calq__k_store(y, o, 1, 1, &v);
        return CALQ_OK;
    }
    red_geo g;
    red_geo_make(x, &p, &g);
    bool par = calq_tensor_numel(x) > PAR_WORK;

    if (g.ng == 0 || g.red[g.ng - 1]) {
        int64_t run = g.ng ? g.size[g.ng - 1] : 1;
#pragma omp parallel for schedule(static) if (par && n_out > 1)
        for (int64_t o = 0; o < n_out; o++) {
            int64_t base = kept_base(&g, g.ng, o);
            double shift = 0.0;
            if (a == A_SUMEXP) shift = lse_shift(fold_one(x, &g, base, run, A_MAX, 0.0));
            double v = finish(k, fold_one(x, &g, base, run, a, shift), shift, p.count, is_int);
            calq__k_store(y, o, 1, 1, &v);
        }
    } else {
        int64_t inner = g.size[g.ng - 1], outer = n_out / inner, chunks = (inner + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static) if (par && outer * chunks > 1)
        for (int64_t t = 0; t < outer * chunks; t++) {
            int64_t o = t / chunks, i0 = (t % chunks) * CHUNK, n = inner - i0 < CHUNK ? inner - i0 : CHUNK;
            int64_t base = kept_base(&g, g.ng - 1, o) + i0;
            double acc[CHUNK], shift[CHUNK];
            if (a == A_SUMEXP) {
                fold_many(x, &g, base, n, A_MAX, NULL, shift);
                for (int64_t i = 0; i < n; i++) shift[i] = lse_shift(shift[i]);
            } else {
                for (int64_t i = 0; i < n; i++) shift[i] = 0.0;
            }
            fold_many(x, &g, base, n, a, shift, acc);
            for (int64_t i = 0; i < n; i++) acc[i] = finish(k, acc[i], shift[i], p.count, is_int);
            calq__k_store(y, o * inner + i0, 1, n, acc);
        }
    }
    return CALQ_OK;
}

/* ---- softmax family and arg-reductions --------------------------------------------------- */

/* The input seen as [outer, len, inner] around the softmax / arg axis. */
typedef struct axis_geo {
    int axis;
    int64_t outer, len, inner;
} axis_geo;

static bool coerced_2d(const calq_op_ctx *c)
{
    return c->opset < 13 && strcmp(c->node->op_type, "ArgMax") != 0 && strcmp(c->node->op_type, "ArgMin") != 0;
}

static calq_status axis_geo_make(calq_op_ctx *c, int64_t dflt, axis_geo *g)
{
    const calq_tensor *x = c->in[0];
    int rank = x->ndim;
    int64_t ax = calq__attr_int(c->node, "axis", dflt);
    if (!calq__dtype_is_float(x->dtype) && !(calq__dtype_is_int(x->dtype) && strncmp(c->node->op_type, "Arg", 3) == 0))
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "input dtype %s is not supported", calq_dtype_name(x->dtype));
    if (calq_tensor_numel(x) < 0) return calq__op_fail(c, CALQ_ERR_SHAPE, "invalid input size");
    g->outer = g->len = g->inner = 1;
    if (coerced_2d(c)) {
        /* Before opset 13 the input is flattened to 2-D [prod(dims[:axis]), prod(dims[axis:])]
         * and the op works on whole rows; axis == rank is allowed (rows of one element). */
        if (ax < -rank || ax > rank)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "axis %lld is out of range for a rank-%d input", (long long)ax,
                                 rank);
        int a = (int)(ax < 0 ? ax + rank : ax);
        g->axis = a;
        for (int i = 0; i < rank; i++) {
            if (i < a)
                g->outer *= x->dims[i];
            else
                g->len *= x->dims[i];
        }
        return CALQ_OK;
    }
    int a = calq__norm_axis(ax, rank);
    if (a < 0)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "axis %lld is out of range for a rank-%d input", (long long)ax, rank);
    g->axis = a;
    for (int i = 0; i < rank; i++) {
        if (i < a)
            g->outer *= x->dims[i];
        else if (i == a)
            g->len = x->dims[i];
        else
            g->inner *= x->dims[i];
    }
    return CALQ_OK;
}

static int64_t softmax_default_axis(const calq_op_ctx *c)
{
    return c->opset < 13 ? 1 : -1;
}

static calq_status softmax_infer(calq_op_ctx *c)
{
    axis_geo g;
    CALQ_TRY(axis_geo_make(c, softmax_default_axis(c), &g));
    calq__set_shape(c->out[0], c->in[0]->dtype, c->in[0]->dims, c->in[0]->ndim);
    return CALQ_OK;
}

typedef enum sm_kind { SM_SOFTMAX, SM_LOG, SM_HARD } sm_kind;

/* Index of the first maximum (NaN counts as the largest, like numpy's argmax), or with
 * `last` the last one; mirrored for minima. */
static int64_t arg_best(const double *v, int64_t n, bool want_max, bool last)
{
    int64_t best = 0;
    for (int64_t j = 1; j < n; j++) {
        double b = v[best], x = v[j];
        bool better;
        if (b != b)
            better = last && x != x;
        else if (x != x)
            better = true;
        else
            better = want_max ? (x > b || (last && x == b)) : (x < b || (last && x == b));
        if (better) best = j;
    }
    return best;
}

/* One row v[0..n) in place. Softmax subtracts the maximum first so exp cannot overflow. */
static void softmax_row(sm_kind k, double *v, int64_t n)
{
    if (k == SM_HARD) {
        int64_t j = arg_best(v, n, true, false);
        for (int64_t i = 0; i < n; i++) v[i] = i == j ? 1.0 : 0.0;
        return;
    }
    double m = -INFINITY, s = 0.0;
    for (int64_t i = 0; i < n; i++) m = take_max(m, v[i]);
    if (k == SM_LOG) {
        for (int64_t i = 0; i < n; i++) {
            v[i] -= m;
            s += exp(v[i]);
        }
        double ls = log(s);
        for (int64_t i = 0; i < n; i++) v[i] -= ls;
    } else {
        for (int64_t i = 0; i < n; i++) {
            v[i] = exp(v[i] - m);
            s += v[i];
        }
        for (int64_t i = 0; i < n; i++) v[i] /= s;
    }
}

static calq_status softmax_run(calq_op_ctx *c)
{
    axis_geo g;
    CALQ_TRY(axis_geo_make(c, softmax_default_axis(c), &g));
    const char *op = c->node->op_type;
    sm_kind k = strcmp(op, "LogSoftmax") == 0 ? SM_LOG : strcmp(op, "Hardmax") == 0 ? SM_HARD : SM_SOFTMAX;
    const calq_tensor *x = c->in[0];
    calq_tensor *y = c->out[0];
    int64_t rows = g.outer * g.inner;
    if (rows == 0 || g.len == 0) return CALQ_OK;
    int oom = 0;
#pragma omp parallel if (rows > 1 && rows * g.len > SM_PAR_WORK)
    {
        double *v = malloc(sizeof(double) * (size_t)g.len);
        if (!v) {
#pragma omp atomic write
            oom = 1;
        }
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; r++) {
            if (!v) continue;
            /* Rows along a non-innermost axis are strided: gather, compute, scatter. */
            int64_t off = (r / g.inner) * g.len * g.inner + r % g.inner;
            calq__k_load(x, off, g.inner, g.len, v);
            softmax_row(k, v, g.len);
            calq__k_store(y, off, g.inner, g.len, v);
        }
        free(v);
    }
    if (oom)
        return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory for a row of %lld values", (long long)g.len);
    return CALQ_OK;
}

static calq_status arg_shape(calq_op_ctx *c, axis_geo *g, int64_t *out, int *nd)
{
    CALQ_TRY(axis_geo_make(c, 0, g));
    const calq_tensor *x = c->in[0];
    if (g->len == 0) return calq__op_fail(c, CALQ_ERR_SHAPE, "axis %d has size 0: no element to select", g->axis);
    bool keep = calq__attr_int(c->node, "keepdims", 1) != 0;
    *nd = 0;
    for (int i = 0; i < x->ndim; i++) {
        if (i != g->axis)
            out[(*nd)++] = x->dims[i];
        else if (keep)
            out[(*nd)++] = 1;
    }
    return CALQ_OK;
}

static calq_status arg_infer(calq_op_ctx *c)
{
    axis_geo g;
    int64_t out[CALQ_MAX_DIMS];
    int nd = 0;
    CALQ_TRY(arg_shape(c, &g, out, &nd));
    calq__set_shape(c->out[0], CALQ_DTYPE_INT64, out, nd);
    return CALQ_OK;
}

static calq_status arg_run(calq_op_ctx *c)
{
    axis_geo g;
    int64_t out[CALQ_MAX_DIMS];
    int nd = 0;
    CALQ_TRY(arg_shape(c, &g, out, &nd));
    bool want_max = strcmp(c->node->op_type, "ArgMax") == 0;
    bool last = calq__attr_int(c->node, "select_last_index", 0) != 0;
    const calq_tensor *x = c->in[0];
    int64_t *y = c->out[0]->data, rows = g.outer * g.inner;
    int oom = 0;
#pragma omp parallel if (rows > 1 && rows * g.len > SM_PAR_WORK)
    {
        double *v = malloc(sizeof(double) * (size_t)g.len);
        if (!v) {
#pragma omp atomic write
            oom = 1;
        }
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; r++) {
            if (!v) continue;
            calq__k_load(x, (r / g.inner) * g.len * g.inner + r % g.inner, g.inner, g.len, v);
            y[r] = arg_best(v, g.len, want_max, last);
        }
        free(v);
    }
    if (oom)
        return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory for a row of %lld values", (long long)g.len);
    return CALQ_OK;
}

/* Softmax / LogSoftmax on float32: oneDNN's JIT kernel (softmax_dnnl.c) when it has one. */
static calq_status softmax_prepare(calq_op_ctx *c)
{
    c->state = NULL;
    axis_geo g;
    CALQ_TRY(axis_geo_make(c, softmax_default_axis(c), &g)); /* infer accepted it already */
    return calq__softmax_dnnl_prepare(c, g.outer, g.len, g.inner, strcmp(c->node->op_type, "LogSoftmax") == 0);
}

/* ReduceSum / ReduceMean on float32: oneDNN's JIT reduction (reduce_dnnl.c) when it has one. */
static calq_status reduce_prepare(calq_op_ctx *c)
{
    c->state = NULL;
    /* axes given as an input must be a constant to plan with them */
    if (axes_from_input(c) && c->n_in > 1 && c->in[1] && calq_tensor_numel(c->in[1]) > 0 && !(c->const_inputs & 2u))
        return CALQ_OK;
    red_plan p;
    CALQ_TRY(red_plan_make(c, &p)); /* infer accepted it already */
    if (p.noop || p.count <= 0) return CALQ_OK;
    const calq_tensor *x = c->in[0];
    return calq__reduce_dnnl_prepare(c, x->dims, x->ndim, p.red, kind_of(c) == R_MEAN);
}

#define REDUCE_OP(name)                                                                                                \
    {                                                                                                                  \
        name, 1, 2, 1, 1, 1u << 1, false, reduce_infer, reduce_run, NULL, NULL, NULL, 0                                \
    }
#define SOFTMAX_OP(name)                                                                                               \
    {                                                                                                                  \
        name, 1, 1, 1, 1, 0, false, softmax_infer, softmax_run, NULL, NULL, NULL, 0                                    \
    }

#define REDUCE_DNNL_OP(name)                                                                                           \
    {                                                                                                                  \
        name, 1, 2, 1, 1, 1u << 1, false, reduce_infer, reduce_run, reduce_prepare, calq__dnnl_unary_run,              \
            calq__dnnl_unary_release, 0                                                                                \
    }

const calq_op_def calq__ops_reduce[] = {
    REDUCE_DNNL_OP("ReduceSum"),
    REDUCE_DNNL_OP("ReduceMean"),
    REDUCE_OP("ReduceMax"),
    REDUCE_OP("ReduceMin"),
    REDUCE_OP("ReduceProd"),
    REDUCE_OP("ReduceL1"),
    REDUCE_OP("ReduceL2"),
    REDUCE_OP("ReduceSumSquare"),
    REDUCE_OP("ReduceLogSum"),
    REDUCE_OP("ReduceLogSumExp"),
    {"Softmax", 1, 1, 1, 1, 0, false, softmax_infer, softmax_run, softmax_prepare, calq__dnnl_unary_run,
     calq__dnnl_unary_release, 0},
    {"LogSoftmax", 1, 1, 1, 1, 0, false, softmax_infer, softmax_run, softmax_prepare, calq__dnnl_unary_run,
     calq__dnnl_unary_release, 0},
    SOFTMAX_OP("Hardmax"),
    {"ArgMax", 1, 1, 1, 1, 0, false, arg_infer, arg_run, NULL, NULL, NULL, 0},
    {"ArgMin", 1, 1, 1, 1, 0, false, arg_infer, arg_run, NULL, NULL, NULL, 0},
    {0},
};
