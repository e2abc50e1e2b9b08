//! The ABI form of the 4- and 2-bit element types (int4, uint4, float4, int2, uint2): graph
//! inputs of those types arrive packed and are unpacked to one element per byte on entry
//! (`Unpack`, `onnxc_unpack_bits`); outputs are packed on exit (`Pack`, `onnxc_pack_bits`).
//! The frontend adds them around the graph (`ir::graph::GraphIo::packed`). BitCast, which
//! reinterprets those bytes, is here too.

use super::{KernelOp, LowerCx, Operand};
use crate::ir::expr;
use crate::ir::interp::EvalError;
use crate::ir::{DType, Tensor};
use crate::loops::{Arg, Stmt};
use onnxc_runtime::kernels;

/// Packed bytes (`uint8 [abi_bytes]`) → the elements of `dtype`, one per byte.
#[derive(Clone, Debug, PartialEq)]
pub struct Unpack {
    pub dtype: DType,
}

/// The elements of `dtype`, one per byte → their packed bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct Pack {
    pub dtype: DType,
}

fn bits(dtype: DType) -> crate::Result<i64> {
    dtype
        .packed_bits()
        .map(i64::from)
        .ok_or_else(|| crate::Error::Internal(format!("{dtype} is not a packed type")))
}

impl KernelOp for Unpack {
    fn name(&self) -> &'static str {
        "unpack_bits"
    }

    fn attrs(&self) -> String {
        format!("dtype={}", self.dtype)
    }

    fn eval(
        &self,
        x: &[&Tensor],
        result: Operand<'_>,
        _: usize,
    ) -> Option<Result<Tensor, EvalError>> {
        let data = self.dtype.unpack(&x[0].data, result.len() as usize)?;
        Some(Ok(Tensor::new(result.dtype, result.shape.to_vec(), data)))
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        Ok(vec![Stmt::call(
            &kernels::UNPACK_BITS,
            vec![
                cx.operand_arg(0),
                cx.result_arg(),
                Arg::Int(expr::i(cx.result().len())),
                Arg::Int(expr::i(bits(self.dtype)?)),
                Arg::Int(expr::i(self.dtype.is_signed_int() as i64)),
            ],
        )?])
    }
}

impl KernelOp for Pack {
    fn name(&self) -> &'static str {
        "pack_bits"
    }

    fn attrs(&self) -> String {
        format!("dtype={}", self.dtype)
    }

    fn eval(
        &self,
        x: &[&Tensor],
        result: Operand<'_>,
        _: usize,
    ) -> Option<Result<Tensor, EvalError>> {
        let data = self.dtype.pack(&x[0].data);
        Some(Ok(Tensor::new(result.dtype, result.shape.to_vec(), data)))
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        Ok(vec![Stmt::call(
            &kernels::PACK_BITS,
            vec![
                cx.operand_arg(0),
                cx.result_arg(),
                Arg::Int(expr::i(cx.operand(0).len())),
                Arg::Int(expr::i(bits(self.dtype)?)),
            ],
        )?])
    }
}

/// BitCast: the bits of each element as another type of the same width
/// (`onnxc_bit_cast`). Inside a model the types of one width share their byte form but for
/// the 4- and 2-bit integers (extended to a byte) and bool (0/1), which the kernel restores.
#[derive(Clone, Debug, PartialEq)]
pub struct BitCast {
    pub to: DType,
}

impl BitCast {
    fn args(&self) -> (i64, i64, i64) {
        // The 4- and 2-bit integers (float4 keeps its code's byte as it is).
        let bits = match self.to.packed_bits() {
            Some(b) if self.to.is_int() => b as i64,
            _ => 0,
        };
        (
            bits,
            self.to.is_signed_int() as i64,
            (self.to == DType::Bool) as i64,
        )
    }
}

impl KernelOp for BitCast {
    fn name(&self) -> &'static str {
        "bit_cast"
    }

    fn attrs(&self) -> String {
        format!("to={}", self.to)
    }

    fn eval(
        &self,
        x: &[&Tensor],
        result: Operand<'_>,
        _: usize,
    ) -> Option<Result<Tensor, EvalError>> {
        let (bits, signed, to_bool) = self.args();
        let mut y = vec![0u8; x[0].data.len()];
        onnxc_runtime::subbyte::bit_cast(
            &x[0].data,
            &mut y,
            bits as u32,
            signed != 0,
            to_bool != 0,
        );
        Some(Ok(Tensor::new(result.dtype, result.shape.to_vec(), y)))
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        let (bits, signed, to_bool) = self.args();
        let bytes = cx.result().len() * self.to.size() as i64;
        Ok(vec![Stmt::call(
            &kernels::BIT_CAST,
            vec![
                cx.operand_arg(0),
                cx.result_arg(),
                Arg::Int(expr::i(bytes)),
                Arg::Int(expr::i(bits)),
                Arg::Int(expr::i(signed)),
                Arg::Int(expr::i(to_bool)),
            ],
        )?])
    }
}
