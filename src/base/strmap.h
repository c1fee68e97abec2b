/* A string -> int hash map with borrowed keys, for name lookups that would otherwise be a linear
 * search per name (a record or config with n entries against a model with n layers is n^2
 * string compares: 80k record keys took 10 s, issue 14). Open addressing, FNV-1a, grows at
 * half full. The keys are not copied: each must stay valid and unchanged while the map is used.
 *
 * Ownership: the caller owns the calq_strmap (zero-initialise or calq__strmap_init) and frees
 * its slots with calq__strmap_free. */
#ifndef CALQ_BASE_STRMAP_H
#define CALQ_BASE_STRMAP_H

#include <stdbool.h>
#include <stddef.h>

typedef struct calq_strmap {
    const char **keys; /* NULL: empty slot */
    int *vals;
    size_t cap, n; /* cap is 0 or a power of two */
} calq_strmap;

/* Room for `expected` keys without growing; false on out-of-memory. */
bool calq__strmap_init(calq_strmap *m, size_t expected);
void calq__strmap_free(calq_strmap *m);
/* The value of key, or -1. */
int calq__strmap_get(const calq_strmap *m, const char *key);
/* Sets key -> val (replacing an earlier value); false on out-of-memory. */
bool calq__strmap_put(calq_strmap *m, const char *key, int val);

#endif
