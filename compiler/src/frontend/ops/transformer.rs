//! onnxruntime's transformer-fusion contrib ops (domain `com.microsoft`, and the
//! SimplifiedLayerNormalization it registers in the default domain) that its transformer
//! optimizer and exporters write, decomposed into core ops with the formulas of its operator
//! documentation and CPU kernels:
//! - SkipLayerNormalization / SkipSimplifiedLayerNormalization: `LayerNorm(input + skip
//!   (+ bias))` (RMS norm for the simplified one), also returning the sum; epsilon 1e-12.
//! - Gelu (exact, erf), BiasGelu `gelu(A + B)`, FastGelu (tanh approximation, optional bias),
//!   QuickGelu `x · σ(αx)`, BiasAdd `X + bias + skip`, BiasSplitGelu (bias, then the left half
//!   times the GELU of the right half), FusedMatMul (MatMul with transposes and a scale).
//! - EmbedLayerNormalization: word, position and segment embedding rows gathered (token ids
//!   checked: one outside a table fails the run with `ONNXC_ERR_INDEX`), summed and layer
//!   normalized; the mask index is the count of ones per mask row.
//! - RotaryEmbedding (com.microsoft form: position_ids second, or one offset) through the
//!   ONNX RotaryEmbedding builder.
//!
//! float32 GELUs run in the `kernels::Gelu` kernel; the norms are reductions and maps as ONNX's
//! LayerNormalization is.

use crate::error::Result;
use crate::frontend::build::{self, FLOATS, bload, keep_index};
use crate::frontend::ctx::Ctx;
use crate::frontend::ops::{linalg, norm_more, rotary};
use crate::ir::dim::{Dim, Shape, shape_from};
use crate::ir::expr::{self, BinOp, E, UnOp};
use crate::ir::graph::ReduceKind;
use crate::ir::{DType, Op, TypeInfo, ValueId};

fn c(dt: DType, v: f64) -> E {
    expr::f(dt, v)
}

fn add(a: E, b: E) -> E {
    expr::binary(BinOp::Add, a, b)
}

fn mul(a: E, b: E) -> E {
    expr::binary(BinOp::Mul, a, b)
}

/// The sum of the float operands `vs` (broadcast to the first one's shape), cast to its type.
fn sum_of(ctx: &mut Ctx, vs: &[ValueId]) -> Result<ValueId> {
    let dt = ctx.dtype(vs[0]);
    let shape = ctx.shape(vs[0]);
    for &v in &vs[1..] {
        let s = ctx.shape(v);
        if build::broadcast_shapes(ctx, &[s.clone(), shape.clone()])? != shape {
            return Err(ctx.err(format!(
                "an operand of shape {} does not broadcast to the input's {}",
                crate::ir::dim::fmt_shape(&s),
                crate::ir::dim::fmt_shape(&shape)
            )));
        }
    }
    let mut body = build::load_same(dt, 0, shape.len());
    for (k, &v) in vs.iter().enumerate().skip(1) {
        let l = bload(ctx.dtype(v), k as u32, &ctx.shape(v), &shape);
        body = add(body, expr::cast(l, dt));
    }
    ctx.map(dt, shape, vs.to_vec(), body)
}

