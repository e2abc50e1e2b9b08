//! Integer matrix product (`onnxc_qmatmul`): operands the uint8/int8 activations `[…, m, k]`
//! and optionally their run-time zero point (one element, DynamicQuantizeLinear's); the
//! weights, their zero points, bias and scales are packed into the parameter blob when the
//! frontend builds the op (`onnxc_runtime::qconv::matmul::QMatMulParams::encode`), the rows
//! (every `m` of the batch) an argument of the call, so that the blob is the same at every
//! value of a dim taken at run time. Built by `frontend::ops::qdq`.

use super::{KernelOp, LowerCx, Operand, fold_with_scratch};
use crate::ir::interp::EvalError;
use crate::ir::{Tensor, expr};
use crate::loops::{Arg, Stmt};
use onnxc_runtime::kernels;
use onnxc_runtime::par::{Par, ScratchNeed};
use onnxc_runtime::qconv::matmul::QMatMulParams;
use std::sync::Arc;

/// The op: its sealed `QMatMulParams` blob (compared by content) and the rows of its
/// activations.
#[derive(Clone, Debug, PartialEq)]
pub struct QMatMul {
    pub blob: Arc<Vec<i64>>,
    pub rows: usize,
}

impl QMatMul {
    fn params(&self) -> QMatMulParams<'_> {
        QMatMulParams::decode(&self.blob)
            .and_then(|p| p.with_rows(self.rows as i64))
            .expect("the frontend encodes a valid blob")
    }
}

impl KernelOp for QMatMul {
    fn name(&self) -> &'static str {
        "qmatmul"
    }

    fn attrs(&self) -> String {
        let p = self.params();
        format!(
            "out={:?} rows={} k={} n={} x_zp={}",
            p.q.out, p.rows, p.k, p.n, p.q.x_zp
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
                Arg::Blob(self.blob.clone()),
                cx.operand_arg(0),
                zp,
                cx.result_arg(),
                Arg::Int(expr::i(self.rows as i64)),
                scratch,
                Arg::Threads,
            ],
        )?])
    }
}
