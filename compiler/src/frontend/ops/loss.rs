//! Losses: NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss.

use crate::error::Result;
use crate::frontend::build::{self, FLOATS};
use crate::frontend::ctx::Ctx;
use crate::ir::dim::Dim;
use crate::ir::expr::{self, BinOp, E, UnOp};
use crate::ir::graph::ReduceKind;
use crate::ir::{DType, ValueId};

/// NLL of `logp` [N, C, d…] at `target` [N, d…] with optional class weights; returns the loss
/// per the reduction attribute.
fn nll(ctx: &mut Ctx, logp: ValueId, target: ValueId, weight: Option<ValueId>) -> Result<ValueId> {
    let dt = ctx.dtype(logp);
    let ls = ctx.known_shape(logp)?;
    let ts = ctx.known_shape(target)?;
    if ls.len() < 2 || ts.len() != ls.len() - 1 || ts[0] != ls[0] || ts[1..] != ls[2..] {
        return Err(ctx.err(format!(
            "input {ls:?} and target {ts:?} do not match ([N, C, d…] and [N, d…])"
        )));
    }
    build::expect_types(ctx, target, "target", &[DType::I32, DType::I64])?;
    let c = ls[1];
    let reduction = ctx.attr_s_or("reduction", "mean")?;
    let ignore = ctx.attr_i("ignore_index")?;
    let tr = ts.len();
    let tdt = ctx.dtype(target);
    // Per target element: the class, whether it counts, and its weight.
    let t = |vars: Vec<E>| expr::cast(expr::load(tdt, 1, vars), DType::I64);
    let tv: Vec<E> = (0..tr as u32).map(expr::var).collect();
    let keep = |tval: E| -> E {
        match ignore {
            Some(ig) => expr::unary(UnOp::Not, expr::binary(BinOp::Eq, tval, expr::i(ig))),
            None => expr::konst(DType::Bool, crate::ir::Scalar::B(true)),
        }
    };
    let class = |tval: E| expr::check_index(expr::select(keep(tval.clone()), tval, expr::i(0)), c);
    let mut inputs = vec![logp, target];
    let wt = |tval: E, inputs_len: usize| -> E {
        match weight {
            Some(_) => expr::load(dt, (inputs_len - 1) as u32, vec![class(tval)]),
            None => expr::f(dt, 1.0),
        }
    };
    if let Some(w) = weight {
        inputs.push(w);
    }
    let n_in = inputs.len();
    let mut li = vec![tv[0].clone(), class(t(tv.clone()))];
    li.extend(tv[1..].iter().cloned());
    let per = expr::select(
        keep(t(tv.clone())),
        expr::unary(
            UnOp::Neg,
            expr::binary(BinOp::Mul, expr::load(dt, 0, li), wt(t(tv.clone()), n_in)),
        ),
        expr::f(dt, 0.0),
    );
    let tshape: Vec<Dim> = ts.iter().map(|&d| Dim::Known(d)).collect();
    let loss = ctx.map(dt, tshape, inputs.clone(), per)?;
    match reduction.as_str() {
        "none" => Ok(loss),
        "sum" | "mean" => {
            let all: Vec<usize> = (0..tr).collect();
            let total = build::reduce_over(
                ctx,
                &ts,
                &all,
                false,
                ReduceKind::Sum,
                dt,
                vec![loss],
                |ix| expr::load(dt, 0, ix.to_vec()),
            )?;
            if reduction == "sum" {
                return Ok(total);
            }
            // mean: divide by the summed weights of the counted elements.
            let mut winputs = vec![target];
            if let Some(w) = weight {
                winputs.push(w);
            }
            let denom =
                build::reduce_over(ctx, &ts, &all, false, ReduceKind::Sum, dt, winputs, |ix| {
                    let tval = expr::cast(expr::load(tdt, 0, ix.to_vec()), DType::I64);
                    let wv = match weight {
                        Some(_) => expr::load(dt, 1, vec![class(tval.clone())]),
                        None => expr::f(dt, 1.0),
                    };
                    expr::select(keep(tval), wv, expr::f(dt, 0.0))
                })?;
            ctx.map(
                dt,
                vec![],
                vec![total, denom],
                expr::binary(
                    BinOp::Div,
                    expr::load(dt, 0, vec![]),
                    expr::load(dt, 1, vec![]),
                ),
            )
        }
        other => Err(ctx.err(format!("unknown reduction '{other}'"))),
    }
}

pub fn nll_loss(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (x, t) = (ctx.input(0)?, ctx.input(1)?);
    build::expect_types(ctx, x, "input", FLOATS)?;
    let w = ctx.opt_input(2);
    Ok(vec![nll(ctx, x, t, w)?])
}

pub fn softmax_cross_entropy_loss(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (x, t) = (ctx.input(0)?, ctx.input(1)?);
    let dt = build::expect_types(ctx, x, "scores", FLOATS)?;
    let w = ctx.opt_input(2);
    let dims = ctx.known_shape(x)?;
    if dims.len() < 2 {
        return Err(ctx.err("scores must have rank >= 2"));
    }
    // log_softmax along the class axis (1).
    let rank = dims.len();
    let m = build::reduce(ctx, x, ReduceKind::Max, &[1], true, |v| v)?;
    let mi = build::keep_index(rank, &[1]);
    let s = build::reduce_over(
        ctx,
        &dims,
        &[1],
        true,
        ReduceKind::Sum,
        dt,
        vec![x, m],
        |ix| {
            let mut k = ix.to_vec();
            k[1] = expr::i(0);
            expr::unary(
                UnOp::Exp,
                expr::binary(
                    BinOp::Sub,
                    expr::load(dt, 0, ix.to_vec()),
                    expr::load(dt, 1, k),
                ),
            )
        },
    )?;
    let xs = ctx.shape(x);
    let logp = ctx.map(
        dt,
        xs,
        vec![x, m, s],
        expr::binary(
            BinOp::Sub,
            expr::binary(
                BinOp::Sub,
                build::load_same(dt, 0, rank),
                expr::load(dt, 1, mi.clone()),
            ),
            expr::unary(UnOp::Log, expr::load(dt, 2, mi)),
        ),
    )?;
    let loss = nll(ctx, logp, t, w)?;
    Ok(vec![loss, logp])
}
