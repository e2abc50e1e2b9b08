//! Quantized products on the integer kernels (`kernels::QConv`, `kernels::QMatMul`):
//! QLinearConv, ConvInteger, QLinearMatMul, MatMulInteger and QGemm with constant weights,
//! and a QDQ model's Conv, MatMul and Gemm of dequantized operands (their float32 result
//! noted, `FloatProduct`, so that a QuantizeLinear of it rebuilds the product requantizing
//! in its epilogue: `qdq_requantize`).

use super::*;
use crate::frontend::ops::nn::window;
use crate::ir::dim::Dim;
use onnxc_runtime::conv::ConvGeometry;
use onnxc_runtime::qconv::{MR, QConvParams, QOut, QScalars};
use std::sync::Arc;

/// The shape of an integer product: a convolution, or a matrix product of `[batch, m, k]`
/// activations by `[k, n]` weights (result shape `shape`).
#[derive(Clone)]
enum Product {
    Conv(Box<ConvGeometry<'static>>),
    MatMul {
        batch: usize,
        m: usize,
        k: usize,
        n: usize,
        shape: Vec<i64>,
    },
}

impl Product {
    /// Output channels (columns of a matrix product).
    fn channels(&self) -> usize {
        match self {
            Product::Conv(g) => g.m as usize,
            Product::MatMul { n, .. } => *n,
        }
    }
}

/// An integer product with a float32 result, as a QuantizeLinear of it rebuilds it.
#[derive(Clone)]
pub(super) struct FloatProduct {
    x: ValueId,
    product: Product,
    x_signed: bool,
    x_zp: i32,
    w: Arc<Vec<i8>>,
    w_zp: Vec<i32>,
    bias: Option<Vec<i32>>,
    /// `x_scale · w_scale` per output channel.
    sxw: Vec<f32>,
}

/// Most K (channels per group × taps) of the kernel: below it every int32 sum of 8-bit
/// products (|w − zw|, |x − zx| ≤ 255) is exact.
const MAX_K: usize = 1 << 15;

/// Least output channels per group: a depthwise convolution would fill one row of the
/// kernel's `MR`-channel tiles.
const MIN_CHANNELS_PER_GROUP: usize = MR / 2;

/// One value per output channel from a scalar or an `[m]` tensor.
fn per_channel(t: &Tensor, m: usize) -> Option<Vec<f64>> {
    let v = t.to_f64s();
    match v.len() {
        1 => Some(vec![v[0]; m]),
        n if n == m && t.shape.len() == 1 => Some(v),
        _ => None,
    }
}

/// The geometry of the node's convolution of `x` by `w` (the Conv attributes), if the
/// kernel takes it.
fn geometry(ctx: &Ctx, xs: &[i64], ws: &[i64]) -> Result<Option<ConvGeometry<'static>>> {
    if xs.len() < 3 || ws.len() != xs.len() || xs.len() - 2 > onnxc_runtime::conv::MAX_SPATIAL {
        return Ok(None);
    }
    let group = ctx.attr_i_or("group", 1)?;
    if group < 1 || xs[1] % group != 0 || ws[0] % group != 0 || ws[1] * group != xs[1] {
        return Ok(None);
    }
    if let Some(k) = ctx.attr_ints("kernel_shape")
        && k != ws[2..]
    {
        return Ok(None);
    }
    let win = window(ctx, &xs[2..], &ws[2..], false)?;
    let g = ConvGeometry {
        n: xs[0],
        c: xs[1],
        m: ws[0],
        group,
        input: xs[2..].into(),
        kernel: ws[2..].into(),
        output: win.out.as_slice().into(),
        strides: win.strides.as_slice().into(),
        dilations: win.dilations.as_slice().into(),
        pads: win.pads_begin.as_slice().into(),
        wide_simd: false,
        no_winograd: true,
        input_planes: Default::default(),
        path: Default::default(),
    };
    let mg = (g.m / group) as usize;
    let k = (g.c / group) as usize * ws[2..].iter().product::<i64>() as usize;
    if mg < MIN_CHANNELS_PER_GROUP || k > MAX_K || g.validate().is_err() {
        return Ok(None);
    }
    Ok(Some(g))
}

