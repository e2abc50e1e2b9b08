//! Convolution, pooling and the softmax family.

use crate::error::Result;
use crate::frontend::build::{self, FLOATS};
use crate::frontend::ctx::Ctx;
use crate::ir::dim::{Dim, Shape};
use crate::ir::expr::{self, BinOp, E, UnOp};
use crate::ir::graph::{ConvOp, PoolKind, PoolOp, ReduceKind};
use crate::ir::interp::lowest;
use crate::ir::{DType, Scalar, TypeInfo, ValueId};

/// A sliding window over the spatial dims: the geometry shared by Conv and the pools.
#[derive(Debug, Clone)]
pub struct Window {
    pub kernel: Vec<i64>,
    pub strides: Vec<i64>,
    pub dilations: Vec<i64>,
    pub pads_begin: Vec<i64>,
    pub pads_end: Vec<i64>,
    pub out: Vec<i64>,
}

impl Window {
    /// Whether every window position lies inside the unpadded input.
    pub fn always_inside(&self, input: &[i64]) -> bool {
        (0..self.kernel.len()).all(|i| {
            self.pads_begin[i] == 0
                && (self.out[i] - 1) * self.strides[i] + (self.kernel[i] - 1) * self.dilations[i]
                    < input[i]
        })
    }
}

/// An `n`-value window attribute (strides, dilations, pads, output padding or shape),
/// each value within ±`MAX_DIM` so window arithmetic (sums of a few, products of two)
/// cannot overflow.
fn list_attr(ctx: &Ctx, name: &str, n: usize, default: i64) -> Result<Vec<i64>> {
    match ctx.attr_ints(name) {
        None => Ok(vec![default; n]),
        Some(v) if v.len() == n => {
            build::extents(ctx, &format!("attribute '{name}'"), &v)?;
            Ok(v)
        }
        Some(v) => Err(ctx.err(format!(
            "attribute '{name}' has {} values, expected {n}",
            v.len()
        ))),
    }
}

pub fn window(ctx: &Ctx, input: &[i64], kernel: &[i64], ceil_mode: bool) -> Result<Window> {
    let n = kernel.len();
    build::extents(ctx, "the kernel shape", kernel)?;
    let strides = list_attr(ctx, "strides", n, 1)?;
    let dilations = list_attr(ctx, "dilations", n, 1)?;
    if strides
        .iter()
        .chain(&dilations)
        .chain(kernel)
        .any(|&v| v < 1)
    {
        return Err(ctx.err(format!(
            "kernel {kernel:?}, strides {strides:?} and dilations {dilations:?} must be positive"
        )));
    }
    let auto_pad = ctx.attr_s_or("auto_pad", "NOTSET")?;
    let mut pads_begin = vec![0; n];
    let mut pads_end = vec![0; n];
    let mut out = vec![0; n];
    for i in 0..n {
        let dk = (kernel[i] - 1) * dilations[i] + 1;
        match auto_pad.as_str() {
            "NOTSET" | "" => {
                let pads = list_attr(ctx, "pads", 2 * n, 0)?;
                if pads.iter().any(|&p| p < 0) {
                    return Err(ctx.err(format!("attribute 'pads' {pads:?} must be non-negative")));
                }
                pads_begin[i] = pads[i];
                pads_end[i] = pads[n + i];
                let span = input[i] + pads_begin[i] + pads_end[i] - dk;
                // With ceil_mode one window may reach past the padded input
                // (ceil(span / stride + 1) = 1 for -stride < span < 0): its taps outside count
                // as padding that is not counted, as in onnxruntime and the reference.
                if span < 0 && !(ceil_mode && span > -strides[i]) {
                    return Err(ctx.err(format!(
                        "window of {dk} does not fit spatial dim {i} of size {} with pads {}+{}",
                        input[i], pads_begin[i], pads_end[i]
                    )));
                }
                out[i] = if ceil_mode {
                    let mut o = (span + strides[i] - 1) / strides[i] + 1;
                    if (o - 1) * strides[i] >= input[i] + pads_begin[i] {
                        o -= 1;
                    }
                    o
                } else {
                    span / strides[i] + 1
                };
            }
            "VALID" => {
                if input[i] < dk {
                    return Err(ctx.err(format!(
                        "window of {dk} does not fit spatial dim {i} of size {}",
                        input[i]
                    )));
                }
                out[i] = if ceil_mode {
                    (input[i] - dk + strides[i]) / strides[i]
                } else {
                    (input[i] - dk) / strides[i] + 1
                };
            }
            "SAME_UPPER" | "SAME_LOWER" => {
                out[i] = (input[i] + strides[i] - 1) / strides[i];
                let total = ((out[i] - 1) * strides[i] + dk - input[i]).max(0);
                let small = total / 2;
                if auto_pad == "SAME_UPPER" {
                    pads_begin[i] = small;
                    pads_end[i] = total - small;
                } else {
                    pads_begin[i] = total - small;
                    pads_end[i] = small;
                }
            }
            other => {
                return Err(ctx.err(format!("attribute 'auto_pad' has unknown value '{other}'")));
            }
        }
    }
    Ok(Window {
        kernel: kernel.to_vec(),
        strides,
        dilations,
        pads_begin,
        pads_end,
        out,
    })
}

