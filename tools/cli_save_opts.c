/* --format and --save_type of `calq save` and `calq calibration` (docs/cli.md "calq save"):
 * which quantized models one save writes. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "cli.h"

static bool has(const calq_save_format *f, int n, calq_save_format x)
{
    for (int i = 0; i < n; i++)
        if (f[i] == x) return true;
    return false;
}

static void add(calq_save_format *f, int *n, calq_save_format x)
{
    if (!has(f, *n, x)) f[(*n)++] = x;
}

const cli_choice cli_save_types[] = {{"Both", CLI_SAVE_BOTH},
                                     {"Fakequant", CLI_SAVE_FAKEQUANT},
                                     {"Deploy", CLI_SAVE_DEPLOY},
                                     {"None", CLI_SAVE_NONE},
                                     {NULL, 0}};

int cli_save_formats(const char *format, int save_type, bool caffe, bool reduce_range, calq_save_format *fmts, int *n)
{
    bool fake = save_type == CLI_SAVE_BOTH || save_type == CLI_SAVE_FAKEQUANT;
    bool deploy = save_type == CLI_SAVE_BOTH || save_type == CLI_SAVE_DEPLOY;
    *n = 0;
    if (!format) format = caffe ? "ascend" : "all";
    char buf[256];
    if (snprintf(buf, sizeof buf, "%s", format) >= (int)sizeof buf) {
        char shown[CLI_CUT_BUF];
        cli_failf("--format '%s' is too long", cli_cut(format, shown));
        return CLI_USAGE;
    }
    calq_save_format all[4];
    int na = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        bool a = !strcasecmp(t, "all"), b = !strcasecmp(t, "both");
        bool asc = !strcasecmp(t, "ascend"), qdq = !strcasecmp(t, "qdq"), qop = !strcasecmp(t, "qoperator");
        if (!a && !b && !asc && !qdq && !qop) {
            cli_failf("--format takes ascend, qdq, qoperator (a comma list), both (qdq,qoperator) or all, not '%s'", t);
            return CLI_USAGE;
        }
        if (a || asc) {
            add(all, &na, CALQ_SAVE_ASCEND_FAKE_QUANT);
            add(all, &na, CALQ_SAVE_ASCEND_DEPLOY);
        }
        if (a || b || qdq) add(all, &na, CALQ_SAVE_QDQ);
        if (a || b || qop) add(all, &na, CALQ_SAVE_QOPERATOR);
    }
    if (caffe)
        for (int i = 0; i < na; i++)
            if (all[i] == CALQ_SAVE_QDQ || all[i] == CALQ_SAVE_QOPERATOR) {
                cli_failf("--format %s: a Caffe model is saved as AMCT's Caffe models (--format ascend); QDQ and "
                          "QOperator are ONNX formats",
                          format);
                return CLI_USAGE;
            }
    if (!na) {
        cli_failf("--format '%s' names no format (ascend, qdq, qoperator, both, all)", format);
        return CLI_USAGE;
    }
    for (int i = 0; i < na; i++) {
        bool is_fake = all[i] == CALQ_SAVE_ASCEND_FAKE_QUANT || all[i] == CALQ_SAVE_QDQ;
        if (is_fake ? fake : deploy) add(fmts, n, all[i]);
    }
    if (!*n && (fake || deploy)) { /* e.g. --save_type Fakequant --format qoperator */
        cli_failf("--save_type %s keeps none of --format %s: qdq and the ascend fake-quant model are the "
                  "Fakequant kind, qoperator and the ascend deploy model the Deploy kind",
                  cli_save_types[save_type].name, format);
        return CLI_USAGE;
    }
    if (!reduce_range) return 0;
    int reduced = 0;
    for (int i = 0; i < *n; i++)
        if (fmts[i] == CALQ_SAVE_QDQ || fmts[i] == CALQ_SAVE_QOPERATOR) {
            fmts[i] = (calq_save_format)(fmts[i] | CALQ_SAVE_REDUCE_RANGE);
            reduced++;
        }
    if (!reduced) {
        cli_failf("--reduce-range applies to the qdq and qoperator files; --format %s --save_type %s writes neither",
                  format, cli_save_types[save_type].name);
        return CLI_USAGE;
    }
    return 0;
}

calq_status cli_save(const calq_model *m, const char *record, const char *config, bool chosen,
                     const calq_save_format *fmts, int n, const char *prefix, calq_outputs *outputs, calq_error *err)
{
    if (chosen)
        return outputs ? calq_save_models_staged(outputs, m, record, config, fmts, n, prefix, NULL, NULL, err)
                       : calq_save_models(m, record, config, fmts, n, prefix, err);
    /* A skipped format's file from an earlier run would stay beside models and a record it does
     * not match: its removal is staged with the save (a set of its own when none is given). */
    calq_outputs *own = NULL;
    if (!outputs) {
        calq_status b = calq_outputs_begin(prefix, &own, err);
        if (b != CALQ_OK) return b;
        outputs = own;
    }
    calq_save_skip skipped[4];
    int n_skipped = 0;
    calq_status st = calq_save_models_staged(outputs, m, record, config, fmts, n, prefix, skipped, &n_skipped, err);
    static const char *const names[] = {"qdq", "qoperator", "ascend fake-quant", "ascend deploy"};
    for (int i = 0; i < n_skipped && st == CALQ_OK; i++) {
        fprintf(stderr, "calq: skipped the %s model (give --format to require it): %s\n",
                (unsigned)skipped[i].format < 4 ? names[skipped[i].format] : "?", skipped[i].reason);
        st = calq_outputs_drop_models(outputs, m, &skipped[i].format, 1, err);
    }
    if (own) {
        if (st == CALQ_OK) return calq_outputs_commit(own, err);
        calq_outputs_abort(own);
    }
    return st;
}
