/* HFMG activation calibration (amct-reference.md §5): a histogram merged batch by batch, then an
 * L2 search over clip ranges trimmed from both ends. All arithmetic is AMCT's float32 (with the
 * double pow and the double divisions where AMCT's code has them), so the factors match bit for
 * bit. One quirk of AMCT's code is kept by default and can be switched off (left_clip_loss):
 * its loss takes the source bin's offset i - left in unsigned arithmetic, so a bin left of the
 * clip range sits about 2^32 bins to the right; in float its end then equals its start and it
 * adds exactly 0, i.e. clipping the negative side costs nothing (docs/numerics.md). */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "quant/quant.h"

#define HFMG_STEP_DIVISOR  100000u /* step = ceil(total / 100000) counts per trim (§5) */
#define HFMG_MIN_BIN_RATIO 4u      /* min_bins = ceil(B / 4) */

struct calq_hfmg {
    calq_hfmg_opts o;
    char layer[CALQ_ERROR_NAME_MAX];
    unsigned B;
    uint64_t *count, *scratch;
    float mn, w; /* bin i spans [mn + i*w, mn + (i+1)*w] as AMCT computes the bounds */
    int has_bins;
    uint64_t fed, nan_count, pos_inf_count, neg_inf_count;
    /* the finite values span more than float32 holds (max - min overflows): no histogram fits
     * them; lo and hi are the extremes seen */
    int too_wide;
    float wide_lo, wide_hi;
};

void calq_hfmg_opts_init(calq_hfmg_opts *o)
{
    if (!o) return; /* as the free functions: nothing to fill */
    memset(o, 0, sizeof *o);
    o->num_bins = 4096;
    o->asymmetric = 1;
    o->num_bits = 8;
}

calq_status calq_hfmg_create(const calq_hfmg_opts *o, const char *layer, calq_hfmg **out, calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, out);
    *out = NULL;
    CALQ_REQUIRE(err, o);
    if (o->num_bins != 1024 && o->num_bins != 2048 && o->num_bins != 4096 && o->num_bins != 8192)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, layer,
                          "HFMG of layer \"%s\": num_of_bins %d must be one of 1024, 2048, 4096, 8192",
                          calq__name(layer), o->num_bins);
    if (o->num_bits < 2 || o->num_bits > 16)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, layer, "HFMG of layer \"%s\": num_bits %d must be in [2, 16]",
                          calq__name(layer), o->num_bits);
    calq_hfmg *h = calloc(1, sizeof *h);
    if (h) {
        h->count = calloc((size_t)o->num_bins, sizeof *h->count);
        h->scratch = calloc((size_t)o->num_bins, sizeof *h->scratch);
    }
    if (!h || !h->count || !h->scratch) {
        calq_hfmg_free(h);
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, layer, "HFMG: out of memory");
    }
    h->o = *o;
    h->B = (unsigned)o->num_bins;
    snprintf(h->layer, sizeof h->layer, "%s", layer ? layer : "");
    *out = h;
    return CALQ_OK;
}

void calq_hfmg_free(calq_hfmg *h)
{
    if (!h) return;
    free(h->count);
    free(h->scratch);
    free(h);
}

int calq_hfmg_bins(const calq_hfmg *h, const uint64_t **counts, float *lo, float *width)
{
    if (!h) return -1; /* calq.h's sentinel for a NULL object; the outputs are left alone */
    if (!h->has_bins) return 0;
    if (counts) *counts = h->count;
    if (lo) *lo = h->mn;
    if (width) *width = h->w;
    return (int)h->B;
}

/* AMCT's DataBin bounds: dataMin + index*binWidth and dataMin + (index+1)*binWidth */
static float bound(float mn, float w, unsigned i)
{
    float iw = (float)i * w;
    return mn + iw;
}

/* HfmgDistributeInter: the finite values of x into bins of width w from mn. A width below
 * FLT_EPSILON puts every value into bin B/2 (§5), whatever the values are. */
static void distribute(uint64_t *count, unsigned B, float mn, float w, const float *x, size_t n, uint64_t n_finite)
{
    if (w < FLT_EPSILON) {
        count[B / 2] += n_finite;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        float v = x[i];
        if (!isfinite(v)) continue;
        float t = (v - mn) / w;
        float f = floorf(t);
        unsigned idx = f > 0.0f ? (f < 4294967295.0f ? (unsigned)f : UINT_MAX) : 0u;
        count[idx >= B ? B - 1 : idx]++;
    }
}

