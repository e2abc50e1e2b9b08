//! LinearRegressor and LinearClassifier: `X·Cᵀ + b` (one matrix product with the constant
//! coefficients, float32), then onnxruntime's post-processing: for a classifier the label of
//! the best score (one score: positive above 0) and, with one score and two labels, the
//! scores `[1 − s, s]`; the post transform where onnxruntime applies it (one score per row:
//! PROBIT only).

use super::{Labels, Post, input_rows, label_values, post_transform, transform_rows};
use crate::error::Result;
use crate::frontend::ctx::Ctx;
use crate::ir::dim::Dim;
use crate::ir::expr::{self, BinOp};
use crate::ir::graph::{MatMulOp, ReduceKind};
use crate::ir::{DType, Scalar, Tensor, TypeInfo, ValueId};

/// `X·Cᵀ + b` as float32 `[n, t]`.
fn scores(ctx: &mut Ctx, coefficients: &[f32], intercepts: &[f32], t: usize) -> Result<ValueId> {
    let x = input_rows(ctx, false)?;
    let [n, f] = ctx.known_shape(x)?[..] else {
        return Err(ctx.err("input X must have rank 1 or 2"));
    };
    if t == 0 || coefficients.len() != t * f as usize {
        return Err(ctx.err(format!(
            "{} coefficients for {t} targets of {f} features (X is [{n}, {f}]); expected {}",
            coefficients.len(),
            t * f as usize
        )));
    }
    if !intercepts.is_empty() && intercepts.len() != t {
        return Err(ctx.err(format!("{} intercepts for {t} targets", intercepts.len())));
    }
    let c = ctx.constant(Tensor::from_scalars(
        DType::F32,
        vec![t as i64, f],
        &coefficients
            .iter()
            .map(|&v| Scalar::F(v as f64))
            .collect::<Vec<_>>(),
    ));
    let dims = vec![Dim::Known(n), Dim::Known(t as i64)];
    let p = ctx.matmul(
        MatMulOp {
            trans_a: false,
            trans_b: true,
        },
        x,
        c,
        TypeInfo::new(DType::F32, dims.clone()),
    )?;
    if intercepts.is_empty() {
        return Ok(p);
    }
    let b = ctx.constant(Tensor::from_scalars(
        DType::F32,
        vec![t as i64],
        &intercepts
            .iter()
            .map(|&v| Scalar::F(v as f64))
            .collect::<Vec<_>>(),
    ));
    ctx.map(
        DType::F32,
        dims,
        vec![p, b],
        expr::binary(
            BinOp::Add,
            expr::load(DType::F32, 0, vec![expr::var(0), expr::var(1)]),
            expr::load(DType::F32, 1, vec![expr::var(1)]),
        ),
    )
}

pub fn linear_regressor(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let targets = ctx.attr_i_or("targets", 1)?;
    if targets < 1 {
        return Err(ctx.err(format!(
            "attribute 'targets' is {targets}; it must be positive"
        )));
    }
    let coefficients = ctx.attr_floats("coefficients").unwrap_or_default();
    let intercepts = ctx.attr_floats("intercepts").unwrap_or_default();
    let post = post_transform(ctx)?;
    let y = scores(ctx, &coefficients, &intercepts, targets as usize)?;
    let y = if targets == 1 && post != Post::Probit {
        y
    } else {
        transform_rows(ctx, y, post)?
    };
    Ok(vec![y])
}

pub fn linear_classifier(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let labels =
        super::labels(ctx, "classlabels_ints", "classlabels_strings")?.ok_or_else(|| {
            ctx.err("one of 'classlabels_ints' and 'classlabels_strings' is required")
        })?;
    let coefficients = ctx.attr_floats("coefficients").unwrap_or_default();
    let intercepts = ctx.attr_floats("intercepts").unwrap_or_default();
    let post = post_transform(ctx)?;
    // onnxruntime counts the classes by the intercepts.
    let t = intercepts.len();
    if t == 0 {
        return Err(ctx.unsupported(
            "no intercepts: onnxruntime counts a LinearClassifier's classes by them",
        ));
    }
    let s = scores(ctx, &coefficients, &intercepts, t)?;
    let n = ctx.known_shape(s)?[0];
    let row = vec![Dim::Known(n)];
    let label = if t == 1 {
        // Positive above 0: the second label with two labels, else 1 (or "1").
        let positive = expr::binary(
            BinOp::Gt,
            expr::load(DType::F32, 0, vec![expr::var(0), expr::i(0)]),
            expr::f(DType::F32, 0.0),
        );
        let two = labels.len() == 2;
        match &labels {
            Labels::Ints(v) => {
                let (a, b) = if two { (v[1], v[0]) } else { (1, 0) };
                ctx.map(
                    DType::I64,
                    row,
                    vec![s],
                    expr::select(positive, expr::i(a), expr::i(b)),
                )?
            }
            Labels::Strings(v) => {
                let table = if two {
                    vec![v[0].clone(), v[1].clone()]
                } else {
                    vec!["0".to_string(), "1".to_string()]
                };
                let p = ctx.map(
                    DType::I64,
                    row,
                    vec![s],
                    expr::select(positive, expr::i(1), expr::i(0)),
                )?;
                label_values(ctx, p, &Labels::Strings(table))?
            }
        }
    } else {
        if labels.len() < t {
            return Err(ctx.err(format!(
                "{t} classes (intercepts) but {} class labels",
                labels.len()
            )));
        }
        let pos = crate::frontend::build::reduce(
            ctx,
            s,
            ReduceKind::ArgMax { select_last: false },
            &[1],
            false,
            |x| x,
        )?;
        label_values(ctx, pos, &labels)?
    };
    let z = if t == 1 && labels.len() == 2 {
        if post == Post::Probit {
            return Err(ctx.unsupported(
                "PROBIT over one score with two class labels: onnxruntime leaves half of the \
                 probabilities unwritten",
            ));
        }
        // [1 − s, s], untransformed.
        let v = expr::load(DType::F32, 0, vec![expr::var(0), expr::i(0)]);
        ctx.map(
            DType::F32,
            vec![Dim::Known(n), Dim::Known(2)],
            vec![s],
            expr::select(
                expr::binary(BinOp::Eq, expr::var(1), expr::i(1)),
                v.clone(),
                expr::binary(BinOp::Sub, expr::f(DType::F32, 1.0), v),
            ),
        )?
    } else if t == 1 && post != Post::Probit {
        s
    } else {
        transform_rows(ctx, s, post)?
    };
    Ok(vec![label, z])
}
