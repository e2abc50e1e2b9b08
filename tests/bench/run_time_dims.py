#!/usr/bin/env python3
"""Run-time dims beyond the batch (#23): one object compiled from a model exported with a
dynamic axis, called through `NAME_run_shaped` at several sizes, against the object
specialized to each size (`--dim NAME=S`) and onnxruntime at that size, single thread, in
one run. Every dynamic call's outputs are checked against onnxruntime's. Models: a
BERT-style encoder with dynamic `batch` and `seq` axes (no flag: the sequence bounded by
512, the default), or a text-line recognizer (CNN, self-attention, CTC head) over a
dynamic width (`--dim w=..1000`), a CRNN (the same CNN, a bidirectional LSTM, CTC), or a
text detector's convolutional head over a dynamic height and width (`--dim H=..640 --dim
W=..640`; sizes given as HxW).

    .cache/venv/bin/python tests/bench/run_time_dims.py [--model encoder|recognizer|crnn|detector|dbnet|yolo]

Prints a markdown table (for docs/performance.md, "Run-time dims").
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402
import dynamic_batch  # noqa: E402


def encoder(path: str, seq, d: int = 256, heads: int = 4, layers: int = 2) -> str:
    """Pre-LayerNorm encoder layers with a padding mask, as exporters write them: reshapes
    to [0, 0, heads, dh] and [0, -1, d], the mask turned into an additive bias. `seq` is a
    name (a symbolic dim) or a length."""
    rng = np.random.default_rng(0)
    nodes, inits = [], []
    dh = d // heads

    def w(*shape, scale=0.05):
        n = f"w{len(inits)}"
        inits.append(nh.from_array((rng.standard_normal(shape) * scale).astype(np.float32), n))
        return n

    def c(v, dt=np.int64):
        n = f"c{len(inits)}"
        inits.append(nh.from_array(np.array(v, dtype=dt), n))
        return n

    def op(t, ins, **kw):
        o = f"t{len(nodes)}"
        nodes.append(h.make_node(t, ins, [o], **kw))
        return o

    x = "x"
    m = op("Cast", [op("Unsqueeze", ["mask", c([1, 2])])], to=T.FLOAT)
    m = op("Mul", [op("Sub", [c(1.0, np.float32), m]), c(-1e4, np.float32)])
    for _ in range(layers):
        ln = op("LayerNormalization", [x, w(d, scale=1.0), w(d)], axis=-1, epsilon=1e-5)
        hs = []
        for _ in range(3):
            p = op("Add", [op("MatMul", [ln, w(d, d)]), w(d)])
            hs.append(op("Transpose", [op("Reshape", [p, c([0, 0, heads, dh])])], perm=[0, 2, 1, 3]))
        q, k, v = hs
        sc = op("Div", [op("MatMul", [q, op("Transpose", [k], perm=[0, 1, 3, 2])]), c(np.sqrt(dh), np.float32)])
        a = op("MatMul", [op("Softmax", [op("Add", [sc, m])], axis=-1), v])
        a = op("Reshape", [op("Transpose", [a], perm=[0, 2, 1, 3]), c([0, -1, d])])
        x = op("Add", [x, op("Add", [op("MatMul", [a, w(d, d)]), w(d)])])
        ln = op("LayerNormalization", [x, w(d, scale=1.0), w(d)], axis=-1, epsilon=1e-5)
        hd = op("Add", [op("MatMul", [ln, w(d, 4 * d)]), w(4 * d)])
        erf = op("Erf", [op("Div", [hd, c(np.sqrt(2.0), np.float32)])])
        f = op("Mul", [op("Mul", [hd, c(0.5, np.float32)]), op("Add", [erf, c(1.0, np.float32)])])
        x = op("Add", [x, op("Add", [op("MatMul", [f, w(4 * d, d)]), w(d)])])
    nodes.append(h.make_node("Identity", [x], ["y"]))
    b = "batch" if isinstance(seq, str) else 1
    g = h.make_graph(nodes, "encoder",
                     [h.make_tensor_value_info("x", T.FLOAT, [b, seq, d]),
                      h.make_tensor_value_info("mask", T.INT64, [b, seq])],
                     [h.make_tensor_value_info("y", T.FLOAT, [b, seq, d])], inits)
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8), path)
    return path


class Graph:
    """Nodes and seeded weights of a model being built."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits = [], []

    def wt(self, *shape, scale=None):
        n = f"w{len(self.inits)}"
        fan = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        s = scale if scale is not None else 1.0 / np.sqrt(fan)
        self.inits.append(nh.from_array((self.rng.standard_normal(shape) * s).astype(np.float32), n))
        return n

    def c(self, v, dt=np.int64):
        n = f"c{len(self.inits)}"
        self.inits.append(nh.from_array(np.array(v, dtype=dt), n))
        return n

    def op(self, t, ins, **kw):
        o = f"t{len(self.nodes)}"
        self.nodes.append(h.make_node(t, ins, [o], **kw))
        return o


