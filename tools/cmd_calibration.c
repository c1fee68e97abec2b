/* calq calibration: AMCT's `amct_* calibration` command line (amct-reference.md §1.2) plus
 * calq's options. Writes <save_path>_record.txt (§7.1) and <save_path>_config.json (the config
 * the run used, §7.2), only when the run succeeds, then saves the quantized models from them as
 * `calq save` does (AMCT's CLI ends with save_model, §1.2). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef struct calib_args {
    const char *model, *weights, *save, *shapes, *config, *cfg_simple, *skip, *format, *eval_data, *evaluator;
    int batch_num, act_offset, act_algo, save_type, skip_illegal, threads, qdq_scheme, cache_mb, reduce_range;
    int max_arena_mb;
    cli_data data;
    /* the accuracy search (calq_fallback); NAN: not given */
    double target_cosine, target, time_budget, evaluator_timeout;
    int max_float, lookahead, strict, lower_is_better, rank;
} calib_args;

/* --act_algo: AMCT's two calibrators and calq's (calq_config_opts.act_algo takes the name). */
static const cli_choice act_algos[] = {{"ifmr", 0}, {"hfmg", 1}, {"minmax", 2}, {"percentile", 3},
                                       {"kl", 4},   {"mse", 5},  {"auto", 6},   {NULL, 0}};

/* --qdq-scheme: AMCT's (factors on the quantized layers' inputs) or int8 end to end
 * (calq_calibrate_opts.int8_tensors; docs/cli.md "int8 end to end"). */
static const cli_choice qdq_schemes[] = {{"layers", 0}, {"int8", 1}, {NULL, 0}};

/* --rank: how the accuracy search orders the layers it tries in float (calq_fallback_opts). */
static const cli_choice rankings[] = {{"outputs", 0}, {"isolated", 1}, {NULL, 0}};

