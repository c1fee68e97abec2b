/* Shared body of the two config fuzz targets (fuzz_config_json.c, fuzz_config_cfg.c): the same
 * checks against a small in-memory model with one layer of every quantizable kind. */
#ifndef CALQ_FUZZ_CONFIG_COMMON_H
#define CALQ_FUZZ_CONFIG_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../support/calib_model.h"
#include "calib/config.h"

typedef calq_status (*config_parser)(const calq_model *m, const char *text, size_t len, const char *filename,
                                     calq_config **out, calq_error *err);

static calq_model *model(void)
{
    static calq_model *m;
    if (!m) {
        calq_error err = {0};
        m = calib_test_model(&err);
        if (!m) {
            fprintf(stderr, "fuzz_config: cannot build the model: %s\n", err.message);
            abort();
        }
    }
    return m;
}

/* The config as JSON text (malloc'ed, caller frees). */
static char *to_json(const calq_config *c, size_t *n)
{
    char *buf = NULL;
    FILE *fp = open_memstream(&buf, n);
    calq_error err = {0};
    if (!fp || calq__config_write_json(c, fp, &err) != CALQ_OK) abort();
    fclose(fp);
    return buf;
}

/* One fuzz input through `parse` (the JSON or the .cfg reader): it fails with a message, or its
 * config names only quantizable layers and its JSON re-reads (through the JSON reader) to the
 * same bytes, as does a clone's. */
static int fuzz_config_one(config_parser parse, const uint8_t *data, size_t size, const char *name)
{
    calq_model *m = model();
    calq_config *c = NULL;
    calq_error err = {0};
    calq_status st = parse(m, (const char *)data, size, name, &c, &err);
    if (st != CALQ_OK) {
        if (c || err.message[0] == 0 || err.status != st) abort();
        return 0;
    }
    for (int i = 0; i < c->n_layers; i++) {
        calq_node_info ni;
        if (calq_model_node_info(m, c->layers[i].node, &ni) != CALQ_OK || !ni.quantizable ||
            strcmp(ni.name, c->layers[i].name) != 0)
            abort();
    }
    size_t n1 = 0, n2 = 0;
    char *t1 = to_json(c, &n1);
    calq_config *c2 = NULL;
    if (calq__config_parse_json(m, t1, n1, "again.json", &c2, &err) != CALQ_OK) {
        fprintf(stderr, "written config does not read back: %s\n%s\n", err.message, t1);
        abort();
    }
    char *t2 = to_json(c2, &n2);
    if (n1 != n2 || memcmp(t1, t2, n1) != 0) abort();
    free(t2);
    /* A clone writes the same bytes. */
    calq_config *c3 = calq__config_clone(c);
    if (!c3) abort();
    t2 = to_json(c3, &n2);
    if (n1 != n2 || memcmp(t1, t2, n1) != 0) abort();
    calq_config_free(c3);
    free(t1);
    free(t2);
    calq_config_free(c2);
    calq_config_free(c);
    return 0;
}

#endif
