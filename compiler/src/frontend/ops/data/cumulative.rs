//! CumSum and CumProd: prefix reductions along an axis (constant or run-time).

use super::vars;
use crate::error::Result;
use crate::frontend::build;
use crate::frontend::ctx::Ctx;
use crate::ir::expr::{self, BinOp};
use crate::ir::graph::ReduceKind;
use crate::ir::{DType, ValueId};

fn cumulative(ctx: &mut Ctx, kind: ReduceKind) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let dims = ctx.known_shape(x)?;
    let r = dims.len();
    if ctx.is_runtime(ctx.input(1)?) {
        return cumulative_runtime_axis(ctx, kind, x, &dims);
    }
    let axis = ctx.const_ints(ctx.input(1)?, "input 'axis'")?;
    let axis = build::axis(
        ctx,
        *axis
            .first()
            .ok_or_else(|| ctx.err("axis must hold one value"))?,
        r,
    )?;
    let exclusive = ctx.attr_i_or("exclusive", 0)? != 0;
    let reverse = ctx.attr_i_or("reverse", 0)? != 0;
    let dt = ctx.dtype(x);
    let n = dims[axis];
    // out[i] = fold over j of x[.., j, ..] where j ≤ i (or j ≥ i reversed; strict if exclusive).
    let (i, j) = (expr::var(axis as u32), expr::var(r as u32));
    let take = match (reverse, exclusive) {
        (false, false) => expr::binary(BinOp::Le, j.clone(), i),
        (false, true) => expr::lt(j.clone(), i),
        (true, false) => expr::ge(j.clone(), i),
        (true, true) => expr::binary(BinOp::Gt, j.clone(), i),
    };
    let mut index = vars(r);
    index[axis] = j;
    let neutral = crate::ir::interp::reduce_init(kind, dt);
    let body = expr::select(take, expr::load(dt, 0, index), expr::konst(dt, neutral));
    let shape = ctx.shape(x);
    Ok(vec![ctx.reduce(kind, vec![n], dt, shape, vec![x], body)?])
}

/// CumSum/CumProd along an axis given at run time: one reduction whose index expressions
/// select the axis (clamped in bounds), with the axis checked to be in range.
fn cumulative_runtime_axis(
    ctx: &mut Ctx,
    kind: ReduceKind,
    x: ValueId,
    dims: &[i64],
) -> Result<Vec<ValueId>> {
    let r = dims.len();
    let exclusive = ctx.attr_i_or("exclusive", 0)? != 0;
    let reverse = ctx.attr_i_or("reverse", 0)? != 0;
    let av = build::flat_i64(ctx, ctx.input(1)?)?;
    let ri = r as i64;
    let a_raw = expr::load(DType::I64, 1, vec![expr::i(0)]);
    ctx.assert_expr(
        vec![],
        vec![x, av],
        expr::and(
            expr::ge(a_raw.clone(), expr::i(-ri)),
            expr::lt(a_raw.clone(), expr::i(ri)),
        ),
        onnxc_runtime::abi::ONNXC_ERR_VALUE,
    )?;
    let a = expr::select(
        expr::lt(a_raw.clone(), expr::i(0)),
        expr::add(a_raw.clone(), expr::i(ri)),
        a_raw,
    );
    let t = expr::var(r as u32);
    let is = |k: usize| expr::binary(BinOp::Eq, a.clone(), expr::i(k as i64));
    let mut ia = expr::i(0);
    let mut da = expr::i(0);
    let mut index = Vec::new();
    for (k, &d) in dims.iter().enumerate() {
        ia = expr::add(ia, expr::select(is(k), expr::var(k as u32), expr::i(0)));
        da = expr::add(da, expr::select(is(k), expr::i(d), expr::i(0)));
        index.push(expr::select(
            is(k),
            expr::clamp(t.clone(), 0, (d - 1).max(0)),
            expr::var(k as u32),
        ));
    }
    let before = match (reverse, exclusive) {
        (false, false) => expr::binary(BinOp::Le, t.clone(), ia),
        (false, true) => expr::lt(t.clone(), ia),
        (true, false) => expr::ge(t.clone(), ia),
        (true, true) => expr::binary(BinOp::Gt, t.clone(), ia),
    };
    let take = expr::and(before, expr::lt(t, da));
    let dt = ctx.dtype(x);
    let neutral = crate::ir::interp::reduce_init(kind, dt);
    let body = expr::select(take, expr::load(dt, 0, index), expr::konst(dt, neutral));
    let max_d = dims.iter().copied().max().unwrap_or(1).max(1);
    let shape = ctx.shape(x);
    Ok(vec![ctx.reduce(
        kind,
        vec![max_d],
        dt,
        shape,
        vec![x, av],
        body,
    )?])
}

pub fn cum_sum(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    cumulative(ctx, ReduceKind::Sum)
}
pub fn cum_prod(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    cumulative(ctx, ReduceKind::Prod)
}
