/* calq save: a record file (AMCT's or calq's) plus its model into quantized models (issue 6).
 * The record is checked against the model first (amct-reference.md §4.4); nothing is written
 * when a check fails, and the files of one save are replaced together or not at all. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

typedef struct save_args {
    const char *model, *weights, *record, *save, *format, *config, *shapes;
    int save_type, reduce_range;
} save_args;

static const cli_flag flags[] = {
    {.name = "--model",
     .type = CLI_STRING,
     .offset = offsetof(save_args, model),
     .metavar = "M",
     .required = 1,
     .help = "the float model the record was calibrated on (MODEL.onnx, or NET.prototxt with --weights)"},
    {.name = "--weights",
     .type = CLI_STRING,
     .offset = offsetof(save_args, weights),
     .metavar = "W",
     .help = "the Caffe weights (NET.caffemodel)"},
    {.name = "--record",
     .type = CLI_STRING,
     .offset = offsetof(save_args, record),
     .metavar = "R",
     .required = 1,
     .help = "the record file of a calibration (AMCT's format, §7.1)"},
    {.name = "--save_path",
     .type = CLI_STRING,
     .offset = offsetof(save_args, save),
     .metavar = "P",
     .required = 1,
     .help = "output prefix (files below; the folder is created)"},
    {.name = "--format",
     .type = CLI_STRING,
     .offset = offsetof(save_args, format),
     .metavar = "F",
     .help = "a comma list of (default: all for ONNX, ascend for Caffe)\n"
             "  ascend     AMCT's models: P_fake_quant_model.onnx (§9.2, standard ONNX ops)\n"
             "             and P_deploy_model.onnx (AscendQuant/AscendDequant, int8 weights,\n"
             "             int32 bias, uint64 deq_scale: ATC's input); Caffe:\n"
             "             P_fake_quant_model.prototxt + P_fake_quant_weights.caffemodel,\n"
             "             P_deploy_model.prototxt + P_deploy_weights.caffemodel\n"
             "  qdq        P_qdq.onnx: QuantizeLinear/DequantizeLinear pairs (fake-quant kind)\n"
             "  qoperator  P_qoperator.onnx: QLinearConv/QLinearMatMul (deploy kind)\n"
             "both = qdq,qoperator; all = ascend,qdq,qoperator"},
    {.name = "--save_type",
     .type = CLI_ENUM,
     .offset = offsetof(save_args, save_type),
     .metavar = "T",
     .choices = cli_save_types,
     .help = "Both (default), Fakequant (the fake-quant kind only), Deploy (deploy kind only)"},
    {.name = "--reduce-range",
     .type = CLI_SWITCH,
     .offset = offsetof(save_args, reduce_range),
     .help = "7-bit weights in the qdq / qoperator files: exact in onnxruntime on x86 CPUs\n"
             "without VNNI, whose int8 kernels saturate 8-bit ones (docs/cli.md)"},
    {.name = "--config",
     .type = CLI_STRING,
     .offset = offsetof(save_args, config),
     .metavar = "C",
     .help = "the config calibration used, JSON or .cfg (its enabled layers must be in the\n"
             "record; default: every quantizable layer)"},
    {.name = "--input_shape",
     .alias = "--input-shape",
     .type = CLI_CUSTOM,
     .offset = offsetof(save_args, shapes),
     .metavar = "SPEC",
     .parse = cli_parse_input_shapes,
     .help = "fix input shapes, e.g. input:1,3,240,320"},
};

static const cli_command command = {
    .name = "save",
    .synopsis = "--model MODEL.onnx|MODEL.prototxt [--weights W.caffemodel] --record R_record.txt\n"
                "--save_path DIR/PREFIX [--format F] [--save_type Both|Fakequant|Deploy] [--reduce-range]\n"
                "[--config C.json|C.cfg] [--input_shape \"in:n,c,h,w\"]",
    .flags = CLI_FLAGS(flags),
    .positional = CLI_NO_POSITIONAL,
};

int calq_cmd_save(int argc, char **argv)
{
    save_args a = {.save_type = CLI_SAVE_BOTH};
    int rc = cli_parse(&command, argc, argv, &a);
    if (rc) return rc < 0 ? 0 : rc;
    calq_save_format fmts[4];
    int n_fmts = 0;
    rc = cli_save_formats(a.format, a.save_type, a.weights != NULL, a.reduce_range, fmts, &n_fmts);
    if (rc) return rc;
    if (!n_fmts) {
        cli_failf("--save_type None: calq save has nothing to write");
        return CLI_USAGE;
    }
    calq_error err = {0};
    calq_model *m = NULL;
    if (cli_load_model(a.model, a.weights, &m, &err) != CALQ_OK) return cli_fail(&err);
    if (a.shapes && cli_apply_input_shapes(m, a.shapes, &err) != CALQ_OK) rc = cli_fail(&err);
    char created[4096] = "";
    if (!rc && cli_make_parent("--save_path", a.save, created) != 0) rc = 1;
    if (!rc && cli_save(m, a.record, a.config, a.format != NULL, fmts, n_fmts, a.save, NULL, &err) != CALQ_OK)
        rc = cli_fail(&err);
    if (rc) {
        cli_unmake_parent(a.save, created);
        fprintf(stderr, "calq: nothing written.\n");
    }
    calq_model_free(m);
    return rc;
}
