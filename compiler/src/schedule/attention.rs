//! Attention blocks fused into one kernel step (`kernels::Attention`).
//!
//! Exporters write scaled dot-product attention as `MatMul(Q, Kᵀ)`, a scale and an additive
//! mask, `Softmax` over the keys and `MatMul(·, V)`; after `views::absorb_transposes` and
//! `softmax_scale::fold` these are four steps (three without a mask): a product, a map
//! `α·s + bias` (or `s/c + bias`), the softmax kernel (its scale `β`) and a product. Run
//! so, a long sequence's scores (1 MB a head at 512) go through memory between every two of
//! them; the fused kernel keeps a block of query rows' scores in L2 from the first product
//! to the second (`onnxc_runtime::attention`).
//!
//! Matched when the scores, the scaled scores and the probabilities are each read by the
//! next step alone (not graph outputs), the products have no epilogue, the keys and values
//! are not constants (weights, better packed at compile time), the output batch dims are at
//! most two (`[batch, heads]`), and the bias is a plain load of a float32 value broadcast
//! along any dims but contiguous along the keys.

use super::softmax_scale::{scalar_factor, times_scalar};
use super::views::matmul_operand;
use super::{SValue, Schedule, Step, StepKind, Storage, SvId};
use crate::ir::DType;
use crate::ir::expr::{self, BinOp, E, ExprKind};
use crate::ir::interp::strides_of;
use crate::ir::tensor::Scalar;
use crate::kernels::{Attention, Softmax};
use onnxc_runtime::attention::AttentionParams;
use std::collections::HashSet;
use std::sync::Arc;

/// Replaces every matched block by one attention step at the second product's place.
pub fn fuse(s: &mut Schedule, outputs: &[SvId]) {
    let producer = s.producers();
    let reads = s.reads(outputs);
    let mut dropped: HashSet<usize> = HashSet::new();
    // Bias steps to run before step i.
    let mut before: Vec<(usize, Step)> = Vec::new();
    for i in 0..s.steps.len() {
        let Some(mut f) = block(s, &producer, &reads, i) else {
            continue;
        };
        if let Some(b) = f.bias {
            s.values.push(b.value);
            let v = s.values.len() - 1;
            f.step.inputs[3] = v;
            before.push((
                i,
                Step {
                    kind: StepKind::Map { body: b.body },
                    inputs: b.inputs,
                    output: v,
                    epilogue: None,
                    origins: b.origins,
                },
            ));
        }
        s.steps[i] = f.step;
        dropped.extend(f.parts);
    }
    if dropped.is_empty() {
        return;
    }
    let steps = std::mem::take(&mut s.steps);
    let mut before = before.into_iter().peekable();
    for (k, st) in steps.into_iter().enumerate() {
        while let Some((_, b)) = before.next_if(|(at, _)| *at == k) {
            s.steps.push(b);
        }
        if !dropped.contains(&k) {
            s.steps.push(st);
        }
    }
}

/// An attention block found: the step replacing its last product, the steps it absorbs, and
/// the map step computing its bias where the bias was an expression.
struct Fused {
    step: Step,
    parts: Vec<usize>,
    bias: Option<ComputedBias>,
}

/// A bias computed by a map step of its own, before the attention step.
struct ComputedBias {
    value: SValue,
    body: E,
    inputs: Vec<SvId>,
    /// The scores' map's nodes.
    origins: Vec<crate::ir::Origin>,
}

/// Where the attention step's bias comes from.
enum BiasValue {
    /// An existing value, loaded at this index by the scores' map.
    Loaded(SvId, Vec<E>),
    Computed(ComputedBias),
}

/// The map step computing `e` (a bias expression of `map`'s inputs over the scores' dims
/// `shape`) over the dims it depends on, the others of extent 1.
fn bias_step(s: &Schedule, map: &Step, e: &E, shape: &[i64]) -> ComputedBias {
    let mut used = Vec::new();
    expr::used_inputs(e, &mut used);
    used.sort_unstable();
    let mut renumber = vec![0u32; map.inputs.len()];
    for (k, &u) in used.iter().enumerate() {
        renumber[u as usize] = k as u32;
    }
    let dims: Vec<i64> = shape
        .iter()
        .enumerate()
        .map(|(d, &x)| if expr::depends_on(e, d as u32) { x } else { 1 })
        .collect();
    ComputedBias {
        value: SValue {
            name: format!("{}/bias", s.values[map.output].name),
            dtype: DType::F32,
            shape: dims,
            storage: Storage::Arena(0),
        },
        body: expr::remap_inputs(e, &renumber),
        inputs: used.iter().map(|&u| map.inputs[u as usize]).collect(),
        origins: map.origins.clone(),
    }
}

