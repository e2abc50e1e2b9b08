//! Linear quantization: QuantizeLinear, DequantizeLinear (opsets 10 to 25) and
//! DynamicQuantizeLinear, as maps (the arithmetic of onnx's reference evaluator,
//! `onnx/reference/ops/op_{de,}quantize_linear.py`). The QOperator products are in
//! `qlinear.rs`.
//!
//! Scale and zero point apply per tensor (a scalar or one element), per axis (1-D along
//! `axis`) or per block (opset 21: the input's shape with `axis` divided into blocks of
//! `block_size`). Quantized types are the 2-, 4-, 8- and 16-bit integers (and int32 input
//! to DequantizeLinear), rounded and saturated to their range, and float8 and float4, the
//! quotient cast to them (saturating unless `saturate=0`; float4 always saturates).

use crate::error::Result;
use crate::frontend::build;
use crate::frontend::ctx::Ctx;
use crate::ir::expr::{self, BinOp, E, UnOp};
use crate::ir::graph::ReduceKind;
use crate::ir::{DType, ValueId};

/// The integer types QuantizeLinear may produce here (2 to 16 bits), with their ranges.
pub(super) fn quant_range(dt: DType) -> Option<(f64, f64)> {
    build::int_range(dt).filter(|_| dt.size() <= 2)
}

/// The types quantized values may have: `quant_range`'s, float8 and float4.
fn quantized_type(dt: DType) -> bool {
    quant_range(dt).is_some() || dt.is_lowp_float()
}

/// The index of a parameter of shape `ps` that is per tensor (one element) or, with
/// `along = (index, length)`, a 1-D vector of that length; `None` when it is neither.
pub(super) fn scalar_or_vector(ps: &[i64], along: Option<(E, i64)>) -> Option<Vec<E>> {
    if ps.iter().product::<i64>() == 1 {
        return Some(vec![expr::i(0); ps.len()]);
    }
    match along {
        Some((v, len)) if ps == [len] => Some(vec![v]),
        _ => None,
    }
}

/// How a scale (or zero point) operand is indexed for each element of `x` (vars 0..r).
fn param_index(
    ctx: &Ctx,
    what: &str,
    p: ValueId,
    x_dims: &[i64],
    axis: i64,
    block: i64,
) -> Result<Vec<E>> {
    let ps = ctx.known_shape(p)?;
    let r = x_dims.len();
    if let Some(index) = scalar_or_vector(&ps, None) {
        return Ok(index);
    }
    let a = build::axis(ctx, axis, r)?;
    if block <= 0 {
        return scalar_or_vector(&ps, Some((expr::var(a as u32), x_dims[a]))).ok_or_else(|| {
            ctx.err(format!(
                "{what} has shape {ps:?}; per-axis quantization along axis {a} of input {x_dims:?} needs [{}] (or a scalar)",
                x_dims[a]
            ))
        });
    }
    // Blocked: the input's shape with axis `a` divided into blocks of `block` elements.
    let blocks = (x_dims[a] + block - 1) / block;
    let same = ps.len() == r
        && (0..r).all(|k| {
            if k == a {
                ps[k] == blocks
            } else {
                ps[k] == x_dims[k]
            }
        });
    if !same {
        return Err(ctx.err(format!(
            "{what} has shape {ps:?}; blocks of {block} along axis {a} of input {x_dims:?} need {blocks} there and the input's other dims"
        )));
    }
    Ok((0..r)
        .map(|k| {
            let v = expr::var(k as u32);
            if k == a { expr::idiv(v, block) } else { v }
        })
        .collect())
}

fn check_storable(ctx: &Ctx, dt: DType, what: &str) -> Result<()> {
    if !quantized_type(dt) && dt != DType::I32 {
        return Err(ctx.unsupported(format!(
            "{what} of type {dt}: onnxc quantizes to and from 2- to 16-bit integers, float8 \
             and float4 (and int32 for DequantizeLinear)"
        )));
    }
    Ok(())
}

fn opt_block_size(ctx: &Ctx) -> Result<i64> {
    let b = if ctx.opset >= 21 {
        ctx.attr_i_or("block_size", 0)?
    } else {
        0
    };
    if b < 0 {
        return Err(ctx.err(format!("block_size must be positive, got {b}")));
    }
    Ok(b)
}

