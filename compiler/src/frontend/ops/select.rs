//! Ops whose result has as many rows as the data selects: NonZero, Compress,
//! NonMaxSuppression, Unique. On constant operands they fold to their exact result. Otherwise a
//! runtime kernel (`kernels::NonZero`, `kernels::Nms`) writes the count and the rows at
//! their bound, and the builder registers the rows as data-dependent (`ir::graph::DataDim`):
//! what reads them must keep rows apart (`passes::data_dims`), and the outputs they reach
//! return the rows found through `NAME_run_shaped`.

use crate::error::Result;
use crate::frontend::build;
use crate::frontend::ctx::Ctx;
use crate::ir::dim::Shape;
use crate::ir::expr::{self, E};
use crate::ir::{DType, Dim, Op, Scalar, Tensor, TypeInfo, ValueId};
use crate::kernels::{self, KernelOp, Operand};

/// The count of rows a data-dependent kernel found: word 0 of its int64 result, a scalar.
fn count_of(ctx: &mut Ctx, result: ValueId) -> Result<ValueId> {
    ctx.map(
        DType::I64,
        vec![],
        vec![result],
        expr::load(DType::I64, 0, vec![expr::i(0)]),
    )
}

/// Splits a data-dependent kernel's int64 result `[1 + rows·width]` into its count (a
/// scalar) and its `rows` rows of `width` (`[rows, width]`, or `[width, rows]` with
/// `transposed`, as NonZero's coordinates are laid out), registered as data-dependent.
fn rows_of(
    ctx: &mut Ctx,
    result: ValueId,
    rows: i64,
    width: i64,
    transposed: bool,
) -> Result<ValueId> {
    let count = count_of(ctx, result)?;
    let (shape, at) = if transposed {
        // [width, rows]: element (w, r) at 1 + w·rows + r.
        let at = expr::add(
            expr::mul(expr::var(0), expr::i(rows)),
            expr::add(expr::var(1), expr::i(1)),
        );
        (vec![width, rows], at)
    } else {
        let at = expr::add(
            expr::mul(expr::var(0), expr::i(width)),
            expr::add(expr::var(1), expr::i(1)),
        );
        (vec![rows, width], at)
    };
    let shape: Shape = shape.into_iter().map(Dim::Known).collect();
    let rows_v = ctx.map(
        DType::I64,
        shape,
        vec![result],
        expr::load(DType::I64, 0, vec![at]),
    )?;
    ctx.g
        .mark_rows(rows_v, count, rows, usize::from(transposed));
    Ok(rows_v)
}

/// NonZero's `[rank, count]` positions of `x` (a scalar counts as one element of rank 1).
fn nonzero_of(ctx: &mut Ctx, x: ValueId) -> Result<ValueId> {
    let dt = ctx.dtype(x);
    if dt == DType::Str {
        return Err(ctx.unsupported("string tensors: NonZero takes numbers and booleans"));
    }
    let dims = ctx.known_shape(x)?;
    // float8 and float4 codes have a negative zero of their own: compare in float32.
    let x = if dt.is_lowp_float() {
        let r = dims.len();
        let shape: Shape = dims.iter().map(|&d| Dim::Known(d)).collect();
        let vars = (0..r as u32).map(expr::var).collect();
        ctx.map(
            DType::F32,
            shape,
            vec![x],
            expr::cast(expr::load(dt, 0, vars), DType::F32),
        )?
    } else {
        x
    };
    let rank = dims.len().max(1) as i64;
    let n: i64 = dims.iter().product();
    let op = kernels::NonZero { dims: dims.clone() };
    let len = kernels::NonZero::result_len(&dims);
    if let Some(t) = ctx.konst(x).filter(|_| len as usize <= ctx.fold_limit) {
        // Constant (within the fold limit): the exact positions.
        let shape = [len];
        let result = Operand {
            dtype: DType::I64,
            shape: &shape,
            constant: true,
        };
        let words = match op.eval(&[&t], result, usize::MAX) {
            Some(Ok(t)) => t.to_i64s(),
            Some(Err(e)) => return Err(ctx.err(e)),
            None => return Err(ctx.err("NonZero did not fold")),
        };
        let count = words[0];
        let rows: Vec<i64> = (0..rank)
            .flat_map(|r| words[(1 + r * n) as usize..(1 + r * n + count) as usize].to_vec())
            .collect();
        return Ok(ctx.constant(Tensor::from_i64s(vec![rank, count], &rows)));
    }
    if n == 0 {
        return Ok(ctx.constant(Tensor::from_i64s(vec![rank, 0], &[])));
    }
    let result = ctx.add(
        Op::kernel(op),
        vec![x],
        TypeInfo::new(DType::I64, vec![Dim::Known(len)]),
    )?;
    rows_of(ctx, result, n, rank, true)
}

pub fn nonzero(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    Ok(vec![nonzero_of(ctx, x)?])
}