def line_cnn(g: Graph, out: int) -> str:
    """A text line's CNN over `[1, 1, 32, w]`: four 3×3 conv + BatchNorm + ReLU stages with
    2×2 then 2×1 pools, and a 2×1 conv to one row of `out` channels, `[1, out, 1, w/4]`."""
    x, cin = "image", 1
    for cout, pool in [(32, (2, 2)), (64, (2, 2)), (128, (2, 1)), (128, (2, 1))]:
        x = g.op("Conv", [x, g.wt(cout, cin, 3, 3), g.wt(cout, scale=0.1)], pads=[1, 1, 1, 1])
        var = g.c(np.abs(g.rng.standard_normal(cout)) + 0.5, np.float32)
        x = g.op("BatchNormalization", [x, g.wt(cout, scale=0.1), g.wt(cout, scale=0.1), g.wt(cout, scale=0.1), var])
        x = g.op("MaxPool", [g.op("Relu", [x])], kernel_shape=list(pool), strides=list(pool))
        cin = cout
    return g.op("Relu", [g.op("Conv", [x, g.wt(out, cin, 2, 1), g.wt(out, scale=0.1)])])


def save_line_model(g: Graph, path: str, name: str, w, out_shape) -> str:
    graph = h.make_graph(g.nodes, name, [h.make_tensor_value_info("image", T.FLOAT, [1, 1, 32, w])],
                         [h.make_tensor_value_info("logits", T.FLOAT, out_shape)], g.inits)
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8), path)
    return path


def recognizer(path: str, w, classes: int = 37, d: int = 128, heads: int = 4) -> str:
    """A text-line recognizer as exporters write them (SVTR/PP-OCR-like): `line_cnn`, a
    pre-LayerNorm self-attention block over its w/4 steps and a CTC head (LogSoftmax over
    `classes`). `w` is a name (a symbolic dim) or a width."""
    g = Graph(1)
    x = line_cnn(g, d)                                                     # [1, d, 1, w/4]
    x = g.op("Transpose", [g.op("Squeeze", [x, g.c([2])])], perm=[0, 2, 1])  # [1, w/4, d]
    dh = d // heads
    ln = g.op("LayerNormalization", [x, g.wt(d, scale=1.0), g.wt(d, scale=0.1)], axis=-1, epsilon=1e-5)
    hs = []
    for _ in range(3):
        p = g.op("Add", [g.op("MatMul", [ln, g.wt(d, d)]), g.wt(d, scale=0.1)])
        hs.append(g.op("Transpose", [g.op("Reshape", [p, g.c([0, 0, heads, dh])])], perm=[0, 2, 1, 3]))
    q, k, v = hs
    sc = g.op("Div", [g.op("MatMul", [q, g.op("Transpose", [k], perm=[0, 1, 3, 2])]), g.c(np.sqrt(dh), np.float32)])
    a = g.op("MatMul", [g.op("Softmax", [sc], axis=-1), v])
    a = g.op("Reshape", [g.op("Transpose", [a], perm=[0, 2, 1, 3]), g.c([0, -1, d])])
    x = g.op("Add", [x, g.op("Add", [g.op("MatMul", [a, g.wt(d, d)]), g.wt(d, scale=0.1)])])
    y = g.op("Add", [g.op("MatMul", [x, g.wt(d, classes)]), g.wt(classes, scale=0.1)])
    g.nodes.append(h.make_node("LogSoftmax", [y], ["logits"], axis=-1))
    steps = "steps" if isinstance(w, str) else w // 4
    return save_line_model(g, path, "recognizer", w, [1, steps, classes])