/// Constant weights as int8 with their per-channel zero points (uint8 ones shifted by −128,
/// which changes neither the products of the centered values nor anything else).
fn weights_i8(w: &Tensor, zp: &[f64]) -> Option<(Vec<i8>, Vec<i32>)> {
    let shift = match w.dtype {
        DType::I8 => 0,
        DType::U8 => 128,
        _ => return None,
    };
    let wv = w.to_i64s().iter().map(|&v| (v - shift) as i8).collect();
    Some((wv, zp.iter().map(|&z| z as i32 - shift as i32).collect()))
}

/// The op for the convolution of `x` (its zero point `x_zp` given at run time, or
/// `q.x_zp`), with `out`'s epilogue.
#[allow(clippy::too_many_arguments)]
fn build(
    ctx: &mut Ctx,
    x: ValueId,
    x_zp: Option<ValueId>,
    conv: &ConvGeometry,
    q: QScalars,
    w: &[i8],
    w_zp: &[i32],
    bias: Option<&[i32]>,
    scale: &[f32],
    fbias: &[f32],
) -> Result<ValueId> {
    let dt = match q.out {
        QOut::I32 => DType::I32,
        QOut::F32 => DType::F32,
        QOut::U8 => DType::U8,
        QOut::I8 => DType::I8,
    };
    let mut shape = vec![Dim::Known(conv.n), Dim::Known(conv.m)];
    shape.extend(conv.output.iter().map(|&d| Dim::Known(d)));
    let blob = QConvParams::encode(conv, q, w, w_zp, bias, scale, fbias);
    let mut inputs = vec![x];
    inputs.extend(x_zp);
    ctx.add(
        crate::ir::Op::kernel(crate::kernels::QConv(Arc::new(blob))),
        inputs,
        TypeInfo::new(dt, shape),
    )
}

/// The scalars of a product requantized to `odt` (uint8 or int8, its full range).
fn requantizing(odt: DType, x_signed: bool, x_zp: i32, y_zp: i64) -> Option<QScalars> {
    let (out, lo, hi) = match odt {
        DType::U8 => (QOut::U8, 0, 255),
        DType::I8 => (QOut::I8, -128, 127),
        _ => return None,
    };
    Some(QScalars {
        out,
        x_signed,
        x_zp,
        y_zp: y_zp as i32,
        lo,
        hi,
    })
}

/// A QLinear product's constant float32 scales — the activations' and the result's per
/// tensor, the weights' per tensor or one per channel (`channels`) — and the result's zero
/// point: the requantization factor `x_scale · w_scale / y_scale` per channel, in float32
/// as the reference computes it, and the zero point.
fn qlinear_scales(
    ctx: &Ctx,
    x_s: ValueId,
    w_s: ValueId,
    y_s: ValueId,
    y_zp: Option<ValueId>,
    channels: usize,
) -> Option<(Vec<f32>, i64)> {
    let yz = scalar_int(&values(ctx, y_zp)?)?;
    let sx = ctx.konst(x_s).as_ref().and_then(scalar_f32)?;
    let sy = ctx.konst(y_s).as_ref().and_then(scalar_f32)?;
    let sw = ctx
        .konst(w_s)
        .filter(|t| t.dtype == DType::F32)
        .and_then(|t| per_channel(&t, channels))?;
    Some((sw.iter().map(|&s| sx * s as f32 / sy).collect(), yz))
}

/// The activations' scalars: their signedness and constant per-tensor zero point.
fn activations(ctx: &Ctx, x: ValueId, zp: Option<ValueId>) -> Option<(bool, i32)> {
    let signed = match ctx.dtype(x) {
        DType::U8 => false,
        DType::I8 => true,
        _ => return None,
    };
    if zp.is_some_and(|z| ctx.dtype(z) != ctx.dtype(x)) {
        return None;
    }
    Some((signed, scalar_int(&values(ctx, zp)?)? as i32))
}

