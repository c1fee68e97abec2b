/* create_quant_config (amct-reference.md §1.1): every quantizable layer of the model (§8.1)
 * with AMCT's default parameters (§7.2, §11), minus the skipped layers. AMCT leaves skipped
 * layers out of the JSON altogether (§7.2: deleting an entry skips the layer), and so does
 * calq. */
#include <string.h>

#include "base/error.h"
#include "calib/config.h"

calq_status calq__config_defaults(const calq_model *m, const calq_config_opts *o, calq_config **out, calq_error *err)
{
    *out = NULL;
    /* the config files' bound too: a config made here must read back (calq_config_save, load) */
    if (o->batch_num <= 0 || o->batch_num > CALQ__BATCH_NUM_MAX)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL,
                          "batch_num is %d; it must be in [1, %d] (amct-reference.md §7.2; calq_config_opts_init sets "
                          "1)",
                          o->batch_num, CALQ__BATCH_NUM_MAX);
    if (o->n_skip_layers < 0 || (o->n_skip_layers > 0 && !o->skip_layers))
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL, "skip_layers: %d names announced but none given",
                          o->n_skip_layers);
    /* Every skip_layers entry must name a quantizable layer: a misspelt name would otherwise
     * quantize the layer the user meant to keep in float. */
    for (int k = 0; k < o->n_skip_layers; k++) {
        int node;
        if (!o->skip_layers[k])
            return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL, "skip_layers: entry %d is NULL", k);
        CALQ_TRY(calq__config_check_layer(m, o->skip_layers[k], "skip_layers", &node, err));
    }
    const calq__act_algo_info *algo = calq__act_algo(CALQ_ACT_IFMR);
    if (o->act_algo && !(algo = calq__act_algo_by_name(o->act_algo)))
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL, "act_algo is \"%s\"; it must be %s", o->act_algo,
                          calq__act_algo_names());
    calq_config *c = calq__config_new();
    if (!c) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory building the config");
    c->batch_num = o->batch_num;
    c->activation_offset = o->activation_offset != 0;
    c->write_joint_quant = calq__model_is_onnx(m);
    int n = calq_model_num_nodes(m);
    for (int i = 0; i < n; i++) {
        calq_node_info ni;
        if (calq_model_node_info(m, i, &ni) != CALQ_OK || !ni.quantizable) continue;
        /* The JSON keys layers by name (§7.2: names must be unique). */
        if (calq__model_find_node(m, ni.name) != i) {
            calq_config_free(c);
            return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, ni.name,
                              "the model has several layers named '%s'; AMCT's config keys layers by name, so "
                              "quantizable layers need unique names (amct-reference.md §7.2): rename them in the model",
                              ni.name);
        }
        bool skipped = false;
        for (int k = 0; k < o->n_skip_layers && !skipped; k++) skipped = strcmp(o->skip_layers[k], ni.name) == 0;
        if (skipped) continue;
        calq_layer_config *l = calq__config_add_layer(c, ni.name, calq__model_qkind(m, i), i, err);
        if (!l) {
            calq_config_free(c);
            return err ? err->status : CALQ_ERR_OUT_OF_MEMORY;
        }
        l->act.algo = algo->algo; /* with the algorithm's own defaults */
        if (algo->keys & CALQ_ACT_KEY_PERCENTILES) l->act.max_percentile = l->act.min_percentile = algo->percentile;
        if (algo->keys & CALQ_ACT_KEY_BINS) l->act.num_of_bins = algo->num_of_bins;
    }
    *out = c;
    return CALQ_OK;
}
