//! Softmax of float32 rows along the last axis (`onnxc_softmax_f32`). The frontend builds
//! it for float32 inputs of known shape (other cases are reductions and maps);
//! `schedule::softmax_scale` folds a positive scalar multiply of its operand into `scale`.

use super::{KernelOp, LowerCx, Operand, f32_kernel};
use crate::ir::Tensor;
use crate::ir::expr;
use crate::ir::interp::EvalError;
use crate::loops::{Arg, Stmt};
use onnxc_runtime::kernels;

#[derive(Clone, Debug, PartialEq)]
pub struct Softmax {
    /// `softmax(scale · x)`; 1 from the frontend.
    pub scale: f32,
    /// A row of −inf gives zeros instead of NaN (ONNX Attention's fully masked rows).
    pub zero_inf_rows: bool,
}

impl Softmax {
    /// ONNX Softmax: `softmax(x)`, NaN for a row of −inf.
    pub const PLAIN: Softmax = Softmax {
        scale: 1.0,
        zero_inf_rows: false,
    };
}

impl Softmax {
    /// `(rows, n)`: the rows of `n` elements of a tensor of `shape`.
    fn rows(shape: &[i64]) -> (i64, i64) {
        let n = shape.last().copied().unwrap_or(1);
        let rows = if n == 0 {
            0
        } else {
            shape.iter().product::<i64>() / n
        };
        (rows, n)
    }
}

impl KernelOp for Softmax {
    fn name(&self) -> &'static str {
        "softmax"
    }

    fn attrs(&self) -> String {
        if self.zero_inf_rows {
            format!("scale={} zero_inf_rows", self.scale)
        } else {
            format!("scale={}", self.scale)
        }
    }

    /// The runtime's softmax reads a row whole before writing it.
    fn in_place(&self) -> Option<usize> {
        Some(0)
    }

    fn eval(
        &self,
        x: &[&Tensor],
        result: Operand<'_>,
        _: usize,
    ) -> Option<Result<Tensor, EvalError>> {
        let (rows, n) = Self::rows(result.shape);
        Some(Ok(f32_kernel(x[0], result, |x, y| {
            // SAFETY: x and y hold `rows` rows of `n` floats.
            unsafe {
                onnxc_runtime::softmax::softmax_f32(
                    x.as_ptr(),
                    y.as_mut_ptr(),
                    rows as usize,
                    n as usize,
                    self.scale,
                    self.zero_inf_rows,
                )
            }
        })))
    }

    fn items(&self) -> super::Items {
        super::Items::Leading(1)
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        let (rows, n) = Self::rows(cx.result().shape);
        Ok(vec![Stmt::call(
            &kernels::SOFTMAX_F32,
            vec![
                cx.operand_arg(0),
                cx.result_arg(),
                Arg::Int(expr::i(rows)),
                Arg::Int(expr::i(n)),
                if self.scale == 1.0 {
                    Arg::Null
                } else {
                    Arg::Floats(vec![self.scale])
                },
                Arg::Int(expr::i(self.zero_inf_rows as i64)),
                Arg::Threads,
            ],
        )?])
    }
}
