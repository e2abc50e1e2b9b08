//! Experimental ops of ONNX's first opsets (removed in opset 10) that exports of that time
//! use — the model zoo's Tiny YOLOv2 starts with ImageScaler, Caffe2 conversions use Crop
//! and Scale: ImageScaler, Scale, Affine, ScaledTanh, ParametricSoftplus, Crop. Semantics
//! and required attributes follow onnxruntime, which still runs them.

use crate::error::Result;
use crate::frontend::build::{self, FLOATS};
use crate::frontend::ctx::Ctx;
use crate::frontend::ops::activation as act;
use crate::ir::ValueId;
use crate::ir::dim::shape_from;
use crate::ir::expr::{self, BinOp};

fn required_f(ctx: &Ctx, name: &str) -> Result<f64> {
    ctx.attr_f(name)?
        .ok_or_else(|| ctx.err(format!("attribute '{name}' (a float) is required")))
}

/// ImageScaler: `scale · x + bias[c]` over NCHW images.
pub fn image_scaler(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let dt = build::expect_types(ctx, x, "input", FLOATS)?;
    let xs = ctx.known_shape(x)?;
    let scale = ctx.attr_f_or("scale", 1.0)?;
    let bias = ctx
        .attr_floats("bias")
        .ok_or_else(|| ctx.err("attribute 'bias' (one float per channel) is required"))?;
    if xs.len() != 4 || bias.len() as i64 != xs[1] {
        return Err(ctx.err(format!(
            "input has shape {xs:?} and bias {} values; ImageScaler needs NCHW input and one bias per channel",
            bias.len()
        )));
    }
    // bias[c] as a select chain would grow with C; a constant [C] operand instead.
    let b = ctx.constant(crate::ir::Tensor::from_scalars(
        dt,
        vec![bias.len() as i64],
        &bias
            .iter()
            .map(|&v| crate::ir::Scalar::F(v as f64).cast(dt))
            .collect::<Vec<_>>(),
    ));
    let vars: Vec<_> = (0..4).map(expr::var).collect();
    let body = expr::add(
        expr::mul(expr::load(dt, 0, vars.clone()), expr::f(dt, scale)),
        expr::load(dt, 1, vec![vars[1].clone()]),
    );
    let shape = ctx.shape(x);
    Ok(vec![ctx.map(dt, shape, vec![x, b], body)?])
}

fn float_map(
    ctx: &mut Ctx,
    f: impl FnOnce(crate::ir::DType, expr::E) -> expr::E,
) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let dt = build::expect_types(ctx, x, "input", FLOATS)?;
    Ok(vec![build::unary(ctx, x, dt, |v| f(dt, v))?])
}

/// Scale: `scale · x`.
pub fn scale(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let s = ctx.attr_f_or("scale", 1.0)?;
    float_map(ctx, |dt, x| expr::mul(x, expr::f(dt, s)))
}

/// Affine: `alpha · x + beta`.
pub fn affine(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (a, b) = (ctx.attr_f_or("alpha", 1.0)?, ctx.attr_f_or("beta", 0.0)?);
    float_map(ctx, |dt, x| act::affine_expr(dt, x, a, b))
}

/// ScaledTanh: `alpha · tanh(beta · x)`.
pub fn scaled_tanh(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (a, b) = (required_f(ctx, "alpha")?, required_f(ctx, "beta")?);
    float_map(ctx, |dt, x| act::scaled_tanh_expr(dt, x, a, b))
}

/// ParametricSoftplus: `alpha · ln(1 + e^(beta · x))`.
pub fn parametric_softplus(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (a, b) = (required_f(ctx, "alpha")?, required_f(ctx, "beta")?);
    float_map(ctx, |dt, x| {
        expr::binary(
            BinOp::Mul,
            expr::f(dt, a),
            act::softplus_expr(dt, expr::binary(BinOp::Mul, expr::f(dt, b), x)),
        )
    })
}

/// Crop: NCHW images cut by `border` = [left, top, right, bottom]; with `scale` = [h, w]
/// the crop is h × w from (top, left).
pub fn crop(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let dt = ctx.dtype(x);
    let xs = ctx.known_shape(x)?;
    let border = ctx.attr_ints("border").unwrap_or_default();
    let [left, top, right, bottom] = border[..] else {
        return Err(ctx.err(format!(
            "attribute 'border' must hold four values (left, top, right, bottom), it holds {}",
            border.len()
        )));
    };
    if xs.len() != 4 {
        return Err(ctx.err(format!("input has shape {xs:?}; Crop needs NCHW input")));
    }
    let (h, w) = match ctx.attr_ints("scale").as_deref() {
        Some([h, w]) => (*h, *w),
        Some(s) => {
            return Err(ctx.err(format!(
                "attribute 'scale' must hold two values (height, width), it holds {}",
                s.len()
            )));
        }
        None => (xs[2] - top - bottom, xs[3] - left - right),
    };
    if border.iter().any(|&b| b < 0) || h < 0 || w < 0 || top + h > xs[2] || left + w > xs[3] {
        return Err(ctx.err(format!(
            "a {h}×{w} crop at (top {top}, left {left}) does not fit the {}×{} input",
            xs[2], xs[3]
        )));
    }
    let body = expr::load(
        dt,
        0,
        vec![
            expr::var(0),
            expr::var(1),
            expr::add(expr::var(2), expr::i(top)),
            expr::add(expr::var(3), expr::i(left)),
        ],
    );
    let shape = shape_from(&[xs[0], xs[1], h, w]);
    Ok(vec![ctx.map(dt, shape, vec![x], body)?])
}
