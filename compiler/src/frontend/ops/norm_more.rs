//! Normalizations built from reductions: LayerNormalization, RMSNormalization,
//! GroupNormalization, InstanceNormalization, LpNormalization, MeanVarianceNormalization.

use crate::error::Result;
use crate::frontend::build::{self, FLOATS, bload, keep_index, reduce_over};
use crate::frontend::ctx::Ctx;
use crate::ir::dim::Dim;
use crate::ir::expr::{self, BinOp, E, UnOp};
use crate::ir::graph::ReduceKind;
use crate::ir::{DType, ValueId};

fn f(dt: DType, v: f64) -> E {
    expr::f(dt, v)
}

/// mean and 1/sqrt(var + eps) of `x` over `axes` (keepdims), computed in `dt`.
pub fn moments(
    ctx: &mut Ctx,
    x: ValueId,
    axes: &[usize],
    eps: f64,
    dt: DType,
) -> Result<(ValueId, ValueId)> {
    let dims = ctx.known_shape(x)?;
    let rank = dims.len();
    let n: i64 = axes.iter().map(|&a| dims[a]).product();
    let sum = reduce_over(ctx, &dims, axes, true, ReduceKind::Sum, dt, vec![x], |ix| {
        expr::load(dt, 0, ix.to_vec())
    })?;
    let kshape = ctx.shape(sum);
    let mean = ctx.map(
        dt,
        kshape.clone(),
        vec![sum],
        expr::binary(BinOp::Div, build::load_same(dt, 0, rank), f(dt, n as f64)),
    )?;
    let ki = |ix: &[E]| -> Vec<E> {
        (0..rank)
            .map(|k| {
                if axes.contains(&k) {
                    expr::i(0)
                } else {
                    ix[k].clone()
                }
            })
            .collect()
    };
    let sq = reduce_over(
        ctx,
        &dims,
        axes,
        true,
        ReduceKind::Sum,
        dt,
        vec![x, mean],
        |ix| {
            let d = expr::binary(
                BinOp::Sub,
                expr::load(dt, 0, ix.to_vec()),
                expr::load(dt, 1, ki(ix)),
            );
            expr::binary(BinOp::Mul, d.clone(), d)
        },
    )?;
    let inv = ctx.map(
        dt,
        kshape,
        vec![sq],
        expr::binary(
            BinOp::Div,
            f(dt, 1.0),
            expr::unary(
                UnOp::Sqrt,
                expr::binary(
                    BinOp::Add,
                    expr::binary(BinOp::Div, build::load_same(dt, 0, rank), f(dt, n as f64)),
                    f(dt, eps),
                ),
            ),
        ),
    )?;
    Ok((mean, inv))
}

pub fn layer_norm(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let dt = build::expect_types(ctx, x, "input X", FLOATS)?;
    let scale = ctx.input(1)?;
    let bias = ctx.opt_input(2);
    let rank = ctx.rank(x);
    let axis = build::axis(ctx, ctx.attr_i_or("axis", -1)?, rank)?;
    let eps = ctx.attr_f_or("epsilon", 1e-5)?;
    let axes: Vec<usize> = (axis..rank).collect();
    let (mean, inv) = moments(ctx, x, &axes, eps, dt)?;
    let xs = ctx.shape(x);
    let ki = keep_index(rank, &axes);
    let mut inputs = vec![x, mean, inv, scale];
    let norm = expr::binary(
        BinOp::Mul,
        expr::binary(
            BinOp::Sub,
            build::load_same(dt, 0, rank),
            expr::load(dt, 1, ki.clone()),
        ),
        expr::load(dt, 2, ki),
    );
    let sd = ctx.dtype(scale);
    let mut body = expr::binary(
        BinOp::Mul,
        norm,
        expr::cast(bload(sd, 3, &ctx.shape(scale), &xs), dt),
    );
    if let Some(b) = bias {
        inputs.push(b);
        body = expr::binary(
            BinOp::Add,
            body,
            expr::cast(bload(ctx.dtype(b), 4, &ctx.shape(b), &xs), dt),
        );
    }
    let y = ctx.map(dt, xs, inputs, body)?;
    Ok(vec![y, mean, inv])
}

