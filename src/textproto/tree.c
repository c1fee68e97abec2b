/* The textproto tree: allocation, ownership, lookup and building nodes for the writer. */
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "textproto/textproto_internal.h"

calq_tp_node *tp_node_new(const char *name, size_t name_len, calq_tp_kind kind)
{
    tp_node *n = calloc(1, sizeof *n);
    if (!n) return NULL;
    if (!name) name_len = 0;
    n->pub.name = malloc(name_len + 1);
    if (!n->pub.name) {
        free(n);
        return NULL;
    }
    if (name_len) memcpy(n->pub.name, name, name_len);
    n->pub.name[name_len] = 0;
    n->pub.kind = kind;
    return &n->pub;
}

calq_tp_node *tp_scalar_new(const char *name, size_t name_len, calq_tp_scalar_type type, char *text, size_t len)
{
    calq_tp_node *n = tp_node_new(name, name_len, CALQ_TP_SCALAR);
    if (!n) {
        free(text);
        return NULL;
    }
    n->type = type;
    n->text = text;
    n->text_len = len;
    return n;
}

static int reserve_child(tp_node *p)
{
    if (p->pub.n_children < p->cap) return 0;
    if (p->cap > INT_MAX / 2) return -1;
    int cap = p->cap ? p->cap * 2 : 4;
    calq_tp_node **c = realloc(p->pub.children, (size_t)cap * sizeof *c);
    if (!c) return -1;
    p->pub.children = c;
    p->cap = cap;
    return 0;
}

int tp_append(calq_tp_node *parent, calq_tp_node *child)
{
    return calq_tp_insert(parent, parent->n_children, child);
}

int calq_tp_insert(calq_tp_node *parent, int index, calq_tp_node *child)
{
    CALQ_ASSERT(parent && child && parent->kind == CALQ_TP_MESSAGE);
    CALQ_ASSERT(index >= 0 && index <= parent->n_children);
    tp_node *p = (tp_node *)parent;
    if (reserve_child(p) != 0) return -1;
    calq_tp_node **c = parent->children;
    memmove(c + index + 1, c + index, (size_t)(parent->n_children - index) * sizeof *c);
    c[index] = child;
    parent->n_children++;
    return 0;
}

void calq_tp_remove(calq_tp_node *parent, int index)
{
    CALQ_ASSERT(parent && parent->kind == CALQ_TP_MESSAGE);
    CALQ_ASSERT(index >= 0 && index < parent->n_children);
    calq_tp_node *victim = parent->children[index];
    calq_tp_node **c = parent->children;
    memmove(c + index, c + index + 1, (size_t)(parent->n_children - index - 1) * sizeof *c);
    parent->n_children--;
    calq_tp_free(victim);
}

void calq_tp_free(calq_tp_node *root)
{
    if (!root) return;
    /* A linked stack through next_free instead of recursion: trees built with the API can be
     * arbitrarily deep, and freeing must not allocate. */
    tp_node *stack = (tp_node *)root;
    stack->next_free = NULL;
    while (stack) {
        tp_node *n = stack;
        stack = n->next_free;
        for (int i = 0; i < n->pub.n_children; i++) {
            tp_node *c = (tp_node *)n->pub.children[i];
            c->next_free = stack;
            stack = c;
        }
        free(n->pub.name);
        free(n->pub.text);
        free(n->pub.children);
        free(n);
    }
}

const calq_tp_node *calq_tp_nth(const calq_tp_node *msg, const char *name, int i)
{
    if (!msg || msg->kind != CALQ_TP_MESSAGE || i < 0) return NULL;
    for (int k = 0; k < msg->n_children; k++) {
        if (strcmp(msg->children[k]->name, name) == 0 && i-- == 0) return msg->children[k];
    }
    return NULL;
}

const calq_tp_node *calq_tp_find(const calq_tp_node *msg, const char *name)
{
    return calq_tp_nth(msg, name, 0);
}

int calq_tp_count(const calq_tp_node *msg, const char *name)
{
    if (!msg || msg->kind != CALQ_TP_MESSAGE) return 0;
    int n = 0;
    for (int k = 0; k < msg->n_children; k++) n += strcmp(msg->children[k]->name, name) == 0;
    return n;
}

