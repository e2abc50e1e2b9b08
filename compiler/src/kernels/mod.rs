//! Kernel ops: graph ops that run as one call of a runtime kernel, each described once.
//!
//! A kernel op is a type implementing [`KernelOp`], in one file here: its attributes, how
//! it prints, how it folds on constant operands (by calling the runtime kernel itself,
//! through the rlib), the scratch it needs and the call it lowers to (checked against the
//! kernel's C signature in `onnxc_runtime::kernels`). The graph holds it as
//! `ir::Op::Kernel`, the schedule as `schedule::StepKind::Kernel`; no other stage matches on
//! it. Adding a kernel-backed op costs a runtime file with its `kernels!` entry, a file here
//! and the frontend builder that makes it.
//!
//! Kernel ops are opaque to fusion: each becomes a step of its own. Steps with fused
//! epilogues (convolution, GEMM, pooling, layout changes) stay `Op` variants of their own,
//! as the fusion and layout passes rewrite them.

mod attention;
mod conv_transpose;
mod gather_sum;
mod gelu;
mod linear_attention;
mod lookup;
mod map;
mod max_pool_int;
mod qadd;
mod qconv;
mod qdepthwise;
mod qmatmul;
mod quantize;
mod recurrent;
mod requantize;
mod resize;
mod roi_align;
mod select;
mod softmax;
mod square;
mod string_make;
mod strings;
mod subbyte;
mod svm_probability;
mod text_tfidf;
mod tfidf;
mod topk;
mod tree_ensemble;

pub use attention::Attention;
pub use conv_transpose::ConvTranspose;
pub use gather_sum::GatherSum;
pub use gelu::Gelu;
pub use linear_attention::LinearAttention;
pub use lookup::Lookup8;
pub use map::{CastMapSparse, DictVectorize};
pub use max_pool_int::MaxPoolInt;
pub use qadd::QAdd;
pub use qconv::QConv;
pub use qdepthwise::QDepthwise;
pub use qmatmul::QMatMul;
pub use quantize::{Dequantize8, Quantize8, Quantize8Dyn};
pub use recurrent::Recurrent;
pub use requantize::Requantize;
pub use resize::Resize;
pub use roi_align::RoiAlign;
pub use select::{Nms, NonZero, Unique};
pub use softmax::Softmax;
pub use square::{MatrixOp, SquareMatrices};
pub use string_make::{StrCase, StrConcat, StrCount, StrPieces};
pub use strings::{RegexFullMatch, StrEqual, StrLookup, StrTable};
pub use subbyte::{BitCast, Pack, Unpack};
pub use svm_probability::SvmProbability;
pub use text_tfidf::TextTfIdf;
pub use tfidf::TfIdf;
pub use topk::TopK;
pub use tree_ensemble::TreeEnsemble;

use crate::ir::interp::EvalError;
use crate::ir::{DType, Tensor};
use crate::loops::{Arg, Stmt};
use onnxc_runtime::par::ScratchNeed;
use std::any::Any;
use std::fmt;

/// An operand or the result of a kernel op, as folding, sizing and lowering see it.
#[derive(Copy, Clone, Debug)]
pub struct Operand<'a> {
    pub dtype: DType,
    pub shape: &'a [i64],
    /// Whether the value is a constant of the model (weights the op may pack now).
    pub constant: bool,
}

impl Operand<'_> {
    pub fn len(&self) -> i64 {
        self.shape.iter().product()
    }
}

/// What lowering a kernel op may ask of the step it lowers.
pub trait LowerCx {
    /// Operand `k`; `k` below [`KernelOp`]'s operand count.
    fn operand(&self, k: usize) -> Operand<'_>;
    fn result(&self) -> Operand<'_>;
    /// Whether operand `k` exists (optional operands come last).
    fn has_operand(&self, k: usize) -> bool;
    /// Address of operand `k`'s first element.
    fn operand_arg(&self, k: usize) -> Arg;
    /// Address of the result's first element.
    fn result_arg(&self) -> Arg;
    /// The float32 contents of constant operand `k`.
    fn constant_f32(&self, k: usize) -> Option<Vec<f32>>;
    /// A float32 constant emitted with the object (packed weights), as an argument.
    fn new_constant_f32(&self, data: &[f32]) -> Arg;
    /// The step's scratch area, if [`KernelOp::scratch`] asked for one.
    fn scratch(&self) -> Option<Arg>;
    /// The step's string space and its bytes, if [`KernelOp::string_bytes`] asked for one.
    fn string_space(&self) -> Option<(Arg, i64)>;
}

