/* The AdaRound side file (calib/adaround.h): writing, bounded parsing, attaching to a record,
 * and the save-time check against the model's weights. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "calib/adaround.h"

static const char magic[8] = {'C', 'A', 'L', 'Q', 'A', 'D', 'A', 0};

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001B3ull;
    }
    return h;
}
#define FNV_INIT 0xCBF29CE484222325ull

uint64_t calq__ada_weight_sum(const float *w, int64_t n)
{
    return fnv(FNV_INIT, w, sizeof(float) * (size_t)(n > 0 ? n : 0));
}

char *calq__ada_path(const char *record_path)
{
    size_t n = strlen(record_path);
    char *p = malloc(n + sizeof CALQ_ADA_SUFFIX);
    if (p) {
        memcpy(p, record_path, n);
        memcpy(p + n, CALQ_ADA_SUFFIX, sizeof CALQ_ADA_SUFFIX);
    }
    return p;
}

/* little-endian put / get (calq's hosts are little-endian; the bytes are spelled out anyway) */
static void put_u(uint8_t *b, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) b[i] = (uint8_t)(v >> (8 * i));
}
static uint64_t get_u(const uint8_t *b, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v |= (uint64_t)b[i] << (8 * i);
    return v;
}
static void put_f64(uint8_t *b, double d)
{
    uint64_t v;
    memcpy(&v, &d, 8);
    put_u(b, v, 8);
}
static double get_f64(const uint8_t *b)
{
    uint64_t v = get_u(b, 8);
    double d;
    memcpy(&d, &v, 8);
    return d;
}

#define ENTRY_FIXED (4 + 8 + 8 + 4 + 8 + 8) /* besides the name and the weights */

calq_status calq__ada_file_stage(calq_staged_files *s, const char *path, const calq__ada_entry *e, int n,
                                 calq_error *err)
{
    size_t size = 16 + 8;
    for (int i = 0; i < n; i++) size += ENTRY_FIXED + strlen(e[i].name) + (size_t)e[i].numel;
    uint8_t *buf = malloc(size);
    if (!buf) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "%s: out of memory (%zu bytes)", path, size);
    uint8_t *p = buf;
    memcpy(p, magic, 8);
    put_u(p + 8, 1, 4);
    put_u(p + 12, (uint64_t)n, 4);
    p += 16;
    for (int i = 0; i < n; i++) {
        size_t ln = strlen(e[i].name);
        put_u(p, ln, 4);
        memcpy(p + 4, e[i].name, ln);
        p += 4 + ln;
        put_u(p, (uint64_t)e[i].numel, 8);
        put_u(p + 8, e[i].wsum, 8);
        put_u(p + 16, (uint64_t)(uint32_t)e[i].num_iteration, 4);
        put_f64(p + 20, e[i].err_nearest);
        put_f64(p + 28, e[i].err_ada);
        p += 36;
        memcpy(p, e[i].q, (size_t)e[i].numel);
        p += e[i].numel;
    }
    put_u(p, fnv(FNV_INIT, buf, (size_t)(p - buf)), 8);
    calq_status st = calq__staged_write(s, path, buf, size, err);
    free(buf);
    return st;
}

static calq_status bad(calq_error *err, const char *label, const char *fmt, const char *detail, long long at)
{
    char what[512];
    snprintf(what, sizeof what, fmt, detail, at);
    return calq__fail(err, CALQ_ERR_RECORD_FILE, NULL,
                      "%s: not a valid calq AdaRound side file: %s; it is written by `calq calibration` with "
                      "ada_quantize layers beside the record: rerun the calibration, or remove the file to save "
                      "with nearest rounding",
                      label, what);
}

