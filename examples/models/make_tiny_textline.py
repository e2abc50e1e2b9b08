#!/usr/bin/env python3
"""Writes tiny_textline.onnx: a small CRNN text-line recognizer over a `[1, 1, 16, w]` line
of any width (two 3x3 conv + ReLU + 2x2 pool stages, a 4x1 conv to one row, a bidirectional
LSTM over the w/4 steps, a softmax over 11 labels, 0 the CTC blank), with fixed
pseudo-random weights, as exporters write it with a dynamic width axis. Used by the C
example's textline.c. Regenerate with `python3 examples/models/make_tiny_textline.py`
(needs onnx and numpy; with onnxruntime it also prints the labels textline.c decodes)."""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(6)


def w(name, *shape, scale=None):
    fan = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    s = scale if scale is not None else 1.0 / np.sqrt(fan)
    return numpy_helper.from_array((rng.standard_normal(shape) * s).astype(np.float32), name)


H, LABELS = 16, 11
inits = [
    w("c1_w", 8, 1, 3, 3), w("c1_b", 8, scale=0.1),
    w("c2_w", 16, 8, 3, 3), w("c2_b", 16, scale=0.1),
    w("c3_w", 16, 16, 4, 1), w("c3_b", 16, scale=0.1),
    w("lstm_w", 2, 4 * H, 16), w("lstm_r", 2, 4 * H, H), w("lstm_b", 2, 8 * H, scale=0.1),
    w("head_w", 2 * H, LABELS, scale=1.5), w("head_b", LABELS, scale=0.1),
    numpy_helper.from_array(np.array([2], np.int64), "row_axis"),
    numpy_helper.from_array(np.array([0, 0, -1], np.int64), "steps_shape"),
]
nodes = [
    helper.make_node("Conv", ["image", "c1_w", "c1_b"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
    helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
    helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
    helper.make_node("Conv", ["p1", "c2_w", "c2_b"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
    helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
    helper.make_node("MaxPool", ["r2"], ["p2"], name="pool2", kernel_shape=[2, 2], strides=[2, 2]),
    helper.make_node("Conv", ["p2", "c3_w", "c3_b"], ["c3"], name="conv3"),  # [1, 16, 1, w/4]
    helper.make_node("Squeeze", ["c3", "row_axis"], ["row"], name="squeeze"),
    helper.make_node("Transpose", ["row"], ["seq"], name="to_steps", perm=[2, 0, 1]),  # [w/4, 1, 16]
    helper.make_node("LSTM", ["seq", "lstm_w", "lstm_r", "lstm_b"], ["ly"], name="lstm",
                     hidden_size=H, direction="bidirectional"),
    helper.make_node("Transpose", ["ly"], ["lt"], name="dirs_last", perm=[0, 2, 1, 3]),
    helper.make_node("Reshape", ["lt", "steps_shape"], ["feats"], name="concat_dirs"),
    helper.make_node("MatMul", ["feats", "head_w"], ["logits0"], name="head"),
    helper.make_node("Add", ["logits0", "head_b"], ["logits"], name="head_bias"),
    helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=2),
]
graph = helper.make_graph(
    nodes, "tiny_textline",
    [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 1, 16, "w"])],
    [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["steps", 1, LABELS])],
    inits,
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
onnx.checker.check_model(model)
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tiny_textline.onnx")
onnx.save(model, out)
print("wrote", out)


def line(width: int) -> np.ndarray:
    """textline.c's synthetic line: vertical strokes whose spacing changes along it."""
    y, x = np.meshgrid(np.arange(16), np.arange(width), indexing="ij")
    return (((x * (x % 7 + 3) + y * 5) % 13) / 12.0 - 0.5).astype(np.float32)[None, None]


try:
    import onnxruntime as ort
except ImportError:
    ort = None
if ort is not None:
    sess = ort.InferenceSession(out, providers=["CPUExecutionProvider"])
    for width in (40, 96):
        probs = sess.run(None, {"image": line(width)})[0][:, 0]
        # textline.c's checksum: sum over steps t and labels k of p · (t + 1) · (k + 1).
        t, k = np.meshgrid(np.arange(probs.shape[0]), np.arange(probs.shape[1]), indexing="ij")
        checksum = float(np.sum(probs.astype(np.float64) * (t + 1) * (k + 1)))
        print(f"width {width}: {probs.shape[0]} steps, checksum {checksum:.4f}")
