//! onnxruntime's attention contrib ops (domain `com.microsoft`): Attention (packed QKV
//! weights, as its transformer optimizer writes for BERT and GPT-2), MultiHeadAttention,
//! GroupQueryAttention (static past/present shapes) and QAttention (Attention of a
//! uint8/int8 input projection).
//!
//! Each becomes MatMuls, maps and the softmax kernel: the projections are MatMuls (constant
//! weights sliced at compile time), heads are split by a reshape and a transpose the GEMM reads
//! in place, `softmax(scale · Q·Kᵀ + mask)` is one map and the row softmax kernel, and the
//! context `P·V` a MatMul transposed back. The masks follow onnxruntime's CPU kernels: a
//! padding mask (raw `[B, T]` / `[B, S, T]` zeros, or key lengths `[B]` with optional start
//! positions `[2B]`) puts `mask_filter_value` (−10000 by default) on the masked scores, the
//! causal mask (`unidirectional`) the lowest float over them (it wins); GroupQueryAttention
//! excludes the keys past each query's position (and outside its local window) entirely.
//! Past and present key/value states are concatenations along the sequence axis; the past
//! length is fixed at compile time. Float16 and bfloat16 attention computes in float32
//! (`in_f32`), as onnxruntime's CPU kernels accumulate.

use crate::error::Result;
use crate::frontend::build::{self, bload};
use crate::frontend::ctx::Ctx;
use crate::frontend::ops::{contrib_quant, linalg, nn, rotary, transformer};
use crate::ir::dim::shape_from;
use crate::ir::expr::{self, BinOp, E, UnOp};
use crate::ir::{DType, Op, Scalar, TypeInfo, ValueId};

fn v(k: u32) -> E {
    expr::var(k)
}

fn f32c(x: f64) -> E {
    expr::f(DType::F32, x)
}

/// Columns `[off, off + n)` of the 2-D `w` (folded when `w` is constant).
fn columns(ctx: &mut Ctx, w: ValueId, off: i64, n: i64) -> Result<ValueId> {
    let ws = ctx.known_shape(w)?;
    if ws.len() == 2 && off == 0 && n == ws[1] {
        return Ok(w);
    }
    let dt = ctx.dtype(w);
    let body = expr::load(dt, 0, vec![v(0), expr::add(v(1), expr::i(off))]);
    ctx.map(dt, shape_from(&[ws[0], n]), vec![w], body)
}

/// Elements `[off, off + n)` of the last axis of `x`.
fn last_slice(ctx: &mut Ctx, x: ValueId, off: i64, n: i64) -> Result<ValueId> {
    let xs = ctx.known_shape(x)?;
    let r = xs.len();
    if off == 0 && n == xs[r - 1] {
        return Ok(x);
    }
    let dt = ctx.dtype(x);
    let mut idx: Vec<E> = (0..r as u32).map(v).collect();
    idx[r - 1] = expr::add(idx[r - 1].clone(), expr::i(off));
    let mut shape = xs.clone();
    shape[r - 1] = n;
    ctx.map(dt, shape_from(&shape), vec![x], expr::load(dt, 0, idx))
}

/// `[B, S, H·D]` → `[B, H, S, D]`.
fn split_heads(ctx: &mut Ctx, x: ValueId, heads: i64) -> Result<ValueId> {
    let d = ctx.known_shape(x)?;
    if d.len() != 3 || heads < 1 || d[2] % heads != 0 {
        return Err(ctx.err(format!(
            "a projection of shape {d:?} does not split into {heads} heads"
        )));
    }
    let r = ctx.reshape(x, shape_from(&[d[0], d[1], heads, d[2] / heads]))?;
    build::transpose(ctx, r, &[0, 2, 1, 3])
}

/// `x + bias[off..off + n]` over the last axis (x's last dim is n).
fn plus_bias_slice(ctx: &mut Ctx, x: ValueId, bias: Option<ValueId>, off: i64) -> Result<ValueId> {
    let Some(b) = bias else { return Ok(x) };
    let xs = ctx.known_shape(x)?;
    let r = xs.len();
    let dt = ctx.dtype(x);
    let body = expr::binary(
        BinOp::Add,
        build::load_same(dt, 0, r),
        expr::load(dt, 1, vec![expr::add(v(r as u32 - 1), expr::i(off))]),
    );
    ctx.map(dt, shape_from(&xs), vec![x, b], body)
}

