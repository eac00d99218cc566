"""Hand-built ONNX graphs for the shape-inference corpus (models/corpus.py).

Each builder returns a Case: the ModelProto plus what is needed to run it
(symbol bindings, value ranges of integer inputs, exact values of inputs
whose values decide sizes).  The graphs target what exporters other than
torch 1.13 write, and forms that changed between opsets: an operator that
took an attribute in one opset takes an input in a later one, and an
inference engine must read the form the file's opset says.

Graph outputs are declared with an element type and no shape, and there is
no value_info: every shape has to be inferred.
"""
import numpy as np
import onnx
from onnx import TensorProto as T, helper as oh, numpy_helper

F, I64, BOOL = T.FLOAT, T.INT64, T.BOOL


class Case:
    def __init__(self, model, dims, ranges=None, values=None, external=None, check=True):
        self.model = model          # onnx.ModelProto
        self.dims = dims            # {dim_param: value} binding every symbol
        self.ranges = ranges or {}  # {input: (low, high)} for integer inputs
        self.values = values or {}  # {input: [flat values]} fed exactly
        self.external = external    # None, or the external-data file name
        self.check = check          # onnx 1.12's checker knows the opset


def N(op, ins, outs, **attrs):
    return oh.make_node(op, ins, outs, **attrs)


def inp(name, elem, shape):
    return oh.make_tensor_value_info(name, elem, shape)


def out(name, elem):
    return oh.make_tensor_value_info(name, elem, None)  # shape left to inference


def const(name, values, dtype=np.int64):
    return numpy_helper.from_array(np.asarray(values, dtype=dtype), name)


def model(name, opset, nodes, inputs, outputs, inits=(), ir=8, functions=(), domains=()):
    g = oh.make_graph(nodes, name, inputs, outputs, list(inits))
    ops = [oh.make_opsetid("", opset)] + [oh.make_opsetid(d, v) for d, v in domains]
    return oh.make_model(g, opset_imports=ops, ir_version=ir, functions=list(functions),
                         producer_name="roamc corpus_handbuilt.py")


def branch(name, nodes, outputs):
    """A subgraph (If branch, Loop/Scan body) with no inputs of its own."""
    return oh.make_graph(nodes, name, [], outputs)


# ---------------------------------------------------------------------------

def upsample_op7():
    # Upsample-7: scales is an attribute.  IR 3, as files of that time were.
    nodes = [N("Upsample", ["x"], ["near"], mode="nearest", scales=[1.0, 1.0, 2.0, 3.0]),
             N("Upsample", ["x"], ["lin"], mode="linear", scales=[1.0, 1.0, 1.5, 1.5])]
    m = model("upsample_op7", 7, nodes, [inp("x", F, ["N", 3, "H", "W"])],
              [out("near", F), out("lin", F)], ir=3)
    return Case(m, {"N": 2, "H": 5, "W": 7})


def upsample_op9():
    # Upsample-9: scales is an input (initializer, or a Constant node).
    nodes = [N("Upsample", ["x", "s1"], ["a"], mode="nearest"),
             N("Constant", [], ["s2"], value=oh.make_tensor("v", F, [4], [1, 1, 3, 2.5])),
             N("Upsample", ["x", "s2"], ["b"], mode="nearest")]
    m = model("upsample_op9", 9, nodes, [inp("x", F, ["N", 2, "H", "W"])],
              [out("a", F), out("b", F)], [const("s1", [1, 2, 2, 2], np.float32)])
    return Case(m, {"N": 2, "H": 6, "W": 5})


def attr_forms_op9():
    # Opset 9: Slice, Pad, Squeeze, Unsqueeze, ReduceSum, Split, TopK, Clip all
    # take their parameters as attributes; Dropout-7's mask has the data type.
    nodes = [
        N("Slice", ["x"], ["s1"], starts=[1], ends=[1000], axes=[2]),
        N("Slice", ["x"], ["s2"], starts=[0, -3], ends=[2, -1], axes=[1, 2]),
        N("Pad", ["x"], ["p"], pads=[0, 1, 2, 0, 0, 3], mode="constant"),
        N("Unsqueeze", ["x"], ["u"], axes=[0, 3]),
        N("Squeeze", ["u"], ["q"], axes=[0, 3]),
        N("ReduceSum", ["x"], ["r"], axes=[1], keepdims=0),
        N("ReduceMean", ["x"], ["rm"]),
        N("Split", ["x"], ["sp1", "sp2"], axis=1, split=[1, 3]),
        N("Split", ["x"], ["h1", "h2"], axis=2),
        N("TopK", ["x"], ["tv", "ti"], k=2, axis=-1),
        N("Clip", ["x"], ["c"], min=-0.5, max=0.5),
        N("Dropout", ["x"], ["d", "dmask"], ratio=0.3),
        N("Flatten", ["x"], ["fl"], axis=2),
        N("Gather", ["x", "idx"], ["g"], axis=1),
        N("Cast", ["ti"], ["tf"], to=F),
        N("Reshape", ["x", "shp"], ["rs"]),
    ]
    outs = ["s1", "s2", "p", "q", "r", "rm", "sp1", "sp2", "h1", "h2", "tv", "c", "d", "dmask",
            "fl", "g", "tf", "rs"]
    m = model("attr_forms_op9", 9, nodes, [inp("x", F, ["N", 4, "L"])],
              [out(o, F) for o in outs] + [out("ti", I64)],
              [const("idx", [3, 0]), const("shp", [0, -1, 2])])
    return Case(m, {"N": 2, "L": 6})


