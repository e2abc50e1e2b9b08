//! Resize (opsets 10, 11, 13, 18, 19) and Upsample (opsets 1, 7, 9, 10).
//!
//! Interpolation is separable: along each resized axis, output position `y` reads a few input
//! positions (its taps) with weights that depend only on `y`, the axis lengths, the scale, the
//! roi and the attributes. The taps follow onnx's reference implementation
//! (`onnx/reference/ops/op_resize.py`: coordinate transformation in f64 in its operation
//! order, neighbor choice with edge clamping, `exclude_outside`, antialiasing filters,
//! extrapolation of `tf_crop_and_resize`). They are built as small maps producing tap tables
//! (`[n_out]` input indices for the nearest modes; `[n_out, taps]` indices and weights
//! otherwise) over the scales/sizes/roi operands, so constant operands (what exporters write)
//! fold them into constants at compile time, and run-time operands compute them when the
//! model runs. Linear and cubic weights are the filter evaluated at each tap's distance from
//! the source coordinate (the reference's closed forms, equal to an ulp), so a window wider
//! than the filter's support (a run-time antialias scale, bounded from below by the declared
//! output size) computes the same result.
//!
//! The tables then drive, in order of preference:
//! - `kernels::Resize` (runtime kernels `onnxc_resize_f32`, `onnxc_resize_8`): float32,
//!   uint8 or int8, at most the last two axes resized, tables computed by the kernel from a
//!   rule or constant (for 8-bit elements, constant gathers only; the kernel sums in float64
//!   as the maps below do);
//! - a gather `Map` (nearest modes): per-axis index a table lookup, or `y / k`, `y · k` when
//!   the table is exactly that;
//! - one `Map` per resized axis, in axis order as the reference does:
//!   `Σ_t w[y][t] · x[…, idx[y][t], …]`, computed in f32 (f64 for f64 and integer inputs),
//!   the last one cast back (integers rounded half to even and saturated).
//!
//! Opsets before 11 (Resize-10, Upsample) have no coordinate attributes; they follow
//! onnxruntime: asymmetric coordinates, nearest rounding down when upsampling and up when
//! downsampling an axis.
//!
//! The input shape must be known. With run-time scales or sizes the output shape is the
//! declared one, and the run fails with `ONNXC_ERR_SHAPE` when the values imply another.

use crate::error::Result;
use crate::frontend::build;
use crate::frontend::ctx::Ctx;
use crate::ir::dim::{Dim, Shape, check_size};
use crate::ir::expr::{self, BinOp, E};
use crate::ir::{DType, Scalar, Tensor, ValueId};

/// Largest output length along one resized axis, and most entries of one axis's tap
/// tables (16M: at most 128 MB of indices, built at compile time for constant scales).
const MAX_AXIS_LEN: i64 = 1 << 24;

/// Widest filter (taps per output) an antialiased downscale may read.
const MAX_TAPS: usize = 256;

mod taps;

use onnxc_runtime::resize::{Rule, Scale};
use taps::{Axis, Coord, Mode, Nearest, Params, bin, c64, nearest_index, tap_count, weighted_taps};

fn parse_params(ctx: &Ctx, upsample: bool) -> Result<Params> {
    let legacy = upsample || ctx.opset < 11;
    let mode = ctx.attr_s_or("mode", "nearest")?;
    let mode = match mode.as_str() {
        "nearest" if legacy => Mode::Nearest(Nearest::Simple),
        "nearest" => Mode::Nearest(match ctx.attr_s_or("nearest_mode", "round_prefer_floor")?.as_str() {
            "round_prefer_floor" => Nearest::RoundPreferFloor,
            "round_prefer_ceil" => Nearest::RoundPreferCeil,
            "floor" => Nearest::Floor,
            "ceil" => Nearest::Ceil,
            other => return Err(ctx.err(format!(
                "unknown nearest_mode '{other}' (expected round_prefer_floor, round_prefer_ceil, floor or ceil)"
            ))),
        }),
        "linear" => Mode::Linear,
        // Upsample-1 spells it "bilinear".
        "bilinear" if upsample && ctx.opset < 7 => Mode::Linear,
        "cubic" if !legacy => Mode::Cubic(ctx.attr_f_or("cubic_coeff_a", -0.75)?),
        other => {
            return Err(ctx.err(format!(
                "unknown mode '{other}' (expected {})",
                if legacy { "nearest or linear" } else { "nearest, linear or cubic" }
            )));
        }
    };
    let coord = if legacy {
        Coord::Asymmetric
    } else {
        match ctx
            .attr_s_or("coordinate_transformation_mode", "half_pixel")?
            .as_str()
        {
            "half_pixel" => Coord::HalfPixel,
            "half_pixel_symmetric" if ctx.opset >= 19 => Coord::HalfPixelSymmetric,
            "pytorch_half_pixel" => Coord::PytorchHalfPixel,
            "align_corners" => Coord::AlignCorners,
            "asymmetric" => Coord::Asymmetric,
            "tf_crop_and_resize" => Coord::TfCropAndResize,
            // Resize-11 and -12 list it (tf2onnx writes it for TensorFlow's nearest resize
            // with half-pixel centers); Resize-13 dropped it.
            "tf_half_pixel_for_nn" if ctx.opset < 13 => Coord::TfHalfPixelForNn,
            other => {
                return Err(ctx.err(format!(
                    "unknown coordinate_transformation_mode '{other}' for opset {}",
                    ctx.opset
                )));
            }
        }
    };
    let antialias = !legacy && ctx.opset >= 18 && ctx.attr_i_or("antialias", 0)? != 0;
    if antialias && matches!(mode, Mode::Nearest(_)) {
        return Err(ctx.err("antialias applies to linear and cubic modes, not nearest"));
    }
    Ok(Params {
        mode,
        coord,
        exclude_outside: !legacy && ctx.attr_i_or("exclude_outside", 0)? != 0,
        antialias,
    })
}

