//! Quantized products on the integer kernels (`kernels::QConv`, `kernels::QMatMul`: exact
//! int32 sums): QLinearConv, ConvInteger, QLinearMatMul and MatMulInteger with constant
//! weights, and the QDQ groups of QDQ models. The groups are recognized while the nodes are
//! imported, as onnxruntime's QDQ selectors do: DequantizeLinear notes its operands
//! (`Notes`); a Conv or MatMul of dequantized operands (constant weights) becomes an integer
//! product with a float32 result; a QuantizeLinear of that result a second one that
//! requantizes in its epilogue (the float one is then dead, unless something else reads
//! it). Data movement and MaxPool whose inputs are dequantized alike run on the quantized
//! values (`on_quantized_values`), and a QuantizeLinear of a value dequantized with its own
//! parameters is that value (`quantize_identity`), so QDQ data stays 8-bit between them.
//!
//! Where the kernels do not apply (weights computed at run time, grouped convolutions of few
//! channels per group, half-precision scales, zero points or scales that are not per tensor
//! or per channel), the builders fall back to the float paths of `quant.rs`, `nn.rs` and
//! `linalg.rs`, which compute the same values.
//!
//! Here: the notes and the quantized values kept 8-bit (sums, concats, transparent ops,
//! identities); `products.rs`: the integer products and their requantization.

use crate::error::Result;
use crate::frontend::build;
use crate::frontend::ctx::Ctx;
use crate::ir::graph::TypeInfo;
use crate::ir::{DType, Tensor, ValueId};
use std::collections::HashMap;

mod products;

use products::{FloatProduct, qdq_requantize};
pub use products::{
    conv_integer, integer_matmul, matmul_integer, qdq_conv, qdq_gemm, qdq_matmul, qlinear_conv,
    qlinear_matmul,
};

/// What the import has seen of the quantized values so far.
#[derive(Default)]
pub struct Notes {
    /// Results of DequantizeLinear: the quantized value and its parameters.
    dequantized: HashMap<ValueId, Dequantized>,
    /// Float32 results of integer products built from a QDQ Conv or MatMul.
    products: HashMap<ValueId, FloatProduct>,
    /// Float32 results of Concats of values dequantized per tensor with different
    /// parameters: the parts and the axis, for a QuantizeLinear of the result
    /// (`quantize_concat`).
    concats: HashMap<ValueId, (Vec<Dequantized>, usize)>,
    /// Float32 results of an Add of two values of one shape dequantized per tensor, and of
    /// a Relu of such a sum, for a QuantizeLinear of the result (`quantize_sum`).
    sums: HashMap<ValueId, Sum>,
}

/// A sum of two dequantized values: their operands and parameters, and whether a Relu
/// followed it.
#[derive(Clone)]
struct Sum {
    a: (Dequantized, PerTensor),
    b: (Dequantized, PerTensor),
    relu: bool,
}

/// A DequantizeLinear's operands (per tensor, or per channel along `axis`).
#[derive(Clone)]
struct Dequantized {
    q: ValueId,
    scale: ValueId,
    zp: Option<ValueId>,
    axis: i64,
}

/// Records the result `y` of a DequantizeLinear of `q` (no blocks).
pub fn note_dequantized(
    ctx: &mut Ctx,
    y: ValueId,
    q: ValueId,
    scale: ValueId,
    zp: Option<ValueId>,
    axis: i64,
) {
    if let Some(n) = ctx.qdq.as_deref_mut() {
        n.dequantized.insert(y, Dequantized { q, scale, zp, axis });
    }
}

/// The data inputs of ops whose result on dequantized values is the dequantization of
/// their result on the quantized values: ops that move or select elements, and MaxPool
/// (dequantization with a positive scale keeps the order). `count` is the node's inputs.
fn transparent_inputs(op: &str, count: usize, outputs: usize) -> Option<Vec<usize>> {
    Some(match op {
        "MaxPool" if outputs == 1 => vec![0],
        "Reshape" | "Flatten" | "Squeeze" | "Unsqueeze" | "Transpose" | "Identity"
        | "DepthToSpace" | "SpaceToDepth" => vec![0],
        "Concat" => (0..count).collect(),
        _ => return None,
    })
}

