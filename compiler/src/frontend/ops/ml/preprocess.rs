//! The feature transforms of ai.onnx.ml: Normalizer, Scaler, Binarizer, Imputer,
//! ArrayFeatureExtractor, FeatureVectorizer, OneHotEncoder, LabelEncoder (opsets 1, 2 and
//! 4) and CategoryMapper — maps, with keys looked up by a binary search over a sorted
//! constant table (`lookup_position`) or, for strings, by `kernels::StrLookup`.

use super::encode;
use crate::error::Result;
use crate::frontend::build;
use crate::frontend::ctx::Ctx;
use crate::ir::dim::{Dim, shape_from};
use crate::ir::expr::{self, BinOp, E, UnOp};
use crate::ir::graph::ReduceKind;
use crate::ir::{DType, Scalar, Tensor, ValueId};

/// X as float32 rows `[n, c]` (a 1-D X is one row); returns the value and its original shape.
fn rows_f32(ctx: &mut Ctx, what: &str) -> Result<(ValueId, Vec<i64>)> {
    let x = ctx.input(0)?;
    let shape = ctx.known_shape(x)?;
    let dt = ctx.dtype(x);
    if !dt.is_numeric() {
        return Err(ctx.err(format!("input X is {dt}; {what} takes numbers")));
    }
    let x = build::cast(ctx, x, DType::F32)?;
    Ok((x, shape))
}

/// Normalizer (onnxruntime's): per row along axis 1 (the inner dims of a higher-rank X
/// normalized separately), MAX divides by the largest value, L1 by the sum of magnitudes,
/// L2 by the root of the sum of squares; a row whose divisor is 0 is copied. float32 out.
pub fn normalizer(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let norm = ctx.attr_s_or("norm", "MAX")?;
    let (x, shape) = rows_f32(ctx, "Normalizer")?;
    let axis = if shape.len() == 1 { 0 } else { 1 };
    let rank = shape.len();
    let kind = match norm.as_str() {
        "MAX" => ReduceKind::Max,
        "L1" | "L2" => ReduceKind::Sum,
        other => {
            return Err(ctx.err(format!(
                "attribute 'norm' is '{other}'; expected MAX, L1 or L2"
            )));
        }
    };
    let l1 = norm == "L1";
    let l2 = norm == "L2";
    let d = build::reduce(ctx, x, kind, &[axis], true, |v| {
        if l1 {
            expr::unary(UnOp::Abs, v)
        } else if l2 {
            expr::binary(BinOp::Mul, v.clone(), v)
        } else {
            v
        }
    })?;
    let xv = build::load_same(DType::F32, 0, rank);
    let dv = expr::load(DType::F32, 1, build::keep_index(rank, &[axis]));
    let zero = expr::f(DType::F32, 0.0);
    let y = if l2 {
        // sign(x)·√(x²/Σx²), as onnxruntime computes it.
        let r = expr::unary(
            UnOp::Sqrt,
            expr::binary(
                BinOp::Div,
                expr::binary(BinOp::Mul, xv.clone(), xv.clone()),
                dv.clone(),
            ),
        );
        expr::select(
            expr::binary(BinOp::Lt, xv.clone(), zero.clone()),
            expr::unary(UnOp::Neg, r.clone()),
            r,
        )
    } else {
        expr::binary(BinOp::Div, xv.clone(), dv.clone())
    };
    let y = expr::select(expr::binary(BinOp::Eq, dv, zero), xv, y);
    Ok(vec![ctx.map(
        DType::F32,
        shape_from(&shape),
        vec![x, d],
        y,
    )?])
}

/// Per-column constants (one value, or one per entry of the last axis) as a load.
fn per_column(
    ctx: &mut Ctx,
    vals: &[f64],
    cols: i64,
    what: &str,
    rank: usize,
) -> Result<(ValueId, E)> {
    if vals.len() != 1 && vals.len() as i64 != cols {
        return Err(ctx.err(format!(
            "attribute '{what}' has {} values; X has {cols} columns (give one value or one per column)",
            vals.len()
        )));
    }
    let t = ctx.constant(Tensor::from_scalars(
        DType::F32,
        vec![vals.len() as i64],
        &vals.iter().map(|&v| Scalar::F(v)).collect::<Vec<_>>(),
    ));
    let index = if vals.len() == 1 {
        expr::i(0)
    } else {
        expr::var(rank as u32 - 1)
    };
    Ok((t, expr::load(DType::F32, 1, vec![index])))
}