/// Layer (or, `rms`, root-mean-square) normalization of `x` over its last axis, times `gamma`
/// plus `beta`: `[y, mean (zeros for rms), inv_std]`, the statistics with the last axis kept.
fn norm_last(
    ctx: &mut Ctx,
    x: ValueId,
    gamma: ValueId,
    beta: Option<ValueId>,
    eps: f64,
    rms: bool,
) -> Result<[ValueId; 3]> {
    let dt = ctx.dtype(x);
    let dims = ctx.known_shape(x)?;
    let rank = dims.len();
    if rank == 0 {
        return Err(ctx.err("the input must have at least one axis"));
    }
    let axes = [rank - 1];
    let (mean, inv) = if rms {
        let inv = norm_more::inv_rms(ctx, x, &axes, eps, dt)?;
        let zero = ctx.map(dt, ctx.shape(inv), vec![], c(dt, 0.0))?;
        (zero, inv)
    } else {
        norm_more::moments(ctx, x, &axes, eps, dt)?
    };
    let xs = ctx.shape(x);
    let ki = keep_index(rank, &axes);
    let centered = if rms {
        build::load_same(dt, 0, rank)
    } else {
        expr::binary(
            BinOp::Sub,
            build::load_same(dt, 0, rank),
            expr::load(dt, 1, ki.clone()),
        )
    };
    let mut inputs = vec![x, mean, inv, gamma];
    let g = expr::cast(bload(ctx.dtype(gamma), 3, &ctx.shape(gamma), &xs), dt);
    let mut body = mul(mul(centered, expr::load(dt, 2, ki)), g);
    if let Some(b) = beta {
        inputs.push(b);
        body = add(
            body,
            expr::cast(bload(ctx.dtype(b), 4, &ctx.shape(b), &xs), dt),
        );
    }
    let y = ctx.map(dt, xs, inputs, body)?;
    Ok([y, mean, inv])
}

/// `gamma` (and `beta`, `bias`) must be 1-D over the hidden size `h`.
fn hidden_vector(ctx: &Ctx, v: ValueId, h: i64, what: &str) -> Result<()> {
    let s = ctx.known_shape(v)?;
    if s != [h] {
        return Err(ctx.err(format!(
            "{what} has shape {s:?}; it must be [{h}] (the hidden size)"
        )));
    }
    Ok(())
}

/// SkipLayerNormalization (input, skip, gamma, beta?, bias?) and
/// SkipSimplifiedLayerNormalization (input, skip, gamma, bias?): outputs (output, mean,
/// inv_std_var, input_skip_bias_sum).
fn skip_norm(ctx: &mut Ctx, rms: bool) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let dt = build::expect_types(ctx, x, "input", FLOATS)?;
    let (skip, gamma) = (ctx.input(1)?, ctx.input(2)?);
    let (beta, bias) = if rms {
        (None, ctx.opt_input(3))
    } else {
        (ctx.opt_input(3), ctx.opt_input(4))
    };
    let dims = ctx.known_shape(x)?;
    let h = *dims
        .last()
        .ok_or_else(|| ctx.err("input must be 2-D or 3-D"))?;
    for (v, what) in [(Some(gamma), "gamma"), (beta, "beta"), (bias, "bias")] {
        if let Some(v) = v {
            hidden_vector(ctx, v, h, what)?;
            build::expect_types(ctx, v, what, &[dt])?;
        }
    }
    build::expect_types(ctx, skip, "skip", &[dt])?;
    let mut parts = vec![x, skip];
    parts.extend(bias);
    let sum = sum_of(ctx, &parts)?;
    let eps = ctx.attr_f_or("epsilon", 1e-12)?;
    let [y, mean, inv] = norm_last(ctx, sum, gamma, beta, eps, rms)?;
    let mean = build::cast(ctx, mean, DType::F32)?;
    let inv = build::cast(ctx, inv, DType::F32)?;
    Ok(vec![y, mean, inv, sum])
}

pub fn skip_layer_norm(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    skip_norm(ctx, false)
}

pub fn skip_simplified_layer_norm(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    skip_norm(ctx, true)
}

/// SimplifiedLayerNormalization (X, scale): RMSNormalization's formula (onnxruntime registers
/// it in the default domain, opset 1).
pub fn simplified_layer_norm(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    norm_more::rms_norm(ctx)
}

