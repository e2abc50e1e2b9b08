//! Convolution windows, Conv and ConvTranspose, and the softmax family (pooling: `pool.rs`).

use crate::error::Result;
use crate::frontend::build::{self, FLOATS};
use crate::frontend::ctx::Ctx;
use crate::ir::dim::{Dim, Shape};
use crate::ir::expr::{self, BinOp, E, UnOp};
use crate::ir::graph::{ConvOp, ReduceKind};
use crate::ir::{DType, Scalar, TypeInfo, ValueId};

/// A sliding window over the spatial dims: the geometry shared by Conv and the pools.
#[derive(Debug, Clone)]
pub struct Window {
    pub kernel: Vec<i64>,
    pub strides: Vec<i64>,
    pub dilations: Vec<i64>,
    pub pads_begin: Vec<i64>,
    pub pads_end: Vec<i64>,
    pub out: Vec<i64>,
}

impl Window {
    /// Whether every window position lies inside the unpadded input.
    pub fn always_inside(&self, input: &[i64]) -> bool {
        (0..self.kernel.len()).all(|i| {
            self.pads_begin[i] == 0
                && (self.out[i] - 1) * self.strides[i] + (self.kernel[i] - 1) * self.dilations[i]
                    < input[i]
        })
    }

    /// The window without the taps that fall outside `[lo[i], hi[i])` at every output
    /// position (they add nothing to a sum, a count or a maximum), each output reading the
    /// same positions: `pads_begin` shifts by the taps dropped at the start. A pool of a huge
    /// kernel over a small input then reduces over the taps that can reach the input (a
    /// 2×1048576 LpPool over 32×32 ran 90 s, its taps 6.4 G reads of padding). At least one
    /// tap stays, so no reduction is empty.
    pub fn trimmed(&self, lo: &[i64], hi: &[i64]) -> Window {
        let mut w = self.clone();
        for i in 0..self.kernel.len() {
            // The first taps start later as o grows, the last ones end earlier: their union
            // runs from the last output's first tap to the first output's end.
            let t0 = self
                .taps_inside(i, (self.out[i] - 1).max(0), lo[i], hi[i])
                .start;
            let t1 = self.taps_inside(i, 0, lo[i], hi[i]).end;
            let (t0, t1) = if t1 > t0 { (t0, t1) } else { (0, 1) };
            w.kernel[i] = t1 - t0;
            w.pads_begin[i] -= t0 * self.dilations[i];
        }
        w
    }

    /// The taps `t` of dim `i` (a run, within `[0, kernel)`) whose position
    /// `o·stride + t·dilation − pads_begin` at output `o` lies in `[lo, hi)`; empty when none.
    pub fn taps_inside(&self, i: usize, o: i64, lo: i64, hi: i64) -> std::ops::Range<i64> {
        let (k, d) = (self.kernel[i], self.dilations[i]);
        let base = self.pads_begin[i] - o * self.strides[i];
        let ceil = |x: i64| x.div_euclid(d) + i64::from(x.rem_euclid(d) != 0);
        ceil(lo + base).clamp(0, k)..ceil(hi + base).clamp(0, k)
    }
}

/// An `n`-value window attribute (strides, dilations, pads, output padding or shape),
/// each value within ±`MAX_DIM` so window arithmetic (sums of a few, products of two)
/// cannot overflow.
fn list_attr(ctx: &Ctx, name: &str, n: usize, default: i64) -> Result<Vec<i64>> {
    match ctx.attr_ints(name) {
        None => Ok(vec![default; n]),
        Some(v) if v.len() == n => {
            build::extents(ctx, &format!("attribute '{name}'"), &v)?;
            Ok(v)
        }
        Some(v) => Err(ctx.err(format!(
            "attribute '{name}' has {} values, expected {n}",
            v.len()
        ))),
    }
}

