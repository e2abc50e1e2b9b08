#!/usr/bin/env python3
"""Text classifiers, onnxc vs onnxruntime: scikit-learn TfidfVectorizer (word 1-2 grams,
and character 2-4 grams) then LogisticRegression, converted by skl2onnx with a `[None, 1]`
string input, trained on seeded documents of 20-200 words over a 3000-word vocabulary.
One object compiled with no flag (a run-time batch), called through NAME_run_shaped at
batch 1 and 32, single thread, both engines in one process and called alternately. Writes
its table into the section between the `text` markers of docs/performance.md (or prints it).

    .cache/venv/bin/python tests/bench/bench_text.py --out docs/performance.md
"""
from __future__ import annotations

import argparse
import ctypes
import os
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402
import dynamic_batch  # noqa: E402

BEGIN = "<!-- text:begin -->"
END = "<!-- text:end -->"


def documents(n: int, seed: int) -> list:
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(3000)]
    return [" ".join(rng.choice(vocab, int(rng.integers(20, 200)))).capitalize() + "." for _ in range(n)]


def pipeline(kind: str, docs: list) -> onnx.ModelProto:
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from skl2onnx import to_onnx
    from skl2onnx.common.data_types import StringTensorType

    vec = (TfidfVectorizer(ngram_range=(1, 2)) if kind == "word" else
           TfidfVectorizer(analyzer="char", ngram_range=(2, 4), max_features=20000))
    labels = np.random.default_rng(1).integers(0, 3, len(docs))
    pipe = make_pipeline(vec, LogisticRegression(max_iter=300)).fit(docs, labels)
    m = to_onnx(pipe, initial_types=[("text", StringTensorType([None, 1]))],
                options={LogisticRegression: {"zipmap": False}})
    for n in m.graph.node:
        # onnxruntime's StringNormalizer takes the locale en_US by default, which this
        # machine may lack.
        if n.op_type == "StringNormalizer":
            n.attribute.append(helper.make_attribute("locale", "C.UTF-8"))
    return m


def measure(onnxc: str, path: str, docs: list, seconds: float, work: str, name: str) -> dict:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    x = np.array(docs, dtype=object).reshape(-1, 1)
    ref = sess.run(None, {"text": x})
    shaped = dynamic_batch.Shaped(onnxc, path, name, work)
    # The strings as the C ABI takes them: an array of pointers to NUL-terminated bytes.
    raw = [ctypes.create_string_buffer(d.encode()) for d in docs]
    ptrs = np.array([ctypes.addressof(b) for b in raw], dtype=np.uint64).reshape(-1, 1)
    call = shaped.caller({"text": ptrs}, ref)
    call.keep = (call.keep, raw)
    call()
    diff = max(float(np.max(np.abs(g.astype(np.float64) - r.astype(np.float64))))
               for g, r in zip(call.outputs, ref))

    def ort_call() -> None:
        sess.run(None, {"text": x})

    t = dynamic_batch.timed({"onnxc": call, "ort": ort_call}, seconds)
    return {"onnxc_ms": t["onnxc"], "ort_ms": t["ort"], "diff": diff}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--onnxc", default=os.path.join(bench.ROOT, "target/release/onnxc"))
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--out", help="markdown file whose text section to rewrite")
    a = ap.parse_args()
    train, test = documents(400, 0), documents(64, 1)
    rows = []
    with tempfile.TemporaryDirectory(prefix="onnxc-text-") as work:
        for kind in ("word", "char"):
            path = os.path.join(work, f"{kind}.onnx")
            onnx.save(pipeline(kind, train), path)
            for b in (int(v) for v in a.batches.split(",")):
                r = measure(a.onnxc, path, test[:b], a.seconds, work, f"{kind}{b}")
                rows.append((kind, b, r))
                print(f"{kind} batch {b}: onnxc {r['onnxc_ms']:.3f} ms, onnxruntime {r['ort_ms']:.3f} ms, "
                      f"ratio {r['onnxc_ms'] / r['ort_ms']:.2f}, max diff {r['diff']:.1e}", flush=True)
    lines = [BEGIN, "",
             "| pipeline | batch | onnxc (ms) | onnxruntime (ms) | onnxc / onnxruntime | max abs diff |",
             "|---|---|---|---|---|---|"]
    names = {"word": "TF-IDF word 1-2 grams", "char": "TF-IDF char 2-4 grams"}
    for kind, b, r in rows:
        lines.append(f"| {names[kind]} | {b} | {r['onnxc_ms']:.3f} | {r['ort_ms']:.3f} | "
                     f"{r['onnxc_ms'] / r['ort_ms']:.2f} | {r['diff']:.1e} |")
    lines += ["", "`.cache/venv/bin/python tests/bench/bench_text.py --out docs/performance.md`", "", END]
    table = "\n".join(lines)
    if a.out:
        text = open(a.out).read()
        if BEGIN in text:
            text = text[:text.index(BEGIN)] + table + text[text.index(END) + len(END):]
        else:
            text += "\n" + table + "\n"
        open(a.out, "w").write(text)
    else:
        print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
