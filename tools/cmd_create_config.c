/* calq create-config: AMCT's create_quant_config (amct-reference.md §1.1) from the command
 * line. Writes the JSON config (§7.2) listing every quantizable layer with its defaults. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef struct create_args {
    const char *model, *weights, *out, *skip, *cfg;
    int batch_num, act_offset;
} create_args;

static const cli_flag flags[] = {
    {.name = "--model",
     .type = CLI_STRING,
     .offset = offsetof(create_args, model),
     .metavar = "M",
     .required = 1,
     .help = "the model (also the first bare argument): MODEL.onnx, or NET.prototxt with --weights"},
    {.name = "--weights",
     .type = CLI_STRING,
     .offset = offsetof(create_args, weights),
     .metavar = "W",
     .help = "the Caffe weights (NET.caffemodel)"},
    {.name = "--config_file",
     .type = CLI_STRING,
     .offset = offsetof(create_args, out),
     .metavar = "FILE",
     .required = 1,
     .help = "where the JSON config goes (written atomically; the folder is created)"},
    {.name = "--skip_layers",
     .type = CLI_STRING,
     .offset = offsetof(create_args, skip),
     .metavar = "a,b",
     .help = "layers to keep in float: they are left out of the config"},
    {.name = "--batch_num",
     .type = CLI_INT,
     .offset = offsetof(create_args, batch_num),
     .metavar = "N",
     .lo = 1,
     .hi = 1000000000,
     .help = "calibration batches (default 1)"},
    {.name = "--activation_offset",
     .type = CLI_BOOL,
     .offset = offsetof(create_args, act_offset),
     .metavar = "B",
     .help = "true (default): asymmetric activations; false: symmetric"},
    {.name = "--calibration_config",
     .type = CLI_STRING,
     .offset = offsetof(create_args, cfg),
     .metavar = "FILE",
     .help = "derive the config from AMCT's simplified .cfg; as in AMCT, the three\n"
             "options above are then ignored (set them in the .cfg)"},
};

static const cli_command command = {
    .name = "create-config",
    .synopsis = "--model MODEL.onnx|MODEL.prototxt [--weights W.caffemodel] --config_file OUT.json\n"
                "[--skip_layers a,b,...] [--batch_num N] [--activation_offset true|false]\n"
                "[--calibration_config SIMPLE.cfg]",
    .flags = CLI_FLAGS(flags),
    .positional = offsetof(create_args, model),
};

int calq_cmd_create_config(int argc, char **argv)
{
    create_args a = {.act_offset = -1};
    int r = cli_parse(&command, argc, argv, &a);
    if (r) return r < 0 ? 0 : r;
    const char *model = a.model, *weights = a.weights, *out = a.out, *skip = a.skip, *cfg = a.cfg;
    calq_config_opts opts;
    calq_config_opts_init(&opts);
    if (a.batch_num) opts.batch_num = a.batch_num;
    if (a.act_offset >= 0) opts.activation_offset = a.act_offset;
    int ignored = a.skip || a.batch_num || a.act_offset >= 0;

    /* skip_layers: comma-separated names, split in place of a copy. */
    char *skip_copy = skip ? strdup(skip) : NULL;
    const char **names = skip_copy ? calloc(strlen(skip_copy) / 2 + 2, sizeof *names) : NULL;
    if (skip_copy && !names) {
        free(skip_copy);
        return cli_failf("out of memory");
    }
    int n_names = skip_copy ? cli_split_names(skip_copy, names, (int)(strlen(skip_copy) / 2 + 1)) : 0;
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
        fprintf(stderr, "calq: note: --calibration_config is given, so --skip_layers, --batch_num and "
                        "--activation_offset are ignored (AMCT's rule); set them in the .cfg\n");
    char created[4096] = "";
    if (calq_config_create(m, &opts, &c, &err) != CALQ_OK) {
        cli_fail(&err);
        goto done;
    }
    if (cli_make_parent("--config_file", out, created) != 0) goto done;
    if (calq_config_save(c, out, &err) != CALQ_OK) {
        cli_fail(&err);
        cli_unmake_parent(out, created);
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