/// A per-tensor quantization's constants: scale, zero point (0 when absent) and type.
#[derive(Clone, Debug, PartialEq)]
struct PerTensor {
    scale: f32,
    zp: i64,
    dtype: DType,
}

/// The per-tensor float32 parameters a DequantizeLinear used, with a normal scale (so that
/// quantizing its result again gives the quantized value back).
fn per_tensor(ctx: &Ctx, d: &Dequantized) -> Option<PerTensor> {
    let (scale, zp) = scalar_params(ctx, d.scale, d.zp)?;
    Some(PerTensor {
        scale,
        zp,
        dtype: ctx.dtype(d.q),
    })
}

/// A constant float32 scale (normal, so that quantizing a dequantized value gives it back)
/// and a constant scalar zero point (0 when absent).
fn scalar_params(ctx: &Ctx, scale: ValueId, zp: Option<ValueId>) -> Option<(f32, i64)> {
    let scale = ctx.konst(scale).as_ref().and_then(scalar_f32)?;
    let zp = scalar_int(&values(ctx, zp)?)?;
    (scale.is_normal() && (scale.abs() * 65536.0).is_finite()).then_some((scale, zp))
}

/// A node of a transparent op (`transparent_inputs`) whose data inputs are all dequantized
/// with the same per-tensor parameters: built on the quantized values, its outputs
/// dequantized (and noted), so that the QuantizeLinear after it gives the quantized values
/// back (`quantize_identity`) and the data stays 8-bit. None where that does not apply, or
/// where the builder refuses the quantized type (then the node is built as usual).
pub fn on_quantized_values(
    ctx: &mut Ctx,
    domain: &str,
    builder: crate::frontend::registry::Builder,
) -> Result<Option<Vec<ValueId>>> {
    if !domain.is_empty() {
        return Ok(None);
    }
    let Some(notes) = ctx.qdq.as_deref() else {
        return Ok(None);
    };
    if let Some(sum) = sum_of(ctx, notes) {
        // Built in float32 as usual; a QuantizeLinear of it runs the integer sum instead
        // (`quantize_sum`).
        let outs = builder(ctx)?;
        if let &[y] = &outs[..]
            && let Some(n) = ctx.qdq.as_deref_mut()
        {
            n.sums.insert(y, sum);
        }
        return Ok(Some(outs));
    }
    let Some(data) = transparent_inputs(
        ctx.node.op_type.as_deref().unwrap_or_default(),
        ctx.num_inputs(),
        ctx.node.output.len(),
    ) else {
        return Ok(None);
    };
    let op = ctx.node.op_type.as_deref().unwrap_or_default();
    if op == "Concat"
        && let Some(parts) = dequantized_parts(ctx, notes, &data)
    {
        let differ = parts.windows(2).any(|w| w[0].1 != w[1].1);
        if differ {
            // Built in float32 as usual; a QuantizeLinear of it concatenates the parts
            // requantized instead (`quantize_concat`).
            let outs = builder(ctx)?;
            if let &[y] = &outs[..]
                && let crate::ir::graph::Op::Concat { axis } = ctx.g.node(y.node).op
                && let Some(n) = ctx.qdq.as_deref_mut()
            {
                n.concats
                    .insert(y, (parts.into_iter().map(|(d, _)| d).collect(), axis));
            }
            return Ok(Some(outs));
        }
    }
    let Some(notes) = ctx.qdq.as_deref() else {
        return Ok(None);
    };
    let mut quantized = Vec::new();
    let mut params: Option<(Dequantized, PerTensor)> = None;
    for &i in &data {
        let Some(d) = ctx
            .inputs
            .get(i)
            .copied()
            .flatten()
            .and_then(|v| notes.dequantized.get(&v))
        else {
            return Ok(None);
        };
        let Some(pt) = per_tensor(ctx, d) else {
            return Ok(None);
        };
        match &params {
            Some((_, first)) if *first != pt => return Ok(None),
            Some(_) => {}
            None => params = Some((d.clone(), pt)),
        }
        quantized.push((i, d.q));
    }
    let Some((dq, pt)) = params else {
        return Ok(None);
    };
    if pt.scale <= 0.0 {
        return Ok(None);
    }
    let saved = ctx.inputs.clone();
    let declared = std::mem::take(&mut ctx.declared);
    let guessed = std::mem::take(&mut ctx.guessed);
    for &(i, q) in &quantized {
        ctx.inputs[i] = Some(q);
    }
    let built = builder(ctx);
    ctx.inputs = saved;
    ctx.declared = declared;
    ctx.guessed = guessed;
    let Ok(outs) = built else {
        return Ok(None);
    };
    let mut ys = Vec::new();
    for q in outs {
        if ctx.dtype(q) != pt.dtype {
            return Ok(None);
        }
        ys.push(dequantize(ctx, q, &dq)?);
    }
    Ok(Some(ys))
}

