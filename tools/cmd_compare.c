/* calq compare: what quantization does to a model, layer by layer (user-journeys §5): the float
 * model and a quantized model calq wrote, on the same data; a table worst first on stdout, and
 * optionally JSON and a self-contained HTML report (calq_compare in the library). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char usage_text[] =
    "usage: calq compare --model FLOAT.onnx|NET.prototxt [--weights W.caffemodel]\n"
    "                    --quantized Q.onnx|Q.prototxt [--quantized-weights QW.caffemodel]\n"
    "                    (--data_dir \"d1/;d2/\" [--data_types T] | --images DIR | --npy SPEC)\n"
    "                    [--input_shape \"in:n,c,h,w;...\"] [--batch_num N] [--isolated]\n"
    "                    [--json FILE] [--html FILE] [--top N] [--threads N]\n"
    "\n"
    "  --quantized Q              any model calq wrote from FLOAT: AMCT's fake-quant or deploy model, QDQ,\n"
    "                             QOperator (ONNX), or AMCT's Caffe models (with --quantized-weights)\n"
    "  --images DIR               photos, with --resize WxH --mean M[,M,M] --std S[,S,S] --scale K [--bgr]\n"
    "                             (the data flags are calq calibration's)\n"
    "  --batch_num N              batches to run (default: all the data holds)\n"
    "  --isolated                 also each layer quantized alone, fed the float input (its own error,\n"
    "                             apart from what it inherits); one float pass for all layers\n"
    "  --json FILE                every figure as JSON; --html FILE: one self-contained report\n"
    "  --top N                    layers in the table (default 20; 0: all)\n"
    "  --threads N                OpenMP threads (the figures never depend on it)\n";

static void fmt(char *buf, size_t n, double v, const char *f)
{
    if (isinf(v))
        snprintf(buf, n, "%s", v > 0 ? "inf" : "-inf");
    else if (v != v)
        snprintf(buf, n, "-");
    else
        snprintf(buf, n, f, v);
}

static void print_table(const calq_compare_result *r, int top, bool isolated)
{
    char a[32], b[32], c[32], d[32], e[32], g[32], h[32];
    printf("calq compare: %s vs %s: %d batch%s; %d quantized layers, %d kept in float; %.1f s\n\n", r->model,
           r->quantized, r->n_batches, r->n_batches == 1 ? "" : "es", r->n_layers, r->n_float_layers, r->seconds);
    printf("model outputs              cosine   min cos  SQNR dB     rel L2  max |err|\n");
    for (int i = 0; i < r->n_outputs; i++) {
        const calq_compare_stats *s = &r->outputs[i].s;
        fmt(a, sizeof a, s->cosine, "%.6f");
        fmt(b, sizeof b, s->cosine_min, "%.6f");
        fmt(c, sizeof c, s->sqnr_db, "%.2f");
        fmt(d, sizeof d, s->rel_l2, "%.3g");
        fmt(e, sizeof e, s->max_abs, "%.3g");
        printf("  %-22s %8s  %8s %8s %10s %10s\n", r->outputs[i].name, a, b, c, d, e);
    }
    if (!r->n_layers) return;
    int *order = malloc(sizeof(int) * (size_t)r->n_layers);
    if (!order) return;
    calq_compare_worst_first(r, order);
    int n = top > 0 && top < r->n_layers ? top : r->n_layers;
    printf("\nlayers, worst first (by %s cosine; %d of %d%s):\n", isolated ? "isolated" : "accumulated", n, r->n_layers,
           n < r->n_layers ? ", --top N for more" : "");
    printf("  %4s %-22s %-14s %9s %9s %8s %8s %9s %9s %8s\n", "#", "layer", "op", "cosine", "isolated", "SQNR dB",
           "iso dB", "rel L2", "max |err|", "clipped%");
    for (int k = 0; k < n; k++) {
        const calq_compare_layer *l = &r->layers[order[k]];
        fmt(a, sizeof a, l->acc.cosine, "%.6f");
        fmt(b, sizeof b, l->has_isolated ? l->iso.cosine : NAN, "%.6f");
        fmt(c, sizeof c, l->acc.sqnr_db, "%.2f");
        fmt(d, sizeof d, l->has_isolated ? l->iso.sqnr_db : NAN, "%.2f");
        fmt(e, sizeof e, l->acc.rel_l2, "%.3g");
        fmt(g, sizeof g, l->acc.max_abs, "%.3g");
        fmt(h, sizeof h, l->has_range ? 100.0 * l->clip_fraction : NAN, "%.3g");
        printf("  %4d %-22s %-14s %9s %9s %8s %8s %9s %9s %8s\n", order[k], l->name, l->op, a, b, c, d, e, g, h);
    }
    free(order);
}

int calq_cmd_compare(int argc, char **argv)
{
    const char *model = NULL, *weights = NULL, *qmodel = NULL, *qweights = NULL, *shapes = NULL, *json = NULL;
    const char *html = NULL, *v;
    cli_data data;
    cli_data_init(&data);
    calq_compare_opts o;
    calq_compare_opts_init(&o);
    int top = 20;
    for (int i = 1; i < argc; i++) {
        int r;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage_text, stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--isolated")) {
            o.isolated = 1;
            continue;
        }
        const char *const names[] = {"--model",       "--weights", "--quantized", "--quantized-weights",
                                     "--input_shape", "--json",    "--html"};
        const char **vals[] = {&model, &weights, &qmodel, &qweights, &shapes, &json, &html};
        int hit = 0;
        for (int k = 0; k < 7 && !hit; k++)
            if ((hit = cli_opt(argc, argv, &i, names[k], vals[k])) < 0) return CLI_USAGE;
        if (hit) continue;
        if ((r = cli_data_opt(argc, argv, &i, &data)) != 0) {
            if (r < 0) return CLI_USAGE;
            continue;
        }
        const char *const nums[] = {"--batch_num", "--top", "--threads"};
        int *nvals[] = {&o.batch_num, &top, &o.n_threads};
        for (int k = 0; k < 3 && !hit; k++) {
            if ((hit = cli_opt(argc, argv, &i, nums[k], &v)) < 0) return CLI_USAGE;
            if (!hit) continue;
            char *end;
            long x = strtol(v, &end, 10);
            if (*end || end == v || x < (k == 1 ? 0 : 1) || x > 1000000)
                return cli_failf("%s needs a %s number, got '%s'", nums[k], k == 1 ? "non-negative" : "positive", v);
            *nvals[k] = (int)x;
        }
        if (hit) continue;
        fprintf(stderr, "calq compare: unknown option '%s'\n\n%s", argv[i], usage_text);
        return CLI_USAGE;
    }
    const char *missing = !model    ? "--model is required"
                          : !qmodel ? "--quantized is required"
                                    : cli_data_missing(&data);
    if (missing) {
        fprintf(stderr, "calq compare: %s\n\n%s", missing, usage_text);
        return CLI_USAGE;
    }
    calq_error err = {0};
    calq_model *fm = NULL, *qm = NULL;
    calq_data *d = NULL;
    calq_compare_result *res = NULL;
    int rc = 1;
    if (cli_load_model(model, weights, &fm, &err) != CALQ_OK) goto fail;
    if (cli_load_model(qmodel, qweights, &qm, &err) != CALQ_OK) goto fail;
    if (shapes &&
        (cli_apply_input_shapes(fm, shapes, &err) != CALQ_OK || cli_apply_input_shapes(qm, shapes, &err) != CALQ_OK))
        goto fail;
    if (cli_data_open(&data, NULL, fm, &d, &err) != CALQ_OK) goto fail;
    if (calq_compare(fm, qm, d, &o, model, qmodel, &res, &err) != CALQ_OK) goto fail;
    print_table(res, top, o.isolated);
    if (json && calq_compare_write_json(res, json, &err) != CALQ_OK) goto fail;
    if (html && calq_compare_write_html(res, html, &err) != CALQ_OK) goto fail;
    if (json || html)
        fprintf(stderr, "calq: wrote %s%s%s\n", json ? json : "", json && html ? " and " : "", html ? html : "");
    rc = 0;
    goto done;
fail:
    cli_fail(&err);
done:
    calq_compare_result_free(res);
    calq_data_free(d);
    calq_model_free(fm);
    calq_model_free(qm);
    return rc;
}
