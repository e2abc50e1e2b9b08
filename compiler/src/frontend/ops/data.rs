//! Indexing and data movement: Slice, Gather, GatherElements, GatherND, Expand, Tile, Range,
//! OneHot, Trilu, Split, Pad, DepthToSpace, SpaceToDepth, EyeLike, CumSum, CumProd,
//! ReverseSequence.

use crate::error::Result;
use crate::frontend::build::{self, bload, broadcast_shapes};
use crate::frontend::ctx::Ctx;
use crate::ir::dim::{Dim, Shape};
use crate::ir::expr::{self, BinOp, E};
use crate::ir::graph::ReduceKind;
use crate::ir::{DType, Scalar, ValueId};

fn vars(rank: usize) -> Vec<E> {
    (0..rank as u32).map(expr::var).collect()
}

/// Effective (start, step, length) of an ONNX slice along a dim of size `dim`.
pub fn slice_params(start: i64, end: i64, step: i64, dim: i64) -> (i64, i64) {
    let clampi = |v: i64, lo: i64, hi: i64| v.max(lo).min(hi);
    let norm = |v: i64| if v < 0 { v.saturating_add(dim) } else { v };
    let (s, e) = if step > 0 {
        (clampi(norm(start), 0, dim), clampi(norm(end), 0, dim))
    } else {
        (
            clampi(norm(start), 0, dim - 1),
            clampi(norm(end), -1, dim - 1),
        )
    };
    let len = if step > 0 {
        (e - s + step - 1).div_euclid(step).max(0)
    } else {
        (s - e + (-step) - 1).div_euclid(-step).max(0)
    };
    (s, len)
}

pub fn slice(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let dims = ctx.known_shape(x)?;
    let rank = dims.len();
    let (starts, ends, axes, steps) = if ctx.opset < 10 {
        let starts = ctx
            .attr_ints("starts")
            .ok_or_else(|| ctx.err("attribute 'starts' is required"))?;
        let ends = ctx
            .attr_ints("ends")
            .ok_or_else(|| ctx.err("attribute 'ends' is required"))?;
        let axes = ctx.attr_ints("axes");
        (starts, ends, axes, None)
    } else if (1..5).any(|i| ctx.opt_input(i).is_some_and(|v| ctx.is_runtime(v))) {
        return slice_runtime(ctx, x);
    } else {
        let starts = ctx.const_ints(ctx.input(1)?, "input 'starts'")?;
        let ends = ctx.const_ints(ctx.input(2)?, "input 'ends'")?;
        let axes = match ctx.opt_input(3) {
            Some(a) => Some(ctx.const_ints(a, "input 'axes'")?),
            None => None,
        };
        let steps = match ctx.opt_input(4) {
            Some(s) => Some(ctx.const_ints(s, "input 'steps'")?),
            None => None,
        };
        (starts, ends, axes, steps)
    };
    let n = starts.len();
    let axes = match axes {
        Some(a) => build::axes(ctx, &a, rank)?,
        None => (0..n).collect(),
    };
    let steps = steps.unwrap_or_else(|| vec![1; n]);
    if ends.len() != n || axes.len() != n || steps.len() != n {
        return Err(ctx.err(format!(
            "starts, ends, axes and steps must have the same length, got {n}, {}, {}, {}",
            ends.len(),
            axes.len(),
            steps.len()
        )));
    }
    let mut first = vec![0i64; rank];
    let mut stride = vec![1i64; rank];
    let mut shape = dims.clone();
    for j in 0..n {
        if steps[j] == 0 {
            return Err(ctx.err("slice step must not be 0"));
        }
        let a = axes[j];
        let (s, len) = slice_params(starts[j], ends[j], steps[j], dims[a]);
        first[a] = s;
        stride[a] = steps[j];
        shape[a] = len;
    }
    let dt = ctx.dtype(x);
    let index: Vec<E> = (0..rank)
        .map(|k| {
            expr::add(
                expr::i(first[k]),
                expr::mul(expr::var(k as u32), expr::i(stride[k])),
            )
        })
        .collect();
    let out: Shape = shape.iter().map(|&d| Dim::Known(d)).collect();
    if out.iter().zip(&dims).all(|(a, b)| *a == Dim::Known(*b))
        && first.iter().all(|&f| f == 0)
        && stride.iter().all(|&s| s == 1)
    {
        return Ok(vec![x]);
    }
    Ok(vec![ctx.map(dt, out, vec![x], expr::load(dt, 0, index))?])
}

