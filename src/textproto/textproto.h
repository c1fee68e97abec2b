/* Protobuf text format as a generic tree: read (Caffe prototxt, AMCT record files, the
 * simplified .cfg config) and write (record files, patched prototxt). Format-agnostic: the tree
 * knows field names, nesting and scalar tokens, not schemas. Written text re-parses to the
 * same tree; floats are printed round-trip exact.
 *
 * Ownership: every node belongs to the tree of its root, released by calq_tp_free(root). */
#ifndef CALQ_TEXTPROTO_H
#define CALQ_TEXTPROTO_H

#include <stdbool.h>
#include <stdio.h>

#include "calq.h"

typedef enum calq_tp_kind {
    CALQ_TP_MESSAGE, /* name { ... }  or  name: { ... }  (also < ... >) */
    CALQ_TP_SCALAR   /* name: value */
} calq_tp_kind;

typedef enum calq_tp_scalar_type {
    CALQ_TP_IDENT,  /* enum names, true/false, inf/nan identifiers */
    CALQ_TP_NUMBER, /* the token as written: 1, -2.5e-3, 0x1F, 1.0f, -inf */
    CALQ_TP_STRING  /* unescaped bytes (adjacent string literals concatenated) */
} calq_tp_scalar_type;

typedef struct calq_tp_node {
    char *name;
    calq_tp_kind kind;
    calq_tp_scalar_type type; /* SCALAR only */
    char *text;               /* SCALAR only: token text, or unescaped string bytes (NUL-terminated) */
    size_t text_len;          /* bytes in text (strings may contain NUL) */
    int n_children;           /* MESSAGE only, in file order */
    struct calq_tp_node **children;
    int line, col; /* where the field name starts (1-based) */
} calq_tp_node;

/* Parses `len` bytes. *root is an unnamed MESSAGE holding the top-level fields. `filename`
 * (may be NULL) prefixes messages; every syntax error says "file:line:col: what was expected".
 * Nesting deeper than CALQ_TP_MAX_DEPTH is an error, not a stack overflow. */
#define CALQ_TP_MAX_DEPTH 100
calq_status calq_tp_parse(const char *text, size_t len, const char *filename, calq_tp_node **root, calq_error *err);
calq_status calq_tp_parse_file(const char *path, calq_tp_node **root, calq_error *err);
/* Streaming form for files of many independent entries (a record file): each top-level field
 * is passed to `each` as soon as it is complete, then freed, so memory holds one entry at a
 * time and the first error `each` returns (it fills err) stops the parse there. */
typedef calq_status (*calq_tp_each_fn)(const calq_tp_node *field, void *user, calq_error *err);
calq_status calq_tp_parse_each(const char *text, size_t len, const char *filename, calq_tp_each_fn each, void *user,
                               calq_error *err);
void calq_tp_free(calq_tp_node *root);

/* Lookup among a message's direct children. */
const calq_tp_node *calq_tp_find(const calq_tp_node *msg, const char *name); /* first, or NULL */
int calq_tp_count(const calq_tp_node *msg, const char *name);
const calq_tp_node *calq_tp_nth(const calq_tp_node *msg, const char *name, int i);

/* Typed scalar reads. Each fails with CALQ_ERR_BAD_FORMAT and "file:line:col: field 'x' ..."
 * when the node is not a scalar of a fitting type or the value is out of range. `filename`
 * may be NULL. Floats accept inf/-inf/nan (any case, as identifier or number) and a trailing
 * 'f'; bools accept true/false/t/f/1/0. */
calq_status calq_tp_int(const calq_tp_node *n, const char *filename, int64_t *out, calq_error *err);
calq_status calq_tp_uint(const calq_tp_node *n, const char *filename, uint64_t *out, calq_error *err);
calq_status calq_tp_double(const calq_tp_node *n, const char *filename, double *out, calq_error *err);
calq_status calq_tp_float(const calq_tp_node *n, const char *filename, float *out, calq_error *err);
calq_status calq_tp_bool(const calq_tp_node *n, const char *filename, bool *out, calq_error *err);
/* STRING node's bytes (owned by the tree), or the identifier for IDENT (enum values). */
calq_status calq_tp_string(const calq_tp_node *n, const char *filename, const char **out, calq_error *err);

/* Building trees (for writing). All return NULL on out-of-memory. */
calq_tp_node *calq_tp_new_root(void);
calq_tp_node *calq_tp_add_message(calq_tp_node *parent, const char *name);
calq_tp_node *calq_tp_add_int(calq_tp_node *parent, const char *name, int64_t v);
calq_tp_node *calq_tp_add_uint(calq_tp_node *parent, const char *name, uint64_t v);
calq_tp_node *calq_tp_add_float(calq_tp_node *parent, const char *name, float v);   /* shortest round-trip */
calq_tp_node *calq_tp_add_double(calq_tp_node *parent, const char *name, double v); /* shortest round-trip */
calq_tp_node *calq_tp_add_bool(calq_tp_node *parent, const char *name, bool v);
calq_tp_node *calq_tp_add_ident(calq_tp_node *parent, const char *name, const char *ident); /* enum value */
calq_tp_node *calq_tp_add_string(calq_tp_node *parent, const char *name, const char *bytes, size_t len);
/* Inserts an existing subtree (takes ownership) at position `index` of parent's children
 * (index == n_children appends). Returns 0, or -1 on out-of-memory. */
int calq_tp_insert(calq_tp_node *parent, int index, calq_tp_node *child);
/* Detaches and frees child `index` of parent. */
void calq_tp_remove(calq_tp_node *parent, int index);

/* Writes the children of `root` in protobuf text format, two-space indentation, strings
 * escaped (C escapes, octal for other non-printables). */
calq_status calq_tp_write(const calq_tp_node *root, FILE *fp, calq_error *err);
/* Atomic write to a path (temporary file + rename). */
calq_status calq_tp_write_file(const calq_tp_node *root, const char *path, calq_error *err);

#endif
