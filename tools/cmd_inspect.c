/* calq inspect: what a model holds and what calq would quantize, before anything runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef struct inspect_args {
    const char *model, *weights, *shapes;
    int max_arena_mb;
} inspect_args;

static const cli_flag flags[] = {
    {.name = "--model",
     .type = CLI_STRING,
     .offset = offsetof(inspect_args, model),
     .metavar = "M",
     .required = 1,
     .help = "the model (also the first bare argument): MODEL.onnx, or NET.prototxt with --weights"},
    {.name = "--weights",
     .type = CLI_STRING,
     .offset = offsetof(inspect_args, weights),
     .metavar = "W",
     .help = "the Caffe weights (NET.caffemodel)"},
    {.name = "--input-shape",
     .alias = "--input_shape",
     .type = CLI_CUSTOM,
     .offset = offsetof(inspect_args, shapes),
     .metavar = "SPEC",
     .parse = cli_parse_input_shapes,
     .help = "bind dynamic dims first, e.g. input:1,3,240,320 (several: a:..;b:...)"},
    {.name = "--max-arena-mb",
     .type = CLI_INT,
     .offset = offsetof(inspect_args, max_arena_mb),
     .metavar = "N",
     .lo = 0,
     .hi = 1073741824,
     .help = CLI_MAX_ARENA_HELP},
};

static const cli_command command = {
    .name = "inspect",
    .synopsis = "MODEL.onnx | --model NET.prototxt --weights NET.caffemodel [--input-shape NAME:d0,...]\n"
                "[--max-arena-mb N]",
    .about = "Inputs, outputs and their shapes, the operator histogram, and the layers calq would\n"
             "quantize (AMCT's rule) with their input and output shapes.",
    .flags = CLI_FLAGS(flags),
    .positional = offsetof(inspect_args, model),
};

static void print_shape(const calq_value_info *v)
{
    if (v->ndim < 0) {
        printf("?");
        return;
    }
    printf("[");
    for (int d = 0; d < v->ndim; d++) {
        if (v->dims[d] < 0)
            printf("%s?", d ? "," : "");
        else
            printf("%s%lld", d ? "," : "", (long long)v->dims[d]);
    }
    printf("]");
}

int calq_cmd_inspect(int argc, char **argv)
{
    inspect_args a = {.max_arena_mb = -1};
    int r = cli_parse(&command, argc, argv, &a);
    if (r) return r < 0 ? 0 : r;
    const char *model = a.model;
    calq_error err = {0};
    calq_model *m = NULL;
    if (cli_load_model(model, a.weights, &m, &err) != CALQ_OK) return cli_fail(&err);
    if (a.shapes && cli_apply_input_shapes(m, a.shapes, &err) != CALQ_OK) {
        calq_model_free(m);
        return cli_fail(&err);
    }
    calq_session *s = NULL;
    /* shapes of the model's own tensors; planning only, so no fast kernel is prepared */
    calq_session_opts opts = {.n_threads = 1, .kernels = CALQ_KERNELS_REF, .no_fusion = 1};
    if ((r = cli_max_arena(a.max_arena_mb, &opts.max_arena_bytes)) != 0) {
        calq_model_free(m);
        return r;
    }
    int shapes_ok = calq_session_create(m, &opts, &s, &err) == CALQ_OK;
    calq_error shape_err = {0};
    calq_value_info probe;
    if (shapes_ok && calq_model_num_nodes(m) > 0)
        shapes_ok = calq_session_tensor_info(s, calq_model_node_output(m, 0, 0), &probe, &shape_err) == CALQ_OK;

    printf("model: %s\n", model);
    printf("inputs:\n");
    for (int i = 0; i < calq_model_num_inputs(m); i++) {
        calq_value_info info;
        calq_model_input_info(m, i, &info);
        printf("  %-24s %-8s ", info.name, calq_dtype_name(info.dtype));
        print_shape(&info);
        printf("\n");
    }
    printf("outputs:\n");
    for (int i = 0; i < calq_model_num_outputs(m); i++) {
        calq_value_info info;
        calq_model_output_info(m, i, &info);
        if (shapes_ok) calq_session_tensor_info(s, info.name, &info, &err);
        printf("  %-24s %-8s ", info.name, calq_dtype_name(info.dtype));
        print_shape(&info);
        printf("\n");
    }
    int n = calq_model_num_nodes(m), n_quant = 0;
    /* operator histogram, in order of first appearance */
    const char **types = calloc((size_t)n + 1, sizeof *types);
    int *counts = calloc((size_t)n + 1, sizeof *counts), n_types = 0;
    for (int i = 0; types && counts && i < n; i++) {
        calq_node_info ni;
        calq_model_node_info(m, i, &ni);
        n_quant += ni.quantizable;
        int t = 0;
        while (t < n_types && strcmp(types[t], ni.op_type)) t++;
        if (t == n_types) types[n_types++] = ni.op_type;
        counts[t]++;
    }
    printf("operators: %d nodes\n", n);
    for (int t = 0; t < n_types; t++) printf("  %-24s %d\n", types[t], counts[t]);
    printf("quantizable layers: %d\n", n_quant);
    for (int i = 0; i < n; i++) {
        calq_node_info ni;
        calq_model_node_info(m, i, &ni);
        if (!ni.quantizable) continue;
        calq_value_info in = {0}, out = {0};
        printf("  %-32s %-14s in ", ni.name, ni.op_type);
        if (shapes_ok && calq_session_tensor_info(s, calq_model_node_input(m, i, 0), &in, &err) == CALQ_OK)
            print_shape(&in);
        else
            printf("?");
        printf(" -> ");
        if (shapes_ok && calq_session_tensor_info(s, calq_model_node_output(m, i, 0), &out, &err) == CALQ_OK)
            print_shape(&out);
        else
            printf("?");
        printf("\n");
    }
    if (!shapes_ok && shape_err.message[0]) printf("shapes: not inferred: %s\n", shape_err.message);
    free(types);
    free(counts);
    calq_session_free(s);
    calq_model_free(m);
    return 0;
}