/// `concat(past, new)` along axis 2 of `[B, H, ·, D]` values.
fn concat_seq(ctx: &mut Ctx, past: Option<ValueId>, new: ValueId) -> Result<ValueId> {
    let Some(p) = past else { return Ok(new) };
    let (ps, ns) = (ctx.known_shape(p)?, ctx.known_shape(new)?);
    if ps.len() != 4 || ps[0] != ns[0] || ps[1] != ns[1] || ps[3] != ns[3] {
        return Err(ctx.err(format!(
            "the past state has shape {ps:?}; it must be [{}, {}, past_length, {}]",
            ns[0], ns[1], ns[3]
        )));
    }
    let mut s = ns.clone();
    s[2] += ps[2];
    let dt = ctx.dtype(new);
    ctx.add(
        Op::Concat { axis: 2 },
        vec![p, new],
        TypeInfo::new(dt, shape_from(&s)),
    )
}

/// `softmax(scale · Q·Kᵀ (capped) + mask) · V` of `q` [B, Hq, S, D], `k` [B, Hkv, T, D], `v`
/// [B, Hkv, T, Dv] (Hq a multiple of Hkv), `mask` an additive float32 `[B|1, H|1, S, T]`;
/// the result as `[B, S, Hq·Dv]`.
fn attend(
    ctx: &mut Ctx,
    q: ValueId,
    k: ValueId,
    val: ValueId,
    scale: f64,
    softcap: f64,
    mask: Option<ValueId>,
) -> Result<ValueId> {
    let qs = ctx.known_shape(q)?;
    let (ks, vs) = (ctx.known_shape(k)?, ctx.known_shape(val)?);
    let (b, hq, s, d) = (qs[0], qs[1], qs[2], qs[3]);
    let (hkv, t, dv) = (ks[1], ks[2], vs[3]);
    if ks[0] != b
        || ks[3] != d
        || vs[0] != b
        || vs[1] != hkv
        || vs[2] != t
        || hkv < 1
        || hq % hkv != 0
    {
        return Err(ctx.err(format!(
            "incompatible attention shapes: Q {qs:?}, K {ks:?}, V {vs:?}"
        )));
    }
    // Key/value heads repeated for grouped queries.
    let repeat = |ctx: &mut Ctx, x: ValueId, last: i64| -> Result<ValueId> {
        if hq == hkv {
            return Ok(x);
        }
        let body = expr::load(
            DType::F32,
            0,
            vec![v(0), expr::idiv(v(1), hq / hkv), v(2), v(3)],
        );
        ctx.map(DType::F32, shape_from(&[b, hq, t, last]), vec![x], body)
    };
    let k = repeat(ctx, k, d)?;
    let val = repeat(ctx, val, dv)?;
    let qk = linalg::matmul_values(ctx, q, k, false, true)?;
    let full = shape_from(&[b, hq, s, t]);
    let mut body = expr::binary(BinOp::Mul, build::load_same(DType::F32, 0, 4), f32c(scale));
    if softcap > 0.0 {
        body = expr::binary(
            BinOp::Mul,
            expr::unary(UnOp::Tanh, expr::binary(BinOp::Div, body, f32c(softcap))),
            f32c(softcap),
        );
    }
    let mut inputs = vec![qk];
    if let Some(m) = mask {
        inputs.push(m);
        body = expr::binary(BinOp::Add, body, bload(DType::F32, 1, &ctx.shape(m), &full));
    }
    let scores = ctx.map(DType::F32, full, inputs, body)?;
    let p = nn::softmax_f32(ctx, scores, -1, 13)?;
    let y4 = linalg::matmul_values(ctx, p, val, false, false)?;
    let y = build::transpose(ctx, y4, &[0, 2, 1, 3])?;
    ctx.reshape(y, shape_from(&[b, s, hq * dv]))
}

