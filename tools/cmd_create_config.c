/* calq create-config: AMCT's create_quant_config (amct-reference.md §1.1) from the command
 * line. Writes the JSON config (§7.2) listing every quantizable layer with its defaults. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char usage_text[] =
    "usage: calq create-config --model MODEL.onnx|MODEL.prototxt [--weights W.caffemodel] --config_file OUT.json\n"
    "                          [--skip_layers a,b,...] [--batch_num N] [--activation_offset true|false]\n"
    "                          [--calibration_config SIMPLE.cfg]\n"
    "\n"
    "  --config_file FILE         where the JSON config goes (written atomically)\n"
    "  --skip_layers a,b          layers to keep in float: they are left out of the config\n"
    "  --batch_num N              calibration batches (default 1)\n"
    "  --activation_offset B      true (default): asymmetric activations; false: symmetric\n"
    "  --calibration_config FILE  derive the config from AMCT's simplified .cfg; as in AMCT, the three\n"
    "                             options above are then ignored (set them in the .cfg)\n";

static int parse_bool(const char *v, int *out)
{
    if (!strcmp(v, "true") || !strcmp(v, "True") || !strcmp(v, "1")) {
        *out = 1;
        return 0;
    }
    if (!strcmp(v, "false") || !strcmp(v, "False") || !strcmp(v, "0")) {
        *out = 0;
        return 0;
    }
    return -1;
}

int calq_cmd_create_config(int argc, char **argv)
{
    const char *model = NULL, *weights = NULL, *out = NULL, *skip = NULL, *cfg = NULL, *v;
    calq_config_opts opts;
    calq_config_opts_init(&opts);
    int ignored = 0;
    for (int i = 1; i < argc; i++) {
        int r;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage_text, stdout);
            return 0;
        } else if ((r = cli_opt(argc, argv, &i, "--model", &v))) {
            if (r < 0) return CLI_USAGE;
            model = v;
        } else if ((r = cli_opt(argc, argv, &i, "--weights", &v))) {
            if (r < 0) return CLI_USAGE;
            weights = v;
        } else if ((r = cli_opt(argc, argv, &i, "--config_file", &v))) {
            if (r < 0) return CLI_USAGE;
            out = v;
        } else if ((r = cli_opt(argc, argv, &i, "--skip_layers", &v))) {
            if (r < 0) return CLI_USAGE;
            skip = v;
            ignored = 1;
        } else if ((r = cli_opt(argc, argv, &i, "--batch_num", &v))) {
            if (r < 0) return CLI_USAGE;
            char *end;
            long n = strtol(v, &end, 10);
            if (end == v || *end || n <= 0 || n > 1000000000)
                return cli_failf("--batch_num '%s': expected a positive whole number of batches", v);
            opts.batch_num = (int)n;
            ignored = 1;
        } else if ((r = cli_opt(argc, argv, &i, "--activation_offset", &v))) {
            if (r < 0) return CLI_USAGE;
            if (parse_bool(v, &opts.activation_offset) != 0)
                return cli_failf("--activation_offset '%s': expected true or false", v);
            ignored = 1;
        } else if ((r = cli_opt(argc, argv, &i, "--calibration_config", &v))) {
            if (r < 0) return CLI_USAGE;
            cfg = v;
        } else if (argv[i][0] != '-' && !model) {
            model = argv[i];
        } else {
            fprintf(stderr, "calq create-config: unknown option '%s'\n\n%s", argv[i], usage_text);
            return CLI_USAGE;
        }
    }
    if (!model || !out) {
        fprintf(stderr, "calq create-config: %s\n\n%s",
                !model ? "no model given (--model)" : "--config_file is required", usage_text);
        return CLI_USAGE;
    }

    /* skip_layers: comma-separated names, split in place of a copy. */
    char *skip_copy = skip ? strdup(skip) : NULL;
    const char **names = NULL;
    int n_names = 0;
    if (skip_copy) {
        names = calloc(strlen(skip_copy) / 2 + 2, sizeof *names);
        if (!names) {
            free(skip_copy);
            return cli_failf("out of memory");
        }
        char *save = NULL;
        for (char *t = strtok_r(skip_copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            while (*t == ' ') t++;
            size_t k = strlen(t);
            while (k > 0 && t[k - 1] == ' ') t[--k] = 0;
            if (*t) names[n_names++] = t;
        }
    }
    opts.skip_layers = names;
    opts.n_skip_layers = n_names;
    opts.config_defination = cfg;

    calq_error err = {0};
    calq_model *m = NULL;
    calq_config *c = NULL;
    int rc = 1;
    if (cli_load_model(model, weights, &m, &err) != CALQ_OK) {
        cli_fail(&err);
        goto done;
    }
    if (cfg && ignored)
        fprintf(stderr,
                "calq: note: --calibration_config is given, so --skip_layers, --batch_num and "
                "--activation_offset are ignored (AMCT's rule); set them in %s\n",
                cfg);
    if (calq_config_create(m, &opts, &c, &err) != CALQ_OK || calq_config_save(c, out, &err) != CALQ_OK) {
        cli_fail(&err);
        goto done;
    }
    int n_quant = 0;
    for (int i = 0; i < calq_model_num_nodes(m); i++) {
        calq_node_info ni;
        if (calq_model_node_info(m, i, &ni) == CALQ_OK) n_quant += ni.quantizable;
    }
    int n_listed = calq_config_num_layers(c);
    fprintf(stderr, "calq: wrote %s: %d quantizable layer%s, %d configured, %d skipped (batch_num %d)\n", out, n_quant,
            n_quant == 1 ? "" : "s", n_listed, n_quant - n_listed, calq_config_batch_num(c));
    rc = 0;
done:
    calq_config_free(c);
    calq_model_free(m);
    free(names);
    free(skip_copy);
    return rc;
}