static const cli_flag flags[] = {
    {.name = "--model",
     .type = CLI_STRING,
     .offset = offsetof(calib_args, model),
     .metavar = "M",
     .required = 1,
     .help = "the float model: MODEL.onnx, or a Caffe NET.prototxt with --weights"},
    {.name = "--weights",
     .type = CLI_STRING,
     .offset = offsetof(calib_args, weights),
     .metavar = "W",
     .help = "the Caffe weights (NET.caffemodel)"},
    {.name = "--save_path",
     .type = CLI_STRING,
     .offset = offsetof(calib_args, save),
     .metavar = "P",
     .required = 1,
     .help = "writes P_record.txt and P_config.json (the folder is created), then the\n"
             "quantized models (see calq save --help for the file names)"},
    {.name = "--save_type",
     .type = CLI_ENUM,
     .offset = offsetof(calib_args, save_type),
     .metavar = "T",
     .choices = cli_save_types,
     .help = "which models to save: Both (default), Fakequant, Deploy, None (record only)"},
    {.name = "--format",
     .type = CLI_STRING,
     .offset = offsetof(calib_args, format),
     .metavar = "F",
     .help = "their formats: ascend (AMCT's), qdq, qoperator (a comma list), both, all;\n"
             "default all (ONNX), ascend (Caffe)"},
    {.name = "--qdq-scheme",
     .type = CLI_ENUM,
     .offset = offsetof(calib_args, qdq_scheme),
     .metavar = "S",
     .choices = qdq_schemes,
     .help = "layers (default): AMCT's scheme, factors on the inputs of quantized layers only;\n"
             "int8: also calibrate the tensors between layers so that onnxruntime runs the\n"
             "QDQ / QOperator files in integers end to end (faster, slightly less exact)"},
    {.name = "--reduce-range",
     .type = CLI_SWITCH,
     .offset = offsetof(calib_args, reduce_range),
     .help = "7-bit weights in the qdq / qoperator files: exact in onnxruntime on x86 CPUs\n"
             "without VNNI, whose int8 kernels saturate 8-bit ones (docs/cli.md)"},
    CLI_DATA_FLAGS(calib_args, data),
    {.name = "--input_shape",
     .alias = "--input-shape",
     .type = CLI_CUSTOM,
     .offset = offsetof(calib_args, shapes),
     .metavar = "SPEC",
     .parse = cli_parse_input_shapes,
     .help = "fix input shapes, e.g. input:2,3,240,320"},
    {.name = "--batch_num",
     .type = CLI_INT,
     .offset = offsetof(calib_args, batch_num),
     .metavar = "N",
     .lo = 1,
     .hi = 1000000000,
     .help = "calibration batches (default: the config's, else 1)"},
    {.name = "--config",
     .type = CLI_STRING,
     .offset = offsetof(calib_args, config),
     .metavar = "C.json",
     .help = "AMCT's JSON config (calq create-config); default: every quantizable layer"},
    {.name = "--calibration_config",
     .type = CLI_STRING,
     .offset = offsetof(calib_args, cfg_simple),
     .metavar = "F",
     .help = "AMCT's simplified .cfg instead of a JSON config"},
    {.name = "--activation_offset",
     .type = CLI_BOOL,
     .offset = offsetof(calib_args, act_offset),
     .metavar = "B",
     .help = "without a config: true (default) asymmetric activations, false symmetric"},
    {.name = "--act_algo",
     .type = CLI_ENUM,
     .offset = offsetof(calib_args, act_algo),
     .metavar = "A",
     .choices = act_algos,
     .help = "without a config: the activation calibrator of every layer: AMCT's ifmr\n"
             "(default) or hfmg, or calq's minmax, percentile, kl, mse, or auto (per layer,\n"
             "the one giving that layer the smallest output error); with a config, put\n"
             "\"act_algo\" in it. calq's are not AMCT's: AMCT's tools reject the config"},
    {.name = "--skip_layers",
     .type = CLI_STRING,
     .offset = offsetof(calib_args, skip),
     .metavar = "a,b",
     .help = "keep these layers in float"},
    {.name = "--skip-illegal",
     .alias = "--skip_illegal",
     .type = CLI_SWITCH,
     .offset = offsetof(calib_args, skip_illegal),
     .help = "keep layers whose factors are illegal in float instead of failing"},
    {.name = "--threads",
     .type = CLI_THREADS,
     .offset = offsetof(calib_args, threads),
     .metavar = "N",
     .help = "OpenMP threads (the record is identical for any N; at most 4 per processor)"},
    {.name = "--max-arena-mb",
     .type = CLI_INT,
     .offset = offsetof(calib_args, max_arena_mb),
     .metavar = "N",
     .lo = 0,
     .hi = 1073741824,
     .help = CLI_MAX_ARENA_HELP},
    {.name = "--cache-mb",
     .type = CLI_INT,
     .offset = offsetof(calib_args, cache_mb),
     .metavar = "N",
     .lo = -1,
     .hi = 1048576,
     .help = "MiB of memory for the activation cache that spares each batch's second\n"
             "inference (default 256; beyond it a temporary file; 0: file only; -1: off,\n"
             "every pass runs the model); the record is the same for any N"},
    {.type = CLI_HEADING,
     .help = "accuracy target (after calibration; the factors are computed once, only quant_enable changes):"},
    {.name = "--target-cosine",
     .type = CLI_DOUBLE,
     .offset = offsetof(calib_args, target_cosine),
     .metavar = "C",
     .lo = -1,
     .hi = 1,
     .lo_open = 1,
     .help = "keep the layers that cost most accuracy in float until the smallest cosine\n"
             "of the model outputs, fake-quant vs float, over the batches is >= C"},
    {.name = "--evaluator",
     .type = CLI_STRING,
     .offset = offsetof(calib_args, evaluator),
     .metavar = "\"CMD {model}\"",
     .help = "or measure each candidate with your command: {model} (and {weights} for\n"
             "Caffe) is the fake-quant model; the metric is the last number it prints"},
    {.name = "--target",
     .type = CLI_DOUBLE,
     .offset = offsetof(calib_args, target),
     .metavar = "V",
     .lo = -HUGE_VAL,
     .hi = HUGE_VAL,
     .help = "the evaluator's target"},
    {.name = "--lower-is-better",
     .type = CLI_SWITCH,
     .offset = offsetof(calib_args, lower_is_better),
     .help = "the evaluator's metric is an error: reach at most --target"},
    {.name = "--eval-data",
     .type = CLI_STRING,
     .offset = offsetof(calib_args, eval_data),
     .metavar = "SPEC",
     .help = "data for the metric and the ranking, of the same kind as the calibration\n"
             "data (a folder of images, an --npy spec, a --data_dir list); default: it"},
    {.name = "--max-float-layers",
     .type = CLI_INT,
     .offset = offsetof(calib_args, max_float),
     .metavar = "N",
     .lo = 1,
     .hi = 1000000,
     .help = "at most N layers in float (default: no limit)"},
    {.name = "--time-budget",
     .type = CLI_DOUBLE,
     .offset = offsetof(calib_args, time_budget),
     .metavar = "S",
     .lo = 0,
     .lo_open = 1,
     .hi = 1e9,
     .help = "stop searching after S seconds (default: no limit)"},
    {.name = "--evaluator-timeout",
     .type = CLI_DOUBLE,
     .offset = offsetof(calib_args, evaluator_timeout),
     .metavar = "S",
     .lo = 0,
     .lo_open = 1,
     .hi = 1e9,
     .help = "stop a run of the evaluator (and what it started) after S seconds,\n"
             "failing the search (default 3600; at most what --time-budget leaves)"},
    {.name = "--lookahead",
     .type = CLI_INT,
     .offset = offsetof(calib_args, lookahead),
     .metavar = "N",
     .lo = 1,
     .hi = 10000,
     .help = "layers measured per search step (default 4)"},
    {.name = "--rank",
     .type = CLI_ENUM,
     .offset = offsetof(calib_args, rank),
     .metavar = "R",
     .choices = rankings,
     .help = "how the search orders the layers to try in float: outputs (default: the model\n"
             "outputs with each layer alone quantized, one run per layer and batch) or\n"
             "isolated (each layer's own error, one pass: faster on large models)"},
    {.name = "--strict",
     .type = CLI_SWITCH,
     .offset = offsetof(calib_args, strict),
     .help = "exit 1 when the target is not met (the best model found is still written)"},
};

