#include "exec/kernels/dnnl_common.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static dnnl_engine_t engine;
static pthread_once_t engine_once = PTHREAD_ONCE_INIT;

static void engine_init(void)
{
    if (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success) engine = NULL;
}

dnnl_engine_t calq__dnnl_engine(void)
{
    pthread_once(&engine_once, engine_init);
    return engine;
}

calq_status calq__dnnl_check(calq_op_ctx *c, dnnl_status_t s, const char *what)
{
    return calq__op_fail(c, CALQ_ERR_INTERNAL, "oneDNN call failed (status %d): %s", (int)s, what);
}

dnnl_status_t calq__dnnl_memory_bulk(dnnl_memory_t *m, const dnnl_memory_desc_t *md, calq__bulk *buf)
{
    *m = NULL;
    if (!calq__bulk_alloc_any(dnnl_memory_desc_get_size(md), buf)) return dnnl_out_of_memory;
    dnnl_status_t ds = dnnl_memory_create(m, md, calq__dnnl_engine(), buf->base);
    if (ds != dnnl_success) calq__bulk_free(buf);
    return ds;
}

dnnl_status_t calq__dnnl_reorder(dnnl_primitive_t *r, const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to)
{
    dnnl_engine_t eng = calq__dnnl_engine();
    dnnl_primitive_desc_t rpd;
    dnnl_status_t ds = dnnl_reorder_primitive_desc_create(&rpd, from, eng, to, eng, NULL);
    if (ds != dnnl_success) return ds;
    ds = dnnl_primitive_create(r, rpd);
    dnnl_primitive_desc_destroy(rpd);
    return ds;
}

/* A primitive with one source and one destination (softmax, pooling, reduction) and what each
 * run needs: its stream and the two memories whose data handles a run sets. Owner: the op's
 * state (c->state); `serial` (chosen from the shape) runs it on the calling thread. */
typedef struct calq_dnnl_unary {
    dnnl_primitive_t prim;
    dnnl_stream_t stream;
    dnnl_memory_t src, dst;
    bool serial;
} calq_dnnl_unary;

static void unary_fini(calq_dnnl_unary *u)
{
    if (u->src) dnnl_memory_destroy(u->src);
    if (u->dst) dnnl_memory_destroy(u->dst);
    if (u->stream) dnnl_stream_destroy(u->stream);
    if (u->prim) dnnl_primitive_destroy(u->prim);
}

static dnnl_status_t unary_init(calq_dnnl_unary *u, const_dnnl_op_desc_t desc, bool jit_only, dnnl_engine_t eng)
{
    dnnl_primitive_desc_t pd;
    dnnl_status_t s = dnnl_primitive_desc_create(&pd, desc, NULL, eng, NULL);
    if (s != dnnl_success) return s;
    const char *impl = NULL;
    if (jit_only && (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl ||
                     strncmp(impl, "jit", 3) != 0))
        s = dnnl_unimplemented;
    const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *dmd = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    if (s == dnnl_success && (!smd || !dmd)) s = dnnl_unimplemented;
    if (s == dnnl_success) s = dnnl_primitive_create(&u->prim, pd);
    if (s == dnnl_success) s = dnnl_stream_create(&u->stream, eng, dnnl_stream_default_flags);
    if (s == dnnl_success) s = dnnl_memory_create(&u->src, smd, eng, DNNL_MEMORY_NONE);
    if (s == dnnl_success) s = dnnl_memory_create(&u->dst, dmd, eng, DNNL_MEMORY_NONE);
    dnnl_primitive_desc_destroy(pd);
    return s;
}

calq_status calq__dnnl_unary_prepare(calq_op_ctx *c, const_dnnl_op_desc_t desc, bool serial, bool jit_only)
{
    c->state = NULL;
    dnnl_engine_t eng = calq__dnnl_engine();
    if (!eng) return CALQ_OK;
    calq_dnnl_unary *u = calloc(1, sizeof *u);
    if (!u) return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory for the oneDNN state");
    u->serial = serial;
    int prev = calq__dnnl_serial_begin(serial);
    dnnl_status_t s = unary_init(u, desc, jit_only, eng);
    calq__dnnl_serial_end(serial, prev);
    if (s != dnnl_success) {
        calq__dnnl_unary_release(u);
        return CALQ_OK;
    }
    c->state = u;
    return CALQ_OK;
}

calq_status calq__dnnl_unary_run(calq_op_ctx *c)
{
    const calq_dnnl_unary *u = c->state;
    CALQ_DNNL(c, dnnl_memory_set_data_handle(u->src, c->in[0]->data));
    CALQ_DNNL(c, dnnl_memory_set_data_handle(u->dst, c->out[0]->data));
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_SRC, u->src}, {DNNL_ARG_DST, u->dst}};
    int prev = calq__dnnl_serial_begin(u->serial);
    dnnl_status_t s = dnnl_primitive_execute(u->prim, u->stream, 2, args);
    if (s == dnnl_success) s = dnnl_stream_wait(u->stream);
    calq__dnnl_serial_end(u->serial, prev);
    CALQ_DNNL(c, s);
    return CALQ_OK;
}

void calq__dnnl_unary_release(void *state)
{
    if (!state) return;
    unary_fini(state);
    free(state);
}

dnnl_status_t calq__dnnl_plain_md(dnnl_memory_desc_t *md, const int64_t *dims, int ndim)
{
    static const dnnl_format_tag_t tags[] = {dnnl_a, dnnl_a, dnnl_ab, dnnl_abc, dnnl_abcd, dnnl_abcde, dnnl_abcdef};
    if (ndim < 1 || ndim > 6) return dnnl_invalid_arguments;
    return dnnl_memory_desc_init_by_tag(md, ndim, dims, dnnl_f32, tags[ndim]);
}

typedef struct scratch_buf {
    void *p;
    size_t n;
} scratch_buf;

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static bool scratch_ok;

static void scratch_free(void *v)
{
    scratch_buf *b = v;
    for (int i = 0; i < CALQ_SCRATCH_SLOTS; i++) free(b[i].p);
    free(b);
}

static void scratch_init(void)
{
    scratch_ok = pthread_key_create(&scratch_key, scratch_free) == 0;
}

void *calq__dnnl_scratch(calq_dnnl_scratch_slot slot, size_t n)
{
    pthread_once(&scratch_once, scratch_init);
    if (!scratch_ok || slot < 0 || slot >= CALQ_SCRATCH_SLOTS) return NULL;
    scratch_buf *all = pthread_getspecific(scratch_key); /* owner: the thread (scratch_free at its exit) */
    if (!all) {
        all = calloc(CALQ_SCRATCH_SLOTS, sizeof *all);
        if (!all) return NULL;
        if (pthread_setspecific(scratch_key, all) != 0) {
            free(all);
            return NULL;
        }
    }
    scratch_buf *b = &all[slot];
    if (b->n < n) {
        free(b->p);
        b->p = NULL;
        b->n = 0;
        if (posix_memalign(&b->p, 64, n ? n : 1) != 0) {
            b->p = NULL;
            return NULL;
        }
        b->n = n;
    }
    return b->p;
}
