//! Tensors computed from positions: Range, OneHot, Trilu, EyeLike.

use crate::error::Result;
use crate::frontend::build;
use crate::frontend::ctx::Ctx;
use crate::ir::dim::Dim;
use crate::ir::expr::{self, BinOp, E};
use crate::ir::{DType, Scalar, ValueId};

pub fn range(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (s, l, d) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    let dt = ctx.dtype(s);
    let get = |ctx: &Ctx, v: ValueId, what: &str| -> Result<Scalar> {
        match ctx.konst(v) {
            Some(t) if t.len() == 1 => Ok(t.get(0)),
            Some(_) => Err(ctx.err(format!("{what} must be a scalar"))),
            None => Err(ctx.unsupported(format!(
                "{what} is computed at run time; the output length must be known at compile time"
            ))),
        }
    };
    if ctx.is_runtime(s) || ctx.is_runtime(l) || ctx.is_runtime(d) {
        return range_runtime(ctx, s, l, d);
    }
    let (start, limit, delta) = (
        get(ctx, s, "start")?,
        get(ctx, l, "limit")?,
        get(ctx, d, "delta")?,
    );
    let n = if dt.is_float() {
        let (a, b, c) = (start.as_f64(), limit.as_f64(), delta.as_f64());
        if c == 0.0 {
            return Err(ctx.err("delta must not be 0"));
        }
        ((b - a) / c).ceil().max(0.0) as i64
    } else {
        let (a, b, c) = (
            start.as_i64() as i128,
            limit.as_i64() as i128,
            delta.as_i64() as i128,
        );
        if c == 0 {
            return Err(ctx.err("delta must not be 0"));
        }
        let span = b - a;
        let q = if c > 0 {
            (span + c - 1).div_euclid(c)
        } else {
            (-span + (-c) - 1).div_euclid(-c)
        };
        // Beyond i64 only for spans past the limits, which the shape check reports.
        i64::try_from(q.max(0)).unwrap_or(i64::MAX)
    };
    let body = expr::binary(
        BinOp::Add,
        expr::konst(dt, start),
        expr::binary(
            BinOp::Mul,
            expr::cast(expr::var(0), dt),
            expr::konst(dt, delta),
        ),
    );
    Ok(vec![ctx.map(dt, vec![Dim::Known(n)], vec![], body)?])
}

/// Range with run-time operands: the length is the declared one, checked at run time.
fn range_runtime(ctx: &mut Ctx, s: ValueId, l: ValueId, d: ValueId) -> Result<Vec<ValueId>> {
    let out = ctx.declared_shape(0, "start/limit/delta")?;
    let [n] = out[..] else {
        return Err(ctx.err("declared output must be 1-D"));
    };
    let dt = ctx.dtype(s);
    let sc = |k: u32| expr::load(dt, k, vec![]);
    let body = expr::binary(
        BinOp::Add,
        sc(0),
        expr::binary(BinOp::Mul, expr::cast(expr::var(0), dt), sc(2)),
    );
    let ins = vec![s, l, d];
    for &v in &ins {
        if ctx.rank(v) != 0 {
            return Err(ctx.err("start, limit and delta must be scalars"));
        }
    }
    // count = max(ceil((limit - start) / delta), 0), computed in f64.
    let f = |k: u32| expr::cast(sc(k), DType::F64);
    let q = expr::unary(
        crate::ir::expr::UnOp::Ceil,
        expr::binary(BinOp::Div, expr::binary(BinOp::Sub, f(1), f(0)), f(2)),
    );
    let count = expr::binary(BinOp::Max, q, expr::f(DType::F64, 0.0));
    ctx.assert_expr(
        vec![],
        ins.clone(),
        expr::binary(BinOp::Eq, count, expr::f(DType::F64, n as f64)),
        onnxc_runtime::abi::ONNXC_ERR_SHAPE,
    )?;
    Ok(vec![ctx.map(dt, vec![Dim::Known(n)], ins, body)?])
}

