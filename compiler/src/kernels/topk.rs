//! The int64 positions along `axis` of the `k` largest (`largest`) or smallest elements of
//! each line, best first, ties by position, NaN last (`onnxc_topk`, any element type). ONNX
//! TopK gathers its values with a map (`frontend::ops::sort`).

use super::{KernelOp, LowerCx, Operand, aligned_words, kernel_status, required_scratch};
use crate::ir::interp::EvalError;
use crate::ir::{DType, Tensor};
use crate::loops::{Arg, Stmt};
use onnxc_runtime::kernels;
use onnxc_runtime::topk::TopkParams;

#[derive(Clone, Debug, PartialEq)]
pub struct TopK {
    pub axis: usize,
    pub k: i64,
    pub largest: bool,
}

impl TopK {
    /// `onnxc_topk`'s parameters for an operand of type `dtype` and `shape`, and the length
    /// of the axis (its scratch in int64 slots).
    fn params(&self, dtype: DType, shape: &[i64]) -> ([i64; onnxc_runtime::topk::PARAMS], usize) {
        let outer: i64 = shape[..self.axis].iter().product();
        let inner: i64 = shape[self.axis + 1..].iter().product();
        let n = shape[self.axis];
        (
            [
                dtype.onnx_code() as i64,
                outer,
                n,
                inner,
                self.k,
                self.largest as i64,
            ],
            n as usize,
        )
    }
}

impl KernelOp for TopK {
    fn name(&self) -> &'static str {
        "topk"
    }

    fn attrs(&self) -> String {
        format!("axis={} k={} largest={}", self.axis, self.k, self.largest)
    }

    fn eval(
        &self,
        x: &[&Tensor],
        result: Operand<'_>,
        _: usize,
    ) -> Option<Result<Tensor, EvalError>> {
        let x = x[0];
        let (params, n_axis) = self.params(x.dtype, &x.shape);
        let params = TopkParams::encode(params);
        let mut idx = vec![0i64; result.len() as usize];
        let mut scratch = vec![0i64; n_axis];
        // The kernel reads elements of up to 8 bytes: an 8-byte aligned copy.
        let aligned = aligned_words(&x.data);
        // SAFETY: params is a sealed blob; `aligned` holds the [outer, n, inner] elements of
        // its type the parameters describe, idx the [outer, k, inner] positions, scratch n
        // slots.
        let status = unsafe {
            onnxc_runtime::topk::onnxc_topk(
                params.as_ptr(),
                aligned.as_ptr() as *const u8,
                idx.as_mut_ptr(),
                scratch.as_mut_ptr(),
            )
        };
        let t = Tensor::from_i64s(result.shape.to_vec(), &idx);
        Some(kernel_status(&kernels::TOPK, status, t))
    }

    fn scratch_bytes(&self, operands: &[Operand<'_>], _: Operand<'_>) -> u64 {
        // int64 positions along the axis, whatever the operand's type.
        super::some_scratch(operands[0].shape[self.axis] as u64 * 8)
    }

    fn per_item(
        &self,
        operands: &[Option<usize>],
        ranks: &[usize],
        results: &[Option<usize>],
    ) -> bool {
        operands
            .first()
            .copied()
            .flatten()
            .is_some_and(|a| a != self.axis)
            && super::per_leading(operands, ranks, results, 0)
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        let x = cx.operand(0);
        let (params, _) = self.params(x.dtype, x.shape);
        Ok(vec![Stmt::call(
            &kernels::TOPK,
            vec![
                Arg::Params(TopkParams::encode(params)),
                cx.operand_arg(0),
                cx.result_arg(),
                required_scratch(cx, self)?,
            ],
        )?])
    }
}
