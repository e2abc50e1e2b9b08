#!/usr/bin/env python3
"""Writes tiny_yolo.onnx: a YOLOv5-style detector head as exported with dynamic axes, over
`[1, 3, H, W]` with fixed pseudo-random weights: three 3x3 convolutions of stride 2 to a
stride-8 map, a 1x1 head of 3 anchors x (4 box + 1 objectness + 2 classes), its anchor grid
made from Range over the map's Shape (as `torch.arange(ny)` exports), boxes decoded as
YOLOv5 does, then NonMaxSuppression and gathers of the kept boxes and classes. Valid at any
size; compiled with run-time dims it is taken at multiples of 32. Used by the CLI tests and
tests/bench/run_time_dims.py. Regenerate with `python3 examples/models/make_tiny_yolo.py`
(needs onnx and numpy)."""
import os

import numpy as np
import onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh


def build(path: str, hw=("H", "W"), seed: int = 7) -> str:
    """The model over `[1, 3, H, W]`, `hw` names (symbolic dims) or sizes."""
    rng = np.random.default_rng(seed)
    inits, nodes = [], []

    def wt(*shape, scale=None):
        n = f"w{len(inits)}"
        fan = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        s = scale if scale is not None else 1 / np.sqrt(fan)
        inits.append(nh.from_array((rng.standard_normal(shape) * s).astype(np.float32), n))
        return n

    def c(v, dt=np.int64):
        n = f"c{len(inits)}"
        inits.append(nh.from_array(np.array(v, dt), n))
        return n

    def op(t, ins, **kw):
        o = f"t{len(nodes)}"
        nodes.append(h.make_node(t, ins, [o], **kw))
        return o

    def f(v):
        return c(v, np.float32)

    na, nc, stride = 3, 2, 8.0
    no = 5 + nc
    x, cin = "image", 3
    for cout in [8, 16, 32]:
        conv = op("Conv", [x, wt(cout, cin, 3, 3), wt(cout, scale=0.1)], pads=[1] * 4, strides=[2, 2])
        x, cin = op("Relu", [conv]), cout
    p = op("Conv", [x, wt(na * no, cin, 1, 1), wt(na * no, scale=0.1)])  # [1, na*no, ny, nx]
    s = op("Shape", [p])
    ny, nx = op("Gather", [s, c(2)], axis=0), op("Gather", [s, c(3)], axis=0)
    uy, ux = op("Unsqueeze", [ny, c([0])]), op("Unsqueeze", [nx, c([0])])
    shape5 = op("Concat", [c([1, na, no]), uy, ux], axis=0)
    y = op("Sigmoid", [op("Transpose", [op("Reshape", [p, shape5])], perm=[0, 1, 3, 4, 2])])
    # The grid: [1, 1, ny, nx, 2] of (x, y) cell indices.
    ry = op("Cast", [op("Range", [c(0), ny, c(1)])], to=T.FLOAT)
    rx = op("Cast", [op("Range", [c(0), nx, c(1)])], to=T.FLOAT)
    yx = op("Concat", [uy, ux], axis=0)
    gy = op("Expand", [op("Unsqueeze", [ry, c([1])]), yx])
    gx = op("Expand", [op("Unsqueeze", [rx, c([0])]), yx])
    grid = op("Unsqueeze", [op("Concat", [op("Unsqueeze", [gx, c([2])]), op("Unsqueeze", [gy, c([2])])],
                                  axis=2), c([0, 1])])
    part = lambda a, b: op("Slice", [y, c([a]), c([b]), c([4])])  # noqa: E731
    xy = op("Mul", [op("Add", [op("Sub", [op("Mul", [part(0, 2), f(2.0)]), f(0.5)]), grid]), f(stride)])
    anchors = f(np.array([[10, 13], [16, 30], [33, 23]], np.float32).reshape(1, na, 1, 1, 2))
    wh = op("Mul", [op("Pow", [op("Mul", [part(2, 4), f(2.0)]), f(2.0)]), anchors])
    boxes = op("Reshape", [op("Concat", [xy, wh], axis=4), c([1, -1, 4])])  # [1, N, 4]
    scores = op("Transpose", [op("Reshape", [op("Mul", [part(4, 5), part(5, no)]), c([1, -1, nc])])],
                perm=[0, 2, 1])  # [1, nc, N]
    sel = op("NonMaxSuppression", [boxes, scores, c([30]), f([0.45]), f([0.25])], center_point_box=1)
    kept = op("Gather", [sel, c(2)], axis=1)
    nodes.append(h.make_node("Gather", [op("Squeeze", [boxes, c([0])]), kept], ["boxes"], axis=0))
    nodes.append(h.make_node("Gather", [sel, c(1)], ["classes"], axis=1))
    H, W = hw
    g = h.make_graph(nodes, "tiny_yolo", [h.make_tensor_value_info("image", T.FLOAT, [1, 3, H, W])],
                     [h.make_tensor_value_info("boxes", T.FLOAT, ["detections", 4]),
                      h.make_tensor_value_info("classes", T.INT64, ["detections"])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)], producer_name="onnxc-examples")
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)
    return path


if __name__ == "__main__":
    build(os.path.join(os.path.dirname(os.path.abspath(__file__)), "tiny_yolo.onnx"))
