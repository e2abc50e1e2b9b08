//! Transposes absorbed into the kernels that read them: matmuls, and conversions to the
//! channel-blocked layout.
//!
//! Attention blocks as exporters write them permute heads around every matmul:
//! `Reshape [b, s, h, d] → Transpose [0, 2, 1, 3]` for Q and V and `[0, 2, 3, 1]` for Kᵀ. As
//! steps of their own these transposes copy whole activations (Kᵀ's is a gather with a stride of
//! a row per element). The GEMM kernel reads any operand whose rows or columns are contiguous,
//! through a leading dimension and a per-batch offset, so a matmul can read the transpose's
//! input in place: the operand becomes a `StridedView` of it, and a transpose no other step
//! reads is dropped.

use super::{SValue, Schedule, Step, StepKind, Storage, StridedView, SvId};
use crate::ir::DType;
use crate::ir::expr::{E, ExprKind};
use crate::ir::tensor::Scalar;

/// The logical shape of a matmul step's operand `k` and the element strides of its dims in
/// the value `st.inputs[k]` (contiguous unless a transpose was absorbed).
pub fn matmul_operand(
    s: &Schedule,
    st: &Step,
    views: &[Option<StridedView>; 2],
    k: usize,
) -> (Vec<i64>, Vec<i64>) {
    match &views[k] {
        Some(v) => (v.shape.clone(), v.strides.clone()),
        None => {
            let shape = s.values[st.inputs[k]].shape.clone();
            let strides = crate::ir::interp::strides_of(&shape);
            (shape, strides)
        }
    }
}

/// How the GEMM kernel reads a `rows × cols` matrix whose element `(r, c)` is at
/// `r·rs + c·cs`: `(transposed, leading dimension)`, when the rows or the columns are
/// contiguous.
pub fn gemm_operand(rows: i64, cols: i64, rs: i64, cs: i64) -> Option<(bool, i64)> {
    if cs == 1 || cols == 1 {
        Some((false, if rows == 1 { 1 } else { rs }))
    } else if rs == 1 || rows == 1 {
        Some((true, cs))
    } else {
        None
    }
}

/// The view of a stored value of `src_shape` that a transpose body `in0[index]` reads, for an
/// output of `out_shape`: `None` unless every index is a distinct output variable or a zero
/// into a dimension of one, and every output dimension longer than one is read.
fn permutation_view(index: &[E], src_shape: &[i64], out_shape: &[i64]) -> Option<StridedView> {
    if index.len() != src_shape.len() {
        return None;
    }
    let src_strides = crate::ir::interp::strides_of(src_shape);
    let mut strides = vec![0i64; out_shape.len()];
    let mut seen = vec![false; out_shape.len()];
    for (d, ix) in index.iter().enumerate() {
        match &ix.kind {
            ExprKind::Var(v) => {
                let v = *v as usize;
                if v >= out_shape.len() || seen[v] || out_shape[v] != src_shape[d] {
                    return None;
                }
                seen[v] = true;
                strides[v] = src_strides[d];
            }
            ExprKind::Const(Scalar::I(0)) if src_shape[d] == 1 => {}
            _ => return None,
        }
    }
    if (0..out_shape.len()).any(|v| !seen[v] && out_shape[v] != 1) {
        return None;
    }
    Some(StridedView {
        shape: out_shape.to_vec(),
        strides,
    })
}

/// Whether an f32 matmul can read an operand through `view` (`trans`: the operand's own
/// transpose flag).
fn gemm_reads(view: &StridedView, trans: bool) -> bool {
    let r = view.shape.len();
    if r < 2 {
        return false;
    }
    let (mut rows, mut cols) = (view.shape[r - 2], view.shape[r - 1]);
    let (mut rs, mut cs) = (view.strides[r - 2], view.strides[r - 1]);
    if trans {
        std::mem::swap(&mut rows, &mut cols);
        std::mem::swap(&mut rs, &mut cs);
    }
    gemm_operand(rows, cols, rs, cs).is_some()
}

/// The f32 value a pure-permutation map step writing `m` reads, and the view of it that
/// the map's output is: `None` unless `m` is written by a one-input map whose body is a
/// single load at permuted variables (`permutation_view`).
fn permuted_source(
    s: &Schedule,
    producer: &[Option<usize>],
    m: SvId,
) -> Option<(SvId, StridedView)> {
    let t = &s.steps[producer[m]?];
    let StepKind::Map { body } = &t.kind else {
        return None;
    };
    let ExprKind::Load { input: 0, index } = &body.kind else {
        return None;
    };
    if t.inputs.len() != 1 || t.epilogue.is_some() {
        return None;
    }
    let src = t.inputs[0];
    if s.values[src].dtype != DType::F32 {
        return None;
    }
    let view = permutation_view(index, &s.values[src].shape, &s.values[m].shape)?;
    Some((src, view))
}

