#include "exec/kernels/gemm_dnnl.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "exec/kernels/dnnl_common.h"
#include "exec/kernels/exact_recip.h"

/* Blocking targets. Enough blocks to share a product among a few cores, but blocks big
 * enough that per-block overhead stays small: each block is its own oneDNN gemm call, which
 * packs its slice of A again, and its slice of B unless B is constant (then packed once per
 * column block at plan time, where AVX-512's brgemm matmul takes a packed layout). Measured on
 * the bench zoo's ViT (2 threads, 196x192 activations): 64 blocks of at least 2^16
 * multiply-adds took 1.67x onnxruntime's time, 8 blocks of at least 2^20 1.38x, 4 blocks 1.35x.
 * These only depend on the shape, never on the thread count, which keeps results stable. */
enum { MM_TARGET_BLOCKS = 8, MM_MIN_BLOCK_WORK = 1 << 20 };

/* A block is (rows x cols) of one batch; the last row/column block may be shorter, so at most
 * four distinct block shapes exist: index (short rows) * 2 + (short cols). */
enum { MM_SHAPES = 4, MM_NARGS = 4 };

struct calq_mm_dnnl {
    calq_mm_desc d;
    int64_t mb, nb;             /* block rows / cols */
    int64_t m_blocks, n_blocks; /* blocks per matrix */
    int64_t batch, n_tasks;
    dnnl_primitive_t prim[MM_SHAPES];
    dnnl_memory_desc_t md[MM_SHAPES][MM_NARGS]; /* src, weights, dst, scratchpad */
    size_t scratch_bytes;                       /* largest scratchpad over the shapes */
    /* d.b_const packed: column block j's B at bpack.base + j * pack_bytes (the last block's may
     * be shorter), in md[s][1]'s layout */
    bool packed;
    calq__bulk bpack;
    size_t pack_bytes;
};

static const int mm_arg_ids[MM_NARGS] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_SCRATCHPAD};

/* The binary post-ops on a rows x cols block of Y at column n0 (row stride N), right after its
 * product while it is in cache: each one float32 operation, as the separate layers round it.
 * (oneDNN's own binary post-ops are refused by its gemm:jit matmul on column blocks.) */
#if defined(__x86_64__) && defined(__GNUC__)
/* cloned per instruction set (the build targets baseline x86-64, whose SSE divides 4 floats at a
 * time; AVX-512 16): the operations are IEEE float32 ones (no contraction in C11 mode), so
 * every clone gives the same bits */
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
static void
apply_bins(const calq_mm_desc *d, const float *const *bin, float *y, int64_t rows, int64_t cols, int64_t n0)
{
    for (int i = 0; i < d->n_bin; i++) {
        const float *o = bin[i] + (d->bin_per_col[i] ? n0 : 0);
        /* dividing by a power of two is multiplying by its exact reciprocal: the same real
         * result, so the same rounding (attention's 1 / sqrt(d) for d = 4^k); a divide costs
         * about 16 times a multiply here */
        const float recip = d->bin_op[i] == CALQ_MM_DIV && !d->bin_per_col[i] ? calq__exact_recip(o[0]) : 0.0f;
        for (int64_t r = 0; r < rows; r++) {
            float *yr = y + r * d->N;
            const calq_mm_bin op = d->bin_op[i];
            if (d->bin_per_col[i] && op == CALQ_MM_MUL)
                for (int64_t j = 0; j < cols; j++) yr[j] = yr[j] * o[j];
            else if (d->bin_per_col[i] && op == CALQ_MM_DIV)
                for (int64_t j = 0; j < cols; j++) yr[j] = yr[j] / o[j];
            else if (d->bin_per_col[i])
                for (int64_t j = 0; j < cols; j++) yr[j] = yr[j] + o[j];
            else if (op == CALQ_MM_MUL)
                for (int64_t j = 0; j < cols; j++) yr[j] = yr[j] * o[0];
            else if (op == CALQ_MM_DIV && recip != 0.0f)
                for (int64_t j = 0; j < cols; j++) yr[j] = yr[j] * recip;
            else if (op == CALQ_MM_DIV)
                for (int64_t j = 0; j < cols; j++) yr[j] = yr[j] / o[0];
            else
                for (int64_t j = 0; j < cols; j++) yr[j] = yr[j] + o[0];
        }
    }
}