pub fn upsample(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    resize_impl(ctx, true)
}

pub fn resize(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    resize_impl(ctx, false)
}

/// Where the output size comes from: constant scales or sizes (one per listed axis), or
/// run-time ones (the output shape is then the declared one, checked at run time).
enum Spec {
    Scales(Vec<f64>),
    RtScales(ValueId),
    Sizes(Vec<i64>),
    RtSizes(ValueId),
}

/// An optional 1-D input: absent, an empty constant (a placeholder), a constant, or a
/// run-time value.
enum Opt {
    Absent,
    Const(Tensor),
    Runtime(ValueId),
}

fn opt_operand(ctx: &Ctx, i: usize) -> Opt {
    match ctx.opt_input(i) {
        None => Opt::Absent,
        Some(v) => match ctx.konst(v) {
            Some(t) if t.is_empty() => Opt::Absent,
            Some(t) => Opt::Const(t),
            None if ctx.shape(v).iter().any(|d| d.known() == Some(0)) => Opt::Absent,
            None => Opt::Runtime(v),
        },
    }
}

fn check_scales(ctx: &Ctx, s: &[f64]) -> Result<()> {
    match s.iter().find(|v| !(v.is_finite() && **v > 0.0)) {
        Some(v) => Err(ctx.err(format!("scales must be positive and finite, got {v}"))),
        None => Ok(()),
    }
}

