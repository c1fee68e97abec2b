#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cli_fail(const calq_error *err)
{
    fprintf(stderr, "calq: error: %s\n", err->message[0] ? err->message : calq_status_name(err->status));
    if (err->status == CALQ_ERR_OUT_OF_MEMORY && strstr(err->message, "max_arena_bytes"))
        fprintf(stderr, "calq: the limit is --max-arena-mb (default: CALQ_MAX_ARENA_MB, else a quarter of this "
                        "machine's memory); raise it if the model really needs that much\n");
    return 1;
}

int cli_max_arena(int flag_mb, size_t *bytes)
{
    const uint64_t mib = UINT64_C(1) << 20;
    if (flag_mb >= 0) {
        *bytes = (size_t)((uint64_t)flag_mb * mib);
        return 0;
    }
    const char *env = getenv("CALQ_MAX_ARENA_MB");
    if (env && env[0]) {
        char *end = NULL;
        errno = 0;
        unsigned long long v = strtoull(env, &end, 10);
        if (!isdigit((unsigned char)env[0]) || *end || errno || v > (UINT64_MAX >> 20)) {
            char shown[CLI_CUT_BUF];
            fprintf(stderr, "calq: error: CALQ_MAX_ARENA_MB is '%s'; it must be a whole number of MiB (0: no limit)\n",
                    cli_cut(env, shown));
            return CLI_USAGE;
        }
        *bytes = (size_t)(v * mib);
        return 0;
    }
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    *bytes = pages > 0 && page > 0 ? (size_t)pages * (size_t)page / 4 : (size_t)1 << 32;
    return 0;
}

int cli_failf(const char *fmt, ...)
{
    char msg[CALQ_ERROR_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "calq: error: %s\n", msg);
    return 1;
}

const char *cli_cut(const char *s, char buf[CLI_CUT_BUF])
{
    size_t len = strlen(s);
    if (len < CLI_CUT_BUF) return s;
    size_t head = (CLI_CUT_BUF - 4) * 2 / 3, from = len - (CLI_CUT_BUF - 4 - head);
    while (head > 0 && ((unsigned char)s[head] & 0xC0) == 0x80) head--; /* between UTF-8 characters */
    while (from < len && ((unsigned char)s[from] & 0xC0) == 0x80) from++;
    snprintf(buf, CLI_CUT_BUF, "%.*s...%s", (int)head, s, s + from);
    return buf;
}

/* One "NAME:d0,d1,..." item: the name's length and up to CALQ_MAX_DIMS positive dims. Returns
 * the number of dims, or -1. */
static int parse_shape_item(const char *item, size_t len, size_t *name_len, int64_t *dims)
{
    const char *colon = NULL;
    for (size_t i = len; i > 0; i--)
        if (item[i - 1] == ':') {
            colon = item + i - 1;
            break;
        }
    if (!colon || colon == item) return -1;
    *name_len = (size_t)(colon - item);
    int nd = 0;
    const char *p = colon + 1, *end = item + len;
    while (p < end) {
        if (!isdigit((unsigned char)*p) || nd == CALQ_MAX_DIMS) return -1;
        int64_t v = 0;
        for (; p < end && isdigit((unsigned char)*p); p++) {
            v = v * 10 + (*p - '0');
            if (v > INT32_MAX) return -1; /* no tensor dim is that large */
        }
        if (v <= 0) return -1;
        dims[nd++] = v;
        if (p < end && *p++ != ',') return -1;
        if (p == end && p[-1] == ',') return -1;
    }
    return nd > 0 ? nd : -1;
}

static const char SHAPE_SYNTAX[] = "NAME:d0,d1,... with positive dims (several: a:1,3,224,224;b:1,10)";

/* More NAME:dims items than any model has inputs: refused, which also bounds the check for
 * names given twice. */
#define SHAPE_ITEMS_MAX 1024

const char *cli_parse_input_shapes(const char *v, void *dest)
{
    static const char TWICE[] = "NAME:d0,d1,... with each input named once";
    const char *names[SHAPE_ITEMS_MAX];
    size_t lens[SHAPE_ITEMS_MAX];
    int n = 0;
    for (const char *item = v;;) {
        const char *semi = strchr(item, ';');
        size_t len = semi ? (size_t)(semi - item) : strlen(item), name_len;
        int64_t dims[CALQ_MAX_DIMS];
        if (parse_shape_item(item, len, &name_len, dims) < 0) return SHAPE_SYNTAX;
        if (n == SHAPE_ITEMS_MAX) return "at most 1024 NAME:d0,d1,... items";
        for (int k = 0; k < n; k++)
            if (lens[k] == name_len && !memcmp(names[k], item, name_len)) return TWICE;
        names[n] = item;
        lens[n++] = name_len;
        if (!semi) break;
        item = semi + 1;
    }
    *(const char **)dest = v;
    return NULL;
}

