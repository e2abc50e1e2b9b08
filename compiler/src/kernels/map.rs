//! Kernel ops that read a map input (`onnxc_runtime::map`): DictVectorizer
//! (`DictVectorize`) and CastMap's SPARSE form (`CastMapSparse`). Operand 0 is the map's
//! `onnxc_map` descriptor (an int64 `[3]` input); the kernels read the caller's arrays
//! through it, so they are never folded.

use super::{KernelOp, LowerCx};
use crate::ir::expr;
use crate::loops::{Arg, Stmt};
use onnxc_runtime::kernels;
use std::sync::Arc;

/// The map's values at their keys' positions in a vocabulary: `table` is
/// `strings::encode`'s table (string keys) or `map::encode_ints`' (int64 keys). The result
/// holds one 4- or 8-byte value per vocabulary entry.
#[derive(Clone, Debug, PartialEq)]
pub struct DictVectorize {
    pub table: Arc<Vec<i64>>,
    pub string_keys: bool,
}

/// The map's values at the positions its int64 keys give, for keys below the result's
/// length.
#[derive(Clone, Debug, PartialEq)]
pub struct CastMapSparse;

/// 4 or 8: the bytes of one value of the result.
fn value_bytes(cx: &dyn LowerCx) -> Arg {
    Arg::Int(expr::i(cx.result().dtype.size() as i64))
}

impl KernelOp for DictVectorize {
    fn name(&self) -> &'static str {
        "dict_vectorize"
    }

    fn attrs(&self) -> String {
        let kind = if self.string_keys { "string" } else { "int64" };
        format!("{kind} keys")
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        Ok(vec![Stmt::call(
            &kernels::DICT_VECTORIZE,
            vec![
                Arg::Blob(self.table.clone()),
                cx.operand_arg(0),
                cx.result_arg(),
                value_bytes(cx),
                Arg::Int(expr::i(self.string_keys as i64)),
            ],
        )?])
    }
}

impl KernelOp for CastMapSparse {
    fn name(&self) -> &'static str {
        "cast_map_sparse"
    }

    fn attrs(&self) -> String {
        String::new()
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        Ok(vec![Stmt::call(
            &kernels::CAST_MAP_SPARSE,
            vec![
                cx.operand_arg(0),
                cx.result_arg(),
                Arg::Int(expr::i(cx.result().len())),
                value_bytes(cx),
            ],
        )?])
    }
}