def crnn(path: str, w, classes: int = 37, hidden: int = 64) -> str:
    """A CRNN text-line recognizer: `line_cnn`, then a bidirectional LSTM over the w/4 steps
    (hidden 64) and a CTC head, `[steps, 1, classes]`."""
    g = Graph(2)
    x = line_cnn(g, 128)                                                    # [1, 128, 1, w/4]
    x = g.op("Transpose", [g.op("Squeeze", [x, g.c([2])])], perm=[2, 0, 1])  # [w/4, 1, 128]
    H = hidden
    lstm = [x, g.wt(2, 4 * H, 128), g.wt(2, 4 * H, H), g.wt(2, 8 * H, scale=0.1)]
    g.nodes.append(h.make_node("LSTM", lstm, ["ly"], hidden_size=H, direction="bidirectional"))
    y = g.op("Reshape", [g.op("Transpose", ["ly"], perm=[0, 2, 1, 3]), g.c([0, 0, -1])])  # [w/4, 1, 2H]
    y = g.op("Add", [g.op("MatMul", [y, g.wt(2 * H, classes)]), g.wt(classes, scale=0.1)])
    g.nodes.append(h.make_node("LogSoftmax", [y], ["logits"], axis=2))
    steps = "steps" if isinstance(w, str) else w // 4
    return save_line_model(g, path, "crnn", w, [steps, 1, classes])


def feeds(seq: int) -> dict:
    rng = np.random.default_rng(seq)
    mask = np.ones((1, seq), np.int64)
    mask[0, seq - seq // 4:] = 0  # the last quarter is padding
    return {"x": rng.standard_normal((1, seq, 256)).astype(np.float32), "mask": mask}


def detector(path: str, hw) -> str:
    """A text detector's fully convolutional head (DBNet-like, without its upsampling) over
    `[1, 3, H, W]`: 3×3 convolutions of 16 and 32 channels at stride 2, then 32 and 64 at
    stride 1, a 1×1 to one map and a sigmoid: a probability map `[1, 1, (H+3)/4, (W+3)/4]`.
    `hw` is `(H, W)`: names (symbolic dims) or sizes."""
    rng = np.random.default_rng(3)
    inits, nodes = [], []

    def wt(name, *shape, scale=None):
        fan = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        s = scale if scale is not None else 1 / np.sqrt(fan)
        inits.append(nh.from_array((rng.standard_normal(shape) * s).astype(np.float32), name))
        return name

    x, cin = "image", 3
    for i, (cout, stride) in enumerate([(16, 2), (32, 2), (32, 1), (64, 1)]):
        conv = [x, wt(f"w{i}", cout, cin, 3, 3), wt(f"b{i}", cout, scale=0.1)]
        nodes.append(h.make_node("Conv", conv, [f"c{i}"], pads=[1, 1, 1, 1], strides=[stride, stride]))
        nodes.append(h.make_node("Relu", [f"c{i}"], [f"r{i}"]))
        x, cin = f"r{i}", cout
    nodes.append(h.make_node("Conv", [x, wt("wo", 1, cin, 1, 1), wt("bo", 1, scale=0.1)], ["logit"]))
    nodes.append(h.make_node("Sigmoid", ["logit"], ["prob"]))
    H, W = hw
    out = [1, 1, "h4" if isinstance(H, str) else (H + 3) // 4, "w4" if isinstance(W, str) else (W + 3) // 4]
    g = h.make_graph(nodes, "detector", [h.make_tensor_value_info("image", T.FLOAT, [1, 3, H, W])],
                     [h.make_tensor_value_info("prob", T.FLOAT, out)], inits)
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13)], ir_version=8), path)
    return path


