/* frontend/edit.h — a small editor of training-step ONNX files.
 *
 * Opens a step as models/export.py or `roamc --train --emit-train` write it
 * (nodes in the standard or org.pytorch.aten domain, value_info with full
 * shapes, metadata_props), lets a caller add nodes (recompute clones,
 * offload/reload pairs), rewire node inputs, declare values, graph inputs
 * and outputs and metadata, and writes the result through the one ONNX
 * writer (onnx_write.h, which --train's emission uses too).  What the
 * editor does not touch is written back as it was read: opening a file and
 * writing it with no edit keeps every node, value and attribute.
 *
 * Node indices.  A node is named by its index in graph.node as the model
 * stands now: node i of a file just opened is node i of that file, and a
 * plan names nodes by their index in graph.node of the file it plans.
 * Inserting at position p (a new node or a clone) moves every node at p or
 * after one place on; nothing else renumbers nodes.  A caller that applies
 * a plan's edits by index applies them from the highest position down, or
 * finds nodes by name (fe_edit_find_node) between edits.  graph.node order
 * is the program order roamc plans: a node must come after the producers
 * of its inputs.
 *
 * Values are named by their names.  Every new value a node makes needs a
 * value_info (fe_edit_add_value_info) unless roamc's shape inference knows
 * its operator (standard domain); fe_load reports the value otherwise.
 *
 * Weights.  Training-step files carry no weight data (parameters are graph
 * inputs).  The editor unpacks tensor payloads up to 64 KiB (small
 * constants) and refuses a file with a larger inline payload, with an error
 * that says so: writing it back would drop the weight.
 *
 * Errors: every function that can fail returns 0, or -1 with a message
 * "NAME: edit: what (where)" in err (errlen bytes; err may be NULL), and
 * then changes nothing.  Strings passed in are copied; nothing the caller
 * passes is kept.
 */
#ifndef ROAMC_FRONTEND_EDIT_H
#define ROAMC_FRONTEND_EDIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct fe_edit fe_edit;

enum fe_attr_type { FE_ATTR_INT = 1, FE_ATTR_INTS, FE_ATTR_FLOAT, FE_ATTR_STRING };

/* One attribute of a new node: name, type, and the field its type names. */
typedef struct fe_attr_spec {
    const char *name;
    int type; /* enum fe_attr_type */
    int64_t i;
    const int64_t *ints;
    size_t n_ints;
    float f;
    const char *s;
} fe_attr_spec;

/* A new node.  domain NULL or "": the standard domain (a domain the file
 * does not import yet is imported at version 1).  name NULL: "". */
typedef struct fe_node_spec {
    const char *domain, *op_type, *name;
    const char *const *inputs; /* "" for an omitted optional input */
    size_t n_inputs;
    const char *const *outputs; /* new values, none made by another node or
                                   an input/initializer */
    size_t n_outputs;
    const fe_attr_spec *attrs;
    size_t n_attrs;
} fe_node_spec;

/* A copy of node `node` inserted at `position`: same domain, op, inputs and
 * attributes, new outputs (as many as the node has; "" where the node's is
 * omitted), and one more attribute when extra.name is not NULL (a recompute
 * node: STRING "roamc_recompute" naming the forward output it recomputes). */
typedef struct fe_clone_spec {
    size_t node;
    size_t position;
    const char *name; /* NULL: the node's own name with "_recompute" added */
    const char *const *outputs;
    size_t n_outputs;
    fe_attr_spec extra;
} fe_clone_spec;

/* A tensor value: name, onnx element type, static dims (rank 0: scalar). */
typedef struct fe_value_spec {
    const char *name;
    int32_t elem_type;
    size_t rank;
    const int64_t *dims;
} fe_value_spec;

/* Node `i` as the model stands: borrowed pointers, valid until the next
 * edit of that node or fe_edit_free.  domain "" for the standard domain. */
typedef struct fe_edit_node_info {
    const char *name, *domain, *op_type;
    const char *const *inputs;
    size_t n_inputs;
    const char *const *outputs;
    size_t n_outputs;
} fe_edit_node_info;

