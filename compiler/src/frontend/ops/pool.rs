//! Pooling: MaxPool (with indices), AveragePool, LpPool and their global forms, through the
//! runtime's pool kernel where it takes the geometry, else as window reductions.

use crate::error::Result;
use crate::frontend::build::{self, FLOATS};
use crate::frontend::ctx::Ctx;
use crate::ir::dim::{Dim, Shape};
use crate::ir::expr::{self, BinOp, E, UnOp};
use crate::ir::graph::{PoolKind, PoolOp, ReduceKind};
use crate::ir::interp::lowest;
use crate::ir::{DType, Scalar, Tensor, TypeInfo, ValueId};

use super::nn::{Window, window};

/// Index of window tap `r` at output position `o` along spatial dim `i`, before clamping.
fn tap(win: &Window, i: usize, o: E, r: E) -> E {
    let p = expr::add(
        expr::mul(o, expr::i(win.strides[i])),
        expr::mul(r, expr::i(win.dilations[i])),
    );
    expr::sub(p, expr::i(win.pads_begin[i]))
}

/// The input element under window tap (`o`: output var, `r`: reduction var per spatial dim),
/// with the condition that it lies inside `[lo, hi)` per dim.
fn window_load(dtype: DType, win: &Window, input: &[i64], rank_out: u32) -> (E, E) {
    let nsp = win.kernel.len();
    let mut index = vec![expr::var(0), expr::var(1)];
    let mut inside = expr::konst(DType::Bool, Scalar::B(true));
    for i in 0..nsp {
        let p = tap(
            win,
            i,
            expr::var(2 + i as u32),
            expr::var(rank_out + i as u32),
        );
        inside = expr::and(
            inside,
            expr::and(
                expr::ge(p.clone(), expr::i(0)),
                expr::lt(p.clone(), expr::i(input[i])),
            ),
        );
        index.push(expr::clamp(p, 0, input[i] - 1));
    }
    (expr::load(dtype, 0, index), inside)
}

/// `win` without the taps that lie in the padding at every output position (`trimmed`): the
/// window a reduction over the input's elements walks.
fn input_taps(win: &Window, input: &[i64]) -> Window {
    win.trimmed(&vec![0; input.len()], input)
}

fn pool_shape(xs: &[i64], win: &Window) -> Shape {
    let mut shape: Shape = vec![Dim::Known(xs[0]), Dim::Known(xs[1])];
    shape.extend(win.out.iter().map(|&d| Dim::Known(d)));
    shape
}

fn pool_setup(ctx: &Ctx, allow_int: bool) -> Result<(ValueId, DType, Vec<i64>, Window)> {
    pool_setup_of(ctx, ctx.input(0)?, allow_int)
}

/// `pool_setup` of the operand `x` with the node's pool attributes.
fn pool_setup_of(
    ctx: &Ctx,
    x: ValueId,
    allow_int: bool,
) -> Result<(ValueId, DType, Vec<i64>, Window)> {
    let dt = ctx.dtype(x);
    if !(dt.is_float() || (allow_int && matches!(dt, DType::I8 | DType::U8))) {
        return Err(ctx.err(format!("input has unsupported type {dt}")));
    }
    let xs = ctx.known_shape(x)?;
    if xs.len() < 3 {
        return Err(ctx.err(format!("input must have rank >= 3, got {xs:?}")));
    }
    let kernel = ctx
        .attr_ints("kernel_shape")
        .ok_or_else(|| ctx.err("attribute 'kernel_shape' is required"))?;
    if kernel.len() != xs.len() - 2 {
        return Err(ctx.err(format!(
            "kernel_shape {kernel:?} does not match input rank {}",
            xs.len()
        )));
    }
    let ceil_mode = ctx.attr_i_or("ceil_mode", 0)? != 0;
    let win = window(ctx, &xs[2..], &kernel, ceil_mode)?;
    Ok((x, dt, xs, win))
}

