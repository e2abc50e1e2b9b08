"""Project-written conformance cases (kind `onnxc`): small CNN graphs with seeded random
weights and inputs whose channel counts come in blocks of 8, so that they exercise the
channel-blocked (NCHWc) layout and its conversions — grouped, depthwise, strided, dilated
and asymmetrically padded convolutions, residual adds, channel concatenation, pooling of
every kind, global pooling, squeeze-excitation scaling, channel shuffles, batch 2, graph
outputs taken in the middle of a blocked chain — plus plain fallbacks next to them; and
attention written as exporters emit it, whose head transposes the matmuls read in place;
and six of onnx's light_* zoo models with varied weights in place of their constant fills;
SiLU, QuickGELU, Sigmoid and Tanh after convs over their tails; transposed convolutions of decoders; Resize and Upsample with constant scales/sizes/roi, opsets 7 to 13; QDQ- and QOperator-quantized CNNs; If nodes on shape checks;
LSTM/GRU/RNN with the attributes the reference evaluator ignores; Loop and Scan nodes that onnxc unrolls, a Loop with scan outputs that stops on a run-time condition; If nodes on run-time conditions; TopK; GridSample and AffineGrid; RotaryEmbedding; DFT, STFT and windows; the experimental ops of opsets 1-9; sequences kept at compile time; MaxUnpool; 1-D and 3-D convolutions and pools; Einsum products; activations between QDQ pairs (table lookups); NonZero, Compress and NonMaxSuppression read on by other ops; onnxruntime's QOperator contrib ops; float8, float4, int4 and int2 values.
Expected outputs come from onnxruntime with its graph optimizations off (onnx's reference
evaluator for the cases in REFERENCE_ORACLE)."""
from __future__ import annotations

import os
import shutil
import sys
import zlib

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from onnx_builder import GraphBuilder, with_varied_weights  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import contrib_cases  # noqa: E402
import ml_cases  # noqa: E402
from contrib_reference import CONTRIB_OPS  # noqa: E402

OPSET = 17


