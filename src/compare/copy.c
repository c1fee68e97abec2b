/* A copy of one quantized layer of Q inside a float graph (compare.h, calq__cmp_copy_layer):
 * what `calq compare --isolated` runs next to each float layer and what --sensitivity puts in
 * place of one float layer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/unique_name.h"
#include "compare/compare.h"
#include "graph/splice.h"

static int oom(calq_error *err)
{
    calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "compare: out of memory");
    return -1;
}

int calq__cmp_new_value(calq_graph *g, const char *layer, const char *what, calq_tensor *t, bool own, calq_error *err)
{
    char *stem = calq__strdup_printf("calq.iso/%s/%s", layer, what);
    char *name = stem ? calq__graph_unique_name(g, stem, "", "_", 2) : NULL;
    free(stem);
    if (!name && t && own) {
        calq_tensor_free_data(t);
        free(t);
    }
    int v = name ? calq__graph_new_value(g, name, t, own, err) : oom(err);
    free(name);
    return v;
}

/* g's value standing for Q's value qv: made on first use (constants are viewed: the quantized
 * model outlives g). */
static int mapped(calq_graph *g, const calq_graph *q, const char *layer, int *qmap, int qv, calq_error *err)
{
    if (qv < 0) return -1;
    if (qmap[qv] >= 0) return qmap[qv];
    const calq_value *v = &q->values[qv];
    qmap[qv] = calq__cmp_new_value(g, layer, v->name, v->constant, false, err);
    return qmap[qv];
}

int calq__cmp_copy_layer(calq_graph *g, const calq_graph *q, const calq__cmp_match *m, const char *layer, int *qmap,
                         calq_error *err)
{
    for (int v = 0; v < q->n_values; v++) qmap[v] = -1;
    if (m->stop_int8) { /* QuantizeLinear(float input) stands for the previous QLinear layer's int8 output */
        int in[3] = {m->f_in, mapped(g, q, layer, qmap, m->stop_scale, err),
                     mapped(g, q, layer, qmap, m->stop_zp, err)};
        int o = in[1] < 0 || in[2] < 0 ? -1 : calq__cmp_new_value(g, layer, "input_quantized", NULL, false, err);
        if (o < 0 || calq__graph_new_node(g, g->values[o].name, "QuantizeLinear", in, 3, &o, 1, err) < 0) return -1;
        qmap[m->q_stop] = o;
    } else {
        qmap[m->q_stop] = m->f_in;
    }
    if (m->q_stop2 >= 0) qmap[m->q_stop2] = m->f_in2;
    for (int k = 0; k < m->n_chain; k++) {
        const calq_node *n = &q->nodes[m->chain[k]];
        int *in = malloc(sizeof(int) * (size_t)(n->n_inputs + 1)),
            *out = malloc(sizeof(int) * (size_t)(n->n_outputs + 1));
        if (!in || !out) {
            free(in);
            free(out);
            calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "compare: out of memory");
            return -1;
        }
        bool ok = true;
        for (int j = 0; j < n->n_inputs && ok; j++)
            ok = n->inputs[j] < 0 || (in[j] = mapped(g, q, layer, qmap, n->inputs[j], err)) >= 0;
        for (int j = 0; j < n->n_inputs; j++)
            if (n->inputs[j] < 0) in[j] = -1;
        for (int j = 0; j < n->n_outputs && ok; j++) {
            out[j] = -1;
            if (n->outputs[j] >= 0) ok = (out[j] = mapped(g, q, layer, qmap, n->outputs[j], err)) >= 0;
        }
        char *name = ok ? calq__strdup_printf("calq.iso/%s/%s", layer, n->name) : NULL;
        if (ok && !name) oom(err);
        ok = ok && name && calq__graph_copy_node(g, n, name, in, out, err) >= 0;
        free(name);
        free(in);
        free(out);
        if (!ok) return -1;
    }
    return qmap[m->q_out];
}