/// Float32 pools run in the runtime's 2-D kernel; everything else is a `Reduce`. 1-D pools
/// are 2-D ones over a single row. 3-D max and average pools are separable: the depth
/// window, over `[n, c, d, h·w]` viewed as 2-D, then the `[h, w]` window, over
/// `[n, c·od, h, w]` (either skipped where its window is one element); per dim the same
/// windows, padding and divisors as the 3-D pool (the count of a box window is the product
/// of its per-dim counts). Lp pools of rank 3 stay a `Reduce` (a root per stage would round
/// twice).
fn pool_kernel(
    ctx: &mut Ctx,
    kind: PoolKind,
    x: ValueId,
    dt: DType,
    xs: &[i64],
    win: &Window,
) -> Result<Option<ValueId>> {
    if dt != DType::F32 || xs.iter().any(|&d| d <= 0) || win.out.iter().any(|&d| d <= 0) {
        return Ok(None);
    }
    // The kernel's Lp exponents are bounded; larger ones (all but |x| <= 1 overflow to
    // infinity) go through the generated reduction.
    if matches!(kind, PoolKind::Lp { p } if p > onnxc_runtime::pool::MAX_LP) {
        return Ok(None);
    }
    // A window with taps in the padding at every output position (a kernel wider than the
    // input and its padding need) goes through the generated reduction over its trimmed
    // window (`input_taps`), an average's divisors counted in closed form (`tap_counts`):
    // the kernel would copy the whole padded input and walk every tap (a 2×1048576 MaxPool
    // over 32×32 asked for a 415 MB workspace).
    if input_taps(win, &xs[2..]).kernel != win.kernel {
        return Ok(None);
    }
    // The 2-D pool of `x` viewed as `[n, c, h, w]` over window dims `dims` of `win`
    // (None: a unit dim).
    let pool2d = |ctx: &mut Ctx, x: ValueId, view: [i64; 4], dims: [Option<usize>; 2]| {
        let pick = |v: &[i64], unit: i64| -> Vec<i64> {
            dims.iter().map(|d| d.map_or(unit, |d| v[d])).collect()
        };
        let op = PoolOp {
            kind,
            kernel: pick(&win.kernel, 1),
            strides: pick(&win.strides, 1),
            dilations: pick(&win.dilations, 1),
            pads_begin: pick(&win.pads_begin, 0),
            pads_end: pick(&win.pads_end, 0),
        };
        let out: Vec<i64> = (0..2)
            .map(|i| dims[i].map_or(view[2 + i], |d| win.out[d]))
            .collect();
        let xv = ctx.reshape(x, view.iter().map(|&d| Dim::Known(d)).collect())?;
        let shape = vec![
            Dim::Known(view[0]),
            Dim::Known(view[1]),
            Dim::Known(out[0]),
            Dim::Known(out[1]),
        ];
        ctx.add(crate::ir::Op::Pool(op), vec![xv], TypeInfo::new(dt, shape))
    };
    let trivial = |d: usize| {
        win.kernel[d] == 1 && win.strides[d] == 1 && win.pads_begin[d] == 0 && win.pads_end[d] == 0
    };
    let y = match *xs {
        [_, _, _, _] => pool2d(ctx, x, [xs[0], xs[1], xs[2], xs[3]], [Some(0), Some(1)])?,
        [n, c, l] => pool2d(ctx, x, [n, c, 1, l], [None, Some(0)])?,
        [n, c, d, h, w] if !matches!(kind, PoolKind::Lp { .. }) || trivial(0) => {
            let mut y = x;
            let mut od = d;
            if !trivial(0) {
                y = pool2d(ctx, y, [n, c, d, h * w], [Some(0), None])?;
                od = win.out[0];
            }
            if !(trivial(1) && trivial(2)) {
                y = pool2d(ctx, y, [n, c * od, h, w], [Some(1), Some(2)])?;
            }
            if y == x {
                return Ok(None);
            }
            y
        }
        _ => return Ok(None),
    };
    Ok(Some(ctx.reshape(y, pool_shape(xs, win))?))
}