/// The exact GELU `x·½·(1 + erf(x/√2))` of `x`: the `kernels::Gelu` kernel for float32.
fn gelu_of(ctx: &mut Ctx, x: ValueId) -> Result<ValueId> {
    let dt = build::expect_types(ctx, x, "X", FLOATS)?;
    let shape = ctx.shape(x);
    if dt == DType::F32 && crate::ir::dim::known_dims(&shape).is_some() {
        return ctx.add(
            Op::kernel(crate::kernels::Gelu),
            vec![x],
            TypeInfo::new(DType::F32, shape),
        );
    }
    let ct = if dt == DType::F64 { dt } else { DType::F32 };
    build::unary(ctx, x, dt, |v| {
        let v = expr::cast(v, ct);
        let e = expr::unary(
            UnOp::Erf,
            mul(v.clone(), c(ct, std::f64::consts::FRAC_1_SQRT_2)),
        );
        expr::cast(mul(mul(c(ct, 0.5), v), add(c(ct, 1.0), e)), dt)
    })
}

pub fn gelu(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    Ok(vec![gelu_of(ctx, x)?])
}

/// `A + B` with B a vector over A's last axis.
fn plus_bias(ctx: &mut Ctx, a: ValueId, b: ValueId, what: &str) -> Result<ValueId> {
    let dt = build::expect_types(ctx, a, "the input", FLOATS)?;
    build::expect_types(ctx, b, what, &[dt])?;
    let h = *ctx
        .known_shape(a)?
        .last()
        .ok_or_else(|| ctx.err("the input must have at least one axis"))?;
    hidden_vector(ctx, b, h, what)?;
    sum_of(ctx, &[a, b])
}

pub fn bias_gelu(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (a, b) = (ctx.input(0)?, ctx.input(1)?);
    let s = plus_bias(ctx, a, b, "B")?;
    Ok(vec![gelu_of(ctx, s)?])
}

/// FastGelu (X, bias?): `½x(1 + tanh(√(2/π)(x + 0.044715x³)))`, in float32 for the 16-bit
/// types.
pub fn fast_gelu(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let mut x = ctx.input(0)?;
    if let Some(b) = ctx.opt_input(1) {
        x = plus_bias(ctx, x, b, "bias")?;
    }
    let dt = build::expect_types(ctx, x, "X", FLOATS)?;
    let ct = if dt == DType::F64 { dt } else { DType::F32 };
    let alpha = (2.0 / std::f64::consts::PI).sqrt();
    Ok(vec![build::unary(ctx, x, dt, |v| {
        let v = expr::cast(v, ct);
        let x3 = mul(mul(v.clone(), v.clone()), v.clone());
        let t = expr::unary(
            UnOp::Tanh,
            mul(c(ct, alpha), add(v.clone(), mul(c(ct, 0.044715), x3))),
        );
        expr::cast(mul(mul(c(ct, 0.5), v), add(c(ct, 1.0), t)), dt)
    })?])
}

/// QuickGelu: `x · σ(alpha · x)`, alpha 1.702 by default.
pub fn quick_gelu(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let dt = build::expect_types(ctx, x, "X", FLOATS)?;
    let alpha = ctx.attr_f_or("alpha", 1.702)?;
    let ct = if dt == DType::F64 { dt } else { DType::F32 };
    Ok(vec![build::unary(ctx, x, dt, |v| {
        let v = expr::cast(v, ct);
        let s = expr::unary(UnOp::Sigmoid, mul(c(ct, alpha as f32 as f64), v.clone()));
        expr::cast(mul(v, s), dt)
    })?])
}

/// BiasAdd (X [N, S, C], bias [C], skip [N, S, C]): `X + bias + skip`.
pub fn bias_add(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (x, b, skip) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    let dt = build::expect_types(ctx, x, "X", FLOATS)?;
    build::expect_types(ctx, skip, "skip", &[dt])?;
    let h = *ctx
        .known_shape(x)?
        .last()
        .ok_or_else(|| ctx.err("X must be 3-D"))?;
    hidden_vector(ctx, b, h, "bias")?;
    if ctx.known_shape(skip)? != ctx.known_shape(x)? {
        return Err(ctx.err("skip must have X's shape"));
    }
    Ok(vec![sum_of(ctx, &[x, b, skip])?])
}

