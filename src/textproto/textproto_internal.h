/* Private to src/textproto: the node allocation behind calq_tp_node, the tokenizer the parser
 * and the writer share (the writer re-checks tokens with it so written text always re-parses),
 * and error positions. */
#ifndef CALQ_TEXTPROTO_INTERNAL_H
#define CALQ_TEXTPROTO_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "textproto/textproto.h"

/* Every node is allocated as a tp_node, so trees can grow children arrays geometrically and be
 * freed without recursion (API-built trees have no depth bound). */
typedef struct tp_node {
    calq_tp_node pub; /* first: a calq_tp_node * is a tp_node * */
    int cap;          /* allocated slots in pub.children */
    struct tp_node *next_free;
} tp_node;

/* A detached node owning a copy of `name` (NULL for a root: name ""). NULL on out-of-memory. */
calq_tp_node *tp_node_new(const char *name, size_t name_len, calq_tp_kind kind);
/* Takes `text` (malloc'ed, NUL at text[len]) into a new SCALAR; frees it on failure. */
calq_tp_node *tp_scalar_new(const char *name, size_t name_len, calq_tp_scalar_type type, char *text, size_t len);
/* Appends (takes ownership); -1 on out-of-memory, the child is then not owned by parent. */
int tp_append(calq_tp_node *parent, calq_tp_node *child);

/* "file" for messages, "<text>" when there is no file name. */
const char *tp_file_label(const char *filename);

/* ---- tokens ---------------------------------------------------------------------------- */

typedef enum tp_tok_kind {
    TP_TOK_EOF,
    TP_TOK_IDENT,
    TP_TOK_NUMBER,
    TP_TOK_STRING, /* one literal; its decoded bytes are in the lexer's sbuf */
    TP_TOK_PUNCT   /* one of { } < > [ ] : , ; - . / */
} tp_tok_kind;

typedef struct tp_token {
    tp_tok_kind kind;
    const char *start; /* raw bytes in the input */
    size_t len;
    int line, col;
} tp_token;

typedef struct tp_lexer {
    const char *p, *end;
    int line, col;
    const char *filename;
    calq_error *err;
    char *sbuf; /* decoded bytes of the current STRING token */
    size_t sbuf_len, sbuf_cap;
} tp_lexer;

void tp_lexer_init(tp_lexer *lx, const char *text, size_t len, const char *filename, calq_error *err);
void tp_lexer_release(tp_lexer *lx);
/* Skips whitespace and comments and reads one token. Fails (CALQ_ERR_BAD_FORMAT with
 * file:line:col) on malformed tokens: bad numbers, unterminated strings, bad escapes, stray
 * bytes. */
calq_status tp_lex(tp_lexer *lx, tp_token *tok);

/* Describes a token for "found ..." in messages, e.g. "'{'", "identifier 'abc'". */
void tp_describe_token(const tp_token *tok, char *buf, size_t n);
/* Copies up to n-1 bytes of s for display, escaping non-printables; "..." marks a cut. */
void tp_quote_for_message(const char *s, size_t len, char *buf, size_t n);

/* Lexical classes, shared by the lexer, the writer's checks and the typed reads. */
bool tp_is_ident(const char *s, size_t len);        /* [A-Za-z_][A-Za-z0-9_]* */
bool tp_is_number_token(const char *s, size_t len); /* one unsigned number token */
bool tp_is_inf_or_nan(const char *s, size_t len);   /* inf, infinity, nan, any case */
bool tp_is_number_text(const char *s, size_t len);  /* what a NUMBER node may hold */
bool tp_is_field_name(const char *s, size_t len);   /* identifier or [a.b/c] extension name */

#endif
