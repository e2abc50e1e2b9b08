//! Spectral ops: DFT (opsets 17, 20), STFT (17) and the window generators HannWindow,
//! HammingWindow, BlackmanWindow (17).
//!
//! A DFT of known length is a linear map, so it is one matrix product: the signal's frames
//! (real `[…, L, 1]` or complex `[…, L, 2]`, the transformed axis moved next to the last)
//! times a constant `[L·C_in, K·C_out]` matrix of cosines and sines built at compile time
//! in float64 (forward, inverse with 1/N, one-sided output, and the inverse of a one-sided
//! spectrum — numpy's `irfft` — each a different matrix), on the GEMM kernel for float32.
//! That is O(N²) per frame rather than an FFT's O(N log N), and fast for the frame lengths
//! of audio front ends (hundreds to a few thousand points).

use crate::error::Result;
use crate::frontend::build;
use crate::frontend::ctx::Ctx;
use crate::ir::dim::shape_from;
use crate::ir::expr;
use crate::ir::{DType, Scalar, Tensor, ValueId};
use std::f64::consts::PI;

/// Largest DFT matrix onnxc builds (entries).
const MAX_MATRIX: usize = 1 << 26;

#[derive(Copy, Clone, PartialEq)]
enum Kind {
    /// `y[k] = Σ x[t]·e^{−2πjkt/N}`, k < K.
    Forward,
    /// `y[k] = (1/N)·Σ x[t]·e^{2πjkt/N}`.
    Inverse,
    /// numpy's `irfft`: the real signal whose one-sided spectrum is x.
    InverseOneSided,
}

/// The `[l·c_in, k·c_out]` matrix of a DFT of length `n` over `l` input points (those past
/// `n` dropped: numpy truncates), row `t·c_in + ci`, column `k·c_out + co`.
fn dft_matrix(
    ctx: &Ctx,
    kind: Kind,
    l: usize,
    c_in: usize,
    n: usize,
    k: usize,
    c_out: usize,
) -> Result<Vec<f64>> {
    let cols = k * c_out;
    let entries = l
        .checked_mul(c_in)
        .and_then(|r| r.checked_mul(cols))
        .filter(|&e| e <= MAX_MATRIX);
    let Some(entries) = entries else {
        return Err(ctx.unsupported(format!(
            "its DFT of {l} points to {k} would need a matrix of more than {MAX_MATRIX} entries, \
             the most onnxc builds"
        )));
    };
    let mut w = vec![0.0; entries];
    let used = match kind {
        Kind::InverseOneSided => l.min(n / 2 + 1),
        _ => l.min(n),
    };
    for t in 0..used {
        for kk in 0..k {
            // (k·t) mod n keeps the angle's argument small, so cos/sin stay accurate.
            let theta = 2.0 * PI * ((kk * t) % n) as f64 / n as f64;
            let (s, c) = theta.sin_cos();
            let row = |ci: usize| (t * c_in + ci) * cols + kk * c_out;
            match kind {
                Kind::Forward => {
                    // (a + jb)(cos − j sin) = (a cos + b sin) + j(b cos − a sin)
                    w[row(0)] = c;
                    w[row(0) + 1] = -s;
                    if c_in == 2 {
                        w[row(1)] = s;
                        w[row(1) + 1] = c;
                    }
                }
                Kind::Inverse => {
                    // (a + jb)(cos + j sin)/n = (a cos − b sin)/n + j(a sin + b cos)/n
                    let f = 1.0 / n as f64;
                    w[row(0)] = c * f;
                    w[row(0) + 1] = s * f;
                    if c_in == 2 {
                        w[row(1)] = -s * f;
                        w[row(1) + 1] = c * f;
                    }
                }
                Kind::InverseOneSided => {
                    // Re(X_t·e^{jθ}) counted twice for the mirrored bins, except 0 and n/2.
                    let twice = if t == 0 || (n.is_multiple_of(2) && t == n / 2) {
                        1.0
                    } else {
                        2.0
                    };
                    let f = twice / n as f64;
                    w[row(0)] = c * f;
                    if c_in == 2 {
                        w[row(1)] = -s * f;
                    }
                }
            }
        }
    }
    Ok(w)
}