/// The attention step replacing step `i` (the product with the values) and the steps it
/// absorbs, if `i` ends an attention block.
fn block(s: &Schedule, producer: &[Option<usize>], reads: &[usize], i: usize) -> Option<Fused> {
    let pv = &s.steps[i];
    let StepKind::MatMul { op: m2, views: v2 } = &pv.kind else {
        return None;
    };
    if m2.trans_a || v2[0].is_some() || !bare_f32_product(s, pv) {
        return None;
    }
    // An intermediate: an arena value of float32 only the next step reads.
    let inner = |v: SvId| {
        reads[v] == 1
            && matches!(s.values[v].storage, Storage::Arena(_))
            && s.values[v].dtype == DType::F32
    };
    let probs = pv.inputs[0];
    let sm = producer[probs].filter(|_| inner(probs))?;
    let StepKind::Kernel(k) = &s.steps[sm].kind else {
        return None;
    };
    let &Softmax {
        scale: beta,
        zero_inf_rows,
    } = k.downcast::<Softmax>()?;
    let x = s.steps[sm].inputs[0];
    let px = producer[x].filter(|_| inner(x))?;
    let shape = &s.values[x].shape;
    let rank = shape.len();
    let (qk, alpha, bias, gamma, mut parts) = match &s.steps[px].kind {
        StepKind::MatMul { .. } => (px, 1.0, None, 1.0, vec![sm]),
        StepKind::Map { body } => {
            let map = &s.steps[px];
            if map.epilogue.is_some() {
                return None;
            }
            let scores = |input: u32| {
                let v = map.inputs[input as usize];
                inner(v)
                    && s.values[v].shape == *shape
                    && producer[v]
                        .is_some_and(|p| matches!(s.steps[p].kind, StepKind::MatMul { .. }))
            };
            let f = scaled_scores(body, s, &map.inputs, rank, &scores)?;
            let qk = producer[map.inputs[f.scores as usize]]?;
            // A load the kernel can read through strides, or a map step of its own.
            let bias = f.bias.map(|e| match &e.kind {
                ExprKind::Load { input, index }
                    if load_strides(&s.values[map.inputs[*input as usize]].shape, index, shape)
                        .is_some() =>
                {
                    BiasValue::Loaded(map.inputs[*input as usize], index.clone())
                }
                _ => BiasValue::Computed(bias_step(s, map, &e, shape)),
            });
            (qk, f.alpha, bias, f.gamma, vec![px, sm])
        }
        _ => return None,
    };
    let qk_step = &s.steps[qk];
    let StepKind::MatMul { op: m1, views: v1 } = &qk_step.kind else {
        return None;
    };
    // Constant keys or values are weights (a classifier's softmax between two layers), which
    // the products pack at compile time.
    let constant = |v: SvId| matches!(s.values[s.root(v)].storage, Storage::Const(_));
    let beta = (beta as f64 * gamma) as f32;
    let valid = bare_f32_product(s, qk_step)
        && alpha.is_finite()
        && beta > 0.0
        && beta.is_finite()
        && !constant(qk_step.inputs[1])
        && !constant(pv.inputs[1]);
    if !valid {
        return None;
    }
    let out_shape = &s.values[pv.output].shape;
    if !(2..=4).contains(&rank)
        || out_shape.len() != rank
        || out_shape[..rank - 2] != shape[..rank - 2]
    {
        return None;
    }
    let nb = rank - 2;
    let batch = pad2(&shape[..nb], 1);
    let (m, n, dv) = (shape[rank - 2], shape[rank - 1], out_shape[rank - 1]);
    // Each operand as [batch, head, row, column] strides: Q as m × dk, K as n × dk, V as
    // n × dv (the products' transpose flags swap their last two dims).
    let (q_shape, q_st) = matmul_operand(s, qk_step, v1, 0);
    let (k_shape, k_st) = matmul_operand(s, qk_step, v1, 1);
    let (v_shape, v_st) = matmul_operand(s, pv, v2, 1);
    let matrix = |shape: &[i64], st: &[i64], swap: bool| {
        let r = shape.len();
        let (rows, cols) = if swap {
            (st[r - 1], st[r - 2])
        } else {
            (st[r - 2], st[r - 1])
        };
        let b = batch_strides(shape, st, nb)?;
        Some([b[0], b[1], rows, cols])
    };
    let q = matrix(&q_shape, &q_st, m1.trans_a)?;
    // op(B) of the first product is dk × n: K's rows are its columns.
    let k = matrix(&k_shape, &k_st, !m1.trans_b)?;
    let v = matrix(&v_shape, &v_st, m2.trans_b)?;
    let dk = if m1.trans_a {
        q_shape[q_shape.len() - 2]
    } else {
        q_shape[q_shape.len() - 1]
    };
    let out_st = strides_of(out_shape);
    let out = [pad2(&out_st[..nb], 0), [out_st[nb], out_st[nb + 1]]].concat();
    let bias_strides = match &bias {
        Some(BiasValue::Loaded(b, index)) => Some(load_strides(&s.values[*b].shape, index, shape)?),
        Some(BiasValue::Computed(c)) => {
            let st: Vec<i64> = strides_of(&c.value.shape)
                .iter()
                .zip(&c.value.shape)
                .map(|(&st, &d)| if d == 1 { 0 } else { st })
                .collect();
            let b = pad2(&st[..nb], 0);
            Some([b[0], b[1], st[nb], st[nb + 1]])
        }
        None => None,
    };
    let us = |a: &[i64]| -> Option<[usize; 4]> {
        let v: Vec<usize> = a
            .iter()
            .map(|&x| usize::try_from(x).ok())
            .collect::<Option<_>>()?;
        v.try_into().ok()
    };
    let params = AttentionParams {
        batch: [
            usize::try_from(batch[0]).ok()?,
            usize::try_from(batch[1]).ok()?,
        ],
        m: usize::try_from(m).ok()?,
        n: usize::try_from(n).ok()?,
        dk: usize::try_from(dk).ok()?,
        dv: usize::try_from(dv).ok()?,
        q: us(&q)?,
        k: us(&k)?,
        v: us(&v)?,
        bias: match bias_strides {
            Some(b) => Some(us(&b)?),
            None => None,
        },
        out: us(&out)?,
        zero_inf_rows,
    };
    // The kernel's own checks (contiguous rows or columns, sizes) decide what it runs.
    AttentionParams::decode(&params.encode()).ok()?;
    let mut inputs = vec![qk_step.inputs[0], qk_step.inputs[1], pv.inputs[1]];
    let mut computed = None;
    match bias {
        Some(BiasValue::Loaded(b, _)) => inputs.push(b),
        // Input 3 is set when the bias's value exists (`fuse`).
        Some(BiasValue::Computed(c)) => {
            inputs.push(SvId::MAX);
            computed = Some(c);
        }
        None => {}
    }
    let mut origins = qk_step.origins.clone();
    for &p in &parts {
        origins.extend(s.steps[p].origins.iter().cloned());
    }
    origins.extend(pv.origins.iter().cloned());
    // One node (ONNX Attention) made every step: name it once.
    origins.dedup();
    parts.push(qk);
    let step = Step {
        kind: StepKind::Kernel(Arc::new(Attention {
            params,
            alpha: alpha as f32,
            beta,
        })),
        inputs,
        output: pv.output,
        epilogue: None,
        origins,
    };
    Some(Fused {
        step,
        parts,
        bias: computed,
    })
}