/// The additive mask of Attention/MultiHeadAttention as onnxruntime's CPU kernel builds it,
/// over `[B, 1|H, S, T]` (T = past + S for the causal part): a padding mask (int32: raw
/// `[B, T]` or `[B, S, T]` with 0 for masked, key end positions `[B]`, or end and start
/// positions `[2B]`) gives `filter` where masked, `unidirectional` the lowest float32 past
/// each query's position (overriding), and `bias` ([B|1, H|1, S, T]) is added.
#[allow(clippy::too_many_arguments, reason = "the mask's independent parts")]
fn padding_mask(
    ctx: &mut Ctx,
    mask: Option<ValueId>,
    bias: Option<ValueId>,
    causal: bool,
    filter: f64,
    dims: [i64; 4],
    past: i64,
) -> Result<Option<ValueId>> {
    let [b, h, s, t] = dims;
    if mask.is_none() && bias.is_none() && !causal {
        return Ok(None);
    }
    let mut inputs = Vec::new();
    let zero = f32c(0.0);
    let mut term = zero.clone();
    if let Some(m) = mask {
        build::expect_types(ctx, m, "the mask", &[DType::I32])?;
        let ms = ctx.known_shape(m)?;
        let k = inputs.len() as u32;
        inputs.push(m);
        let masked = match ms[..] {
            [n] if n == b => expr::ge(
                v(3),
                expr::cast(expr::load(DType::I32, k, vec![v(0)]), DType::I64),
            ),
            [n] if n == 2 * b => {
                let end = expr::cast(expr::load(DType::I32, k, vec![v(0)]), DType::I64);
                let start = expr::cast(
                    expr::load(DType::I32, k, vec![expr::add(v(0), expr::i(b))]),
                    DType::I64,
                );
                let before = expr::lt(v(3), expr::min(start, expr::i(t)));
                expr::binary(BinOp::Or, expr::ge(v(3), end), before)
            }
            [mb, mt] if mb == b && mt == t => expr::binary(
                BinOp::Le,
                expr::load(DType::I32, k, vec![v(0), v(3)]),
                expr::konst(DType::I32, Scalar::I(0)),
            ),
            [mb, ms_, mt] if mb == b && ms_ == s && mt == t => expr::binary(
                BinOp::Le,
                expr::load(DType::I32, k, vec![v(0), v(2), v(3)]),
                expr::konst(DType::I32, Scalar::I(0)),
            ),
            _ => {
                return Err(ctx.unsupported(format!(
                    "a mask of shape {ms:?}; onnxc takes [{b}] (key lengths), [{}] (end and start positions), [{b}, {t}] or [{b}, {s}, {t}] (0 = masked)",
                    2 * b
                )));
            }
        };
        term = expr::select(masked, f32c(filter), zero.clone());
    }
    if causal {
        let later = expr::binary(BinOp::Gt, v(3), expr::add(v(2), expr::i(past)));
        term = expr::select(later, f32c(f32::MIN as f64), term);
    }
    let mut heads = 1;
    if let Some(bv) = bias {
        build::expect_types(ctx, bv, "attention_bias", &[DType::F32])?;
        let bs = ctx.known_shape(bv)?;
        let ok = bs.len() == 4
            && (bs[0] == b || bs[0] == 1)
            && (bs[1] == h || bs[1] == 1)
            && bs[2] == s
            && bs[3] == t;
        if !ok {
            return Err(ctx.err(format!(
                "attention_bias has shape {bs:?}; it must be [{b} or 1, {h} or 1, {s}, {t}]"
            )));
        }
        heads = bs[1];
        let k = inputs.len() as u32;
        inputs.push(bv);
        let l = bload(
            DType::F32,
            k,
            &ctx.shape(bv),
            &shape_from(&[b, heads, s, t]),
        );
        term = expr::binary(BinOp::Add, term, l);
    }
    Ok(Some(ctx.map(
        DType::F32,
        shape_from(&[b, heads, s, t]),
        inputs,
        term,
    )?))
}

/// The attention op `op` of a float16 or bfloat16 input (input 0): its operands of that
/// type cast to float32, `op` built over them, its float32 results cast back. A float32
/// input builds `op` as it is.
fn in_f32(ctx: &mut Ctx, op: fn(&mut Ctx) -> Result<Vec<ValueId>>) -> Result<Vec<ValueId>> {
    let low = ctx.dtype(ctx.input(0)?);
    if !matches!(low, DType::F16 | DType::BF16) {
        return op(ctx);
    }
    for i in 0..ctx.inputs.len() {
        if let Some(x) = ctx.inputs[i]
            && ctx.dtype(x) == low
        {
            ctx.inputs[i] = Some(build::cast(ctx, x, DType::F32)?);
        }
    }
    op(ctx)?
        .into_iter()
        .map(|y| match ctx.dtype(y) {
            DType::F32 => build::cast(ctx, y, low),
            _ => Ok(y),
        })
        .collect()
}

fn f32_only(ctx: &Ctx, x: ValueId, what: &str) -> Result<()> {
    build::expect_types(ctx, x, what, &[DType::F32])
        .map(|_| ())
        .map_err(|_| {
            ctx.unsupported(format!(
                "{what} of type {} (onnxc computes attention in float32)",
                ctx.dtype(x)
            ))
        })
}

