#include "exec/kernels/dnnl_common.h"

#include <pthread.h>

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

dnnl_status_t calq__dnnl_plain_md(dnnl_memory_desc_t *md, const int64_t *dims, int ndim)
{
    static const dnnl_format_tag_t tags[] = {dnnl_a, dnnl_a, dnnl_ab, dnnl_abc, dnnl_abcd, dnnl_abcde, dnnl_abcdef};
    if (ndim < 1 || ndim > 6) return dnnl_invalid_arguments;
    return dnnl_memory_desc_init_by_tag(md, ndim, dims, dnnl_f32, tags[ndim]);
}
