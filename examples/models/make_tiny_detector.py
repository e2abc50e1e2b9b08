#!/usr/bin/env python3
"""Writes tiny_detector.onnx: a small single-shot detector (3x32x32 image, an 8x8 grid of
anchors, 3 classes) with fixed pseudo-random weights that ends as exported detectors do, in
NonMaxSuppression and gathers of the kept boxes, classes and scores: its outputs have as many
rows as boxes survive. Used by the C example's detect.c. Regenerate with
`python3 examples/models/make_tiny_detector.py` (needs onnx and numpy)."""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(11)


def w(name, *shape, scale=0.3):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def const(name, value, dtype=np.float32):
    return numpy_helper.from_array(np.array(value, dtype), name)


# Anchor centers: the 8x8 grid's cells, in pixels.
ys, xs = np.meshgrid(np.arange(8), np.arange(8), indexing="ij")
centers = np.stack([xs.ravel(), ys.ravel()], axis=1).astype(np.float32) * 4 + 2
inits = [
    w("c1_w", 16, 3, 3, 3), w("c1_b", 16, scale=0.05),
    w("box_w", 4, 16, 1, 1), w("box_b", 4, scale=0.05),
    w("cls_w", 3, 16, 1, 1), w("cls_b", 3, scale=0.05),
    const("centers", centers[None]),  # [1, 64, 2]
    const("size", [[[12.0, 12.0]]]),
    const("grid_shape", [1, 4, 64], np.int64), const("cls_shape", [1, 3, 64], np.int64),
    const("max_boxes", [20], np.int64), const("iou", [0.45]), const("min_score", [0.6]),
    const("class_col", 1, np.int64), const("box_col", 2, np.int64),
    const("xy", [0, 1], np.int64), const("wh", [2, 3], np.int64),
]
nodes = [
    helper.make_node("Conv", ["image", "c1_w", "c1_b"], ["c1"], name="conv1", pads=[1, 1, 1, 1], strides=[2, 2]),
    helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
    helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
    # Boxes: [cx, cy, w, h] per anchor, as center offsets and log sizes.
    helper.make_node("Conv", ["p1", "box_w", "box_b"], ["box_raw"], name="box_head"),
    helper.make_node("Reshape", ["box_raw", "grid_shape"], ["box_flat"], name="box_flat"),
    helper.make_node("Transpose", ["box_flat"], ["box_t"], name="box_t", perm=[0, 2, 1]),
    helper.make_node("Gather", ["box_t", "xy"], ["offset"], name="offset", axis=2),
    helper.make_node("Gather", ["box_t", "wh"], ["log_wh"], name="log_wh", axis=2),
    helper.make_node("Add", ["offset", "centers"], ["center"], name="center"),
    helper.make_node("Exp", ["log_wh"], ["scale"], name="scale"),
    helper.make_node("Mul", ["scale", "size"], ["wh_px"], name="wh_px"),
    helper.make_node("Concat", ["center", "wh_px"], ["boxes_all"], name="boxes_all", axis=2),
    # Scores: [1, classes, anchors].
    helper.make_node("Conv", ["p1", "cls_w", "cls_b"], ["cls_raw"], name="cls_head"),
    helper.make_node("Reshape", ["cls_raw", "cls_shape"], ["cls_flat"], name="cls_flat"),
    helper.make_node("Sigmoid", ["cls_flat"], ["scores_all"], name="scores_all"),
    helper.make_node("NonMaxSuppression", ["boxes_all", "scores_all", "max_boxes", "iou", "min_score"],
                     ["selected"], name="nms", center_point_box=1),
    # The kept boxes, their classes and scores.
    helper.make_node("Gather", ["selected", "box_col"], ["box_idx"], name="box_idx", axis=1),
    helper.make_node("Squeeze", ["boxes_all"], ["boxes_2d"], name="boxes_2d"),
    helper.make_node("Gather", ["boxes_2d", "box_idx"], ["boxes"], name="boxes", axis=0),
    helper.make_node("Gather", ["selected", "class_col"], ["classes"], name="classes", axis=1),
    helper.make_node("GatherND", ["scores_all", "selected"], ["scores"], name="scores"),
]
graph = helper.make_graph(
    nodes, "tiny_detector",
    [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 32, 32])],
    [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, ["detections", 4]),
     helper.make_tensor_value_info("classes", TensorProto.INT64, ["detections"]),
     helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["detections"])],
    inits,
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="onnxc-examples")
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, os.path.join(os.path.dirname(os.path.abspath(__file__)), "tiny_detector.onnx"))
