//! Shape manipulation and constants: Reshape, Flatten, Concat, Transpose, Squeeze, Unsqueeze,
//! Shape, Size, Constant, ConstantOfShape.

use crate::error::Result;
use crate::frontend::build;
use crate::frontend::ctx::Ctx;
use crate::ir::dim::{Dim, Shape, fmt_shape, num_elements};
use crate::ir::expr;
use crate::ir::{DType, Op, Scalar, Tensor, TypeInfo, ValueId};

pub fn reshape(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let target: Vec<i64> = if ctx.opset < 5 {
        ctx.attr_ints("shape")
            .ok_or_else(|| ctx.err("attribute 'shape' is required"))?
    } else {
        let s = ctx.input(1)?;
        if ctx.is_runtime(s) {
            return reshape_runtime(ctx, x, s);
        }
        ctx.const_ints(s, "input 'shape'")?
    };
    let allowzero = ctx.opset >= 14 && ctx.attr_i_or("allowzero", 0)? != 0;
    let in_shape = ctx.shape(x);
    let mut out: Vec<Option<Dim>> = Vec::with_capacity(target.len());
    let mut infer = None;
    for (k, &d) in target.iter().enumerate() {
        match d {
            -1 => {
                if infer.replace(k).is_some() {
                    return Err(ctx.err(format!("shape {target:?} has more than one -1")));
                }
                out.push(None);
            }
            0 if !allowzero => {
                let d = in_shape.get(k).ok_or_else(|| ctx.err(format!("shape {target:?}: 0 at position {k} copies a dim the input (rank {}) lacks", in_shape.len())))?;
                out.push(Some(d.clone()));
            }
            d if d < 0 => return Err(ctx.err(format!("shape {target:?} has invalid value {d}"))),
            d => out.push(Some(Dim::Known(d))),
        }
    }
    let total = num_elements(&in_shape);
    if let Some(k) = infer {
        let known = out
            .iter()
            .flatten()
            .cloned()
            .fold(Dim::Known(1), |a, b| a.mul(b));
        let d = match (&total, &known) {
            (Dim::Known(t), Dim::Known(n)) => {
                if *n == 0 || t % n != 0 {
                    return Err(ctx.err(format!(
                        "cannot reshape {} into {target:?}",
                        fmt_shape(&in_shape)
                    )));
                }
                Dim::Known(t / n)
            }
            _ => total.clone().floor_div(known),
        };
        out[k] = Some(d);
    }
    let out: Shape = out
        .into_iter()
        .map(|d| d.unwrap_or(Dim::Known(0)))
        .collect();
    if let (Dim::Known(a), Dim::Known(b)) = (&total, &num_elements(&out))
        && a != b
    {
        return Err(ctx.err(format!(
            "cannot reshape {} ({a} elements) into {} ({b} elements)",
            fmt_shape(&in_shape),
            fmt_shape(&out)
        )));
    }
    Ok(vec![ctx.reshape(x, out)?])
}

/// Reshape to a run-time shape: the output shape is the declared one; each shape entry must
/// produce it (equal, 0 copying an equal input dim, or the single -1).
fn reshape_runtime(ctx: &mut Ctx, x: ValueId, s: ValueId) -> Result<Vec<ValueId>> {
    let out = ctx.declared_shape(0, "input 'shape'")?;
    let in_dims = ctx.known_shape(x)?;
    if out.iter().product::<i64>() != in_dims.iter().product::<i64>() {
        return Err(ctx.err(format!(
            "declared output {out:?} does not hold the {:?} input's elements",
            in_dims
        )));
    }
    let allowzero = ctx.attr_i_or("allowzero", 0)? != 0;
    let sv = build::flat_i64(ctx, s)?;
    if ctx.known_shape(sv)? != [out.len() as i64] {
        return Err(ctx.err("the shape input's length differs from the declared output rank"));
    }
    let n = out.len() as i64;
    let padded: Vec<i64> = (0..out.len())
        .map(|k| in_dims.get(k).copied().unwrap_or(-2))
        .collect();
    let oc = ctx.constant(Tensor::from_i64s(vec![n], &out));
    let ic = ctx.constant(Tensor::from_i64s(vec![n], &padded));
    let v = expr::load(DType::I64, 0, vec![expr::var(0)]);
    let o = expr::load(DType::I64, 1, vec![expr::var(0)]);
    let i = expr::load(DType::I64, 2, vec![expr::var(0)]);
    let eq = |a: expr::E, b: expr::E| expr::binary(expr::BinOp::Eq, a, b);
    let mut ok = expr::binary(
        expr::BinOp::Or,
        eq(v.clone(), o.clone()),
        eq(v.clone(), expr::i(-1)),
    );
    if !allowzero {
        ok = expr::binary(expr::BinOp::Or, ok, expr::and(eq(v, expr::i(0)), eq(i, o)));
    }
    ctx.assert_expr(
        vec![n],
        vec![sv, oc, ic],
        ok,
        onnxc_runtime::abi::ONNXC_ERR_SHAPE,
    )?;
    // At most one -1 (onnxruntime and the spec refuse two, whatever the declared shape):
    // no pair j < k holds -1 twice.
    if n >= 2 {
        let at = |k: u32| expr::load(DType::I64, 0, vec![expr::var(k)]);
        let both = expr::and(eq(at(0), expr::i(-1)), eq(at(1), expr::i(-1)));
        let one = expr::binary(
            expr::BinOp::Or,
            expr::binary(expr::BinOp::Ge, expr::var(0), expr::var(1)),
            expr::unary(expr::UnOp::Not, both),
        );
        ctx.assert_expr(
            vec![n, n],
            vec![sv],
            one,
            onnxc_runtime::abi::ONNXC_ERR_SHAPE,
        )?;
    }
    let shape: Shape = out.iter().map(|&d| Dim::Known(d)).collect();
    Ok(vec![ctx.reshape(x, shape)?])
}

