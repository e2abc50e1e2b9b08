//! GridSample (opsets 16, 20, 22) and AffineGrid (opset 20, at the end), the two halves of
//! a spatial transformer.
//!
//! GridSample: one map over the output `[N, C, O1, …, Or]` that reads
//! its sampling position from `grid[n, o1, …, or, :]` and combines 1 (nearest), 2^r
//! (linear) or 4^r (cubic) input elements, following onnx's reference evaluator (PyTorch's
//! `grid_sample`): positions denormalized by `align_corners`, rounded half to even for
//! nearest, out-of-range positions clamped (`border`) or reflected (`reflection`) before
//! interpolating, taps outside the input read as 0 (`zeros`), clamped or reflected.
//!
//! The positions are data: every tap index is clamped into the input before the load (so
//! the map never reads out of bounds, whatever the grid holds — NaN and ±∞ included) and
//! masked to 0 where `zeros` padding says so. Arithmetic is float32 (float64 for double
//! inputs); the cubic weights are Keys' with α = −0.75.
//!
//! The taps depend on the output position, not the channel, so they are computed once per
//! position — per-dim index and weight tables, then per tap combination a flat offset into
//! the input plane (−1 for a `zeros` tap outside) and the weights' product — and the
//! per-channel part only gathers and sums — for float32 the runtime's `onnxc_gather_sum_f32`
//! (`kernels::GatherSum`), a map otherwise: bilinear 32×128×128 from a 128×128 grid, 6.5 → 2.2 ms
//! (onnxruntime 1.1).

use crate::error::Result;
use crate::frontend::build::{self, FLOATS};
use crate::frontend::ctx::Ctx;
use crate::ir::dim::{Dim, shape_from};
use crate::ir::expr::{self, BinOp, E, UnOp};
use crate::ir::{DType, ValueId};

#[derive(Copy, Clone, PartialEq)]
enum Mode {
    Nearest,
    Linear,
    Cubic,
}

#[derive(Copy, Clone, PartialEq)]
enum Padding {
    Zeros,
    Border,
    Reflection,
}

/// com.microsoft GridSample: ai.onnx GridSample-16's semantics (4-D, `bilinear`/`bicubic`).
pub fn ms_grid_sample(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let opset = std::mem::replace(&mut ctx.opset, 16);
    let r = grid_sample(ctx);
    ctx.opset = opset;
    r
}

