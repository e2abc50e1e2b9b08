//! Fused scaled dot-product attention (`onnxc_attention_f32`): `softmax(β·(α·Q·Kᵀ + bias))·V`
//! per (batch, head), every operand read through strides. Made by
//! `schedule::attention` from the steps of an exported attention block, never by a builder:
//! the graph keeps the ONNX ops, so folding and the batch analysis never see it.

use super::{KernelOp, LowerCx, Operand, required_scratch};
use crate::loops::{Arg, Stmt};
use onnxc_runtime::attention::AttentionParams;
use onnxc_runtime::kernels;
use onnxc_runtime::par::ScratchNeed;

/// Operands: Q, K, V, then the bias when `params.bias` is set.
#[derive(Clone, Debug, PartialEq)]
pub struct Attention {
    pub params: AttentionParams,
    /// The scores' factor before the bias is added.
    pub alpha: f32,
    /// The softmax's scale (`kernels::Softmax::scale`).
    pub beta: f32,
}

impl KernelOp for Attention {
    fn name(&self) -> &'static str {
        "attention"
    }

    fn attrs(&self) -> String {
        let p = &self.params;
        format!(
            "batch={:?} m={} n={} dk={} dv={} alpha={} beta={} q={:?} k={:?} v={:?} bias={:?} out={:?}{}",
            p.batch,
            p.m,
            p.n,
            p.dk,
            p.dv,
            self.alpha,
            self.beta,
            p.q,
            p.k,
            p.v,
            p.bias,
            p.out,
            if p.zero_inf_rows {
                " zero_inf_rows"
            } else {
                ""
            }
        )
    }

    fn scratch(&self, _: &[Operand<'_>], _: Operand<'_>) -> ScratchNeed {
        self.params.scratch()
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        let bias = if self.params.bias.is_some() {
            cx.operand_arg(3)
        } else {
            Arg::Null
        };
        Ok(vec![Stmt::call(
            &kernels::ATTENTION_F32,
            vec![
                Arg::Params(self.params.encode()),
                Arg::Floats(vec![self.alpha, self.beta]),
                cx.operand_arg(0),
                cx.operand_arg(1),
                cx.operand_arg(2),
                bias,
                cx.result_arg(),
                required_scratch(cx, self)?,
                Arg::Threads,
            ],
        )?])
    }
}
