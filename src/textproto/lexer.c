/* Tokenizer for protobuf text format. Reads exactly `len` bytes (never relies on a NUL after
 * them), tracks 1-based line and byte column, and rejects malformed tokens where they start. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "textproto/textproto_internal.h"

static bool is_digit(int c)
{
    return c >= '0' && c <= '9';
}
static bool is_alpha(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static bool is_alnum(int c)
{
    return is_alpha(c) || is_digit(c);
}
static bool is_hex(int c)
{
    return is_digit(c) || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f');
}
static int hex_value(int c)
{
    return is_digit(c) ? c - '0' : (c | 0x20) - 'a' + 10;
}

bool tp_is_ident(const char *s, size_t len)
{
    if (len == 0 || !is_alpha((unsigned char)s[0])) return false;
    for (size_t i = 1; i < len; i++) {
        if (!is_alnum((unsigned char)s[i])) return false;
    }
    return true;
}

static bool equals_nocase(const char *s, size_t len, const char *word)
{
    size_t n = strlen(word);
    if (len != n) return false;
    for (size_t i = 0; i < n; i++) {
        if ((s[i] | 0x20) != word[i]) return false;
    }
    return true;
}

bool tp_is_inf_or_nan(const char *s, size_t len)
{
    return equals_nocase(s, len, "inf") || equals_nocase(s, len, "infinity") || equals_nocase(s, len, "nan");
}

bool tp_is_number_token(const char *s, size_t len)
{
    if (len >= 2 && s[0] == '0' && (s[1] | 0x20) == 'x') {
        if (len == 2) return false;
        for (size_t i = 2; i < len; i++) {
            if (!is_hex((unsigned char)s[i])) return false;
        }
        return true;
    }
    size_t i = 0, int_digits = 0, frac_digits = 0;
    bool frac = false, expo = false;
    while (i < len && is_digit(s[i])) i++, int_digits++;
    if (i < len && s[i] == '.') {
        frac = true;
        i++;
        while (i < len && is_digit(s[i])) i++, frac_digits++;
    }
    if (int_digits + frac_digits == 0) return false;
    if (i < len && (s[i] | 0x20) == 'e') {
        expo = true;
        i++;
        if (i < len && (s[i] == '+' || s[i] == '-')) i++;
        size_t d = 0;
        while (i < len && is_digit(s[i])) i++, d++;
        if (d == 0) return false;
    }
    bool suffix_f = i < len && (s[i] | 0x20) == 'f';
    if (suffix_f) i++;
    if (i != len) return false;
    if (!frac && !expo && int_digits > 1 && s[0] == '0') {
        /* A leading zero makes an integer octal, as in C and protobuf. */
        if (suffix_f) return false;
        for (size_t k = 1; k < int_digits; k++) {
            if (s[k] > '7') return false;
        }
    }
    return true;
}

bool tp_is_number_text(const char *s, size_t len)
{
    if (len > 0 && s[0] == '-') return tp_is_number_token(s + 1, len - 1) || tp_is_inf_or_nan(s + 1, len - 1);
    return tp_is_number_token(s, len);
}

bool tp_is_field_name(const char *s, size_t len)
{
    if (tp_is_ident(s, len)) return true;
    if (len < 3 || s[0] != '[' || s[len - 1] != ']') return false;
    size_t seg = 1;
    for (size_t i = 1; i < len; i++) {
        if (i == len - 1 || s[i] == '.' || s[i] == '/') {
            if (!tp_is_ident(s + seg, i - seg)) return false;
            seg = i + 1;
        }
    }
    return true;
}

void tp_quote_for_message(const char *s, size_t len, char *buf, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        char piece[8];
        if (c >= 0x20 && c < 0x7f) {
            piece[0] = (char)c;
            piece[1] = 0;
        } else {
            snprintf(piece, sizeof piece, "\\x%02X", c);
        }
        size_t pl = strlen(piece);
        if (o + pl + 4 > n || i >= 60) {
            if (o + 4 <= n) memcpy(buf + o, "...", 3), o += 3;
            break;
        }
        memcpy(buf + o, piece, pl);
        o += pl;
    }
    if (n) buf[o < n ? o : n - 1] = 0;
}

void tp_describe_token(const tp_token *tok, char *buf, size_t n)
{
    char q[96];
    tp_quote_for_message(tok->start, tok->len, q, sizeof q);
    switch (tok->kind) {
    case TP_TOK_EOF: snprintf(buf, n, "end of file"); break;
    case TP_TOK_IDENT: snprintf(buf, n, "identifier '%s'", q); break;
    case TP_TOK_NUMBER: snprintf(buf, n, "number '%s'", q); break;
    case TP_TOK_STRING: snprintf(buf, n, "string %s", q); break;
    case TP_TOK_PUNCT: snprintf(buf, n, "'%s'", q); break;
    }
}

