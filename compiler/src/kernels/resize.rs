//! Separable resize of the last two axes of a float32 tensor with taps computed at compile
//! time (`onnxc_resize_f32`): ONNX Resize and Upsample with constant scales, sizes and roi
//! (`frontend::ops::resize` computes the taps).

use super::{KernelOp, LowerCx, Operand, f32_kernel, kernel_status, required_scratch};
use crate::ir::Tensor;
use crate::ir::interp::EvalError;
use crate::loops::{Arg, Stmt};
use onnxc_runtime::kernels;
use onnxc_runtime::resize::ResizeGeometry;

#[derive(Clone, Debug, PartialEq)]
pub struct Resize(pub ResizeGeometry);

impl KernelOp for Resize {
    fn name(&self) -> &'static str {
        "resize"
    }

    fn attrs(&self) -> String {
        let (r, c) = (&self.0.rows, &self.0.cols);
        format!(
            "{}x{} -> {}x{} taps {}/{}",
            r.n_in, c.n_in, r.n_out, c.n_out, r.taps, c.taps
        )
    }

    fn eval(
        &self,
        x: &[&Tensor],
        result: Operand<'_>,
        _: usize,
    ) -> Option<Result<Tensor, EvalError>> {
        let mut scratch = vec![0f32; self.0.scratch_floats()];
        let (params, floats) = self.0.encode();
        let mut status = 0;
        let t = f32_kernel(x[0], result, |x, y| {
            // SAFETY: params is a sealed blob and floats its float array; x and y hold the
            // planes the geometry describes, scratch one input row.
            status = unsafe {
                onnxc_runtime::resize::onnxc_resize_f32(
                    params.as_ptr(),
                    floats.as_ptr(),
                    x.as_ptr(),
                    y.as_mut_ptr(),
                    scratch.as_mut_ptr(),
                )
            }
        });
        Some(kernel_status(&kernels::RESIZE_F32, status, t))
    }

    fn scratch_bytes(&self, _: &[Operand<'_>], _: Operand<'_>) -> u64 {
        super::some_scratch(self.0.scratch_floats() as u64 * 4)
    }

    fn items(&self) -> super::Items {
        super::Items::Leading(2)
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        let (params, floats) = self.0.encode();
        Ok(vec![Stmt::call(
            &kernels::RESIZE_F32,
            vec![
                Arg::Params(params),
                Arg::Floats(floats),
                cx.operand_arg(0),
                cx.result_arg(),
                required_scratch(cx, self)?,
            ],
        )?])
    }
}
