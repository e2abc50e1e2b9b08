"""Reference implementations of onnxruntime's quantized contrib ops (domain com.microsoft)
for onnx's ReferenceEvaluator (`new_ops`), from the formulas of onnxruntime's operator
documentation, evaluated left to right in float32 as onnx's reference QuantizeLinear
divides in the scale's precision (simple scale ratios put many values exactly on rounding
ties, so the precision decides them): onnxruntime's own x86 kernels approximate some of
these in fixed point (QLinearAdd's AVX2 path), off by one at some values, so they cannot be
the oracle for exact 8-bit results."""
from __future__ import annotations

import numpy as np
from onnx.reference.op_run import OpRun


F = np.float32


def _zp(z):
    return F(0) if z is None else F(z.reshape(()))


def _deq(x, s, z):
    """s · (x − z) in float32."""
    return F(s.reshape(())) * (x.astype(F) - _zp(z))


def _q(v, s, z, dtype):
    """round(v / s) + z in float32, half to even, saturated."""
    info = np.iinfo(dtype)
    r = np.rint(v.astype(F) / F(s.reshape(()))) + _zp(z)
    return np.clip(r, info.min, info.max).astype(dtype)


class QLinearAdd(OpRun):
    op_domain = "com.microsoft"

    def _run(self, a, sa, za, b, sb, zb, sc, zc=None):
        return (_q(_deq(a, sa, za) + _deq(b, sb, zb), sc, zc, a.dtype),)


class QLinearMul(OpRun):
    op_domain = "com.microsoft"

    def _run(self, a, sa, za, b, sb, zb, sc, zc=None):
        p = (a.astype(F) - _zp(za)) * (b.astype(F) - _zp(zb)) * (F(sa.reshape(())) * F(sb.reshape(())))
        return (_q(p, sc, zc, a.dtype),)


class QLinearSigmoid(OpRun):
    op_domain = "com.microsoft"

    def _run(self, x, sx, zx, sy, zy=None):
        d = _deq(x, sx, zx)
        return (_q((1.0 / (1.0 + np.exp(-d.astype(np.float64)))).astype(F), sy, zy, x.dtype),)


class QLinearLeakyRelu(OpRun):
    op_domain = "com.microsoft"

    def _run(self, x, sx, zx, sy, zy=None, alpha=None):
        d = _deq(x, sx, zx)
        a = 0.01 if alpha is None else alpha
        return (_q(np.where(d < 0, d * F(a), d), sy, zy, x.dtype),)


class QLinearGlobalAveragePool(OpRun):
    op_domain = "com.microsoft"

    def _run(self, x, sx, zx, sy, zy, channels_last=None):
        # The mean of the dequantized values: s_X (Σx − n z_X) / n, then quantized.
        axes = tuple(range(1, x.ndim - 1)) if channels_last else tuple(range(2, x.ndim))
        n = int(np.prod([x.shape[a] for a in axes]))
        centered = (x.astype(np.int64).sum(axis=axes, keepdims=True) - n * int(_zp(zx))).astype(F)
        return (_q(centered * (F(sx.reshape(())) / (F(sy.reshape(())) * F(n))), F(1.0), zy, x.dtype),)


class QLinearConcat(OpRun):
    op_domain = "com.microsoft"

    def _run(self, sy, zy, *triples, axis=None):
        parts = [_q(_deq(triples[k], triples[k + 1], triples[k + 2]), sy, zy, zy.dtype)
                 for k in range(0, len(triples), 3)]
        return (np.concatenate(parts, axis=axis),)


class QLinearSoftmax(OpRun):
    op_domain = "com.microsoft"

    def _run(self, x, sx, zx, sy, zy=None, axis=None, opset=None):
        d = _deq(x, sx, zx)
        if opset < 13:  # coerced to 2-D at axis (default 1)
            a = 1 if axis is None else axis % max(d.ndim, 1)
            d2 = d.reshape(int(np.prod(d.shape[:a])), -1)
            e = np.exp(d2 - d2.max(axis=1, keepdims=True))
            p = (e / e.sum(axis=1, keepdims=True)).reshape(d.shape)
        else:
            a = -1 if axis is None else axis
            e = np.exp(d - d.max(axis=a, keepdims=True))
            p = e / e.sum(axis=a, keepdims=True)
        return (_q(p.astype(F), sy, zy, x.dtype if zy is None else zy.dtype),)


