//! Data-dependent selections (`onnxc_runtime::select`): the positions of the non-zero
//! elements (ONNX NonZero, and Compress through it), the boxes NonMaxSuppression keeps and
//! the distinct slices Unique finds. Each result is int64 `[1 + …]`: the count of rows
//! found, then the rows at their capacity, zero-padded. The builders (`frontend::ops::select`) slice the count and the
//! rows apart and declare the rows' extent data-dependent (`ir::graph::DataDim`).

use super::{KernelOp, LowerCx, Operand, aligned_words, kernel_status, required_scratch};
use crate::ir::interp::EvalError;
use crate::ir::{DType, Tensor};
use crate::loops::{Arg, Stmt};
use onnxc_runtime::kernels;
use onnxc_runtime::select::{NmsParams, NonZeroParams, UniqueParams};

/// NonZero's positions of an operand of `dims`.
#[derive(Clone, Debug, PartialEq)]
pub struct NonZero {
    pub dims: Vec<i64>,
}

impl NonZero {
    fn params(&self, dtype: DType) -> Vec<i64> {
        // float8 and float4 codes compare as bytes (their negative zero counts as non-zero).
        let float = dtype.is_float() && dtype.size() >= 2;
        NonZeroParams::encode(dtype.size() as i64, float, &self.dims)
    }

    /// Words of the result: the count, then `max(rank, 1)` rows of one position per element.
    pub fn result_len(dims: &[i64]) -> i64 {
        1 + dims.len().max(1) as i64 * dims.iter().product::<i64>()
    }
}

impl KernelOp for NonZero {
    fn name(&self) -> &'static str {
        "nonzero"
    }

    fn attrs(&self) -> String {
        String::new()
    }

    fn eval(
        &self,
        x: &[&Tensor],
        result: Operand<'_>,
        limit: usize,
    ) -> Option<Result<Tensor, EvalError>> {
        if result.len() as usize > limit {
            return None;
        }
        let x = x[0];
        let params = self.params(x.dtype);
        let mut y = vec![0i64; result.len() as usize];
        let aligned = aligned_words(&x.data);
        // SAFETY: params is a sealed blob; `aligned` holds the elements it describes,
        // aligned for their size, and y the result's words.
        let status = unsafe {
            onnxc_runtime::select::onnxc_nonzero(
                params.as_ptr(),
                aligned.as_ptr() as *const u8,
                y.as_mut_ptr(),
            )
        };
        let t = Tensor::from_i64s(result.shape.to_vec(), &y);
        Some(kernel_status(&kernels::NONZERO, status, t))
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        let x = cx.operand(0);
        Ok(vec![Stmt::call(
            &kernels::NONZERO,
            vec![
                Arg::Params(self.params(x.dtype)),
                cx.operand_arg(0),
                cx.result_arg(),
            ],
        )?])
    }
}

/// NonMaxSuppression's selected `[batch, class, box]` rows, at most `capacity`.
#[derive(Clone, Debug, PartialEq)]
pub struct Nms {
    pub center_point_box: bool,
    pub has_score_threshold: bool,
    pub capacity: i64,
}

impl Nms {
    fn params(&self, scores: &[i64]) -> Vec<i64> {
        NmsParams::encode([
            scores[0],
            scores[1],
            scores[2],
            self.center_point_box as i64,
            self.has_score_threshold as i64,
            self.capacity,
        ])
    }
}

