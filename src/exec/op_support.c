/* Which operators of a graph the executor cannot run: one message for all of them, so a model
 * with unsupported operators fails at load listing every type and its nodes (issue 2), instead
 * of failing at the first one when it runs. The load in src/api calls this after the frontend
 * built the graph, so the frontend never sees the registry. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/op.h"
#include "exec/session.h"

/* Every node of g and of its subgraphs, depth first. */
static int collect_nodes(const calq_graph *g, const calq_node **out, int n, int cap)
{
    for (int i = 0; i < g->n_nodes; i++) {
        if (out && n < cap) out[n] = &g->nodes[i];
        n++;
        for (int a = 0; a < g->nodes[i].n_attrs; a++)
            if (g->nodes[i].attrs[a].g) n = collect_nodes(g->nodes[i].attrs[a].g, out, n, cap);
    }
    return n;
}

calq_status calq__graph_check_ops(const calq_graph *g, calq_error *err)
{
    char msg[CALQ_ERROR_MESSAGE_MAX];
    size_t at = 0;
    int n_types = 0, nn = collect_nodes(g, NULL, 0, 0);
    const calq_node **nodes = malloc(sizeof(calq_node *) * ((size_t)nn + 1));
    char *seen = calloc((size_t)nn + 1, 1);
    if (!seen || !nodes) {
        free(seen);
        free(nodes);
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    }
    collect_nodes(g, nodes, 0, nn);
    for (int i = 0; i < nn; i++) {
        if (seen[i] || calq__op_of(nodes[i])) continue; /* calq__op_of: internal domain too */
        const char *dom = nodes[i]->domain;
        if (at < sizeof msg)
            at += (size_t)snprintf(msg + at, sizeof msg - at, "%s  %s%s%s (nodes:", n_types ? "\n" : "",
                                   dom[0] ? dom : "", dom[0] ? "::" : "", nodes[i]->op_type);
        int listed = 0;
        for (int j = i; j < nn; j++) {
            if (strcmp(nodes[j]->op_type, nodes[i]->op_type) != 0 || strcmp(nodes[j]->domain, dom) != 0) continue;
            seen[j] = 1;
            if (listed < 8 && at < sizeof msg)
                at += (size_t)snprintf(msg + at, sizeof msg - at, " %s", nodes[j]->name);
            else if (listed == 8 && at < sizeof msg)
                at += (size_t)snprintf(msg + at, sizeof msg - at, " ...");
            listed++;
        }
        if (at < sizeof msg) at += (size_t)snprintf(msg + at, sizeof msg - at, ")");
        n_types++;
    }
    free(seen);
    free(nodes);
    if (!n_types) return CALQ_OK;
    return calq__fail(err, CALQ_ERR_UNSUPPORTED, NULL,
                      "the model uses %d operator type%s calq does not implement:\n%s\nSee docs/operators.md for the "
                      "supported set.",
                      n_types, n_types == 1 ? "" : "s", msg);
}
