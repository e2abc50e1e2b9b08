"""Python helpers shared by the test-data generators (tests/conformance) and the benchmark
(tests/bench): a small ONNX graph builder with seeded weights, and the rewrite that gives
onnx's light_* zoo models varied weights. Import with tests/support on sys.path."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper


class GraphBuilder:
    """Accumulates nodes and seeded initializers; subclasses add their own `model()`.

    `w(*shape)` draws N(0, 1/fan_in) weights, fan_in being the product of all but the first
    dimension. A rank-1 tensor has no such product: `vector_fan_in` says whether its fan-in is
    1 (unit-scale biases, the conformance cases) or its length (the benchmark models). The two
    data sets were generated that way and are kept byte-identical."""

    def __init__(self, seed: int, vector_fan_in: str = "one"):
        assert vector_fan_in in ("one", "len")
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.n = [], [], 0
        self.vector_fan_in = vector_fan_in

    def w(self, *shape, scale=None):
        self.n += 1
        if len(shape) > 1:
            fan_in = int(np.prod(shape[1:]))
        else:
            fan_in = shape[0] if self.vector_fan_in == "len" else 1
        s = scale if scale is not None else 1.0 / np.sqrt(max(fan_in, 1))
        name = f"w{self.n}"
        self.inits.append(numpy_helper.from_array((self.rng.standard_normal(shape) * s).astype(np.float32), name))
        return name

    def const(self, value, dtype=np.float32):
        self.n += 1
        name = f"c{self.n}"
        self.inits.append(numpy_helper.from_array(np.array(value, dtype), name))
        return name

    def op(self, op_type, inputs, outputs=1, **attrs):
        """A node of `op_type`; its output's name, or a list of `outputs` names."""
        self.n += 1
        outs = [f"t{self.n}"] if outputs == 1 else [f"t{self.n}_{k}" for k in range(outputs)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=f"{op_type.lower()}_{self.n}", **attrs))
        return outs[0] if outputs == 1 else outs


def with_varied_weights(m: onnx.ModelProto, seed: int = 1) -> onnx.ModelProto:
    """onnx's light models build every weight with ConstantOfShape (one value per tensor),
    which makes outputs degenerate (ResNet-50's softmax is exactly uniform): a comparison of
    outputs then cannot see a wrong channel order or a wrong weight layout. Replace each float
    fill by a seeded initializer of the same shape: kernels and matrices (rank >= 2) get
    He-style N(0, 2/fan_in) weights so activations stay O(1); rank-1 tensors (biases,
    BatchNorm parameters) vary around the fill value (same sign, 0.5x-1.5x), so variances
    stay positive. Returns a new model; `m` is left alone."""
    m = onnx.ModelProto.FromString(m.SerializeToString())
    inits = {i.name: i for i in m.graph.initializer}
    rng = np.random.default_rng(seed)
    keep = []
    for n in m.graph.node:
        if n.op_type == "ConstantOfShape" and n.input and n.input[0] in inits:
            value = next((a.t for a in n.attribute if a.name == "value"), None)
            fill = numpy_helper.to_array(value).ravel()[0] if value is not None else np.float32(0)
            if value is None or value.data_type == onnx.TensorProto.FLOAT:
                shape = tuple(int(d) for d in numpy_helper.to_array(inits[n.input[0]]))
                if len(shape) >= 2:
                    fan_in = int(np.prod(shape[1:]))
                    arr = rng.standard_normal(shape) * np.sqrt(2.0 / max(fan_in, 1))
                else:
                    arr = fill * rng.uniform(0.5, 1.5, size=shape)
                m.graph.initializer.append(numpy_helper.from_array(arr.astype(np.float32), n.output[0]))
                continue
        keep.append(n)
    del m.graph.node[:]
    m.graph.node.extend(keep)
    return m
