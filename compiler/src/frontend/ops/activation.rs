//! Activation functions, each an elementwise expression (ONNX function bodies inlined).

use crate::error::Result;
use crate::frontend::build::{self, FLOATS, elementwise as ew, unary as un};
use crate::frontend::ctx::Ctx;
use crate::ir::expr::{self, BinOp, E, UnOp};
use crate::ir::{DType, ValueId};

fn float_act(ctx: &mut Ctx, f: impl FnOnce(DType, E) -> E) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let dt = build::expect_types(ctx, x, "input", FLOATS)?;
    Ok(vec![un(ctx, x, dt, |v| f(dt, v))?])
}

fn c(dt: DType, v: f64) -> E {
    expr::f(dt, v)
}
fn mul(a: E, b: E) -> E {
    expr::binary(BinOp::Mul, a, b)
}
fn add(a: E, b: E) -> E {
    expr::binary(BinOp::Add, a, b)
}
fn sub(a: E, b: E) -> E {
    expr::binary(BinOp::Sub, a, b)
}
fn div(a: E, b: E) -> E {
    expr::binary(BinOp::Div, a, b)
}
fn max(a: E, b: E) -> E {
    expr::binary(BinOp::Max, a, b)
}
fn min(a: E, b: E) -> E {
    expr::binary(BinOp::Min, a, b)
}
fn lt(a: E, b: E) -> E {
    expr::binary(BinOp::Lt, a, b)
}
fn exp(a: E) -> E {
    expr::unary(UnOp::Exp, a)
}

/// `log(1 + exp(x))`, computed stably as `max(x, 0) + log(1 + exp(-|x|))`.
/// `log(1 + u)` for `u ≥ 0`, accurate where `1 + u` rounds to 1: with `w = 1 + u`,
/// `log(w) · u / (w − 1)` (Goldberg's trick; the division undoes the rounding of `w`), and
/// `u` itself when `w == 1`. `log(1 + u)` alone is 0 there, a 100% relative error.
fn log1p_nonneg(dt: DType, u: E) -> E {
    let w = add(c(dt, 1.0), u.clone());
    expr::select(
        expr::binary(BinOp::Eq, w.clone(), c(dt, 1.0)),
        u.clone(),
        div(
            mul(expr::unary(UnOp::Log, w.clone()), u),
            sub(w, c(dt, 1.0)),
        ),
    )
}

/// `max(x, 0) + log1p(exp(−|x|))`: no overflow for large `x`, and for very negative `x`
/// (`exp(x)` below f32's epsilon) the result is `exp(x)`, not 0, as onnxruntime gives.
pub fn softplus_expr(dt: DType, x: E) -> E {
    let ax = expr::unary(UnOp::Abs, x.clone());
    add(
        max(x, c(dt, 0.0)),
        log1p_nonneg(dt, exp(expr::unary(UnOp::Neg, ax))),
    )
}

pub fn relu(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let dt = ctx.dtype(x);
    if !dt.is_signed_int() && !dt.is_float() {
        return Err(ctx.err(format!(
            "Relu needs a float or signed integer input, got {dt}"
        )));
    }
    // select keeps NaN as NaN like max(x, 0) in onnxruntime.
    Ok(vec![un(ctx, x, dt, |v| {
        expr::select(
            lt(v.clone(), expr::konst(dt, crate::ir::Scalar::I(0))),
            expr::konst(dt, crate::ir::Scalar::I(0)),
            v,
        )
    })?])
}

// Expressions of the activations with parameters, shared with the recurrent layers'
// activation lists (`ops/rnn.rs`).

pub fn leaky_relu_expr(dt: DType, x: E, alpha: f64) -> E {
    expr::select(lt(x.clone(), c(dt, 0.0)), mul(x.clone(), c(dt, alpha)), x)
}

pub fn hard_sigmoid_expr(dt: DType, x: E, alpha: f64, beta: f64) -> E {
    max(
        c(dt, 0.0),
        min(c(dt, 1.0), add(mul(x, c(dt, alpha)), c(dt, beta))),
    )
}

