//! Depthwise convolution between 8-bit tensors (`onnxc_qdepthwise_8`): the input's
//! dequantization, the float32 depthwise convolution and the result's quantization, a few
//! channels at a time in cache. Operands: the 8-bit input, the float32 weights `[c, 1,
//! kernel…]` and, optionally, the float32 bias. Built by `schedule::quant_depthwise` from
//! the three steps it replaces, whose bits it computes.

use super::{KernelOp, LowerCx, Operand, fold_with_scratch};
use crate::ir::Tensor;
use crate::ir::interp::EvalError;
use crate::loops::{Arg, Stmt};
use onnxc_runtime::conv::qdepthwise::{Narrow, QDepthwiseParams, qdepthwise};
use onnxc_runtime::kernels;
use onnxc_runtime::par::{Par, ScratchNeed};
use std::sync::Arc;

/// The op: its sealed `QDepthwiseParams` blob (compared by content).
#[derive(Clone, Debug, PartialEq)]
pub struct QDepthwise(pub Arc<Vec<i64>>);

impl QDepthwise {
    fn params(&self) -> QDepthwiseParams<'_> {
        QDepthwiseParams::decode(&self.0).expect("the schedule encodes a valid blob")
    }
}

impl KernelOp for QDepthwise {
    fn name(&self) -> &'static str {
        "qdepthwise8"
    }

    fn attrs(&self) -> String {
        let p = self.params();
        let g = &p.conv;
        let narrow = match &p.narrow {
            Narrow::Quantize { scale, zp, signed } => {
                format!("quantize scale={scale} zero_point={zp} signed={signed}")
            }
            Narrow::Requantize {
                factors,
                zp,
                signed,
            } => format!(
                "requantize factors={} zero_point={zp} signed={signed}",
                factors.len()
            ),
        };
        format!(
            "kernel={:?} strides={:?} dilations={:?} pads={:?} widen=[scale={} zero_point={} signed={}] {narrow}",
            g.kernel, g.strides, g.dilations, g.pads, p.widen.scale, p.widen.zp, p.widen.signed
        )
    }

    fn eval(
        &self,
        x: &[&Tensor],
        result: Operand<'_>,
        limit: usize,
    ) -> Option<Result<Tensor, EvalError>> {
        let p = self.params();
        let taps = p.conv.kernel.iter().product::<i64>().max(0) as usize;
        let macs = (result.len() as usize).saturating_mul(taps);
        if macs > limit.saturating_mul(16) || x.len() < 2 {
            return None;
        }
        let w = super::f32s(x[1]);
        let bias = x.get(2).map(|b| super::f32s(b));
        let bytes = result.len() as usize;
        fold_with_scratch(
            &kernels::QDEPTHWISE_8,
            p.scratch(),
            result,
            bytes,
            |y, _, slots| {
                let b = bias.as_ref().map_or(std::ptr::null(), |b| b.as_ptr());
                // SAFETY: the operands and result hold the tensors the geometry describes (the
                // schedule took them from the steps it replaced), the slots the scratch it asks
                // for.
                unsafe { qdepthwise(&p, x[0].data.as_ptr(), w.as_ptr(), b, y, slots, Par::SEQ) }
            },
        )
    }

    fn scratch(&self, _: &[Operand<'_>], _: Operand<'_>) -> ScratchNeed {
        self.params().scratch()
    }

    fn items(&self) -> super::Items {
        super::Items::Rows
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        let scratch = super::required_scratch(cx, self)?;
        let bias = if cx.has_operand(2) {
            cx.operand_arg(2)
        } else {
            Arg::Null
        };
        // As parameters, not a blob: its words are the geometry and a few scalars per
        // channel (the weights are an operand), and sizes that follow dims taken at run time
        // become formulas of them.
        Ok(vec![Stmt::call(
            &kernels::QDEPTHWISE_8,
            vec![
                Arg::Params(self.0.to_vec()),
                cx.operand_arg(0),
                cx.operand_arg(1),
                bias,
                cx.result_arg(),
                scratch,
                Arg::Threads,
            ],
        )?])
    }
}