fn resize_impl(ctx: &mut Ctx, upsample: bool) -> Result<Vec<ValueId>> {
    use BinOp::*;
    use onnxc_runtime::abi::ONNXC_ERR_SHAPE;
    let x = ctx.input(0)?;
    let dims = ctx.known_shape(x)?;
    let r = dims.len();
    let dt = ctx.dtype(x);
    let p = parse_params(ctx, upsample)?;
    if dt == DType::Bool && !matches!(p.mode, Mode::Nearest(_)) {
        return Err(ctx.err("linear and cubic modes interpolate numbers; the input is bool"));
    }
    let legacy = upsample || ctx.opset < 11;

    // Which axes are listed, and what gives their output size.
    let mut axes: Vec<usize> = (0..r).collect();
    let spec = if upsample && ctx.opset < 7 {
        if r != 4 {
            return Err(ctx.err(format!("Upsample-1 takes a 4-D input, got shape {dims:?}")));
        }
        let get = |n: &str| {
            ctx.attr_f(n)?
                .ok_or_else(|| ctx.err(format!("attribute '{n}' is required")))
        };
        axes = vec![2, 3];
        Spec::Scales(vec![get("height_scale")?, get("width_scale")?])
    } else if upsample && ctx.opset < 9 {
        let s = ctx
            .attr_floats("scales")
            .ok_or_else(|| ctx.err("attribute 'scales' is required"))?;
        Spec::Scales(s.iter().map(|&v| v as f64).collect())
    } else if legacy {
        match opt_operand(ctx, 1) {
            Opt::Const(t) => Spec::Scales(t.to_f64s()),
            Opt::Runtime(v) => Spec::RtScales(v),
            Opt::Absent => return Err(ctx.err("input 'scales' is required")),
        }
    } else {
        if ctx.opset >= 18
            && let Some(a) = ctx.attr_ints("axes")
        {
            axes = crate::frontend::build::axes(ctx, &a, r)?;
            let mut seen = axes.clone();
            seen.sort_unstable();
            seen.dedup();
            if seen.len() != axes.len() {
                return Err(ctx.err(format!("axes {a:?} repeat an axis")));
            }
        }
        match (opt_operand(ctx, 2), opt_operand(ctx, 3)) {
            (Opt::Absent, Opt::Absent) => {
                return Err(ctx.err("neither scales nor sizes is given; give exactly one"));
            }
            (Opt::Absent, Opt::Const(t)) => {
                if !t.dtype.is_int() {
                    return Err(ctx.err(format!("sizes must be int64, got {}", t.dtype)));
                }
                Spec::Sizes(t.to_i64s())
            }
            (Opt::Absent, Opt::Runtime(v)) => Spec::RtSizes(v),
            (Opt::Const(t), Opt::Absent) => Spec::Scales(t.to_f64s()),
            (Opt::Runtime(v), Opt::Absent) => Spec::RtScales(v),
            _ => return Err(ctx.err("scales and sizes are both given; give exactly one")),
        }
    };
    let listed = match &spec {
        Spec::Scales(s) => s.len() as i64,
        Spec::Sizes(s) => s.len() as i64,
        Spec::RtScales(v) | Spec::RtSizes(v) => crate::ir::dim::num_elements(&ctx.shape(*v))
            .known()
            .ok_or_else(|| ctx.err("scales/sizes must have a known length"))?,
    };
    if listed != axes.len() as i64 {
        return Err(ctx.err(format!(
            "scales/sizes have {listed} values for {} axes (input shape {dims:?})",
            axes.len()
        )));
    }
    let policy = if !legacy && ctx.opset >= 18 {
        ctx.attr_s_or("keep_aspect_ratio_policy", "stretch")?
    } else {
        "stretch".to_string()
    };
    let keep: Option<BinOp> = match policy.as_str() {
        "stretch" => None,
        "not_larger" => Some(Min),
        "not_smaller" => Some(Max),
        other => {
            return Err(ctx.err(format!(
                "unknown keep_aspect_ratio_policy '{other}' (expected stretch, not_larger or not_smaller)"
            )));
        }
    };

    // Output dims and per-axis scales (f64 expressions; constants unless given at run time),
    // and where the kernel that computes its taps finds each constant one (`rule_scales`).
    let mut out = dims.clone();
    let mut scales: Vec<E> = vec![c64(1.0); r];
    let mut rule_scales: Vec<Option<Scale>> = vec![None; r];
    let mut table_inputs: Vec<ValueId> = Vec::new();
    let mut runtime_checks: Vec<E> = Vec::new();
    let declared = |ctx: &Ctx, why: &str| -> Result<Vec<i64>> {
        let o = ctx.declared_shape(0, why)?;
        if o.len() != r {
            return Err(ctx.err(format!(
                "declared output shape {o:?} has not the input's rank {r}"
            )));
        }
        for a in 0..r {
            if !axes.contains(&a) && o[a] != dims[a] {
                return Err(ctx.err(format!(
                    "declared output shape {o:?} changes axis {a}, which is not resized"
                )));
            }
            if dims[a] == 0 && o[a] != 0 {
                return Err(ctx.err(format!(
                    "axis {a} is empty and cannot be resized to {}",
                    o[a]
                )));
            }
        }
        Ok(o)
    };
    let too_long = |ctx: &Ctx, a: usize, v: f64| -> Result<()> {
        if v > MAX_AXIS_LEN as f64 {
            return Err(ctx.err(format!(
                "axis {a} would be {v} long, more than onnxc resizes ({MAX_AXIS_LEN})"
            )));
        }
        Ok(())
    };
    match &spec {
        Spec::Scales(s) => {
            check_scales(ctx, s)?;
            if upsample && s.iter().any(|&v| v < 1.0) {
                return Err(ctx.err(format!("Upsample scales must be >= 1, got {s:?}")));
            }
            for (&a, &v) in axes.iter().zip(s) {
                let o = (v * dims[a] as f64).floor();
                too_long(ctx, a, o)?;
                out[a] = o as i64;
                scales[a] = c64(v);
                rule_scales[a] = Some(Scale::Given(v));
            }
        }
        Spec::Sizes(s) => {
            if let Some(v) = s.iter().find(|&&v| !(0..=MAX_AXIS_LEN).contains(&v)) {
                return Err(ctx.err(format!(
                    "sizes must be between 0 and {MAX_AXIS_LEN}, got {v}"
                )));
            }
            let mut sv = vec![1.0f64; r];
            for (&a, &v) in axes.iter().zip(s) {
                if dims[a] == 0 && v != 0 {
                    return Err(ctx.err(format!("axis {a} is empty and cannot be resized to {v}")));
                }
                sv[a] = if dims[a] == 0 {
                    1.0
                } else {
                    v as f64 / dims[a] as f64
                };
                out[a] = v;
            }
            if let Some(op) = keep {
                let k = axes
                    .iter()
                    .map(|&a| sv[a])
                    .reduce(|p, q| if op == Min { p.min(q) } else { p.max(q) });
                let k = k.unwrap_or(1.0);
                for &a in &axes {
                    sv[a] = k;
                    // Round half up, as the reference does.
                    let o = (k * dims[a] as f64 + 0.5).floor();
                    too_long(ctx, a, o)?;
                    out[a] = o as i64;
                }
            }
            for &a in &axes {
                scales[a] = c64(sv[a]);
                // Without a policy the scale is `n_out / n_in`, as the kernel computes it.
                rule_scales[a] = Some(match keep {
                    None if dims[a] > 0 => Scale::Sizes,
                    _ => Scale::Given(sv[a]),
                });
            }
        }
        Spec::RtScales(v) => {
            out = declared(ctx, "the output size (from run-time scales)")?;
            let sdt = ctx.dtype(*v);
            if !sdt.is_float() {
                return Err(ctx.err(format!("scales must be a float tensor, got {sdt}")));
            }
            table_inputs.push(*v);
            for (j, &a) in axes.iter().enumerate() {
                let s = expr::cast(expr::load(sdt, 0, vec![expr::i(j as i64)]), DType::F64);
                let o = expr::unary(expr::UnOp::Floor, bin(Mul, &s, &c64(dims[a] as f64)));
                runtime_checks.push(bin(Eq, &o, &c64(out[a] as f64)));
                scales[a] = s;
            }
        }
        Spec::RtSizes(v) => {
            out = declared(ctx, "the output size (from run-time sizes)")?;
            if !ctx.dtype(*v).is_int() {
                return Err(ctx.err(format!("sizes must be int64, got {}", ctx.dtype(*v))));
            }
            let size = |j: usize| {
                expr::cast(
                    expr::load(ctx.dtype(*v), 0, vec![expr::i(j as i64)]),
                    DType::I64,
                )
            };
            match keep {
                None => {
                    for (j, &a) in axes.iter().enumerate() {
                        runtime_checks.push(expr::binary(Eq, size(j), expr::i(out[a])));
                        scales[a] = c64(out[a] as f64 / dims[a].max(1) as f64);
                    }
                }
                Some(op) => {
                    table_inputs.push(*v);
                    let k = axes
                        .iter()
                        .enumerate()
                        .map(|(j, &a)| {
                            bin(
                                Div,
                                &expr::cast(size(j), DType::F64),
                                &c64(dims[a].max(1) as f64),
                            )
                        })
                        .reduce(|p, q| bin(op, &p, &q))
                        .expect("at least one axis");
                    for &a in &axes {
                        let o = expr::unary(
                            expr::UnOp::Floor,
                            bin(Add, &bin(Mul, &k, &c64(dims[a] as f64)), &c64(0.5)),
                        );
                        runtime_checks.push(bin(Eq, &o, &c64(out[a] as f64)));
                        scales[a] = k.clone();
                    }
                }
            }
            if runtime_checks.len() == axes.len() && keep.is_none() {
                // Checked against the sizes input itself.
                let cond = runtime_checks
                    .drain(..)
                    .reduce(|p, q| bin(And, &p, &q))
                    .expect("at least one axis");
                ctx.assert_expr(vec![], vec![*v], cond, ONNXC_ERR_SHAPE)?;
            }
        }
    }
    if !runtime_checks.is_empty() {
        let cond = runtime_checks
            .into_iter()
            .reduce(|p, q| bin(And, &p, &q))
            .expect("checks");
        ctx.assert_expr(vec![], table_inputs.clone(), cond, ONNXC_ERR_SHAPE)?;
    }
    check_size(&out).map_err(|m| ctx.err(m))?;
    for (a, (&n, &m)) in dims.iter().zip(&out).enumerate() {
        if n == 0 && m > 0 {
            return Err(ctx.err(format!("axis {a} is empty and cannot be resized to {m}")));
        }
    }

    // roi, for tf_crop_and_resize: start and end per listed axis, and whether a constant
    // roi takes an axis whole (from 0 to 1).
    let mut rois: Vec<Option<(E, E)>> = vec![None; r];
    let mut whole = vec![true; r];
    if p.coord == Coord::TfCropAndResize {
        let rv = match opt_operand(ctx, 1) {
            Opt::Absent => {
                return Err(ctx
                    .err("coordinate_transformation_mode tf_crop_and_resize needs the roi input"));
            }
            Opt::Const(_) | Opt::Runtime(_) => ctx.input(1)?,
        };
        let n = crate::ir::dim::num_elements(&ctx.shape(rv)).known();
        if n != Some(2 * axes.len() as i64) {
            return Err(ctx.err(format!(
                "roi must hold {} values (starts and ends of {} axes), its shape is {}",
                2 * axes.len(),
                axes.len(),
                crate::ir::dim::fmt_shape(&ctx.shape(rv))
            )));
        }
        let rdt = ctx.dtype(rv);
        if !rdt.is_float() {
            return Err(ctx.err(format!("roi must be a float tensor, got {rdt}")));
        }
        let cdt = if rdt == DType::F64 {
            DType::F64
        } else {
            DType::F32
        };
        let op = table_inputs.len() as u32;
        table_inputs.push(rv);
        let rank = ctx.rank(rv);
        let at = |k: usize| {
            let mut ix = vec![expr::i(0); rank.saturating_sub(1)];
            ix.push(expr::i(k as i64));
            expr::cast(expr::load(rdt, op, ix), cdt)
        };
        let values = ctx.konst(rv).map(|t| t.to_f64s());
        for (j, &a) in axes.iter().enumerate() {
            whole[a] = values.as_ref().is_some_and(|v| {
                let (s, e) = (v[j], v[axes.len() + j]);
                (e - s - 1.0).abs() <= 1e-9 && s.abs() <= 1e-9
            });
            let (s, e) = (at(j), at(axes.len() + j));
            let d = expr::cast(bin(Sub, &e, &s), DType::F64);
            let start = expr::cast(
                bin(Mul, &s, &expr::f(cdt, (dims[a] - 1) as f64)),
                DType::F64,
            );
            rois[a] = Some((d, start));
        }
    }

    // Axes that change: listed ones, except those the reference skips as identities (a
    // constant scale of 1 keeping the length, and the whole roi).
    let resized: Vec<usize> = axes
        .iter()
        .copied()
        .filter(|&a| {
            let unit = matches!(scales[a].as_const(), Some(c) if (c.as_f64() - 1.0).abs() <= 1e-9);
            let full_roi = rois[a].is_none() || whole[a];
            !(unit && out[a] == dims[a] && full_roi)
        })
        .collect();
    if resized.is_empty() {
        return Ok(vec![x]);
    }
    let shape: Shape = out.iter().map(|&d| Dim::Known(d)).collect();
    if out.contains(&0) {
        return Ok(vec![ctx.constant(Tensor::new(dt, out.clone(), Vec::new()))]);
    }
    let extrap = if legacy {
        0.0
    } else {
        ctx.attr_f_or("extrapolation_value", 0.0)?
    };
    let plan: Vec<Axis> = resized
        .iter()
        .map(|&a| Axis {
            axis: a,
            n_in: dims[a],
            n_out: out[a],
            scale: scales[a].clone(),
            roi: rois[a].clone(),
        })
        .collect();

    // Tap tables per resized axis (constants when scales and roi are).
    let cdt = if dt == DType::F64 || dt.is_int() {
        DType::F64
    } else {
        DType::F32
    };
    let mut tables = Vec::with_capacity(plan.len());
    for ax in &plan {
        tables.push(match p.mode {
            Mode::Nearest(mode) => {
                let body = nearest_index(&p, mode, ax);
                let shape = vec![Dim::Known(ax.n_out)];
                Table {
                    index: ctx.map(DType::I64, shape, table_inputs.clone(), body)?,
                    weight: None,
                    taps: 1,
                }
            }
            _ => {
                // The footprint of a constant scale, or the widest a run-time one can need
                // (scale >= n_out / n_in, and the footprint narrows as the scale grows).
                let s_min = match ax.scale.as_const() {
                    Some(c) => c.as_f64(),
                    None => ax.n_out as f64 / ax.n_in as f64,
                };
                let nt = tap_count(&p, s_min);
                if nt == 0 || nt > MAX_TAPS {
                    return Err(ctx.unsupported(format!(
                        "antialiased downscaling of axis {} by {s_min:.6} reads {nt} inputs per output; onnxc reads at most {MAX_TAPS}",
                        ax.axis
                    )));
                }
                if ax.n_out * nt as i64 > MAX_AXIS_LEN {
                    return Err(ctx.unsupported(format!(
                        "axis {} resized to {} with {nt} taps each needs tables of more than {MAX_AXIS_LEN} entries",
                        ax.axis, ax.n_out
                    )));
                }
                let (ib, wb) = weighted_taps(&p, ax, nt);
                let shape = vec![Dim::Known(ax.n_out), Dim::Known(nt as i64)];
                Table {
                    index: ctx.map(DType::I64, shape.clone(), table_inputs.clone(), ib)?,
                    weight: Some(ctx.map(cdt, shape, table_inputs.clone(), expr::cast(wb, cdt))?),
                    taps: nt,
                }
            }
        });
    }
    let rules: Vec<Option<Rule>> = plan
        .iter()
        .map(|ax| rule(&p, rule_scales[ax.axis]?))
        .collect();
    if let Some(g) = kernel_geometry(ctx, &dims, dt, &plan, &tables, &rules, extrap) {
        let ty = crate::ir::TypeInfo::new(dt, shape);
        return Ok(vec![ctx.add(
            crate::ir::Op::kernel(crate::kernels::Resize {
                geometry: g,
                dtype: dt,
            }),
            vec![x],
            ty,
        )?]);
    }

    if matches!(p.mode, Mode::Nearest(_)) {
        let mut inputs = vec![x];
        let mut index: Vec<E> = (0..r as u32).map(expr::var).collect();
        let (mut extrapolated, mut dropped): (Option<E>, Option<E>) = (None, None);
        let any = |acc: &mut Option<E>, c: E| {
            *acc = Some(match acc.take() {
                Some(prev) => bin(Or, &prev, &c),
                None => c,
            })
        };
        for (ax, t) in plan.iter().zip(&tables) {
            let y = expr::var(ax.axis as u32);
            let konst = ctx.konst(t.index).map(|c| c.to_i64s());
            let (marks_extrap, marks_drop) = match &konst {
                Some(c) => (c.contains(&-1), c.contains(&-2)),
                None => (p.coord == Coord::TfCropAndResize, p.exclude_outside),
            };
            index[ax.axis] = match konst.as_deref().and_then(|c| affine_index(c, y.clone())) {
                Some(ix) if !marks_extrap && !marks_drop => ix,
                _ => {
                    inputs.push(t.index);
                    let t = expr::load(DType::I64, inputs.len() as u32 - 1, vec![y]);
                    if marks_extrap {
                        any(&mut extrapolated, bin(Eq, &t, &expr::i(-1)));
                    }
                    if marks_drop {
                        any(&mut dropped, bin(Eq, &t, &expr::i(-2)));
                    }
                    expr::clamp(t, 0, ax.n_in - 1)
                }
            };
        }
        let mut body = expr::load(dt, 0, index);
        if let Some(d) = dropped {
            body = expr::select(d, expr::konst(dt, Scalar::zero(dt)), body);
        }
        if let Some(e) = extrapolated {
            body = expr::select(e, expr::konst(dt, storable(extrap, dt)), body);
        }
        return Ok(vec![ctx.map(dt, shape, inputs, body)?]);
    }

    // Linear and cubic: one weighted map per axis, in axis order as the reference does.
    let mut cur = x;
    let mut cur_dims = dims.clone();
    for (k, (ax, t)) in plan.iter().zip(&tables).enumerate() {
        let last = k + 1 == plan.len();
        let y = expr::var(ax.axis as u32);
        let cur_dt = ctx.dtype(cur);
        let mut sum: Option<E> = None;
        for j in 0..t.taps {
            let at = vec![y.clone(), expr::i(j as i64)];
            let i = expr::clamp(expr::load(DType::I64, 1, at.clone()), 0, ax.n_in - 1);
            let mut index: Vec<E> = (0..r as u32).map(expr::var).collect();
            index[ax.axis] = i;
            let term = bin(
                Mul,
                &expr::load(cdt, 2, at),
                &expr::cast(expr::load(cur_dt, 0, index), cdt),
            );
            sum = Some(match sum {
                Some(s) => bin(Add, &s, &term),
                None => term,
            });
        }
        let mut body = sum.expect("at least one tap");
        if ax.roi.is_some() {
            let first = expr::load(DType::I64, 1, vec![y, expr::i(0)]);
            body = expr::select(expr::lt(first, expr::i(0)), expr::f(cdt, extrap), body);
        }
        let odt = if last { dt } else { cdt };
        if last && dt != cdt {
            if dt.is_int() {
                // Rounded half to even and saturated, as the reference's saturate_cast.
                body = expr::unary(expr::UnOp::Round, body);
                if let Some((lo, hi)) = build::int_range(dt) {
                    body = bin(Max, &bin(Min, &body, &c64(hi)), &c64(lo));
                }
            }
            body = expr::cast(body, dt);
        }
        cur_dims[ax.axis] = ax.n_out;
        let s: Shape = cur_dims.iter().map(|&d| Dim::Known(d)).collect();
        let weight = t.weight.expect("weighted taps");
        cur = ctx.map(odt, s, vec![cur, t.index, weight], body)?;
    }
    Ok(vec![cur])
}

