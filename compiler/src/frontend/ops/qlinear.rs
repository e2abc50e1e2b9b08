//! The QOperator integer products: MatMulInteger, QLinearMatMul (int32 products of the
//! centered operands), ConvInteger and QLinearConv (convolutions of the centered operands
//! in float64, exact for 8-bit data), requantized in float64 by the scales' product as
//! onnx's reference does, and com.microsoft's QGemm. Constant 8-bit weights put the
//! products on the integer kernels (`qdq`); otherwise, where a bound proves every partial
//! sum an exact float32 integer, on the float32 GEMM and convolution kernels (`F32Plan`),
//! else in generic loops.

use crate::error::Result;
use crate::frontend::build;
use crate::frontend::ctx::Ctx;
use crate::ir::expr::{self, BinOp, E, UnOp};
use crate::ir::{DType, ValueId};

use super::quant::{quant_range, scalar_or_vector, vars};

/// `x − zero_point` as `to` (int32 or float64, exact for 8-bit operands), the zero point
/// absent (0), a scalar, or 1-D along `axis` of `x`.
fn centered(
    ctx: &mut Ctx,
    x: ValueId,
    zp: Option<ValueId>,
    axis: Option<usize>,
    to: DType,
    what: &str,
) -> Result<ValueId> {
    let xdt = build::expect_types(ctx, x, what, &[DType::U8, DType::I8])?;
    let dims = ctx.known_shape(x)?;
    let r = dims.len();
    let mut inputs = vec![x];
    let mut v = expr::cast(expr::load(xdt, 0, vars(r)), to);
    if let Some(z) = zp {
        if ctx.dtype(z) != xdt {
            return Err(ctx.err(format!(
                "the zero point of {what} is {} but {what} is {xdt}",
                ctx.dtype(z)
            )));
        }
        let zs = ctx.known_shape(z)?;
        let along = axis.map(|a| (expr::var(a as u32), dims[a]));
        let index = scalar_or_vector(&zs, along).ok_or_else(|| {
            ctx.err(format!(
                "the zero point of {what} has shape {zs:?}; expected a scalar{}",
                match axis {
                    Some(a) => format!(" or [{}]", dims[a]),
                    None => String::new(),
                }
            ))
        })?;
        inputs.push(z);
        v = expr::binary(BinOp::Sub, v, expr::cast(expr::load(xdt, 1, index), to));
    }
    let shape = ctx.shape(x);
    ctx.map(to, shape, inputs, v)
}

/// A scale operand as an expression of its type: a scalar, or 1-D indexed by `along` (with
/// `n` elements) when given.
fn scale_expr(ctx: &Ctx, s: ValueId, op: u32, along: Option<(E, i64)>, what: &str) -> Result<E> {
    let sdt = build::expect_types(ctx, s, what, &[DType::F32, DType::F16, DType::BF16])?;
    let ss = ctx.known_shape(s)?;
    let len = along.as_ref().map(|(_, len)| *len);
    let index = scalar_or_vector(&ss, along).ok_or_else(|| {
        ctx.unsupported(format!(
            "{what} of shape {ss:?}; onnxc takes a scalar{}",
            match len {
                Some(len) => format!(" or [{len}]"),
                None => String::new(),
            }
        ))
    })?;
    Ok(expr::load(sdt, op, index))
}

/// `a · b / c` in the scales' type (float16 and bfloat16 rounded after each operation, as
/// numpy computes them), as f32.
fn scale_factor(a: E, b: E, c: E) -> Result<E> {
    let dt = a.dtype;
    if b.dtype != dt || c.dtype != dt {
        return Err(crate::error::Error::Model(format!(
            "the scales have different types ({}, {}, {})",
            a.dtype, b.dtype, c.dtype
        )));
    }
    let f = |e: E| expr::cast(e, DType::F32);
    let round = |e: E| expr::cast(expr::cast(e, dt), DType::F32);
    Ok(round(expr::binary(
        BinOp::Div,
        round(expr::binary(BinOp::Mul, f(a), f(b))),
        f(c),
    )))
}

/// A scale operand of a QLinear op: the value, and per-vector indexing (see `scale_expr`).
type Scale<'a> = (ValueId, Option<(E, i64)>, &'a str);

