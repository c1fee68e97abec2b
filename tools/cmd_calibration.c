/* calq calibration: AMCT's `amct_* calibration` command line (amct-reference.md §1.2) plus
 * calq's options. Writes <save_path>_record.txt (§7.1) and <save_path>_config.json (the config
 * the run used, §7.2), only when the run succeeds, then saves the quantized models from them as
 * `calq save` does (AMCT's CLI ends with save_model, §1.2). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

static const char usage_text[] =
    "usage: calq calibration --model MODEL.onnx|MODEL.prototxt [--weights W.caffemodel] --save_path DIR/PREFIX\n"
    "                        (--data_dir \"d1/;d2/\" [--data_types \"float32;...\"] | --images DIR | --npy SPEC)\n"
    "                        [--input_shape \"in:n,c,h,w;...\"] [--batch_num N] [--config C.json]\n"
    "                        [--calibration_config SIMPLE.cfg] [--skip_layers a,b] [--skip-illegal] [--threads N]\n"
    "                        [--act_algo ifmr|hfmg|minmax|percentile|kl|mse|auto]\n"
    "                        [--target-cosine C | --evaluator \"CMD {model}\" --target V [--lower-is-better]]\n"
    "                        [--eval-data SPEC] [--max-float-layers N] [--time-budget S] [--strict]\n"
    "                        [--save_type Both|Fakequant|Deploy|None] [--format ascend,qdq,qoperator|both|all]\n"
    "\n"
    "  --save_path P              writes P_record.txt and P_config.json (the folder is created), then the\n"
    "                             quantized models (see calq save --help for the file names)\n"
    "  --save_type T              which models to save: Both (default), Fakequant, Deploy, None (record only)\n"
    "  --format F                 their formats: ascend (AMCT's), qdq, qoperator; default all (ONNX), ascend (Caffe)\n"
    "  --data_dir \"d1/;d2/\"       AMCT's raw data: one folder per model input, one .bin file per batch\n"
    "  --data_types \"t1;t2\"       element type of each folder's files (float32 default, float64, float16)\n"
    "  --images DIR               photos (JPEG/PNG/BMP, name order), batch size = dim 0 of the input, with\n"
    "                             --resize WxH --mean M[,M,M] --std S[,S,S] --scale K [--bgr]: (x-M)/S*K, NCHW\n"
    "  --npy SPEC                 per input (';'): a folder of .npy files or a ','-list of files, one batch each\n"
    "  --input_shape SPEC         fix input shapes, e.g. input:2,3,240,320\n"
    "  --batch_num N              calibration batches (default: the config's, else 1)\n"
    "  --config C.json            AMCT's JSON config (calq create-config); default: every quantizable layer\n"
    "  --calibration_config F     AMCT's simplified .cfg instead of a JSON config\n"
    "  --activation_offset B      without a config: true (default) asymmetric activations, false symmetric\n"
    "  --act_algo A               without a config: the activation calibrator of every layer: AMCT's ifmr\n"
    "                             (default) or hfmg, or calq's minmax, percentile, kl, mse, or auto (per layer,\n"
    "                             the one giving that layer the smallest output error); with a config, put\n"
    "                             \"act_algo\" in it. calq's are not AMCT's: AMCT's tools reject the config\n"
    "  --skip_layers a,b          keep these layers in float\n"
    "  --skip-illegal             keep layers whose factors are illegal in float instead of failing\n"
    "  --threads N                OpenMP threads (the record is identical for any N)\n"
    "accuracy target (after calibration; the factors are computed once, only quant_enable changes):\n"
    "  --target-cosine C          keep the layers that cost most accuracy in float until the smallest cosine\n"
    "                             of the model outputs, fake-quant vs float, over the batches is >= C\n"
    "  --evaluator \"CMD {model}\"  or measure each candidate with your command: {model} (and {weights} for\n"
    "                             Caffe) is the fake-quant model; the metric is the last number it prints\n"
    "  --target V                 the evaluator's target; --lower-is-better when the metric is an error\n"
    "  --eval-data SPEC           data for the metric and the ranking, of the same kind as the calibration\n"
    "                             data (a folder of images, an --npy spec, a --data_dir list); default: it\n"
    "  --max-float-layers N       at most N layers in float (default: no limit)\n"
    "  --time-budget S            stop searching after S seconds (default: no limit)\n"
    "  --strict                   exit 1 when the target is not met (the best model found is still written)\n";

/* Splits a comma list in place; returns the count (names points into s). */
static int split_names(char *s, const char **names, int max)
{
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(s, ",", &save); t && n < max; t = strtok_r(NULL, ",", &save)) {
        while (*t == ' ') t++;
        size_t k = strlen(t);
        while (k > 0 && t[k - 1] == ' ') t[--k] = 0;
        if (*t) names[n++] = t;
    }
    return n;
}