/// Scaler: `(x − offset)·scale` per column, float32.
pub fn scaler(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (x, shape) = rows_f32(ctx, "Scaler")?;
    let cols = *shape.last().unwrap_or(&1);
    let rank = shape.len().max(1);
    let offset: Vec<f64> = ctx
        .attr_floats("offset")
        .unwrap_or_else(|| vec![0.0])
        .iter()
        .map(|&v| v as f64)
        .collect();
    let scale: Vec<f64> = ctx
        .attr_floats("scale")
        .unwrap_or_else(|| vec![1.0])
        .iter()
        .map(|&v| v as f64)
        .collect();
    let (o, ol) = per_column(ctx, &offset, cols, "offset", rank)?;
    let (s, sl) = per_column(ctx, &scale, cols, "scale", rank)?;
    let sl = expr::remap_inputs(&sl, &[0, 2]);
    let xv = build::load_same(DType::F32, 0, shape.len());
    let y = expr::binary(BinOp::Mul, expr::binary(BinOp::Sub, xv, ol), sl);
    Ok(vec![ctx.map(
        DType::F32,
        shape_from(&shape),
        vec![x, o, s],
        y,
    )?])
}

/// Binarizer: 1 where x > threshold, else 0, in X's type.
pub fn binarizer(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let dt = ctx.dtype(x);
    if !dt.is_numeric() {
        return Err(ctx.err(format!("input X is {dt}; Binarizer takes numbers")));
    }
    let t = ctx.attr_f_or("threshold", 0.0)?;
    let c = dt.compute_type();
    Ok(vec![build::unary(ctx, x, dt, |v| {
        let v = expr::cast(v, c);
        expr::cast(
            expr::select(
                expr::binary(BinOp::Gt, v, expr::f(c, t)),
                expr::f(c, 1.0),
                expr::f(c, 0.0),
            ),
            dt,
        )
    })?])
}

/// Imputer: values equal to the replaced value (NaN: every NaN) become the imputed value
/// of their column (one value, or one per column); float32 or int64 as X.
pub fn imputer(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let shape = ctx.known_shape(x)?;
    let dt = ctx.dtype(x);
    let cols = *shape.last().unwrap_or(&1);
    let floats = ctx
        .attr_floats("imputed_value_floats")
        .filter(|v| !v.is_empty());
    let ints = ctx
        .attr_ints("imputed_value_int64s")
        .filter(|v| !v.is_empty());
    let (vals, replaced, vt): (Vec<Scalar>, Scalar, DType) = match (floats, ints) {
        (Some(v), _) => (
            v.iter().map(|&f| Scalar::F(f as f64)).collect(),
            Scalar::F(ctx.attr_f_or("replaced_value_float", 0.0)?),
            DType::F32,
        ),
        (None, Some(v)) => (
            v.iter().map(|&i| Scalar::I(i)).collect(),
            Scalar::I(ctx.attr_i_or("replaced_value_int64", 0)?),
            DType::I64,
        ),
        (None, None) => {
            return Err(ctx.err(
                "one of 'imputed_value_floats' and 'imputed_value_int64s' must be non-empty",
            ));
        }
    };
    if dt != vt && !(vt == DType::F32 && dt == DType::F64) {
        return Err(ctx.err(format!(
            "input X is {dt} but the imputed values are {vt}; they must match"
        )));
    }
    if vals.len() != 1 && vals.len() as i64 != cols {
        return Err(ctx.err(format!(
            "{} imputed values for {cols} columns (give one value or one per column)",
            vals.len()
        )));
    }
    let table = ctx.constant(Tensor::from_scalars(dt, vec![vals.len() as i64], &vals));
    let rank = shape.len();
    let xv = build::load_same(dt, 0, rank);
    let col = if vals.len() == 1 {
        expr::i(0)
    } else {
        expr::var(rank as u32 - 1)
    };
    let imputed = expr::load(dt, 1, vec![col]);
    let hit = match replaced {
        Scalar::F(r) if r.is_nan() => expr::unary(UnOp::IsNan, xv.clone()),
        r => expr::binary(BinOp::Eq, xv.clone(), expr::konst(dt, r)),
    };
    let y = expr::select(hit, imputed, xv);
    Ok(vec![ctx.map(dt, shape_from(&shape), vec![x, table], y)?])
}

