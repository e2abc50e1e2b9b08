//! Kernel ops that make strings at run time (`onnxc_runtime::string_make`,
//! `onnxc_runtime::tokenize`): case changes (`StrCase`), concatenation (`StrConcat`),
//! StringSplit's pieces (`StrSplit`) and counts (`StrSplitCount`), the Tokenizer's tokens
//! (`Tokenize`) and counts (`TokenizeCount`). Those that make strings ask for a string space of `bytes_per_string`
//! bytes per string they make (`--string-bytes`); a run whose strings need more returns
//! `ONNXC_ERR_STRINGS`. Never folded: a string is a pointer at run time.

use super::{KernelOp, LowerCx, Operand};
use crate::ir::Tensor;
use crate::ir::expr;
use crate::ir::interp::EvalError;
use crate::loops::{Arg, Stmt};
use onnxc_runtime::kernels;
use onnxc_runtime::string_make::{LOWER, SplitParams, UPPER};
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

/// StringSplit's pieces of each string of operand 0: the result is `[..., cols]`, the
/// pieces of each string, then empty strings.
#[derive(Clone, Debug, PartialEq)]
pub struct StrSplit {
    pub split: SplitParams,
    pub cols: i64,
    pub bytes_per_string: u64,
}

/// How many pieces StringSplit makes of each string of operand 0 (int64, same shape).
#[derive(Clone, Debug, PartialEq)]
pub struct StrSplitCount(pub SplitParams);

/// The Tokenizer's rows of `cols` tokens of each string of operand 0 (`[..., cols]`), given
/// operand 1, the most tokens of a string (an int64 scalar).
#[derive(Clone, Debug, PartialEq)]
pub struct Tokenize {
    /// `onnxc_runtime::tokenize::encode`'s blob.
    pub blob: Arc<Vec<i64>>,
    pub cols: i64,
    pub bytes_per_string: u64,
}

/// How many tokens the Tokenizer finds in each string of operand 0 (int64, same shape).
#[derive(Clone, Debug, PartialEq)]
pub struct TokenizeCount(pub Arc<Vec<i64>>);

/// The step's string space, which `string_bytes` asked for.
fn space(cx: &dyn LowerCx, op: &dyn KernelOp) -> crate::Result<(Arg, Arg)> {
    let (arg, bytes) = cx.string_space().ok_or_else(|| {
        crate::Error::Internal(format!("{} lowered without string space", op.name()))
    })?;
    Ok((arg, Arg::Int(expr::i(bytes))))
}

fn split_attrs(p: &SplitParams) -> String {
    format!(
        "delimiter={:?} maxsplit={}",
        String::from_utf8_lossy(&p.delimiter),
        p.maxsplit
    )
}

impl KernelOp for StrCase {
    fn name(&self) -> &'static str {
        "str_case"
    }

    fn attrs(&self) -> String {
        format!(
            "{} bytes={}",
            if self.upper { "upper" } else { "lower" },
            self.bytes_per_string
        )
    }

    fn eval(&self, _: &[&Tensor], _: Operand<'_>, _: usize) -> Option<Result<Tensor, EvalError>> {
        None
    }

    fn string_bytes(&self, _: &[Operand<'_>], result: Operand<'_>) -> u64 {
        result.len() as u64 * self.bytes_per_string
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        let (space, cap) = space(cx, self)?;
        Ok(vec![Stmt::call(
            &kernels::STR_CASE,
            vec![
                cx.operand_arg(0),
                cx.result_arg(),
                Arg::Int(expr::i(cx.result().len())),
                Arg::Int(expr::i(if self.upper { UPPER } else { LOWER })),
                space,
                cap,
            ],
        )?])
    }
}

impl KernelOp for StrConcat {
    fn name(&self) -> &'static str {
        "str_concat"
    }

    fn attrs(&self) -> String {
        format!("bytes={}", self.bytes_per_string)
    }

    fn eval(&self, _: &[&Tensor], _: Operand<'_>, _: usize) -> Option<Result<Tensor, EvalError>> {
        None
    }

    fn string_bytes(&self, _: &[Operand<'_>], result: Operand<'_>) -> u64 {
        result.len() as u64 * self.bytes_per_string
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        let (space, cap) = space(cx, self)?;
        Ok(vec![Stmt::call(
            &kernels::STR_CONCAT,
            vec![
                cx.operand_arg(0),
                cx.operand_arg(1),
                cx.result_arg(),
                Arg::Int(expr::i(cx.result().len())),
                space,
                cap,
            ],
        )?])
    }
}

