/* calq's graph IR: values (tensor edges), nodes, attributes. Frontends build it; passes and
 * the executor read it. Everything in a graph is owned by the graph and released by
 * calq__graph_free(). */
#ifndef CALQ_GRAPH_GRAPH_H
#define CALQ_GRAPH_GRAPH_H

#include <stdbool.h>

#include "calq.h"

typedef enum calq_attr_type {
    CALQ_ATTR_INT,
    CALQ_ATTR_FLOAT,
    CALQ_ATTR_STRING,
    CALQ_ATTR_INTS,
    CALQ_ATTR_FLOATS,
    CALQ_ATTR_STRINGS,
    CALQ_ATTR_TENSOR,
    CALQ_ATTR_GRAPH, /* a subgraph (If branches, Loop / Scan bodies) */
    CALQ_ATTR_OTHER  /* sparse tensors, type protos, lists of graphs: kept so messages can name it */
} calq_attr_type;

struct calq_graph;

typedef struct calq_attr {
    char *name;
    calq_attr_type type;
    int64_t i;
    float f;
    char *s;
    int n; /* element count for INTS / FLOATS / STRINGS */
    int64_t *ints;
    float *floats;
    char **strings;
    calq_tensor *t;       /* owned */
    struct calq_graph *g; /* owned (CALQ_ATTR_GRAPH). Its user inputs are the subgraph's own formal
                             inputs followed by the outer-scope values it reads, which the node
                             lists after its own inputs, in the same order (see n_formal) */
} calq_attr;

typedef struct calq_value {
    char *name;
    calq_dtype dtype;            /* UNDEFINED until known */
    int ndim;                    /* -1: rank unknown */
    int64_t dims[CALQ_MAX_DIMS]; /* -1: unknown dim */
    calq_tensor *constant;       /* initializer / Constant data, or NULL; owned unless constant_shared */
    bool constant_shared;        /* a clone's view of another graph's constant: never freed here */
    bool folded;                 /* a constant calq__pass_const_weights computed from the file's: no
                                    tensor of the file holds it, so a writer adds it where it is read */
    int producer;                /* node index, or -1 (graph input / constant) */
    bool is_input;               /* a graph input the user feeds */
    bool is_output;
} calq_value;

typedef struct calq_node {
    char *name; /* never NULL: frontends invent "<op_type>_<index>" for unnamed nodes */
    char *op_type;
    char *domain; /* "" for the default ONNX domain */
    int n_inputs, n_outputs;
    int *inputs;  /* value indices; -1 for an omitted optional input */
    int *outputs; /* value indices; -1 for an omitted optional output */
    int n_attrs;
    calq_attr *attrs;
    int opset;     /* opset version of the node's domain */
    int n_formal;  /* inputs the operator defines; the rest (n_inputs - n_formal) are the outer-scope
                      values its subgraphs read (0 extra for nodes without subgraphs) */
    int src_index; /* index of the node in the source model (for save), -1 if synthetic */
} calq_node;

typedef struct calq_graph {
    int n_values, cap_values;
    calq_value *values;
    int n_nodes, cap_nodes;
    calq_node *nodes;
    int n_inputs;        /* user-fed inputs, in model order */
    int n_formal_inputs; /* subgraphs: how many of the inputs the body declares; the others are
                            values of enclosing graphs it reads (fed by the node holding it) */
    int *inputs;
    int n_outputs;
    int *outputs;
    int opset;           /* default-domain opset */
    bool any_input_dims; /* the inputs take any dims of their declared rank (a Caffe net reshapes
                            itself to its data); set by the frontend, copied by clone and splice */
    /* name -> value index hash */
    int *hash;
    int hash_cap;
} calq_graph;

calq_graph *calq__graph_new(void);
void calq__graph_free(calq_graph *g);

/* Value index for `name`, or -1. */
int calq__graph_find(const calq_graph *g, const char *name);
/* A calq_name_taken_fn (base/unique_name.h) for g's value names (ctx: the const calq_graph). */
bool calq__graph_name_taken(const void *g, const char *name);
/* A calq_name_taken_fn for g's node names (ctx: the const calq_graph): a scan of the nodes, for
 * the few nodes a pass adds (the IR keeps no node-name index). */
bool calq__graph_node_name_taken(const void *g, const char *name);
/* A value name g does not use: "<base><suffix>", else "<base><suffix><sep><k>" for k = first, ...
 * (calq__unique_name). malloc'd, the caller frees it; NULL on out of memory. */
char *calq__graph_unique_name(const calq_graph *g, const char *base, const char *suffix, const char *sep, int first);
/* Value index for `name`, creating an unknown-shape value if needed; -1 on OOM. */
int calq__graph_value(calq_graph *g, const char *name);
/* Appends a node (strings copied; inputs/outputs copied). Returns index or -1 on OOM. */
int calq__graph_add_node(calq_graph *g, const char *name, const char *op_type, const char *domain, const int *inputs,
                         int n_inputs, const int *outputs, int n_outputs);
/* Adds an attribute slot to node `ni` and returns it (zeroed except name), or NULL on OOM. */
calq_attr *calq__node_add_attr(calq_graph *g, int ni, const char *name, calq_attr_type type);

/* Frees what node n owns (not the node slot itself). */
void calq__node_release(calq_node *n);

/* Orders nodes topologically (stable: keeps the model's order where it is valid) and sets
 * producers. Fails on a cycle or on a value produced twice, naming it. */
calq_status calq__graph_toposort(calq_graph *g, calq_error *err);

/* Attribute lookup on a node; NULL when absent. */
const calq_attr *calq__attr(const calq_node *n, const char *name);
int64_t calq__attr_int(const calq_node *n, const char *name, int64_t dflt);
float calq__attr_float(const calq_node *n, const char *name, float dflt);
const char *calq__attr_str(const calq_node *n, const char *name, const char *dflt);
/* INTS attribute: returns count (or -1 when absent) and sets *vals (owned by the node). */
int calq__attr_ints(const calq_node *n, const char *name, const int64_t **vals);
int calq__attr_floats(const calq_node *n, const char *name, const float **vals);

#endif
