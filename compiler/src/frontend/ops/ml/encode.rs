//! String elements in ai.onnx.ml operators: positions of input strings in a table of keys
//! (`kernels::StrLookup`) and strings taken from a table by position (`kernels::StrTable`); the
//! tables are stored in the object's read-only data, so an output string points there.

use crate::error::Result;
use crate::frontend::ctx::Ctx;
use crate::ir::{DType, Op, TypeInfo, ValueId};
use std::sync::Arc;

fn table(ctx: &Ctx, strings: &[String]) -> Result<Arc<Vec<i64>>> {
    let bytes: Vec<&[u8]> = strings.iter().map(|s| s.as_bytes()).collect();
    string_table(&bytes).map_err(|s| {
        ctx.err(format!(
            "the string {:?} holds a NUL byte, which a C string cannot",
            String::from_utf8_lossy(&s)
        ))
    })
}

/// The runtime's table of `strings` (`onnxc_runtime::strings::encode`), or the first string
/// that holds a NUL byte.
pub fn string_table<S: AsRef<[u8]>>(strings: &[S]) -> std::result::Result<Arc<Vec<i64>>, Vec<u8>> {
    if let Some(s) = strings.iter().find(|s| s.as_ref().contains(&0)) {
        return Err(s.as_ref().to_vec());
    }
    let bytes: Vec<&[u8]> = strings.iter().map(|s| s.as_ref()).collect();
    Ok(Arc::new(onnxc_runtime::strings::encode(&bytes)))
}

/// A string constant of shape `shape`: the strings taken from their table at run time.
pub fn string_constant(ctx: &mut Ctx, shape: Vec<i64>, strings: &[String]) -> Result<ValueId> {
    let n = strings.len() as i64;
    if shape.iter().product::<i64>() != n {
        return Err(ctx.err(format!(
            "a string tensor of shape {shape:?} holds {n} strings"
        )));
    }
    let pos = ctx.constant(crate::ir::Tensor::from_i64s(
        shape,
        &(0..n).collect::<Vec<_>>(),
    ));
    strings_at(ctx, pos, strings)
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
