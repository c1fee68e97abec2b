/* calq factors: the quantization factors of one tensor (.npy) by IFMR, HFMG, calq's range
 * calibrators (minmax, percentile, kl, mse) or ARQ. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: calq factors --algo ifmr|hfmg|minmax|percentile|kl|mse|arq --input T.npy [options]\n"
               "\n"
               "Prints scale and offset of one tensor (per output channel for arq).\n"
               "\n"
               "  --algo A             activations: ifmr (default), hfmg, or calq's minmax, percentile, kl, mse;\n"
               "                       weights: arq\n"
               "  --input T.npy        float32 or float64 tensor\n"
               "  --symmetric          symmetric activations (offset 0); default asymmetric\n"
               "  --batches K          feed the tensor as K consecutive batches (default 1)\n"
               "  --json               one JSON object instead of text\n"
               "  --layer NAME         the layer name used in messages\n"
               "ifmr:\n"
               "  --max-percentile P   default 0.999999     --min-percentile P   default 0.999999\n"
               "  --search-range A,B   default 0.7,1.3      --search-step S      default 0.01\n"
               "  --amct-float-loss    sum losses in float as AMCT does (default: calq's double sums)\n"
               "  --whole              use the whole-buffer reference instead of the two-pass stream\n"
               "  --threads N          threads for the loss pass (results do not depend on it)\n"
               "hfmg:\n"
               "  --bins N             1024, 2048, 4096 (default) or 8192\n"
               "  --left-clip-loss     count the clipping error left of the range (AMCT's code does not)\n"
               "percentile: --max-percentile P, --min-percentile P   default 0.99999\n"
               "kl, mse:    --bins N  histogram bins, 1024, 2048 (default), 4096 or 8192\n"
               "arq:\n"
               "  --layout L           conv (default for >= 3 dims), convtranspose or matrix (default for 1-2 dims)\n"
               "  --group G            groups of a ConvTranspose (default 1)\n"
               "  --per-tensor         one scale for the whole weight (channel_wise false)\n"
               "  --num-bits N         default 8\n");
}

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

static int parse_range(const char *v, float *a, float *b)
{
    char *end = NULL;
    *a = strtof(v, &end);
    if (end == v || *end != ',') return 0;
    const char *p = end + 1;
    *b = strtof(p, &end);
    return end != p && *end == 0;
}

int calq_cmd_factors(int argc, char **argv)
{
    const char *algo = "ifmr", *input = NULL, *layer = "", *layout_s = NULL, *v = NULL;
    int symmetric = 0, batches = 1, json = 0, whole = 0, per_tensor = 0, group = 1, bins_given = 0, pct_given = 0;
    calq_ifmr_opts io;
    calq_ifmr_opts_init(&io);
    calq_hfmg_opts ho;
    calq_hfmg_opts_init(&ho);
    calq_arq_opts ao;
    calq_arq_opts_init(&ao);
    for (int i = 1; i < argc; i++) {
        int r;
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--symmetric")) {
            symmetric = 1;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--whole")) {
            whole = 1;
        } else if (!strcmp(a, "--per-tensor")) {
            per_tensor = 1;
        } else if (!strcmp(a, "--amct-float-loss")) {
            io.amct_float_loss = 1;
        } else if (!strcmp(a, "--left-clip-loss")) {
            ho.left_clip_loss = 1;
        } else if ((r = cli_opt(argc, argv, &i, "--algo", &algo)) != 0) {
            if (r < 0) return CLI_USAGE;
        } else if ((r = cli_opt(argc, argv, &i, "--input", &input)) != 0) {
            if (r < 0) return CLI_USAGE;
        } else if ((r = cli_opt(argc, argv, &i, "--layer", &layer)) != 0) {
            if (r < 0) return CLI_USAGE;
        } else if ((r = cli_opt(argc, argv, &i, "--layout", &layout_s)) != 0) {
            if (r < 0) return CLI_USAGE;
        } else if ((r = cli_opt(argc, argv, &i, "--batches", &v)) != 0) {
            if (r < 0) return CLI_USAGE;
            batches = atoi(v);
        } else if ((r = cli_opt(argc, argv, &i, "--group", &v)) != 0) {
            if (r < 0) return CLI_USAGE;
            group = atoi(v);
        } else if ((r = cli_opt(argc, argv, &i, "--threads", &v)) != 0) {
            if (r < 0) return CLI_USAGE;
            io.n_threads = atoi(v);
        } else if ((r = cli_opt(argc, argv, &i, "--bins", &v)) != 0) {
            if (r < 0) return CLI_USAGE;
            ho.num_bins = atoi(v);
            bins_given = 1;
        } else if ((r = cli_opt(argc, argv, &i, "--num-bits", &v)) != 0) {
            if (r < 0) return CLI_USAGE;
            ao.num_bits = io.num_bits = ho.num_bits = atoi(v);
        } else if ((r = cli_opt(argc, argv, &i, "--max-percentile", &v)) != 0) {
            if (r < 0) return CLI_USAGE;
            io.max_percentile = strtof(v, NULL);
            pct_given |= 1;
        } else if ((r = cli_opt(argc, argv, &i, "--min-percentile", &v)) != 0) {
            if (r < 0) return CLI_USAGE;
            io.min_percentile = strtof(v, NULL);
            pct_given |= 2;
        } else if ((r = cli_opt(argc, argv, &i, "--search-step", &v)) != 0) {
            if (r < 0) return CLI_USAGE;
            io.search_step = strtof(v, NULL);
        } else if ((r = cli_opt(argc, argv, &i, "--search-range", &v)) != 0) {
            if (r < 0) return CLI_USAGE;
            if (!parse_range(v, &io.search_start, &io.search_end)) {
                cli_failf("--search-range '%s': expected A,B (e.g. 0.7,1.3)", v);
                return CLI_USAGE;
            }
        } else {
            cli_failf("factors: unknown option '%s'", a);
            usage(stderr);
            return CLI_USAGE;
        }
    }
    if (!input) {
        cli_failf("factors: --input T.npy is required");
        usage(stderr);
        return CLI_USAGE;
    }
    if (batches < 1) {
        cli_failf("factors: --batches must be at least 1");
        return CLI_USAGE;
    }
    int is_ifmr = !strcmp(algo, "ifmr"), is_hfmg = !strcmp(algo, "hfmg"), is_arq = !strcmp(algo, "arq");
    int range = -1;
    for (int m = CALQ_RANGE_MINMAX; m <= CALQ_RANGE_MSE; m++)
        if (!strcmp(algo, calq_range_method_name((calq_range_method)m))) range = m;
    if (!is_ifmr && !is_hfmg && !is_arq && range < 0) {
        cli_failf("factors: --algo '%s': expected ifmr, hfmg, minmax, percentile, kl, mse or arq", algo);
        return CLI_USAGE;
    }

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
        if (bins_given) ro.num_bins = ho.num_bins;
        if (pct_given & 1) ro.max_percentile = io.max_percentile;
        if (pct_given & 2) ro.min_percentile = io.min_percentile;
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
        calq_weight_layout layout = t.ndim >= 3 ? CALQ_WEIGHTS_CONV : CALQ_WEIGHTS_MATRIX;
        if (layout_s) {
            if (!strcmp(layout_s, "conv")) {
                layout = CALQ_WEIGHTS_CONV;
            } else if (!strcmp(layout_s, "convtranspose")) {
                layout = CALQ_WEIGHTS_CONV_TRANSPOSE;
            } else if (!strcmp(layout_s, "matrix")) {
                layout = CALQ_WEIGHTS_MATRIX;
            } else {
                cli_failf("factors: --layout '%s': expected conv, convtranspose or matrix", layout_s);
                calq_tensor_free_data(&t);
                return CLI_USAGE;
            }
        }
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
