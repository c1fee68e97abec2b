/* The calibration run's state, shared by calibrate.c (the run), calibrate_layers.c (which
 * layers, which calibrators, the weights), calibrate_observe.c (what each batch feeds) and
 * diagnose.c (the failure report).
 *
 * Ownership: a calq__calib owns its groups, layers, streams and histograms (calq__calib_free);
 * it borrows the model, the config and the data source from calq_calibrate's caller. */
#ifndef CALQ_CALIB_CALIBRATE_H
#define CALQ_CALIB_CALIBRATE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/strmap.h"
#include "calib/act_cache.h"
#include "calib/config.h"
#include "calq.h"
#include "graph/graph.h"

/* What the observer learns about a tensor besides what the calibrator needs: enough to say
 * where a bad value came from (batch, sample) without keeping any data. Pass 1 only. */
typedef struct calq__tensor_stats {
    uint64_t count, nan_count, pos_inf_count, neg_inf_count;
    float min, max;                      /* finite values; min > max while none was seen */
    int bad_batch, bad_sample, bad_kind; /* first non-finite value: kind 0 NaN, 1 +Inf, 2 -Inf; batch -1: none */
    float absmax;                        /* largest finite |x| */
    int absmax_batch, absmax_sample;     /* where it first appeared */
} calq__tensor_stats;

/* One calibrator of a group (calibrate_slots.c): IFMR, HFMG or one of calq's range
 * calibrators. A group has one; act_algo "auto" gives it one per candidate algorithm. */
#define CALQ__MAX_SLOTS 6
typedef struct calq__calib_slot {
    calq_act_algo algo;
    calq_ifmr_opts ifmr;
    calq_hfmg_opts hfmg;
    calq_range_opts range;
    calq_ifmr_stream *stream;   /* IFMR (owned; created on the first batch, when the size is known) */
    calq_hfmg *hist;            /* HFMG (owned) */
    calq_range_stream *rstream; /* the range calibrators (owned; created on the first batch) */
    double neg_weight;          /* mse: calq_act_config.neg_weight, given to rstream when it is created */
    bool fed, done, failed;
    calq_error err; /* its failure */
    float scale_d;
    int offset_d;
    double sse;  /* auto: squared error of the group's layer outputs with these factors */
    int same_as; /* auto: an earlier slot with the same factors (evaluated once), or -1 */
} calq__calib_slot;

/* One activation calibration: one per distinct input tensor of the enabled layers (§3.2). */
typedef struct calq__calib_group {
    const char *tensor; /* value name in the run's graph (owned by that graph) */
    int first_layer;    /* the group's first layer (index into calq__calib.layers): its config drives
                           the calibrator, as AMCT's shared calibration layer takes one layer's */
    int next_same;      /* the next group calibrating the same tensor (a symmetric-only reader beside
                           an asymmetric one), or -1 */
    int n_layers;
    calq_act_algo algo; /* the configured algorithm */
    int n_slots;
    calq__calib_slot slot[CALQ__MAX_SLOTS];
    int chosen;        /* the slot whose factors the group takes */
    bool auto_pending; /* auto: every candidate is computed, the evaluation pass decides */
    bool done, failed;
    calq_error err; /* the calibration's failure */
    float scale_d;
    int offset_d;
    calq__tensor_stats stats;
} calq__calib_group;

/* One calibrated input of a layer. A layer entry gets one per activation input of its kind
 * (input 0; MatMul with two variable inputs also input 1, §8.1), all next to each other, the
 * first one (input 0) holding the weights. */
typedef struct calq__calib_layer {
    const calq_layer_config *cfg; /* borrowed from the config */
    int input;                    /* the node input calibrated */
    int node;                     /* the layer's node in calq__calib.g */
    char *key;      /* its record key (§7.1): the layer name for input 0, else "<layer>:<input>" (owned) */
    int primary;    /* index of the layer's first entry here (itself for input 0) */
    int group;      /* index into calq__calib.groups */
    int n_w;        /* scale_w / offset_w entries (1 for AveragePool: 1.0 and 0, §7.1) */
    float *scale_w; /* owned */
    int *offset_w;  /* owned */
    bool w_failed;
    calq_error w_err;
    bool skipped;                /* left out of the record (skip_illegal) */
    struct calq__ada_layer *ada; /* ada_quantize: its sample reservoir, then its learned weights (owned) */
    /* DMQ balancing (cfg->dmq > 0, input 0 only; calibrate_dmq.c): the balance factors
     * (tensor_balance_factor, one per input channel; owned) and the per-channel max |x| of the
     * balancing pass (owned) */
    int64_t n_balance;
    float *balance;
    float *xmax;
} calq__calib_layer;

typedef struct calq__calib {
    calq_model *m;
    const calq_config *cfg;
    calq_data *data;
    bool caffe_log; /* Caffe's log lines (§1.4) rather than ONNX/PyTorch's */
    bool log;       /* AMCT lines and summary to the log callback */
    int n_threads;
    size_t max_arena_bytes;      /* calq_calibrate_opts.max_arena_bytes, for every session it creates */
    bool int8_tensors;           /* calq_calibrate_opts.int8_tensors */
    calq_layer_config *implicit; /* the inputs it adds, entries like tensor_quantize's (owned) */
    int n_implicit;
    const calq_graph *g; /* the graph that runs, folded as the session folds it */
    calq_graph *g_owned; /* the folded copy when there is one (owned) */
    int n_layers;
    calq__calib_layer *layers;
    int n_groups;
    calq__calib_group *groups;
    calq_strmap group_of; /* tensor -> its first group (next_same: the others); keys borrowed from g */
    /* the batch being run */
    int pass, batch, batch_num;
    /* the activation cache of the later passes (owned; NULL: every pass runs the model) */
    calq__act_cache *cache;
    int cache_spill;  /* calibrate.c's CACHE_SPILL_* (CALQ_CACHE_SPILL) */
    double observe_s; /* seconds in the observers so far (pass 1: statistics and cache writes) */
    /* progress */
    calq_progress_fn progress; /* the caller's, or NULL */
    void *progress_user;
    double t_start;
    int runs_done, runs_expected;
} calq__calib;

