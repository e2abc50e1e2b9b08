//! Expand and Tile: data repeated along dims, as one broadcasting map.

use crate::error::Result;
use crate::frontend::build::{self, bload, broadcast_shapes};
use crate::frontend::ctx::Ctx;
use crate::ir::dim::{Dim, Shape};
use crate::ir::expr::{self, BinOp, E};
use crate::ir::{DType, ValueId};

pub fn expand(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let sv = ctx.input(1)?;
    let target = if ctx.is_runtime(sv) {
        // The declared output is the broadcast; each shape entry must be it or 1.
        let out = ctx.declared_shape(0, "input 'shape'")?;
        let xs = ctx.known_shape(x)?;
        let sv = build::flat_i64(ctx, sv)?;
        let n = ctx.known_shape(sv)?[0] as usize;
        if n > out.len() || xs.len() > out.len() {
            return Err(ctx.err("declared output rank is smaller than the operands'"));
        }
        let aligned_x: Vec<i64> = (0..n)
            .map(|k| {
                let j = out.len() - n + k;
                let off = out.len() - xs.len();
                if j >= off { xs[j - off] } else { 1 }
            })
            .collect();
        let oc = ctx.constant(crate::ir::Tensor::from_i64s(
            vec![n as i64],
            &out[out.len() - n..],
        ));
        let xc = ctx.constant(crate::ir::Tensor::from_i64s(vec![n as i64], &aligned_x));
        let (v, o, xd) = (
            expr::load(DType::I64, 0, vec![expr::var(0)]),
            expr::load(DType::I64, 1, vec![expr::var(0)]),
            expr::load(DType::I64, 2, vec![expr::var(0)]),
        );
        let eq = |a: E, b: E| expr::binary(BinOp::Eq, a, b);
        let x_ok = expr::binary(
            BinOp::Or,
            eq(xd.clone(), expr::i(1)),
            eq(xd.clone(), o.clone()),
        );
        let ok = expr::binary(
            BinOp::Or,
            expr::and(eq(v.clone(), o.clone()), x_ok),
            expr::and(eq(v, expr::i(1)), eq(xd, o)),
        );
        ctx.assert_expr(
            vec![n as i64],
            vec![sv, oc, xc],
            ok,
            onnxc_runtime::abi::ONNXC_ERR_SHAPE,
        )?;
        out
    } else {
        ctx.const_ints(sv, "input 'shape'")?
    };
    let ts: Shape = target.iter().map(|&d| Dim::Known(d)).collect();
    let xs = ctx.shape(x);
    let out = broadcast_shapes(ctx, &[xs.clone(), ts])?;
    let dt = ctx.dtype(x);
    if out == xs {
        return Ok(vec![x]);
    }
    let body = bload(dt, 0, &xs, &out);
    Ok(vec![ctx.map(dt, out, vec![x], body)?])
}

pub fn tile(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let xs = ctx.known_shape(x)?;
    let reps = if ctx.opset < 6 {
        // Tile-1: (input, tiles, axis) with scalar inputs.
        let tiles = ctx.const_ints(ctx.input(1)?, "input 'tiles'")?;
        let axis = ctx.const_ints(ctx.input(2)?, "input 'axis'")?;
        let mut r = vec![1; xs.len()];
        let a = build::axis(ctx, *axis.first().unwrap_or(&0), xs.len())?;
        r[a] = *tiles.first().unwrap_or(&1);
        r
    } else if ctx.is_runtime(ctx.input(1)?) {
        let out = ctx.declared_shape(0, "input 'repeats'")?;
        if out.len() != xs.len()
            || xs
                .iter()
                .zip(&out)
                .any(|(&i, &o)| if i == 0 { o != 0 } else { o % i != 0 })
        {
            return Err(ctx.err(format!("declared output {out:?} is not a tiling of {xs:?}")));
        }
        let reps: Vec<i64> = xs
            .iter()
            .zip(&out)
            .map(|(&i, &o)| if i == 0 { 1 } else { o / i })
            .collect();
        let rv = build::flat_i64(ctx, ctx.input(1)?)?;
        if xs.iter().all(|&d| d != 0) {
            build::assert_equals(ctx, rv, &reps)?;
        }
        reps
    } else {
        ctx.const_ints(ctx.input(1)?, "input 'repeats'")?
    };
    if reps.len() != xs.len() || reps.iter().any(|&r| r < 0) {
        return Err(ctx.err(format!(
            "repeats {reps:?} must be {} non-negative values",
            xs.len()
        )));
    }
    let shape: Shape = xs
        .iter()
        .zip(&reps)
        .map(|(&d, &r)| Dim::Known(d).mul(r))
        .collect();
    let index: Vec<E> = (0..xs.len())
        .map(|k| {
            if reps[k] == 1 {
                expr::var(k as u32)
            } else {
                expr::imod(expr::var(k as u32), xs[k].max(1))
            }
        })
        .collect();
    let dt = ctx.dtype(x);
    Ok(vec![ctx.map(
        dt,
        shape,
        vec![x],
        expr::load(dt, 0, index),
    )?])
}
