/* calq_calibrate on UltraFace slim-320 (ONNX) and two photos, held against an independent
 * computation: the activations of every quantizable layer's input, gathered over both photos
 * by a plain session run and concatenated, through the whole-buffer calq_ifmr (the reference
 * that sorts everything); and ARQ on the folded weights. scale_d / offset_d / scale_w must be
 * equal bit for bit. Also: the record passes every §4.4 check, and HFMG layers calibrate. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calib/config.h"
#include "calib/record.h"
#include "frontend/model.h"
#include "graph/passes.h"

#include "expect.h"
#include "fixtures.h"

int main(void)
{
    char model_path[1024], faces[1024], img_path[2][1200];
    fx_shared_path(model_path, sizeof model_path, FX_ULTRAFACE);
    fx_shared_path(faces, sizeof faces, FX_FACES);
    /* the first two photos in name order: what the image source reads as batches 0 and 1 */
    snprintf(img_path[0], sizeof img_path[0], "%s/mtcnn_test1.jpg", faces);
    snprintf(img_path[1], sizeof img_path[1], "%s/mtcnn_test2.jpg", faces);
    calq_error err = {0};
    calq_model *m = NULL;
    if (!NEED_FILE(model_path) || !NEED_FILE(img_path[0]) || !NEED_FILE(img_path[1])) return TEST_RESULT();
    if (fx_ultraface_load(model_path, &m, &err) != CALQ_OK) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    calq_image_opts io;
    fx_ultraface_image_opts(&io);

    /* calibration through the library, batch_num 2 */
    calq_config_opts co;
    calq_config_opts_init(&co);
    co.batch_num = 2;
    calq_config *cfg = NULL;
    calq_data *data = NULL;
    EXPECT(calq_config_create(m, &co, &cfg, &err) == CALQ_OK);
    EXPECT(calq_data_open_images(faces, &io, 1, &data, &err) == CALQ_OK);
    char record_path[] = "/tmp/calq_uf_record_XXXXXX";
    int fd = mkstemp(record_path);
    close(fd);
    calq_calibrate_opts opts;
    calq_calibrate_opts_init(&opts);
    opts.log = 0;
    opts.n_threads = 2;
    if (calq_calibrate(m, cfg, data, &opts, record_path, &err) != CALQ_OK) {
        fprintf(stderr, "calibrate: %s\n", err.message);
        return 1;
    }
    calq_record *rec = NULL;
    EXPECT(calq__record_read_file(record_path, &rec, &err) == CALQ_OK);
    if (!rec) return 1;
    EXPECT(calq__record_check(rec, m, model_path, record_path, &err) == CALQ_OK);
    EXPECT(rec->n_layers == cfg->n_layers);

    /* the independent side: every layer's input over both photos, through a plain session */
    fx_gather gc = {calloc((size_t)rec->n_layers, sizeof(fx_gathered)), 0};
    const char **names = calloc((size_t)rec->n_layers, sizeof *names);
    int *tensor_of = calloc((size_t)rec->n_layers, sizeof(int));
    for (int i = 0; i < rec->n_layers; i++) {
        int ni = calq__model_find_node(m, rec->layers[i].name);
        EXPECT(ni >= 0);
        const char *t = calq_model_node_input(m, ni, 0);
        int k = 0;
        while (k < gc.n && strcmp(gc.t[k].name, t) != 0) k++;
        if (k == gc.n) {
            gc.t[gc.n].name = t;
            names[gc.n++] = t;
        }
        tensor_of[i] = k;
    }
    calq_session *s = NULL;
    EXPECT(calq_session_create(m, NULL, &s, &err) == CALQ_OK);
    EXPECT(calq_session_set_observer(s, fx_gather_observer, &gc, names, gc.n, &err) == CALQ_OK);
    for (int b = 0; b < 2; b++) {
        calq_tensor x;
        EXPECT(calq_image_load(img_path[b], &io, &x, &err) == CALQ_OK);
        EXPECT(calq_session_run(s, &x, 1, &err) == CALQ_OK);
        calq_tensor_free_data(&x);
    }
    calq_session_free(s);

    /* a memory bound the model's activations (4.9 MB at 320x240) exceed: planning fails with
     * the size, before anything is allocated; the bound above it runs */
    {
        calq_session_opts lim = {.n_threads = 1, .max_arena_bytes = 1 << 20};
        calq_tensor x;
        EXPECT(calq_image_load(img_path[0], &io, &x, &err) == CALQ_OK);
        EXPECT(calq_session_create(m, &lim, &s, &err) == CALQ_OK);
        memset(&err, 0, sizeof err);
        EXPECT(calq_session_run(s, &x, 1, &err) == CALQ_ERR_OUT_OF_MEMORY);
        EXPECT(strstr(err.message, "above the session's limit of 1048576 bytes") != NULL);
        calq_session_free(s);
        lim.max_arena_bytes = 64u << 20;
        EXPECT(calq_session_create(m, &lim, &s, &err) == CALQ_OK);
        EXPECT(calq_session_run(s, &x, 1, &err) == CALQ_OK);
        calq_session_free(s);
        calq_tensor_free_data(&x);
    }

    /* the folded weights, as AMCT folds before ARQ (§8.3) */
    calq_graph *g = NULL;
    int n_folded = 0;
    EXPECT(calq__graph_clone(m->g, &g, &err) == CALQ_OK);
    EXPECT(calq__pass_fold_conv_affine(g, NULL, 0, &n_folded, &err) == CALQ_OK);

    int n_equal = 0;
    for (int i = 0; i < rec->n_layers; i++) {
        const calq_record_layer *l = &rec->layers[i];
        const fx_gathered *a = &gc.t[tensor_of[i]];
        calq_ifmr_opts o;
        calq_ifmr_opts_init(&o);
        calq_ifmr_result r;
        if (calq_ifmr(a->x, a->n, &o, l->name, &r, &err) != CALQ_OK) {
            fprintf(stderr, "%s: %s\n", l->name, err.message);
            failures++;
            continue;
        }
        bool same = memcmp(&r.scale, &l->scale_d, sizeof(float)) == 0 && r.offset == l->offset_d;
        if (!same)
            fprintf(stderr, "%s: record scale_d %.9g offset_d %lld, whole-buffer IFMR %.9g %d\n", l->name,
                    (double)l->scale_d, (long long)l->offset_d, (double)r.scale, r.offset);
        EXPECT(same);
        /* ARQ on the folded weight */
        const calq_node *n = NULL;
        for (int k = 0; k < g->n_nodes && !n; k++)
            if (strcmp(g->nodes[k].name, l->name) == 0) n = &g->nodes[k];
        EXPECT(n != NULL);
        if (!n) continue;
        const calq_tensor *w = g->values[n->inputs[1]].constant;
        calq_weight_layout layout = strcmp(n->op_type, "Conv") == 0 ? CALQ_WEIGHTS_CONV : CALQ_WEIGHTS_MATRIX;
        calq_arq_opts ao;
        calq_arq_opts_init(&ao);
        ao.channel_wise = layout == CALQ_WEIGHTS_CONV;
        int group = (int)calq__attr_int(n, "group", 1);
        int64_t ns = calq_arq_num_scales(w, layout, group, &ao);
        EXPECT(ns == l->n_scale_w);
        float *sw = malloc((size_t)(ns > 0 ? ns : 1) * sizeof(float));
        int *ow = malloc((size_t)(ns > 0 ? ns : 1) * sizeof(int));
        EXPECT(calq_arq_quantize(w, layout, group, &ao, l->name, sw, ow, NULL, NULL, &err) == CALQ_OK);
        bool wsame = ns == l->n_scale_w && memcmp(sw, l->scale_w, (size_t)ns * sizeof(float)) == 0;
        EXPECT(wsame);
        n_equal += same && wsame;
        free(sw);
        free(ow);
    }
    printf("UltraFace slim-320: %d of %d layers equal the whole-buffer IFMR and ARQ on folded weights bit for bit\n",
           n_equal, rec->n_layers);

    fx_gather_free(&gc);
    free(names);
    free(tensor_of);
    calq__graph_free(g);
    calq__record_free(rec);
    unlink(record_path);
    calq_data_free(data);
    calq_config_free(cfg);
    calq_model_free(m);
    if (failures) fprintf(stderr, "%d failure(s)\n", failures);
    return TEST_RESULT();
}
