//! Bare quantizing and dequantizing maps as runtime kernels.
//!
//! A QDQ model leaves QuantizeLinear and DequantizeLinear maps between its integer kernels
//! where no integer kernel takes the operation (around depthwise convolutions, at the
//! model's inputs and outputs). Generated code runs them four lanes wide with a conversion
//! between bytes and floats on every element; the runtime's kernels
//! (`kernels::Quantize8`, `kernels::Dequantize8`) run the same float32 operations at the
//! CPU's widest vectors. A map step becomes the kernel only when its body is exactly one of
//! them: an element-for-element read of a whole tensor, a constant scalar scale and zero
//! point, the type's full clamp; anything fused into it keeps the map.
//!
//! DynamicQuantizeLinear's quantizing map computes its scale and zero point from the
//! tensor's minimum and maximum, the same scalar expressions for every element: they move
//! to a two-element map step of their own, which the `Quantize8Dyn` kernel reads.

use super::{SValue, Schedule, Step, StepKind, Storage, SvId};
use crate::ir::DType;
use crate::ir::expr::{self, BinOp, E, ExprKind, UnOp};
use std::sync::Arc;

/// Turns every bare quantizing or dequantizing map step into its kernel.
pub fn to_kernels(s: &mut Schedule) {
    let mut dynamic = Vec::new();
    for i in 0..s.steps.len() {
        let st = &s.steps[i];
        let StepKind::Map { body } = &st.kind else {
            continue;
        };
        if st.epilogue.is_some() {
            continue;
        }
        let kernel: Option<(SvId, Arc<dyn crate::kernels::KernelOp>)> =
            match s.values[st.output].dtype {
                DType::U8 | DType::I8 => quantize(s, i, body).map(|(x, k)| (x, Arc::new(k) as _)),
                DType::F32 => dequantize(s, i, body).map(|(x, k)| (x, Arc::new(k) as _)),
                _ => None,
            };
        if let Some((x, op)) = kernel {
            let st = &mut s.steps[i];
            st.inputs = vec![x];
            st.kind = StepKind::Kernel(op);
        } else if let Some(d) = quantize_dynamic(s, i, body) {
            dynamic.push((i, d));
        }
    }
    // From the last, so that each insertion leaves the earlier indices as they are.
    for (i, (x, scale, zp, signed)) in dynamic.into_iter().rev() {
        let sz = s.values.len();
        s.values.push(SValue {
            name: format!("{}/scale_zero_point", s.values[s.steps[i].output].name),
            dtype: DType::F32,
            shape: vec![2],
            storage: Storage::Arena(0),
        });
        let first = expr::binary(BinOp::Eq, expr::var(0), expr::i(0));
        let scalars = Step {
            kind: StepKind::Map {
                body: expr::select(first, scale, zp),
            },
            inputs: s.steps[i].inputs.clone(),
            output: sz,
            epilogue: None,
            origins: s.steps[i].origins.clone(),
        };
        let st = &mut s.steps[i];
        st.inputs = vec![x, sz];
        st.kind = StepKind::Kernel(Arc::new(crate::kernels::Quantize8Dyn { signed }));
        s.steps.insert(i, scalars);
    }
}

/// A quantizing map whose scale and zero point are float32 expressions of scalars alone
/// (read at index 0 of one-element operands): the tensor read, the two expressions and
/// whether the result is int8.
fn quantize_dynamic(s: &Schedule, i: usize, body: &E) -> Option<(SvId, E, E, bool)> {
    let (x, scale, zp, signed) = quantize_parts(s, i, body)?;
    let zp = zp?;
    let scalar = |e: &E| e.dtype == DType::F32 && of_scalars(s, i, e);
    (scalar(scale) && scalar(zp)).then(|| (x, scale.clone(), zp.clone(), signed))
}

/// Whether `e` reads nothing but one-element operands at index 0 and constants.
fn of_scalars(s: &Schedule, i: usize, e: &E) -> bool {
    match &e.kind {
        ExprKind::Var(_) | ExprKind::CheckIndex { .. } => false,
        ExprKind::Const(_) => true,
        ExprKind::Load { .. } => scalar_operand(s, i, e).is_some(),
        _ => e.children().into_iter().all(|c| of_scalars(s, i, c)),
    }
}

/// The one-element operand that `e` reads at index 0 (all its indices constant zeros).
fn scalar_operand(s: &Schedule, i: usize, e: &E) -> Option<SvId> {
    let ExprKind::Load { input, index } = &e.kind else {
        return None;
    };
    let at_zero = index
        .iter()
        .all(|x| x.as_const().is_some_and(|k| k.as_f64() == 0.0));
    let v = *s.steps[i].inputs.get(*input as usize)?;
    (at_zero && s.values[v].len() == 1).then_some(v)
}

