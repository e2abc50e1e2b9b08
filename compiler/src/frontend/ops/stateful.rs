//! The opset-27 ops of recurrent sequence models that carry a state from call to call
//! (Mamba, Gated DeltaNet): CausalConvWithState and LinearAttention.
//!
//! CausalConvWithState is the pattern it replaces, built from core ops: the past state
//! (zeros when absent) concatenated before the input, a depthwise convolution without
//! padding, an optional SiLU, and the last `k − 1` positions as the new state.
//! LinearAttention's recurrence runs on one runtime kernel (`kernels::LinearAttention`) in
//! float32, the other float types cast around it.

use crate::error::Result;
use crate::frontend::build::{self, FLOATS};
use crate::frontend::ctx::Ctx;
use crate::frontend::ops::shape::concat_parts;
use crate::ir::dim::shape_from;
use crate::ir::expr::{self, BinOp, UnOp};
use crate::ir::graph::ConvOp;
use crate::ir::{DType, Scalar, TypeInfo, ValueId};

pub fn causal_conv_with_state(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (x, w) = (ctx.input(0)?, ctx.input(1)?);
    let dt = build::expect_types(ctx, x, "input", FLOATS)?;
    for (v, what) in [
        (Some(w), "weight"),
        (ctx.opt_input(2), "bias"),
        (ctx.opt_input(3), "past_state"),
    ] {
        if let Some(v) = v
            && ctx.dtype(v) != dt
        {
            return Err(ctx.err(format!("{what} is {} but input is {dt}", ctx.dtype(v))));
        }
    }
    let activation = ctx.attr_s_or("activation", "none")?;
    let silu = match activation.as_str() {
        "none" => false,
        "silu" | "swish" => true,
        a => {
            return Err(ctx.err(format!(
                "activation '{a}' is not one of 'none', 'silu', 'swish'"
            )));
        }
    };
    let xs = ctx.known_shape(x)?;
    let ws = ctx.known_shape(w)?;
    let [b, c, l] = xs[..] else {
        return Err(ctx.err(format!(
            "input has shape {xs:?}; it must be (batch_size, channels, length)"
        )));
    };
    if ws.len() != 3 || ws[0] != c || ws[1] != 1 || ws[2] < 1 {
        return Err(ctx.err(format!(
            "weight has shape {ws:?}; it must be ({c}, 1, k) with k ≥ 1 for the input's {c} channels"
        )));
    }
    let k = ws[2];
    let bias = ctx.opt_input(2);
    if let Some(bv) = bias {
        let bs = ctx.known_shape(bv)?;
        if bs != [c] {
            return Err(ctx.err(format!("bias has shape {bs:?}; it must be [{c}]")));
        }
    }
    let past = match ctx.opt_input(3) {
        Some(p) => {
            let ps = ctx.known_shape(p)?;
            if ps != [b, c, k - 1] {
                return Err(ctx.err(format!(
                    "past_state has shape {ps:?}; it must be [{b}, {c}, {}] (k − 1 positions)",
                    k - 1
                )));
            }
            p
        }
        None => ctx.map(
            dt,
            shape_from(&[b, c, k - 1]),
            vec![],
            expr::konst(dt, Scalar::zero(dt)),
        )?,
    };
    let padded_len = l + k - 1;
    let padded = concat_parts(ctx, vec![past, x], 2, dt, shape_from(&[b, c, padded_len]))?;
    let op = ConvOp {
        group: c,
        strides: vec![1],
        dilations: vec![1],
        pads_begin: vec![0],
        pads_end: vec![0],
        exact: false,
    };
    let mut inputs = vec![padded, w];
    inputs.extend(bias);
    let conv = ctx.conv(op, inputs, TypeInfo::new(dt, shape_from(&[b, c, l])))?;
    let output = if silu {
        // x·sigmoid(x) in float32, rounded once to the input's type (as the reference).
        build::unary(ctx, conv, dt, |v| {
            let f = build::cast_expr(v, DType::F32, false);
            let y = expr::binary(BinOp::Mul, f.clone(), expr::unary(UnOp::Sigmoid, f));
            build::cast_expr(y, dt, false)
        })?
    } else {
        conv
    };
    // The new state: the last k − 1 positions of the padded input.
    let vars: Vec<_> = (0..3).map(expr::var).collect();
    let body = expr::load(
        dt,
        0,
        vec![
            vars[0].clone(),
            vars[1].clone(),
            expr::add(vars[2].clone(), expr::i(l)),
        ],
    );
    let present = ctx.map(dt, shape_from(&[b, c, k - 1]), vec![padded], body)?;
    Ok(vec![output, present])
}