/* calibrate_layers.c: the enabled layers of cfg, their groups and calibrators (cal->g must be
 * set); then the weights of every layer (ARQ, §6.1). A weight that cannot be quantized marks
 * its layer (w_failed) instead of failing, so every layer is looked at. */
calq_status calq__calib_setup(calq__calib *cal, calq_error *err);
calq_status calq__calib_weights(calq__calib *cal, calq_error *err);
void calq__calib_free(calq__calib *cal);

/* calibrate_slots.c: a group's calibrators. setup fills the group's slots for its algorithm
 * (auto: every candidate); feed gives a batch to every slot still running (pass: the run's
 * pass number; HFMG takes pass 1 only) and fails the group when no slot is left; end_pass
 * returns true while some slot needs another pass over the same batches, else settles the
 * group (done, failed, or auto_pending). */
calq_status calq__group_setup(calq__calib_group *gr, const calq_layer_config *lc, int n_threads, calq_error *err);
/* batch_num 0: the total count is not known ahead (batches of several shapes) */
void calq__group_feed(calq__calib_group *gr, const float *x, size_t n, int pass, int batch_num, const char *layer);
bool calq__group_end_pass(calq__calib_group *gr, int pass);
/* True when the group's algorithm reads the batches more than once (IFMR, kl, mse, auto). */
bool calq__group_multipass(const calq__calib_group *gr);
void calq__group_free(calq__calib_group *gr);

/* calibrate.c: input buffers ins[n_in], one per input of m, of the shapes data d feeds
 * (calq__data_input_shapes: the model's, or another batch of them), reused for every batch
 * (data owned by the caller: free each ins[i].data). */
calq_status calq__calib_inputs_alloc(const calq_model *m, const calq_data *d, calq_tensor *ins, int n_in,
                                     calq_error *err);

/* calibrate_dmq.c: DMQ balancing (docs/numerics.md, "DMQ balancing"), before the weights and
 * the activation passes: when a layer has cfg->dmq, one pass over the batches collects max |x|
 * per input channel of each balanced layer's input, then the factors s are computed and cal->g
 * (made an owned copy) is rewritten so the layer reads X·(1/s) and W·s (graph/balance.h); the
 * layer's group then observes the balanced tensor. A no-op without DMQ layers. */
calq_status calq__calib_dmq(calq__calib *cal, calq_error *err);
/* True when some layer of the run is balanced (its graph cal->g then is what runs). */
bool calq__calib_has_dmq(const calq__calib *cal);

/* calibrate_auto.c: the evaluation pass of act_algo "auto" (one more pass over the batches):
 * every auto group's layers run once per distinct candidate with the activation fake-quantized
 * by that candidate's factors and the weights as ARQ gives them; the candidate with the smallest
 * squared error against the float layer outputs wins (IFMR on a tie). */
calq_status calq__calib_auto(calq__calib *cal, calq_error *err);

/* calibrate_ada.c: ada_quantize (docs/numerics.md). setup gives each ada layer its bounded
 * sample reservoir (after calq__calib_weights), feed adds a pass-1 batch of group `group`'s
 * tensor to the reservoirs of its ada layers, calib_ada learns every ada layer's rounding after
 * the passes, stage writes the side file `<record_out>.adaround` (calib/adaround.h): with every
 * ada layer kept in the record, or with none over a stale file of an earlier run. */
typedef struct calq__ada_layer calq__ada_layer;
calq_status calq__ada_setup(calq__calib *cal, calq_error *err);
void calq__ada_feed(calq__calib *cal, int group, const calq_tensor *t);
calq_status calq__calib_ada(calq__calib *cal, calq_error *err);
struct calq_staged_files;
calq_status calq__ada_stage(const calq__calib *cal, struct calq_staged_files *out, const char *record_out,
                            calq_error *err);
void calq__ada_free(calq__ada_layer *a);

/* calibrate_observe.c: the session observer (user = calq__calib), and the progress callback
 * (CALQ_ERR_GENERIC when it asks to stop). */
int calq__calib_observe(void *user, const char *tensor_name, const calq_tensor *t);
/* The replay of one cached tensor (a calq__act_cache_tensor_fn, user = calq__calib; `first`: the
 * first group of the tensor, as the observer stored it): fed to its groups as the observer
 * feeds them in a later pass. */
void calq__calib_replay_tensor(void *user, int batch, int first, const float *x, size_t n);
/* Whether a group of first's chain still takes data in this pass (the replay skips the others). */
bool calq__calib_replay_wants(void *user, int first);
double calq__now(void);
calq_status calq__calib_progress(calq__calib *cal, calq_error *err);

/* True when entry i is one of the int8 exports' own (int8_tensors): it never fails a run; when
 * its calibrator fails it is only left out of the record. */
bool calq__calib_implicit(const calq__calib *cal, int i);

/* diagnose.c: true when the layer of entry i cannot be quantized (the calibrator of one of its
 * inputs, or its weights, failed). */
bool calq__calib_layer_failed(const calq__calib *cal, int i);
/* The one error for every failed layer (user-journeys §2): the rule broken, the range, NaN/Inf
 * counts, where the bad value first appeared, the skip_layers line. Status NOT_SUPPORT when a
 * factor is illegal, else the first failure's status. */
calq_status calq__calib_report(const calq__calib *cal, calq_error *err);

#endif
