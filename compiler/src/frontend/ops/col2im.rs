//! Col2Im (opset 18): sums an `[N, C·K, L]` tensor of sliding blocks (im2col's columns, K
//! = the block's element count, L = the number of block positions) back into an `[N, C,
//! image…]` image, for any number of spatial dims.
//!
//! Written as a gather, not a scatter: each image element sums, over the K positions of a
//! block, the one column whose block covers it (if any). The sum's order is then fixed by
//! the output element alone, and no two writes meet.
//!
//! `image_shape` and `block_shape` are usually constants (PyTorch's `nn.Fold`). When they
//! are run-time values, the output's declared shape gives the image dims and C; the block's
//! dims are read at run time (K, their product, is the input's channel count over C), and
//! the run fails with `ONNXC_ERR_SHAPE` unless the values agree with those shapes.

use crate::error::Result;
use crate::frontend::build;
use crate::frontend::ctx::Ctx;
use crate::ir::expr::{self, BinOp, E, ExprKind};
use crate::ir::graph::ReduceKind;
use crate::ir::{DType, Scalar, ValueId};
use onnxc_runtime::abi::ONNXC_ERR_SHAPE;

/// Largest image dim, block dim, pad, stride or dilation: sums and two-factor products of
/// such values stay well inside `i64`.
const MAX: i64 = i32::MAX as i64;

fn ints(ctx: &Ctx, name: &str, d: usize, default: i64, min: i64) -> Result<Vec<i64>> {
    let v = ctx.attr_ints(name).unwrap_or_else(|| vec![default; d]);
    if v.len() != d || v.iter().any(|&x| !(min..=MAX).contains(&x)) {
        return Err(ctx.err(format!(
            "attribute '{name}' is {v:?}; it needs {d} values, each from {min} to 2^31 - 1"
        )));
    }
    Ok(v)
}

