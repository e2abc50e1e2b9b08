//! Reductions: Reduce* (axes as attribute or, from opset 13/18, as an input), ArgMax/ArgMin.

use crate::error::Result;
use crate::frontend::build;
use crate::frontend::ctx::Ctx;
use crate::ir::expr::{self, BinOp, E, UnOp};
use crate::ir::graph::ReduceKind;
use crate::ir::{DType, ValueId};

#[derive(Copy, Clone, PartialEq)]
enum Flavor {
    Sum,
    Mean,
    Max,
    Min,
    Prod,
    L1,
    L2,
    LogSum,
    LogSumExp,
    SumSquare,
}

/// The reduction axes per the node's opset: attribute before `input_from`, input after.
fn reduce_axes(ctx: &Ctx, rank: usize, input_from: i64) -> Result<Vec<usize>> {
    let noop = ctx.attr_i_or("noop_with_empty_axes", 0)? != 0;
    let list: Option<Vec<i64>> = if ctx.opset >= input_from {
        match ctx.opt_input(1) {
            // An empty axes tensor needs no values, even when it is a run-time input.
            Some(v) if crate::ir::dim::num_elements(&ctx.shape(v)) == crate::ir::Dim::Known(0) => {
                Some(vec![])
            }
            Some(v) => Some(ctx.const_ints(v, "input 'axes'")?),
            None => None,
        }
    } else {
        ctx.attr_ints("axes")
    };
    match list {
        Some(l) if !l.is_empty() => build::axes(ctx, &l, rank),
        _ if noop => Ok(vec![]),
        _ => Ok((0..rank).collect()),
    }
}