static int64_t ceil_div(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}
static int64_t round_up(int64_t a, int64_t m)
{
    return ceil_div(a, m) * m;
}

static void pick_blocks(calq_mm_dnnl *p)
{
    const calq_mm_desc *d = &p->d;
    int64_t mb = d->M, nb = d->N;
    for (;;) {
        int64_t blocks = p->batch * ceil_div(d->M, mb) * ceil_div(d->N, nb);
        if (blocks >= MM_TARGET_BLOCKS || mb * nb * d->K < 2 * MM_MIN_BLOCK_WORK) break;
        /* Prefer splitting columns: row blocks each re-pack the whole of B's slice, column
         * blocks read disjoint parts of B. Multiples of 32 columns / 8 rows keep the
         * kernels' vector tiles full. */
        if (nb >= 128 && nb >= mb)
            nb = round_up(ceil_div(nb, 2), 32);
        else if (mb >= 32)
            mb = round_up(ceil_div(mb, 2), 8);
        else if (nb >= 64)
            nb = round_up(ceil_div(nb, 2), 32);
        else
            break;
    }
    p->mb = mb;
    p->nb = nb;
    p->m_blocks = ceil_div(d->M, mb);
    p->n_blocks = ceil_div(d->N, nb);
    p->n_tasks = p->batch * p->m_blocks * p->n_blocks;
}

/* Creates the primitive for a rows x cols block. Returns dnnl_unimplemented when oneDNN
 * would only offer its slow reference implementation. */
static dnnl_status_t make_prim(calq_mm_dnnl *p, int s, int64_t rows, int64_t cols, bool packed)
{
    const calq_mm_desc *d = &p->d;
    dnnl_dims_t src_dims = {rows, d->K}, wei_dims = {d->K, cols}, dst_dims = {rows, cols};
    dnnl_dims_t src_str = {d->K, 1}, wei_str = {d->N, 1}, dst_str = {d->N, 1};
    if (d->trans_a) {
        src_str[0] = 1;
        src_str[1] = d->M;
    }
    if (d->trans_b) {
        wei_str[0] = 1;
        wei_str[1] = d->K;
    }
    dnnl_status_t st = dnnl_memory_desc_init_by_strides(&p->md[s][0], 2, src_dims, dnnl_f32, src_str);
    if (st == dnnl_success)
        st = packed ? dnnl_memory_desc_init_by_tag(&p->md[s][1], 2, wei_dims, dnnl_f32, dnnl_format_tag_any)
                    : dnnl_memory_desc_init_by_strides(&p->md[s][1], 2, wei_dims, dnnl_f32, wei_str);
    if (st == dnnl_success) st = dnnl_memory_desc_init_by_strides(&p->md[s][2], 2, dst_dims, dnnl_f32, dst_str);
    if (st != dnnl_success) return st;

    dnnl_matmul_desc_t md;
    st = dnnl_matmul_desc_init(&md, &p->md[s][0], &p->md[s][1], NULL, &p->md[s][2]);
    if (st != dnnl_success) return st;

    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t ops = NULL;
    dnnl_primitive_desc_t pd = NULL;
    st = dnnl_primitive_attr_create(&attr);
    /* User scratchpads: blocks run concurrently, and the library-managed scratchpad is shared
     * between executions. */
    if (st == dnnl_success) st = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    if (st == dnnl_success && d->alpha != 1.0f) st = dnnl_primitive_attr_set_output_scales(attr, 1, 0, &d->alpha);
    if (st == dnnl_success && d->accumulate) {
        st = dnnl_post_ops_create(&ops);
        if (st == dnnl_success) st = dnnl_post_ops_append_sum(ops, d->beta);
        if (st == dnnl_success) st = dnnl_primitive_attr_set_post_ops(attr, ops);
    }
    if (st == dnnl_success) st = dnnl_primitive_desc_create(&pd, &md, attr, calq__dnnl_engine(), NULL);
    if (st == dnnl_success) {
        const char *impl = NULL;
        if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl &&
            strncmp(impl, "ref", 3) == 0) {
            /* oneDNN's reference matmul is far slower than calq's own kernel. */
            st = dnnl_unimplemented;
        }
    }
    if (st == dnnl_success && packed) {
        const dnnl_memory_desc_t *wm = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
        if (wm)
            p->md[s][1] = *wm;
        else
            st = dnnl_unimplemented;
    }
    if (st == dnnl_success) {
        const dnnl_memory_desc_t *sp = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
        if (sp) {
            p->md[s][3] = *sp;
            size_t n = dnnl_memory_desc_get_size(sp);
            if (n > p->scratch_bytes) p->scratch_bytes = n;
        }
        st = dnnl_primitive_create(&p->prim[s], pd);
    }
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (ops) dnnl_post_ops_destroy(ops);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return st;
}