/// One resized axis's tap tables: input indices (`[n_out]` for the nearest modes, `[n_out,
/// taps]` otherwise) and, but for the nearest modes, weights.
struct Table {
    index: ValueId,
    weight: Option<ValueId>,
    taps: usize,
}

/// How the resize kernel computes an axis's taps with constant scale `scale`
/// (`onnxc_runtime::resize::Rule`), when it can: not for `tf_crop_and_resize` (its roi) nor
/// for a nearest mode with `exclude_outside` (an output the kernel would zero).
fn rule(p: &Params, scale: Scale) -> Option<Rule> {
    use onnxc_runtime::resize as rt;
    let filter = match p.mode {
        Mode::Nearest(_) if p.exclude_outside => return None,
        Mode::Nearest(n) => rt::Filter::Nearest(match n {
            Nearest::RoundPreferFloor => rt::Nearest::RoundPreferFloor,
            Nearest::RoundPreferCeil => rt::Nearest::RoundPreferCeil,
            Nearest::Floor => rt::Nearest::Floor,
            Nearest::Ceil => rt::Nearest::Ceil,
            Nearest::Simple => rt::Nearest::Simple,
        }),
        Mode::Linear => rt::Filter::Linear,
        Mode::Cubic(a) => rt::Filter::Cubic(a),
    };
    let coord = match p.coord {
        Coord::HalfPixel => rt::Coord::HalfPixel,
        Coord::HalfPixelSymmetric => rt::Coord::HalfPixelSymmetric,
        Coord::PytorchHalfPixel => rt::Coord::PytorchHalfPixel,
        Coord::AlignCorners => rt::Coord::AlignCorners,
        Coord::Asymmetric => rt::Coord::Asymmetric,
        Coord::TfHalfPixelForNn => rt::Coord::TfHalfPixelForNn,
        Coord::TfCropAndResize => return None,
    };
    Some(Rule {
        filter,
        coord,
        exclude_outside: p.exclude_outside,
        antialias: p.antialias,
        scale,
    })
}