/// Rewrites f32 matmuls to read pure-permutation map steps' inputs in place, and drops the
/// maps no step, view or graph output reads any more.
pub fn absorb_transposes(s: &mut Schedule, outputs: &[SvId]) {
    let producer = s.producers();
    let mut changed = false;
    for i in 0..s.steps.len() {
        let StepKind::MatMul { op, views } = &s.steps[i].kind else {
            continue;
        };
        if s.values[s.steps[i].output].dtype != DType::F32 {
            continue;
        }
        let (op, mut views) = (op.clone(), views.clone());
        let mut inputs = s.steps[i].inputs.clone();
        for k in 0..2 {
            if views[k].is_some() {
                continue;
            }
            let Some((src, view)) = permuted_source(s, &producer, inputs[k]) else {
                continue;
            };
            let trans = if k == 0 { op.trans_a } else { op.trans_b };
            if matches!(s.values[src].storage, Storage::Const(_)) || !gemm_reads(&view, trans) {
                continue;
            }
            inputs[k] = src;
            views[k] = Some(view);
            changed = true;
        }
        let st = &mut s.steps[i];
        st.inputs = inputs;
        st.kind = StepKind::MatMul { op, views };
    }
    if changed {
        drop_unread_maps(s, outputs);
    }
}

/// Removes map steps whose output no step, graph output or (transitively) read view reads.
fn drop_unread_maps(s: &mut Schedule, outputs: &[SvId]) {
    let mut live = vec![false; s.values.len()];
    for &o in outputs {
        live[o] = true;
    }
    for st in &s.steps {
        for &v in &st.inputs {
            live[v] = true;
        }
    }
    // A live view or slice keeps what it aliases alive.
    let mut changed = true;
    while changed {
        changed = false;
        for v in 0..s.values.len() {
            if let Storage::View(of) | Storage::Slice { of, .. } = s.values[v].storage
                && live[v]
                && !live[of]
            {
                live[of] = true;
                changed = true;
            }
        }
    }
    s.steps.retain(|st| {
        !(matches!(st.kind, StepKind::Map { .. })
            && matches!(s.values[st.output].storage, Storage::Arena(_))
            && !live[st.output])
    });
}

/// Most elements a channel-gather check walks at compile time.
const GATHER_CHECK_LIMIT: i64 = 1 << 24;

/// Where each channel of `v` (`[n, c, h, w]`, a reshape of a pure-permutation map's output)
/// starts in the map's input, when the map only permutes whole channel planes: element
/// `(i, ch, q)` (q over h·w) is element `i·c·hw + planes[ch] + q` of the input.
fn channel_planes(s: &Schedule, producer: &[Option<usize>], v: SvId) -> Option<(SvId, Vec<i64>)> {
    let shape = &s.values[v].shape;
    if shape.len() != 4 {
        return None;
    }
    // Through reshapes to the value a step writes.
    let mut m = v;
    while let Storage::View(of) = s.values[m].storage {
        m = of;
    }
    if s.values[m].len() != s.values[v].len() {
        return None;
    }
    let (src, view) = permuted_source(s, producer, m)?;
    let (n, c, hw) = (shape[0], shape[1], shape[2] * shape[3]);
    if n * c * hw > GATHER_CHECK_LIMIT || n * c * hw == 0 {
        return None;
    }
    // Source offset of flat element e of the map's output.
    let offset = |mut e: i64| -> i64 {
        let mut off = 0;
        for d in (0..view.shape.len()).rev() {
            off += (e % view.shape[d]) * view.strides[d];
            e /= view.shape[d];
        }
        off
    };
    let planes: Vec<i64> = (0..c).map(|ch| offset(ch * hw)).collect();
    for i in 0..n {
        for (ch, &pl) in planes.iter().enumerate() {
            if pl < 0 || pl + hw > c * hw {
                return None;
            }
            let base = (i * c + ch as i64) * hw;
            if (0..hw).any(|q| offset(base + q) != i * c * hw + pl + q) {
                return None;
            }
        }
    }
    Some((src, planes))
}