impl KernelOp for StrSplit {
    fn name(&self) -> &'static str {
        "str_split"
    }

    fn attrs(&self) -> String {
        format!(
            "{} cols={} bytes={}",
            split_attrs(&self.split),
            self.cols,
            self.bytes_per_string
        )
    }

    fn eval(&self, _: &[&Tensor], _: Operand<'_>, _: usize) -> Option<Result<Tensor, EvalError>> {
        None
    }

    /// The pieces of a string are at most its bytes, plus a NUL each.
    fn string_bytes(&self, operands: &[Operand<'_>], _: Operand<'_>) -> u64 {
        operands[0].len() as u64 * (self.bytes_per_string + self.cols as u64)
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        let (space, cap) = space(cx, self)?;
        Ok(vec![Stmt::call(
            &kernels::STR_SPLIT,
            vec![
                Arg::Params(self.split.encode()),
                cx.operand_arg(0),
                cx.result_arg(),
                Arg::Int(expr::i(cx.operand(0).len())),
                Arg::Int(expr::i(self.cols)),
                space,
                cap,
            ],
        )?])
    }
}

impl KernelOp for StrSplitCount {
    fn name(&self) -> &'static str {
        "str_split_count"
    }

    fn attrs(&self) -> String {
        split_attrs(&self.0)
    }

    fn eval(&self, _: &[&Tensor], _: Operand<'_>, _: usize) -> Option<Result<Tensor, EvalError>> {
        None
    }

    fn per_item(&self, operands: &[Option<usize>], _: &[usize], results: &[Option<usize>]) -> bool {
        super::per_element(operands, results)
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        Ok(vec![Stmt::call(
            &kernels::STR_SPLIT_COUNT,
            vec![
                Arg::Params(self.0.encode()),
                cx.operand_arg(0),
                cx.result_arg(),
                Arg::Int(expr::i(cx.operand(0).len())),
            ],
        )?])
    }
}

/// `"N words"`: a tokenizer's blob as dumps print it.
fn describe(blob: &[i64]) -> String {
    format!("{} words", blob.len())
}

impl KernelOp for Tokenize {
    fn name(&self) -> &'static str {
        "tokenize"
    }

    fn attrs(&self) -> String {
        format!(
            "{} cols={} bytes={}",
            describe(&self.blob),
            self.cols,
            self.bytes_per_string
        )
    }

    fn eval(&self, _: &[&Tensor], _: Operand<'_>, _: usize) -> Option<Result<Tensor, EvalError>> {
        None
    }

    /// The tokens of a string are at most its bytes, plus a NUL each; then the pad value
    /// and the two marks, once.
    fn string_bytes(&self, operands: &[Operand<'_>], _: Operand<'_>) -> u64 {
        let pad = onnxc_runtime::tokenize::Tokenizer::decode(&self.blob).map_or(0, |t| t.pad.len());
        operands[0].len() as u64 * (self.bytes_per_string + self.cols as u64) + pad as u64 + 5
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        let (space, cap) = space(cx, self)?;
        Ok(vec![Stmt::call(
            &kernels::TOKENIZE,
            vec![
                Arg::Blob(self.blob.clone()),
                cx.operand_arg(0),
                cx.operand_arg(1),
                cx.result_arg(),
                Arg::Int(expr::i(cx.operand(0).len())),
                Arg::Int(expr::i(self.cols)),
                space,
                cap,
            ],
        )?])
    }
}

impl KernelOp for TokenizeCount {
    fn name(&self) -> &'static str {
        "tokenize_count"
    }

    fn attrs(&self) -> String {
        describe(&self.0)
    }

    fn eval(&self, _: &[&Tensor], _: Operand<'_>, _: usize) -> Option<Result<Tensor, EvalError>> {
        None
    }

    fn per_item(&self, operands: &[Option<usize>], _: &[usize], results: &[Option<usize>]) -> bool {
        super::per_element(operands, results)
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        Ok(vec![Stmt::call(
            &kernels::TOKENIZE_COUNT,
            vec![
                Arg::Blob(self.0.clone()),
                cx.operand_arg(0),
                cx.result_arg(),
                Arg::Int(expr::i(cx.operand(0).len())),
            ],
        )?])
    }
}