class G(GraphBuilder):
    def __init__(self, seed: int):
        super().__init__(seed, vector_fan_in="one")

    def conv(self, x, cin, cout, k, stride=1, pad=None, group=1, dil=1, bias=True):
        kh, kw = (k, k) if isinstance(k, int) else k
        pads = pad if isinstance(pad, list) else [(kh // 2) * dil, (kw // 2) * dil] * 2 if pad is None else [pad] * 4
        ins = [x, self.w(cout, cin // group, kh, kw)] + ([self.w(cout, scale=0.1)] if bias else [])
        return self.op("Conv", ins, kernel_shape=[kh, kw], strides=[stride, stride], pads=pads, group=group,
                       dilations=[dil, dil])

    def bn(self, x, c):
        scale = numpy_helper.from_array((1.0 + 0.1 * self.rng.standard_normal(c)).astype(np.float32), f"bs{self.n}")
        var = numpy_helper.from_array((0.5 + np.abs(self.rng.standard_normal(c))).astype(np.float32), f"bv{self.n}")
        self.inits += [scale, var]
        return self.op("BatchNormalization", [x, scale.name, self.w(c, scale=0.1), self.w(c, scale=0.1), var.name])

    def model(self, inputs, outputs, opset=OPSET):
        g = helper.make_graph(
            self.nodes, "g",
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
            [helper.make_tensor_value_info(n, TensorProto.UNDEFINED, None) for n in outputs],
            self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="onnxc-tests")
        m.ir_version = 8
        # Output types from shape inference.
        im = onnx.shape_inference.infer_shapes(m, strict_mode=True)
        inferred = {v.name: v for v in list(im.graph.value_info) + list(im.graph.output)}
        for o in m.graph.output:
            o.type.CopyFrom(inferred[o.name].type)
        onnx.checker.check_model(m)
        return m


def resnet_block():
    """Stem, BN+ReLU, max pool, a bottleneck with a projection shortcut (stride 2), global
    average pool, Gemm, Softmax; two outputs (one mid-network, blocked there)."""
    g = G(11)
    x = g.op("Relu", [g.bn(g.conv("x", 3, 16, 7, stride=2), 16)])
    x = g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    mid = x
    y = g.op("Relu", [g.bn(g.conv(x, 16, 16, 1), 16)])
    y = g.op("Relu", [g.bn(g.conv(y, 16, 16, 3, stride=2), 16)])
    y = g.bn(g.conv(y, 16, 64, 1), 64)
    sc = g.bn(g.conv(x, 16, 64, 1, stride=2, pad=0), 64)
    y = g.op("Relu", [g.op("Add", [y, sc])])
    y = g.op("Flatten", [g.op("GlobalAveragePool", [y])])
    y = g.op("Softmax", [g.op("Gemm", [y, g.w(10, 64), g.w(10, scale=0.1)], transB=1)], axis=1)
    return g.model([("x", [1, 3, 64, 64])], [y, mid])


def mobilenet_block():
    """Depthwise-separable blocks with ReLU6 (Clip), strides 1 and 2, a dilated depthwise
    conv, average pooling counting padding, batch 2; the last conv's output is the graph
    output."""
    g = G(12)
    lo, hi = g.const(0.0), g.const(6.0)
    x = g.op("Clip", [g.conv("x", 8, 16, 3, stride=2), lo, hi])
    x = g.op("Clip", [g.conv(x, 16, 16, 3, group=16), lo, hi])
    x = g.op("Clip", [g.conv(x, 16, 32, 1), lo, hi])
    x = g.op("Clip", [g.conv(x, 32, 32, 3, stride=2, group=32), lo, hi])
    x = g.conv(x, 32, 32, 3, group=32, dil=2)
    x = g.op("AveragePool", [x], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1], count_include_pad=1)
    x = g.conv(x, 32, 24, 1)
    return g.model([("x", [2, 8, 30, 30])], [x])


def shufflenet_unit():
    """Grouped 1x1 convs (3 groups of 16 channels), a channel shuffle (Reshape/Transpose),
    a depthwise stride-2 conv, an average-pooled shortcut and a channel concat with ReLU."""
    g = G(13)
    x = g.op("Relu", [g.conv("x", 24, 48, 1, group=3)])
    s = g.op("Reshape", [x, g.const([1, 3, 16, 12, 12], np.int64)])
    s = g.op("Transpose", [s], perm=[0, 2, 1, 3, 4])
    s = g.op("Reshape", [s, g.const([1, 48, 12, 12], np.int64)])
    s = g.conv(s, 48, 48, 3, stride=2, group=48)
    s = g.conv(s, 48, 48, 1, group=3)
    p = g.op("AveragePool", ["x"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    y = g.op("Relu", [g.op("Concat", [p, s], axis=1)])
    return g.model([("x", [1, 24, 12, 12])], [y])


def inception_block():
    """Four branches (1x1; 1x1 then 3x3 with Winograd-sized maps; 1x7 then 7x1 with
    asymmetric padding; 3x3 max pool then 1x1) concatenated, a ceil-mode max pool, a
    squeeze-excitation scale (GAP, two Gemms, Sigmoid, Mul) and a per-channel affine map."""
    g = G(14)
    x = g.op("Relu", [g.conv("x", 16, 32, 3)])
    b1 = g.op("Relu", [g.conv(x, 32, 16, 1)])
    b2 = g.op("Relu", [g.conv(g.op("Relu", [g.conv(x, 32, 32, 1)]), 32, 32, 3)])
    b3 = g.conv(g.conv(x, 32, 16, 1), 16, 16, (1, 7), pad=[0, 3, 0, 3])
    b3 = g.op("Relu", [g.conv(b3, 16, 16, (7, 1), pad=[3, 0, 3, 0])])
    b4 = g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])
    b4 = g.op("Relu", [g.conv(b4, 32, 8, 1)])
    y = g.op("Concat", [b1, b2, b3, b4], axis=1)
    y = g.op("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)
    se = g.op("Flatten", [g.op("GlobalAveragePool", [y])])
    se = g.op("Relu", [g.op("Gemm", [se, g.w(16, 72), g.w(16, scale=0.1)], transB=1)])
    se = g.op("Sigmoid", [g.op("Gemm", [se, g.w(72, 16), g.w(72, scale=0.1)], transB=1)])
    se = g.op("Reshape", [se, g.const([1, 72, 1, 1], np.int64)])
    y = g.op("Mul", [y, se])
    y = g.op("Add", [g.op("Mul", [y, g.w(1, 72, 1, 1)]), g.w(72, 1, 1)])
    return g.model([("x", [1, 16, 20, 20])], [y])


def mixed_fallbacks():
    """Blocked and plain steps side by side: a 3x3 conv with 12 and a 1x1 with 4 output
    channels (not whole blocks, padded to them) concatenated, asymmetric padding with
    stride 2, a dilated max pool, an LRN, a ReduceMean over the spatial dims without
    keepdims, a Conv whose input is a graph input used twice, and a strided, dilated 3x3
    conv."""
    g = G(15)
    a = g.op("Relu", [g.conv("x", 8, 16, 3, stride=2, pad=[0, 1, 1, 0])])
    b = g.conv(a, 16, 12, 3)
    c = g.op("Concat", [b, g.conv(a, 16, 4, 1)], axis=1)
    c = g.op("MaxPool", [c], kernel_shape=[2, 2], strides=[1, 1], dilations=[2, 2])
    c = g.op("LRN", [c], size=5, alpha=1e-3, beta=0.75, bias=1.0)
    d = g.conv(c, 16, 16, 3, stride=2, dil=2, pad=2)
    e = g.op("ReduceMean", [d], axes=[2, 3], keepdims=0)
    f = g.op("Add", [g.conv("x", 8, 8, 1), "x"])
    return g.model([("x", [1, 8, 17, 17])], [e, d, f])


def padded_heads():
    """Heads whose output channels are not whole blocks after a blocked chain, which run
    blocked with zero filters added (schedule/layout.rs `pads_outputs`), batch 2: a 1x1 to
    one map and a Sigmoid, a YOLO-style 1x1 to 21 channels without bias, a 3x3 stride-2
    conv to 5 channels read by a plain conv and a max pool, a BatchNorm and ReLU folded into
    a 1x1 to 3 channels, and a 1x1 to 10 classes over globally pooled features (one
    position, whose blocked and plain forms differ)."""
    g = G(16)
    x = g.op("Relu", [g.conv("x", 8, 16, 3)])
    x = g.op("Relu", [g.conv(x, 16, 16, 3)])
    prob = g.op("Sigmoid", [g.conv(x, 16, 1, 1)])
    det = g.conv(x, 16, 21, 1, bias=False)
    five = g.conv(x, 16, 5, 3, stride=2)
    after = g.op("MaxPool", [g.conv(five, 5, 8, 3)], kernel_shape=[2, 2], strides=[2, 2])
    pooled = g.op("MaxPool", [five], kernel_shape=[2, 2], strides=[2, 2])
    three = g.op("Relu", [g.bn(g.conv(x, 16, 3, 1), 3)])
    cls = g.conv(g.op("GlobalAveragePool", [x]), 16, 10, 1)
    return g.model([("x", [2, 8, 12, 14])], [prob, det, after, pooled, three, cls])


def attention_views():
    """Multi-head attention, batch 2, as exporters write it: head splits by Reshape +
    Transpose [0, 2, 1, 3] (Q, V) and Kᵀ by one Transpose [0, 2, 3, 1], which the matmuls read
    in place (schedule/views.rs); a transposed A whose rows are contiguous; a transpose that is
    also a graph output and read by an Add; and a permutation the GEMM cannot read in place
    (the innermost dim moved to a batch dim), which stays a copy. Score scales by Mul and Div
    are folded into the softmax (schedule/softmax_scale.rs), a negative one is not."""
    g = G(16)
    b, s, h, dh = 2, 12, 3, 8
    d = h * dh
    heads = []
    for perm in ([0, 2, 1, 3], [0, 2, 3, 1], [0, 2, 1, 3]):
        p = g.op("Add", [g.op("MatMul", ["x", g.w(d, d)]), g.w(d, scale=0.1)])
        p = g.op("Reshape", [p, g.const([b, s, h, dh], np.int64)])
        heads.append(g.op("Transpose", [p], perm=perm))
    q, kt, v = heads
    sc = g.op("Softmax", [g.op("Mul", [g.op("MatMul", [q, kt]), g.const(1.0 / np.sqrt(dh))])], axis=-1)
    a = g.op("Transpose", [g.op("MatMul", [sc, v])], perm=[0, 2, 1, 3])
    y = g.op("MatMul", [g.op("Reshape", [a, g.const([b, s, d], np.int64)]), g.w(d, d)])
    xt = g.op("Transpose", ["x"], perm=[0, 2, 1])
    z = g.op("MatMul", [xt, g.w(s, 5)])
    xt_out = g.op("Add", [xt, g.const(1.0)])
    x4 = g.op("Reshape", ["x", g.const([b, s, h, dh], np.int64)])
    pm = g.op("MatMul", [g.op("Transpose", [x4], perm=[3, 0, 2, 1]), g.w(s, 4)])
    # Scales folded into the softmax (Mul above, Div by √d here) and one that is not (a negative
    # product of two scalars).
    raw = g.op("MatMul", [q, kt])
    sd = g.op("Softmax", [g.op("Div", [raw, g.const(np.sqrt(dh))])], axis=-1)
    sn = g.op("Softmax", [g.op("Mul", [g.op("Mul", [raw, g.const(0.5)]), g.const(-3.0)])], axis=-1)
    return g.model([("x", [b, s, d])], [y, z, xt_out, pm, q, sd, sn])


def attention_fused():
    """Attention blocks the compiler runs as one fused kernel (schedule/attention.rs), batch 2,
    over 300 keys (several blocks of query rows): two self-attention layers sharing a
    [b, 1, 1, n] padding mask made from an input (scores divided by √d then masked; masked
    then scaled by a Mul, the mask the Add's first operand); cross-attention of 7 queries over
    the 300 keys with the same mask; multi-query attention (one key/value head for two query
    heads) with its scale folded into the softmax; single-head attention without a head dim
    under a constant causal [n, n] mask of -inf; cross-attention with a full-size bias
    expression."""
    g = G(17)
    b, s, t, h, dh = 2, 300, 7, 2, 16
    d = h * dh

    def heads(x, n, k=h, perm=(0, 2, 1, 3)):
        p = g.op("MatMul", [x, g.w(d, k * dh)])
        p = g.op("Reshape", [p, g.const([b, n, k, dh], np.int64)])
        return g.op("Transpose", [p], perm=list(perm))

    def merge(a, n):
        a = g.op("Transpose", [a], perm=[0, 2, 1, 3])
        return g.op("Reshape", [a, g.const([b, n, d], np.int64)])

    keep = g.op("Less", ["keep", g.const(0.8)])
    mask = g.op("Mul", [g.op("Sub", [g.const(1.0), g.op("Cast", [keep], to=TensorProto.FLOAT)]), g.const(-1e4)])
    mask = g.op("Unsqueeze", [mask, g.const([1, 2], np.int64)])
    x = "x"
    for layer in range(2):
        q, kt, v = heads(x, s), heads(x, s, perm=(0, 2, 3, 1)), heads(x, s)
        sc = g.op("MatMul", [q, kt])
        if layer == 0:
            sc = g.op("Add", [g.op("Div", [sc, g.const(np.sqrt(dh))]), mask])
        else:
            sc = g.op("Mul", [g.op("Add", [mask, sc]), g.const(1.0 / np.sqrt(dh))])
        a = g.op("MatMul", [g.op("Softmax", [sc], axis=-1), v])
        x = g.op("Add", [x, merge(a, s)])
    q, kt, v = heads("y", t), heads(x, s, perm=(0, 2, 3, 1)), heads(x, s)
    sc = g.op("Add", [g.op("Div", [g.op("MatMul", [q, kt]), g.const(np.sqrt(dh))]), mask])
    cross = merge(g.op("MatMul", [g.op("Softmax", [sc], axis=-1), v]), t)
    q, kt, v = heads(x, s), heads(x, s, k=1, perm=(0, 2, 3, 1)), heads(x, s, k=1)
    sc = g.op("Mul", [g.op("MatMul", [q, kt]), g.const(1.0 / np.sqrt(dh))])
    mqa = merge(g.op("MatMul", [g.op("Softmax", [sc], axis=-1), v]), s)
    causal = np.triu(np.full((s, s), -np.inf, np.float32), 1)
    qs, ks, vs = (g.op("MatMul", [x, g.w(d, d)]) for _ in range(3))
    sc = g.op("MatMul", [qs, g.op("Transpose", [ks], perm=[0, 2, 1])])
    sc = g.op("Add", [g.op("Div", [sc, g.const(np.sqrt(d))]), g.const(causal)])
    single = g.op("MatMul", [g.op("Softmax", [sc], axis=-1), vs])
    # A full-size bias (a relative-position bias, halved) that fusion inlines into the scores'
    # map: computed by a step of its own before the attention kernel.
    own = g.op("Mul", ["rel", g.const(0.5)])
    q, kt, v = heads("y", t), heads(x, s, perm=(0, 2, 3, 1)), heads(x, s)
    sc = g.op("Add", [g.op("Div", [g.op("MatMul", [q, kt]), g.const(np.sqrt(dh))]), own])
    inline = merge(g.op("MatMul", [g.op("Softmax", [sc], axis=-1), v]), t)
    return g.model([("x", [b, s, d]), ("y", [b, t, d]), ("keep", [b, s]), ("rel", [b, h, t, s])],
                   [x, cross, mqa, single, inline])


def softmax_scale_limits():
    """Scaled softmaxes at the edges of the scale fold (schedule/softmax_scale.rs): factors
    above 1 (3e38 overflows the scores to ±inf, where the graph's softmax is NaN; 4 does not)
    stay maps; factors in (0, 1] (1e-3, 1e-30, 0.5) are folded, the last over scores with
    +inf, -inf and NaN entries and a row of -inf (a materialized tensor: also an output)."""
    g = G(17)
    b, s, d = 2, 6, 16
    t = g.op("MatMul", ["x", g.w(d, d)])
    special = np.zeros((1, s, d), np.float32)
    special[0, 0, 3] = np.inf
    special[0, 1, [2, 9]] = -np.inf
    special[0, 2, 5] = np.nan
    special[0, 3, :] = -np.inf
    special[0, 4, [0, 7]] = [np.inf, -np.inf]
    u = g.op("Add", [t, g.const(special)])
    outs = [
        g.op("Softmax", [g.op(op, [src, g.const(c)])], axis=-1)
        for op, src, c in [("Mul", t, 3e38), ("Div", t, 0.25), ("Mul", t, 1e-3), ("Div", t, 1e30), ("Mul", u, 0.5)]
    ]
    return g.model([("x", [b, s, d])], outs + [u])


def pool_ceil_edges():
    """ceil_mode pools whose one window is larger than the padded input (accepted: one output,
    the taps past the padding not counted), blocked (after a conv, 16 channels) and plain
    (3 channels): average with and without the padding counted, max, and a 1×1 plane."""
    g = G(18)
    t = g.conv("x", 16, 16, 1)
    a = g.op("AveragePool", [t], kernel_shape=[2, 4], strides=[2, 2], pads=[0, 1, 0, 3], ceil_mode=1,
             count_include_pad=1)
    b = g.op("AveragePool", [t], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 0, 0], ceil_mode=1)
    c = g.op("MaxPool", [t], kernel_shape=[2, 3], strides=[2, 2], pads=[0, 1, 0, 1], ceil_mode=1)
    d = g.op("MaxPool", ["y"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)
    e = g.op("AveragePool", ["z"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1, count_include_pad=1)
    return g.model([("x", [2, 16, 1, 6]), ("y", [1, 3, 1, 1]), ("z", [1, 3, 3, 1])], [a, b, c, d, e])


def pool_huge_windows():
    """Pools whose windows are far wider than the input and the padding they need, so most
    taps lie in the padding at every output position: onnxc trims those taps (a 2×1048576
    window over 32×32 walked 2 M taps per output) and counts an average's taps in closed
    form. Max, average with and without the padding counted,
    Lp (p = 2 through the kernel's exponent, p = 3 as generated code), with auto_pad, explicit
    pads and dilations, over 16 channels after a conv (blocked layout) and 3 plain ones."""
    g = G(23)
    t = g.conv("x", 16, 16, 1)
    outs = [
        g.op("MaxPool", [t], kernel_shape=[3, 301], auto_pad="SAME_LOWER"),
        g.op("AveragePool", [t], kernel_shape=[5, 257], auto_pad="SAME_UPPER"),
        g.op("LpPool", [t], kernel_shape=[2, 199], auto_pad="SAME_LOWER", p=2),
        g.op("MaxPool", ["y"], kernel_shape=[2, 64], pads=[1, 63, 0, 62], dilations=[1, 2]),
        g.op("AveragePool", ["y"], kernel_shape=[1, 96], pads=[0, 50, 0, 45], strides=[1, 3]),
        g.op("AveragePool", ["y"], kernel_shape=[3, 90], pads=[1, 44, 1, 45], count_include_pad=1),
        g.op("AveragePool", [t], kernel_shape=[2, 129], auto_pad="SAME_LOWER", count_include_pad=1),
        g.op("LpPool", ["y"], kernel_shape=[3, 120], pads=[1, 60, 1, 59], p=3),
    ]
    return g.model([("x", [1, 16, 6, 9]), ("y", [2, 3, 4, 7])], outs, opset=18)


def softplus_tails():
    """Softplus over its tails (-88 … 90, ±inf, NaN) (Mish builds on the same expression),
    and the log of Softplus,
    which shows a softplus of a very negative input flushed to 0 (log(1 + e^x) rounds to 0
    below x ≈ -17; the answer is e^x)."""
    g = G(19)
    offsets = np.array([-88.0, -60.0, -40.0, -20.0, -17.0, -5.0, 0.0, 5.0, 20.0, 90.0, np.inf, -np.inf, np.nan],
                       np.float32)
    x = g.op("Add", [g.op("Mul", ["x", g.const(1e-3)]), g.const(offsets)])
    sp = g.op("Softplus", [x])
    return g.model([("x", [4, len(offsets)])], [sp, g.op("Log", [sp])])


def silu_convs():
    """SiLU after convs as YOLO/EfficientNet exports write it (Sigmoid, Mul in either
    order), QuickGELU (x·sigmoid(1.702x)), Sigmoid, Tanh, HardSigmoid and HardSwish
    (MobileNetV3, also as PyTorch's opset-9 x·HardSigmoid(x)), over a conv output shifted
    into the exponent's tails and special values (-100 … 89, ±inf, NaN), and after a
    strided conv: onnxc computes these maps with its 16-lane activation kernel
    (`onnxc_activation_f32`) at -O2 and with generated code at -O0."""
    g = G(31)
    offsets = np.array([-100.0, -88.0, -20.0, -9.2, -0.6, 0.0, 0.6, 9.2, 20.0, 89.0, np.inf, -np.inf, np.nan],
                       np.float32)
    c = g.op("Add", [g.conv("x", 8, 8, 3), g.const(offsets.reshape(1, 1, 1, -1))])
    d = g.conv("x", 8, 16, 3, stride=2)
    outs = [c, g.op("Mul", [c, g.op("Sigmoid", [c])]), g.op("Mul", [g.op("Sigmoid", [c]), c]),
            g.op("Mul", [g.op("Sigmoid", [g.op("Mul", [c, g.const(np.float32(1.702))])]), c]),
            g.op("Sigmoid", [c]), g.op("Tanh", [c]), g.op("Mul", [d, g.op("Sigmoid", [d])]),
            g.op("HardSigmoid", [c], alpha=0.3, beta=0.6), g.op("HardSwish", [c], ),
            g.op("Mul", [d, g.op("HardSigmoid", [d], alpha=1.0 / 6.0)])]
    return g.model([("x", [1, 8, 9, len(offsets)])], outs)


def conv_transpose_decoder():
    """Transposed convolutions with constant weights as decoders export them (onnxc packs
    their weights at compile time and runs a GEMM and a col2im): UNet's 2×2/2 up-convolution
    with bias and ReLU into a skip concat, a GAN's 4×4/2 with padding 1, 3×3/2 with an output
    padding, groups with dilation, SAME_UPPER auto-padding and an explicit output_shape."""
    g = G(33)

    def ct(x, cin, cout, k, group=1, bias=True, **attrs):
        kh, kw = (k, k) if isinstance(k, int) else k
        ins = [x, g.w(cin, cout // group, kh, kw)] + ([g.w(cout, scale=0.1)] if bias else [])
        return g.op("ConvTranspose", ins, kernel_shape=[kh, kw], group=group, **attrs)

    e = g.op("Relu", [g.conv("x", 8, 16, 3, stride=2)])
    u = g.op("Relu", [ct(e, 16, 8, 2, strides=[2, 2])])
    skip = g.op("Concat", [u, "x"], axis=1)
    gan = ct(skip, 16, 8, 4, strides=[2, 2], pads=[1, 1, 1, 1])
    op3 = ct(gan, 8, 8, 3, bias=False, strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1])
    grp = ct(e, 16, 8, (3, 2), group=2, strides=[2, 3], dilations=[2, 1], pads=[0, 1, 1, 0])
    same = ct(e, 16, 8, 3, strides=[2, 2], auto_pad="SAME_UPPER")
    shaped = ct(e, 16, 4, 3, strides=[2, 2], output_shape=[10, 12])
    return g.model([("x", [2, 8, 10, 12])], [gan, op3, grp, same, shaped])


def resize_constant():
    """Resize as exported models use it, scales/sizes/roi as initializers (onnxc builds the
    taps at compile time): nearest x2 after a blocked conv (asymmetric + floor, PyTorch's
    nearest: an index division), bilinear x2 (pytorch_half_pixel), bilinear to a size with
    align_corners, cubic downscale, tf_crop_and_resize with extrapolation (nearest and
    linear), and a uint8 bilinear upscale (rounded, saturated)."""
    g = G(20)
    t = g.conv("x", 8, 16, 1)
    scale2 = g.const([1.0, 1.0, 2.0, 2.0])
    outs = [
        g.op("Resize", [t, "", scale2], mode="nearest", coordinate_transformation_mode="asymmetric",
             nearest_mode="floor"),
        g.op("Resize", [t, "", scale2], mode="linear", coordinate_transformation_mode="pytorch_half_pixel"),
        g.op("Resize", ["x", "", "", g.const([1, 8, 9, 4], np.int64)], mode="linear",
             coordinate_transformation_mode="align_corners"),
        g.op("Resize", ["x", "", g.const([1.0, 1.0, 0.6, 0.75])], mode="cubic"),
        g.op("Resize", ["x", g.const([0, 0, -0.2, 0.1, 1, 1, 0.9, 1.3]), "", g.const([1, 8, 4, 6], np.int64)],
             mode="nearest", coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=-3.0),
        g.op("Resize", ["x", g.const([0, 0, 0.1, -0.25, 1, 1, 0.7, 1.1]), g.const([1.0, 1.0, 1.5, 1.25])],
             mode="linear", coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=2.5),
    ]
    u8 = g.op("Cast", [g.op("Clip", [g.op("Add", [g.op("Mul", ["x", g.const(60.0)]), g.const(128.0)]),
                                    g.const(0.0), g.const(255.0)])], to=TensorProto.UINT8)
    outs.append(g.op("Cast", [g.op("Resize", [u8, "", g.const([1.0, 1.0, 2.0, 3.0])], mode="linear")],
                     to=TensorProto.FLOAT))
    return g.model([("x", [1, 8, 5, 7])], outs, opset=13)


def model_functions():
    """Model-local functions (FunctionProto, as skl2onnx and onnxscript-based exporters
    write them): attribute references with a default (attribute_proto), a function calling
    another, a function importing a domain the model's graph does not use, an output the
    caller leaves out."""
    fa = helper.make_node("Constant", [], ["a"], value_float=0.0)
    fa.attribute[0].ref_attr_name = "alpha"
    fb = helper.make_node("Constant", [], ["c"], value_float=0.0)
    fb.attribute[0].ref_attr_name = "beta"
    scaled_add = helper.make_function(
        "custom", "ScaledAdd", ["x", "b"], ["y", "bx"],
        [fa, fb, helper.make_node("Mul", ["x", "a"], ["ax"]), helper.make_node("Mul", ["b", "c"], ["bx"]),
         helper.make_node("Add", ["ax", "bx"], ["y"])],
        [helper.make_opsetid("", 17)], ["alpha"],
        attribute_protos=[helper.make_attribute("beta", 1.0)])
    ta = helper.make_node("ScaledAdd", ["x", "b"], ["t", "t2"], domain="custom")
    ta.attribute.add().CopyFrom(helper.make_attribute("alpha", 0.0))
    ta.attribute[0].ref_attr_name = "alpha"
    twice = helper.make_function(
        "custom", "Twice", ["x", "b"], ["y"],
        [ta, helper.make_node("ScaledAdd", ["t", "b"], ["y", "y2"], domain="custom", alpha=0.25, beta=-1.0)],
        [helper.make_opsetid("", 17), helper.make_opsetid("custom", 1)], ["alpha"])
    norm = helper.make_function(
        "custom", "Norm", ["x", "g"], ["y"], [helper.make_node("LayerNormalization", ["x", "g"], ["y"], axis=-1)],
        [helper.make_opsetid("", 17)], [])
    rng = np.random.default_rng(25)
    g = numpy_helper.from_array(rng.standard_normal(6).astype(np.float32), "g")
    nodes = [helper.make_node("ScaledAdd", ["x", "z"], ["s", ""], domain="custom", alpha=2.0),
             helper.make_node("ScaledAdd", ["x", "z"], ["u", "v"], domain="custom", alpha=0.5, beta=3.0),
             helper.make_node("Twice", ["s", "u"], ["w"], domain="custom", alpha=-1.5),
             helper.make_node("Norm", ["w", "g"], ["n"], domain="custom")]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, [4, 6]) for n in ("x", "z")],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [4, 6]) for n in ("s", "v", "w", "n")], [g])
    m = helper.make_model(graph, functions=[scaled_add, twice, norm], producer_name="onnxc-tests",
                          opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("custom", 1)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def resize_legacy():
    """Resize-10 (asymmetric; nearest rounds down when upsampling, up when downsampling) and
    its Upsample forerunners, scales as initializers; and Resize-11's tf_half_pixel_for_nn
    (dropped in opset 13; tf2onnx writes it for TensorFlow's half-pixel nearest resize)."""
    g = G(24)
    tf = [g.op("Resize", ["x", g.const(np.zeros(0, np.float32)), g.const(sc)], mode=mode,
               coordinate_transformation_mode="tf_half_pixel_for_nn", nearest_mode=nearest)
          for sc in ([1.0, 1.0, 2.0, 1.5], [1.0, 1.0, 0.6, 0.75])
          for mode, nearest in [("nearest", "round_prefer_ceil"), ("nearest", "floor"), ("linear", "floor")]]
    m11 = g.model([("x", [1, 3, 5, 7])], tf, opset=11)
    outs = []
    g = G(21)
    for mode in ["nearest", "linear"]:
        for sc in ([1.0, 1.0, 2.0, 3.0], [1.0, 1.0, 0.6, 1.5], [1.0, 1.0, 0.5, 0.5]):
            outs.append(g.op("Resize", ["x", g.const(sc)], mode=mode))
    m10 = g.model([("x", [1, 3, 5, 7])], outs, opset=10)
    g = G(22)
    u9 = [g.op("Upsample", ["x", g.const([1.0, 1.0, 2.0, 1.5])], mode=m) for m in ["nearest", "linear"]]
    m9 = g.model([("x", [1, 3, 5, 7])], u9, opset=9)
    g = G(23)
    u7 = [g.op("Upsample", ["x"], mode=m, scales=[1.0, 1.0, 3.0, 2.0]) for m in ["nearest", "linear"]]
    m7 = g.model([("x", [1, 3, 5, 7])], u7, opset=7)
    return m11, m10, m9, m7


def qdq_cnn():
    """A quantized CNN in the QDQ form onnxruntime's quantizer writes: uint8 activations
    (QuantizeLinear → DequantizeLinear around each op, per tensor), int8 weights dequantized
    per output channel (axis 0), int32 biases, a residual Add, a pool and a Gemm; then
    DynamicQuantizeLinear of the result."""
    g = G(24)
    rng = np.random.default_rng(24)

    def qdq(t, scale, zp=128):
        sc, z = g.const(np.float32(scale)), g.const(np.uint8(zp), np.uint8)
        return g.op("DequantizeLinear", [g.op("QuantizeLinear", [t, sc, z]), sc, z])

    def qweight(cout, cin, k):
        w = rng.integers(-127, 128, size=(cout, cin, k, k)).astype(np.int8)
        scale = (0.02 + 0.01 * rng.random(cout)).astype(np.float32)
        return g.op("DequantizeLinear", [g.const(w, np.int8), g.const(scale), g.const(np.zeros(cout, np.int8), np.int8)],
                    axis=0), scale

    def qconv(x, x_scale, cin, cout, k, stride=1):
        w, w_scale = qweight(cout, cin, k)
        b = rng.integers(-500, 500, size=cout).astype(np.int32)
        bias = g.op("DequantizeLinear", [g.const(b, np.int32), g.const((x_scale * w_scale).astype(np.float32))], axis=0)
        return g.op("Conv", [x, w, bias], kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4)

    x = qdq("x", 0.03)
    c1 = qdq(g.op("Relu", [qconv(x, 0.03, 8, 16, 3)]), 0.05, 0)
    c2 = qdq(qconv(c1, 0.05, 16, 16, 3), 0.05)
    r = qdq(g.op("Relu", [g.op("Add", [c2, c1])]), 0.05, 0)
    p = qdq(g.op("Flatten", [g.op("GlobalAveragePool", [r])]), 0.02, 0)
    wq = rng.integers(-127, 128, size=(10, 16)).astype(np.int8)
    w = g.op("DequantizeLinear", [g.const(wq, np.int8), g.const(np.float32(0.01)), g.const(np.int8(0), np.int8)])
    y = g.op("Gemm", [p, w], transB=1)
    q = g.nodes.append(helper.make_node("DynamicQuantizeLinear", [y], ["dq_y", "dq_scale", "dq_zp"]))
    return g.model([("x", [1, 8, 12, 12])], [y, "dq_y", "dq_scale", "dq_zp"], opset=13)


def quantized_depthwise():
    """Depthwise convolutions between 8-bit tensors, which onnxc runs as one kernel
    (dequantization, float32 convolution, quantization a chunk of channels at a time): QDQ
    blocks with uint8 and with int8 activations (per-channel int8 weights, int32 bias),
    stride 1 and 2, a 5×5 kernel, channel counts past whole blocks of 16 on small planes and
    planes too large to block; QLinearConv depthwise with per-channel weights and zero
    points, uint8 and int8 activations, and without bias. Compared with the reference
    evaluator."""
    g = G(46)
    rng = np.random.default_rng(46)

    def qdq(t, scale, zp, dt=np.uint8):
        sc, z = g.const(np.float32(scale)), g.const(dt(zp), dt)
        return g.op("DequantizeLinear", [g.op("QuantizeLinear", [t, sc, z]), sc, z])

    def dw(x, x_scale, c, k, stride=1):
        wq = rng.integers(-127, 128, size=(c, 1, k, k)).astype(np.int8)
        w_scale = (0.02 + 0.02 * rng.random(c)).astype(np.float32)
        w = g.op("DequantizeLinear", [g.const(wq, np.int8), g.const(w_scale), g.const(np.zeros(c, np.int8), np.int8)],
                 axis=0)
        b = rng.integers(-300, 300, size=c).astype(np.int32)
        bias = g.op("DequantizeLinear", [g.const(b, np.int32), g.const((x_scale * w_scale).astype(np.float32))], axis=0)
        return g.op("Conv", [x, w, bias], kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4, group=c)

    def pw(x, x_scale, cin, cout):
        wq = rng.integers(-127, 128, size=(cout, cin, 1, 1)).astype(np.int8)
        w_scale = (0.01 + 0.01 * rng.random(cout)).astype(np.float32)
        w = g.op("DequantizeLinear", [g.const(wq, np.int8), g.const(w_scale), g.const(np.zeros(cout, np.int8), np.int8)],
                 axis=0)
        return g.op("Conv", [x, w], kernel_shape=[1, 1])

    # QDQ, uint8, MobileNet's blocks (integer pointwise convolutions between the depthwise
    # ones): a large plane (plane by plane), then small planes with 40 channels.
    a = qdq(pw(qdq("a", 0.04, 128), 0.04, 8, 40), 0.05, 128)
    a = qdq(dw(a, 0.05, 40, 3), 0.06, 120)
    a = qdq(pw(a, 0.06, 40, 40), 0.05, 125)
    a = qdq(dw(a, 0.05, 40, 3, stride=2), 0.05, 130)
    a = qdq(pw(a, 0.05, 40, 40), 0.06, 128)
    a = qdq(dw(a, 0.06, 40, 5), 0.07, 125)
    a1 = qdq(pw(a, 0.07, 40, 8), 0.1, 128)
    # QDQ, int8 activations.
    b = qdq(pw(qdq("b", 0.03, -3, np.int8), 0.03, 6, 21), 0.04, 2, np.int8)
    b = qdq(dw(b, 0.04, 21, 3), 0.05, 4, np.int8)
    b1 = qdq(pw(b, 0.05, 21, 6), 0.08, 0, np.int8)

    # QLinearConv: per-channel weights with nonzero zero points, uint8 and int8.
    def qlinear(x_q, x_scale, x_zp, cin, cout, k, y_scale, y_zp, dt, stride=1, bias=True):
        group = cout if cin == cout and k > 1 else 1
        wq = rng.integers(-100, 101, size=(cout, cin // group, k, k)).astype(np.int8)
        w_scale = (0.01 + 0.02 * rng.random(cout)).astype(np.float32)
        w_zp = rng.integers(-3, 4, size=cout).astype(np.int8)
        ins = [x_q, g.const(np.float32(x_scale)), g.const(dt(x_zp), dt), g.const(wq, np.int8), g.const(w_scale),
               g.const(w_zp, np.int8), g.const(np.float32(y_scale)), g.const(dt(y_zp), dt)]
        if bias:
            ins.append(g.const(rng.integers(-2000, 2000, size=cout).astype(np.int32), np.int32))
        return g.op("QLinearConv", ins, kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4, group=group)

    cq = g.op("QuantizeLinear", ["c", g.const(np.float32(0.02)), g.const(np.uint8(128), np.uint8)])
    c = qlinear(cq, 0.02, 128, 4, 24, 1, 0.03, 110, np.uint8)
    c = qlinear(c, 0.03, 110, 24, 24, 3, 0.04, 100, np.uint8)
    c1 = qlinear(c, 0.04, 100, 24, 24, 3, 0.05, 90, np.uint8, stride=2, bias=False)
    dq = g.op("QuantizeLinear", ["d", g.const(np.float32(0.02)), g.const(np.int8(5), np.int8)])
    d = qlinear(dq, 0.02, 5, 3, 17, 1, 0.03, -2, np.int8)
    d1 = qlinear(d, 0.03, -2, 17, 17, 3, 0.04, -7, np.int8)
    return g.model([("a", [1, 8, 33, 35]), ("b", [2, 6, 9, 11]), ("c", [1, 4, 30, 31]), ("d", [1, 3, 8, 8])],
                   [a1, b1, c1, d1], opset=21)


def if_shape_checks():
    """If nodes whose conditions fold to constants from shapes, as exporters write shape
    checks: the taken branch (then or else) is inlined. Branches read outer values, hold
    their own initializers and node names that repeat across branches, and one If nests
    another."""
    g = G(25)
    shape = g.op("Shape", ["x"])
    channels = g.op("Gather", [shape, g.const(np.int64(1), np.int64)], axis=0)
    is8 = g.op("Equal", [channels, g.const(np.int64(8), np.int64)])
    is3 = g.op("Equal", [channels, g.const(np.int64(3), np.int64)])
    w = g.w(8, 8, 1, 1)

    def branch(name, nodes, out, inits=()):
        return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)],
                                 list(inits))

    then_a = branch("then_a", [helper.make_node("Conv", ["x", w], ["b_out"], name="inner"),
                               helper.make_node("Relu", ["b_out"], ["a_then"], name="act")], "a_then")
    else_a = branch("else_a", [helper.make_node("Neg", ["x"], ["a_else"], name="act")], "a_else")
    g.nodes.append(helper.make_node("If", [is8], ["a"], then_branch=then_a, else_branch=else_a))
    k = numpy_helper.from_array(np.float32(0.5), "half")
    inner_then = branch("inner_then", [helper.make_node("Mul", ["a", "half"], ["c_then"])], "c_then", [k])
    inner_else = branch("inner_else", [helper.make_node("Sigmoid", ["a"], ["c_else"])], "c_else")
    outer_then = branch("outer_then", [helper.make_node("Abs", ["a"], ["b_then"])], "b_then")
    outer_else = branch("outer_else", [helper.make_node("If", [is8], ["b_else"], then_branch=inner_then,
                                                        else_branch=inner_else)], "b_else")
    g.nodes.append(helper.make_node("If", [is3], ["b"], then_branch=outer_then, else_branch=outer_else))
    return g.model([("x", [1, 8, 5, 5])], ["a", "b"], opset=13)


def recurrent_layers():
    """LSTM, GRU and RNN with the attributes onnx's reference evaluator ignores (onnxruntime
    is the oracle): a bidirectional LSTM with peepholes, clip, initial states and
    sequence_lens including a 0; a reverse GRU with reset before the product, custom
    activations and alpha/beta; an RNN with Relu. (onnxruntime rejects layout 1 for GRU and
    LSTM; the backend's batchwise cases cover it.)"""
    g = G(26)
    rng = np.random.default_rng(26)
    seq, batch, inp, hid = 5, 3, 4, 6

    def t(name, *shape, dtype=np.float32, scale=0.5):
        v = (rng.standard_normal(shape) * scale).astype(dtype)
        g.inits.append(numpy_helper.from_array(v, name))
        return name

    def lens(name, values):
        g.inits.append(numpy_helper.from_array(np.array(values, np.int32), name))
        return name

    lstm = ["lstm_y", "lstm_h", "lstm_c"]
    g.nodes.append(helper.make_node(
        "LSTM", ["x", t("lw", 2, 4 * hid, inp), t("lr", 2, 4 * hid, hid), t("lb", 2, 8 * hid),
                 lens("ll", [5, 0, 3]), t("lh", 2, batch, hid), t("lc", 2, batch, hid), t("lp", 2, 3 * hid)],
        lstm, hidden_size=hid, direction="bidirectional", clip=2.0))
    gru = ["gru_y", "gru_h"]
    g.nodes.append(helper.make_node(
        "GRU", ["x", t("gw", 1, 3 * hid, inp), t("gr", 1, 3 * hid, hid), t("gb", 1, 6 * hid),
                lens("gl", [2, 5, 4])],
        gru, hidden_size=hid, direction="reverse", linear_before_reset=0,
        activations=["HardSigmoid", "Softsign"], activation_alpha=[0.3], activation_beta=[0.4]))
    rnn_out = ["rnn_y", "rnn_h"]
    g.nodes.append(helper.make_node(
        "RNN", ["x", t("rw", 1, hid, inp), t("rr", 1, hid, hid), "", "", t("rh", 1, batch, hid)],
        rnn_out, hidden_size=hid, activations=["Relu"]))
    return g.model([("x", [seq, batch, inp])], lstm + gru + rnn_out, opset=14)


def qoperator_cnn():
    """A quantized CNN in the QOperator form (QLinearConv with per-channel weight scales and
    an int32 bias, QLinearMatMul of a weight and of two activations, MatMulInteger,
    ConvInteger), uint8 activations from a
    QuantizeLinear of the float input."""
    g = G(27)
    rng = np.random.default_rng(27)
    u8 = lambda v: g.const(np.uint8(v), np.uint8)
    f32 = lambda v: g.const(np.float32(v))
    xq = g.op("QuantizeLinear", ["x", f32(0.02), u8(128)])
    w = g.const(rng.integers(-127, 128, size=(16, 8, 3, 3)).astype(np.int8), np.int8)
    ws = g.const((0.01 + 0.005 * rng.random(16)).astype(np.float32))
    b = g.const(rng.integers(-300, 300, size=16).astype(np.int32), np.int32)
    c1 = g.op("QLinearConv", [xq, f32(0.02), u8(128), w, ws, g.const(np.zeros(16, np.int8), np.int8), f32(0.05),
                              u8(100), b], pads=[1, 1, 1, 1], strides=[2, 2])
    w2 = g.const(rng.integers(0, 255, size=(4, 16, 1, 1)).astype(np.uint8), np.uint8)
    ci = g.op("ConvInteger", [c1, w2, u8(100), u8(127)])
    flat = g.op("Reshape", [c1, g.const(np.array([16, -1], np.int64), np.int64)])
    wm = g.const(rng.integers(-127, 128, size=(flat_n := 36, 10)).astype(np.int8), np.int8)
    qm = g.op("QLinearMatMul", [flat, f32(0.05), u8(100), wm, f32(0.01), g.const(np.int8(0), np.int8), f32(0.2),
                                u8(128)])
    mi = g.op("MatMulInteger", [flat, g.const(rng.integers(0, 255, size=(36, 5)).astype(np.uint8), np.uint8),
                                u8(100), g.const(rng.integers(100, 150, size=5).astype(np.uint8), np.uint8)])
    # Two activations, as quantize_static writes attention's scores.
    cols = g.op("Reshape", [c1, g.const(np.array([36, 16], np.int64), np.int64)])
    qa = g.op("QLinearMatMul", [flat, f32(0.05), u8(100), cols, f32(0.05), u8(100), f32(0.5), u8(128)])
    return g.model([("x", [1, 8, 12, 12])], [c1, ci, qm, mi, qa], opset=13)


def _vi(name, dtype=TensorProto.FLOAT, shape=None):
    return helper.make_tensor_value_info(name, dtype, shape)


def loops_unrolled():
    """Loop nodes whose trip count and condition are known at compile time, which onnxc
    unrolls: a trip count read from a shape, carried values and scan outputs, the body
    reading outer values and the iteration number; inside it a nested Loop whose inputs
    reuse the outer body's names (shadowing); and a while-loop (no trip count) whose
    condition the body computes from a carried counter."""
    g = G(31)
    m_trip = g.op("Gather", [g.op("Shape", ["x"]), g.const(np.int64(0), np.int64)], axis=0)
    true = g.const(np.bool_(True), np.bool_)
    w = g.w(6)
    zeros = g.const(np.zeros(6, np.float32))
    # Nested loop: two iterations of acc_in ← tanh(acc_in) · w + i, names shadowing the outer.
    inner = helper.make_graph(
        [helper.make_node("Identity", ["cond"], ["cond_out_i"]),
         helper.make_node("Cast", ["i"], ["fi"], to=TensorProto.FLOAT),
         helper.make_node("Tanh", ["acc"], ["th"]),
         helper.make_node("Mul", ["th", w], ["thw"]),
         helper.make_node("Add", ["thw", "fi"], ["acc_inner"])],
        "inner", [_vi("i", TensorProto.INT64, []), _vi("cond", TensorProto.BOOL, []), _vi("acc", shape=[6])],
        [_vi("cond_out_i", TensorProto.BOOL, []), _vi("acc_inner", shape=[6])])
    two = g.const(np.int64(2), np.int64)
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond"], ["cond_out"]),
         helper.make_node("Gather", ["x", "i"], ["row"], axis=0),
         helper.make_node("Mul", ["row", w], ["roww"]),
         helper.make_node("Add", ["acc", "roww"], ["acc1"]),
         helper.make_node("Loop", [two, "", "acc1"], ["acc_out"], body=inner),
         helper.make_node("Mul", ["acc_out", "half"], ["elem"])],
        "body", [_vi("i", TensorProto.INT64, []), _vi("cond", TensorProto.BOOL, []), _vi("acc", shape=[6])],
        [_vi("cond_out", TensorProto.BOOL, []), _vi("acc_out", shape=[6]), _vi("elem", shape=[6])],
        [numpy_helper.from_array(np.float32(0.5), "half")])
    g.nodes.append(helper.make_node("Loop", [m_trip, true, zeros], ["acc_final", "scan"], name="for_rows",
                                    body=body))
    # while (k < 5): k += 1; y = 1.5 · tanh(y) + row0 (no trip count).
    counter = g.const(np.int64(0), np.int64)
    five = g.const(np.int64(5), np.int64)
    one = g.const(np.int64(1), np.int64)
    wbody = helper.make_graph(
        [helper.make_node("Add", ["k", one], ["k_out"]),
         helper.make_node("Less", ["k_out", five], ["go"]),
         helper.make_node("Tanh", ["y"], ["ty"]),
         helper.make_node("Mul", ["ty", "k15"], ["ty15"]),
         helper.make_node("Add", ["ty15", "acc_final"], ["y_out"])],
        "wbody", [_vi("it", TensorProto.INT64, [1]), _vi("c", TensorProto.BOOL, []),
                  _vi("k", TensorProto.INT64, []), _vi("y", shape=[6])],
        [_vi("go", TensorProto.BOOL, []), _vi("k_out", TensorProto.INT64, []), _vi("y_out", shape=[6])],
        [numpy_helper.from_array(np.float32(1.5), "k15")])
    g.nodes.append(helper.make_node("Loop", ["", true, counter, "y0"], ["k_final", "y_final"], name="while_k",
                                    body=wbody))
    # Declared output types (shape inference leaves a Loop's outputs without shapes).
    graph = helper.make_graph(g.nodes, "g", [_vi("x", shape=[4, 6]), _vi("y0", shape=[6])],
                              [_vi("acc_final", shape=[6]), _vi("scan", shape=[4, 6]),
                               _vi("k_final", TensorProto.INT64, []), _vi("y_final", shape=[6])], g.inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="onnxc-tests")
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    return m