static const cli_command command = {
    .name = "calibration",
    .synopsis = "--model MODEL.onnx|MODEL.prototxt [--weights W.caffemodel] --save_path DIR/PREFIX\n"
                "(--data_dir \"d1/;d2/\" [--data_types \"float32;...\"] | --images DIR | --npy SPEC)\n"
                "[--input_shape \"in:n,c,h,w;...\"] [--batch_num N] [--config C.json]\n"
                "[--calibration_config SIMPLE.cfg] [--skip_layers a,b] [--skip-illegal] [--threads N]\n"
                "[--max-arena-mb N] [--cache-mb N] [--act_algo ifmr|hfmg|minmax|percentile|kl|mse|auto]\n"
                "[--target-cosine C | --evaluator \"CMD {model}\" --target V [--lower-is-better]]\n"
                "[--eval-data SPEC] [--max-float-layers N] [--time-budget S] [--evaluator-timeout S]\n"
                "[--lookahead N] [--rank outputs|isolated] [--strict]\n"
                "[--save_type Both|Fakequant|Deploy|None] [--format ascend,qdq,qoperator|both|all]\n"
                "[--qdq-scheme layers|int8] [--reduce-range]",
    .flags = CLI_FLAGS(flags),
    .positional = CLI_NO_POSITIONAL,
};

static void print_model_summary(const calq_model *m, const char *model, const char *weights)
{
    const char *types[64];
    int counts[64], n_types = 0, n_quant = 0, n = calq_model_num_nodes(m);
    for (int i = 0; i < n; i++) {
        calq_node_info ni;
        if (calq_model_node_info(m, i, &ni) != CALQ_OK || !ni.quantizable) continue;
        n_quant++;
        int k = 0;
        while (k < n_types && strcmp(types[k], ni.op_type)) k++;
        if (k == n_types && n_types < 64) {
            types[n_types] = ni.op_type;
            counts[n_types++] = 0;
        }
        if (k < n_types) counts[k]++;
    }
    fprintf(stderr, "calq: model %s%s%s: %d layers, %d quantizable (", model, weights ? " + " : "",
            weights ? weights : "", n, n_quant);
    for (int k = 0; k < n_types; k++) fprintf(stderr, "%s%s %d", k ? ", " : "", types[k], counts[k]);
    fprintf(stderr, ")\n");
}

