#!/usr/bin/env python3
"""Write the ONNX backend test suite of the pinned onnx package to disk.

Layout (the standard one, as `onnx.backend.test.cmd_tools generate-data` writes it):
    OUT/<kind>/<case>/model.onnx
    OUT/<kind>/<case>/test_data_set_<N>/input_<K>.pb, output_<K>.pb
    OUT/cases.json    one entry per case: kind, name, dir, rtol, atol
    OUT/cases.tsv     the same as tab-separated lines (read by the Rust runner)
    OUT/ops.tsv       every ONNX op: domain, name, first and latest version, element types, deprecated
    OUT/case_ops.tsv  the op types each case uses (for docs/supported-ops.md)

kinds: node (generated in-process, 1884 cases), pytorch-converted, pytorch-operator,
simple, light (the `real` cases, pointing at data/light in the wheel; light inputs are arange(n)/n as onnx's runner makes them),
onnxc (the project's own cases, `onnxc_cases.py`, expected outputs from onnxruntime).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper
from onnx.backend.test.loader import load_model_tests

import onnxc_cases

# Bumped when the generated cases change, so an existing suite folder is rewritten.
GENERATOR = 97

SHIPPED_KINDS = ["pytorch-converted", "pytorch-operator", "simple", "real"]


def serialize(value, type_proto, name: str) -> bytes:
    if type_proto.HasField("map_type"):
        return numpy_helper.from_dict(value, name).SerializeToString()
    if type_proto.HasField("sequence_type"):
        return numpy_helper.from_list(value, name).SerializeToString()
    if type_proto.HasField("optional_type"):
        return numpy_helper.from_optional(value, name).SerializeToString()
    if isinstance(value, TensorProto):
        return value.SerializeToString()
    return numpy_helper.from_array(value, name).SerializeToString()


def write_node_case(case, out_dir: str) -> None:
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "model.onnx"), "wb") as f:
        f.write(case.model.SerializeToString())
    graph = case.model.graph
    for i, (inputs, outputs) in enumerate(case.data_sets):
        ds = os.path.join(out_dir, f"test_data_set_{i}")
        os.makedirs(ds, exist_ok=True)
        for j, value in enumerate(inputs):
            with open(os.path.join(ds, f"input_{j}.pb"), "wb") as f:
                f.write(serialize(value, graph.input[j].type, graph.input[j].name))
        for j, value in enumerate(outputs):
            with open(os.path.join(ds, f"output_{j}.pb"), "wb") as f:
                f.write(serialize(value, graph.output[j].type, graph.output[j].name))


def write_light_case(model_path: str, out_dir: str) -> None:
    """Mirror onnx's runner: inputs arange(n)/n (float32), expected outputs shipped beside."""
    os.makedirs(out_dir, exist_ok=True)
    shutil.copy(model_path, os.path.join(out_dir, "model.onnx"))
    model = onnx.load(model_path, load_external_data=False)
    inits = {i.name for i in model.graph.initializer}
    ds = os.path.join(out_dir, "test_data_set_0")
    os.makedirs(ds, exist_ok=True)
    k = 0
    for x in model.graph.input:
        if x.name in inits:
            continue
        shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in x.type.tensor_type.shape.dim)
        n = int(np.prod(shape))
        value = (np.arange(n).reshape(shape) / n).astype(np.float32)
        with open(os.path.join(ds, f"input_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(value, x.name).SerializeToString())
        k += 1
    prefix = os.path.splitext(model_path)[0]
    for i in range(len(model.graph.output)):
        shutil.copy(f"{prefix}_output_{i}.pb", os.path.join(ds, f"output_{i}.pb"))


def write_op_tables(out: str, cases: list) -> None:
    """ops.tsv: every ONNX op (domain, name, first and latest version, element types, deprecated);
    case_ops.tsv: the op types each case's model uses (subgraphs included)."""
    latest = {}
    earliest = {}
    for schema in onnx.defs.get_all_schemas_with_history():
        key = (schema.domain or "ai.onnx", schema.name)
        if key not in latest or schema.since_version > latest[key].since_version:
            latest[key] = schema
        earliest[key] = min(earliest.get(key, schema.since_version), schema.since_version)
    with open(os.path.join(out, "ops.tsv"), "w") as f:
        for (domain, name), sc in sorted(latest.items()):
            types = set()
            for c in sc.type_constraints:
                for t in c.allowed_type_strs:
                    if t.startswith("tensor(") and t.count("(") == 1:
                        types.add(t[len("tensor("):-1])
            f.write(f"{domain}\t{name}\t{earliest[(domain, name)]}\t{sc.since_version}\t{','.join(sorted(types))}\t{int(sc.deprecated)}\n")

    def graph_ops(g, acc):
        for n in g.node:
            acc.add(((n.domain or "ai.onnx"), n.op_type))
            for a in n.attribute:
                if a.HasField("g"):
                    graph_ops(a.g, acc)
                for sg in a.graphs:
                    graph_ops(sg, acc)

    with open(os.path.join(out, "case_ops.tsv"), "w") as f:
        for c in cases:
            m = onnx.load(os.path.join(c["dir"], "model.onnx"), load_external_data=False)
            acc = set()
            graph_ops(m.graph, acc)
            for fn in m.functions:
                for n in fn.node:
                    acc.add(((n.domain or "ai.onnx"), n.op_type))
            ops = sorted(f"{d}:{o}" for d, o in acc)
            f.write(f"{c['kind']}/{c['name']}\t{','.join(ops)}\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output folder")
    args = ap.parse_args()
    out = os.path.abspath(args.out)
    stamp = os.path.join(out, "cases.json")
    if os.path.exists(stamp):
        with open(stamp) as f:
            stamp_data = json.load(f)
            if (
                stamp_data.get("onnx_version") == onnx.__version__
                and stamp_data.get("generator") == GENERATOR
                and os.path.exists(os.path.join(out, "case_ops.tsv"))
            ):
                print(f"suite for onnx {onnx.__version__} already at {out}")
                return 0
        shutil.rmtree(out)
    cases = []
    for case in load_model_tests(kind="node"):
        d = os.path.join(out, "node", case.name)
        write_node_case(case, d)
        cases.append({"kind": "node", "name": case.name, "dir": d, "rtol": case.rtol, "atol": case.atol})
    data_root = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
    for kind in SHIPPED_KINDS:
        # The "real" cases point at the light_* models shipped in data/light.
        out_kind = "light" if kind == "real" else kind
        for case in sorted(load_model_tests(kind=kind), key=lambda c: c.name):
            d = os.path.join(out, out_kind, case.name)
            if kind == "real":
                write_light_case(os.path.join(data_root, "light", os.path.basename(case.url)), d)
            else:
                shutil.copytree(case.model_dir, d, dirs_exist_ok=True)
            cases.append({"kind": out_kind, "name": case.name, "dir": d, "rtol": case.rtol, "atol": case.atol})
    cases += onnxc_cases.write(out, os.path.join(data_root, "light"))
    write_op_tables(out, cases)
    with open(os.path.join(out, "cases.tsv"), "w") as f:
        for c in cases:
            f.write(f"{c['kind']}\t{c['name']}\t{c['dir']}\t{c['rtol']!r}\t{c['atol']!r}\n")
    with open(stamp, "w") as f:
        json.dump({"onnx_version": onnx.__version__, "generator": GENERATOR, "cases": cases}, f, indent=1)
    by_kind = {}
    for c in cases:
        by_kind[c["kind"]] = by_kind.get(c["kind"], 0) + 1
    print(f"wrote {len(cases)} cases to {out}: {by_kind}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
