//! onnxruntime's quantized contrib ops (domain `com.microsoft`) beyond the QOperator
//! elementwise ones of `contrib.rs`: QLinearAveragePool, QLinearReduceMean and QLinearWhere
//! (which its static quantizer writes), MatMulIntegerToFloat and DynamicQuantizeMatMul (its
//! dynamic quantizer and graph optimizer), QEmbedLayerNormalization (its dynamic quantizer on
//! a fused BERT), and MatMulNBits (block-quantized 2/4/8-bit weights of LLM exports).
//!
//! The averages are exact: the window or axis sum of `x − z_x` is an integer (float64), the
//! mean is rounded once, then `round(mean · s_x / s_y) + z_y` in float64 (half to even,
//! saturated) — "dequantize, average in float, quantize" of onnxruntime's documentation
//! without the float32 rounding of each dequantized value, which onnxruntime's kernels have
//! (and so can differ by one step where a value falls near a rounding tie). The integer
//! products go through `qlinear::centered_matmul` (the exact float32 plans where the constant
//! weights allow). MatMulNBits dequantizes its constant weights at compile time into a
//! float32 `[K, N]` matrix (4·K·N bytes in the object file: 8× the packed 4-bit size) and runs
//! the float32 GEMM.

use super::contrib::{param, qout, qtensor, saturate, zero_point};
use crate::error::Result;
use crate::frontend::build;
use crate::frontend::ctx::Ctx;
use crate::frontend::ops::{linalg, pool, qlinear, quant};
use crate::ir::dim::Shape;
use crate::ir::expr::{self, BinOp, E, UnOp};
use crate::ir::graph::ReduceKind;
use crate::ir::{DType, Tensor, ValueId};

fn f64c(v: f64) -> E {
    expr::f(DType::F64, v)
}

/// `round(v · s_x / s_y) + z_y` of a float64 `v`, saturated to `odt` (operands: `v` at 0 and
/// the scales/zero point registered in `inputs`).
fn requantize_mean(
    ctx: &Ctx,
    v: E,
    sx: ValueId,
    sy: ValueId,
    zy: Option<ValueId>,
    odt: DType,
    inputs: &mut Vec<ValueId>,
) -> E {
    inputs.push(sx);
    let sxv = expr::cast(param(ctx, sx, inputs.len() as u32 - 1), DType::F64);
    inputs.push(sy);
    let syv = expr::cast(param(ctx, sy, inputs.len() as u32 - 1), DType::F64);
    let zyv = expr::cast(zero_point(ctx, zy, inputs), DType::F64);
    let (lo, hi) = build::int_range(odt).expect("8-bit type");
    let q = expr::binary(
        BinOp::Add,
        expr::unary(
            UnOp::Round,
            expr::binary(BinOp::Div, expr::binary(BinOp::Mul, v, sxv), syv),
        ),
        zyv,
    );
    expr::cast(
        expr::binary(BinOp::Max, expr::binary(BinOp::Min, q, f64c(hi)), f64c(lo)),
        odt,
    )
}

/// `x − z_x` as float64 (exact), a map over x's shape.
fn centered_f64(ctx: &mut Ctx, x: ValueId, zx: Option<ValueId>) -> Result<ValueId> {
    centered(ctx, x, zx, DType::F64)
}

/// `x − z_x` (8-bit values, an integer of at most 255 in magnitude) as the float type `dt`,
/// exactly; a map over x's shape.
fn centered(ctx: &mut Ctx, x: ValueId, zx: Option<ValueId>, dt: DType) -> Result<ValueId> {
    let mut inputs = vec![x];
    let z = zero_point(ctx, zx, &mut inputs);
    let body = expr::binary(
        BinOp::Sub,
        expr::cast(build::load_same(ctx.dtype(x), 0, ctx.rank(x)), dt),
        expr::cast(z, dt),
    );
    let shape = ctx.shape(x);
    ctx.map(dt, shape, inputs, body)
}

