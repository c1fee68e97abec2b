/* calq_save_model and friends (include/calq.h, issue 6): read and check the record once
 * (amct-reference.md §4.4, §8.4), write every requested format to temporary files, and rename
 * them all only when all are complete, so a failed save leaves no partial file behind and
 * never damages an earlier output (§1.3: re-running overwrites everything). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/error.h"
#include "base/log.h"
#include "base/outputs.h"
#include "calib/adaround.h"
#include "export/export_caffe.h"
#include "export/export_onnx.h"
#include "export/save.h"

/* The ONNX file name of each format: AMCT's names for AMCT's models (§1.3). */
static const char *onnx_suffix(calq_save_format f)
{
    switch (f) {
    case CALQ_SAVE_QDQ: return "_qdq.onnx";
    case CALQ_SAVE_QOPERATOR: return "_qoperator.onnx";
    case CALQ_SAVE_ASCEND_FAKE_QUANT: return "_fake_quant_model.onnx";
    case CALQ_SAVE_ASCEND_DEPLOY: return "_deploy_model.onnx";
    }
    return NULL;
}

static calq_status save_one(const calq_model *m, calq_record *rec, const calq_config *cfg, calq_save_format f,
                            const char *prefix, calq_staged_files *out, calq_error *err)
{
    if (m->format == CALQ_FORMAT_CAFFE)
        return calq__export_caffe(m, rec, cfg, f == CALQ_SAVE_ASCEND_DEPLOY, prefix, out, err);
    const bool reduce = (f & CALQ_SAVE_REDUCE_RANGE) != 0;
    const calq_save_format base = (calq_save_format)(f & ~CALQ_SAVE_REDUCE_RANGE);
    const char *sfx = onnx_suffix(base);
    char *path = malloc(strlen(prefix) + strlen(sfx) + 1);
    if (!path) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "save: out of memory");
    strcat(strcpy(path, prefix), sfx);
    float **saved = NULL;
    calq_status st = reduce ? calq__reduce_range_begin(rec, &saved, err) : CALQ_OK;
    if (st == CALQ_OK) st = calq__export_onnx(m, rec, cfg, f, path, out, err);
    calq__reduce_range_end(rec, saved);
    free(path);
    return st;
}

/* The record at `src` (a staged file, or the path itself), labelled `label` in messages and
 * checked against m while it is read. */
static calq_status read_record(const char *src, const char *label, const calq_model *m, calq_record **out,
                               calq_error *err)
{
    char *text = NULL;
    size_t size = 0;
    *out = NULL;
    CALQ_TRY(calq__read_file_max(src, CALQ_RECORD_MAX_BYTES, "a record file", &text, &size, err));
    calq_status st = calq__record_parse_for(text, size, label, m, m->path, out, err);
    free(text);
    return st;
}

/* The record's AdaRound side file `<record>.adaround` (calib/adaround.h), when there is one
 * (staged by this run's calibration, or on disk): its learned weights go with the record. */
static calq_status attach_ada(calq_outputs *o, const char *record, calq_record *rec, calq_error *err)
{
    char *path = calq__ada_path(record);
    if (!path) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "save: out of memory");
    const char *src = calq__outputs_source(o, path);
    struct stat sb;
    calq_status st = stat(src, &sb) == 0 ? calq__ada_file_attach(rec, src, path, err) : CALQ_OK;
    free(path);
    return st;
}

/* A layer the config quantizes with ada_quantize needs its learned weights: saving it with
 * nearest rounding instead would silently give other models than the calibration meant. */
static calq_status check_ada(const calq_record *rec, const calq_config *cfg, const char *record, calq_error *err)
{
    for (int i = 0; i < cfg->n_layers; i++) {
        const calq_layer_config *l = &cfg->layers[i];
        if (!l->quant_enable || l->wts.algo != CALQ_WTS_ADA) continue;
        const calq_record_layer *rl = calq__record_find(rec, l->name);
        if (rl && !rl->ada_w)
            return calq__fail(err, CALQ_ERR_RECORD_FILE, l->name,
                              "save: layer \"%s\" has wts_algo \"ada_quantize\" in the config but %s%s has no "
                              "learned weights for it (missing, or from another calibration); rerun `calq "
                              "calibration` with this config, or save with a config that uses arq_quantize",
                              l->name, record, CALQ_ADA_SUFFIX);
    }
    return CALQ_OK;
}

