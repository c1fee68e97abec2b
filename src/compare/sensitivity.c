/* calq_compare_opts.sensitivity: what each quantized layer alone costs the model outputs.
 *
 * The isolated figure (compare.c) is a layer's own error, measured at its output; what matters
 * to the user is what reaches the outputs, and the two can disagree by far: an early depthwise
 * layer whose per-tensor input scale crushes one channel has an isolated cosine of 0.998 and
 * takes most of a segmenter's output cosine, because the layers after it amplify that channel
 * (docs/performance.md, PAN). So for each layer: F with that one layer replaced by its quantized
 * copy (copy.c: Q's nodes of the layer, fed F's input; its readers and the graph outputs rewired
 * to the copy), run on every batch, its outputs against F's.
 *
 * Cost: one run of the model per layer and batch (plus one float run per batch). The batches'
 * inputs and F's outputs are read once and held, so memory grows with the batches compared; the
 * sums themselves are compare's streaming ones (stats.c), the same for any thread count. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/log.h"
#include "compare/compare.h"
#include "exec/session.h"
#include "graph/splice.h"

static calq_status oom(calq_error *err)
{
    return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "compare: out of memory (sensitivity)");
}

typedef struct one {
    const calq_graph *q;
    const calq__cmp_match *m;
    const char *layer;
    int *qmap;
    int copy; /* the copy's output value in the spliced graph */
} one;

/* A scalar constant "calq.iso/<layer>/<what>" of g (owned by it): -1 with err set. */
static int scalar(calq_graph *g, const char *layer, const char *what, calq_dtype dt, double v, calq_error *err)
{
    calq_tensor *t = calloc(1, sizeof *t);
    if (t) t->data = malloc(8);
    if (!t || !t->data) {
        free(t);
        oom(err);
        return -1;
    }
    t->dtype = dt;
    t->ndim = 0;
    if (dt == CALQ_DTYPE_FLOAT32)
        *(float *)t->data = (float)v;
    else if (dt == CALQ_DTYPE_UINT8)
        *(uint8_t *)t->data = (uint8_t)v;
    else
        *(int8_t *)t->data = (int8_t)v;
    return calq__cmp_new_value(g, layer, what, t, true, err);
}

/* A QOperator layer's copy ends in its int8 (uint8: the int8 scheme) output: the float readers get it dequantized with
 * the output's own factors (as compare.c reads it). Returns the float value, or -1 with err set. */
static int dequantized(calq_graph *g, const calq__cmp_match *m, const char *layer, int q, calq_error *err)
{
    int sc = scalar(g, layer, "output_scale", CALQ_DTYPE_FLOAT32, m->q_scale, err);
    int zp = sc < 0
                 ? -1
                 : scalar(g, layer, "output_zero_point", m->q_uint8 ? CALQ_DTYPE_UINT8 : CALQ_DTYPE_INT8, m->q_zp, err);
    int y = zp < 0 ? -1 : calq__cmp_new_value(g, layer, "output_dequantized", NULL, false, err);
    int in[3] = {q, sc, zp};
    if (y < 0 || calq__graph_new_node(g, g->values[y].name, "DequantizeLinear", in, 3, &y, 1, err) < 0) return -1;
    return y;
}

static calq_status after_layer(void *user, calq_graph *g, int src_node, calq_error *err)
{
    one *o = user;
    if (src_node != o->m->f_node) return CALQ_OK;
    o->copy = calq__cmp_copy_layer(g, o->q, o->m, o->layer, o->qmap, err);
    if (o->copy >= 0 && o->m->q_int8) o->copy = dequantized(g, o->m, o->layer, o->copy, err);
    return o->copy < 0 ? err->status : CALQ_OK;
}

/* F with layer m alone quantized (owner: caller, calq__graph_free). The copy's nodes read F's
 * input and constants only, so every reader of the float output can be moved onto the copy. */
static calq_status build(const calq_graph *f, one *o, calq_graph **out, calq_error *err)
{
    o->copy = -1;
    calq_graph *g = NULL;
    CALQ_TRY(calq__graph_splice(f, after_layer, o, &g, err));
    int fo = o->m->f_out, c = o->copy;
    for (int ni = 0; ni < g->n_nodes; ni++)
        for (int j = 0; j < g->nodes[ni].n_inputs; j++)
            if (g->nodes[ni].inputs[j] == fo) g->nodes[ni].inputs[j] = c;
    for (int k = 0; k < g->n_outputs; k++)
        if (g->outputs[k] == fo) {
            g->outputs[k] = c;
            g->values[c].is_output = true;
        }
    calq_status st = calq__graph_toposort(g, err);
    if (st != CALQ_OK) {
        calq__graph_free(g);
        return st;
    }
    *out = g;
    return CALQ_OK;
}

/* The batches' inputs (copies) and F's float outputs, per batch. */
typedef struct held_batches {
    int nb, n_in, n_out;
    calq_tensor *in; /* [nb * n_in], data owned */
    float **out;     /* [nb * n_out]; NULL for an output that is not float32 (not compared) */
    size_t *out_n;   /* [nb * n_out] elements (batches of several widths differ) */
} held_batches;

static void held_free(held_batches *h)
{
    for (int i = 0; h->in && i < h->nb * h->n_in; i++) free(h->in[i].data);
    for (int i = 0; h->out && i < h->nb * h->n_out; i++) free(h->out[i]);
    free(h->in);
    free(h->out);
    free(h->out_n);
}