/// The parameters of a QuantizeLinear to `odt` by `scale` and `zp`: per tensor, constant,
/// a positive normal scale and a zero point of type `odt` (None otherwise).
fn quantized_to(ctx: &Ctx, scale: ValueId, zp: Option<ValueId>, odt: DType) -> Option<PerTensor> {
    if zp.is_some_and(|z| ctx.dtype(z) != odt) {
        return None;
    }
    let (scale, zp) = scalar_params(ctx, scale, zp)?;
    (scale > 0.0).then_some(PerTensor {
        scale,
        zp,
        dtype: odt,
    })
}

/// A QuantizeLinear (per tensor, to the 8-bit or 16-bit integer type `odt`) of a value the
/// import noted, rebuilt on the quantized values: the value itself where it was dequantized
/// with the same parameters (`quantize_identity`), an integer product requantizing in its
/// epilogue (`qdq_requantize`), a Concat of the parts requantized (`quantize_concat`) or the
/// integer sum kernel (`quantize_sum`). None where none applies (the float32 path then
/// quantizes).
pub fn quantize_noted(
    ctx: &mut Ctx,
    x: ValueId,
    scale: ValueId,
    zp: Option<ValueId>,
    odt: DType,
) -> Result<Option<ValueId>> {
    if let Some(q) = quantize_identity(ctx, x, scale, zp, odt) {
        return Ok(Some(q));
    }
    if let Some(y) = qdq_requantize(ctx, x, scale, zp, odt)? {
        return Ok(Some(y));
    }
    if let Some(y) = quantize_concat(ctx, x, scale, zp, odt)? {
        return Ok(Some(y));
    }
    quantize_sum(ctx, x, scale, zp, odt)
}

/// The sum this node makes of dequantized values: an Add (or a Sum of two) of two values of one shape
/// dequantized per tensor from one 8-bit type, or a Relu of such a sum.
fn sum_of(ctx: &Ctx, notes: &Notes) -> Option<Sum> {
    let input = |i: usize| ctx.inputs.get(i).copied().flatten();
    match ctx.node.op_type.as_deref()? {
        "Add" | "Sum" if ctx.num_inputs() == 2 && ctx.node.output.len() == 1 => {
            let mut parts = dequantized_parts(ctx, notes, &[0, 1])?;
            let (a, b) = (input(0)?, input(1)?);
            let same = ctx.shape(a) == ctx.shape(b)
                && crate::ir::dim::known_dims(&ctx.shape(a)).is_some()
                && parts[0].1.dtype == parts[1].1.dtype
                && parts[0].1.dtype.size() == 1;
            let b = parts.pop()?;
            let a = parts.pop()?;
            same.then_some(Sum { a, b, relu: false })
        }
        "Relu" if ctx.node.output.len() == 1 => {
            let s = notes.sums.get(&input(0)?)?;
            (!s.relu).then(|| Sum {
                relu: true,
                ..s.clone()
            })
        }
        _ => None,
    }
}

