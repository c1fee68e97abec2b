/* One table of flags per subcommand: the parser, the value rules and `--help` all read it
 * (docs/cli.md). A flag is written `--flag value` or `--flag=value` (AMCT's two spellings); a
 * value must parse whole and lie in the flag's range, else the command fails with a usage error
 * (exit 2) naming the flag and the value. */
#ifndef CALQ_TOOLS_CLI_FLAGS_H
#define CALQ_TOOLS_CLI_FLAGS_H

#include <stddef.h>
#include <stdio.h>

typedef enum cli_type {
    CLI_STRING,  /* const char *: the value (never empty) */
    CLI_INT,     /* int: a whole decimal number in [lo, hi] */
    CLI_FLOAT,   /* float: a finite number in [lo, hi], (lo, hi] with lo_open */
    CLI_DOUBLE,  /* double: the same, kept in double (targets, seconds) */
    CLI_BOOL,    /* int 1 / 0: true or false (also True, False, 1, 0: AMCT's spellings) */
    CLI_SWITCH,  /* int set to 1; takes no value */
    CLI_ENUM,    /* int: the value of the choice named (any case) */
    CLI_LIST,    /* cli_list: every occurrence appended, with the flag's tag */
    CLI_THREADS, /* int: a positive count; above calq_thread_limit() the limit, with a note */
    CLI_CUSTOM,  /* parse() checks and stores the value */
    CLI_HEADING  /* not a flag: a heading in --help (the help text) */
} cli_type;

typedef struct cli_choice {
    const char *name;
    int value;
} cli_choice;

#define CLI_LIST_MAX 64
typedef struct cli_list {
    const char *value[CLI_LIST_MAX];
    int tag[CLI_LIST_MAX];
    int n;
} cli_list;

typedef struct cli_flag {
    const char *name;  /* "--input-shape" */
    const char *alias; /* another spelling ("--input_shape", AMCT's) or NULL */
    cli_type type;
    size_t offset;             /* of the destination in the command's argument struct */
    const char *metavar;       /* the value in --help ("N", "DIR/PREFIX"); NULL for switches */
    const char *help;          /* '\n' separates lines */
    double lo, hi;             /* CLI_INT, CLI_FLOAT, CLI_DOUBLE */
    int lo_open;               /* CLI_FLOAT, CLI_DOUBLE: lo itself is not allowed */
    const cli_choice *choices; /* CLI_ENUM: ended by {NULL, 0} */
    int tag;                   /* CLI_LIST: stored beside each value */
    /* CLI_CUSTOM: stores the value into dest and returns NULL, or returns what the value should
     * have been ("WIDTHxHEIGHT, e.g. 320x240") */
    const char *(*parse)(const char *value, void *dest);
    int required; /* the command fails without it */
} cli_flag;

#define CLI_NO_POSITIONAL ((size_t)-1)
#define CLI_MAX_FLAGS     128 /* rows of one command's table, headings included */

typedef struct cli_command {
    const char *name;     /* "calibration" */
    const char *synopsis; /* what follows "usage: calq NAME "; '\n' separates lines */
    const char *about;    /* NULL or a paragraph between the synopsis and the flags */
    const cli_flag *flags;
    size_t n_flags;
    size_t positional; /* offset of the const char * a bare argument (the model) fills, or CLI_NO_POSITIONAL */
} cli_command;

#define CLI_FLAGS(table) (table), sizeof(table) / sizeof((table)[0])

/* Parses argv[1..argc) into args (whose fields hold their defaults). Returns 0 when parsed, -1
 * when --help was printed (the command then exits 0), CLI_USAGE after printing why not. */
int cli_parse(const cli_command *cmd, int argc, char **argv, void *args);

/* The command's --help, generated from its table. */
void cli_help(const cli_command *cmd, FILE *f);

#endif
