//! Pad (every mode, constant or run-time pads) and CenterCropPad: maps whose indices are
//! clamped or reflected into the input.

use crate::error::Result;
use crate::frontend::build;
use crate::frontend::ctx::Ctx;
use crate::ir::dim::{Dim, Shape};
use crate::ir::expr::{self, BinOp, E};
use crate::ir::graph::ReduceKind;
use crate::ir::{DType, Scalar, ValueId};

pub fn pad(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let dims = ctx.known_shape(x)?;
    let r = dims.len();
    let dt = ctx.dtype(x);
    let mode = ctx.attr_s_or("mode", "constant")?;
    let (pads, value, axes): (Vec<i64>, Scalar, Option<Vec<i64>>) = if ctx.opset < 11 {
        let pads = ctx
            .attr_ints(if ctx.opset < 2 { "paddings" } else { "pads" })
            .ok_or_else(|| ctx.err("attribute 'pads' is required"))?;
        (pads, Scalar::F(ctx.attr_f_or("value", 0.0)?), None)
    } else if [1, 2, 3]
        .iter()
        .any(|&i| ctx.opt_input(i).is_some_and(|v| ctx.is_runtime(v)))
    {
        return pad_runtime(ctx, x, &mode);
    } else {
        let pads = ctx.const_ints(ctx.input(1)?, "input 'pads'")?;
        let value = match ctx.opt_input(2) {
            Some(v) => match ctx.konst(v) {
                Some(t) if t.len() == 1 => t.get(0),
                Some(_) => return Err(ctx.err("constant_value must be a scalar")),
                None => {
                    return Err(
                        ctx.unsupported("constant_value computed at run time is not supported")
                    );
                }
            },
            None => Scalar::zero(dt),
        };
        let axes = match ctx.opt_input(3) {
            Some(a) => Some(ctx.const_ints(a, "input 'axes'")?),
            None => None,
        };
        (pads, value, axes)
    };
    let axes = match axes {
        Some(a) => build::axes(ctx, &a, r)?,
        None => (0..r).collect(),
    };
    let n = axes.len();
    if pads.len() != 2 * n {
        return Err(ctx.err(format!(
            "pads has {} values, expected {}",
            pads.len(),
            2 * n
        )));
    }
    let mut before = vec![0i64; r];
    let mut after = vec![0i64; r];
    for (j, &a) in axes.iter().enumerate() {
        before[a] = pads[j];
        after[a] = pads[n + j];
    }
    let mut shape = Vec::new();
    for k in 0..r {
        // Dim arithmetic: an overflow is reported by the shape check, not wrapped.
        let d = Dim::Known(dims[k]).add(before[k]).add(after[k]);
        if d.known().is_some_and(|d| d < 0) {
            return Err(ctx.err(format!("negative pads make dim {k} negative")));
        }
        shape.push(d);
    }
    let mut inside = expr::konst(DType::Bool, Scalar::B(true));
    let mut index = Vec::new();
    for k in 0..r {
        let p = expr::sub(expr::var(k as u32), expr::i(before[k]));
        let n = dims[k];
        let ix = match mode.as_str() {
            "constant" => {
                if before[k] > 0 || after[k] > 0 {
                    inside = expr::and(
                        inside,
                        expr::and(
                            expr::ge(p.clone(), expr::i(0)),
                            expr::lt(p.clone(), expr::i(n)),
                        ),
                    );
                }
                expr::clamp(p, 0, (n - 1).max(0))
            }
            "edge" => expr::clamp(p, 0, (n - 1).max(0)),
            "reflect" => {
                if n == 1 {
                    expr::i(0)
                } else {
                    // Reflect about the edges without repeating them: period 2(n-1).
                    let period = 2 * (n - 1);
                    let m = expr::imod(p, period);
                    expr::select(
                        expr::lt(m.clone(), expr::i(n)),
                        m.clone(),
                        expr::sub(expr::i(period), m),
                    )
                }
            }
            "wrap" => expr::imod(p, n.max(1)),
            other => return Err(ctx.err(format!("unknown pad mode '{other}'"))),
        };
        index.push(ix);
    }
    if dims.contains(&0) && mode != "constant" {
        return Err(ctx.err(format!("mode '{mode}' cannot pad an empty tensor")));
    }
    let v = expr::load(dt, 0, index);
    let body = if dims.contains(&0) {
        expr::konst(dt, value)
    } else {
        expr::select(inside, v, expr::konst(dt, value))
    };
    let inputs = if dims.contains(&0) { vec![] } else { vec![x] };
    Ok(vec![ctx.map(dt, shape, inputs, body)?])
}