/// Requantizes an int32 or float64 accumulator `acc`: `round(acc · s0 · s1 / s2) + zp`,
/// saturated to the zero point's type (`fallback` without one), as the reference evaluator
/// computes it (the scales' product in their type, the product with `acc` in float64).
fn requantize(
    ctx: &mut Ctx,
    acc: ValueId,
    scales: [Scale; 3],
    zp: Option<ValueId>,
    fallback: DType,
) -> Result<ValueId> {
    let odt = zp.map(|z| ctx.dtype(z)).unwrap_or(fallback);
    let mut inputs = vec![acc];
    let mut factors = Vec::new();
    // The axis each scale runs along (a per-vector scale's `along` is a loop variable).
    let axes: Vec<Option<usize>> = scales
        .iter()
        .map(|(_, along, _)| match along.as_ref().map(|(e, _)| &e.kind) {
            Some(expr::ExprKind::Var(v)) => Some(*v as usize),
            _ => None,
        })
        .collect();
    for (k, (s, along, what)) in scales.into_iter().enumerate() {
        factors.push(scale_expr(ctx, s, k as u32 + 1, along, what)?);
        inputs.push(s);
    }
    let [a, b, c]: [E; 3] = factors.try_into().expect("three scales");
    let factor = scale_factor(a, b, c).map_err(|e| ctx.err(e))?;
    let Some((lo, hi)) = quant_range(odt) else {
        return Err(ctx.unsupported(format!("quantized output of type {odt}")));
    };
    let r = ctx.rank(acc);
    let adt = ctx.dtype(acc);
    let scale_values: Vec<Option<crate::ir::Tensor>> =
        inputs[1..4].iter().map(|&s| ctx.konst(s)).collect();
    let exact_f32 = adt == DType::F32 && factors_in_range(&scale_values);
    if exact_f32 {
        if let Some(y) = requantize_kernel(ctx, acc, &scale_values, &axes, zp, odt)? {
            return Ok(y);
        }
        return requantize_f32(
            ctx,
            inputs,
            expr::load(adt, 0, vars(r)),
            factor,
            zp,
            odt,
            lo,
            hi,
        );
    }
    let prod = expr::binary(
        BinOp::Mul,
        expr::cast(expr::load(adt, 0, vars(r)), DType::F64),
        expr::cast(factor, DType::F64),
    );
    let mut v = expr::unary(UnOp::Round, prod);
    if let Some(z) = zp {
        let zl = scalar_zero_point(ctx, z, odt, &mut inputs)?;
        v = expr::binary(BinOp::Add, v, expr::cast(zl, DType::F64));
    }
    let v = expr::binary(
        BinOp::Max,
        expr::binary(BinOp::Min, v, expr::f(DType::F64, hi)),
        expr::f(DType::F64, lo),
    );
    let shape = ctx.shape(acc);
    ctx.map(odt, shape, inputs, expr::cast(v, odt))
}

/// `requantize` of an exact float32 accumulator through the runtime's kernel
/// (`kernels::Requantize`), when the three scales are float32 constants (scalars, or vectors
/// along one axis of the accumulator: `axes`) and the zero point a constant 8-bit scalar:
/// the factor `a · b / c` of each channel computed now in float32, as the map would.
/// None where that does not apply (then the map is built).
fn requantize_kernel(
    ctx: &mut Ctx,
    acc: ValueId,
    scales: &[Option<crate::ir::Tensor>],
    axes: &[Option<usize>],
    zp: Option<ValueId>,
    odt: DType,
) -> Result<Option<ValueId>> {
    if !matches!(odt, DType::U8 | DType::I8) {
        return Ok(None);
    }
    let mut vals = Vec::with_capacity(3);
    for s in scales {
        match s {
            Some(t) if t.dtype == DType::F32 => vals.push(
                t.to_f64s()
                    .into_iter()
                    .map(|v| v as f32)
                    .collect::<Vec<f32>>(),
            ),
            _ => return Ok(None),
        }
    }
    let n = vals.iter().map(Vec::len).max().unwrap_or(1);
    let mut axis = None;
    for (v, a) in vals.iter().zip(axes) {
        if v.len() != 1 {
            match (a, axis) {
                (Some(a), None) => axis = Some(*a),
                (Some(a), Some(b)) if *a == b => {}
                _ => return Ok(None),
            }
            if v.len() != n {
                return Ok(None);
            }
        }
    }
    let shape = ctx.known_shape(acc)?;
    let axis = axis.unwrap_or(0);
    if n != 1 && shape.get(axis) != Some(&(n as i64)) {
        return Ok(None);
    }
    let at = |v: &Vec<f32>, k: usize| if v.len() == 1 { v[0] } else { v[k] };
    let factors: Vec<f32> = (0..n)
        .map(|k| at(&vals[0], k) * at(&vals[1], k) / at(&vals[2], k))
        .collect();
    let zp = match zp {
        None => 0,
        Some(z) => match ctx.konst(z) {
            Some(t) if t.len() == 1 => t.to_f64s()[0] as i64,
            _ => return Ok(None),
        },
    };
    let op = crate::kernels::Requantize {
        factors,
        axis,
        zp,
        signed: odt == DType::I8,
    };
    let dims = ctx.shape(acc);
    ctx.add(
        crate::ir::graph::Op::kernel(op),
        vec![acc],
        crate::ir::TypeInfo::new(odt, dims),
    )
    .map(Some)
}

