//! Det and Inverse (com.microsoft): a batch of square float64 matrices through one runtime
//! kernel each (`onnxc_det_f64`: LU, `onnxc_inverse_f64`: Gauss-Jordan, both with partial
//! pivoting); the frontend casts other float types to float64 and back around them.

use super::{KernelOp, LowerCx, Operand, required_scratch};
use crate::ir::expr;
use crate::ir::interp::EvalError;
use crate::ir::{DType, Tensor};
use crate::loops::{Arg, Stmt};
use onnxc_runtime::kernels;

/// What is computed of each `n × n` matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatrixOp {
    /// Its determinant: operand `[*, n, n]` → result `[*]`.
    Det,
    /// Its inverse: operand `[*, n, n]` → result `[*, n, n]`.
    Inverse,
}

/// Operand and result float64; `n` the matrices' order.
#[derive(Clone, Debug, PartialEq)]
pub struct SquareMatrices {
    pub n: i64,
    pub op: MatrixOp,
}

impl SquareMatrices {
    /// The matrices of a result of `len` elements.
    fn batch(&self, len: i64) -> i64 {
        match self.op {
            MatrixOp::Det => len,
            MatrixOp::Inverse if self.n == 0 => 0,
            MatrixOp::Inverse => len / (self.n * self.n),
        }
    }
}

impl KernelOp for SquareMatrices {
    fn name(&self) -> &'static str {
        match self.op {
            MatrixOp::Det => "det",
            MatrixOp::Inverse => "inverse",
        }
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
        let xs = x[0].to_f64s();
        let n = self.n as usize;
        let mut y = vec![0f64; result.len() as usize];
        let mut work = vec![0f64; n * n];
        match self.op {
            MatrixOp::Det => onnxc_runtime::det::det_f64(&xs, &mut y, n, &mut work),
            MatrixOp::Inverse => onnxc_runtime::inverse::inverse_f64(&xs, &mut y, n, &mut work),
        }
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
        let kernel = match self.op {
            MatrixOp::Det => &kernels::DET_F64,
            MatrixOp::Inverse => &kernels::INVERSE_F64,
        };
        Ok(vec![Stmt::call(
            kernel,
            vec![
                cx.operand_arg(0),
                cx.result_arg(),
                Arg::Int(expr::i(self.batch(cx.result().len()))),
                Arg::Int(expr::i(self.n)),
                required_scratch(cx, self)?,
            ],
        )?])
    }
}
