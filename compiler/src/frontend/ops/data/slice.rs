//! Slice: constant parameters become one affine map; run-time starts/ends/axes/steps a
//! small parameter computation read by the data map, checked against the declared shape —
//! or, without one, along a single constant axis whose length becomes a data-dependent dim
//! (`ir::graph::DataDim`, returned through `NAME_run_shaped`).

use crate::error::Result;
use crate::frontend::build;
use crate::frontend::ctx::Ctx;
use crate::ir::dim::{Dim, Shape};
use crate::ir::expr::{self, BinOp, E};
use crate::ir::graph::ReduceKind;
use crate::ir::{DType, Scalar, ValueId};

/// Effective (start, step, length) of an ONNX slice along a dim of size `dim`.
pub fn slice_params(start: i64, end: i64, step: i64, dim: i64) -> (i64, i64) {
    let clampi = |v: i64, lo: i64, hi: i64| v.max(lo).min(hi);
    let norm = |v: i64| if v < 0 { v.saturating_add(dim) } else { v };
    let (s, e) = if step > 0 {
        (clampi(norm(start), 0, dim), clampi(norm(end), 0, dim))
    } else {
        (
            clampi(norm(start), 0, dim - 1),
            clampi(norm(end), -1, dim - 1),
        )
    };
    // Without overflow for any step (i64::MIN included): s and e lie within [-1, dim].
    let len = if step > 0 && e > s {
        (e - s - 1) / step + 1
    } else if step < 0 && s > e {
        ((s - e - 1) as u64 / step.unsigned_abs()) as i64 + 1
    } else {
        0
    };
    (s, len)
}

pub fn slice(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let dims = ctx.known_shape(x)?;
    let rank = dims.len();
    let (starts, ends, axes, steps) = if ctx.opset < 10 {
        let starts = ctx
            .attr_ints("starts")
            .ok_or_else(|| ctx.err("attribute 'starts' is required"))?;
        let ends = ctx
            .attr_ints("ends")
            .ok_or_else(|| ctx.err("attribute 'ends' is required"))?;
        let axes = ctx.attr_ints("axes");
        (starts, ends, axes, None)
    } else if (1..5).any(|i| ctx.opt_input(i).is_some_and(|v| ctx.is_runtime(v))) {
        return slice_runtime(ctx, x);
    } else {
        let starts = ctx.const_ints(ctx.input(1)?, "input 'starts'")?;
        let ends = ctx.const_ints(ctx.input(2)?, "input 'ends'")?;
        let axes = match ctx.opt_input(3) {
            Some(a) => Some(ctx.const_ints(a, "input 'axes'")?),
            None => None,
        };
        let steps = match ctx.opt_input(4) {
            Some(s) => Some(ctx.const_ints(s, "input 'steps'")?),
            None => None,
        };
        (starts, ends, axes, steps)
    };
    let n = starts.len();
    let axes = match axes {
        Some(a) => build::axes(ctx, &a, rank)?,
        None => (0..n).collect(),
    };
    let steps = steps.unwrap_or_else(|| vec![1; n]);
    if ends.len() != n || axes.len() != n || steps.len() != n {
        return Err(ctx.err(format!(
            "starts, ends, axes and steps must have the same length, got {n}, {}, {}, {}",
            ends.len(),
            axes.len(),
            steps.len()
        )));
    }
    let mut first = vec![0i64; rank];
    let mut stride = vec![1i64; rank];
    let mut shape = dims.clone();
    for j in 0..n {
        if steps[j] == 0 {
            return Err(ctx.err("slice step must not be 0"));
        }
        let a = axes[j];
        let (s, len) = slice_params(starts[j], ends[j], steps[j], dims[a]);
        first[a] = s;
        // One element (or none) takes no step: a huge step would only overflow the index
        // arithmetic's bounds.
        stride[a] = if len > 1 { steps[j] } else { 1 };
        shape[a] = len;
    }
    let dt = ctx.dtype(x);
    let index: Vec<E> = (0..rank)
        .map(|k| {
            expr::add(
                expr::i(first[k]),
                expr::mul(expr::var(k as u32), expr::i(stride[k])),
            )
        })
        .collect();
    let out: Shape = shape.iter().map(|&d| Dim::Known(d)).collect();
    if out.iter().zip(&dims).all(|(a, b)| *a == Dim::Known(*b))
        && first.iter().all(|&f| f == 0)
        && stride.iter().all(|&s| s == 1)
    {
        return Ok(vec![x]);
    }
    Ok(vec![ctx.map(dt, out, vec![x], expr::load(dt, 0, index))?])
}

