//! A positive scalar multiply folded into the softmax that reads it.
//!
//! Attention scales its scores before the softmax (`Softmax(Q·Kᵀ · 1/√d)`, or `/ √d`): as a
//! step of its own that scale reads and writes the whole score tensor once more. The softmax
//! kernel computes `exp(s·(x − max x))` for a positive `s` at the cost of one multiply per
//! vector, which equals the softmax of `s·x` (`max(s·x) = s·max(x)` when `s > 0`), so the map is
//! dropped when nothing else reads it.
//!
//! Only for `s ≤ 1` (attention's `1/√d`): then `s·x` cannot overflow where `x` is finite, and
//! the two agree on every input, inf and NaN included. A larger `s` can take `s·x` to +∞,
//! where the graph's softmax gives NaN (`∞ − ∞`) and the folded one a finite result.

use super::{Schedule, StepKind, Storage, SvId};
use crate::ir::DType;
use crate::ir::expr::{BinOp, E, ExprKind};
use crate::ir::tensor::Scalar;
use crate::kernels::Softmax;
use std::collections::HashSet;

/// The value of `e` when it is a scalar: a float literal, or a load of a one-element float32
/// constant input.
pub(super) fn scalar(e: &E, s: &Schedule, inputs: &[SvId]) -> Option<f64> {
    match &e.kind {
        ExprKind::Const(Scalar::F(c)) => Some(*c),
        ExprKind::Load { input, .. } => {
            let v = *inputs.get(*input as usize)?;
            match &s.values[s.root(v)].storage {
                Storage::Const(t) if t.dtype == DType::F32 && t.data.len() == 4 => {
                    Some(f32::from_le_bytes([t.data[0], t.data[1], t.data[2], t.data[3]]) as f64)
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// `body` is `x · c` or `x / c` (either operand order for the product) for a scalar `c`
/// (`scalar`): `x` and the factor applied to it.
pub(super) fn times_scalar<'a>(body: &'a E, s: &Schedule, inputs: &[SvId]) -> Option<(&'a E, f64)> {
    match &body.kind {
        ExprKind::Binary(BinOp::Mul, a, b) => match scalar(b, s, inputs) {
            Some(c) => Some((a, c)),
            None => Some((b, scalar(a, s, inputs)?)),
        },
        ExprKind::Binary(BinOp::Div, a, b) => Some((a, 1.0 / scalar(b, s, inputs)?)),
        _ => None,
    }
}

/// `body` is `in_x[identity] · c` or `in_x[identity] / c` (`times_scalar`): the input `x`
/// and the factor applied to it.
pub(super) fn scalar_factor(
    body: &E,
    s: &Schedule,
    inputs: &[SvId],
    rank: usize,
) -> Option<(u32, f64)> {
    let (x, c) = times_scalar(body, s, inputs)?;
    match &x.kind {
        ExprKind::Load { input, index } if super::layout::is_identity(index, rank) => {
            Some((*input, c))
        }
        _ => None,
    }
}

/// Folds `softmax(map(x))` into `softmax(x)` with a scale where the map multiplies by a
/// scalar in (0, 1] and nothing else reads its output.
pub fn fold(s: &mut Schedule, outputs: &[SvId]) {
    let producer = s.producers();
    let reads = s.reads(outputs);
    let mut dropped: HashSet<usize> = HashSet::new();
    for i in 0..s.steps.len() {
        let StepKind::Kernel(k) = &s.steps[i].kind else {
            continue;
        };
        let Some(&Softmax {
            scale,
            zero_inf_rows,
        }) = k.downcast::<Softmax>()
        else {
            continue;
        };
        let v = s.steps[i].inputs[0];
        let Some(p) = producer[v] else {
            continue;
        };
        if reads[v] != 1 || s.values[s.steps[i].output].dtype != DType::F32 {
            continue;
        }
        let m = &s.steps[p];
        let StepKind::Map { body } = &m.kind else {
            continue;
        };
        let Some((x, c)) = scalar_factor(body, s, &m.inputs, s.values[v].shape.len()) else {
            continue;
        };
        let x = m.inputs[x as usize];
        if m.epilogue.is_some()
            || !matches!(s.values[v].storage, Storage::Arena(_))
            || s.values[x].dtype != DType::F32
            || s.values[x].shape != s.values[v].shape
        {
            continue;
        }
        let total = scale as f64 * c;
        if !(total > 0.0 && total <= 1.0 && (total as f32) > 0.0) {
            continue;
        }
        s.steps[i].inputs[0] = x;
        s.steps[i].kind = StepKind::Kernel(std::sync::Arc::new(Softmax {
            scale: total as f32,
            zero_inf_rows,
        }));
        let origins = s.steps[p].origins.clone();
        s.steps[i].origins.splice(0..0, origins);
        dropped.insert(p);
    }
    if dropped.is_empty() {
        return;
    }
    let mut k = 0;
    s.steps.retain(|_| {
        let keep = !dropped.contains(&k);
        k += 1;
        keep
    });
}
