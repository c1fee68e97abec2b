/* calq save: a record file (AMCT's or calq's) plus its model into a quantized ONNX model
 * (issue 6). The record is checked against the model first (amct-reference.md §4.4); nothing is
 * written when a check fails. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char usage_text[] =
    "usage: calq save --model MODEL.onnx --record R_record.txt --save_path DIR/PREFIX\n"
    "                 [--format qdq|qoperator|both] [--config C.json|C.cfg] [--input_shape \"in:n,c,h,w\"]\n"
    "\n"
    "  --record R                  the record file of a calibration (AMCT's format, §7.1)\n"
    "  --save_path P               writes P_qdq.onnx (qdq) and/or P_qoperator.onnx (qoperator)\n"
    "  --format F                  qdq (default): QuantizeLinear/DequantizeLinear pairs, int8 weights\n"
    "                              (per channel for Conv), int32 bias; qoperator: QLinearConv/QLinearMatMul\n"
    "                              where the output range is known, QDQ elsewhere; both\n"
    "  --config C                  the config calibration used (its enabled layers must be in the record;\n"
    "                              default: every quantizable layer)\n";

int calq_cmd_save(int argc, char **argv)
{
    const char *model = NULL, *record = NULL, *save = NULL, *format = "qdq", *config = NULL, *shapes = NULL, *v;
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
        OPT("--record", record)
        OPT("--save_path", save)
        OPT("--format", format)
        OPT("--config", config)
        OPT("--input_shape", shapes)
#undef OPT
        else
        {
            fprintf(stderr, "calq save: unknown option '%s'\n%s", argv[i], usage_text);
            return CLI_USAGE;
        }
    }
    if (!model || !record || !save) {
        fprintf(stderr, "calq save: --model, --record and --save_path are required\n%s", usage_text);
        return CLI_USAGE;
    }
    int qdq = !strcmp(format, "qdq") || !strcmp(format, "both");
    int qop = !strcmp(format, "qoperator") || !strcmp(format, "both");
    if (!qdq && !qop) {
        fprintf(stderr, "calq save: --format must be qdq, qoperator or both, not '%s'\n", format);
        return CLI_USAGE;
    }
    calq_error err = {0};
    calq_model *m = NULL;
    int rc = 0;
    if (cli_load_model(model, NULL, &m, &err) != CALQ_OK) return cli_fail(&err);
    if (shapes && cli_apply_input_shapes(m, shapes, &err) != CALQ_OK) rc = cli_fail(&err);
    if (!rc && qdq && calq_save_model_config(m, record, config, CALQ_SAVE_QDQ, save, &err) != CALQ_OK)
        rc = cli_fail(&err);
    if (!rc && qop && calq_save_model_config(m, record, config, CALQ_SAVE_QOPERATOR, save, &err) != CALQ_OK)
        rc = cli_fail(&err);
    calq_model_free(m);
    return rc;
}
