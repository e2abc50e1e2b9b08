//! String elements in ai.onnx.ml operators: positions of input strings in a table of keys
//! (`kernels::StrLookup`) and strings taken from a table by position (`kernels::StrTable`); the
//! tables are stored in the object's read-only data, so an output string points there.

use crate::error::Result;
use crate::frontend::ctx::Ctx;
use crate::ir::{DType, Op, TypeInfo, ValueId};
use std::sync::Arc;

fn table(ctx: &Ctx, strings: &[String]) -> Result<Arc<Vec<i64>>> {
    if let Some(s) = strings.iter().find(|s| s.contains('\0')) {
        return Err(ctx.err(format!(
            "the string {s:?} holds a NUL byte, which a C string cannot"
        )));
    }
    let bytes: Vec<&[u8]> = strings.iter().map(|s| s.as_bytes()).collect();
    Ok(Arc::new(onnxc_runtime::strings::encode(&bytes)))
}

/// The strings `strings[pos]` of an int64 value `pos` whose elements are in range.
pub fn strings_at(ctx: &mut Ctx, pos: ValueId, strings: &[String]) -> Result<ValueId> {
    let t = table(ctx, strings)?;
    let shape = ctx.shape(pos);
    ctx.add(
        Op::kernel(crate::kernels::StrTable(t)),
        vec![pos],
        TypeInfo::new(DType::Str, shape),
    )
}

/// Each string element's position in `keys` (its first occurrence), −1 where absent.
pub fn lookup(ctx: &mut Ctx, x: ValueId, keys: &[String]) -> Result<ValueId> {
    let t = table(ctx, keys)?;
    let shape = ctx.shape(x);
    ctx.add(
        Op::kernel(crate::kernels::StrLookup(t)),
        vec![x],
        TypeInfo::new(DType::I64, shape),
    )
}