void tp_lexer_init(tp_lexer *lx, const char *text, size_t len, const char *filename, calq_error *err)
{
    memset(lx, 0, sizeof *lx);
    lx->p = text;
    lx->end = text + len;
    lx->line = 1;
    lx->col = 1;
    lx->filename = filename;
    lx->err = err;
}

void tp_lexer_release(tp_lexer *lx)
{
    free(lx->sbuf);
    lx->sbuf = NULL;
    lx->sbuf_len = lx->sbuf_cap = 0;
}

static void advance(tp_lexer *lx)
{
    if (*lx->p == '\n') {
        lx->line++;
        lx->col = 1;
    } else {
        lx->col++;
    }
    lx->p++;
}

static int peek_at(const tp_lexer *lx, size_t k)
{
    return (size_t)(lx->end - lx->p) > k ? (unsigned char)lx->p[k] : -1;
}

static calq_status fail_at(const tp_lexer *lx, int line, int col, const char *what)
{
    return calq__fail(lx->err, CALQ_ERR_BAD_FORMAT, NULL, "%s:%d:%d: %s", tp_file_label(lx->filename), line, col, what);
}

static void describe_byte(int c, char *buf, size_t n)
{
    if (c == 0) {
        snprintf(buf, n, "a NUL byte");
    } else if (c > 0x20 && c < 0x7f) {
        snprintf(buf, n, "'%c'", c);
    } else {
        snprintf(buf, n, "byte 0x%02X", (unsigned)c);
    }
}

