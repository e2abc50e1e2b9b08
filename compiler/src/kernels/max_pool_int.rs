//! 2-D max pooling of uint8 or int8 tensors (`onnxc_max_pool_i8`): MaxPool on quantized
//! values (QOperator models, and QDQ models whose MaxPool runs on the quantized values,
//! `frontend::ops::qdq`). Float pools are `ir::Op::Pool`.

use super::{KernelOp, LowerCx, Operand, kernel_status, valid};
use crate::ir::Tensor;
use crate::ir::expr;
use crate::ir::interp::EvalError;
use crate::loops::{Arg, Stmt};
use onnxc_runtime::kernels;
use onnxc_runtime::par::Par;
use onnxc_runtime::pool::PoolGeometry;

#[derive(Clone, Debug, PartialEq)]
pub struct MaxPoolInt {
    /// A max pool's geometry (`kind` 0) over `[planes, h, w]`.
    pub geometry: PoolGeometry,
    /// int8 (else uint8).
    pub signed: bool,
}

impl KernelOp for MaxPoolInt {
    fn name(&self) -> &'static str {
        "max_pool_int"
    }

    fn attrs(&self) -> String {
        let g = &self.geometry;
        format!(
            "signed={} kernel={:?} strides={:?} dilations={:?} pads={:?}",
            self.signed, g.kernel, g.strides, g.dilations, g.pads_begin
        )
    }

    fn eval(
        &self,
        x: &[&Tensor],
        result: Operand<'_>,
        _: usize,
    ) -> Option<Result<Tensor, EvalError>> {
        if let Err(e) = valid(&kernels::MAX_POOL_I8, self.geometry.validate()) {
            return Some(Err(e));
        }
        let mut y = vec![0u8; result.len() as usize];
        // SAFETY: the operand and result hold the planes the geometry describes.
        unsafe {
            onnxc_runtime::pool::int8::max_pool_i8(
                &self.geometry,
                self.signed,
                x[0].data.as_ptr(),
                y.as_mut_ptr(),
                Par::SEQ,
            )
        };
        Some(kernel_status(
            &kernels::MAX_POOL_I8,
            onnxc_runtime::abi::ONNXC_OK,
            Tensor::new(result.dtype, result.shape.to_vec(), y),
        ))
    }

    fn items(&self) -> super::Items {
        super::Items::Rows
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        Ok(vec![Stmt::call(
            &kernels::MAX_POOL_I8,
            vec![
                Arg::Params(self.geometry.encode()),
                cx.operand_arg(0),
                cx.result_arg(),
                Arg::Int(expr::i(self.signed as i64)),
                Arg::Threads,
            ],
        )?])
    }
}
