/* A calibration group's calibrators ("slots"): AMCT's IFMR (two passes, §3) or HFMG (one
 * pass, §5), or one of calq's range calibrators (src/quant/range.c). A group configured with
 * act_algo "auto" runs every candidate on the same batches (the streams are independent and
 * bounded, so memory stays flat in batch_num); calibrate_auto.c then picks one. */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "calib/calibrate.h"
#include "quant/quant.h"

/* The candidates of "auto", AMCT's default first: it wins a tie. */
static const calq_act_algo auto_candidates[] = {CALQ_ACT_IFMR,       CALQ_ACT_HFMG, CALQ_ACT_MINMAX,
                                                CALQ_ACT_PERCENTILE, CALQ_ACT_KL,   CALQ_ACT_MSE};

static calq_status slot_setup(calq__calib_slot *s, calq_act_algo algo, const calq_layer_config *lc, int n_threads,
                              calq_error *err)
{
    memset(s, 0, sizeof *s);
    s->algo = algo;
    s->same_as = -1;
    /* the layer's own parameters for its algorithm; an auto candidate takes that algorithm's defaults */
    calq_layer_config l = *lc;
    if (lc->act.algo != algo) {
        calq__layer_config_defaults(&l, lc->kind, lc->act.asymmetric);
        const calq__act_algo_info *a = calq__act_algo(algo);
        l.act.algo = algo;
        if (a->keys & CALQ_ACT_KEY_PERCENTILES) l.act.max_percentile = l.act.min_percentile = a->percentile;
        if (a->keys & CALQ_ACT_KEY_BINS) l.act.num_of_bins = a->num_of_bins;
    }
    if (algo == CALQ_ACT_IFMR) {
        calq__config_ifmr_opts(&l, &s->ifmr);
        s->ifmr.n_threads = n_threads;
    } else if (algo == CALQ_ACT_HFMG) {
        calq__config_hfmg_opts(&l, &s->hfmg);
        CALQ_TRY(calq_hfmg_create(&s->hfmg, lc->name, &s->hist, err));
    } else {
        calq__config_range_opts(&l, &s->range);
        s->range.n_threads = n_threads;
        if (algo == CALQ_ACT_MSE) s->neg_weight = l.act.neg_weight;
    }
    return CALQ_OK;
}

calq_status calq__group_setup(calq__calib_group *gr, const calq_layer_config *lc, int n_threads, calq_error *err)
{
    gr->algo = lc->act.algo;
    gr->chosen = 0;
    if (gr->algo != CALQ_ACT_AUTO) {
        gr->n_slots = 1;
        return slot_setup(&gr->slot[0], gr->algo, lc, n_threads, err);
    }
    gr->n_slots = (int)(sizeof auto_candidates / sizeof auto_candidates[0]);
    for (int k = 0; k < gr->n_slots; k++) CALQ_TRY(slot_setup(&gr->slot[k], auto_candidates[k], lc, n_threads, err));
    return CALQ_OK;
}

static void slot_fail(calq__calib_slot *s, const calq_error *e)
{
    s->failed = true;
    s->err = *e;
}

static void slot_feed(calq__calib_slot *s, const float *x, size_t n, int pass, uint64_t max_count, const char *layer)
{
    if (s->done || s->failed) return;
    calq_error e = {0};
    calq_status st = CALQ_OK;
    s->fed = true;
    if (s->algo == CALQ_ACT_HFMG) {
        if (pass == 1) st = calq_hfmg_feed(s->hist, x, n, &e);
    } else if (s->algo == CALQ_ACT_IFMR) {
        /* max_count known: pass 1 is then always exact (docs/numerics.md); a later batch with
         * more elements (a data-dependent size) makes it unknown (calq__ifmr_stream_bound_feed) */
        if (!s->stream) st = calq_ifmr_stream_create(&s->ifmr, max_count, layer, &s->stream, &e);
        if (st == CALQ_OK && pass == 1) calq__ifmr_stream_bound_feed(s->stream, n);
        if (st == CALQ_OK) st = calq_ifmr_stream_feed(s->stream, x, n, &e);
    } else {
        if (!s->rstream) {
            st = calq_range_stream_create(&s->range, max_count, layer, &s->rstream, &e);
            if (st == CALQ_OK) calq__range_stream_set_neg_weight(s->rstream, s->neg_weight);
        }
        if (st == CALQ_OK && pass == 1) calq__range_stream_bound_feed(s->rstream, n);
        if (st == CALQ_OK) st = calq_range_stream_feed(s->rstream, x, n, &e);
    }
    if (st != CALQ_OK) slot_fail(s, &e);
}

