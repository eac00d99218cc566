# input: onnx
# An ONNX model (6 MB) where 150,000 Relu nodes read graph input 'w' and
# then aten add_ writes 'w' in place.  graph_build walked the list of readers
# since the last write once per read: 150,000^2 / 2 steps, about 40 s
# before roamc could start planning.  It must load in well under a second.
function vlen(n) { return n < 128 ? 1 : n < 16384 ? 2 : n < 2097152 ? 3 : 4 }
function varint(n,   s) { s = ""; while (n >= 128) { s = s sprintf("%c", 128 + n % 128); n = int(n / 128) } return s sprintf("%c", n) }
function fld(num, payload) { return sprintf("%c", num * 8 + 2) varint(length(payload)) payload }
# ValueInfoProto: name, FLOAT tensor of shape [4]
function vi(name) { return fld(1, name) fld(2, fld(1, sprintf("%c%c", 8, 1) fld(2, fld(1, sprintf("%c%c", 8, 4))))) }
function node(input, output, op, domain,   s) { s = fld(1, input) fld(2, output) fld(4, op); return domain == "" ? s : s fld(7, domain) }
BEGIN {
    N = 150000
    last = fld(1, node("w", "w1", "add_", "org.pytorch.aten"))
    tail = fld(2, "g") fld(11, vi("w")) fld(12, vi("w1"))
    total = length(last) + length(tail)
    for (i = 0; i < N; i++) total += length(fld(1, node("w", "r" i, "Relu", ""))) + length(fld(13, vi("r" i)))
    printf "%c%c%c%s", 8, 8, 58, varint(total)   # ir_version 8, graph (7)
    for (i = 0; i < N; i++) printf "%s", fld(1, node("w", "r" i, "Relu", ""))
    printf "%s%s", last, tail
    for (i = 0; i < N; i++) printf "%s", fld(13, vi("r" i))
}