/// The runtime kernel's geometry (`onnxc_resize_f32`, `onnxc_resize_8`) for a float32,
/// uint8 or int8 resize of at most the last two axes whose tables the kernel computes
/// (`rules`: what a model lowered at several values of a run-time dim needs, as the
/// tables' lengths follow it) or are constants (for 8-bit elements, gathers only); or
/// `None` (then maps compute it).
#[allow(clippy::too_many_arguments)]
fn kernel_geometry(
    ctx: &Ctx,
    dims: &[i64],
    dt: DType,
    plan: &[Axis],
    tables: &[Table],
    rules: &[Option<Rule>],
    extrap: f64,
) -> Option<onnxc_runtime::resize::ResizeGeometry> {
    use onnxc_runtime::resize::{AxisTaps, ResizeGeometry};
    let r = dims.len();
    if !matches!(dt, DType::F32 | DType::U8 | DType::I8)
        || r < 2
        || plan.iter().any(|a| a.axis + 2 < r)
    {
        return None;
    }
    let mut axes = [
        AxisTaps::identity(dims[r - 2]),
        AxisTaps::identity(dims[r - 1]),
    ];
    for ((ax, t), rule) in plan.iter().zip(tables).zip(rules) {
        if let Some(rule) = rule
            && let Some(taps) = AxisTaps::computed(ax.n_in, ax.n_out, *rule)
        {
            axes[ax.axis + 2 - r] = taps;
            continue;
        }
        // The 8-bit kernel takes given tables of nearest taps only: its sums must round as
        // the maps' float64 ones, and given weights are float32.
        if dt != DType::F32 && t.weight.is_some() {
            return None;
        }
        let index = ctx.konst(t.index)?.to_i64s();
        // -2: a nearest tap `exclude_outside` dropped (the output is 0); maps handle it.
        if index.contains(&-2) {
            return None;
        }
        let weight: Vec<f32> = match t.weight {
            Some(w) => ctx.konst(w)?.to_f64s().iter().map(|&v| v as f32).collect(),
            None => vec![1.0; index.len()],
        };
        // Extrapolated outputs are -1 in every tap (weighted tables mark them so already).
        axes[ax.axis + 2 - r] = AxisTaps::new(ax.n_in, ax.n_out, t.taps as i64, index, weight)?;
    }
    let [rows, cols] = axes;
    Some(ResizeGeometry {
        planes: dims[..r - 2].iter().product(),
        rows,
        cols,
        extrapolation: extrap as f32,
    })
}