/// Pad with run-time pads/value/axes: the output shape is the declared one; per-dim padding
/// before the data is computed at run time and checked against it.
fn pad_runtime(ctx: &mut Ctx, x: ValueId, mode: &str) -> Result<Vec<ValueId>> {
    use onnxc_runtime::abi::{ONNXC_ERR_SHAPE, ONNXC_ERR_VALUE};
    let out = ctx.declared_shape(0, "the pads")?;
    let dims = ctx.known_shape(x)?;
    let r = dims.len() as i64;
    if out.len() != dims.len() {
        return Err(ctx.err("declared output rank differs from the input rank"));
    }
    if dims.contains(&0) || out.contains(&0) {
        return Err(ctx.unsupported("run-time pads of empty tensors"));
    }
    let pads = build::flat_i64(ctx, ctx.input(1)?)?;
    let np = ctx.known_shape(pads)?[0];
    let axes = match ctx.opt_input(3) {
        Some(a) => build::flat_i64(ctx, a)?,
        None => ctx.constant(crate::ir::Tensor::from_i64s(
            vec![r],
            &(0..r).collect::<Vec<_>>(),
        )),
    };
    let n = ctx.known_shape(axes)?[0];
    if np != 2 * n {
        return Err(ctx.err(format!("pads has {np} values for {n} axes")));
    }
    let aj = expr::load(DType::I64, 1, vec![expr::var(1)]);
    let norm = expr::select(
        expr::lt(aj.clone(), expr::i(0)),
        expr::add(aj.clone(), expr::i(r)),
        aj,
    );
    let hit = expr::binary(BinOp::Eq, norm, expr::var(0));
    let pick = |off: i64| {
        expr::select(
            hit.clone(),
            expr::load(DType::I64, 0, vec![expr::add(expr::var(1), expr::i(off))]),
            expr::i(0),
        )
    };
    let shape_r = vec![Dim::Known(r)];
    let before = ctx.reduce(
        ReduceKind::Sum,
        vec![n],
        DType::I64,
        shape_r.clone(),
        vec![pads, axes],
        pick(0),
    )?;
    let after = ctx.reduce(
        ReduceKind::Sum,
        vec![n],
        DType::I64,
        shape_r,
        vec![pads, axes],
        pick(n),
    )?;
    let a0 = expr::load(DType::I64, 0, vec![expr::var(0)]);
    ctx.assert_expr(
        vec![n],
        vec![axes],
        expr::and(expr::ge(a0.clone(), expr::i(-r)), expr::lt(a0, expr::i(r))),
        ONNXC_ERR_VALUE,
    )?;
    let dimc = ctx.constant(crate::ir::Tensor::from_i64s(vec![r], &dims));
    let outc = ctx.constant(crate::ir::Tensor::from_i64s(vec![r], &out));
    let l = |k: u32| expr::load(DType::I64, k, vec![expr::var(0)]);
    let sum = expr::add(expr::add(l(0), l(1)), l(2));
    ctx.assert_expr(
        vec![r],
        vec![before, after, dimc, outc],
        expr::binary(BinOp::Eq, sum, l(3)),
        ONNXC_ERR_SHAPE,
    )?;
    let dt = ctx.dtype(x);
    let mut inputs = vec![x, before];
    let value = match ctx.opt_input(2) {
        Some(v) if mode == "constant" => {
            inputs.push(v);
            expr::cast(
                expr::load(ctx.dtype(v), 2, vec![expr::i(0); ctx.rank(v)]),
                dt,
            )
        }
        _ => expr::konst(dt, Scalar::zero(dt)),
    };
    let mut inside = expr::konst(DType::Bool, Scalar::B(true));
    let mut index = Vec::new();
    for (k, &d) in dims.iter().enumerate() {
        let p = expr::sub(
            expr::var(k as u32),
            expr::load(DType::I64, 1, vec![expr::i(k as i64)]),
        );
        let ix = match mode {
            "constant" => {
                inside = expr::and(
                    inside,
                    expr::and(
                        expr::ge(p.clone(), expr::i(0)),
                        expr::lt(p.clone(), expr::i(d)),
                    ),
                );
                expr::clamp(p, 0, d - 1)
            }
            "edge" => expr::clamp(p, 0, d - 1),
            "reflect" if d == 1 => expr::i(0),
            "reflect" => {
                let period = 2 * (d - 1);
                let m = expr::imod(p, period);
                expr::clamp(
                    expr::select(
                        expr::lt(m.clone(), expr::i(d)),
                        m.clone(),
                        expr::sub(expr::i(period), m),
                    ),
                    0,
                    d - 1,
                )
            }
            "wrap" => expr::imod(p, d),
            other => return Err(ctx.err(format!("unknown pad mode '{other}'"))),
        };
        index.push(ix);
    }
    let body = expr::select(inside, expr::load(dt, 0, index), value);
    let shape: Shape = out.iter().map(|&v| Dim::Known(v)).collect();
    Ok(vec![ctx.map(dt, shape, inputs, body)?])
}