pub fn compress(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (data, cond) = (ctx.input(0)?, ctx.input(1)?);
    build::expect_types(ctx, cond, "condition", &[DType::Bool])?;
    let cs = ctx.known_shape(cond)?;
    if cs.len() != 1 {
        return Err(ctx.err(format!("condition must be 1-D, its shape is {cs:?}")));
    }
    // Without an axis, the input is flattened.
    let (data, axis) = match ctx.attr_i("axis")? {
        Some(a) => {
            let r = ctx.rank(data);
            (data, build::axis(ctx, a, r)?)
        }
        None => {
            let n: i64 = ctx.known_shape(data)?.iter().product();
            (ctx.reshape(data, vec![Dim::Known(n)])?, 0)
        }
    };
    let ds = ctx.known_shape(data)?;
    let len = ds[axis];
    // A condition longer than the axis: its entries past the axis are ignored, true or not,
    // as onnxruntime ignores them (the spec defines only a shorter one, whose missing
    // entries are false; onnx's reference evaluator fails on a true entry past the axis).
    let cond = if cs[0] > len {
        ctx.map(
            DType::Bool,
            vec![Dim::Known(len)],
            vec![cond],
            expr::load(DType::Bool, 0, vec![expr::var(0)]),
        )?
    } else {
        cond
    };
    // Positions of the true conditions, [1, m] → [m].
    let pos = nonzero_of(ctx, cond)?;
    let m = ctx.known_shape(pos)?[1];
    let pos = ctx.reshape(pos, vec![Dim::Known(m)])?;
    let r = ds.len();
    let mut shape: Vec<i64> = ds.clone();
    shape[axis] = m;
    // Every position is inside the axis; checked all the same (ONNXC_ERR_INDEX).
    let index: Vec<E> = (0..r)
        .map(|k| {
            let v = expr::var(k as u32);
            if k == axis {
                expr::check_index(expr::load(DType::I64, 1, vec![v]), len)
            } else {
                v
            }
        })
        .collect();
    let dt = ctx.dtype(data);
    let shape: Shape = shape.into_iter().map(Dim::Known).collect();
    Ok(vec![ctx.map(
        dt,
        shape,
        vec![data, pos],
        expr::load(dt, 0, index),
    )?])
}

pub fn non_max_suppression(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (boxes, scores) = (ctx.input(0)?, ctx.input(1)?);
    build::expect_types(ctx, boxes, "boxes", &[DType::F32])?;
    build::expect_types(ctx, scores, "scores", &[DType::F32])?;
    let bs = ctx.known_shape(boxes)?;
    let ss = ctx.known_shape(scores)?;
    if bs.len() != 3 || bs[2] != 4 || ss.len() != 3 || ss[0] != bs[0] || ss[2] != bs[1] {
        return Err(ctx.err(format!(
            "boxes must be [batches, boxes, 4] and scores [batches, classes, boxes]; they are \
             {bs:?} and {ss:?}"
        )));
    }
    let center = match ctx.attr_i_or("center_point_box", 0)? {
        0 => false,
        1 => true,
        c => return Err(ctx.err(format!("center_point_box is {c}; it must be 0 or 1"))),
    };
    // One value each, or absent or empty (max_output_boxes_per_class 0, iou_threshold 0, no
    // score threshold).
    let given = |ctx: &Ctx, k: usize| -> Result<Option<ValueId>> {
        match ctx.opt_input(k) {
            Some(v) if ctx.known_shape(v)?.contains(&0) => Ok(None),
            v => Ok(v),
        }
    };
    let scalar = |ctx: &mut Ctx, k: usize, dt: DType, default: Tensor| -> Result<ValueId> {
        match given(ctx, k)? {
            None => Ok(ctx.constant(default)),
            Some(v) => {
                let what = [
                    "",
                    "",
                    "max_output_boxes_per_class",
                    "iou_threshold",
                    "score_threshold",
                ][k];
                build::expect_types(ctx, v, what, &[dt])?;
                if ctx.known_shape(v)?.iter().product::<i64>() != 1 {
                    return Err(ctx.err(format!("input {what} must hold one value")));
                }
                Ok(v)
            }
        }
    };
    let max = scalar(ctx, 2, DType::I64, Tensor::from_i64s(vec![1], &[0]))?;
    let iou = scalar(
        ctx,
        3,
        DType::F32,
        Tensor::filled(DType::F32, vec![1], Scalar::zero(DType::F32)),
    )?;
    let has_score = given(ctx, 4)?.is_some();
    let score = scalar(
        ctx,
        4,
        DType::F32,
        Tensor::filled(DType::F32, vec![1], Scalar::zero(DType::F32)),
    )?;
    let (nb, nc, ns) = (ss[0], ss[1], ss[2]);
    // Rows there can be: per batch and class, the boxes up to a constant maximum.
    let per_class = match ctx.konst(max) {
        Some(t) => t.to_i64s()[0].clamp(0, ns),
        None => ns,
    };
    let capacity = nb
        .checked_mul(nc)
        .and_then(|c| c.checked_mul(per_class))
        .filter(|&c| c <= crate::ir::dim::MAX_ELEMENTS / 3)
        .ok_or_else(|| {
            ctx.err(format!(
                "{nb} batches x {nc} classes x {per_class} boxes per class are more rows than \
                 onnxc compiles (a constant max_output_boxes_per_class bounds them)"
            ))
        })?;
    if capacity == 0 {
        return Ok(vec![ctx.constant(Tensor::from_i64s(vec![0, 3], &[]))]);
    }
    let op = kernels::Nms {
        center_point_box: center,
        has_score_threshold: has_score,
        capacity,
    };
    let result = ctx.add(
        Op::kernel(op),
        vec![boxes, scores, max, iou, score],
        TypeInfo::new(DType::I64, vec![Dim::Known(1 + 3 * capacity)]),
    )?;
    if ctx.konst(result).is_some() {
        // Constant operands: the exact rows.
        let words = ctx.konst(result).map(|t| t.to_i64s()).unwrap_or_default();
        let count = words[0];
        return Ok(vec![ctx.constant(Tensor::from_i64s(
            vec![count, 3],
            &words[1..(1 + 3 * count) as usize],
        ))]);
    }
    Ok(vec![rows_of(ctx, result, capacity, 3, false)?])
}

