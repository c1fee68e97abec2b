/* calq compare: what quantization does to a model, layer by layer (user-journeys §5): the float
 * model and a quantized model calq wrote, on the same data; a table worst first on stdout, and
 * optionally JSON and a self-contained HTML report (calq_compare in the library). */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef struct compare_args {
    const char *model, *weights, *qmodel, *qweights, *shapes, *json, *html;
    int batch_num, top, threads, isolated, sensitivity, max_arena_mb;
    cli_data data;
} compare_args;

static const cli_flag flags[] = {
    {.name = "--model",
     .type = CLI_STRING,
     .offset = offsetof(compare_args, model),
     .metavar = "M",
     .required = 1,
     .help = "the float model: FLOAT.onnx, or a Caffe NET.prototxt with --weights"},
    {.name = "--weights",
     .type = CLI_STRING,
     .offset = offsetof(compare_args, weights),
     .metavar = "W",
     .help = "the float model's Caffe weights (NET.caffemodel)"},
    {.name = "--quantized",
     .type = CLI_STRING,
     .offset = offsetof(compare_args, qmodel),
     .metavar = "Q",
     .required = 1,
     .help = "any model calq wrote from the float model: AMCT's fake-quant or deploy model,\n"
             "QDQ, QOperator (ONNX), or AMCT's Caffe models (with --quantized-weights)"},
    {.name = "--quantized-weights",
     .type = CLI_STRING,
     .offset = offsetof(compare_args, qweights),
     .metavar = "QW",
     .help = "the quantized Caffe model's weights"},
    CLI_DATA_FLAGS(compare_args, data),
    {.name = "--input_shape",
     .alias = "--input-shape",
     .type = CLI_CUSTOM,
     .offset = offsetof(compare_args, shapes),
     .metavar = "SPEC",
     .parse = cli_parse_input_shapes,
     .help = "fix input shapes of both models, e.g. input:2,3,240,320"},
    {.name = "--batch_num",
     .type = CLI_INT,
     .offset = offsetof(compare_args, batch_num),
     .metavar = "N",
     .lo = 1,
     .hi = 1000000000,
     .help = "batches to run (default: all the data holds)"},
    {.name = "--isolated",
     .type = CLI_SWITCH,
     .offset = offsetof(compare_args, isolated),
     .help = "also each layer quantized alone, fed the float input (its own error,\n"
             "apart from what it inherits); one float pass for all layers"},
    {.name = "--sensitivity",
     .type = CLI_SWITCH,
     .offset = offsetof(compare_args, sensitivity),
     .help = "also each layer quantized alone in the float model, measured at the model\n"
             "outputs: which layers cost the outputs most, amplification downstream\n"
             "included (one run of the model per layer and batch); ranks the table"},
    {.name = "--json",
     .type = CLI_STRING,
     .offset = offsetof(compare_args, json),
     .metavar = "FILE",
     .help = "every figure as JSON"},
    {.name = "--html",
     .type = CLI_STRING,
     .offset = offsetof(compare_args, html),
     .metavar = "FILE",
     .help = "one self-contained HTML report"},
    {.name = "--top",
     .type = CLI_INT,
     .offset = offsetof(compare_args, top),
     .metavar = "N",
     .lo = 0,
     .hi = INT_MAX,
     .help = "layers in the table (default 20; 0: all)"},
    {.name = "--max-arena-mb",
     .type = CLI_INT,
     .offset = offsetof(compare_args, max_arena_mb),
     .metavar = "N",
     .lo = 0,
     .hi = 1073741824,
     .help = CLI_MAX_ARENA_HELP},
    {.name = "--threads",
     .type = CLI_THREADS,
     .offset = offsetof(compare_args, threads),
     .metavar = "N",
     .help = "OpenMP threads (the figures never depend on it; at most 4 per processor)"},
};

static const cli_command command = {
    .name = "compare",
    .synopsis = "--model FLOAT.onnx|NET.prototxt [--weights W.caffemodel]\n"
                "--quantized Q.onnx|Q.prototxt [--quantized-weights QW.caffemodel]\n"
                "(--data_dir \"d1/;d2/\" [--data_types T] | --images DIR | --npy SPEC)\n"
                "[--input_shape \"in:n,c,h,w;...\"] [--batch_num N] [--isolated] [--sensitivity]\n"
                "[--json FILE] [--html FILE] [--top N] [--threads N] [--max-arena-mb N]",
    .flags = CLI_FLAGS(flags),
    .positional = CLI_NO_POSITIONAL,
};

static void fmt(char *buf, size_t n, double v, const char *f)
{
    if (isinf(v))
        snprintf(buf, n, "%s", v > 0 ? "inf" : "-inf");
    else if (v != v)
        snprintf(buf, n, "-");
    else
        snprintf(buf, n, f, v);
}

/* With --sensitivity: the layers that alone cost the outputs a tenth or more of what the whole
 * quantized model costs them, and what to do (user-journeys §5). The losses do not add up (errors
 * partly cancel), so the shares are an indication; the search measures. */
