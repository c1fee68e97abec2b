/* The failure report of a calibration run (docs: user-journeys §2). AMCT aborts on the first
 * layer whose scale is illegal (amct-reference.md §4.3) and the user learns one layer per run;
 * calq looks at every layer, then reports all of them in one error: the rule broken in AMCT's
 * words (§2.1, §3.3), the input range, the NaN/Inf counts, the first batch and sample (and
 * file) where the bad value appeared, and the remedy of §4.3 as the exact skip_layers line. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "calib/calibrate.h"

bool calq__calib_layer_failed(const calq__calib *cal, int i)
{
    const int p = cal->layers[i].primary;
    for (int k = p; k < cal->n_layers && cal->layers[k].primary == p; k++)
        if (cal->layers[k].w_failed || cal->groups[cal->layers[k].group].failed) return true;
    return false;
}

/* Entry i is the first of its layer: the one layer lists and counts name. */
static bool first_of_layer(const calq__calib *cal, int i)
{
    return cal->layers[i].primary == i && !calq__calib_implicit(cal, i);
}

bool calq__calib_implicit(const calq__calib *cal, int i)
{
    const calq_layer_config *lc = cal->layers[i].cfg;
    return cal->n_implicit && lc >= cal->implicit && lc < cal->implicit + cal->n_implicit;
}

typedef struct sbuf {
    char *p;
    size_t n, at;
} sbuf;

static void put(sbuf *b, const char *fmt, ...) CALQ_PRINTF(2, 3);
static void put(sbuf *b, const char *fmt, ...)
{
    if (b->at >= b->n) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(b->p + b->at, b->n - b->at, fmt, ap);
    va_end(ap);
    if (k > 0) b->at += (size_t)k < b->n - b->at ? (size_t)k : b->n - b->at;
}

/* AMCT's text for the rule a calibrator's message reports (src/quant writes it first), and the
 * scale it names, when there is one. */
static void rule_text(const char *msg, char *rule, size_t n, double *scale)
{
    static const char *const fixed[] = {"IFMR calibration data has inf value.", "IFMR calibration data has nan value.",
                                        "The activation to be quantized has invalid value inf or nan!",
                                        "ArqQuantCPU scale is illegal."};
    *scale = -1.0;
    const char *s = strstr(msg, "Not support scale");
    if (s) {
        const char *cs = strstr(s, "currentScale: ");
        size_t len = strcspn(s, "(");
        if (cs) {
            char *end;
            *scale = strtod(cs + 14, &end);
            len = (size_t)(end - s);
        } else {
            const char *dot = strchr(s, '.');
            len = dot ? (size_t)(dot - s) + 1 : strlen(s);
        }
        const char *arq = strstr(msg, "ArqQuantCPU scale is illegal.");
        snprintf(rule, n, "%s%.*s", arq ? "ArqQuantCPU scale is illegal. " : "", (int)len, s);
        while (*rule && rule[strlen(rule) - 1] == ' ') rule[strlen(rule) - 1] = 0;
        return;
    }
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        if (strstr(msg, fixed[i])) {
            snprintf(rule, n, "%s", fixed[i]);
            return;
        }
    snprintf(rule, n, "%s", msg);
}

static void where(const calq__calib *cal, int batch, int sample, char *buf, size_t n)
{
    char src[1024];
    calq_data_sample_source(cal->data, batch, sample, src, sizeof src);
    snprintf(buf, n, "batch %d (%s)", batch, src);
}

static void group_line(const calq__calib *cal, const calq__calib_group *gr, sbuf *b)
{
    const calq__tensor_stats *s = &gr->stats;
    const char *name = cal->layers[gr->first_layer].key;
    char rule[512], at[1200];
    double scale;
    rule_text(gr->err.message, rule, sizeof rule, &scale);
    put(b, "  %-8s ", name);
    if (gr->n_layers > 1) {
        put(b, "(input shared with");
        for (int i = 0; i < cal->n_layers; i++)
            if (cal->layers[i].group == gr - cal->groups && i != gr->first_layer) put(b, " %s", cal->layers[i].key);
        put(b, ") ");
    }
    uint64_t bad = s->nan_count + s->pos_inf_count + s->neg_inf_count;
    if (bad) {
        static const char *const kinds[] = {"NaN", "+inf", "-inf"};
        put(b, "input contains %llu NaN, %llu +inf, %llu -inf values", (unsigned long long)s->nan_count,
            (unsigned long long)s->pos_inf_count, (unsigned long long)s->neg_inf_count);
        if (s->min <= s->max) put(b, " (finite range [%.3g, %.3g])", (double)s->min, (double)s->max);
        where(cal, s->bad_batch, s->bad_sample, at, sizeof at);
        put(b, ": %s\n           first %s in %s\n", rule, kinds[s->bad_kind], at);
        return;
    }
    if (s->min <= s->max) put(b, "input range [%.3g, %.3g] (no NaN or inf)", (double)s->min, (double)s->max);
    put(b, ": %s", rule);
    if (gr->algo == CALQ_ACT_IFMR) put(b, " [IFMR %s]", gr->slot[0].ifmr.asymmetric ? "with offset" : "without offset");
    if (gr->algo != CALQ_ACT_IFMR && gr->algo != CALQ_ACT_HFMG) /* calq's: name it (auto: every candidate failed) */
        put(b, " [act_algo %s]", calq__act_algo(gr->algo)->name);
    if (scale > 0) put(b, "\n           the scale would be %.3g, above 1/FLT_EPSILON (8388608)", scale);
    if (s->absmax_batch >= 0) {
        where(cal, s->absmax_batch, s->absmax_sample, at, sizeof at);
        put(b, ";\n           largest |x| %.3g first seen in %s", (double)s->absmax, at);
    }
    put(b, "\n");
}