/// Slice with run-time starts/ends/axes/steps. The output shape is the declared one; a small
/// computation turns the parameters into a first index and a step per input dim (loaded by the
/// data map, whose indices are clamped in bounds), and the lengths are checked at run time.
fn slice_runtime(ctx: &mut Ctx, x: ValueId) -> Result<Vec<ValueId>> {
    use onnxc_runtime::abi::{ONNXC_ERR_SHAPE, ONNXC_ERR_VALUE};
    let out = ctx.declared_shape(0, "the slice parameters")?;
    let dims = ctx.known_shape(x)?;
    let r = dims.len() as i64;
    if out.len() != dims.len() {
        return Err(ctx.err("declared output rank differs from the input rank"));
    }
    let starts = build::flat_i64(ctx, ctx.input(1)?)?;
    let ends = build::flat_i64(ctx, ctx.input(2)?)?;
    let n = ctx.known_shape(starts)?[0];
    let axes = match ctx.opt_input(3) {
        Some(a) => build::flat_i64(ctx, a)?,
        None => ctx.constant(crate::ir::Tensor::from_i64s(
            vec![n],
            &(0..n).collect::<Vec<_>>(),
        )),
    };
    let steps = match ctx.opt_input(4) {
        Some(a) => build::flat_i64(ctx, a)?,
        None => ctx.constant(crate::ir::Tensor::from_i64s(vec![n], &vec![1; n as usize])),
    };
    let dimc = ctx.constant(crate::ir::Tensor::from_i64s(vec![r], &dims));
    let outc = ctx.constant(crate::ir::Tensor::from_i64s(vec![r], &out));
    // Operands: 0 starts, 1 ends, 2 axes, 3 steps, 4 dims, 5 out. Var 0: input dim d; var 1: j.
    let ops = vec![starts, ends, axes, steps, dimc, outc];
    let (d, j) = (expr::var(0), expr::var(1));
    let a = expr::load(DType::I64, 2, vec![j.clone()]);
    let norm_a = expr::select(
        expr::lt(a.clone(), expr::i(0)),
        expr::add(a.clone(), expr::i(r)),
        a.clone(),
    );
    let hit = expr::binary(BinOp::Eq, norm_a, d.clone());
    let dim = expr::load(DType::I64, 4, vec![d.clone()]);
    let st = expr::load(DType::I64, 3, vec![j.clone()]);
    let pos = expr::binary(BinOp::Gt, st.clone(), expr::i(0));
    let normv = |v: E| {
        expr::select(
            expr::lt(v.clone(), expr::i(0)),
            expr::add(v.clone(), dim.clone()),
            v,
        )
    };
    let clampv = |v: E, lo: E, hi: E| expr::binary(BinOp::Max, expr::binary(BinOp::Min, v, hi), lo);
    let s_eff = expr::select(
        pos.clone(),
        clampv(
            normv(expr::load(DType::I64, 0, vec![j.clone()])),
            expr::i(0),
            dim.clone(),
        ),
        clampv(
            normv(expr::load(DType::I64, 0, vec![j.clone()])),
            expr::i(0),
            expr::sub(dim.clone(), expr::i(1)),
        ),
    );
    let e_eff = expr::select(
        pos.clone(),
        clampv(
            normv(expr::load(DType::I64, 1, vec![j.clone()])),
            expr::i(0),
            dim.clone(),
        ),
        clampv(
            normv(expr::load(DType::I64, 1, vec![j.clone()])),
            expr::i(-1),
            expr::sub(dim.clone(), expr::i(1)),
        ),
    );
    let safe_st = expr::select(
        expr::binary(BinOp::Eq, st.clone(), expr::i(0)),
        expr::i(1),
        st.clone(),
    );
    let len_pos = expr::binary(
        BinOp::Div,
        expr::add(
            expr::sub(e_eff.clone(), s_eff.clone()),
            expr::sub(safe_st.clone(), expr::i(1)),
        ),
        safe_st.clone(),
    );
    let neg_st = expr::unary(crate::ir::expr::UnOp::Neg, safe_st.clone());
    let len_neg = expr::binary(
        BinOp::Div,
        expr::add(
            expr::sub(s_eff.clone(), e_eff),
            expr::sub(neg_st.clone(), expr::i(1)),
        ),
        neg_st,
    );
    let len = expr::binary(BinOp::Max, expr::select(pos, len_pos, len_neg), expr::i(0));
    let zero = expr::i(0);
    let shape_r = vec![Dim::Known(r)];
    let first = ctx.reduce(
        ReduceKind::Sum,
        vec![n],
        DType::I64,
        shape_r.clone(),
        ops.clone(),
        expr::select(hit.clone(), s_eff, zero.clone()),
    )?;
    let step_sum = ctx.reduce(
        ReduceKind::Sum,
        vec![n],
        DType::I64,
        shape_r.clone(),
        ops.clone(),
        expr::select(hit.clone(), st.clone(), zero.clone()),
    )?;
    let hits = ctx.reduce(
        ReduceKind::Sum,
        vec![n],
        DType::I64,
        shape_r.clone(),
        ops.clone(),
        expr::select(hit.clone(), expr::i(1), zero.clone()),
    )?;
    let lens = ctx.reduce(
        ReduceKind::Sum,
        vec![n],
        DType::I64,
        shape_r.clone(),
        ops.clone(),
        expr::select(hit, len, zero),
    )?;
    // Axes in range, steps non-zero.
    let aj = expr::load(DType::I64, 2, vec![expr::var(0)]);
    let sj = expr::load(DType::I64, 3, vec![expr::var(0)]);
    let valid = expr::and(
        expr::and(expr::ge(aj.clone(), expr::i(-r)), expr::lt(aj, expr::i(r))),
        expr::unary(
            crate::ir::expr::UnOp::Not,
            expr::binary(BinOp::Eq, sj, expr::i(0)),
        ),
    );
    ctx.assert_expr(vec![n], ops.clone(), valid, ONNXC_ERR_VALUE)?;
    // Each dim: sliced once at most, and its length is the declared one.
    let h = expr::load(DType::I64, 0, vec![expr::var(0)]);
    let l = expr::load(DType::I64, 1, vec![expr::var(0)]);
    let dd = expr::load(DType::I64, 2, vec![expr::var(0)]);
    let o = expr::load(DType::I64, 3, vec![expr::var(0)]);
    let len_ok = expr::select(
        expr::binary(BinOp::Eq, h.clone(), expr::i(0)),
        expr::binary(BinOp::Eq, dd, o.clone()),
        expr::and(
            expr::binary(BinOp::Eq, h, expr::i(1)),
            expr::binary(BinOp::Eq, l, o),
        ),
    );
    ctx.assert_expr(
        vec![r],
        vec![hits, lens, dimc, outc],
        len_ok,
        ONNXC_ERR_SHAPE,
    )?;
    // Data: out[i] = x[first[d] + i_d * step[d]], clamped in bounds.
    let rr = dims.len();
    let index: Vec<E> = (0..rr)
        .map(|k| {
            let kk = expr::i(k as i64);
            let stp = expr::load(DType::I64, 2, vec![kk.clone()]);
            let hk = expr::load(DType::I64, 3, vec![kk.clone()]);
            let stp = expr::select(expr::binary(BinOp::Eq, hk, expr::i(0)), expr::i(1), stp);
            let p = expr::add(
                expr::load(DType::I64, 1, vec![kk]),
                expr::mul(expr::var(k as u32), stp),
            );
            expr::clamp(p, 0, (dims[k] - 1).max(0))
        })
        .collect();
    let dt = ctx.dtype(x);
    let shape: Shape = out.iter().map(|&v| Dim::Known(v)).collect();
    if out.contains(&0) {
        return Ok(vec![ctx.map(
            dt,
            shape,
            vec![],
            expr::konst(dt, Scalar::zero(dt)),
        )?]);
    }
    Ok(vec![ctx.map(
        dt,
        shape,
        vec![x, first, step_sum, hits],
        expr::load(dt, 0, index),
    )?])
}

fn index_types(ctx: &Ctx, v: ValueId, what: &str) -> Result<()> {
    build::expect_types(ctx, v, what, &[DType::I32, DType::I64]).map(|_| ())
}

pub fn gather(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (data, indices) = (ctx.input(0)?, ctx.input(1)?);
    index_types(ctx, indices, "indices")?;
    let ds = ctx.shape(data);
    let is = ctx.shape(indices);
    let r = ds.len();
    let axis = build::axis(ctx, ctx.attr_i_or("axis", 0)?, r)?;
    let bound = ds[axis]
        .known()
        .ok_or_else(|| ctx.err("the gathered axis must have a known size"))?;
    let q = is.len();
    let mut shape: Shape = ds[..axis].to_vec();
    shape.extend(is.iter().cloned());
    shape.extend(ds[axis + 1..].iter().cloned());
    let it = ctx.dtype(indices);
    let ind = expr::load(
        it,
        1,
        (axis..axis + q).map(|k| expr::var(k as u32)).collect(),
    );
    let mut index: Vec<E> = (0..axis).map(|k| expr::var(k as u32)).collect();
    index.push(expr::check_index(expr::cast(ind, DType::I64), bound));
    index.extend((axis + 1..r).map(|k| expr::var((k + q - 1) as u32)));
    let dt = ctx.dtype(data);
    Ok(vec![ctx.map(
        dt,
        shape,
        vec![data, indices],
        expr::load(dt, 0, index),
    )?])
}