pub fn window(ctx: &Ctx, input: &[i64], kernel: &[i64], ceil_mode: bool) -> Result<Window> {
    let n = kernel.len();
    build::extents(ctx, "the kernel shape", kernel)?;
    let strides = list_attr(ctx, "strides", n, 1)?;
    let dilations = list_attr(ctx, "dilations", n, 1)?;
    if strides
        .iter()
        .chain(&dilations)
        .chain(kernel)
        .any(|&v| v < 1)
    {
        return Err(ctx.err(format!(
            "kernel {kernel:?}, strides {strides:?} and dilations {dilations:?} must be positive"
        )));
    }
    let auto_pad = ctx.attr_s_or("auto_pad", "NOTSET")?;
    let mut pads_begin = vec![0; n];
    let mut pads_end = vec![0; n];
    let mut out = vec![0; n];
    for i in 0..n {
        let dk = (kernel[i] - 1) * dilations[i] + 1;
        match auto_pad.as_str() {
            "NOTSET" | "" => {
                let pads = list_attr(ctx, "pads", 2 * n, 0)?;
                if pads.iter().any(|&p| p < 0) {
                    return Err(ctx.err(format!("attribute 'pads' {pads:?} must be non-negative")));
                }
                pads_begin[i] = pads[i];
                pads_end[i] = pads[n + i];
                let span = input[i] + pads_begin[i] + pads_end[i] - dk;
                // With ceil_mode one window may reach past the padded input
                // (ceil(span / stride + 1) = 1 for -stride < span < 0): its taps outside count
                // as padding that is not counted, as in onnxruntime and the reference.
                if span < 0 && !(ceil_mode && span > -strides[i]) {
                    return Err(ctx.err(format!(
                        "window of {dk} does not fit spatial dim {i} of size {} with pads {}+{}",
                        input[i], pads_begin[i], pads_end[i]
                    )));
                }
                out[i] = if ceil_mode {
                    let mut o = (span + strides[i] - 1) / strides[i] + 1;
                    if (o - 1) * strides[i] >= input[i] + pads_begin[i] {
                        o -= 1;
                    }
                    o
                } else {
                    span / strides[i] + 1
                };
            }
            "VALID" => {
                if input[i] < dk {
                    return Err(ctx.err(format!(
                        "window of {dk} does not fit spatial dim {i} of size {}",
                        input[i]
                    )));
                }
                out[i] = if ceil_mode {
                    (input[i] - dk + strides[i]) / strides[i]
                } else {
                    (input[i] - dk) / strides[i] + 1
                };
            }
            "SAME_UPPER" | "SAME_LOWER" => {
                out[i] = (input[i] + strides[i] - 1) / strides[i];
                let total = ((out[i] - 1) * strides[i] + dk - input[i]).max(0);
                let small = total / 2;
                if auto_pad == "SAME_UPPER" {
                    pads_begin[i] = small;
                    pads_end[i] = total - small;
                } else {
                    pads_begin[i] = total - small;
                    pads_end[i] = small;
                }
            }
            other => {
                return Err(ctx.err(format!("attribute 'auto_pad' has unknown value '{other}'")));
            }
        }
    }
    Ok(Window {
        kernel: kernel.to_vec(),
        strides,
        dilations,
        pads_begin,
        pads_end,
        out,
    })
}

pub fn conv(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (x, w) = (ctx.input(0)?, ctx.input(1)?);
    let b = ctx.opt_input(2);
    if let Some(y) = crate::frontend::ops::qdq::qdq_conv(ctx, x, w, b)? {
        return Ok(vec![y]);
    }
    Ok(vec![conv_values(ctx, x, w, b, false)?])
}