fn reduce_op(ctx: &mut Ctx, flavor: Flavor) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let dt = ctx.dtype(x);
    let rank = ctx.rank(x);
    let input_from = if flavor == Flavor::Sum { 13 } else { 18 };
    if ctx.opset >= input_from
        && let Some(a) = ctx.opt_input(1)
        && ctx.is_runtime(a)
        && ctx.known_shape(a)?.iter().product::<i64>() > 0
    {
        return reduce_runtime_axes(ctx, flavor, x, a);
    }
    let axes = reduce_axes(ctx, rank, input_from)?;
    let keepdims = ctx.attr_i_or("keepdims", 1)? != 0;
    let needs_float = matches!(flavor, Flavor::L2 | Flavor::LogSum | Flavor::LogSumExp);
    if needs_float && !dt.is_float() {
        return Err(ctx.err(format!("input must be a float tensor, got {dt}")));
    }
    if dt == DType::Bool && !matches!(flavor, Flavor::Max | Flavor::Min) {
        return Err(ctx.err("bool input is only defined for ReduceMax and ReduceMin"));
    }
    let dims = ctx.known_shape(x)?;
    let count: i64 = axes.iter().map(|&a| dims[a]).product();
    let square = |v: E| expr::binary(BinOp::Mul, v.clone(), v);
    if flavor == Flavor::LogSumExp {
        // max + log(sum(exp(x - max))), with infinite maxima replaced by 0 as the reference does.
        let m = build::reduce(ctx, x, ReduceKind::Max, &axes, true, |v| v)?;
        let m_rank = ctx.rank(m);
        let safe_m = |v: E| {
            let inf = expr::binary(
                BinOp::Or,
                expr::unary(UnOp::IsPosInf, v.clone()),
                expr::unary(UnOp::IsNegInf, v.clone()),
            );
            expr::select(inf, expr::f(dt, 0.0), v)
        };
        let mut midx: Vec<E> = Vec::new();
        let mut xidx: Vec<E> = Vec::new();
        let mut extents = Vec::new();
        let mut out_shape = Vec::new();
        let mut ov = 0u32;
        let out_rank = if keepdims { rank } else { rank - axes.len() };
        let mut rv = out_rank as u32;
        for k in 0..rank {
            if axes.contains(&k) {
                xidx.push(expr::var(rv));
                midx.push(expr::i(0));
                extents.push(dims[k]);
                rv += 1;
                if keepdims {
                    out_shape.push(crate::ir::Dim::Known(1));
                    ov += 1;
                }
            } else {
                xidx.push(expr::var(ov));
                midx.push(expr::var(ov));
                out_shape.push(crate::ir::Dim::Known(dims[k]));
                ov += 1;
            }
        }
        let _ = m_rank;
        let body = expr::unary(
            UnOp::Exp,
            expr::binary(
                BinOp::Sub,
                expr::load(dt, 0, xidx),
                safe_m(expr::load(dt, 1, midx.clone())),
            ),
        );
        let s = ctx.reduce(
            ReduceKind::Sum,
            extents,
            dt,
            out_shape.clone(),
            vec![x, m],
            body,
        )?;
        let out_idx: Vec<E> = (0..out_rank as u32).map(expr::var).collect();
        // m is indexed like x with reduced dims at 0; map output coords back to m's coords.
        let mut m_at_out: Vec<E> = Vec::new();
        let mut ov = 0u32;
        for k in 0..rank {
            if axes.contains(&k) {
                m_at_out.push(expr::i(0));
                if keepdims {
                    ov += 1;
                }
            } else {
                m_at_out.push(expr::var(ov));
                ov += 1;
            }
        }
        let body = expr::binary(
            BinOp::Add,
            expr::unary(UnOp::Log, expr::load(dt, 0, out_idx)),
            safe_m(expr::load(dt, 1, m_at_out)),
        );
        return Ok(vec![ctx.map(dt, out_shape, vec![s, m], body)?]);
    }
    let (kind, pre): (ReduceKind, Box<dyn FnOnce(E) -> E>) = match flavor {
        Flavor::Sum | Flavor::Mean | Flavor::LogSum => (ReduceKind::Sum, Box::new(|v| v)),
        Flavor::Max => (ReduceKind::Max, Box::new(|v| v)),
        Flavor::Min => (ReduceKind::Min, Box::new(|v| v)),
        Flavor::Prod => (ReduceKind::Prod, Box::new(|v| v)),
        Flavor::L1 => (ReduceKind::Sum, Box::new(|v| expr::unary(UnOp::Abs, v))),
        Flavor::L2 | Flavor::SumSquare => (ReduceKind::Sum, Box::new(square)),
        Flavor::LogSumExp => unreachable!("handled above"),
    };
    let r = build::reduce(ctx, x, kind, &axes, keepdims, pre)?;
    let post: Option<Box<dyn FnOnce(E) -> E>> = match flavor {
        Flavor::Mean => Some(Box::new(move |v| {
            expr::binary(BinOp::Div, v, expr::konst(dt, crate::ir::Scalar::I(count)))
        })),
        Flavor::L2 => Some(Box::new(|v| expr::unary(UnOp::Sqrt, v))),
        Flavor::LogSum => Some(Box::new(|v| expr::unary(UnOp::Log, v))),
        _ => None,
    };
    match post {
        None => Ok(vec![r]),
        Some(f) => Ok(vec![build::unary(ctx, r, dt, f)?]),
    }
}

pub fn reduce_sum(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    reduce_op(ctx, Flavor::Sum)
}
pub fn reduce_mean(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    reduce_op(ctx, Flavor::Mean)
}
pub fn reduce_max(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    reduce_op(ctx, Flavor::Max)
}
pub fn reduce_min(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    reduce_op(ctx, Flavor::Min)
}
pub fn reduce_prod(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    reduce_op(ctx, Flavor::Prod)
}
pub fn reduce_l1(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    reduce_op(ctx, Flavor::L1)
}
pub fn reduce_l2(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    reduce_op(ctx, Flavor::L2)
}
pub fn reduce_log_sum(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    reduce_op(ctx, Flavor::LogSum)
}
pub fn reduce_log_sum_exp(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    reduce_op(ctx, Flavor::LogSumExp)
}
pub fn reduce_sum_square(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    reduce_op(ctx, Flavor::SumSquare)
}

