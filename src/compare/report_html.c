/* calq_compare_write_html: one self-contained HTML file (inline CSS and SVG; no script, font or
 * image from anywhere) that any browser opens:
 *   the models and the run; the outputs' figures (table and SQNR bars);
 *   a per-layer chart in graph order (SQNR of each layer's output, accumulated as bars and
 *   isolated as dots, bands at 20 and 30 dB);
 *   the worst layers' input histograms (log counts) with the quantization range drawn on them;
 *   the table of every layer, worst first (with opts.sensitivity, by what each layer alone costs
 *   the model outputs). */
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/file.h"
#include "calq.h"

#define N_HIST   6    /* histograms of the worst layers */
#define SQNR_TOP 60.0 /* dB at the top of the layer chart */

static void esc(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

static const char *grade(double sqnr)
{
    return !(sqnr >= 20.0) ? "bad" : sqnr < 30.0 ? "warn" : "good";
}

static const char *colour(double sqnr)
{
    return !(sqnr >= 20.0) ? "#d73027" : sqnr < 30.0 ? "#f39c12" : "#2c7fb8";
}

static void num(FILE *f, double v, const char *fmt)
{
    if (isinf(v))
        fputs(v > 0 ? "&infin;" : "-&infin;", f);
    else if (v != v)
        fputs("n/a", f);
    else
        fprintf(f, fmt, v);
}

static double clampd(double v, double lo, double hi)
{
    return v != v ? lo : v < lo ? lo : v > hi ? hi : v;
}

static void outputs_section(FILE *f, const calq_compare_result *r)
{
    fputs("<h2>Model outputs</h2>\n<table><tr><th>output</th><th>cosine</th><th>min cosine (batch)</th>"
          "<th>SQNR dB</th><th>rel. L2</th><th>max |error|</th></tr>\n",
          f);
    for (int i = 0; i < r->n_outputs; i++) {
        const calq_compare_stats *s = &r->outputs[i].s;
        fprintf(f, "<tr class=\"%s\"><td class=\"l\">", grade(s->sqnr_db));
        esc(f, r->outputs[i].name);
        fputs("</td><td>", f);
        num(f, s->cosine, "%.6f");
        fputs("</td><td>", f);
        num(f, s->cosine_min, "%.6f");
        fputs("</td><td>", f);
        num(f, s->sqnr_db, "%.2f");
        fputs("</td><td>", f);
        num(f, s->rel_l2, "%.4g");
        fputs("</td><td>", f);
        num(f, s->max_abs, "%.4g");
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n", f);
    int h = 26 * r->n_outputs + 30;
    fprintf(f, "<svg width=\"620\" height=\"%d\" role=\"img\" aria-label=\"output SQNR\">\n", h);
    for (int i = 0; i < r->n_outputs; i++) {
        double s = r->outputs[i].s.sqnr_db, w = 400.0 * clampd(s, 0.0, SQNR_TOP) / SQNR_TOP;
        fprintf(f, "<text x=\"0\" y=\"%d\" font-size=\"12\">", 26 * i + 17);
        esc(f, r->outputs[i].name);
        fprintf(f, "</text><rect x=\"150\" y=\"%d\" width=\"%.1f\" height=\"18\" fill=\"%s\"/>", 26 * i + 4, w,
                colour(s));
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" font-size=\"12\">", 155 + w, 26 * i + 17);
        num(f, s, "%.1f dB");
        fputs("</text>\n", f);
    }
    fprintf(f, "<text x=\"150\" y=\"%d\" font-size=\"11\" fill=\"#555\">SQNR of each output (0 .. %.0f dB)</text>\n",
            h - 6, SQNR_TOP);
    fputs("</svg>\n", f);
}

static void layer_chart(FILE *f, const calq_compare_result *r)
{
    if (!r->n_layers) return;
    const int step = r->n_layers > 120 ? 6 : 14, left = 50, top = 20, plot = 260;
    int width = left + step * r->n_layers + 20, height = top + plot + (r->n_layers <= 120 ? 110 : 30);
    if (width < 700) width = 700;
    fputs("<h2>Layers in graph order</h2>\n<p>SQNR of each quantized layer's output: bars with everything "
          "quantized (accumulated), dots with the layer quantized alone (isolated). Below 20 dB is red, "
          "below 30 dB orange.</p>\n",
          f);
    fprintf(f, "<svg width=\"%d\" height=\"%d\" role=\"img\" aria-label=\"per-layer SQNR\">\n", width, height);
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#fbeaea\"/>\n", left,
            top + (int)(plot * (1 - 20.0 / SQNR_TOP)), step * r->n_layers, (int)(plot * 20.0 / SQNR_TOP));
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#fdf3e1\"/>\n", left,
            top + (int)(plot * (1 - 30.0 / SQNR_TOP)), step * r->n_layers, (int)(plot * 10.0 / SQNR_TOP));
    for (int db = 0; db <= (int)SQNR_TOP; db += 10) {
        double y = top + plot * (1 - db / SQNR_TOP);
        fprintf(f,
                "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ccc\"/><text x=\"4\" y=\"%.1f\" "
                "font-size=\"11\">%d dB</text>\n",
                left, y, left + step * r->n_layers, y, y + 4, db);
    }
    for (int i = 0; i < r->n_layers; i++) {
        const calq_compare_layer *l = &r->layers[i];
        double s = clampd(l->acc.sqnr_db, 0.0, SQNR_TOP), h = plot * s / SQNR_TOP;
        double x = left + step * i;
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" fill=\"%s\"><title>", x + 1,
                top + plot - h, step - 2, h, colour(l->acc.sqnr_db));
        esc(f, l->name);
        fputs(": ", f);
        num(f, l->acc.sqnr_db, "%.1f dB");
        fputs("</title></rect>\n", f);
        if (l->has_isolated) {
            double si = clampd(l->iso.sqnr_db, 0.0, SQNR_TOP);
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\" fill=\"#111\"/>\n", x + step / 2.0,
                    top + plot - plot * si / SQNR_TOP, step > 8 ? 3.0 : 2.0);
        }
        if (r->n_layers <= 120) {
            fprintf(f, "<text x=\"%.1f\" y=\"%d\" font-size=\"10\" transform=\"rotate(60 %.1f %d)\">", x + 3,
                    top + plot + 8, x + 3, top + plot + 8);
            esc(f, l->name);
            fputs("</text>\n", f);
        }
    }
    fputs("</svg>\n", f);
}