impl KernelOp for Nms {
    fn name(&self) -> &'static str {
        "nms"
    }

    fn attrs(&self) -> String {
        format!(
            "center_point_box={} score_threshold={} capacity={}",
            self.center_point_box, self.has_score_threshold, self.capacity
        )
    }

    fn eval(
        &self,
        x: &[&Tensor],
        result: Operand<'_>,
        limit: usize,
    ) -> Option<Result<Tensor, EvalError>> {
        // Per batch and class, a sort and up to boxes² overlap tests.
        let s = x[1].shape[2] as usize;
        let cost = (x[1].len()).saturating_mul(s.max(1));
        if cost > limit {
            return None;
        }
        let params = self.params(&x[1].shape);
        let f32s = |t: &Tensor| super::f32s(t);
        let (boxes, scores, iou, score) = (f32s(x[0]), f32s(x[1]), f32s(x[3]), f32s(x[4]));
        let max = x[2].to_i64s();
        let mut y = vec![0i64; result.len() as usize];
        let mut scratch = vec![0i64; 2 * x[1].shape[2] as usize];
        // SAFETY: params is a sealed blob; the operands hold the elements it describes, y
        // the result's words, scratch 2·boxes words.
        let status = unsafe {
            onnxc_runtime::select::onnxc_nms(
                params.as_ptr(),
                boxes.as_ptr(),
                scores.as_ptr(),
                max.as_ptr(),
                iou.as_ptr(),
                score.as_ptr(),
                y.as_mut_ptr(),
                scratch.as_mut_ptr(),
            )
        };
        let t = Tensor::from_i64s(result.shape.to_vec(), &y);
        Some(kernel_status(&kernels::NMS, status, t))
    }

    fn scratch_bytes(&self, operands: &[Operand<'_>], _: Operand<'_>) -> u64 {
        super::some_scratch(operands[1].shape[2] as u64 * 16)
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        let scores = cx.operand(1);
        let mut args = vec![Arg::Params(self.params(scores.shape))];
        args.extend((0..5).map(|k| cx.operand_arg(k)));
        args.push(cx.result_arg());
        args.push(required_scratch(cx, self)?);
        Ok(vec![Stmt::call(&kernels::NMS, args)?])
    }
}

/// Unique's distinct slices along the middle axis of an operand seen as `[outer, n, inner]`:
/// the count, then `n` slots each of first positions, inverse indices and counts.
#[derive(Clone, Debug, PartialEq)]
pub struct Unique {
    pub outer: i64,
    pub n: i64,
    pub inner: i64,
    pub sorted: bool,
}

impl Unique {
    fn params(&self, dtype: DType) -> Vec<i64> {
        UniqueParams::encode([
            dtype.onnx_code() as i64,
            self.outer,
            self.n,
            self.inner,
            self.sorted as i64,
        ])
    }

    /// The element types the kernel compares.
    pub fn supports(dtype: DType) -> bool {
        onnxc_runtime::select::UNIQUE_DTYPES.contains(&(dtype.onnx_code() as i64))
    }
}

impl KernelOp for Unique {
    fn name(&self) -> &'static str {
        "unique"
    }

    fn attrs(&self) -> String {
        format!(
            "outer={} n={} inner={} sorted={}",
            self.outer, self.n, self.inner, self.sorted
        )
    }

    fn eval(
        &self,
        x: &[&Tensor],
        result: Operand<'_>,
        limit: usize,
    ) -> Option<Result<Tensor, EvalError>> {
        // A sort of n slices, each comparison reading up to a slice.
        let n = self.n.max(1) as usize;
        let cost = x[0]
            .len()
            .saturating_mul(n.ilog2() as usize + 1)
            .max(result.len() as usize);
        if cost > limit {
            return None;
        }
        let x = x[0];
        let params = self.params(x.dtype);
        let mut y = vec![0i64; result.len() as usize];
        let mut scratch = vec![0i64; 3 * self.n as usize];
        let aligned = aligned_words(&x.data);
        // SAFETY: params is a sealed blob; `aligned` holds the elements it describes,
        // aligned for their type; y the result's words, scratch 3·n words.
        let status = unsafe {
            onnxc_runtime::select::onnxc_unique(
                params.as_ptr(),
                aligned.as_ptr() as *const u8,
                y.as_mut_ptr(),
                scratch.as_mut_ptr(),
            )
        };
        let t = Tensor::from_i64s(result.shape.to_vec(), &y);
        Some(kernel_status(&kernels::UNIQUE, status, t))
    }

    fn scratch_bytes(&self, _: &[Operand<'_>], _: Operand<'_>) -> u64 {
        super::some_scratch(self.n as u64 * 24)
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        let x = cx.operand(0);
        Ok(vec![Stmt::call(
            &kernels::UNIQUE,
            vec![
                Arg::Params(self.params(x.dtype)),
                cx.operand_arg(0),
                cx.result_arg(),
                required_scratch(cx, self)?,
            ],
        )?])
    }
}
