//! Ops that make strings at run time: StringNormalizer (opset 10), StringConcat and
//! StringSplit (opset 20), and onnxruntime's Tokenizer (com.microsoft). The strings are made
//! by runtime kernels (`kernels::StrCase`, `StrConcat`, `StrPieces`) in string space of the
//! workspace (`--string-bytes` per string); what only moves strings (stopword removal,
//! padding, broadcasting) is generated code.
//!
//! StringNormalizer follows onnxruntime: stopwords remove whole strings (compared after
//! lower-casing when `is_case_sensitive` is 0), the others take the case change, and when
//! every string is removed the result is one empty string. Case changes map code points one
//! to one, whatever the `locale` (`onnxc_runtime::string_make`).

use crate::error::Result;
use crate::frontend::build;
use crate::frontend::ctx::Ctx;
use crate::frontend::ops::ml::encode;
use crate::ir::dim::Shape;
use crate::ir::expr::{self, E};
use crate::ir::graph::ReduceKind;
use crate::ir::{DType, Dim, Op, Tensor, TypeInfo, ValueId};
use crate::kernels;
use onnxc_runtime::string_make::{SplitParams, change_case};
use onnxc_runtime::tokenize::{self, Mode};
use std::sync::Arc;

/// Each string of `x` in upper (or lower) case.
fn case(ctx: &mut Ctx, x: ValueId, upper: bool) -> Result<ValueId> {
    let shape = ctx.shape(x);
    ctx.add(
        Op::kernel(kernels::StrCase {
            upper,
            bytes_per_string: ctx.string_bytes,
        }),
        vec![x],
        TypeInfo::new(DType::Str, shape),
    )
}

pub fn string_normalizer(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    build::expect_types(ctx, x, "X", &[DType::Str])?;
    let dims = ctx.known_shape(x)?;
    let c = match dims[..] {
        [c] | [1, c] => c,
        _ => {
            return Err(ctx.err(format!(
                "X must have shape [C] or [1, C], its shape is {dims:?}"
            )));
        }
    };
    let action = ctx.attr_s_or("case_change_action", "NONE")?;
    let changed = match action.as_str() {
        "NONE" => x,
        "LOWER" => case(ctx, x, false)?,
        "UPPER" => case(ctx, x, true)?,
        _ => {
            return Err(ctx.err(format!(
                "case_change_action {action:?} is not one of LOWER, UPPER, NONE"
            )));
        }
    };
    let stopwords = ctx.attr_strings("stopwords").unwrap_or_default();
    if stopwords.is_empty() || c == 0 {
        return Ok(vec![changed]);
    }
    // Which strings are kept: those whose key is not a stopword.
    let sensitive = ctx.attr_i_or("is_case_sensitive", 0)? != 0;
    let (keys, table) = if sensitive {
        (x, stopwords)
    } else {
        let lowered = stopwords
            .iter()
            .map(|w| String::from_utf8_lossy(&change_case(w.as_bytes(), false)).into_owned())
            .collect();
        (case(ctx, x, false)?, lowered)
    };
    let pos = encode::lookup(ctx, keys, &table)?;
    let flat = vec![Dim::Known(c)];
    let keep = ctx.map(
        DType::Bool,
        flat,
        vec![pos],
        expr::lt(
            expr::load(DType::I64, 0, index_in(&dims, expr::var(0))),
            expr::i(0),
        ),
    )?;
    // The kept positions (`kernels::NonZero`: a count, then the positions).
    let nz = kernels::NonZero { dims: vec![c] };
    let len = kernels::NonZero::result_len(&[c]);
    let found = ctx.add(
        Op::kernel(nz),
        vec![keep],
        TypeInfo::new(DType::I64, vec![Dim::Known(len)]),
    )?;
    let count = ctx.map(
        DType::I64,
        vec![],
        vec![found],
        expr::load(DType::I64, 0, vec![expr::i(0)]),
    )?;
    // None kept: one empty string.
    let rows = ctx.map(
        DType::I64,
        vec![],
        vec![count],
        expr::max(expr::load(DType::I64, 0, vec![]), expr::i(1)),
    )?;
    let zero = ctx.constant(Tensor::from_i64s(vec![1], &[0]));
    let empty = encode::strings_at(ctx, zero, &[String::new()])?;
    let axis = dims.len() - 1;
    let at = expr::load(
        DType::I64,
        1,
        vec![expr::add(expr::var(axis as u32), expr::i(1))],
    );
    let kept = expr::load(DType::Str, 0, index_in(&dims, at));
    let none = expr::lt(expr::load(DType::I64, 2, vec![]), expr::i(1));
    let body = expr::select(none, expr::load(DType::Str, 3, vec![expr::i(0)]), kept);
    let shape: Shape = dims.iter().map(|&d| Dim::Known(d)).collect();
    let out = ctx.map(DType::Str, shape, vec![changed, found, count, empty], body)?;
    ctx.g.mark_rows(out, rows, c, axis);
    Ok(vec![out])
}

