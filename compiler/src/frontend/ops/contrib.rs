//! onnxruntime's quantized contrib ops (domain `com.microsoft`), which its quantizer writes
//! in the QOperator format and the ONNX model zoo's int8 models use: QLinearAdd, QLinearMul,
//! QLinearSigmoid, QLinearLeakyRelu, QLinearSoftmax, QLinearGlobalAveragePool, QLinearConcat, and that
//! domain's QuantizeLinear/DequantizeLinear (the ONNX ops' semantics); and the channels-last
//! QLinearConv and NhwcMaxPool its NHWC transformer writes at ORT_ENABLE_ALL.
//!
//! Scales and zero points are per tensor (one element each, as the ops define them). Each op
//! is a map (a reduction for the pool) computing the formula of onnxruntime's operator
//! documentation in float32, rounded half to even and saturated: QLinearAdd
//! `(s_A (A − z_A) + s_B (B − z_B)) / s_C + z_C`, QLinearMul
//! `(A − z_A)(B − z_B) · s_A s_B / s_C + z_C`; the activations and QLinearConcat dequantize,
//! apply the function and quantize (`round(v / s_Y) + z_Y`), which onnxruntime tabulates
//! per 8-bit value (onnxc's maps of 8-bit inputs become such tables too, `schedule::lut`);
//! the pool sums integers and requantizes by `s_X / (s_Y · n)`. onnxruntime's x86 kernels
//! approximate some of these in fixed point (QLinearAdd's AVX2 path: 22-bit multipliers),
//! so its results can differ from the formula, and from onnxc, by one at some values.

use crate::error::Result;
use crate::frontend::build;
use crate::frontend::ctx::Ctx;
use crate::ir::dim::Dim;
use crate::ir::expr::{self, BinOp, E, UnOp};
use crate::ir::graph::ReduceKind;
use crate::ir::{DType, ValueId};

/// A quantized operand: the tensor, its scale and its zero point (absent: 0 of the tensor's
/// type).
pub(super) struct QTensor {
    pub x: ValueId,
    pub scale: ValueId,
    pub zp: Option<ValueId>,
}

pub(super) fn qtensor(ctx: &Ctx, x: usize, scale: usize, zp: usize, name: &str) -> Result<QTensor> {
    let q = QTensor {
        x: ctx.input(x)?,
        scale: ctx.input(scale)?,
        zp: ctx.opt_input(zp),
    };
    let dt = ctx.dtype(q.x);
    if !matches!(dt, DType::U8 | DType::I8) {
        return Err(ctx.err(format!("{name} is {dt}; this op takes uint8 or int8")));
    }
    one_element(ctx, q.scale, &format!("{name}'s scale"))?;
    build::expect_types(ctx, q.scale, &format!("{name}'s scale"), &[DType::F32])?;
    if let Some(z) = q.zp {
        one_element(ctx, z, &format!("{name}'s zero point"))?;
        if ctx.dtype(z) != dt {
            return Err(ctx.err(format!(
                "{name}'s zero point is {} but {name} is {dt}; they must have the same type",
                ctx.dtype(z)
            )));
        }
    }
    Ok(q)
}

/// The output's scale and zero point (inputs `scale`, `zp`); the output type is the zero
/// point's, or `default` without one.
pub(super) fn qout(
    ctx: &Ctx,
    scale: usize,
    zp: usize,
    default: DType,
) -> Result<(ValueId, Option<ValueId>, DType)> {
    let s = ctx.input(scale)?;
    one_element(ctx, s, "the output scale")?;
    build::expect_types(ctx, s, "the output scale", &[DType::F32])?;
    let z = ctx.opt_input(zp);
    let dt = match z {
        Some(z) => {
            one_element(ctx, z, "the output zero point")?;
            build::expect_types(ctx, z, "the output zero point", &[DType::U8, DType::I8])?
        }
        None => default,
    };
    Ok((s, z, dt))
}