calq_status calq_hfmg_feed(calq_hfmg *h, const float *x, size_t n, calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, h);
    CALQ_REQUIRE_ARRAY(err, x, n);
    h->fed += n;
    /* min_element / max_element keep the first extreme; non-finite values are counted and kept
     * out of the histogram (the result then fails and reports them) */
    float bmin = INFINITY, bmax = -INFINITY;
    uint64_t n_finite = 0;
    for (size_t i = 0; i < n; i++) {
        float v = x[i];
        if (isnan(v)) {
            h->nan_count++;
        } else if (isinf(v)) {
            if (v > 0)
                h->pos_inf_count++;
            else
                h->neg_inf_count++;
        } else {
            n_finite++;
            if (v < bmin) bmin = v;
            if (v > bmax) bmax = v;
        }
    }
    if (n_finite == 0) return CALQ_OK;
    /* 3e38 and -3e38: the width overflowed to inf, the bounds became NaN and the result was
     * scale 1 from a NaN clip range, without a word */
    float all_lo = h->too_wide ? h->wide_lo : bmin, all_hi = h->too_wide ? h->wide_hi : bmax;
    if (h->has_bins && !h->too_wide) {
        all_lo = fminf(all_lo, bound(h->mn, h->w, 0));
        all_hi = fmaxf(all_hi, bound(h->mn, h->w, h->B));
    }
    if (h->too_wide || !isfinite(all_hi - all_lo)) {
        h->too_wide = 1;
        h->wide_lo = fminf(all_lo, bmin);
        h->wide_hi = fmaxf(all_hi, bmax);
        return CALQ_OK;
    }
    const unsigned B = h->B;
    if (!h->has_bins) { /* HfmgDistribute: the first batch spans its own range */
        float span = bmax - bmin;
        h->mn = bmin;
        h->w = span / (float)B;
        distribute(h->count, B, h->mn, h->w, x, n, n_finite);
        h->has_bins = 1;
        return CALQ_OK;
    }
    /* HfmgMerge */
    float data_min = bound(h->mn, h->w, 0), data_max = bound(h->mn, h->w, B);
    float m_min = data_min < bmin ? data_min : bmin; /* std::min(current, old) */
    float m_max = bmax < data_max ? data_max : bmax; /* std::max(current, old) */
    float m_span = m_max - m_min;
    float m_w = m_span / (float)B;
    int same = fabsf(m_max - data_max) < FLT_EPSILON && fabsf(m_min - data_min) < FLT_EPSILON;
    if (!(m_w > 0.0f)) same = 1; /* zero width: the old bins can only sit at the same point */
    uint64_t *nw = h->scratch;
    memset(nw, 0, B * sizeof *nw);
    distribute(nw, B, m_min, m_w, x, n, n_finite);
    if (same) {
        for (unsigned i = 0; i < B; i++) nw[i] += h->count[i];
    } else {
        /* redistribute each old bin, assuming uniform density inside it: floor of the lower
         * share to the lower new bin, the remainder to the upper one */
        for (unsigned i = 0; i < B; i++) {
            uint64_t c = h->count[i];
            if (!c) continue;
            float lo = bound(h->mn, h->w, i), hi = bound(h->mn, h->w, i + 1);
            float tl = (lo - m_min) / m_w, th = (hi - m_min) / m_w;
            float fl = floorf(tl), fh = floorf(th);
            unsigned il = fl > 0.0f ? (unsigned)fl : 0u, ih = fh > 0.0f ? (unsigned)fh : 0u;
            if (ih >= B) ih = B - 1;
            if (il >= B) il = B - 1; /* AMCT does not clamp this index; rounding can reach B */
            if (il == ih) {
                nw[il] += c;
            } else {
                float nb_hi = bound(m_min, m_w, il + 1);
                float share = (nb_hi - lo) / (hi - lo);
                float part = share * (float)c;
                float fp = floorf(part);
                uint64_t lower = fp > 0.0f ? (uint64_t)fp : 0u;
                if (lower > c) lower = c;
                nw[il] += lower;
                nw[ih] += c - lower;
            }
        }
    }
    h->scratch = h->count;
    h->count = nw;
    h->mn = m_min;
    h->w = m_w;
    return CALQ_OK;
}

