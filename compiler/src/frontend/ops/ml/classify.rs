//! A tree ensemble classifier's scores and labels from its per-class sums, as onnxruntime's
//! `TreeAggregatorClassifier` finalizes them: base values, the binary special cases (one
//! class carrying every weight: the label decided on that score against 0.5 or 0, the
//! other class's score derived from it) and the post transform. Which classes a row has a
//! score for is decided at compile time from the leaves (`TreeScores::scored`); a class
//! only some rows score is reported where onnxruntime's result would depend on it.

use super::{Labels, Post, label_values, logistic, transform_rows};
use crate::error::Result;
use crate::frontend::ctx::Ctx;
use crate::ir::dim::Dim;
use crate::ir::expr::{self, BinOp, E, UnOp};
use crate::ir::graph::ReduceKind;
use crate::ir::{DType, Tensor, ValueId};

/// What a tree classifier's finalization needs besides the sums.
pub struct TreeScores {
    pub base: Vec<f64>,
    /// Per class: every row has a score for it (Some(true)), none (Some(false)), or it
    /// depends on the row (None).
    pub scored: Vec<Option<bool>>,
    /// Two labels, and every weight names the same class.
    pub binary_case: bool,
    pub all_positive: bool,
    pub post: Post,
}

fn depends(ctx: &Ctx, class: usize) -> crate::error::Error {
    ctx.unsupported(format!(
        "class {class} gets a score from some leaves and not from others, and onnxruntime's \
         result then depends on which leaves a row reaches; onnxc decides it at compile time"
    ))
}

