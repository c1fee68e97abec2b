/* libFuzzer target for the record reader (amct-reference.md §7.1, src/calib/record_read.c):
 * any input either fails with a message or parses into a record that passes or fails the §4.4
 * checks against the in-memory test model, and a parsed record written out reads back the same. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../support/calib_model.h"
#include "calib/record.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static calq_model *model;
    calq_error err = {0};
    if (!model) model = calib_test_model(&err);
    calq_record *r = NULL;
    if (calq__record_parse((const char *)data, size, "fuzz", &r, &err) != CALQ_OK) {
        if (!err.message[0]) abort(); /* every failure says why */
        return 0;
    }
    if (model) (void)calq__record_check(r, model, "model", "fuzz", &err);
    char path[64];
    snprintf(path, sizeof path, "/tmp/calq_fuzz_record_%d.txt", (int)getpid());
    if (calq__record_write_file(r, path, &err) == CALQ_OK) {
        calq_record *back = NULL;
        if (calq__record_read_file(path, &back, &err) != CALQ_OK || back->n_layers != r->n_layers) abort();
        for (int i = 0; i < r->n_layers; i++) {
            const calq_record_layer *a = &r->layers[i], *b = &back->layers[i];
            if (strcmp(a->name, b->name) != 0 || a->n_scale_w != b->n_scale_w || a->has_scale_d != b->has_scale_d)
                abort();
            if (a->has_scale_d && memcmp(&a->scale_d, &b->scale_d, sizeof(float)) != 0) abort();
            if (a->n_scale_w && memcmp(a->scale_w, b->scale_w, (size_t)a->n_scale_w * sizeof(float)) != 0) abort();
        }
        calq__record_free(back);
        unlink(path);
    }
    calq__record_free(r);
    return 0;
}
