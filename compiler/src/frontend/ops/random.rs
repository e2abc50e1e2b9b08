//! Random values: RandomUniform, RandomUniformLike, RandomNormal, RandomNormalLike,
//! Bernoulli, Multinomial, and Dropout in training mode.
//!
//! The generator is counter-based, so a compiled model needs no state: element `i` (row-major)
//! of a node's output draws `splitmix64(s + (i + 1)·γ)`, SplitMix64's finalizer of the
//! seed's stream (γ = 0x9E3779B97F4A7C15, the golden-ratio increment), where `s` is the
//! bit pattern of the node's `seed` attribute as a float64, or a fixed default without one.
//! A uniform value is the draw's top 53 bits over 2^53, in [0, 1); a normal one is
//! Box–Muller over draws `2i` and `2i + 1`. So the same model, seed and shape give the same
//! values on every run and every machine; a node without a seed is deterministic too (ONNX
//! leaves the choice of seed to the runtime), and one whose inputs are all constant folds
//! into a constant when compiled.

use crate::error::Result;
use crate::frontend::build::{self, FLOATS};
use crate::frontend::ctx::Ctx;
use crate::ir::dim::{Dim, Shape, shape_from};
use crate::ir::expr::{self, BinOp, E, UnOp};
use crate::ir::{DType, Scalar, ValueId};

/// The stream of a node without a `seed` ("onnxc" in ASCII).
const DEFAULT_SEED: u64 = 0x6f_6e6e_7863;
const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

fn u64c(v: u64) -> E {
    expr::konst(DType::U64, Scalar::U(v))
}

fn xor_shift(z: E, by: u64) -> E {
    expr::binary(
        BinOp::BitXor,
        z.clone(),
        expr::binary(BinOp::Shr, z, u64c(by)),
    )
}

/// SplitMix64 of draw `k` (a U64 expression) of the stream `seed`.
fn draw(seed: u64, k: E) -> E {
    let z = expr::binary(
        BinOp::Add,
        u64c(seed),
        expr::binary(
            BinOp::Mul,
            expr::binary(BinOp::Add, k, u64c(1)),
            u64c(GAMMA),
        ),
    );
    let z = expr::binary(BinOp::Mul, xor_shift(z, 30), u64c(0xbf58_476d_1ce4_e5b9));
    let z = expr::binary(BinOp::Mul, xor_shift(z, 27), u64c(0x94d0_49bb_1331_11eb));
    xor_shift(z, 31)
}

/// A float64 in [0, 1) from draw `k`.
fn uniform01(seed: u64, k: E) -> E {
    let top = expr::binary(BinOp::Shr, draw(seed, k), u64c(11));
    expr::binary(
        BinOp::Mul,
        expr::cast(top, DType::F64),
        expr::f(DType::F64, 1.0 / (1u64 << 53) as f64),
    )
}

/// The row-major position of the current element of `shape` (vars 0..rank), as U64.
fn position(shape: &[i64]) -> E {
    let mut at = expr::i(0);
    for (d, &n) in shape.iter().enumerate() {
        at = expr::add(expr::mul(at, expr::i(n)), expr::var(d as u32));
    }
    expr::cast(at, DType::U64)
}

/// The node's stream: its `seed`'s bits as a float64 (a float in the Random ops and
/// Bernoulli, an int in Dropout), or the default.
fn seed(ctx: &Ctx) -> Result<u64> {
    let s = match ctx.attr("seed") {
        None => None,
        Some(a) if a.f.is_none() && a.i.is_some() => ctx.attr_i("seed")?.map(|v| v as f64),
        Some(_) => ctx.attr_f("seed")?,
    };
    Ok(s.map_or(DEFAULT_SEED, f64::to_bits))
}

/// The float64 uniform draw of each element of `shape`.
fn uniform_at(ctx: &Ctx, shape: &[i64]) -> Result<E> {
    Ok(uniform01(seed(ctx)?, position(shape)))
}

/// The float64 standard normal draw of each element of `shape` (Box–Muller).
fn normal_at(ctx: &Ctx, shape: &[i64]) -> Result<E> {
    let s = seed(ctx)?;
    let k = expr::binary(BinOp::Mul, position(shape), u64c(2));
    // 1 − u is in (0, 1]: its logarithm is finite.
    let u1 = expr::binary(
        BinOp::Sub,
        expr::f(DType::F64, 1.0),
        uniform01(s, k.clone()),
    );
    let u2 = uniform01(s, expr::binary(BinOp::Add, k, u64c(1)));
    let radius = expr::unary(
        UnOp::Sqrt,
        expr::binary(
            BinOp::Mul,
            expr::f(DType::F64, -2.0),
            expr::unary(UnOp::Log, u1),
        ),
    );
    let angle = expr::binary(
        BinOp::Mul,
        expr::f(DType::F64, 2.0 * std::f64::consts::PI),
        u2,
    );
    Ok(expr::binary(
        BinOp::Mul,
        radius,
        expr::unary(UnOp::Cos, angle),
    ))
}