static void print_blame(const calq_compare_result *r, const int *order)
{
    double worst = 1.0;
    for (int i = 0; i < r->n_outputs; i++)
        if (r->outputs[i].s.count && r->outputs[i].s.cosine < worst) worst = r->outputs[i].s.cosine;
    double loss = 1.0 - worst;
    if (!(loss > 1e-6)) return;
    char names[1024];
    size_t at = 0;
    int n = 0;
    for (int k = 0; k < r->n_layers && n < 5; k++) {
        const calq_compare_layer *l = &r->layers[order[k]];
        if (!l->has_sensitivity || !(1.0 - l->sens.cosine >= 0.1 * loss)) break;
        if (!n)
            printf("\nthe outputs lose most to (each layer alone, as a share of the whole model's loss %.4g):", loss);
        printf("%s %s %.0f%%", n ? "," : "", l->name, 100.0 * (1.0 - l->sens.cosine) / loss);
        if (at + strlen(l->name) + 2 < sizeof names)
            at += (size_t)snprintf(names + at, sizeof names - at, "%s%s", n ? "," : "", l->name);
        n++;
    }
    if (!n) {
        printf("\nno layer alone costs the outputs a tenth of the model's loss (%.4g): it is spread over many\n"
               "layers; calq calibration --target-cosine C finds the fewest to keep in float\n",
               loss);
        return;
    }
    printf("\n  to keep %s in float: calq calibration ... --skip_layers %s (or \"quant_enable\": false in\n"
           "  the config); or let calq calibration --target-cosine C choose the fewest layers\n",
           n == 1 ? "it" : "them", names);
}

static void print_table(const calq_compare_result *r, int top, bool isolated, bool sensitivity)
{
    char a[32], b[32], c[32], d[32], e[32], g[32], h[32], x[32];
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
    printf("\nlayers, worst first (by %s; %d of %d%s):\n",
           sensitivity ? "the outputs' cosine with the layer alone quantized"
           : isolated  ? "isolated cosine"
                       : "accumulated cosine",
           n, r->n_layers, n < r->n_layers ? ", --top N for more" : "");
    if (sensitivity)
        printf("  %4s %-22s %-14s %9s", "#", "layer", "op", "outputs");
    else
        printf("  %4s %-22s %-14s", "#", "layer", "op");
    printf(" %9s %9s %8s %8s %9s %9s %8s\n", "cosine", "isolated", "SQNR dB", "iso dB", "rel L2", "max |err|",
           "clipped%");
    for (int k = 0; k < n; k++) {
        const calq_compare_layer *l = &r->layers[order[k]];
        fmt(a, sizeof a, l->acc.cosine, "%.6f");
        fmt(b, sizeof b, l->has_isolated ? l->iso.cosine : NAN, "%.6f");
        fmt(c, sizeof c, l->acc.sqnr_db, "%.2f");
        fmt(d, sizeof d, l->has_isolated ? l->iso.sqnr_db : NAN, "%.2f");
        fmt(e, sizeof e, l->acc.rel_l2, "%.3g");
        fmt(g, sizeof g, l->acc.max_abs, "%.3g");
        fmt(h, sizeof h, l->has_range ? 100.0 * l->clip_fraction : NAN, "%.3g");
        fmt(x, sizeof x, l->has_sensitivity ? l->sens.cosine : NAN, "%.6f");
        if (sensitivity)
            printf("  %4d %-22s %-14s %9s", order[k], l->name, l->op, x);
        else
            printf("  %4d %-22s %-14s", order[k], l->name, l->op);
        printf(" %9s %9s %8s %8s %9s %9s %8s\n", a, b, c, d, e, g, h);
    }
    if (sensitivity) {
        printf("outputs: the model outputs' cosine (the worst output's) with only that layer quantized\n");
        print_blame(r, order);
    }
    free(order);
}

int calq_cmd_compare(int argc, char **argv)
{
    compare_args a = {.top = 20, .max_arena_mb = -1};
    cli_data_init(&a.data);
    int r = cli_parse(&command, argc, argv, &a);
    if (r) return r < 0 ? 0 : r;
    size_t max_arena;
    if ((r = cli_max_arena(a.max_arena_mb, &max_arena)) != 0) return r;
    const char *missing = cli_data_missing(&a.data);
    if (missing) {
        fprintf(stderr, "calq: error: %s ('calq compare --help' lists the options)\n", missing);
        return CLI_USAGE;
    }
    calq_compare_opts o;
    calq_compare_opts_init(&o);
    o.isolated = a.isolated;
    o.sensitivity = a.sensitivity;
    o.batch_num = a.batch_num;
    o.n_threads = a.threads;
    o.max_arena_bytes = max_arena;
    const char *model = a.model, *weights = a.weights, *qmodel = a.qmodel, *qweights = a.qweights;
    const char *shapes = a.shapes, *json = a.json, *html = a.html;
    int top = a.top;
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
    if (cli_data_open(&a.data, NULL, fm, &d, &err) != CALQ_OK) goto fail;
    if (calq_compare(fm, qm, d, &o, model, qmodel, &res, &err) != CALQ_OK) goto fail;
    print_table(res, top, o.isolated, o.sensitivity);
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
