//! Kernel ops that make strings at run time (`onnxc_runtime::string_make`,
//! `onnxc_runtime::tokenize`): case changes (`StrCase`), concatenation (`StrConcat`), the
//! pieces StringSplit and the Tokenizer cut strings into (`StrPieces`) and how many each
//! string gives (`StrCount`). Those that make strings ask for a string space of
//! `bytes_per_string` bytes per string (`--string-bytes`); a run whose strings need more
//! returns `ONNXC_ERR_STRINGS`.

use super::{KernelOp, LowerCx, Operand};
use crate::ir::expr;
use crate::loops::{Arg, Stmt};
use onnxc_runtime::kernels::{self, KernelAbi};
use onnxc_runtime::string_make::{LOWER, UPPER};
use std::sync::Arc;

/// Each string of operand 0 in upper (or lower) case; same shape.
#[derive(Clone, Debug, PartialEq)]
pub struct StrCase {
    pub upper: bool,
    pub bytes_per_string: u64,
}

/// Each string of operand 0 followed by the string of operand 1 at the same position (both
/// of the result's shape).
#[derive(Clone, Debug, PartialEq)]
pub struct StrConcat {
    pub bytes_per_string: u64,
}

/// The pieces `kernel` cuts each string of operand 0 into, `cols` a string (`[..., cols]`):
/// StringSplit's (`STR_SPLIT`, `SplitParams`' blob) or the Tokenizer's (`TOKENIZE`,
/// `tokenize::encode`'s blob).
#[derive(Clone, Debug, PartialEq)]
pub struct StrPieces {
    pub kernel: &'static KernelAbi,
    pub blob: Arc<Vec<i64>>,
    pub cols: i64,
    pub bytes_per_string: u64,
    /// Bytes made once a call (the Tokenizer's pad value and marks).
    pub once: u64,
}

/// How many pieces `kernel` finds in each string of operand 0 (int64, same shape):
/// `STR_SPLIT_COUNT` or `TOKENIZE_COUNT` with `StrPieces`' blob.
#[derive(Clone, Debug, PartialEq)]
pub struct StrCount {
    pub kernel: &'static KernelAbi,
    pub blob: Arc<Vec<i64>>,
}

/// The step's string space and its size, which `string_bytes` asked for.
fn space(cx: &dyn LowerCx, op: &dyn KernelOp) -> crate::Result<[Arg; 2]> {
    let (arg, bytes) = cx.string_space().ok_or_else(|| {
        crate::Error::Internal(format!("{} lowered without string space", op.name()))
    })?;
    Ok([arg, Arg::Int(expr::i(bytes))])
}

/// The string space of `per` bytes for each of `n` strings.
fn bytes(n: i64, per: u64) -> u64 {
    (n as u64).saturating_mul(per)
}

impl KernelOp for StrCase {
    fn name(&self) -> &'static str {
        "str_case"
    }

    fn attrs(&self) -> String {
        let case = if self.upper { "upper" } else { "lower" };
        format!("{case} bytes={}", self.bytes_per_string)
    }

    fn string_bytes(&self, _: &[Operand<'_>], result: Operand<'_>) -> u64 {
        bytes(result.len(), self.bytes_per_string)
    }

    /// Each item's strings are made in the same space, after the previous item's run:
    /// `driver` refuses the batch where a made string reaches an output.
    fn items(&self) -> super::Items {
        super::Items::Elements
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        let case = if self.upper { UPPER } else { LOWER };
        let mut args = vec![
            cx.operand_arg(0),
            cx.result_arg(),
            Arg::Int(expr::i(cx.result().len())),
            Arg::Int(expr::i(case)),
        ];
        args.extend(space(cx, self)?);
        Ok(vec![Stmt::call(&kernels::STR_CASE, args)?])
    }
}

impl KernelOp for StrConcat {
    fn name(&self) -> &'static str {
        "str_concat"
    }

    fn attrs(&self) -> String {
        format!("bytes={}", self.bytes_per_string)
    }

    fn string_bytes(&self, _: &[Operand<'_>], result: Operand<'_>) -> u64 {
        bytes(result.len(), self.bytes_per_string)
    }

    /// Each item's strings are made in the same space, after the previous item's run:
    /// `driver` refuses the batch where a made string reaches an output.
    fn items(&self) -> super::Items {
        super::Items::Elements
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        let mut args = vec![
            cx.operand_arg(0),
            cx.operand_arg(1),
            cx.result_arg(),
            Arg::Int(expr::i(cx.result().len())),
        ];
        args.extend(space(cx, self)?);
        Ok(vec![Stmt::call(&kernels::STR_CONCAT, args)?])
    }
}

impl KernelOp for StrPieces {
    fn name(&self) -> &'static str {
        "str_pieces"
    }

    fn attrs(&self) -> String {
        format!(
            "{} blob={} words cols={} bytes={}",
            self.kernel.symbol,
            self.blob.len(),
            self.cols,
            self.bytes_per_string
        )
    }

    /// The pieces of a string are at most its bytes, plus a NUL each.
    fn string_bytes(&self, operands: &[Operand<'_>], _: Operand<'_>) -> u64 {
        bytes(
            operands[0].len(),
            self.bytes_per_string.saturating_add(self.cols as u64),
        )
        .saturating_add(self.once)
    }

    /// As `StrCase`'s; the Tokenizer's row length then follows each item's strings, which
    /// only its padding shows (`passes::data_dims` lets that reach no output).
    fn items(&self) -> super::Items {
        super::Items::Leading(0)
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        let mut args = vec![Arg::Blob(self.blob.clone()), cx.operand_arg(0)];
        args.extend([
            cx.result_arg(),
            Arg::Int(expr::i(cx.operand(0).len())),
            Arg::Int(expr::i(self.cols)),
        ]);
        args.extend(space(cx, self)?);
        Ok(vec![Stmt::call(self.kernel, args)?])
    }
}

impl KernelOp for StrCount {
    fn name(&self) -> &'static str {
        "str_count"
    }

    fn attrs(&self) -> String {
        format!("{} blob={} words", self.kernel.symbol, self.blob.len())
    }

    fn items(&self) -> super::Items {
        super::Items::Elements
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        Ok(vec![Stmt::call(
            self.kernel,
            vec![
                Arg::Blob(self.blob.clone()),
                cx.operand_arg(0),
                cx.result_arg(),
                Arg::Int(expr::i(cx.operand(0).len())),
            ],
        )?])
    }
}