/// The weights' int8 values and per-channel zero points, when constant.
fn weights(ctx: &Ctx, w: ValueId, zp: Option<ValueId>, m: usize) -> Option<(Vec<i8>, Vec<i32>)> {
    let wt = ctx.konst(w)?;
    if zp.is_some_and(|z| ctx.dtype(z) != wt.dtype) {
        return None;
    }
    let zps = match values(ctx, zp)? {
        None => vec![0.0; m],
        Some(t) => per_channel(&t, m)?,
    };
    weights_i8(&wt, &zps)
}

/// QLinearConv on the kernel, requantizing as the reference does, or None where it does not
/// apply.
pub fn qlinear_conv(ctx: &mut Ctx) -> Result<Option<ValueId>> {
    let (x, x_s, x_zp) = (ctx.input(0)?, ctx.input(1)?, ctx.opt_input(2));
    let (w, w_s, w_zp) = (ctx.input(3)?, ctx.input(4)?, ctx.opt_input(5));
    let (y_s, y_zp, b) = (ctx.input(6)?, ctx.opt_input(7), ctx.opt_input(8));
    let (xs, ws) = (ctx.known_shape(x)?, ctx.known_shape(w)?);
    let Some(conv) = geometry(ctx, &xs, &ws)? else {
        return Ok(None);
    };
    let m = conv.m as usize;
    let Some((x_signed, xz)) = activations(ctx, x, x_zp) else {
        return Ok(None);
    };
    let Some((wv, wz)) = weights(ctx, w, w_zp, m) else {
        return Ok(None);
    };
    let odt = y_zp.map_or(ctx.dtype(x), |z| ctx.dtype(z));
    let Some((scale, yz)) = qlinear_scales(ctx, x_s, w_s, y_s, y_zp, m) else {
        return Ok(None);
    };
    let Some(q) = requantizing(odt, x_signed, xz, yz) else {
        return Ok(None);
    };
    let bias = match b {
        None => None,
        Some(b) => match ctx.konst(b) {
            Some(t) if t.dtype == DType::I32 && t.shape == [m as i64] => {
                Some(t.to_i64s().iter().map(|&v| v as i32).collect::<Vec<_>>())
            }
            _ => return Ok(None),
        },
    };
    let zeros = vec![0f32; m];
    build(
        ctx,
        x,
        None,
        &conv,
        q,
        &wv,
        &wz,
        bias.as_deref(),
        &scale,
        &zeros,
    )
    .map(Some)
}

/// ConvInteger on the kernel (int32 result), or None where it does not apply.
pub fn conv_integer(ctx: &mut Ctx) -> Result<Option<ValueId>> {
    let (x, w) = (ctx.input(0)?, ctx.input(1)?);
    let (x_zp, w_zp) = (ctx.opt_input(2), ctx.opt_input(3));
    let (xs, ws) = (ctx.known_shape(x)?, ctx.known_shape(w)?);
    let Some(conv) = geometry(ctx, &xs, &ws)? else {
        return Ok(None);
    };
    let m = conv.m as usize;
    // A zero point computed at run time (DynamicQuantizeLinear's, as onnxruntime's dynamic
    // quantizer writes for convolutions): one element of x's type, passed to the kernel.
    let run_time = x_zp.filter(|&z| {
        ctx.konst(z).is_none()
            && ctx.dtype(z) == ctx.dtype(x)
            && ctx
                .known_shape(z)
                .is_ok_and(|s| s.iter().product::<i64>() == 1)
    });
    let constant_zp = if run_time.is_some() { None } else { x_zp };
    let (Some((x_signed, xz)), Some((wv, wz))) =
        (activations(ctx, x, constant_zp), weights(ctx, w, w_zp, m))
    else {
        return Ok(None);
    };
    let q = QScalars {
        out: QOut::I32,
        x_signed,
        x_zp: xz,
        y_zp: 0,
        lo: 0,
        hi: 0,
    };
    let ones = vec![1f32; m];
    let zeros = vec![0f32; m];
    build(ctx, x, run_time, &conv, q, &wv, &wz, None, &ones, &zeros).map(Some)
}