static calq_status hold_float(const calq_graph *f, calq_data *data, calq_tensor *ins, const calq_session_opts *so,
                              held_batches *h, calq_error *err)
{
    h->in = calloc((size_t)(h->nb * h->n_in) + 1, sizeof *h->in);
    h->out = calloc((size_t)(h->nb * h->n_out) + 1, sizeof *h->out);
    h->out_n = calloc((size_t)(h->nb * h->n_out) + 1, sizeof *h->out_n);
    if (!h->in || !h->out || !h->out_n) return oom(err);
    calq_session *s = NULL;
    CALQ_TRY(calq__session_create_graph(f, so, &s, err));
    calq_status st = CALQ_OK;
    for (int b = 0; st == CALQ_OK && b < h->nb; b++) {
        st = calq_data_read_batch_resize(data, b, ins, h->n_in, err);
        for (int i = 0; st == CALQ_OK && i < h->n_in; i++) {
            calq_tensor *t = &h->in[b * h->n_in + i];
            *t = ins[i];
            size_t bytes = (size_t)calq_tensor_numel(&ins[i]) * calq_dtype_size(ins[i].dtype);
            if (!(t->data = malloc(bytes ? bytes : 1))) {
                st = oom(err);
                break;
            }
            memcpy(t->data, ins[i].data, bytes);
        }
        if (st == CALQ_OK && (st = calq_session_run(s, ins, h->n_in, err)) != CALQ_OK)
            calq__prefix(err, "compare: sensitivity: float model, batch %d", b);
        for (int i = 0; st == CALQ_OK && i < h->n_out; i++) {
            const calq_tensor *t;
            calq_session_output(s, i, &t);
            if (t->dtype != CALQ_DTYPE_FLOAT32) continue;
            size_t n = (size_t)calq_tensor_numel(t);
            h->out_n[b * h->n_out + i] = n;
            if (!(h->out[b * h->n_out + i] = malloc(n * sizeof(float) + 1))) {
                st = oom(err);
                break;
            }
            memcpy(h->out[b * h->n_out + i], t->data, n * sizeof(float));
        }
    }
    calq_session_free(s);
    return st;
}

/* Layer o->m alone quantized, on every held batch: the worst output into *l. */
static calq_status measure(const calq_graph *f, one *o, const held_batches *h, const calq_session_opts *so,
                           int n_threads, calq__cmp_acc *acc, calq_compare_layer *l, calq_error *err)
{
    calq_graph *g = NULL;
    calq_session *s = NULL;
    CALQ_TRY(build(f, o, &g, err));
    calq_status st = calq__session_create_graph(g, so, &s, err);
    memset(acc, 0, sizeof *acc * (size_t)h->n_out);
    for (int b = 0; st == CALQ_OK && b < h->nb; b++) {
        st = calq_session_run(s, &h->in[b * h->n_in], h->n_in, err);
        for (int i = 0; st == CALQ_OK && i < h->n_out; i++) {
            const float *y = h->out[b * h->n_out + i];
            const calq_tensor *t;
            calq_session_output(s, i, &t);
            size_t n = h->out_n[b * h->n_out + i];
            if (!y || t->dtype != CALQ_DTYPE_FLOAT32 || (size_t)calq_tensor_numel(t) != n) continue;
            calq__cmp_acc_add(&acc[i], y, t->data, NULL, 0.0f, 0, n, n_threads);
        }
    }
    if (st != CALQ_OK) calq__prefix(err, "compare: sensitivity of layer '%s'", o->layer);
    calq_session_free(s);
    calq__graph_free(g);
    if (st != CALQ_OK) return st;
    double worst = -1.0;
    for (int i = 0; i < h->n_out; i++) {
        if (acc[i].batches == 0) continue;
        calq_compare_stats x;
        calq__cmp_acc_stats(&acc[i], &x);
        double d = x.cosine == x.cosine ? 1.0 - x.cosine : 3.0; /* NaN (non-finite outputs): the worst */
        if (d > worst) {
            worst = d;
            l->sens = x;
            l->sens_output = i;
            l->has_sensitivity = 1;
        }
    }
    return CALQ_OK;
}

calq_status calq__cmp_sensitivity(const calq_graph *f, const calq_graph *q, const calq__cmp_match *m, int n,
                                  calq_data *data, int nb, calq_tensor *ins, int n_in, const calq_compare_opts *o,
                                  calq_compare_layer *out, calq_error *err)
{
    held_batches h = {.nb = nb, .n_in = n_in, .n_out = f->n_outputs};
    int n_threads = o->n_threads, log = o->log;
    calq_session_opts so = {.n_threads = n_threads, .max_arena_bytes = o->max_arena_bytes};
    int *qmap = malloc(sizeof(int) * ((size_t)q->n_values + 1));
    calq__cmp_acc *acc = calloc((size_t)f->n_outputs + 1, sizeof *acc);
    calq_status st = qmap && acc ? CALQ_OK : oom(err);
    if (st == CALQ_OK) st = hold_float(f, data, ins, &so, &h, err);
    int n_iso = 0, done = 0;
    for (int i = 0; i < n; i++) n_iso += m[i].iso;
    for (int i = 0; st == CALQ_OK && i < n; i++) {
        if (!m[i].iso) continue;
        one l = {q, &m[i], f->nodes[m[i].f_node].name, qmap, -1};
        st = measure(f, &l, &h, &so, n_threads, acc, &out[i], err);
        if (st == CALQ_OK && log)
            calq__log(CALQ_LOG_DEBUG, "calq: compare: sensitivity %d/%d: %s alone: output cosine %.6f", ++done, n_iso,
                      l.layer, out[i].has_sensitivity ? out[i].sens.cosine : NAN);
    }
    held_free(&h);
    free(acc);
    free(qmap);
    return st;
}
