/* frontend/onnx_write.h — the one ONNX writer: protobuf messages built in an
 * arena, then packed to bytes.
 *
 * Every ONNX file roamc writes is made here: the training step of --train
 * (train/train_emit.c) and the edited steps of the editor (edit.h).  A
 * writer builds a new Onnx__ModelProto that shares the unchanged parts of
 * an unpacked one (nodes, initializers, metadata) by pointer and holds the
 * new parts in an ow_arena; it packs the model with ow_pack, then frees the
 * arena (never the shared parts, which their unpacked model owns).
 *
 * Internal to frontend/ (its users never see protobuf types).  No function
 * fails: memory comes from base.h's x* allocators.
 */
#ifndef ROAMC_FRONTEND_ONNX_WRITE_H
#define ROAMC_FRONTEND_ONNX_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "onnx.pb-c.h"

/* Everything a model being written owns, freed together.  Zero-initialize. */
typedef struct ow_arena {
    void **p;
    size_t n, cap;
} ow_arena;

/* size zeroed bytes that live until ow_arena_free (size 0 is fine). */
void *ow_alloc(ow_arena *a, size_t size);
/* A copy of s in the arena. */
char *ow_strdup(ow_arena *a, const char *s);
/* Frees every block of the arena; *a is empty again. */
void ow_arena_free(ow_arena *a);

/* A tensor value_info: name (borrowed: it must outlive the packing), element
 * type, rank static dims (rank 0: a scalar). */
Onnx__ValueInfoProto *ow_value_info(ow_arena *a, const char *name, int32_t elem, int rank,
                                    const int64_t *dims);

/* Attributes; name and s are borrowed, ints copied into the arena. */
Onnx__AttributeProto *ow_attr_int(ow_arena *a, const char *name, int64_t v);
Onnx__AttributeProto *ow_attr_ints(ow_arena *a, const char *name, const int64_t *v, size_t n);
Onnx__AttributeProto *ow_attr_float(ow_arena *a, const char *name, float v);
Onnx__AttributeProto *ow_attr_string(ow_arena *a, const char *name, const char *s);

/* The parts of a new node; every pointer is borrowed (arrays and strings must
 * outlive the packing).  domain "" or NULL: the standard domain. */
typedef struct ow_node_parts {
    const char *name, *domain, *op_type;
    char **inputs; /* "" for an omitted optional input */
    size_t n_inputs;
    char **outputs;
    size_t n_outputs;
    Onnx__AttributeProto **attrs;
    size_t n_attrs;
} ow_node_parts;

/* A new node made of p's parts. */
Onnx__NodeProto *ow_node(ow_arena *a, const ow_node_parts *p);

/* A metadata_props entry; key and value are copied into the arena. */
Onnx__StringStringEntryProto *ow_meta_entry(ow_arena *a, const char *key, const char *value);

/* Packs m into *bytes (malloc'd, *len bytes; the caller frees it). */
void ow_pack(const Onnx__ModelProto *m, uint8_t **bytes, size_t *len);

#endif