/// CenterCropPad (opset 18): each listed axis cropped or zero-padded to its target size,
/// centered (the odd element goes to the end, as the reference evaluator does). The target
/// sizes are a constant, or a run-time input that must match the declared output shape
/// (checked when the model runs, `ONNXC_ERR_SHAPE`).
pub fn center_crop_pad(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let shape_v = ctx.input(1)?;
    let xs = ctx.known_shape(x)?;
    let r = xs.len();
    let axes = match ctx.attr_ints("axes") {
        Some(a) => build::axes(ctx, &a, r)?,
        None => (0..r).collect(),
    };
    let targets: Vec<i64> = if ctx.is_runtime(shape_v) {
        let declared = ctx.declared_shape(0, "input shape")?;
        if declared.len() != r {
            return Err(ctx.err(format!(
                "output 0 is declared {declared:?}, which does not have the input's rank {r}"
            )));
        }
        let t: Vec<i64> = axes.iter().map(|&a| declared[a]).collect();
        let flat = build::flat_i64(ctx, shape_v)?;
        if ctx.known_shape(flat)? != [t.len() as i64] {
            return Err(ctx.err(format!(
                "input shape must hold {} values (one per axis)",
                t.len()
            )));
        }
        build::assert_equals(ctx, flat, &t)?;
        t
    } else {
        ctx.const_ints(shape_v, "input shape")?
    };
    if targets.len() != axes.len() || targets.iter().any(|&t| t < 0) {
        return Err(ctx.err(format!(
            "input shape is {targets:?}; it needs one non-negative size per axis ({} axes)",
            axes.len()
        )));
    }
    let dt = ctx.dtype(x);
    let mut out = xs.clone();
    // Per dim: output index o reads input o + shift, inside [0, xs) (outside: padding).
    let mut shift = vec![0i64; r];
    for (&a, &t) in axes.iter().zip(&targets) {
        out[a] = t;
        shift[a] = if t <= xs[a] {
            (xs[a] - t) / 2
        } else {
            -((t - xs[a]) / 2)
        };
    }
    let mut inside: Option<E> = None;
    let index: Vec<E> = (0..r)
        .map(|d| {
            let i = expr::add(expr::var(d as u32), expr::i(shift[d]));
            if shift[d] < 0 || out[d] + shift[d] > xs[d] {
                let ok = expr::and(
                    expr::ge(i.clone(), expr::i(0)),
                    expr::lt(i.clone(), expr::i(xs[d])),
                );
                inside = Some(match inside.take() {
                    None => ok,
                    Some(acc) => expr::and(acc, ok),
                });
                expr::clamp(i, 0, xs[d] - 1)
            } else {
                i
            }
        })
        .collect();
    let load = expr::load(dt, 0, index);
    let body = match inside {
        Some(ok) if xs.iter().all(|&d| d > 0) => {
            expr::select(ok, load, expr::konst(dt, Scalar::zero(dt)))
        }
        Some(_) => expr::konst(dt, Scalar::zero(dt)),
        None => load,
    };
    let shape = crate::ir::dim::shape_from(&out);
    Ok(vec![ctx.map(dt, shape, vec![x], body)?])
}