def scans_unrolled():
    """Scan (opset 11) over two inputs scanned along different axes, one in reverse, with
    two states and scan outputs stacked along a non-leading axis and in reverse; onnxc
    unrolls it."""
    g = G(32)
    w = g.w(3)
    body = helper.make_graph(
        [helper.make_node("ReduceSum", ["a_t"], ["sa"], axes=[0], keepdims=0),
         helper.make_node("Mul", ["sa", "b_t"], ["sab"]),
         helper.make_node("Add", ["s_in", "sab"], ["s_out"]),
         helper.make_node("Mul", ["p_in", w], ["p_w"]),
         helper.make_node("Tanh", ["p_w"], ["p_out"]),
         helper.make_node("Relu", ["a_t"], ["ra"]),
         helper.make_node("Mul", ["ra", "s_out"], ["e1"]),
         helper.make_node("Add", ["s_out", "p_out"], ["e2"])],
        "scan_body", [_vi("s_in", shape=[3]), _vi("p_in", shape=[3]), _vi("a_t", shape=[2, 3]), _vi("b_t", shape=[3])],
        [_vi("s_out", shape=[3]), _vi("p_out", shape=[3]), _vi("e1", shape=[2, 3]), _vi("e2", shape=[3])])
    g.nodes.append(helper.make_node(
        "Scan", ["s0", "p0", "a", "b"], ["s_final", "p_final", "out1", "out2"], name="scan", body=body,
        num_scan_inputs=2, scan_input_axes=[1, -1], scan_input_directions=[0, 1], scan_output_axes=[2, 0],
        scan_output_directions=[0, 1]))
    return g.model([("s0", [3]), ("p0", [3]), ("a", [2, 4, 3]), ("b", [3, 4])],
                   ["s_final", "p_final", "out1", "out2"], opset=11)