fn scale_attr(ctx: &Ctx, head: i64) -> Result<f64> {
    Ok(match ctx.attr_f("scale")? {
        Some(s) if s != 0.0 => s,
        _ => 1.0 / (head as f64).sqrt(),
    })
}

/// Attributes common to Attention and QAttention that onnxc does not implement.
fn reject_unsupported(ctx: &Ctx) -> Result<()> {
    if ctx.attr_i_or("do_rotary", 0)? != 0 {
        return Err(ctx.unsupported(
            "do_rotary=1; write the rotary embedding as a RotaryEmbedding node before the attention",
        ));
    }
    if ctx.attr_i_or("past_present_share_buffer", 0)? != 0 {
        return Err(ctx.unsupported(
            "past_present_share_buffer=1 (a KV cache that grows at run time); export past and present with static shapes",
        ));
    }
    Ok(())
}

/// The attention of projected `q`, `k`, `val` ([B, S|L, ·]) with Attention's past and mask
/// inputs: outputs `[y, present]`.
#[allow(clippy::too_many_arguments, reason = "the op's operands")]
fn packed_attention(
    ctx: &mut Ctx,
    q: ValueId,
    k: ValueId,
    val: ValueId,
    heads: i64,
    mask: Option<ValueId>,
    past: Option<ValueId>,
    bias: Option<ValueId>,
) -> Result<Vec<ValueId>> {
    let (q4, k4, v4) = (
        split_heads(ctx, q, heads)?,
        split_heads(ctx, k, heads)?,
        split_heads(ctx, val, heads)?,
    );
    let qs = ctx.known_shape(q4)?;
    let (b, s, d) = (qs[0], qs[2], qs[3]);
    let (pk, pv, plen) = match past {
        Some(p) => {
            f32_only(ctx, p, "past")?;
            let ps = ctx.known_shape(p)?;
            if ps.len() != 5 || ps[0] != 2 || ps[1] != b || ps[2] != heads || ps[4] != d {
                return Err(ctx.err(format!(
                    "past has shape {ps:?}; it must be [2, {b}, {heads}, past_length, {d}]"
                )));
            }
            let half = |ctx: &mut Ctx, which: i64| {
                let body = expr::load(DType::F32, 0, vec![expr::i(which), v(0), v(1), v(2), v(3)]);
                ctx.map(DType::F32, shape_from(&ps[1..]), vec![p], body)
            };
            (Some(half(ctx, 0)?), Some(half(ctx, 1)?), ps[3])
        }
        None => (None, None, 0),
    };
    let kall = concat_seq(ctx, pk, k4)?;
    let vall = concat_seq(ctx, pv, v4)?;
    let t = plen + s;
    let causal = ctx.attr_i_or("unidirectional", 0)? != 0;
    let filter = ctx.attr_f_or("mask_filter_value", -10000.0)?;
    let m = padding_mask(ctx, mask, bias, causal, filter, [b, heads, s, t], plen)?;
    let scale = scale_attr(ctx, d)?;
    let y = attend(ctx, q4, kall, vall, scale, 0.0, m)?;
    // present = [K; V] stacked: [2, B, H, T, D].
    let one = |ctx: &mut Ctx, x: ValueId| ctx.reshape(x, shape_from(&[1, b, heads, t, d]));
    let (pk1, pv1) = (one(ctx, kall)?, one(ctx, vall)?);
    let present = ctx.add(
        Op::Concat { axis: 0 },
        vec![pk1, pv1],
        TypeInfo::new(DType::F32, shape_from(&[2, b, heads, t, d])),
    )?;
    Ok(vec![y, present])
}

/// Attention (input, weights, bias?, mask_index?, past?, attention_bias?,
/// past_sequence_length?): outputs (output, present).
pub fn attention(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    in_f32(ctx, attention_f32)
}

