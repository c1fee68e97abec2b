/* A copy of one quantized layer of Q inside a float graph (compare.h, calq__cmp_copy_layer):
 * what `calq compare --isolated` runs next to each float layer and what --sensitivity puts in
 * place of one float layer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "compare/compare.h"
#include "graph/splice.h"

/* g's value standing for Q's value qv: made on first use (constants are viewed: the quantized
 * model outlives g). */
static int mapped(calq_graph *g, const calq_graph *q, const char *layer, int *qmap, int qv, calq_error *err)
{
    if (qv < 0) return -1;
    if (qmap[qv] >= 0) return qmap[qv];
    const calq_value *v = &q->values[qv];
    char name[2 * CALQ_ERROR_NAME_MAX + 32];
    snprintf(name, sizeof name, "calq.iso/%s/%s", layer, v->name);
    qmap[qv] = calq__graph_new_value(g, name, v->constant, false, err);
    return qmap[qv];
}

int calq__cmp_copy_layer(calq_graph *g, const calq_graph *q, const calq__cmp_match *m, const char *layer, int *qmap,
                         calq_error *err)
{
    for (int v = 0; v < q->n_values; v++) qmap[v] = -1;
    if (m->stop_int8) { /* QuantizeLinear(float input) stands for the previous QLinear layer's int8 output */
        int in[3] = {m->f_in, mapped(g, q, layer, qmap, m->stop_scale, err),
                     mapped(g, q, layer, qmap, m->stop_zp, err)};
        char name[CALQ_ERROR_NAME_MAX + 32];
        snprintf(name, sizeof name, "calq.iso/%s/input_quantized", layer);
        int o = in[1] < 0 || in[2] < 0 ? -1 : calq__graph_new_value(g, name, NULL, false, err);
        if (o < 0 || calq__graph_new_node(g, name, "QuantizeLinear", in, 3, &o, 1, err) < 0) return -1;
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
        char name[2 * CALQ_ERROR_NAME_MAX + 32];
        snprintf(name, sizeof name, "calq.iso/%s/%s", layer, n->name);
        ok = ok && calq__graph_copy_node(g, n, name, in, out, err) >= 0;
        free(in);
        free(out);
        if (!ok) return -1;
    }
    return qmap[m->q_out];
}