def scan_batched():
    """Scan in opset 8's form: a batch axis 0 on every operand (two entries), the sequence
    along axis 1 read in reverse."""
    g = G(33)
    body = helper.make_graph(
        [helper.make_node("Mul", ["s_in", "k"], ["sk"]),
         helper.make_node("Add", ["sk", "x_t"], ["s_out"]),
         helper.make_node("Sigmoid", ["s_out"], ["e"])],
        "scan8_body", [_vi("s_in", shape=[3]), _vi("x_t", shape=[3])], [_vi("s_out", shape=[3]), _vi("e", shape=[3])],
        [numpy_helper.from_array(np.float32(0.5), "k")])
    g.nodes.append(helper.make_node("Scan", ["", "s0", "x"], ["s_final", "ys"], name="scan8", body=body,
                                    num_scan_inputs=1, directions=[1]))
    return g.model([("s0", [2, 3]), ("x", [2, 4, 3])], ["s_final", "ys"], opset=8)


def if_runtime():
    """If nodes on conditions computed from the input's values, which onnxc if-converts
    (both branches computed, the taken one selected): one on `sum(x) > 0` and one on its
    negation, so that one takes its then_branch and the other its else_branch whatever the
    input; branches with convolutions, outer values, their own initializers, a constant
    output, an output shared by both branches, a gather at data-dependent (checked) indices,
    and a run-time If nested in a branch."""
    g = G(34)
    total = g.op("ReduceSum", ["x"], keepdims=0)
    pos = g.op("Greater", [total, g.const(np.float32(0))])
    neg = g.op("Not", [pos])
    w = g.w(8, 8, 3, 3)
    b = g.w(8, scale=0.1)
    shared = g.op("Relu", ["x"])
    inner_then = helper.make_graph([helper.make_node("Tanh", ["x"], ["it"])], "inner_then", [],
                                   [_vi("it", shape=[1, 8, 6, 6])])
    inner_else = helper.make_graph([helper.make_node("Neg", ["x"], ["ie"])], "inner_else", [],
                                   [_vi("ie", shape=[1, 8, 6, 6])])

    def branches(tag):
        then_g = helper.make_graph(
            [helper.make_node("Conv", ["x", w, b], [f"c_{tag}"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", [f"c_{tag}"], [f"r0_{tag}"]),
             # A gather at data-dependent indices (checked at run time, only where taken).
             helper.make_node("ArgMax", ["x"], [f"am_{tag}"], axis=3, keepdims=1),
             helper.make_node("GatherElements", ["x", f"am_{tag}"], [f"g_{tag}"], axis=3),
             helper.make_node("Add", [f"r0_{tag}", f"g_{tag}"], [f"r_{tag}"]),
             helper.make_node("Constant", [], [f"k_{tag}"], value=numpy_helper.from_array(np.arange(3, dtype=np.int64))),
             helper.make_node("Identity", [shared], [f"st_{tag}"])],
            f"then_{tag}", [],
            [_vi(f"r_{tag}", shape=[1, 8, 6, 6]), _vi(f"k_{tag}", TensorProto.INT64, [3]), _vi(f"st_{tag}", shape=[1, 8, 6, 6])])
        else_g = helper.make_graph(
            [helper.make_node("Sigmoid", ["x"], [f"s_{tag}"]),
             helper.make_node("Mul", [f"s_{tag}", "scale"], [f"m_{tag}"]),
             helper.make_node("If", [pos], [f"n_{tag}"], then_branch=inner_then, else_branch=inner_else),
             helper.make_node("Add", [f"m_{tag}", f"n_{tag}"], [f"e_{tag}"]),
             helper.make_node("Shape", ["x"], [f"sh_{tag}"]),
             helper.make_node("Slice", [f"sh_{tag}", "s0", "s3"], [f"q_{tag}"]),
             helper.make_node("Identity", [shared], [f"se_{tag}"])],
            f"else_{tag}", [],
            [_vi(f"e_{tag}", shape=[1, 8, 6, 6]), _vi(f"q_{tag}", TensorProto.INT64, [3]), _vi(f"se_{tag}", shape=[1, 8, 6, 6])],
            [numpy_helper.from_array(np.float32(1.5), "scale"), numpy_helper.from_array(np.array([0], np.int64), "s0"),
             numpy_helper.from_array(np.array([3], np.int64), "s3")])
        return then_g, else_g

    outs = []
    for tag, cond in (("p", pos), ("n", neg)):
        then_g, else_g = branches(tag)
        names = [f"y_{tag}", f"k_{tag}_out", f"sh_{tag}_out"]
        g.nodes.append(helper.make_node("If", [cond], names, name=f"if_{tag}", then_branch=then_g, else_branch=else_g))
        outs += names
    return g.model([("x", [1, 8, 6, 6])], outs, opset=13)


def if_branch_shapes():
    """The structure of a voice-activity detector exported from PyTorch (Silero VAD): an If
    on a run-time condition (the sample rate there) whose branches each run a strided conv
    encoder and an LSTM decoder, with nested Ifs on shape checks (squeeze the time axis when
    it is 1, unsqueeze a 2-D input). At the compiled input length only one branch has valid
    shapes: the other reaches its LSTM with a 5-D input. onnxc leaves that branch out (the
    run fails with ONNXC_ERR_SHAPE where the condition selects it); the first If takes its
    then_branch, the second, on the negated condition, its else_branch."""
    g = G(79)
    hidden, ch = 8, 16
    # The condition the inputs decide at run time: onnxruntime takes the valid branch.
    peak = g.op("ReduceMax", [g.op("Abs", ["x"])], keepdims=0)
    live = g.op("Greater", [peak, g.const(np.float32(0))])
    dead = g.op("Not", [live])
    h0 = g.op("Gather", ["state", g.const(0, np.int64)], axis=0)  # [1, 8]
    c0 = g.op("Gather", ["state", g.const(1, np.int64)], axis=0)
    h0 = g.op("Unsqueeze", [h0, g.const([0], np.int64)])  # [1, 1, 8]
    c0 = g.op("Unsqueeze", [c0, g.const([0], np.int64)])

    def branch(tag, stride):
        """Encoder convs of strides `stride` and 8 over the 512 samples, the shape checks,
        and the LSTM decoder; valid only where the encoder ends with one time step."""
        nodes, inits = [], []

        def const(name, a):
            inits.append(numpy_helper.from_array(a, f"{name}_{tag}"))
            return f"{name}_{tag}"

        w1 = const("w1", (g.rng.standard_normal((ch, 1, stride)) * 0.2).astype(np.float32))
        w2 = const("w2", (g.rng.standard_normal((ch, ch, 8)) * 0.2).astype(np.float32))
        wi = const("wi", (g.rng.standard_normal((1, 4 * hidden, ch)) * 0.3).astype(np.float32))
        wr = const("wr", (g.rng.standard_normal((1, 4 * hidden, hidden)) * 0.3).astype(np.float32))
        axis0 = const("axis0", np.array([0], np.int64))
        zero = const("zero", np.array([0], np.int64))
        two1 = const("two1", np.array([2], np.int64))
        last = const("last", np.array(-1, np.int64))
        one = const("one", np.array(1, np.int64))
        two = const("two", np.array(2, np.int64))
        nodes += [
            helper.make_node("Unsqueeze", ["x", axis0], [f"x3_{tag}"]),  # [1, 1, 512]
            helper.make_node("Conv", [f"x3_{tag}", w1], [f"e1_{tag}"], kernel_shape=[stride], strides=[stride]),
            helper.make_node("Relu", [f"e1_{tag}"], [f"r1_{tag}"]),
            helper.make_node("Conv", [f"r1_{tag}", w2], [f"e2_{tag}"], kernel_shape=[8], strides=[8]),
            helper.make_node("Relu", [f"e2_{tag}"], [f"r2_{tag}"]),  # [1, 16, 512 / stride / 8]
            # Drop the time axis when it is 1 (an If on a shape check).
            helper.make_node("Shape", [f"r2_{tag}"], [f"s_{tag}"]),
            helper.make_node("Gather", [f"s_{tag}", last], [f"t_{tag}"], axis=0),
            helper.make_node("Equal", [f"t_{tag}", one], [f"t1_{tag}"]),
            helper.make_node("If", [f"t1_{tag}"], [f"sq_{tag}"],
                             then_branch=helper.make_graph(
                                 [helper.make_node("Slice", [f"s_{tag}", zero, two1], [f"s01_{tag}"]),
                                  helper.make_node("Reshape", [f"r2_{tag}", f"s01_{tag}"], [f"sqt_{tag}"])],
                                 f"sq_then_{tag}", [], [_vi(f"sqt_{tag}")]),
                             else_branch=helper.make_graph(
                                 [helper.make_node("Identity", [f"r2_{tag}"], [f"sqe_{tag}"])],
                                 f"sq_else_{tag}", [], [_vi(f"sqe_{tag}")])),
            # Unsqueeze a 2-D result (another If on a shape check), then add the sequence axis.
            helper.make_node("Shape", [f"sq_{tag}"], [f"s2_{tag}"]),
            helper.make_node("Size", [f"s2_{tag}"], [f"rank_{tag}"]),
            helper.make_node("Equal", [f"rank_{tag}", two], [f"is2_{tag}"]),
            helper.make_node("Not", [f"is2_{tag}"], [f"not2_{tag}"]),
            helper.make_node("If", [f"not2_{tag}"], [f"u_{tag}"],
                             then_branch=helper.make_graph(
                                 [helper.make_node("Unsqueeze", [f"sq_{tag}", axis0], [f"ut_{tag}"])],
                                 f"u_then_{tag}", [], [_vi(f"ut_{tag}")]),
                             else_branch=helper.make_graph(
                                 [helper.make_node("Identity", [f"sq_{tag}"], [f"ue_{tag}"])],
                                 f"u_else_{tag}", [], [_vi(f"ue_{tag}")])),
            helper.make_node("Unsqueeze", [f"u_{tag}", axis0], [f"seq_{tag}"]),  # [1, 1, 16] when valid
            helper.make_node("LSTM", [f"seq_{tag}", wi, wr, "", "", h0, c0],
                             ["", f"yh_{tag}", f"yc_{tag}"], hidden_size=hidden),
            helper.make_node("Squeeze", [f"yh_{tag}", axis0], [f"h_{tag}"]),  # [1, 8]
            helper.make_node("Squeeze", [f"yc_{tag}", axis0], [f"c_{tag}"]),
            helper.make_node("Concat", [f"h_{tag}", f"c_{tag}"], [f"out_{tag}"], axis=0),  # [2, 8]
        ]
        return helper.make_graph(nodes, f"branch_{tag}", [], [_vi(f"out_{tag}", shape=[2, hidden])], inits)

    # 512 samples: stride 64 ends with one time step (valid), stride 32 with two (invalid).
    g.nodes.append(helper.make_node("If", [live], ["y_live"], name="if_live",
                                    then_branch=branch("a", 64), else_branch=branch("b", 32)))
    g.nodes.append(helper.make_node("If", [dead], ["y_dead"], name="if_dead",
                                    then_branch=branch("c", 32), else_branch=branch("d", 64)))
    return g.model([("x", [1, 512]), ("state", [2, 1, hidden])], ["y_live", "y_dead"], opset=16)


def topk_heads():
    """TopK (opset 11) as models use it: the best 5 of a softmax over 1000 classes, the
    smallest 3 along axis 0 of a 3-D tensor (strided lines), k equal to the axis length,
    int32 values with ties, and K from a shape computation."""
    g = G(35)
    probs = g.op("Softmax", [g.op("Gemm", ["x", g.w(1000, 64), g.w(1000, scale=0.1)], transB=1)], axis=1)
    k5 = g.const(np.array([5], np.int64), np.int64)
    g.nodes.append(helper.make_node("TopK", [probs, k5], ["top_v", "top_i"], name="top5", axis=1))
    k3 = g.const(np.array([3], np.int64), np.int64)
    g.nodes.append(helper.make_node("TopK", ["y", k3], ["small_v", "small_i"], name="small3", axis=0, largest=0))
    k_all = g.op("Gather", [g.op("Shape", ["y"]), g.const(np.array([2], np.int64), np.int64)], axis=0)
    g.nodes.append(helper.make_node("TopK", ["y", k_all], ["all_v", "all_i"], name="all", axis=-1))
    ints = g.op("Cast", [g.op("Floor", [g.op("Mul", ["y", g.const(np.float32(2))])])], to=TensorProto.INT32)
    k2 = g.const(np.array([2], np.int64), np.int64)
    g.nodes.append(helper.make_node("TopK", [ints, k2], ["int_v", "int_i"], name="ints", axis=1))
    return g.model([("x", [1, 64]), ("y", [6, 4, 5])],
                   ["top_v", "top_i", "small_v", "small_i", "all_v", "all_i", "int_v", "int_i"], opset=11)


def topk_opset1():
    """TopK in opset 1's form: k an attribute, always the largest, along the last axis."""
    g = G(36)
    g.nodes.append(helper.make_node("TopK", ["x"], ["v", "i"], name="top2", k=2))
    return g.model([("x", [3, 7])], ["v", "i"], opset=9)


def grid_samples():
    """GridSample (opset 20) in every mode, padding mode and align_corners setting, on a grid
    of N(0, 1.5²) positions: a third outside [-1, 1], some beyond ±3, where reflection
    bounces more than once; plus a volumetric (3-D) linear sample."""
    g = G(37)
    grid = g.op("Mul", ["grid", g.const(np.float32(1.5))])
    outs = []
    for mode in ("nearest", "linear", "cubic"):
        for padding in ("zeros", "border", "reflection"):
            for align in (0, 1):
                outs.append(g.op("GridSample", ["x", grid], mode=mode, padding_mode=padding, align_corners=align))
    grid3 = g.op("Mul", ["grid3", g.const(np.float32(1.5))])
    outs.append(g.op("GridSample", ["x3", grid3], mode="linear", padding_mode="border"))
    return g.model([("x", [2, 3, 5, 6]), ("grid", [2, 4, 7, 2]), ("x3", [1, 2, 3, 4, 5]), ("grid3", [1, 2, 3, 4, 3])],
                   outs, opset=20)


def deform_convs():
    """DeformConv (opset 22) beyond the backend's one-channel cases: two groups and two
    offset groups, strides, dilations and asymmetric pads, a sigmoid mask and a bias, with
    offsets of N(0, 4²) that move many taps partly or wholly outside the input; and a
    plain one (no mask, no bias, one group)."""
    g = G(41)
    off = g.op("Mul", ["off", g.const(np.float32(4.0))])
    mask = g.op("Sigmoid", ["mask"])
    y = g.op("DeformConv", ["x", g.w(6, 2, 3, 3), off, g.w(6, scale=0.1), mask], kernel_shape=[3, 3],
             group=2, offset_group=2, strides=[2, 1], pads=[1, 2, 1, 0], dilations=[1, 2])
    y2 = g.op("DeformConv", ["x", g.w(3, 4, 2, 2), "off2"])
    return g.model([("x", [2, 4, 7, 6]), ("off", [2, 36, 4, 4]), ("mask", [2, 18, 4, 4]),
                    ("off2", [2, 8, 6, 5])], [y, y2], opset=22)

def recurrent_state_ops():
    """The opset-27 ops of Mamba/DeltaNet-style models at sizes beyond the backend cases: a
    causal depthwise convolution with past state, bias and SiLU feeding LinearAttention's
    gated delta rule with grouped heads (4 query heads on 2 key/value heads), per-key decay
    (log-space, negative) and per-head β from sigmoids, a past state, 9 time steps; and the
    plain linear rule with one key/value head (multi-query) and an explicit scale."""
    g = G(42)
    conv, conv_state = g.op("CausalConvWithState", ["x", g.w(24, 1, 4), g.w(24, scale=0.1), "conv_past"],
                            outputs=2, activation="silu")
    qkv = g.op("Transpose", [conv], perm=[0, 2, 1])  # [B, T, 24]
    q, k, v = g.op("Split", [qkv, g.const(np.array([12, 6, 6], np.int64), np.int64)], outputs=3, axis=2)
    decay = g.op("Neg", [g.op("Softplus", ["g"])])
    beta = g.op("Sigmoid", ["b"])
    y, state = g.op("LinearAttention", [q, k, v, "past", decay, beta], outputs=2, q_num_heads=4,
                    kv_num_heads=2, update_rule="gated_delta")
    first3 = [g.const(np.array([0], np.int64), np.int64), g.const(np.array([3], np.int64), np.int64),
              g.const(np.array([2], np.int64), np.int64)]
    k1, v1 = g.op("Slice", [k] + first3), g.op("Slice", [v] + first3)
    y2, state2 = g.op("LinearAttention", [q, k1, v1], outputs=2, q_num_heads=4, kv_num_heads=1,
                      update_rule="linear", scale=0.3)
    return g.model([("x", [2, 24, 9]), ("conv_past", [2, 24, 3]), ("past", [2, 2, 3, 3]), ("g", [2, 9, 6]),
                    ("b", [2, 9, 2])], [y, state, conv_state, y2, state2], opset=27)


def roi_aligns():
    """RoiAlign (opset 16) on two 10 × 12 maps of 3 channels: regions of random corners
    (some reversed, some partly outside), average and max pooling, both coordinate modes,
    adaptive and fixed sampling, a spatial scale of 0.5."""
    g = G(43)
    rois = g.op("Mul", [g.op("Abs", ["r"]), g.const(np.float32(9.0))])
    idx = g.const(np.array([0, 1, 1, 0, 1], np.int64), np.int64)
    outs = []
    for mode in ("avg", "max"):
        for ctm in ("half_pixel", "output_half_pixel"):
            for ratio in (0, 2):
                outs.append(g.op("RoiAlign", ["x", rois, idx], mode=mode, coordinate_transformation_mode=ctm,
                                 sampling_ratio=ratio, output_height=3, output_width=4, spatial_scale=0.5))
    return g.model([("x", [2, 3, 10, 12]), ("r", [5, 4])], outs, opset=16)

def loops_run_time_condition():
    """Loops whose condition is computed from the input's values, up to a constant trip
    count, which onnxc if-converts iteration by iteration: one grows y until max|y| ≥ 8
    (exits early for these inputs, counting its iterations), one runs to its trip count
    because the condition holds, one starts on a run-time condition."""
    g = G(38)
    one = g.const(np.int64(1), np.int64)
    limit = g.const(np.float32(8.0))
    grow = helper.make_graph(
        [helper.make_node("Mul", ["y", "g15"], ["y15"]),
         helper.make_node("Add", ["y15", "g1"], ["y_out"]),
         helper.make_node("Add", ["k", one], ["k_out"]),
         helper.make_node("Abs", ["y_out"], ["ay"]),
         helper.make_node("ReduceMax", ["ay"], ["m"], keepdims=0),
         helper.make_node("Less", ["m", limit], ["go"])],
        "grow", [_vi("it", TensorProto.INT64, []), _vi("c", TensorProto.BOOL, []), _vi("k", TensorProto.INT64, []),
                 _vi("y", shape=[4])],
        [_vi("go", TensorProto.BOOL, []), _vi("k_out", TensorProto.INT64, []), _vi("y_out", shape=[4])],
        [numpy_helper.from_array(np.float32(1.5), "g15"), numpy_helper.from_array(np.float32(1.0), "g1")])
    m10 = g.const(np.int64(10), np.int64)
    true = g.const(np.bool_(True), np.bool_)
    zero = g.const(np.int64(0), np.int64)
    g.nodes.append(helper.make_node("Loop", [m10, true, zero, "x"], ["k_a", "y_a"], name="grow_until", body=grow))
    big = helper.make_graph(
        [helper.make_node("Tanh", ["y"], ["y_out"]),
         helper.make_node("Add", ["k", one], ["k_out"]),
         helper.make_node("ReduceSum", ["y_out"], ["s"], keepdims=0),
         helper.make_node("Less", ["s", "lim"], ["go"])],
        "big", [_vi("it", TensorProto.INT64, []), _vi("c", TensorProto.BOOL, []), _vi("k", TensorProto.INT64, []),
                _vi("y", shape=[4])],
        [_vi("go", TensorProto.BOOL, []), _vi("k_out", TensorProto.INT64, []), _vi("y_out", shape=[4])],
        [numpy_helper.from_array(np.float32(1e9), "lim")])
    m3 = g.const(np.int64(3), np.int64)
    g.nodes.append(helper.make_node("Loop", [m3, true, zero, "x"], ["k_b", "y_b"], name="to_trip_count", body=big))
    start = g.op("Greater", [g.op("ReduceSum", ["x"], keepdims=0), g.const(np.float32(-1e6))])
    g.nodes.append(helper.make_node("Loop", [m3, start, zero, "x"], ["k_c", "y_c"], name="starts_run_time", body=big))
    graph = helper.make_graph(g.nodes, "g", [_vi("x", shape=[4])],
                              [_vi("k_a", TensorProto.INT64, []), _vi("y_a", shape=[4]), _vi("k_b", TensorProto.INT64, []),
                               _vi("y_b", shape=[4]), _vi("k_c", TensorProto.INT64, []), _vi("y_c", shape=[4])], g.inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="onnxc-tests")
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    return m


def loop_scan_until():
    """A Loop that stops on a condition computed from the data, with scan outputs, as greedy
    decoders are exported: y grows until max|y| >= 8 (at most 10 iterations), and each
    iteration's y and step number are stacked, so the scan outputs have as many rows as
    iterations ran; then the rows are read on (scaled)."""
    g = G(62)
    one = g.const(np.int64(1), np.int64)
    limit = g.const(np.float32(8.0))
    grow = helper.make_graph(
        [helper.make_node("Mul", ["y", "g15"], ["y15"]),
         helper.make_node("Add", ["y15", "g1"], ["y_out"]),
         helper.make_node("Add", ["it", one], ["step"]),
         helper.make_node("Abs", ["y_out"], ["ay"]),
         helper.make_node("ReduceMax", ["ay"], ["m"], keepdims=0),
         helper.make_node("Less", ["m", limit], ["go"]),
         helper.make_node("Identity", ["y_out"], ["y_scan"])],
        "grow", [_vi("it", TensorProto.INT64, []), _vi("c", TensorProto.BOOL, []), _vi("y", shape=[4])],
        [_vi("go", TensorProto.BOOL, []), _vi("y_out", shape=[4]), _vi("y_scan", shape=[4]),
         _vi("step", TensorProto.INT64, [])],
        [numpy_helper.from_array(np.float32(1.5), "g15"), numpy_helper.from_array(np.float32(1.0), "g1")])
    m10 = g.const(np.int64(10), np.int64)
    start = g.op("Greater", [g.op("ReduceSum", ["x"], keepdims=0), g.const(np.float32(-1e6))])
    g.nodes.append(helper.make_node("Loop", [m10, start, "x"], ["y_last", "ys", "steps"], name="grow_until",
                                    body=grow))
    g.nodes.append(helper.make_node("Mul", ["ys", g.const(np.float32(0.5))], ["half"], name="half"))
    graph = helper.make_graph(g.nodes, "g", [_vi("x", shape=[4])],
                              [_vi("y_last", shape=[4]), _vi("half", shape=["iterations", 4]),
                               _vi("steps", TensorProto.INT64, ["iterations"])], g.inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="onnxc-tests")
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    return m


def spatial_transformer():
    """A spatial transformer as exported: theta regressed from the image (Gemm, reshape to
    (N, 2, 3)), AffineGrid with a constant size, GridSample of the image (bilinear, zeros
    and border padding)."""
    g = G(39)
    flat = g.op("Flatten", ["x"])
    theta = g.op("Reshape", [g.op("Gemm", [flat, g.w(6, 3 * 8 * 10, scale=0.05), g.const(np.array([1, 0, 0, 0, 1, 0], np.float32))],
                                  transB=1), g.const(np.array([2, 2, 3], np.int64), np.int64)])
    size = g.const(np.array([2, 3, 6, 7], np.int64), np.int64)
    grid = g.op("AffineGrid", [theta, size], align_corners=0)
    y0 = g.op("GridSample", ["x", grid], mode="linear", padding_mode="zeros")
    grid1 = g.op("AffineGrid", [theta, size], align_corners=1)
    y1 = g.op("GridSample", ["x", grid1], mode="linear", padding_mode="border", align_corners=1)
    return g.model([("x", [2, 3, 8, 10])], [y0, y1, grid], opset=20)


def rotary_attention():
    """RotaryEmbedding (opset 23) as LLM exports use it: queries (batch, heads, seq, head)
    rotated with caches of cos/sin(position · frequency) at positions from position_ids
    (a decode offset), then their scores; and a 3-D (batch, seq, hidden) input with
    num_heads, a partial interleaved rotation and per-token caches."""
    g = G(40)
    half, max_pos = 4, 32
    freq = 1.0 / (10000 ** (np.arange(half) / half))
    ang = np.outer(np.arange(max_pos), freq)
    cos_c = g.const(np.cos(ang).astype(np.float32))
    sin_c = g.const(np.sin(ang).astype(np.float32))
    pos = g.const(np.array([[5, 6, 7, 8, 9, 10]], np.int64), np.int64)
    q = g.op("RotaryEmbedding", ["q", cos_c, sin_c, pos])
    scores = g.op("MatMul", [q, g.op("Transpose", [q], perm=[0, 1, 3, 2])])
    ang2 = np.arange(2 * 5 * 2).reshape(2, 5, 2) * 0.3
    cos2 = g.const(np.cos(ang2).astype(np.float32))
    sin2 = g.const(np.sin(ang2).astype(np.float32))
    r3 = g.op("RotaryEmbedding", ["h", cos2, sin2], num_heads=3, rotary_embedding_dim=4, interleaved=1)
    return g.model([("q", [1, 2, 6, 8]), ("h", [2, 5, 18])], [q, scores, r3], opset=23)


def integer_products_exact():
    """Quantized convolutions and matmuls whose float32 evaluation onnxc proves exact: full
    -range uint8 activations (mostly saturated, zero point 128) against ±127 weights, sized
    just inside the float32 bound (3×3×64 taps: 576 · 127 · 128 < 2^24), outside it (5×5×64:
    two float32 convolutions of the activations' high and low 4 bits), far outside it
    (3×3×1024: the float64 loops), grouped, pointwise, with per-channel zero points, a
    MatMulInteger, and MatMulIntegers of two activations inside the bound and on it;
    compared with the reference evaluator exactly."""
    g = G(41)
    rng = np.random.default_rng(41)
    xq = g.op("QuantizeLinear", ["x", g.const(np.float32(0.01)), g.const(np.uint8(128), np.uint8)])
    def signs(*shape):
        return g.const((rng.choice([-127, 127], size=shape)).astype(np.int8), np.int8)
    zp = g.const(np.uint8(128), np.uint8)
    inside = g.op("ConvInteger", [xq, signs(4, 64, 3, 3), zp], pads=[1, 1, 1, 1])
    outside = g.op("ConvInteger", [xq, signs(4, 64, 5, 5), zp], pads=[2, 2, 2, 2])
    grouped = g.op("ConvInteger", [xq, signs(8, 16, 3, 3), zp], group=4)
    wz = g.const(np.array([3, -5, 0, 7], np.int8), np.int8)
    pointwise = g.op("ConvInteger", [xq, signs(4, 64, 1, 1), zp, wz])
    a = g.op("Reshape", [xq, g.const(np.array([64, 36], np.int64), np.int64)])
    mm = g.op("MatMulInteger", [a, signs(36, 5), zp])
    xq2 = g.op("QuantizeLinear", ["x2", g.const(np.float32(0.01)), g.const(np.uint8(128), np.uint8)])
    far = g.op("ConvInteger", [xq2, signs(2, 1024, 3, 3), zp])
    # Products of two activations (attention's, quantized): depth 36 inside the bound
    # (36 · 128 · 128), depth 1024 on it (1024 · 128 · 128 = 2^24: high and low 4 bits).
    acts = g.op("MatMulInteger", [a, g.op("Reshape", [xq, g.const(np.array([36, 64], np.int64), np.int64)]), zp, zp])
    a2 = g.op("Reshape", [xq2, g.const(np.array([9, 1024], np.int64), np.int64)])
    b2 = g.op("Reshape", [xq2, g.const(np.array([1024, 9], np.int64), np.int64)])
    deep = g.op("MatMulInteger", [a2, b2, zp, g.const(np.uint8(120), np.uint8)])
    return g.model([("x", [1, 64, 6, 6]), ("x2", [1, 1024, 3, 3])],
                   [inside, outside, grouped, pointwise, mm, far, acts, deep], opset=13)


def audio_frontend():
    """Spectral ops as audio models export them (opset 20): a Hann-windowed STFT of a signal
    and its power spectrum; a real DFT along axis 1 (one-sided and full), the inverse of the
    full one (a round trip), numpy's irfft of the one-sided one, a DFT along axis 0 with a
    dft_length that zero-pads, and a Hamming window."""
    g = G(42)
    win = g.op("HannWindow", [g.const(np.array(32, np.int64), np.int64)])
    spec = g.op("STFT", ["sig", g.const(np.array(8, np.int64), np.int64), win])
    power = g.op("ReduceSumSquare", [spec, g.const(np.array([-1], np.int64), np.int64)], keepdims=0)
    ax1 = g.const(np.array(1, np.int64), np.int64)
    full = g.op("DFT", ["x", "", ax1])
    half = g.op("DFT", ["x", "", ax1], onesided=1)
    back = g.op("DFT", [full, "", ax1], inverse=1)
    irfft = g.op("DFT", [half, g.const(np.array(24, np.int64), np.int64), ax1], inverse=1, onesided=1)
    ax0 = g.op("DFT", ["x", g.const(np.array(5, np.int64), np.int64), g.const(np.array(0, np.int64), np.int64)])
    ham = g.op("HammingWindow", [g.const(np.array(10, np.int64), np.int64)], periodic=0)
    m = g.model([("sig", [2, 160, 1]), ("x", [3, 24, 1])], [spec, power, full, half, back, irfft, ax0, ham], opset=20)
    # onnx 1.23's shape inference gives STFT's default (one-sided) output the full 32 bins;
    # the operator (and onnxruntime, and the reference evaluator) give 17.
    for o, dims in zip(m.graph.output[:2], ([2, 17, 17, 2], [2, 17, 17])):
        del o.type.tensor_type.shape.dim[:]
        o.type.tensor_type.shape.dim.extend(onnx.TensorShapeProto.Dimension(dim_value=d) for d in dims)
    return m


def experimental_ops():
    """The experimental ops of opsets 1-9 (no schema in current onnx; onnxruntime still runs
    them) as a Tiny YOLOv2-style export uses them: ImageScaler in front of a convolution,
    then Scale, Affine, ScaledTanh, ParametricSoftplus, and Crop with and without scale."""
    g = G(43)
    x = g.op("ImageScaler", ["x"], scale=1.0 / 255, bias=[0.1, -0.2, 0.3])
    x = g.conv(x, 3, 8, 3)
    a = g.op("Scale", [x], scale=2.5)
    b = g.op("Affine", [a], alpha=0.5, beta=-0.25)
    c = g.op("ScaledTanh", [b], alpha=1.5, beta=0.7)
    d = g.op("ParametricSoftplus", [c], alpha=0.8, beta=1.3)
    e = g.op("Crop", [d], border=[1, 2, 0, 1])
    f = g.op("Crop", [d], border=[2, 1, 0, 0], scale=[3, 4])
    graph = helper.make_graph(g.nodes, "g", [_vi("x", shape=[1, 3, 9, 10])],
                              [_vi(e, shape=[1, 8, 6, 9]), _vi(f, shape=[1, 8, 3, 4])], g.inits)
    # Opset 8, IR 3, as such exports are; no checker: the ops have no schema any more.
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 8)], producer_name="onnxc-tests")
    m.ir_version = 3
    return m


