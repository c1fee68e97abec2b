/* The calq command line: one file per subcommand. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *what;
} commands[] = {
    {"run", calq_cmd_run, "run a model (float, or a quantized one calq wrote) and write its outputs"},
    {"inspect", calq_cmd_inspect, "list a model's inputs, outputs, shapes, operators and quantizable layers"},
    {"factors", calq_cmd_factors, "compute quantization factors (IFMR/HFMG/ARQ) for one tensor"},
    {"create-config", calq_cmd_create_config, "write AMCT's quantization config (JSON) for a model"},
    {"calibration", calq_cmd_calibration, "calibrate a model on data: AMCT's record file, then the quantized models"},
    {"save", calq_cmd_save, "write fake-quant and deploy models (AMCT's, QDQ, QOperator) from a model and a record"},
    {"compare", calq_cmd_compare, "compare a quantized model with its float model, layer by layer (text, JSON, HTML)"},
};

static void usage(FILE *f)
{
    fprintf(f, "calq %s: post-training INT8 quantization\n\nusage: calq <command> [options]\n\ncommands:\n",
            CALQ_VERSION_STRING);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].what);
    fprintf(f, "\n'calq <command> --help' describes a command's options.\n");
}

/* How OpenMP threads wait between parallel regions: libgomp reads its variables when it loads,
 * before main, so unless the user chose (either variable set, or CALQ_NO_REEXEC), take the
 * library's advice for this machine's load (calq_wait_policy_advice, calq.h) and re-execute
 * once. Results do not depend on the policy. docs/cli.md, "Threads". */
static void choose_wait_policy(char **argv)
{
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT") || getenv("CALQ_NO_REEXEC")) return;
    calq_wait_policy w = calq_wait_policy_advice();
    if (setenv("OMP_WAIT_POLICY", w.omp_wait_policy, 1) != 0) return;
    if (w.gomp_spincount && setenv("GOMP_SPINCOUNT", w.gomp_spincount, 1) != 0) {
        unsetenv("OMP_WAIT_POLICY");
        return;
    }
    execv("/proc/self/exe", argv);
    unsetenv("OMP_WAIT_POLICY"); /* exec failed: carry on with the default */
    unsetenv("GOMP_SPINCOUNT");
}

int main(int argc, char **argv)
{
    choose_wait_policy(argv);
    cli_log_install();
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? CLI_USAGE : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("calq %s\n", CALQ_VERSION_STRING);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "calq: error: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return CLI_USAGE;
}
