#include "graph/readers.h"

#include <stdlib.h>
#include <string.h>

bool calq__readers_build(const calq_graph *g, calq_readers *r)
{
    memset(r, 0, sizeof *r);
    size_t total = 0;
    for (int i = 0; i < g->n_nodes; i++) total += (size_t)g->nodes[i].n_inputs;
    r->start = calloc((size_t)g->n_values + 2, sizeof *r->start);
    r->node = malloc((total + 1) * sizeof *r->node);
    r->input = malloc((total + 1) * sizeof *r->input);
    int *fill = calloc((size_t)g->n_values + 1, sizeof *fill);
    if (!r->start || !r->node || !r->input || !fill) {
        free(fill);
        calq__readers_free(r);
        return false;
    }
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_inputs; k++)
            if (g->nodes[i].inputs[k] >= 0) r->start[g->nodes[i].inputs[k] + 1]++;
    for (int v = 0; v < g->n_values; v++) r->start[v + 1] += r->start[v];
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_inputs; k++) {
            int v = g->nodes[i].inputs[k];
            if (v < 0) continue;
            int at = r->start[v] + fill[v]++;
            r->node[at] = i;
            r->input[at] = k;
        }
    free(fill);
    return true;
}

void calq__readers_free(calq_readers *r)
{
    free(r->start);
    free(r->node);
    free(r->input);
    memset(r, 0, sizeof *r);
}
