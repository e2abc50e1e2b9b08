"""Conformance cases (kind `onnxc`) for onnxruntime's com.microsoft contrib operators, built
two ways:

- small hand-built graphs of each op covering its attributes and optional inputs
  (`test_ms_*`), expected outputs from onnxruntime (graph optimizations off), or from the
  documented formulas in contrib_reference.py where onnxruntime has no CPU kernel (BiasAdd,
  BiasSplitGelu) or approximates the exact 8-bit result (QLinearAveragePool,
  QLinearReduceMean, QLinearWhere);
- real pipelines: a BERT-style encoder and a GPT-2-style decoder written the way PyTorch
  exports them, then fused by onnxruntime's transformer optimizer
  (`onnxruntime.transformers.optimizer.optimize_model`, Python fusions after onnxruntime's
  basic graph optimizations), also with MultiHeadAttention, dynamically quantized
  (`quantize_dynamic`) and saved after onnxruntime's extended optimizations (FusedMatMul,
  FusedGemm, DynamicQuantizeMatMul); LSTM stacks quantized by `quantize_dynamic`
  (DynamicQuantizeLSTM); and light zoo CNNs with varied weights (final softmax
  removed, so the outputs are logits) quantized by `quantize_static` (QOperator and QDQ,
  per-channel 7-bit int8 weights, uint8 activations, seeded calibration data) and
  `quantize_dynamic`.

Every model is small or already in the suite's light set; generation takes about a minute.
Integer ids and masks are fed as int32/int64 inputs; the rest N(0, 1)."""
from __future__ import annotations

import os
import shutil
import sys
import zlib

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as TP
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from onnx_builder import with_varied_weights  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from contrib_reference import CONTRIB_OPS  # noqa: E402

MS = "com.microsoft"
F, U8, I8, I32, I64 = TP.FLOAT, TP.UINT8, TP.INT8, TP.INT32, TP.INT64


