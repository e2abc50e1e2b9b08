//! Integer matrix product (`onnxc_qmatmul`): operands the uint8/int8 activations `[…, m, k]`
//! and optionally their run-time zero point (one element, DynamicQuantizeLinear's); the
//! weights, their zero points, bias and scales are packed into the parameter blob when the
//! frontend builds the op (`onnxc_runtime::qconv::matmul::QMatMulParams::encode`). Built by
//! `frontend::ops::qdq`.

use super::{KernelOp, LowerCx, Operand, fold_with_scratch};
use crate::ir::Tensor;
use crate::ir::interp::EvalError;
use crate::loops::{Arg, Stmt};
use onnxc_runtime::kernels;
use onnxc_runtime::par::{Par, ScratchNeed};
use onnxc_runtime::qconv::matmul::QMatMulParams;
use std::sync::Arc;

/// The op: its sealed `QMatMulParams` blob (compared by content).
#[derive(Clone, Debug, PartialEq)]
pub struct QMatMul(pub Arc<Vec<i64>>);

impl QMatMul {
    fn params(&self) -> QMatMulParams<'_> {
        QMatMulParams::decode(&self.0).expect("the frontend encodes a valid blob")
    }
}

impl KernelOp for QMatMul {
    fn name(&self) -> &'static str {
        "qmatmul"
    }

    fn attrs(&self) -> String {
        let p = self.params();
        format!(
            "out={:?} batch={} m={} k={} n={} x_zp={}",
            p.q.out, p.batch, p.m, p.k, p.n, p.q.x_zp
        )
    }

    fn eval(
        &self,
        x: &[&Tensor],
        result: Operand<'_>,
        limit: usize,
    ) -> Option<Result<Tensor, EvalError>> {
        let p = self.params();
        if (result.len() as usize).saturating_mul(p.k) > limit.saturating_mul(16) {
            return None;
        }
        let x_zp = match x.get(1) {
            Some(z) => z.to_i64s()[0] as i32,
            None => p.q.x_zp,
        };
        let bytes = result.len() as usize * p.q.out.size();
        fold_with_scratch(
            &kernels::QMATMUL,
            p.scratch(),
            result,
            bytes,
            |y, shared, slots| {
                // SAFETY: the operand and result hold the tensors the blob describes (the builder
                // checked their shapes), the scratch what it asks for.
                unsafe {
                    onnxc_runtime::qconv::matmul::qmatmul(
                        &p,
                        x_zp,
                        x[0].data.as_ptr(),
                        y,
                        shared as *mut i32,
                        slots,
                        Par::SEQ,
                    )
                }
            },
        )
    }

    fn scratch(&self, _: &[Operand<'_>], _: Operand<'_>) -> ScratchNeed {
        self.params().scratch()
    }

    fn per_item(
        &self,
        operands: &[Option<usize>],
        ranks: &[usize],
        results: &[Option<usize>],
    ) -> bool {
        ranks.first().is_some_and(|&r| r >= 2) && super::per_row(operands, results)
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        let scratch = super::required_scratch(cx, self)?;
        let zp = if cx.has_operand(1) {
            cx.operand_arg(1)
        } else {
            Arg::Null
        };
        Ok(vec![Stmt::call(
            &kernels::QMATMUL,
            vec![
                Arg::Blob(self.0.clone()),
                cx.operand_arg(0),
                zp,
                cx.result_arg(),
                scratch,
                Arg::Threads,
            ],
        )?])
    }
}