/// `(labels [n], scores [n, c] float32)` from the sums `raw` `[n, c]`.
pub fn finish_tree_classifier(
    ctx: &mut Ctx,
    raw: ValueId,
    labels: &Labels,
    s: &TreeScores,
) -> Result<Vec<ValueId>> {
    let shape = ctx.known_shape(raw)?;
    let (n, c) = (shape[0], shape[1] as usize);
    let dt = ctx.dtype(raw);
    let col = |k: i64| expr::load(dt, 0, vec![expr::var(0), expr::i(k)]);
    let cf = |v: f64| expr::f(dt, v);
    let row = vec![Dim::Known(n)];
    if c > 2 {
        let mut scored = s.scored.clone();
        for k in 0..s.base.len().min(c) {
            scored[k] = Some(true);
        }
        if let Some(k) = scored.iter().position(|x| x.is_none()) {
            return Err(depends(ctx, k));
        }
        if !scored.contains(&Some(true)) {
            return Err(ctx.unsupported(
                "no class gets a score from any leaf or base value; onnxruntime's label is \
                 then undefined",
            ));
        }
        let mut base = s.base.clone();
        base.resize(c, 0.0);
        let bt = ctx.constant(Tensor::from_scalars(
            dt,
            vec![c as i64],
            &base
                .iter()
                .map(|&v| crate::ir::Scalar::F(v))
                .collect::<Vec<_>>(),
        ));
        let dims = vec![Dim::Known(n), Dim::Known(c as i64)];
        let sums = ctx.map(
            dt,
            dims.clone(),
            vec![raw, bt],
            expr::binary(
                BinOp::Add,
                expr::load(dt, 0, vec![expr::var(0), expr::var(1)]),
                expr::load(dt, 1, vec![expr::var(1)]),
            ),
        )?;
        // The first class with the largest score among those scored.
        let mask = ctx.constant(Tensor::from_scalars(
            DType::Bool,
            vec![c as i64],
            &scored
                .iter()
                .map(|x| crate::ir::Scalar::B(*x == Some(true)))
                .collect::<Vec<_>>(),
        ));
        let masked = ctx.map(
            dt,
            dims,
            vec![sums, mask],
            expr::select(
                expr::load(DType::Bool, 1, vec![expr::var(1)]),
                expr::load(dt, 0, vec![expr::var(0), expr::var(1)]),
                cf(f64::NEG_INFINITY),
            ),
        )?;
        let pos = crate::frontend::build::reduce(
            ctx,
            masked,
            ReduceKind::ArgMax { select_last: false },
            &[1],
            false,
            |x| x,
        )?;
        let label = label_values(ctx, pos, labels)?;
        let z = crate::frontend::build::cast(ctx, sums, DType::F32)?;
        let z = transform_rows(ctx, z, s.post)?;
        return Ok(vec![label, z]);
    }
    if c != 2 {
        return Err(ctx.unsupported(format!(
            "a classifier with {c} class label(s); onnxc builds two or more"
        )));
    }
    let known = |k: usize| s.scored[k].ok_or_else(|| depends(ctx, k));
    let (hs0, hs1) = (s.scored[0], s.scored[1]);
    // The two sums after the base values, and whether one score (class 0's) remains.
    let (s0, s1, single): (E, E, bool) = match s.base.len() {
        2 => {
            if known(1)? {
                let v1 = expr::binary(BinOp::Add, cf(s.base[1]), col(0));
                (expr::unary(UnOp::Neg, v1.clone()), v1, false)
            } else {
                (
                    expr::binary(BinOp::Add, col(0), cf(s.base[0])),
                    expr::binary(BinOp::Add, col(1), cf(s.base[1])),
                    false,
                )
            }
        }
        1 => (
            expr::binary(BinOp::Add, col(0), cf(s.base[0])),
            col(1),
            !known(1)?,
        ),
        0 => (col(0), col(1), !known(1)?),
        _ => (col(0), col(1), false),
    };
    // The label: from class 1's score when it has one, else class 0's.
    let pos = if !single && hs1 == Some(true) {
        s1.clone()
    } else {
        match hs0 {
            Some(true) => s0.clone(),
            Some(false) => cf(0.0),
            None => return Err(depends(ctx, 0)),
        }
    };
    let cut = if s.binary_case && s.all_positive {
        0.5
    } else {
        0.0
    };
    let positive = expr::binary(BinOp::Gt, pos, cf(cut));
    // The binary case picks one of the two labels; otherwise onnxruntime answers 1 or 0
    // (for string labels: the string at that position).
    let (yes, no) = match labels {
        Labels::Ints(v) if s.binary_case => (v[1], v[0]),
        _ => (1, 0),
    };
    let label = ctx.map(
        DType::I64,
        row,
        vec![raw],
        expr::select(positive, expr::i(yes), expr::i(no)),
    )?;
    let label = match labels {
        Labels::Ints(_) => label,
        Labels::Strings(_) => label_values(ctx, label, labels)?,
    };
    let dims = vec![Dim::Known(n), Dim::Known(2)];
    let second = expr::binary(BinOp::Eq, expr::var(1), expr::i(1));
    let f32 = |e: E| expr::cast(e, DType::F32);
    let z = if !single {
        let pair = ctx.map(
            DType::F32,
            dims,
            vec![raw],
            expr::select(second, f32(s1), f32(s0)),
        )?;
        transform_rows(ctx, pair, s.post)?
    } else if s.post == Post::Probit {
        return Err(ctx.unsupported(
            "PROBIT over a binary classifier's single score: onnxruntime writes only the \
             first column of the probabilities",
        ));
    } else if s.binary_case && s.all_positive {
        // [1 - s, s], untransformed.
        ctx.map(
            DType::F32,
            dims,
            vec![raw],
            expr::select(
                second,
                f32(s0.clone()),
                f32(expr::binary(BinOp::Sub, cf(1.0), s0)),
            ),
        )?
    } else if s.binary_case || s.base.is_empty() {
        if s.post == Post::Logistic {
            let v = f32(s0);
            ctx.map(
                DType::F32,
                dims,
                vec![raw],
                expr::select(
                    second,
                    logistic(v.clone()),
                    logistic(expr::unary(UnOp::Neg, v)),
                ),
            )?
        } else {
            ctx.map(
                DType::F32,
                dims,
                vec![raw],
                expr::select(second, f32(s0.clone()), f32(expr::unary(UnOp::Neg, s0))),
            )?
        }
    } else {
        return Err(ctx.unsupported(
            "two class labels, one base value, and weights for both classes: onnxruntime \
             writes only the first column of the probabilities",
        ));
    };
    Ok(vec![label, z])
}
