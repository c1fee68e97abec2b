/* What several unit tests set up the same way: the shared folder, UltraFace ready to calibrate
 * on the face photos, and the activations a session observer gathers. The tests still ask for
 * the files they need with NEED_FILE (expect.h), so a missing one is a skip. */
#ifndef CALQ_TESTS_FIXTURES_H
#define CALQ_TESTS_FIXTURES_H

#include <stddef.h>

#include "calq.h"

/* The shared folder: $CALQ_SHARED (ctest sets it), else ../shared beside the repository. The
 * string is static. */
const char *fx_shared(void);

/* buf = <shared>/<rel>; returns buf. */
const char *fx_shared_path(char *buf, size_t size, const char *rel);

#define FX_ULTRAFACE "models/ultraface/version-slim-320.onnx"
#define FX_FACES     "data/faces"

/* Loads UltraFace slim-320 from `path` with its input set to 1x3x240x320 (the shape its
 * calibration runs at); *m is the caller's (calq_model_free). */
calq_status fx_ultraface_load(const char *path, calq_model **m, calq_error *err);

/* The image options UltraFace's photos are read with: 320x240, (x - 127) / 128. */
void fx_ultraface_image_opts(calq_image_opts *io);

/* Activations gathered by fx_gather_observer: every tensor of t[0 .. n) named t[i].name gets
 * the values of each run appended to t[i].x (owned by the fx_gather, freed by fx_gather_free;
 * the names are borrowed). */
typedef struct fx_gathered {
    const char *name;
    float *x;
    size_t n;
} fx_gathered;

typedef struct fx_gather {
    fx_gathered *t;
    int n;
} fx_gather;

/* A calq_session_set_observer callback for a fx_gather (user). Non-zero when out of memory. */
int fx_gather_observer(void *user, const char *name, const calq_tensor *t);

/* The gathered tensor named `name`, or NULL. */
const fx_gathered *fx_gather_find(const fx_gather *g, const char *name);

void fx_gather_free(fx_gather *g);

#endif
