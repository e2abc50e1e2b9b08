#!/usr/bin/env python3
"""Run-time dims beyond the batch (#23): one object compiled with no flag from a BERT-style
encoder exported with dynamic `batch` and `seq` axes (the sequence bounded by 512, the
default), called through `NAME_run_shaped` at several sequence lengths, against the object
specialized to each length (`--dim seq=S`) and onnxruntime at that length, single thread,
in one run. Every dynamic call's outputs are checked against onnxruntime's.

    .cache/venv/bin/python tests/bench/run_time_dims.py --onnxc target/release/onnxc

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


def feeds(seq: int) -> dict:
    rng = np.random.default_rng(seq)
    mask = np.ones((1, seq), np.int64)
    mask[0, seq - seq // 4:] = 0  # the last quarter is padding
    return {"x": rng.standard_normal((1, seq, 256)).astype(np.float32), "mask": mask}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--onnxc", default=os.path.join(bench.ROOT, "target/release/onnxc"))
    ap.add_argument("--lengths", default="2,8,32,77,128,256,512")
    ap.add_argument("--seconds", type=float, default=2.0)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="onnxc-rtdims-")
    dyn_path = encoder(os.path.join(work, "encoder_dyn.onnx"), "seq")
    dyn = dynamic_batch.Shaped(a.onnxc, dyn_path, "d_encoder", work)
    sess = bench.ort_session(dyn_path, 1)
    print(f"CPU: {bench.cpu_model()}; single thread; onnxruntime {bench.ort.__version__}")
    print()
    print("| seq | run-time dim ms | static ms | onnxruntime ms | dynamic / static | dynamic / onnxruntime |")
    print("|---:|---:|---:|---:|---:|---:|")
    rs_all, ro_all = [], []
    for s in [int(v) for v in a.lengths.split(",")]:
        f = feeds(s)
        ref = sess.run(None, f)
        st_path = encoder(os.path.join(work, f"encoder_{s}.onnx"), s)
        static = bench.CompiledModel(a.onnxc, st_path, f"s_encoder_{s}", work, f, ref)
        engines = {"dyn": dyn.caller(f, ref), "static": static.caller(1), "ort": bench.ort_bound(sess, f, ref)}
        engines["dyn"]()
        for x, r in zip(engines["dyn"].outputs, ref):
            err = float(np.max(np.abs(x.astype(np.float64) - r)))
            if err > 1e-3 * max(1.0, float(np.max(np.abs(r)))):
                raise RuntimeError(f"seq {s}: the run-time-dim object differs from onnxruntime by {err}")
        t = dynamic_batch.timed(engines, a.seconds)
        rs, ro = t["dyn"] / t["static"], t["dyn"] / t["ort"]
        rs_all.append(rs)
        ro_all.append(ro)
        print(f"| {s} | {t['dyn']:.3f} | {t['static']:.3f} | {t['ort']:.3f} | {rs:.2f} | {ro:.2f} |")
        static.close()
    geo = lambda v: float(np.exp(np.mean(np.log(v))))  # noqa: E731
    print(f"| geomean | | | | {geo(rs_all):.2f} | {geo(ro_all):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
