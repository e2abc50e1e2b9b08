//! The ONNX-ML domain (`ai.onnx.ml`): the classical models scikit-learn, LightGBM and
//! XGBoost export (skl2onnx, onnxmltools). Semantics follow onnxruntime's CPU kernels where
//! the operator documentation leaves room (post transforms, binary classifiers, base values),
//! since that is what the converters' models are checked against; onnx's reference evaluator
//! agrees on everything else.
//!
//! Shared here: attribute readers (a list given as floats or, from ai.onnx.ml opset 3, as a
//! double tensor `NAME_as_tensor`), the post transforms of classifiers and regressors, and
//! class labels.

pub mod classify;
pub mod encode;
pub mod linear;
pub mod maps;
pub mod preprocess;
pub mod svm;
pub mod tree;
pub mod zipmap;

use crate::error::Result;
use crate::frontend::build;
use crate::frontend::ctx::Ctx;
use crate::ir::dim::Dim;
use crate::ir::expr::{self, BinOp, E, UnOp};
use crate::ir::graph::ReduceKind;
use crate::ir::{DType, Tensor, ValueId};

/// A float list attribute `name`, or its double tensor `name_as_tensor`: the values and
/// whether they are doubles.
pub fn float_list(ctx: &Ctx, name: &str) -> Result<Option<(Vec<f64>, bool)>> {
    let tensor_name = format!("{name}_as_tensor");
    if let Some(t) = ctx.attr_t(&tensor_name)? {
        if !t.dtype.is_float() {
            return Err(ctx.err(format!(
                "attribute '{tensor_name}' must be a floating-point tensor, it is {}",
                t.dtype
            )));
        }
        if ctx.attr(name).is_some() {
            return Err(ctx.err(format!(
                "attributes '{name}' and '{tensor_name}' are both set; a model gives one of them"
            )));
        }
        return Ok(Some((t.to_f64s(), t.dtype == DType::F64)));
    }
    Ok(ctx
        .attr_floats(name)
        .map(|v| (v.iter().map(|&x| x as f64).collect(), false)))
}

/// An int list attribute (empty when absent).
pub fn ints(ctx: &Ctx, name: &str) -> Vec<i64> {
    ctx.attr_ints(name).unwrap_or_default()
}

/// Checks that the lists named in `lists` all have `n` entries.
pub fn same_length(ctx: &Ctx, n: usize, lists: &[(&str, usize)]) -> Result<()> {
    for (name, len) in lists {
        if *len != n {
            return Err(ctx.err(format!(
                "attribute '{name}' has {len} entries where {n} are expected (one per entry of \
                 the lists it goes with)"
            )));
        }
    }
    Ok(())
}

/// The class labels of a classifier: integers or strings.
#[derive(Clone, Debug, PartialEq)]
pub enum Labels {
    Ints(Vec<i64>),
    Strings(Vec<String>),
}