pub fn gather_elements(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (data, indices) = (ctx.input(0)?, ctx.input(1)?);
    index_types(ctx, indices, "indices")?;
    let ds = ctx.known_shape(data)?;
    let is = ctx.shape(indices);
    let r = ds.len();
    if is.len() != r {
        return Err(ctx.err("data and indices must have the same rank"));
    }
    let axis = build::axis(ctx, ctx.attr_i_or("axis", 0)?, r)?;
    let it = ctx.dtype(indices);
    let mut index = vars(r);
    index[axis] = expr::check_index(expr::cast(expr::load(it, 1, vars(r)), DType::I64), ds[axis]);
    let dt = ctx.dtype(data);
    Ok(vec![ctx.map(
        dt,
        is,
        vec![data, indices],
        expr::load(dt, 0, index),
    )?])
}

pub fn gather_nd(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (data, indices) = (ctx.input(0)?, ctx.input(1)?);
    build::expect_types(ctx, indices, "indices", &[DType::I64])?;
    let ds = ctx.known_shape(data)?;
    let is = ctx.known_shape(indices)?;
    let b = ctx.attr_i_or("batch_dims", 0)? as usize;
    let (r, q) = (ds.len(), is.len());
    if q < 1 || b >= q || b >= r {
        return Err(ctx.err(format!(
            "invalid ranks: data {ds:?}, indices {is:?}, batch_dims {b}"
        )));
    }
    let k = is[q - 1] as usize;
    if b + k > r {
        return Err(ctx.err(format!(
            "indices.shape[-1] = {k} is too large for data of rank {r} with batch_dims {b}"
        )));
    }
    let mut shape: Vec<i64> = is[..q - 1].to_vec();
    shape.extend_from_slice(&ds[b + k..]);
    let nq = q - 1; // output vars 0..nq index `indices` (batch dims first)
    let mut index: Vec<E> = (0..b).map(|d| expr::var(d as u32)).collect();
    for j in 0..k {
        let mut ii: Vec<E> = (0..nq).map(|d| expr::var(d as u32)).collect();
        ii.push(expr::i(j as i64));
        index.push(expr::check_index(expr::load(DType::I64, 1, ii), ds[b + j]));
    }
    index.extend((b + k..r).map(|d| expr::var((nq + d - b - k) as u32)));
    let dt = ctx.dtype(data);
    let shape: Shape = shape.iter().map(|&d| Dim::Known(d)).collect();
    Ok(vec![ctx.map(
        dt,
        shape,
        vec![data, indices],
        expr::load(dt, 0, index),
    )?])
}

pub fn expand(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let sv = ctx.input(1)?;
    let target = if ctx.is_runtime(sv) {
        // The declared output is the broadcast; each shape entry must be it or 1.
        let out = ctx.declared_shape(0, "input 'shape'")?;
        let xs = ctx.known_shape(x)?;
        let sv = build::flat_i64(ctx, sv)?;
        let n = ctx.known_shape(sv)?[0] as usize;
        if n > out.len() || xs.len() > out.len() {
            return Err(ctx.err("declared output rank is smaller than the operands'"));
        }
        let aligned_x: Vec<i64> = (0..n)
            .map(|k| {
                let j = out.len() - n + k;
                let off = out.len() - xs.len();
                if j >= off { xs[j - off] } else { 1 }
            })
            .collect();
        let oc = ctx.constant(crate::ir::Tensor::from_i64s(
            vec![n as i64],
            &out[out.len() - n..],
        ));
        let xc = ctx.constant(crate::ir::Tensor::from_i64s(vec![n as i64], &aligned_x));
        let (v, o, xd) = (
            expr::load(DType::I64, 0, vec![expr::var(0)]),
            expr::load(DType::I64, 1, vec![expr::var(0)]),
            expr::load(DType::I64, 2, vec![expr::var(0)]),
        );
        let eq = |a: E, b: E| expr::binary(BinOp::Eq, a, b);
        let x_ok = expr::binary(
            BinOp::Or,
            eq(xd.clone(), expr::i(1)),
            eq(xd.clone(), o.clone()),
        );
        let ok = expr::binary(
            BinOp::Or,
            expr::and(eq(v.clone(), o.clone()), x_ok),
            expr::and(eq(v, expr::i(1)), eq(xd, o)),
        );
        ctx.assert_expr(
            vec![n as i64],
            vec![sv, oc, xc],
            ok,
            onnxc_runtime::abi::ONNXC_ERR_SHAPE,
        )?;
        out
    } else {
        ctx.const_ints(sv, "input 'shape'")?
    };
    let ts: Shape = target.iter().map(|&d| Dim::Known(d)).collect();
    let xs = ctx.shape(x);
    let out = broadcast_shapes(ctx, &[xs.clone(), ts])?;
    let dt = ctx.dtype(x);
    if out == xs {
        return Ok(vec![x]);
    }
    let body = bload(dt, 0, &xs, &out);
    Ok(vec![ctx.map(dt, out, vec![x], body)?])
}

pub fn tile(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let xs = ctx.known_shape(x)?;
    let reps = if ctx.opset < 6 {
        // Tile-1: (input, tiles, axis) with scalar inputs.
        let tiles = ctx.const_ints(ctx.input(1)?, "input 'tiles'")?;
        let axis = ctx.const_ints(ctx.input(2)?, "input 'axis'")?;
        let mut r = vec![1; xs.len()];
        let a = build::axis(ctx, *axis.first().unwrap_or(&0), xs.len())?;
        r[a] = *tiles.first().unwrap_or(&1);
        r
    } else if ctx.is_runtime(ctx.input(1)?) {
        let out = ctx.declared_shape(0, "input 'repeats'")?;
        if out.len() != xs.len()
            || xs
                .iter()
                .zip(&out)
                .any(|(&i, &o)| if i == 0 { o != 0 } else { o % i != 0 })
        {
            return Err(ctx.err(format!("declared output {out:?} is not a tiling of {xs:?}")));
        }
        let reps: Vec<i64> = xs
            .iter()
            .zip(&out)
            .map(|(&i, &o)| if i == 0 { 1 } else { o / i })
            .collect();
        let rv = build::flat_i64(ctx, ctx.input(1)?)?;
        if xs.iter().all(|&d| d != 0) {
            build::assert_equals(ctx, rv, &reps)?;
        }
        reps
    } else {
        ctx.const_ints(ctx.input(1)?, "input 'repeats'")?
    };
    if reps.len() != xs.len() || reps.iter().any(|&r| r < 0) {
        return Err(ctx.err(format!(
            "repeats {reps:?} must be {} non-negative values",
            xs.len()
        )));
    }
    let shape: Shape = xs
        .iter()
        .zip(&reps)
        .map(|(d, r)| Dim::Known(d * r))
        .collect();
    let index: Vec<E> = (0..xs.len())
        .map(|k| {
            if reps[k] == 1 {
                expr::var(k as u32)
            } else {
                expr::imod(expr::var(k as u32), xs[k].max(1))
            }
        })
        .collect();
    let dt = ctx.dtype(x);
    Ok(vec![ctx.map(
        dt,
        shape,
        vec![x],
        expr::load(dt, 0, index),
    )?])
}

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
        q.max(0) as i64
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

