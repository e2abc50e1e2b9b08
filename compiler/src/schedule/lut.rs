//! Lookup tables for maps of a few distinct values.
//!
//! A quantized model computes its activations on dequantized values: `Sigmoid`, SiLU, Tanh or
//! GELU of `(q − z)·s`, requantized, where `q` takes at most 256 values. Once fused, such a
//! map's body is `g(k(x))`: every read that varies over the output goes through one integral
//! subexpression `k` of a small range (a clamped, rounded quotient, or an 8-bit load), and
//! the expensive part `g` (the activation, a second quantization's division and rounding)
//! sees only `k`. The map then becomes two steps: a table of `g` over `k`'s range (at most
//! 257 entries, computed per run from the same scalar parameters, so the table is exact
//! whatever the scales are and whether or not they are constants), and the map itself
//! reading `table[k − lo]`. Both evaluate `g` with the same code on the same values, so the
//! result is bit-identical to the map's; onnxruntime's QLinearSigmoid/QLinearLookup kernels
//! do the same for uint8 tensors.
//!
//! A key that can be NaN (a clamp of a NaN quotient) gets an extra entry, `g(NaN)`. The
//! table index is clamped into the table in the key's own (float) type before its integer
//! conversion, so no input value can read outside it.

use super::{SValue, Schedule, Step, StepKind, Storage, SvId};
use crate::ir::DType;
use crate::ir::expr::{self, BinOp, E, Expr, ExprKind, UnOp};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Largest key range tabulated (8-bit quantization's 256 values; 4-bit ones fit too).
const MAX_ENTRIES: f64 = 256.0;
/// Largest table computed at compile time, in entries per element of the map: a per-channel
/// table of a map over small planes (DenseNet's 14×14 and 7×7 BatchNorms between
/// quantizations, 196 and 49 elements a channel against 256 entries) costs less to read than
/// the map's divisions cost to compute.
const FOLDED_RATIO: i64 = 2;
/// Most operations the interpreter runs to compute one table when the model is compiled
/// (entries × body size; about 0.3 s): DenseNet-121's largest table, 1024 channels × 256
/// entries of a 150-node body, takes 39 million.
const MAX_FOLD_WORK: i64 = 1 << 26;
/// Bodies larger than this are left alone (the cut search is quadratic in the body's size).
const MAX_BODY: usize = 2000;

/// Most entries of a table chosen without the map's size (`tabulate`'s `by_size` off): a
/// per-channel table of 1024 channels of 256 entries.
const MAX_UNSIZED_ENTRIES: i64 = 1 << 18;

/// Splits every profitable map step into a table step and a table read. `by_size`: whether
/// a table pays is weighed against the map's size; off when a dim is taken at run time
/// (the programs lowered at its values must choose alike, `loops::dims`), then a table is
/// made exactly where it is computed when the model is compiled (`fold`), whatever the size;
/// `narrow`: then with rows over one dim at most (`frontend::ImportOptions::narrow_tables`).
pub fn tabulate(s: &mut Schedule, by_size: bool, narrow: bool) {
    let mut i = 0;
    while i < s.steps.len() {
        if let Some(table) = plan(s, i, by_size, narrow)
            && !fold(s, &table)
        {
            s.steps.insert(i, table);
            i += 1;
        }
        i += 1;
    }
}

/// Makes the table of step `table` a constant when it reads only constants and its body
/// only operations the interpreter computes bit for bit as generated code does (IEEE
/// arithmetic, rounding, comparisons, casts; not the polynomial transcendental functions):
/// a quantized model's per-channel tables (BatchNorm between a dequantization and a
/// quantization, a requantization) are otherwise recomputed on every run, 256 entries per
/// channel. Returns whether it did.
fn fold(s: &mut Schedule, table: &Step) -> bool {
    let StepKind::Map { body } = &table.kind else {
        return false;
    };
    if !foldable(s, body, &table.inputs, s.values[table.output].len()) {
        return false;
    }
    let inputs: Vec<&crate::ir::Tensor> = table
        .inputs
        .iter()
        .filter_map(|&v| match &s.values[v].storage {
            Storage::Const(t) => Some(t),
            _ => None,
        })
        .collect();
    let out = &s.values[table.output];
    let Ok(t) = crate::ir::interp::eval_map(body, &inputs, out.dtype, &out.shape) else {
        return false;
    };
    s.values[table.output].storage = Storage::Const(t);
    true
}

/// Whether a table of `entries` entries of body `g` over `inputs` is computed when the model
/// is compiled: constant inputs, exact operations, and at most `MAX_FOLD_WORK` operations
/// for the interpreter (so that no model makes the compiler evaluate for long).
fn foldable(s: &Schedule, g: &E, inputs: &[SvId], entries: i64) -> bool {
    inputs
        .iter()
        .all(|&v| matches!(s.values[v].storage, Storage::Const(_)))
        && entries.saturating_mul(expr::dag_size(g) as i64) <= MAX_FOLD_WORK
        && exact(g, &mut HashSet::new())
}

/// Whether every operation of `e` is one the interpreter and generated code compute alike.
fn exact(e: &E, seen: &mut HashSet<*const Expr>) -> bool {
    if !seen.insert(Arc::as_ptr(e)) {
        return true;
    }
    match &e.kind {
        ExprKind::Var(_) | ExprKind::Const(_) => true,
        ExprKind::Load { index, .. } => index.iter().all(|x| exact(x, seen)),
        ExprKind::Unary(op, x) => {
            matches!(
                op,
                UnOp::Neg
                    | UnOp::Abs
                    | UnOp::Sqrt
                    | UnOp::Floor
                    | UnOp::Ceil
                    | UnOp::Round
                    | UnOp::Trunc
                    | UnOp::Sign
                    | UnOp::Not
                    | UnOp::IsNan
                    | UnOp::IsPosInf
                    | UnOp::IsNegInf
            ) && exact(x, seen)
        }
        ExprKind::Binary(op, a, b) => {
            matches!(
                op,
                BinOp::Add
                    | BinOp::Sub
                    | BinOp::Mul
                    | BinOp::Div
                    | BinOp::Max
                    | BinOp::Min
                    | BinOp::And
                    | BinOp::Or
                    | BinOp::Eq
                    | BinOp::Lt
                    | BinOp::Le
                    | BinOp::Gt
                    | BinOp::Ge
            ) && exact(a, seen)
                && exact(b, seen)
        }
        ExprKind::Select(c, a, b) => exact(c, seen) && exact(a, seen) && exact(b, seen),
        ExprKind::Cast(x) => exact(x, seen),
        ExprKind::CheckIndex { .. } => false,
    }
}

/// The table step for map step `i` (and the map rewritten to read it), or None.
fn plan(s: &mut Schedule, i: usize, by_size: bool, narrow: bool) -> Option<Step> {
    let st = &s.steps[i];
    let StepKind::Map { body } = &st.kind else {
        return None;
    };
    let n = s.values[st.output].len();
    let body = expr::share(body);
    // Only a body with an expensive operation can pay for a table (the part tabulated is
    // inside the body); most maps stop here, before the cut search.
    if expr::dag_size(&body) > MAX_BODY || !expensive(&body) {
        return None;
    }
    let shape = s.values[st.output].shape.clone();
    // A table a quarter of the map's size, or, failing one, up to `FOLDED_RATIO` times the
    // map's size (which pays only when computed at compile time, checked below).
    let (key, lo, hi, rest, outer_vars) = if by_size {
        best_cut(&body, &shape, n / 4, None)
            .or_else(|| best_cut(&body, &shape, n.saturating_mul(FOLDED_RATIO), None))?
    } else {
        let inputs: Vec<bool> = (st.inputs.iter())
            .map(|&v| matches!(s.values[v].storage, Storage::Const(_)))
            .collect();
        best_cut(&body, &shape, MAX_UNSIZED_ENTRIES, Some((&inputs, narrow)))?
    };
    let entries = (hi - lo) as i64 + 1;
    let nan = key.dtype.is_float() && !nan_free(&key);
    let len = entries + nan as i64;
    let outer: i64 = outer_vars.iter().map(|&v| shape[v as usize]).product();
    // Pays when the part tabulated costs more than the read (a transcendental function, a
    // division) and the table is small next to the map, or, for a table computed when the
    // model is compiled (`fold`), at most `FOLDED_RATIO` times its size.
    if (by_size && n.saturating_mul(FOLDED_RATIO) < len * outer) || !expensive(&rest) {
        return None;
    }
    // The table: g over the key's values (the NaN entry last), one row per combination of
    // the outer variables g reads (none, or the channel of a per-channel quantization).
    let v0 = expr::var(KEY_VAR);
    let key_value = if key.dtype.is_float() {
        let k = expr::binary(
            BinOp::Add,
            expr::cast(v0.clone(), key.dtype),
            expr::f(key.dtype, lo),
        );
        if nan {
            expr::select(
                expr::lt(v0, expr::i(entries)),
                k,
                expr::f(key.dtype, f64::NAN),
            )
        } else {
            k
        }
    } else {
        expr::cast(expr::add(v0, expr::i(lo as i64)), key.dtype)
    };
    let g = replace(&body, &key, &key_value);
    // Table variables: the outer variables in order, then the key's position.
    let g = expr::rewrite(&g, &mut |x| match x.kind {
        ExprKind::Var(KEY_VAR) => Some(expr::var(outer_vars.len() as u32)),
        ExprKind::Var(k) => outer_vars
            .iter()
            .position(|&o| o == k)
            .map(|p| expr::var(p as u32)),
        _ => None,
    });
    // The table reads only the operands g uses.
    let mut used = Vec::new();
    expr::used_inputs(&g, &mut used);
    used.sort_unstable();
    let mut map = vec![0u32; st.inputs.len()];
    for (j, &u) in used.iter().enumerate() {
        map[u as usize] = j as u32;
    }
    let g = expr::remap_inputs(&g, &map);
    let table_inputs: Vec<SvId> = used.iter().map(|&u| st.inputs[u as usize]).collect();
    if (!by_size || n < 4 * len * outer) && !foldable(s, &g, &table_inputs, len * outer) {
        return None;
    }
    let out = &s.values[st.output];
    s.values.push(SValue {
        name: format!("{}_table", out.name),
        dtype: out.dtype,
        shape: outer_vars
            .iter()
            .map(|&v| shape[v as usize])
            .chain([len])
            .collect(),
        storage: Storage::Arena(0),
    });
    let table = s.values.len() - 1;
    // The map: table[k − lo], NaN to the last entry, clamped into the table.
    let index = if key.dtype.is_float() {
        let dt = key.dtype;
        let mut off = expr::binary(BinOp::Sub, key.clone(), expr::f(dt, lo));
        if nan {
            off = expr::select(
                expr::binary(BinOp::Eq, key.clone(), key.clone()),
                off,
                expr::f(dt, entries as f64),
            );
        }
        let off = expr::binary(
            BinOp::Max,
            expr::binary(BinOp::Min, off, expr::f(dt, (len - 1) as f64)),
            expr::f(dt, 0.0),
        );
        expr::cast(off, DType::I64)
    } else {
        expr::clamp(
            expr::sub(expr::cast(key.clone(), DType::I64), expr::i(lo as i64)),
            0,
            len - 1,
        )
    };
    let origins = st.origins.clone();
    let dtype = s.values[st.output].dtype;
    let lookup = byte_lookup(s, i, &key, entries, nan, &outer_vars);
    let st = &mut s.steps[i];
    if let Some((x, op)) = lookup {
        // The kernel reads the table in place of the map.
        st.inputs = vec![x, table];
        st.kind = StepKind::Kernel(Arc::new(op));
    } else {
        st.inputs.push(table);
        let mut at: Vec<E> = outer_vars.iter().map(|&v| expr::var(v)).collect();
        at.push(index);
        st.kind = StepKind::Map {
            body: expr::load(dtype, (st.inputs.len() - 1) as u32, at),
        };
    }
    Some(Step {
        kind: StepKind::Map { body: g },
        inputs: table_inputs,
        output: table,
        epilogue: None,
        origins,
    })
}

/// The byte lookup kernel for map step `i` whose table has `entries` entries per row over
/// the outer variables `outer`, when it applies: an 8-bit result whose key is an 8-bit
/// operand read element for element (its whole range tabulated, no NaN entry) and a table
/// of one row or one per value of one variable. Then the operand and the kernel op.
fn byte_lookup(
    s: &Schedule,
    i: usize,
    key: &E,
    entries: i64,
    nan: bool,
    outer: &[u32],
) -> Option<(SvId, crate::kernels::Lookup8)> {
    let st = &s.steps[i];
    let out = &s.values[st.output];
    let ExprKind::Load { input, index } = &key.kind else {
        return None;
    };
    let x = *st.inputs.get(*input as usize)?;
    let identity = index.len() == out.shape.len()
        && index
            .iter()
            .enumerate()
            .all(|(d, e)| matches!(e.kind, ExprKind::Var(v) if v as usize == d));
    if out.dtype.size() != 1
        || !matches!(key.dtype, DType::U8 | DType::I8)
        || s.values[x].dtype != key.dtype
        || s.values[x].shape != out.shape
        || !identity
        || entries != 256
        || nan
        || outer.len() > 1
    {
        return None;
    }
    let n: i64 = out.shape.iter().product();
    let (rows, inner) = match outer.first() {
        None => (1, n),
        Some(&v) => (
            out.shape[v as usize],
            out.shape[v as usize + 1..].iter().product(),
        ),
    };
    Some((
        x,
        crate::kernels::Lookup8 {
            rows,
            inner,
            signed: key.dtype == DType::I8,
        },
    ))
}

/// The variable a table's body reads the key's position from, before renumbering (above
/// any loop variable).
const KEY_VAR: u32 = u32::MAX;

/// The subexpression through which alone the body reads anything that varies over the
/// innermost variables, integral with at most `MAX_ENTRIES` values, whose table is the
/// smallest (the rest of the body may vary with outer variables: one table row per
/// combination of them), then the innermost: (key, lo, hi, the body with the key replaced
/// by an opaque placeholder, the loop variables the rest reads).
///
/// With `folded` (whether each operand of the body is a constant), the choice must not
/// follow the extents, which differ between the values of a run-time dim: only cuts whose
/// table is computed when the model is compiled (the rest reads constants, exactly),
/// those that read the fewest loop variables first, then the smallest; and with its
/// `narrow` flag, only those that read one at most.
#[allow(clippy::type_complexity)]
fn best_cut(
    body: &E,
    shape: &[i64],
    max_table: i64,
    folded: Option<(&[bool], bool)>,
) -> Option<(E, f64, f64, E, Vec<u32>)> {
    let mut nodes = Vec::new();
    collect(body, &mut HashSet::new(), &mut nodes);
    let mut varies = HashMap::new();
    let mut best: Option<((usize, i64, usize), E, f64, f64, E, Vec<u32>)> = None;
    for c in nodes {
        if !has_var(&c, &mut varies) {
            continue;
        }
        let Some((lo, hi)) = key_range(&c) else {
            continue;
        };
        let size = expr::dag_size(&c);
        // An opaque placeholder: a constant would let the rewrite simplify away the very
        // branches that still read the variables (`select(key, …)`).
        let placeholder = expr::cast(expr::var(KEY_VAR), c.dtype);
        let rest = replace(body, &c, &placeholder);
        let outer: Vec<u32> = (0..shape.len() as u32)
            .filter(|&v| expr::depends_on(&rest, v))
            .collect();
        let rows: i64 = outer.iter().map(|&v| shape[v as usize]).product();
        let entries = rows.saturating_mul((hi - lo) as i64 + 2);
        let cost = match folded {
            None => (0, entries, size),
            Some((consts, narrow)) => {
                let mut used = Vec::new();
                expr::used_inputs(&rest, &mut used);
                if (narrow && outer.len() > 1)
                    || !used.iter().all(|&u| consts.get(u as usize) == Some(&true))
                    || !exact(&rest, &mut HashSet::new())
                {
                    continue;
                }
                (outer.len(), entries, size)
            }
        };
        // Only a table of at most `max_table` entries, of a part that costs more than a
        // read, can pay.
        if best.as_ref().is_some_and(|b| b.0 <= cost) || entries > max_table || !expensive(&rest) {
            continue;
        }
        best = Some((cost, c, lo, hi, rest, outer));
    }
    best.map(|(_, c, lo, hi, rest, outer)| (c, lo, hi, rest, outer))
}

/// The integer values a key candidate takes: an integral float expression whose clamps bound
/// it, or an integer expression of a narrow type.
fn key_range(c: &E) -> Option<(f64, f64)> {
    let (lo, hi) = match c.dtype {
        DType::F32 | DType::F64 if expr::is_integral(c) => expr::float_bounds(c),
        DType::U8 | DType::I8 => expr::int_type_range(c.dtype)?,
        DType::Bool => (0.0, 1.0),
        _ => return None,
    };
    (lo.is_finite() && hi.is_finite() && hi >= lo && hi - lo < MAX_ENTRIES).then_some((lo, hi))
}

/// Whether a float expression is never NaN: clamps and arithmetic of NaN-free bounded
/// operands, `select(x == x, x, ·)`, integer conversions.
fn nan_free(e: &E) -> bool {
    let bounded = |x: &E| {
        let (l, h) = expr::float_bounds(x);
        l.is_finite() && h.is_finite()
    };
    match &e.kind {
        ExprKind::Const(c) => !c.as_f64().is_nan(),
        ExprKind::Cast(x) => !x.dtype.is_float() || nan_free(x),
        ExprKind::Select(c, a, b) => {
            let guarded = matches!(&c.kind, ExprKind::Binary(BinOp::Eq, p, q)
                if Arc::ptr_eq(p, q) && Arc::ptr_eq(p, a));
            (guarded || nan_free(a)) && nan_free(b)
        }
        ExprKind::Unary(
            UnOp::Neg | UnOp::Abs | UnOp::Round | UnOp::Floor | UnOp::Ceil | UnOp::Trunc,
            a,
        ) => nan_free(a),
        ExprKind::Binary(BinOp::Max | BinOp::Min, a, b) => nan_free(a) && nan_free(b),
        ExprKind::Binary(BinOp::Add | BinOp::Sub | BinOp::Mul, a, b) => {
            nan_free(a) && nan_free(b) && bounded(a) && bounded(b)
        }
        _ => false,
    }
}

/// Whether `rest` (the body outside the key) has an operation costlier than the table read.
fn expensive(rest: &E) -> bool {
    let mut found = false;
    expr::rewrite(rest, &mut |e| {
        match &e.kind {
            ExprKind::Unary(op, _) if !op.is_cheap() => found = true,
            ExprKind::Binary(BinOp::Div | BinOp::Pow, _, _) => found = true,
            _ => {}
        }
        None
    });
    found
}

/// `e` with every occurrence of the node `key` (by address) replaced by `with`.
fn replace(e: &E, key: &E, with: &E) -> E {
    expr::rewrite(e, &mut |x| Arc::ptr_eq(x, key).then(|| with.clone()))
}

/// Whether `e` reads a variable, memoized per node in `memo` (the cut search asks it of
/// every subexpression of a body: without the memo, quadratic in the body's size).
fn has_var(e: &E, memo: &mut HashMap<*const Expr, bool>) -> bool {
    if let Some(&v) = memo.get(&Arc::as_ptr(e)) {
        return v;
    }
    let v = matches!(e.kind, ExprKind::Var(_)) || e.children().iter().any(|c| has_var(c, memo));
    memo.insert(Arc::as_ptr(e), v);
    v
}

fn collect(e: &E, seen: &mut HashSet<*const Expr>, out: &mut Vec<E>) {
    if !seen.insert(Arc::as_ptr(e)) {
        return;
    }
    out.push(e.clone());
    for c in e.children() {
        collect(c, seen, out);
    }
}