pub fn max_pool(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (x, dt, xs, win) = pool_setup(ctx, true)?;
    if ctx.node.output.len() > 1 && !ctx.node.output[1].is_empty() {
        return max_pool_with_indices(ctx, x, dt, &xs, &win);
    }
    if let Some(y) = pool_kernel(ctx, PoolKind::Max, x, dt, &xs, &win)? {
        return Ok(vec![y]);
    }
    // As for float pools (`pool_kernel`), a window with taps that never reach the input
    // goes through the reduction over its trimmed window instead of the kernel.
    if matches!(dt, DType::U8 | DType::I8)
        && xs.len() == 4
        && xs.iter().chain(&win.out).all(|&d| d > 0)
        && input_taps(&win, &xs[2..]).kernel == win.kernel
    {
        let geometry = onnxc_runtime::pool::PoolGeometry {
            kind: 0,
            count_include_pad: false,
            p: 0,
            planes: xs[0] * xs[1],
            input: [xs[2], xs[3]],
            output: [win.out[0], win.out[1]],
            kernel: [win.kernel[0], win.kernel[1]],
            strides: [win.strides[0], win.strides[1]],
            dilations: [win.dilations[0], win.dilations[1]],
            pads_begin: [win.pads_begin[0], win.pads_begin[1]],
            pads_end: [win.pads_end[0], win.pads_end[1]],
        };
        if geometry.validate().is_ok() {
            let op = crate::kernels::MaxPoolInt {
                geometry,
                signed: dt == DType::I8,
            };
            let shape = pool_shape(&xs, &win);
            return Ok(vec![ctx.add(
                crate::ir::Op::kernel(op),
                vec![x],
                TypeInfo::new(dt, shape),
            )?]);
        }
    }
    let rank = xs.len() as u32;
    let taps = input_taps(&win, &xs[2..]);
    let (v, inside) = window_load(dt, &taps, &xs[2..], rank);
    let body = if win.always_inside(&xs[2..]) {
        v
    } else {
        expr::select(inside, v, expr::konst(dt, lowest(dt)))
    };
    let shape = pool_shape(&xs, &win);
    Ok(vec![ctx.reduce(
        ReduceKind::Max,
        taps.kernel,
        dt,
        shape,
        vec![x],
        body,
    )?])
}

/// MaxPool with the Indices output: arg-max over the flattened window, then the flat input
/// index (row-major, or column-major spatial order with `storage_order=1`). Both walk the
/// trimmed window (`input_taps`): the taps it drops lie in the padding at every output and
/// hold no input element, and a huge window costs what its taps over the input cost.
fn max_pool_with_indices(
    ctx: &mut Ctx,
    x: ValueId,
    dt: DType,
    xs: &[i64],
    win: &Window,
) -> Result<Vec<ValueId>> {
    let win = &input_taps(win, &xs[2..]);
    let storage_order = ctx.attr_i_or("storage_order", 0)?;
    let rank = xs.len() as u32;
    let nsp = win.kernel.len();
    let ktotal: i64 = win.kernel.iter().product();
    // Decompose the flat tap r into per-dim taps.
    let r = expr::var(rank);
    let taps = |r: E| -> Vec<E> {
        let mut out = vec![expr::i(0); nsp];
        let mut rem = r;
        for i in (0..nsp).rev() {
            out[i] = expr::imod(rem.clone(), win.kernel[i]);
            rem = expr::idiv(rem, win.kernel[i]);
        }
        out
    };
    let mut index = vec![expr::var(0), expr::var(1)];
    let mut inside = expr::konst(DType::Bool, Scalar::B(true));
    for (i, t) in taps(r).into_iter().enumerate() {
        let p = tap(win, i, expr::var(2 + i as u32), t);
        inside = expr::and(
            inside,
            expr::and(
                expr::ge(p.clone(), expr::i(0)),
                expr::lt(p.clone(), expr::i(xs[2 + i])),
            ),
        );
        index.push(expr::clamp(p, 0, xs[2 + i] - 1));
    }
    let body = expr::select(
        inside,
        expr::load(dt, 0, index),
        expr::konst(dt, lowest(dt)),
    );
    let shape = pool_shape(xs, win);
    let values = ctx.reduce(
        ReduceKind::Max,
        vec![ktotal],
        dt,
        shape.clone(),
        vec![x],
        body.clone(),
    )?;
    let arg = ctx.reduce(
        ReduceKind::ArgMax { select_last: false },
        vec![ktotal],
        DType::I64,
        shape.clone(),
        vec![x],
        body,
    )?;
    // Flat input index of the winning tap.
    let a = expr::load(DType::I64, 0, (0..rank).map(expr::var).collect());
    let mut flat = expr::add(expr::mul(expr::var(0), expr::i(xs[1])), expr::var(1));
    let sp: Vec<E> = taps(a)
        .into_iter()
        .enumerate()
        .map(|(i, t)| tap(win, i, expr::var(2 + i as u32), t))
        .collect();
    if storage_order == 0 {
        for (i, p) in sp.into_iter().enumerate() {
            flat = expr::add(expr::mul(flat, expr::i(xs[2 + i])), p);
        }
    } else {
        let mut inner = expr::i(0);
        for (i, p) in sp.into_iter().enumerate().rev() {
            inner = expr::add(expr::mul(inner, expr::i(xs[2 + i])), p);
        }
        let plane: i64 = xs[2..].iter().product();
        flat = expr::add(expr::mul(flat, expr::i(plane)), inner);
    }
    let idx = ctx.map(DType::I64, shape, vec![arg], flat)?;
    Ok(vec![values, idx])
}