static void histogram(FILE *f, const calq_compare_layer *l)
{
    const int W = 380, H = 190, left = 10, plot_h = 130, top = 24;
    double mx = 0.0;
    for (int k = 0; k < CALQ_COMPARE_HIST_BINS; k++) mx = fmax(mx, log10(1.0 + (double)l->hist[k]));
    if (mx <= 0.0) mx = 1.0;
    double bw = (double)(W - 2 * left) / CALQ_COMPARE_HIST_BINS, span = l->hist_hi - l->hist_lo;
    fprintf(f, "<svg class=\"hist\" width=\"%d\" height=\"%d\" role=\"img\" aria-label=\"input histogram\">\n", W, H);
    fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#fafafa\" stroke=\"#ddd\"/>\n", W, H);
    fputs("<text x=\"8\" y=\"16\" font-size=\"12\" font-weight=\"bold\">", f);
    esc(f, l->name);
    fprintf(f, "</text><text x=\"%d\" y=\"16\" font-size=\"11\" text-anchor=\"end\">clipped %.3g %%</text>\n", W - 8,
            100.0 * l->clip_fraction);
    /* the quantization range, and the clipped regions shaded */
    double x0 = left + (l->clip_min - l->hist_lo) / span * (W - 2 * left);
    double x1 = left + (l->clip_max - l->hist_lo) / span * (W - 2 * left);
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"#f6d5d5\"/>\n", left, top, x0 - left,
            plot_h);
    fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"#f6d5d5\"/>\n", x1, top, W - left - x1,
            plot_h);
    for (int k = 0; k < CALQ_COMPARE_HIST_BINS; k++) {
        double h = plot_h * log10(1.0 + (double)l->hist[k]) / mx;
        if (h <= 0.0) continue;
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#3b6ea8\"/>\n", left + k * bw,
                top + plot_h - h, bw > 1.5 ? bw - 0.5 : bw, h);
    }
    fprintf(f,
            "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#c0392b\" stroke-width=\"2\" "
            "stroke-dasharray=\"4 2\"/>\n",
            x0, top - 4, x0, top + plot_h);
    fprintf(f,
            "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#c0392b\" stroke-width=\"2\" "
            "stroke-dasharray=\"4 2\"/>\n",
            x1, top - 4, x1, top + plot_h);
    fprintf(f,
            "<text x=\"%d\" y=\"%d\" font-size=\"11\">clip [%.4g, %.4g], input [%.4g, %.4g]; beyond the axis: %llu "
            "below, %llu above</text>\n",
            left, top + plot_h + 16, (double)l->clip_min, (double)l->clip_max, (double)l->in_min, (double)l->in_max,
            (unsigned long long)l->hist_below, (unsigned long long)l->hist_above);
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\" fill=\"#555\">axis %.4g .. %.4g, log counts</text>\n", left,
            top + plot_h + 31, (double)l->hist_lo, (double)l->hist_hi);
    fputs("</svg>\n", f);
}