/* Opens the ONNX file at path for editing into *e (free with fe_edit_free).
 * Returns 0, or -1 with *e NULL and a message: unreadable, not a ModelProto
 * with a graph, protobuf nested too deep, a tensor payload over 64 KiB. */
int fe_edit_open(const char *path, fe_edit **e, char *err, size_t errlen);
/* Same on bytes in memory (copied as needed); name names them in messages. */
int fe_edit_open_bytes(const char *name, const uint8_t *bytes, size_t len, fe_edit **e, char *err,
                       size_t errlen);
void fe_edit_free(fe_edit *e);

/* Nodes in graph.node now. */
size_t fe_edit_node_count(const fe_edit *e);
/* Node i into *out; false (out untouched) when i is out of range. */
bool fe_edit_node(const fe_edit *e, size_t i, fe_edit_node_info *out);
/* The index of the first node named name, or -1 (O(nodes)). */
long fe_edit_find_node(const fe_edit *e, const char *name);
/* The index of the node that makes value name, or -1 (O(nodes)). */
long fe_edit_find_producer(const fe_edit *e, const char *value);
/* Node i's STRING attribute `name` as a NUL-terminated copy the editor owns
 * (until fe_edit_free; each call makes one), or NULL when i is out of range
 * or the node has no such STRING attribute. */
const char *fe_edit_node_attr_string(fe_edit *e, size_t i, const char *name);

/* Inserts a node at position (0 .. fe_edit_node_count: the end).  Fails on
 * a position out of range, a missing op_type, no output, an empty or
 * already-made output name, an attribute with no name or an unknown type. */
int fe_edit_insert_node(fe_edit *e, size_t position, const fe_node_spec *spec, char *err,
                        size_t errlen);
/* Inserts a clone (fe_clone_spec).  Fails as fe_edit_insert_node does, and
 * when spec->node is out of range or n_outputs is not the node's count. */
int fe_edit_clone_node(fe_edit *e, const fe_clone_spec *spec, char *err, size_t errlen);
/* Node `node` reads value `value` in input slot `slot` instead of what it
 * read there.  Fails on a node or slot out of range or an empty value. */
int fe_edit_replace_input(fe_edit *e, size_t node, size_t slot, const char *value, char *err,
                          size_t errlen);
/* Removes node i (the nodes after it move one place back).  What it made
 * stays declared (value_info, graph outputs) until fe_edit_remove_value;
 * its output names may be made again.  Fails on i out of range. */
int fe_edit_remove_node(fe_edit *e, size_t i, char *err, size_t errlen);
/* Removes name from graph.input, graph.output and graph.value_info
 * (wherever it is; nothing there is fine).  A graph input removed may be
 * made again by a new node.  Never fails. */
void fe_edit_remove_value(fe_edit *e, const char *name);

/* Declares v's type and shape in graph.value_info, replacing a declaration
 * of that name there.  Fails on an empty name or a negative dim. */
int fe_edit_add_value_info(fe_edit *e, const fe_value_spec *v, char *err, size_t errlen);
/* Adds v to graph.input, or replaces the graph input of that name (same
 * position).  Fails as fe_edit_add_value_info does. */
int fe_edit_set_input(fe_edit *e, const fe_value_spec *v, char *err, size_t errlen);
/* Same for graph.output. */
int fe_edit_set_output(fe_edit *e, const fe_value_spec *v, char *err, size_t errlen);

/* The metadata_props value of key (the first entry of that key), or NULL;
 * borrowed until the key is set again or fe_edit_free. */
const char *fe_edit_meta(const fe_edit *e, const char *key);
/* Sets key to value: replaces the first entry of that key, else appends. */
void fe_edit_set_meta(fe_edit *e, const char *key, const char *value);

/* The model as ONNX bytes into *bytes (malloc'd, *len bytes; caller frees). */
void fe_edit_bytes(const fe_edit *e, uint8_t **bytes, size_t *len);
/* Writes the model to path (a temporary file beside it, then renamed over
 * it).  Returns 0, or -1 with a message naming path. */
int fe_edit_write(const fe_edit *e, const char *path, char *err, size_t errlen);

#endif