def sequences_static():
    """Sequences kept at compile time: SplitToSequence with a scalar split (the last piece
    shorter) and with sizes, and without split dropping the axis; SequenceInsert at the front
    and at a negative position, SequenceErase at a negative position, SequenceAt at a
    negative position, SequenceLength, SequenceEmpty filled by inserts, ConcatFromSequence
    along an axis and stacked along a new one; the tensors feed ordinary ops."""
    g = G(44)
    i64 = lambda v: g.const(np.array(v, np.int64), np.int64)
    g.nodes.append(helper.make_node("SplitToSequence", ["x", i64(2)], ["pieces"], axis=1))  # 2, 2, 1
    g.nodes.append(helper.make_node("SplitToSequence", ["x", i64([1, 3, 1])], ["sized"], axis=1))
    g.nodes.append(helper.make_node("SplitToSequence", ["x"], ["rows"], axis=0, keepdims=0))
    g.nodes.append(helper.make_node("SequenceAt", ["pieces", i64(-1)], ["last"]))
    g.nodes.append(helper.make_node("SequenceAt", ["sized", i64(1)], ["mid"]))
    g.nodes.append(helper.make_node("SequenceLength", ["rows"], ["nrows"]))
    g.nodes.append(helper.make_node("SequenceInsert", ["rows", "y", i64(0)], ["rows2"]))
    g.nodes.append(helper.make_node("SequenceErase", ["rows2", i64(-2)], ["rows3"]))
    g.nodes.append(helper.make_node("ConcatFromSequence", ["rows3"], ["stacked"], axis=0, new_axis=1))
    g.nodes.append(helper.make_node("SequenceEmpty", [], ["empty"]))
    g.nodes.append(helper.make_node("SequenceInsert", ["empty", "mid"], ["one"]))
    g.nodes.append(helper.make_node("SequenceInsert", ["one", "last", i64(-1)], ["two"]))
    g.nodes.append(helper.make_node("ConcatFromSequence", ["two"], ["joined"], axis=-1))
    act = g.op("Tanh", ["joined"])
    graph = helper.make_graph(g.nodes, "g", [_vi("x", shape=[3, 5]), _vi("y", shape=[5])],
                              [_vi("last", shape=[3, 1]), _vi("nrows", TensorProto.INT64, []), _vi("stacked", shape=[3, 5]),
                               _vi(act, shape=[3, 4])], g.inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="onnxc-tests")
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    return m