pub fn flatten(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let shape = ctx.shape(x);
    let r = shape.len() as i64;
    let a = ctx.attr_i_or("axis", 1)?;
    let a = if a < 0 { a + r } else { a };
    if a < 0 || a > r {
        return Err(ctx.err(format!("axis {a} is out of range for rank {r}")));
    }
    let a = a as usize;
    let out = vec![num_elements(&shape[..a]), num_elements(&shape[a..])];
    Ok(vec![ctx.reshape(x, out)?])
}

pub fn concat(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let inputs: Vec<ValueId> = (0..ctx.num_inputs())
        .filter_map(|i| ctx.opt_input(i))
        .collect();
    let Some(&first) = inputs.first() else {
        return Err(ctx.err("needs at least one input"));
    };
    let rank = ctx.rank(first);
    let dt = ctx.dtype(first);
    let axis = match ctx.attr_i("axis")? {
        Some(a) => build::axis(ctx, a, rank)?,
        None if ctx.opset < 4 => 1.min(rank.saturating_sub(1)),
        None => return Err(ctx.err("attribute 'axis' is required")),
    };
    let mut shape = ctx.shape(first);
    shape[axis] = Dim::Known(0);
    for &v in &inputs {
        let s = ctx.shape(v);
        if s.len() != rank || ctx.dtype(v) != dt {
            return Err(ctx.err(format!(
                "inputs must all have type {dt} and rank {rank}, got {} {}",
                ctx.dtype(v),
                fmt_shape(&s)
            )));
        }
        for k in 0..rank {
            if k != axis && s[k] != shape[k] {
                return Err(ctx.err(format!(
                    "input shapes {} and {} differ outside axis {axis}",
                    fmt_shape(&ctx.shape(first)),
                    fmt_shape(&s)
                )));
            }
        }
        shape[axis] = shape[axis].clone().add(s[axis].clone());
    }
    Ok(vec![concat_parts(ctx, inputs, axis, dt, shape)?])
}

/// `parts` (of type `dt`, checked to fit `shape`) concatenated along `axis`: empty parts
/// contribute nothing, one part is the result itself, none is an empty tensor.
pub fn concat_parts(
    ctx: &mut Ctx,
    parts: Vec<ValueId>,
    axis: usize,
    dt: DType,
    shape: Shape,
) -> Result<ValueId> {
    let parts: Vec<ValueId> = parts
        .into_iter()
        .filter(|&v| ctx.shape(v)[axis] != Dim::Known(0))
        .collect();
    // Parts that are all transposes by one perm: their operands concatenated along the
    // axis that perm moves to `axis`, transposed once (so a channels-last concat between
    // NCHW producers and consumers costs no transpose at all).
    let sources: Option<Vec<(ValueId, Vec<usize>)>> =
        parts.iter().map(|&v| build::transpose_of(ctx, v)).collect();
    if let Some(sources) = sources
        && parts.len() > 1
        && sources.iter().all(|(_, p)| *p == sources[0].1)
    {
        let perm = sources[0].1.clone();
        let mut inner = shape.clone();
        for (k, &p) in perm.iter().enumerate() {
            inner[p] = shape[k].clone();
        }
        let srcs = sources.into_iter().map(|(v, _)| v).collect();
        let c = ctx.add(
            Op::Concat { axis: perm[axis] },
            srcs,
            TypeInfo::new(dt, inner),
        )?;
        return build::transpose(ctx, c, &perm);
    }
    match parts.len() {
        0 => ctx.map(dt, shape, vec![], expr::konst(dt, Scalar::zero(dt))),
        1 => Ok(parts[0]),
        _ => ctx.add(Op::Concat { axis }, parts, TypeInfo::new(dt, shape)),
    }
}

