//! Shared building blocks for op builders: broadcasting, axis handling, elementwise maps,
//! reductions and transposes expressed as core ops.

use super::ctx::Ctx;
use crate::error::Result;
use crate::ir::dim::{Dim, Shape, fmt_shape};
use crate::ir::expr::{self, E};
use crate::ir::graph::ReduceKind;
use crate::ir::{DType, ValueId};

/// Numpy-style multidirectional broadcast of several shapes.
pub fn broadcast_shapes(ctx: &Ctx, shapes: &[Shape]) -> Result<Shape> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = Vec::with_capacity(rank);
    for k in 0..rank {
        let mut d = Dim::Known(1);
        for s in shapes {
            let off = rank - s.len();
            if k < off {
                continue;
            }
            let e = &s[k - off];
            d = match (&d, e) {
                (Dim::Known(1), _) => e.clone(),
                (_, Dim::Known(1)) => d,
                (a, b) if a == b => d,
                (Dim::Known(_), Dim::Known(_)) => {
                    let all: Vec<String> = shapes.iter().map(|s| fmt_shape(s)).collect();
                    return Err(ctx.err(format!(
                        "shapes {} are not broadcast-compatible",
                        all.join(" and ")
                    )));
                }
                _ => {
                    let all: Vec<String> = shapes.iter().map(|s| fmt_shape(s)).collect();
                    return Err(crate::error::Error::NeedShape(format!(
                        "{}: cannot tell whether shapes {} broadcast; fix the symbolic dims with --shape",
                        ctx.origin,
                        all.join(" and ")
                    )));
                }
            };
        }
        out.push(d);
    }
    Ok(out)
}

/// `values` broadcast to their common shape by copying elements (strings: pointers), those
/// already of that shape as they are; with the shape.
pub fn broadcast_all(ctx: &mut Ctx, values: &[ValueId]) -> Result<(Vec<ValueId>, Shape)> {
    let shapes: Vec<Shape> = values.iter().map(|&v| ctx.shape(v)).collect();
    let out = broadcast_shapes(ctx, &shapes)?;
    let mut operands = Vec::new();
    for (&v, s) in values.iter().zip(&shapes) {
        operands.push(if *s == out {
            v
        } else {
            let dt = ctx.dtype(v);
            let body = bload(dt, 0, s, &out);
            ctx.map(dt, out.clone(), vec![v], body)?
        });
    }
    Ok((operands, out))
}

/// Loads operand `input` (of shape `in_shape`) at the output position, broadcasting from the
/// right: size-1 dims read index 0.
pub fn bload(dtype: DType, input: u32, in_shape: &[Dim], out_shape: &[Dim]) -> E {
    let off = out_shape.len() - in_shape.len();
    let index = in_shape
        .iter()
        .enumerate()
        .map(|(k, d)| {
            if d.is_one() && !out_shape[k + off].is_one() {
                expr::i(0)
            } else {
                expr::var((k + off) as u32)
            }
        })
        .collect();
    expr::load(dtype, input, index)
}

/// Loads operand `input` at exactly the output index (same shape).
pub fn load_same(dtype: DType, input: u32, rank: usize) -> E {
    expr::load(dtype, input, (0..rank as u32).map(expr::var).collect())
}

/// An N-ary broadcasting elementwise op: `f` gets one loaded expression per operand.
pub fn elementwise(
    ctx: &mut Ctx,
    inputs: &[ValueId],
    out_dtype: DType,
    f: impl FnOnce(&[E]) -> E,
) -> Result<ValueId> {
    let shapes: Vec<Shape> = inputs.iter().map(|&v| ctx.shape(v)).collect();
    let out_shape = broadcast_shapes(ctx, &shapes)?;
    let loads: Vec<E> = inputs
        .iter()
        .enumerate()
        .map(|(k, &v)| bload(ctx.dtype(v), k as u32, &shapes[k], &out_shape))
        .collect();
    let body = f(&loads);
    debug_assert_eq!(body.dtype, out_dtype);
    ctx.map(out_dtype, out_shape, inputs.to_vec(), body)
}