/* mkdir -p of the folder part of `prefix`. */
static int make_parent(const char *prefix)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", prefix);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir) return 0;
    *slash = 0;
    return cli_mkdir_p(dir);
}

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
        fprintf(stderr, "%s%s:", i ? " + " : "", v.name);
        for (int k = 0; k < v.ndim; k++) fprintf(stderr, "%s%lld", k ? "x" : "", (long long)v.dims[k]);
        fprintf(stderr, " %s", calq_dtype_name(v.dtype));
    }
    fprintf(stderr, " (batch_num %d)\n", batch_num);
}

/* The numeric flags of the accuracy search. */
typedef struct search_flags {
    double target_cosine, target, time_budget;
    int max_float, lookahead, have_target;
} search_flags;

/* 1 when argv[*i] is one of them (value checked), 0 when not, -1 on a bad value (printed). */
static int search_flag(int argc, char **argv, int *i, search_flags *f)
{
    static const struct {
        const char *name, *want;
        double lo, hi; /* the value must be in (lo, hi] */
        bool integer;
    } t[] = {{"--target-cosine", "a cosine in (-1, 1]", -1.0, 1.0, false},
             {"--target", "a finite number", -1e300, 1e300, false},
             {"--time-budget", "a positive number of seconds", 0.0, 1e9, false},
             {"--max-float-layers", "a positive integer", 0.0, 1e6, true},
             {"--lookahead", "a positive integer", 0.0, 1e4, true}};
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
        const char *v;
        int r = cli_opt(argc, argv, i, t[k].name, &v);
        if (r <= 0) {
            if (r < 0) return -1;
            continue;
        }
        char *end;
        double x = strtod(v, &end);
        if (*end || end == v || !(x > t[k].lo && x <= t[k].hi) || (t[k].integer && x != (double)(long)x)) {
            cli_failf("%s needs %s, got '%s'", t[k].name, t[k].want, v);
            return -1;
        }
        double *dst[] = {&f->target_cosine, &f->target, &f->time_budget};
        if (k < 3) *dst[k] = x;
        if (k == 1) f->have_target = 1;
        if (k == 3) f->max_float = (int)x;
        if (k == 4) f->lookahead = (int)x;
        return 1;
    }
    return 0;
}

int calq_cmd_calibration(int argc, char **argv)
{
    const char *model = NULL, *weights = NULL, *save = NULL, *shapes = NULL, *config = NULL, *cfg_simple = NULL;
    const char *skip = NULL, *v, *save_type = NULL, *format = NULL, *act_algo = NULL, *eval_data = NULL;
    const char *evaluator = NULL;
    search_flags sf = {0};
    int strict = 0, lower_is_better = 0;
    cli_data data;
    cli_data_init(&data);
    calq_calibrate_opts co;
    calq_calibrate_opts_init(&co);
    int batch_num = 0, act_offset = -1;
    for (int i = 1; i < argc; i++) {
        int r;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage_text, stdout);
            return 0;
        }
#define OPT(flag, var)                                                                                                 \
    else if ((r = cli_opt(argc, argv, &i, flag, &v)))                                                                  \
    {                                                                                                                  \
        if (r < 0) return CLI_USAGE;                                                                                   \
        var = v;                                                                                                       \
    }
        OPT("--model", model)
        OPT("--weights", weights)
        OPT("--save_path", save)
        OPT("--input_shape", shapes)
        OPT("--config", config)
        OPT("--calibration_config", cfg_simple)
        OPT("--skip_layers", skip)
        OPT("--save_type", save_type)
        OPT("--format", format)
        OPT("--act_algo", act_algo)
        OPT("--eval-data", eval_data)
        OPT("--evaluator", evaluator)
