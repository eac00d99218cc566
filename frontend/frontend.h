/* frontend/ — ONNX bytes in, a resolved model description out.
 *
 * fe_load parses an ONNX ModelProto (protobuf-c types generated at build time
 * from Debian's onnx.proto), names every value once, sizes it from its static
 * shape and element type, resolves every node input and output to a value
 * index, and decides which outputs share storage with an input (the `alias`
 * and `inplace` attributes, else the default view and in-place ops).  It
 * knows nothing of schedules or memory: graph/ builds the IR from this.
 *
 * Untrusted input: every failure returns an error message that names the
 * file and the value or node at fault; nothing here aborts on bad bytes.
 */
#ifndef ROAMC_FRONTEND_H
#define ROAMC_FRONTEND_H

#include <stddef.h>
#include <stdint.h>

enum fe_value_kind {
    FE_GRAPH_INPUT = 1u << 0,  /* listed in graph.input */
    FE_INITIALIZER = 1u << 1,  /* listed in graph.initializer */
    FE_GRAPH_OUTPUT = 1u << 2, /* listed in graph.output */
};

typedef struct fe_value {
    char *name;
    int32_t elem_type; /* onnx.TensorProto.DataType */
    uint64_t bytes;    /* product of dims x element size (packed for 4-bit types) */
    int producer;      /* index of the producing node, -1 for inputs/initializers */
    unsigned kind;     /* fe_value_kind bits */
} fe_value;

typedef struct fe_node {
    char *name; /* "" when the file gives none */
    char *op_type;
    char *domain; /* "" for the standard domain */
    int *inputs;  /* value indices; -1 for an omitted optional input */
    size_t n_inputs;
    size_t n_explicit_inputs; /* inputs[n_explicit_inputs..] are outer values read by subgraphs */
    int *outputs;             /* value indices; -1 for an omitted output */
    size_t n_outputs;
    int *alias;  /* per output: index into inputs of the value it shares storage with, or -1 */
    int inplace; /* 1: the aliased outputs are written in place; 0: pure views */
} fe_node;

typedef struct fe_model {
    char *path;
    fe_value *values;
    size_t n_values;
    fe_node *nodes; /* in file order: the program order */
    size_t n_nodes;
    int *inputs; /* graph inputs and initializers, value indices */
    size_t n_inputs;
    int *outputs; /* graph outputs, value indices */
    size_t n_outputs;
    char **meta_keys, **meta_values; /* metadata_props */
    size_t n_meta;
    int64_t ir_version;
    int64_t opset; /* version of the default domain, 0 when not imported */
} fe_model;

/* Loads path.  Returns 0 and fills *m, or -1 with *m zeroed and a message
 * "PATH: what (where)" in err.  Rejects: unreadable files, bytes that are not
 * a ModelProto (truncated, random, another message), a graph without nodes,
 * a value read but produced by nothing, a value produced twice, a value
 * without a static shape or with a non-tensor type, element types with no
 * byte size (STRING), negative dims, dim products that overflow 64 bits,
 * alias attributes that point outside the node's inputs, and protobuf messages
 * nested more than 100 deep (protobuf-c would recurse until the stack ends). */
int fe_load(const char *path, fe_model *m, char *err, size_t errlen);

/* Same as fe_load on bytes already in memory; path names them in messages. */
int fe_load_bytes(const char *path, const uint8_t *bytes, size_t len, fe_model *m,
                  char *err, size_t errlen);

void fe_free(fe_model *m);

/* Replaces each control byte of s (below 0x20, and 0x7f) by '?', in place.
 * Names in a model are arbitrary bytes; a message that quotes them goes
 * through this before it reaches a terminal, so a name cannot move the
 * cursor, clear the screen or hide the rest of the message. */
void fe_make_printable(char *s);

/* The metadata value for key, or NULL. */
const char *fe_meta(const fe_model *m, const char *key);

/* Index of the value named name, or -1.  O(n) — for tools, not hot paths. */
int fe_find_value(const fe_model *m, const char *name);

/* Bytes of one element of an ONNX element type, in bits (4 for INT4/UINT4/
 * FLOAT4E2M1), or 0 for STRING and unknown types. */
unsigned fe_elem_bits(int32_t elem_type);

#endif