pub fn split(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let dims = ctx.known_shape(x)?;
    let r = dims.len();
    let axis = build::axis(ctx, ctx.attr_i_or("axis", 0)?, r)?;
    let n_out = ctx.node.output.len();
    let sizes: Vec<i64> = if ctx.opset >= 13 {
        match ctx.opt_input(1) {
            Some(s) if ctx.is_runtime(s) => {
                let mut sizes = Vec::new();
                for k in 0..n_out {
                    sizes.push(
                        *ctx.declared_shape(k, "input 'split'")?
                            .get(axis)
                            .ok_or_else(|| ctx.err("declared output rank is wrong"))?,
                    );
                }
                let sv = build::flat_i64(ctx, s)?;
                build::assert_equals(ctx, sv, &sizes)?;
                sizes
            }
            Some(s) => ctx.const_ints(s, "input 'split'")?,
            None => even_split(
                ctx,
                dims[axis],
                ctx.attr_i("num_outputs")?
                    .map(|v| v as usize)
                    .unwrap_or(n_out),
            )?,
        }
    } else if let Some(s) = ctx.attr_ints("split") {
        s
    } else if ctx.opset < 2 && ctx.opt_input(1).is_some() {
        ctx.const_ints(ctx.input(1)?, "input 'split'")?
    } else {
        even_split(ctx, dims[axis], n_out)?
    };
    if sizes.iter().sum::<i64>() != dims[axis] || sizes.iter().any(|&s| s < 0) {
        return Err(ctx.err(format!(
            "split sizes {sizes:?} do not add up to dim {} of size {}",
            axis, dims[axis]
        )));
    }
    let dt = ctx.dtype(x);
    let mut outs = Vec::new();
    let mut off = 0;
    for s in sizes {
        let mut shape: Shape = dims.iter().map(|&d| Dim::Known(d)).collect();
        shape[axis] = Dim::Known(s);
        let mut index = vars(r);
        index[axis] = expr::add(expr::var(axis as u32), expr::i(off));
        outs.push(ctx.map(dt, shape, vec![x], expr::load(dt, 0, index))?);
        off += s;
    }
    Ok(outs)
}

/// Sizes for splitting `len` into `n` parts: equal, the last one smaller (opset 18 rule).
fn even_split(ctx: &Ctx, len: i64, n: usize) -> Result<Vec<i64>> {
    if n == 0 {
        return Err(ctx.err("Split needs at least one output"));
    }
    let n = n as i64;
    let chunk = (len + n - 1) / n;
    let mut v = Vec::new();
    let mut left = len;
    for _ in 0..n {
        let c = chunk.min(left);
        v.push(c);
        left -= c;
    }
    Ok(v)
}

pub fn pad(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let dims = ctx.known_shape(x)?;
    let r = dims.len();
    let dt = ctx.dtype(x);
    let mode = ctx.attr_s_or("mode", "constant")?;
    let (pads, value, axes): (Vec<i64>, Scalar, Option<Vec<i64>>) = if ctx.opset < 11 {
        let pads = ctx
            .attr_ints(if ctx.opset < 2 { "paddings" } else { "pads" })
            .ok_or_else(|| ctx.err("attribute 'pads' is required"))?;
        (pads, Scalar::F(ctx.attr_f_or("value", 0.0)?), None)
    } else if [1, 2, 3]
        .iter()
        .any(|&i| ctx.opt_input(i).is_some_and(|v| ctx.is_runtime(v)))
    {
        return pad_runtime(ctx, x, &mode);
    } else {
        let pads = ctx.const_ints(ctx.input(1)?, "input 'pads'")?;
        let value = match ctx.opt_input(2) {
            Some(v) => match ctx.konst(v) {
                Some(t) if t.len() == 1 => t.get(0),
                Some(_) => return Err(ctx.err("constant_value must be a scalar")),
                None => {
                    return Err(
                        ctx.unsupported("constant_value computed at run time is not supported")
                    );
                }
            },
            None => Scalar::zero(dt),
        };
        let axes = match ctx.opt_input(3) {
            Some(a) => Some(ctx.const_ints(a, "input 'axes'")?),
            None => None,
        };
        (pads, value, axes)
    };
    let axes = match axes {
        Some(a) => build::axes(ctx, &a, r)?,
        None => (0..r).collect(),
    };
    let n = axes.len();
    if pads.len() != 2 * n {
        return Err(ctx.err(format!(
            "pads has {} values, expected {}",
            pads.len(),
            2 * n
        )));
    }
    let mut before = vec![0i64; r];
    let mut after = vec![0i64; r];
    for (j, &a) in axes.iter().enumerate() {
        before[a] = pads[j];
        after[a] = pads[n + j];
    }
    let mut shape = Vec::new();
    for k in 0..r {
        let d = dims[k] + before[k] + after[k];
        if d < 0 {
            return Err(ctx.err(format!("negative pads make dim {k} negative")));
        }
        shape.push(Dim::Known(d));
    }
    let mut inside = expr::konst(DType::Bool, Scalar::B(true));
    let mut index = Vec::new();
    for k in 0..r {
        let p = expr::sub(expr::var(k as u32), expr::i(before[k]));
        let n = dims[k];
        let ix = match mode.as_str() {
            "constant" => {
                if before[k] > 0 || after[k] > 0 {
                    inside = expr::and(
                        inside,
                        expr::and(
                            expr::ge(p.clone(), expr::i(0)),
                            expr::lt(p.clone(), expr::i(n)),
                        ),
                    );
                }
                expr::clamp(p, 0, (n - 1).max(0))
            }
            "edge" => expr::clamp(p, 0, (n - 1).max(0)),
            "reflect" => {
                if n == 1 {
                    expr::i(0)
                } else {
                    // Reflect about the edges without repeating them: period 2(n-1).
                    let period = 2 * (n - 1);
                    let m = expr::imod(p, period);
                    expr::select(
                        expr::lt(m.clone(), expr::i(n)),
                        m.clone(),
                        expr::sub(expr::i(period), m),
                    )
                }
            }
            "wrap" => expr::imod(p, n.max(1)),
            other => return Err(ctx.err(format!("unknown pad mode '{other}'"))),
        };
        index.push(ix);
    }
    if dims.contains(&0) && mode != "constant" {
        return Err(ctx.err(format!("mode '{mode}' cannot pad an empty tensor")));
    }
    let v = expr::load(dt, 0, index);
    let body = if dims.contains(&0) {
        expr::konst(dt, value)
    } else {
        expr::select(inside, v, expr::konst(dt, value))
    };
    let inputs = if dims.contains(&0) { vec![] } else { vec![x] };
    Ok(vec![ctx.map(dt, shape, inputs, body)?])
}

