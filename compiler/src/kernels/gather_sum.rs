//! `y[n, c, p] = Σ_t w[n, p, t] · x[n, c, off[n, p, t]]` over float32 `x: [N, C, S]`, int64
//! offsets `[N, P, T]` in `[−1, S)` (−1 reads 0) and, when `weighted`, float32 weights
//! `[N, P, T]` (`onnxc_gather_sum_f32`): GridSample's per-channel gathers
//! (`frontend::ops::grid_sample`).

use super::{KernelOp, LowerCx, Operand, f32_kernel, kernel_status};
use crate::ir::Tensor;
use crate::ir::interp::EvalError;
use crate::loops::{Arg, Stmt};
use onnxc_runtime::kernels;

#[derive(Clone, Debug, PartialEq)]
pub struct GatherSum {
    pub weighted: bool,
}

impl GatherSum {
    /// The kernel's parameters for `x: [N, C, S]` and offsets `[N, P, T]`.
    /// The kernel's sealed parameter blob (`GatherParams::encode`).
    fn params(&self, x: &[i64], off: &[i64]) -> Vec<i64> {
        onnxc_runtime::gather::GatherParams::encode([
            x[0],
            x[1],
            x[2],
            off[1],
            off[2],
            self.weighted as i64,
        ])
    }
}

impl KernelOp for GatherSum {
    fn name(&self) -> &'static str {
        "gather_sum"
    }

    fn attrs(&self) -> String {
        format!("weighted={}", self.weighted)
    }

    fn eval(
        &self,
        x: &[&Tensor],
        result: Operand<'_>,
        _: usize,
    ) -> Option<Result<Tensor, EvalError>> {
        let params = self.params(&x[0].shape, &x[1].shape);
        let off = x[1].to_i64s();
        let w: Vec<f32> = if self.weighted {
            x[2].to_f64s().iter().map(|&v| v as f32).collect()
        } else {
            vec![]
        };
        let mut status = 0;
        let t = f32_kernel(x[0], result, |x, y| {
            // SAFETY: params is a sealed blob; x, off, w and y hold the elements the parameters
            // describe.
            status = unsafe {
                onnxc_runtime::gather::onnxc_gather_sum_f32(
                    params.as_ptr(),
                    x.as_ptr(),
                    off.as_ptr(),
                    if self.weighted {
                        w.as_ptr()
                    } else {
                        std::ptr::null()
                    },
                    y.as_mut_ptr(),
                )
            }
        });
        Some(kernel_status(&kernels::GATHER_SUM_F32, status, t))
    }

    /// Item `n` of the result reads item `n` of x, the offsets and the weights only.
    fn per_item(&self, operands: &[Option<usize>], _: &[usize], results: &[Option<usize>]) -> bool {
        operands.iter().chain(results).all(|a| *a == Some(0))
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        Ok(vec![Stmt::call(
            &kernels::GATHER_SUM_F32,
            vec![
                Arg::Params(self.params(cx.operand(0).shape, cx.operand(1).shape)),
                cx.operand_arg(0),
                cx.operand_arg(1),
                if self.weighted {
                    cx.operand_arg(2)
                } else {
                    Arg::Null
                },
                cx.result_arg(),
            ],
        )?])
    }
}