def segnet_unpool():
    """SegNet's encoder-decoder step: MaxPool with its Indices output, a conv, MaxUnpool at
    those indices (default and larger output_shape)."""
    g = G(45)
    x = g.conv("x", 8, 8, 3)
    g.nodes.append(helper.make_node("MaxPool", [x], ["p", "ind"], kernel_shape=[2, 2], strides=[2, 2]))
    y = g.conv("p", 8, 8, 3)
    up = g.op("MaxUnpool", [y, "ind"], kernel_shape=[2, 2], strides=[2, 2])
    big = g.op("MaxUnpool", [y, "ind", g.const(np.array([1, 8, 11, 13], np.int64), np.int64)], kernel_shape=[2, 2],
               strides=[2, 2])
    graph = helper.make_graph(g.nodes, "g", [_vi("x", shape=[1, 8, 10, 12])],
                              [_vi(up, shape=[1, 8, 10, 12]), _vi(big, shape=[1, 8, 11, 13])], g.inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)], producer_name="onnxc-tests")
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    return m


def video_audio_convs():
    """1-D and 3-D convolutions, transposed convolutions and pools as video (X3D, C3D, 3-D
    UNets) and audio/speech (wav2vec's feature encoder, Conformer's convolution module, TCNs,
    HiFi-GAN's upsamplers) models use them: onnxc runs 1-D
    convs as 2-D ones over a single row, 3-D ones through the row-wise im2col packer, 3-D
    depthwise ones as 2-D slices accumulated over the depth taps, 1-D and 3-D max/average
    pools through the 2-D pool kernel (3-D ones separably: depth, then height and width),
    transposed ones through its GEMM + col2im kernel."""
    g = G(34)

    def conv(x, cin, cout, k, group=1, **attrs):
        return g.op("Conv", [x, g.w(cout, cin // group, *k), g.w(cout, scale=0.1)], group=group, **attrs)

    # Video: [1, 4, 6, 10, 12].
    v = g.op("Relu", [conv("v", 4, 12, (3, 3, 3), pads=[1] * 6)])
    v2 = conv(v, 12, 16, (3, 3, 3), strides=[2, 2, 2], pads=[1, 0, 1, 1, 1, 0])
    dw = g.op("Add", [conv(v, 12, 12, (3, 3, 3), group=12, pads=[1] * 6), v])
    dws = conv(v, 12, 12, (3, 3, 3), group=12, strides=[2, 1, 2], dilations=[2, 1, 1], pads=[2, 1, 1, 2, 1, 1])
    mp = g.op("MaxPool", [v], kernel_shape=[1, 3, 3], strides=[1, 2, 2], pads=[0, 1, 1, 0, 1, 1])
    mp3 = g.op("MaxPool", [v], kernel_shape=[3, 3, 2], strides=[2, 2, 1], pads=[1, 1, 0, 1, 0, 1], ceil_mode=1,
               dilations=[1, 2, 1])
    ap = g.op("AveragePool", [v], kernel_shape=[2, 2, 2], strides=[2, 2, 2])
    ap3 = g.op("AveragePool", [v], kernel_shape=[3, 3, 3], strides=[2, 2, 2], pads=[1] * 6, ceil_mode=1)
    ap3i = g.op("AveragePool", [v], kernel_shape=[3, 1, 3], strides=[1, 1, 2], pads=[1, 0, 1, 1, 0, 1],
                count_include_pad=1)
    # Audio: [1, 8, 50].
    a = g.op("Relu", [conv("a", 8, 16, (5,), strides=[2], pads=[2, 2])])
    a2 = conv(a, 16, 16, (3,), dilations=[3], pads=[3, 3])
    a3 = conv(a, 16, 24, (4,), strides=[3], pads=[1, 0])
    dw1 = g.op("Add", [conv(a, 16, 16, (31,), group=16, pads=[15, 15]), a])
    causal = conv(a, 16, 16, (4,), group=16, pads=[3, 0])
    am = g.op("MaxPool", [a], kernel_shape=[3], strides=[2], pads=[1, 1])
    aa = g.op("AveragePool", [a], kernel_shape=[4], strides=[3], pads=[1, 2], ceil_mode=1)
    # Transposed: a vocoder's 16/8 upsampler, grouped and dilated 1-D, a 3-D UNet's 2×2×2/2,
    # 3-D strided with padding, and an explicit output_shape.
    up = g.op("ConvTranspose", [a, g.w(16, 8, 16), g.w(8, scale=0.1)], strides=[8], pads=[4, 4])
    up_g = g.op("ConvTranspose", [a, g.w(16, 3, 3), g.w(6, scale=0.1)], group=2, strides=[2], dilations=[2],
                pads=[1, 0], output_padding=[1])
    up3 = g.op("ConvTranspose", [v, g.w(12, 4, 2, 2, 2), g.w(4, scale=0.1)], strides=[2, 2, 2])
    up3p = g.op("ConvTranspose", [v, g.w(12, 4, 3, 3, 3)], strides=[2, 1, 2], pads=[1, 1, 0, 1, 0, 1])
    up_shape = g.op("ConvTranspose", [a, g.w(16, 4, 3)], strides=[2], output_shape=[50])
    return g.model([("v", [1, 4, 6, 10, 12]), ("a", [1, 8, 50])],
                   [v2, dw, dws, mp, mp3, ap, ap3, ap3i, a2, a3, dw1, causal, am, aa, up, up_g, up3, up3p, up_shape])


def einsum_products():
    """Einsum as exports write attention and projections (onnxc runs two-operand products
    as a batched MatMul with transposes or transposed operand reads): scores
    `bqhd,bkhd->bhqk`, context `bhqk,bkhd->bqhd`, a projection with transposed weights
    `bsd,ed->bse`, transposed A `kbm,kn->bmn`, a per-row dot product `ij,ij->i`, an outer
    product, and a label summed within one operand (the general reduction)."""
    g = G(35)
    q, k = "q", "k"
    s = g.op("Einsum", [q, k], equation="bqhd,bkhd->bhqk")
    p = g.op("Softmax", [s], axis=-1)
    ctx = g.op("Einsum", [p, k], equation="bhqk,bkhd->bqhd")
    proj = g.op("Einsum", [g.op("Reshape", [ctx, g.const([2, 5, 12], np.int64)]), g.w(7, 12)],
                equation="bsd,ed->bse")
    ta = g.op("Einsum", [g.op("Transpose", [q], perm=[3, 0, 1, 2]), g.w(4, 6)], equation="kbmh,kn->bmhn")
    dot = g.op("Einsum", ["r", "r"], equation="ij,ij->i")
    outer = g.op("Einsum", [dot, g.w(3)], equation="i,j->ij")
    summed = g.op("Einsum", ["r", g.w(6)], equation="ij,k->ik")
    return g.model([("q", [2, 5, 3, 4]), ("k", [2, 5, 3, 4]), ("r", [4, 6])], [s, ctx, proj, ta, dot, outer, summed])


def qdq_activations():
    """Activations between QDQ pairs as quantized YOLO/EfficientNet/BERT exports write them:
    SiLU (Sigmoid, Mul), Sigmoid, Tanh, Gelu-by-Erf and Softplus of dequantized uint8 and int8
    values, requantized; onnxc computes each such map as a table over the quantized input's
    256 values (`schedule::lut`) and reads it per element. Inputs reach past the
    quantization range (saturation) and include NaN and ±inf."""
    g = G(36)

    def qdq(t, scale, zp, dt=np.uint8):
        sc, z = g.const(np.float32(scale)), g.const(dt(zp), dt)
        return g.op("DequantizeLinear", [g.op("QuantizeLinear", [t, sc, z]), sc, z])

    specials = np.zeros((1, 1, 1, 16), np.float32)
    specials[0, 0, 0, :3] = [np.nan, np.inf, -np.inf]
    x = g.op("Add", [g.conv("x", 8, 16, 3), g.const(specials)])
    # NaN's int8 quantization is implementation-defined (onnxruntime gives -128, the
    # reference 0): the int8 branches see ±inf and a huge value instead.
    finite = specials.copy()
    finite[0, 0, 0, 0] = 1e30
    xf = g.op("Add", [g.conv("x", 8, 16, 3), g.const(finite)])
    # Each activation reads its own QDQ pair, as exports write them (a shared one is
    # materialized as a float tensor and read as such).
    a = qdq(x, 0.04, 128)
    silu = qdq(g.op("Mul", [a, g.op("Sigmoid", [a])]), 0.03, 10)
    sig = qdq(g.op("Sigmoid", [qdq(x, 0.04, 128)]), 1.0 / 256, 0)
    tanh = qdq(g.op("Tanh", [qdq(xf, 0.05, 0, np.int8)]), 1.0 / 128, 0, np.int8)
    b = qdq(xf, 0.05, 3, np.int8)
    half, one, rs2 = g.const(np.float32(0.5)), g.const(np.float32(1.0)), g.const(np.float32(1 / np.sqrt(2)))
    gelu = g.op("Mul", [g.op("Mul", [b, half]), g.op("Add", [one, g.op("Erf", [g.op("Mul", [b, rs2])])])])
    gelu = qdq(gelu, 0.03, -10, np.int8)
    sp = qdq(g.op("Softplus", [qdq(x, 0.04, 128)]), 0.02, 0)
    return g.model([("x", [1, 8, 16, 16])], [silu, sig, tanh, gelu, sp], opset=13)


def qoperator_contrib():
    """onnxruntime's QOperator contrib ops (domain com.microsoft) as its quantizer writes them
    around QLinearConv: QLinearSigmoid and QLinearMul (SiLU), QLinearAdd with broadcasting
    (a residual and a per-channel bias), QLinearLeakyRelu, QLinearConcat of inputs with
    their own scales and zero points (one shared with the output, copied), and
    QLinearGlobalAveragePool in both layouts; int8 through QLinearAdd;
    the domain's QuantizeLinear/DequantizeLinear; QGemm and QLinearSoftmax (both axis forms)."""
    g = G(37)
    rng = np.random.default_rng(37)
    u8 = lambda v: g.const(np.uint8(v), np.uint8)
    i8 = lambda v: g.const(np.int8(v), np.int8)
    f32 = lambda v: g.const(np.float32(v))
    ms = dict(domain="com.microsoft")
    xq = g.op("QuantizeLinear", ["x", f32(0.03), u8(128)], **ms)
    w = g.const(rng.integers(-127, 128, size=(16, 8, 3, 3)).astype(np.int8), np.int8)
    ws = g.const((0.005 + 0.003 * rng.random(16)).astype(np.float32))
    b = g.const(rng.integers(-300, 300, size=16).astype(np.int32), np.int32)
    c = g.op("QLinearConv", [xq, f32(0.03), u8(128), w, ws, g.const(np.zeros(16, np.int8), np.int8), f32(0.05),
                             u8(120), b], pads=[1, 1, 1, 1])
    sg = g.op("QLinearSigmoid", [c, f32(0.05), u8(120), f32(1 / 256), u8(0)], **ms)
    silu = g.op("QLinearMul", [c, f32(0.05), u8(120), sg, f32(1 / 256), u8(0), f32(0.03), u8(20)], **ms)
    res = g.op("QLinearAdd", [silu, f32(0.03), u8(20), c, f32(0.05), u8(120), f32(0.06), u8(90)], **ms)
    bias = g.const(rng.integers(0, 256, size=(16, 1, 1)).astype(np.uint8), np.uint8)
    biased = g.op("QLinearAdd", [res, f32(0.06), u8(90), bias, f32(0.01), u8(128), f32(0.06), u8(90)], **ms)
    lr = g.op("QLinearLeakyRelu", [biased, f32(0.06), u8(90), f32(0.04), u8(60)], alpha=0.1, **ms)
    cat = g.op("QLinearConcat", [f32(0.04), u8(60), lr, f32(0.04), u8(60), c, f32(0.05), u8(120), sg, f32(1 / 256),
                                 u8(0)], axis=1, **ms)
    gap = g.op("QLinearGlobalAveragePool", [cat, f32(0.04), u8(60), f32(0.02), u8(10)], **ms)
    nhwc = g.op("Transpose", [cat], perm=[0, 2, 3, 1])
    gap_last = g.op("QLinearGlobalAveragePool", [nhwc, f32(0.04), u8(60), f32(0.03), u8(0)], channels_last=1, **ms)
    sq = g.op("QuantizeLinear", ["x", f32(0.05)], **ms)
    s8 = g.op("QuantizeLinear", ["x", f32(0.05), i8(0)], **ms)
    add8 = g.op("QLinearAdd", [s8, f32(0.05), i8(0), s8, f32(0.05), i8(0), f32(0.08), i8(-3)], **ms)
    deq = g.op("DequantizeLinear", [gap, f32(0.02), u8(10)], **ms)
    # QGemm (per-column int8 weights, int32 bias, transB) to uint8 and to float, then
    # QLinearSoftmax along the last axis (opset 13) and over a coerced 2-D tensor (opset 11).
    flat = g.op("Reshape", [gap, g.const(np.array([1, 48], np.int64), np.int64)])
    wg = g.const(rng.integers(-127, 128, size=(10, 48)).astype(np.int8), np.int8)
    wgs = g.const((0.01 + 0.01 * rng.random(10)).astype(np.float32))
    wgz = g.const(np.zeros(10, np.int8), np.int8)
    bg = g.const(rng.integers(-500, 500, size=10).astype(np.int32), np.int32)
    qg = g.op("QGemm", [flat, f32(0.02), u8(10), wg, wgs, wgz, bg, f32(0.1), u8(128)], transB=1, **ms)
    fg = g.op("QGemm", [flat, f32(0.02), u8(10), wg, wgs, wgz, bg], transB=1, alpha=0.5, **ms)
    smx = g.op("QLinearSoftmax", [qg, f32(0.1), u8(128), f32(1 / 256), u8(0)], axis=-1, opset=13, **ms)
    sm2 = g.op("QLinearSoftmax", [lr, f32(0.04), u8(60), f32(1 / 256), u8(0)], axis=2, opset=11, **ms)
    # onnx's shape inference knows no com.microsoft schemas: output types are declared.
    U8, I8, F = TensorProto.UINT8, TensorProto.INT8, TensorProto.FLOAT
    outs = [(cat, U8, [1, 48, 12, 12]), (gap, U8, [1, 48, 1, 1]), (gap_last, U8, [1, 1, 1, 48]),
            (sq, U8, [1, 8, 12, 12]), (add8, I8, [1, 8, 12, 12]), (deq, F, [1, 48, 1, 1]),
            (qg, U8, [1, 10]), (fg, F, [1, 10]), (smx, U8, [1, 10]), (sm2, U8, [1, 16, 12, 12])]
    graph = helper.make_graph(g.nodes, "g", [helper.make_tensor_value_info("x", F, [1, 8, 12, 12])],
                              [helper.make_tensor_value_info(n, t, sh) for n, t, sh in outs], g.inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)],
                          producer_name="onnxc-tests")
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def low_precision_values():
    """Float8, float4, int4 and int2 values moved by the ops whose schemas allow them
    (Reshape, Transpose, Pad, Flatten, Unsqueeze, Squeeze, Identity, Shape, Size, IsNaN,
    IsInf, ConstantOfShape, DequantizeLinear), with graph outputs of each type (packed at the
    ABI for the 4- and 2-bit ones: 15 elements, an odd count) and the values cast back to
    float; saturating and not saturating casts of values beyond float8's range. Opset 25;
    compared with the reference evaluator."""
    g = G(53)
    i64 = lambda v: g.const(np.array(v, np.int64), np.int64)  # noqa: E731
    outs = []
    x = g.op("Mul", ["x", g.const(np.float32(3.0))])
    # Integers cast from floats within their range: beyond it the cast is undefined, and
    # the reference evaluator's values there follow numpy's build and the host's vector
    # instructions (x * 3 reaches -4.7 and 6.6).
    in_range = {TensorProto.INT4: (-8.0, 7.5), TensorProto.UINT2: (0.0, 3.5)}
    for t in (TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E5M2FNUZ, TensorProto.FLOAT4E2M1,
              TensorProto.INT4, TensorProto.UINT2):
        lo, hi = in_range.get(t, (None, None))
        src = x if lo is None else g.op("Clip", [x, g.const(np.float32(lo)), g.const(np.float32(hi))])
        q = g.op("Cast", [src], to=t)
        r = g.op("Reshape", [q, i64([5, 3])])
        tr = g.op("Transpose", [r], perm=[1, 0])
        p = g.op("Pad", [tr, i64([0, 1, 0, 0])])
        f = g.op("Flatten", [p], axis=1)
        u = g.op("Unsqueeze", [f, i64([0])])
        s = g.op("Identity", [g.op("Squeeze", [u, i64([0])])])
        outs += [(s, t, [3, 6]), (g.op("Cast", [s], to=TensorProto.FLOAT), TensorProto.FLOAT, [3, 6])]
    outs += [(g.op("Shape", [q]), TensorProto.INT64, [2]), (g.op("Size", [q]), TensorProto.INT64, [])]
    # Beyond the range: saturated, else infinity (E5M2) or NaN (E4M3FN).
    big = g.op("Mul", ["x", g.const(np.float32(1e5))])
    e5 = g.op("Cast", [big], to=TensorProto.FLOAT8E5M2, saturate=0)
    e4 = g.op("Cast", [big], to=TensorProto.FLOAT8E4M3FN, saturate=0)
    sat = g.op("Cast", [big], to=TensorProto.FLOAT8E4M3FN)
    outs += [(e5, TensorProto.FLOAT8E5M2, [3, 5]), (g.op("IsInf", [e5]), TensorProto.BOOL, [3, 5]),
             (g.op("IsNaN", [e4]), TensorProto.BOOL, [3, 5]), (sat, TensorProto.FLOAT8E4M3FN, [3, 5])]
    fill = helper.make_tensor("v", TensorProto.FLOAT8E4M3FN, [1], [2.5])
    outs.append((g.op("ConstantOfShape", [i64([2, 3])], value=fill), TensorProto.FLOAT8E4M3FN, [2, 3]))
    # Blocked int4 weights, as 4-bit weight quantizers write them.
    w = helper.make_tensor("w4", TensorProto.INT4, [4, 6], np.arange(-8, 16).astype(np.int8) % 16 - 8)
    g.inits.append(w)
    scales = g.const((0.1 + 0.05 * np.arange(8)).reshape(4, 2).astype(np.float32))
    outs.append((g.op("DequantizeLinear", ["w4", scales], axis=1, block_size=3), TensorProto.FLOAT, [4, 6]))
    graph = helper.make_graph(g.nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 5])],
                              [helper.make_tensor_value_info(n, t, sh) for n, t, sh in outs], g.inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 25)], producer_name="onnxc-tests")


