//! The `ai.onnx.preview.training` optimizers: Adagrad, Adam and Momentum. Each is one
//! update step of a training loop, a pure function of its inputs (learning rate `R`, update
//! count `T`, then the variables and their state, group by group), so an inference
//! compiler runs it as elementwise maps: one map per output, the shared terms computed once
//! each (`expr::share`). `Gradient` needs automatic differentiation and stays refused.
//!
//! Formulas and the outputs' order follow the operator docs and onnx's reference
//! implementation; arithmetic is in the variables' type.

use crate::error::Result;
use crate::frontend::build;
use crate::frontend::ctx::Ctx;
use crate::ir::expr::{self, BinOp, E, UnOp, add, f as c, mul, sub};
use crate::ir::{DType, ValueId};

const FLOATS: &[DType] = &[DType::F32, DType::F64];

/// The inputs of an optimizer with `per_var` tensors per optimized variable
/// (`X, G` then its state), grouped: `groups[k][i]` is the `k`-th tensor of variable `i`.
struct Step {
    r: ValueId,
    t: ValueId,
    groups: Vec<Vec<ValueId>>,
}

fn step(ctx: &mut Ctx, per_var: usize, names: &[&str]) -> Result<Step> {
    let r = ctx.input(0)?;
    let t = ctx.input(1)?;
    build::expect_types(ctx, r, "input R", FLOATS)?;
    build::expect_types(ctx, t, "input T", &[DType::I64])?;
    for (v, what) in [(r, "R"), (t, "T")] {
        if ctx.known_shape(v)?.iter().product::<i64>() != 1 {
            return Err(ctx.err(format!(
                "input {what} has shape {:?}; it must be a scalar",
                ctx.shape(v)
            )));
        }
    }
    let rest = ctx.num_inputs().saturating_sub(2);
    if rest == 0 || !rest.is_multiple_of(per_var) {
        return Err(ctx.err(format!(
            "{rest} tensors after R and T; this optimizer takes {} per variable ({}), grouped by kind",
            per_var,
            names.join(", ")
        )));
    }
    let n = rest / per_var;
    let mut groups = vec![Vec::with_capacity(n); per_var];
    for (k, group) in groups.iter_mut().enumerate() {
        for i in 0..n {
            group.push(ctx.input(2 + k * n + i)?);
        }
    }
    for i in 0..n {
        let x = groups[0][i];
        let dt = build::expect_types(ctx, x, &format!("{} {i}", names[0]), FLOATS)?;
        let shape = ctx.known_shape(x)?;
        for (k, name) in names.iter().enumerate().skip(1) {
            let v = groups[k][i];
            if ctx.dtype(v) != dt || ctx.known_shape(v)? != shape {
                return Err(ctx.err(format!(
                    "{name} {i} is {:?} {:?}, but {} {i} is {dt:?} {shape:?}; they must match",
                    ctx.dtype(v),
                    ctx.shape(v),
                    names[0]
                )));
            }
        }
    }
    // R and T as rank-0 scalars, so they broadcast against every variable.
    let r = ctx.reshape(r, vec![])?;
    let t = ctx.reshape(t, vec![])?;
    Ok(Step { r, t, groups })
}

/// Builds one map per output formula: `f` gets the loaded `[R, T, group tensors…]` (R and T
/// already in the variable's type) and returns the outputs' expressions.
fn per_variable(
    ctx: &mut Ctx,
    s: &Step,
    f: impl Fn(DType, &[E]) -> Vec<E>,
) -> Result<Vec<Vec<ValueId>>> {
    let n = s.groups[0].len();
    let mut outs: Vec<Vec<ValueId>> = Vec::new();
    for i in 0..n {
        let dt = ctx.dtype(s.groups[0][i]);
        let mut inputs = vec![s.r, s.t];
        inputs.extend(s.groups.iter().map(|g| g[i]));
        let formulas = {
            let rank = ctx.rank(s.groups[0][i]);
            let mut loads = vec![
                expr::cast(expr::load(ctx.dtype(s.r), 0, vec![]), dt),
                expr::cast(expr::load(DType::I64, 1, vec![]), dt),
            ];
            loads.extend((0..s.groups.len()).map(|k| build::load_same(dt, 2 + k as u32, rank)));
            f(dt, &loads)
        };
        if outs.is_empty() {
            outs = vec![Vec::with_capacity(n); formulas.len()];
        }
        let shape = ctx.shape(s.groups[0][i]);
        for (k, e) in formulas.into_iter().enumerate() {
            let y = ctx.map(dt, shape.clone(), inputs.clone(), expr::share(&e))?;
            outs[k].push(y);
        }
    }
    Ok(outs)
}

fn div(a: E, b: E) -> E {
    expr::binary(BinOp::Div, a, b)
}

/// `norm_coefficient * X + G`: the gradient with the L2 regularization term's.
fn regularized(dt: DType, norm: f64, x: &E, g: &E) -> E {
    add(mul(c(dt, norm), x.clone()), g.clone())
}