pub fn quantize_linear(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (x, scale) = (ctx.input(0)?, ctx.input(1)?);
    let zp = ctx.opt_input(2);
    let dims = ctx.known_shape(x)?;
    let xdt = build::expect_types(
        ctx,
        x,
        "x",
        &[DType::F32, DType::F16, DType::BF16, DType::I32],
    )?;
    let sdt = build::expect_types(
        ctx,
        scale,
        "y_scale",
        &[DType::F32, DType::F16, DType::BF16, DType::I32],
    )?;
    // 0 (the default) means the zero point's type.
    let declared = match ctx.attr_i("output_dtype")? {
        Some(code) if ctx.opset >= 21 && code != 0 => ctx.attr_dtype("output_dtype")?,
        _ => None,
    };
    let odt = match (zp, declared) {
        (Some(z), Some(d)) if ctx.dtype(z) != d => {
            return Err(ctx.err(format!(
                "output_dtype {d} differs from the zero point's type {}",
                ctx.dtype(z)
            )));
        }
        (Some(z), _) => ctx.dtype(z),
        (None, Some(d)) => d,
        (None, None) => DType::U8,
    };
    if !quantized_type(odt) {
        return Err(ctx.unsupported(format!(
            "quantizing to {odt}: onnxc quantizes to 2- to 16-bit integers, float8 and float4"
        )));
    }
    let axis = ctx.attr_i_or("axis", 1)?;
    let block = opt_block_size(ctx)?;
    let precision = ctx
        .attr_i("precision")?
        .filter(|&p| ctx.opset >= 23 && p != 0);
    if block == 0
        && precision.is_none()
        && odt.is_int()
        && let Some(y) = crate::frontend::ops::qdq::quantize_noted(ctx, x, scale, zp, odt)?
    {
        return Ok(vec![y]);
    }
    // The division's precision: the `precision` attribute (opset 23), else the scale's type
    // (numpy's promotion for an int32 input: float64).
    let pdt = match ctx.attr_i("precision")? {
        Some(code) if ctx.opset >= 23 && code != 0 => i32::try_from(code)
            .ok()
            .and_then(DType::from_onnx)
            .filter(|d| d.is_float())
            .ok_or_else(|| ctx.err(format!("precision {code} is not a float type")))?,
        _ if xdt == DType::I32 || sdt == DType::I32 => DType::F64,
        _ => sdt,
    };
    let cdt = if pdt == DType::F64 {
        DType::F64
    } else {
        DType::F32
    };
    let mut inputs = vec![x, scale];
    let si = param_index(ctx, "y_scale", scale, &dims, axis, block)?;
    let q = expr::binary(
        BinOp::Div,
        expr::cast(expr::load(xdt, 0, vars(dims.len())), cdt),
        expr::cast(expr::load(sdt, 1, si), cdt),
    );
    // A half-precision division rounds to its type before rounding to an integer.
    let q = if cdt != pdt {
        expr::cast(expr::cast(q, pdt), cdt)
    } else {
        q
    };
    // Float8 and float4: the quotient plus the zero point (0 for float8, as the spec requires),
    // cast to the type.
    if odt.is_lowp_float() {
        let mut v = q;
        if let Some(z) = zp {
            let zi = param_index(ctx, "y_zero_point", z, &dims, axis, block)?;
            inputs.push(z);
            v = expr::binary(BinOp::Add, v, expr::cast(expr::load(odt, 2, zi), cdt));
        }
        let saturate = ctx.attr_i_or("saturate", 1)? != 0;
        let shape = ctx.shape(x);
        return Ok(vec![ctx.map(
            odt,
            shape,
            inputs,
            build::cast_expr(v, odt, saturate),
        )?]);
    }
    let Some((lo, hi)) = quant_range(odt) else {
        return Err(ctx.unsupported(format!("quantizing to {odt}")));
    };
    // The rounded quotient plus the zero point, saturated: in float32 when the division is
    // (the zero point, below 2^16, adds exactly to every rounded quotient below 2^24 in
    // magnitude, and one beyond saturates either way), in float64 otherwise.
    let adt = if cdt == DType::F32 {
        DType::F32
    } else {
        DType::F64
    };
    let mut v = expr::cast(expr::unary(UnOp::Round, q), adt);
    if let Some(z) = zp {
        let zi = param_index(ctx, "y_zero_point", z, &dims, axis, block)?;
        inputs.push(z);
        v = expr::binary(BinOp::Add, v, expr::cast(expr::load(odt, 2, zi), adt));
    }
    let v = expr::binary(
        BinOp::Max,
        expr::binary(BinOp::Min, v, expr::f(adt, hi)),
        expr::f(adt, lo),
    );
    let shape = ctx.shape(x);
    Ok(vec![ctx.map(odt, shape, inputs, expr::cast(v, odt))?])
}

