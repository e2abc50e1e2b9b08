#!/usr/bin/env python3
"""Generates the benchmark models that cover work the light_* zoo models do not:
an MLP, a MobileNet-style depthwise-separable CNN, a small transformer encoder and a model of
many small ops. Weights are seeded normal random values (not uniform), so no optimization can
profit from special weight values."""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from onnx_builder import GraphBuilder  # noqa: E402

OPSET = 17


class G(GraphBuilder):
    def __init__(self, seed: int):
        super().__init__(seed, vector_fan_in="len")

    def model(self, name, inp, shape, out, out_shape):
        g = helper.make_graph(self.nodes, name, [helper.make_tensor_value_info(inp, TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info(out, TensorProto.FLOAT, out_shape)], self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="onnxc-bench")
        m.ir_version = 8
        onnx.checker.check_model(m)
        return m


def mlp():
    g = G(1)
    x = "x"
    for din, dout in [(784, 512), (512, 512), (512, 256)]:
        x = g.op("Relu", [g.op("Gemm", [x, g.w(dout, din), g.w(dout, scale=0.1)], transB=1)])
    x = g.op("Softmax", [g.op("Gemm", [x, g.w(10, 256), g.w(10, scale=0.1)], transB=1)], axis=1)
    return g.model("mlp", "x", [1, 784], x, [1, 10])


def bn(g, x, c):
    scale = g.w(c, scale=0.1)
    g.inits[-1].CopyFrom(numpy_helper.from_array(1.0 + numpy_helper.to_array(g.inits[-1]), g.inits[-1].name))
    var_name = g.w(c, scale=0.1)
    g.inits[-1].CopyFrom(numpy_helper.from_array(np.abs(numpy_helper.to_array(g.inits[-1])) + 0.5, g.inits[-1].name))
    return g.op("BatchNormalization", [x, scale, g.w(c, scale=0.1), g.w(c, scale=0.1), var_name])


def mobilenet():
    """MobileNet-v1 style: 3x3 conv, then depthwise 3x3 + pointwise 1x1 blocks with BN+ReLU6."""
    g = G(2)
    def relu6(t):
        return g.op("Clip", [t, g.const(0.0), g.const(6.0)])

    x = relu6(bn(g, g.op("Conv", ["x", g.w(32, 3, 3, 3)], strides=[2, 2], pads=[1, 1, 1, 1]), 32))
    cin = 32
    for cout, stride in [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), (512, 1), (512, 1), (1024, 2)]:
        x = relu6(bn(g, g.op("Conv", [x, g.w(cin, 1, 3, 3)], strides=[stride, stride], pads=[1, 1, 1, 1], group=cin), cin))
        x = relu6(bn(g, g.op("Conv", [x, g.w(cout, cin, 1, 1)]), cout))
        cin = cout
    x = g.op("Flatten", [g.op("GlobalAveragePool", [x])])
    x = g.op("Softmax", [g.op("Gemm", [x, g.w(1000, 1024), g.w(1000, scale=0.1)], transB=1)], axis=1)
    return g.model("mobilenet", "x", [1, 3, 224, 224], x, [1, 1000])


def transformer():
    """Two pre-LayerNorm encoder layers: d=256, 4 heads, seq 128, GELU MLP (x4), written the
    way exporters emit them (MatMul + Add, Reshape/Transpose heads, Erf-based GELU)."""
    g = G(3)
    s, d, h = 128, 256, 4
    dh = d // h
    x = "x"
    for _ in range(2):
        ln = g.op("LayerNormalization", [x, g.w(d, scale=0.1), g.w(d, scale=0.1)], axis=-1, epsilon=1e-5)
        heads = []
        for _ in range(3):
            p = g.op("Add", [g.op("MatMul", [ln, g.w(d, d)]), g.w(d, scale=0.1)])
            p = g.op("Reshape", [p, g.const([1, s, h, dh], np.int64)])
            heads.append(g.op("Transpose", [p], perm=[0, 2, 1, 3]))
        q, k, v = heads
        kt = g.op("Transpose", [k], perm=[0, 1, 3, 2])
        sc = g.op("Mul", [g.op("MatMul", [q, kt]), g.const(1.0 / np.sqrt(dh))])
        a = g.op("MatMul", [g.op("Softmax", [sc], axis=-1), v])
        a = g.op("Reshape", [g.op("Transpose", [a], perm=[0, 2, 1, 3]), g.const([1, s, d], np.int64)])
        x = g.op("Add", [x, g.op("Add", [g.op("MatMul", [a, g.w(d, d)]), g.w(d, scale=0.1)])])
        ln = g.op("LayerNormalization", [x, g.w(d, scale=0.1), g.w(d, scale=0.1)], axis=-1, epsilon=1e-5)
        hdn = g.op("Add", [g.op("MatMul", [ln, g.w(d, 4 * d)]), g.w(4 * d, scale=0.1)])
        erf = g.op("Erf", [g.op("Div", [hdn, g.const(np.sqrt(2.0))])])
        f = g.op("Mul", [g.op("Mul", [hdn, g.const(0.5)]), g.op("Add", [erf, g.const(1.0)])])
        x = g.op("Add", [x, g.op("Add", [g.op("MatMul", [f, g.w(4 * d, d)]), g.w(d, scale=0.1)])])
    return g.model("transformer", "x", [1, s, d], x, [1, s, d])


def small_ops():
    """~300 small ops on a [1, 64] tensor (Add, Mul, Tanh/Relu, Reshape, Transpose):
    per-op overhead dominates."""
    g = G(4)
    x = "x"
    for i in range(50):
        x = g.op("Add", [x, g.w(64, scale=0.1)])
        x = g.op("Mul", [x, g.const(0.9)])
        x = g.op("Tanh", [x]) if i % 2 else g.op("Relu", [x])
        x = g.op("Reshape", [x, g.const([8, 8], np.int64)])
        x = g.op("Transpose", [x], perm=[1, 0])
        x = g.op("Reshape", [x, g.const([1, 64], np.int64)])
    return g.model("small_ops", "x", [1, 64], x, [1, 64])


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for fn in (mlp, mobilenet, transformer, small_ops):
        m = fn()
        onnx.save(m, os.path.join(a.out, f"{fn.__name__}.onnx"))
        print("wrote", fn.__name__, sum(1 for _ in m.graph.node), "nodes")


if __name__ == "__main__":
    main()