static void print_data_summary(const calq_model *m, const calq_data *d, int batch_num)
{
    char what[1024];
    calq_data_describe(d, what, sizeof what);
    int nb = calq_data_num_batches(d);
    fprintf(stderr, "calq: data %s: %d batch%s of ", what, nb, nb == 1 ? "" : "es");
    for (int i = 0; i < calq_model_num_inputs(m); i++) {
        calq_value_info v;
        calq_model_input_info(m, i, &v);
        calq_data_input_info(d, m, i, &v, NULL); /* the batches' shape (the model's may be ?x...) */
        fprintf(stderr, "%s%s:", i ? " + " : "", v.name);
        for (int k = 0; k < v.ndim; k++) fprintf(stderr, "%s%lld", k ? "x" : "", (long long)v.dims[k]);
        fprintf(stderr, " %s", calq_dtype_name(v.dtype));
    }
    fprintf(stderr, " (batch_num %d)\n", batch_num);
}

/* The combinations of flags the table cannot express; NULL when the flags go together. */
static const char *check_combination(const calib_args *a, bool searching)
{
    const char *missing = cli_data_missing(&a->data);
    bool have_target = !isnan(a->target), have_cosine = !isnan(a->target_cosine);
    if (!missing && a->evaluator && !have_target) missing = "--evaluator needs --target V (the metric to reach)";
    if (!missing && have_target && !a->evaluator)
        missing = "--target goes with --evaluator; without one use --target-cosine";
    if (!missing && a->evaluator && have_cosine) missing = "give --target-cosine or --evaluator, not both";
    if (!missing && !isnan(a->evaluator_timeout) && !a->evaluator)
        missing = "--evaluator-timeout goes with --evaluator";
    if (!missing && !searching &&
        (a->eval_data || a->max_float || !isnan(a->time_budget) || a->lookahead || a->strict || a->lower_is_better ||
         a->rank > 0))
        missing =
            "--eval-data, --max-float-layers, --time-budget, --lookahead, --rank, --strict and --lower-is-better go "
            "with --target-cosine or --evaluator";
    if (!missing && a->config && a->cfg_simple) missing = "give either --config or --calibration_config, not both";
    if (!missing && a->act_algo >= 0 && (a->config || a->cfg_simple))
        missing = "--act_algo applies to runs without a config; with --config, set \"act_algo\" in the config (per "
                  "layer in activation_quant_params, or at the top level for every layer)";
    return missing;
}

/* After calibration: the accuracy search (calq_fallback) on the staged record and config.
 * *missed: the target was not met. */
/* What the search measures: the QDQ file when the user deploys the standard ONNX files in a way
 * AMCT's fake-quant model does not simulate (7-bit weights, the int8 scheme) or asked for no
 * AMCT model; else AMCT's fake-quant model. */
static calq_save_format measured_format(const calib_args *a, const calq_save_format *fmts, int n_fmts)
{
    bool ascend = false, onnx_std = false, reduce = false;
    for (int k = 0; k < n_fmts; k++) {
        calq_save_format f = (calq_save_format)(fmts[k] & ~CALQ_SAVE_REDUCE_RANGE);
        reduce = reduce || (fmts[k] & CALQ_SAVE_REDUCE_RANGE);
        ascend = ascend || f == CALQ_SAVE_ASCEND_FAKE_QUANT || f == CALQ_SAVE_ASCEND_DEPLOY;
        onnx_std = onnx_std || f == CALQ_SAVE_QDQ || f == CALQ_SAVE_QOPERATOR;
    }
    if (a->weights || !onnx_std || (ascend && !reduce && a->qdq_scheme != 1)) return CALQ_SAVE_ASCEND_FAKE_QUANT;
    return reduce ? (calq_save_format)(CALQ_SAVE_QDQ | CALQ_SAVE_REDUCE_RANGE) : CALQ_SAVE_QDQ;
}

