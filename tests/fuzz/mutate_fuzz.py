#!/usr/bin/env python3
"""Mutation fuzzing of onnxc against hostile models: ONNX backend-suite models with a random
mutation each (of the graph or of a subgraph: If branches, Loop and Scan bodies) — attribute
values (0, -1, extreme integers up to 2^63-1, NaN, inf), input dims (0, 2^31, 2^40, 2^62,
2^63-1), element types (unknown codes too), dropped or extra node inputs, a node's inputs
repeated up to 100,000 times, truncated or resized initializers, other opsets, dropped
attributes, flipped or truncated bytes — compiled with `onnxc` (with the --sequence, --absent
and --shape flags the case's input data implies), and a third of those that compile run on
the case's own input data. Each command runs under the hardening limits
(#27): 2 GiB of address space and 20 s. onnxc must exit with 0 or with 1 and an error
message: never panic (an internal compiler error counts: it is a bug), abort, crash, or run
out of time. Failures are kept under --keep; each one found becomes a regression case in
tests/cli/hostile.rs.

    .cache/venv/bin/python tests/fuzz/mutate_fuzz.py --cases 500 [--seed 1]

Needs the suite (`make suite`). Not part of `make test`.
"""
from __future__ import annotations

import argparse
import glob
import os
import random
import resource
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnx.numpy_helper

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
HUGE = [0, -1, 1, 2, 3, -2, 7, 64, 1 << 20, 1 << 31, 1 << 40, 1 << 62, -(1 << 62), 2**63 - 1, -(2**63)]
DIMS = [0, 1, 2, 5, 1 << 20, 1 << 31, 1 << 40, 1 << 62, 2**63 - 1]
# The acceptance limits of #27: every hostile model ends within 20 s and 2 GiB.
SECONDS = 20
ADDRESS_SPACE = 2 << 30


def limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def all_nodes(g: onnx.GraphProto) -> list:
    """The graph's nodes and those of its subgraphs (If branches, Loop and Scan bodies)."""
    out = []
    for n in g.node:
        out.append(n)
        for a in n.attribute:
            if a.HasField("g"):
                out += all_nodes(a.g)
            for sg in a.graphs:
                out += all_nodes(sg)
    return out