def data_dependent_rows():
    """Outputs with as many rows as the data selects, read on as exporters write it:
    `x[x > 0.5] * 2` (NonZero, Transpose, GatherND), the columns of positive mean
    (Compress along axis 1, then Relu), the raw NonZero positions, and a detector's tail:
    NonMaxSuppression over sigmoid scores, the kept boxes gathered by index and their
    classes; Unique of quantized values, sorted, and of integer columns by first
    occurrence; TopK whose K the data gives and Slices to and from it (no declared output
    shapes)."""
    g = G(61)
    pos = g.op("NonZero", [g.op("Greater", ["x", g.const(np.float32(0.5))])])
    picked = g.op("GatherND", ["x", g.op("Transpose", [pos], perm=[1, 0])])
    doubled = g.op("Mul", [picked, g.const(np.float32(2))])
    cond = g.op("Greater", [g.op("ReduceMean", ["x"], axes=[0], keepdims=0), g.const(np.float32(0))])
    cols = g.op("Relu", [g.op("Compress", ["x", cond], axis=1)])
    scores = g.op("Sigmoid", ["s"])
    sel = g.op("NonMaxSuppression", ["boxes", scores, g.const(np.array([8], np.int64), np.int64),
                                     g.const(np.array([0.4], np.float32)), g.const(np.array([0.6], np.float32))])
    box_idx = g.op("Gather", [sel, g.const(np.int64(2), np.int64)], axis=1)
    flat = g.op("Reshape", ["boxes", g.const(np.array([20, 4], np.int64), np.int64)])
    kept = g.op("Gather", [flat, box_idx], axis=0)
    cls = g.op("Gather", [sel, g.const(np.int64(1), np.int64)], axis=1)
    levels = g.op("Floor", [g.op("Mul", ["x", g.const(np.float32(2))])])
    uniq = g.op("Unique", [levels], outputs=4)
    uniq_cols = g.op("Unique", [g.op("Cast", [g.op("Floor", ["x"])], to=TensorProto.INT64)], outputs=4,
                     axis=1, sorted=0)
    row0 = g.op("Gather", ["x", g.const(np.int64(0), np.int64)], axis=0)
    k = g.op("ReduceSum", [g.op("Cast", [g.op("Greater", [row0, g.const(np.float32(0))])], to=TensorProto.INT64)],
             keepdims=1)
    top = g.op("TopK", ["x", k], outputs=2, axis=1)
    axis1 = g.const(np.array([1], np.int64), np.int64)
    head = g.op("Slice", ["x", g.const(np.array([0], np.int64), np.int64), k, axis1])
    tail = g.op("Exp", [g.op("Slice", ["x", k, g.const(np.array([6], np.int64), np.int64), axis1])])
    return g.model([("x", [4, 6]), ("boxes", [1, 20, 4]), ("s", [1, 3, 20])],
                   [doubled, cols, pos, sel, kept, cls] + uniq + uniq_cols + top + [head, tail])


