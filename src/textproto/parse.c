/* Parser: tokens into a calq_tp_node tree. Recursive descent whose depth is bounded by
 * CALQ_TP_MAX_DEPTH, so hostile nesting is an error message, never a stack overflow. */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/file.h"
#include "textproto/textproto_internal.h"

typedef struct byte_buf {
    char *data;
    size_t len, cap;
} byte_buf;

typedef struct parser {
    tp_lexer lx;
    tp_token cur; /* one token of lookahead */
    byte_buf name, str;
    const char *filename;
    calq_error *err;
    calq_tp_each_fn each; /* calq_tp_parse_each: called per top-level field, which is then freed */
    void *each_user;
} parser;

static calq_status oom(parser *ps)
{
    return calq__fail(ps->err, CALQ_ERR_OUT_OF_MEMORY, NULL, "%s: out of memory while parsing",
                      tp_file_label(ps->filename));
}

static calq_status buf_put(parser *ps, byte_buf *b, const char *bytes, size_t n)
{
    if (b->cap - b->len < n + 1) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap - b->len < n + 1) cap *= 2;
        char *d = realloc(b->data, cap);
        if (!d) return oom(ps);
        b->data = d;
        b->cap = cap;
    }
    if (n) memcpy(b->data + b->len, bytes, n);
    b->len += n;
    b->data[b->len] = 0;
    return CALQ_OK;
}

static calq_status next(parser *ps)
{
    return tp_lex(&ps->lx, &ps->cur);
}

static bool at_punct(const parser *ps, char c)
{
    return ps->cur.kind == TP_TOK_PUNCT && ps->cur.start[0] == c;
}

static calq_status fail_expected(parser *ps, const char *expected)
{
    char found[160];
    tp_describe_token(&ps->cur, found, sizeof found);
    return calq__fail(ps->err, CALQ_ERR_BAD_FORMAT, NULL, "%s:%d:%d: expected %s, found %s",
                      tp_file_label(ps->filename), ps->cur.line, ps->cur.col, expected, found);
}

static char *dup_bytes(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (!d) return NULL;
    if (n) memcpy(d, s, n);
    d[n] = 0;
    return d;
}

/* identifier, or an extension name [pkg.Type] / [type.googleapis.com/pkg.Type], stored
 * without the whitespace the text may have between its parts. */
static calq_status parse_name(parser *ps, char close)
{
    ps->name.len = 0;
    CALQ_TRY(buf_put(ps, &ps->name, "", 0));
    if (ps->cur.kind == TP_TOK_IDENT) {
        CALQ_TRY(buf_put(ps, &ps->name, ps->cur.start, ps->cur.len));
        return next(ps);
    }
    if (!at_punct(ps, '[')) {
        if (close == '}') return fail_expected(ps, "a field name or '}'");
        if (close == '>') return fail_expected(ps, "a field name or '>'");
        return fail_expected(ps, "a field name");
    }
    CALQ_TRY(buf_put(ps, &ps->name, "[", 1));
    CALQ_TRY(next(ps));
    for (;;) {
        if (ps->cur.kind != TP_TOK_IDENT) return fail_expected(ps, "an identifier in an extension name");
        CALQ_TRY(buf_put(ps, &ps->name, ps->cur.start, ps->cur.len));
        CALQ_TRY(next(ps));
        if (at_punct(ps, ']')) break;
        if (!at_punct(ps, '.') && !at_punct(ps, '/')) return fail_expected(ps, "'.', '/' or ']' in an extension name");
        CALQ_TRY(buf_put(ps, &ps->name, ps->cur.start, 1));
        CALQ_TRY(next(ps));
    }
    CALQ_TRY(buf_put(ps, &ps->name, "]", 1));
    return next(ps);
}

static calq_status add_node(parser *ps, calq_tp_node *parent, calq_tp_node *n, int line, int col)
{
    if (!n) return oom(ps);
    n->line = line;
    n->col = col;
    if (tp_append(parent, n) != 0) {
        calq_tp_free(n);
        return oom(ps);
    }
    return CALQ_OK;
}

static calq_status add_scalar(parser *ps, calq_tp_node *parent, const char *name, calq_tp_scalar_type type,
                              const char *bytes, size_t len, int line, int col)
{
    char *text = dup_bytes(bytes, len);
    if (!text) return oom(ps);
    return add_node(ps, parent, tp_scalar_new(name, strlen(name), type, text, len), line, col);
}