pub fn col2im(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let image = ctx.input(1)?;
    let block = ctx.input(2)?;
    let dt = ctx.dtype(x);
    let summable = build::FLOATS.contains(&dt) || (dt.is_int() && dt.bits() >= 8);
    if !summable {
        return Err(ctx.unsupported(format!(
            "input is {dt:?}; onnxc's Col2Im sums floats of 16 bits or more and integers of 8 bits or more"
        )));
    }
    build::expect_types(ctx, image, "image_shape", &[DType::I64])?;
    build::expect_types(ctx, block, "block_shape", &[DType::I64])?;
    let xs = ctx.known_shape(x)?;
    let &[n, ck, l] = xs.as_slice() else {
        return Err(ctx.err(format!(
            "input has shape {xs:?}; Col2Im takes [N, C·prod(block_shape), L]"
        )));
    };
    let d = match (
        ctx.known_shape(image)?.as_slice(),
        ctx.known_shape(block)?.as_slice(),
    ) {
        (&[a], &[b]) if a == b && a >= 1 => a as usize,
        (a, b) => {
            return Err(ctx.err(format!(
                "image_shape has shape {a:?} and block_shape {b:?}; both must be 1-D, with one value per spatial dim"
            )));
        }
    };
    let dil = ints(ctx, "dilations", d, 1, 1)?;
    let strides = ints(ctx, "strides", d, 1, 1)?;
    let pads = ints(ctx, "pads", 2 * d, 0, 0)?;
    let image_c = ctx.konst(image).map(|t| t.to_i64s());
    let block_c = ctx.konst(block).map(|t| t.to_i64s());
    if let Some(v) = image_c
        .iter()
        .chain(&block_c)
        .find(|v| v.iter().any(|&x| !(1..=MAX).contains(&x)))
    {
        return Err(ctx.err(format!(
            "image_shape and block_shape must be from 1 to 2^31 - 1; one is {v:?}"
        )));
    }

    // The image dims, C and K (the block's element count).
    let (img, c, k) = match (&image_c, &block_c) {
        (Some(img), Some(blk)) => {
            let k = blk
                .iter()
                .try_fold(1i64, |a, &v| a.checked_mul(v))
                .unwrap_or(0);
            if k == 0 || ck % k != 0 {
                return Err(ctx.err(format!(
                    "input has {ck} channels, not a multiple of the block's {blk:?} elements"
                )));
            }
            (img.clone(), ck / k, k)
        }
        _ => {
            let out = ctx.declared_shape(0, "Col2Im's image_shape or block_shape")?;
            let fits = out.len() == d + 2
                && out[0] == n
                && out[1] >= 1
                && ck % out[1] == 0
                && image_c.as_ref().is_none_or(|v| v[..] == out[2..]);
            if !fits {
                return Err(ctx.err(format!(
                    "the output is declared {out:?}; it must be [{n}, C, image dims…] with C dividing the input's {ck} channels"
                )));
            }
            (out[2..].to_vec(), out[1], ck / out[1])
        }
    };
    // The block's dim i: a constant, or element i of run-time operand `at`.
    let bdim = |i: usize, at: u32| -> E {
        match &block_c {
            Some(v) => expr::i(v[i]),
            None => expr::load(DType::I64, at, vec![expr::i(i as i64)]),
        }
    };
    // Block positions along each dim: (img + pads - dil·(b - 1) - 1) / stride + 1, when
    // the dilated block fits the padded image (`fits`).
    let room = |i: usize, at: u32| {
        let span = expr::mul(expr::i(dil[i]), expr::sub(bdim(i, at), expr::i(1)));
        expr::sub(expr::i(img[i] + pads[i] + pads[d + i] - 1), span)
    };
    let blocks = |at: u32| -> Vec<E> {
        (0..d)
            .map(|i| {
                let q = expr::binary(BinOp::Div, room(i, at), expr::i(strides[i]));
                expr::add(q, expr::i(1))
            })
            .collect()
    };

    // The block must tile the padded image into the input's L positions of K elements:
    // checked here for constants, at run time (operands: block_shape, image_shape) else.
    // Each block dim and each partial product is at most K (so no product overflows while
    // the checks before it hold), each dim's positions at most L.
    let at = 0;
    let mut ok = expr::konst(DType::Bool, Scalar::B(true));
    let (mut positions, mut elements) = (expr::i(1), expr::i(1));
    for (i, q) in blocks(at).into_iter().enumerate() {
        let bi = bdim(i, at);
        ok = expr::and(ok, expr::binary(BinOp::Le, bi.clone(), expr::i(k)));
        ok = expr::and(ok, expr::ge(room(i, at), expr::i(0)));
        ok = expr::and(ok, expr::binary(BinOp::Le, q.clone(), expr::i(l)));
        positions = expr::mul(positions, q);
        elements = expr::mul(elements, bi);
        ok = expr::and(ok, expr::binary(BinOp::Le, positions.clone(), expr::i(l)));
        ok = expr::and(ok, expr::binary(BinOp::Le, elements.clone(), expr::i(k)));
    }
    ok = expr::and(ok, expr::binary(BinOp::Eq, positions, expr::i(l)));
    ok = expr::and(ok, expr::binary(BinOp::Eq, elements, expr::i(k)));
    if image_c.is_none() {
        for (i, &v) in img.iter().enumerate() {
            let given = expr::load(DType::I64, 1, vec![expr::i(i as i64)]);
            ok = expr::and(ok, expr::binary(BinOp::Eq, given, expr::i(v)));
        }
    }
    if image_c.is_some() && block_c.is_some() {
        if !matches!(ok.kind, ExprKind::Const(v) if v.as_bool()) {
            return Err(ctx.err(format!(
                "block_shape {:?} does not tile image_shape {img:?} (pads {pads:?}, dilations {dil:?}, strides {strides:?}) into the input's {l} positions",
                block_c.unwrap_or_default()
            )));
        }
    } else {
        ctx.assert_expr(vec![], vec![block, image], ok, ONNXC_ERR_SHAPE)?;
    }
    let mut inputs = vec![x];
    if block_c.is_none() {
        inputs.push(block);
    }
    let (b, blocks) = ((0..d).map(|i| bdim(i, 1)).collect::<Vec<E>>(), blocks(1));

    // out[n, c, p…] = Σ_{j < K} in[n, c·K + j, position of the block whose element j is p].
    let mut dims = vec![n, c];
    dims.extend(&img);
    dims.push(k);
    let rank = dims.len();
    let out = build::reduce_over(
        ctx,
        &dims,
        &[rank - 1],
        false,
        ReduceKind::Sum,
        dt,
        inputs,
        |ix| {
            let j = ix[rank - 1].clone();
            // j's coordinates in the block, last dim fastest.
            let mut rest = j.clone();
            let mut offs = vec![expr::i(0); d];
            for i in (0..d).rev() {
                offs[i] = expr::binary(BinOp::Rem, rest.clone(), b[i].clone());
                rest = expr::binary(BinOp::Div, rest, b[i].clone());
            }
            let mut valid = expr::konst(DType::Bool, Scalar::B(true));
            let mut pos = expr::i(0);
            for i in 0..d {
                let num = expr::sub(
                    expr::add(ix[2 + i].clone(), expr::i(pads[i])),
                    expr::mul(offs[i].clone(), expr::i(dil[i])),
                );
                let q = expr::binary(BinOp::Div, num.clone(), expr::i(strides[i]));
                let on_grid = expr::binary(
                    BinOp::Eq,
                    expr::binary(BinOp::Rem, num.clone(), expr::i(strides[i])),
                    expr::i(0),
                );
                valid = expr::and(
                    valid,
                    expr::and(
                        expr::and(expr::ge(num, expr::i(0)), on_grid),
                        expr::lt(q.clone(), blocks[i].clone()),
                    ),
                );
                pos = expr::add(expr::mul(pos, blocks[i].clone()), q);
            }
            let chan = expr::add(expr::mul(ix[1].clone(), expr::i(k)), j);
            let at = expr::check_index(expr::select(valid.clone(), pos, expr::i(0)), l);
            let v = expr::load(dt, 0, vec![ix[0].clone(), chan, at]);
            expr::select(valid, v, expr::konst(dt, Scalar::I(0)))
        },
    )?;
    Ok(vec![out])
}