/// A float32 matmul step of two operands and no epilogue.
fn bare_f32_product(s: &Schedule, st: &Step) -> bool {
    st.epilogue.is_none() && st.inputs.len() == 2 && s.values[st.output].dtype == DType::F32
}

/// `dims` (at most two) padded in front with `fill` to two.
fn pad2(dims: &[i64], fill: i64) -> [i64; 2] {
    match dims {
        [] => [fill, fill],
        [a] => [fill, *a],
        [a, b] => [*a, *b],
        _ => [fill, fill],
    }
}

/// The strides of an operand's batch dims over the output's `nb` batch dims, padded to two:
/// numpy broadcasting from the right, 0 where the operand has no such dim or extent 1.
fn batch_strides(shape: &[i64], strides: &[i64], nb: usize) -> Option<[i64; 2]> {
    let r = shape.len();
    if r < 2 || r - 2 > nb {
        return None;
    }
    let lead = nb - (r - 2);
    let b: Vec<i64> = (0..nb)
        .map(|d| {
            if d < lead || shape[d - lead] == 1 {
                0
            } else {
                strides[d - lead]
            }
        })
        .collect();
    Some(pad2(&b, 0))
}

/// What a map makes of the scores before the softmax: `γ·(α·s + bias)`.
struct Scaled {
    /// The scores' input.
    scores: u32,
    alpha: f64,
    /// A float32 expression of the map's inputs but the scores.
    bias: Option<E>,
    /// A factor of the masked scores, folded into the softmax's scale.
    gamma: f64,
}

