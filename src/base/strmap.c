#include "base/strmap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* The slot holding key, or the empty slot where it would go. */
static size_t slot(const calq_strmap *m, const char *key)
{
    size_t i = (size_t)hash(key) & (m->cap - 1);
    while (m->keys[i] && strcmp(m->keys[i], key) != 0) i = (i + 1) & (m->cap - 1);
    return i;
}

static bool grow(calq_strmap *m, size_t cap)
{
    calq_strmap g = {calloc(cap, sizeof *g.keys), malloc(cap * sizeof *g.vals), cap, 0};
    if (!g.keys || !g.vals) {
        calq__strmap_free(&g);
        return false;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i]) continue;
        size_t j = slot(&g, m->keys[i]);
        g.keys[j] = m->keys[i];
        g.vals[j] = m->vals[i];
        g.n++;
    }
    calq__strmap_free(m);
    *m = g;
    return true;
}

bool calq__strmap_init(calq_strmap *m, size_t expected)
{
    memset(m, 0, sizeof *m);
    size_t cap = 16;
    while (cap < 2 * expected && cap < SIZE_MAX / 4) cap *= 2;
    return grow(m, cap);
}

void calq__strmap_free(calq_strmap *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

int calq__strmap_get(const calq_strmap *m, const char *key)
{
    if (!m->cap) return -1;
    size_t i = slot(m, key);
    return m->keys[i] ? m->vals[i] : -1;
}

bool calq__strmap_put(calq_strmap *m, const char *key, int val)
{
    if (2 * (m->n + 1) > m->cap && !grow(m, m->cap ? 2 * m->cap : 16)) return false;
    size_t i = slot(m, key);
    if (!m->keys[i]) {
        m->keys[i] = key;
        m->n++;
    }
    m->vals[i] = val;
    return true;
}
