/* Bounded tails: exact k-th largest values without keeping the data (the streaming form of
 * IFMR's partial sort, amct-reference.md §3.3). See calq__tail in quant.h for the proof. */
#include <stdlib.h>
#include <string.h>

#include "quant/quant.h"

void calq__tail_reset(calq__tail *t)
{
    t->n = 0;
    t->cap = 0;
    t->dropped = 0;
    t->edge = 0.0f;
}

void calq__tail_free(calq__tail *t)
{
    free(t->v);
    memset(t, 0, sizeof *t);
}

int calq__tail_set_cap(calq__tail *t, size_t cap)
{
    if (cap <= t->cap) return 1;
    if (cap > t->alloc) {
        size_t want = t->alloc ? t->alloc : 64;
        while (want < cap) want *= 2;
        float *v = realloc(t->v, want * sizeof *v);
        if (!v) return 0;
        t->v = v;
        t->alloc = want;
    }
    t->cap = cap;
    return 1;
}

static void sift_down(float *v, size_t n, size_t i)
{
    float x = v[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && v[c + 1] < v[c]) c++;
        if (!(v[c] < x)) break;
        v[i] = v[c];
        i = c;
    }
    v[i] = x;
}

void calq__tail_push(calq__tail *t, float x)
{
    if (t->n < t->cap) {
        /* sift up into the min-heap */
        size_t i = t->n++;
        while (i > 0) {
            size_t p = (i - 1) / 2;
            if (!(x < t->v[p])) break;
            t->v[i] = t->v[p];
            i = p;
        }
        t->v[i] = x;
        return;
    }
    if (t->cap == 0 || x <= t->v[0]) {
        calq__tail_drop(t, x);
        return;
    }
    calq__tail_drop(t, t->v[0]);
    t->v[0] = x;
    sift_down(t->v, t->n, 0);
}

static int cmp_desc(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

int calq__tail_kth(calq__tail *t, uint64_t k, float *out)
{
    if (k == 0 || k > t->n) return 0;
    qsort(t->v, t->n, sizeof *t->v, cmp_desc);
    t->cap = 0; /* no longer a heap */
    *out = t->v[k - 1];
    return !t->dropped || t->v[k - 1] >= t->edge;
}

int calq__tails_size(calq__tail *top, calq__tail *bottom, float max_p, float min_p, uint64_t max_count, uint64_t count)
{
    uint64_t kt, kb;
    if (max_count) {
        kt = calq__ifmr_rank_bound(max_p, max_count);
        kb = calq__ifmr_rank_bound(min_p, max_count);
    } else {
        kt = 2 * calq__ifmr_rank_bound(max_p, count) + CALQ__TAIL_SLACK;
        kb = 2 * calq__ifmr_rank_bound(min_p, count) + CALQ__TAIL_SLACK;
    }
    if (kt > SIZE_MAX / 8 || kb > SIZE_MAX / 8) return 0;
    return calq__tail_set_cap(top, (size_t)kt) && calq__tail_set_cap(bottom, (size_t)kb);
}

/* Sums modulo 2^64 do not depend on the order of their terms, so the loop vectorizes to the
 * same result on every instruction set: it is cloned per ISA (static, so that the resolver is not
 * exported), as every element of every IFMR feed goes through it twice (both passes). */
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
static void
checksum(const float *x, size_t n, uint64_t *s1, uint64_t *s2)
{
    uint64_t a = 0, b = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        a += u;
        b += (uint64_t)u * u;
    }
    *s1 += a;
    *s2 += b;
}

void calq__values_checksum(const float *x, size_t n, uint64_t *s1, uint64_t *s2)
{
    checksum(x, n, s1, s2);
}