pub fn one_hot(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (ind, depth_v, values) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    let depth = if ctx.is_runtime(depth_v) {
        let out = ctx.declared_shape(0, "input 'depth'")?;
        let r = ctx.rank(ind) + 1;
        let axis = build::axis(ctx, ctx.attr_i_or("axis", -1)?, r)?;
        let d = *out
            .get(axis)
            .ok_or_else(|| ctx.err("declared output rank is wrong"))?;
        let dd = ctx.dtype(depth_v);
        let v = expr::cast(
            expr::load(dd, 0, vec![expr::i(0); ctx.rank(depth_v)]),
            DType::F64,
        );
        ctx.assert_expr(
            vec![],
            vec![depth_v],
            expr::binary(BinOp::Eq, v, expr::f(DType::F64, d as f64)),
            onnxc_runtime::abi::ONNXC_ERR_SHAPE,
        )?;
        d
    } else {
        let depth = ctx.const_floats(depth_v, "input 'depth'")?;
        *depth
            .first()
            .ok_or_else(|| ctx.err("depth must hold one value"))? as i64
    };
    if depth < 1 {
        return Err(ctx.err(format!("depth must be positive, got {depth}")));
    }
    let is = ctx.shape(ind);
    let r = is.len() + 1;
    let axis = build::axis(ctx, ctx.attr_i_or("axis", -1)?, r)?;
    let mut shape = is.clone();
    shape.insert(axis, Dim::Known(depth));
    let it = ctx.dtype(ind);
    let dt = ctx.dtype(values);
    let idx: Vec<E> = (0..r)
        .filter(|&k| k != axis)
        .map(|k| expr::var(k as u32))
        .collect();
    // Negative indices count from the end; out-of-range ones give an all-off row.
    let i = expr::cast(
        expr::load(it, 0, idx),
        if it.is_float() {
            DType::F64
        } else {
            DType::I64
        },
    );
    let i = if it.is_float() {
        expr::cast(expr::unary(crate::ir::expr::UnOp::Trunc, i), DType::I64)
    } else {
        i
    };
    let i = expr::select(
        expr::lt(i.clone(), expr::i(0)),
        expr::add(i.clone(), expr::i(depth)),
        i,
    );
    let hit = expr::binary(BinOp::Eq, i, expr::var(axis as u32));
    let vs = ctx.shape(values);
    if crate::ir::dim::num_elements(&vs) != Dim::Known(2) {
        return Err(ctx.err("values must hold two elements [off, on]"));
    }
    let vr = vs.len();
    let at = |k: i64| {
        let mut ix = vec![expr::i(0); vr];
        if vr > 0 {
            ix[vr - 1] = expr::i(k);
        }
        expr::load(dt, 1, ix)
    };
    let body = expr::select(hit, at(1), at(0));
    Ok(vec![ctx.map(dt, shape, vec![ind, values], body)?])
}

pub fn trilu(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let upper = ctx.attr_i_or("upper", 1)? != 0;
    let shape = ctx.shape(x);
    let r = shape.len();
    if r < 2 {
        return Err(ctx.err("input must have rank >= 2"));
    }
    let dt = ctx.dtype(x);
    let mut inputs = vec![x];
    if let Some(kv) = ctx.opt_input(1) {
        build::expect_types(ctx, kv, "k", &[DType::I64])?;
        if crate::ir::dim::num_elements(&ctx.shape(kv)).known() != Some(1) {
            return Err(ctx.err("k must be a scalar"));
        }
    }
    let k = match ctx.opt_input(1) {
        None => expr::i(0),
        Some(kv) => match ctx.konst(kv) {
            Some(t) => expr::i(t.get(0).as_i64()),
            None => {
                inputs.push(kv);
                expr::load(DType::I64, 1, vec![expr::i(0); ctx.rank(kv)])
            }
        },
    };
    let diff = expr::sub(expr::var(r as u32 - 1), expr::var(r as u32 - 2));
    let keep = if upper {
        expr::ge(diff, k)
    } else {
        expr::binary(BinOp::Le, diff, k)
    };
    let body = expr::select(
        keep,
        build::load_same(dt, 0, r),
        expr::konst(dt, Scalar::zero(dt)),
    );
    Ok(vec![ctx.map(dt, shape, inputs, body)?])
}

pub fn eye_like(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let shape = ctx.shape(x);
    if shape.len() != 2 {
        return Err(ctx.err("input must be 2-D"));
    }
    let dt = match ctx.attr_dtype("dtype")? {
        Some(dt) => dt,
        None => ctx.dtype(x),
    };
    let k = ctx.attr_i_or("k", 0)?;
    let hit = expr::binary(BinOp::Eq, expr::sub(expr::var(1), expr::var(0)), expr::i(k));
    let body = expr::select(
        hit,
        expr::konst(dt, Scalar::one(dt)),
        expr::konst(dt, Scalar::zero(dt)),
    );
    Ok(vec![ctx.map(dt, shape, vec![], body)?])
}