/* HfmgDivid: ceil in float32 */
static unsigned ceil_div(uint64_t a, unsigned b)
{
    float q = (float)a / (float)b;
    return (unsigned)ceilf(q);
}

/* GetNorm(float...): the cubes in double (pow), the difference / 3 rounded to float */
static float norm3(float d_begin, float d_end, float density)
{
    double e3 = pow((double)d_end, 3.0), b3 = pow((double)d_begin, 3.0);
    float nrm = (float)((e3 - b3) / 3.0);
    float r = nrm * density;
    return r;
}

/* static_cast<int>(float): in range as C; out of range as x86-64 (INT_MIN), which is what the
 * wrapped unsigned offset of AMCT's build produces */
static int64_t to_int(float f)
{
    if (f >= -2147483648.0f && f < 2147483648.0f) return (int64_t)(int32_t)f;
    return INT_MIN;
}

/* HfmgCalculateLoss for the source range [l, r] (§5) */
static float l2_loss(const calq_hfmg *h, unsigned l, unsigned r, unsigned n_dst)
{
    const unsigned B = h->B;
    float data_min = bound(h->mn, h->w, 0), data_max = bound(h->mn, h->w, B);
    float span = data_max - data_min;
    float bw = span / (float)B;
    float range = bw * (float)((r - l) + 1u);
    float dw = range / (float)n_dst;
    if (dw < FLT_EPSILON) return 0.0f;
    float half = dw / 2.0f;
    float loss = 0.0f;
    for (unsigned i = 0; i < B; i++) {
        /* distance of the source bin from the start of dst bin 0, in source bins: AMCT's
         * unsigned i - l, or the signed offset §5 describes */
        float off = h->o.left_clip_loss ? (float)((int64_t)i - (int64_t)l) : (float)(uint32_t)(i - l);
        float sb = off * bw;
        float se = sb + bw;
        int64_t t1 = to_int(floorf(sb / dw)), t2 = to_int(floorf(se / dw));
        if (t1 < 0) t1 = 0;
        if (t2 < 0) t2 = 0;
        unsigned db = t1 > (int64_t)(n_dst - 1) ? n_dst - 1 : (unsigned)t1;
        unsigned de = t2 > (int64_t)(n_dst - 1) ? n_dst - 1 : (unsigned)t2;
        float cb = (float)db * dw;
        cb = cb + half;
        float density = (float)h->count[i] / bw;
        if (db == de) {
            loss += norm3(sb - cb, se - cb, density);
        } else {
            loss += norm3(sb - cb, half, density);
            float full = norm3(-half, half, density);
            float k = (float)((de - db) - 1u);
            float mid = k * full;
            loss += mid;
            float ce = (float)de * dw;
            ce = ce + half;
            loss += norm3(-half, se - ce, density);
        }
    }
    return loss;
}