/// A Conv of dequantized operands (QDQ), as an integer convolution with a float32 result,
/// or None where the kernel does not apply.
pub fn qdq_conv(
    ctx: &mut Ctx,
    x: ValueId,
    w: ValueId,
    b: Option<ValueId>,
) -> Result<Option<ValueId>> {
    let Some(notes) = ctx.qdq.as_deref() else {
        return Ok(None);
    };
    let (Some(dx), Some(dw)) = (
        notes.dequantized.get(&x).cloned(),
        notes.dequantized.get(&w).cloned(),
    ) else {
        return Ok(None);
    };
    let (xs, ws) = (ctx.known_shape(x)?, ctx.known_shape(w)?);
    let Some(conv) = geometry(ctx, &xs, &ws)? else {
        return Ok(None);
    };
    if ctx.dtype(x) != DType::F32 || ctx.dtype(w) != DType::F32 {
        return Ok(None);
    }
    float_product(ctx, &dx, &dw, dw.q, 0, Product::Conv(Box::new(conv)), b)
}

/// The integer product of dequantized operands — activations `dx`, constant weights `wq`
/// (`dw`'s quantized value, as `[k, n]` for a matrix product) per tensor or per channel
/// along `channel_axis` of `dw`, a bias per channel — with a float32 result, noted for a
/// QuantizeLinear that follows (`qdq_requantize`) when it has no float bias; None where the
/// kernel does not apply.
fn float_product(
    ctx: &mut Ctx,
    dx: &Dequantized,
    dw: &Dequantized,
    wq: ValueId,
    channel_axis: i64,
    product: Product,
    bias: Option<ValueId>,
) -> Result<Option<ValueId>> {
    let channels = product.channels();
    let per_tensor =
        |v: Option<ValueId>| v.is_none_or(|v| ctx.konst(v).is_some_and(|t| t.len() == 1));
    if dw.axis != channel_axis && !(per_tensor(Some(dw.scale)) && per_tensor(dw.zp)) {
        return Ok(None);
    }
    let Some((x_signed, x_zp)) = activations(ctx, dx.q, dx.zp) else {
        return Ok(None);
    };
    let Some((w, w_zp)) = weights(ctx, wq, dw.zp, channels) else {
        return Ok(None);
    };
    let (Some(sx), Some(sw)) = (
        ctx.konst(dx.scale).as_ref().and_then(scalar_f32),
        ctx.konst(dw.scale)
            .filter(|t| t.dtype == DType::F32)
            .and_then(|t| per_channel(&t, channels)),
    ) else {
        return Ok(None);
    };
    let sxw: Vec<f32> = sw.iter().map(|&s| sx * s as f32).collect();
    let Some((ibias, fbias)) = bias_of(ctx, bias, &sxw) else {
        return Ok(None);
    };
    let fp = FloatProduct {
        x: dx.q,
        product,
        x_signed,
        x_zp,
        w: Arc::new(w),
        w_zp,
        bias: ibias,
        sxw,
    };
    let q = QScalars {
        out: QOut::F32,
        x_signed,
        x_zp,
        y_zp: 0,
        lo: 0,
        hi: 0,
    };
    let y = build_product(ctx, &fp, q, &fp.sxw, &fbias)?;
    // Requantizable only without a float bias (the requantizing epilogue has none).
    if fbias.iter().all(|&v| v == 0.0)
        && let Some(n) = ctx.qdq.as_deref_mut()
    {
        n.products.insert(y, fp);
    }
    Ok(Some(y))
}