static void layer_table(FILE *f, const calq_compare_result *r, const int *order)
{
    bool sens = false;
    for (int k = 0; k < r->n_layers; k++) sens = sens || r->layers[k].has_sensitivity;
    fprintf(f, "<h2>All layers, worst first%s</h2>\n",
            sens ? " (by the model outputs' cosine with the layer alone quantized)" : "");
    fputs("<table><tr><th>#</th><th>layer</th><th>op</th><th>outputs cosine, layer alone</th><th>cosine</th>"
          "<th>isolated cosine</th><th>SQNR dB</th><th>isolated SQNR dB</th><th>rel. L2</th><th>max |error|</th>"
          "<th>clipped %</th><th>scale</th><th>offset</th></tr>\n",
          f);
    for (int k = 0; k < r->n_layers; k++) {
        const calq_compare_layer *l = &r->layers[order[k]];
        double s = l->has_isolated ? l->iso.sqnr_db : l->acc.sqnr_db;
        fprintf(f, "<tr class=\"%s\"><td>%d</td><td class=\"l\">", grade(s), order[k]);
        esc(f, l->name);
        fputs("</td><td class=\"l\">", f);
        esc(f, l->op);
        fputs("</td><td>", f);
        if (l->has_sensitivity) num(f, l->sens.cosine, "%.6f");
        fputs("</td><td>", f);
        num(f, l->acc.cosine, "%.6f");
        fputs("</td><td>", f);
        if (l->has_isolated) num(f, l->iso.cosine, "%.6f");
        fputs("</td><td>", f);
        num(f, l->acc.sqnr_db, "%.2f");
        fputs("</td><td>", f);
        if (l->has_isolated) num(f, l->iso.sqnr_db, "%.2f");
        fputs("</td><td>", f);
        num(f, l->acc.rel_l2, "%.4g");
        fputs("</td><td>", f);
        num(f, l->acc.max_abs, "%.4g");
        fputs("</td><td>", f);
        num(f, 100.0 * l->clip_fraction, "%.3g");
        fputs("</td><td>", f);
        if (l->has_range)
            fprintf(f, "%.6g</td><td>%d", (double)l->scale, l->offset);
        else
            fputs("</td><td>", f);
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n", f);
}

static const char css[] =
    "body{font-family:sans-serif;margin:24px;color:#222;background:#fff;max-width:1400px}"
    "h1{font-size:22px}h2{font-size:17px;margin-top:30px;border-bottom:1px solid #ccc}"
    "table{border-collapse:collapse;font-size:12px;margin:8px 0}td,th{border:1px solid #ccc;padding:2px 6px;"
    "text-align:right}th{background:#e8eef8}td.l{text-align:left}tr.bad td{background:#f8d7d7}"
    "tr.warn td{background:#fcebc8}tr.good td{background:#e4f2e4}svg{display:block;margin:8px 0}"
    "svg.hist{display:inline-block;margin:6px}p.meta{color:#444}";

calq_status calq_compare_write_html(const calq_compare_result *r, const char *path, calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, r);
    CALQ_REQUIRE(err, path);
    int *order = malloc(sizeof(int) * ((size_t)r->n_layers + 1));
    if (!order) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "compare: out of memory writing %s", path);
    calq_compare_worst_first(r, order);
    calq_atomic_file af = {0};
    calq_status st = calq__atomic_open(&af, path, err);
    if (st != CALQ_OK) {
        free(order);
        return st;
    }
    FILE *f = af.fp;
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>calq compare: ", f);
    esc(f, r->quantized);
    fprintf(f, "</title><style>%s</style></head><body>\n<h1>calq compare</h1>\n<p class=\"meta\">float model <b>", css);
    esc(f, r->model);
    fputs("</b><br>quantized model <b>", f);
    esc(f, r->quantized);
    fprintf(f, "</b><br>%d batch%s; %d quantized layers compared, %d kept in float; %.1f s</p>\n", r->n_batches,
            r->n_batches == 1 ? "" : "es", r->n_layers, r->n_float_layers, r->seconds);
    outputs_section(f, r);
    layer_chart(f, r);
    int shown = 0;
    for (int k = 0; k < r->n_layers && shown < N_HIST; k++) {
        const calq_compare_layer *l = &r->layers[order[k]];
        if (!l->has_range || !(l->hist_hi > l->hist_lo)) continue;
        if (!shown)
            fputs("<h2>Worst layers: input histograms and quantization range</h2>\n<p>The float input of each "
                  "layer; dashed lines: the range its activation factors represent, values beyond it (shaded) "
                  "are clipped.</p>\n<div>\n",
                  f);
        histogram(f, l);
        shown++;
    }
    if (shown) fputs("</div>\n", f);
    if (r->n_layers) layer_table(f, r, order);
    fputs("</body></html>\n", f);
    free(order);
    return calq__atomic_commit(&af, err);
}