def mutate(rng: random.Random, m: onnx.ModelProto) -> str:
    g = m.graph
    nodes = all_nodes(g)
    kind = rng.randrange(10)
    if kind == 0 and nodes:
        n = rng.choice(nodes)
        for a in n.attribute:
            if a.type == onnx.AttributeProto.INT:
                a.i = rng.choice(HUGE)
            elif a.type == onnx.AttributeProto.INTS and len(a.ints):
                a.ints[rng.randrange(len(a.ints))] = rng.choice(HUGE)
            elif a.type == onnx.AttributeProto.TENSOR and a.t.data_type == onnx.TensorProto.INT64 and len(a.t.int64_data):
                a.t.int64_data[rng.randrange(len(a.t.int64_data))] = rng.choice(HUGE)
            elif a.type == onnx.AttributeProto.FLOAT:
                a.f = rng.choice([0.0, -1.0, float("nan"), float("inf"), 1e30])
        return "attr"
    if kind == 1 and len(g.input):
        dims = rng.choice(list(g.input)).type.tensor_type.shape.dim
        if len(dims):
            rng.choice(dims).dim_value = rng.choice(DIMS)
        return "dims"
    if kind == 2 and len(g.input) + len(g.output):
        v = rng.choice(list(g.input) + list(g.output))
        v.type.tensor_type.elem_type = rng.choice([1, 2, 3, 6, 7, 9, 10, 11, 16, 0, 99])
        return "type"
    if kind == 3 and nodes:
        n = rng.choice(nodes)
        if len(n.input) and rng.random() < 0.5:
            del n.input[rng.randrange(len(n.input))]
        else:
            n.input.append(rng.choice(["", "nonexistent"] + [i.name for i in g.input]))
        return "wiring"
    if kind == 4 and len(g.initializer):
        t = rng.choice(list(g.initializer))
        if t.raw_data:
            t.raw_data = t.raw_data[: rng.randrange(len(t.raw_data) + 1)]
        elif len(t.dims):
            t.dims[0] = rng.choice(HUGE)
        return "init"
    if kind == 5 and len(m.opset_import):
        m.opset_import[0].version = rng.choice([1, 5, 7, 9, 11, 13, 17, 21, 23, 28])
        return "opset"
    if kind == 6 and nodes:
        n = rng.choice(nodes)
        if len(n.attribute):
            del n.attribute[rng.randrange(len(n.attribute))]
        return "dropattr"
    if kind == 7 and nodes:
        # Arity multiplied: the node's inputs repeated (variadic ops must take them in
        # linear time; others must refuse them by name).
        n = rng.choice(nodes)
        if len(n.input):
            n.input.extend(list(n.input) * rng.choice([2, 100, 10_000, 100_000 // len(n.input)]))
        return "arity"
    if kind == 8:
        # An int64 initializer (shapes, pads, repeats, axes, indices) set to extreme values.
        ints = [t for t in g.initializer if t.data_type == onnx.TensorProto.INT64]
        if ints:
            t = rng.choice(ints)
            vals = list(onnx.numpy_helper.to_array(t).reshape(-1))
            if vals:
                vals[rng.randrange(len(vals))] = rng.choice(HUGE)
                new = onnx.numpy_helper.from_array(np.array(vals, dtype=np.int64).reshape(tuple(t.dims)), t.name)
                t.CopyFrom(new)
        return "intdata"
    return "bytes"


def compile_flags(src: str) -> list:
    """The flags that fix what the case's first data set fixes for `onnxc run`: a sequence
    input's tensors (--sequence), an empty optional (--absent), symbolic dims (--shape); so
    that compiling a mutated model gets past its inputs."""
    m = onnx.load(src)
    inits = {i.name for i in m.graph.initializer}
    inputs = [i for i in m.graph.input if i.name not in inits]
    data = os.path.join(os.path.dirname(src), "test_data_set_0")
    shape = lambda t: ",".join(str(d) for d in t.dims)  # noqa: E731
    seq = lambda s: "".join(f"[{shape(t)}]" for t in s.tensor_values)  # noqa: E731
    out = []
    for k, vi in enumerate(inputs):
        path = os.path.join(data, f"input_{k}.pb")
        if not os.path.exists(path):
            continue
        raw = open(path, "rb").read()
        kind = vi.type.WhichOneof("value")
        if kind == "optional_type":
            o = onnx.OptionalProto()
            o.ParseFromString(raw)
            if o.HasField("sequence_value"):
                out += ["--sequence", f"{vi.name}={seq(o.sequence_value)}"]
            elif o.HasField("tensor_value"):
                out += ["--shape", f"{vi.name}={shape(o.tensor_value)}"]
            else:
                out += ["--absent", vi.name]
        elif kind == "sequence_type":
            s = onnx.SequenceProto()
            s.ParseFromString(raw)
            out += ["--sequence", f"{vi.name}={seq(s)}"]
        elif kind == "tensor_type" and any(not d.HasField("dim_value") for d in vi.type.tensor_type.shape.dim):
            t = onnx.TensorProto()
            t.ParseFromString(raw)
            out += ["--shape", f"{vi.name}={shape(t)}"]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--suite", default=os.path.join(ROOT, ".cache", "onnx-suite"))
    ap.add_argument("--onnxc", default=os.path.join(ROOT, "target", "release", "onnxc"))
    ap.add_argument("--keep", default=os.path.join(ROOT, ".cache", "mutate-failures"))
    ap.add_argument("--filter", default="", help="only cases whose name contains this")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    models = sorted(p for kind in ("node", "onnxc") for p in glob.glob(os.path.join(a.suite, kind, "*", "model.onnx"))
                    if a.filter in os.path.basename(os.path.dirname(p)))
    if not models:
        print(f"no models under {a.suite}/node; run `make suite`", file=sys.stderr)
        return 2
    bad = 0
    flags = {}
    with tempfile.TemporaryDirectory(prefix="onnxc-mutate-") as work:
        path = os.path.join(work, "m.onnx")
        for k in range(a.cases):
            src = rng.choice(models)
            m = onnx.load(src)
            what = mutate(rng, m)
            data = bytearray(m.SerializeToString())
            if what == "bytes":
                for _ in range(rng.randrange(1, 4)):
                    data[rng.randrange(len(data))] = rng.randrange(256)
                if rng.random() < 0.3:
                    data = data[: rng.randrange(len(data) + 1)]
            with open(path, "wb") as f:
                f.write(data)
            if src not in flags:
                try:
                    flags[src] = compile_flags(src)
                except Exception:  # noqa: BLE001 (a case whose data cannot be read: no flags)
                    flags[src] = []
            cmds = [[a.onnxc, path, *flags[src], "-o", os.path.join(work, "m.o")]]
            if rng.random() < 0.33:
                inputs = sorted(glob.glob(os.path.join(os.path.dirname(src), "test_data_set_0", "input_*.pb")))
                cmds.append([a.onnxc, "run", path, *inputs, "--output-dir", os.path.join(work, "out")])
            problem = None
            for cmd in cmds:
                try:
                    r = subprocess.run(cmd, capture_output=True, text=True, timeout=SECONDS,
                                       preexec_fn=limited)
                except subprocess.TimeoutExpired:
                    problem = "timeout"
                    break
                if (r.returncode not in (0, 1) or "panicked" in r.stderr or "internal compiler error" in r.stderr
                        or "memory allocation" in r.stderr or (r.returncode == 1 and not r.stderr.strip())):
                    problem = f"{cmd[1]} exit {r.returncode}: {r.stderr.strip()[-300:]}"
                    break
                if r.returncode != 0:
                    break
            if problem:
                bad += 1
                os.makedirs(a.keep, exist_ok=True)
                keep = os.path.join(a.keep, f"{a.seed}_{k}_{os.path.basename(os.path.dirname(src))}_{what}.onnx")
                with open(keep, "wb") as f:
                    f.write(data)
                print(f"case {k} ({what} of {os.path.basename(os.path.dirname(src))}): "
                      f"{problem.replace(chr(10), ' | ')} (kept in {keep})", flush=True)
    print(f"{bad} problem(s) in {a.cases} mutated models")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