def training_optimizers():
    """The ai.onnx.preview.training optimizers on float64 variables (their float32 form is in
    the backend suite): Adagrad over two variables, Adam and Nesterov momentum, with a
    float32 learning rate and an update count computed at run time (0 on the first update,
    where Adam skips its bias correction and momentum takes the whole gradient); compared
    with the reference evaluator."""
    g = G(71)
    D = TensorProto.DOUBLE
    tr = dict(domain="ai.onnx.preview.training")
    d = lambda v: g.op("Cast", [v], to=D)  # noqa: E731
    pos = lambda v: g.op("Abs", [d(v)])  # noqa: E731
    # T = floor(|t| * 2): 0, 1, 2 or more, whatever t's draw.
    t = g.op("Cast", [g.op("Floor", [g.op("Mul", [g.op("Abs", ["t"]), g.const(np.float32(2))])])],
             to=TensorProto.INT64)
    r = g.const(np.float32(0.1))
    x, gr, v, h = d("x"), d("g"), d("v"), pos("h")
    x2, g2, h2 = d("x2"), d("g2"), pos("h2")
    ada = g.op("Adagrad", [r, t, x, x2, gr, g2, h, h2], outputs=4, decay_factor=0.1, epsilon=1e-6,
               norm_coefficient=0.01, **tr)
    adam = g.op("Adam", [r, t, x, gr, v, h], outputs=3, alpha=0.9, beta=0.95, epsilon=1e-7, norm_coefficient=0.02,
                norm_coefficient_post=0.1, **tr)
    nest = g.op("Momentum", [r, t, x, gr, v], outputs=2, alpha=0.8, beta=0.5, mode="nesterov",
                norm_coefficient=0.01, **tr)
    std = g.op("Momentum", [r, t, x2, g2, v], outputs=2, alpha=0.8, beta=0.5, mode="standard",
               norm_coefficient=0.0, **tr)
    outs = [(o, D, [3, 4]) for o in list(ada) + list(adam) + list(nest) + list(std)]
    ins = [helper.make_tensor_value_info("t", TensorProto.FLOAT, [])] + [
        helper.make_tensor_value_info(n, TensorProto.FLOAT, [3, 4]) for n in ("x", "g", "v", "h", "x2", "g2", "h2")]
    graph = helper.make_graph(g.nodes, "g", ins, [helper.make_tensor_value_info(n, ty, sh) for n, ty, sh in outs],
                              g.inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                   helper.make_opsetid("ai.onnx.preview.training", 1)],
                             producer_name="onnxc-tests")


def col2im_fold():
    """Col2Im as PyTorch's nn.Fold exports it: constant image_shape and block_shape, 2-D with
    asymmetric pads, strides and dilations, and 3-D over a batch of 2, each after a Relu
    (the block columns computed at run time); compared with the reference evaluator."""
    g = G(73)
    i64 = lambda v: g.const(np.array(v, np.int64), np.int64)  # noqa: E731
    two = g.op("Col2Im", [g.op("Relu", ["x"]), i64([7, 9]), i64([3, 3])], pads=[1, 0, 1, 2], strides=[2, 1],
               dilations=[1, 2])
    three = g.op("Col2Im", ["y", i64([4, 5, 3]), i64([2, 2, 1])])
    F = TensorProto.FLOAT
    graph = helper.make_graph(g.nodes, "g", [helper.make_tensor_value_info("x", F, [1, 72, 28]),
                                             helper.make_tensor_value_info("y", F, [2, 12, 36])],
                              [helper.make_tensor_value_info(two, F, [1, 8, 7, 9]),
                               helper.make_tensor_value_info(three, F, [2, 3, 4, 5, 3])], g.inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], producer_name="onnxc-tests")


def mel_filterbank():
    """A log-mel front end as speech models write it: MelWeightMatrix with constant
    parameters (folded into a constant table) applied to a power spectrum, then Log; and the
    matrix itself in float64 for other parameters; compared with the reference evaluator."""
    g = G(79)
    i64 = lambda v: g.const(np.array(v, np.int64), np.int64)  # noqa: E731
    f32 = lambda v: g.const(np.array(v, np.float32))  # noqa: E731
    mel = g.op("MelWeightMatrix", [i64(40), i64(512), i64(16000), f32(20.0), f32(7600.0)])
    power = g.op("Mul", ["x", "x"])
    logmel = g.op("Log", [g.op("Add", [g.op("MatMul", [power, mel]), f32(1e-6)])])
    raw = g.op("MelWeightMatrix", [i64(24), i64(400), g.const(np.array(22050, np.int32), np.int32), f32(0.0),
                                   f32(11025.0)], output_datatype=TensorProto.DOUBLE)
    F = TensorProto.FLOAT
    graph = helper.make_graph(g.nodes, "g", [helper.make_tensor_value_info("x", F, [3, 257])],
                              [helper.make_tensor_value_info(logmel, F, [3, 40]),
                               helper.make_tensor_value_info(raw, TensorProto.DOUBLE, [201, 24])], g.inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="onnxc-tests")


CASES = [resnet_block, mobilenet_block, shufflenet_unit, inception_block, mixed_fallbacks, padded_heads,
         attention_views, attention_fused,
         softmax_scale_limits, pool_ceil_edges, pool_huge_windows, softplus_tails, silu_convs, conv_transpose_decoder,
         resize_constant, qdq_cnn, if_shape_checks,
         recurrent_layers, qoperator_cnn, loops_unrolled, scans_unrolled, scan_batched, if_runtime,
         if_branch_shapes,
         data_dependent_rows, loop_scan_until,
         topk_heads, topk_opset1, grid_samples, deform_convs, recurrent_state_ops, roi_aligns,
         loops_run_time_condition, spatial_transformer, rotary_attention,
         integer_products_exact, audio_frontend, experimental_ops,
         sequences_static, segnet_unpool, video_audio_convs, einsum_products,
         qdq_activations, qoperator_contrib, low_precision_values, training_optimizers,
         col2im_fold, mel_filterbank, quantized_depthwise, model_functions]


# onnx's light_* models whose weights are all ConstantOfShape fills, rewritten with varied
# weights (onnx_builder.with_varied_weights) so that a wrong channel order, weight layout or
# gather shows in the outputs; the shipped light cases cannot show one. The three models made
# mostly of fully connected weights (AlexNet, VGG-19, ZFNet-512: 240-550 MB once varied) are
# left out; their conv and Gemm kernels are the ones these models use.
VARIED_LIGHT = ["squeezenet", "shufflenet", "inception_v1", "inception_v2", "densenet121", "resnet50"]


# Cases whose expected outputs come from onnx's reference evaluator, where onnxruntime 1.31
# departs from it: Resize's tf_crop_and_resize with scales (onnxruntime maps coordinates
# through the integer output length, the reference and the backend tests through
# scale · input length) and uint8 linear resizing (onnxruntime rounds some halves the other
# way; the reference rounds half to even); and QLinearConv/ConvInteger of uint8 activations
# with int8 weights (onnxruntime's AVX2 u8·s8 kernels sum pairs of products into saturating
# int16, off by up to 190 of 255 for full-range weights; its quantizer avoids them with
# reduce_range); and GridSample's cubic mode with border padding (onnxruntime, like
# PyTorch, clamps each tap's index but not the sampling position; the reference, whose
# results the backend tests hold, clamps the position first: up to 0.4 apart here); and the
# DFT (onnxruntime's float32 FFT is off by up to 6e-5 on values of 10, the reference computes
# in float64: onnxc's float32 product with float64-built twiddles is within 1e-6 of it); and
# MaxUnpool with a larger output_shape (onnxruntime reads the indices as flat positions of
# the larger output; the reference, and the backend test's expected output, place the
# unpooled result in its leading corner); and onnxruntime's com.microsoft QOperator ops,
# whose x86 kernels approximate the documented formulas in fixed point (QLinearAdd: off by
# one in 2% of elements): contrib_reference.py implements the formulas for the reference.
REFERENCE_ORACLE = {"test_resize_constant", "test_qoperator_cnn", "test_grid_samples", "test_integer_products_exact",
                    "test_audio_frontend", "test_segnet_unpool", "test_qoperator_contrib",
                    "test_low_precision_values", "test_deform_convs",
                    "test_recurrent_state_ops", "test_roi_aligns", "test_training_optimizers",
                    "test_col2im_fold", "test_mel_filterbank", "test_quantized_depthwise"}


def write_case(out_dir: str, name: str, m: onnx.ModelProto) -> dict:
    """Writes OUT/onnxc/<name>: the model, seeded N(0, 1) inputs and onnxruntime's outputs
    (graph optimizations off, so the oracle runs the graph as written), or the reference
    evaluator's for the cases in REFERENCE_ORACLE."""
    d = os.path.join(out_dir, "onnxc", name)
    shutil.rmtree(d, ignore_errors=True)  # no stale inputs from an earlier version of the case
    ds = os.path.join(d, "test_data_set_0")
    os.makedirs(ds, exist_ok=True)
    onnx.save(m, os.path.join(d, "model.onnx"))
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    inits = {i.name for i in m.graph.initializer}
    feeds = {}
    for i, x in enumerate(xi for xi in m.graph.input if xi.name not in inits):
        shape = [dim.dim_value for dim in x.type.tensor_type.shape.dim]
        feeds[x.name] = rng.standard_normal(shape).astype(np.float32)
        with open(os.path.join(ds, f"input_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(feeds[x.name], x.name).SerializeToString())
    if name in REFERENCE_ORACLE:
        outs = ReferenceEvaluator(m, new_ops=CONTRIB_OPS).run(None, feeds)
    else:
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        so.log_severity_level = 3
        outs = ort.InferenceSession(os.path.join(d, "model.onnx"), so, providers=["CPUExecutionProvider"]).run(None, feeds)
    for i, (o, v) in enumerate(zip(m.graph.output, outs)):
        with open(os.path.join(ds, f"output_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(v, o.name).SerializeToString())
    return {"kind": "onnxc", "name": name, "dir": d, "rtol": 1e-4, "atol": 1e-5}


def write(out_dir: str, light_dir: str) -> list:
    """Writes every case under OUT/onnxc/<name>; returns their cases.tsv entries. `light_dir`
    is the onnx package's backend/test/data/light folder."""
    entries = [write_case(out_dir, f"test_{fn.__name__}", fn()) for fn in CASES]
    for opset, m in zip((11, 10, 9, 7), resize_legacy()):
        entries.append(write_case(out_dir, f"test_resize_legacy_opset{opset}", m))
    for model in VARIED_LIGHT:
        m = onnx.load(os.path.join(light_dir, f"light_{model}.onnx"))
        entries.append(write_case(out_dir, f"test_light_{model}_varied", with_varied_weights(m)))
    return entries + contrib_cases.write(out_dir, light_dir) + ml_cases.write(out_dir)