pub fn transpose(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let rank = ctx.rank(x);
    let perm: Vec<usize> = match ctx.attr_ints("perm") {
        None => (0..rank).rev().collect(),
        Some(p) => {
            let mut seen = vec![false; rank];
            let mut out = Vec::new();
            if p.len() != rank {
                return Err(ctx.err(format!(
                    "perm {p:?} has {} entries for rank {rank}",
                    p.len()
                )));
            }
            for &a in &p {
                let a = build::axis(ctx, a, rank)?;
                if seen[a] {
                    return Err(ctx.err(format!("perm {p:?} is not a permutation")));
                }
                seen[a] = true;
                out.push(a);
            }
            out
        }
    };
    Ok(vec![build::transpose(ctx, x, &perm)?])
}

fn axes_arg(ctx: &Ctx, input_from: i64) -> Result<Option<Vec<i64>>> {
    if ctx.opset >= input_from {
        match ctx.opt_input(1) {
            Some(v) if ctx.is_runtime(v) => Err(ctx.unsupported("run-time axes")),
            Some(v) => Ok(Some(ctx.const_ints(v, "input 'axes'")?)),
            None => Ok(None),
        }
    } else {
        Ok(ctx.attr_ints("axes"))
    }
}

/// Squeeze/Unsqueeze with run-time axes: the data is unchanged, so the result is a view with
/// the declared shape; the axes are checked to be in range and to name size-1 dims.
fn squeeze_runtime(ctx: &mut Ctx, x: ValueId, unsqueeze: bool) -> Result<Vec<ValueId>> {
    let out = ctx.declared_shape(0, "input 'axes'")?;
    let ins = ctx.known_shape(x)?;
    if out.iter().product::<i64>() != ins.iter().product::<i64>() {
        return Err(ctx.err(format!(
            "declared output {out:?} does not hold the {ins:?} input's elements"
        )));
    }
    let ax = build::flat_i64(ctx, ctx.input(1)?)?;
    let n = ctx.known_shape(ax)?[0];
    let ones_in = if unsqueeze { &out } else { &ins };
    let r = ones_in.len() as i64;
    let dims = ctx.constant(Tensor::from_i64s(
        vec![r.max(1)],
        if ones_in.is_empty() { &[1] } else { ones_in },
    ));
    let a = expr::load(DType::I64, 0, vec![expr::var(0)]);
    let norm = expr::select(
        expr::lt(a.clone(), expr::i(0)),
        expr::add(a.clone(), expr::i(r)),
        a.clone(),
    );
    let in_range = expr::and(expr::ge(a.clone(), expr::i(-r)), expr::lt(a, expr::i(r)));
    let one = expr::binary(
        expr::BinOp::Eq,
        expr::load(DType::I64, 1, vec![expr::clamp(norm, 0, (r - 1).max(0))]),
        expr::i(1),
    );
    ctx.assert_expr(
        vec![n],
        vec![ax, dims],
        expr::and(in_range, one),
        onnxc_runtime::abi::ONNXC_ERR_SHAPE,
    )?;
    let shape: Shape = out.iter().map(|&d| Dim::Known(d)).collect();
    Ok(vec![ctx.reshape(x, shape)?])
}

pub fn squeeze(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    if ctx.opset >= 13 && ctx.opt_input(1).is_some_and(|a| ctx.is_runtime(a)) {
        return squeeze_runtime(ctx, x, false);
    }
    let shape = ctx.shape(x);
    let axes = match axes_arg(ctx, 13)? {
        Some(a) => build::axes(ctx, &a, shape.len())?,
        None => {
            if shape.iter().any(|d| !d.is_known()) {
                return Err(crate::error::Error::NeedShape(format!(
                    "{}: Squeeze without axes needs every dim known; fix the symbolic dims with --shape",
                    ctx.origin
                )));
            }
            (0..shape.len()).filter(|&k| shape[k].is_one()).collect()
        }
    };
    for &a in &axes {
        if !shape[a].is_one() {
            return Err(ctx.err(format!(
                "cannot squeeze axis {a} of size {} in {}",
                shape[a],
                fmt_shape(&shape)
            )));
        }
    }
    let out: Shape = shape
        .iter()
        .enumerate()
        .filter(|(k, _)| !axes.contains(k))
        .map(|(_, d)| d.clone())
        .collect();
    Ok(vec![ctx.reshape(x, out)?])
}