/// The output zero point `z` (of type `odt`) as a load of the map's next operand, which it
/// appends to `inputs`; only a scalar one (one element, any rank) is supported.
fn scalar_zero_point(ctx: &Ctx, z: ValueId, odt: DType, inputs: &mut Vec<ValueId>) -> Result<E> {
    let zs = ctx.known_shape(z)?;
    if zs.iter().product::<i64>() != 1 {
        return Err(ctx.unsupported("a y_zero_point that is not a scalar"));
    }
    inputs.push(z);
    Ok(expr::load(
        odt,
        inputs.len() as u32 - 1,
        vec![expr::i(0); zs.len()],
    ))
}

/// Whether the three scales are float32 constants whose factor `a·b/c` (each combination,
/// per tensor or per vector) lies in [2^-60, 2^60]: then `requantize_f32`'s error-free
/// product neither overflows nor underflows.
fn factors_in_range(scales: &[Option<crate::ir::Tensor>]) -> bool {
    let mut vals = Vec::new();
    for s in scales {
        match s {
            Some(t) if t.dtype == DType::F32 && !t.is_empty() => vals.push(
                t.to_f64s()
                    .into_iter()
                    .map(|v| v as f32)
                    .collect::<Vec<f32>>(),
            ),
            _ => return false,
        }
    }
    let ok = |f: f32| f.is_finite() && f.abs() >= 2f32.powi(-60) && f.abs() <= 2f32.powi(60);
    vals[0].iter().all(|&a| {
        vals[1]
            .iter()
            .all(|&b| vals[2].iter().all(|&c| ok(a * b / c) && ok(a * b)))
    })
}

/// `round(acc · f) + zp`, saturated, for an integer-valued float32 accumulator (|acc| <
/// 2^24, the exact float32 plans) and a float32 factor in [2^-60, 2^60], computed in float32
/// with the same result as the float64 product's rounding (which is exact: 24 × 24 bits):
/// `p = fl(acc·f)` and its rounding error `e` by Dekker's error-free product (Veltkamp
/// splits into 12-bit halves); `round(p)` is the exact product's rounding except where `p`
/// itself is a tie (k + ½, representable below 2^23), where the sign of `e` decides;
/// quotients past 2^23 saturate either way. Vectorizes, where the float64 map ran scalar
/// (3.7 ns per element: most of a QOperator MobileNet's time).
#[allow(clippy::too_many_arguments)]
fn requantize_f32(
    ctx: &mut Ctx,
    mut inputs: Vec<ValueId>,
    acc: E,
    factor: E,
    zp: Option<ValueId>,
    odt: DType,
    lo: f64,
    hi: f64,
) -> Result<ValueId> {
    let f = |v: f64| expr::f(DType::F32, v);
    let (add, sub, mul) = (
        |a: E, b: E| expr::binary(BinOp::Add, a, b),
        |a: E, b: E| expr::binary(BinOp::Sub, a, b),
        |a: E, b: E| expr::binary(BinOp::Mul, a, b),
    );
    let split = |a: &E| {
        let c = mul(a.clone(), f(4097.0));
        let h = sub(c.clone(), sub(c, a.clone()));
        let l = sub(a.clone(), h.clone());
        (h, l)
    };
    let p = mul(acc.clone(), factor.clone());
    let (ah, al) = split(&acc);
    let (bh, bl) = split(&factor);
    let e = add(
        add(
            add(
                sub(mul(ah.clone(), bh.clone()), p.clone()),
                mul(ah, bl.clone()),
            ),
            mul(al.clone(), bh),
        ),
        mul(al, bl),
    );
    let rounded = expr::unary(UnOp::Round, p.clone());
    let d = sub(p.clone(), rounded.clone());
    let tie = expr::binary(BinOp::Eq, expr::unary(UnOp::Abs, d), f(0.5));
    let up = expr::unary(UnOp::Ceil, p.clone());
    let down = expr::unary(UnOp::Floor, p);
    let broken = expr::select(
        expr::binary(BinOp::Gt, e.clone(), f(0.0)),
        up,
        expr::select(expr::binary(BinOp::Lt, e, f(0.0)), down, rounded.clone()),
    );
    let mut v = expr::select(tie, broken, rounded);
    if let Some(z) = zp {
        let zl = scalar_zero_point(ctx, z, odt, &mut inputs)?;
        v = add(v, expr::cast(zl, DType::F32));
    }
    let v = expr::binary(BinOp::Max, expr::binary(BinOp::Min, v, f(hi)), f(lo));
    let shape = ctx.shape(inputs[0]);
    ctx.map(odt, shape, inputs, expr::cast(v, odt))
}