pub(super) fn one_element(ctx: &Ctx, v: ValueId, what: &str) -> Result<()> {
    let s = ctx.known_shape(v)?;
    if s.iter().product::<i64>() != 1 {
        return Err(ctx.err(format!(
            "{what} has shape {s:?}; this op takes a per-tensor (one-element) parameter"
        )));
    }
    Ok(())
}

/// Operand `k`'s single element as float32.
pub(super) fn param(ctx: &Ctx, v: ValueId, k: u32) -> E {
    expr::cast(
        expr::load(ctx.dtype(v), k, vec![expr::i(0); ctx.rank(v)]),
        DType::F32,
    )
}

/// A zero point as float32 (0 when absent), registering it as operand `inputs.len()`.
pub(super) fn zero_point(ctx: &Ctx, z: Option<ValueId>, inputs: &mut Vec<ValueId>) -> E {
    match z {
        Some(z) => {
            inputs.push(z);
            param(ctx, z, inputs.len() as u32 - 1)
        }
        None => expr::f(DType::F32, 0.0),
    }
}

fn f(v: f64) -> E {
    expr::f(DType::F32, v)
}

/// `v` (float32, already divided by the scale) rounded half to even, plus the zero point,
/// saturated to `dt`.
pub(super) fn saturate(v: E, zp: E, dt: DType) -> E {
    let (lo, hi) = build::int_range(dt).expect("8-bit type");
    let v = expr::binary(BinOp::Add, expr::unary(UnOp::Round, v), zp);
    expr::cast(
        expr::binary(BinOp::Max, expr::binary(BinOp::Min, v, f(hi)), f(lo)),
        dt,
    )
}

/// QLinearAdd / QLinearMul: (A, A_scale, A_zp?, B, B_scale, B_zp?, C_scale, C_zp?) with
/// broadcasting.
fn binary(ctx: &mut Ctx, mul: bool) -> Result<Vec<ValueId>> {
    let a = qtensor(ctx, 0, 1, 2, "A")?;
    let b = qtensor(ctx, 3, 4, 5, "B")?;
    if ctx.dtype(a.x) != ctx.dtype(b.x) {
        return Err(ctx.err(format!(
            "A is {} and B is {}; they must have the same type",
            ctx.dtype(a.x),
            ctx.dtype(b.x)
        )));
    }
    let (sc, zc, odt) = qout(ctx, 6, 7, ctx.dtype(a.x))?;
    let shapes = [ctx.shape(a.x), ctx.shape(b.x)];
    let out = build::broadcast_shapes(ctx, &shapes)?;
    // Operands of one shape and constant parameters: the integer sum kernel, which computes
    // the same float32 operations.
    if !mul && shapes[0] == shapes[1] && odt == ctx.dtype(a.x) {
        let konst = |v: Option<ValueId>| match v {
            None => Some(0.0),
            Some(v) => ctx.konst(v).map(|t| t.to_f64s()[0]),
        };
        if let (Some(sa), Some(sb), Some(sy), Some(za), Some(zb), Some(zy)) = (
            konst(Some(a.scale)),
            konst(Some(b.scale)),
            konst(Some(sc)),
            konst(a.zp),
            konst(b.zp),
            konst(zc),
        ) {
            let p = onnxc_runtime::qadd::QAddParams {
                sa: sa as f32,
                sb: sb as f32,
                sy: sy as f32,
                za: za as f32,
                zb: zb as f32,
                zy: zy as f32,
                signed: odt == DType::I8,
                relu: false,
            };
            return Ok(vec![ctx.add(
                crate::ir::graph::Op::kernel(crate::kernels::QAdd(p)),
                vec![a.x, b.x],
                crate::ir::graph::TypeInfo::new(odt, out),
            )?]);
        }
    }
    let la = build::bload(ctx.dtype(a.x), 0, &shapes[0], &out);
    let lb = build::bload(ctx.dtype(b.x), 1, &shapes[1], &out);
    let mut inputs = vec![a.x, b.x, a.scale, b.scale, sc];
    let (sa, sb, scv) = (
        param(ctx, a.scale, 2),
        param(ctx, b.scale, 3),
        param(ctx, sc, 4),
    );
    let za = zero_point(ctx, a.zp, &mut inputs);
    let zb = zero_point(ctx, b.zp, &mut inputs);
    let zcv = zero_point(ctx, zc, &mut inputs);
    let (xa, xb) = (expr::cast(la, DType::F32), expr::cast(lb, DType::F32));
    let (da, db) = (
        expr::binary(BinOp::Sub, xa, za),
        expr::binary(BinOp::Sub, xb, zb),
    );
    let v = if mul {
        // ((A − z_A)(B − z_B)) · (s_A · s_B) / s_C
        let p = expr::binary(BinOp::Mul, da, db);
        let p = expr::binary(BinOp::Mul, p, expr::binary(BinOp::Mul, sa, sb));
        expr::binary(BinOp::Div, p, scv)
    } else {
        // (s_A (A − z_A) + s_B (B − z_B)) / s_C
        let sum = expr::binary(
            BinOp::Add,
            expr::binary(BinOp::Mul, sa, da),
            expr::binary(BinOp::Mul, sb, db),
        );
        expr::binary(BinOp::Div, sum, scv)
    };
    Ok(vec![ctx.map(odt, out, inputs, saturate(v, zcv, odt))?])
}