static void destroy_prims(calq_mm_dnnl *p)
{
    for (int s = 0; s < MM_SHAPES; s++) {
        if (p->prim[s]) dnnl_primitive_destroy(p->prim[s]);
        p->prim[s] = NULL;
    }
    p->scratch_bytes = 0;
}

void calq__mm_dnnl_free(calq_mm_dnnl *p)
{
    if (!p) return;
    destroy_prims(p);
    calq__bulk_free(&p->bpack);
    free(p);
}

bool calq__mm_dnnl_packed(const calq_mm_dnnl *p)
{
    return p && p->packed;
}

/* Whether the packed plan is worth keeping: every shape of the same column count takes B in one
 * layout (so a block's packed B serves every row block), and that layout is not B's own. The
 * shapes were made (prim[0] always is). */
static bool packing_usable(const calq_mm_dnnl *p)
{
    const calq_mm_desc *d = &p->d;
    dnnl_memory_desc_t plain;
    dnnl_dims_t wd = {d->K, p->nb}, ws = {d->trans_b ? 1 : d->N, d->trans_b ? d->K : 1};
    if (dnnl_memory_desc_init_by_strides(&plain, 2, wd, dnnl_f32, ws) != dnnl_success) return false;
    for (int s = 0; s < MM_SHAPES; s++) {
        if (!p->prim[s]) continue;
        const int first = s & 1; /* the shape with full rows and the same columns */
        if (!p->prim[first] || !dnnl_memory_desc_equal(&p->md[s][1], &p->md[first][1])) return false;
    }
    /* nor when padding the columns to the kernel's block would take far more memory than B (a
     * tall, narrow B: 3 columns padded to 64) */
    const size_t b_bytes = (size_t)d->K * (size_t)d->N * sizeof(float);
    const size_t packed = (size_t)p->n_blocks * dnnl_memory_desc_get_size(&p->md[0][1]);
    return packed <= 2 * b_bytes + ((size_t)64 << 10) && !dnnl_memory_desc_equal(&p->md[0][1], &plain);
}