/// Pad with run-time pads/value/axes: the output shape is the declared one; per-dim padding
/// before the data is computed at run time and checked against it.
fn pad_runtime(ctx: &mut Ctx, x: ValueId, mode: &str) -> Result<Vec<ValueId>> {
    use onnxc_runtime::abi::{ONNXC_ERR_SHAPE, ONNXC_ERR_VALUE};
    let out = ctx.declared_shape(0, "the pads")?;
    let dims = ctx.known_shape(x)?;
    let r = dims.len() as i64;
    if out.len() != dims.len() {
        return Err(ctx.err("declared output rank differs from the input rank"));
    }
    if dims.contains(&0) || out.contains(&0) {
        return Err(ctx.unsupported("run-time pads of empty tensors"));
    }
    let pads = build::flat_i64(ctx, ctx.input(1)?)?;
    let np = ctx.known_shape(pads)?[0];
    let axes = match ctx.opt_input(3) {
        Some(a) => build::flat_i64(ctx, a)?,
        None => ctx.constant(crate::ir::Tensor::from_i64s(
            vec![r],
            &(0..r).collect::<Vec<_>>(),
        )),
    };
    let n = ctx.known_shape(axes)?[0];
    if np != 2 * n {
        return Err(ctx.err(format!("pads has {np} values for {n} axes")));
    }
    let aj = expr::load(DType::I64, 1, vec![expr::var(1)]);
    let norm = expr::select(
        expr::lt(aj.clone(), expr::i(0)),
        expr::add(aj.clone(), expr::i(r)),
        aj,
    );
    let hit = expr::binary(BinOp::Eq, norm, expr::var(0));
    let pick = |off: i64| {
        expr::select(
            hit.clone(),
            expr::load(DType::I64, 0, vec![expr::add(expr::var(1), expr::i(off))]),
            expr::i(0),
        )
    };
    let shape_r = vec![Dim::Known(r)];
    let before = ctx.reduce(
        ReduceKind::Sum,
        vec![n],
        DType::I64,
        shape_r.clone(),
        vec![pads, axes],
        pick(0),
    )?;
    let after = ctx.reduce(
        ReduceKind::Sum,
        vec![n],
        DType::I64,
        shape_r,
        vec![pads, axes],
        pick(n),
    )?;
    let a0 = expr::load(DType::I64, 0, vec![expr::var(0)]);
    ctx.assert_expr(
        vec![n],
        vec![axes],
        expr::and(expr::ge(a0.clone(), expr::i(-r)), expr::lt(a0, expr::i(r))),
        ONNXC_ERR_VALUE,
    )?;
    let dimc = ctx.constant(crate::ir::Tensor::from_i64s(vec![r], &dims));
    let outc = ctx.constant(crate::ir::Tensor::from_i64s(vec![r], &out));
    let l = |k: u32| expr::load(DType::I64, k, vec![expr::var(0)]);
    let sum = expr::add(expr::add(l(0), l(1)), l(2));
    ctx.assert_expr(
        vec![r],
        vec![before, after, dimc, outc],
        expr::binary(BinOp::Eq, sum, l(3)),
        ONNXC_ERR_SHAPE,
    )?;
    let dt = ctx.dtype(x);
    let mut inputs = vec![x, before];
    let value = match ctx.opt_input(2) {
        Some(v) if mode == "constant" => {
            inputs.push(v);
            expr::cast(
                expr::load(ctx.dtype(v), 2, vec![expr::i(0); ctx.rank(v)]),
                dt,
            )
        }
        _ => expr::konst(dt, Scalar::zero(dt)),
    };
    let mut inside = expr::konst(DType::Bool, Scalar::B(true));
    let mut index = Vec::new();
    for (k, &d) in dims.iter().enumerate() {
        let p = expr::sub(
            expr::var(k as u32),
            expr::load(DType::I64, 1, vec![expr::i(k as i64)]),
        );
        let ix = match mode {
            "constant" => {
                inside = expr::and(
                    inside,
                    expr::and(
                        expr::ge(p.clone(), expr::i(0)),
                        expr::lt(p.clone(), expr::i(d)),
                    ),
                );
                expr::clamp(p, 0, d - 1)
            }
            "edge" => expr::clamp(p, 0, d - 1),
            "reflect" if d == 1 => expr::i(0),
            "reflect" => {
                let period = 2 * (d - 1);
                let m = expr::imod(p, period);
                expr::clamp(
                    expr::select(
                        expr::lt(m.clone(), expr::i(d)),
                        m.clone(),
                        expr::sub(expr::i(period), m),
                    ),
                    0,
                    d - 1,
                )
            }
            "wrap" => expr::imod(p, d),
            other => return Err(ctx.err(format!("unknown pad mode '{other}'"))),
        };
        index.push(ix);
    }
    let body = expr::select(inside, expr::load(dt, 0, index), value);
    let shape: Shape = out.iter().map(|&v| Dim::Known(v)).collect();
    Ok(vec![ctx.map(dt, shape, inputs, body)?])
}

pub fn depth_to_space(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let d = ctx.known_shape(x)?;
    let b = ctx
        .attr_i("blocksize")?
        .ok_or_else(|| ctx.err("attribute 'blocksize' is required"))?;
    if d.len() != 4 || b < 1 || d[1] % (b * b) != 0 {
        return Err(ctx.err(format!(
            "input {d:?} cannot be rearranged with blocksize {b}"
        )));
    }
    let crd = ctx.attr_s_or("mode", "DCR")? == "CRD";
    let (n, c, h, w) = (d[0], d[1], d[2], d[3]);
    let c2 = c / (b * b);
    // out[n, c', h*b + i, w*b + j] = in[n, channel, h, w]
    let (oc, oh, ow) = (expr::var(1), expr::var(2), expr::var(3));
    let (i, j) = (expr::imod(oh.clone(), b), expr::imod(ow.clone(), b));
    let ch = if crd {
        expr::add(
            expr::mul(oc, expr::i(b * b)),
            expr::add(expr::mul(i, expr::i(b)), j),
        )
    } else {
        expr::add(
            expr::mul(expr::add(expr::mul(i, expr::i(b)), j), expr::i(c2)),
            oc,
        )
    };
    let index = vec![expr::var(0), ch, expr::idiv(oh, b), expr::idiv(ow, b)];
    let dt = ctx.dtype(x);
    let shape: Shape = [n, c2, h * b, w * b]
        .iter()
        .map(|&v| Dim::Known(v))
        .collect();
    Ok(vec![ctx.map(
        dt,
        shape,
        vec![x],
        expr::load(dt, 0, index),
    )?])
}

