//! Exact GELU (`½·x·(1 + erf(x/√2))`) of float32 elements (`onnxc_gelu_f32`): ONNX Gelu,
//! com.microsoft's, and the decomposed erf form `passes::gelu` recognizes.

use super::{KernelOp, LowerCx, Operand, f32_kernel};
use crate::ir::Tensor;
use crate::ir::expr;
use crate::ir::interp::EvalError;
use crate::loops::{Arg, Stmt};
use onnxc_runtime::kernels;

#[derive(Clone, Debug, PartialEq)]
pub struct Gelu;

impl KernelOp for Gelu {
    fn name(&self) -> &'static str {
        "gelu"
    }

    fn attrs(&self) -> String {
        "exact".to_string()
    }

    fn eval(
        &self,
        x: &[&Tensor],
        result: Operand<'_>,
        _: usize,
    ) -> Option<Result<Tensor, EvalError>> {
        Some(Ok(f32_kernel(x[0], result, |x, y| {
            // SAFETY: x and y hold x.len() floats.
            unsafe { onnxc_runtime::gelu::gelu_f32(x.as_ptr(), y.as_mut_ptr(), x.len()) }
        })))
    }

    fn items(&self) -> super::Items {
        super::Items::Elements
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        Ok(vec![Stmt::call(
            &kernels::GELU_F32,
            vec![
                cx.operand_arg(0),
                cx.result_arg(),
                Arg::Int(expr::i(cx.result().len())),
                Arg::Threads,
            ],
        )?])
    }
}
