//! LinearAttention's recurrence (`onnxc_linear_attention_f32`): queries, keys and values
//! `[b, t, heads·d]` in float32, the optional past state, decay and β, into one float32
//! result holding the output `[b, t, hq·dv]` then the final state `[b, hkv, dk, dv]`; the
//! builder (`frontend::ops::stateful`) slices the two apart and casts them.

use super::{KernelOp, LowerCx, Operand, f32_result, f32s};
use crate::ir::Tensor;
use crate::ir::interp::EvalError;
use crate::loops::{Arg, Stmt};
use onnxc_runtime::kernels;
use onnxc_runtime::linear_attention::LinearAttentionParams;
use onnxc_runtime::par::Par;

/// Operands: q, k, v, then past (when `params.has_past`), decay (gated rules), β (delta
/// rules).
#[derive(Clone, Debug, PartialEq)]
pub struct LinearAttention {
    pub params: LinearAttentionParams,
    /// The factor of every output (the builder resolved ONNX's default 1/√dk).
    pub scale: f32,
}

impl LinearAttention {
    /// Operand positions of past, decay and β, where present.
    fn optional(&self) -> [Option<usize>; 3] {
        let p = &self.params;
        let mut next = 3;
        let mut take = |present: bool| {
            present.then(|| {
                next += 1;
                next - 1
            })
        };
        [take(p.has_past), take(p.rule.gated()), take(p.rule.delta())]
    }
}

impl KernelOp for LinearAttention {
    fn name(&self) -> &'static str {
        "linear_attention"
    }

    fn attrs(&self) -> String {
        let p = &self.params;
        format!(
            "rule={:?} b={} t={} hq={} hkv={} dk={} dv={} scale={}",
            p.rule, p.b, p.t, p.hq, p.hkv, p.dk, p.dv, self.scale
        )
    }

    fn eval(
        &self,
        x: &[&Tensor],
        result: Operand<'_>,
        limit: usize,
    ) -> Option<Result<Tensor, EvalError>> {
        let p = &self.params;
        let work = [p.b, p.t, p.hkv, p.dk, p.dv, p.group() + 3]
            .iter()
            .fold(1usize, |w, &f| w.saturating_mul(f));
        if work > limit {
            return None;
        }
        let [past, decay, beta] = self.optional().map(|k| k.map(|k| f32s(x[k])));
        let mut y = vec![0f32; result.len() as usize];
        let r = onnxc_runtime::linear_attention::linear_attention_f32(
            p,
            self.scale,
            &f32s(x[0]),
            &f32s(x[1]),
            &f32s(x[2]),
            past.as_deref(),
            decay.as_deref(),
            beta.as_deref(),
            &mut y,
            Par::SEQ,
        );
        Some(match r {
            Ok(()) => Ok(f32_result(result, &y)),
            Err(e) => Err(EvalError::KernelParams {
                kernel: kernels::LINEAR_ATTENTION_F32.symbol,
                reason: e.0,
            }),
        })
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        let [past, decay, beta] = self
            .optional()
            .map(|k| k.map_or(Arg::Null, |k| cx.operand_arg(k)));
        Ok(vec![Stmt::call(
            &kernels::LINEAR_ATTENTION_F32,
            vec![
                Arg::Params(self.params.encode()),
                Arg::Floats(vec![self.scale]),
                cx.operand_arg(0),
                cx.operand_arg(1),
                cx.operand_arg(2),
                past,
                decay,
                beta,
                cx.result_arg(),
                Arg::Threads,
            ],
        )?])
    }
}