/// `v` as an element of `dt`: integers rounded half to even and saturated, as the
/// reference's saturate_cast.
fn storable(v: f64, dt: DType) -> Scalar {
    if dt.is_int() {
        let v = v.round_ties_even();
        let v = match build::int_range(dt) {
            Some((lo, hi)) => v.clamp(lo, hi),
            None => v,
        };
        return Scalar::F(v).cast(dt);
    }
    Scalar::F(v).cast(dt)
}

/// `y / k` or `y · k` when the index table is exactly that, so the gather needs no table.
fn affine_index(table: &[i64], y: E) -> Option<E> {
    let m = table.len() as i64;
    if m >= 2 && table[1] > 1 {
        let k = table[1];
        if (0..m).all(|i| table[i as usize] == i * k) {
            return Some(expr::mul(y, expr::i(k)));
        }
    }
    for k in 1..=m.min(64) {
        if (0..m).all(|i| table[i as usize] == i / k) {
            return Some(expr::idiv(y, k));
        }
        if table.get(k as usize).is_some_and(|&v| v != 0) {
            break;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn affine_tables_become_index_arithmetic() {
        let ix = affine_index(&[0, 0, 1, 1, 2, 2], expr::var(0)).unwrap();
        assert_eq!(expr::display(&ix), "div(v0, 2)");
        let ix = affine_index(&[0, 3, 6], expr::var(0)).unwrap();
        assert_eq!(expr::display(&ix), "mul(v0, 3)");
        assert!(affine_index(&[0, 1, 1, 2], expr::var(0)).is_none());
        assert!(affine_index(&[0, 0, 1, 1, 1], expr::var(0)).is_none());
    }

    /// The tables the kernel computes by a rule (`onnxc_runtime::resize::Rule::fill`) are the
    /// table maps' constants, bit for bit, over every mode, coordinate transformation and
    /// filter option, for up- and downscales and scales given or from sizes.
    #[test]
    fn computed_taps_are_the_table_maps() {
        use crate::ir::interp::eval_map;
        let nearest = [
            Nearest::RoundPreferFloor,
            Nearest::RoundPreferCeil,
            Nearest::Floor,
            Nearest::Ceil,
            Nearest::Simple,
        ];
        let coords = [
            Coord::HalfPixel,
            Coord::HalfPixelSymmetric,
            Coord::PytorchHalfPixel,
            Coord::AlignCorners,
            Coord::Asymmetric,
            Coord::TfHalfPixelForNn,
        ];
        let mut modes: Vec<(Mode, bool, bool)> = nearest
            .iter()
            .map(|&n| (Mode::Nearest(n), false, false))
            .collect();
        for mode in [Mode::Linear, Mode::Cubic(-0.75), Mode::Cubic(-0.5)] {
            for (exclude_outside, antialias) in
                [(false, false), (true, false), (false, true), (true, true)]
            {
                modes.push((mode, exclude_outside, antialias));
            }
        }
        // (n_in, n_out, scale given; None: from the sizes)
        let sizes: &[(i64, i64, Option<f64>)] = &[
            (1, 1, None),
            (1, 3, None),
            (4, 8, Some(2.0)),
            (5, 10, None),
            (7, 3, None),
            (20, 9, Some(0.45)),
            (6, 15, Some(2.6)),
            (10, 3, Some(1.0 / 3.0)),
            (13, 29, None),
            (31, 7, Some(0.25)),
            (3, 8, Some(8.0 / 3.0)),
            (40, 80, Some(2.0)),
        ];
        let mut checked = 0;
        for &(mode, exclude_outside, antialias) in &modes {
            for &coord in &coords {
                for &(n_in, n_out, given) in sizes {
                    let p = Params {
                        mode,
                        coord,
                        exclude_outside,
                        antialias,
                    };
                    let s = given.unwrap_or(n_out as f64 / n_in as f64);
                    let scale = match given {
                        Some(s) => Scale::Given(s),
                        None => Scale::Sizes,
                    };
                    let Some(rule) = rule(&p, scale) else {
                        continue;
                    };
                    let ax = Axis {
                        axis: 0,
                        n_in,
                        n_out,
                        scale: c64(s),
                        roi: None,
                    };
                    let taps = rule.taps(n_in as usize, n_out as usize);
                    let (ib, wb) = match mode {
                        Mode::Nearest(n) => (nearest_index(&p, n, &ax), None),
                        _ => {
                            assert_eq!(taps, tap_count(&p, s), "{p:?} at {s}");
                            let (i, w) = weighted_taps(&p, &ax, taps);
                            (i, Some(expr::cast(w, DType::F32)))
                        }
                    };
                    let shape = match wb {
                        None => vec![n_out],
                        Some(_) => vec![n_out, taps as i64],
                    };
                    let want_index = eval_map(&ib, &[], DType::I64, &shape).unwrap().to_i64s();
                    let want_weight: Vec<f32> = match &wb {
                        None => vec![1.0; want_index.len()],
                        Some(w) => (eval_map(w, &[], DType::F32, &shape).unwrap().to_f64s())
                            .iter()
                            .map(|&v| v as f32)
                            .collect(),
                    };
                    let len = n_out as usize * taps;
                    let (mut index, mut weight) = (vec![-9; len], vec![f32::NAN; len]);
                    rule.fill(n_in as usize, n_out as usize, &mut index, &mut weight);
                    let what = format!("{p:?} {n_in} -> {n_out} at {s}");
                    assert_eq!(index, want_index, "{what}");
                    let bits = |w: &[f32]| w.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&weight), bits(&want_weight), "{what}");
                    // The 8-bit kernel's float64 weights are the maps' float64 ones.
                    if let Mode::Linear | Mode::Cubic(_) = mode {
                        let (_, w) = weighted_taps(&p, &ax, taps);
                        let want = eval_map(&w, &[], DType::F64, &shape).unwrap().to_f64s();
                        let mut wide = vec![f64::NAN; len];
                        rule.fill(n_in as usize, n_out as usize, &mut index, &mut wide);
                        let bits = |w: &[f64]| w.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                        assert_eq!(bits(&wide), bits(&want), "{what} (float64)");
                    }
                    checked += 1;
                }
            }
        }
        assert!(checked > 500, "{checked}");
    }

    #[test]
    fn tap_counts_follow_the_reference_footprints() {
        let p = |mode, antialias| Params {
            mode,
            coord: Coord::HalfPixel,
            exclude_outside: false,
            antialias,
        };
        assert_eq!(tap_count(&p(Mode::Linear, false), 0.25), 2);
        assert_eq!(tap_count(&p(Mode::Cubic(-0.75), false), 0.25), 4);
        assert_eq!(tap_count(&p(Mode::Linear, true), 0.25), 8);
        assert_eq!(tap_count(&p(Mode::Linear, true), 3.0), 2);
        assert_eq!(tap_count(&p(Mode::Cubic(-0.5), true), 0.6), 8);
    }
}