/// ArrayFeatureExtractor: X's elements at the given positions of its last axis (a 1-D X
/// gives one row). A position outside the axis fails the run (`ONNXC_ERR_INDEX`).
pub fn array_feature_extractor(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (x, y) = (ctx.input(0)?, ctx.input(1)?);
    let xs = ctx.known_shape(x)?;
    if xs.is_empty() {
        return Err(ctx.err("input X is a scalar; ArrayFeatureExtractor needs an axis"));
    }
    if ctx.dtype(y) != DType::I64 {
        return Err(ctx.err(format!("input Y is {}; it must be int64", ctx.dtype(y))));
    }
    let k: i64 = ctx.known_shape(y)?.iter().product();
    let last = *xs.last().unwrap_or(&1);
    let yf = ctx.reshape(y, vec![Dim::Known(k)])?;
    // Every position must be in [0, last).
    let p = expr::load(DType::I64, 0, vec![expr::var(0)]);
    let ok = expr::and(
        expr::ge(p.clone(), expr::i(0)),
        expr::lt(p.clone(), expr::i(last)),
    );
    ctx.assert_expr(vec![k], vec![yf], ok, onnxc_runtime::abi::ONNXC_ERR_INDEX)?;
    let mut out = if xs.len() == 1 {
        vec![1]
    } else {
        xs[..xs.len() - 1].to_vec()
    };
    out.push(k);
    let dt = ctx.dtype(x);
    let r = out.len();
    let mut index: Vec<E> = if xs.len() == 1 {
        vec![]
    } else {
        (0..r as u32 - 1).map(expr::var).collect()
    };
    let pos = expr::load(DType::I64, 1, vec![expr::var(r as u32 - 1)]);
    index.push(expr::clamp(pos, 0, last - 1));
    Ok(vec![ctx.map(
        dt,
        shape_from(&out),
        vec![x, yf],
        expr::load(dt, 0, index),
    )?])
}

/// FeatureVectorizer: inputs (as float32 `[n, c_i]`; a 1-D input is a column) cut or
/// zero-padded to `inputdimensions`, concatenated along axis 1.
pub fn feature_vectorizer(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let dims = ctx.attr_ints("inputdimensions").unwrap_or_default();
    let inputs: Vec<ValueId> = (0..ctx.num_inputs())
        .map(|k| ctx.input(k))
        .collect::<Result<_>>()?;
    if dims.len() != inputs.len() {
        return Err(ctx.err(format!(
            "{} inputs but 'inputdimensions' has {} entries",
            inputs.len(),
            dims.len()
        )));
    }
    let mut n = None;
    let mut parts = Vec::new();
    for (k, (&v, &d)) in inputs.iter().zip(&dims).enumerate() {
        let s = ctx.known_shape(v)?;
        let (rows, cols) = match s.as_slice() {
            [r] => (*r, 1),
            [r, c] => (*r, *c),
            _ => {
                return Err(ctx.err(format!(
                    "input {k} has shape {s:?}; FeatureVectorizer takes [N, C] or [N]"
                )));
            }
        };
        if *n.get_or_insert(rows) != rows {
            return Err(ctx.err(format!(
                "input {k} has {rows} rows, input 0 {}",
                n.unwrap_or(0)
            )));
        }
        if d < 0 {
            return Err(ctx.err(format!("inputdimensions[{k}] is {d}")));
        }
        if !ctx.dtype(v).is_numeric() {
            return Err(ctx.err(format!("input {k} is {}; it must be numeric", ctx.dtype(v))));
        }
        let v = build::cast(ctx, v, DType::F32)?;
        let v = ctx.reshape(v, vec![Dim::Known(rows), Dim::Known(cols)])?;
        let c = cols;
        let body = expr::select(
            expr::lt(expr::var(1), expr::i(c)),
            expr::load(
                DType::F32,
                0,
                vec![expr::var(0), expr::clamp(expr::var(1), 0, (c - 1).max(0))],
            ),
            expr::f(DType::F32, 0.0),
        );
        let part = if d == c {
            v
        } else if c == 0 {
            ctx.map(
                DType::F32,
                vec![Dim::Known(rows), Dim::Known(d)],
                vec![],
                expr::f(DType::F32, 0.0),
            )?
        } else {
            ctx.map(
                DType::F32,
                vec![Dim::Known(rows), Dim::Known(d)],
                vec![v],
                body,
            )?
        };
        parts.push(part);
    }
    let rows = n.unwrap_or(0);
    let total: i64 = dims.iter().sum();
    let out = crate::ir::TypeInfo::new(DType::F32, vec![Dim::Known(rows), Dim::Known(total)]);
    Ok(vec![ctx.add(
        crate::ir::Op::Concat { axis: 1 },
        parts,
        out,
    )?])
}