pub fn grid_sample(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let grid = ctx.input(1)?;
    let dt = build::expect_types(ctx, x, "input X", FLOATS)?;
    let gdt = build::expect_types(ctx, grid, "input grid", FLOATS)?;
    let xs = ctx.known_shape(x)?;
    let gs = ctx.known_shape(grid)?;
    let r = xs.len().saturating_sub(2);
    if xs.len() < 3 || (ctx.opset < 20 && xs.len() != 4) {
        return Err(ctx.err(format!(
            "input X has shape {xs:?}; GridSample needs (N, C, D1, …, Dr){}",
            if ctx.opset < 20 {
                " with r = 2 before opset 20"
            } else {
                ""
            }
        )));
    }
    if gs.len() != r + 2 || gs[0] != xs[0] || gs[r + 1] != r as i64 {
        return Err(ctx.err(format!(
            "input grid has shape {gs:?}; for X of shape {xs:?} it must be (N={}, O1, …, O{r}, {r})",
            xs[0]
        )));
    }
    if let Some(d) = (2..xs.len()).find(|&d| xs[d] == 0) {
        // Nothing to sample from (onnxruntime refuses it the same way); the taps' flat
        // offsets below divide by each spatial extent.
        return Err(ctx.err(format!(
            "input X has shape {xs:?}: its spatial dim {d} is empty, so there is nothing to \
             sample; GridSample needs every spatial dim of X non-empty"
        )));
    }
    let mode = match (
        ctx.opset < 20,
        ctx.attr_s_or("mode", if ctx.opset < 20 { "bilinear" } else { "linear" })?
            .as_str(),
    ) {
        (_, "nearest") => Mode::Nearest,
        (true, "bilinear") | (false, "linear") => Mode::Linear,
        (true, "bicubic") | (false, "cubic") => Mode::Cubic,
        (_, m) => return Err(ctx.err(format!("unknown mode '{m}'"))),
    };
    let padding = match ctx.attr_s_or("padding_mode", "zeros")?.as_str() {
        "zeros" => Padding::Zeros,
        "border" => Padding::Border,
        "reflection" => Padding::Reflection,
        p => {
            return Err(ctx.err(format!(
                "unknown padding_mode '{p}' (zeros, border or reflection)"
            )));
        }
    };
    let align = ctx.attr_i_or("align_corners", 0)? != 0;
    let taps_per_dim: usize = match mode {
        Mode::Nearest => 1,
        Mode::Linear => 2,
        Mode::Cubic => 4,
    };
    if taps_per_dim.pow(r as u32) > 4096 {
        return Err(ctx.unsupported(format!(
            "{r} spatial dims in this mode read {} inputs per output; onnxc samples at most 4096",
            taps_per_dim.saturating_pow(r as u32)
        )));
    }
    // Computation type.
    let ct = if dt == DType::F64 || gdt == DType::F64 {
        DType::F64
    } else {
        DType::F32
    };
    let c = |v: f64| expr::f(ct, v);
    let mut out_shape: Vec<i64> = vec![xs[0], xs[1]];
    out_shape.extend_from_slice(&gs[1..=r]);
    // Per spatial dim i (X's order): the taps' indices, validities and weights.
    let mut dims: Vec<Vec<(E, Option<E>, E)>> = Vec::with_capacity(r);
    for i in 0..r {
        let len = xs[2 + i];
        let lf = len as f64;
        // grid[n, o1, …, or, r-1-i]: the grid lists coordinates innermost dim first.
        let mut gidx: Vec<E> = vec![expr::var(0)];
        gidx.extend((0..r as u32).map(|k| expr::var(2 + k)));
        gidx.push(expr::i((r - 1 - i) as i64));
        let g = expr::cast(expr::load(gdt, 1, gidx), ct);
        let pos = if align {
            expr::mul(
                expr::binary(BinOp::Div, expr::add(g, c(1.0)), c(2.0)),
                c(lf - 1.0),
            )
        } else {
            expr::binary(
                BinOp::Div,
                expr::sub(expr::mul(expr::add(g, c(1.0)), c(lf)), c(1.0)),
                c(2.0),
            )
        };
        let pos = if mode == Mode::Nearest {
            expr::unary(UnOp::Round, pos)
        } else {
            pos
        };
        let (lo, hi) = if align {
            (0.0, lf - 1.0)
        } else {
            (-0.5, lf - 0.5)
        };
        let outside = expr::binary(
            BinOp::Or,
            expr::binary(BinOp::Lt, pos.clone(), c(lo)),
            expr::binary(BinOp::Gt, pos.clone(), c(hi)),
        );
        let pos = match padding {
            Padding::Zeros => pos,
            Padding::Border => expr::select(outside, fclamp(ct, pos.clone(), 0.0, lf - 1.0), pos),
            Padding::Reflection => expr::select(outside, reflect(ct, pos.clone(), lo, hi), pos),
        };
        // Tap t reads position base + t, weighted.
        let (base, weights): (E, Vec<E>) = match mode {
            Mode::Nearest => (pos, vec![c(1.0)]),
            Mode::Linear => {
                let b = expr::unary(UnOp::Floor, pos.clone());
                let t = expr::sub(pos, b.clone());
                (b, vec![expr::sub(c(1.0), t.clone()), t])
            }
            Mode::Cubic => {
                let b = expr::unary(UnOp::Floor, pos.clone());
                let t = expr::sub(pos, b.clone());
                (expr::sub(b, c(1.0)), cubic_weights(ct, t))
            }
        };
        let taps = weights
            .into_iter()
            .enumerate()
            .map(|(k, w)| {
                let at = if k == 0 {
                    base.clone()
                } else {
                    expr::add(base.clone(), c(k as f64))
                };
                let (index, valid) = pixel_index(ct, at, len, lo, hi, padding);
                (index, valid, w)
            })
            .collect();
        dims.push(taps);
    }
    // The taps depend on the output position, not the channel: per spatial dim, tables of
    // their indices (−1 for a `zeros` tap outside the input) and weights over
    // [N, O1, …, Or, taps], computed once, read by the per-channel sum below.
    let mut table_shape = shape_from(&gs[..=r]);
    table_shape.push(Dim::Known(taps_per_dim as i64));
    // Output vars (n, c, o…) → table vars (n, o…): c is not used by the taps.
    let mut remap: Vec<E> = vec![expr::var(0), expr::i(0)];
    remap.extend((1..=r as u32).map(expr::var));
    let tap_var = expr::var(r as u32 + 1);
    // The tap expressions read the grid as operand 1; the tables have it as operand 0.
    let to_table = |e: E| expr::remap_inputs(&expr::substitute_vars(&e, &remap), &[0, 0]);
    let by_tap = |f: &dyn Fn(&(E, Option<E>, E)) -> E, taps: &[(E, Option<E>, E)]| -> E {
        let mut e = to_table(f(&taps[taps.len() - 1]));
        for k in (0..taps.len() - 1).rev() {
            let here = expr::binary(BinOp::Eq, tap_var.clone(), expr::i(k as i64));
            e = expr::select(here, to_table(f(&taps[k])), e);
        }
        e
    };
    let mut inputs = vec![x];
    let mut tables = Vec::with_capacity(r);
    for taps in &dims {
        let index = by_tap(
            &|(idx, ok, _)| match ok {
                Some(ok) => expr::select(ok.clone(), idx.clone(), expr::i(-1)),
                None => idx.clone(),
            },
            taps,
        );
        let it = ctx.map(DType::I64, table_shape.clone(), vec![grid], index)?;
        inputs.push(it);
        let wt = if mode == Mode::Nearest {
            None
        } else {
            let weight = by_tap(&|(_, _, w)| w.clone(), taps);
            let wt = ctx.map(ct, table_shape.clone(), vec![grid], weight)?;
            inputs.push(wt);
            Some(inputs.len() as u32 - 1)
        };
        tables.push((inputs.len() as u32 - 1 - u32::from(wt.is_some()), wt));
    }
    // Then per tap combination (T = taps^r of them, combination t picks tap
    // (t / taps^(r−1−i)) mod taps of dim i): the flat offset into the input's spatial plane
    // (−1 where a `zeros` tap is outside) and the weights' product, over [N, O1, …, Or, T].
    let combos = taps_per_dim.pow(r as u32);
    let mut combo_shape = table_shape.clone();
    *combo_shape.last_mut().expect("taps dim") = Dim::Known(combos as i64);
    let plane: i64 = xs[2..].iter().product();
    let per_dim_at = |t: &E, i: usize| -> Vec<E> {
        let mut idx: Vec<E> = (0..=r as u32).map(expr::var).collect();
        let span = taps_per_dim.pow((r - 1 - i) as u32) as i64;
        idx.push(expr::imod(expr::idiv(t.clone(), span), taps_per_dim as i64));
        idx
    };
    let t = expr::var(r as u32 + 1);
    let mut offset: Option<E> = None;
    let mut valid: Option<E> = None;
    let mut weight: Option<E> = None;
    let mut stride = plane;
    for (i, &(it, wt)) in tables.iter().enumerate() {
        stride /= xs[2 + i];
        let raw = expr::load(DType::I64, it, per_dim_at(&t, i));
        let term = expr::mul(expr::clamp(raw.clone(), 0, xs[2 + i] - 1), expr::i(stride));
        offset = Some(match offset {
            None => term,
            Some(acc) => expr::add(acc, term),
        });
        if padding == Padding::Zeros {
            let ok = expr::ge(raw, expr::i(0));
            valid = Some(match valid {
                None => ok,
                Some(acc) => expr::and(acc, ok),
            });
        }
        if let Some(wt) = wt {
            let w = expr::load(ct, wt, per_dim_at(&t, i));
            weight = Some(match weight {
                None => w,
                Some(acc) => expr::mul(acc, w),
            });
        }
    }
    let offset = offset.expect("r ≥ 1");
    let offset = match valid {
        Some(ok) => expr::select(ok, offset, expr::i(-1)),
        None => offset,
    };
    let table_inputs = inputs[1..].to_vec();
    // The per-dim tables were operands 1.. of `inputs`; here they are 0..
    let shift: Vec<u32> = (0..=table_inputs.len() as u32)
        .map(|k| k.saturating_sub(1))
        .collect();
    let offsets = ctx.map(
        DType::I64,
        combo_shape.clone(),
        table_inputs.clone(),
        expr::remap_inputs(&offset, &shift),
    )?;
    let weights = match weight {
        Some(w) => Some(ctx.map(
            ct,
            combo_shape,
            table_inputs,
            expr::remap_inputs(&w, &shift),
        )?),
        None => None,
    };
    // Per channel: Σ_t weight · X[n, c, offset] (0 for an offset of −1), X seen as
    // [N, C, plane]: for float32, the runtime's tiled gather kernel; otherwise a map.
    let xv = ctx.reshape(x, shape_from(&[xs[0], xs[1], plane]))?;
    if dt == DType::F32 && ct == DType::F32 {
        let positions: i64 = gs[1..=r].iter().product();
        let flat = |ctx: &mut Ctx, v: ValueId| {
            ctx.reshape(v, shape_from(&[xs[0], positions, combos as i64]))
        };
        let mut operands = vec![xv, flat(ctx, offsets)?];
        if let Some(w) = weights {
            operands.push(flat(ctx, w)?);
        }
        let y = ctx.add(
            crate::ir::Op::kernel(crate::kernels::GatherSum {
                weighted: weights.is_some(),
            }),
            operands,
            crate::ir::TypeInfo::new(dt, shape_from(&[xs[0], xs[1], positions])),
        )?;
        let shape: Vec<Dim> = shape_from(&out_shape);
        return Ok(vec![ctx.reshape(y, shape)?]);
    }
    let mut main_inputs = vec![xv, offsets];
    main_inputs.extend(weights);
    let mut sum: Option<E> = None;
    for k in 0..combos {
        let mut at = vec![expr::var(0)];
        at.extend((0..r as u32).map(|j| expr::var(2 + j)));
        at.push(expr::i(k as i64));
        let off = expr::load(DType::I64, 1, at.clone());
        let mut v = expr::cast(
            expr::load(
                dt,
                0,
                vec![
                    expr::var(0),
                    expr::var(1),
                    expr::clamp(off.clone(), 0, plane - 1),
                ],
            ),
            ct,
        );
        if padding == Padding::Zeros {
            v = expr::select(expr::ge(off, expr::i(0)), v, c(0.0));
        }
        let term = if weights.is_some() {
            expr::mul(expr::load(ct, 2, at), v)
        } else {
            v
        };
        sum = Some(match sum {
            None => term,
            Some(acc) => expr::add(acc, term),
        });
    }
    let body = expr::cast(sum.expect("one tap"), dt);
    let shape: Vec<Dim> = shape_from(&out_shape);
    Ok(vec![ctx.map(dt, shape, main_inputs, body)?])
}