/// A unary elementwise op keeping the operand's shape.
pub fn unary(
    ctx: &mut Ctx,
    v: ValueId,
    out_dtype: DType,
    f: impl FnOnce(E) -> E,
) -> Result<ValueId> {
    elementwise(ctx, &[v], out_dtype, |l| f(l[0].clone()))
}

/// Normalizes a possibly negative axis against `rank`.
pub fn axis(ctx: &Ctx, a: i64, rank: usize) -> Result<usize> {
    let r = rank as i64;
    if a < -r || a >= r {
        return Err(ctx.err(format!("axis {a} is out of range for rank {rank}")));
    }
    Ok(if a < 0 { (a + r) as usize } else { a as usize })
}

/// Normalizes a list of axes, rejecting duplicates.
pub fn axes(ctx: &Ctx, list: &[i64], rank: usize) -> Result<Vec<usize>> {
    let mut out = Vec::new();
    for &a in list {
        let a = axis(ctx, a, rank)?;
        if out.contains(&a) {
            return Err(ctx.err(format!("axis {a} appears twice in {list:?}")));
        }
        out.push(a);
    }
    Ok(out)
}

/// Transposes `v` by `perm` (output dim k is input dim perm[k]). A transpose of a
/// transpose is one transpose of the first one's operand, none where the two cancel (the
/// NHWC↔NCHW pairs around channels-last contrib ops, Transpose pairs in exports).
pub fn transpose(ctx: &mut Ctx, v: ValueId, perm: &[usize]) -> Result<ValueId> {
    let t = ctx.ty(v);
    if perm.iter().enumerate().all(|(k, &p)| k == p) {
        return Ok(v);
    }
    if let Some((src, inner)) = transpose_of(ctx, v)
        && inner.len() == perm.len()
    {
        let composed: Vec<usize> = perm.iter().map(|&p| inner[p]).collect();
        return transpose(ctx, src, &composed);
    }
    let shape: Shape = perm.iter().map(|&p| t.shape[p].clone()).collect();
    // If only size-1 dims move, the row-major order is unchanged: a reshape.
    let moved: Vec<usize> = perm
        .iter()
        .copied()
        .filter(|&p| !t.shape[p].is_one())
        .collect();
    if moved.windows(2).all(|w| w[0] < w[1]) {
        return ctx.reshape(v, shape);
    }
    let mut index = vec![expr::i(0); perm.len()];
    for (k, &p) in perm.iter().enumerate() {
        index[p] = expr::var(k as u32);
    }
    let body = expr::load(t.dtype, 0, index);
    ctx.map(t.dtype, shape, vec![v], body)
}

/// `(operand, perm)` when `v` is a transpose (`transpose`'s map: a load of its one operand
/// at a permutation of the output's index variables).
pub fn transpose_of(ctx: &Ctx, v: ValueId) -> Option<(ValueId, Vec<usize>)> {
    let node = ctx.g.node(v.node);
    let (crate::ir::Op::Map(m), [src]) = (&node.op, &node.inputs[..]) else {
        return None;
    };
    let expr::ExprKind::Load { input: 0, index } = &m.body.kind else {
        return None;
    };
    if v.slot != 0 || ctx.ty(*src).dtype != m.body.dtype || index.len() != ctx.rank(*src) {
        return None;
    }
    // Input dim p is read at output var index[p]: output dim k is input dim perm[k].
    let mut perm = vec![usize::MAX; index.len()];
    for (p, e) in index.iter().enumerate() {
        match e.kind {
            expr::ExprKind::Var(k)
                if (k as usize) < perm.len() && perm[k as usize] == usize::MAX =>
            {
                perm[k as usize] = p
            }
            _ => return None,
        }
    }
    // The whole operand, not a corner of it (a map reading x[v1, v0] over a smaller
    // shape is a slice too).
    let (from, to) = (&ctx.ty(*src).shape, &ctx.ty(v).shape);
    if perm.iter().enumerate().any(|(k, &p)| to[k] != from[p]) {
        return None;
    }
    Some((*src, perm))
}