calq_status calq__ada_file_parse(const uint8_t *data, size_t len, const char *label, calq__ada_entry **out, int *n,
                                 calq_error *err)
{
    *out = NULL;
    *n = 0;
    if (len < 24 || memcmp(data, magic, 8) != 0)
        return bad(err, label, "%s (%lld bytes)", len < 24 ? "too short" : "no CALQADA header", (long long)len);
    if (get_u(data + len - 8, 8) != fnv(FNV_INIT, data, len - 8))
        return bad(err, label, "%s (%lld bytes): truncated or damaged", "its checksum does not match", (long long)len);
    uint64_t ver = get_u(data + 8, 4), cnt = get_u(data + 12, 4);
    if (ver != 1) return bad(err, label, "%s %lld (calq reads version 1)", "version", (long long)ver);
    if (cnt > (len - 24) / ENTRY_FIXED)
        return bad(err, label, "%s %lld does not fit the file", "layer count", (long long)cnt);
    calq__ada_entry *e = calloc(cnt + 1, sizeof *e);
    if (!e) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "%s: out of memory", label);
    size_t at = 16, end = len - 8;
    for (uint64_t i = 0; i < cnt; i++) {
        if (end - at < 4) goto trunc;
        uint64_t ln = get_u(data + at, 4);
        if (ln == 0 || ln > 4096 || end - at - 4 < ln + 36) goto trunc;
        char *name = malloc(ln + 1);
        if (!name) {
            free(e);
            return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "%s: out of memory", label);
        }
        memcpy(name, data + at + 4, ln);
        name[ln] = 0;
        e[i].name = name;
        at += 4 + ln;
        uint64_t numel = get_u(data + at, 8);
        e[i].wsum = get_u(data + at + 8, 8);
        e[i].num_iteration = (int)get_u(data + at + 16, 4);
        e[i].err_nearest = get_f64(data + at + 20);
        e[i].err_ada = get_f64(data + at + 28);
        at += 36;
        if (numel == 0 || numel > end - at) goto trunc;
        e[i].numel = (int64_t)numel;
        e[i].q = (const int8_t *)(data + at);
        at += numel;
        *n = (int)i + 1;
    }
    if (at != end) {
        for (int i = 0; i < *n; i++) free((char *)e[i].name);
        free(e);
        *n = 0;
        return bad(err, label, "%s after the last layer (%lld bytes)", "extra bytes", (long long)(end - at));
    }
    *out = e;
    return CALQ_OK;
trunc:
    for (int i = 0; i < *n; i++) free((char *)e[i].name);
    free(e);
    *n = 0;
    return bad(err, label, "%s at byte %lld", "a layer entry runs past the end", (long long)at);
}

calq_status calq__ada_file_attach(calq_record *r, const char *src, const char *label, calq_error *err)
{
    char *text = NULL;
    size_t size = 0;
    CALQ_TRY(calq__read_file_max(src, CALQ_ADA_MAX_BYTES, "an AdaRound side file", &text, &size, err));
    calq__ada_entry *e = NULL;
    int n = 0;
    calq_status st = calq__ada_file_parse((const uint8_t *)text, size, label, &e, &n, err);
    for (int i = 0; st == CALQ_OK && i < n; i++) {
        calq_record_layer *rl = (calq_record_layer *)calq__record_find(r, e[i].name);
        if (!rl)
            st = calq__fail(err, CALQ_ERR_RECORD_FILE, e[i].name,
                            "%s: layer \"%s\" has learned weights but the record has no entry for it: the side file "
                            "belongs to another calibration; rerun the calibration or remove the file",
                            label, e[i].name);
        else if (rl->ada_w)
            st = calq__fail(err, CALQ_ERR_RECORD_FILE, e[i].name, "%s: layer \"%s\" is given twice", label, e[i].name);
        else if (!(rl->ada_w = malloc((size_t)e[i].numel)))
            st = calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "%s: out of memory", label);
        if (st != CALQ_OK) break;
        memcpy(rl->ada_w, e[i].q, (size_t)e[i].numel);
        rl->n_ada_w = e[i].numel;
        rl->ada_wsum = e[i].wsum;
        snprintf(rl->ada_file, sizeof rl->ada_file, "%s", label);
    }
    for (int i = 0; i < n; i++) free((char *)e[i].name);
    free(e);
    free(text);
    return st;
}

calq_status calq__ada_weights(const calq_record_layer *rl, const calq_tensor *w, const int8_t **q, calq_error *err)
{
    *q = NULL;
    if (!rl->ada_w) return CALQ_OK;
    int64_t numel = calq_tensor_numel(w);
    if (w->dtype != CALQ_DTYPE_FLOAT32 || numel != rl->n_ada_w)
        return calq__fail(err, CALQ_ERR_RECORD_FILE, rl->name,
                          "save: layer \"%s\": %s has %lld learned weights but the model's weight has %lld (%s): the "
                          "side file is of another model; rerun the calibration on this model",
                          rl->name, rl->ada_file, (long long)rl->n_ada_w, (long long)numel, calq_dtype_name(w->dtype));
    uint64_t sum = calq__ada_weight_sum(w->data, numel);
    if (sum != rl->ada_wsum)
        return calq__fail(err, CALQ_ERR_RECORD_FILE, rl->name,
                          "save: layer \"%s\": the learned weights in %s were computed on other float weights "
                          "(checksum %016llx, the model's %016llx): the side file is of another model or of other "
                          "folding settings; rerun the calibration on this model",
                          rl->name, rl->ada_file, (unsigned long long)rl->ada_wsum, (unsigned long long)sum);
    *q = rl->ada_w;
    return CALQ_OK;
}
