/* Helpers the Caffe layer mappers share: the string table, messages, parameter reads from the
 * prototxt tree, and graph construction (values, nodes, attributes, constants). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/tensor.h"
#include "base/unique_name.h"
#include "frontend/caffe.h"

/* ---- string table ----------------------------------------------------------------------------- */

static uint64_t hash_key(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

int calq__caffe_map_get(const calq_caffe_map *m, const char *key)
{
    if (!m->cap || !key) return -1;
    uint64_t k = hash_key(key) & (uint64_t)(m->cap - 1);
    while (m->keys[k]) {
        if (strcmp(m->keys[k], key) == 0) return m->vals[k];
        k = (k + 1) & (uint64_t)(m->cap - 1);
    }
    return -1;
}

static void map_insert(const char **keys, int *vals, int cap, const char *key, int val)
{
    uint64_t k = hash_key(key) & (uint64_t)(cap - 1);
    while (keys[k] && strcmp(keys[k], key) != 0) k = (k + 1) & (uint64_t)(cap - 1);
    keys[k] = key;
    vals[k] = val;
}

int calq__caffe_map_put(calq_caffe_map *m, const char *key, int val)
{
    if ((m->n + 1) * 2 > m->cap) {
        int cap = m->cap ? m->cap * 2 : 64;
        const char **keys = calloc((size_t)cap, sizeof *keys);
        int *vals = calloc((size_t)cap, sizeof *vals);
        if (!keys || !vals) {
            free(keys);
            free(vals);
            return -1;
        }
        for (int i = 0; i < m->cap; i++)
            if (m->keys[i]) map_insert(keys, vals, cap, m->keys[i], m->vals[i]);
        free(m->keys);
        free(m->vals);
        m->keys = keys;
        m->vals = vals;
        m->cap = cap;
    }
    if (calq__caffe_map_get(m, key) < 0) m->n++;
    map_insert(m->keys, m->vals, m->cap, key, val);
    return 0;
}

void calq__caffe_map_free(calq_caffe_map *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

/* ---- messages --------------------------------------------------------------------------------- */

calq_status calq__caffe_oom(calq_caffe_ctx *c)
{
    c->status = calq__fail(c->err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory while building the Caffe model");
    return c->status;
}

static calq_status vfail(calq_caffe_ctx *c, const calq_caffe_layer *L, calq_status s, const char *file, int line,
                         const char *fmt, va_list ap)
{
    char msg[CALQ_ERROR_MESSAGE_MAX];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (L && line > 0)
        c->status = calq__fail(c->err, s, L->name, "%s:%d: layer '%s' (%s): %s", file, line, L->name, L->type, msg);
    else if (L)
        c->status = calq__fail(c->err, s, L->name, "%s: layer '%s' (%s): %s", file, L->name, L->type, msg);
    else
        c->status = calq__fail(c->err, s, NULL, "%s: %s", file, msg);
    return c->status;
}

calq_status calq__caffe_fail(calq_caffe_ctx *c, const calq_caffe_layer *L, calq_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    calq_status r = vfail(c, L, s, c->proto_name, L ? L->line : 0, fmt, ap);
    va_end(ap);
    return r;
}

calq_status calq__caffe_fail_weights(calq_caffe_ctx *c, const calq_caffe_layer *L, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    calq_status r = vfail(c, L, CALQ_ERR_BAD_FORMAT, c->weights_name, 0, fmt, ap);
    va_end(ap);
    return r;
}

static void count_text(char *buf, size_t n, int lo, int hi, const char *what)
{
    if (lo == hi)
        snprintf(buf, n, "%d %s%s", lo, what, lo == 1 ? "" : "s");
    else if (hi < 0)
        snprintf(buf, n, "at least %d %ss", lo, what);
    else
        snprintf(buf, n, "%d to %d %ss", lo, hi, what);
}

calq_status calq__caffe_need_io(calq_caffe_ctx *c, const calq_caffe_layer *L, int min_b, int max_b, int min_t,
                                int max_t)
{
    char b[64], t[64];
    count_text(b, sizeof b, min_b, max_b, "bottom");
    count_text(t, sizeof t, min_t, max_t, "top");
    if (L->n_bottom < min_b || (max_b >= 0 && L->n_bottom > max_b) || L->n_top < min_t ||
        (max_t >= 0 && L->n_top > max_t))
        return calq__caffe_fail(c, L, CALQ_ERR_BAD_FORMAT,
                                "has %d bottom%s and %d top%s; this layer type takes %s and %s", L->n_bottom,
                                L->n_bottom == 1 ? "" : "s", L->n_top, L->n_top == 1 ? "" : "s", b, t);
    return CALQ_OK;
}

/* ---- shapes ----------------------------------------------------------------------------------- */

static int grow_values(calq_caffe_ctx *c)
{
    if (c->g->n_values <= c->cap_values) return 0;
    int cap = c->cap_values ? c->cap_values : 64;
    while (cap < c->g->n_values) cap *= 2;
    calq_caffe_shape *s = realloc(c->shapes, sizeof *s * (size_t)cap);
    if (!s) return -1;
    c->shapes = s;
    bool *u = realloc(c->consumed, sizeof *u * (size_t)cap);
    if (!u) return -1;
    c->consumed = u;
    for (int i = c->cap_values; i < cap; i++) {
        c->shapes[i].ndim = -1;
        c->consumed[i] = false;
    }
    c->cap_values = cap;
    return 0;
}

calq_caffe_shape calq__caffe_shape(calq_caffe_ctx *c, int v)
{
    return c->shapes[v];
}

void calq__caffe_set_shape(calq_caffe_ctx *c, int v, const calq_caffe_shape *s)
{
    /* Dims beyond 2^31 are treated as unknown, so shape arithmetic never overflows. */
    c->shapes[v] = *s;
    for (int i = 0; i < s->ndim && i < CALQ_MAX_DIMS; i++)
        if (s->dims[i] <= 0 || s->dims[i] > INT32_MAX) c->shapes[v].dims[i] = -1;
}

int64_t calq__caffe_numel(const int64_t *dims, int n)
{
    int64_t p = 1;
    for (int i = 0; i < n; i++) {
        if (dims[i] < 0 || (dims[i] && p > INT64_MAX / dims[i])) return -1;
        p *= dims[i];
    }
    return p;
}

void calq__caffe_copy_shape(calq_caffe_ctx *c, int to, int from)
{
    c->shapes[to] = c->shapes[from];
}

int calq__caffe_rank(calq_caffe_ctx *c, const calq_caffe_layer *L, int i)
{
    int r = c->shapes[L->bottom[i]].ndim;
    if (r < 0)
        calq__caffe_fail(c, L, CALQ_ERR_UNSUPPORTED,
                         "the rank of bottom '%s' is not known, and this layer needs it. Give the net inputs a shape "
                         "in the prototxt (input_shape, input_dim or an Input layer with input_param { shape { dim } "
                         "}).",
                         c->g->values[L->bottom[i]].name);
    return r;
}

int calq__caffe_axis(calq_caffe_ctx *c, const calq_caffe_layer *L, int64_t axis, int rank, const char *what)
{
    int64_t a = axis < 0 ? axis + rank : axis;
    if (a < 0 || a >= rank) {
        calq__caffe_fail(c, L, CALQ_ERR_BAD_FORMAT, "%s %lld is outside the %d axes of its bottom", what,
                         (long long)axis, rank);
        return -1;
    }
    return (int)a;
}

/* ---- parameters ------------------------------------------------------------------------------- */

const calq_tp_node *calq__caffe_param(const calq_caffe_layer *L, const char *field)
{
    int n = calq_tp_count(L->tp, field);
    const calq_tp_node *p = n ? calq_tp_nth(L->tp, field, n - 1) : NULL;
    return p && p->kind == CALQ_TP_MESSAGE ? p : NULL;
}

/* Protobuf text format: a singular field given twice takes the last value. */
static const calq_tp_node *last(const calq_tp_node *msg, const char *field)
{
    int n = msg ? calq_tp_count(msg, field) : 0;
    return n ? calq_tp_nth(msg, field, n - 1) : NULL;
}

static calq_status note(calq_caffe_ctx *c, calq_status s)
{
    if (s != CALQ_OK) c->status = s;
    return s;
}

calq_status calq__caffe_get_int(calq_caffe_ctx *c, const calq_tp_node *msg, const char *field, int64_t dflt,
                                int64_t *out)
{
    const calq_tp_node *n = last(msg, field);
    *out = dflt;
    return n ? note(c, calq_tp_int(n, c->proto_name, out, c->err)) : CALQ_OK;
}

calq_status calq__caffe_get_float(calq_caffe_ctx *c, const calq_tp_node *msg, const char *field, float dflt, float *out)
{
    const calq_tp_node *n = last(msg, field);
    *out = dflt;
    return n ? note(c, calq_tp_float(n, c->proto_name, out, c->err)) : CALQ_OK;
}

calq_status calq__caffe_get_bool(calq_caffe_ctx *c, const calq_tp_node *msg, const char *field, bool dflt, bool *out)
{
    const calq_tp_node *n = last(msg, field);
    *out = dflt;
    return n ? note(c, calq_tp_bool(n, c->proto_name, out, c->err)) : CALQ_OK;
}

calq_status calq__caffe_get_enum(calq_caffe_ctx *c, const calq_tp_node *msg, const char *field,
                                 const char *const *names, int n_names, int dflt, int *out)
{
    const calq_tp_node *n = last(msg, field);
    *out = dflt;
    if (!n) return CALQ_OK;
    if (n->kind == CALQ_TP_SCALAR && n->type == CALQ_TP_NUMBER) {
        int64_t v;
        CALQ_TRY(note(c, calq_tp_int(n, c->proto_name, &v, c->err)));
        if (v >= 0 && v < n_names && names[v]) {
            *out = (int)v;
            return CALQ_OK;
        }
    } else if (n->kind == CALQ_TP_SCALAR && n->type == CALQ_TP_IDENT) {
        for (int k = 0; k < n_names; k++)
            if (names[k] && strcmp(names[k], n->text) == 0) {
                *out = k;
                return CALQ_OK;
            }
    }
    char list[256] = "";
    size_t at = 0;
    for (int k = 0; k < n_names && at < sizeof list; k++)
        if (names[k]) at += (size_t)snprintf(list + at, sizeof list - at, "%s%s", at ? ", " : "", names[k]);
    c->status =
        calq__fail(c->err, CALQ_ERR_BAD_FORMAT, NULL, "%s:%d:%d: field '%s' must be one of %s, got '%s'", c->proto_name,
                   n->line, n->col, field, list, n->kind == CALQ_TP_SCALAR && n->text ? n->text : "{...}");
    return c->status;
}

int calq__caffe_count(const calq_tp_node *msg, const char *field)
{
    return msg ? calq_tp_count(msg, field) : 0;
}

calq_status calq__caffe_get_int_at(calq_caffe_ctx *c, const calq_tp_node *msg, const char *field, int i, int64_t *out)
{
    return note(c, calq_tp_int(calq_tp_nth(msg, field, i), c->proto_name, out, c->err));
}

calq_status calq__caffe_get_float_at(calq_caffe_ctx *c, const calq_tp_node *msg, const char *field, int i, float *out)
{
    return note(c, calq_tp_float(calq_tp_nth(msg, field, i), c->proto_name, out, c->err));
}

/* ---- graph ------------------------------------------------------------------------------------ */

/* A value named "<a>/<b><suffix>", or with _2, _3, ... appended, so that it clashes neither
 * with a value already in the graph nor with a blob name the net uses later. */
static bool value_taken(const void *ctx, const char *name)
{
    const calq_caffe_ctx *c = ctx;
    return calq__graph_find(c->g, name) >= 0 || calq__caffe_map_get(&c->blob_index, name) >= 0;
}

static int fresh_value(calq_caffe_ctx *c, const char *a, const char *b, const char *suffix)
{
    char *stem = calq__strdup_printf("%s/%s", a, b);
    char *name = stem ? calq__unique_name(stem, suffix, "_", 2, value_taken, c) : NULL;
    free(stem);
    if (!name) {
        calq__caffe_oom(c);
        return -1;
    }
    int v = calq__graph_value(c->g, name);
    free(name);
    if (v < 0 || grow_values(c) != 0) {
        calq__caffe_oom(c);
        return -1;
    }
    return v;
}

int calq__caffe_named_value(calq_caffe_ctx *c, const char *name)
{
    if (calq__graph_find(c->g, name) >= 0) {
        c->status = calq__fail(c->err, CALQ_ERR_INTERNAL, NULL, "tensor name '%s' is taken", name);
        return -1;
    }
    int v = calq__graph_value(c->g, name);
    if (v < 0 || grow_values(c) != 0) {
        calq__caffe_oom(c);
        return -1;
    }
    return v;
}

int calq__caffe_tmp(calq_caffe_ctx *c, const calq_caffe_layer *L, const char *what)
{
    return fresh_value(c, L->name, what, "");
}

int calq__caffe_top(calq_caffe_ctx *c, const calq_caffe_layer *L, int i)
{
    int bi = calq__caffe_map_get(&c->blob_index, L->top[i]);
    CALQ_ASSERT(bi >= 0);
    calq_caffe_blob *b = &c->blobs[bi];
    b->written++;
    int v;
    if (!b->input && b->written == b->writes && calq__graph_find(c->g, b->name) < 0) {
        v = calq__caffe_named_value(c, b->name);
        if (v < 0) return -1;
    } else {
        v = fresh_value(c, b->name, L->name, "_out");
        if (v < 0) return -1;
    }
    if (c->n_produced == c->cap_produced) {
        int cap = c->cap_produced ? c->cap_produced * 2 : 64;
        int *p = realloc(c->produced, sizeof *p * (size_t)cap);
        if (!p) {
            calq__caffe_oom(c);
            return -1;
        }
        c->produced = p;
        c->cap_produced = cap;
    }
    c->produced[c->n_produced++] = v;
    b->current = v;
    return v;
}

int calq__caffe_node(calq_caffe_ctx *c, const calq_caffe_layer *L, const char *op, const char *what, bool own,
                     const int *in, int n_in, const int *out, int n_out)
{
    size_t n = strlen(L->name) + (what ? strlen(what) + 1 : 0) + 1;
    char *name = malloc(n);
    if (!name) {
        calq__caffe_oom(c);
        return -1;
    }
    if (what)
        snprintf(name, n, "%s/%s", L->name, what);
    else
        snprintf(name, n, "%s", L->name);
    for (int k = 0; k < n_in; k++) CALQ_ASSERT(in[k] >= 0);
    int ni = calq__graph_add_node(c->g, name, op, "", in, n_in, out, n_out);
    free(name);
    if (ni < 0) {
        calq__caffe_oom(c);
        return -1;
    }
    c->g->nodes[ni].opset = 13;
    c->g->nodes[ni].src_index = own ? L->index : -1;
    return ni;
}

calq_status calq__caffe_attr_int(calq_caffe_ctx *c, int node, const char *name, int64_t v)
{
    calq_attr *a = calq__node_add_attr(c->g, node, name, CALQ_ATTR_INT);
    if (!a) return calq__caffe_oom(c);
    a->i = v;
    return CALQ_OK;
}

calq_status calq__caffe_attr_float(calq_caffe_ctx *c, int node, const char *name, float v)
{
    calq_attr *a = calq__node_add_attr(c->g, node, name, CALQ_ATTR_FLOAT);
    if (!a) return calq__caffe_oom(c);
    a->f = v;
    return CALQ_OK;
}

calq_status calq__caffe_attr_string(calq_caffe_ctx *c, int node, const char *name, const char *v)
{
    calq_attr *a = calq__node_add_attr(c->g, node, name, CALQ_ATTR_STRING);
    if (!a) return calq__caffe_oom(c);
    size_t n = strlen(v) + 1;
    a->s = malloc(n);
    if (!a->s) return calq__caffe_oom(c);
    memcpy(a->s, v, n);
    return CALQ_OK;
}

calq_status calq__caffe_attr_ints(calq_caffe_ctx *c, int node, const char *name, const int64_t *v, int n)
{
    calq_attr *a = calq__node_add_attr(c->g, node, name, CALQ_ATTR_INTS);
    if (!a) return calq__caffe_oom(c);
    a->ints = malloc(sizeof(int64_t) * (size_t)(n + 1));
    if (!a->ints) return calq__caffe_oom(c);
    if (n) memcpy(a->ints, v, sizeof(int64_t) * (size_t)n);
    a->n = n;
    return CALQ_OK;
}

calq_status calq__caffe_attr_floats(calq_caffe_ctx *c, int node, const char *name, const float *v, int n)
{
    calq_attr *a = calq__node_add_attr(c->g, node, name, CALQ_ATTR_FLOATS);
    if (!a) return calq__caffe_oom(c);
    a->floats = malloc(sizeof(float) * (size_t)(n + 1));
    if (!a->floats) return calq__caffe_oom(c);
    if (n) memcpy(a->floats, v, sizeof(float) * (size_t)n);
    a->n = n;
    return CALQ_OK;
}

static int add_const(calq_caffe_ctx *c, const calq_caffe_layer *L, const char *what, calq_dtype dt, const void *v,
                     const int64_t *dims, int ndim)
{
    int id = calq__caffe_tmp(c, L, what);
    if (id < 0) return -1;
    calq_tensor *t = calloc(1, sizeof *t);
    if (!t) {
        calq__caffe_oom(c);
        return -1;
    }
    t->dtype = dt;
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++) t->dims[d] = dims[d];
    if (calq__tensor_alloc(t, c->err) != CALQ_OK) {
        free(t);
        c->status = CALQ_ERR_OUT_OF_MEMORY;
        return -1;
    }
    size_t nbytes = calq__tensor_nbytes(t);
    if (nbytes) memcpy(t->data, v, nbytes);
    calq_value *val = &c->g->values[id];
    val->constant = t;
    val->dtype = dt;
    val->ndim = ndim;
    memcpy(val->dims, t->dims, sizeof t->dims);
    calq_caffe_shape *s = &c->shapes[id]; /* no value is created while s is in use */
    s->ndim = ndim;
    memcpy(s->dims, t->dims, sizeof t->dims);
    return id;
}

int calq__caffe_const_typed(calq_caffe_ctx *c, const calq_caffe_layer *L, const char *what, calq_dtype dt,
                            const void *v, const int64_t *dims, int ndim)
{
    return add_const(c, L, what, dt, v, dims, ndim);
}

int calq__caffe_const_f32(calq_caffe_ctx *c, const calq_caffe_layer *L, const char *what, const float *v,
                          const int64_t *dims, int ndim)
{
    return add_const(c, L, what, CALQ_DTYPE_FLOAT32, v, dims, ndim);
}

int calq__caffe_const_i64(calq_caffe_ctx *c, const calq_caffe_layer *L, const char *what, const int64_t *v, int n)
{
    int64_t dims[1] = {n};
    return add_const(c, L, what, CALQ_DTYPE_INT64, v, dims, 1);
}

int calq__caffe_const_scalar(calq_caffe_ctx *c, const calq_caffe_layer *L, const char *what, float v)
{
    return add_const(c, L, what, CALQ_DTYPE_FLOAT32, &v, NULL, 0);
}

int calq__caffe_unary(calq_caffe_ctx *c, const calq_caffe_layer *L, const char *op, const char *what, int x)
{
    int y = calq__caffe_tmp(c, L, what);
    if (y < 0 || calq__caffe_node(c, L, op, what, false, &x, 1, &y, 1) < 0) return -1;
    return y;
}

int calq__caffe_binary(calq_caffe_ctx *c, const calq_caffe_layer *L, const char *op, const char *what, int a, int b)
{
    int in[2] = {a, b};
    int y = calq__caffe_tmp(c, L, what);
    if (y < 0 || calq__caffe_node(c, L, op, what, false, in, 2, &y, 1) < 0) return -1;
    return y;
}

int calq__caffe_shape_slice(calq_caffe_ctx *c, const calq_caffe_layer *L, const char *what, int x, int from, int to)
{
    char name[256];
    snprintf(name, sizeof name, "%s_shape", what);
    int s = calq__caffe_unary(c, L, "Shape", name, x);
    if (s < 0) return -1;
    int64_t lo = from, hi = to, axis = 0;
    snprintf(name, sizeof name, "%s_from", what);
    int vlo = calq__caffe_const_i64(c, L, name, &lo, 1);
    snprintf(name, sizeof name, "%s_to", what);
    int vhi = calq__caffe_const_i64(c, L, name, &hi, 1);
    snprintf(name, sizeof name, "%s_axes", what);
    int vax = calq__caffe_const_i64(c, L, name, &axis, 1);
    int y = calq__caffe_tmp(c, L, what);
    if (vlo < 0 || vhi < 0 || vax < 0 || y < 0) return -1;
    int in[4] = {s, vlo, vhi, vax};
    if (calq__caffe_node(c, L, "Slice", what, false, in, 4, &y, 1) < 0) return -1;
    return y;
}
