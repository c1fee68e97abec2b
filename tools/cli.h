/* Shared helpers for calq's subcommands (public API only). */
#ifndef CALQ_TOOLS_CLI_H
#define CALQ_TOOLS_CLI_H

#include <stdbool.h>

#include "calq.h"

#define CLI_USAGE 2 /* exit status for a usage error */

/* Prints "calq: error: <message>" to stderr; returns 1. */
int cli_fail(const calq_error *err);
int cli_failf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Matches "--name value" and "--name=value" (AMCT's two spellings). On a match returns 1,
 * sets *val and advances *i; returns -1 (after printing) when the value is missing. */
int cli_opt(int argc, char **argv, int *i, const char *name, const char **val);

/* Parses "NAME:d0,d1,..." (or several separated by ';') and applies each with
 * calq_model_set_input_shape. */
calq_status cli_apply_input_shapes(calq_model *m, const char *spec, calq_error *err);

/* Loads an ONNX model (path ends in .onnx) or a Caffe model (prototxt + weights). */
calq_status cli_load_model(const char *model, const char *weights, calq_model **out, calq_error *err);

/* A file-name-safe copy of a tensor name ('/', ':' and other odd characters become '_'). */
void cli_safe_name(const char *name, char *buf, size_t n);

/* Image preprocessing flags shared by run and calibration: --resize WxH, --mean a[,b,c],
 * --std a[,b,c], --scale s, --bgr. Returns 1 when argv[*i] was one of them, 0 when not, -1 on
 * a bad value (after printing). */
int cli_image_opt(int argc, char **argv, int *i, calq_image_opts *o);

/* The data flags (cli_data.c): --data_dir "d1/;d2/" [--data_types "t1;t2"] | --images DIR (with
 * the image flags) | --npy SPEC. */
typedef struct cli_data {
    const char *data_dir, *data_types, *images, *npy;
    calq_image_opts img;
} cli_data;
void cli_data_init(cli_data *d);
/* As cli_opt: 1 when argv[*i] was a data or image flag, 0 when not, -1 on a bad value. */
int cli_data_opt(int argc, char **argv, int *i, cli_data *d);
/* NULL when exactly one source is given, else the message. */
const char *cli_data_missing(const cli_data *d);
/* Opens the source; path (not NULL) replaces the folder / spec with another of the same kind
 * (--eval-data). Images: batch size = dim 0 of m's first input. */
calq_status cli_data_open(const cli_data *d, const char *path, const calq_model *m, calq_data **out, calq_error *err);

/* calq_evaluator_fn running the shell command template `user` (cli_evaluator.c). */
calq_status cli_run_evaluator(void *user, const char *model, const char *weights, double *metric, calq_error *err);

/* Subcommands. */
/* --format (comma list of ascend, qdq, qoperator; both; all) and --save_type (Both, Fakequant,
 * Deploy, None) into at most 4 formats. NULL format: "all" (ONNX) / "ascend" (Caffe). Returns 0,
 * or CLI_USAGE after printing why. Fakequant keeps the ascend fake-quant and the QDQ file,
 * Deploy the ascend deploy and the QOperator file. */
int cli_save_formats(const char *format, const char *save_type, bool caffe, calq_save_format *fmts, int *n);
/* Saves fmts (staged in outputs when non-NULL, else committed at once). chosen (the user gave --format): all of them or
 * nothing; otherwise the formats this model allows, printing which were skipped and why (calq_save_models_available).
 */
calq_status cli_save(const calq_model *m, const char *record, const char *config, bool chosen,
                     const calq_save_format *fmts, int n, const char *prefix, calq_outputs *outputs, calq_error *err);

/* cli_log.c: the logger every subcommand runs with (messages up to INFO on stderr), and
 * calibration's progress bar (stderr a terminal and o->log set); cli_progress_end clears it. */
void cli_log_install(void);
void cli_progress_attach(calq_calibrate_opts *o);
void cli_progress_end(void);

/* mkdir -p; 0, or -1 with errno. */
int cli_mkdir_p(const char *path);

int calq_cmd_run(int argc, char **argv);
int calq_cmd_inspect(int argc, char **argv);
int calq_cmd_factors(int argc, char **argv);
int calq_cmd_create_config(int argc, char **argv);
int calq_cmd_calibration(int argc, char **argv);
int calq_cmd_save(int argc, char **argv);
int calq_cmd_compare(int argc, char **argv);

#endif