/// The parts of a quantizing map `cast<u8|i8>(max(min(add(round(div(x, s)), zp), hi), lo))`
/// (the add absent for a zero point of 0), `x` read whole and `s` float32: the tensor read,
/// the scale and zero point expressions, and whether the result is int8.
fn quantize_parts<'e>(
    s: &Schedule,
    i: usize,
    body: &'e E,
) -> Option<(SvId, &'e E, Option<&'e E>, bool)> {
    let out = s.values[s.steps[i].output].dtype;
    let (lo, hi) = match out {
        DType::U8 => (0.0, 255.0),
        DType::I8 => (-128.0, 127.0),
        _ => return None,
    };
    let ExprKind::Cast(v) = &body.kind else {
        return None;
    };
    let v = clamp(v, BinOp::Max, lo)?;
    let v = clamp(v, BinOp::Min, hi)?;
    let (rounded, zp) = match &v.kind {
        ExprKind::Binary(BinOp::Add, a, b) => (a, Some(b)),
        _ => (v, None),
    };
    let ExprKind::Unary(UnOp::Round, q) = &rounded.kind else {
        return None;
    };
    let ExprKind::Binary(BinOp::Div, x, scale) = &q.kind else {
        return None;
    };
    if scale.dtype != DType::F32 {
        return None;
    }
    Some((whole(s, i, x, DType::F32)?, scale, zp, out == DType::I8))
}

/// A quantizing map with a constant scalar scale and zero point: the tensor read and the
/// kernel.
fn quantize(s: &Schedule, i: usize, body: &E) -> Option<(SvId, crate::kernels::Quantize8)> {
    let (x, scale, zp, signed) = quantize_parts(s, i, body)?;
    let zp = match zp {
        Some(z) => integral(s, i, z)?,
        None => 0,
    };
    let scale = scalar(s, i, scale)? as f32;
    Some((x, crate::kernels::Quantize8 { scale, zp, signed }))
}

/// `mul(sub(cast<f32>(x), zp), s)` (either order of the product; the subtraction absent for
/// a zero point of 0), `x` uint8 or int8, or `sub(cast<f32>(x), zp)` alone (QLinearConv's
/// centered operand: a scale of 1, exact): the tensor read and the kernel.
fn dequantize(s: &Schedule, i: usize, body: &E) -> Option<(SvId, crate::kernels::Dequantize8)> {
    if body.dtype != DType::F32 {
        return None;
    }
    let (centered, scale) = match &body.kind {
        ExprKind::Binary(BinOp::Mul, a, b) => match (scalar(s, i, b), scalar(s, i, a)) {
            (Some(c), _) => (a, c),
            (None, Some(c)) => (b, c),
            _ => return None,
        },
        ExprKind::Binary(BinOp::Sub, ..) => (body, 1.0),
        _ => return None,
    };
    let (widened, zp) = match &centered.kind {
        ExprKind::Binary(BinOp::Sub, w, z) => (w, integral(s, i, z)?),
        _ => (centered, 0),
    };
    let ExprKind::Cast(x) = &widened.kind else {
        return None;
    };
    let signed = match x.dtype {
        DType::U8 => false,
        DType::I8 => true,
        _ => return None,
    };
    if widened.dtype != DType::F32 {
        return None;
    }
    let x = whole(s, i, x, x.dtype)?;
    Some((
        x,
        crate::kernels::Dequantize8 {
            scale: scale as f32,
            zp,
            signed,
        },
    ))
}

/// The other operand of `max(v, c)` / `min(v, c)` (either order) for the float32
/// constant `c`.
fn clamp(e: &E, op: BinOp, c: f64) -> Option<&E> {
    let ExprKind::Binary(o, a, b) = &e.kind else {
        return None;
    };
    if *o != op || e.dtype != DType::F32 {
        return None;
    }
    let is_c = |x: &E| x.as_const().is_some_and(|k| k.as_f64() == c);
    if is_c(b) {
        Some(a)
    } else if is_c(a) {
        Some(b)
    } else {
        None
    }
}

/// A float32 zero point: a constant holding an integer, or an 8-bit constant scalar widened
/// to float32.
fn integral(s: &Schedule, i: usize, e: &E) -> Option<i64> {
    if e.dtype != DType::F32 {
        return None;
    }
    let v = match &e.kind {
        ExprKind::Cast(z) if matches!(z.dtype, DType::U8 | DType::I8) => scalar(s, i, z)?,
        _ => scalar(s, i, e)?,
    };
    (v.fract() == 0.0 && v.abs() <= 255.0).then_some(v as i64)
}

/// The value of a constant scalar of `e`'s type: a literal, or a read of a one-element
/// constant operand.
fn scalar(s: &Schedule, i: usize, e: &E) -> Option<f64> {
    if let Some(c) = e.as_const() {
        return Some(c.as_f64());
    }
    match &s.values[scalar_operand(s, i, e)?].storage {
        Storage::Const(t) if t.dtype == e.dtype => Some(t.get(0).as_f64()),
        _ => None,
    }
}

/// The operand `e` reads element for element over the whole output (`x[v0, v1, …]` of a
/// value of the output's shape and type `dtype`).
fn whole(s: &Schedule, i: usize, e: &E, dtype: DType) -> Option<SvId> {
    let ExprKind::Load { input, index } = &e.kind else {
        return None;
    };
    let st = &s.steps[i];
    let x = *st.inputs.get(*input as usize)?;
    let out = &s.values[st.output];
    let identity = index.len() == out.shape.len()
        && index
            .iter()
            .enumerate()
            .all(|(d, e)| matches!(e.kind, ExprKind::Var(v) if v as usize == d));
    (identity && e.dtype == dtype && s.values[x].dtype == dtype && s.values[x].shape == out.shape)
        .then_some(x)
}
