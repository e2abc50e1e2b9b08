//! Element permutations: DepthToSpace, SpaceToDepth, ReverseSequence.

use super::vars;
use crate::error::Result;
use crate::frontend::build;
use crate::frontend::ctx::Ctx;
use crate::ir::dim::{Dim, Shape};
use crate::ir::expr;
use crate::ir::{DType, ValueId};

pub fn depth_to_space(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let d = ctx.known_shape(x)?;
    let b = ctx
        .attr_i("blocksize")?
        .ok_or_else(|| ctx.err("attribute 'blocksize' is required"))?;
    // blocksize² must divide the channels, and the output's height and width (the input's
    // times blocksize) must not overflow (empty channels divide by anything).
    let squared = b.checked_mul(b);
    let grown = |k: usize| d.get(k).and_then(|&v| v.checked_mul(b));
    let fits = d.len() == 4 && b >= 1 && squared.is_some_and(|bb| d[1] % bb == 0);
    let (Some(squared), Some(_), Some(_), true) = (squared, grown(2), grown(3), fits) else {
        return Err(ctx.err(format!(
            "input {d:?} cannot be rearranged with blocksize {b}: the input must be 4-D, \
             blocksize² must divide its channels, and its height and width times blocksize \
             must fit in 64 bits"
        )));
    };
    let crd = ctx.attr_s_or("mode", "DCR")? == "CRD";
    let (n, c, h, w) = (d[0], d[1], d[2], d[3]);
    let c2 = c / squared;
    // out[n, c', h*b + i, w*b + j] = in[n, channel, h, w]
    let (oc, oh, ow) = (expr::var(1), expr::var(2), expr::var(3));
    let (i, j) = (expr::imod(oh.clone(), b), expr::imod(ow.clone(), b));
    let ch = if crd {
        expr::add(
            expr::mul(oc, expr::i(squared)),
            expr::add(expr::mul(i, expr::i(b)), j),
        )
    } else {
        expr::add(
            expr::mul(expr::add(expr::mul(i, expr::i(b)), j), expr::i(c2)),
            oc,
        )
    };
    let index = vec![expr::var(0), ch, expr::idiv(oh, b), expr::idiv(ow, b)];
    let dt = ctx.dtype(x);
    let shape: Shape = [n, c2, h * b, w * b]
        .iter()
        .map(|&v| Dim::Known(v))
        .collect();
    Ok(vec![ctx.map(
        dt,
        shape,
        vec![x],
        expr::load(dt, 0, index),
    )?])
}

pub fn space_to_depth(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let d = ctx.known_shape(x)?;
    let b = ctx
        .attr_i("blocksize")?
        .ok_or_else(|| ctx.err("attribute 'blocksize' is required"))?;
    // blocksize must divide the height and width, and the channels times blocksize² (the
    // output's channels) must not overflow (an empty input divides by anything).
    let squared = b.checked_mul(b);
    let channels = squared.zip(d.get(1)).and_then(|(bb, &c)| c.checked_mul(bb));
    let fits = d.len() == 4 && b >= 1 && d[2] % b == 0 && d[3] % b == 0;
    let (Some(squared), Some(channels), true) = (squared, channels, fits) else {
        return Err(ctx.err(format!(
            "input {d:?} cannot be rearranged with blocksize {b}: the input must be 4-D, \
             blocksize must divide its height and width, and its channels times blocksize² \
             must fit in 64 bits"
        )));
    };
    let (n, c, h, w) = (d[0], d[1], d[2], d[3]);
    // DCR: out[n, (i*b + j)*c + ch, y, x] = in[n, ch, y*b + i, x*b + j]; CRD (opset 28):
    // out[n, ch*b*b + i*b + j, …].
    let crd = ctx.attr_s_or("mode", "DCR")? == "CRD";
    let oc = expr::var(1);
    let (ch, blk) = if crd {
        (expr::idiv(oc.clone(), squared), expr::imod(oc, squared))
    } else {
        (expr::imod(oc.clone(), c), expr::idiv(oc, c))
    };
    let (i, j) = (expr::idiv(blk.clone(), b), expr::imod(blk, b));
    let index = vec![
        expr::var(0),
        ch,
        expr::add(expr::mul(expr::var(2), expr::i(b)), i),
        expr::add(expr::mul(expr::var(3), expr::i(b)), j),
    ];
    let dt = ctx.dtype(x);
    let shape: Shape = [n, channels, h / b, w / b]
        .iter()
        .map(|&v| Dim::Known(v))
        .collect();
    Ok(vec![ctx.map(
        dt,
        shape,
        vec![x],
        expr::load(dt, 0, index),
    )?])
}

pub fn reverse_sequence(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (x, lens) = (ctx.input(0)?, ctx.input(1)?);
    let dims = ctx.known_shape(x)?;
    let batch_axis = ctx.attr_i_or("batch_axis", 1)? as usize;
    let time_axis = ctx.attr_i_or("time_axis", 0)? as usize;
    if dims.len() < 2 || batch_axis > 1 || time_axis > 1 || batch_axis == time_axis {
        return Err(ctx.err("batch_axis and time_axis must be 0 and 1 in some order"));
    }
    let r = dims.len();
    let t = expr::var(time_axis as u32);
    let len = expr::load(DType::I64, 1, vec![expr::var(batch_axis as u32)]);
    let len = expr::clamp(len, 0, dims[time_axis]);
    // Within the sequence length the time index is reversed; beyond it, copied.
    let rev = expr::sub(expr::sub(len.clone(), expr::i(1)), t.clone());
    let src = expr::select(expr::lt(t.clone(), len), rev, t);
    let mut index = vars(r);
    index[time_axis] = expr::clamp(src, 0, dims[time_axis] - 1);
    let dt = ctx.dtype(x);
    let shape = ctx.shape(x);
    let lens = build::cast(ctx, lens, DType::I64)?;
    Ok(vec![ctx.map(
        dt,
        shape,
        vec![x, lens],
        expr::load(dt, 0, index),
    )?])
}