/// `rows · w`: `rows` is `[m, l·c_in]`, `w` the constant matrix; a `[m, k·c_out]` result.
fn apply(ctx: &mut Ctx, rows: ValueId, w: Vec<f64>, cols: usize) -> Result<ValueId> {
    let dt = ctx.dtype(rows);
    let depth = w.len() / cols.max(1);
    let vals: Vec<Scalar> = w.into_iter().map(|v| Scalar::F(v).cast(dt)).collect();
    let wv = ctx.constant(Tensor::from_scalars(
        dt,
        vec![depth as i64, cols as i64],
        &vals,
    ));
    crate::frontend::ops::linalg::matmul_values(ctx, rows, wv, false, false)
}

/// A constant integer scalar operand (one element).
fn const_scalar(ctx: &Ctx, v: ValueId, what: &str) -> Result<i64> {
    match ctx.const_ints(v, what)?.as_slice() {
        [x] => Ok(*x),
        xs => Err(ctx.err(format!("{what} must hold one value, it holds {}", xs.len()))),
    }
}

/// A DFT's settings once its axis is fixed.
struct DftSpec {
    kind: Kind,
    inverse: bool,
    onesided: bool,
    length: Option<i64>,
}

impl DftSpec {
    /// (kind, DFT length, output length along the axis, output channels) for `l` input
    /// points.
    fn dims(&self, l: i64) -> (Kind, i64, i64, usize) {
        let n = match self.length {
            Some(n) => n,
            None if self.inverse && self.onesided => 2 * (l - 1),
            None => l,
        };
        match self.kind {
            Kind::Forward if self.onesided => (Kind::Forward, n, n / 2 + 1, 2),
            Kind::InverseOneSided => (Kind::InverseOneSided, n, n, 1),
            k => (k, n, n, 2),
        }
    }

    fn out_shape(&self, xs: &[i64], a: usize) -> Vec<i64> {
        let (_, _, k, c_out) = self.dims(xs[a]);
        let mut o = xs.to_vec();
        o[a] = k;
        *o.last_mut().expect("rank ≥ 2") = c_out as i64;
        o
    }
}

