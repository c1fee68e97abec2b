/* Shared helpers for calq's subcommands (public API only). */
#ifndef CALQ_TOOLS_CLI_H
#define CALQ_TOOLS_CLI_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>

#include "calq.h"
#include "cli_flags.h"

#define CLI_USAGE 2 /* exit status for a usage error */

/* --max-arena-mb: what the tensors of one run may take (calq_session_opts.max_arena_bytes): the
 * flag's MiB when given (flag_mb >= 0), else the environment's CALQ_MAX_ARENA_MB, else a quarter
 * of this machine's memory; 0 means no limit. Without it a 200-byte model could ask for half of
 * the machine's memory. Returns 0, or CLI_USAGE after printing why (a bad CALQ_MAX_ARENA_MB). */
int cli_max_arena(int flag_mb, size_t *bytes);
#define CLI_MAX_ARENA_HELP                                                                                             \
    "MiB the tensors of one run may take (activations, constants folded while planning, each tensor\n"                 \
    "computed at run time); default: CALQ_MAX_ARENA_MB, else a quarter of this machine's memory; 0: no limit"

/* Prints "calq: error: <message>" to stderr; returns 1. The message is bounded: names and
 * paths in it are cut with cli_cut. */
int cli_fail(const calq_error *err);
int cli_failf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A user's value or path as a message shows it: at most CLI_CUT_BUF - 1 bytes, the middle
 * replaced by "..." (the library's messages cut names the same way, src/base/cut.h). */
#define CLI_CUT_BUF 121
const char *cli_cut(const char *s, char buf[CLI_CUT_BUF]);

/* Parses "NAME:d0,d1,..." (or several separated by ';') and applies each with
 * calq_model_set_input_shape. */
calq_status cli_apply_input_shapes(calq_model *m, const char *spec, calq_error *err);
/* CLI_CUSTOM check of the same syntax at parse time (dest: const char *). */
const char *cli_parse_input_shapes(const char *v, void *dest);

/* Loads an ONNX model (path ends in .onnx) or a Caffe model (prototxt + weights). */
calq_status cli_load_model(const char *model, const char *weights, calq_model **out, calq_error *err);

/* A file-name-safe copy of a tensor name ('/', ':' and other odd characters become '_'). */
void cli_safe_name(const char *name, char *buf, size_t n);

/* Image preprocessing flags shared by run and calibration, into the calq_image_opts member
 * `img` of args_type: --resize WxH, --mean a[,b,c], --std a[,b,c], --scale s, --bgr. */
const char *cli_parse_resize(const char *v, void *dest); /* dest: calq_image_opts */
const char *cli_parse_mean(const char *v, void *dest);   /* dest: float[3] */
const char *cli_parse_std(const char *v, void *dest);    /* dest: float[3], none zero */
/* clang-format off */
#define CLI_IMAGE_FLAGS(args_type, img)                                                                                \
    {.name = "--resize", .type = CLI_CUSTOM, .offset = offsetof(args_type, img), .metavar = "WxH",                     \
     .parse = cli_parse_resize, .help = "resize photos to W x H pixels (default: keep their size)"},                   \
    {.name = "--mean", .type = CLI_CUSTOM, .offset = offsetof(args_type, img.mean), .metavar = "M[,M,M]",              \
     .parse = cli_parse_mean, .help = "photo preprocessing (x - M) / S * K per channel; default 0"},                  \
    {.name = "--std", .type = CLI_CUSTOM, .offset = offsetof(args_type, img.std), .metavar = "S[,S,S]",                \
     .parse = cli_parse_std, .help = "default 1"},                                                                     \
    {.name = "--scale", .type = CLI_FLOAT, .offset = offsetof(args_type, img.scale), .metavar = "K",                   \
     .lo = -HUGE_VAL, .hi = HUGE_VAL, .help = "default 1"},                                                            \
    {.name = "--bgr", .type = CLI_SWITCH, .offset = offsetof(args_type, img.bgr),                                      \
     .help = "channels in BGR order (default RGB), NCHW"}
/* clang-format on */

/* The data flags (cli_data.c), into the cli_data member `data` of args_type: --data_dir "d1/;d2/"
 * [--data_types "t1;t2"] | --images DIR (with the image flags) | --npy SPEC. */
typedef struct cli_data {
    const char *data_dir, *data_types, *images, *npy;
    calq_image_opts img;
} cli_data;
void cli_data_init(cli_data *d);
/* clang-format off */
#define CLI_DATA_FLAGS(args_type, data)                                                                                \
    {.name = "--data_dir", .type = CLI_STRING, .offset = offsetof(args_type, data.data_dir),                           \
     .metavar = "\"d1/;d2/\"", .help = "AMCT's raw data: one folder per model input, one .bin file per batch"},       \
    {.name = "--data_types", .type = CLI_STRING, .offset = offsetof(args_type, data.data_types),                       \
     .metavar = "\"t1;t2\"", .help = "element type of each folder's files (float32 default, float64, float16)"},      \
    {.name = "--images", .type = CLI_STRING, .offset = offsetof(args_type, data.images), .metavar = "DIR",            \
     .help = "photos (JPEG/PNG/BMP, name order), batch size = dim 0 of the input,\n"                                  \
             "preprocessed with the five options below"},                                                              \
    CLI_IMAGE_FLAGS(args_type, data.img),                                                                              \
    {.name = "--npy", .type = CLI_STRING, .offset = offsetof(args_type, data.npy), .metavar = "SPEC",                 \
     .help = "per input (';'): a folder of .npy files or a ','-list of files, one batch each"}
/* clang-format on */
/* NULL when exactly one source is given, else the message. */
const char *cli_data_missing(const cli_data *d);
/* Opens the source; path (not NULL) replaces the folder / spec with another of the same kind
 * (--eval-data). Images: batch size = dim 0 of m's first input. */
calq_status cli_data_open(const cli_data *d, const char *path, const calq_model *m, calq_data **out, calq_error *err);

/* --evaluator: the command and what bounds one run of it. */
typedef struct cli_evaluator {
    const char *command; /* the template: {model}, {weights} */
    double timeout;      /* seconds one run may take (--evaluator-timeout) */
    double deadline;     /* cli_monotonic() by which any run must end (the search's start + --time-budget), 0: none */
    double budget;       /* the --time-budget, for the message */
} cli_evaluator;
/* --evaluator-timeout's default: a generous bound on a hung command (docs/cli.md). */
#define CLI_EVALUATOR_TIMEOUT_DEFAULT 3600.0

/* calq_evaluator_fn running the command of `user`, a cli_evaluator (cli_evaluator.c): fails when a
 * run outlasts its limit (the command and its children are then ended), exits non-zero, or prints
 * no finite number. */
calq_status cli_run_evaluator(void *user, const char *model, const char *weights, double *metric, calq_error *err);
/* Seconds on CLOCK_MONOTONIC. */
double cli_monotonic(void);

/* --save_type (AMCT's names, amct-reference.md §1.1, any case). */
enum { CLI_SAVE_BOTH, CLI_SAVE_FAKEQUANT, CLI_SAVE_DEPLOY, CLI_SAVE_NONE };
extern const cli_choice cli_save_types[];

/* --format (comma list of ascend, qdq, qoperator; both; all) and --save_type (CLI_SAVE_*) into at
 * most 4 formats. NULL format: "all" (ONNX) / "ascend" (Caffe). Returns 0, or CLI_USAGE after
 * printing why. Fakequant keeps the ascend fake-quant and the QDQ file, Deploy the ascend deploy
 * and the QOperator file. */
int cli_save_formats(const char *format, int save_type, bool caffe, bool reduce_range, calq_save_format *fmts, int *n);
/* Saves fmts (staged in outputs when non-NULL, else committed at once). chosen (the user gave
 * --format): all of them or nothing; otherwise the formats this model allows, printing which were
 * skipped and why (calq_save_models_available). */
calq_status cli_save(const calq_model *m, const char *record, const char *config, bool chosen,
                     const calq_save_format *fmts, int n, const char *prefix, calq_outputs *outputs, calq_error *err);

/* cli_log.c: the logger every subcommand runs with (messages up to INFO on stderr), and
 * calibration's progress bar (stderr a terminal and o->log set); cli_progress_end clears it. */
void cli_log_install(void);
void cli_progress_attach(calq_calibrate_opts *o);
void cli_progress_end(void);

/* mkdir -p; 0, or -1 with errno. */
int cli_mkdir_p(const char *path);
/* mkdir -p of the folder part of an output prefix or file ("out/run1/uf" -> out/run1). Returns
 * 0, or 1 after printing "cannot create the folder of <flag> ...". created[] receives the first
 * folder it made ("" when the folder existed), for cli_unmake_parent. */
int cli_make_parent(const char *flag, const char *path, char created[4096]);
/* After a failed run: removes the folders cli_make_parent made for path, when they are empty,
 * so "nothing written" leaves nothing behind. */
void cli_unmake_parent(const char *path, const char *created);

/* Splits a comma list in place (names point into s, blanks around names dropped). Returns the
 * count, or -1 when there are more than max. */
int cli_split_names(char *s, const char **names, int max);

/* Subcommands. */
int calq_cmd_run(int argc, char **argv);
int calq_cmd_inspect(int argc, char **argv);
int calq_cmd_factors(int argc, char **argv);
int calq_cmd_create_config(int argc, char **argv);
int calq_cmd_calibration(int argc, char **argv);
int calq_cmd_save(int argc, char **argv);
int calq_cmd_compare(int argc, char **argv);

#endif