/// Slice with run-time starts/ends/axes/steps. The output shape is the declared one; a small
/// computation turns the parameters into a first index and a step per input dim (loaded by the
/// data map, whose indices are clamped in bounds), and the lengths are checked at run time.
fn slice_runtime(ctx: &mut Ctx, x: ValueId) -> Result<Vec<ValueId>> {
    use onnxc_runtime::abi::{ONNXC_ERR_SHAPE, ONNXC_ERR_VALUE};
    let dims = ctx.known_shape(x)?;
    let r = dims.len() as i64;
    // Without a declared shape: one constant axis, its length at most the input's.
    let (out, rows) = match ctx.declared.first().cloned().flatten() {
        Some((_, out)) => (out, None),
        None => {
            let n = ctx.known_shape(ctx.input(1)?)?.iter().product::<i64>();
            let axes = match ctx.opt_input(3) {
                Some(a) => ctx.konst(a).map(|t| t.to_i64s()),
                None => Some((0..n).collect()),
            };
            match axes.as_deref() {
                Some(&[a]) if (-r..r).contains(&a) => {
                    let a = a.rem_euclid(r) as usize;
                    (dims.clone(), Some(a))
                }
                _ => {
                    return Err(ctx.unsupported(
                        "the slice parameters are computed at run time and the model declares \
                         no static output shape; onnxc computes such a slice along one \
                         constant axis only (declare the output shape in value_info, or make \
                         the parameters constants)",
                    ));
                }
            }
        }
    };
    if out.len() != dims.len() {
        return Err(ctx.err("declared output rank differs from the input rank"));
    }
    let starts = build::flat_i64(ctx, ctx.input(1)?)?;
    let ends = build::flat_i64(ctx, ctx.input(2)?)?;
    let n = ctx.known_shape(starts)?[0];
    if n > r {
        return Err(ctx.err(format!(
            "'starts' has {n} entries, more than the input's {r} axes"
        )));
    }
    let axes = match ctx.opt_input(3) {
        Some(a) => build::flat_i64(ctx, a)?,
        None => ctx.constant(crate::ir::Tensor::from_i64s(
            vec![n],
            &(0..n).collect::<Vec<_>>(),
        )),
    };
    let steps = match ctx.opt_input(4) {
        Some(a) => build::flat_i64(ctx, a)?,
        None => ctx.constant(crate::ir::Tensor::from_i64s(vec![n], &vec![1; n as usize])),
    };
    let dimc = ctx.constant(crate::ir::Tensor::from_i64s(vec![r], &dims));
    let outc = ctx.constant(crate::ir::Tensor::from_i64s(vec![r], &out));
    // Operands: 0 starts, 1 ends, 2 axes, 3 steps, 4 dims, 5 out. Var 0: input dim d; var 1: j.
    let ops = vec![starts, ends, axes, steps, dimc, outc];
    let (d, j) = (expr::var(0), expr::var(1));
    let a = expr::load(DType::I64, 2, vec![j.clone()]);
    let norm_a = expr::select(
        expr::lt(a.clone(), expr::i(0)),
        expr::add(a.clone(), expr::i(r)),
        a.clone(),
    );
    let hit = expr::binary(BinOp::Eq, norm_a, d.clone());
    let dim = expr::load(DType::I64, 4, vec![d.clone()]);
    let st = expr::load(DType::I64, 3, vec![j.clone()]);
    let pos = expr::binary(BinOp::Gt, st.clone(), expr::i(0));
    let normv = |v: E| {
        expr::select(
            expr::lt(v.clone(), expr::i(0)),
            expr::add(v.clone(), dim.clone()),
            v,
        )
    };
    let clampv = |v: E, lo: E, hi: E| expr::binary(BinOp::Max, expr::binary(BinOp::Min, v, hi), lo);
    let s_eff = expr::select(
        pos.clone(),
        clampv(
            normv(expr::load(DType::I64, 0, vec![j.clone()])),
            expr::i(0),
            dim.clone(),
        ),
        clampv(
            normv(expr::load(DType::I64, 0, vec![j.clone()])),
            expr::i(0),
            expr::sub(dim.clone(), expr::i(1)),
        ),
    );
    let e_eff = expr::select(
        pos.clone(),
        clampv(
            normv(expr::load(DType::I64, 1, vec![j.clone()])),
            expr::i(0),
            dim.clone(),
        ),
        clampv(
            normv(expr::load(DType::I64, 1, vec![j.clone()])),
            expr::i(-1),
            expr::sub(dim.clone(), expr::i(1)),
        ),
    );
    // A step of magnitude past 2^62 takes one element as 2^62 does (no dim is that long),
    // and keeps the length's arithmetic (and -step) from overflowing at i64::MAX and MIN.
    let safe_st = expr::select(
        expr::binary(BinOp::Eq, st.clone(), expr::i(0)),
        expr::i(1),
        clampv(st.clone(), expr::i(-(1 << 62)), expr::i(1 << 62)),
    );
    let len_pos = expr::binary(
        BinOp::Div,
        expr::add(
            expr::sub(e_eff.clone(), s_eff.clone()),
            expr::sub(safe_st.clone(), expr::i(1)),
        ),
        safe_st.clone(),
    );
    let neg_st = expr::unary(crate::ir::expr::UnOp::Neg, safe_st.clone());
    let len_neg = expr::binary(
        BinOp::Div,
        expr::add(
            expr::sub(s_eff.clone(), e_eff),
            expr::sub(neg_st.clone(), expr::i(1)),
        ),
        neg_st,
    );
    let len = expr::binary(BinOp::Max, expr::select(pos, len_pos, len_neg), expr::i(0));
    let zero = expr::i(0);
    let shape_r = vec![Dim::Known(r)];
    let first = ctx.reduce(
        ReduceKind::Sum,
        vec![n],
        DType::I64,
        shape_r.clone(),
        ops.clone(),
        expr::select(hit.clone(), s_eff, zero.clone()),
    )?;
    let step_sum = ctx.reduce(
        ReduceKind::Sum,
        vec![n],
        DType::I64,
        shape_r.clone(),
        ops.clone(),
        expr::select(hit.clone(), st.clone(), zero.clone()),
    )?;
    let hits = ctx.reduce(
        ReduceKind::Sum,
        vec![n],
        DType::I64,
        shape_r.clone(),
        ops.clone(),
        expr::select(hit.clone(), expr::i(1), zero.clone()),
    )?;
    let lens = ctx.reduce(
        ReduceKind::Sum,
        vec![n],
        DType::I64,
        shape_r.clone(),
        ops.clone(),
        expr::select(hit, len, zero),
    )?;
    // Axes in range, steps non-zero.
    let aj = expr::load(DType::I64, 2, vec![expr::var(0)]);
    let sj = expr::load(DType::I64, 3, vec![expr::var(0)]);
    let valid = expr::and(
        expr::and(expr::ge(aj.clone(), expr::i(-r)), expr::lt(aj, expr::i(r))),
        expr::unary(
            crate::ir::expr::UnOp::Not,
            expr::binary(BinOp::Eq, sj, expr::i(0)),
        ),
    );
    ctx.assert_expr(vec![n], ops.clone(), valid, ONNXC_ERR_VALUE)?;
    // Each dim: sliced once at most, and its length is the declared one.
    let h = expr::load(DType::I64, 0, vec![expr::var(0)]);
    let l = expr::load(DType::I64, 1, vec![expr::var(0)]);
    let dd = expr::load(DType::I64, 2, vec![expr::var(0)]);
    let o = expr::load(DType::I64, 3, vec![expr::var(0)]);
    let len_ok = expr::select(
        expr::binary(BinOp::Eq, h.clone(), expr::i(0)),
        expr::binary(BinOp::Eq, dd, o.clone()),
        expr::and(
            expr::binary(BinOp::Eq, h, expr::i(1)),
            expr::binary(BinOp::Eq, l, o),
        ),
    );
    if rows.is_none() {
        ctx.assert_expr(
            vec![r],
            vec![hits, lens, dimc, outc],
            len_ok,
            ONNXC_ERR_SHAPE,
        )?;
    }
    // Data: out[i] = x[first[d] + i_d * step[d]], clamped in bounds.
    let rr = dims.len();
    let index: Vec<E> = (0..rr)
        .map(|k| {
            let kk = expr::i(k as i64);
            let stp = expr::load(DType::I64, 2, vec![kk.clone()]);
            let hk = expr::load(DType::I64, 3, vec![kk.clone()]);
            let stp = expr::select(expr::binary(BinOp::Eq, hk, expr::i(0)), expr::i(1), stp);
            let p = expr::add(
                expr::load(DType::I64, 1, vec![kk]),
                expr::mul(expr::var(k as u32), stp),
            );
            expr::clamp(p, 0, (dims[k] - 1).max(0))
        })
        .collect();
    let dt = ctx.dtype(x);
    let shape: Shape = out.iter().map(|&v| Dim::Known(v)).collect();
    if out.contains(&0) {
        return Ok(vec![ctx.map(
            dt,
            shape,
            vec![],
            expr::konst(dt, Scalar::zero(dt)),
        )?]);
    }
    let y = ctx.map(
        dt,
        shape,
        vec![x, first, step_sum, hits],
        expr::load(dt, 0, index),
    )?;
    if let Some(axis) = rows {
        // Its first `lens[axis]` slices are the result; the others read clamped positions.
        let count = ctx.map(
            DType::I64,
            vec![],
            vec![lens],
            expr::load(DType::I64, 0, vec![expr::i(axis as i64)]),
        )?;
        ctx.g.mark_rows(y, count, dims[axis], axis);
    }
    Ok(vec![y])
}