/// `v` clamped to `[lo, hi]` (NaN stays NaN; the index clamp catches it).
fn fclamp(ct: DType, v: E, lo: f64, hi: f64) -> E {
    expr::select(
        expr::binary(BinOp::Lt, v.clone(), expr::f(ct, lo)),
        expr::f(ct, lo),
        expr::select(
            expr::binary(BinOp::Gt, v.clone(), expr::f(ct, hi)),
            expr::f(ct, hi),
            v,
        ),
    )
}

/// The reference's `_gs_reflect`: `x` reflected by the near border until it lies in
/// `[lo, hi]` (`lo` when the range is empty).
fn reflect(ct: DType, x: E, lo: f64, hi: f64) -> E {
    let c = |v: f64| expr::f(ct, v);
    let range = hi - lo;
    if range <= 0.0 {
        return c(lo);
    }
    // Below: dx = lo − x; n = ⌊dx / range⌋; r = dx − n·range; even n → lo + r, odd → hi − r.
    // Above: dx = x − hi, the same with the borders swapped.
    let side = |dx: E, near: f64, far: f64, toward: f64| {
        let n = expr::unary(UnOp::Floor, expr::binary(BinOp::Div, dx.clone(), c(range)));
        let rem = expr::sub(dx, expr::mul(n.clone(), c(range)));
        let half = expr::mul(n, c(0.5));
        let even = expr::binary(BinOp::Eq, expr::unary(UnOp::Floor, half.clone()), half);
        let from_near = expr::add(c(near), expr::mul(c(toward), rem.clone()));
        let from_far = expr::sub(c(far), expr::mul(c(toward), rem));
        expr::select(even, from_near, from_far)
    };
    let below = side(expr::sub(c(lo), x.clone()), lo, hi, 1.0);
    let above = side(expr::sub(x.clone(), c(hi)), hi, lo, -1.0);
    expr::select(
        expr::binary(BinOp::Lt, x.clone(), c(lo)),
        below,
        expr::select(expr::binary(BinOp::Gt, x.clone(), c(hi)), above, x),
    )
}

