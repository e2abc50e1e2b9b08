//! Split: one slicing map per output, sizes from `split` or an even division.

use super::vars;
use crate::error::Result;
use crate::frontend::build;
use crate::frontend::ctx::Ctx;
use crate::ir::ValueId;
use crate::ir::dim::{Dim, Shape};
use crate::ir::expr;

pub fn split(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let dims = ctx.known_shape(x)?;
    let r = dims.len();
    let axis = build::axis(ctx, ctx.attr_i_or("axis", 0)?, r)?;
    let n_out = ctx.node.output.len();
    let sizes: Vec<i64> = if ctx.opset >= 13 {
        match ctx.opt_input(1) {
            Some(s) if ctx.is_runtime(s) => {
                let mut sizes = Vec::new();
                for k in 0..n_out {
                    sizes.push(
                        *ctx.declared_shape(k, "input 'split'")?
                            .get(axis)
                            .ok_or_else(|| ctx.err("declared output rank is wrong"))?,
                    );
                }
                let sv = build::flat_i64(ctx, s)?;
                build::assert_equals(ctx, sv, &sizes)?;
                sizes
            }
            Some(s) => ctx.const_ints(s, "input 'split'")?,
            None => {
                if let Some(k) = ctx.attr_i("num_outputs")?
                    && k != n_out as i64
                {
                    return Err(ctx.err(format!(
                        "attribute 'num_outputs' is {k}, but the node declares {n_out} \
                         outputs; the model is invalid: they must be equal"
                    )));
                }
                even_split(ctx, dims[axis], n_out)?
            }
        }
    } else if let Some(s) = ctx.attr_ints("split") {
        s
    } else if ctx.opset < 2 && ctx.opt_input(1).is_some() {
        ctx.const_ints(ctx.input(1)?, "input 'split'")?
    } else {
        even_split(ctx, dims[axis], n_out)?
    };
    if sizes.len() != n_out {
        return Err(ctx.err(format!(
            "'split' has {} sizes, but the node declares {n_out} outputs; the model is \
             invalid: give one size per output",
            sizes.len()
        )));
    }
    if sizes.iter().sum::<i64>() != dims[axis] || sizes.iter().any(|&s| s < 0) {
        return Err(ctx.err(format!(
            "split sizes {sizes:?} do not add up to dim {} of size {}",
            axis, dims[axis]
        )));
    }
    let dt = ctx.dtype(x);
    let mut outs = Vec::new();
    let mut off = 0;
    for s in sizes {
        let mut shape: Shape = dims.iter().map(|&d| Dim::Known(d)).collect();
        shape[axis] = Dim::Known(s);
        let mut index = vars(r);
        index[axis] = expr::add(expr::var(axis as u32), expr::i(off));
        outs.push(ctx.map(dt, shape, vec![x], expr::load(dt, 0, index))?);
        off += s;
    }
    Ok(outs)
}

/// Sizes for splitting `len` into `n` parts: equal, the last one smaller (opset 18 rule).
fn even_split(ctx: &Ctx, len: i64, n: usize) -> Result<Vec<i64>> {
    if n == 0 {
        return Err(ctx.err("Split needs at least one output"));
    }
    let n = n as i64;
    let chunk = (len + n - 1) / n;
    let mut v = Vec::new();
    let mut left = len;
    for _ in 0..n {
        let c = chunk.min(left);
        v.push(c);
        left -= c;
    }
    Ok(v)
}