#[cfg(test)]
mod tests {
    use super::slice_params;

    /// The indices ONNX's clamping gives (start in [0, dim] or [0, dim - 1], end in [0, dim]
    /// or [-1, dim - 1] by the step's sign), walked one by one.
    fn walk(start: i64, end: i64, step: i64, dim: i64) -> Vec<i64> {
        let norm = |v: i64| if v < 0 { v.saturating_add(dim) } else { v };
        let (mut i, e) = if step > 0 {
            (norm(start).clamp(0, dim), norm(end).clamp(0, dim))
        } else {
            (
                norm(start).max(0).min(dim - 1),
                norm(end).clamp(-1, dim - 1),
            )
        };
        let mut out = Vec::new();
        while (step > 0 && i < e) || (step < 0 && i > e) {
            out.push(i);
            match i.checked_add(step) {
                Some(n) => i = n,
                None => break,
            }
        }
        out
    }

    #[test]
    fn matches_an_element_walk_for_every_step_and_bound() {
        let extremes = [i64::MIN, i64::MIN + 1, -9, -5, -1, 0, 1, 3, 5, 9, i64::MAX];
        let steps = [i64::MIN, -7, -2, -1, 1, 2, 3, i64::MAX];
        for dim in [0, 1, 5, 8] {
            for &start in &extremes {
                for &end in &extremes {
                    for &step in &steps {
                        let want = walk(start, end, step, dim);
                        let (s, len) = slice_params(start, end, step, dim);
                        assert_eq!(len as usize, want.len(), "{start} {end} {step} {dim}");
                        if let Some(&first) = want.first() {
                            assert_eq!(s, first, "{start} {end} {step} {dim}");
                        }
                    }
                }
            }
        }
    }
}
