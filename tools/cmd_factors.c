/* calq factors: the quantization factors of one tensor (.npy) by IFMR, HFMG, calq's range
 * calibrators (minmax, percentile, kl, mse) or ARQ. */
#include <ctype.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* ALGO_RANGE + m: calq's range calibrator m (calq_range_method) */
enum { ALGO_IFMR, ALGO_HFMG, ALGO_ARQ, ALGO_RANGE };
enum { LAYOUT_DEFAULT = -1 };

typedef struct factors_args {
    const char *input, *layer;
    int algo, symmetric, batches, json, whole, per_tensor, group, threads, bins, num_bits, layout;
    int amct_float_loss, left_clip_loss;
    float max_p, min_p, search_step, search_range[2];
} factors_args;

static const cli_choice algos[] = {{"ifmr", ALGO_IFMR},
                                   {"hfmg", ALGO_HFMG},
                                   {"minmax", ALGO_RANGE + CALQ_RANGE_MINMAX},
                                   {"percentile", ALGO_RANGE + CALQ_RANGE_PERCENTILE},
                                   {"kl", ALGO_RANGE + CALQ_RANGE_KL},
                                   {"mse", ALGO_RANGE + CALQ_RANGE_MSE},
                                   {"arq", ALGO_ARQ},
                                   {NULL, 0}};
static const cli_choice layouts[] = {{"conv", CALQ_WEIGHTS_CONV},
                                     {"convtranspose", CALQ_WEIGHTS_CONV_TRANSPOSE},
                                     {"matrix", CALQ_WEIGHTS_MATRIX},
                                     {NULL, 0}};
static const cli_choice bin_counts[] = {{"1024", 1024}, {"2048", 2048}, {"4096", 4096}, {"8192", 8192}, {NULL, 0}};

/* A,B with 0 < A < B, both finite (IFMR's search range, amct-reference.md §3.1). */
static const char *parse_range(const char *v, void *dest)
{
    static const char want[] = "A,B with 0 < A < B (e.g. 0.7,1.3)";
    float *r = dest;
    char *end = NULL;
    double a = isspace((unsigned char)v[0]) ? NAN : strtod(v, &end);
    if (!end || *end != ',' || isspace((unsigned char)end[1])) return want;
    const char *p = end + 1;
    double b = strtod(p, &end);
    if (end == p || *end || !(a > 0 && a < b) || !isfinite((float)b)) return want;
    r[0] = (float)a;
    r[1] = (float)b;
    return NULL;
}

