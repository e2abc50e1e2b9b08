//! Requantized sum of two 8-bit tensors of one shape (`onnxc_qadd_u8`): QLinearAdd, and the
//! DequantizeLinear → Add (→ Relu) → QuantizeLinear groups of QDQ models, built by
//! `frontend::ops::qdq::quantize_sum` and `frontend::ops::contrib`. The kernel computes the
//! graph's float32 operations in their order, so the result is the map's, bit for bit.

use super::{KernelOp, LowerCx, Operand};
use crate::ir::Tensor;
use crate::ir::expr;
use crate::ir::interp::EvalError;
use crate::loops::{Arg, Stmt};
use onnxc_runtime::kernels;
use onnxc_runtime::par::Par;
use onnxc_runtime::qadd::{QAddParams, RELU, SIGNED};

#[derive(Clone, Debug, PartialEq)]
pub struct QAdd(pub QAddParams);

impl KernelOp for QAdd {
    fn name(&self) -> &'static str {
        "qadd"
    }

    fn attrs(&self) -> String {
        let p = &self.0;
        format!(
            "scales=[{}, {}, {}] zero_points=[{}, {}, {}] signed={} relu={}",
            p.sa, p.sb, p.sy, p.za, p.zb, p.zy, p.signed, p.relu
        )
    }

    fn eval(
        &self,
        x: &[&Tensor],
        result: Operand<'_>,
        _: usize,
    ) -> Option<Result<Tensor, EvalError>> {
        let n = result.len() as usize;
        if x[0].data.len() != n || x[1].data.len() != n {
            return None;
        }
        let mut y = vec![0u8; n];
        // SAFETY: both operands and the result hold n bytes (checked).
        unsafe {
            onnxc_runtime::qadd::qadd(
                &self.0,
                x[0].data.as_ptr(),
                x[1].data.as_ptr(),
                y.as_mut_ptr(),
                n,
                Par::SEQ,
            )
        };
        Some(Ok(Tensor::new(result.dtype, result.shape.to_vec(), y)))
    }

    fn per_item(
        &self,
        operands: &[Option<usize>],
        _ranks: &[usize],
        results: &[Option<usize>],
    ) -> bool {
        // Elementwise over operands of the result's shape.
        operands.iter().all(|a| a.is_some()) && super::per_element(operands, results)
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        let p = &self.0;
        let flags = if p.signed { SIGNED } else { 0 } | if p.relu { RELU } else { 0 };
        Ok(vec![Stmt::call(
            &kernels::QADD_U8,
            vec![
                cx.operand_arg(0),
                cx.operand_arg(1),
                cx.result_arg(),
                Arg::Int(expr::i(cx.result().len())),
                Arg::Floats(vec![p.sa, p.sb, p.sy]),
                Arg::Int(expr::i(p.za as i64)),
                Arg::Int(expr::i(p.zb as i64)),
                Arg::Int(expr::i(p.zy as i64)),
                Arg::Int(expr::i(flags)),
                Arg::Threads,
            ],
        )?])
    }
}