class B:
    """Nodes, initializers, graph inputs (with their seeded values) and outputs of one case."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.inputs, self.outputs, self.feeds, self.n = [], [], [], [], {}, 0

    def name(self, p):
        self.n += 1
        return f"{p}{self.n}"

    def const(self, value, dtype=np.float32):
        nm = self.name("c")
        self.inits.append(numpy_helper.from_array(np.array(value, dtype), nm))
        return nm

    def w(self, *shape, scale=0.5):
        return self.const(self.rng.standard_normal(shape) * scale)

    def input(self, value, elem):
        nm = self.name("in")
        self.inputs.append(helper.make_tensor_value_info(nm, elem, list(value.shape)))
        self.feeds[nm] = value
        return nm

    def floats(self, *shape):
        return self.input(self.rng.standard_normal(shape).astype(np.float32), F)

    def op(self, op_type, inputs, outputs=None, domain=MS, **attrs):
        outs = [self.name(op_type.lower()) if o is None else o for o in (outputs or [None])]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=self.name(op_type), domain=domain, **attrs))
        return outs[0] if len(outs) == 1 else outs

    def out(self, name, elem, shape):
        self.outputs.append(helper.make_tensor_value_info(name, elem, shape))

    def model(self, opset=17):
        g = helper.make_graph(self.nodes, "g", self.inputs, self.outputs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(MS, 1)],
                              producer_name="onnxc-tests")
        m.ir_version = 8
        return m


def ms_norms_activations():
    """SkipLayerNormalization (beta, bias, the sum output; a [S, H] skip broadcast),
    SkipSimplifiedLayerNormalization, SimplifiedLayerNormalization (default domain), Gelu,
    BiasGelu, FastGelu with and without bias, QuickGelu (default and set alpha),
    FusedMatMul/TransposeMatMul (transposes, batch transposes, alpha), FusedGemm and FusedConv
    (activations)."""
    b = B(101)
    x, skip = b.floats(2, 4, 16), b.floats(2, 4, 16)
    g, beta, bias = b.w(16), b.w(16, scale=0.1), b.w(16, scale=0.1)
    y, _, _, s = b.op("SkipLayerNormalization", [x, skip, g, beta, bias], [None, "", "", None])
    b.out(y, F, [2, 4, 16]), b.out(s, F, [2, 4, 16])
    y2 = b.op("SkipLayerNormalization", [x, b.w(4, 16), g], epsilon=1e-5)
    b.out(y2, F, [2, 4, 16])
    y3, _, _, s3 = b.op("SkipSimplifiedLayerNormalization", [x, skip, g, bias], [None, "", "", None], epsilon=1e-6)
    b.out(y3, F, [2, 4, 16]), b.out(s3, F, [2, 4, 16])
    y4 = b.op("SimplifiedLayerNormalization", [x, g], domain="", axis=-1, epsilon=1e-6)
    b.out(y4, F, [2, 4, 16])
    for op, ins, attrs in [("Gelu", [x], {}), ("BiasGelu", [x, bias], {}), ("FastGelu", [x], {}),
                           ("FastGelu", [x, bias], {}), ("QuickGelu", [x], {}), ("QuickGelu", [x], {"alpha": 1.5})]:
        b.out(b.op(op, ins, **attrs), F, [2, 4, 16])
    a, bt = b.floats(2, 4, 16), b.floats(2, 8, 16)
    b.out(b.op("FusedMatMul", [a, bt], transB=1, alpha=0.5), F, [2, 4, 8])
    at = b.floats(2, 16, 4)
    b.out(b.op("TransposeMatMul", [at, b.w(2, 16, 8)], transA=1), F, [2, 4, 8])
    # transBatchA/B: a seq-first operand's Transpose(perm=[1, 0, 2]) folded into the MatMul
    # (ranks 3 and 4, with and without transA/transB).
    b.out(b.op("FusedMatMul", [b.floats(4, 2, 16), b.w(2, 16, 8)], transBatchA=1), F, [2, 4, 8])
    b.out(b.op("FusedMatMul", [b.floats(16, 2, 3, 4), b.w(2, 3, 16, 8)], transBatchA=1, transA=1), F, [2, 3, 4, 8])
    b.out(b.op("FusedMatMul", [a, b.floats(8, 2, 16)], transBatchB=1, transB=1, alpha=0.5), F, [2, 4, 8])
    b.out(b.op("FusedMatMul", [b.floats(4, 2, 16), b.floats(16, 2, 8)], transBatchA=1, transBatchB=1), F, [2, 4, 8])
    a2 = b.floats(4, 16)
    b.out(b.op("FusedGemm", [a2, b.w(16, 8), b.w(8)], activation="LeakyRelu", activation_alpha=0.2), F, [4, 8])
    b.out(b.op("FusedGemm", [a2, b.w(8, 16), b.w(8)], transB=1, alpha=0.7, activation="Tanh"), F, [4, 8])
    xc = b.floats(1, 8, 6, 6)
    b.out(b.op("FusedConv", [xc, b.w(8, 8, 3, 3, scale=0.2), b.w(8)], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
               activation="Relu"), F, [1, 8, 6, 6])
    b.out(b.op("FusedConv", [xc, b.w(4, 8, 1, 1), b.w(4), b.floats(1, 4, 6, 6)], kernel_shape=[1, 1],
               activation="Clip", activation_params=[-0.5, 0.5]), F, [1, 4, 6, 6])
    return b, "ort"


def ms_diffusion_ops():
    """BiasAdd and BiasSplitGelu (onnxruntime has CUDA kernels only: the documented formulas
    are the oracle)."""
    b = B(102)
    x, bias = b.floats(2, 4, 16), b.w(16)
    b.out(b.op("BiasAdd", [x, bias, b.floats(2, 4, 16)]), F, [2, 4, 16])
    b.out(b.op("BiasSplitGelu", [x, bias]), F, [2, 4, 8])
    return b, "reference"


def ms_grid_sample():
    """com.microsoft GridSample, as PyTorch exports grid_sample below opset 16 (onnxruntime's
    registration of the custom symbolic): each mode, padding mode and align_corners, with
    grid positions reaching past the borders."""
    b = B(109)
    x = b.floats(2, 3, 5, 6)
    grid = b.input((b.rng.uniform(-1.3, 1.3, (2, 4, 7, 2))).astype(np.float32), F)
    for mode, pad, align in [("bilinear", "zeros", 0), ("nearest", "border", 1), ("bicubic", "reflection", 0),
                             ("bilinear", "reflection", 1)]:
        b.out(b.op("GridSample", [x, grid], mode=mode, padding_mode=pad, align_corners=align), F, [2, 3, 4, 7])
    return b, "ort"


def ms_inverse():
    """com.microsoft Inverse and Trilu (PyTorch's torch.inverse, triu and tril with
    onnxruntime's registered symbolics): inverses of a batch of well-conditioned matrices,
    float and double; upper and lower triangles with positive and negative diagonals."""
    b = B(110)
    a = (b.rng.standard_normal((2, 3, 4, 4)) + 4 * np.eye(4)).astype(np.float32)
    b.out(b.op("Inverse", [b.input(a, F)]), F, [2, 3, 4, 4])
    d = (b.rng.standard_normal((5, 5)) + 5 * np.eye(5)).astype(np.float64)
    b.out(b.op("Inverse", [b.input(d, TP.DOUBLE)]), TP.DOUBLE, [5, 5])
    # torch.triu/tril through the same registration: com.microsoft Trilu.
    t = b.floats(2, 4, 6)
    b.out(b.op("Trilu", [t, b.const(1, np.int64)], upper=1), F, [2, 4, 6])
    b.out(b.op("Trilu", [t, b.const(-1, np.int64)], upper=0), F, [2, 4, 6])
    return b, "ort"


def ms_embed_layer_norm():
    """EmbedLayerNormalization with segment embeddings, a mask (mask index output) and the
    embedding sum; and without them, with explicit [1, S] position ids."""
    b = B(103)
    ids = b.input(b.rng.integers(0, 30, (2, 6)).astype(np.int32), I32)
    seg = b.input(b.rng.integers(0, 2, (2, 6)).astype(np.int32), I32)
    mask = b.input(np.array([[1] * 6, [1, 1, 1, 1, 0, 0]], np.int32), I32)
    word, pos, st = b.w(30, 16), b.w(10, 16), b.w(2, 16)
    g, beta = b.w(16), b.w(16, scale=0.1)
    y, mi, es = b.op("EmbedLayerNormalization", [ids, seg, word, pos, st, g, beta, mask], [None, None, None])
    b.out(y, F, [2, 6, 16]), b.out(mi, I32, [2]), b.out(es, F, [2, 6, 16])
    pids = b.input(np.array([[3, 1, 4, 1, 5, 9]], np.int32), I32)
    y2, _ = b.op("EmbedLayerNormalization", [ids, "", word, pos, "", g, beta, "", pids], [None, None], epsilon=1e-5)
    b.out(y2, F, [2, 6, 16])
    return b, "ort"


def ms_attention():
    """Attention with every CPU mask form (raw [B, T] and [B, S, T], key lengths [B], end and
    start positions [2B]), unidirectional with a past state (present output), attention_bias
    with a mask, and qkv_hidden_sizes with a smaller V, a set scale and mask_filter_value."""
    b = B(104)
    x = b.floats(2, 5, 16)
    w, bias = b.w(16, 48, scale=0.3), b.w(48, scale=0.1)
    masks = [np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], np.int32), np.array([5, 3], np.int32),
             np.array([5, 4, 0, 1], np.int32), (b.rng.random((2, 5, 5)) > 0.3).astype(np.int32)]
    masks[3][..., 0] = 1
    for m in masks:
        b.out(b.op("Attention", [x, w, bias, b.input(m, I32)], num_heads=4), F, [2, 5, 16])
    past = b.floats(2, 2, 4, 3, 4)
    y, present = b.op("Attention", [x, w, bias, "", past], [None, None], num_heads=4, unidirectional=1)
    b.out(y, F, [2, 5, 16]), b.out(present, F, [2, 2, 4, 8, 4])
    b.out(b.op("Attention", [x, w, bias, b.input(masks[1], I32), "", b.floats(2, 1, 5, 5)], num_heads=4), F, [2, 5, 16])
    w2, bias2 = b.w(16, 40, scale=0.3), b.w(40, scale=0.1)
    b.out(b.op("Attention", [x, w2, bias2, b.input(masks[0], I32)], num_heads=4, qkv_hidden_sizes=[16, 16, 8],
               scale=0.3, mask_filter_value=-1000.0), F, [2, 5, 8])
    return b, "ort"


def ms_multihead_attention():
    """MultiHeadAttention: cross attention with a bias and a raw key padding mask; self
    attention with past key/value, unidirectional and attention_bias (present outputs);
    projected 4-D key/value with key lengths."""
    b = B(105)
    q, k, v = b.floats(2, 5, 16), b.floats(2, 7, 16), b.floats(2, 7, 16)
    bias = b.w(48, scale=0.1)
    kpm = b.input(np.array([[1] * 7, [1] * 5 + [0, 0]], np.int32), I32)
    b.out(b.op("MultiHeadAttention", [q, k, v, bias, kpm], num_heads=4), F, [2, 5, 16])
    y, pk, pv = b.op("MultiHeadAttention", [q, b.floats(2, 5, 16), b.floats(2, 5, 16), bias, "", b.floats(2, 1, 5, 8),
                                            b.floats(2, 4, 3, 4), b.floats(2, 4, 3, 4)], [None, None, None],
                     num_heads=4, unidirectional=1)
    b.out(y, F, [2, 5, 16]), b.out(pk, F, [2, 4, 8, 4]), b.out(pv, F, [2, 4, 8, 4])
    lens = b.input(np.array([7, 4], np.int32), I32)
    b.out(b.op("MultiHeadAttention", [q, b.floats(2, 4, 7, 4), b.floats(2, 4, 7, 4), "", lens], num_heads=4), F,
          [2, 5, 16])
    return b, "ort"


def ms_group_query_attention():
    """GroupQueryAttention (4 query heads over 2 KV heads of 16): a first prompt without past,
    a generation step over a past state, and a packed-QKV prompt with rotary embedding, a local
    window and softcap."""
    b = B(106)
    i32 = lambda v: b.input(np.array(v, np.int32), I32)  # noqa: E731
    y, pk, pv = b.op("GroupQueryAttention", [b.floats(1, 5, 64), b.floats(1, 5, 32), b.floats(1, 5, 32), "", "",
                                             i32([4]), i32(5)], [None, None, None], num_heads=4, kv_num_heads=2)
    b.out(y, F, [1, 5, 64]), b.out(pk, F, [1, 2, 5, 16]), b.out(pv, F, [1, 2, 5, 16])
    y, pk, pv = b.op("GroupQueryAttention", [b.floats(2, 1, 64), b.floats(2, 1, 32), b.floats(2, 1, 32),
                                             b.floats(2, 2, 6, 16), b.floats(2, 2, 6, 16), i32([6, 6]), i32(7)],
                     [None, None, None], num_heads=4, kv_num_heads=2)
    b.out(y, F, [2, 1, 64]), b.out(pk, F, [2, 2, 7, 16]), b.out(pv, F, [2, 2, 7, 16])
    ang = np.arange(16)[:, None] * np.array([1.0, 0.7, 0.5, 0.3, 0.2, 0.1, 0.05, 0.02])[None, :]
    cos, sin = b.const(np.cos(ang)), b.const(np.sin(ang))
    y, _, _ = b.op("GroupQueryAttention", [b.floats(1, 6, 128), "", "", "", "", i32([5]), i32(6), cos, sin],
                   [None, None, None], num_heads=4, kv_num_heads=2, do_rotary=1, local_window_size=2, softcap=3.0)
    b.out(y, F, [1, 6, 64])
    return b, "ort"


def ms_attention_fp16():
    """Float16 Attention (a padding mask), MultiHeadAttention (bias, key lengths) and
    GroupQueryAttention (a prompt), as onnxconverter's float16 conversion leaves an optimized
    BERT or decoder: onnxc computes them in float32 and rounds the results to float16."""
    b = B(111)
    h = lambda *shape: b.input(b.rng.standard_normal(shape).astype(np.float16), TP.FLOAT16)  # noqa: E731
    hw = lambda *shape, scale=0.3: b.const(b.rng.standard_normal(shape) * scale, np.float16)  # noqa: E731
    x = h(2, 5, 16)
    mask = b.input(np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], np.int32), I32)
    b.out(b.op("Attention", [x, hw(16, 48), hw(48, scale=0.1), mask], num_heads=4), TP.FLOAT16, [2, 5, 16])
    lens = b.input(np.array([7, 4], np.int32), I32)
    b.out(b.op("MultiHeadAttention", [x, h(2, 7, 16), h(2, 7, 16), hw(48, scale=0.1), lens], num_heads=4),
          TP.FLOAT16, [2, 5, 16])
    i32 = lambda v: b.input(np.array(v, np.int32), I32)  # noqa: E731
    y, pk, pv = b.op("GroupQueryAttention", [h(1, 5, 64), h(1, 5, 32), h(1, 5, 32), "", "", i32([4]), i32(5)],
                     [None, None, None], num_heads=4, kv_num_heads=2)
    b.out(y, TP.FLOAT16, [1, 5, 64]), b.out(pk, TP.FLOAT16, [1, 2, 5, 16]), b.out(pv, TP.FLOAT16, [1, 2, 5, 16])
    return b, "ort"


def ms_rotary_embedding():
    """com.microsoft RotaryEmbedding: 3-D input with num_heads and [B, S] positions, 4-D
    interleaved, a partial rotary dim, and one position offset."""
    b = B(107)
    ang = np.arange(12)[:, None] * np.array([1.0, 0.3])[None, :]
    cos, sin = b.const(np.cos(ang)), b.const(np.sin(ang))
    pos = b.input(b.rng.integers(0, 7, (2, 5)).astype(np.int64), I64)
    b.out(b.op("RotaryEmbedding", [b.floats(2, 5, 16), pos, cos, sin], num_heads=4), F, [2, 5, 16])
    b.out(b.op("RotaryEmbedding", [b.floats(2, 4, 5, 4), pos, cos, sin], interleaved=1), F, [2, 4, 5, 4])
    c1, s1 = b.const(np.cos(ang[:, :1])), b.const(np.sin(ang[:, :1]))
    off = b.input(np.array([3], np.int64), I64)
    b.out(b.op("RotaryEmbedding", [b.floats(2, 4, 5, 4), off, c1, s1], rotary_embedding_dim=2, num_heads=4), F,
          [2, 4, 5, 4])
    return b, "ort"


def ms_quant_matmuls():
    """MatMulIntegerToFloat (per-column scales and zero points, bias), DynamicQuantizeMatMul,
    MatMulNBits (4-bit with packed zero points, K not a multiple of the block, bias; 2-bit
    with float zero points; 4-bit with the default zero point) and QAttention with a key
    length mask. Weights use 7 bits, as onnxruntime's quantizer does with reduce_range: its
    uint8×int8 x86 kernels can saturate with full-range weights."""
    b = B(108)
    r = b.rng
    au8 = b.input(r.integers(0, 256, (2, 3, 16)).astype(np.uint8), U8)
    w = b.const(r.integers(-64, 64, (16, 8)), np.int8)
    ws, wz = b.const(0.01 + 0.01 * r.random(8)), b.const(r.integers(-3, 4, 8), np.int8)
    b.out(b.op("MatMulIntegerToFloat", [au8, w, b.const(0.02), ws, b.const(120, np.uint8), wz, b.w(8)]), F, [2, 3, 8])
    x = b.floats(2, 3, 16)
    b.out(b.op("DynamicQuantizeMatMul", [x, w, b.const(0.015), b.const(2, np.int8), b.w(8)]), F, [2, 3, 8])
    # MatMulNBits: K=40 in blocks of 16 (3 blocks, the last half empty), N=6.
    blob = b.const(r.integers(0, 256, (6, 3, 8)), np.uint8)
    scales = b.const(0.05 + 0.05 * r.random((6, 3)))
    zps = b.const(r.integers(0, 256, (6, 2)), np.uint8)
    xa = b.floats(2, 3, 40)
    b.out(b.op("MatMulNBits", [xa, blob, scales, zps, "", b.w(6)], K=40, N=6, bits=4, block_size=16), F, [2, 3, 6])
    b.out(b.op("MatMulNBits", [xa, blob, scales], K=40, N=6, bits=4, block_size=16), F, [2, 3, 6])
    blob2 = b.const(r.integers(0, 256, (6, 2, 8)), np.uint8)
    b.out(b.op("MatMulNBits", [b.floats(3, 64), blob2, b.const(0.1 * r.random((6, 2))),
                               b.const(3 * r.random((6, 2)))], K=64, N=6, bits=2, block_size=32), F, [3, 6])
    xq = b.input(r.integers(0, 256, (2, 5, 16)).astype(np.uint8), U8)
    qw = b.const(r.integers(-64, 64, (16, 48)), np.int8)
    b.out(b.op("QAttention", [xq, qw, b.w(48, scale=0.1), b.const(0.02), b.const(0.01), b.input(np.array([5, 3], np.int32), I32),
                              b.const(128, np.uint8), b.const(0, np.int8)], num_heads=4), F, [2, 5, 16])
    return b, "ort"


def ms_qlinear_pools():
    """QLinearAveragePool (pads, strides, ceil mode, count_include_pad, NHWC, int8),
    QLinearReduceMean (keepdims either way) and QLinearWhere (broadcast condition, operands
    requantized to the output's scale)."""
    b = B(109)
    x = b.floats(1, 8, 7, 7)
    xq = b.op("QuantizeLinear", [x, b.const(0.03), b.const(128, np.uint8)], domain="")
    ap = dict(zip(["x_scale", "x_zp", "y_scale", "y_zp"], [b.const(0.03), b.const(128, np.uint8), b.const(0.02),
                                                            b.const(120, np.uint8)]))
    qargs = [xq, ap["x_scale"], ap["x_zp"], ap["y_scale"], ap["y_zp"]]
    b.out(b.op("QLinearAveragePool", qargs, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]), U8, [1, 8, 4, 4])
    b.out(b.op("QLinearAveragePool", qargs, kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1), U8, [1, 8, 4, 4])
    b.out(b.op("QLinearAveragePool", qargs, kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1), U8,
          [1, 8, 7, 7])
    nhwc = b.op("Transpose", [xq], domain="", perm=[0, 2, 3, 1])
    b.out(b.op("QLinearAveragePool", [nhwc] + qargs[1:], kernel_shape=[7, 7], channels_last=1), U8, [1, 1, 1, 8])
    x8 = b.op("QuantizeLinear", [x, b.const(0.02), b.const(-5, np.int8)], domain="")
    b.out(b.op("QLinearAveragePool", [x8, b.const(0.02), b.const(-5, np.int8), b.const(0.01), b.const(3, np.int8)],
               kernel_shape=[2, 2]), I8, [1, 8, 6, 6])
    b.out(b.op("QLinearReduceMean", qargs, axes=[2, 3], keepdims=1), U8, [1, 8, 1, 1])
    b.out(b.op("QLinearReduceMean", qargs, axes=[1], keepdims=0), U8, [1, 7, 7])
    cond = b.op("Greater", [b.floats(1, 1, 7, 7), b.const(0.0)], domain="")
    yq = b.op("QuantizeLinear", [b.floats(1, 8, 7, 7), b.const(0.05), b.const(100, np.uint8)], domain="")
    b.out(b.op("QLinearWhere", [cond, xq, b.const(0.03), b.const(128, np.uint8), yq, b.const(0.05),
                                b.const(100, np.uint8), b.const(0.04), b.const(110, np.uint8)]), U8, [1, 8, 7, 7])
    return b, "reference"


# ---- real pipelines -----------------------------------------------------------------------

class Export:
    """A graph written the way PyTorch exports BERT and GPT-2 (seeded weights)."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.n = [], [], 0

    def name(self, p):
        self.n += 1
        return f"{p}_{self.n}"

    def init(self, arr):
        nm = self.name("w")
        self.inits.append(numpy_helper.from_array(np.asarray(arr), nm))
        return nm

    def w(self, *shape, s=None):
        s = 1 / np.sqrt(shape[0]) if s is None else s
        return self.init((self.rng.standard_normal(shape) * s).astype(np.float32))

    def i64(self, v):
        return self.init(np.array(v, np.int64))

    def f32(self, v):
        return self.init(np.array(v, np.float32))

    def op(self, t, ins, nout=1, **kw):
        outs = [self.name(t.lower()) for _ in range(nout)]
        self.nodes.append(helper.make_node(t, ins, outs, name=self.name(t), **kw))
        return outs[0] if nout == 1 else outs

    def layer_norm(self, x, hid, native):
        g = self.init((1 + 0.1 * self.rng.standard_normal(hid)).astype(np.float32))
        b = self.init((0.1 * self.rng.standard_normal(hid)).astype(np.float32))
        if native:
            return self.op("LayerNormalization", [x, g, b], axis=-1, epsilon=1e-12)
        m = self.op("ReduceMean", [x], axes=[-1])
        d = self.op("Sub", [x, m])
        v = self.op("ReduceMean", [self.op("Pow", [d, self.f32(2.0)])], axes=[-1])
        sd = self.op("Sqrt", [self.op("Add", [v, self.f32(1e-12)])])
        return self.op("Add", [self.op("Mul", [self.op("Div", [d, sd]), g]), b])

    def model(self, inputs, outputs, opset):
        g = helper.make_graph(self.nodes, "g", inputs, outputs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="onnxc-tests")
        m.ir_version = 8
        onnx.checker.check_model(m)
        return m


def bert_export(opset=17, batch=2, seq=8, hid=32, heads=4, layers=2, ffn=64, vocab=50):
    """A BERT-style encoder: word/position/token-type embeddings and LayerNorm, an extended
    attention mask `(1 − mask) · −10000`, post-LN layers with exact GELU, and a tanh pooler."""
    e = Export(7)
    native = opset >= 17
    emb = e.op("Gather", [e.w(vocab, hid, s=0.5), "input_ids"])
    npos = max(16, seq)
    pos = e.op("Slice", [e.i64(np.arange(npos)[None, :]), e.i64([0]), e.i64([seq]), e.i64([1])])
    emb = e.op("Add", [emb, e.op("Gather", [e.w(npos, hid, s=0.5), pos])])
    emb = e.op("Add", [emb, e.op("Gather", [e.w(2, hid, s=0.5), "token_type_ids"])])
    h = e.layer_norm(emb, hid, native)
    m = e.op("Unsqueeze", [e.op("Unsqueeze", ["attention_mask", e.i64([1])]), e.i64([2])])
    m = e.op("Mul", [e.op("Sub", [e.f32(1.0), e.op("Cast", [m], to=F)]), e.f32(-10000.0)])
    d = hid // heads

    def proj(x, nin, nout):
        return e.op("Add", [e.op("MatMul", [x, e.w(nin, nout)]), e.w(nout, s=0.1)])

    for _ in range(layers):
        shp = e.i64([0, 0, heads, d])
        q = e.op("Transpose", [e.op("Reshape", [proj(h, hid, hid), shp])], perm=[0, 2, 1, 3])
        k = e.op("Transpose", [e.op("Reshape", [proj(h, hid, hid), shp])], perm=[0, 2, 3, 1])
        v = e.op("Transpose", [e.op("Reshape", [proj(h, hid, hid), shp])], perm=[0, 2, 1, 3])
        s = e.op("Div", [e.op("MatMul", [q, k]), e.f32(np.sqrt(d))])
        p = e.op("Softmax", [e.op("Add", [s, m])], axis=-1)
        c = e.op("Reshape", [e.op("Transpose", [e.op("MatMul", [p, v])], perm=[0, 2, 1, 3]), e.i64([0, 0, hid])])
        h = e.layer_norm(e.op("Add", [proj(c, hid, hid), h]), hid, native)
        f = proj(h, hid, ffn)
        erf = e.op("Erf", [e.op("Div", [f, e.f32(1.4142135381698608)])])
        gl = e.op("Mul", [e.op("Mul", [f, e.op("Add", [erf, e.f32(1.0)])]), e.f32(0.5)])
        h = e.layer_norm(e.op("Add", [proj(gl, ffn, hid), h]), hid, native)
    first = e.op("Gather", [h, e.i64(0)], axis=1)
    pooled = e.op("Tanh", [proj(first, hid, hid)])
    ins = [helper.make_tensor_value_info(n, I64, [batch, seq]) for n in ("input_ids", "token_type_ids", "attention_mask")]
    outs = [helper.make_tensor_value_info(h, F, [batch, seq, hid]), helper.make_tensor_value_info(pooled, F, [batch, hid])]
    return e.model(ins, outs, opset)


def gpt2_export(batch=1, seq=8, hid=32, heads=4, layers=2, vocab=60, npos=16):
    """A GPT-2-style decoder as transformers 4.x exports it: Conv1D projections (Reshape, Gemm,
    Reshape), Split into Q/K/V, the causal mask sliced from a [1, 1, npos, npos] table by the
    scores' shape and applied by Where, tanh-approximated GELU, pre-LN blocks."""
    e = Export(8)
    causal = e.init(np.tril(np.ones((npos, npos), bool))[None, None])
    pos = e.op("Slice", [e.i64(np.arange(npos)[None, :]), e.i64([0]), e.i64([seq]), e.i64([1])])
    h = e.op("Add", [e.op("Gather", [e.w(vocab, hid, s=0.5), "input_ids"]), e.op("Gather", [e.w(npos, hid, s=0.5), pos])])
    d = hid // heads

    def conv1d(x, nin, nout):
        g = e.op("Gemm", [e.op("Reshape", [x, e.i64([-1, nin])]), e.w(nin, nout), e.w(nout, s=0.1)])
        return e.op("Reshape", [g, e.i64([batch, seq, nout])])

    for _ in range(layers):
        qkv = conv1d(e.layer_norm(h, hid, True), hid, 3 * hid)
        q, k, v = e.op("Split", [qkv, e.i64([hid, hid, hid])], nout=3, axis=2)
        shp = e.i64([batch, seq, heads, d])
        q = e.op("Transpose", [e.op("Reshape", [q, shp])], perm=[0, 2, 1, 3])
        k = e.op("Transpose", [e.op("Reshape", [k, shp])], perm=[0, 2, 3, 1])
        v = e.op("Transpose", [e.op("Reshape", [v, shp])], perm=[0, 2, 1, 3])
        div = e.op("Div", [e.op("MatMul", [q, k]), e.f32(np.sqrt(d))])
        shape = e.op("Shape", [div])
        nd = e.op("Squeeze", [e.op("Slice", [shape, e.i64([2]), e.i64([3]), e.i64([0])]), e.i64([0])])
        ns = e.op("Squeeze", [e.op("Slice", [shape, e.i64([3]), e.i64([4]), e.i64([0])]), e.i64([0])])
        ns1 = e.op("Unsqueeze", [ns, e.i64([0])])
        m1 = e.op("Slice", [causal, e.op("Unsqueeze", [e.op("Sub", [ns, nd]), e.i64([0])]), ns1, e.i64([2])])
        m2 = e.op("Slice", [m1, e.i64([0]), ns1, e.i64([3])])
        p = e.op("Softmax", [e.op("Where", [m2, div, e.f32(-10000.0)])], axis=-1)
        c = e.op("Reshape", [e.op("Transpose", [e.op("MatMul", [p, v])], perm=[0, 2, 1, 3]), e.i64([batch, seq, hid])])
        h = e.op("Add", [h, conv1d(c, hid, hid)])
        f = conv1d(e.layer_norm(h, hid, True), hid, 4 * hid)
        inner = e.op("Mul", [e.op("Add", [f, e.op("Mul", [e.op("Pow", [f, e.f32(3.0)]), e.f32(0.044715)])]),
                             e.f32(np.sqrt(2 / np.pi))])
        gl = e.op("Mul", [e.op("Mul", [e.f32(0.5), f]), e.op("Add", [e.f32(1.0), e.op("Tanh", [inner])])])
        h = e.op("Add", [h, conv1d(gl, 4 * hid, hid)])
    logits = e.op("MatMul", [e.layer_norm(h, hid, True), e.w(hid, vocab)])
    return e.model([helper.make_tensor_value_info("input_ids", I64, [batch, seq])],
                   [helper.make_tensor_value_info(logits, F, [batch, seq, vocab])], 17)


def ort_optimized(m: onnx.ModelProto, tmp: str, level) -> onnx.ModelProto:
    """The model as onnxruntime's graph optimizations at `level` leave it (saved by the
    session, as `optimize_model` does for opt_level > 0)."""
    src, dst = os.path.join(tmp, "src.onnx"), os.path.join(tmp, "opt.onnx")
    onnx.save(m, src)
    so = ort.SessionOptions()
    so.graph_optimization_level = level
    so.optimized_model_filepath = dst
    so.log_severity_level = 3
    ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
    return onnx.load(dst)


def transformer_optimized(m: onnx.ModelProto, tmp: str, model_type: str, **options) -> onnx.ModelProto:
    """onnxruntime's transformer optimizer: its basic graph optimizations, then the Python
    fusions (opt_level=1 of `optimize_model`, which wants torch installed to run the first
    step itself)."""
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model
    basic = ort_optimized(m, tmp, ort.GraphOptimizationLevel.ORT_ENABLE_BASIC)
    path = os.path.join(tmp, "basic.onnx")
    onnx.save(basic, path)
    fo = FusionOptions(model_type)
    for k, v in options.items():
        setattr(fo, k, v)
    return optimize_model(path, model_type=model_type, num_heads=4, hidden_size=32, opt_level=0,
                          optimization_options=fo).model


def bert_feeds(seed, batch=2, seq=8):
    rng = np.random.default_rng(seed)
    mask = np.ones((batch, seq), np.int64)
    mask[-1, -3:] = 0
    return {"input_ids": rng.integers(0, 50, (batch, seq)).astype(np.int64),
            "token_type_ids": (np.arange(seq)[None, :] >= seq // 2).astype(np.int64).repeat(batch, 0),
            "attention_mask": mask}


def pipelines(tmp: str):
    """(name, model, feeds, atol) of the optimized transformer models."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    out = []
    bert13 = bert_export(opset=13)
    bert17 = bert_export(opset=17)
    feeds = bert_feeds(11)
    # Python fusions alone on the decomposed LayerNorm export: EmbedLayerNormalization,
    # Attention (mask index), SkipLayerNormalization, BiasGelu.
    from onnxruntime.transformers.optimizer import optimize_model
    p13 = os.path.join(tmp, "bert13.onnx")
    onnx.save(bert13, p13)
    out.append(("test_bert_optimized", optimize_model(p13, model_type="bert", num_heads=4, hidden_size=32,
                                                      opt_level=0).model, feeds, 1e-5))
    out.append(("test_bert_optimized_mha", transformer_optimized(
        bert17, tmp, "bert", use_multi_head_attention=True, use_raw_attention_mask=True,
        enable_gelu_approximation=True), feeds, 1e-5))
    out.append(("test_bert_ort_extended", ort_optimized(bert17, tmp, ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED),
                feeds, 1e-5))
    # Dynamic quantization of the optimized model (QAttention, DynamicQuantizeLinear,
    # MatMulInteger), then onnxruntime's extended optimizations (DynamicQuantizeMatMul).
    opt = transformer_optimized(bert17, tmp, "bert")
    fp, qp = os.path.join(tmp, "bert_opt.onnx"), os.path.join(tmp, "bert_dyn.onnx")
    onnx.save(opt, fp)
    quantize_dynamic(fp, qp, weight_type=QuantType.QInt8, reduce_range=True,
                     extra_options={"DefaultTensorType": TP.FLOAT})
    out.append(("test_bert_dynamic_quantized", onnx.load(qp), feeds, 1e-5))
    # The fused embedding (EmbedLayerNormalization) quantized too: QEmbedLayerNormalization.
    emb = optimize_model(p13, model_type="bert", num_heads=4, hidden_size=32, opt_level=0).model
    if not any(o.domain == "com.microsoft" for o in emb.opset_import):
        emb.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    ep, eq = os.path.join(tmp, "bert_emb.onnx"), os.path.join(tmp, "bert_emb_dyn.onnx")
    onnx.save(emb, ep)
    quantize_dynamic(ep, eq, weight_type=QuantType.QInt8, reduce_range=True,
                     extra_options={"DefaultTensorType": TP.FLOAT})
    out.append(("test_bert_dynamic_quantized_embedding", onnx.load(eq), feeds, 1e-5))
    out.append(("test_bert_dynamic_quantized_ort", ort_optimized(onnx.load(qp), tmp,
                                                                 ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED),
                feeds, 1e-5))
    gpt = gpt2_export()
    gp = os.path.join(tmp, "gpt2.onnx")
    onnx.save(gpt, gp)
    gfeeds = {"input_ids": np.random.default_rng(12).integers(0, 60, (1, 8)).astype(np.int64)}
    out.append(("test_gpt2_optimized", optimize_model(gp, model_type="gpt2", num_heads=4, hidden_size=32,
                                                      opt_level=0).model, gfeeds, 1e-5))
    return out


# ---- dynamically quantized LSTMs ----------------------------------------------------------

def quantized_lstms(tmp: str):
    """(name, model, feeds) of LSTM stacks quantized by `quantize_dynamic` into
    DynamicQuantizeLSTM: per-tensor and per-channel int8 weights, forward, reverse and
    bidirectional, stacked, with initial states as inputs, and one wide enough to take R's
    integers. 7-bit weights (`reduce_range`):
    onnxruntime's AVX2 kernel saturates pairs of full-range uint8 x int8 products to int16
    (`vpmaddubsw`), where onnxc sums them exactly."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    rng = np.random.default_rng(23)
    out = []
    for name, seq, batch, inp, hid, direction, layers, per_channel, states in (
            ("test_lstm_dynamic_quantized", 6, 2, 5, 8, "forward", 1, False, True),
            ("test_lstm_dynamic_quantized_reverse", 4, 3, 3, 5, "reverse", 1, True, False),
            ("test_lstm_dynamic_quantized_bidirectional", 5, 2, 4, 6, "bidirectional", 2, True, False),
            # R large enough (hidden 384: 2.4 MB as floats) that onnxc multiplies by its
            # integers (`RecurrentParams::r_int8`).
            ("test_lstm_dynamic_quantized_wide", 4, 2, 8, 384, "bidirectional", 1, True, True)):
        dirs = 2 if direction == "bidirectional" else 1
        nodes, inits, inputs = [], [], [helper.make_tensor_value_info("X", TP.FLOAT, [seq, batch, inp])]
        x, width = "X", inp
        feeds = {"X": rng.standard_normal((seq, batch, inp)).astype(np.float32)}
        for k in range(layers):
            inits += [numpy_helper.from_array((rng.standard_normal((dirs, 4 * hid, width)) * 0.3).astype(np.float32),
                                              f"W{k}"),
                      numpy_helper.from_array((rng.standard_normal((dirs, 4 * hid, hid)) * 0.3).astype(np.float32),
                                              f"R{k}"),
                      numpy_helper.from_array((rng.standard_normal((dirs, 8 * hid)) * 0.1).astype(np.float32), f"B{k}"),
                      numpy_helper.from_array(np.array([0, 0, -1], np.int64), f"shape{k}")]
            ins = [x, f"W{k}", f"R{k}", f"B{k}"]
            if states:
                ins += ["", "h0", "c0"]
                for s_name in ("h0", "c0"):
                    inputs.append(helper.make_tensor_value_info(s_name, TP.FLOAT, [dirs, batch, hid]))
                    feeds[s_name] = (rng.standard_normal((dirs, batch, hid)) * 0.5).astype(np.float32)
            nodes += [helper.make_node("LSTM", ins, [f"Y{k}", f"H{k}", f"C{k}"], hidden_size=hid, direction=direction),
                      # [seq, dirs, batch, hidden] -> [seq, batch, dirs * hidden]
                      helper.make_node("Transpose", [f"Y{k}"], [f"T{k}"], perm=[0, 2, 1, 3]),
                      helper.make_node("Reshape", [f"T{k}", f"shape{k}"], [f"X{k + 1}"])]
            x, width = f"X{k + 1}", dirs * hid
        outputs = [helper.make_tensor_value_info(v, TP.FLOAT, None) for v in (x, f"H{layers - 1}", f"C{layers - 1}")]
        g = helper.make_graph(nodes, name, inputs, outputs, inits)
        fp, qp = os.path.join(tmp, f"{name}.onnx"), os.path.join(tmp, f"{name}_q.onnx")
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)], ir_version=8), fp)
        quantize_dynamic(fp, qp, weight_type=QuantType.QInt8, per_channel=per_channel, reduce_range=True,
                         op_types_to_quantize=["LSTM"])
        out.append((name, onnx.load(qp), feeds))
    return out


