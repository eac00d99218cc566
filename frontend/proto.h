/* frontend-internal: the protobuf-level helpers that train/ and the editor
 * (edit.c) share with the loader.  Not part of frontend.h, whose users never see protobuf types. */
#ifndef ROAMC_FRONTEND_PROTO_H
#define ROAMC_FRONTEND_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "onnx.pb-c.h"

/* Unpacks a ModelProto from bytes the way fe_load_bytes does: tensor
 * payloads above 64 KiB (weights) are dropped before unpacking, so the
 * initializers keep their dims and only small constants keep their data.
 * Returns NULL when the bytes nest deeper than the loader allows, are not
 * protobuf, or memory runs out.  Free with onnx__model_proto__free_unpacked. */
Onnx__ModelProto *fe_unpack_model(const uint8_t *bytes, size_t len);

/* What fe_unpack_model_counted dropped: n payloads, the largest of them
 * largest bytes (0 and 0: every tensor kept its data). */
typedef struct fe_unpack_drops {
    size_t n;
    uint64_t largest;
} fe_unpack_drops;

/* fe_unpack_model, and *drops (NULL: not wanted) says which payloads were
 * dropped: a caller that writes the model back (the editor, edit.h) must
 * not write it without them. */
Onnx__ModelProto *fe_unpack_model_counted(const uint8_t *bytes, size_t len, fe_unpack_drops *drops);

#endif
