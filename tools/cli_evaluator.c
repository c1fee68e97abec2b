/* --evaluator "CMD {model}": the user's command measures a candidate model (AMCT's evaluator
 * class, amct-reference.md §1.2, as a shell command). {model} becomes the candidate's model file
 * and {weights} its caffemodel (Caffe), both shell-quoted; without {model} the path is appended.
 * The metric is the last number the command prints on stdout; a non-zero exit status, or no
 * number, fails the search with the command's last output. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "cli.h"

/* Appends s single-quoted for sh. */
static void put_quoted(char **buf, size_t *len, size_t *cap, const char *s)
{
    for (const char *p = "'"; *p; p++) {
        if (*len + 8 >= *cap) return;
        (*buf)[(*len)++] = *p;
    }
    for (; *s; s++) {
        const char *piece = *s == '\'' ? "'\\''" : NULL;
        size_t k = piece ? strlen(piece) : 1;
        if (*len + k + 8 >= *cap) {
            size_t nc = *cap * 2 + k;
            char *nb = realloc(*buf, nc);
            if (!nb) return;
            *buf = nb;
            *cap = nc;
        }
        if (piece) {
            memcpy(*buf + *len, piece, k);
            *len += k;
        } else {
            (*buf)[(*len)++] = *s;
        }
    }
    (*buf)[(*len)++] = '\'';
    (*buf)[*len] = 0;
}

static char *command_for(const char *tmpl, const char *model, const char *weights)
{
    size_t cap = strlen(tmpl) + 2 * (strlen(model) + (weights ? strlen(weights) : 0)) + 64, len = 0;
    char *buf = malloc(cap);
    if (!buf) return NULL;
    buf[0] = 0;
    bool had_model = false;
    for (const char *p = tmpl; *p;) {
        if (!strncmp(p, "{model}", 7)) {
            put_quoted(&buf, &len, &cap, model);
            had_model = true;
            p += 7;
        } else if (!strncmp(p, "{weights}", 9)) {
            put_quoted(&buf, &len, &cap, weights ? weights : "");
            p += 9;
        } else {
            if (len + 8 >= cap) {
                char *nb = realloc(buf, cap *= 2);
                if (!nb) {
                    free(buf);
                    return NULL;
                }
                buf = nb;
            }
            buf[len++] = *p++;
            buf[len] = 0;
        }
    }
    if (!had_model) {
        buf[len++] = ' ';
        buf[len] = 0;
        put_quoted(&buf, &len, &cap, model);
    }
    return buf;
}

calq_status cli_run_evaluator(void *user, const char *model, const char *weights, double *metric, calq_error *err)
{
    const char *tmpl = user;
    char *cmd = command_for(tmpl, model, weights);
    if (!cmd) return err->status = CALQ_ERR_OUT_OF_MEMORY;
    fflush(stdout);
    FILE *p = popen(cmd, "r");
    if (!p) {
        snprintf(err->message, sizeof err->message, "--evaluator: cannot run '%s'", cmd);
        free(cmd);
        return err->status = CALQ_ERR_IO;
    }
    char tail[8192] = {0}, line[4096];
    size_t nt = 0;
    while (fgets(line, sizeof line, p)) { /* keep the last 8 KB of the output */
        size_t k = strlen(line);
        if (k >= sizeof tail) continue;
        if (nt + k >= sizeof tail) {
            size_t drop = nt + k - (sizeof tail - 1);
            memmove(tail, tail + drop, nt - drop);
            nt -= drop;
        }
        memcpy(tail + nt, line, k);
        nt += k;
        tail[nt] = 0;
    }
    int status = pclose(p);
    bool found = false;
    for (char *t = tail; *t;) { /* the last token that is a number */
        char *end;
        double v = strtod(t, &end);
        if (end != t && (*end == 0 || strchr(" \t\r\n,;:%)]", *end))) {
            *metric = v;
            found = true;
            t = end;
        } else {
            t++;
        }
    }
    calq_status st = CALQ_OK;
    const char *shown = nt > 600 ? tail + nt - 600 : tail;
    if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        snprintf(err->message, sizeof err->message, "--evaluator: '%s' failed (exit status %d); its last output:\n%s",
                 cmd, WIFEXITED(status) ? WEXITSTATUS(status) : -1, shown);
        st = err->status = CALQ_ERR_GENERIC;
    } else if (!found) {
        snprintf(err->message, sizeof err->message,
                 "--evaluator: '%s' printed no number (the metric is the last number on its stdout); its output:\n%s",
                 cmd, shown);
        st = err->status = CALQ_ERR_GENERIC;
    }
    free(cmd);
    return st;
}