/// Integers below this magnitude are exact in float32, and so is every partial sum of
/// products of integer-valued operands that stays below it.
const F32_EXACT: f64 = (1u64 << 24) as f64;

/// How the product of the centered operands — `x` (u8/i8, zero points `x_zp`) with the
/// constant `w` (zero points `w_zp`, one per output or one for all) — can be computed in
/// float32 exactly. Every partial sum of an output is at most `Σ_k |w_k − z| · max|x − z_x|`;
/// below 2^24 all of them are integers float32 holds, in any summation order, so the float32
/// GEMM and convolution kernels compute the exact result (hundreds of times faster than the
/// float64 loops). `out_of(flat)` names the output a flat weight index contributes to, and
/// `zp_of(flat)` its zero point's position.
#[derive(Copy, Clone, PartialEq)]
enum F32Plan {
    /// One float32 product.
    Direct,
    /// Two: `x − z_x = 16·h + l` with `l` in [0, 15] and `h` in [−16, 15], each product
    /// exact, combined in float64.
    Split,
    /// Neither is exact (or the weights are not constant): float64/int32 loops.
    None,
}

/// The plan, and each output's bound `Σ_k |w_k − z| · max|x − z_x|` on the magnitude of
/// every partial sum (empty where there is no plan).
#[allow(clippy::too_many_arguments)]
fn f32_plan(
    ctx: &Ctx,
    x: ValueId,
    x_zp: Option<ValueId>,
    w: ValueId,
    w_zp: Option<ValueId>,
    outputs: usize,
    out_of: impl Fn(usize) -> usize,
    zp_of: impl Fn(usize) -> usize,
) -> (F32Plan, Vec<f64>) {
    let none = (F32Plan::None, Vec::new());
    let w_zps = match w_zp {
        None => vec![0.0],
        Some(z) => match ctx.konst(z) {
            Some(t) => t.to_f64s(),
            None => return none,
        },
    };
    let (Some(wt), Some(x_max)) = (ctx.konst(w), centered_span(ctx, x, x_zp)) else {
        return none;
    };
    if w_zps.is_empty() {
        return none;
    }
    let mut sums = vec![0.0f64; outputs];
    for (k, v) in wt.to_f64s().into_iter().enumerate() {
        let z = w_zps[zp_of(k) % w_zps.len()];
        sums[out_of(k)] += (v - z).abs();
    }
    let w_max = sums.iter().copied().fold(0.0, f64::max);
    let plan = if w_max * x_max < F32_EXACT {
        F32Plan::Direct
    } else if w_max * 16.0 < F32_EXACT {
        F32Plan::Split
    } else {
        F32Plan::None
    };
    (plan, sums.iter().map(|s| s * x_max).collect())
}

/// The largest `|x − z|` of integer `x` (zero points `z`): over x's type's range and
/// every constant zero point, or, for a zero point computed at run time
/// (DynamicQuantizeLinear's, of x's type, so inside x's range too), the range's width.
/// None for a non-integer `x`.
fn centered_span(ctx: &Ctx, x: ValueId, x_zp: Option<ValueId>) -> Option<f64> {
    let (lo, hi) = build::int_range(ctx.dtype(x))?;
    let Some(z) = x_zp else {
        return Some(lo.abs().max(hi.abs()));
    };
    match ctx.konst(z) {
        Some(t) => Some(
            (t.to_f64s().iter())
                .map(|z| (lo - z).abs().max((hi - z).abs()))
                .fold(0.0, f64::max),
        ),
        None if ctx.dtype(z) == ctx.dtype(x) => Some(hi - lo),
        None => None,
    }
}

