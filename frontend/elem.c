/* ONNX element types: their sizes and names (elem.h). */
#include "elem.h"

#include <stdio.h>

#include "onnx.pb-c.h"

unsigned fe_elem_bits(int32_t elem_type) {
    switch (elem_type) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: return 32;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8: return 8;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8: return 8;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16: return 16;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16: return 16;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: return 32;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: return 64;
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: return 8;
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16: return 16;
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: return 64;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32: return 32;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64: return 64;
    case ONNX__TENSOR_PROTO__DATA_TYPE__COMPLEX64: return 64;
    case ONNX__TENSOR_PROTO__DATA_TYPE__COMPLEX128: return 128;
    case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16: return 16;
    /* Types newer than some onnx.proto versions: by number, so the loader
     * builds against any libonnx-dev. */
    case 17:
    case 18:
    case 19:
    case 20: return 8; /* FLOAT8 variants */
    case 21:
    case 22:
    case 23: return 4; /* UINT4, INT4, FLOAT4E2M1 */
    case 24: return 8; /* FLOAT8E8M0 */
    default: return 0; /* STRING (8), UNDEFINED, unknown */
    }
}

const char *fe_elem_name(int32_t e, char *buf, size_t len) {
    static const char *const names[] = {
        "undefined",      "float32",  "uint8",        "int8",           "uint16",
        "int16",          "int32",    "int64",        "string",         "bool",
        "float16",        "float64",  "uint32",       "uint64",         "complex64",
        "complex128",     "bfloat16", "float8e4m3fn", "float8e4m3fnuz", "float8e5m2",
        "float8e5m2fnuz", "uint4",    "int4",         "float4e2m1",     "float8e8m0"};
    if (e >= 0 && (size_t)e < sizeof names / sizeof *names) return names[e];
    snprintf(buf, len, "type%d", (int)e);
    return buf;
}