/// The position of each element of the (numeric) value `x` in `keys` — its first
/// occurrence — or −1: a binary search over the keys sorted, unrolled into the map (log₂ of
/// the keys' count loads per element), or a chain of comparisons for a few keys.
pub fn lookup_position(ctx: &mut Ctx, x: ValueId, keys: &[Scalar], kt: DType) -> Result<ValueId> {
    let shape = ctx.shape(x);
    let rank = shape.len();
    let xv = expr::cast(build::load_same(ctx.dtype(x), 0, rank), kt);
    let k = keys.len();
    if k <= 8 {
        let mut e = expr::i(-1);
        for (p, key) in keys.iter().enumerate().rev() {
            e = expr::select(
                expr::binary(BinOp::Eq, xv.clone(), expr::konst(kt, *key)),
                expr::i(p as i64),
                e,
            );
        }
        return ctx.map(DType::I64, shape, vec![x], e);
    }
    let mut order: Vec<usize> = (0..k).collect();
    order.sort_by(|&a, &b| {
        keys[a]
            .as_f64()
            .total_cmp(&keys[b].as_f64())
            .then(keys[a].as_i64().cmp(&keys[b].as_i64()))
            .then(a.cmp(&b))
    });
    let sorted: Vec<Scalar> = order.iter().map(|&i| keys[i]).collect();
    let kt_table = ctx.constant(Tensor::from_scalars(kt, vec![k as i64], &sorted));
    let pos_table = ctx.constant(Tensor::from_i64s(
        vec![k as i64],
        &order.iter().map(|&i| i as i64).collect::<Vec<_>>(),
    ));
    let key_at = |i: E| expr::load(kt, 1, vec![expr::clamp(i, 0, k as i64 - 1)]);
    // lower bound: the number of keys below x.
    let mut step = (k as u64).next_power_of_two() as i64;
    let mut pos = expr::i(0);
    while step >= 1 {
        let cand = expr::add(pos.clone(), expr::i(step));
        let take = expr::and(
            expr::binary(BinOp::Le, cand.clone(), expr::i(k as i64)),
            expr::binary(
                BinOp::Lt,
                key_at(expr::sub(cand.clone(), expr::i(1))),
                xv.clone(),
            ),
        );
        pos = expr::select(take, cand, pos);
        step /= 2;
    }
    let found = expr::and(
        expr::lt(pos.clone(), expr::i(k as i64)),
        expr::binary(BinOp::Eq, key_at(pos.clone()), xv),
    );
    let body = expr::select(
        found,
        expr::load(DType::I64, 2, vec![expr::clamp(pos, 0, k as i64 - 1)]),
        expr::i(-1),
    );
    ctx.map(
        DType::I64,
        shape,
        vec![x, kt_table, pos_table],
        expr::share(&body),
    )
}

/// Positions of X's elements among `keys` (strings, or numbers of type `kt`).
enum Keys {
    Strings(Vec<String>),
    Numbers(Vec<Scalar>, DType),
}

fn positions(ctx: &mut Ctx, x: ValueId, keys: &Keys) -> Result<ValueId> {
    let dt = ctx.dtype(x);
    match keys {
        Keys::Strings(k) => {
            if dt != DType::Str {
                return Err(ctx.err(format!("input X is {dt}; the keys are strings")));
            }
            encode::lookup(ctx, x, k)
        }
        Keys::Numbers(k, kt) => {
            if !dt.is_numeric() {
                return Err(ctx.err(format!("input X is {dt}; the keys are {kt}")));
            }
            lookup_position(ctx, x, k, *kt)
        }
    }
}

/// Values by position (`pos` −1: `default`): strings through a table, numbers by a load.
enum Values {
    Strings(Vec<String>, String),
    Numbers(Vec<Scalar>, DType, Scalar),
}

