/* calq_calibrate: the calibration run of amct-reference.md §1.1 (steps 3-4) in one call.
 *
 *   preflight (the data hold batch_num batches; no inference before that)
 *   -> fold as the session folds (§8.3)
 *   -> with DMQ layers (§7.2 dmq_balancer_param): pass 0 over the batches, max |x| per input channel
 *      of each balanced layer; the balance factors; the graph rewritten to X·(1/s), W·s
 *   -> ARQ on every enabled layer's weight (§6.1), balanced where DMQ is on
 *   -> pass 1 over batches 0..batch_num-1: IFMR statistics / HFMG histograms (§3, §5); the
 *      inputs of the layers whose calibrators need more passes go to the activation cache
 *   -> pass 2 over the same batches, replayed from the cache (the model runs again only when
 *      the cache gave up): IFMR losses (docs/numerics.md, "Streaming")
 *   -> every layer checked -> one report of all failures, or the record (§7.1), atomically.
 *
 * The model runs batch by batch with reused input buffers and a session arena; calibrators keep
 * bounded state and the cache at most its memory budget (then a temporary file), so memory
 * does not grow with batch_num beyond that budget (AMCT's grows with it, §3.2). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/file.h"
#include "base/log.h"
#include "base/outputs.h"
#include "base/threads.h"
#include "calib/calibrate.h"
#include "calib/data.h"
#include "calib/record.h"
#include "exec/session.h"
#include "frontend/model.h"
#include "graph/passes.h"
#include "graph/quantizable.h"

void calq_calibrate_opts_init(calq_calibrate_opts *o)
{
    if (!o) return; /* as the free functions: nothing to fill */
    memset(o, 0, sizeof *o);
    o->log = 1;
    o->cache_mb = CALQ_CALIBRATE_CACHE_MB_DEFAULT;
}

/* AMCT's per-batch line (§1.4): Caffe's IFMR layer, or the ONNX/PyTorch logger. */
static void log_stored(const calq__calib *cal)
{
    for (int i = 0; i < cal->n_layers; i++) {
        const calq_layer_config *lc = cal->layers[i].cfg;
        const char *key = cal->layers[i].key;
        if (calq__calib_implicit(cal, i)) continue; /* AMCT's lines are for AMCT's entries */
        if (cal->caffe_log)
            calq__log(CALQ_LOG_INFO, "Doing layer: \"%s\" calibration, already store %d/%d data.", key, cal->batch + 1,
                      cal->batch_num);
        else
            calq__log(CALQ_LOG_INFO, "Doing layer %s data calibration: data already %s %d/%d", key,
                      lc->act.algo == CALQ_ACT_HFMG ? "preprocess" : "stored", cal->batch + 1, cal->batch_num);
    }
}

static void log_done(const calq__calib *cal)
{
    for (int i = 0; i < cal->n_layers; i++) {
        if (calq__calib_layer_failed(cal, i) || calq__calib_implicit(cal, i)) continue;
        const calq_layer_config *lc = cal->layers[i].cfg;
        const char *key = cal->layers[i].key;
        if (cal->caffe_log) {
            if (lc->act.algo == CALQ_ACT_IFMR) calq__log(CALQ_LOG_INFO, "Start to do ifmr quant.");
            calq__log(CALQ_LOG_INFO, "Do layer:\"%s\" activation calibration success!", key);
        } else {
            calq__log(CALQ_LOG_INFO, "Use %d batch to do layer %s data calibration.", cal->batch_num, key);
            calq__log(CALQ_LOG_INFO, "Do layer %s data calibration succeeded!", key);
        }
    }
}

/* After a pass: every group's calibrators end it (HFMG computes after pass 1, IFMR and the
 * range calibrators end their passes). Returns true when another pass over the same batches
 * is needed. */
static bool end_pass(calq__calib *cal)
{
    bool again = false;
    for (int k = 0; k < cal->n_groups; k++) again |= calq__group_end_pass(&cal->groups[k], cal->pass);
    return again;
}

/* CALQ_CACHE_SPILL (docs/cli.md, "--cache-mb"): auto (default), always (write every batch that
 * does not fit the memory to the file), never (run the model again for those) */
enum { CACHE_SPILL_AUTO = 0, CACHE_SPILL_ALWAYS, CACHE_SPILL_NEVER };