calq_status calq_hfmg_compute(const calq_hfmg *h, calq_hfmg_result *out, calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, h);
    CALQ_REQUIRE(err, out);
    const char *name = calq__name(h->layer);
    if (h->nan_count || h->pos_inf_count || h->neg_inf_count)
        return calq__fail(err, CALQ_ERR_NOT_SUPPORT, h->layer,
                          "The activation to be quantized has invalid value inf or nan! HFMG of layer \"%s\": %" PRIu64
                          " elements, NaN: %" PRIu64 ", +Inf: %" PRIu64 ", -Inf: %" PRIu64
                          ". Find where with 'calq run --dump-all', or add the layer to skip_layers.",
                          name, h->fed, h->nan_count, h->pos_inf_count, h->neg_inf_count);
    if (h->too_wide)
        return calq__fail(err, CALQ_ERR_NOT_SUPPORT, h->layer,
                          "Do HFMG calibration failed for layer \"%s\": its values span [%.9g, %.9g], wider than "
                          "float32 holds (the largest minus the smallest overflows), so no histogram of them exists "
                          "(%" PRIu64 " elements). Add the layer to skip_layers, or find why the activation is this "
                          "large.",
                          name, (double)h->wide_lo, (double)h->wide_hi, h->fed);
    if (!h->has_bins)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, h->layer,
                          "HFMG calibration data of layer \"%s\" is empty: no element was fed", name);
    const unsigned B = h->B;
    const int bits = h->o.num_bits;

    /* HfmgGetSearchRange: trim `step` counts from the side that needs fewer bins for them */
    uint64_t total = 0;
    for (unsigned i = 0; i < B; i++) total += h->count[i];
    unsigned step = ceil_div(total, HFMG_STEP_DIVISOR);
    if (step < 1) step = 1;
    unsigned min_bins = ceil_div(B, HFMG_MIN_BIN_RATIO);
    unsigned *cl = malloc(B * sizeof *cl), *cr = malloc(B * sizeof *cr);
    float *loss = malloc(B * sizeof *loss);
    if (!cl || !cr || !loss) {
        free(cl);
        free(cr);
        free(loss);
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, h->layer, "HFMG: out of memory");
    }
    unsigned n_cand = 0, l = 0, r = B - 1;
    while (r - l > min_bins) {
        unsigned tl = l, tr = r;
        uint64_t ls = 0, rs = 0;
        while (tl < tr && ls < step) ls += h->count[tl++];
        while (tl < tr && rs < step) rs += h->count[tr--];
        if ((r - tr) >= (tl - l))
            r = tr;
        else
            l = tl;
        cl[n_cand] = l;
        cr[n_cand] = r;
        n_cand++;
    }
    const unsigned n_dst = 1u << bits;
    unsigned best = 0;
    if (n_cand == 0) { /* B - 1 > ceil(B/4) for every allowed B: the loop always runs */
        cl[0] = 0;
        cr[0] = B - 1;
        loss[0] = 0.0f;
    }
    for (unsigned i = 0; i < n_cand; i++) {
        loss[i] = l2_loss(h, cl[i], cr[i], n_dst);
        if (loss[i] < loss[best]) best = i; /* std::min_element: the first minimum */
    }
    unsigned bl = cl[best], br = cr[best];
    float best_loss = loss[best];
    free(cl);
    free(cr);
    free(loss);

    float data_min = bound(h->mn, h->w, 0), data_max = bound(h->mn, h->w, B);
    float span = data_max - data_min;
    float bw = span / (float)B;
    float lw = (float)bl * bw, rw = (float)(br + 1u) * bw;
    float clip_min = data_min + lw, clip_max = data_min + rw;
    float mx = clip_max, mn = clip_min, scale;
    int offset;
    const int limit = 1 << (bits - 1);
    /* CalScaleOffset (§5): its divisions are in double, rounded to float once */
    if (h->o.asymmetric) {
        mx = mx > 0.0f ? mx : 0.0f;
        mn = mn < 0.0f ? mn : 0.0f;
        float d = mx - mn;
        scale = (float)((double)d / (pow(2.0, bits) - 1.0));
        if (scale < DBL_EPSILON) scale = 1.0f;
        float q = mn / scale;
        offset = -limit - (int)roundf(q);
    } else {
        mx = fabsf(mx) > fabsf(mn) ? mx : mn;
        scale = (float)(mx > 0.0f ? (double)mx / ((double)(limit - 1) + DBL_EPSILON)
                                  : (double)-mx / ((double)limit + DBL_EPSILON));
        if (scale < DBL_EPSILON) scale = 1.0f;
        offset = 0;
    }
    /* AMCT's final HFMG path skips process_scale; calq refuses a scale the device cannot use
     * (only the failing rules: a tiny scale keeps AMCT's value) */
    float checked = scale;
    calq__scale_rule rule = calq__process_scale(&checked);
    if (rule != CALQ__SCALE_OK) {
        char text[256];
        calq__scale_rule_text(rule, scale, text, sizeof text);
        return calq__fail(err, CALQ_ERR_NOT_SUPPORT, h->layer,
                          "Do HFMG calibration failed for layer \"%s\": %s Clip range [%.9g, %.9g] of data range "
                          "[%.9g, %.9g] (%" PRIu64 " elements). Add the layer to skip_layers, or find why the "
                          "activation is this large.",
                          name, text, (double)clip_min, (double)clip_max, (double)data_min, (double)data_max, h->fed);
    }
    memset(out, 0, sizeof *out);
    out->scale = scale;
    out->offset = offset;
    out->clip_min = clip_min;
    out->clip_max = clip_max;
    out->best_left = (int)bl;
    out->best_right = (int)br;
    out->n_candidates = (int)n_cand;
    out->best_loss = best_loss;
    out->count = h->fed;
    return CALQ_OK;
}