static calq_status search(const calib_args *a, calq_model *m, calq_data *d, calq_outputs *outs, const char *record_path,
                          const char *config_path, calq_save_format measure, bool *missed, calq_error *err)
{
    calq_fallback_opts fo;
    calq_fallback_opts_init(&fo);
    fo.target = a->evaluator ? a->target : a->target_cosine;
    fo.evaluator = a->evaluator ? cli_run_evaluator : NULL;
    cli_evaluator ev = {.command = a->evaluator,
                        .timeout = isnan(a->evaluator_timeout) ? CLI_EVALUATOR_TIMEOUT_DEFAULT : a->evaluator_timeout};
    fo.evaluator_user = &ev;
    fo.lower_is_better = a->lower_is_better;
    fo.max_float_layers = a->max_float;
    fo.time_budget = isnan(a->time_budget) ? 0.0 : a->time_budget;
    fo.lookahead = a->lookahead;
    fo.rank_isolated = a->rank == 1;
    fo.measure = measure;
    if (measure != CALQ_SAVE_ASCEND_FAKE_QUANT)
        fprintf(stderr, "calq: the search measures the QDQ file%s (what the qdq / qoperator files compute)\n",
                measure & CALQ_SAVE_REDUCE_RANGE ? " with 7-bit weights" : "");
    fo.n_threads = a->threads;
    fo.outputs = outs; /* the record and config are staged there, not yet renamed */
    calq_data *ed = NULL;
    calq_fallback_result *res = NULL;
    if (a->eval_data && cli_data_open(&a->data, a->eval_data, m, &ed, err) != CALQ_OK) return err->status;
    fo.eval_data = ed;
    /* the budget counts from the search's start, as calq_fallback counts it: no run of the
     * evaluator goes past it (the search itself only checks between trials) */
    ev.budget = fo.time_budget;
    ev.deadline = fo.time_budget > 0.0 ? cli_monotonic() + fo.time_budget : 0.0;
    calq_status st = calq_fallback(m, record_path, config_path, d, &fo, &res, err);
    calq_data_free(ed);
    if (st != CALQ_OK) return st;
    *missed = !res->met;
    if (res->n_float) {
        fprintf(stderr, "calq: the config %s keeps ", config_path);
        for (int k = 0; k < res->n_float; k++) fprintf(stderr, "%s%s", k ? ", " : "", res->float_layers[k]);
        fprintf(stderr, " in float (quant_enable false); calq calibration --config %s reproduces the record\n",
                config_path);
    }
    calq_fallback_result_free(res);
    return CALQ_OK;
}

