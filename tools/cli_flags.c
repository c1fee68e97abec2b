/* The flag parser and --help of every subcommand (tools/cli_flags.h). */
#include "cli_flags.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"

#define HELP_COLUMN 30 /* where the help text of a flag starts */

static void *field(void *args, size_t offset)
{
    return (char *)args + offset;
}

/* "a whole number from 1 to 1000000000", "a number in (0.5, 1]": what an INT/FLOAT flag takes. */
static void describe_range(const cli_flag *f, char *buf, size_t n)
{
    if (f->type == CLI_INT && f->hi >= INT_MAX)
        snprintf(buf, n, "a whole number of at least %.0f", f->lo);
    else if (f->type == CLI_INT)
        snprintf(buf, n, "a whole number from %.0f to %.0f", f->lo, f->hi);
    else if (f->lo <= -HUGE_VAL && f->hi >= HUGE_VAL)
        snprintf(buf, n, "a number");
    else if (f->hi >= HUGE_VAL)
        snprintf(buf, n, "a number %s %.9g", f->lo_open ? "above" : "of at least", f->lo);
    else
        snprintf(buf, n, "a number in %c%.9g, %.9g]", f->lo_open ? '(' : '[', f->lo, f->hi);
}

static void describe_choices(const cli_flag *f, char *buf, size_t n)
{
    size_t at = 0;
    buf[0] = 0;
    for (const cli_choice *c = f->choices; c->name && at < n; c++) {
        const char *sep = c == f->choices ? "" : c[1].name ? ", " : " or ";
        at += (size_t)snprintf(buf + at, n - at, "%s%s", sep, c->name);
    }
}

/* The usage error for a value: "calq: error: --batch_num must be <what>, not '1.5'". */
static int bad_value(const char *flag, const char *what, const char *value)
{
    char shown[CLI_CUT_BUF];
    cli_failf("%s must be %s, not '%s'", flag, what, cli_cut(value, shown));
    return CLI_USAGE;
}

/* Whole-string decimal integer: no sign games, no spaces, no trailing text. */
static int parse_int(const cli_flag *f, const char *v, int *out)
{
    char what[96];
    describe_range(f, what, sizeof what);
    errno = 0;
    char *end = NULL;
    long long x =
        isdigit((unsigned char)v[0]) || (v[0] == '-' && isdigit((unsigned char)v[1])) ? strtoll(v, &end, 10) : 0;
    if (!end || *end || errno == ERANGE || x < (long long)f->lo || x > (long long)f->hi)
        return bad_value(f->name, what, v);
    *out = (int)x;
    return 0;
}

/* A whole-string finite number in the flag's range; as_float: it must also be finite as a float. */
static int parse_real(const cli_flag *f, const char *v, bool as_float, double *out)
{
    char what[96];
    describe_range(f, what, sizeof what);
    char *end = NULL;
    double x = isspace((unsigned char)v[0]) ? NAN : strtod(v, &end);
    bool ok = end && !*end && isfinite(x) && (!as_float || isfinite((float)x)) &&
              (f->lo_open ? x > f->lo : x >= f->lo) && x <= f->hi;
    if (!ok) return bad_value(f->name, what, v);
    *out = x;
    return 0;
}

static int parse_value(const cli_flag *f, const char *v, void *args)
{
    void *dest = field(args, f->offset);
    char what[256];
    switch (f->type) {
    case CLI_STRING: *(const char **)dest = v; return 0;
    case CLI_INT: return parse_int(f, v, dest);
    case CLI_FLOAT: {
        double x;
        int rc = parse_real(f, v, true, &x);
        if (!rc) *(float *)dest = (float)x;
        return rc;
    }
    case CLI_DOUBLE: return parse_real(f, v, false, dest);
    case CLI_BOOL:
        if (!strcasecmp(v, "true") || !strcmp(v, "1")) {
            *(int *)dest = 1;
            return 0;
        }
        if (!strcasecmp(v, "false") || !strcmp(v, "0")) {
            *(int *)dest = 0;
            return 0;
        }
        return bad_value(f->name, "true or false", v);
    case CLI_ENUM:
        for (const cli_choice *c = f->choices; c->name; c++)
            if (!strcasecmp(v, c->name)) {
                *(int *)dest = c->value;
                return 0;
            }
        describe_choices(f, what, sizeof what);
        return bad_value(f->name, what, v);
    case CLI_LIST: {
        cli_list *l = dest;
        if (l->n == CLI_LIST_MAX) {
            cli_failf("%s is given more than %d times", f->name, CLI_LIST_MAX);
            return CLI_USAGE;
        }
        l->tag[l->n] = f->tag;
        l->value[l->n++] = v;
        return 0;
    }
    case CLI_THREADS: {
        cli_flag whole = *f;
        whole.type = CLI_INT;
        whole.lo = 1;
        whole.hi = INT_MAX;
        int n, rc = parse_int(&whole, v, &n);
        if (rc) return rc;
        int limit = calq_thread_limit();
        if (n > limit) {
            fprintf(stderr, "calq: note: %s %d is more than calq uses here (4 per online processor): using %d\n",
                    f->name, n, limit);
            n = limit;
        }
        *(int *)dest = n;
        return 0;
    }
    case CLI_CUSTOM: {
        const char *want = f->parse(v, dest);
        return want ? bad_value(f->name, want, v) : 0;
    }
    case CLI_SWITCH:
    case CLI_HEADING: break;
    }
    return 0;
}

