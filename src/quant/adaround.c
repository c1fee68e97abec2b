/* AdaRound (quant/adaround.h, docs/numerics.md "ada_quantize"). Per weight w with scale s:
 *   floor part  f = floor(w / s), V initialised so that h(V) = w/s - f,
 *   h(V)        = clip(sigmoid(V) * (zeta - gamma) + gamma, 0, 1), zeta = 1.1, gamma = -0.1,
 *   w~          = s * clip(f + h(V), qmin, qmax),
 *   loss        = (1/B) sum_b ||(w~ - w) x_b||^2 + [t >= t0] reg * sum (1 - |2h(V) - 1|^beta),
 * minimised over V by Adam on minibatches of B samples; beta falls linearly from beta_start to
 * beta_end over the iterations t0 = ceil(warm_start * T) .. T-1. The result is
 * clip(f + (h(V) >= 0.5), qmin, qmax). The bias cancels in w~x - wx, so it plays no part. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "base/error.h"
#include "base/log.h"
#include "quant/adaround.h"

#define ZETA      1.1f
#define GAMMA     (-0.1f)
#define ROW_BLOCK 4

void calq__ada_opts_default(calq__ada_opts *o)
{
    memset(o, 0, sizeof *o);
    o->num_iteration = 10000;
    o->reg_param = 0.01f;
    o->beta_start = 20.0f;
    o->beta_end = 2.0f;
    o->warm_start = 0.2f;
    o->batch = 256;
    o->lr = 1e-3f;
    o->seed = 0x5EEDu;
}

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void calq__ada_grad_ref(const float *dw, int64_t n_rows, int64_t k, const float *xt, const float *xb, int64_t ldx,
                        int B, float *d, float *g)
{
    float two_b = 2.0f / (float)B;
    for (int64_t r = 0; r < n_rows; r++) {
        for (int b = 0; b < B; b++) {
            float acc = 0.0f;
            for (int64_t j = 0; j < k; j++) acc += dw[r * k + j] * xt[j * B + b];
            d[r * B + b] = acc;
        }
        for (int64_t j = 0; j < k; j++) {
            float acc = 0.0f;
            for (int b = 0; b < B; b++) acc += d[r * B + b] * xb[b * ldx + j];
            g[r * k + j] = acc * two_b;
        }
    }
}

/* The same sums, ROW_BLOCK rows at a time so that each sample column is read once per block,
 * and with the loops ordered so the compiler vectorizes across b (first sum) and j (second)
 * without reassociating any sum. */
void calq__ada_grad(const float *dw, int64_t n_rows, int64_t k, const float *xt, const float *xb, int64_t ldx, int B,
                    float *d, float *g)
{
    float two_b = 2.0f / (float)B;
    for (int64_t r0 = 0; r0 < n_rows; r0 += ROW_BLOCK) {
        int64_t nr = n_rows - r0 < ROW_BLOCK ? n_rows - r0 : ROW_BLOCK;
        float *dr = d + r0 * B;
        float *gr = g + r0 * k;
        memset(dr, 0, sizeof(float) * (size_t)(nr * B));
        memset(gr, 0, sizeof(float) * (size_t)(nr * k));
        for (int64_t j = 0; j < k; j++) {
            const float *xj = xt + j * B;
            for (int64_t r = 0; r < nr; r++) {
                float c = dw[(r0 + r) * k + j];
                float *dd = dr + r * B;
                for (int b = 0; b < B; b++) dd[b] += c * xj[b];
            }
        }
        for (int b = 0; b < B; b++) {
            const float *xr = xb + b * ldx;
            for (int64_t r = 0; r < nr; r++) {
                float c = dr[r * B + b];
                float *gg = gr + r * k;
                for (int64_t j = 0; j < k; j++) gg[j] += c * xr[j];
            }
        }
        for (int64_t i = 0; i < nr * k; i++) gr[i] *= two_b;
    }
}

static inline float sigm(float v)
{
    return 1.0f / (1.0f + expf(-v));
}

static inline float h_of(float v)
{
    float h = sigm(v) * (ZETA - GAMMA) + GAMMA;
    return h < 0.0f ? 0.0f : h > 1.0f ? 1.0f : h;
}

/* Per row: sum over the samples of ||(s*q - w) x||^2 in double, each row's sum in sample order
 * (rows in parallel, so the bits do not depend on the threads). False on out-of-memory. */
