#!/usr/bin/python3
"""Writes the small forward-only ONNX graphs tests/test_train.sh derives training
steps from (onnx.helper only, no torch, so the test stays fast):

  cnn.onnx        Conv, BatchNormalization (training), Relu, MaxPool, Add (residual
                  fan-out), GlobalAveragePool, Flatten, Gemm -> logits [N, 10]
  transformer.onnx Gather (embedding), LayerNormalization, MatMul on Transpose of a
                  weight, Split, Reshape/Transpose heads, batched MatMul, Div, Softmax,
                  Dropout, the Erf form of GELU, Concat, Slice -> logits [B, S, V]
  mlp_dyn.onnx    Gemm/Sigmoid/Tanh/Mul/Sub with a symbolic batch 'N' -> [N, 4]
  scalar.onnx     a graph that computes its own scalar loss (ReduceMean of a square)
  bad_noinit.onnx  no initializer at all (the weights are graph inputs)
  bad_intout.onnx  the only output is int64 (ArgMax)
  bad_unknown.onnx an operator of another domain on the gradient path
  bad_nograd.onnx  the only float initializer feeds a non-differentiable input
usage: gen_train_models.py OUTDIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh


def init(name, *shape, dtype=np.float32):
    return nh.from_array(np.zeros(shape, dtype=dtype), name)


def save(nodes, inputs, outputs, inits, path, opset=17):
    g = h.make_graph(nodes, os.path.basename(path), inputs, outputs, initializer=inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset), h.make_opsetid("custom.domain", 1)])
    m.ir_version = 8
    onnx.save(m, path)


def cnn(path):
    n = []
    n.append(h.make_node("Conv", ["x", "c1.w", "c1.b"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
    n.append(h.make_node("BatchNormalization", ["c1", "bn.g", "bn.b", "bn.m", "bn.v"], ["bn", "bn.m_out", "bn.v_out"],
                         training_mode=1))
    n.append(h.make_node("Relu", ["bn"], ["r1"]))
    n.append(h.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]))
    n.append(h.make_node("Conv", ["p1", "c2.w"], ["c2"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
    n.append(h.make_node("Relu", ["c2"], ["r2"]))
    n.append(h.make_node("Add", ["r2", "p1"], ["res"]))
    n.append(h.make_node("AveragePool", ["res"], ["ap"], kernel_shape=[2, 2], strides=[2, 2]))
    n.append(h.make_node("GlobalAveragePool", ["ap"], ["gap"]))
    n.append(h.make_node("Flatten", ["gap"], ["flat"]))
    n.append(h.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["logits"], transB=1))
    inits = [init("c1.w", 8, 3, 3, 3), init("c1.b", 8), init("bn.g", 8), init("bn.b", 8), init("bn.m", 8),
             init("bn.v", 8), init("c2.w", 8, 8, 3, 3), init("fc.w", 10, 8), init("fc.b", 10)]
    save(n, [h.make_tensor_value_info("x", T.FLOAT, [4, 3, 16, 16])],
         [h.make_tensor_value_info("logits", T.FLOAT, [4, 10])], inits, path)


def transformer(path):
    B, S, H, V, NH = 2, 8, 16, 32, 2
    n = []
    c = lambda name, v, dt=np.int64: n.append(h.make_node("Constant", [], [name], value=nh.from_array(np.array(v, dtype=dt), name)))
    n.append(h.make_node("Gather", ["emb.w", "ids"], ["e"]))
    n.append(h.make_node("Add", ["e", "pos.w"], ["e2"]))
    n.append(h.make_node("LayerNormalization", ["e2", "ln.g", "ln.b"], ["h0"], axis=-1))
    n.append(h.make_node("Transpose", ["qkv.w"], ["qkv.wt"], perm=[1, 0]))
    n.append(h.make_node("MatMul", ["h0", "qkv.wt"], ["qkv"]))
    n.append(h.make_node("Split", ["qkv"], ["q", "k", "v"], axis=2))
    c("hs", [B, S, NH, H // NH])
    for t in "qkv":
        n.append(h.make_node("Reshape", [t, "hs"], [t + "4"]))
    n.append(h.make_node("Transpose", ["q4"], ["qt"], perm=[0, 2, 1, 3]))
    n.append(h.make_node("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1]))
    n.append(h.make_node("Transpose", ["v4"], ["vt"], perm=[0, 2, 1, 3]))
    n.append(h.make_node("MatMul", ["qt", "kt"], ["sc"]))
    c("scale", 2.0, np.float32)
    n.append(h.make_node("Div", ["sc", "scale"], ["sc2"]))
    n.append(h.make_node("Softmax", ["sc2"], ["pr"], axis=-1))
    c("ratio", 0.1, np.float32)
    c("train", True, np.bool_)
    n.append(h.make_node("Dropout", ["pr", "ratio", "train"], ["prd"]))
    n.append(h.make_node("MatMul", ["prd", "vt"], ["ctx"]))
    n.append(h.make_node("Transpose", ["ctx"], ["ctxt"], perm=[0, 2, 1, 3]))
    c("hs2", [B, S, H])
    n.append(h.make_node("Reshape", ["ctxt", "hs2"], ["att"]))
    n.append(h.make_node("Add", ["att", "h0"], ["h1"]))
    # GELU as torch.onnx writes it: x * 0.5 * (1 + erf(x / sqrt 2))
    n.append(h.make_node("MatMul", ["h1", "fc.w"], ["f"]))
    c("sq2", 1.4142135, np.float32)
    c("one", 1.0, np.float32)
    c("half", 0.5, np.float32)
    n.append(h.make_node("Div", ["f", "sq2"], ["g1"]))
    n.append(h.make_node("Erf", ["g1"], ["g2"]))
    n.append(h.make_node("Add", ["g2", "one"], ["g3"]))
    n.append(h.make_node("Mul", ["f", "g3"], ["g4"]))
    n.append(h.make_node("Mul", ["g4", "half"], ["g5"]))
    n.append(h.make_node("Concat", ["g5", "h1"], ["cat"], axis=2))
    c("st", [0]), c("en", [2 * H]), c("ax", [2])
    n.append(h.make_node("Slice", ["cat", "st", "en", "ax"], ["sl"]))
    n.append(h.make_node("MatMul", ["sl", "out.w"], ["logits"]))
    inits = [init("emb.w", V, H), init("pos.w", S, H), init("ln.g", H), init("ln.b", H), init("qkv.w", 3 * H, H),
             init("fc.w", H, 2 * H), init("out.w", 2 * H, V)]
    save(n, [h.make_tensor_value_info("ids", T.INT64, [B, S])],
         [h.make_tensor_value_info("logits", T.FLOAT, [B, S, V])], inits, path)


def mlp_dyn(path):
    n = [h.make_node("Gemm", ["x", "w1", "b1"], ["a"]),
         h.make_node("Sigmoid", ["a"], ["s"]),
         h.make_node("Tanh", ["a"], ["t"]),
         h.make_node("Mul", ["s", "t"], ["m"]),
         h.make_node("Sub", ["m", "b2"], ["d"]),
         h.make_node("Gemm", ["d", "w2"], ["y"])]
    save(n, [h.make_tensor_value_info("x", T.FLOAT, ["N", 6])], [h.make_tensor_value_info("y", T.FLOAT, ["N", 4])],
         [init("w1", 6, 5), init("b1", 5), init("b2", 5), init("w2", 5, 4)], path)


def scalar(path):
    n = [h.make_node("MatMul", ["x", "w"], ["y"]),
         h.make_node("Mul", ["y", "y"], ["sq"]),
         h.make_node("ReduceMean", ["sq"], ["loss"], keepdims=0)]
    save(n, [h.make_tensor_value_info("x", T.FLOAT, [3, 4])], [h.make_tensor_value_info("loss", T.FLOAT, [])],
         [init("w", 4, 2)], path)


def bad(path_dir):
    n = [h.make_node("MatMul", ["x", "w"], ["y"])]
    save(n, [h.make_tensor_value_info("x", T.FLOAT, [3, 4]), h.make_tensor_value_info("w", T.FLOAT, [4, 2])],
         [h.make_tensor_value_info("y", T.FLOAT, [3, 2])], [], os.path.join(path_dir, "bad_noinit.onnx"))
    n = [h.make_node("MatMul", ["x", "w"], ["y"]), h.make_node("ArgMax", ["y"], ["cls"], axis=1)]
    save(n, [h.make_tensor_value_info("x", T.FLOAT, [3, 4])], [h.make_tensor_value_info("cls", T.INT64, [3, 1])],
         [init("w", 4, 2)], os.path.join(path_dir, "bad_intout.onnx"))
    n = [h.make_node("MatMul", ["x", "w"], ["y"]),
         h.make_node("Frobnicate", ["y"], ["z"], domain="custom.domain", name="my_custom_op"),
         h.make_node("Relu", ["z"], ["out"])]
    m_in = [h.make_tensor_value_info("x", T.FLOAT, [3, 4])]
    g = h.make_graph(n, "bad_unknown", m_in, [h.make_tensor_value_info("out", T.FLOAT, [3, 2])],
                     initializer=[init("w", 4, 2)], value_info=[h.make_tensor_value_info("z", T.FLOAT, [3, 2])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17), h.make_opsetid("custom.domain", 1)])
    m.ir_version = 8
    onnx.save(m, os.path.join(path_dir, "bad_unknown.onnx"))
    n = [h.make_node("Shape", ["w"], ["ws"]), h.make_node("Cast", ["ws"], ["wf"], to=T.FLOAT),
         h.make_node("Mul", ["x", "wf"], ["y"])]
    save(n, [h.make_tensor_value_info("x", T.FLOAT, [2])], [h.make_tensor_value_info("y", T.FLOAT, [2])],
         [init("w", 4, 2)], os.path.join(path_dir, "bad_nograd.onnx"))


def main():
    d = sys.argv[1]
    os.makedirs(d, exist_ok=True)
    cnn(os.path.join(d, "cnn.onnx"))
    transformer(os.path.join(d, "transformer.onnx"))
    mlp_dyn(os.path.join(d, "mlp_dyn.onnx"))
    scalar(os.path.join(d, "scalar.onnx"))
    bad(d)


if __name__ == "__main__":
    main()