/// BiasSplitGelu (X [N, S, D], bias [D]): with `X + bias` split into halves `l, r` along D,
/// `l · gelu(r)` ([N, S, D/2]).
pub fn bias_split_gelu(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (x, b) = (ctx.input(0)?, ctx.input(1)?);
    let s = plus_bias(ctx, x, b, "bias")?;
    let dims = ctx.known_shape(s)?;
    let r = dims.len();
    let d = dims[r - 1];
    if d % 2 != 0 {
        return Err(ctx.err(format!("the last dim {d} is odd; it must split in halves")));
    }
    let dt = ctx.dtype(s);
    let mut half = dims.clone();
    half[r - 1] = d / 2;
    let at = |off: i64| {
        let mut idx: Vec<E> = (0..r as u32).map(expr::var).collect();
        idx[r - 1] = expr::add(idx[r - 1].clone(), expr::i(off));
        expr::load(dt, 0, idx)
    };
    let right = ctx.map(dt, shape_from(&half), vec![s], at(d / 2))?;
    let g = gelu_of(ctx, right)?;
    let body = mul(at(0), build::load_same(dt, 1, r));
    Ok(vec![ctx.map(dt, shape_from(&half), vec![s, g], body)?])
}

/// FusedMatMul / TransposeMatMul (A, B): `alpha · op(A) · op(B)` with `transA`/`transB`
/// over the last two axes. `transBatchA`/`transBatchB` (onnxruntime's fusion of a
/// `Transpose(perm=[1, 0, 2])` into the MatMul after it, as seq-first attention exports
/// have) read the operand's first axis as its row axis: its batch axes are axes 1..r-2, so
/// it is first transposed by `[1, …, r-2, 0, r-1]`; both operands then have one rank of at
/// least 3, as onnxruntime requires.
pub fn fused_matmul(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (mut a, mut b) = (ctx.input(0)?, ctx.input(1)?);
    let batch_a = ctx.attr_i_or("transBatchA", 0)? != 0;
    let batch_b = ctx.attr_i_or("transBatchB", 0)? != 0;
    if (batch_a || batch_b) && (ctx.rank(a) != ctx.rank(b) || ctx.rank(a) < 3) {
        return Err(ctx.err(format!(
            "transBatchA/transBatchB need A and B of one rank of at least 3, got ranks {} and \
             {}",
            ctx.rank(a),
            ctx.rank(b)
        )));
    }
    let batch_first = |r: usize| -> Vec<usize> { (1..r - 1).chain([0, r - 1]).collect() };
    if batch_a {
        a = build::transpose(ctx, a, &batch_first(ctx.rank(a)))?;
    }
    if batch_b {
        b = build::transpose(ctx, b, &batch_first(ctx.rank(b)))?;
    }
    let ta = ctx.attr_i_or("transA", 0)? != 0;
    let tb = ctx.attr_i_or("transB", 0)? != 0;
    if (ta && ctx.rank(a) < 2) || (tb && ctx.rank(b) < 2) {
        return Err(ctx.err("a transposed operand must have rank >= 2"));
    }
    let alpha = ctx.attr_f_or("alpha", 1.0)?;
    let y = linalg::matmul_values(ctx, a, b, ta, tb)?;
    if alpha == 1.0 {
        return Ok(vec![y]);
    }
    let dt = ctx.dtype(y);
    Ok(vec![build::unary(ctx, y, dt, |v| {
        mul(v, expr::konst(dt, crate::ir::Scalar::F(alpha)))
    })?])
}

/// `index` checked into [0, bound): outside it the run fails (ONNXC_ERR_INDEX). Unlike a
/// plain `check_index`, which takes a negative index from the end (Gather's semantics), a
/// negative one fails too.
pub fn check_non_negative(index: E, bound: i64) -> E {
    let wrapped = expr::select(expr::lt(index.clone(), expr::i(0)), expr::i(bound), index);
    expr::check_index(wrapped, bound)
}