/// QLinearAveragePool (X, x_scale, x_zero_point?, y_scale, y_zero_point?): AveragePool's
/// attributes, NCHW or (`channels_last`) NHWC.
pub fn qlinear_average_pool(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = qtensor(ctx, 0, 1, 2, "X")?;
    let (sy, zy, odt) = qout(ctx, 3, 4, ctx.dtype(x.x))?;
    let r = ctx.rank(x.x);
    if r < 3 {
        return Err(ctx.err(format!(
            "X has rank {r}; it needs batch, channel and spatial dims"
        )));
    }
    let channels_last = ctx.attr_i_or("channels_last", 0)? != 0;
    // A window's sum of centered 8-bit values (|v| ≤ 255) is an integer. Below 2^20 in
    // magnitude (windows of up to 4,112 taps) float32 holds it exactly and the pool
    // kernel's mean (a few float32 ulps from sum / count) times the count rounds back to
    // it: the sum is recovered and divided in float64, the mean of the generic float64
    // path, bit for bit.
    let taps: i64 = ctx.attr_ints("kernel_shape").map_or(i64::MAX, |k| {
        k.iter()
            .try_fold(1i64, |a, &v| a.checked_mul(v))
            .unwrap_or(i64::MAX)
    });
    let small = (0..=(1 << 20) / 255).contains(&taps);
    let to_nchw = |ctx: &mut Ctx, c: ValueId| -> Result<ValueId> {
        if !channels_last {
            return Ok(c);
        }
        let perm: Vec<usize> = [0, r - 1].into_iter().chain(1..r - 1).collect();
        build::transpose(ctx, c, &perm)
    };
    let c = centered(ctx, x.x, x.zp, if small { DType::F32 } else { DType::F64 })?;
    let c = to_nchw(ctx, c)?;
    let kernel = if small {
        pool::average_pool_kernel_of(ctx, c)?
    } else {
        None
    };
    let mut mean = match kernel {
        Some((avg, counts)) => {
            let shape = ctx.shape(avg);
            let cnt = expr::load(DType::F64, 1, (2..r as u32).map(expr::var).collect());
            let sum = expr::unary(
                UnOp::Round,
                expr::binary(
                    BinOp::Mul,
                    expr::cast(build::load_same(DType::F32, 0, r), DType::F64),
                    cnt.clone(),
                ),
            );
            let body = expr::binary(BinOp::Div, sum, cnt);
            ctx.map(DType::F64, shape, vec![avg, counts], body)?
        }
        None => pool::average_pool_f64_of(ctx, c)?,
    };
    if channels_last {
        let perm: Vec<usize> = [0].into_iter().chain(2..r).chain([1]).collect();
        mean = build::transpose(ctx, mean, &perm)?;
    }
    let mut inputs = vec![mean];
    let body = requantize_mean(
        ctx,
        build::load_same(DType::F64, 0, r),
        x.scale,
        sy,
        zy,
        odt,
        &mut inputs,
    );
    let shape = ctx.shape(mean);
    Ok(vec![ctx.map(odt, shape, inputs, body)?])
}

/// QLinearReduceMean (data, data_scale, data_zero_point?, reduced_scale,
/// reduced_zero_point?), attributes `axes` and `keepdims` (both required).
pub fn qlinear_reduce_mean(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = qtensor(ctx, 0, 1, 2, "data")?;
    let (sy, zy, odt) = qout(ctx, 3, 4, ctx.dtype(x.x))?;
    let dims = ctx.known_shape(x.x)?;
    let r = dims.len();
    let axes = ctx
        .attr_ints("axes")
        .ok_or_else(|| ctx.err("attribute 'axes' is required"))?;
    let axes = build::axes(ctx, &axes, r)?;
    let keepdims = ctx
        .attr_i("keepdims")?
        .ok_or_else(|| ctx.err("attribute 'keepdims' is required"))?
        != 0;
    let n: i64 = axes.iter().map(|&a| dims[a]).product();
    if n == 0 {
        return Err(ctx.err("the reduced axes are empty; their mean is undefined"));
    }
    let c = centered_f64(ctx, x.x, x.zp)?;
    let sum = build::reduce(ctx, c, ReduceKind::Sum, &axes, keepdims, |l| l)?;
    let rr = ctx.rank(sum);
    let mut inputs = vec![sum];
    let mean = expr::binary(
        BinOp::Div,
        build::load_same(DType::F64, 0, rr),
        f64c(n as f64),
    );
    let body = requantize_mean(ctx, mean, x.scale, sy, zy, odt, &mut inputs);
    let shape = ctx.shape(sum);
    Ok(vec![ctx.map(odt, shape, inputs, body)?])
}

