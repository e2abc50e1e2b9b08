//! Text features: TfIdfVectorizer (opset 9), the n-gram counts of token rows (int32, int64
//! or strings) against a pool of n-grams, weighted as term frequencies, inverse document
//! frequencies or both; run by one runtime kernel (`kernels::TfIdf`) over int64 tokens.
//! String tokens are first mapped to their position in the pool's strings
//! (`ml::encode::lookup`, −1 for a word the pool lacks), and the pool likewise. Weights
//! belong to the pool's n-grams, as the spec and onnxruntime read them
//! (`onnxc_runtime::tfidf`).

use crate::error::Result;
use crate::frontend::build;
use crate::frontend::ctx::Ctx;
use crate::frontend::ops::ml::encode;
use crate::ir::dim::shape_from;
use crate::ir::{DType, Op, TypeInfo, ValueId};
use onnxc_runtime::tfidf::{self, Mode};
use std::collections::BTreeMap;
use std::sync::Arc;

pub fn tfidf_vectorizer(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let dt = build::expect_types(ctx, x, "X", &[DType::I32, DType::I64, DType::Str])?;
    let xs = ctx.known_shape(x)?;
    let (rows, n, batched) = match *xs.as_slice() {
        [n] => (1, n, false),
        [b, n] => (b, n, true),
        _ => {
            return Err(ctx.err(format!("X has shape {xs:?}; it must be [N] or [B, N]")));
        }
    };
    let int = |ctx: &Ctx, name: &str| -> Result<i64> {
        ctx.attr_i(name)?
            .ok_or_else(|| ctx.err(format!("attribute {name} is required")))
    };
    let (min_n, max_n) = (int(ctx, "min_gram_length")?, int(ctx, "max_gram_length")?);
    let max_skip = int(ctx, "max_skip_count")?;
    if min_n < 1 || max_n < min_n || max_skip < 0 {
        return Err(ctx.err(format!(
            "min_gram_length {min_n}, max_gram_length {max_n}, max_skip_count {max_skip}: \
             they need 1 ≤ min ≤ max and a skip count of at least 0"
        )));
    }
    let mode_name = ctx.attr_s("mode")?.unwrap_or_default();
    let mode = Mode::from_name(&mode_name)
        .ok_or_else(|| ctx.err(format!("mode '{mode_name}' is not TF, IDF or TFIDF")))?;
    let counts = ctx.attr_ints("ngram_counts").unwrap_or_default();
    let indexes = ctx.attr_ints("ngram_indexes").unwrap_or_default();
    // The pool as int64 tokens: the integers, or each string's first position.
    let strings = ctx.attr_strings("pool_strings");
    let pool: Vec<i64> = match (ctx.attr_ints("pool_int64s"), &strings) {
        (Some(p), None) if dt != DType::Str => p,
        (None, Some(s)) if dt == DType::Str => {
            let mut first = BTreeMap::new();
            s.iter()
                .enumerate()
                .map(|(k, w)| *first.entry(w.as_str()).or_insert(k as i64))
                .collect()
        }
        _ => {
            return Err(ctx.err(format!(
                "X is {dt}: the pool must be pool_int64s for integer tokens or pool_strings \
                 for strings, exactly one of them"
            )));
        }
    };
    if counts.windows(2).any(|w| w[0] > w[1])
        || counts.iter().any(|&c| c < 0 || c as usize > pool.len())
    {
        return Err(ctx.err(format!(
            "ngram_counts {counts:?} must be non-decreasing start positions in the pool of {}",
            pool.len()
        )));
    }
    // The trie of the n-grams of counted lengths, as the reference builds it: ids count
    // every n-gram of the pool from 1, a repeated n-gram keeps its last id.
    let mut edges: Vec<[i64; tfidf::ENTRY]> = Vec::new();
    let mut at: BTreeMap<(i64, i64), usize> = BTreeMap::new();
    let mut id = 1i64;
    for (i, &start) in counts.iter().enumerate() {
        let size = i + 1;
        let end = counts.get(i + 1).map_or(pool.len(), |&e| e as usize);
        let grams = (end - start as usize) / size;
        let counted = (min_n as usize..=max_n as usize).contains(&size);
        for g in 0..grams {
            if counted {
                let mut node = 0;
                for (j, &token) in pool[start as usize + g * size..][..size].iter().enumerate() {
                    let k = *at.entry((node, token)).or_insert_with(|| {
                        edges.push([node, token, 0, edges.len() as i64 + 1]);
                        edges.len() - 1
                    });
                    if j + 1 == size {
                        edges[k][2] = id;
                    }
                    node = edges[k][3];
                }
            }
            id += 1;
        }
    }
    let ngrams = (id - 1) as usize;
    if indexes.len() < ngrams || indexes.iter().any(|&c| c < 0) {
        return Err(ctx.err(format!(
            "ngram_indexes has {} entries for the pool's {ngrams} n-grams; it needs one \
             non-negative output column per n-gram",
            indexes.len()
        )));
    }
    let out = indexes.iter().max().map_or(0, |&m| m + 1);
    build::extents(ctx, "the output width", &[out])?;
    // One weight per n-gram of the pool (the kernel reads one per index entry; entries
    // past the pool's n-grams are never read).
    let weights = match ctx.attr_floats("weights") {
        Some(mut w) if mode != Mode::Tf => {
            if w.len() < ngrams {
                return Err(ctx.err(format!(
                    "weights has {} values for the pool's {ngrams} n-grams; it needs one per \
                     n-gram",
                    w.len()
                )));
            }
            w.resize(indexes.len(), 0.0);
            Some(Arc::new(w))
        }
        _ => None,
    };
    edges.sort();
    let flat: Vec<i64> = edges.concat();
    let u = |v: i64| v as usize;
    // The counts' blob over rows of `n` tokens (0: streamed by the fused text kernel).
    let blob_over = |n: i64| {
        tfidf::encode(
            u(rows),
            u(n),
            u(out),
            u(min_n),
            u(max_n),
            u(max_skip),
            mode,
            &flat,
            &indexes,
        )
    };
    let blob = blob_over(n);
    if let Err(e) = tfidf::TfIdfParams::decode(&blob) {
        return Err(ctx.err(format!("its n-gram tables are out of onnxc's range: {e}")));
    }
    let fused = match &strings {
        Some(pool) => text_pipeline(
            ctx,
            x,
            rows,
            pool,
            &indexes[..ngrams],
            &blob_over(0),
            &weights,
        )?,
        None => None,
    };
    if let Some(y) = fused {
        return if batched {
            Ok(vec![y])
        } else {
            Ok(vec![ctx.reshape(y, shape_from(&[out]))?])
        };
    }
    let tokens = match dt {
        DType::Str => encode::lookup(ctx, x, strings.as_deref().unwrap_or_default())?,
        _ => build::cast(ctx, x, DType::I64)?,
    };
    let y = ctx.add(
        Op::kernel(crate::kernels::TfIdf {
            blob: Arc::new(blob),
            weights,
            pad_neutral: strings
                .as_ref()
                .is_some_and(|s| !s.iter().any(String::is_empty)),
        }),
        vec![tokens],
        TypeInfo::new(DType::F32, shape_from(&[rows, out])),
    )?;
    if batched {
        Ok(vec![y])
    } else {
        Ok(vec![ctx.reshape(y, shape_from(&[out]))?])
    }
}

