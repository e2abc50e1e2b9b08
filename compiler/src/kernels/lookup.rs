//! Byte table lookup (`onnxc_lookup_u8`): a map of one 8-bit operand that the schedule
//! tabulated (`schedule::lut`), run as `y = table[channel][x]`. Operands: the 8-bit tensor
//! and the table (`rows` rows of 256 entries of the result's 8-bit type); the tensor is
//! runs of `inner` elements, run `p` reading row `p % rows`.

use super::{KernelOp, LowerCx, Operand};
use crate::ir::Tensor;
use crate::ir::expr;
use crate::ir::interp::EvalError;
use crate::loops::{Arg, Stmt};
use onnxc_runtime::kernels;
use onnxc_runtime::par::Par;

#[derive(Clone, Debug, PartialEq)]
pub struct Lookup8 {
    /// Table rows (1, or the channels).
    pub rows: i64,
    /// Elements per run of one row (the elements after the channel dim).
    pub inner: i64,
    /// The keys are int8 (the table starts at -128), else uint8.
    pub signed: bool,
}

impl Lookup8 {
    fn planes(&self, result: Operand<'_>) -> i64 {
        if self.inner == 0 {
            0
        } else {
            result.len() / self.inner
        }
    }
}

impl KernelOp for Lookup8 {
    fn name(&self) -> &'static str {
        "lookup8"
    }

    fn attrs(&self) -> String {
        format!(
            "rows={} inner={} signed={}",
            self.rows, self.inner, self.signed
        )
    }

    fn eval(
        &self,
        x: &[&Tensor],
        result: Operand<'_>,
        _: usize,
    ) -> Option<Result<Tensor, EvalError>> {
        let n = result.len() as usize;
        if x[0].data.len() != n || x[1].data.len() != self.rows.max(1) as usize * 256 {
            return None;
        }
        let mut y = vec![0u8; n];
        // SAFETY: the operand and result hold `planes · inner` bytes, the table `rows` rows
        // of 256 (checked above).
        unsafe {
            onnxc_runtime::lookup::lookup_u8(
                x[0].data.as_ptr(),
                x[1].data.as_ptr(),
                y.as_mut_ptr(),
                self.planes(result) as usize,
                self.rows as usize,
                self.inner as usize,
                if self.signed { 0x80 } else { 0 },
                Par::SEQ,
            )
        };
        Some(Ok(Tensor::new(result.dtype, result.shape.to_vec(), y)))
    }

    fn items(&self) -> super::Items {
        super::Items::Elements
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        Ok(vec![Stmt::call(
            &kernels::LOOKUP_U8,
            vec![
                cx.operand_arg(0),
                cx.operand_arg(1),
                cx.result_arg(),
                Arg::Int(expr::i(self.planes(cx.result()))),
                Arg::Int(expr::i(self.rows)),
                Arg::Int(expr::i(self.inner)),
                Arg::Int(expr::i(if self.signed { 0x80 } else { 0 })),
                Arg::Threads,
            ],
        )?])
    }
}