pub fn conv(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (x, w) = (ctx.input(0)?, ctx.input(1)?);
    let b = ctx.opt_input(2);
    if let Some(y) = crate::frontend::ops::qdq::qdq_conv(ctx, x, w, b)? {
        return Ok(vec![y]);
    }
    Ok(vec![conv_values(ctx, x, w, b, false)?])
}

/// A convolution of the given operands with the node's attributes (Conv, and the integer
/// convolutions, which run it on dequantized operands).
/// `exact`: the operands are integer-valued and bounded so that float32 sums are exact
/// (`ConvOp::exact`).
pub fn conv_values(
    ctx: &mut Ctx,
    x: ValueId,
    w: ValueId,
    b: Option<ValueId>,
    exact: bool,
) -> Result<ValueId> {
    let dt = build::expect_types(ctx, x, "input X", FLOATS)?;
    if ctx.dtype(w) != dt {
        return Err(ctx.err(format!("W is {} but X is {dt}", ctx.dtype(w))));
    }
    let xs = ctx.known_shape(x)?;
    let ws = ctx.known_shape(w)?;
    if xs.len() < 3 || ws.len() != xs.len() {
        return Err(ctx.err(format!(
            "X {xs:?} and W {ws:?} must have the same rank >= 3"
        )));
    }
    let group = ctx.attr_i_or("group", 1)?;
    if group < 1 || xs[1] % group != 0 || ws[0] % group != 0 || ws[1] * group != xs[1] {
        return Err(ctx.err(format!(
            "channels do not match: X has {} channels, W is {ws:?}, group {group} (need W[1] * group == C and group | M)",
            xs[1]
        )));
    }
    let kernel = ws[2..].to_vec();
    if let Some(k) = ctx.attr_ints("kernel_shape")
        && k != kernel
    {
        return Err(ctx.err(format!(
            "attribute kernel_shape {k:?} disagrees with W's spatial dims {kernel:?}"
        )));
    }
    let win = window(ctx, &xs[2..], &kernel, false)?;
    if let Some(b) = b {
        let bs = ctx.known_shape(b)?;
        if bs != [ws[0]] {
            return Err(ctx.err(format!("bias B has shape {bs:?}, expected [{}]", ws[0])));
        }
    }
    let mut shape: Shape = vec![Dim::Known(xs[0]), Dim::Known(ws[0])];
    shape.extend(win.out.iter().map(|&d| Dim::Known(d)));
    let op = ConvOp {
        group,
        strides: win.strides,
        dilations: win.dilations,
        pads_begin: win.pads_begin,
        pads_end: win.pads_end,
        exact,
    };
    let mut inputs = vec![x, w];
    inputs.extend(b);
    ctx.conv(op, inputs, TypeInfo::new(dt, shape))
}

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
    if matches!(dt, DType::U8 | DType::I8)
        && xs.len() == 4
        && xs.iter().chain(&win.out).all(|&d| d > 0)
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
    let (v, inside) = window_load(dt, &win, &xs[2..], rank);
    let body = if win.always_inside(&xs[2..]) {
        v
    } else {
        expr::select(inside, v, expr::konst(dt, lowest(dt)))
    };
    let shape = pool_shape(&xs, &win);
    Ok(vec![ctx.reduce(
        ReduceKind::Max,
        win.kernel.clone(),
        dt,
        shape,
        vec![x],
        body,
    )?])
}

