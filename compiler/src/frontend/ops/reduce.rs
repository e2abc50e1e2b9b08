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
            expr::binary(BinOp::Sub, expr::load(dt, 0, xidx), safe_m(expr::load(dt, 1, midx.clone()))),
        );
        let s = ctx.reduce(ReduceKind::Sum, extents, dt, out_shape.clone(), vec![x, m], body)?;
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
        Flavor::Mean => Some(Box::new(move |v| expr::binary(BinOp::Div, v, expr::konst(dt, crate::ir::Scalar::I(count))))),
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
    let kind = if max { ReduceKind::ArgMax { select_last } } else { ReduceKind::ArgMin { select_last } };
    Ok(vec![build::reduce(ctx, x, kind, &[axis], keepdims, |v| v)?])
}

pub fn arg_max(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    arg_reduce(ctx, true)
}
pub fn arg_min(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    arg_reduce(ctx, false)
}
