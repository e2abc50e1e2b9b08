#!/usr/bin/env python3
"""Per-node profile of onnxruntime (single thread, ORT_ENABLE_ALL) for comparing against
`onnxc bench --profile`: runs MODEL N times with onnxruntime's profiler and prints the nodes
by total time (median per run), with the op types ORT fused them into.

    .cache/venv/bin/python tests/bench/ort_profile.py MODEL.onnx [--runs 20] [--top 40]
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import sys
import tempfile

import onnxruntime as ort
from bench import model_inputs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--top", type=int, default=40)
    a = ap.parse_args()
    # The light models' arange(n)/n inputs, as bench.py builds them.
    feeds = model_inputs(a.model, light=True)
    with tempfile.TemporaryDirectory() as d:
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.inter_op_num_threads = 1
        so.log_severity_level = 3
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.enable_profiling = True
        so.profile_file_prefix = os.path.join(d, "ort")
        s = ort.InferenceSession(a.model, so, providers=["CPUExecutionProvider"])
        for _ in range(3):
            s.run(None, feeds)
        for _ in range(a.runs):
            s.run(None, feeds)
        path = s.end_profiling()
        events = json.load(open(path))
    per_node = collections.defaultdict(list)
    op_of = {}
    runs = []
    for e in events:
        if e.get("cat") == "Session" and e.get("name") == "model_run":
            runs.append(e["dur"])
        if e.get("cat") != "Node" or not e["name"].endswith("_kernel_time"):
            continue
        node = e["name"][: -len("_kernel_time")]
        per_node[node].append(e["dur"])
        op_of[node] = e.get("args", {}).get("op_name", "?")
    keep = a.runs
    rows = []
    for node, durs in per_node.items():
        durs = durs[-keep:]
        rows.append((statistics.median(durs) / 1e3, node, op_of[node]))
    rows.sort(reverse=True)
    total = sum(r[0] for r in rows)
    run_ms = statistics.median(runs[-keep:]) / 1e3 if runs else float("nan")
    print(f"model_run median {run_ms:.3f} ms, sum of node medians {total:.3f} ms, {len(rows)} nodes")
    by_op = collections.Counter()
    for t, _, op in rows:
        by_op[op] += t
    print("by op: " + ", ".join(f"{op} {t:.3f}" for op, t in by_op.most_common()))
    for t, node, op in rows[: a.top]:
        print(f"{t:8.3f} ms  {op:20s} {node}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
