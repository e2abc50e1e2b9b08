//! The ONNX-ML operators that read a map input (`ir::graph::MapInput`, passed as an
//! `onnxc_map`): DictVectorizer and CastMap. Both become one call of a `onnxc_runtime::map`
//! kernel over the caller's arrays; shapes follow onnxruntime (`[1, n]`).

use super::encode::string_table;
use crate::error::Result;
use crate::frontend::build;
use crate::frontend::ctx::Ctx;
use crate::ir::dim::Dim;
use crate::ir::graph::Op;
use crate::ir::{DType, TypeInfo, ValueId};
use crate::kernels::{CastMapSparse, DictVectorize};
use std::sync::Arc;

/// DictVectorizer: the map's values at their keys' positions in `int64_vocabulary` or
/// `string_vocabulary`, `[1, vocabulary]`, zero (or an empty string) where the map has no
/// such key; keys outside the vocabulary are ignored.
pub fn dict_vectorizer(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (map, ty) = ctx.map_input(0)?;
    let ints = ctx.attr_ints("int64_vocabulary").filter(|v| !v.is_empty());
    let strs = ctx
        .attr_strings("string_vocabulary")
        .filter(|v| !v.is_empty());
    let (table, string_keys, n) = match (ints, strs) {
        (Some(v), None) => (
            Arc::new(onnxc_runtime::map::encode_ints(&v)),
            false,
            v.len(),
        ),
        (None, Some(v)) => {
            let t = string_table(&v).map_err(|s| {
                ctx.err(format!(
                    "string_vocabulary entry {:?} holds a NUL byte",
                    String::from_utf8_lossy(&s)
                ))
            })?;
            (t, true, v.len())
        }
        _ => {
            return Err(ctx.err(
                "exactly one of 'int64_vocabulary' and 'string_vocabulary' must be given, non-empty",
            ));
        }
    };
    let key = if string_keys { DType::Str } else { DType::I64 };
    // The operator's types: map(string, int64|float|double), map(int64, string|float|double).
    let allowed = match ty.key {
        DType::Str => [DType::I64, DType::F32, DType::F64].contains(&ty.value),
        _ => [DType::Str, DType::F32, DType::F64].contains(&ty.value),
    };
    if ty.key != key || !allowed {
        return Err(ctx.err(format!(
            "the input is a map({}, {}) and the vocabulary holds {} keys; DictVectorizer takes \
             map(string, int64|float|double) with string_vocabulary or map(int64, \
             string|float|double) with int64_vocabulary",
            ty.key, ty.value, key
        )));
    }
    let out = TypeInfo::new(ty.value, vec![Dim::Known(1), Dim::Known(n as i64)]);
    let y = ctx.add(
        Op::kernel(DictVectorize { table, string_keys }),
        vec![map],
        out,
    )?;
    Ok(vec![y])
}

/// CastMap: a map(int64, string|float) as a tensor. The SPARSE form, `[1, max_map]` with
/// each key's value at the position the key gives (keys from `max_map` on ignored, a
/// negative key `ONNXC_ERR_VALUE` as onnxruntime refuses it; zero or an empty string
/// elsewhere), cast to `cast_to`: float values to TO_FLOAT or TO_INT64
/// (truncated), string values to TO_STRING. The DENSE form (the default) has one column per
/// entry, a count only the call knows, and is refused, as are conversions between strings
/// and numbers.
pub fn cast_map(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (map, ty) = ctx.map_input(0)?;
    if ty.key != DType::I64 || !matches!(ty.value, DType::F32 | DType::Str) {
        return Err(ctx.err(format!(
            "the input is a map({}, {}); CastMap takes map(int64, string|float)",
            ty.key, ty.value
        )));
    }
    let to = match ctx.attr_s_or("cast_to", "TO_FLOAT")?.as_str() {
        "TO_FLOAT" => DType::F32,
        "TO_INT64" => DType::I64,
        "TO_STRING" => DType::Str,
        other => {
            return Err(ctx.err(format!(
                "cast_to '{other}' is not one of TO_FLOAT, TO_INT64 and TO_STRING"
            )));
        }
    };
    let form = ctx.attr_s_or("map_form", "DENSE")?;
    match form.as_str() {
        "SPARSE" => {}
        "DENSE" => {
            return Err(ctx.unsupported(
                "map_form DENSE makes one column per map entry, a count only the call knows; \
                 onnxc compiles the SPARSE form (max_map columns)",
            ));
        }
        other => {
            return Err(ctx.err(format!("map_form '{other}' is not one of DENSE and SPARSE")));
        }
    }
    if (ty.value == DType::Str) != (to == DType::Str) {
        return Err(ctx.unsupported(format!(
            "cast_to {to} of {} values converts between strings and numbers, which onnxc does not do",
            ty.value
        )));
    }
    let max = ctx.attr_i_or("max_map", 1)?;
    if !(1..=1 << 24).contains(&max) {
        return Err(ctx.err(format!("max_map is {max}; onnxc takes 1 to 2^24 columns")));
    }
    let raw = ctx.add(
        Op::kernel(CastMapSparse),
        vec![map],
        TypeInfo::new(ty.value, vec![Dim::Known(1), Dim::Known(max)]),
    )?;
    let y = if to == ty.value {
        raw
    } else {
        build::cast(ctx, raw, to)?
    };
    Ok(vec![y])
}
