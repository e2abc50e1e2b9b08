//! TopK (opsets 1, 10, 11+): a runtime kernel finds the positions (`kernels::TopK`), a map
//! gathers their values. K is a constant; or a run-time input that must equal what the
//! declared output shape says (checked when the model runs, `ONNXC_ERR_SHAPE`); or, without
//! a declared shape, a run-time count of the whole sorted axis' first lines (`DataDim`,
//! returned through `NAME_run_shaped`). `sorted=0` leaves the order to the implementation;
//! onnxc returns it sorted either way.

use crate::error::Result;
use crate::frontend::build;
use crate::frontend::ctx::Ctx;
use crate::ir::dim::{Dim, shape_from};
use crate::ir::expr::{self, E};
use crate::ir::{DType, Op, Tensor, TypeInfo, ValueId};

/// The element types `onnxc_topk` compares.
const TOPK_TYPES: &[DType] = &[
    DType::F32,
    DType::F64,
    DType::F16,
    DType::BF16,
    DType::I8,
    DType::U8,
    DType::I16,
    DType::U16,
    DType::I32,
    DType::U32,
    DType::I64,
    DType::U64,
];

pub fn topk(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let dt = build::expect_types(ctx, x, "input X", TOPK_TYPES)?;
    let shape = ctx.known_shape(x)?;
    let rank = shape.len();
    if rank == 0 {
        return Err(ctx.err("input X is a scalar; TopK needs rank 1 or more"));
    }
    let axis = build::axis(ctx, ctx.attr_i_or("axis", -1)?, rank)?;
    let k = if ctx.opset < 10 {
        ctx.attr_i("k")?
            .ok_or_else(|| ctx.err("attribute 'k' (an int) is required"))?
    } else {
        let kv = ctx.input(1)?;
        if ctx.is_runtime(kv) && ctx.declared.first().cloned().flatten().is_none() {
            let largest = ctx.opset < 11 || ctx.attr_i_or("largest", 1)? != 0;
            return topk_rows(ctx, x, kv, &shape, axis, largest);
        }
        if ctx.is_runtime(kv) {
            // A run-time K: the declared output shape fixes it, checked when the model runs.
            let declared = ctx.declared_shape(0, "input K")?;
            let k = match declared.get(axis) {
                Some(&k) if declared.len() == rank => k,
                _ => {
                    return Err(ctx.err(format!(
                        "output 0 is declared {declared:?}, which does not have X's rank {rank}"
                    )));
                }
            };
            if ctx.known_shape(kv)?.iter().product::<i64>() != 1 {
                return Err(ctx.err("input K must hold one value"));
            }
            let flat = build::flat_i64(ctx, kv)?;
            build::assert_equals(ctx, flat, &[k])?;
            k
        } else {
            match ctx.const_ints(kv, "input K")?.as_slice() {
                [k] => *k,
                ks => {
                    return Err(ctx.err(format!(
                        "input K must hold one value, it holds {}",
                        ks.len()
                    )));
                }
            }
        }
    };
    let n = shape[axis];
    if k < 0 || k > n {
        return Err(ctx.err(format!(
            "k is {k}; it must be between 0 and the length of axis {axis} of X ({n}), whose \
             shape is {shape:?}"
        )));
    }
    let largest = ctx.opset < 11 || ctx.attr_i_or("largest", 1)? != 0;
    let mut out_shape = shape.clone();
    out_shape[axis] = k;
    let dims: Vec<Dim> = shape_from(&out_shape);
    if k == 0 {
        let values = ctx.constant(Tensor::new(dt, out_shape.clone(), vec![]));
        let indices = ctx.constant(Tensor::new(DType::I64, out_shape, vec![]));
        return Ok(vec![values, indices]);
    }
    let indices = ctx.add(
        Op::kernel(crate::kernels::TopK { axis, k, largest }),
        vec![x],
        TypeInfo::new(DType::I64, dims.clone()),
    )?;
    let values = gather_values(ctx, x, indices, axis, n)?;
    Ok(vec![values, indices])
}

/// The elements of `x` at the positions `indices` (TopK's kernel result) holds along `axis`,
/// of length `n` in `x`.
fn gather_values(
    ctx: &mut Ctx,
    x: ValueId,
    indices: ValueId,
    axis: usize,
    n: i64,
) -> Result<ValueId> {
    let dt = ctx.dtype(x);
    let dims = ctx.shape(indices);
    let rank = dims.len();
    // The positions are in [0, n) by construction; the clamp states it for the load.
    let vars: Vec<E> = (0..rank as u32).map(expr::var).collect();
    let index: Vec<E> = (0..rank)
        .map(|d| {
            if d == axis {
                expr::clamp(expr::load(DType::I64, 1, vars.clone()), 0, n - 1)
            } else {
                vars[d].clone()
            }
        })
        .collect();
    ctx.map(dt, dims, vec![x, indices], expr::load(dt, 0, index))
}

/// TopK whose K is computed at run time and whose output shape the model does not declare:
/// the whole axis in order, of which the first K lines are the result, K (checked to be in
/// `0..=n`, `ONNXC_ERR_SHAPE`) their data-dependent count (`ir::graph::DataDim`).
fn topk_rows(
    ctx: &mut Ctx,
    x: ValueId,
    kv: ValueId,
    shape: &[i64],
    axis: usize,
    largest: bool,
) -> Result<Vec<ValueId>> {
    if ctx.known_shape(kv)?.iter().product::<i64>() != 1 {
        return Err(ctx.err("input K must hold one value"));
    }
    let n = shape[axis];
    let k = build::flat_i64(ctx, kv)?;
    let kk = expr::load(DType::I64, 0, vec![expr::i(0)]);
    let valid = expr::and(
        expr::ge(kk.clone(), expr::i(0)),
        expr::lt(kk.clone(), expr::i(n + 1)),
    );
    ctx.assert_expr(vec![], vec![k], valid, onnxc_runtime::abi::ONNXC_ERR_SHAPE)?;
    let count = ctx.map(DType::I64, vec![], vec![k], kk)?;
    let dt = ctx.dtype(x);
    if n == 0 {
        let values = ctx.constant(Tensor::new(dt, shape.to_vec(), vec![]));
        let indices = ctx.constant(Tensor::new(DType::I64, shape.to_vec(), vec![]));
        return Ok(vec![values, indices]);
    }
    let indices = ctx.add(
        Op::kernel(crate::kernels::TopK {
            axis,
            k: n,
            largest,
        }),
        vec![x],
        TypeInfo::new(DType::I64, shape_from(shape)),
    )?;
    let values = gather_values(ctx, x, indices, axis, n)?;
    for v in [values, indices] {
        ctx.g.mark_rows(v, count, n, axis);
    }
    Ok(vec![values, indices])
}
