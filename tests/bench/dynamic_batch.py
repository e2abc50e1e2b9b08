#!/usr/bin/env python3
"""Run-time batch (#23): one object compiled from a model with a dynamic batch axis, called
through `NAME_run_shaped` at several batch sizes, against the object specialized to each
size (`--dim batch=B`) and onnxruntime at that size, single thread, in one run.

    .cache/venv/bin/python tests/bench/dynamic_batch.py --onnxc target/release/onnxc

Models: the C example's tiny_cnn_batch, SqueezeNet and DenseNet-121 from the light zoo and
the MLP and transformer encoder of gen_models.py, each with its input's leading dim made
symbolic. The three engines alternate in batches of calls (as bench.py does), and every
call's outputs are checked: the dynamic object's against the static one's and onnxruntime's.
Prints a markdown table (for docs/performance.md, "Run-time batch").
"""
from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnx.numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402

ROOT = bench.ROOT


# NAME_run_shaped is called through this one-argument shim, as bench.py calls the static
# object's entry points, so that both pay ctypes' cost of one argument made once (converting
# five Python arguments per call cost about 0.5 µs, a third of a batch-1 tree model's call).
SHAPED_CALL_C = r"""
#include <stddef.h>
typedef int (*run_shaped_fn)(const void *, const void *, void *, size_t, const void *);
struct shaped_call {
    void *fn;
    const void *inputs;
    const void *outputs;
    void *workspace;
    size_t workspace_bytes;
};
int onnxc_bench_shaped(const struct shaped_call *c) {
    return ((run_shaped_fn)c->fn)(c->inputs, c->outputs, c->workspace, c->workspace_bytes, NULL);
}
"""


class ShapedCall(ctypes.Structure):
    """`struct shaped_call` of `SHAPED_CALL_C`."""
    _fields_ = [("fn", ctypes.c_void_p), ("inputs", ctypes.c_void_p), ("outputs", ctypes.c_void_p),
                ("workspace", ctypes.c_void_p), ("workspace_bytes", ctypes.c_size_t)]


class Tensor(ctypes.Structure):
    """`onnxc_tensor` of onnxc_runtime.h."""
    _fields_ = [("data", ctypes.c_void_p), ("dims", ctypes.POINTER(ctypes.c_int64)),
                ("rank", ctypes.c_size_t), ("capacity", ctypes.c_size_t)]


def with_batch(path: str, out: str, batch) -> str:
    """`path` with the leading dim of its runtime inputs and outputs set to `batch` (a
    number, or a name for a symbolic dim) and no intermediate shapes."""
    m = onnx.load(path)
    inits = {i.name for i in m.graph.initializer}
    for vi in [x for x in m.graph.input if x.name not in inits] + list(m.graph.output):
        if not vi.type.tensor_type.shape.dim:
            continue
        d = vi.type.tensor_type.shape.dim[0]
        d.Clear()
        if isinstance(batch, str):
            d.dim_param = batch
        else:
            d.dim_value = batch
    del m.graph.value_info[:]
    # gen_models.py's transformer reshapes to shapes written for batch 1 ([1, 128, 4, 64]):
    # make them copy the batch (0) as exporters write them, so the model takes any batch.
    shapes = {n.input[1] for n in m.graph.node if n.op_type == "Reshape"}
    for t in m.graph.initializer:
        if t.name in shapes:
            v = onnx.numpy_helper.to_array(t).copy()
            if v.size > 1 and v[0] == 1:
                v[0] = 0
                t.CopyFrom(onnx.numpy_helper.from_array(v, t.name))
    onnx.save(m, out)
    return out