/// Per-output-position count of window taps inside `[lo, hi)` per spatial dim, as a constant:
/// the product over dims of each dim's count, in closed form (the taps of a dim inside the
/// range are one run), so a window of any size costs its outputs to count. Beyond
/// `COUNTS_TABLE_MAX` outputs the counts are a reduction over the trimmed window instead.
fn tap_counts(ctx: &mut Ctx, dt: DType, win: &Window, lo: &[i64], hi: &[i64]) -> Result<ValueId> {
    const COUNTS_TABLE_MAX: i64 = 1 << 20;
    let outputs = win
        .out
        .iter()
        .try_fold(1i64, |a, &o| a.checked_mul(o.max(0)));
    if let Some(n) = outputs.filter(|&n| n <= COUNTS_TABLE_MAX) {
        // Per dim, per output position: its taps inside [lo, hi).
        let per_dim: Vec<Vec<i64>> = (0..win.kernel.len())
            .map(|i| {
                (0..win.out[i])
                    .map(|o| {
                        let t = win.taps_inside(i, o, lo[i], hi[i]);
                        (t.end - t.start).max(0)
                    })
                    .collect()
            })
            .collect();
        let mut counts = Vec::with_capacity(n as usize);
        let mut at = vec![0usize; per_dim.len()];
        for _ in 0..n {
            let c: i64 = per_dim.iter().zip(&at).map(|(dim, &o)| dim[o]).product();
            counts.push(Scalar::F(c as f64));
            // Row-major: the last dim fastest.
            for (a, dim) in at.iter_mut().zip(&per_dim).rev() {
                *a += 1;
                if *a < dim.len() {
                    break;
                }
                *a = 0;
            }
        }
        return Ok(ctx.constant(Tensor::from_scalars(dt, win.out.clone(), &counts)));
    }
    let win = &win.trimmed(lo, hi);
    let nsp = win.kernel.len();
    let mut inside = expr::konst(DType::Bool, Scalar::B(true));
    for i in 0..nsp {
        let p = tap(win, i, expr::var(i as u32), expr::var((nsp + i) as u32));
        inside = expr::and(
            inside,
            expr::and(
                expr::ge(p.clone(), expr::i(lo[i])),
                expr::lt(p, expr::i(hi[i])),
            ),
        );
    }
    let body = expr::select(inside, expr::f(dt, 1.0), expr::f(dt, 0.0));
    let shape: Shape = win.out.iter().map(|&d| Dim::Known(d)).collect();
    ctx.reduce(ReduceKind::Sum, win.kernel.clone(), dt, shape, vec![], body)
}

