//! Attention (opset 23–25): scaled dot-product attention with MHA/GQA/MQA heads, boolean or
//! additive masks, causal and sliding-window masking, KV cache (past/present), non-padded KV
//! lengths, softcap and the optional `qk_matmul_output`. Follows the onnx reference
//! implementation, including the zero output of fully masked rows. Float32 attention without
//! softcap runs its products on the GEMM and its softmax on the kernel (which the schedule
//! fuses into one attention step); the rest is written as reductions and maps.

use crate::error::Result;
use crate::frontend::build::{self, FLOATS};
use crate::frontend::ctx::Ctx;
use crate::frontend::ops::linalg;
use crate::ir::dim::Dim;
use crate::ir::expr::{self, BinOp, E, UnOp};
use crate::ir::graph::ReduceKind;
use crate::ir::{DType, Op, Scalar, TypeInfo, ValueId};

fn v(k: u32) -> E {
    expr::var(k)
}

/// [B, S, H·D] → [B, H, S, D].
fn split_heads(ctx: &mut Ctx, x: ValueId, heads: i64) -> Result<ValueId> {
    let d = ctx.known_shape(x)?;
    if heads < 1 || d[2] % heads != 0 {
        return Err(ctx.err(format!(
            "hidden size {} is not divisible by {heads} heads",
            d[2]
        )));
    }
    let r = ctx.reshape(
        x,
        vec![
            Dim::Known(d[0]),
            Dim::Known(d[1]),
            Dim::Known(heads),
            Dim::Known(d[2] / heads),
        ],
    )?;
    build::transpose(ctx, r, &[0, 2, 1, 3])
}