/// Checked int64 ids of an integer tensor against a table of `rows`: a map whose elements
/// fail the run (ONNXC_ERR_INDEX) outside [0, rows).
fn checked_ids(ctx: &mut Ctx, ids: ValueId, rows: i64, what: &str) -> Result<ValueId> {
    let dt = build::expect_types(ctx, ids, what, &[DType::I32, DType::I64])?;
    let r = ctx.rank(ids);
    let body = check_non_negative(expr::cast(build::load_same(dt, 0, r), DType::I64), rows);
    let shape = ctx.shape(ids);
    ctx.map(DType::I64, shape, vec![ids], body)
}

/// EmbedLayerNormalization (input_ids, segment_ids?, word_embedding, position_embedding,
/// segment_embedding?, gamma, beta, mask?, position_ids?): outputs (output, mask_index,
/// embedding_sum).
pub fn embed_layer_norm(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let ids = ctx.input(0)?;
    let seg = ctx.opt_input(1);
    let (word, pos_table) = (ctx.input(2)?, ctx.input(3)?);
    let seg_table = ctx.opt_input(4);
    let (gamma, beta) = (ctx.input(5)?, ctx.input(6)?);
    let (mask, pos_ids) = (ctx.opt_input(7), ctx.opt_input(8));
    if seg.is_some() != seg_table.is_some() {
        return Err(ctx.err("segment_ids and segment_embedding must be given together"));
    }
    let dt = build::expect_types(ctx, word, "word_embedding", &[DType::F32, DType::F16])?;
    let is = ctx.known_shape(ids)?;
    let [b, s] = is[..] else {
        return Err(ctx.err(format!(
            "input_ids has shape {is:?}; it must be (batch, sequence)"
        )));
    };
    let ws = ctx.known_shape(word)?;
    if ws.len() != 2 {
        return Err(ctx.err("word_embedding must be 2-D (vocabulary, hidden)"));
    }
    let h = ws[1];
    let mut tables = vec![(word, ids, "input_ids")];
    // Position ids: given ([b, s] or [1, s]), or 0..s.
    let ps = ctx.known_shape(pos_table)?;
    if ps.len() != 2 || ps[1] != h {
        return Err(ctx.err(format!(
            "position_embedding has shape {ps:?}; it must be (positions, {h})"
        )));
    }
    let positions = match pos_ids {
        Some(p) => {
            let pshape = ctx.known_shape(p)?;
            if pshape != [b, s] && pshape != [1, s] {
                return Err(ctx.err(format!(
                    "position_ids has shape {pshape:?}; it must be [{b}, {s}] or [1, {s}]"
                )));
            }
            let pdt = ctx.dtype(p);
            let l = bload(pdt, 0, &ctx.shape(p), &shape_from(&[b, s]));
            ctx.map(pdt, shape_from(&[b, s]), vec![p], l)?
        }
        None => ctx.map(
            DType::I32,
            shape_from(&[b, s]),
            vec![],
            expr::cast(expr::var(1), DType::I32),
        )?,
    };
    tables.push((pos_table, positions, "position_ids"));
    if let (Some(sv), Some(st)) = (seg, seg_table) {
        tables.push((st, sv, "segment_ids"));
    }
    let mut inputs = Vec::new();
    let mut body: Option<E> = None;
    for (table, idv, what) in tables {
        let ts = ctx.known_shape(table)?;
        if ts.len() != 2 || ts[1] != h || ctx.dtype(table) != dt {
            return Err(ctx.err(format!(
                "the table for {what} is {} {ts:?}; it must be {dt} (rows, {h})",
                ctx.dtype(table)
            )));
        }
        if ctx.known_shape(idv)? != [b, s] {
            return Err(ctx.err(format!("{what} must have shape [{b}, {s}]")));
        }
        let checked = checked_ids(ctx, idv, ts[0], what)?;
        let k = inputs.len() as u32;
        inputs.push(table);
        inputs.push(checked);
        let row = expr::clamp(
            expr::load(DType::I64, k + 1, vec![expr::var(0), expr::var(1)]),
            0,
            ts[0] - 1,
        );
        let l = expr::load(dt, k, vec![row, expr::var(2)]);
        body = Some(match body {
            None => l,
            Some(e) => add(e, l),
        });
    }
    let body = body.expect("the word table");
    let emb = ctx.map(dt, shape_from(&[b, s, h]), inputs, body)?;
    let eps = ctx.attr_f_or("epsilon", 1e-12)?;
    hidden_vector(ctx, gamma, h, "gamma")?;
    hidden_vector(ctx, beta, h, "beta")?;
    let [y, _, _] = norm_last(ctx, emb, gamma, Some(beta), eps, false)?;
    // mask_index: the count of ones per row of the mask (zeros without one).
    let mask_index = match mask {
        Some(m) => {
            let mdt = build::expect_types(ctx, m, "mask", &[DType::I32, DType::I64])?;
            if ctx.known_shape(m)? != [b, s] {
                return Err(ctx.err(format!("mask must have shape [{b}, {s}]")));
            }
            let one = expr::binary(
                BinOp::Eq,
                expr::load(mdt, 0, vec![expr::var(0), expr::var(1)]),
                expr::cast(expr::i(1), mdt),
            );
            let body = expr::select(
                one,
                expr::konst(DType::I32, crate::ir::Scalar::I(1)),
                expr::konst(DType::I32, crate::ir::Scalar::I(0)),
            );
            ctx.reduce(
                ReduceKind::Sum,
                vec![s],
                DType::I32,
                shape_from(&[b]),
                vec![m],
                body,
            )?
        }
        None => ctx.map(
            DType::I32,
            shape_from(&[b]),
            vec![],
            expr::konst(DType::I32, crate::ir::Scalar::I(0)),
        )?,
    };
    Ok(vec![y, mask_index, emb])
}