/// MaxPool with the Indices output: arg-max over the flattened window, then the flat input
/// index (row-major, or column-major spatial order with `storage_order=1`).
fn max_pool_with_indices(
    ctx: &mut Ctx,
    x: ValueId,
    dt: DType,
    xs: &[i64],
    win: &Window,
) -> Result<Vec<ValueId>> {
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

/// Per-output-position count of window taps inside `[lo, hi)` per spatial dim, as a constant.
fn tap_counts(ctx: &mut Ctx, dt: DType, win: &Window, lo: &[i64], hi: &[i64]) -> Result<ValueId> {
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
    let (v, inside) = window_load(dt, win, &xs[2..], rank);
    let shape = pool_shape(xs, win);
    let all_inside = win.always_inside(&xs[2..]);
    let body = if all_inside {
        v
    } else {
        expr::select(inside, v, expr::f(dt, 0.0))
    };
    let sum = ctx.reduce(
        ReduceKind::Sum,
        win.kernel.clone(),
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
    let (v, inside) = window_load(dt, &win, &xs[2..], rank);
    let body = expr::select(inside, lp(dt, v, p), expr::f(dt, 0.0));
    let shape = pool_shape(&xs, &win);
    let s = ctx.reduce(
        ReduceKind::Sum,
        win.kernel.clone(),
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

#[derive(Copy, Clone, PartialEq)]
enum SoftmaxKind {
    Softmax,
    LogSoftmax,
    Hardmax,
}

/// Softmax family. Before opset 13 the input is coerced to 2-D at `axis` (default 1);
/// from 13 on it normalizes along the single `axis` (default -1).
fn softmax_family(ctx: &mut Ctx, kind: SoftmaxKind) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let dt = build::expect_types(ctx, x, "input", FLOATS)?;
    let shape = ctx.shape(x);
    let rank = shape.len();
    if ctx.opset < 13 {
        let axis = build::axis(ctx, ctx.attr_i_or("axis", 1)?, rank.max(1))?;
        let outer = crate::ir::dim::num_elements(&shape[..axis]);
        let inner = crate::ir::dim::num_elements(&shape[axis..]);
        let x2 = ctx.reshape(x, vec![outer, inner])?;
        let y2 = softmax_along(ctx, x2, 1, kind, dt)?;
        return Ok(vec![ctx.reshape(y2, shape)?]);
    }
    let axis = build::axis(ctx, ctx.attr_i_or("axis", -1)?, rank)?;
    Ok(vec![softmax_along(ctx, x, axis, kind, dt)?])
}

fn softmax_along(
    ctx: &mut Ctx,
    x: ValueId,
    axis: usize,
    kind: SoftmaxKind,
    dt: DType,
) -> Result<ValueId> {
    let rank = ctx.rank(x);
    let shape = ctx.shape(x);
    if kind == SoftmaxKind::Hardmax {
        let am = build::reduce(
            ctx,
            x,
            ReduceKind::ArgMax { select_last: false },
            &[axis],
            true,
            |v| v,
        )?;
        let mut idx: Vec<E> = (0..rank as u32).map(expr::var).collect();
        idx[axis] = expr::i(0);
        let hit = expr::binary(
            BinOp::Eq,
            expr::load(DType::I64, 0, idx),
            expr::var(axis as u32),
        );
        return ctx.map(
            dt,
            shape,
            vec![am],
            expr::select(hit, expr::f(dt, 1.0), expr::f(dt, 0.0)),
        );
    }
    // Float32 along the last axis (every opset's common case: attention scores, class
    // scores): one runtime kernel call makes the max/exp/sum/scale passes per row while it
    // is in L1.
    if kind == SoftmaxKind::Softmax
        && dt == DType::F32
        && axis + 1 == rank
        && crate::ir::dim::known_dims(&shape).is_some()
    {
        return ctx.add(
            crate::ir::Op::kernel(crate::kernels::Softmax { scale: 1.0 }),
            vec![x],
            TypeInfo::new(dt, shape),
        );
    }
    let m = build::reduce(ctx, x, ReduceKind::Max, &[axis], true, |v| v)?;
    let mut at_axis0: Vec<E> = (0..rank as u32).map(expr::var).collect();
    at_axis0[axis] = expr::i(0);
    let shifted = |xv: E| expr::binary(BinOp::Sub, xv, expr::load(dt, 1, at_axis0.clone()));
    let xl = build::load_same(dt, 0, rank);
    if kind == SoftmaxKind::Softmax {
        // e = exp(x - max) once (the fuser keeps a map with exp that feeds a reduction
        // materialized), s = sum(e), y = e / s: one exponential per element, not two.
        // In 16-bit types x - max is rounded before the exponential, as the reference's
        // numpy computes it.
        let e = ctx.map(
            dt,
            shape.clone(),
            vec![x, m],
            expr::unary(UnOp::Exp, expr::round_to_storage(shifted(xl))),
        )?;
        let s = build::reduce(ctx, e, ReduceKind::Sum, &[axis], true, |v| v)?;
        let body = expr::binary(
            BinOp::Div,
            build::load_same(dt, 0, rank),
            expr::load(dt, 1, at_axis0.clone()),
        );
        return ctx.map(dt, shape, vec![e, s], body);
    }
    // s = sum(exp(x - max)) along axis, computed from x and m.
    let s = {
        let mut index: Vec<E> = Vec::new();
        let mut mi: Vec<E> = Vec::new();
        for k in 0..rank {
            if k == axis {
                index.push(expr::var(rank as u32));
                mi.push(expr::i(0));
            } else {
                index.push(expr::var(k as u32));
                mi.push(expr::var(k as u32));
            }
        }
        let mut out_shape = shape.clone();
        out_shape[axis] = Dim::Known(1);
        let n = ctx.known_shape(x)?[axis];
        let body = expr::unary(
            UnOp::Exp,
            expr::binary(BinOp::Sub, expr::load(dt, 0, index), expr::load(dt, 1, mi)),
        );
        ctx.reduce(ReduceKind::Sum, vec![n], dt, out_shape, vec![x, m], body)?
    };
    let sl = expr::load(dt, 2, at_axis0.clone());
    let body = match kind {
        SoftmaxKind::Softmax => expr::binary(BinOp::Div, expr::unary(UnOp::Exp, shifted(xl)), sl),
        SoftmaxKind::LogSoftmax => {
            expr::binary(BinOp::Sub, shifted(xl), expr::unary(UnOp::Log, sl))
        }
        SoftmaxKind::Hardmax => unreachable!("handled above"),
    };
    ctx.map(dt, shape, vec![x, m, s], body)
}

pub fn softmax(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    softmax_family(ctx, SoftmaxKind::Softmax)
}

/// Float32 softmax of `x` with the `axis` semantics of Softmax at `opset` (before 13: the
/// input coerced to 2-D at `axis`; from 13: along `axis`); for ops built on it
/// (com.microsoft's QLinearSoftmax).
pub fn softmax_f32(ctx: &mut Ctx, x: ValueId, axis: i64, opset: i64) -> Result<ValueId> {
    let shape = ctx.shape(x);
    let rank = shape.len();
    if opset < 13 {
        let axis = build::axis(ctx, axis, rank.max(1))?;
        let outer = crate::ir::dim::num_elements(&shape[..axis]);
        let inner = crate::ir::dim::num_elements(&shape[axis..]);
        let x2 = ctx.reshape(x, vec![outer, inner])?;
        let y2 = softmax_along(ctx, x2, 1, SoftmaxKind::Softmax, DType::F32)?;
        return ctx.reshape(y2, shape);
    }
    let axis = build::axis(ctx, axis, rank)?;
    softmax_along(ctx, x, axis, SoftmaxKind::Softmax, DType::F32)
}
/// Softmax of `x` along its last axis, computed in `x`'s own float type (FlexAttention's
/// probabilities).
pub fn softmax_last(ctx: &mut Ctx, x: ValueId) -> Result<ValueId> {
    let dt = ctx.dtype(x);
    let rank = ctx.rank(x);
    if rank == 0 {
        return Err(ctx.err("softmax of a scalar"));
    }
    softmax_along(ctx, x, rank - 1, SoftmaxKind::Softmax, dt)
}

pub fn log_softmax(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    softmax_family(ctx, SoftmaxKind::LogSoftmax)
}
pub fn hardmax(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    softmax_family(ctx, SoftmaxKind::Hardmax)
}

pub fn conv_transpose(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (x, w) = (ctx.input(0)?, ctx.input(1)?);
    let b = ctx.opt_input(2);
    let dt = build::expect_types(ctx, x, "input X", FLOATS)?;
    let xs = ctx.known_shape(x)?;
    let ws = ctx.known_shape(w)?;
    if xs.len() < 3 || ws.len() != xs.len() {
        return Err(ctx.err(format!(
            "X {xs:?} and W {ws:?} must have the same rank >= 3"
        )));
    }
    let nsp = xs.len() - 2;
    let group = ctx.attr_i_or("group", 1)?;
    if group < 1 || xs[1] != ws[0] || xs[1] % group != 0 {
        return Err(ctx.err(format!(
            "X has {} channels but W is {ws:?} with group {group}",
            xs[1]
        )));
    }
    let mg = ws[1];
    let m = mg * group;
    let kernel = ws[2..].to_vec();
    let strides = list_attr(ctx, "strides", nsp, 1)?;
    let dil = list_attr(ctx, "dilations", nsp, 1)?;
    let out_pad = list_attr(ctx, "output_padding", nsp, 0)?;
    let auto_pad = ctx.attr_s_or("auto_pad", "NOTSET")?;
    let mut pb = vec![0i64; nsp];
    let mut out = vec![0i64; nsp];
    let explicit_out = ctx.attr_ints("output_shape");
    if let Some(o) = &explicit_out {
        build::extents(ctx, "attribute 'output_shape'", o)?;
    }
    build::extents(ctx, "W's kernel dims", &kernel)?;
    for i in 0..nsp {
        let dk = (kernel[i] - 1) * dil[i] + 1;
        let full = strides[i] * (xs[2 + i] - 1) + out_pad[i] + dk;
        let target = match &explicit_out {
            Some(o) => Some(
                *o.get(o.len().wrapping_sub(nsp) + i)
                    .ok_or_else(|| ctx.err("output_shape has too few values"))?,
            ),
            None if auto_pad.starts_with("SAME") => Some(xs[2 + i] * strides[i]),
            None => None,
        };
        match target {
            Some(t) => {
                let total = full - t;
                let half = total.div_euclid(2);
                pb[i] = if auto_pad == "SAME_UPPER" {
                    half
                } else {
                    total - half
                };
                out[i] = t;
            }
            None => {
                let pads = if auto_pad == "VALID" {
                    vec![0; 2 * nsp]
                } else {
                    list_attr(ctx, "pads", 2 * nsp, 0)?
                };
                pb[i] = pads[i];
                out[i] = full - pads[i] - pads[nsp + i];
            }
        }
        if out[i] < 0 {
            return Err(ctx.err("the output size would be negative"));
        }
    }
    // Float32, 1-D to 3-D: a GEMM and a col2im in the runtime (weights packed at compile
    // time when constant).
    let positive = |v: &[i64]| v.iter().all(|&d| d >= 1);
    let u = |v: &[i64]| v.iter().map(|&d| d as usize).collect::<Vec<_>>();
    let kernel_geom = (dt == DType::F32
        && ctx.dtype(w) == DType::F32
        && positive(&xs)
        && positive(&kernel)
        && positive(&strides)
        && positive(&dil)
        && positive(&out)
        && mg >= 1
        && b.is_none_or(|b| {
            ctx.dtype(b) == DType::F32 && ctx.known_shape(b).ok() == Some(vec![m])
        }))
    .then(|| {
        onnxc_runtime::conv::transpose::ConvTransposeGeometry::from_dims(
            xs[0] as usize,
            xs[1] as usize,
            m as usize,
            group as usize,
            &u(&xs[2..]),
            &u(&kernel),
            &u(&out),
            &u(&strides),
            &u(&dil),
            &pb,
        )
    })
    .flatten();
    if let Some(geom) = kernel_geom {
        let mut shape: Shape = vec![Dim::Known(xs[0]), Dim::Known(m)];
        shape.extend(out.iter().map(|&d| Dim::Known(d)));
        let mut inputs = vec![x, w];
        inputs.extend(b);
        return Ok(vec![ctx.add(
            crate::ir::Op::kernel(crate::kernels::ConvTranspose(geom)),
            inputs,
            TypeInfo::new(dt, shape),
        )?]);
    }
    // y[n, m, o…] = b[m] + Σ_{c in group, k…} x[n, c, i…] · w[c, m mod mg, k…], where o = i·s + k·d − pb.
    let rank = xs.len();
    let cg = xs[1] / group;
    let gm = expr::idiv(expr::var(1), mg);
    let c = expr::add(expr::mul(gm, expr::i(cg)), expr::var(rank as u32));
    let mut xi = vec![expr::var(0), c.clone()];
    let mut wi = vec![c, expr::imod(expr::var(1), mg)];
    let mut ok = expr::konst(DType::Bool, Scalar::B(true));
    for i in 0..nsp {
        let k = expr::var((rank + 1 + i) as u32);
        let num = expr::sub(
            expr::add(expr::var(2 + i as u32), expr::i(pb[i])),
            expr::mul(k.clone(), expr::i(dil[i])),
        );
        let q = expr::idiv(expr::clamp(num.clone(), 0, i64::MAX / 4), strides[i]);
        ok = expr::and(ok, expr::ge(num.clone(), expr::i(0)));
        if strides[i] > 1 {
            ok = expr::and(
                ok,
                expr::binary(BinOp::Eq, expr::imod(num, strides[i]), expr::i(0)),
            );
        }
        ok = expr::and(ok, expr::lt(q.clone(), expr::i(xs[2 + i])));
        xi.push(expr::clamp(q, 0, xs[2 + i] - 1));
        wi.push(k);
    }
    let prod = expr::binary(BinOp::Mul, expr::load(dt, 0, xi), expr::load(dt, 1, wi));
    let body = expr::select(ok, prod, expr::f(dt, 0.0));
    let mut shape: Shape = vec![Dim::Known(xs[0]), Dim::Known(m)];
    shape.extend(out.iter().map(|&d| Dim::Known(d)));
    let mut extents = vec![cg];
    extents.extend_from_slice(&kernel);
    let y = ctx.reduce(
        ReduceKind::Sum,
        extents,
        dt,
        shape.clone(),
        vec![x, w],
        body,
    )?;
    match b {
        None => Ok(vec![y]),
        Some(b) => {
            let body = expr::binary(
                BinOp::Add,
                build::load_same(dt, 0, rank),
                expr::load(dt, 1, vec![expr::var(1)]),
            );
            Ok(vec![ctx.map(dt, shape, vec![y, b], body)?])
        }
    }
}