/// Adagrad: inputs `R, T, X…, G…, H…`; outputs `X_new…, H_new…`.
pub fn adagrad(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let norm = ctx.attr_f_or("norm_coefficient", 0.0)?;
    let decay = ctx.attr_f_or("decay_factor", 0.0)?;
    let eps = ctx.attr_f_or("epsilon", 1e-6)?;
    let s = step(ctx, 3, &["X", "G", "H"])?;
    let outs = per_variable(ctx, &s, |dt, l| {
        let (r, t, x, g, h) = (&l[0], &l[1], &l[2], &l[3], &l[4]);
        let r = div(r.clone(), add(c(dt, 1.0), mul(t.clone(), c(dt, decay))));
        let g = regularized(dt, norm, x, g);
        let h_new = add(h.clone(), mul(g.clone(), g.clone()));
        let h_sqrt = add(expr::unary(UnOp::Sqrt, h_new.clone()), c(dt, eps));
        let x_new = sub(x.clone(), div(mul(r, g), h_sqrt));
        vec![x_new, h_new]
    })?;
    Ok(outs.concat())
}

/// Momentum (standard or Nesterov): inputs `R, T, X…, G…, V…`; outputs `X_new…, V_new…`.
pub fn momentum(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let required = |ctx: &Ctx, name: &str| -> Result<f64> {
        ctx.attr_f(name)?
            .ok_or_else(|| ctx.err(format!("attribute '{name}' is required")))
    };
    let norm = required(ctx, "norm_coefficient")?;
    let alpha = required(ctx, "alpha")?;
    let beta = required(ctx, "beta")?;
    let nesterov = match ctx
        .attr_s("mode")?
        .ok_or_else(|| ctx.err("attribute 'mode' is required"))?
        .as_str()
    {
        "standard" => false,
        "nesterov" => true,
        m => {
            return Err(ctx.err(format!(
                "mode '{m}' is not one of 'standard' and 'nesterov'"
            )));
        }
    };
    let s = step(ctx, 3, &["X", "G", "V"])?;
    let outs = per_variable(ctx, &s, |dt, l| {
        let (r, t, x, g, v) = (&l[0], &l[1], &l[2], &l[3], &l[4]);
        let g = regularized(dt, norm, x, g);
        // The gradient's coefficient is 1 at the first update (T = 0).
        let first = expr::binary(BinOp::Gt, t.clone(), c(dt, 0.0));
        let beta = expr::select(first, c(dt, beta), c(dt, 1.0));
        let v_new = add(mul(c(dt, alpha), v.clone()), mul(beta, g.clone()));
        let step = if nesterov {
            add(g, mul(c(dt, alpha), v_new.clone()))
        } else {
            v_new.clone()
        };
        let x_new = sub(x.clone(), mul(r.clone(), step));
        vec![x_new, v_new]
    })?;
    Ok(outs.concat())
}

/// Adam: inputs `R, T, X…, G…, V…, H…`; outputs `X_new…, V_new…, H_new…`.
pub fn adam(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let alpha = ctx.attr_f_or("alpha", 0.9)?;
    let beta = ctx.attr_f_or("beta", 0.999)?;
    let eps = ctx.attr_f_or("epsilon", 1e-6)?;
    let norm = ctx.attr_f_or("norm_coefficient", 0.0)?;
    let norm_post = ctx.attr_f_or("norm_coefficient_post", 0.0)?;
    let s = step(ctx, 4, &["X", "G", "V", "H"])?;
    let outs = per_variable(ctx, &s, |dt, l| {
        let (r, t, x, g, v, h) = (&l[0], &l[1], &l[2], &l[3], &l[4], &l[5]);
        let g = regularized(dt, norm, x, g);
        let v_new = add(
            mul(c(dt, alpha), v.clone()),
            mul(c(dt, 1.0 - alpha), g.clone()),
        );
        let h_new = add(
            mul(c(dt, beta), h.clone()),
            mul(c(dt, 1.0 - beta), mul(g.clone(), g)),
        );
        let h_sqrt = add(expr::unary(UnOp::Sqrt, h_new.clone()), c(dt, eps));
        // Bias correction from the second update on (T > 0).
        let pow = |b: f64| expr::binary(BinOp::Pow, c(dt, b), t.clone());
        let corrected = div(
            mul(
                r.clone(),
                expr::unary(UnOp::Sqrt, sub(c(dt, 1.0), pow(beta))),
            ),
            sub(c(dt, 1.0), pow(alpha)),
        );
        let later = expr::binary(BinOp::Gt, t.clone(), c(dt, 0.0));
        let r = expr::select(later, corrected, r.clone());
        let x_new = sub(x.clone(), mul(r, div(v_new.clone(), h_sqrt)));
        let x_final = mul(c(dt, 1.0 - norm_post), x_new);
        vec![x_final, v_new, h_new]
    })?;
    Ok(outs.concat())
}