void calq__group_feed(calq__calib_group *gr, const float *x, size_t n, int pass, int batch_num, const char *layer)
{
    /* batch_num is 0 when the batches' shapes vary (calibrate_observe.c feed_batches); else the
     * first batch's size for every batch: a bound when the tensor's size is fixed by the inputs'
     * shapes, a guess the streams drop (slot_feed) when it depends on the data (NonZero, NMS) */
    uint64_t max_count = (uint64_t)n * (uint64_t)batch_num;
    int alive = 0;
    for (int k = 0; k < gr->n_slots; k++) {
        slot_feed(&gr->slot[k], x, n, pass, max_count, layer);
        alive += !gr->slot[k].failed;
    }
    if (!alive) { /* every calibrator failed: the group reports the first (AMCT's algorithm) */
        gr->failed = true;
        gr->err = gr->slot[0].err;
    }
}

/* Ends a slot's pass; true when it needs another one. */
static bool slot_end_pass(calq__calib_slot *s, int pass, const char *tensor)
{
    if (s->done || s->failed) return false;
    calq_error e = {0};
    int done = 0;
    if (!s->fed) { /* the tensor was not produced */
        calq__fail(&e, CALQ_ERR_INTERNAL, tensor, "tensor \"%s\" was never computed during calibration", tensor);
    } else if (s->algo == CALQ_ACT_HFMG) {
        calq_hfmg_result r;
        if (pass == 1 && calq_hfmg_compute(s->hist, &r, &e) == CALQ_OK) {
            s->scale_d = r.scale;
            s->offset_d = r.offset;
            s->done = true;
        }
    } else if (s->algo == CALQ_ACT_IFMR) {
        calq_ifmr_result r;
        if (calq_ifmr_stream_end_pass(s->stream, &done, &e) == CALQ_OK && done &&
            calq_ifmr_stream_result(s->stream, &r, &e) == CALQ_OK) {
            s->scale_d = r.scale;
            s->offset_d = r.offset;
            s->done = true;
            calq_ifmr_stream_free(s->stream); /* the tails and candidate sums are not needed any more */
            s->stream = NULL;
        }
    } else {
        calq_range_result r;
        if (calq_range_stream_end_pass(s->rstream, &done, &e) == CALQ_OK && done &&
            calq_range_stream_result(s->rstream, &r, &e) == CALQ_OK) {
            s->scale_d = r.scale;
            s->offset_d = r.offset;
            s->done = true;
            calq_range_stream_free(s->rstream);
            s->rstream = NULL;
        }
    }
    if (e.status != CALQ_OK) slot_fail(s, &e);
    return !s->done && !s->failed;
}

bool calq__group_end_pass(calq__calib_group *gr, int pass)
{
    if (gr->failed || gr->done || gr->auto_pending) return false;
    bool more = false;
    for (int k = 0; k < gr->n_slots; k++) more |= slot_end_pass(&gr->slot[k], pass, gr->tensor);
    if (more) return true;
    /* every slot has settled */
    int first = -1, distinct = 0;
    for (int k = 0; k < gr->n_slots; k++) {
        calq__calib_slot *s = &gr->slot[k];
        if (s->failed) continue;
        if (first < 0) first = k;
        for (int j = 0; j < k && s->same_as < 0; j++)
            if (!gr->slot[j].failed && gr->slot[j].scale_d == s->scale_d && gr->slot[j].offset_d == s->offset_d)
                s->same_as = j;
        distinct += s->same_as < 0;
    }
    if (first < 0) {
        gr->failed = true;
        gr->err = gr->slot[0].err;
        return false;
    }
    gr->chosen = first;
    if (distinct > 1) {
        gr->auto_pending = true; /* calibrate_auto.c decides */
        return false;
    }
    gr->scale_d = gr->slot[first].scale_d;
    gr->offset_d = gr->slot[first].offset_d;
    gr->done = true;
    return false;
}

bool calq__group_multipass(const calq__calib_group *gr)
{
    calq_act_algo a = gr->algo;
    return a != CALQ_ACT_HFMG && a != CALQ_ACT_MINMAX && a != CALQ_ACT_PERCENTILE;
}

void calq__group_free(calq__calib_group *gr)
{
    for (int k = 0; k < gr->n_slots; k++) {
        calq_ifmr_stream_free(gr->slot[k].stream);
        calq_hfmg_free(gr->slot[k].hist);
        calq_range_stream_free(gr->slot[k].rstream);
        gr->slot[k].stream = NULL;
        gr->slot[k].hist = NULL;
        gr->slot[k].rstream = NULL;
    }
}
