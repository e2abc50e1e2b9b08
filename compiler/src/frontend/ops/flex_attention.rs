//! FlexAttention (`ai.onnx.preview` opset 1): scaled dot-product attention over rank-4
//! Q, K, V with GQA heads and two user subgraphs, `score_mod` on the scores and `prob_mod`
//! on the probabilities. The importer (`subgraph::flex`) builds the pieces here in order and
//! inlines the subgraphs between them, so a mask or a soft cap written as a subgraph fuses
//! like any other map.
//!
//! Precision follows the reference: the scores are `(Q·√s)(K·√s)ᵀ` in the inputs' type,
//! then the softmax, both subgraphs and `P·V` run in the softmax precision (float32 for
//! 16-bit inputs unless `softmax_precision` says otherwise, the input type otherwise), and
//! the output is rounded back to V's type.

use crate::error::Result;
use crate::frontend::build::{self, FLOATS};
use crate::frontend::ctx::Ctx;
use crate::frontend::ops::nn;
use crate::ir::dim::shape_from;
use crate::ir::expr::{self, BinOp, E};
use crate::ir::graph::ReduceKind;
use crate::ir::{DType, ValueId};

fn v(k: u32) -> E {
    expr::var(k)
}

/// What the later pieces need of the node once its scores are built.
pub struct Flex {
    value: ValueId,
    /// `[batch, q_heads, q_len, kv_len]`, the scores' and probabilities' shape.
    pub scores_shape: [i64; 4],
    v_head: i64,
    /// Query heads per K/V head.
    rep: i64,
    /// The softmax precision.
    pub dtype: DType,
    out_dtype: DType,
}

/// The scores `(Q·√s)(K·√s)ᵀ` in the softmax precision, and the plan for the rest.
pub fn scores(ctx: &mut Ctx) -> Result<(ValueId, Flex)> {
    let (q, k, val) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    let dt = build::expect_types(ctx, q, "Q", FLOATS)?;
    for (x, what) in [(k, "K"), (val, "V")] {
        if ctx.dtype(x) != dt {
            return Err(ctx.err(format!(
                "{what} is {} but Q is {dt}; they must have the same type",
                ctx.dtype(x)
            )));
        }
    }
    let (qs, ks, vs) = (
        ctx.known_shape(q)?,
        ctx.known_shape(k)?,
        ctx.known_shape(val)?,
    );
    let (&[b, hq, l, e], &[bk, hkv, s, ek], &[bv, hv, sv, ev]) =
        (qs.as_slice(), ks.as_slice(), vs.as_slice())
    else {
        return Err(ctx.err(format!(
            "Q {qs:?}, K {ks:?} and V {vs:?} must all be rank 4 (batch, heads, sequence, head size)"
        )));
    };
    if bk != b || bv != b || hv != hkv || sv != s || ek != e || hkv < 1 || hq % hkv != 0 {
        return Err(ctx.err(format!(
            "incompatible shapes Q {qs:?}, K {ks:?}, V {vs:?}: K and V need Q's batch, one \
             head count that divides Q's, one sequence length, and K Q's head size"
        )));
    }
    let cdt = match ctx.attr_i("softmax_precision")? {
        None if dt == DType::F64 => DType::F64,
        None => DType::F32,
        Some(code) => match i32::try_from(code).ok().and_then(DType::from_onnx) {
            Some(t @ (DType::F32 | DType::F16 | DType::BF16 | DType::F64)) => t,
            _ => {
                return Err(ctx.err(format!(
                    "softmax_precision {code} is not float (1), float16 (10), bfloat16 (16) \
                     or double (11)"
                )));
            }
        },
    };
    let scale = match ctx.attr_f("scale")? {
        Some(s) => s,
        None => 1.0 / (e as f64).sqrt(),
    };
    // √scale computed in float32, then rounded to the inputs' type, as the reference.
    let root = expr::f(dt, (scale as f32).sqrt() as f64);
    let rep = hq / hkv;
    let scaled = |input: u32, head: E| {
        expr::round_to_storage(expr::binary(
            BinOp::Mul,
            expr::load(
                dt,
                input,
                vec![v(0), head, v(if input == 0 { 2 } else { 3 }), v(4)],
            ),
            root.clone(),
        ))
    };
    let body = expr::binary(
        BinOp::Mul,
        scaled(0, v(1)),
        scaled(1, expr::idiv(v(1), rep)),
    );
    let shape = [b, hq, l, s];
    let raw = ctx.reduce(
        ReduceKind::Sum,
        vec![e],
        dt,
        shape_from(&shape),
        vec![q, k],
        body,
    )?;
    let scores = build::cast(ctx, raw, cdt)?;
    let plan = Flex {
        value: val,
        scores_shape: shape,
        v_head: ev,
        rep,
        dtype: cdt,
        out_dtype: dt,
    };
    Ok((scores, plan))
}

/// The softmax of the (modified) scores along the key axis.
pub fn softmax(ctx: &mut Ctx, scores: ValueId) -> Result<ValueId> {
    nn::softmax_last(ctx, scores)
}

/// `P·V` in the softmax precision, rounded to V's type.
pub fn output(ctx: &mut Ctx, plan: &Flex, probs: ValueId) -> Result<ValueId> {
    let [b, hq, l, s] = plan.scores_shape;
    let cdt = plan.dtype;
    let val = build::cast(ctx, plan.value, cdt)?;
    let body = expr::binary(
        BinOp::Mul,
        expr::load(cdt, 0, vec![v(0), v(1), v(2), v(4)]),
        expr::load(cdt, 1, vec![v(0), expr::idiv(v(1), plan.rep), v(4), v(3)]),
    );
    let y = ctx.reduce(
        ReduceKind::Sum,
        vec![s],
        cdt,
        shape_from(&[b, hq, l, plan.v_head]),
        vec![probs, val],
        body,
    )?;
    build::cast(ctx, y, plan.out_dtype)
}
