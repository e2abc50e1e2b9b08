//! The opset-27 ops of recurrent sequence models that carry a state from call to call
//! (Mamba, Gated DeltaNet): CausalConvWithState and LinearAttention.
//!
//! CausalConvWithState is the pattern it replaces, built from core ops: the past state
//! (zeros when absent) concatenated before the input, a depthwise convolution without
//! padding, an optional SiLU, and the last `k − 1` positions as the new state.
//! LinearAttention's recurrence runs on one runtime kernel (`kernels::LinearAttention`) in
//! float32, the other float types cast around it.

use crate::error::Result;
use crate::frontend::build::{self, FLOATS};
use crate::frontend::ctx::Ctx;
use crate::frontend::ops::shape::concat_parts;
use crate::ir::dim::shape_from;
use crate::ir::expr::{self, BinOp, UnOp};
use crate::ir::graph::ConvOp;
use crate::ir::{DType, Op, Scalar, TypeInfo, ValueId};
use onnxc_runtime::linear_attention::{LinearAttentionParams, Rule};

pub fn causal_conv_with_state(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (x, w) = (ctx.input(0)?, ctx.input(1)?);
    let dt = build::expect_types(ctx, x, "input", FLOATS)?;
    for (v, what) in [
        (Some(w), "weight"),
        (ctx.opt_input(2), "bias"),
        (ctx.opt_input(3), "past_state"),
    ] {
        if let Some(v) = v
            && ctx.dtype(v) != dt
        {
            return Err(ctx.err(format!("{what} is {} but input is {dt}", ctx.dtype(v))));
        }
    }
    let activation = ctx.attr_s_or("activation", "none")?;
    let silu = match activation.as_str() {
        "none" => false,
        "silu" | "swish" => true,
        a => {
            return Err(ctx.err(format!(
                "activation '{a}' is not one of 'none', 'silu', 'swish'"
            )));
        }
    };
    let xs = ctx.known_shape(x)?;
    let ws = ctx.known_shape(w)?;
    let [b, c, l] = xs[..] else {
        return Err(ctx.err(format!(
            "input has shape {xs:?}; it must be (batch_size, channels, length)"
        )));
    };
    if ws.len() != 3 || ws[0] != c || ws[1] != 1 || ws[2] < 1 {
        return Err(ctx.err(format!(
            "weight has shape {ws:?}; it must be ({c}, 1, k) with k ≥ 1 for the input's {c} channels"
        )));
    }
    let k = ws[2];
    let bias = ctx.opt_input(2);
    if let Some(bv) = bias {
        let bs = ctx.known_shape(bv)?;
        if bs != [c] {
            return Err(ctx.err(format!("bias has shape {bs:?}; it must be [{c}]")));
        }
    }
    let past = match ctx.opt_input(3) {
        Some(p) => {
            let ps = ctx.known_shape(p)?;
            if ps != [b, c, k - 1] {
                return Err(ctx.err(format!(
                    "past_state has shape {ps:?}; it must be [{b}, {c}, {}] (k − 1 positions)",
                    k - 1
                )));
            }
            p
        }
        None => ctx.map(
            dt,
            shape_from(&[b, c, k - 1]),
            vec![],
            expr::konst(dt, Scalar::zero(dt)),
        )?,
    };
    let padded_len = l + k - 1;
    let padded = concat_parts(ctx, vec![past, x], 2, dt, shape_from(&[b, c, padded_len]))?;
    let op = ConvOp {
        group: c,
        strides: vec![1],
        dilations: vec![1],
        pads_begin: vec![0],
        pads_end: vec![0],
        exact: false,
    };
    let mut inputs = vec![padded, w];
    inputs.extend(bias);
    let conv = ctx.conv(op, inputs, TypeInfo::new(dt, shape_from(&[b, c, l])))?;
    let output = if silu {
        // x·sigmoid(x) in float32, rounded once to the input's type (as the reference).
        build::unary(ctx, conv, dt, |v| {
            let f = build::cast_expr(v, DType::F32, false);
            let y = expr::binary(BinOp::Mul, f.clone(), expr::unary(UnOp::Sigmoid, f));
            build::cast_expr(y, dt, false)
        })?
    } else {
        conv
    };
    // The new state: the last k − 1 positions of the padded input.
    let vars: Vec<_> = (0..3).map(expr::var).collect();
    let body = expr::load(
        dt,
        0,
        vec![
            vars[0].clone(),
            vars[1].clone(),
            expr::add(vars[2].clone(), expr::i(l)),
        ],
    );
    let present = ctx.map(dt, shape_from(&[b, c, k - 1]), vec![padded], body)?;
    Ok(vec![output, present])
}