static int cache_spill_mode(void)
{
    const char *v = getenv("CALQ_CACHE_SPILL");
    return v && !strcmp(v, "always")  ? CACHE_SPILL_ALWAYS
           : v && !strcmp(v, "never") ? CACHE_SPILL_NEVER
                                      : CACHE_SPILL_AUTO;
}

/* In pass 1, after batch b: spilling the cache to its file costs a write now and a read in every
 * later pass; not spilling costs running the model for the batch again (its model time: the
 * batch's time without the observers, whose statistics and writes a later pass does not repeat,
 * and the calibrators' later-pass work is the same either way). When the writes of this batch
 * alone cost more than half of the model's time, the cache keeps what it has and stores nothing
 * more: the later passes replay it and run the model for the remaining batches (a depthwise
 * MobileNetV2 infers its 8 batches in 0.1 s but spills hundreds of MB of layer inputs; a
 * ResNet-18's inference is dearer than writing its inputs). Counting the observers as model time
 * kept MobileNetV2 spilling 7 of 8 batches once packed writes became cheap (calibration 1.2-1.3x
 * slower than re-running the model). */
static void cache_policy(calq__calib *cal, double batch_s, double observe_s, double file_s)
{
    if (!cal->cache || file_s <= 0.0 || cal->cache_spill == CACHE_SPILL_ALWAYS) return;
    double model_s = batch_s - observe_s;
    if (cal->cache_spill == CACHE_SPILL_NEVER || 2.0 * file_s > model_s) calq__act_cache_stop(cal->cache);
}

/* Runs batches first..batch_num-1 once (one pass, or the part of one the cache does not hold). */
static calq_status run_pass(calq__calib *cal, calq_session *s, calq_tensor *ins, int n_in, int first, calq_error *err)
{
    for (int b = first; b < cal->batch_num; b++) {
        cal->batch = b;
        double t0 = calq__now(), f0 = calq__act_cache_file_seconds(cal->cache), o0 = cal->observe_s;
        CALQ_TRY(calq__data_read_batch_resize(cal->data, b, ins, n_in, err));
        calq_status st = calq_session_run(s, ins, n_in, err);
        if (st != CALQ_OK) {
            char src[1024];
            return calq__prefix(err, "calibration batch %d (%s)", b,
                                calq_data_batch_source(cal->data, b, src, sizeof src));
        }
        cal->runs_done++;
        if (cal->pass == 1 && cal->cache) {
            calq__act_cache_end_batch(cal->cache);
            cache_policy(cal, calq__now() - t0, cal->observe_s - o0, calq__act_cache_file_seconds(cal->cache) - f0);
        }
        if (cal->pass == 1 && cal->log) log_stored(cal);
        CALQ_TRY(calq__calib_progress(cal, err));
    }
    return CALQ_OK;
}

/* After each replayed batch: the progress callback, as after a model run (it may stop the run). */
static calq_status replayed_batch(void *user, int batch, calq_error *err)
{
    calq__calib *cal = user;
    cal->batch = batch;
    cal->runs_done++;
    return calq__calib_progress(cal, err);
}

/* A later pass: from the activation cache when it holds every batch, else by running the model. */
static calq_status later_pass(calq__calib *cal, calq_session *s, calq_tensor *ins, int n_in, calq_error *err)
{
    if (!calq__act_cache_usable(cal->cache)) return run_pass(cal, s, ins, n_in, 0, err);
    int nt = cal->n_threads > 0 ? cal->n_threads : omp_get_max_threads();
    const calq__act_cache_fns fn = {calq__calib_replay_tensor, replayed_batch, calq__calib_replay_wants};
    CALQ_TRY(calq__act_cache_replay(cal->cache, &fn, cal, nt, err));
    return run_pass(cal, s, ins, n_in, calq__act_cache_batches(cal->cache), err);
}

/* The cache of the later passes, when some group needs one and opts allow it (cache_mb >= 0).
 * Its file goes to the record's folder (on the disk the user chose for outputs), else TMPDIR. */
static calq_status open_cache(calq__calib *cal, int cache_mb, const char *record_out, calq_error *err)
{
    bool multi = false;
    for (int k = 0; k < cal->n_groups; k++) multi |= calq__group_multipass(&cal->groups[k]);
    if (!multi || cache_mb < 0) return CALQ_OK;
    cal->cache_spill = cache_spill_mode();
    char dir[1024];
    calq__dirname(record_out, dir, sizeof dir);
    const char *dirs[3] = {dir, getenv("TMPDIR"), "/tmp"};
    int nt = cal->n_threads > 0 ? cal->n_threads : omp_get_max_threads();
    return calq__act_cache_create((size_t)cache_mb << 20, dirs, 3, nt, &cal->cache, err);
}

