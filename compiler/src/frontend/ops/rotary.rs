//! RotaryEmbedding (opset 23): one map over X's shape. Output element `d` of a head (below
//! `rotary_embedding_dim`) is the real or imaginary part of the rotation of its pair —
//! `(x[i], x[i + half])`, or `(x[2i], x[2i + 1])` when interleaved — by the angle whose cos
//! and sin the caches hold for the token's position; elements past the rotary dim pass
//! through. Cache rows come from `position_ids` (checked: a position outside the cache
//! fails the run with `ONNXC_ERR_INDEX`) or, without them, from the caches' own
//! `[batch, seq, half]` layout. float16/bfloat16 are computed in float32.

use crate::error::Result;
use crate::frontend::build::{self, FLOATS};
use crate::frontend::ctx::Ctx;
use crate::ir::dim::Dim;
use crate::ir::expr::{self, E};
use crate::ir::{DType, ValueId};

pub fn rotary_embedding(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let cos = ctx.input(1)?;
    let sin = ctx.input(2)?;
    let pos = ctx.opt_input(3);
    let dt = build::expect_types(ctx, x, "input X", FLOATS)?;
    for (v, what) in [(cos, "cos_cache"), (sin, "sin_cache")] {
        if ctx.dtype(v) != dt {
            return Err(ctx.err(format!(
                "input {what} is {}; it must be X's type {dt}",
                ctx.dtype(v)
            )));
        }
    }
    let xs = ctx.known_shape(x)?;
    let num_heads = ctx.attr_i_or("num_heads", 0)?;
    // (batch, seq, head size)
    let (b, s, d) = match xs.as_slice() {
        &[b, _, s, d] => (b, s, d),
        &[b, s, hidden] => {
            if num_heads <= 0 || hidden % num_heads != 0 {
                return Err(ctx.err(format!(
                    "X has shape {xs:?} (batch, seq, hidden); a 3-D X needs num_heads dividing \
                     the hidden size, got num_heads={num_heads}"
                )));
            }
            (b, s, hidden / num_heads)
        }
        _ => {
            return Err(ctx.err(format!(
                "X has shape {xs:?}; it must be (batch, heads, seq, head_size) or (batch, seq, hidden)"
            )));
        }
    };
    let rd = match ctx.attr_i_or("rotary_embedding_dim", 0)? {
        0 => d,
        r => r,
    };
    if rd <= 0 || rd > d || rd % 2 != 0 {
        return Err(ctx.err(format!(
            "rotary_embedding_dim is {rd}; it must be even and at most the head size {d}"
        )));
    }
    let half = rd / 2;
    let interleaved = ctx.attr_i_or("interleaved", 0)? != 0;
    let cs = ctx.known_shape(cos)?;
    if ctx.known_shape(sin)? != cs {
        return Err(ctx.err(format!(
            "cos_cache has shape {cs:?} and sin_cache {:?}; they must agree",
            ctx.known_shape(sin)?
        )));
    }
    // Output vars → (batch, head, seq, d) and X's index for a given d.
    let three_d = xs.len() == 3;
    let (vb, vh, vs, vd) = if three_d {
        let v2 = expr::var(2);
        (
            expr::var(0),
            expr::idiv(v2.clone(), d),
            expr::var(1),
            expr::imod(v2, d),
        )
    } else {
        (expr::var(0), expr::var(1), expr::var(2), expr::var(3))
    };
    let x_at = |dd: E| -> E {
        let dd = expr::clamp(dd, 0, d - 1);
        if three_d {
            expr::load(
                dt,
                0,
                vec![
                    vb.clone(),
                    vs.clone(),
                    expr::add(expr::mul(vh.clone(), expr::i(d)), dd),
                ],
            )
        } else {
            expr::load(dt, 0, vec![vb.clone(), vh.clone(), vs.clone(), dd])
        }
    };
    // Cache row and its index expression.
    let mut inputs = vec![x, cos, sin];
    let cache_at = |input: u32, i: E| -> E {
        let i = expr::clamp(i, 0, half - 1);
        match pos {
            Some(_) => expr::load(
                dt,
                input,
                vec![
                    expr::check_index(
                        expr::load(DType::I64, 3, vec![vb.clone(), vs.clone()]),
                        cs[0],
                    ),
                    i,
                ],
            ),
            None => expr::load(dt, input, vec![vb.clone(), vs.clone(), i]),
        }
    };
    match pos {
        Some(p) => {
            build::expect_types(ctx, p, "input position_ids", &[DType::I64])?;
            if ctx.known_shape(p)? != [b, s] || cs.len() != 2 || cs[1] != half {
                return Err(ctx.err(format!(
                    "position_ids has shape {:?} and the caches {cs:?}; with position_ids they \
                     must be ({b}, {s}) and (max_position, {half})",
                    ctx.known_shape(p)?
                )));
            }
            inputs.push(p);
        }
        None => {
            if cs != [b, s, half] {
                return Err(ctx.err(format!(
                    "the caches have shape {cs:?}; without position_ids they must be ({b}, {s}, {half})"
                )));
            }
        }
    }
    let ct = if dt == DType::F64 {
        DType::F64
    } else {
        DType::F32
    };
    let f = |e: E| expr::cast(e, ct);
    // Pair index i, the pair's elements, and whether d is the real (first) part.
    let (i, x1, x2, first) = if interleaved {
        let i = expr::idiv(vd.clone(), 2);
        let two_i = expr::mul(i.clone(), expr::i(2));
        (
            i,
            x_at(two_i.clone()),
            x_at(expr::add(two_i, expr::i(1))),
            expr::binary(expr::BinOp::Eq, expr::imod(vd.clone(), 2), expr::i(0)),
        )
    } else {
        let first = expr::lt(vd.clone(), expr::i(half));
        let i = expr::select(
            first.clone(),
            vd.clone(),
            expr::sub(vd.clone(), expr::i(half)),
        );
        (
            i.clone(),
            x_at(i.clone()),
            x_at(expr::add(i, expr::i(half))),
            first,
        )
    };
    let (c, sn) = (f(cache_at(1, i.clone())), f(cache_at(2, i)));
    let (x1, x2) = (f(x1), f(x2));
    let real = expr::sub(
        expr::mul(c.clone(), x1.clone()),
        expr::mul(sn.clone(), x2.clone()),
    );
    let imag = expr::add(expr::mul(sn, x1), expr::mul(c, x2));
    let rotated = expr::cast(expr::select(first, real, imag), dt);
    let body = if rd < d {
        expr::select(expr::lt(vd.clone(), expr::i(rd)), rotated, x_at(vd))
    } else {
        rotated
    };
    let shape: Vec<Dim> = xs.iter().map(|&v| Dim::Known(v)).collect();
    Ok(vec![ctx.map(dt, shape, inputs, body)?])
}
