#!/usr/bin/env python3
"""Side-by-side batch-1 latency of onnxc-compiled models and onnxruntime.

For each model: compile with onnxc (timed), link it, then alternate calls of onnxc and
onnxruntime (intra_op_num_threads=N, inter_op_num_threads=1, sequential) on the same inputs
and report medians. Also checks that both produce the same outputs and measures each one's
peak RSS in a process of its own. Writes a markdown table.

    .cache/venv/bin/python tests/bench/bench.py --onnxc target/release/onnxc --out docs/performance.md

`--threads 1,2` measures every thread count in the same run: onnxc through `NAME_run` (1)
and `NAME_run_threaded` on the runtime's pool (`onnxc_pool_create(N)`), onnxruntime with
`intra_op_num_threads=N`, all four alternating; the outputs of every thread count must be
bit-identical to one thread's. The first count fills the main table, the others a table
of speedups and ratios.

Both engines are timed in this process, alternating batches of about 2 ms of calls: the
compiled model through ctypes (its object file linked with the runtime as a shared library),
onnxruntime through IOBinding. On a shared VM whose speed drifts by tens of percent over
seconds, alternating every few milliseconds keeps the ratio honest where alternating rounds
of half a second did not.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import onnx_builder  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
LIGHT = ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet", "squeezenet", "vgg19", "zfnet512"]
GENERATED = ["mlp", "mobilenet", "transformer", "small_ops"]
DTYPES = {1: np.float32, 11: np.float64, 7: np.int64, 6: np.int32, 9: np.bool_}


def cpu_model() -> str:
    """The CPU's name with its family/model (a VM may show only "AMD EPYC": family 25 is
    Zen 3/4, 26 Zen 5) and its widest vector extension, which decide the kernels."""
    info = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if ":" in line:
                    k, v = (t.strip() for t in line.split(":", 1))
                    info.setdefault(k, v)
    except OSError:
        return platform.processor() or "unknown"
    flags = info.get("flags", "").split()
    simd = "AVX-512" if "avx512f" in flags else "AVX2+FMA" if "avx2" in flags else "SSE"
    return f"{info.get('model name', 'unknown')} (family {info.get('cpu family', '?')}, model {info.get('model', '?')}, {simd})"


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
    """Writes `path` with varied weights (see onnx_builder.with_varied_weights) to `out`."""
    onnx.save(onnx_builder.with_varied_weights(onnx.load(path)), out)
    return out


# How long (µs) onnxruntime's pool threads spin for work after a run before they block, in
# the threaded comparison. Its default is 2^20 pause instructions, 32 ms on a Zen 3 (30 ns a
# pause): alternating with onnxc, its idle worker then held a core through onnxc's next
# batch of calls (the transformer ran at 0.98x its one-thread speed on 2 threads). 1 ms is
# about what the runtime's own pool spins, it covers the gaps between operators and
# between back-to-back runs, and onnxruntime measured alone ran no slower with it.
ORT_SPIN_US = "1000"


def ort_session(path: str, threads: int = 1) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    if threads > 1:
        so.add_session_config_entry("session.intra_op.spin_duration_us", ORT_SPIN_US)
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


def model_work(path: str, feeds: dict) -> dict:
    """The arithmetic and weight traffic of one call, for the bounds section: multiply-adds
    of Conv/ConvTranspose/Gemm/MatMul (x2 = FLOP), the part in 3x3 stride-1 convolutions
    (the ones Winograd F(4x4, 3x3) can do with 4x fewer multiplies), and the bytes of the
    initializers (weights every call reads). Shapes come from running the model once in
    onnxruntime with every node output exposed."""
    m = onnx.load(path)
    inits = {i.name: list(i.dims) for i in m.graph.initializer}
    weight_bytes = sum(int(np.prod(i.dims)) * 4 for i in m.graph.initializer if i.data_type == 1)
    names = [o for n in m.graph.node for o in n.output if o]
    del m.graph.output[:]
    for nm in names:
        m.graph.output.append(onnx.ValueInfoProto(name=nm))
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    shapes = {k: list(v.shape) for k, v in zip(names, sess.run(names, feeds))}
    shapes.update(inits)
    shapes.update({k: list(v.shape) for k, v in feeds.items()})
    total = wino = 0.0
    for n in m.graph.node:
        at = {a.name: (list(a.ints) or a.i) for a in n.attribute}
        if n.op_type in ("Conv", "ConvTranspose") and n.input[1] in shapes:
            w, y, x = shapes[n.input[1]], shapes[n.output[0]], shapes[n.input[0]]
            macs = float(np.prod(x if n.op_type == "ConvTranspose" else y)) * float(np.prod(w[1:]))
            if n.op_type == "ConvTranspose":
                macs = float(np.prod(x)) * float(np.prod(w[1:]))
            total += macs
            if n.op_type == "Conv" and w[2:] == [3, 3] and at.get("strides", [1, 1]) in ([1, 1], 1) \
                    and at.get("dilations", [1, 1]) in ([1, 1], 1):
                wino += macs
        elif n.op_type in ("Gemm", "MatMul"):
            a, b, y = shapes[n.input[0]], shapes[n.input[1]], shapes[n.output[0]]
            k = b[-1] if (n.op_type == "Gemm" and at.get("transB", 0)) else (b[-2] if len(b) > 1 else b[0])
            total += float(np.prod(y)) * k
    return {"gflop": 2 * total / 1e9, "gflop_wino": 2 * wino / 1e9, "weight_mb": weight_bytes / 2**20}


class OnnxcThreads(ctypes.Structure):
    """`onnxc_threads` of onnxc_runtime.h."""
    _fields_ = [("parallel_for", ctypes.c_void_p), ("pool", ctypes.c_void_p), ("workers", ctypes.c_size_t)]


# Both entry points are called through this one-argument shim, so that ctypes' per-argument
# cost (about 50 ns an argument) is the same for `NAME_run`'s three arguments and
# `NAME_run_threaded`'s five: small_ops (7 µs a call) measured 2% slower on 2 threads from
# that difference alone.
BENCH_CALL_C = r"""
#include <stddef.h>
typedef int (*run_fn)(const void *const *, void *const *, void *);
typedef int (*run_threaded_fn)(const void *const *, void *const *, void *, size_t, const void *);
struct bench_call {
    void *fn;
    const void *const *inputs;
    void *const *outputs;
    void *workspace;
    size_t workspace_bytes;
    const void *threads; /* NULL: fn is NAME_run */
};
int onnxc_bench_call(const struct bench_call *c) {
    if (!c->threads)
        return ((run_fn)c->fn)(c->inputs, c->outputs, c->workspace);
    return ((run_threaded_fn)c->fn)(c->inputs, c->outputs, c->workspace, c->workspace_bytes, c->threads);
}
"""


class BenchCall(ctypes.Structure):
    """`struct bench_call` of `BENCH_CALL_C`."""
    _fields_ = [("fn", ctypes.c_void_p), ("inputs", ctypes.c_void_p), ("outputs", ctypes.c_void_p),
                ("workspace", ctypes.c_void_p), ("workspace_bytes", ctypes.c_size_t),
                ("threads", ctypes.c_void_p)]


class CompiledModel:
    """An onnxc-compiled model linked as a shared library and called through ctypes: the
    same object file and runtime a C program links, timed call by call from Python."""

    def __init__(self, onnxc: str, path: str, name: str, work: str, feeds: dict, outputs: list):
        obj = os.path.join(work, f"{name}.o")
        so = os.path.join(work, f"lib{name}.so")
        subprocess.run([onnxc, path, "-o", obj, "--name", name], check=True, capture_output=True)
        runtime = subprocess.run([onnxc, "--print-runtime-lib"], check=True, capture_output=True, text=True).stdout.strip()
        cc = os.environ.get("CC", "cc")
        # The pool's entry points are not referenced by the model: keep them in the library.
        keep = [f"-Wl,--undefined={f}" for f in ("onnxc_pool_create", "onnxc_pool_destroy", "onnxc_pool_threads")]
        shim = os.path.join(work, "bench_call.c")
        with open(shim, "w") as f:
            f.write(BENCH_CALL_C)
        subprocess.run([cc, "-shared", "-O2", "-fPIC", "-o", so, obj, shim, *keep, runtime, "-lm", "-lpthread", "-ldl"],
                       check=True, capture_output=True)
        self.lib = ctypes.CDLL(so)
        self.name = name
        self.run_fn = getattr(self.lib, f"{name}_run")
        self.run_fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        self.run_fn.restype = ctypes.c_int
        self.lib.onnxc_pool_create.restype = ctypes.c_void_p
        self.lib.onnxc_pool_create.argtypes = [ctypes.c_size_t]
        self.lib.onnxc_pool_destroy.argtypes = [ctypes.c_void_p]
        self.lib.onnxc_pool_threads.restype = OnnxcThreads
        self.lib.onnxc_pool_threads.argtypes = [ctypes.c_void_p]
        self.inputs = [np.ascontiguousarray(v) for v in feeds.values()]
        self.ref_outputs = outputs
        self.in_ptrs = (ctypes.c_void_p * max(1, len(self.inputs)))(*[a.ctypes.data for a in self.inputs])
        self.pools = []

    def caller(self, threads: int):
        """A call of the model on `threads` threads (1: `NAME_run`), with its own outputs
        and workspace; `call.outputs` holds the outputs."""
        outputs = [np.empty_like(o) for o in self.ref_outputs]
        out_ptrs = (ctypes.c_void_p * max(1, len(outputs)))(*[a.ctypes.data for a in outputs])
        size_fn = getattr(self.lib, f"{self.name}_workspace_size_threads")
        size_fn.restype = ctypes.c_size_t
        size_fn.argtypes = [ctypes.c_size_t]
        ws_bytes = size_fn(threads)
        ws_buf = np.empty(ws_bytes + 64, dtype=np.uint8)
        ws = ws_buf.ctypes.data + (-ws_buf.ctypes.data) % 64
        in_ptrs = self.in_ptrs
        if threads == 1:
            fn, t, tp = ctypes.cast(self.run_fn, ctypes.c_void_p).value, None, None
        else:
            pool = self.lib.onnxc_pool_create(threads)
            if not pool:
                raise RuntimeError(f"onnxc_pool_create({threads}) failed")
            self.pools.append(pool)
            t = self.lib.onnxc_pool_threads(pool)
            fn = ctypes.cast(getattr(self.lib, f"{self.name}_run_threaded"), ctypes.c_void_p).value
            tp = ctypes.addressof(t)
        args = BenchCall(fn, ctypes.addressof(in_ptrs), ctypes.addressof(out_ptrs), ws, ws_bytes, tp)
        # The argument is a ctypes object made once: converting Python values on every call
        # costs microseconds.
        arg = ctypes.pointer(args)
        bench_call = self.lib.onnxc_bench_call
        bench_call.argtypes = [ctypes.POINTER(BenchCall)]
        bench_call.restype = ctypes.c_int

        def call() -> None:
            rc = bench_call(arg)
            if rc != 0:
                raise RuntimeError(f"model run on {threads} thread(s) returned {rc}")
        call.keep = (t, args, in_ptrs, out_ptrs)
        call.outputs = outputs
        call.ws = ws_buf
        return call

    def close(self) -> None:
        for p in self.pools:
            self.lib.onnxc_pool_destroy(p)
        self.pools = []


def ort_bound(sess: ort.InferenceSession, feeds: dict, outputs: list):
    """onnxruntime with inputs and outputs bound once (IOBinding), so a timed call is the
    run itself rather than Python-side conversions."""
    b = sess.io_binding()
    for k, v in feeds.items():
        b.bind_cpu_input(k, v)
    keep = []
    for o, ref in zip(sess.get_outputs(), outputs):
        ov = ort.OrtValue.ortvalue_from_numpy(np.empty_like(ref))
        keep.append(ov)
        b.bind_ortvalue_output(o.name, ov)

    def call() -> None:
        sess.run_with_iobinding(b)

    call.keep = keep
    return call


def bench_model(name: str, path: str, light: bool, onnxc: str, seconds: float, work: str,
                threads: list) -> dict:
    feeds = model_inputs(path, light)
    # Compile time: the plain compile command, wall clock.
    t0 = time.perf_counter()
    subprocess.run([onnxc, path, "-o", os.path.join(work, f"{name}_timed.o")], check=True, capture_output=True)
    compile_ms = (time.perf_counter() - t0) * 1e3
    sess = {t: ort_session(path, t) for t in threads}
    ref = sess[threads[0]].run(None, feeds)
    model = CompiledModel(onnxc, path, f"m_{name}", work, feeds, ref)
    engines = []  # (kind, threads, call)
    for t in threads:
        engines.append(("onnxc", t, model.caller(t)))
        engines.append(("ort", t, ort_bound(sess[t], feeds, ref)))
    # Outputs agree with onnxruntime, and bit for bit across thread counts?
    calls = {(k, t): f for k, t, f in engines}
    first = calls[("onnxc", threads[0])]
    first()
    diff = 0.0
    for got, r in zip(first.outputs, ref):
        if r.size:
            diff = max(diff, float(np.max(np.abs(got.astype(np.float64) - r.astype(np.float64)))))
    for t in threads[1:]:
        other = calls[("onnxc", t)]
        other()
        for a, b in zip(first.outputs, other.outputs):
            if a.tobytes() != b.tobytes():
                raise RuntimeError(f"{name}: the outputs on {t} threads differ from {threads[0]} thread(s)'")
    # Warm up every engine, then alternate batches of calls (order rotated every batch) so
    # that the machine's slow and fast spells fall on all alike; a batch lasts about 2 ms of
    # the slowest engine, so small models run warm within it as they would in a loop.
    # Medians of all calls.
    for _ in range(3):
        for _, _, f in engines:
            f()
    slowest = 0.0
    for _, _, f in engines:
        t0 = time.perf_counter()
        f()
        slowest = max(slowest, time.perf_counter() - t0)
    one = slowest * 2
    # With threads, engines switch after a pause (below), and the first calls after it run
    # on cold caches and waking cores: batches of 20 ms keep that to a few percent of them.
    span = 0.002 if len(threads) == 1 else 0.02
    batch = int(min(500, max(1, span / max(one / 2, 1e-7))))
    batches = int(min(2000, max(20, seconds / max(one * batch * len(threads), 1e-6))))
    times = {(k, t): [] for k, t, _ in engines}
    clock = time.perf_counter_ns
    for i in range(batches):
        r = i % len(engines)
        for k, t, f in engines[r:] + engines[:r]:
            acc = times[(k, t)]
            if len(threads) > 1:
                # On a machine with few cores the previous engine's threads may still be
                # spinning (the runtime's pool about 1 ms before it blocks; onnxruntime's
                # idle worker, with the 1 ms spin set above, measured 3.3 ms of CPU time
                # after a run on Zen 4): a pause lets them stop, and one untimed call wakes
                # this engine's own, so each engine is timed warm and alone.
                time.sleep(0.005)
                f()
            for _ in range(batch):
                t0 = clock()
                f()
                acc.append((clock() - t0) / 1e6)
    model.close()
    iters = batches * batch
    # Peak RSS of each in a process of its own: the linked benchmark executable, and
    # onnxruntime's Python session.
    exe = os.path.join(work, f"{name}_bench")
    subprocess.run([onnxc, "bench", path, "--iterations", "1", "--warmup", "0", "--save-exe", exe], check=True, capture_output=True)
    in_files = []
    for i, v in enumerate(feeds.values()):
        p = os.path.join(work, f"{name}_in{i}.bin")
        v.tofile(p)
        in_files.append(p)
    r = subprocess.run([exe, "bench", "3", "1", *in_files], check=True, capture_output=True, text=True)
    rss = json.loads(r.stdout.strip().splitlines()[-1])["peak_rss_kb"]
    npz = os.path.join(work, f"{name}_feeds.npz")
    np.savez(npz, **feeds)
    ort_rss = int(subprocess.run([sys.executable, "-c", ORT_RSS, path, npz], check=True, capture_output=True, text=True).stdout.strip())
    return {
        **model_work(path, feeds),
        "model": name,
        "onnxc_ms": statistics.median(times[("onnxc", threads[0])]),
        "ort_ms": statistics.median(times[("ort", threads[0])]),
        "threads": {t: (statistics.median(times[("onnxc", t)]), statistics.median(times[("ort", t)])) for t in threads},
        "compile_ms": compile_ms,
        "onnxc_rss_kb": rss,
        "ort_rss_kb": ort_rss,
        "max_abs_diff": diff,
        "iterations": iters,
    }


def bounds_section(rows: list, gemm_out: str) -> list:
    """Lower bounds on each model's latency on this core, from the measured FMA peak and
    read bandwidth (the GEMM benchmark's first lines): compute, with 3x3 stride-1 convs
    counted at a quarter of their multiply-adds (Winograd F(4x4, 3x3), the most any onnxc
    kernel saves), and weights streamed once from the cache level (or DRAM) they fit in."""
    peak = float(re.search(r"measured single-core peak: ([\d.]+)", gemm_out).group(1))
    bw = [(float(a), float(b)) for a, b in re.findall(r"([\d.]+) MB ([\d.]+) GB/s", gemm_out)]
    if not bw:
        return []
    lines = [
        "## Bounds",
        "",
        f"What one core can do at best, from the measured FMA peak ({peak:.0f} GFLOP/s) and read bandwidth "
        f"({', '.join(f'{mb:g} MB: {g:.0f} GB/s' for mb, g in bw)}): the compute bound counts 3x3 stride-1 "
        "convolutions at a quarter of their multiply-adds (Winograd F(4x4, 3x3)) and everything else in full; "
        "the weight bound streams every weight once per call at the bandwidth of the smallest measured "
        "buffer that holds them. Effective GFLOP/s are the model's FLOP over its latency.",
        "",
        "| model | GFLOP (3x3/1) | weights MB | onnxc GFLOP/s | onnxruntime GFLOP/s | bound ms | 0.6 x onnxruntime ms |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        wmb = r["weight_mb"]
        gbs = next((g for mb, g in bw if mb >= wmb), bw[-1][1])
        compute = (r["gflop"] - 0.75 * r["gflop_wino"]) / peak * 1e3
        memory = wmb * 2**20 / (gbs * 1e9) * 1e3
        lines.append(
            f"| {r['model']} | {r['gflop']:.3f} ({r['gflop_wino']:.3f}) | {wmb:.1f} | "
            f"{r['gflop'] / r['onnxc_ms'] * 1e3:.0f} | {r['gflop'] / r['ort_ms'] * 1e3:.0f} | "
            f"{max(compute, memory):.3f} ({'weights' if memory > compute else 'compute'}) | {0.6 * r['ort_ms']:.3f} |"
        )
    return lines + [""]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--onnxc", default=os.path.join(ROOT, "target/release/onnxc"))
    ap.add_argument("--models", default=",".join(LIGHT + GENERATED),
                    help="comma-separated names of light/generated models, or paths of .onnx files")
    ap.add_argument("--seconds", type=float, default=4.0,
                    help="time per model for the alternating calls (both engines together)")
    ap.add_argument("--out", help="markdown report to write")
    ap.add_argument("--gemm", action="store_true",
                    help="also run the GEMM kernel table (cargo bench -p onnxc-runtime --bench gemm, "
                         "ONNXC_GEMM_TABLE=1) and include it in the report")
    ap.add_argument("--threads", default="1",
                    help="comma-separated thread counts measured side by side (onnxc's NAME_run_threaded "
                         "on the runtime's pool against onnxruntime's intra_op_num_threads); the first "
                         "fills the main table")
    a = ap.parse_args()
    threads = [int(t) for t in a.threads.split(",")]
    if not threads or min(threads) < 1:
        ap.error("--threads takes thread counts (at least 1) separated by commas")
    light_dir = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
    gen_dir = os.path.join(ROOT, ".cache", "bench-models")
    subprocess.run([sys.executable, os.path.join(HERE, "gen_models.py"), "--out", gen_dir], check=True, capture_output=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="onnxc-bench-") as work:
        for name in a.models.split(","):
            light = name in LIGHT
            path = os.path.join(light_dir, f"light_{name}.onnx") if light else os.path.join(gen_dir, f"{name}.onnx")
            if name.endswith(".onnx"):
                path, name = name, os.path.splitext(os.path.basename(name))[0]
            if light:
                path = with_varied_weights(path, os.path.join(work, f"{name}.onnx"))
            r = bench_model(name, path, light, a.onnxc, a.seconds, work, threads)
            r["light"] = light
            rows.append(r)
            print(f"{name:14s} onnxc {r['onnxc_ms']:9.3f} ms  ort {r['ort_ms']:9.3f} ms  ratio {r['onnxc_ms'] / r['ort_ms']:5.2f}  "
                  f"compile {r['compile_ms']:7.0f} ms  rss {r['onnxc_rss_kb'] // 1024}/{r['ort_rss_kb'] // 1024} MB  diff {r['max_abs_diff']:.2e}", flush=True)
            for t in threads[1:]:
                o, e = r["threads"][t]
                print(f"{'':14s} {t} threads: onnxc {o:9.3f} ms ({r['onnxc_ms'] / o:4.2f}x)  ort {e:9.3f} ms ({r['ort_ms'] / e:4.2f}x)  "
                      f"ratio {o / e:5.2f}", flush=True)
    light_ratios = [r["onnxc_ms"] / r["ort_ms"] for r in rows if r["light"]]
    geo = float(np.exp(np.mean(np.log(light_ratios)))) if light_ratios else float("nan")
    print(f"geometric mean of onnxc/onnxruntime over the light models: {geo:.3f}")

    gemm_out = ""
    if a.gemm:
        env = dict(os.environ, ONNXC_GEMM_TABLE="1")
        gemm_out = subprocess.run(["cargo", "bench", "-p", "onnxc-runtime", "--bench", "gemm"], cwd=ROOT, env=env,
                                  check=True, capture_output=True, text=True).stdout

    def light_geo(f) -> float:
        v = [f(r) for r in rows if r["light"]]
        return float(np.exp(np.mean(np.log(v)))) if v else float("nan")

    for t in threads[1:]:
        print(f"{t} threads, light models: onnxc speedup over {threads[0]} thread(s) "
              f"{light_geo(lambda r: r['onnxc_ms'] / r['threads'][t][0]):.2f}x, "
              f"onnxc/onnxruntime {light_geo(lambda r: r['threads'][t][0] / r['threads'][t][1]):.3f}")
    if a.out:
        lines = [
            "# Performance: onnxc vs onnxruntime",
            "",
            f"{'Single thread' if threads[0] == 1 else f'{threads[0]} threads'}, batch 1, same inputs. Both engines run in one Python process and are called "
            "alternately, in batches of calls lasting about 2 ms (one call for the large models), for "
            f"about {a.seconds:g} s per model; the table gives the median call (so a slow spell of this "
            "shared VM falls on both alike). onnxc: the model's object file and libonnxc_runtime.a linked "
            "as a shared library, `NAME_run` called through ctypes (by a one-argument C shim, the same for "
            "`NAME_run_threaded`); onnxruntime: inputs and outputs "
            "bound once (IOBinding), `run_with_iobinding`. "
            f"CPU: {cpu_model()}. onnxruntime {ort.__version__} (CPUExecutionProvider, "
            f"intra_op_num_threads={threads[0]}, inter_op_num_threads=1, ORT_ENABLE_ALL).",
            "",
            f"Produced by `.cache/venv/bin/python tests/bench/bench.py {' '.join(sys.argv[1:])}` "
            "(after `make venv` and `cargo build --release`). Light models use onnx's arange(n)/n inputs, and their "
            "ConstantOfShape-filled weights are replaced by seeded initializers (He-normal kernels, "
            "rank-1 parameters 0.5x-1.5x their fill value; otherwise outputs are degenerate); the generated "
            "models (`tests/bench/gen_models.py`) use seeded normal inputs and weights. Compile time is "
            "one cold run of `onnxc MODEL -o MODEL.o` (for the largest models it is dominated by the "
            "kernel zeroing fresh pages for copies of their weights). Peak RSS: each engine in a "
            "process of its own (onnxc: the linked benchmark executable of `onnxc bench`; "
            "onnxruntime: a Python process running the session).",
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
        if len(threads) > 1:
            lines += [
                "## Threads",
                "",
                f"The same run, every engine at {', '.join(map(str, threads))} threads, all alternating: onnxc's "
                "`NAME_run_threaded` on the runtime's pool (`onnxc_pool_create(N)`), onnxruntime with "
                "`intra_op_num_threads=N` and its idle threads spinning at most 1 ms "
                f"(`session.intra_op.spin_duration_us={ORT_SPIN_US}`; its default spin held a core through onnxc's "
                "calls); between engines a 5 ms pause and an untimed call. Speedup: the engine's time at "
                f"{threads[0]} thread(s) over its time at N; ratio: onnxc over onnxruntime at N threads. "
                "Every thread count's outputs were checked bit-identical to the first's.",
                "",
                "| model | " + " | ".join(f"onnxc {t}t ms | speedup | onnxruntime {t}t ms | speedup | ratio" for t in threads[1:]) + " |",
                "|---|" + "---:|" * (5 * len(threads[1:])),
            ]
            for r in rows:
                cells = []
                for t in threads[1:]:
                    o, e = r["threads"][t]
                    cells += [f"{o:.3f}", f"{r['onnxc_ms'] / o:.2f}", f"{e:.3f}", f"{r['ort_ms'] / e:.2f}", f"{o / e:.2f}"]
                lines.append(f"| {r['model']} | " + " | ".join(cells) + " |")
            lines.append("")
            for t in threads[1:]:
                lines.append(
                    f"Light models at {t} threads: onnxc's speedup (geometric mean) "
                    f"**{light_geo(lambda r: r['onnxc_ms'] / r['threads'][t][0]):.2f}x**, onnxruntime's "
                    f"{light_geo(lambda r: r['ort_ms'] / r['threads'][t][1]):.2f}x; onnxc/onnxruntime "
                    f"**{light_geo(lambda r: r['threads'][t][0] / r['threads'][t][1]):.3f}**.")
            ceiling = re.search(r"measured peak of (\d+) threads at once \(median run\): [\d.]+ GFLOP/s, ([\d.]+)x", gemm_out)
            if ceiling:
                lines += ["", f"This machine's ceiling for a compute-bound split: an FMA loop on {ceiling.group(1)} threads "
                          f"at once ran at {ceiling.group(2)}x one core's rate (median run; GEMM section below)."]
            lines.append("")
        if a.gemm:
            table = [l for l in gemm_out.splitlines() if l.strip() and not l.startswith(("Running", "Finished"))]
            lines += bounds_section(rows, gemm_out)
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
        # Hand-written sections below the marker (design history, other benchmarks' tables)
        # survive a rewrite.
        kept = ""
        if os.path.exists(a.out):
            with open(a.out) as f:
                old = f.read()
            if KEEP in old:
                kept = "\n" + old[old.index(KEEP):]
        with open(a.out, "w") as f:
            f.write("\n".join(lines) + kept)
    return 0


KEEP = "<!-- bench.py keeps everything below this line -->"


if __name__ == "__main__":
    sys.exit(main())