/// QLinearWhere (condition, X, x_scale, x_zero_point, Y, y_scale, y_zero_point, z_scale,
/// z_zero_point): X or Y by the condition (broadcast), each requantized to Z's scale and zero
/// point (`round(s (v − z) / s_Z) + z_Z` in float32, as QLinearConcat does).
pub fn qlinear_where(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let cond = ctx.input(0)?;
    build::expect_types(ctx, cond, "condition", &[DType::Bool])?;
    let a = qtensor(ctx, 1, 2, 3, "X")?;
    let b = qtensor(ctx, 4, 5, 6, "Y")?;
    if ctx.dtype(a.x) != ctx.dtype(b.x) {
        return Err(ctx.err(format!(
            "X is {} and Y is {}; they must have the same type",
            ctx.dtype(a.x),
            ctx.dtype(b.x)
        )));
    }
    let (sz, zz, odt) = qout(ctx, 7, 8, ctx.dtype(a.x))?;
    let shapes = [ctx.shape(cond), ctx.shape(a.x), ctx.shape(b.x)];
    let out = build::broadcast_shapes(ctx, &shapes)?;
    let mut inputs = vec![cond, a.x, b.x, sz];
    let szv = param(ctx, sz, 3);
    let zzv = zero_point(ctx, zz, &mut inputs);
    let requant = |ctx: &Ctx, q: &super::contrib::QTensor, k: u32, inputs: &mut Vec<ValueId>| {
        let l = expr::cast(
            build::bload(ctx.dtype(q.x), k, &shapes[k as usize], &out),
            DType::F32,
        );
        inputs.push(q.scale);
        let s = param(ctx, q.scale, inputs.len() as u32 - 1);
        let z = zero_point(ctx, q.zp, inputs);
        let d = expr::binary(BinOp::Mul, expr::binary(BinOp::Sub, l, z), s);
        saturate(expr::binary(BinOp::Div, d, szv.clone()), zzv.clone(), odt)
    };
    let va = requant(ctx, &a, 1, &mut inputs);
    let vb = requant(ctx, &b, 2, &mut inputs);
    let c = build::bload(DType::Bool, 0, &shapes[0], &out);
    Ok(vec![ctx.map(odt, out, inputs, expr::select(c, va, vb))?])
}

/// A scale (float32) of one element, or a vector of `n` (per column): its expression at
/// column var `col` of operand `k`.
fn scale_at(ctx: &Ctx, s: ValueId, k: u32, col: E, n: i64, what: &str) -> Result<E> {
    build::expect_types(ctx, s, what, &[DType::F32])?;
    let ss = ctx.known_shape(s)?;
    if ss.iter().product::<i64>() == 1 {
        return Ok(expr::load(DType::F32, k, vec![expr::i(0); ss.len()]));
    }
    if ss == [n] {
        return Ok(expr::load(DType::F32, k, vec![col]));
    }
    Err(ctx.unsupported(format!(
        "{what} has shape {ss:?}; onnxc takes one element or one per column ([{n}])"
    )))
}

