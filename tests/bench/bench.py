#!/usr/bin/env python3
"""Side-by-side single-thread batch-1 latency of onnxc-compiled models and onnxruntime.

For each model: compile with onnxc (timed), link the benchmark executable, then alternate
rounds of onnxc and onnxruntime (intra_op_num_threads=1, inter_op_num_threads=1, sequential)
on the same inputs and report medians. Also checks that both produce the same outputs and
measures each one's peak RSS in a process of its own. Writes a markdown table.

    .cache/venv/bin/python tests/bench/bench.py --onnxc target/release/onnxc --out docs/performance.md
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
LIGHT = ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet", "squeezenet", "vgg19", "zfnet512"]
GENERATED = ["mlp", "mobilenet", "transformer", "small_ops"]
DTYPES = {1: np.float32, 11: np.float64, 7: np.int64, 6: np.int32, 9: np.bool_}


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def model_inputs(path: str, light: bool) -> dict:
    m = onnx.load(path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    rng = np.random.default_rng(0)
    feeds = {}
    for x in m.graph.input:
        if x.name in inits:
            continue
        t = x.type.tensor_type
        shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in t.shape.dim)
        dt = DTYPES[t.elem_type]
        if light:
            n = int(np.prod(shape))
            feeds[x.name] = (np.arange(n).reshape(shape) / n).astype(dt)
        else:
            feeds[x.name] = rng.standard_normal(shape).astype(dt)
    return feeds


def with_varied_weights(path: str, out: str) -> str:
    """onnx's light models build every weight with ConstantOfShape (one value per tensor),
    which makes outputs degenerate (ResNet-50's softmax is exactly uniform) and the output
    comparison meaningless. Replace each such float fill by a seeded initializer of the same
    shape; rank-1 tensors (biases, BatchNorm parameters) vary around the fill value (same
    sign, 0.5x-1.5x), so the network
    computes something non-trivial and both engines see real-looking data. Kernels and
    matrices (rank >= 2) get He-style normal weights so activations stay O(1)."""
    from onnx import numpy_helper as nh

    m = onnx.load(path)
    inits = {i.name: i for i in m.graph.initializer}
    rng = np.random.default_rng(1)
    keep = []
    for n in m.graph.node:
        if n.op_type == "ConstantOfShape" and n.input and n.input[0] in inits:
            value = next((a.t for a in n.attribute if a.name == "value"), None)
            fill = nh.to_array(value).ravel()[0] if value is not None else np.float32(0)
            if value is None or value.data_type == onnx.TensorProto.FLOAT:
                shape = tuple(int(d) for d in nh.to_array(inits[n.input[0]]))
                if len(shape) >= 2:
                    # A weight matrix / kernel: He-style N(0, 2 / fan_in) keeps activations O(1).
                    fan_in = int(np.prod(shape[1:]))
                    arr = rng.standard_normal(shape) * np.sqrt(2.0 / max(fan_in, 1))
                else:
                    arr = fill * rng.uniform(0.5, 1.5, size=shape)
                arr = arr.astype(np.float32)
                m.graph.initializer.append(nh.from_array(arr, n.output[0]))
                continue
        keep.append(n)
    del m.graph.node[:]
    m.graph.node.extend(keep)
    onnx.save(m, out)
    return out


def ort_session(path: str) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


ORT_RSS = r"""
import sys, numpy as np, onnxruntime as ort
so = ort.SessionOptions(); so.intra_op_num_threads = 1; so.inter_op_num_threads = 1; so.log_severity_level = 3
s = ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
feeds = dict(np.load(sys.argv[2]))
for _ in range(3): s.run(None, feeds)
print([l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')][0])
"""


def bench_model(name: str, path: str, light: bool, onnxc: str, rounds: int, work: str) -> dict:
    feeds = model_inputs(path, light)
    names = list(feeds)
    in_files = []
    for i, k in enumerate(names):
        p = os.path.join(work, f"{name}_in{i}.bin")
        feeds[k].tofile(p)
        in_files.append(p)
    # Compile time: the plain compile command, wall clock.
    t0 = time.perf_counter()
    subprocess.run([onnxc, path, "-o", os.path.join(work, f"{name}.o")], check=True, capture_output=True)
    compile_ms = (time.perf_counter() - t0) * 1e3
    exe = os.path.join(work, f"{name}_bench")
    subprocess.run([onnxc, "bench", path, "--iterations", "1", "--warmup", "0", "--save-exe", exe], check=True, capture_output=True)
    sess = ort_session(path)
    # Outputs agree?
    out_dir = os.path.join(work, f"{name}_out")
    os.makedirs(out_dir, exist_ok=True)
    subprocess.run([exe, "run", *in_files, "--out", out_dir], check=True, capture_output=True)
    ref = sess.run(None, feeds)
    diff = 0.0
    for i, r in enumerate(ref):
        got = np.fromfile(os.path.join(out_dir, f"output_{i}.bin"), dtype=r.dtype).reshape(r.shape)
        diff = max(diff, float(np.max(np.abs(got.astype(np.float64) - r.astype(np.float64)))) if r.size else 0.0)
    # Iterations per round: about 0.5 s of onnxruntime work.
    t0 = time.perf_counter()
    sess.run(None, feeds)
    one = time.perf_counter() - t0
    iters = int(min(200, max(3, 0.5 / max(one, 1e-5))))
    ox, ot, rss = [], [], 0
    for _ in range(rounds):
        r = subprocess.run([exe, "bench", str(iters), "2", *in_files], check=True, capture_output=True, text=True)
        j = json.loads(r.stdout.strip().splitlines()[-1])
        ox.append(j["median_ms"])
        rss = max(rss, j["peak_rss_kb"])
        sess.run(None, feeds)
        times = []
        for _ in range(iters):
            t = time.perf_counter()
            sess.run(None, feeds)
            times.append((time.perf_counter() - t) * 1e3)
        ot.append(statistics.median(times))
    npz = os.path.join(work, f"{name}_feeds.npz")
    np.savez(npz, **feeds)
    ort_rss = int(subprocess.run([sys.executable, "-c", ORT_RSS, path, npz], check=True, capture_output=True, text=True).stdout.strip())
    return {
        "model": name,
        "onnxc_ms": statistics.median(ox),
        "ort_ms": statistics.median(ot),
        "compile_ms": compile_ms,
        "onnxc_rss_kb": rss,
        "ort_rss_kb": ort_rss,
        "max_abs_diff": diff,
        "iterations": iters * rounds,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--onnxc", default=os.path.join(ROOT, "target/release/onnxc"))
    ap.add_argument("--models", default=",".join(LIGHT + GENERATED))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", help="markdown report to write")
    ap.add_argument("--gemm", action="store_true",
                    help="also run the GEMM kernel table (cargo bench -p onnxc-runtime --bench gemm, "
                         "ONNXC_GEMM_TABLE=1) and include it in the report")
    a = ap.parse_args()
    light_dir = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
    gen_dir = os.path.join(ROOT, ".cache", "bench-models")
    subprocess.run([sys.executable, os.path.join(HERE, "gen_models.py"), "--out", gen_dir], check=True, capture_output=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="onnxc-bench-") as work:
        for name in a.models.split(","):
            light = name in LIGHT
            path = os.path.join(light_dir, f"light_{name}.onnx") if light else os.path.join(gen_dir, f"{name}.onnx")
            if light:
                path = with_varied_weights(path, os.path.join(work, f"{name}.onnx"))
            r = bench_model(name, path, light, a.onnxc, a.rounds, work)
            r["light"] = light
            rows.append(r)
            print(f"{name:14s} onnxc {r['onnxc_ms']:9.3f} ms  ort {r['ort_ms']:9.3f} ms  ratio {r['onnxc_ms'] / r['ort_ms']:5.2f}  "
                  f"compile {r['compile_ms']:7.0f} ms  rss {r['onnxc_rss_kb'] // 1024}/{r['ort_rss_kb'] // 1024} MB  diff {r['max_abs_diff']:.2e}", flush=True)
    light_ratios = [r["onnxc_ms"] / r["ort_ms"] for r in rows if r["light"]]
    geo = float(np.exp(np.mean(np.log(light_ratios)))) if light_ratios else float("nan")
    print(f"geometric mean of onnxc/onnxruntime over the light models: {geo:.3f}")
    if a.out:
        lines = [
            "# Performance: onnxc vs onnxruntime",
            "",
            f"Single thread, batch 1, same inputs, interleaved rounds ({a.rounds}), medians. "
            f"CPU: {cpu_model()}. onnxruntime {ort.__version__} (CPUExecutionProvider, "
            "intra_op_num_threads=1, inter_op_num_threads=1, ORT_ENABLE_ALL).",
            "",
            f"Produced by `.cache/venv/bin/python tests/bench/bench.py {' '.join(sys.argv[1:])}` "
            "(after `make venv` and `cargo build --release`). Light models use onnx's arange(n)/n inputs, and their "
            "ConstantOfShape-filled weights are replaced by seeded initializers (He-normal kernels, "
            "rank-1 parameters 0.5x-1.5x their fill value; otherwise outputs are degenerate); the generated "
            "models (`tests/bench/gen_models.py`) use seeded normal inputs and weights. Compile time is "
            "one cold run of `onnxc MODEL -o MODEL.o` (for the largest models it is dominated by the "
            "kernel zeroing fresh pages for copies of their weights). On a shared VM, runs vary by ±10% "
            "(ratios less, as rounds interleave).",
            "",
            "| model | onnxc ms | onnxruntime ms | ratio | compile ms | peak RSS onnxc / ort (MB) | max abs diff |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for r in rows:
            lines.append(
                f"| {r['model']} | {r['onnxc_ms']:.3f} | {r['ort_ms']:.3f} | {r['onnxc_ms'] / r['ort_ms']:.2f} | "
                f"{r['compile_ms']:.0f} | {r['onnxc_rss_kb'] / 1024:.0f} / {r['ort_rss_kb'] / 1024:.0f} | {r['max_abs_diff']:.1e} |"
            )
        lines += ["", f"Geometric mean of the onnxc/onnxruntime ratio over the nine light models: **{geo:.3f}**.", ""]
        if a.gemm:
            env = dict(os.environ, ONNXC_GEMM_TABLE="1")
            out = subprocess.run(["cargo", "bench", "-p", "onnxc-runtime", "--bench", "gemm"], cwd=ROOT, env=env,
                                 check=True, capture_output=True, text=True).stdout
            table = [l for l in out.splitlines() if l.strip() and not l.startswith(("Running", "Finished"))]
            lines += [
                "## GEMM kernel",
                "",
                "Single-precision GEMM C = A·B (n×n×n), single thread: B packed per call and B pre-packed (as",
                "the compiler packs weights), against the measured single-core FMA peak "
                "(`ONNXC_GEMM_TABLE=1 cargo bench -p onnxc-runtime --bench gemm`):",
                "",
                "```",
                *table,
                "```",
                "",
            ]
        with open(a.out, "w") as f:
            f.write("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