pub fn attention(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (q, k, vv) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    let dt = build::expect_types(ctx, q, "Q", FLOATS)?;
    let mask = ctx.opt_input(3);
    let past_k = ctx.opt_input(4);
    let past_v = ctx.opt_input(5);
    for (v, what) in [
        (Some(k), "K"),
        (Some(vv), "V"),
        (past_k, "past_key"),
        (past_v, "past_value"),
    ] {
        if let Some(v) = v
            && ctx.dtype(v) != dt
        {
            return Err(ctx.err(format!(
                "{what} is {} but Q is {dt}; they must have the same type",
                ctx.dtype(v)
            )));
        }
    }
    let nonpad = ctx.opt_input(6);
    if past_k.is_some() != past_v.is_some() {
        return Err(ctx.err("past_key and past_value must be given together"));
    }
    if nonpad.is_some() && past_k.is_some() {
        return Err(ctx.err("nonpad_kv_seqlen cannot be combined with past_key/past_value"));
    }
    let is_causal = ctx.attr_i_or("is_causal", 0)? != 0;
    let softcap = ctx.attr_f_or("softcap", 0.0)?;
    let mode = ctx.attr_i_or("qk_matmul_output_mode", 0)?;
    let left = ctx.attr_i_or("left_window_size", -1)?;
    let right = ctx.attr_i_or("right_window_size", -1)?;
    let rank = ctx.rank(q);
    if rank != ctx.rank(k) || rank != ctx.rank(vv) || !(rank == 3 || rank == 4) {
        return Err(ctx.err("Q, K and V must all be 3-D or all 4-D"));
    }
    let (q4, k4, v4) = if rank == 3 {
        let hq = ctx
            .attr_i("q_num_heads")?
            .ok_or_else(|| ctx.err("3-D inputs need attribute q_num_heads"))?;
        let hkv = ctx
            .attr_i("kv_num_heads")?
            .ok_or_else(|| ctx.err("3-D inputs need attribute kv_num_heads"))?;
        (
            split_heads(ctx, q, hq)?,
            split_heads(ctx, k, hkv)?,
            split_heads(ctx, vv, hkv)?,
        )
    } else {
        (q, k, vv)
    };
    let qs = ctx.known_shape(q4)?;
    let (b, hq, sq, dq) = (qs[0], qs[1], qs[2], qs[3]);
    // KV cache: present = concat(past, new) along the sequence axis.
    let cat = |ctx: &mut Ctx, past: Option<ValueId>, new: ValueId| -> Result<ValueId> {
        match past {
            None => Ok(new),
            Some(p) => {
                let (ps, ns) = (ctx.known_shape(p)?, ctx.known_shape(new)?);
                let mut s: Vec<Dim> = ns.iter().map(|&d| Dim::Known(d)).collect();
                s[2] = Dim::Known(ps[2] + ns[2]);
                let dt = ctx.dtype(new);
                ctx.add(Op::Concat { axis: 2 }, vec![p, new], TypeInfo::new(dt, s))
            }
        }
    };
    let pk = cat(ctx, past_k, k4)?;
    let pv = cat(ctx, past_v, v4)?;
    let ks = ctx.known_shape(pk)?;
    let vs = ctx.known_shape(pv)?;
    let (hkv, skv, dv) = (ks[1], ks[2], vs[3]);
    if ks[3] != dq || hkv < 1 || hq % hkv != 0 || vs[1] != hkv || vs[2] != skv {
        return Err(ctx.err(format!("incompatible shapes: Q {qs:?}, K {ks:?}, V {vs:?}")));
    }
    let rep = hq / hkv;
    let past_len = match past_k {
        Some(p) => ctx.known_shape(p)?[2],
        None => 0,
    };
    let scale = match ctx.attr_f("scale")? {
        Some(s) => s,
        None => 1.0 / (dq as f64).sqrt(),
    };
    let s = scale.sqrt();
    let ninf = expr::f(dt, f64::NEG_INFINITY);
    let zero = expr::f(dt, 0.0);
    // Additive bias over [B, Hq, Sq, Skv] (vars b, h, i, j).
    let mut inputs = Vec::new();
    // The bias's terms, added in order.
    let mut terms: Vec<E> = Vec::new();
    let offset: E = match (nonpad, past_k) {
        (Some(n), None) => {
            inputs.push(build::cast(ctx, n, DType::I64)?);
            expr::sub(expr::load(DType::I64, 0, vec![v(0)]), expr::i(sq))
        }
        _ => expr::i(past_len),
    };
    if let Some(m) = mask {
        let md = ctx.dtype(m);
        let ms = ctx.known_shape(m)?;
        let mr = ms.len();
        if !(1..=4).contains(&mr) {
            return Err(ctx.err(format!("attn_mask of rank {mr} is not supported")));
        }
        let mlen = ms[mr - 1];
        let k_idx = inputs.len() as u32;
        inputs.push(m);
        let full = [v(0), v(1), v(2), v(3)];
        let idx: Vec<E> = (0..mr)
            .map(|d| {
                let fd = 4 - mr + d;
                if d == mr - 1 {
                    expr::clamp(v(3), 0, (mlen - 1).max(0))
                } else if ms[d] == 1 {
                    expr::i(0)
                } else {
                    full[fd].clone()
                }
            })
            .collect();
        // A mask as long as the keys is read as it is; a shorter one masks the keys past it.
        let inside = expr::lt(v(3), expr::i(mlen));
        let term = if mlen >= skv && md == dt {
            let idx = idx
                .into_iter()
                .enumerate()
                .map(|(d, i)| if d == mr - 1 { v(3) } else { i })
                .collect();
            expr::load(md, k_idx, idx)
        } else if md == DType::Bool {
            expr::select(
                expr::and(inside, expr::load(DType::Bool, k_idx, idx)),
                zero.clone(),
                ninf.clone(),
            )
        } else {
            expr::select(
                inside,
                expr::cast(expr::load(md, k_idx, idx), dt),
                ninf.clone(),
            )
        };
        terms.push(term);
    }
    if is_causal {
        let allowed = expr::binary(BinOp::Le, v(3), expr::add(v(2), offset.clone()));
        terms.push(expr::select(allowed, zero.clone(), ninf.clone()));
    }
    if left >= 0 || right >= 0 {
        let diff = expr::sub(expr::add(v(2), offset.clone()), v(3));
        let mut ok = expr::konst(DType::Bool, Scalar::B(true));
        if left >= 0 {
            ok = expr::and(ok, expr::binary(BinOp::Le, diff.clone(), expr::i(left)));
        }
        if right >= 0 {
            ok = expr::and(
                ok,
                expr::binary(BinOp::Le, expr::unary(UnOp::Neg, diff), expr::i(right)),
            );
        }
        terms.push(expr::select(ok, zero.clone(), ninf.clone()));
    }
    if nonpad.is_some() {
        let ok = expr::lt(v(3), expr::load(DType::I64, 0, vec![v(0)]));
        terms.push(expr::select(ok, zero.clone(), ninf.clone()));
    }
    let biased = !terms.is_empty();
    let bias = terms
        .into_iter()
        .reduce(|a, t| expr::binary(BinOp::Add, a, t))
        .unwrap_or(zero.clone());
    let sh = |d: &[i64]| -> Vec<Dim> { d.iter().map(|&x| Dim::Known(x)).collect() };
    let full_shape = sh(&[b, hq, sq, skv]);
    if dt == DType::F32 && softcap == 0.0 {
        // Float32 without softcap: the products on the GEMM (`α·Q·Kᵀ` for the reference's
        // `(Q·√α)(K·√α)ᵀ`, rounded once) and the softmax on its kernel, fully masked rows
        // giving zeros; the schedule fuses the block into one attention kernel step
        // (`schedule::attention`). Grouped heads (1 < kv heads < q heads) take each key
        // head's `rep` query heads as one matrix of `rep·Sq` rows, the bias's head and row
        // read back from those rows.
        let grouped = rep > 1 && hkv > 1;
        let (qx, heads, rows) = if grouped {
            (ctx.reshape(q4, sh(&[b, hkv, rep * sq, dq]))?, hkv, rep * sq)
        } else {
            (q4, hq, sq)
        };
        let grid = sh(&[b, heads, rows, skv]);
        let raw = linalg::matmul_values(ctx, qx, pk, false, true)?;
        let scaled = expr::binary(BinOp::Mul, build::load_same(dt, 0, 4), expr::f(dt, scale));
        let (mut body, mut operands) = (scaled.clone(), vec![raw]);
        if biased {
            let after_raw: Vec<u32> = (1..=inputs.len() as u32).collect();
            let mut bias = expr::remap_inputs(&bias, &after_raw);
            if grouped {
                let head = expr::add(expr::mul(v(1), expr::i(rep)), expr::idiv(v(2), sq));
                bias = expr::substitute_vars(&bias, &[v(0), head, expr::imod(v(2), sq), v(3)]);
            }
            body = expr::binary(BinOp::Add, body, bias);
            operands.extend(inputs);
        }
        let with_bias = ctx.map(dt, grid.clone(), operands, body)?;
        let probs = ctx.add(
            Op::kernel(crate::kernels::Softmax {
                scale: 1.0,
                zero_inf_rows: true,
            }),
            vec![with_bias],
            TypeInfo::new(dt, grid.clone()),
        )?;
        let yx = linalg::matmul_values(ctx, probs, pv, false, false)?;
        let y4 = ctx.reshape(yx, sh(&[b, hq, sq, dv]))?;
        let y = if rank == 3 {
            let t = build::transpose(ctx, y4, &[0, 2, 1, 3])?;
            ctx.reshape(t, sh(&[b, sq, hq * dv]))?
        } else {
            y4
        };
        let qk = match mode {
            0 | 1 => ctx.map(dt, grid, vec![raw], scaled)?,
            2 => with_bias,
            3 => probs,
            other => {
                return Err(ctx.err(format!("qk_matmul_output_mode {other} is not defined")));
            }
        };
        let qk_out = ctx.reshape(qk, full_shape)?;
        return Ok(vec![y, pk, pv, qk_out]);
    }
    let bias_v = ctx.map(dt, full_shape.clone(), inputs, bias)?;
    // scores = (Q·s)(K·s)ᵀ, optionally soft-capped.
    let kh = expr::idiv(v(1), rep);
    let qk_body = expr::binary(
        BinOp::Mul,
        expr::round_to_storage(expr::binary(
            BinOp::Mul,
            expr::load(dt, 0, vec![v(0), v(1), v(2), v(4)]),
            expr::f(dt, s),
        )),
        expr::round_to_storage(expr::binary(
            BinOp::Mul,
            expr::load(dt, 1, vec![v(0), kh.clone(), v(3), v(4)]),
            expr::f(dt, s),
        )),
    );
    let mut scores = ctx.reduce(
        ReduceKind::Sum,
        vec![dq],
        dt,
        full_shape.clone(),
        vec![q4, pk],
        qk_body,
    )?;
    let raw = scores;
    if softcap > 0.0 {
        let body = expr::binary(
            BinOp::Mul,
            expr::unary(
                UnOp::Tanh,
                expr::binary(BinOp::Div, build::load_same(dt, 0, 4), expr::f(dt, softcap)),
            ),
            expr::f(dt, softcap),
        );
        scores = ctx.map(dt, full_shape.clone(), vec![scores], body)?;
    }
    let capped = scores;
    let with_bias = ctx.map(
        dt,
        full_shape.clone(),
        vec![scores, bias_v],
        expr::binary(
            BinOp::Add,
            build::load_same(dt, 0, 4),
            build::load_same(dt, 1, 4),
        ),
    )?;
    // Softmax along j with the reference's guards for fully masked rows.
    let row = sh(&[b, hq, sq, 1]);
    let at_row = vec![v(0), v(1), v(2), expr::i(0)];
    let m = ctx.reduce(
        ReduceKind::Max,
        vec![skv],
        dt,
        row.clone(),
        vec![with_bias],
        expr::load(dt, 0, vec![v(0), v(1), v(2), v(4)]),
    )?;
    let bias_max = ctx.reduce(
        ReduceKind::Max,
        vec![skv],
        dt,
        row.clone(),
        vec![bias_v],
        expr::load(dt, 0, vec![v(0), v(1), v(2), v(4)]),
    )?;
    let safe = |e: E| expr::select(expr::unary(UnOp::IsNegInf, e.clone()), expr::f(dt, 0.0), e);
    let esum = ctx.reduce(
        ReduceKind::Sum,
        vec![skv],
        dt,
        row.clone(),
        vec![with_bias, m],
        // Each step rounded to the storage type as the reference's 16-bit numpy does.
        expr::round_to_storage(expr::unary(
            UnOp::Exp,
            expr::round_to_storage(expr::binary(
                BinOp::Sub,
                expr::load(dt, 0, vec![v(0), v(1), v(2), v(4)]),
                safe(expr::load(dt, 1, vec![v(0), v(1), v(2), expr::i(0)])),
            )),
        )),
    )?;
    let ssum = expr::load(dt, 2, at_row.clone());
    let ssum = expr::select(
        expr::binary(BinOp::Eq, ssum.clone(), expr::f(dt, 0.0)),
        expr::f(dt, 1.0),
        ssum,
    );
    let p = expr::binary(
        BinOp::Div,
        expr::round_to_storage(expr::unary(
            UnOp::Exp,
            expr::round_to_storage(expr::binary(
                BinOp::Sub,
                build::load_same(dt, 0, 4),
                safe(expr::load(dt, 1, at_row.clone())),
            )),
        )),
        ssum,
    );
    let masked_row = expr::unary(UnOp::IsNegInf, expr::load(dt, 3, at_row));
    let probs = ctx.map(
        dt,
        full_shape.clone(),
        vec![with_bias, m, esum, bias_max],
        expr::select(masked_row, expr::f(dt, 0.0), p),
    )?;
    // Y = P·V.
    let y_body = expr::binary(
        BinOp::Mul,
        expr::load(dt, 0, vec![v(0), v(1), v(2), v(4)]),
        expr::load(dt, 1, vec![v(0), kh, v(4), v(3)]),
    );
    let y4 = ctx.reduce(
        ReduceKind::Sum,
        vec![skv],
        dt,
        sh(&[b, hq, sq, dv]),
        vec![probs, pv],
        y_body,
    )?;
    let y = if rank == 3 {
        let t = build::transpose(ctx, y4, &[0, 2, 1, 3])?;
        ctx.reshape(t, sh(&[b, sq, hq * dv]))?
    } else {
        y4
    };
    let qk_out = match mode {
        0 => {
            if softcap > 0.0 {
                capped
            } else {
                raw
            }
        }
        1 => capped,
        2 => with_bias,
        3 => probs,
        other => return Err(ctx.err(format!("qk_matmul_output_mode {other} is not defined"))),
    };
    Ok(vec![y, pk, pv, qk_out])
}