/// `(A − a_zp)(B − b_zp) · a_scale · b_scale + bias` in float32 (the scales' product first,
/// as onnxruntime computes it).
#[allow(clippy::too_many_arguments, reason = "the op's operands")]
pub(crate) fn integer_to_float(
    ctx: &mut Ctx,
    a: ValueId,
    a_scale: ValueId,
    a_zp: Option<ValueId>,
    b: ValueId,
    b_scale: ValueId,
    b_zp: Option<ValueId>,
    bias: Option<ValueId>,
) -> Result<ValueId> {
    for (v, what) in [(a_zp, "a_zero_point"), (b_zp, "b_zero_point")] {
        if let Some(z) = v
            && ctx.konst(z).is_some_and(|t| t.is_empty())
        {
            return Err(ctx.err(format!("{what} is empty")));
        }
    }
    if let Some(z) = a_zp
        && ctx.known_shape(z)?.iter().product::<i64>() != 1
    {
        return Err(ctx.unsupported("a per-row a_zero_point; onnxc takes one element (per tensor)"));
    }
    let acc = qlinear::centered_matmul(ctx, a, a_zp, b, b_zp, ["A", "B"])?;
    let r = ctx.rank(acc);
    let n = ctx.known_shape(b)?.last().copied().unwrap_or(1);
    let col = expr::var(r as u32 - 1);
    let mut inputs = vec![acc, a_scale, b_scale];
    let sa = scale_at(ctx, a_scale, 1, col.clone(), 1, "a_scale")?;
    let sb = scale_at(ctx, b_scale, 2, col.clone(), n, "b_scale")?;
    let mut v = expr::binary(
        BinOp::Mul,
        expr::cast(build::load_same(ctx.dtype(acc), 0, r), DType::F32),
        expr::binary(BinOp::Mul, sa, sb),
    );
    if let Some(bias) = bias {
        build::expect_types(ctx, bias, "bias", &[DType::F32])?;
        if ctx.known_shape(bias)? != [n] {
            return Err(ctx.err(format!(
                "bias has shape {:?}; it must be [{n}] (B's columns)",
                ctx.known_shape(bias)?
            )));
        }
        inputs.push(bias);
        v = expr::binary(BinOp::Add, v, expr::load(DType::F32, 3, vec![col]));
    }
    let shape = ctx.shape(acc);
    ctx.map(DType::F32, shape, inputs, v)
}

/// MatMulIntegerToFloat (A, B, a_scale, b_scale, a_zero_point?, b_zero_point?, bias?).
pub fn matmul_integer_to_float(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (a, b, sa, sb) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?, ctx.input(3)?);
    let (za, zb, bias) = (ctx.opt_input(4), ctx.opt_input(5), ctx.opt_input(6));
    Ok(vec![integer_to_float(ctx, a, sa, za, b, sb, zb, bias)?])
}

/// DynamicQuantizeMatMul (A float32, B, b_scale, b_zero_point?, bias?): A quantized to
/// uint8 as DynamicQuantizeLinear does, then MatMulIntegerToFloat.
pub fn dynamic_quantize_matmul(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (a, b, sb) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    let (zb, bias) = (ctx.opt_input(3), ctx.opt_input(4));
    let [aq, sa, za] = quant::dynamic_quantize(ctx, a)?;
    Ok(vec![integer_to_float(
        ctx,
        aq,
        sa,
        Some(za),
        b,
        sb,
        zb,
        bias,
    )?])
}

/// `(q − zero_point) · scale` in float32 for an integer `q` and one-element `scale` and
/// `zero_point`: the difference exact in int32, then one float32 product (onnxruntime's
/// dequantization of its quantized embedding tables).
fn dequantize_per_tensor(
    ctx: &mut Ctx,
    q: ValueId,
    scale: ValueId,
    zero_point: ValueId,
    what: &str,
) -> Result<ValueId> {
    let qt = build::expect_types(ctx, q, what, &[DType::U8, DType::I8])?;
    build::expect_types(ctx, scale, &format!("{what}'s scale"), &[DType::F32])?;
    build::expect_types(ctx, zero_point, &format!("{what}'s zero point"), &[qt])?;
    for (v, part) in [(scale, "scale"), (zero_point, "zero point")] {
        let shape = ctx.known_shape(v)?;
        if shape.iter().product::<i64>() != 1 {
            return Err(ctx.unsupported(format!(
                "{what}'s {part} has shape {shape:?}; onnxc takes one element (per tensor)"
            )));
        }
    }
    let shape = ctx.shape(q);
    let r = shape.len();
    let (rs, rz) = (ctx.rank(scale), ctx.rank(zero_point));
    // Operand k's one element.
    let at = |k: u32, dt: DType, rank: usize| expr::load(dt, k, vec![expr::i(0); rank]);
    let centered = expr::binary(
        BinOp::Sub,
        expr::cast(build::load_same(qt, 0, r), DType::I32),
        expr::cast(at(2, qt, rz), DType::I32),
    );
    let body = expr::binary(
        BinOp::Mul,
        expr::cast(centered, DType::F32),
        at(1, DType::F32, rs),
    );
    ctx.map(DType::F32, shape, vec![q, scale, zero_point], body)
}