pub fn qlinear_add(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    binary(ctx, false)
}

pub fn qlinear_mul(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    binary(ctx, true)
}

/// X → Y = quantize(fn(dequantize(X))): (X, X_scale, X_zp?, Y_scale, Y_zp?).
fn activation(ctx: &mut Ctx, func: impl FnOnce(E) -> E) -> Result<Vec<ValueId>> {
    let x = qtensor(ctx, 0, 1, 2, "X")?;
    let (sy, zy, odt) = qout(ctx, 3, 4, ctx.dtype(x.x))?;
    let mut inputs = vec![x.x, x.scale, sy];
    let (sxv, syv) = (param(ctx, x.scale, 1), param(ctx, sy, 2));
    let zx = zero_point(ctx, x.zp, &mut inputs);
    let zyv = zero_point(ctx, zy, &mut inputs);
    let xv = expr::cast(
        build::load_same(ctx.dtype(x.x), 0, ctx.rank(x.x)),
        DType::F32,
    );
    let d = expr::binary(BinOp::Mul, expr::binary(BinOp::Sub, xv, zx), sxv);
    let v = expr::binary(BinOp::Div, func(d), syv);
    let shape = ctx.shape(x.x);
    Ok(vec![ctx.map(odt, shape, inputs, saturate(v, zyv, odt))?])
}

/// QLinearSoftmax (X, X_scale, X_zp?, Y_scale, Y_zp?): dequantized, a float32 softmax with
/// the axis semantics of the original Softmax's `opset` (required), quantized.
pub fn qlinear_softmax(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = qtensor(ctx, 0, 1, 2, "X")?;
    let (sy, zy, odt) = qout(ctx, 3, 4, ctx.dtype(x.x))?;
    let Some(opset) = ctx.attr_i("opset")? else {
        return Err(ctx.err("attribute 'opset' (the opset of the Softmax it replaces) is required"));
    };
    let axis = ctx.attr_i_or("axis", if opset < 13 { 1 } else { -1 })?;
    let mut inputs = vec![x.x, x.scale];
    let sxv = param(ctx, x.scale, 1);
    let zx = zero_point(ctx, x.zp, &mut inputs);
    let xv = expr::cast(
        build::load_same(ctx.dtype(x.x), 0, ctx.rank(x.x)),
        DType::F32,
    );
    let d = expr::binary(BinOp::Mul, expr::binary(BinOp::Sub, xv, zx), sxv);
    let shape = ctx.shape(x.x);
    let dq = ctx.map(DType::F32, shape.clone(), inputs, d)?;
    let p = crate::frontend::ops::nn::softmax_f32(ctx, dq, axis, opset)?;
    let mut inputs = vec![p, sy];
    let syv = param(ctx, sy, 1);
    let zyv = zero_point(ctx, zy, &mut inputs);
    let v = expr::binary(
        BinOp::Div,
        build::load_same(DType::F32, 0, shape.len()),
        syv,
    );
    Ok(vec![ctx.map(odt, shape, inputs, saturate(v, zyv, odt))?])
}