def input_forms_op11():
    # Opset 11: Pad pads, Clip min/max and TopK k (since 10) are inputs;
    # Squeeze/Unsqueeze/Split/ReduceSum still attributes, now with negative axes.
    nodes = [
        N("Pad", ["x", "pads"], ["p"], mode="reflect"),
        N("Pad", ["x", "pads", "pv"], ["p2"]),
        N("Clip", ["x", "lo"], ["c1"]),
        N("Clip", ["x", "", "hi"], ["c2"]),
        N("TopK", ["x", "k"], ["tv", "ti"], axis=1, largest=0),
        N("Unsqueeze", ["x"], ["u"], axes=[-1, 1]),
        N("Squeeze", ["u"], ["q"], axes=[-1]),
        N("Split", ["x"], ["a", "b", "c"], axis=-1, split=[2, 2, 1]),
        N("ReduceSum", ["x"], ["r"], axes=[-1, 0], keepdims=1),
        N("Slice", ["x", "st", "en", "ax", "sp"], ["rev"]),
        N("Range", ["r0", "r1", "r2"], ["rg"]),
    ]
    outs = ["p", "p2", "c1", "c2", "tv", "q", "a", "b", "c", "r", "rev"]
    inits = [const("pads", [0, 0, 1, 0, 0, 2]), const("pv", 1.5, np.float32),
             const("lo", -0.1, np.float32), const("hi", 0.1, np.float32), const("k", [3]),
             const("st", [-1, 0]), const("en", [-1000, 10]), const("ax", [2, 1]),
             const("sp", [-2, 2]), const("r0", 1.0, np.float32), const("r1", 4.0, np.float32),
             const("r2", 0.75, np.float32)]
    m = model("input_forms_op11", 11, nodes, [inp("x", F, ["N", 6, 5])],
              [out(o, F) for o in outs] + [out("ti", I64), out("rg", F)], inits)
    return Case(m, {"N": 2})


def input_forms_op13():
    # Opset 13: Squeeze/Unsqueeze/Split/ReduceSum take axes/split as inputs;
    # ReduceMean still takes an attribute (until 18).
    nodes = [
        N("Unsqueeze", ["x", "ax_u"], ["u"]),
        N("Squeeze", ["u", "ax_s"], ["q"]),
        N("Squeeze", ["u"], ["q_all"]),            # no axes: every 1-sized dim
        N("ReduceSum", ["x", "ax_r"], ["r"], keepdims=0),
        N("ReduceSum", ["x"], ["r_all"]),            # no axes: reduce all
        N("ReduceSum", ["x", "none"], ["r_noop"], noop_with_empty_axes=1),
        N("ReduceMean", ["x"], ["rm"], axes=[1], keepdims=1),
        N("Split", ["x", "split"], ["a", "b"], axis=2),
        N("Pad", ["x", "pads"], ["p"]),
        N("Clip", ["x", "lo", "hi"], ["c"]),
        N("Slice", ["x", "st", "en"], ["s"]),        # axes and steps omitted
    ]
    outs = ["u", "q", "q_all", "r", "r_all", "r_noop", "rm", "a", "b", "p", "c", "s"]
    inits = [const("ax_u", [0, -1]), const("ax_s", [0]), const("ax_r", [2]), const("none", np.zeros(0)),
             const("split", [3, 4]), const("pads", [1, 0, 0, 1, 0, 0]),
             const("lo", -1, np.float32), const("hi", 1, np.float32),
             const("st", [0, 1, 2]), const("en", [1, 2, -2])]
    m = model("input_forms_op13", 13, nodes, [inp("x", F, ["N", 1, 7])], [out(o, F) for o in outs], inits)
    return Case(m, {"N": 3})


def reduce_op18():
    # Opset 18: every Reduce* takes axes as an input; Split has num_outputs;
    # Pad has an axes input.  onnx 1.12 knows only opset 17 (no checker).
    nodes = [
        N("ReduceMean", ["x", "a1"], ["m"], keepdims=0),
        N("ReduceMax", ["x", "a2"], ["mx"]),
        N("ReduceL2", ["x"], ["l2"], keepdims=0),
        N("ReduceLogSumExp", ["x", "none"], ["noop"], noop_with_empty_axes=1),
        N("ReduceProd", ["x", "a1"], ["pr"], keepdims=1),
        N("Split", ["x"], ["s1", "s2", "s3"], axis=2, num_outputs=3),
        N("Pad", ["x", "pads", "", "pax"], ["p"]),
    ]
    outs = ["m", "mx", "l2", "noop", "pr", "s1", "s2", "s3", "p"]
    inits = [const("a1", [-1]), const("a2", [0, 2]), const("none", np.zeros(0)),
             const("pads", [1, 2, 3, 4]), const("pax", [1, 2])]
    m = model("reduce_op18", 18, nodes, [inp("x", F, ["N", 3, "L"])], [out(o, F) for o in outs], inits)
    return Case(m, {"N": 2, "L": 7}, check=False)


def resize_op10():
    # Resize-10: (X, scales); output = floor(input * scale).
    nodes = [N("Resize", ["x", "s1"], ["a"], mode="nearest"),
             N("Resize", ["x", "s2"], ["b"], mode="linear")]
    m = model("resize_op10", 10, nodes, [inp("x", F, ["N", 3, "H", "W"])], [out("a", F), out("b", F)],
              [const("s1", [1, 1, 2, 2], np.float32), const("s2", [1, 1, 0.6, 1.7], np.float32)])
    return Case(m, {"N": 2, "H": 7, "W": 9})