static void log_cache(const calq__calib *cal)
{
    if (!cal->log || !cal->cache) return;
    if (!calq__act_cache_usable(cal->cache))
        calq__log(CALQ_LOG_INFO, "calq: the activation cache gave up (%s); the later passes ran the model again",
                  calq__act_cache_why(cal->cache));
    else if (calq__act_cache_file_bytes(cal->cache) || calq__act_cache_batches(cal->cache) < cal->batch_num)
        calq__log(CALQ_LOG_INFO,
                  "calq: activation cache: %.1f MB in memory, %.1f MB in a temporary file, %d of %d batches (the "
                  "later passes ran the model for the others, cheaper than writing them; --cache-mb sets the "
                  "memory part)",
                  (double)calq__act_cache_mem_bytes(cal->cache) / 1048576.0,
                  (double)calq__act_cache_file_bytes(cal->cache) / 1048576.0, calq__act_cache_batches(cal->cache),
                  cal->batch_num);
}

calq_status calq__calib_inputs_alloc(const calq_model *m, const calq_data *d, calq_tensor *ins, int n_in,
                                     calq_error *err)
{
    calq_value_info *vs = calloc((size_t)n_in + 1, sizeof *vs);
    if (!vs) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    calq__data_input_shapes(d, m, vs, n_in);
    for (int i = 0; i < n_in; i++) {
        calq_value_info v = vs[i];
        ins[i].dtype = v.dtype == CALQ_DTYPE_UNDEFINED ? CALQ_DTYPE_FLOAT32 : v.dtype;
        ins[i].ndim = v.ndim;
        memcpy(ins[i].dims, v.dims, sizeof v.dims);
        int64_t n = calq_tensor_numel(&ins[i]);
        ins[i].data = malloc((size_t)(n > 0 ? n : 1) * calq_dtype_size(ins[i].dtype));
        if (!ins[i].data) {
            free(vs);
            return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory for input '%s'", v.name);
        }
    }
    free(vs);
    return CALQ_OK;
}

static calq_status run_batches(calq__calib *cal, int cache_mb, const char *record_out, calq_error *err)
{
    const calq_config *c = cal->cfg;
    calq_session_opts so = {.n_threads = cal->n_threads,
                            .max_arena_bytes = cal->max_arena_bytes,
                            .no_fusion = !c->do_fusion,
                            .skip_fusion_layers = (const char *const *)c->skip_fusion_layers,
                            .n_skip_fusion_layers = c->n_skip_fusion_layers};
    /* with DMQ layers the graph that runs is cal->g: folded already, and with the balancing Mul
     * nodes and weights the calibrators must see (calibrate_dmq.c) */
    bool dmq = calq__calib_has_dmq(cal);
    if (dmq) {
        so.no_fusion = 1;
        so.skip_fusion_layers = NULL;
        so.n_skip_fusion_layers = 0;
    }
    calq_session *s = NULL;
    CALQ_TRY(calq__session_create_graph(dmq ? cal->g : cal->m->g, &so, &s, err));
    const char **names = calloc((size_t)cal->n_groups + 1, sizeof *names);
    int n_in = calq_model_num_inputs(cal->m);
    calq_tensor *ins = calloc((size_t)n_in + 1, sizeof *ins);
    calq_status st = names && ins ? CALQ_OK : calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    for (int k = 0; st == CALQ_OK && k < cal->n_groups; k++) names[k] = cal->groups[k].tensor;
    if (st == CALQ_OK && cal->n_groups)
        st = calq_session_set_observer(s, calq__calib_observe, cal, names, cal->n_groups, err);
    if (st == CALQ_OK) st = calq__calib_inputs_alloc(cal->m, cal->data, ins, n_in, err);
    if (st == CALQ_OK) st = open_cache(cal, cache_mb, record_out, err);
    bool two = false, any_auto = false;
    for (int k = 0; k < cal->n_groups; k++) {
        two |= calq__group_multipass(&cal->groups[k]);
        any_auto |= cal->groups[k].algo == CALQ_ACT_AUTO;
    }
    cal->runs_expected = cal->batch_num * ((two ? 2 : 1) + (any_auto ? 1 : 0) + (dmq ? 1 : 0));
    for (cal->pass = 1; st == CALQ_OK && cal->n_groups; cal->pass++) {
        st = cal->pass == 1 ? run_pass(cal, s, ins, n_in, 0, err) : later_pass(cal, s, ins, n_in, err);
        if (st == CALQ_OK && !end_pass(cal)) break;
        if (cal->pass == 2) cal->runs_expected += cal->batch_num; /* a rare third pass (numerics.md) */
    }
    log_cache(cal);
    calq__act_cache_free(cal->cache); /* its file is already unlinked: closing it frees the disk */
    cal->cache = NULL;
    for (int i = 0; ins && i < n_in; i++) free(ins[i].data);
    free(ins);
    free(names);
    calq_session_free(s);
    bool pending = false;
    for (int k = 0; k < cal->n_groups; k++) pending |= cal->groups[k].auto_pending;
    if (st == CALQ_OK && pending) st = calq__calib_auto(cal, err);
    return st;
}

