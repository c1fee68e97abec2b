/* Typed reads of scalar nodes, with exact range checks: a value that does not fit is an error
 * naming the field and its position, never a silent wrap or clamp. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "textproto/textproto_internal.h"

static calq_status type_error(const calq_tp_node *n, const char *filename, calq_error *err, const char *expected)
{
    char found[128];
    if (!n) {
        snprintf(found, sizeof found, "nothing (the field is missing)");
        return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL, "%s: expected %s, found %s", tp_file_label(filename),
                          expected, found);
    }
    if (n->kind == CALQ_TP_MESSAGE) {
        snprintf(found, sizeof found, "a message");
    } else {
        char q[100];
        tp_quote_for_message(n->text, n->text_len, q, sizeof q);
        snprintf(found, sizeof found, n->type == CALQ_TP_STRING ? "string \"%s\"" : "'%s'", q);
    }
    return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL, "%s:%d:%d: field '%s': expected %s, found %s",
                      tp_file_label(filename), n->line, n->col, n->name, expected, found);
}

static bool is_number(const calq_tp_node *n)
{
    return n && n->kind == CALQ_TP_SCALAR && n->type == CALQ_TP_NUMBER && tp_is_number_text(n->text, n->text_len);
}

/* Magnitude of an unsigned integer token (decimal, 0x hex, 0 octal). False when the token is
 * not an integer at all; *overflow when it is one but exceeds uint64. */
static bool integer_magnitude(const char *s, size_t len, uint64_t *mag, bool *overflow)
{
    *mag = 0;
    *overflow = false;
    if (!tp_is_number_token(s, len)) return false;
    unsigned base = 10;
    size_t i = 0;
    if (len >= 2 && s[0] == '0' && (s[1] | 0x20) == 'x') {
        base = 16;
        i = 2;
    } else {
        for (size_t k = 0; k < len; k++) {
            if (s[k] < '0' || s[k] > '9') return false; /* fraction, exponent or 'f' */
        }
        if (len > 1 && s[0] == '0') base = 8;
    }
    for (; i < len; i++) {
        int c = (unsigned char)s[i];
        unsigned d = c <= '9' ? (unsigned)(c - '0') : (unsigned)((c | 0x20) - 'a' + 10);
        if (*mag > (UINT64_MAX - d) / base) *overflow = true;
        *mag = *mag * base + d;
    }
    return true;
}

calq_status calq_tp_int(const calq_tp_node *n, const char *filename, int64_t *out, calq_error *err)
{
    uint64_t mag;
    bool overflow;
    if (!is_number(n)) return type_error(n, filename, err, "an integer");
    bool neg = n->text[0] == '-';
    if (!integer_magnitude(n->text + neg, n->text_len - neg, &mag, &overflow)) {
        return type_error(n, filename, err, "an integer");
    }
    if (overflow || mag > (neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX)) {
        return type_error(n, filename, err, "an integer in [-9223372036854775808, 9223372036854775807]");
    }
    *out = neg ? (int64_t)(0 - mag) : (int64_t)mag;
    return CALQ_OK;
}

calq_status calq_tp_uint(const calq_tp_node *n, const char *filename, uint64_t *out, calq_error *err)
{
    uint64_t mag;
    bool overflow;
    if (!is_number(n)) return type_error(n, filename, err, "a non-negative integer");
    bool neg = n->text[0] == '-';
    if (!integer_magnitude(n->text + neg, n->text_len - neg, &mag, &overflow)) {
        return type_error(n, filename, err, "a non-negative integer");
    }
    if (neg && mag != 0) return type_error(n, filename, err, "a non-negative integer");
    if (overflow) return type_error(n, filename, err, "an integer in [0, 18446744073709551615]");
    *out = mag;
    return CALQ_OK;
}

/* Shared by double and float: inf/nan spellings, and hex/octal integers, whose value C's
 * strtod would misread (octal as decimal). Returns true when it set *v. */