static bool row_errors(const calq__ada_problem *p, const int8_t *q, double *row)
{
    int64_t kk = (int64_t)p->groups * p->k, per = p->rows / p->groups;
    float *dw = malloc(sizeof(float) * (size_t)(p->rows * p->k + 1));
    if (!dw) return false;
    for (int64_t i = 0; i < p->rows * p->k; i++) {
        float s = p->scale[p->n_scale > 1 ? i / p->k : 0];
        dw[i] = (float)q[i] * s - p->w[i];
    }
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < p->rows; r++) {
        const float *xg = p->x + (r / per) * p->k;
        double acc = 0.0;
        for (int64_t n = 0; n < p->n_samples; n++) {
            float e = 0.0f;
            for (int64_t j = 0; j < p->k; j++) e += dw[r * p->k + j] * xg[n * kk + j];
            acc += (double)e * (double)e;
        }
        row[r] = acc;
    }
    free(dw);
    return true;
}

double calq__ada_recon_error(const calq__ada_problem *p, const int8_t *q)
{
    double *row = malloc(sizeof(double) * (size_t)(p->rows + 1));
    if (!row || !row_errors(p, q, row)) {
        free(row);
        return -1.0;
    }
    double sum = 0.0;
    for (int64_t r = 0; r < p->rows; r++) sum += row[r];
    free(row);
    return sum;
}

static void nearest(const calq__ada_problem *p, int8_t *q)
{
    for (int64_t i = 0; i < p->rows * p->k; i++) {
        float s = p->scale[p->n_scale > 1 ? i / p->k : 0];
        float t = roundf(p->w[i] / s); /* ARQ's rounding, half away from zero (§6.1) */
        q[i] = (int8_t)(t < (float)p->qmin ? p->qmin : t > (float)p->qmax ? p->qmax : t);
    }
}

typedef struct ada_state {
    float *fl, *v, *m, *s2; /* per weight: floor(w/s), V, Adam's moments */
    float *xb, *xt;         /* the minibatch [B, groups*k] and per group its transpose [k, B] */
    float *d, *g, *dw;      /* per row block scratch, per thread */
    double *row_loss;
} ada_state;

static void state_free(ada_state *st)
{
    free(st->fl);
    free(st->v);
    free(st->m);
    free(st->s2);
    free(st->xb);
    free(st->xt);
    free(st->d);
    free(st->g);
    free(st->dw);
    free(st->row_loss);
}