/// `f32_plan` for a product of two operands computed at run time (attention's scores and
/// its weighted sum, quantized): every partial sum is at most `k · span(a) · span(b)` for
/// a depth of `k`. Split rather than direct where the graph asks
/// (`ImportOptions::split_products`).
fn f32_plan_of_values(
    ctx: &Ctx,
    a: ValueId,
    a_zp: Option<ValueId>,
    b: ValueId,
    b_zp: Option<ValueId>,
) -> F32Plan {
    let (Some(sa), Some(sb)) = (centered_span(ctx, a, a_zp), centered_span(ctx, b, b_zp)) else {
        return F32Plan::None;
    };
    let Some(k) = ctx.known_shape(a).ok().and_then(|s| s.last().copied()) else {
        return F32Plan::None;
    };
    let k = k.max(1) as f64;
    if k * sa * sb < F32_EXACT && !ctx.g.split_products {
        F32Plan::Direct
    } else if k * 16.0 * sb < F32_EXACT {
        F32Plan::Split
    } else {
        F32Plan::None
    }
}

/// The float32 centered `x` as `(h, l)` with `x − z = 16·h + l`, `l` in [0, 15].
fn split_high_low(ctx: &mut Ctx, xc: ValueId) -> Result<(ValueId, ValueId)> {
    let r = ctx.rank(xc);
    let shape = ctx.shape(xc);
    let v = expr::load(DType::F32, 0, vars(r));
    let h_body = expr::unary(
        UnOp::Floor,
        expr::binary(BinOp::Div, v.clone(), expr::f(DType::F32, 16.0)),
    );
    let h = ctx.map(DType::F32, shape.clone(), vec![xc], h_body.clone())?;
    let l_body = expr::binary(
        BinOp::Sub,
        v,
        expr::binary(BinOp::Mul, h_body, expr::f(DType::F32, 16.0)),
    );
    let l = ctx.map(DType::F32, shape, vec![xc], l_body)?;
    Ok((h, l))
}

/// `16·hi + lo` of two integer-valued float32 results, in float64 (exact).
fn combine_high_low(ctx: &mut Ctx, hi: ValueId, lo: ValueId) -> Result<ValueId> {
    let r = ctx.rank(hi);
    let shape = ctx.shape(hi);
    let f64_of = |k: u32| expr::cast(expr::load(DType::F32, k, vars(r)), DType::F64);
    let body = expr::binary(
        BinOp::Add,
        expr::binary(BinOp::Mul, f64_of(0), expr::f(DType::F64, 16.0)),
        f64_of(1),
    );
    ctx.map(DType::F64, shape, vec![hi, lo], body)
}

/// `acc` (float32 with integer values, or float64) plus the int32 bias of channel 1, in
/// float64.
fn plus_bias(ctx: &mut Ctx, acc: ValueId, bias: Option<ValueId>) -> Result<ValueId> {
    let Some(b) = bias else {
        return Ok(acc);
    };
    let r = ctx.rank(acc);
    let body = expr::binary(
        BinOp::Add,
        expr::cast(expr::load(ctx.dtype(acc), 0, vars(r)), DType::F64),
        expr::cast(expr::load(DType::I32, 1, vec![expr::var(1)]), DType::F64),
    );
    let shape = ctx.shape(acc);
    ctx.map(DType::F64, shape, vec![acc, b], body)
}

/// MatMulInteger: int32 `(A − a_zp)·(B − b_zp)`, zero points per tensor, per row of A or
/// per column of B.
pub fn matmul_integer(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    if let Some(y) = crate::frontend::ops::qdq::matmul_integer(ctx)? {
        return Ok(vec![y]);
    }
    let (a, b) = (ctx.input(0)?, ctx.input(1)?);
    let acc = centered_matmul(ctx, a, ctx.opt_input(2), b, ctx.opt_input(3), ["A", "B"])?;
    let r = ctx.rank(acc);
    let shape = ctx.shape(acc);
    let body = expr::cast(expr::load(ctx.dtype(acc), 0, vars(r)), DType::I32);
    Ok(vec![ctx.map(DType::I32, shape, vec![acc], body)?])
}