/// A convolution of the given operands with the node's attributes (Conv, and the integer
/// convolutions, which run it on dequantized operands).
/// `exact`: the operands are integer-valued and bounded so that float32 sums are exact
/// (`ConvOp::exact`).
pub fn conv_values(
    ctx: &mut Ctx,
    x: ValueId,
    w: ValueId,
    b: Option<ValueId>,
    exact: bool,
) -> Result<ValueId> {
    let dt = build::expect_types(ctx, x, "input X", FLOATS)?;
    if ctx.dtype(w) != dt {
        return Err(ctx.err(format!("W is {} but X is {dt}", ctx.dtype(w))));
    }
    let xs = ctx.known_shape(x)?;
    let ws = ctx.known_shape(w)?;
    if xs.len() < 3 || ws.len() != xs.len() {
        return Err(ctx.err(format!(
            "X {xs:?} and W {ws:?} must have the same rank >= 3"
        )));
    }
    let group = ctx.attr_i_or("group", 1)?;
    if group < 1 || xs[1] % group != 0 || ws[0] % group != 0 || ws[1] * group != xs[1] {
        return Err(ctx.err(format!(
            "channels do not match: X has {} channels, W is {ws:?}, group {group} (need W[1] * group == C and group | M)",
            xs[1]
        )));
    }
    let kernel = ws[2..].to_vec();
    if let Some(k) = ctx.attr_ints("kernel_shape")
        && k != kernel
    {
        return Err(ctx.err(format!(
            "attribute kernel_shape {k:?} disagrees with W's spatial dims {kernel:?}"
        )));
    }
    let win = window(ctx, &xs[2..], &kernel, false)?;
    if let Some(d) = xs[2..].iter().position(|&d| d == 0)
        && xs[0] > 0
        && win.out.iter().all(|&o| o > 0)
    {
        return Err(ctx.err(format!(
            "X has shape {xs:?}: its spatial dim {} is empty, so every output would read \
             only padding; give the input at least one element along it",
            d + 2
        )));
    }
    if let Some(b) = b {
        let bs = ctx.known_shape(b)?;
        if bs != [ws[0]] {
            return Err(ctx.err(format!("bias B has shape {bs:?}, expected [{}]", ws[0])));
        }
    }
    let mut shape: Shape = vec![Dim::Known(xs[0]), Dim::Known(ws[0])];
    shape.extend(win.out.iter().map(|&d| Dim::Known(d)));
    let op = ConvOp {
        group,
        strides: win.strides,
        dilations: win.dilations,
        pads_begin: win.pads_begin,
        pads_end: win.pads_end,
        exact,
    };
    let mut inputs = vec![x, w];
    inputs.extend(b);
    ctx.conv(op, inputs, TypeInfo::new(dt, shape))
}

#[derive(Copy, Clone, PartialEq)]
enum SoftmaxKind {
    Softmax,
    LogSoftmax,
    Hardmax,
}

/// Softmax family. Before opset 13 the input is coerced to 2-D at `axis` (default 1);
/// from 13 on it normalizes along the single `axis` (default -1).
fn softmax_family(ctx: &mut Ctx, kind: SoftmaxKind) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let dt = build::expect_types(ctx, x, "input", FLOATS)?;
    let shape = ctx.shape(x);
    let rank = shape.len();
    if ctx.opset < 13 {
        let axis = build::axis(ctx, ctx.attr_i_or("axis", 1)?, rank.max(1))?;
        let outer = crate::ir::dim::num_elements(&shape[..axis]);
        let inner = crate::ir::dim::num_elements(&shape[axis..]);
        let x2 = ctx.reshape(x, vec![outer, inner])?;
        let y2 = softmax_along(ctx, x2, 1, kind, dt)?;
        return Ok(vec![ctx.reshape(y2, shape)?]);
    }
    let axis = build::axis(ctx, ctx.attr_i_or("axis", -1)?, rank)?;
    Ok(vec![softmax_along(ctx, x, axis, kind, dt)?])
}