#undef OPT
        else if ((r = search_flag(argc, argv, &i, &sf)))
        {
            if (r < 0) return CLI_USAGE;
        }
        else if (!strcmp(argv[i], "--strict"))
        {
            strict = 1;
        }
        else if (!strcmp(argv[i], "--lower-is-better"))
        {
            lower_is_better = 1;
        }
        else if ((r = cli_opt(argc, argv, &i, "--batch_num", &v)))
        {
            if (r < 0) return CLI_USAGE;
            batch_num = atoi(v);
            if (batch_num <= 0) return cli_failf("--batch_num needs a positive number, got '%s'", v);
        }
        else if ((r = cli_opt(argc, argv, &i, "--threads", &v)))
        {
            if (r < 0) return CLI_USAGE;
            co.n_threads = atoi(v);
            if (co.n_threads <= 0) return cli_failf("--threads needs a positive number, got '%s'", v);
        }
        else if ((r = cli_opt(argc, argv, &i, "--activation_offset", &v)))
        {
            if (r < 0) return CLI_USAGE;
            act_offset = !strcmp(v, "true") || !strcmp(v, "True") || !strcmp(v, "1");
            if (!act_offset && strcmp(v, "false") && strcmp(v, "False") && strcmp(v, "0"))
                return cli_failf("--activation_offset needs true or false, got '%s'", v);
        }
        else if ((r = cli_data_opt(argc, argv, &i, &data)))
        {
            if (r < 0) return CLI_USAGE;
        }
        else if (!strcmp(argv[i], "--skip-illegal") || !strcmp(argv[i], "--skip_illegal"))
        {
            co.skip_illegal = 1;
        }
        else
        {
            fprintf(stderr, "calq calibration: unknown option '%s'\n\n%s", argv[i], usage_text);
            return CLI_USAGE;
        }
    }
    const char *missing = !model ? "--model is required" : !save ? "--save_path is required" : NULL;
    if (!missing) missing = cli_data_missing(&data);
    if (!missing && evaluator && !sf.have_target) missing = "--evaluator needs --target V (the metric to reach)";
    if (!missing && sf.have_target && !evaluator)
        missing = "--target goes with --evaluator; without one use --target-cosine";
    if (!missing && evaluator && sf.target_cosine != 0.0) missing = "give --target-cosine or --evaluator, not both";
    bool searching = evaluator || sf.target_cosine != 0.0;
    if (!missing && !searching &&
        (eval_data || sf.max_float || sf.time_budget > 0.0 || sf.lookahead || strict || lower_is_better))
        missing = "--eval-data, --max-float-layers, --time-budget, --strict and --lower-is-better go with "
                  "--target-cosine or --evaluator";
    if (!missing && config && cfg_simple) missing = "give either --config or --calibration_config, not both";
    if (!missing && act_algo && (config || cfg_simple))
        missing = "--act_algo applies to runs without a config; with --config, set \"act_algo\" in the config (per "
                  "layer in activation_quant_params, or at the top level for every layer)";
    if (missing) {
        fprintf(stderr, "calq calibration: %s\n\n%s", missing, usage_text);
        return CLI_USAGE;
    }
    calq_save_format fmts[4];
    int n_fmts = 0, urc = cli_save_formats(format, save_type, weights != NULL, fmts, &n_fmts);
    if (urc) return urc;

    char record_path[4096], config_path[4096];
    snprintf(record_path, sizeof record_path, "%s_record.txt", save);
    snprintf(config_path, sizeof config_path, "%s_config.json", save);
    calq_error err = {0};
    calq_model *m = NULL;
    calq_config *c = NULL;
    calq_data *d = NULL;
    calq_outputs *outs = NULL;
    char *skip_copy = skip ? strdup(skip) : NULL;
    const char *skip_names[1024];
    int n_skip = skip_copy ? split_names(skip_copy, skip_names, 1024) : 0, rc = 1;
    if (cli_load_model(model, weights, &m, &err) != CALQ_OK) goto fail;
    if (shapes && cli_apply_input_shapes(m, shapes, &err) != CALQ_OK) goto fail;
    print_model_summary(m, model, weights);

    if (config || cfg_simple) {
        if (calq_config_load(m, config ? config : cfg_simple, &c, &err) != CALQ_OK) goto fail;
        for (int k = 0; k < n_skip; k++) {
            int li = calq_config_find_layer(c, skip_names[k]);
            if (li >= 0 && calq_config_set_layer_enabled(c, li, 0, &err) != CALQ_OK) goto fail;
        }
        if (batch_num && calq_config_set_batch_num(c, batch_num, &err) != CALQ_OK) goto fail;
    } else {
        calq_config_opts o;
        calq_config_opts_init(&o);
        o.skip_layers = skip_names;
        o.n_skip_layers = n_skip;
        if (batch_num) o.batch_num = batch_num;
        if (act_offset >= 0) o.activation_offset = act_offset;
        o.act_algo = act_algo;
        if (calq_config_create(m, &o, &c, &err) != CALQ_OK) goto fail;
    }

    if (cli_data_open(&data, NULL, m, &d, &err) != CALQ_OK) goto fail;
    print_data_summary(m, d, calq_config_batch_num(c));
    if (make_parent(save) != 0) {
        snprintf(err.message, sizeof err.message, "cannot create the folder of --save_path %s: %s", save,
                 strerror(errno));
        goto fail;
    }
    /* The record, the config and the models are staged together and renamed at the end, under
     * the lock of --save_path (calq_outputs): all of them or none. */
    if (calq_outputs_begin(save, &outs, &err) != CALQ_OK) goto fail;
    co.config_out = config_path;
    co.outputs = outs;
    cli_progress_attach(&co);
    calq_status cst = calq_calibrate(m, c, d, &co, record_path, &err);
    cli_progress_end();
    if (cst != CALQ_OK) goto fail;
    bool missed = false;
    if (searching) {
        calq_fallback_opts fo;
        calq_fallback_opts_init(&fo);
        fo.target = evaluator ? sf.target : sf.target_cosine;
        fo.evaluator = evaluator ? cli_run_evaluator : NULL;
        fo.evaluator_user = (void *)evaluator;
        fo.lower_is_better = lower_is_better;
        fo.max_float_layers = sf.max_float;
        fo.time_budget = sf.time_budget;
        fo.lookahead = sf.lookahead;
        fo.n_threads = co.n_threads;
        fo.outputs = outs; /* the record and config are staged there, not yet renamed */
        calq_data *ed = NULL;
        calq_fallback_result *res = NULL;
        if (eval_data && cli_data_open(&data, eval_data, m, &ed, &err) != CALQ_OK) goto fail_kept;
        fo.eval_data = ed;
        calq_status fs = calq_fallback(m, record_path, config_path, d, &fo, &res, &err);
        calq_data_free(ed);
        if (fs != CALQ_OK) goto fail_kept;
        missed = !res->met;
        if (res->n_float) {
            fprintf(stderr, "calq: the config %s keeps ", config_path);
            for (int k = 0; k < res->n_float; k++) fprintf(stderr, "%s%s", k ? ", " : "", res->float_layers[k]);
            fprintf(stderr, " in float (quant_enable false); calq calibration --config %s reproduces the record\n",
                    config_path);
        }
        calq_fallback_result_free(res);
    }
    if (n_fmts && cli_save(m, record_path, config_path, format != NULL, fmts, n_fmts, save, outs, &err) != CALQ_OK) {
        /* the calibration result is worth keeping: fix the cause and run calq save */
        cli_fail(&err);
        calq_outputs *o = outs;
        outs = NULL;
        if (calq_outputs_commit(o, &err) != CALQ_OK) goto fail;
        fprintf(stderr, "calq: no model written (the record and config are kept: fix the cause and run calq save).\n");
        goto done;
    }
    calq_outputs *o = outs;
    outs = NULL;
    if (calq_outputs_commit(o, &err) != CALQ_OK) goto fail;
    rc = 0;
    if (missed && strict) {
        fprintf(stderr, "calq: error: --strict: the accuracy target is not met (the best model found is written)\n");
        rc = 1;
    }
    goto done;
fail_kept:
    cli_fail(&err);
    {
        calq_outputs *kept = outs;
        outs = NULL;
        if (calq_outputs_commit(kept, &err) != CALQ_OK) goto fail;
    }
    fprintf(stderr, "calq: the search stopped; the record and config of the calibration are kept, no model written.\n");
    goto done;
fail:
    cli_fail(&err);
    fprintf(stderr, "calq: nothing written.\n");
done:
    calq_outputs_abort(outs);
    calq_data_free(d);
    calq_config_free(c);
    calq_model_free(m);
    free(skip_copy);
    return rc;
}