/// `(A − a_zp)·(B − b_zp)` with integer values: on the integer kernel where it applies
/// (`qdq::integer_matmul`: B constant 2-D; int32 result), else through the float32 GEMM when
/// that is exact (`f32_plan`, B constant; float32 or float64 result), in int32 otherwise.
pub(crate) fn centered_matmul(
    ctx: &mut Ctx,
    a: ValueId,
    a_zp: Option<ValueId>,
    b: ValueId,
    b_zp: Option<ValueId>,
    names: [&str; 2],
) -> Result<ValueId> {
    if let Some(y) = crate::frontend::ops::qdq::integer_matmul(ctx, a, a_zp, b, b_zp)? {
        return Ok(y);
    }
    let (ra, rb) = (ctx.rank(a), ctx.rank(b));
    let bs = ctx.known_shape(b)?;
    let plan = if ctx.konst(b).is_none() {
        f32_plan_of_values(ctx, a, a_zp, b, b_zp)
    } else if rb >= 1 {
        let n = bs[rb - 1].max(1) as usize;
        let k = if rb >= 2 {
            bs[rb - 2].max(1) as usize
        } else {
            1
        };
        let count: usize = bs.iter().map(|&d| d.max(0) as usize).product();
        // Outputs: (batch, column); the zero point is per column.
        f32_plan(
            ctx,
            a,
            a_zp,
            b,
            b_zp,
            (count / k).max(1),
            |f| (f / (k * n)) * n + f % n,
            |f| f % n,
        )
        .0
    } else {
        F32Plan::None
    };
    let dt = if plan == F32Plan::None {
        DType::I32
    } else {
        DType::F32
    };
    let ac = centered(ctx, a, a_zp, (ra >= 2).then(|| ra - 2), dt, names[0])?;
    let bc = centered(ctx, b, b_zp, (rb >= 2).then(|| rb - 1), dt, names[1])?;
    if plan == F32Plan::Split {
        let (h, l) = split_high_low(ctx, ac)?;
        let ph = crate::frontend::ops::linalg::matmul_values(ctx, h, bc, false, false)?;
        let pl = crate::frontend::ops::linalg::matmul_values(ctx, l, bc, false, false)?;
        return combine_high_low(ctx, ph, pl);
    }
    crate::frontend::ops::linalg::matmul_values(ctx, ac, bc, false, false)
}

/// QLinearMatMul: the int32 product of the centered operands, requantized by
/// `a_scale · b_scale / y_scale` (b's scale per tensor or per column).
pub fn qlinear_matmul(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    if let Some(y) = crate::frontend::ops::qdq::qlinear_matmul(ctx)? {
        return Ok(vec![y]);
    }
    let (a, a_s, a_zp) = (ctx.input(0)?, ctx.input(1)?, ctx.opt_input(2));
    let (b, b_s, b_zp) = (ctx.input(3)?, ctx.input(4)?, ctx.opt_input(5));
    let (y_s, y_zp) = (ctx.input(6)?, ctx.opt_input(7));
    let acc = centered_matmul(ctx, a, a_zp, b, b_zp, ["a", "b"])?;
    let r = ctx.rank(acc);
    let n = ctx.known_shape(b)?.last().copied().unwrap_or(1);
    let col = (r >= 1).then(|| (expr::var(r as u32 - 1), n));
    let scales = [
        (a_s, None, "a_scale"),
        (b_s, col, "b_scale"),
        (y_s, None, "y_scale"),
    ];
    let fallback = ctx.dtype(a);
    Ok(vec![requantize(ctx, acc, scales, y_zp, fallback)?])
}