/// `1 / sqrt(mean(x²) + eps)` over `axes`, kept as size-1 dims (RMS normalization's
/// statistic; `moments` is layer normalization's).
pub fn inv_rms(ctx: &mut Ctx, x: ValueId, axes: &[usize], eps: f64, dt: DType) -> Result<ValueId> {
    let dims = ctx.known_shape(x)?;
    let rank = dims.len();
    let n: i64 = axes.iter().map(|&a| dims[a]).product();
    let ss = reduce_over(ctx, &dims, axes, true, ReduceKind::Sum, dt, vec![x], |ix| {
        let v = expr::load(dt, 0, ix.to_vec());
        expr::binary(BinOp::Mul, v.clone(), v)
    })?;
    let kshape = ctx.shape(ss);
    let mean_sq = expr::binary(BinOp::Div, build::load_same(dt, 0, rank), f(dt, n as f64));
    let body = expr::binary(
        BinOp::Div,
        f(dt, 1.0),
        expr::unary(UnOp::Sqrt, expr::binary(BinOp::Add, mean_sq, f(dt, eps))),
    );
    ctx.map(dt, kshape, vec![ss], body)
}

pub fn rms_norm(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let dt = build::expect_types(ctx, x, "input X", FLOATS)?;
    let scale = ctx.input(1)?;
    let rank = ctx.rank(x);
    let axis = build::axis(ctx, ctx.attr_i_or("axis", -1)?, rank)?;
    let eps = ctx.attr_f_or("epsilon", 1e-5)?;
    let axes: Vec<usize> = (axis..rank).collect();
    let inv = inv_rms(ctx, x, &axes, eps, dt)?;
    let xs = ctx.shape(x);
    let body = expr::binary(
        BinOp::Mul,
        expr::binary(
            BinOp::Mul,
            build::load_same(dt, 0, rank),
            expr::load(dt, 1, keep_index(rank, &axes)),
        ),
        expr::cast(bload(ctx.dtype(scale), 2, &ctx.shape(scale), &xs), dt),
    );
    Ok(vec![ctx.map(dt, xs, vec![x, inv, scale], body)?])
}

pub fn instance_norm(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let dt = build::expect_types(ctx, x, "input", FLOATS)?;
    let (scale, bias) = (ctx.input(1)?, ctx.input(2)?);
    let eps = ctx.attr_f_or("epsilon", 1e-5)?;
    let rank = ctx.rank(x);
    if rank < 3 {
        return Err(ctx.err("input must have rank >= 3"));
    }
    let axes: Vec<usize> = (2..rank).collect();
    let (mean, inv) = moments(ctx, x, &axes, eps, dt)?;
    let ki = keep_index(rank, &axes);
    let ch = |k: u32| {
        expr::cast(
            expr::load(
                ctx.dtype(if k == 3 { scale } else { bias }),
                k,
                vec![expr::var(1)],
            ),
            dt,
        )
    };
    let body = expr::binary(
        BinOp::Add,
        expr::binary(
            BinOp::Mul,
            expr::binary(
                BinOp::Mul,
                expr::binary(
                    BinOp::Sub,
                    build::load_same(dt, 0, rank),
                    expr::load(dt, 1, ki.clone()),
                ),
                expr::load(dt, 2, ki),
            ),
            ch(3),
        ),
        ch(4),
    );
    let xs = ctx.shape(x);
    Ok(vec![ctx.map(
        dt,
        xs,
        vec![x, mean, inv, scale, bias],
        body,
    )?])
}

pub fn group_norm(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let dt = build::expect_types(ctx, x, "input X", FLOATS)?;
    let (scale, bias) = (ctx.input(1)?, ctx.input(2)?);
    let eps = ctx.attr_f_or("epsilon", 1e-5)?;
    let g = ctx
        .attr_i("num_groups")?
        .ok_or_else(|| ctx.err("attribute 'num_groups' is required"))?;
    let dims = ctx.known_shape(x)?;
    if dims.len() < 2 || g < 1 || dims[1] % g != 0 {
        return Err(ctx.err(format!(
            "{} channels cannot form {g} groups",
            dims.get(1).copied().unwrap_or(0)
        )));
    }
    let (n, c) = (dims[0], dims[1]);
    let rest: i64 = dims[2..].iter().product::<i64>() * (c / g);
    let xg = ctx.reshape(x, vec![Dim::Known(n), Dim::Known(g), Dim::Known(rest)])?;
    let (mean, inv) = moments(ctx, xg, &[2], eps, dt)?;
    // Broadcast per-group statistics back to channels: group of channel c is c / (C/g).
    let rank = dims.len();
    let per = c / g;
    let gi = vec![expr::var(0), expr::idiv(expr::var(1), per), expr::i(0)];
    // Opset 18 has per-group scale/bias; 21 per-channel.
    let per_group = ctx.opset < 21 && ctx.known_shape(scale)? == [g];
    let ch = |k: u32, v: ValueId, ctx: &Ctx| {
        let i = if per_group {
            expr::idiv(expr::var(1), per)
        } else {
            expr::var(1)
        };
        expr::cast(expr::load(ctx.dtype(v), k, vec![i]), dt)
    };
    let body = expr::binary(
        BinOp::Add,
        expr::binary(
            BinOp::Mul,
            expr::binary(
                BinOp::Mul,
                expr::binary(
                    BinOp::Sub,
                    build::load_same(dt, 0, rank),
                    expr::load(dt, 1, gi.clone()),
                ),
                expr::load(dt, 2, gi),
            ),
            ch(3, scale, ctx),
        ),
        ch(4, bias, ctx),
    );
    let xs = ctx.shape(x);
    Ok(vec![ctx.map(
        dt,
        xs,
        vec![x, mean, inv, scale, bias],
        body,
    )?])
}