fn values_at(ctx: &mut Ctx, pos: ValueId, vals: &Values) -> Result<ValueId> {
    let shape = ctx.shape(pos);
    let rank = shape.len();
    let p = build::load_same(DType::I64, 0, rank);
    match vals {
        Values::Strings(v, default) => {
            let mut table = v.clone();
            table.push(default.clone());
            let k = v.len() as i64;
            let idx = ctx.map(
                DType::I64,
                shape,
                vec![pos],
                expr::select(expr::ge(p.clone(), expr::i(0)), p, expr::i(k)),
            )?;
            encode::strings_at(ctx, idx, &table)
        }
        Values::Numbers(v, vt, default) => {
            let k = v.len() as i64;
            if k == 0 {
                return ctx.map(*vt, shape, vec![pos], expr::konst(*vt, *default));
            }
            let t = ctx.constant(Tensor::from_scalars(*vt, vec![k], v));
            let body = expr::select(
                expr::ge(p.clone(), expr::i(0)),
                expr::load(*vt, 1, vec![expr::clamp(p, 0, k - 1)]),
                expr::konst(*vt, *default),
            );
            ctx.map(*vt, shape, vec![pos, t], body)
        }
    }
}

/// OneHotEncoder: X (strings, or integers/floats read as int64) against the categories,
/// float32 with a new last axis of one entry per category. An unknown category gives a row
/// of zeros with `zeros=1`, fails the run (`ONNXC_ERR_VALUE`) otherwise.
pub fn one_hot_encoder(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let ints = ctx.attr_ints("cats_int64s").filter(|v| !v.is_empty());
    let strings = ctx.attr_strings("cats_strings").filter(|v| !v.is_empty());
    let keys = match (ints, strings) {
        (Some(i), None) => Keys::Numbers(i.iter().map(|&v| Scalar::I(v)).collect(), DType::I64),
        (None, Some(s)) => Keys::Strings(s),
        _ => {
            return Err(
                ctx.err("exactly one of 'cats_int64s' and 'cats_strings' must be non-empty")
            );
        }
    };
    let c = match &keys {
        Keys::Strings(s) => s.len(),
        Keys::Numbers(n, _) => n.len(),
    } as i64;
    let x = if ctx.dtype(x).is_float() {
        // onnxruntime reads float categories as int64.
        build::cast(ctx, x, DType::I64)?
    } else {
        x
    };
    let pos = positions(ctx, x, &keys)?;
    let shape = ctx.known_shape(pos)?;
    let rank = shape.len();
    if ctx.attr_i_or("zeros", 1)? == 0 {
        let n: i64 = shape.iter().product();
        let flat = ctx.reshape(pos, vec![Dim::Known(n)])?;
        let ok = expr::ge(expr::load(DType::I64, 0, vec![expr::var(0)]), expr::i(0));
        ctx.assert_expr(vec![n], vec![flat], ok, onnxc_runtime::abi::ONNXC_ERR_VALUE)?;
    }
    let mut out = shape.clone();
    out.push(c);
    let p = expr::load(DType::I64, 0, (0..rank as u32).map(expr::var).collect());
    let y = expr::select(
        expr::binary(BinOp::Eq, p, expr::var(rank as u32)),
        expr::f(DType::F32, 1.0),
        expr::f(DType::F32, 0.0),
    );
    Ok(vec![ctx.map(DType::F32, shape_from(&out), vec![pos], y)?])
}

fn scalars_f(v: &[f32]) -> Vec<Scalar> {
    v.iter().map(|&f| Scalar::F(f as f64)).collect()
}