pub fn linear_attention(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (q, k, v) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    let (past, decay, beta) = (ctx.opt_input(3), ctx.opt_input(4), ctx.opt_input(5));
    let dt = build::expect_types(ctx, q, "query", FLOATS)?;
    for (x, what) in [
        (Some(k), "key"),
        (Some(v), "value"),
        (decay, "decay"),
        (beta, "beta"),
    ] {
        if let Some(x) = x
            && ctx.dtype(x) != dt
        {
            return Err(ctx.err(format!("{what} is {} but query is {dt}", ctx.dtype(x))));
        }
    }
    let state_dt = match past {
        Some(p) => build::expect_types(ctx, p, "past_state", FLOATS)?,
        None => dt,
    };
    let heads = |ctx: &Ctx, name: &str| -> Result<i64> {
        match ctx.attr_i(name)? {
            Some(h) if h >= 1 => Ok(h),
            Some(h) => Err(ctx.err(format!("{name} is {h}; it must be at least 1"))),
            None => Err(ctx.err(format!("attribute {name} is required"))),
        }
    };
    let (hq, hkv) = (heads(ctx, "q_num_heads")?, heads(ctx, "kv_num_heads")?);
    if hq % hkv != 0 {
        return Err(ctx.err(format!(
            "q_num_heads {hq} is not a multiple of kv_num_heads {hkv}"
        )));
    }
    let rule_name = ctx.attr_s_or("update_rule", "gated_delta")?;
    let rule = Rule::from_name(&rule_name).ok_or_else(|| {
        ctx.err(format!(
            "update_rule '{rule_name}' is not one of 'linear', 'gated', 'delta', 'gated_delta'"
        ))
    })?;
    let (qs, ks, vs) = (
        ctx.known_shape(q)?,
        ctx.known_shape(k)?,
        ctx.known_shape(v)?,
    );
    let (&[b, t, qw], &[kb, kt, kw], &[vb, vt, vw]) = (qs.as_slice(), ks.as_slice(), vs.as_slice())
    else {
        return Err(ctx.err(format!(
            "query {qs:?}, key {ks:?} and value {vs:?} must be rank 3 (batch, time, heads · head size)"
        )));
    };
    if qw % hq != 0 || vw % hkv != 0 {
        return Err(ctx.err(format!(
            "query's last dim {qw} must divide into {hq} heads and value's {vw} into {hkv}"
        )));
    }
    let (dk, dv) = (qw / hq, vw / hkv);
    if (kb, kt, kw) != (b, t, hkv * dk) || (vb, vt) != (b, t) || dk < 1 || dv < 1 {
        return Err(ctx.err(format!(
            "key {ks:?} and value {vs:?} do not fit query {qs:?} with {hq} query and {hkv} \
             key/value heads (key must be [{b}, {t}, {}])",
            hkv * dk
        )));
    }
    if rule.gated() != decay.is_some() {
        return Err(ctx.err(format!(
            "update_rule '{rule_name}' {} the decay input",
            if rule.gated() { "requires" } else { "takes no" }
        )));
    }
    if rule.delta() != beta.is_some() {
        return Err(ctx.err(format!(
            "update_rule '{rule_name}' {} the beta input",
            if rule.delta() { "requires" } else { "takes no" }
        )));
    }
    let mut decay_per_key = false;
    if let Some(d) = decay {
        let ds = ctx.known_shape(d)?;
        decay_per_key = ds == [b, t, hkv * dk];
        if !decay_per_key && ds != [b, t, hkv] {
            return Err(ctx.err(format!(
                "decay has shape {ds:?}; it must be [{b}, {t}, {hkv}] (per head) or \
                 [{b}, {t}, {}] (per key dim)",
                hkv * dk
            )));
        }
    }
    let mut beta_per_head = false;
    if let Some(x) = beta {
        let bs = ctx.known_shape(x)?;
        beta_per_head = bs == [b, t, hkv];
        if !beta_per_head && bs != [b, t, 1] {
            return Err(ctx.err(format!(
                "beta has shape {bs:?}; it must be [{b}, {t}, {hkv}] or [{b}, {t}, 1]"
            )));
        }
    }
    if let Some(p) = past {
        let ps = ctx.known_shape(p)?;
        if ps != [b, hkv, dk, dv] {
            return Err(ctx.err(format!(
                "past_state has shape {ps:?}; it must be [{b}, {hkv}, {dk}, {dv}]"
            )));
        }
    }
    let scale = match ctx.attr_f_or("scale", 0.0)? {
        0.0 => 1.0 / (dk as f64).sqrt(),
        s => s,
    } as f32;
    let u = |x: i64| x as usize;
    let params = LinearAttentionParams {
        b: u(b),
        t: u(t),
        hq: u(hq),
        hkv: u(hkv),
        dk: u(dk),
        dv: u(dv),
        rule,
        decay_per_key,
        beta_per_head,
        has_past: past.is_some(),
    };
    let mut operands = Vec::new();
    for x in [Some(q), Some(k), Some(v), past, decay, beta]
        .into_iter()
        .flatten()
    {
        operands.push(build::cast(ctx, x, DType::F32)?);
    }
    let out_len = b * t * hq * dv;
    let state_len = b * hkv * dk * dv;
    let both = ctx.add(
        Op::kernel(crate::kernels::LinearAttention { params, scale }),
        operands,
        TypeInfo::new(DType::F32, shape_from(&[out_len + state_len])),
    )?;
    // The two parts of the kernel's result, each cast to its type.
    let part = |ctx: &mut Ctx, at: i64, shape: &[i64], to: DType| -> Result<ValueId> {
        let n: i64 = shape.iter().product();
        let flat = ctx.map(
            DType::F32,
            shape_from(&[n]),
            vec![both],
            expr::load(DType::F32, 0, vec![expr::add(expr::var(0), expr::i(at))]),
        )?;
        let shaped = ctx.reshape(flat, shape_from(shape))?;
        build::cast(ctx, shaped, to)
    };
    let output = part(ctx, 0, &[b, t, hq * dv], dt)?;
    let present = part(ctx, out_len, &[b, hkv, dk, dv], state_dt)?;
    Ok(vec![output, present])
}