pub fn dequantize_linear(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (x, scale) = (ctx.input(0)?, ctx.input(1)?);
    let zp = ctx.opt_input(2);
    let dims = ctx.known_shape(x)?;
    let xdt = ctx.dtype(x);
    check_storable(ctx, xdt, "x")?;
    let sdt = build::expect_types(
        ctx,
        scale,
        "x_scale",
        &[DType::F32, DType::F16, DType::BF16],
    )?;
    let odt = match ctx.attr_i("output_dtype")? {
        Some(code) if ctx.opset >= 23 && code != 0 => i32::try_from(code)
            .ok()
            .and_then(DType::from_onnx)
            .filter(|d| matches!(d, DType::F32 | DType::F16 | DType::BF16))
            .ok_or_else(|| {
                ctx.err(format!(
                    "output_dtype {code} is not float, float16 or bfloat16"
                ))
            })?,
        _ => sdt,
    };
    let axis = ctx.attr_i_or("axis", 1)?;
    let block = opt_block_size(ctx)?;
    let mut inputs = vec![x, scale];
    let mut dx = expr::cast(expr::load(xdt, 0, vars(dims.len())), DType::F32);
    if let Some(z) = zp {
        if ctx.dtype(z) != xdt {
            return Err(ctx.err(format!(
                "x_zero_point is {} but x is {xdt}; they must have the same type",
                ctx.dtype(z)
            )));
        }
        let zi = param_index(ctx, "x_zero_point", z, &dims, axis, block)?;
        inputs.push(z);
        dx = expr::binary(
            BinOp::Sub,
            dx,
            expr::cast(expr::load(xdt, 2, zi), DType::F32),
        );
    }
    let si = param_index(ctx, "x_scale", scale, &dims, axis, block)?;
    let y = expr::binary(
        BinOp::Mul,
        dx,
        expr::cast(expr::load(sdt, 1, si), DType::F32),
    );
    let shape = ctx.shape(x);
    let y = ctx.map(odt, shape, inputs, expr::cast(y, odt))?;
    // The integer kernels and the QDQ rewrites (`qdq`) take integer quantized values.
    if block == 0 && xdt.is_int() {
        let axis = if axis < 0 {
            axis + dims.len() as i64
        } else {
            axis
        };
        crate::frontend::ops::qdq::note_dequantized(ctx, y, x, scale, zp, axis);
    }
    Ok(vec![y])
}

/// DynamicQuantizeLinear: uint8 quantization with a scale and zero point from the input's
/// range (widened to include 0), all in float32 as the reference computes them.
pub fn dynamic_quantize_linear(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    Ok(dynamic_quantize(ctx, x)?.to_vec())
}

/// DynamicQuantizeLinear of `x`: `[y (uint8), scale (float32 scalar), zero point (uint8
/// scalar)]`.
pub(crate) fn dynamic_quantize(ctx: &mut Ctx, x: ValueId) -> Result<[ValueId; 3]> {
    build::expect_types(ctx, x, "x", &[DType::F32])?;
    let dims = ctx.known_shape(x)?;
    let r = dims.len();
    let f = |v: f64| expr::f(DType::F32, v);
    let all = expr::load(DType::F32, 0, (0..r as u32).map(expr::var).collect());
    let mut range = Vec::new();
    for kind in [ReduceKind::Max, ReduceKind::Min] {
        range.push(ctx.reduce(kind, dims.clone(), DType::F32, vec![], vec![x], all.clone())?);
    }
    // scale = (max(0, max x) − min(0, min x)) / 255, or 1/255 for an all-zero range.
    let hi = expr::binary(BinOp::Max, f(0.0), expr::load(DType::F32, 0, vec![]));
    let lo = expr::binary(BinOp::Min, f(0.0), expr::load(DType::F32, 1, vec![]));
    let span = expr::select(
        expr::binary(BinOp::Eq, hi.clone(), lo.clone()),
        f(1.0),
        expr::binary(BinOp::Sub, hi, lo.clone()),
    );
    let scale_e = expr::binary(BinOp::Div, span, f(255.0));
    let scale = ctx.map(DType::F32, vec![], range.clone(), scale_e)?;
    // zero point = round(clamp(0 − min / scale, 0, 255)).
    let zp_f = expr::binary(
        BinOp::Sub,
        f(0.0),
        expr::binary(BinOp::Div, lo, expr::load(DType::F32, 2, vec![])),
    );
    let zp_f = expr::binary(BinOp::Max, f(0.0), expr::binary(BinOp::Min, f(255.0), zp_f));
    let zp_e = expr::unary(UnOp::Round, zp_f);
    let zpf = ctx.map(DType::F32, vec![], vec![range[0], range[1], scale], zp_e)?;
    let zp = ctx.map(
        DType::U8,
        vec![],
        vec![zpf],
        expr::cast(expr::load(DType::F32, 0, vec![]), DType::U8),
    )?;
    // y = clamp(round(x / scale) + zp, 0, 255).
    let q = expr::unary(
        UnOp::Round,
        expr::binary(
            BinOp::Div,
            expr::load(DType::F32, 0, vars(r)),
            expr::load(DType::F32, 1, vec![]),
        ),
    );
    let q = expr::binary(BinOp::Add, q, expr::load(DType::F32, 2, vec![]));
    let q = expr::binary(BinOp::Max, f(0.0), expr::binary(BinOp::Min, f(255.0), q));
    let shape = ctx.shape(x);
    let y = ctx.map(
        DType::U8,
        shape,
        vec![x, scale, zpf],
        expr::cast(q, DType::U8),
    )?;
    Ok([y, scale, zp])
}

/// The loop variables `0 .. r` (an element's index).
pub(super) fn vars(r: usize) -> Vec<E> {
    (0..r as u32).map(expr::var).collect()
}