fn attention_f32(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (x, w) = (ctx.input(0)?, ctx.input(1)?);
    let (bias, mask, past) = (ctx.opt_input(2), ctx.opt_input(3), ctx.opt_input(4));
    let attn_bias = ctx.opt_input(5);
    f32_only(ctx, x, "input")?;
    build::expect_types(ctx, w, "weights", &[DType::F32])?;
    reject_unsupported(ctx)?;
    let heads = ctx
        .attr_i("num_heads")?
        .ok_or_else(|| ctx.err("attribute 'num_heads' is required"))?;
    let ws = ctx.known_shape(w)?;
    let xs = ctx.known_shape(x)?;
    if ws.len() != 2 || xs.len() != 3 || xs[2] != ws[0] {
        return Err(ctx.err(format!(
            "input {xs:?} and weights {ws:?} must be (batch, seq, in) and (in, q + k + v hidden)"
        )));
    }
    let sizes = match ctx.attr_ints("qkv_hidden_sizes") {
        Some(v) if v.len() == 3 => v,
        Some(v) => return Err(ctx.err(format!("qkv_hidden_sizes {v:?} must have 3 values"))),
        None if ws[1] % 3 == 0 => vec![ws[1] / 3; 3],
        None => return Err(ctx.err(format!("weights have {} columns, not 3 equal parts", ws[1]))),
    };
    if sizes.iter().sum::<i64>() != ws[1] || sizes[0] != sizes[1] {
        return Err(ctx.err(format!(
            "qkv_hidden_sizes {sizes:?} must sum to the weights' {} columns, Q's equal to K's",
            ws[1]
        )));
    }
    if let Some(b) = bias
        && ctx.known_shape(b)? != [ws[1]]
    {
        return Err(ctx.err(format!("bias must have shape [{}]", ws[1])));
    }
    let mut proj = Vec::new();
    let mut off = 0;
    for &n in &sizes {
        let wk = columns(ctx, w, off, n)?;
        let p = linalg::matmul_values(ctx, x, wk, false, false)?;
        proj.push(plus_bias_slice(ctx, p, bias, off)?);
        off += n;
    }
    packed_attention(ctx, proj[0], proj[1], proj[2], heads, mask, past, attn_bias)
}

/// QAttention (input, weight, bias, input_scale, weight_scale, mask_index?,
/// input_zero_point?, weight_zero_point?, past?): the projection `(X − z_x)(W − z_w) · s_x s_w
/// + bias` exact in integers, then Attention.
pub fn qattention(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (x, w, bias) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    let (sx, sw) = (ctx.input(3)?, ctx.input(4)?);
    let (mask, zx, zw, past) = (
        ctx.opt_input(5),
        ctx.opt_input(6),
        ctx.opt_input(7),
        ctx.opt_input(8),
    );
    reject_unsupported(ctx)?;
    let heads = ctx
        .attr_i("num_heads")?
        .ok_or_else(|| ctx.err("attribute 'num_heads' is required"))?;
    let ws = ctx.known_shape(w)?;
    if ws.len() != 2 || ws[1] % 3 != 0 {
        return Err(ctx.err(format!(
            "weight has shape {ws:?}; it must be (in, 3·hidden)"
        )));
    }
    let proj = contrib_quant::integer_to_float(ctx, x, sx, zx, w, sw, zw, Some(bias))?;
    let hid = ws[1] / 3;
    let q = last_slice(ctx, proj, 0, hid)?;
    let k = last_slice(ctx, proj, hid, hid)?;
    let val = last_slice(ctx, proj, 2 * hid, hid)?;
    packed_attention(ctx, q, k, val, heads, mask, past, None)
}

/// MultiHeadAttention (query, key?, value?, bias?, key_padding_mask?, attention_bias?,
/// past_key?, past_value?): outputs (output, present_key, present_value).
pub fn multi_head_attention(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    in_f32(ctx, multi_head_attention_f32)
}