/// The input index a tap at (integral) position `at` reads, clamped into `[0, len)`, and
/// for `zeros` padding whether it lies inside (the reference's `_pixel_at_array`).
fn pixel_index(ct: DType, at: E, len: i64, lo: f64, hi: f64, padding: Padding) -> (E, Option<E>) {
    let clamp_index = |f: E| expr::clamp(expr::cast(f, DType::I64), 0, len - 1);
    match padding {
        Padding::Zeros => {
            let i = expr::cast(at, DType::I64);
            let ok = expr::and(
                expr::ge(i.clone(), expr::i(0)),
                expr::lt(i.clone(), expr::i(len)),
            );
            (expr::clamp(i, 0, len - 1), Some(ok))
        }
        Padding::Border => (clamp_index(at), None),
        // int(reflect(i)): truncated toward zero.
        Padding::Reflection => (
            clamp_index(expr::unary(UnOp::Trunc, reflect(ct, at, lo, hi))),
            None,
        ),
    }
}

/// Keys' cubic convolution weights (α = −0.75) of the taps at −1, 0, 1, 2 for a fractional
/// offset `t` in [0, 1).
fn cubic_weights(ct: DType, t: E) -> Vec<E> {
    let c = |v: f64| expr::f(ct, v);
    let a = -0.75;
    // Outer taps (distance d in [1, 2)): ((a·d − 5a)·d + 8a)·d − 4a.
    let outer = |d: E| {
        expr::sub(
            expr::mul(
                expr::add(
                    expr::mul(expr::sub(expr::mul(c(a), d.clone()), c(5.0 * a)), d.clone()),
                    c(8.0 * a),
                ),
                d,
            ),
            c(4.0 * a),
        )
    };
    // Inner taps (distance d in [0, 1]): ((a + 2)·d − (a + 3))·d·d + 1.
    let inner = |d: E| {
        expr::add(
            expr::mul(
                expr::mul(
                    expr::sub(expr::mul(c(a + 2.0), d.clone()), c(a + 3.0)),
                    d.clone(),
                ),
                d,
            ),
            c(1.0),
        )
    };
    let one_minus = expr::sub(c(1.0), t.clone());
    vec![
        outer(expr::add(t.clone(), c(1.0))),
        inner(t.clone()),
        inner(one_minus.clone()),
        outer(expr::add(one_minus, c(1.0))),
    ]
}