fn arg_reduce(ctx: &mut Ctx, max: bool) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let rank = ctx.rank(x);
    let axis = build::axis(ctx, ctx.attr_i_or("axis", 0)?, rank)?;
    let keepdims = ctx.attr_i_or("keepdims", 1)? != 0;
    let select_last = ctx.attr_i_or("select_last_index", 0)? != 0;
    if ctx.known_shape(x)?[axis] == 0 {
        return Err(ctx.err("cannot take ArgMax/ArgMin over an empty axis"));
    }
    let kind = if max {
        ReduceKind::ArgMax { select_last }
    } else {
        ReduceKind::ArgMin { select_last }
    };
    Ok(vec![build::reduce(ctx, x, kind, &[axis], keepdims, |v| v)?])
}

pub fn arg_max(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    arg_reduce(ctx, true)
}
pub fn arg_min(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    arg_reduce(ctx, false)
}

/// Reduction over axes given at run time. The output shape is the model's declared one; the
/// axes become a run-time mask, the reduction a scatter-combine of every input element into
/// its output position (one pass), and assertions check the axes against the declared shape.
fn reduce_runtime_axes(
    ctx: &mut Ctx,
    flavor: Flavor,
    x: ValueId,
    axes_v: ValueId,
) -> Result<Vec<ValueId>> {
    use crate::ir::graph::{Op, ScatterOp};
    use crate::ir::{Scalar, TypeInfo};
    use onnxc_runtime::abi::{ONNXC_ERR_SHAPE, ONNXC_ERR_VALUE};
    let dt = ctx.dtype(x);
    let dims = ctx.known_shape(x)?;
    let r = dims.len() as i64;
    let keepdims = ctx.attr_i_or("keepdims", 1)? != 0;
    let out = ctx.declared_shape(0, "the 'axes' input")?;
    let n = ctx.known_shape(axes_v)?.iter().product::<i64>();
    let axes = build::cast(ctx, axes_v, DType::I64)?;
    let axes = ctx.reshape(axes, vec![crate::ir::Dim::Known(n)])?;
    // Every axis in [-r, r).
    let a0 = expr::load(DType::I64, 0, vec![expr::var(0)]);
    let in_range = expr::and(expr::ge(a0.clone(), expr::i(-r)), expr::lt(a0, expr::i(r)));
    ctx.assert_expr(vec![n], vec![axes], in_range, ONNXC_ERR_VALUE)?;
    // mask[k] = 1 if axis k is reduced.
    let aj = expr::load(DType::I64, 0, vec![expr::var(1)]);
    let norm = expr::select(
        expr::lt(aj.clone(), expr::i(0)),
        expr::add(aj.clone(), expr::i(r)),
        aj,
    );
    let hit = expr::select(
        expr::binary(BinOp::Eq, norm, expr::var(0)),
        expr::i(1),
        expr::i(0),
    );
    let mask = ctx.reduce(
        ReduceKind::Max,
        vec![n],
        DType::I64,
        vec![crate::ir::Dim::Known(r)],
        vec![axes],
        hit,
    )?;
    let dims_c = ctx.constant(crate::ir::Tensor::from_i64s(vec![r], &dims));
    let m = |k: E| expr::binary(BinOp::Eq, expr::load(DType::I64, 1, vec![k]), expr::i(1));
    // Output positions: with keepdims the reduced dims become 1; without, the kept dims are
    // renumbered by a prefix count.
    let ur = dims.len();
    let mut index: Vec<E> = Vec::new();
    let mut scatter_inputs = vec![];
    if keepdims {
        if out.len() != ur {
            return Err(ctx.err(format!(
                "declared output rank {} differs from the input rank {ur} with keepdims=1",
                out.len()
            )));
        }
        let ok = expr::binary(
            BinOp::Eq,
            expr::select(
                m(expr::var(0)),
                expr::i(1),
                expr::load(DType::I64, 2, vec![expr::var(0)]),
            ),
            expr::load(DType::I64, 3, vec![expr::var(0)]),
        );
        let out_c = ctx.constant(crate::ir::Tensor::from_i64s(vec![r], &out));
        let mask_in = vec![axes_v, mask, dims_c, out_c];
        ctx.assert_expr(vec![r], mask_in, ok, ONNXC_ERR_SHAPE)?;
        for k in 0..ur {
            let mk = expr::binary(
                BinOp::Eq,
                expr::load(DType::I64, 2, vec![expr::i(k as i64)]),
                expr::i(1),
            );
            index.push(expr::clamp(
                expr::select(mk, expr::i(0), expr::var(k as u32)),
                0,
                out[k] - 1,
            ));
        }
        scatter_inputs.push(mask);
    } else {
        // pos[k] = number of kept dims before k.
        let kept_before = expr::select(
            expr::and(
                expr::lt(expr::var(1), expr::var(0)),
                expr::binary(
                    BinOp::Eq,
                    expr::load(DType::I64, 0, vec![expr::var(1)]),
                    expr::i(0),
                ),
            ),
            expr::i(1),
            expr::i(0),
        );
        let pos = ctx.reduce(
            ReduceKind::Sum,
            vec![r],
            DType::I64,
            vec![crate::ir::Dim::Known(r)],
            vec![mask],
            kept_before,
        )?;
        let kept: Vec<i64> = out.clone();
        let out_c = ctx.constant(crate::ir::Tensor::from_i64s(
            vec![kept.len().max(1) as i64],
            if kept.is_empty() { &[0] } else { &kept },
        ));
        let nk = kept.len() as i64;
        // Each kept dim k sits at pos[k] < rank(out) and has the declared size there.
        let p = expr::load(DType::I64, 1, vec![expr::var(0)]);
        let ok = expr::binary(
            BinOp::Or,
            expr::binary(
                BinOp::Eq,
                expr::load(DType::I64, 0, vec![expr::var(0)]),
                expr::i(1),
            ),
            expr::and(
                expr::lt(p.clone(), expr::i(nk)),
                expr::binary(
                    BinOp::Eq,
                    expr::load(DType::I64, 2, vec![expr::var(0)]),
                    expr::load(DType::I64, 3, vec![expr::clamp(p, 0, (nk - 1).max(0))]),
                ),
            ),
        );
        ctx.assert_expr(vec![r], vec![mask, pos, dims_c, out_c], ok, ONNXC_ERR_SHAPE)?;
        // The number of kept dims equals the declared rank.
        let count = ctx.reduce(
            ReduceKind::Sum,
            vec![r],
            DType::I64,
            vec![],
            vec![mask],
            expr::sub(expr::i(1), expr::load(DType::I64, 0, vec![expr::var(0)])),
        )?;
        ctx.assert_expr(
            vec![],
            vec![count],
            expr::binary(BinOp::Eq, expr::load(DType::I64, 0, vec![]), expr::i(nk)),
            ONNXC_ERR_SHAPE,
        )?;
        for (p, &len) in out.iter().enumerate() {
            let mut sum = expr::i(0);
            for k in 0..ur {
                let kept_here = expr::and(
                    expr::binary(
                        BinOp::Eq,
                        expr::load(DType::I64, 2, vec![expr::i(k as i64)]),
                        expr::i(0),
                    ),
                    expr::binary(
                        BinOp::Eq,
                        expr::load(DType::I64, 3, vec![expr::i(k as i64)]),
                        expr::i(p as i64),
                    ),
                );
                sum = expr::add(
                    sum,
                    expr::select(kept_here, expr::var(k as u32), expr::i(0)),
                );
            }
            index.push(expr::clamp(sum, 0, len - 1));
        }
        scatter_inputs.push(mask);
        scatter_inputs.push(pos);
    }
    let oshape: Vec<crate::ir::Dim> = out.iter().map(|&d| crate::ir::Dim::Known(d)).collect();
    let xv = expr::load(dt, 1, (0..ur as u32).map(expr::var).collect());
    let square = |v: E| expr::binary(BinOp::Mul, v.clone(), v);
    let (kind, value) = match flavor {
        Flavor::Sum | Flavor::Mean | Flavor::LogSum => (ReduceKind::Sum, xv),
        Flavor::Max => (ReduceKind::Max, xv),
        Flavor::Min => (ReduceKind::Min, xv),
        Flavor::Prod => (ReduceKind::Prod, xv),
        Flavor::L1 => (ReduceKind::Sum, expr::unary(UnOp::Abs, xv)),
        Flavor::L2 | Flavor::SumSquare => (ReduceKind::Sum, square(xv)),
        Flavor::LogSumExp => (ReduceKind::Max, xv),
    };
    let scatter =
        |ctx: &mut Ctx, kind: ReduceKind, value: E, extra: Vec<ValueId>| -> Result<ValueId> {
            let init = crate::ir::interp::reduce_init(kind, dt);
            let base = ctx.map(dt, oshape.clone(), vec![], expr::konst(dt, init))?;
            let mut ops = vec![base, x];
            ops.extend(extra);
            // Index expressions load mask (and pos) as operands 2 (and 3).
            let sc = ScatterOp {
                kind: Some(kind),
                extents: dims.clone(),
                index: index.clone(),
                value,
            };
            ctx.add(Op::Scatter(sc), ops, TypeInfo::new(dt, oshape.clone()))
        };
    let ops_extra = scatter_inputs.clone();
    let red = scatter(ctx, kind, value, ops_extra.clone())?;
    let orank = out.len();
    let ol = |k: u32| expr::load(dt, k, (0..orank as u32).map(expr::var).collect());
    let result = match flavor {
        Flavor::Mean => {
            // Divide by the number of reduced elements: the product of the masked dims.
            let mut cnt = expr::konst(dt, Scalar::I(1));
            for (k, &d) in dims.iter().enumerate() {
                let mk = expr::binary(
                    BinOp::Eq,
                    expr::load(DType::I64, 1, vec![expr::i(k as i64)]),
                    expr::i(1),
                );
                cnt = expr::binary(
                    BinOp::Mul,
                    cnt,
                    expr::select(
                        mk,
                        expr::konst(dt, Scalar::I(d)),
                        expr::konst(dt, Scalar::I(1)),
                    ),
                );
            }
            ctx.map(
                dt,
                oshape.clone(),
                vec![red, scatter_inputs[0]],
                expr::binary(BinOp::Div, ol(0), cnt),
            )?
        }
        Flavor::L2 => ctx.map(
            dt,
            oshape.clone(),
            vec![red],
            expr::unary(UnOp::Sqrt, ol(0)),
        )?,
        Flavor::LogSum => ctx.map(dt, oshape.clone(), vec![red], expr::unary(UnOp::Log, ol(0)))?,
        Flavor::LogSumExp => {
            // log(sum(exp(x - max))) + max, with infinite maxima replaced by 0.
            let safe = |e: E| {
                let inf = expr::binary(
                    BinOp::Or,
                    expr::unary(UnOp::IsPosInf, e.clone()),
                    expr::unary(UnOp::IsNegInf, e.clone()),
                );
                expr::select(inf, expr::f(dt, 0.0), e)
            };
            // Operands: base, x, mask[, pos], red (the index expressions read mask/pos at 2/3).
            let mut ordered = ops_extra.clone();
            ordered.push(red);
            let red_k = (ordered.len() + 1) as u32;
            let mx = expr::load(dt, red_k, index.clone());
            let value = expr::unary(
                UnOp::Exp,
                expr::binary(
                    BinOp::Sub,
                    expr::load(dt, 1, (0..ur as u32).map(expr::var).collect()),
                    safe(mx),
                ),
            );
            let s = scatter(ctx, ReduceKind::Sum, value, ordered)?;
            ctx.map(
                dt,
                oshape.clone(),
                vec![s, red],
                expr::binary(BinOp::Add, expr::unary(UnOp::Log, ol(0)), safe(ol(1))),
            )?
        }
        _ => red,
    };
    Ok(vec![result])
}
