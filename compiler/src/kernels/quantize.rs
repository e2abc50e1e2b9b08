//! QuantizeLinear and DequantizeLinear of a whole tensor with one constant scale and zero
//! point (`onnxc_quantize_f32_8`, `onnxc_dequantize_8_f32`): the schedule's bare
//! quantizing and dequantizing map steps (`schedule::quant_maps`), computed by the runtime
//! at the CPU's widest vectors with the map's float32 operations, bit for bit.

use super::{KernelOp, LowerCx, Operand};
use crate::ir::expr;
use crate::ir::interp::EvalError;
use crate::ir::{DType, Tensor};
use crate::loops::{Arg, Stmt};
use onnxc_runtime::kernels;
use onnxc_runtime::par::Par;
use onnxc_runtime::quantize::SIGNED;

/// `y = clamp(round_half_even(x / scale) + zp)` to uint8 or int8 (`signed`).
#[derive(Clone, Debug, PartialEq)]
pub struct Quantize8 {
    pub scale: f32,
    pub zp: i64,
    pub signed: bool,
}

/// `y = (x − zp) · scale` from uint8 or int8 (`signed`) to float32.
#[derive(Clone, Debug, PartialEq)]
pub struct Dequantize8 {
    pub scale: f32,
    pub zp: i64,
    pub signed: bool,
}

/// QuantizeLinear with a scale and zero point the run computed (DynamicQuantizeLinear):
/// operand 0 the floats, operand 1 `[scale, zero point]` (float32, the zero point integral
/// or NaN). The same float32 operations as `Quantize8`.
#[derive(Clone, Debug, PartialEq)]
pub struct Quantize8Dyn {
    pub signed: bool,
}

impl KernelOp for Quantize8Dyn {
    fn name(&self) -> &'static str {
        "quantize8_dyn"
    }

    fn attrs(&self) -> String {
        format!("out={}", out_type(self.signed))
    }

    fn eval(
        &self,
        x: &[&Tensor],
        result: Operand<'_>,
        _: usize,
    ) -> Option<Result<Tensor, EvalError>> {
        let n = result.len() as usize;
        if x[0].dtype != DType::F32 || x[0].data.len() != 4 * n || x[1].data.len() != 8 {
            return None;
        }
        let (v, sz) = (super::f32s(x[0]), super::f32s(x[1]));
        let mut y = vec![0u8; n];
        // SAFETY: v holds n floats, sz two, y n bytes; no threads.
        unsafe {
            onnxc_runtime::quantize::onnxc_quantize_f32_8_dyn(
                v.as_ptr(),
                n as i64,
                sz.as_ptr(),
                if self.signed { SIGNED } else { 0 },
                y.as_mut_ptr(),
                std::ptr::null(),
            )
        };
        Some(Ok(Tensor::new(result.dtype, result.shape.to_vec(), y)))
    }

    fn items(&self) -> super::Items {
        super::Items::Elements
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        Ok(vec![Stmt::call(
            &kernels::QUANTIZE_F32_8_DYN,
            vec![
                cx.operand_arg(0),
                Arg::Int(expr::i(cx.result().len())),
                cx.operand_arg(1),
                Arg::Int(expr::i(if self.signed { SIGNED } else { 0 })),
                cx.result_arg(),
                Arg::Threads,
            ],
        )?])
    }
}

/// The call of either kernel: they share their signature's shape.
fn call(
    kernel: crate::loops::Kernel,
    cx: &dyn LowerCx,
    scale: f32,
    zp: i64,
    signed: bool,
) -> crate::Result<Vec<Stmt>> {
    Ok(vec![Stmt::call(
        kernel,
        vec![
            cx.operand_arg(0),
            Arg::Int(expr::i(cx.result().len())),
            Arg::Floats(vec![scale]),
            Arg::Int(expr::i(zp)),
            Arg::Int(expr::i(if signed { SIGNED } else { 0 })),
            cx.result_arg(),
            Arg::Threads,
        ],
    )?])
}

fn out_type(signed: bool) -> &'static str {
    if signed { "I8" } else { "U8" }
}

impl KernelOp for Quantize8 {
    fn name(&self) -> &'static str {
        "quantize8"
    }

    fn attrs(&self) -> String {
        format!(
            "scale={} zero_point={} out={}",
            self.scale,
            self.zp,
            out_type(self.signed)
        )
    }

    fn eval(
        &self,
        x: &[&Tensor],
        result: Operand<'_>,
        _: usize,
    ) -> Option<Result<Tensor, EvalError>> {
        let n = result.len() as usize;
        if x[0].dtype != DType::F32 || x[0].data.len() != 4 * n {
            return None;
        }
        let v: Vec<f32> = super::f32s(x[0]);
        let mut y = vec![0u8; n];
        // SAFETY: v holds n floats, y n bytes.
        unsafe {
            onnxc_runtime::quantize::quantize(
                v.as_ptr(),
                n,
                self.scale,
                self.zp,
                self.signed,
                y.as_mut_ptr(),
                Par::SEQ,
            )
        };
        Some(Ok(Tensor::new(result.dtype, result.shape.to_vec(), y)))
    }

    fn items(&self) -> super::Items {
        super::Items::Elements
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        call(
            &kernels::QUANTIZE_F32_8,
            cx,
            self.scale,
            self.zp,
            self.signed,
        )
    }
}

impl KernelOp for Dequantize8 {
    fn name(&self) -> &'static str {
        "dequantize8"
    }

    fn attrs(&self) -> String {
        format!(
            "scale={} zero_point={} in={}",
            self.scale,
            self.zp,
            out_type(self.signed)
        )
    }

    fn eval(
        &self,
        x: &[&Tensor],
        result: Operand<'_>,
        _: usize,
    ) -> Option<Result<Tensor, EvalError>> {
        let n = result.len() as usize;
        if x[0].data.len() != n {
            return None;
        }
        let mut y = vec![0f32; n];
        // SAFETY: the operand holds n bytes, y n floats.
        unsafe {
            onnxc_runtime::quantize::dequantize(
                x[0].data.as_ptr(),
                n,
                self.scale,
                self.zp,
                self.signed,
                y.as_mut_ptr(),
                Par::SEQ,
            )
        };
        Some(Ok(super::f32_result(result, &y)))
    }

    fn items(&self) -> super::Items {
        super::Items::Elements
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        call(
            &kernels::DEQUANTIZE_8_F32,
            cx,
            self.scale,
            self.zp,
            self.signed,
        )
    }
}