/* The record of every calibrated, not skipped layer, in the config's (model) order. */
static calq_status build_record(const calq__calib *cal, calq_record **out, calq_error *err)
{
    calq_record *r = calq__record_new();
    if (!r) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    for (int i = 0; i < cal->n_layers; i++) {
        const calq__calib_layer *l = &cal->layers[i];
        if (l->skipped) continue;
        const calq__calib_group *gr = &cal->groups[l->group];
        calq_record_layer *rl = calq__record_add(r, l->key, err);
        if (!rl) goto fail;
        rl->has_scale_d = rl->has_offset_d = true;
        rl->scale_d = gr->scale_d;
        rl->offset_d = gr->offset_d;
        if (l->n_balance) { /* tensor_balance_factor (§7.1) */
            if (!(rl->balance = malloc(sizeof(float) * (size_t)l->n_balance))) {
                calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
                goto fail;
            }
            memcpy(rl->balance, l->balance, sizeof(float) * (size_t)l->n_balance);
            rl->n_balance = (int)l->n_balance;
        }
        if (!l->n_w) continue; /* no weight factors (§7.1) */
        rl->scale_w = malloc((size_t)l->n_w * sizeof(float));
        rl->offset_w = malloc((size_t)l->n_w * sizeof(int64_t));
        if (!rl->scale_w || !rl->offset_w) {
            calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
            goto fail;
        }
        rl->n_scale_w = rl->n_offset_w = l->n_w;
        for (int c = 0; c < l->n_w; c++) {
            rl->scale_w[c] = l->scale_w[c];
            rl->offset_w[c] = l->offset_w[c];
        }
    }
    *out = r;
    return CALQ_OK;
fail:
    calq__record_free(r);
    return err->status;
}

/* Stages the config actually used: skipped layers get quant_enable false. The copy shares the
 * caller's strings; only its layer and tensor arrays are its own. */
static calq_status write_config(const calq__calib *cal, calq_staged_files *out, const char *path, calq_error *err)
{
    calq_config copy = *cal->cfg;
    copy.layers = malloc((size_t)(copy.n_layers + 1) * sizeof *copy.layers);
    copy.tensors = malloc((size_t)(copy.n_tensors + 1) * sizeof *copy.tensors);
    if (!copy.layers || !copy.tensors) {
        free(copy.layers);
        free(copy.tensors);
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    }
    memcpy(copy.layers, cal->cfg->layers, (size_t)copy.n_layers * sizeof *copy.layers);
    if (copy.n_tensors) memcpy(copy.tensors, cal->cfg->tensors, (size_t)copy.n_tensors * sizeof *copy.tensors);
    /* a skipped tensor_quantize entry is left out of the file (quant_enable false) */
    for (int i = 0; i < cal->n_layers; i++) {
        const calq_layer_config *lc = cal->layers[i].cfg;
        if (!cal->layers[i].skipped) continue;
        if (calq__calib_implicit(cal, i)) continue; /* not in the config */
        if (lc->tensor)
            copy.tensors[lc - cal->cfg->tensors].quant_enable = false;
        else
            copy.layers[lc - cal->cfg->layers].quant_enable = false;
    }
    calq_status st = calq__config_stage(&copy, out, path, err);
    free(copy.layers);
    free(copy.tensors);
    return st;
}