impl Labels {
    pub fn len(&self) -> usize {
        match self {
            Labels::Ints(v) => v.len(),
            Labels::Strings(v) => v.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// `classlabels_int64s`/`classlabels_strings` (or another pair of names); exactly one must
/// be given unless `optional`.
pub fn labels(ctx: &Ctx, ints_name: &str, strings_name: &str) -> Result<Option<Labels>> {
    let i = ctx.attr_ints(ints_name).filter(|v| !v.is_empty());
    let s = ctx.attr_strings(strings_name).filter(|v| !v.is_empty());
    match (i, s) {
        (Some(_), Some(_)) => Err(ctx.err(format!(
            "both '{ints_name}' and '{strings_name}' are set; a model gives one of them"
        ))),
        (Some(i), None) => Ok(Some(Labels::Ints(i))),
        (None, Some(s)) => Ok(Some(Labels::Strings(s))),
        (None, None) => Ok(None),
    }
}

/// The post transform of scores (onnxruntime's `POST_EVAL_TRANSFORM`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Post {
    None,
    Logistic,
    Softmax,
    SoftmaxZero,
    Probit,
}

/// `post_transform` as a string attribute (the ops of ai.onnx.ml opsets 1-4).
pub fn post_transform(ctx: &Ctx) -> Result<Post> {
    Ok(match ctx.attr_s_or("post_transform", "NONE")?.as_str() {
        "NONE" => Post::None,
        "LOGISTIC" => Post::Logistic,
        "SOFTMAX" => Post::Softmax,
        "SOFTMAX_ZERO" => Post::SoftmaxZero,
        "PROBIT" => Post::Probit,
        other => {
            return Err(ctx.err(format!(
                "attribute 'post_transform' is '{other}'; expected NONE, LOGISTIC, SOFTMAX, \
                 SOFTMAX_ZERO or PROBIT"
            )));
        }
    })
}

/// onnxruntime's logistic: `1/(1+e^-|v|)`, mirrored for negative v (float32).
pub fn logistic(v: E) -> E {
    let one = expr::f(DType::F32, 1.0);
    let a = expr::binary(
        BinOp::Div,
        one.clone(),
        expr::binary(
            BinOp::Add,
            one.clone(),
            expr::unary(
                UnOp::Exp,
                expr::unary(UnOp::Neg, expr::unary(UnOp::Abs, v.clone())),
            ),
        ),
    );
    expr::select(
        expr::binary(BinOp::Lt, v, expr::f(DType::F32, 0.0)),
        expr::binary(BinOp::Sub, one, a.clone()),
        a,
    )
}

/// onnxruntime's probit: `√2 · erfinv(2v − 1)` with its approximation of erfinv (Winitzki's,
/// a = 0.147), in float32 with its constants.
pub fn probit(v: E) -> E {
    let c = |x: f64| expr::f(DType::F32, x);
    let x = expr::binary(BinOp::Sub, expr::binary(BinOp::Mul, c(2.0), v), c(1.0));
    let sgn = expr::select(expr::binary(BinOp::Lt, x.clone(), c(0.0)), c(-1.0), c(1.0));
    let t = expr::binary(
        BinOp::Mul,
        expr::binary(BinOp::Sub, c(1.0), x.clone()),
        expr::binary(BinOp::Add, c(1.0), x),
    );
    let log = expr::unary(UnOp::Log, t);
    let a = std::f32::consts::PI * 0.147f32;
    let v1 = expr::binary(
        BinOp::Add,
        c((2.0f32 / a) as f64),
        expr::binary(BinOp::Mul, c(0.5), log.clone()),
    );
    let v2 = expr::binary(BinOp::Mul, c((1.0f32 / 0.147f32) as f64), log);
    let v3 = expr::binary(
        BinOp::Add,
        expr::unary(UnOp::Neg, v1.clone()),
        expr::unary(
            UnOp::Sqrt,
            expr::binary(BinOp::Sub, expr::binary(BinOp::Mul, v1.clone(), v1), v2),
        ),
    );
    expr::binary(
        BinOp::Mul,
        c(std::f32::consts::SQRT_2 as f64),
        expr::binary(BinOp::Mul, sgn, expr::unary(UnOp::Sqrt, v3)),
    )
}

/// An elementwise map of a `[n, c]` float32 value.
fn rows_map(ctx: &mut Ctx, v: ValueId, f: impl FnOnce(E) -> E) -> Result<ValueId> {
    build::unary(ctx, v, DType::F32, f)
}

/// onnxruntime's `write_scores` for rows of two or more scores: the transform applied to
/// every score of each row of the `[n, c]` float32 value (softmaxes along the row).
pub fn transform_rows(ctx: &mut Ctx, v: ValueId, post: Post) -> Result<ValueId> {
    let shape = ctx.known_shape(v)?;
    let (n, c) = (shape[0], shape[1]);
    let dims = vec![Dim::Known(n), Dim::Known(c)];
    let at = |input: u32, k: E| expr::load(DType::F32, input, vec![expr::var(0), k]);
    match post {
        Post::None => Ok(v),
        Post::Logistic => rows_map(ctx, v, logistic),
        Post::Probit => rows_map(ctx, v, probit),
        Post::Softmax => {
            // Max and sum in float32 along the row, as onnxruntime's ComputeSoftmax.
            let m = build::reduce(ctx, v, ReduceKind::Max, &[1], true, |x| x)?;
            let e = ctx.map(
                DType::F32,
                dims.clone(),
                vec![v, m],
                expr::unary(
                    UnOp::Exp,
                    expr::binary(BinOp::Sub, at(0, expr::var(1)), at(1, expr::i(0))),
                ),
            )?;
            let s = build::reduce(ctx, e, ReduceKind::Sum, &[1], true, |x| x)?;
            ctx.map(
                DType::F32,
                dims,
                vec![e, s],
                expr::binary(BinOp::Div, at(0, expr::var(1)), at(1, expr::i(0))),
            )
        }
        Post::SoftmaxZero => {
            // onnxruntime's ComputeSoftmaxZero: scores within 1e-7 of zero are scaled by
            // e^-max and left out of the sum; the others are e^(v - max).
            let m = build::reduce(ctx, v, ReduceKind::Max, &[1], true, |x| x)?;
            let x = at(0, expr::var(1));
            let mx = at(1, expr::i(0));
            let nonzero = expr::binary(
                BinOp::Or,
                expr::binary(BinOp::Gt, x.clone(), expr::f(DType::F32, 1e-7f32 as f64)),
                expr::binary(BinOp::Lt, x.clone(), expr::f(DType::F32, -1e-7f32 as f64)),
            );
            let val = expr::select(
                nonzero.clone(),
                expr::unary(UnOp::Exp, expr::binary(BinOp::Sub, x.clone(), mx.clone())),
                expr::binary(
                    BinOp::Mul,
                    x,
                    expr::unary(UnOp::Exp, expr::unary(UnOp::Neg, mx)),
                ),
            );
            let counted = expr::select(nonzero, val.clone(), expr::f(DType::F32, 0.0));
            let e = ctx.map(DType::F32, dims.clone(), vec![v, m], val)?;
            let part = ctx.map(DType::F32, dims.clone(), vec![v, m], counted)?;
            let s = build::reduce(ctx, part, ReduceKind::Sum, &[1], true, |x| x)?;
            ctx.map(
                DType::F32,
                dims,
                vec![e, s],
                expr::binary(BinOp::Div, at(0, expr::var(1)), at(1, expr::i(0))),
            )
        }
    }
}

/// A `[n]` int64 value of class positions turned into the labels `labels[k]` (int64, or
/// string elements). Positions are in range by construction (clamped for the load).
pub fn label_values(ctx: &mut Ctx, pos: ValueId, labels: &Labels) -> Result<ValueId> {
    let n = ctx.known_shape(pos)?[0];
    let c = labels.len() as i64;
    let idx = expr::clamp(expr::load(DType::I64, 0, vec![expr::var(0)]), 0, c - 1);
    match labels {
        Labels::Ints(v) => {
            let table = ctx.constant(Tensor::from_i64s(vec![c], v));
            ctx.map(
                DType::I64,
                vec![Dim::Known(n)],
                vec![pos, table],
                expr::load(DType::I64, 1, vec![idx]),
            )
        }
        Labels::Strings(v) => encode::strings_at(ctx, pos, v),
    }
}

/// The 2-D `[n, f]` view of a classifier's or regressor's input `X` (`[f]` is one row), cast
/// to float32 unless it is float64 (or `keep_f64` is false).
pub fn input_rows(ctx: &mut Ctx, keep_f64: bool) -> Result<ValueId> {
    let x = ctx.input(0)?;
    let shape = ctx.known_shape(x)?;
    let x = match shape.len() {
        1 => ctx.reshape(x, vec![Dim::Known(1), Dim::Known(shape[0])])?,
        2 => x,
        r => {
            return Err(ctx.err(format!(
                "input X has rank {r} ({shape:?}); this operator takes [N, F] or [F]"
            )));
        }
    };
    let dt = ctx.dtype(x);
    if !(dt.is_numeric() && dt != DType::Bool) {
        return Err(ctx.err(format!("input X is {dt}; this operator takes numbers")));
    }
    let to = if dt == DType::F64 && keep_f64 {
        DType::F64
    } else {
        DType::F32
    };
    build::cast(ctx, x, to)
}