/// LabelEncoder: maps keys to values (strings, int64 or float; opset 4 also as tensors of
/// any type), absent keys to the default.
pub fn label_encoder(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let xdt = ctx.dtype(x);
    let (keys, vals) = if ctx.opset < 2 {
        // classes_strings: string -> position, or int64 -> string.
        let classes = ctx.attr_strings("classes_strings").unwrap_or_default();
        if xdt == DType::Str {
            let n = classes.len() as i64;
            (
                Keys::Strings(classes),
                Values::Numbers(
                    (0..n).map(Scalar::I).collect(),
                    DType::I64,
                    Scalar::I(ctx.attr_i_or("default_int64", -1)?),
                ),
            )
        } else {
            let n = classes.len() as i64;
            (
                Keys::Numbers((0..n).map(Scalar::I).collect(), DType::I64),
                Values::Strings(classes, ctx.attr_s_or("default_string", "_Unused")?),
            )
        }
    } else {
        let keys = if let Some(s) = ctx.attr_string_tensor("keys_tensor")? {
            Keys::Strings(s)
        } else if let Some(t) = ctx.attr_t("keys_tensor")? {
            Keys::Numbers(t.scalars(), t.dtype)
        } else if let Some(s) = ctx.attr_strings("keys_strings").filter(|v| !v.is_empty()) {
            Keys::Strings(s)
        } else if let Some(i) = ctx.attr_ints("keys_int64s").filter(|v| !v.is_empty()) {
            Keys::Numbers(i.iter().map(|&v| Scalar::I(v)).collect(), DType::I64)
        } else if let Some(f) = ctx.attr_floats("keys_floats").filter(|v| !v.is_empty()) {
            Keys::Numbers(scalars_f(&f), DType::F32)
        } else {
            return Err(ctx.err(
                "no keys: one of keys_strings, keys_int64s, keys_floats, keys_tensor is required",
            ));
        };
        let default_tensor = ctx.attr_t("default_tensor")?;
        let default_string = ctx.attr_string_tensor("default_tensor")?;
        let vals = if let Some(s) = ctx.attr_string_tensor("values_tensor")? {
            let d = match default_string {
                Some(d) => d.into_iter().next().unwrap_or_default(),
                None => ctx.attr_s_or("default_string", "_Unused")?,
            };
            Values::Strings(s, d)
        } else if let Some(t) = ctx.attr_t("values_tensor")? {
            let d = match default_tensor {
                Some(d) if d.len() == 1 => d.get(0).cast(t.dtype),
                _ if t.dtype.is_float() => Scalar::F(-0.0),
                _ => Scalar::I(-1),
            };
            Values::Numbers(t.scalars(), t.dtype, d)
        } else if let Some(s) = ctx.attr_strings("values_strings").filter(|v| !v.is_empty()) {
            Values::Strings(s, ctx.attr_s_or("default_string", "_Unused")?)
        } else if let Some(i) = ctx.attr_ints("values_int64s").filter(|v| !v.is_empty()) {
            Values::Numbers(
                i.iter().map(|&v| Scalar::I(v)).collect(),
                DType::I64,
                Scalar::I(ctx.attr_i_or("default_int64", -1)?),
            )
        } else if let Some(f) = ctx.attr_floats("values_floats").filter(|v| !v.is_empty()) {
            Values::Numbers(
                scalars_f(&f),
                DType::F32,
                Scalar::F(ctx.attr_f_or("default_float", -0.0)?),
            )
        } else {
            return Err(ctx.err("no values: one of values_strings, values_int64s, values_floats, values_tensor is required"));
        };
        (keys, vals)
    };
    let (nk, nv) = (
        match &keys {
            Keys::Strings(s) => s.len(),
            Keys::Numbers(n, _) => n.len(),
        },
        match &vals {
            Values::Strings(s, _) => s.len(),
            Values::Numbers(n, _, _) => n.len(),
        },
    );
    if nk != nv {
        return Err(ctx.err(format!("{nk} keys but {nv} values; they pair one to one")));
    }
    let pos = positions(ctx, x, &keys)?;
    Ok(vec![values_at(ctx, pos, &vals)?])
}

/// CategoryMapper: strings to int64 (by `cats_strings` → `cats_int64s`) or int64 to strings.
pub fn category_mapper(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let strings = ctx.attr_strings("cats_strings").unwrap_or_default();
    let ints = ctx.attr_ints("cats_int64s").unwrap_or_default();
    if strings.len() != ints.len() {
        return Err(ctx.err(format!(
            "'cats_strings' has {} entries and 'cats_int64s' {}; they pair one to one",
            strings.len(),
            ints.len()
        )));
    }
    let (keys, vals) = if ctx.dtype(x) == DType::Str {
        (
            Keys::Strings(strings),
            Values::Numbers(
                ints.iter().map(|&v| Scalar::I(v)).collect(),
                DType::I64,
                Scalar::I(ctx.attr_i_or("default_int64", -1)?),
            ),
        )
    } else if ctx.dtype(x) == DType::I64 {
        (
            Keys::Numbers(ints.iter().map(|&v| Scalar::I(v)).collect(), DType::I64),
            Values::Strings(strings, ctx.attr_s_or("default_string", "_Unused")?),
        )
    } else {
        return Err(ctx.err(format!(
            "input X is {}; CategoryMapper takes strings or int64",
            ctx.dtype(x)
        )));
    };
    let pos = positions(ctx, x, &keys)?;
    Ok(vec![values_at(ctx, pos, &vals)?])
}
