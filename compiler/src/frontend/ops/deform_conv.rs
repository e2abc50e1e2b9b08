//! DeformConv (opsets 19, 22): a 2-D convolution whose taps sample the input at learned
//! fractional offsets, optionally weighted by a mask (deformable convolution v1 and v2).
//!
//! Built as im2col and a matrix product: one map samples every tap of every output
//! position bilinearly (`[N, C, kH, kW, oH, oW]`, each corner outside the input reading 0,
//! as the reference's GridSample with zero padding), times the mask; then per group the
//! weights `[OC/G, C/G·kH·kW]` times those columns on the GEMM path, plus the bias. The
//! offsets are run-time data, so every corner's index is clamped into the input and the
//! out-of-range ones are selected away: nothing is read out of bounds whatever they hold.

use crate::error::Result;
use crate::frontend::build::{self, FLOATS};
use crate::frontend::ctx::Ctx;
use crate::frontend::ops::{linalg, nn};
use crate::ir::dim::shape_from;
use crate::ir::expr::{self, BinOp, E, UnOp};
use crate::ir::{DType, ValueId};

fn v(k: u32) -> E {
    expr::var(k)
}

pub fn deform_conv(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (x, w, off) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    let (bias, mask) = (ctx.opt_input(3), ctx.opt_input(4));
    let dt = build::expect_types(ctx, x, "X", FLOATS)?;
    for (val, what) in [
        (Some(w), "W"),
        (Some(off), "offset"),
        (bias, "B"),
        (mask, "mask"),
    ] {
        if let Some(val) = val
            && ctx.dtype(val) != dt
        {
            return Err(ctx.err(format!("{what} is {} but X is {dt}", ctx.dtype(val))));
        }
    }
    let xs = ctx.known_shape(x)?;
    let ws = ctx.known_shape(w)?;
    if xs.len() != 4 {
        return Err(ctx.unsupported(format!(
            "X has shape {xs:?}; onnxc supports 2-D deformable convolution (X of rank 4), as \
             the reference does"
        )));
    }
    let (n, c, h, wd) = (xs[0], xs[1], xs[2], xs[3]);
    let group = ctx.attr_i_or("group", 1)?;
    let offset_group = ctx.attr_i_or("offset_group", 1)?;
    if ws.len() != 4
        || group < 1
        || ws[1] * group != c
        || ws[0] % group != 0
        || offset_group < 1
        || c % offset_group != 0
    {
        return Err(ctx.err(format!(
            "W {ws:?} does not fit X {xs:?} with group {group} and offset_group \
             {offset_group} (need W[1]·group = C, group | W[0], offset_group | C)"
        )));
    }
    let oc = ws[0];
    let kernel = ws[2..].to_vec();
    if let Some(k) = ctx.attr_ints("kernel_shape")
        && k != kernel
    {
        return Err(ctx.err(format!(
            "attribute kernel_shape {k:?} disagrees with W's spatial dims {kernel:?}"
        )));
    }
    let win = nn::window(ctx, &xs[2..], &kernel, false)?;
    let (kh, kw) = (kernel[0], kernel[1]);
    let (oh, ow) = (win.out[0], win.out[1]);
    let taps = offset_group * kh * kw;
    let os = ctx.known_shape(off)?;
    if os != [n, 2 * taps, oh, ow] {
        return Err(ctx.err(format!(
            "offset has shape {os:?}; it must be [{n}, {}, {oh}, {ow}] (offset_group · kH · kW \
             (y, x) pairs per output position)",
            2 * taps
        )));
    }
    if let Some(m) = mask {
        let ms = ctx.known_shape(m)?;
        if ms != [n, taps, oh, ow] {
            return Err(ctx.err(format!(
                "mask has shape {ms:?}; it must be [{n}, {taps}, {oh}, {ow}]"
            )));
        }
    }
    if let Some(b) = bias {
        let bs = ctx.known_shape(b)?;
        if bs != [oc] {
            return Err(ctx.err(format!("B has shape {bs:?}; it must be [{oc}]")));
        }
    }
    // Coordinates in float32 (float64 for double inputs).
    let ct = if dt == DType::F64 {
        DType::F64
    } else {
        DType::F32
    };
    // Columns over [N, C, kH, kW, oH, oW]: vars n c i j y x.
    let tap = expr::add(
        expr::mul(
            expr::add(
                expr::mul(expr::idiv(v(1), c / offset_group), expr::i(kh)),
                v(2),
            ),
            expr::i(kw),
        ),
        v(3),
    );
    // Sampling position along spatial dim `d` (0: y, 1: x) of the tap at (i, j).
    let position = |d: usize| -> E {
        let (o, k) = if d == 0 { (v(4), v(2)) } else { (v(5), v(3)) };
        let base = expr::sub(
            expr::add(
                expr::mul(o, expr::i(win.strides[d])),
                expr::mul(k, expr::i(win.dilations[d])),
            ),
            expr::i(win.pads_begin[d]),
        );
        let channel = expr::add(expr::mul(tap.clone(), expr::i(2)), expr::i(d as i64));
        let delta = expr::load(dt, 1, vec![v(0), channel, v(4), v(5)]);
        expr::add(expr::cast(base, ct), expr::cast(delta, ct))
    };
    // Per dim: the two corners' indices and weights.
    let corners = |d: usize| -> [(E, E); 2] {
        let p = position(d);
        let f = expr::unary(UnOp::Floor, p.clone());
        let t = expr::sub(p, f.clone());
        let i0 = expr::cast(f, DType::I64);
        let i1 = expr::add(i0.clone(), expr::i(1));
        [(i0, expr::sub(expr::f(ct, 1.0), t.clone())), (i1, t)]
    };
    let (ys, xs_) = (corners(0), corners(1));
    let mut sample: Option<E> = None;
    for (iy, wy) in &ys {
        for (ix, wx) in &xs_ {
            let inside = expr::and(
                expr::and(
                    expr::ge(iy.clone(), expr::i(0)),
                    expr::lt(iy.clone(), expr::i(h)),
                ),
                expr::and(
                    expr::ge(ix.clone(), expr::i(0)),
                    expr::lt(ix.clone(), expr::i(wd)),
                ),
            );
            let at = expr::load(
                dt,
                0,
                vec![
                    v(0),
                    v(1),
                    expr::clamp(iy.clone(), 0, h - 1),
                    expr::clamp(ix.clone(), 0, wd - 1),
                ],
            );
            let term = expr::mul(
                expr::mul(wy.clone(), wx.clone()),
                expr::select(inside, expr::cast(at, ct), expr::f(ct, 0.0)),
            );
            sample = Some(match sample {
                None => term,
                Some(s) => expr::add(s, term),
            });
        }
    }
    let mut sample = sample.expect("four corners");
    let mut inputs = vec![x, off];
    if let Some(m) = mask {
        inputs.push(m);
        sample = expr::binary(
            BinOp::Mul,
            sample,
            expr::cast(expr::load(dt, 2, vec![v(0), tap, v(4), v(5)]), ct),
        );
    }
    let cols = ctx.map(
        dt,
        shape_from(&[n, c, kh, kw, oh, ow]),
        inputs,
        expr::cast(sample, dt),
    )?;
    // Per group: W [G, OC/G, C/G·kH·kW] × columns [N, G, C/G·kH·kW, oH·oW].
    let depth = c / group * kh * kw;
    let cols = ctx.reshape(cols, shape_from(&[n, group, depth, oh * ow]))?;
    let wg = ctx.reshape(w, shape_from(&[group, oc / group, depth]))?;
    let y = linalg::matmul_values(ctx, wg, cols, false, false)?;
    let y = ctx.reshape(y, shape_from(&[n, oc, oh, ow]))?;
    match bias {
        None => Ok(vec![y]),
        Some(b) => Ok(vec![ctx.map(
            dt,
            shape_from(&[n, oc, oh, ow]),
            vec![y, b],
            expr::binary(
                BinOp::Add,
                build::load_same(dt, 0, 4),
                expr::load(dt, 1, vec![v(1)]),
            ),
        )?]),
    }
}