def dbnet(path: str, hw) -> str:
    """A DBNet text detector as PaddleOCR exports it, over `[1, 3, H, W]`: a backbone of 3×3
    convolutions to strides 4, 8, 16 and 32, an FPN whose ×2 nearest upsamplings (constant
    scales) are added to their laterals, each level upsampled to stride 4 and concatenated,
    and a head of a 3×3 convolution and two ×2 transposed convolutions to a probability map
    `[1, 1, H, W]`. Valid where H and W are multiples of 32. `hw` is `(H, W)`: names or
    sizes."""
    g = Graph(4)

    def conv(x, cin, cout, k=3, stride=1):
        return g.op("Relu", [g.op("Conv", [x, g.wt(cout, cin, k, k), g.wt(cout, scale=0.1)],
                                  pads=[k // 2] * 4, strides=[stride, stride])])

    def up(x, s):
        return g.op("Resize", [x, "", g.c([1, 1, s, s], np.float32)], mode="nearest")

    x = conv("image", 3, 16, stride=2)
    feats, cin = [], 16
    for cout in [24, 40, 64, 96]:                          # strides 4, 8, 16, 32
        x = conv(conv(x, cin, cout, stride=2), cout, cout)
        feats.append((x, cout))
        cin = cout
    inner = [g.op("Conv", [f, g.wt(64, c, 1, 1)]) for f, c in feats]
    out = [None, None, None, inner[3]]
    for i in (2, 1, 0):
        out[i] = g.op("Add", [inner[i], up(out[i + 1], 2)])
    levels = [conv(o, 64, 16) for o in out]
    levels = [levels[0]] + [up(p, 2 ** i) for i, p in enumerate(levels[1:], 1)]
    fuse = g.op("Concat", levels, axis=1)                  # [1, 64, H/4, W/4]
    x = conv(fuse, 64, 16)
    x = g.op("Relu", [g.op("ConvTranspose", [x, g.wt(16, 16, 2, 2), g.wt(16, scale=0.1)], strides=[2, 2])])
    x = g.op("ConvTranspose", [x, g.wt(16, 1, 2, 2), g.wt(1, scale=0.1)], strides=[2, 2])
    g.nodes.append(h.make_node("Sigmoid", [x], ["prob"]))
    H, W = hw
    graph = h.make_graph(g.nodes, "dbnet", [h.make_tensor_value_info("image", T.FLOAT, [1, 3, H, W])],
                         [h.make_tensor_value_info("prob", T.FLOAT, [1, 1, H, W])], g.inits)
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 13)], ir_version=8), path)
    return path


def yolo(path: str, hw) -> str:
    """A YOLOv5-style detector ending in NonMaxSuppression, its anchor grid made from Range
    over its map's Shape (`examples/models/make_tiny_yolo.py`)."""
    sys.path.insert(0, os.path.join(bench.ROOT, "examples", "models"))
    import make_tiny_yolo  # noqa: E402
    return make_tiny_yolo.build(path, hw)


def image_feeds(hw) -> dict:
    H, W = hw
    return {"image": np.random.default_rng(H + W).standard_normal((1, 3, H, W)).astype(np.float32)}


def line_feeds(w: int) -> dict:
    rng = np.random.default_rng(w)
    return {"image": rng.standard_normal((1, 1, 32, w)).astype(np.float32)}