pub fn dft(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    build::expect_types(ctx, x, "input", &[DType::F32, DType::F64])?;
    let xs = ctx.known_shape(x)?;
    let r = xs.len();
    if r < 2 || !(xs[r - 1] == 1 || xs[r - 1] == 2) {
        return Err(ctx.err(format!(
            "input has shape {xs:?}; its last dim must be 1 (real) or 2 (complex), after at least one signal dim"
        )));
    }
    let inverse = ctx.attr_i_or("inverse", 0)? != 0;
    let onesided = ctx.attr_i_or("onesided", 0)? != 0;
    let length = match ctx.opt_input(1) {
        Some(v) => {
            let n = const_scalar(ctx, v, "input dft_length")?;
            if n < 1 {
                return Err(ctx.err(format!("dft_length is {n}; it must be at least 1")));
            }
            Some(n)
        }
        None => None,
    };
    let kind = match (inverse, onesided) {
        (false, _) => Kind::Forward,
        (true, false) => Kind::Inverse,
        (true, true) => Kind::InverseOneSided,
    };
    let spec = DftSpec {
        kind,
        inverse,
        onesided,
        length,
    };
    let axis_in = if ctx.opset >= 20 {
        ctx.opt_input(2)
    } else {
        None
    };
    let fixed = match axis_in {
        Some(a) if ctx.is_runtime(a) => None,
        Some(a) => Some(const_scalar(ctx, a, "input axis")?),
        None if ctx.opset >= 20 => Some(-2),
        None => Some(ctx.attr_i_or("axis", 1)?),
    };
    let normalize = |ctx: &Ctx, axis: i64| -> Result<usize> {
        let a = if axis < 0 { axis + r as i64 } else { axis };
        if a < 0 || a >= r as i64 - 1 {
            return Err(ctx.err(format!(
                "axis {axis} is not a signal dim of the input {xs:?} (the last dim holds the real/imaginary parts)"
            )));
        }
        Ok(a as usize)
    };
    if let Some(axis) = fixed {
        let a = normalize(ctx, axis)?;
        return Ok(vec![dft_along(ctx, x, &xs, a, &spec)?]);
    }
    // A run-time axis: every signal axis whose output shape is the declared one is a
    // candidate; all are computed and the axis selects (checked: another axis fails the run).
    let axis_v = axis_in.expect("run-time axis");
    let declared = ctx.declared_shape(0, "input axis")?;
    let candidates: Vec<usize> = (0..r - 1)
        .filter(|&a| spec.out_shape(&xs, a) == declared)
        .collect();
    if candidates.is_empty() {
        return Err(ctx.err(format!(
            "output 0 is declared {declared:?}, which no axis of the input {xs:?} gives"
        )));
    }
    let flat = build::flat_i64(ctx, axis_v)?;
    if ctx.known_shape(flat)? != [1] {
        return Err(ctx.err("input axis must hold one value"));
    }
    // The axis, normalized into [0, r).
    let ax = || {
        let v = expr::load(DType::I64, 0, vec![expr::i(0)]);
        expr::select(
            expr::lt(v.clone(), expr::i(0)),
            expr::add(v.clone(), expr::i(r as i64)),
            v,
        )
    };
    let mut ok = None;
    for &a in &candidates {
        let is = expr::binary(expr::BinOp::Eq, ax(), expr::i(a as i64));
        ok = Some(match ok {
            None => is,
            Some(o) => expr::binary(expr::BinOp::Or, o, is),
        });
    }
    ctx.assert_expr(
        vec![1],
        vec![flat],
        ok.expect("a candidate"),
        onnxc_runtime::abi::ONNXC_ERR_VALUE,
    )?;
    let mut result: Option<ValueId> = None;
    for &a in &candidates {
        let y = dft_along(ctx, x, &xs, a, &spec)?;
        result = Some(match result {
            None => y,
            Some(prev) => {
                let dt = ctx.dtype(y);
                let vars: Vec<_> = (0..r as u32).map(expr::var).collect();
                let body = expr::select(
                    expr::binary(expr::BinOp::Eq, ax(), expr::i(a as i64)),
                    expr::load(dt, 1, vars.clone()),
                    expr::load(dt, 2, vars),
                );
                ctx.map(dt, shape_from(&declared), vec![flat, y, prev], body)?
            }
        });
    }
    Ok(vec![result.expect("a candidate")])
}

/// The DFT along axis `a` of `x` (shape `xs`).
fn dft_along(ctx: &mut Ctx, x: ValueId, xs: &[i64], a: usize, spec: &DftSpec) -> Result<ValueId> {
    let r = xs.len();
    let c_in = xs[r - 1] as usize;
    let l = xs[a];
    let (kind, n, k, c_out) = spec.dims(l);
    if n < 1 {
        return Err(ctx.err(format!("the DFT length is {n}; it must be at least 1")));
    }
    // [outer…, L, C] with the axis moved next to the last, as [m, L·C] rows.
    let mut perm: Vec<usize> = (0..r - 1).filter(|&d| d != a).collect();
    perm.push(a);
    perm.push(r - 1);
    let moved = build::transpose(ctx, x, &perm)?;
    let outer: Vec<i64> = perm[..r - 2].iter().map(|&d| xs[d]).collect();
    let m: i64 = outer.iter().product();
    let rows = ctx.reshape(moved, shape_from(&[m, l * c_in as i64]))?;
    let w = dft_matrix(ctx, kind, l as usize, c_in, n as usize, k as usize, c_out)?;
    let y = apply(ctx, rows, w, k as usize * c_out)?;
    let mut ys = outer.clone();
    ys.push(k);
    ys.push(c_out as i64);
    let y = ctx.reshape(y, shape_from(&ys))?;
    // Back to the input's order: the axis returns to position a.
    let mut inv = vec![0usize; r];
    for (pos, &d) in perm.iter().enumerate() {
        inv[d] = pos;
    }
    build::transpose(ctx, y, &inv)
}