# ---- quantized zoo CNNs ------------------------------------------------------------------

ZOO = ["squeezenet", "shufflenet", "inception_v1", "resnet50", "densenet121"]
# The deep ones in QOperator form only: quantized ResNet-50 takes 20-30 s per case to compile
# and run on a loaded 2-core machine (CI's budget).
ZOO_FORMATS = {"resnet50": ["qop"], "densenet121": ["qop"], "squeezenet": ["qop", "qdq", "dyn", "ortall"]}


def zoo_float(light_dir: str, model: str) -> onnx.ModelProto:
    """The light model with varied weights, opset 13 (per-channel QDQ needs it), its final
    Softmax removed (quantized softmax outputs are mostly zeros)."""
    m = with_varied_weights(onnx.load(os.path.join(light_dir, f"light_{model}.onnx")))
    m.ir_version = max(m.ir_version, 7)
    last = next(n for n in m.graph.node if n.output[0] == m.graph.output[0].name)
    if last.op_type == "Softmax":
        prod = next(n for n in m.graph.node if last.input[0] in n.output)
        prod.output[list(prod.output).index(last.input[0])] = last.output[0]
        m.graph.node.remove(last)
    return onnx.version_converter.convert_version(m, 13)


def zoo_quantized(light_dir: str, tmp: str):
    """(name, model, feeds, atol) of the quantized zoo CNNs: QOperator and QDQ
    (`quantize_static`, per-channel, 7-bit weights, two seeded calibration images), and
    dynamic."""
    import onnx.version_converter  # noqa: F401
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self, name, shape):
            rng = np.random.default_rng(5)
            self.data = iter([{name: rng.standard_normal(shape).astype(np.float32)} for _ in range(2)])

        def get_next(self):
            return next(self.data, None)

    ort.set_default_logger_severity(3)  # the quantizer's calibration sessions warn per initializer
    out = []
    for model in ZOO:
        m = zoo_float(light_dir, model)
        src = os.path.join(tmp, f"{model}.onnx")
        onnx.save(m, src)
        inits = {i.name for i in m.graph.initializer}
        x = next(i for i in m.graph.input if i.name not in inits)
        shape = [d.dim_value for d in x.type.tensor_type.shape.dim]
        feeds = {x.name: np.random.default_rng(zlib.crc32(model.encode())).standard_normal(shape).astype(np.float32)}
        formats = ZOO_FORMATS.get(model, ["qop", "qdq", "dyn"])
        for fmt in formats:
            dst = os.path.join(tmp, f"{model}_{fmt}.onnx")
            if fmt == "dyn":
                quantize_dynamic(src, dst, weight_type=QuantType.QInt8)
            elif fmt == "ortall":
                # The QDQ model as onnxruntime saves it at ORT_ENABLE_ALL (its default level):
                # channels-last QLinearConv, NhwcMaxPool and QLinearConcat between transposes.
                qdq = onnx.load(os.path.join(tmp, f"{model}_qdq.onnx"))
                onnx.save(ort_optimized(qdq, tmp, ort.GraphOptimizationLevel.ORT_ENABLE_ALL), dst)
            else:
                quantize_static(src, dst, Reader(x.name, shape), per_channel=True, reduce_range=True,
                                quant_format=QuantFormat.QOperator if fmt == "qop" else QuantFormat.QDQ,
                                activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
            out.append((f"test_light_{model}_{fmt}", onnx.load(dst), feeds, None))
    return out


def bert_static(tmp: str):
    """(name, model) of the BERT-style encoder quantized by `quantize_static` (QDQ and
    QOperator, per-channel int8 weights, uint8 activations, calibrated on seeded inputs):
    its MatMuls become integer products (QDQ groups, QLinearMatMul)."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.data = iter([bert_feeds(s) for s in (21, 22, 23)])

        def get_next(self):
            return next(self.data, None)

    ort.set_default_logger_severity(3)
    src = os.path.join(tmp, "bert_static.onnx")
    onnx.save(bert_export(opset=17), src)
    out = []
    for fmt, qf in (("qdq", QuantFormat.QDQ), ("qop", QuantFormat.QOperator)):
        dst = os.path.join(tmp, f"bert_static_{fmt}.onnx")
        # reduce_range (7-bit weights), as for the zoo: onnxruntime's AVX2 uint8 x int8
        # kernels (vpmaddubsw) saturate pairs of full-range products, so without it the
        # oracle is exact only on VNNI machines.
        quantize_static(src, dst, Reader(), per_channel=True, reduce_range=True, quant_format=qf,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
        out.append((f"test_bert_static_{fmt}", onnx.load(dst)))
    return out


def gemm_mlp_static(tmp: str):
    """(name, model, feeds) of a two-layer Gemm MLP (transB=1 with a bias, then transB=0
    with a bias) quantized by `quantize_static` in QDQ and QOperator form: its Gemms run as
    integer products with the bias in the int32 sums."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    rng = np.random.default_rng(31)
    w1 = rng.standard_normal((48, 20)).astype(np.float32) * 0.3
    b1 = rng.standard_normal(48).astype(np.float32) * 0.1
    w2 = rng.standard_normal((48, 10)).astype(np.float32) * 0.3
    b2 = rng.standard_normal(10).astype(np.float32) * 0.1
    g = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], transB=1),
         helper.make_node("Relu", ["h"], ["r"]),
         helper.make_node("Gemm", ["r", "w2", "b2"], ["y"])],
        "gemm_mlp", [helper.make_tensor_value_info("x", F, [6, 20])],
        [helper.make_tensor_value_info("y", F, [6, 10])],
        [numpy_helper.from_array(v, n) for v, n in ((w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2"))])
    src = os.path.join(tmp, "gemm_mlp.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), src)

    class Reader(CalibrationDataReader):
        def __init__(self):
            r = np.random.default_rng(32)
            self.data = iter([{"x": r.standard_normal((6, 20)).astype(np.float32)} for _ in range(4)])

        def get_next(self):
            return next(self.data, None)

    feeds = {"x": np.random.default_rng(33).standard_normal((6, 20)).astype(np.float32)}
    out = []
    for fmt, qf in (("qdq", QuantFormat.QDQ), ("qop", QuantFormat.QOperator)):
        dst = os.path.join(tmp, f"gemm_mlp_{fmt}.onnx")
        quantize_static(src, dst, Reader(), per_channel=True, quant_format=qf,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
        out.append((f"test_gemm_mlp_static_{fmt}", onnx.load(dst), feeds))
    return out


def residual_static(tmp: str):
    """(name, model, feeds) of a small CNN with a residual connection (Add then Relu) and a
    Concat of two convolutions, quantized by `quantize_static` in QDQ form with int8 and
    with uint8 activations (per-channel 7-bit weights): the sum runs as the integer sum
    kernel (signed and unsigned), the Concat's parts are requantized to its scale and the
    requantizations looked up in tables."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    rng = np.random.default_rng(41)

    def w(*shape):
        return (rng.standard_normal(shape) * (2.0 / np.prod(shape[1:])) ** 0.5).astype(np.float32)

    inits = {"w1": w(16, 8, 3, 3), "b1": w(16) * 0.1, "w2": w(16, 16, 3, 3), "b2": w(16) * 0.1,
             "w3": w(8, 16, 1, 1), "w4": w(8, 16, 1, 1), "w5": w(4, 16, 1, 1)}
    g = helper.make_graph(
        [helper.make_node("Conv", ["x", "w1", "b1"], ["a0"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["a0"], ["a"]),
         helper.make_node("Conv", ["a", "w2", "b2"], ["b"], pads=[1, 1, 1, 1]),
         helper.make_node("Add", ["a", "b"], ["s"]),
         helper.make_node("Relu", ["s"], ["c"]),
         helper.make_node("Conv", ["c", "w3"], ["d"]),
         helper.make_node("Conv", ["c", "w4"], ["e"]),
         helper.make_node("Concat", ["d", "e"], ["f"], axis=1),
         helper.make_node("Conv", ["f", "w5"], ["y"])],
        "residual", [helper.make_tensor_value_info("x", F, [1, 8, 12, 12])],
        [helper.make_tensor_value_info("y", F, [1, 4, 12, 12])],
        [numpy_helper.from_array(v, n) for n, v in inits.items()])
    src = os.path.join(tmp, "residual.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), src)

    class Reader(CalibrationDataReader):
        def __init__(self):
            r = np.random.default_rng(42)
            self.data = iter([{"x": r.standard_normal((1, 8, 12, 12)).astype(np.float32)} for _ in range(4)])

        def get_next(self):
            return next(self.data, None)

    feeds = {"x": np.random.default_rng(43).standard_normal((1, 8, 12, 12)).astype(np.float32)}
    out = []
    for name, act in (("s8", QuantType.QInt8), ("u8", QuantType.QUInt8)):
        dst = os.path.join(tmp, f"residual_{name}.onnx")
        quantize_static(src, dst, Reader(), per_channel=True, reduce_range=True, quant_format=QuantFormat.QDQ,
                        activation_type=act, weight_type=QuantType.QInt8)
        out.append((f"test_qdq_residual_concat_{name}", onnx.load(dst), feeds))
    return out


# The statically quantized encoder's float outputs, compared to 0.1% of their range:
# measured, onnxc lands within 1.2e-7 of the range (float32 rounding after the last
# dequantization); an intermediate value at a rounding tie would move a step, which the
# margin allows for.
STATIC_RANGE = 1e-3


def output_step(m: onnx.ModelProto) -> float:
    """The quantization step of the model's (dequantized) output: the scale of its final
    DequantizeLinear, or 0 for a float result."""
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    last = next((n for n in m.graph.node if n.output[0] == m.graph.output[0].name), None)
    if last is not None and last.op_type == "DequantizeLinear" and last.input[1] in inits:
        return float(inits[last.input[1]].max())
    return 0.0


# Tolerance of the quantized zoo cases, in steps of the output's scale: onnxc requantizes
# exactly (round half to even of the exact product), onnxruntime's x86 kernels in float32 or
# fixed point (QLinearAdd/Mul), so an intermediate value near a rounding tie can differ by
# one step. The static models use 7-bit weights (reduce_range, which onnxruntime's
# documentation recommends on x86 without VNNI): with full-range int8 weights its uint8×int8
# kernels saturate pairwise int16 sums, and its QOperator SqueezeNet and DenseNet-121 land
# up to 6 steps from the exact result onnxc computes (bit-identical with reduce_range). The dynamically quantized models have float
# outputs and re-quantize every layer's activations at run time: a float rounding difference
# upstream (LRN, pools, bias adds) moves a value across a rounding boundary, so they are
# compared to 1% of the output's range (measured: 0.4% after Inception v1's 57 layers).
# QDQ models: onnxc runs their convolutions and matrix products on its integer kernels
# (exact sums, requantized once), where the oracle (onnxruntime without graph
# optimizations) computes them in float32 and quantizes after; onnxruntime's own optimized
# session, which fuses the same groups into integer kernels, differs from its unoptimized
# one by up to 2 steps on Inception v1 (measured), and so does onnxc where its float32
# kernels round differently (the AVX2 and portable ones).
ZOO_STEPS = {"qop": 1, "qdq": 2, "ortall": 2}
DYN_RANGE = 0.01


def write_case(out_dir, name, m, feeds, oracle, atol=1e-5, rtol=1e-4, range_atol=None, threads=0):
    """Writes OUT/onnxc/<name> (model, inputs, expected outputs) and returns its cases.tsv
    entry; with `range_atol` the absolute tolerance is that fraction of the largest expected
    output magnitude; `threads` sets onnxruntime's (0: its default)."""
    d = os.path.join(out_dir, "onnxc", name)
    shutil.rmtree(d, ignore_errors=True)
    ds = os.path.join(d, "test_data_set_0")
    os.makedirs(ds, exist_ok=True)
    onnx.save(m, os.path.join(d, "model.onnx"))
    inits = {i.name for i in m.graph.initializer}
    names = [x.name for x in m.graph.input if x.name not in inits]
    for i, nm in enumerate(names):
        with open(os.path.join(ds, f"input_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(feeds[nm], nm).SerializeToString())
    if oracle == "reference":
        outs = ReferenceEvaluator(m, new_ops=CONTRIB_OPS).run(None, feeds)
    else:
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        so.log_severity_level = 3
        so.intra_op_num_threads = threads
        outs = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)
    for i, (o, v) in enumerate(zip(m.graph.output, outs)):
        with open(os.path.join(ds, f"output_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(np.asarray(v), o.name).SerializeToString())
    if range_atol is not None:
        atol = range_atol * max(float(np.abs(np.asarray(v, np.float64)).max()) for v in outs)
    return {"kind": "onnxc", "name": name, "dir": d, "rtol": rtol, "atol": atol}


HAND_BUILT = [ms_norms_activations, ms_diffusion_ops, ms_embed_layer_norm, ms_attention, ms_multihead_attention,
              ms_group_query_attention, ms_rotary_embedding, ms_quant_matmuls, ms_qlinear_pools, ms_grid_sample,
              ms_inverse]


def write(out_dir: str, light_dir: str) -> list:
    import tempfile
    entries = []
    for fn in HAND_BUILT:
        b, oracle = fn()
        m = b.model()  # not checked: onnx knows no schema of SimplifiedLayerNormalization
        entries.append(write_case(out_dir, f"test_{fn.__name__}", m, b.feeds, oracle))
    # Float16 results: onnxruntime rounds its float32 intermediates to float16 at other
    # points, a few float16 steps apart.
    b, oracle = ms_attention_fp16()
    entries.append(write_case(out_dir, "test_ms_attention_fp16", b.model(), b.feeds, oracle, atol=1e-2, rtol=1e-2))
    with tempfile.TemporaryDirectory() as tmp:
        for name, m, feeds, atol in pipelines(tmp):
            entries.append(write_case(out_dir, name, m, feeds, "ort", atol=atol))
        for name, m, feeds in quantized_lstms(tmp):
            # One thread: onnxruntime's threads quantize the hidden state by blocks of rows.
            entries.append(write_case(out_dir, name, m, feeds, "ort", atol=1e-5, threads=1))
        for name, m, feeds in gemm_mlp_static(tmp):
            entries.append(write_case(out_dir, name, m, feeds, "ort", rtol=1e-3,
                                      range_atol=STATIC_RANGE))
        for name, m, feeds in residual_static(tmp):
            atol = max(ZOO_STEPS["qdq"] * output_step(m), 1e-4)
            entries.append(write_case(out_dir, name, m, feeds, "ort", atol=atol, rtol=1e-3))
        for name, m in bert_static(tmp):
            entries.append(write_case(out_dir, name, m, bert_feeds(11), "ort", rtol=1e-3,
                                      range_atol=STATIC_RANGE))
        for name, m, feeds, _ in zoo_quantized(light_dir, tmp):
            fmt = name.rsplit("_", 1)[1]
            if fmt == "dyn":
                entries.append(write_case(out_dir, name, m, feeds, "ort", rtol=1e-3, range_atol=DYN_RANGE))
            else:
                atol = max(ZOO_STEPS[fmt] * output_step(m), 1e-4)
                entries.append(write_case(out_dir, name, m, feeds, "ort", atol=atol, rtol=1e-3))
    return entries