def feeds_for(path: str, batch: int) -> dict:
    rng = np.random.default_rng(batch)
    m = onnx.load(path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    feeds = {}
    for x in m.graph.input:
        if x.name in inits:
            continue
        shape = [batch] + [d.dim_value for d in x.type.tensor_type.shape.dim[1:]]
        feeds[x.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


class Shaped:
    """The dynamic object, called through NAME_run_shaped on given feeds."""

    def __init__(self, onnxc: str, path: str, name: str, work: str, flags: tuple = ()):
        obj = os.path.join(work, f"{name}.o")
        so = os.path.join(work, f"lib{name}.so")
        subprocess.run([onnxc, path, "-o", obj, "--name", name, *flags], check=True, capture_output=True)
        runtime = subprocess.run([onnxc, "--print-runtime-lib"], check=True, capture_output=True, text=True).stdout.strip()
        shim = os.path.join(work, "shaped_call.c")
        with open(shim, "w") as f:
            f.write(SHAPED_CALL_C)
        subprocess.run([os.environ.get("CC", "cc"), "-shared", "-O2", "-fPIC", "-o", so, obj, shim, runtime,
                        "-lm", "-lpthread", "-ldl"], check=True, capture_output=True)
        self.lib = ctypes.CDLL(so)
        self.run = ctypes.cast(getattr(self.lib, f"{name}_run_shaped"), ctypes.c_void_p).value
        self.call = self.lib.onnxc_bench_shaped
        self.call.argtypes = [ctypes.POINTER(ShapedCall)]
        self.call.restype = ctypes.c_int
        size = getattr(self.lib, f"{name}_workspace_size_threads")
        size.restype = ctypes.c_size_t
        size.argtypes = [ctypes.c_size_t]
        self.ws_bytes = size(1)
        self.ws_buf = np.empty(self.ws_bytes + 64, dtype=np.uint8)
        self.ws = self.ws_buf.ctypes.data + (-self.ws_buf.ctypes.data) % 64

    def caller(self, feeds: dict, ref: list):
        ins = [np.require(v, requirements="C") for v in feeds.values()]
        outs = [np.empty_like(r) for r in ref]
        dims = [(ctypes.c_int64 * a.ndim)(*a.shape) for a in ins + outs]
        tensors = [Tensor(a.ctypes.data, d, a.ndim, a.nbytes) for a, d in zip(ins + outs, dims)]
        tin = (Tensor * max(1, len(ins)))(*tensors[:len(ins)])
        tout = (Tensor * max(1, len(outs)))(*tensors[len(ins):])
        args = ShapedCall(self.run, ctypes.addressof(tin), ctypes.addressof(tout), self.ws, self.ws_bytes)
        arg, shaped = ctypes.pointer(args), self.call

        def call() -> None:
            rc = shaped(arg)
            if rc != 0:
                raise RuntimeError(f"run_shaped returned {rc}")
        call.outputs = outs
        call.keep = (ins, dims, tin, tout, args)
        return call


def timed(engines: dict, seconds: float) -> dict:
    """Medians (ms) of `engines` (name -> call), alternating batches of about 2 ms."""
    for f in engines.values():
        for _ in range(2):
            f()
    slow = 0.0
    for f in engines.values():
        t0 = time.perf_counter()
        f()
        slow = max(slow, time.perf_counter() - t0)
    batch = int(min(50, max(1, 0.002 / max(slow, 1e-7))))
    rounds = int(min(1000, max(10, seconds / max(slow * batch * len(engines), 1e-6))))
    times = {k: [] for k in engines}
    items = list(engines.items())
    for i in range(rounds):
        r = i % len(items)
        for k, f in items[r:] + items[:r]:
            for _ in range(batch):
                t0 = time.perf_counter_ns()
                f()
                times[k].append((time.perf_counter_ns() - t0) / 1e6)
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--onnxc", default=os.path.join(ROOT, "target/release/onnxc"))
    ap.add_argument("--suite", default=os.path.join(ROOT, ".cache/onnx-suite"))
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--models", help="a comma-separated subset of the models")
    a = ap.parse_args()
    batches = [int(b) for b in a.batches.split(",")]
    work = tempfile.mkdtemp(prefix="onnxc-dynbatch-")
    subprocess.run([sys.executable, os.path.join(HERE, "gen_models.py"), "--out", work], check=True, capture_output=True)
    sources = {
        "tiny_cnn": os.path.join(ROOT, "examples/models/tiny_cnn_batch.onnx"),
        "squeezenet": os.path.join(a.suite, "light/test_squeezenet/model.onnx"),
        "densenet121": os.path.join(a.suite, "light/test_densenet121/model.onnx"),
        "mlp": os.path.join(work, "mlp.onnx"),
        "transformer": os.path.join(work, "transformer.onnx"),
        "random_forest": os.path.join(a.suite, "onnxc/test_ml_random_forest_no_zipmap/model.onnx"),
        "lightgbm": os.path.join(a.suite, "onnxc/test_ml_lightgbm_regressor/model.onnx"),
    }
    if a.models:
        sources = {k: v for k, v in sources.items() if k in a.models.split(",")}
    print(f"CPU: {bench.cpu_model()}; single thread; onnxruntime {bench.ort.__version__}")
    print()
    print("| model | batch | run-time batch (ms) | static (ms) | onnxruntime (ms) | dynamic / static | dynamic / onnxruntime |")
    print("|---|---|---|---|---|---|---|")
    ratios_static, ratios_ort = [], []
    for name, src in sources.items():
        dyn_path = with_batch(src, os.path.join(work, f"{name}_dyn.onnx"), "batch")
        try:
            dyn = Shaped(a.onnxc, dyn_path, f"d_{name}", work)
        except subprocess.CalledProcessError as e:
            print(f"| {name} | | refused: {e.stderr.decode().strip()[:200]} | | | | |")
            continue
        for b in batches:
            st_path = with_batch(src, os.path.join(work, f"{name}_b{b}.onnx"), b)
            feeds = feeds_for(st_path, b)
            sess = bench.ort_session(dyn_path, 1)
            ref = sess.run(None, feeds)
            static = bench.CompiledModel(a.onnxc, st_path, f"s_{name}_{b}", work, feeds, ref)
            engines = {"dyn": dyn.caller(feeds, ref), "static": static.caller(1),
                       "ort": bench.ort_bound(sess, feeds, ref)}
            engines["dyn"]()
            engines["static"]()
            for x, y, r in zip(engines["dyn"].outputs, engines["static"].outputs, ref):
                err = float(np.max(np.abs(x.astype(np.float64) - r))) if r.size else 0.0
                if err > 1e-3 * max(1.0, float(np.max(np.abs(r)))):
                    raise RuntimeError(f"{name} batch {b}: run-time batch differs from onnxruntime by {err}")
            t = timed(engines, a.seconds)
            rs, ro = t["dyn"] / t["static"], t["dyn"] / t["ort"]
            ratios_static.append(rs)
            ratios_ort.append(ro)
            print(f"| {name} | {b} | {t['dyn']:.3f} | {t['static']:.3f} | {t['ort']:.3f} | {rs:.2f} | {ro:.2f} |")
            static.close()
    geo = lambda v: float(np.exp(np.mean(np.log(v)))) if v else float("nan")  # noqa: E731
    print(f"| geomean | | | | | {geo(ratios_static):.2f} | {geo(ratios_ort):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