static const char *format_name(calq_save_format f)
{
    switch (f) {
    case CALQ_SAVE_QDQ: return "qdq";
    case CALQ_SAVE_QOPERATOR: return "qoperator";
    case CALQ_SAVE_ASCEND_FAKE_QUANT: return "ascend fake-quant";
    case CALQ_SAVE_ASCEND_DEPLOY: return "ascend deploy";
    }
    return "?";
}

/* skipped == NULL: every format must be written (any failure fails the save). Otherwise a
 * format whose export fails is left out, its reason in skipped[*n_skipped]; the record and
 * config checks, and the final commit, still fail the whole save. */
static calq_status save_models(calq_outputs *given, const calq_model *m, const char *record, const char *config,
                               const calq_save_format *fmts, int n_fmts, const char *prefix, calq_save_skip *skipped,
                               int *n_skipped, bool log, calq_error *err)
{
    if (n_skipped) *n_skipped = 0;
    if (!m || !record || !prefix || !fmts || n_fmts < 1)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL,
                          "calq_save_model: model, record, prefix and at least one format are required");
    for (int i = 0; i < n_fmts; i++) {
        calq_save_format base = (calq_save_format)(fmts[i] & ~CALQ_SAVE_REDUCE_RANGE);
        if (!onnx_suffix(base))
            return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL, "calq_save_model: unknown format %d", (int)fmts[i]);
        if ((fmts[i] & CALQ_SAVE_REDUCE_RANGE) && base != CALQ_SAVE_QDQ && base != CALQ_SAVE_QOPERATOR)
            return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL,
                              "calq_save_model: CALQ_SAVE_REDUCE_RANGE (--reduce-range) applies to the QDQ and "
                              "QOperator files only; AMCT's %s model keeps its 8-bit weights",
                              format_name(base));
        if (m->format == CALQ_FORMAT_CAFFE && base != CALQ_SAVE_ASCEND_FAKE_QUANT && base != CALQ_SAVE_ASCEND_DEPLOY)
            return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL,
                              "calq_save_model: a Caffe model is saved as AMCT's Caffe models (fake-quant and "
                              "deploy, --format ascend); QDQ and QOperator are ONNX formats");
        if (m->format == CALQ_FORMAT_ONNX && !m->onnx)
            return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL, "calq_save_model: the model has no ONNX proto");
    }
    calq_outputs *o = given;
    if (!o) CALQ_TRY(calq__outputs_begin(prefix, &o, err));
    calq_staged_files *out = &o->staged;
    int first = out->n; /* files staged before this save (a calibration's record and config) */
    calq_record *rec = NULL;
    calq_config *cfg = NULL;
    calq_status st = read_record(calq__outputs_source(o, record), record, m, &rec, err);
    if (st == CALQ_OK) st = attach_ada(o, record, rec, err);
    if (st == CALQ_OK)
        st = config ? calq__config_load_as(m, calq__outputs_source(o, config), config, &cfg, err)
                    : calq_config_create(m, NULL, &cfg, err);
    if (st == CALQ_OK) st = calq__save_check(m, rec, cfg, record, err);
    if (st == CALQ_OK) st = check_ada(rec, cfg, record, err);
    int written = 0;
    for (int i = 0; i < n_fmts && st == CALQ_OK; i++) {
        int before = out->n;
        st = save_one(m, rec, cfg, fmts[i], prefix, out, err);
        if (st == CALQ_OK) {
            written++;
        } else if (skipped && st != CALQ_ERR_OUT_OF_MEMORY) {
            calq__staged_truncate(out, before);
            calq_save_skip *k = &skipped[(*n_skipped)++];
            k->format = (calq_save_format)(fmts[i] & ~CALQ_SAVE_REDUCE_RANGE);
            k->status = st;
            snprintf(k->reason, sizeof k->reason, "%s", err->message);
            err->status = CALQ_OK;
            err->message[0] = 0;
            st = CALQ_OK;
        }
    }
    if (st == CALQ_OK && !written)
        st = calq__fail(err, skipped[0].status, NULL, "save: no format could be written (the %s model: %s)",
                        format_name(skipped[0].format), skipped[0].reason);
    if (st != CALQ_OK) calq__staged_truncate(out, first);
    calq_config_free(cfg);
    calq__record_free(rec);
    if (given) return st;
    if (st != CALQ_OK) {
        calq_outputs_abort(o);
        return st;
    }
    return calq__outputs_commit(o, log, err);
}

/* The arguments every save entry point requires, named in the message of the public function
 * the caller called (func). */