# name: (builder, feeds, the dim's name in the table, compile flags, default sizes)
MODELS = {
    "encoder": (encoder, feeds, "seq", (), "1,2,8,32,128,512"),
    "recognizer": (recognizer, line_feeds, "w", ("--dim", "w=..1000"), "100,250,500,1000"),
    "crnn": (crnn, line_feeds, "w", ("--dim", "w=..1000"), "100,250,500,1000"),
    "detector": (detector, image_feeds, ("H", "W"), ("--dim", "H=..640", "--dim", "W=..640"),
                 "64x64,100x333,320x320,480x640,640x640"),
    "dbnet": (dbnet, image_feeds, ("H", "W"), ("--dim", "H=..640", "--dim", "W=..640"),
              "64x64,96x320,320x320,480x640,640x640"),
    "yolo": (yolo, image_feeds, ("H", "W"), ("--dim", "H=..640", "--dim", "W=..640"),
             "64x64,96x320,320x320,480x640,640x640"),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--onnxc", default=os.path.join(bench.ROOT, "target/release/onnxc"))
    ap.add_argument("--model", choices=sorted(MODELS), default="encoder")
    ap.add_argument("--lengths", help="sizes of the run-time dim (default: the model's)")
    ap.add_argument("--seconds", type=float, default=2.0)
    a = ap.parse_args()
    build, make_feeds, dim, flags, sizes = MODELS[a.model]
    work = tempfile.mkdtemp(prefix="onnxc-rtdims-")
    dyn_path = build(os.path.join(work, f"{a.model}_dyn.onnx"), dim)
    dyn = dynamic_batch.Shaped(a.onnxc, dyn_path, f"d_{a.model}", work, flags)
    sess = bench.ort_session(dyn_path, 1)
    print(f"CPU: {bench.cpu_model()}; single thread; onnxruntime {bench.ort.__version__}")
    print()
    label = " × ".join(dim) if isinstance(dim, tuple) else dim
    print(f"| {label} | run-time dim ms | static ms | onnxruntime ms | dynamic / static | dynamic / onnxruntime |")
    print("|---:|---:|---:|---:|---:|---:|")
    rs_all, ro_all = [], []
    parse = (lambda v: tuple(int(x) for x in v.split("x"))) if isinstance(dim, tuple) else int
    for s in [parse(v) for v in (a.lengths or sizes).split(",")]:
        f = make_feeds(s)
        ref = sess.run(None, f)
        tag = "x".join(map(str, s)) if isinstance(s, tuple) else str(s)
        st_path = build(os.path.join(work, f"{a.model}_{tag}.onnx"), s)
        if a.model == "yolo":
            # Its outputs have as many rows as boxes survive: NAME_run_shaped runs it.
            static = dynamic_batch.Shaped(a.onnxc, st_path, f"s_{a.model}_{tag}", work)
            static_call = static.caller(f, ref)
        else:
            static = bench.CompiledModel(a.onnxc, st_path, f"s_{a.model}_{tag}", work, f, ref)
            static_call = static.caller(1)
        engines = {"dyn": dyn.caller(f, ref), "static": static_call, "ort": bench.ort_bound(sess, f, ref)}
        engines["dyn"]()
        for x, r in zip(engines["dyn"].outputs, ref):
            err = float(np.max(np.abs(x.astype(np.float64) - r)))
            if err > 1e-3 * max(1.0, float(np.max(np.abs(r)))):
                raise RuntimeError(f"{dim} {s}: the run-time-dim object differs from onnxruntime by {err}")
        t = dynamic_batch.timed(engines, a.seconds)
        rs, ro = t["dyn"] / t["static"], t["dyn"] / t["ort"]
        rs_all.append(rs)
        ro_all.append(ro)
        shown = " × ".join(map(str, s)) if isinstance(s, tuple) else s
        print(f"| {shown} | {t['dyn']:.3f} | {t['static']:.3f} | {t['ort']:.3f} | {rs:.2f} | {ro:.2f} |")
        if hasattr(static, "close"):
            static.close()
    geo = lambda v: float(np.exp(np.mean(np.log(v))))  # noqa: E731
    print(f"| geomean | | | | {geo(rs_all):.2f} | {geo(ro_all):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