static calq_status finish(calq__calib *cal, const calq_calibrate_opts *o, calq_outputs *out, const char *record_out,
                          calq_error *err)
{
    int n_failed = 0, n_entries = 0; /* layers of the config (a layer may have several entries here) */
    for (int i = 0; i < cal->n_layers; i++)
        if (calq__calib_implicit(cal, i)) {
            cal->layers[i].skipped = calq__calib_layer_failed(cal, i); /* only the int8 exports lose it */
        } else if (cal->layers[i].primary == i) {
            n_entries++;
            n_failed += calq__calib_layer_failed(cal, i);
        }
    if (n_failed && (!o->skip_illegal || n_failed == n_entries)) {
        calq__calib_report(cal, err);
        if (n_failed == n_entries && o->skip_illegal)
            calq__prefix(err, "no layer is left to quantize with --skip-illegal");
        return err->status;
    }
    if (cal->log) log_done(cal);
    if (n_failed) {
        calq_error rep = {0};
        calq__calib_report(cal, &rep);
        char *remedy = strstr(rep.message, "\n  To quantize the rest"); /* the run already follows it */
        if (remedy) *remedy = 0;
        calq__log(CALQ_LOG_WARNING, "calq: warning: --skip-illegal: %d layer%s left in float:\n%s", n_failed,
                  n_failed == 1 ? "" : "s", rep.message);
        for (int i = 0; i < cal->n_layers; i++) cal->layers[i].skipped = calq__calib_layer_failed(cal, i);
    }
    if (cal->log && cal->n_implicit) {
        int n_t = 0;
        for (int i = 0; i < cal->n_layers; i++) n_t += calq__calib_implicit(cal, i) && !cal->layers[i].skipped;
        calq__log(CALQ_LOG_INFO, "calq: %d tensors between layers calibrated for the int8 QDQ / QOperator files", n_t);
    }
    calq_record *r = NULL;
    CALQ_TRY(build_record(cal, &r, err));
    /* staged together: the config is never replaced without its record (issue 14) */
    calq_status st = o->config_out ? write_config(cal, &out->staged, o->config_out, err) : CALQ_OK;
    if (st == CALQ_OK) st = calq__record_stage(r, &out->staged, record_out, err);
    if (st == CALQ_OK) st = calq__ada_stage(cal, &out->staged, record_out, err); /* beside the record */
    int n_rec = r->n_layers;
    calq__record_free(r);
    if (st != CALQ_OK || !cal->log) return st;
    calq__log(CALQ_LOG_INFO, "calq: calibrated %d layer%s in %.1f s; record %s", n_rec, n_rec == 1 ? "" : "s",
              calq__now() - cal->t_start, record_out);
    if (n_failed) {
        char list[2048];
        size_t at = 0;
        list[0] = 0;
        for (int i = 0; i < cal->n_layers && at < sizeof list; i++)
            if (cal->layers[i].skipped && cal->layers[i].primary == i)
                at += (size_t)snprintf(list + at, sizeof list - at, "%s%s", at ? ", " : "", cal->layers[i].cfg->name);
        calq__log(CALQ_LOG_INFO, "calq: skipped (kept in float, quant_enable false in %s): %s",
                  o->config_out ? o->config_out : "the config", list);
    }
    return CALQ_OK;
}

/* A model without any layer calq quantizes is told as such, not as a config that enables none:
 * a weight computed by a node (the DequantizeLinear of a quantized model) makes a Conv
 * unquantizable (§8.1). */
static calq_status require_quantizable(const calq_graph *g, calq_error *err)
{
    for (int i = 0; i < g->n_nodes; i++)
        if (calq__node_quantizable(g, i)) return CALQ_OK;
    return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL,
                      "the model has no layer calq quantizes, so there is nothing to calibrate: a Conv, "
                      "ConvTranspose, Gemm or MatMul needs its weight as a constant float32 tensor "
                      "(amct-reference.md §8.1; calq inspect lists the quantizable layers), and a weight computed "
                      "by a node other than a Cast to float32 or a data movement (the DequantizeLinear of an "
                      "already quantized model) is not one");
}

/* The output set of a calq_calibrate call given none: the lock of the record's prefix (the
 * record path without AMCT's "_record.txt", §1.3, so it is the lock `calq save` takes). */