pub fn qlinear_sigmoid(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    activation(ctx, |d| expr::unary(UnOp::Sigmoid, d))
}

pub fn qlinear_leaky_relu(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let alpha = ctx.attr_f_or("alpha", 0.01)?;
    activation(ctx, move |d| {
        expr::select(
            expr::binary(BinOp::Lt, d.clone(), f(0.0)),
            expr::binary(BinOp::Mul, d.clone(), f(alpha)),
            d,
        )
    })
}

/// QLinearGlobalAveragePool (X, x_scale, x_zp, y_scale, y_zp): the mean over the spatial
/// dims of NCHW (or, with `channels_last`, NHWC) input, dims kept as 1.
pub fn qlinear_global_average_pool(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = qtensor(ctx, 0, 1, 2, "X")?;
    let (sy, zy, odt) = qout(ctx, 3, 4, ctx.dtype(x.x))?;
    let dims = ctx.known_shape(x.x)?;
    let r = dims.len();
    if r < 3 {
        return Err(ctx.err(format!(
            "X has shape {dims:?}; it needs a batch, channel and spatial dims"
        )));
    }
    let channels_last = ctx.attr_i_or("channels_last", 0)? != 0;
    let axes: Vec<usize> = if channels_last {
        (1..r - 1).collect()
    } else {
        (2..r).collect()
    };
    let n: i64 = axes.iter().map(|&a| dims[a]).product();
    // The integer sum (at most 2^8 · n), exact in float32 while every partial sum stays
    // below 2^24 (float32 reductions vectorize wider), else in float64.
    let acc = if n <= 1 << 16 { DType::F32 } else { DType::F64 };
    let sum = build::reduce(ctx, x.x, ReduceKind::Sum, &axes, true, |l| {
        expr::cast(l, acc)
    })?;
    let mut inputs = vec![sum, x.scale, sy];
    let zx = zero_point(ctx, x.zp, &mut inputs);
    let zyv = zero_point(ctx, zy, &mut inputs);
    let (sxv, syv) = (param(ctx, x.scale, 1), param(ctx, sy, 2));
    let centered = expr::cast(
        expr::binary(
            BinOp::Sub,
            expr::cast(build::load_same(acc, 0, r), DType::F64),
            expr::binary(
                BinOp::Mul,
                expr::cast(zx, DType::F64),
                expr::f(DType::F64, n as f64),
            ),
        ),
        DType::F32,
    );
    let scale = expr::binary(BinOp::Div, sxv, expr::binary(BinOp::Mul, syv, f(n as f64)));
    let v = expr::binary(BinOp::Mul, centered, scale);
    let shape = ctx.shape(sum);
    Ok(vec![ctx.map(odt, shape, inputs, saturate(v, zyv, odt))?])
}

