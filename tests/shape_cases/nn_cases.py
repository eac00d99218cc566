#!/usr/bin/python3
"""Shape-inference cases for the nn family (frontend/infer/infer_nn.c).

cases() returns one dict per case: name, model (onnx.ModelProto), bindings
(roamc flags), expect {value: (elem_type, dims)} where a dim None is
"unknown" and dims None is "rank unknown"; and optionally expect_error (a
substring roamc's failure message must contain: hostile cases), ort_inputs
(per-input overrides of the random feed: low/high/values) and ort (False
where ONNX Runtime cannot run the case: unbound dims, opset forms ORT
refuses).

Expected shapes were written by hand from the operator specs and then
checked against ONNX Runtime (onnxruntime-node 1.30): `--oracle` runs every
case with ort != False through tests/ort_shapes.js and compares.  Cases with
ort False say in a comment where their expectation comes from.

usage: nn_cases.py [ROAMC] [--oracle] [--driver] [--only=SUBSTRING]...
  ROAMC     the roamc binary (default /work/main/build/roamc); it is run as
            `ROAMC shapes MODEL BINDINGS --report json`
  --driver  ROAMC is a driver taking `MODEL BINDINGS` (no `shapes`, no
            --report) and printing the same JSON
  --oracle  also check every expectation against ONNX Runtime
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx import numpy_helper

F, F16, D = TP.FLOAT, TP.FLOAT16, TP.DOUBLE
I64, I32, U8, I8 = TP.INT64, TP.INT32, TP.UINT8, TP.INT8
HERE = os.path.dirname(os.path.abspath(__file__))
FAMILY = "nn"  # contrib_cases.py runs its cases through this runner under its own name
ORT_JS = os.path.join(HERE, "..", "ort_shapes.js")


# ----------------------------------------------------------------- builders

def vi(name, elem, shape):
    return oh.make_tensor_value_info(name, elem, shape)


def init(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def f32(*shape, fill=None):
    a = np.random.RandomState(0).uniform(-1, 1, size=shape).astype(np.float32)
    return a if fill is None else np.full(shape, fill, np.float32)


def case(name, nodes, inputs, expect, opset, inits=(), bindings=(), ort=True, ort_inputs=None, expect_error=None):
    """inputs: (name, elem, shape) graph inputs; every expected value
    becomes a graph output declared without type or shape, so that nothing
    but inference can give it one."""
    outs = [oh.make_empty_tensor_value_info(o) for o in expect]
    g = oh.make_graph(nodes, name, [vi(*i) for i in inputs], outs, initializer=list(inits))
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", opset)])
    m.ir_version = 7 if opset <= 15 else 8 if opset <= 18 else 9
    return {"name": name, "model": m, "bindings": list(bindings), "expect": expect, "ort": ort,
            "ort_inputs": ort_inputs or {}, "expect_error": expect_error}


def node(op, ins, outs, **attrs):
    return oh.make_node(op, ins, outs, **attrs)


# -------------------------------------------------------------------- cases

def conv_cases():
    w833 = init("w", f32(8, 3, 3, 3))
    c = [
        case("conv2d_pads_strides_sym", [node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], strides=[2, 2])],
             [("x", F, ["batch", 3, 32, 32])], {"y": (F, [2, 8, 16, 16])}, 11, [w833], ["--dim", "batch=2"]),
        case("conv1d_kernel_from_weight_dilation", [node("Conv", ["x", "w"], ["y"], dilations=[2])],
             [("x", F, [1, 4, 20])], {"y": (F, [1, 6, 16])}, 7, [init("w", f32(6, 4, 3))]),
        case("conv3d_group_pads", [node("Conv", ["x", "w", "b"], ["y"], group=2, strides=[1, 2, 3],
                                        pads=[1, 0, 1, 1, 0, 1], kernel_shape=[3, 3, 3])],
             [("x", F, [1, 4, 8, 9, 10])], {"y": (F, [1, 6, 8, 4, 4])}, 11,
             [init("w", f32(6, 2, 3, 3, 3)), init("b", f32(6))]),
        case("conv_same_upper", [node("Conv", ["x", "w"], ["y"], auto_pad="SAME_UPPER", strides=[2, 2])],
             [("x", F, [1, 1, 7, 8])], {"y": (F, [1, 2, 4, 4])}, 11, [init("w", f32(2, 1, 3, 3))]),
        case("conv_same_lower_stride3", [node("Conv", ["x", "w"], ["y"], auto_pad="SAME_LOWER", strides=[3, 3])],
             [("x", F, [1, 1, 7, 8])], {"y": (F, [1, 2, 3, 3])}, 11, [init("w", f32(2, 1, 4, 4))]),
        case("conv_valid", [node("Conv", ["x", "w"], ["y"], auto_pad="VALID", strides=[2, 2])],
             [("x", F, [1, 1, 7, 8])], {"y": (F, [1, 2, 3, 4])}, 11, [init("w", f32(2, 1, 3, 2))]),
        case("conv_input_shape_binding", [node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
             [("x", F, ["n", 3, "h", "w_"])], {"y": (F, [2, 8, 10, 12])}, 11, [w833],
             ["--input-shape", "x=2,3,10,12"]),
        # unbound h, w: spatial dims unknown (spec), N and C known
        case("conv_unbound_spatial", [node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
             [("x", F, [1, 3, "h", "w_"])], {"y": (F, [1, 8, None, None])}, 11, [w833], ort=False),
        case("conv_transpose_basic", [node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2])],
             [("x", F, [1, 2, 5, 6])], {"y": (F, [1, 3, 11, 13])}, 11, [init("w", f32(2, 3, 3, 3))]),
        case("conv_transpose_group_pads_outpad_dil",
             [node("ConvTranspose", ["x", "w", "b"], ["y"], group=2, strides=[2, 2], pads=[1, 1, 1, 1],
                   output_padding=[1, 0], dilations=[2, 1])],
             [("x", F, [1, 4, 5, 5])], {"y": (F, [1, 4, 12, 9])}, 11, [init("w", f32(4, 2, 3, 3)), init("b", f32(4))]),
        case("conv_transpose_output_shape",
             [node("ConvTranspose", ["x", "w"], ["y"], strides=[3, 3], output_shape=[10, 8])],
             [("x", F, [1, 1, 3, 3])], {"y": (F, [1, 2, 10, 8])}, 11, [init("w", f32(1, 2, 3, 3))]),
        case("conv_transpose_same_upper",
             [node("ConvTranspose", ["x", "w"], ["y"], strides=[3, 2], auto_pad="SAME_UPPER")],
             [("x", F, [1, 1, 7, 5])], {"y": (F, [1, 2, 20, 10])}, 11, [init("w", f32(1, 2, 2, 3))]),
        case("conv_transpose_same_lower_outpad",
             [node("ConvTranspose", ["x", "w"], ["y"], strides=[3, 2], auto_pad="SAME_LOWER", output_padding=[1, 1])],
             [("x", F, [1, 1, 7, 5])], {"y": (F, [1, 2, 21, 10])}, 11, [init("w", f32(1, 2, 2, 3))]),
        case("conv_transpose_valid_1d", [node("ConvTranspose", ["x", "w"], ["y"], strides=[2], auto_pad="VALID")],
             [("x", F, [1, 1, 5])], {"y": (F, [1, 2, 11])}, 7, [init("w", f32(1, 2, 3))]),
        case("conv_transpose_3d_sym", [node("ConvTranspose", ["x", "w"], ["y"])],
             [("x", F, ["b", 2, 3, 4, 5])], {"y": (F, [2, 1, 4, 5, 6])}, 13, [init("w", f32(2, 1, 2, 2, 2))],
             ["--dim", "b=2"]),
        case("conv_integer", [node("ConvInteger", ["x", "w"], ["y"])],
             [("x", U8, [1, 3, 8, 8])], {"y": (I32, [1, 4, 6, 6])}, 10,
             [init("w", np.ones((4, 3, 3, 3), np.uint8))]),
        case("qlinear_conv", [node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["y"], pads=[1, 1, 1, 1])],
             [("x", U8, [1, 3, 8, 8])], {"y": (U8, [1, 4, 8, 8])}, 10,
             [init("xs", np.float32(0.1)), init("xz", np.uint8(3)), init("w", np.ones((4, 3, 3, 3), np.uint8)),
              init("ws", np.float32(0.2)), init("wz", np.uint8(1)), init("ys", np.float32(0.5)), init("yz", np.uint8(5))]),
    ]
    return c


def pool_cases():
    c = [
        case("maxpool7", [node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
             [("x", F, [1, 1, 5, 5])], {"y": (F, [1, 1, 2, 2])}, 7),
        case("maxpool8_indices", [node("MaxPool", ["x"], ["y", "i"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])],
             [("x", F, [1, 2, 6, 6])], {"y": (F, [1, 2, 3, 3]), "i": (I64, [1, 2, 3, 3])}, 8),
        # ceil_mode: the third window would start in the end padding: dropped
        case("maxpool10_ceil_last_window_1d",
             [node("MaxPool", ["x"], ["y"], kernel_shape=[2], strides=[4], pads=[1, 1], ceil_mode=1)],
             [("x", F, [1, 1, 6])], {"y": (F, [1, 1, 2])}, 10),
        case("maxpool10_ceil_last_window_2d",
             [node("MaxPool", ["x"], ["y"], kernel_shape=[2, 3], strides=[4, 4], pads=[1, 0, 1, 1], ceil_mode=1)],
             [("x", F, [1, 1, 6, 7])], {"y": (F, [1, 1, 2, 2])}, 12),
        case("maxpool10_ceil_keeps", [node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)],
             [("x", F, [1, 1, 8, 9])], {"y": (F, [1, 1, 4, 4])}, 10),
        case("maxpool10_dilations", [node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], dilations=[2, 2])],
             [("x", F, [1, 1, 10, 10])], {"y": (F, [1, 1, 6, 6])}, 10),
        case("maxpool12_same_upper_indices",
             [node("MaxPool", ["x"], ["y", "i"], kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER")],
             [("x", F, [1, 1, 7, 7])], {"y": (F, [1, 1, 4, 4]), "i": (I64, [1, 1, 4, 4])}, 12),
        case("maxpool12_same_lower_storage_order",
             [node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2], strides=[3, 3], auto_pad="SAME_LOWER",
                   storage_order=1)],
             [("x", F, [1, 1, 7, 8])], {"y": (F, [1, 1, 3, 3]), "i": (I64, [1, 1, 3, 3])}, 12),
        case("maxpool11_valid_ceil", [node("MaxPool", ["x"], ["y"], kernel_shape=[3], strides=[2], auto_pad="VALID",
                                           ceil_mode=1)],
             [("x", F, [1, 1, 8])], {"y": (F, [1, 1, 4])}, 11),
        case("maxpool3d_int8", [node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2, 2])],
             [("x", I8, [1, 1, 4, 5, 6])], {"y": (I8, [1, 1, 3, 4, 5])}, 12),
        case("maxpool_sym_batch", [node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
             [("x", F, ["N", 3, 8, 8])], {"y": (F, [4, 3, 4, 4])}, 13, bindings=["--dim", "N=4"]),
        case("avgpool7_count_include_pad",
             [node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                   count_include_pad=1)],
             [("x", F, [1, 3, 7, 7])], {"y": (F, [1, 3, 4, 4])}, 7),
        case("avgpool10_ceil", [node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)],
             [("x", F, [1, 1, 5, 5])], {"y": (F, [1, 1, 3, 3])}, 10),
        case("avgpool11_ceil_last_window",
             [node("AveragePool", ["x"], ["y"], kernel_shape=[3], strides=[3], pads=[1, 1], ceil_mode=1)],
             [("x", F, [1, 1, 5])], {"y": (F, [1, 1, 2])}, 11),
        case("avgpool19_dilations", [node("AveragePool", ["x"], ["y"], kernel_shape=[2], dilations=[3])],
             [("x", F, [1, 1, 9])], {"y": (F, [1, 1, 6])}, 19),
        case("lppool2", [node("LpPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[3, 3], p=2)],
             [("x", F, [1, 2, 6, 6])], {"y": (F, [1, 2, 2, 2])}, 7),
        case("lppool11_pads", [node("LpPool", ["x"], ["y"], kernel_shape=[2, 2], pads=[1, 1, 1, 1])],
             [("x", F, [1, 1, 5, 5])], {"y": (F, [1, 1, 6, 6])}, 11),
        case("lppool18_ceil_dilations",
             [node("LpPool", ["x"], ["y"], kernel_shape=[2], strides=[3], dilations=[2], ceil_mode=1)],
             [("x", F, [1, 1, 8])], {"y": (F, [1, 1, 3])}, 18),
        case("global_avg", [node("GlobalAveragePool", ["x"], ["y"])],
             [("x", F, ["n", 3, 5, 5])], {"y": (F, [2, 3, 1, 1])}, 7, bindings=["--dim", "n=2"]),
        case("global_max_1d", [node("GlobalMaxPool", ["x"], ["y"])],
             [("x", F, [2, 3, 7])], {"y": (F, [2, 3, 1])}, 7),
        case("global_lp_3d", [node("GlobalLpPool", ["x"], ["y"], p=2)],
             [("x", F, [1, 4, 3, 5, 6])], {"y": (F, [1, 4, 1, 1, 1])}, 7),
        case("max_roi_pool", [node("MaxRoiPool", ["x", "rois"], ["y"], pooled_shape=[2, 3], spatial_scale=1.0)],
             [("x", F, [1, 3, 8, 8])], {"y": (F, [2, 3, 2, 3])}, 7,
             [init("rois", np.array([[0, 0, 0, 4, 4], [0, 1, 1, 6, 7]], np.float32))]),
        case("roi_align10", [node("RoiAlign", ["x", "rois", "bi"], ["y"], output_height=3, output_width=2)],
             [("x", F, [2, 4, 10, 10])], {"y": (F, [3, 4, 3, 2])}, 10,
             [init("rois", np.array([[0, 0, 4, 4], [1, 1, 6, 7], [2, 2, 9, 9]], np.float32)),
              init("bi", np.array([0, 1, 0], np.int64))]),
        case("roi_align16_defaults", [node("RoiAlign", ["x", "rois", "bi"], ["y"],
                                           coordinate_transformation_mode="output_half_pixel")],
             [("x", F, [2, 4, 10, 10])], {"y": (F, [2, 4, 1, 1])}, 16,
             [init("rois", np.array([[0, 0, 4, 4], [1, 1, 6, 7]], np.float32)), init("bi", np.array([0, 1], np.int64))]),
        case("max_unpool11", [node("MaxPool", ["x"], ["p", "i"], kernel_shape=[2, 2], strides=[2, 2]),
                              node("MaxUnpool", ["p", "i"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
             [("x", F, [1, 1, 4, 5])], {"p": (F, [1, 1, 2, 2]), "i": (I64, [1, 1, 2, 2]), "y": (F, [1, 1, 4, 4])}, 11),
        case("max_unpool9_output_shape", [node("MaxPool", ["x"], ["p", "i"], kernel_shape=[2, 2], strides=[2, 2]),
                                          node("MaxUnpool", ["p", "i", "os"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
             [("x", F, [1, 1, 4, 5])], {"y": (F, [1, 1, 4, 5])}, 9, [init("os", np.array([1, 1, 4, 5], np.int64))]),
        case("max_unpool_pads", [node("MaxUnpool", ["p", "i"], ["y"], kernel_shape=[3], strides=[2], pads=[1, 0])],
             [("p", F, [1, 2, 4]), ("i", I64, [1, 2, 4])], {"y": (F, [1, 2, 8])}, 11,
             ort_inputs={"i": {"values": [0]}}),
    ]
    return c


def matmul_cases():
    return [
        case("matmul_2d", [node("MatMul", ["a", "b"], ["y"])], [("a", F, [3, 4]), ("b", F, [4, 5])],
             {"y": (F, [3, 5])}, 7),
        case("matmul_1d_left", [node("MatMul", ["a", "b"], ["y"])], [("a", F, [4]), ("b", F, [4, 5])],
             {"y": (F, [5])}, 9),
        case("matmul_1d_right", [node("MatMul", ["a", "b"], ["y"])], [("a", F, [3, 4]), ("b", F, [4])],
             {"y": (F, [3])}, 13),
        case("matmul_1d_both", [node("MatMul", ["a", "b"], ["y"])], [("a", F, [4]), ("b", F, [4])],
             {"y": (F, [])}, 13),
        case("matmul_1d_batch", [node("MatMul", ["a", "b"], ["y"])], [("a", F, [4]), ("b", F, [2, 4, 5])],
             {"y": (F, [2, 5])}, 13),
        case("matmul_batch_broadcast", [node("MatMul", ["a", "b"], ["y"])], [("a", F, [2, 1, 3, 4]), ("b", F, [5, 4, 6])],
             {"y": (F, [2, 5, 3, 6])}, 13),
        case("matmul_sym", [node("MatMul", ["a", "b"], ["y"])], [("a", F, ["B", "S", 4]), ("b", F, [4, 5])],
             {"y": (F, [2, 7, 5])}, 13, bindings=["--dim", "B=2", "--dim", "S=7"]),
        # unbound S: that dim unknown (spec)
        case("matmul_unbound", [node("MatMul", ["a", "b"], ["y"])], [("a", F, [2, "S", 4]), ("b", F, [4, 5])],
             {"y": (F, [2, None, 5])}, 13, ort=False),
        case("matmul_integer", [node("MatMulInteger", ["a", "b"], ["y"])], [("a", U8, [3, 4]), ("b", U8, [4, 5])],
             {"y": (I32, [3, 5])}, 10),
        case("qlinear_matmul", [node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"])],
             [("a", U8, [2, 3, 4])], {"y": (U8, [2, 3, 5])}, 10,
             [init("as", np.float32(0.1)), init("az", np.uint8(1)), init("b", np.ones((4, 5), np.uint8)),
              init("bs", np.float32(0.1)), init("bz", np.uint8(2)), init("ys", np.float32(0.3)), init("yz", np.uint8(4))]),
        case("gemm7_transA_bias", [node("Gemm", ["a", "b", "c"], ["y"], transA=1)],
             [("a", F, [4, 3]), ("b", F, [4, 5]), ("c", F, [5])], {"y": (F, [3, 5])}, 7),
        case("gemm11_no_c_transB", [node("Gemm", ["a", "b"], ["y"], transB=1)],
             [("a", F, [2, 3]), ("b", F, [4, 3])], {"y": (F, [2, 4])}, 11),
        case("gemm13_c_column", [node("Gemm", ["a", "b", "c"], ["y"], transA=1, transB=1, alpha=2.0)],
             [("a", F, [3, "m"]), ("b", F, [6, 3]), ("c", F, ["m", 1])], {"y": (F, [2, 6])}, 13,
             bindings=["--dim", "m=2"]),
    ]


def einsum_cases():
    def e(name, eq, shapes, out, ort=True):
        ins = ["i%d" % k for k in range(len(shapes))]
        return case(name, [node("Einsum", ins, ["y"], equation=eq)], [(i, F, s) for i, s in zip(ins, shapes)],
                    {"y": (F, out)}, 12, ort=ort)
    return [
        e("einsum_matmul", "ij,jk->ik", [[2, 3], [3, 4]], [2, 4]),
        e("einsum_batch", "bij,bjk->bik", [[5, 2, 3], [5, 3, 4]], [5, 2, 4]),
        e("einsum_implicit", "ij,jk", [[2, 3], [3, 4]], [2, 4]),
        e("einsum_implicit_sorted", "ba", [[2, 3]], [3, 2]),
        e("einsum_ellipsis_broadcast", "...ij,...jk->...ik", [[2, 1, 3, 4], [2, 5, 4, 6]], [2, 5, 3, 6]),
        e("einsum_ellipsis_one_side", "...ij,jk->...ik", [[2, 5, 3, 4], [4, 6]], [2, 5, 3, 6]),
        e("einsum_implicit_ellipsis", "...i,...i", [[2, 3, 4], [1, 3, 4]], [2, 3]),
        e("einsum_trace", "ii", [[3, 3]], []),
        e("einsum_diag", "ii->i", [[3, 3]], [3]),
        e("einsum_spaces_transpose", "ij , jk -> ki", [[2, 3], [3, 4]], [4, 2]),
        e("einsum_outer_three", "i,j,k->ijk", [[2], [3], [4]], [2, 3, 4]),
        e("einsum_reduce_all", "ij->", [[2, 3]], []),
        # uppercase labels in the implicit output: ORT 1.30 refuses them;
        # ASCII order (uppercase first) per ONNX's reference inference
        e("einsum_implicit_upper", "aB,Bc", [[2, 3], [3, 4]], [2, 4]),
        e("einsum_implicit_mixed_case", "Ab,bc", [[2, 3], [3, 4]], [2, 4], ort=False),
    ]


def resize_cases():
    sc = lambda name, v: init(name, np.array(v, np.float32))
    sz = lambda name, v: init(name, np.array(v, np.int64))
    empty_f = init("empty", np.zeros((0,), np.float32))
    # Shape -> Slice -> Concat -> Cast -> Div: scales computed at run time
    runtime = [
        node("Shape", ["x"], ["shp"]),
        node("Slice", ["shp", "c0", "c2"], ["nc"]),
        node("Concat", ["nc", "target"], ["want"], axis=0),
        node("Cast", ["want"], ["wantf"], to=F),
        node("Cast", ["shp"], ["shpf"], to=F),
        node("Div", ["wantf", "shpf"], ["scales"]),
        node("Resize", ["x", "", "scales"], ["y"], mode="nearest"),
    ]
    rt_inits = [sz("c0", [0]), sz("c2", [2]), sz("target", [8, 12])]
    sizes_rt = [
        node("Shape", ["x"], ["shp"]),
        node("Slice", ["shp", "c2", "c4"], ["hw"]),
        node("Mul", ["hw", "two"], ["hw2"]),
        node("Slice", ["shp", "c0", "c2"], ["nc"]),
        node("Concat", ["nc", "hw2"], ["sizes"], axis=0),
        node("Resize", ["x", "", "", "sizes"], ["y"]),
    ]
    sz_inits = [sz("c0", [0]), sz("c2", [2]), sz("c4", [4]), sz("two", [2])]
    return [
        case("resize10_scales", [node("Resize", ["x", "s"], ["y"])], [("x", F, [1, 3, 4, 5])],
             {"y": (F, [1, 3, 8, 7])}, 10, [sc("s", [1, 1, 2, 1.5])]),
        case("resize11_scales_empty_roi", [node("Resize", ["x", "roi", "s"], ["y"])], [("x", F, [1, 1, 5, 6])],
             {"y": (F, [1, 1, 2, 3])}, 11, [sc("roi", []), sc("s", [1, 1, 0.5, 0.6])]),
        case("resize11_sizes_empty_scales", [node("Resize", ["x", "roi", "empty", "sz"], ["y"], mode="linear")],
             [("x", F, [1, 1, 5, 6])], {"y": (F, [1, 1, 7, 9])}, 11,
             [sc("roi", []), empty_f, sz("sz", [1, 1, 7, 9])]),
        case("resize13_sizes_omitted_scales", [node("Resize", ["x", "", "", "sz"], ["y"])],
             [("x", F, ["n", 3, 4, 4])], {"y": (F, [2, 3, 2, 9])}, 13, [sz("sz", [2, 3, 2, 9])],
             ["--dim", "n=2"]),
        case("resize13_scales_float_rounding", [node("Resize", ["x", "", "s"], ["y"])],
             [("x", F, [1, 1, 5, 5])], {"y": (F, [1, 1, 7, 7])}, 13, [sc("s", [1, 1, 1.4, 1.4])]),
        case("resize13_scales_sym_batch", [node("Resize", ["x", "", "s"], ["y"])],
             [("x", F, ["n", 2, 3, 3])], {"y": (F, [3, 2, 6, 6])}, 13, [sc("s", [1, 1, 2, 2])], ["--dim", "n=3"]),
        case("resize18_axes_sizes_not_larger",
             [node("Resize", ["x", "", "", "sz"], ["y"], axes=[2, 3], keep_aspect_ratio_policy="not_larger")],
             [("x", F, [1, 3, 5, 7])], {"y": (F, [1, 3, 6, 9])}, 18, [sz("sz", [8, 9])]),
        case("resize18_axes_sizes_not_smaller",
             [node("Resize", ["x", "", "", "sz"], ["y"], axes=[2, 3], keep_aspect_ratio_policy="not_smaller")],
             [("x", F, [1, 3, 5, 7])], {"y": (F, [1, 3, 8, 11])}, 18, [sz("sz", [8, 9])]),
        case("resize18_negative_axis_scales", [node("Resize", ["x", "", "s"], ["y"], axes=[-1])],
             [("x", F, [1, 2, 3, 4])], {"y": (F, [1, 2, 3, 10])}, 18, [sc("s", [2.5])]),
        case("resize18_stretch_sizes_axes", [node("Resize", ["x", "", "", "sz"], ["y"], axes=[1])],
             [("x", F, [2, 3, 4])], {"y": (F, [2, 5, 4])}, 18, [sz("sz", [5])]),
        case("resize_runtime_scales", runtime, [("x", F, ["N", 3, "H", "W"])],
             {"y": (F, [1, 3, 8, 12])}, 13, rt_inits, ["--dim", "N=1", "--dim", "H=4", "--dim", "W=6"]),
        # H unbound: the scales' value is unknown (all of it: a value is
        # known whole or not at all), so every dim of y is unknown, blamed on
        # H; the rank is known (spec, by hand)
        case("resize_runtime_scales_unbound", runtime, [("x", F, [1, 3, "H", 6])],
             {"y": (F, [None, None, None, None])}, 13, rt_inits, ort=False),
        case("resize_runtime_sizes", sizes_rt, [("x", F, ["N", 3, "H", "W"])],
             {"y": (F, [2, 3, 10, 14])}, 13, sz_inits, ["--input-shape", "x=2,3,5,7"]),
        case("upsample7_attr", [node("Upsample", ["x"], ["y"], scales=[1.0, 1.0, 2.0, 3.0])],
             [("x", F, [1, 2, 3, 4])], {"y": (F, [1, 2, 6, 12])}, 7),
        case("upsample9_input", [node("Upsample", ["x", "s"], ["y"])],
             [("x", F, [1, 1, 3, 3])], {"y": (F, [1, 1, 4, 6])}, 9, [sc("s", [1, 1, 1.5, 2])]),
    ]


def misc_cases():
    return [
        case("depth_to_space11", [node("DepthToSpace", ["x"], ["y"], blocksize=2)],
             [("x", F, [1, 8, 2, 3])], {"y": (F, [1, 2, 4, 6])}, 11),
        case("depth_to_space13_crd", [node("DepthToSpace", ["x"], ["y"], blocksize=3, mode="CRD")],
             [("x", F, ["n", 18, 2, 3])], {"y": (F, [2, 2, 6, 9])}, 13, bindings=["--dim", "n=2"]),
        case("space_to_depth", [node("SpaceToDepth", ["x"], ["y"], blocksize=2)],
             [("x", F, [1, 2, 4, 6])], {"y": (F, [1, 8, 2, 3])}, 13),
        case("lrn", [node("LRN", ["x"], ["y"], size=3)], [("x", F, [1, 5, 4, 4])], {"y": (F, [1, 5, 4, 4])}, 13),
        case("grid_sample16", [node("GridSample", ["x", "g"], ["y"])],
             [("x", F, [1, 3, 8, 8]), ("g", F, [1, 5, 6, 2])], {"y": (F, [1, 3, 5, 6])}, 16),
        case("col2im18", [node("Col2Im", ["x", "img", "blk"], ["y"])],
             [("x", F, [1, 8, 16])], {"y": (F, [1, 2, 5, 5])}, 18,
             [init("img", np.array([5, 5], np.int64)), init("blk", np.array([2, 2], np.int64))]),
        case("rnn7", [node("RNN", ["x", "w", "r"], ["y", "yh"], hidden_size=4)],
             [("x", F, [5, 2, 3])], {"y": (F, [5, 1, 2, 4]), "yh": (F, [1, 2, 4])}, 7,
             [init("w", f32(1, 4, 3)), init("r", f32(1, 4, 4))]),
        case("gru_bidirectional", [node("GRU", ["x", "w", "r"], ["y", "yh"], hidden_size=4, direction="bidirectional")],
             [("x", F, ["seq", 2, 3])], {"y": (F, [5, 2, 2, 4]), "yh": (F, [2, 2, 4])}, 7,
             [init("w", f32(2, 12, 3)), init("r", f32(2, 12, 4))], ["--dim", "seq=5"]),
        # layout 1: ORT's CPU LSTM refuses it; expectation from the spec
        case("lstm14_layout1", [node("LSTM", ["x", "w", "r"], ["y", "yh", "yc"], hidden_size=4, layout=1)],
             [("x", F, [2, 5, 3])], {"y": (F, [2, 5, 1, 4]), "yh": (F, [2, 1, 4]), "yc": (F, [2, 1, 4])}, 14,
             [init("w", f32(1, 16, 3)), init("r", f32(1, 16, 4))], ort=False),
        case("gru14_layout1_sym", [node("GRU", ["x", "w", "r"], ["y", "yh"], hidden_size=3, layout=1,
                                        direction="bidirectional")],
             [("x", F, ["b", 4, 3])], {"y": (F, [2, 4, 2, 3]), "yh": (F, [2, 2, 3])}, 14,
             [init("w", f32(2, 9, 3)), init("r", f32(2, 9, 3))], ["--dim", "b=2"], ort=False),
        case("lstm7_only_yh", [node("LSTM", ["x", "w", "r"], ["", "yh"], hidden_size=4, direction="reverse")],
             [("x", F, [5, 2, 3])], {"yh": (F, [1, 2, 4])}, 7,
             [init("w", f32(1, 16, 3)), init("r", f32(1, 16, 4))]),
        # no hidden_size: taken from R (ORT requires the attribute; spec)
        case("lstm_hidden_from_r", [node("LSTM", ["x", "w", "r"], ["y"])],
             [("x", F, [5, 2, 3])], {"y": (F, [5, 1, 2, 4])}, 7,
             [init("w", f32(1, 16, 3)), init("r", f32(1, 16, 4))], ort=False),
        case("quantize10_uint8_default", [node("QuantizeLinear", ["x", "s"], ["y"])],
             [("x", F, [2, 3])], {"y": (U8, [2, 3])}, 10, [init("s", np.float32(0.1))]),
        case("quantize13_int8_axis", [node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=1)],
             [("x", F, [2, 3, 4])], {"y": (I8, [2, 3, 4])}, 13,
             [init("s", np.full(3, 0.1, np.float32)), init("z", np.zeros(3, np.int8))]),
        case("dequantize10", [node("DequantizeLinear", ["x", "s", "z"], ["y"])],
             [("x", U8, [2, 3])], {"y": (F, [2, 3])}, 10, [init("s", np.float32(0.1)), init("z", np.uint8(2))]),
        case("dequantize13_axis", [node("DequantizeLinear", ["x", "s"], ["y"], axis=0)],
             [("x", I8, ["n", 3])], {"y": (F, [2, 3])}, 13, [init("s", np.full(2, 0.1, np.float32))],
             ["--dim", "n=2"]),
        case("dynamic_quantize", [node("DynamicQuantizeLinear", ["x"], ["y", "ys", "yz"])],
             [("x", F, [2, 3])], {"y": (U8, [2, 3]), "ys": (F, []), "yz": (U8, [])}, 11),
    ]


def hostile_cases():
    """Malformed nodes: roamc must fail with a message (and not crash under
    ASan/UBSan), or leave what it cannot know unknown."""
    w = init("w", f32(2, 1, 3, 3))
    big = 1 << 61

    def bad(name, nodes, inputs, err, inits=(), opset=13, outs=("y",)):
        return case(name, nodes, inputs, {o: (0, None) for o in outs}, opset, inits, ort=False, expect_error=err)
    return [
        bad("bad_conv_rank2", [node("Conv", ["x", "w"], ["y"])], [("x", F, [3, 4])], "rank 2", [w]),
        bad("bad_conv_no_weight", [node("Conv", ["x"], ["y"])], [("x", F, [1, 1, 4, 4])], "expects"),
        bad("bad_conv_kernel_too_big", [node("Conv", ["x", "w"], ["y"])], [("x", F, [1, 1, 2, 2])], "kernel", [w]),
        bad("bad_conv_zero_stride", [node("Conv", ["x", "w"], ["y"], strides=[0, 1])], [("x", F, [1, 1, 4, 4])],
            "strides", [w]),
        bad("bad_conv_negative_pads", [node("Conv", ["x", "w"], ["y"], pads=[-5, 0, 0, 0])], [("x", F, [1, 1, 4, 4])],
            "pads", [w]),
        bad("bad_conv_huge_pads", [node("Conv", ["x", "w"], ["y"], pads=[big, big, 0, 0])], [("x", F, [1, 1, 4, 4])],
            "2^62", [w]),
        bad("bad_conv_huge_dilation", [node("Conv", ["x", "w"], ["y"], dilations=[big, 1])], [("x", F, [1, 1, 4, 4])],
            "dilation", [w]),
        bad("bad_conv_channels", [node("Conv", ["x", "w"], ["y"])], [("x", F, [1, 3, 4, 4])], "channels", [w]),
        bad("bad_conv_auto_pad", [node("Conv", ["x", "w"], ["y"], auto_pad="SIDEWAYS")], [("x", F, [1, 1, 4, 4])],
            "auto_pad", [w]),
        bad("bad_convt_output_shape_len", [node("ConvTranspose", ["x", "w"], ["y"], output_shape=[1, 2, 3])],
            [("x", F, [1, 2, 4, 4])], "output_shape", [init("w", f32(2, 1, 3, 3))]),
        bad("bad_convt_zero_input", [node("ConvTranspose", ["x", "w"], ["y"])],
            [("x", F, [1, 2, 0, 4])], "0", [init("w", f32(2, 1, 3, 3))]),
        bad("bad_maxpool_scalar", [node("MaxPool", ["x"], ["y"], kernel_shape=[2])], [("x", F, [])], "rank 0"),
        bad("bad_maxpool_no_kernel", [node("MaxPool", ["x"], ["y"])], [("x", F, [1, 1, 4])], "kernel_shape"),
        bad("bad_maxpool_kernel_len", [node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2])], [("x", F, [1, 1, 4])],
            "kernel_shape"),
        bad("bad_matmul_scalar", [node("MatMul", ["a", "b"], ["y"])], [("a", F, []), ("b", F, [3])], "scalar"),
        bad("bad_matmul_inner", [node("MatMul", ["a", "b"], ["y"])], [("a", F, [2, 3]), ("b", F, [4, 5])], "inner"),
        bad("bad_matmul_batch", [node("MatMul", ["a", "b"], ["y"])], [("a", F, [2, 2, 3]), ("b", F, [3, 3, 5])],
            "broadcast"),
        bad("bad_gemm_rank3", [node("Gemm", ["a", "b"], ["y"])], [("a", F, [2, 2, 3]), ("b", F, [3, 5])], "rank 3"),
        bad("bad_einsum_output_label", [node("Einsum", ["a", "b"], ["y"], equation="ij,jk->ikz")],
            [("a", F, [2, 3]), ("b", F, [3, 4])], "label", opset=12),
        bad("bad_einsum_operands", [node("Einsum", ["a"], ["y"], equation="ij,jk->ik")], [("a", F, [2, 3])],
            "operands", opset=12),
        bad("bad_einsum_ellipsis", [node("Einsum", ["a"], ["y"], equation="i..j")], [("a", F, [2, 3])],
            "ellipsis", opset=12),
        bad("bad_einsum_rank", [node("Einsum", ["a"], ["y"], equation="ijk->i")], [("a", F, [2, 3])], "rank",
            opset=12),
        bad("bad_einsum_ellipsis_ranks", [node("Einsum", ["a", "b"], ["y"], equation="...i,...i")],
            [("a", F, [2, 3, 4]), ("b", F, [3, 4])], "ellipsis", opset=12),
        bad("bad_einsum_char", [node("Einsum", ["a"], ["y"], equation="i1->i")], [("a", F, [2, 3])], "letter",
            opset=12),
        bad("bad_resize_both", [node("Resize", ["x", "", "s", "sz"], ["y"])], [("x", F, [1, 1, 4, 4])], "both",
            [init("s", np.ones(4, np.float32)), init("sz", np.ones(4, np.int64))]),
        bad("bad_resize_neither", [node("Resize", ["x", "", ""], ["y"])], [("x", F, [1, 1, 4, 4])], "neither"),
        bad("bad_resize_negative_scale", [node("Resize", ["x", "", "s"], ["y"])], [("x", F, [1, 1, 4, 4])], "scale",
            [init("s", np.array([1, 1, -2, 2], np.float32))]),
        bad("bad_resize_huge_scale", [node("Resize", ["x", "", "s"], ["y"])], [("x", F, [1, 1, 4, 4])], "range",
            [init("s", np.array([1, 1, 3e38, 2], np.float32))]),
        bad("bad_resize_sizes_len", [node("Resize", ["x", "", "", "sz"], ["y"])], [("x", F, [1, 1, 4, 4])], "sizes",
            [init("sz", np.ones(3, np.int64))]),
        bad("bad_resize_axes", [node("Resize", ["x", "", "s"], ["y"], axes=[1, 1])], [("x", F, [1, 1, 4, 4])],
            "repeated", [init("s", np.ones(2, np.float32))], opset=18),
        bad("bad_upsample7_scales_len", [node("Upsample", ["x"], ["y"], scales=[2.0])], [("x", F, [1, 1, 4, 4])],
            "scales", opset=7),
        bad("bad_depth_to_space_block0", [node("DepthToSpace", ["x"], ["y"], blocksize=0)], [("x", F, [1, 4, 2, 2])],
            "blocksize"),
        bad("bad_depth_to_space_channels", [node("DepthToSpace", ["x"], ["y"], blocksize=2)], [("x", F, [1, 6, 2, 2])],
            "multiple"),
        bad("bad_col2im_block0", [node("Col2Im", ["x", "img", "blk"], ["y"])], [("x", F, [1, 8, 16])], "block_shape",
            [init("img", np.array([5, 5], np.int64)), init("blk", np.array([0, 2], np.int64))], opset=18),
        bad("bad_rnn_direction", [node("RNN", ["x", "w", "r"], ["y"], hidden_size=4, direction="sideways")],
            [("x", F, [5, 2, 3])], "direction", [init("w", f32(1, 4, 3)), init("r", f32(1, 4, 4))], opset=7),
        bad("bad_max_unpool_output_shape", [node("MaxUnpool", ["x", "i", "os"], ["y"], kernel_shape=[2])],
            [("x", F, [1, 1, 4]), ("i", I64, [1, 1, 4])], "negative", [init("os", np.array([1, 1, -8], np.int64))],
            opset=11),
        bad("bad_roi_align_rank", [node("RoiAlign", ["x", "rois", "bi"], ["y"])],
            [("x", F, [1, 1, 4]), ("rois", F, [2, 4]), ("bi", I64, [2])], "rank 3", opset=10),
        bad("bad_convt_huge_pads", [node("ConvTranspose", ["x", "w"], ["y"], pads=[big, big, 0, 0])],
            [("x", F, [1, 2, 4, 4])], "negative", [init("w", f32(2, 1, 3, 3))]),
        bad("bad_lstm_huge_hidden", [node("LSTM", ["x", "w", "r"], ["y"], hidden_size=big)],
            [("x", F, [5, 2, 3]), ("w", F, [1, 16, 3]), ("r", F, None)], "2^62", opset=7),
        bad("bad_resize_policy_zero_dim",
            [node("Resize", ["x", "", "", "sz"], ["y"], axes=[2, 3], keep_aspect_ratio_policy="not_larger")],
            [("x", F, [1, 3, 0, 7])], "size 0", [init("sz", np.array([8, 9], np.int64))], opset=18),
        # x of unknown rank: the weight gives rank and output channels (spec)
        case("conv_unknown_x_known_w", [node("Conv", ["x", "w"], ["y"])], [("x", F, None)],
             {"y": (F, [None, 2, None, None])}, 11, [w], ort=False),
        # not_larger with an unbound input dim: both resized dims unknown (spec)
        case("resize18_policy_unbound", [node("Resize", ["x", "", "", "sz"], ["y"], axes=[2, 3],
                                              keep_aspect_ratio_policy="not_larger")],
             [("x", F, [1, 3, "h", 7])], {"y": (F, [1, 3, None, None])}, 18, [init("sz", np.array([8, 9], np.int64))],
             ort=False),
        # unknown-rank inputs: outputs stay unknown, nothing fails
        case("unknown_rank_inputs", [node("Conv", ["x", "w"], ["y"]), node("MaxPool", ["x"], ["p"], kernel_shape=[2]),
                                     node("Einsum", ["x", "x"], ["e"], equation="...i,...i"),
                                     node("LSTM", ["x", "w", "w"], ["ly"], hidden_size=2),
                                     node("Resize", ["x", "", "s"], ["r"])],
             [("x", F, None), ("w", F, None), ("s", F, None)],
             {"y": (F, None), "p": (F, None), "e": (F, None), "ly": (F, [None, 1, None, 2]), "r": (F, None)}, 14,
             ort=False),
    ]


def cases():
    return conv_cases() + pool_cases() + matmul_cases() + einsum_cases() + resize_cases() + misc_cases() + \
        hostile_cases()


# ------------------------------------------------------------------- runner

NP_NAMES = {F: "float32", D: "float64", I64: "int64", I32: "int32", U8: "uint8", I8: "int8", TP.BOOL: "bool"}


def parse_bindings(bindings):
    shapes, dims = {}, {}
    for flag, spec in zip(bindings[::2], bindings[1::2]):
        name, _, val = spec.rpartition("=")
        if flag == "--input-shape":
            shapes[name] = [int(v) for v in val.split(",")] if val else []
        else:
            dims[name] = int(val)
    return shapes, dims


def roamc_report(roamc, driver, path, bindings):
    cmd = [roamc, path] + bindings if driver else [roamc, "shapes", path] + bindings + ["--report", "json"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return None, "roamc timed out"
    if "AddressSanitizer" in r.stderr or "runtime error" in r.stderr:
        return None, "sanitizer: " + r.stderr[-2000:]
    if r.returncode != 0:
        return None, (r.stderr or r.stdout).strip()
    rep = json.loads(r.stdout)
    vals = rep.get("values", rep)
    out = {}
    items = vals.items() if isinstance(vals, dict) else ((v["name"], v) for v in vals)
    for name, v in items:
        elem = v.get("elem_type", v.get("type", 0))
        shape = v.get("shape", v.get("dims"))
        out[name] = (elem, None if shape is None else [d if isinstance(d, int) and d >= 0 else None for d in shape])
    return out, None


def ort_report(c, path, tmp):
    """Runs the case's model in ONNX Runtime with typed outputs; returns
    {name: (elem, dims)} or an error string."""
    m = onnx.ModelProto()
    m.CopyFrom(c["model"])
    del m.graph.output[:]
    for name, (elem, _) in c["expect"].items():
        m.graph.output.append(oh.make_tensor_value_info(name, elem, None))
    onnx.save(m, path)
    shapes, dims = parse_bindings(c["bindings"])
    inits = {i.name for i in m.graph.initializer}
    specs = []
    for i in m.graph.input:
        if i.name in inits:
            continue
        tt = i.type.tensor_type
        if i.name in shapes:
            shape = shapes[i.name]
        else:
            shape = [d.dim_value if d.HasField("dim_value") else dims[d.dim_param] for d in tt.shape.dim]
        spec = {"name": i.name, "dtype": NP_NAMES[tt.elem_type], "shape": shape}
        spec.update(c["ort_inputs"].get(i.name, {}))
        specs.append(spec)
    inp = os.path.join(tmp, "inputs.json")
    with open(inp, "w") as f:
        json.dump(specs, f)
    try:
        r = subprocess.run(["node", ORT_JS, path, inp], capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return "ORT timed out"
    if r.returncode != 0:
        return "ORT failed: " + r.stderr.strip()[-500:]
    return {k: (v["type"], v["shape"]) for k, v in json.loads(r.stdout).items()}


def main(argv):
    roamc = next((a for a in argv[1:] if not a.startswith("--")), "/work/main/build/roamc")
    oracle, driver = "--oracle" in argv, "--driver" in argv
    fails = 0
    only = [a.split("=", 1)[1] for a in argv if a.startswith("--only=")]
    all_cases = [c for c in cases() if not only or any(o in c["name"] for o in only)]
    with tempfile.TemporaryDirectory() as tmp:
        for c in all_cases:
            path = os.path.join(tmp, c["name"] + ".onnx")
            onnx.save(c["model"], path)
            got, err = roamc_report(roamc, driver, path, c["bindings"])
            problems = []
            if c["expect_error"] is not None:
                if err is None:
                    problems.append("expected a failure mentioning %r, got success" % c["expect_error"])
                elif err.startswith("sanitizer") or c["expect_error"] not in err:
                    problems.append("expected a failure mentioning %r, got: %s" % (c["expect_error"], err))
            elif err is not None:
                problems.append("roamc failed: " + err)
            else:
                for name, want in c["expect"].items():
                    if got.get(name) != (want[0], want[1]):
                        problems.append("%s: expected %s, got %s" % (name, want, got.get(name)))
            if oracle and c["ort"] and c["expect_error"] is None:
                ort = ort_report(c, os.path.join(tmp, c["name"] + ".ort.onnx"), tmp)
                if isinstance(ort, str):
                    problems.append(ort)
                else:
                    for name, want in c["expect"].items():
                        if ort.get(name) != (want[0], want[1]):
                            problems.append("ORT disagrees on %s: expected %s, ORT %s" % (name, want, ort.get(name)))
            print("%s %s%s" % ("FAIL" if problems else "PASS", c["name"], "".join("\n    " + p for p in problems)))
            fails += bool(problems)
    print("%s: %d/%d passed%s" % (FAMILY, len(all_cases) - fails, len(all_cases), " (with the ORT oracle)" if oracle else ""))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