/// The index of position `i` along the last axis of a `[C]` or `[1, C]` tensor.
fn index_in(dims: &[i64], i: E) -> Vec<E> {
    if dims.len() == 2 {
        vec![expr::i(0), i]
    } else {
        vec![i]
    }
}

pub fn string_concat(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (a, b) = (ctx.input(0)?, ctx.input(1)?);
    build::expect_types(ctx, a, "X", &[DType::Str])?;
    build::expect_types(ctx, b, "Y", &[DType::Str])?;
    let (operands, out) = build::broadcast_all(ctx, &[a, b])?;
    Ok(vec![ctx.add(
        Op::kernel(kernels::StrConcat {
            bytes_per_string: ctx.string_bytes,
        }),
        operands,
        TypeInfo::new(DType::Str, out),
    )?])
}

pub fn string_split(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    build::expect_types(ctx, x, "X", &[DType::Str])?;
    let dims = ctx.known_shape(x)?;
    let delimiter = ctx.attr_s("delimiter")?.unwrap_or_default().into_bytes();
    if delimiter.contains(&0) {
        return Err(ctx.err("the delimiter holds a NUL byte, which a C string cannot"));
    }
    let maxsplit = ctx.attr_i("maxsplit")?.unwrap_or(-1);
    let split = SplitParams {
        maxsplit,
        delimiter,
    };
    // Pieces a string may have: maxsplit + 1, and no more than a string of the space's
    // bytes makes (one a byte and one more with a delimiter, one in two bytes without).
    let bytes = ctx.string_bytes.min(1 << 20) as i64;
    let by_bytes = if split.delimiter.is_empty() {
        (bytes + 1) / 2
    } else {
        bytes + 1
    };
    let cols = if maxsplit >= 0 {
        by_bytes.min(maxsplit.saturating_add(1))
    } else {
        by_bytes
    };
    let blob = Arc::new(split.encode());
    let (counts, y) = pieces(
        ctx,
        x,
        &dims,
        &onnxc_runtime::kernels::STR_SPLIT_COUNT,
        blob,
        cols,
        0,
    )?;
    if let Some((counts, most)) = counts {
        ctx.g.mark_rows(y, most, cols, dims.len());
        return Ok(vec![y, counts]);
    }
    Ok(vec![y, ctx.constant(Tensor::from_i64s(dims, &[]))])
}

/// The pieces a splitting kernel cuts the strings of `x` into, `cols` a string, with how
/// many each gives and the most of any (None when `x` has no string: then the pieces are an
/// empty `[..., 0]`). `count` is StringSplit's counting kernel (`STR_SPLIT`'s pieces) or the
/// Tokenizer's (`TOKENIZE`'s).
fn pieces(
    ctx: &mut Ctx,
    x: ValueId,
    dims: &[i64],
    count: &'static onnxc_runtime::kernels::KernelAbi,
    blob: Arc<Vec<i64>>,
    cols: i64,
    once: u64,
) -> Result<(Option<(ValueId, ValueId)>, ValueId)> {
    use onnxc_runtime::kernels::{STR_SPLIT, STR_SPLIT_COUNT, TOKENIZE};
    let rank = dims.len();
    let shape: Shape = dims.iter().map(|&d| Dim::Known(d)).collect();
    let mut yshape = shape.clone();
    if dims.iter().product::<i64>() == 0 {
        yshape.push(Dim::Known(0));
        let vars = (0..rank as u32).map(expr::var).collect();
        let y = ctx.map(DType::Str, yshape, vec![x], expr::load(DType::Str, 0, vars))?;
        return Ok((None, y));
    }
    let counts = ctx.add(
        Op::kernel(kernels::StrCount {
            kernel: count,
            blob: blob.clone(),
        }),
        vec![x],
        TypeInfo::new(DType::I64, shape),
    )?;
    let axes: Vec<usize> = (0..rank).collect();
    let most = build::reduce(ctx, counts, ReduceKind::Max, &axes, false, |v| v)?;
    let kernel = if *count == STR_SPLIT_COUNT {
        &STR_SPLIT
    } else {
        &TOKENIZE
    };
    yshape.push(Dim::Known(cols));
    let y = ctx.add(
        Op::kernel(kernels::StrPieces {
            kernel,
            blob,
            cols,
            bytes_per_string: ctx.string_bytes,
            once,
        }),
        vec![x],
        TypeInfo::new(DType::Str, yshape),
    )?;
    Ok((Some((counts, most)), y))
}