static calq_status check_save_args(const char *func, const calq_model *m, const char *record,
                                   const calq_save_format *fmts, int n_fmts, const char *prefix, calq_error *err)
{
    const char *missing = !m ? "m" : !record ? "record" : !prefix ? "prefix" : NULL;
    if (missing) return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL, "%s: %s is NULL", func, missing);
    return calq__require_array(err, func, "fmts", fmts != NULL, "n_fmts", n_fmts, NULL);
}

calq_status calq_save_models(const calq_model *m, const char *record, const char *config, const calq_save_format *fmts,
                             int n_fmts, const char *prefix, calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_TRY(check_save_args(__func__, m, record, fmts, n_fmts, prefix, err));
    return save_models(NULL, m, record, config, fmts, n_fmts, prefix, NULL, NULL, true, err);
}

calq_status calq_save_models_available(const calq_model *m, const char *record, const char *config,
                                       const calq_save_format *fmts, int n_fmts, const char *prefix,
                                       calq_save_skip *skipped, int *n_skipped, calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_TRY(check_save_args(__func__, m, record, fmts, n_fmts, prefix, err));
    CALQ_REQUIRE(err, skipped);
    CALQ_REQUIRE(err, n_skipped);
    return save_models(NULL, m, record, config, fmts, n_fmts, prefix, skipped, n_skipped, true, err);
}

calq_status calq_save_models_staged(calq_outputs *outputs, const calq_model *m, const char *record, const char *config,
                                    const calq_save_format *fmts, int n_fmts, const char *prefix,
                                    calq_save_skip *skipped, int *n_skipped, calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, outputs);
    CALQ_TRY(check_save_args(__func__, m, record, fmts, n_fmts, prefix, err));
    if (!skipped != !n_skipped)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL,
                          "calq_save_models_staged: give both skipped and n_skipped, or neither");
    return save_models(outputs, m, record, config, fmts, n_fmts, prefix, skipped, n_skipped, true, err);
}

calq_status calq_outputs_drop_models(calq_outputs *outputs, const calq_model *m, const calq_save_format *fmts,
                                     int n_fmts, calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, outputs);
    CALQ_REQUIRE(err, m);
    CALQ_REQUIRE_ARRAY(err, fmts, n_fmts);
    const char *prefix = outputs->prefix;
    for (int i = 0; i < n_fmts; i++) {
        const calq_save_format base = (calq_save_format)(fmts[i] & ~CALQ_SAVE_REDUCE_RANGE);
        /* Caffe writes a prototxt and a caffemodel per Ascend model (export_caffe.c's names) */
        const char *caffe_kind = base == CALQ_SAVE_ASCEND_DEPLOY       ? "deploy"
                                 : base == CALQ_SAVE_ASCEND_FAKE_QUANT ? "fake_quant"
                                                                       : NULL;
        const char *sfx[2] = {NULL, NULL};
        char buf[2][32];
        if (m->format == CALQ_FORMAT_CAFFE) {
            if (!caffe_kind) continue;
            snprintf(buf[0], sizeof buf[0], "_%s_model.prototxt", caffe_kind);
            snprintf(buf[1], sizeof buf[1], "_%s_weights.caffemodel", caffe_kind);
            sfx[0] = buf[0];
            sfx[1] = buf[1];
        } else {
            sfx[0] = onnx_suffix(base);
        }
        for (int k = 0; k < 2 && sfx[k]; k++) {
            char *path = malloc(strlen(prefix) + strlen(sfx[k]) + 1);
            if (!path) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
            strcat(strcpy(path, prefix), sfx[k]);
            calq_status st = calq__staged_remove(&outputs->staged, path, err);
            free(path);
            CALQ_TRY(st);
        }
    }
    return CALQ_OK;
}

calq_status calq__save_models_quiet(const calq_model *m, const char *record, const char *config,
                                    const calq_save_format *fmts, int n_fmts, const char *prefix, calq_error *err)
{
    return save_models(NULL, m, record, config, fmts, n_fmts, prefix, NULL, NULL, false, err);
}

calq_status calq_save_model_config(const calq_model *m, const char *record, const char *config, calq_save_format fmt,
                                   const char *prefix, calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_TRY(check_save_args(__func__, m, record, &fmt, 1, prefix, err));
    return calq_save_models(m, record, config, &fmt, 1, prefix, err);
}

calq_status calq_save_model(const calq_model *m, const char *record, calq_save_format fmt, const char *prefix,
                            calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_TRY(check_save_args(__func__, m, record, &fmt, 1, prefix, err));
    return calq_save_models(m, record, NULL, &fmt, 1, prefix, err);
}