pub fn space_to_depth(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let d = ctx.known_shape(x)?;
    let b = ctx
        .attr_i("blocksize")?
        .ok_or_else(|| ctx.err("attribute 'blocksize' is required"))?;
    if d.len() != 4 || b < 1 || d[2] % b != 0 || d[3] % b != 0 {
        return Err(ctx.err(format!(
            "input {d:?} cannot be rearranged with blocksize {b}"
        )));
    }
    let (n, c, h, w) = (d[0], d[1], d[2], d[3]);
    // DCR: out[n, (i*b + j)*c + ch, y, x] = in[n, ch, y*b + i, x*b + j]; CRD (opset 28):
    // out[n, ch*b*b + i*b + j, …].
    let crd = ctx.attr_s_or("mode", "DCR")? == "CRD";
    let oc = expr::var(1);
    let (ch, blk) = if crd {
        (expr::idiv(oc.clone(), b * b), expr::imod(oc, b * b))
    } else {
        (expr::imod(oc.clone(), c), expr::idiv(oc, c))
    };
    let (i, j) = (expr::idiv(blk.clone(), b), expr::imod(blk, b));
    let index = vec![
        expr::var(0),
        ch,
        expr::add(expr::mul(expr::var(2), expr::i(b)), i),
        expr::add(expr::mul(expr::var(3), expr::i(b)), j),
    ];
    let dt = ctx.dtype(x);
    let shape: Shape = [n, c * b * b, h / b, w / b]
        .iter()
        .map(|&v| Dim::Known(v))
        .collect();
    Ok(vec![ctx.map(
        dt,
        shape,
        vec![x],
        expr::load(dt, 0, index),
    )?])
}