static const cli_flag *find_flag(const cli_command *cmd, const char *arg, const char **inline_value)
{
    *inline_value = NULL;
    for (size_t i = 0; i < cmd->n_flags; i++) {
        const cli_flag *f = &cmd->flags[i];
        if (f->type == CLI_HEADING) continue;
        const char *names[2] = {f->name, f->alias};
        for (int k = 0; k < 2 && names[k]; k++) {
            size_t n = strlen(names[k]);
            if (strncmp(arg, names[k], n) != 0) continue;
            if (arg[n] == 0) return f;
            if (arg[n] == '=') {
                *inline_value = arg + n + 1;
                return f;
            }
        }
    }
    return NULL;
}

static int usage_error(const cli_command *cmd, const char *fmt, const char *what)
{
    char shown[CLI_CUT_BUF];
    fprintf(stderr, "calq: error: ");
    fprintf(stderr, fmt, cli_cut(what, shown));
    fprintf(stderr, " ('calq %s --help' lists the options)\n", cmd->name);
    return CLI_USAGE;
}

int cli_parse(const cli_command *cmd, int argc, char **argv, void *args)
{
    /* a flag that takes one value and is given twice is a mistake to point out, not to settle
     * silently by keeping the last (issue 14: two --input_shape for one input) */
    unsigned char seen[CLI_MAX_FLAGS] = {0};
    if (cmd->n_flags > CLI_MAX_FLAGS) return usage_error(cmd, "%s", "calq's flag table is too long (a bug)");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            cli_help(cmd, stdout);
            return -1;
        }
        const cli_flag *f = find_flag(cmd, a, &v);
        if (!f) {
            if (a[0] == '-' && a[1]) return usage_error(cmd, "unknown option '%s'", a);
            if (cmd->positional == CLI_NO_POSITIONAL || *(const char **)field(args, cmd->positional))
                return usage_error(cmd, "unexpected argument '%s'", a);
            *(const char **)field(args, cmd->positional) = a;
            continue;
        }
        if (f->type != CLI_LIST && f->type != CLI_SWITCH) {
            size_t k = (size_t)(f - cmd->flags);
            if (seen[k]) return usage_error(cmd, "%s is given twice; give it once", f->name);
            seen[k] = 1;
        }
        if (f->type == CLI_SWITCH) {
            if (v) return usage_error(cmd, "%s takes no value", f->name);
            *(int *)field(args, f->offset) = 1;
            continue;
        }
        if (!v) {
            if (i + 1 >= argc) return usage_error(cmd, "%s needs a value", f->name);
            v = argv[++i];
        }
        if (!v[0]) return usage_error(cmd, "%s needs a value (it is empty)", f->name);
        int rc = parse_value(f, v, args);
        if (rc) return rc;
    }
    for (size_t i = 0; i < cmd->n_flags; i++) {
        const cli_flag *f = &cmd->flags[i];
        if (!f->required || *(const char **)field(args, f->offset)) continue;
        return usage_error(
            cmd, f->offset == cmd->positional ? "%s is required (or give it as the first argument)" : "%s is required",
            f->name);
    }
    return 0;
}

/* Prints text with every line after the first indented by `indent` spaces. */
static void print_indented(FILE *f, const char *text, int indent)
{
    for (const char *p = text; *p; p++) {
        fputc(*p, f);
        if (*p == '\n' && p[1]) fprintf(f, "%*s", indent, "");
    }
    fputc('\n', f);
}

void cli_help(const cli_command *cmd, FILE *f)
{
    int indent = fprintf(f, "usage: calq %s ", cmd->name);
    print_indented(f, cmd->synopsis, indent);
    if (cmd->about) fprintf(f, "\n%s\n", cmd->about);
    fputc('\n', f);
    for (size_t i = 0; i < cmd->n_flags; i++) {
        const cli_flag *fl = &cmd->flags[i];
        if (fl->type == CLI_HEADING) {
            fprintf(f, "%s\n", fl->help);
            continue;
        }
        int col = fprintf(f, "  %s%s%s%s%s", fl->name, fl->alias ? ", " : "", fl->alias ? fl->alias : "",
                          fl->metavar ? " " : "", fl->metavar ? fl->metavar : "");
        if (col >= HELP_COLUMN) {
            fputc('\n', f);
            col = 0;
        }
        fprintf(f, "%*s", HELP_COLUMN - col, "");
        print_indented(f, fl->help, HELP_COLUMN);
    }
}