static const cli_flag flags[] = {
    {.name = "--algo",
     .type = CLI_ENUM,
     .offset = offsetof(factors_args, algo),
     .metavar = "A",
     .choices = algos,
     .help = "activations: ifmr (default), hfmg, or calq's minmax, percentile, kl, mse;\n"
             "weights: arq"},
    {.name = "--input",
     .type = CLI_STRING,
     .offset = offsetof(factors_args, input),
     .metavar = "T.npy",
     .required = 1,
     .help = "float32 or float64 tensor"},
    {.name = "--symmetric",
     .type = CLI_SWITCH,
     .offset = offsetof(factors_args, symmetric),
     .help = "symmetric activations (offset 0); default asymmetric"},
    {.name = "--batches",
     .type = CLI_INT,
     .offset = offsetof(factors_args, batches),
     .metavar = "K",
     .lo = 1,
     .hi = 1000000000,
     .help = "feed the tensor as K consecutive batches (default 1)"},
    {.name = "--json",
     .type = CLI_SWITCH,
     .offset = offsetof(factors_args, json),
     .help = "one JSON object instead of text"},
    {.name = "--layer",
     .type = CLI_STRING,
     .offset = offsetof(factors_args, layer),
     .metavar = "NAME",
     .help = "the layer name used in messages"},
    {.name = "--num-bits",
     .type = CLI_INT,
     .offset = offsetof(factors_args, num_bits),
     .metavar = "N",
     .lo = 2,
     .hi = 16,
     .help = "default 8 (arq: at most 8)"},
    {.type = CLI_HEADING, .help = "ifmr, percentile:"},
    {.name = "--max-percentile",
     .type = CLI_FLOAT,
     .offset = offsetof(factors_args, max_p),
     .metavar = "P",
     .lo = 0.5,
     .lo_open = 1,
     .hi = 1,
     .help = "in (0.5, 1]; default 0.999999 (percentile: 0.99999)"},
    {.name = "--min-percentile",
     .type = CLI_FLOAT,
     .offset = offsetof(factors_args, min_p),
     .metavar = "P",
     .lo = 0.5,
     .lo_open = 1,
     .hi = 1,
     .help = "in (0.5, 1]; default 0.999999 (percentile: 0.99999)"},
    {.name = "--search-range",
     .type = CLI_CUSTOM,
     .offset = offsetof(factors_args, search_range),
     .metavar = "A,B",
     .parse = parse_range,
     .help = "default 0.7,1.3"},
    {.name = "--search-step",
     .type = CLI_FLOAT,
     .offset = offsetof(factors_args, search_step),
     .metavar = "S",
     .lo = 0,
     .lo_open = 1,
     .hi = HUGE_VAL,
     .help = "default 0.01"},
    {.name = "--amct-float-loss",
     .type = CLI_SWITCH,
     .offset = offsetof(factors_args, amct_float_loss),
     .help = "sum losses in float as AMCT does (default: calq's double sums)"},
    {.name = "--whole",
     .type = CLI_SWITCH,
     .offset = offsetof(factors_args, whole),
     .help = "use the whole-buffer reference instead of the two-pass stream"},
    {.name = "--threads",
     .type = CLI_THREADS,
     .offset = offsetof(factors_args, threads),
     .metavar = "N",
     .help = "threads for the loss pass (results do not depend on it; at most 4 per processor)"},
    {.type = CLI_HEADING, .help = "hfmg, kl, mse:"},
    {.name = "--bins",
     .type = CLI_ENUM,
     .offset = offsetof(factors_args, bins),
     .metavar = "N",
     .choices = bin_counts,
     .help = "histogram bins: 1024, 2048, 4096 or 8192; default 4096 (hfmg), 2048 (kl, mse)"},
    {.name = "--left-clip-loss",
     .type = CLI_SWITCH,
     .offset = offsetof(factors_args, left_clip_loss),
     .help = "count the clipping error left of the range (AMCT's code does not)"},
    {.type = CLI_HEADING, .help = "arq:"},
    {.name = "--layout",
     .type = CLI_ENUM,
     .offset = offsetof(factors_args, layout),
     .metavar = "L",
     .choices = layouts,
     .help = "conv (default for >= 3 dims), convtranspose or matrix (default for 1-2 dims)"},
    {.name = "--group",
     .type = CLI_INT,
     .offset = offsetof(factors_args, group),
     .metavar = "G",
     .lo = 1,
     .hi = INT_MAX,
     .help = "groups of a ConvTranspose (default 1)"},
    {.name = "--per-tensor",
     .type = CLI_SWITCH,
     .offset = offsetof(factors_args, per_tensor),
     .help = "one scale for the whole weight (channel_wise false)"},
};

static const cli_command command = {
    .name = "factors",
    .synopsis = "--algo ifmr|hfmg|minmax|percentile|kl|mse|arq --input T.npy [options]",
    .about = "Prints scale and offset of one tensor (per output channel for arq).",
    .flags = CLI_FLAGS(flags),
    .positional = CLI_NO_POSITIONAL,
};

static void print_f(FILE *f, float v)
{
    fprintf(f, "%.9g", (double)v);
}

static calq_status run_ifmr(const float *x, size_t n, int batches, const calq_ifmr_opts *o, int whole,
                            const char *layer, calq_ifmr_result *res, int *passes, calq_error *err)
{
    if (whole) {
        *passes = 1;
        return calq_ifmr(x, n, o, layer, res, err);
    }
    calq_ifmr_stream *s = NULL;
    calq_status st = calq_ifmr_stream_create(o, (uint64_t)n, layer, &s, err);
    if (st != CALQ_OK) return st;
    int done = 0;
    *passes = 0;
    while (st == CALQ_OK && !done) {
        for (int b = 0; b < batches && st == CALQ_OK; b++) {
            size_t lo = n * (size_t)b / (size_t)batches, hi = n * (size_t)(b + 1) / (size_t)batches;
            st = calq_ifmr_stream_feed(s, x + lo, hi - lo, err);
        }
        if (st == CALQ_OK) st = calq_ifmr_stream_end_pass(s, &done, err);
        ++*passes;
    }
    if (st == CALQ_OK) st = calq_ifmr_stream_result(s, res, err);
    calq_ifmr_stream_free(s);
    return st;
}