fn softmax_along(
    ctx: &mut Ctx,
    x: ValueId,
    axis: usize,
    kind: SoftmaxKind,
    dt: DType,
) -> Result<ValueId> {
    let rank = ctx.rank(x);
    let shape = ctx.shape(x);
    if kind == SoftmaxKind::Hardmax {
        let am = build::reduce(
            ctx,
            x,
            ReduceKind::ArgMax { select_last: false },
            &[axis],
            true,
            |v| v,
        )?;
        let mut idx: Vec<E> = (0..rank as u32).map(expr::var).collect();
        idx[axis] = expr::i(0);
        let hit = expr::binary(
            BinOp::Eq,
            expr::load(DType::I64, 0, idx),
            expr::var(axis as u32),
        );
        return ctx.map(
            dt,
            shape,
            vec![am],
            expr::select(hit, expr::f(dt, 1.0), expr::f(dt, 0.0)),
        );
    }
    // Float32 along the last axis (every opset's common case: attention scores, class
    // scores): one runtime kernel call makes the max/exp/sum/scale passes per row while it
    // is in L1.
    if kind == SoftmaxKind::Softmax
        && dt == DType::F32
        && axis + 1 == rank
        && crate::ir::dim::known_dims(&shape).is_some()
    {
        return ctx.add(
            crate::ir::Op::kernel(crate::kernels::Softmax::PLAIN),
            vec![x],
            TypeInfo::new(dt, shape),
        );
    }
    let m = build::reduce(ctx, x, ReduceKind::Max, &[axis], true, |v| v)?;
    let mut at_axis0: Vec<E> = (0..rank as u32).map(expr::var).collect();
    at_axis0[axis] = expr::i(0);
    let shifted = |xv: E| expr::binary(BinOp::Sub, xv, expr::load(dt, 1, at_axis0.clone()));
    let xl = build::load_same(dt, 0, rank);
    if kind == SoftmaxKind::Softmax {
        // e = exp(x - max) once (the fuser keeps a map with exp that feeds a reduction
        // materialized), s = sum(e), y = e / s: one exponential per element, not two.
        // In 16-bit types x - max is rounded before the exponential, as the reference's
        // numpy computes it.
        let e = ctx.map(
            dt,
            shape.clone(),
            vec![x, m],
            expr::unary(UnOp::Exp, expr::round_to_storage(shifted(xl))),
        )?;
        let s = build::reduce(ctx, e, ReduceKind::Sum, &[axis], true, |v| v)?;
        let body = expr::binary(
            BinOp::Div,
            build::load_same(dt, 0, rank),
            expr::load(dt, 1, at_axis0.clone()),
        );
        return ctx.map(dt, shape, vec![e, s], body);
    }
    // s = sum(exp(x - max)) along axis, computed from x and m.
    let s = {
        let mut index: Vec<E> = Vec::new();
        let mut mi: Vec<E> = Vec::new();
        for k in 0..rank {
            if k == axis {
                index.push(expr::var(rank as u32));
                mi.push(expr::i(0));
            } else {
                index.push(expr::var(k as u32));
                mi.push(expr::var(k as u32));
            }
        }
        let mut out_shape = shape.clone();
        out_shape[axis] = Dim::Known(1);
        let n = ctx.known_shape(x)?[axis];
        let body = expr::unary(
            UnOp::Exp,
            expr::binary(BinOp::Sub, expr::load(dt, 0, index), expr::load(dt, 1, mi)),
        );
        ctx.reduce(ReduceKind::Sum, vec![n], dt, out_shape, vec![x, m], body)?
    };
    let sl = expr::load(dt, 2, at_axis0.clone());
    let body = match kind {
        SoftmaxKind::Softmax => expr::binary(BinOp::Div, expr::unary(UnOp::Exp, shifted(xl)), sl),
        SoftmaxKind::LogSoftmax => {
            expr::binary(BinOp::Sub, shifted(xl), expr::unary(UnOp::Log, sl))
        }
        SoftmaxKind::Hardmax => unreachable!("handled above"),
    };
    ctx.map(dt, shape, vec![x, m, s], body)
}

pub fn softmax(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    softmax_family(ctx, SoftmaxKind::Softmax)
}