fn multi_head_attention_f32(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let q = ctx.input(0)?;
    let (key, value, bias) = (ctx.opt_input(1), ctx.opt_input(2), ctx.opt_input(3));
    let (mask, attn_bias) = (ctx.opt_input(4), ctx.opt_input(5));
    let (past_k, past_v) = (ctx.opt_input(6), ctx.opt_input(7));
    for k in 8..ctx.num_inputs() {
        if ctx.opt_input(k).is_some() {
            return Err(ctx.unsupported(
                "past_sequence_length / cache_indirection (shared KV buffers, beam search)",
            ));
        }
    }
    f32_only(ctx, q, "query")?;
    let heads = ctx
        .attr_i("num_heads")?
        .ok_or_else(|| ctx.err("attribute 'num_heads' is required"))?;
    if past_k.is_some() != past_v.is_some() {
        return Err(ctx.err("past_key and past_value must be given together"));
    }
    let qs = ctx.known_shape(q)?;
    // Q, K, V as [B, ·, hidden] (3-D) or K/V already [B, H, L, D] (4-D).
    let (q3, k_in, v_in) = match (qs.len(), key, value) {
        (3, Some(k), Some(val)) if ctx.rank(k) != 5 => (q, k, val),
        _ => {
            return Err(ctx.unsupported(format!(
                "query of shape {qs:?} with {} key and {} value; onnxc takes 3-D query with 3-D or 4-D key and value (packed QKV and KV are not supported, as in onnxruntime's CPU kernel)",
                if key.is_some() { "a" } else { "no" },
                if value.is_some() { "a" } else { "no" }
            )));
        }
    };
    for (x, what) in [(k_in, "key"), (v_in, "value")] {
        f32_only(ctx, x, what)?;
    }
    let hid = ctx.known_shape(q3)?[2];
    let q3 = plus_bias_slice(ctx, q3, bias, 0)?;
    let q4 = split_heads(ctx, q3, heads)?;
    let four_d = ctx.rank(k_in) == 4;
    if four_d != (ctx.rank(v_in) == 4) {
        return Err(ctx.err("key and value must both be 3-D or both 4-D"));
    }
    let (k4, v4) = if four_d {
        if bias.is_some() || past_k.is_some() {
            return Err(
                ctx.unsupported("4-D (already projected) key/value with a bias or a past state")
            );
        }
        (k_in, v_in)
    } else {
        let kh = ctx.known_shape(k_in)?[2];
        let k3 = plus_bias_slice(ctx, k_in, bias, hid)?;
        let v3 = plus_bias_slice(ctx, v_in, bias, hid + kh)?;
        (split_heads(ctx, k3, heads)?, split_heads(ctx, v3, heads)?)
    };
    let kall = concat_seq(ctx, past_k, k4)?;
    let vall = concat_seq(ctx, past_v, v4)?;
    let plen = match past_k {
        Some(p) => ctx.known_shape(p)?[2],
        None => 0,
    };
    let qs4 = ctx.known_shape(q4)?;
    let t = ctx.known_shape(kall)?[2];
    let causal = ctx.attr_i_or("unidirectional", 0)? != 0;
    let filter = ctx.attr_f_or("mask_filter_value", -10000.0)?;
    let m = padding_mask(
        ctx,
        mask,
        attn_bias,
        causal,
        filter,
        [qs4[0], heads, qs4[2], t],
        plen,
    )?;
    let scale = scale_attr(ctx, qs4[3])?;
    let y = attend(ctx, q4, kall, vall, scale, 0.0, m)?;
    Ok(vec![y, kall, vall])
}

/// GroupQueryAttention (query, key?, value?, past_key?, past_value?, seqlens_k,
/// total_sequence_length, cos_cache?, sin_cache?, position_ids?, attention_bias?, …):
/// outputs (output, present_key, present_value). Batch row `b` has `seqlens_k[b] + 1` tokens
/// in all; the new ones follow its `past_b = seqlens_k[b] + 1 − S` cached ones (0 for a first
/// prompt, `S > 1` and `S = total_sequence_length`), are written there into the present
/// state (whose length is the past's plus S, or the declared one) and attend the keys up to
/// their own position (the last `local_window_size` of them with a window). A `seqlens_k` that
/// puts the new tokens outside the state fails the run (`ONNXC_ERR_INDEX`).
pub fn group_query_attention(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    in_f32(ctx, group_query_attention_f32)
}

