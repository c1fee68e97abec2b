/* The activation algorithms a config may name (act_algo, amct-reference.md §7.2): AMCT's IFMR
 * (§3.1) and HFMG (§5), and calq's range calibrators and auto (docs/numerics.md). */
#include <string.h>

#include "calib/config.h"

static const calq__act_algo_info algos[CALQ_ACT_N] = {
    {CALQ_ACT_IFMR, "ifmr", true, CALQ_ACT_KEY_PERCENTILES | CALQ_ACT_KEY_SEARCH, -1, 0.999999, 0,
     "max_percentile, min_percentile, search_range, search_step"},
    {CALQ_ACT_HFMG, "hfmg", true, CALQ_ACT_KEY_BINS, -1, 0.0, 4096, "num_of_bins"},
    {CALQ_ACT_MINMAX, "minmax", false, 0, CALQ_RANGE_MINMAX, 0.0, 0, "no parameter"},
    /* onnxruntime's default percentile (docs/peers.md §1.1) */
    {CALQ_ACT_PERCENTILE, "percentile", false, CALQ_ACT_KEY_PERCENTILES, CALQ_RANGE_PERCENTILE, 0.99999, 0,
     "max_percentile, min_percentile"},
    /* TensorRT's 2048-bin histogram (peers.md §1.3) */
    {CALQ_ACT_KL, "kl", false, CALQ_ACT_KEY_BINS, CALQ_RANGE_KL, 0.0, 2048, "num_of_bins"},
    {CALQ_ACT_MSE, "mse", false, CALQ_ACT_KEY_BINS, CALQ_RANGE_MSE, 0.0, 2048, "num_of_bins"},
    {CALQ_ACT_AUTO, "auto", false, 0, -1, 0.0, 0, "no parameter (each candidate takes its defaults)"},
};

const calq__act_algo_info *calq__act_algo(calq_act_algo a)
{
    return (unsigned)a < CALQ_ACT_N ? &algos[a] : &algos[0];
}

const calq__act_algo_info *calq__act_algo_by_name(const char *name)
{
    for (int i = 0; name && i < CALQ_ACT_N; i++)
        if (strcmp(algos[i].name, name) == 0) return &algos[i];
    return NULL;
}

const char *calq__act_algo_names(void)
{
    return "\"ifmr\", \"hfmg\" (AMCT's), \"minmax\", \"percentile\", \"kl\", \"mse\", \"auto\" (calq's)";
}