pub fn stft(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let dt = build::expect_types(ctx, x, "signal", &[DType::F32, DType::F64])?;
    let xs = ctx.known_shape(x)?;
    if xs.len() != 3 || !(xs[2] == 1 || xs[2] == 2) {
        return Err(ctx.err(format!(
            "signal has shape {xs:?}; it must be (batch, length, 1) or (batch, length, 2)"
        )));
    }
    let (b, len, c_in) = (xs[0], xs[1], xs[2]);
    let step_v = ctx.input(1)?;
    let step = if ctx.is_runtime(step_v) {
        None
    } else {
        Some(const_scalar(ctx, step_v, "input frame_step")?)
    };
    let window = ctx.opt_input(2);
    let wlen = match window {
        Some(w) => {
            if ctx.dtype(w) != dt {
                return Err(ctx.err(format!(
                    "window is {}; it must be the signal's type {dt}",
                    ctx.dtype(w)
                )));
            }
            match ctx.known_shape(w)?.as_slice() {
                [n] => Some(*n),
                s => return Err(ctx.err(format!("window has shape {s:?}; it must be 1-D"))),
            }
        }
        None => None,
    };
    let fl = match (ctx.opt_input(3), wlen) {
        (Some(v), _) => const_scalar(ctx, v, "input frame_length")?,
        (None, Some(n)) => n,
        (None, None) => len,
    };
    if wlen.is_some_and(|n| n != fl) {
        return Err(ctx.err(format!(
            "window has {} values but frame_length is {fl}; they must agree",
            wlen.unwrap_or(0)
        )));
    }
    if step.is_some_and(|s| s < 1) || fl < 1 || fl > len {
        return Err(ctx.err(format!(
            "frame_step {step:?} and frame_length {fl} do not fit a signal of length {len} (need step ≥ 1, 1 ≤ frame_length ≤ length)"
        )));
    }
    let onesided = ctx.attr_i_or("onesided", 1)? != 0;
    let k = if onesided { fl / 2 + 1 } else { fl };
    // The frame count: from a constant step, or the declared output shape (a run-time step
    // must give it: checked when the model runs).
    let frames = match step {
        Some(s) => (len - fl) / s + 1,
        None => {
            let declared = ctx.declared_shape(0, "input frame_step")?;
            if declared.len() != 4 || declared[0] != b || declared[2] != k || declared[3] != 2 {
                return Err(ctx.err(format!(
                    "output 0 is declared {declared:?}; it must be ({b}, frames, {k}, 2)"
                )));
            }
            let frames = declared[1];
            let flat = build::flat_i64(ctx, step_v)?;
            if ctx.known_shape(flat)? != [1] {
                return Err(ctx.err("input frame_step must hold one value"));
            }
            // step ≥ 1 and (len − fl) / step + 1 = frames.
            let sv = expr::load(DType::I64, 0, vec![expr::i(0)]);
            let ok = expr::and(
                expr::ge(sv.clone(), expr::i(1)),
                expr::binary(
                    expr::BinOp::Eq,
                    expr::add(
                        expr::binary(
                            expr::BinOp::Div,
                            expr::i(len - fl),
                            expr::max(sv, expr::i(1)),
                        ),
                        expr::i(1),
                    ),
                    expr::i(frames),
                ),
            );
            ctx.assert_expr(vec![1], vec![flat], ok, onnxc_runtime::abi::ONNXC_ERR_SHAPE)?;
            frames
        }
    };
    // frames[b, f, t, c] = signal[b, f·step + t, c] · window[t]
    let (vb, vf, vt, vc) = (expr::var(0), expr::var(1), expr::var(2), expr::var(3));
    let mut inputs = vec![x];
    let offset = match step {
        Some(s) => expr::mul(vf, expr::i(s)),
        None => {
            inputs.push(build::flat_i64(ctx, step_v)?);
            expr::mul(vf, expr::load(DType::I64, 1, vec![expr::i(0)]))
        }
    };
    // In bounds by the checks above; the clamp keeps the load in bounds regardless.
    let pos = expr::clamp(expr::add(offset, vt.clone()), 0, len - 1);
    let sample = expr::load(dt, 0, vec![vb, pos, vc]);
    let body = match window {
        Some(w) => {
            inputs.push(w);
            expr::mul(sample, expr::load(dt, inputs.len() as u32 - 1, vec![vt]))
        }
        None => sample,
    };
    let framed = ctx.map(dt, shape_from(&[b, frames, fl, c_in]), inputs, body)?;
    let rows = ctx.reshape(framed, shape_from(&[b * frames, fl * c_in]))?;
    let w = dft_matrix(
        ctx,
        Kind::Forward,
        fl as usize,
        c_in as usize,
        fl as usize,
        k as usize,
        2,
    )?;
    let y = apply(ctx, rows, w, k as usize * 2)?;
    Ok(vec![ctx.reshape(y, shape_from(&[b, frames, k, 2]))?])
}