pub fn unique(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let dt = ctx.dtype(x);
    if !kernels::Unique::supports(dt) {
        return Err(ctx.unsupported(format!(
            "element type {dt}: Unique compares numbers and booleans"
        )));
    }
    let sorted = ctx.attr_i_or("sorted", 1)? != 0;
    // Without an axis, the flattened input's elements.
    let (x, axis) = match ctx.attr_i("axis")? {
        Some(a) => {
            let r = ctx.rank(x);
            if r == 0 {
                return Err(
                    ctx.err("input X is a scalar; Unique along an axis needs rank 1 or more")
                );
            }
            (x, build::axis(ctx, a, r)?)
        }
        None => {
            let n: i64 = ctx.known_shape(x)?.iter().product();
            (ctx.reshape(x, vec![Dim::Known(n)])?, 0)
        }
    };
    let ds = ctx.known_shape(x)?;
    let r = ds.len();
    let n = ds[axis];
    let op = kernels::Unique {
        outer: ds[..axis].iter().product(),
        n,
        inner: ds[axis + 1..].iter().product(),
        sorted,
    };
    // The kernel's result packs a count and three words per element into one int64 axis.
    let most = (crate::ir::dim::MAX_DIM - 1) / 3;
    if n > most {
        return Err(ctx.err(format!(
            "input X {} has {n} elements along the axis Unique takes; onnxc's Unique takes at \
             most {most} ((2^31 - 2) / 3)",
            crate::ir::dim::fmt_shape(&ctx.shape(ctx.input(0)?))
        )));
    }
    let words = 1 + 3 * n;
    let result = ctx.add(
        Op::kernel(op),
        vec![x],
        TypeInfo::new(DType::I64, vec![Dim::Known(words)]),
    )?;
    // Slots `from..from + len` of the result, as an int64 [len].
    let slots = |ctx: &mut Ctx, from: i64, len: i64| -> Result<ValueId> {
        if let Some(t) = ctx.konst(result) {
            let w = t.to_i64s();
            return Ok(ctx.constant(Tensor::from_i64s(
                vec![len],
                &w[from as usize..(from + len) as usize],
            )));
        }
        let at = expr::add(expr::var(0), expr::i(from));
        ctx.map(
            DType::I64,
            vec![Dim::Known(len)],
            vec![result],
            expr::load(DType::I64, 0, vec![at]),
        )
    };
    let (firsts, inverse, counts) = match ctx.konst(result).map(|t| t.to_i64s()[0]) {
        // Constant input: the exact distinct slices.
        Some(u) => (
            slots(ctx, 1, u)?,
            slots(ctx, 1 + n, n)?,
            slots(ctx, 1 + 2 * n, u)?,
        ),
        None => {
            let count = count_of(ctx, result)?;
            let firsts = slots(ctx, 1, n)?;
            let inverse = slots(ctx, 1 + n, n)?;
            let counts = slots(ctx, 1 + 2 * n, n)?;
            for v in [firsts, counts] {
                ctx.g.mark_rows(v, count, n, 0);
            }
            (firsts, inverse, counts)
        }
    };
    // Y: the distinct slices, gathered at their first positions (valid by construction).
    let u = ctx.known_shape(firsts)?[0];
    let mut shape = ds.clone();
    shape[axis] = u;
    let index: Vec<E> = (0..r)
        .map(|k| {
            let v = expr::var(k as u32);
            if k == axis {
                expr::clamp(expr::load(DType::I64, 1, vec![v]), 0, (n - 1).max(0))
            } else {
                v
            }
        })
        .collect();
    let shape: Shape = shape.into_iter().map(Dim::Known).collect();
    let y = ctx.map(dt, shape, vec![x, firsts], expr::load(dt, 0, index))?;
    Ok(vec![y, firsts, inverse, counts])
}
