/* Fresh memory for bulk data written once and read back (the activation cache's arenas), mapped
 * so that writing it first costs little: every page faulted in when it is mapped, and on
 * transparent huge pages when the kernel has free 2 MB blocks to spare.
 *
 * Why: on this project's VMs the first write to each 4 KB page costs about 1.5 ms per MB even
 * after MAP_POPULATE (the hypervisor maps the page then), so filling a ResNet-18 calibration's
 * 224 MB cache took ~350 ms, a third of the calibration; on 2 MB pages the same writes take
 * ~25 ms. Huge pages are asked for only while free ones exist (/proc/buddyinfo), since faulting
 * them in otherwise makes the kernel compact memory first, which took seconds on a fragmented
 * machine. Either way the memory is the same zeroed, private, anonymous memory.
 *
 * Owner: the caller (calq__bulk_free with the same block). */
#ifndef CALQ_CALIB_BULK_MEM_H
#define CALQ_CALIB_BULK_MEM_H

#include <stdbool.h>
#include <stddef.h>

typedef struct calq__bulk {
    char *base;  /* the usable memory (64-aligned; 2 MB-aligned on huge pages) */
    size_t size; /* its usable bytes */
    void *map;   /* the whole mapping (owned) */
    size_t map_size;
    bool huge; /* asked for transparent huge pages */
} calq__bulk;

/* At least `size` bytes, faulted in; false when memory runs out (*b then holds nothing). */
bool calq__bulk_alloc(size_t size, calq__bulk *b);
void calq__bulk_free(calq__bulk *b);

#endif
