/* calq_compare_write_json: the comparison as JSON (built and printed with cJSON; numbers that
 * are not finite, such as the SQNR of identical tensors, print as null). Schema (docs/cli.md):
 *   {"model", "quantized", "batches", "seconds", "float_layers",
 *    "outputs": [{"name", "cosine", "cosine_min", "rel_l2", "sqnr_db", "max_abs", "count"}],
 *    "layers": [{"name", "op", "index", "input", "output", "cosine", "cosine_min", "rel_l2", "sqnr_db",
 *                "max_abs", "isolated_cosine", "isolated_cosine_min", "isolated_rel_l2", "isolated_sqnr_db",
 *                "isolated_max_abs", "sensitivity_cosine", "sensitivity_cosine_min", "sensitivity_rel_l2",
 *                "sensitivity_sqnr_db", "sensitivity_max_abs", "sensitivity_output", "clip_fraction", "scale",
 * "offset", "clip_min", "clip_max", "input_min", "input_max", "histogram": {"lo", "hi", "counts", "below", "above"}}]}
 */
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/file.h"
#include "calq.h"

static void stats(cJSON *o, const char *prefix, const calq_compare_stats *s, bool have)
{
    static const char *const keys[] = {"cosine", "cosine_min", "rel_l2", "sqnr_db", "max_abs"};
    const double v[] = {s->cosine, s->cosine_min, s->rel_l2, s->sqnr_db, s->max_abs};
    char k[64];
    for (int i = 0; i < 5; i++) {
        snprintf(k, sizeof k, "%s%s", prefix, keys[i]);
        if (have)
            cJSON_AddNumberToObject(o, k, v[i]);
        else
            cJSON_AddNullToObject(o, k);
    }
}

static cJSON *build(const calq_compare_result *r)
{
    cJSON *root = cJSON_CreateObject();
    if (!root) return NULL;
    cJSON_AddStringToObject(root, "model", r->model ? r->model : "");
    cJSON_AddStringToObject(root, "quantized", r->quantized ? r->quantized : "");
    cJSON_AddNumberToObject(root, "batches", r->n_batches);
    cJSON_AddNumberToObject(root, "seconds", r->seconds);
    cJSON_AddNumberToObject(root, "float_layers", r->n_float_layers);
    cJSON *outs = cJSON_AddArrayToObject(root, "outputs");
    for (int i = 0; outs && i < r->n_outputs; i++) {
        cJSON *o = cJSON_CreateObject();
        if (!o) break;
        cJSON_AddItemToArray(outs, o);
        cJSON_AddStringToObject(o, "name", r->outputs[i].name);
        stats(o, "", &r->outputs[i].s, true);
        cJSON_AddNumberToObject(o, "count", (double)r->outputs[i].s.count);
    }
    cJSON *layers = cJSON_AddArrayToObject(root, "layers");
    for (int i = 0; layers && i < r->n_layers; i++) {
        const calq_compare_layer *l = &r->layers[i];
        cJSON *o = cJSON_CreateObject();
        if (!o) break;
        cJSON_AddItemToArray(layers, o);
        cJSON_AddStringToObject(o, "name", l->name);
        cJSON_AddStringToObject(o, "op", l->op);
        cJSON_AddNumberToObject(o, "index", i);
        cJSON_AddStringToObject(o, "input", l->input);
        cJSON_AddStringToObject(o, "output", l->output);
        stats(o, "", &l->acc, true);
        stats(o, "isolated_", &l->iso, l->has_isolated != 0);
        /* the model outputs with this layer alone quantized: the output hurt most */
        stats(o, "sensitivity_", &l->sens, l->has_sensitivity != 0);
        if (l->has_sensitivity && l->sens_output >= 0 && l->sens_output < r->n_outputs)
            cJSON_AddStringToObject(o, "sensitivity_output", r->outputs[l->sens_output].name);
        else
            cJSON_AddNullToObject(o, "sensitivity_output");
        cJSON_AddNumberToObject(o, "clip_fraction", l->clip_fraction);
        if (l->has_range) {
            cJSON_AddNumberToObject(o, "scale", l->scale);
            cJSON_AddNumberToObject(o, "offset", l->offset);
            cJSON_AddNumberToObject(o, "clip_min", l->clip_min);
            cJSON_AddNumberToObject(o, "clip_max", l->clip_max);
        }
        cJSON_AddNumberToObject(o, "input_min", l->in_min);
        cJSON_AddNumberToObject(o, "input_max", l->in_max);
        if (l->has_range) {
            cJSON *h = cJSON_AddObjectToObject(o, "histogram");
            if (!h) break;
            cJSON_AddNumberToObject(h, "lo", l->hist_lo);
            cJSON_AddNumberToObject(h, "hi", l->hist_hi);
            double c[CALQ_COMPARE_HIST_BINS];
            for (int k = 0; k < CALQ_COMPARE_HIST_BINS; k++) c[k] = (double)l->hist[k];
            cJSON_AddItemToObject(h, "counts", cJSON_CreateDoubleArray(c, CALQ_COMPARE_HIST_BINS));
            cJSON_AddNumberToObject(h, "below", (double)l->hist_below);
            cJSON_AddNumberToObject(h, "above", (double)l->hist_above);
        }
    }
    return root;
}

calq_status calq_compare_write_json(const calq_compare_result *r, const char *path, calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, r);
    CALQ_REQUIRE(err, path);
    cJSON *root = build(r);
    char *text = root ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!text) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "compare: out of memory writing %s", path);
    calq_atomic_file f = {0};
    calq_status st = calq__atomic_open(&f, path, err);
    if (st == CALQ_OK) {
        fputs(text, f.fp);
        fputc('\n', f.fp);
        st = calq__atomic_commit(&f, err);
    }
    free(text);
    return st;
}
