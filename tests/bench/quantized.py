#!/usr/bin/env python3
"""Quantized models as users make them, side by side with onnxruntime and onnxc's float32 build.

The set: the light zoo CNNs with varied weights (final softmax removed) and the project's
MobileNet-style network, each pre-processed as onnxruntime's quantizer recommends
(`quant_pre_process`: shape inference and onnxruntime's graph optimizations, which fold
BatchNormalization into convolutions) and quantized by `quantize_static` (per-channel int8
weights, uint8 activations, 8 seeded calibration inputs) in QDQ and QOperator formats; the
project's transformer encoder quantized by `quantize_dynamic`. Each also with
`reduce_range=True` (formats `qdq7`, `dyn7`: 7-bit weights, which onnxruntime's documentation
recommends on x86 without VNNI, where its uint8 × int8 kernels saturate full-range pairs).
Models go to `.cache/bench-models/quantized/`.

For each model: onnxc's build of the quantized model, onnxruntime's session of it
(ORT_ENABLE_ALL, single thread) and onnxc's build of the float32 model it came from are
called alternately on the same input (as in bench.py) and their medians reported; the
outputs are compared with onnxruntime's in steps of the output's quantization scale.

    .cache/venv/bin/python tests/bench/quantized.py --out docs/performance.md

writes its table between the `quantized` markers of docs/performance.md (or prints it).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "conformance"))
sys.path.insert(0, os.path.join(ROOT, "tests", "support"))
import bench  # noqa: E402

ZOO = ["squeezenet", "shufflenet", "inception_v1", "resnet50", "densenet121"]
GENERATED_STATIC = ["mobilenet"]
GENERATED_DYNAMIC = ["transformer"]


def calibration(name: str, shape: list, count: int = 8):
    from onnxruntime.quantization import CalibrationDataReader

    class Reader(CalibrationDataReader):
        def __init__(self):
            rng = np.random.default_rng(5)
            self.data = iter([{name: rng.standard_normal(shape).astype(np.float32)} for _ in range(count)])

        def get_next(self):
            return next(self.data, None)

    return Reader()


def generate(out: str) -> list:
    """(name, float path, quantized path, format) of the benchmark set, made if missing."""
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_dynamic, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process
    from contrib_cases import zoo_float
    os.makedirs(out, exist_ok=True)
    ort.set_default_logger_severity(3)
    light_dir = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
    gen_dir = os.path.join(ROOT, ".cache", "bench-models")
    subprocess.run([sys.executable, os.path.join(HERE, "gen_models.py"), "--out", gen_dir], check=True,
                   capture_output=True)
    models = []
    for name in ZOO + GENERATED_STATIC + GENERATED_DYNAMIC:
        src = os.path.join(out, f"{name}.onnx")
        pre = os.path.join(out, f"{name}_pre.onnx")
        if not os.path.exists(pre):
            m = zoo_float(light_dir, name) if name in ZOO else onnx.load(os.path.join(gen_dir, f"{name}.onnx"))
            onnx.save(m, src)
            quant_pre_process(src, pre, skip_symbolic_shape=True)
        formats = ["dyn", "dyn7"] if name in GENERATED_DYNAMIC else ["qdq", "qop", "qdq7"]
        for fmt in formats:
            dst = os.path.join(out, f"{name}_{fmt}.onnx")
            if not os.path.exists(dst):
                m = onnx.load(pre)
                inits = {i.name for i in m.graph.initializer}
                x = next(i for i in m.graph.input if i.name not in inits)
                shape = [d.dim_value or 1 for d in x.type.tensor_type.shape.dim]
                reduce = fmt.endswith("7")
                if fmt.startswith("dyn"):
                    quantize_dynamic(pre, dst, weight_type=QuantType.QInt8, reduce_range=reduce)
                else:
                    quantize_static(pre, dst, calibration(x.name, shape), per_channel=True,
                                    reduce_range=reduce,
                                    quant_format=QuantFormat.QOperator if fmt == "qop" else QuantFormat.QDQ,
                                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
            models.append((name, pre, dst, fmt))
    return models


def output_step(m: onnx.ModelProto) -> float:
    """The scale of the DequantizeLinear producing the first output (0: not quantized)."""
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    prod = {o: n for n in m.graph.node for o in n.output}
    n = prod.get(m.graph.output[0].name)
    if n is not None and n.op_type == "DequantizeLinear" and n.input[1] in inits:
        return float(inits[n.input[1]].max())
    return 0.0


def run(onnxc: str, models: list, seconds: float, work: str) -> list:
    rows = []
    for name, fpath, qpath, fmt in models:
        feeds = bench.model_inputs(qpath, False)
        t0 = time.perf_counter()
        subprocess.run([onnxc, qpath, "-o", os.path.join(work, f"{name}_{fmt}_timed.o")], check=True,
                       capture_output=True)
        compile_ms = (time.perf_counter() - t0) * 1e3
        sess = bench.ort_session(qpath, 1)
        ref = sess.run(None, feeds)
        q = bench.CompiledModel(onnxc, qpath, f"q_{name}_{fmt}", work, feeds, ref)
        fsess = bench.ort_session(fpath, 1)
        fref = fsess.run(None, feeds)
        f = bench.CompiledModel(onnxc, fpath, f"f_{name}_{fmt}", work, feeds, fref)
        engines = [("onnxc", q.caller(1)), ("ort", bench.ort_bound(sess, feeds, ref)), ("float", f.caller(1))]
        engines[0][1]()
        step = output_step(onnx.load(qpath))
        got, want = engines[0][1].outputs[0].astype(np.float64), ref[0].astype(np.float64)
        diff = float(np.max(np.abs(got - want))) if want.size else 0.0
        for _ in range(3):
            for _, e in engines:
                e()
        slowest = 0.0
        for _, e in engines:
            t = time.perf_counter()
            e()
            slowest = max(slowest, time.perf_counter() - t)
        batch = int(min(50, max(1, 0.002 / max(slowest, 1e-7))))
        batches = int(min(2000, max(20, seconds / max(slowest * batch * len(engines), 1e-6))))
        times = {k: [] for k, _ in engines}
        for i in range(batches):
            r = i % len(engines)
            for k, e in engines[r:] + engines[:r]:
                for _ in range(batch):
                    t = time.perf_counter_ns()
                    e()
                    times[k].append((time.perf_counter_ns() - t) / 1e6)
        q.close()
        f.close()
        row = {"model": name, "format": fmt, "compile_ms": compile_ms,
               **{k: statistics.median(v) for k, v in times.items()},
               "diff": diff, "step": step, "range": float(np.max(np.abs(want))) if want.size else 0.0}
        rows.append(row)
        print(f"{name} {fmt}: onnxc {row['onnxc']:.3f} ms, onnxruntime {row['ort']:.3f} ms, "
              f"onnxc float32 {row['float']:.3f} ms, max diff {diff:.4g} (step {step:.4g})", flush=True)
    return rows


BEGIN = "<!-- quantized:begin -->"
END = "<!-- quantized:end -->"


def report(rows: list, cmd: str) -> str:
    def geo(v):
        return float(np.exp(np.mean(np.log(v))))
    lines = [
        BEGIN,
        "## Quantized models",
        "",
        f"Measured on {bench.cpu_model()}, single thread, onnxruntime {ort.__version__}, "
        f"one run of `{cmd}`: quantized models as users make them, onnxc against onnxruntime and onnxc's "
        "float32 build of the same network. Times are medians of alternating calls.",
        "",
        "| model | format | onnxc ms | onnxruntime ms | onnxc / onnxruntime | onnxc float32 ms | float32 / int8 | max diff (steps) | compile ms |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        d = f"{r['diff'] / r['step']:.1f}" if r["step"] else f"{r['diff']:.3g} of {r['range']:.3g}"
        lines.append(f"| {r['model']} | {r['format']} | {r['onnxc']:.3f} | {r['ort']:.3f} | {r['onnxc'] / r['ort']:.2f} | "
                     f"{r['float']:.3f} | {r['float'] / r['onnxc']:.2f} | {d} | {r['compile_ms']:.0f} |")
    full = [r for r in rows if not r["format"].endswith("7")]
    seven = [r for r in rows if r["format"].endswith("7")]
    lines.append("")
    for what, rs in [("full-range weights (qdq, qop, dyn)", full), ("7-bit weights (qdq7, dyn7)", seven)]:
        if rs:
            lines.append(f"Geomean over the {len(rs)} models with {what}: onnxc / onnxruntime "
                         f"{geo([r['onnxc'] / r['ort'] for r in rs]):.2f}; speedup over onnxc's float32 build "
                         f"{geo([r['float'] / r['onnxc'] for r in rs]):.2f}.")
    lines += [
        "",
        "Differences are in steps of the output's quantization scale (the last DequantizeLinear's); "
        "for float outputs (dynamic quantization) the largest difference and the output's largest magnitude.",
        "",
        END,
    ]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--onnxc", default=os.path.join(ROOT, "target/release/onnxc"))
    ap.add_argument("--models", help="comma-separated subset (names, or name_format)")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--out", help="markdown report to write")
    a = ap.parse_args()
    models = generate(os.path.join(ROOT, ".cache", "bench-models", "quantized"))
    if a.models:
        keep = set(a.models.split(","))
        models = [m for m in models if m[0] in keep or f"{m[0]}_{m[3]}" in keep]
    with tempfile.TemporaryDirectory(prefix="onnxc-qbench-") as work:
        rows = run(a.onnxc, models, a.seconds, work)
    text = report(rows, "tests/bench/quantized.py" + (f" --models {a.models}" if a.models else ""))
    if a.out:
        old = open(a.out).read() if os.path.exists(a.out) else ""
        if BEGIN in old and END in old:
            old = old[:old.index(BEGIN)] + text + old[old.index(END) + len(END):]
        else:
            old = old.rstrip("\n") + "\n\n" + text + "\n"
        with open(a.out, "w") as f:
            f.write(old)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
