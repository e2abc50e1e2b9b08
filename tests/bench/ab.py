#!/usr/bin/env python3
"""A/B of onnxc builds: the same models compiled by two or more builds of onnxc, timed
interleaved with each other and with onnxruntime in one process (as bench.py times one
build), so a change is measured against the build before it on the same spell of a noisy
machine.

    # keep the current build as a variant (its onnxc and its runtime, side by side)
    .cache/venv/bin/python tests/bench/ab.py --snapshot /tmp/ab/before
    # ... change, cargo build --release, snapshot again ...
    .cache/venv/bin/python tests/bench/ab.py before=/tmp/ab/before after=/tmp/ab/after \\
        --models resnet50,mlp,path/to/model.onnx --threads 2 --seconds 3

A variant is a directory holding `onnxc` and the `libonnxc_runtime.a` of the same full
`cargo build --release`: the compiler sizes scratch and encodes parameter blobs from its
own copy of the runtime crate, so an object linked with another build's runtime may read
its blobs wrongly or overrun its scratch. `--snapshot` copies both from target/release.

Models: light-zoo names (their ConstantOfShape-filled weights replaced by seeded ones, as
bench.py does; `--raw` keeps them), names of bench.py's generated models, or paths of
.onnx files. Prints, per model, each engine's median call (ms) and each variant's ratio to
onnxruntime; every variant's outputs are checked against onnxruntime's first.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402
import dynamic_batch  # noqa: E402


def snapshot(dest: str) -> None:
    """Copies target/release's onnxc and runtime library into `dest`."""
    os.makedirs(dest, exist_ok=True)
    release = os.path.join(bench.ROOT, "target", "release")
    for f in ("onnxc", "libonnxc_runtime.a"):
        shutil.copy2(os.path.join(release, f), os.path.join(dest, f))
    print(f"snapshot of {release} in {dest}")


def variant_exe(spec: str) -> tuple[str, str]:
    """`NAME=DIR` as (name, DIR/onnxc), checked to link its own runtime."""
    name, _, d = spec.partition("=")
    if not name or not d:
        sys.exit(f"variants are NAME=DIR, got {spec!r}")
    exe = os.path.join(d, "onnxc")
    if not os.path.isfile(exe):
        sys.exit(f"{d} holds no onnxc: a variant is a directory made by --snapshot")
    lib = subprocess.run([exe, "--print-runtime-lib"], check=True, capture_output=True, text=True).stdout.strip()
    if os.path.dirname(os.path.realpath(lib)) != os.path.realpath(d):
        sys.exit(f"{exe} links {lib}, not the runtime beside it: copy both from one build (--snapshot)")
    return name, exe


def model_path(name: str, raw: bool, work: str) -> tuple[str, str, bool]:
    """(label, path, light) for a light or generated model name, or a path."""
    if name.endswith(".onnx"):
        label = os.path.splitext(os.path.basename(name))[0]
        if label == "model":
            label = os.path.basename(os.path.dirname(os.path.abspath(name))) or label
        return label, name, False
    if name in bench.LIGHT:
        import onnx
        light = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light", f"light_{name}.onnx")
        if raw:
            return name, light, True
        return name, bench.with_varied_weights(light, os.path.join(work, f"{name}.onnx")), True
    gen = os.path.join(bench.ROOT, ".cache", "bench-models", f"{name}.onnx")
    if not os.path.exists(gen):
        subprocess.run([sys.executable, os.path.join(HERE, "gen_models.py"), "--out", os.path.dirname(gen)],
                       check=True, capture_output=True)
    return name, gen, False


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("variants", nargs="*", help="NAME=DIR, each DIR holding onnxc and libonnxc_runtime.a")
    ap.add_argument("--snapshot", metavar="DIR", help="copy target/release's onnxc and runtime into DIR and exit")
    ap.add_argument("--models", default="resnet50,squeezenet,mlp")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--raw", action="store_true", help="light models with their ConstantOfShape weights")
    a = ap.parse_args()
    if a.snapshot:
        snapshot(a.snapshot)
        return 0
    if not a.variants:
        ap.error("give variants NAME=DIR (or --snapshot DIR)")
    variants = dict(variant_exe(v) for v in a.variants)
    with tempfile.TemporaryDirectory(prefix="onnxc-ab-") as work:
        for name in a.models.split(","):
            label, path, light = model_path(name, a.raw, work)
            feeds = bench.model_inputs(path, light)
            sess = bench.ort_session(path, a.threads)
            ref = sess.run(None, feeds)
            engines, models = {}, []
            for k, exe in variants.items():
                m = bench.CompiledModel(exe, path, f"{k}_{len(models)}_{label}".replace("-", "_"), work, feeds, ref)
                models.append(m)
                call = m.caller(a.threads)
                call()
                diff = max(float(np.max(np.abs(o.astype(np.float64) - r))) if o.size else 0.0
                           for o, r in zip(call.outputs, ref))
                if not diff <= 1e-3 * max(1.0, max(float(np.max(np.abs(r))) if r.size else 0.0 for r in ref)):
                    sys.exit(f"{label}: variant {k} differs from onnxruntime by {diff}")
                engines[k] = call
            engines["ort"] = bench.ort_bound(sess, feeds, ref)
            t = dynamic_batch.timed(engines, a.seconds)
            print(f"{label} ({a.threads} thread{'s' if a.threads > 1 else ''}): "
                  + " ".join(f"{k}={v:.3f}" for k, v in t.items()) + "  "
                  + " ".join(f"{k}/ort={t[k] / t['ort']:.3f}" for k in variants), flush=True)
            for m in models:
                m.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
