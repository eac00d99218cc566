/* Test helper: builds small ONNX models in C (protobuf-c), so the test suite
 * makes its own inputs and needs no Python to do so.
 *
 *   tg *t = tg_new();
 *   tg_input(t, "x", "4x8");                 // float32 graph input, dims 4x8
 *   tg_node(t, "", "Relu", "x", "y");        // inputs/outputs comma-separated
 *   tg_value(t, "y", "4x8");                 // value_info
 *   tg_output(t, "y", "4x8");
 *   tg_write(t, "m.onnx");
 *   tg_free(t);
 *
 * Dims are "AxBxC" ("" for a scalar); an element type other than float32 is
 * given as a prefix "i64:4x8", "f16:2", "u4:3".
 */
#ifndef ROAMC_TESTGRAPH_H
#define ROAMC_TESTGRAPH_H

#include <stddef.h>
#include <stdint.h>

typedef struct tg tg;
typedef struct tg_node_ref tg_node_ref;

tg *tg_new(void);
void tg_free(tg *t);

void tg_input(tg *t, const char *name, const char *dims);
void tg_value(tg *t, const char *name, const char *dims);
void tg_output(tg *t, const char *name, const char *dims);
void tg_initializer(tg *t, const char *name, const char *dims);
void tg_meta(tg *t, const char *key, const char *value);

/* Adds a node; returns its index. domain "" is the standard domain, "aten"
 * stands for org.pytorch.aten. */
int tg_node(tg *t, const char *domain, const char *op_type, const char *inputs,
            const char *outputs);
/* Sets the alias (one entry per output, -1 for none) and inplace attributes
 * of node idx. */
void tg_alias(tg *t, int idx, const char *alias_csv, int inplace);

/* More attributes of node idx (alias/inplace aside; at most 8 a node): an
 * INT, an INTS given as "1,1,0,0", a GRAPH (an If branch, a Loop body: the
 * body's inputs, outputs, value_info and nodes; t takes body and frees it). */
void tg_attr_int(tg *t, int idx, const char *name, int64_t v);
void tg_attr_ints(tg *t, int idx, const char *name, const char *csv);
void tg_attr_graph(tg *t, int idx, const char *name, tg *body);

/* Serializes to path; returns 0 or -1. */
int tg_write(const tg *t, const char *path);
/* Serialized bytes (malloc'd) and their length. */
uint8_t *tg_pack(const tg *t, size_t *len);

#endif