/// The convolution of the centered operands, exact: through the float32 convolution kernels
/// when that is exact (`f32_plan`, W constant; `ConvOp::exact` keeps Winograd away), in
/// float64 loops otherwise.
fn centered_conv(
    ctx: &mut Ctx,
    x: ValueId,
    x_zp: Option<ValueId>,
    w: ValueId,
    w_zp: Option<ValueId>,
    bias: Option<ValueId>,
) -> Result<ValueId> {
    let ws = ctx.known_shape(w)?;
    let m = ws.first().copied().unwrap_or(1).max(1) as usize;
    let per: usize = ws
        .iter()
        .skip(1)
        .map(|&d| d.max(0) as usize)
        .product::<usize>()
        .max(1);
    let (plan, bounds) = f32_plan(
        ctx,
        x,
        x_zp,
        w,
        w_zp,
        m,
        |f| (f / per).min(m - 1),
        |f| f / per,
    );
    // A constant int32 bias goes into the float32 convolution (its epilogue) when every
    // partial sum stays exact with it added, so the accumulator stays float32 (and its
    // requantization vectorizes, `requantize_f32`); otherwise it is added in float64.
    let f32_bias = match (plan, bias.and_then(|b| ctx.konst(b))) {
        (F32Plan::Direct, Some(bt))
            if bt
                .to_f64s()
                .iter()
                .zip(&bounds)
                .all(|(b, s)| b.abs() + s < F32_EXACT) =>
        {
            let b = bias.expect("constant bias");
            Some(build::cast(ctx, b, DType::F32)?)
        }
        _ => None,
    };
    let dt = if plan == F32Plan::None {
        DType::F64
    } else {
        DType::F32
    };
    let xc = centered(ctx, x, x_zp, None, dt, "x")?;
    let wc = centered(ctx, w, w_zp, Some(0), dt, "w")?;
    let conv = crate::frontend::ops::nn::conv_values;
    match plan {
        F32Plan::Split => {
            let (h, l) = split_high_low(ctx, xc)?;
            let ch = conv(ctx, h, wc, None, true)?;
            let cl = conv(ctx, l, wc, None, true)?;
            let c = combine_high_low(ctx, ch, cl)?;
            plus_bias(ctx, c, bias)
        }
        F32Plan::Direct if f32_bias.is_some() => conv(ctx, xc, wc, f32_bias, true),
        F32Plan::Direct => {
            let c = conv(ctx, xc, wc, None, true)?;
            plus_bias(ctx, c, bias)
        }
        F32Plan::None => {
            let c = conv(ctx, xc, wc, None, false)?;
            plus_bias(ctx, c, bias)
        }
    }
}

/// ConvInteger: int32 convolution of the centered operands (exact; see `centered_conv`).
pub fn conv_integer(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    if let Some(y) = crate::frontend::ops::qdq::conv_integer(ctx)? {
        return Ok(vec![y]);
    }
    let (x, w) = (ctx.input(0)?, ctx.input(1)?);
    let acc = centered_conv(ctx, x, ctx.opt_input(2), w, ctx.opt_input(3), None)?;
    let r = ctx.rank(acc);
    let shape = ctx.shape(acc);
    let body = expr::cast(expr::load(ctx.dtype(acc), 0, vars(r)), DType::I32);
    Ok(vec![ctx.map(DType::I32, shape, vec![acc], body)?])
}

/// QLinearConv: the convolution of the centered operands plus the int32 bias (exact; see
/// `centered_conv`, the bias added in float64), requantized by `x_scale · w_scale / y_scale` (w's scale per tensor or per output
/// channel).
pub fn qlinear_conv(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    if let Some(y) = crate::frontend::ops::qdq::qlinear_conv(ctx)? {
        return Ok(vec![y]);
    }
    let (x, x_s, x_zp) = (ctx.input(0)?, ctx.input(1)?, ctx.opt_input(2));
    let (w, w_s, w_zp) = (ctx.input(3)?, ctx.input(4)?, ctx.opt_input(5));
    let (y_s, y_zp) = (ctx.input(6)?, ctx.opt_input(7));
    let m = ctx.known_shape(w)?[0];
    let bias = match ctx.opt_input(8) {
        Some(bv) => {
            build::expect_types(ctx, bv, "B", &[DType::I32])?;
            if ctx.known_shape(bv)? != [m] {
                return Err(ctx.err(format!("B must have shape [{m}] (one per output channel)")));
            }
            Some(bv)
        }
        None => None,
    };
    let acc = centered_conv(ctx, x, x_zp, w, w_zp, bias)?;
    let channel = Some((expr::var(1), m));
    let scales = [
        (x_s, None, "x_scale"),
        (w_s, channel, "w_scale"),
        (y_s, None, "y_scale"),
    ];
    let fallback = ctx.dtype(x);
    Ok(vec![requantize(ctx, acc, scales, y_zp, fallback)?])
}

