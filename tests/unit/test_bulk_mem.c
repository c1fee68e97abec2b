/* Bulk memory (base/bulk_mem.h) and where the executor uses it:
 *   - any size gives zeroed, writable, aligned memory; below 2 MB from the heap, from 2 MB on
 *     mapped and (when the kernel has free huge pages) on transparent huge pages, which writing
 *     faults in a few pages at a time instead of one fault per 4 KB;
 *   - a plan's arena and the weights a convolution converts in prepare (direct and Winograd
 *     kernels) are such memory: building the plan of a network with 9 MB of 3x3 weights and
 *     running it once takes a few hundred page faults, not the ~2300 per copy of 4 KB pages
 *     (about 9 us each on this project's VMs, some 70 ms of a ResNet-18 session's first run).
 * The fault counts are checked only where huge pages are available (a 16 MB block comes back
 * huge); the rest everywhere. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "base/bulk_mem.h"
#include "exec/plan.h"
#include "expect.h"
#include "graph/graph.h"
#include "graph_build.h"
#include "op_harness.h"

static long minor_faults(void)
{
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return r.ru_minflt;
}

static bool all_zero(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i]) return false;
    return true;
}

static void test_sizes(void)
{
    const size_t sizes[] = {0, 1, 100, 4096, ((size_t)2 << 20) - 1, (size_t)2 << 20, ((size_t)5 << 20) + 7};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        calq__bulk b;
        EXPECT(calq__bulk_alloc_any(sizes[i], &b));
        EXPECT(b.base != NULL && b.size >= sizes[i]);
        EXPECT((uintptr_t)b.base % 64 == 0);
        EXPECT(b.heap == (sizes[i] < ((size_t)2 << 20)));
        if (b.huge) EXPECT((uintptr_t)b.base % ((size_t)2 << 20) == 0);
        if (!b.heap) EXPECT(all_zero(b.base, b.size)); /* fresh anonymous memory */
        memset(b.base, 0x5a, sizes[i]);
        calq__bulk_free(&b);
        EXPECT(b.base == NULL && b.map == NULL && !b.heap);
    }
}

/* Whether this machine gives huge pages now; when it does, writing 16 MB faults a handful of
 * times. */
static bool huge_pages_here(void)
{
    calq__bulk b;
    if (!calq__bulk_alloc((size_t)16 << 20, &b)) return false;
    const bool huge = b.huge;
    long f0 = minor_faults();
    memset(b.base, 1, b.size);
    long faults = minor_faults() - f0;
    /* populated when mapped: nothing left to fault but, under AddressSanitizer, its shadow memory
     * (an eighth of the size, 512 pages); 4 KB pages faulted on writing would be 4096 */
    if (huge) EXPECT(faults < 1024);
    calq__bulk_free(&b);
    return huge;
}

/* Two 512-channel 3x3 convolutions (9 MB of weights each) on a 6x6 map (the direct kernel's
 * weights: from 7x7 up such layers take Winograd, whose weight conversion goes through oneDNN's
 * own reorder buffers, ~700 more faults here), and a 3x3 convolution on 64 channels at 112x112
 * for an arena above 2 MB. */
static calq_graph *heavy_graph(void)
{
    gb b = gb_new();
    int64_t xd[4] = {1, 64, 112, 112}, yd[4] = {1, 512, 6, 6};
    int x = gb_input(&b, "x", xd, 4), y = gb_input(&b, "y", yd, 4);
    int64_t w64[4] = {64, 64, 3, 3}, w512[4] = {512, 512, 3, 3};
    int64_t pads[4] = {1, 1, 1, 1};
    int ins[2] = {x, gb_const(&b, "w0", w64, 4, -0.05f, 0.05f)};
    int a = gb_node(&b, "c0", "Conv", ins, 2);
    gb_ints(&b, "pads", pads, 4);
    gb_output(&b, gb_unary(&b, "r0", "Relu", a));
    int v = y;
    for (int i = 0; i < 2; i++) {
        char wn[16], cn[16];
        snprintf(wn, sizeof wn, "w%d", i + 1);
        snprintf(cn, sizeof cn, "c%d", i + 1);
        int in2[2] = {v, gb_const(&b, wn, w512, 4, -0.02f, 0.02f)};
        v = gb_node(&b, cn, "Conv", in2, 2);
        gb_ints(&b, "pads", pads, 4);
    }
    gb_output(&b, v);
    b.g->opset = 13;
    calq_error err = {0};
    EXPECT(calq__graph_toposort(b.g, &err) == CALQ_OK);
    return b.g;
}

static void test_plan_faults(bool huge)
{
    calq_graph *g = heavy_graph();
    int64_t xd[4] = {1, 64, 112, 112}, yd[4] = {1, 512, 6, 6};
    calq_tensor in[2] = {t_rand_f32(3, 4, xd, -1, 1), t_rand_f32(4, 4, yd, -1, 1)};
    calq_plan_opts o = {.use_fast = true, .fuse = true};
    calq_error err = {0};
    calq_plan *p = NULL;
    /* once for oneDNN's kernel generation and caches, then measured */
    EXPECT(calq__plan_build_opts(g, in, 2, &o, &p, &err) == CALQ_OK);
    calq__plan_free(p);
    p = NULL;
    long f0 = minor_faults();
    EXPECT(calq__plan_build_opts(g, in, 2, &o, &p, &err) == CALQ_OK);
    const long faults = minor_faults() - f0;
    if (p) {
        EXPECT(p->arena_bytes > ((size_t)2 << 20));
        EXPECT(!p->arena_mem.heap && p->arena_mem.size >= p->arena_bytes);
        if (huge) EXPECT(p->arena_mem.huge);
    }
    /* 2 x 9.4 MB of converted weights and a 3.2 MB arena are ~5400 pages of 4 KB */
    printf("plan build: %ld minor faults (huge pages %s)\n", faults, huge ? "available" : "not available");
    if (huge) EXPECT(faults < 1500);
    calq__plan_free(p);
    t_free_all(in, 2);
    calq__graph_free(g);
}

int main(void)
{
    test_sizes();
    const bool huge = huge_pages_here();
    test_plan_faults(huge);
    return TEST_RESULT();
}