/// QEmbedLayerNormalization (input_ids, segment_ids?, word, position and segment? embeddings,
/// gamma and beta, all quantized; mask?; their scales; their zero points): the tables
/// dequantized (per tensor), then EmbedLayerNormalization. Outputs the normalized sum and
/// the mask index.
pub fn qembed_layer_norm(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let tables = [
        (2, 8, 13, "word_embedding_quant"),
        (3, 9, 14, "position_embedding_quant"),
        (4, 10, 15, "segment_embedding"),
        (5, 11, 16, "gamma_quant"),
        (6, 12, 17, "beta_quant"),
    ];
    let saved = ctx.inputs.clone();
    for (q, scale, zero_point, what) in tables {
        let Some(qv) = ctx.opt_input(q) else {
            if q == 4 {
                continue;
            }
            return Err(ctx.err(format!("input {q} ({what}) is required")));
        };
        let (sv, zv) = (ctx.input(scale)?, ctx.input(zero_point)?);
        let table = dequantize_per_tensor(ctx, qv, sv, zv, what)?;
        ctx.inputs[q] = Some(table);
    }
    // EmbedLayerNormalization's inputs: the ids, the float tables, the mask; no position ids.
    ctx.inputs.truncate(8);
    let built = super::transformer::embed_layer_norm(ctx);
    ctx.inputs = saved;
    let mut outs = built?;
    outs.truncate(2);
    Ok(outs)
}

/// Unpacks the `bits`-wide unsigned values of `bytes`, least significant first.
fn unpack(bytes: &[u8], bits: usize) -> Vec<u8> {
    let per = 8 / bits;
    let mask = ((1u16 << bits) - 1) as u8;
    let mut out = Vec::with_capacity(bytes.len() * per);
    for &b in bytes {
        for k in 0..per {
            out.push((b >> (k * bits)) & mask);
        }
    }
    out
}

