//! Normalization: BatchNormalization (inference, and training mode's batch statistics),
//! LRN.

use crate::error::Result;
use crate::frontend::build::{self, FLOATS};
use crate::frontend::ctx::Ctx;
use crate::ir::dim::Dim;
use crate::ir::expr::{self, BinOp, E, UnOp};
use crate::ir::graph::ReduceKind;
use crate::ir::{DType, ValueId};

/// Loads a per-channel parameter of shape `[C]` (or `[C, D1, …]` for non-spatial BN) at the
/// position of an NC… output.
fn channel_load(dt: DType, input: u32, prank: usize) -> E {
    expr::load(dt, input, (1..=prank as u32).map(expr::var).collect())
}

pub fn batch_norm(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let dt = build::expect_types(ctx, x, "input X", FLOATS)?;
    let training = ctx.opset >= 14 && ctx.attr_i_or("training_mode", 0)? != 0;
    if ctx.opset < 7 && ctx.attr_i_or("is_test", 0)? == 0 && ctx.node.output.len() > 1 {
        return Err(ctx.unsupported(
            "training-mode BatchNormalization (is_test=0 with statistics outputs) is not supported",
        ));
    }
    let eps = ctx.attr_f_or("epsilon", 1e-5)?;
    let mut params = Vec::new();
    for i in 1..5 {
        let p = ctx.input(i)?;
        params.push(build::cast(ctx, p, dt)?);
    }
    let (scale, bias, mean, var) = (params[0], params[1], params[2], params[3]);
    let xshape = ctx.shape(x);
    if xshape.len() < 2 {
        return Err(ctx.err("input X must have rank >= 2"));
    }
    let pshape = ctx.shape(scale);
    let prank = pshape.len();
    if prank == 0 || prank > xshape.len() - 1 || pshape[0] != xshape[1] {
        return Err(ctx.err(format!(
            "scale has shape {} but X has {} channels",
            crate::ir::dim::fmt_shape(&pshape),
            xshape[1]
        )));
    }
    for &p in &params[1..] {
        if ctx.shape(p) != pshape {
            return Err(ctx.err("scale, B, mean and var must have the same shape"));
        }
    }
    let same = |k: u32| expr::load(dt, k, (0..prank as u32).map(expr::var).collect());
    // Training mode (opset 14+): normalized by the batch's statistics, which also update
    // the running ones: mean·momentum + batch·(1 − momentum).
    let mut running = Vec::new();
    let (mean, var) = if training {
        if prank != 1 {
            return Err(ctx.err("training mode takes per-channel parameters of shape [C]"));
        }
        let (batch_mean, batch_var) = batch_statistics(ctx, x)?;
        let momentum = ctx.attr_f_or("momentum", 0.9)?;
        for (run, batch) in [(mean, batch_mean), (var, batch_var)] {
            let body = expr::binary(
                BinOp::Add,
                expr::binary(BinOp::Mul, same(0), expr::f(dt, momentum)),
                expr::binary(BinOp::Mul, same(1), expr::f(dt, 1.0 - momentum)),
            );
            running.push(ctx.map(dt, pshape.clone(), vec![run, batch], body)?);
        }
        (batch_mean, batch_var)
    } else {
        (mean, var)
    };
    // a = scale / sqrt(var + eps); b = B - mean * a. Constants fold here.
    let a = ctx.map(
        dt,
        pshape.clone(),
        vec![scale, var],
        expr::binary(
            BinOp::Div,
            same(0),
            expr::unary(
                UnOp::Sqrt,
                expr::binary(BinOp::Add, same(1), expr::f(dt, eps)),
            ),
        ),
    )?;
    let b = ctx.map(
        dt,
        pshape.clone(),
        vec![bias, mean, a],
        expr::binary(
            BinOp::Sub,
            same(0),
            expr::binary(BinOp::Mul, same(1), same(2)),
        ),
    )?;
    let rank = xshape.len();
    let body = expr::binary(
        BinOp::Add,
        expr::binary(
            BinOp::Mul,
            build::load_same(dt, 0, rank),
            channel_load(dt, 1, prank),
        ),
        channel_load(dt, 2, prank),
    );
    let mut outs = vec![ctx.map(dt, xshape, vec![x, a, b], body)?];
    outs.extend(running);
    Ok(outs)
}

