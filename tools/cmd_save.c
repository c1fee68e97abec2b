/* calq save: a record file (AMCT's or calq's) plus its model into quantized models (issue 6).
 * The record is checked against the model first (amct-reference.md §4.4); nothing is written
 * when a check fails, and the files of one save are replaced together or not at all. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char usage_text[] =
    "usage: calq save --model MODEL.onnx|MODEL.prototxt [--weights W.caffemodel] --record R_record.txt\n"
    "                 --save_path DIR/PREFIX [--format F] [--save_type Both|Fakequant|Deploy]\n"
    "                 [--config C.json|C.cfg] [--input_shape \"in:n,c,h,w\"]\n"
    "\n"
    "  --record R                  the record file of a calibration (AMCT's format, §7.1)\n"
    "  --save_path P               output prefix (files below)\n"
    "  --format F                  a comma list of (default: all for ONNX, ascend for Caffe)\n"
    "                                ascend     AMCT's models: P_fake_quant_model.onnx (§9.2, standard ONNX ops)\n"
    "                                           and P_deploy_model.onnx (AscendQuant/AscendDequant, int8 weights,\n"
    "                                           int32 bias, uint64 deq_scale: ATC's input); Caffe:\n"
    "                                           P_fake_quant_model.prototxt + P_fake_quant_weights.caffemodel,\n"
    "                                           P_deploy_model.prototxt + P_deploy_weights.caffemodel\n"
    "                                qdq        P_qdq.onnx: QuantizeLinear/DequantizeLinear pairs (fake-quant kind)\n"
    "                                qoperator  P_qoperator.onnx: QLinearConv/QLinearMatMul (deploy kind)\n"
    "                              both = qdq,qoperator; all = ascend,qdq,qoperator\n"
    "  --save_type T               Both (default), Fakequant (the fake-quant kind only), Deploy (deploy kind only)\n"
    "  --config C                  the config calibration used (its enabled layers must be in the record;\n"
    "                              default: every quantizable layer)\n";

int calq_cmd_save(int argc, char **argv)
{
    const char *model = NULL, *weights = NULL, *record = NULL, *save = NULL, *format = NULL, *save_type = NULL;
    const char *config = NULL, *shapes = NULL, *v;
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
        OPT("--record", record)
        OPT("--save_path", save)
        OPT("--format", format)
        OPT("--save_type", save_type)
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
    calq_save_format fmts[4];
    int n_fmts = 0;
    int rc = cli_save_formats(format, save_type, weights != NULL, fmts, &n_fmts);
    if (rc) return rc;
    if (!n_fmts) {
        cli_failf("--save_type None: calq save has nothing to write");
        return CLI_USAGE;
    }
    calq_error err = {0};
    calq_model *m = NULL;
    if (cli_load_model(model, weights, &m, &err) != CALQ_OK) return cli_fail(&err);
    if (shapes && cli_apply_input_shapes(m, shapes, &err) != CALQ_OK) rc = cli_fail(&err);
    if (!rc && cli_save(m, record, config, format != NULL, fmts, n_fmts, save, NULL, &err) != CALQ_OK) {
        rc = cli_fail(&err);
        fprintf(stderr, "calq: nothing written.\n");
    }
    calq_model_free(m);
    return rc;
}