/// AffineGrid (opset 20): `grid[n, …, j] = Σ_k theta[n, j, k] · base_k`, the base positions
/// `(x, y[, z], 1)` evenly spaced in [-1, 1] as onnx's reference evaluator spaces them
/// (float64, then rounded to the output type). `size` is a constant, or a run-time input
/// whose N and spatial sizes must match the declared output shape (checked when the model
/// runs; its C is not used).
pub fn affine_grid(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let theta = ctx.input(0)?;
    let size = ctx.input(1)?;
    let dt = build::expect_types(ctx, theta, "input theta", FLOATS)?;
    build::expect_types(ctx, size, "input size", &[DType::I64])?;
    let ts = ctx.known_shape(theta)?;
    let r = match ts.as_slice() {
        [_, 2, 3] => 2,
        [_, 3, 4] => 3,
        _ => {
            return Err(ctx.err(format!(
                "input theta has shape {ts:?}; it must be (N, 2, 3) for 2-D or (N, 3, 4) for 3-D"
            )));
        }
    };
    // [N, spatial…]
    let dims: Vec<i64> = if ctx.is_runtime(size) {
        let declared = ctx.declared_shape(0, "input size")?;
        if declared.len() != r + 2 || declared[r + 1] != r as i64 {
            return Err(ctx.err(format!(
                "output 0 is declared {declared:?}; for theta of shape {ts:?} it must be (N, \
                 {}, {r})",
                if r == 2 { "H, W" } else { "D, H, W" }
            )));
        }
        if ctx.known_shape(size)? != [r as i64 + 2] {
            return Err(ctx.err(format!("input size must hold {} values", r + 2)));
        }
        let dims = declared[..=r].to_vec();
        // size[0] = N and size[2..] = the spatial sizes (size[1] is C, unused).
        let expected = ctx.constant(crate::ir::Tensor::from_i64s(vec![r as i64 + 1], &dims));
        let pos = |k: E| {
            expr::select(
                expr::binary(BinOp::Eq, k.clone(), expr::i(0)),
                expr::i(0),
                expr::add(k, expr::i(1)),
            )
        };
        let cond = expr::binary(
            BinOp::Eq,
            expr::load(DType::I64, 0, vec![pos(expr::var(0))]),
            expr::load(DType::I64, 1, vec![expr::var(0)]),
        );
        ctx.assert_expr(
            vec![r as i64 + 1],
            vec![size, expected],
            cond,
            onnxc_runtime::abi::ONNXC_ERR_SHAPE,
        )?;
        dims
    } else {
        let v = ctx.const_ints(size, "input size")?;
        if v.len() != r + 2 {
            return Err(ctx.err(format!(
                "input size is {v:?}; it must hold {} values",
                r + 2
            )));
        }
        let mut dims = vec![v[0]];
        dims.extend_from_slice(&v[2..]);
        dims
    };
    if dims[0] != ts[0] || dims.iter().any(|&d| d < 0) {
        return Err(ctx.err(format!(
            "the grid's size is {dims:?} (N, spatial sizes); N must be theta's {} and no size \
             negative",
            ts[0]
        )));
    }
    let align = ctx.attr_i_or("align_corners", 0)? != 0;
    let ct = DType::F64;
    // Position i of `len` evenly spaced ones, as numpy's arange in the reference computes it.
    let position = |i: E, len: i64| -> E {
        let i = expr::cast(i, ct);
        let l = len as f64;
        if align {
            if len <= 1 {
                expr::f(ct, -1.0)
            } else {
                expr::add(
                    expr::f(ct, -1.0),
                    expr::mul(i, expr::f(ct, 2.0 / (l - 1.0))),
                )
            }
        } else {
            let step = 2.0 / l;
            expr::add(
                expr::f(ct, -1.0 + step / 2.0),
                expr::mul(i, expr::f(ct, step)),
            )
        }
    };
    // Output vars: n, spatial (outermost first), j. Base: x over the last spatial dim, y over
    // the one before, (z over the first in 3-D), then 1.
    let j = expr::var(r as u32 + 1);
    let mut base: Vec<E> = (0..r)
        .map(|k| position(expr::var((r - k) as u32), dims[r - k]))
        .collect();
    base.push(expr::f(ct, 1.0));
    let mut sum: Option<E> = None;
    for (k, b) in base.into_iter().enumerate() {
        let t = expr::cast(
            expr::load(dt, 0, vec![expr::var(0), j.clone(), expr::i(k as i64)]),
            ct,
        );
        let term = expr::mul(t, b);
        sum = Some(match sum {
            None => term,
            Some(acc) => expr::add(acc, term),
        });
    }
    let mut out: Vec<Dim> = shape_from(&dims);
    out.push(Dim::Known(r as i64));
    Ok(vec![ctx.map(
        dt,
        out,
        vec![theta],
        expr::cast(sum.expect("r + 1 terms"), dt),
    )?])
}
