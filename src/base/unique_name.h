/* New names made from existing ones ("<conv>.folded_weight", "<layer>.dmq.scale",
 * "<tensor>_quantized", "<layer>_quant_layer"), unique in whatever table the caller checks.
 *
 * Every pass and writer that invents a name goes through calq__unique_name: formatting into a
 * fixed buffer truncated long names (a 600-character Conv name) until the base, the suffix and
 * every "_<k>" retry were the same string, and the retry loop never ended (or two names came out
 * equal and the file was invalid). Here nothing is truncated, and each retry is a different
 * string, so the loop ends after at most one retry per name already taken. */
#ifndef CALQ_BASE_UNIQUE_NAME_H
#define CALQ_BASE_UNIQUE_NAME_H

#include <stdarg.h>
#include <stdbool.h>

/* True when `name` is in use in the caller's tables (ctx). */
typedef bool (*calq_name_taken_fn)(const void *ctx, const char *name);

/* At most this many candidates are tried; more would mean a `taken` that never says no. */
#define CALQ_UNIQUE_NAME_TRIES (1 << 24)

/* "<base><suffix>" when taken(ctx, ·) says it is free, else the first free one of
 * "<base><suffix><sep><k>" for k = first, first + 1, ... (the forms calq's names always had:
 * "x.folded_weight_1", "y_calq1", "conv_quant_layer_2"). suffix and sep may be "".
 *
 * Ownership: the result is malloc'd and the caller frees it (free()). NULL on out of memory or
 * when CALQ_UNIQUE_NAME_TRIES candidates were all taken. */
char *calq__unique_name(const char *base, const char *suffix, const char *sep, int first, calq_name_taken_fn taken,
                        const void *ctx);

/* printf into a malloc'd string of whatever length it needs (the caller frees it); NULL on out of
 * memory or a format error. For names derived from others ("calq.iso/<layer>/<value>") that must
 * not be cut short. */
char *calq__strdup_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same with a va_list (ap is consumed). */
char *calq__vstrdup_printf(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));

#endif