int calq_cmd_calibration(int argc, char **argv)
{
    calib_args a = {.act_offset = -1,
                    .act_algo = -1,
                    .save_type = CLI_SAVE_BOTH,
                    .cache_mb = CALQ_CALIBRATE_CACHE_MB_DEFAULT,
                    .max_arena_mb = -1,
                    .target_cosine = NAN,
                    .target = NAN,
                    .time_budget = NAN,
                    .evaluator_timeout = NAN};
    cli_data_init(&a.data);
    int r = cli_parse(&command, argc, argv, &a);
    if (r) return r < 0 ? 0 : r;
    bool searching = a.evaluator || !isnan(a.target_cosine);
    const char *usage = check_combination(&a, searching);
    if (usage) {
        fprintf(stderr, "calq: error: %s ('calq calibration --help' lists the options)\n", usage);
        return CLI_USAGE;
    }
    calq_calibrate_opts co;
    calq_calibrate_opts_init(&co);
    co.n_threads = a.threads;
    co.skip_illegal = a.skip_illegal;
    co.cache_mb = a.cache_mb;
    if ((r = cli_max_arena(a.max_arena_mb, &co.max_arena_bytes)) != 0) return r;
    calq_save_format fmts[4];
    int n_fmts = 0, urc = cli_save_formats(a.format, a.save_type, a.weights != NULL, a.reduce_range, fmts, &n_fmts);
    if (urc) return urc;
    for (int k = 0; k < n_fmts; k++) { /* only the QDQ / QOperator writers use the tensors' factors */
        calq_save_format f = (calq_save_format)(fmts[k] & ~CALQ_SAVE_REDUCE_RANGE);
        if ((f == CALQ_SAVE_QDQ || f == CALQ_SAVE_QOPERATOR) && a.qdq_scheme == 1) co.int8_tensors = 1;
    }

    char record_path[4096], config_path[4096], shown[CLI_CUT_BUF];
    if (snprintf(record_path, sizeof record_path, "%s_record.txt", a.save) >= (int)sizeof record_path) {
        cli_failf("--save_path %s is too long (%zu bytes; a path has at most %zu)", cli_cut(a.save, shown),
                  strlen(a.save), sizeof record_path - 1 - strlen("_record.txt"));
        return CLI_USAGE;
    }
    snprintf(config_path, sizeof config_path, "%s_config.json", a.save);
    char *skip_copy = a.skip ? strdup(a.skip) : NULL;
    const char *skip_names[1024];
    int n_skip = skip_copy ? cli_split_names(skip_copy, skip_names, 1024) : 0, rc = 1;
    if (n_skip < 0) {
        free(skip_copy);
        cli_failf("--skip_layers lists more than 1024 layers");
        return CLI_USAGE;
    }
    calq_error err = {0};
    calq_model *m = NULL;
    calq_config *c = NULL;
    calq_data *d = NULL;
    calq_outputs *outs = NULL;
    char created[4096] = "";
    if (cli_load_model(a.model, a.weights, &m, &err) != CALQ_OK) goto fail;
    if (a.shapes && cli_apply_input_shapes(m, a.shapes, &err) != CALQ_OK) goto fail;
    print_model_summary(m, a.model, a.weights);

    if (a.config || a.cfg_simple) {
        if (calq_config_load(m, a.config ? a.config : a.cfg_simple, &c, &err) != CALQ_OK) goto fail;
        for (int k = 0; k < n_skip; k++) {
            int li = calq_config_find_layer(c, skip_names[k]);
            if (li >= 0 && calq_config_set_layer_enabled(c, li, 0, &err) != CALQ_OK) goto fail;
        }
        if (a.batch_num && calq_config_set_batch_num(c, a.batch_num, &err) != CALQ_OK) goto fail;
    } else {
        calq_config_opts o;
        calq_config_opts_init(&o);
        o.skip_layers = skip_names;
        o.n_skip_layers = n_skip;
        if (a.batch_num) o.batch_num = a.batch_num;
        if (a.act_offset >= 0) o.activation_offset = a.act_offset;
        if (a.act_algo >= 0) o.act_algo = act_algos[a.act_algo].name;
        if (calq_config_create(m, &o, &c, &err) != CALQ_OK) goto fail;
    }

    if (cli_data_open(&a.data, NULL, m, &d, &err) != CALQ_OK) goto fail;
    print_data_summary(m, d, calq_config_batch_num(c));
    if (cli_make_parent("--save_path", a.save, created) != 0) goto nothing;
    /* The record, the config and the models are staged together and renamed at the end, under
     * the lock of --save_path (calq_outputs): all of them or none. */
    if (calq_outputs_begin(a.save, &outs, &err) != CALQ_OK) goto fail;
    co.config_out = config_path;
    co.outputs = outs;
    cli_progress_attach(&co);
    calq_status cst = calq_calibrate(m, c, d, &co, record_path, &err);
    cli_progress_end();
    if (cst != CALQ_OK) goto fail;
    bool missed = false;
    if (searching &&
        search(&a, m, d, outs, record_path, config_path, measured_format(&a, fmts, n_fmts), &missed, &err) != CALQ_OK) {
        cli_fail(&err);
        calq_outputs *kept = outs;
        outs = NULL;
        if (calq_outputs_drop_models(kept, m, fmts, n_fmts, &err) != CALQ_OK) {
            calq_outputs_abort(kept);
            goto fail;
        }
        if (calq_outputs_commit(kept, &err) != CALQ_OK) goto fail;
        fprintf(stderr,
                "calq: the search stopped; the record and config of the calibration are kept, no model written.\n");
        goto done;
    }
    if (n_fmts &&
        cli_save(m, record_path, config_path, a.format != NULL, fmts, n_fmts, a.save, outs, &err) != CALQ_OK) {
        /* the calibration result is worth keeping: fix the cause and run calq save; an earlier
         * run's models under the prefix go, they do not match the new record */
        cli_fail(&err);
        calq_outputs *kept = outs;
        outs = NULL;
        if (calq_outputs_drop_models(kept, m, fmts, n_fmts, &err) != CALQ_OK) {
            calq_outputs_abort(kept);
            goto fail;
        }
        if (calq_outputs_commit(kept, &err) != CALQ_OK) goto fail;
        fprintf(stderr, "calq: no model written (the record and config are kept: fix the cause and run calq save).\n");
        goto done;
    }
    calq_outputs *o = outs;
    outs = NULL;
    if (calq_outputs_commit(o, &err) != CALQ_OK) goto fail;
    rc = 0;
    if (missed && a.strict) {
        fprintf(stderr, "calq: error: --strict: the accuracy target is not met (the best model found is written)\n");
        rc = 1;
    }
    goto done;
fail:
    cli_fail(&err);
nothing:
    calq_outputs_abort(outs);
    outs = NULL;
    cli_unmake_parent(a.save, created);
    fprintf(stderr, "calq: nothing written.\n");
done:
    calq_outputs_abort(outs);
    calq_data_free(d);
    calq_config_free(c);
    calq_model_free(m);
    free(skip_copy);
    return rc;
}
