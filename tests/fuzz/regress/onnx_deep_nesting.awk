# input: onnx
# An ONNX ModelProto (800 KB) whose graph.value_info[0].type nests
# TypeProto.sequence_type.elem_type 100,000 times: 200,000 nested messages.
# roamc must refuse it (more than 100 deep) before protobuf-c recurses.
function vlen(n) { return n < 128 ? 1 : n < 16384 ? 2 : n < 2097152 ? 3 : 4 }
function varint(n) { while (n >= 128) { printf "%c", 128 + n % 128; n = int(n / 128) } printf "%c", n }
BEGIN {
    D = 100000
    # innermost TypeProto: tensor_type { elem_type: 1, shape { dim { dim_value: 4 } } }
    inner = 10
    # level i (from the inside): Sequence { elem_type: T } = 0a len(T) T, then TypeProto { sequence_type: S } = 22 len(S) S
    t = inner
    for (i = 1; i <= D; i++) {
        s = 1 + vlen(t) + t; seq[i] = t
        t = 1 + vlen(s) + s; typ[i] = s
    }
    vi = 1 + vlen(t) + t + 3          # ValueInfoProto { name: "z" (0a 01 7a), type: T }
    g = 1 + vlen(vi) + vi             # GraphProto { value_info(13): VI }
    printf "%c%c", 8, 8               # ir_version: 8
    printf "%c", 58; varint(g)        # graph (7)
    printf "%c", 106; varint(vi)      # value_info (13)
    printf "%c%c%c", 10, 1, 122       # name: "z"
    printf "%c", 18; varint(t)        # type (2)
    for (i = D; i >= 1; i--) {
        printf "%c", 34; varint(typ[i])   # sequence_type (4)
        printf "%c", 10; varint(seq[i])   # elem_type (1)
    }
    printf "%c%c%c%c%c%c%c%c%c%c", 10, 8, 8, 1, 18, 4, 10, 2, 8, 4
}
