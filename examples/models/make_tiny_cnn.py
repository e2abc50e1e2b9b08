#!/usr/bin/env python3
"""Writes tiny_cnn.onnx: a small image classifier (3x32x32 -> 10 classes) with fixed
pseudo-random weights, used by the C and Rust examples, and tiny_cnn_batch.onnx, the same
model with a dynamic batch axis (the C example's batch.c). Regenerate with
`python3 examples/models/make_tiny_cnn.py` (needs onnx and numpy)."""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(7)


def w(name, *shape, scale=0.2):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


inits = [
    w("c1_w", 16, 3, 3, 3), w("c1_b", 16, scale=0.05),
    w("bn_scale", 16, scale=0.1), w("bn_bias", 16, scale=0.1), w("bn_mean", 16, scale=0.1),
    numpy_helper.from_array(np.abs(rng.standard_normal(16)).astype(np.float32) + 0.5, "bn_var"),
    w("c2_w", 32, 16, 3, 3, scale=0.1), w("c2_b", 32, scale=0.05),
    w("fc_w", 10, 32, scale=0.3), w("fc_b", 10, scale=0.1),
]
nodes = [
    helper.make_node("Conv", ["image", "c1_w", "c1_b"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
    helper.make_node("BatchNormalization", ["c1", "bn_scale", "bn_bias", "bn_mean", "bn_var"], ["bn1"], name="bn1"),
    helper.make_node("Relu", ["bn1"], ["r1"], name="relu1"),
    helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
    helper.make_node("Conv", ["p1", "c2_w", "c2_b"], ["c2"], name="conv2", pads=[1, 1, 1, 1], strides=[2, 2]),
    helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
    helper.make_node("GlobalAveragePool", ["r2"], ["gap"], name="gap"),
    helper.make_node("Flatten", ["gap"], ["flat"], name="flatten"),
    helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], name="fc", transB=1),
    helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=1),
]
here = os.path.dirname(os.path.abspath(__file__))
# tiny_cnn.onnx takes one image; tiny_cnn_batch.onnx (same weights) a dynamic batch axis, as
# exporters write it (torch.onnx.export(..., dynamic_axes={"image": {0: "batch"}})).
for file, batch in [("tiny_cnn.onnx", 1), ("tiny_cnn_batch.onnx", "batch")]:
    graph = helper.make_graph(
        nodes, "tiny_cnn",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [batch, 3, 32, 32])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [batch, 10])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="onnxc-examples")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(here, file))