/// The output type: attribute `dtype` (a float type), else `default`.
fn out_type(ctx: &Ctx, default: DType) -> Result<DType> {
    match ctx.attr_i("dtype")? {
        None => Ok(default),
        Some(code) => match i32::try_from(code).ok().and_then(DType::from_onnx) {
            Some(t) if FLOATS.contains(&t) => Ok(t),
            _ => Err(ctx.err(format!("dtype {code} is not a float type"))),
        },
    }
}

/// The output shape: attribute `shape`, or the input's for the `*Like` forms.
fn target(ctx: &Ctx, like: bool) -> Result<(Vec<i64>, DType)> {
    if like {
        let x = ctx.input(0)?;
        let default = if ctx.dtype(x).is_float() {
            ctx.dtype(x)
        } else {
            DType::F32
        };
        Ok((ctx.known_shape(x)?, out_type(ctx, default)?))
    } else {
        let shape = ctx
            .attr_ints("shape")
            .ok_or_else(|| ctx.err("attribute shape is required"))?;
        build::extents(ctx, "attribute shape", &shape)?;
        Ok((shape, out_type(ctx, DType::F32)?))
    }
}

fn random_uniform_of(ctx: &mut Ctx, like: bool) -> Result<Vec<ValueId>> {
    let (shape, dt) = target(ctx, like)?;
    let (low, high) = (ctx.attr_f_or("low", 0.0)?, ctx.attr_f_or("high", 1.0)?);
    let u = uniform_at(ctx, &shape)?;
    scaled(ctx, &shape, dt, low, high - low, u)
}

fn random_normal_of(ctx: &mut Ctx, like: bool) -> Result<Vec<ValueId>> {
    let (shape, dt) = target(ctx, like)?;
    let (mean, scale) = (ctx.attr_f_or("mean", 0.0)?, ctx.attr_f_or("scale", 1.0)?);
    let z = normal_at(ctx, &shape)?;
    scaled(ctx, &shape, dt, mean, scale, z)
}

/// The tensor `offset + scale · draw` (computed in float64) of type `dt`.
fn scaled(
    ctx: &mut Ctx,
    shape: &[i64],
    dt: DType,
    offset: f64,
    scale: f64,
    draw: E,
) -> Result<Vec<ValueId>> {
    let body = expr::binary(
        BinOp::Add,
        expr::f(DType::F64, offset),
        expr::binary(BinOp::Mul, expr::f(DType::F64, scale), draw),
    );
    Ok(vec![ctx.map(
        dt,
        shape_from(shape),
        vec![],
        expr::cast(body, dt),
    )?])
}

pub fn random_uniform(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    random_uniform_of(ctx, false)
}
pub fn random_uniform_like(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    random_uniform_of(ctx, true)
}
pub fn random_normal(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    random_normal_of(ctx, false)
}
pub fn random_normal_like(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    random_normal_of(ctx, true)
}

/// Bernoulli: 1 where a uniform draw is below the input's probability, else 0.
pub fn bernoulli(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let p = ctx.input(0)?;
    let pt = build::expect_types(ctx, p, "input", FLOATS)?;
    let shape = ctx.known_shape(p)?;
    let dt = match ctx.attr_i("dtype")? {
        None => pt,
        Some(code) => i32::try_from(code)
            .ok()
            .and_then(DType::from_onnx)
            .filter(|t| *t != DType::Str)
            .ok_or_else(|| ctx.err(format!("dtype {code} is not a numeric type")))?,
    };
    let u = uniform_at(ctx, &shape)?;
    let hit = expr::lt(
        u,
        expr::cast(build::load_same(pt, 0, shape.len()), DType::F64),
    );
    let body = expr::select(
        hit,
        expr::konst(dt, Scalar::F(1.0).cast(dt)),
        expr::konst(dt, Scalar::zero(dt)),
    );
    Ok(vec![ctx.map(dt, shape_from(&shape), vec![p], body)?])
}

