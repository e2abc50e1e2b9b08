//! Class probabilities `[n, classes]` (float32) of a multiclass SVM from its pairwise
//! decision values `[n, classes·(classes−1)/2]`: Platt's sigmoid with `ab` (`prob_a` then
//! `prob_b`) and libsvm's pairwise coupling (`onnxc_svm_probability`;
//! `frontend::ops::ml::svm`).

use super::{KernelOp, LowerCx, Operand, required_scratch};
use crate::ir::Tensor;
use crate::ir::interp::EvalError;
use crate::loops::{Arg, Stmt};
use onnxc_runtime::kernels;
use std::sync::Arc;

#[derive(Clone, Debug, PartialEq)]
pub struct SvmProbability {
    pub classes: usize,
    pub ab: Arc<Vec<f32>>,
}

impl KernelOp for SvmProbability {
    fn name(&self) -> &'static str {
        "svm_probability"
    }

    fn attrs(&self) -> String {
        format!("classes={}", self.classes)
    }

    fn eval(
        &self,
        x: &[&Tensor],
        result: Operand<'_>,
        _: usize,
    ) -> Option<Result<Tensor, EvalError>> {
        let k = self.classes;
        let x = x[0];
        let rows = x.shape.first().copied().unwrap_or(0).max(0) as usize;
        let pairs = k * k.saturating_sub(1) / 2;
        let s: Vec<f32> = x.to_f64s().iter().map(|&v| v as f32).collect();
        let mut p = vec![0f32; rows * k];
        let mut scratch = vec![0f32; 2 * k * k + k];
        let (a, b) = self.ab.split_at(pairs);
        for r in 0..rows {
            onnxc_runtime::svm::probability(
                k,
                &s[r * pairs..(r + 1) * pairs],
                a,
                b,
                &mut p[r * k..(r + 1) * k],
                &mut scratch,
            );
        }
        Some(Ok(Tensor::new(
            result.dtype,
            result.shape.to_vec(),
            p.iter().flat_map(|v| v.to_le_bytes()).collect(),
        )))
    }

    fn scratch_bytes(&self, _: &[Operand<'_>], _: Operand<'_>) -> u64 {
        let k = self.classes as u64;
        super::some_scratch((2 * k * k + k) * 4)
    }

    fn items(&self) -> super::Items {
        super::Items::Rows
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        Ok(vec![Stmt::call(
            &kernels::SVM_PROBABILITY,
            vec![
                Arg::Params(onnxc_runtime::svm::encode(
                    self.classes as i64,
                    cx.operand(0).shape[0],
                )),
                Arg::Floats(self.ab.to_vec()),
                cx.operand_arg(0),
                cx.result_arg(),
                required_scratch(cx, self)?,
            ],
        )?])
    }
}