/// com.microsoft QGemm (A, a_scale, a_zp, B, b_scale, b_zp, C?, y_scale?, y_zp?; alpha,
/// transA, transB), as onnxruntime computes it: the exact int32 product of the centered
/// operands plus the int32 bias C (broadcast to [M, N]), times `alpha · a_scale · b_scale`
/// (b's per tensor or per column) divided by `y_scale` when given; quantized to y_zp's type
/// when y_zp is given, float32 otherwise.
pub fn qgemm(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (a, a_s, a_zp) = (ctx.input(0)?, ctx.input(1)?, ctx.opt_input(2));
    let (b, b_s, b_zp) = (ctx.input(3)?, ctx.input(4)?, ctx.opt_input(5));
    let (c, y_s, y_zp) = (ctx.opt_input(6), ctx.opt_input(7), ctx.opt_input(8));
    for (v, what) in [(a, "A"), (b, "B")] {
        if ctx.rank(v) != 2 {
            return Err(ctx.err(format!(
                "{what} has shape {:?}; QGemm takes matrices",
                ctx.known_shape(v)?
            )));
        }
    }
    let alpha = ctx.attr_f_or("alpha", 1.0)? as f32;
    let a = if ctx.attr_i_or("transA", 0)? != 0 {
        build::transpose(ctx, a, &[1, 0])?
    } else {
        a
    };
    let b = if ctx.attr_i_or("transB", 0)? != 0 {
        build::transpose(ctx, b, &[1, 0])?
    } else {
        b
    };
    let acc = centered_matmul(ctx, a, a_zp, b, b_zp, ["A", "B"])?;
    let out = ctx.shape(acc);
    let n = ctx.known_shape(acc)?[1];
    // The accumulator plus the bias, exact in float64.
    let mut inputs = vec![acc];
    let mut v = expr::cast(expr::load(ctx.dtype(acc), 0, vars(2)), DType::F64);
    if let Some(c) = c {
        build::expect_types(ctx, c, "C", &[DType::I32])?;
        let cs = ctx.shape(c);
        build::broadcast_shapes(ctx, &[cs.clone(), out.clone()])?;
        inputs.push(c);
        let cl = build::bload(DType::I32, 1, &cs, &out);
        v = expr::binary(BinOp::Add, v, expr::cast(cl, DType::F64));
    }
    // alpha · a_scale · b_scale (/ y_scale) in float32, as onnxruntime computes it.
    let f32s = |ctx: &Ctx, s: ValueId, what: &str| build::expect_types(ctx, s, what, &[DType::F32]);
    f32s(ctx, a_s, "a_scale")?;
    f32s(ctx, b_s, "b_scale")?;
    let sa = scale_expr(ctx, a_s, inputs.len() as u32, None, "a_scale")?;
    inputs.push(a_s);
    let sb = scale_expr(
        ctx,
        b_s,
        inputs.len() as u32,
        Some((expr::var(1), n)),
        "b_scale",
    )?;
    inputs.push(b_s);
    let mut factor = expr::binary(
        BinOp::Mul,
        expr::binary(BinOp::Mul, expr::f(DType::F32, alpha as f64), sa),
        sb,
    );
    if let Some(ys) = y_s {
        f32s(ctx, ys, "y_scale")?;
        let sy = scale_expr(ctx, ys, inputs.len() as u32, None, "y_scale")?;
        inputs.push(ys);
        factor = expr::binary(BinOp::Div, factor, sy);
    }
    let prod = expr::binary(BinOp::Mul, v, expr::cast(factor, DType::F64));
    let Some(z) = y_zp else {
        return Ok(vec![ctx.map(
            DType::F32,
            out,
            inputs,
            expr::cast(prod, DType::F32),
        )?]);
    };
    let odt = build::expect_types(ctx, z, "y_zero_point", &[DType::U8, DType::I8])?;
    let zs = ctx.known_shape(z)?;
    if zs.iter().product::<i64>() != 1 {
        return Err(ctx.err(format!(
            "y_zero_point has shape {zs:?}; QGemm takes a per-tensor one"
        )));
    }
    let (lo, hi) = quant_range(odt).expect("8-bit");
    inputs.push(z);
    let zl = expr::load(odt, inputs.len() as u32 - 1, vec![expr::i(0); zs.len()]);
    let q = expr::binary(
        BinOp::Add,
        expr::unary(UnOp::Round, prod),
        expr::cast(zl, DType::F64),
    );
    let q = expr::binary(
        BinOp::Max,
        expr::binary(BinOp::Min, q, expr::f(DType::F64, hi)),
        expr::f(DType::F64, lo),
    );
    Ok(vec![ctx.map(odt, out, inputs, expr::cast(q, odt))?])
}