static calq_status begin_own_outputs(const char *record_out, calq_outputs **out, calq_error *err)
{
    static const char suffix[] = "_record.txt";
    size_t n = strlen(record_out), k = sizeof suffix - 1;
    char *prefix = malloc(n + 1);
    if (!prefix) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    memcpy(prefix, record_out, n + 1);
    if (n > k && strcmp(prefix + n - k, suffix) == 0) prefix[n - k] = 0;
    calq_status st = calq__outputs_begin(prefix, out, err);
    free(prefix);
    return st;
}

calq_status calq_calibrate(calq_model *m, const calq_config *cfg, calq_data *data, const calq_calibrate_opts *opts,
                           const char *record_out, calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    calq_calibrate_opts o;
    calq_calibrate_opts_init(&o);
    if (opts) o = *opts;
    CALQ_REQUIRE(err, m);
    CALQ_REQUIRE(err, data);
    CALQ_REQUIRE(err, record_out);
    CALQ_TRY(calq__threads_resolve(o.n_threads, "calq_calibrate_opts.n_threads", &o.n_threads, err));
    /* Without the caller's output set, one of our own under the record's prefix: its lock is
     * held for the whole run, so a second run on the same files fails before any inference. */
    calq_outputs *outs = o.outputs;
    if (!outs) CALQ_TRY(begin_own_outputs(record_out, &outs, err));
    int first = outs->staged.n; /* files the caller staged before */
    calq_config *own = NULL;
    if (!cfg && calq_config_create(m, NULL, &own, err) != CALQ_OK) {
        if (outs != o.outputs) calq_outputs_abort(outs);
        return err->status;
    }
    if (!cfg) cfg = own;
    calq__calib cal = {.m = m,
                       .cfg = cfg,
                       .data = data,
                       .n_threads = o.n_threads,
                       .max_arena_bytes = o.max_arena_bytes,
                       .batch_num = cfg->batch_num,
                       .int8_tensors = o.int8_tensors != 0};
    cal.caffe_log = m->format == CALQ_FORMAT_CAFFE;
    cal.log = o.log != 0;
    cal.progress = o.progress;
    cal.progress_user = o.progress_user;
    cal.t_start = calq__now();
    calq_status st = calq__refuse_float16(m->g, err);
    if (st == CALQ_OK) st = calq_data_check(data, m, cfg->batch_num, err); /* preflight: before any inference */
    if (st == CALQ_OK && cfg->do_fusion) {
        int n_folded = 0;
        st = calq__graph_clone(m->g, &cal.g_owned, err);
        if (st == CALQ_OK)
            st = calq__pass_fold_conv_affine(cal.g_owned, (const char *const *)cfg->skip_fusion_layers,
                                             cfg->n_skip_fusion_layers, &n_folded, err);
    }
    cal.g = cal.g_owned ? cal.g_owned : m->g;
    if (st == CALQ_OK) st = calq__calib_setup(&cal, err);
    if (st == CALQ_OK && cal.n_layers == 0) {
        st = require_quantizable(m->g, err);
        if (st == CALQ_OK) st = calq__config_require_layers(cfg, "calibrate", err);
        if (st == CALQ_OK) st = calq__fail(err, CALQ_ERR_INTERNAL, NULL, "calibration set up no layer");
    }
    /* DMQ first: the weights (ARQ) and the activation passes see the balanced tensors */
    if (st == CALQ_OK) st = calq__calib_dmq(&cal, err);
    if (st == CALQ_OK) st = calq__calib_weights(&cal, err);
    if (st == CALQ_OK) st = calq__ada_setup(&cal, err);
    if (st == CALQ_OK) st = run_batches(&cal, o.cache_mb, record_out, err);
    if (st == CALQ_OK) st = calq__calib_ada(&cal, err); /* after the passes: the reservoirs are full */
    if (st == CALQ_OK) st = finish(&cal, &o, outs, record_out, err);
    if (outs != o.outputs) {
        if (st == CALQ_OK)
            st = calq__outputs_commit(outs, o.log != 0, err);
        else
            calq_outputs_abort(outs);
    } else if (st != CALQ_OK) {
        calq__staged_truncate(&outs->staged, first); /* nothing of this run stays staged */
    }
    calq__calib_free(&cal);
    calq_config_free(own);
    return st;
}