/// A QuantizeLinear (per tensor, to the operands' 8-bit type `odt`) of a sum of dequantized
/// values (`Notes::sums`): the integer sum kernel (`kernels::QAdd`), which computes the
/// float32 operations of the dequantizations, the Add, the Relu and the quantization in
/// their order, so the same bits, without the float32 tensors between them.
fn quantize_sum(
    ctx: &mut Ctx,
    x: ValueId,
    scale: ValueId,
    zp: Option<ValueId>,
    odt: DType,
) -> Result<Option<ValueId>> {
    let Some(sum) = ctx.qdq.as_deref().and_then(|n| n.sums.get(&x).cloned()) else {
        return Ok(None);
    };
    let Some(y) = quantized_to(ctx, scale, zp, odt) else {
        return Ok(None);
    };
    if odt != sum.a.1.dtype {
        return Ok(None);
    }
    let p = onnxc_runtime::qadd::QAddParams {
        sa: sum.a.1.scale,
        sb: sum.b.1.scale,
        sy: y.scale,
        za: sum.a.1.zp as f32,
        zb: sum.b.1.zp as f32,
        zy: y.zp as f32,
        signed: odt == DType::I8,
        relu: sum.relu,
    };
    let shape = ctx.shape(sum.a.0.q);
    ctx.add(
        crate::ir::graph::Op::kernel(crate::kernels::QAdd(p)),
        vec![sum.a.0.q, sum.b.0.q],
        TypeInfo::new(odt, shape),
    )
    .map(Some)
}

/// The node's data inputs `data`, each dequantized per tensor with a positive normal scale:
/// their DequantizeLinear operands and parameters (None if some input is not).
fn dequantized_parts(
    ctx: &Ctx,
    notes: &Notes,
    data: &[usize],
) -> Option<Vec<(Dequantized, PerTensor)>> {
    data.iter()
        .map(|&i| {
            let v = ctx.inputs.get(i).copied().flatten()?;
            let d = notes.dequantized.get(&v)?;
            let pt = per_tensor(ctx, d).filter(|pt| pt.scale > 0.0)?;
            Some((d.clone(), pt))
        })
        .collect()
}

/// A QuantizeLinear (per tensor, to `odt`) of a Concat of values dequantized per tensor
/// with different parameters (`Notes::concats`): the Concat of the parts quantized, each
/// `quantize(dequantize(q))` computed element by element as the float32 path computes it
/// (the quantized part itself where the parameters agree, `quantize_identity`), so the
/// result is the same bits and the data stays 8-bit. Each part's requantization is a map
/// of one 8-bit operand, which the schedule turns into a table (`schedule::lut`).
fn quantize_concat(
    ctx: &mut Ctx,
    x: ValueId,
    scale: ValueId,
    zp: Option<ValueId>,
    odt: DType,
) -> Result<Option<ValueId>> {
    use crate::ir::expr::{self, BinOp, UnOp};
    let Some((parts, axis)) = ctx.qdq.as_deref().and_then(|n| n.concats.get(&x).cloned()) else {
        return Ok(None);
    };
    let Some(pt) = quantized_to(ctx, scale, zp, odt) else {
        return Ok(None);
    };
    let Some((lo, hi)) = build::int_range(odt).filter(|_| odt.size() == 1) else {
        return Ok(None);
    };
    let mut qs = Vec::with_capacity(parts.len());
    for d in &parts {
        let Some(ptd) = per_tensor(ctx, d) else {
            return Ok(None);
        };
        if ptd == pt {
            qs.push(d.q);
            continue;
        }
        // DequantizeLinear's `(q − zp) · scale`, then QuantizeLinear's
        // `saturate(round(v / scale) + zp)`, in float32 as both builders compute them.
        let dt = ctx.dtype(d.q);
        let r = ctx.rank(d.q);
        let scalar = |v: ValueId, ctx: &Ctx| vec![expr::i(0); ctx.rank(v)];
        let mut inputs = vec![d.q, d.scale, scale];
        let mut v = expr::cast(
            expr::load(dt, 0, (0..r as u32).map(expr::var).collect()),
            DType::F32,
        );
        if let Some(z) = d.zp {
            let at = scalar(z, ctx);
            inputs.push(z);
            v = expr::binary(
                BinOp::Sub,
                v,
                expr::cast(expr::load(dt, (inputs.len() - 1) as u32, at), DType::F32),
            );
        }
        let s_in = expr::cast(expr::load(DType::F32, 1, scalar(d.scale, ctx)), DType::F32);
        v = expr::binary(BinOp::Mul, v, s_in);
        let s_out = expr::cast(expr::load(DType::F32, 2, scalar(scale, ctx)), DType::F32);
        let mut q = expr::cast(
            expr::unary(UnOp::Round, expr::binary(BinOp::Div, v, s_out)),
            DType::F32,
        );
        if let Some(z) = zp {
            let at = scalar(z, ctx);
            inputs.push(z);
            q = expr::binary(
                BinOp::Add,
                q,
                expr::cast(expr::load(odt, (inputs.len() - 1) as u32, at), DType::F32),
            );
        }
        let q = expr::binary(
            BinOp::Max,
            expr::binary(BinOp::Min, q, expr::f(DType::F32, hi)),
            expr::f(DType::F32, lo),
        );
        let shape = ctx.shape(d.q);
        qs.push(ctx.map(odt, shape, inputs, expr::cast(q, odt))?);
    }
    let shape = ctx.shape(x);
    crate::frontend::ops::shape::concat_parts(ctx, qs, axis, odt, shape).map(Some)
}

