/* libFuzzer target for the protobuf text-format reader and writer: any input either fails with
 * a positioned message or parses into a tree that writes out and re-parses to the same tree
 * (and the same text when written again). Typed reads run on every scalar for coverage. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "textproto/textproto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Parsed trees are at most CALQ_TP_MAX_DEPTH deep, so this recursion is bounded. */
static int tree_equal(const calq_tp_node *a, const calq_tp_node *b)
{
    if (strcmp(a->name, b->name) != 0 || a->kind != b->kind) return 0;
    if (a->kind == CALQ_TP_SCALAR) {
        return a->type == b->type && a->text_len == b->text_len && memcmp(a->text, b->text, a->text_len) == 0;
    }
    if (a->n_children != b->n_children) return 0;
    for (int i = 0; i < a->n_children; i++) {
        if (!tree_equal(a->children[i], b->children[i])) return 0;
    }
    return 1;
}

static void read_all_scalars(const calq_tp_node *msg)
{
    for (int i = 0; i < msg->n_children; i++) {
        const calq_tp_node *c = msg->children[i];
        if (c->kind == CALQ_TP_MESSAGE) {
            read_all_scalars(c);
            continue;
        }
        calq_error err = {0};
        int64_t i64;
        uint64_t u64;
        double d;
        float f;
        bool b;
        const char *s;
        calq_status st[6] = {calq_tp_int(c, "fuzz", &i64, &err),  calq_tp_uint(c, "fuzz", &u64, &err),
                             calq_tp_double(c, "fuzz", &d, &err), calq_tp_float(c, "fuzz", &f, &err),
                             calq_tp_bool(c, "fuzz", &b, &err),   calq_tp_string(c, "fuzz", &s, &err)};
        for (int k = 0; k < 6; k++) {
            if (st[k] != CALQ_OK && st[k] != CALQ_ERR_BAD_FORMAT) abort();
        }
        if (calq_tp_find(msg, c->name) == NULL) abort();
    }
}

static char *write_mem(const calq_tp_node *root, size_t *len)
{
    char *buf = NULL;
    FILE *fp = open_memstream(&buf, len);
    if (!fp) abort();
    calq_error err = {0};
    calq_status st = calq_tp_write(root, fp, &err);
    fclose(fp);
    /* Every parsed tree must be writable. */
    if (st != CALQ_OK) {
        fprintf(stderr, "write failed: %s\n", err.message);
        abort();
    }
    return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* An exact-size copy: the parser must not rely on a terminator. */
    char *text = malloc(size ? size : 1);
    if (size) memcpy(text, data, size);
    calq_tp_node *root = NULL;
    calq_error err = {0};
    calq_status st = calq_tp_parse(text, size, "fuzz.txt", &root, &err);
    free(text);
    if (st != CALQ_OK) {
        if (root || st != CALQ_ERR_BAD_FORMAT || err.status != st || strncmp(err.message, "fuzz.txt:", 9) != 0) {
            abort();
        }
        return 0;
    }
    read_all_scalars(root);
    size_t len1 = 0, len2 = 0;
    char *out1 = write_mem(root, &len1);
    calq_tp_node *again = NULL;
    if (calq_tp_parse(out1, len1, "written.txt", &again, &err) != CALQ_OK) {
        fprintf(stderr, "written text does not re-parse: %s\n", err.message);
        abort();
    }
    if (!tree_equal(root, again)) abort();
    char *out2 = write_mem(again, &len2);
    if (len1 != len2 || memcmp(out1, out2, len1) != 0) abort();
    free(out1);
    free(out2);
    calq_tp_free(again);
    calq_tp_free(root);
    return 0;
}