/// Multinomial: `sample_size` class indices per row of the input's unnormalized
/// log-probabilities `[batch, classes]`. As onnxruntime samples them, by inverse CDF: sample
/// `s` of row `b` is the first class whose cumulative `exp(x − max x)` exceeds a uniform
/// draw (element `b·sample_size + s` of the node's stream) times the row's total, all in
/// float64. int32 indices, or int64 with `dtype` 7.
pub fn multinomial(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    use crate::ir::graph::ReduceKind;
    let x = ctx.input(0)?;
    let xt = build::expect_types(ctx, x, "input", FLOATS)?;
    let shape = ctx.known_shape(x)?;
    let [rows, classes] = shape[..] else {
        return Err(ctx.err(format!(
            "input has shape {shape:?}; it must be [batch_size, class_size]"
        )));
    };
    if classes < 1 {
        return Err(ctx.err("the input has no classes to sample"));
    }
    let samples = ctx.attr_i_or("sample_size", 1)?;
    if samples < 1 {
        return Err(ctx.err(format!("sample_size is {samples}; it must be at least 1")));
    }
    build::extents(ctx, "the output", &[rows, samples])?;
    let dt = match ctx.attr_i_or("dtype", 6)? {
        6 => DType::I32,
        7 => DType::I64,
        code => {
            return Err(ctx.err(format!(
                "dtype is {code}; it must be 6 (int32) or 7 (int64)"
            )));
        }
    };
    let f64 = DType::F64;
    let (b, k, j) = (expr::var(0), expr::var(1), expr::var(2));
    let logit = |row: E, class: E| expr::cast(expr::load(xt, 0, vec![row, class]), f64);
    // Each row's largest logit, then exp(x − max) and its running sums along the row.
    let max = ctx.reduce(
        ReduceKind::Max,
        vec![classes],
        f64,
        shape_from(&[rows]),
        vec![x],
        logit(b.clone(), k.clone()),
    )?;
    let weight = expr::unary(
        UnOp::Exp,
        expr::binary(
            BinOp::Sub,
            logit(b.clone(), k.clone()),
            expr::load(f64, 1, vec![b.clone()]),
        ),
    );
    let weights = ctx.map(f64, shape_from(&[rows, classes]), vec![x, max], weight)?;
    let cdf = ctx.reduce(
        ReduceKind::Sum,
        vec![classes],
        f64,
        shape_from(&[rows, classes]),
        vec![weights],
        expr::select(
            expr::binary(BinOp::Le, j.clone(), k.clone()),
            expr::load(f64, 0, vec![b.clone(), j.clone()]),
            expr::f(f64, 0.0),
        ),
    )?;
    // The draw scaled to the row's total.
    let target = expr::binary(
        BinOp::Mul,
        uniform01(seed(ctx)?, position(&[rows, samples])),
        expr::load(f64, 0, vec![b.clone(), expr::i(classes - 1)]),
    );
    let targets = ctx.map(f64, shape_from(&[rows, samples]), vec![cdf], target)?;
    // The first class whose running sum exceeds the target: the count of those that do not
    // (the sums never decrease), the last class where rounding leaves none.
    let below = expr::select(
        expr::binary(
            BinOp::Le,
            expr::load(f64, 0, vec![b.clone(), j]),
            expr::load(f64, 1, vec![b.clone(), k.clone()]),
        ),
        expr::i(1),
        expr::i(0),
    );
    let count = ctx.reduce(
        ReduceKind::Sum,
        vec![classes],
        DType::I64,
        shape_from(&[rows, samples]),
        vec![cdf, targets],
        below,
    )?;
    let index = expr::binary(
        BinOp::Min,
        expr::load(DType::I64, 0, vec![b, k]),
        expr::i(classes - 1),
    );
    Ok(vec![ctx.map(
        dt,
        shape_from(&[rows, samples]),
        vec![count],
        expr::cast(index, dt),
    )?])
}

/// Dropout in training mode with a ratio (a one-element float value) and a run-time or
/// constant `training` flag (a one-element bool value, None: training): the mask keeps an
/// element where its uniform draw is at least the ratio, and kept elements are scaled by
/// 1 / (1 − ratio); outside training the output is the input and the mask all true.
pub fn dropout_training(
    ctx: &mut Ctx,
    x: ValueId,
    ratio: ValueId,
    training: Option<ValueId>,
) -> Result<(ValueId, ValueId)> {
    let dt = build::expect_types(ctx, x, "data", FLOATS)?;
    let shape = ctx.known_shape(x)?;
    let rank = shape.len();
    let r = one(ctx, ratio, "ratio")?;
    let mut inputs = vec![x, r];
    let ratio_e = expr::cast(expr::load(ctx.dtype(r), 1, vec![expr::i(0)]), DType::F64);
    let mut keep = expr::binary(BinOp::Ge, uniform_at(ctx, &shape)?, ratio_e.clone());
    let mut scale = expr::binary(
        BinOp::Div,
        expr::f(DType::F64, 1.0),
        expr::binary(BinOp::Sub, expr::f(DType::F64, 1.0), ratio_e),
    );
    if let Some(t) = training {
        let t = one(ctx, t, "training_mode")?;
        inputs.push(t);
        let on = expr::load(DType::Bool, 2, vec![expr::i(0)]);
        keep = expr::binary(BinOp::Or, expr::unary(UnOp::Not, on.clone()), keep);
        scale = expr::select(on, scale, expr::f(DType::F64, 1.0));
    }
    let sh: Shape = shape.iter().map(|&d| Dim::Known(d)).collect();
    let mask = ctx.map(DType::Bool, sh.clone(), inputs.clone(), keep.clone())?;
    let y = expr::select(
        keep,
        expr::cast(
            expr::binary(
                BinOp::Mul,
                expr::cast(build::load_same(dt, 0, rank), DType::F64),
                scale,
            ),
            dt,
        ),
        expr::f(dt, 0.0),
    );
    Ok((ctx.map(dt, sh, inputs, y)?, mask))
}

/// `v`, which must hold one element, as a `[1]` value.
fn one(ctx: &mut Ctx, v: ValueId, what: &str) -> Result<ValueId> {
    let n: i64 = ctx.known_shape(v)?.iter().product();
    if n != 1 {
        return Err(ctx.err(format!("{what} must hold one value, it holds {n}")));
    }
    ctx.reshape(v, shape_from(&[1]))
}
