//! String elements: positions of strings in a table of keys (`StrLookup`,
//! `onnxc_str_lookup`), a table's strings at positions (`StrTable`, `onnxc_str_gather`) and
//! the equality of two arrays of strings (`StrEqual`, `onnxc_str_equal`) and whether
//! strings match a pattern's automaton (`RegexFullMatch`, `onnxc_regex_full_match`).
//! Tables are `onnxc_runtime::strings::encode`'s arrays in the object's read-only data, so
//! an output string points there. Never folded: a string is a pointer at run time.

use super::{KernelOp, LowerCx};
use crate::ir::expr;
use crate::loops::{Arg, Stmt};
use onnxc_runtime::kernels;
use std::sync::Arc;

/// Each string element's position in the table (its first occurrence), int64, −1 where
/// absent; same shape.
#[derive(Clone, Debug, PartialEq)]
pub struct StrLookup(pub Arc<Vec<i64>>);

/// The table's string at each int64 position, which the builder keeps in range; same shape.
#[derive(Clone, Debug, PartialEq)]
pub struct StrTable(pub Arc<Vec<i64>>);

/// The call of `kernel` with `table` over every element of operand 0.
fn call(
    kernel: &'static onnxc_runtime::kernels::KernelAbi,
    table: &Arc<Vec<i64>>,
    cx: &dyn LowerCx,
) -> crate::Result<Vec<Stmt>> {
    Ok(vec![Stmt::call(
        kernel,
        vec![
            Arg::Blob(table.clone()),
            cx.operand_arg(0),
            cx.result_arg(),
            Arg::Int(expr::i(cx.operand(0).len())),
        ],
    )?])
}

/// `"N strings"`: a table's size as dumps print it.
fn describe(table: &[i64]) -> String {
    format!("{} strings", onnxc_runtime::strings::len(table))
}

impl KernelOp for StrLookup {
    fn name(&self) -> &'static str {
        "str_lookup"
    }

    fn attrs(&self) -> String {
        describe(&self.0)
    }

    fn items(&self) -> super::Items {
        super::Items::Elements
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        call(&kernels::STR_LOOKUP, &self.0, cx)
    }
}

impl KernelOp for StrTable {
    fn name(&self) -> &'static str {
        "str_table"
    }

    fn attrs(&self) -> String {
        describe(&self.0)
    }

    fn items(&self) -> super::Items {
        super::Items::Elements
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        call(&kernels::STR_GATHER, &self.0, cx)
    }
}

/// Whether operands 0 and 1 (strings of the result's shape) are equal, element by element;
/// a bool result.
#[derive(Clone, Debug, PartialEq)]
pub struct StrEqual;

impl KernelOp for StrEqual {
    fn name(&self) -> &'static str {
        "str_equal"
    }

    fn attrs(&self) -> String {
        String::new()
    }

    fn items(&self) -> super::Items {
        super::Items::Elements
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        Ok(vec![Stmt::call(
            &kernels::STR_EQUAL,
            vec![
                cx.operand_arg(0),
                cx.operand_arg(1),
                cx.result_arg(),
                Arg::Int(expr::i(cx.result().len())),
            ],
        )?])
    }
}

/// Whether each string of operand 0 matches, as a whole, the automaton of
/// `onnxc_runtime::regex::encode`'s blob; a bool result of the same shape.
#[derive(Clone, Debug, PartialEq)]
pub struct RegexFullMatch(pub Arc<Vec<i64>>);

impl KernelOp for RegexFullMatch {
    fn name(&self) -> &'static str {
        "regex_full_match"
    }

    fn attrs(&self) -> String {
        format!("table={} words", self.0.len())
    }

    fn items(&self) -> super::Items {
        super::Items::Elements
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        Ok(vec![Stmt::call(
            &kernels::REGEX_FULL_MATCH,
            vec![
                Arg::Params(self.0.to_vec()),
                cx.operand_arg(0),
                cx.result_arg(),
                Arg::Int(expr::i(cx.result().len())),
            ],
        )?])
    }
}
