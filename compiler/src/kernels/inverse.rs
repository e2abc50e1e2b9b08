//! Inverse (com.microsoft): the inverses of a batch of square float64 matrices
//! (`onnxc_inverse_f64`, Gauss-Jordan with partial pivoting); the frontend casts other float
//! types to float64 and back around it.

use super::{KernelOp, LowerCx, Operand, required_scratch};
use crate::ir::expr;
use crate::ir::interp::EvalError;
use crate::ir::{DType, Tensor};
use crate::loops::{Arg, Stmt};
use onnxc_runtime::kernels;

/// Operand `[*, n, n]` float64 → result `[*, n, n]` float64.
#[derive(Clone, Debug, PartialEq)]
pub struct Inverse {
    pub n: i64,
}

impl KernelOp for Inverse {
    fn name(&self) -> &'static str {
        "inverse"
    }

    fn attrs(&self) -> String {
        format!("n={}", self.n)
    }

    fn eval(
        &self,
        x: &[&Tensor],
        result: Operand<'_>,
        _: usize,
    ) -> Option<Result<Tensor, EvalError>> {
        let xs: Vec<f64> = x[0]
            .data
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
            .collect();
        let n = self.n as usize;
        let mut y = vec![0f64; result.len() as usize];
        let mut work = vec![0f64; n * n];
        onnxc_runtime::inverse::inverse_f64(&xs, &mut y, n, &mut work);
        Some(Ok(Tensor::new(
            DType::F64,
            result.shape.to_vec(),
            y.iter().flat_map(|v| v.to_le_bytes()).collect(),
        )))
    }

    fn scratch_bytes(&self, _: &[Operand<'_>], _: Operand<'_>) -> u64 {
        super::some_scratch((self.n * self.n) as u64 * 8)
    }

    fn items(&self) -> super::Items {
        super::Items::Leading(2)
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        let batch = if self.n == 0 {
            0
        } else {
            cx.result().len() / (self.n * self.n)
        };
        Ok(vec![Stmt::call(
            &kernels::INVERSE_F64,
            vec![
                cx.operand_arg(0),
                cx.result_arg(),
                Arg::Int(expr::i(batch)),
                Arg::Int(expr::i(self.n)),
                required_scratch(cx, self)?,
            ],
        )?])
    }
}