#[derive(Copy, Clone)]
enum Window {
    Hann,
    Hamming,
    Blackman,
}

fn window(ctx: &mut Ctx, kind: Window) -> Result<Vec<ValueId>> {
    let size_v = ctx.input(0)?;
    build::expect_types(ctx, size_v, "size", &[DType::I32, DType::I64])?;
    let code = ctx.attr_i_or("output_datatype", 1)?;
    let dt = i32::try_from(code)
        .ok()
        .and_then(DType::from_onnx)
        .filter(|d| *d != DType::Bool)
        .ok_or_else(|| {
            ctx.err(format!(
                "output_datatype {code} is not a numeric type onnxc stores"
            ))
        })?;
    let periodic = ctx.attr_i_or("periodic", 1)? != 0;
    // A constant size, or the declared output length checked against the run-time one.
    let size = if ctx.is_runtime(size_v) {
        let declared = ctx.declared_shape(0, "input size")?;
        let [n] = declared.as_slice() else {
            return Err(ctx.err(format!(
                "output 0 is declared {declared:?}; a window is 1-D"
            )));
        };
        let flat = build::flat_i64(ctx, size_v)?;
        build::assert_equals(ctx, flat, &[*n])?;
        *n
    } else {
        const_scalar(ctx, size_v, "input size")?
    };
    if !(0..=1 << 24).contains(&size) {
        return Err(ctx.err(format!(
            "size is {size}; onnxc makes windows of 0 to 2^24 values"
        )));
    }
    let denom = if periodic { size } else { size - 1 } as f64;
    let vals: Vec<Scalar> = (0..size)
        .map(|i| {
            let x = i as f64;
            let v = match kind {
                Window::Hann => (PI * x / denom).sin().powi(2),
                Window::Hamming => {
                    let alpha = 25.0 / 46.0;
                    alpha - (2.0 * PI * x / denom).cos() * (1.0 - alpha)
                }
                Window::Blackman => {
                    0.42 - 0.5 * (2.0 * PI * x / denom).cos() + 0.08 * (4.0 * PI * x / denom).cos()
                }
            };
            Scalar::F(v).cast(dt)
        })
        .collect();
    // (A run-time size was asserted above; the values depend on nothing else.)
    Ok(vec![ctx.constant(Tensor::from_scalars(
        dt,
        vec![size],
        &vals,
    ))])
}

pub fn hann_window(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    window(ctx, Window::Hann)
}

pub fn hamming_window(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    window(ctx, Window::Hamming)
}

pub fn blackman_window(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    window(ctx, Window::Blackman)
}