/* Converts d.b_const into each column block's packed layout (p->bpack). */
static dnnl_status_t pack_b(calq_mm_dnnl *p)
{
    const calq_mm_desc *d = &p->d;
    const int64_t last_cols = d->N - (p->n_blocks - 1) * p->nb;
    const int last_s = last_cols == p->nb ? 0 : 1;
    p->pack_bytes = dnnl_memory_desc_get_size(&p->md[0][1]);
    const size_t total = (size_t)(p->n_blocks - 1) * p->pack_bytes + dnnl_memory_desc_get_size(&p->md[last_s][1]);
    if (!calq__bulk_alloc_any(total, &p->bpack)) return dnnl_out_of_memory;
    dnnl_engine_t eng = calq__dnnl_engine();
    dnnl_stream_t stream = NULL;
    dnnl_status_t st = dnnl_stream_create(&stream, eng, dnnl_stream_default_flags);
    for (int64_t j = 0; j < p->n_blocks && st == dnnl_success; j++) {
        const int64_t n0 = j * p->nb, cols = j + 1 < p->n_blocks ? p->nb : last_cols;
        const int s = j + 1 < p->n_blocks ? 0 : last_s;
        dnnl_memory_desc_t user;
        dnnl_dims_t wd = {d->K, cols}, ws = {d->trans_b ? 1 : d->N, d->trans_b ? d->K : 1};
        dnnl_primitive_t r = NULL;
        dnnl_memory_t from = NULL, to = NULL;
        st = dnnl_memory_desc_init_by_strides(&user, 2, wd, dnnl_f32, ws);
        if (st == dnnl_success)
            st = dnnl_memory_create(&from, &user, eng, (void *)(d->b_const + (d->trans_b ? n0 * d->K : n0)));
        if (st == dnnl_success)
            st = dnnl_memory_create(&to, &p->md[s][1], eng, p->bpack.base + (size_t)j * p->pack_bytes);
        if (st == dnnl_success) st = calq__dnnl_reorder(&r, &user, &p->md[s][1]);
        if (st == dnnl_success) {
            dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
            st = dnnl_primitive_execute(r, stream, 2, args);
        }
        if (st == dnnl_success) st = dnnl_stream_wait(stream);
        if (r) dnnl_primitive_destroy(r);
        if (from) dnnl_memory_destroy(from);
        if (to) dnnl_memory_destroy(to);
    }
    if (stream) dnnl_stream_destroy(stream);
    return st;
}

calq_status calq__mm_dnnl_create(calq_op_ctx *c, const calq_mm_desc *d, calq_mm_dnnl **out)
{
    *out = NULL;
    if (!calq__dnnl_engine() || d->M <= 0 || d->N <= 0 || d->K <= 0) return CALQ_OK;
    calq_mm_dnnl *p = calloc(1, sizeof *p);
    if (!p) return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory for the oneDNN plan");
    p->d = *d;
    p->batch = 1;
    for (int i = 0; i < d->nb; i++) p->batch *= d->bdims[i];
    if (p->batch <= 0) {
        free(p);
        return CALQ_OK;
    }
    pick_blocks(p);

    int64_t rows[2] = {p->mb, d->M - (p->m_blocks - 1) * p->mb};
    int64_t cols[2] = {p->nb, d->N - (p->n_blocks - 1) * p->nb};
    /* Each block runs on one thread, so plan it for one thread: oneDNN sizes its work split
     * (and so its summation order) from the thread count seen at creation. */
    int prev_threads = omp_get_max_threads();
    omp_set_num_threads(1);
    dnnl_status_t st = dnnl_success;
    /* packed B first where it is constant; the plain plan when oneDNN keeps B as it is or packs
     * it differently per row-block shape */
    for (int attempt = d->b_const ? 0 : 1; attempt < 2; attempt++) {
        const bool packed = attempt == 0;
        st = dnnl_success;
        for (int s = 0; s < MM_SHAPES && st == dnnl_success; s++) {
            int short_rows = s >> 1, short_cols = s & 1;
            if ((short_rows && rows[1] == rows[0]) || (short_cols && cols[1] == cols[0])) continue;
            st = make_prim(p, s, rows[short_rows], cols[short_cols], packed);
        }
        if (!packed) break; /* the plain plan, or st says why not */
        if (st == dnnl_success && packing_usable(p) && (st = pack_b(p)) == dnnl_success) {
            p->packed = true;
            break;
        }
        calq__bulk_free(&p->bpack);
        destroy_prims(p);
    }
    omp_set_num_threads(prev_threads);
    if (st != dnnl_success) {
        calq__log(CALQ_LOG_DEBUG, "%s '%s': oneDNN matmul unavailable (status %d), using the reference kernel",
                  c->node->op_type, c->node->name, (int)st);
        calq__mm_dnnl_free(p);
        return CALQ_OK;
    }
    *out = p;
    return CALQ_OK;
}

