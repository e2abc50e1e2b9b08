//! Gather, GatherElements, GatherND: loads at data-dependent positions, each index
//! checked (`CheckIndex`, `ONNXC_ERR_INDEX` when out of range).

use super::{index_types, vars};
use crate::error::Result;
use crate::frontend::build;
use crate::frontend::ctx::Ctx;
use crate::ir::dim::{Dim, Shape};
use crate::ir::expr::{self, E};
use crate::ir::{DType, ValueId};

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