fn group_query_attention_f32(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let q = ctx.input(0)?;
    let (key, value) = (ctx.opt_input(1), ctx.opt_input(2));
    let (past_k, past_v) = (ctx.opt_input(3), ctx.opt_input(4));
    let (seqlens, total) = (ctx.input(5)?, ctx.input(6)?);
    let (cos, sin, pos_ids, attn_bias) = (
        ctx.opt_input(7),
        ctx.opt_input(8),
        ctx.opt_input(9),
        ctx.opt_input(10),
    );
    if (11..ctx.num_inputs()).any(|k| ctx.opt_input(k).is_some()) {
        return Err(ctx.unsupported("head_sink, quantized KV-cache scales or q/k norm weights"));
    }
    for (name, default) in [
        ("smooth_softmax", -1),
        ("qk_output", 0),
        ("sliding_window_cache", 0),
    ] {
        let v = ctx.attr_i_or(name, default)?;
        if v != default && !(name == "smooth_softmax" && v == 0) {
            return Err(ctx.unsupported(format!("attribute {name}={v}")));
        }
    }
    for name in ["k_quant_type", "v_quant_type"] {
        let s = ctx.attr_s_or(name, "NONE")?;
        if s != "NONE" {
            return Err(ctx.unsupported(format!("{name}={s} (quantized KV cache)")));
        }
    }
    f32_only(ctx, q, "query")?;
    let hq = ctx
        .attr_i("num_heads")?
        .ok_or_else(|| ctx.err("attribute 'num_heads' is required"))?;
    let hkv = ctx
        .attr_i("kv_num_heads")?
        .ok_or_else(|| ctx.err("attribute 'kv_num_heads' is required"))?;
    if hq < 1 || hkv < 1 || hq % hkv != 0 {
        return Err(ctx.err(format!(
            "num_heads {hq} must be a positive multiple of kv_num_heads {hkv}"
        )));
    }
    let qs = ctx.known_shape(q)?;
    if qs.len() != 3 {
        return Err(ctx.err(format!(
            "query has shape {qs:?}; it must be (batch, seq, hidden)"
        )));
    }
    let (b, s) = (qs[0], qs[1]);
    let (q3, k3, v3) = match (key, value) {
        (Some(k), Some(val)) => (q, k, val),
        (None, None) => {
            if qs[2] % (hq + 2 * hkv) != 0 {
                return Err(ctx.err("packed QKV's hidden size does not split into the heads"));
            }
            let d = qs[2] / (hq + 2 * hkv);
            (
                last_slice(ctx, q, 0, hq * d)?,
                last_slice(ctx, q, hq * d, hkv * d)?,
                last_slice(ctx, q, (hq + hkv) * d, hkv * d)?,
            )
        }
        _ => return Err(ctx.err("key and value must be given together")),
    };
    let d = ctx.known_shape(q3)?[2] / hq;
    for (x, what) in [(k3, "key"), (v3, "value")] {
        f32_only(ctx, x, what)?;
        let xs = ctx.known_shape(x)?;
        if xs != [b, s, hkv * d] {
            return Err(ctx.err(format!(
                "{what} has shape {xs:?}; it must be [{b}, {s}, {}]",
                hkv * d
            )));
        }
    }
    // past_b = (first prompt ? 0 : seqlens_k[b] + 1 − S), checked into [0, P].
    build::expect_types(ctx, seqlens, "seqlens_k", &[DType::I32])?;
    build::expect_types(ctx, total, "total_sequence_length", &[DType::I32])?;
    if ctx.known_shape(seqlens)? != [b] || ctx.known_shape(total)?.iter().product::<i64>() != 1 {
        return Err(ctx.err(format!(
            "seqlens_k must be [{b}] and total_sequence_length one element"
        )));
    }
    let plen = match past_k {
        Some(p) => {
            if past_v.is_none() {
                return Err(ctx.err("past_key and past_value must be given together"));
            }
            let ps = ctx.known_shape(p)?;
            if ps.len() != 4 || ps[0] != b || ps[1] != hkv || ps[3] != d {
                return Err(ctx.err(format!(
                    "past_key has shape {ps:?}; it must be [{b}, {hkv}, past_length, {d}]"
                )));
            }
            ps[2]
        }
        None => 0,
    };
    let present_len = match ctx.declared.get(1).cloned().flatten() {
        Some((_, sh)) if sh.len() == 4 => sh[2],
        _ => plen + s,
    };
    if present_len < s || present_len < plen {
        return Err(ctx.err(format!(
            "the present state's declared length {present_len} is shorter than the past ({plen}) or the new tokens ({s})"
        )));
    }
    let tr = ctx.rank(total);
    let first_prompt = expr::and(
        expr::konst(DType::Bool, Scalar::B(s > 1)),
        expr::binary(
            BinOp::Eq,
            expr::cast(expr::load(DType::I32, 1, vec![expr::i(0); tr]), DType::I64),
            expr::i(s),
        ),
    );
    let from_lens = expr::sub(
        expr::cast(expr::load(DType::I32, 0, vec![v(0)]), DType::I64),
        expr::i(s - 1),
    );
    let past_b = expr::select(first_prompt, expr::i(0), from_lens);
    let limit = plen.min(present_len - s);
    let pb = ctx.map(
        DType::I64,
        shape_from(&[b]),
        vec![seqlens, total],
        transformer::check_non_negative(past_b, limit + 1),
    )?;
    let pb_at = |k: u32| expr::clamp(expr::load(DType::I64, k, vec![v(0)]), 0, limit);
    // Rotary embedding of the new queries and keys at their absolute positions.
    let mut q4 = split_heads(ctx, q3, hq)?;
    let mut k4 = split_heads(ctx, k3, hkv)?;
    let v4 = split_heads(ctx, v3, hkv)?;
    if ctx.attr_i_or("do_rotary", 0)? != 0 {
        let (Some(cos), Some(sin)) = (cos, sin) else {
            return Err(ctx.err("do_rotary=1 needs cos_cache and sin_cache"));
        };
        let pos = match pos_ids {
            Some(p) => transformer::positions(ctx, p, b, s)?,
            None => ctx.map(
                DType::I64,
                shape_from(&[b, s]),
                vec![pb],
                expr::add(pb_at(0), v(1)),
            )?,
        };
        let config = rotary::Rotary {
            num_heads: 0,
            rotary_dim: 2 * ctx.known_shape(cos)?.last().copied().unwrap_or(0),
            interleaved: ctx.attr_i_or("rotary_interleaved", 0)? != 0,
        };
        q4 = rotary::rotary_values(ctx, q4, cos, sin, Some(pos), config)?;
        k4 = rotary::rotary_values(ctx, k4, cos, sin, Some(pos), config)?;
    }
    // present[b, h, t] = new[t − past_b] inside the new tokens' span, past[t] before it (and
    // after it where the past reaches), zero elsewhere.
    let present = |ctx: &mut Ctx, past: Option<ValueId>, new: ValueId| -> Result<ValueId> {
        let mut inputs = vec![new, pb];
        let off = pb_at(1);
        let rel = expr::sub(v(2), off.clone());
        let inside = expr::and(
            expr::ge(rel.clone(), expr::i(0)),
            expr::lt(rel.clone(), expr::i(s)),
        );
        let new_l = expr::load(
            DType::F32,
            0,
            vec![v(0), v(1), expr::clamp(rel, 0, s - 1), v(3)],
        );
        let other = match past {
            Some(p) if plen > 0 => {
                inputs.push(p);
                let in_past = expr::lt(v(2), expr::i(plen));
                let l = expr::load(
                    DType::F32,
                    2,
                    vec![v(0), v(1), expr::clamp(v(2), 0, plen - 1), v(3)],
                );
                expr::select(in_past, l, f32c(0.0))
            }
            _ => f32c(0.0),
        };
        let body = expr::select(inside, new_l, other);
        ctx.map(
            DType::F32,
            shape_from(&[b, hkv, present_len, d]),
            inputs,
            body,
        )
    };
    let pk = present(ctx, past_k, k4)?;
    let pv = present(ctx, past_v, v4)?;
    // Keys allowed for query i of row b: t ≤ past_b + i, and with a local window the last
    // `window` of them, t > past_b + i − window (onnxruntime's CPU kernel).
    let window = ctx.attr_i_or("local_window_size", -1)?;
    let mut inputs = vec![pb];
    let abs = expr::add(pb_at(0), v(2));
    let mut ok = expr::binary(BinOp::Le, v(3), abs.clone());
    if window >= 0 {
        ok = expr::and(ok, expr::ge(v(3), expr::sub(abs, expr::i(window - 1))));
    }
    let mut term = expr::select(ok, f32c(0.0), f32c(f64::NEG_INFINITY));
    let mut heads = 1;
    if let Some(bv) = attn_bias {
        build::expect_types(ctx, bv, "attention_bias", &[DType::F32])?;
        let bs = ctx.known_shape(bv)?;
        if bs.len() != 4
            || !(bs[0] == b || bs[0] == 1)
            || !(bs[1] == hq || bs[1] == 1)
            || bs[2] != s
            || bs[3] != present_len
        {
            return Err(ctx.err(format!(
                "attention_bias has shape {bs:?}; it must be [{b} or 1, {hq} or 1, {s}, {present_len}]"
            )));
        }
        heads = bs[1];
        inputs.push(bv);
        term = expr::binary(
            BinOp::Add,
            term,
            bload(
                DType::F32,
                1,
                &ctx.shape(bv),
                &shape_from(&[b, heads, s, present_len]),
            ),
        );
    }
    let mask = ctx.map(
        DType::F32,
        shape_from(&[b, heads, s, present_len]),
        inputs,
        term,
    )?;
    let scale = scale_attr(ctx, d)?;
    let softcap = ctx.attr_f_or("softcap", 0.0)?;
    let y = attend(ctx, q4, pk, pv, scale, softcap, Some(mask))?;
    Ok(vec![y, pk, pv])
}
