//! ScatterND, ScatterElements (and opset 9's Scatter), MaxUnpool: a copy of the data (or
//! zeros) with elements written at data-dependent, checked positions (`Op::Scatter`).

use super::{index_types, vars};
use crate::error::Result;
use crate::frontend::build;
use crate::frontend::ctx::Ctx;
use crate::ir::dim::Dim;
use crate::ir::expr::{self, E};
use crate::ir::graph::ReduceKind;
use crate::ir::{DType, Scalar, ValueId};

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
    build::extents(ctx, "attribute 'kernel_shape'", &kernel)?;
    build::extents(ctx, "attribute 'strides'", &strides)?;
    build::extents(ctx, "attribute 'pads'", &pads)?;
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
        crate::ir::dim::check_size(&given).map_err(|m| ctx.err(m))?;
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
    crate::ir::dim::check_size(&inferred).map_err(|m| ctx.err(m))?;
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

/// TensorScatter (opset 24): the cache `past` with `update` written along `axis` (not the
/// batch axis) from each batch row's `write_indices` entry (0 when absent); `mode="circular"`
/// wraps positions modulo the cache length, `"linear"` checks them (`ONNXC_ERR_INDEX`).
pub fn tensor_scatter(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (past, update) = (ctx.input(0)?, ctx.input(1)?);
    let write = ctx.opt_input(2);
    let ps = ctx.known_shape(past)?;
    let us = ctx.known_shape(update)?;
    let r = ps.len();
    let axis = build::axis(ctx, ctx.attr_i_or("axis", -2)?, r)?;
    if axis == 0 {
        return Err(ctx.err("axis must not be 0, the batch axis"));
    }
    let same_but_axis = us.len() == r && (0..r).all(|k| k == axis || us[k] == ps[k]);
    if !same_but_axis || us[axis] > ps[axis] {
        return Err(ctx.err(format!(
            "update has shape {us:?}; it must match past_cache {ps:?} but along axis {axis}, \
             where it may be shorter"
        )));
    }
    let dt = ctx.dtype(past);
    if ctx.dtype(update) != dt {
        return Err(ctx.err(format!(
            "update has type {}, past_cache {dt}",
            ctx.dtype(update)
        )));
    }
    let circular = match ctx.attr_s_or("mode", "linear")?.as_str() {
        "linear" => false,
        "circular" => true,
        other => return Err(ctx.err(format!("unknown mode '{other}' (linear or circular)"))),
    };
    let mut inputs = vec![past, update];
    let mut index = vars(r);
    if let Some(w) = write {
        build::expect_types(ctx, w, "write_indices", &[DType::I64])?;
        let ws = ctx.known_shape(w)?;
        if ws != [ps[0]] {
            return Err(ctx.err(format!(
                "write_indices has shape {ws:?}, expected [{}] (one per batch row)",
                ps[0]
            )));
        }
        inputs.push(w);
        let at = expr::binary(
            expr::BinOp::Add,
            expr::load(DType::I64, 2, vec![expr::var(0)]),
            expr::var(axis as u32),
        );
        index[axis] = if circular {
            expr::binary(expr::BinOp::FloorMod, at, expr::i(ps[axis]))
        } else {
            expr::check_index(at, ps[axis])
        };
    }
    let value = expr::load(dt, 1, vars(r));
    let shape = ctx.shape(past);
    let sc = crate::ir::graph::ScatterOp {
        kind: None,
        extents: us,
        index,
        value,
    };
    Ok(vec![ctx.add(
        crate::ir::Op::Scatter(sc),
        inputs,
        crate::ir::TypeInfo::new(dt, shape),
    )?])
}