def resize_op11():
    # Resize-11: (X, roi, scales[, sizes]); sizes may be computed from Shape.
    nodes = [
        N("Resize", ["x", "roi", "sc"], ["a"], mode="cubic"),
        N("Resize", ["x", "roi", "empty", "sz"], ["b"], mode="nearest",
          coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
        N("Shape", ["x"], ["shp"]),
        N("Slice", ["shp", "z", "two", "z"], ["nc"]),           # [N, C]
        N("Slice", ["shp", "two", "four", "z"], ["hw"]),        # [H, W]
        N("Mul", ["hw", "three"], ["hw3"]),
        N("Concat", ["nc", "hw3"], ["sz2"], axis=0),
        N("Resize", ["x", "roi", "empty", "sz2"], ["c"], mode="linear",
          coordinate_transformation_mode="align_corners"),
    ]
    inits = [const("roi", np.zeros(0), np.float32), const("empty", np.zeros(0), np.float32),
             const("sc", [1, 1, 1.5, 0.5], np.float32), const("sz", [2, 3, 4, 11]),
             const("z", [0]), const("two", [2]), const("four", [4]), const("three", [3])]
    m = model("resize_op11", 11, nodes, [inp("x", F, ["N", 3, "H", "W"])],
              [out("a", F), out("b", F), out("c", F)], inits)
    return Case(m, {"N": 2, "H": 8, "W": 6})


def resize_op13():
    # Resize-13: roi and scales are optional (empty names).
    nodes = [N("Resize", ["x", "", "sc"], ["a"], mode="nearest"),
             N("Resize", ["x", "", "", "sz"], ["b"], mode="linear")]
    m = model("resize_op13", 13, nodes, [inp("x", F, ["N", 3, "H", "W"])], [out("a", F), out("b", F)],
              [const("sc", [1, 1, 2.5, 1.25], np.float32), const("sz", [2, 3, 5, 5])])
    return Case(m, {"N": 2, "H": 4, "W": 9})


def resize_op18():
    # Resize-18: `axes` names the resized dims; keep_aspect_ratio_policy
    # rescales `sizes` (not_larger: the smallest scale for every axis).
    nodes = [N("Resize", ["x", "", "", "sz"], ["a"], axes=[2, 3], mode="linear"),
             N("Resize", ["x", "", "", "sz"], ["b"], axes=[2, 3], keep_aspect_ratio_policy="not_larger"),
             N("Resize", ["x", "", "", "sz"], ["c"], axes=[2, 3], keep_aspect_ratio_policy="not_smaller"),
             N("Resize", ["x", "", "sc"], ["d"], axes=[3], mode="cubic", antialias=1)]
    m = model("resize_op18", 18, nodes, [inp("x", F, ["N", 3, "H", "W"])],
              [out(o, F) for o in "abcd"], [const("sz", [12, 12]), const("sc", [0.5], np.float32)])
    return Case(m, {"N": 2, "H": 6, "W": 9}, check=False)


def conv_op11():
    # ConvTranspose: auto_pad SAME_UPPER (out = in * stride), output_shape
    # (pads derived), output_padding + dilations, groups; Conv with auto_pad.
    rng = np.random.default_rng(0)
    inits = []

    def weight(*s):
        name = "w%d" % len(inits)
        inits.append(numpy_helper.from_array(rng.standard_normal(s).astype(np.float32) * 0.1, name))
        return name
    nodes = [
        N("ConvTranspose", ["x", weight(4, 3, 3, 3)], ["t1"], strides=[2, 2], auto_pad="SAME_UPPER"),
        N("ConvTranspose", ["x", weight(4, 2, 3, 3)], ["t2"], strides=[2, 2], output_shape=[13, 16]),
        N("ConvTranspose", ["x", weight(4, 2, 3, 3), weight(2)], ["t3"], strides=[3, 2],
          pads=[1, 0, 1, 2], output_padding=[2, 1], dilations=[2, 1]),
        N("ConvTranspose", ["x", weight(4, 3, 2, 2)], ["t4"], group=2),
        N("Conv", ["x", weight(6, 4, 3, 3)], ["c1"], strides=[2, 2], auto_pad="SAME_LOWER"),
        N("Conv", ["x", weight(6, 2, 3, 3)], ["c2"], auto_pad="VALID", dilations=[2, 1], group=2),
        N("Conv", ["x", weight(4, 4, 1, 1)], ["c3"], pads=[1, 2, 3, 4], strides=[3, 1]),
    ]
    m = model("conv_op11", 11, nodes, [inp("x", F, ["N", 4, "H", "W"])],
              [out(o, F) for o in ["t1", "t2", "t3", "t4", "c1", "c2", "c3"]], inits)
    return Case(m, {"N": 2, "H": 7, "W": 8})


def pool_op12():
    # Pooling: SAME_UPPER/SAME_LOWER, ceil_mode, dilations, Indices output.
    nodes = [
        N("MaxPool", ["x"], ["a"], kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER"),
        N("AveragePool", ["x"], ["b"], kernel_shape=[2, 3], strides=[2, 2], auto_pad="SAME_LOWER"),
        N("MaxPool", ["x"], ["c", "ci"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
        N("MaxPool", ["x"], ["d"], kernel_shape=[2, 2], dilations=[2, 2], pads=[1, 1, 0, 0]),
        N("AveragePool", ["x"], ["e"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
          ceil_mode=1, count_include_pad=1),
        N("LpPool", ["x"], ["f"], kernel_shape=[2, 2], strides=[1, 2]),
        N("GlobalMaxPool", ["x"], ["g"]),
        N("MaxPool", ["x"], ["h"], kernel_shape=[3, 3], auto_pad="VALID"),
    ]
    m = model("pool_op12", 12, nodes, [inp("x", F, ["N", 3, "H", "W"])],
              [out(o, F) for o in "abcdefgh"] + [out("ci", I64)])
    return Case(m, {"N": 2, "H": 9, "W": 10})


def einsum_op12():
    nodes = [
        N("Einsum", ["a", "b"], ["bmm"], equation="bij,bjk->bik"),
        N("Einsum", ["q", "k"], ["att"], equation="bhqd,bhkd->bhqk"),
        N("Einsum", ["v1", "v2"], ["outer"], equation="i,j->ij"),
        N("Einsum", ["a"], ["tr"], equation="...ij->...ji"),
        N("Einsum", ["sq"], ["diag"], equation="ii->i"),
        N("Einsum", ["a"], ["sum"], equation="bij->j"),
        N("Einsum", ["a", "b"], ["implicit"], equation="bij,bjk"),
    ]
    ins = [inp("a", F, ["B", 3, 4]), inp("b", F, ["B", 4, 5]), inp("q", F, ["B", 2, "S", 8]),
           inp("k", F, ["B", 2, "T", 8]), inp("v1", F, [6]), inp("v2", F, ["S"]), inp("sq", F, [5, 5])]
    m = model("einsum_op12", 12, nodes, ins,
              [out(o, F) for o in ["bmm", "att", "outer", "tr", "diag", "sum", "implicit"]])
    return Case(m, {"B": 2, "S": 5, "T": 7})


def gather_scatter_op16():
    # Index inputs must be in range: `gi` is fed from [0, 4); the others are
    # constants.  ScatterElements reduction is opset 16.
    nodes = [
        N("GatherElements", ["x", "gi"], ["ge"], axis=1),
        N("GatherND", ["x", "ind0"], ["gnd0"]),
        N("GatherND", ["x", "ind1"], ["gnd1"], batch_dims=1),
        N("ScatterND", ["x", "sind", "upd"], ["snd"]),
        N("ScatterElements", ["x", "gi", "gupd"], ["se"], axis=1, reduction="add"),
        N("Gather", ["x", "neg"], ["gneg"], axis=2),
        N("Gather", ["x", "scalar"], ["gscalar"], axis=0),
    ]
    inits = [const("ind0", [[0, 1], [1, 3]]), const("ind1", [[[2], [0]], [[1], [1]]]),
             const("sind", [[1, 2]]), const("upd", np.ones((1, 5)), np.float32),
             const("neg", [[-1, 0, -2]]), const("scalar", 1)]
    ins = [inp("x", F, [2, 4, 5]), inp("gi", I64, [2, "K", 5]), inp("gupd", F, [2, "K", 5])]
    m = model("gather_scatter_op16", 16, nodes, ins,
              [out(o, F) for o in ["ge", "gnd0", "gnd1", "snd", "se", "gneg", "gscalar"]], inits)
    return Case(m, {"K": 3}, ranges={"gi": (0, 4)})


def shape_chain_op15():
    # Sizes computed from the input's shape, the way exporters write them:
    # Shape -> Gather -> Unsqueeze -> Concat -> Reshape/Expand/Tile/Range/
    # ConstantOfShape, torch's Equal/Where expand pattern, float arithmetic
    # on sizes (interpolate) and Shape-15 start/end.
    nodes = [
        N("Shape", ["x"], ["s"]),
        N("Gather", ["s", "i0"], ["n"]), N("Gather", ["s", "i1"], ["c"]), N("Gather", ["s", "i2"], ["l"]),
        N("Unsqueeze", ["n", "ax0"], ["n1"]), N("Unsqueeze", ["l", "ax0"], ["l1"]),
        N("Concat", ["n1", "m1"], ["shape_nm1"], axis=0),
        N("Reshape", ["x", "shape_nm1"], ["flat"]),                     # [N, C*L]
        N("Reshape", ["x", "zero_m1"], ["flat0"]),                      # [N, C*L] via 0
        N("Concat", ["n1", "one", "l1"], ["eshape"], axis=0),
        N("Expand", ["row", "eshape"], ["ex"]),                         # [N, 1, L]
        N("Concat", ["one", "one", "n1"], ["reps"], axis=0),
        N("Tile", ["x", "reps"], ["tiled"]),                            # [N, C, L*N]
        N("Range", ["zero", "l", "one_s"], ["rg"]),                     # [L]
        N("Concat", ["n1", "l1"], ["cshape"], axis=0),
        N("ConstantOfShape", ["cshape"], ["cos"], value=oh.make_tensor("v", F, [1], [1.0])),
        # torch's x.expand(n, -1, -1): ConstantOfShape/Mul/Equal/Where
        N("ConstantOfShape", ["three"], ["ones3"], value=oh.make_tensor("v", I64, [1], [1])),
        N("Mul", ["ones3", "m1"], ["neg3"]),
        N("Concat", ["n1", "neg1", "neg1"], ["want"], axis=0),
        N("Equal", ["want", "neg3"], ["isneg"]),
        N("Where", ["isneg", "ones3", "want"], ["eshape2"]),
        N("Expand", ["one_c_l", "eshape2"], ["ex2"]),                  # [N, 1, 4]
        # interpolate-like: floor(L * 1.5) as a size
        N("Cast", ["l1"], ["lf"], to=F), N("Mul", ["lf", "f15"], ["lf15"]), N("Floor", ["lf15"], ["lfl"]),
        N("Cast", ["lfl"], ["l15"], to=I64),
        N("Concat", ["n1", "l15"], ["cshape2"], axis=0),
        N("ConstantOfShape", ["cshape2"], ["cos2"]),                    # [N, floor(1.5 L)]
        N("Shape", ["x"], ["s_tail"], start=1),                         # [C, L]
        N("Shape", ["x"], ["s_mid"], start=-2, end=-1),                 # [C]
        N("ReduceProd", ["s_tail"], ["cl"], keepdims=1),
        N("Concat", ["n1", "cl"], ["shape_ncl"], axis=0),
        N("Reshape", ["x", "shape_ncl"], ["flat2"]),
        N("Size", ["x"], ["size"]),
        N("Div", ["size", "n"], ["per"]), N("Unsqueeze", ["per", "ax0"], ["per1"]),
        N("Concat", ["n1", "per1"], ["shape_np"], axis=0),
        N("Reshape", ["x", "shape_np"], ["flat3"]),
        N("Max", ["l1", "c_s"], ["mx"]), N("Slice", ["x", "zero1", "mx", "two1"], ["sl"]),
    ]
    inits = [const("i0", 0), const("i1", 1), const("i2", 2), const("ax0", [0]), const("m1", [-1]),
             const("zero_m1", [0, -1]), const("one", [1]), const("row", np.ones((1, 1, 1)), np.float32),
             const("zero", 0), const("one_s", 1), const("three", [3]), const("neg1", [-1]),
             const("one_c_l", np.ones((1, 1, 4)), np.float32), const("f15", [1.5], np.float32),
             const("c_s", [2]), const("zero1", [0]), const("two1", [2])]
    outs = ["flat", "flat0", "ex", "tiled", "cos", "ex2", "cos2", "flat2", "flat3", "sl"]
    m = model("shape_chain_op15", 15, nodes, [inp("x", F, ["N", "C", "L"])],
              [out(o, F) for o in outs] + [out("rg", I64), out("s_mid", I64)], inits)
    return Case(m, {"N": 2, "C": 3, "L": 5})


def nonzero_topk_op12():
    # Data-dependent sizes: NonZero, Compress, TopK with K from data (all
    # planned at an upper bound) next to TopK with K from the shape (exact).
    nodes = [
        N("Greater", ["x", "zero"], ["pos"]),
        N("NonZero", ["pos"], ["nz"]),                        # [2, <= N*L]
        N("Transpose", ["nz"], ["nzt"]),
        N("GatherND", ["x", "nzt"], ["picked"]),              # [<= N*L]
        N("Shape", ["x"], ["s"]), N("Gather", ["s", "i1"], ["l"]),
        N("Div", ["l", "two"], ["half"]), N("Unsqueeze", ["half"], ["k_shape"], axes=[0]),
        N("TopK", ["x", "k_shape"], ["tv", "ti"], axis=1),     # [N, L/2] exact
        N("Cast", ["pos"], ["pos_i"], to=I64),
        N("ReduceSum", ["pos_i"], ["npos"], axes=[0, 1], keepdims=0),
        N("Min", ["npos", "l"], ["kd"]), N("Unsqueeze", ["kd"], ["k_data"], axes=[0]),
        N("TopK", ["x", "k_data"], ["dv", "di"], axis=1),      # [N, <= L]
        N("Compress", ["x", "mask"], ["cmp"], axis=1),         # [N, <= L]
        N("Relu", ["picked"], ["picked_relu"]),
    ]
    inits = [const("zero", 0.0, np.float32), const("i1", 1), const("two", 2)]
    ins = [inp("x", F, ["N", "L"]), inp("mask", BOOL, ["L"])]
    outs = [out(o, F) for o in ["picked", "tv", "dv", "cmp", "picked_relu"]] + \
        [out(o, I64) for o in ["nz", "ti", "di"]]
    m = model("nonzero_topk_op12", 12, nodes, ins, outs, inits)
    return Case(m, {"N": 2, "L": 9})


def if_op13():
    # If with a constant condition (branches of different rank), a condition
    # computed from the shape, and conditions from inputs (same-shaped
    # branches; different shapes: the size is then data-dependent).
    def br(name, nodes, o):
        return branch(name, nodes, [out(o, F)])
    then_flat = br("then_flat", [N("Flatten", ["x"], ["tf"])], "tf")
    else_tr = br("else_tr", [N("Transpose", ["x"], ["et"])], "et")
    then_relu = br("then_relu", [N("Relu", ["x"], ["tr"])], "tr")
    else_neg = br("else_neg", [N("Neg", ["x"], ["en"])], "en")
    then_cat = br("then_cat", [N("Concat", ["x", "x"], ["tc"], axis=2)], "tc")
    else_id = br("else_id", [N("Identity", ["x"], ["ei"])], "ei")
    nodes = [
        N("Constant", [], ["ctrue"], value=oh.make_tensor("v", BOOL, [], [True])),
        N("If", ["ctrue"], ["a"], then_branch=then_flat, else_branch=else_tr),
        N("Shape", ["x"], ["s"]), N("Gather", ["s", "i0"], ["n"]), N("Greater", ["n", "four"], ["big"]),
        N("If", ["big"], ["b"], then_branch=then_flat, else_branch=else_tr),
        N("If", ["flag"], ["c"], then_branch=then_relu, else_branch=else_neg),
        N("If", ["flag2"], ["d"], then_branch=then_cat, else_branch=else_id),
        N("Add", ["d", "one"], ["d1"]),
    ]
    ins = [inp("x", F, ["N", 3, "L"]), inp("flag", BOOL, []), inp("flag2", BOOL, [])]
    m = model("if_op13", 13, nodes, ins, [out(o, F) for o in "abcd"] + [out("d1", F)],
              [const("i0", 0), const("four", 4), const("one", 1.0, np.float32)])
    return Case(m, {"N": 2, "L": 4}, values={"flag": [1], "flag2": [0]})


def loop_op13():
    # Loop with a trip count from the shape, a carried value and a scan
    # output ([trips, ...]); a second Loop with a constant trip count.
    body = oh.make_graph(
        [N("Identity", ["cond_in"], ["cond_out"]),
         N("Add", ["v_in", "x"], ["v_out"]),
         N("Cast", ["iter"], ["it_f"], to=F),
         N("Mul", ["v_in", "it_f"], ["scan"])],
        "body",
        [inp("iter", I64, []), inp("cond_in", BOOL, []), inp("v_in", F, None)],
        [out("cond_out", BOOL), out("v_out", F), out("scan", F)])
    nodes = [
        N("Shape", ["x"], ["s"]), N("Gather", ["s", "i1"], ["trips"]),
        N("Loop", ["trips", "true", "x"], ["v_final", "scans"], body=body),    # scans: [C, N, C]
        N("Loop", ["three", "", "x"], ["v3", "scans3"], body=body),            # cond omitted
    ]
    inits = [const("i1", 1), const("true", True, np.bool_), const("three", 3)]
    m = model("loop_op13", 13, nodes, [inp("x", F, ["N", "C"])],
              [out(o, F) for o in ["v_final", "scans", "v3", "scans3"]], inits)
    return Case(m, {"N": 2, "C": 5})


def scan_op11():
    # Scan-11: running sum over axis 0; a scan output stacked along axis 1;
    # a reversed scan input.
    body = oh.make_graph(
        [N("Add", ["s_in", "x_t"], ["s_out"]), N("Mul", ["s_in", "x_t"], ["y_t"])],
        "scan_body", [inp("s_in", F, ["C"]), inp("x_t", F, ["C"])],
        [out("s_out", F), out("y_t", F)])
    nodes = [N("Scan", ["s0", "x"], ["s_final", "ys"], body=body, num_scan_inputs=1),
             N("Scan", ["s0", "x"], ["s_rev", "ys_t"], body=body, num_scan_inputs=1,
               scan_input_directions=[1], scan_output_axes=[1])]
    m = model("scan_op11", 11, nodes, [inp("s0", F, ["C"]), inp("x", F, ["L", "C"])],
              [out(o, F) for o in ["s_final", "ys", "s_rev", "ys_t"]])
    return Case(m, {"C": 4, "L": 6})


def function_op15():
    # Model-local functions (ModelProto.functions, IR 8): one called twice at
    # different shapes, one with an attribute reference, one calling another.
    lin = oh.make_function("local", "LinearRelu", ["x", "w", "b"], ["y"],
                           [N("MatMul", ["x", "w"], ["xw"]), N("Add", ["xw", "b"], ["z"]),
                            N("Relu", ["z"], ["y"])], [oh.make_opsetid("", 15)])
    alpha = onnx.AttributeProto(name="value_float", ref_attr_name="alpha", type=onnx.AttributeProto.FLOAT)
    k = N("Constant", [], ["k"])
    k.attribute.append(alpha)
    scaled = oh.make_function("local", "ScaledTanh", ["x"], ["y"],
                              [k, N("Tanh", ["x"], ["t"]), N("Mul", ["t", "k"], ["y"])],
                              [oh.make_opsetid("", 15)], ["alpha"])
    block = oh.make_function("local", "Block", ["x", "w", "b"], ["y"],
                             [N("LinearRelu", ["x", "w", "b"], ["h"], domain="local"),
                              N("ScaledTanh", ["h"], ["y"], domain="local", alpha=0.5)],
                             [oh.make_opsetid("", 15), oh.make_opsetid("local", 1)])
    rng = np.random.default_rng(1)
    W = lambda name, *s: numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), name)
    nodes = [N("LinearRelu", ["x", "w1", "b1"], ["h1"], domain="local"),
             N("LinearRelu", ["h1", "w2", "b2"], ["h2"], domain="local"),
             N("ScaledTanh", ["h2"], ["h3"], domain="local", alpha=2.0),
             N("Block", ["h3", "w3", "b3"], ["y"], domain="local")]
    m = model("function_op15", 15, nodes, [inp("x", F, ["N", 8])],
              [out("h1", F), out("y", F)],
              [W("w1", 8, 16), W("b1", 16), W("w2", 16, 4), W("b2", 4), W("w3", 4, 6), W("b3", 6)],
              functions=[lin, scaled, block], domains=[("local", 1)])
    return Case(m, {"N": 3})


def sequence_op11():
    # Sequence-typed values (SplitToSequence, SequenceConstruct) between
    # tensors; the sequences themselves have no tensor shape.
    nodes = [
        N("SplitToSequence", ["x", "split"], ["seq"], axis=1),
        N("SequenceAt", ["seq", "one"], ["second"]),
        N("ConcatFromSequence", ["seq"], ["cat"], axis=1),
        N("SequenceConstruct", ["x", "x"], ["pair"]),
        N("ConcatFromSequence", ["pair"], ["stacked"], axis=1, new_axis=1),
        N("SequenceLength", ["seq"], ["len"]),
    ]
    m = model("sequence_op11", 11, nodes, [inp("x", F, ["N", 4, "L"])],
              [out("second", F), out("cat", F), out("stacked", F), out("len", I64)],
              [const("split", [1, 3]), const("one", 1)])
    return Case(m, {"N": 2, "L": 3})


def misc_op17():
    # Operators with their own shape rules that exporters use (LayerNormalization: 17).
    nodes = [
        N("Gemm", ["a", "wt", "bias"], ["gemm"], transB=1),          # [N, 6]
        N("MatMul", ["v", "b3"], ["mv"]),                             # [K]x[N,K,M] -> [N,M]
        N("MatMul", ["b3", "m"], ["bm"]),                             # [N,K,M]x[M] -> [N,K]
        N("Where", ["cond", "a", "zero"], ["wh"]),
        N("Expand", ["col", "eshape"], ["ex"]),                       # [3,1] -> [2,3,4]
        N("ArgMax", ["b3"], ["am"], axis=1, keepdims=0),
        N("CumSum", ["a", "ax1"], ["cs"]),
        N("OneHot", ["ids", "depth", "onoff"], ["oh"]),                # [N, L, 5]
        N("DepthToSpace", ["img"], ["d2s"], blocksize=2),
        N("SpaceToDepth", ["img"], ["s2d"], blocksize=2),
        N("Transpose", ["b3"], ["tdef"]),                             # reversed dims
        N("Trilu", ["sq"], ["tri"], upper=0),
        N("Concat", ["a", "a"], ["cat"], axis=-1),
        N("Shape", ["b3"], ["s"]), N("Shape", ["s"], ["rank"]),
        N("Equal", ["a", "a"], ["eq"]), N("Not", ["eq"], ["neq"]),
        N("Cast", ["a"], ["a_i32"], to=T.INT32),
        N("Identity", ["a"], ["idn"]),
        N("LayerNormalization", ["b3", "gm", "betam"], ["ln", "ln_mean", "ln_inv"], axis=-1),
        N("InstanceNormalization", ["img", "g4", "beta4"], ["inorm"]),
        N("Mod", ["ids", "three"], ["mod"]),
    ]
    rng = np.random.default_rng(2)
    inits = [numpy_helper.from_array(rng.standard_normal((6, 5)).astype(np.float32), "wt"),
             const("bias", np.zeros(6), np.float32), const("zero", 0.0, np.float32),
             const("col", np.ones((3, 1)), np.float32), const("eshape", [2, 1, 4]), const("ax1", 1),
             const("depth", 5), const("onoff", [0, 1], np.float32), const("three", 3),
             const("g4", np.ones(4), np.float32), const("beta4", np.zeros(4), np.float32),
             const("gm", np.ones(4), np.float32), const("betam", np.zeros(4), np.float32)]
    ins = [inp("a", F, ["N", 5]), inp("v", F, ["K"]), inp("b3", F, ["N", "K", "M"]), inp("m", F, ["M"]),
           inp("cond", BOOL, [5]), inp("ids", I64, ["N", "L"]), inp("img", F, ["N", 4, 6, 8]),
           inp("sq", F, ["M", "M"])]
    outs = [out(o, F) for o in ["gemm", "mv", "bm", "wh", "ex", "cs", "oh", "d2s", "s2d", "tdef", "tri",
                                "cat", "idn", "inorm", "ln", "ln_mean", "ln_inv"]] + \
        [out(o, I64) for o in ["am", "rank", "mod"]] + [out("neq", BOOL), out("a_i32", T.INT32)]
    m = model("misc_op17", 17, nodes, ins, outs, inits)
    return Case(m, {"N": 2, "K": 3, "M": 4, "L": 6}, ranges={"ids": (0, 5)})


def pack_nbits(w, block):
    """MatMulNBits' B, scales, zero points for a [K, N] float weight: 4-bit
    values, block_size rows of K per block, two per byte (low nibble first),
    as onnxruntime's quantizer writes them: B [N, K / block, block / 2]."""
    k, n = w.shape
    wt = w.T.reshape(n, k // block, block)
    lo, hi = wt.min(axis=2, keepdims=True), wt.max(axis=2, keepdims=True)
    scale = np.maximum(hi - lo, 1e-6) / 15
    zp = np.clip(np.round(-lo / scale), 0, 15).astype(np.uint8)
    q = np.clip(np.round(wt / scale) + zp, 0, 15).astype(np.uint8)
    b = (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8)
    zpacked = zp.reshape(n, -1)
    if zpacked.shape[1] % 2:
        zpacked = np.concatenate([zpacked, np.zeros((n, 1), np.uint8)], axis=1)
    zpacked = (zpacked[:, 0::2] | (zpacked[:, 1::2] << 4)).reshape(-1)
    return b, scale.reshape(-1).astype(np.float32), zpacked


def decoder_contrib_op17():
    # A two-layer decoder as onnxruntime's exporters write LLMs: 4-bit
    # MatMulNBits weights and com.microsoft's fused operators, with a KV
    # cache whose past length is a symbolic dim.  Layer 0 is GenAI's form
    # (packed QKV into GroupQueryAttention with rotary inside, 2 KV heads);
    # layer 1 the transformer optimizer's (RotaryEmbedding,
    # MultiHeadAttention with past, SkipLayerNormalization).  The mask spans
    # past and new tokens; seqlens_k and total_sequence_length come from it
    # as GenAI computes them.
    hid, nh, kvh, hd, vocab, ffn, block, maxpos = 64, 4, 2, 16, 96, 128, 32, 64
    rng = np.random.default_rng(5)
    f32 = lambda *s: (rng.standard_normal(s) * 0.1).astype(np.float32)
    inits, nodes = [], []
    ms = "com.microsoft"

    def nbits(name, x, k, n):
        b, sc, zp = pack_nbits(f32(k, n), block)
        inits.extend([numpy_helper.from_array(b, name + ".qweight"), numpy_helper.from_array(sc, name + ".scales"),
                      numpy_helper.from_array(zp, name + ".qzeros")])
        nodes.append(N("MatMulNBits", [x, name + ".qweight", name + ".scales", name + ".qzeros"], [name],
                       domain=ms, K=k, N=n, bits=4, block_size=block, accuracy_level=4))
        return name

    inits += [numpy_helper.from_array(f32(vocab, hid), "embed"), const("one", [1]), const("one_s", 1),
              numpy_helper.from_array(f32(maxpos, hd // 2), "cos_cache"),
              numpy_helper.from_array(f32(maxpos, hd // 2), "sin_cache"),
              const("ln_w", np.ones(hid), np.float32), const("ln_b", np.zeros(hid), np.float32)]
    nodes += [N("Gather", ["embed", "input_ids"], ["h0"]),
              N("ReduceSum", ["attention_mask", "one"], ["mask_sum"], keepdims=0),
              N("Sub", ["mask_sum", "one"], ["seqlens64"]),
              N("Cast", ["seqlens64"], ["seqlens_k"], to=T.INT32),
              N("Shape", ["attention_mask"], ["mask_shape"]),
              N("Gather", ["mask_shape", "one_s"], ["total64"], axis=0),
              N("Cast", ["total64"], ["total_sequence_length"], to=T.INT32),
              N("SimplifiedLayerNormalization", ["h0", "ln_w"], ["n0"], axis=-1, epsilon=1e-5)]
    # layer 0: GenAI
    qkv = nbits("l0.qkv", "n0", hid, (nh + 2 * kvh) * hd)
    nodes.append(N("GroupQueryAttention", [qkv, "", "", "past_key_values.0.key", "past_key_values.0.value",
                                           "seqlens_k", "total_sequence_length", "cos_cache", "sin_cache"],
                   ["l0.attn", "present.0.key", "present.0.value"], domain=ms, num_heads=nh,
                   kv_num_heads=kvh, do_rotary=1))
    o = nbits("l0.o", "l0.attn", hid, hid)
    nodes.append(N("SkipSimplifiedLayerNormalization", [o, "h0", "ln_w"], ["l0.n1", "", "", "l0.r1"],
                   domain=ms, epsilon=1e-5))
    up = nbits("l0.up", "l0.n1", hid, ffn)
    nodes += [N("Sigmoid", [up], ["l0.sig"]), N("Mul", [up, "l0.sig"], ["l0.act"])]
    down = nbits("l0.down", "l0.act", ffn, hid)
    nodes.append(N("SkipLayerNormalization", [down, "l0.r1", "ln_w", "ln_b"], ["l1.n0", "", "", "l1.r0"],
                   domain=ms, epsilon=1e-5))
    # layer 1: the transformer optimizer's attention
    q, k, v = (nbits("l1." + p, "l1.n0", hid, hid) for p in "qkv")
    nodes += [N("RotaryEmbedding", [q, "position_ids", "cos_cache", "sin_cache"], ["l1.q_rot"], domain=ms),
              N("RotaryEmbedding", [k, "position_ids", "cos_cache", "sin_cache"], ["l1.k_rot"], domain=ms),
              N("MultiHeadAttention", ["l1.q_rot", "l1.k_rot", v, "", "", "", "past_key_values.1.key",
                                       "past_key_values.1.value"],
                ["l1.attn", "present.1.key", "present.1.value"], domain=ms, num_heads=nh)]
    o = nbits("l1.o", "l1.attn", hid, hid)
    nodes.append(N("SkipSimplifiedLayerNormalization", [o, "l1.r0", "ln_w"], ["l1.n1", "", "", "l1.r1"],
                   domain=ms, epsilon=1e-5))
    down = nbits("l1.mlp", "l1.n1", hid, hid)
    nodes.append(N("SkipSimplifiedLayerNormalization", [down, "l1.r1", "ln_w"], ["final"], domain=ms,
                   epsilon=1e-5))
    nbits("logits", "final", hid, vocab)
    b, s, p = "batch_size", "sequence_length", "past_sequence_length"
    ins = [inp("input_ids", I64, [b, s]), inp("attention_mask", I64, [b, "total_sequence_length"]),
           inp("position_ids", I64, [b, s])]
    outs = [out("logits", F)]
    for i, heads in ((0, kvh), (1, nh)):
        ins += [inp("past_key_values.%d.%s" % (i, kv), F, [b, heads, p, hd]) for kv in ("key", "value")]
        outs += [out("present.%d.%s" % (i, kv), F) for kv in ("key", "value")]
    m = model("decoder_contrib_op17", 17, nodes, ins, outs, inits, domains=[(ms, 1)])
    # a decode step: one new token after 7 cached
    return Case(m, {b: 2, s: 1, p: 7, "total_sequence_length": 8}, ranges={"input_ids": (0, vocab), "attention_mask": (1, 2),
                                             "position_ids": (0, 8)}, check=False)


def external_data(big):
    # Weights in an external file (all tensors in one), large in the full
    # corpus so that a loader that reads the data shows up in timings.
    d = 8192 if big else 256
    rng = np.random.default_rng(3)
    w1 = numpy_helper.from_array(rng.standard_normal((d, d), dtype=np.float32), "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((d, d // 2), dtype=np.float32), "w2")
    nodes = [N("MatMul", ["x", "w1"], ["h"]), N("Relu", ["h"], ["r"]), N("MatMul", ["r", "w2"], ["y"])]
    m = model("external_data", 13, nodes, [inp("x", F, ["N", d])], [out("y", F)], [w1, w2])
    return Case(m, {"N": 2}, external="external_data.onnx.data")


# name -> builder; external_data takes the corpus size
BUILDERS = [upsample_op7, upsample_op9, attr_forms_op9, input_forms_op11, input_forms_op13,
            reduce_op18, resize_op10, resize_op11, resize_op13, resize_op18, conv_op11, pool_op12,
            einsum_op12, gather_scatter_op16, shape_chain_op15, nonzero_topk_op12, if_op13, loop_op13,
            scan_op11, function_op15, sequence_op11, misc_op17, decoder_contrib_op17]