pub fn unsqueeze(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    if ctx.opset >= 13 && ctx.opt_input(1).is_some_and(|a| ctx.is_runtime(a)) {
        return squeeze_runtime(ctx, x, true);
    }
    let shape = ctx.shape(x);
    let a = axes_arg(ctx, 13)?.ok_or_else(|| ctx.err("axes are required"))?;
    let out_rank = shape.len() + a.len();
    let axes = build::axes(ctx, &a, out_rank)?;
    let mut out = Vec::with_capacity(out_rank);
    let mut it = shape.into_iter();
    for k in 0..out_rank {
        if axes.contains(&k) {
            out.push(Dim::Known(1));
        } else {
            out.push(it.next().ok_or_else(|| ctx.err("axes out of range"))?);
        }
    }
    Ok(vec![ctx.reshape(x, out)?])
}

pub fn shape(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let dims = ctx.known_shape(x)?;
    let r = dims.len() as i64;
    let clampi = |v: i64| {
        if v < 0 {
            (v + r).clamp(0, r)
        } else {
            v.clamp(0, r)
        }
    };
    let start = clampi(ctx.attr_i_or("start", 0)?);
    let end = clampi(ctx.attr_i_or("end", r)?);
    let sel: Vec<i64> = if start < end {
        dims[start as usize..end as usize].to_vec()
    } else {
        vec![]
    };
    Ok(vec![
        ctx.constant(Tensor::from_i64s(vec![sel.len() as i64], &sel)),
    ])
}

pub fn size(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let n: i64 = ctx.known_shape(x)?.iter().product();
    Ok(vec![ctx.constant(Tensor::from_i64s(vec![], &[n]))])
}

pub fn constant(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    if let Some(strings) = ctx.attr_string_tensor("value")? {
        let dims = ctx
            .attr("value")
            .and_then(|a| a.t.as_ref())
            .map_or(vec![], |t| t.dims.clone());
        return Ok(vec![super::ml::encode::string_constant(
            ctx, dims, &strings,
        )?]);
    }
    if let Some(s) = ctx.attr_s("value_string")? {
        return Ok(vec![super::ml::encode::string_constant(ctx, vec![], &[s])?]);
    }
    if let Some(v) = ctx.attr_strings("value_strings") {
        let n = v.len() as i64;
        return Ok(vec![super::ml::encode::string_constant(ctx, vec![n], &v)?]);
    }
    let t = if let Some(t) = ctx.attr_t("value")? {
        t
    } else if let Some(v) = ctx.attr_f("value_float")? {
        Tensor::scalar(DType::F32, Scalar::F(v))
    } else if let Some(v) = ctx.attr_floats("value_floats") {
        let vals: Vec<Scalar> = v.iter().map(|&x| Scalar::F(x as f64)).collect();
        Tensor::from_scalars(DType::F32, vec![vals.len() as i64], &vals)
    } else if let Some(v) = ctx.attr_i("value_int")? {
        Tensor::from_i64s(vec![], &[v])
    } else if let Some(v) = ctx.attr_ints("value_ints") {
        Tensor::from_i64s(vec![v.len() as i64], &v)
    } else if let Some(a) = ctx.attr("sparse_value") {
        let sp = a
            .sparse_tensor
            .as_ref()
            .ok_or_else(|| ctx.err("attribute 'sparse_value' must be a sparse tensor"))?;
        let what = format!("{}, attribute 'sparse_value'", ctx.origin);
        crate::frontend::tensor::sparse_from_proto(sp, ctx.dir, &what)?
    } else {
        return Err(ctx.err("needs one of the attributes value, value_float(s), value_int(s)"));
    };
    Ok(vec![ctx.constant(t)])
}

pub fn constant_of_shape(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let s = ctx.input(0)?;
    let dims = if ctx.is_runtime(s) {
        let out = ctx.declared_shape(0, "input 'shape'")?;
        let sv = build::flat_i64(ctx, s)?;
        build::assert_equals(ctx, sv, &out)?;
        out
    } else {
        ctx.const_ints(s, "input 'shape'")?
    };
    if let Some(d) = dims.iter().find(|&&d| d < 0) {
        return Err(ctx.err(format!("shape {dims:?} has negative dim {d}")));
    }
    let (dt, v) = match ctx.attr_t("value")? {
        Some(t) if t.len() == 1 => (t.dtype, t.get(0)),
        Some(t) => {
            return Err(ctx.err(format!(
                "attribute 'value' must hold one element, has {}",
                t.len()
            )));
        }
        None => (DType::F32, Scalar::F(0.0)),
    };
    let shape: Shape = dims.iter().map(|&d| Dim::Known(d)).collect();
    Ok(vec![ctx.map(dt, shape, vec![], expr::konst(dt, v))?])
}