/// com.microsoft RotaryEmbedding (input, position_ids, cos_cache, sin_cache): position_ids
/// [batch, seq], or [1] holding the first position of every row.
pub fn rotary_embedding(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (x, pos, cos, sin) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?, ctx.input(3)?);
    if ctx.attr_i_or("is_packed_batching", 0)? != 0 {
        return Err(ctx.unsupported("is_packed_batching=1 (ragged batches)"));
    }
    if ctx.attr_f("scale")?.is_some_and(|s| s != 1.0) {
        return Err(ctx.unsupported("a scale other than 1"));
    }
    let config = rotary::Rotary {
        num_heads: ctx.attr_i_or("num_heads", 0)?,
        rotary_dim: ctx.attr_i_or("rotary_embedding_dim", 0)?,
        interleaved: ctx.attr_i_or("interleaved", 0)? != 0,
    };
    let xs = ctx.known_shape(x)?;
    let (b, s) = match xs[..] {
        [b, _, s, _] => (b, s),
        [b, s, _] => (b, s),
        _ => {
            return Err(ctx.err(format!(
                "input has shape {xs:?}; it must be (batch, seq, hidden) or (batch, heads, seq, head_size)"
            )));
        }
    };
    let pos = positions(ctx, pos, b, s)?;
    Ok(vec![rotary::rotary_values(
        ctx,
        x,
        cos,
        sin,
        Some(pos),
        config,
    )?])
}

/// Positions as int64 [b, s]: `p` itself when it has that shape, `p[0] + j` for a
/// one-element `p`.
pub fn positions(ctx: &mut Ctx, p: ValueId, b: i64, s: i64) -> Result<ValueId> {
    let pdt = build::expect_types(ctx, p, "position_ids", &[DType::I64, DType::I32])?;
    let ps = ctx.known_shape(p)?;
    let shape: Shape = vec![Dim::Known(b), Dim::Known(s)];
    let body = if ps == [b, s] {
        expr::cast(
            expr::load(pdt, 0, vec![expr::var(0), expr::var(1)]),
            DType::I64,
        )
    } else if ps.iter().product::<i64>() == 1 {
        expr::add(
            expr::cast(expr::load(pdt, 0, vec![expr::i(0); ps.len()]), DType::I64),
            expr::var(1),
        )
    } else {
        return Err(ctx.err(format!(
            "position_ids has shape {ps:?}; it must be [{b}, {s}] or one element"
        )));
    };
    ctx.map(DType::I64, shape, vec![p], body)
}