pub fn average_pool(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    Ok(vec![average_pool_of(ctx, x)?])
}

/// AveragePool of the float operand `x` with the node's pool attributes (float32 through
/// the pool kernel; other float types as a window sum over the tap count, float64 exactly
/// rounded once).
pub fn average_pool_of(ctx: &mut Ctx, x: ValueId) -> Result<ValueId> {
    let (x, dt, xs, win) = pool_setup_of(ctx, x, false)?;
    let include_pad = ctx.attr_i_or("count_include_pad", 0)? != 0;
    if let Some(y) = pool_kernel(
        ctx,
        PoolKind::Avg {
            count_include_pad: include_pad,
        },
        x,
        dt,
        &xs,
        &win,
    )? {
        return Ok(y);
    }
    window_mean(ctx, x, dt, dt, &xs, &win, include_pad)
}

/// AveragePool of `x` with the node's pool attributes as float64, each window's sum taken
/// in `x`'s type and divided by its tap count in float64: exactly the float64 mean when the
/// sums are exact in that type (integers of a bounded range in float32, as a quantized
/// pool's centered values are).
pub fn average_pool_f64_of(ctx: &mut Ctx, x: ValueId) -> Result<ValueId> {
    let (x, dt, xs, win) = pool_setup_of(ctx, x, false)?;
    let include_pad = ctx.attr_i_or("count_include_pad", 0)? != 0;
    window_mean(ctx, x, dt, DType::F64, &xs, &win, include_pad)
}

/// AveragePool of the float32 operand `x` through the runtime's pool kernel (None when the
/// kernel does not take the pool), with each output's tap count: float64, shaped as the
/// output's spatial dims. The kernel's mean is within a few float32 ulps of sum / count.
pub fn average_pool_kernel_of(ctx: &mut Ctx, x: ValueId) -> Result<Option<(ValueId, ValueId)>> {
    let (x, dt, xs, win) = pool_setup_of(ctx, x, false)?;
    let include_pad = ctx.attr_i_or("count_include_pad", 0)? != 0;
    let kind = PoolKind::Avg {
        count_include_pad: include_pad,
    };
    let Some(y) = pool_kernel(ctx, kind, x, dt, &xs, &win)? else {
        return Ok(None);
    };
    let (lo, hi) = count_bounds(&xs, &win, include_pad);
    let counts = tap_counts(ctx, DType::F64, &win, &lo, &hi)?;
    Ok(Some((y, counts)))
}

/// The positions a window's taps count within, per spatial dim: the input, or with
/// `include_pad` the padded input.
fn count_bounds(xs: &[i64], win: &Window, include_pad: bool) -> (Vec<i64>, Vec<i64>) {
    let nsp = win.kernel.len();
    if include_pad {
        (
            (0..nsp).map(|i| -win.pads_begin[i]).collect(),
            (0..nsp).map(|i| xs[2 + i] + win.pads_end[i]).collect(),
        )
    } else {
        (vec![0; nsp], xs[2..].to_vec())
    }
}