/// Reduces `v` over `axes` with `kind`, applying `pre` to each element first.
/// With `keepdims` the reduced dims stay as 1.
pub fn reduce(
    ctx: &mut Ctx,
    v: ValueId,
    kind: ReduceKind,
    axes: &[usize],
    keepdims: bool,
    pre: impl FnOnce(E) -> E,
) -> Result<ValueId> {
    let t = ctx.ty(v);
    let in_dims = ctx.known_shape(v)?;
    let rank = t.shape.len();
    let mut out_shape = Vec::new();
    let mut extents = Vec::new();
    let mut index = Vec::with_capacity(rank);
    let mut out_var = 0u32;
    let mut out_rank = 0;
    for k in 0..rank {
        if !axes.contains(&k) || keepdims {
            out_rank += 1;
        }
    }
    let mut red_var = out_rank as u32;
    for k in 0..rank {
        if axes.contains(&k) {
            extents.push(in_dims[k]);
            index.push(expr::var(red_var));
            red_var += 1;
            if keepdims {
                out_shape.push(Dim::Known(1));
                out_var += 1;
            }
        } else {
            out_shape.push(t.shape[k].clone());
            index.push(expr::var(out_var));
            out_var += 1;
        }
    }
    let body = pre(expr::load(t.dtype, 0, index));
    let out_dtype = match kind {
        ReduceKind::ArgMax { .. } | ReduceKind::ArgMin { .. } => DType::I64,
        _ => body.dtype,
    };
    ctx.reduce(kind, extents, out_dtype, out_shape, vec![v], body)
}

/// Casts `v` to `dtype` (no-op if equal) as ONNX `Cast` does by default: a float8 or float4
/// target saturates (`cast_expr`).
pub fn cast(ctx: &mut Ctx, v: ValueId, dtype: DType) -> Result<ValueId> {
    cast_with(ctx, v, dtype, true)
}

/// `cast`, with `Cast`'s `saturate` attribute (it applies to float8 targets only).
pub fn cast_with(ctx: &mut Ctx, v: ValueId, dtype: DType, saturate: bool) -> Result<ValueId> {
    if ctx.dtype(v) == dtype {
        return Ok(v);
    }
    unary(ctx, v, dtype, |x| cast_expr(x, dtype, saturate))
}

/// `x` converted to `to`. To a float8 or float4 type, `saturate` clamps to the type's largest
/// finite value first (NaN stays NaN); without it values beyond overflow to infinity or NaN
/// (`onnxc_runtime::lowp`).
pub fn cast_expr(x: E, to: DType, saturate: bool) -> E {
    if !saturate || !to.is_lowp_float() || x.dtype == to {
        return expr::cast(x, to);
    }
    let m = onnxc_runtime::lowp::max_finite(to.onnx_code() as u32) as f64;
    let from = x.dtype;
    let clamped = if from.is_float() {
        expr::max(expr::min(x, expr::f(from, m)), expr::f(from, -m))
    } else if m < i64::MAX as f64 {
        expr::clamp(expr::cast(x, DType::I64), -(m as i64), m as i64)
    } else {
        x
    };
    expr::cast(clamped, to)
}

/// A scalar constant of `dtype`.
pub fn scalar(ctx: &mut Ctx, dtype: DType, v: f64) -> ValueId {
    ctx.constant(crate::ir::Tensor::scalar(
        dtype,
        crate::ir::Scalar::F(v).cast(dtype),
    ))
}

/// Checks that the operand's element type is one of `allowed`.
pub fn expect_types(ctx: &Ctx, v: ValueId, what: &str, allowed: &[DType]) -> Result<DType> {
    let dt = ctx.dtype(v);
    if allowed.contains(&dt) {
        Ok(dt)
    } else {
        Err(ctx.err(format!(
            "{what} has type {dt}, expected one of {}",
            allowed
                .iter()
                .map(|d| d.name())
                .collect::<Vec<_>>()
                .join(", ")
        )))
    }
}

pub const FLOATS: &[DType] = &[DType::F32, DType::F64, DType::F16, DType::BF16];