class QGemm(OpRun):
    op_domain = "com.microsoft"

    def _run(self, a, sa, za, b, sb, zb, c=None, sy=None, zy=None, alpha=None, transA=None, transB=None):
        a = a.T if transA else a
        b = b.T if transB else b
        acc = (a.astype(np.int64) - int(_zp(za))) @ (b.astype(np.int64) - zb.astype(np.int64).reshape(1, -1))
        if c is not None:
            acc = acc + c.astype(np.int64)
        scale = F(1.0 if alpha is None else alpha) * F(sa.reshape(())) * sb.astype(F).reshape(1, -1)
        if sy is not None:
            scale = scale / F(sy.reshape(()))
        y = acc.astype(np.float64) * scale.astype(np.float64)
        if zy is None:
            return (y.astype(F),)
        info = np.iinfo(zy.dtype)
        return (np.clip(np.rint(y) + int(zy.reshape(())), info.min, info.max).astype(zy.dtype),)


class QuantizeLinear(OpRun):
    op_domain = "com.microsoft"

    def _run(self, x, s, z=None, **attrs):
        return (_q(x.astype(np.float32).astype(np.float64), s, z, np.uint8 if z is None else z.dtype),)


class DequantizeLinear(OpRun):
    op_domain = "com.microsoft"

    def _run(self, x, s, z=None, **attrs):
        return (_deq(x, s, z).astype(np.float32),)


def _requant_mean(mean, sx, sy, zy, dtype):
    """round(mean · s_x / s_y) + z_y in float64 (mean of the centered integers, rounded once)."""
    info = np.iinfo(dtype)
    v = np.rint(mean * np.float64(sx.reshape(())) / np.float64(sy.reshape(()))) + (0 if zy is None else int(zy.reshape(())))
    return np.clip(v, info.min, info.max).astype(dtype)


class QLinearAveragePool(OpRun):
    """The average of x − z_x over each window (AveragePool's attributes, evaluated by the
    reference AveragePool in float64, exact for 8-bit integers), requantized once."""
    op_domain = "com.microsoft"

    def _run(self, x, sx, zx, sy, zy=None, auto_pad=None, ceil_mode=None, channels_last=None, count_include_pad=None,
             kernel_shape=None, pads=None, strides=None):
        from onnx import TensorProto, helper
        from onnx.reference import ReferenceEvaluator
        c = x.astype(np.float64) - (0 if zx is None else int(zx.reshape(())))
        if channels_last:
            c = np.moveaxis(c, -1, 1)
        attrs = {k: v for k, v in dict(auto_pad=auto_pad, ceil_mode=ceil_mode, count_include_pad=count_include_pad,
                                        kernel_shape=kernel_shape, pads=pads, strides=strides).items() if v is not None}
        node = helper.make_node("AveragePool", ["x"], ["y"], **attrs)
        g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.DOUBLE, None)],
                              [helper.make_tensor_value_info("y", TensorProto.DOUBLE, None)])
        mean = ReferenceEvaluator(helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])).run(None, {"x": c})[0]
        if channels_last:
            mean = np.moveaxis(mean, 1, -1)
        return (_requant_mean(mean, sx, sy, zy, x.dtype),)


class QLinearReduceMean(OpRun):
    op_domain = "com.microsoft"

    def _run(self, x, sx, zx, sy, zy=None, axes=None, keepdims=None):
        c = x.astype(np.float64) - (0 if zx is None else int(zx.reshape(())))
        mean = c.mean(axis=tuple(axes), keepdims=bool(keepdims))
        return (_requant_mean(mean, sx, sy, zy, x.dtype),)


class QLinearWhere(OpRun):
    op_domain = "com.microsoft"

    def _run(self, cond, x, sx, zx, y, sy, zy, sz, zz):
        return (np.where(cond, _q(_deq(x, sx, zx), sz, zz, zz.dtype), _q(_deq(y, sy, zy), sz, zz, zz.dtype)),)


class BiasAdd(OpRun):
    op_domain = "com.microsoft"

    def _run(self, x, bias, skip):
        return ((x + bias + skip).astype(x.dtype),)


class BiasSplitGelu(OpRun):
    """(X + bias) split in halves l, r along the last axis: l · gelu(r), exact GELU."""
    op_domain = "com.microsoft"

    def _run(self, x, bias):
        from math import erf
        s = (x + bias).astype(np.float64)
        h = s.shape[-1] // 2
        r = s[..., h:]
        g = 0.5 * r * (1.0 + np.vectorize(erf)(r / np.sqrt(2.0)))
        return ((s[..., :h] * g).astype(x.dtype),)


CONTRIB_OPS = [BiasAdd, BiasSplitGelu, QLinearAveragePool, QLinearReduceMean, QLinearWhere, QLinearAdd, QLinearMul, QLinearSigmoid, QLinearLeakyRelu, QLinearGlobalAveragePool, QLinearConcat,
               QLinearSoftmax, QGemm, QuantizeLinear, DequantizeLinear]