/// The windows' sums of `x` (type `dt`) over their tap counts, in type `out`.
fn window_mean(
    ctx: &mut Ctx,
    x: ValueId,
    dt: DType,
    out: DType,
    xs: &[i64],
    win: &Window,
    include_pad: bool,
) -> Result<ValueId> {
    let rank = xs.len() as u32;
    let taps = input_taps(win, &xs[2..]);
    let (v, inside) = window_load(dt, &taps, &xs[2..], rank);
    let shape = pool_shape(xs, win);
    let all_inside = win.always_inside(&xs[2..]);
    let body = if all_inside {
        v
    } else {
        expr::select(inside, v, expr::f(dt, 0.0))
    };
    let sum = ctx.reduce(
        ReduceKind::Sum,
        taps.kernel,
        dt,
        shape.clone(),
        vec![x],
        body,
    )?;
    let mut load_sum = build::load_same(dt, 0, rank as usize);
    if out != dt {
        load_sum = expr::cast(load_sum, out);
    }
    if all_inside {
        let n: i64 = win.kernel.iter().product();
        return ctx.map(
            out,
            shape,
            vec![sum],
            expr::binary(BinOp::Div, load_sum, expr::f(out, n as f64)),
        );
    }
    let (lo, hi) = count_bounds(xs, win, include_pad);
    let counts = tap_counts(ctx, out, win, &lo, &hi)?;
    let cl = expr::load(out, 1, (2..rank).map(expr::var).collect());
    ctx.map(
        out,
        shape,
        vec![sum, counts],
        expr::binary(BinOp::Div, load_sum, cl),
    )
}

fn lp(dt: DType, v: E, p: i64) -> E {
    match p {
        1 => expr::unary(UnOp::Abs, v),
        2 => expr::binary(BinOp::Mul, v.clone(), v),
        _ => expr::binary(BinOp::Pow, expr::unary(UnOp::Abs, v), expr::f(dt, p as f64)),
    }
}

fn lp_root(dt: DType, v: E, p: i64) -> E {
    match p {
        1 => v,
        2 => expr::unary(UnOp::Sqrt, v),
        _ => expr::binary(BinOp::Pow, v, expr::f(dt, 1.0 / p as f64)),
    }
}

pub fn lp_pool(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (x, dt, xs, win) = pool_setup(ctx, false)?;
    let p = ctx.attr_i_or("p", 2)?;
    if p < 1 {
        return Err(ctx.err(format!("attribute 'p' must be >= 1, got {p}")));
    }
    if let Some(y) = pool_kernel(ctx, PoolKind::Lp { p }, x, dt, &xs, &win)? {
        return Ok(vec![y]);
    }
    let rank = xs.len() as u32;
    let taps = input_taps(&win, &xs[2..]);
    let (v, inside) = window_load(dt, &taps, &xs[2..], rank);
    let body = expr::select(inside, lp(dt, v, p), expr::f(dt, 0.0));
    let shape = pool_shape(&xs, &win);
    let s = ctx.reduce(
        ReduceKind::Sum,
        taps.kernel,
        dt,
        shape.clone(),
        vec![x],
        body,
    )?;
    Ok(vec![ctx.map(
        dt,
        shape,
        vec![s],
        lp_root(dt, build::load_same(dt, 0, rank as usize), p),
    )?])
}

fn global_pool(ctx: &mut Ctx, kind: ReduceKind, p: Option<i64>) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let dt = build::expect_types(ctx, x, "input", FLOATS)?;
    let rank = ctx.rank(x);
    if rank < 3 {
        return Err(ctx.err(format!("input must have rank >= 3, got {rank}")));
    }
    let axes: Vec<usize> = (2..rank).collect();
    let xs = ctx.known_shape(x)?;
    let n: i64 = xs[2..].iter().product();
    let r = build::reduce(ctx, x, kind, &axes, true, |v| match p {
        Some(p) => lp(dt, v, p),
        None => v,
    })?;
    let shape = ctx.shape(r);
    let body = build::load_same(dt, 0, rank);
    let body = match (kind, p) {
        (_, Some(p)) => lp_root(dt, body, p),
        (ReduceKind::Sum, None) => expr::binary(BinOp::Div, body, expr::f(dt, n as f64)),
        _ => return Ok(vec![r]),
    };
    Ok(vec![ctx.map(dt, shape, vec![r], body)?])
}

pub fn global_average_pool(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    global_pool(ctx, ReduceKind::Sum, None)
}
pub fn global_max_pool(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    global_pool(ctx, ReduceKind::Max, None)
}
pub fn global_lp_pool(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let p = ctx.attr_i_or("p", 2)?;
    global_pool(ctx, ReduceKind::Sum, Some(p))
}