/// Float32 softmax of `x` with the `axis` semantics of Softmax at `opset` (before 13: the
/// input coerced to 2-D at `axis`; from 13: along `axis`); for ops built on it
/// (com.microsoft's QLinearSoftmax).
pub fn softmax_f32(ctx: &mut Ctx, x: ValueId, axis: i64, opset: i64) -> Result<ValueId> {
    let shape = ctx.shape(x);
    let rank = shape.len();
    if opset < 13 {
        let axis = build::axis(ctx, axis, rank.max(1))?;
        let outer = crate::ir::dim::num_elements(&shape[..axis]);
        let inner = crate::ir::dim::num_elements(&shape[axis..]);
        let x2 = ctx.reshape(x, vec![outer, inner])?;
        let y2 = softmax_along(ctx, x2, 1, SoftmaxKind::Softmax, DType::F32)?;
        return ctx.reshape(y2, shape);
    }
    let axis = build::axis(ctx, axis, rank)?;
    softmax_along(ctx, x, axis, SoftmaxKind::Softmax, DType::F32)
}
/// Softmax of `x` along its last axis, computed in `x`'s own float type (FlexAttention's
/// probabilities).
pub fn softmax_last(ctx: &mut Ctx, x: ValueId) -> Result<ValueId> {
    let dt = ctx.dtype(x);
    let rank = ctx.rank(x);
    if rank == 0 {
        return Err(ctx.err("softmax of a scalar"));
    }
    softmax_along(ctx, x, rank - 1, SoftmaxKind::Softmax, dt)
}

pub fn log_softmax(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    softmax_family(ctx, SoftmaxKind::LogSoftmax)
}
pub fn hardmax(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    softmax_family(ctx, SoftmaxKind::Hardmax)
}