/// The n-gram counts of `x` (`[rows, n]` string tokens) computed from the strings the
/// tokens come from, when `x` holds a Tokenizer's tokens of `rows` strings (one a row,
/// reshaped or not), read as given or in another case (`kernels::StrCase`): one pass that
/// makes no strings (`kernels::TextTfIdf`), so no string is too long or has too many
/// tokens for `--string-bytes`. None where the three stay apart: n-grams sharing a column
/// (the fused walks run in another order), a window or a pool string too large.
fn text_pipeline(
    ctx: &mut Ctx,
    x: ValueId,
    rows: i64,
    pool: &[String],
    columns: &[i64],
    tfidf: &[i64],
    weights: &Option<Arc<Vec<f32>>>,
) -> Result<Option<ValueId>> {
    use crate::kernels::{StrCase, StrPieces, TextTfIdf};
    use onnxc_runtime::text_tfidf::{self as text, Case};
    let kernel_of = |ctx: &Ctx, v: ValueId| match &ctx.g.node(v.node).op {
        Op::Kernel(k) => Some(k.clone()),
        _ => None,
    };
    let mut v = x;
    while matches!(ctx.g.node(v.node).op, Op::Reshape) {
        v = ctx.g.node(v.node).inputs[0];
    }
    let Some(k) = kernel_of(ctx, v) else {
        return Ok(None);
    };
    let Some(pieces) = k.downcast::<StrPieces>() else {
        return Ok(None);
    };
    let s = ctx.g.node(v.node).inputs[0];
    let strings: i64 = ctx
        .g
        .value_type(s)
        .shape
        .iter()
        .map(|d| d.known().unwrap_or(-1))
        .product();
    if *pieces.kernel != onnxc_runtime::kernels::TOKENIZE || strings != rows {
        return Ok(None);
    }
    let mut seen = std::collections::HashSet::new();
    let longest = pool.iter().map(String::len).max().unwrap_or(0);
    if !columns.iter().all(|c| seen.insert(*c)) || longest > text::MAX_LONGEST {
        return Ok(None);
    }
    let (case, source) = match kernel_of(ctx, s)
        .as_ref()
        .and_then(|k| k.downcast::<StrCase>())
    {
        Some(c) if c.upper => (Case::Upper, ctx.g.node(s.node).inputs[0]),
        Some(_) => (Case::Lower, ctx.g.node(s.node).inputs[0]),
        None => (Case::Keep, s),
    };
    let Ok(table) = encode::string_table(pool) else {
        return Ok(None);
    };
    let blob = text::encode(case, rows as usize, longest, &pieces.blob, &table, tfidf);
    if text::TextTfIdf::decode(&blob).is_err() {
        return Ok(None);
    }
    let out = onnxc_runtime::tfidf::TfIdfParams::decode(tfidf)
        .map(|p| p.out as i64)
        .unwrap_or(0);
    let y = ctx.add(
        Op::kernel(TextTfIdf {
            blob: Arc::new(blob),
            weights: weights.clone(),
        }),
        vec![source],
        TypeInfo::new(DType::F32, shape_from(&[rows, out])),
    )?;
    Ok(Some(y))
}