/// Index of a tensor of rank `rank` for a reduction over `axes`: kept dims use output vars,
/// reduced dims reduction vars (numbered after the output vars).
pub fn reduction_index(rank: usize, axes: &[usize], keepdims: bool) -> Vec<E> {
    let out_rank = if keepdims { rank } else { rank - axes.len() };
    let mut ov = 0u32;
    let mut rv = out_rank as u32;
    let mut index = Vec::with_capacity(rank);
    for k in 0..rank {
        if axes.contains(&k) {
            index.push(expr::var(rv));
            rv += 1;
            if keepdims {
                ov += 1;
            }
        } else {
            index.push(expr::var(ov));
            ov += 1;
        }
    }
    index
}

/// Reduces over `axes` of a tensor of `dims`; `body` gets the index into that tensor.
#[allow(
    clippy::too_many_arguments,
    reason = "a reduction has this many independent parts"
)]
pub fn reduce_over(
    ctx: &mut Ctx,
    dims: &[i64],
    axes: &[usize],
    keepdims: bool,
    kind: ReduceKind,
    dtype: DType,
    inputs: Vec<ValueId>,
    body: impl FnOnce(&[E]) -> E,
) -> Result<ValueId> {
    let index = reduction_index(dims.len(), axes, keepdims);
    let mut shape = Vec::new();
    let mut extents = Vec::new();
    for (k, &d) in dims.iter().enumerate() {
        if axes.contains(&k) {
            extents.push(d);
            if keepdims {
                shape.push(Dim::Known(1));
            }
        } else {
            shape.push(Dim::Known(d));
        }
    }
    let b = body(&index);
    ctx.reduce(kind, extents, dtype, shape, inputs, b)
}

/// Index into a keepdims-reduced tensor (size 1 at `axes`) from the full-rank output vars.
pub fn keep_index(rank: usize, axes: &[usize]) -> Vec<E> {
    (0..rank)
        .map(|k| {
            if axes.contains(&k) {
                expr::i(0)
            } else {
                expr::var(k as u32)
            }
        })
        .collect()
}

/// A run-time integer tensor as a flat i64 vector value.
pub fn flat_i64(ctx: &mut Ctx, v: ValueId) -> Result<ValueId> {
    let n = crate::ir::dim::num_elements(&ctx.shape(v));
    let c = cast(ctx, v, DType::I64)?;
    ctx.reshape(c, vec![n])
}

/// `v[k]` of a flat i64 operand `input`.
pub fn at(input: u32, k: i64) -> E {
    expr::load(DType::I64, input, vec![expr::i(k)])
}

/// Asserts that the flat i64 value `v` equals `expected` element-wise (ONNXC_ERR_SHAPE).
/// `v` must hold `expected.len()` values (a model error otherwise: the check reads each).
pub fn assert_equals(ctx: &mut Ctx, v: ValueId, expected: &[i64]) -> Result<()> {
    let n = expected.len() as i64;
    let len = ctx.known_shape(v)?.iter().product::<i64>();
    if len != n {
        return Err(ctx.err(format!(
            "a run-time shape operand holds {len} values; the shape the model declares \
             needs {n} ({expected:?})"
        )));
    }
    let e = ctx.constant(crate::ir::Tensor::from_i64s(vec![n], expected));
    let cond = expr::binary(
        expr::BinOp::Eq,
        expr::load(DType::I64, 0, vec![expr::var(0)]),
        expr::load(DType::I64, 1, vec![expr::var(0)]),
    );
    ctx.assert_expr(
        vec![n],
        vec![v, e],
        cond,
        onnxc_runtime::abi::ONNXC_ERR_SHAPE,
    )
}

/// The range of an integer type of up to 32 bits (wider ones saturate in the cast itself).
pub fn int_range(dt: DType) -> Option<(f64, f64)> {
    dt.int_range().map(|(lo, hi)| (lo as f64, hi as f64))
}

/// Checks that window values (`what`) are within ±`MAX_DIM`, the extents onnxc takes.
pub fn extents(ctx: &Ctx, what: &str, v: &[i64]) -> Result<()> {
    let most = crate::ir::dim::MAX_DIM;
    match v.iter().find(|x| x.unsigned_abs() > most as u64) {
        Some(x) => Err(ctx.err(format!(
            "{what} {v:?}: {x} is beyond ±{most} (2^31 - 1), the window extents onnxc takes"
        ))),
        None => Ok(()),
    }
}