/// MatMulNBits (A, B, scales, zero_points?, g_idx?, bias?), attributes K, N, bits (2, 4 or
/// 8 here), block_size: `A · W` with `W[k, n] = (q − zp) · scale` of k's block, dequantized
/// at compile time.
pub fn matmul_nbits(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let a = ctx.input(0)?;
    build::expect_types(ctx, a, "A", &[DType::F32])?;
    let (b, scales) = (ctx.input(1)?, ctx.input(2)?);
    let (zps, g_idx, bias) = (ctx.opt_input(3), ctx.opt_input(4), ctx.opt_input(5));
    let attr = |name: &str| -> Result<i64> {
        ctx.attr_i(name)?
            .ok_or_else(|| ctx.err(format!("attribute '{name}' is required")))
    };
    let (k, n, block) = (attr("K")?, attr("N")?, attr("block_size")?);
    let bits = ctx.attr_i_or("bits", 4)?;
    if ![2, 4, 8].contains(&bits) {
        return Err(ctx.unsupported(format!(
            "bits={bits}; onnxc unpacks 2-, 4- and 8-bit weights"
        )));
    }
    if k < 1 || n < 1 || block < 16 || (block & (block - 1)) != 0 {
        return Err(ctx.err(format!(
            "K={k}, N={n}, block_size={block}: K and N must be positive and block_size a power of 2 of at least 16"
        )));
    }
    if ctx.attr_i_or("weight_prepacked", 0)? != 0 {
        return Err(ctx.unsupported(
            "weight_prepacked=1 (weights in onnxruntime's own packed layout); export the model with plain packed weights",
        ));
    }
    if g_idx.is_some() {
        return Err(ctx.unsupported(
            "the deprecated g_idx input (act-order block indices); re-quantize without it",
        ));
    }
    let blocks = (k + block - 1) / block;
    let blob = block * bits / 8;
    let (bits, block_u, k_u, n_u) = (bits as usize, block as usize, k as usize, n as usize);
    let constant = |v: ValueId, what: &str| -> Result<Tensor> {
        ctx.konst(v).ok_or_else(|| {
            ctx.unsupported(format!(
                "{what} is computed at run time; MatMulNBits needs constant weights (they are dequantized at compile time)"
            ))
        })
    };
    let bt = constant(b, "B")?;
    if bt.dtype != DType::U8 || bt.shape != [n, blocks, blob] {
        return Err(ctx.err(format!(
            "B is {} {:?}; it must be uint8 [{n}, {blocks}, {blob}] (N, K blocks, block bytes)",
            bt.dtype, bt.shape
        )));
    }
    let st = constant(scales, "scales")?;
    if st.len() != (n * blocks) as usize {
        return Err(ctx.err(format!(
            "scales has {} elements; it must have N·k_blocks = {}",
            st.len(),
            n * blocks
        )));
    }
    let svals = st.to_f64s();
    let default_zp = (1u32 << (bits - 1)) as f64;
    let zvals: Vec<f64> = match zps {
        None => vec![default_zp; (n * blocks) as usize],
        Some(z) => {
            let zt = constant(z, "zero_points")?;
            if zt.dtype == DType::U8 {
                let per_row = (blocks as usize * bits).div_ceil(8);
                if zt.len() != n_u * per_row {
                    return Err(ctx.err(format!(
                        "packed zero_points has {} bytes; it must have N·ceil(k_blocks·bits/8) = {}",
                        zt.len(),
                        n_u * per_row
                    )));
                }
                let bytes: &[u8] = &zt.data;
                (0..n_u)
                    .flat_map(|row| {
                        unpack(&bytes[row * per_row..(row + 1) * per_row], bits)
                            .into_iter()
                            .take(blocks as usize)
                            .map(f64::from)
                            .collect::<Vec<f64>>()
                    })
                    .collect()
            } else {
                if zt.len() != (n * blocks) as usize {
                    return Err(ctx.err(format!(
                        "zero_points has {} elements; unpacked ones must be N·k_blocks = {}",
                        zt.len(),
                        n * blocks
                    )));
                }
                zt.to_f64s()
            }
        }
    };
    let bytes: &[u8] = &bt.data;
    let mut w = vec![0f32; k_u * n_u];
    for col in 0..n_u {
        for blk in 0..blocks as usize {
            let start = (col * blocks as usize + blk) * blob as usize;
            let q = unpack(&bytes[start..start + blob as usize], bits);
            let s = svals[col * blocks as usize + blk] as f32;
            let z = zvals[col * blocks as usize + blk] as f32;
            for (j, &qv) in q.iter().enumerate().take(block_u) {
                let kk = blk * block_u + j;
                if kk < k_u {
                    w[kk * n_u + col] = (qv as f32 - z) * s;
                }
            }
        }
    }
    let wbytes: Vec<u8> = w.iter().flat_map(|v| v.to_le_bytes()).collect();
    let wt = ctx.constant(Tensor::new(DType::F32, vec![k, n], wbytes));
    let ashape = ctx.known_shape(a)?;
    if ashape.last() != Some(&k) {
        return Err(ctx.err(format!(
            "A has shape {ashape:?}; its last dim must be K={k}"
        )));
    }
    let y = linalg::matmul_values(ctx, a, wt, false, false)?;
    let Some(bias) = bias else {
        return Ok(vec![y]);
    };
    build::expect_types(ctx, bias, "bias", &[DType::F32])?;
    if ctx.known_shape(bias)? != [n] {
        return Err(ctx.err(format!("bias must have shape [{n}]")));
    }
    let ys: Shape = ctx.shape(y);
    let r = ys.len();
    let body = expr::binary(
        BinOp::Add,
        build::load_same(DType::F32, 0, r),
        expr::load(DType::F32, 1, vec![expr::var(r as u32 - 1)]),
    );
    Ok(vec![ctx.map(DType::F32, ys, vec![y, bias], body)?])
}

#[cfg(test)]
mod tests {
    use super::unpack;

    #[test]
    fn unpacks_low_bits_first() {
        assert_eq!(unpack(&[0x21, 0xf0], 4), vec![1, 2, 0, 15]);
        assert_eq!(unpack(&[0b1110_0100], 2), vec![0, 1, 2, 3]);
        assert_eq!(unpack(&[7], 8), vec![7]);
    }
}