pub fn lp_norm(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let dt = build::expect_types(ctx, x, "input", FLOATS)?;
    let rank = ctx.rank(x);
    let axis = build::axis(ctx, ctx.attr_i_or("axis", -1)?, rank)?;
    let p = ctx.attr_i_or("p", 2)?;
    if p != 1 && p != 2 {
        return Err(ctx.err(format!("p must be 1 or 2, got {p}")));
    }
    let dims = ctx.known_shape(x)?;
    let s = reduce_over(
        ctx,
        &dims,
        &[axis],
        true,
        ReduceKind::Sum,
        dt,
        vec![x],
        |ix| {
            let v = expr::load(dt, 0, ix.to_vec());
            if p == 1 {
                expr::unary(UnOp::Abs, v)
            } else {
                expr::binary(BinOp::Mul, v.clone(), v)
            }
        },
    )?;
    let norm = expr::load(dt, 1, keep_index(rank, &[axis]));
    let norm = if p == 2 {
        expr::unary(UnOp::Sqrt, norm)
    } else {
        norm
    };
    let xs = ctx.shape(x);
    // A zero norm gives 0 rather than 0/0, as the reference does.
    let zero = expr::binary(BinOp::Eq, norm.clone(), f(dt, 0.0));
    let body = expr::select(
        zero,
        f(dt, 0.0),
        expr::binary(BinOp::Div, build::load_same(dt, 0, rank), norm),
    );
    Ok(vec![ctx.map(dt, xs, vec![x, s], body)?])
}

pub fn mean_variance_norm(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let dt = build::expect_types(ctx, x, "input", FLOATS)?;
    let rank = ctx.rank(x);
    let a = ctx.attr_ints("axes").unwrap_or_else(|| vec![0, 2, 3]);
    let axes = build::axes(ctx, &a, rank)?;
    // The ONNX function: (X - E[X]) / (sqrt(E[X^2] - E[X]^2) + 1e-9).
    let dims = ctx.known_shape(x)?;
    let n: i64 = axes.iter().map(|&k| dims[k]).product();
    let s1 = reduce_over(
        ctx,
        &dims,
        &axes,
        true,
        ReduceKind::Sum,
        dt,
        vec![x],
        |ix| expr::load(dt, 0, ix.to_vec()),
    )?;
    let s2 = reduce_over(
        ctx,
        &dims,
        &axes,
        true,
        ReduceKind::Sum,
        dt,
        vec![x],
        |ix| {
            let v = expr::load(dt, 0, ix.to_vec());
            expr::binary(BinOp::Mul, v.clone(), v)
        },
    )?;
    let ki = keep_index(rank, &axes);
    let mean = expr::binary(BinOp::Div, expr::load(dt, 1, ki.clone()), f(dt, n as f64));
    let ex2 = expr::binary(BinOp::Div, expr::load(dt, 2, ki), f(dt, n as f64));
    let var = expr::binary(
        BinOp::Sub,
        ex2,
        expr::binary(BinOp::Mul, mean.clone(), mean.clone()),
    );
    let denom = expr::binary(BinOp::Add, expr::unary(UnOp::Sqrt, var), f(dt, 1e-9));
    let body = expr::binary(
        BinOp::Div,
        expr::binary(BinOp::Sub, build::load_same(dt, 0, rank), mean),
        denom,
    );
    let xs = ctx.shape(x);
    Ok(vec![ctx.map(dt, xs, vec![x, s1, s2], body)?])
}