static calq_status parse_scalar(parser *ps, calq_tp_node *parent, const char *name, int line, int col)
{
    if (ps->cur.kind == TP_TOK_STRING) {
        /* Adjacent literals are one value: "ab" 'cd' == "abcd". */
        ps->str.len = 0;
        CALQ_TRY(buf_put(ps, &ps->str, "", 0));
        while (ps->cur.kind == TP_TOK_STRING) {
            CALQ_TRY(buf_put(ps, &ps->str, ps->lx.sbuf, ps->lx.sbuf_len));
            CALQ_TRY(next(ps));
        }
        return add_scalar(ps, parent, name, CALQ_TP_STRING, ps->str.data, ps->str.len, line, col);
    }
    if (ps->cur.kind == TP_TOK_IDENT || ps->cur.kind == TP_TOK_NUMBER) {
        calq_tp_scalar_type type = ps->cur.kind == TP_TOK_IDENT ? CALQ_TP_IDENT : CALQ_TP_NUMBER;
        CALQ_TRY(add_scalar(ps, parent, name, type, ps->cur.start, ps->cur.len, line, col));
        return next(ps);
    }
    if (at_punct(ps, '-')) {
        CALQ_TRY(next(ps));
        bool ok = ps->cur.kind == TP_TOK_NUMBER ||
                  (ps->cur.kind == TP_TOK_IDENT && tp_is_inf_or_nan(ps->cur.start, ps->cur.len));
        if (!ok) return fail_expected(ps, "a number or inf/nan after '-'");
        ps->str.len = 0;
        CALQ_TRY(buf_put(ps, &ps->str, "-", 1));
        CALQ_TRY(buf_put(ps, &ps->str, ps->cur.start, ps->cur.len));
        CALQ_TRY(add_scalar(ps, parent, name, CALQ_TP_NUMBER, ps->str.data, ps->str.len, line, col));
        return next(ps);
    }
    char what[CALQ_ERROR_NAME_MAX + 64];
    snprintf(what, sizeof what, "a value for field '%s'", name);
    return fail_expected(ps, what);
}

static calq_status parse_body(parser *ps, calq_tp_node *msg, int depth, const tp_token *open);

static calq_status parse_message(parser *ps, calq_tp_node *parent, const char *name, int line, int col, int depth)
{
    tp_token open = ps->cur;
    if (depth >= CALQ_TP_MAX_DEPTH) {
        return calq__fail(ps->err, CALQ_ERR_BAD_FORMAT, NULL,
                          "%s:%d:%d: expected at most %d levels of nested messages, found message '%s' deeper",
                          tp_file_label(ps->filename), open.line, open.col, CALQ_TP_MAX_DEPTH, name);
    }
    calq_tp_node *n = tp_node_new(name, strlen(name), CALQ_TP_MESSAGE);
    CALQ_TRY(add_node(ps, parent, n, line, col));
    CALQ_TRY(next(ps));
    return parse_body(ps, n, depth + 1, &open);
}

static calq_status parse_list(parser *ps, calq_tp_node *parent, const char *name, int line, int col, int depth)
{
    tp_token open = ps->cur;
    CALQ_TRY(next(ps));
    if (at_punct(ps, ']')) return next(ps);
    for (;;) {
        if (at_punct(ps, '{') || at_punct(ps, '<')) {
            CALQ_TRY(parse_message(ps, parent, name, line, col, depth));
        } else {
            CALQ_TRY(parse_scalar(ps, parent, name, line, col));
        }
        if (at_punct(ps, ']')) return next(ps);
        if (!at_punct(ps, ',')) {
            char what[CALQ_ERROR_NAME_MAX + 96];
            snprintf(what, sizeof what, "',' or ']' in the list of '%s' opened at line %d, column %d", name, open.line,
                     open.col);
            return fail_expected(ps, what);
        }
        CALQ_TRY(next(ps));
    }
}

