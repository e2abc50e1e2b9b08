#!/usr/bin/env python3
"""Tree ensembles, onnxc vs onnxruntime: a LightGBM-style ensemble (500 trees of up to 31
leaves over 30 features, trained by LightGBM on seeded synthetic data with missing values,
converted by onnxmltools) at batch 1 and batch 1000, single thread, both engines in one
process and called alternately as `bench.py` does. Writes its table into the section between
the `trees` markers of docs/performance.md (or prints it).

    .cache/venv/bin/python tests/bench/bench_trees.py --out docs/performance.md
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402

BEGIN = "<!-- trees:begin -->"
END = "<!-- trees:end -->"


def lightgbm_model(trees: int, leaves: int, features: int, classifier: bool) -> onnx.ModelProto:
    from lightgbm import LGBMClassifier, LGBMRegressor
    from onnxmltools import convert_lightgbm
    from onnxmltools.convert.common.data_types import FloatTensorType

    rng = np.random.default_rng(0)
    x = rng.standard_normal((5000, features)).astype(np.float32)
    y = x[:, 0] + np.sin(3 * x[:, 1]) + x[:, 2] * x[:, 3] + 0.3 * rng.standard_normal(len(x))
    x[rng.random(x.shape) < 0.05] = np.nan
    args = dict(n_estimators=trees, num_leaves=leaves, learning_rate=0.05, min_child_samples=10, verbose=-1,
                random_state=0, n_jobs=2)
    model = (LGBMClassifier(**args).fit(x, (y > 0).astype(np.int64)) if classifier else LGBMRegressor(**args).fit(x, y))
    m = convert_lightgbm(model, initial_types=[("X", FloatTensorType([None, features]))], target_opset=15,
                         zipmap=False) if classifier else \
        convert_lightgbm(model, initial_types=[("X", FloatTensorType([None, features]))], target_opset=15)
    return m


def with_batch(m: onnx.ModelProto, n: int) -> onnx.ModelProto:
    m = onnx.ModelProto.FromString(m.SerializeToString())
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_value = n
    for o in m.graph.output:
        o.type.tensor_type.ClearField("shape")
    return m


def measure(path: str, feeds: dict, onnxc: str, seconds: float, work: str, name: str,
            pool: np.ndarray | None = None) -> dict:
    """Median call of each engine, alternating. With `pool` (inputs stacked on a leading
    axis), each call reads the next input of the pool, copied into both engines' bound input
    buffers before the timed call: a deployed model sees new rows, and a tree walk that
    branches per node runs very differently once the branch predictor has learnt one row's
    paths. The copies also evict some of the model from the caches, as an application's own
    work between calls does."""
    sess = bench.ort_session(path)
    ref = sess.run(None, feeds)
    t0 = time.perf_counter()
    compiled = bench.CompiledModel(onnxc, path, name, work, feeds, ref)
    compile_ms = (time.perf_counter() - t0) * 1e3
    model = compiled.caller(1)
    # onnxruntime reads its input from an OrtValue sharing `ort_x`'s memory.
    (key, value), = feeds.items()
    ort_x = np.ascontiguousarray(value).copy()
    binding = sess.io_binding()
    bound_in = ort.OrtValue.ortvalue_from_numpy(ort_x)
    binding.bind_ortvalue_input(key, bound_in)
    ort_out = [ort.OrtValue.ortvalue_from_numpy(np.empty_like(r)) for r in ref]
    for o, ov in zip(sess.get_outputs(), ort_out):
        binding.bind_ortvalue_output(o.name, ov)

    def ort_call() -> None:
        sess.run_with_iobinding(binding)

    onnxc_x = compiled.inputs[0]
    k = 0

    def next_input() -> None:
        nonlocal k
        if pool is not None:
            np.copyto(onnxc_x, pool[k % len(pool)])
            np.copyto(ort_x, pool[k % len(pool)])
            k += 1

    diff = 0.0
    for _ in range(4 if pool is not None else 1):
        next_input()
        model()
        ort_call()
        got = [o.numpy() for o in ort_out]
        diff = max(diff, max(float(np.max(np.abs(g.astype(np.float64) - r.astype(np.float64))))
                             for g, r in zip(model.outputs, got)))
    for _ in range(3):
        model()
        ort_call()
    t0 = time.perf_counter()
    model()
    ort_call()
    one = time.perf_counter() - t0
    batch = int(min(50, max(1, 0.002 / max(one, 1e-7))))
    batches = int(min(2000, max(20, seconds / max(one * batch, 1e-6))))
    ox, ot = [], []
    clock = time.perf_counter_ns
    for i in range(batches):
        order = ((model, ox), (ort_call, ot)) if i % 2 == 0 else ((ort_call, ot), (model, ox))
        start = k
        for f, acc in order:
            k = start  # both engines see the same inputs
            for _ in range(batch):
                next_input()
                t = clock()
                f()
                acc.append((clock() - t) / 1e6)
    return {"onnxc_ms": statistics.median(ox), "ort_ms": statistics.median(ot), "diff": diff,
            "compile_ms": compile_ms, "calls": batches * batch}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--onnxc", default=os.path.join(bench.ROOT, "target/release/onnxc"))
    ap.add_argument("--trees", type=int, default=500)
    ap.add_argument("--leaves", type=int, default=31)
    ap.add_argument("--features", type=int, default=30)
    ap.add_argument("--batches", default="1,1000")
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--pool", type=int, default=4096, help="distinct rows cycled through at batch 1")
    ap.add_argument("--out", help="markdown file whose trees section to rewrite")
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="onnxc-trees-") as work:
        for kind in ("regressor", "classifier"):
            # Trained once per shape (LightGBM takes a minute on two busy cores).
            cache = os.path.join(bench.ROOT, ".cache", "bench-models",
                                 f"lgbm_{kind}_{a.trees}x{a.leaves}x{a.features}.onnx")
            if os.path.exists(cache):
                base = onnx.load(cache)
            else:
                base = lightgbm_model(a.trees, a.leaves, a.features, kind == "classifier")
                os.makedirs(os.path.dirname(cache), exist_ok=True)
                onnx.save(base, cache)
            ensemble = next(nd for nd in base.graph.node if nd.op_type.startswith("TreeEnsemble"))
            nodes = len(next(at.ints for at in ensemble.attribute if at.name == "nodes_nodeids"))
            for n in (int(b) for b in a.batches.split(",")):
                path = os.path.join(work, f"lgbm_{kind}_{n}.onnx")
                onnx.save(with_batch(base, n), path)
                rng = np.random.default_rng(n)
                x = rng.standard_normal((n, a.features)).astype(np.float32)
                x[rng.random(x.shape) < 0.05] = np.nan
                # One input repeated, and (for single rows, whose paths a branch predictor
                # can learn) a pool of distinct rows taken in turn.
                pools = [(f"the same {n} rows, repeated", None)]
                if n == 1:
                    # Copied before every call as the pool's rows are, so that the two
                    # differ only in the data.
                    pools = [("one row, repeated", x[None])]
                    p = rng.standard_normal((a.pool, 1, a.features)).astype(np.float32)
                    p[rng.random(p.shape) < 0.05] = np.nan
                    pools.append((f"{a.pool} rows in turn", p))
                for inputs, pool in pools:
                    r = measure(path, {"X": x}, a.onnxc, a.seconds, work, f"t_{kind}_{n}", pool)
                    r.update(kind=kind, batch=n, nodes=nodes, inputs=inputs)
                    rows.append(r)
                    print(f"{kind:10s} batch {n:5d} ({inputs}): onnxc {r['onnxc_ms']:.4f} ms  "
                          f"onnxruntime {r['ort_ms']:.4f} ms  ratio {r['onnxc_ms'] / r['ort_ms']:.2f}  "
                          f"max diff {r['diff']:.1e}", flush=True)
    lines = [
        BEGIN,
        "## Tree ensembles",
        "",
        f"A LightGBM ensemble of {a.trees} trees of up to {a.leaves} leaves over {a.features} features "
        "(trained by LightGBM on 5000 seeded synthetic rows, 5% of the values missing; converted by "
        "onnxmltools to TreeEnsembleRegressor, and for the binary classifier to TreeEnsembleClassifier "
        "with its LOGISTIC transform, without ZipMap), on seeded inputs with 5% missing values. Single "
        "thread, both engines alternating in one process as above (onnxruntime: intra_op_num_threads=1); "
        "median call. Batch 1 is timed twice: on one row called again and again, and on a pool of "
        "distinct rows taken in turn (copied into both engines' bound input buffers before each "
        "timed call). onnxruntime walks a tree with a branch per node, which the CPU's branch "
        "predictor learns for a row seen over and over; a deployed model sees new rows, so the pool "
        "is the latency a user gets. onnxc's walk has no data-dependent branch: on AVX-512 every "
        "row compares all the branches of a tree at once against bit-vector tables (trees of at "
        "most 32 leaves over at most 64 features; QuickScorer's representation), reading the whole "
        "forest's tables (208 KB here) whatever the row. "
        f"CPU: {bench.cpu_model()}. Produced by "
        f"`.cache/venv/bin/python tests/bench/bench_trees.py {' '.join(sys.argv[1:])}`.",
        "",
        "| model | batch | inputs | onnxc ms | onnxruntime ms | ratio | max abs diff |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['kind']} ({r['nodes']} nodes) | {r['batch']} | {r['inputs']} | {r['onnxc_ms']:.4f} | "
                     f"{r['ort_ms']:.4f} | "
                     f"{r['onnxc_ms'] / r['ort_ms']:.2f} | {r['diff']:.1e} |")
    lines += ["", END]
    section = "\n".join(lines)
    if a.out:
        text = open(a.out).read() if os.path.exists(a.out) else ""
        if BEGIN in text and END in text:
            text = text[:text.index(BEGIN)] + section + text[text.index(END) + len(END):]
        else:
            text = text.rstrip("\n") + "\n\n" + section + "\n"
        with open(a.out, "w") as f:
            f.write(text)
    else:
        print(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
