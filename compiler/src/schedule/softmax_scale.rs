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

/// `body` is `in0[identity] · c` or `in0[identity] / c` (either operand order for the
/// product) for a scalar `c`, given as a literal or as a one-element constant `in1`:
/// the factor applied to `in0`.
fn scalar_factor(body: &E, s: &Schedule, inputs: &[SvId], rank: usize) -> Option<f64> {
    let ExprKind::Binary(op, a, b) = &body.kind else {
        return None;
    };
    let is_x = |e: &E| matches!(&e.kind, ExprKind::Load { input: 0, index } if super::layout::is_identity(index, rank));
    let scalar = |e: &E| -> Option<f64> {
        match &e.kind {
            ExprKind::Const(Scalar::F(c)) => Some(*c),
            ExprKind::Load { input, .. } if *input >= 1 => {
                let v = *inputs.get(*input as usize)?;
                let val = &s.values[s.root(v)];
                match &val.storage {
                    Storage::Const(t) if t.dtype == DType::F32 && t.data.len() == 4 => Some(
                        f32::from_le_bytes([t.data[0], t.data[1], t.data[2], t.data[3]]) as f64,
                    ),
                    _ => None,
                }
            }
            _ => None,
        }
    };
    match op {
        BinOp::Mul if is_x(a) => scalar(b),
        BinOp::Mul if is_x(b) => scalar(a),
        BinOp::Div if is_x(a) => scalar(b).map(|c| 1.0 / c),
        _ => None,
    }
}

/// Folds `softmax(map(x))` into `softmax(x)` with a scale where the map multiplies by a
/// scalar in (0, 1] and nothing else reads its output.
pub fn fold(s: &mut Schedule, outputs: &[SvId]) {
    let producer = s.producers();
    // Reads of each value by steps, views and graph outputs.
    let mut reads = vec![0usize; s.values.len()];
    for st in &s.steps {
        for &v in &st.inputs {
            reads[v] += 1;
        }
    }
    for v in &s.values {
        if let Storage::View(of) | Storage::Slice { of, .. } = v.storage {
            reads[of] += 1;
        }
    }
    for &o in outputs {
        reads[o] += 1;
    }
    let mut dropped: HashSet<usize> = HashSet::new();
    for i in 0..s.steps.len() {
        let StepKind::Kernel(k) = &s.steps[i].kind else {
            continue;
        };
        let Some(&Softmax { scale }) = k.downcast::<Softmax>() else {
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
        if m.epilogue.is_some()
            || !matches!(s.values[v].storage, Storage::Arena(_))
            || s.values[m.inputs[0]].dtype != DType::F32
            || s.values[m.inputs[0]].shape != s.values[v].shape
        {
            continue;
        }
        let Some(c) = scalar_factor(body, s, &m.inputs, s.values[v].shape.len()) else {
            continue;
        };
        let total = scale as f64 * c;
        if !(total > 0.0 && total <= 1.0 && (total as f32) > 0.0) {
            continue;
        }
        let x = m.inputs[0];
        s.steps[i].inputs[0] = x;
        s.steps[i].kind = StepKind::Kernel(std::sync::Arc::new(Softmax {
            scale: total as f32,
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