static calq_status run_range(const float *x, size_t n, int batches, const calq_range_opts *o, const char *layer,
                             calq_range_result *res, int *passes, calq_error *err)
{
    calq_range_stream *s = NULL;
    calq_status st = calq_range_stream_create(o, (uint64_t)n, layer, &s, err);
    if (st != CALQ_OK) return st;
    int done = 0;
    *passes = 0;
    while (st == CALQ_OK && !done) {
        for (int b = 0; b < batches && st == CALQ_OK; b++) {
            size_t lo = n * (size_t)b / (size_t)batches, hi = n * (size_t)(b + 1) / (size_t)batches;
            st = calq_range_stream_feed(s, x + lo, hi - lo, err);
        }
        if (st == CALQ_OK) st = calq_range_stream_end_pass(s, &done, err);
        ++*passes;
    }
    if (st == CALQ_OK) st = calq_range_stream_result(s, res, err);
    calq_range_stream_free(s);
    return st;
}

static void print_range(const char *input, const char *layer, const calq_range_opts *o, const calq_range_result *r,
                        int batches, int passes, int json)
{
    const char *name = calq_range_method_name(o->method);
    if (json) {
        printf("{\"algo\": \"%s\", \"input\": \"%s\", \"layer\": \"%s\", \"asymmetric\": %s, \"scale\": ", name, input,
               layer, o->asymmetric ? "true" : "false");
        print_f(stdout, r->scale);
        printf(", \"offset\": %d, \"clip_min\": ", r->offset);
        print_f(stdout, r->clip_min);
        printf(", \"clip_max\": ");
        print_f(stdout, r->clip_max);
        printf(", \"best_bins\": %d, \"n_candidates\": %d, \"n_illegal\": %d, \"loss\": %.17g, \"count\": %" PRIu64
               ", \"batches\": %d, \"passes\": %d}\n",
               r->best_bins, r->n_candidates, r->n_illegal, r->best_loss, r->count, batches, passes);
        return;
    }
    printf("algo: %s (%s)\nscale: ", name, o->asymmetric ? "asymmetric" : "symmetric");
    print_f(stdout, r->scale);
    printf("\noffset: %d\nclip: [", r->offset);
    print_f(stdout, r->clip_min);
    printf(", ");
    print_f(stdout, r->clip_max);
    printf("]");
    if (o->method == CALQ_RANGE_KL || o->method == CALQ_RANGE_MSE)
        printf("  (window %d bins of %d, %d candidates, %d excluded)\n%s: %.9g", r->best_bins, o->num_bins,
               r->n_candidates, r->n_illegal, o->method == CALQ_RANGE_KL ? "divergence" : "loss (mse)", r->best_loss);
    printf("\nelements: %" PRIu64 " in %d batches, %d passes\n", r->count, batches, passes);
}