/* ---- building ------------------------------------------------------------------------- */

calq_tp_node *calq_tp_new_root(void)
{
    return tp_node_new(NULL, 0, CALQ_TP_MESSAGE);
}

static calq_tp_node *attach(calq_tp_node *parent, calq_tp_node *n)
{
    if (!n) return NULL;
    if (tp_append(parent, n) != 0) {
        calq_tp_free(n);
        return NULL;
    }
    return n;
}

calq_tp_node *calq_tp_add_message(calq_tp_node *parent, const char *name)
{
    CALQ_ASSERT(parent && parent->kind == CALQ_TP_MESSAGE && name);
    return attach(parent, tp_node_new(name, strlen(name), CALQ_TP_MESSAGE));
}

static calq_tp_node *add_scalar(calq_tp_node *parent, const char *name, calq_tp_scalar_type type, const char *bytes,
                                size_t len)
{
    CALQ_ASSERT(parent && parent->kind == CALQ_TP_MESSAGE && name && (bytes || len == 0));
    char *text = malloc(len + 1);
    if (!text) return NULL;
    if (len) memcpy(text, bytes, len);
    text[len] = 0;
    return attach(parent, tp_scalar_new(name, strlen(name), type, text, len));
}

calq_tp_node *calq_tp_add_int(calq_tp_node *parent, const char *name, int64_t v)
{
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%" PRId64, v);
    return add_scalar(parent, name, CALQ_TP_NUMBER, buf, (size_t)n);
}

calq_tp_node *calq_tp_add_uint(calq_tp_node *parent, const char *name, uint64_t v)
{
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%" PRIu64, v);
    return add_scalar(parent, name, CALQ_TP_NUMBER, buf, (size_t)n);
}

/* Non-finite values are spelled as the parser reads them back: "inf"/"nan" alone are
 * identifiers, with a minus sign they are number tokens. Returns true when v was non-finite. */
static bool non_finite_text(double v, char *buf, size_t n, calq_tp_scalar_type *type)
{
    if (!isnan(v) && !isinf(v)) return false;
    snprintf(buf, n, "%s%s", signbit(v) ? "-" : "", isnan(v) ? "nan" : "inf");
    *type = signbit(v) ? CALQ_TP_NUMBER : CALQ_TP_IDENT;
    return true;
}

calq_tp_node *calq_tp_add_float(calq_tp_node *parent, const char *name, float v)
{
    char buf[48];
    calq_tp_scalar_type type = CALQ_TP_NUMBER;
    if (!non_finite_text(v, buf, sizeof buf, &type)) {
        /* FLT_DIG (6) digits always fit a float; 9 always identify one exactly. */
        for (int prec = 6; prec <= 9; prec++) {
            snprintf(buf, sizeof buf, "%.*g", prec, (double)v);
            if (strtof(buf, NULL) == v) break;
        }
    }
    return add_scalar(parent, name, type, buf, strlen(buf));
}

calq_tp_node *calq_tp_add_double(calq_tp_node *parent, const char *name, double v)
{
    char buf[48];
    calq_tp_scalar_type type = CALQ_TP_NUMBER;
    if (!non_finite_text(v, buf, sizeof buf, &type)) {
        for (int prec = 15; prec <= 17; prec++) {
            snprintf(buf, sizeof buf, "%.*g", prec, v);
            if (strtod(buf, NULL) == v) break;
        }
    }
    return add_scalar(parent, name, type, buf, strlen(buf));
}

calq_tp_node *calq_tp_add_bool(calq_tp_node *parent, const char *name, bool v)
{
    return add_scalar(parent, name, CALQ_TP_IDENT, v ? "true" : "false", v ? 4 : 5);
}

calq_tp_node *calq_tp_add_ident(calq_tp_node *parent, const char *name, const char *ident)
{
    return add_scalar(parent, name, CALQ_TP_IDENT, ident, strlen(ident));
}

calq_tp_node *calq_tp_add_string(calq_tp_node *parent, const char *name, const char *bytes, size_t len)
{
    return add_scalar(parent, name, CALQ_TP_STRING, bytes, len);
}

const char *tp_file_label(const char *filename)
{
    return filename ? filename : "<text>";
}
