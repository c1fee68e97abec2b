/* calq_compare's streaming statistics: sums of float y against quantized q, and the input side
 * of a layer (range, clipped fraction, histogram). Nothing but these sums is kept across
 * batches. A tensor is cut into fixed chunks whose double sums run in element order and are
 * combined in chunk order, so threads split work, never the order of the additions. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "compare/compare.h"

#define CHUNK 65536

typedef struct part {
    double syy, sqq, syq, sdd, max_abs;
} part;

static void chunk_sums(const float *y, const float *qf, const int8_t *qi, float scale, int zp, size_t a, size_t b,
                       part *p)
{
    double syy = 0.0, sqq = 0.0, syq = 0.0, sdd = 0.0, mx = 0.0;
    for (size_t i = a; i < b; i++) {
        double yv = (double)y[i];
        double qv = qf ? (double)qf[i] : (double)((float)(qi[i] - zp) * scale);
        double d = qv - yv;
        syy += yv * yv;
        sqq += qv * qv;
        syq += yv * qv;
        sdd += d * d;
        if (fabs(d) > mx || d != d) mx = d != d ? INFINITY : fabs(d);
    }
    *p = (part){syy, sqq, syq, sdd, mx};
}

static double cosine(double syq, double syy, double sqq)
{
    if (syy == 0.0 && sqq == 0.0) return 1.0;
    if (syy == 0.0 || sqq == 0.0) return 0.0;
    return syq / sqrt(syy * sqq);
}

void calq__cmp_acc_add(calq__cmp_acc *a, const float *y, const float *qf, const int8_t *qi, float scale, int zp,
                       size_t n, int n_threads)
{
    size_t nc = (n + CHUNK - 1) / CHUNK;
    part one, *parts = nc > 1 ? malloc(sizeof *parts * nc) : &one;
    if (!parts) { /* no memory for the partial sums: the same sums, one thread */
        parts = &one;
        nc = 1;
    }
    if (nc <= 1) {
        chunk_sums(y, qf, qi, scale, zp, 0, n, parts);
    } else {
        int nt = n_threads > 0 ? n_threads : omp_get_max_threads();
#pragma omp parallel for schedule(static) num_threads(nt)
        for (size_t c = 0; c < nc; c++) {
            size_t lo = c * CHUNK, hi = lo + CHUNK < n ? lo + CHUNK : n;
            chunk_sums(y, qf, qi, scale, zp, lo, hi, &parts[c]);
        }
    }
    part t = {0};
    for (size_t c = 0; c < nc; c++) {
        t.syy += parts[c].syy;
        t.sqq += parts[c].sqq;
        t.syq += parts[c].syq;
        t.sdd += parts[c].sdd;
        if (parts[c].max_abs > t.max_abs) t.max_abs = parts[c].max_abs;
    }
    if (parts != &one) free(parts);
    double c = cosine(t.syq, t.syy, t.sqq);
    a->cos_min = a->batches == 0 || c < a->cos_min ? c : a->cos_min;
    a->syy += t.syy;
    a->sqq += t.sqq;
    a->syq += t.syq;
    a->sdd += t.sdd;
    if (t.max_abs > a->max_abs) a->max_abs = t.max_abs;
    a->count += n;
    a->batches++;
}

void calq__cmp_acc_stats(const calq__cmp_acc *a, calq_compare_stats *s)
{
    s->cosine = cosine(a->syq, a->syy, a->sqq);
    s->cosine_min = a->batches ? a->cos_min : s->cosine;
    s->rel_l2 = a->syy > 0.0 ? sqrt(a->sdd / a->syy) : (a->sdd > 0.0 ? INFINITY : 0.0);
    s->sqnr_db = a->sdd > 0.0 ? 10.0 * log10(a->syy / a->sdd) : INFINITY;
    s->max_abs = a->max_abs;
    s->count = a->count;
}

void calq__cmp_input_add(calq_compare_layer *l, const float *x, size_t n)
{
    const float lo = l->hist_lo, hi = l->hist_hi;
    const float w = (hi - lo) / (float)CALQ_COMPARE_HIST_BINS;
    uint64_t clipped = 0;
    float mn = l->n_input ? l->in_min : INFINITY, mx = l->n_input ? l->in_max : -INFINITY;
    for (size_t i = 0; i < n; i++) {
        float v = x[i];
        if (v < mn) mn = v;
        if (v > mx) mx = v;
        if (!l->has_range) continue;
        clipped += v < l->clip_min || v > l->clip_max || v != v;
        if (v < lo) {
            l->hist_below++;
        } else if (v >= hi || !(w > 0.0f) || v != v) {
            l->hist_above += v >= hi;
        } else {
            int k = (int)((v - lo) / w);
            l->hist[k < CALQ_COMPARE_HIST_BINS ? k : CALQ_COMPARE_HIST_BINS - 1]++;
        }
    }
    l->in_min = mn;
    l->in_max = mx;
    l->n_clipped += clipped;
    l->n_input += n;
    l->clip_fraction = l->n_input ? (double)l->n_clipped / (double)l->n_input : 0.0;
}

typedef struct ranked {
    double damage;
    int i;
} ranked;

static int by_damage(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    if (x->damage != y->damage) return x->damage > y->damage ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

void calq_compare_worst_first(const calq_compare_result *r, int *order)
{
    if (!r || !order) return; /* a void function: nothing to order, or nowhere to write it */
    ranked *t = malloc(sizeof *t * ((size_t)r->n_layers + 1));
    for (int i = 0; i < r->n_layers; i++) {
        const calq_compare_layer *l = &r->layers[i];
        double d = 1.0 - (l->has_sensitivity ? l->sens.cosine : l->has_isolated ? l->iso.cosine : l->acc.cosine);
        if (t) t[i] = (ranked){d == d ? d : 2.0, i}; /* NaN ranks as the worst */
        order[i] = i;
    }
    if (!t) return; /* no memory: graph order */
    qsort(t, (size_t)r->n_layers, sizeof *t, by_damage);
    for (int i = 0; i < r->n_layers; i++) order[i] = t[i].i;
    free(t);
}
