//! The aggregated leaf values of a tree ensemble per row (`onnxc_tree_ensemble`): operand
//! `X: [N, F]` float32/float64, result `[N, T]` float32/float64, as the forest
//! (`onnxc_runtime::tree::encode`'s array, validated when encoded) says. ONNX-ML
//! TreeEnsemble and TreeEnsembleClassifier/Regressor, whose post-processing the frontend
//! builds as maps (`frontend::ops::ml::tree`).

use super::{KernelOp, LowerCx, Operand, aligned_words, kernel_status};
use crate::ir::Tensor;
use crate::ir::expr;
use crate::ir::interp::EvalError;
use crate::loops::{Arg, Stmt};
use onnxc_runtime::kernels;
use std::sync::Arc;

#[derive(Clone, Debug, PartialEq)]
pub struct TreeEnsemble(pub Arc<Vec<i64>>);

impl KernelOp for TreeEnsemble {
    fn name(&self) -> &'static str {
        "tree_ensemble"
    }

    fn attrs(&self) -> String {
        onnxc_runtime::tree::describe(&self.0)
    }

    fn eval(
        &self,
        x: &[&Tensor],
        result: Operand<'_>,
        _: usize,
    ) -> Option<Result<Tensor, EvalError>> {
        let x = x[0];
        let rows = x.shape.first().copied().unwrap_or(1);
        // Aligned copies of the operand and the result.
        let xa = aligned_words(&x.data);
        let bytes = result.len() as usize * result.dtype.size();
        let mut y = vec![0u64; bytes.div_ceil(8)];
        let mut scratch = vec![0u64; onnxc_runtime::tree::scratch_bytes(&self.0).div_ceil(8)];
        // SAFETY: the forest is a sealed blob encoded for this operand's type and width and
        // the result's type; xa and y hold rows of them, scratch the bytes it asks for.
        let status = unsafe {
            onnxc_runtime::tree::onnxc_tree_ensemble(
                self.0.as_ptr(),
                xa.as_ptr() as *const u8,
                y.as_mut_ptr() as *mut u8,
                rows,
                scratch.as_mut_ptr() as *mut u8,
            )
        };
        let data: Vec<u8> = y.iter().flat_map(|w| w.to_ne_bytes()).take(bytes).collect();
        let t = Tensor::new(result.dtype, result.shape.to_vec(), data);
        Some(kernel_status(&kernels::TREE_ENSEMBLE, status, t))
    }

    fn scratch_bytes(&self, _: &[Operand<'_>], _: Operand<'_>) -> u64 {
        onnxc_runtime::tree::scratch_bytes(&self.0) as u64
    }

    fn table_bytes(&self) -> u64 {
        8 * self.0.len() as u64
    }

    fn items(&self) -> super::Items {
        super::Items::Rows
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        let rows = cx.operand(0).shape.first().copied().unwrap_or(1);
        Ok(vec![Stmt::call(
            &kernels::TREE_ENSEMBLE,
            vec![
                Arg::Blob(self.0.clone()),
                cx.operand_arg(0),
                cx.result_arg(),
                Arg::Int(expr::i(rows)),
                cx.scratch().unwrap_or(Arg::Null),
            ],
        )?])
    }
}
