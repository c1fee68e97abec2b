/* Bulk memory on huge pages when the kernel has them free (bulk_mem.h). */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS, madvise */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/bulk_mem.h"

#define HUGE_BYTES ((size_t)2 << 20) /* a PMD-mapped transparent huge page on x86-64 */

/* Bytes free in blocks of HUGE_BYTES or more (every zone of /proc/buddyinfo), 0 when unknown:
 * what huge-page faults can take without compacting memory. */
static uint64_t free_huge_bytes(void)
{
    FILE *f = fopen("/proc/buddyinfo", "r");
    if (!f) return 0;
    long page = sysconf(_SC_PAGESIZE);
    uint64_t total = 0;
    char line[512];
    while (page > 0 && fgets(line, sizeof line, f)) {
        char *p = strstr(line, "zone");
        if (!p) continue;
        p += 4;
        while (*p == ' ') p++;
        while (*p && *p != ' ') p++; /* the zone's name */
        for (int order = 0; order < 40; order++) {
            char *end = NULL;
            unsigned long long n = strtoull(p, &end, 10);
            if (end == p) break;
            p = end;
            uint64_t block = (uint64_t)page << order;
            if (block >= HUGE_BYTES) total += n * block;
        }
    }
    fclose(f);
    return total;
}

/* Faults in [p, p + n) for writing, one call for the range when the kernel can (5.14+). */
static void populate(char *p, size_t n)
{
#ifdef MADV_POPULATE_WRITE
    if (madvise(p, n, MADV_POPULATE_WRITE) == 0) return;
    if (errno != EINVAL) return; /* out of memory: left to fault lazily, as MAP_POPULATE would */
#endif
    long page = sysconf(_SC_PAGESIZE);
    size_t step = page > 0 ? (size_t)page : 4096;
    for (size_t i = 0; i < n; i += step) p[i] = 0; /* zero already: a write only faults it in */
}

bool calq__bulk_alloc(size_t size, calq__bulk *b)
{
    return calq__bulk_alloc_threads(size, 1, b);
}

bool calq__bulk_alloc_threads(size_t size, int n_threads, calq__bulk *b)
{
    memset(b, 0, sizeof *b);
    size_t page = 4096;
    size = (size + page - 1) / page * page;
    if (!size) size = page;
    bool huge = false;
#ifdef MADV_HUGEPAGE
    /* twice the block free: other processes' faults and ours still find free blocks */
    huge = size >= HUGE_BYTES && free_huge_bytes() / 2 >= size;
#endif
    size_t map_size = huge ? size + HUGE_BYTES : size; /* room to align to a huge page */
    void *map = mmap(NULL, map_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) return false;
    char *base = map;
    if (huge) {
        base = (char *)(((uintptr_t)map + HUGE_BYTES - 1) & ~(uintptr_t)(HUGE_BYTES - 1));
#ifdef MADV_HUGEPAGE
        /* whole huge pages only: the memory stays within size (the tail is 4 KB pages) */
        size_t whole = size / HUGE_BYTES * HUGE_BYTES;
        if (madvise(base, whole, MADV_HUGEPAGE) != 0) huge = false;
#endif
    }
    /* on several threads in huge-page steps: each step's faults (zeroing, and on a VM the host
     * backing the page) are independent */
    const long steps = (long)((size + HUGE_BYTES - 1) / HUGE_BYTES);
#pragma omp parallel for schedule(static) num_threads(n_threads > 0 ? n_threads : 1) if (n_threads > 1 && steps > 1)
    for (long k = 0; k < steps; k++) {
        size_t o = (size_t)k * HUGE_BYTES;
        populate(base + o, size - o < HUGE_BYTES ? size - o : HUGE_BYTES);
    }
    *b = (calq__bulk){.base = base, .size = size, .map = map, .map_size = map_size, .huge = huge};
    return true;
}

bool calq__bulk_alloc_any(size_t size, calq__bulk *b)
{
    if (size >= HUGE_BYTES) return calq__bulk_alloc(size, b);
    memset(b, 0, sizeof *b);
    size = (size + 63) / 64 * 64;
    b->base = aligned_alloc(64, size ? size : 64);
    b->size = size;
    b->heap = true;
    return b->base != NULL;
}

void calq__bulk_free(calq__bulk *b)
{
    if (b->heap) free(b->base);
    if (b->map) munmap(b->map, b->map_size);
    memset(b, 0, sizeof *b);
}