static calq_status sbuf_put(tp_lexer *lx, const char *bytes, size_t n)
{
    if (lx->sbuf_cap - lx->sbuf_len < n + 1) {
        size_t cap = lx->sbuf_cap ? lx->sbuf_cap : 64;
        while (cap - lx->sbuf_len < n + 1) cap *= 2;
        char *b = realloc(lx->sbuf, cap);
        if (!b) return calq__fail(lx->err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory reading a string");
        lx->sbuf = b;
        lx->sbuf_cap = cap;
    }
    memcpy(lx->sbuf + lx->sbuf_len, bytes, n);
    lx->sbuf_len += n;
    return CALQ_OK;
}

static calq_status put_utf8(tp_lexer *lx, uint32_t cp)
{
    char b[4];
    size_t n;
    if (cp < 0x80) {
        b[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        b[0] = (char)(0xC0 | (cp >> 6));
        b[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        b[0] = (char)(0xE0 | (cp >> 12));
        b[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        b[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        b[0] = (char)(0xF0 | (cp >> 18));
        b[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        b[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        b[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    return sbuf_put(lx, b, n);
}

/* Reads exactly `digits` hex digits after the current position; -1 if they are not there. */
static int64_t read_hex_fixed(tp_lexer *lx, int digits)
{
    int64_t v = 0;
    for (int i = 0; i < digits; i++) {
        int c = peek_at(lx, 0);
        if (c < 0 || !is_hex(c)) return -1;
        v = v * 16 + hex_value(c);
        advance(lx);
    }
    return v;
}

/* \u and \U escapes (as protobuf accepts them): a code point, written as UTF-8; a UTF-16
 * surrogate pair written as two \u escapes is joined. */
static calq_status unicode_escape(tp_lexer *lx, int letter, int line, int col)
{
    int64_t cp = read_hex_fixed(lx, letter == 'u' ? 4 : 8);
    if (cp < 0)
        return fail_at(lx, line, col,
                       letter == 'u' ? "expected 4 hex digits after '\\u'" : "expected 8 hex digits after '\\U'");
    if (cp >= 0xD800 && cp <= 0xDBFF && peek_at(lx, 0) == '\\' && peek_at(lx, 1) == 'u') {
        tp_lexer save = *lx;
        advance(lx);
        advance(lx);
        int64_t lo = read_hex_fixed(lx, 4);
        if (lo >= 0xDC00 && lo <= 0xDFFF) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        } else {
            *lx = save;
        }
    }
    if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) {
        return fail_at(lx, line, col,
                       "expected a Unicode code point, found an unpaired surrogate or a value above U+10FFFF");
    }
    return put_utf8(lx, (uint32_t)cp);
}

static calq_status escape(tp_lexer *lx, int line, int col)
{
    advance(lx); /* the backslash */
    int e = peek_at(lx, 0);
    if (e < 0) return fail_at(lx, line, col, "unterminated string: expected an escape after '\\', found end of file");
    if (e == '\n')
        return fail_at(lx, line, col, "unterminated string: expected an escape after '\\', found end of line");
    static const char simple_in[] = "ntrabfv\\'\"?";
    static const char simple_out[] = "\n\t\r\a\b\f\v\\'\"?";
    const char *hit = e ? strchr(simple_in, e) : NULL;
    if (hit) {
        advance(lx);
        return sbuf_put(lx, &simple_out[hit - simple_in], 1);
    }
    if (e == 'x' || e == 'X') {
        advance(lx);
        int v = 0, n = 0;
        while (n < 2 && peek_at(lx, 0) >= 0 && is_hex(peek_at(lx, 0))) {
            v = v * 16 + hex_value(peek_at(lx, 0));
            advance(lx);
            n++;
        }
        if (n == 0) return fail_at(lx, line, col, "expected hex digits after '\\x'");
        char b = (char)v;
        return sbuf_put(lx, &b, 1);
    }
    if (e >= '0' && e <= '7') {
        int v = 0, n = 0;
        while (n < 3 && peek_at(lx, 0) >= '0' && peek_at(lx, 0) <= '7') {
            v = v * 8 + (peek_at(lx, 0) - '0');
            advance(lx);
            n++;
        }
        if (v > 255) return fail_at(lx, line, col, "expected an octal escape up to \\377, found a larger value");
        char b = (char)v;
        return sbuf_put(lx, &b, 1);
    }
    if (e == 'u' || e == 'U') {
        advance(lx);
        return unicode_escape(lx, e, line, col);
    }
    char found[24], msg[96];
    describe_byte(e, found, sizeof found);
    snprintf(msg, sizeof msg, "expected an escape (\\n \\t \\\\ \\\" \\' \\xHH \\ooo ...) after '\\', found %s", found);
    return fail_at(lx, line, col, msg);
}

static calq_status lex_string(tp_lexer *lx, tp_token *tok)
{
    int quote = *lx->p;
    advance(lx);
    lx->sbuf_len = 0;
    CALQ_TRY(sbuf_put(lx, "", 0)); /* a buffer exists even for "" */
    for (;;) {
        int c = peek_at(lx, 0);
        if (c < 0 || c == '\n') {
            char msg[96];
            snprintf(msg, sizeof msg, "unterminated string: expected a closing %c, found %s", quote,
                     c < 0 ? "end of file" : "end of line");
            return fail_at(lx, tok->line, tok->col, msg);
        }
        if (c == quote) {
            advance(lx);
            break;
        }
        if (c == '\\') {
            CALQ_TRY(escape(lx, lx->line, lx->col));
            continue;
        }
        if (c == 0) return fail_at(lx, lx->line, lx->col, "expected string characters, found a NUL byte (write \\0)");
        CALQ_TRY(sbuf_put(lx, lx->p, 1));
        advance(lx);
    }
    lx->sbuf[lx->sbuf_len] = 0;
    tok->kind = TP_TOK_STRING;
    return CALQ_OK;
}

/* Takes the longest run that could belong to a number, then checks it as a whole, so "1.2.3",
 * "0x", "1e" and "12abc" are one bad number rather than a number followed by junk. */
static calq_status lex_number(tp_lexer *lx, tp_token *tok)
{
    size_t avail = (size_t)(lx->end - lx->p), n = 0;
    bool hex = avail >= 2 && lx->p[0] == '0' && (lx->p[1] | 0x20) == 'x';
    while (n < avail) {
        int c = (unsigned char)lx->p[n];
        bool sign_of_exponent = (c == '+' || c == '-') && !hex && n > 0 && (lx->p[n - 1] | 0x20) == 'e';
        if (!is_alnum(c) && c != '.' && !sign_of_exponent) break;
        n++;
    }
    if (!tp_is_number_token(lx->p, n)) {
        char q[96], msg[160];
        tp_quote_for_message(lx->p, n, q, sizeof q);
        snprintf(msg, sizeof msg, "expected a number, found '%s'", q);
        return fail_at(lx, tok->line, tok->col, msg);
    }
    for (size_t i = 0; i < n; i++) advance(lx);
    tok->kind = TP_TOK_NUMBER;
    return CALQ_OK;
}

calq_status tp_lex(tp_lexer *lx, tp_token *tok)
{
    for (;;) {
        int c = peek_at(lx, 0);
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f') {
            advance(lx);
        } else if (c == '#') {
            while (peek_at(lx, 0) >= 0 && *lx->p != '\n') advance(lx);
        } else {
            break;
        }
    }
    tok->start = lx->p;
    tok->line = lx->line;
    tok->col = lx->col;
    tok->len = 0;
    int c = peek_at(lx, 0);
    calq_status st = CALQ_OK;
    if (c < 0) {
        tok->kind = TP_TOK_EOF;
    } else if (is_alpha(c)) {
        while (peek_at(lx, 0) >= 0 && is_alnum(*lx->p)) advance(lx);
        tok->kind = TP_TOK_IDENT;
    } else if (is_digit(c) || (c == '.' && peek_at(lx, 1) >= 0 && is_digit(peek_at(lx, 1)))) {
        st = lex_number(lx, tok);
    } else if (c == '"' || c == '\'') {
        st = lex_string(lx, tok);
    } else if (c && strchr("{}<>[]:,;-./", c)) {
        advance(lx);
        tok->kind = TP_TOK_PUNCT;
    } else {
        char found[24], msg[96];
        describe_byte(c, found, sizeof found);
        snprintf(msg, sizeof msg, "expected a field name, a value or punctuation, found %s", found);
        return fail_at(lx, lx->line, lx->col, msg);
    }
    tok->len = (size_t)(lx->p - tok->start);
    return st;
}