static void weight_line(const calq__calib_layer *l, sbuf *b)
{
    char rule[512];
    double scale;
    rule_text(l->w_err.message, rule, sizeof rule, &scale);
    put(b, "  %-8s weights: %s\n", l->cfg->name, rule);
}

calq_status calq__calib_report(const calq__calib *cal, calq_error *err)
{
    int n_failed = 0, n_items = 0;
    bool all_act_range = true;
    calq_status first = CALQ_OK;
    for (int i = 0; i < cal->n_layers; i++)
        if (first_of_layer(cal, i) && calq__calib_layer_failed(cal, i)) n_failed++;
    for (int k = 0; k < cal->n_groups; k++)
        if (cal->groups[k].failed) {
            if (cal->groups[k].err.status != CALQ_ERR_NOT_SUPPORT) all_act_range = false;
            if (first == CALQ_OK || first == CALQ_ERR_NOT_SUPPORT) first = cal->groups[k].err.status;
        }
    for (int i = 0; i < cal->n_layers; i++)
        if (cal->layers[i].w_failed) {
            all_act_range = false;
            if (first == CALQ_OK || first == CALQ_ERR_NOT_SUPPORT) first = cal->layers[i].w_err.status;
        }
    if (!n_failed) return CALQ_OK;

    char text[CALQ_ERROR_MESSAGE_MAX];
    sbuf b = {text, sizeof text - 400, 0}; /* room kept for the remedy lines */
    put(&b, "%d layer%s cannot be quantized: %s (error %d, %s)\n", n_failed, n_failed == 1 ? "" : "s",
        all_act_range ? "their activation range is illegal" : "their factors are illegal", (int)first,
        calq_status_name(first));
    /* one line per failed calibrator / weight, in model order; the list is cut to stay readable
     * (inf at the input makes every later layer fail too) */
    int shown = 0, hidden = 0;
    for (int i = 0; i < cal->n_layers; i++) {
        const calq__calib_layer *l = &cal->layers[i];
        const calq__calib_group *gr = &cal->groups[l->group];
        bool act = gr->failed && gr->first_layer == i && !calq__calib_implicit(cal, i);
        if (!act && !l->w_failed) continue;
        n_items++;
        size_t before = b.at;
        if (shown < 8) {
            if (act) group_line(cal, gr, &b);
            if (l->w_failed) weight_line(l, &b);
            if (b.at >= b.n - 1) { /* did not fit: drop the partial line */
                b.at = before;
                text[before] = 0;
                hidden++;
                continue;
            }
            shown++;
        } else {
            hidden++;
        }
    }
    if (hidden)
        put(&b,
            "  ... and %d more (each listed in the skip_layers line below; a bad value early in the model "
            "reaches every layer after it)\n",
            hidden);
    b.n = sizeof text;
    put(&b, "  To quantize the rest and keep these layers in float, add them to the config:\n      \"skip_layers\": [");
    int k = 0, nt = 0;
    for (int i = 0; i < cal->n_layers; i++) {
        if (!first_of_layer(cal, i) || !calq__calib_layer_failed(cal, i)) continue;
        if (cal->layers[i].cfg->tensor)
            nt++;
        else
            put(&b, "%s\"%s\"", k++ ? ", " : "", cal->layers[i].cfg->name);
    }
    put(&b, "]");
    if (nt) {
        put(&b, "\n  and remove these inputs from tensor_quantize:");
        for (int i = 0; i < cal->n_layers; i++)
            if (cal->layers[i].cfg->tensor && calq__calib_layer_failed(cal, i)) put(&b, " %s", cal->layers[i].key);
    }
    put(&b, "    (or run again with --skip-illegal)");
    (void)n_items;
    const char *layer = NULL;
    for (int i = 0; i < cal->n_layers && !layer; i++)
        if (first_of_layer(cal, i) && calq__calib_layer_failed(cal, i)) layer = cal->layers[i].cfg->name;
    return calq__fail(err, first, layer, "%s", text);
}