/// The op for the integer product `fp` with the epilogue `q`, and `scale` and `fbias` per
/// channel.
fn build_product(
    ctx: &mut Ctx,
    fp: &FloatProduct,
    q: QScalars,
    scale: &[f32],
    fbias: &[f32],
) -> Result<ValueId> {
    match &fp.product {
        Product::Conv(g) => build(
            ctx,
            fp.x,
            None,
            g,
            q,
            &fp.w,
            &fp.w_zp,
            fp.bias.as_deref(),
            scale,
            fbias,
        ),
        Product::MatMul {
            batch,
            m,
            k,
            n,
            shape,
        } => build_matmul(
            ctx,
            fp.x,
            None,
            q,
            [*batch, *m, *k, *n],
            shape,
            &fp.w,
            &fp.w_zp,
            fp.bias.as_deref(),
            scale,
            fbias,
        ),
    }
}

/// A product's bias `b` (one per channel of `sxw`): an int32 one dequantized by exactly
/// `x_scale · w_scale` (zero point 0) joins the int32 sums; another constant float32 one is
/// added to the float32 result. `(int32 bias, float32 bias)`; None for other biases.
#[allow(clippy::type_complexity)]
fn bias_of(ctx: &Ctx, b: Option<ValueId>, sxw: &[f32]) -> Option<(Option<Vec<i32>>, Vec<f32>)> {
    let m = sxw.len();
    let Some(b) = b else {
        return Some((None, vec![0.0; m]));
    };
    let db = ctx
        .qdq
        .as_deref()
        .and_then(|n| n.dequantized.get(&b).cloned());
    let int_bias = db.and_then(|db| {
        let q = ctx.konst(db.q).filter(|t| t.dtype == DType::I32)?;
        let s = ctx.konst(db.scale).filter(|t| t.dtype == DType::F32)?;
        let s = per_channel(&s, m)?;
        let zero = values(ctx, db.zp)?.is_none_or(|t| t.to_i64s().iter().all(|&z| z == 0));
        let same = s.iter().zip(sxw).all(|(a, b)| *a as f32 == *b);
        (zero && same && q.len() == m).then(|| q.to_i64s().iter().map(|&v| v as i32).collect())
    });
    match int_bias {
        Some(v) => Some((Some(v), vec![0.0; m])),
        None => match ctx.konst(b) {
            Some(t) if t.dtype == DType::F32 && t.len() == m => {
                Some((None, t.to_f64s().iter().map(|&v| v as f32).collect()))
            }
            _ => None,
        },
    }
}

/// A QuantizeLinear (per tensor, constant float32 scale, 8-bit result `odt`) of an integer
/// convolution's float32 result: the convolution again, requantizing in its epilogue.
pub(super) fn qdq_requantize(
    ctx: &mut Ctx,
    y: ValueId,
    scale: ValueId,
    zp: Option<ValueId>,
    odt: DType,
) -> Result<Option<ValueId>> {
    let Some(fc) = ctx.qdq.as_deref().and_then(|n| n.products.get(&y).cloned()) else {
        return Ok(None);
    };
    let (Some(sy), Some(Some(yz))) = (
        ctx.konst(scale).as_ref().and_then(scalar_f32),
        values(ctx, zp).map(|t| scalar_int(&t)),
    ) else {
        return Ok(None);
    };
    let scale: Vec<f32> = fc.sxw.iter().map(|&s| s / sy).collect();
    if scale.iter().any(|s| !s.is_finite()) {
        return Ok(None);
    }
    let Some(q) = requantizing(odt, fc.x_signed, fc.x_zp, yz) else {
        return Ok(None);
    };
    let zeros = vec![0f32; fc.product.channels()];
    build_product(ctx, &fc, q, &scale, &zeros).map(Some)
}

