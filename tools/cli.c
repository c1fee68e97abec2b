#include "cli.h"

#include <ctype.h>
#include <stdarg.h>
#include <errno.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_fail(const calq_error *err)
{
    fprintf(stderr, "calq: error: %s\n", err->message[0] ? err->message : calq_status_name(err->status));
    return 1;
}

int cli_failf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("calq: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

int cli_opt(int argc, char **argv, int *i, const char *name, const char **val)
{
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0) return 0;
    if (a[n] == '=') {
        *val = a + n + 1;
        return 1;
    }
    if (a[n] != 0) return 0;
    if (*i + 1 >= argc) {
        cli_failf("%s needs a value", name);
        return -1;
    }
    *val = argv[++*i];
    return 1;
}

calq_status cli_apply_input_shapes(calq_model *m, const char *spec, calq_error *err)
{
    char *copy = strdup(spec);
    if (!copy) return CALQ_ERR_OUT_OF_MEMORY;
    calq_status st = CALQ_OK;
    char *save = NULL;
    for (char *item = strtok_r(copy, ";", &save); item && st == CALQ_OK; item = strtok_r(NULL, ";", &save)) {
        char *colon = strrchr(item, ':');
        if (!colon) {
            snprintf(err->message, sizeof err->message,
                     "--input_shape '%s': expected NAME:d0,d1,... (e.g. \"data:1,3,224,224\")", item);
            st = err->status = CALQ_ERR_BAD_PARAMETERS;
            break;
        }
        *colon = 0;
        int64_t dims[CALQ_MAX_DIMS];
        int nd = 0;
        char *p = colon + 1;
        while (*p && st == CALQ_OK) {
            char *end;
            long long v = strtoll(p, &end, 10);
            if (end == p || nd == CALQ_MAX_DIMS || v <= 0) {
                snprintf(err->message, sizeof err->message,
                         "--input_shape for '%s': '%s' is not a list of positive dims (e.g. 1,3,224,224)", item,
                         colon + 1);
                st = err->status = CALQ_ERR_BAD_PARAMETERS;
                break;
            }
            dims[nd++] = v;
            p = end;
            if (*p == ',') p++;
        }
        if (st == CALQ_OK) st = calq_model_set_input_shape(m, item, dims, nd, err);
    }
    free(copy);
    return st;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

calq_status cli_load_model(const char *model, const char *weights, calq_model **out, calq_error *err)
{
    /* A Caffe model is a prototxt (the net) plus a caffemodel (--weights). */
    if (weights || ends_with(model, ".prototxt")) {
        if (!weights || ends_with(model, ".caffemodel")) {
            snprintf(err->message, sizeof err->message,
                     "%s: a Caffe model needs both files, the net and its weights: --model NET.prototxt --weights "
                     "NET.caffemodel%s",
                     model, weights ? " (the two look swapped)" : "");
            return err->status = CALQ_ERR_BAD_PARAMETERS;
        }
        return calq_model_load_caffe(model, weights, out, err);
    }
    return calq_model_load_onnx(model, out, err);
}

void cli_safe_name(const char *name, char *buf, size_t n)
{
    size_t i = 0;
    for (; name[i] && i + 1 < n; i++) {
        unsigned char c = (unsigned char)name[i];
        buf[i] = (char)(isalnum(c) || c == '-' || c == '_' || c == '.' ? c : '_');
    }
    buf[i] = 0;
    if (i == 0 || strcmp(buf, ".") == 0 || strcmp(buf, "..") == 0) snprintf(buf, n, "_%s", i ? buf : "");
}

static int parse_triple(const char *flag, const char *v, float out[3])
{
    int n = 0;
    const char *p = v;
    while (*p && n < 3) {
        char *end;
        float x = strtof(p, &end);
        if (end == p) break;
        out[n++] = x;
        p = *end == ',' ? end + 1 : end;
        if (*end != ',') break;
    }
    if (*p || (n != 1 && n != 3)) {
        cli_failf("%s '%s': expected one number or three separated by commas", flag, v);
        return -1;
    }
    if (n == 1) out[1] = out[2] = out[0];
    return 1;
}

int cli_image_opt(int argc, char **argv, int *i, calq_image_opts *o)
{
    const char *v;
    int r;
    if ((r = cli_opt(argc, argv, i, "--resize", &v))) {
        if (r < 0) return -1;
        if (sscanf(v, "%dx%d", &o->width, &o->height) != 2 || o->width <= 0 || o->height <= 0) {
            cli_failf("--resize '%s': expected WIDTHxHEIGHT, e.g. 320x240", v);
            return -1;
        }
        return 1;
    }
    if ((r = cli_opt(argc, argv, i, "--mean", &v))) return r < 0 ? -1 : parse_triple("--mean", v, o->mean);
    if ((r = cli_opt(argc, argv, i, "--std", &v))) return r < 0 ? -1 : parse_triple("--std", v, o->std);
    if ((r = cli_opt(argc, argv, i, "--scale", &v))) {
        if (r < 0) return -1;
        char *end;
        o->scale = strtof(v, &end);
        if (*end || end == v) {
            cli_failf("--scale '%s' is not a number", v);
            return -1;
        }
        return 1;
    }
    if (!strcmp(argv[*i], "--bgr")) {
        o->bgr = 1;
        return 1;
    }
    return 0;
}

int cli_mkdir_p(const char *path)
{
    char dir[4096];
    if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(dir, 0777) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    return mkdir(dir, 0777) != 0 && errno != EEXIST ? -1 : 0;
}
