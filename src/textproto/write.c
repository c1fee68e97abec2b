/* Writer: a tree back to protobuf text format. The tree is checked before the first byte goes
 * out (names, identifier and number tokens, depth), so whatever is written re-parses to the
 * same tree and a bad tree leaves the output untouched. */
#include <string.h>

#include "base/error.h"
#include "base/file.h"
#include "textproto/textproto_internal.h"

/* Length of a well-formed UTF-8 sequence at s for a code point that is printable enough to
 * keep as is (U+00A0 and up), or 0 when the bytes must be escaped one by one. */
static size_t printable_utf8_len(const unsigned char *s, size_t avail)
{
    size_t n;
    uint32_t cp, min;
    if (s[0] >= 0xC2 && s[0] <= 0xDF) {
        n = 2, cp = s[0] & 0x1Fu, min = 0xA0;
    } else if (s[0] >= 0xE0 && s[0] <= 0xEF) {
        n = 3, cp = s[0] & 0x0Fu, min = 0x800;
    } else if (s[0] >= 0xF0 && s[0] <= 0xF4) {
        n = 4, cp = s[0] & 0x07u, min = 0x10000;
    } else {
        return 0;
    }
    if (avail < n) return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3Fu);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return n;
}

static void write_string(FILE *fp, const char *text, size_t len)
{
    const unsigned char *s = (const unsigned char *)text;
    putc('"', fp);
    for (size_t i = 0; i < len;) {
        unsigned char c = s[i];
        size_t u;
        switch (c) {
        case '\n': fputs("\\n", fp); break;
        case '\r': fputs("\\r", fp); break;
        case '\t': fputs("\\t", fp); break;
        case '"': fputs("\\\"", fp); break;
        case '\\': fputs("\\\\", fp); break;
        default:
            if (c >= 0x20 && c < 0x7f) {
                putc(c, fp);
            } else if ((u = printable_utf8_len(s + i, len - i)) > 0) {
                fwrite(s + i, 1, u, fp);
                i += u;
                continue;
            } else {
                /* Always three digits, so a following digit cannot join the escape. */
                fprintf(fp, "\\%03o", c);
            }
        }
        i++;
    }
    putc('"', fp);
}

static calq_status bad_node(calq_error *err, const calq_tp_node *n, const char *why)
{
    char q[100];
    tp_quote_for_message(n->name, strlen(n->name), q, sizeof q);
    return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL, "cannot write text format: field '%s': %s", q, why);
}

static calq_status check_scalar(const calq_tp_node *n, calq_error *err)
{
    if (!n->text) return bad_node(err, n, "a scalar without a value");
    switch (n->type) {
    case CALQ_TP_IDENT:
        if (!tp_is_ident(n->text, n->text_len)) return bad_node(err, n, "the enum value is not an identifier");
        return CALQ_OK;
    case CALQ_TP_NUMBER:
        if (!tp_is_number_text(n->text, n->text_len)) return bad_node(err, n, "the value is not a number token");
        return CALQ_OK;
    case CALQ_TP_STRING: return CALQ_OK;
    }
    return bad_node(err, n, "unknown scalar type");
}

/* One walk for both passes: fp == NULL only checks. Iterative with a fixed stack, since the
 * depth limit is the parser's: a deeper tree could not be read back. */
static calq_status walk(const calq_tp_node *root, FILE *fp, calq_error *err)
{
    struct frame {
        const calq_tp_node *msg;
        int next;
    } stack[CALQ_TP_MAX_DEPTH + 1];
    int depth = 0;
    stack[0].msg = root;
    stack[0].next = 0;
    while (depth >= 0) {
        struct frame *f = &stack[depth];
        if (f->next >= f->msg->n_children) {
            if (fp && depth > 0) fprintf(fp, "%*s}\n", 2 * (depth - 1), "");
            depth--;
            continue;
        }
        const calq_tp_node *c = f->msg->children[f->next++];
        if (!c || !c->name || !tp_is_field_name(c->name, strlen(c->name))) {
            if (!c || !c->name)
                return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL,
                                  "cannot write text format: a field without a name");
            return bad_node(err, c, "the name is not an identifier or [extension]");
        }
        if (c->kind == CALQ_TP_MESSAGE) {
            if (depth + 1 > CALQ_TP_MAX_DEPTH) return bad_node(err, c, "messages nested deeper than CALQ_TP_MAX_DEPTH");
            if (c->n_children > 0 && !c->children) return bad_node(err, c, "a message without its children");
            if (fp) fprintf(fp, "%*s%s {\n", 2 * depth, "", c->name);
            depth++;
            stack[depth].msg = c;
            stack[depth].next = 0;
            continue;
        }
        if (c->kind != CALQ_TP_SCALAR) return bad_node(err, c, "unknown node kind");
        CALQ_TRY(check_scalar(c, err));
        if (!fp) continue;
        fprintf(fp, "%*s%s: ", 2 * depth, "", c->name);
        if (c->type == CALQ_TP_STRING) {
            write_string(fp, c->text, c->text_len);
        } else {
            fwrite(c->text, 1, c->text_len, fp);
        }
        putc('\n', fp);
    }
    return CALQ_OK;
}

calq_status calq_tp_write(const calq_tp_node *root, FILE *fp, calq_error *err)
{
    if (!root || root->kind != CALQ_TP_MESSAGE) {
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL, "cannot write text format: the root is not a message");
    }
    CALQ_TRY(walk(root, NULL, err));
    CALQ_TRY(walk(root, fp, err));
    if (fflush(fp) != 0 || ferror(fp)) return calq__fail(err, CALQ_ERR_IO, NULL, "writing text format failed");
    return CALQ_OK;
}

calq_status calq_tp_write_file(const calq_tp_node *root, const char *path, calq_error *err)
{
    calq_atomic_file f;
    CALQ_TRY(calq__atomic_open(&f, path, err));
    calq_status st = calq_tp_write(root, f.fp, err);
    if (st != CALQ_OK) {
        calq__atomic_abort(&f);
        if (st == CALQ_ERR_IO) return calq__fail(err, CALQ_ERR_IO, NULL, "cannot write %s", path);
        return calq__prefix(err, "%s", path);
    }
    return calq__atomic_commit(&f, err);
}