/// com.microsoft Tokenizer (onnxruntime's semantics, `onnxc_runtime::tokenize`): `[C]` or
/// `[N, C]` strings to `[..., D]` tokens, D the most tokens of a string (with the marks),
/// a data-dependent dim bounded by what `--string-bytes` holds.
pub fn tokenizer(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    build::expect_types(ctx, x, "X", &[DType::Str])?;
    let dims = ctx.known_shape(x)?;
    if !(1..=2).contains(&dims.len()) {
        return Err(ctx.err(format!(
            "X must have shape [C] or [N, C], its shape is {dims:?}"
        )));
    }
    let required = |ctx: &Ctx, name: &str| -> Result<i64> {
        ctx.attr_i(name)?
            .ok_or_else(|| ctx.err(format!("attribute {name} is required")))
    };
    let mark = required(ctx, "mark")? != 0;
    let mincharnum = required(ctx, "mincharnum")?;
    if !(1..=i32::MAX as i64).contains(&mincharnum) {
        return Err(ctx.err(format!(
            "mincharnum is {mincharnum}; it must be between 1 and {}",
            i32::MAX
        )));
    }
    let pad = ctx
        .attr_s("pad_value")?
        .ok_or_else(|| ctx.err("attribute pad_value is required"))?;
    if pad.contains('\0') {
        return Err(ctx.err("pad_value holds a NUL byte, which a C string cannot"));
    }
    let separators = ctx.attr_strings("separators").unwrap_or_default();
    let tokenexp = ctx.attr_s("tokenexp")?.filter(|t| !t.is_empty());
    let (mode, automaton) = match (tokenexp, separators.is_empty()) {
        (Some(_), false) => {
            return Err(ctx.err("separators and tokenexp are both set; give one of them"));
        }
        (Some(t), true) => (Mode::Matches, search(ctx, &t, true)?),
        (None, false) if separators.len() == 1 && separators[0].is_empty() => (Mode::Chars, vec![]),
        (None, false) => {
            let alternation: Vec<String> = separators.iter().map(|s| format!("(?:{s})")).collect();
            (
                Mode::Separators,
                search(ctx, &alternation.join("|"), false)?,
            )
        }
        (None, true) => return Err(ctx.err("one of separators and tokenexp is required")),
    };
    let blob = Arc::new(tokenize::encode(
        mode,
        mark,
        mincharnum as usize,
        pad.as_bytes(),
        &automaton,
    ));
    // Tokens a string may have: one per `mincharnum` characters of a string of the space's
    // bytes, and the marks.
    let marks = 2 * i64::from(mark);
    let cols = (ctx.string_bytes.min(1 << 20) as i64 / mincharnum).max(1) + marks;
    // The pad value and the marks, with their NULs.
    let once = pad.len() as u64 + 5;
    let (counts, y) = pieces(
        ctx,
        x,
        &dims,
        &onnxc_runtime::kernels::TOKENIZE_COUNT,
        blob,
        cols,
        once,
    )?;
    let Some((_, most)) = counts else {
        return Ok(vec![y]);
    };
    // The row length: none without tokens, else the most tokens and the marks.
    let m = expr::load(DType::I64, 0, vec![]);
    let len = ctx.map(
        DType::I64,
        vec![],
        vec![most],
        expr::select(
            expr::lt(m.clone(), expr::i(1)),
            expr::i(0),
            expr::add(m, expr::i(marks)),
        ),
    )?;
    ctx.g.mark_rows(y, len, cols, dims.len());
    Ok(vec![y])
}

/// `pattern`'s searching automaton, or the error naming it.
fn search(ctx: &Ctx, pattern: &str, longest: bool) -> Result<Vec<i64>> {
    super::regex::compile_search(pattern, longest)
        .map_err(|e| ctx.unsupported(format!("the pattern {pattern:?} does not compile: {e}")))
}