static calq_status parse_field(parser *ps, calq_tp_node *msg, int depth, char close)
{
    int line = ps->cur.line, col = ps->cur.col;
    CALQ_TRY(parse_name(ps, close));
    /* The name must outlive the next parse_name call (nested fields reuse the buffer). */
    char *name = dup_bytes(ps->name.data, ps->name.len);
    if (!name) return oom(ps);
    calq_status st;
    if (at_punct(ps, ':')) {
        st = next(ps);
        if (st == CALQ_OK) {
            if (at_punct(ps, '{') || at_punct(ps, '<')) {
                st = parse_message(ps, msg, name, line, col, depth);
            } else if (at_punct(ps, '[')) {
                st = parse_list(ps, msg, name, line, col, depth);
            } else {
                st = parse_scalar(ps, msg, name, line, col);
            }
        }
    } else if (at_punct(ps, '{') || at_punct(ps, '<')) {
        st = parse_message(ps, msg, name, line, col, depth);
    } else {
        char what[CALQ_ERROR_NAME_MAX + 64];
        tp_tok_kind k = ps->cur.kind;
        bool looks_scalar = k == TP_TOK_IDENT || k == TP_TOK_NUMBER || k == TP_TOK_STRING || at_punct(ps, '-');
        snprintf(what, sizeof what, looks_scalar ? "':' before the value of field '%s'" : "':' or '{' after field '%s'",
                 name);
        st = fail_expected(ps, what);
    }
    free(name);
    return st;
}

static calq_status parse_body(parser *ps, calq_tp_node *msg, int depth, const tp_token *open)
{
    char close = open ? (open->start[0] == '{' ? '}' : '>') : 0;
    for (;;) {
        if (ps->cur.kind == TP_TOK_EOF) {
            if (!open) return CALQ_OK;
            char what[CALQ_ERROR_NAME_MAX + 96];
            snprintf(what, sizeof what, "'%c' to close '%s' opened at line %d, column %d", close, msg->name, open->line,
                     open->col);
            return fail_expected(ps, what);
        }
        if (close && at_punct(ps, close)) return next(ps);
        CALQ_TRY(parse_field(ps, msg, depth, close));
        /* a list field (`f: [ {..}, {..} ]`) adds several children at once */
        if (depth == 0 && ps->each) {
            for (int i = 0; i < msg->n_children; i++) CALQ_TRY(ps->each(msg->children[i], ps->each_user, ps->err));
            while (msg->n_children > 0) calq_tp_remove(msg, msg->n_children - 1);
        }
        if (at_punct(ps, ',') || at_punct(ps, ';')) CALQ_TRY(next(ps));
    }
}

static calq_status parse(const char *text, size_t len, const char *filename, calq_tp_each_fn each, void *user,
                         calq_tp_node **root, calq_error *err)
{
    *root = NULL;
    parser ps;
    memset(&ps, 0, sizeof ps);
    ps.filename = filename;
    ps.err = err;
    ps.each = each;
    ps.each_user = user;
    tp_lexer_init(&ps.lx, text ? text : "", text ? len : 0, filename, err);
    calq_tp_node *r = calq_tp_new_root();
    calq_status st = r ? CALQ_OK : oom(&ps);
    if (st == CALQ_OK) {
        r->line = 1;
        r->col = 1;
        st = next(&ps);
    }
    if (st == CALQ_OK) st = parse_body(&ps, r, 0, NULL);
    tp_lexer_release(&ps.lx);
    free(ps.name.data);
    free(ps.str.data);
    if (st != CALQ_OK) {
        calq_tp_free(r);
        return st;
    }
    *root = r;
    return CALQ_OK;
}

calq_status calq_tp_parse(const char *text, size_t len, const char *filename, calq_tp_node **root, calq_error *err)
{
    return parse(text, len, filename, NULL, NULL, root, err);
}

calq_status calq_tp_parse_each(const char *text, size_t len, const char *filename, calq_tp_each_fn each, void *user,
                               calq_error *err)
{
    calq_tp_node *root = NULL;
    calq_status st = parse(text, len, filename, each, user, &root, err);
    calq_tp_free(root);
    return st;
}

calq_status calq_tp_parse_file(const char *path, calq_tp_node **root, calq_error *err)
{
    *root = NULL;
    char *buf;
    size_t size;
    CALQ_TRY(calq__read_file_max(path, CALQ_TEXT_MAX_BYTES, "a text-format protobuf file", &buf, &size, err));
    calq_status st = calq_tp_parse(buf, size, path, root, err);
    free(buf);
    return st;
}