/// The map body `α·s + bias` (either order; `s/c` for `α = 1/c`; `s` alone for α = 1; no
/// bias: the scaled scores alone), or `(s + bias)·γ` (`/ (1/γ)`) for γ in (0, 1], where `s`
/// is an identity load of an input `scores` accepts and `bias` a float32 expression that
/// does not read the scores.
fn scaled_scores(
    body: &E,
    s: &Schedule,
    inputs: &[SvId],
    rank: usize,
    scores: &dyn Fn(u32) -> bool,
) -> Option<Scaled> {
    let identity = |e: &E| match &e.kind {
        ExprKind::Load { input, index }
            if super::layout::is_identity(index, rank) && scores(*input) =>
        {
            Some(*input)
        }
        _ => None,
    };
    let scaled = |e: &E| -> Option<(u32, f64)> {
        identity(e)
            .map(|x| (x, 1.0))
            .or_else(|| scalar_factor(e, s, inputs, rank).filter(|&(i, _)| scores(i)))
    };
    let bias = |e: &E, scores: u32| {
        let mut used = Vec::new();
        expr::used_inputs(e, &mut used);
        (e.dtype == DType::F32 && !used.contains(&scores)).then(|| e.clone())
    };
    // `α·s + bias` in either order.
    let masked = |e: &E| -> Option<(u32, f64, E)> {
        let ExprKind::Binary(BinOp::Add, a, b) = &e.kind else {
            return None;
        };
        let pick = |x: &E, y: &E| {
            let (i, alpha) = scaled(x)?;
            Some((i, alpha, bias(y, i)?))
        };
        pick(a, b).or_else(|| pick(b, a))
    };
    if let Some((scores, alpha)) = scaled(body) {
        return Some(Scaled {
            scores,
            alpha,
            bias: None,
            gamma: 1.0,
        });
    }
    if let Some((scores, alpha, bias)) = masked(body) {
        return Some(Scaled {
            scores,
            alpha,
            bias: Some(bias),
            gamma: 1.0,
        });
    }
    // `(s + bias)·γ`: as the softmax's own scale (`softmax_scale`), γ ≤ 1 keeps the product
    // finite wherever the sum is.
    let (inner, gamma) = times_scalar(body, s, inputs)?;
    let (scores, alpha, bias) = masked(inner)?;
    (alpha == 1.0 && gamma > 0.0 && gamma <= 1.0).then_some(Scaled {
        scores,
        alpha,
        bias: Some(bias),
        gamma,
    })
}

/// The strides over the scores' dims (`out`, as [batch, head, row, column]) of a load of a
/// contiguous value of `shape` at `index`: each index a distinct variable (a dim the bias
/// has) or zero (a broadcast dim of one).
fn load_strides(shape: &[i64], index: &[E], out: &[i64]) -> Option<[i64; 4]> {
    if index.len() != shape.len() {
        return None;
    }
    let contiguous = strides_of(shape);
    let r = out.len();
    let mut st = vec![0i64; r];
    let mut seen = vec![false; r];
    for (d, ix) in index.iter().enumerate() {
        match &ix.kind {
            ExprKind::Var(v) => {
                let v = *v as usize;
                if v >= r || seen[v] || shape[d] != out[v] {
                    return None;
                }
                seen[v] = true;
                st[v] = if shape[d] == 1 { 0 } else { contiguous[d] };
            }
            ExprKind::Const(Scalar::I(0)) if shape[d] == 1 => {}
            _ => return None,
        }
    }
    let b = pad2(&st[..r - 2], 0);
    Some([b[0], b[1], st[r - 2], st[r - 1]])
}
