/* Fresh memory for bulk data written once and then read (the activation cache's arenas, a
 * plan's activation arena, weights a kernel converts once in prepare), mapped so that writing
 * it first costs little: every page faulted in when it is mapped, and on transparent huge pages
 * when the kernel has free 2 MB blocks to spare.
 *
 * Why: on this project's VMs the first write to each 4 KB page costs about 1.5 ms per MB (some
 * 9 us per page fault; the hypervisor maps the page then, MAP_POPULATE or not), so filling a
 * ResNet-18 calibration's 224 MB cache took ~350 ms, a third of the calibration, and a fresh
 * session's first run spent ~80 ms writing its converted weights; on 2 MB pages the same writes
 * take a tenth of that. Huge pages are asked for only while free ones exist (/proc/buddyinfo),
 * since faulting them in otherwise makes the kernel compact memory first, which took seconds on
 * a fragmented machine. Either way the memory is the same zeroed, private, anonymous memory.
 *
 * Owner: the caller (calq__bulk_free with the same block). */
#ifndef CALQ_BASE_BULK_MEM_H
#define CALQ_BASE_BULK_MEM_H

#include <stdbool.h>
#include <stddef.h>

typedef struct calq__bulk {
    char *base;  /* the usable memory (64-aligned; 2 MB-aligned on huge pages) */
    size_t size; /* its usable bytes */
    void *map;   /* the whole mapping (owned) */
    size_t map_size;
    bool huge; /* asked for transparent huge pages */
    bool heap; /* calq__bulk_alloc_any below 2 MB: base came from aligned_alloc */
} calq__bulk;

/* At least `size` bytes, faulted in; false when memory runs out (*b then holds nothing). */
bool calq__bulk_alloc(size_t size, calq__bulk *b);
/* The same, faulted in on up to n_threads threads. */
bool calq__bulk_alloc_threads(size_t size, int n_threads, calq__bulk *b);
/* The same for a block that may be small: below 2 MB (no huge page to gain, and the heap often
 * has recycled pages warm) from the heap, 64-aligned, not faulted in; false when memory runs
 * out. Free it with calq__bulk_free too. */
bool calq__bulk_alloc_any(size_t size, calq__bulk *b);
void calq__bulk_free(calq__bulk *b);

#endif