pub fn conv_transpose(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (x, w) = (ctx.input(0)?, ctx.input(1)?);
    let b = ctx.opt_input(2);
    let dt = build::expect_types(ctx, x, "input X", FLOATS)?;
    let xs = ctx.known_shape(x)?;
    let ws = ctx.known_shape(w)?;
    if xs.len() < 3 || ws.len() != xs.len() {
        return Err(ctx.err(format!(
            "X {xs:?} and W {ws:?} must have the same rank >= 3"
        )));
    }
    let nsp = xs.len() - 2;
    let group = ctx.attr_i_or("group", 1)?;
    if group < 1 || xs[1] != ws[0] || xs[1] % group != 0 {
        return Err(ctx.err(format!(
            "X has {} channels but W is {ws:?} with group {group}",
            xs[1]
        )));
    }
    let mg = ws[1];
    let m = mg * group;
    let kernel = ws[2..].to_vec();
    let strides = list_attr(ctx, "strides", nsp, 1)?;
    let dil = list_attr(ctx, "dilations", nsp, 1)?;
    let out_pad = list_attr(ctx, "output_padding", nsp, 0)?;
    let auto_pad = ctx.attr_s_or("auto_pad", "NOTSET")?;
    let mut pb = vec![0i64; nsp];
    let mut out = vec![0i64; nsp];
    let explicit_out = ctx.attr_ints("output_shape");
    if let Some(o) = &explicit_out {
        build::extents(ctx, "attribute 'output_shape'", o)?;
    }
    build::extents(ctx, "W's kernel dims", &kernel)?;
    for i in 0..nsp {
        let dk = (kernel[i] - 1) * dil[i] + 1;
        let full = strides[i] * (xs[2 + i] - 1) + out_pad[i] + dk;
        let target = match &explicit_out {
            Some(o) => Some(
                *o.get(o.len().wrapping_sub(nsp) + i)
                    .ok_or_else(|| ctx.err("output_shape has too few values"))?,
            ),
            None if auto_pad.starts_with("SAME") => Some(xs[2 + i] * strides[i]),
            None => None,
        };
        match target {
            Some(t) => {
                let total = full - t;
                let half = total.div_euclid(2);
                pb[i] = if auto_pad == "SAME_UPPER" {
                    half
                } else {
                    total - half
                };
                out[i] = t;
            }
            None => {
                let pads = if auto_pad == "VALID" {
                    vec![0; 2 * nsp]
                } else {
                    list_attr(ctx, "pads", 2 * nsp, 0)?
                };
                pb[i] = pads[i];
                out[i] = full - pads[i] - pads[nsp + i];
            }
        }
        if out[i] < 0 {
            return Err(ctx.err("the output size would be negative"));
        }
    }
    // Float32, 1-D to 3-D: a GEMM and a col2im in the runtime (weights packed at compile
    // time when constant).
    let positive = |v: &[i64]| v.iter().all(|&d| d >= 1);
    let u = |v: &[i64]| v.iter().map(|&d| d as usize).collect::<Vec<_>>();
    let kernel_geom = (dt == DType::F32
        && ctx.dtype(w) == DType::F32
        && positive(&xs)
        && positive(&kernel)
        && positive(&strides)
        && positive(&dil)
        && positive(&out)
        && mg >= 1
        && b.is_none_or(|b| {
            ctx.dtype(b) == DType::F32 && ctx.known_shape(b).ok() == Some(vec![m])
        }))
    .then(|| {
        onnxc_runtime::conv::transpose::ConvTransposeGeometry::from_dims(
            xs[0] as usize,
            xs[1] as usize,
            m as usize,
            group as usize,
            &u(&xs[2..]),
            &u(&kernel),
            &u(&out),
            &u(&strides),
            &u(&dil),
            &pb,
        )
    })
    .flatten();
    if let Some(geom) = kernel_geom {
        let mut shape: Shape = vec![Dim::Known(xs[0]), Dim::Known(m)];
        shape.extend(out.iter().map(|&d| Dim::Known(d)));
        let mut inputs = vec![x, w];
        inputs.extend(b);
        return Ok(vec![ctx.add(
            crate::ir::Op::kernel(crate::kernels::ConvTranspose(geom)),
            inputs,
            TypeInfo::new(dt, shape),
        )?]);
    }
    // y[n, m, o…] = b[m] + Σ_{c in group, k…} x[n, c, i…] · w[c, m mod mg, k…], where o = i·s + k·d − pb.
    let rank = xs.len();
    let cg = xs[1] / group;
    let gm = expr::idiv(expr::var(1), mg);
    let c = expr::add(expr::mul(gm, expr::i(cg)), expr::var(rank as u32));
    let mut xi = vec![expr::var(0), c.clone()];
    let mut wi = vec![c, expr::imod(expr::var(1), mg)];
    let mut ok = expr::konst(DType::Bool, Scalar::B(true));
    for i in 0..nsp {
        let k = expr::var((rank + 1 + i) as u32);
        let num = expr::sub(
            expr::add(expr::var(2 + i as u32), expr::i(pb[i])),
            expr::mul(k.clone(), expr::i(dil[i])),
        );
        let q = expr::idiv(expr::clamp(num.clone(), 0, i64::MAX / 4), strides[i]);
        ok = expr::and(ok, expr::ge(num.clone(), expr::i(0)));
        if strides[i] > 1 {
            ok = expr::and(
                ok,
                expr::binary(BinOp::Eq, expr::imod(num, strides[i]), expr::i(0)),
            );
        }
        ok = expr::and(ok, expr::lt(q.clone(), expr::i(xs[2 + i])));
        xi.push(expr::clamp(q, 0, xs[2 + i] - 1));
        wi.push(k);
    }
    let prod = expr::binary(BinOp::Mul, expr::load(dt, 0, xi), expr::load(dt, 1, wi));
    let body = expr::select(ok, prod, expr::f(dt, 0.0));
    let mut shape: Shape = vec![Dim::Known(xs[0]), Dim::Known(m)];
    shape.extend(out.iter().map(|&d| Dim::Known(d)));
    let mut extents = vec![cg];
    extents.extend_from_slice(&kernel);
    let y = ctx.reduce(
        ReduceKind::Sum,
        extents,
        dt,
        shape.clone(),
        vec![x, w],
        body,
    )?;
    match b {
        None => Ok(vec![y]),
        Some(b) => {
            let body = expr::binary(
                BinOp::Add,
                build::load_same(dt, 0, rank),
                expr::load(dt, 1, vec![expr::var(1)]),
            );
            Ok(vec![ctx.map(dt, shape, vec![y, b], body)?])
        }
    }
}