calq_status calq__mm_dnnl_run(calq_op_ctx *c, const calq_mm_dnnl *p, const float *a, const float *b,
                              const float *const *bin, float *y)
{
    const calq_mm_desc *d = &p->d;
    dnnl_engine_t eng = calq__dnnl_engine();
    int fail = 0;
    dnnl_status_t fail_status = dnnl_success;
    int nthr = omp_get_max_threads();
    if (nthr > p->n_tasks) nthr = (int)p->n_tasks;
    /* a small product on the calling thread: waking another costs more (dnnl_common.h); the
     * blocks, and so the sums, are the same either way */
    if (p->batch * d->M * d->N * d->K < CALQ_DNNL_SERIAL_WORK) nthr = 1;
    size_t scratch_bytes = round_up((int64_t)(p->scratch_bytes ? p->scratch_bytes : 64), 64);

#pragma omp parallel num_threads(nthr)
    {
        /* oneDNN reads the thread count from OpenMP: inside this team it must see one thread
         * so that each block is computed by the single-threaded plan. */
        omp_set_num_threads(1);
        dnnl_stream_t stream = NULL;
        dnnl_memory_t mem[MM_SHAPES][MM_NARGS] = {{NULL}};
        void *scratch = aligned_alloc(64, scratch_bytes);
        dnnl_status_t st = scratch ? dnnl_stream_create(&stream, eng, dnnl_stream_default_flags) : dnnl_out_of_memory;

#pragma omp for schedule(static)
        for (int64_t t = 0; t < p->n_tasks; t++) {
            int failed;
#pragma omp atomic read
            failed = fail;
            if (failed || st != dnnl_success) continue;
            int64_t per_batch = p->m_blocks * p->n_blocks;
            int64_t bi = t / per_batch, mi = (t % per_batch) / p->n_blocks, ni = t % p->n_blocks;
            int64_t aoff = 0, boff = 0, rem = bi;
            for (int k = d->nb - 1; k >= 0; k--) {
                int64_t idx = rem % d->bdims[k];
                rem /= d->bdims[k];
                aoff += idx * d->a_bs[k];
                boff += idx * d->b_bs[k];
            }
            int64_t m0 = mi * p->mb, n0 = ni * p->nb;
            int s = (m0 + p->mb > d->M && d->M % p->mb ? 2 : 0) + (n0 + p->nb > d->N && d->N % p->nb ? 1 : 0);
            aoff += d->trans_a ? m0 : m0 * d->K;
            boff += d->trans_b ? n0 * d->K : n0;
            void *bh = p->packed ? (void *)(p->bpack.base + (size_t)ni * p->pack_bytes) : (void *)(b + boff);
            void *handles[MM_NARGS] = {(void *)(a + aoff), bh, y + bi * d->M * d->N + m0 * d->N + n0, scratch};
            dnnl_exec_arg_t args[MM_NARGS];
            for (int k = 0; k < MM_NARGS && st == dnnl_success; k++) {
                if (!mem[s][k]) st = dnnl_memory_create(&mem[s][k], &p->md[s][k], eng, DNNL_MEMORY_NONE);
                if (st == dnnl_success) st = dnnl_memory_set_data_handle(mem[s][k], handles[k]);
                args[k].arg = mm_arg_ids[k];
                args[k].memory = mem[s][k];
            }
            if (st == dnnl_success) st = dnnl_primitive_execute(p->prim[s], stream, MM_NARGS, args);
            if (st == dnnl_success && d->n_bin > 0) st = dnnl_stream_wait(stream);
            if (st == dnnl_success && d->n_bin > 0)
                apply_bins(d, bin, handles[2], (s & 2) ? d->M - m0 : p->mb, (s & 1) ? d->N - n0 : p->nb, n0);
            if (st != dnnl_success) {
#pragma omp critical(calq_mm_dnnl_fail)
                {
                    if (!fail) fail_status = st;
                    fail = 1;
                }
            }
        }
        if (stream) {
            dnnl_stream_wait(stream);
            dnnl_stream_destroy(stream);
        }
        for (int s = 0; s < MM_SHAPES; s++)
            for (int k = 0; k < MM_NARGS; k++)
                if (mem[s][k]) dnnl_memory_destroy(mem[s][k]);
        free(scratch);
        if (st != dnnl_success) {
#pragma omp critical(calq_mm_dnnl_fail)
            {
                if (!fail) fail_status = st;
                fail = 1;
            }
        }
    }
    if (fail) return calq__dnnl_check(c, fail_status, "matmul execution");
    return CALQ_OK;
}
