#!/usr/bin/env python3
"""Differential fuzzing of onnxc against onnxruntime: seeded random small models from a few
generators that aim at onnxc's riskiest rewrites, compiled with `onnxc run` and compared
with onnxruntime (graph optimizations off) on the same random inputs. A case onnxruntime
rejects is skipped; an onnxc error or a mismatch is reported and the model and input are
kept under --keep for reproduction (`onnxc run MODEL INPUT.npy --output-dir OUT`).

Generators:
  views    transposes (any rank, any permutation) read by MatMul as A or B, sometimes also
           a graph output (schedule/views.rs)
  shuffle  channel shuffles (Reshape-Transpose-Reshape) between convs, grouped, not, or
           depthwise (channel gathers into the blocked layout, plane tables of depthwise convs)
  pool     max/average pools of random kernel, stride, dilation, padding, ceil_mode and
           count_include_pad, after a conv (blocked) on 8-24 channels
  conv     convs of random geometry (strided 1x1 ones among them), groups, padding and
           fused activation or residual;
           `winograd` draws 3x3 stride-1 ones with enough channels for Winograd
  softmax  scaled softmaxes (Mul/Div by special scalars) after attention-style matmuls
           (schedule/softmax_scale.rs)
  cnnmix   blocked-layout plumbing: depthwise convs, BatchNorm, residual and per-channel
           broadcast adds, concats of blocked and odd-sized tensors, global pools
  reduce   reductions and ArgMax over random (negative) axes, keepdims either way
  slicing  Slice with negative/clamped bounds and steps, Gather with negative indices, Pad
  matmul   MatMul with 1-D and broadcast operands, Gemm with transposes, alpha/beta and any
           bias shape, then a Softmax over a random axis or a LayerNormalization
  elementwise  fused chains of unary and broadcast binary float ops over special values
  activation  sigmoid, tanh, SiLU and QuickGELU maps (onnxc's 16-lane activation kernel)
  convtranspose  2-D ConvTranspose of random geometry, constant or input weights (GEMM + col2im)
  resize   Resize with constant scales/sizes over every mode and attribute, float and uint8
  rnn      RNN/GRU/LSTM over every attribute onnxruntime implements (sequence_lens, clip,
           activations, peepholes, input_forget, linear_before_reset, layout, directions)
  gridsample  GridSample in every mode, padding mode and align_corners, positions past
           [-1, 1] (also judged by the reference evaluator: onnxruntime's bicubic+border
           clamps taps, not positions)
  topk     TopK over random shapes, axes and k, largest or smallest, float and int values
           with many ties
  quant    QDQ chains (every 8/16-bit type, per axis), DynamicQuantizeLinear into
           MatMulInteger, QLinearMatMul and QLinearConv, onnxruntime's com.microsoft
           QLinear* ops, on inputs with ties and infinities
  control  If on a condition computed from the input (a branch gathering at data-dependent
           indices), Loop with a constant trip count and a condition the body computes
           (if-converted iterations)

Comparison: |onnxc - ort| <= 1e-4 * (|ort| + rms(ort)), with NaN equal to NaN (Winograd's
rounding error is ~3e-5 of the output's RMS). Not part of `make test`; run it after changing
the schedule, layouts or kernels:

    .cache/venv/bin/python tests/fuzz/diff_fuzz.py --cases 200 [--kind conv] [--seed 1]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
F = TensorProto.FLOAT


def vi(name, shape=None):
    return helper.make_tensor_value_info(name, F, shape)


def init(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def views(rng):
    r = int(rng.integers(2, 5))
    shape = [int(v) for v in rng.integers(1, 6, size=r)]
    perm = [int(v) for v in rng.permutation(r)]
    t = [shape[p] for p in perm]
    n = int(rng.integers(1, 7))
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=perm)]
    if rng.random() < 0.5:
        inits = [init("b", rng.standard_normal((t[-1], n)).astype(np.float32))]
        nodes.append(helper.make_node("MatMul", ["t", "b"], ["y"]))
    else:
        batch = [int(rng.integers(1, 3))] if rng.random() < 0.3 else []
        inits = [init("a", rng.standard_normal(batch + [n, t[-2]]).astype(np.float32))]
        nodes.append(helper.make_node("MatMul", ["a", "t"], ["y"]))
    outs = ["y"] + (["t"] if rng.random() < 0.3 else [])
    return nodes, {"x": shape}, outs, inits


def shuffle(rng):
    g = int(rng.choice([2, 3, 4, 8]))
    cpg = int(rng.choice([1, 2, 3, 4, 8, 16, 17]))
    c, hw, b = g * cpg, int(rng.integers(1, 7)), int(rng.integers(1, 3))
    cm = int(rng.choice([8, 16, 24, c]))
    grp = int(rng.choice([1, g])) if cm % g == 0 else 1
    k, stride = int(rng.choice([1, 3])), 1
    if rng.random() < 0.4:
        # ShuffleNet's order: the shuffle feeds a depthwise conv, which reads the planes
        # through a table (any stride, larger planes for the register-blocked kernels).
        cm, grp, k, stride = c, c, int(rng.choice([3, 3, 5])), int(rng.choice([1, 2]))
        hw = int(rng.integers(1, 40))
    inits = [init("w0", rng.standard_normal((c, c, 1, 1)).astype(np.float32)),
             init("w1", rng.standard_normal((cm, c // grp, k, k)).astype(np.float32)),
             init("s1", np.array([b, g, cpg, hw, hw], np.int64)),
             init("s2", np.array([b, c, hw, hw], np.int64))]
    nodes = [helper.make_node("Conv", ["x", "w0"], ["c0"]),
             helper.make_node("Reshape", ["c0", "s1"], ["r1"]),
             helper.make_node("Transpose", ["r1"], ["tr"], perm=[0, 2, 1, 3, 4]),
             helper.make_node("Reshape", ["tr", "s2"], ["r2"]),
             helper.make_node("Conv", ["r2", "w1"], ["y"], pads=[k // 2] * 4, group=grp, strides=[stride] * 2)]
    outs = ["y"] + (["r2"] if rng.random() < 0.3 else [])
    return nodes, {"x": [b, c, hw, hw]}, outs, inits


def pool(rng):
    c, b = int(rng.choice([8, 16, 24])), int(rng.integers(1, 3))
    # 2-D mostly; 1-D (run as 2-D over one row) and 3-D (separably: depth, then the plane).
    nsp = int(rng.choice([1, 2, 2, 2, 3]))
    dims = {1: lambda: [int(rng.integers(1, 60))], 2: lambda: [int(rng.integers(1, 20)), int(rng.integers(1, 40))],
            3: lambda: [int(v) for v in rng.integers(1, 10, size=3)]}[nsp]()
    k = [int(rng.integers(1, 6)) for _ in range(nsp)]
    if nsp == 3 and rng.random() < 0.3:
        k[0] = 1  # X3D's [1, k, k] pools
    attrs = dict(kernel_shape=k, strides=[int(v) for v in rng.integers(1, 4, size=nsp)],
                 pads=[int(rng.integers(0, k[i % nsp])) for i in range(2 * nsp)], ceil_mode=int(rng.integers(0, 2)))
    op = str(rng.choice(["MaxPool", "AveragePool"]))
    if op == "AveragePool":
        attrs["count_include_pad"] = int(rng.integers(0, 2))
    if op == "MaxPool" or rng.random() < 0.5:
        attrs["dilations"] = [int(rng.choice([1, 1, 2])) for _ in range(nsp)]
    # A window larger than the padded input outside ceil_mode: the spec's floor gives no
    # output and onnxc reports an error, onnxruntime computes one (truncating division).
    dil = attrs.get("dilations", [1] * nsp)
    if not attrs["ceil_mode"] and any(
            n + attrs["pads"][i] + attrs["pads"][i + nsp] < (k[i] - 1) * dil[i] + 1 for i, n in enumerate(dims)):
        return pool(rng)
    # Windows with no tap inside the input (dilated windows in the padding): max gives -inf
    # here and -FLT_MAX in onnxruntime, an average without the padding counted NaN (0/0) here
    # and in onnx's reference evaluator and 0 in onnxruntime. The spec is silent.
    if op == "MaxPool" or not attrs["count_include_pad"]:
        for i, n in enumerate(dims):
            kk, s, pb, pe = k[i], attrs["strides"][i], attrs["pads"][i], attrs["pads"][i + nsp]
            span = n + pb + pe - (kk - 1) * dil[i] - 1
            o = (-(-span // s) if attrs["ceil_mode"] else span // s) + 1
            if attrs["ceil_mode"] and (o - 1) * s >= n + pb:
                o -= 1
            if any(all(not 0 <= j * s - pb + t * dil[i] < n for t in range(kk)) for j in range(o)):
                return pool(rng)
    w0 = rng.standard_normal((c, c) + (1,) * nsp).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["t"]), helper.make_node(op, ["t"], ["p"], **attrs),
             helper.make_node("Conv", ["p", "w"], ["y"])]
    return nodes, {"x": [b, c] + dims}, ["y"], [init("w", w0)]


def conv(rng, winograd=False):
    if winograd:
        c, m = int(rng.choice([32, 40, 48, 64])), int(rng.choice([24, 32, 48, 64]))
        h, w, grp = int(rng.integers(4, 44)), int(rng.integers(4, 44)), 1
        k, s, d = [3, 3], [1, 1], [1, 1]
    else:
        c = int(rng.choice([3, 8, 12, 16, 24, 32]))
        # 2-D mostly; 1-D (compiled as 2-D over one row) and 3-D (row-wise im2col, depthwise
        # as 2-D slices).
        nsp = int(rng.choice([1, 2, 2, 2, 3]))
        dims = [int(v) for v in rng.integers(1, {1: 80, 2: 24, 3: 10}[nsp], size=nsp)]
        grp = int(rng.choice([1, 1, 2, 4, c]))
        grp = grp if c % grp == 0 else 1
        m = int(rng.choice([8, 16, 32, 40, 2 * grp]))
        m = m if m % grp == 0 else 2 * grp
        if grp == c and m == c and nsp == 2:
            # Depthwise: planes over several 16-column strips and 8-row register blocks.
            dims = [int(rng.integers(1, 40)), int(rng.integers(1, 60))]
        k = [int(v) for v in rng.integers(1, 6, size=nsp)]
        s = [int(v) for v in rng.integers(1, 4, size=nsp)]
        d = [int(rng.choice([1, 1, 2])) for _ in range(nsp)]
    if winograd:
        nsp, dims = 2, [h, w]
    b = int(rng.integers(1, 3))
    p = [int(rng.integers(0, k[i % nsp] + 1)) for i in range(2 * nsp)]
    if not winograd and rng.random() < 0.15:
        # Strided 1×1 without padding: the pointwise product of the subsampled input
        # (`ConvGeometry::subsampled`).
        k, p = [1] * nsp, [0] * (2 * nsp)
    inits = [init("w0", (rng.standard_normal((c, c) + (1,) * nsp) * 0.5).astype(np.float32)),
             init("w1", (rng.standard_normal((m, c // grp, *k)) * 0.3).astype(np.float32)),
             init("b1", rng.standard_normal(m).astype(np.float32))]
    nodes = [helper.make_node("Conv", ["x", "w0"], ["t"]),
             helper.make_node("Conv", ["t", "w1", "b1"], ["y0"], kernel_shape=k, strides=s, pads=p,
                              dilations=d, group=grp)]
    # (A clip would hide the conv's scale, against which Winograd's rounding is measured.)
    act = str(rng.choice(["Relu", "Add", "none"] if winograd else ["Relu", "Clip", "Add", "none"]))
    if act == "Relu":
        nodes.append(helper.make_node("Relu", ["y0"], ["y"]))
    elif act == "Clip":
        inits += [init("lo", np.float32(0)), init("hi", np.float32(1.5))]
        nodes.append(helper.make_node("Clip", ["y0", "lo", "hi"], ["y"]))
    elif act == "Add":
        nodes.append(helper.make_node("Add", ["y0", "y0"], ["y"]))
    else:
        nodes[-1].output[0] = "y"
    return nodes, {"x": [b, c] + dims}, ["y"], inits


def softmax(rng):
    b, h, s, dh = (int(v) for v in rng.integers(1, 4, size=4))
    s, dh = s * 2, dh * 2
    d = h * dh
    inits = [init("shp", np.array([b, s, h, dh], np.int64)),
             init("wq", rng.standard_normal((d, d)).astype(np.float32)),
             init("wk", rng.standard_normal((d, d)).astype(np.float32)),
             init("sc", np.float32(rng.choice([0.125, 2.0, -0.5, 0.0, np.inf, np.nan, 1e-30, 3e38])))]
    kperm = [0, 2, 3, 1] if rng.random() < 0.7 else [0, 2, 1, 3]
    nodes = [helper.make_node("MatMul", ["x", "wq"], ["q0"]), helper.make_node("MatMul", ["x", "wk"], ["k0"]),
             helper.make_node("Reshape", ["q0", "shp"], ["q1"]), helper.make_node("Reshape", ["k0", "shp"], ["k1"]),
             helper.make_node("Transpose", ["q1"], ["q"], perm=[0, 2, 1, 3]),
             helper.make_node("Transpose", ["k1"], ["k"], perm=kperm)]
    kk = "k"
    if kperm == [0, 2, 1, 3]:
        nodes.append(helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]))
        kk = "kt"
    nodes += [helper.make_node("MatMul", ["q", kk], ["s"]),
              helper.make_node(str(rng.choice(["Mul", "Div"])), ["s", "sc"], ["s2"]),
              helper.make_node("Softmax", ["s2"], ["y"], axis=int(rng.choice([-1, 3])))]
    outs = ["y"] + (["k"] if rng.random() < 0.3 else []) + (["s2"] if rng.random() < 0.3 else [])
    return nodes, {"x": [b, s, d]}, outs, inits


def cnnmix(rng):
    """Blocked-layout CNN plumbing: depthwise convs, BatchNorm, residual adds (sometimes
    broadcast per channel), channel concats of blocked and odd-sized tensors, global pools."""
    c, b = int(rng.choice([8, 16, 24])), int(rng.integers(1, 3))
    h, w = int(rng.integers(1, 12)), int(rng.integers(1, 12))
    extra = int(rng.choice([3, 5, 8, 16]))
    inits = [init("w0", (rng.standard_normal((c, c, 1, 1)) * 0.4).astype(np.float32)),
             init("dw", (rng.standard_normal((c, 1, 3, 3)) * 0.4).astype(np.float32)),
             init("we", (rng.standard_normal((extra, c, 1, 1)) * 0.4).astype(np.float32)),
             init("sc", rng.uniform(0.5, 1.5, c).astype(np.float32)),
             init("bi", rng.standard_normal(c).astype(np.float32)),
             init("mu", rng.standard_normal(c).astype(np.float32)),
             init("va", rng.uniform(0.0, 2.0, c).astype(np.float32)),
             init("cb", rng.standard_normal((1, c, 1, 1)).astype(np.float32))]
    stride = int(rng.choice([1, 2]))
    nodes = [helper.make_node("Conv", ["x", "w0"], ["a"]),
             helper.make_node("Conv", ["a", "dw"], ["d"], group=c, pads=[1, 1, 1, 1], strides=[stride, stride]),
             helper.make_node("BatchNormalization", ["d", "sc", "bi", "mu", "va"], ["n"], epsilon=1e-3),
             helper.make_node("Relu", ["n"], ["r"])]
    res = "r"
    if stride == 1:
        nodes.append(helper.make_node("Add", ["r", "a"], ["s"]))
        res = "s"
    if rng.random() < 0.5:
        nodes.append(helper.make_node("Mul", [res, "cb"], ["m"]))
        res = "m"
    nodes.append(helper.make_node("Conv", [res, "we"], ["e"]))
    nodes.append(helper.make_node("Concat", [res, "e", res], ["cat"], axis=1))
    pool = str(rng.choice(["GlobalAveragePool", "GlobalMaxPool", "none"]))
    outs = ["cat"]
    if pool != "none":
        nodes.append(helper.make_node(pool, ["cat"], ["g"]))
        outs = ["g"] + (["cat"] if rng.random() < 0.5 else [])
    return nodes, {"x": [b, c, h, w]}, outs, inits


def reduce(rng):
    """Reductions over random axes (negative too), keepdims either way, opset-18 axes input."""
    r = int(rng.integers(1, 5))
    shape = [int(v) for v in rng.integers(1, 6, size=r)]
    op = str(rng.choice(["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
                         "ReduceL2", "ReduceLogSumExp", "ReduceSumSquare", "ArgMax"]))
    naxes = int(rng.integers(0, r + 1))
    axes = sorted(set(int(a) - (r if rng.random() < 0.5 else 0) for a in rng.permutation(r)[:naxes]))
    keep = int(rng.integers(0, 2))
    if op == "ArgMax":
        node = helper.make_node(op, ["x"], ["y0"], axis=int(rng.integers(-r, r)), keepdims=keep)
        nodes = [node, helper.make_node("Cast", ["y0"], ["y"], to=F)]
        return nodes, {"x": shape}, ["y"], []
    inits = [init("axes", np.array(axes, np.int64))] if axes else []
    node = helper.make_node(op, ["x"] + (["axes"] if axes else []), ["y"], keepdims=keep)
    return [node], {"x": shape}, ["y"], inits


def slicing(rng):
    """Slice with negative starts/ends/steps and clamped bounds, then Gather with negative
    indices, then Pad (constant/reflect/edge)."""
    r = int(rng.integers(1, 4))
    shape = [int(v) for v in rng.integers(2, 7, size=r)]
    axes = [int(a) for a in rng.permutation(r)[: int(rng.integers(1, r + 1))]]
    starts, ends, steps = [], [], []
    for a in axes:
        n = shape[a]
        step = int(rng.choice([1, 2, -1, -2, 3]))
        starts.append(int(rng.integers(-n - 2, n + 2)))
        ends.append(int(rng.choice([rng.integers(-n - 2, n + 2), 2**62, -2**62])))
        steps.append(step)
    inits = [init("st", np.array(starts, np.int64)), init("en", np.array(ends, np.int64)),
             init("ax", np.array(axes, np.int64)), init("sp", np.array(steps, np.int64))]
    nodes = [helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["s"])]
    outs = ["s"]
    if rng.random() < 0.5:
        gi = rng.integers(-shape[0], shape[0], size=int(rng.integers(1, 4)))
        inits.append(init("gi", gi.astype(np.int64)))
        nodes.append(helper.make_node("Gather", ["x", "gi"], ["g"], axis=0))
        outs.append("g")
    if rng.random() < 0.5:
        mode = str(rng.choice(["constant", "reflect", "edge"]))
        pads = [int(rng.integers(0, 2 if mode == "reflect" else 3)) for _ in range(2 * r)]
        inits.append(init("pd", np.array(pads, np.int64)))
        nodes.append(helper.make_node("Pad", ["x", "pd"], ["p"], mode=mode))
        outs.append("p")
    return nodes, {"x": shape}, outs, inits


def matmul(rng):
    """MatMul with 1-D operands and broadcast batch dims, Gemm with transA/transB, alpha/beta
    and a bias of every broadcastable shape, then a Softmax over a random axis or a
    LayerNormalization over the last."""
    if rng.random() < 0.5:
        m, k, n = (int(v) for v in rng.integers(1, 9, size=3))
        ta, tb = int(rng.integers(0, 2)), int(rng.integers(0, 2))
        cshape = [[n], [1, n], [m, 1], [m, n], [1], []][int(rng.integers(0, 6))]
        inits = [init("b", rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32)),
                 init("c", rng.standard_normal(cshape).astype(np.float32))]
        nodes = [helper.make_node("Gemm", ["x", "b", "c"], ["y0"], transA=ta, transB=tb,
                                  alpha=float(rng.choice([1.0, 0.5, -2.0])), beta=float(rng.choice([1.0, 0.0, 3.0])))]
        xshape, rank, last = ([k, m] if ta else [m, k]), 2, n
    else:
        k = int(rng.integers(1, 9))
        ba = [int(v) for v in rng.integers(1, 4, size=int(rng.integers(0, 3)))]
        bb = [int(rng.choice([1, v])) for v in ba][int(rng.integers(0, len(ba) + 1)):]
        a_vec, b_vec = rng.random() < 0.2, rng.random() < 0.2
        m, n = int(rng.integers(1, 7)), int(rng.integers(1, 7))
        xshape = [k] if a_vec else ba + [m, k]
        bshape = [k] if b_vec else bb + [k, n]
        inits = [init("b", rng.standard_normal(bshape).astype(np.float32))]
        nodes = [helper.make_node("MatMul", ["x", "b"], ["y0"])]
        rank = max(len(xshape) - a_vec, len(bshape) - b_vec)
        last = m if b_vec else n
        if a_vec and b_vec:
            return nodes + [helper.make_node("Neg", ["y0"], ["y"])], {"x": xshape}, ["y"], inits
    axis = int(rng.integers(-rank, rank)) if rank else 0
    if rng.random() < 0.5:
        nodes.append(helper.make_node("Softmax", ["y0"], ["y"], axis=axis))
    else:
        inits.append(init("g", rng.standard_normal(last).astype(np.float32)))
        nodes.append(helper.make_node("LayerNormalization", ["y0", "g"], ["y"], axis=-1, epsilon=1e-5))
    return nodes, {"x": xshape}, ["y", "y0"], inits


# Not ±FLT_MAX: onnxruntime's Softsign of -3.4e38 is not -1 (its reciprocal underflows),
# a divergence in its favour of speed, not a bug here.
SPECIALS = np.array([0.0, -0.0, 1.0, -1.0, 0.5, 1e-30, -1e-30, 88.0, -88.0, 100.0, -100.0, 1e30, -1e30,
                     np.inf, -np.inf, np.nan, 1e37, -1e37, 2.5, -2.5, 0.49999997], np.float32)
QSPECIALS = SPECIALS[~np.isnan(SPECIALS)]
UNARY = ["Abs", "Neg", "Sqrt", "Exp", "Log", "Tanh", "Sigmoid", "Erf", "Floor", "Ceil", "Round", "Relu",
         "Sin", "Cos", "Reciprocal", "Softplus", "Sign", "IsNaN", "IsInf", "LeakyRelu", "Elu", "Selu",
         "HardSigmoid", "Softsign", "Atan", "Sinh", "Cosh", "Asinh", "Gelu", "Mish", "HardSwish"]
BINARY = ["Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "PRelu", "Mod"]


def elementwise(rng):
    """Chains of unary and broadcast binary float ops (fused into one loop by onnxc) on
    inputs mixing normal values with specials: ±0, ±inf, NaN, ±FLT_MAX, exp's overflow
    edges, rounding ties."""
    r = int(rng.integers(1, 4))
    shape = [int(v) for v in rng.integers(1, 9, size=r)]
    inits, nodes, cur, k = [], [], "x", 0
    for _ in range(int(rng.integers(1, 5))):
        k += 1
        if rng.random() < 0.5:
            op = str(rng.choice(UNARY))
            out = f"u{k}"
            node = helper.make_node(op, [cur], [out])
            if op in ("IsNaN", "IsInf"):
                nodes += [node, helper.make_node("Cast", [out], [f"c{k}"], to=F)]
                out = f"c{k}"
            else:
                nodes.append(node)
        else:
            op = str(rng.choice(BINARY))
            bshape = [int(rng.choice([1, d])) for d in shape][int(rng.integers(0, r + 1)):]
            if op == "PRelu":
                bshape = [int(rng.choice([1, d])) for d in shape][1:] if r > 1 else [1]
            other = (rng.standard_normal(bshape) * 2).astype(np.float32)
            if other.size and rng.random() < 0.5:
                other.flat[int(rng.integers(0, other.size))] = rng.choice(SPECIALS)
            inits.append(init(f"b{k}", other))
            out = f"y{k}"
            attrs = {"fmod": 1} if op == "Mod" else {}
            nodes.append(helper.make_node(op, [cur, f"b{k}"] if rng.random() < 0.7 or op == "PRelu"
                                          else [f"b{k}", cur], [out], **attrs))
        cur = out
    nodes.append(helper.make_node("Identity", [cur], ["y"]))
    return nodes, {"x": shape}, ["y"], inits


def activation(rng):
    """Sigmoid, tanh, SiLU (x·sigmoid(x), either operand order), QuickGELU (x·sigmoid(α·x)),
    HardSigmoid and HardSwish (also as x·HardSigmoid(x)) over tensors of any size on inputs
    with specials: the maps onnxc hands to its 16-lane activation kernel
    (`onnxc_activation_f32`), sometimes after a conv."""
    shape = [int(v) for v in rng.integers(1, 12, size=int(rng.integers(1, 5)))]
    inits, nodes = [], []
    x = "x"
    if len(shape) == 4 and rng.random() < 0.3:
        c = shape[1]
        inits.append(init("w", (rng.standard_normal((c, c, 1, 1)) * 0.5).astype(np.float32)))
        nodes.append(helper.make_node("Conv", ["x", "w"], ["t"]))
        x = "t"
    form = str(rng.choice(["sigmoid", "tanh", "silu", "silu_rev", "quick", "hardsigmoid", "hardswish",
                           "x_hardsigmoid"]))
    if form in ("sigmoid", "tanh"):
        nodes.append(helper.make_node(form.capitalize(), [x], ["y"]))
    elif form == "hardsigmoid":
        nodes.append(helper.make_node("HardSigmoid", [x], ["y"], alpha=float(rng.choice([0.2, 1 / 6, 0.5])),
                                      beta=float(rng.choice([0.5, 0.0, 0.3]))))
    elif form == "hardswish":
        nodes.append(helper.make_node("HardSwish", [x], ["y"]))
    elif form == "x_hardsigmoid":
        nodes += [helper.make_node("HardSigmoid", [x], ["s"], alpha=1 / 6),
                  helper.make_node("Mul", [x, "s"] if rng.random() < 0.5 else ["s", x], ["y"])]
    elif form == "quick":
        inits.append(init("a", np.float32(rng.choice([1.702, 0.5, -1.0, 2.0]))))
        nodes += [helper.make_node("Mul", [x, "a"], ["xa"]), helper.make_node("Sigmoid", ["xa"], ["s"]),
                  helper.make_node("Mul", [x, "s"] if rng.random() < 0.5 else ["s", x], ["y"])]
    else:
        nodes += [helper.make_node("Sigmoid", [x], ["s"]),
                  helper.make_node("Mul", [x, "s"] if form == "silu" else ["s", x], ["y"])]
    return nodes, {"x": shape}, ["y"], inits


def convtranspose(rng):
    """ConvTranspose of random 1-D, 2-D or 3-D geometry — kernel, strides, dilations, pads,
    output_padding, groups, auto_pad SAME, batch — with constant weights (packed at compile
    time) or weights as an input (packed at run time), with or without a bias, sometimes
    followed by a Relu: onnxc's GEMM + col2im kernel (`onnxc_conv_transpose_f32`)."""
    grp = int(rng.choice([1, 1, 2]))
    cin, cout = grp * int(rng.integers(1, 9)), grp * int(rng.integers(1, 9))
    nsp = int(rng.choice([1, 2, 2, 3]))
    k = [int(v) for v in rng.integers(1, 5, size=nsp)]
    s = [int(v) for v in rng.integers(1, 4, size=nsp)]
    d = [int(rng.choice([1, 1, 2])) for _ in range(nsp)]
    dims = [int(v) for v in rng.integers(1, {1: 40, 2: 14, 3: 7}[nsp], size=nsp)]
    b = int(rng.integers(1, 3))
    attrs = dict(kernel_shape=k, strides=s, dilations=d, group=grp)
    ext = [(k[i] - 1) * d[i] + 1 for i in range(nsp)]
    # SAME with a kernel extent below the stride: a negative total padding, which onnxruntime
    # clamps (a shorter output) and the spec, the reference evaluator and onnxc do not; the
    # reference cannot judge grouped ConvTransposes, so those geometries are not drawn.
    if rng.random() < 0.2 and all(ext[i] >= s[i] for i in range(nsp)):
        attrs["auto_pad"] = str(rng.choice(["SAME_UPPER", "SAME_LOWER"]))
    else:
        attrs["pads"] = [int(rng.integers(0, ext[i % nsp])) for i in range(2 * nsp)]
        attrs["output_padding"] = [int(rng.integers(0, s[i])) if rng.random() < 0.3 else 0 for i in range(nsp)]
    wt = (rng.standard_normal((cin, cout // grp, *k)) * 0.5).astype(np.float32)
    inits, ins = [], {"x": [b, cin] + dims}
    if rng.random() < 0.7:
        inits.append(init("w", wt))
    else:
        ins["w"] = list(wt.shape)
    args = ["x", "w"]
    if rng.random() < 0.6:
        inits.append(init("bias", rng.standard_normal(cout).astype(np.float32)))
        args.append("bias")
    nodes = [helper.make_node("ConvTranspose", args, ["y0"], **attrs)]
    if rng.random() < 0.4:
        nodes.append(helper.make_node("Relu", ["y0"], ["y"]))
    else:
        nodes[-1].output[0] = "y"
    return nodes, ins, ["y"], inits


def resize(rng):
    """Resize with constant scales or sizes (onnxc computes its taps at compile time) of
    every mode, coordinate transformation, nearest rounding, axes, keep_aspect_ratio_policy,
    antialias, exclude_outside and extrapolation, sometimes after a conv (blocked layout),
    sometimes over uint8 (rounded and saturated)."""
    r = int(rng.choice([3, 4, 4, 4, 5]))
    shape = [int(rng.integers(1, 3)), int(rng.choice([1, 3, 8]))] + [int(rng.integers(1, 12)) for _ in range(r - 2)]
    mode = str(rng.choice(["nearest", "linear", "cubic"]))
    attrs = dict(mode=mode, coordinate_transformation_mode=str(rng.choice(
        ["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
         "tf_crop_and_resize"])))
    if mode == "nearest":
        attrs["nearest_mode"] = str(rng.choice(["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]))
    else:
        if rng.random() < 0.3:
            attrs["antialias"] = 1
        if mode == "cubic":
            attrs["cubic_coeff_a"] = float(rng.choice([-0.75, -0.5]))
            attrs["exclude_outside"] = int(rng.integers(0, 2))
    axes = list(range(r))
    if rng.random() < 0.3:
        axes = [int(a) for a in rng.permutation(np.arange(2, r))]
        # Non-negative: onnxruntime 1.31 resizes the wrong axes for negative ones (and onnx's
        # reference evaluator fails on them); onnxc normalizes them like every axes list.
        attrs["axes"] = axes
    inits = []
    ins = ["t", "", ""]
    if attrs["coordinate_transformation_mode"] == "tf_crop_and_resize":
        lo = rng.uniform(-0.3, 0.5, size=len(axes))
        hi = lo + rng.uniform(0.2, 1.2, size=len(axes))
        inits.append(init("roi", np.concatenate([lo, hi]).astype(np.float32)))
        ins[1] = "roi"
        attrs["extrapolation_value"] = float(rng.choice([0.0, -1.5]))
    if rng.random() < 0.5:
        sc = [float(rng.choice([0.5, 0.6, 0.75, 1.0, 1.5, 2.0, 3.0, 1.0 / 3.0])) if a >= 2 else 1.0 for a in axes]
        inits.append(init("scales", np.array(sc, np.float32)))
        ins[2] = "scales"
    else:
        sz = [int(rng.integers(1, 2 * shape[a] + 3)) if a >= 2 else shape[a] for a in axes]
        inits.append(init("sizes", np.array(sz, np.int64)))
        ins.append("sizes")
        if rng.random() < 0.3:
            attrs["keep_aspect_ratio_policy"] = str(rng.choice(["not_larger", "not_smaller"]))
    nodes = []
    src = "x"
    if r == 4 and rng.random() < 0.3:
        inits.append(init("w", rng.standard_normal((shape[1], shape[1], 1, 1)).astype(np.float32)))
        nodes.append(helper.make_node("Conv", ["x", "w"], ["c"]))
        src = "c"
    u8 = rng.random() < 0.2
    if u8:
        nodes += [helper.make_node("Mul", [src, "k50"], ["m"]), helper.make_node("Add", ["m", "k128"], ["a"]),
                  helper.make_node("Clip", ["a", "k0", "k255"], ["cl"]),
                  helper.make_node("Cast", ["cl"], ["t"], to=TensorProto.UINT8)]
        inits += [init(n, np.array(v, np.float32)) for n, v in [("k50", 50), ("k128", 128), ("k0", 0), ("k255", 255)]]
    else:
        nodes.append(helper.make_node("Identity", [src], ["t"]))
    nodes.append(helper.make_node("Resize", ins, ["rs"], **attrs))
    # uint8 results may differ by one where the exact value is a tie (x.5): onnxc's weights
    # match the reference's to an ulp, not bit for bit. Outputs named *_u8 allow that.
    y = "y_u8" if u8 else "y"
    nodes.append(helper.make_node("Cast", ["rs"], [y], to=TensorProto.FLOAT) if u8
                 else helper.make_node("Identity", ["rs"], [y]))
    return nodes, {"x": shape}, [y], inits


def rnn(rng):
    """RNN/GRU/LSTM with every attribute onnxruntime implements (directions, layout,
    initial states, peepholes, sequence_lens of varied lengths, clip, custom activations
    with alpha/beta, input_forget, linear_before_reset); weights as initializers."""
    op = str(rng.choice(["RNN", "GRU", "LSTM"]))
    g = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    seq, batch, inp, hid = int(rng.integers(1, 6)), int(rng.integers(1, 4)), int(rng.integers(1, 6)), int(rng.integers(1, 6))
    direction = str(rng.choice(["forward", "reverse", "bidirectional"]))
    dirs = 2 if direction == "bidirectional" else 1
    layout = int(rng.integers(0, 2))
    attrs = dict(hidden_size=hid, direction=direction, layout=layout)
    f32 = lambda *s: (rng.standard_normal(s) * 0.5).astype(np.float32)
    inits = [init("W", f32(dirs, g * hid, inp)), init("R", f32(dirs, g * hid, hid))]
    ins = ["x", "W", "R", "", "", "", "", ""]
    if rng.random() < 0.7:
        inits.append(init("B", f32(dirs, 2 * g * hid))); ins[3] = "B"
    if rng.random() < 0.5:
        inits.append(init("L", rng.integers(0, seq + 1, size=batch).astype(np.int32))); ins[4] = "L"
    state = [dirs, batch, hid] if layout == 0 else [batch, dirs, hid]
    if rng.random() < 0.5:
        inits.append(init("H0", f32(*state))); ins[5] = "H0"
    if op == "LSTM":
        if rng.random() < 0.5:
            inits.append(init("C0", f32(*state))); ins[6] = "C0"
        if rng.random() < 0.5:
            inits.append(init("P", f32(dirs, 3 * hid))); ins[7] = "P"
        if rng.random() < 0.3:
            attrs["input_forget"] = 1
    if op == "GRU":
        attrs["linear_before_reset"] = int(rng.integers(0, 2))
    if rng.random() < 0.3:
        attrs["clip"] = float(rng.choice([0.5, 1.0, 3.0]))
    if rng.random() < 0.3:
        n = {"RNN": 1, "GRU": 2, "LSTM": 3}[op]
        pool = ["Relu", "Tanh", "Sigmoid", "Affine", "LeakyRelu", "ThresholdedRelu", "ScaledTanh", "HardSigmoid",
                "Elu", "Softsign", "Softplus"]
        attrs["activations"] = [str(rng.choice(pool)) for _ in range(n * dirs)]
        if rng.random() < 0.5:
            attrs["activation_alpha"] = [float(v) for v in rng.uniform(0.1, 1.5, size=n * dirs)]
            attrs["activation_beta"] = [float(v) for v in rng.uniform(-0.5, 0.5, size=n * dirs)]
    while ins and ins[-1] == "":
        ins.pop()
    outs = ["y", "yh"] + (["yc"] if op == "LSTM" else [])
    nodes = [helper.make_node(op, ins, outs, **attrs)]
    xs = [seq, batch, inp] if layout == 0 else [batch, seq, inp]
    return nodes, {"x": xs}, outs, inits


def gridsample(rng):
    """GridSample (opset 16's names) in every mode, padding mode and align_corners over
    random positions scaled past [-1, 1] (reflection bounces), sometimes after a conv."""
    c = int(rng.choice([1, 3, 8]))
    shape = [int(rng.integers(1, 3)), c, int(rng.integers(1, 9)), int(rng.integers(1, 9))]
    gshape = [shape[0], int(rng.integers(1, 7)), int(rng.integers(1, 7)), 2]
    nodes, inits = [], [init("gscale", np.array(rng.choice([0.5, 1.0, 1.5, 3.0]), np.float32))]
    src = "x"
    if rng.random() < 0.3:
        inits.append(init("w", rng.standard_normal((c, c, 3, 3)).astype(np.float32)))
        nodes.append(helper.make_node("Conv", ["x", "w"], ["cv"], pads=[1, 1, 1, 1]))
        src = "cv"
    nodes.append(helper.make_node("Mul", ["grid", "gscale"], ["gs"]))
    nodes.append(helper.make_node(
        "GridSample", [src, "gs"], ["y"], mode=str(rng.choice(["bilinear", "nearest", "bicubic"])),
        padding_mode=str(rng.choice(["zeros", "border", "reflection"])), align_corners=int(rng.integers(0, 2))))
    return nodes, {"x": shape, "grid": gshape}, ["y"], inits


def topk(rng):
    """TopK over random shapes and axes, largest and smallest, on values with many ties (the
    order is value, then position), float or cast to int32/int64, k from 0 to the axis."""
    r = int(rng.integers(1, 4))
    shape = [int(rng.integers(1, 40 if d == r - 1 else 5)) for d in range(r)]
    axis = int(rng.integers(-r, r))
    n = shape[axis]
    k = int(rng.integers(0, n + 1))
    nodes = [helper.make_node("Mul", ["x", "k4"], ["m"]), helper.make_node("Floor", ["m"], ["q"])]
    inits = [init("k4", np.array(4.0, np.float32)), init("k", np.array([k], np.int64))]
    src = "q"
    cast = rng.choice([None, TensorProto.INT32, TensorProto.INT64])
    if cast is not None:
        nodes.append(helper.make_node("Cast", ["q"], ["qi"], to=int(cast)))
        src = "qi"
    nodes.append(helper.make_node("TopK", [src, "k"], ["v", "i"], axis=axis, largest=int(rng.integers(0, 2))))
    vals = "v"
    if cast is not None:
        nodes.append(helper.make_node("Cast", ["v"], ["vf"], to=TensorProto.FLOAT))
        vals = "vf"
    nodes.append(helper.make_node("Cast", ["i"], ["if"], to=TensorProto.FLOAT))
    return nodes, {"x": shape}, ["if", vals], inits


def control(rng):
    """If on a condition computed from the input (both branches elementwise chains) and Loop
    with a constant trip count whose condition the body computes from its carried value
    (if-converted iterations)."""
    shape = [int(rng.integers(1, 4)), int(rng.integers(1, 6))]

    def chain(tag, src, out):
        ops = [str(rng.choice(["Tanh", "Sigmoid", "Abs", "Neg", "Relu"])) for _ in range(int(rng.integers(1, 4)))]
        nodes, cur = [], src
        for j, op in enumerate(ops):
            nxt = out if j == len(ops) - 1 else f"{tag}{j}"
            nodes.append(helper.make_node(op, [cur], [nxt]))
            cur = nxt
        return nodes
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s", "thr"], ["c"])]
    inits = [init("thr", np.array(rng.normal(), np.float32))]
    # The then-branch also gathers at data-dependent (checked) indices.
    then_nodes = chain("t", "x", "yt0") + [
        helper.make_node("ArgMax", ["x"], ["am"], axis=1, keepdims=1),
        helper.make_node("GatherElements", ["x", "am"], ["ge"], axis=1),
        helper.make_node("Add", ["yt0", "ge"], ["yt"])]
    then_g = helper.make_graph(then_nodes, "then", [], [vi("yt", shape)])
    else_g = helper.make_graph(chain("e", "x", "ye"), "else", [], [vi("ye", shape)])
    nodes.append(helper.make_node("If", ["c"], ["y_if"], then_branch=then_g, else_branch=else_g))
    # Loop: y <- f(y) * 1.3 + 0.2 while max|y| < limit, at most `trip` times.
    body_nodes = chain("b", "y_in", "f") + [
        helper.make_node("Mul", ["f", "g13"], ["g"]), helper.make_node("Add", ["g", "g02"], ["y_out"]),
        helper.make_node("Abs", ["y_out"], ["ay"]), helper.make_node("ReduceMax", ["ay"], ["mx"], keepdims=0),
        helper.make_node("Less", ["mx", "lim"], ["go"])]
    body = helper.make_graph(
        body_nodes, "body",
        [helper.make_tensor_value_info("it", TensorProto.INT64, []), helper.make_tensor_value_info("cin", TensorProto.BOOL, []),
         vi("y_in", shape)],
        [helper.make_tensor_value_info("go", TensorProto.BOOL, []), vi("y_out", shape)],
        [init("g13", np.array(1.3, np.float32)), init("g02", np.array(0.2, np.float32)),
         init("lim", np.array(rng.uniform(0.5, 4.0), np.float32))])
    inits += [init("trip", np.array(int(rng.integers(0, 8)), np.int64)), init("true", np.array(True))]
    nodes.append(helper.make_node("Loop", ["trip", "true", "x"], ["y_loop"], body=body))
    return nodes, {"x": shape}, [("y_if", shape), ("y_loop", shape)], inits


# Generators whose cases may also be judged by onnx's reference evaluator.
# ConvTranspose: with auto_pad SAME and a kernel extent below the stride the spec's total
# padding is negative (the output is longer than the full result, zeros at the end);
# onnxruntime clamps it to 0 and gives a shorter output, the reference evaluator and onnxc
# follow the spec. Quantized products: onnxruntime's AVX2 kernel (no VNNI: Zen 3) saturates
# pairs of full-range uint8 x int8 products to int16 (`vpmaddubsw`), where onnxc and the
# reference sum exactly.
SECOND_ORACLE = {"resize", "gridsample", "convtranspose", "quant"}


def for_reference(kind: str, m: onnx.ModelProto) -> onnx.ModelProto:
    """The model as onnx's reference evaluator runs it: its GridSample knows only opset 20's
    mode names (linear, cubic), also for opset 16 models."""
    if kind == "gridsample":
        m = onnx.ModelProto.FromString(m.SerializeToString())
        for n in m.graph.node:
            for a in n.attribute:
                if a.name == "mode":
                    a.s = {b"bilinear": b"linear", b"bicubic": b"cubic"}.get(a.s, a.s)
    return m

def einsum(rng):
    """Two-operand Einsum with random labels: batch, row, column and contracted labels in
    random orders per operand and in the output (onnxc runs these as a batched MatMul with
    transposes, or the transposed reading of an operand), sometimes a label summed within
    one operand or a size-1 dim against a larger one (the general reduction), sometimes
    the attention forms `bqhd,bkhd->bhqk` / `bhqk,bkhd->bqhd`."""
    if rng.random() < 0.25:
        b, q, k, h, d = (int(v) for v in rng.integers(1, 7, size=5))
        if rng.random() < 0.5:
            eq, sa, sb = "bqhd,bkhd->bhqk", [b, q, h, d], [b, k, h, d]
        else:
            eq, sa, sb = "bhqk,bkhd->bqhd", [b, h, q, k], [b, k, h, d]
    else:
        kinds = {"batch": int(rng.integers(0, 3)), "row": int(rng.integers(0, 3)),
                 "col": int(rng.integers(0, 3)), "red": int(rng.integers(0, 3))}
        letters = iter("abcdefghijklmnop")
        lab = {kind: [next(letters) for _ in range(n)] for kind, n in kinds.items()}
        size = {c: int(rng.integers(1, 6)) for cs in lab.values() for c in cs}
        a = lab["batch"] + lab["row"] + lab["red"]
        bl = lab["batch"] + lab["red"] + lab["col"]
        o = lab["batch"] + lab["row"] + lab["col"]
        if rng.random() < 0.15:
            c = next(letters)  # summed within A only
            size[c] = int(rng.integers(1, 4))
            a.append(c)
        for t in (a, bl, o):
            rng.shuffle(t)
        sa, sb = [size[c] for c in a], [size[c] for c in bl]
        if rng.random() < 0.1 and bl:
            sb[int(rng.integers(0, len(sb)))] = 1  # a size-1 dim broadcast against A's
        eq = "".join(a) + "," + "".join(bl) + "->" + "".join(o)
    inits = [init("w", rng.standard_normal(sb).astype(np.float32))]
    nodes = [helper.make_node("Einsum", ["x", "w"], ["y0"], equation=eq),
             helper.make_node("Neg", ["y0"], ["y"])]
    return nodes, {"x": sa}, ["y"], inits


def quant(rng):
    """Quantized graphs: QDQ chains (QuantizeLinear to uint8/int8/uint16/int16, per tensor or
    per axis, with or without a zero point, then DequantizeLinear, an activation or an add
    in float and requantization: the maps onnxc computes in float rather than through the
    integer round trip), DynamicQuantizeLinear into MatMulInteger (the float32 GEMM plan
    for a run-time zero point), QLinearMatMul and QLinearConv. Inputs carry infinities,
    huge values and exact rounding ties; NaN is left out (its integer conversion is
    implementation-defined). Requantized results may differ by one quantum where float
    arithmetic lands on a tie; outputs named *_u8 allow that."""
    form = str(rng.choice(["qdq", "qdq", "dynamic", "qlinear_matmul", "qlinear_conv", "contrib"]))
    inits, nodes = [], []
    u = TensorProto.UINT8
    if form == "qdq":
        shape = [int(v) for v in rng.integers(1, 9, size=int(rng.integers(1, 5)))]
        if rng.random() < 0.4:  # large enough for a lookup table (schedule/lut.rs)
            shape = [1, int(rng.integers(1, 9)), int(rng.integers(8, 40)), int(rng.integers(8, 40))]
        qt = rng.choice([TensorProto.UINT8, TensorProto.INT8, TensorProto.UINT16, TensorProto.INT16])
        npt = {TensorProto.UINT8: np.uint8, TensorProto.INT8: np.int8, TensorProto.UINT16: np.uint16,
               TensorProto.INT16: np.int16}[qt]
        info = np.iinfo(npt)
        axis = None
        if len(shape) > 1 and rng.random() < 0.3:
            axis = int(rng.integers(-len(shape), len(shape)))
        n = shape[axis] if axis is not None else None
        sc = np.float32(rng.choice([0.125, 0.02, 1 / 3, 0.25, 1e-3, 7.0]))
        scale = (sc * rng.uniform(0.5, 2, size=n)).astype(np.float32) if n else np.array(sc, np.float32)
        zp = rng.integers(info.min, int(info.max) + 1, size=n).astype(npt) if n else np.array(
            int(rng.integers(info.min, int(info.max) + 1)), npt)
        attrs = {"axis": axis} if axis is not None else {}
        inits += [init("s", scale), init("z", zp)]
        with_zp = rng.random() < 0.8
        qin = ["x", "s", "z"] if with_zp else ["x", "s"]
        dqin = ["q", "s", "z"] if with_zp else ["q", "s"]
        nodes += [helper.make_node("QuantizeLinear", qin, ["q"], **attrs),
                  helper.make_node("DequantizeLinear", dqin, ["dq"], **attrs),
                  helper.make_node("Cast", ["q"], ["qf"], to=F)]
        outs = ["qf", "dq"]
        act = str(rng.choice(["none", "relu", "sigmoid", "silu", "tanh", "softplus", "add"]))
        if act != "none":
            # Its own QDQ pair (dq is a graph output, materialized): the fused map is then
            # a function of the quantized value, tabulated when large enough.
            nodes += [helper.make_node("QuantizeLinear", qin, ["qa"], **attrs),
                      helper.make_node("DequantizeLinear", ["qa"] + dqin[1:], ["dqa"], **attrs)]
            if act == "relu":
                nodes.append(helper.make_node("Relu", ["dqa"], ["a"]))
            elif act in ("sigmoid", "tanh", "softplus"):
                nodes.append(helper.make_node(act.capitalize(), ["dqa"], ["a"]))
            elif act == "silu":
                nodes += [helper.make_node("Sigmoid", ["dqa"], ["sg"]), helper.make_node("Mul", ["dqa", "sg"], ["a"])]
            else:
                nodes.append(helper.make_node("Add", ["dqa", "dqa"], ["a"]))
            s2 = np.array(np.float32(rng.choice([0.01, 0.125, 1 / 255])), np.float32)
            z2 = np.array(int(rng.integers(0, 256)), np.uint8)
            inits += [init("s2", s2), init("z2", z2)]
            nodes += [helper.make_node("QuantizeLinear", ["a", "s2", "z2"], ["q2"]),
                      helper.make_node("Cast", ["q2"], ["r_u8"], to=F)]
            outs.append("r_u8")
        return nodes, {"x": shape}, outs, inits, float(sc)
    if form == "dynamic":
        m, k, n = (int(v) for v in rng.integers(1, 40, size=3))
        signed = rng.random() < 0.5
        wt = np.int8 if signed else np.uint8
        w = rng.integers(-128 if signed else 0, 128 if signed else 256, size=(k, n)).astype(wt)
        per_col = rng.random() < 0.4
        wz = np.asarray(rng.integers(-5 if signed else 120, 6 if signed else 136, size=n if per_col else None), wt)
        ws = np.asarray(rng.uniform(0.001, 0.05, size=n if per_col else None), np.float32)
        inits += [init("w", w), init("wz", np.asarray(wz)), init("ws", np.asarray(ws))]
        nodes += [helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
                  helper.make_node("MatMulInteger", ["xq", "w", "xz", "wz"], ["acc"]),
                  helper.make_node("Cast", ["acc"], ["accf"], to=F),
                  helper.make_node("Mul", ["xs", "ws"], ["sc"]),
                  helper.make_node("Mul", ["accf", "sc"], ["y"]),
                  helper.make_node("Cast", ["xq"], ["xq_u8"], to=F),
                  helper.make_node("Cast", ["xz"], ["xz_u8"], to=F)]
        # Finite inputs only (tie 0): an infinite one makes the scale infinite and the zero
        # point NaN, whose conversion is implementation-defined.
        return nodes, {"x": [m, k]}, ["y", "xq_u8", "xz_u8", "xs"], inits, 0.0
    if form == "contrib":
        # onnxruntime's com.microsoft QOperator ops on a quantized input and a broadcast
        # constant: its x86 kernels approximate QLinearAdd in fixed point (off by one).
        shape = [1, int(rng.integers(1, 9)), int(rng.integers(1, 30)), int(rng.integers(1, 30))]
        signed = rng.random() < 0.3
        qt, lo, hi = (np.int8, -128, 128) if signed else (np.uint8, 0, 256)
        sc = lambda: np.array(np.float32(rng.choice([0.01, 0.02, 0.05, 1 / 256, 0.1])), np.float32)
        zp = lambda: np.array(int(rng.integers(lo // 2, hi // 2)), qt)
        inits += [init("xs", sc()), init("xz", zp()), init("bs", sc()), init("bz", zp()), init("ys", sc()),
                  init("yz", zp()), init("b", rng.integers(lo, hi, size=[shape[1], 1, 1]).astype(qt))]
        ms = dict(domain="com.microsoft")
        nodes.append(helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]))
        op = str(rng.choice(["QLinearAdd", "QLinearMul", "QLinearSigmoid", "QLinearLeakyRelu",
                             "QLinearGlobalAveragePool", "QLinearConcat"]))
        if op in ("QLinearAdd", "QLinearMul"):
            ins = ["xq", "xs", "xz", "b", "bs", "bz", "ys", "yz"] if rng.random() < 0.5 else \
                  ["b", "bs", "bz", "xq", "xs", "xz", "ys", "yz"]
            nodes.append(helper.make_node(op, ins, ["yq"], **ms))
        elif op == "QLinearConcat":
            nodes.append(helper.make_node(op, ["ys", "yz", "xq", "xs", "xz", "xq", "ys", "yz"], ["yq"], axis=1, **ms))
        elif op == "QLinearLeakyRelu":
            nodes.append(helper.make_node(op, ["xq", "xs", "xz", "ys", "yz"], ["yq"], alpha=0.1, **ms))
        else:
            nodes.append(helper.make_node(op, ["xq", "xs", "xz", "ys", "yz"], ["yq"], **ms))
        nodes.append(helper.make_node("Cast", ["yq"], ["y_u8"], to=F))
        return nodes, {"x": shape}, ["y_u8"], inits, None
    # QLinearMatMul / QLinearConv on uint8 activations and uint8 or int8 weights.
    xs, xz = np.float32(rng.choice([0.02, 0.05, 0.125])), np.uint8(rng.integers(100, 156))
    signed = rng.random() < 0.5
    wt = np.int8 if signed else np.uint8
    ys, yz = np.float32(rng.choice([0.05, 0.2, 0.5])), np.uint8(rng.integers(0, 256))
    inits += [init("xs", np.array(xs)), init("xz", np.array(xz)), init("ys", np.array(ys)), init("yz", np.array(yz))]
    nodes.append(helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]))
    if form == "qlinear_matmul":
        m, k, n = (int(v) for v in rng.integers(1, 40, size=3))
        w = rng.integers(-128 if signed else 0, 128 if signed else 256, size=(k, n)).astype(wt)
        inits += [init("w", w), init("wsc", np.array(np.float32(rng.uniform(0.002, 0.02)))),
                  init("wz", np.array(0 if signed else int(rng.integers(120, 136)), wt))]
        nodes.append(helper.make_node("QLinearMatMul", ["xq", "xs", "xz", "w", "wsc", "wz", "ys", "yz"], ["yq"]))
        shape = [m, k]
    else:
        c, o = int(rng.integers(1, 17)), int(rng.integers(1, 17))
        kh = int(rng.choice([1, 3]))
        h, wd = (int(v) for v in rng.integers(kh, 12, size=2))
        w = rng.integers(-128 if signed else 0, 128 if signed else 256, size=(o, c, kh, kh)).astype(wt)
        per_ch = rng.random() < 0.5
        wsc = np.asarray(rng.uniform(0.002, 0.02, size=o if per_ch else None), np.float32)
        wz = np.zeros(o if per_ch else (), wt) if signed else np.full(o if per_ch else (), 128, wt)
        bias = rng.integers(-2000, 2000, size=o).astype(np.int32)
        inits += [init("w", w), init("wsc", np.asarray(wsc)), init("wz", np.asarray(wz)), init("b", bias)]
        nodes.append(helper.make_node("QLinearConv", ["xq", "xs", "xz", "w", "wsc", "wz", "ys", "yz", "b"], ["yq"],
                                      pads=[kh // 2] * 4, strides=[int(rng.choice([1, 2]))] * 2))
        shape = [1, c, h, wd]
    nodes.append(helper.make_node("Cast", ["yq"], ["y_u8"], to=F))
    return nodes, {"x": shape}, ["y_u8"], inits, None


GENERATORS = {"views": views, "einsum": einsum, "shuffle": shuffle, "pool": pool, "conv": conv,
              "winograd": lambda rng: conv(rng, winograd=True), "softmax": softmax,
              "cnnmix": cnnmix, "reduce": reduce, "slicing": slicing, "matmul": matmul,
              "elementwise": elementwise, "activation": activation,
              "convtranspose": convtranspose, "resize": resize, "rnn": rnn, "gridsample": gridsample,
              "topk": topk, "control": control, "quant": quant}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=100, help="models per generator")
    ap.add_argument("--kind", default="all", help=f"one of {', '.join(GENERATORS)} or all")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--onnxc", default=os.path.join(ROOT, "target", "release", "onnxc"))
    ap.add_argument("--keep", default=os.path.join(ROOT, ".cache", "fuzz-failures"))
    a = ap.parse_args()
    kinds = list(GENERATORS) if a.kind == "all" else a.kind.split(",")
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 4
    bad = 0
    np.seterr(all="ignore")  # inf - inf and overflows in the comparison are expected
    with tempfile.TemporaryDirectory(prefix="onnxc-fuzz-") as work:
        for kind in kinds:
            rng = np.random.default_rng([a.seed, zlib_crc(kind)])
            ran = 0
            for i in range(a.cases):
                nodes, ins, outs, inits, *tie = GENERATORS[kind](rng)
                # An output is a name, or (name, shape) where inference cannot give the shape
                # (If and Loop outputs).
                declared = [vi(o) if isinstance(o, str) else vi(*o) for o in outs]
                outs = [o if isinstance(o, str) else o[0] for o in outs]
                g = helper.make_graph(nodes, kind, [vi(n, s) for n, s in ins.items()], declared, inits)
                # Opset 21 for quantization: its QuantizeLinear takes 16-bit types.
                contrib = any(n.domain == "com.microsoft" for n in nodes)
                m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21 if kind == "quant" else 19)]
                                      + ([helper.make_opsetid("com.microsoft", 1)] if contrib else []))
                m.ir_version = 9
                try:
                    # onnx knows no com.microsoft schemas to infer shapes with.
                    onnx.checker.check_model(m if contrib else onnx.shape_inference.infer_shapes(m, strict_mode=True))
                except Exception:
                    continue
                # Output shapes stay undeclared: onnx's shape inference over-counts some
                # ceil_mode pools, which onnxc would (rightly) report as a mismatch.
                feeds = {n: rng.standard_normal(s).astype(np.float32) for n, s in ins.items()}
                if kind in ("elementwise", "activation"):
                    for v in feeds.values():
                        mask = rng.random(v.shape) < 0.3
                        v[mask] = rng.choice(SPECIALS, size=int(mask.sum()))
                if kind == "quant":
                    for v in feeds.values():
                        v *= 4
                        mask = rng.random(v.shape) < 0.2
                        specials = QSPECIALS if tie[0] != 0.0 else QSPECIALS[np.isfinite(QSPECIALS)]
                        v[mask] = rng.choice(specials, size=int(mask.sum()))
                        if tie and tie[0]:  # exact rounding ties of x / scale
                            mask = rng.random(v.shape) < 0.2
                            v[mask] = (rng.integers(-300, 300, size=int(mask.sum())) + 0.5) * np.float32(tie[0])
                try:
                    want = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)
                except Exception:
                    continue
                # Where onnxruntime departs from the spec (Resize's roi on non-spatial axes,
                # for one), onnx's reference evaluator is the second oracle: a case passes
                # when onnxc matches either.
                oracles = [want]
                if kind in SECOND_ORACLE:
                    ref_feeds = feeds
                    if kind == "quant" and m.graph.node[0].op_type == "QuantizeLinear":
                        # The reference casts x / scale to int32 before it saturates, so ±inf
                        # (and magnitudes past 2^31 steps) wrap; ±1e6 saturates as they must.
                        ref_feeds = {n: np.clip(v, -1e6, 1e6) for n, v in feeds.items()}
                    try:
                        oracles.append(ReferenceEvaluator(for_reference(kind, m)).run(None, ref_feeds))
                    except Exception:
                        pass
                ran += 1
                path = os.path.join(work, "m.onnx")
                onnx.save(m, path)
                args = []
                for n, v in feeds.items():
                    np.save(os.path.join(work, f"{n}.npy"), v)
                    args.append(f"{n}={os.path.join(work, n + '.npy')}")
                out = os.path.join(work, "out")
                problem = None
                try:
                    # A hang is a failure too (the hardening limit: 20 s of compile and run).
                    r = subprocess.run([a.onnxc, "run", path, *args, "--output-dir", out], capture_output=True,
                                       text=True, timeout=20)
                except subprocess.TimeoutExpired:
                    r = None
                    problem = "onnxc run took more than 20 s"
                if r is None:
                    pass
                elif r.returncode != 0:
                    problem = "onnxc error: " + r.stderr.strip()[:300]
                else:
                    got_all = [numpy_helper.to_array(onnx.load_tensor(os.path.join(out, f"output_{k}.pb")))
                               for k in range(len(outs))]
                    atols = [1.0 if o.endswith("_u8") else 0.0 for o in outs]
                    want = min(oracles, key=lambda w: sum(not close(g, b, t) for g, b, t in zip(got_all, w, atols)))
                    for k, (o, b) in enumerate(zip(outs, want)):
                        got = got_all[k]
                        ok = close(got, b, atols[k])
                        if not ok:
                            err = np.nanmax(np.abs(got - b)) if got.shape == b.shape and b.size else "shape"
                            problem = f"output '{o}' differs: shapes {got.shape}/{b.shape}, max error {err}"
                            break
                if problem:
                    bad += 1
                    d = os.path.join(a.keep, f"{kind}_{a.seed}_{i}")
                    os.makedirs(d, exist_ok=True)
                    onnx.save(m, os.path.join(d, "model.onnx"))
                    for n, v in feeds.items():
                        np.save(os.path.join(d, f"{n}.npy"), v)
                    print(f"{kind} case {i}: {problem} (kept in {d})", flush=True)
            print(f"{kind}: {ran} cases run", flush=True)
    print(f"{bad} failing case(s)")
    return 1 if bad else 0


def close(got, b, atol=0.0) -> bool:
    """|got - b| <= atol + 1e-4 * (|b| + rms(b)), NaN equal to NaN, shapes equal."""
    if got.shape != b.shape:
        return False
    finite = b[np.isfinite(b)]
    rms = float(np.sqrt(np.mean(finite.astype(np.float64) ** 2))) if finite.size else 0.0
    return bool(np.all(np.isnan(got) == np.isnan(b))) and bool(np.all(
        np.where(np.isnan(b), True, (got == b) | (np.abs(got - b) <= atol + 1e-4 * (np.abs(b) + rms)))))


def zlib_crc(s: str) -> int:
    import zlib
    return zlib.crc32(s.encode())


if __name__ == "__main__":
    sys.exit(main())