/// Conversions to the blocked layout and depthwise convolutions (which read each channel
/// plane on its own) read through maps that only permute channel planes (ShuffleNet's
/// channel shuffle: `Reshape [n, g, c/g, h, w] → Transpose [0, 2, 1, 3, 4] → Reshape`),
/// gathering the planes as they go; the maps nothing else reads are dropped. Runs after
/// layout assignment, which creates the conversions (a depthwise conv that went blocked
/// reads its input from one).
pub fn absorb_channel_gathers(s: &mut Schedule, outputs: &[SvId]) {
    let producer = s.producers();
    let mut changed = false;
    for i in 0..s.steps.len() {
        let Some(&v) = s.steps[i].inputs.first() else {
            continue;
        };
        match &s.steps[i].kind {
            StepKind::Reorder {
                to_blocked: true,
                planes: None,
            } => {
                if let Some((src, planes)) = channel_planes(s, &producer, v) {
                    s.steps[i].inputs[0] = src;
                    s.steps[i].kind = StepKind::Reorder {
                        to_blocked: true,
                        planes: Some(planes),
                    };
                    changed = true;
                }
            }
            StepKind::Conv {
                op,
                input_planes: None,
            } if is_depthwise_f32(s, &s.steps[i]) => {
                if let Some((src, planes)) = channel_planes(s, &producer, v) {
                    let op = op.clone();
                    // The source seen with the conv input's [n, c, h, w] shape (same size),
                    // so the geometry keeps its channel count and spatial dims.
                    let view = s.values.len();
                    s.values.push(SValue {
                        name: format!("{} (channel source)", s.values[v].name),
                        dtype: s.values[v].dtype,
                        shape: s.values[v].shape.clone(),
                        storage: Storage::View(src),
                    });
                    s.steps[i].inputs[0] = view;
                    s.steps[i].kind = StepKind::Conv {
                        op,
                        input_planes: Some(planes),
                    };
                    changed = true;
                }
            }
            _ => {}
        }
    }
    if changed {
        drop_unread_maps(s, outputs);
    }
}

/// A float 2-D convolution with one input and one output channel per group: each output
/// plane reads one input plane, so the input's channel order can be a table.
fn is_depthwise_f32(s: &Schedule, st: &Step) -> bool {
    let StepKind::Conv { op, .. } = &st.kind else {
        return false;
    };
    let (x, w) = (&s.values[st.inputs[0]], &s.values[st.inputs[1]]);
    x.dtype == DType::F32
        && x.shape.len() == 4
        && w.shape.len() == 4
        && w.shape[1] == 1
        && op.group == x.shape[1]
        && op.group == w.shape[0]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::expr;

    fn vars(ix: &[u32]) -> Vec<E> {
        ix.iter().map(|&v| expr::var(v)).collect()
    }

    #[test]
    fn head_split_transpose_is_a_view() {
        // [1, s, h, d] → [1, h, s, d]: out[b, h, s, d] = in[b, s, h, d].
        let v = permutation_view(&vars(&[0, 2, 1, 3]), &[1, 128, 4, 64], &[1, 4, 128, 64]).unwrap();
        assert_eq!(v.strides, vec![32768, 64, 256, 1]);
        assert!(gemm_reads(&v, false));
        // Kᵀ: [1, s, h, d] → [1, h, d, s], rows (d) contiguous: a transposed read.
        let k = permutation_view(&vars(&[0, 3, 1, 2]), &[1, 128, 4, 64], &[1, 4, 64, 128]).unwrap();
        assert_eq!(k.strides, vec![32768, 64, 1, 256]);
        assert!(gemm_reads(&k, false));
        assert_eq!(gemm_operand(64, 128, 1, 256), Some((true, 256)));
    }

    #[test]
    fn non_permutations_are_not_views() {
        // Repeated variable (a diagonal), wrong extent, constant into a long dim.
        assert!(permutation_view(&vars(&[0, 0]), &[4, 4], &[4, 4]).is_none());
        assert!(permutation_view(&vars(&[1, 0]), &[4, 8], &[4, 8]).is_none());
        let c = vec![expr::var(0), expr::i(0)];
        assert!(permutation_view(&c, &[4, 3], &[4, 1]).is_none());
        // A middle dim moved innermost: neither rows nor columns contiguous.
        let v = permutation_view(&vars(&[0, 2, 1]), &[2, 3, 5], &[2, 5, 3]).unwrap();
        assert!(gemm_reads(&v, false));
        let w = permutation_view(&vars(&[1, 2, 0]), &[2, 3, 5], &[5, 2, 3]).unwrap();
        assert_eq!(w.strides, vec![1, 15, 5]);
        assert!(!gemm_reads(&w, false));
    }
}