calq_status cli_apply_input_shapes(calq_model *m, const char *spec, calq_error *err)
{
    for (const char *item = spec;;) {
        const char *semi = strchr(item, ';');
        size_t len = semi ? (size_t)(semi - item) : strlen(item), name_len;
        int64_t dims[CALQ_MAX_DIMS];
        int nd = parse_shape_item(item, len, &name_len, dims);
        if (nd < 0) {
            snprintf(err->message, sizeof err->message, "--input_shape must be %s", SHAPE_SYNTAX);
            return err->status = CALQ_ERR_BAD_PARAMETERS;
        }
        char name[CALQ_ERROR_NAME_MAX];
        if (name_len >= sizeof name) {
            char shown[CLI_CUT_BUF];
            snprintf(err->message, sizeof err->message, "--input_shape: the model has no input '%s'",
                     cli_cut(item, shown));
            return err->status = CALQ_ERR_BAD_PARAMETERS;
        }
        memcpy(name, item, name_len);
        name[name_len] = 0;
        calq_status st = calq_model_set_input_shape(m, name, dims, nd, err);
        if (st != CALQ_OK) return st;
        if (!semi) return CALQ_OK;
        item = semi + 1;
    }
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
            char shown[CLI_CUT_BUF];
            snprintf(err->message, sizeof err->message,
                     "%s: a Caffe model needs both files, the net and its weights: --model NET.prototxt --weights "
                     "NET.caffemodel%s",
                     cli_cut(model, shown), weights ? " (the two look swapped)" : "");
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

/* One finite number, or three separated by commas; a single one applies to every channel. */
static const char *parse_triple(const char *v, float out[3], int nonzero)
{
    static const char *const want[2] = {"one number or three separated by commas",
                                        "one non-zero number or three separated by commas"};
    float x[3];
    int n = 0;
    const char *p = v;
    for (;;) {
        char *end;
        if (n == 3 || isspace((unsigned char)*p)) return want[nonzero];
        double d = strtod(p, &end);
        if (end == p || !isfinite(d) || !isfinite((float)d) || (nonzero && d == 0.0)) return want[nonzero];
        x[n++] = (float)d;
        if (!*end) break;
        if (*end != ',') return want[nonzero];
        p = end + 1;
    }
    if (n == 2) return want[nonzero];
    for (int i = 0; i < 3; i++) out[i] = x[n == 1 ? 0 : i];
    return NULL;
}

const char *cli_parse_mean(const char *v, void *dest)
{
    return parse_triple(v, dest, 0);
}

const char *cli_parse_std(const char *v, void *dest)
{
    return parse_triple(v, dest, 1);
}

const char *cli_parse_resize(const char *v, void *dest)
{
    static const char want[] = "WIDTHxHEIGHT, two whole numbers from 1 to 65536, e.g. 320x240";
    long wh[2];
    const char *p = v;
    for (int k = 0; k < 2; k++) {
        if (!isdigit((unsigned char)*p)) return want;
        char *end;
        errno = 0;
        wh[k] = strtol(p, &end, 10);
        if (errno || wh[k] < 1 || wh[k] > 65536 || *end != (k ? 0 : 'x')) return want;
        p = end + 1;
    }
    calq_image_opts *o = dest;
    o->width = (int)wh[0];
    o->height = (int)wh[1];
    return NULL;
}

int cli_split_names(char *s, const char **names, int max)
{
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(s, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        while (*t == ' ') t++;
        size_t k = strlen(t);
        while (k > 0 && t[k - 1] == ' ') t[--k] = 0;
        if (!*t) continue;
        if (n == max) return -1;
        names[n++] = t;
    }
    return n;
}

/* mkdir -p; the first folder it had to create goes to created[n] ("" when none). */
static int mkdir_p(const char *path, char *created, size_t n)
{
    char dir[4096];
    if (created) created[0] = 0;
    if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = dir + 1;; p++) {
        if (*p && *p != '/') continue;
        char c = *p;
        *p = 0;
        if (mkdir(dir, 0777) == 0) {
            if (created && !created[0]) snprintf(created, n, "%s", dir);
        } else if (errno != EEXIST) {
            return -1;
        }
        if (!c) return 0;
        *p = c;
    }
}

int cli_mkdir_p(const char *path)
{
    return mkdir_p(path, NULL, 0);
}

int cli_make_parent(const char *flag, const char *path, char created[4096])
{
    char dir[4096], shown[CLI_CUT_BUF];
    created[0] = 0;
    if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir) {
        errno = ENAMETOOLONG;
    } else {
        char *slash = strrchr(dir, '/');
        if (!slash || slash == dir) return 0;
        *slash = 0;
        if (mkdir_p(dir, created, 4096) == 0) return 0;
    }
    return cli_failf("cannot create the folder of %s %s: %s", flag, cli_cut(path, shown), strerror(errno));
}

void cli_unmake_parent(const char *path, const char *created)
{
    if (!created[0]) return;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    size_t stop = strlen(created);
    for (char *slash = strrchr(dir, '/'); slash && (size_t)(slash - dir) >= stop; slash = strrchr(dir, '/')) {
        *slash = 0;
        if (rmdir(dir) != 0) return; /* not empty: something else lives there now */
    }
}
