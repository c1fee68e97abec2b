/* Shared unit-test setup (fixtures.h). */
#include "fixtures.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *fx_shared(void)
{
    static char buf[1024];
    const char *env = getenv("CALQ_SHARED");
    if (env && env[0]) return env;
    /* tests/support/<this file> -> the repository root -> ../shared */
    snprintf(buf, sizeof buf, "%s", __FILE__);
    char *slash = strrchr(buf, '/');
    if (slash) *slash = 0;
    strncat(buf, "/../../../shared", sizeof buf - strlen(buf) - 1);
    return buf;
}

const char *fx_shared_path(char *buf, size_t size, const char *rel)
{
    snprintf(buf, size, "%s/%s", fx_shared(), rel);
    return buf;
}

calq_status fx_ultraface_load(const char *path, calq_model **m, calq_error *err)
{
    calq_status st = calq_model_load_onnx(path, m, err);
    if (st != CALQ_OK) return st;
    calq_value_info in;
    calq_model_input_info(*m, 0, &in);
    const int64_t dims[4] = {1, 3, 240, 320};
    st = calq_model_set_input_shape(*m, in.name, dims, 4, err);
    if (st != CALQ_OK) {
        calq_model_free(*m);
        *m = NULL;
    }
    return st;
}

void fx_ultraface_image_opts(calq_image_opts *io)
{
    calq_image_opts_init(io);
    io->width = 320;
    io->height = 240;
    for (int c = 0; c < 3; c++) io->mean[c] = 127.0f, io->std[c] = 128.0f;
}

int fx_gather_observer(void *user, const char *name, const calq_tensor *t)
{
    fx_gather *g = user;
    for (int i = 0; i < g->n; i++) {
        if (strcmp(g->t[i].name, name) != 0) continue;
        size_t add = (size_t)calq_tensor_numel(t);
        float *p = realloc(g->t[i].x, (g->t[i].n + add) * sizeof(float));
        if (!p) return 1;
        memcpy(p + g->t[i].n, t->data, add * sizeof(float));
        g->t[i].x = p;
        g->t[i].n += add;
    }
    return 0;
}

const fx_gathered *fx_gather_find(const fx_gather *g, const char *name)
{
    for (int i = 0; i < g->n; i++)
        if (strcmp(g->t[i].name, name) == 0) return &g->t[i];
    return NULL;
}

void fx_gather_free(fx_gather *g)
{
    for (int i = 0; g->t && i < g->n; i++) free(g->t[i].x);
    free(g->t);
    g->t = NULL;
    g->n = 0;
}
