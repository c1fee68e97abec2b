/* calq inspect: what a model holds and what calq would quantize, before anything runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char usage_text[] = "usage: calq inspect MODEL.onnx | --model NET.prototxt --weights NET.caffemodel\n"
                                 "                    [--input-shape NAME:d0,d1,...]\n";

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
    const char *model = NULL, *weights = NULL, *shapes = NULL, *v;
    for (int i = 1; i < argc; i++) {
        int r;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage_text, stdout);
            return 0;
        } else if ((r = cli_opt(argc, argv, &i, "--input-shape", &v)) ||
                   (r = cli_opt(argc, argv, &i, "--input_shape", &v))) {
            if (r < 0) return CLI_USAGE;
            shapes = v;
        } else if ((r = cli_opt(argc, argv, &i, "--model", &v))) {
            if (r < 0) return CLI_USAGE;
            model = v;
        } else if ((r = cli_opt(argc, argv, &i, "--weights", &v))) {
            if (r < 0) return CLI_USAGE;
            weights = v;
        } else if (argv[i][0] != '-' && !model) {
            model = argv[i];
        } else {
            fprintf(stderr, "calq inspect: unknown option '%s'\n\n%s", argv[i], usage_text);
            return CLI_USAGE;
        }
    }
    if (!model) {
        fprintf(stderr, "calq inspect: no model given\n\n%s", usage_text);
        return CLI_USAGE;
    }
    calq_error err = {0};
    calq_model *m = NULL;
    if (cli_load_model(model, weights, &m, &err) != CALQ_OK) return cli_fail(&err);
    if (shapes && cli_apply_input_shapes(m, shapes, &err) != CALQ_OK) {
        calq_model_free(m);
        return cli_fail(&err);
    }
    calq_session *s = NULL;
    /* shapes of the model's own tensors; planning only, so no fast kernel is prepared */
    calq_session_opts opts = {.n_threads = 1, .kernels = CALQ_KERNELS_REF, .no_fusion = 1};
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
