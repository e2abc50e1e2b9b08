//! Exact float32 accumulators requantized to uint8/int8 (`onnxc_requantize_f32_8`): the
//! QLinearConv and QLinearMatMul results `frontend::ops::qlinear` computes through the
//! float32 kernels, with constant float32 scales and zero point. The kernel rounds the
//! accumulator's product with the factor `x_scale · w_scale / y_scale` (one per channel of
//! `axis`, or one) exactly, as the float64 reference does.

use super::{KernelOp, LowerCx, Operand};
use crate::ir::expr;
use crate::ir::interp::EvalError;
use crate::ir::{DType, Tensor};
use crate::loops::{Arg, Stmt};
use onnxc_runtime::kernels;
use onnxc_runtime::par::Par;
use onnxc_runtime::requantize::{Layout, SIGNED};

#[derive(Clone, Debug, PartialEq)]
pub struct Requantize {
    /// One factor per channel of `axis`, or one for the tensor.
    pub factors: Vec<f32>,
    /// The accumulators' axis the factors run along (unused with one factor).
    pub axis: usize,
    /// The result's zero point.
    pub zp: i64,
    /// int8 results (else uint8).
    pub signed: bool,
}

impl Requantize {
    /// `[outer, channels, inner]` of accumulators of `shape`.
    fn layout(&self, shape: &[i64]) -> Layout {
        let axis = self.axis.min(shape.len());
        let prod = |d: &[i64]| d.iter().product::<i64>().max(0) as usize;
        if self.factors.len() == 1 {
            Layout {
                outer: 1,
                channels: 1,
                inner: prod(shape),
            }
        } else {
            Layout {
                outer: prod(&shape[..axis]),
                channels: shape.get(axis).copied().unwrap_or(1).max(0) as usize,
                inner: prod(shape.get(axis + 1..).unwrap_or(&[])),
            }
        }
    }
}

impl KernelOp for Requantize {
    fn name(&self) -> &'static str {
        "requantize"
    }

    fn attrs(&self) -> String {
        let f = if self.factors.len() == 1 {
            format!("factor={}", self.factors[0])
        } else {
            format!("factors=[{} along axis {}]", self.factors.len(), self.axis)
        };
        format!(
            "{f} zero_point={} out={}",
            self.zp,
            if self.signed { "I8" } else { "U8" }
        )
    }

    fn eval(
        &self,
        x: &[&Tensor],
        result: Operand<'_>,
        _: usize,
    ) -> Option<Result<Tensor, EvalError>> {
        let l = self.layout(result.shape);
        let n = l.outer * l.channels * l.inner;
        if x[0].dtype != DType::F32 || x[0].data.len() != 4 * n {
            return None;
        }
        if self.factors.len() != 1 && self.factors.len() != l.channels {
            return None;
        }
        let acc: Vec<f32> = super::f32s(x[0]);
        let mut y = vec![0u8; n];
        // SAFETY: acc holds n floats, y n bytes, factors one per channel or one.
        unsafe {
            onnxc_runtime::requantize::requantize(
                acc.as_ptr(),
                self.factors.as_ptr(),
                self.factors.len() == 1,
                l,
                self.zp,
                self.signed,
                y.as_mut_ptr(),
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
        // Elementwise; the factors run along `axis`, which must not carry the batch.
        super::per_element(operands, results)
            && (self.factors.len() == 1 || results[0] != Some(self.axis))
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        let l = self.layout(cx.result().shape);
        let i = |v: usize| Arg::Int(expr::i(v as i64));
        Ok(vec![Stmt::call(
            &kernels::REQUANTIZE_F32_8,
            vec![
                cx.operand_arg(0),
                Arg::Floats(self.factors.clone()),
                i(self.factors.len()),
                i(l.outer),
                i(l.channels),
                i(l.inner),
                Arg::Int(expr::i(self.zp)),
                Arg::Int(expr::i(if self.signed { SIGNED } else { 0 })),
                cx.result_arg(),
                Arg::Threads,
            ],
        )?])
    }
}