pub fn elu_expr(dt: DType, x: E, alpha: f64) -> E {
    expr::select(
        lt(x.clone(), c(dt, 0.0)),
        mul(c(dt, alpha), sub(exp(x.clone()), c(dt, 1.0))),
        x,
    )
}

pub fn softsign_expr(dt: DType, x: E) -> E {
    div(x.clone(), add(c(dt, 1.0), expr::unary(UnOp::Abs, x)))
}

pub fn affine_expr(dt: DType, x: E, alpha: f64, beta: f64) -> E {
    add(mul(c(dt, alpha), x), c(dt, beta))
}

pub fn scaled_tanh_expr(dt: DType, x: E, alpha: f64, beta: f64) -> E {
    mul(c(dt, alpha), expr::unary(UnOp::Tanh, mul(c(dt, beta), x)))
}

pub fn thresholded_relu_expr(dt: DType, x: E, alpha: f64) -> E {
    expr::select(
        expr::binary(BinOp::Gt, x.clone(), c(dt, alpha)),
        x,
        c(dt, 0.0),
    )
}

pub fn leaky_relu(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let alpha = ctx.attr_f_or("alpha", 0.01)?;
    float_act(ctx, |dt, x| leaky_relu_expr(dt, x, alpha))
}

pub fn prelu(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (x, slope) = (ctx.input(0)?, ctx.input(1)?);
    let dt = ctx.dtype(x);
    // Before opset 7 slope broadcast to X's trailing dims or per channel.
    let slope = if ctx.opset < 7 {
        let (rx, rs) = (ctx.rank(x), ctx.rank(slope));
        let ss = ctx.shape(slope);
        if rs == 1 && rx >= 2 && ss[0] != crate::ir::Dim::Known(1) && ctx.shape(x)[1] == ss[0] {
            let mut shape = vec![crate::ir::Dim::Known(1); rx - 1];
            shape[0] = ss[0].clone();
            ctx.reshape(slope, shape)?
        } else {
            slope
        }
    } else {
        slope
    };
    let zero = expr::konst(dt, crate::ir::Scalar::I(0));
    Ok(vec![ew(ctx, &[x, slope], dt, |l| {
        expr::select(
            lt(l[0].clone(), zero),
            mul(l[0].clone(), l[1].clone()),
            l[0].clone(),
        )
    })?])
}

pub fn sigmoid(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    float_act(ctx, |_, x| expr::unary(UnOp::Sigmoid, x))
}

pub fn tanh(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    float_act(ctx, |_, x| expr::unary(UnOp::Tanh, x))
}

pub fn hard_sigmoid(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let alpha = ctx.attr_f_or("alpha", 0.2)?;
    let beta = ctx.attr_f_or("beta", 0.5)?;
    float_act(ctx, |dt, x| hard_sigmoid_expr(dt, x, alpha, beta))
}

pub fn hard_swish(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    float_act(ctx, |dt, x| {
        mul(
            x.clone(),
            max(
                c(dt, 0.0),
                min(c(dt, 1.0), add(mul(x, c(dt, 1.0 / 6.0)), c(dt, 0.5))),
            ),
        )
    })
}

pub fn elu(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let alpha = ctx.attr_f_or("alpha", 1.0)?;
    float_act(ctx, |dt, x| elu_expr(dt, x, alpha))
}

pub fn selu(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let alpha = ctx.attr_f_or("alpha", 1.673_263_192_176_818_8)?;
    let gamma = ctx.attr_f_or("gamma", 1.050_701_022_148_132_3)?;
    float_act(ctx, |dt, x| {
        let neg = sub(mul(c(dt, alpha), exp(x.clone())), c(dt, alpha));
        mul(
            c(dt, gamma),
            expr::select(expr::binary(BinOp::Le, x.clone(), c(dt, 0.0)), neg, x),
        )
    })
}

pub fn celu(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let alpha = ctx.attr_f_or("alpha", 1.0)?;
    float_act(ctx, |dt, x| {
        let e = mul(
            c(dt, alpha),
            sub(exp(div(x.clone(), c(dt, alpha))), c(dt, 1.0)),
        );
        add(max(c(dt, 0.0), x), min(c(dt, 0.0), e))
    })
}