/// The op for the matrix product of `x` (`[batch, m, k]`, its zero point `x_zp` a run-time
/// operand or `q.x_zp`) by constant `[k, n]` weights, result shape `shape`.
#[allow(clippy::too_many_arguments)]
fn build_matmul(
    ctx: &mut Ctx,
    x: ValueId,
    x_zp: Option<ValueId>,
    q: QScalars,
    [batch, m, k, n]: [usize; 4],
    shape: &[i64],
    w: &[i8],
    w_zp: &[i32],
    bias: Option<&[i32]>,
    scale: &[f32],
    fbias: &[f32],
) -> Result<ValueId> {
    let dt = match q.out {
        QOut::I32 => DType::I32,
        QOut::F32 => DType::F32,
        QOut::U8 => DType::U8,
        QOut::I8 => DType::I8,
    };
    let blob =
        onnxc_runtime::qconv::matmul::QMatMulParams::encode(q, k, n, w, w_zp, bias, scale, fbias);
    let mut inputs = vec![x];
    inputs.extend(x_zp);
    let op = crate::kernels::QMatMul {
        blob: Arc::new(blob),
        rows: batch * m,
    };
    ctx.add(
        crate::ir::Op::kernel(op),
        inputs,
        TypeInfo::new(dt, shape.iter().map(|&d| Dim::Known(d)).collect()),
    )
}

/// The extents of `a · b` for activations `a` (`[…, m, k]`) and 2-D weights `b` (`[k,
/// n]`): batch, m, k, n and the result's shape; None for other shapes or a K past `MAX_K`.
fn matmul_dims(ctx: &Ctx, a: ValueId, b: ValueId) -> Result<Option<([usize; 4], Vec<i64>)>> {
    let (as_, bs) = (ctx.known_shape(a)?, ctx.known_shape(b)?);
    if as_.len() < 2 || bs.len() != 2 || as_[as_.len() - 1] != bs[0] {
        return Ok(None);
    }
    let (m, k, n) = (as_[as_.len() - 2], bs[0], bs[1]);
    let batch: i64 = as_[..as_.len() - 2].iter().product();
    if k as usize > MAX_K || [m, k, n, batch].iter().any(|&d| d <= 0) {
        return Ok(None);
    }
    let mut shape = as_[..as_.len() - 1].to_vec();
    shape.push(n);
    Ok(Some((
        [batch as usize, m as usize, k as usize, n as usize],
        shape,
    )))
}

/// MatMulInteger on the kernel (int32 result), A's zero point constant or computed at run
/// time; None where it does not apply.
pub fn matmul_integer(ctx: &mut Ctx) -> Result<Option<ValueId>> {
    let (a, b) = (ctx.input(0)?, ctx.input(1)?);
    let (a_zp, b_zp) = (ctx.opt_input(2), ctx.opt_input(3));
    integer_matmul(ctx, a, a_zp, b, b_zp)
}

/// The int32 product `(a − a_zp)·(b − b_zp)` on the kernel (b constant 2-D, a_zp one
/// element, constant or computed at run time); None where it does not apply.
pub fn integer_matmul(
    ctx: &mut Ctx,
    a: ValueId,
    a_zp: Option<ValueId>,
    b: ValueId,
    b_zp: Option<ValueId>,
) -> Result<Option<ValueId>> {
    let Some((dims, shape)) = matmul_dims(ctx, a, b)? else {
        return Ok(None);
    };
    let x_signed = match ctx.dtype(a) {
        DType::U8 => false,
        DType::I8 => true,
        _ => return Ok(None),
    };
    // The zero point: a constant in the blob, or one run-time element of A's type.
    let (xz, run_time) = match a_zp {
        None => (0, None),
        Some(z) if ctx.dtype(z) != ctx.dtype(a) => return Ok(None),
        Some(z) => match ctx.konst(z) {
            Some(t) if t.len() == 1 => (t.to_i64s()[0] as i32, None),
            Some(_) => return Ok(None),
            None if ctx.known_shape(z)?.iter().product::<i64>() == 1 => (0, Some(z)),
            None => return Ok(None),
        },
    };
    let Some((wv, wz)) = weights(ctx, b, b_zp, dims[3]) else {
        return Ok(None);
    };
    let q = QScalars {
        out: QOut::I32,
        x_signed,
        x_zp: xz,
        y_zp: 0,
        lo: 0,
        hi: 0,
    };
    let n = dims[3];
    let (ones, zeros) = (vec![1f32; n], vec![0f32; n]);
    build_matmul(
        ctx, a, run_time, q, dims, &shape, &wv, &wz, None, &ones, &zeros,
    )
    .map(Some)
}

