//! Separable resize of the last two axes of a float32 tensor (`onnxc_resize_f32`) or of a
//! uint8 or int8 one (`onnxc_resize_8`, computed or gathered taps only) with taps computed
//! at compile time or by the kernel from a rule: ONNX Resize and Upsample with constant
//! scales, sizes and roi (`frontend::ops::resize` computes the taps).

use super::{KernelOp, LowerCx, Operand, f32_kernel, kernel_status, required_scratch};
use crate::ir::interp::EvalError;
use crate::ir::{DType, Tensor, expr};
use crate::loops::{Arg, Stmt};
use onnxc_runtime::kernels;
use onnxc_runtime::resize::ResizeGeometry;

#[derive(Clone, Debug, PartialEq)]
pub struct Resize {
    pub geometry: ResizeGeometry,
    /// The elements' type: float32, uint8 or int8 (the compiler makes no other).
    pub dtype: DType,
}

impl Resize {
    /// The runtime entry point for the element type.
    fn kernel(&self) -> &'static kernels::KernelAbi {
        match self.dtype {
            DType::F32 => &kernels::RESIZE_F32,
            _ => &kernels::RESIZE_8,
        }
    }

    /// Floats of scratch the kernel needs.
    fn scratch_floats(&self) -> usize {
        match self.dtype {
            DType::F32 => self.geometry.scratch_floats(),
            _ => self.geometry.scratch_floats_8(),
        }
    }
}

impl KernelOp for Resize {
    fn name(&self) -> &'static str {
        "resize"
    }

    fn attrs(&self) -> String {
        let (r, c) = (&self.geometry.rows, &self.geometry.cols);
        format!(
            "{} {}x{} -> {}x{} taps {}/{}",
            self.dtype, r.n_in, c.n_in, r.n_out, c.n_out, r.taps, c.taps
        )
    }

    fn eval(
        &self,
        x: &[&Tensor],
        result: Operand<'_>,
        _: usize,
    ) -> Option<Result<Tensor, EvalError>> {
        let mut scratch = vec![0f32; self.scratch_floats()];
        let (params, floats) = self.geometry.encode();
        let mut status = 0;
        let t = if self.dtype == DType::F32 {
            f32_kernel(x[0], result, |x, y| {
                // SAFETY: params is a sealed blob and floats its float array; x and y hold
                // the planes the geometry describes, scratch what it needs.
                status = unsafe {
                    onnxc_runtime::resize::onnxc_resize_f32(
                        params.as_ptr(),
                        floats.as_ptr(),
                        x.as_ptr(),
                        y.as_mut_ptr(),
                        scratch.as_mut_ptr(),
                    )
                }
            })
        } else {
            let mut y = vec![0u8; result.len() as usize];
            // SAFETY: as above, the planes of bytes.
            status = unsafe {
                onnxc_runtime::resize::onnxc_resize_8(
                    params.as_ptr(),
                    floats.as_ptr(),
                    x[0].data.as_ptr(),
                    y.as_mut_ptr(),
                    scratch.as_mut_ptr(),
                    (self.dtype == DType::I8) as i64,
                )
            };
            Tensor::new(result.dtype, result.shape.to_vec(), y)
        };
        Some(kernel_status(self.kernel(), status, t))
    }

    fn scratch_bytes(&self, _: &[Operand<'_>], _: Operand<'_>) -> u64 {
        super::some_scratch(self.scratch_floats() as u64 * 4)
    }

    fn items(&self) -> super::Items {
        super::Items::Leading(2)
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        let (params, floats) = self.geometry.encode();
        let mut args = vec![
            Arg::Params(params),
            Arg::Floats(floats),
            cx.operand_arg(0),
            cx.result_arg(),
            required_scratch(cx, self)?,
        ];
        if self.dtype != DType::F32 {
            args.push(Arg::Int(expr::i((self.dtype == DType::I8) as i64)));
        }
        Ok(vec![Stmt::call(self.kernel(), args)?])
    }
}
