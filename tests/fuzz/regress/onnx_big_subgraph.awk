# input: onnx
# An ONNX model (3 MB) with one If node whose then_branch chains 120,000
# Identity nodes (the else_branch is one Identity).  The frontend kept the names a subgraph defines and reads
# in lists searched linearly: 120,000^2 steps, about 80 s before roamc
# could start planning.  It must load in well under a second.
function vlen(n) { return n < 128 ? 1 : n < 16384 ? 2 : n < 2097152 ? 3 : 4 }
function varint(n,   s) { s = ""; while (n >= 128) { s = s sprintf("%c", 128 + n % 128); n = int(n / 128) } return s sprintf("%c", n) }
function fld(num, payload) { return sprintf("%c", num * 8 + 2) varint(length(payload)) payload }
function hdr(num, len) { return sprintf("%c", num * 8 + 2) varint(len) }
# ValueInfoProto: name, FLOAT tensor of shape [4] (elem BOOL scalar when bool)
function vi(name) { return fld(1, name) fld(2, fld(1, sprintf("%c%c", 8, 1) fld(2, fld(1, sprintf("%c%c", 8, 4))))) }
function vib(name) { return fld(1, name) fld(2, fld(1, sprintf("%c%c", 8, 9) fld(2, ""))) }
function node(input, output, op) { return fld(1, input) fld(2, output) fld(4, op) }
BEGIN {
    N = 120000
    # the subgraph: N Identity nodes s0 -> s1 -> ... -> sN, output sN
    body_tail = fld(2, "b") fld(12, vi("s" N))
    body = length(body_tail)
    for (i = 0; i < N; i++) body += length(fld(1, node("s" i, "s" (i + 1), "Identity")))
    # AttributeProto: name then_branch, type GRAPH (20: 5), g (6)
    attr_pre = fld(1, "then_branch") sprintf("%c%c", 160, 1) sprintf("%c", 5)
    attr = length(attr_pre) + length(hdr(6, body)) + body
    # NodeProto If: input c, output y, op If, attribute (5)
    node_pre = fld(1, "c") fld(2, "y") fld(4, "If")
    else_attr = fld(5, fld(1, "else_branch") sprintf("%c%c", 160, 1) sprintf("%c", 5) fld(6, fld(1, node("s0", "e", "Identity")) fld(2, "eb") fld(12, vi("e"))))
    nd = length(node_pre) + length(hdr(5, attr)) + attr + length(else_attr)
    g_tail = fld(2, "g") fld(11, vib("c")) fld(11, vi("s0")) fld(12, vi("y"))
    g = length(hdr(1, nd)) + nd + length(g_tail)
    printf "%c%c%c%s", 8, 8, 58, varint(g)   # ir_version 8, graph (7)
    printf "%s%s%s%s%s", hdr(1, nd), node_pre, hdr(5, attr), attr_pre, hdr(6, body)
    for (i = 0; i < N; i++) printf "%s", fld(1, node("s" i, "s" (i + 1), "Identity"))
    printf "%s%s%s", body_tail, else_attr, g_tail
}
