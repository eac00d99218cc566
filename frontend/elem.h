/* frontend/elem.h — ONNX element types: their size and their name.
 *
 * Below both the loader (frontend.c) and shape inference (infer/): each
 * sizes values by these, so they live in a file that both include and
 * neither owns (includes then run one way: frontend.c -> infer/ -> elem.h).
 * frontend.h includes it: its users see these as part of frontend.h.
 */
#ifndef ROAMC_FRONTEND_ELEM_H
#define ROAMC_FRONTEND_ELEM_H

#include <stddef.h>
#include <stdint.h>

/* The name of an element type as numpy spells it ("float32", "int64"), or
 * "type<N>" for unknown numbers (written into buf). */
const char *fe_elem_name(int32_t elem_type, char *buf, size_t len);

/* Bytes of one element of an ONNX element type, in bits (4 for INT4/UINT4/
 * FLOAT4E2M1), or 0 for STRING and unknown types. */
unsigned fe_elem_bits(int32_t elem_type);

#endif