static bool special_value(const calq_tp_node *n, double *v, bool *int_overflow)
{
    *int_overflow = false;
    bool neg = n->text[0] == '-';
    const char *body = n->text + neg;
    size_t len = n->text_len - neg;
    double sign = neg ? -1.0 : 1.0;
    if (tp_is_inf_or_nan(body, len)) {
        *v = copysign((body[0] | 0x20) == 'n' ? NAN : INFINITY, sign);
        return true;
    }
    if (len < 2 || body[0] != '0') return false;
    uint64_t mag;
    bool overflow;
    if (!integer_magnitude(body, len, &mag, &overflow)) return false; /* 0.5, 00.5e3, ... */
    *int_overflow = overflow;
    *v = sign * (double)mag;
    return !overflow;
}

static bool is_float_like(const calq_tp_node *n)
{
    if (!n || n->kind != CALQ_TP_SCALAR) return false;
    if (n->type == CALQ_TP_IDENT) return tp_is_inf_or_nan(n->text, n->text_len);
    return is_number(n);
}

/* strtod/strtof stop before a trailing 'f'; anything else left over means a malformed node. */
static bool consumed(const calq_tp_node *n, const char *end)
{
    size_t used = (size_t)(end - n->text);
    return used == n->text_len || (used + 1 == n->text_len && (n->text[used] | 0x20) == 'f');
}

calq_status calq_tp_double(const calq_tp_node *n, const char *filename, double *out, calq_error *err)
{
    if (!is_float_like(n)) return type_error(n, filename, err, "a number");
    double v;
    bool overflow;
    if (special_value(n, &v, &overflow)) {
        *out = v;
        return CALQ_OK;
    }
    if (overflow) return type_error(n, filename, err, "an integer of at most 64 bits");
    char *end;
    v = strtod(n->text, &end);
    if (!consumed(n, end)) return type_error(n, filename, err, "a number");
    if (isinf(v)) return type_error(n, filename, err, "a number in double range");
    *out = v;
    return CALQ_OK;
}

calq_status calq_tp_float(const calq_tp_node *n, const char *filename, float *out, calq_error *err)
{
    if (!is_float_like(n)) return type_error(n, filename, err, "a number");
    double d;
    bool overflow;
    if (special_value(n, &d, &overflow)) {
        /* Integers below 2^64 and inf/nan all convert to float without going out of range. */
        *out = (float)d;
        return CALQ_OK;
    }
    if (overflow) return type_error(n, filename, err, "an integer of at most 64 bits");
    /* strtof, not (float)strtod: rounding twice can land on the wrong float. */
    char *end;
    float v = strtof(n->text, &end);
    if (!consumed(n, end)) return type_error(n, filename, err, "a number");
    if (isinf(v)) return type_error(n, filename, err, "a number in float range");
    *out = v;
    return CALQ_OK;
}

calq_status calq_tp_bool(const calq_tp_node *n, const char *filename, bool *out, calq_error *err)
{
    static const char *const yes[] = {"true", "True", "t", "1"};
    static const char *const no[] = {"false", "False", "f", "0"};
    if (n && n->kind == CALQ_TP_SCALAR && n->type != CALQ_TP_STRING) {
        for (int i = 0; i < 4; i++) {
            bool want_number = i == 3;
            if (want_number != (n->type == CALQ_TP_NUMBER)) continue;
            if (strcmp(n->text, yes[i]) == 0 || strcmp(n->text, no[i]) == 0) {
                *out = strcmp(n->text, yes[i]) == 0;
                return CALQ_OK;
            }
        }
    }
    return type_error(n, filename, err, "a boolean (true, false, t, f, 1 or 0)");
}

calq_status calq_tp_string(const calq_tp_node *n, const char *filename, const char **out, calq_error *err)
{
    if (!n || n->kind != CALQ_TP_SCALAR || n->type == CALQ_TP_NUMBER) return type_error(n, filename, err, "a string");
    *out = n->text;
    return CALQ_OK;
}