/// `(q − zp) · scale` as float32, as DequantizeLinear computes it (per tensor), noted.
fn dequantize(ctx: &mut Ctx, q: ValueId, d: &Dequantized) -> Result<ValueId> {
    use crate::ir::expr::{self, BinOp};
    let dt = ctx.dtype(q);
    let r = ctx.rank(q) as u32;
    let at = |v: ValueId, ctx: &Ctx| vec![expr::i(0); ctx.rank(v)];
    let mut inputs = vec![q, d.scale];
    let mut v = expr::cast(
        expr::load(dt, 0, (0..r).map(expr::var).collect()),
        DType::F32,
    );
    if let Some(z) = d.zp {
        inputs.push(z);
        v = expr::binary(
            BinOp::Sub,
            v,
            expr::cast(expr::load(dt, 2, at(z, ctx)), DType::F32),
        );
    }
    let s = expr::cast(
        expr::load(ctx.dtype(d.scale), 1, at(d.scale, ctx)),
        DType::F32,
    );
    let shape = ctx.shape(q);
    let y = ctx.map(DType::F32, shape, inputs, expr::binary(BinOp::Mul, v, s))?;
    note_dequantized(ctx, y, q, d.scale, d.zp, 0);
    Ok(y)
}

/// A QuantizeLinear of a value dequantized with the same per-tensor parameters (to `odt`):
/// the quantized value itself (`round((q − z)·s / s) + z = q` for a normal `s` and 8- or
/// 16-bit `q`).
fn quantize_identity(
    ctx: &mut Ctx,
    x: ValueId,
    scale: ValueId,
    zp: Option<ValueId>,
    odt: DType,
) -> Option<ValueId> {
    let d = ctx.qdq.as_deref()?.dequantized.get(&x)?.clone();
    let pt = per_tensor(ctx, &d)?;
    let q = per_tensor(
        ctx,
        &Dequantized {
            q: d.q,
            scale,
            zp,
            axis: 0,
        },
    )?;
    (pt == q && pt.dtype == odt && zp.is_none_or(|z| ctx.dtype(z) == odt)).then_some(d.q)
}

/// A constant's values, when it is one.
fn values(ctx: &Ctx, v: Option<ValueId>) -> Option<Option<Tensor>> {
    match v {
        None => Some(None),
        Some(v) => ctx.konst(v).map(Some),
    }
}

/// A constant scalar (one element) as i64, 0 when absent.
fn scalar_int(t: &Option<Tensor>) -> Option<i64> {
    match t {
        None => Some(0),
        Some(t) if t.len() == 1 && t.dtype.is_int() => Some(t.to_i64s()[0]),
        _ => None,
    }
}

/// A float32 scalar constant.
fn scalar_f32(t: &Tensor) -> Option<f32> {
    (t.dtype == DType::F32 && t.len() == 1).then(|| t.to_f64s()[0] as f32)
}