pub fn eye_like(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let shape = ctx.shape(x);
    if shape.len() != 2 {
        return Err(ctx.err("input must be 2-D"));
    }
    let dt = match ctx.attr_i("dtype")? {
        Some(code) => DType::from_onnx(code as i32)
            .ok_or_else(|| ctx.unsupported(format!("dtype {code} is not supported")))?,
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

fn cumulative(ctx: &mut Ctx, kind: ReduceKind) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let dims = ctx.known_shape(x)?;
    let r = dims.len();
    if ctx.is_runtime(ctx.input(1)?) {
        return cumulative_runtime_axis(ctx, kind, x, &dims);
    }
    let axis = ctx.const_ints(ctx.input(1)?, "input 'axis'")?;
    let axis = build::axis(
        ctx,
        *axis
            .first()
            .ok_or_else(|| ctx.err("axis must hold one value"))?,
        r,
    )?;
    let exclusive = ctx.attr_i_or("exclusive", 0)? != 0;
    let reverse = ctx.attr_i_or("reverse", 0)? != 0;
    let dt = ctx.dtype(x);
    let n = dims[axis];
    // out[i] = fold over j of x[.., j, ..] where j ≤ i (or j ≥ i reversed; strict if exclusive).
    let (i, j) = (expr::var(axis as u32), expr::var(r as u32));
    let take = match (reverse, exclusive) {
        (false, false) => expr::binary(BinOp::Le, j.clone(), i),
        (false, true) => expr::lt(j.clone(), i),
        (true, false) => expr::ge(j.clone(), i),
        (true, true) => expr::binary(BinOp::Gt, j.clone(), i),
    };
    let mut index = vars(r);
    index[axis] = j;
    let neutral = crate::ir::interp::reduce_init(kind, dt);
    let body = expr::select(take, expr::load(dt, 0, index), expr::konst(dt, neutral));
    let shape = ctx.shape(x);
    Ok(vec![ctx.reduce(kind, vec![n], dt, shape, vec![x], body)?])
}

/// CumSum/CumProd along an axis given at run time: one reduction whose index expressions
/// select the axis (clamped in bounds), with the axis checked to be in range.
fn cumulative_runtime_axis(
    ctx: &mut Ctx,
    kind: ReduceKind,
    x: ValueId,
    dims: &[i64],
) -> Result<Vec<ValueId>> {
    let r = dims.len();
    let exclusive = ctx.attr_i_or("exclusive", 0)? != 0;
    let reverse = ctx.attr_i_or("reverse", 0)? != 0;
    let av = build::flat_i64(ctx, ctx.input(1)?)?;
    let ri = r as i64;
    let a_raw = expr::load(DType::I64, 1, vec![expr::i(0)]);
    ctx.assert_expr(
        vec![],
        vec![x, av],
        expr::and(
            expr::ge(a_raw.clone(), expr::i(-ri)),
            expr::lt(a_raw.clone(), expr::i(ri)),
        ),
        onnxc_runtime::abi::ONNXC_ERR_VALUE,
    )?;
    let a = expr::select(
        expr::lt(a_raw.clone(), expr::i(0)),
        expr::add(a_raw.clone(), expr::i(ri)),
        a_raw,
    );
    let t = expr::var(r as u32);
    let is = |k: usize| expr::binary(BinOp::Eq, a.clone(), expr::i(k as i64));
    let mut ia = expr::i(0);
    let mut da = expr::i(0);
    let mut index = Vec::new();
    for (k, &d) in dims.iter().enumerate() {
        ia = expr::add(ia, expr::select(is(k), expr::var(k as u32), expr::i(0)));
        da = expr::add(da, expr::select(is(k), expr::i(d), expr::i(0)));
        index.push(expr::select(
            is(k),
            expr::clamp(t.clone(), 0, (d - 1).max(0)),
            expr::var(k as u32),
        ));
    }
    let before = match (reverse, exclusive) {
        (false, false) => expr::binary(BinOp::Le, t.clone(), ia),
        (false, true) => expr::lt(t.clone(), ia),
        (true, false) => expr::ge(t.clone(), ia),
        (true, true) => expr::binary(BinOp::Gt, t.clone(), ia),
    };
    let take = expr::and(before, expr::lt(t, da));
    let dt = ctx.dtype(x);
    let neutral = crate::ir::interp::reduce_init(kind, dt);
    let body = expr::select(take, expr::load(dt, 0, index), expr::konst(dt, neutral));
    let max_d = dims.iter().copied().max().unwrap_or(1).max(1);
    let shape = ctx.shape(x);
    Ok(vec![ctx.reduce(
        kind,
        vec![max_d],
        dt,
        shape,
        vec![x, av],
        body,
    )?])
}

pub fn cum_sum(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    cumulative(ctx, ReduceKind::Sum)
}
pub fn cum_prod(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    cumulative(ctx, ReduceKind::Prod)
}

pub fn reverse_sequence(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (x, lens) = (ctx.input(0)?, ctx.input(1)?);
    let dims = ctx.known_shape(x)?;
    let batch_axis = ctx.attr_i_or("batch_axis", 1)? as usize;
    let time_axis = ctx.attr_i_or("time_axis", 0)? as usize;
    if dims.len() < 2 || batch_axis > 1 || time_axis > 1 || batch_axis == time_axis {
        return Err(ctx.err("batch_axis and time_axis must be 0 and 1 in some order"));
    }
    let r = dims.len();
    let t = expr::var(time_axis as u32);
    let len = expr::load(DType::I64, 1, vec![expr::var(batch_axis as u32)]);
    let len = expr::clamp(len, 0, dims[time_axis]);
    // Within the sequence length the time index is reversed; beyond it, copied.
    let rev = expr::sub(expr::sub(len.clone(), expr::i(1)), t.clone());
    let src = expr::select(expr::lt(t.clone(), len), rev, t);
    let mut index = vars(r);
    index[time_axis] = expr::clamp(src, 0, dims[time_axis] - 1);
    let dt = ctx.dtype(x);
    let shape = ctx.shape(x);
    let lens = build::cast(ctx, lens, DType::I64)?;
    Ok(vec![ctx.map(
        dt,
        shape,
        vec![x, lens],
        expr::load(dt, 0, index),
    )?])
}

fn scatter_reduction(ctx: &Ctx) -> Result<Option<ReduceKind>> {
    match ctx.attr_s_or("reduction", "none")?.as_str() {
        "none" => Ok(None),
        "add" => Ok(Some(ReduceKind::Sum)),
        "mul" => Ok(Some(ReduceKind::Prod)),
        "max" => Ok(Some(ReduceKind::Max)),
        "min" => Ok(Some(ReduceKind::Min)),
        other => Err(ctx.err(format!("unknown reduction '{other}'"))),
    }
}

pub fn scatter_nd(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (data, indices, updates) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    build::expect_types(ctx, indices, "indices", &[DType::I64])?;
    let ds = ctx.known_shape(data)?;
    let is = ctx.known_shape(indices)?;
    let us = ctx.known_shape(updates)?;
    let q = is.len();
    let k = *is
        .last()
        .ok_or_else(|| ctx.err("indices must have rank >= 1"))? as usize;
    let mut expect: Vec<i64> = is[..q - 1].to_vec();
    if k > ds.len() {
        return Err(ctx.err(format!(
            "indices.shape[-1] = {k} exceeds the data rank {}",
            ds.len()
        )));
    }
    expect.extend_from_slice(&ds[k..]);
    if us != expect {
        return Err(ctx.err(format!("updates have shape {us:?}, expected {expect:?}")));
    }
    let kind = scatter_reduction(ctx)?;
    let mut index = Vec::new();
    for p in 0..k {
        let mut ii: Vec<E> = (0..q as u32 - 1).map(expr::var).collect();
        ii.push(expr::i(p as i64));
        index.push(expr::check_index(expr::load(DType::I64, 1, ii), ds[p]));
    }
    for p in k..ds.len() {
        index.push(expr::var((q - 1 + p - k) as u32));
    }
    let dt = ctx.dtype(data);
    let value = expr::load(dt, 2, (0..us.len() as u32).map(expr::var).collect());
    let shape = ctx.shape(data);
    let sc = crate::ir::graph::ScatterOp {
        kind,
        extents: us,
        index,
        value,
    };
    Ok(vec![ctx.add(
        crate::ir::Op::Scatter(sc),
        vec![data, indices, updates],
        crate::ir::TypeInfo::new(dt, shape),
    )?])
}

pub fn scatter_elements(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (data, indices, updates) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    index_types(ctx, indices, "indices")?;
    let ds = ctx.known_shape(data)?;
    let is = ctx.known_shape(indices)?;
    if is != ctx.known_shape(updates)? || is.len() != ds.len() {
        return Err(ctx.err("indices and updates must have the same shape and the data's rank"));
    }
    let axis = build::axis(ctx, ctx.attr_i_or("axis", 0)?, ds.len())?;
    let kind = if ctx.origin.op_type == "Scatter" {
        None
    } else {
        scatter_reduction(ctx)?
    };
    let it = ctx.dtype(indices);
    let mut index = vars(ds.len());
    index[axis] = expr::check_index(
        expr::cast(expr::load(it, 1, vars(ds.len())), DType::I64),
        ds[axis],
    );
    let dt = ctx.dtype(data);
    let value = expr::load(dt, 2, vars(ds.len()));
    let shape = ctx.shape(data);
    let sc = crate::ir::graph::ScatterOp {
        kind,
        extents: is,
        index,
        value,
    };
    Ok(vec![ctx.add(
        crate::ir::Op::Scatter(sc),
        vec![data, indices, updates],
        crate::ir::TypeInfo::new(dt, shape),
    )?])
}

/// CenterCropPad (opset 18): each listed axis cropped or zero-padded to its target size,
/// centered (the odd element goes to the end, as the reference evaluator does). The target
/// sizes are a constant, or a run-time input that must match the declared output shape
/// (checked when the model runs, `ONNXC_ERR_SHAPE`).
pub fn center_crop_pad(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let shape_v = ctx.input(1)?;
    let xs = ctx.known_shape(x)?;
    let r = xs.len();
    let axes = match ctx.attr_ints("axes") {
        Some(a) => build::axes(ctx, &a, r)?,
        None => (0..r).collect(),
    };
    let targets: Vec<i64> = if ctx.is_runtime(shape_v) {
        let declared = ctx.declared_shape(0, "input shape")?;
        if declared.len() != r {
            return Err(ctx.err(format!(
                "output 0 is declared {declared:?}, which does not have the input's rank {r}"
            )));
        }
        let t: Vec<i64> = axes.iter().map(|&a| declared[a]).collect();
        let flat = build::flat_i64(ctx, shape_v)?;
        if ctx.known_shape(flat)? != [t.len() as i64] {
            return Err(ctx.err(format!(
                "input shape must hold {} values (one per axis)",
                t.len()
            )));
        }
        build::assert_equals(ctx, flat, &t)?;
        t
    } else {
        ctx.const_ints(shape_v, "input shape")?
    };
    if targets.len() != axes.len() || targets.iter().any(|&t| t < 0) {
        return Err(ctx.err(format!(
            "input shape is {targets:?}; it needs one non-negative size per axis ({} axes)",
            axes.len()
        )));
    }
    let dt = ctx.dtype(x);
    let mut out = xs.clone();
    // Per dim: output index o reads input o + shift, inside [0, xs) (outside: padding).
    let mut shift = vec![0i64; r];
    for (&a, &t) in axes.iter().zip(&targets) {
        out[a] = t;
        shift[a] = if t <= xs[a] {
            (xs[a] - t) / 2
        } else {
            -((t - xs[a]) / 2)
        };
    }
    let mut inside: Option<E> = None;
    let index: Vec<E> = (0..r)
        .map(|d| {
            let i = expr::add(expr::var(d as u32), expr::i(shift[d]));
            if shift[d] < 0 || out[d] + shift[d] > xs[d] {
                let ok = expr::and(
                    expr::ge(i.clone(), expr::i(0)),
                    expr::lt(i.clone(), expr::i(xs[d])),
                );
                inside = Some(match inside.take() {
                    None => ok,
                    Some(acc) => expr::and(acc, ok),
                });
                expr::clamp(i, 0, xs[d] - 1)
            } else {
                i
            }
        })
        .collect();
    let load = expr::load(dt, 0, index);
    let body = match inside {
        Some(ok) if xs.iter().all(|&d| d > 0) => {
            expr::select(ok, load, expr::konst(dt, Scalar::zero(dt)))
        }
        Some(_) => expr::konst(dt, Scalar::zero(dt)),
        None => load,
    };
    let shape = crate::ir::dim::shape_from(&out);
    Ok(vec![ctx.map(dt, shape, vec![x], body)?])
}

/// MaxUnpool (opsets 9, 11, 22): zeros of the unpooled shape `(in − 1)·stride + kernel −
/// pads` per spatial dim, each input element written at the flat position its index
/// (MaxPool's Indices output) gives — a scatter whose positions are checked
/// (`ONNXC_ERR_INDEX` outside it); the last write wins on duplicates. A larger
/// `output_shape` holds that result in its leading corner, zeros elsewhere (as the
/// reference evaluator does).
pub fn max_unpool(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (x, idx) = (ctx.input(0)?, ctx.input(1)?);
    index_types(ctx, idx, "I")?;
    let xs = ctx.known_shape(x)?;
    if ctx.known_shape(idx)? != xs {
        return Err(ctx.err("I must have X's shape"));
    }
    if xs.len() < 3 {
        return Err(ctx.err(format!("X has shape {xs:?}; it needs (N, C, D1, …)")));
    }
    let sp = xs.len() - 2;
    let kernel = ctx
        .attr_ints("kernel_shape")
        .filter(|k| k.len() == sp)
        .ok_or_else(|| ctx.err(format!("attribute 'kernel_shape' must hold {sp} values")))?;
    let strides = ctx.attr_ints("strides").unwrap_or_else(|| vec![1; sp]);
    let pads = ctx.attr_ints("pads").unwrap_or_else(|| vec![0; 2 * sp]);
    if strides.len() != sp || pads.len() != 2 * sp {
        return Err(ctx.err("attributes 'strides' and 'pads' must match the spatial rank"));
    }
    let mut inferred: Vec<i64> = xs[..2].to_vec();
    for d in 0..sp {
        inferred.push((xs[2 + d] - 1) * strides[d] + kernel[d] - pads[d] - pads[sp + d]);
    }
    let mut out = inferred.clone();
    if let Some(os) = ctx.opt_input(2) {
        let given = if ctx.is_runtime(os) {
            let declared = ctx.declared_shape(0, "input output_shape")?;
            let flat = build::flat_i64(ctx, os)?;
            build::assert_equals(ctx, flat, &declared)?;
            declared
        } else {
            ctx.const_ints(os, "input output_shape")?
        };
        if given.len() != xs.len()
            || given[..2] != xs[..2]
            || given.iter().zip(&inferred).any(|(g, i)| g < i)
        {
            return Err(ctx.err(format!(
                "output_shape is {given:?}; it must keep X's N and C and hold the unpooled \
                 shape {inferred:?}"
            )));
        }
        out = given;
    }
    if inferred.iter().any(|&d| d < 0) {
        return Err(ctx.err(format!(
            "the unpooled shape {inferred:?} has a negative dim"
        )));
    }
    let dt = ctx.dtype(x);
    let total: i64 = inferred.iter().product();
    let shape: Vec<Dim> = crate::ir::dim::shape_from(&inferred);
    if total == 0 || xs.iter().product::<i64>() == 0 {
        // Nothing to write: zeros of the output shape.
        let oshape: Vec<Dim> = crate::ir::dim::shape_from(&out);
        return Ok(vec![ctx.map(
            dt,
            oshape,
            vec![],
            expr::konst(dt, Scalar::zero(dt)),
        )?]);
    }
    let zeros = ctx.map(dt, shape.clone(), vec![], expr::konst(dt, Scalar::zero(dt)))?;
    // The flat position, checked against the output, split into its per-dim index.
    let it = ctx.dtype(idx);
    let flat = expr::check_index(
        expr::cast(expr::load(it, 1, vars(xs.len())), DType::I64),
        total,
    );
    let flat = expr::select(
        expr::lt(flat.clone(), expr::i(0)),
        expr::add(flat.clone(), expr::i(total)),
        flat,
    );
    let mut index = Vec::with_capacity(inferred.len());
    let mut stride = total;
    for &d in &inferred {
        stride /= d.max(1);
        index.push(expr::imod(
            expr::idiv(flat.clone(), stride.max(1)),
            d.max(1),
        ));
    }
    let sc = crate::ir::graph::ScatterOp {
        kind: None,
        extents: xs.clone(),
        index,
        value: expr::load(dt, 2, vars(xs.len())),
    };
    let y = ctx.add(
        crate::ir::Op::Scatter(sc),
        vec![zeros, idx, x],
        crate::ir::TypeInfo::new(dt, shape),
    )?;
    if out == inferred {
        return Ok(vec![y]);
    }
    // The unpooled result in the leading corner of the larger output.
    let inside = (0..out.len())
        .map(|d| expr::lt(expr::var(d as u32), expr::i(inferred[d])))
        .reduce(expr::and)
        .expect("rank ≥ 3");
    let at: Vec<E> = (0..out.len())
        .map(|d| expr::clamp(expr::var(d as u32), 0, inferred[d] - 1))
        .collect();
    let body = expr::select(
        inside,
        expr::load(dt, 0, at),
        expr::konst(dt, Scalar::zero(dt)),
    );
    let oshape: Vec<Dim> = crate::ir::dim::shape_from(&out);
    Ok(vec![ctx.map(dt, oshape, vec![y], body)?])
}
