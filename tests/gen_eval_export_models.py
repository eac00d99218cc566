#!/usr/bin/python3
"""Writes the forward graphs tests/test_eval_export.sh gives `roamc --train` (onnx.helper
only): each mark of an inference (eval-mode) export that frontend/train/train_export.c
reads, beside its training-mode twin.

  bn_train.onnx / bn_inf.onnx      Conv -> BatchNormalization -> Relu -> GAP -> Gemm, opset 17:
                                   training_mode=1 with running-stat outputs / inference form
  bn_inf13.onnx                    the inference form at opset 13 (one output, no attribute)
  drop_train.onnx / drop_inf.onnx  Gemm -> Relu -> Dropout(ratio 0.3) -> Gemm: training_mode a
                                   constant true / false
  drop_absent.onnx                 Dropout(x) alone: ratio 0.5 and training_mode false by default
  drop_op11.onnx                   opset 11, ratio attribute 0.3, no mask output
  drop_p0.onnx                     ratio 0, training_mode false (a view either way: no message)
  folded.onnx                      producer pytorch, Conv weight 'onnx::Conv_7' with a bias, no
                                   BatchNormalization (torch.onnx's eval-mode fusion)
  folded_other.onnx                the same from another producer (not reported)
  named_pytorch.onnx               producer pytorch, Conv weight 'conv.weight' (not reported)
  attn_nodrop.onnx                 producer pytorch, MatMul -> Softmax -> MatMul, no Dropout
  attn_other.onnx                  the same from another producer (not reported)
usage: gen_eval_export_models.py OUTDIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh


def init(name, *shape):
    return nh.from_array(np.full(shape, 0.1, dtype=np.float32), name)


def const(name, value, dtype):
    return h.make_node("Constant", [], [name], value=nh.from_array(np.array(value, dtype=dtype), name))


def save(path, nodes, inputs, outputs, inits, opset=17, producer=None):
    g = h.make_graph(nodes, os.path.basename(path), inputs, outputs, initializer=inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 8
    if producer:
        m.producer_name, m.producer_version = producer, "1.13.1"
    onnx.save(m, path)


X4 = [h.make_tensor_value_info("x", T.FLOAT, [4, 3, 16, 16])]
LOGITS = [h.make_tensor_value_info("logits", T.FLOAT, [4, 10])]


def bn(path, training, opset=17):
    n = [h.make_node("Conv", ["x", "conv.weight"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], name="conv")]
    if training:
        n.append(h.make_node("BatchNormalization", ["c", "bn.g", "bn.b", "bn.m", "bn.v"], ["b", "bn.m_out", "bn.v_out"],
                             training_mode=1, name="bn"))
    else:
        n.append(h.make_node("BatchNormalization", ["c", "bn.g", "bn.b", "bn.m", "bn.v"], ["b"], name="bn"))
    n += [h.make_node("Relu", ["b"], ["r"]), h.make_node("GlobalAveragePool", ["r"], ["gap"]),
          h.make_node("Flatten", ["gap"], ["flat"]), h.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["logits"], transB=1)]
    inits = [init("conv.weight", 8, 3, 3, 3), init("bn.g", 8), init("bn.b", 8), init("bn.m", 8), init("bn.v", 8),
             init("fc.w", 10, 8), init("fc.b", 10)]
    save(path, n, X4, LOGITS, inits, opset)


def mlp_dropout(path, drop_nodes, opset=17):
    n = [h.make_node("Gemm", ["x", "fc1.w", "fc1.b"], ["h"], transB=1), h.make_node("Relu", ["h"], ["r"])]
    n += drop_nodes
    n.append(h.make_node("Gemm", ["d", "fc2.w", "fc2.b"], ["logits"], transB=1))
    save(path, n, [h.make_tensor_value_info("x", T.FLOAT, [4, 32])], LOGITS,
         [init("fc1.w", 64, 32), init("fc1.b", 64), init("fc2.w", 10, 64), init("fc2.b", 10)], opset)


def conv_plain(path, weight, producer):
    n = [h.make_node("Conv", ["x", weight, "onnx::Conv_8"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], name="/conv/Conv"),
         h.make_node("Relu", ["c"], ["r"]), h.make_node("GlobalAveragePool", ["r"], ["gap"]),
         h.make_node("Flatten", ["gap"], ["flat"]), h.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["logits"], transB=1)]
    save(path, n, X4, LOGITS, [init(weight, 8, 3, 3, 3), init("onnx::Conv_8", 8), init("fc.w", 10, 8), init("fc.b", 10)],
         producer=producer)


def attention(path, producer):
    n = [h.make_node("MatMul", ["x", "wq"], ["q"]), h.make_node("Transpose", ["q"], ["qt"], perm=[0, 2, 1]),
         h.make_node("MatMul", ["q", "qt"], ["s"]), h.make_node("Softmax", ["s"], ["p"], axis=-1),
         h.make_node("MatMul", ["p", "q"], ["y"]), h.make_node("ReduceMean", ["y"], ["m"], axes=[1], keepdims=0),
         h.make_node("Gemm", ["m", "fc.w", "fc.b"], ["logits"], transB=1)]
    save(path, n, [h.make_tensor_value_info("x", T.FLOAT, [4, 6, 16])], LOGITS,
         [init("wq", 16, 16), init("fc.w", 10, 16), init("fc.b", 10)], opset=13, producer=producer)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    p = lambda name: os.path.join(out, name)
    bn(p("bn_train.onnx"), True)
    bn(p("bn_inf.onnx"), False)
    bn(p("bn_inf13.onnx"), False, opset=13)
    for name, mode in (("drop_train.onnx", True), ("drop_inf.onnx", False)):
        mlp_dropout(p(name), [const("ratio", 0.3, np.float32), const("mode", mode, np.bool_),
                              h.make_node("Dropout", ["r", "ratio", "mode"], ["d"], name="drop")])
    mlp_dropout(p("drop_absent.onnx"), [h.make_node("Dropout", ["r"], ["d"], name="drop")])
    mlp_dropout(p("drop_op11.onnx"), [h.make_node("Dropout", ["r"], ["d"], ratio=0.3, name="drop")], opset=11)
    mlp_dropout(p("drop_p0.onnx"), [const("ratio", 0.0, np.float32), const("mode", False, np.bool_),
                                    h.make_node("Dropout", ["r", "ratio", "mode"], ["d"], name="drop")])
    conv_plain(p("folded.onnx"), "onnx::Conv_7", "pytorch")
    conv_plain(p("folded_other.onnx"), "onnx::Conv_7", "tf2onnx")
    conv_plain(p("named_pytorch.onnx"), "conv.weight", "pytorch")
    attention(p("attn_nodrop.onnx"), "pytorch")
    attention(p("attn_other.onnx"), "skl2onnx")


if __name__ == "__main__":
    main()