/// QLinearMatMul on the kernel, requantizing as the reference does; None where it does not
/// apply.
pub fn qlinear_matmul(ctx: &mut Ctx) -> Result<Option<ValueId>> {
    let (a, a_s, a_zp) = (ctx.input(0)?, ctx.input(1)?, ctx.opt_input(2));
    let (b, b_s, b_zp) = (ctx.input(3)?, ctx.input(4)?, ctx.opt_input(5));
    let (y_s, y_zp) = (ctx.input(6)?, ctx.opt_input(7));
    let Some((dims, shape)) = matmul_dims(ctx, a, b)? else {
        return Ok(None);
    };
    let n = dims[3];
    let Some((x_signed, xz)) = activations(ctx, a, a_zp) else {
        return Ok(None);
    };
    let Some((wv, wz)) = weights(ctx, b, b_zp, n) else {
        return Ok(None);
    };
    let odt = y_zp.map_or(ctx.dtype(a), |z| ctx.dtype(z));
    let Some((scale, yz)) = qlinear_scales(ctx, a_s, b_s, y_s, y_zp, n) else {
        return Ok(None);
    };
    let Some(q) = requantizing(odt, x_signed, xz, yz) else {
        return Ok(None);
    };
    let zeros = vec![0f32; n];
    build_matmul(
        ctx, a, None, q, dims, &shape, &wv, &wz, None, &scale, &zeros,
    )
    .map(Some)
}

/// A MatMul of dequantized operands (QDQ; constant 2-D weights, per tensor or per column)
/// as an integer product with a float32 result; None where the kernel does not apply.
pub fn qdq_matmul(ctx: &mut Ctx, a: ValueId, b: ValueId) -> Result<Option<ValueId>> {
    qdq_product(ctx, a, b, false, None)
}

/// A Gemm of dequantized operands (QDQ; A not transposed, alpha and beta 1, constant 2-D B
/// and a bias per column), as `qdq_matmul`; None where the kernel does not apply.
pub fn qdq_gemm(
    ctx: &mut Ctx,
    a: ValueId,
    b: ValueId,
    trans_b: bool,
    c: Option<ValueId>,
) -> Result<Option<ValueId>> {
    qdq_product(ctx, a, b, trans_b, c)
}

/// `a · b` (`b` transposed when `trans_b`) plus a bias per column, of dequantized operands.
fn qdq_product(
    ctx: &mut Ctx,
    a: ValueId,
    b: ValueId,
    trans_b: bool,
    bias: Option<ValueId>,
) -> Result<Option<ValueId>> {
    let Some(notes) = ctx.qdq.as_deref() else {
        return Ok(None);
    };
    let (Some(da), Some(db)) = (
        notes.dequantized.get(&a).cloned(),
        notes.dequantized.get(&b).cloned(),
    ) else {
        return Ok(None);
    };
    if ctx.dtype(a) != DType::F32 || ctx.dtype(b) != DType::F32 {
        return Ok(None);
    }
    // B as `[k, n]`: a transposed B is `[n, k]`, its columns (the output channels) along
    // axis 0.
    let bt = if trans_b {
        if ctx.konst(db.q).is_none_or(|t| t.shape.len() != 2) {
            return Ok(None);
        }
        build::transpose(ctx, db.q, &[1, 0])?
    } else {
        db.q
    };
    let Some((dims, shape)) = matmul_dims(ctx, a, bt)? else {
        return Ok(None);
    };
    let n = dims[3];
    // A bias per column: `[n]` or `[1, n]` (not one that broadcasts along the rows).
    if let Some(c) = bias {
        let cs = ctx.known_shape(c)?;
        if cs != [n as i64] && cs != [1, n as i64] {
            return Ok(None);
        }
    }
    let product = Product::MatMul {
        batch: dims[0],
        m: dims[1],
        k: dims[2],
        n,
        shape,
    };
    float_product(
        ctx,
        &da,
        &db,
        bt,
        if trans_b { 0 } else { 1 },
        product,
        bias,
    )
}
