//! Depthwise convolutions between 8-bit tensors as one kernel step.
//!
//! A quantized model's depthwise convolutions run in float32 (the integer kernel's blocks
//! of output channels would hold one channel each): the frontend builds QLinearConv's as a
//! centered dequantization, a float32 convolution of exact integers and a requantization,
//! and a QDQ model keeps DequantizeLinear → Conv → QuantizeLinear; `quant_maps` has made
//! the outer two kernels. Those three steps become one `kernels::QDepthwise`, which
//! computes them a few channels at a time while the float32 planes are in cache, with the
//! same kernels and so the same bits. The float32 values between them must have no other
//! reader.

use super::{Schedule, Step, StepKind, Storage, SvId};
use crate::kernels::{Dequantize8, QDepthwise, Quantize8, Requantize};
use onnxc_runtime::conv::ConvGeometry;
use onnxc_runtime::conv::qdepthwise::{Narrow, QDepthwiseParams, Widen};
use std::borrow::Cow;
use std::sync::Arc;

/// Replaces every dequantize → depthwise convolution → quantize chain by one step.
pub fn fuse(s: &mut Schedule) {
    let mut reads = vec![0usize; s.values.len()];
    for st in &s.steps {
        for &v in &st.inputs {
            reads[v] += 1;
        }
    }
    for o in &s.outputs {
        reads[o.value] += 1;
    }
    let producers = s.producers();
    let mut gone = vec![false; s.steps.len()];
    for i in 0..s.steps.len() {
        let Some((conv, widen, step)) = chain(s, i, &reads, &producers) else {
            continue;
        };
        gone[conv] = true;
        gone[widen] = true;
        s.steps[i] = step;
    }
    let mut k = 0;
    s.steps.retain(|_| {
        k += 1;
        !gone[k - 1]
    });
}

/// The chain that step `i` ends, if it is one: the convolution's and the dequantization's
/// steps, and the step that replaces the three.
fn chain(
    s: &Schedule,
    i: usize,
    reads: &[usize],
    producers: &[Option<usize>],
) -> Option<(usize, usize, Step)> {
    let last = &s.steps[i];
    let StepKind::Kernel(k) = &last.kind else {
        return None;
    };
    let narrow = if let Some(q) = k.downcast::<Quantize8>() {
        Narrow::Quantize {
            scale: q.scale,
            zp: q.zp,
            signed: q.signed,
        }
    } else if let Some(r) = k.downcast::<Requantize>() {
        Narrow::Requantize {
            factors: Cow::Owned(r.factors.clone()),
            zp: r.zp,
            signed: r.signed,
        }
    } else {
        return None;
    };
    let only_reader = |v: SvId| reads[v] == 1 && matches!(s.values[v].storage, Storage::Arena(_));
    let acc = *last.inputs.first()?;
    let c = producers[acc]?;
    let conv = &s.steps[c];
    let StepKind::Conv {
        op,
        input_planes: None,
    } = &conv.kind
    else {
        return None;
    };
    let ep = conv.epilogue.as_ref();
    if !only_reader(acc) || ep.is_some_and(|e| e.residual.is_some() || e.clamps()) {
        return None;
    }
    let (xf, w) = (conv.inputs[0], conv.inputs[1]);
    let (xs, ws, ys) = (
        &s.values[xf].shape,
        &s.values[w].shape,
        &s.values[acc].shape,
    );
    let channels = xs.get(1).copied()?;
    let depthwise = xs.len() == 4
        && ws.len() == 4
        && ys.len() == 4
        && op.group == channels
        && ws[0] == channels
        && ws[1] == 1
        && ys[1] == channels;
    if !depthwise || !matches!(s.values[w].storage, Storage::Const(_)) {
        return None;
    }
    if let Narrow::Requantize { factors, .. } = &narrow {
        let along_channels = k.downcast::<Requantize>().is_some_and(|r| r.axis == 1);
        if factors.len() != 1 && !(along_channels && factors.len() as i64 == channels) {
            return None;
        }
    }
    let bias = match ep.and_then(|e| e.bias) {
        Some(b) => {
            let b = conv.inputs[b];
            if !matches!(s.values[b].storage, Storage::Const(_)) {
                return None;
            }
            Some(b)
        }
        None => None,
    };
    let h = producers[xf]?;
    let StepKind::Kernel(d) = &s.steps[h].kind else {
        return None;
    };
    let d = d.downcast::<Dequantize8>()?;
    if !only_reader(xf) {
        return None;
    }
    let x = s.steps[h].inputs[0];
    let geometry = ConvGeometry {
        n: xs[0],
        c: channels,
        m: channels,
        group: channels,
        input: xs[2..].into(),
        kernel: ws[2..].into(),
        output: ys[2..].into(),
        strides: op.strides[..].into(),
        dilations: op.dilations[..].into(),
        pads: op.pads_begin[..].into(),
        wide_simd: false,
        no_winograd: true,
        input_planes: Cow::Borrowed(&[]),
        path: Default::default(),
    };
    let blob = QDepthwiseParams {
        conv: geometry,
        widen: Widen {
            scale: d.scale,
            zp: d.zp,
            signed: d.signed,
        },
        narrow,
    }
    .encode();
    let mut inputs = vec![x, w];
    inputs.extend(bias);
    let mut origins = s.steps[h].origins.clone();
    origins.extend(conv.origins.iter().cloned());
    origins.extend(last.origins.iter().cloned());
    origins.dedup();
    let step = Step {
        kind: StepKind::Kernel(Arc::new(QDepthwise(Arc::new(blob)))),
        inputs,
        output: last.output,
        epilogue: None,
        origins,
    };
    Some((c, h, step))
}
