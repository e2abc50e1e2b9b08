//! Transposed convolution of float32 tensors, 1-D to 3-D, grouped, run as a GEMM and a
//! col2im (`onnxc_conv_transpose_f32`): operands x, w and an optional bias. Constant
//! weights are packed at compile time. Other ConvTransposes are reductions the frontend
//! builds (`frontend::ops::nn`).

use super::{KernelOp, LowerCx, Operand, f32_kernel, valid};
use crate::ir::Tensor;
use crate::ir::expr;
use crate::ir::interp::EvalError;
use crate::loops::{Arg, Stmt};
use onnxc_runtime::conv::transpose::ConvTransposeGeometry;
use onnxc_runtime::kernels;

#[derive(Clone, Debug, PartialEq)]
pub struct ConvTranspose(pub ConvTransposeGeometry);

impl KernelOp for ConvTranspose {
    fn name(&self) -> &'static str {
        "conv_transpose"
    }

    fn attrs(&self) -> String {
        let t = &self.0;
        format!(
            "group={} kernel={:?} strides={:?} dilations={:?} pads={:?}",
            t.group, t.kernel, t.strides, t.dilations, t.pads
        )
    }

    fn eval(
        &self,
        x: &[&Tensor],
        result: Operand<'_>,
        limit: usize,
    ) -> Option<Result<Tensor, EvalError>> {
        let t = &self.0;
        let taps: usize = t.kernel.iter().product();
        let macs = (result.len() as usize)
            .saturating_mul(t.c / t.group.max(1))
            .saturating_mul(taps);
        if macs > limit.saturating_mul(16) {
            return None;
        }
        // The kernel's Rust entry point takes the geometry as it is: check it as the C one
        // checks what it decodes.
        if let Err(e) = valid(&kernels::CONV_TRANSPOSE_F32, t.validate()) {
            return Some(Err(e));
        }
        let w: Vec<f32> = x[1].to_f64s().iter().map(|&v| v as f32).collect();
        let bias: Option<Vec<f32>> = x
            .get(2)
            .map(|b| b.to_f64s().iter().map(|&v| v as f32).collect());
        let wp = t.pack_weights(&w);
        let mut scratch = vec![0f32; t.scratch_floats(true)];
        Some(Ok(f32_kernel(x[0], result, |x, y| {
            // SAFETY: x, the packed weights, the bias and y hold what the geometry
            // describes, scratch what it asks for.
            unsafe {
                onnxc_runtime::conv::transpose::conv_transpose_f32(
                    t,
                    x.as_ptr(),
                    wp.as_ptr(),
                    true,
                    bias.as_ref().map_or(std::ptr::null(), |b| b.as_ptr()),
                    f32::NEG_INFINITY,
                    f32::INFINITY,
                    y.as_mut_ptr(),
                    scratch.as_mut_ptr(),
                )
            }
        })))
    }

    fn scratch_bytes(&self, operands: &[Operand<'_>], _: Operand<'_>) -> u64 {
        self.0.scratch_floats(operands[1].constant) as u64 * 4
    }

    fn items(&self) -> super::Items {
        super::Items::Rows
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        // Constant weights packed now; a model input's at run time.
        let (w, packed) = match cx.constant_f32(1) {
            Some(w) => (cx.new_constant_f32(&self.0.pack_weights(&w)), 1),
            None => (cx.operand_arg(1), 0),
        };
        let bias = if cx.has_operand(2) {
            cx.operand_arg(2)
        } else {
            Arg::Null
        };
        Ok(vec![Stmt::call(
            &kernels::CONV_TRANSPOSE_F32,
            vec![
                Arg::Params(self.0.encode()),
                cx.operand_arg(0),
                w,
                Arg::Int(expr::i(packed)),
                bias,
                Arg::Null,
                cx.result_arg(),
                cx.scratch().unwrap_or(Arg::Null),
            ],
        )?])
    }
}