/// The activation of onnxruntime's fused kernels (`activation` with its parameters:
/// LeakyRelu alpha, HardSigmoid alpha and beta, Clip min and max) applied to `y`.
fn fused_activation(ctx: &mut Ctx, y: ValueId, params: &[f64]) -> Result<ValueId> {
    let Some(act) = ctx.attr_s("activation")? else {
        return Ok(y);
    };
    let dt = build::expect_types(ctx, y, "the result", FLOATS)?;
    let p = |k: usize, default: f64| params.get(k).copied().unwrap_or(default);
    let (alpha, beta) = match act.as_str() {
        "LeakyRelu" => (p(0, 0.01), 0.0),
        "HardSigmoid" => (p(0, 0.2), p(1, 0.5)),
        "Clip" => (p(0, f64::NEG_INFINITY), p(1, f64::INFINITY)),
        _ => (0.0, 0.0),
    };
    let f = move |v: E| -> Option<E> {
        let z = c(dt, 0.0);
        Some(match act.as_str() {
            "Relu" => expr::select(expr::binary(BinOp::Lt, v.clone(), z.clone()), z, v),
            "Tanh" => expr::unary(UnOp::Tanh, v),
            "Sigmoid" => expr::unary(UnOp::Sigmoid, v),
            "LeakyRelu" => expr::select(
                expr::binary(BinOp::Lt, v.clone(), z),
                mul(v.clone(), c(dt, alpha)),
                v,
            ),
            "HardSigmoid" => expr::binary(
                BinOp::Max,
                z,
                expr::binary(
                    BinOp::Min,
                    c(dt, 1.0),
                    add(mul(v, c(dt, alpha)), c(dt, beta)),
                ),
            ),
            "Clip" => expr::binary(
                BinOp::Min,
                expr::binary(BinOp::Max, v, c(dt, alpha)),
                c(dt, beta),
            ),
            _ => return None,
        })
    };
    if f(c(dt, 0.0)).is_none() {
        return Err(ctx.unsupported(format!(
            "activation '{}'; onnxc fuses Relu, Tanh, Sigmoid, LeakyRelu, HardSigmoid and Clip",
            ctx.attr_s("activation")?.unwrap_or_default()
        )));
    }
    build::unary(ctx, y, dt, |v| f(v).expect("checked above"))
}

/// FusedGemm: Gemm, then `activation` (activation_alpha, activation_beta).
pub fn fused_gemm(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let y = linalg::gemm(ctx)?[0];
    let params: Vec<f64> = ["activation_alpha", "activation_beta"]
        .iter()
        .map_while(|n| ctx.attr_f(n).ok().flatten())
        .collect();
    Ok(vec![fused_activation(ctx, y, &params)?])
}

/// FusedConv (X, W, B?, Z?): Conv plus Z, then `activation` (activation_params).
pub fn fused_conv(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let mut y = crate::frontend::ops::nn::conv(ctx)?[0];
    if let Some(z) = ctx.opt_input(3) {
        if ctx.shape(z) != ctx.shape(y) {
            return Err(ctx.err("Z must have the convolution's output shape"));
        }
        y = sum_of(ctx, &[y, z])?;
    }
    let params: Vec<f64> = ctx
        .attr_floats("activation_params")
        .unwrap_or_default()
        .into_iter()
        .map(f64::from)
        .collect();
    Ok(vec![fused_activation(ctx, y, &params)?])
}