pub fn softplus(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    float_act(ctx, softplus_expr)
}

pub fn softsign(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    float_act(ctx, softsign_expr)
}

pub fn thresholded_relu(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let alpha = ctx.attr_f_or("alpha", 1.0)?;
    float_act(ctx, |dt, x| thresholded_relu_expr(dt, x, alpha))
}

pub fn shrink(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let bias = ctx.attr_f_or("bias", 0.0)?;
    let lambd = ctx.attr_f_or("lambd", 0.5)?;
    let x = ctx.input(0)?;
    let dt = ctx.dtype(x);
    if dt == DType::Bool {
        return Err(ctx.err("Shrink needs a numeric input"));
    }
    Ok(vec![un(ctx, x, dt, |x| {
        let k = |v: f64| expr::konst(dt, crate::ir::Scalar::F(v));
        expr::select(
            lt(x.clone(), k(-lambd)),
            add(x.clone(), k(bias)),
            expr::select(
                expr::binary(BinOp::Gt, x.clone(), k(lambd)),
                sub(x, k(bias)),
                k(0.0),
            ),
        )
    })?])
}

pub fn mish(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    float_act(ctx, |dt, x| {
        mul(x.clone(), expr::unary(UnOp::Tanh, softplus_expr(dt, x)))
    })
}

pub fn gelu(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let approx = ctx.attr_s_or("approximate", "none")?;
    let tanh = match approx.as_str() {
        "none" => false,
        "tanh" => true,
        other => {
            return Err(ctx.err(format!(
                "attribute 'approximate' must be 'none' or 'tanh', got '{other}'"
            )));
        }
    };
    // The exact form on float32 of known shape: one runtime kernel (`kernels::Gelu`).
    let x = ctx.input(0)?;
    let shape = ctx.shape(x);
    if !tanh && ctx.dtype(x) == DType::F32 && crate::ir::dim::known_dims(&shape).is_some() {
        return Ok(vec![ctx.add(
            crate::ir::Op::kernel(crate::kernels::Gelu),
            vec![x],
            crate::ir::TypeInfo::new(DType::F32, shape),
        )?]);
    }
    float_act(ctx, |dt, x| {
        let inner = if tanh {
            let x3 = mul(mul(x.clone(), x.clone()), x.clone());
            let t = mul(
                c(dt, (2.0 / std::f64::consts::PI).sqrt()),
                add(x.clone(), mul(c(dt, 0.044715), x3)),
            );
            expr::unary(UnOp::Tanh, t)
        } else {
            expr::unary(
                UnOp::Erf,
                mul(x.clone(), c(dt, std::f64::consts::FRAC_1_SQRT_2)),
            )
        };
        mul(mul(c(dt, 0.5), x), add(c(dt, 1.0), inner))
    })
}

/// SwiGLU (opset 28): `Swish_alpha(A) · B`, A and B of one shape (no broadcasting).
pub fn swiglu(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (a, b) = (ctx.input(0)?, ctx.input(1)?);
    let alpha = ctx.attr_f_or("alpha", 1.0)?;
    let dt = build::expect_types(ctx, a, "A", FLOATS)?;
    if ctx.dtype(b) != dt {
        return Err(ctx.err(format!("B has type {}, A {dt}", ctx.dtype(b))));
    }
    let (sa, sb) = (ctx.shape(a), ctx.shape(b));
    if sa != sb {
        return Err(ctx.err(format!(
            "A has shape {} and B {}: SwiGLU takes inputs of one shape (no broadcasting)",
            crate::ir::dim::fmt_shape(&sa),
            crate::ir::dim::fmt_shape(&sb)
        )));
    }
    Ok(vec![ew(ctx, &[a, b], dt, |l| {
        let x = l[0].clone();
        let swish = mul(x.clone(), expr::unary(UnOp::Sigmoid, mul(c(dt, alpha), x)));
        mul(swish, l[1].clone())
    })?])
}

pub fn swish(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let alpha = ctx.attr_f_or("alpha", 1.0)?;
    float_act(ctx, |dt, x| {
        mul(x.clone(), expr::unary(UnOp::Sigmoid, mul(c(dt, alpha), x)))
    })
}