int calq_cmd_factors(int argc, char **argv)
{
    calq_ifmr_opts io;
    calq_ifmr_opts_init(&io);
    calq_hfmg_opts ho;
    calq_hfmg_opts_init(&ho);
    calq_arq_opts ao;
    calq_arq_opts_init(&ao);
    factors_args a = {.algo = ALGO_IFMR,
                      .layer = "",
                      .batches = 1,
                      .group = 1,
                      .bins = 0, /* not given: each algorithm's default */
                      .num_bits = io.num_bits,
                      .layout = LAYOUT_DEFAULT,
                      .max_p = NAN, /* not given: each algorithm's default */
                      .min_p = NAN,
                      .search_step = io.search_step,
                      .search_range = {io.search_start, io.search_end}};
    int r = cli_parse(&command, argc, argv, &a);
    if (r) return r < 0 ? 0 : r;
    if (a.algo == ALGO_ARQ && a.num_bits > 8) {
        cli_failf("--num-bits must be a whole number from 2 to 8 for arq, not '%d'", a.num_bits);
        return CLI_USAGE;
    }
    if (!isnan(a.max_p)) io.max_percentile = a.max_p;
    if (!isnan(a.min_p)) io.min_percentile = a.min_p;
    io.search_start = a.search_range[0];
    io.search_end = a.search_range[1];
    io.search_step = a.search_step;
    io.amct_float_loss = a.amct_float_loss;
    io.n_threads = a.threads;
    if (a.bins) ho.num_bins = a.bins;
    ho.left_clip_loss = a.left_clip_loss;
    ao.num_bits = io.num_bits = ho.num_bits = a.num_bits;
    const char *input = a.input, *layer = a.layer;
    int symmetric = a.symmetric, batches = a.batches, json = a.json, whole = a.whole, per_tensor = a.per_tensor;
    int group = a.group, is_ifmr = a.algo == ALGO_IFMR, is_hfmg = a.algo == ALGO_HFMG;
    int range = a.algo >= ALGO_RANGE ? a.algo - ALGO_RANGE : -1;

    calq_error err = {0};
    calq_tensor t = {0};
    if (calq_npy_read(input, &t, &err) != CALQ_OK) return cli_fail(&err);
    int64_t numel = calq_tensor_numel(&t);
    if (t.dtype == CALQ_DTYPE_FLOAT64) { /* narrow to float32: the algorithms are float32 */
        float *f = malloc((size_t)(numel > 0 ? numel : 1) * sizeof *f);
        if (!f) {
            calq_tensor_free_data(&t);
            return cli_failf("factors: out of memory");
        }
        for (int64_t i = 0; i < numel; i++) f[i] = (float)((const double *)t.data)[i];
        calq_tensor_free_data(&t);
        t.data = f;
        t.dtype = CALQ_DTYPE_FLOAT32;
    }
    if (t.dtype != CALQ_DTYPE_FLOAT32) {
        cli_failf("factors: %s holds %s; expected float32 or float64", input, calq_dtype_name(t.dtype));
        calq_tensor_free_data(&t);
        return 1;
    }
    const float *x = t.data;
    size_t n = (size_t)numel;
    calq_status st = CALQ_OK;
    int rc = 0;

    if (range >= 0) {
        calq_range_opts ro;
        calq_range_opts_init(&ro, (calq_range_method)range);
        ro.asymmetric = !symmetric;
        ro.n_threads = io.n_threads;
        ro.num_bits = io.num_bits;
        if (a.bins) ro.num_bins = a.bins;
        if (!isnan(a.max_p)) ro.max_percentile = a.max_p;
        if (!isnan(a.min_p)) ro.min_percentile = a.min_p;
        calq_range_result res;
        int passes = 0;
        st = run_range(x, n, batches, &ro, layer, &res, &passes, &err);
        if (st == CALQ_OK) print_range(input, layer, &ro, &res, batches, passes, json);
    } else if (is_ifmr) {
        io.asymmetric = !symmetric;
        calq_ifmr_result res;
        int passes = 0;
        st = run_ifmr(x, n, batches, &io, whole, layer, &res, &passes, &err);
        if (st == CALQ_OK && json) {
            printf("{\"algo\": \"ifmr\", \"input\": \"%s\", \"layer\": \"%s\", \"asymmetric\": %s, \"scale\": ", input,
                   layer, symmetric ? "false" : "true");
            print_f(stdout, res.scale);
            printf(", \"offset\": %d, \"clip_max\": ", res.offset);
            print_f(stdout, res.clip_max);
            printf(", \"max_init\": ");
            print_f(stdout, res.max_init);
            printf(", \"min_init\": ");
            print_f(stdout, res.min_init);
            printf(", \"best_index\": %d, \"n_candidates\": %d, \"n_illegal\": %d, \"loss\": %.17g, \"count\": %" PRIu64
                   ", \"batches\": %d, \"passes\": %d}\n",
                   res.best_index, res.n_candidates, res.n_illegal, res.best_loss, res.count, batches, passes);
        } else if (st == CALQ_OK) {
            printf("algo: ifmr (%s)\nscale: ", symmetric ? "symmetric" : "asymmetric");
            print_f(stdout, res.scale);
            printf("\noffset: %d\nclip: [", res.offset);
            print_f(stdout, symmetric ? -res.clip_max : res.min_init);
            printf(", ");
            print_f(stdout, res.clip_max);
            printf("]  (ratio index %d of %d, %d illegal)\nloss (mse): %.9g\nelements: %" PRIu64
                   " in %d batches, %d passes\n",
                   res.best_index, res.n_candidates, res.n_illegal, res.best_loss, res.count, batches, passes);
        }
    } else if (is_hfmg) {
        ho.asymmetric = !symmetric;
        calq_hfmg *h = NULL;
        st = calq_hfmg_create(&ho, layer, &h, &err);
        for (int b = 0; b < batches && st == CALQ_OK; b++) {
            size_t lo = n * (size_t)b / (size_t)batches, hi = n * (size_t)(b + 1) / (size_t)batches;
            st = calq_hfmg_feed(h, x + lo, hi - lo, &err);
        }
        calq_hfmg_result res;
        if (st == CALQ_OK) st = calq_hfmg_compute(h, &res, &err);
        calq_hfmg_free(h);
        if (st == CALQ_OK && json) {
            printf("{\"algo\": \"hfmg\", \"input\": \"%s\", \"layer\": \"%s\", \"asymmetric\": %s, \"num_bins\": %d, "
                   "\"scale\": ",
                   input, layer, symmetric ? "false" : "true", ho.num_bins);
            print_f(stdout, res.scale);
            printf(", \"offset\": %d, \"clip_min\": ", res.offset);
            print_f(stdout, res.clip_min);
            printf(", \"clip_max\": ");
            print_f(stdout, res.clip_max);
            printf(", \"best_left\": %d, \"best_right\": %d, \"n_candidates\": %d, \"count\": %" PRIu64
                   ", \"batches\": %d}\n",
                   res.best_left, res.best_right, res.n_candidates, res.count, batches);
        } else if (st == CALQ_OK) {
            printf("algo: hfmg (%s, %d bins)\nscale: ", symmetric ? "symmetric" : "asymmetric", ho.num_bins);
            print_f(stdout, res.scale);
            printf("\noffset: %d\nclip: [", res.offset);
            print_f(stdout, res.clip_min);
            printf(", ");
            print_f(stdout, res.clip_max);
            printf("]  (bins %d..%d, %d candidates)\nelements: %" PRIu64 " in %d batches\n", res.best_left,
                   res.best_right, res.n_candidates, res.count, batches);
        }
    } else {
        calq_weight_layout layout = a.layout != LAYOUT_DEFAULT ? (calq_weight_layout)a.layout
                                    : t.ndim >= 3              ? CALQ_WEIGHTS_CONV
                                                               : CALQ_WEIGHTS_MATRIX;
        ao.channel_wise = !per_tensor && layout != CALQ_WEIGHTS_MATRIX;
        int64_t ns = calq_arq_num_scales(&t, layout, group, &ao);
        float *scale = malloc((size_t)(ns > 0 ? ns : 1) * sizeof *scale);
        int *offset = malloc((size_t)(ns > 0 ? ns : 1) * sizeof *offset);
        if (!scale || !offset) {
            st = CALQ_ERR_OUT_OF_MEMORY;
            snprintf(err.message, sizeof err.message, "factors: out of memory");
        } else {
            st = calq_arq_quantize(&t, layout, group, &ao, layer, scale, offset, NULL, NULL, &err);
        }
        if (st == CALQ_OK) {
            printf(json ? "{\"algo\": \"arq\", \"input\": \"%s\", \"layer\": \"%s\", \"channel_wise\": %s, \"scale\": ["
                        : "algo: arq (%s%s, %s)\nscale:",
                   json ? input : (ao.channel_wise ? "per channel" : "per tensor"), json ? layer : "",
                   json ? (ao.channel_wise ? "true" : "false")
                        : (layout == CALQ_WEIGHTS_CONV             ? "conv layout"
                           : layout == CALQ_WEIGHTS_CONV_TRANSPOSE ? "convtranspose layout"
                                                                   : "matrix layout"));
            for (int64_t c = 0; c < ns; c++) {
                fputs(json ? (c ? ", " : "") : " ", stdout);
                print_f(stdout, scale[c]);
            }
            printf(json ? "], \"offset\": [" : "\noffset:");
            for (int64_t c = 0; c < ns; c++) printf(json ? "%s%d" : "%s%d", json ? (c ? ", " : "") : " ", offset[c]);
            printf(json ? "]}\n" : "\n");
        }
        free(scale);
        free(offset);
    }
    if (st != CALQ_OK) rc = cli_fail(&err);
    calq_tensor_free_data(&t);
    return rc;
}