calq_status calq__adaround(const calq__ada_problem *p, const calq__ada_opts *o, int8_t *q, calq__ada_result *res,
                           calq_error *err)
{
    const char *layer = o->layer ? o->layer : "(unnamed)";
    memset(res, 0, sizeof *res);
    if (p->rows < 1 || p->k < 1 || p->groups < 1 || p->rows % p->groups || p->n_samples < 1 || o->num_iteration < 1 ||
        (p->n_scale != 1 && p->n_scale != p->rows))
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, layer,
                          "ada_quantize: layer \"%s\": bad problem (%lld rows of %lld weights, %d groups, %lld scales, "
                          "%lld samples, %d iterations)",
                          layer, (long long)p->rows, (long long)p->k, p->groups, (long long)p->n_scale,
                          (long long)p->n_samples, o->num_iteration);
    double t_start = omp_get_wtime();
    int64_t nw = p->rows * p->k, kk = (int64_t)p->groups * p->k, per = p->rows / p->groups;
    int B = o->batch < 1 ? 1 : o->batch;
    if ((int64_t)B > p->n_samples) B = (int)p->n_samples;
    int nt = o->n_threads > 0 ? o->n_threads : omp_get_max_threads();
    /* a small layer's iteration is shorter than a parallel region's wake-up on a busy machine */
    if ((double)nw * (double)B < (double)(1 << 20)) nt = 1;
    ada_state st = {0};
    st.fl = malloc(sizeof(float) * (size_t)nw);
    st.v = malloc(sizeof(float) * (size_t)nw);
    st.m = calloc((size_t)nw, sizeof(float));
    st.s2 = calloc((size_t)nw, sizeof(float));
    st.xb = malloc(sizeof(float) * (size_t)(B * kk));
    st.xt = malloc(sizeof(float) * (size_t)(B * kk));
    st.d = malloc(sizeof(float) * (size_t)(nt * ROW_BLOCK * B));
    st.g = malloc(sizeof(float) * (size_t)(nt * ROW_BLOCK * p->k));
    st.dw = malloc(sizeof(float) * (size_t)(nt * ROW_BLOCK * p->k));
    st.row_loss = calloc((size_t)p->rows, sizeof(double));
    if (!st.fl || !st.v || !st.m || !st.s2 || !st.xb || !st.xt || !st.d || !st.g || !st.dw || !st.row_loss) {
        state_free(&st);
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, layer,
                          "ada_quantize: layer \"%s\": out of memory for %lld weights and %d samples of %lld values",
                          layer, (long long)nw, B, (long long)kk);
    }
    for (int64_t i = 0; i < nw; i++) {
        float s = p->scale[p->n_scale > 1 ? i / p->k : 0];
        float t = p->w[i] / s;
        float f = floorf(t);
        float fr = t - f; /* [0, 1) */
        /* sigmoid(V) = (fr - gamma) / (zeta - gamma), in (1/12, 11/12): V is finite */
        float sg = (fr - GAMMA) / (ZETA - GAMMA);
        st.fl[i] = f;
        st.v[i] = logf(sg / (1.0f - sg));
    }
    const int T = o->num_iteration;
    const int t0 = (int)ceil((double)o->warm_start * T);
    const float lr = o->lr > 0.0f ? o->lr : 1e-3f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
    const float qmin = (float)p->qmin, qmax = (float)p->qmax;
    uint64_t rng = o->seed;
    int every = T >= 10 ? T / 10 : 1;
    for (int t = 0; t < T; t++) {
        /* the minibatch: B samples drawn with replacement, sequentially from the seed */
        for (int b = 0; b < B; b++) {
            int64_t n = (int64_t)(splitmix64(&rng) % (uint64_t)p->n_samples);
            memcpy(st.xb + (int64_t)b * kk, p->x + n * kk, sizeof(float) * (size_t)kk);
        }
        for (int gi = 0; gi < p->groups; gi++)
            for (int64_t j = 0; j < p->k; j++)
                for (int b = 0; b < B; b++)
                    st.xt[((int64_t)gi * p->k + j) * B + b] = st.xb[(int64_t)b * kk + (int64_t)gi * p->k + j];
        bool reg_on = t >= t0 && o->reg_param > 0.0f;
        float beta = o->beta_start;
        if (reg_on && T - 1 > t0)
            beta = o->beta_start + (o->beta_end - o->beta_start) * (float)(t - t0) / (float)(T - 1 - t0);
        else if (reg_on)
            beta = o->beta_end;
        float c1 = (float)(1.0 / (1.0 - pow(0.9, t + 1))), c2 = (float)(1.0 / (1.0 - pow(0.999, t + 1)));
        float reg = o->reg_param;
        int64_t n_blocks = 0;
        for (int gi = 0; gi < p->groups; gi++) n_blocks += (per + ROW_BLOCK - 1) / ROW_BLOCK;
        int64_t blocks_per_group = (per + ROW_BLOCK - 1) / ROW_BLOCK;
#pragma omp parallel for schedule(static) num_threads(nt)
        for (int64_t bi = 0; bi < n_blocks; bi++) {
            int tid = omp_get_thread_num();
            int64_t gi = bi / blocks_per_group;
            int64_t r0 = gi * per + (bi % blocks_per_group) * ROW_BLOCK;
            int64_t r1 = r0 + ROW_BLOCK < (gi + 1) * per ? r0 + ROW_BLOCK : (gi + 1) * per;
            int64_t nr = r1 - r0;
            float *dw = st.dw + (int64_t)tid * ROW_BLOCK * p->k, *g = st.g + (int64_t)tid * ROW_BLOCK * p->k;
            float *d = st.d + (int64_t)tid * ROW_BLOCK * B;
            for (int64_t i = 0; i < nr * p->k; i++) {
                int64_t wi = r0 * p->k + i;
                float s = p->scale[p->n_scale > 1 ? wi / p->k : 0];
                float qv = st.fl[wi] + h_of(st.v[wi]);
                qv = qv < qmin ? qmin : qv > qmax ? qmax : qv;
                dw[i] = s * qv - p->w[wi];
            }
            calq__ada_grad(dw, nr, p->k, st.xt + gi * p->k * B, st.xb + gi * p->k, kk, B, d, g);
            for (int64_t r = 0; r < nr; r++) {
                double l = 0.0;
                for (int b = 0; b < B; b++) l += (double)d[r * B + b] * (double)d[r * B + b];
                st.row_loss[r0 + r] = l / B;
            }
            for (int64_t i = 0; i < nr * p->k; i++) {
                int64_t wi = r0 * p->k + i;
                float s = p->scale[p->n_scale > 1 ? wi / p->k : 0];
                float sg = sigm(st.v[wi]);
                float hr = sg * (ZETA - GAMMA) + GAMMA;
                float dh = hr > 0.0f && hr < 1.0f ? (ZETA - GAMMA) * sg * (1.0f - sg) : 0.0f;
                float h = hr < 0.0f ? 0.0f : hr > 1.0f ? 1.0f : hr;
                float qv = st.fl[wi] + h;
                float gh = qv > qmin && qv < qmax ? g[i] * s : 0.0f; /* d loss / d h through w~ */
                if (reg_on) {
                    float u = 2.0f * h - 1.0f, au = fabsf(u);
                    if (au > 0.0f) { /* d/dh (1 - |2h-1|^beta) = -2 beta |u|^(beta-1) sign(u) */
                        float dr = -2.0f * beta * powf(au, beta - 1.0f);
                        gh += reg * (u > 0.0f ? dr : -dr);
                    }
                }
                float gv = gh * dh;
                float m = b1 * st.m[wi] + (1.0f - b1) * gv;
                float v2 = b2 * st.s2[wi] + (1.0f - b2) * gv * gv;
                st.m[wi] = m;
                st.s2[wi] = v2;
                st.v[wi] -= lr * (m * c1) / (sqrtf(v2 * c2) + eps);
            }
        }
        if (o->log && (t % every == 0 || t == T - 1)) {
            double rec = 0.0, rl = 0.0;
            for (int64_t r = 0; r < p->rows; r++) rec += st.row_loss[r];
            if (reg_on)
                for (int64_t i = 0; i < nw; i++) rl += 1.0 - pow(fabs(2.0 * h_of(st.v[i]) - 1.0), beta);
            calq__log(CALQ_LOG_INFO,
                      "calq: ada_quantize: layer %s: iteration %d/%d, reconstruction %.6g, rounding %.6g%s, beta %.3g",
                      layer, t + 1, T, rec, rl * o->reg_param, reg_on ? "" : " (warm start)", reg_on ? beta : 0.0);
        }
    }
    int8_t *qn = malloc((size_t)nw);
    double *e_near = malloc(sizeof(double) * (size_t)p->rows), *e_ada = malloc(sizeof(double) * (size_t)p->rows);
    bool ok = qn && e_near && e_ada;
    if (ok) {
        nearest(p, qn);
        for (int64_t i = 0; i < nw; i++) {
            float r = st.fl[i] + (h_of(st.v[i]) >= 0.5f ? 1.0f : 0.0f);
            q[i] = (int8_t)(r < qmin ? p->qmin : r > qmax ? p->qmax : r);
        }
        ok = row_errors(p, qn, e_near) && row_errors(p, q, e_ada);
    }
    if (!ok) {
        free(qn);
        free(e_near);
        free(e_ada);
        state_free(&st);
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, layer, "ada_quantize: layer \"%s\": out of memory", layer);
    }
    /* The error is a sum over rows, each depending on its own weights only: a row whose learned
     * rounding does not beat nearest rounding on the samples keeps nearest rounding, so the
     * layer is never worse than ARQ on them (a short schedule or a noisy minibatch can end
     * there). */
    for (int64_t r = 0; r < p->rows; r++) {
        if (e_ada[r] >= e_near[r]) {
            memcpy(q + r * p->k, qn + r * p->k, (size_t)p->k);
            res->n_rows_kept += e_ada[r] > e_near[r];
            e_ada[r] = e_near[r];
        }
        res->err_nearest += e_near[r];
        res->err_ada += e_ada[r];
    }
    for (int64_t i = 0; i < nw; i++) res->n_changed += q[i] != qn[i];
    free(qn);
    free(e_near);
    free(e_ada);
    state_free(&st);
    res->seconds = omp_get_wtime() - t_start;
    return CALQ_OK;
}