/// A graph op run by one runtime kernel. Implementations are plain values compared by
/// their attributes (`PartialEq`), so common-subexpression elimination and dumps treat
/// them as any other op.
pub trait KernelOp: fmt::Debug + Send + Sync + KernelEq + 'static {
    /// The op's name in `--emit graph|schedule` dumps.
    fn name(&self) -> &'static str;
    /// Its attributes as dumps print them (`k=3 largest=true`), empty if none.
    fn attrs(&self) -> String;
    /// The result for constant operands (constant folding), or None where folding would
    /// cost more than about `limit` element operations (the op is then run by the model).
    /// `result` is the result's type; the operands hold the types the builder checked. By
    /// default None: ops on strings, whose elements are pointers at run time, never fold.
    fn eval(
        &self,
        _operands: &[&Tensor],
        _result: Operand<'_>,
        _limit: usize,
    ) -> Option<Result<Tensor, EvalError>> {
        None
    }
    /// Workspace bytes the kernel needs while it runs (a sequential kernel's).
    fn scratch_bytes(&self, _operands: &[Operand<'_>], _result: Operand<'_>) -> u64 {
        0
    }
    /// The scratch a call needs: shared, and per worker for a kernel that takes the run's
    /// threads (`onnxc_runtime::par::ScratchNeed`); by default `scratch_bytes`, shared.
    fn scratch(&self, operands: &[Operand<'_>], result: Operand<'_>) -> ScratchNeed {
        ScratchNeed::shared(self.scratch_bytes(operands, result) as usize)
    }
    /// Bytes of the strings the kernel makes at run time (`onnxc_runtime::string_make`):
    /// the step gets a region of the workspace that lives to the end of the run, its
    /// [`LowerCx::string_space`].
    fn string_bytes(&self, _operands: &[Operand<'_>], _result: Operand<'_>) -> u64 {
        0
    }
    /// The kernel call(s) computing the result, checked against their C signatures.
    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>>;
    /// An operand whose bytes the result may take when the operand dies at this step
    /// (`schedule::memory`): the kernel is correct with that operand and the result at the
    /// same address, which saves the result's cache misses on writing. Generated loops
    /// cannot say so: their vector tails recompute the last four elements from the operands
    /// (`codegen::func`), which would read results. By default none.
    fn in_place(&self) -> Option<usize> {
        None
    }
    /// Whether the result is exact when the operands' data-dependent axes (`operands`: the
    /// axis of each that has one, `passes::data_dims`) are read at their bound, padding
    /// included, so that the result has no data-dependent dim. By default false.
    fn reads_padded_rows(&self, _operands: &[Option<usize>], _ranks: &[usize]) -> bool {
        false
    }
    /// Bytes of constant tables the kernel reads whole for every row or item it computes (a
    /// tree ensemble's forest): weights whose traffic a batch of items shares, as a matrix
    /// product's constant operand is (`driver::batch` weighs them). By default none.
    fn table_bytes(&self) -> u64 {
        0
    }
    /// How the kernel treats the items of a run-time batch, where one of the common answers
    /// fits; `per_item` follows it unless overridden. By default `Items::Mixed`.
    fn items(&self) -> Items {
        Items::Mixed
    }
    /// Whether the kernel computes each item of a run-time batch on its own
    /// (`passes::batch`): `operands` and `results` give the axis that carries the batch in
    /// each (None: shared by every item; at least one is Some), `ranks` the operands' ranks.
    /// True only if item `i` of every result depends on item `i` of the batch-carrying
    /// operands alone. By default what `items` declares.
    fn per_item(
        &self,
        operands: &[Option<usize>],
        ranks: &[usize],
        results: &[Option<usize>],
    ) -> bool {
        match self.items() {
            Items::Mixed => false,
            Items::Rows => per_row(operands, results),
            Items::Elements => per_element(operands, results),
            Items::Leading(trailing) => per_leading(operands, ranks, results, trailing),
        }
    }
}

/// The common answers to `KernelOp::per_item`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Items {
    /// Items may mix (the default): the batch becomes a compile-time dim.
    Mixed,
    /// A kernel over rows: `per_row`.
    Rows,
    /// An elementwise kernel: `per_element`.
    Elements,
    /// A kernel over the trailing `n` dims of operand 0: `per_leading`.
    Leading(usize),
}

/// `per_item` for a kernel over rows: operand 0 and every result carry the batch as their
/// first dim, the other operands (weights, tables, zero points) are shared.
pub(crate) fn per_row(operands: &[Option<usize>], results: &[Option<usize>]) -> bool {
    operands.first() == Some(&Some(0))
        && operands[1..].iter().all(Option::is_none)
        && results.iter().all(|r| *r == Some(0))
}

/// `per_item` for an elementwise kernel: every result carries the batch in the same dim,
/// and every operand in that dim too or not at all (broadcast to every item).
pub(crate) fn per_element(operands: &[Option<usize>], results: &[Option<usize>]) -> bool {
    let axis = results.first().copied().flatten();
    axis.is_some()
        && results.iter().all(|a| *a == axis)
        && operands.iter().all(|a| a.is_none() || *a == axis)
}

/// `per_item` for a kernel over the trailing `trailing` dims of operand 0 (rows of a
/// softmax, planes of a resize, matrices of a determinant): the batch is one of the
/// leading dims, the same in the result, and no other operand carries it.
pub(crate) fn per_leading(
    operands: &[Option<usize>],
    ranks: &[usize],
    results: &[Option<usize>],
    trailing: usize,
) -> bool {
    match (operands.first(), ranks.first()) {
        (Some(&Some(a)), Some(&r)) => {
            a + trailing < r
                && operands[1..].iter().all(Option::is_none)
                && results.iter().all(|x| *x == Some(a))
        }
        _ => false,
    }
}

/// Comparison and downcasting of `dyn KernelOp`, implemented for every `KernelOp` that is
/// `PartialEq`.
pub trait KernelEq {
    fn as_any(&self) -> &dyn Any;
    fn same(&self, other: &dyn KernelOp) -> bool;
}

impl<T: KernelOp + PartialEq> KernelEq for T {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn same(&self, other: &dyn KernelOp) -> bool {
        other.as_any().downcast_ref::<T>() == Some(self)
    }
}

impl PartialEq for dyn KernelOp {
    fn eq(&self, other: &dyn KernelOp) -> bool {
        self.same(other)
    }
}

impl dyn KernelOp {
    /// The op as its concrete type, if it is one (passes that rewrite one kind of kernel
    /// op, such as `schedule::softmax_scale`).
    pub fn downcast<T: KernelOp>(&self) -> Option<&T> {
        self.as_any().downcast_ref::<T>()
    }
}

/// Scratch bytes of a kernel whose signature takes scratch: at least one word, so that the
/// call gets an address even when an empty operand needs no bytes (`required_scratch`; the
/// runtime's `planned_scratch` plans the same).
pub(crate) fn some_scratch(bytes: u64) -> u64 {
    onnxc_runtime::kernels::some_scratch(bytes as usize) as u64
}

/// The step's scratch argument, which a kernel that declared scratch must have been given.
fn required_scratch(cx: &dyn LowerCx, op: &dyn KernelOp) -> crate::Result<Arg> {
    cx.scratch()
        .ok_or_else(|| crate::Error::Internal(format!("{} lowered without scratch", op.name())))
}

/// Runs a float32 kernel `f(x, y)` on constant operand `x`, into the result's elements.
pub(crate) fn f32_kernel(
    x: &Tensor,
    result: Operand<'_>,
    f: impl FnOnce(&[f32], &mut [f32]),
) -> Tensor {
    let mut y = vec![0f32; result.len() as usize];
    f(&f32s(x), &mut y);
    f32_result(result, &y)
}

/// The elements of a float32 constant.
pub(crate) fn f32s(t: &Tensor) -> Vec<f32> {
    t.data
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// The float32 result `y` of a folded kernel op (`result` is float32).
pub(crate) fn f32_result(result: Operand<'_>, y: &[f32]) -> Tensor {
    Tensor::new(
        result.dtype,
        result.shape.to_vec(),
        y.iter().flat_map(|v| v.to_le_bytes()).collect(),
    )
}

/// The result of folding through a runtime kernel entry point that returned `status`: an
/// error unless it is `ONNXC_OK` (a kernel refuses only parameters it cannot run on, which
/// the compiler never makes).
fn kernel_status(
    kernel: &onnxc_runtime::kernels::KernelAbi,
    status: i32,
    t: Tensor,
) -> Result<Tensor, EvalError> {
    if status == onnxc_runtime::abi::ONNXC_OK {
        Ok(t)
    } else {
        Err(EvalError::KernelParams {
            kernel: kernel.symbol,
            reason: onnxc_runtime::abi::strerror(status),
        })
    }
}

/// Folds through a kernel with one worker: `run(y, shared, slots)` writes the `bytes` bytes
/// of the result at `y`, with the scratch `need` laid out at `shared` and `slots`.
fn fold_with_scratch(
    kernel: &onnxc_runtime::kernels::KernelAbi,
    need: onnxc_runtime::par::ScratchNeed,
    result: Operand<'_>,
    bytes: usize,
    run: impl FnOnce(*mut u8, *mut f32, onnxc_runtime::par::Slots),
) -> Option<Result<Tensor, EvalError>> {
    let mut scratch = vec![0f32; need.single().div_ceil(4) + 16];
    let (shared, slots) = need.layout(scratch.as_mut_ptr());
    let mut y = vec![0u8; bytes];
    run(y.as_mut_ptr(), shared, slots);
    Some(kernel_status(
        kernel,
        onnxc_runtime::abi::ONNXC_OK,
        Tensor::new(result.dtype, result.shape.to_vec(), y),
    ))
}

/// A geometry's `validate` result as a folding error.
fn valid(
    kernel: &onnxc_runtime::kernels::KernelAbi,
    r: onnxc_runtime::params::Result<()>,
) -> Result<(), EvalError> {
    r.map_err(|e| EvalError::KernelParams {
        kernel: kernel.symbol,
        reason: e.0,
    })
}

/// `bytes` copied into 8-byte words (the last one zero-padded): an aligned operand for
/// kernels that read elements of up to 8 bytes.
fn aligned_words(bytes: &[u8]) -> Vec<u64> {
    bytes
        .chunks(8)
        .map(|c| {
            let mut b = [0u8; 8];
            b[..c.len()].copy_from_slice(c);
            u64::from_ne_bytes(b)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::Op;

    /// Kernel ops compare by type and attributes, as common-subexpression elimination needs.
    #[test]
    fn kernel_ops_compare_by_type_and_attributes() {
        let topk = |k| {
            Op::kernel(TopK {
                axis: 1,
                k,
                largest: true,
            })
        };
        assert_eq!(topk(3), topk(3));
        assert_ne!(topk(3), topk(4));
        assert_eq!(Op::kernel(Gelu), Op::kernel(Gelu));
        assert_ne!(Op::kernel(Gelu), Op::kernel(Softmax::PLAIN));
        let Op::Kernel(k) = Op::kernel(Softmax {
            scale: 0.5,
            zero_inf_rows: false,
        }) else {
            unreachable!()
        };
        assert_eq!(k.downcast::<Softmax>().map(|s| s.scale), Some(0.5));
        assert!(k.downcast::<Gelu>().is_none());
        assert_eq!(k.name(), "softmax");
    }
}