/// QLinearConcat (Y_scale, Y_zp, then (X, X_scale, X_zp) per input): each input
/// requantized to the output's scale and zero point (kept as is where they are the same
/// operands), then concatenated along `axis`.
pub fn qlinear_concat(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let n = ctx.num_inputs();
    if n < 5 || !(n - 2).is_multiple_of(3) {
        return Err(ctx.err(format!(
            "has {n} inputs; it takes Y_scale, Y_zero_point and a (tensor, scale, zero point) triple per input"
        )));
    }
    let first = ctx.input(2)?;
    let (sy, zy, odt) = qout(ctx, 0, 1, ctx.dtype(first))?;
    let zy = Some(zy.ok_or_else(|| ctx.err("Y_zero_point is required"))?);
    let rank = ctx.rank(first);
    let axis = build::axis(ctx, ctx.attr_i_or("axis", 1)?, rank)?;
    let mut parts = Vec::new();
    let mut shape = ctx.shape(first);
    shape[axis] = Dim::Known(0);
    for k in 0..(n - 2) / 3 {
        let q = qtensor(ctx, 2 + 3 * k, 3 + 3 * k, 4 + 3 * k, &format!("input {k}"))?;
        let s = ctx.shape(q.x);
        if s.len() != rank || (0..rank).any(|d| d != axis && s[d] != shape[d]) {
            return Err(ctx.err(format!(
                "input {k}'s shape differs from input 0's outside axis {axis}"
            )));
        }
        shape[axis] = shape[axis].clone().add(s[axis].clone());
        // An input quantized as the output (the quantizer gives a concat's inputs its scale
        // and zero point) is its own part: round((x − z)·s / s + z) is x for 8-bit x.
        let same = |a: ValueId, b: ValueId| {
            a == b
                || matches!((ctx.g.const_value(a), ctx.g.const_value(b)), (Some(x), Some(y)) if x == y)
        };
        let same_zp = match (q.zp, zy) {
            (Some(a), Some(b)) => same(a, b),
            (a, b) => a == b,
        };
        let part = if same(q.scale, sy) && same_zp && ctx.dtype(q.x) == odt {
            q.x
        } else {
            // Requantized before a transpose rather than after, so that the parts stay
            // transposes `concat_parts` can concatenate untransposed.
            let (x, perm) = build::transpose_of(ctx, q.x).unwrap_or((q.x, (0..rank).collect()));
            let mut inputs = vec![x, q.scale, sy];
            let (sxv, syv) = (param(ctx, q.scale, 1), param(ctx, sy, 2));
            let zx = zero_point(ctx, q.zp, &mut inputs);
            let zyv = zero_point(ctx, zy, &mut inputs);
            let xv = expr::cast(build::load_same(ctx.dtype(x), 0, rank), DType::F32);
            let d = expr::binary(BinOp::Mul, expr::binary(BinOp::Sub, xv, zx), sxv);
            let v = expr::binary(BinOp::Div, d, syv);
            let y = ctx.map(odt, ctx.shape(x), inputs, saturate(v, zyv, odt))?;
            build::transpose(ctx, y, &perm)?
        };
        parts.push(part);
    }
    Ok(vec![crate::frontend::ops::shape::concat_parts(
        ctx, parts, axis, odt, shape,
    )?])
}

/// Builds the ONNX op `op` (its semantics at `opset`) of this node's NHWC input 0: the
/// input transposed to NCHW, `op` built over it, its results transposed back to NHWC.
fn channels_first(
    ctx: &mut Ctx,
    opset: i64,
    op: fn(&mut Ctx) -> Result<Vec<ValueId>>,
) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let r = ctx.rank(x);
    if r < 3 {
        return Err(ctx.err(format!(
            "input 0 has rank {r}; a channels-last input needs a batch, spatial dims and channels"
        )));
    }
    let to_first: Vec<usize> = [0, r - 1].into_iter().chain(1..r - 1).collect();
    let to_last: Vec<usize> = [0].into_iter().chain(2..r).chain([1]).collect();
    ctx.inputs[0] = Some(build::transpose(ctx, x, &to_first)?);
    // The node's declared output types are NHWC: the NCHW builder must not read them.
    let declared = std::mem::take(&mut ctx.declared);
    let guessed = std::mem::take(&mut ctx.guessed);
    let own = std::mem::replace(&mut ctx.opset, opset);
    let ys = op(ctx);
    (ctx.declared, ctx.guessed, ctx.opset) = (declared, guessed, own);
    ys?.into_iter()
        .map(|y| build::transpose(ctx, y, &to_last))
        .collect()
}

/// com.microsoft QLinearConv: ONNX's QLinearConv, over NHWC activations with
/// `channels_last=1` (the weights stay OIHW).
pub fn qlinear_conv(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    if ctx.attr_i_or("channels_last", 0)? == 0 {
        return super::qlinear::qlinear_conv(ctx);
    }
    channels_first(ctx, 10, super::qlinear::qlinear_conv)
}

/// NhwcMaxPool (com.microsoft): MaxPool-12 of an 8-bit NHWC input.
pub fn nhwc_max_pool(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    build::expect_types(ctx, x, "x", &[DType::U8, DType::I8])?;
    channels_first(ctx, 12, super::pool::max_pool)
}