/// The mean and (population) variance of each channel of `x` `[N, C, …]`, as `[C]`.
fn batch_statistics(ctx: &mut Ctx, x: ValueId) -> Result<(ValueId, ValueId)> {
    let dt = ctx.dtype(x);
    let xs = ctx.known_shape(x)?;
    let rank = xs.len();
    let axes: Vec<usize> = (0..rank).filter(|&a| a != 1).collect();
    let count: i64 = axes.iter().map(|&a| xs[a]).product();
    let inv = expr::f(dt, 1.0 / count.max(1) as f64);
    let sum = build::reduce(ctx, x, ReduceKind::Sum, &axes, false, |v| v)?;
    let per_channel = |k: u32| expr::load(dt, k, vec![expr::var(0)]);
    let mean = ctx.map(
        dt,
        ctx.shape(sum),
        vec![sum],
        expr::binary(BinOp::Mul, per_channel(0), inv.clone()),
    )?;
    let centered = ctx.map(dt, ctx.shape(x), vec![x, mean], {
        let d = expr::binary(
            BinOp::Sub,
            build::load_same(dt, 0, rank),
            expr::load(dt, 1, vec![expr::var(1)]),
        );
        expr::binary(BinOp::Mul, d.clone(), d)
    })?;
    let squares = build::reduce(ctx, centered, ReduceKind::Sum, &axes, false, |v| v)?;
    let var = ctx.map(
        dt,
        ctx.shape(squares),
        vec![squares],
        expr::binary(BinOp::Mul, per_channel(0), inv),
    )?;
    Ok((mean, var))
}

pub fn lrn(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let dt = build::expect_types(ctx, x, "input X", FLOATS)?;
    let size = ctx
        .attr_i("size")?
        .ok_or_else(|| ctx.err("attribute 'size' is required"))?;
    if size < 1 {
        return Err(ctx.err(format!("attribute 'size' must be positive, got {size}")));
    }
    let alpha = ctx.attr_f_or("alpha", 1e-4)?;
    let beta = ctx.attr_f_or("beta", 0.75)?;
    let bias = ctx.attr_f_or("bias", 1.0)?;
    let xs = ctx.known_shape(x)?;
    if xs.len() < 3 {
        return Err(ctx.err("input X must have rank >= 3"));
    }
    let rank = xs.len();
    let c = xs[1];
    let lo = (size - 1) / 2;
    // sq[n, c, …] = sum over r < size of x[n, c - lo + r, …]^2 (taps outside [0, C) are 0).
    let ch = expr::sub(expr::add(expr::var(1), expr::var(rank as u32)), expr::i(lo));
    let mut index: Vec<E> = (0..rank as u32).map(expr::var).collect();
    index[1] = expr::clamp(ch.clone(), 0, c - 1);
    let v = expr::load(dt, 0, index);
    let inside = expr::and(expr::ge(ch.clone(), expr::i(0)), expr::lt(ch, expr::i(c)));
    let body = expr::select(
        inside,
        expr::binary(BinOp::Mul, v.clone(), v),
        expr::f(dt, 0.0),
    );
    let shape: Vec<Dim> = ctx.shape(x);
    let sq = ctx.reduce(
        ReduceKind::Sum,
        vec![size],
        dt,
        shape.clone(),
        vec![x],
        body,
    )?;
    let denom = expr::binary(
        BinOp::Pow,
        expr::binary(
            BinOp::Add,
            expr::f(dt, bias),
            expr::binary(
                BinOp::Mul,
                expr::f(dt, alpha / size as f64),
                build::load_same(dt, 1, rank),
            ),
        ),
        expr::f(dt, beta),
    );
    Ok(vec![ctx.map(
        dt,
        shape,
        vec![x, sq],
        expr::binary(BinOp::Div, build::load_same(dt, 0, rank), denom),
    )?])
}
